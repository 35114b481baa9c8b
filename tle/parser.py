"""Parsing: .tle text -> tle.ast.Module.

`parse(text, filename)` is the entry point. The grammar is data (grammar.lark, LALR, strict); the Transformer
below has one method per rule. Lark exceptions become TleErrors here, with named messages for common mistakes,
and no Lark type leaves this module.
"""
from __future__ import annotations

import functools
import hashlib
import io
import re
import sys
from pathlib import Path

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from . import ast
from .debug import cache_dir, write_cache_file
from .diagnostics import Span, TleError, register_source
from .types import canonical

# lexer="basic": keywords are reserved everywhere (grammar.lark says why the contextual lexer is not used).
_OPTIONS = dict(parser="lalr", lexer="basic", propagate_positions=True, strict=True, maybe_placeholders=True)


def _build_parser() -> Lark:
    """The LALR parser of grammar.lark, from the disk cache when it holds this grammar's tables.

    Building it takes Lark about a second (the LALR tables, and strict mode's check that no two terminals can match
    the same text), which every `import tle` and every tlec run would pay. The built parser is pickled into the
    cache directory (TLE_CACHE_DIR, default ~/.cache/tle) under a key of everything that shapes it: the grammar text,
    the options and the Lark and Python versions. A missing, stale or unreadable file is rebuilt; the write goes to a
    temporary file renamed into place, so a process never reads another's half-written tables."""
    text = (Path(__file__).parent / "grammar.lark").read_text(encoding="utf-8")
    root = cache_dir()
    if root is None:
        return Lark(text, **_OPTIONS)
    key = hashlib.sha256(repr((text, sorted(_OPTIONS.items()), lark.__version__, sys.version_info[:2])).encode())
    path = Path(root) / "parser" / f"lark-{key.hexdigest()[:24]}.pickle"
    try:
        with open(path, "rb") as f:
            return Lark.load(f)
    except Exception:  # noqa: BLE001 (absent, truncated or from another Lark: build it again)
        pass
    parser = Lark(text, **_OPTIONS)
    tables = io.BytesIO()
    try:
        parser.save(tables)
    except Exception:  # noqa: BLE001 (tables this Lark cannot pickle only cost the build next time)
        return parser
    write_cache_file(str(path), tables.getvalue())  # atomic, as the kernel cache's files
    return parser


_parser = _build_parser()


def _span(meta_or_tok, file: str) -> Span:
    m = meta_or_tok
    if isinstance(m, Token):
        return Span(file, m.line, m.column, m.end_line, m.end_column)
    if getattr(m, "empty", False):
        return Span(file, 0, 0)
    return Span(file, m.line, m.column, m.end_line, m.end_column)


