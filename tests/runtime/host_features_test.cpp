// The runtime's ISA checks for exported CPU code
// (tessera/runtime/HostFeatures.h).
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "tessera/runtime/HostFeatures.h"
#include "tessera/support/Error.h"
#include "tessera/support/HostTiles.h"

using Catch::Matchers::Contains;

namespace {
// TESSERA_HOST_CPU for one scope (the runtime reads it at every check).
struct HostCpu {
  std::string old;
  bool had = false;
  explicit HostCpu(const char* v) {
    if (const char* o = std::getenv("TESSERA_HOST_CPU")) old = o, had = true;
    setenv("TESSERA_HOST_CPU", v, 1);
  }
  ~HostCpu() {
    if (had)
      setenv("TESSERA_HOST_CPU", old.c_str(), 1);
    else
      unsetenv("TESSERA_HOST_CPU");
  }
};
}  // namespace

#if defined(__x86_64__)
TEST_CASE("baseline features are present, unknown ones are not tested", "[runtime][isa]") {
  CHECK(tessera::rt::missingHostFeatures({"sse2", "cmov", "no-such-feature"}) == "");
  CHECK_NOTHROW(tessera::rt::requireHostFeatures("k", "x86-64", {"sse2"}));
}

TEST_CASE("a host narrowed to x86-64-v3 lacks AVX-512 and keeps AVX2", "[runtime][isa]") {
  HostCpu narrow("x86-64-v3");
  // The suite's hosts are x86-64-v3 at least (AVX2 and FMA).
  CHECK(tessera::rt::missingHostFeatures({"avx2", "fma", "bmi2"}) == "");
  CHECK(tessera::rt::missingHostFeatures({"avx2", "avx512f", "avx512bw"}) == "avx512f, avx512bw");
  CHECK_THROWS_AS(tessera::rt::requireHostFeatures("k", "x86-64-v4", {"avx512f"}), tessera::DeviceError);
  CHECK_THROWS_WITH(tessera::rt::requireHostFeatures("k", "x86-64-v4", {"avx2", "avx512vl"}),
                    Contains("cpu device cannot load kernel 'k': it was compiled ahead of time for cpu:x86-64-v4") &&
                        Contains("(TESSERA_HOST_CPU=x86-64-v3) lacks avx512vl"));
}

TEST_CASE("a cpu name the runtime cannot resolve in TESSERA_HOST_CPU is refused, not ignored", "[runtime][isa]") {
  // Ignored, znver4 (or a misspelling) would leave the host un-narrowed and
  // load AVX-512 code the user asked to rule out.
  for (const char* v : {"znver4", "x86-64-v5", "bogus"}) {
    HostCpu narrow(v);
    CHECK_THROWS_AS(tessera::rt::missingHostFeatures({"avx2"}), tessera::DeviceError);
    CHECK_THROWS_WITH(tessera::rt::requireHostFeatures("k", "x86-64-v3", {"avx2"}),
                      Contains(std::string("TESSERA_HOST_CPU='") + v + "'") &&
                          Contains("narrow the host only to x86-64-v2, x86-64-v3 or x86-64-v4"));
  }
  HostCpu empty("");  // empty: not narrowed
  CHECK(tessera::rt::missingHostFeatures({"sse2"}) == "");
}
#endif

TEST_CASE("AMX features count only where cpuid has them and the OS granted the tile state", "[runtime][external]") {
  // Without the grant an AMX instruction faults, so cpuid alone must not
  // make code that uses the tiles loadable.
  const bool granted = tessera::requestHostTileState();
  const char* narrowed = std::getenv("TESSERA_HOST_CPU");
  if (!narrowed || !*narrowed)
    CHECK(tessera::rt::missingHostFeatures({"amx-tile", "amx-bf16", "amx-int8"}).empty() == granted);
  // No psABI level has AMX: narrowed to one, the host lacks it.
  HostCpu v4("x86-64-v4");
  CHECK(tessera::rt::missingHostFeatures({"amx-tile", "avx512f"}).find("amx-tile") != std::string::npos);
}
