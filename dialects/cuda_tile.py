"""Builders for CUDA Tile IR (`cuda_tile.*`) ops, as unregistered ops in the upstream MLIR bindings.

MLIR does not know the cuda_tile dialect, so its ops are built in generic form and its types are opaque
types whose text is exactly Tile IR's own type syntax (what `tileirdisasm` prints), with the dialect prefix:

    !cuda_tile.tile<128x64xf16>          a tile (every value is a tile; a scalar is the rank-0 `tile<i32>`)
    !cuda_tile.tile<ptr<f32>>            a scalar pointer; `tile<128xptr<f32>>` is a tile of pointers
    !cuda_tile.tensor_view<?x?xf16, strides=[?,1]>                     `?` = given at run time by an operand
    !cuda_tile.partition_view<tile=(128x64), padding_value = zero, tensor_view<...>>
    !cuda_tile.token                      orders memory operations

Attributes follow Tile IR's operation definitions: their names are Tile IR's (`rounding_mode`, `signedness`,
`comparison_predicate`, ...), enum values are lower-case strings (`"nearest_even"`, `"signed"`), and ops
with several variadic operand groups carry `operandSegmentSizes`. targets/tileir.py reads these ops and
writes Tile IR bytecode; this file never imports the encoder.

Every builder inserts at the current `ir.InsertionPoint` and takes `loc=None` (the current `ir.Location`).
Builders return an `ir.Value`, a tuple of values, or nothing, mirroring the op's results. Tile IR rules the
builders do not check (tileiras does): tile dimensions are powers of two; elementwise operands have equal
types (broadcast/reshape explicitly); the index operands of views and shape/stride operands are `tile<i32>`
or `tile<i64>` scalars.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from tle.dialects.mlir import ir

# --------------------------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------------------------

# Element types Tile IR knows, by their names in Tile IR text.
ELEMENT_TYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "tf32", "f64", "f8E4M3FN", "f8E5M2")
INT_TYPES = ("i1", "i8", "i16", "i32", "i64")
FLOAT_TYPES = ("f16", "bf16", "f32", "tf32", "f64", "f8E4M3FN", "f8E5M2")
PADDING_VALUES = ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")


@dataclass(frozen=True)
class TileType:
    """`tile<SHAPE x ELEM>`; elem is an element type name or `ptr<ELEM>`."""
    shape: tuple[int, ...]
    elem: str

    def __str__(self) -> str:
        return "tile<" + "".join(f"{d}x" for d in self.shape) + self.elem + ">"

    @property
    def is_pointer(self) -> bool:
        return self.elem.startswith("ptr<")

    @property
    def pointee(self) -> str:
        assert self.is_pointer, self
        return self.elem[4:-1]


@dataclass(frozen=True)
class TensorViewType:
    """`tensor_view<SHAPE x ELEM, strides=[...]>`; None in shape or strides is a dynamic (`?`) entry."""
    elem: str
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]

    def __str__(self) -> str:
        dims = "".join(f"{_dim(d)}x" for d in self.shape)
        return f"tensor_view<{dims}{self.elem}, strides=[{','.join(_dim(s) for s in self.strides)}]>"


@dataclass(frozen=True)
class PartitionViewType:
    """`partition_view<tile=(...), [padding_value = P,] tensor_view<...>[, dim_map=[...]]>`.

    tile: the shape of one tile; padding: what a load returns out of bounds (None: unspecified);
    dim_map: tile dimension i walks tensor dimension dim_map[i] (None: identity).
    """
    tile: tuple[int, ...]
    view: TensorViewType
    padding: str | None = None
    dim_map: tuple[int, ...] | None = None

    def __str__(self) -> str:
        pad = f"padding_value = {self.padding}, " if self.padding else ""
        dim_map = f", dim_map=[{', '.join(map(str, self.dim_map))}]" if self.dim_map is not None else ""
        return f"partition_view<tile=({'x'.join(map(str, self.tile))}), {pad}{self.view}{dim_map}>"


@dataclass(frozen=True)
class TokenType:
    def __str__(self) -> str:
        return "token"


CudaTileType = TileType | TensorViewType | PartitionViewType | TokenType


def _dim(d: int | None) -> str:
    return "?" if d is None else str(d)


def to_mlir(t: CudaTileType) -> ir.Type:
    return ir.Type.parse(f"!cuda_tile.{t}")


def tile_type(shape: Sequence[int], elem: str) -> ir.Type:
    """`!cuda_tile.tile<...>`; shape () gives a scalar. Tile IR requires every dimension to be a power of two."""
    _check_elem(elem)
    _check_tile_shape(shape)
    return to_mlir(TileType(tuple(shape), elem))


def _check_tile_shape(shape: Sequence[int]) -> None:
    if any(not isinstance(d, int) or d <= 0 or d & (d - 1) for d in shape):
        raise ValueError(f"Tile IR tile dimensions must be powers of two, got {tuple(shape)}")


def ptr(elem: str) -> str:
    """The element type name of a pointer to elem, for tile_type: tile_type((), ptr("f32"))."""
    _check_elem(elem)
    return f"ptr<{elem}>"


def token_type() -> ir.Type:
    return to_mlir(TokenType())


def tensor_view_type(elem: str, shape: Sequence[int | None], strides: Sequence[int | None]) -> ir.Type:
    _check_elem(elem)
    if len(shape) != len(strides):
        raise ValueError(f"tensor_view: {len(shape)} dimensions but {len(strides)} strides")
    return to_mlir(TensorViewType(elem, tuple(shape), tuple(strides)))


def partition_view_type(tile: Sequence[int], view: ir.Type, padding: str | None = None,
                        dim_map: Sequence[int] | None = None) -> ir.Type:
    tv = parse_type(view)
    if not isinstance(tv, TensorViewType):
        raise TypeError(f"partition_view needs a tensor_view, got {tv}")
    if len(tile) != len(tv.shape):
        raise ValueError(f"partition_view: tile {tuple(tile)} for a rank-{len(tv.shape)} tensor_view")
    _check_tile_shape(tile)
    if padding is not None and padding not in PADDING_VALUES:
        raise ValueError(f"padding must be one of {PADDING_VALUES}, got {padding!r}")
    return to_mlir(PartitionViewType(tuple(tile), tv, padding, tuple(dim_map) if dim_map is not None else None))


def _check_elem(elem: str) -> None:
    inner = elem[4:-1] if elem.startswith("ptr<") and elem.endswith(">") else elem
    if inner not in ELEMENT_TYPES:
        raise ValueError(f"unknown Tile IR element type {elem!r}; known: {', '.join(ELEMENT_TYPES)}")


_TOKEN = re.compile(r"\s*(tile|tensor_view|partition_view|token|ptr|strides|padding_value|dim_map|\?|\d+|"
                    r"[A-Za-z_][A-Za-z0-9_]*|[<>()\[\],=x])")


def parse_type(t: ir.Type | str) -> CudaTileType:
    """Read a cuda_tile type (an MLIR type or its text, with or without `!cuda_tile.`) into a dataclass."""
    text = str(t)
    if text.startswith("!cuda_tile."):
        text = text[len("!cuda_tile."):]
    elif text.startswith("!"):
        raise TypeError(f"not a cuda_tile type: {text}")
    parser = _TypeParser(text)
    result = parser.type()
    parser.end()
    return result


class _TypeParser:
    """Recursive descent over Tile IR's type syntax (the subset built above)."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def fail(self, what: str):
        raise TypeError(f"cannot read cuda_tile type {self.text!r}: expected {what} at column {self.pos + 1}")

    def peek(self) -> str:
        m = _TOKEN.match(self.text, self.pos)
        return m.group(1) if m else ""

    def take(self, expected: str | None = None) -> str:
        m = _TOKEN.match(self.text, self.pos)
        if not m or (expected is not None and m.group(1) != expected):
            self.fail(repr(expected) if expected else "a token")
        self.pos = m.end()
        return m.group(1)

    def end(self):
        if self.text[self.pos:].strip():
            self.fail("the end")

    def type(self) -> CudaTileType:
        head = self.peek()
        if head == "token":
            self.take()
            return TokenType()
        if head == "tile":
            self.take(), self.take("<")
            shape, elem = self.shape_and_elem()
            self.take(">")
            return TileType(tuple(d for d in shape), elem)
        if head == "tensor_view":
            return self.tensor_view()
        if head == "partition_view":
            self.take(), self.take("<"), self.take("tile"), self.take("="), self.take("(")
            m = re.compile(r"\s*(\d+(?:x\d+)*)").match(self.text, self.pos)  # `128x64`: one token, split on x
            if not m:
                self.fail("a tile shape")
            self.pos = m.end()
            tile = [int(d) for d in m.group(1).split("x")]
            self.take(")"), self.take(",")
            padding = None
            if self.peek() == "padding_value":
                self.take(), self.take("=")
                padding = self.take()
                self.take(",")
            view = self.tensor_view()
            dim_map = None
            if self.peek() == ",":
                self.take(), self.take("dim_map"), self.take("=")
                dim_map = tuple(self.int_list())
            self.take(">")
            return PartitionViewType(tuple(tile), view, padding, dim_map)
        self.fail("tile, tensor_view, partition_view or token")

    def tensor_view(self) -> TensorViewType:
        self.take("tensor_view"), self.take("<")
        shape, elem = self.shape_and_elem()
        strides: list = []
        if self.peek() == ",":
            self.take(), self.take("strides"), self.take("=")
            strides = self.int_list()
        self.take(">")
        return TensorViewType(elem, tuple(shape), tuple(strides))

    def shape_and_elem(self):
        # `128x64xf16`: the lexer splits `x` only where it stands alone, so dims and element come apart here.
        m = re.compile(r"\s*((?:(?:\d+|\?)x)*)(ptr<[A-Za-z0-9]+>|[A-Za-z][A-Za-z0-9]*)").match(self.text, self.pos)
        if not m:
            self.fail("a shape and element type")
        self.pos = m.end()
        dims = [None if d == "?" else int(d) for d in m.group(1).split("x")[:-1]]
        return dims, m.group(2)

    def int_list(self) -> list[int | None]:
        self.take("[")
        out: list[int | None] = []
        while self.peek() != "]":
            tok = self.take()
            out.append(None if tok == "?" else int(tok))
            if self.peek() == ",":
                self.take()
        self.take("]")
        return out


