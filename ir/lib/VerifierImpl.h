// The verifier's checker, shared by its files: the structure and the
// control-flow ops (Verifier.cpp), and one family of ops per file
// (VerifyValues.cpp, VerifyMemory.cpp, VerifyCompute.cpp). Messages read
//   <file:line:col>: error: '<op>' <what is wrong>
//   <the op's printed text>
// with the kernel name in place of an unknown location.
#pragma once

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <unordered_set>

#include "PrinterDetail.h"
#include "tessera/ir/Atomics.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Error.h"

namespace tessera::ir::detail {

// Tiles live in registers; this bound only keeps element-count arithmetic
// (reshape, numElements) far away from overflow on malformed input.
constexpr int64_t kMaxTileElements = int64_t{1} << 31;

inline std::string ts(const Type& t) { return t.str(); }

class Verifier {
 public:
  explicit Verifier(const Function& f) : f_(f), names_(f) {}

  void run();

 private:
  static constexpr size_t kMaxNameLength = 1024;
  static bool isIdentifier(const std::string& n) {
    if (n.empty() || n.size() > kMaxNameLength) return false;
    auto alpha = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(static_cast<unsigned char>(n[0]))) return false;
    for (unsigned char c : n)
      if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    return true;
  }

  // ---- diagnostics -----------------------------------------------------------
  std::string where(const Location& l) const { return l.known() ? l.str() : f_.name(); }

  [[noreturn]] void fail(const Op& op, const std::string& msg) const {
    throw VerifyError(where(op.loc()) + ": error: '" + op.name() + "' " + msg + "\n" +
                      detail::opHeader(op, names_, true));
  }
  [[noreturn]] void failKernel(const std::string& msg) const {
    throw VerifyError(where(f_.loc()) + ": error: kernel @" + f_.name() + ": " + msg);
  }

  static std::optional<std::string> typeProblem(const Type& t) {
    // The MX codes are host formats: kernels take their codes as u8 and
    // decode them with ts::dot_scaled or integer ops (docs/dtypes.md).
    if (!t.isNone() && isMx(t.dtype()))
      return std::string(name(t.dtype())) +
             " is a host format (MxFormats.h): a kernel holds its codes in u8 (f4e2m1 two a byte), see "
             "docs/dtypes.md";
    switch (t.kind()) {
      case Type::Kind::None: return "missing type";
      case Type::Kind::Scalar:
      case Type::Kind::Pointer: return std::nullopt;
      case Type::Kind::Tile:
      case Type::Kind::Buffer: {
        if (t.rank() < 1 || t.rank() > kMaxTileRank) return "rank must be 1.." + std::to_string(kMaxTileRank);
        int64_t n = 1;
        for (int64_t d : t.shape()) {
          if (d <= 0) return std::string("dimensions must be positive");
          if (n > kMaxTileElements / d) return std::string("too many elements");
          n *= d;
        }
        if (t.isBuffer() && t.space() == MemSpace::Global)
          return std::string("a buffer lives in shared or local memory");
        return std::nullopt;
      }
    }
    return "unknown type kind";
  }

  // ---- attribute access that reports instead of asserting --------------------
  int64_t intAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<int64_t>(it->second))
      fail(op, std::string("needs an integer attribute '") + k + "'");
    return std::get<int64_t>(it->second);
  }
  const std::string& strAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<std::string>(it->second))
      fail(op, std::string("needs a string attribute '") + k + "'");
    return std::get<std::string>(it->second);
  }
  /// The order and scope of an atomic or a fence; returns the order.
  MemOrder memAttrs(const Op& op) const {
    auto order = parseMemOrder(strAttr(op, "order"));
    if (!order) fail(op, "unknown order '" + strAttr(op, "order") + "' (expected relaxed, acquire, release, acq_rel)");
    if (!parseMemScope(strAttr(op, "scope")))
      fail(op, "unknown scope '" + strAttr(op, "scope") + "' (expected program, device, system)");
    return *order;
  }
  const std::vector<int64_t>& intsAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
      fail(op, std::string("needs an integer-list attribute '") + k + "'");
    return std::get<std::vector<int64_t>>(it->second);
  }

  // ---- arity -----------------------------------------------------------------
  void operands(const Op& op, unsigned lo, unsigned hi) const {
    unsigned n = op.numOperands();
    if (n < lo || n > hi) {
      std::string want = lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
      fail(op, "expects " + want + " operands, got " + std::to_string(n));
    }
  }
  void results(const Op& op, unsigned n) const {
    if (op.numResults() != n)
      fail(op, "expects " + std::to_string(n) + " results, got " + std::to_string(op.numResults()));
  }
  void checkJoinRank(const Op& op) const {
    const Type& a = op.operand(0)->type();
    if (a.rank() + 1 > kMaxTileRank)
      fail(op, "joining " + ts(a) + " would give a tile of rank " + std::to_string(a.rank() + 1) +
                   ", above the maximum of " + std::to_string(kMaxTileRank));
  }
  const Type& in(const Op& op, unsigned i) const { return op.operand(i)->type(); }
  const Type& out(const Op& op) const { return op.result(0)->type(); }

  void resultIs(const Op& op, const Type& want) const {
    if (out(op) != want) fail(op, "result type " + ts(out(op)) + " should be " + ts(want));
  }
  void maskFor(const Op& op, unsigned i, const Type& ptrT) const {
    const Type& m = in(op, i);
    if (!m.isNumeric() || m.dtype() != DType::I1 || m.shape() != ptrT.shape())
      fail(op, "mask " + ts(m) + " must be i1 with the shape of the pointer " + ts(ptrT));
  }

  // ---- structure (Verifier.cpp) ------------------------------------------------
  void verifyBlock(const Block& b, const Op* owner, int depth = 0);
  void checkYield(const Op& owner, const Block& b, const char* which) const;

  // ---- per-op rules: one family of ops per file ---------------------------------
  void checkFp8Use(const Op& op) const;
  void verifyOp(const Op& op, const Op* owner);
  // Each checks `op` and returns true if it is of its family.
  bool verifyValueOp(const Op& op);                     // VerifyValues.cpp
  bool verifyMemoryOp(const Op& op);                    // VerifyMemory.cpp
  bool verifyComputeOp(const Op& op);                   // VerifyCompute.cpp
  bool verifyControlOp(const Op& op, const Op* owner);  // Verifier.cpp
  void checkElementwiseDType(const Op& op, const Type& t) const;

  const Function& f_;
  ValueNames names_;
  std::unordered_set<const Value*> visible_;
};

}  // namespace tessera::ir::detail
