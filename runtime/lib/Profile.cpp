// Profiled launches: the buffer (ProfileBuffer.h), its decoding into
// slices, and the trace and summary of a Profile (tessera/runtime/
// Profile.h; the buffer's layout: tessera/support/Profile.h).
#include "ProfileBuffer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "tessera/support/Error.h"
#include "tessera/support/Profile.h"

namespace tessera::rt {

namespace {

uint32_t powerOfTwoAtLeast(uint32_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30)) p <<= 1;
  return p;
}

/// Time-stamp counter ticks per nanosecond, measured once against the
/// steady clock over 20 ms (0 where the host has no such counter).
double tscPerNs() {
#if defined(__x86_64__) || defined(__i386__)
  static const double rate = [] {
    auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t c1 = __rdtsc();
    auto t1 = std::chrono::steady_clock::now();
    return double(c1 - c0) / double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }();
  return rate;
#else
  return 0;
#endif
}

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          r += buf;
        } else {
          r += c;
        }
    }
  }
  return r + "\"";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

/// The scope's name without its location ("mainloop @ f.cpp:3" -> "mainloop").
std::string bare(const std::string& scope) {
  const size_t at = scope.find(" @ ");
  return at == std::string::npos ? scope : scope.substr(0, at);
}

}  // namespace

ProfileBuffer::ProfileBuffer(const Kernel::State& kernel, const ProfileOptions* opts, uint64_t programs)
    : kernel_(kernel) {
  if (opts && (opts->recordsPerWarp == 0 || opts->programs == 0))
    throw LaunchError(kernel.signature.kernelName + ": ProfileOptions::recordsPerWarp and programs must be positive");
  capacity_ = opts ? powerOfTwoAtLeast(opts->recordsPerWarp) : 1;
  warps_ = std::max(1u, kernel.profileWarps);
  programs_ = opts ? static_cast<uint32_t>(std::min<uint64_t>(opts->programs, programs)) : 0;
  bytes_ = profileBufferBytes(capacity_, profileSlots(warps_, programs_));  // the spare program too (Profile.h)
  // A bound the user can act on, before the device's own error.
  constexpr uint64_t kMaxBytes = uint64_t{1} << 32;
  if (bytes_ > kMaxBytes)
    throw LaunchError(kernel.signature.kernelName + ": a profile of " + std::to_string(programs_) + " programs x " +
                      std::to_string(warps_) + " warps x " + std::to_string(capacity_) + " records needs " +
                      std::to_string(bytes_) +
                      " bytes, above 4 GiB; lower ProfileOptions::programs or "
                      "recordsPerWarp");
  ptr_ = kernel.device->alloc(bytes_);  // zeroed
  ProfileHeader h;
  h.capacity = capacity_;
  h.warps = warps_;
  h.programs = programs_;
  kernel.device->copyHostToDevice(ptr_, &h, sizeof h);
}

ProfileBuffer::~ProfileBuffer() {
  if (ptr_) kernel_.device->free(ptr_);
}

void* ProfileBuffer::param() {
  if (kernel_.device->kind() == DeviceKind::CPU) return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_));
  return &ptr_;
}

