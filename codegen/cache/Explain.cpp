// Why a key misses the persistent cache (tessera/codegen/DiskCache.h,
// KeyedStore::explain): the nearest entry of the store, and each key part
// that differs from it in one line (the tile IR's first changed line, the
// option fields, the CPU features switched on or off), as `tessera cache
// explain` and TESSERA_CACHE_LOG print them.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cache/Internal.h"
#include "tessera/codegen/DiskCache.h"

namespace tessera::codegen {

namespace {

using cache::trimmed;

std::string clip(const std::string& s, size_t n = 96) {
  std::string t = s;
  for (char& c : t)
    if (c == '\n' || c == '\t') c = ' ';
  return t.size() <= n ? t : t.substr(0, n - 3) + "...";
}

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) r.push_back(cur);
  return r;
}

std::string describeIr(const std::string& was, const std::string& now) {
  std::vector<std::string> a = splitOn(was, '\n'), b = splitOn(now, '\n');
  // Lines equal at the start and at the end; what lies between changed.
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) ++tail;
  size_t gone = a.size() - head - tail, added = b.size() - head - tail;
  if (!gone && !added) return "the same lines; they differ in a line break at the end";
  std::string r = "line " + std::to_string(head + 1) + ": ";
  if (gone && added) {
    // Both lines from a little before where they part, so that the
    // difference is in view however long they are.
    std::string x = trimmed(a[head]), y = trimmed(b[head]);
    size_t same = 0;
    while (same < x.size() && same < y.size() && x[same] == y[same]) ++same;
    if (same > 40) {
      x = "..." + x.substr(same - 24);
      y = "..." + y.substr(same - 24);
    }
    r += "`" + clip(x) + "` -> `" + clip(y) + "`";
  } else if (added)
    r += "added `" + clip(trimmed(b[head])) + "`";
  else
    r += "removed `" + clip(trimmed(a[head])) + "`";
  if (gone > 1 || added > 1)
    r += " (" + std::to_string(gone) + " line" + (gone == 1 ? "" : "s") + " of the entry's IR replaced by " +
         std::to_string(added) + ")";
  return r;
}

// "a=1;b=2" lists: the fields that differ.
std::string describeFields(const std::string& was, const std::string& now, char sep) {
  auto fields = [&](const std::string& s) {
    std::vector<std::pair<std::string, std::string>> r;
    for (const std::string& f : splitOn(s, sep)) {
      size_t eq = f.find('=');
      r.emplace_back(eq == std::string::npos ? f : f.substr(0, eq),
                     eq == std::string::npos ? std::string() : f.substr(eq + 1));
    }
    return r;
  };
  auto a = fields(was), b = fields(now);
  std::string r;
  auto add = [&](const std::string& s) { r += (r.empty() ? "" : ", ") + s; };
  for (auto& [k, v] : b) {
    auto it = std::find_if(a.begin(), a.end(), [&](auto& p) { return p.first == k; });
    if (it == a.end())
      add(k + " (new) = " + v);
    else if (it->second != v)
      add(k + " " + it->second + " -> " + v);
  }
  for (auto& [k, v] : a)
    if (std::none_of(b.begin(), b.end(), [&](auto& p) { return p.first == k; })) add(k + " (gone, was " + v + ")");
  return r.empty() ? "'" + clip(was) + "' -> '" + clip(now) + "'" : r;
}

// "+a,-b,+c" feature strings: what was switched on or off.
std::string describeFeatures(const std::string& was, const std::string& now) {
  auto set = [](const std::string& s) {
    std::set<std::string> r;
    for (const std::string& f : splitOn(s, ',')) r.insert(f);
    return r;
  };
  std::set<std::string> a = set(was), b = set(now);
  std::string on, off;
  auto append = [](std::string& list, const std::string& f) { list += (list.empty() ? "" : " ") + f; };
  for (const std::string& f : b)
    if (!a.count(f) && f.size() > 1) append(f[0] == '-' ? off : on, f.substr(1));
  std::string r;
  if (!on.empty()) r += "now on: " + clip(on, 200);
  if (!off.empty()) r += (r.empty() ? "" : "; ") + std::string("now off: ") + clip(off, 200);
  return r.empty() ? "the same features in another order" : r;
}

