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


# Whenever the bindings wrap an operation they look for a Python module of its dialect (<prefix>.<namespace>, e.g.
# torch_mlir.dialects.tle), and a lookup that fails is tried again next time: tle's own namespaces have no such
# module, so each tle, tt or cuda_tile op the lowerings walked cost a failed import (48 of them to take cumsum.tle to
# TTIR). An empty module per namespace, under a search prefix of our own, ends that: the first lookup finds it and
# the bindings remember the namespace as loaded. The ops stay generic OpViews, as before.
_NO_OP_CLASSES = "tle.dialects._no_op_classes"


def _remember_tle_namespaces(namespaces=("tle", "tt", "cuda_tile")) -> None:
    import sys
    import types
    search = getattr(ir, "_globals", None)
    if not (hasattr(search, "append_dialect_search_prefix") and hasattr(search, "dialect_search_modules")):
        return  # bindings without these keep retrying, as before
    for ns in namespaces:
        sys.modules.setdefault(f"{_NO_OP_CLASSES}.{ns}", types.ModuleType(
            f"{_NO_OP_CLASSES}.{ns}", f"no Python op classes for the {ns} dialect (tle.dialects.mlir)"))
    if _NO_OP_CLASSES not in search.dialect_search_modules:
        search.append_dialect_search_prefix(_NO_OP_CLASSES)


_remember_tle_namespaces()


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


def operand_groups(op: "ir.Operation") -> list[list["ir.Value"]]:
    """op's operands split into its declared groups by `operandSegmentSizes` (an optional group is [] or [v])."""
    out, operands = [], list(op.operands)
    for n in ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]):
        out.append(operands[:n])
        operands = operands[n:]
    return out


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
