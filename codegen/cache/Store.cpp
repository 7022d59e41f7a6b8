// The persistent cache's store (tessera/codegen/DiskCache.h): a folder of
// self-checking entries (EntryFormat.cpp), one file per key, kept under a
// size limit by evicting the least recently used; and this process's
// counters and once-only warnings.
//
// An entry, <dir>/<kind>/<hash>.tce, is written as
// <dir>/<kind>/.tmp.<hash>.<pid>.<n> and renamed into place, so a reader
// sees a whole entry or none; its checksum catches what a rename cannot
// (EntryFormat.cpp). Entries are never rewritten in place.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "codegen/cache/EntryFormat.h"
#include "codegen/cache/Internal.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/support/Environment.h"

namespace tessera::codegen {

// ---- warnings: each said once per process ----------------------------------

void cache::warnOnce(const std::string& what, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string>* said = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (said->insert(what).second) std::fprintf(stderr, "tessera: warning: compile cache: %s\n", message.c_str());
}

namespace {

constexpr const char* kSuffix = ".tce";
constexpr const char* kTempPrefix = ".tmp.";
// A temporary file this old belongs to a writer that died (kill -9, power
// loss): eviction removes it. Live writers rename theirs within
// milliseconds.
constexpr auto kStaleTemp = std::chrono::hours(1);

using cache::encodeEntry;
using cache::Parsed;
using cache::parseEntry;
using cache::warnOnce;

// ---- counters ----------------------------------------------------------------

struct Counters {
  std::atomic<uint64_t> hits{0}, misses{0}, stores{0}, rejected{0}, storeFailures{0}, evictions{0};
};
Counters& counters() {
  static Counters* c = new Counters();
  return *c;
}

// ---- files ------------------------------------------------------------------

std::string errnoText(int e) { return std::strerror(e); }

// Reads a whole file; false with errno set when it cannot be opened or read.
bool readWhole(const std::string& path, std::string& out, int* fdOut = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    errno = e;
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      errno = e;
      return false;
    }
    if (r == 0) break;  // shrank meanwhile: the checksum will say so
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  if (fdOut)
    *fdOut = fd;
  else
    ::close(fd);
  return true;
}

int64_t mtimeNs(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct DirEntry {
  std::string path;
  uint64_t bytes;
  int64_t mtimeNs;
  bool temp;
};

// The entry files and temporary files of one folder (not recursive).
std::vector<DirEntry> scan(const std::string& dir) {
  std::vector<DirEntry> r;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return r;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    bool temp = name.rfind(kTempPrefix, 0) == 0;
    if (!temp && !endsWith(name, kSuffix)) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    r.push_back({path, static_cast<uint64_t>(st.st_size), mtimeNs(st), temp});
  }
  ::closedir(d);
  return r;
}

// Subfolders of the cache folder: one per kind.
std::vector<std::string> kindDirs(const std::string& dir) {
  std::vector<std::string> r;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return r;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) r.push_back(path);
  }
  ::closedir(d);
  std::sort(r.begin(), r.end());
  return r;
}

// Test hook (tests/cache_test.sh): TESSERA_CACHE_TEST_PAUSE_MS=N makes a
// writer announce its temporary file on stderr and sleep N ms before the
// rename, so a test can kill it mid-write.
void testPause(const std::string& temp) {
  const char* v = tessera::env::get(tessera::env::Var::CacheTestPauseMs);
  if (!v || !*v) return;
  std::fprintf(stderr, "tessera: cache test: wrote %s, pausing before the rename\n", temp.c_str());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(v)));
}

}  // namespace

// ---- counters ----------------------------------------------------------------------

DiskCacheCounters diskCacheCounters() {
  Counters& c = counters();
  DiskCacheCounters r;
  r.hits = c.hits;
  r.misses = c.misses;
  r.stores = c.stores;
  r.rejected = c.rejected;
  r.storeFailures = c.storeFailures;
  r.evictions = c.evictions;
  return r;
}

void cache::hitRejected() {
  Counters& c = counters();
  --c.hits;
  ++c.misses;
  ++c.rejected;
}

void resetDiskCacheCounters() {
  Counters& c = counters();
  c.hits = c.misses = c.stores = c.rejected = c.storeFailures = c.evictions = 0;
}

// ---- the store ---------------------------------------------------------------------

KeyedStore::KeyedStore(std::string kind) : kind_(std::move(kind)) {
  DiskCacheSettings s = diskCacheSettings();
  enabled_ = s.enabled;
  maxBytes_ = s.maxBytes;
  if (!s.dir.empty()) dir_ = s.dir;
}

