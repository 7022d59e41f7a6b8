// Tracing produces the expected IR, op for op. Ops whose order would depend
// on C++'s unspecified argument evaluation order are sequenced as separate
// statements.
#include "dsl_test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using dsltest::irText;

TEST_CASE("vector_add traces to masked loads, an add and a masked store", "[dsl][trace]") {
  const int BLOCK = 8;
  auto k = ts::kernel("vadd", {"out", "a", "b", "n"},
                      [=](ts::Ptr<float> out, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int n) {
                        auto pid = ts::program_id(0);
                        auto lanes = ts::arange(BLOCK);
                        auto offs = pid * BLOCK + lanes;
                        auto mask = offs < n;
                        auto x = ts::load(a + offs, mask);
                        auto y = ts::load(b + offs, mask);
                        auto sum = x + y;
                        ts::store(out + offs, sum, mask);
                      });
  CHECK(irText(k) == R"(kernel @vadd(%out: ptr<f32, global>, %a: ptr<f32, global>, %b: ptr<f32, global>, %n: i32) {
  %0 = program_id() {axis = 0} : i32
  %1 = arange() {end = 8, start = 0} : tile<8xi32>
  %2 = constant() {value = 8} : i32
  %3 = mul(%0, %2) : i32
  %4 = splat(%3) : tile<8xi32>
  %5 = add(%4, %1) : tile<8xi32>
  %6 = splat(%n) : tile<8xi32>
  %7 = cmp(%5, %6) {pred = lt} : tile<8xi1>
  %8 = splat(%a) : tile<8xptr<f32, global>>
  %9 = ptr_add(%8, %5) : tile<8xptr<f32, global>>
  %10 = load(%9, %7) : tile<8xf32>
  %11 = splat(%b) : tile<8xptr<f32, global>>
  %12 = ptr_add(%11, %5) : tile<8xptr<f32, global>>
  %13 = load(%12, %7) : tile<8xf32>
  %14 = add(%10, %13) : tile<8xf32>
  %15 = splat(%out) : tile<8xptr<f32, global>>
  %16 = ptr_add(%15, %5) : tile<8xptr<f32, global>>
  store(%16, %14, %7)
  return()
}
)");
}

TEST_CASE("unnamed parameters print as arg0, arg1, ...", "[dsl][trace]") {
  auto k = ts::kernel("unnamed", [](ts::Ptr<double> p, ts::Long n, ts::Float f, ts::Double d) { ts::store(p, d); });
  CHECK(irText(k) == R"(kernel @unnamed(%arg0: ptr<f64, global>, %arg1: i64, %arg2: f32, %arg3: f64) {
  store(%arg0, %arg3)
  return()
}
)");
}

TEST_CASE("numpy-style broadcasting: splat, leading dims, size-1 stretch", "[dsl][trace][broadcast]") {
  auto k = ts::kernel("bcast", {"out", "x", "bias"},
                      [](ts::Ptr<float> out, ts::Ptr<const float> x, ts::Ptr<const float> bias) {
                        auto r = ts::arange(4);
                        auto c = ts::arange(8);
                        auto rr = ts::expand_dims(r, 1);  // [4,1]
                        auto cc = ts::expand_dims(c, 0);  // [1,8]
                        auto offs = rr * 8 + cc;          // [4,1]*lit -> [4,1]; + [1,8] -> [4,8]
                        auto v = ts::load(x + offs);      // ptr splat to [4,8]
                        auto b = ts::load(bias + c);      // [8]
                        auto y = v + b;                   // [8] -> [1,8] -> [4,8]
                        ts::store(out + offs, y);
                      });
  CHECK(irText(k) == R"(kernel @bcast(%out: ptr<f32, global>, %x: ptr<f32, global>, %bias: ptr<f32, global>) {
  %0 = arange() {end = 4, start = 0} : tile<4xi32>
  %1 = arange() {end = 8, start = 0} : tile<8xi32>
  %2 = expand_dims(%0) {axis = 1} : tile<4x1xi32>
  %3 = expand_dims(%1) {axis = 0} : tile<1x8xi32>
  %4 = constant() {value = 8} : tile<4x1xi32>
  %5 = mul(%2, %4) : tile<4x1xi32>
  %6 = broadcast(%5) : tile<4x8xi32>
  %7 = broadcast(%3) : tile<4x8xi32>
  %8 = add(%6, %7) : tile<4x8xi32>
  %9 = splat(%x) : tile<4x8xptr<f32, global>>
  %10 = ptr_add(%9, %8) : tile<4x8xptr<f32, global>>
  %11 = load(%10) : tile<4x8xf32>
  %12 = splat(%bias) : tile<8xptr<f32, global>>
  %13 = ptr_add(%12, %1) : tile<8xptr<f32, global>>
  %14 = load(%13) : tile<8xf32>
  %15 = expand_dims(%14) {axis = 0} : tile<1x8xf32>
  %16 = broadcast(%15) : tile<4x8xf32>
  %17 = add(%11, %16) : tile<4x8xf32>
  %18 = splat(%out) : tile<4x8xptr<f32, global>>
  %19 = ptr_add(%18, %8) : tile<4x8xptr<f32, global>>
  store(%19, %17)
  return()
}
)");
}

