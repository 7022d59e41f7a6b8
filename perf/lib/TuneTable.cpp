// Tuning results on disk and in deployable tables (TuneTable.h).
//
// A stored entry's payload is "name=value" lines (status, seconds, min,
// reps, shape, reason): small, readable with `strings`, and extensible --
// a field this version does not know is ignored, a missing one defaults.
#include "tessera/perf/TuneTable.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "Json.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/support/Error.h"

namespace tessera::perf {

namespace {

std::vector<codegen::KeyPart> keyParts(const std::string& kernel, const std::string& bucket, const std::string& dtype,
                                       const std::string& device, const std::string& toolchain) {
  return {{"kernel", kernel}, {"bucket", bucket}, {"dtype", dtype}, {"device", device}, {"toolchain", toolchain}};
}

codegen::CacheKey entryKey(const TuneResult& r, const TuneConfig& c) {
  auto parts = keyParts(r.kernel, r.bucket, r.dtype, r.device, r.toolchain);
  if (!r.code.empty()) parts.push_back({"code", r.code});
  parts.push_back({"config", c.str()});
  return codegen::CacheKey::make(kTuneStoreKind, std::move(parts));
}

// A deterministic run's pin: the key's parts without a config, and a
// "pin" part; its payload "config=NAME=V,...". An entry without a config
// part is no measurement, so the table's loop over measurements passes it by.
codegen::CacheKey pinKey(const TuneResult& r) {
  auto parts = keyParts(r.kernel, r.bucket, r.dtype, r.device, r.toolchain);
  if (!r.code.empty()) parts.push_back({"code", r.code});
  parts.push_back({"pin", "deterministic"});
  return codegen::CacheKey::make(kTuneStoreKind, std::move(parts));
}

std::optional<TuneConfig> decodePin(const std::string& payload) {
  if (payload.rfind("config=", 0) != 0) return std::nullopt;
  try {
    return TuneConfig::parse(payload.substr(7, payload.find('\n') - 7));
  } catch (const Error&) {
    return std::nullopt;  // another version's spelling: no pin
  }
}

std::string oneLine(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

std::string encode(const TuneCandidateResult& c) {
  std::ostringstream o;
  o.precision(17);
  o << "status=" << name(c.status) << "\nseconds=" << c.seconds << "\nmin=" << c.minSeconds << "\nreps=" << c.reps
    << "\nshape=" << oneLine(c.shape) << "\nreason=" << oneLine(c.reason) << "\n";
  return o.str();
}

std::optional<TuneStatus> parseStatus(const std::string& s) {
  for (TuneStatus t : {TuneStatus::Measured, TuneStatus::Constraint, TuneStatus::Resources, TuneStatus::CompileFail,
                       TuneStatus::Wrong, TuneStatus::LaunchFail})
    if (s == name(t)) return t;
  return std::nullopt;
}

// Nullopt for a payload that does not say how the config ended: the entry
// passed the store's checksum, so that is another version's format -- the
// config is measured again rather than guessed.
std::optional<TuneCandidateResult> decode(const std::string& payload, const TuneConfig& config) {
  TuneCandidateResult c;
  c.config = config;
  c.fromStore = true;
  std::istringstream in(payload);
  std::string line;
  bool haveStatus = false;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "status") {
      auto s = parseStatus(v);
      if (!s) return std::nullopt;
      c.status = *s;
      haveStatus = true;
    } else if (k == "seconds") {
      c.seconds = std::strtod(v.c_str(), nullptr);
    } else if (k == "min") {
      c.minSeconds = std::strtod(v.c_str(), nullptr);
    } else if (k == "reps") {
      c.reps = std::atoi(v.c_str());
    } else if (k == "shape") {
      c.shape = v;
    } else if (k == "reason") {
      c.reason = v;
    }
  }
  if (!haveStatus || (c.valid() && !(c.seconds > 0 && std::isfinite(c.seconds)))) return std::nullopt;
  return c;
}

std::string partOf(const std::vector<codegen::KeyPart>& parts, const std::string& n) {
  for (const auto& p : parts)
    if (p.name == n) return p.value;
  return {};
}

}  // namespace

std::optional<TuneCandidateResult> loadTuneEntry(const TuneResult& key, const TuneConfig& config) {
  codegen::KeyedStore store(kTuneStoreKind);
  if (!store.usable()) return std::nullopt;
  std::optional<std::string> payload = store.load(entryKey(key, config));
  if (!payload) return std::nullopt;
  return decode(*payload, config);
}

bool saveTuneEntry(const TuneResult& key, const TuneCandidateResult& c) {
  codegen::KeyedStore store(kTuneStoreKind);
  return store.usable() && store.save(entryKey(key, c.config), encode(c));
}

