"""The front end on valid programs: parse + check give the types, shapes and folded constants the language
reference (docs/language.md) promises. Bad programs are in tests/check/ (tests/test_frontend_errors.py)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import tle
from tle import typed as T
from tle.ast import dump
from tle.check import check_kernel, dtype_of, load_program
from tle.diagnostics import TleError
from tle.parser import parse
from tle.types import Scalar, Tensor, Tile

# The checker's unit tests type fragments of kernels, most of which write nothing on purpose
pytestmark = pytest.mark.filterwarnings("ignore::tle.TleWarning")

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "parse" / "data"


def kernel(text: str, name: str = "k", **constants) -> T.Kernel:
    return check_kernel(load_program(text, "t.tle"), name, constants)


def binds(k: T.Kernel) -> dict[str, T.Expr]:
    """name -> value of every Bind in the kernel body, loops and ifs included (last one wins)."""
    out = {}

    def walk(stmts):
        for s in stmts:
            if isinstance(s, T.Bind):
                out[s.var.name] = s.value
            elif isinstance(s, T.For):
                walk(s.body)
            elif isinstance(s, T.If):
                walk(s.then)
                walk(s.orelse)
    walk(k.body)
    return out


def ops(e: T.Expr) -> list[str]:
    """The op names of an expression tree, pre-order (reads of variables and constants left out)."""
    if isinstance(e, T.Op):
        return [e.name] + [n for a in e.args for n in ops(a)]
    return []


def values(*exprs: str, prelude: str = "", params: str = "") -> list[T.Expr]:
    """The checked value of each expression, each bound to a var (so constants stay visible as Consts)."""
    body = "".join(f"    var v{i} = {e}\n" for i, e in enumerate(exprs))
    k = kernel(f"kernel k({params}) {{\n{prelude}{body}}}\n")
    b = binds(k)
    return [b[f"v{i}"] for i in range(len(exprs))]


# ---- the reference's examples ---------------------------------------------------------------------------------
def _doc_blocks():
    text = (ROOT / "docs" / "language.md").read_text()
    return re.findall(r"```tle\n(.*?)```", text, re.S)


@pytest.mark.parametrize("index", range(len(_doc_blocks())))
def test_every_example_in_the_reference_checks(index):
    source = _doc_blocks()[index]
    program = load_program(source, f"language.md#{index}")
    assert program.kernel_names()
    for name in program.kernel_names():
        check_kernel(program, name)


def test_the_reference_has_the_three_complete_examples():
    names = {n for b in _doc_blocks() for n in re.findall(r"^kernel (\w+)", b, re.M)}
    assert {"softmax", "matmul", "layernorm"} <= names


# ---- kernels: parameters, constants, dims ---------------------------------------------------------------------
def test_parameters_dims_and_constants():
    k = kernel("kernel k<B: int = 32, T: dtype = bf16, EPS: float = 1e-5, F: bool = true>(\n"
               "    x: tensor<T>[M, N], w: tensor<f32>[N], fixed: tensor<i8>[B, 4], n: i32, eps: f32) {\n}\n")
    assert [str(p.type) for p in k.params] == ["tensor<bf16>[M, N]", "tensor<f32>[N]", "tensor<i8>[32, 4]",
                                               "i32", "f32"]
    assert list(k.dims) == ["M", "N"]
    assert k.constants == {"B": 32, "T": "bf16", "EPS": 1e-5, "F": True}


def test_constants_given_override_defaults_and_are_normalised():
    src = "kernel k<B: int = 32, T: dtype = f16, EPS: float = 1e-5, F: bool = false>(x: tensor<T>[N]) {\n}\n"
    assert kernel(src, B=64, T="float32", EPS=1, F=True).constants == {"B": 64, "T": "f32", "EPS": 1.0, "F": True}
    # tlec -D values arrive as text
    assert kernel(src, B="0x40", T="bf16", EPS="2.5", F="true").constants == \
        {"B": 64, "T": "bf16", "EPS": 2.5, "F": True}


def test_a_tile_size_given_at_launch_that_is_no_power_of_two_says_where_it_came_from():
    src = ("kernel k<BLOCK: int = 64, W: int>(x: tensor<f32>[N]) {\n"
           "    store(x, load(x, tile=[BLOCK * W], at=0), at=0)\n}\n")
    with pytest.raises(TleError, match="tile size must be a positive power of two, got 100") as e:
        kernel(src, BLOCK=50, W=2)
    notes = [n.message for n in e.value.notes]
    assert "BLOCK = 50 as given to this compile (a launch's BLOCK=..., tlec's -D BLOCK=...), not its default" in notes
    assert "W = 2 as given to this compile (a launch's W=..., tlec's -D W=...)" in notes


def test_dtype_constants_accept_torch_and_numpy_spellings():
    assert [dtype_of(v) for v in ("f16", "float16", "torch.bfloat16", "bool", "int64", "f17")] == \
        ["f16", "f16", "bf16", "i1", "i64", None]
    torch = pytest.importorskip("torch")
    assert dtype_of(torch.float16) == "f16"
    assert kernel("kernel k<T: dtype>(x: tensor<T>[N]) {\n}\n", T=torch.int32).params[0].type == Tensor("i32", ("N",))


def test_defaults_may_use_earlier_constants_and_module_consts():
    k = kernel("const BASE = 16\nkernel k<BM: int = (BASE * 4), BK: int = (BM / 2), T: dtype = f16, U: dtype = T>"
               "(x: tensor<U>[BM, BK]) {\n}\n")
    assert k.constants == {"BM": 64, "BK": 32, "T": "f16", "U": "f16"}
    assert k.params[0].type == Tensor("f16", (64, 32))  # constant dims are fixed sizes


def test_a_symbolic_dim_is_an_i32_value():
    (v,) = values("cdiv(N, 128)", params="x: tensor<f32>[N]")
    assert v.type == Scalar("i32") and ops(v) == ["div", "sub", "add"]


# ---- types and promotion ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, dtype", [
    ("h * 2.0", "f16"),          # a float literal takes the tile's type
    ("h + 1", "f16"),            # so does an integer literal
    ("b8 + 1", "i8"),
    ("n * 0.5", "f32"),          # a float literal with an integer gives f32
    ("h + n64", "f16"),          # float beats int
    ("h + f", "f32"),            # the wider type wins
    ("b8 + n", "i32"),
    ("h + bh", "f32"),           # f16 with bf16 gives f32
    ("n ** 2", "f32"),           # ** is always floating point
    ("n / 2", "i32"),
])
def test_promotion(expr, dtype):
    prelude = ("    let h = load(x, tile=[16])\n    let bh = load(y, tile=[16])\n    let b8 = load(z, tile=[16])\n")
    (v,) = values(expr, prelude=prelude,
                  params="x: tensor<f16>[N], y: tensor<bf16>[N], z: tensor<i8>[N], n: i32, n64: i64, f: f32")
    assert v.type.dtype == dtype


def test_a_named_literal_is_typed():
    (v,) = values("h * half", prelude="    let h = load(x, tile=[16])\n    let half = 0.5\n",
                  params="x: tensor<f16>[N]")
    assert v.type == Tile("f32", (16,))
    (v,) = values("h * half", prelude="    let h = load(x, tile=[16])\n    let half: f16 = 0.5\n",
                  params="x: tensor<f16>[N]")
    assert v.type == Tile("f16", (16,))


# ---- constant folding -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, value, dtype", [
    ("-7 / 2", -3, "i32"),               # C division truncates toward zero
    ("-7 % 3", -1, "i32"),               # C remainder has the sign of the dividend
    ("7 % -3", 1, "i32"),
    ("-7.5 % 2.0", -1.5, "f32"),         # fmod
    ("-2 ** 2", -4.0, "f32"),
    ("2 ** 3 ** 2", 512.0, "f32"),
    ("1 + 2 * 3 << 1", 14, "i32"),
    ("6 & 3 | 8 ^ 1", 11, "i32"),
    ("-5 >> 1", -3, "i32"),              # arithmetic shift
    ("2147483647 + 1", 2147483648, "i64"),  # literal arithmetic is exact
    ("cast<i8>(300)", 44, "i8"),         # an explicit cast wraps
    ("cast<i32>(-2.7)", -2, "i32"),      # and truncates
    ("cast<bool>(2)", True, "i1"),
    ("cdiv(10, 3)", 4, "i32"),
    ("max(3, 4.5)", 4.5, "f32"),
    ("exp(0)", 1.0, "f32"),
    ("(3 < 4) == true", True, "i1"),
    ("not 1 < 2 and true", False, "i1"),
    ("0xffffffff", 4294967295, "i64"),
])
def test_constant_folding(expr, value, dtype):
    (v,) = values(expr)
    assert isinstance(v, T.Const) and v.value == value and v.type == Scalar(dtype)


@pytest.mark.parametrize("expr, value", [
    ("round(2.5)", 2.0), ("round(3.5)", 4.0), ("round(-2.5)", -2.0), ("round(-0.3)", -0.0), ("trunc(-1.7)", -1.0),
    ("trunc(-0.5)", -0.0), ("ceil(-0.5)", -0.0), ("floor(inf)", float("inf")), ("round(-inf)", float("-inf")),
    ("trunc(1e30)", 1e30),
])
def test_integral_functions_fold_as_the_gpu_computes_them(expr, value):
    """Ties to even, a zero result keeps the operand's sign, infinities stay (Python's math.floor(inf) raises)."""
    (v,) = values(expr)
    assert isinstance(v, T.Const) and v.value == value and math.copysign(1, v.value) == math.copysign(1, value)


def test_strong_integer_arithmetic_wraps():
    (v,) = values("big + 1", prelude="    let big = 2147483647\n")
    assert v.value == -2147483648 and v.type == Scalar("i32")


def test_constants_size_tiles_and_a_constant_let_is_a_constant():
    k = kernel("const ROWS = 4\nkernel k<B: int = 8>(x: tensor<f32>[N, M]) {\n"
               "    let cols = B * 4\n"
               "    let t = load(x, tile=[ROWS / 2, cols])\n"
               "    let u = zeros<f32>[ROWS, 1 << 5]\n}\n")
    b = binds(k)
    assert "cols" not in b  # a let of a constant is folded away, not a run-time variable
    assert b["t"].type == Tile("f32", (2, 32)) and b["t"].attrs["tile"] == (2, 32)
    assert b["u"].type == Tile("f32", (4, 32))


# ---- reductions and shapes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, type_", [
    ("max(t, axis=1, keepdims=true)", Tile("f16", (32, 1))),
    ("max(t, axis=1)", Tile("f16", (32,))),
    ("sum(t, axis=0)", Tile("f32", (64,))),            # f16 sums accumulate and return f32
    ("sum(t, axis=-1, keepdims=true)", Tile("f32", (32, 1))),
    ("sum(t)", Scalar("f32")),                          # no axis: the whole tile
    ("min(t, keepdims=true)", Tile("f16", (1, 1))),
    ("argmax(t, axis=1)", Tile("i32", (32,))),
    ("sum(i8s, axis=0)", Scalar("i32")),               # small integers sum in i32
    ("sum(i8s, axis=0, keepdims=true)", Tile("i32", (1,))),
    ("cumsum(t, axis=1)", Tile("f32", (32, 64))),
    ("max(t, 1.0)", Tile("f16", (32, 64))),            # two positionals: elementwise
    ("t - max(t, axis=1, keepdims=true)", Tile("f16", (32, 64))),
    ("dot(t, transpose(t))", Tile("f32", (32, 32))),
    ("dot(t, transpose(t), zeros<f16>[32, 32])", Tile("f16", (32, 32))),
    ("reshape(t, [64, 32])", Tile("f16", (64, 32))),
    ("expand_dims(i8s, 0)", Tile("i8", (1, 16))),
    ("broadcast(i8s, [4, 16])", Tile("i8", (4, 16))),
    ("transpose(zeros<f32>[2, 4, 8], perm=[2, 0, 1])", Tile("f32", (8, 2, 4))),
    ("where(t > 0.0, t, 0.0)", Tile("f16", (32, 64))),
    ("arange(8, 24)", Tile("i32", (16,))),
    ("gather(x, [arange(0, 32), 0])", Tile("f16", (32,))),
    ("atomic_add(w, arange(0, 16), 1, mask=arange(0, 16) < 4)", Tile("i32", (16,))),
    ("full<f32>[4](n)", Tile("f32", (4,))),
    ("bitcast<i16>(t)", Tile("i16", (32, 64))),
])
def test_result_types(expr, type_):
    (v,) = values(expr, prelude="    let t = load(x, tile=[32, 64])\n    let i8s = load(y, tile=[16])\n",
                  params="x: tensor<f16>[M, N], y: tensor<i8>[N], w: tensor<i32>[N], n: i32")
    assert v.type == type_


def test_keepdims_reduce_is_a_reduce_then_a_reshape():
    (v,) = values("max(t, axis=1, keepdims=true)", prelude="    let t = load(x, tile=[32, 64])\n",
                  params="x: tensor<f32>[M, N]")
    assert ops(v) == ["reshape", "reduce"]
    assert v.args[0].attrs == {"kind": "max", "axis": 1} and v.args[0].type == Tile("f32", (32,))


@pytest.mark.parametrize("expr, want", [
    ("t ** 2", ["mul"]),
    ("t ** 3.0", ["mul", "mul"]),
    ("t ** 4", ["mul"]),                  # (t * t) * (t * t), the square bound once
    ("h ** 3", ["cast", "mul", "mul"]),   # f16 multiplies in f32 and rounds once, as pow does
    ("n ** 2", ["mul"]),                  # an int base becomes f32 first (bound with the cast)
    ("t ** 2.5", ["pow", "splat"]),       # other exponents stay pow
    ("t ** 5", ["pow", "splat"]),
])
def test_small_integer_powers_are_multiplies(expr, want):
    (v,) = values(expr, prelude="    let t = load(x, tile=[16])\n    let h = load(y, tile=[16])\n",
                  params="x: tensor<f32>[N], y: tensor<f16>[N], n: i32")
    assert ops(v) == want


def test_broadcasts_and_casts_are_explicit_ops():
    (v,) = values("t + n", prelude="    let t = load(x, tile=[16, 8])\n", params="x: tensor<f16>[M, N], n: i32")
    assert ops(v) == ["add", "splat", "cast"]  # n is cast to f16, then splat to the tile
    (v,) = values("t + r", prelude="    let t = load(x, tile=[16, 8])\n    let r = load(x, tile=[1, 8])\n",
                  params="x: tensor<f32>[M, N]")
    assert ops(v) == ["add", "broadcast"]
    (v,) = values("t + r", prelude="    let t = load(x, tile=[16, 8])\n    let r = load(y, tile=[8])\n",
                  params="x: tensor<f32>[M, N], y: tensor<f32>[N]")
    assert ops(v) == ["add", "broadcast", "reshape"]  # [8] -> [1, 8] -> [16, 8]


def test_load_and_store_attributes():
    k = kernel("kernel k(x: tensor<f16>[M, N], y: tensor<i32>[N]) {\n"
               "    let t = load(x, tile=[4, 8], at=[program_id(0), 1], pad=-inf)\n"
               "    let u = load(y, tile=16, at=program_id(1))\n"
               "    store(x, t, at=[0, 0])\n}\n")
    b = binds(k)
    assert b["t"].attrs == {"tile": (4, 8), "padding": float("-inf")} and b["t"].tensor.name == "x"
    assert b["u"].attrs == {"tile": (16,), "padding": 0}
    store = k.body[-1].expr
    assert store.name == "store" and store.type is None and len(store.args) == 3


def test_a_scalar_stores_as_the_one_element_tile_at_its_index():
    k = kernel("kernel k(x: tensor<f32>[M, N], y: tensor<f32>[M], z: tensor<i16>[M, 2]) {\n"
               "    store(y, sum(load(x, tile=[1, 32], at=[program_id(0), 0])), at=program_id(0))\n"
               "    store(z, 7, at=[program_id(0), 1])\n}\n")
    row, lit = (s.expr for s in k.body)
    assert row.args[0].type == Tile("f32", (1,)) and row.args[0].name == "splat"
    assert lit.args[0].type == Tile("i16", (1, 1))  # a literal takes the tensor's type


def test_a_scalar_of_another_type_is_not_stored():
    with pytest.raises(TleError, match=r"cannot store an f32 into tensor<f16>\[M\] 'y'"):
        kernel("kernel k(y: tensor<f16>[M]) {\n    store(y, 1.5 * cast<f32>(program_id(0)), at=program_id(0))\n}\n")


# ---- statements -------------------------------------------------------------------------------------------------
def test_loops_carry_the_vars_they_assign():
    k = kernel("kernel k(x: tensor<f32>[N], n: i32) {\n    var acc = zeros<f32>[16]\n    var c = 0\n"
               "    let fixed = 1.0\n"
               "    for i in range(0, n, 2) pipeline(stages=4) unroll(2) {\n        acc += load(x, tile=[16], at=[i])\n"
               "        var inner = 0\n        inner += i\n        c += 1\n    }\n}\n")
    loop = k.body[-1]
    assert isinstance(loop, T.For) and [v.name for v in loop.carried] == ["acc", "c"]
    assert (loop.stages, loop.unroll, loop.step.value) == (4, 2, 2)


def test_a_static_if_keeps_only_the_taken_branch():
    src = ("kernel k<BIAS: bool = false>(x: tensor<f32>[N]) {\n    var t = load(x, tile=[16])\n"
           "    if BIAS {\n        t = t + undefined_name\n    } else {\n        t = t * 2.0\n    }\n}\n")
    k = kernel(src)  # the untaken branch is not checked: undefined_name is no error
    assert not any(isinstance(s, T.If) for s in k.body)
    assert ops(binds(k)["t"]) == ["mul", "splat"]
    with pytest.raises(TleError, match="unknown name 'undefined_name'"):
        kernel(src, BIAS=True)


def test_a_run_time_if_merges_what_its_branches_assign():
    k = kernel("kernel k(n: i32) {\n    var a = 0\n    var b = 0.0\n"
               "    if n > 3 { a = 1 } else if n < 0 { b = 2.0 } else { a = 2 }\n}\n")
    outer = k.body[-1]
    assert isinstance(outer, T.If) and [v.name for v in outer.carried] == ["a", "b"]
    inner = outer.orelse[0]
    assert isinstance(inner, T.If) and [v.name for v in inner.carried] == ["b", "a"]


# ---- fns ------------------------------------------------------------------------------------------------------
FN_KERNEL = """\
fn silu(x) {
    return x * sigmoid(x)
}
fn row(src, r, width) {
    return load(src, tile=[1, width], at=[r, 0])
}
kernel k<B: int = 32>(a: tensor<f16>[M, N], b: tensor<f32>[M, N]) {
    let r = program_id(0)
    let x16 = silu(row(a, r, B))
    let x32 = silu(row(src=b, width=B * 2, r=r))
}
"""


def test_fn_inlined_at_two_call_sites_of_different_types():
    k = kernel(FN_KERNEL)
    b = binds(k)
    assert b["x16"].type == Tile("f16", (1, 32))  # the literal-free body stays in f16
    assert b["x32"].type == Tile("f32", (1, 64))  # a constant argument sizes the tile
    assert ops(b["x16"]) == ["mul", "sigmoid"]
    # each call binds its own parameter variable
    params = [s.var for s in k.body if isinstance(s, T.Bind) and s.var.name == "x"]
    assert len(params) == 2 and params[0] is not params[1]
    assert [p.type.dtype for p in params] == ["f16", "f32"]


def test_fn_literal_arguments_stay_literals_and_typed_parameters_convert():
    src = ("fn scale(t, s) {\n    return t * s\n}\nfn at_most_1(v: f32) {\n    return min(v, 1)\n}\n"
           "kernel k(x: tensor<f16>[N]) {\n    let t = load(x, tile=[16])\n    let a = scale(t, 0.5)\n"
           "    var c = at_most_1(3)\n}\n")
    b = binds(kernel(src))
    assert b["a"].type == Tile("f16", (16,))
    assert b["c"].type == Scalar("f32") and b["c"].value == 1.0


def test_fn_sees_kernel_constants_but_not_caller_variables():
    ok = "fn z() {\n    return zeros<f32>[B]\n}\nkernel k<B: int = 8>() {\n    let a = z()\n}\n"
    assert binds(kernel(ok))["a"].type == Tile("f32", (8,))
    hidden = "fn z() {\n    return secret\n}\nkernel k() {\n    let secret = 1\n    let a = z()\n}\n"
    with pytest.raises(TleError, match="unknown name 'secret'"):
        kernel(hidden)


# ---- imports ----------------------------------------------------------------------------------------------------
def test_import_and_diamond_import():
    path = DATA / "main.tle"
    program = load_program(path.read_text(), str(path))
    assert program.kernel_names() == ["uses_imports"]  # the file's own kernels ...
    assert set(program.kernels) == {"uses_imports", "imported_kernel"}  # ... and the imported ones
    assert set(program.fns) == {"scaled", "twice_scaled"} and program.const_values == {"SCALE": 0.5}
    k = check_kernel(program, "uses_imports")
    stores = [s.expr for s in k.body if isinstance(s, T.Eval)]
    assert [s.args[0].type for s in stores] == [Tile("f16", (64,)), Tile("f32", (64,))]
    check_kernel(program, "imported_kernel")


# ---- the syntax tree ------------------------------------------------------------------------------------------
def test_ast_dump_is_stable():
    text = (DATA / "dump.tle").read_text()
    assert dump(parse(text, "dump.tle")) + "\n" == (DATA / "dump.ast").read_text()


def test_ast_nodes_carry_spans_of_their_names():
    m = parse("kernel   softmax<B: int>(x: tensor<f32>[N]) {\n    let value = 1\n}\n", "s.tle")
    k = m.kernels[0]
    assert (k.name_span.line, k.name_span.col, k.name_span.end_col) == (1, 10, 17)
    let = k.body[0]
    assert (let.name_span.line, let.name_span.col, let.name_span.end_col) == (2, 9, 14)
    assert (let.span.col, let.span.end_col) == (5, 18)


def test_keywords_and_separators():
    m = parse("kernel k() { let a = 1 let b = 2; ; var c = a /* inline */ + b }\n// end\n")
    assert [type(s).__name__ for s in m.kernels[0].body] == ["Let", "Let", "Var"]
    assert parse("kernel k(x: tensor<f32>[N]) { let t = load(x, tile=[16]) }").kernels[0].body[0].value.kwargs[0].name \
        == "tile"  # `tile` is a keyword, and still load()'s keyword argument


def test_the_reference_lists_every_keyword_and_builtin():
    from tle.check import BUILTINS
    from tle.parser import _KEYWORDS
    text = (ROOT / "docs" / "language.md").read_text()
    listed = re.search(r"\*\*Keywords\*\* are reserved and cannot name anything:\s*`([^`]*)`", text).group(1)
    assert sorted(listed.split()) == sorted(_KEYWORDS)
    assert [name for name in BUILTINS if f"`{name}(" not in text] == []


# ---- several values ------------------------------------------------------------------------------------------------
def test_split_gives_two_halves_and_a_tile_of_two_gives_tiles_of_one():
    src = ("kernel k(x: tensor<f32>[N]) {\n    let t = reshape(load(x, tile=[64]), [32, 2])\n"
           "    let a, b = split(t)\n    let c, d = split(load(x, tile=[2]))\n}\n")
    b = binds(kernel(src))
    assert b["a"].type == b["b"].type == Tile("f32", (32,))
    assert [b["a"].attrs["index"], b["b"].attrs["index"]] == [0, 1]
    assert b["c"].type == Tile("f32", (1,))


def test_split_of_one_let_in_a_loop_and_after_it_builds_a_split_in_each_block():
    """The halves of one operand share a tle.split within a block; a split in a loop body is not reused after the
    loop, where it would not dominate its use."""
    from tle.compiler import compile_kernel
    src = ("kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {\n    let t = reshape(load(x, tile=[64]), [32, 2])\n"
           "    var acc = zeros<f32>[32]\n    for i in range(3) {\n        let a, b = split(t)\n"
           "        acc += a * b\n    }\n    let c, d = split(t)\n    store(y, reshape(join(acc + c, d), [64]))\n}\n")
    out = compile_kernel(load_program(src, "t.tle"), "k", {}, stop="ttir", backend="triton")
    assert out.stages["tle"].count('"tle.split"') == 2
    assert out.stages["ttir"].count('"tt.split"') == 2


def test_var_many_declares_mutable_vars_from_a_fn_that_returns_two_values():
    src = ("fn init() {\n    return zeros<f32>[8], full<f32>[8](1.0)\n}\n"
           "kernel k(x: tensor<f32>[N]) {\n    var a, b = init()\n    a, b = b, a + b\n    store(x, a + b)\n}\n")
    k = kernel(src)
    declared = [s.var for s in k.body if isinstance(s, T.Bind) and s.var.name in ("a", "b")]
    assert [(v.name, v.mutable) for v in declared[:2]] == [("a", True), ("b", True)]
    assert all(v.type == Tile("f32", (8,)) for v in declared)


def test_a_dim_passed_to_a_fn_stays_a_dim_so_its_loops_keep_their_launch_facts():
    from tle.abi import loop_facts
    src = ("fn total(x, n) {\n    var acc = zeros<f32>[16]\n    for j in range(n / 16) {\n"
           "        acc += load(x, tile=[16], at=j)\n    }\n    return acc\n}\n"
           "kernel k(x: tensor<f32>[N], y: tensor<f32>[16]) {\n    store(y, total(x, N))\n}\n")
    k = kernel(src)
    assert len(loop_facts(k)) == 1  # the loop's stop, N / 16, is a size the launch facts can evaluate


def test_compile_takes_a_path_or_says_that_it_is_missing(tmp_path):
    """tle.compile's argument is a path when it ends in .tle (no program does); a missing file was read as source
    text and failed as a syntax error at <string>:1:1."""
    import tle
    path = tmp_path / "k.tle"
    path.write_text("kernel k(x: tensor<f32>[N]) {\n    store(x, load(x, tile=[16], at=0), at=0)\n}\n")
    assert tle.compile(path).k.name == "k"  # a pathlib.Path too
    assert tle.compile(str(path)).k.name == "k"
    with pytest.raises(FileNotFoundError, match=r"no file '.*missing\.tle'"):
        tle.compile(str(tmp_path / "missing.tle"))
    # a mistyped path was read as source text: a syntax error at its first '/'
    with pytest.raises(FileNotFoundError, match=r"no file '.*k\.tl'"):
        tle.compile(str(tmp_path / "k.tl"))
    (tmp_path / "k.tlx").write_text(path.read_text())
    assert tle.compile(str(tmp_path / "k.tlx")).k.name == "k"  # a path is a path, whatever its ending
    # filename= names the file in messages; it read the path itself as source text (a syntax error at its '/')
    assert tle.compile(str(path), filename="shown.tle").program.file == "shown.tle"
    with pytest.raises(FileNotFoundError, match=r"no file '.*missing\.tle'"):
        tle.compile(str(tmp_path / "missing.tle"), filename="shown.tle")


def test_compile_checks_the_kernels_under_their_defaults_once(monkeypatch):
    """docs/language.md: tle.compile checks the file now. A kernel body's typo surfaced only at its first launch;
    a kernel with a constant that has no default is still checked at its launch. The check is kept: the launch
    and the compiler reuse it rather than check again."""
    import torch

    import tle
    from tle import check
    with pytest.raises(TleError, match="unknown name 'sqrtt'"):
        tle.compile("kernel k(x: tensor<f32>[N]) {\n    store(x, sqrtt(load(x, tile=[16])))\n}\n")
    runs = []
    run = check._KernelChecker.run
    monkeypatch.setattr(check._KernelChecker, "run", lambda self: runs.append(self.k.name) or run(self))
    m = tle.compile("kernel k<B: int = 16>(x: tensor<f32>[N]) {\n    store(x, load(x, tile=[B]) * 2.0)\n}\n"
                    "kernel late<B: int>(x: tensor<f32>[N]) {\n    store(x, sqrtt(load(x, tile=[B])))\n}\n")
    assert runs == ["k"]
    x = torch.ones(16)
    m.k[(1,)](x)
    m.k[(1,)](x, B=16)  # the default given: the same constants
    assert runs == ["k"] and torch.equal(x, torch.full((16,), 4.0))
    with pytest.raises(TleError, match="unknown name 'sqrtt'"):
        m.late[(1,)](x, B=16)


EARLY_RETURN = """
kernel k<BLOCK: int = 16>(x: tensor<f32>[N], n: tensor<i32>[B], y: tensor<f32>[N]) {
    let b = program_id(0)
    if b >= load(n, at=0) {
        return
    }
    let t = load(x, tile=[BLOCK], at=b)
    if sum(t) > 0.0 {
        if b == 1 {
            return
        }
        store(y, t * 2.0, at=b)
    } else {
        store(y, t - 1.0, at=b)
        return
    }
    store(y, t + 100.0, at=b)
}
"""


def test_a_bare_return_ends_the_program_there():
    """`if b >= n { return }` (Triton's early exit): the statements after an if whose branch returns run only on the
    paths that do not, and a return nested deeper ends the program as well. Programs 0 and 2 run to the end, 1
    returns inside the nested if, 3 takes the else (which returns after its store), 4 and 5 return at once."""
    import torch

    import tle
    m = tle.compile(EARLY_RETURN)
    x = torch.randn(6, 16).abs()
    x[3] = -x[3]
    y = torch.full((6, 16), float("nan"))
    m.k[(6,)](x.flatten(), torch.tensor([4], dtype=torch.int32), y.view(-1))
    assert torch.equal(y[0], x[0] + 100.0) and torch.equal(y[2], x[2] + 100.0)
    assert torch.isnan(y[1]).all() and torch.isnan(y[4:]).all()
    assert torch.equal(y[3], x[3] - 1.0)


def test_an_early_return_leaves_no_return_for_the_later_stages():
    """The check turns each bare return into structure (the rest of the body in the if's other branch): the typed
    kernel holds no return, and both GPU paths compile it (to TTIR and to Tile IR; cubins on the CPU too)."""
    from tle import ast
    from tle.check import _early_returns
    from tle.compiler import compile_kernel
    (k,) = parse(EARLY_RETURN).kernels

    def returns(stmts):
        return any(isinstance(s, ast.Return) or isinstance(s, ast.If) and (returns(s.then) or returns(s.orelse or ()))
                   for s in stmts)
    assert returns(k.body) and not returns(_early_returns(k.body))
    top = _early_returns(k.body)  # let b; if b >= n { } else { let t; if sum(t) > 0 { ... } else { ... } }
    assert [type(s).__name__ for s in top] == ["Let", "If"] and top[1].then == ()
    program = load_program(EARLY_RETURN, "t.tle")
    assert compile_kernel(program, "k", {}, stop="ttir", backend="triton").backend == "triton"
    assert compile_kernel(program, "k", {}, stop="tileir", backend="tileir").backend == "tileir"


def test_a_return_after_a_compile_time_if_keeps_the_rest_for_the_other_constant():
    src = """
kernel k<SKIP: bool = false>(y: tensor<f32>[N]) {
    if SKIP {
        return
    }
    store(y, full<f32>[4](1.0), at=0)
}
"""
    import torch

    import tle
    m = tle.compile(src)
    y = torch.zeros(4)
    m.k[(1,)](y, SKIP=True)
    assert torch.equal(y, torch.zeros(4))
    m.k[(1,)](y)
    assert torch.equal(y, torch.ones(4))


FN_RETURN_IN_IF = """
fn clip_or_neg(t, lo) {
    if lo > 0.0 {
        return max(t, lo)
    }
    let n = -t
    return n
}
fn pick(t, flag) {
    if flag {
        return t * 2.0, 1
    } else {
        if sum(t) > 0.0 {
            return t, 2
        }
        return 0.0, 3
    }
}
kernel k(x: tensor<f32>[N], lo: f32, flag: bool, y: tensor<f32>[N], z: tensor<f32>[N], w: tensor<i32>[1]) {
    let t = load(x, tile=[16], at=program_id(0))
    store(y, clip_or_neg(t, lo), at=program_id(0))
    let u, code = pick(t, flag)
    store(z, u, at=program_id(0))
    store(w, full<i32>[1](code), at=0)
}
"""


@pytest.mark.parametrize("lo, flag, sign, want_code", [(0.5, True, 1, 1), (-1.0, False, 1, 2), (-1.0, False, -1, 3)])
def test_a_fn_returns_from_the_branches_of_an_if(lo, flag, sign, want_code):
    """`if lo > 0 { return max(t, lo) }` then `return n`: the statements after the if run on the other path; `pick`
    returns two values from three paths, one of them a literal 0.0 that takes the tile type of the others."""
    import torch

    import tle
    m = tle.compile(FN_RETURN_IN_IF)
    x = torch.randn(16).abs() * sign
    y, z, w = torch.full((16,), float("nan")), torch.full((16,), float("nan")), torch.zeros(1, dtype=torch.int32)
    m.k[(1,)](x, lo, flag, y, z, w)
    assert torch.equal(y, torch.clamp(x, min=lo) if lo > 0 else -x)
    assert torch.equal(z, {1: x * 2.0, 2: x, 3: torch.zeros(16)}[want_code]) and w.item() == want_code


SCALE_IF_BIG = """
fn scale(t) {
    if BIG {
        return t * 100.0
    }
    return t
}
kernel k<BIG: bool = false>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, scale(load(x, tile=[16])), at=0)
}
"""


def test_a_fn_returning_from_an_if_compiles_on_both_paths_and_folds_a_constant_condition():
    import torch

    import tle
    from tle.compiler import compile_kernel
    program = load_program(FN_RETURN_IN_IF, "t.tle")
    assert compile_kernel(program, "k", {}, stop="ttir", backend="triton").backend == "triton"
    assert compile_kernel(program, "k", {}, stop="tileir", backend="tileir").backend == "tileir"
    m = tle.compile(SCALE_IF_BIG)
    x, y = torch.randn(16), torch.empty(16)
    m.k[(1,)](x, y)
    assert torch.equal(y, x)
    m.k[(1,)](x, y, BIG=True)
    assert torch.equal(y, x * 100.0)
    # a constant condition leaves no if: only the taken branch is checked
    assert not any(isinstance(s, T.If) for s in kernel(SCALE_IF_BIG, BIG=True).body)


# ---- `_` discards ----------------------------------------------------------------------------------------------------
def test_underscore_binds_nothing_and_may_repeat():
    src = ("fn two(t) {\n    return t, t * 2.0\n}\n"
           "kernel k(x: tensor<f32>[N]) {\n    let _, b = two(load(x, tile=[4]))\n    let c, _ = two(b)\n"
           "    var v = zeros<f32>[4]\n    v, _ = two(c)\n    let _ = v + 1.0\n    store(x, v)\n}\n")
    k = kernel(src)
    assert "_" not in binds(k) and {"b", "c", "v"} <= set(binds(k))


def test_a_discarded_atomic_still_runs_and_other_discarded_values_do_not():
    src = ("kernel k(x: tensor<f32>[N], c: tensor<f32>[N]) {\n    let t = load(x, tile=[4])\n"
           "    _ = atomic_add(c, arange(0, 4), t)\n    let _ = exp(t)\n}\n")
    body = kernel(src).body
    evals = [s for s in body if isinstance(s, T.Eval)]
    assert len(evals) == 1 and evals[0].expr.name == "atomic"
    assert not any(isinstance(s, T.Bind) and isinstance(s.value, T.Op) and s.value.name == "exp" for s in body)


def test_underscore_parameters_take_arguments_they_do_not_bind():
    src = ("fn pick(v1, _, v2, _) {\n    return max(v1, v2), 0\n}\nfn twice(x, _) {\n    return x * 2.0\n}\n"
           "kernel k(x: tensor<f32>[N], c: tensor<i32>[N]) {\n    let t = load(x, tile=[8])\n"
           "    let m, _ = scan(t, arange(0, 8), axis=0, combine=pick)\n    let a = twice(t, x)\n"
           "    let b = twice(t, atomic_add(c, arange(0, 8), 1))\n    store(x, m + a + b)\n}\n")
    k = kernel(src)
    assert [s.expr.name for s in k.body if isinstance(s, T.Eval)] == ["atomic", "store"]  # the atomic still runs
    with pytest.raises(TleError, match="a `_` parameter takes its argument by position"):
        kernel(src.replace("twice(t, x)", "twice(t, _=x)"))


@pytest.mark.parametrize("builtin", ["flip(t, axis=1)", "flip(t)"])
def test_desugared_builtins_build_each_value_once(builtin):
    """flip reads each step's tile twice (sum of the pair, minus the element): the step is bound once, so the IR
    grows with log2(n), not 2^log2(n) (a [4096, 8] flip took 24 s to lower before)."""
    from tle.compiler import compile_kernel
    src = ("kernel k(x: tensor<f32>[M, N]) {\n    let t = load(x, tile=[64, 1024], at=[0, 0])\n"
           f"    store(x, {builtin}, at=[0, 0])\n}}\n")
    tle_ir = compile_kernel(load_program(src, "k.tle"), "k", {}, stop="tle").stages["tle"]
    steps = 10 + (6 if builtin == "flip(t)" else 0)  # log2(1024), and log2(64) for axis 0
    assert tle_ir.count('"tle.reduce"') == steps
    assert tle_ir.count("arith.bitcast") == 2


def test_a_broadcast_past_the_tile_limit_is_a_located_error():
    """Broadcasting two tiles the checker sized can multiply them past 2^20 elements ([1024, 1] + [1, 2048]); the
    lowering to the tle dialect says so at the expression rather than failing in MLIR."""
    from tle.compiler import compile_kernel
    src = ("kernel k(x: tensor<i32>[N, M]) {\n"
           "    let a = reshape(arange(1024), [1024, 1]) + reshape(arange(2048), [1, 2048])\n"
           "    store(x, a, at=[0, 0])\n}\n")
    with pytest.raises(TleError) as info:
        compile_kernel(load_program(src, "big.tle"), "k", {}, stop="tle")
    assert str(info.value).startswith("big.tle:2:13: error: a tile of 2097152 elements ([1024, 2048]) is too large")


def test_a_subtree_used_twice_in_a_statement_is_built_once():
    """cdiv(a, b) is (a + b - 1) / b: b appears twice in the checked tree. Lowered, a load there reads once."""
    from tle.compiler import compile_kernel
    src = ("kernel k(s: tensor<i32>[4], y: tensor<i32>[N]) {\n"
           "    store(y, full<i32>[1](cdiv(N, load(s, at=0))), at=0)\n}\n")
    tle_ir = compile_kernel(load_program(src, "k.tle"), "k", {}, stop="tle").stages["tle"]
    assert tle_ir.count('"tle.load"') == 1


def test_lowering_is_the_same_every_time():
    """ast_to_tle keeps each Op it built in a statement, by id; lowering makes short-lived Ops of its own (an 8-bit
    float cast goes through f32), and a freed one's id, taken by a new Op, once fetched the old Op's value: the IR of
    tests/filecheck/f8_casts.tle then changed from one compile to the next (49 of 60 on the CPU machine)."""
    from tle.compiler import compile_kernel
    path = Path(__file__).resolve().parent / "filecheck" / "f8_casts.tle"
    program = load_program(path.read_text(), str(path))
    for name in program.kernel_names():
        texts = {compile_kernel(program, name, {}, stop="tle").stages["tle"] for _ in range(25)}
        assert len(texts) == 1, name


def test_a_reduction_along_a_constant_one_is_allowed():
    """Only a 1 written in a load's tile= makes reducing along that axis an error: BM rows that a constant (or a
    tuner) sets to 1 are a generic kernel's column sum, which is then the row itself."""
    src = """kernel colsum<BM: int = 1>(x: tensor<f32>[M, N], y: tensor<f32>[N]) {
        store(y, sum(load(x, tile=[BM, 16], at=[program_id(0), 0]), axis=0))
    }"""
    assert kernel(src, "colsum").constants["BM"] == 1


