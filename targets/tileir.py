"""The CUDA Tile IR target: cuda_tile ops (dialects/cuda_tile.py) -> Tile IR bytecode -> tileiras -> cubin.

Two outside pieces, each wrapped once here:
- `cuda.tile._bytecode`, the bytecode writer inside cuTile Python. It is a private module, so this file is the only
  code in tle that imports cuda.tile, and it checks the pinned version (CUDA_TILE_VERSION) before using it.
- `tileiras`, NVIDIA's Tile IR optimizing assembler. It runs in a controlled environment (CUDA_HOME and CUDA_PATH
  removed: on the GPU machine a set CUDA_HOME makes it fail), with a timeout; a failure is run again with
  `--remarks=all` and turned into a TleError at the kernel's source location (a TileirasCrash where tileiras named
  no line).

Encoding is table-driven: _OPS has one entry per op, naming the encoder function, which of its parameters take
the op's result types and operands, and how each attribute is read. Every op's MLIR location is written into the
bytecode as debug info: tileiras' remarks name those source lines, and so does tileirdisasm when it rejects a module
(tileiras' own verifier errors carry no location, so a failure is located by running tileirdisasm on it).

The launch block size is not chosen by us: tileiras fixes it per kernel (EIATTR_REQNTID in the cubin's
.nv.info.<kernel> section), and any other block size fails with CUDA_ERROR_INVALID_VALUE. kernel_attributes() (in
targets/binary.py, which reads Triton's cubins too) reads it, with the parameter sizes the cubin expects, and the
registers per thread and local-memory (spill) bytes per thread that ptxas gave the kernel (Binary.extra["registers"],
["stack_bytes"]): with remarks(), the first things to look at when a kernel is slow (docs/tileir.md, "Performance").
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tle.diagnostics import Note, Span, TleError, span_of_location
from tle.dialects import cuda_tile as ct
from tle.dialects.mlir import ir
from tle.targets.binary import Binary, kernel_attributes

CUDA_TILE_VERSION = "1.7.0"
# Written bytecode version: the newest that cuda-tile 1.7.0 supports without its dev flag; tileiras 13.5 reads 13.1-13.5.
BYTECODE_VERSION = "13.4"
DEFAULT_TIMEOUT_S = 600.0


# --------------------------------------------------------------------------------------------------------------
# The one import of cuTile's bytecode writer
# --------------------------------------------------------------------------------------------------------------

@functools.cache
def _bc():
    try:
        from cuda.tile._version import __version__ as version
    except ImportError as e:
        raise ImportError(f"the Tile IR backend needs cuda-tile=={CUDA_TILE_VERSION} "
                          f"(pip install cuda-tile=={CUDA_TILE_VERSION})") from e
    if version != CUDA_TILE_VERSION:
        raise ImportError(f"the Tile IR backend is pinned to cuda-tile=={CUDA_TILE_VERSION}, found {version}: its "
                          f"bytecode writer is private and may change (pip install cuda-tile=={CUDA_TILE_VERSION})")
    import cuda.tile._bytecode as bc
    return bc


# --------------------------------------------------------------------------------------------------------------
# Attribute readers: each takes (op, attribute name) and returns what the encoder function wants
# --------------------------------------------------------------------------------------------------------------

def _enum(enum_name: str, default: str | None):
    """A string attribute holding an enum member's name, any case ("nearest_even" -> RoundingMode.NEAREST_EVEN)."""
    def read(op: ir.Operation, name: str):
        value = ir.StringAttr(op.attributes[name]).value if name in op.attributes else default
        if value is None:
            return None
        members = {m.name.lower().rstrip("_"): m for m in getattr(_bc(), enum_name)}
        if value.lower() not in members:
            raise ValueError(f"{name} = {value!r} is not one of {', '.join(members)}")
        return members[value.lower()]
    return read


def _flag(default: bool):
    def read(op: ir.Operation, name: str):
        return ir.BoolAttr(op.attributes[name]).value if name in op.attributes else default
    return read


