"""Every runnable golden FileCheck program runs on the interpreter and matches a torch reference (issue 4).

The golden programs are the `.tle` files with `// RUN:` lines under tests/filecheck/ and tests/filecheck/tileir/.
conftest.py checks their IR text; this file checks what they *compute*. TABLE has one entry per (file, kernel):

- `consts`: the compile-time constants of each launch, one dict per `-D` set of the file's RUN lines (`{}` for a
  RUN line without `-D`: the defaults). `test_table_covers_every_golden_program` checks that every `-D` set of a
  successful RUN line is among them.
- `cases`: the sizes (and run-time scalars) to launch with; ragged wherever the kernel allows it, several where the
  kernel behaves differently at different sizes (a row longer or shorter than its tile, ...).
- `make(case, consts, gen)`: fresh random inputs by parameter name (never all zeros). Outputs the kernel writes
  completely start as NaN (integers: a sentinel), so an element it never writes cannot pass; tensors it
  reads and writes start random.
- `grid(case, consts)`, and `ref(inputs, case, consts)`: the expected final value of each tensor the kernel writes,
  from copies of the inputs taken before the launch, in float64 (int64 for integers) where that is sensible.
  Elements the kernel must leave alone keep their initial value (NaN or random) in the reference.
- `tol`: per written tensor, the docs/numerics.md tolerance (the GPU-against-interpreter table: |got - want| <=
  atol * scale + rtol * |want|, scale = max(1, max |want|), NaN matches NaN, inf the same inf). `interp_tol`
  narrows it for the interpreter where the table's slack is for hardware freedoms the interpreter does not take
  (TF32 rounding, which the reference then models itself; f16 products and their sum, which the interpreter
  keeps exact and f32).
- `tileir_blocker`: None when the kernel can take the CUDA Tile IR path; otherwise a regex of the TleError that
  backend="tileir" must raise (legality). `test_tileir_legality_marks` checks the marks here, without a GPU.

Files whose name starts with `error_` or `bad_` are deliberately bad programs and are not required, except when
one of their RUN lines compiles without `not` (error_missing_constant.tle with -D BLOCK=64): then that kernel is
runnable and is in the table too. EXCLUDED lists any other golden file left out, with the reason (none now).

The GPU variant (`test_golden_program_on_gpu`, marked gpu) runs the same table with CUDA copies of the same inputs
on backend="triton" and backend="tileir" against the same references and tolerances.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shlex
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Callable

import pytest
from golden_runs import run_lines as _run_commands  # the RUN lines exactly as the golden runner reads them
import torch

import tle
from tle.cli import _scalar  # a constant as `tlec -D` gives it, so the RUN lines mean what tlec reads

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_DIR = os.path.join(HERE, "filecheck")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import reference as examples_reference  # noqa: E402  (the Philox reference of random.tle)

# Golden files deliberately left out of TABLE (beyond error_*/bad_* programs): path relative to GOLDEN_DIR -> reason.
EXCLUDED: dict[str, str] = {}

NAN = float("nan")
INF = float("inf")


# ---- tolerances (docs/numerics.md, "Tolerances: GPU backends against the interpreter") ---------------------------

ULP = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7, torch.float64: 2.0 ** -52}


@dataclass(frozen=True)
class Tol:
    rtol: float
    atol: float

    def __add__(self, other: "Tol") -> "Tol":  # two error sources one after the other
        return Tol(self.rtol + other.rtol, self.atol + other.atol)


EXACT = Tol(0.0, 0.0)  # integers, bools, comparisons, where, casts, shape ops, loads/stores/gathers/scatters, ...


def chain(d: int, dtype=torch.float32) -> Tol:
    """An elementwise float chain of d ops in `dtype`: 4·d·ulp; one f16/bf16 op: 2^-9 / 2^-6 (the table's row)."""
    if dtype in (torch.float16, torch.bfloat16) and d == 1:
        return Tol(2 * ULP[dtype], 2 * ULP[dtype])
    return Tol(4 * d * ULP[dtype], 4 * d * ULP[dtype])


def reduction(n: int, d: int) -> Tol:
    """f32 sum / cumsum / softmax-like normalisation over n terms after (and around) a chain of d ops."""
    c = chain(d)
    return Tol(c.rtol, max(c.atol, 4 * n * 2.0 ** -23))


def dot_half(k: int) -> Tol:  # f16/bf16 operands, f32 accumulator
    return Tol(2e-3, 8 * k * 2.0 ** -23)


def dot_f8(k: int) -> Tol:
    """8-bit float operands, f32 accumulator: the products are exact, but Hopper's 8-bit tensor cores add them with
    about 14 bits of mantissa (docs/numerics.md), so each of the k additions may lose 2^-14 of the running sum."""
    return Tol(2e-3, 2 * k * 2.0 ** -14)


def dot_f32(k: int) -> Tol:  # f32 operands, IEEE
    return Tol(1e-5, 8 * k * 2.0 ** -23)


def dot_tf32(k: int) -> Tol:
    return Tol(2e-3, max(8 * k * 2.0 ** -23, 2e-3))


def atomic_add(m: int, dtype=torch.float32) -> Tol:  # final values, at most m updates to one element
    return Tol(4 * m * ULP[dtype], 4 * m * ULP[dtype])


def compare(got: torch.Tensor, want: torch.Tensor, tol: Tol) -> str | None:
    """None if `got` matches `want` within `tol`, else a description of the worst element (with its index)."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    got = got.detach().cpu()
    if not want.is_floating_point():  # integers and bools: exact
        g, w = got.to(torch.int64), want.to(torch.int64)
        bad = g != w
        if not bad.any():
            return None
        i = int(bad.flatten().nonzero()[0])
        return (f"element {_index(i, want.shape)}: got {g.flatten()[i].item()}, want {w.flatten()[i].item()} "
                f"({int(bad.sum())} of {bad.numel()} differ; exact)")
    g, w = got.double(), want.double()
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    finite = w[torch.isfinite(w)]
    scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
    excess = torch.where(same, torch.zeros_like(g), (g - w).abs() - tol.atol * scale - tol.rtol * w.abs())
    excess = torch.nan_to_num(excess, nan=INF)  # NaN against a number, or a number against NaN
    if (excess <= 0).all():
        return None
    i = int(excess.flatten().argmax())
    return (f"element {_index(i, want.shape)}: got {g.flatten()[i].item()!r}, want {w.flatten()[i].item()!r} "
            f"({int((excess > 0).sum())} of {excess.numel()} differ; rtol {tol.rtol:.3g}, atol {tol.atol:.3g}, "
            f"scale {scale:.3g})")


def _index(flat: int, shape) -> tuple:
    out = []
    for s in reversed(list(shape) or [1]):
        out.append(flat % s)
        flat //= s
    return tuple(reversed(out))


# ---- input helpers ---------------------------------------------------------------------------------------------------

SENTINEL = {torch.int8: -77, torch.int16: -7777, torch.int32: -123456789, torch.int64: -1234567890123}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def randn(shape, gen, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    """Random normal values in `dtype`; an exact zero (after rounding) becomes 0.5, so no input is ever zero."""
    t = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)
    return torch.where(t == 0, torch.full_like(t, 0.5), t)


def uniform(shape, gen, lo, hi, dtype=torch.float32) -> torch.Tensor:
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def randint(shape, gen, lo, hi, dtype=torch.int32) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def poison(shape, dtype=torch.float32) -> torch.Tensor:
    """The initial value of an output the kernel writes completely: NaN, or an unlikely integer."""
    if dtype.is_floating_point:
        return torch.full(shape, NAN, dtype=dtype)
    return torch.full(shape, SENTINEL[dtype], dtype=dtype)


def f32(v: float) -> float:
    """A Python float that an f32 scalar parameter holds exactly."""
    return float(torch.tensor(v, dtype=torch.float32))


def scalar_f32(gen, lo, hi) -> float:
    return f32(uniform((), gen, lo, hi, torch.float64).item())


def pad2(x: torch.Tensor, rows: int, cols: int, value: float) -> torch.Tensor:
    """x[:rows, :cols] as float64, padded to [rows, cols] with `value` (what a padded tile load reads)."""
    out = torch.full((rows, cols), value, dtype=torch.float64)
    r, c = min(rows, x.shape[0]), min(cols, x.shape[1])
    out[:r, :c] = x[:r, :c].double()
    return out


def first_extreme(t: torch.Tensor, kind: str) -> torch.Tensor:
    """argmax/argmin along axis 1: the first index of the extreme; NaN counts as the extreme (numerics.md)."""
    idx = torch.arange(t.shape[1]).expand_as(t)
    big = t.shape[1]
    nan = torch.isnan(t)
    ext = torch.where(nan, torch.zeros_like(t), t)  # rows with a NaN are decided by the NaN below
    ext = ext.max(dim=1, keepdim=True).values if kind == "max" else ext.min(dim=1, keepdim=True).values
    hit = torch.where(nan.any(dim=1, keepdim=True), nan, t == ext)
    return torch.where(hit, idx, torch.full_like(idx, big)).min(dim=1).values


def wrap(v: torch.Tensor, bits: int) -> torch.Tensor:
    """Two's complement wrap-around of int64 values to `bits` bits (still int64)."""
    m = 1 << bits
    return ((v + (m >> 1)) % m) - (m >> 1)


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Round f32 values to TF32 (10 explicit mantissa bits), round to nearest even; finite values only."""
    b = x.float().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    b = (b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000
    b = torch.where(b >= 1 << 31, b - (1 << 32), b)
    return b.to(torch.int32).view(torch.float32)


def sigmoid64(x):
    return 1.0 / (1.0 + torch.exp(-x))


# ---- the table ----------------------------------------------------------------------------------------------------

@dataclass
class Entry:
    file: str  # relative to tests/filecheck
    kernel: str
    make: Callable  # (case, consts, gen) -> {param: tensor or scalar}
    grid: Callable  # (case, consts) -> grid tuple
    ref: Callable  # (inputs before the launch, case, consts) -> {written tensor: expected final value}
    tol: dict  # written tensor -> Tol
    cases: list = field(default_factory=lambda: [{}])
    consts: list = field(default_factory=lambda: [{}])
    interp_tol: dict = field(default_factory=dict)  # written tensor -> a tighter Tol for the interpreter
    tileir_blocker: str | None = None  # regex of the TleError backend="tileir" must raise, None: it runs there
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.file}::{self.kernel}"


TABLE: list[Entry] = []


def entry(**kw) -> None:
    TABLE.append(Entry(**kw))


# argmax.tle ---------------------------------------------------------------------------------------------------------
def _am_make(c, k, g):
    m, n = c["M"], c["N"]
    x = randn((m, n), g)
    x[2, 5] = NAN  # NaN is the extreme for argmax and argmin alike: both give its index, not a pad's
    x[4, 7] = x[4, 20] = 9.0  # a tie for the maximum: the first index wins
    return {"x": x, "imax": poison((m, 1), torch.int32), "imin": poison((m, 1), torch.int32)}


def _am_ref(a, c, k):
    t = pad2(a["x"], a["x"].shape[0], 32, -INF)  # tile [4, 32] at column 0, pad -inf: only columns < 32 count
    return {"imax": first_extreme(t, "max")[:, None], "imin": first_extreme(t, "min")[:, None]}


entry(file="argmax.tle", kernel="am", make=_am_make, grid=lambda c, k: (cdiv(c["M"], 4),), ref=_am_ref,
      tol={"imax": EXACT, "imin": EXACT},
      cases=[{"M": 13, "N": 45}, {"M": 9, "N": 23}],
      note="N=45: only the first 32 columns are in the tile; N=23: -inf pads, so argmin is N (the first pad) "
           "except in the row with a NaN")


# atomics.tle --------------------------------------------------------------------------------------------------------
def _hist_make(c, k, g):
    n, b = c["N"], c["B"]
    return {"x": randint((n,), g, 0, b), "bins": randn((b,), g, scale=10.0),
            "hi": randint((1,), g, -1000, -1)}


def _hist_ref(a, c, k):
    n, b = c["N"], c["B"]
    pads = cdiv(n, 64) * 64 - n  # unmasked atomics: padded lanes (x reads pad=0) add 1.0 to bins[0], max in 0
    x = a["x"].to(torch.int64)
    bins = a["bins"].double() + torch.bincount(x, minlength=b).double()
    bins[0] += pads
    hi = max(a["hi"].item(), x.max().item(), 0 if pads else -(1 << 31))
    return {"bins": bins, "hi": torch.tensor([hi])}


entry(file="atomics.tle", kernel="hist", make=_hist_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_hist_ref,
      tol={"bins": atomic_add(3 * 64), "hi": EXACT}, cases=[{"N": 150, "B": 10}],
      note="the atomics have no mask: the padded lanes of the last tile hit bins[0] and hi[0] with value 0")


# asserts_on_gpu.tle -------------------------------------------------------------------------------------------------
entry(file="asserts_on_gpu.tle", kernel="checked",
      make=lambda c, k, g: {"x": randn((c["N"],), g).abs() + 0.25, "y": poison((c["N"],)), "n": c["N"]},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=lambda a, c, k: {"y": torch.log(a["x"].double())},
      tol={"y": chain(2)}, cases=[{"N": 150}],
      note="the asserts hold (x > 0, n < 1000); tests/gpu/test_asserts_gpu.py launches them with asserts=True and "
           "breaks them")


# atomics_bits.tle ---------------------------------------------------------------------------------------------------
def _seen_make(c, k, g):
    n, w = c["N"], c["W"]
    return {"x": randint((n,), g, 0, 32 * w), "bits": randint((w,), g, -2 ** 31, 2 ** 31 - 1),
            "parity": randint((w,), g, -2 ** 62, 2 ** 62, torch.int64),
            "keep": randint((w,), g, -2 ** 31, 2 ** 31 - 1), "slots": randn((n,), g), "old": poison((n,))}


def _seen_ref(a, c, k):
    bits, parity, keep = a["bits"].clone(), a["parity"].clone(), a["keep"].clone()
    w = c["W"]
    for v in a["x"].tolist():  # one update at a time: the order does not matter for and, or, xor
        bits[v // 32] |= torch.tensor(1 << (v % 32), dtype=torch.int64).to(torch.int32)
        parity[v % w] ^= 1 << (v % 64) if v % 64 < 63 else -(1 << 63)
        keep[v % w] &= ~torch.tensor(1 << (v % 32), dtype=torch.int64).to(torch.int32)
    return {"bits": bits, "parity": parity, "keep": keep, "slots": a["x"].to(torch.float32), "old": a["slots"]}


entry(file="atomics_bits.tle", kernel="seen", make=_seen_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_seen_ref,
      tol={"bits": EXACT, "parity": EXACT, "keep": EXACT, "slots": EXACT, "old": EXACT},
      cases=[{"N": 150, "W": 5}, {"N": 64, "W": 1}],
      note="bits, parity and keep are sets built with or, xor and and, which commute, so any order of programs "
           "gives them; each slot is exchanged once")


def _claim_make(c, k, g):
    n = c["N"]
    state = randint((n,), g, 0, 3, torch.int64)
    return {"state": state, "want": torch.where(torch.arange(n) % 2 == 0, state, state + 1), "was": poison((n,),
                                                                                                     torch.int64)}


entry(file="atomics_bits.tle", kernel="claim", make=_claim_make, grid=lambda c, k: (c["N"],),
      ref=lambda a, c, k: {"state": torch.where(a["state"] == a["want"], torch.arange(c["N"]), a["state"]),
                           "was": a["state"]},
      tol={"state": EXACT, "was": EXACT}, cases=[{"N": 37}],
      note="even elements hold what the program wants and take its id; odd ones keep their value")


# flip.tle -----------------------------------------------------------------------------------------------------------
_FLIP_DT = {"f32": torch.float32, "bf16": torch.bfloat16, "i64": torch.int64}


def _flip_make(c, k, g):
    dt = _FLIP_DT[k.get("T", "f32")]
    m, n = c["M"], c["N"]
    x = randint((m, n), g, -2 ** 40, 2 ** 40, dt) if dt == torch.int64 else randn((m, n), g, dt, scale=100.0)
    if dt != torch.int64:
        x[0, :3] = torch.tensor([NAN, INF, -0.0])  # bits move as they are
    return {"x": x, "cols": poison((m, n), dt), "both": poison((m, n), dt)}


def _flip_ref(a, c, k):
    x, m = a["x"], c["M"]
    cols, both = a["cols"].clone(), a["both"].clone()
    for r0 in range(0, m, 4):  # a partial last tile flips its padding (zeros) in
        tile = torch.zeros(4, 8, dtype=x.dtype)  # load pads with 0
        got = x[r0:r0 + 4, :8]
        tile[:got.shape[0]] = got
        cols[r0:r0 + 4, :8] = tile.flip(1)[:got.shape[0]]
        both[r0:r0 + 4, :8] = tile.flip(0).flip(1)[:got.shape[0]]
    return {"cols": cols, "both": both}


entry(file="flip.tle", kernel="flip2", make=_flip_make, grid=lambda c, k: (cdiv(c["M"], 4),), ref=_flip_ref,
      tol={"cols": EXACT, "both": EXACT}, cases=[{"M": 10, "N": 8}, {"M": 8, "N": 13}],
      consts=[{}, {"T": "bf16"}, {"T": "i64"}],
      note="M=10: the last tile's padded rows (zeros) flip into rows 8-9 of `both`; N=13: columns 8.. are never "
           "written; NaN, inf and -0.0 keep their bits")


# histogram.tle -----------------------------------------------------------------------------------------------------
def _histogram_make(dtype, lo, hi):
    """x: values from lo to hi - 1; bins: counts already there (the kernel adds to them)."""
    return lambda c, k, g: {"x": randint((c["N"],), g, lo, hi, dtype), "bins": randint((c["B"],), g, 0, 1000)}


def _histogram_ref(counted):
    """`counted`: the kernel's bin count; values outside [0, counted) are not counted."""
    def ref(a, c, k):
        x = a["x"].to(torch.int64)
        bins = a["bins"].clone()
        bins[:counted] += torch.bincount(x[(x >= 0) & (x < counted)], minlength=counted).to(torch.int32)
        return {"bins": bins}
    return ref


_HISTOGRAM_BLOCKER = "histogram\\(\\) has no Tile IR lowering"
entry(file="histogram.tle", kernel="hist", make=_histogram_make(torch.int32, -20, 80),
      grid=lambda c, k: (cdiv(c["N"], 128),), ref=_histogram_ref(64), tol={"bins": EXACT},
      cases=[{"N": 1000, "B": 64}, {"N": 300, "B": 70}], tileir_blocker=_HISTOGRAM_BLOCKER,
      note="values from -20 to 79: the negative ones and those from 64 on are not counted; N=300 masks a ragged "
           "last tile; B=70 leaves bins 64.. unchanged")
entry(file="histogram.tle", kernel="hist8", make=_histogram_make(torch.int8, -128, 128),
      grid=lambda c, k: (cdiv(c["N"], 128),), ref=_histogram_ref(256), tol={"bins": EXACT},
      cases=[{"N": 1000, "B": 256}], tileir_blocker=_HISTOGRAM_BLOCKER,
      note="i8 values over their whole range: the negative half is not counted, nor the -1 padding past N")


def _histogram64_make(c, k, g):
    x = randint((c["N"],), g, -10, 70, torch.int64)
    far = randint((c["N"],), g, 0, 4, torch.int64) == 0  # a quarter of them 2^32 away: their low bits are in range
    return {"x": torch.where(far, x + (1 << 32), x), "bins": randint((c["B"],), g, 0, 1000)}


entry(file="histogram.tle", kernel="hist64", make=_histogram64_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=_histogram_ref(64), tol={"bins": EXACT}, cases=[{"N": 1000, "B": 64}], tileir_blocker=_HISTOGRAM_BLOCKER,
      note="i64 values, a quarter of them 2^32 + v: not counted, though their low 32 bits are in range")


# broadcast_outer.tle ------------------------------------------------------------------------------------------------
def _outer_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"a": randn((m,), g), "b": randn((n,), g), "c": poison((m, n)), "s": scalar_f32(g, -2, 2)}


