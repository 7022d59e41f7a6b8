// The check every AMDGPU compile test makes of its artifact: a linked ELF
// code object whose resource report names the target's wavefront size.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "tessera/tessera.h"

namespace testamd {

/// Checks that `k` (compiled for an amdgpu: target of wavefront `wave`) is
/// an ELF code object; returns its resource report for further checks.
inline std::string checkCodeObject(const tessera::CompiledKernel& k, int wave) {
  std::string hsaco = k.dump(tessera::Stage::HSACO);
  REQUIRE(hsaco.size() > 64);
  CHECK(hsaco.compare(0, 4,
                      "\x7f"
                      "ELF") == 0);
  std::string report = k.dump(tessera::Stage::Resources);
  INFO(report);
  CHECK(report.find("wavefront " + std::to_string(wave)) != std::string::npos);
  return report;
}

}  // namespace testamd