def type_of(value: ir.Value) -> CudaTileType:
    return parse_type(value.type)


def tile_of(value: ir.Value) -> TileType:
    t = type_of(value)
    if not isinstance(t, TileType):
        raise TypeError(f"expected a tile, got {t}")
    return t


# --------------------------------------------------------------------------------------------------------------
# Op construction
# --------------------------------------------------------------------------------------------------------------

def _op(name: str, operands: Sequence[ir.Value] = (), results: Sequence[ir.Type] = (), attrs: dict | None = None,
        *, regions: int = 0, segments: Sequence[int] | None = None, loc=None) -> ir.Operation:
    attributes = {k: _attr(v) for k, v in (attrs or {}).items() if v is not None}
    if segments is not None:
        attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(list(segments))
    op = ir.Operation.create(f"cuda_tile.{name}", results=list(results), operands=list(operands),
                             attributes=attributes, regions=regions, loc=loc or ir.Location.current)
    return op


def _attr(v) -> ir.Attribute:
    if isinstance(v, ir.Attribute):
        return v
    if isinstance(v, bool):
        return ir.BoolAttr.get(v)
    if isinstance(v, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
    if isinstance(v, str):
        return ir.StringAttr.get(v)
    raise TypeError(f"no attribute for {v!r}")


def _one(op: ir.Operation) -> ir.Value:
    return op.results[0]


def _with_elem(like: ir.Value, elem: str) -> ir.Type:
    return tile_type(tile_of(like).shape, elem)


def _add_block(op: ir.Operation, region: int, arg_types: Sequence[ir.Type], loc) -> ir.Block:
    loc = loc or ir.Location.current
    return op.regions[region].blocks.append(*arg_types, arg_locs=[loc] * len(arg_types))


def _fill(block: ir.Block, body: Callable, args, terminator: Callable, loc) -> None:
    """Run body(args) inside block; if it returns values (not None), end the block with terminator(values)."""
    with ir.InsertionPoint(block):
        produced = body(*args)
        if produced is not None:
            terminator(list(produced) if isinstance(produced, (list, tuple)) else [produced], loc=loc)


# --- functions ---------------------------------------------------------------------------------------------------

# A unit attribute of tle's own on an entry (not encoded in the bytecode): the kernel runs its launch grid as a
# persistent loop and takes the grid (x, y, z) as three i32 parameters after its own (lowering/tle_to_tileir.py
# persistent_loop). targets/tileir.py records it in the Binary, whose launcher then starts one wave of programs.
PERSISTENT_ATTR = "tle.persistent"
# A string attribute of tle's own on an entry (not encoded either): why the lowering chose the entry's occupancy
# hint, in words; targets/tileir.py records it in the Binary for `tlec -v`.
OCCUPANCY_WHY_ATTR = "tle.occupancy_why"
# The same for the `latency` hint the lowering put on the entry's view loads: the hint and its reason, in words.
LATENCY_WHY_ATTR = "tle.latency_why"
# How many f32/f64 products added once the lowering contracted to `fma` (lowering/tle_to_tileir.py, _fused_mul),
# for `tlec -v`: results then differ from the interpreter's, which rounds the product and the sum apart.
FMA_COUNT_ATTR = "tle.fma_count"
# An array of strings of tle's own: per tle.slice the lowering made a tensor view of, where it is and whether its
# base was proven 16-byte aligned (what vector and TMA accesses through it need), for `tlec -v`.
WINDOWS_ATTR = "tle.windows"


def entry(name: str, arg_types: Sequence[ir.Type], *, occupancy: int | None = None,
          num_cta_in_cga: int | None = None, num_worker_warps: int | None = None, loc=None) -> tuple[ir.Operation, ir.Block]:
    """A kernel. Its arguments are its launch parameters, in order (pointers are `tile<ptr<E>>`, scalars
    `tile<i32>`...). Returns the op and its body block; end the body with return_()."""
    fn_type = ir.FunctionType.get(list(arg_types), [])
    op = _op("entry", attrs={"sym_name": name, "function_type": ir.TypeAttr.get(fn_type), "occupancy": occupancy,
                             "num_cta_in_cga": num_cta_in_cga, "num_worker_warps": num_worker_warps},
             regions=1, loc=loc)
    return op, _add_block(op, 0, arg_types, loc)


def return_(*, loc=None) -> None:
    _op("return", loc=loc)


# --- constants, tokens, grid ------------------------------------------------------------------------------------

def constant(value, type: ir.Type, *, loc=None) -> ir.Value:
    """A constant tile: value is a number (splat) or nested lists / a numpy array of the tile's shape."""
    t = parse_type(type)
    assert isinstance(t, TileType) and not t.is_pointer, t
    return _one(_op("constant", results=[type], attrs={"value": dense_value(value, t)}, loc=loc))


def dense_value(value, t: TileType) -> ir.Attribute:
    """The DenseElementsAttr (of the builtin tensor type with the tile's shape) that holds value."""
    import numpy as np
    elem = _builtin_elem(t.elem)
    tensor = ir.RankedTensorType.get(list(t.shape), elem)
    if isinstance(value, (bool, int, float)) or (hasattr(value, "ndim") and value.ndim == 0):
        scalar = (ir.IntegerAttr.get(elem, int(value)) if t.elem in INT_TYPES
                  else ir.FloatAttr.get(elem, float(value)))
        return ir.DenseElementsAttr.get_splat(tensor, scalar)
    np_types = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
                "f16": np.float16, "f32": np.float32, "f64": np.float64}
    if t.elem not in np_types:
        raise TypeError(f"non-splat {t.elem} constants are not supported: build them in f32 and convert (ftof)")
    array = np.asarray(value, dtype=np_types[t.elem])
    if array.shape != t.shape:
        raise ValueError(f"constant of shape {array.shape} for {t}")
    return ir.DenseElementsAttr.get(array, type=tensor)


