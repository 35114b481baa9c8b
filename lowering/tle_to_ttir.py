"""tle dialect -> Triton IR (TTIR), printed in the generic form Triton 3.6 parses, with every tle location kept.

Entry point: `tle_to_ttir(module, mode="pointer") -> str`. `lower(module)` gives the TTIR `ir.Module` and
`print_ttir` its text, for callers that want both. The tle module is left untouched. `dot_loop_stages(module)`
tells the caller which kernel-wide `num_stages` suits the module (see the pipeline hints below).

The new module lives in the tle module's context: arith, math and scf ops are registered (MLIR verifies them),
`tt.*` ops and types are unregistered and built with `ir.Operation.create`, so only Triton's parser checks them
(tests/lowering/test_tle_to_ttir.py passes every kernel through it and through the whole Triton pipeline).
Every op created for a tle op gets that op's location, so Triton's diagnostics and the PTX `.loc` lines point at
.tle source.

Lowering choices (the semantics are the ones dialects/tle.py states):
- tle.make_view produces no code; loads and stores address (ptr, sizes, strides) directly. tle.slice moves the
  pointer to the window's first element and takes the window's sizes (_slice).
- tle.load / tle.store: masked tensors of pointers, `ptr + sum((index_i * tile_i + k_i) * stride_i)`, in i32
  as hand-written Triton computes them, except in a view of a tensor spanning more than 2**31 - 1 elements or
  with a larger stride (tle.wide; tle/abi.py WideTensor), where strides and offsets are i64 (hand-written
  Triton overflows there unless its author casts to int64). The mask is `0 <= index_i * tile_i + k < size_i`
  for every axis, one compare per axis (unsigned, signed where the start is a constant >= 0); an axis
  is left unmasked only where the op's tle.inside marks it (dialects/tle.py), and in a kernel with a scan only
  where the axis is 1 wide (`_keeps_checks`). Masked-off elements
  read `padding` (tt.load's `other`). `_Lowering.tile_pointers` says which part is scalar and which per element.
  Loads and stores written with `tma=true` (tle.tma), and every one under mode="descriptor", move 2-D tiles whose
  padding is 0 through tensor descriptors (Hopper TMA) where `_descriptor_ok` proves TMA's layout rules; the rest
  keep pointers. Descriptors are built in the entry block (device-side: Triton asks for global scratch for them).
- gather / scatter / atomic: pointers `ptr + sum(idx_i * stride_i)` in i32, or i64 in a wide view.
- Floating-point atomic max/min use integer atomics on the bit pattern (as Triton does: signed max / unsigned min
  for max, the mirror for min), keyed on the sign bit so -0.0 is right; a NaN operand is first made the NaN that
  wins (+NaN for max, -NaN for min), so NaN propagates from the value. A NaN already in memory stays only if its
  sign bit is clear (max) or set (min).
- reduce max/min: arith.maximumf/minimumf (NaN-propagating); argmax/argmin: a two-operand tt.reduce over
  (value, index) whose combine prefers the larger (smaller) value, then NaN, then the lower index. A max and an
  argmax of the same tile and axis are one such reduce, whose carried value is the max (extreme_partner).
- scan: tt.scan (sum, prod, max, min), reversed by Triton's own `reverse` (flip-scan-flip: its LLIR reverses the
  lanes, then scans forwards). combine_scan: tt.scan over all operands with the combine func's body inlined into
  the region (Triton's region and the func both take the earlier element's values first); combine_reduce: that
  tt.scan, then each result's last element (tt.reduce combines lanes in no defined order, and the fn need not be
  commutative), the last elements of an earlier identical combine_scan where there is one (scan_to_reuse), or
  tt.reduce itself where the kernel says the fn commutes; the private funcs are not lowered.
- f32 division is Triton's own `/` (arith.divf: div.full.f32, within 2 ulp; docs/numerics.md), so a tile divided
  by one value per row costs one reciprocal, not a correctly rounded division per element. f16/bf16 division
  (arith.divf of them does not compile) and sqrt are IEEE: tt.precise_divf / tt.precise_sqrt, f16/bf16 through
  f32 (Triton's math.sqrt of f32 is sqrt.approx.ftz). Negation flips the sign bit (Triton 3.6 rejects arith.negf).
  arith.mului_extended (tle's umulhi) becomes tt.mulhiui.
  math.tanh and math.powf call libdevice. Every other arith/math op passes through: Triton lowers it itself
  (exp, exp2, log, log2 and rsqrt of f32 with its fast approximations, as Triton's own tl.exp etc.).
- Loop hints: `tle.unroll` becomes `tt.loop_unroll_factor` and `tle.num_stages` becomes `tt.num_stages`, except on
  a loop that holds a dot and asks for the kernel-wide depth (Triton's `num_stages` option, the `num_stages`
  argument here). With the attribute, Triton 3.6 software-pipelines every load of the loop through shared memory;
  without it, only the loads that feed the dot's operands, as for hand-written Triton. Other loads in a matmul
  loop are small (a block-scaled product's per-row and per-block scales), and staging them costs time.
- tle.undef becomes a zero constant: reading a `var` before its first assignment is an error the interpreter
  reports; compiled code may read any value, zero is the cheapest.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ..dialects.mlir import has_uses, ir, isa, nested_ops, operand_groups
from ..dialects.tle import (SCANS, combine_func, constant_int, extreme_partner, inside_axes, is_kernel, keeps_asserts,
                            print_label, relaxed_atomics, scan_to_reuse, unbroadcast, unit_insertion)
from ..types import BITS, MLIR_F8, wrap

# Triton 3.6 enums (I32EnumAttr: written as plain i32 in the generic form). Values from triton._C.libtriton.ir.
_RMW = {"and": 1, "or": 2, "xor": 3, "add": 4, "fadd": 5, "max": 6, "min": 7, "umax": 8, "umin": 9, "xchg": 10}
_SEM_RELAXED, _SEM_ACQ_REL, _SCOPE_GPU = 1, 4, 1
_PRECISION = {"tf32": 0, "ieee": 2}
# arith.cmpi / arith.cmpf predicates (MLIR's numbering).
_EQ, _SLT, _SGT, _SGE, _ULT = 0, 2, 4, 5, 6
_F_ORD, _F_UGT, _F_ULT, _F_UNO = 7, 9, 11, 14

MODES = ("pointer", "descriptor")


def tle_to_ttir(module: "ir.Module", mode: str = "pointer", tma: bool = True, num_stages: int = 3) -> str:
    """The TTIR text of a tle module: generic form, locations printed. tma=False (a GPU without the Tensor Memory
    Accelerator, before sm_90) leaves tma=true accesses on pointers. num_stages is the kernel-wide pipeline depth
    the text will be compiled with (Triton's option of that name)."""
    return print_ttir(lower(module, mode, tma, num_stages))


def dot_loop_stages(module: "ir.Module") -> set[int]:
    """The `pipeline(stages=N)` depths of the module's loops that hold a dot in their own body (not only in a
    nested loop or if: Triton's pipeliner looks at the loop's own ops)."""
    return {_attr_int(op, "tle.num_stages") for top in module.body.operations for op in nested_ops(top.operation)
            if op.name == "scf.for" and "tle.num_stages" in _attrs(op) and _holds_dot(op)}


def _holds_dot(loop) -> bool:
    return any(o.operation.name == "tle.dot" for o in loop.regions[0].blocks[0].operations)


def print_ttir(module: "ir.Module") -> str:
    return module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True)


