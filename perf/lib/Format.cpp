#include "Format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera::perf::fmt {

std::string Table::str() const {
  size_t cols = 0;
  for (const auto& r : rows_) cols = std::max(cols, r.size());
  std::vector<size_t> width(cols, 0);
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto isLeft = [&](size_t c) { return c == 0 || std::find(left_.begin(), left_.end(), c) != left_.end(); };
  std::string out;
  for (size_t i = 0; i < rows_.size(); ++i) {
    std::string line;
    for (size_t c = 0; c < cols; ++c) {
      std::string cell = c < rows_[i].size() ? rows_[i][c] : "";
      std::string pad(width[c] - cell.size(), ' ');
      if (c) line += "  ";
      line += isLeft(c) ? cell + pad : pad + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (i == 0) {
      size_t total = 0;
      for (size_t c = 0; c < cols; ++c) total += width[c] + (c ? 2 : 0);
      out += std::string(total, '-') + "\n";
    }
  }
  return out;
}

std::string si(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) return unit.empty() ? "0" : "0 " + unit;
  static const char* kPrefix[] = {"p", "n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3));
  e = std::clamp(e, -4, 6);
  // Round to 3 significant digits first (99.99999 is 100, not 100.0); a
  // value that rounds to 1000 moves to the next prefix.
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2e", v / std::pow(10.0, 3 * e));
  double scaled = std::atof(buf);
  if (std::fabs(scaled) >= 1000 && e < 6) {
    ++e;
    scaled /= 1000;
  }
  int decimals = std::fabs(scaled) >= 100 ? 0 : std::fabs(scaled) >= 10 ? 1 : 2;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, scaled);
  std::string r = std::string(buf) + " " + kPrefix[e + 4] + unit;
  while (!r.empty() && r.back() == ' ') r.pop_back();
  return r;
}

std::string sig3(double v) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) return "0";
  int digits = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  return fixed(v, std::max(0, 2 - digits));
}

std::string binary(uint64_t bytes) {
  static const char* kUnit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return (v == std::floor(v) ? fixed(v, 0) : fixed(v, 1)) + " " + kUnit[u];
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return fixed(fraction * 100, 1) + "%";
}

}  // namespace tessera::perf::fmt
