// Ahead-of-time export (tessera/codegen/Export.h): writes what the compile
// produced. CPU code is the object the JIT linked (or, for code this host
// cannot run, one generated from the very module the compile kept); GPU
// code is the artifact's PTX or code object as is.
#include "tessera/codegen/Export.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "codegen/ExportHeader.h"
#include "codegen/cpu/EntrySymbol.h"
#include "codegen/llvm/GpuToolchain.h"
#include "codegen/llvm/IsaFeatures.h"
#include "codegen/llvm/Jit.h"
#include "codegen/llvm/KeptModule.h"
#include "codegen/llvm/LLVMSupport.h"
#include "codegen/nvptx/NVPTXTargetInfo.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {
namespace {

void writeOut(const std::string& path, const std::string& bytes, ExportResult& r) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !out.flush())
    throw UsageError("export: cannot write '" + path + "'");
  r.files.push_back(path);
}

// Host object code of a CPU artifact: the object the JIT linked (also what
// the persistent compile cache keeps), or, for code this host cannot run,
// generated from the kept module (the functions carry their target-cpu and
// target-features, and the TargetMachine is the one their cpu selects).
std::string cpuObject(const Artifact& a) {
  if (!a.hostObject.empty()) return a.hostObject;
  TS_ASSERT(a.kept, "CPU artifact of @" + a.kernelName() + " kept no module");
  initLLVM();
  CpuTargetInfo t = selectCpuTarget(a.target.arch);
  std::lock_guard<std::mutex> lock(a.kept->mu);
  return emitFile(*a.kept->module, cpu::cachedTargetMachine(t, cpu::kAssemblyOptLevel),
                  llvm::CodeGenFileType::ObjectFile);
}

// cubin from the PTX, where the CUDA toolkit's ptxas is found.
void writeCubin(const Artifact& a, const std::string& path, ExportResult& r) {
  if (nvptx::findPtxas().path.empty()) {
    r.skipped.push_back("no " + path + ": ptxas not found (install the CUDA toolkit or set TESSERA_PTXAS)");
    return;
  }
  const GpuArch* row = findGpuArch(GpuArch::Vendor::NVIDIA, a.target.arch);
  TS_ASSERT(row, "no Targets.def row for " + a.target.str());
  const nvptx::Ptxas ptxas = nvptx::ptxasFor(*row, "the cubin of @" + a.kernelName());
  TempDir tmp;
  nvptx::runPtxas(ptxas, *row, a.binary.ptx, a.kernelName(), {}, tmp);
  writeOut(path, readFile(tmp.file("k.cubin")), r);
}

}  // namespace

std::string exportStem(const std::string& kernelName) {
  std::string s;
  for (char ch : kernelName) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "k_" + s;
  // The launcher struct is named after the stem: never one of its members'
  // names (a member named like its class is a constructor) nor a keyword.
  static const std::set<std::string> reserved = {
      "signature", "binary", "load", "launch", "hostFeatures", "kTarget",   "kHostCpu", "int", "float",  "double",
      "char",      "bool",   "void", "class",  "struct",       "namespace", "template", "new", "delete", "this"};
  if (reserved.count(s)) s += "_kernel";
  return s;
}

ExportResult exportArtifact(const Artifact& a, const std::string& dir) {
  const Target& t = a.target;
  if (t.kind == Target::Kind::EmuNVPTX || t.kind == Target::Kind::EmuAMDGPU)
    throw UsageError("export: target " + t.str() +
                     " runs only inside the SIMT emulator; export for cpu, nvptx:SM or amdgpu:GFX");
  if (a.binary.boundsChecked)
    throw UsageError("export: kernel '" + a.kernelName() +
                     "' was compiled with bounds checks; export an unchecked compile");
  if (a.binary.profiled)
    throw UsageError("export: kernel '" + a.kernelName() + "' was compiled with probes; export an unprofiled compile");
  if (dir.empty()) throw UsageError("export: the output directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw UsageError("export: cannot create the directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));

  ExportResult r;
  HeaderSpec spec;
  spec.stem = exportStem(a.kernelName());
  spec.target = t.str();
  const std::string base = dir + "/" + spec.stem;
  switch (t.kind) {
    case Target::Kind::CPU:
      spec.hostCpu = selectCpuTarget(t.arch).cpu;
      spec.hostFeatures = isaFeatures(t.arch);
      spec.entrySymbol = cpu::entrySymbol(a.kernelName());
      writeOut(base + ".o", cpuObject(a), r);
      break;
    case Target::Kind::NVPTX:
      writeOut(base + ".ptx", a.binary.ptx, r);
      writeCubin(a, base + ".cubin", r);
      break;
    case Target::Kind::AMDGPU:
      writeOut(base + ".hsaco", std::string(a.binary.codeObject.begin(), a.binary.codeObject.end()), r);
      break;
    default: break;
  }
  r.header = base + ".h";
  writeOut(r.header, exportHeader(a.binary, spec), r);
  return r;
}

}  // namespace tessera::codegen