entry(file="broadcast_outer.tle", kernel="outer", make=_outer_make,
      grid=lambda c, k: (cdiv(c["M"], 32), cdiv(c["N"], 16)),
      ref=lambda a, c, k: {"c": a["a"].double()[:, None] + a["b"].double()[None, :] + a["s"]},
      tol={"c": chain(2)}, cases=[{"M": 50, "N": 37}])


# casts.tle ----------------------------------------------------------------------------------------------------------
def _casts_make(c, k, g):
    n = c["N"]
    small = randn((n,), g, scale=1.0)  # |x| < 1 truncates to 0: cast<bool> gives false
    large = uniform((n,), g, -3000.0, 3000.0)  # beyond i8: the i32 -> i8 cast wraps
    x = torch.where(torch.arange(n) % 2 == 0, small, large).to(torch.float16)
    x = torch.where(x == 0, torch.full_like(x, 0.5), x)
    return {"x": x, "a": poison((n,), torch.bfloat16), "b": poison((n,), torch.int8),
            "d": poison((n,), torch.int64)}


def _casts_ref(a, c, k):
    x = a["x"]
    i = x.double().trunc().to(torch.int64)  # f16 -> i32 truncates toward zero (f16 values fit i32)
    return {"a": x.float().to(torch.bfloat16).double(),  # f16 -> bf16 through f32, one RNE rounding
            "b": wrap(i, 8), "d": (i != 0).to(torch.int64)}


entry(file="casts.tle", kernel="c", make=_casts_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_casts_ref,
      tol={"a": EXACT, "b": EXACT, "d": EXACT}, cases=[{"N": 200}])


# f8_casts.tle -------------------------------------------------------------------------------------------------------
def to_f8(x: torch.Tensor, dtype) -> torch.Tensor:
    """x converted as the GPUs convert to an 8-bit float (docs/numerics.md): nearest even, saturating, NaN kept."""
    largest = torch.finfo(dtype).max  # 448 for e4m3fn, 57344 for e5m2
    return x.clamp(-largest, largest).to(dtype)


def _f8c_make(c, k, g):
    n, p = c["N"], c["P"]
    x = randn((n,), g, scale=100.0)
    x[:10] = torch.tensor([INF, -INF, NAN, 1000.0, -1e6, 1e-9, 460.0, 0.0013, 57344.0 * 1.1, -0.5])
    return {"x": x, "p": randn((p,), g, scale=8.0).to(torch.float8_e4m3fn),
            "a": poison((n,), torch.float8_e4m3fn), "b": poison((n,), torch.float8_e5m2),
            "y": poison((n,)), "z": poison((n,), torch.bfloat16)}


def _f8c_ref(a, c, k):
    x, n = a["x"], c["N"]
    back = torch.full((n,), 448.0, dtype=torch.float64)  # pad=1000.0, converted to f8e4m3
    back[:c["P"]] = a["p"].double()
    e5 = to_f8(x, torch.float8_e5m2).double()
    return {"a": to_f8(x, torch.float8_e4m3fn).double(), "b": to_f8(x.to(torch.bfloat16).float(),
                                                                      torch.float8_e5m2).double(),
            "y": back, "z": torch.where(x > 0, e5, back)}


entry(file="f8_casts.tle", kernel="c", make=_f8c_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_f8c_ref,
      tol={"a": EXACT, "b": EXACT, "y": EXACT, "z": EXACT}, cases=[{"N": 200, "P": 150}],
      note="infinities, NaN, overflow, an underflow to zero and a tie among the inputs; p's last tiles are padding")


# f8_moves.tle -------------------------------------------------------------------------------------------------------
def _f8m_make(c, k, g):
    n = c["N"]
    return {"x": randn((n,), g, scale=10.0).to(torch.float8_e4m3fn), "idx": randint((n,), g, 0, n + 20),
            "y": poison((n,), torch.float8_e4m3fn), "bits": poison((n,), torch.int8),
            "z": poison((n,), torch.float8_e5m2)}


def _f8m_ref(a, c, k):
    n, x, idx = c["N"], a["x"].double(), a["idx"].long()
    y = a["y"].double().clone()
    for p in range(cdiv(n, 64)):
        lo, cnt = p * 64, min(64, n - p * 64)
        at = idx[lo:lo + cnt]
        g = torch.zeros(64, dtype=torch.float64)  # gather's masked-off lanes and the tile's tail read 0
        g[:cnt] = torch.where(at < n, x[at.clamp(max=n - 1)], torch.zeros(cnt, dtype=torch.float64))
        r = g.reshape(8, 8).T.reshape(64)
        y[lo:lo + cnt] = torch.where(torch.arange(cnt) < 32, x[lo:lo + cnt], r[:cnt])
    return {"y": y, "bits": a["x"].view(torch.int8).long(),
            "z": to_f8(a["x"].float(), torch.float8_e5m2).double()}


entry(file="f8_moves.tle", kernel="moves", make=_f8m_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_f8m_ref,
      tol={"y": EXACT, "bits": EXACT, "z": EXACT}, cases=[{"N": 200}],
      note="y's second half reads transposed gathers across the tile; idx reaches past N (masked off: 0)")


# f8_dot.tle ---------------------------------------------------------------------------------------------------------
def _f8d_make(c, k, g):
    m, n, kk = c["M"], c["N"], c["K"]
    return {"x": randn((m, kk), g, scale=4.0).to(torch.float8_e4m3fn),
            "w": randn((n, kk), g, scale=4.0).to(torch.float8_e4m3fn),
            "sx": uniform((m,), g, 0.01, 0.1), "sw": uniform((n,), g, 0.01, 0.1),
            "y": poison((m, n), torch.bfloat16)}


entry(file="f8_dot.tle", kernel="mm", make=_f8d_make, grid=lambda c, k: (cdiv(c["M"], 64), cdiv(c["N"], 64)),
      ref=lambda a, c, k: {"y": (a["x"].double() @ a["w"].double().T) * a["sx"].double()[:, None]
                           * a["sw"].double()[None, :]},
      tol={"y": dot_f8(100) + chain(2) + chain(1, torch.bfloat16)},
      interp_tol={"y": dot_f32(100) + chain(2) + chain(1, torch.bfloat16)},
      cases=[{"M": 100, "N": 70, "K": 100}], note="ragged M, N and K (K=100: the last K tile is zero-padded)")


# cumsum_scan.tle ----------------------------------------------------------------------------------------------------
def _cs_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g, torch.float16), "y": poison((m, n))}


def _cs_ref(a, c, k):
    y = a["y"].double().clone()  # columns past the tile (>= 64) are never written: they stay NaN
    w = min(c["N"], 64)
    y[:, :w] = torch.cumsum(a["x"].double()[:, :w], dim=1)
    return {"y": y}


entry(file="cumsum_scan.tle", kernel="cs", make=_cs_make, grid=lambda c, k: (c["M"],), ref=_cs_ref,
      tol={"y": reduction(64, 1)}, cases=[{"M": 7, "N": 50}, {"M": 3, "N": 100}],
      note="the tile is [1, 64] at column 0: N=100 leaves columns 64.. unwritten")


# scan_keeps_checks.tle ----------------------------------------------------------------------------------------------
def _rowscan_make(c, k, g):
    return {"x": randn((c["M"], c["N"]), g), "y": poison((c["M"], c["N"]))}


def _rowscan_ref(a, c, k):
    y = a["y"].double().clone()  # columns past the tile (>= 4096) are never written: they stay NaN
    w = min(c["N"], 4096)
    y[:, :w] = torch.cumsum(a["x"].double()[:, :w], dim=1)
    return {"y": y}


entry(file="scan_keeps_checks.tle", kernel="rowscan", make=_rowscan_make, grid=lambda c, k: (c["M"],),
      ref=_rowscan_ref, tol={"y": reduction(4096, 1)}, cases=[{"M": 5, "N": 4096}, {"M": 3, "N": 3000}],
      note="an exact grid over whole rows (every fact holds: the native path keeps its checks) and a ragged row")


# div_f32_full.tle ---------------------------------------------------------------------------------------------------
def _divn_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": uniform((m, n), g, 0.5, 2.0), "y": poison((m, n))}  # positive: the row sums are well away from 0


def _divn_ref(a, c, k):
    w = min(c["N"], 64)  # tile [1, 64] at column 0, padded with 0: the sum covers the first 64 columns
    y = a["y"].double().clone()
    t = a["x"].double()[:, :w]
    y[:, :w] = t / t.sum(dim=1, keepdim=True)
    return {"y": y}


entry(file="div_f32_full.tle", kernel="norm", make=_divn_make, grid=lambda c, k: (c["M"],), ref=_divn_ref,
      tol={"y": reduction(64, 2)}, cases=[{"M": 5, "N": 50}, {"M": 3, "N": 100}],
      note="both GPU paths divide with div.full.f32 (within 2 ulp); the interpreter divides exactly")