def _builtin_elem(elem: str) -> ir.Type:
    if elem in INT_TYPES:
        return ir.IntegerType.get_signless(int(elem[1:]))
    return {"f16": ir.F16Type, "bf16": ir.BF16Type, "f32": ir.F32Type, "f64": ir.F64Type, "tf32": ir.FloatTF32Type,
            "f8E4M3FN": ir.Float8E4M3FNType, "f8E5M2": ir.Float8E5M2Type}[elem].get()


def make_token(*, loc=None) -> ir.Value:
    """A fresh token: memory ops that take it are ordered after nothing."""
    return _one(_op("make_token", results=[token_type()], loc=loc))


def join_tokens(tokens: Sequence[ir.Value], *, loc=None) -> ir.Value:
    """A token that comes after every token given (to order an op after several memory ops)."""
    return _one(_op("join_tokens", tokens, [token_type()], loc=loc))


def get_tile_block_id(*, loc=None) -> tuple[ir.Value, ir.Value, ir.Value]:
    """This tile block's (x, y, z) index in the grid, as `tile<i32>` scalars."""
    i32 = tile_type((), "i32")
    return tuple(_op("get_tile_block_id", results=[i32] * 3, loc=loc).results)


def get_num_tile_blocks(*, loc=None) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The grid size (x, y, z), as `tile<i32>` scalars."""
    i32 = tile_type((), "i32")
    return tuple(_op("get_num_tile_blocks", results=[i32] * 3, loc=loc).results)


# --- assumptions ----------------------------------------------------------------------------------------------

def assume_div_by(value: ir.Value, divisor: int, *, every: int | None = None, along: int | None = None,
                  loc=None) -> ir.Value:
    """`value` (an integer or pointer, in bytes for pointers) is divisible by divisor; returns the value to
    use from now on. For a tile, `every E along D` says only every E-th element along dimension D is."""
    if divisor <= 0 or divisor & (divisor - 1):
        raise ValueError(f"div_by needs a power of two, got {divisor}")
    text = f"div_by<{divisor}" + (f", every {every} along {along}" if every is not None else "") + ">"
    return _assume(value, text, loc)


def assume_bounded(value: ir.Value, lb: int | None = None, ub: int | None = None, *, loc=None) -> ir.Value:
    """lb <= value <= ub (both inclusive; None: no bound); returns the value to use from now on."""
    return _assume(value, f"bounded<{_dim(lb)}, {_dim(ub)}>", loc)


def _assume(value: ir.Value, predicate: str, loc) -> ir.Value:
    pred = ir.Attribute.parse(f"#cuda_tile.{predicate}")
    return _one(_op("assume", [value], [value.type], {"predicate": pred}, loc=loc))


# --- views and memory -------------------------------------------------------------------------------------------

def make_tensor_view(base: ir.Value, shape: Sequence[ir.Value | int], strides: Sequence[ir.Value | int], *,
                     loc=None) -> ir.Value:
    """A view of memory at base (`tile<ptr<E>>`): ints are static sizes/strides (in elements), Values are
    dynamic ones (`tile<i32>` or `tile<i64>` scalars, all the same type)."""
    base_t = tile_of(base)
    if base_t.shape or not base_t.is_pointer:
        raise TypeError(f"make_tensor_view needs a scalar pointer, got {base_t}")
    dyn_shape = [s for s in shape if not isinstance(s, int)]
    dyn_strides = [s for s in strides if not isinstance(s, int)]
    view = tensor_view_type(base_t.pointee, [s if isinstance(s, int) else None for s in shape],
                            [s if isinstance(s, int) else None for s in strides])
    return _one(_op("make_tensor_view", [base, *dyn_shape, *dyn_strides], [view],
                    segments=(1, len(dyn_shape), len(dyn_strides)), loc=loc))


def make_partition_view(tensor_view: ir.Value, tile: Sequence[int], *, padding: str | None = None,
                        dim_map: Sequence[int] | None = None, loc=None) -> ir.Value:
    """Split a tensor_view into tiles of shape `tile`; index (i, j) selects elements [i*t0, (i+1)*t0) x ...
    padding is what loads return outside the tensor (None: unspecified values)."""
    return _one(_op("make_partition_view", [tensor_view],
                    [partition_view_type(tile, tensor_view.type, padding, dim_map)], loc=loc))


def _memory_attrs(ordering: str, scope: str | None, latency: int | None, allow_tma: bool | None, index_rank: int,
                  inbounds: Sequence[int] = ()):
    """`inbounds`: the index dimensions where the caller knows the whole tile lies inside the tensor, so tileiras
    can drop that dimension's bounds checks (bytecode 13.4+; a tile outside there is undefined behaviour)."""
    return {"memory_ordering_semantics": ordering, "memory_scope": scope, "latency": latency,
            "allow_tma": allow_tma, "inbounds": ir.DenseBoolArrayAttr.get([d in inbounds for d in range(index_rank)])}


