"""Triton's code for the kernels of tessera_gpu_bench, measured the same way.

Each kernel is written as a Triton user would, with Tessera's tile sizes,
warps and pipeline stages (1 where Tessera's loop is not pipelined, 3 for
the f16/bf16 GEMMs), compiled compile-only for explicit targets with every
pointer and integer argument marked divisible by 16 (the launch Tessera's
figures assume), then handed to `tessera_gpu_bench --measure`, which runs
the same ptxas -v, disassembler, main-loop heuristic and occupancy rules on
Triton's PTX / code object as on Tessera's. Compile time: median of --reps
cold compiles, each with a fresh cache directory, after a warm-up compile
(it includes ptxas for NVIDIA, and the code-object link for AMD).

  python static_peer.py --measure-tool build/bin/tessera_gpu_bench --json triton.json
  python static_peer.py --compare tessera.json triton.json

A benchmark-only peer: nothing of Tessera's build or tests uses Python.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, stated (it warns otherwise)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

# ----------------------------------------------------------------- kernels
# The bundled examples (examples/*.cpp), then bench/gpu_static_kernels.cpp.


@triton.jit
def vector_add(out, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask) + tl.load(b + offs, mask), mask)


@triton.jit
def bias_gelu(out, x, bias, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x + row * cols + c, mask) + tl.load(bias + c, mask)
    tl.store(out + row * cols + c, 0.5 * v * (1.0 + tl.math.erf(v * 0.70710678118654752440)), mask)


@triton.jit
def softmax(out, inp, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(inp + row * cols + c, mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out + row * cols + c, e * (1.0 / tl.sum(e, 0)), mask)


@triton.jit
def layernorm(y, mean, rstd, x, weight, bias, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    n = cols.to(tl.float32)
    v = tl.load(x + row * cols + c, mask, other=0.0)
    mu = tl.sum(v, 0) / n
    xc = tl.where(mask, v - mu, 0.0)
    r = tl.math.rsqrt(tl.sum(xc * xc, 0) / n + eps)
    w = tl.load(weight + c, mask)
    b = tl.load(bias + c, mask)
    tl.store(y + row * cols + c, xc * r * w + b, mask)
    tl.store(mean + row, mu)
    tl.store(rstd + row, r)


@triton.jit
def rmsnorm(y, x, weight, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x + row * cols + c, mask, other=0.0)
    ms = tl.sum(v * v, 0) / cols.to(tl.float32)
    w = tl.load(weight + c, mask)
    tl.store(y + row * cols + c, v * tl.math.rsqrt(ms + eps) * w, mask)


@triton.jit
def gemm_main_loop(a, b, row, col, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   STAGES: tl.constexpr, PRECISION: tl.constexpr, WS: tl.constexpr = False):
    # The K loop of every GEMM here (examples/support.h's gemmMainLoop):
    # masked A and B tiles, f32 accumulation, pipelined over STAGES.
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=STAGES, warp_specialize=WS):
        ka = (k0 + rk)[None, :]
        kb = (k0 + rk)[:, None]
        ta = tl.load(a + row * K + ka, (row < M) & (ka < K), other=0.0)
        tb = tl.load(b + kb * N + col, (kb < K) & (col < N), other=0.0)
        acc = tl.dot(ta, tb, acc, input_precision=PRECISION)
    return acc


@triton.jit
def gemm(c, a, b, bias, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
         GELU: tl.constexpr, STAGES: tl.constexpr, BATCHED: tl.constexpr, WS: tl.constexpr = False):
    # gemm_f32 / gemm_f16 / gemm_bf16 / gemm_batched / gemm_f16_plain: the
    # operand and output types come from the pointers; WS: the K loop
    # warp-specialised (tl.range's warp_specialize, Tessera's " ws" configs).
    if BATCHED:
        z = tl.program_id(2)
        a += z * M * K
        b += z * K * N
        c += z * M * N
    row = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]
    col = (tl.program_id(1) * BN + tl.arange(0, BN))[None, :]
    # Tessera's f32 dot is exact f32 (no TF32).
    y = gemm_main_loop(a, b, row, col, M, N, K, BM, BN, BK, STAGES, "ieee", WS)
    if HAS_BIAS:
        y = y + tl.load(bias + col, col < N)
    if GELU:
        y = 0.5 * y * (1.0 + tl.math.erf(y * 0.70710678118654752440))
    tl.store(c + row * N + col, y.to(c.dtype.element_ty), (row < M) & (col < N))


@triton.jit
def gemm_fp8(c, a, b, scales, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    # examples/gemm_fp8.cpp: e4m3 A and B, f32 accumulation, per-tensor
    # scales, bf16 out.
    row = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]
    col = (tl.program_id(1) * BN + tl.arange(0, BN))[None, :]
    acc = gemm_main_loop(a, b, row, col, M, N, K, BM, BN, BK, STAGES, None)
    s = tl.load(scales) * tl.load(scales + 1)
    tl.store(c + row * N + col, (acc * s).to(c.dtype.element_ty), (row < M) & (col < N))


@triton.jit
def gemm_mx(c, a, a_scale, b, b_scale, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            FMT: tl.constexpr, PK: tl.constexpr, SB: tl.constexpr):
    # examples/block_scaled.h's gemmScaled: A [M, K] and B [N, K] codes (fp4
    # packed two a byte along K), scales [rows, K/SB] (e8m0 of 32; NVFP4's
    # fp8e4nv of 16), masked loads, one dot_scaled per K step, f32 out (the
    # NVFP4 per-tensor scale, one multiply in the epilogue, left out).
    row = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]
    rowb = (tl.program_id(1) * BN + tl.arange(0, BN))[:, None]
    col = (tl.program_id(1) * BN + tl.arange(0, BN))[None, :]
    kbytes = K // PK + K % PK  # ceil(K / PK), as the zoo's kernel writes it
    kblocks = (K + SB - 1) // SB
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        kb = (k0 // PK + tl.arange(0, BK // PK))[None, :]
        ks = (k0 // SB + tl.arange(0, BK // SB))[None, :]
        ta = tl.load(a + row * kbytes + kb, (row < M) & (kb < kbytes))
        tb = tl.load(b + rowb * kbytes + kb, (rowb < N) & (kb < kbytes))
        if SB == 32:  # e8m0 codes (u8)
            sa = tl.load(a_scale + row * kblocks + ks, (row < M) & (ks < kblocks), other=0)
            sb = tl.load(b_scale + rowb * kblocks + ks, (rowb < N) & (ks < kblocks), other=0)
        else:  # fp8e4nv, which takes no integer `other`
            sa = tl.load(a_scale + row * kblocks + ks, (row < M) & (ks < kblocks))
            sb = tl.load(b_scale + rowb * kblocks + ks, (rowb < N) & (ks < kblocks))
        acc = tl.dot_scaled(ta, sa, FMT, tl.trans(tb), sb, FMT, acc)
    tl.store(c + row * N + col, acc, (row < M) & (col < N))


@triton.jit
def gemv(y, a, x, M, K, BM: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    r2 = rows[:, None]
    acc = tl.zeros((BM, ), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=1):
        cols = k0 + tl.arange(0, BK)
        c2 = cols[None, :]
        av = tl.load(a + r2 * K + c2, (r2 < M) & (c2 < K), other=0.0)
        xv = tl.load(x + cols, cols < K, other=0.0)
        acc += tl.sum(av * xv[None, :], 1)
    tl.store(y + rows, acc, rows < M)


@triton.jit
def scalar_store(out):
    p = tl.program_id(0)
    tl.store(out + p, p.to(tl.float32))


@triton.jit
def rope(out, x, cs, sn, rows, BR: tl.constexpr, HD: tl.constexpr):
    H2: tl.constexpr = HD // 2
    r = (tl.program_id(0) * BR + tl.arange(0, BR))[:, None]
    i = tl.arange(0, H2)[None, :]
    m = r < rows
    xo = r * HD + i
    to = r * H2 + i
    x1 = tl.load(x + xo, m)
    x2 = tl.load(x + xo + H2, m)
    c = tl.load(cs + to, m)
    s = tl.load(sn + to, m)
    tl.store(out + xo, x1 * c - x2 * s, m)
    tl.store(out + xo + H2, x2 * c + x1 * s, m)


@triton.jit
def transpose(out, inp, M, N, B: tl.constexpr):
    r = (tl.program_id(0) * B + tl.arange(0, B))[:, None]
    c = (tl.program_id(1) * B + tl.arange(0, B))[None, :]
    x = tl.load(inp + r * N + c, (r < M) & (c < N))
    orow = (tl.program_id(1) * B + tl.arange(0, B))[:, None]
    ocol = (tl.program_id(0) * B + tl.arange(0, B))[None, :]
    tl.store(out + orow * M + ocol, tl.trans(x), (orow < N) & (ocol < M))


@triton.jit
def attention(o, q, k, v, n, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
              SCALE: tl.constexpr):
    base = tl.program_id(1) * n * D
    rm = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]
    d0 = tl.arange(0, D)[None, :]
    d1 = tl.arange(0, D)[:, None]
    qt = tl.load(q + base + rm * D + d0, rm < n, other=0.0)
    hi = n
    if CAUSAL:
        hi = tl.minimum(n, (tl.program_id(0) + 1) * BM)
    mi = tl.full((BM, ), -float("inf"), tl.float32)
    li = tl.zeros((BM, ), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for n0 in tl.range(0, hi, BN, num_stages=1):
        cn = (n0 + tl.arange(0, BN))[None, :]
        kt = tl.load(k + base + cn * D + d1, cn < n, other=0.0)
        s = tl.dot(qt, kt) * SCALE
        valid = cn < n
        if CAUSAL:
            valid = valid & (cn <= rm)
        s = tl.where(valid, s, -float("inf"))
        mnew = tl.maximum(mi, tl.max(s, 1))
        p = tl.exp(s - mnew[:, None])
        alpha = tl.exp(mi - mnew)
        cn2 = (n0 + tl.arange(0, BN))[:, None]
        vt = tl.load(v + base + cn2 * D + d0, cn2 < n, other=0.0)
        acc = tl.dot(p.to(tl.float16), vt, acc * alpha[:, None])
        li = li * alpha + tl.sum(p, 1)
        mi = mnew
    tl.store(o + base + rm * D + d0, (acc / li[:, None]).to(tl.float16), rm < n)


def gemm_case(name, config, ab, c_ty, tile, k, warps, stages, bias, gelu, batched=False, ws=False):
    sig = {"c": c_ty, "a": ab, "b": ab, "bias": "*fp32" if bias else "constexpr", "M": "i32", "N": "i32", "K": "i32"}
    bm, bn = tile if isinstance(tile, tuple) else (tile, tile)
    consts = dict(BM=bm, BN=bn, BK=k, HAS_BIAS=bias, GELU=gelu, STAGES=stages, BATCHED=batched, WS=ws)
    if not bias:
        consts["bias"] = None
    return (name, config, gemm, sig, consts, warps, stages)


def for_target(case, target):
    """The case as the example compiles it for `target`: the GEMM examples
    take 64x64 blocks on sm_90a and sm_100a, where a wgmma or tcgen05 MMA
    needs 64 rows (examples/registry.h, gemmDefaultBlocks), and 32x32
    elsewhere."""
    name, config, fn, sig, consts, warps, stages = case
    if config == "example default w4" and "BM" in consts and target in ("nvptx:sm_90a", "nvptx:sm_100a"):
        consts = dict(consts, BM=64, BN=64)
    return (name, config, fn, sig, consts, warps, stages)


def cases():
    """(kernel, config, fn, signature, constexprs, num_warps, num_stages); the
    (kernel, config) pairs are tessera_gpu_bench's."""
    ex = "example default w4"
    f32 = "*fp32"
    r = [
        ("vector_add", ex, vector_add, {"out": f32, "a": f32, "b": f32, "n": "i32"}, {"BLOCK": 1024}, 4, 1),
        ("bias_gelu", ex, bias_gelu, {"out": f32, "x": f32, "bias": f32, "cols": "i32"}, {"BLOCK": 256}, 4, 1),
        ("softmax", ex, softmax, {"out": f32, "inp": f32, "cols": "i32"}, {"BLOCK": 1024}, 4, 1),
        ("layernorm", ex, layernorm, {"y": f32, "mean": f32, "rstd": f32, "x": f32, "weight": f32, "bias": f32,
                                      "cols": "i32", "eps": "fp32"}, {"BLOCK": 1024}, 4, 1),
        ("rmsnorm", ex, rmsnorm, {"y": f32, "x": f32, "weight": f32, "cols": "i32", "eps": "fp32"}, {"BLOCK": 1024},
         4, 1),
        gemm_case("gemm_f32", ex, f32, f32, 32, 32, 4, 1, True, True),
        gemm_case("gemm_f16", ex, "*fp16", "*fp16", 32, 32, 4, 3, True, True),
        gemm_case("gemm_bf16", ex, "*bf16", f32, 32, 32, 4, 3, True, True),
        gemm_case("gemm_batched", ex, f32, f32, 32, 32, 4, 1, False, False, batched=True),
    ]
    r.append(("scalar_store", "one store w4", scalar_store, {"out": f32}, {}, 4, 1))
    for bm in (32, 64):
        r.append(("gemv", f"{bm}x128 w4", gemv, {"y": f32, "a": f32, "x": f32, "M": "i32", "K": "i32"},
                  {"BM": bm, "BK": 128}, 4, 1))
    r.append(("rope", "16x64 w4", rope, {"out": f32, "x": f32, "cs": f32, "sn": f32, "rows": "i32"},
              {"BR": 16, "HD": 64}, 4, 1))
    r.append(("transpose", "64x64 w4", transpose, {"out": f32, "inp": f32, "M": "i32", "N": "i32"}, {"B": 64}, 4, 1))
    for bm, bn, d, w, causal in ((64, 64, 64, 4, False), (128, 64, 64, 4, False), (128, 64, 64, 8, False),
                                 (64, 64, 128, 4, False), (128, 64, 128, 8, False), (128, 64, 64, 8, True)):
        cfg = f"{bm}x{bn} d{d} w{w}" + (" causal" if causal else "")
        h = "*fp16"
        r.append(("attention", cfg, attention, {"o": h, "q": h, "k": h, "v": h, "n": "i32"},
                  {"BM": bm, "BN": bn, "D": d, "CAUSAL": causal, "SCALE": 1.0 / math.sqrt(d)}, w, 1))
    for tile in (32, 128):
        for w in (4, 8):
            for epi in (False, True):
                cfg = f"{tile}x{tile}x32 s3 w{w}" + (" bias+gelu" if epi else "")
                r.append(gemm_case("gemm_f16", cfg, "*fp16", "*fp16", tile, 32, w, 3, epi, epi))
    for ws in (False, True):
        for bm, bn in ((128, 128), (128, 256)):
            r.append(gemm_case("gemm_f16", f"{bm}x{bn}x64 s3 w8" + (" ws" if ws else ""), "*fp16", "*fp16", (bm, bn), 64,
                               8, 3, False, False, ws=ws))
    for bm, bn, bk in ((128, 128, 64), (128, 256, 64), (128, 256, 128)):  # fp8 e4m3 (Hopper: wgmma; Blackwell: tcgen05)
        sig = {"c": "*bf16", "a": "*fp8e4nv", "b": "*fp8e4nv", "scales": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
        r.append(("gemm_fp8", f"{bm}x{bn}x{bk} s3 w8", gemm_fp8, sig, {"BM": bm, "BN": bn, "BK": bk, "STAGES": 3}, 8,
                  3))
    # Block-scaled (sm_120a and gfx950 only: MX_TARGETS), unpipelined as the zoo's kernel.
    for name, fmt, ab, pk, sc, sb in (("gemm_mxfp8", "e4m3", "*fp8e4nv", 1, "*u8", 32),
                                      ("gemm_mxfp4", "e2m1", "*u8", 2, "*u8", 32),
                                      ("gemm_nvfp4", "e2m1", "*u8", 2, "*fp8e4nv", 16)):
        for bm, bn, w in ((64, 128, 4), (128, 128, 4), (128, 128, 8)):
            sig = {"c": f32, "a": ab, "a_scale": sc, "b": ab, "b_scale": sc, "M": "i32", "N": "i32", "K": "i32"}
            r.append((name, f"{bm}x{bn}x128 w{w}", gemm_mx, sig,
                      {"BM": bm, "BN": bn, "BK": 128, "FMT": fmt, "PK": pk, "SB": sb}, w, 1))
    return r


TARGETS = {
    "nvptx:sm_80": GPUTarget("cuda", 80, 32),
    "nvptx:sm_90a": GPUTarget("cuda", 90, 32),
    "nvptx:sm_100a": GPUTarget("cuda", 100, 32),
    "amdgpu:gfx942": GPUTarget("hip", "gfx942", 64),
    "amdgpu:gfx1100": GPUTarget("hip", "gfx1100", 32),
}
# Targets only the cases that name them compile for (tessera_gpu_bench's
# rows made for some GPUs): the block-scaled GEMMs on sm_120a and gfx950
# (NVFP4's on sm_120a only: NVFP4_TARGETS).
MX_TARGETS = {"nvptx:sm_120a": GPUTarget("cuda", 120, 32), "amdgpu:gfx950": GPUTarget("hip", "gfx950", 64)}
NVFP4_TARGETS = ("nvptx:sm_120a", )


def compile_once(fn, sig, consts, warps, stages, target):
    full = dict(sig)
    for k in consts:
        full.setdefault(k, "constexpr")
    # Every pointer and integer argument divisible by 16, as the aligned
    # launch tessera_gpu_bench assumes.
    attrs = {(i, ): [["tt.divisibility", 16]]
             for i, (k, t) in enumerate(full.items()) if t.startswith("*") or t == "i32"}
    src = ASTSource(fn, full, consts, attrs)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")  # cold: nothing cached
    t = time.perf_counter()
    k = triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages})
    return k, (time.perf_counter() - t) * 1e3


