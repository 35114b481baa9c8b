#!/usr/bin/env python3
"""tle against hand-written Triton and torch: speed per kernel and shape, launch overhead, compile and start times.

    python benchmarks/bench.py [--quick] [--out DIR] [--backends triton,tileir] [--only softmax,matmul]
    python benchmarks/bench.py --dry-run [--quick] [--compile]      # no GPU needed

On a GPU, for every case (kernel, shape, dtype) each implementation is first checked against torch in f32 on fresh
random inputs (outputs poisoned with NaN first); one that fails is reported FAIL and not timed. Then each is timed
with CUDA events around single launches, median of many, inputs rotated through enough copies that none is in L2.
The ceilings (device-to-device copy bandwidth, bf16 8192^3 cuBLAS rate) are measured in the same run, and each
time is compared with the floor they give. Results go to DIR/bench.json, DIR/bench.txt and DIR/bench.png
(DIR: --out, else $OUT, else ./bench_out); the table is printed last. benchmarks/README.md explains the columns.

--dry-run (no GPU): builds the cases and prints the table skeleton, then runs tiny versions of every case on the
CPU: tle on its interpreter (if runtime/interpreter.py exists), the Triton references under TRITON_INTERPRET=1,
torch on the CPU, all through the same correctness code as the GPU run. --compile also compiles every benchmark
configuration of tle and of the reference to sm_90 cubins (in a child process) and reports compile time and
shared memory, so a configuration that does not compile is found before GPU time is spent.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
# Not ROOT itself: tle is imported as installed (pip install -e .), whose package-dir mapping finds tle.runtime.
sys.path[:0] = [HERE, EXAMPLES]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small subset (smoke test, under 2 minutes)")
    p.add_argument("--out", default=None, help="output folder (default: $OUT, else ./bench_out)")
    p.add_argument("--backends", default="triton,tileir",
                   help="tle backends to run, comma-separated; one that raises is recorded with its error")
    p.add_argument("--only", default="", help="only these kernels (comma-separated)")
    p.add_argument("--decode", action="store_true", help="only the decode matmuls (M <= 128, split-K)")
    p.add_argument("--shapes", default="",
                   help="time these shapes instead of the built-in ones, comma-separated: N for vector_add, MxN "
                        "for the row kernels and swiglu, MxNxK for matmul (M <= 128 runs split-K); each shape "
                        "runs for every kernel of --only it fits, in each of the kernel's dtypes")
    p.add_argument("--timer", choices=("events", "graph", "do_bench"), default="events",
                   help="events: CUDA events around single launches, inputs rotated, no L2 flush (default); "
                        "graph: events around replays of a CUDA graph of back-to-back launches, inputs rotated, "
                        "per-launch time (how a graph-captured decode step runs); "
                        "do_bench: triton.testing.do_bench (flushes L2 by writing 256 MB before each rep)")
    p.add_argument("--rep-ms", type=float, default=None, help="time spent timing each implementation (ms)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop starting new cases after this many seconds (default 420, quick 100)")
    p.add_argument("--no-launch", action="store_true", help="skip the launch-overhead figures")
    p.add_argument("--no-startup", action="store_true", help="skip the compile / warm-start figures")
    p.add_argument("--no-tune", action="store_true", help="skip tle:tuned (matmul 4096-8192 tuned through the "
                   "tuning database; a first run tunes, later runs read the database)")
    p.add_argument("--tune-budget-s", type=float, default=45, help="tuning budget per tuned matmul shape (s)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: build cases, CPU correctness, table skeleton")
    p.add_argument("--compile", action="store_true", help="with --dry-run: compile every configuration to sm_90")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    p.add_argument("--kernels", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


ARGS = _parse_args() if __name__ == "__main__" else _parse_args([])
if ARGS.dry_run and not ARGS.child:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the references then run on the CPU

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import triton_ref  # noqa: E402
from reference import CASES as EXAMPLE_CASES  # noqa: E402
from reference import splitk_workspace, tolerance  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
# HBM bandwidth by the vendor's datasheet, for the decode bound (no kernel reads faster); GPUs not listed get none.
HBM_PEAK_BPS = {"NVIDIA H200": 4.8e12, "NVIDIA H100 80GB HBM3": 3.35e12}
KERNELS = ("vector_add", "softmax", "layernorm", "rmsnorm", "swiglu", "matmul", "cumsum")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def perf() -> float:
    return time.perf_counter()


def first_line(exc: BaseException, limit: int = 160) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    line = next((ln for ln in text.splitlines() if ln.strip()), text)
    return line[:limit]


# ==== the cases, as data ==========================================================================================

@dataclass
class Case:
    kernel: str
    shape: tuple  # vector_add (n,); row kernels and swiglu (m, n); matmul (m, n, k)
    dtype: str
    consts: dict  # tle's compile-time constants; the reference gets the same tile sizes
    num_warps: int  # the same for tle's Triton path and the reference
    num_stages: int
    bytes: int  # fewest bytes to move: each input read once, each output written once
    flops: int  # floating-point operations that must be done (matmul: 2 M N K; else 0)
    quick: bool = False
    group: str = ""  # "decode" for matmuls with M <= 128
    example: str = ""  # the example tle and the reference launch when it is not `kernel` (decode: matmul_splitk)
    backend_consts: dict = field(default_factory=dict)  # tle backend -> constants that replace consts on it

    @property
    def label(self) -> str:
        return "x".join(str(s) for s in self.shape)

    @property
    def key(self) -> str:
        return f"{self.kernel} {self.label} {self.dtype}"

    def grid(self, consts=None) -> tuple:
        c, s = consts or self.consts, self.shape
        if self.example == "matmul_splitk":
            return (cdiv(s[1], c["BN"]), c["SPLIT"], cdiv(s[0], c["BM"]))
        if self.kernel == "vector_add":
            return (cdiv(s[0], c["BLOCK"]),)
        if self.kernel in ("softmax", "layernorm", "rmsnorm", "cumsum"):
            return (s[0],)
        return (cdiv(s[0], c["BM"]), cdiv(s[1], c["BN"]))  # swiglu, matmul

    def config_text(self) -> str:
        c = ",".join(f"{k}={v}" for k, v in self.consts.items())
        per = "".join(f" {b}:" + ",".join(f"{k}={v}" for k, v in bc.items()) for b, bc in self.backend_consts.items())
        return f"{c} w{self.num_warps} s{self.num_stages}{per}"

    def make(self, device):
        """(args in tle's order, reference(args) -> [f32 tensors], outputs(args) -> [output tensors])."""
        case = EXAMPLE_CASES[self.kernel]
        extra = {"tiles": (self.consts["BM"], self.consts["BN"], self.consts["BK"])} if self.kernel == "matmul" else {}
        args, _, _, ref, outputs = case.make(device, DTYPES[self.dtype], tuple(self.shape), **extra)
        return args, ref, outputs


def row_warps(block: int, most: int = 8) -> int:
    """05-layer-norm's heuristic: a warp per 256 elements of the row, 1 to `most` warps."""
    return min(max(block // 256, 1), most)


# f32 rows of the normalisations may take 16 warps, 16-bit rows and cumsum 8. Measured on the H200
# (benchmarks/ncu_probe.py --warps 4,8,16 on every memory-bound softmax, layernorm and rmsnorm case, kernel alone,
# fifth session): f32 rows of 4096 and 8192 ran 0.5-2% faster on 16 warps than on 8 for all three (layernorm
# 8192x4096 f32 65.7 -> 64.4 us); 16-bit rows of 8192 gained at most 1% for softmax and rmsnorm but lost 7-8% for
# layernorm, and 16-bit rows of 4096 lost 9-21%. cumsum was not measured.
ROW_WARPS_F32 = ("softmax", "layernorm", "rmsnorm")


def vector_add_case(n, dtype="f32", quick=False):
    return Case("vector_add", (n,), dtype, {"BLOCK": 1024}, 4, 3, 3 * n * ELEMENT_BYTES[dtype], 0, quick)


def row_case(kernel, m, n, dtype, quick=False):
    es = ELEMENT_BYTES[dtype]
    params = {"softmax": 0, "layernorm": 2 * n * es, "rmsnorm": n * es, "cumsum": 0}[kernel]  # w, b
    block = next_pow2(n)
    warps = row_warps(block, 16 if dtype == "f32" and kernel in ROW_WARPS_F32 else 8)
    return Case(kernel, (m, n), dtype, {"BLOCK": block}, warps, 3, 2 * m * n * es + params, 0, quick)


def swiglu_case(m, n, dtype, quick=False):
    return Case("swiglu", (m, n), dtype, {"BM": 16, "BN": 256}, 4, 3, 3 * m * n * ELEMENT_BYTES[dtype], 0, quick)


def matmul_config(m, n, k):
    """(BM, BN, BK, num_warps, num_stages), the same for tle and the reference. num_stages is 3 because
    examples/matmul.tle pins `pipeline(stages=3)` on its K loop."""
    size = min(m, n)
    if size <= 1024:
        return 64, 128, 64, 4, 3
    if size <= 2048:
        return 128, 128, 64, 4, 3
    return 128, 256, 64, 8, 3  # 03-matrix-multiplication's first (best on H100 for f16) configuration


# Decode matmuls (M <= 128) run examples/matmul_splitk.tle. Per shape, measured on the H200 by
# benchmarks/decode_sweep.py (bf16; the f16 kernels are the same code): (BM, BN, BK, SPLIT, num_warps, num_stages,
# SWAP) for the native path and the reference, from the sweep with per-launch events, except M = 1 on 4096x4096
# (decode_probe.py's 'dot part' variant, the same algorithm); and (BM, BN, BK, SPLIT, SWAP) for Tile IR, from
# `decode_sweep.py --timer graph` (fourth session: 18-38 configurations per shape, Tile IR's split-K swept for the
# first time; e.g. 128x14336x4096 went from 40.8 to 32.3 us, 32x4096x14336 from 41.5 to 31.7). SWAP (the weight
# tile on the dot's left, so BM < 64 gets wgmma) from `decode_sweep.py --variants fused,swap,tileir,swap-tileir`
# (twenty-second session): Tile IR at M = 1-32 on 4096x4096 took 13.3 us where its unswapped best took 13.8-15.1,
# and the native path at 32x4096x4096 and 128x14336x4096 14.0 and 33.9 where it took 15.4 and 38.8.
DECODE_CONFIGS = {
    (1, 4096, 4096): ((16, 64, 64, 4, 4, 4, False), (16, 64, 128, 1, True)),
    (16, 4096, 4096): ((16, 64, 256, 2, 4, 3, True), (16, 64, 256, 1, True)),
    (32, 4096, 4096): ((32, 64, 64, 2, 4, 7, True), (32, 64, 256, 1, True)),
    (64, 4096, 4096): ((64, 32, 128, 1, 4, 7, False), (64, 32, 256, 1, False)),
    (128, 4096, 4096): ((128, 64, 64, 2, 8, 7, False), (128, 32, 64, 1, False)),
    (1, 14336, 4096): ((16, 64, 64, 1, 4, 5, False), (16, 128, 64, 1, False)),
    (16, 14336, 4096): ((16, 64, 64, 1, 4, 5, False), (16, 128, 64, 1, False)),
    (32, 14336, 4096): ((32, 64, 64, 1, 4, 5, False), (32, 128, 64, 1, False)),
    (64, 14336, 4096): ((64, 64, 128, 1, 4, 3, False), (64, 128, 64, 1, False)),
    (128, 14336, 4096): ((128, 128, 64, 1, 4, 5, True), (128, 128, 64, 1, False)),
    (1, 4096, 14336): ((16, 128, 128, 4, 4, 3, False), (16, 64, 64, 2, False)),
    (16, 4096, 14336): ((16, 128, 64, 4, 4, 5, False), (16, 32, 256, 1, False)),
    (32, 4096, 14336): ((32, 128, 128, 4, 4, 3, False), (32, 64, 64, 2, False)),
    (64, 4096, 14336): ((64, 64, 64, 2, 4, 7, False), (64, 32, 256, 1, False)),
    (128, 4096, 14336): ((128, 64, 64, 2, 8, 7, False), (128, 64, 128, 2, False)),
}


def decode_config(m, n, k):
    """(native-path config, Tile IR's (BM, BN, BK, SPLIT, SWAP)) for a decode matmul: the measured table, else
    BM = M rounded up to 16..128, BN = 64, BK = 64 and K split in two while that keeps the grid within 2 programs
    per SM (132 SMs) and every split at least 2 K tiles, not swapped; Tile IR then unsplit, BN = 64, BK = 128, and
    swapped where BM is 16 or 32: with its latency hint 4 the swapped kernel ran level with or faster than the
    unswapped one on the five M <= 32 shapes where both were measured (1, 16 and 32 x 4096x4096, 1x14336x4096,
    16x4096x14336; benchmarks/RESULTS.md, "Decode: latency 4 on thin accumulators", and the twenty-second session's
    "Decode: the weight tile on the dot's left")."""
    if (m, n, k) in DECODE_CONFIGS:
        return DECODE_CONFIGS[(m, n, k)]
    bm = min(128, max(16, next_pow2(m)))
    tiles, split = cdiv(n, 64) * cdiv(m, bm), 1
    while split < 16 and tiles * split * 2 <= 264 and cdiv(cdiv(k, 64), split * 2) >= 2:
        split *= 2
    return (bm, 64, 64, split, 8 if bm >= 128 else 4, 5, False), (bm, 64, 128, 1, bm <= 32)


def matmul_case(m, n, k, dtype, quick=False):
    es = ELEMENT_BYTES[dtype]
    if m <= 128:
        (bm, bn, bk, split, w, s, swap), (tm, tn, tk, ts, tswap) = decode_config(m, n, k)
        return Case("matmul", (m, n, k), dtype, {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split, "SWAP": swap}, w, s,
                    (m * k + k * n + m * n) * es, 2 * m * n * k, quick, "decode", "matmul_splitk",
                    {"tileir": {"BM": tm, "BN": tn, "BK": tk, "SPLIT": ts, "SWAP": tswap}})
    bm, bn, bk, w, s = matmul_config(m, n, k)
    return Case("matmul", (m, n, k), dtype, {"BM": bm, "BN": bn, "BK": bk}, w, s, (m * k + k * n + m * n) * es,
                2 * m * n * k, quick, "decode" if m <= 128 else "")


def shape_cases(spec: str, only=()) -> list[Case]:
    """--shapes: the listed shapes for every kernel (of --only) whose rank they fit, in the kernel's dtypes."""
    cases = []
    for text in (t.strip() for t in spec.split(",") if t.strip()):
        try:
            dims = tuple(int(d) for d in text.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--shapes: {text!r} is not N, MxN or MxNxK") from None
        for kernel in (k for k in KERNELS if not only or k in only):
            if kernel == "vector_add" and len(dims) == 1:
                cases += [vector_add_case(dims[0])]
            elif kernel in ("softmax", "layernorm", "rmsnorm", "cumsum") and len(dims) == 2:
                cases += [row_case(kernel, *dims, dt) for dt in ("bf16", "f32")]
            elif kernel == "swiglu" and len(dims) == 2:
                cases += [swiglu_case(*dims, "bf16")]
            elif kernel == "matmul" and len(dims) == 3:
                cases += [matmul_case(*dims, dt) for dt in ("f16", "bf16")]
    if not cases:
        raise SystemExit(f"--shapes {spec!r} fits none of the kernels {only or KERNELS}")
    return cases


def build_cases(quick: bool, only=()) -> list[Case]:
    if ARGS.shapes:
        return shape_cases(ARGS.shapes, only)
    cases = [vector_add_case(1 << p, quick=(p == 24)) for p in (20, 22, 24, 26, 28)]
    for kernel in ("softmax", "layernorm", "rmsnorm"):
        # 4096x1000: rows that are not a multiple of 16 elements (Triton's launcher then knows nothing of their
        # alignment; tle's specialisation knows 1000 = 8 x 125: docs/architecture.md, section 3)
        for m, n in ((4096, 1000), (4096, 1024), (8192, 4096), (16384, 8192), (32768, 8192)):
            for dt in ("bf16", "f32"):
                q = (m, n) == (8192, 4096) and (dt == "bf16" or kernel == "softmax")
                cases.append(row_case(kernel, m, n, dt, q))
    cases += [swiglu_case(1024, 14336, "bf16"), swiglu_case(8192, 14336, "bf16", quick=True)]
    for dt in ("f16", "bf16"):
        for s in (1024, 2048, 4096, 8192):
            cases.append(matmul_case(s, s, s, dt, quick=(s == 4096 and dt == "bf16")))
    for dt in ("bf16", "f16"):
        # decode: activations M x K against a K x N weight (up/gate projections, and the down projection)
        for k, n in ((4096, 4096), (4096, 14336), (14336, 4096)):
            for m in (1, 16, 32, 64, 128):
                cases.append(matmul_case(m, n, k, dt, quick=(m == 16 and n == 4096 and dt == "bf16")))
    cases += [row_case("cumsum", 4096, 4096, "f32", quick=True), row_case("cumsum", 4096, 4096, "bf16")]
    if quick:
        cases = [c for c in cases if c.quick]
    if only:
        cases = [c for c in cases if c.kernel in only]
    if ARGS.decode:
        cases = [c for c in cases if c.group == "decode"]
    return cases


def dry_cases(only=()) -> list[Case]:
    """Tiny versions of every kind of case, for the CPU interpreters: the same builders, ragged shapes."""
    cases = [vector_add_case(10_000)]
    for kernel in ("softmax", "layernorm", "rmsnorm", "cumsum"):
        for dt in ("bf16", "f32"):
            cases.append(row_case(kernel, 37, 1000, dt))
    cases += [swiglu_case(37, 1000, "bf16"), swiglu_case(40, 600, "f32")]
    for dt in ("f16", "bf16"):
        cases += [matmul_case(200, 160, 96, dt), matmul_case(1, 96, 130, dt), matmul_case(33, 200, 64, dt),
                  matmul_case(3, 64, 1000, dt)]
    if only:
        cases = [c for c in cases if c.kernel in only]
    if ARGS.decode:
        cases = [c for c in cases if c.group == "decode"]
    return cases


# ==== implementations =============================================================================================

_TLE_MODULES: dict = {}


def tle_module(kernel: str):
    if kernel not in _TLE_MODULES:
        import tle
        _TLE_MODULES[kernel] = tle.compile(os.path.join(EXAMPLES, f"{kernel}.tle"))
    return _TLE_MODULES[kernel]


# Launch options tle takes per backend: Triton's path takes the reference's num_warps/num_stages; others none.
TLE_OPTIONS = {"triton": ("num_warps", "num_stages")}


@dataclass
class Impl:
    name: str  # the table's column
    make: object  # make(case) -> fn(args) -> None | Tensor | [Tensor]; may raise (recorded as ERR)
    applies: object = None  # applies(case) -> bool; None: every case

    def wanted(self, case) -> bool:
        return self.applies is None or self.applies(case)


def with_workspace(case: Case, consts: dict):
    """args -> the launch's arguments: a decode matmul's (a, b, c) plus matmul_splitk's workspace (partials and
    arrival counters), allocated at the first call and reused by every later one, as a caller would."""
    if case.example != "matmul_splitk":
        return lambda args: args
    ws = []

    def extend(args):
        if not ws:
            ws.extend(splitk_workspace(args[0].device, case.shape[0], case.shape[1], consts["BM"], consts["BN"],
                                       consts["SPLIT"]))
        return (*args, *ws)
    return extend


def tle_impl(backend: str) -> Impl:
    def make(case):
        name = case.example or case.kernel
        k = getattr(tle_module(name), name)
        consts = {**case.consts, **case.backend_consts.get(backend, {})}
        grid = case.grid(consts)
        kw = dict(consts, backend=backend)
        for opt in TLE_OPTIONS.get(backend, ()):
            kw[opt] = getattr(case, opt)
        extend = with_workspace(case, consts)
        return lambda args: k[grid](*extend(args), **kw)
    return Impl(f"tle:{backend}", make)


def auto_path(case, args) -> str:
    """The path tle takes for this case when the caller names no backend (backend="auto"): one untimed launch with
    the case's shared constants, then the kernel's last_backend. What a user who writes `k[grid](...)` gets."""
    name = case.example or case.kernel
    k = getattr(tle_module(name), name)
    k[case.grid(case.consts)](*with_workspace(case, case.consts)(args), **case.consts)
    return k.last_backend


def ref_impl(group_m: int = 0) -> Impl:
    def make(case):
        launch = triton_ref.LAUNCHERS[case.example or case.kernel]
        kw = dict(case.consts, num_warps=case.num_warps, num_stages=case.num_stages)
        if group_m:
            kw["GROUP_M"] = group_m
        extend = with_workspace(case, case.consts)
        return lambda args: launch(*extend(args), **kw)
    if group_m:  # the tutorial's grouped order, same tiles: how much tle's plain 2-D grid order costs
        return Impl("ref_grouped", make, lambda c: c.kernel == "matmul" and c.group != "decode")
    return Impl("triton_ref", make)


def torch_impl() -> Impl:
    def make(case):
        k = case.kernel
        n = case.shape[1] if len(case.shape) > 1 else None
        if k == "vector_add":
            return lambda a: torch.add(a[0], a[1], out=a[2])
        if k == "softmax":
            return lambda a: torch.softmax(a[0], dim=-1)
        if k == "layernorm":
            return lambda a: F.layer_norm(a[0], (n,), a[1], a[2], a[4])
        if k == "rmsnorm":
            if hasattr(F, "rms_norm"):
                return lambda a: F.rms_norm(a[0], (n,), a[1], a[3])

            def formula(a):
                xf = a[0].float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + a[3]) * a[1].float()).to(a[0].dtype)
            return formula
        if k == "swiglu":
            return lambda a: torch.mul(F.silu(a[0]), a[1], out=a[2])
        if k == "matmul":
            return lambda a: torch.matmul(a[0], a[1], out=a[2])
        if k == "cumsum":
            return lambda a: torch.cumsum(a[0], dim=1, out=a[1])
        raise KeyError(k)
    return Impl("torch", make)


# tle:tuned: examples/matmul_persistent.tle (one program per SM walking the tiles in grouped order, the pipeline
# depth a constant, TMA on or off) tuned through tle's tuning database over both paths, for the large square
# matmuls issue 5 holds to 0.95x cuBLAS "tuned". The first call of a shape bucket tunes (its time is the cell's
# first-call time); later runs read the database (TLE_TUNE_DB, default under TLE_CACHE_DIR or ~/.cache/tle).
TUNED_EXAMPLE = "matmul_persistent"
TUNE_SPACE = {"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [32, 64, 128], "STAGES": [3, 4], "GROUP_M": [8],
              "TMA": [True, False], "num_warps": [4, 8], "backend": ["triton", "tileir"]}
TUNED: dict = {}  # case key -> tuning.TuneResult, for the report


def tuned_applies(case) -> bool:
    return case.kernel == "matmul" and case.group != "decode" and min(case.shape) >= 4096


def tuned_impl(backends, budget_s: float) -> Impl:
    def make(case):
        from tle.runtime.tuning import TuneSpace
        k = getattr(tle_module(TUNED_EXAMPLE), TUNED_EXAMPLE)
        if k.tune_space is None:
            space = {**TUNE_SPACE, "backend": [b for b in TUNE_SPACE["backend"] if b in backends]}
            k.tune_space = TuneSpace(space, budget_s=budget_s)
        sms = torch.cuda.get_device_properties(0).multi_processor_count

        def grid(meta):  # persistent: at most one program per SM
            return (min(sms, cdiv(meta["M"], meta["BM"]) * cdiv(meta["N"], meta["BN"])),)

        def run(args):
            if case.key not in TUNED:
                TUNED[case.key] = k.tune(grid, *args)
            k[grid](*args)
        return run
    return Impl("tle:tuned", make, tuned_applies)


def tuned_table() -> str:
    lines = [f"tle:tuned (examples/{TUNED_EXAMPLE}.tle through the tuning database; space "
             + ", ".join(f"{k}={'/'.join(map(str, v))}" for k, v in TUNE_SPACE.items()) + "):"]
    for key, r in TUNED.items():
        st = r.stats or {}
        how = "from the database" if r.from_db else (
            f"tuned in {st.get('seconds', 0):.0f} s: {st.get('candidates')} candidates, {st.get('compiled')} "
            f"compiled, {st.get('timed')} timed, {st.get('failed', 0)} failed")
        default = f", default {r.default_time_s * 1e6:.0f} us" if r.default_time_s else ""
        lines.append(f"  {key:26s} {', '.join(f'{k}={v}' for k, v in r.config.items())}: "
                     f"{r.time_s * 1e6:.0f} us{default} ({how})")
    return "\n".join(lines)


def build_impls(backends, dry: bool, tune: bool = False, tune_budget_s: float = 45) -> list[Impl]:
    tle_backends = ["interp"] if dry else backends
    tuned = [tuned_impl(backends, tune_budget_s)] if tune and not dry and backends else []
    return [tle_impl(b) for b in tle_backends] + tuned + [ref_impl(), ref_impl(group_m=8), torch_impl()]


# ==== correctness and timing ======================================================================================

def rel_err(got, want) -> float:
    """||got - want|| / ||want|| in float64 on the tensors' device; an unwritten (NaN) element gives inf."""
    if tuple(got.shape) != tuple(want.shape):
        return float("inf")
    g, w = got.detach().double(), want.detach().to(got.device).double()
    if torch.isnan(g).any():
        return float("inf")
    return ((g - w).norm() / w.norm().clamp_min(1e-30)).item()


def sync(device) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


_SLEEP = {"cycles_per_us": None}


def _cycles_per_us() -> float:
    """GPU clock cycles per microsecond for torch.cuda._sleep, measured once after a 20 M-cycle spin has raised
    the clock. Never below 1000 (1 GHz): were the clock idle during the measurement, later spins at full clock
    would be shorter than asked and could fail to cover the host's enqueueing."""
    if _SLEEP["cycles_per_us"] is None:
        torch.cuda._sleep(20_000_000)
        cycles = 4_000_000
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        torch.cuda.synchronize()
        _SLEEP["cycles_per_us"] = max(1000.0, cycles / max(1e-3, s.elapsed_time(e) * 1e3))
    return _SLEEP["cycles_per_us"]


def sample_stats(ts: list) -> dict:
    """Median, 20th and 80th percentile (us) of sorted per-launch samples."""
    q = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))]  # noqa: E731
    return {"us": statistics.median(ts), "p20_us": q(0.2), "p80_us": q(0.8)}