def load_view_tko(view: ir.Value, index: Sequence[ir.Value], token: ir.Value | None = None, *,
                  ordering: str = "weak", scope: str | None = None, latency: int | None = None,
                  allow_tma: bool | None = None, inbounds: Sequence[int] = (), loc=None) -> tuple[ir.Value, ir.Value]:
    """Load the tile at `index` (tile coordinates, `tile<i32>` scalars) of a partition_view.
    Returns (tile, token); the load happens after `token`'s ops, and the returned token after the load.
    `inbounds`: index dimensions whose tile is known to lie inside the tensor (no bounds check there)."""
    pv = type_of(view)
    assert isinstance(pv, PartitionViewType), pv
    tile = tile_type(pv.tile, pv.view.elem)
    op = _op("load_view_tko", [view, *index, *([token] if token is not None else [])], [tile, token_type()],
             _memory_attrs(ordering, scope, latency, allow_tma, len(index), inbounds),
             segments=(1, len(index), int(token is not None)), loc=loc)
    return op.results[0], op.results[1]


def store_view_tko(tile: ir.Value, view: ir.Value, index: Sequence[ir.Value], token: ir.Value | None = None, *,
                   ordering: str = "weak", scope: str | None = None, latency: int | None = None,
                   allow_tma: bool | None = None, inbounds: Sequence[int] = (), loc=None) -> ir.Value:
    """Store `tile` at `index` of a partition_view (out-of-bounds elements are not written); returns a token.
    `inbounds` as for load_view_tko."""
    op = _op("store_view_tko", [tile, view, *index, *([token] if token is not None else [])], [token_type()],
             _memory_attrs(ordering, scope, latency, allow_tma, len(index), inbounds),
             segments=(1, 1, len(index), int(token is not None)), loc=loc)
    return op.results[0]