def _args(items, file):
    """Split call arguments into positionals and keywords; a positional after a keyword is an error."""
    args, kwargs = [], []
    for it in items:
        if it is None:
            continue
        if isinstance(it, ast.Keyword):
            if any(k.name == it.name for k in kwargs):
                raise TleError(it.span, f"keyword argument '{it.name}' given twice")
            kwargs.append(it)
        else:
            if kwargs:
                raise TleError(it.span, "positional argument after a keyword argument")
            args.append(it)
    return tuple(args), tuple(kwargs)


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def sp(self, meta) -> Span:
        return _span(meta, self.file)

    # ---- module -------------------------------------------------------------------------------------------
    def start(self, meta, items):
        pick = lambda cls: tuple(i for i in items if isinstance(i, cls))  # noqa: E731
        return ast.Module(self.sp(meta), self.file, pick(ast.Import), pick(ast.ConstDecl), pick(ast.Fn),
                          pick(ast.Kernel))

    def import_decl(self, meta, items):
        return ast.Import(self.sp(meta), str(items[0])[1:-1])

    def const_decl(self, meta, items):
        return ast.ConstDecl(self.sp(meta), str(items[0]), items[1], self.sp(items[0]))

    def fn_decl(self, meta, items):
        name, *rest = items
        body = rest[-1]
        params = tuple(p for p in rest[:-1] if p is not None)
        return ast.Fn(self.sp(meta), str(name), params, body, self.sp(name))

    def fn_param(self, meta, items):
        return ast.FnParam(self.sp(meta), str(items[0]), items[1], self.sp(items[0]))

    def kernel_decl(self, meta, items):
        name, consts, *rest = items
        body, tune = rest[-1], rest[-2]
        params = tuple(p for p in rest[:-2] if p is not None)
        return ast.Kernel(self.sp(meta), str(name), consts or (), params, body, self.sp(name), tune or ())

    def tune_clause(self, meta, items):
        return tuple(i for i in items if i is not None)

    def tune_param(self, meta, items):
        name, *values = items
        return ast.TuneParam(self.sp(meta), str(name), tuple(v for v in values if v is not None))

    def const_params(self, meta, items):
        return tuple(i for i in items if i is not None)

    def const_param(self, meta, items):
        return ast.ConstParam(self.sp(meta), str(items[0]), str(items[1]), items[2], self.sp(items[0]))

    def param(self, meta, items):
        return ast.Param(self.sp(meta), str(items[0]), items[1], self.sp(items[0]))

    def tensor_type(self, meta, items):
        return ast.TensorTypeExpr(self.sp(meta), str(items[0]), tuple(items[1:]))

    def tile_type(self, meta, items):
        return ast.TileTypeExpr(self.sp(meta), str(items[0]), tuple(items[1:]))

    def scalar_type(self, meta, items):
        return ast.ScalarTypeExpr(self.sp(meta), str(items[0]))

    # ---- statements ---------------------------------------------------------------------------------------
    def block(self, meta, items):
        return tuple(i for i in items if isinstance(i, ast.Stmt))

    def let_stmt(self, meta, items):
        return ast.Let(self.sp(meta), str(items[0]), items[1], items[2], self.sp(items[0]))

    def let_many(self, meta, items):
        *names, value = items
        return ast.LetMany(self.sp(meta), tuple(map(str, names)), value, tuple(self.sp(n) for n in names))

    def var_many(self, meta, items):
        *names, value = items
        return ast.VarMany(self.sp(meta), tuple(map(str, names)), value, tuple(self.sp(n) for n in names))

    def var_stmt(self, meta, items):
        return ast.Var(self.sp(meta), str(items[0]), items[1], items[2], self.sp(items[0]))

    def assign_stmt(self, meta, items):
        return ast.Assign(self.sp(meta), str(items[0]), str(items[1]), items[2], self.sp(items[0]))

    def assign_many(self, meta, items):
        *names, value = items
        return ast.AssignMany(self.sp(meta), tuple(map(str, names)), value, tuple(self.sp(n) for n in names))

    def value_list(self, meta, items):
        return ast.ValueList(self.sp(meta), tuple(items))

    def for_stmt(self, meta, items):
        var, it, *rest = items
        return ast.For(self.sp(meta), str(var), it, tuple(rest[:-1]), rest[-1], self.sp(var))

    def loop_hint(self, meta, items):
        args, kwargs = _args(items[1:], self.file)
        return ast.LoopHint(self.sp(meta), str(items[0]), args, kwargs)

    def if_stmt(self, meta, items):
        return ast.If(self.sp(meta), items[0], items[1], items[2])

    def if_block(self, meta, items):
        return (items[0],)

    def return_stmt(self, meta, items):
        return ast.Return(self.sp(meta), items[0])

    def bare_return(self, meta, items):
        return ast.Return(self.sp(meta), None)

    def expr_stmt(self, meta, items):
        name, *rest = items
        args, kwargs = _args(rest, self.file)
        call = ast.Call(self.sp(meta), str(name), _span(name, self.file), args, kwargs)
        return ast.ExprStmt(self.sp(meta), call)

    # ---- expressions --------------------------------------------------------------------------------------
    def int_lit(self, meta, items):
        return ast.IntLit(self.sp(meta), int(str(items[0]), 0))

    def float_lit(self, meta, items):
        return ast.FloatLit(self.sp(meta), float(str(items[0])))

    def str_lit(self, meta, items):
        # adjacent strings join, as in C and Python: a long asm() body spread over lines
        return ast.StrLit(self.sp(meta), "".join(str(s)[1:-1] for s in items))

    def true_lit(self, meta, items):
        return ast.BoolLit(self.sp(meta), True)

    def false_lit(self, meta, items):
        return ast.BoolLit(self.sp(meta), False)

    def name_ref(self, meta, items):
        return ast.Name(self.sp(meta), str(items[0]))

    def list_lit(self, meta, items):
        return ast.ListLit(self.sp(meta), tuple(i for i in items if i is not None))

    def kwarg(self, meta, items):
        return ast.Keyword(self.sp(meta), str(items[0]), items[1])

    def kwarg_name(self, meta, items):
        return items[0]

    def call(self, meta, items):
        callee, *rest = items
        if not isinstance(callee, ast.Name):
            raise TleError(callee.span, "only named functions can be called")
        args, kwargs = _args(rest, self.file)
        return ast.Call(self.sp(meta), callee.id, callee.span, args, kwargs)

    def generic_call(self, meta, items):
        func, dtype, shape, *rest = items
        args, kwargs = _args(rest, self.file)
        return ast.GenericCall(self.sp(meta), str(func), str(dtype), _span(dtype, self.file), shape, args, kwargs)

    def generic_call_noshape(self, meta, items):
        func, dtype, *rest = items
        args, kwargs = _args(rest, self.file)
        return ast.GenericCall(self.sp(meta), str(func), str(dtype), _span(dtype, self.file), None, args, kwargs)

    def comp_op(self, meta, items):
        return items[0]

    assign_op = shift_sym = add_sym = mul_sym = comp_op

    def hint_name(self, meta, items):
        return items[0]

    def generic_name(self, meta, items):
        return items[0]

    def shape_list(self, meta, items):
        return tuple(items)

    def _bin(self, meta, op, lhs, rhs):
        return ast.BinOp(self.sp(meta), op, lhs, rhs)

    def arith(self, meta, items):
        return self._bin(meta, str(items[1]), items[0], items[2])

    compare = arith
    shift_op = arith

    def pow_op(self, meta, items):
        return self._bin(meta, "**", items[0], items[1])

    def bitor_op(self, meta, items):
        return self._bin(meta, "|", items[0], items[1])

    def bitxor_op(self, meta, items):
        return self._bin(meta, "^", items[0], items[1])

    def bitand_op(self, meta, items):
        return self._bin(meta, "&", items[0], items[1])

    def or_op(self, meta, items):
        return self._bin(meta, "or", items[0], items[1])

    def and_op(self, meta, items):
        return self._bin(meta, "and", items[0], items[1])

    def not_op(self, meta, items):
        return ast.UnaryOp(self.sp(meta), "not", items[0])

    def neg(self, meta, items):
        return ast.UnaryOp(self.sp(meta), "-", items[0])

    def invert(self, meta, items):
        return ast.UnaryOp(self.sp(meta), "~", items[0])


