"""Checking: names, types and tile shapes, before any IR is built.

Entry points:
- `load_program(source, filename)` parses a file and the files it imports and checks what needs no constants
  (duplicate declarations, parameter types, import cycles) -> Program.
- `check_kernel(program, name, constants) -> typed.Kernel` checks one kernel for one set of compile-time
  constants: every expression gets a type and a static tile shape, helper fns are inlined, constants folded,
  implicit broadcasts and casts made explicit. Every mistake is a TleError at its source span.

What a name denotes while checking: a kernel or fn-local name maps to a typed.Variable (a run-time value), a
typed.Const (a `let` of a compile-time constant, or a fn parameter given one: these fold and can size tiles), a
TensorParam, a Dim, a compile-time constant's Python value, or a _DtypeConst. docs/language.md is the contract.
"""
from __future__ import annotations

import difflib
import math
import numbers
import os
import re
from dataclasses import dataclass, field, replace

from . import ast
from . import bitonic
from . import philox
from . import typed as T
from .diagnostics import NetworkSpan, Note, Span, TleError, warn
from .parser import parse
from .types import (BITS, DTYPES, FLOATS, MAX_COMBINED, MAX_TILE_ELEMENTS, Scalar, Tensor, Tile, broadcast_shapes,
                    canonical, is_f8, is_float, is_int, overflow_error, overflows, promote, round_f8, wrap)

CONST_KINDS = ("int", "float", "bool", "dtype")
BUILTIN_CONSTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi}
# histogram(): Triton's tt.histogram sums its warps' counts in shared memory (4 bytes a bin), and each thread counts
# B / 32 bins for every 32 values, so its code grows with B. sm_90, a 1024-value tile on 4 warps: 4096 bins compiled
# in 2 s, 16384 in 6 s (64 KB of shared memory, which sm_80 and sm_86 have too), 65536 in 58 s, and 256 KB of shared
# memory is more than any of them has.
HISTOGRAM_MAX_BINS = 1 << 14


@dataclass
class Program:
    """A parsed and module-checked .tle file with everything it imports."""
    file: str
    kernels: dict[str, ast.Kernel] = field(default_factory=dict)
    fns: dict[str, ast.Fn] = field(default_factory=dict)
    consts: dict[str, ast.ConstDecl] = field(default_factory=dict)
    const_values: dict[str, object] = field(default_factory=dict)
    source: str = ""
    # check_kernel's results: (kernel, constants, wide dims) -> tle.typed.Kernel, which no later stage changes
    checked: dict = field(default_factory=dict, repr=False, compare=False)

    def kernel_names(self) -> list[str]:
        return [n for n, k in self.kernels.items() if k.span.file == self.file]


def load_program(source: str, filename: str = "<string>") -> Program:
    """Parse `source` (the text of `filename`) and its imports; check module-level declarations."""
    return _load(source, filename, (), {})


def _load(source: str, filename: str, chain: tuple[str, ...], loaded: dict[str, "Program"]) -> Program:
    """`chain`: the absolute paths of the files importing this one (for cycles). `loaded`: files already read, so
    a file imported twice (a diamond) gives the same declarations, not a redefinition."""
    module = parse(source, filename)
    prog = Program(filename, source=source)
    here = os.path.abspath(filename)
    for imp in module.imports:
        base = os.path.dirname(here) if os.path.exists(filename) else os.getcwd()
        path = os.path.normpath(os.path.join(base, imp.path))
        files = chain + (here,)
        if path in files:
            cycle = [os.path.basename(f) for f in files[files.index(path):]] + [os.path.basename(path)]
            raise TleError(imp.span, f"import cycle: {' -> '.join(cycle)}",
                           ["move what both files need into a third file that imports neither"])
        sub = loaded.get(path)
        if sub is None:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise TleError(imp.span, f"cannot import '{imp.path}': {e.strerror}",
                               [f"looked for {path}; an import path is relative to the importing file"]) from None
            try:
                sub = loaded[path] = _load(text, path, files, loaded)
            except TleError as err:  # like a C compiler's "in file included from"
                err.notes.append(Note(f"in '{imp.path}', imported here", imp.span))
                raise
        for table in ("kernels", "fns", "consts"):
            for name, decl in getattr(sub, table).items():
                _declare(prog, table, name, decl)
        prog.const_values.update(sub.const_values)
    for c in module.consts:
        _declare(prog, "consts", c.name, c)
        prog.const_values[c.name] = _const_value(c.value, prog.const_values, {})
    for f in module.fns:
        _declare(prog, "fns", f.name, f)
        _check_fn_signature(f)
    for k in module.kernels:
        _declare(prog, "kernels", k.name, k)
        _check_kernel_signature(k)
    return prog


def _splatted(e: T.Expr) -> bool:
    """Whether a tile is a scalar made a tile (an operand of `t / N` after coercion), through casts."""
    while isinstance(e, T.Op) and e.name == "cast":
        e = e.args[0]
    return isinstance(e, T.Op) and e.name == "splat"


def _name_span(decl) -> Span:
    return getattr(decl, "name_span", None) or decl.span


def _declare(prog: Program, table: str, name: str, decl) -> None:
    for other_table in ("kernels", "fns", "consts"):
        prev = getattr(prog, other_table).get(name)
        if prev is not None and prev is not decl:
            raise TleError(_name_span(decl), f"redefinition of '{name}'",
                           [Note(f"'{name}' was first defined here", _name_span(prev))])
    if table != "kernels" and (name in BUILTINS or name in RESERVED):  # kernels are never called by name
        raise TleError(_name_span(decl), _taken(name))
    getattr(prog, table)[name] = decl


_BROADCAST_NOTE = ["sizes must match, or be 1, axis by axis from the right (numpy rules); reshape or expand_dims one "
                   "side, or reduce with keepdims=true"]


def _taken(name: str) -> str:
    """Why a declaration cannot take this name (a builtin function, an element type, a builtin constant, range)."""
    if name in BUILTIN_CONSTS:
        return f"'{name}' is a builtin constant and cannot be redefined"
    if canonical(name) is not None:
        other = " (bool's other spelling)" if name == "i1" else ""
        return f"'{name}' is an element type{other} and cannot name anything else (rename it: {name}_)"
    return f"'{name}' is a builtin and cannot be redefined (rename it: {name}_, {name}s)"


def _check_unique(decls, what):
    seen = {}
    for d in decls:
        if d.name in BUILTINS or d.name in RESERVED:
            raise TleError(_name_span(d), _taken(d.name))
        if d.name in seen and d.name != DISCARD:
            raise TleError(_name_span(d), f"duplicate {what} '{d.name}'",
                           [Note("first declared here", _name_span(seen[d.name]))])
        seen[d.name] = d


def _check_fn_signature(f: ast.Fn) -> None:
    _check_unique(f.params, "parameter")
    for p in f.params:
        if isinstance(p.type, ast.TensorTypeExpr):
            raise TleError(p.type.span, f"fn parameter '{p.name}' cannot have a tensor type",
                           [f"leave it untyped (fn {f.name}({p.name}, ...)) and pass the tensor; fns are inlined"])


TUNE_OPTIONS = {"num_warps": "int", "num_stages": "int", "backend": "backend", "occupancy": "int"}
TUNE_BACKENDS = ("triton", "tileir")
# The occupancy hint's values, wherever one is given (tune clause, TuneSpace, launch option, tlec --occupancy):
# programs per SM, up to the 32 CTAs an SM holds.
OCCUPANCIES = range(1, 33)


def tuning_space(k: ast.Kernel) -> dict[str, list]:
    """The kernel's `tune(...)` clause as {name: [values]}: constants take values of their kind, num_warps a
    power of two from 1 to 32, num_stages 1 to 8, occupancy 1 to 32, backend triton or tileir. Checked when the
    file loads."""
    consts = {c.name: c for c in k.const_params}
    space: dict[str, list] = {}
    for t in k.tune:
        if t.name in space:
            raise TleError(t.span, f"'{t.name}' appears twice in tune(...)")
        kind = consts[t.name].kind if t.name in consts else TUNE_OPTIONS.get(t.name)
        if kind is None:
            raise TleError(t.span, f"tune(...) can vary compile-time constants and num_warps, num_stages, backend, "
                                   f"occupancy; '{t.name}' is none of them",
                           _suggest(t.name, list(consts) + list(TUNE_OPTIONS)))
        values = []
        for v in t.values:
            if isinstance(v, ast.Name):
                value = v.id
                ok = kind in ("dtype", "backend") and (canonical(value) is not None if kind == "dtype"
                                                       else value in TUNE_BACKENDS)
            else:
                value = v.value
                ok = {"int": isinstance(value, int) and not isinstance(value, bool),
                      "float": isinstance(value, (int, float)) and not isinstance(value, bool),
                      "bool": isinstance(value, bool)}.get(kind, False)
            if ok and t.name == "num_warps":
                ok = value in (1, 2, 4, 8, 16, 32)
            if ok and t.name == "num_stages":
                ok = 1 <= value <= 8
            if ok and t.name == "occupancy":
                ok = value in OCCUPANCIES
            if not ok:
                want = {"backend": "triton or tileir", "dtype": "an element type", "int": "an int",
                        "float": "a number", "bool": "true or false"}[kind]
                extra = {"num_warps": " (a power of two from 1 to 32)", "num_stages": " (1 to 8)",
                         "occupancy": " (programs per SM, 1 to 32)"}.get(t.name, "")
                raise TleError(v.span, f"tune value for '{t.name}' must be {want}{extra}")
            if value in values:
                raise TleError(v.span, f"tune value {value!r} for '{t.name}' is listed twice")
            values.append(canonical(value) if kind == "dtype" else value)
        space[t.name] = values
    return space


def _check_kernel_signature(k: ast.Kernel) -> None:
    _check_unique(k.const_params + k.params, "parameter")
    tuning_space(k)
    names = [c.name for c in k.const_params] + [p.name for p in k.params]
    consts = {c.name: c for c in k.const_params}
    for c in k.const_params:
        if c.kind not in CONST_KINDS:
            raise TleError(c.span, f"unknown kind '{c.kind}' for compile-time constant '{c.name}'",
                           [f"kinds are {', '.join(CONST_KINDS)}"] + _suggest(c.kind, CONST_KINDS))
    for p in k.params:
        t = p.type
        if isinstance(t, ast.TileTypeExpr):
            raise TleError(t.span, f"parameter '{p.name}' cannot be a tile; kernels take tensors and scalars",
                           [f"write {p.name}: tensor<{t.dtype}>[...] and load tiles from it"])
        dtype = t.dtype
        if canonical(dtype) is None and not (dtype in consts and consts[dtype].kind == "dtype"):
            raise TleError(t.span, f"unknown element type '{dtype}'", _suggest_dtype(dtype))
        if isinstance(t, ast.TensorTypeExpr):
            for d in t.dims:
                if isinstance(d, ast.Name) and d.id in names and d.id not in consts:
                    raise TleError(d.span, f"dim '{d.id}' has the name of a parameter",
                                   [_SIZE_PARAMETER.format(d=d.id)])
                if isinstance(d, ast.IntLit) and d.value <= 0:
                    raise TleError(d.span, "a tensor dim must be positive")


def _all_dtypes():
    return tuple("bool" if d == "i1" else d for d in DTYPES)


