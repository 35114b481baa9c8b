"""Single ops, including ones no .tle source produces today (unordered float predicates, unsigned compares and
casts, i1 extensions): each runs in a tiny hand-written tle module, against plain-Python definitions of the MLIR
semantics."""
import math
import struct

import numpy as np
import pytest
import torch

from interp_harness import run
from tle.dialects.mlir import ir, new_context
from tle.dialects.tle import load_tle
from tle.runtime.interpreter import interpret

TORCH = {"f32": torch.float32, "f16": torch.float16, "i1": torch.bool, "i8": torch.int8, "i32": torch.int32,
         "i64": torch.int64}


def one_op_kernel(inputs: list[str], output: str, body: str, n: int) -> "ir.Module":
    """A kernel loading 1-D tiles %x0, %x1, ... of n elements of the given element types from its first
    arguments, running `body` (which defines %r : tensor<n x output>), and storing %r into its last argument."""
    lines, params = [], []
    for k, e in enumerate(inputs + [output]):
        params.append(f"%p{k}: !tle.ptr<{e}>")
        lines.append(f'%v{k} = "tle.make_view"(%p{k}, %n, %one) {{elem = {e}, name = "t{k}", operandSegmentSizes = '
                     f'array<i32: 1, 1, 1>}} : (!tle.ptr<{e}>, i32, i32) -> !tle.view<{e}, 1>')
    for k, e in enumerate(inputs):
        pad = "0.0" if e.startswith("f") else "0"
        lines.append(f'%x{k} = "tle.load"(%v{k}, %zero) {{padding = {pad} : {e}}} : (!tle.view<{e}, 1>, i32) -> '
                     f'tensor<{n}x{e}>')
    out = len(inputs)
    text = (f'func.func @k({", ".join(params)}) attributes {{tle.kernel, tle.mesh = ["x", "y", "z"]}} {{\n'
            f"  %n = arith.constant {n} : i32\n  %one = arith.constant 1 : i32\n  %zero = arith.constant 0 : i32\n  "
            + "\n  ".join(lines) + "\n  " + body.strip() + "\n"
            f'  "tle.store"(%v{out}, %r, %zero) : (!tle.view<{output}, 1>, tensor<{n}x{output}>, i32) -> ()\n'
            "  return\n}")
    ctx = new_context()
    load_tle(ctx)
    with ctx:
        module = ir.Module.parse(text)
        assert module.operation.verify()
    return module


def run_op(inputs: list[tuple[str, list]], output: str, body: str) -> list:
    n = len(inputs[0][1])
    module = one_op_kernel([e for e, _ in inputs], output, body, n)
    args = [torch.tensor(v, dtype=TORCH[e]) for e, v in inputs]
    out = torch.zeros(n, dtype=TORCH[output])
    interpret(module, (1, 1, 1), args + [out])
    return out.tolist()


NAN, INF = float("nan"), float("inf")
PAIRS = [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (NAN, 1.0), (1.0, NAN), (NAN, NAN), (-0.0, 0.0), (-INF, INF)]
PREDICATES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
              "uno", "true"]


def cmpf_reference(pred: str, a: float, b: float) -> bool:
    if pred in ("false", "true"):
        return pred == "true"
    unordered = math.isnan(a) or math.isnan(b)
    if pred == "ord":
        return not unordered
    if pred == "uno":
        return unordered
    rel = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b, "ne": a != b}[pred[1:]]
    return (not unordered and rel) if pred[0] == "o" else (unordered or rel)


@pytest.mark.parametrize("pred", PREDICATES)
def test_cmpf_predicates(pred):
    a, b = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    got = run_op([("f32", a), ("f32", b)], "i1", f"%r = arith.cmpf {pred}, %x0, %x1 : tensor<8xf32>")
    assert got == [cmpf_reference(pred, x, y) for x, y in PAIRS]