# Named messages for common syntax mistakes (_example_label picks the example that failed in the same parser
# state, preferring one that failed on the same token). Each example may sit anywhere in a kernel.
_EXAMPLES = {
    "missing '{' after the kernel's parameters": ["kernel k(x: tensor<f32>[N]) let"],
    "missing '{' to open the block": ["kernel k() { if a < 1 let }", "kernel k() { for i in range(3) let }",
                                      "kernel k() { if a < 1 { } else let }"],
    "missing ')' to close the call": ["kernel k() { let a = f(1, 2 }"],
    "missing ']' to close the list": ["kernel k() { let a = f([1, 2) }", "kernel k() { let a = [1, 2) }"],
    "missing ')' to close the parenthesis": ["kernel k() { let a = (1 + 2 }"],
    "missing '=' in the declaration": ["kernel k() { let a 1 }", "kernel k() { var a: f32 1 }"],
    "missing '}' at the end of the block": ["kernel k() { let a = 1 "],
    "a statement cannot start here": ["kernel k() { = 1 }", "kernel k() { ) }"],
    "a statement is a let, var, assignment (NAME = ...), for, if, return or call":
        ["kernel k() { a + 1 }", "kernel k() { a[0] = 1 }"],
    "an expression is missing": ["kernel k() { let a = }", "kernel k() { let a = 1 + }",
                                 "kernel k() { let a = (1 + ) }"],
    "a parameter needs a type: write NAME: tensor<f32>[N] or NAME: i32": ["kernel k(x) {}", "kernel k(x, y: i32) {}"],
    "a compile-time constant needs a kind: write <NAME: int>, <NAME: float>, <NAME: bool> or <NAME: dtype>":
        ["kernel k<B>() {}", "kernel k<B = 1>() {}"],
    "'==' compares; '=' assigns, and an assignment is not an expression": ["kernel k() { if a = 1 { } }"],
    "comparisons do not chain: write (a < b) and (b < c)": ["kernel k() { let a = 1 < 2 < 3 }"],
    "a for loop reads: for NAME in range(...) { ... }": ["kernel k() { for i range(3) { } }"],
    "only kernels, fns, consts and imports may appear at the top level": ["let a = 1", "x = 1", "store(x)"],
}