def lower(module: "ir.Module", mode: str = "pointer", tma: bool = True, num_stages: int = 3) -> "ir.Module":
    """Lower every tle kernel of `module` into a new TTIR module (same context); arith/scf parts are verified."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    with module.context, module.operation.location:
        out = ir.Module.create()
        lowering = _Lowering(mode, tma, num_stages)
        lowering.ip = ir.InsertionPoint(out.body)
        for op in module.body.operations:
            if is_kernel(op.operation):  # the other funcs are combines, inlined into the scans that name them
                lowering.lower_op(op.operation)
        out.operation.verify()
    return out


# ---- types and small helpers ------------------------------------------------------------------------------------

def _i(bits: int) -> "ir.Type":
    return ir.IntegerType.get_signless(bits)


def _ptr(elem: "ir.Type") -> "ir.Type":
    return ir.Type.parse(f"!tt.ptr<{elem}>")


def _ttir_type(t: "ir.Type") -> "ir.Type":
    s = str(t)
    if s.startswith("!tle.ptr<"):
        return ir.Type.parse("!tt.ptr<" + s[len("!tle.ptr<"):])
    return t


def _tensor(shape, elem) -> "ir.Type":
    return ir.RankedTensorType.get(list(shape), elem)


def _shape(v: "ir.Value") -> list[int] | None:
    return list(ir.RankedTensorType(v.type).shape) if isa(v.type, ir.RankedTensorType) else None


def _elem(t: "ir.Type") -> "ir.Type":
    return ir.RankedTensorType(t).element_type if isa(t, ir.RankedTensorType) else t


def _is_float(t: "ir.Type") -> bool:
    return not isa(_elem(t), ir.IntegerType)


def _width(t: "ir.Type") -> int:
    e = _elem(t)
    if isa(e, ir.IntegerType):
        return ir.IntegerType(e).width
    return BITS[MLIR_F8.get(str(e), str(e))]


_F8 = tuple(MLIR_F8)  # the 8-bit floats as the IR spells them
# Triton's RoundingMode (tt.fp_to_fp's `rounding`): 1 is round to nearest even.
_RTNE = 1
# tt.dot's maxNumImpreciseAcc for 8-bit float operands: how many K elements the tensor cores may sum at their own
# reduced precision before the f32 accumulator takes them. 2**30 (never promote: precision "fast") is what Triton's
# tl.dot gives 8-bit operands by default; "ieee" (fast_acc=false) gives the dot's K, so each loop step's products
# are added in f32 (Triton then keeps a second accumulator); 0 would make Triton widen the operands to f16 and use
# mma.sync, not the 8-bit wgmma.
_F8_IMPRECISE_ACC = 1 << 30


def _attrs(op) -> dict:
    """All attributes of an op, by name (indexing by position gives NamedAttributes in every bindings version)."""
    named = [op.attributes[i] for i in range(len(op.attributes))]
    return {a.name: a.attr for a in named}


def _attr_int(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _attr_str(op, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value


def _i32_attr(v: int) -> "ir.Attribute":
    return ir.IntegerAttr.get(_i(32), v)


def _i64_attr(v: int) -> "ir.Attribute":
    return ir.IntegerAttr.get(_i(64), v)


def _loop_variant(v: "ir.Value") -> bool:
    """Whether v may change from one iteration of an enclosing loop to the next: a loop's induction variable or
    iteration argument, or a value computed in a loop body from one (or by an op other than a constant, a program
    id or arith arithmetic). Conservative: True when unsure."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return owner.owner.name != "tt.func"
    op, parent = owner, owner.parent
    while parent is not None and parent.name not in ("scf.for", "scf.while", "tt.func"):
        parent = parent.parent
    if parent is None or parent.name == "tt.func":
        return False
    if op.name in ("arith.constant", "tt.get_program_id", "tt.get_num_programs"):
        return False
    if op.name.startswith("arith.") and len(op.regions) == 0:
        return any(_loop_variant(x) for x in op.operands)
    return True


@dataclass
class _View:
    ptr: "ir.Value"  # !tt.ptr<elem>
    sizes: list  # i32 values (i64 where past 2**31 - 1: tle/abi.py WideDim)
    strides: list  # i32 values (i64 in a wide view), in elements
    elem: "ir.Type"
    wide: bool = False  # tle.wide: the tensor spans more than 2**31 - 1 elements or has a larger stride
    descriptors: dict = field(default_factory=dict)  # tile shape -> tensor descriptor, built once where the view is


# ---- the lowering -----------------------------------------------------------------------------------------------

