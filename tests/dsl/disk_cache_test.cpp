// The persistent compile cache (tessera/Cache.h, codegen/cache/): entries
// written and loaded back ready to launch, stages of a hit recompiled on
// request, the key's parts and the explanation of a miss, corrupt,
// truncated and foreign entries, folders that are missing, unwritable or
// full, the size limit. Every test uses a folder of its own (never the
// user's); tests/cache_test.sh runs the same faults across processes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tessera/tessera.h"

namespace ts = tessera;
namespace fs = std::filesystem;

namespace {

ts::Kernel scaleKernel(int BLOCK, float factor, const char* name = "scale") {
  return ts::kernel(name, {"out", "in", "n"}, [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * BLOCK + ts::arange(BLOCK);
    auto m = i < n;
    ts::store(out + i, ts::load(in + i, m) * factor, m);
  });
}

// A fresh cache folder for one test, and the process's settings pointing at
// it; both undone at the end. The in-memory cache is cleared, so every
// compile goes to the disk cache.
struct CacheDir {
  fs::path dir;
  explicit CacheDir(uint64_t maxBytes = uint64_t{1} << 30) {
    static int n = 0;
    dir = fs::temp_directory_path() /
          ("tessera_disk_cache_test." + std::to_string(::getpid()) + "." + std::to_string(n++));
    fs::remove_all(dir);
    set(dir.string(), maxBytes);
  }
  static void set(const std::string& d, uint64_t maxBytes = uint64_t{1} << 30, bool enabled = true) {
    ts::DiskCacheSettings s;
    s.dir = d;
    s.maxBytes = maxBytes;
    s.enabled = enabled;
    ts::setDiskCacheSettings(s);
    ts::clearCache();
    ts::codegen::resetDiskCacheCounters();
  }
  ~CacheDir() {
    ts::resetDiskCacheSettings();
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> r;
    std::error_code ec;
    if (fs::is_directory(dir / "kernels", ec))
      for (auto& e : fs::directory_iterator(dir / "kernels"))
        if (e.path().extension() == ".tce") r.push_back(e.path());
    return r;
  }
};

// What the code under test writes on stderr while it runs.
struct StderrCapture {
  int saved = -1;
  std::string path;
  StderrCapture() {
    path = (fs::temp_directory_path() / ("tessera_stderr." + std::to_string(::getpid()))).string();
    std::fflush(stderr);
    saved = ::dup(2);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  std::string text() {
    std::fflush(stderr);
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    ::unlink(path.c_str());
  }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Launches the scale kernel on 1000 values and checks every result.
void checkScale(const ts::CompiledKernel& k, float factor) {
  auto dev = ts::Device::cpu();
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) - 500.0f;
  auto din = dev.upload(ts::DType::F32, in);
  auto dout = dev.alloc(ts::DType::F32, in.size());
  k.launch({4}, dout, din, int32_t(in.size()));
  auto out = dout.read<float>();
  for (size_t i = 0; i < in.size(); ++i) REQUIRE(out[i] == in[i] * factor);
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("a CPU compile is kept on disk and loaded back ready to launch, its stages recompiled on request",
          "[dsl][diskcache]") {
  CacheDir cd;
  auto dev = ts::Device::cpu();
  ts::CompiledKernel cold = ts::compile(scaleKernel(256, 3.0f), dev);
  CHECK_FALSE(cold.fromDiskCache());
  REQUIRE(cd.entries().size() == 1);
  CHECK(ts::diskCacheStats().process.stores == 1);
  const std::string coldIr = cold.dump(ts::Stage::TileIR), coldLlvm = cold.dump(ts::Stage::LLVMOptimized);

  ts::clearCache();  // as a new process would: only the disk has it
  ts::CompiledKernel hit = ts::compile(scaleKernel(256, 3.0f), dev);
  CHECK(hit.fromDiskCache());
  CHECK(ts::diskCacheStats().process.hits == 1);
  CHECK(hit.signature().str() == cold.signature().str());
  checkScale(hit, 3.0f);
  // Every stage is still there: recompiled once, the same text.
  CHECK(hit.dump(ts::Stage::TileIR) == coldIr);
  CHECK(hit.dump(ts::Stage::LLVMOptimized) == coldLlvm);
  CHECK(hit.dump(ts::Stage::Assembly).find("tessera_entry_scale") != std::string::npos);
  CHECK(hit.artifact().dumps.llvm == cold.artifact().dumps.llvm);
  checkScale(hit, 3.0f);  // the launch still runs the cached code
}

TEST_CASE("PTX and AMDGPU code objects come back from disk byte for byte", "[dsl][diskcache]") {
  CacheDir cd;
  for (const char* t : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    ts::Target target = ts::Target::parse(t);
    ts::CompiledKernel cold = ts::compile(scaleKernel(256, 2.0f), target);
    ts::clearCache();
    ts::CompiledKernel hit = ts::compile(scaleKernel(256, 2.0f), target);
    INFO(t);
    CHECK(hit.fromDiskCache());
    const auto& a = hit.artifact().binary;  // (recompiled for the stages; the code is the same)
    CHECK(a.format == cold.artifact().binary.format);
    if (target.kind == ts::Target::Kind::NVPTX) {
      CHECK(hit.dump(ts::Stage::PTX) == cold.dump(ts::Stage::PTX));
      CHECK(hit.dump(ts::Stage::PTX).find(".entry scale") != std::string::npos);
      // SASS is assembled from the PTX the artifact carries (a hit has no
      // stage dumps of its own).
      std::string sass;
      try {
        sass = hit.dump(ts::Stage::SASS);
      } catch (const ts::DeviceError& e) {
        // Only a missing tool skips; ptxas rejecting the PTX is a failure.
        if (std::string(e.what()).rfind("SASS needs", 0) != 0) FAIL(e.what());
        WARN("SKIPPED the SASS check: " << e.what());
      }
      if (!sass.empty()) {
        CHECK(sass == cold.dump(ts::Stage::SASS));
        CHECK(sass.find("EXIT") != std::string::npos);
      }
    } else {
      CHECK(hit.dump(ts::Stage::HSACO) == cold.dump(ts::Stage::HSACO));
    }
    CHECK(hit.dump(ts::Stage::TileIR) == cold.dump(ts::Stage::TileIR));
  }
  CHECK(cd.entries().size() == 2);
}

TEST_CASE("arguments of every dtype come back from disk", "[dsl][diskcache]") {
  // One pointer and one scalar of each dtype (u8..u64 come last in the
  // enum): a hit needs every one decoded, with no warning.
  CacheDir cd;
  auto kern = [] {
    return ts::kernel("all_dtypes", [](ts::Ptr<uint64_t> out, ts::Ptr<const uint8_t> a, ts::Ptr<const uint16_t> b,
                                       ts::Ptr<const int8_t> c, ts::Ptr<const ts::bfloat16> d, ts::UInt x, ts::ULong y,
                                       ts::Long z, ts::Double w) {
      auto v = ts::load(a).to(ts::u64) + ts::load(b).to(ts::u64) + ts::load(c).to(ts::u64) + ts::load(d).to(ts::u64) +
               x.to(ts::u64) + y + z.to(ts::u64) + w.to(ts::u64);
      ts::store(out, v);
    });
  };
  auto dev = ts::Device::cpu();
  ts::CompiledKernel cold = ts::compile(kern(), dev);
  ts::clearCache();
  StderrCapture err;
  ts::CompiledKernel hit = ts::compile(kern(), dev);
  CHECK(hit.fromDiskCache());
  CHECK(err.text().find("warning") == std::string::npos);
  CHECK(hit.signature().str() == cold.signature().str());
  auto out = dev.alloc(ts::DType::U64, 1);
  hit.launch({1}, out, dev.upload(ts::DType::U8, std::vector<uint8_t>{200}),
             dev.upload(ts::DType::U16, std::vector<uint16_t>{60000}),
             dev.upload(ts::DType::I8, std::vector<int8_t>{3}),
             dev.upload(ts::DType::BF16, std::vector<uint16_t>{0x4000}), uint32_t(4000000000u), uint64_t(1) << 63,
             int64_t(5), 6.0);
  CHECK(out.read<uint64_t>()[0] == 200 + 60000 + 3 + 2 + 4000000000ull + (uint64_t(1) << 63) + 5 + 6);
}

TEST_CASE("a checked CPU compile keeps its op names on disk", "[dsl][diskcache]") {
  CacheDir cd;
  ts::CompileOptions checked;
  checked.checkBounds = true;
  auto dev = ts::Device::cpu();
  ts::compile(scaleKernel(256, 3.0f), dev, checked);
  ts::clearCache();
  ts::CompiledKernel hit = ts::compile(scaleKernel(256, 3.0f), dev, checked);
  REQUIRE(hit.fromDiskCache());
  // 1000 floats in a 10-element buffer: the checked launch names the load.
  std::vector<float> in(10, 1.0f);
  auto din = dev.upload(ts::DType::F32, in);
  auto dout = dev.alloc(ts::DType::F32, 1000);
  try {
    hit.launch({4}, dout, din, int32_t(1000));
    FAIL("no bounds error");
  } catch (const ts::LaunchError& e) {
    CHECK(std::string(e.what()).find("out-of-bounds access by 'load @ ") != std::string::npos);
  }
}

TEST_CASE("export works from a disk-cache hit and writes the object the JIT ran", "[dsl][diskcache][export]") {
  if (!ts::codegen::cannotRunOnHost(ts::Target::parse("cpu:x86-64-v3")).empty()) {
    WARN("this host cannot run cpu:x86-64-v3 code: such compiles are not kept");
    return;
  }
  CacheDir cd;
  fs::path out1 = cd.dir / "export-cold", out2 = cd.dir / "export-hit";
  ts::exportKernel(scaleKernel(128, 5.0f), ts::Target::parse("cpu:x86-64-v3"), out1.string());
  ts::clearCache();
  ts::exportKernel(scaleKernel(128, 5.0f), ts::Target::parse("cpu:x86-64-v3"), out2.string());
  CHECK(ts::diskCacheStats().process.hits == 1);
  CHECK(readFile(out1 / "scale.o") == readFile(out2 / "scale.o"));
  CHECK(readFile(out1 / "scale.h") == readFile(out2 / "scale.h"));
}

TEST_CASE("the key parts tell what changed: explainCompile against the nearest entry", "[dsl][diskcache]") {
  CacheDir cd;
  const ts::Target ptx = ts::Target::parse("nvptx:sm_90a");
  ts::compile(scaleKernel(256, 3.0f), ptx);

  ts::CacheExplanation same = ts::explainCompile(scaleKernel(256, 3.0f), ptx);
  CHECK(same.cached);
  CHECK(same.str().find("cached: ") != std::string::npos);

  ts::CompileOptions eight;
  eight.numWarps = 8;
  ts::CacheExplanation warps = ts::explainCompile(scaleKernel(256, 3.0f), ptx, eight);
  CHECK_FALSE(warps.cached);
  REQUIRE(warps.nearest);
  REQUIRE(warps.differences.size() == 1);
  CHECK(warps.differences[0].part == "options");
  CHECK(warps.differences[0].summary == "num-warps 4 -> 8");

  ts::CacheExplanation constant = ts::explainCompile(scaleKernel(256, 4.0f), ptx);
  REQUIRE(constant.nearest);
  REQUIRE(constant.differences.size() == 1);
  CHECK(constant.differences[0].part == "ir");
  INFO(constant.differences[0].summary);
  // The constants as the IR prints them: 3 and 4 in hexadecimal floating point.
  CHECK(constant.differences[0].summary.find("{value = 0x1.8p+1}") != std::string::npos);
  CHECK(constant.differences[0].summary.find("{value = 0x1p+2}") != std::string::npos);
  CHECK(constant.differences[0].summary.rfind("line ", 0) == 0);

  ts::CacheExplanation target = ts::explainCompile(scaleKernel(256, 3.0f), ts::Target::parse("nvptx:sm_80"));
  REQUIRE(target.nearest);
  REQUIRE(target.differences.size() == 1);
  CHECK(target.differences[0].summary == "'nvptx:sm_90a' -> 'nvptx:sm_80'");  // the entry's, then this compile's

  ts::CacheExplanation other = ts::explainCompile(scaleKernel(256, 3.0f, "other"), ptx);
  CHECK_FALSE(other.nearest);
  CHECK(other.note.find("no entry of kernel 'other'") != std::string::npos);

  // The CPU target carries the host as resolved: another cpu is a change
  // of the target and of the LLVM cpu.
  ts::compile(scaleKernel(256, 3.0f), ts::Target::parse("cpu:x86-64-v3"));
  ts::CacheExplanation cpu = ts::explainCompile(scaleKernel(256, 3.0f), ts::Target::parse("cpu:x86-64"));
  REQUIRE(cpu.nearest);
  std::string parts;
  for (const auto& d : cpu.differences) parts += d.part + " ";
  CHECK(parts == "target host-cpu ");  // a pinned cpu's features come with its name
  // explain never compiles, never writes
  CHECK(cd.entries().size() == 2);
}

TEST_CASE("corrupt, truncated and foreign entries are reported once and recompiled", "[dsl][diskcache]") {
  CacheDir cd;
  auto dev = ts::Device::cpu();
  ts::compile(scaleKernel(256, 7.0f, "other"), dev);
  REQUIRE(cd.entries().size() == 1);
  const fs::path otherEntry = cd.entries()[0];
  ts::compile(scaleKernel(256, 3.0f), dev);
  REQUIRE(cd.entries().size() == 2);
  fs::path entry = cd.entries()[0] == otherEntry ? cd.entries()[1] : cd.entries()[0];
  const std::string good = readFile(entry);

  struct Damage {
    const char* what;
    std::string bytes;
    const char* message;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  std::string header = good;
  header[10] ^= 1;  // the format number
  std::vector<Damage> damages = {
      {"a flipped byte", flipped, "checksum mismatch (corrupt or truncated)"},
      {"half the file", good.substr(0, good.size() / 2), "checksum mismatch (corrupt or truncated)"},
      {"the header alone", good.substr(0, 20), "truncated (20 bytes)"},
      {"nothing", "", "empty file (truncated)"},
      {"another kernel's entry", readFile(otherEntry), "foreign entry: it holds the key"},
      {"another program's file", "#!/bin/sh\necho not a cache entry\n", "not a Tessera cache entry (foreign file)"},
      {"another format", header, "written in cache format"},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    writeFile(entry, d.bytes);
    ts::clearCache();
    ts::codegen::resetDiskCacheCounters();
    StderrCapture err;
    ts::CompiledKernel k = ts::compile(scaleKernel(256, 3.0f), dev);
    CHECK_FALSE(k.fromDiskCache());
    checkScale(k, 3.0f);  // never the other kernel's code
    CHECK(ts::diskCacheStats().process.rejected == 1);
    std::string said = err.text();
    CHECK(count(said, d.message) == 1);
    CHECK(count(said, "tessera: warning: compile cache:") == 1);
    // The recompile replaced the entry: the next lookup is a hit.
    CHECK(readFile(entry) == good);
    ts::clearCache();
    CHECK(ts::compile(scaleKernel(256, 3.0f), dev).fromDiskCache());
  }
}

TEST_CASE("a missing folder is created, one that cannot be is reported once and compiles go on", "[dsl][diskcache]") {
  CacheDir cd;
  auto dev = ts::Device::cpu();
  // Missing, several levels deep: created at the first store.
  CacheDir::set((cd.dir / "a" / "b" / "c").string());
  ts::compile(scaleKernel(256, 3.0f), dev);
  CHECK(fs::is_directory(cd.dir / "a" / "b" / "c" / "kernels"));
  CHECK(ts::diskCacheStats().process.stores == 1);

  // A path through a regular file, and one on a read-only file system.
  fs::create_directories(cd.dir);
  writeFile(cd.dir / "file", "x");
  for (std::string bad : {(cd.dir / "file" / "cache").string(), std::string("/proc/self/tessera-cache")}) {
    INFO(bad);
    CacheDir::set(bad);
    StderrCapture err;
    for (int i = 0; i < 3; ++i) {
      ts::clearCache();
      ts::CompiledKernel k = ts::compile(scaleKernel(256, 3.0f + float(i)), dev);
      CHECK_FALSE(k.fromDiskCache());
      checkScale(k, 3.0f + float(i));
    }
    CHECK(ts::diskCacheStats().process.storeFailures == 3);
    CHECK(count(err.text(), "tessera: warning: compile cache:") == 1);  // once, not per compile
    CHECK(count(err.text(), "cannot create the folder") == 1);
  }
}

TEST_CASE("a read-only folder still serves its entries and takes no new ones", "[dsl][diskcache]") {
  CacheDir cd;
  auto dev = ts::Device::cpu();
  ts::compile(scaleKernel(256, 3.0f), dev);
  fs::permissions(cd.dir / "kernels", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                          fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  if (::access((cd.dir / "kernels").c_str(), W_OK) == 0) {
    // root writes anyway: tests/cache_test.sh readonly covers it with a
    // read-only bind mount.
    WARN("permissions do not bind this user (root): the read-only case runs in tests/cache_test.sh");
    return;
  }
  ts::clearCache();
  ts::codegen::resetDiskCacheCounters();
  StderrCapture err;
  CHECK(ts::compile(scaleKernel(256, 3.0f), dev).fromDiskCache());
  checkScale(ts::compile(scaleKernel(256, 9.0f), dev), 9.0f);
  checkScale(ts::compile(scaleKernel(256, 8.0f), dev), 8.0f);
  CHECK(ts::diskCacheStats().process.storeFailures == 2);
  CHECK(count(err.text(), "cannot create a file in") == 1);
}

TEST_CASE("the size limit evicts the least recently used entries", "[dsl][diskcache]") {
  auto dev = ts::Device::cpu();
  {
    // A limit of one byte: nothing stays, and nothing fails.
    CacheDir cd(1);
    for (int i = 0; i < 3; ++i) {
      ts::clearCache();
      ts::CompiledKernel k = ts::compile(scaleKernel(256, 3.0f), dev);
      CHECK_FALSE(k.fromDiskCache());
      checkScale(k, 3.0f);
    }
    CHECK(cd.entries().empty());
    CHECK(ts::diskCacheStats().process.evictions == 3);
  }
  CacheDir cd;
  ts::compile(scaleKernel(256, 1.0f), dev);
  const uint64_t one = fs::file_size(cd.entries().at(0));
  // Room for three entries of about this size.
  CacheDir::set(cd.dir.string(), 3 * one + one / 2);
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  pause();
  ts::compile(scaleKernel(256, 2.0f), dev);
  pause();
  ts::compile(scaleKernel(256, 3.0f), dev);
  pause();
  ts::clearCache();
  CHECK(ts::compile(scaleKernel(256, 1.0f), dev).fromDiskCache());  // used: now the most recent
  pause();
  ts::compile(scaleKernel(256, 4.0f), dev);  // a fourth: the least recently used (2.0) goes
  CHECK(cd.entries().size() == 3);
  CHECK(ts::diskCacheStats().process.evictions == 1);
  ts::clearCache();
  CHECK_FALSE(ts::compile(scaleKernel(256, 2.0f), dev).fromDiskCache());
  ts::clearCache();
  CHECK(ts::compile(scaleKernel(256, 4.0f), dev).fromDiskCache());
}

TEST_CASE("the cache can be turned off for the process and for one compile", "[dsl][diskcache]") {
  CacheDir cd;
  auto dev = ts::Device::cpu();
  CacheDir::set(cd.dir.string(), uint64_t{1} << 30, /*enabled=*/false);
  checkScale(ts::compile(scaleKernel(256, 3.0f), dev), 3.0f);
  CHECK_FALSE(fs::exists(cd.dir));
  CHECK(ts::explainCompile(scaleKernel(256, 3.0f), dev).note.find("the cache is off") != std::string::npos);

  CacheDir::set(cd.dir.string());
  ts::CompileOptions off;
  off.useDiskCache = false;
  checkScale(ts::compile(scaleKernel(256, 3.0f), dev, off), 3.0f);
  CHECK_FALSE(fs::exists(cd.dir));
  ts::clearCache();
  ts::compile(scaleKernel(256, 3.0f), dev);
  CHECK(cd.entries().size() == 1);
  ts::clearCache();
  CHECK_FALSE(ts::compile(scaleKernel(256, 3.0f), dev, off).fromDiskCache());  // not read either

  // Emulated targets are never kept.
  ts::compile(scaleKernel(256, 3.0f), ts::Device::emulator("nvptx:sm_80"));
  CHECK(cd.entries().size() == 1);
  CHECK(ts::explainCompile(scaleKernel(256, 3.0f), ts::Device::emulator("nvptx:sm_80")).note.find("never kept") !=
        std::string::npos);
}

TEST_CASE("settings come from the environment: TESSERA_CACHE, TESSERA_CACHE_DIR, XDG_CACHE_HOME, sizes",
          "[dsl][diskcache]") {
  // The environment as it was, restored at the end (the rest of the
  // binary's tests may run in this process).
  struct Saved {
    std::vector<std::pair<std::string, std::optional<std::string>>> vars;
    Saved() {
      for (const char* v : {"TESSERA_CACHE", "TESSERA_CACHE_DIR", "TESSERA_CACHE_MAX_SIZE", "XDG_CACHE_HOME", "HOME"}) {
        const char* x = std::getenv(v);
        vars.emplace_back(v, x ? std::optional<std::string>(x) : std::nullopt);
      }
    }
    ~Saved() {
      for (auto& [v, x] : vars)
        if (x)
          ::setenv(v.c_str(), x->c_str(), 1);
        else
          ::unsetenv(v.c_str());
    }
  } saved;
  ts::resetDiskCacheSettings();
  ::setenv("TESSERA_CACHE_DIR", "/tmp/x-cache", 1);
  ::setenv("TESSERA_CACHE_MAX_SIZE", "64M", 1);
  CHECK(ts::diskCacheSettings().dir == "/tmp/x-cache");
  CHECK(ts::diskCacheSettings().maxBytes == (uint64_t{64} << 20));
  ::unsetenv("TESSERA_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  CHECK(ts::diskCacheSettings().dir == "/tmp/xdg/tessera");
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // invalid per the XDG spec: ignored
  ::setenv("HOME", "/tmp/home", 1);
  CHECK(ts::diskCacheSettings().dir == "/tmp/home/.cache/tessera");
  ::setenv("TESSERA_CACHE", "0", 1);
  CHECK_FALSE(ts::diskCacheSettings().enabled);
  ::setenv("TESSERA_CACHE", "off", 1);
  CHECK_FALSE(ts::diskCacheSettings().enabled);
  ::setenv("TESSERA_CACHE", "1", 1);
  CHECK(ts::diskCacheSettings().enabled);
  ::unsetenv("TESSERA_CACHE");
  CHECK(ts::codegen::parseByteSize("1", "x") == 1);
  CHECK(ts::codegen::parseByteSize("2K", "x") == 2048);
  CHECK(ts::codegen::parseByteSize("3g", "x") == (uint64_t{3} << 30));
  CHECK(ts::codegen::parseByteSize("5MiB", "x") == (uint64_t{5} << 20));
  CHECK_THROWS_WITH(ts::codegen::parseByteSize("lots", "TESSERA_CACHE_MAX_SIZE"),
                    Catch::Contains("expected a number of bytes, optionally with K, M or G"));
  CHECK_THROWS_AS(ts::setDiskCacheSettings(ts::DiskCacheSettings{true, "", 1, ""}), ts::UsageError);
}

TEST_CASE("the key hash covers every part, and the build id carries the sources' hash", "[dsl][diskcache]") {
  using ts::codegen::CacheKey;
  CacheKey a = CacheKey::make("kernels", {{"ir", "x"}, {"options", "o"}});
  CHECK(a.hash.size() == 64);
  CHECK(CacheKey::make("kernels", {{"ir", "x"}, {"options", "o"}}).hash == a.hash);
  CHECK(CacheKey::make("kernels", {{"ir", "y"}, {"options", "o"}}).hash != a.hash);
  CHECK(CacheKey::make("kernels", {{"ir", "x"}, {"options", "p"}}).hash != a.hash);
  CHECK(CacheKey::make("tune", {{"ir", "x"}, {"options", "o"}}).hash != a.hash);
  // Boundaries are part of the hash: ("ab","c") is not ("a","bc").
  CHECK(CacheKey::make("k", {{"ab", "c"}}).hash != CacheKey::make("k", {{"a", "bc"}}).hash);
  CHECK(ts::codegen::tesseraBuildId().find("(sources ") != std::string::npos);
  CHECK(ts::codegen::llvmVersion().rfind("LLVM ", 0) == 0);
  auto key = ts::codegen::compileKey("scale", "text", ts::Target::parse("cpu"), {});
  std::string names;
  for (const auto& p : key.parts) names += p.name + ",";
  CHECK(names == "kernel,target,host-cpu,cpu-features,options,tessera,llvm,ir,");
}

TEST_CASE("an NVIDIA compile's key names the ptxas version: another CUDA toolkit is another entry",
          "[dsl][diskcache]") {
  auto ptxasPart = [](const ts::codegen::CacheKey& k) -> std::optional<std::string> {
    for (const auto& p : k.parts)
      if (p.name == "ptxas") return p.value;
    return std::nullopt;
  };
  const ts::Target sm100 = ts::Target::parse("nvptx:sm_100a");
  auto installed = ts::codegen::compileKey("scale", "text", sm100, {});
  REQUIRE(ptxasPart(installed));
  CHECK(!ptxasPart(installed)->empty());
  // Not a part for the other vendors.
  CHECK_FALSE(ptxasPart(ts::codegen::compileKey("scale", "text", ts::Target::parse("amdgpu:gfx942"), {})));
  CHECK_FALSE(ptxasPart(ts::codegen::compileKey("scale", "text", ts::Target::parse("cpu"), {})));
  // A ptxas of another release (TESSERA_PTXAS names it).
  const fs::path dir = fs::temp_directory_path() / ("tessera_cache_ptxas." + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fake = dir / "ptxas";
  writeFile(fake, "#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n");
  fs::permissions(fake, fs::perms::owner_all);
  ::setenv("TESSERA_PTXAS", fake.c_str(), 1);
  auto other = ts::codegen::compileKey("scale", "text", sm100, {});
  ::setenv("TESSERA_PTXAS", (dir / "absent").c_str(), 1);
  auto none = ts::codegen::compileKey("scale", "text", sm100, {});
  ::unsetenv("TESSERA_PTXAS");
  fs::remove_all(dir);
  CHECK(ptxasPart(other) == std::optional<std::string>("Cuda compilation tools, release 12.9, V12.9.86"));
  CHECK(ptxasPart(none) == std::optional<std::string>("none"));
  CHECK(other.hash != installed.hash);
  CHECK(none.hash != installed.hash);
  CHECK(none.hash != other.hash);
}
