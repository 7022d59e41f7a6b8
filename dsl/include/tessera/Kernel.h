// A kernel as the user holds it: the traced (or parsed) tile IR, immutable
// once built. Produced by tessera::kernel(...) (dsl/DSL.h) or parseKernel().
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/ir/IR.h"

namespace tessera {

class Kernel {
 public:
  Kernel() = default;
  /// Wraps IR built by hand (ir::Builder); verifies it, so that every Kernel
  /// is well formed (VerifyError otherwise).
  explicit Kernel(std::shared_ptr<const ir::Function> f);
  bool valid() const { return fn_ != nullptr; }
  const ir::Function& ir() const;
  const std::string& name() const { return ir().name(); }
  /// The kernel's tile IR in its textual form (as traced, before passes).
  std::string text() const;
  const std::shared_ptr<const ir::Function>& shared() const { return fn_; }
  /// This kernel written for thread-block clusters of `shape` programs
  /// along grid axes 0, 1, 2 (docs/dsl.md, "Clusters"), as CUDA's
  /// __cluster_dims__: every compile of it uses the shape
  /// (CompileOptions::cluster; one that asks for another is a UsageError).
  Kernel withCluster(std::array<int, 3> shape) const;
  /// {1, 1, 1} unless withCluster said otherwise.
  const std::array<int, 3>& cluster() const { return cluster_; }

 private:
  std::shared_ptr<const ir::Function> fn_;
  std::array<int, 3> cluster_ = {1, 1, 1};
};

/// Parses textual tile IR holding exactly one kernel (or picks `name` among
/// several) and verifies it. Throws ParseError / VerifyError.
Kernel parseKernel(std::string_view text, const std::string& bufferName = "<input>", const std::string& name = {});

}  // namespace tessera
