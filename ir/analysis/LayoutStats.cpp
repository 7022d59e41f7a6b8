#include "tessera/ir/analysis/LayoutStats.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "tessera/ir/analysis/AxisInfo.h"

namespace tessera::ir {

namespace {

AccessStats judge(const AxisAnalysis& axis, const LayoutAnalysis& la, const LoweringRecord::Access& a) {
  const Op& op = *a.op;
  const Value* p = op.operand(op.code() == OpCode::Copy ? 1 : 0);
  const auto& shape = p->type().shape();
  const int r = static_cast<int>(shape.size());
  AccessStats s;
  s.op = &op;
  s.layout = a.layout.str();
  s.width = a.width;
  s.allowedWidth = la.vectorWidth(op);

  // The most contiguous dim, the last on ties (as accessLayout).
  AxisInfo ai = axis.get(p);
  int f = r - 1;
  if (static_cast<int>(ai.contiguity.size()) == r)
    for (int d = r - 2; d >= 0; --d)
      if (ai.contiguity[d] > ai.contiguity[f]) f = d;
  const int64_t contig = static_cast<int>(ai.contiguity.size()) == r ? ai.contiguity[f] : 1;
  s.contiguous = contig > 1;

  const BlockedLayout& b = a.layout.parent;
  const int pf = a.layout.dims[f];
  int fastestLaneDim = -1;
  for (int64_t d : b.order)
    if (b.tpw[d] > 1) {
      fastestLaneDim = static_cast<int>(d);
      break;
    }
  const int64_t run = std::min(b.spt[pf], shape[f]);
  const int64_t warpSpan = std::min(shape[f], b.tpw[pf] * b.spt[pf]);
  s.coalesced = s.contiguous && fastestLaneDim == pf && a.width == run && contig >= warpSpan;

  int64_t elems = 1;
  for (int64_t e : shape) elems *= e;
  const double threads = double(la.numWarps()) * la.warpSize();
  s.replication = threads * double(slotTable(a.layout, shape).size()) / double(elems);
  // Threads go along the power-of-two dims (the others are held whole by
  // every thread), so those hold the elements there are to share out.
  int64_t spread = 1;
  for (int64_t e : shape)
    if (e > 0 && (e & (e - 1)) == 0) spread *= e;
  const int64_t nThreads = int64_t{la.numWarps()} * la.warpSize();
  const bool covers = spread >= nThreads;  // one element per thread or more: no copies needed
  s.spreadWidth = s.allowedWidth;
  if (covers)
    while (s.spreadWidth > 1 && s.spreadWidth * nThreads > spread) s.spreadWidth /= 2;
  // A smaller tile (or a hardware async copy) moving `width` elements per
  // instruction needs threads * width elements to hold each only once.
  s.excessReplication = covers && !a.idleCopies
                            ? s.replication
                            : s.replication / std::max(1.0, threads * double(a.width) / double(elems));
  return s;
}

}  // namespace

LayoutStats layoutStats(const AxisAnalysis& axis, const LayoutAnalysis& la, const LoweringRecord& rec) {
  LayoutStats st;
  LayoutSummary& t = st.summary;
  for (const auto& a : rec.accesses) {
    AccessStats s = judge(axis, la, a);
    ++t.accesses;
    t.contiguous += s.contiguous;
    t.coalesced += s.coalesced;
    t.vectorisable += s.spreadWidth > 1;
    t.vectorised += s.spreadWidth > 1 && s.width > 1;
    t.maxExcessReplication = std::max(t.maxExcessReplication, s.excessReplication);
    st.accesses.push_back(std::move(s));
  }
  st.conversions = rec.conversions;
  t.sharedConversions = static_cast<int64_t>(rec.conversions.size());
  t.sharedConversionBytes = rec.sharedConversionBytes;
  t.reemitted = rec.reemitted;
  t.dotOperandStagings = rec.dotOperandStagings;
  return st;
}

std::string LayoutSummary::line() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "summary: accesses=%" PRId64 " contiguous=%" PRId64 " coalesced=%" PRId64 " vectorisable=%" PRId64
                " vectorised=%" PRId64 " max-excess-replication=%g shared-conversions=%" PRId64
                " shared-conversion-bytes=%" PRId64 " reemitted=%" PRId64 " dot-operand-stagings=%" PRId64,
                accesses, contiguous, coalesced, vectorisable, vectorised, maxExcessReplication, sharedConversions,
                sharedConversionBytes, reemitted, dotOperandStagings);
  return buf;
}

std::optional<LayoutSummary> LayoutSummary::parse(const std::string& dump) {
  size_t at = dump.rfind("summary: ");
  if (at == std::string::npos) return std::nullopt;
  LayoutSummary s;
  int n = std::sscanf(dump.c_str() + at,
                      "summary: accesses=%" SCNd64 " contiguous=%" SCNd64 " coalesced=%" SCNd64 " vectorisable=%" SCNd64
                      " vectorised=%" SCNd64
                      " max-excess-replication=%lf"
                      " shared-conversions=%" SCNd64 " shared-conversion-bytes=%" SCNd64 " reemitted=%" SCNd64
                      " dot-operand-stagings=%" SCNd64,
                      &s.accesses, &s.contiguous, &s.coalesced, &s.vectorisable, &s.vectorised, &s.maxExcessReplication,
                      &s.sharedConversions, &s.sharedConversionBytes, &s.reemitted, &s.dotOperandStagings);
  if (n != 10) return std::nullopt;
  return s;
}

std::string LayoutStats::str() const {
  std::ostringstream os;
  for (const AccessStats& a : accesses) {
    const Value* p = a.op->operand(a.op->code() == OpCode::Copy ? 1 : 0);
    os << a.op->name() << " " << p->type().str() << " @ " << a.op->loc().str() << ": width " << a.width << " of "
       << a.allowedWidth;
    if (a.spreadWidth < a.allowedWidth) os << " (" << a.spreadWidth << " without copies)";
    os << ", " << (a.contiguous ? (a.coalesced ? "coalesced" : "NOT coalesced") : "not contiguous") << ", replication "
       << a.replication << " (excess " << a.excessReplication << "), " << a.layout << "\n";
  }
  for (const auto& c : conversions)
    os << "conversion at " << (c.op ? std::string(c.op->name()) + " @ " + c.op->loc().str() : "?") << ": " << c.what
       << "\n";
  os << summary.line() << "\n";
  return os.str();
}

}  // namespace tessera::ir
