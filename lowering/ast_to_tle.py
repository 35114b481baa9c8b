"""AST -> tle dialect: one checked kernel becomes one `func.func` of tle, arith, math and scf ops.

Entry point: `ast_to_tle(kernel, spec) -> ir.Module`. The checker (tle/check.py) has already decided every type,
broadcast and conversion, so this is a direct walk: each typed node becomes the op that means it, built under
the location of its source span. Variables are SSA values; a for or if that assigns outer variables carries
them as iter_args / results (the checker lists them).
"""
from __future__ import annotations

import math
import threading

from ..abi import (LoopSplit, LoopTile, ManyPrograms, ManyWaves, ShortK, Spec, UnalignedRows, WideDim, WideTensor,
                   abi, access_facts, loop_facts)
from .. import typed as T
from ..dialects.mlir import ir, isa, new_context
from ..dialects.tle import NETWORK_STEP, constant_int, load_tle, registered, verify_tle
from ..diagnostics import NetworkSpan, TleError
from ..types import MAX_COMBINED, MAX_TILE_ELEMENTS, Scalar, Tile, is_f8, is_float

MESH_AXES = ("x", "y", "z")

_FLOAT_TYPES = {"f16": ir.F16Type, "bf16": ir.BF16Type, "f32": ir.F32Type, "f64": ir.F64Type,
                "f8e4m3": ir.Float8E4M3FNType, "f8e5m2": ir.Float8E5M2Type}

_ARITH = {  # typed op name -> (float op, signed int op)
    "add": ("arith.addf", "arith.addi"), "sub": ("arith.subf", "arith.subi"), "mul": ("arith.mulf", "arith.muli"),
    "div": ("arith.divf", "arith.divsi"), "rem": ("arith.remf", "arith.remsi"), "pow": ("math.powf", None),
    "atan2": ("math.atan2", None),
    "and": (None, "arith.andi"), "or": (None, "arith.ori"), "xor": (None, "arith.xori"),
    "shl": (None, "arith.shli"), "shr": (None, "arith.shrsi"),
    "min": ("arith.minimumf", "arith.minsi"), "max": ("arith.maximumf", "arith.maxsi"),
}
_CMP = {  # typed op name -> (cmpf predicate, cmpi predicate), MLIR's enum numbering
    "eq": (1, 0), "ne": (13, 1), "lt": (4, 2), "le": (5, 3), "gt": (2, 4), "ge": (3, 5),
}
_MATH = {"exp": "math.exp", "exp2": "math.exp2", "log": "math.log", "log2": "math.log2", "sqrt": "math.sqrt",
         "rsqrt": "math.rsqrt", "sin": "math.sin", "cos": "math.cos", "tanh": "math.tanh", "erf": "math.erf",
         "floor": "math.floor", "ceil": "math.ceil", "round": "math.roundeven",
         "trunc": "math.trunc", "tan": "math.tan", "sinh": "math.sinh", "cosh": "math.cosh", "asin": "math.asin",
         "acos": "math.acos", "atan": "math.atan", "log1p": "math.log1p", "expm1": "math.expm1"}
_TLE_SHAPE_OPS = ("splat", "broadcast", "reshape", "expand_dims", "transpose")


def isa_i64(v: "ir.Value") -> bool:
    return isa(v.type, ir.IntegerType) and ir.IntegerType(v.type).width == 64


def element_type(dtype: str) -> "ir.Type":
    if dtype in _FLOAT_TYPES:
        return _FLOAT_TYPES[dtype].get()
    return ir.IntegerType.get_signless(int(dtype[1:]))


def ir_type(t) -> "ir.Type":
    if isinstance(t, Tile):
        return ir.RankedTensorType.get(list(t.shape), element_type(t.dtype))
    return element_type(t.dtype)


def location(span) -> "ir.Location":
    if span is None or span.line <= 0:
        return ir.Location.unknown()
    if span.end_line and span.end_col:
        loc = ir.Location.file(span.file, span.line, span.col, span.end_line, span.end_col)
    else:
        loc = ir.Location.file(span.file, span.line, span.col)
    if isinstance(span, NetworkSpan):  # a sort network's step (tle/bitonic.py): the interpreter tells them apart
        return ir.Location.name(NETWORK_STEP, childLoc=loc)
    return loc


def scalar_attr(dtype: str, value) -> "ir.Attribute":
    t = element_type(dtype)
    if is_float(dtype):
        return ir.FloatAttr.get(t, float(value))
    return ir.IntegerAttr.get(t, int(value))


