#!/usr/bin/env python3
"""The GPU acceptance kit's Python peers (scripts/gpu-acceptance.sh; docs/bench.md).

Times, on the GPU of this machine, what PyTorch and Triton run for the
problems Tessera's examples solve, with the timing rules of `tessera bench`
(a warm-up, then repetitions until a time budget, each between a pair of
CUDA events on the current stream, no cache flush; median, min, max and the
quartiles), so that the acceptance table sets them beside Tessera's figures:

  gemm_f16:M,N,K[,act], gemm_bf16:M,N,K[,act]
        torch.matmul (cuBLAS, as PyTorch calls it)
  gemm_fp8:M,N,K
        torch._scaled_mm (cuBLASLt's fp8 GEMM: e4m3 operands, per-tensor
        scales, bf16 out; B column-major, the one layout cuBLASLt's fp8 takes)
  flash_attention:H,N,D, flash_attention_causal:H,N,D   ([H, N, D] f16)
        torch.nn.functional.scaled_dot_product_attention with its flash and
        its cuDNN backend (torch.nn.attention.sdpa_kernel), and the fused
        attention kernel of bench/gpu/triton_kernels.py where Triton imports
  softmax:R,C, layernorm:R,C, rmsnorm:R,C   (f32)
        the tutorial-style Triton kernels of bench/gpu/triton_kernels.py, and
        PyTorch's own (torch.softmax, F.layer_norm, F.rms_norm)

Each implementation is first checked against a float32 reference on a small
problem of the same kind; one that fails is reported and not timed.

  python3 peers.py --json peers.json CASE...     # on the GPU machine
  python3 peers.py --dry-run --json p.json CASE... # anywhere: the plan, nothing imported

A row that cannot run (no torch, no Triton, a backend refused, the time
limit reached) is written with status "skip" and the reason. The exit
status is 0 unless a check failed or the command line is wrong (2).
A benchmark-only peer: nothing of Tessera's build or tests needs Python.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

FORMAT = "tessera-gpu-peers"
VERSION = 1

# The implementations of each kind of problem: (impl id, label).
IMPLS = {
    "gemm": [("torch-matmul", "torch.matmul (cuBLAS)")],
    "gemm_fp8": [("torch-scaled-mm", "torch._scaled_mm (cuBLASLt fp8)")],
    "attention": [("sdpa-flash", "PyTorch SDPA, flash backend"), ("sdpa-cudnn", "PyTorch SDPA, cuDNN backend"),
                  ("triton", "Triton fused attention (tutorial style)")],
    "rows": [("triton", "Triton (tutorial style)"), ("torch", "PyTorch eager")],
}
ROW_KERNELS = ("softmax", "layernorm", "rmsnorm")


class Case:
    """A problem, named as `tessera bench` names it: NAME:A,B,..."""

    def __init__(self, text):
        name, _, shape = text.partition(":")
        try:
            dims = [int(d) for d in shape.split(",")] if shape else []
        except ValueError:
            raise ValueError(f"'{text}': the shape after ':' is A,B,... (integers)") from None
        if name in ("gemm_f16", "gemm_bf16") and len(dims) in (3, 4):
            self.kind = "gemm"
        elif name == "gemm_fp8" and len(dims) == 3:
            self.kind = "gemm_fp8"
        elif name in ("flash_attention", "flash_attention_causal") and len(dims) == 3:
            self.kind = "attention"
        elif name in ROW_KERNELS and len(dims) == 2:
            self.kind = "rows"
        else:
            raise ValueError(f"'{text}': expected gemm_f16|gemm_bf16:M,N,K[,act], gemm_fp8:M,N,K, "
                             "flash_attention[_causal]:H,N,D or softmax|layernorm|rmsnorm:R,C")
        if any(d < 1 for d in dims[:3]):
            raise ValueError(f"'{text}': every dimension must be at least 1")
        self.name, self.dims = name, dims
        self.id = f"{name}[{'x'.join(str(d) for d in dims)}]"  # as `tessera bench` names it

    def flops(self):
        if self.kind in ("gemm", "gemm_fp8"):
            m, n, k = self.dims[:3]
            return 2.0 * m * n * k
        if self.kind == "attention":
            h, n, d = self.dims
            return 4.0 * h * n * n * d * (0.5 if self.name.endswith("causal") else 1.0)
        return 0.0

    def bytes(self):
        if self.kind != "rows":
            return 0.0
        r, c = self.dims
        extra = {"softmax": 0, "layernorm": 2 * c + 2 * r, "rmsnorm": c}[self.name]
        return 4.0 * (2 * r * c + extra)


def stats(samples):
    """Median, quartiles (linear interpolation, as NumPy's default), min, max."""
    s = sorted(samples)

    def q(p):
        x = p * (len(s) - 1)
        lo = int(math.floor(x))
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (x - lo)

    return {"median": q(0.5), "q1": q(0.25), "q3": q(0.75), "min": s[0], "max": s[-1], "mean": sum(s) / len(s),
            "count": len(s)}


class Timer:
    """`tessera bench`'s rules: warm-up for warmup_s (at least one call),
    then event-timed repetitions until budget_s, min_reps..max_reps."""

    def __init__(self, torch, budget_s, warmup_s, min_reps=5, max_reps=100000):
        self.torch, self.budget_s, self.warmup_s = torch, budget_s, warmup_s
        self.min_reps, self.max_reps = min_reps, max_reps

    def __call__(self, fn):
        cuda = self.torch.cuda
        fn()
        cuda.synchronize()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < self.warmup_s:
            fn()
            cuda.synchronize()
        start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        samples = []
        t0 = time.perf_counter()
        while len(samples) < self.max_reps and (len(samples) < self.min_reps or
                                                 time.perf_counter() - t0 < self.budget_s):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) / 1e3)
        return stats(samples)


