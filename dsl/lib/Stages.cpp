// The stages of a compile (tessera/Stages.def): their names, the dump
// folder (TESSERA_DUMP_DIR) every compile writes them into, and
// CompiledKernel::dump, which recompiles a kernel loaded from the persistent
// cache for any stage but its code.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "CompileInternal.h"
#include "tessera/support/Error.h"

namespace tessera {

const char* name(Stage s) {
  switch (s) {
#define TESSERA_STAGE(Enum, spelling, targets, description) \
  case Stage::Enum: return spelling;
#include "tessera/Stages.def"
  }
  return "?";
}

Stage parseStage(const std::string& s) {
  static const Stage all[] = {
#define TESSERA_STAGE(Enum, spelling, targets, description) Stage::Enum,
#include "tessera/Stages.def"
  };
  std::string list;
  for (size_t i = 0; i < std::size(all); ++i) {
    if (s == name(all[i])) return all[i];
    list += std::string(i == 0 ? "" : i + 1 == std::size(all) ? " or " : ", ") + name(all[i]);
  }
  throw UsageError("unknown stage '" + s + "' (expected " + list + ")");
}

namespace {

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return s;
}

// A debugging aid must never break the compile it describes: a dump folder
// that cannot be written is reported on stderr, once per folder, and the
// compile goes on.
void dumpWarning(const std::string& dir, const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(dir).second)
    std::fprintf(stderr, "tessera: warning: TESSERA_DUMP_DIR: %s; no stages are written there\n", what.c_str());
}

}  // namespace

void detail::writeDumps(const codegen::Artifact& a, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return dumpWarning(dir, "cannot create '" + dir + "': " + ec.message());
  std::string stem = dir + "/" + sanitize(a.kernelName()) + "." + sanitize(a.target.str());
  bool failed = false;
  auto put = [&](const std::string& suffix, const std::string& text) {
    if (failed) return;
    std::ofstream out(stem + "." + suffix);
    if (out) out << text;
    if (!out) {
      failed = true;
      dumpWarning(dir, "cannot write '" + stem + "." + suffix + "'");
    }
  };
  int i = 0;
  for (const auto& [pass, text] : a.dumps.tileIR) {
    char idx[16];
    std::snprintf(idx, sizeof idx, "%02d", i++);
    put(std::string("tile-ir.") + idx + "." + sanitize(pass) + ".tir", text);
  }
  put("llvm.ll", a.dumps.llvm);
  put("llvm-opt.ll", a.dumps.llvmOpt);
  put(a.target.kind == Target::Kind::CPU ? "asm.s" : (a.binary.ptx.empty() ? "amdgcn.s" : "ptx"), a.assembly());
  if (!a.binary.codeObject.empty()) put("hsaco", std::string(a.binary.codeObject.begin(), a.binary.codeObject.end()));
  for (const auto& [k, text] : a.dumps.extra)
    if (k != "hsaco") put(sanitize(k) + ".txt", text);
}

std::string CompiledKernel::dump(Stage s) const {
  if (!state_) throw UsageError("dump: this CompiledKernel is empty (default-constructed)");
  // The code itself is in the artifact a launch runs; every other stage
  // comes from the complete artifact (recompiled if it came from disk).
  const codegen::Artifact& code = *state_->artifact;
  if (s == Stage::PTX && !code.binary.ptx.empty()) return code.binary.ptx;
  if (s == Stage::HSACO && !code.binary.codeObject.empty())
    return std::string(code.binary.codeObject.begin(), code.binary.codeObject.end());
  requireTarget(s);
  const codegen::Artifact& art = state_->compiled->complete();
  const auto& d = art.dumps;
  switch (s) {
    case Stage::TileIR: return d.tileIR.empty() ? std::string() : d.tileIR.back().second;
    case Stage::TileIRPasses: {
      std::string out;
      for (const auto& [pass, text] : d.tileIR) out += "// ----- tile IR after " + pass + " ----- //\n" + text + "\n";
      return out;
    }
    case Stage::LLVM: return d.llvm;
    case Stage::LLVMOptimized: return d.llvmOpt;
    case Stage::Assembly: return art.assembly();
    case Stage::PTX: return art.binary.ptx;
    case Stage::SASS: return codegen::sass(*state_->artifact);
    case Stage::AMDGCN: return art.assembly();
    case Stage::HSACO: return std::string(art.binary.codeObject.begin(), art.binary.codeObject.end());
    case Stage::LLVMGpu:
    case Stage::LayoutStats: {
      auto it = d.extra.find(name(s));
      if (it == d.extra.end()) throw InternalError(std::string("stage ") + name(s) + " missing from a GPU compile");
      return it->second;
    }
    case Stage::Resources: return codegen::resourceReport(art);
  }
  return {};
}

void CompiledKernel::requireTarget(Stage s) const {
  const Target& t = state_->artifact->target;
  const bool nvptx = t.kind == Target::Kind::NVPTX || t.kind == Target::Kind::EmuNVPTX;
  const bool amdgpu = t.kind == Target::Kind::AMDGPU || t.kind == Target::Kind::EmuAMDGPU;
  enum Targets { Any, NVPTX, AMDGPU, GPU };
  Targets has = Any;
  switch (s) {
#define TESSERA_STAGE(Enum, spelling, targets, description) \
  case Stage::Enum: has = targets; break;
#include "tessera/Stages.def"
  }
  if (has == GPU && !t.isGpu())
    throw UsageError(std::string("stage ") + name(s) + " exists only for GPU targets, not " + t.str());
  if ((has == NVPTX && !nvptx) || (has == AMDGPU && !amdgpu))
    throw UsageError(std::string("stage ") + name(s) + " does not exist for target " + t.str());
}

}  // namespace tessera
