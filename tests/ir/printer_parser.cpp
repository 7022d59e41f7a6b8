// Printer and parser: round trips, exact golden text, error positions, and a
// mutation fuzz that must only ever produce ParseError.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "IrTestKernels.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::ir::testk;

namespace {

std::vector<std::pair<const char*, std::unique_ptr<Function> (*)()>> allKernels() {
  return {{"softmax", softmax},      {"loop", loopKernel},   {"if", ifKernel}, {"shared_dot", sharedDotKernel},
          {"atomics", atomicKernel}, {"dtypes", dtypeKernel}};
}

std::string reprint(const std::string& text, const PrintOptions& o = {}) {
  auto m = parseModule(text, "roundtrip.tir");
  verify(*m);
  return print(*m, o);
}

std::string parseErrorOf(const std::string& text) {
  try {
    parseModule(text, "bad.tir");
  } catch (const ParseError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("built kernels verify and print -> parse -> print is a fixed point", "[ir][printer][parser]") {
  for (auto& [name, make] : allKernels()) {
    INFO(name);
    auto f = make();
    REQUIRE_NOTHROW(verify(*f));
    std::string once = print(*f);
    std::string twice = reprint(once);
    CHECK(once == twice);
    CHECK(reprint(twice) == twice);
    // Without locations too.
    PrintOptions noloc;
    noloc.locations = false;
    std::string bare = print(*f, noloc);
    CHECK(bare.find("loc(\"") == std::string::npos);
    CHECK(reprint(bare, noloc) == bare);
    // A deep copy prints identically.
    CHECK(print(*clone(*f)) == once);
  }
}

TEST_CASE("the printed form carries the structure the builder made", "[ir][printer]") {
  std::string loop = print(*loopKernel());
  CHECK(loop.find("  %4:2 = for(%0, %n, %1, %2, %3) : tile<16xf32>, f32 loc(\"kern.cpp\":11:5) {\n"
                  "  ^(%6: i32, %7: tile<16xf32>, %8: f32):\n") != std::string::npos);
  CHECK(loop.find("  store(%p, %5) loc(") != std::string::npos);  // the second result of the for
  std::string br = print(*ifKernel());
  CHECK(br.find("} else {") != std::string::npos);
  CHECK(br.find(" : tile<8xi64>, i64 loc(\"kern.cpp\":21:5) {") != std::string::npos);
  std::string sd = print(*sharedDotKernel());
  CHECK(sd.find("alloc() : buffer<shared, 16x16xf16>") != std::string::npos);
  CHECK(sd.find("barrier() loc(") != std::string::npos);
  std::string sm = print(*softmax());
  CHECK(sm.find("{value = -inf} : tile<128xf32>") != std::string::npos);
  CHECK(sm.find("%in: ptr<f32, global> {divisibility = 16}") != std::string::npos);
}

TEST_CASE("float attributes round-trip bit-exactly", "[ir][printer][parser]") {
  const double values[] = {0.1,
                           -0.0,
                           0.0,
                           1.0 / 3.0,
                           5e-324,
                           1.7976931348623157e308,
                           -2.5,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  for (double v : values) {
    auto f = std::make_unique<Function>("k", Location{});
    Value* p = f->addArgument(gptr(DType::F64), "p");
    Builder b(&f->body());
    b.store(p, b.constant(Type::scalar(DType::F64), v));
    b.ret();
    auto m = parseModule(print(*f));
    const Op& c = *m->functions[0]->body().ops()[0];
    double got = c.floatAttr("value");
    CHECK(std::memcmp(&got, &v, sizeof v) == 0);
  }
  // NaN keeps NaN-ness and sign; decimal and spelled forms parse.
  auto m = parseModule(R"(kernel @k() {
    %0 = constant() {value = nan} : f32
    %1 = constant() {value = -nan} : f32
    %2 = constant() {value = 1.5e3} : f32
    %3 = constant() {value = -0x1.8p+1} : f32
    %4 = constant() {value = -inf} : f32
    return()
  })");
  auto& ops = m->functions[0]->body().ops();
  CHECK(std::isnan(ops[0]->floatAttr("value")));
  CHECK(std::signbit(ops[1]->floatAttr("value")));
  CHECK(ops[2]->floatAttr("value") == 1500.0);
  CHECK(ops[3]->floatAttr("value") == -3.0);
  CHECK(ops[4]->floatAttr("value") == -std::numeric_limits<double>::infinity());
}

TEST_CASE("golden printer text for a small kernel", "[ir][printer]") {
  auto f = std::make_unique<Function>("axpy", Location{"axpy.cpp", 3, 1});
  Value* x = f->addArgument(gptr(DType::F32), "x");
  f->argAttrs().back()["divisibility"] = int64_t{16};
  Value* y = f->addArgument(gptr(DType::F32), "y");
  Value* n = f->addArgument(i32(), "n");
  Value* dup = f->addArgument(i32(), "dup.1");  // sanitized to dup_1
  Value* a = f->addArgument(f32(), "a");
  f->addArgument(f32(), "a");  // a second "a": both numbered
  (void)dup;
  Builder b(&f->body());
  b.setLoc({"axpy.cpp", 4, 12});
  Value* pid = b.programId(0);
  Value* c64 = b.constant(i32(), int64_t{64});
  Value* start = b.splat(b.binary(OpCode::Mul, pid, c64), {64});
  Value* offs = b.binary(OpCode::Add, start, b.arange(0, 64));
  b.setLoc({});
  Value* mask = b.cmp("lt", offs, b.splat(n, {64}));
  Value* xv = b.load(b.ptrAdd(b.splat(x, {64}), offs), mask);
  b.setLoc({"dir/my \"file\".cpp", 7, 3});
  Value* yp = b.ptrAdd(b.splat(y, {64}), offs);
  Value* ax = b.binary(OpCode::Mul, b.splat(a, {64}), xv);
  b.store(yp, b.binary(OpCode::Add, ax, b.load(yp, mask)), mask);
  b.ret();
  const char* golden =
      "kernel @axpy(%x: ptr<f32, global> {divisibility = 16}, %y: ptr<f32, global>, %n: i32, %dup_1: i32, "
      "%0: f32, %1: f32) loc(\"axpy.cpp\":3:1) {\n"
      "  %2 = program_id() {axis = 0} : i32 loc(\"axpy.cpp\":4:12)\n"
      "  %3 = constant() {value = 64} : i32 loc(\"axpy.cpp\":4:12)\n"
      "  %4 = mul(%2, %3) : i32 loc(\"axpy.cpp\":4:12)\n"
      "  %5 = splat(%4) : tile<64xi32> loc(\"axpy.cpp\":4:12)\n"
      "  %6 = arange() {end = 64, start = 0} : tile<64xi32> loc(\"axpy.cpp\":4:12)\n"
      "  %7 = add(%5, %6) : tile<64xi32> loc(\"axpy.cpp\":4:12)\n"
      "  %8 = splat(%n) : tile<64xi32>\n"
      "  %9 = cmp(%7, %8) {pred = lt} : tile<64xi1>\n"
      "  %10 = splat(%x) : tile<64xptr<f32, global>>\n"
      "  %11 = ptr_add(%10, %7) : tile<64xptr<f32, global>>\n"
      "  %12 = load(%11, %9) : tile<64xf32>\n"
      "  %13 = splat(%y) : tile<64xptr<f32, global>> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  %14 = ptr_add(%13, %7) : tile<64xptr<f32, global>> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  %15 = splat(%0) : tile<64xf32> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  %16 = mul(%15, %12) : tile<64xf32> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  %17 = load(%14, %9) : tile<64xf32> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  %18 = add(%16, %17) : tile<64xf32> loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  store(%14, %18, %9) loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "  return() loc(\"dir/my \\\"file\\\".cpp\":7:3)\n"
      "}\n";
  CHECK(print(*f) == golden);
  CHECK(reprint(golden) == golden);
  // Argument names survive a round trip; numbered arguments stay unnamed.
  auto m = parseModule(golden);
  CHECK(m->functions[0]->arg(0)->nameHint == "x");
  CHECK(m->functions[0]->arg(4)->nameHint.empty());

  // Attribute spelling: sorted keys, bare identifiers, quoted strings, lists.
  auto g = std::make_unique<Function>("attrs", Location{});
  Builder gb(&g->body());
  gb.create(OpCode::Barrier, {}, {},
            {{"zeta", std::string("two words")},
             {"alpha", std::vector<int64_t>{1, 0}},
             {"mid", std::string("ident_1")},
             {"nan_str", std::string("nan")},
             {"empty", std::vector<int64_t>{}},
             {"f", 1.0}});
  gb.ret();
  const char* goldenAttrs =
      "kernel @attrs() {\n"
      "  barrier() {alpha = [1, 0], empty = [], f = 0x1p+0, mid = ident_1, nan_str = \"nan\", zeta = \"two words\"}\n"
      "  return()\n"
      "}\n";
  CHECK(print(*g) == goldenAttrs);
  auto pm = parseModule(goldenAttrs);
  CHECK(print(*pm) == goldenAttrs);
  CHECK(std::get<std::string>(pm->functions[0]->body().ops()[0]->attrs().at("nan_str")) == "nan");
}

TEST_CASE("several kernels per file, comments, and module printing", "[ir][parser]") {
  std::string text =
      "// two kernels\n"
      "kernel @a(%p: ptr<i32, global>) {  // trailing comment\n"
      "  %0 = constant() {value = 7} : i32\n"
      "  store(%p, %0)\n"
      "  return()\n"
      "}\n"
      "kernel @b() {\n"
      "  return()\n"
      "}\n";
  auto m = parseModule(text);
  REQUIRE(m->functions.size() == 2);
  CHECK(m->lookup("a") != nullptr);
  CHECK(m->lookup("b")->body().ops().size() == 1);
  std::string printed = print(*m);
  CHECK(print(*parseModule(printed)) == printed);
  CHECK(parseModule("  // nothing\n")->functions.empty());
}

TEST_CASE("parse errors name the buffer, line and column", "[ir][parser]") {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"kernel @k() {\n  %0 = frobnicate() : i32\n  return()\n}", "bad.tir:2:8: unknown op name 'frobnicate'"},
      {"kernel @k() {\n  %0 = constant() {value = 1} : i33\n  return()\n}", "bad.tir:2:33: unknown type 'i33'"},
      {"kernel @k() {\n  %0 = neg(%7) : i32\n  return()\n}", "bad.tir:2:12: use of undefined value %7"},
      {"kernel @k() {\n  %0 = constant() {value = 1} : i32\n  %0 = constant() {value = 2} : i32\n  return()\n}",
       "bad.tir:3:3: redefinition of value %0"},
      {"kernel @k() {\n  %0:2 = constant() {value = 1} : i32\n  return()\n}", "bad.tir:2:3: wrong result count"},
      {"kernel @k() {\n  %0 = barrier()\n  return()\n}", "bad.tir:2:3: wrong result count"},
      {"kernel @k(%p: ptr<f32, device>) {\n  return()\n}", "bad.tir:1:24: unknown memory space 'device'"},
      {"kernel @k() {\n  %0 = constant() {value = 1} : tile<4x>\n  return()\n}",
       "bad.tir:2:40: expected an element type, found '>'"},
      {"kernel @k() {\n  return()\n", "bad.tir:3:1: unexpected end of input"},
      {"kernel @k() {\n  %0 = constant() {value = 0x1.8} : f32\n  return()\n}", "bad.tir:2:28: malformed hex float"},
      {"kernel @k() {\n  return() loc(\"f.cpp\":1)\n}", "bad.tir:2:25: expected ':' after the line number, found ')'"},
      {"kernel @k() {\n  return() loc(\"f.cpp:1:1)\n}", "bad.tir:2:16: unterminated string"},
      {"kernel @k() {\n  %0 = constant() {value = 1, value = 2} : i32\n  return()\n}",
       "bad.tir:2:31: duplicate attribute 'value'"},
      {"func @k() {}", "bad.tir:1:1: expected 'kernel'"},
      {"kernel @k() {\n  %0 = constant() {value = 1} : i32\n  %1 = if(%0) : i32 {\n    yield(%0)\n  }\n  return()\n}",
       "bad.tir:6:3: expected 'else'"},
      {"kernel @k() {\n  %0 = constant() {value = 1} : i32\n  %1:2 = for(%0, %0, %0, %0, %0) : i32, i32 {\n  ^(%3: "
       "i32, %4: i32, %5: i32):\n    yield(%4, %5)\n  }\n  %6 = add(%4, %4) : i32\n  return()\n}",
       "bad.tir:7:12: use of undefined value %4"},
      {"kernel @k() {}\nkernel @k() {}", "bad.tir:2:1: redefinition of kernel @k"},
      {"kernel @k() {\n  %0 = constant() {value = 99999999999999999999} : i64\n  return()\n}",
       "bad.tir:2:28: integer literal"},
      {"kernel @k() {\n  barrier() $\n}", "bad.tir:2:13: unexpected character '$'"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    std::string msg = parseErrorOf(c.text);
    CHECK_THAT(msg, Catch::Matchers::StartsWith(c.expect));
  }
}

TEST_CASE("mutated and truncated IR text only ever raises ParseError", "[ir][parser][fuzz]") {
  std::vector<std::string> seeds;
  for (auto& [name, make] : allKernels()) seeds.push_back(print(*make()));
  std::mt19937 rng(12345);
  const std::string alphabet = "%@(){}[]<>,:=^-\"x0123456789abcdefinptrlocforelse \n/.";
  int parsed = 0, rejected = 0, verifiedOk = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string s = seeds[static_cast<size_t>(iter) % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 6) {
        case 0: s.resize(pos); break;                                        // truncate
        case 1: s.erase(pos, 1 + rng() % 8); break;                          // delete a span
        case 2: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;  // insert a char
        case 3: s[pos] = alphabet[rng() % alphabet.size()]; break;           // replace a char
        case 4: s[pos] = static_cast<char>(rng() % 256); break;              // any byte
        case 5: {                                                            // duplicate a span
          size_t from = rng() % s.size();
          s.insert(pos, s.substr(from, 1 + rng() % 20));
          break;
        }
      }
    }
    INFO(s);
    try {
      auto m = parseModule(s, "fuzz.tir");
      ++parsed;
      // Whatever parses must print, and either verify or be rejected by
      // the verifier; valid IR must survive the default pipeline.
      std::string p = print(*m);
      try {
        verify(*m);
        ++verifiedOk;
        CHECK(print(*parseModule(p)) == p);
        for (auto& f : m->functions) {
          PassManager pm;
          addDefaultPasses(pm);
          pm.run(*f);
        }
      } catch (const VerifyError&) {
      }
    } catch (const ParseError& e) {
      ++rejected;
      CHECK_THAT(e.what(), Catch::Matchers::StartsWith("fuzz.tir:"));
    }
    // Any other exception escapes and fails the test case.
  }
  CHECK(rejected > 1000);
  CHECK(parsed > 10);
  CHECK(verifiedOk > 0);
}