# Names torch and numpy give element types (str(torch.float16) is "torch.float16"; a numpy dtype prints "float16").
_FOREIGN_DTYPES = {"float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32",
                   "float64": "f64", "double": "f64", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                   "bool": "i1", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def dtype_of(v) -> str | None:
    """The tle element type a constant's value names: 'f16', 'float16', torch.float16, numpy.float16 ... or None."""
    text = str(v).removeprefix("torch.")
    return canonical(text) or _FOREIGN_DTYPES.get(text)


# Triton's masked tl.load / tl.store at computed offsets is gather / scatter in tle: load and store move whole tiles
# by tile index, and take no mask.
_ELEMENTWISE_MEMORY = {
    ("load", "mask"): ["load() reads a whole tile at a tile index (bounds checked); to read elements at computed "
                       "indices, masked, write gather(x, indices, mask=..., other=...)"],
    ("load", "other"): ["load() pads a tile with pad=...; gather(x, indices, mask=..., other=...) reads elements"],
    ("store", "mask"): ["store() writes a whole tile at a tile index (bounds checked); to write elements at computed "
                        "indices, masked, write scatter(x, indices, value, mask=...)"],
}


# Python's names for what tle spells otherwise.
DISCARD = "_"  # `let a, _ = f(x)`: a name that binds nothing

_PYTHON_NAMES = {
    DISCARD: ["`_` discards a value in a let, a var or an assignment (`let a, _ = split(t)`); it holds nothing to "
              "read"],
    "True": ["tle writes true and false"], "False": ["tle writes true and false"],
    "None": ["tle has no None: an absent mask is no mask= at all, an unused value is not written"],
}


# Triton's, torch's and Python's calls that tle spells otherwise (difflib would suggest 'load' for 'float').
_TRITON_CALLS = {
    "maximum": ["write max(a, b)"], "minimum": ["write min(a, b)"],
    "trans": ["write transpose(x)"], "permute": ["write transpose(x, perm=[...])"], "view": ["write reshape(x, [...])"],
    "broadcast_to": ["write broadcast(x, [...])"], "float": ["convert with cast<f32>(x)"],
    "int": ["convert with cast<i32>(x)"], "bool": ["compare: x != 0"], "zeros_like": ["write zeros<T>[...]"],
    "full_like": ["write full<T>[...](value)"], "fdiv": ["write a / b"], "div_rn": ["write a / b"],
    "sqrt_rn": ["write sqrt(x)"],
    "softmax": ["write it out: exp(x - max(x, axis=1, keepdims=true)) over its sum (examples/softmax.tle)"],
    "associative_scan": ["write scan(x, ..., axis=A, combine=f): f a fn of the earlier and the later element's "
                         "values (docs/language.md, \"Reductions and scans\")"],
    "softplus": ["write where(x > 20.0, x, log1p(exp(x)))"],
    "pow": ["write x ** y"], "power": ["write x ** y"],
    "concatenate": ["write cat(a, b, ..., axis=A) (or concat), as numpy.concatenate and torch.cat"],
    "hstack": ["write cat(a, b, ..., axis=1), or axis=0 for 1-D tiles"],
    "vstack": ["write cat(a, b, ..., axis=0) of 2-D tiles, stack(a, b, ..., axis=0) of 1-D ones"],
    "interleave": ["write reshape(join(a, b), [2 * N]) for two [N] tiles (cat(a, b) puts b after a)"],
    "unbind": ["write take(t, k, axis=A) for each k; split(t) takes apart a last axis of 2"],
    "select": ["write take(t, k, axis=A) (numpy.take, torch.select: the index k of axis A)"],
}
_TRITON_CALLS["unstack"] = _TRITON_CALLS["unbind"]
_TRITON_CALLS["index_select"] = ["write take(t, k, axis=A) for one index; gather(t, indices, axis=A) for a tile of "
                                 "them"]


_SIZE_PARAMETER = ("a launch reads {d} off the tensors' shapes (Triton's kernels take sizes and strides; tle's do "
                   "not): drop the parameter {d}, or name the dim otherwise")

# Calls given more positional arguments than they take, as Triton's and numpy's spelling would: what was meant.
_EXTRA_POSITIONAL = {
    "load": ["load() reads a tile by tile index: load(x, tile=[BLOCK], at=program_id(0)); to read at element "
             "offsets (Triton's tl.load(ptr + offs, mask=m)), write gather(x, offs, mask=m)"],
    "store": ["store() writes a tile at a tile index: store(y, t, at=program_id(0)); at element offsets, write "
              "scatter(y, offs, t, mask=m)"],
    "max": ["max() takes one tile (a reduction) or two values (elementwise); to clamp, write clamp(t, lo, hi)"],
    "min": ["min() takes one tile (a reduction) or two values (elementwise); to clamp, write clamp(t, lo, hi)"],
}


def _python_float(e: ast.Call) -> list[str]:
    """Python's float("inf"), float("-inf") and float("nan"), which tle writes as the builtin constants."""
    if e.func != "float" or len(e.args) != 1 or e.kwargs or not isinstance(e.args[0], ast.StrLit):
        return []
    text = e.args[0].value.strip().lower()
    spelled = {"inf": "inf", "+inf": "inf", "infinity": "inf", "-inf": "-inf", "-infinity": "-inf", "nan": "nan",
               "+nan": "nan", "-nan": "nan"}.get(text)
    return [f"write {spelled}: tle's float constants are inf and nan (a float literal)"] if spelled else []


def _suggest(name: str, candidates) -> list[str]:
    close = difflib.get_close_matches(name, [c for c in candidates if c != name], n=1)
    return [f"did you mean '{close[0]}'?"] if close else []


# Other languages' names for tle's keyword arguments and element types (torch's, numpy's, Triton's, C's): an
# unknown one that is among them gets tle's spelling, which no edit distance would find.
_KEYWORD_SYNONYMS = {"dim": "axis", "dims": "axis", "padding_option": "pad", "offsets": "at", "block_shape": "tile"}
_DTYPE_SYNONYMS = {"float": "f32", "float32": "f32", "fp32": "f32", "double": "f64", "float64": "f64",
                   "fp64": "f64", "half": "f16", "float16": "f16", "fp16": "f16", "bfloat16": "bf16",
                   "int": "i32", "int32": "i32", "long": "i64", "int64": "i64", "short": "i16", "int16": "i16",
                   "int8": "i8", "char": "i8", "int1": "bool", "i1": "bool", "float8_e4m3fn": "f8e4m3",
                   "fp8e4nv": "f8e4m3", "float8e4nv": "f8e4m3", "float8_e5m2": "f8e5m2", "fp8e5": "f8e5m2"}


def _suggest_keyword(name: str, candidates) -> list[str]:
    tle_name = _KEYWORD_SYNONYMS.get(name)
    if tle_name in candidates:
        return [f"tle calls it '{tle_name}': write {tle_name}=..."]
    return _suggest(name, candidates)


def _suggest_dtype(name: str) -> list[str]:
    key = name.strip().lower()  # 'F32' and 'f32 ' are f32, not (by edit distance) i32
    if key != name and canonical(key):
        return [f"tle spells it {canonical(key)}"]
    name = key
    if re.fullmatch(r"c(omplex)?(32|64|128)", name):
        return ["tle has no complex types: declare the tensor <f32>[..., 2] (or f16, f64) and pass "
                "torch.view_as_real(z), its {re, im} pairs; split(t) gives the two parts"]
    if name in _DTYPE_SYNONYMS:
        return [f"tle spells it {_DTYPE_SYNONYMS[name]}"]
    if re.fullmatch(r"u(int)?(8|16|32|64)", name):
        bits = re.sub(r"\D", "", name)
        return [f"tle has no unsigned types: declare i{bits} and pass the tensor as .view(torch.int{bits}); the "
                f"bits are the same, and integer ops wrap as unsigned ones do (widen before comparing or dividing: "
                f"cast<i64>(x) & 0x{(1 << int(bits)) - 1:X})" if bits != "64" else
                "tle has no unsigned types: declare i64 and pass the tensor as .view(torch.int64)"]
    return _suggest(name, _all_dtypes())


def _a(t) -> str:
    """'a' or 'an' before a type's name: an i32, an f16, a bf16, a tile<f32>[4]."""
    return f"{'an' if str(t)[:1] in 'if' else 'a'} {t}"


def _const_value(e: ast.Expr, consts: dict, kernel_consts: dict):
    """Evaluate a compile-time constant expression (module consts and the defaults of kernel constants)."""
    if isinstance(e, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
        return e.value
    if isinstance(e, ast.Name):
        for table in (kernel_consts, consts, BUILTIN_CONSTS):
            if e.id in table:
                return table[e.id]
        raise TleError(e.span, f"unknown name '{e.id}' in a constant expression",
                       _PYTHON_NAMES.get(e.id) or _suggest(e.id, [*kernel_consts, *consts, *BUILTIN_CONSTS]))
    if isinstance(e, ast.UnaryOp) and e.op in ("-", "~"):
        v = _const_value(e.operand, consts, kernel_consts)
        if isinstance(v, bool) or (e.op == "~" and not isinstance(v, int)) or isinstance(v, str):
            raise TleError(e.span, f"'{e.op}' cannot be applied to {v!r} in a constant expression")
        return -v if e.op == "-" else ~v
    if isinstance(e, ast.BinOp) and e.op in _CONST_OPS:
        a, b = _const_value(e.lhs, consts, kernel_consts), _const_value(e.rhs, consts, kernel_consts)
        for v, side in ((a, e.lhs), (b, e.rhs)):
            if isinstance(v, (bool, str)) or (e.op in _INT_OPS and not isinstance(v, int)):
                raise TleError(side.span, f"'{e.op}' cannot be applied to {v!r} in a constant expression")
        return _fold_arith(e.op, a, b, e.span)
    if isinstance(e, ast.Call) and e.func in _CONST_FUNCS and len(e.args) == _CONST_FUNCS[e.func] and not e.kwargs:
        args = [_const_value(a, consts, kernel_consts) for a in e.args]
        return _const_call(e.func, args, e)
    raise TleError(e.span, "a constant must be a number, a boolean or arithmetic on constants",
                   (_python_float(e) if isinstance(e, ast.Call) else []) +
                   [f"allowed operators: {' '.join(_CONST_OPS)}; functions: {', '.join(_CONST_FUNCS)}"])


_CONST_FUNCS = {"next_pow2": 1, "cdiv": 2}  # the builtins a constant's default may call (and how many arguments)


def _const_call(func: str, args: list, e: ast.Call):
    """next_pow2(n) or cdiv(a, b) of compile-time integers."""
    for v, src in zip(args, e.args):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TleError(src.span, f"{func}() needs compile-time integers, got {v!r}")
    if func == "next_pow2":
        if args[0] < 1:
            raise TleError(e.args[0].span, f"next_pow2() needs a positive integer, got {args[0]}")
        return 1 << (args[0] - 1).bit_length()
    if args[1] == 0:
        raise TleError(e.args[1].span, "cdiv() by zero")
    return -(-args[0] // args[1])


_INT_OPS = ("<<", ">>", "&", "|", "^")
_CONST_OPS = ("+", "-", "*", "/", "%", "**") + _INT_OPS


def _fold_arith(op: str, a, b, span: Span):
    """a op b at compile time, with the run-time meaning: integer / and % truncate toward zero, like C."""
    if op in "/%" and isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise TleError(span, "division by zero in a constant expression")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "/" else a - q * b
    try:
        r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
             "%": lambda: math.fmod(a, b), "**": lambda: float(a) ** float(b), "<<": lambda: a << b,
             ">>": lambda: a >> b, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b}[op]()
    except ZeroDivisionError:
        raise TleError(span, "division by zero in a constant expression") from None
    except (ValueError, OverflowError) as err:  # fmod(x, 0.0), a negative shift count, 10.0 ** 400
        raise TleError(span, f"'{op}' is undefined for {a!r} and {b!r} ({err})") from None
    if isinstance(r, complex):
        raise TleError(span, f"{a!r} ** {b!r} is not a real number")
    return r


def _cast_const(v, dtype: str, span: Span):
    """cast<dtype>(v) of a constant, as at run time: to bool is v != 0; float to int truncates toward zero; an
    integer that does not fit wraps around."""
    if dtype == "i1":
        return v != 0
    if is_f8(dtype):
        return round_f8(float(v), dtype)
    if is_float(dtype):
        return float(v)
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            raise TleError(span, f"cannot convert {v} to the integer type {dtype}")
        v = int(v)
    return wrap(int(v), dtype)


def _int_literal_type(v: int, span: Span) -> str:
    if -(2 ** 31) <= v < 2 ** 31:
        return "i32"
    if -(2 ** 63) <= v < 2 ** 64:
        return "i64"
    raise TleError(span, f"integer constant {v} does not fit in 64 bits")


def _range_arguments(it: ast.Call) -> None:
    """range(...) and static_range(...) take 1 to 3 positional arguments: (stop), (start, stop), (start, stop, step)."""
    if it.kwargs:
        raise TleError(it.kwargs[0].span, f"{it.func}() takes positional arguments only")
    if not 1 <= len(it.args) <= 3:
        raise TleError(it.span, f"{it.func}() takes 1 to 3 arguments (stop, start and stop, or start, stop and "
                                f"step), got {len(it.args)}")


# ---- the kernel checker ----------------------------------------------------------------------------------------
class _Scope:
    """Names visible in a block: what each one is, and where it was declared (for 'first defined here' notes)."""

    def __init__(self, parent=None):
        self.names: dict[str, object] = {}
        self.spans: dict[str, Span] = {}
        self.parent = parent

    def add(self, name: str, value, span: Span | None) -> None:
        self.names[name] = value
        if span is not None:
            self.spans[name] = span

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def span_of(self, name) -> Span | None:
        s = self
        while s is not None:
            if name in s.names:
                return s.spans.get(name)
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


def _is_return(s, value: bool) -> bool:
    """A fn's `return EXPR` (value) or a kernel's bare `return`."""
    return isinstance(s, ast.Return) and (s.value is not None) == value


def _has_return(stmts, value: bool) -> bool:
    return any(_is_return(s, value)
               or isinstance(s, ast.If) and (_has_return(s.then, value) or _has_return(s.orelse or (), value))
               or isinstance(s, ast.For) and _has_return(s.body, value) for s in stmts)


def _ends(stmts, value: bool) -> bool:
    """Does every path through these statements end in a return (a fn's `return EXPR` where value, else bare)?"""
    last = stmts[-1] if stmts else None
    return _is_return(last, value) or isinstance(last, ast.If) and last.orelse is not None and \
        _ends(last.then, value) and _ends(last.orelse, value)


def _rest_into_if(s: ast.If, rest: tuple, value: bool) -> tuple[tuple, tuple]:
    """The branches of `s` with `rest`, the statements after it, added to each branch not every path of which
    returns (an absent else is such a branch): rest runs where s does not return."""
    if rest and _ends((s,), value):
        raise TleError(rest[0].span, "this statement follows a return on every path and never runs")
    then = tuple(s.then) + (() if _ends(s.then, value) else rest)
    orelse = tuple(s.orelse or ()) + (() if s.orelse is not None and _ends(s.orelse, value) else rest)
    return then, orelse


def _early_returns(stmts, loop: ast.For | None = None) -> tuple:
    """A kernel's statements with each bare `return` (the program ends there, as Triton's `if ...: return`) turned
    into structure, so that the later stages see no return: the statements after an `if` whose branch returns move
    into the paths through it that do not (into both branches when a return lies deeper in one; those statements
    are then compiled once per path), and the return itself goes. A return inside a loop cannot end the program
    from there (a loop runs every step), and a statement after a return would never run: both are errors."""
    out = []
    for i, s in enumerate(stmts):
        rest = tuple(stmts[i + 1:])
        if _is_return(s, False):
            if loop is not None:
                raise TleError(s.span, "a return cannot leave a loop",
                               [Note("the loop is here", loop.span),
                                "a loop runs every step: make the steps after this one do nothing with an `if`, "
                                "or end the loop's range there"])
            if rest:
                raise TleError(rest[0].span, "this statement follows a return and never runs",
                               [Note("the return", s.span)])
            return tuple(out)
        if isinstance(s, ast.For):
            out.append(replace(s, body=_early_returns(s.body, s)))
            continue
        if isinstance(s, ast.If) and loop is None and _has_return((s,), False):
            then, orelse = _rest_into_if(s, rest, False)
            out.append(replace(s, then=_early_returns(then), orelse=_early_returns(orelse) if orelse else None))
            return tuple(out)
        if isinstance(s, ast.If):
            s = replace(s, then=_early_returns(s.then, loop),
                        orelse=None if s.orelse is None else _early_returns(s.orelse, loop))
        out.append(s)
    return tuple(out)


def _last_return(stmts) -> ast.Return:
    """The return that ends these statements' first path (for spans)."""
    last = stmts[-1]
    return last if isinstance(last, ast.Return) else _last_return(last.then)


def _tail_returns(stmts) -> tuple:
    """A fn's statements with each `return EXPR` inside an `if` (`if x < 0 { return -x }`) brought to the end:
    the statements after such an if move into the paths through it that do not return (into both branches where
    a return lies deeper in one), so the body ends in an if whose every branch ends in a return, which the check
    turns into the values both branches bind (_KernelChecker.tail_if). Returns elsewhere keep their errors."""
    out = []
    for i, s in enumerate(stmts):
        rest = tuple(stmts[i + 1:])
        if isinstance(s, ast.If) and rest and _has_return((s,), True):
            then, orelse = _rest_into_if(s, rest, True)
            out.append(replace(s, then=_tail_returns(then), orelse=_tail_returns(orelse)))
            return tuple(out)
        if isinstance(s, ast.If) and not rest:
            s = replace(s, then=_tail_returns(s.then), orelse=None if s.orelse is None else _tail_returns(s.orelse))
        out.append(s)
    return tuple(out)


def check_kernel(program: Program, name: str, constants: dict | None = None, wide_dims=frozenset()) -> T.Kernel:
    """`wide_dims`: the dims a launch puts past 2**31 - 1 (tle/abi.py WideDim). Their values are i64 in this
    check, so what the kernel computes from them is too (`i < N` compares in 64 bits, `range(N)` counts in
    64); every other dim is i32."""
    k = program.kernels.get(name)
    if k is None:
        raise TleError(Span(program.file, 0, 0), f"no kernel named '{name}' in {program.file}",
                       _suggest(name, program.kernels) or [f"kernels: {', '.join(program.kernels) or 'none'}"])
    wide_dims = frozenset(wide_dims)
    try:
        checker = _KernelChecker(program, k, dict(constants or {}), wide_dims)
        # One check per kernel and resolved constants: tle.compile, a launch, the compiler and tlec all ask for it
        key = (name, tuple(sorted(checker.resolve_constants().items())), wide_dims)
        checked = program.checked.get(key)
        if checked is None:
            checked = checker.run()
            _warn_if_it_writes_nothing(checked)
            if len(program.checked) >= _MAX_CHECKED:  # a tuning's many configurations: drop the oldest
                del program.checked[next(iter(program.checked))]
            program.checked[key] = checked
        return checked
    except TleError as e:
        if wide_dims and "i64" in e.message:  # an error only this launch's sizes cause: say where the i64 is from
            names = ", ".join(f"'{d}'" for d in sorted(wide_dims))
            dims, are, values, them = ("dims", "are", "their values are", "them") if len(wide_dims) > 1 else \
                ("dim", "is", "its value is", "it")
            e.notes.append(Note(f"in this launch the {dims} {names} {are} past 2^31 - 1, so {values} i64, and so is "
                                f"what is computed from {them}"))
        raise


_MAX_CHECKED = 256  # checked kernels a Program keeps (check_kernel)

# What a kernel can do that outlives it: write memory, print, stop on a failed assert (inline PTX may do anything)
_EFFECTS = ("store", "scatter", "atomic", "print", "assert", "asm")


def warn_uncalled_fns(program: Program) -> None:
    """A TleWarning for each fn of the program's own file that none of its kernels reaches (through calls, combine=
    and other fns): a fn is checked only at a call, with its arguments' types, so a mistake in an uncalled one (a
    typo in a name) says nothing. A file without kernels (a library others import) gets none."""
    own = [k for k in program.kernels.values() if k.span.file == program.file]
    if not own:
        return
    reached: set[str] = set()
    todo = [k.body for k in own]
    while todo:
        for node in ast.walk(todo.pop()):
            name = node.func if isinstance(node, ast.Call) else node.id if isinstance(node, ast.Name) else None
            if name in program.fns and name not in reached:
                reached.add(name)
                todo.append(program.fns[name].body)
    for fn in program.fns.values():
        if fn.name not in reached and fn.span.file == program.file:
            warn(fn.name_span or fn.span, f"fn '{fn.name}' is called by no kernel of this file, so its body is "
                                          f"never checked", [Note("a fn is checked where it is called, with its "
                                                                  "arguments' types (docs/language.md, 'fn')")])


def _warn_if_it_writes_nothing(kernel: T.Kernel) -> None:
    """A TleWarning for a kernel that writes nothing under its constants: it has no effect at all, and the GPU
    compilers drop its loads (a store forgotten, or left under an if whose condition is a false constant)."""
    ops = [n for n in T.nodes(kernel.body) if isinstance(n, T.Op)]
    if any(op.name in _EFFECTS for op in ops):
        return
    reads = [op for op in ops if op.name in ("load", "gather")]
    notes = [Note("write a tile with store(y, t, at=...), or elements with scatter(y, offsets, t)")]
    if reads:
        notes.insert(0, Note(f"it reads '{reads[0].tensor.param.name}' here, and what it computes goes nowhere",
                             reads[0].span))
    if kernel.constants:
        shown = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in kernel.constants.items())
        notes.append(Note(f"with its constants as given ({shown}): a store under an if on a constant counts only "
                          f"where the constant takes that branch"))
    warn(kernel.span, f"kernel '{kernel.name}' writes nothing: it has no store, scatter or atomic, so running it "
                      f"has no effect{' (the GPU compilers drop its loads as well)' if reads else ''}", notes)


def _no_float_overflow(body: list) -> None:
    """A float constant the program computes with is finite where it was written finite: a literal takes its
    context's type (checked there) or stays f32 (checked here), and folding can pass the largest value."""
    for n in T.nodes(body):
        for c in (n.args if isinstance(n, T.Op) else [getattr(n, "value", None), getattr(n, "expr", None)]):
            if isinstance(c, T.Const) and is_float(c.type.dtype) and not isinstance(c.value, bool) and \
                    overflows(float(c.value), c.type.dtype):
                raise overflow_error(c.span, float(c.value), c.type.dtype)


# The element types each atomic takes: those both GPU paths lower (bitwise ones and compare-and-swap on integers;
# a float exchange swaps bits).
ATOMIC_DTYPES = {"add": ("f16", "bf16", "f32", "f64", "i32", "i64"), "max": ("i32", "i64", "f32"),
                 "min": ("i32", "i64", "f32"), "and": ("i32", "i64"), "or": ("i32", "i64"), "xor": ("i32", "i64"),
                 "xchg": ("i32", "i64", "f32"), "cas": ("i32", "i64")}


_MAX_FIXED_DIM = 2 ** 31 - 1  # a size the kernel holds as an i32 constant


def _integral(f):
    """floor, ceil, round (half to even) or trunc of a float constant as the GPU computes it: infinities and NaN
    stay what they are, and a zero result keeps the operand's sign (round(-0.3) is -0.0)."""
    return lambda v: v if not math.isfinite(v) else math.copysign(float(f(v)), v)


class _KernelChecker:
    def __init__(self, program: Program, kernel: ast.Kernel, constants: dict, wide_dims=frozenset()):
        self.p = program
        self.k = kernel
        self.given = constants
        self.wide_dims = wide_dims
        self.out: list[T.Stmt] = []
        self.frames: list[_Frame] = []
        self.fn_stack: list[str] = []
        self.what: dict[T.Variable, str] = {}  # how immutable variables were declared, for assignment errors
        # each loop variable's range(): (its step if a constant, the stop as written), for tile_indices' check
        self.loop_ranges: dict[T.Variable, tuple] = {}
        # loads whose tile= writes a literal 1 on some axes (those axes), and lets' values: for _size_one_source
        self.literal_ones: dict[T.Op, tuple] = {}
        self.let_values: dict[T.Variable, T.Expr] = {}
        # argtopk(t, k) of a let t leaves its network's packed result here, so that a later topk(t, k) in the same
        # block reads its values from it instead of building a second network: (t's Variable, k) -> (block, Read);
        # argsort(t) likewise for a later sort(t) of the same order, under ("sort", t's Variable, descending)
        self.top_networks: dict = {}

    # ---- set-up: constants and parameters ------------------------------------------------------------------
    def resolve_constants(self) -> dict:
        """Every compile-time constant's value: the given ones checked and normalised, the others' defaults."""
        k = self.k
        # The first of three scopes: the compile-time constants (all that a fn body sees of the kernel); run() adds
        # the parameters and dims, and the body.
        self.const_scope = _Scope()
        consts = {}
        known = [c.name for c in k.const_params]
        for extra in self.given:
            if extra not in known:
                raise TleError(_name_span(k), f"kernel '{k.name}' has no compile-time constant '{extra}'",
                               _suggest(extra, known) or [f"its constants: {', '.join(known) or 'none'}"])
        for c in k.const_params:
            if c.name in self.given:
                v = self._const_arg(c, self.given[c.name])
            elif c.default is None:
                raise TleError(_name_span(c), f"missing compile-time constant '{c.name}' of kernel '{k.name}'",
                               [f"give it a value: -D {c.name}=... in tlec, or {c.name}=... at launch, "
                                f"or a default: {c.name}: {c.kind} = ..."])
            elif c.kind == "dtype":
                if not isinstance(c.default, ast.Name):
                    raise TleError(c.default.span, f"the default of '{c.name}' must be an element type such as f16")
                v = self._const_arg(c, consts.get(c.default.id, c.default.id), c.default.span)
            else:
                v = self._const_arg(c, self._default_value(c, consts), c.default.span)
            consts[c.name] = v
            self.const_scope.add(c.name, _DtypeConst(v) if c.kind == "dtype" else v, _name_span(c))
        self.constants = consts
        return consts

    def _default_value(self, c, consts: dict):
        """A constant's default, from the module's consts and the constants before it. An unknown name there that
        is a later constant of the kernel, or one of its dims (`<BK: int = K>`: known only at launch), gets said so."""
        try:
            return _const_value(c.default, self.p.const_values, consts)
        except TleError as e:
            if not e.message.startswith("unknown name '"):
                raise
            name = e.message.split("'")[1]
            if name in (d.name for d in self.k.const_params):
                raise TleError(e.span, f"'{name}' is a constant declared after '{c.name}': a default may use only "
                                       "the constants before it", [f"declare {name} first"]) from None
            dims = {d.id for p in self.k.params if isinstance(p.type, ast.TensorTypeExpr) for d in p.type.dims
                    if isinstance(d, ast.Name)}
            if name not in dims:
                raise
            raise TleError(e.span, f"'{name}' is a dim of kernel '{self.k.name}', known only at launch; a constant's "
                                   "default is fixed when the kernel compiles",
                           [f"give {c.name} a number (or next_pow2/cdiv of other constants), pass it at launch, or "
                            f"use {name} in the kernel's body, where dims are values"]) from None

    def run(self) -> T.Kernel:
        """The checked kernel (after resolve_constants)."""
        k, consts = self.k, self.constants
        root = _Scope(self.const_scope)
        params, dims = [], {}
        for p in k.params:
            t = p.type
            dtype = self._dtype(t.dtype, t.span, root)
            if isinstance(t, ast.TensorTypeExpr):
                tdims = []
                for d in t.dims:
                    fixed = d.value if isinstance(d, ast.IntLit) else consts.get(d.id, self.p.const_values.get(d.id))
                    if fixed is None:
                        tdims.append(d.id)
                        dims.setdefault(d.id, d.span)
                    elif isinstance(fixed, int) and not isinstance(fixed, bool) and 0 < fixed <= _MAX_FIXED_DIM:
                        tdims.append(fixed)
                    elif isinstance(fixed, int) and not isinstance(fixed, bool) and fixed > _MAX_FIXED_DIM:
                        raise TleError(d.span, f"a fixed dim of {fixed} is past 2**31 - 1",
                                       ["name the dim instead (tensor<f32>[N]): a launch passes a size past "
                                        "2**31 - 1 as a 64-bit value and the kernel indexes that tensor in 64 bits"])
                    else:
                        raise TleError(d.span, f"dim '{d.id}' must be a positive int constant, but it is {fixed!r}")
                param = T.TensorParam(p.name, Tensor(dtype, tuple(tdims)), p.span)
            else:
                if is_f8(dtype):
                    raise TleError(t.span, f"scalar parameter '{p.name}' cannot be {dtype}: 8-bit floats exist "
                                           f"only in tensors and tiles", ["pass it as f32"])
                param = T.Variable(p.name, Scalar(dtype), p.span)
                self.what[param] = "a parameter"
            params.append(param)
            root.add(p.name, param, _name_span(p))
        for d, sp in dims.items():
            if d in root.names:
                raise TleError(sp, f"dim '{d}' has the name of a parameter", [_SIZE_PARAMETER.format(d=d)])
            root.add(d, T.Dim(sp, Scalar("i64" if d in self.wide_dims else "i32"), d), sp)
        self.kernel_scope = root  # the parameters and dims, which a fn's body does not see
        self.scope = _Scope(root)
        self.block(_early_returns(k.body))
        _no_float_overflow(self.out)
        return T.Kernel(k.name, k.span, params, dims, consts, self.out, file=k.span.file)

    def _const_arg(self, c: ast.ConstParam, v, span=None):
        """Check and normalise one constant's value. Values from tlec -D arrive as text."""
        span = span or _name_span(c)
        if c.kind == "dtype":
            d = dtype_of(v)
            if d is None:
                raise TleError(span, f"constant '{c.name}' must be an element type (f16, bf16, f32, ...); got {v!r}",
                               _suggest_dtype(str(v)))
            return d
        if isinstance(v, str):
            v = {"true": True, "false": False}.get(v.strip(), v)
            for parse_text in ((lambda t: int(t, 0)), float):
                if isinstance(v, str):
                    try:
                        v = parse_text(v.strip())
                    except ValueError:
                        pass
        ok = {"int": isinstance(v, numbers.Integral) and not isinstance(v, bool),
              "float": isinstance(v, numbers.Real) and not isinstance(v, bool),
              "bool": isinstance(v, bool)}[c.kind]
        if not ok:
            raise TleError(span, f"constant '{c.name}' must be {'an int' if c.kind == 'int' else 'a ' + c.kind}; "
                                 f"got {v!r}")
        return {"int": int, "float": float, "bool": bool}[c.kind](v)

    def _dtype(self, name: str, span: Span, scope=None) -> str:
        d = canonical(name)
        if d is not None:
            return d
        v = (scope or self.scope).lookup(name)
        if isinstance(v, _DtypeConst):
            return v.dtype
        if v is not None or name in self.p.const_values:
            raise TleError(span, f"'{name}' is not an element type",
                           [f"element types are {', '.join(_all_dtypes())}, or a constant declared <T: dtype>"])
        raise TleError(span, f"unknown element type '{name}'", _suggest_dtype(name))

    # ---- statements ----------------------------------------------------------------------------------------
    def block(self, stmts, fn_body=False):
        """Check a block; in a fn's body, return the value of its final return (or None)."""
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                if not self.fn_stack:  # (a kernel's bare returns are gone: _early_returns)
                    if s.value.span.line > s.span.line:  # `return` alone on its line, a statement below it
                        raise TleError(s.value.span, "this statement follows a return and never runs",
                                       [Note("the return: a bare `return` must end its block",
                                             Span(s.span.file, s.span.line, s.span.col, s.span.line,
                                                  s.span.col + len("return")))])
                    raise TleError(s.span, "a kernel cannot return a value",
                                   ["a kernel writes its results with store(); a bare `return` ends its program"])
                if s.value is None:
                    raise TleError(s.span, "a fn's return needs a value: return EXPR",
                                   ["a bare `return` ends only a kernel's program"])
                if not fn_body or i != len(stmts) - 1:
                    raise TleError(s.span, "return must be the last statement of a fn",
                                   ["fns are inlined: a return ends the fn's body or a branch of an if there, "
                                    "not a loop's body, and nothing follows it"])
                if isinstance(s.value, ast.ValueList):  # return a, b: the call gives several values
                    return tuple(self.expr(v) for v in s.value.items)
                return self.expr(s.value)
            if fn_body and i == len(stmts) - 1 and isinstance(s, ast.If) and _ends((s,), True):
                return self.tail_if(s)
            if fn_body and isinstance(s, ast.If) and _has_return((s,), True):
                raise TleError(s.span, "a fn that returns inside an if must return on every path through it",
                               ["add an else that returns, or a return after the if"])
            getattr(self, "stmt_" + type(s).__name__)(s)
        return None

    def if_condition(self, s: ast.If) -> T.Expr:
        cond = self.expr(s.cond)
        if isinstance(cond.type, Tile):
            one = math.prod(cond.type.shape) == 1
            raise TleError(s.cond.span, f"if needs a scalar condition, got {cond.type}",
                           ["a one-element tile gives its scalar through a reduction: if max(t) == n { ... } (an "
                            "atomic with scalar indices and value returns a scalar)"] if one else
                           ["for a tile, choose elementwise with where(cond, a, b)"])
        if cond.type.dtype != "i1":
            raise TleError(s.cond.span, f"if needs a bool condition, got {cond.type}",
                           ["compare explicitly, e.g. x != 0"])
        return cond

    def taken_branch(self, s: ast.If, cond: T.Const, fn_body=False):
        """An if decided at compile time: only the taken branch exists (and is checked), in a scope of its own; in a
        fn's body, its return value."""
        saved = self.scope
        self.scope = _Scope(saved)
        try:
            return self.block(s.then if cond.value else (s.orelse or ()), fn_body=fn_body)
        finally:
            self.scope = saved

    def both_branches(self, s: ast.If, fn_body=False) -> tuple[_Frame, list]:
        """An if on a run-time condition: each branch checked in a scope of its own under a new frame (which
        records the outer vars they assign): the frame, and (statements, scope, fn return value) per branch."""
        frame = _Frame(len(self.frames) + 1, [])
        branches = []
        saved_out, saved_scope = self.out, self.scope
        self.frames.append(frame)
        try:
            for branch in (s.then, s.orelse or ()):
                self.out, self.scope = [], _Scope(saved_scope)
                value = self.block(branch, fn_body=fn_body)
                branches.append((self.out, self.scope, value))
        finally:
            self.frames.pop()
            self.out, self.scope = saved_out, saved_scope
        return frame, branches

    def tail_if(self, s: ast.If):
        """A fn's last statement, an if whose every path ends in `return EXPR`: its value (or values). On a
        compile-time condition, the taken branch's; otherwise one var per value, declared before the if and bound
        at the end of each branch (as a var assigned in both branches), so the fn gives their reads."""
        cond = self.if_condition(s)
        if isinstance(cond, T.Const):
            return self.taken_branch(s, cond, fn_body=True)
        frame, branches = self.both_branches(s, fn_body=True)
        values = [v if isinstance(v, tuple) else (v,) for _, _, v in branches]
        (a, b), spans = values, (_last_return(s.then).span, _last_return(s.orelse).span)
        if len(a) != len(b):
            raise TleError(spans[1], f"this branch returns {len(b)} value{'s' if len(b) != 1 else ''}, the other "
                                     f"{len(a)}", [Note("the other branch's return", spans[0])])
        results = []
        for i, (x, y) in enumerate(zip(a, b)):
            # the var takes the typed side's type where the other is a literal (`return 0.0` beside a tile), a
            # tile's where the other is a scalar (splat on assignment), else the first branch's
            tx, ty = self.materialize(x).type, self.materialize(y).type
            literal_x = isinstance(x, T.Const) and x.weak and not (isinstance(y, T.Const) and y.weak)
            rtype = ty if literal_x or (isinstance(ty, Tile) and not isinstance(tx, Tile)) else tx
            var = T.Variable(f"result {i} of the if", rtype, s.span, mutable=True, depth=len(self.frames))
            self.out.append(T.Bind(s.span, var, T.Op(s.span, rtype, "undef", [], {"name": var.name})))
            frame.carried.append(var)
            results.append(var)
        saved_out, saved_scope = self.out, self.scope
        self.frames.append(frame)
        try:
            for (body, scope, _), vals, span in zip(branches, values, spans):
                self.out, self.scope = body, scope
                for var, v in zip(results, vals):
                    value = self.assignable(v, var.type, span, "the value the other branch returns")
                    self.out.append(T.Bind(span, var, self.materialize(value)))
        finally:
            self.frames.pop()
            self.out, self.scope = saved_out, saved_scope
        self.out.append(T.If(s.span, cond, branches[0][0], branches[1][0], frame.carried))
        reads = tuple(T.Read(s.span, var.type, var) for var in results)
        return reads if len(reads) > 1 else reads[0]

    def declare(self, name: str, span: Span, value):
        if self.scope.lookup(name) is not None:
            prev = self.scope.span_of(name)
            raise TleError(span, f"redefinition of '{name}'",
                           [Note(f"'{name}' was first defined here", prev)] if prev else [])
        for table, what in ((self.p.fns, "fn"), (self.p.consts, "const")):
            if name in table:
                raise TleError(span, f"'{name}' is already a {what}",
                               [Note(f"the {what} is defined here", _name_span(table[name]))])
        if name in BUILTINS or name in RESERVED:
            raise TleError(span, _taken(name))
        self.scope.add(name, value, span)

    def stmt_Let(self, s: ast.Let):
        if _is_slice(s.value):  # a tensor, not a value: the name stands for the window (tensor_arg, inline)
            if s.type is not None:
                raise TleError(s.type.span, f"'{s.name}' is a slice of a tensor; it takes no type",
                               [f"let {s.name} = slice(...)"])
            self.declare(s.name, s.name_span or s.span, self.slice_of(s.value, s.name))
            return
        value = self.expr(s.value)
        if s.type is not None:
            value = self.assignable(value, self.type_expr(s.type), s.value.span, f"'{s.name}'")
        self.let(s.name, s.name_span or s.span, s.span, value)

    def stmt_LetMany(self, s: ast.LetMany):
        for name, span, value in zip(s.names, s.name_spans, self.values(s.value, s.names, s.name_spans)):
            self.let(name, span, s.span, value)

    def discard(self, span: Span, value) -> None:
        """`let _ = e` / `let a, _ = e`: the value is not bound. An atomic or an asm(pure=false) in it still runs (its
        effect is kept); the rest is dropped."""
        if any(op.name == "atomic" or (op.name == "asm" and not op.attrs["pure"]) for op in _ops_of(value)):
            self.out.append(T.Eval(span, _unread(value)))

    def let(self, name: str, name_span: Span, span: Span, value):
        if name == DISCARD:
            return self.discard(span, value)
        value = self.materialize(value)
        if isinstance(value, T.Const):  # a let of a compile-time constant is one: it can size a tile, fold an if
            self.what[value] = "a let"
            self.declare(name, name_span, value)
            return
        var = T.Variable(name, value.type, span, mutable=False, depth=len(self.frames))
        self.declare(name, name_span, var)
        self.out.append(T.Bind(span, var, value))
        self.let_values[var] = value

    def values(self, e: ast.Expr, names, name_spans) -> tuple:
        """The values of the right side of `let a, b = e`, `var a, b = e` or `a, b = e`, one per name: a list
        `x, y`, or one call that gives several values (a fn ending in `return x, y`, split())."""
        if isinstance(e, ast.ValueList):
            got = tuple(self.expr(v) for v in e.items)
        else:
            got = self.any_expr(e)
            if not isinstance(got, tuple):
                got = (got,)
        if len(got) != len(names):
            what = "the right side has"
            if isinstance(e, ast.Call):
                what = f"fn '{e.func}' returns" if e.func in self.p.fns else f"{e.func}() returns"
            raise TleError(e.span, f"{what} {len(got)} value{'s' if len(got) != 1 else ''}, but "
                                   f"{len(names)} names are bound: {', '.join(names)}",
                           [Note("bound here", name_spans[0].to(name_spans[-1]))])
        return got

    def stmt_Var(self, s: ast.Var):
        if s.value is not None and _is_slice(s.value):
            raise TleError(s.span, f"a slice cannot be a var: bind it with let {s.name} = slice(...)",
                           ["a slice is a window of a tensor, fixed where it is made; make another for another "
                            "window"])
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
        self.var(s.name, s.name_span or s.span, s.span, value)

    def stmt_VarMany(self, s: ast.VarMany):
        for name, span, value in zip(s.names, s.name_spans, self.values(s.value, s.names, s.name_spans)):
            self.var(name, span, s.span, value)

    def var(self, name: str, name_span: Span, span: Span, value):
        if name == DISCARD:
            return self.discard(span, value)
        value = self.materialize(value)
        var = T.Variable(name, value.type, span, mutable=True, depth=len(self.frames))
        self.declare(name, name_span, var)
        self.out.append(T.Bind(span, var, value))

    def stmt_Assign(self, s: ast.Assign):
        at = s.name_span or s.span
        if s.name == DISCARD and s.op == "=":
            return self.discard(s.span, self.expr(s.value))
        target = self.assign_target(s.name, at)
        value = self.expr(s.value)
        if s.op != "=":
            value = self.binary(s.op[:-1], T.Read(at, target.type, target), value, s.span, at, s.value.span)
        self.assign(target, value, s.span, s.value.span)

    def stmt_AssignMany(self, s: ast.AssignMany):
        targets = []
        for name, at in zip(s.names, s.name_spans):
            if name != DISCARD and name in s.names[:len(targets)]:
                raise TleError(at, f"'{name}' is assigned twice in one assignment")
            targets.append(None if name == DISCARD else self.assign_target(name, at))
        # every value taken as it is before any var changes, so that `a, b = b, a` swaps
        values = [self.temp(name, v, s.span) if name != DISCARD else v
                  for name, v in zip(s.names, self.values(s.value, s.names, s.name_spans))]
        for target, value in zip(targets, values):
            if target is None:
                self.discard(s.span, value)
            else:
                self.assign(target, value, s.span, s.value.span)

    def assign(self, target: T.Variable, value, span: Span, value_span: Span):
        value = self.assignable(value, target.type, value_span, f"var '{target.name}'")
        for frame in self.frames:
            if frame.depth > target.depth and target not in frame.carried:
                frame.carried.append(target)
        self.out.append(T.Bind(span, target, self.materialize(value)))

    def assign_target(self, name: str, at: Span) -> T.Variable:
        """The var that `name = ...` assigns, or an error that says what else the name is."""
        target = self.scope.lookup(name)
        if target is None and name in self.p.const_values:
            raise TleError(at, f"cannot assign to '{name}': it is a const",
                           [Note("declared here", _name_span(self.p.consts[name]))])
        if target is None:
            raise TleError(at, f"assignment to undeclared name '{name}'",
                           [f"declare it first: var {name} = ..."] + _suggest(name, self.scope.visible()))
        if not (isinstance(target, T.Variable) and target.mutable):
            if isinstance(target, (T.Variable, T.Const)) and target in self.what:
                what = self.what[target]
            elif isinstance(target, T.Variable):
                what = "a let"
            elif isinstance(target, T.TensorParam):
                what = "a tensor; write into it with store()"
            elif isinstance(target, T.Dim):
                what = "a dim of a tensor parameter"
            else:
                what = "a compile-time constant"
            notes = [Note(f"'{name}' is declared here", self.scope.span_of(name))] \
                if self.scope.span_of(name) else []
            if what == "a let":
                notes.append(f"declare it with var to make it mutable: var {name} = ...")
            raise TleError(at, f"cannot assign to '{name}': it is {what}", notes)
        return target

    def stmt_ExprStmt(self, s: ast.ExprStmt):
        call = s.expr
        if call.func in self.p.fns:
            self.inline(call, want_value=False)
            return
        if call.func in EFFECT_BUILTINS:
            self.out.append(T.Eval(s.span, _unread(BUILTINS[call.func](self, call))))
            return
        if call.func in BUILTINS:
            raise TleError(call.span, f"the result of {call.func}() is unused",
                           [f"bind it: let r = {call.func}(...)"])
        self.not_callable(call)

    def stmt_For(self, s: ast.For):
        it = s.iter
        if isinstance(it, ast.Call) and it.func == "static_range":
            self.static_loop(s)
            return
        if not (isinstance(it, ast.Call) and it.func == "range"):
            raise TleError(it.span, "a for loop iterates over range(stop), range(start, stop) or "
                                    "range(start, stop, step), or static_range(...) with constant bounds")
        _range_arguments(it)
        # The loop counts in i32, or in i64 where a bound is i64 (a dim past 2**31 - 1 in this launch, a cast).
        vals = [self.scalar_int(a, "a bound of range()", keep_i64=True) for a in it.args]
        ity = Scalar("i64" if any(v.type.dtype == "i64" for v in vals) else "i32")
        one = T.Const(it.span, ity, 1)
        start, stop, step = (T.Const(it.span, ity, 0), vals[0], one) if len(vals) == 1 else \
            (vals[0], vals[1], vals[2] if len(vals) == 3 else one)
        # The step must be known positive: a constant, or the launch's program count along an axis (always >= 1),
        # which is how a persistent kernel strides over its tiles whatever grid it is launched with.
        if not (isinstance(step, T.Const) or (isinstance(step, T.Op) and step.name == "num_programs")):
            raise TleError(it.args[2].span, "the step of range() must be a compile-time constant or num_programs(axis)",
                           ["loop over range(0, cdiv(n, S)) and scale the loop variable by S instead"])
        if isinstance(step, T.Const) and step.value <= 0:
            raise TleError(it.args[2].span, f"the step of range() must be positive, got {step.value}",
                           ["count down with an expression of the loop variable: n - 1 - i"])
        start, stop, step = (self.coerce(v, ity) for v in (start, stop, step))
        stages = unroll = None
        seen = {}
        for h in s.hints:
            if h.name in seen:
                raise TleError(h.span, f"{h.name}(...) is given twice for one loop",
                               [Note("first given here", seen[h.name])])
            seen[h.name] = h.span
            if h.name == "pipeline":
                stages = self.hint_int(h, "stages")
            else:
                unroll = self.hint_int(h, "factor")
        frame = _Frame(len(self.frames) + 1, [])
        body, saved_out, saved_scope = [], self.out, self.scope
        self.frames.append(frame)
        self.out, self.scope = body, _Scope(self.scope)
        var = T.Variable(s.var, ity, s.span, depth=frame.depth)
        self.what[var] = "a loop variable"
        self.loop_ranges[var] = (step.value if isinstance(step, T.Const) else None,
                                 it.args[1] if len(it.args) > 1 else it.args[0],
                                 it.args[2].id if len(it.args) == 3 and isinstance(it.args[2], ast.Name) else None)
        try:
            self.declare(s.var, s.name_span or s.span, var)
            self.block(s.body)
        finally:
            self.frames.pop()
            self.out, self.scope = saved_out, saved_scope
        self.out.append(T.For(s.span, var, start, stop, step, body, frame.carried, stages, unroll))

    def static_loop(self, s: ast.For):
        """for i in static_range(...): the body once per value, with i a compile-time constant in each copy, as
        Triton's tl.static_range. What a run-time loop variable cannot do, it can: size a tile, pick a stage
        (1 << i in a reshape), decide an if at compile time. Outer vars the body assigns are plain assignments
        in sequence, as in a taken if's branch."""
        it = s.iter
        _range_arguments(it)
        bounds = [self.const_int(a, "a bound of static_range()", "for a bound known only at run time, loop over "
                                 "range(...) (its variable is then a run-time value)") for a in it.args]
        if len(bounds) == 3 and bounds[2] == 0:
            raise TleError(it.args[2].span, "the step of static_range() must not be 0")
        values = range(*bounds)
        if len(values) > _MAX_STATIC_STEPS:
            raise TleError(it.span, f"static_range() of {len(values)} steps: it copies the body once per step, and "
                                    f"more than {_MAX_STATIC_STEPS} would make a huge kernel",
                           ["loop over range(...) instead, with unroll(N) for a partial unrolling"])
        if s.hints:
            raise TleError(s.hints[0].span, f"static_range() loops take no {s.hints[0].name}(): the body is copied "
                                            "once per step already")
        saved = self.scope
        try:
            for value in values:
                self.scope = _Scope(saved)
                var = T.Const(s.span, Scalar(_int_literal_type(value, s.span)), value)
                self.declare(s.var, s.name_span or s.span, var)
                self.block(s.body)
        finally:
            self.scope = saved

    def hint_int(self, h: ast.LoopHint, key: str) -> int:
        args = list(h.args) + [kw.value for kw in h.kwargs if kw.name == key]
        bad = [kw for kw in h.kwargs if kw.name != key]
        if bad:
            raise TleError(bad[0].span, f"{h.name}() has no argument '{bad[0].name}'; write {h.name}({key}=N)")
        if len(args) != 1:
            raise TleError(h.span, f"{h.name} takes one argument: {h.name}({key}=N)")
        v = self.expr(args[0])
        if isinstance(v, T.Const) and v.value == 0 and key == "factor" and not isinstance(v.value, bool):
            return 1  # unroll(LOG) with LOG = 0: nothing to unroll, as unroll(1)
        if not isinstance(v, T.Const) or not isinstance(v.value, int) or isinstance(v.value, bool) or v.value < 1:
            raise TleError(args[0].span, f"{h.name}({key}=...) must be a positive compile-time integer")
        return v.value

    def stmt_If(self, s: ast.If):
        cond = self.if_condition(s)
        if isinstance(cond, T.Const):
            self.taken_branch(s, cond)
            return
        frame, branches = self.both_branches(s)
        self.out.append(T.If(s.span, cond, branches[0][0], branches[1][0], frame.carried))

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
            if isinstance(v, T.Const) and (isinstance(v.value, float) or v.type.dtype == "i1"):
                raise TleError(d.span, f"{what} size must be an integer, got {v.value!r} ({v.type})",
                               ["** always gives a float; use << for powers of two"] if isinstance(d, ast.BinOp)
                               and d.op == "**" else None)
            if not isinstance(v, T.Const):
                raise TleError(d.span, f"{what} size must be a compile-time constant integer",
                               ["use a literal or a kernel constant such as <BLOCK: int>"])
            if v.value <= 0 or v.value & (v.value - 1):
                consts = {c.name: c for c in self.k.const_params}
                given = dict.fromkeys(n.id for n in ast.walk(d) if isinstance(n, ast.Name) and n.id in self.given
                                      and n.id in consts)
                raise TleError(d.span, f"{what} size must be a positive power of two, got {v.value}",
                               ["Triton and Tile IR tiles have power-of-two sizes; ragged edges are padded"] +
                               [f"{n} = {self.given[n]!r} as given to this compile (a launch's {n}=..., tlec's "
                                f"-D {n}=...)" + (", not its default" if consts[n].default is not None else "")
                                for n in given])
            out.append(v.value)
        if math.prod(out) > MAX_TILE_ELEMENTS:
            raise TleError(span, f"{what} of {math.prod(out)} elements is too large (at most {MAX_TILE_ELEMENTS})")
        return tuple(out)

    # ---- expressions ---------------------------------------------------------------------------------------
    def expr(self, e: ast.Expr) -> T.Expr:
        v = self.any_expr(e)
        if isinstance(v, tuple):
            names = ", ".join("abcdefgh"[i] for i in range(min(len(v), 8)))
            what = f"fn '{e.func}'" if e.func in self.p.fns else f"{e.func}()"
            raise TleError(e.span, f"{what} returns {len(v)} values, so its call is not one value",
                           [f"bind them first: let {names} = {e.func}(...)"])
        return v

    def any_expr(self, e: ast.Expr):
        """An expression's value; a tuple of values for a call that gives several (a fn ending in `return a, b`,
        split()). Only `let a, b = ...`, `var a, b = ...` and `a, b = ...` take a tuple (values); expr() refuses it."""
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_IntLit(self, e):
        dtype = _int_literal_type(e.value, e.span)
        return T.Const(e.span, Scalar(dtype), wrap(e.value, dtype), weak=True)

    def expr_StrLit(self, e):
        raise TleError(e.span, "a string can only be print()'s message", ['print("x =", x) shows a value'])

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
            if e.id in self.p.fns or e.id in BUILTINS or e.id in _LOOP_ITERABLES:
                raise TleError(e.span, f"'{e.id}' is a function; call it: {e.id}(...)")
            self.unknown(e.id, e.span)
        if isinstance(v, T.Variable):
            return T.Read(e.span, v.type, v)
        if isinstance(v, T.Dim):
            return T.Dim(e.span, v.type, v.name)
        if isinstance(v, T.Const):  # a fn parameter bound to a compile-time constant
            return T.Const(e.span, v.type, v.value, v.weak)
        if isinstance(v, T.TensorParam):
            raise TleError(e.span, f"tensor '{e.id}' is not a value; load a tile from it",
                           [f"e.g. load({e.id}, tile=[...], at=[...])"])
        if isinstance(v, _DtypeConst):
            raise TleError(e.span, f"'{e.id}' is an element type, not a value",
                           [f"use it as a type: zeros<{e.id}>[...], cast<{e.id}>(x)"])
        return self.const_expr(v, e.span)

    def const_expr(self, v, span):
        if isinstance(v, bool):
            return T.Const(span, Scalar("i1"), v)
        if isinstance(v, int):
            dtype = _int_literal_type(v, span)
            return T.Const(span, Scalar(dtype), wrap(v, dtype), weak=True)
        return T.Const(span, Scalar("f32"), float(v), weak=True)

    def unknown(self, name: str, span: Span):
        cands = self.scope.visible() | set(BUILTIN_CONSTS) | set(self.p.const_values)
        kernel_name = self.kernel_scope.names.get(name) if self.fn_stack else None
        if kernel_name is not None:  # a fn sees its parameters and the kernel's constants, nothing else
            what = "dims" if isinstance(kernel_name, T.Dim) else "parameters"
            raise TleError(span, f"unknown name '{name}': a fn does not see the kernel's {what}",
                           [f"pass it as an argument: fn {self.fn_stack[-1]}(..., {name}) and call it with {name}"])
        raise TleError(span, f"unknown name '{name}'", _PYTHON_NAMES.get(name) or _suggest(name, cands))

    def not_callable(self, e: ast.Call):
        """The error for a call of something that is not a fn or a builtin."""
        if e.func in _LOOP_ITERABLES:
            raise TleError(e.span, f"{e.func}() is only allowed as the iterable of a for loop")
        if e.func in self.p.kernels:
            raise TleError(e.name_span, f"'{e.func}' is a kernel; kernels cannot call kernels",
                           ["write the shared part as a fn"])
        if self.scope.lookup(e.func) is not None or e.func in self.p.const_values or e.func in BUILTIN_CONSTS:
            raise TleError(e.name_span, f"'{e.func}' is not a function")
        raise TleError(e.name_span, f"unknown name '{e.func}'",
                       _python_float(e) or _TRITON_CALLS.get(e.func) or _suggest(e.func, [*BUILTINS, *self.p.fns]))

    def expr_UnaryOp(self, e: ast.UnaryOp):
        x = self.expr(e.operand)
        if e.op == "not" or (e.op == "~" and x.type.dtype == "i1"):  # ~mask: torch's and Triton's logical not
            self.require_bool(x, e.operand.span, "'not'")
            if isinstance(x, T.Const):
                return T.Const(e.span, x.type, not x.value)
            return T.Op(e.span, x.type, "not", [x])
        if e.op == "~":
            if not is_int(x.type.dtype):
                raise TleError(e.operand.span, f"'~' needs an integer or bool operand, got {x.type}")
            if isinstance(x, T.Const):
                return T.Const(e.span, x.type, wrap(~x.value, x.type.dtype), x.weak)
            return T.Op(e.span, x.type, "xor", [x, self.coerce(T.Const(e.span, Scalar(x.type.dtype), -1), x.type)])
        self.require_numeric(x, e.operand.span, "'-'")
        if isinstance(x, T.Const):
            if is_float(x.type.dtype):
                return T.Const(e.span, x.type, -x.value, x.weak)
            dtype = _int_literal_type(-x.value, e.span) if x.weak else x.type.dtype
            return T.Const(e.span, Scalar(dtype), wrap(-x.value, dtype), x.weak)
        return T.Op(e.span, x.type, "neg", [x])

    def require_bool(self, x, span, what):
        if x.type.dtype != "i1":
            raise TleError(span, f"{what} needs bool operands, got {x.type}", ["compare explicitly, e.g. x != 0"])

    def require_numeric(self, x, span, what):
        if x.type.dtype == "i1":
            raise TleError(span, f"{what} needs numbers, got {x.type}", ["cast<i32>(b) turns a bool into 0 or 1"])
        self.require_arithmetic(x, span, what)

    def require_arithmetic(self, x, span, what):
        """8-bit floats are storage: they are loaded, stored, moved, converted and multiplied by dot(), and
        computing with them is an error (neither GPU path has arithmetic on them)."""
        if is_f8(x.type.dtype):
            raise TleError(span, f"{what} cannot compute on {x.type}: 8-bit floats only move, convert and feed "
                                 f"dot()", [f"convert first: cast<f32>(...) is exact for {x.type.dtype}"])

    def expr_BinOp(self, e: ast.BinOp):
        return self.binary(e.op, self.expr(e.lhs), self.expr(e.rhs), e.span, e.lhs.span, e.rhs.span)

    def binary(self, op, a, b, span, aspan=None, bspan=None):
        aspan, bspan = aspan or span, bspan or span
        if op in ("and", "or"):
            self.require_bool(a, aspan, f"'{op}'")
            self.require_bool(b, bspan, f"'{op}'")
        elif op in ("&", "|", "^", "<<", ">>"):
            for x, sp in ((a, aspan), (b, bspan)):
                if not is_int(x.type.dtype) or (op in ("<<", ">>") and x.type.dtype == "i1"):
                    raise TleError(sp, f"'{op}' needs integer operands, got {x.type}",
                                   ["bitwise operators work on the bits of integers; cast<i32>(x) converts, "
                                    "bitcast<i32>(x) reinterprets a float's bits"] if is_float(x.type.dtype) else
                                   None)
        elif op not in ("==", "!="):
            self.require_numeric(a, aspan, f"'{op}'")
            self.require_numeric(b, bspan, f"'{op}'")
        else:
            self.require_arithmetic(a, aspan, f"'{op}'")
            self.require_arithmetic(b, bspan, f"'{op}'")
        dtype = self.common_dtype(a, b)
        if op in ("<<", ">>") and isinstance(b, T.Const) and not 0 <= b.value < BITS[dtype]:
            raise TleError(bspan, f"shift count {b.value} is out of range for {dtype} (0 to {BITS[dtype] - 1})")
        if op == "**" and not is_float(dtype):
            dtype = "f32"
        shape = broadcast_shapes(_shape(a), _shape(b))
        if shape is None:
            raise TleError(span, f"tile shapes {list(_shape(a))} and {list(_shape(b))} do not broadcast",
                           _BROADCAST_NOTE)
        for r, other in ((a, b), (b, a)):
            self._check_reduction_alignment(r, other, shape, span)
        name = BINARY_OPS[op]
        if isinstance(a, T.Const) and isinstance(b, T.Const):
            return self.fold(op, self.coerce(a, Scalar(dtype)), self.coerce(b, Scalar(dtype)), dtype, span)
        ty = Tile(dtype, shape) if shape or isinstance(a.type, Tile) or isinstance(b.type, Tile) else Scalar(dtype)
        if name == "pow" and isinstance(b, T.Const) and not isinstance(b.value, bool) and b.value in (2, 3, 4) \
                and not is_f8(dtype):
            return self.integer_power(self.coerce(a, ty), int(b.value), ty, span)
        a, b = self.coerce(a, ty), self.coerce(b, ty)
        if name in ("eq", "ne", "lt", "le", "gt", "ge"):
            rty = Tile("i1", shape) if isinstance(ty, Tile) else Scalar("i1")
            return T.Op(span, rty, name, [a, b])
        return T.Op(span, ty, name, [a, b])

    def integer_power(self, x: T.Expr, n: int, ty, span) -> T.Expr:
        """x ** n for a constant n of 2, 3 or 4: multiplies (x * x, x * x * x, (x * x) * (x * x)) instead of the
        general pow, which is a libdevice call of hundreds of instructions (a [1024] f32 tile's x ** 3: 768 SASS
        instructions on the native path against 80 for t * t * t). As exact as pow or more: x * x is the correctly
        rounded square, and libdevice's powf is good to 2 ulp. f16 and bf16 multiply in f32 and round once at
        the end, as pow does."""
        wide = _with_dtype(ty, "f32") if ty.dtype in ("f16", "bf16") else ty
        x = self.temp("pow_base", T.Op(span, wide, "cast", [x]) if wide is not ty else x, span)
        square = self.temp("pow_square", T.Op(span, wide, "mul", [x, x]), span) if n == 4 else \
            T.Op(span, wide, "mul", [x, x])
        out = square if n == 2 else T.Op(span, wide, "mul", [square, x if n == 3 else square])
        return T.Op(span, ty, "cast", [out]) if wide is not ty else out

    def common_dtype(self, a, b) -> str:
        """The dtype of a mixed operation: a literal takes the other side's type (f32 if it is a float literal and
        the other side is an integer); otherwise types.promote."""
        wa, wb = isinstance(a, T.Const) and a.weak, isinstance(b, T.Const) and b.weak
        da, db = a.type.dtype, b.type.dtype
        if wa and not wb:
            return "f32" if is_float(da) and not is_float(db) else db
        if wb and not wa:
            return "f32" if is_float(db) and not is_float(da) else da
        return promote(da, db)

    def fold(self, op, a: T.Const, b: T.Const, dtype, span):
        """Evaluate an operation on two constants, already converted to dtype."""
        x, y = a.value, b.value
        weak = a.weak and b.weak
        if op in ("==", "!=", "<", "<=", ">", ">="):
            r = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return T.Const(span, Scalar("i1"), bool(r))
        if op in ("and", "or"):
            return T.Const(span, Scalar("i1"), bool(x and y) if op == "and" else bool(x or y))
        if op in ("max", "min"):
            r = max(x, y) if op == "max" else min(x, y)
        else:
            r = _fold_arith(op, x, y, span)
        if is_float(dtype):
            return T.Const(span, Scalar(dtype), float(r), weak)
        if weak and dtype != "i1":  # literal arithmetic: the result is typed like a literal of its value
            dtype = _int_literal_type(r, span)
        return T.Const(span, Scalar(dtype), wrap(r, dtype), weak)

    def coerce(self, x: T.Expr, ty) -> T.Expr:
        """Convert x to ty's dtype and broadcast it to ty's shape (explicit ops)."""
        dtype = ty.dtype
        if x.type.dtype != dtype:
            if isinstance(x, T.Const):
                value = self.implicit_const(x, dtype) if x.weak else _cast_const(x.value, dtype, x.span)
                x = T.Const(x.span, Scalar(dtype), value, x.weak)
            else:
                x = T.Op(x.span, _with_dtype(x.type, dtype), "cast", [x])
        if isinstance(ty, Tile):
            return self.broadcast_to(x, ty.shape)
        return x

    def implicit_const(self, x: T.Const, dtype: str):
        """A literal's value as dtype, when the literal takes the type of its context; lossy conversions are errors."""
        v = x.value
        if dtype == "i1":
            raise TleError(x.span, f"the number {v!r} cannot be used as a bool", ["write true or false"])
        if is_f8(dtype):
            return round_f8(float(v), dtype)
        if is_float(dtype):
            if overflows(float(v), dtype):
                raise overflow_error(x.span, float(v), dtype)
            return float(v)
        if isinstance(v, float):
            if math.isinf(v) or math.isnan(v):  # pad=-inf on an integer tensor: its extreme is what was meant
                low, high = -(2 ** (BITS[dtype] - 1)), 2 ** (BITS[dtype] - 1) - 1
                raise TleError(x.span, f"the float {v!r} cannot be used as {dtype}: integers have no "
                                       f"{'infinity' if math.isinf(v) else 'NaN'}",
                               [f"{dtype}'s {'smallest' if v < 0 else 'largest'} value, {low if v < 0 else high}, "
                                f"is what a {'max' if v < 0 else 'min'} leaves unchanged, as {v!r} does: write that"]
                               if math.isinf(v) else ["write an integer"])
            raise TleError(x.span, f"the float {v!r} cannot be used as {dtype} implicitly",
                           [f"write an integer, or convert explicitly: cast<{dtype}>({v!r})"])
        bits = BITS[dtype]
        if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
            unsigned = 0 <= v < 2 ** bits  # a mask such as 0xFF on packed bytes, a hash's multiplier (no uint32)
            notes = [f"{dtype} holds {-(2 ** (bits - 1))} to {2 ** (bits - 1) - 1}"]
            widen = f"cast<{'i32' if bits < 32 else 'i64'}>(x) & 0x{2 ** bits - 1:X}"
            if unsigned and v == 2 ** bits - 1 and bits < 64:  # x & 0xFF: the byte read as unsigned
                notes.append(f"to read {dtype} bits as unsigned, widen first: {widen}")
            elif unsigned:
                notes.append(f"for these {bits} bits as {_a(dtype)} (a hash constant, a mask), cast it: "
                             f"cast<{dtype}>(0x{v:X}) is {wrap(v, dtype)}; +, -, *, &, |, ^ and << give the bits an "
                             f"unsigned type would")
                if bits < 64:
                    notes.append(f"to compare, divide or shift right {dtype} bits as unsigned, widen first: {widen}")
            raise TleError(x.span, f"the integer {v} does not fit in {dtype}", notes)
        return wrap(v, dtype)

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
        """A weak literal bound to a name gets its default type (i32, i64 or f32)."""
        if isinstance(x, T.Const) and x.weak:
            return T.Const(x.span, x.type, x.value, weak=False)
        return x

    def assignable(self, value: T.Expr, ty, span, what, untyped: str | None = None) -> T.Expr:
        """value converted to ty for `what`; `untyped`: the fn parameter's name, where leaving its type out is a way
        to take the tile (a combine fn called on tiles too)."""
        if isinstance(value.type, Tile) and isinstance(ty, Scalar):
            notes = ["reduce it to a scalar first, e.g. sum(t) or max(t)"]
            if untyped:
                notes.insert(0, f"a parameter typed {ty} takes scalars only: leave its type out ({untyped}, not "
                                f"{untyped}: {ty}) for a fn called on tiles too (it is inlined at each call with that "
                                f"call's types)")
            raise TleError(span, f"cannot assign a {value.type} to {what} of type {ty}", notes)
        if value.type.dtype != ty.dtype and not (isinstance(value, T.Const) and value.weak):
            raise TleError(span, f"cannot assign a value of type {value.type} to {what} of type {ty}",
                           [f"convert it: cast<{ty.dtype}>(...)"])
        if isinstance(ty, Tile) and isinstance(value.type, Tile) and \
                broadcast_shapes(value.type.shape, ty.shape) != ty.shape:
            raise TleError(span, f"cannot assign a {value.type} to {what} of type {ty}: the shapes differ")
        return self.coerce(value, ty)

    def scalar_int(self, e: ast.Expr, what: str, keep_i64: bool = False) -> T.Expr:
        """An integer scalar as i32 (narrower ones sign-extended, i64 truncated), or kept i64 with `keep_i64`."""
        v = self.expr(e)
        if isinstance(v.type, Tile) or not is_int(v.type.dtype) or v.type.dtype == "i1":
            raise TleError(e.span, f"{what} must be an integer scalar, got {v.type}")
        if keep_i64 and v.type.dtype == "i64":
            return v
        return self.coerce(v, Scalar("i32")) if v.type.dtype != "i32" else v

    def const_int(self, e: ast.Expr, what: str, hint: str | None = None) -> int:
        """A compile-time integer; `hint` is the note where it is not (else, for a dim, how to size a tile)."""
        v = self.expr(e)
        if not isinstance(v, T.Const) or not isinstance(v.value, int) or isinstance(v.value, bool):
            dim = isinstance(e, ast.Name) and isinstance(v, T.Dim)
            raise TleError(e.span, f"{what} must be a compile-time integer",
                           [hint] if hint else
                           [f"{e.id} is a dim, known only at launch: give the size a constant (BLOCK) that covers "
                            f"it, and mask what lies past {e.id} (arange(0, BLOCK) < {e.id})"] if dim else None)
        return v.value

    def const_bool(self, e: ast.Expr, what: str) -> bool:
        v = self.expr(e)
        if not isinstance(v, T.Const) or v.type.dtype != "i1":
            raise TleError(e.span, f"{what} must be true or false")
        return bool(v.value)

    # ---- calls ---------------------------------------------------------------------------------------------
    def expr_Call(self, e: ast.Call):
        if e.func in self.p.fns:
            return self.inline(e, want_value=True)
        if e.func in ("store", "scatter", "print", "assert"):
            raise TleError(e.span, f"{e.func}() returns no value", [f"call it as a statement: {e.func}(...)"])
        handler = BUILTINS.get(e.func)
        if handler is None:
            self.not_callable(e)
        return handler(self, e)

    def args(self, e, positional: tuple[str, ...], optional: tuple[str, ...] = (), kw_only: tuple[str, ...] = ()):
        """Bind a call's arguments to parameter names; returns {name: ast.Expr}."""
        names = positional + optional
        if len(e.args) > len(names):
            raise TleError(e.args[len(names)].span, f"{e.func}() takes at most {len(names)} positional "
                           f"argument{'s' if len(names) != 1 else ''}, got {len(e.args)}",
                           _EXTRA_POSITIONAL.get(e.func, []) +
                           [f"{e.func}({', '.join(names + tuple(k + '=' for k in kw_only))})"])
        bound = dict(zip(names, e.args))
        for kw in e.kwargs:
            if kw.name not in names + kw_only:
                raise TleError(kw.span, f"{e.func}() has no argument '{kw.name}'",
                               _ELEMENTWISE_MEMORY.get((e.func, kw.name), []) + (
                                   _suggest_keyword(kw.name, names + kw_only) or
                                   [f"its arguments: {', '.join(names + kw_only) or 'none'}"]))
            if kw.name in bound:
                raise TleError(kw.span, f"{e.func}() got argument '{kw.name}' twice")
            bound[kw.name] = kw.value
        for p in positional:
            if p not in bound:
                raise TleError(e.span, f"{e.func}() is missing its argument '{p}'",
                               [f"{e.func}({', '.join(names + tuple(k + '=' for k in kw_only))})"])
        return bound

    def inline(self, e: ast.Call, want_value: bool):
        """Check a fn call by checking the fn's body in place, its parameters bound to the arguments.

        A tensor argument and a compile-time constant argument stay what they are inside the body (so a constant
        can size a tile); any other argument becomes an immutable variable. The body sees its parameters, the
        module's consts and fns, and the kernel's compile-time constants - not the caller's variables.
        """
        fn = self.p.fns[e.func]
        if e.func in self.fn_stack:
            chain = " -> ".join(self.fn_stack[self.fn_stack.index(e.func):] + [e.func])
            raise TleError(e.name_span, f"fn '{e.func}' calls itself ({chain}); recursion is not supported",
                           ["fns are inlined at compile time; write the repetition as a for loop (over "
                            "static_range(...) where a step needs its index as a constant, to size a tile)"])
        params = [p.name for p in fn.params]
        if len(e.args) > len(params):
            raise TleError(e.span, f"fn '{fn.name}' takes {len(params)} argument{'s' if len(params) != 1 else ''},"
                                   f" got {len(e.args)}", [Note(f"fn '{fn.name}' is declared here", fn.name_span)])
        bound = dict(enumerate(e.args))  # parameter position -> argument (`_` may name several parameters)
        for kw in e.kwargs:
            if kw.name == DISCARD:
                raise TleError(kw.span, "a `_` parameter takes its argument by position")
            if kw.name not in params:
                raise TleError(kw.span, f"fn '{fn.name}' has no parameter '{kw.name}'",
                               _suggest(kw.name, params) or [f"its parameters: {', '.join(params) or 'none'}"])
            if params.index(kw.name) in bound:
                raise TleError(kw.span, f"fn '{fn.name}' got argument '{kw.name}' twice")
            bound[params.index(kw.name)] = kw.value
        missing = [p for i, p in enumerate(params) if i not in bound]
        if missing:
            raise TleError(e.span, f"fn '{fn.name}' takes {len(params)} argument{'s' if len(params) != 1 else ''},"
                                   f" got {len(bound)} (missing '{missing[0]}')",
                           [Note(f"fn '{fn.name}' is declared here", fn.name_span)])
        caller_scope = self.scope
        fn_scope = _Scope(self.const_scope)
        for i, p in enumerate(fn.params):
            a = bound[i]
            if p.name == DISCARD:  # an unused parameter: its argument is not bound (an atomic in it still runs)
                if not self.names_tensor(a):
                    self.discard(a.span, self.expr(a))
                continue
            tensor = self.scope.lookup(a.id) if isinstance(a, ast.Name) else \
                self.slice_of(a, p.name) if _is_slice(a) else None
            if isinstance(tensor, T.TensorParam):
                if p.type is not None:
                    shown = "this slice" if _is_slice(a) else f"'{tensor.name}'"
                    raise TleError(a.span, f"{shown} is a tensor, but parameter '{p.name}' of fn '{fn.name}' has a "
                                           f"type",
                                   [Note("leave the parameter untyped to pass a tensor", p.span)])
                fn_scope.add(p.name, tensor, p.name_span)
                continue
            v = self.expr(a)
            if p.type is not None:
                self.scope = fn_scope  # the type may use the kernel's constants, not the caller's names
                try:
                    ty = self.type_expr(p.type)
                finally:
                    self.scope = caller_scope
                v = self.materialize(self.assignable(v, ty, a.span, f"parameter '{p.name}' of fn '{fn.name}'",
                                                     untyped=p.name))
            if isinstance(v, T.Const):
                self.what[v] = f"a parameter of fn '{fn.name}'"
                fn_scope.add(p.name, v, p.name_span)
                continue
            if isinstance(v, T.Dim):  # a dim stays a dim: loops over it keep their launch facts (tle/abi.py)
                fn_scope.add(p.name, v, p.name_span)
                continue
            var = T.Variable(p.name, v.type, p.span, depth=len(self.frames))
            self.what[var] = f"a parameter of fn '{fn.name}'"
            fn_scope.add(p.name, var, p.name_span)
            self.out.append(T.Bind(a.span, var, v))
        self.fn_stack.append(e.func)
        self.scope = fn_scope
        try:
            result = self.block(_tail_returns(fn.body), fn_body=True)
        except TleError as err:  # an error in the body: say which call got there, like a backtrace
            err.notes.append(Note(f"in fn '{fn.name}', called here", e.span))
            raise
        finally:
            self.fn_stack.pop()
            self.scope = caller_scope
        if want_value and result is None:
            raise TleError(e.span, f"fn '{fn.name}' returns no value, so its call cannot be used as one",
                           [Note("end the fn with return <expr>", fn.name_span)])
        return result

    def expr_GenericCall(self, e: ast.GenericCall):
        dtype = self._dtype(e.dtype, e.dtype_span)
        if e.func == "asm":
            return self.inline_asm(e, dtype)
        if e.func in ("zeros", "ones", "full"):
            if e.shape is None:
                raise TleError(e.span, f"{e.func}<{e.dtype}> needs a shape: {e.func}<{e.dtype}>[A, B]")
            shape = self.shape(list(e.shape), e.span)
            if e.func == "full":
                if len(e.args) != 1 or e.kwargs:
                    raise TleError(e.span, f"full<{e.dtype}>[...] takes one value: full<{e.dtype}>[N](value)")
                v = self.expr(e.args[0])
                if isinstance(v.type, Tile):
                    raise TleError(e.args[0].span, "the value of full must be a scalar",
                                   ["to change a tile's shape use broadcast(t, [...])"])
                if is_f8(dtype) and not isinstance(v, T.Const):  # a run-time scalar: splat in f32, convert the tile
                    return self.convert(self.coerce(self.convert(v, "f32"), Tile("f32", shape)), dtype)
                v = self.convert(v, dtype)
            else:
                if e.args or e.kwargs:
                    raise TleError(e.span, f"{e.func}<{e.dtype}>[...] takes no arguments")
                v = T.Const(e.span, Scalar(dtype), _cast_const(0 if e.func == "zeros" else 1, dtype, e.span))
            return self.coerce(v, Tile(dtype, shape))
        if e.shape is not None:
            raise TleError(e.span, f"{e.func}<{e.dtype}>(x) takes no shape")
        if len(e.args) != 1 or e.kwargs:
            raise TleError(e.span, f"{e.func}<{e.dtype}> takes exactly one argument")
        x = self.expr(e.args[0])
        if e.func == "cast":
            return self.convert(x, dtype, e.span)
        x = self.materialize(x)
        if BITS[x.type.dtype] != BITS[dtype]:
            raise TleError(e.span, f"bitcast needs equal widths: {x.type.dtype} has {BITS[x.type.dtype]} bits, "
                                   f"{dtype} has {BITS[dtype]}",
                           ["cast<T>(x) converts the value; bitcast<T>(x) reinterprets the bits"])
        return T.Op(e.span, _with_dtype(x.type, dtype), "bitcast", [x])

    def inline_asm(self, e: ast.GenericCall, dtype: str) -> T.Expr:
        """asm<T>("ptx", "constraints", args..., pack=1, pure=true, ref=expr): inline PTX run on every element
        (Triton's inline_asm_elementwise). The arguments broadcast to one tile shape, the result's. Each run of the
        PTX sees `pack` elements of each argument; values narrower than 32 bits are packed into 32-bit registers
        (pack=2 for f16x2 instructions, 4 for bytes), so one run has regs(T) outputs, then regs(arg) inputs per
        argument, in that order, $0 first. Everything LLVM would abort the process on (counts, $N past the last
        operand) is checked here; a PTX mistake comes back from ptxas at this call. `ref` is the same computation
        in tle: what the interpreter runs (it cannot run PTX). Tile IR has no inline PTX (the legality check)."""
        if e.shape is not None:
            raise TleError(e.span, "asm<T>(...) takes no shape: the result has its arguments' shape")
        usage = [f'asm<{e.dtype}>("tanh.approx.f32 $0, $1;", "=f,f", x, ref=tanh(x))']
        kwargs = {k.name: k for k in e.kwargs}
        for k in e.kwargs:
            if k.name not in ("pack", "pure", "ref"):
                raise TleError(k.span, f"asm() has no argument '{k.name}'",
                               _suggest_keyword(k.name, ("pack", "pure", "ref")) or ["its keyword arguments: pack, "
                                                                                     "pure, ref"])
        if len(e.args) < 2 or not all(isinstance(a, ast.StrLit) for a in e.args[:2]):
            raise TleError(e.span, "asm() takes the PTX and its constraints as two strings, then its arguments",
                           usage)
        code, constraints = e.args[0].value, e.args[1].value
        if dtype == "i1":
            raise TleError(e.dtype_span, "asm() cannot return bool: return an i8 or i32 and compare it",
                           [f'asm<i32>(...) != 0'])
        if not e.args[2:]:
            raise TleError(e.span, "asm() needs at least one tile argument: the result takes its shape", usage)
        if len(e.args) - 2 > MAX_COMBINED:
            raise TleError(e.args[2 + MAX_COMBINED].span, f"asm() takes at most {MAX_COMBINED} arguments, got "
                                                          f"{len(e.args) - 2}")
        args = []
        for a in e.args[2:]:
            v = self.materialize(self.expr(a))
            if v.type.dtype == "i1":
                raise TleError(a.span, "asm() takes numbers, not bools: pass cast<i32>(b) or cast<i8>(b)")
            args.append(v)
        shape: tuple[int, ...] | None = None
        for a, v in zip(e.args[2:], args):
            if isinstance(v.type, Tile):
                joined = v.type.shape if shape is None else broadcast_shapes(shape, v.type.shape)
                if joined is None:
                    raise TleError(a.span, f"the arguments of asm() must broadcast to one shape: {list(shape)} and "
                                           f"{list(v.type.shape)}")
                shape = joined
        if shape is None:
            raise TleError(e.span, "asm() needs at least one tile argument: the result takes its shape",
                           ["a scalar s becomes a tile with full<f32>[1](s)"])
        pack = self.const_int(kwargs["pack"].value, "pack") if "pack" in kwargs else 1
        if pack < 1 or pack & (pack - 1) or pack > 16:
            raise TleError(kwargs["pack"].value.span, f"pack must be 1, 2, 4, 8 or 16, got {pack}")
        pure = self.const_bool(kwargs["pure"].value, "pure") if "pure" in kwargs else True
        _check_asm_operands(e, code, constraints, dtype, [v.type.dtype for v in args], pack)
        operands = [self.broadcast_to(v, shape) for v in args]
        result = Tile(dtype, shape)
        if "ref" in kwargs:
            ref = self.expr(kwargs["ref"].value)
            if ref.type.dtype != dtype and not (isinstance(ref, T.Const) and ref.weak):
                raise TleError(kwargs["ref"].value.span, f"ref= must be {dtype}, the type asm<{dtype}> returns; got "
                                                         f"{ref.type.dtype}", [f"cast<{dtype}>(...)"])
            if isinstance(ref.type, Tile) and broadcast_shapes(ref.type.shape, shape) != shape:
                raise TleError(kwargs["ref"].value.span, f"ref= has shape {list(ref.type.shape)}, the result "
                                                         f"{list(shape)}")
            if (effect := next((o for o in _ops_of(ref) if o.name == "atomic"), None)) is not None:
                raise TleError(effect.span, f"ref= must compute a value only; atomic_{effect.attrs.get('kind')}() here "
                                            f"writes memory")
            operands.append(self.coerce(ref, result))
        return T.Op(e.span, result, "asm", operands, {"asm": code, "constraints": constraints, "pack": pack,
                                                       "pure": pure, "ref": "ref" in kwargs})

    def convert(self, x: T.Expr, dtype: str, span: Span | None = None) -> T.Expr:
        """An explicit conversion (cast<T>, full<T>): constants fold with the run-time meaning; the result is
        typed (no longer a literal that adapts to its context)."""
        span = span or x.span
        if is_f8(dtype) and not isinstance(x.type, Tile) and not isinstance(x, T.Const):
            raise TleError(span, f"cannot convert the scalar {x.type} to {dtype}: 8-bit floats exist only in tensors "
                                 f"and tiles", [f"convert a tile, or full<{dtype}>[N](value) for a tile of one value"])
        if isinstance(x, T.Const):
            return T.Const(span, Scalar(dtype), _cast_const(x.value, dtype, span))
        if x.type.dtype == dtype:
            return x
        return T.Op(span, _with_dtype(x.type, dtype), "cast", [x])

    # builtins are methods named b_<name>, collected into BUILTINS below
    def b_program_id(self, e, name="program_id"):
        a = self.args(e, ("axis",))
        axis = self.const_int(a["axis"], "the axis")
        if axis not in (0, 1, 2):
            raise TleError(a["axis"].span, f"the launch mesh has axes 0, 1 and 2; got {axis}")
        return T.Op(e.span, Scalar("i32"), name, [], {"axis": axis})

    def b_num_programs(self, e):
        return self.b_program_id(e, "num_programs")

    def names_tensor(self, x: ast.Expr) -> bool:
        """Whether x is a tensor where it is written: a tensor parameter, a let bound to a slice, or a slice call."""
        return _is_slice(x) or (isinstance(x, ast.Name) and isinstance(self.scope.lookup(x.id), T.TensorParam))

    def tensor_arg(self, x: ast.Expr, fn: str) -> T.TensorParam:
        if _is_slice(x):
            return self.slice_of(x)
        if isinstance(x, ast.Name):
            v = self.scope.lookup(x.id)
            if isinstance(v, T.TensorParam):
                return v
            if v is None and x.id not in BUILTIN_CONSTS:
                self.unknown(x.id, x.span)
        raise TleError(x.span, f"the first argument of {fn}() must be a tensor parameter of the kernel or a slice "
                               f"of one")

    def slice_of(self, e: ast.Call, name: str | None = None) -> T.TensorSlice:
        """`slice(tensor, start=[...], shape=[...])`: the window of a tensor parameter (or of another slice) from
        element `start` with sizes `shape` (default: the rest of the tensor), in the tensor's strides. Emits the
        `slice` op that defines it here, in program order, and returns it. `name`: what messages call it (the let or
        fn parameter it is bound to; `slice(x)` where it is written in place)."""
        a = self.args(e, ("tensor", "start"), ("shape",))
        parent = self.tensor_arg(a["tensor"], "slice")
        name = name or f"slice({parent.name})"
        rank = len(parent.type.dims)
        start = [self.scalar_int(i, "a start in start=") for i in self.index_list(a["start"], rank, "start=",
                                                                                  parent.name)]
        shape = [self.scalar_int(i, "a size in shape=") for i in self.index_list(a["shape"], rank, "shape=",
                                                                                 parent.name)] \
            if "shape" in a else []
        dims = []
        for axis, (first, dim) in enumerate(zip(start, parent.type.dims)):
            size = shape[axis] if shape else None
            for v, what in ((first, "start"), (size, "size")):
                if isinstance(v, T.Const) and v.value < 0:
                    raise TleError(v.span, f"a slice's {what} cannot be negative, got {v.value}")
            c_first = first.value if isinstance(first, T.Const) else None
            c_size = size.value if isinstance(size, T.Const) else None
            if isinstance(dim, int) and c_first is not None and c_first + (c_size or 0) > dim:
                raise TleError((size or first).span, f"the slice ends at element {c_first + (c_size or 0)} of "
                                                     f"axis {axis}, but '{parent.name}' has {dim} there")
            if shape:
                dims.append(c_size)
            else:  # the rest of the axis
                dims.append(dim - c_first if isinstance(dim, int) and c_first is not None else None)
        t = T.TensorSlice(name, Tensor(parent.type.dtype, tuple(dims)), e.span, parent, start, shape)
        self.out.append(T.Eval(e.span, T.Op(e.span, None, "slice", start + shape, {"rest": not shape}, tensor=t)))
        return t

    def b_slice(self, e):  # only here in a place that wants a value
        raise TleError(e.span, "slice() gives a tensor, not a value",
                       ["bind it with let (let w = slice(...)), or pass it where a tensor goes: load(slice(x, "
                        "start=[...]), tile=[...])"])

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
        a = self.args(e, ("tensor",), (), ("tile", "at", "pad", "tma"))
        t = self.tensor_arg(a["tensor"], "load")
        rank = len(t.type.dims)
        one = "tile" not in a  # one element, read as a scalar: tiles of 1, so at= is its element index
        if one and (t.type.dtype == "i1" or is_f8(t.type.dtype)):
            shown = "bool" if t.type.dtype == "i1" else t.type.dtype  # as the program spells it
            raise TleError(e.span, f"load() without tile= reads a scalar, and a scalar cannot be {shown}",
                           [f"load a tile of one: load({t.name}, tile=[{', '.join(['1'] * rank)}], at=...)"])
        tile = (1,) * rank if one else self.shape(self.index_list(a["tile"], rank, "tile=", t.name), a["tile"].span)
        at = self.tile_indices(a, t, tile, e.span, "reads")
        pad = self.fill_value(a["pad"], t, "pad=") if "pad" in a else _cast_const(0, t.type.dtype, e.span)
        attrs = {"tile": tile, "padding": pad, **self.tma_hint(a)}
        r = T.Op(e.span, Tile(t.type.dtype, tile), "load", at, attrs, tensor=t)
        if not one and isinstance(a["tile"], ast.ListLit):
            ones = tuple(i for i, x in enumerate(a["tile"].items) if isinstance(x, ast.IntLit) and x.value == 1)
            if ones:
                self.literal_ones[r] = (ones, a["tile"])
        if one:  # the element of the [1, ..., 1] tile
            r = _the_element(e.span, r)
        return r

    def tma_hint(self, a) -> dict:
        """tma=true on a load or store: move the tile through a tensor descriptor (the Tensor Memory Accelerator)
        where the native path can (docs/language.md). A hint: the values are the same either way."""
        return {"tma": True} if "tma" in a and self.const_bool(a["tma"], "tma=") else {}

    def fill_value(self, x: ast.Expr, t: T.TensorParam, what: str):
        """pad= and other=: a compile-time constant, converted to the tensor's element type without loss."""
        v = self.expr(x)
        if not isinstance(v, T.Const):
            raise TleError(x.span, f"{what} must be a compile-time constant scalar (e.g. 0, -inf, nan)")
        if v.type.dtype == t.type.dtype:
            return v.value
        if not v.weak:
            raise TleError(x.span, f"{what} is {v.type} but '{t.name}' holds {t.type.dtype}",
                           [f"write a literal, or cast<{t.type.dtype}>(...)"])
        return self.implicit_const(v, t.type.dtype)  # a float into an integer tensor: as for `let n: i32 = 2.0`

    def b_store(self, e):
        a = self.args(e, ("tensor", "value"), (), ("at", "tma"))
        t = self.tensor_arg(a["tensor"], "store")
        rank = len(t.type.dims)
        v = self.expr(a["value"])
        if not isinstance(v.type, Tile):
            # a scalar is the one-element tile at `at` (a row's sum at its row: `store(y, sum(acc), at=r)`), in the
            # tensor's element type, or a literal that takes it
            if v.type.dtype != t.type.dtype and not (isinstance(v, T.Const) and v.weak):
                raise TleError(a["value"].span, f"cannot store {_a(v.type)} into {t.type} '{t.name}'",
                               [f"convert it: cast<{t.type.dtype}>(...)"])
            v = self.coerce(v, Tile(t.type.dtype, (1,) * rank))
        if len(v.type.shape) != rank:
            raise TleError(a["value"].span, f"a {v.type} has {_count(len(v.type.shape), 'dim')} but '{t.name}' "
                                            f"has {rank}",
                           ["reshape the tile to the tensor's rank"])
        if v.type.dtype != t.type.dtype:
            raise TleError(a["value"].span, f"cannot store {_a(v.type)} into {t.type} '{t.name}'",
                           [f"convert it: cast<{t.type.dtype}>(...)"])
        at = self.tile_indices(a, t, v.type.shape, e.span, "writes")
        return T.Op(e.span, None, "store", [v, *at], self.tma_hint(a), tensor=t)

    def tile_indices(self, a: dict, t: T.TensorParam, tile: tuple, span, verb: str) -> list:
        """A load's or store's at= (all 0 without one). Two forms of Triton's element offsets are errors, since at=
        counts tiles: an index that is a multiple of the tile's size on its axis (`pid * BLOCK`, _times_constant),
        and a loop variable stepping by that size up to a bound written with the axis' dim (`for i in range(0, N,
        BLOCK)`), which would read every BLOCK-th tile."""
        rank = len(t.type.dims)
        if "at" not in a:
            return [T.Const(span, Scalar("i32"), 0)] * rank
        written = self.index_list(a["at"], rank, "at=", t.name)
        at = [self.scalar_int(i, "a tile index in at=") for i in written]
        for axis, (src, index) in enumerate(zip(written, at)):
            if tile[axis] >= 16 and self._times_constant(index, tile[axis]):
                raise TleError(src.span, f"at= counts tiles, not elements: this index is a multiple of {tile[axis]}, "
                                         f"the tile's size on axis {axis}, as an element offset is (Triton's pid * "
                                         f"BLOCK); tile i covers elements i * {tile[axis]} ..",
                               ["give the tile's index: at=program_id(0), not program_id(0) * BLOCK (element offsets "
                                "go to slice(x, start=...), gather and scatter)"])
            var = self.scope.lookup(src.id) if isinstance(src, ast.Name) else None
            step, stop, named = self.loop_ranges.get(var, (None,) * 3) if isinstance(var, T.Variable) else (None,) * 3
            dim = t.type.dims[axis] if t.param is t else None  # a slice's sizes are not its tensor's dims
            if step is None or step < 2 or step != tile[axis]:
                continue
            by = f"{named} = {step}" if named else str(step)
            if isinstance(dim, str) and any(isinstance(n, ast.Name) and n.id == dim for n in ast.walk(stop)):
                raise TleError(src.span, f"at= counts tiles, not elements: '{src.id}' steps by {by}, the tile's size "
                                         f"on axis {axis}, up to {dim} elements, so this {verb} tiles 0, {step}, "
                                         f"{2 * step}, ... and skips the {step - 1} between",
                               [f"loop over tile indices: for {src.id} in range(cdiv({dim}, {named or step})) "
                                f"{{ ... }} (element offsets go to slice(x, start=...), gather and scatter)"])
            if step >= 16:  # bounds read at run time (a CSR row's, from its row pointers): element offsets all the same
                raise TleError(src.span, f"at= counts tiles, not elements: '{src.id}' steps by {by}, the tile's size "
                                         f"on axis {axis}, as an element offset does (Triton's `for j in range(start, "
                                         f"end, BLOCK)`), so this {verb} tile {src.id}, which covers elements "
                                         f"{src.id} * {step} ..",
                               [f"{'write' if verb == 'writes' else 'read'} elements {src.id} .. {src.id} + {step} "
                                f"with {'scatter' if verb == 'writes' else 'gather'}({t.name}, {src.id} + arange(0, "
                                f"{named or step}){', t' if verb == 'writes' else ''}, mask={src.id} + arange(0, "
                                f"{named or step}) < end)"
                                + f", or loop over tile indices where the range starts at a multiple of {step}"])
        return at

    def index_tiles(self, t: T.TensorParam, x: ast.Expr, extra: list, what: str):
        """Indices (one per dim) and extra operands broadcast to one shape; returns (indices, shape, one), one
        saying that all of them were scalars (the shape is then (1,))."""
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
        one = shape == ()  # every index and operand a scalar: one element, on a tile of one
        if one:
            shape = (1,)
        # i32 indices, but where one is i64 (an element past 2**31 - 1: a WideDim's positions, an int64 index
        # tensor) all are: the op takes indices of one type
        width = "i64" if any(i.type.dtype == "i64" for i in idx) else "i32"
        idx = [self.coerce(i, Tile(width, shape)) for i in idx]
        return idx, shape, one

    def b_gather(self, e):
        first = e.args[0] if e.args else next((k.value for k in e.kwargs if k.name in ("tensor", "x")), None)
        if first is not None and not self.names_tensor(first):
            return self.tile_gather(e)
        a = self.args(e, ("tensor", "indices"), (), ("mask", "other"))
        t = self.tensor_arg(a["tensor"], "gather")
        mask = self.expr(a["mask"]) if "mask" in a else None
        if mask is not None:
            self.require_bool(mask, a["mask"].span, "mask=")
        idx, shape, one = self.index_tiles(t, a["indices"], [mask], "gather")
        other = self.fill_value(a["other"], t, "other=") if "other" in a else _cast_const(0, t.type.dtype, e.span)
        ops = idx + ([self.coerce(mask, Tile("i1", shape))] if mask is not None else [])
        r = T.Op(e.span, Tile(t.type.dtype, shape), "gather", ops, {"other": other, "masked": mask is not None},
                 tensor=t)
        if one:  # scalars in, a scalar out, as for the atomics (_scatter_like) and a load without tile=
            r = _the_element(e.span, r)
        return r

    def tile_gather(self, e):
        """gather(t, indices, axis=A) on a tile (Triton's tl.gather): result[..., j, ...] = t[..., indices[..., j,
        ...], ...] along A. `indices` has t's rank and t's sizes on every other axis; its size along A is the
        result's. A register shuffle on the native path; Tile IR has none (the legality check says so)."""
        memory = next((k for k in e.kwargs if k.name in ("mask", "other")), None)
        if memory is not None:  # gather(x + 1, offs, mask=...): a tensor's gather meant; say what x + 1 is first
            x = self.expr(e.args[0] if e.args else next(k.value for k in e.kwargs if k.name in ("tensor", "x")))
            raise TleError(memory.span, f"gather() takes {memory.name}= from a tensor, and its first argument is "
                                        f"{_a(str(x.type)) if isinstance(x.type, Scalar) else f'a tile ({x.type})'}",
                           ["gather(x, indices, mask=m, other=v) reads a tensor parameter or a slice of one; a "
                            "tile's gather (gather(t, indices, axis=A)) reads lanes of the tile, which are all there"])
        a = self.args(e, ("x", "indices"), (), ("axis",))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            raise TleError(a["x"].span, f"gather() reads a tensor parameter, a slice or a tile, got {x.type}")
        idx = self.expr(a["indices"])
        rank = len(x.type.shape)
        if not isinstance(idx.type, Tile) or not is_int(idx.type.dtype) or idx.type.dtype == "i1" or \
                len(idx.type.shape) != rank:
            raise TleError(a["indices"].span, f"gather() from a tile of {rank} dim{'s' if rank != 1 else ''} takes "
                                              f"an integer tile of {rank} dim{'s' if rank != 1 else ''} as indices, "
                                              f"got {idx.type}")
        if "axis" in a:
            axis = self.axis(a["axis"], rank)
        elif rank == 1:
            axis = 0
        else:
            raise TleError(e.span, f"gather() from a tile of {rank} dims needs axis=", ["gather(t, i, axis=1)"])
        for d, (n, m) in enumerate(zip(x.type.shape, idx.type.shape)):
            if d != axis and n != m:
                raise TleError(a["indices"].span, f"the indices of gather() along axis {axis} must have the tile's "
                                                  f"size on every other axis: {list(idx.type.shape)} against "
                                                  f"{list(x.type.shape)} (axis {d})")
        if is_f8(x.type.dtype):
            raise TleError(a["x"].span, f"gather() from a tile of {x.type.dtype}: bitcast<i8>(t) first")
        idx = self.coerce(idx, Tile("i32", idx.type.shape)) if idx.type.dtype != "i32" else idx
        return T.Op(e.span, Tile(x.type.dtype, idx.type.shape), "tile_gather", [x, idx], {"axis": axis})

    def _scatter_like(self, e, name, kind=None):
        """scatter and the atomics: (tensor, indices, [compare,] value, mask=). The typed op's operands are the
        value, the index tiles, the mask if any, then compare (atomic_cas only), all broadcast to one shape."""
        cas = kind == "cas"
        a = self.args(e, ("tensor", "indices", "compare", "value") if cas else ("tensor", "indices", "value"), (),
                      () if cas else ("mask",))
        t = self.tensor_arg(a["tensor"], e.func)
        v = self.expr(a["value"])
        cmp = self.expr(a["compare"]) if cas else None
        mask = self.expr(a["mask"]) if "mask" in a else None
        if mask is not None:
            self.require_bool(mask, a["mask"].span, "mask=")
        idx, shape, one = self.index_tiles(t, a["indices"], [v, mask, cmp], e.func)
        for x, what in ((v, "value"), (cmp, "compare")):
            if x is not None and x.type.dtype != t.type.dtype and not (isinstance(x, T.Const) and x.weak):
                raise TleError(a[what].span, f"{e.func}() of a {x.type} into {t.type} '{t.name}'"
                               if what == "value" else f"atomic_cas() compares {t.type} '{t.name}' with a {x.type}",
                               [f"convert it: cast<{t.type.dtype}>(...)"])
        if kind is not None:
            allowed = ATOMIC_DTYPES[kind]
            if t.type.dtype not in allowed:
                raise TleError(e.span, f"{e.func}() does not support {t.type.dtype}; it supports "
                                       f"{', '.join(allowed)}")
        v = self.coerce(v, Tile(t.type.dtype, shape))
        ops = [v, *idx] + ([self.coerce(mask, Tile("i1", shape))] if mask is not None else []) + (
            [self.coerce(cmp, Tile(t.type.dtype, shape))] if cas else [])
        attrs = {"masked": mask is not None}
        if kind:
            attrs["kind"] = kind
        r = T.Op(e.span, Tile(t.type.dtype, shape) if kind else None, name, ops, attrs, tensor=t)
        if kind and one:
            # scalars in, a scalar out (Triton's atomic on one pointer): the old value of the one element, as a
            # load without tile= gives its element
            r = _the_element(e.span, r)
        return r

    def b_scatter(self, e):
        return self._scatter_like(e, "scatter")

    def b_atomic_cas(self, e):
        for k in e.kwargs:
            if k.name == "mask":  # Triton's tt.atomic_cas has none, and a masked lane still needs an address
                raise TleError(k.span, "atomic_cas() takes no mask=",
                               ["a lane whose value equals its compare never changes memory: "
                                "atomic_cas(t, where(m, i, 0), c, where(m, v, c)) leaves t alone where m is false "
                                "(its index must still be in range)"])
        return self._scatter_like(e, "atomic", "cas")

    def b_dot(self, e):
        a = self.args(e, ("a", "b"), ("acc",), ("tf32", "fast_acc"))
        x, y = self.expr(a["a"]), self.expr(a["b"])
        for v, src in ((x, a["a"]), (y, a["b"])):
            if not isinstance(v.type, Tile) or len(v.type.shape) not in (2, 3):
                deep = isinstance(v.type, Tile) and len(v.type.shape) > 3
                raise TleError(src.span, f"dot() needs 2-D tiles, or 3-D ones for a batch of products, got {v.type}",
                               [f"a batch over several axes is one axis of their product: reshape(t, "
                                f"[{math.prod(v.type.shape[:-2])}, {v.type.shape[-2]}, {v.type.shape[-1]}])"]
                               if deep else None)
        if len(x.type.shape) != len(y.type.shape):
            raise TleError(e.span, f"dot() of a {len(x.type.shape)}-D and a {len(y.type.shape)}-D tile: "
                                   f"{list(x.type.shape)} @ {list(y.type.shape)}",
                           ["both are [M, K] @ [K, N], or both [B, M, K] @ [B, K, N] (a batch of B products)"])
        batch = x.type.shape[:-2]  # () or (B,): a batch of products, each [M, K] @ [K, N] (torch.bmm)
        if batch != y.type.shape[:-2]:
            raise TleError(e.span, f"dot() batches differ: {list(x.type.shape)} @ {list(y.type.shape)}",
                           [f"a batched dot multiplies [B, M, K] by [B, K, N]: a has B = {batch[0]}, so b must "
                            f"be [{batch[0]}, {x.type.shape[-1]}, ...]"])
        (m, k1), (k2, n) = x.type.shape[-2:], y.type.shape[-2:]
        if k1 != k2:
            want = [*batch, k1]
            raise TleError(e.span, f"dot() inner dimensions differ: {list(x.type.shape)} @ {list(y.type.shape)}",
                           [f"a is [{'B, ' if batch else ''}M, K] = {list(x.type.shape)}, so b must be "
                            f"[{'B, ' if batch else ''}K, N] = [{', '.join(map(str, want))}, ...]"
                            + ("; did you mean transpose(b)?" if n == k1 and not batch else
                               "; did you mean transpose(b, perm=[0, 2, 1])?" if n == k1 else "")])
        if x.type.dtype != y.type.dtype:
            raise TleError(e.span, f"dot() operands have different element types: {x.type.dtype} and "
                                   f"{y.type.dtype}", ["cast one of them"])
        d = x.type.dtype
        acc_default = {"f16": "f32", "bf16": "f32", "f32": "f32", "i8": "i32", "f64": "f64", "f8e4m3": "f32",
                       "f8e5m2": "f32"}.get(d)
        if acc_default is None:
            raise TleError(e.span, f"dot() does not support {d} operands; use f16, bf16, f32, f64, i8, f8e4m3 or "
                                   f"f8e5m2")
        small = [f"{what} is {size}" for size, what in ((m, "M"), (n, "N"), (k1, "K")) if size < 16]
        if small:
            raise TleError(e.span, f"dot() needs every dimension to be at least 16; {' and '.join(small)}",
                           ["tensor-core instructions work on 16x16 and larger tiles",
                            "load tiles of 16 there even where a tensor is smaller (a LoRA of rank 8): its lanes past "
                            "the edge read pad=0, which adds nothing to the products, and a store of the result "
                            "drops them"])
        if is_f8(d) and k1 < 32:
            raise TleError(e.span, f"a dot of {d} needs K of at least 32; K is {k1}",
                           ["the tensor cores' 8-bit products step through K 32 at a time"])
        if "acc" in a:
            acc = self.expr(a["acc"])
            allowed = {"f16": ("f32", "f16"), "bf16": ("f32",), "f32": ("f32",), "i8": ("i32",),
                       "f64": ("f64",), "f8e4m3": ("f32",), "f8e5m2": ("f32",)}[d]
            if not isinstance(acc.type, Tile) or acc.type.shape != (*batch, m, n):
                raise TleError(a["acc"].span, f"the accumulator must be a {list((*batch, m, n))} tile, got "
                                              f"{acc.type}")
            if acc.type.dtype not in allowed:
                raise TleError(a["acc"].span, f"a dot of {d} accumulates in {' or '.join(allowed)}, not "
                                              f"{acc.type.dtype}")
        else:
            acc = self.coerce(T.Const(e.span, Scalar(acc_default), 0), Tile(acc_default, (*batch, m, n)))
        tf32 = self.const_bool(a["tf32"], "tf32=") if "tf32" in a else False
        if tf32 and d != "f32":
                raise TleError(a["tf32"].span, "tf32=true only applies to f32 operands")
        # 8-bit operands: "fast" lets the tensor cores accumulate at their own precision over the whole K loop;
        # fast_acc=false ("ieee") adds each dot's products into acc in f32 (docs/numerics.md).
        fast = self.const_bool(a["fast_acc"], "fast_acc=") if "fast_acc" in a else is_f8(d)
        if "fast_acc" in a and not is_f8(d):
            raise TleError(a["fast_acc"].span, f"fast_acc= only applies to 8-bit float operands, not {d}")
        return T.Op(e.span, acc.type, "dot", [x, y, acc], {"precision": "tf32" if tf32 else "fast" if fast else "ieee"})

    def _reduce(self, e, kind):
        if kind in ("max", "min") and len(e.args) == 2:
            a = self.args(e, ("a", "b"))
            return self.binary(kind, self.expr(a["a"]), self.expr(a["b"]), e.span, a["a"].span, a["b"].span)
        if len(e.args) == 2:
            raise TleError(e.args[1].span, f"{kind}() takes one positional argument; give the axis by keyword",
                           [f"{kind}(x, axis=1) reduces along axis 1"])
        a = self.args(e, ("x",), (), ("axis", "keepdims"))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            # sum(atomic_add(count, i, 1)), from before scalars gave one
            if (op := _element_of(x, ("atomic", "gather"))) is not None:
                raise TleError(a["x"].span, f"{kind}() reduces a tile, got {x.type}",
                               [f"atomic_{op.attrs['kind']}() of one element (scalar indices and value) returns its "
                                f"old value as a scalar already: drop the {kind}()" if op.name == "atomic" else
                                f"gather() of one element (scalar indices and mask) returns it as a scalar already: "
                                f"drop the {kind}()"])
            raise TleError(a["x"].span, f"{kind}() reduces a tile, got {x.type}",
                           ["for two values use max(a, b)"] if kind in ("max", "min") else None)
        keep = self.const_bool(a["keepdims"], "keepdims=") if "keepdims" in a else False
        rank = len(x.type.shape)
        logical = kind in ("any", "all")
        if logical:  # the max (any) or min (all) of the bools as 0 and 1, compared with 0 at the end
            self.require_bool(x, a["x"].span, f"{kind}()")
            x, kind = T.Op(x.span, Tile("i32", x.type.shape), "cast", [x]), "max" if kind == "any" else "min"
        if "axis" in a:
            axis = self.axis(a["axis"], rank)
            load = self._size_one_source(x, axis) if x.type.shape[axis] == 1 and math.prod(x.type.shape) > 1 \
                else None
            if load is not None:  # Triton's tl.max(row, axis=0) ported onto a row loaded as [1, N]
                others = [i for i, n in enumerate(x.type.shape) if n > 1]
                raise TleError(a["axis"].span, f"{kind}() along axis {axis}, whose size is 1: the result is its "
                                               f"input, unreduced",
                               [Note(f"the 1 of this tile= makes axis {axis} one element long", load[1].span),
                                f"reduce along axis={others[0]}" + (" (the row)" if len(others) == 1 else "")])
        else:
            if rank > 1:  # the whole tile: reduce its elements in one row
                x = T.Op(x.span, Tile(x.type.dtype, (math.prod(x.type.shape),)), "reshape", [x])
            axis = 0
        x = self.accumulation_input(x, kind)
        out_dtype = "i32" if kind in ("argmax", "argmin") else x.type.dtype
        shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
        ty = Tile(out_dtype, shape) if shape else Scalar(out_dtype)
        r = T.Op(e.span, ty, "reduce", [x], {"kind": kind, "axis": axis})
        if keep and "axis" not in a:
            r = self.coerce(r, Tile(out_dtype, (1,) * rank))
        elif keep and not shape:  # a 1-D tile reduced to a scalar: keepdims gives [1]
            r = self.coerce(r, Tile(out_dtype, (1,)))
        elif keep:
            r = T.Op(e.span, Tile(out_dtype, x.type.shape[:axis] + (1,) + x.type.shape[axis + 1:]), "reshape", [r])
        return self.binary("!=", r, T.Const(e.span, Scalar("i32"), 0, True), e.span) if logical else r

    def _reduced(self, e: T.Expr):
        """The reduction (its T.Op) that e is (through lets, casts and elementwise ops with scalars: a mean is
        sum(t, axis=1) / N), when it reduced a tile of rank 2 or more along an axis and did not keep it; else None."""
        for _ in range(16):
            if isinstance(e, T.Read) and e.var in self.let_values:
                e = self.let_values[e.var]
            elif isinstance(e, T.Op) and e.name == "reduce":
                return e if len(e.args[0].type.shape) >= 2 and isinstance(e.type, Tile) else None
            elif isinstance(e, T.Op) and (e.name in T.ELEMENTWISE_BINARY + T.ELEMENTWISE_UNARY or e.name == "cast"):
                tiles = [x for x in e.args if isinstance(x.type, Tile) and not _splatted(x)]
                if len(tiles) != 1:
                    return None
                e = tiles[0]
            else:
                return None
        return None

    def _check_reduction_alignment(self, r: T.Expr, other: T.Expr, shape, span) -> None:
        """`t - max(t, axis=1)` on a square tile: the row maxima ([B]) broadcast against [B, B] line up with the
        columns (axes align on the right), which is a shape error where B_M != B_N and a silently wrong result where
        they are equal. An error wherever the kept axes of a reduction along axis >= 1 land on other axes of a tile
        of the reduced tile's shape."""
        red = self._reduced(r)
        if red is None or not isinstance(other.type, Tile):
            return
        source = red.args[0].type.shape
        axis = red.attrs["axis"]
        if axis == 0 or len(other.type.shape) != len(source) or tuple(shape) != tuple(source):
            return
        kind, kept, rank = red.attrs["kind"], [i for i in range(len(source)) if i != axis], len(source)
        per, lands = ("row", "the columns") if rank == 2 else (f"index of axes {kept}", f"axes {list(range(1, rank))}")
        raise TleError(span, f"{kind}(..., axis={axis}) gives one value per {per} of its {list(source)} tile, but "
                             f"against a {list(other.type.shape)} tile it lines up with {lands} (axes align on the "
                             "right)",
                       [Note(f"reduced here: keep the axis with {kind}(..., axis={axis}, keepdims=true) (shape "
                             f"{list(source[:axis]) + [1] + list(source[axis + 1:])})", red.span),
                        f"where {lands} are meant, say so with expand_dims(..., 0)"])

    def _times_constant(self, e: T.Expr, n: int) -> bool:
        """Is e (through lets and integer casts) a product of something that varies and the constant n?"""
        for _ in range(16):
            if isinstance(e, T.Read) and e.var in self.let_values:
                e = self.let_values[e.var]
            elif isinstance(e, T.Op) and e.name == "cast" and is_int(e.type.dtype):
                e = e.args[0]
            else:
                break
        if not (isinstance(e, T.Op) and e.name == "mul" and len(e.args) == 2):
            return False
        a, b = e.args
        return any(isinstance(c, T.Const) and c.value == n and not isinstance(other, T.Const)
                   for c, other in ((a, b), (b, a)))

    def _size_one_source(self, x: T.Expr, axis: int):
        """(the load, its tile= list) when x's size-1 `axis` comes from a literal 1 in a load's tile= (through lets
        and elementwise ops of the same rank), else None: that axis was written to be 1, so reducing along it is a
        mistake, not a generic kernel whose constant happens to be 1 (BM rows, tuned down to one)."""
        seen = 0
        todo = [x]
        while todo and seen < 64:
            e, seen = todo.pop(), seen + 1
            if isinstance(e, T.Read) and e.var in self.let_values:
                todo.append(self.let_values[e.var])
            elif isinstance(e, T.Op) and e in self.literal_ones:
                ones, written = self.literal_ones[e]
                if axis in ones:
                    return e, written
            elif isinstance(e, T.Op) and (e.name in T.ELEMENTWISE_BINARY + T.ELEMENTWISE_UNARY or
                                          e.name in ("cast", "where", "bitcast")):
                todo += [a for a in e.args if isinstance(a.type, Tile) and len(a.type.shape) == len(x.type.shape)
                         and a.type.shape[axis] == 1]
        return None

    def accumulation_input(self, x, kind):
        """sum and cumsum accumulate f16/bf16/8-bit floats in f32 and small integers in i32 (docs/language.md)."""
        d = x.type.dtype
        if kind == "sum" and (d in ("f16", "bf16") or is_f8(d)):
            return T.Op(x.span, Tile("f32", x.type.shape), "cast", [x])
        self.require_arithmetic(x, x.span, f"{kind}()")
        if kind == "sum" and d in ("i1", "i8", "i16"):
            return T.Op(x.span, Tile("i32", x.type.shape), "cast", [x])
        if d == "i1":
            raise TleError(x.span, f"{kind}() of a bool tile; cast it to an integer first")
        return x

    def axis(self, x: ast.Expr, rank: int) -> int:
        if isinstance(x, ast.ListLit):  # torch's dim=(0, 1)
            raise TleError(x.span, "axis= takes one axis", ["without axis= the whole tile reduces to one value; for "
                                                             "some of its axes, reduce once per axis"])
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

    def b_any(self, e):
        return self._reduce(e, "any")

    def b_all(self, e):
        return self._reduce(e, "all")

    def b_argmax(self, e):
        return self._reduce(e, "argmax")

    def b_argmin(self, e):
        return self._reduce(e, "argmin")

    def b_cumsum(self, e):
        return self._cumulative(e, "sum")

    def b_cumprod(self, e):
        return self._cumulative(e, "prod")

    def b_cummax(self, e):
        return self._cumulative(e, "max")

    def b_cummin(self, e):
        return self._cumulative(e, "min")

    def _cumulative(self, e, kind):
        """cumsum / cumprod / cummax / cummin: an inclusive scan along `axis`, from the last element backwards with
        reverse=true."""
        a = self.args(e, ("x",), (), ("axis", "reverse"))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            raise TleError(a["x"].span, f"{e.func}() scans a tile, got {x.type}")
        rank = len(x.type.shape)
        if "axis" not in a and rank > 1:
            raise TleError(e.span, f"{e.func}() of a {rank}-D tile needs axis=")
        axis = self.axis(a["axis"], rank) if "axis" in a else 0
        reverse = self.const_bool(a["reverse"], "reverse=") if "reverse" in a else False
        if kind in ("sum", "prod"):
            x = self.accumulation_input(x, "sum")
        else:
            self.require_arithmetic(x, a["x"].span, f"{e.func}()")
            if x.type.dtype == "i1":
                raise TleError(a["x"].span, f"{e.func}() of a bool tile; cast it to an integer first")
        return T.Op(e.span, x.type, "scan", [x], {"kind": kind, "axis": axis, "reverse": reverse})

    def b_scan(self, e):
        return self._combined(e, "scan")

    def b_reduce(self, e):
        return self._combined(e, "reduce")

    def _combined(self, e, what):
        """scan(x1, ..., xN, axis=A, combine=f, identity=[...], reverse=R) and reduce(x1, ..., xN, axis=A,
        combine=f, identity=[...], keepdims=K): N tiles (of one shape after broadcasting) scanned or reduced together
        along A with the fn f, which takes an earlier element's N values and a later one's and returns their
        combination. One value per operand: a tile (scan), or a tile without axis A (reduce)."""
        kw_names = ("axis", "combine", "identity") + (("reverse",) if what == "scan" else ("keepdims", "commutative"))
        kws = {}
        for kw in e.kwargs:
            if kw.name not in kw_names:
                raise TleError(kw.span, f"{what}() has no argument '{kw.name}'",
                               _suggest_keyword(kw.name, kw_names) or [f"its keyword arguments: {', '.join(kw_names)}"])
            if kw.name in kws:
                raise TleError(kw.span, f"{what}() got argument '{kw.name}' twice")
            kws[kw.name] = kw.value
        usage = f"{what}(x, ..., axis=1, combine=f, identity=[...])"
        if not e.args:
            raise TleError(e.span, f"{what}() needs the tiles it {what}s", [usage])
        if len(e.args) > MAX_COMBINED:
            raise TleError(e.args[MAX_COMBINED].span, f"{what}() takes at most {MAX_COMBINED} tiles, got "
                                                      f"{len(e.args)}", ["combine fewer values per element"])
        if "combine" not in kws:
            raise TleError(e.span, f"{what}() needs combine=: the fn that combines two elements",
                           [f"sums, products and extremes have their own: {_BUILTIN_KINDS[what]}", usage])
        xs = [self.expr(x) for x in e.args]
        for x, src in zip(xs, e.args):
            if is_f8(x.type.dtype):
                raise TleError(src.span, f"{what}() of an 8-bit float; convert it first: cast<f32>(...)")
        if not any(isinstance(x.type, Tile) for x in xs):
            raise TleError(e.args[0].span, f"{what}() {what}s tiles, got {', '.join(str(x.type) for x in xs)}")
        shape = ()
        for x, src in zip(xs, e.args):
            got = broadcast_shapes(shape, _shape(x))
            if got is None:
                raise TleError(src.span, f"the tiles of {what}() do not broadcast to one shape: {list(shape)} and "
                                         f"{list(_shape(x))}")
            shape = got
        xs = [self.coerce(self.materialize(x), Tile(x.type.dtype, shape)) for x in xs]
        rank = len(shape)
        if "axis" in kws:
            axis = self.axis(kws["axis"], rank)
        elif what == "scan" and rank > 1:
            raise TleError(e.span, f"scan() of {rank}-D tiles needs axis=")
        else:
            axis = 0
            if rank > 1:  # reduce() without axis: the whole tiles, as one row each
                shape = (math.prod(shape),)
                xs = [T.Op(x.span, Tile(x.type.dtype, shape), "reshape", [x]) for x in xs]
        dtypes = [x.type.dtype for x in xs]
        comb = self.combine_fn(kws["combine"], dtypes, what)
        if "identity" in kws:
            comb.identity = self.identities(kws["identity"], dtypes, comb.fn)
        attrs = {"kind": "combine", "axis": axis, "combine": comb}
        if what == "scan":
            attrs["reverse"] = self.const_bool(kws["reverse"], "reverse=") if "reverse" in kws else False
        else:  # the fn commutes too: the GPU may combine in any order (a tree), not only in the elements' order
            attrs["commutative"] = self.const_bool(kws["commutative"], "commutative=") if "commutative" in kws \
                else False
        keep = what == "reduce" and "keepdims" in kws and self.const_bool(kws["keepdims"], "keepdims=")
        if len(xs) > 1:  # one operation, N results: each operand is read once
            xs = [self.temp(what, x, x.span) for x in xs]
        out = []
        for i, x in enumerate(xs):
            dtype = x.type.dtype
            if what == "scan":
                r = T.Op(e.span, Tile(dtype, shape), "scan", xs, {**attrs, "index": i})
            else:
                rest = shape[:axis] + shape[axis + 1:]
                r = T.Op(e.span, Tile(dtype, rest) if rest else Scalar(dtype), "reduce", xs, {**attrs, "index": i})
                if keep:  # the reduced axis (all of them, without axis=) kept with size 1
                    kept = (1,) * rank if "axis" not in kws else shape[:axis] + (1,) + shape[axis + 1:]
                    r = self.coerce(r, Tile(dtype, kept)) if not rest else \
                        T.Op(e.span, Tile(dtype, kept), "reshape", [r])
            out.append(r)
        return out[0] if len(out) == 1 else tuple(out)

    def combine_fn(self, x: ast.Expr, dtypes: list[str], what: str) -> T.Combine:
        """Check the fn named by combine= for elements of `dtypes`: its 2N parameters are scalars of those types
        (an earlier element's N values, then a later one's), and it returns N values of the same types, computed
        from them alone."""
        n = len(dtypes)
        if isinstance(x, ast.Name) and x.id not in self.p.fns and x.id in BUILTINS:
            own = {"scan": {"sum": "cumsum", "max": "cummax", "min": "cummin"},
                   "reduce": {"sum": "sum", "max": "max", "min": "min"}}[what].get(x.id)
            raise TleError(x.span, f"combine= takes a fn declared with `fn`, not the builtin '{x.id}'",
                           [f"{own}(x, axis=...) is the {'running ' if what == 'scan' else ''}{x.id} of a tile"] if own
                           else [f"declare one: fn combine(a, b) {{ return {x.id}(a, b) }}"])
        if not isinstance(x, ast.Name) or x.id not in self.p.fns:
            name = x.id if isinstance(x, ast.Name) else None
            got = f"unknown name '{name}'" if name else "an expression"
            raise TleError(x.span, f"combine= takes the name of a fn, got {got}",
                           (_suggest(name, self.p.fns) if name else []) or
                           [f"declare one: fn combine_{what}(a, b) {{ return a + b }}"])
        fn = self.p.fns[x.id]
        if x.id in self.fn_stack:
            raise TleError(x.span, f"fn '{x.id}' is used as a combine fn inside itself; recursion is not supported")
        if len(fn.params) != 2 * n:
            got = len(fn.params)
            raise TleError(x.span, f"fn '{fn.name}' takes {got} parameter{'s' if got != 1 else ''}, but {what}() of "
                                   f"{n} tile{'s' if n != 1 else ''} combines two elements of {n} value"
                                   f"{'s' if n != 1 else ''} each: it needs {2 * n}",
                           [Note(f"fn '{fn.name}' is declared here", fn.name_span),
                            "the first half of the parameters are the earlier element's values, the second half the "
                            "later one's"])
        saved = (self.out, self.scope, self.frames)
        self.out, self.frames = [], []
        fn_scope = _Scope(self.const_scope)
        params = []
        for i, p in enumerate(fn.params):
            ty = Scalar(dtypes[i % n])
            if p.type is not None:
                self.scope = fn_scope
                declared = self.type_expr(p.type)
                if declared != ty:
                    self.out, self.scope, self.frames = saved
                    raise TleError(p.span, f"parameter '{p.name}' of combine fn '{fn.name}' is declared {declared}, "
                                           f"but {what}() passes it {ty} elements",
                                   [Note(f"the fn is the combine of this {what}()", x.span)])
            var = T.Variable(p.name, ty, p.span)
            self.what[var] = f"a parameter of fn '{fn.name}'"
            if p.name != DISCARD:  # `_`: a value the combine does not read
                fn_scope.add(p.name, var, p.name_span)
            params.append(var)
        self.fn_stack.append(fn.name)
        self.scope = fn_scope
        try:
            result = self.block(_tail_returns(fn.body), fn_body=True)
            body = self.out
        except TleError as err:
            err.notes.append(Note(f"in fn '{fn.name}', the combine of this {what}()", x.span))
            raise
        finally:
            self.fn_stack.pop()
            self.out, self.scope, self.frames = saved
        note = Note(f"fn '{fn.name}' is the combine of this {what}()", x.span)
        if result is None:
            raise TleError(fn.name_span, f"combine fn '{fn.name}' returns no value", [note])
        results = list(result) if isinstance(result, tuple) else [result]
        if len(results) != n:
            raise TleError(results[-1].span, f"combine fn '{fn.name}' returns {len(results)} value"
                                             f"{'s' if len(results) != 1 else ''}, but {what}() of {n} tile"
                                             f"{'s' if n != 1 else ''} needs {n}: one per tile", [note])
        for s in body:
            if not isinstance(s, T.Bind):
                kind = {T.For: "a for loop", T.If: "an if on a run-time condition"}.get(type(s), "a statement "
                                                                                                   "with an effect")
                raise TleError(s.span, f"combine fn '{fn.name}' has {kind}; a combine computes one value from two "
                                       f"with expressions only",
                               ["choose between values with where(cond, a, b)", note])
        for v in [s.value for s in body] + results:
            for op in _ops_of(v):
                if isinstance(op.type, Tile) or op.name not in _COMBINE_OPS:
                    shown = {"reduce": op.attrs.get("kind"), "scan": "cum" + str(op.attrs.get("kind"))}.get(
                        op.name, op.name)
                    what_op = "a tile" if isinstance(op.type, Tile) else shown + "()"
                    raise TleError(op.span, f"combine fn '{fn.name}' computes on single elements; {what_op} has no "
                                            f"place in it",
                                   [note])
        for i, (r, dtype) in enumerate(zip(results, dtypes)):
            if isinstance(r, T.Const) and r.weak:
                r = results[i] = T.Const(r.span, Scalar(dtype), self.implicit_const(r, dtype))
            if r.type != Scalar(dtype):
                raise TleError(r.span, f"combine fn '{fn.name}' returns {r.type} for tile {i + 1} of {what}(), which "
                                       f"holds {dtype}", [f"convert it: cast<{dtype}>(...)", note])
        return T.Combine(fn.name, fn.name_span, params, body, results)

    def identities(self, x: ast.Expr, dtypes: list[str], fn: str) -> list:
        """identity=v (one tile) or identity=[v1, ..., vN]: compile-time constants of the tiles' types."""
        items = list(x.items) if isinstance(x, ast.ListLit) else [x]
        if len(items) != len(dtypes):
            raise TleError(x.span, f"identity= gives {len(items)} value{'s' if len(items) != 1 else ''} for "
                                   f"{len(dtypes)} tile{'s' if len(dtypes) != 1 else ''}: one per tile, the value "
                                   f"that fn '{fn}' leaves the other operand as it is with")
        out = []
        for item, dtype in zip(items, dtypes):
            v = self.expr(item)
            if not isinstance(v, T.Const):
                raise TleError(item.span, "identity= takes compile-time constants")
            if dtype == "i1":
                if v.type.dtype != "i1":
                    raise TleError(item.span, f"the identity of a bool tile is true or false, got {v.type}")
                out.append(bool(v.value))
                continue
            if v.type.dtype == "i1":
                raise TleError(item.span, f"the identity of a {dtype} tile cannot be a bool")
            out.append(self.implicit_const(v, dtype) if v.weak or is_float(dtype)
                       else _cast_const(v.value, dtype, item.span))
        return out

    def b_histogram(self, e):
        a = self.args(e, ("x", "bins"), (), ("mask",))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile) or len(x.type.shape) != 1:
            raise TleError(a["x"].span, f"histogram() counts the values of a 1-D tile, got {x.type}",
                           ["reshape(t, [n]) makes a tile 1-D"])
        if x.type.dtype == "i1":
            raise TleError(a["x"].span, "histogram() of a bool tile; cast it to an integer first")
        if not is_int(x.type.dtype):
            raise TleError(a["x"].span, f"histogram() counts integer values, got {x.type}",
                           ["cast<i32>(t) truncates floats toward zero"])
        bins = self.const_int(a["bins"], "histogram()'s bin count")
        if bins <= 0 or bins & (bins - 1):
            raise TleError(a["bins"].span, f"histogram() needs a power-of-two bin count, got {bins}",
                           ["its result is a tile, and a tile's size is a power of two: take the next one up"])
        if bins > HISTOGRAM_MAX_BINS:
            raise TleError(a["bins"].span, f"histogram() counts into at most {HISTOGRAM_MAX_BINS} bins, got {bins}",
                           ["the counts pass through 4 bytes of shared memory a bin, and the counting code grows "
                            "with the bins; for more, atomic_add(bins, values, 1) counts one element at a time"])
        ops = [x]
        if "mask" in a:
            mask = self.expr(a["mask"])
            self.require_bool(mask, a["mask"].span, "mask=")
            ops.append(self.coerce(mask, Tile("i1", x.type.shape)))
        return T.Op(e.span, Tile("i32", (bins,)), "histogram", ops)

    def _unary_math(self, e, name):
        a = self.args(e, ("x",))
        x = self.expr(a["x"])
        self.require_arithmetic(x, a["x"].span, f"{name}()")
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
                 "floor": _integral(math.floor), "ceil": _integral(math.ceil), "round": _integral(round),
                 "trunc": _integral(math.trunc), "log1p": math.log1p, "expm1": math.expm1, "tan": math.tan,
                 "sinh": math.sinh, "cosh": math.cosh, "asin": math.asin, "acos": math.acos, "atan": math.atan}[name]
            try:
                return T.Const(e.span, x.type, float(f(x.value)), x.weak)
            except (ValueError, ZeroDivisionError, OverflowError):
                raise TleError(e.span, f"{name}({x.value}) is undefined") from None
        return T.Op(e.span, x.type, name, [x])

    def b_atan2(self, e):
        """atan2(y, x): the angle of the point (x, y), in [-pi, pi], quadrant by the signs of both (C's atan2).
        Floats, promoted and broadcast as for y / x; integer literals become f32."""
        a = self.args(e, ("y", "x"))
        y, x = self.expr(a["y"]), self.expr(a["x"])
        for v, src in ((y, a["y"]), (x, a["x"])):
            self.require_arithmetic(v, src.span, "atan2()")
            if not is_float(v.type.dtype) and not (isinstance(v, T.Const) and v.weak):
                raise TleError(src.span, f"atan2() needs float operands, got {v.type}",
                               ["convert it: atan2(cast<f32>(y), cast<f32>(x))"])
        dtype = self.common_dtype(y, x)
        dtype = dtype if is_float(dtype) else "f32"
        if isinstance(y, T.Const) and isinstance(x, T.Const):
            return T.Const(e.span, Scalar(dtype), math.atan2(float(y.value), float(x.value)), y.weak and x.weak)
        shape = broadcast_shapes(_shape(y), _shape(x))
        if shape is None:
            raise TleError(e.span, f"atan2() operands do not broadcast: {list(_shape(y))}, {list(_shape(x))}",
                           _BROADCAST_NOTE)
        ty = Tile(dtype, shape) if shape else Scalar(dtype)
        return T.Op(e.span, ty, "atan2", [self.coerce(y, ty), self.coerce(x, ty)])

    def b_print(self, e):
        """print("message", v1, ...): shows each program's values when it runs (the interpreter, and both GPU paths
        through the device's printf); a debugging aid, in no defined order between programs."""
        if e.kwargs:
            raise TleError(e.kwargs[0].span, "print() takes no keyword arguments",
                           ['print("message", value, ...)'])
        args = list(e.args)
        message = args.pop(0).value if args and isinstance(args[0], ast.StrLit) else ""
        if not message and not args:
            raise TleError(e.span, "print() needs a message or a value to show", ['print("x =", x)'])
        if len(args) > MAX_COMBINED:
            raise TleError(args[MAX_COMBINED].span, f"print() shows at most {MAX_COMBINED} values, got {len(args)}",
                           ["print the rest with another print()"])
        values = []
        for a in args:
            v = self.materialize(self.expr(a))
            if is_f8(v.type.dtype):
                raise TleError(a.span, f"print() of an 8-bit float; convert it first: cast<f32>(...)")
            values.append(v)
        return T.Op(e.span, None, "print", values, {"message": message})

    def b_assert(self, e):
        """assert(cond, "message"): the interpreter stops with a located error where cond (a bool scalar or tile) is
        false; the GPU paths compile it away unless the launch asks for asserts=True (dialects/tle.py)."""
        if e.kwargs:
            raise TleError(e.kwargs[0].span, "assert() takes no keyword arguments", ['assert(x > 0.0, "x positive")'])
        if not e.args or len(e.args) > 2 or (len(e.args) == 2 and not isinstance(e.args[1], ast.StrLit)):
            raise TleError(e.span, "assert() takes a condition and, optionally, a message string",
                           ['assert(x > 0.0, "x positive")'])
        cond = self.expr(e.args[0])
        self.require_bool(cond, e.args[0].span, "assert()")
        if isinstance(cond, T.Const):
            if not cond.value:
                raise TleError(e.args[0].span, "this assert() always fails"
                               + (f": {e.args[1].value}" if len(e.args) == 2 else ""))
        message = e.args[1].value if len(e.args) == 2 else ""
        return T.Op(e.span, None, "assert", [self.materialize(cond)], {"message": message})

    def b_isnan(self, e):
        """isnan(x): x != x (true only for NaN; false for every integer)."""
        x = self.temp("isnan", self.tile_or_scalar_number(e, "isnan"), e.span)  # read twice: computed once
        return self.binary("!=", x, x, e.span)

    def b_isinf(self, e):
        """isinf(x): |x| == inf (false for every integer)."""
        return self._abs_against_inf(e, "isinf", "==", integers="!=")

    def b_isfinite(self, e):
        """isfinite(x): |x| < inf, false for NaN and the infinities (true for every integer)."""
        return self._abs_against_inf(e, "isfinite", "<", integers="==")

    def _abs_against_inf(self, e, name: str, op: str, integers: str):
        """|x| op inf for a float x; for an integer x, x `integers` x: the constant answer in x's shape."""
        x = self.tile_or_scalar_number(e, name)
        if not is_float(x.type.dtype):
            return self.binary(integers, x, x, e.span)
        return self.binary(op, T.Op(e.span, x.type, "abs", [x]), T.Const(e.span, Scalar("f32"), math.inf, True),
                           e.span)

    def b_sign(self, e):
        """sign(x): -1, 0 or 1 in x's type, as torch.sign: where(x > 0, 1, where(x < 0, -1, 0)), so NaN gives 0 (the
        comparisons are false) and -0.0 gives 0.0."""
        x = self.tile_or_scalar_number(e, "sign")
        if isinstance(x, T.Const):
            v = x.value
            return T.Const(e.span, x.type, _cast_const((v > 0) - (v < 0), x.type.dtype, e.span))
        x = self.temp("sign", x, e.span)  # read twice: computed once
        one, zero, minus_one = (self.coerce(T.Const(e.span, Scalar("i32"), v, True), x.type) for v in (1, 0, -1))
        literal_zero = T.Const(e.span, Scalar("i32"), 0, True)
        below = T.Op(e.span, x.type, "where", [self.binary("<", x, literal_zero, e.span), minus_one, zero])
        return T.Op(e.span, x.type, "where", [self.binary(">", x, literal_zero, e.span), one, below])

    def tile_or_scalar_number(self, e, fn: str) -> T.Expr:
        x = self.expr(self.args(e, ("x",))["x"])
        self.require_arithmetic(x, e.args[0].span if e.args else e.span, f"{fn}()")
        if x.type.dtype == "i1":
            raise TleError(e.args[0].span if e.args else e.span, f"{fn}() of a bool")
        return self.materialize(x)

    def b_clamp(self, e):
        """clamp(x, lo, hi): min(max(x, lo), hi), promoted and broadcast as min and max are; NaN propagates."""
        a = self.args(e, ("x", "lo", "hi"))
        x, lo, hi = (self.expr(a[k]) for k in ("x", "lo", "hi"))
        return self.binary("min", self.binary("max", x, lo, e.span, a["x"].span, a["lo"].span), hi, e.span,
                           a["x"].span, a["hi"].span)

    def b_where(self, e):
        a = self.args(e, ("cond", "a", "b"))
        c, x, y = self.expr(a["cond"]), self.expr(a["a"]), self.expr(a["b"])
        self.require_bool(c, a["cond"].span, "where()")
        dtype = self.common_dtype(x, y)
        shape = broadcast_shapes(_shape(c), _shape(x))
        shape = broadcast_shapes(shape, _shape(y)) if shape is not None else None
        if shape is None:
            raise TleError(e.span, f"where() operands do not broadcast: {list(_shape(c))}, {list(_shape(x))}, "
                                   f"{list(_shape(y))}", _BROADCAST_NOTE)
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
        if n > MAX_TILE_ELEMENTS:
            raise TleError(e.span, f"arange() of {n} elements is too large (at most {MAX_TILE_ELEMENTS})")
        return T.Op(e.span, Tile("i32", (n,)), "arange", [], {"start": start, "end": end})

    def b_reshape(self, e):
        a = self.args(e, ("x", "shape"))
        x = self.expr(a["x"])
        if not isinstance(a["shape"], ast.ListLit):
            raise TleError(a["shape"].span, "reshape() needs the new shape as a list: reshape(x, [A, B])")
        if not isinstance(x.type, Tile):  # a scalar is the one element of a tile of ones (numpy's 0-d array)
            shape = self.shape(list(a["shape"].items), a["shape"].span)
            if math.prod(shape) != 1:
                raise TleError(e.span, f"cannot reshape {_a(str(x.type))} (1 element) to {list(shape)} "
                                       f"({math.prod(shape)} elements)", [f"for a tile of copies: full<{x.type.dtype}>"
                                                                         f"{list(shape)}(x)"])
            return self.coerce(x, Tile(x.type.dtype, shape))
        for item in a["shape"].items:  # numpy's inferred axis
            if isinstance(item, ast.UnaryOp) and item.op == "-" and isinstance(item.operand, ast.IntLit):
                known = math.prod(self.const_int(i, "a size") for i in a["shape"].items if i is not item)
                hint = f" (the tile has {math.prod(x.type.shape)} elements)"
                raise TleError(item.span, "reshape() does not infer a size from -1: give every size" + hint,
                               [f"here: {math.prod(x.type.shape) // known}"] if known and
                               math.prod(x.type.shape) % known == 0 else None)
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

    def b_join(self, e):
        a = self.args(e, ("a", "b"))
        x, y = self.expr(a["a"]), self.expr(a["b"])
        for v, src in ((x, a["a"]), (y, a["b"])):
            self.require_arithmetic(v, src.span, "join()")
        return self.join(x, y, e.span)

    def join(self, x: T.Expr, y: T.Expr, span: Span) -> T.Expr:
        """x and y, promoted to one type and broadcast to one shape, side by side along a new last axis of 2 (two
        scalars give a tile of 2)."""
        dtype = self.common_dtype(x, y)
        shape = broadcast_shapes(_shape(x), _shape(y))
        if shape is None:
            raise TleError(span, f"join() operands do not broadcast: {list(_shape(x))} and {list(_shape(y))}",
                           _BROADCAST_NOTE)
        if 2 * math.prod(shape) > MAX_TILE_ELEMENTS:
            raise TleError(span, f"join() would make a tile of {2 * math.prod(shape)} elements, more than "
                                 f"{MAX_TILE_ELEMENTS}")
        ty = Tile(dtype, shape or (1,))
        joined = T.Op(span, Tile(dtype, ty.shape + (2,)), "join",
                      [self.coerce(self.materialize(x), ty), self.coerce(self.materialize(y), ty)])
        return joined if shape else T.Op(span, Tile(dtype, (2,)), "reshape", [joined])

    def b_split(self, e):
        """split(t): a tile whose last axis is 2 as two tiles, t[..., 0] and t[..., 1] (join's inverse). Both are
        read from one bound copy of t, so the lowering splits it once."""
        t = self.tile_arg(self.args(e, ("x",))["x"], "split")
        shape = t.type.shape
        if shape[-1] != 2:
            raise TleError(e.args[0].span, f"split() takes a tile whose last axis is 2, got {t.type}",
                           ["reshape it first, e.g. split(reshape(t, [N / 2, 2])) for even and odd elements"])
        if len(shape) == 1:  # a tile of 2 splits into two tiles of one element each
            shape = (1, 2)
            t = T.Op(e.span, Tile(t.type.dtype, shape), "reshape", [t])
        t = self.temp("split", t, e.span)
        return tuple(T.Op(e.span, Tile(t.type.dtype, shape[:-1]), "split", [t], {"index": i}) for i in (0, 1))

    # ---- cat, stack and take: joins, splits and reshapes, no ops of their own --------------------------------------
    def pieces(self, e, fn: str) -> tuple[list[T.Expr], ast.Expr | None]:
        """The values of cat(a, b, ..., axis=A) / stack(...): its positional arguments (two or more), and axis=."""
        if e.args and isinstance(e.args[0], ast.ListLit):  # torch.cat([a, b], dim=1), numpy.stack((a, b))
            raise TleError(e.args[0].span, f"{fn}() takes the tiles as arguments, not as a list",
                           [f"write {fn}(a, b, ..., axis=A)"])
        axis = None
        for kw in e.kwargs:
            if kw.name != "axis":
                raise TleError(kw.span, f"{fn}() has no argument '{kw.name}'",
                               _suggest_keyword(kw.name, ("axis",)) or [f"{fn}(a, b, ..., axis=A)"])
            if axis is not None:
                raise TleError(kw.span, f"{fn}() got argument 'axis' twice")
            axis = kw.value
        if len(e.args) < 2:
            raise TleError(e.args[0].span if e.args else e.span,
                           f"{fn}() needs at least two tiles, got {len(e.args)}",
                           [f"{fn}(a, b, ..., axis=A); " + ("expand_dims(a, A) is the stack of one tile"
                                                           if fn == "stack" else "the cat of one tile is the tile")])
        values = [self.expr(x) for x in e.args]
        for v, x in zip(values, e.args):
            self.require_arithmetic(v, x.span, f"{fn}()")
            if (v.type.dtype == "i1") != (values[0].type.dtype == "i1") and not (isinstance(v, T.Const) and v.weak):
                raise TleError(x.span, f"{fn}() of {values[0].type} and {v.type}: bool never mixes with numbers",
                               [Note(f"the first is {values[0].type}", e.args[0].span),
                                "cast<i32>(b) turns bools into 0 and 1; x != 0 turns numbers into bools"])
        return values, axis

    def pieces_dtype(self, values: list[T.Expr]) -> str:
        """The common element type of cat's or stack's values, as join() and a + b promote: typed values promote
        among themselves, and a literal takes their type (f32 for a float literal among integers); literals alone
        take their own (i32, i64 or f32)."""
        literals = [v for v in values if isinstance(v, T.Const) and v.weak]
        typed = [v.type.dtype for v in values if v not in literals] or [self.materialize(v).type.dtype
                                                                         for v in literals]
        dtype = typed[0]
        for d in typed[1:]:
            dtype = promote(dtype, d)
        if any(is_float(v.type.dtype) for v in literals) and not is_float(dtype):
            dtype = "f32"
        return dtype

    def axis_of(self, x: ast.Expr, count: int, fn: str, what: str, note: str) -> int:
        """axis= of cat, stack and take: one of `count` places, negative from the end."""
        axis = self.const_int(x, "axis=", "an axis is a compile-time integer: axis=1")
        if not -count <= axis < count:
            raise TleError(x.span, f"axis {axis} is out of range for {fn}() of {what}",
                           [f"{note}: {-count} to {count - 1}"])
        return axis % count

    def b_stack(self, e):
        """stack(a, b, ..., axis=A): N values of one shape along a new axis A (numpy.stack; axis 0 when not given),
        N a power of two; a scalar stands for a tile of the others' shape filled with it (as in join), and scalars
        alone give a 1-D tile. Nested joins put the N values along a new last axis (log2(N) axes of 2, reshaped
        into one), and one transpose moves it to A (none for the last axis)."""
        values, axis_expr = self.pieces(e, "stack")
        tiles = [(v, x) for v, x in zip(values, e.args) if isinstance(v.type, Tile)]
        shape = tiles[0][0].type.shape if tiles else ()
        for v, x in tiles[1:]:
            if v.type.shape != shape:
                raise TleError(x.span, f"stack() takes tiles of one shape: this one is {list(v.type.shape)}, the "
                                       f"first {list(shape)}",
                               [Note(f"the first tile, {tiles[0][0].type}", tiles[0][1].span),
                                "cat(a, b, axis=A) joins tiles whose sizes differ along A"])
        rank = len(shape)
        axis = 0 if axis_expr is None else self.axis_of(
            axis_expr, rank + 1, "stack", f"{rank}-D tiles" if tiles else "scalars",
            f"stack() of {rank}-D tiles puts its new axis at A" if tiles else "stack() of scalars has one axis")
        n = len(values)
        if n & (n - 1):
            raise TleError(e.span, f"stack() of {n} tiles would make an axis of {n}; tile sizes are powers of two",
                           [f"stack {1 << n.bit_length()} (zeros<T>[...] for the rest) and leave the extra "
                            f"ones unused (a store into a tensor of {n} along that axis drops them)"])
        if n * math.prod(shape) > MAX_TILE_ELEMENTS:
            raise TleError(e.span, f"stack() would make a tile of {n * math.prod(shape)} elements, more than "
                                   f"{MAX_TILE_ELEMENTS}", ["stack smaller tiles, e.g. a block of rows at a time"])
        dtype = self.pieces_dtype(values)
        ty = Tile(dtype, shape or (1,))
        stacked = self.stack_last([self.coerce(v, ty) for v in values], e.span)  # a literal: checked
        if not shape:
            return self.reshaped(stacked, (n,), e.span)
        return self.permuted(stacked, [*range(axis), rank, *range(axis, rank)], e.span)

    def stack_last(self, tiles: list[T.Expr], span: Span) -> T.Expr:
        """Tiles of one type (a power of two of them, at least 2) along a new last axis, in order: nested joins, the
        even-numbered ones joined with the odd-numbered ones, so that the log2(N) new axes of 2, read in row-major
        order, number the tiles; one reshape makes them one axis."""
        def nest(ts):
            if len(ts) == 1:
                return ts[0]
            even, odd = nest(ts[0::2]), nest(ts[1::2])
            return T.Op(span, Tile(even.type.dtype, even.type.shape + (2,)), "join", [even, odd])
        x = tiles[0]
        return self.reshaped(nest(tiles), x.type.shape + (len(tiles),), span)

    def reshaped(self, x: T.Expr, shape: tuple[int, ...], span: Span) -> T.Expr:
        """x reshaped (a reshape of a reshape is one reshape; none where the shape is x's)."""
        if x.type.shape == shape:
            return x
        if isinstance(x, T.Op) and x.name == "reshape":
            x = x.args[0]
        return x if x.type.shape == shape else T.Op(span, Tile(x.type.dtype, shape), "reshape", [x])

    def permuted(self, x: T.Expr, perm: list[int], span: Span) -> T.Expr:
        """transpose(x, perm=perm); a reshape where the axes of more than one element keep their order."""
        shape = x.type.shape
        new = tuple(shape[p] for p in perm)
        if [p for p in perm if shape[p] != 1] == [p for p in range(len(shape)) if shape[p] != 1]:
            return self.reshaped(x, new, span)
        return T.Op(span, Tile(x.type.dtype, new), "transpose", [x], {"perm": list(perm)})

    def b_cat(self, e):
        """cat(a, b, ..., axis=A) (concat): tiles equal in every dim but A, one after another along A
        (numpy.concatenate; axis 0 when not given). The length along A must come to a power of two, and each tile
        start at a multiple of its own length (as tiles in order of decreasing length do). N tiles of one length:
        their stack along a new last axis, moved before A and merged with it (one transpose and a reshape); other
        lengths: pairs of equal length catted that way, the shortest first."""
        values, axis_expr = self.pieces(e, "cat")
        for v, x in zip(values, e.args):
            if not isinstance(v.type, Tile):
                raise TleError(x.span, f"cat() joins tiles, got {v.type}",
                               ["a scalar has no length to join along; stack(a, b, ...) puts scalars in a tile, and "
                                "full<T>[1](v) is a tile of one"])
        first = values[0].type.shape
        rank = len(first)
        axis = 0 if axis_expr is None else self.axis_of(
            axis_expr, rank, "cat", f"{rank}-D tiles", f"cat() joins along one of the tiles' axes, "
                                                       f"0 to {rank - 1} or from the end")
        for v, x in zip(values[1:], e.args[1:]):
            s = v.type.shape
            if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
                raise TleError(x.span, f"cat() along axis {axis} takes tiles equal in every other dim: this one is "
                                       f"{list(s)}, the first {list(first)}",
                               [Note(f"the first tile, {values[0].type}", e.args[0].span),
                                "reshape, broadcast or transpose it first; stack(a, b, ...) adds a new axis"])
        lengths = [v.type.shape[axis] for v in values]
        total = sum(lengths)
        if total & (total - 1):
            raise TleError(e.span, f"cat() along axis {axis} gives a length of {total} "
                                   f"({' + '.join(map(str, lengths))}); tile sizes are powers of two",
                           [f"add a tile of zeros to make it {1 << total.bit_length()} and leave the rest unused (a "
                            f"store into a tensor of {total} along the axis drops it)"])
        size = total * math.prod(first) // first[axis]
        if size > MAX_TILE_ELEMENTS:
            raise TleError(e.span, f"cat() would make a tile of {size} elements, more than {MAX_TILE_ELEMENTS}",
                           ["cat smaller tiles, e.g. a block of rows at a time"])
        offset = 0
        for n, x in zip(lengths, e.args):
            if offset % n:
                raise TleError(x.span, f"cat() along axis {axis} would put this tile of {n} at {offset}, not at a "
                                       f"multiple of {n}",
                               ["cat() builds its result out of joins of equal halves, so each tile must start at a "
                                "multiple of its length along the axis (tiles in order of decreasing length do): "
                                "reorder them, or load the pieces as one tile"])
            offset += n
        dtype = self.pieces_dtype(values)
        parts = [self.coerce(v, Tile(dtype, v.type.shape)) for v in values]
        if len(set(lengths)) == 1:
            return self.cat_equal(parts, axis, e.span)
        done: list[T.Expr] = []  # aligned blocks of decreasing length, as the binary digits of the length so far
        for p in parts:
            done.append(p)
            while len(done) > 1 and done[-1].type.shape[axis] == done[-2].type.shape[axis]:
                b, a = done.pop(), done.pop()
                done.append(self.cat_equal([a, b], axis, e.span))
        (out,) = done
        return out

    def cat_equal(self, parts: list[T.Expr], axis: int, span: Span) -> T.Expr:
        """Tiles of one type (a power of two of them) one after another along `axis`: their stack along a new last
        axis, moved before `axis` and merged with it."""
        shape = parts[0].type.shape
        rank = len(shape)
        stacked = self.permuted(self.stack_last(parts, span), [*range(axis), rank, *range(axis, rank)], span)
        return self.reshaped(stacked, shape[:axis] + (len(parts) * shape[axis],) + shape[axis + 1:], span)

    b_concat = b_cat

    def b_take(self, e):
        """take(t, k, axis=A): the elements at index k along axis A, A dropped (numpy.take with one index; a 1-D tile
        gives a scalar). A negative k counts from the end. A compile-time k along the last axis of a tile of two or
        more axes (or along one followed only by axes of 1): one reshape into axes of 2 and a split per axis, k's bits
        picking the halves (as Triton's kernels take a narrow axis apart with tl.split). Along another axis, from a
        1-D tile (a scalar is a reduction anyway) and for a run-time k: where(arange(n) == k) on the elements' bits
        and a max along A (Triton's tl.sum(tl.where(...))); moving the axis last for the splits would move the tile
        through shared memory (docs/language.md has the sm_90 counts). A run-time k outside -n .. n-1 fails the
        interpreter's assert (and the GPU's under asserts=True); the GPU otherwise reads index k mod n."""
        a = self.args(e, ("x", "index"), (), ("axis",))
        x = self.expr(a["x"])
        if not isinstance(x.type, Tile):
            raise TleError(a["x"].span, f"take() needs a tile, got {x.type}",
                           ["take(t, k, axis=A) reads index k of a tile along A; a scalar is its only element"])
        shape, span = x.type.shape, e.span
        rank = len(shape)
        if "axis" in a:
            axis = self.axis_of(a["axis"], rank, "take", f"a {rank}-D tile", "take() picks along one of its axes")
        elif rank == 1:
            axis = 0
        else:
            raise TleError(span, f"take() from a tile of {rank} dims needs axis=",
                           ["take(t, k, axis=1) is t[:, k]; numpy's take without an axis reads the flattened tile: "
                            f"take(reshape(t, [{math.prod(shape)}]), k)"])
        n = shape[axis]
        k = self.expr(a["index"])
        if isinstance(k.type, Tile) or not is_int(k.type.dtype) or k.type.dtype == "i1":
            raise TleError(a["index"].span, f"the index of take() must be an integer scalar, got {k.type}",
                           ["for a tile of indices, gather(t, indices, axis=A) (native path only), or one take() "
                            "per index" if isinstance(k.type, Tile) else "convert it: cast<i32>(...)"])
        if isinstance(k, T.Const):
            if not -n <= k.value < n:
                raise TleError(a["index"].span, f"index {k.value} is out of range for axis {axis} of {x.type}",
                               [f"take() along an axis of {n} takes {-n} to {n - 1} (negative from the end)"])
            index = k.value % n
            if rank > 1 and n == 1:
                return self.reshaped(x, shape[:axis] + shape[axis + 1:], span)
            if rank > 1 and all(d == 1 for d in shape[axis + 1:]):
                return self.take_by_splits(x, axis, index, span)
            return self.take_by_max(x, axis, T.Const(span, Scalar("i32"), index), span)
        k = self.temp("take_index", k if k.type.dtype == "i64" else self.coerce(k, Scalar("i32")), span)
        inside = self.binary("and", self.binary(">=", k, T.Const(span, Scalar("i32"), -n, True), span),
                             self.binary("<", k, T.Const(span, Scalar("i32"), n, True), span), span)
        self.out.append(T.Eval(span, T.Op(span, None, "assert", [inside], {
            "message": f"take() index out of range for axis {axis} of {n} ({-n} to {n - 1})"})))
        index = self.binary("&", k, T.Const(span, Scalar("i32"), n - 1, True), span)  # -n .. -1 as 0 .. n-1
        return self.take_by_max(x, axis, self.coerce(index, Scalar("i32")), span)

    def take_by_splits(self, x: T.Expr, axis: int, index: int, span: Span) -> T.Expr:
        """x[..., index] along `axis`, which only axes of 1 follow: the axis reshaped into log2(n) axes of 2, then a
        split of the last one for each bit of index, lowest first."""
        shape = x.type.shape
        n = shape[axis]
        y = self.reshaped(x, (shape[:axis] or (1,)) + (2,) * (n.bit_length() - 1), span)  # split leaves a tile
        for bit in range(n.bit_length() - 1):
            y = T.Op(span, Tile(y.type.dtype, y.type.shape[:-1]), "split", [y], {"index": (index >> bit) & 1})
        return self.reshaped(y, shape[:axis] + shape[axis + 1:], span)

    def take_by_max(self, x: T.Expr, axis: int, index: T.Expr, span: Span) -> T.Expr:
        """x's elements at `index` (an i32 scalar) along `axis`: the others replaced with the smallest integer of
        the elements' width, their bits reduced by max along the axis (exact for every value, NaN and -0.0 too)."""
        shape = x.type.shape
        bits, back = self.as_bits(x, span)
        where = [1] * len(shape)
        where[axis] = shape[axis]
        at = T.Op(span, Tile("i32", (shape[axis],)), "arange", [], {"start": 0, "end": shape[axis]})
        picked = self.binary("==", self.reshaped(at, tuple(where), span), index, span)
        lowest = T.Const(span, Scalar(bits.type.dtype), -(1 << (BITS[bits.type.dtype] - 1)))
        kept = T.Op(span, bits.type, "where", [self.coerce(picked, Tile("i1", shape)), bits,
                                               self.coerce(lowest, bits.type)])
        out = shape[:axis] + shape[axis + 1:]
        # a network step's span: the padded-lanes check does not check this max as a reduction (a padded row taken
        # would warn that it "takes in" padding); its result is padded where the lane it picks is
        return back(T.Op(NetworkSpan.of(span), Tile(bits.type.dtype, out) if out else Scalar(bits.type.dtype),
                         "reduce", [kept], {"kind": "max", "axis": axis}))

    def as_bits(self, x: T.Expr, span: Span):
        """x as integers of its elements' width (a bool as i8), and how to turn such integers back into x's type."""
        d = x.type.dtype
        if is_int(d) and d != "i1":
            return x, lambda y: y
        bits = "i8" if d == "i1" else f"i{BITS[d]}"
        if d == "i1":
            return (T.Op(span, Tile(bits, x.type.shape), "cast", [x]),
                    lambda y: self.binary("!=", y, T.Const(span, Scalar(bits), 0, True), span))
        return (T.Op(span, Tile(bits, x.type.shape), "bitcast", [x]),
                lambda y: T.Op(span, _with_dtype(y.type, d), "bitcast", [y]))

    def b_flip(self, e):
        """flip(x, axis=A): the elements along axis A in reverse order; without axis=, along every axis (numpy.flip).
        No op of its own: as Triton's tl.flip, the axis is reshaped into log2(n) axes of 2 and each of them swaps
        its pair, here as sum(pair) - element in the integer type of the element's width, which is exact (integer
        arithmetic wraps). Both paths and the interpreter then run reshapes, sums of two and subtractions (the sums
        marked as network steps: the interpreter's padded-lanes check swaps the padded lanes at each subtraction)."""
        a = self.args(e, ("x",), (), ("axis",))
        x = self.tile_arg(a["x"], "flip")
        shape, d, span = x.type.shape, x.type.dtype, e.span
        axes = [self.axis(a["axis"], len(shape))] if "axis" in a else range(len(shape))
        bits = "i8" if d == "i1" else f"i{BITS[d]}"  # the integers the swaps work in
        y = x if d == bits else T.Op(span, Tile(bits, shape), "cast" if d == "i1" else "bitcast", [x])
        for axis in axes:
            steps = shape[axis].bit_length() - 1  # tile sizes are powers of two
            if steps == 0:
                continue
            pairs = shape[:axis] + (2,) * steps + shape[axis + 1:]
            y = self.temp("flip", T.Op(span, Tile(bits, pairs), "reshape", [y]), span)  # each step reads it twice
            for k in range(axis, axis + steps):
                wide = self.accumulation_input(y, "sum")  # i8 and i16 sum in i32: cast back, which wraps
                kept = pairs[:k] + (1,) + pairs[k + 1:]
                total = T.Op(NetworkSpan.of(span), Tile(wide.type.dtype, pairs[:k] + pairs[k + 1:]), "reduce",
                             [wide], {"kind": "sum", "axis": k})
                total = T.Op(span, Tile(wide.type.dtype, kept), "reshape", [total])
                if wide.type.dtype != bits:
                    total = T.Op(span, Tile(bits, kept), "cast", [total])
                y = self.temp("flip", self.binary("-", total, y, span), span)
            y = T.Op(span, Tile(bits, shape), "reshape", [y])
        if d == "i1":
            return self.binary("!=", y, T.Const(span, Scalar(bits), 0, True), span)
        return y if d == bits else T.Op(span, x.type, "bitcast", [y])

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

    def b_next_pow2(self, e):
        """The smallest power of two >= n, of a compile-time integer: a tile size that covers n (Triton's
        triton.next_power_of_2 on the host), e.g. tile=[next_pow2(D)] for a head of D = 96."""
        a = self.args(e, ("n",))
        v = self.expr(a["n"])
        if not isinstance(v, T.Const) or isinstance(v.value, bool) or not isinstance(v.value, int):
            raise TleError(a["n"].span, "next_pow2() needs a compile-time integer",
                           ["a size known only at run time cannot size a tile; pass it as a constant"])
        return T.Const(e.span, Scalar("i32"), _const_call("next_pow2", [v.value], e), weak=True)

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

    # ---- sorting (tle/bitonic.py expands it) -------------------------------------------------------------------
    def sortable(self, x: ast.Expr, fn: str) -> T.Expr:
        v = self.tile_arg(x, fn)
        self.require_numeric(v, x.span, f"{fn}()")
        return v

    def b_sort(self, e):
        a = self.args(e, ("x",), (), ("descending",))
        x = self.sortable(a["x"], "sort")
        descending = self.const_bool(a["descending"], "descending=") if "descending" in a else False
        block, packed = self.top_networks.get(("sort", x.var, descending), (None, None)) \
            if isinstance(x, T.Read) else (None, None)
        if block is self.out:  # argsort(x) came first, in this block: its network holds the values too
            return bitonic.values(self, packed, x.type.dtype, e.span)
        return bitonic.sort(self, x, descending, e.span)

    def b_topk(self, e):
        a = self.args(e, ("x", "k"))
        x = self.sortable(a["x"], "topk")
        k = self.topk_k(a["k"], x)
        block, packed = self.top_networks.get((x.var, k), (None, None)) if isinstance(x, T.Read) else (None, None)
        if block is self.out:  # argtopk(x, k) came first, in this block: its network holds the values too
            return bitonic.values(self, packed, x.type.dtype, e.span)
        return bitonic.topk(self, x, k, e.span)

    def positions_of(self, e, fn: str) -> T.Expr:
        """The value argument of argsort/argtopk: a sortable tile of values of up to 32 bits (each shares an i64
        key with its position)."""
        x = self.sortable(e, fn)
        if BITS[x.type.dtype] > 32:
            raise TleError(e.span, f"{fn}() takes values of up to 32 bits, got {x.type}",
                           [f"{fn}() sorts each value's key together with its position in one i64; convert "
                            "first without losing the order: cast<f32>(...) of f64 values, cast<i32>(...) of integers "
                            "whose range fits (cast<f32> keeps integers exact only to 2^24)"])
        return x

    def b_argsort(self, e):
        a = self.args(e, ("x",), (), ("descending",))
        x = self.positions_of(a["x"], "argsort")
        descending = self.const_bool(a["descending"], "descending=") if "descending" in a else False
        packed = bitonic.sort_positions(self, x, descending, e.span)
        if isinstance(x, T.Read) and not x.var.mutable:
            self.top_networks[("sort", x.var, descending)] = (self.out, packed)
        return bitonic.positions(self, packed, x.type.shape[-1] if descending else None, e.span)

    def b_argtopk(self, e):
        a = self.args(e, ("x", "k"))
        x = self.positions_of(a["x"], "argtopk")
        k = self.topk_k(a["k"], x)
        packed = bitonic.top_positions(self, x, k, e.span)
        if isinstance(x, T.Read) and not x.var.mutable:
            self.top_networks[(x.var, k)] = (self.out, packed)
        return bitonic.positions(self, packed, x.type.shape[-1], e.span)

    def topk_k(self, e: ast.Expr, x: T.Expr) -> int:
        k = self.const_int(e, "k")
        n = x.type.shape[-1]
        if k <= 0 or k & (k - 1) or k > n:
            raise TleError(e.span, f"k must be a power of two no larger than the last axis ({n}), got {k}",
                           [f"a tile's sizes are powers of two; take the next one up and ignore the extra values: "
                            f"where(arange({1 << max(k - 1, 0).bit_length()}) < {k}, ..., 0.0) in sums, and a store "
                            f"into a tensor of {k} columns drops the rest" if 0 < k < n else
                            f"the row has {n} values: topk of all of them is sort(t, descending=true), and more "
                            f"than {n} needs a wider tile" if k > n else "a tile's sizes are powers of two"])
        return k

    # ---- random numbers (tle/philox.py expands them) -------------------------------------------------------
    def b_randint(self, e):
        return self.random(e, "randint")

    def b_rand(self, e):
        return self.random(e, "rand")

    def b_randn(self, e):
        return self.random(e, "randn")

    def random(self, e, kind: str):
        a = self.args(e, ("seed", "offset"), kw_only=("rounds", "words"))
        seed = self.materialize(self.expr(a["seed"]))
        if isinstance(seed.type, Tile):
            raise TleError(a["seed"].span, f"the seed of {kind}() must be one integer scalar, got {seed.type}",
                           ["each element's offset picks its own number; vary the offsets, not the seed"])
        if seed.type.dtype not in ("i32", "i64"):
            raise TleError(a["seed"].span, f"the seed of {kind}() must be an i32 or i64 scalar, got {seed.type}",
                           ["convert it: cast<i64>(...)" if is_int(seed.type.dtype) and seed.type.dtype != "i1" else
                            "the seed's bits are Philox's key: pass an integer, e.g. an i64 parameter"])
        offset = self.materialize(self.expr(a["offset"]))
        if offset.type.dtype not in ("i32", "i64"):
            raise TleError(a["offset"].span, f"the offsets of {kind}() must be i32 or i64, got {offset.type}",
                           [f"convert them: {kind}(seed, cast<i32>(...))"])
        rounds = philox.ROUNDS
        if "rounds" in a:
            rounds = self.const_int(a["rounds"], "rounds")
            if not 1 <= rounds <= philox.MAX_ROUNDS:
                raise TleError(a["rounds"].span, f"rounds must be from 1 to {philox.MAX_ROUNDS}, got {rounds}",
                               [f"{philox.ROUNDS} (the default) is Philox4x32-10, as Triton and cuRAND use"])
        words = self.const_int(a["words"], "words") if "words" in a else 1
        if words not in (1, 4):
            raise TleError(a["words"].span, f"words must be 1 or 4, got {words}",
                           ["words=4 returns all four of Philox's words per offset, along a new last axis"])
        return philox.generate(self, kind, seed, offset, rounds, words, e.span)

    def temp(self, name: str, value: T.Expr, span: Span) -> T.Expr:
        """value bound to a fresh immutable variable (a read of it is free; a shared subtree would be built once
        per use), as it is now: a var assigned later does not change it. Constants and reads of lets are returned
        as they are."""
        if isinstance(value, T.Const) or (isinstance(value, T.Read) and not value.var.mutable):
            return value
        var = T.Variable(name, value.type, span, mutable=False, depth=len(self.frames))
        self.out.append(T.Bind(span, var, value))
        return T.Read(span, value.type, var)

    def b_umulhi(self, e):
        a = self.args(e, ("a", "b"))
        x, y = (self.u32_operand(a[n], "umulhi") for n in ("a", "b"))
        return self.umulhi(x, y, e.span)

    def u32_operand(self, x: ast.Expr, fn: str) -> T.Expr:
        """An operand of unsigned 32-bit arithmetic: an i32 value, or a literal from -2**31 to 2**32 - 1 taken
        as its 32 bits (so 0xD2511F53 can be written as it is)."""
        v = self.expr(x)
        if isinstance(v, T.Const) and v.weak and isinstance(v.value, int) and not isinstance(v.value, bool) and \
                -(2 ** 31) <= v.value < 2 ** 32:
            return T.Const(v.span, Scalar("i32"), wrap(v.value, "i32"))
        if v.type.dtype != "i32":
            raise TleError(x.span, f"{fn}() needs i32 operands, got {v.type}",
                           ["its operands are the 32 bits of each value; convert with cast<i32>(...)"])
        return v

    def umulhi(self, x: T.Expr, y: T.Expr, span: Span) -> T.Expr:
        """The high 32 bits of the 64-bit product of two i32 values read as unsigned (CUDA's __umulhi)."""
        shape = broadcast_shapes(_shape(x), _shape(y))
        if shape is None:
            raise TleError(span, f"tile shapes {list(_shape(x))} and {list(_shape(y))} do not broadcast",
                           _BROADCAST_NOTE)
        if isinstance(x, T.Const) and isinstance(y, T.Const):
            return T.Const(span, Scalar("i32"), wrap(((x.value & 0xFFFFFFFF) * (y.value & 0xFFFFFFFF)) >> 32, "i32"))
        ty = Tile("i32", shape) if isinstance(x.type, Tile) or isinstance(y.type, Tile) else Scalar("i32")
        return T.Op(span, ty, "umulhi", [self.coerce(x, ty), self.coerce(y, ty)])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _unread(value):
    """An effect whose result nobody reads: a one-element atomic without the reduction that makes its old value a
    scalar, so that the old value has no reader (a kernel that reads none gets relaxed atomics, dialects/tle.py
    relaxed_atomics) and no reduction is emitted for it."""
    return _element_of(value, ("atomic",)) or value


