"""The tle MLIR dialect: tile, mesh and pipeline operations, declared once, as data.

This table is the only definition of tle ops. `load_tle(ctx)` turns it into IRDL and loads it, so MLIR itself
verifies every tle op (operand counts and kinds) where the bindings have IRDL (torch-mlir). Where they do not
(jaxlib on the GPU machine) tle ops are built unregistered and `verify_tle` checks the same table in Python.

Everything upstream already has is used from upstream: arith (elementwise arithmetic, comparisons, select,
casts, constants), math (exp, log, sqrt, erf, ...), scf (for, if, yield) and func (the kernel itself).

Conventions (the lowerings and the interpreter rely on them):
- A tile is a builtin ranked `tensor<...>`; a scalar is a builtin integer or float. Shapes are static.
- A kernel is a `func.func` with the unit attribute `tle.kernel` and `tle.mesh = ["x", "y", "z"]`: the launch
  grid is a mesh whose named axes `tle.program_id` / `tle.num_programs` read.
  `tle.many_programs` (a unit attribute) says the launch has more programs than the GPU has SMs (tle/abi.py
  ManyPrograms); `tle.many_waves`, more than twice as many (ManyWaves); `tle.short_k`, that the kernel's one dot
  sums at most 512 values of K per program under the launch's sizes (ShortK).
- A tensor parameter arrives as `!tle.ptr<elem>` plus i32 sizes and strides (i64 strides where its view is
  tle.wide, below, and i64 sizes where they pass 2**31 - 1); `tle.make_view` joins them into a
  `!tle.view<elem, rank>` that loads and stores address. Arguments may carry `tle.divisibility = d : i32` (the
  runtime proved the value divisible by d: 16, or for a dim or stride also 8, 4 or 2; for a pointer, 16: 16-byte
  aligned). Strides proven to be 1 are folded into `arith.constant 1` before this IR is built. A
  `tle.make_view` with the unit attribute `tle.unaligned_rows` views a tensor the launch proved TMA cannot read
  (tle/abi.py UnalignedRows); one with `tle.wide` views a tensor spanning more than 2**31 - 1 elements or with a
  larger stride or size (WideTensor): its strides are i64 and the lowerings compute its element offsets in i64,
  and along an axis whose size is i64 (WideDim) its element indices and bounds checks too.
- Loop hints live on `scf.for` as `tle.num_stages` and `tle.unroll` (i32). A loop with the unit attribute
  `tle.nonempty` runs at least once: its start is a constant below its stop under the launch's sizes
  (tle/abi.py LoopRuns). The two loops a LoopSplit makes of one both carry the unit attribute `tle.split`.
- A `tle.load` / `tle.store` may carry `tle.inside = array<i32: axis, ...>`: every program's tile lies inside the
  view along those axes, so a lowering drops their bounds checks (and checks nothing else to find such axes).
  Either the launch keeps it there (tle/abi.py GridTile / FixedTile) or the kernel does: a constant tile index
  along a dim of static size, `(index + 1) * tile <= size`. `inside_axes(op)` reads it.
- Every op carries the location of the .tle text it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..types import MAX_COMBINED
from .mlir import PROVIDER, has_uses, ir, irdl, isa, nested_ops

# Operand/result constraints: "any", "i32", "i1", "index" (i32 or i64), "tensor" (a builtin ranked tensor), "ptr",
# "view";
# prefixed "variadic " or "optional " where that applies.


@dataclass(frozen=True)
class OpDef:
    name: str
    operands: tuple[tuple[str, str], ...]
    results: tuple[tuple[str, str], ...]
    attrs: tuple[str, ...]
    doc: str
    example: str = ""
    optional_attrs: tuple[str, ...] = field(default=())


# combine_scan / combine_reduce take up to MAX_COMBINED inputs, each an operand group of its own, so that they may
# differ in type (IRDL binds one type to all the values of a variadic group).
_COMBINED_INPUTS = (("input0", "tensor"),) + tuple((f"input{i}", "optional tensor") for i in range(1, MAX_COMBINED))


def _combined_results(kind: str) -> tuple:
    return ((("result0", kind),) + tuple((f"result{i}", f"optional {kind}") for i in range(1, MAX_COMBINED)))


OPS: tuple[OpDef, ...] = (
    # ---- mesh: the launch grid -------------------------------------------------------------------------------
    OpDef("program_id", (), (("result", "i32"),), ("axis",),
          "This program's coordinate along a named axis of the launch mesh.",
          '%0 = "tle.program_id"() {axis = "x"} : () -> i32'),
    OpDef("num_programs", (), (("result", "i32"),), ("axis",),
          "The size of the launch mesh along a named axis.",
          '%0 = "tle.num_programs"() {axis = "y"} : () -> i32'),
    # ---- tensor views and tile memory access -----------------------------------------------------------------
    OpDef("make_view", (("ptr", "ptr"), ("sizes", "variadic index"), ("strides", "variadic index")),
          (("view", "view"),), ("elem", "name"),
          "A strided view of a tensor parameter: base pointer, one size and one stride (in elements) per axis; "
          "i32, except in a view marked tle.wide: its strides are i64, and so is a size past 2**31 - 1.",
          '%v = "tle.make_view"(%p, %M, %N, %sM, %c1) {elem = f32, name = "x", operandSegmentSizes = '
          'array<i32: 1, 2, 2>} : (!tle.ptr<f32>, i32, i32, i32, i32) -> !tle.view<f32, 2>'),
    OpDef("slice", (("view", "view"), ("starts", "variadic index"), ("sizes", "variadic index")),
          (("result", "view"),), ("elem", "name"),
          "The window of a view that starts at element `starts` (one per axis) with sizes `sizes`, in the view's "
          "strides: tile indices and bounds checks of the accesses through it are relative to the window. The "
          "kernel promises 0 <= start and start + size <= the view's size per axis (the interpreter checks it). "
          "`name` and the unit attributes tle.wide / tle.unaligned_rows are the sliced view's: it is the same "
          "tensor.",
          '%w = "tle.slice"(%v, %s, %c0, %n, %c128) {elem = f16, name = "q", operandSegmentSizes = '
          'array<i32: 1, 2, 2>} : (!tle.view<f16, 2>, i32, i32, i32, i32) -> !tle.view<f16, 2>'),
    OpDef("load", (("view", "view"), ("indices", "variadic i32")), (("result", "tensor"),), ("padding",),
          "Load the tile at tile index `indices` (element offset = index * tile size per axis). Elements outside "
          "the view read as `padding`. The tile shape is the result type's shape.",
          '%t = "tle.load"(%v, %row, %c0) {padding = 0xFF800000 : f32} : (!tle.view<f32, 2>, i32, i32) -> '
          'tensor<1x1024xf32>'),
    OpDef("store", (("view", "view"), ("value", "tensor"), ("indices", "variadic i32")), (), (),
          "Store a tile at tile index `indices`; elements outside the view are dropped.",
          '"tle.store"(%v, %t, %row, %c0) : (!tle.view<f32, 2>, tensor<1x1024xf32>, i32, i32) -> ()'),
    OpDef("gather", (("view", "view"), ("indices", "variadic tensor"), ("mask", "optional tensor")),
          (("result", "tensor"),), ("other",),
          "Read view[indices[0][i], indices[1][i], ...] for every element i of the (equal-shaped) index tiles. "
          "Where `mask` is false the element is `other` and memory is not touched. Unmasked out-of-range "
          "indices are undefined behaviour (the interpreter reports them).",
          '%g = "tle.gather"(%v, %idx) {other = 0.0 : f32, operandSegmentSizes = array<i32: 1, 1, 0>} : '
          '(!tle.view<f32, 1>, tensor<64xi32>) -> tensor<64xf32>'),
    OpDef("scatter", (("view", "view"), ("value", "tensor"), ("indices", "variadic tensor"),
                      ("mask", "optional tensor")), (), (),
          "Write value[i] to view[indices[0][i], ...] where mask[i] (or everywhere without a mask). When two "
          "elements write the same address, which one lands is undefined.",
          '"tle.scatter"(%v, %t, %idx) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : '
          '(!tle.view<f32, 1>, tensor<64xf32>, tensor<64xi32>) -> ()'),
    OpDef("atomic", (("view", "view"), ("value", "tensor"), ("indices", "variadic tensor"),
                     ("mask", "optional tensor"), ("compare", "optional tensor")), (("result", "tensor"),), ("kind",),
          "Atomic read-modify-write at view[indices...] where mask (or everywhere): kind = add | max | min | and | "
          "or | xor | xchg, or cas (with compare: where the element equals compare, it becomes value). Returns "
          "the old values.",
          '%o = "tle.atomic"(%v, %t, %idx) {kind = "add", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : '
          '(!tle.view<f32, 1>, tensor<64xf32>, tensor<64xi32>) -> tensor<64xf32>'),
    OpDef("tile_gather", (("source", "tensor"), ("indices", "tensor")), (("result", "tensor"),), ("axis",),
          "result[..., j, ...] = source[..., indices[..., j, ...], ...] along axis: a gather within a tile (no "
          "memory). indices (i32) has source's rank and its sizes on every other axis.",
          '%r = "tle.tile_gather"(%t, %i) {axis = 0 : i32} : (tensor<16xf32>, tensor<128xi32>) -> tensor<128xf32>'),
    OpDef("inline_asm", (("arg0", "tensor"),) + tuple((f"arg{i}", "optional tensor") for i in range(1, MAX_COMBINED))
          + (("ref", "optional tensor"),), (("result", "tensor"),), ("asm", "constraints", "pack", "pure"),
          "Inline PTX run elementwise (tt.elementwise_inline_asm): up to 8 arguments of the result's shape, each an "
          "operand group of its own (they may differ in type), then optionally `ref`, the same computation in tle "
          "ops, which only the interpreter reads. asm and constraints are LLVM inline-asm strings; pack elements per "
          "run; pure false keeps an unused or repeated run.",
          '%r = "tle.inline_asm"(%x) {asm = "tanh.approx.f32 $0, $1;", constraints = "=f,f", pack = 1 : i32, '
          'pure = true, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0>} : '
          '(tensor<128xf32>) -> tensor<128xf32>'),
    # ---- tile computation ------------------------------------------------------------------------------------
    OpDef("dot", (("a", "tensor"), ("b", "tensor"), ("acc", "tensor")), (("result", "tensor"),), ("precision",),
          "Matrix product a[M,K] @ b[K,N] + acc[M,N], products accumulated in acc's element type. precision is "
          "\"ieee\", \"tf32\" (f32 operands only) or \"fast\" (8-bit float operands: the tensor cores' own "
          "accumulation over the whole K loop; with \"ieee\" each dot's products are added to acc in f32).",
          '%d = "tle.dot"(%a, %b, %acc) {precision = "ieee"} : (tensor<64x32xf16>, tensor<32x64xf16>, '
          'tensor<64x64xf32>) -> tensor<64x64xf32>'),
    OpDef("reduce", (("input", "tensor"),), (("result", "any"),), ("kind", "axis"),
          "Reduce along `axis` (kind = sum | max | min | argmax | argmin); the axis is removed, a 1-D input "
          "gives a scalar. max/min propagate NaN; argmax/argmin return the first index of the extreme as i32.",
          '%s = "tle.reduce"(%t) {kind = "max", axis = 1 : i32} : (tensor<1x1024xf32>) -> tensor<1xf32>'),
    OpDef("scan", (("input", "tensor"),), (("result", "tensor"),), ("kind", "axis"),
          "Inclusive prefix scan along `axis` (kind = sum | prod | max | min; max/min propagate NaN). With the unit "
          "attribute `reverse`, from the last element to the first (the scan of the input flipped along `axis`, "
          "flipped back).",
          '%c = "tle.scan"(%t) {kind = "sum", axis = 1 : i32} : (tensor<1x1024xf32>) -> tensor<1x1024xf32>'),
    OpDef("combine_reduce", _COMBINED_INPUTS, _combined_results("any"), ("axis", "combine"),
          "Reduce 1 to 8 inputs of one shape together along `axis` into one result per input (the axis removed, a "
          "1-D input gives scalars), with the private func.func that `combine` names: (earlier element's values..., "
          "later element's values...) -> (combined values...), on scalars, applied in any association (it must be "
          "associative) and in the elements' order, unless the unit attribute `commutative` says the func commutes "
          "as well (then in any order). The optional `identities` array holds a value per input that the func "
          "leaves the other operand as it is with (Tile IR pads with them). The inputs may differ in element type: each is an "
          "optional operand group of its own (IRDL's variadic operands share one type).",
          '%n, %m = "tle.combine_reduce"(%a, %b) {axis = 1 : i32, combine = @k.welford.0, operandSegmentSizes = '
          'array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : '
          '(tensor<4x64xf32>, tensor<4x64xi32>) -> (tensor<4xf32>, tensor<4xi32>)'),
    OpDef("combine_scan", _COMBINED_INPUTS, _combined_results("tensor"), ("axis", "combine"),
          "Inclusive prefix scan of 1 to 8 inputs of one shape together along `axis`, one result per input, with "
          "the func `combine` names, as for combine_reduce: result[i] combines elements 0 .. i in that order. With "
          "the unit attribute `reverse`, elements n-1 .. i in that order (the scan of the inputs flipped along "
          "`axis`, flipped back).",
          '%g, %h = "tle.combine_scan"(%a, %b) {axis = 0 : i32, combine = @k.linear.0, identities = [1.0 : f32, '
          '0.0 : f32], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = '
          'array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, '
          'tensor<64xf32>)'),
    OpDef("histogram", (("input", "tensor"), ("mask", "optional tensor")), (("result", "tensor"),), (),
          "Counts of the values of a 1-D integer tile: result[b] is how many elements equal b (where `mask` is "
          "true, when given), for b in 0 .. B-1, B the result's size. Values outside [0, B) are not counted.",
          '%h = "tle.histogram"(%t, %m) : (tensor<1024xi32>, tensor<1024xi1>) -> tensor<256xi32>'),
    OpDef("splat", (("input", "any"),), (("result", "tensor"),), (),
          "A tile with every element equal to a scalar.",
          '%t = "tle.splat"(%x) : (f32) -> tensor<64x64xf32>'),
    OpDef("broadcast", (("input", "tensor"),), (("result", "tensor"),), (),
          "Repeat size-1 axes to the result shape (same rank).",
          '%t = "tle.broadcast"(%x) : (tensor<64x1xf32>) -> tensor<64x64xf32>'),
    OpDef("expand_dims", (("input", "tensor"),), (("result", "tensor"),), ("axis",),
          "Insert a size-1 axis at `axis`.",
          '%t = "tle.expand_dims"(%x) {axis = 1 : i32} : (tensor<64xf32>) -> tensor<64x1xf32>'),
    OpDef("reshape", (("input", "tensor"),), (("result", "tensor"),), (),
          "Same elements in row-major order, new shape.",
          '%t = "tle.reshape"(%x) : (tensor<4x16xf32>) -> tensor<64xf32>'),
    OpDef("transpose", (("input", "tensor"),), (("result", "tensor"),), ("perm",),
          "Permute axes: result axis i is input axis perm[i].",
          '%t = "tle.transpose"(%x) {perm = array<i32: 1, 0>} : (tensor<16x64xf32>) -> tensor<64x16xf32>'),
    OpDef("join", (("lhs", "tensor"), ("rhs", "tensor")), (("result", "tensor"),), (),
          "Two tiles of one type side by side along a new last axis of size 2: result[..., 0] is lhs, "
          "result[..., 1] is rhs.",
          '%t = "tle.join"(%a, %b) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64x2xi32>'),
    OpDef("split", (("input", "tensor"),), (("lhs", "tensor"), ("rhs", "tensor")), (),
          "A tile whose last axis is 2 as its two halves along that axis: lhs is input[..., 0], rhs input[..., 1] "
          "(join's inverse).",
          '%a, %b = "tle.split"(%t) : (tensor<64x2xf32>) -> (tensor<64xf32>, tensor<64xf32>)'),
    OpDef("arange", (), (("result", "tensor"),), ("start", "end"),
          "The i32 tile [start, start+1, ..., end-1].",
          '%r = "tle.arange"() {start = 0 : i32, end = 128 : i32} : () -> tensor<128xi32>'),
    OpDef("print", tuple((f"value{i}", "optional any") for i in range(MAX_COMBINED)), (), ("message",),
          "Show the message and up to 8 values (scalars or tiles, each an operand group of its own) from every "
          "program that runs it: a debugging aid, in no defined order between programs.",
          '"tle.print"(%t) {message = "t =", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : '
          '(tensor<4xf32>) -> ()'),
    OpDef("assert", (("condition", "any"),), (), ("message",),
          "Where the i1 condition (scalar or tile) is false, the interpreter stops with the message at this op's "
          "location. The GPU lowerings drop the op unless the kernel carries tle.device_asserts (the `asserts` "
          "launch option): then the device stops the launch there (Triton keeps device asserts only in its debug "
          "mode).",
          '"tle.assert"(%c) {message = "x positive"} : (tensor<64xi1>) -> ()'),
    OpDef("undef", (), (("result", "any"),), ("name",),
          "The value of a `var` declared without an initialiser. Reading it before an assignment is an error "
          "the interpreter reports; compiled code sees an unspecified value.",
          '%u = "tle.undef"() {name = "acc"} : () -> f32'),
)

OPS_BY_NAME = {f"tle.{op.name}": op for op in OPS}


def _irdl_text() -> str:
    """The IRDL declaration of the dialect, generated from OPS (never kept by hand)."""
    lines = ["irdl.dialect @tle {",
             "  irdl.type @ptr {\n    %0 = irdl.any\n    irdl.parameters(elem: %0)\n  }",
             "  irdl.type @view {\n    %0 = irdl.any\n    %1 = irdl.any\n    irdl.parameters(elem: %0, rank: %1)\n  }"]
    base = {"any": "irdl.any", "i32": "irdl.is i32", "i1": "irdl.is i1",
            "tensor": 'irdl.base "!builtin.tensor"', "ptr": "irdl.base @tle::@ptr", "view": "irdl.base @tle::@view"}
    for op in OPS:
        body, n = [], 0

        def var(constraint):
            nonlocal n
            n += 1
            if constraint == "index":  # i32 or i64
                body.append(f"    %v{n}a = irdl.is i32\n    %v{n}b = irdl.is i64\n"
                            f"    %v{n} = irdl.any_of(%v{n}a, %v{n}b)")
            else:
                body.append(f"    %v{n} = {base[constraint]}")
            return f"%v{n}"

        def group(items):
            parts = []
            for name, c in items:
                words = c.split()
                kind = words[0] if len(words) == 2 else ""
                parts.append(f"{name}: {kind + ' ' if kind else ''}{var(words[-1])}")
            return ", ".join(parts)

        if op.operands:
            body.append(f"    irdl.operands({group(op.operands)})")
        if op.results:
            body.append(f"    irdl.results({group(op.results)})")
        if op.attrs:
            body.append("    irdl.attributes {" + ", ".join(f'"{a}" = {var("any")}' for a in op.attrs) + "}")
        lines.append(f"  irdl.operation @{op.name} {{\n" + "\n".join(body) + "\n  }")
    lines.append("}")
    return "\n".join(lines)


IRDL = _irdl_text()


def load_tle(ctx: "ir.Context") -> bool:
    """Load the tle dialect into ctx. Returns True when MLIR verifies tle ops (IRDL), False when they stay
    unregistered (bindings without IRDL); `verify_tle` then checks the op table in Python."""
    if irdl is None:
        return False
    with ctx:
        irdl.load_dialects(ir.Module.parse(IRDL))
    return True


def verify_tle(module: "ir.Module") -> None:
    """Check every tle op against OPS (for bindings without IRDL); raises ValueError naming the op."""
    for op in nested_ops(module.operation):
        name = op.name
        if not name.startswith("tle."):
            continue
        d = OPS_BY_NAME.get(name)
        if d is None:
            raise ValueError(f"unknown tle op {name} at {op.location}")
        fixed = sum(1 for _, c in d.operands if not c.startswith(("variadic", "optional")))
        if len(op.operands) < fixed:
            raise ValueError(f"{name} expects at least {fixed} operands, got {len(op.operands)} at {op.location}")
        least = sum(1 for _, c in d.results if not c.startswith(("variadic", "optional")))
        most = len(op.results) if any(c.startswith("variadic") for _, c in d.results) else len(d.results)
        if not least <= len(op.results) <= most:
            raise ValueError(f"{name} expects {least} to {most} results, got {len(op.results)} at {op.location}")
        for a in d.attrs:
            if a not in op.attributes:
                raise ValueError(f"{name} is missing attribute '{a}' at {op.location}")


def relaxed_atomics(kernel) -> bool:
    """Whether a kernel's atomics may be relaxed: none of its atomics' results is read. Programs see each other
    only through what an atomic returns (docs/language.md, "Memory ordering of atomics"), so then nothing in the
    launch can observe their order against the program's other loads and stores, and both lowerings emit them
    relaxed. On the H200 (benchmarks/RESULTS.md, "Relaxed atomics"), 2^24 values counted into 4096 bins with an
    atomic per element took 488 us relaxed against 708 acquire-release on either path, and a 2^28-element sum
    with one atomic per program 254 against 276 (native path)."""
    return not any(op.name == "tle.atomic" and has_uses(op.results[0]) for op in nested_ops(kernel))


def inside_axes(op) -> frozenset:
    """The axes a load or store's `tle.inside` marks: the launch keeps the tile inside the view there."""
    if "tle.inside" not in op.attributes:
        return frozenset()
    return frozenset(ir.DenseI32ArrayAttr(op.attributes["tle.inside"]))