def _int(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _str(op: ir.Operation, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value


def _i32_array(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes[name]))


def _inbounds(index_segment: int):
    """Per index dimension: is the access known to be in bounds. Default: not known, for every dimension."""
    def read(op: ir.Operation, name: str):
        if name in op.attributes:
            return list(ir.DenseBoolArrayAttr(op.attributes[name]))
        return [False] * _segments(op)[index_segment]
    return read


def _memory_hints(op: ir.Operation, name: str):
    """`latency` (1-10, expected DRAM traffic) and `allow_tma` attributes -> load/store optimization hints."""
    latency = _int(op, "latency") if "latency" in op.attributes else None
    allow_tma = ir.BoolAttr(op.attributes["allow_tma"]).value if "allow_tma" in op.attributes else None
    if latency is None and allow_tma is None:
        return None
    bc = _bc()
    from cuda.tile._bytecode.attribute import make_load_store_hints
    return make_load_store_hints({"default": bc.LoadStoreHints(latency=latency, allow_tma=allow_tma is not False)})


def _assume_predicate(op: ir.Operation, name: str):
    """`#cuda_tile.div_by<16>`, `#cuda_tile.div_by<4, every 2 along 1>`, `#cuda_tile.bounded<0, ?>`."""
    text = ir.OpaqueAttr(op.attributes[name]).data.decode()
    bc = _bc()
    if m := re.fullmatch(r"div_by<(\d+)(?:,\s*every\s+(-?\d+)\s+along\s+(-?\d+))?>", text):
        every, along = (int(m.group(2)), int(m.group(3))) if m.group(2) else (None, None)
        return bc.DivBy(int(m.group(1)), every, along)
    if m := re.fullmatch(r"bounded<(\?|-?\d+),\s*(\?|-?\d+)>", text):
        return bc.Bounded(*(None if g == "?" else int(g) for g in m.groups()))
    raise ValueError(f"unknown assume predicate #cuda_tile.{text}")


# --------------------------------------------------------------------------------------------------------------
# The op table
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Op:
    """How one cuda_tile op maps onto its `encode_<Name>` function.

    results: the encoder's parameters that take the op's result types, in result order ("*p": all of them).
    operands: the encoder's operand parameters in operand order; "*p" is a variadic group, "?p" an optional one.
      With more than one such group the op carries operandSegmentSizes.
    attrs: encoder parameter -> reader(op, name) of the MLIR attribute of that name.
    """
    encoder: str
    results: str = ""
    operands: str = ""
    attrs: dict[str, Callable] = field(default_factory=dict)
    regions: bool = False


def _table() -> dict[str, _Op]:
    rounding = _enum("RoundingMode", "nearest_even")
    ftz = _flag(False)
    signedness = _enum("Signedness", "signed")
    overflow = _enum("IntegerOverflow", "none")
    ordering = _enum("MemoryOrderingSemantics", "weak")
    scope = _enum("MemoryScope", None)
    float2 = dict(rounding_mode=rounding, flush_to_zero=ftz)
    r, s1, s2, s3 = "result_type", "source", "lhs rhs", "lhs rhs acc"
    ops = {
        # arithmetic: float
        "addf": _Op("AddFOp", r, s2, float2), "subf": _Op("SubFOp", r, s2, float2),
        "mulf": _Op("MulFOp", r, s2, float2), "divf": _Op("DivFOp", r, s2, float2),
        "fma": _Op("FmaOp", r, s3, float2),
        "maxf": _Op("MaxFOp", r, s2, dict(propagate_nan=_flag(False), flush_to_zero=ftz)),
        "minf": _Op("MinFOp", r, s2, dict(propagate_nan=_flag(False), flush_to_zero=ftz)),
        "remf": _Op("RemFOp", r, s2), "fpowf": _Op("FPowFOp", r, "source exponent"), "atan2": _Op("Atan2Op", r, "x y"),
        "negf": _Op("NegFOp", r, s1), "absf": _Op("AbsFOp", r, s1),
        "exp": _Op("ExpOp", r, s1, dict(rounding_mode=_enum("RoundingMode", "full"))),
        "exp2": _Op("Exp2Op", r, s1, dict(flush_to_zero=ftz)),
        "log": _Op("LogOp", r, s1), "log2": _Op("Log2Op", r, s1),
        "sqrt": _Op("SqrtOp", r, s1, float2), "rsqrt": _Op("RsqrtOp", r, s1, dict(flush_to_zero=ftz)),
        "sin": _Op("SinOp", r, s1), "cos": _Op("CosOp", r, s1), "tan": _Op("TanOp", r, s1),
        "sinh": _Op("SinHOp", r, s1), "cosh": _Op("CosHOp", r, s1),
        "tanh": _Op("TanHOp", r, s1, dict(rounding_mode=_enum("RoundingMode", "full"))),
        "floor": _Op("FloorOp", r, s1), "ceil": _Op("CeilOp", r, s1),
        # arithmetic: integer
        "addi": _Op("AddIOp", r, s2, dict(overflow=overflow)), "subi": _Op("SubIOp", r, s2, dict(overflow=overflow)),
        "muli": _Op("MulIOp", r, s2, dict(overflow=overflow)), "shli": _Op("ShLIOp", r, s2, dict(overflow=overflow)),
        "divi": _Op("DivIOp", r, s2, dict(signedness=signedness, rounding=_enum("RoundingMode", "zero"))),
        "remi": _Op("RemIOp", r, s2, dict(signedness=signedness)),
        "maxi": _Op("MaxIOp", r, s2, dict(signedness=signedness)),
        "mini": _Op("MinIOp", r, s2, dict(signedness=signedness)),
        "shri": _Op("ShRIOp", r, s2, dict(signedness=signedness)),
        "andi": _Op("AndIOp", r, s2), "ori": _Op("OrIOp", r, s2), "xori": _Op("XOrIOp", r, s2),
        "mulhii": _Op("MulhiIOp", r, "x y"),
        "absi": _Op("AbsIOp", r, s1), "negi": _Op("NegIOp", r, s1, dict(overflow=overflow)),
        # comparison and selection
        "cmpf": _Op("CmpFOp", r, s2, dict(comparison_predicate=_enum("ComparisonPredicate", None),
                                          comparison_ordering=_enum("ComparisonOrdering", "ordered"))),
        "cmpi": _Op("CmpIOp", r, s2, dict(comparison_predicate=_enum("ComparisonPredicate", None),
                                          signedness=signedness)),
        "select": _Op("SelectOp", r, "cond val_if_true val_if_false"),
        # conversions
        "ftof": _Op("FToFOp", "to_type", "from_", dict(rounding_mode=rounding)),
        "itof": _Op("IToFOp", "to_type", "from_", dict(signedness=signedness, rounding_mode=rounding)),
        "ftoi": _Op("FToIOp", "to_type", "from_", dict(signedness=signedness, saturating=_flag(False),
                                                       rounding_mode=_enum("RoundingMode", "nearest_int_to_zero"))),
        "exti": _Op("ExtIOp", "to_type", "from_", dict(signedness=signedness)),
        "trunci": _Op("TruncIOp", "to_type", "from_", dict(overflow=overflow)),
        "bitcast": _Op("BitcastOp", r, s1), "ptr_to_int": _Op("PtrToIntOp", r, s1),
        "int_to_ptr": _Op("IntToPtrOp", r, s1), "ptr_to_ptr": _Op("PtrToPtrOp", r, s1),
        # shapes
        "broadcast": _Op("BroadcastOp", r, s1), "reshape": _Op("ReshapeOp", r, s1),
        "permute": _Op("PermuteOp", r, s1, dict(permutation=_i32_array)),
        "iota": _Op("IotaOp", r), "cat": _Op("CatOp", r, s2, dict(dim=_int)),
        "extract": _Op("ExtractOp", r, "source *indices"),
        # matmul, reductions
        "mmaf": _Op("MmaFOp", r, s3, dict(fast_acc=_flag(False))),
        "mmai": _Op("MmaIOp", r, s3, dict(signedness_lhs=signedness, signedness_rhs=signedness)),
        "reduce": _Op("ReduceOp", "*result_types", "*operands", dict(dim=_int, identities=None), regions=True),
        "scan": _Op("ScanOp", "*result_types", "*operands", dict(dim=_int, reverse=_flag(False), identities=None),
                    regions=True),
        # constants, grid, tokens, assumptions
        "constant": _Op("ConstantOp", r, "", dict(value=None)),
        "get_tile_block_id": _Op("GetTileBlockIdOp", "blockId_x_type blockId_y_type blockId_z_type"),
        "get_num_tile_blocks": _Op("GetNumTileBlocksOp", "gridSize_x_type gridSize_y_type gridSize_z_type"),
        "make_token": _Op("MakeTokenOp", r), "join_tokens": _Op("JoinTokensOp", r, "*tokens"),
        "assume": _Op("AssumeOp", r, "value", dict(predicate=_assume_predicate)),
        # views and memory
        "make_tensor_view": _Op("MakeTensorViewOp", r, "base *dynamicShape *dynamicStrides"),
        "make_partition_view": _Op("MakePartitionViewOp", r, "tensor_view"),
        "get_index_space_shape": _Op("GetIndexSpaceShapeOp", "*result_types", "src"),
        "get_tensor_shape": _Op("GetTensorShapeOp", "*result_types", "src"),
        "load_view_tko": _Op("LoadViewTkoOp", "tile_type result_token_type", "view *index ?token",
                             dict(memory_ordering_semantics=ordering, memory_scope=scope,
                                  optimization_hints=_memory_hints, inbounds=_inbounds(1))),
        "store_view_tko": _Op("StoreViewTkoOp", "result_token_type", "tile view *index ?token",
                              dict(memory_ordering_semantics=ordering, memory_scope=scope,
                                   optimization_hints=_memory_hints, inbounds=_inbounds(2))),
        "offset": _Op("OffsetOp", r, "ptr offset"),
        "load_ptr_tko": _Op("LoadPtrTkoOp", "result_type result_token_type", "source ?mask ?paddingValue ?token",
                            dict(memory_ordering_semantics=ordering, memory_scope=scope,
                                 optimization_hints=_memory_hints)),
        "store_ptr_tko": _Op("StorePtrTkoOp", "result_token_type", "destination value ?mask ?token",
                             dict(memory_ordering_semantics=ordering, memory_scope=scope,
                                  optimization_hints=_memory_hints)),
        "atomic_rmw_tko": _Op("AtomicRMWTkoOp", "result_type result_token_type", "pointers arg ?mask ?token",
                              dict(memory_ordering_semantics=_enum("MemoryOrderingSemantics", "relaxed"),
                                   memory_scope=_enum("MemoryScope", "device"), mode=_enum("AtomicRMWMode", None))),
        "atomic_cas_tko": _Op("AtomicCASTkoOp", "result_type result_token_type", "pointers cmp val ?mask ?token",
                              dict(memory_ordering_semantics=_enum("MemoryOrderingSemantics", "relaxed"),
                                   memory_scope=_enum("MemoryScope", "device"))),
        # control flow
        "for": _Op("ForOp", "*result_types", "lowerBound upperBound step *initValues",
                   dict(unsignedCmp=_flag(False)), regions=True),
        "loop": _Op("LoopOp", "*result_types", "*initValues", regions=True),
        "if": _Op("IfOp", "*result_types", "condition", regions=True),
        "yield": _Op("YieldOp", "", "*operands"), "continue": _Op("ContinueOp", "", "*operands"),
        "break": _Op("BreakOp", "", "*operands"), "return": _Op("ReturnOp", "", "*operands"),
        "assert": _Op("AssertOp", "", "condition", dict(message=_str)),
        "print_tko": _Op("PrintTkoOp", "result_token_type", "*args ?token", dict(str=_str)),
    }
    return ops


_OPS = _table()
SUPPORTED_OPS = tuple(sorted(f"cuda_tile.{name}" for name in (*_OPS, "entry")))


def _segments(op: ir.Operation) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _group_operands(op: ir.Operation, spec: _Op) -> dict:
    """Split the op's operands over the encoder's operand parameters."""
    params = spec.operands.split()
    operands = list(op.operands)
    if "operandSegmentSizes" in op.attributes:
        sizes = _segments(op)
        if len(sizes) != len(params):
            raise ValueError(f"operandSegmentSizes has {len(sizes)} groups, {spec.encoder} takes {len(params)}")
    else:
        groups = [p for p in params if p[0] in "*?"]
        if len(groups) > 1:
            raise ValueError(f"needs operandSegmentSizes for its operand groups {groups}")
        fixed = len(params) - len(groups)
        sizes = [len(operands) - fixed if p[0] in "*?" else 1 for p in params]
    if sum(sizes) != len(operands):
        raise ValueError(f"{len(operands)} operands, but the operand groups hold {sum(sizes)}")
    grouped, at = {}, 0
    for param, size in zip(params, sizes):
        chunk = operands[at:at + size]
        at += size
        if param[0] == "*":
            grouped[param[1:]] = chunk
        elif param[0] == "?":
            if size > 1:
                raise ValueError(f"optional operand {param[1:]} given {size} values")
            grouped[param[1:]] = chunk[0] if chunk else None
        else:
            if size != 1:
                raise ValueError(f"operand {param} given {size} values")
            grouped[param] = chunk[0]
    return grouped


# --------------------------------------------------------------------------------------------------------------
# Encoding a module
# --------------------------------------------------------------------------------------------------------------

_SIMPLE = {"i1": "I1", "i8": "I8", "i16": "I16", "i32": "I32", "i64": "I64", "f16": "F16", "bf16": "BF16",
           "f32": "F32", "tf32": "TF32", "f64": "F64", "f8E4M3FN": "F8E4M3FN", "f8E5M2": "F8E5M2"}
_PADDING = {None: "Missing", "zero": "Zero", "neg_zero": "NegZero", "nan": "Nan", "pos_inf": "PosInf",
            "neg_inf": "NegInf"}


class _Encoder:
    """Encodes the entries of one module into one bytecode buffer."""

    def __init__(self, writer):
        self.bc = _bc()
        self.writer = writer
        self.types = writer.type_table
        self.debug = writer.debug_attr_table
        self.values: dict[ir.Value, object] = {}
        self.builder = None
        self.subprogram = None

    # -- types --
    def elem_id(self, elem: str):
        if elem.startswith("ptr<"):
            return self.types.pointer(self.elem_id(elem[4:-1]), self.bc.PtrAttr.Missing)
        return self.types.simple(self.bc.SimpleType[_SIMPLE[elem]])

    def type_id(self, t: ir.Type):
        return self._type_id(ct.parse_type(t))

    def _type_id(self, t: ct.CudaTileType):
        bc = self.bc
        if isinstance(t, ct.TileType):
            return self.types.tile(self.elem_id(t.elem), list(t.shape))
        if isinstance(t, ct.TokenType):
            return self.types.Token
        if isinstance(t, ct.TensorViewType):
            dyn = bc.DYNAMIC_SHAPE
            return self.types.tensor_view(self.elem_id(t.elem), [dyn if d is None else d for d in t.shape],
                                          [dyn if s is None else s for s in t.strides], bc.PtrAttr.Missing)
        if isinstance(t, ct.PartitionViewType):
            dim_map = list(t.dim_map) if t.dim_map is not None else list(range(len(t.tile)))
            return self.types.partition_view(list(t.tile), self._type_id(t.view), dim_map,
                                             bc.PaddingValue[_PADDING[t.padding]])
        raise TypeError(f"no bytecode type for {t}")

    # -- debug info --
    def debug_attr(self, loc: ir.Location):
        span = span_of_location(loc)
        if span is None or self.subprogram is None:
            return self.bc.MISSING_DEBUG_ATTR_ID
        return self.debug.loc(self.subprogram, span.file, span.line, span.col)

    # -- functions --
    def entry(self, op: ir.Operation):
        bc = self.bc
        name = _str(op, "sym_name")
        block = op.regions[0].blocks[0]
        span = span_of_location(op.location)
        if span is not None:
            directory, base = os.path.split(span.file)
            file_attr = self.debug.file(base, directory)
            self.subprogram = self.debug.subprogram(file=file_attr, line=span.line, name=name, linkage_name=name,
                                                    compile_unit=self.debug.compile_unit(file_attr),
                                                    scope_line=span.line)
        hints = {}
        fields = {k: _int(op, a) for k, a in (("num_cta_in_cga", "num_cta_in_cga"), ("occupancy", "occupancy"),
                                              ("num_worker_warps_per_cta", "num_worker_warps"))
                  if a in op.attributes}
        if fields:
            hints["default"] = bc.EntryHints(**fields)
        params = [self.type_id(a.type) for a in block.arguments]
        with self.writer.function(name=name, parameter_types=params, result_types=(), entry_point=True,
                                  hints=hints, debug_attr=self.debug_attr(op.location)) as (builder, args):
            self.builder = builder
            self.values.update(zip(block.arguments, args))
            self.block(block)
        self.builder = self.subprogram = None

    def block(self, block: ir.Block):
        for child in block.operations:
            self.op(child.operation)

    def op(self, op: ir.Operation):
        name = op.name.removeprefix("cuda_tile.")
        spec = _OPS.get(name) if op.name.startswith("cuda_tile.") else None
        if spec is None:
            raise _OpError(op, f"{op.name} cannot be encoded as Tile IR bytecode (no cuda_tile op of that name)")
        try:
            kwargs = self.arguments(op, name, spec)
            with self.builder.debug_attr(self.debug_attr(op.location)):
                out = getattr(self.bc, f"encode_{spec.encoder}")(self.builder, **kwargs)
                if spec.regions:
                    out = self.regions(op, out)
        except _OpError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure here is this op's, and must name it
            raise _OpError(op, f"cannot encode {op.name}: {e}") from e
        results = () if out is None else (out,) if isinstance(out, self.bc.Value) else tuple(out)
        if len(results) != len(op.results):
            raise _OpError(op, f"{op.name}: the encoder gave {len(results)} results, the op has {len(op.results)}")
        self.values.update(zip(op.results, results))

    def arguments(self, op: ir.Operation, name: str, spec: _Op) -> dict:
        kwargs = {}
        result_params = spec.results.split()
        if result_params and result_params[0].startswith("*"):
            kwargs[result_params[0][1:]] = [self.type_id(r.type) for r in op.results]
        else:
            if len(result_params) != len(op.results):
                raise ValueError(f"has {len(op.results)} results, Tile IR's op has {len(result_params)}")
            kwargs.update({p: self.type_id(r.type) for p, r in zip(result_params, op.results)})
        for param, value in _group_operands(op, spec).items():
            kwargs[param] = ([self.value(v) for v in value] if isinstance(value, list)
                             else None if value is None else self.value(value))
        for param, read in spec.attrs.items():
            kwargs[param] = read(op, param) if read is not None else None
        if name == "constant":
            kwargs["value"] = self.constant_bytes(op)
        if name in ("reduce", "scan"):
            kwargs["identities"] = [self.identity(a) for a in ir.ArrayAttr(op.attributes["identities"])]
        return kwargs

    def value(self, v: ir.Value):
        if v not in self.values:
            raise ValueError(f"operand {v.get_name()} is not defined by an encoded cuda_tile op")
        return self.values[v]

    def regions(self, op: ir.Operation, nested):
        for region in op.regions:
            block = region.blocks[0]
            with nested.new_block([self.type_id(a.type) for a in block.arguments]) as args:
                self.values.update(zip(block.arguments, args))
                self.block(block)
        return nested.done()

    # -- attribute payloads --
    def constant_bytes(self, op: ir.Operation) -> bytes:
        """The constant's data as Tile IR stores it (MLIR DenseElementsAttr layout): one element for a splat,
        else all elements row-major; i1 splat is 0xff/0x00, i1 non-splat is bit-packed."""
        import numpy as np
        t = ct.parse_type(op.results[0].type)
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if attr.is_splat:
            return self.scalar_bytes(attr.get_splat_value(), t.elem)
        if t.elem in ("bf16", "tf32", "f8E4M3FN", "f8E5M2"):
            raise ValueError(f"non-splat {t.elem} constants are not supported (build f32 and convert with ftof)")
        if t.elem == "i1":
            flat = np.array(ir.DenseIntElementsAttr(attr)).astype(bool).ravel()
            return np.packbits(flat, bitorder="little").tobytes()
        typed = ir.DenseIntElementsAttr(attr) if t.elem in ct.INT_TYPES else ir.DenseFPElementsAttr(attr)
        array = np.array(typed)
        return array.astype(array.dtype.newbyteorder("<")).tobytes()  # row-major, little-endian

    def scalar_bytes(self, attr: ir.Attribute, elem: str) -> bytes:
        bc = self.bc
        if elem == "i1":
            return b"\xff" if ir.IntegerAttr(attr).value else b"\x00"
        if elem in ct.INT_TYPES:
            bits = int(elem[1:])
            return (ir.IntegerAttr(attr).value & ((1 << bits) - 1)).to_bytes(bits // 8, "little")
        simple = bc.SimpleType[_SIMPLE[elem]]
        size = (bc.float_bit_size(simple) + 7) // 8  # tf32 is stored in 3 bytes
        return bc.float_to_bits(ir.FloatAttr(attr).value, simple).to_bytes(size, "little")

    def identity(self, attr: ir.Attribute):
        bc = self.bc
        if _is_float_attr(attr):
            f = ir.FloatAttr(attr)
            elem = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "tf32": "tf32"}[str(f.type)]
            return bc.Float(f.value, bc.SimpleType[_SIMPLE[elem]], self.types)
        i = ir.IntegerAttr(attr)
        width = ir.IntegerType(i.type).width
        if width == 1:
            return bc.Bool(bool(i.value))
        return bc.Integer(self.elem_id(f"i{width}"), width, i.value)


def _is_float_attr(attr: ir.Attribute) -> bool:
    try:
        ir.FloatAttr(attr)
        return True
    except (ValueError, TypeError):
        return False


class _OpError(Exception):
    def __init__(self, op: ir.Operation, message: str):
        super().__init__(message)
        self.op, self.message = op, message


def encode_bytecode(module: ir.Module) -> bytes:
    """Tile IR bytecode for every cuda_tile.entry of the module (ops must be cuda_tile ops only).

    Raises TleError at an op's source location when that op cannot be encoded."""
    bc = _bc()
    entries = ct.entries(module)
    if not entries:
        raise TleError(span_of_location(module.operation.location), "the module has no cuda_tile.entry kernel")
    version = bc.BytecodeVersion[f"V_{BYTECODE_VERSION.replace('.', '_')}"]
    buf = bytearray()
    try:
        with bc.write_bytecode(num_functions=len(entries), buf=buf, version=version) as writer:
            encoder = _Encoder(writer)
            for op in entries:
                encoder.entry(op)
    except _OpError as e:
        raise TleError(span_of_location(e.op.location), e.message,
                       [f"in: {e.op.get_asm(large_elements_limit=8)[:300]}"]) from e
    return bytes(buf)


# --------------------------------------------------------------------------------------------------------------
# tileiras and tileirdisasm
# --------------------------------------------------------------------------------------------------------------

def find_tileiras() -> str:
    """tileiras: $TLE_TILEIRAS, else on PATH, else in the nvidia-cuda-tileiras package (nvidia/cu13/bin)."""
    if env := os.environ.get("TLE_TILEIRAS"):
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"TLE_TILEIRAS={env} is not an executable file")
        return env
    if found := shutil.which("tileiras"):
        return found
    try:
        import nvidia.cu13 as cu13
        for root in cu13.__path__:
            candidate = os.path.join(root, "bin", "tileiras")
            if os.access(candidate, os.X_OK):
                return candidate
    except ImportError:
        pass
    raise FileNotFoundError("tileiras not found: set TLE_TILEIRAS, put it on PATH, "
                            "or pip install nvidia-cuda-tileiras")