# dot_precision.tle --------------------------------------------------------------------------------------------------
def _dp_make(c, k, g):
    return {"a": randn((32, 32), g), "c": poison((32, 32)), "q": randint((32, 32), g, -128, 128, torch.int8),
            "r": poison((32, 32), torch.int32)}


def _dp_ref(a, c, k):
    t = a["a"].double()
    t32 = tf32(a["a"]).double()
    q = a["q"].to(torch.int64)
    return {"c": t @ t + t32 @ t32, "r": wrap(q @ q, 32)}


entry(file="dot_precision.tle", kernel="d", make=_dp_make, grid=lambda c, k: (1,), ref=_dp_ref,
      tol={"c": dot_f32(32) + dot_tf32(32), "r": EXACT},
      interp_tol={"c": dot_f32(32) + dot_f32(32)},
      note="fixed 32x32 tensors stored whole at [0, 0]: one program (more would race). The reference rounds the "
           "tf32 operands itself, so the interpreter is held to the IEEE bound and must really round to TF32")


# dtype_const.tle ----------------------------------------------------------------------------------------------------
_TDTYPE = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def _scale_make(c, k, g):
    n, t = c["N"], _TDTYPE[k.get("T", "f16")]
    return {"x": randn((n,), g, t), "y": poison((n,), t), "alpha": scalar_f32(g, -3, 3)}


entry(file="dtype_const.tle", kernel="scale", make=_scale_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=lambda a, c, k: {"y": a["x"].double() * a["alpha"]},
      tol={"y": chain(1, torch.bfloat16)},  # one rounding to T dominates (the f32 product's is 2^-24)
      cases=[{"N": 300}], consts=[{"T": "bf16"}, {}],
      note="T=bf16 (first RUN line) and the default T=f16 (second); the bf16 tolerance covers both")


# error_missing_constant.tle (its second RUN line compiles it with -D BLOCK=64) ----------------------------------------
entry(file="error_missing_constant.tle", kernel="k",
      make=lambda c, k, g: {"x": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], k["BLOCK"]),),
      ref=lambda a, c, k: {"x": torch.zeros(c["N"], dtype=torch.float64)},
      tol={"x": EXACT}, cases=[{"N": 150}], consts=[{"BLOCK": 64}],
      note="runnable with -D BLOCK=64 (its OK RUN line); without it the launch must fail, "
           "see test_missing_constant_still_fails_at_launch")


# fn_import.tle ------------------------------------------------------------------------------------------------------
def _gelu64(x):
    return 0.5 * x * (1.0 + torch.special.erf(x * 0.7071067811865476))


def _g_ref(a, c, k):
    x = a["x"]
    return {"y": _gelu64(x.double()) + _gelu64(x.to(torch.float16).double())}


entry(file="fn_import.tle", kernel="g",
      make=lambda c, k, g: {"x": randn((c["N"],), g, scale=2.0), "y": poison((c["N"],), torch.float16)},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=_g_ref,
      tol={"y": chain(7, torch.float16)}, cases=[{"N": 150}],
      note="gelu inlined twice: on f32 (then cast to f16) and on f16 (every op rounds in f16): a chain of 7 f16 "
           "roundings at most")


# gather_scatter.tle -------------------------------------------------------------------------------------------------
def _gs_make(c, k, g):
    n, kk = c["N"], c["K"]
    return {"src": randn((n,), g), "idx": randint((kk,), g, -4, n), "dst": randn((kk,), g, scale=100.0)}


def _gs_ref(a, c, k):
    idx = a["idx"].to(torch.int64)
    dst = a["dst"].double().clone()
    ok = idx >= 0  # masked-off lanes neither read src nor write dst
    dst[ok] = a["src"].double()[idx[ok]]
    return {"dst": dst}


entry(file="gather_scatter.tle", kernel="gs", make=_gs_make, grid=lambda c, k: (cdiv(c["K"], 128),),
      ref=_gs_ref, tol={"dst": EXACT}, cases=[{"N": 77, "K": 256}],
      note="K must be a multiple of 128: idx pads with 0, so a ragged last tile would scatter its padded lanes "
           "(mask true) past the end of dst, which the language leaves undefined. dst starts random: negative "
           "indices leave their element alone")


# gather_offsets.tle -------------------------------------------------------------------------------------------------
def _go_make(c, k, g):
    m, kk, r = c["M"], c["K"], c["R"]
    return {"x": randn((m, kk), g), "ids": randint((r,), g, -3, m + 3), "y": poison((r, kk))}


def _go_ref(a, c, k):
    ids = a["ids"].to(torch.int64)
    ok = (ids >= 0) & (ids < c["M"])
    y = torch.full((c["R"], c["K"]), -1.0, dtype=torch.float64)
    y[ok] = a["x"].double()[ids[ok]]
    return {"y": y}


entry(file="gather_offsets.tle", kernel="rows", make=_go_make, grid=lambda c, k: (cdiv(c["R"], 32), cdiv(c["K"], 64)),
      ref=_go_ref, tol={"y": EXACT}, cases=[{"M": 50, "K": 100, "R": 64}, {"M": 7, "K": 64, "R": 96}],
      note="row ids past both ends read `other`; R a multiple of BM (ids pads a ragged tile with row 0)")


# gather_beside_row.tle ----------------------------------------------------------------------------------------------
def _gbr_make(c, k, g):
    r, l = c["R"], c["L"]
    return {"x": randn((r, l), g), "w": randn((c["C"],), g), "y": poison((r, l)), "G": c["G"], "HW": c["HW"]}


def _gbr_ref(a, c, k):
    x = a["x"].double()
    cols = torch.arange(c["L"])
    ch = (torch.arange(c["R"])[:, None] % c["G"]) * (c["L"] // c["HW"]) + cols[None, :] // c["HW"]
    return {"y": (x - x.mean(dim=1, keepdim=True)) * a["w"].double()[ch]}


entry(file="gather_beside_row.tle", kernel="group_norm", make=_gbr_make, grid=lambda c, k: (c["R"],), ref=_gbr_ref,
      tol={"y": reduction(600, 2)},
      cases=[{"R": 8, "L": 600, "C": 12, "G": 4, "HW": 200}, {"R": 6, "L": 512, "C": 6, "G": 3, "HW": 256}],
      note="GroupNorm's centring times a per-channel gather: 3 channels of 200 (the row ragged against BLOCK 256) "
           "and 2 of 256")


# grid_facts.tle -----------------------------------------------------------------------------------------------------
def _rows_make(c, k, g):
    return {"x": randn((c["M"], c["N"]), g), "y": poison((c["M"], c["N"]))}


def _rows_ref(a, c, k):
    y = a["y"].double().clone()
    y[:, :1024] = 2 * a["x"].double()[:, :1024]  # tile [1, 1024] at column 0
    return {"y": y}


entry(file="grid_facts.tle", kernel="rows", make=_rows_make, grid=lambda c, k: (c["M"] + c.get("extra", 0),),
      ref=_rows_ref, tol={"y": EXACT},
      cases=[{"M": 6, "N": 1000}, {"M": 6, "N": 1500, "extra": 3}],
      note="an exact grid (the row check is dropped on the native path) and one with 3 programs past M (kept)")


# divisibility_bytes.tle ---------------------------------------------------------------------------------------------
def _scale_make(c, k, g):
    m, n, pad = c["M"], c["N"], c.get("pad", 0)
    return {"x": randn((m, n + pad), g)[:, :n], "y": poison((m, n))}  # x's rows are N + pad elements apart


entry(file="divisibility_bytes.tle", kernel="scale", make=_scale_make, grid=lambda c, k: (c["M"],), ref=_rows_ref,
      tol={"y": EXACT}, cases=[{"M": 6, "N": 1000}, {"M": 5, "N": 1001}, {"M": 4, "N": 996, "pad": 8}],
      note="N = 1000: N and the strides divisible by 8 (four-wide f32 accesses); 1001: by nothing; 996 in rows "
           "1004 apart: N and x's stride by 4, y's stride by 4")


# if_else.tle --------------------------------------------------------------------------------------------------------
def _ifelse_ref(a, c, k):
    x = a["x"].double()
    even = (torch.arange(x.shape[0]) // 64) % 2 == 0
    return {"y": torch.where(even, x * 2.0, -x)}


entry(file="if_else.tle", kernel="k", make=lambda c, k, g: {"x": randn((c["N"],), g), "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=_ifelse_ref, tol={"y": chain(1)}, cases=[{"N": 250}],
      note="an even number of programs (4), so that program ids counted from the other end would flip the parity")


# int_ops.tle --------------------------------------------------------------------------------------------------------
def _ints_ref(a, c, k):
    t = a["x"].to(torch.int64)
    q = torch.div(t, 3, rounding_mode="trunc")
    r = torch.fmod(q, 5)  # C remainder: the sign of the dividend
    shl = wrap(t << 2, 32)
    # precedence (docs/language.md): | lowest, then ^, then &, then the shifts
    return {"y": wrap(r ^ (shl & (t >> 1)) | ~t, 32)}


entry(file="int_ops.tle", kernel="ints",
      make=lambda c, k, g: {"x": randint((c["N"],), g, -(1 << 31), 1 << 31), "y": poison((c["N"],), torch.int32)},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=_ints_ref, tol={"y": EXACT}, cases=[{"N": 200}])


# join.tle ----------------------------------------------------------------------------------------------------------
def _join_make(c, k, g):
    n = c["N"]
    return {"x": randn((n,), g), "i": randint((n,), g, -1000, 1000), "y": poison((2 * cdiv(n, 64) * 64,))}


def _join_ref(a, c, k):
    n = c["N"]
    pad = cdiv(n, 64) * 64
    x = torch.zeros(pad, dtype=torch.float64)
    i = torch.zeros(pad, dtype=torch.float64)
    x[:n], i[:n] = a["x"].double(), a["i"].double()
    return {"y": torch.stack([x, i], -1).reshape(-1)}


entry(file="join.tle", kernel="interleave", make=_join_make, grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=_join_ref, tol={"y": EXACT}, cases=[{"N": 100}, {"N": 64}],
      note="x and i interleaved; the ragged last tile's padding (zeros) is interleaved too")


# fn_values.tle -----------------------------------------------------------------------------------------------------
def _lse_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g, scale=4.0), "lse": poison((m, 1)), "rmax": poison((m, 1))}


def _lse_ref(a, c, k):
    x = a["x"].double()
    return {"lse": torch.logsumexp(x, dim=1, keepdim=True), "rmax": x.max(dim=1, keepdim=True).values}


entry(file="fn_values.tle", kernel="logsumexp", make=_lse_make, grid=lambda c, k: (cdiv(c["M"], 16),), ref=_lse_ref,
      tol={"lse": reduction(200, 4), "rmax": EXACT}, cases=[{"M": 40, "N": 200}, {"M": 16, "N": 64}],
      note="online max and sum carried through a fn that returns both; ragged rows and columns")
entry(file="fn_values.tle", kernel="swap", make=lambda c, k, g: {"x": randn((c["N"],), g), "y": randn((c["N"],), g)},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=lambda a, c, k: {"x": a["y"].double(), "y": a["x"].double() * 2.0},
      tol={"x": EXACT, "y": EXACT}, cases=[{"N": 100}],
      note="a, b = b, a * 2.0 reads both before writing either")


# split.tle ---------------------------------------------------------------------------------------------------------
def _split_make(c, k, g):
    m = c["M"]
    return {"x": randn((m, 64), g), "cs": randn((m, 32), g), "sn": randn((m, 32), g), "y": poison((m, 64))}


def _split_ref(a, c, k):
    x = a["x"].double().reshape(-1, 32, 2)
    e, o = x[..., 0], x[..., 1]
    cs, sn = a["cs"].double(), a["sn"].double()
    return {"y": torch.stack([e * cs - o * sn, e * sn + o * cs], -1).reshape(-1, 64)}


entry(file="split.tle", kernel="rope_pairs", make=_split_make, grid=lambda c, k: (cdiv(c["M"], 16),), ref=_split_ref,
      tol={"y": chain(2)}, cases=[{"M": 40}, {"M": 16}], note="interleaved pairs split, rotated and joined back")


# layernorm_where.tle ------------------------------------------------------------------------------------------------
def _ln_make(c, k, g):
    m, n = c["M"], c["N"]
    # a mean far from 0 (the padded columns must not count in the variance) and an eps that matters
    return {"x": randn((m, n), g) + 3.0, "y": poison((m, n)), "eps": 0.25}


def _ln_ref(a, c, k):
    m, n = a["x"].shape
    w = min(n, 256)  # tile [1, 256] at column 0: the statistics use the first 256 columns but divide by N
    t = a["x"].double()[:, :w]
    mean = t.sum(dim=1, keepdim=True) / n
    d = t - mean
    y = a["y"].double().clone()
    y[:, :w] = d * torch.rsqrt((d * d).sum(dim=1, keepdim=True) / n + a["eps"])
    return {"y": y}


entry(file="layernorm_where.tle", kernel="ln", make=_ln_make, grid=lambda c, k: (c["M"],), ref=_ln_ref,
      tol={"y": reduction(256, 6)}, cases=[{"M": 7, "N": 200}, {"M": 3, "N": 300}],
      note="N=300 > BLOCK: only the first 256 columns are read and written (and the sums still divide by N)")


# logic_compare.tle --------------------------------------------------------------------------------------------------
def _lc_make(c, k, g):
    x = randn((c["N"],), g)
    x[::7] = NAN
    x[3], x[5] = INF, -INF
    return {"x": x, "y": poison((c["N"],))}


def _lc_ref(a, c, k):
    t = a["x"].double()
    keep = ((t > 0) & (t < 1)) | ~(t != t)  # ordered comparisons are false on NaN; != is true
    return {"y": torch.where(keep, t, torch.zeros_like(t))}


entry(file="logic_compare.tle", kernel="lc", make=_lc_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_lc_ref,
      tol={"y": EXACT}, cases=[{"N": 150}], note="NaNs (and infinities) in x: a NaN is the only thing set to 0")


# loop_carried.tle ---------------------------------------------------------------------------------------------------
entry(file="loop_carried.tle", kernel="rowsum",
      make=lambda c, k, g: {"x": randn((c["M"], c["N"]), g), "y": poison((c["M"], 1))},
      grid=lambda c, k: (c["M"],), ref=lambda a, c, k: {"y": a["x"].double().sum(dim=1, keepdim=True)},
      tol={"y": reduction(300, 1)}, cases=[{"M": 5, "N": 300}])


# math_funcs.tle -----------------------------------------------------------------------------------------------------
def _m_ref(a, c, k):
    t = a["x"].double()
    r = (torch.exp2(t) + torch.log(t) + torch.log2(t) + torch.sqrt(t) + torch.sin(t) + torch.cos(t) + torch.tanh(t)
         + sigmoid64(t) + torch.special.erf(t) + t.abs() + torch.floor(t) + torch.ceil(t))
    return {"y": r}


entry(file="math_funcs.tle", kernel="m",
      make=lambda c, k, g: {"x": uniform((c["N"],), g, 0.05, 4.0), "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=_m_ref, tol={"y": chain(27)}, cases=[{"N": 150}],
      note="x > 0 so that log and sqrt are defined; 12 functions, 11 adds and sigmoid's 4 ops: d = 27")


# mask_signed_constant_start.tle -------------------------------------------------------------------------------------
def _center_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g), "y": poison((m, n))}


