// paged_decode_attention: one decode step of attention over a paged KV cache,
// as inference servers run it: each sequence of a batch has one new query
// token per head, and its keys and values live in fixed-size pages scattered
// over a shared pool, found through the sequence's row of a page table.
//
//   out[b, h] = softmax(q[b, h] . K[b, h, t] / sqrt(D), over t < len[b]) V[b, h]
//
// Caches are [pages, heads, PAGE, D] f16 (a page holds PAGE consecutive
// tokens of every head), the page table [batch, max_pages] i32, lengths
// [batch] i32, q and out [batch, heads, D] f16.
//
// A sequence's tokens are split over SPLITS programs (split-K, "flash
// decoding"): program (s, h, b) walks its share of the sequence's pages,
// reading each page number from the table (an address that depends on a
// loaded value; on the GPUs a 3-stage for_pipelined copies each page's keys
// and values into shared memory two pages ahead), and keeps the online-softmax state of its tokens: the
// running maximum m, the sum l of exp(score - m) and the weighted sum acc
// of the values. The splits are combined in the same launch: each program
// writes its (m, l, acc), releases them (a fence), and counts itself in on
// its (b, h) counter with an acq_rel atomic; the program that arrives last
// acquires every split's state, rescales each by exp(m_s - M), sums, divides,
// and resets the counter for the next launch. No second kernel, no host
// round trip.
//
// Where the target has thread-block clusters (sm_90a and later), the
// SPLITS programs of a (b, h) are one cluster and combine in its shared
// memory instead: each puts its (m, l, acc) in a shared buffer, and after a
// cluster barrier every split reads all SPLITS states in rank order
// (distributed shared memory) and split 0 writes the output; a second
// barrier keeps the states alive until all have read them. No workspace,
// no fence or atomic, and the combination's order is fixed.
//
// Shape: {batch, heads, max_len, D} with D one of 16, 32, 64, 128; default
// {8, 8, 1000, 128}. Lengths are drawn from [1, max_len], pages are
// assigned to sequences in a random order.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

namespace {
constexpr int kPage = 16;
constexpr int kSplits = 4;
}  // namespace

