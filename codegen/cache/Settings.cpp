// The persistent cache's settings (tessera/codegen/DiskCache.h): where and
// whether entries are kept, from the environment (TESSERA_CACHE,
// TESSERA_CACHE_DIR, TESSERA_CACHE_MAX_SIZE, XDG_CACHE_HOME, HOME) unless a
// program set its own, and the size parser behind TESSERA_CACHE_MAX_SIZE. A
// bad value is a warning, never a failed compile.
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "codegen/cache/Internal.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera::codegen {

namespace {

using cache::trimmed;
using cache::warnOnce;

std::mutex& settingsMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::optional<DiskCacheSettings>& overridden() {
  static std::optional<DiskCacheSettings>* s = new std::optional<DiskCacheSettings>();
  return *s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

DiskCacheSettings fromEnvironment() {
  DiskCacheSettings s;
  if (const char* v = tessera::env::get(tessera::env::Var::Cache); v && *v) {
    std::string l = lower(v);
    if (l == "0" || l == "off" || l == "false" || l == "no") {
      s.enabled = false;
      s.origin = std::string("TESSERA_CACHE=") + v;
    } else if (!(l == "1" || l == "on" || l == "true" || l == "yes")) {
      warnOnce("env:TESSERA_CACHE", std::string("TESSERA_CACHE='") + v +
                                        "' is neither 0/off/false/no nor 1/on/true/yes; the cache stays on");
    }
  }
  if (const char* d = tessera::env::get(tessera::env::Var::CacheDir); d && *d) {
    s.dir = d;
    if (s.origin.empty()) s.origin = tessera::env::name(tessera::env::Var::CacheDir);
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') {
    // The XDG base-directory spec: a relative XDG_CACHE_HOME is invalid and ignored.
    s.dir = std::string(x) + "/tessera";
    if (s.origin.empty()) s.origin = "XDG_CACHE_HOME";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    s.dir = std::string(h) + "/.cache/tessera";
    if (s.origin.empty()) s.origin = "HOME";
  } else if (s.enabled) {
    s.origin = "no TESSERA_CACHE_DIR, XDG_CACHE_HOME or HOME";
  }
  if (const char* m = tessera::env::get(tessera::env::Var::CacheMaxSize); m && *m) {
    try {
      s.maxBytes = parseByteSize(m, tessera::env::name(tessera::env::Var::CacheMaxSize));
    } catch (const Error& e) {
      // A bad limit must not fail every compile of the program, so it is a
      // warning (once per value), and the default keeps the folder bounded.
      warnOnce(std::string("env:TESSERA_CACHE_MAX_SIZE=") + m,
               std::string(e.what()) + "; the default limit (1G) applies");
    }
    // A limit of 0 would evict every entry as soon as it is written: a cache
    // that costs a write per compile and keeps nothing. It means "off", and
    // says so where the state is shown (tessera cache stats, explain).
    if (s.maxBytes == 0 && s.enabled) {
      s.enabled = false;
      s.origin = std::string("TESSERA_CACHE_MAX_SIZE=") + m;
    }
  }
  return s;
}

}  // namespace

DiskCacheSettings diskCacheSettings() {
  {
    std::lock_guard<std::mutex> lock(settingsMutex());
    if (overridden()) return *overridden();
  }
  return fromEnvironment();
}

void setDiskCacheSettings(const DiskCacheSettings& s) {
  DiskCacheSettings c = s;
  if (c.origin.empty()) c.origin = "setDiskCacheSettings";
  // A limit of 0 is off, as TESSERA_CACHE_MAX_SIZE=0 is (fromEnvironment).
  if (c.enabled && c.maxBytes == 0) {
    c.enabled = false;
    c.origin += "; a size limit of 0 bytes";
  }
  if (c.enabled && c.dir.empty())
    throw UsageError("disk cache settings: enabled with an empty folder (set dir, or enabled = false)");
  std::lock_guard<std::mutex> lock(settingsMutex());
  overridden() = c;
}

void resetDiskCacheSettings() {
  std::lock_guard<std::mutex> lock(settingsMutex());
  overridden().reset();
}

uint64_t parseByteSize(const std::string& text, const std::string& what) {
  const std::string expected = " (expected a number of bytes, optionally with K, M or G)";
  std::string t = trimmed(text);
  if (!t.empty() && t[0] == '-') throw UsageError(what + ": '" + text + "' is negative" + expected);
  size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  std::string unit = lower(t.substr(digits));
  if (unit.size() == 3 && unit.compare(1, 2, "ib") == 0) unit.resize(1);       // "MiB"
  if (unit.size() == 2 && (unit[1] == 'b' || unit[1] == 'i')) unit.resize(1);  // "MB", "Mi"
  if (unit == "b") unit.clear();
  int shift = unit.empty() ? 0 : unit == "k" ? 10 : unit == "m" ? 20 : unit == "g" ? 30 : unit == "t" ? 40 : -1;
  if (digits == 0 || shift < 0) throw UsageError(what + ": '" + text + "' is not a size" + expected);
  // Digit by digit, so that no count of digits overflows unnoticed.
  uint64_t n = 0;
  for (size_t i = 0; i < digits; ++i) {
    const unsigned d = static_cast<unsigned>(t[i] - '0');
    if (n > (UINT64_MAX - d) / 10) throw UsageError(what + ": '" + text + "' is too large (over 2^64 bytes)");
    n = n * 10 + d;
  }
  if (shift && n > (UINT64_MAX >> shift)) throw UsageError(what + ": '" + text + "' is too large (over 2^64 bytes)");
  return n << shift;
}

}  // namespace tessera::codegen