def _center_ref(a, c, k):
    w = min(c["N"], 64)  # tile [1, 64] at column 0: every column it writes is < N, so `inside` holds there
    y = a["y"].double().clone()
    y[:, :w] = a["x"].double()[:, :w] - 1.0
    return {"y": y}


entry(file="mask_signed_constant_start.tle", kernel="center", make=_center_make, grid=lambda c, k: (c["M"],),
      ref=_center_ref, tol={"y": chain(1)}, cases=[{"M": 4, "N": 50}, {"M": 3, "N": 80}])


# matmul_dot.tle -----------------------------------------------------------------------------------------------------
def _mm_make(c, k, g):
    m, n, kk = c["M"], c["N"], c["K"]
    return {"a": randn((m, kk), g, torch.float16), "b": randn((kk, n), g, torch.float16), "c": poison((m, n))}


entry(file="matmul_dot.tle", kernel="mm", make=_mm_make, grid=lambda c, k: (cdiv(c["M"], 64), cdiv(c["N"], 64)),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(80)}, interp_tol={"c": dot_f32(80)}, cases=[{"M": 100, "N": 70, "K": 80}],
      note="ragged M, N and K (K=80 is 2.5 tiles of 32: the zero-padded last tile adds nothing)")


# dot_batched.tle ----------------------------------------------------------------------------------------------------
def _bmm_make(c, k, g):
    b, m, n, kk = c["B"], c["M"], c["N"], c["K"]
    return {"a": randn((b, m, kk), g, torch.float16), "b": randn((b, kk, n), g, torch.float16),
            "c": poison((b, m, n))}


entry(file="dot_batched.tle", kernel="bmm", make=_bmm_make,
      grid=lambda c, k: (cdiv(c["M"], 64), cdiv(c["N"], 32), cdiv(c["B"], 2)),
      ref=lambda a, c, k: {"c": torch.bmm(a["a"].double(), a["b"].double())},
      tol={"c": dot_half(80)}, interp_tol={"c": dot_f32(80)}, cases=[{"B": 5, "M": 100, "N": 70, "K": 80}],
      note="ragged B, M, N and K: the last program's second product and the tiles' edges read zeros")


# dot_loop_split.tle -------------------------------------------------------------------------------------------------
entry(file="dot_loop_split.tle", kernel="mm", make=_mm_make,
      grid=lambda c, k: (cdiv(c["M"], 128), cdiv(c["N"], 128)),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(300)}, interp_tol={"c": dot_f32(300)},
      cases=[{"M": 200, "N": 130, "K": 299}, {"M": 130, "N": 200, "K": 300}, {"M": 128, "N": 128, "K": 296}],
      note="K=299: rows not 16-byte aligned and an odd K (Tile IR splits the K loop); K=300: unaligned rows, an "
           "even K (not split); K=296: aligned rows (not split); ragged M and N")


# pipeline_dot_loop.tle ----------------------------------------------------------------------------------------------
def _scaled_mm_make(c, k, g):
    m, n, kk = c["M"], c["N"], c["K"]
    return {"a": randn((m, kk), g, torch.float16), "b": randn((kk, n), g, torch.float16),
            "s": uniform((m, c["KB"]), g, 0.5, 2.0), "c": poison((m, n))}


def _scaled_mm_ref(a, c, k):
    x, w, s = a["a"].double(), a["b"].double(), a["s"].double()
    out = torch.zeros(c["M"], c["N"], dtype=torch.float64)
    for t in range(cdiv(c["K"], 32)):  # BK = 32: each K tile's product scaled by that tile's column of s
        out += (x[:, 32 * t:32 * t + 32] @ w[32 * t:32 * t + 32]) * s[:, t:t + 1]
    return {"c": out}


entry(file="pipeline_dot_loop.tle", kernel="scaled_mm", make=_scaled_mm_make,
      grid=lambda c, k: (cdiv(c["M"], 64), cdiv(c["N"], 64)), ref=_scaled_mm_ref,
      tol={"c": dot_half(2 * 80) + chain(2)}, interp_tol={"c": dot_f32(2 * 80) + chain(2)},
      cases=[{"M": 100, "N": 70, "K": 80, "KB": 3}, {"M": 64, "N": 64, "K": 256, "KB": 8}],
      note="ragged M, N and K (K=80: the last tile is half zeros), and 8 full K tiles; scales up to 2 double "
           "each tile's rounding, hence 2K in the dot tolerance")


# persistent_grid.tle ------------------------------------------------------------------------------------------------
def _mm16_make(c, k, g):
    m, n, kk = c["M"], c["N"], c["K"]
    return {"a": randn((m, kk), g, torch.float16), "b": randn((kk, n), g, torch.float16),
            "c": poison((m, n), torch.float16)}


entry(file="persistent_grid.tle", kernel="matmul", make=_mm16_make,
      grid=lambda c, k: (cdiv(c["M"], 128), cdiv(c["N"], 128)),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(128)}, cases=[{"M": 256, "N": 384, "K": 128}, {"M": 200, "N": 130, "K": 100}],
      note="c in f16 (its rounding is within dot_half); 2x3 whole tiles, then ragged M, N and K. Launches this "
           "small get one program per tile; tests/gpu/test_persistent_gpu.py runs the persistent loop")


# persistent_tma.tle -------------------------------------------------------------------------------------------------
entry(file="persistent_tma.tle", kernel="mm", make=_mm_make, consts=[{}, {"TMA": False}],
      grid=lambda c, k: (c["programs"],),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(48)}, interp_tol={"c": dot_f32(48)},
      cases=[{"M": 64, "N": 48, "K": 32, "programs": 5}, {"M": 37, "N": 50, "K": 45, "programs": 3},
             {"M": 16, "N": 16, "K": 16, "programs": 4}],
      note="5 programs over 12 tiles (rows 16-byte aligned: TMA on the native path), 3 over a ragged 3x4 "
           "(pointers), and 4 programs for 1 tile: 3 idle")


# max_argmax_one_reduce.tle ------------------------------------------------------------------------------------------
def _maa_make(c, k, g):
    m = c["M"]
    x = randn((m, 64), g)
    x[1, 3] = x[1, 40] = 9.0  # a tie for the max: the first index
    x[2, 7] = x[2, 50] = NAN  # a NaN: max is NaN, argmax the first NaN, the weight NaN
    x[3, :] = -0.0  # all -0.0 but one +0.0 (a +0.0 in the row's middle): max is +0.0, argmax 0 (they are equal)
    x[3, 30] = 0.0
    x[4, 9] = INF  # +inf: the max, exp(l - m) has a NaN at it (inf - inf)
    return {"x": x, "w": poison((m,)), "e": poison((m,), torch.int32), "lo": poison((m,))}


def _maa_ref(a, c, k):
    x = a["x"].double()
    mx = x.amax(dim=1, keepdim=True)
    return {"w": 1.0 / torch.exp(x - mx).sum(dim=1), "e": first_extreme(x, "max"),
            "lo": (a["x"] + 1.0).double().amin(dim=1)}


entry(file="max_argmax_one_reduce.tle", kernel="router", make=_maa_make, grid=lambda c, k: (cdiv(c["M"], 16),),
      ref=_maa_ref, tol={"w": reduction(64, 2), "e": EXACT, "lo": EXACT}, cases=[{"M": 21}],
      note="max and argmax of one tile as one reduce: ties, a NaN, -0.0 against +0.0, +inf; M=21: the second "
           "program's rows past M are -inf pads, never stored")


# early_return.tle ---------------------------------------------------------------------------------------------------
def _er_make(c, k, g):
    return {"x": randn((c["N"],), g), "n": torch.tensor([3], dtype=torch.int32), "y": poison((c["N"],))}


def _er_ref(a, c, k):
    y = torch.full((c["N"],), NAN, dtype=torch.float64)
    y[:3 * 16] = a["x"][:3 * 16].double() * 2.0  # programs 0-2 store; 3 and 4 return first
    return {"y": y}


entry(file="early_return.tle", kernel="k", make=_er_make, grid=lambda c, k: (cdiv(c["N"], 16),), ref=_er_ref,
      tol={"y": EXACT}, cases=[{"N": 80}],
      note="a bare return: programs 3 and 4 of 5 return before their store, so their elements keep the poison")


# slice.tle ----------------------------------------------------------------------------------------------------------
_SL_LENS = (5, 0, 37, 16, 1, 64, 23)  # packed sequences: empty, shorter than a tile, exact tiles, ragged


def _sl_make(c, k, g):
    starts = [0]
    for n in _SL_LENS:
        starts.append(starts[-1] + n)
    rows = starts[-1] + 3  # three rows past the last sequence: no program writes them
    return {"x": randn((rows, 32), g, torch.float16), "cu": torch.tensor(starts, dtype=torch.int32),
            "y": poison((rows, 32), torch.float16)}


def _sl_ref(a, c, k):
    y = a["y"].double().clone()
    cu = a["cu"].tolist()
    for s, (first, last) in enumerate(zip(cu[:-1], cu[1:])):
        y[first:last] = (a["x"][first:last].double() * (s + 1)).half().double()
    return {"y": y}


entry(file="slice.tle", kernel="scale_packed", make=_sl_make,
      grid=lambda c, k: (len(_SL_LENS), cdiv(max(_SL_LENS), 16)), ref=_sl_ref, tol={"y": EXACT}, cases=[{}],
      note="each program scales its tile of one packed sequence by the sequence's number + 1: a row read or written "
           "past its window would take the wrong factor; the rows past the last sequence keep the poison")


# scan_combine.tle ---------------------------------------------------------------------------------------------------
def _rec_make(c, k, g):
    m = c["M"]
    return {"a": uniform((m, 64), g, -1.0, 1.0), "b": randn((m, 64), g), "fwd": poison((m, 64)),
            "bwd": poison((m, 64))}


def _rec_ref(a, c, k):
    x, y = a["a"].double(), a["b"].double()
    fwd, bwd = torch.empty_like(x), torch.empty_like(x)
    h = g = torch.zeros(x.shape[0], dtype=torch.float64)
    for i in range(64):  # h[i] = a[i] h[i-1] + b[i]; g[i] = a[i] g[i+1] + b[i]
        h = x[:, i] * h + y[:, i]
        fwd[:, i] = h
        j = 63 - i
        g = x[:, j] * g + y[:, j]
        bwd[:, j] = g
    return {"fwd": fwd, "bwd": bwd}


entry(file="scan_combine.tle", kernel="recurrence", make=_rec_make, grid=lambda c, k: (cdiv(c["M"], 2),),
      ref=_rec_ref, tol={"fwd": reduction(64, 2), "bwd": reduction(64, 2)}, cases=[{"M": 5}],
      note="a first-order linear recurrence forwards and backwards: a non-commutative combine, so a backend that "
           "swapped the earlier and later element (or reversed the wrong way) fails")


# cumulative.tle -----------------------------------------------------------------------------------------------------
def _cum_make(c, k, g):
    m, n = c["M"], c["N"]
    x = uniform((m, n), g, 0.8, 1.25) * torch.where(uniform((m, n), g, 0, 1) < 0.3, -1.0, 1.0)
    x[1, 10] = NAN  # cummax and cummin propagate it (so do the products and sums)
    x[2] = -uniform((n,), g, 0.5, 2.0)  # all negative but a -0.0 and, later, a +0.0: the running max reaches zero
    x[2, 5], x[2, 8] = -0.0, 0.0
    return {"x": x, **{name: poison((m, n)) for name in ("p", "hi", "lo", "tail")}}


def _cum_ref(a, c, k):
    n = c["N"]
    t = pad2(a["x"], a["x"].shape[0], 64, 0.0)  # tile [1, 64] at column 0, padded with 0: the reverse scans see pads
    rev = t.flip(1)
    out = {"p": torch.cumprod(t, 1), "hi": torch.cummax(t, 1).values, "lo": torch.cummin(rev, 1).values.flip(1),
           "tail": torch.cumsum(rev, 1).flip(1)}
    w = min(n, 64)
    result = {}
    for name, v in out.items():
        y = a[name].double().clone()  # columns past the tile stay NaN
        y[:, :w] = v[:, :w]
        result[name] = y
    return result


entry(file="cumulative.tle", kernel="cum", make=_cum_make, grid=lambda c, k: (c["M"],), ref=_cum_ref,
      tol={"p": chain(64), "hi": EXACT, "lo": EXACT, "tail": reduction(64, 1)},
      cases=[{"M": 4, "N": 50}, {"M": 3, "N": 64}],
      note="N=50: the reverse scans start in the tile's zero padding, so the running min from the end is at most 0")


# static_range.tle -----------------------------------------------------------------------------------------------------
def _stages_ref(a, c, k):
    t = a["x"].double()[:8].clone()
    for s in range(3):  # the kernel's three copies: butterflies of pairs h = 1 << s apart
        h = 1 << s
        r = t.reshape(8 // (2 * h), 2, h).transpose(1, 2)
        t = torch.stack([r[..., 0] + r[..., 1], r[..., 0] - r[..., 1]], -1).transpose(1, 2).reshape(8)
    y = a["y"].double().clone()  # elements past the tile stay NaN
    y[:8] = t
    return {"y": y}


entry(file="static_range.tle", kernel="stages", make=lambda c, k, g: {"x": randn((c["N"],), g),
                                                                     "y": poison((c["N"],))},
      grid=lambda c, k: (1,), ref=_stages_ref, tol={"y": reduction(8, 1)},
      cases=[{"N": 8}, {"N": 11}],
      note="a Walsh-Hadamard transform of 8 values in three butterfly stages, one per copy of the body")


# reduce_combine.tle -------------------------------------------------------------------------------------------------
def _mom_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g, scale=3.0) + 5.0, "mean": poison((m,)), "variance": poison((m,))}