void ProfileBuffer::finish(Profile& out) {
  // The slot headers in one copy; then each used slot's records.
  const uint64_t slots = profileSlots(warps_, programs_), recordsAt = profileRecordsAt(slots);
  std::vector<ProfileSlotHeader> heads(slots);
  kernel_.device->copyDeviceToHost(heads.data(), ptr_ + ProfileHeader::kBytes, slots * ProfileSlotHeader::kBytes);
  out.kernel = kernel_.signature.kernelName;
  out.device = kernel_.device->name();
  out.programs = programs_;
  out.warpsPerProgram = warps_;
  out.slices.clear();
  out.overwritten = out.unmatched = 0;
  // Times to nanoseconds.
  double perTick = 1;
  switch (kernel_.profileClock) {
    case Binary::ProfileClock::Nanoseconds: out.clock = "ns (%globaltimer)"; break;
    case Binary::ProfileClock::Realtime100MHz:
      out.clock = "ns (s_memrealtime, 100 MHz)";
      perTick = 10;
      break;
    case Binary::ProfileClock::TimeStampCounter: {
      const double rate = tscPerNs();
      perTick = rate > 0 ? 1 / rate : 1;
      out.clock = rate > 0 ? "ns (time-stamp counter at " + num(rate) + " GHz)" : "cycles";
      break;
    }
    case Binary::ProfileClock::EmulatorOps: out.clock = "emulated operations"; break;
    case Binary::ProfileClock::None: out.clock = "none"; break;
  }
  struct Event {
    uint64_t time;
    uint32_t event;
  };
  struct Warp {
    uint64_t program;
    uint32_t warp, unit;
    std::vector<Event> events;
  };
  std::vector<Warp> warps;
  uint64_t first = UINT64_MAX;
  std::vector<ProfileRecord> records(capacity_);
  for (uint64_t slot = 0; slot < uint64_t{programs_} * warps_; ++slot) {
    const ProfileSlotHeader& sh = heads[slot];
    if (sh.count == 0) continue;
    Warp w{slot / warps_, static_cast<uint32_t>(slot % warps_), sh.unit, {}};
    const uint32_t kept = std::min(sh.count, capacity_);
    out.overwritten += sh.count - kept;
    kernel_.device->copyDeviceToHost(records.data(),
                                     ptr_ + recordsAt + slot * capacity_ * uint64_t{ProfileRecord::kBytes},
                                     uint64_t{kept} * ProfileRecord::kBytes);
    for (uint32_t i = sh.count - kept; i < sh.count; ++i) {
      const ProfileRecord& r = records[i & (capacity_ - 1)];
      w.events.push_back({r.time, r.event});
      first = std::min(first, r.time);
    }
    warps.push_back(std::move(w));
  }
  const auto& scopes = kernel_.profileScopes;
  for (const Warp& w : warps) {
    std::vector<std::pair<uint32_t, uint64_t>> open;  // scope, begin
    std::vector<ProfileSlice> mine;
    std::string role;
    for (const Event& e : w.events) {
      const uint32_t scope = e.event >> 1;
      if (scope >= scopes.size()) {
        ++out.unmatched;
        continue;
      }
      if (!(e.event & 1)) {
        open.push_back({scope, e.time});
        continue;
      }
      // An end: its begin is the innermost open scope, unless the ring
      // overwrote it.
      if (open.empty() || open.back().first != scope) {
        ++out.unmatched;
        continue;
      }
      ProfileSlice sl;
      sl.scope = scopes[scope];
      sl.depth = static_cast<uint32_t>(open.size() - 1);
      sl.program = w.program;
      sl.warp = w.warp;
      sl.unit = w.unit;
      sl.begin = double(open.back().second - first) * perTick;
      sl.end = double(e.time - first) * perTick;
      const std::string b = bare(sl.scope);
      if (b == "producer" || b == "consumer") role = b;
      mine.push_back(std::move(sl));
      open.pop_back();
    }
    out.unmatched += open.size();
    std::sort(mine.begin(), mine.end(), [](const ProfileSlice& a, const ProfileSlice& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.depth < b.depth;
    });
    for (ProfileSlice& s : mine) {
      s.role = role;
      out.slices.push_back(std::move(s));
    }
  }
}