def constant_int(value: "ir.Value") -> int | None:
    """The value of an integer scalar `arith.constant`, else None (a block argument or a computed value)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value if isa(value.type, ir.IntegerType) else None


def unbroadcast(v: "ir.Value") -> "ir.Value":
    """The tile that tle.broadcast ops widened into v (v itself where none did). Both lowerings compute a gather's
    element offsets at each index's own shape: a [BM, 1] row index times its stride is BM products, not BM x BK."""
    while not isinstance(v.owner, ir.Block) and v.owner.name == "tle.broadcast":
        v = v.owner.operands[0]
    return v


def unit_insertion(src, dst) -> list[int] | None:
    """Where each axis of shape `src` lies in `dst` when dst is src with size-1 axes inserted (what a tle.reshape
    that only adds axes does), matched left to right; else None. Both lowerings read such reshapes as cheap ones
    (TTIR's tt.expand_dims; Tile IR's load at the broadcast shape)."""
    axes, at = [], 0
    for size in src:
        while at < len(dst) and dst[at] != size:
            if dst[at] != 1:
                return None
            at += 1
        if at == len(dst):
            return None
        axes.append(at)
        at += 1
    return axes if all(d == 1 for d in dst[at:]) else None


_EXTREME_PARTNER = {"max": "argmax", "argmax": "max", "min": "argmin", "argmin": "min"}