std::optional<TuneConfig> loadTunePin(const TuneResult& key) {
  codegen::KeyedStore store(kTuneStoreKind);
  if (!store.usable()) return std::nullopt;
  std::optional<std::string> payload = store.load(pinKey(key));
  return payload ? decodePin(*payload) : std::nullopt;
}

bool saveTunePin(const TuneResult& key, const TuneConfig& c) {
  codegen::KeyedStore store(kTuneStoreKind);
  return store.usable() && store.save(pinKey(key), "config=" + c.str() + "\n");
}

// ---- the table ---------------------------------------------------------------

TuneTable TuneTable::fromStore(const std::string& kernel, const std::string& code) {
  TuneTable t;
  codegen::KeyedStore store(kTuneStoreKind);
  const std::string toolchain = tuneToolchainKey();
  const bool deterministic = tuneDeterministic(TuneOptions{});
  std::vector<const codegen::EntryInfo*> pins;
  const std::vector<codegen::EntryInfo> all = store.list();
  for (const codegen::EntryInfo& e : all) {
    if (!e.valid || partOf(e.parts, "toolchain") != toolchain) continue;
    if (!kernel.empty() && partOf(e.parts, "kernel") != kernel) continue;
    if (!code.empty() && partOf(e.parts, "code") != code) continue;  // measured for other code
    if (!partOf(e.parts, "pin").empty()) {
      if (deterministic) pins.push_back(&e);
      continue;
    }
    TuneConfig config;
    try {
      config = TuneConfig::parse(partOf(e.parts, "config"));
    } catch (const Error&) {
      continue;  // not a config this version spells: not ours to export
    }
    std::optional<std::string> payload = store.load(codegen::CacheKey::make(kTuneStoreKind, e.parts));
    std::optional<TuneCandidateResult> c = payload ? decode(*payload, config) : std::nullopt;
    if (!c || !c->valid()) continue;
    t.add({partOf(e.parts, "kernel"), partOf(e.parts, "bucket"), partOf(e.parts, "dtype"), partOf(e.parts, "device"),
           toolchain, config, c->seconds, c->shape});
  }
  // Deterministic: a pinned key gives its pin, whatever is faster.
  for (const codegen::EntryInfo* e : pins) {
    std::optional<std::string> payload = store.load(codegen::CacheKey::make(kTuneStoreKind, e->parts));
    std::optional<TuneConfig> config = payload ? decodePin(*payload) : std::nullopt;
    if (!config) continue;
    std::vector<codegen::KeyPart> parts;
    for (const codegen::KeyPart& k : e->parts)
      if (k.name != "pin") parts.push_back(k);
    parts.push_back({"config", config->str()});
    std::optional<std::string> measured = store.load(codegen::CacheKey::make(kTuneStoreKind, std::move(parts)));
    std::optional<TuneCandidateResult> c = measured ? decode(*measured, *config) : std::nullopt;
    TuneTableEntry pinned{partOf(e->parts, "kernel"),
                          partOf(e->parts, "bucket"),
                          partOf(e->parts, "dtype"),
                          partOf(e->parts, "device"),
                          toolchain,
                          *config,
                          c && c->valid() ? c->seconds : 0,
                          c ? c->shape : std::string()};
    auto same = std::find_if(t.entries.begin(), t.entries.end(), [&](const TuneTableEntry& x) {
      return x.kernel == pinned.kernel && x.bucket == pinned.bucket && x.dtype == pinned.dtype &&
             x.device == pinned.device;
    });
    if (same != t.entries.end())
      *same = pinned;
    else
      t.entries.push_back(pinned);
  }
  return t;
}

void TuneTable::add(const TuneTableEntry& e) {
  for (TuneTableEntry& old : entries)
    if (old.kernel == e.kernel && old.bucket == e.bucket && old.dtype == e.dtype && old.device == e.device) {
      if (e.seconds < old.seconds || !(old.seconds > 0)) old = e;
      return;
    }
  entries.push_back(e);
}

const TuneTableEntry* TuneTable::find(const std::string& kernel, const std::vector<int64_t>& shape,
                                      const std::string& dtype, const std::string& device) const {
  const std::string bucket = shapeBucket(shape);
  for (const TuneTableEntry& e : entries)
    if (e.kernel == kernel && e.bucket == bucket && e.dtype == dtype && e.device == device) return &e;
  return nullptr;
}

