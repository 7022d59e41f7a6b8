// The roofline chart of benchmark results, written by Tessera itself as
// SVG: log-log axes (arithmetic intensity in FLOP per byte of compulsory
// DRAM traffic against FLOP/s), one roof per machine (its memory bandwidth
// up to its FP32 vector peak, solid; its f16 tensor peak, dashed, where it
// has one) and each result a labelled point. PNG too where a renderer is
// installed (rsvg-convert, else inkscape). docs/sol.md shows how to read it.
#pragma once

#include <string>
#include <vector>

#include "tessera/perf/Bench.h"
#include "tessera/perf/SpeedOfLight.h"

namespace tessera::perf {

/// The chart as SVG text. Results without flops cannot be placed on the
/// intensity axis; they are listed under the chart instead.
std::string rooflineSvg(const std::vector<BenchResult>& results, const std::vector<Machine>& machines,
                        const std::string& title);

struct ChartFiles {
  std::string svg;         // the path written
  std::string png;         // the PNG written beside it, "" if none
  std::string pngSkipped;  // why there is no PNG
};
/// Writes the chart to `svgPath` and, where a renderer is found, a PNG of
/// it beside it (the same path ending in .png). UsageError if `svgPath`
/// cannot be written.
ChartFiles writeRoofline(const std::string& svgPath, const std::vector<BenchResult>& results,
                         const std::vector<Machine>& machines, const std::string& title);

}  // namespace tessera::perf