def _mom_ref(a, c, k):
    x = a["x"].double()
    return {"mean": x.mean(1), "variance": x.var(1, unbiased=False)}


for _kernel, _note in (
        ("moments", "Welford over rows offset by 5 (a two-pass-free variance that does not cancel); N=50: 14 padded "
                    "elements of count 0 per row"),
        ("moments_any_order", "moments with commutative=true: a tree on the GPU, the same tolerance (the fn commutes "
                              "up to rounding, which the interpreter checks at every step)")):
    entry(file="reduce_combine.tle", kernel=_kernel, make=_mom_make, grid=lambda c, k: (cdiv(c["M"], 4),),
          ref=_mom_ref, tol={"mean": reduction(64, 4), "variance": reduction(64, 6)},
          cases=[{"M": 6, "N": 50}, {"M": 4, "N": 64}], note=_note)


def _sl_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"a": uniform((m, n), g, 0.5, 1.0), "x": randn((m, n), g), "h": poison((m, n)), "last": poison((m,))}


def _sl_ref(a, c, k):
    av, xv = a["a"].double(), a["x"].double()
    h = a["h"].double().clone()
    acc = torch.zeros(av.shape[0], dtype=torch.float64)
    for i in range(av.shape[1]):
        acc = av[:, i] * acc + xv[:, i]
        h[:, i] = acc
    return {"h": h, "last": acc}


entry(file="reduce_combine.tle", kernel="steps_and_last", make=_sl_make, grid=lambda c, k: (cdiv(c["M"], 2),),
      ref=_sl_ref, tol={"h": reduction(64, 2), "last": reduction(64, 2)},
      cases=[{"M": 5, "N": 64}, {"M": 4, "N": 50}],
      note="the reduce takes the scan's last element (one scan on both paths); N=50: the padding is the identity "
           "(a = 1 by pad=, x = 0), so the last element is step 49's h")


def _seg_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g), "starts": (uniform((m, n), g, 0, 1) < 0.2).to(torch.int8), "y": poison((m, n))}


def _seg_ref(a, c, k):
    x, starts = a["x"].double(), a["starts"]
    y = a["y"].double().clone()
    run = torch.zeros(x.shape[0], dtype=torch.float64)
    for i in range(min(c["N"], 128)):
        run = torch.where(starts[:, i] != 0, x[:, i], run + x[:, i])
        y[:, i] = run
    return {"y": y}


entry(file="reduce_combine.tle", kernel="segments", make=_seg_make, grid=lambda c, k: (c["M"],), ref=_seg_ref,
      tol={"y": reduction(128, 1)}, cases=[{"M": 5, "N": 100}, {"M": 3, "N": 200}],
      note="a running sum that restarts at each flagged element: (bool, f32) pairs; N=200: columns 128.. stay NaN")


# log1p_expm1.tle ----------------------------------------------------------------------------------------------------
def _sp_make(c, k, g):
    n = c["N"]
    x = randn((n,), g, scale=8.0)  # beyond 20 in places: the softplus' other branch, and clamps both ways
    x[3], x[7], x[11] = NAN, INF, -INF
    x[20] = 1e-7  # log1p and expm1 near 0, where log(1 + x) and exp(x) - 1 lose every digit
    return {"x": x, "y": poison((n,)), "h": poison((n,), torch.float16), "flags": poison((n,), torch.int8)}


def _sp_ref(a, c, k):
    x = a["x"].double()
    sp = torch.where(x > 20.0, x, torch.log1p(torch.exp(x)))
    h = torch.expm1(a["x"].half().double()).half().double()  # f16 in, computed wider, rounded once
    return {"y": torch.clamp(sp + torch.expm1(x * 0.125), -4.0, 8.0), "h": h,
            "flags": (torch.isnan(x).long() + 2 * torch.isinf(x).long())}


entry(file="log1p_expm1.tle", kernel="softplus", make=_sp_make, grid=lambda c, k: (cdiv(c["N"], 128),), ref=_sp_ref,
      tol={"y": chain(4), "h": chain(1, torch.float16), "flags": EXACT}, cases=[{"N": 300}],
      note="libdevice on the native path, composed of log and exp on Tile IR; NaN and both infinities, and a value "
           "near 0 where log1p and expm1 differ from log(1 + x) and exp(x) - 1")


# sign_isfinite_any_all.tle -----------------------------------------------------------------------------------------
_SFA_DT = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}


def _sfa_make(c, k, g):
    m, n, dt = c["M"], c["N"], _SFA_DT[k.get("T", "f32")]
    if dt.is_floating_point:
        x = randn((m, n), g)
        x[:2] = x[:2].abs()  # a program (rows 0, 1) whose tile is all >= 0
        x[1, :4] = torch.tensor([0.0, 0.5, 2.0, 3.0])
        x[2, :6] = torch.tensor([NAN, INF, -INF, -0.0, 0.0, -2.0])
        x[4, 9] = -INF
        x = x.to(dt)
    else:
        x = randint((m, n), g, -3, 4, dt)
        x[:2] = x[:2].abs()
    return {"x": x, "s": poison((m, n), dt), "fin": poison((m, n), torch.int8), "bad": poison((m, 1), torch.int8),
            "pos": poison((m,), torch.int8), "count": torch.zeros(2, dtype=torch.int32)}


def _sfa_ref(a, c, k):
    x = a["x"]
    programs = pad2(x, cdiv(c["M"], 2) * 2, 64, 0.0).view(-1, 2 * 64)  # each program's padded [2, 64] tile
    return {"s": torch.sign(x), "fin": torch.isfinite(x).to(torch.int8),
            "bad": (~torch.isfinite(x)).any(dim=1, keepdim=True).to(torch.int8),
            "pos": (x >= 0).all(dim=1).to(torch.int8),
            "count": torch.tensor([torch.isnan(programs).any(dim=1).sum(), (programs >= 0).all(dim=1).sum()])}


entry(file="sign_isfinite_any_all.tle", kernel="sfa", make=_sfa_make, grid=lambda c, k: (cdiv(c["M"], 2),),
      ref=_sfa_ref, tol={"s": EXACT, "fin": EXACT, "bad": EXACT, "pos": EXACT, "count": EXACT},
      cases=[{"M": 5, "N": 50}], consts=[{}, {"T": "i32"}, {"T": "bf16"}],
      note="torch.sign gives 0 for NaN and 0.0 for -0.0; the padded elements (0) are finite and >= 0, so they "
           "change neither any(not isfinite) nor all(t >= 0)")


# round_trunc.tle ----------------------------------------------------------------------------------------------------
_DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _rt_make(c, k, g):
    dt = _DT[k.get("T", "f32")]
    x = randn((c["N"],), g, scale=6.0)
    special = [0.5, -0.5, 1.5, 2.5, -2.5, 3.5, -0.3, 0.49999997, -0.49999997, -0.0, 2.0 ** 23 + 1, -(2.0 ** 23) - 3,
               1e30, 1e-40, INF, -INF, NAN, 4194303.5, -4194304.5]
    x[:len(special)] = torch.tensor(special, dtype=torch.float64).float()
    return {"x": x.to(dt), "r": poison((c["N"],), dt), "t": poison((c["N"],), dt)}


def _rt_ref(a, c, k):
    x = a["x"]  # exact: round and trunc of a value of the type are values of the type
    return {"r": torch.round(x.double()).to(x.dtype), "t": torch.trunc(x.double()).to(x.dtype)}


entry(file="round_trunc.tle", kernel="rt", make=_rt_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_rt_ref,
      tol={"r": EXACT, "t": EXACT}, cases=[{"N": 150}], consts=[{}, {"T": "bf16"}, {"T": "f16"}],
      note="ties both ways, -0.0, the largest float below 0.5, values past 2^23 (already integers), 1e30, a "
           "subnormal, both infinities and NaN")


# print.tle ----------------------------------------------------------------------------------------------------------
entry(file="print.tle", kernel="show", make=lambda c, k, g: {"x": randn((c["N"],), g, torch.float16),
                                                            "n": randint((c["N"],), g, -(2 ** 40), 2 ** 40,
                                                                         torch.int64)},
      grid=lambda c, k: (cdiv(c["N"], 4),), ref=lambda a, c, k: {}, tol={}, cases=[{"N": 10}],
      note="writes nothing: it runs (and prints) on every path; tests/interp/test_print_assert.py checks the interpreter's "
           "lines, tests/gpu/test_print_gpu.py the GPU's")


# mesh_axes.tle ------------------------------------------------------------------------------------------------------
entry(file="mesh_axes.tle", kernel="ids", make=lambda c, k, g: {"out": poison((8,), torch.int32)},
      grid=lambda c, k: (1, 1, 1), ref=lambda a, c, k: {"out": torch.zeros(8, dtype=torch.int64)},
      tol={"out": EXACT},
      note="every program stores the whole of out (fixed [8]) at [0] with its own v, so only a one-program grid "
           "has a defined result (v = 0); a larger grid would be a race")


# minmax_elementwise.tle ---------------------------------------------------------------------------------------------
def _clamp_make(c, k, g):
    x = randn((c["N"],), g, scale=2.0)
    x[::11] = NAN
    x[4], x[6] = INF, -INF
    return {"x": x, "i": randint((c["N"],), g, -1000, 1000)}


entry(file="minmax_elementwise.tle", kernel="clamp", make=_clamp_make, grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"x": torch.minimum(torch.maximum(a["x"].double(), torch.tensor(-1.0)),
                                              torch.tensor(1.0)),
                           "i": torch.clamp(a["i"].to(torch.int64), min=0)},
      tol={"x": EXACT, "i": EXACT}, cases=[{"N": 150}],
      note="read-modify-write of x and i; NaN propagates through max/min")


# pad_values.tle -----------------------------------------------------------------------------------------------------
entry(file="pad_values.tle", kernel="p",
      make=lambda c, k, g: {"x": randn((c["N"],), g), "i": randint((c["N"],), g, -100, 100),
                            "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 32),),
      ref=lambda a, c, k: {"y": 2 * a["x"].double() + a["i"].double()},
      tol={"y": chain(2)}, cases=[{"N": 50}],
      note="the padded lanes (nan, inf, -7) of the ragged last tile are cut by the store")


# random.tle --------------------------------------------------------------------------------------------------------
def _dropout_make(c, k, g):
    return {"x": randn((c["N"],), g), "y": poison((c["N"],)), "seed": c["seed"], "p": f32(0.3)}


def _dropout_ref(a, c, k):
    keep = examples_reference.philox_rand(c["seed"], torch.arange(c["N"], dtype=torch.int32)) > f32(0.3)
    kept = a["x"] / torch.tensor(1.0 - f32(0.3), dtype=torch.float32)  # f32 arithmetic, as the kernel
    return {"y": torch.where(keep, kept, torch.zeros(1)).double()}


entry(file="random.tle", kernel="dropout", make=_dropout_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=_dropout_ref, tol={"y": chain(1)}, interp_tol={"y": EXACT},
      cases=[{"N": 1000, "seed": 12345}, {"N": 300, "seed": -(2 ** 62) - 7}],
      note="the mask is Triton's tl.rand bit for bit (examples/reference.py); a negative i64 seed uses both key words")


def _streams_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"bits": poison((m, n), torch.int32), "u": poison((m, n)), "z": poison((m, n)), "seed": c["seed"]}


def _streams_ref(a, c, k):
    m, n = c["M"], c["N"]
    offs = torch.arange(m * n, dtype=torch.int32).reshape(m, n)
    wide = offs.to(torch.int64) * 65537 + 3000000000
    ref = examples_reference
    return {"bits": ref.philox_randint(c["seed"], offs, rounds=7), "u": ref.philox_rand(c["seed"], wide).double(),
            "z": ref.philox_randn(c["seed"], offs)}


entry(file="random.tle", kernel="streams", make=_streams_make,
      grid=lambda c, k: (cdiv(c["M"], 8), cdiv(c["N"], 32)), ref=_streams_ref,
      tol={"bits": EXACT, "u": EXACT, "z": Tol(1e-5, 2e-5)}, interp_tol={"z": Tol(1e-6, 1e-6)},
      cases=[{"M": 20, "N": 70, "seed": -5}, {"M": 8, "N": 32, "seed": 2 ** 31 - 1}],
      note="randint with 7 rounds and an i32 seed (negative: sign-extended key), rand of i64 offsets past 2**32, "
           "randn (log, sqrt and cos round as each path's f32 functions: Tol, not EXACT)")


# random_words.tle --------------------------------------------------------------------------------------------------
def _dropout4_ref(a, c, k):
    n = c["N"]
    words = examples_reference.philox_rand(c["seed"], torch.arange(cdiv(n, 4), dtype=torch.int32), words=4)
    keep = words.flatten()[:n] > f32(0.3)
    kept = a["x"] / torch.tensor(1.0 - f32(0.3), dtype=torch.float32)
    return {"y": torch.where(keep, kept, torch.zeros(1)).double()}


entry(file="random_words.tle", kernel="dropout4", make=_dropout_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=_dropout4_ref, tol={"y": chain(1)}, interp_tol={"y": EXACT},
      cases=[{"N": 1000, "seed": 12345}, {"N": 130, "seed": -3}],
      note="element e keeps word e % 4 of counter e / 4 (Triton's rand4x), whatever BLOCK is")


# sort.tle ----------------------------------------------------------------------------------------------------------
def _sort_make(c, k, g):
    m, n = c["M"], c["L"]
    x = randn((m, n), g)
    x[0, 1], x[0, 5] = NAN, INF  # NaN after every number, inf before it
    x[1, 2], x[1, 3], x[1, 4] = -0.0, 0.0, -INF
    if n > 6:
        x[2, :6] = 0.5  # ties
    xi = randint((m, n), g, -50, 50)
    return {"x": x, "xi": xi, "up": poison((m, n)), "down": poison((m, n), torch.int32), "top": poison((m, 4))}


def _sort_ref(a, c, k):
    m, n = c["M"], c["L"]
    x = torch.full((m, 16), NAN, dtype=torch.float64)  # the ragged tile's padding is NaN
    x[:, :n] = a["x"].double()
    xi = torch.full((m, 16), -2 ** 31, dtype=torch.int64)  # padded with the smallest i32
    xi[:, :n] = a["xi"].long()
    up = torch.sort(x, dim=1).values  # torch: NaN last ascending, first descending
    x[:, n:] = -INF  # topk's load pads with -inf, which ranks last
    return {"up": up[:, :n], "down": torch.sort(xi, dim=1, descending=True).values[:, :n],
            "top": torch.sort(x, dim=1, descending=True).values[:, :4]}