TEST_CASE("literals take the other operand's type, handles promote by width", "[dsl][trace][promote]") {
  auto k = ts::kernel("lits", {"o32", "i8p", "h", "d"},
                      [](ts::Ptr<float> o32, ts::Ptr<const int8_t> i8p, ts::Ptr<const ts::half> h, ts::Double d) {
                        auto c = ts::arange(4);
                        auto a = c + 1;                  // int literal -> tile<4xi32> constant
                        auto small = ts::load(i8p + a);  // tile<4xi8>
                        auto wide = small + a;           // i8 with i32 -> cast to i32
                        auto f = wide.to(ts::f32);
                        auto g = f * 2;             // int literal next to f32 -> f32 constant
                        auto hv = ts::load(h + c);  // tile<4xf16>
                        auto mixed = hv + g;        // f16 with f32 -> f32
                        auto dd = d + 1;            // f64 scalar + int literal
                        auto scaled = mixed * 0.5;  // double literal next to f32 -> f32
                        auto ddf = dd.to(ts::f32);
                        auto out = scaled + ddf;  // scalar splat
                        ts::store(o32 + c, out);
                      });
  CHECK(irText(k) == R"(kernel @lits(%o32: ptr<f32, global>, %i8p: ptr<i8, global>, %h: ptr<f16, global>, %d: f64) {
  %0 = arange() {end = 4, start = 0} : tile<4xi32>
  %1 = constant() {value = 1} : tile<4xi32>
  %2 = add(%0, %1) : tile<4xi32>
  %3 = splat(%i8p) : tile<4xptr<i8, global>>
  %4 = ptr_add(%3, %2) : tile<4xptr<i8, global>>
  %5 = load(%4) : tile<4xi8>
  %6 = cast(%5) : tile<4xi32>
  %7 = add(%6, %2) : tile<4xi32>
  %8 = cast(%7) : tile<4xf32>
  %9 = constant() {value = 0x1p+1} : tile<4xf32>
  %10 = mul(%8, %9) : tile<4xf32>
  %11 = splat(%h) : tile<4xptr<f16, global>>
  %12 = ptr_add(%11, %0) : tile<4xptr<f16, global>>
  %13 = load(%12) : tile<4xf16>
  %14 = cast(%13) : tile<4xf32>
  %15 = add(%14, %10) : tile<4xf32>
  %16 = constant() {value = 0x1p+0} : f64
  %17 = add(%d, %16) : f64
  %18 = constant() {value = 0x1p-1} : tile<4xf32>
  %19 = mul(%15, %18) : tile<4xf32>
  %20 = cast(%17) : f32
  %21 = splat(%20) : tile<4xf32>
  %22 = add(%19, %21) : tile<4xf32>
  %23 = splat(%o32) : tile<4xptr<f32, global>>
  %24 = ptr_add(%23, %0) : tile<4xptr<f32, global>>
  store(%24, %22)
  return()
}
)");
}