std::string Profile::chromeTrace() const {
  std::string r = "{\"displayTimeUnit\": \"ns\",\n \"otherData\": {\"kernel\": " + jsonString(kernel) +
                  ", \"device\": " + jsonString(device) + ", \"clock\": " + jsonString(clock) +
                  ", \"programs\": " + std::to_string(programs) +
                  ", \"warpsPerProgram\": " + std::to_string(warpsPerProgram) +
                  ", \"overwritten\": " + std::to_string(overwritten) +
                  ", \"unmatched\": " + std::to_string(unmatched) + "},\n \"traceEvents\": [";
  bool firstEvent = true;
  auto add = [&](const std::string& e) {
    r += (firstEvent ? "\n  " : ",\n  ") + e;
    firstEvent = false;
  };
  // Names of the tracks: a process per unit, a thread per (program, warp).
  std::map<uint32_t, bool> units;
  std::map<std::pair<uint32_t, uint64_t>, std::string> threads;
  const bool cpu = warpsPerProgram == 1 && device.rfind("cpu", 0) == 0;
  for (const ProfileSlice& s : slices) {
    units[s.unit] = true;
    const uint64_t tid = s.program * warpsPerProgram + s.warp;
    threads[{s.unit, tid}] = "program " + std::to_string(s.program) +
                             (cpu ? std::string() : " warp " + std::to_string(s.warp)) +
                             (s.role.empty() ? std::string() : " (" + s.role + ")");
  }
  const std::string unitName = cpu ? "core " : device.find("amdgpu") != std::string::npos ? "CU " : "SM ";
  for (const auto& [u, _] : units)
    add("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(u) +
        ", \"args\": {\"name\": " + jsonString(unitName + std::to_string(u)) + "}}");
  for (const auto& [key, name] : threads)
    add("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(key.first) +
        ", \"tid\": " + std::to_string(key.second) + ", \"args\": {\"name\": " + jsonString(name) + "}}");
  for (const ProfileSlice& s : slices)
    add("{\"ph\": \"X\", \"name\": " + jsonString(bare(s.scope)) +
        ", \"cat\": " + jsonString(s.role.empty() ? "kernel" : s.role) + ", \"pid\": " + std::to_string(s.unit) +
        ", \"tid\": " + std::to_string(s.program * warpsPerProgram + s.warp) + ", \"ts\": " + num(s.begin / 1000) +
        ", \"dur\": " + num((s.end - s.begin) / 1000) + ", \"args\": {\"scope\": " + jsonString(s.scope) + "}}");
  return r + "\n ]\n}\n";
}

void Profile::writeChromeTrace(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw UsageError("cannot write the trace to '" + path + "'");
  f << chromeTrace();
  if (!f.flush()) throw UsageError("cannot write the trace to '" + path + "'");
}

std::string Profile::summary() const {
  // (role, scope) -> per warp, the time spent in it and how often.
  std::map<std::pair<std::string, std::string>, std::map<uint64_t, std::pair<double, uint64_t>>> per;
  for (const ProfileSlice& s : slices) {
    auto& w = per[{s.role, s.scope}][s.program * warpsPerProgram + s.warp];
    w.first += s.end - s.begin;
    ++w.second;
  }
  std::string r = kernel + " on " + device + ": " + std::to_string(programs) + " programs x " +
                  std::to_string(warpsPerProgram) + (warpsPerProgram == 1 ? " thread" : " warps") +
                  " recorded; times in " + clock + ", per warp: min / median / max over the warps\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-10s %-48s %8s %8s %12s %12s %12s\n", "role", "scope", "warps", "runs", "min",
                "median", "max");
  r += line;
  for (const auto& [key, warps] : per) {
    std::vector<double> t;
    uint64_t runs = 0;
    for (const auto& [w, v] : warps) {
      t.push_back(v.first);
      runs += v.second;
    }
    std::sort(t.begin(), t.end());
    std::string scope = key.second.size() > 48 ? key.second.substr(0, 45) + "..." : key.second;
    std::snprintf(line, sizeof line, "%-10s %-48s %8zu %8llu %12.0f %12.0f %12.0f\n",
                  key.first.empty() ? "-" : key.first.c_str(), scope.c_str(), t.size(),
                  static_cast<unsigned long long>(runs), t.front(), t[t.size() / 2], t.back());
    r += line;
  }
  if (overwritten || unmatched)
    r += std::to_string(overwritten) + " records overwritten (raise ProfileOptions::recordsPerWarp), " +
         std::to_string(unmatched) + " unmatched\n";
  return r;
}

}  // namespace tessera::rt