entry(file="sort.tle", kernel="rows", make=_sort_make, grid=lambda c, k: (cdiv(c["M"], 4),), ref=_sort_ref,
      tol={"up": EXACT, "down": EXACT, "top": EXACT}, cases=[{"M": 7, "L": 16, "K": 4}, {"M": 4, "L": 11, "K": 4}],
      note="rows of 16 (or 11, padded with NaN, which sort last): ascending f32, descending i32, top 4; -0.0 and "
           "0.0 compare equal, so EXACT (== on floats) accepts either order of them")


def _route_make(c, k, g):
    m, n = c["M"], c["L"]
    x = randint((m, n), g, -4, 4, torch.int64).float() / 2  # many ties: the lower expert first
    x[0, 2] = NAN
    return {"logits": x, "top": poison((m, 4)), "ids": poison((m, 4), torch.int32),
            "order": poison((m, n), torch.int32)}


def _route_ref(a, c, k):
    m, n = c["M"], c["L"]
    x = torch.full((m, 16), -INF, dtype=torch.float64)  # the ragged tile's padding is -inf
    x[:, :n] = a["logits"].double()
    key = torch.nan_to_num(x, nan=1e308)  # NaN above every logit; -inf (the padding) stays below them
    down = torch.sort(-key, dim=1, stable=True).indices
    x[:, n:] = NAN  # argsort's load pads with NaN, which sorts last
    up = torch.sort(torch.nan_to_num(x, nan=1e308), dim=1, stable=True).indices
    return {"top": torch.gather(x, 1, down[:, :4]), "ids": down[:, :4], "order": up[:, :n]}


entry(file="sort.tle", kernel="route", make=_route_make, grid=lambda c, k: (cdiv(c["M"], 4),), ref=_route_ref,
      tol={"top": EXACT, "ids": EXACT, "order": EXACT}, cases=[{"M": 6, "L": 16, "K": 4}, {"M": 4, "L": 12, "K": 4}],
      note="half-integer logits (many ties: the lower position first), a NaN (largest); ragged rows padded -inf")


# scalar_load.tle ---------------------------------------------------------------------------------------------------
def _scalar_load_make(c, k, g):
    m, n, r = c["M"], c["N"], c["R"]
    x = randn((m, n), g)
    x[1, 0] = NAN  # the scalar read keeps NaN
    rows = randint((r,), g, 0, m)
    rows[0], rows[-1] = 1, m + 3  # row 1 (NaN first) and a row past the end: the scalar reads pad=-1, the tile 0
    return {"x": x, "rows": rows, "y": poison((r, n))}


def _scalar_load_ref(a, c, k):
    x, rows = a["x"].double(), a["rows"].long()
    inside = rows < c["M"]
    first = torch.where(inside, x[rows.clamp(max=c["M"] - 1), 0], torch.tensor(-1.0, dtype=torch.float64))
    tiles = torch.where(inside[:, None], x[rows.clamp(max=c["M"] - 1)], torch.zeros(1, dtype=torch.float64))
    return {"y": tiles - first[:, None]}


entry(file="scalar_load.tle", kernel="gather_rows", make=_scalar_load_make,
      grid=lambda c, k: (c["R"], cdiv(c["N"], 64)), ref=_scalar_load_ref, tol={"y": chain(1)},
      cases=[{"M": 10, "N": 100, "R": 6}],
      note="a row index read as a scalar, then x[row, 0] as a scalar with pad=-1 (NaN kept; past the end: -1)")


# store_scalar.tle ---------------------------------------------------------------------------------------------------
def _store_scalar_ref(a, c, k):
    m, n = a["x"].shape
    flags = a["flags"].clone().long()
    flags[:, 1] = 7
    return {"s": pad2(a["x"], m, 64, 0.0).sum(dim=1), "flags": flags}


entry(file="store_scalar.tle", kernel="row_sums", make=lambda c, k, g: {
          "x": randn((c["M"], c["N"]), g), "s": poison((c["M"],)),
          "flags": randint((c["M"], 2), g, -5, 5, torch.int16)},
      grid=lambda c, k: (c["M"] + 2,), ref=_store_scalar_ref, tol={"s": chain(64), "flags": EXACT},
      cases=[{"M": 7, "N": 100}, {"M": 5, "N": 40}],
      note="two programs past the last row write nothing; N=100: only the first 64 columns are summed; flags[:, 0] "
           "is left as it was")


# shape_ops.tle ------------------------------------------------------------------------------------------------------
def _sh_make(c, k, g):
    m, n = c["M"], c["N"]
    x = randn((m, n), g)
    if cdiv(m, 16) * cdiv(n, 32) > 1:
        # Every program stores rows 0..7 of its tile, flattened, into the whole of z: they must agree, so the first
        # 8 rows of every [16, 32] block are the same (the other rows, which only reach y, stay random).
        assert n % 32 == 0 and (m % 16 == 0 or m % 16 >= 8)
        for bi in range(cdiv(m, 16)):
            for bj in range(n // 32):
                x[bi * 16: bi * 16 + 8, bj * 32: bj * 32 + 32] = x[0:8, 0:32]
    return {"x": x, "y": poison((n, m)), "z": poison((4, 256))}


def _sh_ref(a, c, k):
    x = a["x"].double()
    first = pad2(x, 16, 32, 0.0)  # program (0, 0)'s tile (the others store the same rows into z)
    return {"y": x.t().clone(), "z": first.reshape(512)[:256].expand(4, 256).clone()}


entry(file="shape_ops.tle", kernel="sh", make=_sh_make, grid=lambda c, k: (cdiv(c["M"], 16), cdiv(c["N"], 32)),
      ref=_sh_ref, tol={"y": EXACT, "z": EXACT}, cases=[{"M": 13, "N": 27}, {"M": 40, "N": 96}],
      note="z takes the first 256 of the 512 flattened elements (rows 0..7 of the tile); M=13, N=27 is one "
           "ragged program (padded zeros reach z); M=40, N=96 is 3x3 programs with equal z rows")


# squeeze_unit_axes.tle ----------------------------------------------------------------------------------------------
def _heads_ref(a, c, k):
    q = a["q"].double()
    o = torch.empty(c["B"], c["S"], 32, dtype=torch.float64)
    for m0 in range(0, c["S"], 32):  # each program's tile: its rows against each other (padded rows are zero)
        t = q[:, m0:m0 + 32]
        o[:, m0:m0 + 32, :t.shape[1]] = t @ t.transpose(1, 2)
        o[:, m0:m0 + 32, t.shape[1]:] = 0.0
    return {"o": o, "r": 2 * q}


entry(file="squeeze_unit_axes.tle", kernel="heads",
      make=lambda c, k, g: {"q": randn((c["B"], c["S"], 16), g, torch.float16),
                            "o": poison((c["B"], c["S"], 32)), "r": poison((c["B"], c["S"], 16), torch.float16)},
      grid=lambda c, k: (cdiv(c["S"], 32), c["B"]), ref=_heads_ref,
      tol={"o": dot_half(16), "r": EXACT}, interp_tol={"o": dot_f32(16)}, cases=[{"B": 3, "S": 70}],
      note="3 batches of 70 rows: the last tile of each has 6 rows, padded with zeros that give zero columns")


# softmax_reduce.tle, softmax_tle.tle ----------------------------------------------------------------------------------
def _softmax_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g, scale=3.0), "y": poison((m, n))}


def _softmax_ref(block):
    def ref(a, c, k):
        n = a["x"].shape[1]
        w = min(n, block)
        y = a["y"].double().clone()
        y[:, :w] = torch.softmax(a["x"].double()[:, :w], dim=1)
        return {"y": y}
    return ref


entry(file="softmax_reduce.tle", kernel="softmax", make=_softmax_make, grid=lambda c, k: (c["M"],),
      ref=_softmax_ref(128), tol={"y": reduction(128, 4)}, cases=[{"M": 9, "N": 100}, {"M": 3, "N": 130}],
      note="BLOCK=128: N=130 leaves columns 128.. unwritten (the softmax is over the first 128)")
entry(file="softmax_tle.tle", kernel="softmax", make=_softmax_make, grid=lambda c, k: (c["M"],),
      ref=_softmax_ref(1024), tol={"y": reduction(1024, 4)}, cases=[{"M": 5, "N": 1000}, {"M": 3, "N": 517}])


# specialization.tle -------------------------------------------------------------------------------------------------
def _copy_make(c, k, g):
    m, n = c["M"], c["N"]
    x = randn((n, m), g).t() if c.get("transposed") else randn((m, n), g)  # a non-unit inner stride
    return {"x": x, "y": poison((m, n))}


def _copy_ref(a, c, k):
    y = a["y"].double().clone()
    y[:, :64] = a["x"].double()[:, :64]  # tile [4, 64] at column 0
    return {"y": y}


entry(file="specialization.tle", kernel="copy", make=_copy_make, grid=lambda c, k: (cdiv(c["M"], 4),),
      ref=_copy_ref, tol={"y": EXACT},
      cases=[{"M": 10, "N": 50}, {"M": 10, "N": 100, "transposed": True}],
      note="the file is about stride specialisation: the second case passes a transposed x (inner stride M) and "
           "N=100 > 64 leaves columns 64.. unwritten")


# loop_nonempty.tle --------------------------------------------------------------------------------------------------
def _loop_nonempty_ref(a, c, k):
    x = a["x"].double()
    return {"y": x.sum(1), "z": x[:, 64:].sum(1)}  # the second loop starts at tile 1


entry(file="loop_nonempty.tle", kernel="rowsum",
      make=lambda c, k, g: {"x": randn((c["M"], c["K"]), g), "y": poison((c["M"],)), "z": poison((c["M"],))},
      grid=lambda c, k: (cdiv(c["M"], 16),), ref=_loop_nonempty_ref, tol={"y": reduction(300, 0), "z": reduction(300, 0)},
      cases=[{"M": 40, "K": 300}, {"M": 20, "K": 50}, {"M": 20, "K": 0}],
      note="K=300: both loops run; K=50: only the first (one tile); K=0: neither, both sums are 0")


# loop_tile.tle ------------------------------------------------------------------------------------------------------
def _loop_tile_ref(a, c, k):
    x = a["x"].double()
    odd = (torch.arange(x.shape[0]) // 16) % 2 == 1  # the second loop starts at tile program_id(0) % 2
    return {"y": x.sum(1), "z": torch.where(odd, x[:, 64:].sum(1), x.sum(1))}


entry(file="loop_tile.tle", kernel="rowsum",
      make=lambda c, k, g: {"x": randn((c["M"], c["K"]), g), "y": poison((c["M"],)), "z": poison((c["M"],))},
      grid=lambda c, k: (cdiv(c["M"], 16),), ref=_loop_tile_ref, tol={"y": reduction(320, 0), "z": reduction(320, 0)},
      cases=[{"M": 64, "K": 256}, {"M": 40, "K": 300}, {"M": 48, "K": 64}],
      note="K=256 and 64: BK divides K, so the first loop's tiles load unmasked; K=300: tile 4 is ragged and checked")


# static_inside.tle --------------------------------------------------------------------------------------------------
def _fixed_ref(a, c, k):
    t = a["x"].double()[:16, 128:256]  # program 0's tile at [0, 1]
    y, z = a["y"].double().clone(), a["z"].double().clone()
    y[48:64, :128] = t
    z[32:48, :64] = t.reshape(32, 64)[:16]  # rows 48-63 of the [32, 64] tile at [1, 0] lie past z's 48 rows
    return {"y": y, "z": z}


entry(file="static_inside.tle", kernel="fixed",
      make=lambda c, k, g: {"x": randn((64, 256), g), "y": poison((64, 256)), "z": poison((48, 256))},
      grid=lambda c, k: (1,), ref=_fixed_ref, tol={"y": EXACT, "z": EXACT},
      note="static dims: constant indices whose checks are dropped (y, z's columns) and one that is kept (z's rows)")


# static_if.tle ------------------------------------------------------------------------------------------------------
def _act_make(c, k, g):
    x = randn((c["N"],), g)
    x[10] = NAN
    return {"x": x, "y": poison((c["N"],))}


entry(file="static_if.tle", kernel="act", make=_act_make, grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"y": torch.maximum(a["x"].double(), torch.tensor(0.0)) if k["RELU"]
                           else a["x"].double()},
      tol={"y": EXACT}, cases=[{"N": 150}], consts=[{"RELU": True}, {"RELU": False}])


# tile_base_i32.tle --------------------------------------------------------------------------------------------------
def _strided_rows_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n + 7), g)[:, :n], "y": poison((m, n))}  # x's rows are N + 7 elements apart


def _strided_rows_ref(a, c, k):
    w = min(c["N"], 64)
    y = a["y"].double().clone()
    y[:, :w] = a["x"].double()[:, :w] * 2.0
    return {"y": y}


entry(file="tile_base_i32.tle", kernel="rows", make=_strided_rows_make, grid=lambda c, k: (c["M"],),
      ref=_strided_rows_ref,
      tol={"y": chain(1)}, cases=[{"M": 5, "N": 50}, {"M": 3, "N": 100}])

# dim_wide_read.tle: a grid-stride loop over tiles that reads N (its IR is for N past 2^31 - 1, which
# tests/gpu/test_wide_tensors_gpu.py runs on the GPU); here at small sizes, more tiles than programs and a ragged end
def _dwr_make(c, k, g):
    return {"x": randn((c["N"],), g), "y": poison((c["N"],))}


entry(file="dim_wide_read.tle", kernel="strided", make=_dwr_make, grid=lambda c, k: (3,),
      ref=lambda a, c, k: {"y": a["x"].double() + 1.0},
      tol={"y": chain(1)}, cases=[{"N": 2000}, {"N": 255}])

# tile_base_wide.tle: tile_base_i32.tle's kernel; here at small sizes (its IR is for a tensor past 2^31 elements,
# which tests/gpu/test_wide_tensors_gpu.py runs on the GPU)
entry(file="tile_base_wide.tle", kernel="rows", make=_strided_rows_make, grid=lambda c, k: (c["M"],),
      ref=_strided_rows_ref,
      tol={"y": chain(1)}, cases=[{"M": 5, "N": 50}, {"M": 3, "N": 100}])


# tile_offsets_shared_with_mask.tle ----------------------------------------------------------------------------------
def _scale_make(c, k, g):
    n = c["N"]
    return {"x": randn((n,), g), "y": poison((n,))}


