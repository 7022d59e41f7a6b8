// Reports: issue names, thread coordinates and messages, the deadlock
// report, a launch's merged LaunchReport and its summary and error text.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "EmulatorImpl.h"

namespace tessera::emu {

const char* name(IssueKind k) {
  switch (k) {
    case IssueKind::SharedRace: return "shared-memory race";
    case IssueKind::SharedOutOfBounds: return "out-of-bounds shared access";
    case IssueKind::GlobalOutOfBounds: return "out-of-bounds global access";
    case IssueKind::DivergentBarrier: return "divergent barrier";
    case IssueKind::Deadlock: return "deadlock";
    case IssueKind::CollectiveMisuse: return "warp collective misuse";
    case IssueKind::KernelException: return "kernel exception";
    case IssueKind::AsyncCopyMisuse: return "asynchronous copy misuse";
  }
  return "?";
}

bool LaunchReport::hasErrors() const {
  for (uint64_t c : counts)
    if (c) return true;
  return false;
}

const BankConflictStat* LaunchReport::conflictsOf(int32_t opId) const {
  for (const auto& s : bankConflicts)
    if (s.opId == opId) return &s;
  return nullptr;
}

std::string LaunchReport::summary() const {
  std::ostringstream os;
  os << blocks << " blocks";
  if (blocksCancelled) os << " (" << blocksCancelled << " cancelled)";
  os << ", " << threads << " threads, " << fiberSwitches << " fiber switches, " << totalBankConflicts
     << " bank conflicts";
  for (size_t k = 0; k < kIssueKinds; ++k)
    if (counts[k]) os << ", " << counts[k] << " x " << name(static_cast<IssueKind>(k));
  return os.str();
}

}  // namespace tessera::emu

