// What every engine shares: the names of calls, the cross-rank check of
// calls before data moves, the element-wise reductions of host engines
// (the in-process engine, and MPI's f16 / bf16 operations), and the timeout.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "Comm.h"
#include "tessera/support/Environment.h"

namespace tessera::rt {

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* name(CommEngine e) {
  switch (e) {
    case CommEngine::Auto: return "auto";
    case CommEngine::MPI: return "mpi";
    case CommEngine::NCCL: return "nccl";
    case CommEngine::RCCL: return "rccl";
    case CommEngine::Local: return "local";
  }
  return "?";
}

std::string CommMember::who() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size) + " (" + rt::name(engine) + ")";
}

namespace comm {

const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Broadcast: return "broadcast";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Send: return "send";
    case Kind::Recv: return "recv";
  }
  return "?";
}

namespace {

std::string elements(int64_t n, int64_t dtype) {
  return std::to_string(n) + " " + (dtype >= 0 ? name(static_cast<DType>(dtype)) : "?") + " element" +
         (n == 1 ? "" : "s");
}

bool hasOp(Kind k) { return k == Kind::AllReduce || k == Kind::ReduceScatter; }

// The same words for a call and for another rank's header.
std::string describeParts(Kind k, int64_t op, int64_t dtype, int64_t count, int64_t peer) {
  std::string s = kindName(k);
  if (hasOp(k) && op >= 0) s += std::string(" (") + name(static_cast<ReduceOp>(op)) + ")";
  if (k == Kind::AllToAll) return s + " of " + elements(count, dtype) + " in all";
  s += " of " + elements(count, dtype);
  if (k == Kind::AllGather || k == Kind::ReduceScatter) s += " per rank";
  if (k == Kind::Broadcast) s += " from rank " + std::to_string(peer);
  if (k == Kind::Send) s += " to rank " + std::to_string(peer);
  if (k == Kind::Recv) s += " from rank " + std::to_string(peer);
  return s;
}

size_t sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}

uint64_t mix(uint64_t h, int64_t v) {
  // FNV-1a over the 8 bytes.
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xffu;
    h *= 1099511628211ull;
  }
  return h;
}

// "rank 0", "ranks 0, 2-5".
std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string describeHeader(const Header& h) {
  if (h.calls == 0) return "no collective call (only sends and receives)";
  std::string s = describeParts(static_cast<Kind>(h.kind), h.op, h.dtype, h.count, h.peer);
  if (h.calls > 1)
    s += " and " + std::to_string(h.calls - 1) + " more call" + (h.calls == 2 ? "" : "s") + " in a group";
  return s;
}

}  // namespace

std::string describe(const Call& c) {
  int64_t count = c.kind == Kind::AllToAll ? static_cast<int64_t>(sum(c.sendCounts)) : static_cast<int64_t>(c.count);
  return describeParts(c.kind, static_cast<int64_t>(c.op), static_cast<int64_t>(c.dtype), count, c.peer);
}

Header headerOf(const std::vector<Call>& calls, int64_t seq) {
  Header h;
  h.seq = seq;
  uint64_t digest = 14695981039346656037ull;
  for (const Call& c : calls) {
    if (isPointToPoint(c.kind)) continue;
    const int64_t op = hasOp(c.kind) ? static_cast<int64_t>(c.op) : -1;
    const int64_t count =
        c.kind == Kind::AllToAll ? static_cast<int64_t>(c.sendCounts.size()) : static_cast<int64_t>(c.count);
    const int64_t peer = c.kind == Kind::Broadcast ? c.peer : -1;
    if (h.calls++ == 0) {
      h.kind = static_cast<int64_t>(c.kind);
      h.dtype = static_cast<int64_t>(c.dtype);
      h.op = op;
      h.count = c.kind == Kind::AllToAll ? static_cast<int64_t>(sum(c.sendCounts)) : count;
      h.peer = peer;
    }
    for (int64_t v : {static_cast<int64_t>(c.kind), static_cast<int64_t>(c.dtype), op, count, peer})
      digest = mix(digest, v);
  }
  h.digest = static_cast<int64_t>(digest);
  return h;
}