entry(file="tile_offsets_shared_with_mask.tle", kernel="scale", make=_scale_make,
      grid=lambda c, k: (cdiv(c["N"], 128),), ref=lambda a, c, k: {"y": a["x"].double() * 3.0},
      tol={"y": chain(1)}, cases=[{"N": 1000}, {"N": 128}])


# tile_gather.tle ----------------------------------------------------------------------------------------------------
_NO_TILE_GATHER = r"gather\(\) from a tile has no Tile IR lowering"


def _lut_make(c, k, g):
    n = c["N"]
    return {"codes": randint((n,), g, -128, 128, torch.int8), "table": randn((16,), g), "y": poison((n,))}


entry(file="tile_gather.tle", kernel="lut", make=_lut_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=lambda a, c, k: {"y": a["table"][(a["codes"].to(torch.int64) & 15)].double()},
      tol={"y": EXACT}, cases=[{"N": 300}], tileir_blocker=_NO_TILE_GATHER,
      note="codes past the last tile read pad 0, table[0], but are not stored")


def _perm_make(c, k, g):
    m, n = c["M"], c["N"]
    p = torch.stack([torch.randperm(8, generator=g) for _ in range(m)])[:, :n] % max(n, 1)
    return {"x": randn((m, n), g, torch.bfloat16), "p": p.to(torch.int64), "y": poison((m, n), torch.bfloat16)}


def _perm_ref(a, c, k):
    m, n = c["M"], c["N"]
    x = torch.zeros(m, 8, dtype=torch.bfloat16)  # the tile: columns past N read 0
    x[:, :n] = a["x"]
    return {"y": torch.gather(x, 1, a["p"]).double()}


entry(file="tile_gather.tle", kernel="permute_rows", make=_perm_make, grid=lambda c, k: (cdiv(c["M"], 4),),
      ref=_perm_ref, tol={"y": EXACT}, cases=[{"M": 10, "N": 8}, {"M": 7, "N": 6}], tileir_blocker=_NO_TILE_GATHER,
      note="N=6: the index tile's padded columns (0) gather column 0 and are not stored, nor are rows past M")


# inline_asm.tle -----------------------------------------------------------------------------------------------------
_NO_ASM = r"asm\(\) inlines PTX"


def _gelu(t):
    return 0.5 * t * (1.0 + torch.tanh(0.7978845608 * (t + 0.044715 * t ** 3)))


entry(file="inline_asm.tle", kernel="gelu_fast", make=lambda c, k, g: {"x": randn((c["N"],), g, scale=2.0),
                                                                       "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 128),), ref=lambda a, c, k: {"y": _gelu(a["x"].double())},
      tol={"y": Tol(1e-3, 2e-3)}, interp_tol={"y": chain(8)}, cases=[{"N": 1000}], tileir_blocker=_NO_ASM,
      note="tanh.approx.f32's relative error is at most 2^-10.987 (PTX ISA); near y = 0 (x very negative) that is "
           "an absolute error of 0.5|x| 2^-11. The interpreter runs ref=tanh(u): libm's tanh, chain(8)")
entry(file="inline_asm.tle", kernel="exp2_f16x2",
      make=lambda c, k, g: {"x": uniform((c["N"],), g, -8.0, 8.0, torch.float16), "y": poison((c["N"],), torch.float16)},
      grid=lambda c, k: (cdiv(c["N"], 256),), ref=lambda a, c, k: {"y": torch.exp2(a["x"].double())},
      tol={"y": Tol(2.0 ** -8, 0.0)}, interp_tol={"y": chain(1, torch.float16)}, cases=[{"N": 1001}],
      tileir_blocker=_NO_ASM, note="ex2.approx.f16x2, two halves a run; N odd: the last run has a padded half")


def _mixed_make(c, k, g):
    n = c["N"]
    return {"a": randint((n,), g, -(1 << 24), 1 << 24), "b": randint((n,), g, -128, 128, torch.int8),
            "s": int(torch.randint(-1000, 1000, (1,), generator=g)), "y": poison((n,), torch.int32),
            "z": poison((n,), torch.int8)}


entry(file="inline_asm.tle", kernel="mixed", make=_mixed_make, grid=lambda c, k: (cdiv(c["N"], 128),),
      ref=lambda a, c, k: {"y": (a["a"].long() * a["b"].long() + a["s"]).to(torch.int32).double(),
                           "z": (~a["b"]).double()},
      tol={"y": EXACT, "z": EXACT}, cases=[{"N": 300}, {"N": 130}], tileir_blocker=_NO_ASM,
      note="a * b + s wraps in i32 on both sides (|a b| < 2^31 here, so it never does); not.b32 on four bytes a run")


# trig.tle -----------------------------------------------------------------------------------------------------------
_TRIG_DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _trig_make(c, k, g):
    dt, n = _TRIG_DT[k.get("T", "f32")], c["N"]
    return {"x": uniform((n,), g, -1.4, 1.4, dt), "y": uniform((n,), g, -3.0, 3.0, dt), "a": poison((n,), dt),
            "h": poison((n,), dt)}


def _trig_ref(a, c, k):
    dt = a["x"].dtype

    def r(v):  # each op rounded to the element type, as on every path (docs/numerics.md)
        return v.to(dt).double()
    t, u = a["x"].double(), a["y"].double()
    return {"a": r(r(r(torch.atan2(u, t)) + r(torch.atan(t))) + r(torch.tan(t))),
            "h": r(r(torch.sinh(t)) + r(torch.cosh(u)))}


entry(file="trig.tle", kernel="trig", make=_trig_make, grid=lambda c, k: (cdiv(c["N"], 64),), ref=_trig_ref,
      tol={"a": chain(8), "h": chain(6)}, cases=[{"N": 150}],
      note="x in [-1.4, 1.4] keeps tan away from its poles; y in [-3, 3]. Three functions of a few ulps each "
           "(libdevice: tanf 4, atan2f 3; Tile IR's not measured yet) and two adds: chain(8)")


def _arc_make(c, k, g):
    x = uniform((c["N"],), g, -1.0, 1.0)
    x[:3] = torch.tensor([1.0, -1.0, 0.0])
    return {"x": x, "y": poison((c["N"],))}


entry(file="trig.tle", kernel="arc", make=_arc_make, grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"y": torch.asin(a["x"].double()) + torch.acos(a["x"].double())},
      tol={"y": chain(6)}, cases=[{"N": 100}],
      note="asin(x) + acos(x) = pi/2 for every x in [-1, 1], the ends included")


# two_kernels.tle ----------------------------------------------------------------------------------------------------
for _name, _value in (("first", 0.0), ("second", 1.0)):
    entry(file="two_kernels.tle", kernel=_name, make=lambda c, k, g: {"x": poison((c["N"],))},
          grid=lambda c, k: (cdiv(c["N"], 16),),
          ref=lambda a, c, k, v=_value: {"x": torch.full((c["N"],), v, dtype=torch.float64)},
          tol={"x": EXACT}, cases=[{"N": 50}])


# var_undef.tle ------------------------------------------------------------------------------------------------------
def _u_ref(a, c, k):
    y = a["x"].double().clone()
    y[:64] = 0.0  # program 0 takes the else branch
    return {"y": y}


entry(file="var_undef.tle", kernel="u", make=lambda c, k, g: {"x": randn((c["N"],), g), "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 64),), ref=_u_ref, tol={"y": EXACT}, cases=[{"N": 200}])


# vector_add.tle -----------------------------------------------------------------------------------------------------
def _add_make(c, k, g):
    n = c["N"]
    return {"x": randn((n,), g), "y": randn((n,), g), "out": poison((n,))}


entry(file="vector_add.tle", kernel="add", make=_add_make, grid=lambda c, k: (cdiv(c["N"], 256),),
      ref=lambda a, c, k: {"out": a["x"].double() + a["y"].double()}, tol={"out": chain(1)},
      cases=[{"N": 1000}])


# tileir/cumsum.tle --------------------------------------------------------------------------------------------------
def _tcs_ref(a, c, k):
    y = a["y"].double().clone()
    y[:, :1024] = torch.cumsum(a["x"].double()[:, :1024], dim=1)
    return {"y": y}


entry(file="tileir/cumsum.tle", kernel="cumsum", make=_softmax_make, grid=lambda c, k: (c["M"],), ref=_tcs_ref,
      tol={"y": reduction(1024, 1)}, cases=[{"M": 5, "N": 1000}, {"M": 3, "N": 517}])


# tileir/dot_add.tle -------------------------------------------------------------------------------------------------
entry(file="tileir/dot_add.tle", kernel="mm", make=_mm_make, grid=lambda c, k: (cdiv(c["M"], 64), cdiv(c["N"], 64)),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(80)}, interp_tol={"c": dot_f32(80)}, cases=[{"M": 100, "N": 70, "K": 80}],
      note="matmul_dot.tle's case: `acc += dot(a, b)` computes what dot(a, b, acc) does")


# tileir/gemv.tle ---------------------------------------------------------------------------------------------------
entry(file="tileir/gemv.tle", kernel="gemv",
      make=lambda c, k, g: {"w": randn((c["N"], c["K"]), g), "x": randn((c["K"],), g), "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 16),), ref=lambda a, c, k: {"y": a["w"].double() @ a["x"].double()},
      tol={"y": reduction(600, 1)}, cases=[{"N": 40, "K": 600}, {"N": 16, "K": 256}],
      note="rows and columns ragged against the 16x256 tile (x's tile padded with 0 past K), then both exact")


# tileir/inbounds.tle -------------------------------------------------------------------------------------------------
entry(file="tileir/inbounds.tle", kernel="rows", make=_rows_make, grid=lambda c, k: (c["M"] + c.get("extra", 0),),
      ref=_rows_ref, tol={"y": EXACT},
      cases=[{"M": 6, "N": 1024}, {"M": 6, "N": 1000}, {"M": 6, "N": 1500, "extra": 3}],
      note="the whole tile inside (no mask; an inbounds store), the columns ragged, and 3 programs past M (the row "
           "check kept)")


# tileir/layernorm.tle -----------------------------------------------------------------------------------------------
def _tln_make(c, k, g):
    m, n = c["M"], c["N"]
    return {"x": randn((m, n), g) + 3.0, "w": randn((n,), g), "b": randn((n,), g),
            "y": poison((m, n)), "eps": 0.25}


def _tln_ref(a, c, k):
    t = a["x"].double()
    n = t.shape[1]
    mean = t.mean(dim=1, keepdim=True)
    d = t - mean
    rstd = torch.rsqrt((d * d).sum(dim=1, keepdim=True) / n + a["eps"])
    return {"y": d * rstd * a["w"].double() + a["b"].double()}


entry(file="tileir/layernorm.tle", kernel="layernorm", make=_tln_make, grid=lambda c, k: (c["M"],), ref=_tln_ref,
      tol={"y": reduction(1024, 8)}, cases=[{"M": 5, "N": 600}])


# tileir/matmul.tle --------------------------------------------------------------------------------------------------
entry(file="tileir/matmul.tle", kernel="matmul",
      make=lambda c, k, g: {"a": randn((c["M"], c["K"]), g, torch.float16),
                            "b": randn((c["K"], c["N"]), g, torch.float16),
                            "c": poison((c["M"], c["N"]), torch.float16)},
      grid=lambda c, k: (cdiv(c["M"], 128), cdiv(c["N"], 128)),
      ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(100) + chain(1, torch.float16)},
      interp_tol={"c": dot_f32(100) + chain(1, torch.float16)},
      cases=[{"M": 150, "N": 130, "K": 100}], note="T=f16 (the default); the f32 accumulator is rounded to f16 once")


# tileir/f8.tle ------------------------------------------------------------------------------------------------------
def _q8_ref(a, c, k):
    qa = to_f8(a["a"], torch.float8_e5m2)
    return {"c": qa.double() @ a["b"].double(), "qa": qa.double()}


entry(file="tileir/f8.tle", kernel="q8",
      make=lambda c, k, g: {"a": randn((c["M"], c["K"]), g, scale=3.0),
                            "b": randn((c["K"], c["N"]), g, scale=3.0).to(torch.float8_e5m2),
                            "c": poison((c["M"], c["N"])), "qa": poison((c["M"], c["K"]), torch.float8_e5m2)},
      grid=lambda c, k: (cdiv(c["M"], 32), cdiv(c["N"], 32)), ref=_q8_ref,
      tol={"c": dot_f8(70), "qa": EXACT}, interp_tol={"c": dot_f32(70), "qa": EXACT},
      cases=[{"M": 50, "N": 40, "K": 70}],
      note="every program of a row of tiles stores the same qa tiles (the same values: no race in the result)")


# tileir/padding.tle -------------------------------------------------------------------------------------------------
def _pads_ref(a, c, k):
    x = a["x"].double()
    m, n = x.shape
    y = a["y"].double().clone()
    t = torch.full((16, 16), 1.0, dtype=torch.float64)  # tile at [1, 0] (rows 16..31), pad 1.0
    r = max(0, min(16, m - 16))
    t[:r, :min(16, n)] = x[16:16 + r, :16]
    u = pad2(x, 16, 16, NAN)  # pads NaN and -0.0: cut by the store, which writes rows < M and columns < N only
    rows, cols = min(16, m), min(16, n)
    y[:rows, :cols] = (t + u + u)[:rows, :cols]
    return {"y": y}


entry(file="tileir/padding.tle", kernel="pads",
      make=lambda c, k, g: {"x": randn((c["M"], c["N"]), g), "y": poison((c["M"], c["N"]))},
      grid=lambda c, k: (1,), ref=_pads_ref, tol={"y": chain(2)}, cases=[{"M": 25, "N": 13}],
      note="no program_id: one program (the tiles are fixed). M=25: rows 9..15 of t are pad 1.0; rows 16.. of y "
           "are never written")
entry(file="tileir/padding.tle", kernel="pads_dot",
      make=lambda c, k, g: {"a": randn((c["M"], 16), g, torch.float16), "b": randn((16, c["N"]), g, torch.float16),
                            "c": poison((c["M"], c["N"]))},
      grid=lambda c, k: (1,), ref=lambda a, c, k: {"c": a["a"].double() @ a["b"].double()},
      tol={"c": dot_half(16)}, interp_tol={"c": dot_f32(16)}, cases=[{"M": 11, "N": 13}],
      note="K = 16, one whole tile: the NaN rows of a (past M) and the -0.0 columns of b (past N) only reach "
           "elements of c past M or N, which the store cuts")


# tileir/reductions.tle ----------------------------------------------------------------------------------------------
def _red_make(c, k, g):
    m = c["M"]
    x = randn((m, 16), g)
    x[1, 3] = x[1, 11] = 7.0  # tie: the first index
    x[2, 5] = x[2, 9] = NAN  # NaN: the first NaN, and max is NaN
    x[3, :] = 1.5  # all equal: index 0
    x[4, 0] = INF
    return {"x": x, "am": poison((m,), torch.int32), "mx": poison((m,)),
            "n": randint((m, 16), g, -(1 << 31), 1 << 31), "s": poison((m,), torch.int32)}


def _red_ref(a, c, k):
    x = a["x"].double()
    mx = (2 * x).amax(dim=1)  # torch's amax propagates NaN, as max must
    assert torch.isnan(mx).equal(torch.isnan(x).any(dim=1))
    return {"am": first_extreme(x, "max"), "mx": mx, "s": wrap(a["n"].to(torch.int64).sum(dim=1), 32)}


entry(file="tileir/reductions.tle", kernel="red", make=_red_make, grid=lambda c, k: (c["M"],), ref=_red_ref,
      tol={"am": EXACT, "mx": EXACT, "s": EXACT}, cases=[{"M": 9}],
      note="ties, NaNs, a constant row and +inf; full-range i32 sums wrap")


# tileir/rmsnorm.tle -------------------------------------------------------------------------------------------------
def _trms_ref(a, c, k):
    t = a["x"].double()
    rstd = torch.rsqrt((t * t).sum(dim=1, keepdim=True) / t.shape[1] + a["eps"])
    return {"y": t * rstd * a["w"].double()}


entry(file="tileir/rmsnorm.tle", kernel="rmsnorm",
      make=lambda c, k, g: {"x": randn((c["M"], c["N"]), g), "w": randn((c["N"],), g),
                            "y": poison((c["M"], c["N"])), "eps": 0.25},
      grid=lambda c, k: (c["M"],), ref=_trms_ref, tol={"y": reduction(1024, 6)}, cases=[{"M": 5, "N": 600}])


# tileir/softmax.tle -------------------------------------------------------------------------------------------------
entry(file="tileir/softmax.tle", kernel="softmax", make=_softmax_make, grid=lambda c, k: (c["M"],),
      ref=_softmax_ref(1024), tol={"y": reduction(1024, 4)}, cases=[{"M": 5, "N": 1000}, {"M": 3, "N": 517}])


# tileir/swiglu.tle --------------------------------------------------------------------------------------------------
entry(file="tileir/swiglu.tle", kernel="swiglu",
      make=lambda c, k, g: {"gate": randn((c["M"], c["N"]), g, scale=3.0), "up": randn((c["M"], c["N"]), g),
                            "out": poison((c["M"], c["N"]))},
      grid=lambda c, k: (cdiv(c["M"], 16), cdiv(c["N"], 256)),
      ref=lambda a, c, k: {"out": a["gate"].double() * sigmoid64(a["gate"].double()) * a["up"].double()},
      tol={"out": chain(6)}, cases=[{"M": 40, "N": 300}])


# tileir/small_steps.tle --------------------------------------------------------------------------------------------
def _bag_make(c, k, g):
    lengths = randint((c["B"],), g, 0, 9, torch.int64)  # some bags empty: their row of out is 0
    offsets = torch.zeros(c["B"] + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    return {"table": randn((c["V"], c["D"]), g), "ids": randint((int(offsets[-1]),), g, 0, c["V"]),
            "offsets": offsets.to(torch.int32), "out": poison((c["B"], c["D"]))}


def _bag_ref(a, c, k):
    rows = a["table"].double()[a["ids"].long()]
    out = torch.zeros(c["B"], c["D"], dtype=torch.float64)
    for b in range(c["B"]):
        out[b] = rows[int(a["offsets"][b]):int(a["offsets"][b + 1])].sum(0)
    return {"out": out}


entry(file="tileir/small_steps.tle", kernel="embedding_bag", make=_bag_make,
      grid=lambda c, k: (c["B"], cdiv(c["D"], 128)), ref=_bag_ref, tol={"out": reduction(8, 1)},
      cases=[{"B": 12, "V": 50, "D": 200}, {"B": 5, "V": 7, "D": 128}],
      note="bags of 0 to 8 rows; D = 200 ragged against the 128-wide tile, then exact")


# tileir/tokens_if.tle -----------------------------------------------------------------------------------------------
entry(file="tileir/tokens_if.tle", kernel="maybe",
      make=lambda c, k, g: {"x": randn((c["N"],), g), "flag": c["flag"]},
      grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"x": a["x"].double() * (2.0 if c["flag"] > 0 else 1.0) + 1.0},
      tol={"x": chain(2)}, cases=[{"N": 200, "flag": 1}, {"N": 200, "flag": 0}, {"N": 200, "flag": -3}],
      note="x is read, maybe rewritten, then reread and rewritten: starts random")


# tileir/tokens_loop.tle ---------------------------------------------------------------------------------------------
entry(file="tileir/tokens_loop.tle", kernel="accum",
      make=lambda c, k, g: {"x": randn((c["N"],), g), "y": poison((c["N"],)), "steps": c["steps"]},
      grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"y": a["x"].double() * c["steps"]},
      tol={"y": chain(5)}, cases=[{"N": 200, "steps": 5}, {"N": 200, "steps": 0}],
      note="steps=0: the loop does not run and y is the zeros stored before it")