namespace tessera::emu::detail {

std::string opLabel(const LaunchConfig& cfg, int32_t op) {
  if (op >= 0 && static_cast<size_t>(op) < cfg.opNames.size())
    return "op #" + std::to_string(op) + " '" + cfg.opNames[op] + "'";
  return "op#" + std::to_string(op);
}

const char* accessName(int32_t kind) {
  return kind == TESSERA_EMU_STORE    ? "write"
         : kind == TESSERA_EMU_ATOMIC ? "atomic"
         : kind == kAsyncLoad         ? "asynchronous read"
                                      : "read";
}

void Worker::coords(uint32_t linear, uint32_t out[3]) const {
  out[0] = linear % cfg->block[0];
  out[1] = linear / cfg->block[0] % cfg->block[1];
  out[2] = linear / (cfg->block[0] * cfg->block[1]);
}
std::string Worker::where(uint32_t linear) const {
  uint32_t t[3];
  coords(linear, t);
  std::ostringstream os;
  os << "kernel '" << cfg->kernelName << "' block (" << blockIdx[0] << "," << blockIdx[1] << "," << blockIdx[2]
     << ") thread (" << t[0] << "," << t[1] << "," << t[2] << ")";
  return os.str();
}
std::string Worker::threadName(uint32_t linear) const {
  uint32_t t[3];
  coords(linear, t);
  return "thread (" + std::to_string(t[0]) + "," + std::to_string(t[1]) + "," + std::to_string(t[2]) + ")";
}

std::string Worker::hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Worker::waitState(uint32_t& first) const {
  uint32_t atBarrier = 0, inColl = 0, atMbar = 0, atCluster = 0;
  first = L->nThreads;
  std::ostringstream detail;
  for (const Fiber& f : fibers) {
    if (f.state == FState::AtBarrier) ++atBarrier;
    if (f.state == FState::InCollective) ++inColl;
    if (f.state == FState::AtMbarrier) ++atMbar;
    if (f.state == FState::AtClusterBarrier) ++atCluster;
    if (f.state != FState::Exited && first == L->nThreads) first = f.linear;
  }
  for (uint32_t wi = 0; wi < L->nWarps; ++wi) {
    const Warp& wp = warps[wi];
    if (!wp.waiting) continue;
    uint32_t l = static_cast<uint32_t>(std::countr_zero(wp.waiting));
    char mask[40];
    std::snprintf(mask, sizeof mask, "0x%llx", static_cast<unsigned long long>(wp.dep[l].mask));
    detail << "; warp " << wi << " lanes 0x" << std::hex << wp.waiting << std::dec << " wait in "
           << collName(wp.dep[l].kind)
           << (isWaveWide(wp.dep[l].kind) ? std::string(" (whole wave)") : std::string(" with mask ") + mask);
  }
  detail << barrierWaits() << mbarrierWaits();
  return std::to_string(atBarrier) + " threads wait at a barrier, " + std::to_string(inColl) +
         " in warp collectives, " + std::to_string(atMbar) + " on mbarriers, " +
         (atCluster ? std::to_string(atCluster) + " at barrier.cluster, " : std::string()) + std::to_string(exited) +
         " exited" + detail.str();
}

void Worker::reportDeadlock() {
  uint32_t first = 0;
  std::string state = waitState(first) + cluster->barrierWaits();
  report(IssueKind::Deadlock, first, -1, -1, -1, [&] { return where(first) + ": no thread can proceed: " + state; });
}

LaunchReport mergeReports(const Launch& L, std::vector<std::unique_ptr<Worker>>& workers) {
  const LaunchConfig& cfg = *L.cfg;
  LaunchReport rep;
  rep.blocks = L.nBlocks;
  rep.threads = L.nBlocks * L.nThreads;
  std::map<int32_t, OpStat> stats;
  std::set<std::tuple<int, int32_t, int32_t>> seen;
  for (auto& w : workers) {
    rep.fiberSwitches += w->switches;
    rep.blocksCancelled += w->blocksCancelled * L.clusterBlocks;
    for (size_t k = 0; k < kIssueKinds; ++k) rep.counts[k] += w->counts[k];
    for (auto& is : w->issues)
      if (seen.emplace(static_cast<int>(is.kind), is.opId, is.otherOpId).second) rep.issues.push_back(std::move(is));
    for (const auto& [op, s] : w->opStats) {
      OpStat& d = stats[op];
      d.warpAccesses += s.warpAccesses;
      d.wavefronts += s.wavefronts;
      d.conflicts += s.conflicts;
    }
  }
  // Deterministic order whatever the host-thread interleaving.
  auto key = [&](const Issue& is) {
    uint64_t b = (uint64_t{is.block[2]} * cfg.grid[1] + is.block[1]) * cfg.grid[0] + is.block[0];
    uint64_t t = (uint64_t{is.thread[2]} * cfg.block[1] + is.thread[1]) * cfg.block[0] + is.thread[0];
    return std::make_tuple(b, t, static_cast<int>(is.kind));
  };
  std::stable_sort(rep.issues.begin(), rep.issues.end(),
                   [&](const Issue& a, const Issue& b) { return key(a) < key(b); });
  if (rep.issues.size() > cfg.maxReports) rep.issues.resize(cfg.maxReports);
  for (const auto& [op, s] : stats) {
    BankConflictStat b;
    b.opId = op;
    b.opName = op >= 0 && static_cast<size_t>(op) < cfg.opNames.size() ? cfg.opNames[op] : "op#" + std::to_string(op);
    b.warpAccesses = s.warpAccesses;
    b.wavefronts = s.wavefronts;
    b.conflicts = s.conflicts;
    rep.totalBankConflicts += s.conflicts;
    rep.bankConflicts.push_back(std::move(b));
  }
  return rep;
}

std::string failureMessage(const LaunchReport& rep, const LaunchConfig& cfg) {
  std::ostringstream os;
  os << "emulated kernel '" << cfg.kernelName << "' failed: " << rep.summary();
  size_t shown = 0;
  for (const auto& is : rep.issues) {
    if (shown++ == 5) {
      os << "\n  ... (" << rep.issues.size() - 5 << " more distinct reports)";
      break;
    }
    os << "\n  " << is.message;
  }
  return os.str();
}

}  // namespace tessera::emu::detail