# The grammar's words (every string terminal that looks like a name), in grammar order.
_KEYWORDS = tuple(t.pattern.value for t in _parser.terminals
                  if isinstance(t.pattern, PatternStr) and t.pattern.value.isidentifier())

# Terminals that can start an expression: an expected-token list holding these says "an expression" instead.
_EXPR_START = {"INT", "FLOAT", "NAME", "LPAR", "LSQB", "MINUS", "TILDE", "NOT", "TRUE", "FALSE", "ZEROS", "ONES",
               "FULL", "CAST", "BITCAST"}


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the file"
    return f"'{tok}'"


def parse(text: str, filename: str = "<string>") -> ast.Module:
    """Parse one .tle file. Raises TleError at the first syntax error."""
    register_source(filename, text)
    try:
        tree = _parser.parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, filename) from None
    _no_floor_division(text, filename)
    try:
        return _ToAst(filename).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, TleError):
            raise e.orig_exc from None
        raise


_OPERAND_ENDS = {"NAME", "INT", "FLOAT", "RPAR", "RSQB"}
_BINDS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "let", "var", "const", "return"}
# a line with code, then a comment that reads as one operand: the lines _no_floor_division looks at closely
_OPERAND = r"\d[\w.]*|[A-Za-z_]\w*|\(\s*[\w.]+(\s*[-+*/%]\s*[\w.]+)*\s*\)"  # 2, BLOCK, (k + 1); not (see docs)
_TRAILING_OPERAND_COMMENT = re.compile(rf"\S[ \t]*//[ \t]*({_OPERAND})[ \t]*$", re.M)


def _no_floor_division(text: str, filename: str) -> None:
    """`let h = x // 2` parses as `let h = x` and a comment, so a Python or Triton habit would silently drop the
    division. A comment that ends a line of `let`, `var`, `const`, `return` or an assignment, right after an operand,
    and reads as one (a number, a parenthesised expression, or a name the file uses) is an error. A comment that
    starts with a word (`// 2 warps`, `// the count`, `// (see docs)`) is one. (Inside brackets, the comment would
    eat the closing one: a syntax error.) An element type (`// f32`) or a dtype constant (`// T`) is never an
    operand: it cannot be divided by, and such a comment says what type a value has; nor is a hex or binary
    number, which such a comment gives as the bits of the value before it."""
    if not _TRAILING_OPERAND_COMMENT.search(text):  # the common case, without lexing the file again
        return
    prev, binds, depth, line, names, found = None, False, 0, 0, set(), []
    declared = []  # the last three tokens, for `T: dtype`
    types = set()
    for tok in _parser.lex(text, dont_ignore=True):
        if tok.type in ("WS", "BLOCK_COMMENT"):
            continue
        if tok.line != line:
            line, binds, depth = tok.line, False, 0
        if tok.type == "COMMENT":
            if binds and prev is not None and prev.line == tok.line and prev.type in _OPERAND_ENDS:
                found.append(tok)
            continue
        declared = (declared + [tok])[-3:]
        if [str(t) for t in declared[1:]] == [":", "dtype"] and declared[0].type == "NAME":
            types.add(str(declared[0]))
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(str(tok), 0)
        prev, binds = tok, binds or (depth == 0 and str(tok) in _BINDS)  # not a keyword argument's `=`
        if tok.type == "NAME":
            names.add(str(tok))
    for tok in found:
        operand = tok[2:].strip()
        a_name = operand[:1].isalpha() or operand[:1] == "_"
        if a_name and (canonical(operand) is not None or operand in types):
            continue
        if operand[:2].lower() in ("0x", "0b"):  # `const M = -2048144789   // 0x85ebca6b`: a value's bits
            continue
        if re.fullmatch(_OPERAND, operand) and (operand in names or not a_name):
            raise TleError(Span(filename, tok.line, tok.column, tok.line, tok.column + len(tok.rstrip())),
                           f"'//' starts a comment in tle, so '{tok.rstrip()}' is not a division: the expression "
                           "ends before it (tle has no floor-division operator)",
                           [f"integer '/' truncates toward zero, the floor for values that are not negative: write "
                            f"'/ {operand}'", "if this is a comment, start it with a word"])


