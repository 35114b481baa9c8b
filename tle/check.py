"""Checking: names, types and tile shapes, before any IR is built.

Entry points:
- `load_program(path_or_text)` parses a file and the files it imports and checks what needs no constants
  (duplicate declarations, parameter types, import cycles) -> Program.
- `check_kernel(program, name, constants) -> typed.Kernel` checks one kernel for one set of compile-time
  constants: every expression gets a type and a static tile shape, helper fns are inlined, constants folded,
  implicit broadcasts and casts made explicit. Every mistake is a TleError at its source span.
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field

from . import ast
from . import typed as T
from .diagnostics import Span, TleError
from .parser import parse
from .types import FLOATS, Scalar, Tensor, Tile, broadcast_shapes, canonical, is_float, is_int, promote

CONST_KINDS = ("int", "float", "bool", "dtype")
BUILTIN_CONSTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi}
MAX_TILE_ELEMENTS = 1 << 20


@dataclass
class Program:
    """A parsed and module-checked .tle file with everything it imports."""
    file: str
    kernels: dict[str, ast.Kernel] = field(default_factory=dict)
    fns: dict[str, ast.Fn] = field(default_factory=dict)
    consts: dict[str, ast.ConstDecl] = field(default_factory=dict)
    const_values: dict[str, object] = field(default_factory=dict)
    source: str = ""

    def kernel_names(self) -> list[str]:
        return [n for n, k in self.kernels.items() if k.span.file == self.file]


def load_program(source: str, filename: str = "<string>", _seen: tuple = ()) -> Program:
    """Parse `source` (the text of `filename`) and its imports; check module-level declarations."""
    module = parse(source, filename)
    prog = Program(filename, source=source)
    for imp in module.imports:
        base = os.path.dirname(os.path.abspath(filename)) if os.path.exists(filename) else os.getcwd()
        path = os.path.normpath(os.path.join(base, imp.path))
        if path in _seen or os.path.abspath(filename) == path:
            raise TleError(imp.span, f"import cycle: '{imp.path}' imports this file again")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise TleError(imp.span, f"cannot import '{imp.path}': {e.strerror}") from None
        sub = load_program(text, path, _seen + (os.path.abspath(filename),))
        for table in ("kernels", "fns", "consts"):
            for name, decl in getattr(sub, table).items():
                _declare(prog, table, name, decl)
        prog.const_values.update(sub.const_values)
    for c in module.consts:
        _declare(prog, "consts", c.name, c)
        prog.const_values[c.name] = _const_value(c.value, prog.const_values, {})
    for f in module.fns:
        _declare(prog, "fns", f.name, f)
        _check_unique([p.name for p in f.params], [p.span for p in f.params], "parameter")
    for k in module.kernels:
        _declare(prog, "kernels", k.name, k)
        _check_kernel_signature(k)
    return prog


def _declare(prog: Program, table: str, name: str, decl) -> None:
    for other_table in ("kernels", "fns", "consts"):
        prev = getattr(prog, other_table).get(name)
        if prev is not None and prev is not decl:
            raise TleError(decl.span, f"redefinition of '{name}'", [f"first defined at {prev.span}"])
    if name in BUILTINS or name in BUILTIN_CONSTS:
        raise TleError(decl.span, f"'{name}' is a builtin and cannot be redefined")
    getattr(prog, table)[name] = decl


def _check_unique(names, spans, what):
    seen = {}
    for n, s in zip(names, spans):
        if n in seen:
            raise TleError(s, f"duplicate {what} '{n}'", [f"first declared at {seen[n]}"])
        seen[n] = s


def _check_kernel_signature(k: ast.Kernel) -> None:
    names = [c.name for c in k.const_params] + [p.name for p in k.params]
    spans = [c.span for c in k.const_params] + [p.span for p in k.params]
    _check_unique(names, spans, "parameter")
    consts = {c.name: c for c in k.const_params}
    for c in k.const_params:
        if c.kind not in CONST_KINDS:
            raise TleError(c.span, f"unknown kind '{c.kind}' for compile-time constant '{c.name}'",
                           [f"kinds are {', '.join(CONST_KINDS)}"])
    for p in k.params:
        t = p.type
        if isinstance(t, ast.TileTypeExpr):
            raise TleError(t.span, f"parameter '{p.name}' cannot be a tile; kernels take tensors and scalars",
                           [f"write {p.name}: tensor<{t.dtype}>[...]"])
        dtype = t.dtype
        if canonical(dtype) is None and not (dtype in consts and consts[dtype].kind == "dtype"):
            raise TleError(t.span, f"unknown element type '{dtype}'", _suggest(dtype, list(_all_dtypes())))
        if isinstance(t, ast.TensorTypeExpr):
            for d in t.dims:
                if isinstance(d, ast.Name) and d.id in names and d.id not in consts:
                    raise TleError(d.span, f"dim '{d.id}' has the name of a parameter")
                if isinstance(d, ast.IntLit) and d.value <= 0:
                    raise TleError(d.span, "a tensor dim must be positive")


def _all_dtypes():
    return ("bool", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")


def _suggest(name: str, candidates) -> list[str]:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return [f"did you mean '{close[0]}'?"] if close else []


def _const_value(e: ast.Expr, consts: dict, kernel_consts: dict):
    """Evaluate a compile-time constant expression (module consts and defaults)."""
    if isinstance(e, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
        return e.value
    if isinstance(e, ast.Name):
        for table in (kernel_consts, consts, BUILTIN_CONSTS):
            if e.id in table:
                return table[e.id]
        raise TleError(e.span, f"unknown name '{e.id}' in a constant expression")
    if isinstance(e, ast.UnaryOp) and e.op == "-":
        v = _const_value(e.operand, consts, kernel_consts)
        return -v
    if isinstance(e, ast.BinOp) and e.op in "+-*/%":
        a, b = _const_value(e.lhs, consts, kernel_consts), _const_value(e.rhs, consts, kernel_consts)
        return _fold_arith(e.op, a, b, e.span)
    raise TleError(e.span, "a constant must be a number, a boolean or arithmetic on constants")


def _fold_arith(op: str, a, b, span: Span):
    if op in "/%" and isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        if b == 0:
            raise TleError(span, "division by zero in a constant expression")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C semantics: truncate toward zero
        return q if op == "/" else a - q * b
    try:
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "%": lambda: math.fmod(a, b), "**": lambda: float(a) ** float(b)}[op]()
    except ZeroDivisionError:
        raise TleError(span, "division by zero in a constant expression") from None


# ---- the kernel checker ----------------------------------------------------------------------------------------
class _Scope:
    def __init__(self, parent=None):
        self.names: dict[str, object] = {}
        self.parent = parent

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def visible(self):
        s, out = self, set()
        while s is not None:
            out |= set(s.names)
            s = s.parent
        return out


@dataclass
class _DtypeConst:
    dtype: str


@dataclass
class _Frame:
    """An enclosing for or if: which outer variables its body assigns."""
    depth: int
    carried: list


def check_kernel(program: Program, name: str, constants: dict | None = None) -> T.Kernel:
    k = program.kernels.get(name)
    if k is None:
        raise TleError(None, f"no kernel named '{name}' in {program.file}",
                       _suggest(name, program.kernels) or [f"kernels: {', '.join(program.kernels) or 'none'}"])
    return _KernelChecker(program, k, dict(constants or {})).run()


class _KernelChecker:
    def __init__(self, program: Program, kernel: ast.Kernel, constants: dict):
        self.p = program
        self.k = kernel
        self.given = constants
        self.out: list[T.Stmt] = []
        self.frames: list[_Frame] = []
        self.fn_stack: list[str] = []

    # ---- set-up: constants and parameters ------------------------------------------------------------------
    def run(self) -> T.Kernel:
        k = self.k
        scope = _Scope()
        consts = {}
        known = {c.name for c in k.const_params}
        for extra in self.given:
            if extra not in known:
                raise TleError(k.span, f"kernel '{k.name}' has no compile-time constant '{extra}'",
                               _suggest(extra, known) or [f"its constants: {', '.join(known) or 'none'}"])
        for c in k.const_params:
            if c.name in self.given:
                v = self._const_arg(c, self.given[c.name])
            elif c.default is not None:
                v = self._const_arg(c, _const_value(c.default, self.p.const_values, consts), c.default.span)
            else:
                raise TleError(c.span, f"missing compile-time constant '{c.name}' of kernel '{k.name}'",
                               [f"give it a value: -D {c.name}=... in tlec, or {c.name}=... at launch, "
                                f"or a default: {c.name}: {c.kind} = ..."])
            consts[c.name] = v
            scope.names[c.name] = _DtypeConst(v) if c.kind == "dtype" else v
        self.constants = consts
        params, dims = [], {}
        for p in k.params:
            t = p.type
            dtype = self._dtype(t.dtype, t.span, scope)
            if isinstance(t, ast.TensorTypeExpr):
                tdims = []
                for d in t.dims:
                    if isinstance(d, ast.IntLit):
                        tdims.append(d.value)
                    elif d.id in consts:
                        v = consts[d.id]
                        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                            raise TleError(d.span, f"dim '{d.id}' must be a positive int constant")
                        tdims.append(v)
                    else:
                        tdims.append(d.id)
                        dims.setdefault(d.id, d.span)
                param = T.TensorParam(p.name, Tensor(dtype, tuple(tdims)), p.span)
            else:
                param = T.Variable(p.name, Scalar(dtype), p.span)
            params.append(param)
            scope.names[p.name] = param
        for d, sp in dims.items():
            if d in scope.names:
                raise TleError(sp, f"dim '{d}' has the name of a parameter")
            scope.names[d] = T.Dim(sp, Scalar("i32"), d)
        self.scope = _Scope(scope)
        self.block(k.body)
        return T.Kernel(k.name, k.span, params, dims, consts, self.out, file=k.span.file)

    def _const_arg(self, c: ast.ConstParam, v, span=None):
        span = span or c.span
        if c.kind == "dtype":
            d = canonical(str(v)) if isinstance(v, str) else None
            if d is None:
                raise TleError(span, f"constant '{c.name}' must be an element type (f16, bf16, f32, ...); got {v!r}")
            return d
        ok = {"int": isinstance(v, int) and not isinstance(v, bool), "float": isinstance(v, (int, float))
              and not isinstance(v, bool), "bool": isinstance(v, bool)}[c.kind]
        if not ok:
            raise TleError(span, f"constant '{c.name}' must be {c.kind}; got {v!r}")
        return float(v) if c.kind == "float" else v

    def _dtype(self, name: str, span: Span, scope=None) -> str:
        d = canonical(name)
        if d is not None:
            return d
        v = (scope or self.scope).lookup(name)
        if isinstance(v, _DtypeConst):
            return v.dtype
        raise TleError(span, f"unknown element type '{name}'", _suggest(name, _all_dtypes()))

    # ---- statements ----------------------------------------------------------------------------------------
    def block(self, stmts, fn_body=False):
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                if not fn_body or i != len(stmts) - 1:
                    raise TleError(s.span, "return is only allowed as the last statement of a fn")
                return self.expr(s.value)
            getattr(self, "stmt_" + type(s).__name__)(s)
        return None

    def declare(self, name: str, span: Span, value):
        prev = self.scope.lookup(name)
        if prev is not None or name in BUILTINS or name in BUILTIN_CONSTS or name in self.p.fns:
            where = getattr(prev, "span", None)
            raise TleError(span, f"redefinition of '{name}'", [f"first defined at {where}"] if where else
                           ["it names a builtin, a fn, a constant or a dim"])
        self.scope.names[name] = value

    def stmt_Let(self, s: ast.Let):
        value = self.expr(s.value)
        if s.type is not None:
            value = self.assignable(value, self.type_expr(s.type), s.value.span, f"'{s.name}'")
        value = self.materialize(value)
        var = T.Variable(s.name, value.type, s.span, mutable=False, depth=len(self.frames))
        self.declare(s.name, s.span, var)
        self.out.append(T.Bind(s.span, var, value))

    def stmt_Var(self, s: ast.Var):
        if s.value is None:
            if s.type is None:
                raise TleError(s.span, f"var '{s.name}' needs a type or an initial value",
                               [f"write var {s.name}: f32 or var {s.name} = 0.0"])
            ty = self.type_expr(s.type)
            value = T.Op(s.span, ty, "undef", [], {"name": s.name})
        else:
            value = self.expr(s.value)
            if s.type is not None:
                value = self.assignable(value, self.type_expr(s.type), s.value.span, f"'{s.name}'")
            value = self.materialize(value)
        var = T.Variable(s.name, value.type, s.span, mutable=True, depth=len(self.frames))
        self.declare(s.name, s.span, var)
        self.out.append(T.Bind(s.span, var, value))

    def stmt_Assign(self, s: ast.Assign):
        target = self.scope.lookup(s.name)
        if target is None:
            raise TleError(s.span, f"assignment to undeclared name '{s.name}'",
                           [f"declare it first: var {s.name} = ..."])
        if not isinstance(target, T.Variable) or not target.mutable:
            what = "a let" if isinstance(target, T.Variable) else "not a var"
            raise TleError(s.span, f"cannot assign to '{s.name}': it is {what}",
                           [f"declared at {target.span}" if hasattr(target, "span") else "only vars can change",
                            "declare it with var to make it mutable"])
        value = self.expr(s.value)
        if s.op != "=":
            value = self.binary(s.op[0], T.Read(s.span, target.type, target), value, s.span)
        value = self.assignable(value, target.type, s.value.span, f"var '{s.name}'")
        for frame in self.frames:
            if frame.depth > target.depth and target not in frame.carried:
                frame.carried.append(target)
        self.out.append(T.Bind(s.span, target, self.materialize(value)))

    def stmt_ExprStmt(self, s: ast.ExprStmt):
        call = s.expr
        if call.func in self.p.fns:
            self.inline(call, want_value=False)
            return
        if call.func not in EFFECT_BUILTINS:
            if call.func in BUILTINS:
                raise TleError(call.span, f"the result of {call.func}() is unused",
                               [f"write let r = {call.func}(...)"])
            self.unknown(call.func, call.name_span)
        e = self.expr(call)
        self.out.append(T.Eval(s.span, e))

    def stmt_For(self, s: ast.For):
        it = s.iter
        if not (isinstance(it, ast.Call) and it.func == "range"):
            raise TleError(it.span, "a for loop iterates over range(stop), range(start, stop) or "
                                    "range(start, stop, step)")
        if it.kwargs or not 1 <= len(it.args) <= 3:
            raise TleError(it.span, "range takes 1 to 3 positional arguments")
        vals = [self.scalar_int(a, "range bound") for a in it.args]
        start, stop, step = (T.Const(it.span, Scalar("i32"), 0), vals[0], T.Const(it.span, Scalar("i32"), 1)) \
            if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) == 3 else T.Const(it.span, Scalar("i32"), 1))
        if not isinstance(step, T.Const) or step.value <= 0:
            raise TleError(it.args[2].span if len(it.args) == 3 else it.span,
                           "the step of range must be a positive compile-time constant")
        stages = unroll = None
        for h in s.hints:
            if h.name == "pipeline":
                stages = self.hint_int(h, "stages")
            else:
                unroll = self.hint_int(h, "factor")
        frame = _Frame(len(self.frames) + 1, [])
        body, saved_out, saved_scope = [], self.out, self.scope
        self.frames.append(frame)
        self.out, self.scope = body, _Scope(self.scope)
        var = T.Variable(s.var, Scalar("i32"), s.span, depth=frame.depth)
        self.declare(s.var, s.span, var)
        try:
            self.block(s.body)
        finally:
            self.frames.pop()
            self.out, self.scope = saved_out, saved_scope
        self.out.append(T.For(s.span, var, start, stop, step, body, frame.carried, stages, unroll))

    def hint_int(self, h: ast.LoopHint, key: str) -> int:
        args = list(h.args) + [kw.value for kw in h.kwargs if kw.name == key]
        bad = [kw for kw in h.kwargs if kw.name != key]
        if bad or len(args) != 1:
            raise TleError(h.span, f"{h.name} takes one argument: {h.name}({key}=N)")
        v = self.expr(args[0])
        if not isinstance(v, T.Const) or not isinstance(v.value, int) or isinstance(v.value, bool) or v.value < 1:
            raise TleError(args[0].span, f"{h.name}({key}=...) must be a positive compile-time integer")
        return v.value

    def stmt_If(self, s: ast.If):
        cond = self.expr(s.cond)
        if isinstance(cond.type, Tile):
            raise TleError(s.cond.span, f"if needs a scalar condition, got {cond.type}",
                           ["for a tile, choose elementwise with where(cond, a, b)"])
        if cond.type.dtype != "i1":
            raise TleError(s.cond.span, f"if needs a bool condition, got {cond.type}",
                           ["compare explicitly, e.g. x != 0"])
        if isinstance(cond, T.Const):  # decided at compile time: only the taken branch exists
            taken = s.then if cond.value else (s.orelse or ())
            saved = self.scope
            self.scope = _Scope(saved)
            try:
                self.block(taken)
            finally:
                self.scope = saved
            return
        frame = _Frame(len(self.frames) + 1, [])
        bodies = []
        self.frames.append(frame)
        saved_out, saved_scope = self.out, self.scope
        try:
            for branch in (s.then, s.orelse or ()):
                self.out, self.scope = [], _Scope(saved_scope)
                self.block(branch)
                bodies.append(self.out)
        finally:
            self.frames.pop()
            self.out, self.scope = saved_out, saved_scope
        self.out.append(T.If(s.span, cond, bodies[0], bodies[1], frame.carried))

    def stmt_Return(self, s):  # pragma: no cover - handled in block()
        raise TleError(s.span, "return is only allowed as the last statement of a fn")

    # ---- types written in the source -------------------------------------------------------------------------
    def type_expr(self, t: ast.TypeExpr):
        if isinstance(t, ast.ScalarTypeExpr):
            return Scalar(self._dtype(t.dtype, t.span))
        if isinstance(t, ast.TileTypeExpr):
            return Tile(self._dtype(t.dtype, t.span), self.shape([*t.dims], t.span))
        raise TleError(t.span, "a tensor type is only allowed for kernel parameters")

    def shape(self, dims, span: Span, what="tile") -> tuple[int, ...]:
        out = []
        for d in dims:
            v = self.expr(d)
            if not isinstance(v, T.Const) or not isinstance(v.value, int) or isinstance(v.value, bool):
                raise TleError(d.span, f"{what} size must be a compile-time constant integer",
                               ["use a literal or a kernel constant such as <BLOCK: int>"])
            if v.value <= 0 or v.value & (v.value - 1):
                raise TleError(d.span, f"{what} size must be a positive power of two, got {v.value}",
                               ["Triton and Tile IR tiles have power-of-two sizes; ragged edges are padded"])
            out.append(v.value)
        if math.prod(out) > MAX_TILE_ELEMENTS:
            raise TleError(span, f"{what} of {math.prod(out)} elements is too large (at most {MAX_TILE_ELEMENTS})")
        return tuple(out)

    # ---- expressions ---------------------------------------------------------------------------------------
    def expr(self, e: ast.Expr) -> T.Expr:
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_IntLit(self, e):
        if not -(2 ** 63) <= e.value < 2 ** 64:
            raise TleError(e.span, "integer literal out of range")
        return T.Const(e.span, Scalar("i32" if -(2 ** 31) <= e.value < 2 ** 31 else "i64"), e.value, weak=True)

    def expr_FloatLit(self, e):
        return T.Const(e.span, Scalar("f32"), e.value, weak=True)

    def expr_BoolLit(self, e):
        return T.Const(e.span, Scalar("i1"), e.value)

    def expr_ListLit(self, e):
        raise TleError(e.span, "a list is only allowed as an argument such as tile=[...], at=[...] or a shape")

    def expr_Name(self, e: ast.Name):
        v = self.scope.lookup(e.id)
        if v is None:
            if e.id in BUILTIN_CONSTS:
                return T.Const(e.span, Scalar("f32"), BUILTIN_CONSTS[e.id], weak=True)
            if e.id in self.p.const_values:
                return self.const_expr(self.p.const_values[e.id], e.span)
            if e.id in self.p.fns or e.id in BUILTINS:
                raise TleError(e.span, f"'{e.id}' is a function; call it: {e.id}(...)")
            self.unknown(e.id, e.span)
        if isinstance(v, T.Variable):
            return T.Read(e.span, v.type, v)
        if isinstance(v, T.Dim):
            return T.Dim(e.span, v.type, v.name)
        if isinstance(v, T.TensorParam):
            raise TleError(e.span, f"tensor '{e.id}' is not a value; load a tile from it",
                           [f"e.g. load({e.id}, tile=[...], at=[...])"])
        if isinstance(v, _DtypeConst):
            raise TleError(e.span, f"'{e.id}' is an element type, not a value")
        return self.const_expr(v, e.span)

    def const_expr(self, v, span):
        if isinstance(v, bool):
            return T.Const(span, Scalar("i1"), v)
        if isinstance(v, int):
            return T.Const(span, Scalar("i32" if -(2 ** 31) <= v < 2 ** 31 else "i64"), v, weak=True)
        return T.Const(span, Scalar("f32"), float(v), weak=True)

    def unknown(self, name: str, span: Span):
        cands = self.scope.visible() | set(BUILTINS) | set(self.p.fns) | set(self.p.const_values)
        raise TleError(span, f"unknown name '{name}'", _suggest(name, cands))

    def expr_UnaryOp(self, e: ast.UnaryOp):
        x = self.expr(e.operand)
        if e.op == "not":
            self.require_bool(x, e.operand.span, "not")
            if isinstance(x, T.Const):
                return T.Const(e.span, x.type, not x.value)
            return T.Op(e.span, x.type, "not", [x])
        if e.op == "~":
            if not is_int(x.type.dtype):
                raise TleError(e.operand.span, f"'~' needs an integer operand, got {x.type}")
            if isinstance(x, T.Const):
                return T.Const(e.span, x.type, ~x.value, x.weak)
            return T.Op(e.span, x.type, "xor", [x, self.coerce(T.Const(e.span, Scalar(x.type.dtype), -1), x.type)])
        self.require_numeric(x, e.operand.span, "'-'")
        if isinstance(x, T.Const):
            return T.Const(e.span, x.type, -x.value, x.weak)
        return T.Op(e.span, x.type, "neg", [x])

    def require_bool(self, x, span, what):
        if x.type.dtype != "i1":
            raise TleError(span, f"{what} needs bool operands, got {x.type}", ["compare explicitly, e.g. x != 0"])

    def require_numeric(self, x, span, what):
        if x.type.dtype == "i1":
            raise TleError(span, f"{what} needs numbers, got {x.type}", ["cast<i32>(b) turns a bool into 0 or 1"])

    def expr_BinOp(self, e: ast.BinOp):
        return self.binary(e.op, self.expr(e.lhs), self.expr(e.rhs), e.span, e.lhs.span, e.rhs.span)

    def binary(self, op, a, b, span, aspan=None, bspan=None):
        aspan, bspan = aspan or span, bspan or span
        if op in ("and", "or"):
            self.require_bool(a, aspan, f"'{op}'")
            self.require_bool(b, bspan, f"'{op}'")
        elif op in ("&", "|", "^", "<<", ">>"):
            for x, sp in ((a, aspan), (b, bspan)):
                if not is_int(x.type.dtype):
                    raise TleError(sp, f"'{op}' needs integer operands, got {x.type}")
        elif op not in ("==", "!="):
            self.require_numeric(a, aspan, f"'{op}'")
            self.require_numeric(b, bspan, f"'{op}'")
        dtype = self.common_dtype(a, b)
        if op == "**" and not is_float(dtype):
            dtype = "f32"
        shape = broadcast_shapes(_shape(a), _shape(b))
        if shape is None:
            raise TleError(span, f"tile shapes {list(_shape(a))} and {list(_shape(b))} do not broadcast",
                           ["sizes must match, or be 1, axis by axis from the right; reshape or expand_dims "
                            "one side"])
        name = BINARY_OPS[op]
        if isinstance(a, T.Const) and isinstance(b, T.Const):
            return self.fold(op, a, b, dtype, span)
        ty = Tile(dtype, shape) if shape or isinstance(a.type, Tile) or isinstance(b.type, Tile) else Scalar(dtype)
        a, b = self.coerce(a, ty), self.coerce(b, ty)
        if name in ("eq", "ne", "lt", "le", "gt", "ge"):
            rty = Tile("i1", shape) if isinstance(ty, Tile) else Scalar("i1")
            return T.Op(span, rty, name, [a, b])
        return T.Op(span, ty, name, [a, b])

    def common_dtype(self, a, b) -> str:
        wa, wb = isinstance(a, T.Const) and a.weak, isinstance(b, T.Const) and b.weak
        da, db = a.type.dtype, b.type.dtype
        if wa and not wb:
            return "f32" if is_float(da) and not is_float(db) else db
        if wb and not wa:
            return "f32" if is_float(db) and not is_float(da) else da
        return promote(da, db)

    def fold(self, op, a: T.Const, b: T.Const, dtype, span):
        x, y = a.value, b.value
        weak = a.weak and b.weak
        if op in ("==", "!=", "<", "<=", ">", ">="):
            r = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return T.Const(span, Scalar("i1"), bool(r))
        if op in ("and", "or"):
            return T.Const(span, Scalar("i1"), bool(x and y) if op == "and" else bool(x or y))
        if op in ("max", "min"):
            r = max(x, y) if op == "max" else min(x, y)
            return T.Const(span, Scalar(dtype), float(r) if is_float(dtype) else r, weak)
        if op in ("&", "|", "^", "<<", ">>"):
            r = {"&": x & y, "|": x | y, "^": x ^ y, "<<": x << y, ">>": x >> y}[op]
            return T.Const(span, Scalar(dtype), r, weak)
        if is_int(dtype) and op == "/":
            r = _fold_arith("/", int(x), int(y), span)
        elif is_int(dtype) and op == "%":
            r = _fold_arith("%", int(x), int(y), span)
        else:
            r = _fold_arith(op, x, y, span)
            if is_float(dtype):
                r = float(r)
        return T.Const(span, Scalar(dtype), r, weak)

    def coerce(self, x: T.Expr, ty) -> T.Expr:
        """Convert x to ty's dtype and broadcast it to ty's shape (explicit ops)."""
        dtype = ty.dtype
        if x.type.dtype != dtype:
            if isinstance(x, T.Const):
                v = x.value
                v = float(v) if is_float(dtype) else (bool(v) if dtype == "i1" else int(v))
                x = T.Const(x.span, Scalar(dtype), v, x.weak)
            else:
                x = T.Op(x.span, _with_dtype(x.type, dtype), "cast", [x])
        if isinstance(ty, Tile):
            return self.broadcast_to(x, ty.shape)
        return x

    def broadcast_to(self, x: T.Expr, shape: tuple[int, ...]) -> T.Expr:
        if isinstance(x.type, Scalar):
            return T.Op(x.span, Tile(x.type.dtype, shape), "splat", [x])
        if x.type.shape == shape:
            return x
        if broadcast_shapes(x.type.shape, shape) != shape:
            raise TleError(x.span, f"a tile of shape {list(x.type.shape)} cannot broadcast to {list(shape)}")
        cur = x
        if len(x.type.shape) < len(shape):
            new = (1,) * (len(shape) - len(x.type.shape)) + x.type.shape
            cur = T.Op(x.span, Tile(x.type.dtype, new), "reshape", [cur])
        if cur.type.shape != shape:
            cur = T.Op(x.span, Tile(x.type.dtype, shape), "broadcast", [cur])
        return cur

    def materialize(self, x: T.Expr) -> T.Expr:
        """A weak literal bound to a name gets its default type (i32 or f32)."""
        if isinstance(x, T.Const) and x.weak:
            return T.Const(x.span, x.type, x.value, weak=False)
        return x

    def assignable(self, value: T.Expr, ty, span, what) -> T.Expr:
        if isinstance(value.type, Tile) and isinstance(ty, Scalar):
            raise TleError(span, f"cannot assign a {value.type} to {what} of type {ty}")
        if value.type.dtype != ty.dtype and not (isinstance(value, T.Const) and value.weak):
            raise TleError(span, f"cannot assign a value of type {value.type} to {what} of type {ty}",
                           [f"convert it: cast<{ty.dtype}>(...)"])
        if isinstance(ty, Tile) and isinstance(value.type, Tile) and \
                broadcast_shapes(value.type.shape, ty.shape) != ty.shape:
            raise TleError(span, f"cannot assign a {value.type} to {what} of type {ty}: the shapes differ")
        return self.coerce(value, ty)

    def scalar_int(self, e: ast.Expr, what: str) -> T.Expr:
        v = self.expr(e)
        if isinstance(v.type, Tile) or not is_int(v.type.dtype) or v.type.dtype == "i1":
            raise TleError(e.span, f"{what} must be an integer scalar, got {v.type}")
        return self.coerce(v, Scalar("i32")) if v.type.dtype != "i32" else v

    def const_int(self, e: ast.Expr, what: str) -> int:
        v = self.expr(e)
        if not isinstance(v, T.Const) or not isinstance(v.value, int) or isinstance(v.value, bool):
            raise TleError(e.span, f"{what} must be a compile-time integer")
        return v.value

    # ---- calls ---------------------------------------------------------------------------------------------
    def expr_Call(self, e: ast.Call):
        if e.func in self.p.fns:
            return self.inline(e, want_value=True)
        handler = BUILTINS.get(e.func)
        if handler is None:
            if e.func == "range":
                raise TleError(e.span, "range() is only allowed as the iterable of a for loop")
            if e.func in self.p.kernels:
                raise TleError(e.name_span, f"'{e.func}' is a kernel; kernels cannot call kernels",
                               ["write the shared part as a fn"])
            self.unknown(e.func, e.name_span)
        return handler(self, e)

    def args(self, e, positional: tuple[str, ...], optional: tuple[str, ...] = (), kw_only: tuple[str, ...] = ()):
        """Bind a call's arguments to parameter names; returns {name: ast.Expr}."""
        names = positional + optional
        if len(e.args) > len(names):
            raise TleError(e.args[len(names)].span, f"{e.func}() takes at most {len(names)} positional "
                           f"argument{'s' if len(names) != 1 else ''}, got {len(e.args)}")
        bound = dict(zip(names, e.args))
        for kw in e.kwargs:
            if kw.name not in names + kw_only:
                raise TleError(kw.span, f"{e.func}() has no argument '{kw.name}'",
                               _suggest(kw.name, names + kw_only) or
                               [f"its arguments: {', '.join(names + kw_only) or 'none'}"])
            if kw.name in bound:
                raise TleError(kw.span, f"{e.func}() got argument '{kw.name}' twice")
            bound[kw.name] = kw.value
        for p in positional:
            if p not in bound:
                raise TleError(e.span, f"{e.func}() is missing its argument '{p}'")
        return bound

    def inline(self, e: ast.Call, want_value: bool):
        fn = self.p.fns[e.func]
        if e.func in self.fn_stack:
            raise TleError(e.span, f"fn '{e.func}' calls itself; recursion is not supported (fns are inlined)")
        if e.kwargs:
            raise TleError(e.kwargs[0].span, "fns take positional arguments only")
        if len(e.args) != len(fn.params):
            raise TleError(e.span, f"fn '{fn.name}' takes {len(fn.params)} argument"
                           f"{'s' if len(fn.params) != 1 else ''}, got {len(e.args)}",
                           [f"declared at {fn.span}"])
        values = [self.expr(a) for a in e.args]
        saved_scope = self.scope
        fn_scope = _Scope(self.scope_root())
        for p, v, a in zip(fn.params, values, e.args):
            if p.type is not None:
                self.scope = fn_scope
                ty = self.type_expr(p.type)
                self.scope = saved_scope
                v = self.assignable(v, ty, a.span, f"parameter '{p.name}' of fn '{fn.name}'")
            v = self.materialize(v)
            var = T.Variable(p.name, v.type, p.span, depth=len(self.frames))
            fn_scope.names[p.name] = var
            self.out.append(T.Bind(a.span, var, v))
        self.fn_stack.append(e.func)
        self.scope = fn_scope
        try:
            result = self.block(fn.body, fn_body=True)
        finally:
            self.fn_stack.pop()
            self.scope = saved_scope
        if want_value and result is None:
            raise TleError(e.span, f"fn '{fn.name}' returns no value", ["end it with return <expr>"])
        return result

    def scope_root(self):
        s = self.scope
        while s.parent is not None and s.parent.parent is not None:
            s = s.parent
        return s.parent if s.parent is not None else s  # constants and dims: what a fn may see

    def expr_GenericCall(self, e: ast.GenericCall):
        dtype = self._dtype(e.dtype, e.dtype_span)
        if e.func in ("zeros", "ones", "full"):
            if e.shape is None:
                raise TleError(e.span, f"{e.func}<{e.dtype}> needs a shape: {e.func}<{e.dtype}>[A, B]")
            shape = self.shape(list(e.shape), e.span)
            if e.func == "full":
                if len(e.args) != 1 or e.kwargs:
                    raise TleError(e.span, f"full<{e.dtype}>[...] takes one value: full<{e.dtype}>[N](value)")
                v = self.expr(e.args[0])
                if isinstance(v.type, Tile):
                    raise TleError(e.args[0].span, "the value of full must be a scalar")
            else:
                if e.args or e.kwargs:
                    raise TleError(e.span, f"{e.func}<{e.dtype}>[...] takes no arguments")
                v = T.Const(e.span, Scalar(dtype), 0 if e.func == "zeros" else 1, weak=True)
            return self.coerce(v, Tile(dtype, shape))
        if e.shape is not None:
            raise TleError(e.span, f"{e.func}<{e.dtype}>(x) takes no shape")
        if len(e.args) != 1 or e.kwargs:
            raise TleError(e.span, f"{e.func}<{e.dtype}> takes exactly one argument")
        x = self.expr(e.args[0])
        ty = _with_dtype(x.type, dtype)
        if e.func == "cast":
            if x.type.dtype == dtype:
                return x
            if isinstance(x, T.Const):
                return self.coerce(x, ty)
            return T.Op(e.span, ty, "cast", [x])
        from .types import BITS
        if BITS[x.type.dtype] != BITS[dtype]:
            raise TleError(e.span, f"bitcast needs equal widths: {x.type.dtype} has {BITS[x.type.dtype]} bits, "
                                   f"{dtype} has {BITS[dtype]}")
        return T.Op(e.span, ty, "bitcast", [self.materialize(x)])

    # builtins are methods named b_<name>, collected into BUILTINS below
    def b_program_id(self, e, name="program_id"):
        a = self.args(e, ("axis",))
        axis = self.const_int(a["axis"], "the axis")
        if axis not in (0, 1, 2):
            raise TleError(a["axis"].span, f"the launch mesh has axes 0, 1 and 2; got {axis}")
        return T.Op(e.span, Scalar("i32"), name, [], {"axis": axis})

    def b_num_programs(self, e):
        return self.b_program_id(e, "num_programs")

    def tensor_arg(self, x: ast.Expr, fn: str) -> T.TensorParam:
        if isinstance(x, ast.Name):
            v = self.scope.lookup(x.id)
            if isinstance(v, T.TensorParam):
                return v
            if v is None and x.id not in BUILTIN_CONSTS:
                self.unknown(x.id, x.span)
        raise TleError(x.span, f"the first argument of {fn}() must be a tensor parameter of the kernel")

    def index_list(self, x: ast.Expr, n: int, what: str, tname: str) -> list[ast.Expr]:
        if not isinstance(x, ast.ListLit):
            if n == 1:
                return [x]
            raise TleError(x.span, f"{what} must be a list of {n} values, one per dim of '{tname}'")
        if len(x.items) != n:
            raise TleError(x.span, f"{what} has {len(x.items)} entr{'y' if len(x.items) == 1 else 'ies'} but "
                                   f"'{tname}' has {n} dim{'s' if n != 1 else ''}")
        return list(x.items)

    def b_load(self, e):
        a = self.args(e, ("tensor",), (), ("tile", "at", "pad"))
        t = self.tensor_arg(a["tensor"], "load")
        rank = len(t.type.dims)
        if "tile" not in a:
            raise TleError(e.span, "load() needs the tile shape: tile=[...]")
        tile = self.shape(self.index_list(a["tile"], rank, "tile=", t.name), a["tile"].span)
        at = [self.scalar_int(i, "a tile index in at=") for i in self.index_list(a["at"], rank, "at=", t.name)] \
            if "at" in a else [T.Const(e.span, Scalar("i32"), 0)] * rank
        pad = 0
        if "pad" in a:
            p = self.expr(a["pad"])
            if not isinstance(p, T.Const) or isinstance(p.type, Tile):
                raise TleError(a["pad"].span, "pad= must be a compile-time constant scalar (e.g. 0, -inf, nan)")
            pad = p.value
            if not is_float(t.type.dtype) and isinstance(pad, float) and (math.isinf(pad) or math.isnan(pad)
                                                                          or pad != int(pad)):
                raise TleError(a["pad"].span, f"pad={pad} does not fit the integer tensor '{t.name}'")
        pad = float(pad) if is_float(t.type.dtype) else int(pad)
        return T.Op(e.span, Tile(t.type.dtype, tile), "load", at, {"tile": tile, "padding": pad}, tensor=t)

    def b_store(self, e):
        a = self.args(e, ("tensor", "value"), (), ("at",))
        t = self.tensor_arg(a["tensor"], "store")
        rank = len(t.type.dims)
        v = self.expr(a["value"])
        if not isinstance(v.type, Tile):
            raise TleError(a["value"].span, f"store() needs a tile, got {v.type}",
                           [f"make one: full<{t.type.dtype}>[...](value)"])
        if len(v.type.shape) != rank:
            raise TleError(a["value"].span, f"a {v.type} has {len(v.type.shape)} dims but '{t.name}' has {rank}",
                           ["reshape the tile to the tensor's rank"])
        if v.type.dtype != t.type.dtype:
            raise TleError(a["value"].span, f"cannot store a {v.type} into {t.type} '{t.name}'",
                           [f"convert it: cast<{t.type.dtype}>(...)"])
        at = [self.scalar_int(i, "a tile index in at=") for i in self.index_list(a["at"], rank, "at=", t.name)] \
            if "at" in a else [T.Const(e.span, Scalar("i32"), 0)] * rank
        return T.Op(e.span, None, "store", [v, *at], {}, tensor=t)

    def index_tiles(self, t: T.TensorParam, x: ast.Expr, extra: list, what: str):
        """Indices (one per dim) and extra operands broadcast to one shape; returns (indices, extras, shape)."""
        rank = len(t.type.dims)
        idx = [self.expr(i) for i in self.index_list(x, rank, "the indices", t.name)]
        for i, src in zip(idx, self.index_list(x, rank, "the indices", t.name)):
            if not is_int(i.type.dtype) or i.type.dtype == "i1":
                raise TleError(src.span, f"an index of {what}() must be an integer tile, got {i.type}")
        shape = ()
        for v in idx + [v for v in extra if v is not None]:
            s = broadcast_shapes(shape, _shape(v))
            if s is None:
                raise TleError(v.span, f"shape {list(_shape(v))} does not broadcast with {list(shape)}")
            shape = s
        if shape == ():
            shape = (1,)
        idx = [self.coerce(i, Tile("i32", shape)) for i in idx]
        return idx, shape

    def b_gather(self, e):
        a = self.args(e, ("tensor", "indices"), (), ("mask", "other"))
        t = self.tensor_arg(a["tensor"], "gather")
        mask = self.expr(a["mask"]) if "mask" in a else None
        if mask is not None:
            self.require_bool(mask, a["mask"].span, "mask=")
        idx, shape = self.index_tiles(t, a["indices"], [mask], "gather")
        other = 0
        if "other" in a:
            o = self.expr(a["other"])
            if not isinstance(o, T.Const):
                raise TleError(a["other"].span, "other= must be a compile-time constant")
            other = o.value
        other = float(other) if is_float(t.type.dtype) else int(other)
        ops = idx + ([self.coerce(mask, Tile("i1", shape))] if mask is not None else [])
        return T.Op(e.span, Tile(t.type.dtype, shape), "gather", ops, {"other": other, "masked": mask is not None},
                    tensor=t)

    def _scatter_like(self, e, name, kind=None):
        a = self.args(e, ("tensor", "indices", "value"), (), ("mask",))
        t = self.tensor_arg(a["tensor"], e.func)
        v = self.expr(a["value"])
        mask = self.expr(a["mask"]) if "mask" in a else None
        if mask is not None:
            self.require_bool(mask, a["mask"].span, "mask=")
        idx, shape = self.index_tiles(t, a["indices"], [v, mask], e.func)
        if v.type.dtype != t.type.dtype and not (isinstance(v, T.Const) and v.weak):
            raise TleError(a["value"].span, f"{e.func}() of a {v.type} into {t.type} '{t.name}'",
                           [f"convert it: cast<{t.type.dtype}>(...)"])
        if kind is not None:
            allowed = {"add": ("f16", "f32", "i32", "i64"), "max": ("i32", "i64", "f32"),
                       "min": ("i32", "i64", "f32")}[kind]
            if t.type.dtype not in allowed:
                raise TleError(e.span, f"{e.func}() does not support {t.type.dtype}; it supports "
                                       f"{', '.join(allowed)}")
        v = self.coerce(v, Tile(t.type.dtype, shape))
        ops = [v, *idx] + ([self.coerce(mask, Tile("i1", shape))] if mask is not None else [])
        attrs = {"masked": mask is not None}
        if kind:
            attrs["kind"] = kind
        return T.Op(e.span, Tile(t.type.dtype, shape) if kind else None, name, ops, attrs, tensor=t)

    def b_scatter(self, e):
        return self._scatter_like(e, "scatter")

    def b_atomic_add(self, e):
        return self._scatter_like(e, "atomic", "add")

    def b_atomic_max(self, e):
        return self._scatter_like(e, "atomic", "max")

    def b_atomic_min(self, e):
        return self._scatter_like(e, "atomic", "min")

    def b_dot(self, e):
        a = self.args(e, ("a", "b"), ("acc",), ("tf32",))
        x, y = self.expr(a["a"]), self.expr(a["b"])
        for v, src in ((x, a["a"]), (y, a["b"])):
            if not isinstance(v.type, Tile) or len(v.type.shape) != 2:
                raise TleError(src.span, f"dot() needs 2-D tiles, got {v.type}")
        (m, k1), (k2, n) = x.type.shape, y.type.shape
        if k1 != k2:
            raise TleError(e.span, f"dot() inner dimensions differ: {list(x.type.shape)} @ {list(y.type.shape)}",
                           [f"a is [M, K] = {list(x.type.shape)}, so b must be [K, N] = [{k1}, ...]"
                            + ("; did you mean transpose(b)?" if n == k1 else "")])
        if x.type.dtype != y.type.dtype:
            raise TleError(e.span, f"dot() operands have different element types: {x.type.dtype} and "
                                   f"{y.type.dtype}", ["cast one of them"])
        d = x.type.dtype
        acc_default = {"f16": "f32", "bf16": "f32", "f32": "f32", "i8": "i32", "f64": "f64"}.get(d)
        if acc_default is None:
            raise TleError(e.span, f"dot() does not support {d} operands; use f16, bf16, f32, f64 or i8")
        for size, what in ((m, "M"), (n, "N"), (k1, "K")):
            if size < 16:
                raise TleError(e.span, f"dot() needs every dimension to be at least 16; {what} is {size}",
                               ["tensor-core instructions work on 16x16 and larger tiles"])
        if "acc" in a:
            acc = self.expr(a["acc"])
            allowed = {"f16": ("f32", "f16"), "bf16": ("f32",), "f32": ("f32",), "i8": ("i32",),
                       "f64": ("f64",)}[d]
            if not isinstance(acc.type, Tile) or acc.type.shape != (m, n):
                raise TleError(a["acc"].span, f"the accumulator must be a [{m}, {n}] tile, got {acc.type}")
            if acc.type.dtype not in allowed:
                raise TleError(a["acc"].span, f"a dot of {d} accumulates in {' or '.join(allowed)}, not "
                                              f"{acc.type.dtype}")
        else:
            acc = self.coerce(T.Const(e.span, Scalar(acc_default), 0), Tile(acc_default, (m, n)))
        tf32 = False
        if "tf32" in a:
            tv = self.expr(a["tf32"])
            if not isinstance(tv, T.Const) or tv.type.dtype != "i1":
                raise TleError(a["tf32"].span, "tf32= must be true or false")
            tf32 = bool(tv.value)
            if tf32 and d != "f32":
                raise TleError(a["tf32"].span, "tf32=true only applies to f32 operands")
        return T.Op(e.span, acc.type, "dot", [x, y, acc], {"precision": "tf32" if tf32 else "ieee"})

    def _reduce(self, e, kind):
        if kind in ("max", "min") and len(e.args) == 2:
            a = self.args(e, ("a", "b"))
            return self.binary(kind, self.expr(a["a"]), self.expr(a["b"]), e.span, a["a"].span, a["b"].span)
        a = self.args(e, ("x",), (), ("axis", "keepdims"))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            raise TleError(a["x"].span, f"{kind}() reduces a tile, got {x.type}",
                           ["for two values use max(a, b)"] if kind in ("max", "min") else None)
        keep = False
        if "keepdims" in a:
            kv = self.expr(a["keepdims"])
            if not isinstance(kv, T.Const) or kv.type.dtype != "i1":
                raise TleError(a["keepdims"].span, "keepdims= must be true or false")
            keep = bool(kv.value)
        rank = len(x.type.shape)
        if "axis" in a:
            axis = self.axis(a["axis"], rank)
        else:
            if rank > 1:
                import math as _m
                x = T.Op(x.span, Tile(x.type.dtype, (_m.prod(x.type.shape),)), "reshape", [x])
            axis = 0
        x = self.accumulation_input(x, kind)
        out_dtype = "i32" if kind in ("argmax", "argmin") else x.type.dtype
        shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
        ty = Tile(out_dtype, shape) if shape else Scalar(out_dtype)
        r = T.Op(e.span, ty, "reduce", [x], {"kind": kind, "axis": axis})
        if keep:
            if "axis" not in a:
                return self.coerce(r, Tile(out_dtype, (1,) * rank))
            r = T.Op(e.span, Tile(out_dtype, x.type.shape[:axis] + (1,) + x.type.shape[axis + 1:]), "reshape",
                     [self.coerce(r, Tile(out_dtype, (1,))) if not shape else r])
        return r

    def accumulation_input(self, x, kind):
        """sum and cumsum accumulate f16/bf16 in f32 and small integers in i32 (docs/language.md)."""
        d = x.type.dtype
        if kind == "sum" and d in ("f16", "bf16"):
            return T.Op(x.span, Tile("f32", x.type.shape), "cast", [x])
        if kind == "sum" and d in ("i1", "i8", "i16"):
            return T.Op(x.span, Tile("i32", x.type.shape), "cast", [x])
        if d == "i1":
            raise TleError(x.span, f"{kind}() of a bool tile; cast it to an integer first")
        return x

    def axis(self, x: ast.Expr, rank: int) -> int:
        axis = self.const_int(x, "axis=")
        if not -rank <= axis < rank:
            raise TleError(x.span, f"axis {axis} is out of range for a tile of {rank} dim{'s' if rank != 1 else ''}")
        return axis % rank

    def b_sum(self, e):
        return self._reduce(e, "sum")

    def b_max(self, e):
        return self._reduce(e, "max")

    def b_min(self, e):
        return self._reduce(e, "min")

    def b_argmax(self, e):
        return self._reduce(e, "argmax")

    def b_argmin(self, e):
        return self._reduce(e, "argmin")

    def b_cumsum(self, e):
        a = self.args(e, ("x",), (), ("axis",))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            raise TleError(a["x"].span, f"cumsum() scans a tile, got {x.type}")
        rank = len(x.type.shape)
        if "axis" not in a and rank > 1:
            raise TleError(e.span, f"cumsum() of a {rank}-D tile needs axis=")
        axis = self.axis(a["axis"], rank) if "axis" in a else 0
        x = self.accumulation_input(x, "sum")
        return T.Op(e.span, x.type, "scan", [x], {"kind": "sum", "axis": axis})

    def _unary_math(self, e, name):
        a = self.args(e, ("x",))
        x = self.expr(a["x"])
        if name == "abs":
            self.require_numeric(x, a["x"].span, "abs()")
            if isinstance(x, T.Const):
                return T.Const(e.span, x.type, abs(x.value), x.weak)
            return T.Op(e.span, x.type, "abs", [x])
        if not is_float(x.type.dtype):
            if isinstance(x, T.Const) and x.weak:
                x = T.Const(x.span, Scalar("f32"), float(x.value), True)
            else:
                raise TleError(a["x"].span, f"{name}() needs a float operand, got {x.type}",
                               [f"convert it: {name}(cast<f32>(...))"])
        if isinstance(x, T.Const):
            f = {"exp": math.exp, "exp2": lambda v: 2.0 ** v, "log": math.log, "log2": math.log2,
                 "sqrt": math.sqrt, "rsqrt": lambda v: 1 / math.sqrt(v), "sin": math.sin, "cos": math.cos,
                 "tanh": math.tanh, "sigmoid": lambda v: 1 / (1 + math.exp(-v)), "erf": math.erf,
                 "floor": math.floor, "ceil": math.ceil}[name]
            try:
                return T.Const(e.span, x.type, float(f(x.value)), x.weak)
            except (ValueError, ZeroDivisionError, OverflowError):
                raise TleError(e.span, f"{name}({x.value}) is undefined") from None
        return T.Op(e.span, x.type, name, [x])

    def b_where(self, e):
        a = self.args(e, ("cond", "a", "b"))
        c, x, y = self.expr(a["cond"]), self.expr(a["a"]), self.expr(a["b"])
        self.require_bool(c, a["cond"].span, "where()")
        dtype = self.common_dtype(x, y)
        shape = broadcast_shapes(broadcast_shapes(_shape(c), _shape(x)) or (-1,), _shape(y))
        if shape is None or -1 in shape:
            raise TleError(e.span, f"where() operands do not broadcast: {list(_shape(c))}, {list(_shape(x))}, "
                                   f"{list(_shape(y))}")
        ty = Tile(dtype, shape) if shape else Scalar(dtype)
        cty = Tile("i1", shape) if shape else Scalar("i1")
        return T.Op(e.span, ty, "where", [self.coerce(c, cty), self.coerce(x, ty), self.coerce(y, ty)])

    def b_arange(self, e):
        a = self.args(e, ("start",), ("end",))
        if "end" in a:
            start, end = self.const_int(a["start"], "arange start"), self.const_int(a["end"], "arange end")
        else:
            start, end = 0, self.const_int(a["start"], "arange end")
        n = end - start
        if n <= 0 or n & (n - 1):
            raise TleError(e.span, f"arange() must give a power-of-two number of elements, got {n}")
        return T.Op(e.span, Tile("i32", (n,)), "arange", [], {"start": start, "end": end})

    def b_reshape(self, e):
        a = self.args(e, ("x", "shape"))
        x = self.tile_arg(a["x"], "reshape")
        if not isinstance(a["shape"], ast.ListLit):
            raise TleError(a["shape"].span, "reshape() needs the new shape as a list: reshape(x, [A, B])")
        shape = self.shape(list(a["shape"].items), a["shape"].span)
        if math.prod(shape) != math.prod(x.type.shape):
            raise TleError(e.span, f"cannot reshape {x.type} ({math.prod(x.type.shape)} elements) to {list(shape)} "
                                   f"({math.prod(shape)} elements)")
        return T.Op(e.span, Tile(x.type.dtype, shape), "reshape", [x]) if shape != x.type.shape else x

    def tile_arg(self, x: ast.Expr, fn: str) -> T.Expr:
        v = self.expr(x)
        if not isinstance(v.type, Tile):
            raise TleError(x.span, f"{fn}() needs a tile, got {v.type}")
        return v

    def b_transpose(self, e):
        a = self.args(e, ("x",), ("perm",))
        x = self.tile_arg(a["x"], "transpose")
        rank = len(x.type.shape)
        if "perm" in a:
            if not isinstance(a["perm"], ast.ListLit):
                raise TleError(a["perm"].span, "perm must be a list of axes")
            perm = [self.const_int(p, "an axis") for p in a["perm"].items]
            if sorted(perm) != list(range(rank)):
                raise TleError(a["perm"].span, f"perm must be a permutation of 0..{rank - 1}")
        elif rank == 2:
            perm = [1, 0]
        else:
            raise TleError(e.span, f"transpose() of a {rank}-D tile needs perm=[...]")
        return T.Op(e.span, Tile(x.type.dtype, tuple(x.type.shape[p] for p in perm)), "transpose", [x],
                    {"perm": perm})

    def b_broadcast(self, e):
        a = self.args(e, ("x", "shape"))
        x = self.expr(a["x"])
        if not isinstance(a["shape"], ast.ListLit):
            raise TleError(a["shape"].span, "broadcast() needs the shape as a list")
        shape = self.shape(list(a["shape"].items), a["shape"].span)
        if broadcast_shapes(_shape(x), shape) != shape:
            raise TleError(e.span, f"cannot broadcast {x.type} to {list(shape)}")
        return self.coerce(self.materialize(x), Tile(x.type.dtype, shape))

    def b_expand_dims(self, e):
        a = self.args(e, ("x", "axis"))
        x = self.tile_arg(a["x"], "expand_dims")
        rank = len(x.type.shape)
        axis = self.const_int(a["axis"], "axis")
        if not -rank - 1 <= axis <= rank:
            raise TleError(a["axis"].span, f"axis {axis} is out of range for expand_dims of a {rank}-D tile")
        axis %= rank + 1
        shape = x.type.shape[:axis] + (1,) + x.type.shape[axis:]
        return T.Op(e.span, Tile(x.type.dtype, shape), "expand_dims", [x], {"axis": axis})

    def b_cdiv(self, e):
        a = self.args(e, ("a", "b"))
        x, y = self.expr(a["a"]), self.expr(a["b"])
        for v, src in ((x, a["a"]), (y, a["b"])):
            if not is_int(v.type.dtype) or v.type.dtype == "i1":
                raise TleError(src.span, f"cdiv() needs integers, got {v.type}")
        if isinstance(y, T.Const) and y.value == 0:
            raise TleError(a["b"].span, "cdiv() by zero")
        one = T.Const(e.span, Scalar("i32"), 1, weak=True)
        s = self.binary("-", self.binary("+", x, y, e.span), one, e.span)
        return self.binary("/", s, y, e.span)


def _shape(x: T.Expr) -> tuple[int, ...]:
    return x.type.shape if isinstance(x.type, Tile) else ()


def _with_dtype(t, dtype):
    return Tile(dtype, t.shape) if isinstance(t, Tile) else Scalar(dtype)


BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "**": "pow", "and": "and", "or": "or",
              "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "==": "eq", "!=": "ne", "<": "lt",
              "<=": "le", ">": "gt", ">=": "ge", "max": "max", "min": "min"}

UNARY_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "abs",
              "floor", "ceil")

BUILTINS = {name[2:]: getattr(_KernelChecker, name) for name in dir(_KernelChecker) if name.startswith("b_")}
for _n in UNARY_MATH:
    BUILTINS[_n] = (lambda n: lambda self, e: self._unary_math(e, n))(_n)
BUILTIN_NAMES = tuple(BUILTINS) + ("range", "zeros", "ones", "full", "cast", "bitcast")
EFFECT_BUILTINS = ("store", "scatter", "atomic_add", "atomic_max", "atomic_min")
FLOAT_DTYPES = FLOATS