def measure(tool, case, tname, reps, dump=None):
    name, config, fn, sig, consts, warps, stages = case
    row = {"kernel": name, "config": config, "target": tname}
    target = TARGETS.get(tname) or MX_TARGETS[tname]
    try:
        times = []
        compile_once(fn, sig, consts, warps, stages, target)  # warm-up (first use of a backend), as Tessera's
        for _ in range(reps):
            k, ms = compile_once(fn, sig, consts, warps, stages, target)
            times.append(ms)
        row["compile_ms"] = sorted(times)[len(times) // 2]
        threads = warps * target.warp_size
        shared = int(k.metadata.shared)
        # convert_layout ops left in the final Triton GPU IR.
        row["shared_conversions"] = k.asm["ttgir"].count("ttg.convert_layout")
        if dump:  # the listings, named as tessera_gpu_bench --dump names Tessera's
            os.makedirs(dump, exist_ok=True)
            stem = os.path.join(dump, ".".join([name, re.sub(r"[^A-Za-z0-9]+", "_", config),
                                                tname.replace(":", "_")]))
            for key in ("ttgir", "ptx", "amdgcn"):
                if key in k.asm:
                    with open(stem + "." + key, "w") as f:
                        f.write(k.asm[key])
        with tempfile.TemporaryDirectory() as d:
            if target.backend == "cuda":
                code = os.path.join(d, "k.ptx")
                with open(code, "w") as f:
                    f.write(k.asm["ptx"])
                extra = []
            else:
                code, asm = os.path.join(d, "k.hsaco"), os.path.join(d, "k.s")
                with open(code, "wb") as f:
                    f.write(k.asm["hsaco"])
                with open(asm, "w") as f:
                    f.write(k.asm["amdgcn"])
                extra = [asm]
            cmd = [tool, "--measure", tname, k.metadata.name, str(threads), str(shared), code] + extra
            out = subprocess.run(cmd, capture_output=True, text=True)
            # Triton 3.9 declares PTX ISA 9.4, newer than CUDA 13.0's ptxas
            # accepts; its code uses nothing newer, so the same ptxas as
            # Tessera's runs on it with the version it names.
            bad = re.search(r"Unsupported \.version \S+; current version is '([0-9.]+)'", out.stderr)
            if bad and target.backend == "cuda":
                with open(code, "w") as f:
                    f.write(re.sub(r"^\.version \S+", ".version " + bad.group(1), k.asm["ptx"], count=1,
                                   flags=re.M))
                out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(out.stderr.strip())
        m = json.loads(out.stdout)
        for key in ("regs", "spill", "shared", "occupancy", "loop_instrs", "total_instrs", "listing"):
            row[key] = m[key]
    except Exception as e:  # reported in the table, never silently dropped
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return row


# ----------------------------------------------------------------- comparison


def fmt(v):
    if v is None or v == -1:
        return "-"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def ratio(a, b):
    if a is None or b is None or a < 0 or b < 0:
        return "-"
    if b == 0:
        return "=" if a == 0 else "inf"
    return f"{a / b:.2f}"


def compare(tessera_json, triton_json):
    with open(tessera_json) as f:
        ts_rows = {(r["kernel"], r["config"], r["target"]): r for r in json.load(f)}
    with open(triton_json) as f:
        tr_rows = {(r["kernel"], r["config"], r["target"]): r for r in json.load(f)}
    metrics = [("regs", "regs"), ("spill", "spill"), ("smem", "shared"), ("occ", "occupancy"),
               ("conv", "shared_conversions"), ("loop", "loop_instrs"), ("total", "total_instrs")]
    head = f"{'kernel':<10} {'config':<26} {'target':<14}"
    for label, _ in metrics:
        head += f" {label + ' Ts/Tr':>17}"
    head += f" {'compile ms Ts/Tr':>22}"
    print(head)
    for key, a in ts_rows.items():
        b = tr_rows.get(key, {"error": "not compiled"})
        line = f"{key[0]:<10} {key[1]:<26} {key[2]:<14}"
        if a.get("error") or b.get("error"):
            print(line + f" Tessera: {a.get('error') or 'ok'}; Triton: {b.get('error') or 'ok'}")
            continue
        for _, k in metrics:
            x, y = a.get(k), b.get(k)
            line += f" {fmt(x) + '/' + fmt(y) + ' ' + ratio(x, y):>17}"
        # Tessera's compile stops at PTX; ptxas is timed apart. Triton's
        # includes ptxas: compared with Tessera's sum.
        tms = a["compile_ms"] + (a["ptxas_ms"] if a.get("ptxas_ms", -1) > 0 else 0)
        trms = b["compile_ms"]
        line += " " + f"{tms:.0f}/{trms:.0f} {ratio(tms, trms)}".rjust(22)
        print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--measure-tool", help="build/bin/tessera_gpu_bench")
    p.add_argument("--json", help="write Triton's rows here")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", help="one kernel family")
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--compare", nargs=2, metavar=("TESSERA_JSON", "TRITON_JSON"))
    p.add_argument("--dump", metavar="DIR", help="write Triton's listings (TTGIR, PTX, AMDGCN) here")
    a = p.parse_args()
    a.targets_given = "--targets" in sys.argv
    if a.compare:
        return compare(*a.compare)
    if not a.measure_tool:
        p.error("--measure-tool is required to measure")
    rows = []
    print(f"triton {triton.__version__}", file=sys.stderr)
    for case in cases():
        if a.only and case[0] != a.only:
            continue
        targets = a.targets.split(",")
        if case[0].startswith("gemm_mx") or case[0] == "gemm_nvfp4":  # made for sm_120a (and gfx950): there,
            mx = NVFP4_TARGETS if case[0] == "gemm_nvfp4" else MX_TARGETS  # unless --targets leaves it out
            targets = [t for t in (targets if a.targets_given else mx) if t in mx]
        else:
            targets = [t for t in targets if t in TARGETS]
        for t in targets:
            row = measure(a.measure_tool, for_target(case, t), t, a.reps, a.dump)
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
