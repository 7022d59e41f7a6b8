"""Triton kernels for the GPU acceptance kit's peers (bench/gpu/peers.py).

Written for this kit in the style of Triton's tutorials, the way a Triton
user would write them: the fused attention forward of the "Fused Attention"
tutorial (online softmax in base 2, one program per BLOCK_M query rows of one
head, the causal loop stopping at the diagonal), and the one-row-per-program
softmax, LayerNorm and RMSNorm of the "Fused Softmax" and "Layer
Normalization" tutorials (the whole row in one tile). Their layouts are
Tessera's examples': Q, K, V and O are [heads, n, D], contiguous; the row
kernels take [rows, cols] f32.

Imported only on the GPU machine, where Triton is installed: nothing of
Tessera's build or tests imports it.
"""
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def attention_fwd(o, q, k, v, n, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    base = head * n * D
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    qt = tl.load(q + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < n, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        hi = tl.minimum(n, (start_m + 1) * BLOCK_M)
    else:
        hi = n
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(k + base + cols[None, :] * D + dims[:, None], mask=cols[None, :] < n, other=0.0)  # D x BLOCK_N
        s = tl.dot(qt, kt) * qk_scale  # scores in base 2: scale * log2(e) folded in
        valid = cols[None, :] < n
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(v + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < n, other=0.0)
        acc = tl.dot(p.to(vt.dtype), vt, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o + base + rows[:, None] * D + dims[None, :], out.to(o.dtype.element_ty), mask=rows[:, None] < n)


def attention_config(d):
    """BLOCK_M, BLOCK_N, warps and stages: the tutorial's Hopper choices for
    f16 (128-row blocks; 8 warps where D = 128 keeps more of the row in
    registers)."""
    if d <= 64:
        return 128, 64, 4, 3
    return 128, 64, 8, 3


def attention(o, q, k, v, causal):
    """O = softmax(Q K^T / sqrt(D)) V over [heads, n, D] tensors."""
    heads, n, d = q.shape
    bm, bn, warps, stages = attention_config(d)
    grid = (triton.cdiv(n, bm), heads)
    attention_fwd[grid](o, q, k, v, n, (1.0 / d**0.5) * LOG2E, D=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                        num_warps=warps, num_stages=stages)
    return o


@triton.jit
def softmax_fwd(out, x, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x + row * cols + c, mask=mask, other=float("-inf"))
    e = tl.exp(v - tl.max(v, 0))
    tl.store(out + row * cols + c, e / tl.sum(e, 0), mask=mask)


@triton.jit
def layernorm_fwd(y, mean, rstd, x, w, b, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x + row * cols + c, mask=mask, other=0.0)
    mu = tl.sum(v, 0) / cols
    xc = tl.where(mask, v - mu, 0.0)
    r = 1.0 / tl.sqrt(tl.sum(xc * xc, 0) / cols + eps)
    wt = tl.load(w + c, mask=mask)
    bt = tl.load(b + c, mask=mask)
    tl.store(y + row * cols + c, xc * r * wt + bt, mask=mask)
    tl.store(mean + row, mu)
    tl.store(rstd + row, r)


@triton.jit
def rmsnorm_fwd(y, x, w, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x + row * cols + c, mask=mask, other=0.0)
    r = 1.0 / tl.sqrt(tl.sum(v * v, 0) / cols + eps)
    tl.store(y + row * cols + c, v * r * tl.load(w + c, mask=mask), mask=mask)


def row_warps(block):
    """The fused-softmax tutorial's choice: more warps for wider rows."""
    return 16 if block >= 8192 else 8 if block >= 2048 else 4


def softmax(out, x):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    softmax_fwd[(rows, )](out, x, cols, BLOCK=block, num_warps=row_warps(block))
    return out


def layernorm(y, mean, rstd, x, w, b, eps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    layernorm_fwd[(rows, )](y, mean, rstd, x, w, b, cols, eps, BLOCK=block, num_warps=row_warps(block))
    return y


def rmsnorm(y, x, w, eps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    rmsnorm_fwd[(rows, )](y, x, w, cols, eps, BLOCK=block, num_warps=row_warps(block))
    return y