def get_index_space_shape(view: ir.Value, elem: str = "i32", *, loc=None) -> tuple[ir.Value, ...]:
    """The number of tiles of a partition_view along each dimension."""
    rank = len(type_of(view).tile)
    return tuple(_op("get_index_space_shape", [view], [tile_type((), elem)] * rank, loc=loc).results)


def get_tensor_shape(view: ir.Value, elem: str = "i32", *, loc=None) -> tuple[ir.Value, ...]:
    """The shape of a tensor_view, one scalar per dimension."""
    rank = len(type_of(view).shape)
    return tuple(_op("get_tensor_shape", [view], [tile_type((), elem)] * rank, loc=loc).results)


def offset(ptrs: ir.Value, offsets: ir.Value, *, loc=None) -> ir.Value:
    """ptrs + offsets (in elements), elementwise: a tile of pointers for gather/scatter."""
    return _one(_op("offset", [ptrs, offsets], [ptrs.type], loc=loc))


def load_ptr_tko(ptrs: ir.Value, mask: ir.Value | None = None, padding: ir.Value | None = None,
                 token: ir.Value | None = None, *, ordering: str = "weak", scope: str | None = None,
                 latency: int | None = None, allow_tma: bool | None = None, loc=None) -> tuple[ir.Value, ir.Value]:
    """Gather: load *p for each pointer of a tile of pointers. Where mask (i1 tile) is false the result is
    padding (a tile of the result type) or unspecified. Returns (tile, token)."""
    t = tile_of(ptrs)
    opt = [v for v in (mask, padding, token) if v is not None]
    op = _op("load_ptr_tko", [ptrs, *opt], [tile_type(t.shape, t.pointee), token_type()],
             {"memory_ordering_semantics": ordering, "memory_scope": scope, "latency": latency, "allow_tma": allow_tma},
             segments=(1, int(mask is not None), int(padding is not None), int(token is not None)), loc=loc)
    return op.results[0], op.results[1]


def store_ptr_tko(ptrs: ir.Value, value: ir.Value, mask: ir.Value | None = None, token: ir.Value | None = None, *,
                  ordering: str = "weak", scope: str | None = None, latency: int | None = None,
                  allow_tma: bool | None = None, loc=None) -> ir.Value:
    """Scatter: *p = v for each pointer where mask is true. Returns a token."""
    opt = [v for v in (mask, token) if v is not None]
    op = _op("store_ptr_tko", [ptrs, value, *opt], [token_type()],
             {"memory_ordering_semantics": ordering, "memory_scope": scope, "latency": latency, "allow_tma": allow_tma},
             segments=(1, 1, int(mask is not None), int(token is not None)), loc=loc)
    return op.results[0]


ATOMIC_MODES = ("and", "or", "xor", "add", "addf", "max", "min", "umax", "umin", "xchg")


def atomic_rmw_tko(ptrs: ir.Value, arg: ir.Value, mode: str, mask: ir.Value | None = None,
                   token: ir.Value | None = None, *, ordering: str = "relaxed", scope: str = "device",
                   loc=None) -> tuple[ir.Value, ir.Value]:
    """Atomically *p = mode(*p, arg) per pointer; returns (old values, token). mode: one of ATOMIC_MODES."""
    if mode not in ATOMIC_MODES:
        raise ValueError(f"atomic mode must be one of {ATOMIC_MODES}, got {mode!r}")
    opt = [v for v in (mask, token) if v is not None]
    op = _op("atomic_rmw_tko", [ptrs, arg, *opt], [arg.type, token_type()],
             {"mode": mode, "memory_ordering_semantics": ordering, "memory_scope": scope},
             segments=(1, 1, int(mask is not None), int(token is not None)), loc=loc)
    return op.results[0], op.results[1]


def atomic_cas_tko(ptrs: ir.Value, cmp: ir.Value, val: ir.Value, mask: ir.Value | None = None,
                   token: ir.Value | None = None, *, ordering: str = "relaxed", scope: str = "device",
                   loc=None) -> tuple[ir.Value, ir.Value]:
    """Atomically: if *p == cmp then *p = val; returns (old values, token)."""
    opt = [v for v in (mask, token) if v is not None]
    op = _op("atomic_cas_tko", [ptrs, cmp, val, *opt], [val.type, token_type()],
             {"memory_ordering_semantics": ordering, "memory_scope": scope},
             segments=(1, 1, 1, int(mask is not None), int(token is not None)), loc=loc)
    return op.results[0], op.results[1]


# --- elementwise arithmetic -------------------------------------------------------------------------------------
# Float ops take rounding (one of ROUNDING_MODES) and ftz (flush denormals to zero) where Tile IR has them.

ROUNDING_MODES = ("nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full", "nearest_int_to_zero",
                  "nearest_away")


def _float_binary(name: str):
    def build(lhs: ir.Value, rhs: ir.Value, *, rounding: str = "nearest_even", ftz: bool = False, loc=None):
        return _one(_op(name, [lhs, rhs], [lhs.type], {"rounding_mode": rounding, "flush_to_zero": ftz}, loc=loc))
    build.__name__ = name
    build.__doc__ = f"`{name}`: elementwise float op on two tiles of the same type."
    return build


addf, subf, mulf, divf = (_float_binary(n) for n in ("addf", "subf", "mulf", "divf"))


def _int_overflow_binary(name: str):
    def build(lhs: ir.Value, rhs: ir.Value, *, overflow: str = "none", loc=None):
        return _one(_op(name, [lhs, rhs], [lhs.type], {"overflow": overflow}, loc=loc))
    build.__name__ = name
    build.__doc__ = f"`{name}`: elementwise integer op; overflow: none | nsw | nuw | nw (wrap is undefined)."
    return build


