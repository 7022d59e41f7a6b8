// Printer internals shared with the verifier (not a public header): the
// verifier quotes the offending op in the same numbering the printer uses,
// so a message can be matched against a dump of the whole kernel.
#pragma once

#include <string>
#include <unordered_map>

#include "tessera/ir/IR.h"

namespace tessera::ir::detail {

/// Names of every value of a function, as the printer writes them ("%3",
/// "%out"). Built once per function.
class ValueNames {
 public:
  explicit ValueNames(const Function& f);
  /// "%N" for known values; "%<?>" for a value not defined in the function
  /// (malformed IR must still print, never crash).
  std::string name(const Value* v) const;

 private:
  void numberBlock(const Block& b);
  std::unordered_map<const Value*, std::string> names_;
  unsigned next_ = 0;
};

/// Whether `s` prints bare (an identifier that cannot be mistaken for a
/// number or a keyword value such as inf / nan).
bool isBareIdentifier(const std::string& s);
/// `s` in double quotes with \" \\ and \xx escapes.
std::string quote(const std::string& s);
/// An attribute value in the textual syntax the parser reads back.
std::string attrText(const Attr& a);
/// One op's first line (results, name, operands, attrs, types, location),
/// without its regions.
std::string opHeader(const Op& op, const ValueNames& names, bool locations);

}  // namespace tessera::ir::detail
