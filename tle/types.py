"""The types of tle values: scalars and tiles of one element type, and tensor parameters.

Element types (dtypes): bool (i1), i8, i16, i32, i64, f16, bf16, f32, f64, and the 8-bit floats f8e4m3 and
f8e5m2. Promotion for mixed operands (docs/language.md, "Types"): a literal takes the other operand's type; float
beats int; the wider type wins; f16 with bf16 gives f32, and the two 8-bit floats give f16 (which holds both
exactly).

The 8-bit floats are storage types: tiles of them are loaded, stored, moved (reshape, transpose, where, ...),
converted and fed to dot, and arithmetic on them is an error (tle/check.py). They exist for the tensor cores'
8-bit products (twice the bf16 rate on sm_89 and sm_90) and for quantised weights and activations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .diagnostics import TleError

DTYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2")
ALIASES = {"bool": "i1"}
FLOATS = ("f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2")
INTS = ("i1", "i8", "i16", "i32", "i64")
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
        "f8e4m3": 8, "f8e5m2": 8}
BYTES = {d: max(1, b // 8) for d, b in BITS.items()}  # in memory: a bool takes a byte
# The 8-bit floats (OCP FP8): (mantissa bits, smallest normal exponent, largest finite value). f8e4m3 is E4M3FN:
# no infinities, one NaN pattern, 448 the largest value (torch.float8_e4m3fn, MLIR f8E4M3FN, Triton fp8e4nv);
# f8e5m2 is IEEE-like with infinities, 57344 the largest finite value (torch.float8_e5m2, MLIR f8E5M2).
F8 = {"f8e4m3": (3, -6, 448.0), "f8e5m2": (2, -14, 57344.0)}
# How MLIR spells them (the element types the tle dialect and both lowerings print): MLIR name -> tle name.
MLIR_F8 = {"f8E4M3FN": "f8e4m3", "f8E5M2": "f8e5m2"}


def canonical(name: str) -> str | None:
    name = ALIASES.get(name, name)
    return name if name in DTYPES else None


def is_float(d: str) -> bool:
    return d in FLOATS


def is_int(d: str) -> bool:
    return d in INTS


def is_f8(d: str) -> bool:
    return d in F8


def wrap(v: int, dtype: str) -> int:
    """Two's-complement wrap-around of an integer to dtype's width (what the hardware does; for i1, v != 0)."""
    if dtype == "i1":
        return bool(v)
    half = 1 << (BITS[dtype] - 1)
    return (v + half) % (2 * half) - half


# Where a finite value stops fitting a float type: from these magnitudes on it rounds to infinity (the largest finite
# value plus half its last unit, where round-to-nearest-even goes up: each largest value has an odd mantissa).
LARGEST_FLOAT = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}
ROUNDS_TO_INF = {"f16": 65520.0, "bf16": 3.3961775292304957e38, "f32": 3.4028235677973366e38}


def overflows(value: float, dtype: str) -> bool:
    """Whether a finite value becomes an infinity in dtype (an 8-bit float saturates instead: round_f8)."""
    return math.isfinite(value) and abs(value) >= ROUNDS_TO_INF.get(dtype, math.inf)


def overflow_error(span, value: float, dtype: str):
    """The TleError for a literal or constant that overflows(value, dtype)."""
    sign = "-" if value < 0 else ""
    return TleError(span, f"{value!r} does not fit in {dtype}: it rounds to {sign}inf (the largest {dtype} is "
                          f"{LARGEST_FLOAT[dtype]})",
                    [f"write {sign}inf if that is meant (a mask's fill, say), or compute in f32: cast<f32>(...) "
                     "before the operation"])


def round_f8(value: float, dtype: str) -> float:
    """value converted to the 8-bit float dtype as a conversion does on the GPU (PTX cvt.rn.satfinite): rounded to
    nearest, ties to even, and saturated to the largest finite value (so +-inf become +-448 in f8e4m3 and +-57344
    in f8e5m2); NaN stays NaN. Used for constants; the interpreter converts tiles the same way."""
    mantissa, min_exp, largest = F8[dtype]
    if math.isnan(value):
        return value
    magnitude = min(abs(value), largest)
    if magnitude == 0.0:
        return math.copysign(0.0, value)
    exp = max(math.frexp(magnitude)[1] - 1, min_exp)  # subnormals share the smallest normal exponent's step
    step = 2.0 ** (exp - mantissa)
    return math.copysign(min(round(magnitude / step) * step, largest), value)  # round() ties to even


def promote(a: str, b: str) -> str:
    """The common element type of two operands."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    if is_f8(a) and is_f8(b):
        return "f16"
    return a if BITS[a] >= BITS[b] else b


@dataclass(frozen=True)
class Scalar:
    dtype: str

    def __str__(self) -> str:
        return self.dtype if self.dtype != "i1" else "bool"


@dataclass(frozen=True)
class Tile:
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        d = self.dtype if self.dtype != "i1" else "bool"
        return f"tile<{d}>[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Tensor:
    """A kernel's tensor parameter: element type and dims (an int, or the name of a symbolic size; None for a
    slice's size that is known only at run time)."""
    dtype: str
    dims: tuple[int | str | None, ...]

    def __str__(self) -> str:
        return f"tensor<{self.dtype}>[{', '.join('?' if d is None else str(d) for d in self.dims)}]"


Type = Scalar | Tile | Tensor


def shape_of(t) -> tuple[int, ...]:
    return t.shape if isinstance(t, Tile) else ()


def with_dtype(t, dtype: str):
    return Tile(dtype, t.shape) if isinstance(t, Tile) else Scalar(dtype)


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy broadcasting: align trailing axes; sizes must match or be 1. None if incompatible."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


# scan() and reduce() with a combine fn take at most this many tiles: the dialect gives each an operand group of its
# own (dialects/tle.py, tle.combine_scan), so that they may differ in element type.
MAX_COMBINED = 8
# The most elements a tile may have (Triton's own limit, TRITON_MAX_TENSOR_NUMEL).
MAX_TILE_ELEMENTS = 1 << 20
