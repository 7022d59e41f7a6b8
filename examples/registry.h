// The bundled kernels: every example registers its kernel, an input
// generator, a plain C++ reference and a check, so that the `tessera` tool
// (`list`, `compile`, `run`, `bench`, `sol`) and the test suite can drive
// all of them.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/perf/Peers.h"
#include "tessera/dsl/Tiles.h"
#include "tessera/perf/Tune.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

namespace tessera::examples {

/// Outcome of running an example against its reference.
struct CheckResult {
  bool ok = false;
  double maxAbsError = 0;  // largest |got - want|
  double maxRelError = 0;  // largest |got - want| / max(|want|, 1e-30) over elements with |want| > tiny
  double tolerance = 0;    // the bound's base factor (documented per example; `bound` gives its form)
  std::string detail;      // first mismatching index etc.
  /// The per-element bound the check applied, as a formula with its
  /// constants ("|got - want| <= 2e-06 + 1e-05 |want|"); several checks
  /// merged are joined with "; ".
  std::string bound;
  /// How close the worst element came to its own bound: max |got - want| /
  /// bound over the elements (<= 1 passes), and that element ("c at (3, 5):
  /// got .., want .., bound ..").
  double worstFraction = 0;
  std::string worst;
  /// The compile's warnings (a schedule it could not keep, a decomposed
  /// dot_scaled, ...), for `tessera run` to show.
  std::vector<std::string> warnings;