def test_next_pow2_and_cdiv_in_constant_defaults_and_tile_sizes():
    src = """kernel k<ROT: int = 96, RH: int = next_pow2(ROT / 2), G: int = cdiv(ROT, 32)>(x: tensor<f32>[N]) {
        store(x, load(x, tile=[next_pow2(ROT)]) * cast<f32>(G + RH))
    }"""
    k = kernel(src)
    assert (k.constants["RH"], k.constants["G"]) == (64, 3)
    assert kernel(src, ROT=40).constants["RH"] == 32  # next_pow2(20)
    assert any(isinstance(n, T.Op) and n.name == "load" and n.attrs["tile"] == (128,) for n in T.nodes(k.body))


MIXED_INDEX_WIDTHS = """
kernel sel<BM: int = 16, BN: int = 64>(x: tensor<f32>[M, N], idx: tensor<i64>[K], out: tensor<f32>[K, N],
                                       hits: tensor<f32>[M, N], cnt: tensor<i32>[M, 4]) {
    let rows = expand_dims(load(idx, tile=[BM], at=program_id(0)), 1)
    let cols = program_id(1) * BN + expand_dims(arange(BN), 0)
    store(out, gather(x, [rows, cols], mask=cols < N), at=[program_id(0), program_id(1)])
    atomic_add(hits, [cols, rows], 1.0, mask=cols < N)
    scatter(cnt, [rows, 1], 5)
    let _ = atomic_cas(cnt, [rows, 0], 0, 7)
}
"""


