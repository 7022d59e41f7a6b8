// The persistent compile cache's API (tessera/Cache.h) over codegen's store
// (tessera/codegen/DiskCache.h): its settings, statistics, entries, and why
// a compile would miss it.
#include "tessera/Cache.h"

#include <cstdio>
#include <string>
#include <vector>

#include "CompileInternal.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/support/Error.h"

namespace tessera {

namespace {

using detail::targetOf;
using detail::textMemo;
using detail::withEnvironment;

}  // namespace

DiskCacheSettings diskCacheSettings() { return codegen::diskCacheSettings(); }
void setDiskCacheSettings(const DiskCacheSettings& s) { codegen::setDiskCacheSettings(s); }
void resetDiskCacheSettings() { codegen::resetDiskCacheSettings(); }

DiskCacheStats diskCacheStats() {
  DiskCacheStats r;
  r.settings = codegen::diskCacheSettings();
  codegen::StoreStats s = codegen::KeyedStore("kernels").stats();
  r.exists = s.exists;
  r.entries = s.entries;
  r.bytes = s.bytes;
  r.tempFiles = s.tempFiles;
  r.process = codegen::diskCacheCounters();
  return r;
}

std::string DiskCacheStats::str() const {
  auto size = [](uint64_t b) {
    char buf[32];
    if (b >= (uint64_t{1} << 30))
      std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(uint64_t{1} << 30));
    else if (b >= (uint64_t{1} << 20))
      std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(uint64_t{1} << 20));
    else if (b >= 1024)
      std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
    else
      std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
    return std::string(buf);
  };
  std::string r = "folder:   " + (settings.dir.empty() ? std::string("(none)") : settings.dir) + " (from " +
                  settings.origin + ")" + (exists || settings.dir.empty() ? "" : ", not created yet") + "\n";
  r += std::string("state:    ") + (settings.enabled ? "on" : "off (" + settings.origin + ")") + "\n";
  r += "entries:  " + std::to_string(entries) + " kernels, " + size(bytes) + " of a " + size(settings.maxBytes) +
       " limit (least recently used evicted first)\n";
  if (tempFiles) r += "temporary files: " + std::to_string(tempFiles) + " (writes in flight or interrupted)\n";
  r += "this process: " + std::to_string(process.hits) + " hits, " + std::to_string(process.misses) + " misses, " +
       std::to_string(process.stores) + " stores, " + std::to_string(process.evictions) + " evictions, " +
       std::to_string(process.rejected) + " bad entries, " + std::to_string(process.storeFailures) + " failed writes\n";
  return r;
}

std::vector<CacheEntry> diskCacheEntries() { return codegen::KeyedStore("kernels").list(); }

uint64_t clearDiskCache() { return codegen::KeyedStore("kernels").clear(); }

CacheExplanation explainCompile(const Kernel& k, const Target& target, const CompileOptions& userOpts) {
  if (!k.valid()) throw UsageError("explainCompile: the kernel is empty (default-constructed tessera::Kernel)");
  codegen::KeyedStore store("kernels");
  CacheExplanation x;
  x.dir = store.dir();
  x.enabled = diskCacheSettings().enabled;
  if (!codegen::diskCacheable(target)) {
    x.note = "target " + target.str() + " is never kept on disk (emu: targets compile in every process)";
    return x;
  }
  if (userOpts.profile) {
    x.note = "CompileOptions::profile is set: profiled compiles are never kept on disk";
    return x;
  }
  if (!userOpts.useDiskCache) {
    x.note = "CompileOptions::useDiskCache is false: this compile is never kept on disk";
    return x;
  }
  if (!x.enabled) {
    x.note = "the cache is off (" + diskCacheSettings().origin + "): every compile compiles";
    return x;
  }
  const CompileOptions opts = withEnvironment(userOpts);
  return store.explain(codegen::compileKey(k.name(), textMemo().text(k), target, opts));
}

CacheExplanation explainCompile(const Kernel& k, const Device& dev, const CompileOptions& opts) {
  return explainCompile(k, targetOf(dev), opts);
}

}  // namespace tessera