def extreme_partner(op) -> "ir.Operation | None":
    """The other half of a max/argmax (or min/argmin) pair: a tle.reduce of the partner kind over the same tile
    and axis, in the same block, else None. Both lowerings then reduce once: argmax's (value, index) reduction,
    carrying the max itself (maximumf, NaN-propagating) as its value, gives both results. Where the carried value
    is a NaN or a zero of either sign, the index's compares treat it as the value it stands for did (NaN above
    every number, -0.0 equal to +0.0), so the index is argmax's, and the value is max's (docs/numerics.md).
    A top-1 router takes both of the same logits (benchmarks/RESULTS.md, "max and argmax in one reduction")."""
    op = op.operation
    partner = _EXTREME_PARTNER.get(ir.StringAttr(op.attributes["kind"]).value)
    if partner is None:
        return None
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    for use in op.operands[0].uses:
        other = use.owner.operation
        if other.name == "tle.reduce" and ir.StringAttr(other.attributes["kind"]).value == partner and \
                ir.IntegerAttr(other.attributes["axis"]).value == axis and other.block == op.block:
            return other
    return None


# The ops that scan. The rules measured on cumsum (a kernel with a scan keeps its bounds checks natively, a wide scan
# takes the native path, a scan in a loop asks Tile IR for 4 programs per SM) take scans with a combine fn too: the
# backends build both with the same scan machinery. Those were not timed apart.
SCANS = ("tle.scan", "tle.combine_scan")