def time_events(run, nsets: int, warmup_ms: float, rep_ms: float) -> dict:
    """Median GPU time (us) of run(i), i cycling over nsets input sets.

    Each rep: a spin kernel (torch.cuda._sleep) long enough to cover the host's enqueueing, then a start event,
    run(i), an end event. So the events bracket GPU work only (no launch gaps, no host overhead), and no L2 flush
    is needed: the rotation keeps every set out of L2 by the time it comes round again."""
    torch.cuda.synchronize()
    run(0)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = perf()
    s.record()
    for i in range(5):
        run(i % nsets)
    e.record()
    host_us = (perf() - t0) / 5 * 1e6
    torch.cuda.synchronize()
    est_ms = max(s.elapsed_time(e) / 5, 1e-3)
    sleep_us = max(20.0, 3 * host_us + 10)
    cycles = int(sleep_us * _cycles_per_us())
    n_warm = int(min(max(warmup_ms / est_ms, 2), 200))
    n_rep = int(min(max(rep_ms / (est_ms + sleep_us * 1e-3), 10), 1000))
    for i in range(n_warm):
        run(i % nsets)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for r in range(n_rep):
        torch.cuda._sleep(cycles)
        starts[r].record()
        run(r % nsets)
        ends[r].record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends))
    return {**sample_stats(ts), "reps": n_rep, "sets": nsets, "host_us": host_us, "samples": ts}