def find_tileirdisasm() -> str:
    """tileirdisasm, beside tileiras (same wheel) or on PATH."""
    beside = os.path.join(os.path.dirname(find_tileiras()), "tileirdisasm")
    if os.access(beside, os.X_OK):
        return beside
    if found := shutil.which("tileirdisasm"):
        return found
    raise FileNotFoundError("tileirdisasm not found beside tileiras nor on PATH")


def _tool_env(tool: str) -> dict:
    """The environment tileiras runs in: CUDA_HOME/CUDA_PATH removed (a set CUDA_HOME breaks tileiras 13.5 on the
    GPU machine), its own directory first on PATH (ptxas lives beside it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
    return env


@functools.cache
def _version_of(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, env=_tool_env(tool), timeout=60)
    m = re.search(r"V(\d+\.\d+\.\d+)", out.stdout)
    return m.group(1) if m else out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def tileiras_version() -> str:
    """The tileiras release, e.g. "13.5.37"."""
    return _version_of(find_tileiras())


def disassemble(bytecode: bytes, *, debug_info: bool = False) -> str:
    """Tile IR bytecode as Tile IR text, by tileirdisasm (for tests and debugging)."""
    tool = find_tileirdisasm()
    with tempfile.TemporaryDirectory(prefix="tle-tileir-") as tmp:
        path = Path(tmp) / "kernel.tilebc"
        path.write_bytes(bytecode)
        args = [tool, str(path)] + (["--print-debug-info"] if debug_info else [])
        out = subprocess.run(args, capture_output=True, text=True, env=_tool_env(tool), timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"tileirdisasm failed (exit {out.returncode}): {out.stderr.strip()}")
    return out.stdout


@dataclass
class _Run:
    returncode: int
    output: str


def _run_tileiras(tool: str, bytecode_path: Path, cubin_path: Path, arch: str, opt_level: int,
                  timeout_s: float, extra: list[str] = ()) -> _Run:
    # --lineinfo: the cubin maps its SASS to the .tle lines the bytecode's locations name, as Triton's cubins do, for
    # Nsight Compute's source view and `tlec --emit=sass`. The code is the same: softmax's and cumsum's SASS were
    # identical with and without it (CPU machine), and tileiras took 1-3 ms more (of 125-130; median of 7).
    args = [tool, f"--gpu-name={arch}", f"--opt-level={opt_level}", "--lineinfo", "-o", str(cubin_path),
            str(bytecode_path), *extra]
    out = subprocess.run(args, capture_output=True, text=True, env=_tool_env(tool), timeout=timeout_s)
    return _Run(out.returncode, (out.stderr + out.stdout).strip())


def _verifier_errors(bytecode_path: Path) -> str:
    """tileiras prints verifier errors without locations; tileirdisasm, asked to print debug info, verifies the
    same module and prefixes each error with the op's location. Empty when it is absent or finds nothing."""
    try:
        tool = find_tileirdisasm()
        out = subprocess.run([tool, "--print-debug-info", str(bytecode_path)], capture_output=True, text=True,
                             env=_tool_env(tool), timeout=120)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return ""
    return out.stderr.strip() if out.returncode != 0 else ""