TuneConfig TuneTable::pick(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                           const std::string& device) const {
  if (const TuneTableEntry* e = find(kernel, shape, dtype, device)) return e->config;
  std::string have;
  for (const TuneTableEntry& e : entries)
    if (e.kernel == kernel) have += "\n  " + e.bucket + " " + e.dtype + " on " + e.device;
  throw UsageError(
      "tune table: no config for " + kernel + " at bucket " + shapeBucket(shape) + " (" + dtype + ", " + device +
      "); " +
      (have.empty() ? "the table has no entry for " + kernel : "the table has, for " + kernel + ":" + have + "\n") +
      " (tune that shape with `tessera tune`, or pick with a fallback config)");
}

TuneConfig TuneTable::pick(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                           const std::string& device, const TuneConfig& fallback) const {
  const TuneTableEntry* e = find(kernel, shape, dtype, device);
  return e ? e->config : fallback;
}

const TuneTableEntry* TuneTable::findFor(const std::string& kernel, const std::vector<int64_t>& shape,
                                         const std::string& dtype, const Device& device) const {
  if (const TuneTableEntry* e = find(kernel, shape, dtype, tuneDeviceKey(device))) return e;
  const Machine* m = machineForDevice(rt::name(device.kind()), device.arch(), device.name(), gpuMachines());
  return m ? find(kernel, shape, dtype, modelDeviceKey(*m)) : nullptr;
}

TuneConfig TuneTable::pickFor(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                              const Device& device, const TuneConfig& fallback) const {
  const TuneTableEntry* e = findFor(kernel, shape, dtype, device);
  return e ? e->config : fallback;
}

// ---- JSON ----------------------------------------------------------------------

std::string TuneTable::toJson() const {
  json::Value root = json::Value::object();
  root.set("format", "tessera-tune-table");
  root.set("version", 1);
  root.set("bucket_rule", "each dimension rounded up to a power of two");
  json::Value list = json::Value::array();
  for (const TuneTableEntry& e : entries) {
    json::Value v = json::Value::object();
    v.set("kernel", e.kernel);
    v.set("bucket", e.bucket);
    v.set("dtype", e.dtype);
    v.set("device", e.device);
    v.set("toolchain", e.toolchain);
    json::Value cfg = json::Value::object();
    for (const auto& [k, x] : e.config.values) cfg.set(k, x);
    v.set("config", std::move(cfg));
    v.set("median_s", e.seconds);
    v.set("shape", e.shape);
    list.push(std::move(v));
  }
  root.set("entries", std::move(list));
  return json::write(root);
}

TuneTable TuneTable::fromJson(const std::string& text, const std::string& source) {
  json::Value root = json::parse(text, source);
  auto bad = [&](const std::string& what) { return UsageError(source + ": not a tune table: " + what); };
  const json::Value* fmt = root.isObject() ? root.find("format") : nullptr;
  if (!fmt || !fmt->isString() || fmt->asString() != "tessera-tune-table")
    throw bad("\"format\" must be \"tessera-tune-table\"");
  const json::Value* ver = root.find("version");
  if (!ver || !ver->isNumber() || ver->asNumber() != 1) throw bad("\"version\" must be 1");
  const json::Value* list = root.find("entries");
  if (!list || !list->isArray()) throw bad("\"entries\" must be an array");
  TuneTable t;
  size_t i = 0;
  for (const json::Value& v : list->items()) {
    const std::string at = "entries[" + std::to_string(i++) + "]";
    if (!v.isObject()) throw bad(at + " is not an object");
    auto str = [&](const char* k, bool required) {
      const json::Value* f = v.find(k);
      if (!f || !f->isString()) {
        if (required) throw bad(at + "." + k + " must be a string");
        return std::string();
      }
      return f->asString();
    };
    TuneTableEntry e;
    e.kernel = str("kernel", true);
    e.bucket = str("bucket", true);
    e.dtype = str("dtype", true);
    e.device = str("device", true);
    e.toolchain = str("toolchain", false);
    e.shape = str("shape", false);
    const json::Value* cfg = v.find("config");
    if (!cfg || !cfg->isObject() || cfg->members().empty())
      throw bad(at + ".config must be an object of integer parameters");
    for (const auto& [k, x] : cfg->members()) {
      if (!x.isNumber() || x.asNumber() != std::floor(x.asNumber()) || std::fabs(x.asNumber()) > 9.0e15)
        throw bad(at + ".config." + k + " must be an integer");
      e.config.values.emplace_back(k, static_cast<int64_t>(x.asNumber()));
    }
    if (const json::Value* s = v.find("median_s"); s && s->isNumber()) e.seconds = s->asNumber();
    t.add(e);
  }
  return t;
}

TuneTable TuneTable::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError("tune table: cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return fromJson(ss.str(), path);
}

void TuneTable::save(const std::string& path) const {
  std::string text = toJson();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
    throw UsageError("tune table: cannot write '" + path + "'");
}

}  // namespace tessera::perf