_THREAD = threading.local()


def _shared_context() -> "ir.Context":
    """One context per thread with the tle dialect loaded, reused by every compile: creating a context and loading
    the dialect cost several milliseconds of each cold compile (issue 5 holds cold compiles to 1.2x Triton's)."""
    ctx = getattr(_THREAD, "ctx", None)
    if ctx is None:
        ctx = _THREAD.ctx = new_context()
        load_tle(ctx)
    return ctx


def ast_to_tle(kernel: T.Kernel, spec: Spec, ctx: "ir.Context | None" = None) -> "ir.Module":
    """Build the tle-dialect module of one checked kernel under one specialisation (in `ctx`, default: this
    thread's shared context)."""
    if ctx is None:
        ctx = _shared_context()
    else:
        load_tle(ctx)
    with ctx, location(kernel.span):
        module = ir.Module.create()
        _KernelBuilder(kernel, spec, module).build()
        # A mistake here is the compiler's, not the kernel author's: stop at it instead of running an IR the next
        # stages would misread (the interpreter runs values by slot and would not notice a use out of scope).
        # About 1 ms for examples/attention.tle, 0.02 for softmax.
        try:
            module.operation.verify()
            if not registered():
                verify_tle(module)
        except Exception as e:  # MLIRError (not in every binding's ir module) or verify_tle's ValueError
            raise RuntimeError(f"internal error: the tle IR built for kernel '{kernel.name}' does not verify: {e}") \
                from None
    return module


