"""How a kernel's parameters are passed, and what the runtime proved about them.

A tensor parameter `x: tensor<f32>[M, N]` is passed as its base pointer, then each symbolic dim not passed
before (M, N), then one stride per axis (in elements). A stride the runtime saw equal to 1 is not passed at all:
it is a constant in the compiled code. A scalar parameter is passed as itself.

`Spec` is the specialisation key: which arguments are divisible by 16 (for a pointer: 16-byte aligned) and
which strides are 1. The lowering writes these facts into the IR (tle.divisibility, folded strides) so that
the backends can vectorise and use TMA, as Triton does for its own arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

from .typed import Kernel, TensorParam


@dataclass(frozen=True)
class AbiArg:
    kind: str  # "ptr" | "dim" | "stride" | "scalar"
    name: str  # tensor, dim or scalar name
    dtype: str  # ptr: element type; dim and stride: i32; scalar: its type
    axis: int = -1  # stride: which axis

    @property
    def key(self) -> str:
        return f"{self.name}.stride{self.axis}" if self.kind == "stride" else self.name


@dataclass(frozen=True)
class Spec:
    divisible16: frozenset = frozenset()  # AbiArg keys
    unit_strides: frozenset = frozenset()  # stride keys equal to 1

    def key(self) -> str:
        return f"d16={','.join(sorted(self.divisible16))};unit={','.join(sorted(self.unit_strides))}"


def all_args(kernel: Kernel) -> list[AbiArg]:
    """Every argument a kernel could take, strides included, in ABI order."""
    out, seen = [], set()
    for p in kernel.params:
        if isinstance(p, TensorParam):
            out.append(AbiArg("ptr", p.name, p.type.dtype))
            for d in p.type.dims:
                if isinstance(d, str) and d not in seen:
                    seen.add(d)
                    out.append(AbiArg("dim", d, "i32"))
            out.extend(AbiArg("stride", p.name, "i32", axis) for axis in range(len(p.type.dims)))
        else:
            out.append(AbiArg("scalar", p.name, p.type.dtype))
    return out


def abi(kernel: Kernel, spec: Spec) -> list[AbiArg]:
    """The arguments actually passed under `spec` (unit strides dropped)."""
    return [a for a in all_args(kernel) if not (a.kind == "stride" and a.key in spec.unit_strides)]


def spec_of(kernel: Kernel, values: dict) -> Spec:
    """The specialisation real arguments prove. `values` maps AbiArg keys to the launch values: tensors for
    pointers (their data_ptr() is checked for 16-byte alignment), ints for dims, strides and scalars."""
    d16, unit = set(), set()
    for a in all_args(kernel):
        v = values[a.key]
        if a.kind == "ptr":
            if v.data_ptr() % 16 == 0:
                d16.add(a.key)
        elif a.kind == "stride" and v == 1:
            unit.add(a.key)
        elif isinstance(v, int) and not isinstance(v, bool) and a.dtype.startswith("i") and v % 16 == 0:
            d16.add(a.key)
    return Spec(frozenset(d16), frozenset(unit))


def default_spec(kernel: Kernel) -> Spec:
    """What tlec assumes without real tensors: 16-byte aligned base pointers and contiguous rows (last stride 1).
    Nothing is assumed about sizes or other strides."""
    d16, unit = set(), set()
    for p in kernel.params:
        if isinstance(p, TensorParam):
            d16.add(p.name)
            unit.add(f"{p.name}.stride{len(p.type.dims) - 1}")
    return Spec(frozenset(d16), frozenset(unit))


def generic_spec(kernel: Kernel) -> Spec:
    """Assume nothing (tlec --generic)."""
    return Spec()