def _syntax_error(e: UnexpectedInput, text: str, filename: str) -> TleError:
    line, col = max(e.line, 1), max(e.column, 1)
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        one = Span(filename, line, col, line, col + 1)
        if ch == '"':
            return TleError(one, "unterminated string",
                            ["a string (an import's path, print()'s message) ends on the same line"])
        if ch == ".":
            return TleError(one, "unexpected character '.': tle has no attributes, methods or modules",
                            [_DOT_NOTE.get(_word_before(text, e.pos_in_stream)) or _DOT_NOTE.get(
                                "." + _word_after(text, e.pos_in_stream)) or _DOT_NOTE[None]])
        if ch == "!":
            return TleError(one, "unexpected character '!': tle writes logical not as 'not'",
                            ["not (n > 0); '!=' compares, and '~' inverts the bits of an integer"])
        if ch == "@":
            return TleError(one, "unexpected character '@': tle has no matrix-product operator",
                            ["a matrix product is dot(a, b), or dot(a, b, acc) to add it into acc; '*' multiplies "
                             "elementwise"])
        if ch == "?":
            return TleError(one, "unexpected character '?': tle has no conditional operator",
                            ["where(cond, a, b) picks a where cond holds, else b (a scalar cond picks one value)"])
        return TleError(one, f"unexpected character '{ch}'")
    tok = e.token if isinstance(e, UnexpectedToken) else None
    if tok is not None and tok == "*" and tok.start_pos and text[tok.start_pos - 1] == "/":
        return TleError(Span(filename, line, col - 1, line, col + 1), "unterminated comment: '/*' has no '*/'")
    label = None
    try:
        label = _example_label(e)
    except Exception:  # noqa: BLE001 - a failed match only loses the named message
        label = None
    if tok is None or tok.type == "$END":
        # Lark gives $END the position of the last token; point just after that token.
        if tok is not None and tok.end_line:
            line, col = tok.end_line, tok.end_column
        expected = {_terminal_name(t) for t in getattr(e, "accepts", None) or getattr(e, "expected", None) or ()}
        if not label and "'}'" in expected:
            label = "missing '}' at the end of the block"
        return TleError(Span(filename, line, col, line, col + 1), f"syntax error: {label or 'unexpected end of file'}")
    end_col = tok.end_column if tok.end_column and tok.end_line == tok.line else col + 1
    span = Span(filename, line, col, line, end_col)
    expected = set(getattr(e, "accepts", None) or getattr(e, "expected", None) or ())
    if str(tok) == "fn" and text[:tok.start_pos].rsplit("\n", 1)[-1].strip() == "" and tok.column > 1:
        return TleError(span, "syntax error: a fn is declared at the top level of the file, not inside a kernel or "
                              "another fn", ["move it above the kernel; the kernel calls it by name"])
    if str(tok) in _KEYWORDS and "NAME" in expected and "INT" not in expected:  # a name, not an expression
        return TleError(span, f"syntax error: '{tok}' is a keyword and cannot be used as a name",
                        [f"keywords: {', '.join(_KEYWORDS)}"])
    prev = _previous_token(text, tok.start_pos) if tok.start_pos else None
    label = _python_habit_label(text, tok, prev) or label or _several_names_label(str(tok), expected, prev) or \
        _rule_label(str(tok), expected)
    if label and label.startswith("missing") and prev is not None:
        # clang-style: a missing closer belongs just after the previous token, not at the next line's first word
        if prev.end_line < tok.line:
            span = Span(filename, prev.end_line, prev.end_column, prev.end_line, prev.end_column + 1)
    if label and label.startswith("'if' starts a statement"):  # Python's `a if c else b`: point at its `if`
        ifs = list(re.finditer(r"\bif\b", text[:tok.start_pos].rsplit("\n", 1)[-1]))
        if ifs:
            return TleError(Span(filename, line, ifs[-1].start() + 1, line, ifs[-1].start() + 3),
                            f"syntax error: {label}", ["where(c, a, b) picks a where c holds, else b"])
    if prev is not None and str(prev) in ("elif", "while", "break", "continue") and label:  # the word before
        return TleError(Span(filename, prev.line, prev.column, prev.end_line, prev.end_column),
                        f"syntax error: {label}")
    if label:
        return TleError(span, f"syntax error: {label}", [f"found {_describe(tok)}"])
    names = sorted(_terminal_name(t) for t in expected - _EXPR_START)
    if _EXPR_START & expected and {"INT", "NAME"} <= expected:
        names.insert(0, "an expression")
    elif expected & _EXPR_START:
        names = sorted(_terminal_name(t) for t in expected)
    notes = [f"expected {' or '.join(names) if len(names) <= 2 else 'one of: ' + ', '.join(names)}"] \
        if names and len(names) <= 8 else []
    return TleError(span, f"syntax error: unexpected {_describe(tok)}", notes)