class _Lowering:
    def __init__(self, mode: str, tma: bool = True, num_stages: int = 3):
        self.mode = mode
        self.tma = tma  # the target has TMA: tma=true accesses may take descriptors
        self.num_stages = num_stages  # the kernel-wide pipeline depth Triton compiles with
        self.values: dict = {}  # tle Value -> TTIR Value
        self.views: dict = {}  # tle view Value -> _View
        self.ip = None
        self.loc = None  # location of the tle op being lowered: every op built for it gets this one
        self.mesh: list[str] = []
        self.keep_checks = False  # the kernel being lowered keeps its per-element bounds checks (_keeps_checks)
        self.device_asserts = False  # it keeps its asserts (dialects/tle.py keeps_asserts: the `asserts` option)
        self.relaxed_atomics = False  # no atomic's result is read in the kernel being lowered (relaxed_atomics)
        self.squeezed: dict = {}  # TTIR value of a tile load in the tile's shape -> the load in the squeezed shape

    # -- building --
    def op(self, name, results, operands, attrs=None, regions=0):
        return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attrs or {},
                                   regions=regions, loc=self.loc, ip=self.ip)

    def val(self, name, rtype, operands, attrs=None):
        return self.op(name, [rtype], operands, attrs).result

    def const(self, t: "ir.Type", value):
        """A scalar or splat-tensor constant of type t."""
        e = _elem(t)
        attr = ir.FloatAttr.get(e, value) if _is_float(e) else ir.IntegerAttr.get(e, int(value))
        if isa(t, ir.RankedTensorType):
            attr = ir.DenseElementsAttr.get_splat(t, attr)
        return self.val("arith.constant", t, [], {"value": attr})

    def binop(self, name, a, b):
        return self.val(name, a.type, [a, b])

    def cmpi(self, pred, a, b):
        return self.val("arith.cmpi", self._like(a.type, _i(1)), [a, b], {"predicate": _i64_attr(pred)})

    def cmpf(self, pred, a, b):
        return self.val("arith.cmpf", self._like(a.type, _i(1)), [a, b], {"predicate": _i64_attr(pred)})

    def select(self, c, a, b):
        return self.val("arith.select", a.type, [c, a, b])

    @staticmethod
    def _like(t, elem):
        return _tensor(ir.RankedTensorType(t).shape, elem) if isa(t, ir.RankedTensorType) else elem

    def widened(self, v, elem):
        """v (an i32 or i64 scalar or tensor) sign-extended to `elem` where that is i64 and v is not; v itself
        otherwise (a wide view's strides arrive as i64)."""
        if _elem(v.type) == elem:
            return v
        return self.val("arith.extsi", self._like(v.type, elem), [v])

    def add_offsets(self, a, b):
        """a + b for offset tensors of one shape, the i32 one first widened where the other is i64."""
        if _elem(a.type) != _elem(b.type):
            a, b = self.widened(a, _i(64)), self.widened(b, _i(64))
        return self.binop("arith.addi", a, b)

    def splat(self, v, shape):
        return self.val("tt.splat", _tensor(shape, v.type), [v])

    def arange(self, n: int, start: int = 0):
        return self.val("tt.make_range", _tensor([n], _i(32)), [], {"start": _i32_attr(start),
                                                                    "end": _i32_attr(start + n)})

    def along(self, v, axis: int, shape):
        """A 1-D tensor laid along `axis` of `shape`: size-1 axes added around it, then broadcast."""
        cur = _shape(v)
        while len(cur) < len(shape) - axis:  # trailing axes
            cur = cur + [1]
            v = self.val("tt.expand_dims", _tensor(cur, _elem(v.type)), [v], {"axis": _i32_attr(len(cur) - 1)})
        while len(cur) < len(shape):  # leading axes
            cur = [1] + cur
            v = self.val("tt.expand_dims", _tensor(cur, _elem(v.type)), [v], {"axis": _i32_attr(0)})
        if cur != list(shape):
            v = self.val("tt.broadcast", _tensor(shape, _elem(v.type)), [v])
        return v

    def expand_to(self, v, shape):
        """v in `shape`, a shape with size-1 axes inserted into v's (unit_insertion): tt.expand_dims for each, in
        order; None for any other shape."""
        kept = unit_insertion(_shape(v), shape)
        if kept is None:
            return None
        cur = list(_shape(v))
        for axis in (a for a in range(len(shape)) if a not in kept):
            cur.insert(axis, 1)
            v = self.val("tt.expand_dims", _tensor(cur, _elem(v.type)), [v], {"axis": _i32_attr(axis)})
        return v

    def and_all(self, conds):
        out = None
        for c in conds:
            out = c if out is None else self.binop("arith.andi", out, c)
        return out

    # -- walking --
    def lower_op(self, op):
        self.loc = op.location
        rule = _RULES.get(op.name)
        if rule is not None:
            rule(self, op)
        elif op.name.startswith("tle."):
            raise NotImplementedError(f"tle_to_ttir: no lowering for {op.name} at {op.location}")
        else:
            self.clone(op)

    def lower_block(self, old: "ir.Block", new: "ir.Block"):
        for a, b in zip(old.arguments, new.arguments):
            self.values[a] = b
        saved = self.ip
        self.ip = ir.InsertionPoint(new)
        for op in old.operations:
            self.lower_op(op.operation)
        self.ip = saved

    def lower_regions(self, old_op, new_op):
        for old_r, new_r in zip(old_op.regions, new_op.regions):
            for old_b in old_r.blocks:
                new_b = new_r.blocks.append(*[_ttir_type(a.type) for a in old_b.arguments],
                                            arg_locs=[a.location for a in old_b.arguments])
                self.lower_block(old_b, new_b)

    def v(self, old: "ir.Value") -> "ir.Value":
        return self.values[old]

    def bind(self, old_op, *new_values):
        for r, n in zip(old_op.results, new_values):
            self.values[r] = n

    def clone(self, op, attrs=None, operands=None):
        """arith, math, scf ops: the same op on the mapped operands (or `operands`, already lowered), regions
        lowered recursively."""
        if attrs is None:
            attrs = _attrs(op)
        if operands is None:
            operands = [self.v(x) for x in op.operands]
        new = self.op(op.name, [_ttir_type(r.type) for r in op.results], operands, attrs, regions=len(op.regions))
        self.bind(op, *new.results)
        self.lower_regions(op, new)
        return new

    # -- memory addressing --
    def tile_pointers(self, view: _View, indices, shape, inside=(), squeeze=False):
        """Pointers to the tile at tile index `indices` and the mask of its elements inside the view; with
        `squeeze`, both without the tile's size-1 axes (_squeezed: the shape Triton sees, see _load).

        Offsets are i32 unless the view is wide (tle.wide: the tensor spans more than 2**31 - 1 elements or has a
        larger stride), so the offset of every element inside any other view fits (an element outside may wrap,
        but it is masked off). A wide view's scalar base offset is i64, and so is the per-element offset along an
        axis whose stride is not a small constant; element indices along one axis (start + k, the masks) stay i32
        in every view, as each size does. Per axis, with start = index * tile and k = 0 .. tile-1:
        - a 1-wide axis adds index * stride to a scalar base and is masked by one scalar `index <u size`;
        - a masked axis whose index does not change inside its loop (if any) adds (start + k) * stride, the same
          `start + k` its mask compares (as Triton's `offs = pid * B + arange(B)` serves pointer and mask);
        - any other axis adds start * stride to the scalar base and k * stride per element, so that inside a loop
          only the scalar base changes from one iteration to the next.
        The mask compares `start + k < size` unsigned (a negative start reads as huge), or signed where start is
        a constant >= 0 (the compare user code writes, `arange(0, B) < N`, so Triton can reuse one for the other).
        An axis is left unmasked when it is in `inside` (the op's tle.inside: the launch, or a constant index
        along a static size, keeps every program's tile inside; dialects/tle.py)."""
        i32 = _i(32)
        base_t = _i(64) if view.wide else i32
        out_shape = _squeezed(shape) if squeeze else list(shape)
        axis_of = {i: sum(1 for t in shape[:i] if t != 1 or not squeeze) for i in range(len(shape))}
        masked = [i not in inside for i in range(len(shape))]
        offset = None  # scalar, base_t
        inner = None  # tensor of the tile's shape, i32 (i64 where a wide view needs it)
        pos = {}  # axis -> start + k, tensor<t x i32>
        for i, (idx, t, stride) in enumerate(zip(indices, shape, view.strides)):
            c_idx, c_stride = constant_int(idx), constant_int(stride)
            shared = not view.wide and t > 1 and c_idx is None and masked[i] and not _loop_variant(idx)
            if not shared and c_idx != 0:  # start * stride into the scalar base
                if c_idx is not None and c_stride is not None:
                    c = c_idx * t * c_stride
                    term = self.const(base_t, c if view.wide else wrap(c, "i32"))
                else:
                    term = self.widened(idx, base_t)
                    scale = t * (c_stride if c_stride is not None else 1)
                    if scale != 1:
                        term = self.binop("arith.muli", term,
                                          self.const(base_t, scale if view.wide else wrap(scale, "i32")))
                    if c_stride is None:
                        term = self.binop("arith.muli", term, self.widened(stride, base_t))
                offset = term if offset is None else self.binop("arith.addi", offset, term)
            if t == 1:
                continue
            r = self.arange(t)
            if masked[i]:
                pos_t = _elem(view.sizes[i].type)  # i64 along a dim past 2**31 - 1 (tle/abi.py WideDim)
                start = self.binop("arith.muli", self.widened(idx, pos_t), self.const(pos_t, t)) if c_idx is None \
                    else (None if c_idx == 0 else self.const(pos_t, c_idx * t if pos_t != i32 else
                                                             wrap(c_idx * t, "i32")))
                k = self.widened(r, pos_t)
                pos[i] = k if start is None else self.binop("arith.addi", self.splat(start, [t]), k)
                if shared:
                    r = pos[i]
            if c_stride != 1:
                if view.wide and (c_stride is None or (t - 1) * abs(c_stride) > 2 ** 31 - 1):
                    r = self.widened(r, _i(64))
                st = self.const(r.type, c_stride) if c_stride is not None else \
                    self.splat(self.widened(stride, _elem(r.type)), [t])
                r = self.binop("arith.muli", r, st)
            r = self.along(r, axis_of[i], out_shape)
            inner = r if inner is None else self.add_offsets(inner, r)
        base = view.ptr if offset is None else self.val("tt.addptr", view.ptr.type, [view.ptr, offset])
        ptrs = self.splat(base, out_shape)
        if inner is not None:
            ptrs = self.val("tt.addptr", ptrs.type, [ptrs, inner])
        # Mask: 0 <= start + k < size per masked axis; a scalar compare where the tile is 1 wide.
        scalar, tensor = [], []
        for i, (idx, t, size) in enumerate(zip(indices, shape, view.sizes)):
            if not masked[i]:
                continue
            if t == 1:
                scalar.append(self.cmpi(_ULT, self.widened(idx, _elem(size.type)), size))
                continue
            c_idx = constant_int(idx)
            signed = c_idx is not None and 0 <= c_idx * t and (c_idx + 1) * t <= 2 ** 31 - 1
            tensor.append(self.along(self.cmpi(_SLT if signed else _ULT, pos[i], self.splat(size, [t])),
                                     axis_of[i], out_shape))
        mask = self.and_all(tensor)
        if scalar:
            s = self.splat(self.and_all(scalar), out_shape)
            mask = s if mask is None else self.binop("arith.andi", mask, s)
        return ptrs, mask

    def gather_pointers(self, view: _View, indices, shape):
        """Pointers ptr + sum(idx_i * stride_i) for i32 or i64 index tiles broadcast to `shape`: each term at its
        index's own shape, terms of one shape summed there, then broadcast (the Tile IR lowering's `pointers`). The
        sum is i32, or i64 in a wide view (tle.wide) or where an index is i64."""
        off_t = _i(64) if view.wide or any(_elem(i.type) == _i(64) for i in indices) else _i(32)
        sums: dict = {}
        for idx, stride in zip(indices, view.strides):
            at = tuple(_shape(idx))
            c = constant_int(stride)
            idx = self.widened(idx, off_t)
            if c != 1:
                idx = self.binop("arith.muli", idx, self.const(idx.type, c) if c is not None
                                 else self.splat(self.widened(stride, off_t), list(at)))
            sums[at] = self.binop("arith.addi", sums[at], idx) if at in sums else idx
        offset = None
        for at, term in sums.items():
            if list(at) != list(shape):
                term = self.val("tt.broadcast", _tensor(shape, off_t), [term])
            offset = term if offset is None else self.binop("arith.addi", offset, term)
        ptrs = self.splat(view.ptr, shape)
        return self.val("tt.addptr", ptrs.type, [ptrs, offset])

    def load(self, ptrs, mask, other_attr, rtype):
        operands, seg = [ptrs], [1, 0, 0]
        if mask is not None:
            other = self.val("arith.constant", rtype, [], {"value": ir.DenseElementsAttr.get_splat(rtype, other_attr)})
            operands, seg = [ptrs, mask, other], [1, 1, 1]
        return self.val("tt.load", rtype, operands, {"operandSegmentSizes": ir.DenseI32ArrayAttr.get(seg)})

    def store(self, ptrs, value, mask):
        self.op("tt.store", [], [ptrs, value] + ([mask] if mask is not None else []))

    def atomic_rmw(self, kind, ptrs, value, mask):
        sem = _SEM_RELAXED if self.relaxed_atomics else _SEM_ACQ_REL
        return self.val("tt.atomic_rmw", value.type, [ptrs, value] + ([mask] if mask is not None else []), {
            "atomic_rmw_op": _i32_attr(_RMW[kind]), "sem": _i32_attr(sem), "scope": _i32_attr(_SCOPE_GPU)})

    def atomic_cas(self, ptrs, compare, value):
        sem = _SEM_RELAXED if self.relaxed_atomics else _SEM_ACQ_REL
        return self.val("tt.atomic_cas", value.type, [ptrs, compare, value], {
            "sem": _i32_attr(sem), "scope": _i32_attr(_SCOPE_GPU)})