std::string describe(const std::string& part, const std::string& was, const std::string& now) {
  if (part == "ir") return describeIr(was, now);
  if (part == "options") return describeFields(was, now, ';');
  if (part == "cpu-features") return describeFeatures(was, now);
  return "'" + clip(was) + "' -> '" + clip(now) + "'";
}

std::vector<KeyDifference> differences(const std::vector<KeyPart>& entry, const CacheKey& key) {
  std::vector<KeyDifference> r;
  auto find = [](const std::vector<KeyPart>& ps, const std::string& n) -> const std::string* {
    for (const KeyPart& p : ps)
      if (p.name == n) return &p.value;
    return nullptr;
  };
  for (const KeyPart& p : key.parts) {
    const std::string* old = find(entry, p.name);
    if (!old)
      r.push_back({p.name, "not in the entry's key (an older key layout)"});
    else if (*old != p.value)
      r.push_back({p.name, describe(p.name, *old, p.value)});
  }
  for (const KeyPart& p : entry)
    if (!key.find(p.name)) r.push_back({p.name, "only in the entry's key: '" + clip(p.value) + "'"});
  return r;
}

}  // namespace

Explanation KeyedStore::explain(const CacheKey& key) const {
  Explanation x;
  x.dir = dir_;
  x.enabled = enabled_;
  x.hash = key.hash;
  if (dir_.empty()) {
    x.note = "no cache folder (set TESSERA_CACHE_DIR, XDG_CACHE_HOME or HOME)";
    return x;
  }
  std::vector<EntryInfo> entries = list();
  size_t valid = 0;
  for (const EntryInfo& e : entries) {
    if (!e.valid) continue;
    ++valid;
    if (e.hash == key.hash && e.parts == key.parts) {
      x.cached = true;
      x.entryPath = e.path;
      return x;
    }
  }
  const std::string* kernel = key.find("kernel");
  const EntryInfo* best = nullptr;
  size_t bestDiff = 0;
  for (const EntryInfo& e : entries) {  // newest first: a tie keeps the most recently used
    if (!e.valid) continue;
    if (kernel) {
      auto it = std::find_if(e.parts.begin(), e.parts.end(), [](const KeyPart& p) { return p.name == "kernel"; });
      if (it == e.parts.end() || it->value != *kernel) continue;
    }
    size_t d = differences(e.parts, key).size();
    if (!best || d < bestDiff) {
      best = &e;
      bestDiff = d;
    }
  }
  if (!best) {
    const size_t bad = entries.size() - valid;
    x.note = "no entry " + (kernel ? "of kernel '" + *kernel + "' " : std::string()) + "among the " +
             std::to_string(valid) + " valid entr" + (valid == 1 ? "y" : "ies") + " of " + dir_ + "/" + kind_ +
             (bad ? " (and " + std::to_string(bad) + " bad, ignored)" : std::string()) +
             ": never compiled with this cache folder, evicted (least recently used past the size limit), or "
             "cleared";
    return x;
  }
  x.nearest = true;
  x.entryPath = best->path;
  x.differences = differences(best->parts, key);
  x.nearestWhy = std::string(kernel ? "the same kernel name, " : "") + std::to_string(x.differences.size()) + " of " +
                 std::to_string(key.parts.size()) + " key parts differ";
  return x;
}

std::string Explanation::str() const {
  std::string r =
      "cache folder: " + (dir.empty() ? std::string("(none)") : dir) + (enabled ? "" : " (disabled)") + "\n";
  if (hash.empty()) return r + note + "\n";
  r += "key: " + hash + "\n";
  if (cached) return r + "cached: " + entryPath + " has this exact key; the next compile loads it\n";
  r += "not cached: no entry has this key, so the next compile compiles\n";
  if (!nearest) return r + (note.empty() ? "" : note + "\n");
  r += "nearest entry: " + entryPath + " (" + nearestWhy + ")\n";
  for (const KeyDifference& d : differences) r += "  " + d.part + ": " + d.summary + "\n";
  return r;
}

}  // namespace tessera::codegen
