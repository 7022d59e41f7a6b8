// Every documented DSL misuse throws DslError "file:line: error: ..." naming
// the user's own line. `line = __LINE__` sits on the offending line.
#include "dsl_test_util.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using dsltest::at;
using dsltest::traceError;

namespace {
/// `msg` is an error at this file's `line` that says `what`.
void checkErrorAt(const std::string& msg, int line, const char* what) {
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains(what));
}
}  // namespace

TEST_CASE("shapes that cannot broadcast name both shapes", "[dsl][errors]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::arange(4);
    auto b = ts::arange(8);
    line = __LINE__ + 1;  // the next line
    a + b;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("shapes [4] and [8] cannot be broadcast together"));

  msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::expand_dims(ts::arange(4), 1);
    auto b = ts::expand_dims(ts::arange(8), 1);
    line = __LINE__ + 1;  // the next line
    a* b;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("[4x1] and [8x1]"));
  REQUIRE_THROWS_AS(ts::kernel("k", [](ts::Ptr<float>) { ts::arange(3) - ts::arange(5); }), ts::DslError);
}

TEST_CASE("integer and float handles never mix silently", "[dsl][errors][promote]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<const float> p) {
    auto i = ts::arange(4);
    auto f = ts::load(p + i);
    line = __LINE__ + 1;  // the next line
    i + f;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("cannot mix i32 and f32"));
  CHECK_THAT(msg, Contains(".to(ts::f32)"));

  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::arange(4) * 0.5;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("floating literal 0.5"));

  msg = traceError([&](ts::Ptr<const int8_t> p) {
    auto v = ts::load(p + ts::arange(4));
    line = __LINE__ + 1;  // the next line
    v + 300;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("integer literal 300 does not fit the operand type i8"));

  msg = traceError([&](ts::Ptr<float>) {
    auto b = ts::arange(4) < 2;
    line = __LINE__ + 1;  // the next line
    b + ts::arange(4);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("cannot mix i1"));

  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::exp(ts::arange(4));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("exp: needs a float operand"));

  for (auto fn : {ts::sin, ts::cos, ts::sigmoid, ts::log1p, ts::expm1, ts::round, ts::rint, ts::ceil, ts::trunc}) {
    msg = traceError([&](ts::Ptr<float>) {
      line = __LINE__ + 1;  // the next line
      fn(ts::arange(4), ts::SrcLoc::current());
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains(": needs a float operand, got tile<4xi32>; convert with .to(ts::f32)"));
  }
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::arange(4).bitcast(ts::f64);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains(".bitcast(f64): tile<4xi32> has 32-bit elements, f64 has 64 bits"));
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::rint(ts::arange(4));
  });
  CHECK_THAT(msg, Contains("rint: needs a float operand"));

  msg = traceError([&](ts::Ptr<float> p) {
    auto x = ts::load(p + ts::arange(4));
    line = __LINE__ + 1;  // the next line
    x << 1;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("needs integer operands"));

  msg = traceError([&](ts::Ptr<float> p, ts::Ptr<float> q) {
    line = __LINE__ + 1;  // the next line
    p * 2;
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("pointers support only ptr + int"));
}

TEST_CASE("reduction axes are checked against the rank", "[dsl][errors]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({4, 8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::sum(x, 2);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("axis 2 is out of range for a tile of rank 2"));
  msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({4, 8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::max(x, -3);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("axis -3 is out of range for a tile of rank 2"));
  msg = traceError([&](ts::Ptr<float>, ts::Float f) {
    line = __LINE__ + 1;  // the next line
    ts::sum(f, 0);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("needs a tile"));
}

TEST_CASE("tile shapes: rank at most 4, dims positive, arange non-empty", "[dsl][errors]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::zeros({2, 2, 2, 2, 2}, ts::f32);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("rank 5 exceeds the maximum of 4"));
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::full({4, 0}, 1.0, ts::f32);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("dimensions must be positive (shape 4x0)"));
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::arange(5, 5);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("end 5 must be greater than start 5"));
  msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({2, 2, 2, 2}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::expand_dims(x, 0);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("exceeds the maximum of 4"));
  msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({4, 6}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::reshape(x, {5, 5});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("cannot reshape [4x6] (24 elements) to [5x5] (25 elements)"));
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::program_id(3);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("grid axis 3"));
}