@dataclass
class Remark:
    """One tileiras optimization remark (`--remarks=all`): kind is passed, missed, failed or analysis."""
    kind: str
    title: str
    span: Span | None
    details: list[str]

    def __str__(self) -> str:
        return f"remark[{self.kind}]: {self.title}" + "".join(f"; {d}" for d in self.details)


def parse_remarks(text: str) -> list[Remark]:
    """The remarks in tileiras' command-line remark output."""
    remarks: list[Remark] = []
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"remark\[(\w+)\]:\s*(.*)", line):
            remarks.append(Remark(m.group(1), m.group(2), None, []))
        elif remarks and (m := re.match(r'-->\s*"([^"]+)":(\d+):(\d+)', line)):
            remarks[-1].span = Span(m.group(1), int(m.group(2)), int(m.group(3)))
        elif remarks and line.startswith("= ") and not line.startswith("= name:"):
            remarks[-1].details.append(re.sub(r'loc\("[^"]*":\d+:\d+\):\s*', "", line[2:]))
    return remarks


def remarks(bytecode: bytes, arch: str = "sm_90", *, opt_level: int = 3,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Remark]:
    """What tileiras reports about a kernel it compiles (`--remarks=all`): which loads, stores and MMAs it could
    select (TMA, wgmma, ...) and why not, each at the source location of the op. For performance work."""
    tool = find_tileiras()
    with tempfile.TemporaryDirectory(prefix="tle-tileir-") as tmp:
        path = Path(tmp) / "kernel.tilebc"
        path.write_bytes(bytecode)
        run = _run_tileiras(tool, path, Path(tmp) / "kernel.cubin", arch, opt_level, timeout_s, ["--remarks=all"])
    if run.returncode != 0:
        raise RuntimeError(f"tileiras failed (exit {run.returncode}): {run.output[:2000]}")
    return parse_remarks(run.output)


