"""The one place tle imports the upstream MLIR Python bindings from.

Two providers ship the same upstream API:
- torch-mlir (`torch_mlir.ir`, ...), the pinned dependency on development and CI machines; it has IRDL, so the
  tle dialect is loaded into MLIR and verified by it;
- jaxlib (`jaxlib.mlir`), preinstalled on the GPU machine where torch-mlir is absent; it has no IRDL, so tle ops
  are built as unregistered ops there (the checker and the CI verification still cover them).

`TLE_MLIR=torch_mlir|jaxlib` forces one. Everything else in tle imports `ir`, `func`, `arith`, `scf`, `math`
and `new_context` from here, walk IR with `nested_ops` and test types and attributes with `isa`.
"""
from __future__ import annotations

import os

_choice = os.environ.get("TLE_MLIR", "")
PROVIDER = ""
irdl = None

if _choice in ("", "torch_mlir"):
    try:
        from torch_mlir import ir  # noqa: F401
        from torch_mlir.dialects import arith, func, math, scf  # noqa: F401
        from torch_mlir.dialects import irdl  # noqa: F401,F811
        PROVIDER = "torch_mlir"
    except ImportError:
        if _choice:
            raise
if not PROVIDER:
    try:
        from jaxlib.mlir import ir  # noqa: F401
        from jaxlib.mlir.dialects import arith, func, math, scf  # noqa: F401
        PROVIDER = "jaxlib"
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(
            "tle needs the MLIR Python bindings: pip install torch-mlir==20261001 (or have jaxlib installed)"
        ) from e


def isa(x, cls) -> bool:
    """isinstance for MLIR types and attributes: newer bindings downcast them, older ones have cls.isinstance."""
    return cls.isinstance(x) if hasattr(cls, "isinstance") else isinstance(x, cls)


def has_uses(v: "ir.Value") -> bool:
    """Whether anything reads v (the lowerings build an op's unread results only when they must)."""
    return next(iter(v.uses), None) is not None


def nested_ops(op: "ir.Operation"):
    """Every op nested in op's regions, in order (pre-order: an op before the ops of its own regions)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from nested_ops(child)


def new_context() -> "ir.Context":
    """A context with the upstream dialects tle uses loaded, that accepts the unregistered tt.* and cuda_tile.* ops."""
    ctx = ir.Context()
    if PROVIDER == "jaxlib":
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
    ctx.allow_unregistered_dialects = True
    return ctx