# What a '.' meant, by the word before it (a module) or after it (a method), in Triton's or torch's spelling.
_DOT_NOTE = {
    "tl": "builtins are called by name: write exp(x), not tl.exp(x) (docs/language.md lists them)",
    "math": "builtins are called by name: write exp(x), sqrt(x)",
    "torch": "builtins are called by name: write exp(x), sqrt(x)",
    ".to": "convert with cast<T>(x), e.g. cast<f32>(x)",
    ".shape": "a tile's shape is fixed by the code that makes it; a tensor's dims are names in its type (x: "
              "tensor<f32>[M, N] gives M and N)",
    ".T": "transpose a tile with transpose(x)",
    None: "call builtins by name (exp(x), sum(x, axis=1)) and convert with cast<T>(x)",
}


def _word_before(text: str, pos: int) -> str:
    m = re.search(r"(\w+)$", text[:pos])
    return m.group(1) if m else ""


def _word_after(text: str, pos: int) -> str:
    m = re.match(r"\.(\w+)", text[pos:])
    return m.group(1) if m else ""


@functools.cache
def _example_failures() -> tuple:
    """(label, LALR state, accepted terminals, token) where each of _EXAMPLES fails, parsed once per process."""
    out = []
    for label, examples in _EXAMPLES.items():
        for example in examples:
            try:
                _parser.parse(example)
            except UnexpectedInput as ut:
                if getattr(ut, "state", None) is not None:
                    out.append((label, ut.state.position, getattr(ut, "accepts", None), getattr(ut, "token", None)))
    return tuple(out)


def _example_label(e: UnexpectedInput) -> str | None:
    """The label of the example that failed in the same LALR state, expecting the same terminals: on the same token
    if one did, else the first. Lark's own match_examples also asks for the same parser stack depth, which grows
    with every statement before the error, so an example written as a kernel's first statement stopped matching
    from the second on ("missing '=' in the declaration" became "unexpected '1'")."""
    state = getattr(e, "state", None)
    if state is None:
        return None
    accepts, token, first = getattr(e, "accepts", None), getattr(e, "token", None), None
    for label, position, example_accepts, example_token in _example_failures():
        if position != state.position or (example_accepts is not None and example_accepts != accepts):
            continue
        if example_token == token:
            return label
        first = first or label
    return first