Kernel pagedDecodeAttention(int D, int stages, bool cluster) {
  const float scale = 1.0f / std::sqrt(float(D));
  Kernel k = ts::kernel(
      "paged_decode_attention",
      {"out", "q", "k_cache", "v_cache", "page_table", "lengths", "part_m", "part_l", "part_acc", "counters",
       "max_pages", "pages_per_split"},
      [=](ts::Ptr<ts::half> out, ts::Ptr<const ts::half> q, ts::Ptr<const ts::half> kCache,
          ts::Ptr<const ts::half> vCache, ts::Ptr<const int32_t> pageTable, ts::Ptr<const int32_t> lengths,
          ts::Ptr<float> partM, ts::Ptr<float> partL, ts::Ptr<float> partAcc, ts::Ptr<int32_t> counters,
          ts::Int maxPages, ts::Int pagesPerSplit) {
        auto s = ts::program_id(0), h = ts::program_id(1), b = ts::program_id(2);
        auto heads = ts::num_programs(1);
        auto len = ts::load(lengths + b);
        auto d = ts::arange(D);
        auto qv = ts::load(q + (b * heads + h) * D + d).to(ts::f32);  // [D]
        // This split's pages: [first, last) of the sequence's used pages.
        auto used = (len + (kPage - 1)) / kPage;
        auto first = ts::minimum(s * pagesPerSplit, used);
        auto last = ts::minimum(first + pagesPerSplit, used);
        auto t = ts::expand_dims(ts::arange(kPage), 1);  // PAGE x 1: token within the page
        auto dd = ts::expand_dims(d, 0);                 // 1 x D
        auto init = std::tuple{ts::full({1}, -ts::inf, ts::f32), ts::zeros({1}, ts::f32), ts::zeros({D}, ts::f32)};
        // One page of keys and values: loaded (CPU), or staged through
        // shared memory by a `stages`-deep pipeline (GPUs) that reads the
        // page table entry and starts the page's copies stages - 1 pages
        // ahead (docs/pipelining.md: a staged copy's address may depend on
        // a global load).
        auto sk = ts::alloc_shared(ts::f16, {kPage, D});
        auto sv = ts::alloc_shared(ts::f16, {kPage, D});
        auto page = [&](ts::Int p, ts::Tensor m, ts::Tensor l, ts::Tensor acc, auto&& fetch) {
          auto valid = p * kPage + t < len;  // PAGE x 1: tokens past the end are masked
          auto at = ((ts::load(pageTable + b * maxPages + p) * heads + h) * kPage + t) * D + dd;  // PAGE x D
          auto kt = fetch(sk, kCache + at, valid).to(ts::f32);
          auto score = ts::sum(kt * ts::expand_dims(qv, 0), 1) * scale;  // [PAGE]
          score = ts::where(p * kPage + ts::arange(kPage) < len, score, -ts::inf);
          auto mnew = ts::maximum(m, ts::max(score, 0));  // [1]
          auto w = ts::exp(score - mnew);                 // [PAGE]
          auto alpha = ts::exp(m - mnew);                 // rescales what was summed under the old maximum
          auto vt = fetch(sv, vCache + at, valid).to(ts::f32);
          auto accNew = acc * alpha + ts::sum(vt * ts::expand_dims(w, 1), 0);
          return std::tuple{mnew, l * alpha + ts::sum(w, 0), accNew};
        };
        auto staged = [](const ts::TileBuffer& buf, const ts::Tensor& ptrs, const ts::Tensor& mask) {
          return ts::stage_copy(buf, ptrs, mask).load();
        };
        auto loaded = [](const ts::TileBuffer&, const ts::Tensor& ptrs, const ts::Tensor& mask) {
          return ts::load(ptrs, mask);
        };
        auto [m, l, acc] =
            stages >= 1
                ? ts::for_pipelined(
                      first, last, 1, stages, init,
                      [&](ts::Int p, ts::Tensor m, ts::Tensor l, ts::Tensor acc) { return page(p, m, l, acc, staged); })
                : ts::for_range(first, last, 1, init, [&](ts::Int p, ts::Tensor m, ts::Tensor l, ts::Tensor acc) {
                    return page(p, m, l, acc, loaded);
                  });
        auto bh = b * heads + h;
        if (cluster) {
          auto sm = ts::alloc_shared(ts::f32, {1}), sl = ts::alloc_shared(ts::f32, {1});
          auto sacc = ts::alloc_shared(ts::f32, {D});
          sm.store(m);
          sl.store(l);
          sacc.store(acc);
          ts::cluster_barrier();
          // Rank r of the cluster is split r (the cluster spans grid axis 0).
          std::vector<ts::Tensor> ms;
          ts::Tensor mx;
          for (int r = 0; r < kSplits; ++r) {
            ms.push_back(sm.remote(r).load());  // [1]; an empty split has m = -inf, l = 0
            mx = r == 0 ? ms[0] : ts::maximum(mx, ms.back());
          }
          ts::Tensor ls, o;
          for (int r = 0; r < kSplits; ++r) {
            auto w = ts::exp(ms[size_t(r)] - mx);  // [1]; mx finite: split 0 holds token 0
            auto lr = sl.remote(r).load() * w;
            auto ar = sacc.remote(r).load() * w;  // [D], w broadcast
            ls = r == 0 ? lr : ls + lr;
            o = r == 0 ? ar : o + ar;
          }
          ts::store(out + bh * D + d, (o / ls).to(ts::f16), s == 0);
          ts::cluster_barrier();
          return;
        }
        // Publish this split's state, then count in.
        auto one = ts::arange(1);
        ts::store(partM + bh * kSplits + s + one, m);
        ts::store(partL + bh * kSplits + s + one, l);
        ts::store(partAcc + (bh * kSplits + s) * D + d, acc);
        ts::fence(ts::MemOrder::Release);
        auto arrived = ts::atomic_add(counters + bh, 1, {}, ts::MemOrder::AcqRel);
        ts::if_else(arrived == kSplits - 1, [&] {
          // The last split of (b, h): every split's state is visible now.
          auto sp = ts::arange(kSplits);
          auto ms = ts::load(partM + bh * kSplits + sp);  // [SPLITS]; an empty split has m = -inf, l = 0
          auto mx = ts::max(ms, 0);                       // finite: split 0 holds token 0
          auto ws = ts::exp(ms - mx);
          auto ls = ts::sum(ts::load(partL + bh * kSplits + sp) * ws, 0);
          auto accs = ts::load(partAcc + (bh * kSplits + ts::expand_dims(sp, 1)) * D + dd);  // SPLITS x D
          auto o = ts::sum(accs * ts::expand_dims(ws, 1), 0) / ls;
          ts::store(out + bh * D + d, o.to(ts::f16));
          ts::store(counters + bh, 0);  // ready for the next launch
        });
      });
  return cluster ? k.withCluster({kSplits, 1, 1}) : k;
}