def probe_sets(nbytes: int, most: int = 8) -> int:
    """How many input sets of `nbytes` a GPU probe rotates through: enough that Context.rotate_bytes (4x an H200's
    L2) separate two uses of one set, 2 to `most`."""
    return max(2, min(most, Context.rotate_bytes // max(1, nbytes) + 1))


def checked_us(run, nsets: int, out, want, reset=None, timings: int = 1) -> float | None:
    """A probe's check, then its time: reset() (default: `out` filled with NaN), run(0), and `out` against `want`
    (max |out - want| / max |want| under 1e-2; a NaN fails); then the mean of `timings` medians of
    time_events(run, nsets, 30, 200). None, and nothing timed, where the check fails."""
    (reset or (lambda: out.fill_(float("nan"))))()
    run(0)
    torch.cuda.synchronize()
    err = ((out.float() - want).abs().max() / want.abs().max()).item()
    if not err < 1e-2:
        return None
    return sum(time_events(run, nsets, 30, 200)["us"] for _ in range(timings)) / timings


def time_graph(run, nsets: int, warmup_ms: float, rep_ms: float) -> dict:
    """Median GPU time (us) per launch of run(i), from replays of one CUDA graph that holds `per` launches back to
    back (i cycling over the nsets input sets), with events around each replay.

    This is how a serving loop that captures its decode step in a graph runs these kernels, and the method the
    device's METHOD.md gives for small launches: each launch's start-up overlaps the previous one's tail, which
    events around single launches (time_events) count in full, about 3.5 us on an H200. The graph holds at least
    200 us of work, so its own launch is amortised; samples are replay time / per."""
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):  # warm-up on the capture stream: lazy initialisation stays out of the graph
        for i in range(3):
            run(i % nsets)
    cur.wait_stream(side)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(2 * nsets):
        run(i % nsets)
    e.record()
    torch.cuda.synchronize()
    est_us = max(s.elapsed_time(e) * 1e3 / (2 * nsets), 1.0)
    per = nsets * max(1, min(64, int(200 / (est_us * nsets)) + 1))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(per):
            run(j % nsets)
    replay_ms = est_us * per * 1e-3
    for _ in range(int(min(max(warmup_ms / replay_ms, 2), 50))):
        graph.replay()
    n_rep = int(min(max(rep_ms / replay_ms, 10), 500))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for r in range(n_rep):
        starts[r].record()
        graph.replay()
        ends[r].record()
    torch.cuda.synchronize()
    del graph
    ts = sorted(a.elapsed_time(b) * 1e3 / per for a, b in zip(starts, ends))
    return {**sample_stats(ts), "reps": n_rep, "sets": nsets, "per_graph": per, "samples": ts}


def time_do_bench(run, nsets: int, warmup_ms: float, rep_ms: float) -> dict:
    counter = [0]

    def fn():
        run(counter[0] % nsets)
        counter[0] += 1
    q = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    return {"us": q[0] * 1e3, "p20_us": q[1] * 1e3, "p80_us": q[2] * 1e3, "sets": nsets}


TIMERS = {"events": time_events, "graph": time_graph, "do_bench": time_do_bench}  # --timer: f(run, nsets, warmup, rep)


@dataclass
class Context:
    device: str
    timing: bool
    timer: str = "events"
    warmup_ms: float = 10.0
    rep_ms: float = 60.0
    rotate_bytes: int = 240 << 20  # rotate inputs until this many bytes separate two uses of one set (4x L2)
    max_sets: int = 64
    rounds: int = 4  # each implementation is timed in this many rounds, interleaved with the others (run_case)
    copy_Bps: float | None = None
    empty_us: dict = field(default_factory=dict)  # timer -> an empty launch timed so in this harness (decode bound)
    mm_flops: float | None = None

    def time(self, run, nsets, share: float = 1.0, timer: str | None = None):
        """run timed by `timer` (default: this run's --timer) for share x --rep-ms."""
        return TIMERS[timer or self.timer](run, nsets, self.warmup_ms, self.rep_ms * share)

    def time_ceiling(self, run):
        """The ceilings are single long launches, where a graph saves nothing; and a device-to-device copy_
        captured in a graph becomes a memcpy node on the copy engines (2.8 TB/s on the H200, not 4.2)."""
        return self.time(run, 1, timer="do_bench" if self.timer == "do_bench" else "events")


def combine_rounds(rounds: list) -> dict:
    """One implementation's timings from interleaved rounds: the median over every sample, and `spread`, how far
    its round medians lie apart relative to that median. The GPU's clock drifts with heat and power over a run; the
    implementations of a case are timed round-robin so they see the same drift, and a ratio between two of them
    smaller than their spread is noise (device METHOD.md: time the same version twice)."""
    out = dict(rounds[-1])
    samples = sorted(t for r in rounds for t in r.get("samples", []))
    if samples:
        out.update(sample_stats(samples), reps=len(samples))
    else:  # do_bench gives no samples: the median of the round medians
        out["us"] = statistics.median(r["us"] for r in rounds)
    meds = [r["us"] for r in rounds]
    out["spread"] = (max(meds) - min(meds)) / out["us"] if out["us"] else 0.0
    out["round_us"] = meds
    out.pop("samples", None)
    return out


def _outputs(result, outputs, args):
    if result is None:
        return outputs(args)
    if isinstance(result, torch.Tensor):
        return [result]
    return list(result)


def _cuda_alive() -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


class FatalCudaError(RuntimeError):
    pass


def run_case(case: Case, impls: list[Impl], ctx: Context) -> dict:
    rec = {"kernel": case.kernel, "shape": list(case.shape), "dtype": case.dtype, "group": case.group,
           "config": {**case.consts, "num_warps": case.num_warps, "num_stages": case.num_stages,
                      **({"example": case.example, "per_backend": case.backend_consts} if case.example else {})},
           "bytes": case.bytes, "flops": case.flops, "impls": {}}
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))  # fresh random inputs every run
    args, reference, outputs = case.make(ctx.device)
    want = [w.float() for w in reference(args)]
    tol = tolerance(case.kernel, DTYPES[case.dtype])
    rec["tolerance"] = tol
    timed = {}
    for impl in impls:
        if not impl.wanted(case):
            continue
        r = rec["impls"][impl.name] = {}
        if impl.name in ("triton_ref", "ref_grouped") and os.environ.get("TRITON_INTERPRET") == "1" \
                and (case.kernel, str(DTYPES[case.dtype])[6:]) in triton_ref.INTERPRETER_UNSUPPORTED:
            r.update(status="skip", error="Triton's interpreter does bf16 add/dot on raw bits")
            continue
        try:
            fn = impl.make(case)
            for o in outputs(args):
                o.fill_(float("nan"))
            t0 = perf()
            result = fn(args)
            sync(ctx.device)
            r["first_call_s"] = perf() - t0  # includes compiling and loading
            errs = [rel_err(g, w) for g, w in zip(_outputs(result, outputs, args), want)]
            r["rel_err"] = max(errs) if errs else float("inf")
            r["status"] = "ok" if r["rel_err"] <= tol else "FAIL"
            if r["status"] == "ok":
                timed[impl.name] = fn
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            r.update(status="ERR", error=first_line(exc), detail=traceback.format_exc(limit=3)[-2000:])
            if ctx.device == "cuda" and not _cuda_alive():
                raise FatalCudaError(f"{impl.name} on {case.key}: {first_line(exc)}") from exc
    del want
    if any(n.startswith("tle:") and r.get("status") == "ok" for n, r in rec["impls"].items()):
        try:
            rec["auto"] = auto_path(case, args)
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            rec["auto_error"] = first_line(exc)
    if ctx.timing and timed:
        nsets = 1 if case.bytes >= ctx.rotate_bytes else min(ctx.max_sets, cdiv(ctx.rotate_bytes, case.bytes))
        sets = [args] + [case.make(ctx.device)[0] for _ in range(nsets - 1)]

        def timing_failed(name, message):
            rec["impls"][name].update(status="ERR", error="timing: " + message)
        results = timed_rounds(case, timed, sets, nsets, ctx, None, timing_failed)
        for name, r in results.items():
            rec["impls"][name].update(r)
            _rates(case, rec["impls"][name], ctx)
        if case.group == "decode" and ctx.device == "cuda":
            rec.update(decode_floors(sets, nsets, ctx))
            if ctx.timer == "events":
                # A decode step is usually replayed from a CUDA graph (serving loops capture it), and METHOD.md
                # times small launches that way: the same implementations and floors again, as graph replays.
                def graph_failed(name, message):
                    rec["impls"][name]["graph_error"] = message
                graphed = timed_rounds(case, {n: timed[n] for n in results}, sets, nsets, ctx, "graph", graph_failed)
                rec["graph"] = {"impls": {name: {k: g[k] for k in ("us", "p20_us", "p80_us", "spread", "per_graph")}
                                          for name, g in graphed.items()},
                                **decode_floors(sets, nsets, ctx, "graph")}
        del sets
    del args
    return rec


