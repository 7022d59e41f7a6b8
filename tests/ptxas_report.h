// The check every NVIDIA compile test makes of its artifact, the
// counterpart of amd_code_object.h: ptxas accepts the PTX, and its report
// gives the registers and spill bytes the test then judges.
#pragma once

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "tessera/tessera.h"

namespace testptx {

struct PtxasFigures {
  int registers = 0, spillBytes = 0;
  std::string report;  // the whole resource report (ptxas -v's lines included)
};

/// Runs ptxas -v on `k` (compiled for an nvptx: target) through its
/// resource report, which throws if ptxas rejects the PTX, and reads the
/// figures; the report is attached to the test's failure messages.
inline PtxasFigures ptxasFigures(const tessera::CompiledKernel& k) {
  PtxasFigures f;
  f.report = k.dump(tessera::Stage::Resources);
  INFO(f.report);
  std::smatch m;
  REQUIRE(std::regex_search(f.report, m, std::regex(R"(registers (\d+), spill bytes (\d+))")));
  f.registers = std::stoi(m[1]);
  f.spillBytes = std::stoi(m[2]);
  return f;
}

}  // namespace testptx