# ---- one function per op ----------------------------------------------------------------------------------------

def _func(L: _Lowering, op):
    ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    inputs = [_ttir_type(t) for t in ftype.inputs]
    arg_attrs = []
    old_arg_attrs = ir.ArrayAttr(op.attributes["arg_attrs"]) if "arg_attrs" in op.attributes else [None] * len(inputs)
    for a in old_arg_attrs:
        d = {}
        if a is not None and "tle.divisibility" in ir.DictAttr(a):
            d["tt.divisibility"] = _i32_attr(ir.IntegerAttr(ir.DictAttr(a)["tle.divisibility"]).value)
        arg_attrs.append(ir.DictAttr.get(d))
    L.mesh = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["tle.mesh"])] \
        if "tle.mesh" in op.attributes else ["x", "y", "z"]
    L.keep_checks = _keeps_checks(op)
    L.device_asserts = keeps_asserts(op)
    L.relaxed_atomics = relaxed_atomics(op)
    new = L.op("tt.func", [], [], {
        "sym_name": op.attributes["sym_name"],
        "sym_visibility": ir.StringAttr.get("public"),
        "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, [])),
        "arg_attrs": ir.ArrayAttr.get(arg_attrs),
    }, regions=1)
    L.lower_regions(op, new)


def _keeps_checks(func) -> bool:
    """Whether a kernel's loads and stores keep their per-element bounds checks where tle.inside would drop them: a
    kernel with a scan. ptxas schedules Triton's scans worse without the masks. examples/cumsum.tle on the H200
    (benchmarks/RESULTS.md, "Scans keep their bounds checks"), with the launch facts against without their bounds
    facts, us: bf16 4096x4096 20.21 against 19.98 and 2048x16384 37.42 against 36.59; f32 2048x16384 74.98 against
    68.48 (130 registers, one program per SM, against 127 and two); level (within 0.4%) at 8192x1024 and 4096x8192
    in both dtypes and 4096x4096 f32. With only the column masks kept (this rule) the PTX has the reference's
    instructions, and f32 2048x16384 ran level with the reference (69.5 and 69.4 us, twice). Scans in loops were not
    measured; the rule takes them too, as checks in a loop cost only a compare per element, and scans with a combine
    fn (dialects/tle.py SCANS)."""
    return any(o.name in SCANS for o in nested_ops(func))


def _inside(L: _Lowering, op, shape) -> frozenset:
    """The axes of a load's or store's tile to leave unchecked: tle.inside's, less those of more than one element in
    a kernel that keeps its checks (_keeps_checks). A 1-wide axis's check is one scalar compare (`row <u M`), which
    the hand-written reference launched on M programs does not have either."""
    inside = inside_axes(op)
    return frozenset(a for a in inside if shape[a] == 1) if L.keep_checks else inside


def _return(L: _Lowering, op):
    L.op("tt.return", [], [])


def _program_id(L: _Lowering, op):
    name = "tt.get_program_id" if op.name == "tle.program_id" else "tt.get_num_programs"
    L.bind(op, L.val(name, _i(32), [], {"axis": _i32_attr(L.mesh.index(_attr_str(op, "axis")))}))


def _make_view(L: _Lowering, op):
    rank = (len(op.operands) - 1) // 2
    ops = [L.v(x) for x in op.operands]
    view = L.views[op.result] = _View(ops[0], ops[1:1 + rank], ops[1 + rank:],
                                      ir.TypeAttr(op.attributes["elem"]).value, "tle.wide" in op.attributes)
    # One descriptor per tile shape, built here (the kernel's entry block) rather than inside loops, for the loads
    # and stores that want one (_wants_descriptor).
    for use in op.result.uses:
        user = use.owner
        if _wants_descriptor(L, user):
            if user.name == "tle.load":
                shape, padding = _shape(user.result), user.attributes["padding"]
            else:
                shape, padding = _shape(user.operands[1]), None
            if tuple(shape) not in view.descriptors and _descriptor_ok(view, shape, padding):
                view.descriptors[tuple(shape)] = _descriptor(L, view, shape)


def _slice(L: _Lowering, op):
    """A window of a view: its base moved by sum(start_i * stride_i) (in the view's offset type: i32, i64 where
    wide), its own sizes, the same strides. It has no descriptors: its tiles go through pointers, whose alignment
    Triton derives from the base's and the strides' divisibility."""
    parent = L.views[op.operands[0]]
    rank = len(parent.strides)
    operands = [L.v(x) for x in list(op.operands)[1:]]
    base_t = _i(64) if parent.wide else _i(32)
    offset = None
    for start, stride in zip(operands[:rank], parent.strides):
        if constant_int(start) == 0:
            continue
        term = L.widened(start, base_t)
        if constant_int(stride) != 1:
            term = L.binop("arith.muli", term, L.widened(stride, base_t))
        offset = term if offset is None else L.binop("arith.addi", offset, term)
    ptr = parent.ptr if offset is None else L.val("tt.addptr", parent.ptr.type, [parent.ptr, offset])
    L.views[op.result] = _View(ptr, operands[rank:], parent.strides, parent.elem, parent.wide)


def _wants_descriptor(L: _Lowering, op) -> bool:
    """A tile load or store goes through a tensor descriptor when the whole module is lowered in descriptor mode,
    or when the kernel asked for it (tma=true: tle.tma) on a target with TMA, and _descriptor_ok allows it; else
    through pointers. (Triton would rewrite descriptors into pointer code before sm_90, losing the alignment facts
    the pointer lowering gives it.)"""
    return op.name in ("tle.load", "tle.store") and (L.mode == "descriptor" or (L.tma and "tle.tma" in op.attributes))


def _descriptor_of(L: _Lowering, view: _View, op, shape, padding):
    """The view's descriptor that this load (its padding) or store (None) goes through, or None: pointers."""
    if _wants_descriptor(L, op) and _descriptor_ok(view, shape, padding):
        return view.descriptors.get(tuple(shape))
    return None


def _squeezed(shape) -> list[int]:
    """shape without its size-1 axes."""
    return [t for t in shape if t != 1]


def _squeezable(shape) -> bool:
    """A tile shape that has size-1 axes besides at least one other axis."""
    return len(_squeezed(shape)) not in (0, len(shape))