std::optional<std::string> KeyedStore::load(const CacheKey& key) {
  if (!usable()) return std::nullopt;
  const std::string path = dir_ + "/" + kind_ + "/" + key.hash + kSuffix;
  std::string bytes;
  int fd = -1;
  if (!readWhole(path, bytes, &fd)) {
    int e = errno;
    ++counters().misses;
    if (e != ENOENT && e != ENOTDIR)
      warnOnce("read:" + dir_, "cannot read '" + path + "': " + errnoText(e) + "; compiles are not taken from " + dir_);
    return std::nullopt;
  }
  Parsed p = parseEntry(bytes);
  if (p.problem.empty() && (p.kind != kind_ || p.hash != key.hash))
    p.problem = "foreign entry: it holds the key " + p.hash.substr(0, 16) + "... of kind '" + p.kind +
                "' (a file copied or renamed into place?)";
  if (p.problem.empty() && p.parts != key.parts) p.problem = "foreign entry: its key parts do not match its hash";
  if (!p.problem.empty()) {
    // Reported once per bad file: the same file found again (a read-only
    // folder keeps it) is not reported again; a new one at that path is.
    struct stat st{};
    ::fstat(fd, &st);
    const std::string which = path + "@" + std::to_string(st.st_size) + "@" + std::to_string(mtimeNs(st));
    ::close(fd);
    ++counters().rejected;
    ++counters().misses;
    // Not removed here: another process may have renamed a good entry into
    // place since it was read. The recompile's store replaces it.
    warnOnce("entry:" + which, "'" + path + "': " + p.problem + "; ignored, the kernel is recompiled");
    return std::nullopt;
  }
  // Least recently used = oldest modification time: a hit renews it.
  // Failure (a read-only folder) only makes the entry look older.
  ::futimens(fd, nullptr);
  ::close(fd);
  ++counters().hits;
  return std::string(p.payload);
}

bool KeyedStore::save(const CacheKey& key, const std::string& payload) {
  if (!usable()) return false;
  const std::string folder = dir_ + "/" + kind_;
  auto fail = [&](const std::string& why) {
    ++counters().storeFailures;
    warnOnce("write:" + dir_, why + "; compiles are not kept in " + dir_);
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec || !std::filesystem::is_directory(folder, ec))
    return fail("cannot create the folder '" + folder + "'" + (ec ? ": " + ec.message() : ""));

  std::string bytes = encodeEntry(key, payload);
  static std::atomic<uint64_t> serial{0};
  static const uint64_t nonce = std::random_device{}();
  const std::string temp = folder + "/" + kTempPrefix + key.hash.substr(0, 16) + "." + std::to_string(::getpid()) +
                           "." + std::to_string(nonce % 100000) + "." + std::to_string(serial++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create a file in '" + folder + "': " + errnoText(errno));
  size_t put = 0;
  int err = 0;
  while (put < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    put += static_cast<size_t>(w);
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(temp.c_str());
    return fail("cannot write '" + temp + "': " + errnoText(err));
  }
  testPause(temp);
  const std::string path = folder + "/" + key.hash + kSuffix;
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(temp.c_str());
    return fail("cannot rename '" + temp + "' to '" + path + "': " + errnoText(e));
  }
  ++counters().stores;
  evict();
  return true;
}

void KeyedStore::evict() {
  // One limit for the whole folder, every kind together.
  std::vector<DirEntry> all;
  for (const std::string& d : kindDirs(dir_)) {
    std::vector<DirEntry> some = scan(d);
    all.insert(all.end(), some.begin(), some.end());
  }
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t stale = std::chrono::duration_cast<std::chrono::nanoseconds>(kStaleTemp).count();
  uint64_t total = 0;
  std::vector<DirEntry> entries;
  for (DirEntry& e : all) {
    if (e.temp) {
      if (now - e.mtimeNs > stale) ::unlink(e.path.c_str());
      continue;
    }
    total += e.bytes;
    entries.push_back(e);
  }
  if (total <= maxBytes_) return;
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) { return a.mtimeNs < b.mtimeNs; });
  for (const DirEntry& e : entries) {
    if (total <= maxBytes_) break;
    if (::unlink(e.path.c_str()) == 0) ++counters().evictions;
    total -= e.bytes;  // gone either way: removed here or by another process
  }
}

std::vector<EntryInfo> KeyedStore::list() const {
  std::vector<EntryInfo> r;
  if (dir_.empty()) return r;
  for (const DirEntry& e : scan(dir_ + "/" + kind_)) {
    if (e.temp) continue;
    EntryInfo info;
    info.path = e.path;
    std::string name = e.path.substr(e.path.rfind('/') + 1);
    info.hash = name.substr(0, name.size() - std::strlen(kSuffix));
    info.bytes = e.bytes;
    info.mtimeNs = e.mtimeNs;
    std::string bytes;
    if (!readWhole(e.path, bytes)) {
      info.problem = "cannot read: " + errnoText(errno);
    } else {
      Parsed p = parseEntry(bytes);
      if (p.problem.empty() && (p.kind != kind_ || p.hash != info.hash))
        p.problem = "foreign entry: it holds the key " + p.hash.substr(0, 16) + "... of kind '" + p.kind + "'";
      if (p.problem.empty() && CacheKey::make(kind_, p.parts).hash != info.hash)
        p.problem = "foreign entry: its key parts do not match its hash";
      info.valid = p.problem.empty();
      info.problem = p.problem;
      if (info.valid) info.parts = std::move(p.parts);
    }
    r.push_back(std::move(info));
  }
  std::sort(r.begin(), r.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.mtimeNs > b.mtimeNs; });
  return r;
}

StoreStats KeyedStore::stats() const {
  StoreStats s;
  s.dir = dir_;
  struct stat st;
  s.exists = !dir_.empty() && ::stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!s.exists) return s;
  for (const DirEntry& e : scan(dir_ + "/" + kind_)) {
    if (e.temp) {
      ++s.tempFiles;
      s.tempBytes += e.bytes;
    } else {
      ++s.entries;
      s.bytes += e.bytes;
    }
  }
  return s;
}

uint64_t KeyedStore::clear() {
  uint64_t n = 0;
  if (dir_.empty()) return 0;
  for (const DirEntry& e : scan(dir_ + "/" + kind_))
    if (::unlink(e.path.c_str()) == 0 && !e.temp) ++n;
  return n;
}

}  // namespace tessera::codegen