def _python_habit_label(text: str, tok: Token, prev: Token | None) -> str | None:
    """Python's and Triton's spellings that tle's grammar has no place for, named by what to write instead. They
    come before _EXAMPLES, whose examples fail in the same parser states for other reasons (`a if c else b` stops
    where `if a = 1 {` does)."""
    line = text[:tok.start_pos].rsplit("\n", 1)[-1]
    if str(tok) == "def" and not line.strip():
        return "Python's def: a function is fn NAME(a, b) { ... }, and a kernel is kernel NAME(...) { ... }"
    if str(tok) == "[" and prev is not None and re.fullmatch(r"\s*(kernel|fn)\b.*[(,]\s*\w+\s*:\s*\w+", line):
        return (f"a tensor parameter is written tensor<{prev}>[...] (e.g. x: tensor<f32>[M, N]); '{prev}' alone is "
                "a scalar")
    if str(tok) == "[" and prev is not None and prev.type in _OPERAND_ENDS and prev.line == tok.line and \
            line[:prev.column - 1].strip():  # inside an expression; `a[0] = 1` as a statement is _EXAMPLES'
        inside = text[tok.start_pos + 1:].split("]", 1)[0]
        if "None" in inside:  # Triton's x[:, None] / x[None, :]
            axis = [p.strip() for p in inside.split(",")].index("None") if "," in inside else 0
            return (f"a tile is not indexed with [...]: Triton's x[{inside.strip()}] adds an axis, which tle writes "
                    f"expand_dims(x, {axis})")
        if ":" in inside:
            return ("a tile is not sliced with [...]: load the part you need (load(x, tile=..., at=...)), or "
                    "reshape / split the tile")
        return ("a tile is not indexed with [...]: read one element with load(x, at=i), or reduce the tile (sum, "
                "max, ...)")
    if str(tok) in ("/", "*", "+", "-", "%") and re.search(r"\btensor\s*<[^<>]*>\s*\[[^\[\]]*$", line):
        return ("a tensor's dim is a name or an integer, not an expression: give it a name of its own ([M, G]) "
                "and check how it relates to the others in the kernel (assert(G == cdiv(K, GROUP)))")
    if str(tok) == "(" and prev is not None and str(prev) == "for":
        return "tle's loop is for i in range(start, stop, step) { ... }, without parentheses"
    if str(tok) == "]" and prev is not None and str(prev) == "[" and re.search(r"\btensor\s*<[^<>]*>\s*\[$", line):
        return ("a tensor has at least one dim: declare a scalar's tensor as tensor<f32>[1] (a 0-dim torch tensor "
                "passes as one), or take the value as a scalar parameter (alpha: f32)")
    if str(tok) in ("&", "|") and prev is not None and str(prev) == str(tok) and prev.end_pos == tok.start_pos:
        word = {"&": "and", "|": "or"}[str(tok)]
        return f"tle writes '{tok}{tok}' as '{word}': (a > 0) {word} (b < 5)"
    if str(tok) == "not" and prev is not None and str(prev) in ("&", "|", "^", "==", "!=", "<", "<=", ">", ">=",
                                                                 "+", "-", "*", "/", "%"):
        return (f"'not' binds more loosely than '{prev}' (as in Python): write a {prev} (not b), or a and not b "
                "for bools")
    if str(tok) == "=" and re.search(r"\bfn\s+\w+\s*\([^()]*$", line):
        return ("a fn parameter has no default value: pass every argument at the call (a kernel's compile-time "
                "constants take defaults: kernel k<EPS: float = 1e-6>)")
    if str(tok) == "else" and re.search(r"=.*\bif\b", line):
        return "'if' starts a statement: a value chosen by a condition is where(cond, a, b)"
    if str(tok) == "(" and prev is not None and str(prev) in ("zeros", "ones", "full", "cast", "bitcast", "asm"):
        form = {"zeros": "zeros<f32>[16, 16]", "ones": "ones<f32>[16, 16]", "full": "full<f32>[16, 16](value)",
                "cast": "cast<f32>(x)", "bitcast": "bitcast<i32>(x)",
                "asm": 'asm<f32>("tanh.approx.f32 $0, $1;", "=f,f", x)'}[str(prev)]
        return f"{prev} takes its element type in <...>: {form}"
    if str(tok) == ":" and re.match(r"\s*(for|if|else|while)\b", line):
        return "a block is in braces, not after a colon: for i in range(n) { ... }, if c { ... } else { ... }"
    if prev is not None and str(prev) == "elif":
        return "tle writes 'else if', not 'elif': if a { ... } else if b { ... }"
    if prev is not None and str(prev) == "while" and not line[:prev.column - 1].strip():
        return ("tle has no while loop: write for i in range(n) { ... } with a bound known when the loop starts "
                "(a program cannot wait for another, so there is nothing to spin on)")
    if prev is not None and str(prev) in ("break", "continue") and \
            line[:prev.column - 1].rstrip()[-1:] in ("", "{", "}", ";"):  # where a statement starts
        return (f"tle has no {prev}: a for loop runs its whole range. Put the rest of the body under an if, or "
                "keep a var flag (var done = false ... done = true) and test it; a bare return ends the program")
    if str(tok) == "," and re.search(r"\b(zeros|ones|full)\s*<[^<>]*>\s*\(\s*\([^()]*$", line):
        return "a shape is a list in brackets: zeros<f32>[16, 16], full<f32>[16, 16](value)"
    return None