addi, subi, muli, shli = (_int_overflow_binary(n) for n in ("addi", "subi", "muli", "shli"))


def _signed_binary(name: str):
    def build(lhs: ir.Value, rhs: ir.Value, *, signed: bool = True, loc=None):
        return _one(_op(name, [lhs, rhs], [lhs.type], {"signedness": _signedness(signed)}, loc=loc))
    build.__name__ = name
    build.__doc__ = f"`{name}`: elementwise integer op, signed or unsigned."
    return build


maxi, mini, remi, shri = (_signed_binary(n) for n in ("maxi", "mini", "remi", "shri"))


def _plain(name: str, arity: int):
    def build(*operands: ir.Value, loc=None):
        if len(operands) != arity:
            raise TypeError(f"{name} takes {arity} operands, got {len(operands)}")
        return _one(_op(name, operands, [operands[0].type], loc=loc))
    build.__name__ = name
    build.__doc__ = f"`{name}`: elementwise, {arity} operand(s) of one type, result of that type."
    return build


# Ops without attributes.
andi, ori, xori, mulhii, remf, fpowf, atan2 = (_plain(n, 2) for n in
                                              ("andi", "ori", "xori", "mulhii", "remf", "fpowf", "atan2"))
negf, absf, absi, log, log2, sin, cos, tan, sinh, cosh, floor, ceil = (
    _plain(n, 1) for n in ("negf", "absf", "absi", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "floor", "ceil"))


def divi(lhs: ir.Value, rhs: ir.Value, *, signed: bool = True, rounding: str = "zero", loc=None) -> ir.Value:
    """Integer division; rounding: zero (C), negative_inf (floor division) or positive_inf (ceil division)."""
    return _one(_op("divi", [lhs, rhs], [lhs.type], {"signedness": _signedness(signed), "rounding": rounding},
                    loc=loc))


def negi(x: ir.Value, *, overflow: str = "none", loc=None) -> ir.Value:
    return _one(_op("negi", [x], [x.type], {"overflow": overflow}, loc=loc))


def maxf(lhs: ir.Value, rhs: ir.Value, *, propagate_nan: bool = False, ftz: bool = False, loc=None) -> ir.Value:
    return _one(_op("maxf", [lhs, rhs], [lhs.type], {"propagate_nan": propagate_nan, "flush_to_zero": ftz}, loc=loc))


def minf(lhs: ir.Value, rhs: ir.Value, *, propagate_nan: bool = False, ftz: bool = False, loc=None) -> ir.Value:
    return _one(_op("minf", [lhs, rhs], [lhs.type], {"propagate_nan": propagate_nan, "flush_to_zero": ftz}, loc=loc))


def exp(x: ir.Value, *, rounding: str = "full", loc=None) -> ir.Value:
    """e**x; rounding "full" is the accurate version, "approx" the fast one."""
    return _one(_op("exp", [x], [x.type], {"rounding_mode": rounding}, loc=loc))


def exp2(x: ir.Value, *, ftz: bool = False, loc=None) -> ir.Value:
    return _one(_op("exp2", [x], [x.type], {"flush_to_zero": ftz}, loc=loc))


def tanh(x: ir.Value, *, rounding: str = "full", loc=None) -> ir.Value:
    return _one(_op("tanh", [x], [x.type], {"rounding_mode": rounding}, loc=loc))


def sqrt(x: ir.Value, *, rounding: str = "nearest_even", ftz: bool = False, loc=None) -> ir.Value:
    return _one(_op("sqrt", [x], [x.type], {"rounding_mode": rounding, "flush_to_zero": ftz}, loc=loc))


def rsqrt(x: ir.Value, *, ftz: bool = False, loc=None) -> ir.Value:
    return _one(_op("rsqrt", [x], [x.type], {"flush_to_zero": ftz}, loc=loc))


def fma(a: ir.Value, b: ir.Value, c: ir.Value, *, rounding: str = "nearest_even", ftz: bool = False,
        loc=None) -> ir.Value:
    """a * b + c with one rounding."""
    return _one(_op("fma", [a, b, c], [a.type], {"rounding_mode": rounding, "flush_to_zero": ftz}, loc=loc))


# --- comparisons and select -------------------------------------------------------------------------------------

COMPARISONS = ("equal", "not_equal", "less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal")


def cmpf(predicate: str, lhs: ir.Value, rhs: ir.Value, *, ordered: bool = True, loc=None) -> ir.Value:
    """Compare floats; returns an i1 tile. ordered=False makes comparisons with NaN true (use it for !=)."""
    _check(predicate, COMPARISONS, "comparison")
    return _one(_op("cmpf", [lhs, rhs], [_with_elem(lhs, "i1")],
                    {"comparison_predicate": predicate, "comparison_ordering": "ordered" if ordered else "unordered"},
                    loc=loc))


def cmpi(predicate: str, lhs: ir.Value, rhs: ir.Value, *, signed: bool = True, loc=None) -> ir.Value:
    """Compare integers; returns an i1 tile."""
    _check(predicate, COMPARISONS, "comparison")
    return _one(_op("cmpi", [lhs, rhs], [_with_elem(lhs, "i1")],
                    {"comparison_predicate": predicate, "signedness": _signedness(signed)}, loc=loc))


def select(cond: ir.Value, if_true: ir.Value, if_false: ir.Value, *, loc=None) -> ir.Value:
    """Elementwise cond ? if_true : if_false (cond an i1 tile of the same shape)."""
    return _one(_op("select", [cond, if_true, if_false], [if_true.type], loc=loc))


# --- conversions --------------------------------------------------------------------------------------------------

def ftof(x: ir.Value, elem: str, *, rounding: str = "nearest_even", loc=None) -> ir.Value:
    """Float to another float type."""
    return _one(_op("ftof", [x], [_with_elem(x, elem)], {"rounding_mode": rounding}, loc=loc))