void compareHeaders(const std::vector<Header>& all, int self, const std::string& engine) {
  // all_to_all's total differs between ranks by design: its counts are
  // compared pairwise afterwards (compareAllToAll).
  auto key = [](const Header& h) {
    Header k = h;
    if (h.kind == static_cast<int64_t>(Kind::AllToAll)) k.count = 0;
    return std::vector<int64_t>{k.seq, k.calls, k.kind, k.dtype, k.op, k.count, k.peer, k.digest};
  };
  bool same = true;
  for (const Header& h : all) same = same && key(h) == key(all[0]);
  if (same) return;
  const Header& mine = all[size_t(self)];
  std::string msg = "collective call on rank " + std::to_string(self) + " (" + engine + ", " + describeHeader(mine) +
                    "): the ranks' calls do not match: ";
  // Out of step: the same call at different positions.
  bool seqDiffers = false;
  for (const Header& h : all) seqDiffers = seqDiffers || h.seq != mine.seq;
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (size_t r = 0; r < all.size(); ++r) {
    std::string d = describeHeader(all[r]);
    if (seqDiffers) d += " as its collective call #" + std::to_string(all[r].seq + 1);
    if (!groups.count(d)) order.push_back(d);
    groups[d].push_back(static_cast<int>(r));
  }
  if (order.size() == 1)  // the same first call: the rest of a group differs
    msg += "the groups of calls differ after their first call (" + order[0] + ")";
  for (size_t i = 0; order.size() > 1 && i < order.size(); ++i)
    msg += (i ? "; " : "") + rankList(groups[order[i]]) + ": " + order[i];
  msg +=
      ". Every rank must make the same collective calls, in the same order, with the same counts, dtypes, "
      "operation and root; no data was moved";
  throw CommError(msg);
}

void compareAllToAll(const std::vector<std::vector<int64_t>>& countsOfAll, DType dtype, int self,
                     const std::string& engine) {
  // Every rank checks every pair, so that all of them fail together.
  const size_t P = countsOfAll.size();
  for (size_t p = 0; p < P; ++p)
    for (size_t q = 0; q < P; ++q) {
      const int64_t sends = countsOfAll[p][q], expects = countsOfAll[q][P + p];
      if (sends == expects) continue;
      throw CommError("all_to_all on rank " + std::to_string(self) + " (" + engine + "): rank " + std::to_string(p) +
                      " sends " + elements(sends, static_cast<int64_t>(dtype)) + " to rank " + std::to_string(q) +
                      " but rank " + std::to_string(q) + " expects " + elements(expects, static_cast<int64_t>(dtype)) +
                      " from it (its recvCounts[" + std::to_string(p) +
                      "]); rank p's sendCounts[r] must equal rank r's recvCounts[p]; no data "
                      "was moved");
    }
}

std::vector<int64_t> allToAllCounts(const Call& c) {
  std::vector<int64_t> v(c.sendCounts.begin(), c.sendCounts.end());
  v.insert(v.end(), c.recvCounts.begin(), c.recvCounts.end());
  return v;
}

PeerHeader peerHeaderOf(const Call& c, int64_t seq) {
  return {seq, static_cast<int64_t>(c.kind), static_cast<int64_t>(c.dtype), static_cast<int64_t>(c.count)};
}

void comparePeer(const PeerHeader& mine, const PeerHeader& theirs, int self, int peer, const std::string& engine) {
  const bool complementary =
      (mine.kind == static_cast<int64_t>(Kind::Send) && theirs.kind == static_cast<int64_t>(Kind::Recv)) ||
      (mine.kind == static_cast<int64_t>(Kind::Recv) && theirs.kind == static_cast<int64_t>(Kind::Send));
  if (complementary && mine.dtype == theirs.dtype && mine.count == theirs.count && mine.seq == theirs.seq) return;
  auto side = [](const PeerHeader& h, int rank) {
    const bool send = h.kind == static_cast<int64_t>(Kind::Send);
    return "rank " + std::to_string(rank) + (send ? " sends " : " receives ") + elements(h.count, h.dtype) +
           " (its call #" + std::to_string(h.seq + 1) + (send ? " to" : " from") + " the other)";
  };
  throw CommError(std::string(kindName(static_cast<Kind>(mine.kind))) + " between rank " + std::to_string(self) +
                  " and rank " + std::to_string(peer) + " (" + engine +
                  "): the two sides do not match: " + side(mine, self) + ", " + side(theirs, peer) +
                  "; a send must meet a recv of the same count and dtype; no data was moved");
}