TEST_CASE("for_range with carried values and if_else with results", "[dsl][trace][control]") {
  auto k = ts::kernel("loops", {"out", "n"}, [](ts::Ptr<float> out, ts::Int n) {
    auto acc0 = ts::zeros({4}, ts::f32);
    auto m0 = ts::full({}, 1.0, ts::f32);
    auto [acc, m] = ts::for_range(0, n, 2, std::make_tuple(acc0, m0), [](ts::Int i, ts::Tensor a, ts::Float s) {
      auto fi = i.to(ts::f32);
      auto na = a + fi;
      auto ns = s * 2.0;
      return std::make_tuple(na, ns);
    });
    auto big = n > 3;
    auto r = ts::if_else(big, [&] { return acc; }, [&] { return acc * m; });
    ts::for_range(0, 3, 1, [&](ts::Int j) {
      auto p = out + j;
      ts::store(p, m);
    });
    auto c = ts::arange(4);
    ts::store(out + c, r);
  });
  CHECK(irText(k) == R"(kernel @loops(%out: ptr<f32, global>, %n: i32) {
  %0 = constant() {value = 0x0p+0} : tile<4xf32>
  %1 = constant() {value = 0x1p+0} : f32
  %2 = constant() {value = 0} : i32
  %3 = constant() {value = 2} : i32
  %4:2 = for(%2, %n, %3, %0, %1) : tile<4xf32>, f32 {
  ^(%6: i32, %7: tile<4xf32>, %8: f32):
    %9 = cast(%6) : f32
    %10 = splat(%9) : tile<4xf32>
    %11 = add(%7, %10) : tile<4xf32>
    %12 = constant() {value = 0x1p+1} : f32
    %13 = mul(%8, %12) : f32
    yield(%11, %13)
  }
  %14 = constant() {value = 3} : i32
  %15 = cmp(%n, %14) {pred = gt} : i1
  %16 = if(%15) : tile<4xf32> {
    yield(%4)
  } else {
    %17 = splat(%5) : tile<4xf32>
    %18 = mul(%4, %17) : tile<4xf32>
    yield(%18)
  }
  %19 = constant() {value = 0} : i32
  %20 = constant() {value = 3} : i32
  %21 = constant() {value = 1} : i32
  for(%19, %20, %21) {
  ^(%22: i32):
    %23 = ptr_add(%out, %22) : ptr<f32, global>
    store(%23, %5)
    yield()
  }
  %24 = arange() {end = 4, start = 0} : tile<4xi32>
  %25 = splat(%out) : tile<4xptr<f32, global>>
  %26 = ptr_add(%25, %24) : tile<4xptr<f32, global>>
  store(%26, %16)
  return()
}
)");
}

TEST_CASE("reductions, where, transpose, dot, shared buffers and atomics", "[dsl][trace]") {
  auto k = ts::kernel("misc", {"out", "idx"}, [](ts::Ptr<float> out, ts::Ptr<int32_t> idx) {
    auto r = ts::expand_dims(ts::arange(16), 1);  // [16,1]
    auto c = ts::expand_dims(ts::arange(16), 0);  // [1,16]
    auto offs = r * 16 + c;
    auto a = ts::load(out + offs);
    auto at = a.T();
    auto d = ts::dot(a, at);
    auto rowmax = ts::max(d, -1);  // axis -1 == 1
    auto best = ts::argmax(d, 0);
    auto pos = ts::where(rowmax > 0.0f, rowmax, 0);  // literal 0 -> f32
    auto buf = ts::alloc_shared(ts::f32, {16});
    buf.store(pos);
    ts::barrier();
    auto back = buf.load();
    ts::atomic_add(out + ts::arange(16), back);
    ts::store(idx + ts::arange(16), best);
  });
  CHECK(irText(k) == R"(kernel @misc(%out: ptr<f32, global>, %idx: ptr<i32, global>) {
  %0 = arange() {end = 16, start = 0} : tile<16xi32>
  %1 = expand_dims(%0) {axis = 1} : tile<16x1xi32>
  %2 = arange() {end = 16, start = 0} : tile<16xi32>
  %3 = expand_dims(%2) {axis = 0} : tile<1x16xi32>
  %4 = constant() {value = 16} : tile<16x1xi32>
  %5 = mul(%1, %4) : tile<16x1xi32>
  %6 = broadcast(%5) : tile<16x16xi32>
  %7 = broadcast(%3) : tile<16x16xi32>
  %8 = add(%6, %7) : tile<16x16xi32>
  %9 = splat(%out) : tile<16x16xptr<f32, global>>
  %10 = ptr_add(%9, %8) : tile<16x16xptr<f32, global>>
  %11 = load(%10) : tile<16x16xf32>
  %12 = transpose(%11) {perm = [1, 0]} : tile<16x16xf32>
  %13 = constant() {value = 0x0p+0} : tile<16x16xf32>
  %14 = dot(%11, %12, %13) : tile<16x16xf32>
  %15 = reduce(%14) {axis = 1, kind = max} : tile<16xf32>
  %16 = reduce(%14) {axis = 0, kind = argmax} : tile<16xi32>
  %17 = constant() {value = 0x0p+0} : tile<16xf32>
  %18 = cmp(%15, %17) {pred = gt} : tile<16xi1>
  %19 = constant() {value = 0x0p+0} : tile<16xf32>
  %20 = select(%18, %15, %19) : tile<16xf32>
  %21 = alloc() : buffer<shared, 16xf32>
  local_store(%21, %20)
  barrier()
  %22 = local_load(%21) : tile<16xf32>
  %23 = arange() {end = 16, start = 0} : tile<16xi32>
  %24 = splat(%out) : tile<16xptr<f32, global>>
  %25 = ptr_add(%24, %23) : tile<16xptr<f32, global>>
  %26 = atomic_rmw(%25, %22) {kind = add, order = relaxed, scope = device} : tile<16xf32>
  %27 = arange() {end = 16, start = 0} : tile<16xi32>
  %28 = splat(%idx) : tile<16xptr<i32, global>>
  %29 = ptr_add(%28, %27) : tile<16xptr<i32, global>>
  store(%29, %16)
  return()
}
)");
}

