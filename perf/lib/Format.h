// Text tables and number formatting shared by the perf tools' reports.
// Private to perf/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::perf::fmt {

/// A table of text cells: the first column left-aligned, the others right-
/// aligned, columns separated by two spaces, a rule under the header.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// Columns listed here are left-aligned too.
  void leftAlign(size_t column) { left_.push_back(column); }
  std::string str() const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> left_;
};

/// `v` with 3 significant digits and the SI prefix that keeps it in
/// [1, 1000): "1.23 G" + unit. 0 prints as "0 unit"; non-finite as "-".
std::string si(double v, const std::string& unit);
/// 3 significant digits without a prefix ("0.625", "85.4", "1230").
std::string sig3(double v);
/// Bytes with a binary prefix, as caches are sized ("50 MiB", "512 KiB").
std::string binary(uint64_t bytes);
/// A fixed number of decimals ("12.5").
std::string fixed(double v, int decimals);
/// A percentage with one decimal ("12.5%").
std::string percent(double fraction);

}  // namespace tessera::perf::fmt
