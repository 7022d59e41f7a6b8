#include "Opt.h"

#include <memory>
#include <ostream>
#include <sstream>

#include "tessera/codegen/Compiler.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/support/Error.h"

namespace tessera::tools {

namespace {

// One chunk: parse, run the passes in order over every kernel, print. Runs
// of tile-IR passes go through a PassManager (which verifies the input and
// the IR after each pass); "layout" is the GPU lowering's analysis stage.
// The findings of verify-tile-coverage print as comments before the IR,
// which stays parseable.
std::string runChunk(const OptRequest& r, const std::string& text) {
  std::unique_ptr<ir::Module> m = ir::parseModule(text, r.bufferName);
  std::vector<std::string> notes;
  for (auto& f : m->functions) {
    ir::PassManager pm;
    auto flush = [&] {
      pm.run(*f);
      pm = ir::PassManager();
    };
    for (const std::string& p : r.passes) {
      if (p == "layout") {
        flush();
        if (r.target.empty()) throw UsageError("the layout pass needs --target (a GPU or emu: target)");
        codegen::CompileOptions o;
        o.numWarps = r.numWarps;
        codegen::annotateGpuLayouts(*f, codegen::Target::parse(r.target), o);
      } else if (p == "verify-tile-coverage") {
        pm.add(ir::createVerifyTileCoveragePass(&notes));
      } else {
        pm.add(ir::createPassByName(p));
      }
    }
    flush();
  }
  ir::PrintOptions po;
  po.locations = r.locations;
  std::string comments;
  for (const std::string& n : notes) comments += "// " + n + "\n";
  return comments + ir::print(*m, po);
}

// Chunks keep their lines' numbers in the whole file (earlier lines become
// empty lines), so messages point into the file the user edits.
std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> chunks{""};
  std::istringstream in(text);
  std::string line;
  size_t lineNo = 0;
  while (std::getline(in, line)) {
    if (line.rfind("// -----", 0) == 0)
      chunks.push_back(std::string(lineNo + 1, '\n'));
    else
      chunks.back() += line + "\n";
    ++lineNo;
  }
  return chunks;
}

}  // namespace

int runOpt(const OptRequest& r, std::ostream& out, std::ostream& err) {
  for (const std::string& p : r.passes)
    if (p != "layout") ir::createPassByName(p);  // a bad name is the request's error, reported once
  if (!r.splitInputFile) {
    out << runChunk(r, r.text);
    return 0;
  }
  int rc = 0;
  bool first = true;
  for (const std::string& chunk : split(r.text)) {
    if (!first) out << "// -----\n";
    first = false;
    try {
      out << runChunk(r, chunk);
    } catch (const InternalError&) {
      throw;
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      err << "tessera: error: " << e.what() << "\n";
      rc = 1;
    }
  }
  return rc;
}

}  // namespace tessera::tools
