// ir::splitUniform: which pointer tiles are a uniform base plus offsets of
// a proven range (what AMDGPU's buffer accesses need), and which are not.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tessera/ir/Parser.h"
#include "tessera/ir/analysis/UniformSplit.h"

using namespace tessera::ir;

namespace {

// A kernel whose op `%p` feeds a load: `body` defines it from the
// arguments %a (f32 pointer), %n, %s (i32) and %q (f16 pointer).
std::optional<UniformSplit> splitOf(const std::string& body, std::string* names = nullptr) {
  static std::vector<std::unique_ptr<Module>> keep;  // the result names the module's values
  std::string text =
      "kernel @t(%a: ptr<f32, global>, %n: i32, %s: i32, %q: ptr<f16, global>) {\n" + body + "  return()\n}\n";
  keep.push_back(parseModule(text, "split.tir"));
  const Function& f = *keep.back()->functions.at(0);
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::Load) {
      std::optional<UniformSplit> s = splitUniform(op->operand(0));
      if (s && names) {
        *names = s->base ? s->base->nameHint : "-";
        for (auto [v, c] : s->terms)
          *names += " " + std::to_string(c) + "*" + (v->nameHint.empty() ? "(op)" : v->nameHint);
      }
      return s;
    }
  FAIL("no load");
  return std::nullopt;
}

const char* kBlock =
    "  %pid = program_id() {axis = 0} : i32\n"
    "  %c64 = constant() {value = 64} : i32\n"
    "  %start = mul(%pid, %c64) : i32\n"
    "  %st = splat(%start) : tile<64xi32>\n"
    "  %r = arange() {end = 64, start = 0} : tile<64xi32>\n";

std::string loadF32(const std::string& offsets) {
  return "  %sa = splat(%a) : tile<64xptr<f32, global>>\n"
         "  %p = ptr_add(%sa, " +
         offsets + ") : tile<64xptr<f32, global>>\n  %ld = load(%p) : tile<64xf32>\n";
}

}  // namespace

TEST_CASE("uniform split: a block of a vector, with the block start in either operand", "[ir]") {
  for (bool startFirst : {false, true}) {
    std::string body = std::string(kBlock) +
                       (startFirst ? "  %o = add(%st, %r) : tile<64xi32>\n" : "  %o = add(%r, %st) : tile<64xi32>\n") +
                       loadF32("%o");
    std::string names;
    auto s = splitOf(body, &names);
    REQUIRE(s);
    CHECK(names == "a 1*(op)");  // the base %a, the term %start
    CHECK(s->constant == 0);
    CHECK(s->lo == 0);
    CHECK(s->hi == 63);
  }
}

TEST_CASE("uniform split: a row at a runtime stride off a scalar pointer, and constants", "[ir]") {
  // q + s*n (a scalar ptr_add: uniform) + (arange + 3) * 2 - 1: base q,
  // term s*n, constant 5, range [0, 126].
  std::string body =
      "  %sn = mul(%s, %n) : i32\n"
      "  %row = ptr_add(%q, %sn) : ptr<f16, global>\n"
      "  %r = arange() {end = 64, start = 0} : tile<64xi32>\n"
      "  %c3 = constant() {value = 3} : tile<64xi32>\n"
      "  %r3 = add(%r, %c3) : tile<64xi32>\n"
      "  %two = constant() {value = 2} : i32\n"
      "  %two_t = splat(%two) : tile<64xi32>\n"
      "  %r6 = mul(%two_t, %r3) : tile<64xi32>\n"
      "  %one = constant() {value = 1} : tile<64xi32>\n"
      "  %o = sub(%r6, %one) : tile<64xi32>\n"
      "  %sr = splat(%row) : tile<64xptr<f16, global>>\n"
      "  %p = ptr_add(%sr, %o) : tile<64xptr<f16, global>>\n"
      "  %ld = load(%p) : tile<64xf16>\n";
  std::string names;
  auto s = splitOf(body, &names);
  REQUIRE(s);
  CHECK(names == "q 1*(op)");
  CHECK(s->constant == 5);
  CHECK(s->lo == 0);
  CHECK(s->hi == 126);
}

TEST_CASE("uniform split: ranges of rem, div and and by constants", "[ir]") {
  const char* cases[][3] = {{"rem", "16", "15"}, {"div", "16", "3"}, {"and", "7", "7"}, {"shr", "2", "15"}};
  for (auto& c : cases) {
    INFO(c[0]);
    std::string body = std::string(kBlock) + "  %k = constant() {value = " + c[1] +
                       "} : tile<64xi32>\n"
                       "  %v = " +
                       c[0] + "(%r, %k) : tile<64xi32>\n  %o = add(%v, %st) : tile<64xi32>\n" + loadF32("%o");
    auto s = splitOf(body);
    REQUIRE(s);
    CHECK(s->lo == 0);
    CHECK(s->hi == std::stoll(c[2]));
    CHECK(s->terms.size() == 1);
  }
}

TEST_CASE("uniform split: what is not a uniform base plus a known range", "[ir]") {
  // Offsets scaled by a runtime stride: their range is unknown.
  CHECK_FALSE(splitOf(std::string(kBlock) + "  %sn = splat(%n) : tile<64xi32>\n  %o = mul(%r, %sn) : tile<64xi32>\n" +
                      loadF32("%o")));
  // A rem of a value with a uniform part (of unknown sign).
  CHECK_FALSE(splitOf(std::string(kBlock) +
                      "  %k = constant() {value = 16} : tile<64xi32>\n  %x = add(%r, %st) : tile<64xi32>\n"
                      "  %o = rem(%x, %k) : tile<64xi32>\n" +
                      loadF32("%o")));
  // Offsets through an op the split does not model.
  CHECK_FALSE(splitOf(std::string(kBlock) + "  %sn = splat(%n) : tile<64xi32>\n  %o = max(%r, %sn) : tile<64xi32>\n" +
                      loadF32("%o")));
  // A reversed block: a known range, but below zero (the lowering declines it).
  auto s = splitOf(std::string(kBlock) +
                   "  %z = constant() {value = 0} : tile<64xi32>\n  %o = sub(%z, %r) : tile<64xi32>\n" + loadF32("%o"));
  REQUIRE(s);
  CHECK(s->lo == -63);
  CHECK(s->hi == 0);
}