def _load(L: _Lowering, op):
    """A tile load: through a descriptor, else pointers and a mask.

    A tile with size-1 axes beside others is loaded in the squeezed shape, as a Triton author writes it, where
    - it is read only to drop them (`reshape(load(q, tile=[1, BM, D], at=[b, m, 0]), [BM, D])`, a head of a batched
      tensor): the reshapes become no-ops (_reshape). Triton has no squeeze: a tt.reshape from [1, BM, D] leaves the
      tile in a layout its dot lowering cannot take from shared memory, so a `dot` operand read that way was
      reloaded from shared memory into registers on every iteration (attention: 8% slower than written 2-D);
    - a gather of the squeezed shape sits in the same block (_beside_gather): tt.expand_dims then gives the tile
      its shape for its users.
    The second is for Triton's coalescing, which gives one layout to memory accesses of one shape and order that
    feed each other. A gather's addresses are not contiguous, so alone it gets one element a thread; a row loaded
    1-D beside it lends it its 8-wide vectors. Loaded [1, BLOCK], the row and a [BLOCK] gather (a per-channel
    weight, `gather(w, c)` with c = col / HW) each got a layout of their own and a conversion through shared memory
    every iteration, and the gather's index arithmetic ran per element: GroupNorm bf16 ran 0.65-0.77x its Triton
    twin on the H200, 1.02-1.30x after (benchmarks/RESULTS.md, "GroupNorm, a KV-cache write and a GEMV"). Not every
    row is loaded 1-D: where nothing 2-D in memory anchors the expanded tile's layout (a loop that only sums rows
    into a [1, BLOCK] accumulator), Triton leaves it in its default layout of one element a thread and converts
    each row into it."""
    view = L.views[op.operands[0]]
    rtype = op.result.type
    shape = _shape(op.result)
    indices = [L.v(x) for x in list(op.operands)[1:]]
    desc = _descriptor_of(L, view, op, shape, op.attributes["padding"])
    if desc is not None:
        L.bind(op, L.val("tt.descriptor_load", rtype, [desc, *_element_coords(L, indices, shape)]))
        return
    only_squeezed = all(u.owner.name == "tle.reshape" and _shape(u.owner.result) == _squeezed(shape)
                        for u in op.result.uses)
    squeeze = _squeezable(shape) and (only_squeezed or _beside_gather(op, _squeezed(shape)))
    if squeeze:
        rtype = _tensor(_squeezed(shape), _elem(rtype))
    ptrs, mask = L.tile_pointers(view, indices, shape, _inside(L, op, shape), squeeze)
    tile = L.load(ptrs, mask, op.attributes["padding"], rtype)
    if squeeze and not only_squeezed:
        full = L.expand_to(tile, shape)
        L.squeezed[full] = tile
        tile = full
    L.bind(op, tile)


def _beside_gather(op, shape) -> bool:
    """A tle.gather of tile shape `shape` in op's block (_load)."""
    return any(o.name == "tle.gather" and _shape(o.result) == shape for o in op.operation.block.operations)


def _store(L: _Lowering, op):
    """A tile store: through a descriptor, else pointers and a mask. A value that is a reshape adding only size-1
    axes (`store(o, reshape(t, [1, BM, D]), ...)`) is stored from its source, in the squeezed shape (see _load)."""
    view = L.views[op.operands[0]]
    value = L.v(op.operands[1])
    shape = _shape(value)
    indices = [L.v(x) for x in list(op.operands)[2:]]
    desc = _descriptor_of(L, view, op, shape, None)
    if desc is not None:
        L.op("tt.descriptor_store", [], [desc, value, *_element_coords(L, indices, shape)])
        return
    source = op.operands[1].owner
    squeeze = (_squeezable(shape) and not isinstance(source, ir.Block) and source.name == "tle.reshape"
               and _shape(source.operands[0]) == _squeezed(shape))
    if squeeze:
        value = L.v(source.operands[0])
    ptrs, mask = L.tile_pointers(view, indices, shape, _inside(L, op, shape), squeeze)
    L.store(ptrs, value, mask)


def _indexed(L: _Lowering, op, with_value: bool):
    """(view, value, (index tiles before their broadcasts, the shape they broadcast to), mask) of a gather,
    scatter or atomic."""
    view, *groups = operand_groups(op)
    value = L.v(groups.pop(0)[0]) if with_value else None
    idx, mask = groups[0], groups[1]
    return (L.views[view[0]], value, ([L.v(unbroadcast(x)) for x in idx], _shape(idx[0])),
            (L.v(mask[0]) if mask else None))


def _gather(L: _Lowering, op):
    view, _, idx, mask = _indexed(L, op, False)
    L.bind(op, L.load(L.gather_pointers(view, *idx), mask, op.attributes["other"], op.result.type))


def _scatter(L: _Lowering, op):
    view, value, idx, mask = _indexed(L, op, True)
    L.store(L.gather_pointers(view, *idx), value, mask)


def _atomic(L: _Lowering, op):
    view, value, idx, mask = _indexed(L, op, True)
    kind = _attr_str(op, "kind")
    ptrs = L.gather_pointers(view, *idx)
    if kind == "cas":  # no mask (tle/check.py): every lane compares and maybe swaps
        compare = L.v(operand_groups(op)[-1][0])
        L.bind(op, L.atomic_cas(ptrs, compare, value))
    elif kind == "add":
        L.bind(op, L.atomic_rmw("fadd" if _is_float(value.type) else "add", ptrs, value, mask))
    elif kind not in ("max", "min") or not _is_float(value.type):  # a float exchange swaps bits as it is
        L.bind(op, L.atomic_rmw(kind, ptrs, value, mask))
    else:
        L.bind(op, _float_atomic_minmax(L, kind, ptrs, value, mask))


def _inline_asm(L: _Lowering, op):
    """tt.elementwise_inline_asm on the arguments; the `ref` group is the interpreter's, left for Triton's dead code
    elimination (a ref is computed only, never stored: tle/check.py)."""
    args = [L.v(g[0]) for g in operand_groups(op)[:-1] if g]
    L.bind(op, L.val("tt.elementwise_inline_asm", op.result.type, args, {
        "asm_string": op.attributes["asm"], "constraints": op.attributes["constraints"],
        "packed_element": op.attributes["pack"], "pure": op.attributes["pure"]}))


def _float_atomic_minmax(L: _Lowering, kind, ptrs, value, mask):
    """max/min of floats through integer atomics on the bits. Non-negative floats (sign bit clear) order like
    their bits as signed integers, negative ones in reverse as unsigned integers: so max is a signed max when the
    operand's sign bit is clear and an unsigned min when it is set (min: signed min / unsigned max)."""
    w = _width(value.type)
    shape = _shape(value)
    ity = _tensor(shape, _i(w))
    bits = L.val("tt.bitcast", ity, [value])
    # A NaN operand becomes the NaN that wins its atomic: +NaN (largest signed) for max, -NaN (largest unsigned)
    # for min, so NaN propagates into memory whatever its sign.
    quiet = (0x7FF8 << 48) if w == 64 else 0x7FC00000
    nan_bits = quiet if kind == "max" else quiet | (1 << (w - 1))
    bits = L.select(L.cmpf(_F_UNO, value, value), L.const(ity, wrap(nan_bits, f"i{w}")), bits)
    neg = L.cmpi(_SLT, bits, L.const(ity, 0))
    pos = L.binop("arith.xori", neg, L.const(neg.type, 1))
    iptrs = L.val("tt.bitcast", _tensor(shape, _ptr(_i(w))), [ptrs])
    m_pos = pos if mask is None else L.binop("arith.andi", mask, pos)
    m_neg = neg if mask is None else L.binop("arith.andi", mask, neg)
    signed, unsigned = ("max", "umin") if kind == "max" else ("min", "umax")
    old_pos = L.atomic_rmw(signed, iptrs, bits, m_pos)
    old_neg = L.atomic_rmw(unsigned, iptrs, bits, m_neg)
    return L.val("tt.bitcast", value.type, [L.select(pos, old_pos, old_neg)])