_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')


class TileirasCrash(TleError):
    """tileiras failed and named no line of the program: a crash, a signal, or an error without a location (13.5.37
    exits with status 5 and only "failed to compile Tile IR program" on some kernels it compiles on another number
    of worker warps). Nothing tle can pin on the kernel's source: tle/compiler.py drops a retry that ends so, keeping
    the binary it was to improve, and backend="auto" compiles on the native path a kernel whose first compile ends
    so. A failure tileiras places on a line (a verifier error) stays a plain TleError on every backend."""

    def __init__(self, span: Span | None, message: str, notes: list, status: int, version: str):
        super().__init__(span, message, notes)
        self.status, self.version = status, version


class TileirasTimeout(TileirasCrash):
    """tileiras ran past its time limit (`status` holds the limit, in seconds): nothing of the program to point at,
    so backend="auto" compiles the kernel on the native path, as after a crash. A porter's persistent grouped GEMM
    (a group search by a loop of ifs before the dot loop) never finished under tileiras 13.5 once compiled for its
    sizes, and compiled natively in 2.4 s."""


def _tileiras_error(kernel_span: Span | None, run: _Run, remarks_run: _Run, verifier: str, arch: str,
                    opt_level: int, tool: str) -> TleError:
    """A tileiras failure as a TleError: at the source location of the first error that names one (verifier
    errors, located by tileirdisasm), else at the kernel, as a TileirasCrash. Notes: the other errors, the failed
    and missed remarks (each at its location), and the command."""
    errors = [ln for ln in (verifier or run.output).splitlines() if "error" in ln]
    if not errors:
        errors = [ln for ln in run.output.splitlines() if ln.strip()] or [f"exited with status {run.returncode}"]
    span, located = kernel_span, False
    for line in errors:
        if m := _LOC.search(line.split("error:")[0]):
            span, located = Span(m.group(1), int(m.group(2)), int(m.group(3))), True
            break
    texts = [re.sub(r"^.*?error:\s*", "", ln).strip() for ln in errors]
    # The last lines of a rejected module only repeat that it was rejected.
    boilerplate = ("input does not correspond to Tile IR bytecode", "failed to read provided Tile IR bytecode")
    notes: list[Note | str] = [t for t in texts[1:] if t not in boilerplate]
    notes += [Note(str(r), r.span) for r in parse_remarks(remarks_run.output) if r.kind in ("failed", "missed")][:20]
    notes.append(f"tileiras {_version_of(tool)} --gpu-name={arch} --opt-level={opt_level} exited with status "
                 f"{run.returncode}")
    if located:
        return TleError(span, f"tileiras: {texts[0]}", notes)
    notes.append("tileiras named no line of the kernel: a failure of tileiras on the Tile IR tle wrote, not an error "
                 "found in the program; backend 'auto' or 'triton' compiles it on the native CUDA path")
    return TileirasCrash(span, f"tileiras: {texts[0]}", notes, run.returncode, _version_of(tool))