namespace {
/// Whether the splits of a (b, h) combine in a cluster on target `t`.
bool pagedDecodeInCluster(const Target& t) { return clusterBlocksOf(t) >= kSplits; }
}  // namespace

namespace ref {
/// Plain C++ in double, from the sequences' tokens in order (the pages
/// gathered through the table on the host), so a wrong page, token or
/// split combination cannot pass.
std::vector<double> pagedAttention(const std::vector<uint16_t>& q, const std::vector<uint16_t>& kCache,
                                   const std::vector<uint16_t>& vCache, const std::vector<int32_t>& table,
                                   const std::vector<int32_t>& lengths, int64_t heads, int64_t D, int64_t maxPages) {
  const int64_t batch = int64_t(lengths.size());
  std::vector<double> out(size_t(batch * heads * D));
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t len = lengths[size_t(b)];
      auto at = [&](int64_t tok, int64_t d) {
        const int64_t page = table[size_t(b * maxPages + tok / kPage)];
        return size_t(((page * heads + h) * kPage + tok % kPage) * D + d);
      };
      std::vector<double> s(static_cast<size_t>(len));
      double m = -INFINITY;
      for (int64_t tok = 0; tok < len; ++tok) {
        double dotv = 0;
        for (int64_t d = 0; d < D; ++d)
          dotv += double(fromHalf(q[size_t((b * heads + h) * D + d)])) * fromHalf(kCache[at(tok, d)]);
        s[size_t(tok)] = dotv * scale;
        m = std::max(m, s[size_t(tok)]);
      }
      double l = 0;
      for (double x : s) l += std::exp(x - m);
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t tok = 0; tok < len; ++tok) o += std::exp(s[size_t(tok)] - m) * fromHalf(vCache[at(tok, d)]);
        out[size_t((b * heads + h) * D + d)] = o / l;
      }
    }
  return out;
}
}  // namespace ref

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{8, 8, 1000, 128} : ctx.shape;
  if (s.size() != 4 || s[0] < 1 || s[0] > 65535 || s[1] < 1 || s[1] > 65535 || s[2] < 1 || s[2] > (1 << 20) ||
      (s[3] != 16 && s[3] != 32 && s[3] != 64 && s[3] != 128) || s[0] * s[1] * s[2] * s[3] > (int64_t{1} << 26))
    throw Error(
        "paged_decode_attention: the shape is {batch, heads, max_len, D} with batch, heads in [1, 65535], max_len "
        "in [1, 2^20], D one of 16, 32, 64, 128, and batch * heads * max_len * D at most 2^26");
  const int64_t batch = s[0], heads = s[1], maxLen = s[2], D = s[3];
  const int64_t maxPages = (maxLen + kPage - 1) / kPage, pages = batch * maxPages;
  const int64_t perSplit = (maxPages + kSplits - 1) / kSplits;
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto halves = [&](size_t count) {
    std::vector<uint16_t> h(count);
    for (auto& x : h) x = toHalf(dist(rng));
    return h;
  };
  std::vector<uint16_t> q = halves(size_t(batch * heads * D));
  std::vector<uint16_t> kCache = halves(size_t(pages * heads * kPage * D)), vCache = halves(kCache.size());
  // Lengths: the first sequence full (every split busy), one of a single
  // token where there are several, the rest random.
  std::vector<int32_t> lengths(static_cast<size_t>(batch));
  for (auto& x : lengths) x = int32_t(std::uniform_int_distribution<int64_t>(1, maxLen)(rng));
  lengths[0] = int32_t(maxLen);
  if (batch > 1) lengths[1] = 1;
  // The pool's pages in a random order; unused table entries point nowhere
  // valid (-1), so reading one would fault (the emulator reports it).
  std::vector<int32_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(size_t(batch * maxPages), -1);
  size_t next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < (lengths[size_t(b)] + kPage - 1) / kPage; ++p)
      table[size_t(b * maxPages + p)] = order[next++];
  const Device& dev = ctx.device;
  Buffer dout = dev.alloc(DType::F16, q.size());
  dout.fillBytes(0xff);  // NaN: an output never written cannot pass
  Buffer counters = dev.upload(DType::I32, std::vector<int32_t>(size_t(batch * heads), 0));
  const size_t parts = size_t(batch * heads * kSplits);
  Launch launch{pagedDecodeAttention(int(D), ctx.device.kind() == rt::DeviceKind::CPU ? 0 : 3,
                                     pagedDecodeInCluster(deviceTarget(ctx.device))),
                Dim3(uint32_t(kSplits), uint32_t(heads), uint32_t(batch)),
                {dout, dev.upload(DType::F16, q), dev.upload(DType::F16, kCache), dev.upload(DType::F16, vCache),
                 dev.upload(DType::I32, table), dev.upload(DType::I32, lengths), dev.alloc(DType::F32, parts),
                 dev.alloc(DType::F32, parts), dev.alloc(DType::F32, parts * size_t(D)), counters, int32_t(maxPages),
                 int32_t(perSplit)},
                {batch, heads, maxLen, D}};
  // Outputs are convex combinations of values in [-1, 1], computed in f32
  // (errors ~1e-6) and rounded to f16 (2^-11 relative): 2^-10 covers them,
  // while a token missed, read from a wrong page or counted twice, or a
  // split weighted wrongly, moves an output by far more at these lengths.
  launch.check = [dout, counters, q = std::move(q), kCache = std::move(kCache), vCache = std::move(vCache),
                  table = std::move(table), lengths = std::move(lengths), heads, D, maxPages] {
    std::vector<float> got;
    for (uint16_t h : dout.read<uint16_t>()) got.push_back(fromHalf(h));
    const double bound = std::ldexp(1.0, -10);
    CheckResult r = compareWith(got, ref::pagedAttention(q, kCache, vCache, table, lengths, heads, D, maxPages), bound,
                                "out", "|got - want| <= 2^-10", [=](size_t) { return bound; });
    for (int32_t c : counters.read<int32_t>())
      if (r.ok && c != 0) {
        r.ok = false;
        r.detail = "a split counter was left at " + std::to_string(c) + " (the last split resets it)";
      }
    return r;
  };
  return launch;
}

}  // namespace

Example pagedDecodeAttentionExample() {
  Example e;
  e.name = "paged_decode_attention";
  e.summary =
      "decode attention over a paged f16 KV cache (page table, one query token), split-K combined in the same launch "
      "by the last split (fence + acq_rel counter), or in a thread-block cluster's shared memory where there are "
      "clusters";
  e.kernel = [] { return pagedDecodeAttention(128, 0, false); };
  e.gpuKernel = [](const Target& t) { return pagedDecodeAttention(128, 3, pagedDecodeInCluster(t)); };
  e.prepare = prepare;
  // One token; ragged lengths over several pages and sequences; an aligned
  // max_len with D = 64; a long sequence whose splits all hold pages.
  e.testShapes = {{1, 1, 1, 128}, {3, 2, 77, 32}, {2, 3, 64, 64}, {2, 1, 300, 16}};
  return e;
}

}  // namespace tessera::examples

// Usage: paged_decode_attention [--dump] [batch heads max_len D]
TESSERA_EXAMPLE_PROGRAM(pagedDecodeAttentionExample)