def test_an_i64_index_widens_the_other_indices_of_its_access():
    """An int64 index tensor's tile beside an i32 arange (or a literal) in one gather, scatter or atomic: the op
    takes indices of one type, and the i32 ones built IR that did not verify (an internal error). Every index of
    the access is now i64; both paths build and the interpreter agrees with torch."""
    import torch

    import tle
    from tle.compiler import compile_kernel
    program = load_program(MIXED_INDEX_WIDTHS, "t.tle")
    assert compile_kernel(program, "sel", {}, stop="ttir", backend="triton").backend == "triton"
    assert compile_kernel(program, "sel", {}, stop="tileir", backend="tileir").backend == "tileir"
    x, idx = torch.randn(40, 37), torch.randint(0, 37, (16,))
    out, hits, cnt = torch.empty(16, 37), torch.zeros(40, 37), torch.zeros(40, 4, dtype=torch.int32)
    tle.compile(MIXED_INDEX_WIDTHS).sel[(1, 1)](x, idx, out, hits, cnt)
    assert torch.equal(out, x[idx])
    counts = torch.bincount(idx, minlength=40)[:37].float()  # hits[c, r]: how often row r was picked, per c < 37
    assert torch.equal(hits[:37], counts.expand(37, 37)) and not hits[37:].any()
    picked = torch.bincount(idx, minlength=40) > 0
    assert torch.equal(cnt[:, 0], torch.where(picked, 7, 0).int())
    assert torch.equal(cnt[:, 1], torch.where(picked, 5, 0).int())


