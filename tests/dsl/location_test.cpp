// Every op records the user's file and line: functions through a defaulted
// std::source_location, operators through ts::Operand's converting
// constructors.
#include "dsl_test_util.h"

#include <map>

namespace ts = tessera;

namespace {
/// The line of the first op named `name` (pre-order over nested regions).
uint32_t lineOf(const ts::Kernel& k, const std::string& name) {
  uint32_t line = 0;
  auto& body = const_cast<ts::ir::Block&>(k.ir().body());
  ts::ir::walk(body, [&](ts::ir::Op& op) {
    if (line == 0 && op.name() == name) {
      CHECK(op.loc().file == __FILE__);
      line = op.loc().line;
    }
  });
  return line;
}
}  // namespace

TEST_CASE("ops record the line of the user's expression", "[dsl][loc]") {
  std::map<std::string, int> want;
  int kernelLine = __LINE__ + 1;
  auto k = ts::kernel("locs", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    want["program_id"] = __LINE__ + 1;
    auto pid = ts::program_id(0);
    want["arange"] = __LINE__ + 1;
    auto c = ts::arange(16);
    want["mul"] = __LINE__ + 1;
    auto base = pid * 16;
    want["cmp"] = __LINE__ + 1;
    auto mask = c < n;
    want["load"] = __LINE__ + 1;
    auto x = ts::load(in + c, mask, 0.0f);
    want["exp"] = __LINE__ + 1;
    auto e = ts::exp(x);
    want["reduce"] = __LINE__ + 1;
    auto s = ts::sum(e, 0);
    want["div"] = __LINE__ + 1;
    auto y = e / s;
    want["neg"] = __LINE__ + 1;
    auto z = -y;
    want["max"] = __LINE__ + 1;
    auto w = ts::maximum(z, y);
    want["for"] = __LINE__ + 1;
    auto acc = ts::for_range(0, n, 1, w, [&](ts::Int i, ts::Tensor a) {
      want["cast"] = __LINE__ + 1;
      auto fi = i.to(ts::f32);
      want["add"] = __LINE__ + 1;
      return a + fi;
    });
    want["store"] = __LINE__ + 1;
    ts::store(out + base + c, acc, mask);
  });
  for (auto& [op, line] : want) {
    INFO("op " << op);
    CHECK(lineOf(k, op) == static_cast<uint32_t>(line));
  }
  CHECK(k.ir().loc().file == __FILE__);
  CHECK(k.ir().loc().line == static_cast<uint32_t>(kernelLine));
  // The ptr_add of `in + c` is on the load's line; the yield takes the loop's.
  CHECK(lineOf(k, "ptr_add") == static_cast<uint32_t>(want["load"]));
  CHECK(lineOf(k, "yield") == static_cast<uint32_t>(want["for"]));
}