class Skip(Exception):
    pass


class CheckFailed(Exception):
    pass


def close(torch, got, want, tol, what):
    err = (got.float() - want.float()).abs().max().item()
    if not err <= tol:  # NaN fails too
        raise CheckFailed(f"{what}: max abs error {err:.3g} > {tol:.3g}")
    return f"max abs error {err:.2g} <= {tol:.2g} at {what}"


# ---------------------------------------------------------------- problems
# Each returns {impl: (check() -> str, run() -> None[, context()])} for a
# case (or {impl: why} where it cannot run), the big inputs allocated once;
# the context, where there is one, is entered around the check and the timing.


def uniform(torch, shape, dtype, gen):
    return (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def gemm_impls(torch, case, gen):
    m, n, k = case.dims[:3]
    dt = torch.float16 if case.name == "gemm_f16" else torch.bfloat16
    a, b = uniform(torch, (m, k), dt, gen), uniform(torch, (k, n), dt, gen)

    def check():
        sa, sb = uniform(torch, (256, 200), dt, gen), uniform(torch, (200, 192), dt, gen)
        tol = 1e-2 if dt == torch.float16 else 6e-2  # the rounding of the output (|c| < ~40)
        return close(torch, torch.matmul(sa, sb), sa.float() @ sb.float(), tol, "256x192x200")

    return {"torch-matmul": (check, lambda: torch.matmul(a, b))}


def gemm_fp8_impls(torch, case, gen):
    m, n, k = case.dims
    f8 = getattr(torch, "float8_e4m3fn", None)
    scaled_mm = getattr(torch, "_scaled_mm", None)
    if f8 is None or scaled_mm is None:
        raise Skip("this torch has no float8_e4m3fn / _scaled_mm")
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip("fp8 GEMMs need sm_89 or sm_90")
    sa, sb = torch.tensor(0.0117, device="cuda"), torch.tensor(0.0049, device="cuda")

    def operands(m, n, k):
        a = (uniform(torch, (m, k), torch.float32, gen) * 64).to(f8)
        b = (uniform(torch, (n, k), torch.float32, gen) * 64).to(f8).t()  # K x N, column-major
        return a, b

    a, b = operands(m, n, k)

    def run(a=a, b=b):
        return scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    def check():
        x, y = operands(128, 96, 256)
        want = (x.float() @ y.float()) * sa * sb
        got = scaled_mm(x, y, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return close(torch, got, want, 2e-2 * want.abs().max().item() + 1e-3, "128x96x256")

    return {"torch-scaled-mm": (check, run)}


def attention_reference(torch, q, k, v, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def attention_impls(torch, case, gen, tk):
    h, n, d = case.dims
    causal = case.name.endswith("causal")
    F = torch.nn.functional
    q, k, v = (uniform(torch, (h, n, d), torch.float16, gen) for _ in range(3))
    small = [uniform(torch, (2, 1000, d), torch.float16, gen) for _ in range(3)]  # ragged: 1000 rows
    want = attention_reference(torch, *small, causal)
    impls = {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        SDPBackend = sdpa_kernel = None
        sdpa_why = f"torch.nn.attention.sdpa_kernel: {e}"
    for impl, backend in (("sdpa-flash", "FLASH_ATTENTION"), ("sdpa-cudnn", "CUDNN_ATTENTION")):
        if sdpa_kernel is None:
            impls[impl] = sdpa_why
            continue
        be = getattr(SDPBackend, backend, None)
        if be is None:
            impls[impl] = f"this torch has no SDPBackend.{backend}"
            continue

        # SDPA takes [batch, heads, n, D]: one batch of H heads is the same
        # memory. The backend is chosen once, around the check and the timing.
        def call(x, y, z):
            return F.scaled_dot_product_attention(x[None], y[None], z[None], is_causal=causal)[0]

        impls[impl] = (lambda: close(torch, call(*small), want, 1e-2, "2x1000x%d" % d), lambda: call(q, k, v),
                       lambda be=be: sdpa_kernel([be]))
    if tk is None:
        impls["triton"] = triton_why
    else:
        o = torch.empty_like(q)
        os_ = torch.empty_like(small[0])
        impls["triton"] = (lambda: close(torch, tk.attention(os_, *small, causal), want, 1e-2, "2x1000x%d" % d),
                           lambda: tk.attention(o, q, k, v, causal))
    return impls


def rows_impls(torch, case, gen, tk):
    r, c = case.dims
    F = torch.nn.functional
    eps = 1e-5

    def inputs(r, c):
        lo, hi = (2.0, 4.0) if case.name == "layernorm" else (-1.0, 1.0)
        x = uniform(torch, (r, c), torch.float32, gen) * (hi - lo) / 2 + (hi + lo) / 2
        w = uniform(torch, (c, ), torch.float32, gen) * 0.5 + 1.0
        b = uniform(torch, (c, ), torch.float32, gen)
        return x, w, b

    def reference(x, w, b):
        x64, w64, b64 = x.double(), w.double(), b.double()
        if case.name == "softmax":
            return torch.softmax(x64, -1)
        if case.name == "layernorm":
            mu = x64.mean(-1, keepdim=True)
            var = ((x64 - mu)**2).mean(-1, keepdim=True)
            return (x64 - mu) / torch.sqrt(var + eps) * w64 + b64
        return x64 / torch.sqrt((x64 * x64).mean(-1, keepdim=True) + eps) * w64

    def torch_op(x, w, b):
        if case.name == "softmax":
            return torch.softmax(x, -1)
        if case.name == "layernorm":
            return F.layer_norm(x, (x.shape[-1], ), w, b, eps)
        if not hasattr(F, "rms_norm"):
            raise Skip("this torch has no torch.nn.functional.rms_norm")
        return F.rms_norm(x, (x.shape[-1], ), w, eps)

    def triton_op(tk):
        def run(x, w, b, out):
            y, mean, rstd = out
            if case.name == "softmax":
                return tk.softmax(y, x)
            if case.name == "layernorm":
                return tk.layernorm(y, mean, rstd, x, w, b, eps)
            return tk.rmsnorm(y, x, w, eps)

        return run

    big = inputs(r, c)
    small = inputs(37, 1000)  # ragged
    tol = 2e-5 if case.name == "softmax" else 1e-4
    impls = {}
    if tk is None:
        impls["triton"] = triton_why
    else:
        op = triton_op(tk)
        out_big = (torch.empty_like(big[0]), torch.empty(r, device="cuda"), torch.empty(r, device="cuda"))
        out_small = (torch.empty_like(small[0]), torch.empty(37, device="cuda"), torch.empty(37, device="cuda"))
        impls["triton"] = (lambda: close(torch, op(*small, out_small), reference(*small), tol, "37x1000"),
                           lambda: op(*big, out_big))
    impls["torch"] = (lambda: close(torch, torch_op(*small), reference(*small), tol, "37x1000"),
                      lambda: torch_op(*big))
    return impls


triton_why = "Triton not importable"


def versions(torch):
    v = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 (a report, whatever cuDNN says)
        pass
    return v


def plan(cases):
    return [(c, impl, label) for c in cases for impl, label in IMPLS[c.kind]]


def row(case, impl, label, status, why="", **extra):
    r = {"id": case.id, "name": case.name, "shape": "x".join(str(d) for d in case.dims), "kind": case.kind,
         "impl": impl, "label": label, "status": status, "why": why, "flops": case.flops(), "bytes": case.bytes()}
    r.update(extra)
    return r


def run(args, cases):
    rows = []
    info = {}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 (ImportError, or a broken install)
        why = f"torch not importable ({type(e).__name__}: {e})"
        return [row(c, i, lab, "skip", why) for c, i, lab in plan(cases)], info, 0
    if not torch.cuda.is_available():
        return [row(c, i, lab, "skip", "torch sees no CUDA device") for c, i, lab in plan(cases)], info, 0
    info = versions(torch)
    info["device"] = torch.cuda.get_device_name()
    global triton_why
    tk = None
    try:
        import triton
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import triton_kernels as tk
        info["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        triton_why = f"Triton not importable ({type(e).__name__}: {e})"
    timer = Timer(torch, args.budget_ms / 1e3, args.warmup_ms / 1e3)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    failed = 0
    deadline = time.monotonic() + args.deadline_s if args.deadline_s > 0 else None
    for case in cases:
        try:
            if deadline and time.monotonic() > deadline:
                raise Skip(f"the peers' {args.deadline_s:g} s were spent before this problem")
            if case.kind == "gemm":
                impls = gemm_impls(torch, case, gen)
            elif case.kind == "gemm_fp8":
                impls = gemm_fp8_impls(torch, case, gen)
            elif case.kind == "attention":
                impls = attention_impls(torch, case, gen, tk)
            else:
                impls = rows_impls(torch, case, gen, tk)
        except (Skip, RuntimeError, torch.cuda.OutOfMemoryError) as e:
            rows += [row(case, i, lab, "skip", str(e).splitlines()[0] if str(e) else type(e).__name__)
                     for i, lab in IMPLS[case.kind]]
            continue
        for impl, label in IMPLS[case.kind]:
            entry = impls.get(impl, "not available")
            if isinstance(entry, str):
                rows.append(row(case, impl, label, "skip", entry))
                continue
            if deadline and time.monotonic() > deadline:
                rows.append(row(case, impl, label, "skip", f"the peers' {args.deadline_s:g} s were spent"))
                continue
            check, fn = entry[:2]
            t0 = time.perf_counter()
            try:
                with entry[2]() if len(entry) > 2 else contextlib.nullcontext():
                    checked = check()
                    secs = timer(fn)
                rows.append(row(case, impl, label, "ok", seconds=secs, check=checked,
                                wall_seconds=time.perf_counter() - t0))
            except CheckFailed as e:
                failed += 1
                rows.append(row(case, impl, label, "fail", str(e)))
            except Skip as e:
                rows.append(row(case, impl, label, "skip", str(e)))
            except Exception as e:  # noqa: BLE001 (a backend refusing the problem is a skip, named)
                msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                rows.append(row(case, impl, label, "skip", f"{type(e).__name__}: {msg}"))
            torch.cuda.empty_cache()
        del impls
    return rows, info, failed


def fmt_seconds(s):
    for unit, f in (("s", 1), ("ms", 1e3), ("us", 1e6)):
        if s * f >= 1:
            return f"{s * f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cases", nargs="+", metavar="CASE", help="NAME:A,B,... as `tessera bench` takes it")
    p.add_argument("--json", default="-", help="the report (default: standard output, the table then on stderr)")
    p.add_argument("--budget-ms", type=float, default=200, help="timed repetitions per row (default 200)")
    p.add_argument("--warmup-ms", type=float, default=30, help="warm-up per row (default 30)")
    p.add_argument("--deadline-s", type=float, default=0, help="skip what starts after this many seconds (0: none)")
    p.add_argument("--dry-run", action="store_true", help="import nothing, time nothing: the plan, as skipped rows")
    args = p.parse_args(argv)
    if args.budget_ms < 0 or args.warmup_ms < 0:
        p.error("--budget-ms and --warmup-ms must not be negative")
    try:
        cases = [Case(c) for c in args.cases]
    except ValueError as e:
        p.error(str(e))
    t0 = time.monotonic()
    if args.dry_run:
        rows = [row(c, i, lab, "skip", "dry run: torch and Triton not imported") for c, i, lab in plan(cases)]
        info, failed = {}, 0
    else:
        rows, info, failed = run(args, cases)
    report = {"format": FORMAT, "version": VERSION, "command": " ".join(sys.argv), "dry_run": args.dry_run,
              "versions": info, "wall_seconds": time.monotonic() - t0, "results": rows}
    text = json.dumps(report, indent=1) + "\n"
    table = sys.stderr if args.json == "-" else sys.stdout
    for r in rows:
        got = fmt_seconds(r["seconds"]["median"]) if r["status"] == "ok" else r["status"] + ": " + r["why"]
        print(f"{r['id']:34} {r['label']:42} {got}", file=table)
    if args.json == "-":
        sys.stdout.write(text)
    else:
        with open(args.json, "w") as f:
            f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