def rotated(names: list, r: int) -> list:
    """Round r's order: `names` starting r places later, so that over len(names) rounds each name is once in each
    place and none always follows the same one (timed_rounds, launch_overhead)."""
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def timed_rounds(case: Case, timed: dict, sets, nsets: int, ctx: Context, timer: str | None, failed) -> dict:
    """{name: combine_rounds(...)} of each implementation in `timed` (name -> fn(args)), timed by `timer` (default:
    --timer) in ctx.rounds round-robin rounds, so that every implementation sees the same clock drift. One that
    raises is dropped and reported to failed(name, message); a dead CUDA context stops the run."""
    rounds: dict = {name: [] for name in timed}
    for r in range(max(1, ctx.rounds)):  # ctx.rounds = 4: each of a row-kernel case's four columns once first
        for name in rotated(list(timed), r):
            fn = timed[name]
            if name not in rounds:
                continue
            try:
                rounds[name].append(ctx.time(lambda i: fn(sets[i]), nsets, 1 / max(1, ctx.rounds), timer))
            except Exception as exc:  # noqa: BLE001
                failed(name, first_line(exc))
                del rounds[name]
                if not _cuda_alive():
                    raise FatalCudaError(f"{name} on {case.key}: {first_line(exc)}") from exc
    return {name: combine_rounds(rs) for name, rs in rounds.items()}


def decode_floors(sets, nsets: int, ctx: Context, timer: str | None = None) -> dict:
    """The floors of a decode matmul under one timer (default: --timer).

    weight_read_us: reading its weight once and nothing else (launch and ramp-up included), the fastest of a few
    read kernels; torch / that is the most any kernel we know could beat cuBLAS by here. hbm_bound_us, a bound no
    kernel can pass: an empty launch under the same timer plus the weight at the HBM's datasheet rate (H200:
    4.8 TB/s). The empty launch is timed once per run and timer (ctx.empty_us)."""
    out = {}
    timer = timer or ctx.timer
    try:
        partial = triton_ref.weight_read_out(sets[0][1])
        out["weight_read_us"] = min(
            ctx.time(lambda i: triton_ref.weight_read(sets[i][1], partial, BLOCK=b, ITERS=it, num_warps=w),
                     nsets, 1 / 3, timer)["us"] for b, it, w in triton_ref.WEIGHT_READ_CONFIGS)
        peak = HBM_PEAK_BPS.get(torch.cuda.get_device_name())
        if peak:
            if timer not in ctx.empty_us:
                ctx.empty_us[timer] = ctx.time(lambda i: triton_ref.empty(partial), 1, timer=timer)["us"]
            wbytes = sets[0][1].numel() * sets[0][1].element_size()
            out.update(empty_us=ctx.empty_us[timer], hbm_peak_Bps=peak,
                       hbm_bound_us=ctx.empty_us[timer] + wbytes / peak * 1e6)
    except Exception as exc:  # noqa: BLE001
        out["weight_read_error"] = first_line(exc)
    return out


def _rates(case: Case, r: dict, ctx: Context) -> None:
    sec = r["us"] * 1e-6
    r["GBps"] = case.bytes / sec / 1e9
    if case.flops:
        r["TFLOPs"] = case.flops / sec / 1e12
    if ctx.copy_Bps and ctx.mm_flops:
        floor = max(case.bytes / ctx.copy_Bps, case.flops / ctx.mm_flops)
        r["roof"] = floor / sec  # fraction of what the measured ceilings allow
        r["bound"] = "flops" if case.flops / ctx.mm_flops > case.bytes / ctx.copy_Bps else "bytes"


def _copy_ceiling(ctx: Context, n: int) -> dict:
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    t = ctx.time_ceiling(lambda i: dst.copy_(src))
    assert torch.equal(dst, src), "copy ceiling: the copy is wrong"
    return {"copy_GBps": 2 * n * 4 / (t["us"] * 1e-6) / 1e9, "copy_us": t["us"], "copy_bytes": 2 * n * 4}