def _dot(L: _Lowering, op):
    a, b, acc = (L.v(x) for x in op.operands)
    precision = _attr_str(op, "precision")
    # tf32 only means something for f32 operands; Triton ignores it otherwise, ieee is its default.
    prec = _PRECISION["tf32"] if precision == "tf32" and str(_elem(a.type)) == "f32" else _PRECISION["ieee"]
    imprecise = 0
    if str(_elem(a.type)) in _F8:  # "ieee": promote into the f32 accumulator every K of this dot (one per loop step)
        imprecise = _F8_IMPRECISE_ACC if precision == "fast" else _shape(a)[-1]
    L.bind(op, L.val("tt.dot", op.result.type, [a, b, acc], {"inputPrecision": _i32_attr(prec),
                                                              "maxNumImpreciseAcc": _i32_attr(imprecise)}))


def _combine_region(L: _Lowering, new_op, arg_types, body, ret_name):
    """Fill the single region of a tt.reduce / tt.scan: body(args) -> results, then `ret_name`."""
    block = new_op.regions[0].blocks.append(*arg_types, arg_locs=[L.loc] * len(arg_types))
    saved = L.ip
    L.ip = ir.InsertionPoint(block)
    L.op(ret_name, [], body(list(block.arguments)))
    L.ip = saved


_COMBINE = {  # kind -> (float op, int op)
    "sum": ("arith.addf", "arith.addi"), "prod": ("arith.mulf", "arith.muli"), "max": ("arith.maximumf", "arith.maxsi"),
    "min": ("arith.minimumf", "arith.minsi"),
}


def _inline_combine(L: _Lowering, op, args):
    """The body of the func that a combine_scan / combine_reduce names, lowered on `args` (the earlier element's
    values, then the later one's, as the func and Triton's combine regions both take them); its returned values."""
    body = combine_func(op).regions[0].blocks[0]
    for a, v in zip(body.arguments, args):
        L.values[a] = v
    for inner in body.operations:
        inner = inner.operation
        if inner.name == "func.return":
            return [L.v(x) for x in inner.operands]
        L.lower_op(inner)
    raise ValueError(f"the combine func of {op.location} has no return")


def _scan_attrs(op) -> dict:
    """tt.scan's attributes; reversed with Triton's own `reverse` (the scan of the flipped tile, flipped back)."""
    return {"axis": _i32_attr(_attr_int(op, "axis")), "reverse": ir.BoolAttr.get("reverse" in op.attributes)}


def _with_combine_fn(L: _Lowering, op, tt_name: str, attrs: dict, result_types=None):
    """tt.scan or tt.reduce (tt_name) over a combine_scan's / combine_reduce's operands, the combine func inlined
    into its region; a scan's results have the operands' types."""
    xs = [L.v(x) for x in op.operands]
    elems = [_elem(x.type) for x in xs]
    new = L.op(tt_name, result_types or [x.type for x in xs], xs, attrs, regions=1)
    _combine_region(L, new, elems + elems, lambda a: _inline_combine(L, op, a), f"{tt_name}.return")
    return new


def _combined_scan(L: _Lowering, op):
    """tt.scan over a combine_scan's / combine_reduce's operands (a combine_reduce is never reversed)."""
    return _with_combine_fn(L, op, "tt.scan", _scan_attrs(op))


def _combine_scan(L: _Lowering, op):
    L.bind(op, *_combined_scan(L, op).results)


def _combine_reduce(L: _Lowering, op):
    """tle.combine_reduce. A combine fn need not be commutative (a linear recurrence's is not), and tt.reduce
    combines lanes in no defined order (wrong results on the H200 for the recurrence, tests/gpu/test_scans_gpu.py),
    while tt.scan keeps it: so the scan, then each result's last element along the axis, picked by a reduce in which
    every other element changes nothing (-0.0 for floats, which leaves even -0.0 as it is; 0 for integers; false
    for bools). A fn the kernel declares commutative (Welford's) takes tt.reduce itself (Welford: a third of the
    SASS)."""
    axis = _attr_int(op, "axis")
    if "commutative" in op.attributes:
        L.bind(op, *_with_combine_fn(L, op, "tt.reduce", {"axis": _i32_attr(axis)},
                                     [_ttir_type(r.type) for r in op.results]).results)
        return
    reused = scan_to_reuse(op)  # the same scan, already lowered earlier in the block
    scanned = [L.v(r) for r in reused.results] if reused is not None else list(_combined_scan(L, op).results)
    shape = _shape(scanned[0])
    index = L.along(L.arange(shape[axis]), axis, shape)
    last = L.cmpi(_EQ, index, L.const(index.type, shape[axis] - 1))
    picked = []
    for r, res in zip(scanned, op.results):
        e = _elem(r.type)
        flt, boolean = _is_float(e), str(e) == "i1"
        kept = L.select(last, r, L.const(r.type, -0.0 if flt else 0))
        name = "arith.ori" if boolean else "arith.addf" if flt else "arith.addi"
        red = L.op("tt.reduce", [_ttir_type(res.type)], [kept], {"axis": _i32_attr(axis)}, regions=1)
        _combine_region(L, red, [e, e], lambda a, name=name: [L.binop(name, a[0], a[1])], "tt.reduce.return")
        picked.append(red.result)
    L.bind(op, *picked)


def _reduce(L: _Lowering, op):
    if op.result in L.values:  # lowered with its max/argmax partner
        return
    x = L.v(op.operands[0])
    kind, axis = _attr_str(op, "kind"), _attr_int(op, "axis")
    e = _elem(x.type)
    attrs = {"axis": _i32_attr(axis)}
    partner = extreme_partner(op)
    if kind in _COMBINE and partner is None:
        name = _COMBINE[kind][0 if _is_float(e) else 1]
        new = L.op("tt.reduce", [op.result.type], [x], attrs, regions=1)
        _combine_region(L, new, [e, e], lambda a: [L.binop(name, a[0], a[1])], "tt.reduce.return")
        L.bind(op, new.result)
        return
    # argmax / argmin: reduce (value, index) pairs; with a max (min) of the same tile, that max is the value.
    arg_kind = kind if kind.startswith("arg") else "arg" + kind
    shape = _shape(x)
    index = L.along(L.arange(shape[axis]), axis, shape)
    itype = L._like(op.result.type, _i(32))
    vtype = L._like(op.result.type, e)
    new = L.op("tt.reduce", [vtype, itype], [x, index], attrs, regions=1)
    _combine_region(L, new, [e, _i(32), e, _i(32)],
                    lambda a: _arg_combine(L, arg_kind, *a, carry_extreme=partner is not None), "tt.reduce.return")
    value, idx = new.results
    for reduce_op in (op, partner) if partner is not None else (op,):
        L.bind(reduce_op, idx if _attr_str(reduce_op, "kind").startswith("arg") else value)


def _arg_combine(L: _Lowering, kind, v1, i1, v2, i2, carry_extreme=False):
    """Keep (v1, i1) when v1 is the better extreme: strictly larger (argmax) / smaller (argmin), or NaN against a
    number (NaN wins, as in max/min), or equal (both NaN counts as equal) with the lower index. With
    `carry_extreme`, the value carried is max(v1, v2) (min), NaN-propagating with -0.0 < +0.0, for a max (min)
    that shares this reduction (extreme_partner); the compares cannot tell it from the value at the index.

    For floats, `better` is "v1 beats v2 or is NaN, and v2 is a number" (one unordered compare and one NaN test), and
    `worse` the same with the two swapped; neither holds exactly when the two are equal or both NaN. That is two
    compares fewer than spelling out the NaN cases and equality apart (the probe's router, an argmax over 64
    experts beside their max and softmax: 1064 SASS instructions against 1144), with the same answer for every
    pair (tests/test_arg_extreme.py)."""
    if _is_float(v1.type):
        beats = _F_UGT if kind == "argmax" else _F_ULT
        better = L.binop("arith.andi", L.cmpf(beats, v1, v2), L.cmpf(_F_ORD, v2, v2))
        worse = L.binop("arith.andi", L.cmpf(beats, v2, v1), L.cmpf(_F_ORD, v1, v1))
        not_worse = L.binop("arith.xori", worse, L.const(_i(1), 1))
    else:
        better = L.cmpi(_SGT if kind == "argmax" else _SLT, v1, v2)
        not_worse = L.cmpi(_EQ, v1, v2)  # not better: not worse is equal
    first = L.binop("arith.ori", better, L.binop("arith.andi", not_worse, L.cmpi(_SLT, i1, i2)))
    if carry_extreme:
        extreme = _COMBINE["max" if kind == "argmax" else "min"][0 if _is_float(v1.type) else 1]
        return [L.binop(extreme, v1, v2), L.select(first, i1, i2)]
    return [L.select(first, v1, v2), L.select(first, i1, i2)]