def test_an_expression_of_a_thousand_terms_compiles():
    # an unrolled polynomial or generated code: the parser, checker and lowering recurse along the expression's tree
    import torch
    import tle
    terms = " + ".join(["1.0"] * 1000)
    src = f"kernel k(x: tensor<f32>[N]) {{\n    store(x, full<f32>[16]({terms}), at=0)\n}}\n"
    x = torch.zeros(16)
    tle.compile(src).k[(1,)](x)
    assert x.tolist() == [1000.0] * 16
    from tle.cli import main
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "long.tle")
        with open(path, "w") as f:
            f.write(src)
        assert main([path, "--emit=ttir", "-o", os.path.join(d, "long.ttir")]) == 0


def test_tilde_of_a_bool_is_not_as_in_torch_and_triton():
    """`~mask` is how torch and Triton code negate a mask; it was refused ('~' needs an integer operand) and its note
    sent the author to `a & not b`, a syntax error."""
    import torch

    import tle
    src = ("kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {\n    let t = load(x, tile=[16], at=0)\n"
           "    store(y, where((t > 0.0) & ~(t > 1.0), t, 0.0), at=0)\n}\n")
    x, y = torch.randn(16) * 2, torch.zeros(16)
    tle.compile(src).k[(1,)](x, y)
    assert torch.equal(y, torch.where((x > 0) & ~(x > 1), x, 0.0))