TEST_CASE("Kernel::text prints locations and parseKernel reads it back", "[dsl][kernel]") {
  auto k = ts::kernel("rt", {"p", "n"}, [](ts::Ptr<float> p, ts::Int n) {
    auto c = ts::arange(32);
    ts::store(p + c, c.to(ts::f32) * 0.25f, c < n);
  });
  std::string text = k.text();
  CHECK(text.find("loc(\"" __FILE__ "\":") != std::string::npos);
  ts::Kernel back = ts::parseKernel(text, "rt.tir");
  CHECK(back.name() == "rt");
  CHECK(back.text() == text);
  CHECK_THROWS_AS(ts::Kernel().ir(), ts::Error);
}

TEST_CASE("the math functions trace to their ops, rint is round (ties to even)", "[dsl][trace]") {
  auto k = ts::kernel("m", {"out", "x"}, [](ts::Ptr<double> out, ts::Ptr<const double> x) {
    auto v = ts::load(x + ts::arange(4));
    auto a = ts::sin(v);
    auto b = ts::cos(a);
    auto c = ts::sigmoid(b);
    auto d = ts::log1p(c);
    auto e = ts::expm1(d);
    auto f = ts::round(e);
    auto g = ts::rint(f);
    auto h = ts::ceil(g);
    auto t = ts::trunc(h);
    ts::store(out + ts::arange(4), ts::pow(t, v));
  });
  std::string text = irText(k);
  for (const char* op : {"= sin(", "= cos(", "= sigmoid(", "= log1p(", "= expm1(", "= ceil(", "= trunc(", "= pow("}) {
    INFO(op);
    CHECK(text.find(op) != std::string::npos);
  }
  // round and rint are one op.
  size_t first = text.find("= round("), second = text.find("= round(", first + 1);
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(text.find("rint") == std::string::npos);
  CHECK(text.find(": tile<4xf64>") != std::string::npos);
}

TEST_CASE("where with two literal branches takes the condition's shape", "[dsl][trace]") {
  auto k = ts::kernel("onehot", [](ts::Ptr<float> f, ts::Ptr<int32_t> i, ts::Ptr<int64_t> l, ts::Int hot) {
    auto j = ts::arange(8);
    ts::store(f + j, ts::where(j == hot, 1.0f, 0));  // a float literal: f32
    ts::store(i + j, ts::where(j < hot, 5, -1));     // integers: i32
    ts::store(l + j, ts::where(j < hot, 2, 0).to(ts::i64));
  });
  std::string text = irText(k);
  CHECK(text.find("select(") != std::string::npos);
  ts::Device dev = ts::Device::cpu();
  ts::Buffer f = dev.alloc(ts::f32, 8), i = dev.alloc(ts::i32, 8), l = dev.alloc(ts::i64, 8);
  ts::compile(k, dev).launch(ts::Dim3(1), f, i, l, 3);
  CHECK(f.read<float>() == std::vector<float>{0, 0, 0, 1, 0, 0, 0, 0});
  CHECK(i.read<int32_t>() == std::vector<int32_t>{5, 5, 5, -1, -1, -1, -1, -1});
  CHECK(l.read<int64_t>() == std::vector<int64_t>{2, 2, 2, 0, 0, 0, 0, 0});
}