def _scan(L: _Lowering, op):
    x = L.v(op.operands[0])
    e = _elem(x.type)
    name = _COMBINE[_attr_str(op, "kind")][0 if _is_float(e) else 1]
    new = L.op("tt.scan", [x.type], [x], _scan_attrs(op), regions=1)
    _combine_region(L, new, [e, e], lambda a: [L.binop(name, a[0], a[1])], "tt.scan.return")
    L.bind(op, new.result)


def _assert(L: _Lowering, op):
    """tle.assert -> tt.assert where the kernel keeps its asserts (the `asserts` launch option), else nothing, as
    Triton drops tl.device_assert outside its debug mode. Triton's lowering calls __assertfail with the op's
    location, the .tle file and line, beside the message."""
    if L.device_asserts:
        L.op("tt.assert", [], [L.v(op.operands[0])], {"message": op.attributes["message"]})


def _print(L: _Lowering, op):
    """tle.print -> tt.print (Triton's device_print: each element on a line of its own, after the program id and
    its index). Bools are shown as 0 and 1 (widened to i32)."""
    values = []
    for v in op.operands:
        x = L.v(v)
        if not _is_float(_elem(x.type)) and _width(_elem(x.type)) == 1:
            x = L.val("arith.extui", L._like(x.type, _i(32)), [x])
        values.append(x)
    L.op("tt.print", [], values, {
        "prefix": ir.StringAttr.get(f" {print_label(_attr_str(op, 'message'))} "), "hex": ir.BoolAttr.get(False),
        "isSigned": ir.DenseI32ArrayAttr.get([0 if _is_float(_elem(x.type)) else 1 for x in values])})


def _histogram(L: _Lowering, op):
    """tle.histogram -> tt.histogram, masked to the values in [0, B). Triton's histogram reads only a value's low
    log2(B) bits (a ballot per bit, then popcounts), so a value outside the range would land in bin `value mod B`;
    and it takes i32 values only (its bit tests are i32)."""
    x = L.v(op.operands[0])
    elem, n, bins = _elem(x.type), _shape(x)[0], _shape(op.result)[0]
    width = _width(elem)
    if bins < 1 << (width - 1):  # one unsigned compare: a negative value reads as huge
        inside = L.cmpi(_ULT, x, L.const(x.type, bins))
    else:  # every value of the type below B: only the negative ones are out
        inside = L.cmpi(_SGE, x, L.const(x.type, 0))
    mask = inside if len(op.operands) == 1 else L.binop("arith.andi", inside, L.v(op.operands[1]))
    if width != 32:
        x = L.val("arith.trunci" if width > 32 else "arith.extsi", _tensor([n], _i(32)), [x])
    L.bind(op, L.val("tt.histogram", _tensor([bins], _i(32)), [x, mask]))


def _shape_op(tt_name, attrs=lambda op: {}):
    def rule(L: _Lowering, op):
        L.bind(op, L.val(tt_name, op.result.type, [L.v(op.operands[0])], attrs(op)))
    return rule


def _reshape(L: _Lowering, op):
    """A reshape that only inserts size-1 axes (the checker's rank promotion, `reshape(arange(0, B), [1, B])`)
    becomes tt.expand_dims: Triton's axis analysis keeps contiguity and divisibility through expand_dims but not
    through tt.reshape, and loses vectorised masks (measured: layernorm bf16 had 8x the compares of Triton's)."""
    x = L.v(op.operands[0])
    dst = _shape(op.result)
    if _shape(x) == dst:  # a load already lowered in this shape (_load's squeeze)
        L.bind(op, x)
        return
    if x in L.squeezed and _shape(L.squeezed[x]) == dst:  # the squeezed load under its expand_dims (_load)
        L.bind(op, L.squeezed[x])
        return
    expanded = L.expand_to(x, dst)
    L.bind(op, expanded if expanded is not None else L.val("tt.reshape", op.result.type, [x]))


def _arange(L: _Lowering, op):
    start, end = _attr_int(op, "start"), _attr_int(op, "end")
    L.bind(op, L.arange(end - start, start))


def _undef(L: _Lowering, op):
    L.bind(op, L.const(op.result.type, 0))


def _for(L: _Lowering, op):
    attrs = {}
    for name, attr in _attrs(op).items():
        if name == "tle.num_stages":
            # Left to the kernel-wide option where it says the same, so that only the dot's operand loads are
            # staged (the module's docstring). A block-scaled FP8 product at 4096^3 on the H200, with its two scale
            # tiles staged too: 0.90x the same kernel in hand-written Triton; without: 1.06x (benchmarks/RESULTS.md).
            if not (_holds_dot(op) and ir.IntegerAttr(attr).value == L.num_stages):
                attrs["tt.num_stages"] = attr
        elif name == "tle.unroll":
            attrs["tt.loop_unroll_factor"] = attr
        elif not name.startswith("tle."):
            attrs[name] = attr
    operands = [L.v(x) for x in op.operands]
    if "tle.nonempty" in _attrs(op) and (start := constant_int(op.operands[0])) is not None:
        # The loop runs at least once, so its stop may be raised to start + 1: the same loop, and LLVM can then
        # see it runs once and drop the zero-trip path. That path matters: with it, the accumulator of a
        # pipelined wgmma loop gets its zeros on two paths, and ptxas serialises every wgmma of the loop
        # ("C7515: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator
        # registers"), as it does for x @ w^T with 128x256 tiles: 251 against 190 us at 4096^3 bf16, H200.
        ub = operands[1]
        operands[1] = L.val("arith.maxsi", ub.type, [ub, L.const(ub.type, start + 1)])
    L.clone(op, attrs, operands)


# ---- elementwise ops Triton 3.6 does not take as they are ----------------------------------------------------
# Every other arith/math op is passed through: Triton lowers them for f16, bf16, f32 and f64 (f64 transcendentals
# and f32 sin/cos with full range reduction, through libdevice). Checked by compiling each op for sm_90:
# tests/lowering/test_tle_to_ttir.py::test_elementwise_ops_compile.

def _via_f32(L: _Lowering, op, compute):
    """Run compute(args, type) in f32 for f16/bf16 operands and round the result once."""
    t = op.result.type
    args = [L.v(x) for x in op.operands]
    if str(_elem(t)) in ("f16", "bf16"):
        f32 = L._like(t, ir.F32Type.get())
        r = compute([L.val("arith.extf", f32, [a]) for a in args], f32)
        return L.bind(op, L.val("arith.truncf", t, [r]))
    L.bind(op, compute(args, t))


def _divf(L: _Lowering, op):
    """f32: arith.divf, which Triton lowers to div.full.f32 (at most 2 ulp from the IEEE quotient): Triton's own `/`.
    The correctly rounded div.rn.f32 costs a MUFU.RCP, five FFMAs and a range check per element even when the
    divisor is one value for the whole tile, where div.full's reciprocal is computed once (softmax's `e / sum`:
    measured 2x the SASS of Triton's kernel, benchmarks/ptx_compare.py). f64: arith.divf (div.rn.f64, IEEE).
    f16 and bf16 (Triton does not lower arith.divf of them) stay correctly rounded: tt.precise_divf in f32, then
    one rounding, which is still correctly rounded (24 >= 2*11 + 2)."""
    narrow = str(_elem(op.result.type)) in ("f16", "bf16")
    _via_f32(L, op, lambda args, t: L.val("tt.precise_divf" if narrow else "arith.divf", t, args))


def _sqrt(L: _Lowering, op):
    """IEEE sqrt (Triton's math.sqrt of f32 is sqrt.approx.ftz.f32); f16/bf16 through f32 as for division."""
    def compute(args, t):
        return L.val("math.sqrt" if str(_elem(t)) == "f64" else "tt.precise_sqrt", t, args)
    _via_f32(L, op, compute)