def _matmul_ceiling(ctx: Context, s: int) -> dict:
    a = torch.randn(s, s, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(s, s, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(s, s, device="cuda", dtype=torch.bfloat16)
    t = ctx.time_ceiling(lambda i: torch.matmul(a, b, out=c))
    err = rel_err(c[:128, :128], a[:128].float() @ b[:, :128].float())
    return {"matmul_bf16_TFLOPs": 2 * s ** 3 / (t["us"] * 1e-6) / 1e12, "matmul_us": t["us"], "matmul_rel_err": err}


def measure_ceilings(ctx: Context) -> dict:
    """The two ceilings, measured now: a 1 GiB device-to-device copy (bytes read + written) and cuBLAS bf16 8192^3
    on random data."""
    out = {**_copy_ceiling(ctx, 1 << 28), **_matmul_ceiling(ctx, 8192)}
    torch.cuda.empty_cache()
    ctx.copy_Bps = out["copy_GBps"] * 1e9
    ctx.mm_flops = out["matmul_bf16_TFLOPs"] * 1e12
    return out


# ==== launch overhead (issue 5) ===================================================================================

LAUNCH_ROUNDS = 15  # launch_overhead's rounds (its docstring says why 15); --quick takes 3


def launch_overhead(backends, n_launch=10_000, rounds=LAUNCH_ROUNDS) -> dict:
    """Host time per launch of a one-element vector_add (grid 1), over n_launch launches, median of rounds. Every
    variant is checked first; then the rounds go round-robin over the variants, each round starting one variant
    later, so that all of them see the same drift of the host's clocks and none is always measured first. 15
    rounds, not 5: on the H200's host (twenty-second session) a run of 5 put the full call's median at 7.14 us
    against a minimum of 4.85 and the raw launch's 4.44, and in another run the runtime layer alone (a part of the
    full call) measured 7.87 against the full call's 6.11: stalls of the host that last whole rounds."""
    from cuda.bindings import driver as cu
    x, y = torch.randn(1, device="cuda"), torch.randn(1, device="cuda")
    out = torch.empty(1, device="cuda")
    res, variants = {}, {}

    def one_round(fn):
        torch.cuda.synchronize()
        t0 = perf()
        for _ in range(n_launch):
            fn()
        t1 = perf()
        torch.cuda.synchronize()
        return (t1 - t0) / n_launch * 1e6, (perf() - t0) / n_launch * 1e6

    def checked(name, fn):
        try:
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            if not torch.allclose(out, x + y):
                res[name] = {"error": "wrong result"}
                return
            res[name] = {}
            variants[name] = fn
        except Exception as exc:  # noqa: BLE001
            res[name] = {"error": first_line(exc)}

    kern = triton_ref.vector_add_kernel
    checked("triton launcher (jit kernel[grid](...))", lambda: kern[(1,)](x, y, out, 1, BLOCK=1024))
    for b in backends:
        try:
            k = tle_module("vector_add").vector_add
        except Exception as exc:  # noqa: BLE001
            res[f"tle:{b} mod.vector_add[grid](...)"] = {"error": first_line(exc)}
            continue
        # Default arguments bind this iteration's k and b: the variants run after the loop.
        checked(f"tle:{b} mod.vector_add[grid](...)", lambda k=k, b=b: k[(1,)](x, y, out, backend=b))
        # kernel[grid] launches in C (runtime/fastlaunch.py) where it can; kernel.launch is the Python path.
        res[f"tle:{b} mod.vector_add[grid](...)"]["c_launcher"] = any(  # C plans are kept per grid
            isinstance(key, tuple) and b in key for table in k._fast.values() for key in table)  # key: backend=b
        checked(f"tle:{b} kernel.launch(grid, ...) (Python path)",
                lambda k=k, b=b: k.launch((1,), x, y, out, backend=b))
        try:  # the runtime layer alone, and a bare cuLaunchKernel of the same cubin with pre-packed arguments
            runner = next(e for key, e in k._entries.items() if b in key).runner
            grid, ordered = runner_call(k, runner, (1,), (x, y, out), {"backend": b})
            checked(f"tle:{b} LoadedKernel.launch (runtime only)",
                    lambda runner=runner, grid=grid, ordered=ordered: runner.launch(grid, ordered))
            runner.launch(grid, ordered)  # leaves the arguments packed in its argv
            stream = torch.cuda.current_stream().cuda_stream
            f, (bx, by, bz), shared, argv = runner._function, runner._block, runner._shared, runner._argv_address
            launch_kernel = cu.cuLaunchKernel
            err, = launch_kernel(f, 1, 1, 1, bx, by, bz, shared, stream, argv, 0)
            if err:
                raise RuntimeError(f"cuLaunchKernel: {err}")
            checked(f"raw cuLaunchKernel ({b} cubin, pre-packed)",
                    lambda f=f, bx=bx, by=by, bz=bz, shared=shared, argv=argv:
                    launch_kernel(f, 1, 1, 1, bx, by, bz, shared, stream, argv, 0))
        except Exception as exc:  # noqa: BLE001
            res[f"tle:{b} LoadedKernel.launch (runtime only)"] = {"error": first_line(exc)}
    names = list(variants)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in rotated(names, r):
            if "error" in res[name]:
                continue
            try:
                times[name].append(one_round(variants[name]))
            except Exception as exc:  # noqa: BLE001
                res[name] = {"error": first_line(exc)}
    for name in names:
        if "error" in res[name]:
            continue
        hosts = [h for h, _ in times[name]]
        res[name].update(host_us=statistics.median(hosts), host_min_us=min(hosts),
                         wall_us=statistics.median(w for _, w in times[name]))
    return res


def runner_call(k, runner, grid, args, kwargs) -> tuple:
    """(grid, ordered ABI arguments) that tle kernel k's plan hands its LoadedKernel `runner` for one launch
    k.launch(grid, *args, **kwargs), caught by a spy on runner.launch: what the runtime layer is timed with alone."""
    seen = {}
    original = runner.launch

    def spy(g, a, stream=None):
        seen.setdefault("call", (g, list(a)))
        return original(g, a, stream)
    runner.launch = spy
    try:
        k.launch(grid, *args, **kwargs)  # the Python path, which calls runner.launch
    finally:
        del runner.launch
    return seen["call"]


# ==== cold compile and warm start (issue 5), in fresh processes ===================================================

STARTUP_CASES = {
    "vector_add": lambda: vector_add_case(1 << 20),
    "softmax": lambda: row_case("softmax", 1024, 1024, "f32"),
    "layernorm": lambda: row_case("layernorm", 1024, 1024, "f32"),
    "rmsnorm": lambda: row_case("rmsnorm", 1024, 1024, "f32"),
    "swiglu": lambda: swiglu_case(1024, 1024, "bf16"),
    "matmul": lambda: matmul_case(1024, 1024, 1024, "f16"),
    "cumsum": lambda: row_case("cumsum", 1024, 1024, "f32"),
}

WARMUP_TLE = """kernel warm_copy<BLOCK: int = 256, T: dtype = f32>(x: tensor<T>[N], y: tensor<T>[N]) {
    let i = program_id(0)
    store(y, load(x, tile=[BLOCK], at=[i]), at=[i])
}
"""


@triton.jit
def warm_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def child_startup(impl: str, kernels: list[str]) -> dict:
    """In a fresh process: time from nothing in memory to the first result of each kernel (compile or disk-cache
    load, module load, launch, synchronize). A warm-up kernel that is not measured takes the one-time costs first
    (imports inside the compilers, MLIR and Triton contexts, CUDA driver bindings)."""
    res = {"impl": impl, "kernels": {}}
    t = perf()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    res["cuda_init_s"] = perf() - t
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    t = perf()
    try:
        if impl.startswith("tle:"):
            import tle
            res["import_s"] = perf() - t
            t = perf()
            tle.compile(WARMUP_TLE).warm_copy[(16,)](x, y, backend=impl[4:])
        else:
            res["import_s"] = 0.0  # triton and triton_ref are imported with this script
            warm_copy_kernel[(16,)](x, y, 4096, BLOCK=256)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        res["error"] = "warm-up kernel: " + first_line(exc)
        return res
    res["warmup_first_s"] = perf() - t
    res["warmup_ok"] = bool(torch.equal(x, y))
    for name in kernels:
        case = STARTUP_CASES[name]()
        args, reference, outputs = case.make("cuda")
        want = [w.float() for w in reference(args)]
        torch.cuda.synchronize()
        r = res["kernels"][name] = {"config": case.config_text(), "shape": case.label, "dtype": case.dtype}
        try:
            t = perf()
            if impl.startswith("tle:"):
                import tle
                kern = getattr(tle.compile(os.path.join(EXAMPLES, f"{name}.tle")), name)
                kw = dict(case.consts, backend=impl[4:])
                for opt in TLE_OPTIONS.get(impl[4:], ()):
                    kw[opt] = getattr(case, opt)
                grid = case.grid()

                def fn():
                    kern[grid](*args, **kw)
            else:
                launch = triton_ref.LAUNCHERS[name]
                kw = dict(case.consts, num_warps=case.num_warps, num_stages=case.num_stages)

                def fn():
                    launch(*args, **kw)
            fn()
            torch.cuda.synchronize()
            r["first_s"] = perf() - t
            t = perf()
            fn()
            torch.cuda.synchronize()
            r["second_s"] = perf() - t
            r["rel_err"] = max(rel_err(g, w) for g, w in zip(outputs(args), want))
            r["ok"] = r["rel_err"] <= tolerance(name, DTYPES[case.dtype])
        except Exception as exc:  # noqa: BLE001
            r["error"] = first_line(exc)
    return res


def _run_child(child: str, impl: str, kernels: list[str], env: dict, timeout: float = 240) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", child, "--impl", impl, "--kernels", ",".join(kernels)]
    cmd += ["--quick"] if ARGS.quick else []
    cmd += ["--decode"] if ARGS.decode else []
    t = perf()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("CHILD_JSON "):
            res = json.loads(line[len("CHILD_JSON "):])
            res["process_s"] = perf() - t
            return res
    return {"error": f"child exited {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"}


STARTUP_REPEATS = 5  # startup_figures' cold processes per implementation (its docstring says why 5)


def startup_figures(backends, kernels, repeats: int = STARTUP_REPEATS) -> dict:
    """Cold: empty tle and Triton caches. Warm: a fresh process over the caches a cold one filled.

    A cold compile of a small kernel takes 0.06-0.10 s, and one process's figure moved by a fifth from one run to the
    next (the reference's cumsum read 0.080 s in one full run and 0.062 in another, tle's 0.086 and 0.092). So each
    implementation gets `repeats` cold processes, each over its own empty caches, run in a rotating order with the
    others' so that a slow spell of the host falls on all of them, and each kernel's cold figure is the median of
    its runs. The warm process runs once, over the last cold one's caches.

    Five, not three: in the twenty-third session one process each of tle's Triton path and the reference, three
    times over, first-compiled cumsum in 54.8, 70.0, 70.5 ms (tle) and 60.1, 51.9, 68.3 (reference), while Triton's
    stages took the same time for both on the CPU (50.6 against 54.5 ms, median of 7): a median of three still
    flips with the host."""
    root = tempfile.mkdtemp(prefix="tle-bench-")
    base = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TLE_CACHE")}
    impls = [f"tle:{b}" for b in backends] + ["triton_ref"]

    def env(impl, r):
        tag = os.path.join(root, f"{impl.replace(':', '_')}_{r}")
        return dict(base, TRITON_CACHE_DIR=os.path.join(tag, "triton"), TLE_CACHE_DIR=os.path.join(tag, "tle"),
                    PYTHONUNBUFFERED="1")
    colds = {impl: [] for impl in impls}
    for r in range(repeats):
        for impl in rotated(impls, r):
            colds[impl].append(_run_child("startup", impl, kernels, env(impl, r)))
    return {impl: {"cold": median_run(colds[impl]), "cold_runs": len(colds[impl]),
                   "warm": _run_child("startup", impl, kernels, env(impl, repeats - 1))} for impl in impls}


def median_run(runs: list) -> dict:
    """One child's result from several: per kernel the run with the median first_s (so its other fields belong to
    that same run), the process-wide times as medians. A run that failed as a whole counts only if all did."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out = dict(ok[0])
    for key in ("cuda_init_s", "import_s", "warmup_first_s", "process_s"):
        vals = [r[key] for r in ok if key in r]
        if vals:
            out[key] = statistics.median(vals)
    out["kernels"] = {}
    for name in ok[0].get("kernels", {}):
        timed = sorted((r["kernels"][name] for r in ok if "first_s" in r["kernels"].get(name, {})),
                       key=lambda k: k["first_s"])
        out["kernels"][name] = timed[(len(timed) - 1) // 2] if timed else ok[0]["kernels"][name]
    return out


# ==== --dry-run --compile: every configuration to an sm_90 cubin, on the CPU ========================================

def _empty_args(case: Case):
    """CPU tensors of the benchmark's full shapes (torch.empty: nothing touched), in tle's argument order."""
    dt = DTYPES[case.dtype]
    e = lambda *s: torch.empty(*s, dtype=dt)  # noqa: E731
    s = case.shape
    return {"vector_add": lambda: [e(s[0]), e(s[0]), e(s[0])],
            "softmax": lambda: [e(*s), e(*s)],
            "layernorm": lambda: [e(*s), e(s[1]), e(s[1]), e(*s), 1e-5],
            "rmsnorm": lambda: [e(*s), e(s[1]), e(*s), 1e-6],
            "swiglu": lambda: [e(*s), e(*s), e(*s)],
            "matmul": lambda: [e(s[0], s[2]), e(s[2], s[1]), e(s[0], s[1])],
            "cumsum": lambda: [e(*s), e(*s)]}[case.kernel]()


def _tle_compile_for(case: Case, args, arch="sm_90"):
    """Compile the tle kernel as a launch with these tensors and the case's grid would (same specialisation, grid
    facts included), without launching."""
    from tle.check import check_kernel
    from tle.compiler import compile_kernel
    name = case.example or case.kernel
    k = getattr(tle_module(name), name)
    values, constants, _ = k._bind(tuple(args), dict(case.consts))
    kernel = check_kernel(k.program, k.name, constants)
    flat, _, _ = k._check_args(kernel, values)
    spec = k._spec(kernel, flat, k._concrete_grid(case.grid(case.consts)))
    return compile_kernel(k.program, k.name, constants, spec, backend="triton", arch=arch,
                          num_warps=case.num_warps, num_stages=case.num_stages)


def _access_bytes(ptx: str, op: str) -> int:
    """The widest global load or store in the PTX, in bytes per thread (16 = 128-bit vector accesses)."""
    widths = [int(v or 1) * int(bits) // 8 for v, bits in
              re.findall(rf"{op}\.global(?:\.[a-z0-9_:]+)*?(?:\.v(\d))?\.[bfsu](\d+)\s", ptx)]
    return max(widths, default=0)


def child_compile(quick: bool, only) -> dict:
    rows = {}
    for case in build_cases(quick, only):
        key = (case.kernel, case.dtype, case.config_text())
        if key in rows:
            continue
        args = with_workspace(case, case.consts)(_empty_args(case))
        row = rows[key] = {"kernel": case.kernel, "dtype": case.dtype, "config": case.config_text(),
                           "shape": case.label}
        try:
            t = perf()
            c = _tle_compile_for(case, args)
            row["tle_s"], row["tle_smem"] = perf() - t, c.binary.shared_mem
            row["tle_threads"] = c.binary.num_threads
            ptx = c.binary.stages.get("ptx", "")
            row["tle_wgmma"] = "wgmma" in ptx
            row["tle_ldst"] = f"{_access_bytes(ptx, 'ld')}/{_access_bytes(ptx, 'st')}"
        except Exception as exc:  # noqa: BLE001
            row["tle_error"] = first_line(exc)
        variants = [("ref", {})] + ([("grp", {"GROUP_M": 8})] if case.kernel == "matmul" and not case.group else [])
        for tag, extra in variants:
            try:
                t = perf()
                c = triton_ref.compile_for_target(case.example or case.kernel, *args, **case.consts, **extra,
                                                  num_warps=case.num_warps, num_stages=case.num_stages)
                row[f"{tag}_s"], row[f"{tag}_smem"] = perf() - t, c.metadata.shared
                row[f"{tag}_wgmma"] = "wgmma" in c.asm["ptx"]
                row[f"{tag}_ldst"] = f"{_access_bytes(c.asm['ptx'], 'ld')}/{_access_bytes(c.asm['ptx'], 'st')}"
            except Exception as exc:  # noqa: BLE001
                row[f"{tag}_error"] = first_line(exc)
    return {"rows": list(rows.values())}


def print_compile_rows(rows) -> str:
    lines = ["sm_90 compile check on this machine (cold caches; s = seconds to a cubin, smem = shared bytes, "
             "ld/st = widest global load/store per thread in bytes):",
             f"{'kernel':10s} {'dtype':5s} {'config':30s} {'tle s':>6s} {'smem':>7s} {'wgmma':>5s} {'ld/st':>6s} | "
             f"{'ref s':>6s} {'smem':>7s} {'wgmma':>5s} {'ld/st':>6s} | {'grp s':>6s}"]
    for r in rows:
        def cell(tag):
            if f"{tag}_error" in r:
                return f"{'ERR':>6s} {r[tag + '_error'][:40]}"
            if f"{tag}_s" not in r:
                return f"{'':>6s} {'':>7s} {'':>5s} {'':>6s}"
            return (f"{r[tag + '_s']:6.2f} {r[tag + '_smem']:7d} {str(r[tag + '_wgmma'])[0]:>5s} "
                    f"{r.get(tag + '_ldst', ''):>6s}")
        grp = f"{r['grp_s']:6.2f}" if "grp_s" in r else ("ERR" if "grp_error" in r else "")
        lines.append(f"{r['kernel']:10s} {r['dtype']:5s} {r['config']:30s} {cell('tle')} | {cell('ref')} | {grp}")
    return "\n".join(lines)


# ==== chart: matplotlib if importable, else a small PNG writer =====================================================

_FONT = {  # 5x7 glyphs, one int per row, bit 4 = leftmost column
    "0": "0E 11 13 15 19 11 0E", "1": "04 0C 04 04 04 04 0E", "2": "0E 11 01 02 04 08 1F",
    "3": "1F 02 04 02 01 11 0E", "4": "02 06 0A 12 1F 02 02", "5": "1F 10 1E 01 01 11 0E",
    "6": "06 08 10 1E 11 11 0E", "7": "1F 01 02 04 08 08 08", "8": "0E 11 11 0E 11 11 0E",
    "9": "0E 11 11 0F 01 02 0C", "A": "0E 11 11 11 1F 11 11", "B": "1E 11 11 1E 11 11 1E",
    "C": "0E 11 10 10 10 11 0E", "D": "1C 12 11 11 11 12 1C", "E": "1F 10 10 1E 10 10 1F",
    "F": "1F 10 10 1E 10 10 10", "G": "0E 11 10 17 11 11 0F", "H": "11 11 11 1F 11 11 11",
    "I": "0E 04 04 04 04 04 0E", "J": "07 02 02 02 02 12 0C", "K": "11 12 14 18 14 12 11",
    "L": "10 10 10 10 10 10 1F", "M": "11 1B 15 15 11 11 11", "N": "11 11 19 15 13 11 11",
    "O": "0E 11 11 11 11 11 0E", "P": "1E 11 11 1E 10 10 10", "Q": "0E 11 11 11 15 12 0D",
    "R": "1E 11 11 1E 14 12 11", "S": "0F 10 10 0E 01 01 1E", "T": "1F 04 04 04 04 04 04",
    "U": "11 11 11 11 11 11 0E", "V": "11 11 11 11 11 0A 04", "W": "11 11 11 15 15 15 0A",
    "X": "11 11 0A 04 0A 11 11", "Y": "11 11 11 0A 04 04 04", "Z": "1F 01 02 04 08 10 1F",
    "x": "00 00 11 0A 04 0A 11", " ": "00 00 00 00 00 00 00", ".": "00 00 00 00 00 0C 0C",
    "-": "00 00 00 1F 00 00 00", "_": "00 00 00 00 00 00 1F", "%": "18 19 02 04 08 13 03",
    "/": "00 01 02 04 08 10 00", ":": "00 0C 0C 00 0C 0C 00", "(": "02 04 08 08 08 04 02",
    ")": "08 04 02 02 02 04 08", "=": "00 00 1F 00 1F 00 00", "+": "00 04 04 1F 04 04 00",
    ",": "00 00 00 00 0C 04 08", "<": "02 04 08 10 08 04 02", ">": "08 04 02 01 02 04 08",
    "?": "0E 11 01 02 04 00 04",
}
COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (148, 103, 189), (214, 39, 40), (140, 86, 75)]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def rect(self, x0, y0, x1, y1, rgb):
        x0, x1 = max(0, int(x0)), min(self.w, int(x1))
        for y in range(max(0, int(y0)), min(self.h, int(y1))):
            row = y * self.w * 3
            self.px[row + 3 * x0:row + 3 * x1] = bytes(rgb) * max(0, x1 - x0)

    def text(self, x, y, s, rgb=(0, 0, 0), scale=2):
        for i, ch in enumerate(s):
            small_x = ch == "x" and s[i - 1:i].isdigit() and s[i + 1:i + 2].isdigit()  # 8192x4096
            glyph = _FONT["x"] if small_x else (_FONT.get(ch.upper()) or _FONT["?"])
            for r, bits in enumerate(int(b, 16) for b in glyph.split()):
                for c in range(5):
                    if bits & (0x10 >> c):
                        self.rect(x + c * scale, y + r * scale, x + (c + 1) * scale, y + (r + 1) * scale, rgb)
            x += 6 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_chart(path: str, records: list, impl_names: list, title: str) -> str:
    """Horizontal bars: per case, each implementation's time as a fraction of the measured roofline."""
    impl_names = [n for n in impl_names if any("roof" in rec["impls"].get(n, {}) for rec in records)]
    rows = []
    for rec in records:
        label = f"{rec['kernel']} {'x'.join(map(str, rec['shape']))} {rec['dtype']}"
        vals = [(n, rec["impls"].get(n, {}).get("roof")) for n in impl_names]
        if any(v is not None for _, v in vals):
            rows.append((label, vals))
    if not rows:
        return "no chart: nothing was timed"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        n_impl = len(impl_names)
        fig, ax = plt.subplots(figsize=(11, max(4.0, 0.1 * len(rows) * (n_impl + 1) + 1.5)))
        h = 0.8 / n_impl
        for j, name in enumerate(impl_names):
            ys = [i + j * h for i in range(len(rows))]
            xs = [100 * (v[j][1] or 0) for _, v in rows]
            ax.barh(ys, xs, height=h, align="edge", label=name, color=[c / 255 for c in COLORS[j % len(COLORS)]])
        ax.set_yticks([i + 0.4 for i in range(len(rows))])
        ax.set_yticklabels([r[0] for r in rows], fontsize=7)
        ax.set_ylim(-0.2, len(rows))
        ax.invert_yaxis()
        ax.axvline(100, color="k", lw=0.8)
        ax.set_xlabel("% of the roofline from the ceilings measured in this run")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return f"chart (matplotlib): {path}"
    except ImportError:
        pass
    scale, bar_h, gap = 2, 10, 8
    label_w = 14 + 12 * max(len(r[0]) for r in rows)
    bar_w = 600
    top = 60 + 20 * len(impl_names)
    h = top + len(rows) * (len(impl_names) * bar_h + gap) + 30
    cv = Canvas(label_w + bar_w + 120, h)
    cv.text(10, 10, title[:int((label_w + bar_w) / 12)], scale=scale)
    for j, name in enumerate(impl_names):
        cv.rect(10, 40 + 20 * j, 30, 52 + 20 * j, COLORS[j % len(COLORS)])
        cv.text(40, 40 + 20 * j, name, scale=scale)
    vmax = max(1.2, max((v or 0) for _, vals in rows for _, v in vals))
    x0 = label_w
    y = top
    for label, vals in rows:
        cv.text(10, y + (len(vals) * bar_h - 14) // 2, label, scale=scale)
        for j, (_, v) in enumerate(vals):
            if v is not None:
                cv.rect(x0, y, x0 + bar_w * v / vmax, y + bar_h - 1, COLORS[j % len(COLORS)])
                cv.text(x0 + bar_w * v / vmax + 4, y, f"{100 * v:.0f}%", scale=1)
            y += bar_h
        y += gap
    cv.rect(x0 + bar_w / vmax, top - 6, x0 + bar_w / vmax + 1, y, (0, 0, 0))
    cv.text(x0 + bar_w / vmax - 24, top - 20, "100%", scale=scale)
    with open(path, "wb") as f:
        f.write(cv.png())
    return f"chart (built-in PNG writer): {path}"


# ==== tables ======================================================================================================

class Notes:
    """Numbered footnotes for errors, so a repeated error takes one line."""

    def __init__(self):
        self.items: list[str] = []

    def ref(self, text: str) -> int:
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


def _cell(r: dict | None, case_flops: int, notes: Notes, width: int = 20) -> str:
    if not r:
        return f"{'-':>{width}s}"
    st = r.get("status")
    if st == "ERR":
        return f"{'ERR[' + str(notes.ref(r['error'])) + ']':>{width}s}"
    if st == "skip":
        return f"{'skip[' + str(notes.ref(r['error'])) + ']':>{width}s}"
    if st == "FAIL":
        return f"{'FAIL ' + format(r['rel_err'], '.1e'):>{width}s}"
    if "us" not in r:
        return f"{'ok ' + format(r.get('rel_err', 0), '.0e'):>{width}s}"
    rate = f"{r['TFLOPs']:.0f}T" if case_flops and r.get("bound") != "bytes" else f"{r['GBps']:.0f}G"
    roof = f"{100 * r['roof']:3.0f}%" if "roof" in r else "    "
    return f"{r['us']:9.1f} {rate:>6s} {roof}"


def _ratio(rec, a, b) -> str:
    """time(b) / time(a): how many times faster a is than b (> 1: a is faster)."""
    ra, rb = rec["impls"].get(a, {}), rec["impls"].get(b, {})
    if "us" in ra and "us" in rb:
        return f"{rb['us'] / ra['us']:7.2f}"
    return f"{'-':>7s}"


def main_table(records: list, impl_names: list, main_tle: list) -> str:
    notes = Notes()
    def collapsed(n):  # every case that ran it errored: one line below the table instead of a column
        runs = [rec["impls"][n] for rec in records if n in rec["impls"]]
        return bool(runs) and all(r.get("status") in ("ERR", "skip") for r in runs)
    shown = [n for n in impl_names if not collapsed(n)]
    head = f"{'kernel':10s} {'shape':16s} {'dtype':5s} |" + "".join(f"{n:>20s} |" for n in shown)
    ratio_cols = [(t, o) for t in main_tle for o in ("triton_ref", "torch") if t in shown]
    head += "".join(f" {t[4:7] + '/' + ('ref' if o == 'triton_ref' else 'tch'):>7s}" for t, o in ratio_cols)
    head += f" {'auto':>6s}"
    lines = [head, "-" * len(head)]
    for rec in records:
        line = f"{rec['kernel']:10s} {'x'.join(map(str, rec['shape'])):16s} {rec['dtype']:5s} |"
        line += "".join(_cell(rec["impls"].get(n), rec["flops"], notes) + " |" for n in shown)
        line += "".join(" " + _ratio(rec, t, o) for t, o in ratio_cols)
        auto = rec.get("auto") or ("ERR[" + str(notes.ref(rec["auto_error"])) + "]" if "auto_error" in rec else "-")
        line += f" {auto:>6s}"
        lines.append(line)
    for n in [n for n in impl_names if collapsed(n)]:
        errs = {rec["impls"][n].get("error", "") for rec in records if n in rec["impls"]}
        if errs:
            lines.append(f"{n}: no result in any case: " + "; ".join(sorted(errs))[:300])
    lines += [f"[{i}] {t}" for i, t in enumerate(notes.items, 1)]
    return "\n".join(lines)


def decode_graph_table(records: list, impl_names: list) -> str:
    """The decode cases timed again as CUDA-graph replays (run_case), per launch: each implementation, the
    fastest weight read, the physical bound, and the best tle path over torch. Empty when none was."""
    rows = [rec for rec in records if rec.get("graph", {}).get("impls")]
    if not rows:
        return ""
    names = [n for n in impl_names if any(n in rec["graph"]["impls"] for rec in rows)]
    head = (f"{'decode as CUDA-graph replays (us/launch)':40s}" + "".join(f"{n:>12s}" for n in names)
            + f"{'read':>8s}{'bound':>8s}  best tle / torch")
    lines = [head, "-" * len(head)]
    for rec in rows:
        g = rec["graph"]["impls"]
        cells = "".join(f"{g[n]['us']:12.1f}" if n in g else f"{'-':>12s}" for n in names)
        tle = [g[n]["us"] for n in g if n.startswith("tle:")]
        ratio = f"{g['torch']['us'] / min(tle):.2f}x" if tle and "torch" in g else "-"
        floors = "".join(f"{rec['graph'][k]:8.1f}" if rec["graph"].get(k) else f"{'-':>8s}"
                         for k in ("weight_read_us", "hbm_bound_us"))
        lines.append(f"{'matmul ' + 'x'.join(map(str, rec['shape'])) + ' ' + rec['dtype']:40s}{cells}{floors}  {ratio}")
    return "\n".join(lines)


def ratio_below(x: float, goal: float) -> str:
    """A ratio listed as missing `goal`, with as many decimals (2 to 4) as it takes not to print as the goal or
    above: 1.197 missing 1.2 is "1.197x", where "1.20x" would read as met."""
    for digits in (2, 3, 4):
        if float(text := f"{x:.{digits}f}") < goal:
            break
    return text + "x"


def targets_summary(records: list, tle_names: list, ctx: Context) -> str:
    """Issue 5's targets, checked on what this run measured."""
    out = []

    def us(rec, n):
        return rec["impls"].get(n, {}).get("us")

    def best_tle(rec):
        ts = [(us(rec, n), n) for n in tle_names if us(rec, n)]
        return min(ts) if ts else (None, None)

    if "tle:triton" in tle_names:
        pairs = [(rec, us(rec, "tle:triton"), us(rec, "triton_ref")) for rec in records]
        pairs = [(rec, a, b) for rec, a, b in pairs if a and b]

        def noise(rec):  # the larger round-to-round spread of the two, this run's resolution for their ratio
            return max(rec["impls"][n].get("spread", 0.0) for n in ("tle:triton", "triton_ref"))
        below = [(r, b / a) for r, a, b in pairs if b / a < 1.0]
        beyond = [(r, x) for r, x in below if x < 1.0 - noise(r)]

        def name(r, x):
            return f"{r['kernel']} {'x'.join(map(str, r['shape']))} {r['dtype']} {ratio_below(x, 1.0)}"
        out.append(f"tle:triton >= 1.0x triton_ref: {len(pairs) - len(below)}/{len(pairs)} cases; "
                   f"{len(pairs) - len(beyond)}/{len(pairs)} within the run's noise (ratio >= 1 - the two's "
                   "round-to-round spread)"
                   + (f"; below beyond the noise: {', '.join(name(r, x) + f' (spread {noise(r):.1%})' for r, x in beyond[:12])}"
                      if beyond else ""))
    # Not a target of the issue, but what a user who names no backend gets: auto's path against the faster tle path,
    # as the columns time them (the decode cases, whose two columns run different tiles, are left out).
    routed = [(rec, us(rec, "tle:" + rec["auto"]), best_tle(rec)) for rec in records
              if rec.get("auto") and f"tle:{rec['auto']}" in tle_names and not rec["config"].get("per_backend")]
    routed = [(rec, t, best, n) for rec, t, (best, n) in routed if t and best]
    if routed:
        def spread(rec):
            return max(rec["impls"][n].get("spread", 0.0) for n in ("tle:triton", "tle:tileir") if n in rec["impls"])
        slower = [(rec, best / t) for rec, t, best, n in routed if best / t < 1.0 - spread(rec)]
        out.append(f"auto (no backend named) took the faster tle path on {len(routed) - len(slower)}/{len(routed)} "
                   "cases within the run's noise" + (
                       "; slower: " + ", ".join(f"{r['kernel']} {'x'.join(map(str, r['shape']))} {r['dtype']} "
                                               f"{r['auto']} {x:.2f}x" for r, x in slower[:12]) if slower else ""))
    if ctx.copy_Bps:
        big = [rec for rec in records if not rec["flops"] and rec["bytes"] >= (256 << 20)]
        rows = [(rec, best_tle(rec)) for rec in big]
        rows = [(rec, t, n) for rec, (t, n) in rows if t]
        frac = lambda r, n: r["impls"][n]["GBps"] * 1e9 / ctx.copy_Bps  # noqa: E731
        miss = [f"{r['kernel']} {'x'.join(map(str, r['shape']))} {r['dtype']} {100 * frac(r, n):.0f}%"
                for r, t, n in rows if frac(r, n) < 0.9]
        out.append(f"memory-bound, >= 256 MB moved, >= 90% of copy bandwidth ({ctx.copy_Bps / 1e9:.0f} GB/s): "
                   f"{len(rows) - len(miss)}/{len(rows)}" + (f"; below: {', '.join(miss[:12])}" if miss else ""))
    sq = [rec for rec in records if rec["kernel"] == "matmul" and rec["group"] != "decode" and rec["shape"][0] >= 4096]
    dec = [rec for rec in records if rec["kernel"] == "matmul" and rec["group"] == "decode"]
    # Decode twice where the run has both: as timed in the table, and as graph replays (run_case).
    graphed = [{**rec, **rec["graph"]} for rec in dec if rec.get("graph", {}).get("impls")]
    for name, recs, goal in (("matmul 4096-8192 vs cuBLAS, best tle path", sq, 0.95),
                             ("decode matmul (M <= 128) vs cuBLAS, best tle path", dec, 1.2),
                             ("decode matmul (M <= 128) vs cuBLAS, best tle path, timed as CUDA-graph replays",
                              graphed, 1.2)):
        if not recs and recs is graphed:
            continue
        decode = recs is not sq
        rows = [(rec, best_tle(rec)[0], us(rec, "torch")) for rec in recs]
        rows = [(rec, a, b) for rec, a, b in rows if a and b]

        def cap(r, b):  # decode: torch / (reading the weight once), the best ratio this harness allows
            floor, bound = r.get("weight_read_us"), r.get("hbm_bound_us")
            if not floor:
                return ""
            return (f" (torch / weight read = {b / floor:.2f}x; the read alone takes {floor:.1f} us"
                    + (f"; torch / HBM bound = {b / bound:.2f}x" if bound else "") + ")")
        miss = [f"{'x'.join(map(str, r['shape']))} {r['dtype']} {ratio_below(b / a, goal)}{cap(r, b)}"
                for r, a, b in rows if b / a < goal]
        reachable = [r for r, a, b in rows if r.get("weight_read_us") and b / r["weight_read_us"] >= goal]
        possible = [r for r, a, b in rows if r.get("hbm_bound_us") and b / r["hbm_bound_us"] >= goal]
        floors = ""
        if decode and any(r.get("weight_read_us") for r, _, _ in rows):
            floors = f"; {len(reachable)}/{len(rows)} could reach it at all (torch / fastest weight read >= {goal})"
        if decode and any(r.get("hbm_bound_us") for r, _, _ in rows):
            r0 = next(r for r, _, _ in rows if r.get("hbm_bound_us"))
            floors += (f"; {len(possible)}/{len(rows)} within physics (torch / (an empty launch, "
                       f"{r0['empty_us']:.1f} us here, + the weight at {r0['hbm_peak_Bps'] / 1e12:.1f} TB/s) >= {goal})")
        out.append(f"{name} >= {goal}x: {len(rows) - len(miss)}/{len(rows)}" + floors
                   + (f"; below: {', '.join(miss)}" if miss else ""))
    return f"targets (issue 5), on this run (timer: {ctx.timer}):\n  " + "\n  ".join(out)


def launch_table(res: dict) -> str:
    lines = ["host time per launch, one-element vector_add, 10,000 launches x rounds (us; median, min):"]
    raw = [v["host_us"] for k, v in res.items() if k.startswith("raw") and "host_us" in v]
    for name, v in res.items():
        if "error" in v:
            lines.append(f"  {name:52s} n/a: {v['error']}")
        else:
            rel = f"  {v['host_us'] / raw[0]:.2f}x raw" if raw else ""
            lines.append(f"  {name:52s} {v['host_us']:7.2f} {v['host_min_us']:7.2f}{rel}"
                         f"   (with drain {v['wall_us']:.2f})")
    # issue 5: the full call within 1.5x of a raw cuLaunchKernel (of the same path's cubin) and below Triton's launcher
    triton = next((v.get("host_us") for k, v in res.items() if k.startswith("triton launcher")), None)
    for name, v in res.items():
        if not (name.startswith("tle:") and name.endswith("[grid](...)")) or "host_us" not in v:
            continue
        b = name[4:].split(" ")[0]
        base = res.get(f"raw cuLaunchKernel ({b} cubin, pre-packed)", {}).get("host_us")
        if base is None:
            continue
        ok = v["host_us"] <= 1.5 * base and (triton is None or v["host_us"] < triton)
        lines.append(f"  target {b}: full call {v['host_us']:.2f} us = {v['host_us'] / base:.2f}x raw (<= 1.5x)"
                     + (f", Triton's launcher {triton:.2f} us" if triton is not None else "")
                     + f"; C launcher {'on' if v.get('c_launcher') else 'OFF'}: {'met' if ok else 'MISSED'}")
    return "\n".join(lines)


def startup_table(res: dict) -> str:
    runs = max((r.get("cold_runs", 1) for r in res.values()), default=1)
    lines = ["time to first result in a fresh process (s): cold = empty caches (compile"
             + (f"; the median of {runs} processes" if runs > 1 else "") + "), warm = disk cache"]
    impls = list(res)
    lines.append(f"  {'kernel':11s}" + "".join(f" {i[:20]:>20s}" for i in impls) + "      (each: cold / warm)")
    kernels = []
    for i in impls:
        for run in ("cold", "warm"):
            kernels += [k for k in res[i][run].get("kernels", {}) if k not in kernels]

    def fmt(r):
        if r is None:
            return "-"
        if "error" in r:
            return "ERR"
        return f"{r['first_s']:.3f}" + ("" if r.get("ok") else "!")
    for k in kernels:
        cells = []
        for i in impls:
            c, w = (res[i][run].get("kernels", {}).get(k) for run in ("cold", "warm"))
            cells.append(f"{fmt(c)} / {fmt(w)}")
        lines.append(f"  {k:11s}" + "".join(f" {c:>20s}" for c in cells))
    for i in impls:
        for run in ("cold", "warm"):
            r = res[i][run]
            if "error" in r:
                lines.append(f"  {i} {run}: {r['error']}")
            else:
                errs = {k: v["error"] for k, v in r.get("kernels", {}).items() if "error" in v}
                lines.append(f"  {i} {run}: import {r.get('import_s', 0):.2f} s, first (warm-up) kernel "
                             f"{r.get('warmup_first_s', 0):.2f} s, process {r.get('process_s', 0):.1f} s"
                             + (f"; errors: {errs}" if errs else ""))
    lines.append("  ('!' = wrong result; the warm-up kernel takes the one-time costs, so per-kernel times "
                 "exclude them)")
    # issue 5: cold compile within 1.2x of Triton's compile of the reference; a warm start under 50 ms
    ref = res.get("triton_ref", {}).get("cold", {}).get("kernels", {})
    for i in impls:
        if i == "triton_ref":
            continue
        cold, warm = (res[i][run].get("kernels", {}) for run in ("cold", "warm"))
        both = [k for k in kernels if "first_s" in cold.get(k, {}) and "first_s" in ref.get(k, {})]
        slow = [f"{k} {cold[k]['first_s'] / ref[k]['first_s']:.2f}x" for k in both
                if cold[k]["first_s"] > 1.2 * ref[k]["first_s"]]
        warm_s = [v["first_s"] for v in warm.values() if "first_s" in v]
        lines.append(f"  target {i}: cold compile <= 1.2x triton_ref's: {len(both) - len(slow)}/{len(both)}"
                     + (f" (over: {', '.join(slow)})" if slow else "")
                     + (f"; warm start <= 50 ms: {sum(w <= 0.05 for w in warm_s)}/{len(warm_s)} "
                        f"(max {1e3 * max(warm_s):.0f} ms)" if warm_s else ""))
    return "\n".join(lines)


# ==== main ========================================================================================================

def _versions() -> dict:
    v = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__}
    try:
        import tle
        v["tle"] = getattr(tle, "__version__", "?")
    except Exception as exc:  # noqa: BLE001
        v["tle"] = f"import failed: {first_line(exc)}"
    try:
        v["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        v["git_dirty"] = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain"], capture_output=True,
                                             text=True, timeout=10).stdout.strip())
    except Exception:  # noqa: BLE001
        pass
    return v