def itof(x: ir.Value, elem: str, *, signed: bool = True, rounding: str = "nearest_even", loc=None) -> ir.Value:
    return _one(_op("itof", [x], [_with_elem(x, elem)], {"signedness": _signedness(signed), "rounding_mode": rounding},
                    loc=loc))


def ftoi(x: ir.Value, elem: str, *, signed: bool = True, rounding: str = "nearest_int_to_zero",
         saturating: bool = False, loc=None) -> ir.Value:
    """Float to integer; the default rounding truncates toward zero, as C does."""
    return _one(_op("ftoi", [x], [_with_elem(x, elem)], {"signedness": _signedness(signed), "rounding_mode": rounding,
                                                          "saturating": saturating}, loc=loc))


def exti(x: ir.Value, elem: str, *, signed: bool = True, loc=None) -> ir.Value:
    """Widen an integer (sign- or zero-extend)."""
    return _one(_op("exti", [x], [_with_elem(x, elem)], {"signedness": _signedness(signed)}, loc=loc))


def trunci(x: ir.Value, elem: str, *, overflow: str = "none", loc=None) -> ir.Value:
    """Narrow an integer (keeps the low bits). Note: to get a bool from an int, compare with 0 instead."""
    return _one(_op("trunci", [x], [_with_elem(x, elem)], {"overflow": overflow}, loc=loc))


def bitcast(x: ir.Value, elem: str, *, loc=None) -> ir.Value:
    """Reinterpret the bits as another element type of the same width."""
    return _one(_op("bitcast", [x], [_with_elem(x, elem)], loc=loc))


def ptr_to_int(x: ir.Value, *, loc=None) -> ir.Value:
    return _one(_op("ptr_to_int", [x], [_with_elem(x, "i64")], loc=loc))


def int_to_ptr(x: ir.Value, pointee: str, *, loc=None) -> ir.Value:
    return _one(_op("int_to_ptr", [x], [_with_elem(x, ptr(pointee))], loc=loc))


def ptr_to_ptr(x: ir.Value, pointee: str, *, loc=None) -> ir.Value:
    return _one(_op("ptr_to_ptr", [x], [_with_elem(x, ptr(pointee))], loc=loc))


# --- shapes --------------------------------------------------------------------------------------------------------

def broadcast(x: ir.Value, shape: Sequence[int], *, loc=None) -> ir.Value:
    """Repeat size-1 dimensions to `shape` (same rank: reshape first to add dimensions)."""
    return _one(_op("broadcast", [x], [tile_type(shape, tile_of(x).elem)], loc=loc))


def reshape(x: ir.Value, shape: Sequence[int], *, loc=None) -> ir.Value:
    """Same elements, row-major order, new shape."""
    return _one(_op("reshape", [x], [tile_type(shape, tile_of(x).elem)], loc=loc))


def permute(x: ir.Value, permutation: Sequence[int], *, loc=None) -> ir.Value:
    """Result dimension i is source dimension permutation[i] (transpose: [1, 0])."""
    t = tile_of(x)
    shape = [t.shape[p] for p in permutation]
    return _one(_op("permute", [x], [tile_type(shape, t.elem)],
                    {"permutation": ir.DenseI32ArrayAttr.get(list(permutation))}, loc=loc))


def iota(size: int, elem: str = "i32", *, loc=None) -> ir.Value:
    """The 1-D integer tile [0, 1, ..., size-1]."""
    return _one(_op("iota", results=[tile_type((size,), elem)], loc=loc))


def cat(lhs: ir.Value, rhs: ir.Value, dim: int, *, loc=None) -> ir.Value:
    """Concatenate two tiles along dim."""
    a, b = tile_of(lhs), tile_of(rhs)
    shape = list(a.shape)
    shape[dim] += b.shape[dim]
    return _one(_op("cat", [lhs, rhs], [tile_type(shape, a.elem)], {"dim": dim}, loc=loc))


def extract(x: ir.Value, indices: Sequence[ir.Value], shape: Sequence[int], *, loc=None) -> ir.Value:
    """The sub-tile of `shape` at tile-index `indices` (x split into tiles of `shape`)."""
    return _one(_op("extract", [x, *indices], [tile_type(shape, tile_of(x).elem)], loc=loc))


# --- reductions, scans, matmul ------------------------------------------------------------------------------------

def reduce(operands: Sequence[ir.Value], dim: int, identities: Sequence[float | int | bool],
           combine: Callable[..., Sequence[ir.Value]], *, loc=None) -> tuple[ir.Value, ...]:
    """Reduce tiles along dim (the result drops that dimension; reshape to keep it).

    combine gets 2N scalar tiles, interleaved per operand (lhs0, rhs0, lhs1, rhs1, ...), and returns N
    combined values; identities are the identity of combine, one per operand.
    """
    return _reduce_or_scan("reduce", operands, dim, identities, combine, {}, loc)


def scan(operands: Sequence[ir.Value], dim: int, identities: Sequence[float | int | bool],
         combine: Callable[..., Sequence[ir.Value]], *, reverse: bool = False, loc=None) -> tuple[ir.Value, ...]:
    """Inclusive prefix scan along dim (same shapes as the operands); combine as for reduce."""
    return _reduce_or_scan("scan", operands, dim, identities, combine, {"reverse": reverse}, loc)