def _libdevice(fn: str):
    """math ops Triton 3.6 cannot legalize (tanh, powf): call libdevice; f16/bf16 through f32."""
    def rule(L: _Lowering, op):
        def compute(args, t):
            symbol = f"__nv_{fn}" + ("f" if str(_elem(t)) == "f32" else "")
            return L.val("tt.extern_elementwise", t, args, {
                "libname": ir.StringAttr.get("libdevice"), "libpath": ir.StringAttr.get(_libdevice_path()),
                "symbol": ir.StringAttr.get(symbol), "pure": ir.BoolAttr.get(True)})
        _via_f32(L, op, compute)
    return rule


def _libdevice_path() -> str:
    import triton.backends.nvidia as nv
    return os.path.join(os.path.dirname(nv.__file__), "lib", "libdevice.10.bc")


def _f8_convert(L: _Lowering, op):
    """arith.extf / arith.truncf with an 8-bit float side (the tle dialect converts those only to and from f32):
    tt.fp_to_fp, which Triton lowers to cvt.rn.f16x2.e4m3x2 (exact) and cvt.rn.satfinite.e4m3x2.f32 (nearest even,
    saturating: docs/numerics.md). Other extf/truncf pass through."""
    x = L.v(op.operands[0])
    t = op.result.type
    if str(_elem(t)) not in _F8 and str(_elem(x.type)) not in _F8:
        return L.clone(op)
    attrs = {"rounding": _i32_attr(_RTNE)} if str(_elem(t)) in _F8 else {}
    L.bind(op, L.val("tt.fp_to_fp", t, [x], attrs))


def _bitcast(L: _Lowering, op):
    """arith.bitcast of a tile: tt.bitcast, as Triton's own front end builds it. Triton 3.6's TTGIR conversion
    rejects arith.bitcast of tensors in some programs ("failed to legalize operation 'arith.bitcast'"): every one
    with an 8-bit float side, and a sort() of 16 or more f32 elements (its partners are bitcast both ways), where
    a lone f32 <-> i32 bitcast compiles. tt.bitcast compiles in all of them. Scalars pass through."""
    x = L.v(op.operands[0])
    if isa(x.type, ir.RankedTensorType):
        return L.bind(op, L.val("tt.bitcast", op.result.type, [x]))
    L.clone(op)


def _negf(L: _Lowering, op):
    """Triton 3.6 does not legalize arith.negf (its own `-x` is `0 - x`, wrong for 0): flip the sign bit (exact for
    zeros and NaN)."""
    x = L.v(op.operands[0])
    it = L._like(x.type, _i(_width(x.type)))
    cast = "tt.bitcast" if isa(x.type, ir.RankedTensorType) else "arith.bitcast"
    flipped = L.binop("arith.xori", L.val(cast, it, [x]), L.const(it, -(1 << (_width(x.type) - 1))))
    L.bind(op, L.val(cast, x.type, [flipped]))


def _mului_extended(L: _Lowering, op):
    """The high word as tt.mulhiui (what tl.umulhi builds; Triton has no lowering for arith.mului_extended); the
    low word, where something reads it, as arith.muli."""
    a, b = (L.v(x) for x in op.operands)
    low = L.binop("arith.muli", a, b) if has_uses(op.results[0]) else None
    L.bind(op, low, L.binop("tt.mulhiui", a, b))


# ---- tensor descriptors (tma=true, or mode="descriptor") -------------------------------------------------------

def _descriptor_ok(view: _View, shape, padding) -> bool:
    """TMA fits a 2-D tile whose padding is zero (TMA fills out-of-bounds with zeros), whose last stride is the
    constant 1 and whose row is at least 16 bytes. Row strides must be 16-byte aligned at run time: the runtime's
    divisibility facts cannot be seen here, so the view's row stride must carry them (a constant multiple of
    16 bytes or a stride argument with tt.divisibility)."""
    if len(shape) != 2 or constant_int(view.strides[-1]) != 1 or max(shape) > 256:  # TMA boxes: <= 256 per axis
        return False
    if any(_elem(s.type) != _i(32) for s in view.sizes):  # tt.make_tensor_descriptor takes i32 sizes
        return False
    if padding is not None:
        if isa(padding, ir.FloatAttr):
            v = ir.FloatAttr(padding).value
            if v != 0.0 or math.copysign(1.0, v) < 0:
                return False
        elif ir.IntegerAttr(padding).value != 0:
            return False
    elem_bytes = _width(view.elem) // 8
    if shape[-1] * elem_bytes < 16:
        return False
    row = view.strides[0]
    c = constant_int(row)
    row_ok = (c * elem_bytes) % 16 == 0 if c is not None else _divisible16(row)
    return row_ok and _divisible16(view.ptr)


def _divisible16(v) -> bool:
    owner = v.owner
    if not isinstance(owner, ir.Block):
        return False
    func = owner.owner
    attrs = ir.ArrayAttr(func.attributes["arg_attrs"])[ir.BlockArgument(v).arg_number]
    d = ir.DictAttr(attrs)
    return "tt.divisibility" in d and ir.IntegerAttr(d["tt.divisibility"]).value % 16 == 0


def _descriptor(L: _Lowering, view: _View, shape):
    desc_t = ir.Type.parse(f"!tt.tensordesc<{_tensor(shape, view.elem)}>")
    strides = [L.widened(s, _i(64)) for s in view.strides]
    return L.val("tt.make_tensor_descriptor", desc_t, [view.ptr, *view.sizes, *strides])


def _element_coords(L: _Lowering, indices, shape):
    return [L.binop("arith.muli", i, L.const(_i(32), t)) if t != 1 else i for i, t in zip(indices, shape)]


_RULES = {
    "func.func": _func,
    "func.return": _return,
    "tle.program_id": _program_id,
    "tle.num_programs": _program_id,
    "tle.make_view": _make_view,
    "tle.slice": _slice,
    "tle.load": _load,
    "tle.store": _store,
    "tle.gather": _gather,
    "tle.scatter": _scatter,
    "tle.atomic": _atomic,
    "tle.dot": _dot,
    "tle.reduce": _reduce,
    "tle.scan": _scan,
    "tle.print": _print,
    "tle.assert": _assert,
    "tle.combine_scan": _combine_scan,
    "tle.combine_reduce": _combine_reduce,
    "tle.histogram": _histogram,
    "tle.splat": _shape_op("tt.splat"),
    "tle.broadcast": _shape_op("tt.broadcast"),
    "tle.expand_dims": _shape_op("tt.expand_dims", lambda op: {"axis": _i32_attr(_attr_int(op, "axis"))}),
    "tle.reshape": _reshape,
    "tle.transpose": _shape_op("tt.trans", lambda op: {
        "order": ir.DenseI32ArrayAttr.get(list(ir.DenseI32ArrayAttr(op.attributes["perm"])))}),
    "tle.inline_asm": _inline_asm,
    "tle.tile_gather": lambda L, op: L.bind(op, L.val("tt.gather", op.result.type, [L.v(x) for x in op.operands],
                                                      {"axis": op.attributes["axis"]})),
    "tle.join": lambda L, op: L.bind(op, L.val("tt.join", op.result.type, [L.v(x) for x in op.operands])),
    "tle.split": lambda L, op: L.bind(op, *L.op("tt.split", [r.type for r in op.results],
                                                 [L.v(op.operands[0])]).results),
    "tle.arange": _arange,
    "tle.undef": _undef,
    "scf.for": _for,
    "arith.divf": _divf,
    "arith.negf": _negf,
    "arith.mului_extended": _mului_extended,
    "arith.bitcast": _bitcast,
    "arith.extf": _f8_convert,
    "arith.truncf": _f8_convert,
    "math.sqrt": _sqrt,
    "math.tanh": _libdevice("tanh"),
    "math.log1p": _libdevice("log1p"),
    "math.expm1": _libdevice("expm1"),
    "math.roundeven": _libdevice("rint"),  # cvt.rni: half to even (libdevice's round is half away from zero)
    "math.trunc": _libdevice("trunc"),
    "math.powf": _libdevice("pow"),
    **{f"math.{fn}": _libdevice(fn) for fn in ("tan", "sinh", "cosh", "asin", "acos", "atan", "atan2")},
}