TEST_CASE("loads and stores check masks, dtypes and constness", "[dsl][errors][memory]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<const float> p) {
    auto offs = ts::arange(16);
    auto mask = ts::arange(8) < 4;
    line = __LINE__ + 1;  // the next line
    ts::load(p + offs, mask);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("mask shape [8] does not match the pointer shape [16]"));

  msg = traceError([&](ts::Ptr<const float> p) {
    auto offs = ts::arange(16);
    line = __LINE__ + 1;  // the next line
    ts::load(p + offs, offs);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("the mask must be i1"));

  msg = traceError([&](ts::Ptr<const float> p) {
    line = __LINE__ + 1;  // the next line
    ts::load(p + ts::arange(4), {}, 0.0);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("`other` is given without a mask"));

  msg = traceError([&](ts::Ptr<float> p) {
    auto offs = ts::arange(16);
    line = __LINE__ + 1;  // the next line
    ts::store(p + offs, offs);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("value of type tile<16xi32> through a pointer to f32"));

  msg = traceError([&](ts::Ptr<float> out, ts::Ptr<const float> in) {
    auto offs = ts::arange(16);
    auto x = ts::load(in + offs);
    line = __LINE__ + 1;  // the next line
    ts::store(in + offs, x);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("Ptr<const T> parameter, which is read-only"));

  msg = traceError([&](ts::Ptr<const float> in) {
    line = __LINE__ + 1;  // the next line
    ts::atomic_add(in + ts::arange(4), 1.0f);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("read-only"));

  msg = traceError([&](ts::Ptr<float> p) {
    auto v = ts::zeros({8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::store(p + ts::arange(16), v);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("cannot broadcast shape [8] to [16]"));

  msg = traceError([&](ts::Ptr<float> p) {
    line = __LINE__ + 1;  // the next line
    ts::load(ts::arange(4));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("expected a pointer"));
}

TEST_CASE("for_range bounds are integer scalars and carried types are stable", "[dsl][errors][control]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>) {
    auto n = ts::arange(4);
    line = __LINE__ + 1;  // the next line
    ts::for_range(0, n, 1, [&](ts::Int) {});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("the upper bound must be an integer scalar, got tile<4xi32>"));

  msg = traceError([&](ts::Ptr<float>, ts::Float f) {
    line = __LINE__ + 1;  // the next line
    ts::for_range(f, 10, 1, [&](ts::Int) {});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("lower bound must be an integer scalar, got f32"));

  msg = traceError([&](ts::Ptr<float>) {
    auto acc = ts::zeros({4}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::for_range(0, 4, 1, acc, [&](ts::Int, ts::Tensor a) { return a.to(ts::f64); });
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("carried value #0 enters the loop as tile<4xf32> but the body returns tile<4xf64>"));

  msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::zeros({4}, ts::f32);
    auto b = ts::zeros({4}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::for_range(0, 4, 1, std::vector<ts::Tensor>{a, b},
                  [&](ts::Tensor, std::vector<ts::Tensor> c) { return std::vector<ts::Tensor>{c[0]}; });
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("returns 1 value(s) but the loop carries 2"));

  // A value made inside a loop body cannot be used after the loop.
  msg = traceError([&](ts::Ptr<float> p) {
    ts::Tensor leaked;
    ts::for_range(0, 4, 1, [&](ts::Int i) { leaked = i * 2; });
    line = __LINE__ + 1;  // the next line
    ts::store(p, leaked.to(ts::f32));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("defined inside a for_range / if_else body"));
}

TEST_CASE("if_else checks its condition and matching branch types", "[dsl][errors][control]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>, ts::Int n) {
    auto a = ts::zeros({4}, ts::f32);
    auto b = ts::zeros({8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::if_else(n > 0, [&] { return a; }, [&] { return b; });
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("then (tile<4xf32>) vs else (tile<8xf32>)"));

  msg = traceError([&](ts::Ptr<float>, ts::Int n) {
    auto a = ts::zeros({4}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::if_else(n > 0, [&] { return a; }, [&] {});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("then (tile<4xf32>) vs else ()"));

  msg = traceError([&](ts::Ptr<float>) {
    auto c = ts::arange(4) < 2;
    line = __LINE__ + 1;  // the next line
    ts::if_else(c, [&] {});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("condition must be a scalar i1"));
}

TEST_CASE("transpose and dot check permutations, shapes and dtypes", "[dsl][errors]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({4, 8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::transpose(x, {0, 0});
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("[0, 0] is not a permutation of the 2 axes"));
  msg = traceError([&](ts::Ptr<float>) {
    auto x = ts::zeros({4}, ts::f32);
    line = __LINE__ + 1;  // the next line
    x.T();
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("needs a 2-D tile"));

  msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::zeros({16, 8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::dot(a, a);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("inner dimensions differ: [16x8] @ [16x8]"));
  msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::zeros({16, 16}, ts::f32);
    auto b = ts::zeros({16, 16}, ts::i32);
    line = __LINE__ + 1;  // the next line
    ts::dot(a, b);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("share a numeric dtype (or both be fp8), got f32 and i32"));
  msg = traceError([&](ts::Ptr<float>) {
    auto a = ts::zeros({16, 16}, ts::f16);
    auto acc = ts::zeros({16, 8}, ts::f32);
    line = __LINE__ + 1;  // the next line
    ts::dot(a, a, acc);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("accumulator must be tile<16x16xf32 or f64>"));
}

TEST_CASE("handles are only valid inside the trace that made them", "[dsl][errors]") {
  ts::Tensor outside;
  ts::kernel("first", [&](ts::Ptr<float> p) { outside = ts::arange(4); });
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<float> p) {
    line = __LINE__ + 1;  // the next line
    ts::store(p + outside, 1.0f);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("belongs to another kernel trace"));

  // No trace at all.
  line = __LINE__ + 1;  // the next line
  auto call = [&] { return outside + 1; };
  try {
    call();
    FAIL("expected DslError");
  } catch (const ts::DslError& e) {
    CHECK_THAT(std::string(e.what()), StartsWith(at(__FILE__, line)));
    CHECK_THAT(std::string(e.what()), Contains("outside a ts::kernel() trace"));
  }
  REQUIRE_THROWS_AS(ts::program_id(0), ts::DslError);

  // Parameter names must match the parameter count.
  line = __LINE__ + 1;  // the next line
  auto named = [] { ts::kernel("k", {"a", "b"}, [](ts::Ptr<float>) {}); };
  try {
    named();
    FAIL("expected DslError");
  } catch (const ts::DslError& e) {
    CHECK_THAT(std::string(e.what()), StartsWith(at(__FILE__, line)));
    CHECK_THAT(std::string(e.what()), Contains("2 parameter name(s) given for 1 parameter(s)"));
  }
}

TEST_CASE("a failed trace leaves no tracing context behind", "[dsl][errors]") {
  CHECK_THROWS_AS(ts::kernel("bad", [](ts::Ptr<float>) { ts::arange(0); }), ts::DslError);
  CHECK_THROWS_AS(ts::arange(4), ts::DslError);  // still outside any trace
  auto ok = ts::kernel("good", [](ts::Ptr<float> p) { ts::store(p, 1.0f); });
  CHECK(ok.valid());
}

TEST_CASE("scans check the axis, the dtype and what the combine function does", "[dsl][errors][scan]") {
  int line = 0;
  auto check = [&](const std::string& msg, const char* what) { checkErrorAt(msg, line, what); };
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({4, 8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::cumsum(x, 2);
        }),
        "scan: axis 2 is out of range for a tile of rank 2");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::arange(8) < 4;
          line = __LINE__ + 1;  // the next line
          ts::cumprod(x, 0);
        }),
        "scan: needs a tile of numbers (not i1), got tile<8xi1>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::associative_scan(x, 0, [&](ts::Tensor a, ts::Tensor b) { return a + b + x; });
        }),
        "the combine function may use only scalars (its arguments, constants, scalar kernel arguments), but it "
        "uses a tile<8xf32>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::associative_scan(x, 0, [&](ts::Tensor a, ts::Tensor b) { return a + ts::program_id(0).to(ts::f32); });
        }),
        "the combine function may use only elementwise math on scalars, but it has 'program_id'");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::associative_scan(x, 0, [&](ts::Tensor a, ts::Tensor b) { return (a + b).to(ts::i32); });
        }),
        "the combine function returns i32, expected a scalar f32 (x's dtype)");
}

TEST_CASE("gather, join, split and argmin check shapes and dtypes at the user's line", "[dsl][errors][tileops]") {
  int line = 0;
  auto check = [&](const std::string& msg, const char* what) { checkErrorAt(msg, line, what); };
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({4, 8}, ts::f32);
          auto i = ts::zeros({3, 2}, ts::i32);
          line = __LINE__ + 1;  // the next line
          ts::gather(x, i, 1);
        }),
        "gather: the index's shape [3x2] must equal the source's [4x8] in every dim but axis 1");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({4, 8}, ts::f32);
          auto i = ts::zeros({4}, ts::i32);
          line = __LINE__ + 1;  // the next line
          ts::gather(x, i, 0);
        }),
        "gather: the index's shape [4] must equal the source's [4x8] in every dim but axis 0");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::gather(x, x, 0);
        }),
        "gather: the index must be a tile of integers, got tile<8xf32>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::gather(x, ts::arange(8) < 4, 0);
        }),
        "gather: the index must be a tile of integers, got tile<8xi1>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::gather(x, ts::arange(8), 1);
        }),
        "gather: axis 1 is out of range for a tile of rank 1");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({4, 3}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::split(x);
        }),
        "split: needs a tile of rank 2 to 4 whose last dim is 2, got tile<4x3xf32>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({2}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::split(x);
        }),
        "split: needs a tile of rank 2 to 4 whose last dim is 2, got tile<2xf32>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({2, 4, 8, 2}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::join(x, x);
        }),
        "join: tile<2x4x8x2xf32> would give a tile of rank 5, above the maximum of 4");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::join(x, ts::arange(8));
        }),
        "join: the operands must have one type, got tile<8xf32> and tile<8xi32>");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::arange(8) < 4;
          line = __LINE__ + 1;  // the next line
          ts::argmin(x, 0);
        }),
        "argmin: reduction of i1 values");
  check(traceError([&](ts::Ptr<float>) {
          auto x = ts::zeros({4, 8}, ts::f32);
          line = __LINE__ + 1;  // the next line
          ts::argmin(x, 2);
        }),
        "argmin: axis 2 is out of range for a tile of rank 2");
}

