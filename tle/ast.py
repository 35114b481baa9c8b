"""The tle abstract syntax tree: frozen dataclasses, each with the Span of the text it came from.

tle/parser.py builds these from tle/grammar.lark; tle/check.py reads them. `dump(node)` prints the tree
(`tlec --emit=ast`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .diagnostics import Span


@dataclass(frozen=True)
class Node:
    span: Span


# ---- expressions -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expr(Node):
    pass


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class FloatLit(Expr):
    value: float


@dataclass(frozen=True)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True)
class StrLit(Expr):
    """A string: an import's path, or print()'s message (anywhere else the check rejects it)."""
    value: str


@dataclass(frozen=True)
class Name(Expr):
    id: str


@dataclass(frozen=True)
class ListLit(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class ValueList(Expr):
    """a, b after `return` or on the right of `let x, y =`: several values, not a value of its own."""
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Keyword(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Call(Expr):
    """f(args, kw=value). `func` is the callee's name; `name_span` its position."""
    func: str
    name_span: Span
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]


@dataclass(frozen=True)
class GenericCall(Expr):
    """A builtin with a type argument: zeros<f32>[BM, BN], full<f32>[N](1.0), cast<f16>(x)."""
    func: str
    dtype: str
    dtype_span: Span
    shape: tuple[Expr, ...] | None
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    """Arithmetic, bitwise, shift, comparison and logical operators; `op` is the source token."""
    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # "-", "~", "not"
    operand: Expr


# ---- types as written ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TypeExpr(Node):
    pass


@dataclass(frozen=True)
class ScalarTypeExpr(TypeExpr):
    dtype: str


@dataclass(frozen=True)
class TileTypeExpr(TypeExpr):
    dtype: str
    dims: tuple[Expr, ...]


@dataclass(frozen=True)
class TensorTypeExpr(TypeExpr):
    dtype: str
    dims: tuple[Expr, ...]  # Name (a symbolic dim or constant) or IntLit


# ---- statements ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stmt(Node):
    pass


@dataclass(frozen=True)
class Let(Stmt):
    name: str
    type: TypeExpr | None
    value: Expr
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class LetMany(Stmt):
    """let a, b = VALUE: VALUE is a call that gives several values (a fn's `return a, b`) or a ValueList."""
    names: tuple[str, ...]
    value: Expr
    name_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Var(Stmt):
    name: str
    type: TypeExpr | None
    value: Expr | None
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class VarMany(Stmt):
    """var a, b = VALUE: as LetMany, the names mutable."""
    names: tuple[str, ...]
    value: Expr
    name_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Assign(Stmt):
    name: str
    op: str  # "=", "+=", ...
    value: Expr
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class AssignMany(Stmt):
    """a, b = VALUE (vars only, no op=): every value is computed before any var changes, as in Python."""
    names: tuple[str, ...]
    value: Expr
    name_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class LoopHint(Node):
    name: str  # "pipeline" | "unroll"
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]


@dataclass(frozen=True)
class For(Stmt):
    var: str
    iter: Expr
    hints: tuple[LoopHint, ...]
    body: tuple[Stmt, ...]
    name_span: Span | None = None  # the loop variable's name


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] | None


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None  # None: a bare `return`, which ends a kernel's program early


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr


# ---- declarations -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Import(Node):
    path: str


@dataclass(frozen=True)
class ConstDecl(Node):
    name: str
    value: Expr
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class FnParam(Node):
    name: str
    type: TypeExpr | None
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class Fn(Node):
    name: str
    params: tuple[FnParam, ...]
    body: tuple[Stmt, ...]
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class ConstParam(Node):
    name: str
    kind: str  # "int" | "float" | "bool" | "dtype"
    default: Expr | None
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class Param(Node):
    name: str
    type: TypeExpr
    name_span: Span | None = None  # the name alone, for diagnostics that point at it


@dataclass(frozen=True)
class TuneParam(Node):
    """One axis of a kernel's tuning space: `BM=[64, 128]`, `num_warps=[4, 8]`, `backend=[triton, tileir]`."""
    name: str
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Kernel(Node):
    name: str
    const_params: tuple[ConstParam, ...]
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    name_span: Span | None = None  # the name alone, for diagnostics that point at it
    tune: tuple[TuneParam, ...] = ()


@dataclass(frozen=True)
class Module(Node):
    file: str
    imports: tuple[Import, ...]
    consts: tuple[ConstDecl, ...]
    fns: tuple[Fn, ...]
    kernels: tuple[Kernel, ...]


def walk(node):
    """node and every node under it, parents first."""
    if isinstance(node, tuple):
        for n in node:
            yield from walk(n)
        return
    if not isinstance(node, Node):
        return
    yield node
    for f in fields(node):
        v = getattr(node, f.name)
        if isinstance(v, (Node, tuple)):
            yield from walk(v)


def dump(node, indent: int = 0) -> str:
    """A readable tree: one node per line, with its position, children indented."""
    pad = "  " * indent
    if isinstance(node, tuple):
        return "\n".join(dump(n, indent) for n in node)
    if not isinstance(node, Node):
        return pad + repr(node)
    scalars, children = [], []
    for f in fields(node):
        if f.name == "span" or f.name.endswith(("_span", "_spans")):
            continue
        v = getattr(node, f.name)
        if isinstance(v, Node) or (isinstance(v, tuple) and v and isinstance(v[0], Node)):
            children.append((f.name, v))
        elif not (isinstance(v, tuple) and not v) and v is not None:
            scalars.append(f"{f.name}={v!r}")
    sp = node.span
    head = f"{pad}{type(node).__name__} {' '.join(scalars)} @{sp.line}:{sp.col}".replace("  @", " @")
    lines = [head]
    for name, v in children:
        lines.append(f"{pad}  {name}:")
        lines.append(dump(v, indent + 2))
    return "\n".join(lines)