def _previous_token(text: str, pos: int) -> Token | None:
    """The last token (comments skipped) before character offset pos."""
    last = None
    try:
        for last in _parser.lex(text[:pos]):
            pass
    except UnexpectedInput:
        return None
    return last


_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def _several_names_label(tok: str, expected: set[str], prev: Token | None) -> str | None:
    """Mistakes on the left of `let a, b = ...` / `a, b = ...`, told by the token (after the names the parser wants
    ',' or '='; after let or var, a name)."""
    want = {_terminal_name(t) for t in expected}
    if want == {"','", "'='"} and tok == ":":
        return "several names take no type annotation: write let a, b = ... and convert on the right (cast<f32>(x))"
    if want == {"','", "'='"} and tok in ("+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="):
        return f"{tok} assigns one var at a time: write a {tok} x and b {tok} y"
    if tok == "(" and prev is not None and str(prev) in ("let", "var"):
        return f"names after {prev} take no parentheses: {prev} a, b = ..."
    return None


def _rule_label(tok: str, expected: set[str]) -> str | None:
    """A named message from what the parser expected, for the mistakes the examples above miss because the
    parser is in another state (the same missing ')' after a keyword argument, say)."""
    want = {_terminal_name(t) for t in expected}
    if "')'" in want and want <= {"')'", "','"}:
        return "missing ')'"
    if "']'" in want and want <= {"']'", "','"}:
        return "missing ']' to close the list"
    if want == {"'{'"}:
        return "missing '{' to open the block"
    if tok == "=" and "'='" not in want:
        return "'==' compares; '=' assigns, and an assignment is not an expression"
    if tok in _COMPARISONS and f"'{tok}'" not in want and "'and'" in want:
        return "comparisons do not chain: write (a < b) and (b < c)"
    if "'='" in want and "'('" in want and want <= {"'='", "'+='", "'-='", "'*='", "'/='", "'%='", "'('", "','"}:
        return "a statement is a let, var, assignment (NAME = ...), for, if, return or call"
    if {"INT", "NAME"} <= expected:
        return "an expression is missing"
    return None


def _terminal_name(t: str) -> str:
    if t == "$END":
        return "the end of the file"
    try:
        pattern = _parser.get_terminal(t).pattern
        if isinstance(pattern, PatternStr):
            return f"'{pattern.value}'"
    except KeyError:
        pass
    return {"NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string"}.get(t, t.lower())