TEST_CASE("mulhi and umulhi take integers only", "[dsl][errors]") {
  int line = 0;
  std::string msg = traceError([&](ts::Ptr<const float> p) {
    auto x = ts::load(p + ts::arange(4));
    line = __LINE__ + 1;  // the next line
    ts::mulhi(x, x);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("mulhi: needs integer operands, got tile<4xf32>"));
  msg = traceError([&](ts::Ptr<const float> p) {
    auto x = ts::load(p + ts::arange(4));
    line = __LINE__ + 1;  // the next line
    ts::umulhi(x, 2);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("umulhi: needs integer operands, got tile<4xf32>"));
  msg = traceError([&](ts::Ptr<int32_t> p) {
    line = __LINE__ + 1;  // the next line
    ts::umulhi(p + ts::arange(4), 3);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("umulhi: not defined for tile<4xptr<i32, global>> and integer literal 3"));
  msg = traceError([&](ts::Ptr<float>) {
    auto b = ts::arange(4) < 2;
    line = __LINE__ + 1;  // the next line
    ts::umulhi(b, b);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("umulhi: needs integer operands, got tile<4xi1>"));
}

TEST_CASE("random numbers need an integer scalar seed and a tile of integer offsets", "[dsl][errors][random]") {
  int line = 0;
  // A float seed: a handle or a literal.
  std::string msg = traceError([&](ts::Ptr<float>, ts::Float seed) {
    line = __LINE__ + 1;  // the next line
    ts::rand(seed, ts::arange(4));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("rand: the seed must be an integer scalar"));
  CHECK_THAT(msg, Contains("got f32"));
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::randn(1.5, ts::arange(4));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("randn: the seed must be an integer scalar"));
  CHECK_THAT(msg, Contains("got floating literal 1.5"));
  // A tile seed.
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::randint(ts::arange(4), ts::arange(4));
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("randint: the seed must be an integer scalar"));
  CHECK_THAT(msg, Contains("got tile<4xi32>"));
  // Float offsets.
  msg = traceError([&](ts::Ptr<const float> p) {
    auto x = ts::load(p + ts::arange(4));
    line = __LINE__ + 1;  // the next line
    ts::randint4x(7, x);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("randint4x: the offsets must be a tile of integers"));
  CHECK_THAT(msg, Contains("got tile<4xf32>"));
  // A scalar (not a tile) as offsets.
  msg = traceError([&](ts::Ptr<float>, ts::Int off) {
    line = __LINE__ + 1;  // the next line
    ts::rand(7, off);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("rand: the offsets must be a tile of integers"));
  CHECK_THAT(msg, Contains("got i32"));
  // Boolean offsets.
  msg = traceError([&](ts::Ptr<float>) {
    line = __LINE__ + 1;  // the next line
    ts::randn(7, ts::arange(4) < 2);
  });
  CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
  CHECK_THAT(msg, Contains("got tile<4xi1>"));
}

TEST_CASE("a running sum or product of fp8 names the user's line, not the library's", "[dsl][errors]") {
  for (bool product : {false, true}) {
    int line = 0;
    std::string msg = traceError([&](ts::Ptr<float>) {
      auto x = ts::arange(16).to(ts::f8e4m3);
      line = __LINE__ + 1;  // the next line
      product ? ts::cumprod(x, 0) : ts::cumsum(x, 0);
    });
    checkErrorAt(msg, line, product ? "cumprod: tile<16xf8e4m3> is an 8-bit storage float" : "cumsum: tile<16xf8e4m3>");
    CHECK_THAT(msg, !Contains("Reductions.cpp"));
  }
}