def _the_element(span, tile: T.Expr) -> T.Op:
    """The value of a one-element tile ([1] or [1, ..., 1]: a load without tile=, a gather or an atomic of scalars)
    as a scalar: a max over one value, which is that value (NaN and -0.0 too)."""
    if len(tile.type.shape) > 1:
        tile = T.Op(span, Tile(tile.type.dtype, (1,)), "reshape", [tile])
    return T.Op(span, Scalar(tile.type.dtype), "reduce", [tile], {"kind": "max", "axis": 0})


def _element_of(x, names: tuple[str, ...]) -> T.Op | None:
    """The op (named one of `names`) whose one-element tile x is the scalar of (_the_element), or None."""
    if isinstance(x, T.Op) and x.name == "reduce" and isinstance(x.args[0], T.Op) and x.args[0].name in names:
        return x.args[0]
    return None


def _shape(x: T.Expr) -> tuple[int, ...]:
    return x.type.shape if isinstance(x.type, Tile) else ()


def _with_dtype(t, dtype):
    return Tile(dtype, t.shape) if isinstance(t, Tile) else Scalar(dtype)


BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "**": "pow", "and": "and", "or": "or",
              "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "==": "eq", "!=": "ne", "<": "lt",
              "<=": "le", ">": "gt", ">=": "ge", "max": "max", "min": "min"}

