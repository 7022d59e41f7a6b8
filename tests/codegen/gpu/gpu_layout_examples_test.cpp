// The layouts of the bundled examples' GPU kernels: each element of a tile
// on one thread where the block's threads can cover the tile once.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "../../../codegen/GpuTargets.h"
#include "registry.h"
#include "tessera/Compile.h"
#include "tessera/ir/analysis/LayoutStats.h"

using namespace tessera;

TEST_CASE("gpu layout stats: the tutorial softmax holds each element of its row chunk on one thread", "[gpu][layout]") {
  // 256-element chunks, 16-byte aligned in the loop (the loop counter is a
  // multiple of 256): 4-wide vectors are legal, but 4 per thread would hold
  // each element on 2 (128 threads) or 4 (256 threads) threads, every one of
  // them loading it and computing its exp again.
  tessera::Kernel k = assumeAligned(examples::tutorialSoftmax(256));
  struct Want {
    const char* target;
    int64_t width;
  };
  for (const Want& w :
       {Want{"nvptx:sm_80", 2}, Want{"nvptx:sm_90a", 2}, Want{"amdgpu:gfx942", 1}, Want{"amdgpu:gfx1100", 2}}) {
    auto art = codegen::compileGpu(k.ir(), codegen::Target::parse(w.target), {}, {});
    const std::string& dump = art->dumps.extra["layout-stats"];
    INFO(w.target << "\n" << dump);
    auto parsed = ir::LayoutSummary::parse(dump);
    REQUIRE(parsed);
    const ir::LayoutSummary& s = *parsed;
    CHECK(s.accesses == 3);  // the two loads and the store
    CHECK(s.maxExcessReplication == 1);
    CHECK(s.sharedConversions == 0);
    std::regex access(R"(: width (\d+) of 4[^,]*, coalesced, replication ([0-9.]+) )");
    int n = 0;
    for (auto it = std::sregex_iterator(dump.begin(), dump.end(), access); it != std::sregex_iterator(); ++it, ++n) {
      CHECK((*it)[1] == std::to_string(w.width));
      CHECK((*it)[2] == "1");
    }
    CHECK(n == 3);
  }
}