def _out_dir() -> str:
    d = ARGS.out or os.environ.get("OUT") or os.path.join(os.getcwd(), "bench_out")
    os.makedirs(d, exist_ok=True)
    return d


def dry_run(only) -> int:
    cases = build_cases(ARGS.quick, only)
    which = "--shapes" if ARGS.shapes else "quick" if ARGS.quick else "full"
    print(f"{len(cases)} benchmark cases ({which}); configurations (same for tle and the reference):")
    for c in cases:
        print(f"  {c.key:34s} grid {str(c.grid()):14s} {c.config_text():36s} {c.bytes / 1e6:9.1f} MB"
              + (f" {c.flops / 1e9:10.1f} GFLOP" if c.flops else ""))
    impl_names = [i.name for i in build_impls(ARGS.backends.split(","), dry=False)]
    skeleton = [{"kernel": c.kernel, "shape": list(c.shape), "dtype": c.dtype, "flops": c.flops, "group": c.group,
                 "bytes": c.bytes, "impls": {}} for c in cases]
    print("\ntable skeleton (GPU columns: median us, GB/s or TFLOP/s, % of the measured roofline):")
    print(main_table(skeleton, impl_names, [n for n in impl_names if n.startswith("tle:")]))

    ctx = Context(device="cpu", timing=False)
    impls = build_impls([], dry=True)
    try:
        importlib.import_module("tle.runtime.interpreter")
        have_interp = True
    except Exception as exc:  # noqa: BLE001
        have_interp = False
        print(f"\ntle's CPU interpreter is not importable ({first_line(exc)}): tle is skipped in the CPU check")
        impls = [i for i in impls if not i.name.startswith("tle:")]
    records, failed = [], 0
    t0 = perf()
    for case in dry_cases(only):
        rec = run_case(case, impls, ctx)
        records.append(rec)
        failed += sum(r.get("status") in ("FAIL", "ERR") for r in rec["impls"].values())
    print(f"\nCPU correctness on tiny shapes ({perf() - t0:.0f} s; tle {'interpreter' if have_interp else 'skipped'}, "
          "Triton references under TRITON_INTERPRET=1, torch on the CPU):")
    print(main_table(records, [i.name for i in impls], []))
    if ARGS.compile:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="tle-bench-triton-"), TLE_CACHE="0")
        res = _run_child("compile", "", list(only) or [], env, timeout=3600)
        if "rows" in res:
            print("\n" + print_compile_rows(res["rows"]))
            failed += sum(any(k.endswith("_error") for k in r) for r in res["rows"])
        else:
            print(f"\ncompile check failed: {res.get('error')}")
            failed += 1
    print(f"\ndry run: {failed} failures")
    return 1 if failed else 0