STATIC_STAGES = """
kernel stages<LOG: int = 3>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    var t = load(x, tile=[1 << LOG], at=0)
    var acc = zeros<f32>[1 << LOG]
    for s in static_range(LOG) {
        let h = 1 << s
        let a, b = split(transpose(reshape(t, [(1 << LOG) / (2 * h), 2, h]), perm=[0, 2, 1]))
        t = reshape(transpose(join(a + b, a - b), perm=[0, 2, 1]), [1 << LOG])
        acc += t * cast<f32>(s + 1)
    }
    for i in range(LOG) unroll(LOG) {
        acc *= 1.0
    }
    store(y, acc, at=0)
}
"""


@pytest.mark.parametrize("log", [0, 1, 4])
def test_static_range_gives_each_copy_a_constant_that_can_shape_tiles(log):
    """An FFT's butterfly stages reshape by 1 << s: Triton's tl.static_range, which porting.md mapped to
    range(n) unroll(n), whose variable is a run-time value ('tile size must be a compile-time constant'). LOG = 0
    also checks unroll(0), which was refused."""
    import torch

    import tle
    n = 1 << log
    x, y = torch.randn(n), torch.zeros(n)
    tle.compile(STATIC_STAGES).stages[(1,)](x, y, LOG=log)
    t, acc = x.clone(), torch.zeros(n)
    for s in range(log):
        h = 1 << s
        r = t.reshape(n // (2 * h), 2, h).transpose(1, 2)
        t = torch.stack([r[..., 0] + r[..., 1], r[..., 0] - r[..., 1]], -1).transpose(1, 2).reshape(n)
        acc += t * (s + 1)
    torch.testing.assert_close(y, acc)


def test_an_error_under_the_defaults_says_tle_compile_checked_them():
    """tle.compile checks each kernel whose constants all have defaults under them; a generic kernel whose defaults
    do not suit its body (tf32=true with T = f16) gets a note that says so (a porter's report)."""
    src = """kernel mm<T: dtype = f16, BM: int = 32>(a: tensor<T>[M, K], c: tensor<f32>[M, M]) {
    let t = load(a, tile=[BM, 32])
    store(c, dot(t, transpose(t), tf32=true))
}"""
    with pytest.raises(tle.TleError) as err:
        tle.compile(src)
    assert "tf32=true only applies to f32 operands" in err.value.message
    assert any("tle.compile checks kernel 'mm' under its defaults (T = f16, BM = 32)" in str(n.message)
               for n in err.value.notes if hasattr(n, "message"))
    tle.compile(src.replace("T: dtype = f16", "T: dtype = f32"))  # defaults that suit the body