// ---- reductions ------------------------------------------------------------

namespace {

float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    const float m = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -m : m;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Max: return b > a ? b : a;
    case ReduceOp::Min: return b < a ? b : a;
  }
  return a;
}

// NaN propagates through max and min, as in NCCL and IEEE maximum.
template <typename T>
T combineFloat(ReduceOp op, T a, T b) {
  if ((op == ReduceOp::Max || op == ReduceOp::Min) && (std::isnan(a) || std::isnan(b))) return a + b;
  return combine(op, a, b);
}

template <typename T>
void loop(ReduceOp op, void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  switch (op) {  // one loop per operation, so each vectorises
    case ReduceOp::Sum:
      for (size_t i = 0; i < n; ++i) d[i] = d[i] + s[i];
      return;
    case ReduceOp::Prod:
      for (size_t i = 0; i < n; ++i) d[i] = d[i] * s[i];
      return;
    default:
      for (size_t i = 0; i < n; ++i) {
        if constexpr (std::is_floating_point_v<T>)
          d[i] = combineFloat(op, d[i], s[i]);
        else
          d[i] = combine(op, d[i], s[i]);
      }
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void loop16(ReduceOp op, void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* s = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = FromFloat(combineFloat(op, ToFloat(d[i]), ToFloat(s[i])));
}

}  // namespace

bool reducible(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64 || t == DType::I32 ||
         t == DType::I64;
}

void reduceInto(DType t, ReduceOp op, void* dst, const void* src, size_t n) {
  switch (t) {
    case DType::F32: return loop<float>(op, dst, src, n);
    case DType::F64: return loop<double>(op, dst, src, n);
    case DType::I32: {
      // Wrapping integer arithmetic, as NCCL and MPI do on two's complement.
      if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
        auto* d = static_cast<uint32_t*>(dst);
        const auto* s = static_cast<const uint32_t*>(src);
        for (size_t i = 0; i < n; ++i) d[i] = op == ReduceOp::Sum ? d[i] + s[i] : d[i] * s[i];
        return;
      }
      return loop<int32_t>(op, dst, src, n);
    }
    case DType::I64: {
      if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
        auto* d = static_cast<uint64_t*>(dst);
        const auto* s = static_cast<const uint64_t*>(src);
        for (size_t i = 0; i < n; ++i) d[i] = op == ReduceOp::Sum ? d[i] + s[i] : d[i] * s[i];
        return;
      }
      return loop<int64_t>(op, dst, src, n);
    }
    case DType::F16: return loop16<halfToFloat, floatToHalfBits>(op, dst, src, n);
    case DType::BF16: return loop16<bf16ToFloat, floatToBFloat16Bits>(op, dst, src, n);
    default: TS_UNREACHABLE(std::string("reduceInto: ") + name(t) + " is not reducible");
  }
}

double resolveTimeout(double optionSeconds) {
  if (optionSeconds < 0 || !std::isfinite(optionSeconds))
    throw UsageError("CommOptions::timeoutSeconds = " + std::to_string(optionSeconds) +
                     ": use a positive number of seconds, or 0 for the default");
  if (optionSeconds > 0) return optionSeconds;
  const char* v = tessera::env::get(tessera::env::Var::CommTimeout);
  if (!v || !*v) return 300;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end || !(s > 0) || !std::isfinite(s))
    throw UsageError(std::string("TESSERA_COMM_TIMEOUT='") + v +
                     "' is not a number of seconds: set it to a positive number (e.g. 30 or 0.5), or unset it for "
                     "300 s");
  return s;
}

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace comm
}  // namespace tessera::rt