@pytest.mark.parametrize("pred", ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"])
def test_cmpi_predicates(pred):
    a = [-1, 0, 5, -2 ** 31, 7, -3, 2 ** 31 - 1, 1]
    b = [1, 0, 5, 2 ** 31 - 1, -7, -3, -2 ** 31, -1]
    got = run_op([("i32", a), ("i32", b)], "i1", f"%r = arith.cmpi {pred}, %x0, %x1 : tensor<8xi32>")
    u = lambda v: v & 0xFFFFFFFF  # noqa: E731
    ops = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "slt": lambda x, y: x < y, "sle": lambda x, y: x <= y,
           "sgt": lambda x, y: x > y, "sge": lambda x, y: x >= y, "ult": lambda x, y: u(x) < u(y),
           "ule": lambda x, y: u(x) <= u(y), "ugt": lambda x, y: u(x) > u(y), "uge": lambda x, y: u(x) >= u(y)}
    assert got == [ops[pred](x, y) for x, y in zip(a, b)]


BOOLS = [True, False, True, True, False, False, True, False]
INTS = [-1, 0, 255, -128, 300, -2 ** 31, 2 ** 31 - 1, 12345]


@pytest.mark.parametrize("body,inputs,output,want", [
    ("%r = arith.extsi %x0 : tensor<8xi1> to tensor<8xi32>", [("i1", BOOLS)], "i32", [-int(b) for b in BOOLS]),
    ("%r = arith.extui %x0 : tensor<8xi1> to tensor<8xi32>", [("i1", BOOLS)], "i32", [int(b) for b in BOOLS]),
    ("%r = arith.extui %x0 : tensor<8xi8> to tensor<8xi32>", [("i8", [-1, 0, 127, -128, 5, -5, 1, 2])], "i32",
     [255, 0, 127, 128, 5, 251, 1, 2]),
    ("%r = arith.extsi %x0 : tensor<8xi8> to tensor<8xi32>", [("i8", [-1, 0, 127, -128, 5, -5, 1, 2])], "i32",
     [-1, 0, 127, -128, 5, -5, 1, 2]),
    ("%r = arith.sitofp %x0 : tensor<8xi1> to tensor<8xf32>", [("i1", BOOLS)], "f32", [-float(b) for b in BOOLS]),
    ("%r = arith.uitofp %x0 : tensor<8xi1> to tensor<8xf32>", [("i1", BOOLS)], "f32", [float(b) for b in BOOLS]),
    ("%r = arith.uitofp %x0 : tensor<8xi32> to tensor<8xf32>", [("i32", INTS)], "f32",
     [float(np.float32(v & 0xFFFFFFFF)) for v in INTS]),
    ("%r = arith.sitofp %x0 : tensor<8xi32> to tensor<8xf32>", [("i32", INTS)], "f32",
     [float(np.float32(v)) for v in INTS]),
    ("%r = arith.trunci %x0 : tensor<8xi32> to tensor<8xi1>", [("i32", INTS)], "i1", [bool(v & 1) for v in INTS]),
    ("%r = arith.trunci %x0 : tensor<8xi32> to tensor<8xi8>", [("i32", INTS)], "i8",
     [(v + 128) % 256 - 128 for v in INTS]),
    ("%c = arith.constant dense<4> : tensor<8xi32>\n  %r = arith.shrui %x0, %c : tensor<8xi32>", [("i32", INTS)],
     "i32", [((v & 0xFFFFFFFF) >> 4) for v in INTS]),
    ("%c = arith.constant dense<4> : tensor<8xi32>\n  %r = arith.shrsi %x0, %c : tensor<8xi32>", [("i32", INTS)],
     "i32", [v >> 4 for v in INTS]),
    ("%r = math.absi %x0 : tensor<8xi32>", [("i32", INTS)], "i32",
     [abs(v) if v != -2 ** 31 else v for v in INTS]),
    ("%r = arith.muli %x0, %x0 : tensor<8xi32>", [("i32", INTS)], "i32",
     [(v * v + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in INTS]),
    ("%r = arith.addi %x0, %x1 : tensor<8xi1>", [("i1", BOOLS), ("i1", BOOLS[::-1])], "i1",
     [a != b for a, b in zip(BOOLS, BOOLS[::-1])]),
    ("%r = arith.constant dense<[1, -2, 3, -4, 5, -6, 7, -8]> : tensor<8xi32>", [("i32", INTS)], "i32",
     [1, -2, 3, -4, 5, -6, 7, -8]),
])
def test_integer_ops_and_casts(body, inputs, output, want):
    assert run_op(inputs, output, body) == want


def test_nan_ignoring_and_nan_propagating_min_max():
    a = [1.0, NAN, NAN, 3.0, -0.0, 2.0, INF, -INF]
    b = [2.0, 1.0, NAN, NAN, 0.0, 2.0, 1.0, 1.0]
    same = lambda x, y: x == y or (math.isnan(x) and math.isnan(y))  # noqa: E731
    for op, ref in (("maximumf", lambda x, y: NAN if math.isnan(x) or math.isnan(y) else max(x, y)),
                    ("minimumf", lambda x, y: NAN if math.isnan(x) or math.isnan(y) else min(x, y)),
                    ("maxnumf", lambda x, y: y if math.isnan(x) else x if math.isnan(y) else max(x, y)),
                    ("minnumf", lambda x, y: y if math.isnan(x) else x if math.isnan(y) else min(x, y))):
        got = run_op([("f32", a), ("f32", b)], "f32", f"%r = arith.{op} %x0, %x1 : tensor<8xf32>")
        assert all(same(g, ref(x, y)) for g, x, y in zip(got, a, b)), op
        if op in ("maximumf", "minimumf"):  # IEEE 754-2019: -0.0 < +0.0, whichever operand holds which
            assert [math.copysign(1, g) for g in got[4:5]] == [-1.0 if op == "minimumf" else 1.0], op


def test_signed_zeros_in_max_min_and_their_reductions():
    src = """
    kernel z(a: tensor<f32>[4], b: tensor<f32>[4], mx: tensor<f32>[4], mn: tensor<f32>[4], rmax: tensor<f32>[2],
             rmin: tensor<f32>[2]) {
        let x = load(a, tile=[4])
        let y = load(b, tile=[4])
        store(mx, max(x, y))
        store(mn, min(x, y))
        let rows = reshape(x, [2, 2])
        store(rmax, max(rows, axis=1))
        store(rmin, min(rows, axis=1))
    }
    """
    a, b = torch.tensor([-0.0, 0.0, -0.0, -0.0]), torch.tensor([0.0, -0.0, -0.0, 1.0])
    out = {k: torch.ones(4 if k in ("mx", "mn") else 2) for k in ("mx", "mn", "rmax", "rmin")}
    run(src, "z", (1, 1, 1), {"a": a, "b": b, **out})
    sign = lambda t: [math.copysign(1, v) for v in t.tolist()]  # noqa: E731
    assert sign(out["mx"]) == [1, 1, -1, 1] and out["mx"].tolist() == [0, 0, 0, 1]
    assert sign(out["mn"]) == [-1, -1, -1, -1]
    assert sign(out["rmax"]) == [1, -1] and sign(out["rmin"]) == [-1, -1]  # rows [-0, +0] and [-0, -0]


def test_select_with_a_scalar_condition():
    body = """
    %c = arith.constant false
    %r = arith.select %c, %x0, %x1 : tensor<8xf32>
    """
    assert run_op([("f32", [1.0] * 8), ("f32", [2.0] * 8)], "f32", body) == [2.0] * 8


def test_f16_arithmetic_is_computed_in_f32_and_rounded_once():
    # 2049 is not an f16; (1024 + 1025/1024 ...) cases where rounding each step differs from one rounding.
    a = [2048.0, 1.0, 0.1, 65504.0, -65504.0, 3.0, 1e-4, 7.0]
    b = [1.0, 2 ** -11, 0.2, 65504.0, 1.0, 7.0, 1e-4, 0.0]
    for op, fn in (("addf", lambda x, y: x + y), ("mulf", lambda x, y: x * y), ("divf", lambda x, y: x / y if y else
                                                                               math.copysign(INF, x))):
        got = run_op([("f16", a), ("f16", b)], "f16", f"%r = arith.{op} %x0, %x1 : tensor<8xf16>")
        h = [float(np.float16(v)) for v in a], [float(np.float16(v)) for v in b]
        with np.errstate(over="ignore"):  # 65504 * 65504 overflows to inf, as it must
            want = [float(np.float16(fn(x, y))) for x, y in zip(*h)]  # exact in f64, rounded once to f16
        assert got == want, op


def test_unary_math_in_f32():
    torch.manual_seed(0)
    src = """
    kernel m(x: tensor<f32>[64], y: tensor<f32>[64], out: tensor<f32>[10, 64]) {
        let t = load(x, tile=[64])
        let p = abs(t) + 0.5
        let u = load(y, tile=[64])
        store(out, reshape(exp2(t), [1, 64]), at=[0, 0])
        store(out, reshape(log2(p), [1, 64]), at=[1, 0])
        store(out, reshape(log(p), [1, 64]), at=[2, 0])
        store(out, reshape(sin(t), [1, 64]), at=[3, 0])
        store(out, reshape(cos(t), [1, 64]), at=[4, 0])
        store(out, reshape(floor(t), [1, 64]), at=[5, 0])
        store(out, reshape(ceil(t), [1, 64]), at=[6, 0])
        store(out, reshape(p ** u, [1, 64]), at=[7, 0])
        store(out, reshape(rsqrt(p), [1, 64]), at=[8, 0])
        store(out, reshape(erf(t), [1, 64]), at=[9, 0])
    }
    """
    x, y = torch.randn(64) * 3, torch.randn(64)
    out = torch.zeros(10, 64)
    run(src, "m", (1, 1, 1), {"x": x, "y": y, "out": out})
    xs, ys = x.double().tolist(), y.double().tolist()
    ps = [abs(float(np.float32(abs(v) + 0.5))) for v in xs]
    want = [[2 ** v for v in xs], [math.log2(p) for p in ps], [math.log(p) for p in ps], [math.sin(v) for v in xs],
            [math.cos(v) for v in xs], [math.floor(v) for v in xs], [math.ceil(v) for v in xs],
            [p ** v for p, v in zip(ps, ys)], [1 / math.sqrt(p) for p in ps], [math.erf(v) for v in xs]]
    got = out.double()
    want = torch.tensor(want, dtype=torch.float64)
    assert ((got - want).abs() <= 2e-6 * want.abs() + 1e-6).all()


def test_f32_bits_of_constants_and_padding():
    # -inf padding and a float constant that is not exactly representable keep their f32 bits.
    src = """
    kernel c(x: tensor<f32>[N], y: tensor<f32>[8]) {
        store(y, load(x, tile=[8], pad=-inf) + 0.1)
    }
    """
    y = torch.zeros(8)
    run(src, "c", (1, 1, 1), {"x": torch.zeros(3), "y": y})
    tenth = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert y.tolist() == [tenth] * 3 + [-INF] * 5


def test_small_integer_powers_of_half_floats_round_once():
    """x ** 2 and x ** 3 multiply in f32 and round once (tle/check.py integer_power): for bf16's 8-bit and f16's
    11-bit significands these products are exact in f32, so the result is x^n correctly rounded, as pow gives."""
    import tle
    src = """kernel k<T: dtype = bf16, P: int = 3>(x: tensor<T>[N], y: tensor<T>[N]) {
        store(y, load(x, tile=[256]) ** P)
    }"""
    k = tle.compile(src).k
    g = torch.Generator().manual_seed(0)
    for dtype, p in ((torch.bfloat16, 3), (torch.bfloat16, 2), (torch.float16, 2)):
        x = (torch.randn(256, generator=g) * 4).to(dtype)
        y = torch.empty_like(x)
        k[(1,)](x, y, P=p, backend="interp")
        assert torch.equal(y, (x.double() ** p).to(dtype)), (dtype, p)


def test_bf16_atomic_add_rounds_the_running_sum_once_per_lane():
    import tle
    src = """kernel k(x: tensor<bf16>[N], acc: tensor<bf16>[M]) {
        let _ = atomic_add(acc, arange(64) % 8, load(x, tile=[64], at=program_id(0)))
    }"""
    x = torch.randn(128, generator=torch.Generator().manual_seed(1)).bfloat16()
    acc = torch.zeros(8).bfloat16()
    tle.compile(src).k[(2,)](x, acc, backend="interp")
    # each lane's add lands as the running sum in f64, rounded once (runtime/interpreter.py _atomic): the last is the
    # exact sum of the element's lanes, rounded to bf16 once
    assert torch.equal(acc, x.double().reshape(-1, 8).sum(0).bfloat16())


def test_f64_atomic_add_sums_in_f64():
    # an accurate global norm: each program adds its sum of squares into one f64 element
    import tle
    src = """kernel k(x: tensor<f64>[N], out: tensor<f64>[1]) {
        let t = load(x, tile=[256], at=program_id(0))
        atomic_add(out, [0], sum(t * t))
    }"""
    x = torch.randn(1000, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 1e8
    out = torch.zeros(1, dtype=torch.float64)
    tle.compile(src).k[(4,)](x, out, backend="interp")
    assert torch.allclose(out, (x * x).sum(), rtol=1e-14, atol=0)


def test_sqrt_is_correctly_rounded_in_f32_and_f64():
    # torch's CPU sqrt is not (about 1 in 160 random f32 inputs 1 ulp off); the GPUs' sqrt.rn is
    import numpy as np
    import tle
    src = """kernel s(a: tensor<T>[N], y: tensor<T>[N]) { store(y, sqrt(load(a, tile=[4096], at=0)), at=0) }"""
    k = tle.compile(src.replace("kernel s(", "kernel s<T: dtype = f32>(")).s
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.float64):
        x = torch.rand(4096, generator=g, dtype=dtype) * 4
        y = torch.empty_like(x)
        k[(1,)](x, y, backend="interp")
        assert torch.equal(y, torch.from_numpy(np.sqrt(x.numpy()))), dtype


def test_f64_to_f16_and_bf16_round_once():
    # torch converts f64 to 16 bits through f32, rounding twice; tle rounds once (as its constants do)
    import tle
    src = """kernel c<T: dtype = f16>(a: tensor<f64>[N], y: tensor<T>[N]) {
        store(y, cast<T>(load(a, tile=[4], at=0)), at=0)
    }"""
    k = tle.compile(src).c
    a = torch.tensor([1 + 2**-11 + 2**-40, 2**-25 + 2**-60, 65519.99999999999, -(1 + 2**-11 + 2**-40)],
                     dtype=torch.float64)
    y = torch.empty(4, dtype=torch.float16)
    k[(1,)](a, y, backend="interp")
    assert y.tolist() == [1.0009765625, 2.0**-24, 65504.0, -1.0009765625]
    b = torch.tensor([1 + 2**-8 + 2**-45, 1 + 2**-8, 1 + 3 * 2**-8, 3.4e38], dtype=torch.float64)
    yb = torch.empty(4, dtype=torch.bfloat16)
    k[(1,)](b, yb, backend="interp")
    assert yb.tolist() == [1.0078125, 1.0, 1.015625, float("inf")]