def combine_func(op) -> "ir.Operation":
    """The private func.func that a tle.combine_scan / tle.combine_reduce names in its `combine` attribute."""
    name = ir.FlatSymbolRefAttr(op.attributes["combine"]).value
    top = op.operation
    while top.parent is not None:
        top = top.parent.operation
    for f in top.regions[0].blocks[0].operations:
        f = f.operation
        if f.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == name:
            return f
    raise ValueError(f"no func.func @{name} for the {op.name} at {op.location}")


def scan_to_reuse(reduce_op) -> "ir.Operation | None":
    """The tle.combine_scan earlier in a tle.combine_reduce's block that scans the same values along the same axis
    with the same fn and identities, not reversed, or None. The reduce is that scan's last element along the axis,
    so a lowering that keeps the order (a scan, then the last element) takes it from there instead of scanning
    twice: a chunked linear recurrence scans a chunk for its steps and reduces it for its carry."""
    op = reduce_op.operation
    if "commutative" in op.attributes:
        return None
    fn = _func_body(combine_func(op))
    for other in op.block.operations:
        other = other.operation
        if other == op:
            return None
        if other.name != "tle.combine_scan" or "reverse" in other.attributes:
            continue
        same = [str(other.attributes[a]) if a in other.attributes else None for a in ("axis", "identities")] == \
            [str(op.attributes[a]) if a in op.attributes else None for a in ("axis", "identities")]
        if same and list(other.operands) == list(op.operands) and _func_body(combine_func(other)) == fn:
            return other
    return None


