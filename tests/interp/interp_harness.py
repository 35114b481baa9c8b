"""Helpers for the interpreter tests: .tle text -> tle module -> interpret() with ABI-ordered arguments.

    run(SOURCE, "kernel", grid, {"x": x, "y": y}, scalars={"eps": 1e-5}, spec="generic")

`spec` is "default" (tlec's assumption: last strides 1, folded into the IR), "generic" (no unit strides: every
stride is a runtime argument) or a tle.abi.Spec.
"""
from __future__ import annotations

import torch

from tle.abi import Spec, abi, default_spec, generic_spec
from tle.check import check_kernel, load_program
from tle.lowering.ast_to_tle import ast_to_tle
from tle.runtime.interpreter import compile_kernel

SPECS = ("default", "generic")


def build(source: str, name: str, consts: dict | None = None, spec="default", file: str | None = None):
    """(typed kernel, spec, tle module) for kernel `name` of `source`."""
    kernel = check_kernel(load_program(source, file or f"{name}.tle"), name, consts)
    if spec == "default":
        spec = default_spec(kernel)
    elif spec == "generic":
        spec = generic_spec(kernel)
    assert isinstance(spec, Spec)
    return kernel, spec, ast_to_tle(kernel, spec)


def abi_args(kernel, spec: Spec, tensors: dict, scalars: dict | None = None) -> list:
    """The arguments in ABI order: tensors by parameter name, their dims read off the tensors, strides too."""
    dims = {}
    for p in kernel.params:
        t = tensors.get(p.name)
        if t is None or not hasattr(p.type, "dims"):
            continue
        assert t.dim() == len(p.type.dims), f"tensor {p.name} has {t.dim()} dims, the kernel wants {p.type.dims}"
        for d, n in zip(p.type.dims, t.shape):
            if isinstance(d, str):
                assert dims.setdefault(d, n) == n, f"dim {d} is {dims[d]} and {n}"
            else:
                assert d == n, f"{p.name} must have size {d}, got {n}"
    for key in spec.unit_strides:  # a folded stride must really be 1, or the test itself is wrong
        name, axis = key.split(".stride")
        if name in tensors and tensors[name].shape[int(axis)] > 1:
            assert tensors[name].stride(int(axis)) == 1, f"{key} is folded to 1 but the tensor's is not"
    out = []
    for a in abi(kernel, spec):
        if a.kind == "ptr":
            out.append(tensors[a.name])
        elif a.kind == "dim":
            out.append(dims[a.name])
        elif a.kind == "stride":
            out.append(tensors[a.name].stride(a.axis))
        else:
            out.append((scalars or {})[a.name])
    return out


def run(source: str, name: str, grid, tensors: dict, scalars: dict | None = None, consts: dict | None = None,
        spec="default", file: str | None = None):
    """Build and interpret kernel `name`; returns the compiled kernel (to inspect e.g. .batched)."""
    kernel, spec, module = build(source, name, consts, spec, file)
    compiled = compile_kernel(module)
    compiled.run(grid, abi_args(kernel, spec, tensors, scalars))
    return compiled


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values in a tensor whose last stride is not 1 (every other element of a wider buffer)."""
    wide = torch.zeros(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
    wide[..., ::2] = t
    out = wide[..., ::2]
    assert out.stride(-1) == 2 and torch.equal(out, t)
    return out


def transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values (2-D) stored column-major."""
    out = t.t().contiguous().t()
    assert out.stride() == (1, t.shape[0]) and torch.equal(out, t)
    return out


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
