// The shared-memory needs model (codegen/gpu/SharedNeeds.h): the GPU
// lowering weighs its shared-memory choices on a model of what it would ask
// under each, instead of lowering the kernel to see. Here every bundled
// example's GPU kernel, on both vendors, is lowered under every combination
// of the choices, and each lowering's record must be what the model
// predicted from the first one.
#include <catch2/catch.hpp>

#include <string>

#include "../../../codegen/GpuTargets.h"
#include "../../../codegen/gpu/SharedNeeds.h"
#include "registry.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/ir/Parser.h"

using namespace tessera;

namespace {
/// The kernel as the GPU compile receives it: its tile IR after the passes
/// (the dump before the layouts), parsed back.
std::unique_ptr<ir::Module> afterPasses(const codegen::Artifact& art) {
  std::string text;
  for (const auto& [pass, ir] : art.dumps.tileIR) {
    if (pass == "layout") break;
    text = ir;
  }
  return ir::parseModule(text, "after-passes");
}
}  // namespace

TEST_CASE("shared needs model: every example, every target, every choice", "[gpu][shared]") {
  int kernels = 0;
  for (const examples::Example& e : examples::all()) {
    for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
      const codegen::Target t = codegen::Target::parse(target);
      tessera::Kernel k = examples::kernelFor(e, t);
      codegen::CompileOptions o;
      std::shared_ptr<codegen::Artifact> art;
      try {
        art = codegen::compile(k.ir(), t, o);
      } catch (const ResourceError&) {
        continue;  // does not fit this target: nothing lowered to compare
      }
      std::unique_ptr<ir::Module> m = afterPasses(*art);
      REQUIRE(m);
      REQUIRE(m->functions.size() == 1);
      INFO(e.name << " on " << target);
      CHECK(codegen::checkSharedNeedsModel(*m->functions.front(), t, o) == "");
      ++kernels;
    }
  }
  CHECK(kernels >= 100);
}

TEST_CASE("shared needs model: a lowering that asks otherwise than the model is named", "[gpu][shared]") {
  // The comparison the compile asserts on (and the test above runs): a
  // difference in any field is reported with the op or area it concerns.
  const examples::Example* e = examples::find("softmax");
  REQUIRE(e);
  const codegen::Target t = codegen::Target::parse("amdgpu:gfx942");
  auto art = codegen::compile(examples::kernelFor(*e, t).ir(), t, {});
  std::unique_ptr<ir::Module> m = afterPasses(*art);
  REQUIRE(m);
  const ir::Op* op = m->functions.front()->body().ops().front().get();
  codegen::SharedNeeds a, b;
  CHECK(a.differences(b) == "");
  a.scratch[op] = 64;
  b.scratch[op] = 128;
  CHECK_THAT(a.differences(b), Catch::Contains("64 bytes against 128"));
  b.scratch[op] = 64;
  CHECK(a.differences(b) == "");
  a.loopAreas.push_back({op, ir::LoopArea{op, 256, "B operand", true}});
  b.loopAreas.push_back({op, ir::LoopArea{op, 256, "B operand", false}});
  CHECK_THAT(a.differences(b), Catch::Contains("not the whole loop"));
  b.loopAreas = a.loopAreas;
  b.fragmentsCandidates = 1;
  CHECK_THAT(a.differences(b), Catch::Contains("fragments first 0/1"));
}
