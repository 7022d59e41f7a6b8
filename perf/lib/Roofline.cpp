// The roofline chart (Roofline.h): SVG written by hand, PNG by an external
// renderer where one is installed.
#include "tessera/perf/Roofline.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "Format.h"
#include "tessera/support/Error.h"

namespace tessera::perf {

namespace {

std::string xml(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// One colour per machine, distinguishable and legible on white.
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

/// Decade labels: "0.01", "1", "100" on x; "10 G", "1 T" (FLOP/s) on y.
std::string decadeLabel(int e, bool si) {
  if (si) {
    static const char* kPrefix[] = {"p", "n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
    int p = static_cast<int>(std::floor(e / 3.0));
    if (p >= -4 && p <= 6) {
      std::string mant = e - 3 * p == 0 ? "1" : e - 3 * p == 1 ? "10" : "100";
      return p == 0 ? mant : mant + " " + kPrefix[p + 4];
    }
  }
  if (e >= 0 && e <= 4) return fmt::fixed(std::pow(10.0, e), 0);
  if (e < 0 && e >= -3) return fmt::fixed(std::pow(10.0, e), -e);
  return "1e" + std::to_string(e);
}

/// A dtype class that runs on tensor units on a machine that has them.
bool usesTensor(const BenchResult& r) {
  for (const auto& f : r.work.ir.flops)
    if (f.unit == ir::FlopUnit::Dot && (f.dtype == DType::F16 || f.dtype == DType::BF16 || f.dtype == DType::I8))
      return true;
  return false;
}

/// Finds `tool` on PATH; "" if absent.
std::string findOnPath(const std::string& tool) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty()) {
      std::string full = dir + "/" + tool;
      if (access(full.c_str(), X_OK) == 0) return full;
    }
    start = end + 1;
  }
  return "";
}

/// Runs argv[0] with argv (no shell); its exit status, or -1.
int runTool(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Keep the renderer's chatter off the terminal.
    if (FILE* devnull = std::fopen("/dev/null", "w")) {
      dup2(fileno(devnull), STDOUT_FILENO);
      dup2(fileno(devnull), STDERR_FILENO);
    }
    execv(argv[0].c_str(), args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string rooflineSvg(const std::vector<BenchResult>& results, const std::vector<Machine>& machines,
                        const std::string& title) {
  constexpr double W = 960, H = 620, left = 90, right = 250, top = 56, bottom = 84;
  const double pw = W - left - right, ph = H - top - bottom;

  bool tensor = false;
  std::vector<const BenchResult*> points, unplaced;
  for (const BenchResult& r : results) {
    if (r.work.flops > 0 && r.work.bytes > 0 && r.stats.median > 0)
      points.push_back(&r);
    else
      unplaced.push_back(&r);
    tensor = tensor || usesTensor(r);
  }

  // Axis ranges in decades: every point, and every roof's ridge point, with
  // a decade of room.
  double xlo = -2, xhi = 3, ylo = 1e300, yhi = 0;
  for (const Machine& m : machines) {
    if (m.bandwidth <= 0 || m.vecF32 <= 0) continue;
    double ridge = std::log10(m.vecF32 / m.bandwidth);
    xlo = std::min(xlo, std::floor(ridge) - 1);
    xhi = std::max(xhi, std::ceil(ridge) + 1);
    yhi = std::max(yhi, tensor && m.dotF16 > 0 ? m.dotF16 : m.vecF32);
    ylo = std::min(ylo, m.bandwidth * std::pow(10.0, -2));
  }
  for (const BenchResult* r : points) {
    double ai = r->work.flops / r->work.bytes, perf = r->flopsPerSecond();
    xlo = std::min(xlo, std::floor(std::log10(ai)) - 0.5);
    xhi = std::max(xhi, std::ceil(std::log10(ai)) + 0.5);
    ylo = std::min(ylo, perf);
    yhi = std::max(yhi, perf);
  }
  if (yhi <= 0) yhi = 1e12;
  if (ylo >= yhi || ylo <= 0) ylo = yhi / 1e4;
  // Whole decades, with a little room above the highest roof and below the lowest point.
  const double ey0 = std::floor(std::log10(ylo) - 0.3), ey1 = std::ceil(std::log10(yhi) + 0.3);
  xlo = std::floor(xlo);
  xhi = std::ceil(xhi);
  auto X = [&](double ai) { return left + (std::log10(ai) - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double f) { return top + (ey1 - std::log10(f)) / (ey1 - ey0) * ph; };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " +
       num(W) + " " + num(H) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
       xml(title) + "</text>\n";
  s += "<clipPath id=\"plot\"><rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) +
       "\" height=\"" + num(ph) + "\"/></clipPath>\n";

  // Grid and decade ticks.
  s += "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (int e = static_cast<int>(xlo); e <= static_cast<int>(xhi); ++e)
    s += "<line x1=\"" + num(X(std::pow(10.0, e))) + "\" y1=\"" + num(top) + "\" x2=\"" + num(X(std::pow(10.0, e))) +
         "\" y2=\"" + num(top + ph) + "\"/>\n";
  for (int e = static_cast<int>(ey0); e <= static_cast<int>(ey1); ++e)
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(Y(std::pow(10.0, e))) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
         num(Y(std::pow(10.0, e))) + "\"/>\n";
  s += "</g>\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
       "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<g class=\"x-ticks\" text-anchor=\"middle\">\n";
  for (int e = static_cast<int>(xlo); e <= static_cast<int>(xhi); ++e)
    s += "<text x=\"" + num(X(std::pow(10.0, e))) + "\" y=\"" + num(top + ph + 18) + "\">" + decadeLabel(e, false) +
         "</text>\n";
  s += "</g>\n<g class=\"y-ticks\" text-anchor=\"end\">\n";
  for (int e = static_cast<int>(ey0); e <= static_cast<int>(ey1); ++e)
    s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(Y(std::pow(10.0, e)) + 4) + "\">" + decadeLabel(e, true) +
         "</text>\n";
  s += "</g>\n";
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(H - 40) +
       "\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte of compulsory DRAM traffic, log scale)</text>\n";
  s += "<text transform=\"translate(22 " + num(top + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">performance (FLOP/s, log scale)</text>\n";

  // Roofs: min(peak, intensity x bandwidth).
  s += "<g clip-path=\"url(#plot)\" fill=\"none\" stroke-width=\"2\">\n";
  double ly = top + 6;
  std::string legend;
  for (size_t i = 0; i < machines.size(); ++i) {
    const Machine& m = machines[i];
    if (m.bandwidth <= 0 || m.vecF32 <= 0) continue;
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    auto roof = [&](double peak, const char* dash) {
      double x0 = std::pow(10.0, xlo), x1 = std::pow(10.0, xhi), ridge = peak / m.bandwidth;
      std::string pts = num(X(x0)) + "," + num(Y(x0 * m.bandwidth)) + " ";
      if (ridge > x0 && ridge < x1) pts += num(X(ridge)) + "," + num(Y(peak)) + " ";
      pts += num(X(x1)) + "," + num(Y(std::min(peak, x1 * m.bandwidth)));
      s += "<polyline class=\"roof\" data-machine=\"" + xml(m.id) + "\" points=\"" + pts + "\" stroke=\"" + color +
           "\"" + dash + "/>\n";
    };
    roof(m.vecF32, "");
    if (tensor && m.dotF16 > 0) roof(m.dotF16, " stroke-dasharray=\"6 4\" stroke-width=\"1.5\"");
    legend += "<line x1=\"" + num(W - right + 14) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(W - right + 38) +
              "\" y2=\"" + num(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    legend += "<text x=\"" + num(W - right + 44) + "\" y=\"" + num(ly + 4) + "\">" + xml(m.name) + "</text>\n";
    legend += "<text x=\"" + num(W - right + 44) + "\" y=\"" + num(ly + 18) + "\" font-size=\"10\" fill=\"#555\">" +
              xml(fmt::si(m.vecF32, "FLOP/s") + ", " + fmt::si(m.bandwidth, "B/s")) + "</text>\n";
    ly += 36;
  }
  s += "</g>\n";
  s += "<g class=\"legend\">\n" + legend;
  if (tensor)
    s += "<text x=\"" + num(W - right + 14) + "\" y=\"" + num(ly + 4) +
         "\" font-size=\"10\" fill=\"#555\">dashed: f16 tensor peak</text>\n";
  s += "</g>\n";

  // Points, labelled with what they are and how close to their roof.
  s += "<g class=\"points\">\n";
  for (const BenchResult* r : points) {
    double ai = r->work.flops / r->work.bytes, perf = r->flopsPerSecond();
    std::string label = r->id();
    if (!r->rooflineMachine.empty())
      label += " (" + fmt::percent(r->rooflineFraction) + " of " + r->rooflineMachine + ")";
    s += "<circle class=\"point\" cx=\"" + num(X(ai)) + "\" cy=\"" + num(Y(perf)) +
         "\" r=\"5\" fill=\"black\" stroke=\"white\"/>\n";
    // Labels right of the point, or left of it in the right third of the plot.
    bool leftOf = X(ai) > left + pw * 0.62;
    s += "<text x=\"" + num(X(ai) + (leftOf ? -8 : 8)) + "\" y=\"" + num(Y(perf) - 8) + "\" font-size=\"11\"" +
         (leftOf ? " text-anchor=\"end\"" : "") + ">" + xml(label) + "</text>\n";
  }
  s += "</g>\n";
  if (!unplaced.empty()) {
    std::string names;
    for (const BenchResult* r : unplaced) names += (names.empty() ? "" : ", ") + r->id();
    s += "<text x=\"" + num(left) + "\" y=\"" + num(H - 16) +
         "\" font-size=\"11\" fill=\"#555\">not placed (no flops " + "or no bytes): " + xml(names) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

ChartFiles writeRoofline(const std::string& svgPath, const std::vector<BenchResult>& results,
                         const std::vector<Machine>& machines, const std::string& title) {
  ChartFiles f;
  std::string svg = rooflineSvg(results, machines, title);
  {
    std::ofstream out(svgPath, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(svg.data(), static_cast<std::streamsize>(svg.size())))
      throw UsageError("--roofline: cannot write '" + svgPath + "'");
  }
  f.svg = svgPath;
  std::string png = svgPath;
  if (png.size() > 4 && png.compare(png.size() - 4, 4, ".svg") == 0) png.resize(png.size() - 4);
  png += ".png";
  if (std::string rsvg = findOnPath("rsvg-convert"); !rsvg.empty()) {
    if (runTool({rsvg, "-f", "png", "-o", png, svgPath}) == 0)
      f.png = png;
    else
      f.pngSkipped = "rsvg-convert failed on " + svgPath;
  } else if (std::string ink = findOnPath("inkscape"); !ink.empty()) {
    if (runTool({ink, svgPath, "--export-type=png", "--export-filename=" + png}) == 0)
      f.png = png;
    else
      f.pngSkipped = "inkscape failed on " + svgPath;
  } else {
    f.pngSkipped = "no SVG renderer found (rsvg-convert from librsvg2-bin, or inkscape): PNG skipped";
  }
  return f;
}

}  // namespace tessera::perf