def _reduce_or_scan(name, operands, dim, identities, combine, attrs, loc):
    tiles = [tile_of(v) for v in operands]
    if len(identities) != len(operands):
        raise ValueError(f"{name}: {len(operands)} operands but {len(identities)} identities")
    shape = tiles[0].shape if name == "scan" else tiles[0].shape[:dim] + tiles[0].shape[dim + 1:]
    ids = [ir.IntegerAttr.get(_builtin_elem(t.elem), int(i)) if t.elem in INT_TYPES
           else ir.FloatAttr.get(_builtin_elem(t.elem), float(i)) for t, i in zip(tiles, identities)]
    op = _op(name, operands, [tile_type(shape, t.elem) for t in tiles],
             {"dim": dim, "identities": ir.ArrayAttr.get(ids), **attrs}, regions=1, loc=loc)
    scalars = [tile_type((), t.elem) for t in tiles for _ in (0, 1)]
    block = _add_block(op, 0, scalars, loc)
    _fill(block, combine, list(block.arguments), yield_, loc)
    return tuple(op.results)


def mmaf(lhs: ir.Value, rhs: ir.Value, acc: ir.Value, *, fast_acc: bool = False, loc=None) -> ir.Value:
    """acc + lhs @ rhs for float tiles ([M,K] x [K,N] + [M,N], or batched [B,M,K] ...). fast_acc (8-bit float
    operands, bytecode 13.3 and later): let the tensor cores accumulate at their own precision instead of adding
    each step's products into acc in f32."""
    attrs = {"fast_acc": ir.BoolAttr.get(True)} if fast_acc else None
    return _one(_op("mmaf", [lhs, rhs, acc], [acc.type], attrs, loc=loc))


def mmai(lhs: ir.Value, rhs: ir.Value, acc: ir.Value, *, lhs_signed: bool = True, rhs_signed: bool = True,
         loc=None) -> ir.Value:
    """acc + lhs @ rhs for integer tiles (i8 inputs, i32 accumulator)."""
    return _one(_op("mmai", [lhs, rhs, acc], [acc.type],
                    {"signedness_lhs": _signedness(lhs_signed), "signedness_rhs": _signedness(rhs_signed)}, loc=loc))


# --- control flow ------------------------------------------------------------------------------------------------

def for_(lower: ir.Value, upper: ir.Value, step: ir.Value, init: Sequence[ir.Value],
         body: Callable[..., Sequence[ir.Value] | None], *, loc=None) -> tuple[ir.Value, ...]:
    """for iv in [lower, upper) by step, carrying values: body(iv, *carried) returns the next carried values
    (the builder ends the body with continue_), or None when it has ended the body itself.
    Returns the final carried values. Bounds are scalar integer tiles of one type."""
    op = _op("for", [lower, upper, step, *init], [v.type for v in init], regions=1, loc=loc)
    block = _add_block(op, 0, [lower.type, *[v.type for v in init]], loc)
    _fill(block, body, list(block.arguments), continue_, loc)
    return tuple(op.results)


def loop(init: Sequence[ir.Value], result_types: Sequence[ir.Type], body: Callable[..., Sequence[ir.Value] | None], *,
         loc=None) -> tuple[ir.Value, ...]:
    """An unbounded loop: body(*carried) runs until it executes break_(results); continue_(values) starts the
    next iteration with new carried values. A body that returns values ends with continue_(values)."""
    op = _op("loop", list(init), list(result_types), regions=1, loc=loc)
    block = _add_block(op, 0, [v.type for v in init], loc)
    _fill(block, body, list(block.arguments), continue_, loc)
    return tuple(op.results)


def if_(cond: ir.Value, result_types: Sequence[ir.Type], then_body: Callable[[], Sequence[ir.Value] | None],
        else_body: Callable[[], Sequence[ir.Value] | None] | None = None, *, loc=None) -> tuple[ir.Value, ...]:
    """if cond (an i1 scalar tile): each body returns the op's results (the builder adds yield_), or None
    when it ends itself (e.g. with continue_ or break_ inside a loop)."""
    op = _op("if", [cond], list(result_types), regions=2, loc=loc)
    _fill(_add_block(op, 0, [], loc), then_body, [], yield_, loc)
    _fill(_add_block(op, 1, [], loc), else_body or (lambda: []), [], yield_, loc)
    return tuple(op.results)


def yield_(values: Sequence[ir.Value] = (), *, loc=None) -> None:
    """End an if branch or a reduce/scan body."""
    _op("yield", list(values), loc=loc)


def continue_(values: Sequence[ir.Value] = (), *, loc=None) -> None:
    """Go to the next iteration of the innermost loop with these carried values."""
    _op("continue", list(values), loc=loc)


def break_(values: Sequence[ir.Value] = (), *, loc=None) -> None:
    """Leave the innermost `loop` with these results."""
    _op("break", list(values), loc=loc)


# --- debugging --------------------------------------------------------------------------------------------------

def assert_(cond: ir.Value, message: str, *, loc=None) -> None:
    """Trap with message where cond (an i1 tile) is false."""
    _op("assert", [cond], attrs={"message": message}, loc=loc)


def print_tko(fmt: str, args: Sequence[ir.Value], token: ir.Value | None = None, *, loc=None) -> ir.Value:
    """The device's printf: `fmt` (C printf conversions, one per argument: %d, %lld, %f, ...) with the tiles in
    `args`. Returns a token."""
    op = _op("print_tko", [*args, *([token] if token is not None else [])], [token_type()], {"str": fmt},
             segments=(len(args), int(token is not None)), loc=loc)
    return op.results[0]


# --------------------------------------------------------------------------------------------------------------

def _signedness(signed: bool) -> str:
    return "signed" if signed else "unsigned"


def _check(value: str, allowed: Sequence[str], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


def entries(module: ir.Module) -> list[ir.Operation]:
    """The cuda_tile.entry ops of a module (directly in it, or inside a cuda_tile.module op)."""
    found = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "cuda_tile.entry":
            found.append(op)
        elif op.name == "cuda_tile.module":
            found.extend(o.operation for o in op.regions[0].blocks[0].operations if o.operation.name == "cuda_tile.entry")
    return found