# --------------------------------------------------------------------------------------------------------------
# compile_tileir
# --------------------------------------------------------------------------------------------------------------

# Entry argument types -> Binary parameter types (and the bytes each takes in the kernel's parameter buffer).
_PARAM_SIZES = {"ptr": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def _param_kind(t: ir.Type, op: ir.Operation) -> str:
    tile = ct.parse_type(t)
    if not isinstance(tile, ct.TileType) or tile.shape:
        raise TleError(span_of_location(op.location), f"kernel parameter of type {tile}: Tile IR kernels take "
                       "scalars and pointers only (build views inside the kernel with make_tensor_view)")
    return "ptr" if tile.is_pointer else tile.elem


def compile_tileir(module: ir.Module, arch: str = "sm_90", *, opt_level: int = 3,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> Binary:
    """Compile a module holding one cuda_tile.entry into a cubin for arch (sm_80 ... sm_121)."""
    entries = ct.entries(module)
    if len(entries) != 1:
        raise TleError(span_of_location(module.operation.location),
                       f"compile_tileir needs exactly one cuda_tile.entry kernel, the module has {len(entries)}")
    kernel = entries[0]
    name = _str(kernel, "sym_name")
    kernel_span = span_of_location(kernel.location)
    params = [_param_kind(a.type, kernel) for a in kernel.regions[0].blocks[0].arguments]
    bytecode = encode_bytecode(module)
    tool = find_tileiras()
    with tempfile.TemporaryDirectory(prefix="tle-tileir-") as tmp:
        bc_path, cubin_path = Path(tmp) / f"{name}.tilebc", Path(tmp) / f"{name}.cubin"
        bc_path.write_bytes(bytecode)
        try:
            run = _run_tileiras(tool, bc_path, cubin_path, arch, opt_level, timeout_s)
            if run.returncode != 0:
                remarks = _run_tileiras(tool, bc_path, cubin_path, arch, opt_level, timeout_s, ["--remarks=all"])
                raise _tileiras_error(kernel_span, run, remarks, _verifier_errors(bc_path), arch, opt_level, tool)
        except subprocess.TimeoutExpired as e:
            raise TileirasTimeout(kernel_span, f"tileiras did not finish in {timeout_s:.0f} s compiling kernel "
                                               f"'{name}'",
                                  ["smaller tiles or fewer nested loops usually compile faster; --backend triton "
                                   "compiles on the native path"], timeout_s, _version_of(tool)) from e
        cubin = cubin_path.read_bytes()
    attrs = kernel_attributes(cubin, name)
    sizes = [_PARAM_SIZES[p] for p in params]
    if attrs.param_sizes != sizes:
        raise TleError(kernel_span, f"internal error: cubin kernel '{name}' takes parameters of {attrs.param_sizes} "
                       f"bytes, the entry declares {params} ({sizes} bytes)")
    return Binary(
        backend="tileir", arch=arch, name=name, cubin=cubin, params=params, num_threads=attrs.reqntid[0],
        shared_mem=0,  # tileiras cubins declare their shared memory statically (extra["static_shared_mem"])
        stages={"tileir": module.operation.get_asm(enable_debug_info=True), "tilebc": bytecode},
        extra={"reqntid": list(attrs.reqntid), "static_shared_mem": attrs.static_shared,
               "registers": attrs.registers, "stack_bytes": attrs.stack,
               "tileiras_version": _version_of(tool), "opt_level": opt_level,
               **({"persistent": True} if ct.PERSISTENT_ATTR in kernel.attributes else {}),
               **({"occupancy_why": (ir.IntegerAttr(kernel.attributes["occupancy"]).value,
                                     ir.StringAttr(kernel.attributes[ct.OCCUPANCY_WHY_ATTR]).value)}
                  if ct.OCCUPANCY_WHY_ATTR in kernel.attributes else {}),
               **({"latency_why": ir.StringAttr(kernel.attributes[ct.LATENCY_WHY_ATTR]).value}
                  if ct.LATENCY_WHY_ATTR in kernel.attributes else {}),
               **({"fma_count": ir.IntegerAttr(kernel.attributes[ct.FMA_COUNT_ATTR]).value}
                  if ct.FMA_COUNT_ATTR in kernel.attributes else {}),
               **({"windows": [ir.StringAttr(w).value for w in ir.ArrayAttr(kernel.attributes[ct.WINDOWS_ATTR])]}
                  if ct.WINDOWS_ATTR in kernel.attributes else {})},
    )
