"""A checked kernel: the output of tle/check.py and the input of lowering/ast_to_tle.py.

Every expression has its type; constants are folded; helper fns are inlined; implicit conversions
(broadcasts, splats, casts of mixed operands) are explicit `Op` nodes. So the lowering is a walk that maps each
node to IR without deciding anything about the language.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from .diagnostics import Span
from .types import Scalar, Tensor, Tile


@dataclass(eq=False)
class Variable:
    """A let, var, loop variable or scalar parameter. Identity matters (not the name): inlined fns get their own."""
    name: str
    type: Scalar | Tile
    span: Span
    mutable: bool = False
    depth: int = 0  # nesting depth (loops and ifs) where it was declared; decides what a loop or if carries


@dataclass(eq=False)
class TensorParam:
    name: str
    type: Tensor
    span: Span

    @property
    def param(self) -> "TensorParam":
        """The kernel's tensor parameter whose memory this addresses (a slice's, its parameter's)."""
        return self


@dataclass(eq=False)
class TensorSlice(TensorParam):
    """`slice(parent, start=[...], shape=[...])`: the window of `parent` (a tensor parameter or another slice) that
    starts at element `start` and has sizes `shape`, in the parent's strides. Memory ops address it as a tensor of
    its own (tile indices and bounds relative to the window). `name` is the let that binds it (for messages);
    `type.dims` holds an int where shape= is a compile-time constant and None where it is a runtime value, so no
    analysis takes it for a dim of a tensor parameter. A `slice` Op in an Eval statement defines it where it was
    written: the lowering builds its view there."""
    parent: TensorParam = None
    start: list = field(default_factory=list)  # one i32 Expr per axis
    shape: list = field(default_factory=list)  # one i32 Expr per axis

    @property
    def param(self) -> TensorParam:
        return self.parent.param


@dataclass(eq=False)
class Expr:
    span: Span
    type: Scalar | Tile


@dataclass(eq=False)
class Const(Expr):
    value: Any  # int | float | bool; the type says which dtype
    weak: bool = False  # a literal or untyped constant: takes the other operand's type in mixed operations


@dataclass(eq=False)
class Read(Expr):
    var: Variable


@dataclass(eq=False)
class Dim(Expr):
    """A symbolic dim of a tensor parameter (an i32 runtime value)."""
    name: str


@dataclass(eq=False)
class Combine:
    """The fn a `scan(..., combine=f)` or `reduce(..., combine=f)` combines elements with, checked for one call:
    `params` are 2N scalar variables (the earlier, or left, element's N values, then the later one's), `body` the
    Binds of the fn's lets, `results` its N returned values, of the N operands' element types. `identity` holds the
    N constants the call gave with identity=, or None. Every `scan`/`reduce` Op of one call holds the same object
    (one per result, told apart by attrs["index"]): the lowering builds the operation once."""
    fn: str
    span: Span  # the fn's name in its declaration
    params: list[Variable]
    body: list["Stmt"]
    results: list[Expr]
    identity: list | None = None


@dataclass(eq=False)
class Op(Expr):
    """An operation. `name` is one of OP_NAMES; `attrs` holds its compile-time parameters."""
    name: str
    args: list[Expr]
    attrs: dict = field(default_factory=dict)
    tensor: TensorParam | None = None  # for memory ops; for `slice`, the TensorSlice it defines (args: start, shape)


# Elementwise ops map one-to-one onto upstream arith/math; the rest onto tle ops.
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "rem", "pow", "atan2", "and", "or", "xor", "shl", "shr", "min", "max",
                      "eq", "ne", "lt", "le", "gt", "ge")
ELEMENTWISE_UNARY = ("neg", "not", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                     "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc", "log1p", "expm1", "tan",
                     "sinh", "cosh", "asin", "acos", "atan")
OTHER_OPS = ("where", "cast", "bitcast", "splat", "broadcast", "expand_dims", "reshape", "transpose", "join", "split",
             "arange",
             "program_id", "num_programs", "load", "store", "gather", "scatter", "atomic", "dot", "reduce", "scan",
             "histogram", "undef", "cdiv", "umulhi", "slice", "print", "assert", "tile_gather", "asm")
OP_NAMES = ELEMENTWISE_BINARY + ELEMENTWISE_UNARY + OTHER_OPS


@dataclass(eq=False)
class Stmt:
    span: Span


@dataclass(eq=False)
class Bind(Stmt):
    """let/var declaration or assignment: the variable now holds `value`."""
    var: Variable
    value: Expr


@dataclass(eq=False)
class Eval(Stmt):
    """An operation run for its effect (store, scatter, atomic whose result is unused)."""
    expr: Expr


@dataclass(eq=False)
class For(Stmt):
    var: Variable
    start: Expr
    stop: Expr
    step: Expr
    body: list[Stmt]
    carried: list[Variable]  # variables from outside the loop assigned in it, in first-assignment order
    stages: int | None = None
    unroll: int | None = None


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt]
    carried: list[Variable]  # variables from outside assigned in either branch


@dataclass
class Kernel:
    name: str
    span: Span
    params: list[TensorParam | Variable]  # in declaration order
    dims: dict[str, Span]  # symbolic dims, first appearance
    constants: dict[str, Any]
    body: list[Stmt]
    file: str = ""


def nodes(stmts: list[Stmt]) -> Iterator[Stmt | Op]:
    """Every statement and operation of a body in program order: a statement's operations (each after its
    arguments) come before the statement itself, and a loop's or an if's body follows it. For analyses over a
    checked kernel (tle/abi.py grid_tiles, tle/compiler.py default_num_warps)."""
    def ops(e: Expr) -> Iterator[Op]:
        if isinstance(e, Op):
            for a in e.args:
                yield from ops(a)
            yield e
    for s in stmts:
        if isinstance(s, Bind):
            yield from ops(s.value)
            yield s
        elif isinstance(s, Eval):
            yield from ops(s.expr)
            yield s
        elif isinstance(s, For):
            for x in (s.start, s.stop, s.step):
                yield from ops(x)
            yield s
            yield from nodes(s.body)
        elif isinstance(s, If):
            yield from ops(s.cond)
            yield s
            yield from nodes(s.then)
            yield from nodes(s.orelse)


def uses(kernel: "Kernel") -> tuple[set, set]:
    """(names of the tensor parameters some operation addresses, names of the dims read as values): what a launch
    must give. A tensor that no operation reads or writes under the kernel's constants (its only use in a branch
    of an if on a constant that is not taken) may be passed as None."""
    tensors, dims = set(), set()
    for n in nodes(kernel.body):  # every operation, nested ones too: a dim is read where something takes it whole
        if isinstance(n, Op):
            taken = n.args
            if n.tensor is not None:
                tensors.add(n.tensor.param.name)
        elif isinstance(n, For):
            taken = (n.start, n.stop, n.step)
        elif isinstance(n, If):
            taken = (n.cond,)
        else:
            taken = (n.value,) if isinstance(n, Bind) else (n.expr,)
        dims.update(e.name for e in taken if isinstance(e, Dim))
    return tensors, dims


def dots(stmts: list[Stmt]) -> Iterator[Op]:
    """The `dot` operations of a body, in program order (nodes)."""
    return (n for n in nodes(stmts) if isinstance(n, Op) and n.name == "dot")