class _KernelBuilder:
    def __init__(self, kernel: T.Kernel, spec: Spec, module):
        self.k = kernel
        self.spec = spec
        self.loop_facts = loop_facts(kernel)  # the facts that could say a loop runs at least once
        self.access_facts = access_facts(kernel, self.loop_facts)  # ... that could drop an access's checks
        self.unchecked: frozenset = frozenset()  # LoopTiles the first half of a split loop holds (s_For)
        self.module = module
        self.env: dict = {}  # Variable -> ir.Value
        self.dims: dict[str, object] = {}
        self.views: dict[str, object] = {}
        self.ip = None
        self.built = {}  # id(T.Op) -> (the Op, its value), within the statement being lowered (expr)
        self.shared_ops: list = []  # (key, insertion point, op): the ops once_per_block built
        self.combine_funcs = 0  # the private funcs built so far (their names' numbers)

    # ---- helpers -------------------------------------------------------------------------------------------
    def op(self, name, results, operands, attrs=None, span=None, regions=0):
        with location(span) if span is not None else ir.Location.unknown():
            op = ir.Operation.create(name, results=results, operands=operands, attributes=attrs or {},
                                     regions=regions, ip=self.ip)
        return op

    def value(self, name, rtype, operands, attrs=None, span=None):
        return self.op(name, [rtype], operands, attrs, span).result

    def const(self, dtype, value, span=None, shape=None):
        if shape is not None:
            t = ir.RankedTensorType.get(list(shape), element_type(dtype))
            attr = ir.DenseElementsAttr.get_splat(t, scalar_attr(dtype, value))
        else:
            t, attr = element_type(dtype), scalar_attr(dtype, value)
        return self.value("arith.constant", t, [], {"value": attr}, span)

    # ---- the function ----------------------------------------------------------------------------------------
    def build(self):
        args = abi(self.k, self.spec)
        types, arg_attrs = [], []
        for a in args:
            if a.kind == "ptr":
                types.append(ir.Type.parse(f"!tle.ptr<{element_type(a.dtype)}>"))
            else:
                types.append(element_type(a.dtype))
            attrs = {"tle.name": ir.StringAttr.get(a.key)}
            if (d := self.spec.divisibility(a.key)) > 1:
                attrs["tle.divisibility"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), d)
            arg_attrs.append(ir.DictAttr.get(attrs))
        ftype = ir.FunctionType.get(types, [])
        attrs = {
            "sym_name": ir.StringAttr.get(self.k.name),
            "function_type": ir.TypeAttr.get(ftype),
            "arg_attrs": ir.ArrayAttr.get(arg_attrs),
            "tle.kernel": ir.UnitAttr.get(),
            "tle.mesh": ir.ArrayAttr.get([ir.StringAttr.get(a) for a in MESH_AXES]),
        }
        if ManyPrograms() in self.spec.inside:
            attrs["tle.many_programs"] = ir.UnitAttr.get()
        if ManyWaves() in self.spec.inside:
            attrs["tle.many_waves"] = ir.UnitAttr.get()
        if ShortK() in self.spec.inside:
            attrs["tle.short_k"] = ir.UnitAttr.get()
        if self.spec.aliases:  # tensors this launch passes overlapping, one of them written (tle/abi.py aliases)
            attrs["tle.aliases"] = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.StringAttr.get(n) for n in group])
                                                     for group in sorted(self.spec.aliases)])
        func = self.op("func.func", [], [], attrs, self.k.span, regions=1)
        self.module.body.append(func)
        block = func.regions[0].blocks.append(*types)
        self.ip = ir.InsertionPoint(block)
        by_key = {a.key: v for a, v in zip(args, block.arguments)}
        for p in self.k.params:
            if isinstance(p, T.TensorParam):
                for d in p.type.dims:
                    if isinstance(d, str) and d not in self.dims:
                        self.dims[d] = by_key[d]
        for p in self.k.params:
            if isinstance(p, T.TensorParam):
                sizes = [self.dims[d] if isinstance(d, str) else self.const("i32", d, p.span) for d in p.type.dims]
                strides = []
                wide = WideTensor(p.name) in self.spec.inside
                if any(isa_i64(v) for v in sizes):  # a dim past 2**31 - 1: the view's sizes are one type, i64
                    sizes = [v if isa_i64(v) else self.value("arith.extsi", element_type("i64"), [v], None, p.span)
                             for v in sizes]
                for axis in range(len(p.type.dims)):
                    key = f"{p.name}.stride{axis}"
                    # A wide view's strides are all i64 (dialects/tle.py), a folded unit stride too.
                    strides.append(by_key[key] if key in by_key else self.const("i64" if wide else "i32", 1, p.span))
                rank = len(p.type.dims)
                vtype = ir.Type.parse(f"!tle.view<{element_type(p.type.dtype)}, {rank}>")
                view_attrs = {
                    "elem": ir.TypeAttr.get(element_type(p.type.dtype)),
                    "name": ir.StringAttr.get(p.name),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, rank, rank]),
                }
                if UnalignedRows(p.name) in self.spec.inside:
                    view_attrs["tle.unaligned_rows"] = ir.UnitAttr.get()
                if WideTensor(p.name) in self.spec.inside:
                    view_attrs["tle.wide"] = ir.UnitAttr.get()
                self.views[p.name] = self.value("tle.make_view", vtype, [by_key[p.name], *sizes, *strides],
                                                view_attrs, p.span)
            else:
                self.env[p] = by_key[p.name]
        self.stmts(self.k.body)
        self.op("func.return", [], [], None, self.k.span)

    # ---- statements ----------------------------------------------------------------------------------------
    def stmts(self, body):
        for s in body:
            self.built = {}  # a subtree the checker shares within a statement is one value (see expr)
            getattr(self, "s_" + type(s).__name__)(s)

    def s_Bind(self, s: T.Bind):
        self.env[s.var] = self.expr(s.value)

    def s_Eval(self, s: T.Eval):
        self.expr(s.expr)

    def s_For(self, s: T.For):
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        attrs = {}
        if s.stages is not None:
            attrs["tle.num_stages"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), s.stages)
        if s.unroll is not None:
            attrs["tle.unroll"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), s.unroll)
        fact = self.loop_facts.get(id(s))
        if fact and fact[0] in self.spec.inside:
            attrs["tle.nonempty"] = ir.UnitAttr.get()  # the launch's sizes make it run at least once
        if fact and LoopSplit(fact[0].ordinal) in self.spec.inside:
            # The sizes put start < mid < stop, mid = min(dim / tile) over the tiles the loop's variable indexes:
            # [start, mid) runs with those tiles unchecked, [mid, stop) checked, both non-empty (tle/abi.py).
            tiles = {f for axes in self.access_facts.values() for _, f in axes
                     if isinstance(f, LoopTile) and f.ordinal == fact[0].ordinal}
            # All i32: an i64 loop variable reaches at= through a cast, which loop_facts takes for no LoopTile, and
            # a dim past 2**31 - 1 (WideDim) ends no tile before an i32 stop.
            mid = None
            for t in sorted(tiles):
                full = self.value("arith.divsi", element_type("i32"), [self.dims[t.dim], self.const("i32", t.tile)],
                                  None, s.span)
                mid = full if mid is None else self.value("arith.minsi", element_type("i32"), [mid, full], None,
                                                          s.span)
            attrs["tle.split"] = ir.UnitAttr.get()  # the two parts (lowering/tileir_legality.py reads it)
            self._loop(s, start, mid, step, attrs, tiles)
            self._loop(s, mid, stop, step, attrs, frozenset())
        else:
            self._loop(s, start, stop, step, attrs, frozenset())

    def _loop(self, s: T.For, start, stop, step, attrs, unchecked):
        """One scf.for over [start, stop) running s.body, its accesses under the facts `unchecked` marked inside
        as well as those the spec holds."""
        inits = [self.env[v] for v in s.carried]
        loop = self.op("scf.for", [v.type for v in inits], [start, stop, step, *inits], attrs, s.span, regions=1)
        block = loop.regions[0].blocks.append(element_type(s.var.type.dtype), *[v.type for v in inits])
        saved_ip, saved_env = self.ip, dict(self.env)
        self.ip = ir.InsertionPoint(block)
        self.env[s.var] = block.arguments[0]
        for v, arg in zip(s.carried, list(block.arguments)[1:]):
            self.env[v] = arg
        saved_unchecked, self.unchecked = self.unchecked, self.unchecked | unchecked
        self.stmts(s.body)
        self.unchecked = saved_unchecked
        self.op("scf.yield", [], [self.env[v] for v in s.carried], None, s.span)
        self.ip, self.env = saved_ip, saved_env
        for v, r in zip(s.carried, loop.results):
            self.env[v] = r

    def s_If(self, s: T.If):
        cond = self.expr(s.cond)
        types = [self.env[v].type for v in s.carried]
        op = self.op("scf.if", types, [cond], None, s.span, regions=2)
        saved_ip, saved_env = self.ip, dict(self.env)
        for region, body in zip(op.regions, (s.then, s.orelse)):
            if not body and not s.carried and region is op.regions[1]:
                continue  # no else: an empty region
            self.ip = ir.InsertionPoint(region.blocks.append())
            self.env = dict(saved_env)
            self.stmts(body)
            self.op("scf.yield", [], [self.env[v] for v in s.carried], None, s.span)
        self.ip, self.env = saved_ip, saved_env
        for v, r in zip(s.carried, op.results):
            self.env[v] = r

    # ---- expressions ---------------------------------------------------------------------------------------
    def expr(self, e: T.Expr):
        """The value of e. An Op met again in the same statement (a subtree the checker put in two places, such as
        isnan's x != x) is the value built the first time: built twice it would run twice, and a chain of such
        subtrees would double the IR at every link."""
        if isinstance(e, T.Op):
            hit = self.built.get(id(e))
            if hit is None or hit[0] is not e:  # the entry holds its Op, so no other Op can take its id meanwhile
                hit = self.built[id(e)] = (e, self._expr(e))  # (x_cast makes Ops of its own as it goes)
            return hit[1]
        return self._expr(e)

    def _expr(self, e: T.Expr):
        if isinstance(e.type, Tile) and math.prod(e.type.shape) > MAX_TILE_ELEMENTS:
            # the checker sizes tiles it is told (load, zeros, arange, ...); broadcasting two of them can still
            # multiply their sizes ([1024, 1] + [1, 2048])
            raise TleError(e.span, f"a tile of {math.prod(e.type.shape)} elements ({list(e.type.shape)}) is too "
                                   f"large (at most {MAX_TILE_ELEMENTS})")
        if isinstance(e, T.Const):
            return self.const(e.type.dtype, e.value, e.span)
        if isinstance(e, T.Read):
            return self.env[e.var]
        if isinstance(e, T.Dim):
            return self.dims[e.name]  # i64 for a WideDim, as the checker typed it
        return getattr(self, "x_" + e.name, self.x_elementwise)(e)

    def x_elementwise(self, e: T.Op):
        args = [self.expr(a) for a in e.args]
        rt = ir_type(e.type)
        d = e.args[0].type.dtype
        if e.name in _ARITH:
            fop, iop = _ARITH[e.name]
            name = fop if is_float(d) else iop
            return self.value(name, rt, args, None, e.span)
        if e.name in _CMP:
            fp, ip = _CMP[e.name]
            if is_float(d):
                return self.value("arith.cmpf", rt, args, {"predicate": _i64(fp)}, e.span)
            return self.value("arith.cmpi", rt, args, {"predicate": _i64(ip)}, e.span)
        if e.name in _MATH:
            return self.value(_MATH[e.name], rt, args, None, e.span)
        raise NotImplementedError(f"no lowering for typed op {e.name}")  # checker and lowering out of step

    def _like(self, e, value):
        """A constant of e's type (scalar or splat tile)."""
        shape = e.type.shape if isinstance(e.type, Tile) else None
        return self.const(e.type.dtype, value, e.span, shape)

    def x_neg(self, e):
        x = self.expr(e.args[0])
        if is_float(e.type.dtype):
            return self.value("arith.negf", ir_type(e.type), [x], None, e.span)
        return self.value("arith.subi", ir_type(e.type), [self._like(e, 0), x], None, e.span)

    def x_not(self, e):
        x = self.expr(e.args[0])
        return self.value("arith.xori", ir_type(e.type), [x, self._like(e, 1)], None, e.span)

    def x_abs(self, e):
        x = self.expr(e.args[0])
        return self.value("math.absf" if is_float(e.type.dtype) else "math.absi", ir_type(e.type), [x], None, e.span)

    def x_sigmoid(self, e):
        x = self.expr(e.args[0])
        t = ir_type(e.type)
        neg = self.value("arith.negf", t, [x], None, e.span)
        ex = self.value("math.exp", t, [neg], None, e.span)
        den = self.value("arith.addf", t, [self._like(e, 1.0), ex], None, e.span)
        return self.value("arith.divf", t, [self._like(e, 1.0), den], None, e.span)

    def x_umulhi(self, e):
        """Upstream arith's unsigned widening multiply; its second result is the high word. The low word (first
        result) is left unused: the checker multiplies with `mul` where it needs it, as Triton's Philox does."""
        a, b = (self.expr(x) for x in e.args)
        t = ir_type(e.type)
        return self.op("arith.mului_extended", [t, t], [a, b], None, e.span).results[1]

    def x_where(self, e):
        c, a, b = (self.expr(x) for x in e.args)
        return self.value("arith.select", ir_type(e.type), [c, a, b], None, e.span)

    def x_cast(self, e):
        src, dst = e.args[0].type.dtype, e.type.dtype
        if src != dst and (is_f8(src) or is_f8(dst)) and "f32" not in (src, dst):
            # An 8-bit float converts only to and from f32 here (arith.extf / arith.truncf), so each backend has one
            # pair of conversions to lower; going through f32 is exact on the way in and rounds once on the way out.
            mid = T.Op(e.span, Tile("f32", e.type.shape) if isinstance(e.type, Tile) else Scalar("f32"), "cast",
                       [e.args[0]])
            return self.x_cast(T.Op(e.span, e.type, "cast", [mid]))
        x = self.expr(e.args[0])
        rt = ir_type(e.type)
        if src == dst:
            return x
        if dst == "i1":  # to bool: nonzero
            zero = self.const(src, 0, e.span, e.type.shape if isinstance(e.type, Tile) else None)
            if is_float(src):
                return self.value("arith.cmpf", rt, [x, zero], {"predicate": _i64(13)}, e.span)
            return self.value("arith.cmpi", rt, [x, zero], {"predicate": _i64(1)}, e.span)
        if is_float(src) and is_float(dst):
            from ..types import BITS
            if BITS[src] == BITS[dst]:  # f16 <-> bf16 goes through f32
                mid = Tile("f32", e.type.shape) if isinstance(e.type, Tile) else Scalar("f32")
                x = self.value("arith.extf", ir_type(mid), [x], None, e.span)
                return self.value("arith.truncf", rt, [x], None, e.span)
            name = "arith.extf" if BITS[dst] > BITS[src] else "arith.truncf"
            return self.value(name, rt, [x], None, e.span)
        if is_float(dst):
            return self.value("arith.uitofp" if src == "i1" else "arith.sitofp", rt, [x], None, e.span)
        if is_float(src):
            return self.value("arith.fptosi", rt, [x], None, e.span)
        from ..types import BITS
        if BITS[dst] > BITS[src]:
            return self.value("arith.extui" if src == "i1" else "arith.extsi", rt, [x], None, e.span)
        return self.value("arith.trunci", rt, [x], None, e.span)

    def x_bitcast(self, e):
        return self.value("arith.bitcast", ir_type(e.type), [self.expr(e.args[0])], None, e.span)

    def x_splat(self, e):
        x = e.args[0]
        if isinstance(x, T.Const):
            return self.const(e.type.dtype, x.value, e.span, e.type.shape)
        return self.value("tle.splat", ir_type(e.type), [self.expr(x)], None, e.span)

    def _shape_op(self, e, attrs=None):
        return self.value(f"tle.{e.name}", ir_type(e.type), [self.expr(e.args[0])], attrs, e.span)

    def x_broadcast(self, e):
        return self._shape_op(e)

    def x_reshape(self, e):
        return self._shape_op(e)

    def x_expand_dims(self, e):
        return self._shape_op(e, {"axis": _i32(e.attrs["axis"])})

    def x_transpose(self, e):
        return self._shape_op(e, {"perm": ir.DenseI32ArrayAttr.get(list(e.attrs["perm"]))})

    def x_join(self, e):
        a, b = (self.expr(x) for x in e.args)
        return self.value("tle.join", ir_type(e.type), [a, b], None, e.span)

    def x_tile_gather(self, e):
        x, idx = (self.expr(a) for a in e.args)
        return self.value("tle.tile_gather", ir_type(e.type), [x, idx], {"axis": _i32(e.attrs["axis"])}, e.span)

    def x_asm(self, e):
        """The arguments one operand group each (they may differ in type), then `ref` in a group of its own."""
        args = [self.expr(a) for a in e.args]
        n = len(args) - int(e.attrs["ref"])
        groups = list(_one_group_each(n)) + [int(e.attrs["ref"])]
        return self.value("tle.inline_asm", ir_type(e.type), args, {
            "asm": ir.StringAttr.get(e.attrs["asm"]), "constraints": ir.StringAttr.get(e.attrs["constraints"]),
            "pack": _i32(e.attrs["pack"]), "pure": ir.BoolAttr.get(e.attrs["pure"]),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get(groups)}, e.span)

    def once_per_block(self, key: tuple, build):
        """The op built for `key` in the current block, built by build() the first time: an op with several results
        that the checker wrote as one typed Op per result. A loop the launch facts split in two (s_For) lowers its
        body twice, into two blocks: each gets its own."""
        op = next((op for k, ip, op in self.shared_ops if k == key and ip is self.ip), None)
        if op is None:
            op = build()
            self.shared_ops.append((key, self.ip, op))
        return op

    def x_split(self, e):
        """One tle.split per operand value, both halves read from it (the checker binds the operand to a let)."""
        x = self.expr(e.args[0])
        half = ir_type(e.type)
        op = self.once_per_block(("split", x), lambda: self.op("tle.split", [half, half], [x], None, e.span))
        return op.results[e.attrs["index"]]

    def x_arange(self, e):
        return self.value("tle.arange", ir_type(e.type), [], {"start": _i32(e.attrs["start"]),
                                                              "end": _i32(e.attrs["end"])}, e.span)

    def x_program_id(self, e):
        axis = ir.StringAttr.get(MESH_AXES[e.attrs["axis"]])
        return self.value(f"tle.{e.name}", element_type("i32"), [], {"axis": axis}, e.span)

    x_num_programs = x_program_id

    def x_undef(self, e):
        return self.value("tle.undef", ir_type(e.type), [], {"name": ir.StringAttr.get(e.attrs["name"])}, e.span)

    def view_of(self, t: T.TensorParam) -> "ir.Value":
        """The view a memory op addresses: a tensor parameter's make_view, or the tle.slice that defined a slice
        (kept in env, so that it is visible where the slice's let is)."""
        return self.env[t] if isinstance(t, T.TensorSlice) else self.views[t.name]

    def x_slice(self, e):
        """A slice's window: tle.slice of its parent's view, which keeps the parent's name and unit attributes.
        Without shape= its sizes are the rest of the parent's: size - start per axis."""
        parent = self.view_of(e.tensor.parent)
        rank = len(e.tensor.type.dims)
        vals = [self.expr(a) for a in e.args]
        starts, sizes = vals[:rank], vals[rank:]
        if e.attrs["rest"]:
            owner = parent.owner  # make_view (ptr, sizes, strides) or slice (view, starts, sizes)
            parent_sizes = list(owner.operands)[1:1 + rank] if owner.name == "tle.make_view" else \
                list(owner.operands)[1 + rank:]
            sizes = [size if constant_int(start) == 0 else
                     self.value("arith.subi", size.type, [size, start if size.type == start.type else self.value(
                         "arith.extsi", size.type, [start], None, e.span)], None, e.span)  # an i64 WideDim
                     for size, start in zip(parent_sizes, starts)]
        attrs = {"elem": parent.owner.attributes["elem"], "name": parent.owner.attributes["name"],
                 "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, rank, rank])}
        for unit in ("tle.wide", "tle.unaligned_rows"):
            if unit in parent.owner.attributes:
                attrs[unit] = ir.UnitAttr.get()
        self.env[e.tensor] = self.value("tle.slice", parent.type, [parent, *starts, *sizes], attrs, e.span)

    def x_load(self, e):
        view = self.view_of(e.tensor)
        idx = [self.expr(a) for a in e.args]
        attrs = {"padding": scalar_attr(e.type.dtype, e.attrs["padding"]), **self._inside(e, idx, e.attrs["tile"]),
                 **self._tma(e)}
        return self.value("tle.load", ir_type(e.type), [view, *idx], attrs, e.span)

    def x_store(self, e):
        view = self.view_of(e.tensor)
        value, *idx = [self.expr(a) for a in e.args]
        inside = self._inside(e, idx, e.args[0].type.shape)
        self.op("tle.store", [], [view, value, *idx], {**inside, **self._tma(e)}, e.span)

    @staticmethod
    def _tma(e) -> dict:
        """{"tle.tma": unit} for a load or store written with tma=true: a hint the native path reads."""
        return {"tle.tma": ir.UnitAttr.get()} if e.attrs.get("tma") else {}

    def _inside(self, e, idx, tile) -> dict:
        """{"tle.inside": [axes]} for the axes of a load or store whose tile lies inside the tensor: those whose
        launch fact (tle/abi.py access_facts: GridTile, FixedTile or LoopTile) the spec holds, and those where a
        constant tile index c keeps it inside a dim of static size ((c + 1) * tile <= size; c is an IR constant, so
        `let c = 1` counts). The lowerings drop the bounds checks of exactly these axes."""
        axes = {i for i, fact in self.access_facts.get(id(e), ()) if fact in self.spec.inside or fact in self.unchecked}
        for i, (index, dim) in enumerate(zip(idx, e.tensor.type.dims)):
            c = constant_int(index)
            if isinstance(dim, int) and c is not None and 0 <= c and (c + 1) * tile[i] <= dim:
                axes.add(i)
        return {"tle.inside": ir.DenseI32ArrayAttr.get(sorted(axes))} if axes else {}

    def _indexed(self, e, with_value):
        """The operands of a gather / scatter / atomic and their operandSegmentSizes: the view, the value (scatter,
        atomics), the indices, the mask (if any) and, for an atomic, the compare (atomic_cas's; the checker puts it
        last)."""
        view = self.view_of(e.tensor)
        vals = [self.expr(a) for a in e.args]
        rank, n = len(e.tensor.type.dims), int(with_value)
        groups = [[view]] + ([vals[:1]] if with_value else []) + [vals[n:n + rank]]
        groups.append(vals[n + rank:n + rank + 1] if e.attrs["masked"] else [])
        if "kind" in e.attrs:
            groups.append(vals[-1:] if e.attrs["kind"] == "cas" else [])
        return [v for g in groups for v in g], ir.DenseI32ArrayAttr.get([len(g) for g in groups])

    def x_gather(self, e):
        operands, seg = self._indexed(e, False)
        return self.value("tle.gather", ir_type(e.type), operands, {
            "other": scalar_attr(e.type.dtype, e.attrs["other"]), "operandSegmentSizes": seg}, e.span)

    def x_scatter(self, e):
        operands, seg = self._indexed(e, True)
        self.op("tle.scatter", [], operands, {"operandSegmentSizes": seg}, e.span)

    def x_atomic(self, e):
        operands, seg = self._indexed(e, True)
        return self.value("tle.atomic", ir_type(e.type), operands, {
            "kind": ir.StringAttr.get(e.attrs["kind"]), "operandSegmentSizes": seg}, e.span)

    def x_dot(self, e):
        a, b, acc = (self.expr(x) for x in e.args)
        return self.value("tle.dot", ir_type(e.type), [a, b, acc],
                          {"precision": ir.StringAttr.get(e.attrs["precision"])}, e.span)

    def x_reduce(self, e):
        if e.attrs["kind"] == "combine":
            return self.combined("tle.combine_reduce", e)
        return self.value("tle.reduce", ir_type(e.type), [self.expr(e.args[0])], {
            "kind": ir.StringAttr.get(e.attrs["kind"]), "axis": _i32(e.attrs["axis"])}, e.span)

    def x_scan(self, e):
        if e.attrs["kind"] == "combine":
            return self.combined("tle.combine_scan", e)
        attrs = {"kind": ir.StringAttr.get(e.attrs["kind"]), "axis": _i32(e.attrs["axis"])}
        if e.attrs.get("reverse"):
            attrs["reverse"] = ir.UnitAttr.get()
        return self.value("tle.scan", ir_type(e.type), [self.expr(e.args[0])], attrs, e.span)

    def combined(self, name: str, e):
        """A scan or reduce with a combine fn: one tle.combine_scan / combine_reduce with a result per operand (the
        checker made one typed Op per result, sharing their T.Combine), and the fn as a private func.func of the
        module that the op names."""
        comb = e.attrs["combine"]
        return self.once_per_block(("combine", comb), lambda: self.build_combined(name, e)).results[e.attrs["index"]]

    def build_combined(self, name: str, e):
        """The combine_scan / combine_reduce op of one checked scan() or reduce()."""
        comb = e.attrs["combine"]
        func = self.combine_func(comb)
        results = [ir_type(r.type) for r in comb.results]
        if name == "tle.combine_scan":
            results = [ir.RankedTensorType.get(list(e.type.shape), t) for t in results]
        else:
            rest = list(e.type.shape) if isinstance(e.type, Tile) else []
            results = [ir.RankedTensorType.get(rest, t) if rest else t for t in results]
        groups = _one_group_each(len(results))
        attrs = {"axis": _i32(e.attrs["axis"]), "combine": ir.FlatSymbolRefAttr.get(func),
                 "operandSegmentSizes": groups, "resultSegmentSizes": groups}
        if e.attrs.get("reverse"):
            attrs["reverse"] = ir.UnitAttr.get()
        if e.attrs.get("commutative"):
            attrs["commutative"] = ir.UnitAttr.get()
        if comb.identity is not None:
            attrs["identities"] = ir.ArrayAttr.get([scalar_attr(r.type.dtype, v)
                                                    for r, v in zip(comb.results, comb.identity)])
        return self.op(name, results, [self.expr(a) for a in e.args], attrs, e.span)

    def combine_func(self, comb) -> str:
        """`func.func private @<kernel>.<fn>.<k>(earlier values..., later values...) -> (combined values...)`, the
        fn's lets and returned values on scalars."""
        name = f"{self.k.name}.{comb.fn}.{self.combine_funcs}"  # unique: one func per op
        self.combine_funcs += 1
        types = [element_type(p.type.dtype) for p in comb.params]
        ftype = ir.FunctionType.get(types, [element_type(r.type.dtype) for r in comb.results])
        with location(comb.span):
            func = ir.Operation.create("func.func", attributes={
                "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
                "function_type": ir.TypeAttr.get(ftype)}, regions=1)
        self.module.body.append(func)
        block = func.regions[0].blocks.append(*types)
        saved_ip, saved_env, saved_built = self.ip, self.env, self.built
        self.ip, self.env = ir.InsertionPoint(block), dict(zip(comb.params, block.arguments))
        self.stmts(comb.body)
        self.op("func.return", [], [self.expr(r) for r in comb.results], None, comb.span)
        self.ip, self.env, self.built = saved_ip, saved_env, saved_built
        return name

    def x_assert(self, e):
        self.op("tle.assert", [], [self.expr(e.args[0])], {"message": ir.StringAttr.get(e.attrs["message"])},
                e.span)

    def x_print(self, e):
        self.op("tle.print", [], [self.expr(a) for a in e.args], {
            "message": ir.StringAttr.get(e.attrs["message"]), "operandSegmentSizes": _one_group_each(len(e.args))},
            e.span)

    def x_histogram(self, e):
        return self.value("tle.histogram", ir_type(e.type), [self.expr(a) for a in e.args], {}, e.span)


def _one_group_each(n: int):
    """operandSegmentSizes (or resultSegmentSizes) of n values in the MAX_COMBINED optional groups that
    combine_scan, combine_reduce and print declare (dialects/tle.py): a group per value."""
    return ir.DenseI32ArrayAttr.get([1] * n + [0] * (MAX_COMBINED - n))


def _i32(v: int):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), v)


def _i64(v: int):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
