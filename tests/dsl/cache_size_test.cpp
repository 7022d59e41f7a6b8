// The compile cache's size limit (docs/cache.md): TESSERA_CACHE_MAX_SIZE=0
// (or DiskCacheSettings::maxBytes = 0) turns the cache off, and `tessera
// cache stats` and explain say so, instead of a cache that writes every
// compile and keeps nothing; a value that is no size (negative, garbage,
// too large) warns once on stderr, naming it, and the default limit applies.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "../env_guard.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using tessera::testing::EnvGuard;

namespace {

// What the code under test writes on stderr while it runs.
class StderrCapture {
 public:
  StderrCapture() {
    path_ = (fs::temp_directory_path() / ("tessera_cache_size_stderr." + std::to_string(::getpid()))).string();
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    ::unlink(path_.c_str());
  }
  std::string text() const {
    std::fflush(stderr);
    std::ifstream in(path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  int saved_ = -1;
  std::string path_;
};

ts::Kernel doubler(int BLOCK) {
  return ts::kernel("cache_size_doubler", [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * BLOCK + ts::arange(BLOCK);
    auto m = i < n;
    ts::store(out + i, ts::load(in + i, m) * 2.0f, m);
  });
}

/// A fresh folder, named by the environment, for one test; the process's
/// settings back to the environment's, before and after.
struct EnvFolder {
  fs::path dir;
  EnvGuard guard;
  EnvFolder()
      : dir(fs::temp_directory_path() / ("tessera_cache_size_test." + std::to_string(::getpid()))),
        guard("TESSERA_CACHE_DIR", dir.c_str()) {
    fs::remove_all(dir);
    ts::resetDiskCacheSettings();
    ts::clearCache();
  }
  ~EnvFolder() {
    ts::resetDiskCacheSettings();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  size_t entries() const {
    size_t n = 0;
    std::error_code ec;
    if (fs::is_directory(dir / "kernels", ec))
      for (auto& e : fs::directory_iterator(dir / "kernels")) n += e.path().extension() == ".tce";
    return n;
  }
};

}  // namespace

TEST_CASE("TESSERA_CACHE_MAX_SIZE=0 turns the compile cache off, and says so", "[dsl][diskcache]") {
  EnvFolder folder;
  EnvGuard on("TESSERA_CACHE", nullptr);
  for (const char* zero : {"0", "0K", "0G"}) {
    INFO(zero);
    EnvGuard limit("TESSERA_CACHE_MAX_SIZE", zero);
    const ts::DiskCacheSettings s = ts::diskCacheSettings();
    CHECK_FALSE(s.enabled);
    CHECK(s.maxBytes == 0);
    CHECK(s.origin == std::string("TESSERA_CACHE_MAX_SIZE=") + zero);
    CHECK_THAT(ts::diskCacheStats().str(),
               Contains(std::string("state:    off (TESSERA_CACHE_MAX_SIZE=") + zero + ")"));
    const ts::CacheExplanation x = ts::explainCompile(doubler(256), ts::Device::cpu());
    CHECK_FALSE(x.enabled);
    CHECK(x.note == std::string("the cache is off (TESSERA_CACHE_MAX_SIZE=") + zero + "): every compile compiles");
    // Nothing is written (and nothing is looked up).
    ts::clearCache();
    auto k = ts::compile(doubler(256), ts::Device::cpu());
    CHECK_FALSE(k.fromDiskCache());
    CHECK(folder.entries() == 0);
  }
  // TESSERA_CACHE=0 names itself as the reason when both turn it off.
  {
    EnvGuard off("TESSERA_CACHE", "0");
    EnvGuard limit("TESSERA_CACHE_MAX_SIZE", "0");
    CHECK(ts::diskCacheSettings().origin == "TESSERA_CACHE=0");
  }
  // The same limit in the environment but not 0: the cache is on and keeps it.
  EnvGuard limit("TESSERA_CACHE_MAX_SIZE", "1M");
  CHECK(ts::diskCacheSettings().enabled);
  ts::clearCache();
  ts::compile(doubler(128), ts::Device::cpu());
  CHECK(folder.entries() == 1);
}

TEST_CASE("a size limit of 0 given to setDiskCacheSettings is off too", "[dsl][diskcache]") {
  EnvFolder folder;
  ts::DiskCacheSettings s;
  s.dir = folder.dir.string();
  s.maxBytes = 0;
  ts::setDiskCacheSettings(s);
  CHECK_FALSE(ts::diskCacheSettings().enabled);
  CHECK(ts::diskCacheSettings().origin == "setDiskCacheSettings; a size limit of 0 bytes");
  CHECK_THAT(ts::diskCacheStats().str(), Contains("state:    off (setDiskCacheSettings; a size limit of 0 bytes)"));
  ts::clearCache();
  ts::compile(doubler(64), ts::Device::cpu());
  CHECK(folder.entries() == 0);
  // Off with no folder at all is not the error an enabled cache without one is.
  s.dir.clear();
  s.origin = "a test";
  CHECK_NOTHROW(ts::setDiskCacheSettings(s));
  CHECK(ts::diskCacheSettings().origin == "a test; a size limit of 0 bytes");
}

TEST_CASE("a TESSERA_CACHE_MAX_SIZE that is no size warns, naming it, and the default limit applies",
          "[dsl][diskcache]") {
  EnvFolder folder;
  EnvGuard on("TESSERA_CACHE", nullptr);
  struct Bad {
    const char* value;
    const char* why;
  };
  for (const Bad& bad : {Bad{"-5", "'-5' is negative"}, Bad{"lots", "'lots' is not a size"},
                         Bad{"1.5G", "'1.5G' is not a size"}, Bad{"12Q", "'12Q' is not a size"},
                         Bad{"99999999999999999999", "'99999999999999999999' is too large (over 2^64 bytes)"},
                         Bad{"20000000000T", "'20000000000T' is too large (over 2^64 bytes)"}}) {
    INFO(bad.value);
    EnvGuard limit("TESSERA_CACHE_MAX_SIZE", bad.value);
    StderrCapture err;
    const ts::DiskCacheSettings s = ts::diskCacheSettings();
    CHECK(s.enabled);
    CHECK(s.maxBytes == (uint64_t{1} << 30));
    CHECK_THAT(err.text(),
               Contains(std::string("tessera: warning: compile cache: TESSERA_CACHE_MAX_SIZE: ") + bad.why) &&
                   Contains("the default limit (1G) applies"));
  }
  // The parser itself: the largest sizes that fit, and the errors.
  CHECK(ts::codegen::parseByteSize("18446744073709551615", "x") == UINT64_MAX);
  CHECK(ts::codegen::parseByteSize("16777215T", "x") == (uint64_t{16777215} << 40));
  CHECK(ts::codegen::parseByteSize("0", "x") == 0);
  CHECK_THROWS_AS(ts::codegen::parseByteSize("18446744073709551616", "x"), ts::UsageError);
  CHECK_THROWS_WITH(ts::codegen::parseByteSize("-1K", "TESSERA_CACHE_MAX_SIZE"),
                    Contains("TESSERA_CACHE_MAX_SIZE: '-1K' is negative"));
}
