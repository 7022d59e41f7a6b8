// The `verify-tile-coverage` pass: checks that every output tile is stored
// exactly once (ir/analysis/TileCoverage.h says what that check
// establishes, and for which sizes). A violation is a VerifyError at the
// store; the IR is never changed. Its findings (checked, or why an output
// is not analysable) go to `notes` when given: `tessera opt` prints them.
#include "tessera/ir/Pass.h"
#include "tessera/ir/analysis/TileCoverage.h"

namespace tessera::ir {
namespace {

class VerifyTileCoverage : public Pass {
 public:
  explicit VerifyTileCoverage(std::vector<std::string>* notes) : notes_(notes) {}
  const char* name() const override { return "verify-tile-coverage"; }
  void run(Function& f) override {
    for (const TileCoverage& c : checkTileCoverage(f))
      if (notes_) notes_->push_back("tile coverage @" + f.name() + " " + c.output + ": " + c.text);
  }

 private:
  std::vector<std::string>* notes_;
};

}  // namespace

std::unique_ptr<Pass> createVerifyTileCoveragePass(std::vector<std::string>* notes) {
  return std::make_unique<VerifyTileCoverage>(notes);
}

}  // namespace tessera::ir