# tileir/tokens_reload.tle -------------------------------------------------------------------------------------------
entry(file="tileir/tokens_reload.tle", kernel="reload",
      make=lambda c, k, g: {"x": randn((c["N"],), g), "y": poison((c["N"],))},
      grid=lambda c, k: (cdiv(c["N"], 64),),
      ref=lambda a, c, k: {"y": a["x"].double() * 2.0, "x": a["x"].double() * 2.0 + 1.0},
      tol={"y": chain(1), "x": chain(2)}, cases=[{"N": 200}])


# tileir/vector_add.tle ----------------------------------------------------------------------------------------------
entry(file="tileir/vector_add.tle", kernel="vector_add", make=_add_make, grid=lambda c, k: (cdiv(c["N"], 1024),),
      ref=lambda a, c, k: {"out": a["x"].double() + a["y"].double()}, tol={"out": chain(1)}, cases=[{"N": 3000}])


# ---- running an entry ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def module(file: str):
    return tle.compile(os.path.join(GOLDEN_DIR, file))


def _seed(e: Entry, ki: int, ci: int) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"{e.id}:{ki}:{ci}".encode()))


def run_entry(e: Entry, backend: str | None = None) -> list[str]:
    """Launch every (constants, case) of an entry; the failures, one line each (empty: all match)."""
    kernel = getattr(module(e.file), e.kernel)
    failures = []
    for ki, consts in enumerate(e.consts):
        for ci, case in enumerate(e.cases):
            inputs = e.make(case, consts, _seed(e, ki, ci))
            before = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            expected = e.ref(before, case, consts)
            assert set(expected) == set(e.tol), f"{e.id}: ref writes {sorted(expected)}, tol has {sorted(e.tol)}"
            grid = e.grid(case, consts)
            if backend is None:
                args = inputs
                kernel[grid](**args, **consts)
                assert kernel.last_backend == "interp"
            else:
                args = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
                kernel[grid](**args, **consts, backend=backend)
                torch.cuda.synchronize()
                assert kernel.last_backend == backend
            for name, want in expected.items():
                tol = e.interp_tol.get(name, e.tol[name]) if backend is None else e.tol[name]
                err = compare(args[name], want, tol)
                if err is not None:
                    failures.append(f"{e.id} consts={consts} case={case} grid={grid} -> {name}: {err}")
            for name, v in before.items():  # tensors the kernel must not write are unchanged
                if isinstance(v, torch.Tensor) and name not in expected and compare(args[name], v, EXACT):
                    failures.append(f"{e.id} consts={consts} case={case}: input '{name}' was modified")
    return failures


# ---- tests --------------------------------------------------------------------------------------------------------

# Golden programs whose results take in lanes their loads pad (argmin over a row padded with -inf; a reverse cummin
# over one padded with 0): the padding's values are defined and the GPU must match them, so they stay, and the
# interpreter must say so (TlePaddingWarning). Every other golden program must run without that warning.
TAKES_IN_PADDING = {"argmax.tle::am", "cumulative.tle::cum"}


@pytest.mark.parametrize("e", TABLE, ids=[e.id for e in TABLE])
def test_golden_program_on_interpreter(e):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", tle.TlePaddingWarning)
        failures = run_entry(e)
    assert not failures, "\n".join(failures)
    padding = [str(w.message) for w in seen if issubclass(w.category, tle.TlePaddingWarning)]
    assert bool(padding) == (e.id in TAKES_IN_PADDING), padding or "no TlePaddingWarning"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("e", TABLE, ids=[e.id for e in TABLE])
def test_golden_program_on_gpu(e, backend):
    if backend == "tileir" and e.tileir_blocker is not None:
        with pytest.raises(tle.TleError, match=e.tileir_blocker):
            run_entry(e, backend)
        return
    failures = run_entry(e, backend)
    assert not failures, "\n".join(failures)


def golden_files() -> list[str]:
    """Every golden FileCheck program under tests/filecheck (a .tle file with RUN lines), relative paths."""
    out = []
    for path in sorted(glob.glob(os.path.join(GOLDEN_DIR, "**", "*.tle"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            if "RUN:" in f.read():
                out.append(os.path.relpath(path, GOLDEN_DIR).replace(os.sep, "/"))
    return out


def run_constant_sets(path: str) -> list[dict]:
    """The -D sets of the RUN lines that compile successfully (not `not tlec ...`)."""
    sets = []
    for cmd in _run_commands(path):
        first = cmd.split("|")[0].strip()
        if first.startswith("not ") or not re.match(r"tlec\b", first):
            continue
        words = shlex.split(first)
        consts = {}
        for i, w in enumerate(words):
            if w == "-D" and i + 1 < len(words):
                name, _, value = words[i + 1].partition("=")
                consts[name] = _scalar(value)
            elif w.startswith("-D") and len(w) > 2:
                name, _, value = w[2:].partition("=")
                consts[name] = _scalar(value)
        if consts not in sets:
            sets.append(consts)
    return sets


def runnable(rel: str) -> bool:
    """A golden file is runnable unless it is a deliberately bad program (error_*/bad_*) none of whose RUN lines
    compiles."""
    if not os.path.basename(rel).startswith(("error_", "bad_")):
        return True
    return bool(run_constant_sets(os.path.join(GOLDEN_DIR, rel)))


def test_table_covers_every_golden_program():
    """Every kernel of every runnable golden file has an entry, with every -D set of its RUN lines; no entry is
    stale. A new golden file fails here until it gets a reference (or an EXCLUDED line with the reason)."""
    by_file: dict[str, dict[str, Entry]] = {}
    for e in TABLE:
        assert e.kernel not in by_file.setdefault(e.file, {}), f"two entries for {e.id}"
        by_file[e.file][e.kernel] = e
    problems = []
    files = golden_files()
    assert len(files) >= 40, f"only {len(files)} golden files found under {GOLDEN_DIR}"
    for rel in files:
        if rel in EXCLUDED or not runnable(rel):
            continue
        if rel not in by_file:
            problems.append(f"{rel}: no entry in TABLE (add a reference, or an EXCLUDED line with the reason)")
            continue
        kernels = set(module(rel).kernels)
        missing = kernels - set(by_file[rel])
        if missing:
            problems.append(f"{rel}: kernels without an entry: {sorted(missing)}")
        wanted = run_constant_sets(os.path.join(GOLDEN_DIR, rel))
        for e in by_file[rel].values():
            for consts in wanted:
                if consts not in e.consts:
                    problems.append(f"{e.id}: the RUN lines' constants {consts} are not among {e.consts}")
    for rel, entries in by_file.items():
        if rel not in files:
            problems.append(f"{rel}: in TABLE but not a golden file")
            continue
        stale = set(entries) - set(module(rel).kernels)
        if stale:
            problems.append(f"{rel}: TABLE names kernels the file does not have: {sorted(stale)}")
    for rel in EXCLUDED:
        if rel not in files:
            problems.append(f"EXCLUDED names {rel}, which is not a golden file")
    assert not problems, "\n".join(problems)


def test_missing_constant_still_fails_at_launch():
    """error_missing_constant.tle is runnable only with BLOCK given; without it the launch is a TleError."""
    x = poison((64,))
    with pytest.raises(tle.TleError, match="missing compile-time constant 'BLOCK'"):
        module("error_missing_constant.tle").k[(1,)](x)


def test_tileir_legality_marks(monkeypatch):
    """The `tileir_blocker` marks agree with the Tile IR legality rules (the tool checks left out: this machine may
    lack tileiras), so the GPU variant's expectations are checked without a GPU."""
    from tle.compiler import compile_kernel
    from tle.lowering import tileir_legality

    monkeypatch.setattr(tileir_legality, "_tool_blockers", lambda arch, where: [])
    problems = []
    for e in TABLE:
        for consts in e.consts:
            mod = module(e.file)
            out = compile_kernel(mod.program, e.kernel, consts, stop="tle")
            blockers = tileir_legality.tileir_blockers(out.module, "sm_90")
            if e.tileir_blocker is None and blockers:
                problems.append(f"{e.id} {consts}: cannot take the Tile IR path ({blockers[0]}) but is not marked")
            elif e.tileir_blocker is not None and not any(re.search(e.tileir_blocker, str(b)) for b in blockers):
                problems.append(f"{e.id} {consts}: marked '{e.tileir_blocker}', but the blockers are "
                                f"{[str(b) for b in blockers]}")
    assert not problems, "\n".join(problems)


def test_compare_catches_wrong_and_unwritten_elements():
    """The comparison itself can fail: an element off by more than the tolerance, an unwritten NaN, a wrong
    integer, a NaN where a number is expected."""
    want = torch.tensor([1.0, 2.0, NAN, INF])
    assert compare(want.clone(), want, chain(1)) is None
    assert compare(torch.tensor([1.0, 2.0 + 1e-3, NAN, INF]), want, chain(1)) is not None
    assert compare(torch.tensor([NAN, 2.0, NAN, INF]), want, chain(1)) is not None
    assert compare(torch.tensor([1.0, 2.0, 0.0, INF]), want, chain(1)) is not None
    assert compare(torch.tensor([1.0, 2.0, NAN, -INF]), want, chain(1)) is not None
    assert compare(torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([1, 2, 4]), EXACT) is not None
    assert compare(torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([1, 2, 3]), EXACT) is None