def main() -> int:
    only = tuple(k for k in ARGS.only.split(",") if k)
    bad = [k for k in only if k not in KERNELS]
    if bad:
        print(f"unknown kernels {bad}; choose from {KERNELS}", file=sys.stderr)
        return 2
    if ARGS.child == "startup":
        print("CHILD_JSON " + json.dumps(child_startup(ARGS.impl, [k for k in ARGS.kernels.split(",") if k])))
        return 0
    if ARGS.child == "compile":
        print("CHILD_JSON " + json.dumps(child_compile(ARGS.quick, tuple(k for k in ARGS.kernels.split(",") if k))))
        return 0
    if ARGS.dry_run:
        return dry_run(only)
    if not torch.cuda.is_available():
        print("no CUDA device: use --dry-run on a machine without a GPU", file=sys.stderr)
        return 2

    t_start = perf()
    budget = ARGS.budget_s or (100 if ARGS.quick else 420)
    out_dir = _out_dir()
    backends = [b for b in ARGS.backends.split(",") if b]
    try:  # f32 references must be IEEE f32, not TF32
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    except Exception:  # noqa: BLE001
        torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 60 << 20) or (60 << 20)
    ctx = Context(device="cuda", timing=True, timer=ARGS.timer, rep_ms=ARGS.rep_ms or (30 if ARGS.quick else 60),
                  warmup_ms=5 if ARGS.quick else 10, rotate_bytes=4 * l2)
    report = {"device": {"name": props.name, "sms": props.multi_processor_count, "l2_bytes": l2,
                         "capability": list(torch.cuda.get_device_capability(0))},
              "versions": _versions(), "args": vars(ARGS), "timer": ctx.timer, "cases": []}
    json_path = os.path.join(out_dir, "bench.json")

    def save():
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)

    print(f"{props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MB; torch {torch.__version__}, "
          f"triton {triton.__version__}; tle backends {backends}; timer {ctx.timer}", flush=True)
    try:
        report["ceilings"] = ceil = measure_ceilings(ctx)
        ceil_line = (f"ceilings measured now: copy {ceil['copy_GBps']:.0f} GB/s (read + write, 1 GiB), "
                     f"bf16 8192^3 cuBLAS {ceil['matmul_bf16_TFLOPs']:.0f} TFLOP/s")
        chart_title = (f"{props.name}: % of roofline (copy {ceil['copy_GBps']:.0f} GB/s, "
                       f"bf16 {ceil['matmul_bf16_TFLOPs']:.0f} TFLOP/s)")
        report["sleep_cycles_per_us"] = _SLEEP["cycles_per_us"]
    except Exception as exc:  # noqa: BLE001 - the cases still run; no roofline column
        report["ceilings"] = {"error": first_line(exc)}
        ceil_line = f"ceilings: measurement failed ({first_line(exc)}); no % of roofline"
        chart_title = f"{props.name}"
    print(ceil_line, flush=True)
    save()

    text_blocks = []
    if not ARGS.no_launch:
        n = 2000 if ARGS.quick else 10_000
        report["launch"] = launch_overhead(backends, n_launch=n, rounds=3 if ARGS.quick else LAUNCH_ROUNDS)
        text_blocks.append(launch_table(report["launch"]).replace("10,000", f"{n:,}"))
        print(text_blocks[-1], flush=True)
        save()

    cases = build_cases(ARGS.quick, only)
    impls = build_impls(backends, dry=False, tune=not ARGS.no_tune, tune_budget_s=ARGS.tune_budget_s)
    startup_reserve = 0 if ARGS.no_startup else (40 if ARGS.quick else 140)
    print(f"{len(cases)} cases, implementations {[i.name for i in impls]}", flush=True)
    fatal = None
    for i, case in enumerate(cases):
        if perf() - t_start > budget - startup_reserve:
            report["cases"].append({"kernel": case.kernel, "shape": list(case.shape), "dtype": case.dtype,
                                    "group": case.group, "bytes": case.bytes, "flops": case.flops,
                                    "impls": {"tle:" + backends[0] if backends else "torch":
                                              {"status": "skip", "error": "time budget (--budget-s) used up"}}})
            continue
        try:
            rec = run_case(case, impls, ctx)
        except FatalCudaError as exc:
            fatal = str(exc)
            print(f"FATAL CUDA error, stopping the case loop: {fatal}", flush=True)
            break
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory building the inputs: record, go on
            rec = {"kernel": case.kernel, "shape": list(case.shape), "dtype": case.dtype, "group": case.group,
                   "bytes": case.bytes, "flops": case.flops,
                   "impls": {i.name: {"status": "ERR", "error": "case: " + first_line(exc)} for i in impls}}
            if not _cuda_alive():
                fatal = f"{case.key}: {first_line(exc)}"
                report["cases"].append(rec)
                break
        report["cases"].append(rec)
        brief = "  ".join(f"{n}={r['us']:.1f}us" if "us" in r else f"{n}={r.get('status')}"
                          for n, r in rec["impls"].items())
        print(f"[{i + 1}/{len(cases)} {perf() - t_start:5.0f}s] {case.key}: {brief}", flush=True)
        save()
        torch.cuda.empty_cache()
    report["fatal"] = fatal

    if not ARGS.no_startup and fatal is None:
        kernels = [k for k in KERNELS if k in {c.kernel for c in cases}]
        if ARGS.quick:
            kernels = [k for k in kernels if k in ("vector_add", "softmax", "matmul")]
        # A backend that failed every case (e.g. not implemented yet) gets no processes: it would fail there too.
        working = [b for b in backends if not report["cases"] or any(
            rec["impls"].get(f"tle:{b}", {}).get("status") == "ok" for rec in report["cases"])]
        report["startup_skipped"] = [b for b in backends if b not in working]
        report["startup"] = startup_figures(working, kernels, 1 if ARGS.quick else STARTUP_REPEATS)
        text_blocks.append(startup_table(report["startup"]) + "".join(
            f"\n  tle:{b}: not started (no case ran on it)" for b in report["startup_skipped"]))
        print(text_blocks[-1], flush=True)
        save()

    impl_names = [i.name for i in impls]
    tle_names = [n for n in impl_names if n.startswith("tle:")]
    records = [r for r in report["cases"]]
    try:
        chart_msg = write_chart(os.path.join(out_dir, "bench.png"), records, impl_names, chart_title)
    except Exception as exc:  # noqa: BLE001
        chart_msg = f"chart failed: {first_line(exc)}"
    table = main_table(records, impl_names, tle_names)
    if TUNED:
        text_blocks.append(tuned_table())
        report["tuned"] = {key: {"config": r.config, "time_s": r.time_s, "default_time_s": r.default_time_s,
                                 "from_db": r.from_db, "stats": r.stats} for key, r in TUNED.items()}
    graph_table = decode_graph_table(records, impl_names)
    summary = targets_summary(records, tle_names, ctx)
    report["elapsed_s"] = perf() - t_start
    save()
    legend = ("cells: median us, GB/s (G) or TFLOP/s (T), % of the roofline from the measured ceilings; "
              "tri/ref, tri/tch (til/.. for tileir) = time(triton_ref or torch) / time(that tle path): > 1 means tle "
              "is faster; auto = the path tle takes when no backend is named")
    final = "\n\n".join(text_blocks + [f"{chart_msg}; json: {json_path}", ceil_line, legend + "\n" + table]
                         + ([graph_table] if graph_table else []) + [summary])
    final += f"\nelapsed {report['elapsed_s']:.0f} s" + (f"; STOPPED EARLY: {fatal}" if fatal else "")
    with open(os.path.join(out_dir, "bench.txt"), "w") as f:
        f.write(final + "\n")
    print("\n" + final, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
