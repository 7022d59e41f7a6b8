// `tessera cache stats|explain|clear`: the persistent compile cache shown,
// explained and cleared (docs/cache.md); a group of three subcommands.
#include <cstdio>
#include <ctime>
#include <iostream>

#include "Commands.h"

namespace tessera::tools {

namespace {

std::string cacheHelp() {
  return "stats:   the cache folder, how many kernels it keeps and their size against the limit;\n"
         "         --entries adds one line per entry (kernel, target, size, last use), --json prints\n"
         "         it all as JSON\n"
         "explain: whether `tessera compile KERNEL` with these options would load the kernel from\n"
         "         the cache, and if not, which parts of its key differ from the nearest entry (the\n"
         "         same kernel, fewest differences): ir (the first line that changed), target,\n"
         "         host-cpu, cpu-features, options (each field), tessera (the build), llvm.\n"
         "         Exit code 0 when cached, 1 when it would compile\n"
         "clear:   removes every entry and leftover temporary file\n"
         "--dir DIR: this folder instead of the one in force\n"
         "environment: TESSERA_CACHE=0 turns the cache off; TESSERA_CACHE_DIR=<dir> (default\n"
         "         $XDG_CACHE_HOME/tessera, else ~/.cache/tessera); TESSERA_CACHE_MAX_SIZE=<bytes>\n"
         "         with K, M or G (default 1G; least recently used entries are evicted);\n"
         "         TESSERA_CACHE_LOG=1 prints every lookup, and for a miss what differed\n"
         "exit codes: 0 success; 1 `explain`: not cached; 2 a usage error (docs/cache.md)\n";
}

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      r += std::string("\\") + char(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
    } else
      r += char(c);
  }
  return r + "\"";
}

std::string partOf(const CacheEntry& e, const std::string& name) {
  for (const auto& p : e.parts)
    if (p.name == name) return p.value;
  return "";
}

std::string isoTime(int64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

/// --dir: this folder instead of the one in force, for every subcommand.
void applyDir(const cli::Args& a) {
  std::optional<std::string> dir = a.value("--dir");
  if (!dir) return;
  if (dir->empty()) a.fail("--dir needs a folder, not an empty string");
  DiskCacheSettings s = tessera::diskCacheSettings();
  s.dir = *dir;
  s.enabled = true;
  s.origin = "--dir";
  tessera::setDiskCacheSettings(s);
}

int runStats(const cli::Args& a) {
  applyDir(a);
  DiskCacheStats st = tessera::diskCacheStats();
  std::vector<CacheEntry> entries;
  if (a.has("--entries") || a.has("--json")) entries = tessera::diskCacheEntries();
  if (a.has("--json")) {
    std::cout << "{\"dir\": " << jsonString(st.settings.dir) << ", \"origin\": " << jsonString(st.settings.origin)
              << ", \"enabled\": " << (st.settings.enabled ? "true" : "false")
              << ", \"exists\": " << (st.exists ? "true" : "false") << ", \"entries\": " << st.entries
              << ", \"bytes\": " << st.bytes << ", \"max_bytes\": " << st.settings.maxBytes
              << ", \"temp_files\": " << st.tempFiles << ",\n \"list\": [";
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      std::cout << (i ? ",\n  " : "\n  ") << "{\"hash\": " << jsonString(e.hash)
                << ", \"kernel\": " << jsonString(partOf(e, "kernel"))
                << ", \"target\": " << jsonString(partOf(e, "target"))
                << ", \"options\": " << jsonString(partOf(e, "options")) << ", \"bytes\": " << e.bytes
                << ", \"last_used_ns\": " << e.mtimeNs << ", \"valid\": " << (e.valid ? "true" : "false")
                << ", \"problem\": " << jsonString(e.problem) << "}";
    }
    std::cout << "]}\n";
    return 0;
  }
  std::cout << st.str();
  for (const auto& e : entries) {
    if (e.valid)
      std::cout << "  " << e.hash.substr(0, 16) << "  " << partOf(e, "kernel") << "  " << partOf(e, "target") << "  "
                << partOf(e, "options") << "  " << e.bytes << " B  " << isoTime(e.mtimeNs) << "\n";
    else
      std::cout << "  " << e.hash.substr(0, 16) << "  (bad: " << e.problem << ")  " << e.bytes << " B\n";
  }
  return 0;
}

int runExplain(const cli::Args& a) {
  applyDir(a);
  Target target = Target::parse(a.value("--target", "cpu"));
  CompileOptions o;
  if (std::optional<int> n = numWarpsOf(a)) o.numWarps = *n;
  o.checkBounds = a.has("--check-bounds");
  applyPrecision(a);
  Kernel kern = loadKernel(a, a.positional(0), target);
  if (a.has("--assume-aligned")) kern = assumeAligned(kern);
  CacheExplanation x = explainCompile(kern, target, o);
  std::cout << x.str();
  return x.cached ? 0 : 1;
}

int runClear(const cli::Args& a) {
  applyDir(a);
  DiskCacheSettings s = tessera::diskCacheSettings();
  if (s.dir.empty()) a.fail("no cache folder (" + s.origin + ")");
  uint64_t n = tessera::clearDiskCache();
  std::cout << "removed " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << s.dir << "\n";
  return 0;
}

const cli::Option kDirOpt{"--dir", "a folder"};

}  // namespace

cli::Command cacheCommand() {
  cli::Command stats{"stats",
                     "  tessera cache stats [--entries] [--json] [--dir DIR]\n",
                     {{"--entries"}, {"--json"}, kDirOpt},
                     0,
                     0,
                     "",
                     runStats,
                     cacheHelp};
  cli::Command explain{
      "explain",
      "  tessera cache explain KERNEL|FILE.tir [--target T] [--kernel NAME] [--num-warps N]\n"
      "                  [--precision accurate|approx] [--check-bounds] [--assume-aligned] [--dir DIR]\n",
      {kTargetOpt, kKernelOpt, kNumWarpsOpt, kPrecisionOpt, kCheckBoundsOpt, kAssumeAlignedOpt, kDirOpt},
      1,
      1,
      "a KERNEL name or a FILE.tir (the kernel to explain)",
      runExplain,
      cacheHelp};
  cli::Command clear{"clear", "  tessera cache clear [--dir DIR]\n", {kDirOpt}, 0, 0, "", runClear, cacheHelp};
  cli::Command cache{"cache", stats.synopsis + explain.synopsis + clear.synopsis};
  cache.help = cacheHelp;
  cache.subcommands = {stats, explain, clear};
  return cache;
}

}  // namespace tessera::tools