UNARY_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "abs",
              "floor", "ceil", "round", "trunc", "log1p", "expm1", "tan", "sinh", "cosh", "asin", "acos", "atan")

_BUILTIN_KINDS = {"scan": "cumsum(x, axis=1), cumprod, cummax, cummin", "reduce": "sum(x, axis=1), max, min"}
# What a combine fn may compute with: elementwise arithmetic on its scalars.
_COMBINE_OPS = frozenset(T.ELEMENTWISE_BINARY + T.ELEMENTWISE_UNARY + ("where", "cast", "bitcast", "umulhi"))


def _ops_of(e: T.Expr):
    """Every Op of an expression tree."""
    if isinstance(e, T.Op):
        yield e
        for a in e.args:
            yield from _ops_of(a)


def _is_slice(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.func == "slice"


# The register constraints of inline PTX (LLVM's NVPTX letters) by register width; `c` is a byte in a 16-bit register.
_ASM_LETTERS = {8: "ch", 16: "h", 32: "rf", 64: "ld"}


def _asm_registers(dtype: str, pack: int) -> tuple[int, int]:
    """(registers, bits each) that `pack` elements of dtype take in one run of inline PTX: as Triton's lowering
    packs them, elements narrower than 32 bits share a 32-bit register, up to `pack` of them."""
    bits = BITS[dtype]
    per_reg = min(max(32 // bits, 1), pack)
    return pack // per_reg, bits * per_reg


def _check_asm_operands(e, code: str, constraints: str, result: str, args: list[str], pack: int) -> None:
    """The constraints of asm() against its operands: LLVM aborts the whole process (no exception) on a wrong count,
    a $N past the last operand, a tie to what is not an output of the same width, or two inputs tied to one
    output, so these are errors here, each naming what one run of the PTX sees. A letter that does not fit its
    register's width is one too (ptxas would report it, less clearly)."""
    span = e.args[1].span
    slots = [("the result", result)] + [(f"argument {i + 1}", d) for i, d in enumerate(args)]
    want = []  # (what, bits) per register, outputs first
    for what, d in slots:
        n, bits = _asm_registers(d, pack)
        want += [(f"{what} ({d}{f' x{pack // n}' if pack // n > 1 else ''})", bits)] * n
    n_out = _asm_registers(result, pack)[0]
    layout = ", ".join(f"${i}: {w} in {b} bits" for i, (w, b) in enumerate(want))
    parts = [c.strip() for c in constraints.split(",")] if constraints.strip() else []
    clobbers = [c for c in parts if c.startswith("~")]  # ~{memory}: not an operand
    for c in clobbers:
        if not re.fullmatch(r"~\{[a-z0-9]+\}", c):
            raise TleError(span, f"'{c}' is not a clobber: write ~{{memory}}")
    parts = [c for c in parts if not c.startswith("~")]
    if len(parts) != len(want):
        n_in = len(want) - n_out
        raise TleError(span, f"the constraints name {len(parts)} operand{'s' if len(parts) != 1 else ''}; with "
                             f"pack={pack} one run of this PTX has {len(want)}: {n_out} "
                             f"output{'s' if n_out > 1 else ''} then {n_in} input{'s' if n_in != 1 else ''}",
                       [layout, 'outputs are written "=r" (or =h, =l, =f, =d), inputs "r"'])
    tied: dict[int, int] = {}  # output -> the input tied to its register
    for i, (c, (what, bits)) in enumerate(zip(parts, want)):
        output = i < n_out
        letter = c[1:].lstrip("&") if c.startswith("=") else c
        if not output and letter.isdigit():  # tied: this input in the register of output `letter`
            if int(letter) >= n_out or want[int(letter)][1] != bits:
                raise TleError(span, f"constraint {i + 1} ('{c}') ties ${i}, {what}, to ${letter}, which is not an "
                                     f"output of {bits} bits", [layout])
            if int(letter) in tied:  # LLVM aborts on a second input tied to one output
                raise TleError(span, f"constraint {i + 1} ('{c}') ties ${i} to ${letter}, which ${tied[int(letter)]} "
                                     f"is already tied to: one input per output", [layout])
            tied[int(letter)] = i
            continue
        if output != c.startswith("=") or len(letter) != 1 or letter not in _ASM_LETTERS[bits]:
            ok = " or ".join(("=" if output else "") + x for x in _ASM_LETTERS[bits])
            role = "an output" if output else "an input"
            raise TleError(span, f"constraint {i + 1} ('{c}') is for ${i}, {what}, {role} in a {bits}-bit register: "
                                 f"write {ok}", [layout])
    for m in re.finditer(r"\$(\$|\d+)", code):
        if m.group(1) != "$" and int(m.group(1)) >= len(want):
            raise TleError(e.args[0].span, f"the PTX uses ${m.group(1)}, but one run has operands $0 to "
                                           f"${len(want) - 1}", [layout])


BUILTINS = {name[2:]: getattr(_KernelChecker, name) for name in dir(_KernelChecker) if name.startswith("b_")}
for _k in ATOMIC_DTYPES:  # atomic_add(...) .. atomic_xchg(...); atomic_cas has a method of its own
    BUILTINS.setdefault(f"atomic_{_k}", (lambda k: lambda self, e: self._scatter_like(e, "atomic", k))(_k))
for _n in UNARY_MATH:
    BUILTINS[_n] = (lambda n: lambda self, e: self._unary_math(e, n))(_n)
BUILTIN_NAMES = tuple(BUILTINS) + ("range", "zeros", "ones", "full", "cast", "bitcast", "asm")
EFFECT_BUILTINS = ("store", "scatter", *(f"atomic_{k}" for k in ATOMIC_DTYPES), "print", "assert")
FLOAT_DTYPES = FLOATS
# Names that no declaration may take besides the builtin functions: range, the constants, the element types.
_LOOP_ITERABLES = ("range", "static_range")  # names only a for loop's iterable may call
RESERVED = (*_LOOP_ITERABLES, *BUILTIN_CONSTS, *_all_dtypes(), "i1")
_MAX_STATIC_STEPS = 1024  # static_range's copies of its body