def _func_body(func) -> str:
    """A combine func's text without its name: two funcs built from one fn for the same types read the same."""
    name = ir.StringAttr(func.attributes["sym_name"]).value
    return str(func).replace(f"@{name}(", "@(", 1)


def print_label(message: str) -> str:
    """What every path shows before a tle.print's values: the message, with a colon unless it ends in one (or in
    '='); empty for no message."""
    return message if not message or message.endswith((":", "=")) else message + ":"


def is_kernel(op) -> bool:
    """Whether a top-level op of a tle module is a kernel (the others are the funcs its combine_scan and
    combine_reduce ops name)."""
    return op.name == "func.func" and "tle.kernel" in op.attributes


# The name wrapping the location of the reductions over pairs that move elements between lanes (a sort or topk
# network's compare-and-swap steps, tle/bitonic.py; flip's swaps; take's max): the interpreter's padded-lanes check
# does not check them as reductions, and moves the padded lanes with the elements (runtime/padded_lanes.py).
NETWORK_STEP = "tle.network"

# A kernel compiled with the `asserts` launch option (tlec --asserts) carries this unit attribute: the GPU lowerings
# then keep its tle.assert ops (tt.assert natively, Tile IR's assert), where they otherwise drop them, as Triton
# drops tl.device_assert outside its debug mode.
DEVICE_ASSERTS = "tle.device_asserts"


def keep_asserts(module) -> None:
    """Mark every kernel of a tle module to keep its asserts on the GPU."""
    for op in module.body.operations:
        if is_kernel(op.operation):
            op.operation.attributes[DEVICE_ASSERTS] = ir.UnitAttr.get(module.context)


def keeps_asserts(kernel) -> bool:
    return DEVICE_ASSERTS in kernel.attributes


def registered() -> bool:
    return PROVIDER == "torch_mlir"
