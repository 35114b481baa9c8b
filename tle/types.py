"""The types of tle values: scalars and tiles of one element type, and tensor parameters.

Element types (dtypes): bool (i1), i8, i16, i32, i64, f16, bf16, f32, f64. Promotion for mixed operands
(docs/language.md, "Types"): a literal takes the other operand's type; float beats int; the wider type wins;
f16 with bf16 gives f32.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
ALIASES = {"bool": "i1"}
FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i1", "i8", "i16", "i32", "i64")
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def canonical(name: str) -> str | None:
    name = ALIASES.get(name, name)
    return name if name in DTYPES else None


def is_float(d: str) -> bool:
    return d in FLOATS


def is_int(d: str) -> bool:
    return d in INTS


def promote(a: str, b: str) -> str:
    """The common element type of two operands."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if {a, b} == {"f16", "bf16"}:
        return "f32"
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
    """A kernel's tensor parameter: element type and dims (an int, or the name of a symbolic size)."""
    dtype: str
    dims: tuple[int | str, ...]

    def __str__(self) -> str:
        return f"tensor<{self.dtype}>[{', '.join(map(str, self.dims))}]"


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