  /// What was checked and how it came out, for a report: "checked per
  /// element, c: |got - want| <= ...; the worst element, c at (3, 5): got ..,
  /// want .., bound .., used 42% of its bound". Empty parts are left out.
  std::string summary() const {
    std::string r;
    if (!bound.empty()) r += "checked per element, " + bound;
    if (!worst.empty()) {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.3g%%", worstFraction * 100);
      r += (r.empty() ? "" : "\n") + std::string("the worst element, ") + worst + ", used " + pct + " of its bound";
    }
    return r;
  }
};

struct RunContext {
  Device device = Device::cpu();
  CompileOptions options;
  /// Problem size; empty = the example's default. Meaning is per example
  /// (e.g. {n} for vector_add, {rows, cols} for softmax).
  std::vector<int64_t> shape;
  uint64_t seed = 1;
  LaunchOptions launch;
  /// A point of the example's tune space (`tessera tune`): the meta-
  /// parameters to trace the kernel with instead of its defaults. Unset:
  /// the defaults, as always.
  std::optional<perf::TuneConfig> config;
};

/// One launch of an example, prepared but not run: the kernel (traced, not
/// compiled), its grid and arguments (inputs generated and uploaded to the
/// context's device, outputs allocated there), the problem shape it stands
/// for, and the check of the result against the plain C++ reference, to
/// call once the launch has run. `Example::run` compiles and launches it
/// once; `tessera bench` times it; `tessera sol` counts its work.
struct Launch {
  Launch() = default;
  Launch(Kernel k, Dim3 g, std::vector<rt::Arg> a, std::vector<int64_t> s)
      : kernel(std::move(k)), grid(g), args(std::move(a)), shape(std::move(s)) {}
  Kernel kernel;
  Dim3 grid;
  std::vector<rt::Arg> args;
  std::vector<int64_t> shape;  // the shape used (the default when the context gave none)
  std::function<CheckResult()> check;
  /// The product this launch computes, as a plain GEMM of the same device
  /// buffers (C = A·B, row-major; `c` is the kernel's output, whose type and
  /// size the peer's own output takes), for the vendor-BLAS peer of `tessera
  /// bench --peers`. Set by the f16, bf16 and f32 GEMMs; the kernel's
  /// epilogue (bias, activation) is not part of it.
  std::optional<perf::GemmProblem> gemm;
  /// The launch's K-split schedule with its sizes as literals (Tiles::splitK,
  /// Tiles::streamK), for the performance model's fix-up estimate
  /// (perf::ModelOptions::schedule; `tessera sol --model`). Set by gemm_split_k.
  std::optional<Tiles> schedule;
  /// The kernel's tiles come from a persistent schedule (Tiles::persistent):
  /// grid axis 0 counts the tiles, and launchGrid launches at most the
  /// programs the device runs at once, each looping over its share. Any
  /// grid computes every tile once; this one only decides how many programs.
  bool persistent = false;
};

/// The grid `l` runs with on the compiled kernel `k`: l.grid, with axis 0
/// capped at k.residentPrograms (for these arguments and options) when the
/// schedule is persistent.
inline Dim3 launchGrid(const Launch& l, const CompiledKernel& k, const LaunchOptions& opts = {}) {
  Dim3 g = l.grid;
  if (l.persistent && g.x > 0) g.x = std::min<uint32_t>(g.x, k.residentPrograms(l.args, opts));
  return g;
}

/// "4096x4096": a shape as the tools print it.
inline std::string shapeStr(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

struct Example {
  std::string name;
  std::string summary;
  /// The kernel with its default meta-parameters for the CPU (for
  /// `tessera compile`), and, where they differ, for GPU targets (tiles sized
  /// for a block's registers and shared memory rather than for L1/L2).
  std::function<Kernel()> kernel;
  /// `target` is the GPU (or emu:) target, for defaults that differ
  /// between vendors (gemmDefaultBlocks).
  std::function<Kernel(const Target& target)> gpuKernel;
  /// Generates inputs on ctx.device and describes the launch (Launch).
  std::function<Launch(const RunContext&)> prepare;
  /// prepare, then compile for ctx.device with ctx.options, launch with
  /// ctx.launch, and check the output against the plain C++ reference.
  /// (Inline: each example program links only its own source file.)
  CheckResult run(const RunContext& ctx) const {
    if (runWhole) return runWhole(ctx);
    Launch l = prepare(ctx);
    CompiledKernel k = compile(l.kernel, ctx.device, optionsFor(ctx));
    k.launchWith(launchGrid(l, k, ctx.launch), l.args, ctx.launch);
    CheckResult r = l.check();
    r.warnings = k.warnings();
    return r;
  }
  /// The warps a GPU kernel of this example is written for: the compile
  /// option where nobody names one (flash attention's backward keeps five
  /// tiles of f32 per step and needs 8 to stay clear of spills).
  int gpuWarps = 4;
  /// ctx.options, with gpuWarps on a GPU device where they leave numWarps
  /// at the default.
  CompileOptions optionsFor(const RunContext& ctx) const {
    CompileOptions o = ctx.options;
    if (ctx.device.kind() != rt::DeviceKind::CPU && o.numWarps == CompileOptions{}.numWarps) o.numWarps = gpuWarps;
    return o;
  }
  /// An example of several launches (the collectives examples: GEMMs and
  /// communication overlapped across ranks) runs and checks itself here
  /// and has no `prepare`: `tessera bench` and `sol` time one launch, so
  /// they name such an example as not benchmarkable.
  std::function<CheckResult(const RunContext&)> runWhole;
  /// Shapes the test suite runs (aligned and ragged).
  std::vector<std::vector<int64_t>> testShapes;
  /// The config space `tessera tune` searches (docs/tune.md) for a target
  /// and a problem shape (the one prepare used); unset: not tunable.
  /// `prepare` reads the chosen point from RunContext::config; a parameter
  /// named num_warps is the compile option CompileOptions::numWarps.
  std::function<perf::TuneSpace(const Target& target, const std::vector<int64_t>& shape)> tuneSpace;
  /// The element type tuning results are keyed by ("f32", "f16").
  std::string dtype;
};

// The kernels, as functions of their meta-parameter BLOCK (the tile width),
// defined in examples/<name>.cpp. Arguments, in order:
Kernel vectorAdd(int BLOCK);  // out, a, b, n                     grid: ceil(n / BLOCK)
Kernel biasGelu(int BLOCK);   // out, x, bias, cols               grid: (rows, ceil(cols / BLOCK))
Kernel softmax(int BLOCK);    // out, in, cols                    grid: rows; BLOCK >= cols
Kernel layernorm(int BLOCK);  // y, mean, rstd, x, weight, bias, cols, eps   grid: rows; BLOCK >= cols
Kernel rmsnorm(int BLOCK, const char* name = "rmsnorm");  // y, x, weight, cols, eps   grid: rows; BLOCK >= cols
/// y, x, weight, cols, eps   grid: rows * C, a thread-block cluster of C
/// programs to a row (Kernel::withCluster); BLOCK * C >= cols
Kernel rmsnormCluster(int BLOCK, int C);
/// How rmsnorm_cluster shares a row of `cols` columns on target `t`.
struct ClusterSplit {
  int programs = 1;  // per cluster, and per row
  int block = 1;     // columns a program
};
ClusterSplit rmsnormClusterSplit(const Target& t, int64_t cols);
/// The most programs a thread-block cluster of target `t` holds (Targets.def
/// maxClusterBlocks); 1 where it has no clusters.
inline int clusterBlocksOf(const Target& t) {
  if (t.kind != Target::Kind::NVPTX && t.kind != Target::Kind::EmuNVPTX) return 1;
  const GpuArch* row = findGpuArch(GpuArch::Vendor::NVIDIA, t.arch);
  return row && row->maxClusterBlocks > 0 ? row->maxClusterBlocks : 1;
}
/// A launch of an RMSNorm kernel (arguments y, x, weight, cols, eps) on
/// random rows, checked against ref::rmsnorm: the kernel and grid
/// `kernelFor` gives for the shape (examples/rmsnorm.cpp).
Launch rmsnormLaunch(const RunContext& ctx, const char* name,
                     const std::function<std::pair<Kernel, Dim3>(int64_t rows, int64_t cols)>& kernelFor);
namespace ref {
/// rmsnorm's plain C++ reference, in double (examples/rmsnorm.cpp).
std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t cols,
                            double eps);
}  // namespace ref
/// out, x, positions, cos_cache, sin_cache, rows (tokens * heads), heads   grid: ceil(rows / BLOCK)
Kernel rope(int BLOCK, int D);
/// out, q, k_cache, v_cache, page_table, lengths, part_m, part_l, part_acc,
/// counters, max_pages, pages_per_split   grid: (4 splits, heads, batch)
/// stages >= 1: the pages' keys and values are staged through shared memory
/// by a for_pipelined of that depth (the GPU kernels); 0: plain loads (CPU).
/// cluster: the 4 splits of a (b, h) are a thread-block cluster and combine
/// in its shared memory (targets with clusters); else through part_* and
/// the counters, by the last split to arrive.
Kernel pagedDecodeAttention(int D, int stages, bool cluster);
/// loss, grad, logits, targets, V, scale   grid: rows; any V (BLOCK-wide chunks)
Kernel crossEntropy(int BLOCK);
Kernel tutorialSoftmax(int BLOCK);  // out, in, cols                 grid: rows; any cols (tutorial step 2)
/// y, h, x, residual, weight, bias, cols, eps, p, seed   grid: rows; BLOCK >= cols
Kernel dropoutResidualLayernorm(int BLOCK);

// GEMM kernels (examples/gemm_*.cpp): BLOCK_M x BLOCK_N tiles of C handed
// out by a tile schedule (gemmTiles, GemmBlocks::group and ::persistent),
// each looping over K in steps of BLOCK_K with the f32 accumulator tile
// carried by the loop; masked loads and stores, so M, N, K need not be
// multiples of the blocks. Grid: gemmGrid (the tile count on axis 0; a
// persistent launch caps it, launchGrid); gemm_batched keeps
// (ceil(M / BLOCK_M), ceil(N / BLOCK_N), batch). All matrices are row-major
// and contiguous.
struct GemmBlocks {
  int m = 64, n = 64, k = 64;  // BLOCK_M, BLOCK_N, BLOCK_K
  /// K-loop pipeline depth of gemm_f16 / gemm_bf16: 0 = plain loads in a
  /// for_range (the CPU kernel); S >= 1 = for_pipelined with S shared-memory
  /// stages of the A and B tiles (stage_copy). gemm_f32 and gemm_batched
  /// always use plain loads and ignore it.
  int stages = 0;
  /// sm_90a: the staged copies by producer warps (TMA) while the
  /// kernel's warps compute (ts::Pipeline::warpSpecialized); elsewhere the
  /// usual schedule.
  bool warpSpecialized = false;
  /// The output tiles' schedule (gemmTiles, ts::for_tiles): bands of
  /// `group` tile rows, column-major within a band, so that consecutive
  /// tiles share rows of A and columns of B in the L2 (1: row after row);
  /// `persistent`: each program loops over tiles p, p + P, ... of a grid
  /// of the programs the device holds at once (Launch::persistent).
  int group = 8;
  bool persistent = false;
  /// `dynamic`: one program per tile, each taking the tiles of the programs
  /// it cancels before they start (Tiles::dynamic: cluster launch control
  /// on sm_100a, sm_103a and sm_120a; elsewhere one tile a program).
  bool dynamic = false;
};
/// Whether a GEMM over B runs its tiles persistently: B.persistent, except
/// for a warp-specialised K loop, which needs one tile a program (gemmTiles).
inline bool gemmPersistent(const GemmBlocks& B) { return B.persistent && !B.warpSpecialized; }
/// Whether a GEMM over B takes tiles from the programs it cancels: B.dynamic,
/// except with a persistent grid (which numbers tiles by the grid) or a
/// warp-specialised K loop (one tile a program).
inline bool gemmDynamic(const GemmBlocks& B) { return B.dynamic && !gemmPersistent(B) && !B.warpSpecialized; }
/// The grid of a GEMM over B's schedule: one program per output tile, on
/// axis 0 (a persistent launch caps it: launchGrid).
inline Dim3 gemmGrid(const GemmBlocks& B, int64_t M, int64_t N) {
  return Dim3(static_cast<uint32_t>(Tiles::count(M, N, B.m, B.n)));
}
enum class Activation { None, ReLU, GELU };
/// C = act(A @ B + bias), f32.       c, a, b, bias, M, N, K   (without bias: c, a, b, M, N, K)
Kernel gemmF32(GemmBlocks blocks, Activation act, bool withBias = true, const char* name = "gemm_f32");
/// C (f16) = act(A (f16) @ B (f16) + bias (f32)), f32 accumulation. c, a, b, bias, M, N, K
Kernel gemmF16(GemmBlocks blocks, Activation act = Activation::GELU);
/// C = A @ B, f32, each tile's K in `splits` ranges joined in the launch
/// (Tiles::splitK).   c, a, b, workspace, flags, M, N, K   grid: tiles x splits
Kernel gemmSplitK(GemmBlocks blocks, int splits);
/// out, x, w, w_up, offsets, experts, N, K   grid: moeGrid (a ragged tile schedule over the experts' rows)
Kernel moeGroupedGemm(GemmBlocks blocks, bool swiglu);
/// The grid of moeGroupedGemm: Tiles::raggedBound programs on axis 0.
Dim3 moeGrid(GemmBlocks blocks, int64_t tokens, int64_t experts, int64_t N);
/// C (f32) = act(A (bf16) @ B (bf16) + bias (f32)), f32 accumulation. c, a, b, bias, M, N, K
Kernel gemmBF16(GemmBlocks blocks, Activation act = Activation::GELU);
/// C (bf16) = (A (e4m3) @ B (e4m3)) * scales[0] * scales[1], f32 accumulation. c, a, b, scales, M, N, K
Kernel gemmFP8(GemmBlocks blocks);
/// C (bf16) = diag(scale_a) (A (i8) @ B (i8)) diag(scale_b), exact i32 sums. c, a, b, scale_a, scale_b, M, N, K
Kernel gemmInt8(GemmBlocks blocks);
/// C[z] = A[z] @ B[z] for z = program_id(2), f32.                  c, a, b, M, N, K
Kernel gemmBatched(GemmBlocks blocks);
/// C (f32) = A (f16) @ B (f16), K loop pipelined with STAGES stages (tutorial step 3). c, a, b, M, N, K
Kernel tutorialGemm(int BM, int BN, int BK, int STAGES);
/// Flash-attention forward (examples/flash_attention.cpp): f16 Q, K, V, O
/// of shape [heads, n, D], BLOCK_M query rows per program, BLOCK_N keys per
/// loop step, f32 online softmax; the causal variant masks keys after the
/// query, and numbers its query blocks last first (longest first).
///                                                o, q, k, v, n   grid: (ceil(n / BLOCK_M), heads), exactly
struct AttentionBlocks {
  int m = 64, n = 64;  // BLOCK_M, BLOCK_N
  /// flash_attention_varlen: its tiles run persistently, on a grid of the
  /// programs the device holds (Launch::persistent, launchGrid).
  bool persistent = false;
  /// flash_attention_varlen: one program per tile, each taking the tiles
  /// of the programs it cancels before they start (Tiles::dynamic; not
  /// with `persistent`).
  bool dynamic = false;
};
Kernel flashAttention(AttentionBlocks blocks, int D, bool causal, DType dtype = DType::F16);
/// Causal flash attention over packed sequences of different lengths
/// (examples/flash_attention_varlen.cpp): f16 [heads, total, D], sequence b
/// the rows cu_seqlens[b] .. cu_seqlens[b+1] - 1.
///   o, q, k, v, cu_seqlens, batch, heads, total   grid: Tiles::raggedBound(total, batch, heads, BLOCK_M, 1)
Kernel flashAttentionVarlen(AttentionBlocks blocks, int D);
/// The launch of flash_attention(_causal) on ctx's shape with other blocks
/// (the static GPU benchmark's configurations share the example's check).
Launch prepareAttention(const RunContext& ctx, bool causal, AttentionBlocks blocks, DType dtype = DType::F16);
/// dQ, dK, dV of flash attention from dO, O and the log-sum-exp
/// (examples/flash_attention_backward.cpp).
Kernel flashAttentionBackward(AttentionBlocks blocks, int D, bool causal);

/// Whether `t` (or the architecture an emu: target runs) has a matrix
/// instruction placed per warpgroup: wgmma or tcgen05 (Targets.def's
/// columns: sm_90a; sm_100a, sm_103a).
inline bool hasWarpgroupMma(const Target& t) {
  if (t.kind != Target::Kind::NVPTX && t.kind != Target::Kind::EmuNVPTX) return false;
  const GpuArch* row = findGpuArch(GpuArch::Vendor::NVIDIA, t.arch);
  return row && (row->wgmma || row->tcgen05);
}
/// Whether `t` (or the architecture an emu: target runs) cancels programs
/// that have not started (Targets.def's clc column: sm_100a, sm_103a,
/// sm_120a), which a dynamic() tile schedule uses.
inline bool cancelsPrograms(const Target& t) {
  if (t.kind != Target::Kind::NVPTX && t.kind != Target::Kind::EmuNVPTX) return false;
  const GpuArch* row = findGpuArch(GpuArch::Vendor::NVIDIA, t.arch);
  return row && row->clusterLaunchControl;
}

/// Default blocks. CPU: measured on AVX2 (Zen 3), docs/gemm.md. GPU and
/// emulator targets: 32 x 32 x 32 keeps the shared-memory tiles small (and
/// the emulated runs of the test shapes quick); the pipelined f16 / bf16 K
/// loops keep 3 stages on NVIDIA (12 KiB of shared memory; cp.async keeps
/// two copies in flight) and 2 on AMD, whose register-staged copies are
/// stored to LDS at the end of the iteration that issued them, so a third
/// slot would hide no more latency and only cost LDS, hence occupancy
/// (docs/gemm.md, "GPU GEMM examples").
/// With wgmma (sm_90a) or tcgen05 (sm_100a, sm_103a): 64 x 64 x 32, the
/// smallest block whose dots take them with the default 4 warps (one
/// warpgroup along M: M = 16 x 4 warps), A and B read by the instruction
/// straight from their slots (docs/gpu.md, "sm_90a", "sm_100a").
/// Every target numbers the tiles in bands of 8 tile rows, one tile a
/// program. A persistent grid (GemmBlocks::persistent, the tune space's
/// PERSISTENT) is not the default: its loop over tiles keeps the next
/// tile's indices live across the K loop, 8-24 more registers on NVIDIA
/// (sm_80 f16: 40 -> 56) and 5-12 more VGPRs on AMD at these blocks, with
/// spills on sm_100a (f16) and sm_120a (bf16), for a gain no GPU has
/// measured here (docs/gemm.md). The autotuner weighs it per shape.
inline GemmBlocks gemmDefaultBlocks(const Target& t) {
  if (t.kind == Target::Kind::CPU) return {256, 256, 64, 0};
  bool amd = t.kind == Target::Kind::AMDGPU || t.kind == Target::Kind::EmuAMDGPU;
  if (hasWarpgroupMma(t)) return {64, 64, 32, 3};
  return {32, 32, 32, amd ? 2 : 3};
}
/// The target `device` runs: cpu, the GPU's, or the emu: target of an
/// emulator.
inline Target deviceTarget(const Device& device) {
  if (device.kind() == rt::DeviceKind::CPU) return Target::parse("cpu");
  std::string arch = device.arch();
  return Target::parse(device.kind() == rt::DeviceKind::Emulator ? "emu:" + arch : arch);
}
inline GemmBlocks gemmDefaultBlocks(const Device& device) { return gemmDefaultBlocks(deviceTarget(device)); }

/// The attention examples' blocks: 64 x 64, and 32 x 32 on RDNA (wave32
/// WMMA, Targets.def's matrixCore): on gfx1100 at 64 x 64 with 4 waves the
/// compiler keeps 204 bytes of scratch per lane at D = 64 (all 256 VGPRs
/// live); 32 x 32 fits every D of the example, causal or not, in 129-219
/// VGPRs with none. On RDNA4 64 x 64 holds 206 VGPRs at D = 64 (7 waves
/// against gfx1100's 10 at 32 x 32).
inline AttentionBlocks attentionDefaultBlocks(const Target& t) {
  if (t.kind != Target::Kind::AMDGPU && t.kind != Target::Kind::EmuAMDGPU) return {};
  const GpuArch* row = findGpuArch(GpuArch::Vendor::AMD, t.arch);
  if (row && row->matrixCore == GpuArch::MatrixCore::Wmma) return {32, 32};
  return {};
}
inline AttentionBlocks attentionDefaultBlocks(const Device& device) {
  return attentionDefaultBlocks(deviceTarget(device));
}

/// The blocks of a GEMM launch: the defaults for ctx.device, with what
/// ctx.config sets (BLOCK_M, BLOCK_N, BLOCK_K, STAGES, WARP_SPECIALIZE,
/// GROUP_M, PERSISTENT, DYNAMIC) in their place.
inline GemmBlocks gemmBlocksFor(const RunContext& ctx) {
  GemmBlocks b = gemmDefaultBlocks(ctx.device);
  if (!ctx.config) return b;
  const perf::TuneConfig& c = *ctx.config;
  b.m = static_cast<int>(c.getOr("BLOCK_M", b.m));
  b.n = static_cast<int>(c.getOr("BLOCK_N", b.n));
  b.k = static_cast<int>(c.getOr("BLOCK_K", b.k));
  b.stages = static_cast<int>(c.getOr("STAGES", b.stages));
  b.warpSpecialized = c.getOr("WARP_SPECIALIZE", b.warpSpecialized ? 1 : 0) != 0;
  b.group = static_cast<int>(c.getOr("GROUP_M", b.group));
  b.persistent = c.getOr("PERSISTENT", b.persistent ? 1 : 0) != 0;
  b.dynamic = c.getOr("DYNAMIC", b.dynamic ? 1 : 0) != 0;
  return b;
}

/// The GEMMs' tune space (docs/tune.md). CPU: 4 x 3 x 2 = 24 block shapes
/// around the measured default (256 x 256 x 64). GPU and emulator targets:
/// blocks of 32 and 64, 2 or 4 warps and, for the pipelined K loops
/// (`staged`), 2 or 3 stages; sm_90a: blocks of 64 / 128 (M) by 64 to 256
/// (N) by 32 / 64 (K), 4 or 8 warps (wgmma's warpgroups), and for the
/// pipelined K loops warp specialisation on or off. One constraint, from the problem's shape: a
/// block wider than its dimension's bucket (the dimension rounded up to a
/// power of two) computes only masked lanes, so it is pruned. sm_100a and
/// sm_103a (tcgen05) take sm_90a's space.
inline perf::TuneSpace gemmTuneSpace(const Target& t, const std::vector<int64_t>& shape, bool staged) {
  perf::TuneSpace s;
  if (t.kind == Target::Kind::CPU) {
    s.param("BLOCK_M", {32, 64, 128, 256}).param("BLOCK_N", {64, 128, 256}).param("BLOCK_K", {32, 64});
  } else if (hasWarpgroupMma(t)) {
    // Warpgroup MMA: whole warpgroups (4 or 8 warps) and 16 rows per warp.
    s.param("BLOCK_M", {64, 128}).param("BLOCK_N", {64, 128, 256}).param("BLOCK_K", {32, 64});
    s.param("num_warps", {4, 8});
    // Producer warps issuing the staged copies (ts::Pipeline::
    // warpSpecialized; a shape it cannot take keeps the usual schedule).
    if (staged) s.param("STAGES", {2, 3}).param("WARP_SPECIALIZE", {0, 1});
  } else {
    s.param("BLOCK_M", {32, 64}).param("BLOCK_N", {32, 64}).param("BLOCK_K", {32});
    s.param("num_warps", {2, 4});
    if (staged) s.param("STAGES", {2, 3});
  }
  // GPUs: one tile a program, or a persistent grid of the programs the
  // device holds (GemmBlocks::persistent); a warp-specialised loop runs one
  // tile a program (gemmTiles), so its persistent twin would be the same.
  if (t.kind != Target::Kind::CPU) {
    s.param("PERSISTENT", {0, 1});
    if (staged && hasWarpgroupMma(t))
      s.constrain("PERSISTENT = 0 where WARP_SPECIALIZE = 1 (one tile a program)",
                  [](const perf::TuneConfig& c) { return !(c.get("PERSISTENT") && c.get("WARP_SPECIALIZE")); });
  }
  // Where programs can be cancelled: one program per tile, the programs
  // that started taking the tiles of those still queued (Tiles::dynamic).
  if (cancelsPrograms(t)) {
    s.param("DYNAMIC", {0, 1});
    s.constrain("DYNAMIC = 0 where PERSISTENT = 1 (the grid numbers the tiles)",
                [](const perf::TuneConfig& c) { return !(c.get("DYNAMIC") && c.get("PERSISTENT")); });
    if (staged && hasWarpgroupMma(t))
      s.constrain("DYNAMIC = 0 where WARP_SPECIALIZE = 1 (one tile a program)",
                  [](const perf::TuneConfig& c) { return !(c.get("DYNAMIC") && c.get("WARP_SPECIALIZE")); });
  }
  auto bucket = [](int64_t d) {
    int64_t b = 1;
    while (b < d) b <<= 1;
    return b;
  };
  // The space's smallest block always stays: below it there is nothing to
  // choose (a 32 x 32 x 32 problem on the CPU, whose blocks start at 64
  // columns, would otherwise have every config pruned).
  auto limit = [&](const char* name, int64_t dim) {
    int64_t smallest = INT64_MAX;
    for (const auto& p : s.params)
      if (p.name == name)
        for (int64_t v : p.values) smallest = std::min(smallest, v);
    return std::max(bucket(dim), smallest);
  };
  if (shape.size() >= 3) {
    const int64_t bm = limit("BLOCK_M", shape[0]), bn = limit("BLOCK_N", shape[1]), bk = limit("BLOCK_K", shape[2]);
    s.constrain("BLOCK_M <= M rounded up to a power of two, or the smallest BLOCK_M (" + std::to_string(bm) + ")",
                [bm](const perf::TuneConfig& c) { return c.get("BLOCK_M") <= bm; });
    s.constrain("BLOCK_N <= N rounded up to a power of two, or the smallest BLOCK_N (" + std::to_string(bn) + ")",
                [bn](const perf::TuneConfig& c) { return c.get("BLOCK_N") <= bn; });
    s.constrain("BLOCK_K <= K rounded up to a power of two, or the smallest BLOCK_K (" + std::to_string(bk) + ")",
                [bk](const perf::TuneConfig& c) { return c.get("BLOCK_K") <= bk; });
  }
  return s;
}

// One function per example, defined in examples/<name>.cpp.
Example vectorAddExample();
Example biasGeluExample();
Example softmaxExample();
Example layernormExample();
Example rmsnormExample();
Example rmsnormClusterExample();
Example gemmF32Example();
Example gemmF16Example();
Example gemmBF16Example();
Example gemmFP8Example();
Example gemmInt8Example();
Example gemmBatchedExample();
Example gemmSplitKExample();
Example tutorialSoftmaxExample();
Example tutorialGemmExample();
/// The parallel examples: collectives over a group of devices, overlapped
/// with the GEMMs (examples/parallel.h).
Example tpMlpExample();
Example spRmsnormExample();
Example dropoutResidualLayernormExample();
Example flashAttentionExample();
Example flashAttentionCausalExample();
Example flashAttentionBF16Example();
Example flashAttentionCausalBF16Example();
Example flashAttentionVarlenExample();
Example ropeExample();
Example crossEntropyExample();
Example pagedDecodeAttentionExample();
Example flashAttentionBackwardExample();
Example flashAttentionBackwardCausalExample();
Example moeGroupedGemmExample();
Example moeGroupedGemmSwigluExample();
/// The block-scaled GEMMs over ts::dot_scaled (examples/block_scaled.h).
Example gemmMXFP8Example();
Example gemmMXFP4Example();
Example gemmNVFP4Example();
/// The block-scaled quantisation kernels (examples/block_scaled.h).
Example mxQuantizeExample();
Example nvfp4QuantizeExample();
Example mxfp8QuantizeExample();
Example mxfp6QuantizeExample();
/// Activations quantised to MXFP8 inside the GEMM (examples/gemm_quant_mxfp8.cpp).
Example gemmQuantMXFP8Example();
/// The block-scaled dequantisation kernel (examples/block_scaled.h).
Example mxDequantizeExample();

/// The example's default kernel for a target.
inline Kernel kernelFor(const Example& e, const Target& t) {
  return t.kind != Target::Kind::CPU && e.gpuKernel ? e.gpuKernel(t) : e.kernel();
}

/// ctx with the config `c` (a point of the example's tune space): the
/// meta-parameters `prepare` reads, and num_warps as the compile option.
inline RunContext withConfig(RunContext ctx, const perf::TuneConfig& c) {
  ctx.config = c;
  if (c.has("num_warps")) ctx.options.numWarps = static_cast<int>(c.get("num_warps"));
  return ctx;
}

/// The tuning problem of example `e` on ctx.device at ctx.shape (its
/// default when empty): `e.prepare` with each config, checked against the
/// example's reference. A UsageError when `e` declares no tune space.
inline perf::TuneProblem tuneProblem(const Example& e, const RunContext& ctx) {
  if (!e.tuneSpace || !e.prepare)
    throw UsageError("example " + e.name + " declares no tune space (Example::tuneSpace)");
  const Device& d = ctx.device;
  Target target = d.kind() == rt::DeviceKind::CPU        ? Target::parse(d.arch().empty() ? "cpu" : "cpu:" + d.arch())
                  : d.kind() == rt::DeviceKind::Emulator ? Target::parse("emu:" + d.arch())
                                                         : Target::parse(d.arch());
  perf::TuneProblem p;
  p.kernel = e.name;
  p.dtype = e.dtype;
  p.device = d;
  p.shape = e.prepare(ctx).shape;  // the default shape, when ctx gave none
  p.space = e.tuneSpace(target, p.shape);
  // The default kernel for the target stands for the example's code.
  p.code = perf::codeFingerprint(kernelFor(e, target));
  RunContext base = ctx;
  base.shape = p.shape;
  p.prepare = [e, base](const perf::TuneConfig& c) {
    RunContext rc = withConfig(base, c);
    Launch l = e.prepare(rc);
    perf::TuneCandidate cand;
    cand.kernel = l.kernel;
    cand.options = rc.options;
    cand.grid = l.grid;
    cand.persistent = l.persistent;
    cand.args = l.args;
    cand.check = [check = l.check](std::string& why) {
      CheckResult r = check();
      if (!r.ok)
        why = "max abs error " + std::to_string(r.maxAbsError) + ", tolerance " + std::to_string(r.tolerance) +
              (r.detail.empty() ? "" : ": " + r.detail);
      return r.ok;
    };
    return cand;
  };
  return p;
}

/// All bundled examples, in a stable order.
const std::vector<Example>& all();
/// nullptr if there is none of that name.
const Example* find(const std::string& name);

}  // namespace tessera::examples
