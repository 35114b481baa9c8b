"""lowering/tle_to_tileir.py and lowering/tileir_legality.py on the CPU: every example and every op class lowers,
encodes and compiles with tileiras; the memory-token chains; the assume facts; what tileiras selects (TMA, tensor
cores) with and without them; the legality pass's blockers; the golden files in tests/filecheck/tileir/.

Tests that need tileiras or the pinned bytecode writer are skipped, with the reason, where they are missing. Running
the kernels against torch needs a GPU (tests/gpu/)."""
from __future__ import annotations

import glob
import math
import os
import struct
import sys

import numpy as np
import pytest

from tle.abi import Spec, abi, all_args, default_spec, generic_spec
from tle.abi import spec_of as abi_spec_of  # noqa: E402
from tle.check import check_kernel, load_program
from tle.diagnostics import TleError, span_of_location
from tle.dialects import cuda_tile as ct
from tle.dialects.mlir import ir, nested_ops
from tle.lowering import tle_to_tileir as lowering
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tileir_legality import Blocker, tileir_blockers
from tle.lowering.tle_to_tileir import LOWERED_OPS, tle_to_tileir
from tle.targets import tileir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Examples that take the native path only, and the reason the legality check gives (checked below)
NATIVE_ONLY = {"gelu.tle": "asm() inlines PTX"}
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.tle"))
                  if os.path.basename(p) not in NATIVE_ONLY)
ARCHS = ["sm_90", "sm_100"]


def _has(find) -> bool:
    try:
        find()
        return True
    except (FileNotFoundError, ImportError):
        return False


needs_tileiras = pytest.mark.skipif(not (_has(tileir.find_tileiras) and _has(tileir._bc)),
                                    reason="tileiras or the pinned cuda-tile bytecode writer is not installed")
needs_disasm = pytest.mark.skipif(not (_has(tileir.find_tileirdisasm) and _has(tileir._bc)),
                                  reason="tileirdisasm or the pinned cuda-tile bytecode writer is not installed")


# ---- helpers --------------------------------------------------------------------------------------------------------

def build(src: str, name: str, consts: dict | None = None, spec="default", file: str | None = None):
    """(typed kernel, spec, tle module) of kernel `name` in source text `src`."""
    kernel = check_kernel(load_program(src, file or f"{name}.tle"), name, consts or {})
    spec = default_spec(kernel) if spec == "default" else generic_spec(kernel) if spec == "generic" else spec
    return kernel, spec, ast_to_tle(kernel, spec)


def lower(src: str, name: str, consts: dict | None = None, spec="default", file: str | None = None, options=None):
    return tle_to_tileir(build(src, name, consts, spec, file)[2], options)


# The token tests read view loads, which kernels with a dot use; kernels without one load through pointers by
# default, and those loads take tokens by the same rule (test_read_only_tensors_take_no_tokens checks both forms).
VIEW_LOADS = lowering.TileirOptions(pointer_loads="none")


def example(path: str):
    """[(kernel name, source)] of an example file."""
    src = open(path, encoding="utf-8").read()
    return [(name, src) for name in load_program(src, path).kernel_names()]


def walk(module):
    return nested_ops(module.operation)


def ops(module, name: str) -> list:
    return [op for op in walk(module) if op.name == f"cuda_tile.{name}"]


def names(module) -> set:
    return {op.name.removeprefix("cuda_tile.") for op in walk(module)}


def segments(op) -> list:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def token_operand(op):
    """The token operand of a *_tko op, or None (it is the last operand group)."""
    return list(op.operands)[-1] if segments(op)[-1] else None


def attr_str(op, name):
    return ir.StringAttr(op.attributes[name]).value


def predicate(op) -> str:
    return str(op.attributes["predicate"])


# ---- every example --------------------------------------------------------------------------------------------------

@needs_tileiras
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.basename(p))
def test_example_lowers_and_compiles(path, arch):
    for name, src in example(path):
        kernel, spec, module = build(src, name, file=path)
        blockers = tileir_blockers(module, arch)
        assert blockers == [], [str(b) for b in blockers]
        binary = tileir.compile_tileir(tle_to_tileir(module), arch)
        assert binary.cubin[:4] == b"\x7fELF" and binary.name == name and binary.arch == arch
        want = ["ptr" if a.kind == "ptr" else a.dtype for a in abi(kernel, spec)]
        assert binary.params == want
        # e.g. 384: 8 worker warps + 4 more (sm_100)
        assert binary.num_threads % 32 == 0 and 32 <= binary.num_threads <= 1024


@pytest.mark.parametrize("file", sorted(NATIVE_ONLY))
def test_native_only_examples_say_why(file):
    path = os.path.join(ROOT, "examples", file)
    for name, src in example(path):
        blockers = tileir_blockers(build(src, name, file=path)[2], "sm_90")
        assert blockers and blockers[0].reason.startswith(NATIVE_ONLY[file]), [str(b) for b in blockers]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.basename(p))
def test_every_op_has_its_tle_location(path):
    for name, src in example(path):
        module = lower(src, name, file=path)
        for op in walk(module):
            if op.name.startswith("cuda_tile."):
                span = span_of_location(op.location)
                # the example's own file, or one it imports (attention_bwd.tle's forward runs attention.tle's fns)
                assert span is not None and span.line > 0, (op.name, str(op.location))
                assert span.file == path or os.path.dirname(span.file) == os.path.dirname(path), span


def test_the_entry_takes_the_abi_in_order_and_the_tle_module_is_untouched():
    src = open(os.path.join(ROOT, "examples", "layernorm.tle")).read()
    for spec in ("default", "generic"):
        kernel, spec, module = build(src, "layernorm", spec=spec)
        before = str(module)
        out = tle_to_tileir(module)
        assert str(module) == before
        (entry,) = ct.entries(out)
        got = [str(a.type) for a in entry.regions[0].blocks[0].arguments]
        want = [f"!cuda_tile.tile<ptr<{a.dtype}>>" if a.kind == "ptr" else f"!cuda_tile.tile<{a.dtype}>"
                for a in abi(kernel, spec)]
        assert got == want
        assert attr_str(entry, "sym_name") == "layernorm"
        assert want[-1] == "!cuda_tile.tile<f32>"  # eps


# ---- op classes ---------------------------------------------------------------------------------------------------

FLOAT_MATH = """
kernel fm<T: dtype = f32>(x: tensor<T>[N], y: tensor<T>[N], z: tensor<T>[N]) {
    let i = program_id(0)
    let t = load(x, tile=[64], at=[i])
    let u = load(y, tile=[64], at=[i], pad=1.0)
    let a = exp(t) + exp2(t) + log(abs(u)) + log2(abs(u)) + sqrt(abs(t)) + rsqrt(abs(u) + 1.0)
    let b = sin(t) * cos(u) + tanh(t) - floor(t) + ceil(u) + abs(t) ** u + t % u + sigmoid(-t)
    store(z, a + b / u + max(t, u) - min(t, u) + erf(t), at=[i])
}
"""
INT_MATH = """
kernel im(x: tensor<i32>[N], y: tensor<i32>[N], z: tensor<i32>[N]) {
    let i = program_id(0)
    let t = load(x, tile=[64], at=[i])
    let u = load(y, tile=[64], at=[i], pad=1)
    store(z, (t + u) * (t - u) / u + t % u + (t << 2) + (t >> 1) + (t & u) + (t | u) + (t ^ u) + ~t
             + max(t, u) + min(t, u) + abs(t) - (-u), at=[i])
}
"""
COMPARE = """
kernel cmp(x: tensor<f32>[N], y: tensor<i32>[N], flag: i32) {
    let i = program_id(0)
    let t = load(x, tile=[64], at=[i])
    let k = load(y, tile=[64], at=[i])
    let c = (t == 1.0) or (t != t) or (t < 2.0 and t >= -1.0) or (k > 3 and k <= 9) or not (k != 0)
    store(y, cast<i32>(c) + where(flag > 0, k, -k), at=[i])
}
"""
CASTS = """
kernel casts(x: tensor<f32>[N], h: tensor<f16>[N], b: tensor<bf16>[N], i: tensor<i32>[N], w: tensor<i8>[N],
             l: tensor<i64>[N], back: tensor<f32>[N], d: tensor<f64>[N]) {
    let p = program_id(0)
    let t = load(x, tile=[64], at=[p])
    store(h, cast<f16>(t), at=[p])
    store(b, cast<bf16>(cast<f16>(t)), at=[p])
    let n = cast<i32>(t)
    store(i, n, at=[p])
    store(w, cast<i8>(n), at=[p])
    store(l, cast<i64>(n) + cast<i64>(t > 0.0), at=[p])
    store(back, cast<f32>(n) + cast<f32>(cast<bool>(t)) + bitcast<f32>(bitcast<i32>(t)), at=[p])
    store(d, cast<f64>(t) * 2.0, at=[p])
}
"""
SHAPES = """
kernel shapes(x: tensor<f32>[4, 8], y: tensor<f32>[8, 4], z: tensor<f32>[4, 8], w: tensor<f32>[32],
              r: tensor<i32>[32]) {
    let t = load(x, tile=[4, 8])
    store(y, transpose(t))
    let col = expand_dims(sum(t, axis=1), 1)
    store(z, broadcast(col, [4, 8]) + t + full<f32>[4, 8](num_programs(0)))
    store(w, reshape(t, [32]))
    store(r, arange(16, 48))
}
"""
REDUCE = """
kernel red<BLOCK: int = 16>(x: tensor<f32>[M, N], s: tensor<f32>[M], mx: tensor<f32>[M], mn: tensor<f32>[M],
                            am: tensor<i32>[M], an: tensor<i32>[M], k: tensor<i32>[4, 8], cols: tensor<i32>[8],
                            total: tensor<i32>[1], ak: tensor<i32>[8]) {
    let row = program_id(0)
    let lo = load(x, tile=[1, BLOCK], at=[row, 0], pad=-inf)
    let hi = load(x, tile=[1, BLOCK], at=[row, 0], pad=inf)
    store(s, sum(load(x, tile=[1, BLOCK], at=[row, 0]), axis=1), at=[row])
    store(mx, max(lo, axis=1), at=[row])
    store(mn, min(hi, axis=1), at=[row])
    store(am, argmax(lo, axis=1), at=[row])
    store(an, argmin(hi, axis=1), at=[row])
    let t = load(k, tile=[4, 8], pad=-1000)
    store(cols, max(t, axis=0))
    store(ak, argmin(t, axis=0))
    store(total, full<i32>[1](sum(t)))
}
"""
# Reductions along an axis of 2 (a sorting network's compare-and-swap step is one): reduce regions on Tile IR, like
# any other axis (test_a_reduction_along_an_axis_of_two_is_a_reduce_region says why).
PAIRS = """
kernel pairs<T: dtype = f32>(x: tensor<T>[M, 2, N], s: tensor<f32>[M, N], mx: tensor<T>[M, N], mn: tensor<T>[M, N]) {
    let t = load(x, tile=[4, 2, 16], at=[program_id(0), 0, 0])
    store(s, cast<f32>(sum(t, axis=1)), at=[program_id(0), 0])
    store(mx, max(t, axis=1), at=[program_id(0), 0])
    store(mn, min(t, axis=1), at=[program_id(0), 0])
}
"""
SCAN = """
kernel cumsum<T: dtype = f32, U: dtype = f32>(x: tensor<T>[M, N], y: tensor<U>[M, N]) {
    let row = program_id(0)
    store(y, cast<U>(cumsum(load(x, tile=[1, 64], at=[row, 0]), axis=1)), at=[row, 0])
}
"""
DOT = """
kernel mm<T: dtype = f16, A: dtype = f32, TF: bool = false>(a: tensor<T>[M, K], b: tensor<T>[K, N],
                                                            c: tensor<A>[M, N]) {
    var acc = zeros<A>[32, 32]
    for k in range(cdiv(K, 16)) {
        acc = dot(load(a, tile=[32, 16], at=[0, k]), load(b, tile=[16, 32], at=[k, 0]), acc, tf32=TF)
    }
    store(c, acc)
}
"""
GATHER_SCATTER = """
kernel permute(x: tensor<f32>[N], idx: tensor<i32>[N], y: tensor<f32>[N], z: tensor<f32>[N],
               m: tensor<i32>[R, C], rows: tensor<i32>[16], g: tensor<i32>[16]) {
    let i = program_id(0)
    let live = arange(0, 64) + i * 64 < N
    let j = load(idx, tile=[64], at=[i])
    let v = gather(x, j, mask=live, other=-1.0)
    scatter(y, j, v * 2.0, mask=live)
    store(z, v, at=[i])
    let r = load(rows, tile=[16])
    store(g, gather(m, [r, r + 1]))
}
"""
ATOMICS = """
kernel atom<T: dtype = i32>(bins: tensor<i32>[N], w: tensor<T>[N], h: tensor<T>[B], hi: tensor<T>[B],
                            lo: tensor<T>[B], old: tensor<T>[N]) {
    let i = program_id(0)
    let live = arange(0, 32) + i * 32 < N
    let b = load(bins, tile=[32], at=[i])
    let v = load(w, tile=[32], at=[i])
    store(old, atomic_add(h, b, v, mask=live), at=[i])
    atomic_max(hi, b, v, mask=live)
    atomic_min(lo, b, v)
}
"""
CONTROL = """
kernel branchy(x: tensor<f32>[N], y: tensor<f32>[N], n: tensor<i32>[N], flag: i32) {
    let i = program_id(0)
    let t = load(x, tile=[16], at=[i])
    var r = t
    if i % 2 == 0 { r = t * 2.0 } else if i == 3 { r = -t } else { r = t + 100.0 }
    if flag > 0 { r = r + 1000.0 }
    var s = 0
    for k in range(i + 1) { s += k }
    for k in range(5, 2) { s = 1000 }
    var u: f32
    if flag > 1 { u = 1.0 } else { u = 2.0 }
    store(y, r + full<f32>[16](u), at=[i])
    store(n, full<i32>[16](s), at=[i])
}
"""
GRID = """
kernel ids(y: tensor<i32>[Z, Y, X]) {
    let x = program_id(0)
    let yy = program_id(1)
    let z = program_id(2)
    let v = x + 10 * yy + 100 * z + 1000 * (num_programs(0) + num_programs(1) * 10 + num_programs(2) * 100)
    store(y, full<i32>[1, 1, 1](v), at=[z, yy, x])
}
"""
EDGE = """
kernel edge(x: tensor<f32>[M, N], y: tensor<f32>[M, N], z: tensor<f32>[8, 8], u: tensor<f32>[8, 8]) {
    let t = load(x, tile=[8, 8], at=[1, 1], pad=-5.0)
    store(z, t)
    store(y, t + 1.0, at=[1, 1])
    store(u, load(x, tile=[8, 8], at=[-1, 0], pad=3.0))
    store(y, t, at=[-1, 0])
}
"""

# name -> (source, kernel, constants, cuda_tile ops the lowering must contain)
CONSTRUCTS = {
    "float_math_f32": (FLOAT_MATH, "fm", {}, {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                                            "floor", "ceil", "absf", "fpowf", "remf", "negf", "maxf", "minf", "fma",
                                            "divf", "load_ptr_tko"}),
    "float_math_f16": (FLOAT_MATH, "fm", {"T": "f16"}, {"exp", "tanh", "fpowf", "ftof"}),
    "float_math_bf16": (FLOAT_MATH, "fm", {"T": "bf16"}, {"exp", "sqrt", "ftof"}),
    "float_math_f64": (FLOAT_MATH.replace(" + erf(t)", ""), "fm", {"T": "f64"}, {"exp", "log", "fpowf"}),
    "int_math": (INT_MATH, "im", {}, {"addi", "subi", "muli", "divi", "remi", "shli", "shri", "andi", "ori", "xori",
                                     "maxi", "mini", "absi"}),
    "compare_select": (COMPARE, "cmp", {}, {"cmpf", "cmpi", "select", "andi", "ori", "xori"}),
    "casts": (CASTS, "casts", {}, {"ftof", "ftoi", "itof", "exti", "trunci", "bitcast", "select"}),
    "shapes": (SHAPES, "shapes", {}, {"permute", "reshape", "broadcast", "iota", "get_num_tile_blocks"}),
    "reductions": (REDUCE, "red", {}, {"reduce", "maxf", "minf", "maxi", "iota"}),
    "pair_reductions_f32": (PAIRS, "pairs", {}, {"reduce", "addf", "maxf", "minf"}),
    "pair_reductions_i32": (PAIRS, "pairs", {"T": "i32"}, {"reduce", "addi", "maxi", "mini"}),
    "scan_f32": (SCAN, "cumsum", {}, {"scan"}),
    "scan_bf16": (SCAN, "cumsum", {"T": "bf16", "U": "bf16"}, {"scan", "ftof"}),
    "scan_i32": (SCAN, "cumsum", {"T": "i32", "U": "i32"}, {"scan", "addi"}),
    "dot_f16": (DOT, "mm", {}, {"mmaf", "for"}),
    "dot_f16_acc": (DOT, "mm", {"A": "f16"}, {"mmaf", "ftof"}),
    "dot_bf16": (DOT, "mm", {"T": "bf16"}, {"mmaf"}),
    "dot_f32": (DOT, "mm", {"T": "f32"}, {"mmaf"}),
    "dot_tf32": (DOT, "mm", {"T": "f32", "TF": True}, {"mmaf", "ftof"}),
    "dot_f64": (DOT, "mm", {"T": "f64", "A": "f64"}, {"mmaf"}),
    "dot_i8": (DOT, "mm", {"T": "i8", "A": "i32"}, {"mmai"}),
    "gather_scatter": (GATHER_SCATTER, "permute", {}, {"offset", "load_ptr_tko", "store_ptr_tko"}),
    "atomics_i32": (ATOMICS, "atom", {}, {"atomic_rmw_tko"}),
    "atomics_f32": (ATOMICS, "atom", {"T": "f32"}, {"atomic_rmw_tko", "ptr_to_ptr", "bitcast"}),
    "control_flow": (CONTROL, "branchy", {}, {"if", "for", "yield", "continue"}),
    "grid": (GRID, "ids", {}, {"get_tile_block_id", "get_num_tile_blocks"}),
    "edge_padding": (EDGE, "edge", {}, {"load_ptr_tko", "store_view_tko"}),
}


@pytest.mark.parametrize("case", sorted(CONSTRUCTS))
def test_construct_lowers(case):
    src, name, consts, want = CONSTRUCTS[case]
    for spec in ("default", "generic"):
        module = lower(src, name, consts, spec)
        missing = want - names(module)
        assert not missing, f"{case}: no {missing} in the lowering"


@needs_tileiras
@pytest.mark.parametrize("case", sorted(CONSTRUCTS))
def test_construct_compiles(case):
    src, name, consts, _ = CONSTRUCTS[case]
    for spec, arch in (("default", "sm_90"), ("generic", "sm_100")):
        kernel, spec, module = build(src, name, consts, spec)
        assert tileir_blockers(module, arch) == []
        binary = tileir.compile_tileir(tle_to_tileir(module), arch)
        assert binary.cubin[:4] == b"\x7fELF"
        assert binary.params == ["ptr" if a.kind == "ptr" else a.dtype for a in abi(kernel, spec)]


def test_dot_precision_and_accumulators():
    tf32 = lower(DOT, "mm", {"T": "f32", "TF": True})
    (mma,) = ops(tf32, "mmaf")
    assert [str(v.type) for v in list(mma.operands)[:2]] == ["!cuda_tile.tile<32x16xtf32>",
                                                          "!cuda_tile.tile<16x32xtf32>"]
    ieee = lower(DOT, "mm", {"T": "f32"})
    (mma,) = ops(ieee, "mmaf")
    assert str(mma.operands[0].type) == "!cuda_tile.tile<32x16xf32>" and not ops(ieee, "ftof")
    # An f16 accumulator: widened to f32 for the mma, rounded once to f16 after it.
    h = lower(DOT, "mm", {"A": "f16"})
    (mma,) = ops(h, "mmaf")
    assert str(mma.operands[2].type) == "!cuda_tile.tile<32x32xf32>"
    assert [str(op.results[0].type) for op in ops(h, "ftof")] == ["!cuda_tile.tile<32x32xf32>",
                                                                  "!cuda_tile.tile<32x32xf16>"]
    (mmai,) = ops(lower(DOT, "mm", {"T": "i8", "A": "i32"}), "mmai")
    assert attr_str(mmai, "signedness_lhs") == attr_str(mmai, "signedness_rhs") == "signed"


def test_max_min_propagate_nan_and_argmax_is_a_two_operand_reduce():
    module = lower(REDUCE, "red")
    reduces = ops(module, "reduce")
    two = [r for r in reduces if len(r.operands) == 2]
    assert len(two) == 3  # argmax, argmin (rows), argmin (axis 0)
    for r in two:
        ids = [str(a) for a in ir.ArrayAttr(r.attributes["identities"])]
        assert ids[1] == "2147483647 : i32" and ids[0] in ("0xFF800000 : f32", "0x7F800000 : f32", "2147483647 : i32")
    for op in ops(module, "maxf") + ops(module, "minf"):
        assert ir.BoolAttr(op.attributes["propagate_nan"]).value
    sums = [r for r in reduces if "addf" in {o.name.removeprefix("cuda_tile.") for o in walk_region(r)}]
    assert [str(ir.ArrayAttr(r.attributes["identities"])[0]) for r in sums] == ["-0.000000e+00 : f32"]


@pytest.mark.parametrize("t", ["f32", "bf16", "i32"])
def test_a_reduction_along_an_axis_of_two_is_a_reduce_region(t):
    """Lowered as two extracts and an elementwise op instead, a sorting network compiled about 3x faster (a top-8 of
    [16, 256]: 3.1 s against 9.4 on the CPU machine) but ran 1.55x slower on the H200 (90.7 us against 58.5 for
    65536 tokens, slower than the native path's 66.3): auto sends such networks to the native path anyway, so a
    forced Tile IR compile keeps the faster code (benchmarks/RESULTS.md, "Sorting networks on Tile IR")."""
    module = lower(PAIRS, "pairs", {"T": t})
    assert ops(module, "extract") == []
    assert len(ops(module, "reduce")) == 3  # sum, max and min
    for op in ops(module, "maxf") + ops(module, "minf"):
        assert ir.BoolAttr(op.attributes["propagate_nan"]).value


def walk_region(op):
    for block in op.regions[0].blocks:
        for child in block.operations:
            yield child.operation


def _erf_model(a: float) -> float:
    """lowering.erf_f32's algorithm in numpy f32 (fma exact through f64), to check the constants it uses."""
    import numpy as np
    f32 = np.float32
    c = lambda bits: f32(lowering._f32(bits))  # noqa: E731
    a = f32(a)
    t = abs(a)
    big = t >= c(lowering._ERF_THRESHOLD)
    x = t if big else f32(a * a)
    coeffs = lowering._ERF_LARGE if big else lowering._ERF_SMALL
    p = c(coeffs[0])
    for bits in coeffs[1:]:
        p = f32(float(p) * float(x) + float(c(bits)))
    r = f32(float(p) * float(a) + float(a))
    if big:
        v = f32(1.0) - f32(2.0 ** -abs(float(r)))
        r = -v if a < 0 else v
    return float(r)


def test_erf_constants_reproduce_libdevice_erff_accuracy():
    """The polynomials are libdevice's; modelled in f32 they are within 2 ulp of erf over [-6, 6]."""
    import numpy as np
    worst = 0.0
    for a in np.linspace(-6.0, 6.0, 24001, dtype=np.float32):
        want = math.erf(float(a))
        ulp = float(np.spacing(np.float32(abs(want)))) or 1e-45
        worst = max(worst, abs(_erf_model(float(a)) - want) / ulp)
    assert worst <= 2.0, worst
    assert _erf_model(0.0) == 0.0 and _erf_model(10.0) == 1.0 and _erf_model(-10.0) == -1.0


def test_erf_lowers_to_libdevice_polynomials():
    module = lower(FLOAT_MATH, "fm")
    fmas = ops(module, "fma")
    assert len(fmas) >= 7  # six polynomial steps and fma(p, a, a)
    exp2 = [op for op in ops(module, "exp2") if ir.BoolAttr(op.attributes["flush_to_zero"]).value]
    # 1 - ex2.approx.ftz(-|r|), as libdevice; and the kernel's own f32 exp2, which flushes as the native path's does
    assert len(exp2) == 2
    consts = {struct.unpack("<I", struct.pack("<f", float(ir.FloatAttr(
        ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()).value)))[0]
        for op in ops(module, "constant") if "xf32>" in str(op.results[0].type)}
    assert set(lowering._ERF_SMALL) | set(lowering._ERF_LARGE) | {lowering._ERF_THRESHOLD} <= consts


def test_float_atomic_max_min_use_integer_atomics_on_the_bits():
    module = lower(ATOMICS, "atom", {"T": "f32"})
    modes = sorted(attr_str(op, "mode") for op in ops(module, "atomic_rmw_tko"))
    assert modes == ["addf", "max", "min", "umax", "umin"]
    int_modes = [op for op in ops(module, "atomic_rmw_tko") if attr_str(op, "mode") != "addf"]
    assert all(str(op.operands[0].type) == "!cuda_tile.tile<32xptr<i32>>" for op in int_modes)
    i_modes = sorted(attr_str(op, "mode") for op in ops(lower(ATOMICS, "atom"), "atomic_rmw_tko"))
    assert i_modes == ["add", "max", "min"]


def test_pointer_offsets_are_64_bit_and_use_the_strides():
    module = lower(GATHER_SCATTER, "permute", spec="generic")
    for op in ops(module, "offset"):
        assert str(op.operands[1].type).endswith("xi64>")
    # the 2-D gather multiplies row and column indices by the strides, which are entry arguments here
    assert len(ops(module, "muli")) >= 2


def test_padding_values_and_the_pointer_fallback():
    module = lower(EDGE, "edge")
    pads = sorted(str(op.results[0].type) for op in ops(module, "make_partition_view"))
    assert any("padding_value" not in p for p in pads)  # the store-only views of z and u
    assert not any("padding_value = zero" in p for p in pads)  # -5.0 and 3.0 have no partition-view padding
    loads = ops(module, "load_ptr_tko")
    assert len(loads) == 2 and all(segments(op) == [1, 1, 1, 0] for op in loads)
    cmps = [op for op in ops(module, "cmpi") if attr_str(op, "signedness") == "unsigned"]
    assert len(cmps) == 4  # one bound check per axis per load


# ---- memory tokens ------------------------------------------------------------------------------------------------

RELOAD = """
kernel reload(x: tensor<f32>[N], y: tensor<f32>[N], z: tensor<f32>[N]) {
    let i = program_id(0)
    store(y, load(x, tile=[64], at=[i]) * 2.0, at=[i])
    store(z, load(y, tile=[64], at=[i]) + 1.0, at=[i])
    store(x, load(z, tile=[64], at=[i]), at=[i])
}
"""
LOOP = """
kernel accum(x: tensor<f32>[N], y: tensor<f32>[N], steps: i32) {
    let i = program_id(0)
    store(y, zeros<f32>[64], at=[i])
    for s in range(steps) {
        store(y, load(y, tile=[64], at=[i]) + load(x, tile=[64], at=[i]), at=[i])
    }
}
"""
SCATTER_LOOP = """
kernel bump(h: tensor<i32>[B], idx: tensor<i32>[N], out: tensor<i32>[N]) {
    let j = load(idx, tile=[16])
    for s in range(4) {
        scatter(h, j, gather(h, j) + 1)
    }
    store(out, atomic_add(h, j, ones<i32>[16]))
    store(out, gather(h, j) + load(out, tile=[16]))
}
"""


def test_a_reload_of_a_stored_tensor_waits_for_the_store():
    module = lower(RELOAD, "reload", options=VIEW_LOADS)
    loads, stores = ops(module, "load_view_tko"), ops(module, "store_view_tko")
    load_x, load_y, load_z = loads
    store_y, store_z, store_x = stores
    # Nothing is written before the first accesses: no tokens.
    assert token_operand(load_x) is None and token_operand(store_y) is None
    assert token_operand(load_y) == store_y.results[0]  # RAW on y
    assert token_operand(store_z) is None               # z's first access
    assert token_operand(load_z) == store_z.results[0]  # RAW on z
    assert token_operand(store_x) == load_x.results[1]  # WAR on x
    assert not ops(module, "join_tokens")


IN_PLACE = """
kernel inplace(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = load(x, tile=[128], at=[program_id(0)])
    store(y, t * 2.0, at=[program_id(0)])
    let u = load(x, tile=[128], at=[program_id(0)])
    store(y, u + 1.0, at=[program_id(0)])
}
"""


def test_tensors_a_launch_passes_overlapping_share_a_token_chain():
    """k(x, x): a binary for separate tensors lets the second load of x take no token, so tileiras may reuse the
    first load's value; with x and y passed overlapping (tle/abi.py aliases) x's loads join y's chain."""
    import torch
    kernel = check_kernel(load_program(IN_PLACE, "inplace.tle"), "inplace", {})
    x, other = torch.randn(256), torch.randn(256)

    def spec(a, b):
        flat = {"x": a, "y": b, "N": 256, "x.stride0": 1, "y.stride0": 1}
        return abi_spec_of(kernel, flat)
    assert spec(x, other).aliases == frozenset()
    assert spec(x, x).aliases == frozenset({("x", "y")})
    assert spec(x[1:], x[:-1]).aliases == frozenset({("x", "y")})  # overlapping windows of one storage
    assert spec(x[:128], x[128:]).aliases == frozenset()  # adjacent, not overlapping

    separate = tle_to_tileir(ast_to_tle(kernel, spec(x, other)), VIEW_LOADS)
    assert all(token_operand(op) is None for op in ops(separate, "load_view_tko"))
    shared = tle_to_tileir(ast_to_tle(kernel, spec(x, x)), VIEW_LOADS)
    (load_1, load_2), (store_1, store_2) = ops(shared, "load_view_tko"), ops(shared, "store_view_tko")
    assert token_operand(load_1) is None
    assert token_operand(store_1) == load_1.results[1]   # WAR: y's store waits for x's load
    assert token_operand(load_2) == store_1.results[0]   # RAW: the reload of x waits for the store to y
    assert token_operand(store_2) == load_2.results[1]


def test_overlapping_tensors_that_are_only_read_share_no_chain():
    import torch
    src = """
    kernel k(a: tensor<f32>[N], b: tensor<f32>[N], y: tensor<f32>[N]) {
        store(y, load(a, tile=[128], at=[0]) + load(b, tile=[128], at=[0]), at=[0])
    }
    """
    kernel = check_kernel(load_program(src, "k.tle"), "k", {})
    x, y = torch.randn(256), torch.randn(256)
    flat = {"a": x, "b": x, "y": y, "N": 256, "a.stride0": 1, "b.stride0": 1, "y.stride0": 1}
    assert abi_spec_of(kernel, flat).aliases == frozenset()  # the same binary as for separate tensors
    flat["y"] = x
    assert abi_spec_of(kernel, flat).aliases == frozenset({("a", "b", "y")})


def test_read_only_tensors_take_no_tokens():
    for path in EXAMPLES:
        for name, src in example(path):
            if "atomic_" in src:  # matmul_splitk: its atomic orders every written tensor (test_an_atomic_is_a_fence)
                continue
            module = lower(src, name, file=path)
            loads = ops(module, "load_view_tko") + ops(module, "load_ptr_tko")
            assert loads and all(token_operand(op) is None for op in loads), name
            if name in ("matmul_persistent", "matmul_batched", "attention_varlen", "linear_recurrence"):
                # Its store sits in the tile loop (attention_varlen's: in the if its early return makes;
                # linear_recurrence's: in the time loop): the written tensor's chain is carried through it, from one
                # new token.
                assert len(ops(module, "make_token")) == 1 and not ops(module, "join_tokens"), name
                continue
            assert not ops(module, "make_token") and not ops(module, "join_tokens"), name


ARRIVE = """
kernel arrive(part: tensor<f32>[P, N], count: tensor<i32>[T], out: tensor<f32>[N], x: tensor<f32>[N]) {
    let i = program_id(0)
    store(part, reshape(load(x, tile=[64], at=[0]), [1, 64]), at=[i, 0])
    let seen = sum(atomic_add(count, zeros<i32>[1], ones<i32>[1]), axis=0)
    if seen == P - 1 {
        store(out, sum(load(part, tile=[4, 64], at=[0, 0]), axis=0), at=[0])
    }
}
"""


def test_an_atomic_is_a_fence():
    """docs/language.md, memory ordering of atomics: the atomic on `count` waits for the store to `part` and is
    acq_rel; the reload of `part` after it (in the branch) waits for the atomic, though they touch different
    tensors; the branch carries every written tensor's chain."""
    module = lower(ARRIVE, "arrive", options=VIEW_LOADS)
    (atomic,) = ops(module, "atomic_rmw_tko")
    store_part = ops(module, "store_view_tko")[0]
    assert token_operand(atomic) == store_part.results[0]
    assert attr_str(atomic, "memory_ordering_semantics") == "acq_rel"
    (branch,) = ops(module, "if")
    inner = list(walk_region(branch))
    (reload,) = [op for op in inner if op.name == "cuda_tile.load_view_tko" and token_operand(op) is not None]
    assert token_operand(reload) == atomic.results[1]


UNREAD_ATOMIC = """
kernel tally(count: tensor<i32>[T], x: tensor<i32>[N]) {
    atomic_add(count, load(x, tile=[64], at=[program_id(0)], pad=0), 1)
}
"""


def test_an_atomic_no_one_reads_is_relaxed():
    """No atomic's result is read (dialects/tle.py relaxed_atomics): relaxed, still device scope and still on the
    token chain; ARRIVE's atomic, whose result decides the branch, stays acq_rel (above)."""
    module = lower(UNREAD_ATOMIC, "tally", options=VIEW_LOADS)
    (atomic,) = ops(module, "atomic_rmw_tko")
    assert attr_str(atomic, "memory_ordering_semantics") == "relaxed"
    assert attr_str(atomic, "memory_scope") == "device"


def test_a_loop_that_stores_and_reloads_carries_the_chain():
    module = lower(LOOP, "accum", options=VIEW_LOADS)
    (loop,) = ops(module, "for")
    assert [str(r.type) for r in loop.results] == ["!cuda_tile.token", "!cuda_tile.token"]
    first_store = ops(module, "store_view_tko")[0]
    assert list(loop.operands)[3:] == [first_store.results[0], first_store.results[0]]
    body = loop.regions[0].blocks[0]
    iv, w, a = body.arguments
    inner = list(walk_region(loop))
    load_y, load_x = [op for op in inner if op.name == "cuda_tile.load_view_tko"]
    assert token_operand(load_y) == w and token_operand(load_x) is None
    (join,) = [op for op in inner if op.name == "cuda_tile.join_tokens"]
    assert list(join.operands) == [a, load_y.results[1]]
    (store,) = [op for op in inner if op.name == "cuda_tile.store_view_tko"]
    assert token_operand(store) == join.results[0]
    cont = inner[-1]
    assert cont.name == "cuda_tile.continue" and list(cont.operands) == [store.results[0], store.results[0]]


def test_scatter_gather_and_atomics_on_one_tensor_are_chained():
    module = lower(SCATTER_LOOP, "bump", options=VIEW_LOADS)
    (loop,) = ops(module, "for")
    assert len(loop.results) == 2  # h's chain; idx is read-only and out is not touched in the loop
    inner = list(walk_region(loop))
    (gather,) = [op for op in inner if op.name == "cuda_tile.load_ptr_tko"]
    (scatter,) = [op for op in inner if op.name == "cuda_tile.store_ptr_tko"]
    w, a = list(loop.regions[0].blocks[0].arguments)[1:]
    assert token_operand(gather) == w
    assert token_operand(scatter).owner.name == "cuda_tile.join_tokens"
    (atomic,) = ops(module, "atomic_rmw_tko")
    assert token_operand(atomic) == loop.results[1]  # after every access made in the loop
    last_gather = ops(module, "load_ptr_tko")[-1]
    assert token_operand(last_gather) == atomic.results[1]
    # out: stored, then reloaded: the reload waits for the store
    store_out, store_out2 = ops(module, "store_view_tko")
    (load_out,) = [op for op in ops(module, "load_view_tko") if token_operand(op) is not None]
    assert token_operand(load_out) == store_out.results[0]
    assert token_operand(store_out2) == load_out.results[1]


# ---- specialisation facts -------------------------------------------------------------------------------------------

def _assumes(module) -> dict:
    """entry argument index -> predicates assumed on it (in order)."""
    (entry,) = ct.entries(module)
    args = list(entry.regions[0].blocks[0].arguments)
    out: dict = {}
    for op in ops(module, "assume"):
        v = op.operands[0]
        while not isinstance(v.owner, ir.Block):
            v = v.owner.operands[0]
        out.setdefault(args.index(v), []).append(predicate(op))
    return out


def test_assume_facts_follow_the_spec():
    src = open(os.path.join(ROOT, "examples", "matmul.tle")).read()
    kernel = check_kernel(load_program(src, "matmul.tle"), "matmul", {})
    keys = [a.key for a in abi(kernel, default_spec(kernel))]
    # default: aligned pointers; sizes and strides only bounded
    got = _assumes(lower(src, "matmul"))
    for i, key in enumerate(keys):
        want = ["#cuda_tile.div_by<16>"] if key in ("a", "b", "c") else ["#cuda_tile.bounded<0, ?>"]
        assert got.get(i) == want, key
    # sizes and strides divisible by 16 too
    d = default_spec(kernel)
    full = Spec(d.divisible16 | {a.key for a in all_args(kernel) if a.kind in ("dim", "stride")}, d.unit_strides)
    got = _assumes(lower(src, "matmul", spec=full))
    for i, key in enumerate(keys):
        want = ["#cuda_tile.div_by<16>"] if key in ("a", "b", "c") else \
            ["#cuda_tile.bounded<0, ?>", "#cuda_tile.div_by<16>"]
        assert got.get(i) == want, key
    # generic: nothing is divisible; sizes and strides are still non-negative
    generic = lower(src, "matmul", spec="generic")
    assert not any("div_by" in p for preds in _assumes(generic).values() for p in preds)
    assert sum(len(p) for p in _assumes(generic).values()) == len(abi(kernel, generic_spec(kernel))) - 3


def test_assumed_values_are_the_ones_used():
    module = lower(open(os.path.join(ROOT, "examples", "matmul.tle")).read(), "matmul")
    for view in ops(module, "make_tensor_view"):
        assert all(v.owner.name == "cuda_tile.assume" for v in view.operands)


def test_scalar_parameters_get_no_bounds():
    module = lower(LOOP, "accum", options=VIEW_LOADS)  # steps is an i32 parameter that is no size: it may be negative
    (entry,) = ct.entries(module)
    steps = list(entry.regions[0].blocks[0].arguments)[-1]
    assert 3 not in _assumes(module)
    (loop,) = ops(module, "for")
    assert loop.operands[1] == steps


@needs_tileiras
@pytest.mark.parametrize("arch,mma", [("sm_90", "Tensor-core SM90"), ("sm_100", "Tensor-core SM100")])
def test_matmul_selects_tma_and_tensor_cores_with_the_facts(arch, mma):
    path = os.path.join(ROOT, "examples", "matmul.tle")
    src = open(path).read()
    kernel = check_kernel(load_program(src, path), "matmul", {})
    d = default_spec(kernel)
    full = Spec(d.divisible16 | {a.key for a in all_args(kernel) if a.kind in ("dim", "stride")}, d.unit_strides)

    def remarks(spec):
        module = lower(src, "matmul", spec=spec, file=path)
        return [(r.kind, r.title, str(r.span), r.details) for r in tileir.remarks(tileir.encode_bytecode(module), arch)]

    got = remarks(full)
    tma_loads = [r for r in got if r[1] == "Load instruction selected"
                 and "note: Instruction = TMA Load instruction" in r[3]]
    assert sorted(r[2] for r in tma_loads) == [f"{path}:10:19", f"{path}:10:55"]
    assert any(r[1] == "Store instruction selected" and "note: Instruction = TMA Store instruction" in r[3]
               and r[2] == f"{path}:12:5" for r in got)
    assert any(r[1].startswith("MMA operation successfully optimized") and f"note: Instruction = {mma}" in r[3]
               and r[2] == f"{path}:10:15" for r in got)
    assert not [r for r in got if r[0] == "failed"]
    # Aligned pointers alone (the default spec): the row strides may be odd, so no TMA; tensor cores still.
    got = remarks(d)
    assert [r[3] for r in got if r[1] == "Failed to select TMA load instruction"] == \
        [["reason: stride not 16-byte aligned"]] * 2
    assert any(f"note: Instruction = {mma}" in r[3] for r in got)
    # No facts at all: the base pointer may be misaligned.
    got = remarks(generic_spec(kernel))
    assert ["reason: base pointer not 16-byte aligned"] in [r[3] for r in got
                                                             if r[1] == "Failed to select TMA load instruction"]


# ---- performance choices (TileirOptions) ----------------------------------------------------------------------------

def _example_module(name: str, consts: dict, spec="full", options=None, kernel=None):
    """An example's kernel (`kernel`, default the example's name) lowered with `consts`; spec "full": every pointer
    aligned, every size and stride divisible by 16 (what the runtime proves for 8192x4096 tensors), "default":
    tlec's."""
    path = os.path.join(ROOT, "examples", f"{name}.tle")
    kernel = check_kernel(load_program(open(path).read(), path), kernel or name, consts)
    d = default_spec(kernel)
    if spec == "full":
        spec = Spec(d.divisible16 | {a.key for a in all_args(kernel) if a.kind in ("dim", "stride")}, d.unit_strides)
    else:
        spec = d
    return tle_to_tileir(ast_to_tle(kernel, spec), options)


OLD_CHOICES = lowering.TileirOptions(tma=None, pointer_loads="none", num_worker_warps=None, occupancy=None)


def _entry_hint(module, name):
    (entry,) = ct.entries(module)
    return ir.IntegerAttr(entry.attributes[name]).value if name in entry.attributes else None


def _allow_tma(op):
    return ir.BoolAttr(op.attributes["allow_tma"]).value if "allow_tma" in op.attributes else None


def test_kernels_without_dot_turn_tma_off_and_load_through_pointers():
    # bf16 softmax: the row is loaded through masked pointers with the -inf padding tile, stored through a view
    # with allow_tma = false; no view load remains.
    m = _example_module("softmax", {"BLOCK": 4096, "T": "bf16"})
    assert not ops(m, "load_view_tko")
    (load,) = ops(m, "load_ptr_tko")
    assert segments(load) == [1, 1, 1, 0]  # pointers, mask, padding tile; x is never written: no token
    (pad,) = [op for op in ops(m, "constant") if op.results[0] == load.operands[2]]
    assert math.isinf(ir.FloatAttr(ir.DenseElementsAttr(pad.attributes["value"]).get_splat_value()).value)
    (store,) = ops(m, "store_view_tko")
    assert _allow_tma(store) is False
    assert _entry_hint(m, "num_worker_warps") is None
    # f32 loads too (a bounds-checked f32 view load is a branch per 16-byte vector as well); the store stays a
    # view store without TMA.
    m = _example_module("softmax", {"BLOCK": 4096, "T": "f32"})
    assert len(ops(m, "load_ptr_tko")) == 1 and not ops(m, "load_view_tko")
    assert [_allow_tma(op) for op in ops(m, "store_view_tko")] == [False]
    # rmsnorm bf16: both the row and the weight load through pointers; a 1-D weight of a [N] tensor too.
    m = _example_module("rmsnorm", {"BLOCK": 4096, "T": "bf16"})
    assert len(ops(m, "load_ptr_tko")) == 2 and not ops(m, "load_view_tko")


def test_kernels_with_dot_keep_tma_and_view_loads():
    for tiles in ((128, 128, 64), (128, 256, 64), (16, 32, 128)):
        m = _example_module("matmul", dict(zip(("BM", "BN", "BK"), tiles), T="bf16"))
        assert not ops(m, "load_ptr_tko")
        assert all(_allow_tma(op) is None for op in ops(m, "load_view_tko") + ops(m, "store_view_tko"))


def test_worker_warps_follow_the_values_per_thread():
    def warps(name, consts):
        return _entry_hint(_example_module(name, consts), "num_worker_warps")
    # dot: 8 warps once the f32 accumulator exceeds 128 values per thread on 4 warps (128 x 128)
    assert warps("matmul", {"BM": 128, "BN": 128, "BK": 64}) is None
    assert warps("matmul", {"BM": 128, "BN": 256, "BK": 64}) == 8
    assert warps("matmul", {"BM": 256, "BN": 128, "BK": 64}) == 8
    assert warps("matmul", {"BM": 16, "BN": 32, "BK": 128}) is None
    # no dot: 8 warps once the largest tile exceeds 32 values per thread on 4 warps (4096 elements)
    assert warps("softmax", {"BLOCK": 4096, "T": "bf16"}) is None
    assert warps("softmax", {"BLOCK": 8192, "T": "f32"}) == 8
    assert warps("swiglu", {"BM": 16, "BN": 256, "T": "bf16"}) is None
    assert warps("vector_add", {"BLOCK": 1024}) is None
    # no dot, tiles of at most 128 elements: 1 worker warp up to 64, 2 up to 128 (an EmbeddingBag's rows, a SpMV)
    assert warps("softmax", {"BLOCK": 32}) == 1
    assert warps("vector_add", {"BLOCK": 64}) == 1
    assert warps("vector_add", {"BLOCK": 128}) == 2
    assert warps("vector_add", {"BLOCK": 256}) is None
    assert warps("matmul", {"BM": 16, "BN": 16, "BK": 16}) is None  # a dot keeps tileiras' choice


BLOCK_SCALED = """
kernel k<BM: int = 128, BN: int = 128, BK: int = 128>(x: tensor<f8e4m3>[M, K], w: tensor<f8e4m3>[N, K],
        sx: tensor<f32>[M, KB], sw: tensor<f32>[NB, KB], y: tensor<bf16>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let part = dot(load(x, tile=[BM, BK], at=[program_id(0), k]), transpose(load(w, tile=[BN, BK], at=[0, k])))
        acc += part * load(sx, tile=[BM, 1], at=[program_id(0), k]) * load(sw, tile=[1, 1], at=[0, k])
    }
    store(y, cast<bf16>(acc), at=[program_id(0), 0])
}
"""


@pytest.mark.parametrize("variant,warps", [
    (BLOCK_SCALED, 8),                                                 # part and acc: 2 x 128 x 128 values live
    (BLOCK_SCALED.replace("BM: int = 128", "BM: int = 64"), None),     # 2 x 64 x 128: 128 a thread on 4 warps
    (BLOCK_SCALED.replace("acc += part *", "acc = part *"), None),     # acc is not read: one tile
    (BLOCK_SCALED.replace("let part = dot(", "let part = 2.0 - dot("), 8),  # through any elementwise op
])
def test_worker_warps_count_a_dot_added_into_an_accumulator(variant, warps):
    """A dot that starts from zeros and is added into a loop-carried tile keeps both live (a block-scaled FP8
    product): at 128x128 tileiras spilled 224 bytes a thread on its 4 worker warps, none on 8
    (benchmarks/RESULTS.md)."""
    assert _entry_hint(lower(variant, "k"), "num_worker_warps") == warps


GATE_UP = """
kernel k<BM: int = 128, BN: int = 128, BK: int = 64>(x: tensor<bf16>[M, K], wg: tensor<bf16>[N, K],
        wu: tensor<bf16>[N, K], y: tensor<bf16>[M, N]) {
    var g = zeros<f32>[BM, BN]
    var u = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let a = load(x, tile=[BM, BK], at=[program_id(0), k])
        g = dot(a, transpose(load(wg, tile=[BN, BK], at=[program_id(1), k])), g)
        u = dot(a, transpose(load(wu, tile=[BN, BK], at=[program_id(1), k])), u)
    }
    store(y, cast<bf16>(g * sigmoid(g) * u), at=[program_id(0), program_id(1)])
}
"""


@pytest.mark.parametrize("variant,warps", [
    (GATE_UP, 8),                                                      # g and u: 2 x 128 x 128 values live
    (GATE_UP.replace("BN: int = 128", "BN: int = 64"), None),          # 2 x 128 x 64: 128 a thread on 4 warps
    (GATE_UP.replace("u = dot(a", "u += dot(a").replace("k])), u)", "k])))"), 8),  # `u += dot(..)` carries u too
    (GATE_UP.replace(", u)\n", ")\n"), None),                       # u = a fresh product each step: not carried
    (GATE_UP.replace("g = dot(a", "var h = dot(a"), None),              # nor is a let product beside u
    (GATE_UP.replace("wu, tile", "wg, tile").replace("u = dot(a", "g = dot(a").replace(", u)\n", ", g)\n"),
     None),                                                             # two products into one tile: held once
])
def test_worker_warps_count_accumulators_carried_together(variant, warps):
    """Dots that accumulate into two loop-carried tiles keep both live through the loop (a gated MLP's gate and up
    products): at 128x128 tileiras took 255 registers and spilled 512 bytes a thread on its 4 worker warps, 168 and
    none on 8 (benchmarks/RESULTS.md "Two accumulators in one loop"). A product recomputed each step (attention's
    scores) counts alone."""
    assert _entry_hint(lower(variant, "k"), "num_worker_warps") == warps


def test_worker_warps_of_attention_count_only_its_carried_tiles():
    # the forward's scores are recomputed each step: only its output accumulator counts (4 warps, occupancy 2)
    assert _entry_hint(_example_module("attention", {"BM": 128, "BN": 64, "D": 128}), "num_worker_warps") is None
    # the backward's dk and dv are both carried: 2 x 128 x 128 at BN = D = 128, 2 x 128 x 64 below
    def dkdv(bn, d):
        m = _example_module("attention_bwd", {"BN": bn, "D": d}, kernel="attention_bwd_dkdv")
        return _entry_hint(m, "num_worker_warps"), _entry_hint(m, "occupancy")
    assert dkdv(128, 128) == (8, None)
    assert dkdv(128, 64) == (None, 2)


DOT_ADD = """
kernel k<T: dtype = f16>(a: tensor<T>[64, 64], c: tensor<f32>[64, 64], d: tensor<f32>[64, 64]) {
    let t = load(a, tile=[64, 64])
    var acc = load(c, tile=[64, 64])
    acc += dot(t, t)
    store(c, acc, at=[0, 0])
}
"""


@pytest.mark.parametrize("variant,mmas,adds", [
    (DOT_ADD, 1, 0),                                                     # one mmaf into acc
    (DOT_ADD.replace("T: dtype = f16", "T: dtype = f8e4m3"), 1, 1),      # 8-bit fast accumulation: not folded
    (DOT_ADD.replace("acc += dot(t, t)", "acc += dot(t, t) + dot(t, t)"), 2, 2),   # dot + dot: as written
    (DOT_ADD.replace("acc += dot(t, t)", "let p = dot(t, t)\n    acc += p\n    store(d, p, at=[0, 0])"), 1, 1),
    (DOT_ADD.replace("acc += dot(t, t)", "let p = dot(t, t)\n    for i in range(2) {\n        acc += p\n    }"),
     1, 1),                                                              # the add in a loop: the product stays out
])
def test_a_dot_added_to_a_tile_accumulates_into_it(variant, mmas, adds):
    """`acc + dot(a, b)` (the dot from zeros, that add its only use) is one mmaf with acc as its accumulator, as
    Triton's combine pass makes it natively; tileiras does not fold it (a second accumulator, an FADD per value)."""
    m = lower(variant, "k")
    assert (len(ops(m, "mmaf")), len(ops(m, "addf"))) == (mmas, adds)


MUL_ADD = """
kernel k<T: dtype = f32>(x: tensor<T>[64], y: tensor<T>[64], z: tensor<T>[64], w: tensor<T>[64]) {
    let a = load(x, tile=[64])
    let b = load(y, tile=[64])
    let c = load(z, tile=[64])
    store(w, a * b + c, at=0)
}
"""
FMA = lowering.TileirOptions(fma=True)  # MUL_ADD has no dot, where "auto" keeps the product apart


@pytest.mark.parametrize("expr,fmas,muls,adds,negs", [
    ("a * b + c", 1, 0, 0, 0),
    ("c + a * b", 1, 0, 0, 0),
    ("a * b - c", 1, 0, 0, 1),                                 # fma(a, b, -c)
    ("c - a * b", 1, 0, 0, 1),                                 # fma(-a, b, c)
    ("a * b + c * a", 1, 1, 0, 0),                             # the first product only
    ("(a * b + c) * b + a", 2, 0, 0, 0),                       # a chain: both
    ("a * b + (a * b) * c", 1, 2, 0, 0),                       # the product that joins the add is used once
])
def test_a_product_added_is_one_fma(expr, fmas, muls, adds, negs):
    """An f32 `a * b + c` (and `- c`, `c -`) whose product has no other use lowers to one fma, the contraction ptxas
    makes on the native path; tileiras does not contract mulf + addf by itself (separate FMUL and FADD in the
    SASS)."""
    m = lower(MUL_ADD.replace("a * b + c", expr), "k", options=FMA)
    counts = tuple(len(ops(m, n)) for n in ("fma", "mulf", "addf", "negf"))
    assert counts == (fmas, muls, adds + len(ops(m, "subf")), negs)
    assert not ops(m, "subf")


def test_a_product_kept_twice_in_a_loop_or_in_16_bits_stays_apart():
    """No fma where the product has another use, where the add is in a loop the product is not, for f16 and bf16,
    and where a dot folds into the add (`x * y + dot(a, b)`: the mmaf takes the product as its accumulator)."""
    twice = MUL_ADD.replace("store(w, a * b + c, at=0)", "let p = a * b\n    store(w, p + c, at=0)\n"
                            "    store(z, p, at=0)")
    assert not ops(lower(twice, "k", options=FMA), "fma")
    loop = MUL_ADD.replace("store(w, a * b + c, at=0)", "let p = a * b\n    var s = c\n"
                           "    for i in range(4) {\n        s = p + s\n    }\n    store(w, s, at=0)")
    assert not ops(lower(loop, "k", options=FMA), "fma")
    for t in ("f16", "bf16"):
        assert not ops(lower(MUL_ADD, "k", {"T": t}, options=FMA), "fma")
    f64 = lower(MUL_ADD, "k", {"T": "f64"}, options=FMA)
    assert len(ops(f64, "fma")) == 1 and not ops(f64, "mulf")
    folded = DOT_ADD.replace("acc += dot(t, t)", "acc = acc * acc + dot(t, t)")
    m = lower(folded, "k")
    assert (len(ops(m, "mmaf")), len(ops(m, "mulf")), len(ops(m, "fma"))) == (1, 1, 0)


def test_products_fuse_by_default_only_in_a_kernel_with_a_dot():
    """`auto` contracts where a dot is (attention's `qk * scale - lse`, a scaled product added to its accumulator)
    and not in a kernel without one: a softmax's running sum `total * exp(m - m2) + exp(t - m2)` ran 1.13x slower
    on the H200 as an fma (tileiras unrolled it onto more registers); fma=False keeps a dot kernel's apart."""
    assert not ops(lower(MUL_ADD, "k"), "fma") and len(ops(lower(MUL_ADD, "k"), "mulf")) == 1
    scaled = DOT_ADD.replace("acc += dot(t, t)", "let s = load(d, tile=[64, 64])\n    acc = dot(t, t) * s + acc")
    assert (len(ops(lower(scaled, "k"), "fma")), len(ops(lower(scaled, "k"), "mulf"))) == (1, 0)
    apart = lower(scaled, "k", options=lowering.TileirOptions(fma=False))
    assert (len(ops(apart, "fma")), len(ops(apart, "mulf"))) == (0, 1)


def test_narrow_tiles_load_through_pointers_in_a_dot_kernel():
    """Tiles whose rows span under 16 bytes (TMA cannot move them) load through masked pointers even in a kernel
    with a dot: the block-scaled product's [128, 1] and [1, 1] f32 scales; x and w stay view loads."""
    m = lower(BLOCK_SCALED, "k")
    assert [str(op.results[0].type) for op in ops(m, "load_ptr_tko")] == \
        ["!cuda_tile.tile<128x1xf32>", "!cuda_tile.tile<1x1xf32>"]
    assert len(ops(m, "load_view_tko")) == 2
    views = lower(BLOCK_SCALED, "k", options=lowering.TileirOptions(pointer_loads="none"))
    assert not ops(views, "load_ptr_tko") and len(ops(views, "load_view_tko")) == 4
    wide = BLOCK_SCALED.replace("load(sx, tile=[BM, 1], at=[program_id(0), k])",
                                "sum(load(sx, tile=[BM, 4], at=[program_id(0), 0]), axis=1, keepdims=true)")
    assert len(ops(lower(wide, "k"), "load_ptr_tko")) == 1  # 4 f32 = 16 bytes: a view load


def test_occupancy_hints():
    """docs/tileir.md, Performance: 32 warps per SM for dot-free kernels whose tiles are all loaded and stored in 16
    bits: 8 CTAs of 4 warps up to 4096 elements, 4 CTAs of 8 up to 8192; f32 rows, bigger tiles and single dots get
    no hint; kernels with two dots on accumulators that 4 warps hold get 2 CTAs per SM."""
    def occupancy(name, consts):
        return _entry_hint(_example_module(name, consts), "occupancy")
    assert occupancy("softmax", {"BLOCK": 4096, "T": "bf16"}) == 8
    assert occupancy("layernorm", {"BLOCK": 1024, "T": "f16"}) == 8
    assert occupancy("swiglu", {"BM": 16, "BN": 256, "T": "bf16"}) == 8
    assert occupancy("softmax", {"BLOCK": 8192, "T": "bf16"}) == 4  # 8192 values take the 8 worker warps
    assert occupancy("layernorm", {"BLOCK": 8192, "T": "bf16"}) == 4
    assert occupancy("softmax", {"BLOCK": 16384, "T": "bf16"}) is None
    assert occupancy("softmax", {"BLOCK": 4096, "T": "f32"}) is None
    assert occupancy("matmul", {"BM": 64, "BN": 64, "BK": 64, "T": "bf16"}) is None
    # two dots (attention): 2 CTAs per SM while the accumulators fit 4 warps
    assert occupancy("attention", {"BM": 128, "D": 64}) == 2
    assert occupancy("attention", {"BM": 128, "BN": 32, "D": 128}) == 2
    assert occupancy("attention", {"D": 64}) == 4  # 64x64 tiles: each dot keeps 32 values per thread
    assert occupancy("attention", {"D": 64, "CAUSAL": True}) == 4
    assert occupancy("attention", {"D": 128}) == 2  # a 64x128 accumulator
    assert occupancy("attention", {"BM": 128, "BN": 256, "D": 64}) is None  # a 128x256 score tile takes 8 warps
    forced = _example_module("softmax", {"BLOCK": 4096, "T": "bf16"}, options=lowering.TileirOptions(occupancy=None))
    assert _entry_hint(forced, "occupancy") is None


SMALL_STEPS = open(os.path.join(ROOT, "tests", "filecheck", "tileir", "small_steps.tle"), encoding="utf-8").read()
ROW_SUM = """
kernel rowsum<BLOCK: int = 128, T: dtype = f32>(x: tensor<T>[M, N], y: tensor<f32>[M, 1]) {
    var s = zeros<f32>[1, BLOCK]
    for j in range(cdiv(N, BLOCK)) {
        s += cast<f32>(load(x, tile=[1, BLOCK], at=[program_id(0), j]))
    }
    store(y, sum(s, axis=1, keepdims=true), at=[program_id(0), 0])
}
"""


def test_loops_that_read_little_a_step_ask_for_eight_programs_per_sm():
    """A kernel without a dot whose every loop reads tiles of at most 4 KB a step gets 8 CTAs per SM (4 for a tile
    past 4 warps' 32 values a thread): an EmbeddingBag's 128- to 1024-wide f32 rows (its ids, scalars, do not
    count), a row sum's 512 B to 4 KB; 8 KB a step, or a dot, get none (H200: benchmarks/RESULTS.md "Loops that
    read little a step")."""
    from tle.lowering.tle_to_tileir import _SMALL_STEP_BYTES
    assert _SMALL_STEP_BYTES == 4096
    assert _entry_hint(lower(SMALL_STEPS, "embedding_bag"), "occupancy") == 8
    assert _entry_hint(lower(SMALL_STEPS, "embedding_bag", {"BD": 1024}), "occupancy") == 8  # 4 KB
    assert _entry_hint(lower(SMALL_STEPS, "embedding_bag", {"BD": 2048}), "occupancy") is None  # 8 KB
    assert _entry_hint(lower(ROW_SUM, "rowsum", {"BLOCK": 1024}), "occupancy") == 8
    assert _entry_hint(lower(ROW_SUM, "rowsum", {"BLOCK": 2048}), "occupancy") is None


ROW_CUMSUM = ROW_SUM.replace("s += cast<f32>(load(x, tile=[1, BLOCK], at=[program_id(0), j]))",
                             "s = cumsum(cast<f32>(load(x, tile=[1, BLOCK], at=[program_id(0), j])), axis=1) + s")


def test_a_scan_carried_through_a_loop_asks_for_four_programs_per_sm():
    """A cumsum inside a loop, along a row or down the columns, gets 4 CTAs per SM, ahead of the small-step rule's
    8 (bf16) and of no hint (f32): H200, benchmarks/RESULTS.md "Scans in a loop". A scan outside any loop (the
    one-tile row cumsum of examples/cumsum.tle) and a loop without a scan keep their rules."""
    for t, block in (("f32", 2048), ("bf16", 2048), ("bf16", 1024), ("f32", 128)):
        m = lower(ROW_CUMSUM, "rowsum", {"BLOCK": block, "T": t})
        assert _entry_hint(m, "occupancy") == 4, (t, block)
    assert _entry_hint(lower(ROW_SUM, "rowsum", {"BLOCK": 1024}), "occupancy") == 8  # no scan: small steps
    assert _entry_hint(_example_module("cumsum", {"BLOCK": 4096, "T": "f32"}), "occupancy") is None
    assert _entry_hint(_example_module("cumsum", {"BLOCK": 4096, "T": "bf16"}), "occupancy") == 8  # 16-bit rows
    assert _entry_hint(lower(ROW_SUM, "rowsum", {"BLOCK": 2048, "T": "bf16"}), "occupancy") == 8
    assert _entry_hint(lower(ROW_SUM, "rowsum", {"BLOCK": 4096, "T": "bf16"}), "occupancy") is None
    assert _entry_hint(lower(GEMV, "gemv"), "occupancy") is None  # 17 KB a step
    forced = lower(SMALL_STEPS, "embedding_bag", options=lowering.TileirOptions(occupancy=None))
    assert _entry_hint(forced, "occupancy") is None


def test_loop_step_bytes_counts_each_loop_apart_and_its_unroll():
    """loop_step_bytes: a loop's own tile loads, not those of a loop nested in it, times its unroll factor; a loop
    that loads only scalars reads 0, and loops that load nothing are left out."""
    from tle.lowering.tle_to_tileir import loop_step_bytes
    src = """
kernel k(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    var t = 0.0
    for i in range(4) unroll(2) {
        t += sum(load(x, tile=[1, 64], at=[program_id(0), i]))
        for j in range(3) {
            t += sum(load(x, tile=[1, 256], at=[program_id(0), j]))
        }
    }
    for i in range(5) {
        t += 1.0
    }
    for i in range(6) {
        t += load(y, at=i)
    }
    store(y, full<f32>[1](t), at=program_id(0))
}
"""
    _, _, module = build(src, "k")
    from tle.dialects.mlir import nested_ops
    assert sorted(loop_step_bytes(list(nested_ops(module.body.operations[0].operation)))) == [0, 2 * 256, 1024]


def test_one_32x32_to_128x128_dot_over_more_programs_than_sms_asks_for_two_per_sm():
    """A kernel with one dot on a 32x32 to 128x128 accumulator gets 2 CTAs per SM when its launch has more
    programs than SMs (the ManyPrograms fact, tle.many_programs), and no hint without it; smaller (16x32) and
    128x256 accumulators, kernels that stride by num_programs (persistent) and a fact-less launch get none."""
    from tle.abi import ManyPrograms

    def occupancy(name, consts, many=True):
        path = os.path.join(ROOT, "examples", f"{name}.tle")
        kernel = check_kernel(load_program(open(path).read(), path), name, consts)
        d = default_spec(kernel)
        spec = Spec(d.divisible16, d.unit_strides, d.inside | ({ManyPrograms()} if many else set()), d.divisible)
        tle_module = ast_to_tle(kernel, spec)
        marked = ["tle.many_programs" in op.attributes for op in tle_module.body.operations]
        assert marked == [many], marked
        return _entry_hint(tle_to_tileir(tle_module), "occupancy")
    assert occupancy("matmul", {"BM": 128, "BN": 128, "BK": 64}) == 2
    assert occupancy("matmul", {"BM": 128, "BN": 128, "BK": 64}, many=False) is None
    assert occupancy("matmul", {"BM": 64, "BN": 128, "BK": 64}) == 2
    assert occupancy("matmul", {"BM": 128, "BN": 64, "BK": 128}) == 2
    assert occupancy("matmul", {"BM": 64, "BN": 64, "BK": 32}) == 2
    assert occupancy("matmul", {"BM": 32, "BN": 64, "BK": 64}) == 2
    assert occupancy("matmul", {"BM": 32, "BN": 32, "BK": 64}) == 2  # 1024 values: the smallest the rule takes
    assert occupancy("matmul", {"BM": 64, "BN": 64, "BK": 64}, many=False) is None
    assert occupancy("matmul", {"BM": 16, "BN": 32, "BK": 64}) is None  # 512 values: not measured
    assert occupancy("matmul", {"BM": 128, "BN": 256, "BK": 64}) is None  # the latency hint's tiles
    assert occupancy("matmul_batched", {"BM": 128, "BN": 128}) is None  # persistent (num_programs): no hint
    # split-K numbers its tile by num_programs but walks no tiles: 2 per SM ran it faster on 11 of 12 launches
    assert occupancy("matmul_splitk", {"BM": 16, "BN": 64, "BK": 128}) == 2


def _with_facts(name, consts, facts, options=None, divisible=()):
    """An example lowered to Tile IR with the launch facts `facts` (tle/abi.py) under _example_module's "full"
    spec (every size and stride divisible by 16), but for the strides in `divisible` (key -> 2, 4 or 8)."""
    path = os.path.join(ROOT, "examples", f"{name}.tle")
    kernel = check_kernel(load_program(open(path).read(), path), name, consts)
    d = default_spec(kernel)
    d16 = d.divisible16 | {a.key for a in all_args(kernel) if a.kind in ("dim", "stride") and a.key not in divisible}
    spec = Spec(d16, d.unit_strides, d.inside | set(facts), frozenset(dict(divisible).items()))
    return tle_to_tileir(ast_to_tle(kernel, spec), options)


def test_a_short_k_dot_past_one_wave_runs_the_grid_as_a_persistent_loop():
    """One dot on a 128x128 (up to 128x256) accumulator, ManyPrograms and ShortK: the entry takes the launch grid
    as three more i32 parameters (at least 1 each), is marked tle.persistent for the runtime, has no occupancy hint,
    and runs its body in a loop from the program's id to the grid's size by the number of programs, whose only
    carried values are the written tensor's two tokens; the views are built once, before it. Program ids come from
    the loop's variable: x = t % gx, then (t / gx) % gy and (t / gx) / gy."""
    from tle.abi import ManyPrograms, ShortK
    consts = {"BM": 128, "BN": 128, "BK": 64}
    m = _with_facts("matmul", consts, {ManyPrograms(), ShortK()})
    (entry,) = ct.entries(m)
    assert ct.PERSISTENT_ATTR in entry.attributes and _entry_hint(m, "occupancy") is None
    args = list(entry.regions[0].blocks[0].arguments)
    plain = _with_facts("matmul", consts, {ManyPrograms()})
    assert len(args) == len(list(ct.entries(plain)[0].regions[0].blocks[0].arguments)) + 3
    assert all(str(a.type) == "!cuda_tile.tile<i32>" for a in args[-3:])
    bounded = [op for op in ops(m, "assume") if op.operands[0] in args[-3:]]
    assert [str(op.attributes["predicate"]) for op in bounded] == ["#cuda_tile.bounded<1, ?>"] * 3
    top = [op.operation.name for op in entry.regions[0].blocks[0].operations]
    loop = next(op for op in entry.regions[0].blocks[0].operations if op.operation.name == "cuda_tile.for")
    assert top.index("cuda_tile.make_partition_view") < top.index("cuda_tile.for")  # views before the loop
    assert top[-2:] == ["cuda_tile.for", "cuda_tile.return"]
    assert [str(r.type) for r in loop.results] == ["!cuda_tile.token"] * 2  # c's chain (W, join(A)) only
    lower, upper, step = list(loop.operands)[:3]
    assert lower.owner.name == "cuda_tile.get_tile_block_id" and step.owner.name == "cuda_tile.get_num_tile_blocks"
    assert upper.owner.name == "cuda_tile.muli"
    assert not any(op.name == "cuda_tile.get_tile_block_id" for op in walk(loop))  # the ids are the loop's own
    body = [op.operation for op in loop.regions[0].blocks[0].operations]
    ids = [(op.name, str(op.attributes["signedness"])) for op in body
           if op.name in ("cuda_tile.remi", "cuda_tile.divi")]
    assert ids[:4] == [("cuda_tile.divi", '"unsigned"'), ("cuda_tile.remi", '"unsigned"'),
                       ("cuda_tile.remi", '"unsigned"'), ("cuda_tile.divi", '"unsigned"')]  # then the K loop's cdiv
    # the occupancy rule's kernel without ShortK, a 64x128 accumulator, 128x256 and 256x128 ones (persistent) and
    # a 256x256 one (not), a persistent example, a forced choice
    assert ct.PERSISTENT_ATTR not in ct.entries(plain)[0].attributes and _entry_hint(plain, "occupancy") == 2
    small = _with_facts("matmul", {"BM": 64, "BN": 128, "BK": 64}, {ManyPrograms(), ShortK()})
    assert ct.PERSISTENT_ATTR not in ct.entries(small)[0].attributes and _entry_hint(small, "occupancy") == 2
    for bm, bn in ((128, 256), (256, 128)):  # the largest accumulator the rule takes, and one past it
        wide = _with_facts("matmul", {"BM": bm, "BN": bn, "BK": 64}, {ManyPrograms(), ShortK()})
        assert ct.PERSISTENT_ATTR in ct.entries(wide)[0].attributes and _entry_hint(wide, "occupancy") is None
    huge = _with_facts("matmul", {"BM": 256, "BN": 256, "BK": 64}, {ManyPrograms(), ShortK()})
    assert ct.PERSISTENT_ATTR not in ct.entries(huge)[0].attributes
    # a's rows 8 bytes apart (K = 4 mod 8 in f16): no TMA, and under the loop tileiras spilled; the rule's hint
    rows8 = _with_facts("matmul", consts, {ManyPrograms(), ShortK()}, divisible={"a.stride0": 4})
    assert ct.PERSISTENT_ATTR not in ct.entries(rows8)[0].attributes and _entry_hint(rows8, "occupancy") == 2
    rows16 = _with_facts("matmul", consts, {ManyPrograms(), ShortK()}, divisible={"a.stride0": 8})
    assert ct.PERSISTENT_ATTR in ct.entries(rows16)[0].attributes
    batched = _with_facts("matmul_batched", {"BM": 128, "BN": 128}, {ManyPrograms(), ShortK()})
    assert ct.PERSISTENT_ATTR not in ct.entries(batched)[0].attributes  # num_programs: persistent already
    forced = _with_facts("matmul", {"BM": 64, "BN": 64, "BK": 64}, (), lowering.TileirOptions(persistent=True))
    assert ct.PERSISTENT_ATTR in ct.entries(forced)[0].attributes
    off = _with_facts("matmul", consts, {ManyPrograms(), ShortK()}, lowering.TileirOptions(persistent=False))
    assert ct.PERSISTENT_ATTR not in ct.entries(off)[0].attributes


def test_a_kernel_with_atomics_is_not_made_persistent():
    """examples/matmul_splitk.tle counts its programs with an atomic (the last to arrive reduces): its grid is not
    rewritten, whatever the launch facts."""
    from tle.abi import ManyPrograms, ShortK
    m = _with_facts("matmul_splitk", {"BM": 128, "BN": 128, "BK": 64, "SPLIT": 2}, {ManyPrograms(), ShortK()})
    assert ct.PERSISTENT_ATTR not in ct.entries(m)[0].attributes


def _latencies(module):
    return [ir.IntegerAttr(op.attributes["latency"]).value if "latency" in op.attributes else None
            for op in ops(module, "load_view_tko")]


def test_load_latency_hint_on_big_and_thin_dot_tiles():
    """docs/tileir.md, Performance: `latency = 6` on the view loads of a kernel with an accumulator of 128x256 values
    or more (tileiras pipelines the K loop deeper), `latency = 4` for one dot on an accumulator of at most 64 rows
    and 32 columns (a decode product streaming its operands); other dots, and kernels without one, get no hint."""
    assert _latencies(_example_module("matmul", {"BM": 128, "BN": 256, "BK": 64})) == [6, 6]
    assert _latencies(_example_module("matmul", {"BM": 256, "BN": 128, "BK": 32})) == [6, 6]
    assert _latencies(_example_module("matmul", {"BM": 128, "BN": 128, "BK": 64})) == [None, None]
    assert _latencies(_example_module("matmul", {"BM": 16, "BN": 32, "BK": 128})) == [4, 4]
    assert _latencies(_example_module("matmul", {"BM": 64, "BN": 32, "BK": 128})) == [4, 4]
    assert _latencies(_example_module("matmul", {"BM": 128, "BN": 32, "BK": 64})) == [None, None]  # 128 rows
    assert _latencies(_example_module("matmul", {"BM": 16, "BN": 64, "BK": 64})) == [None, None]  # 64 columns
    # the decode kernel with the weight tile on the dot's left: a [BN, BM] = [64, 16] accumulator
    swapped = _example_module("matmul_splitk", {"BM": 16, "BN": 64, "BK": 256, "SPLIT": 1, "SWAP": True})
    assert set(_latencies(swapped)) == {4}
    unswapped = _example_module("matmul_splitk", {"BM": 16, "BN": 64, "BK": 256, "SPLIT": 1})
    assert set(_latencies(unswapped)) == {None}
    assert _latencies(_example_module("attention", {"D": 64})) == [None] * 5  # q, then k and v in each of two loops
    m = _example_module("softmax", {"BLOCK": 4096, "T": "bf16"}, options=OLD_CHOICES)  # view loads, no dot
    assert _latencies(m) == [None]
    forced = lowering.TileirOptions(load_latency=3)
    assert _latencies(_example_module("matmul", {"BM": 128, "BN": 128, "BK": 64}, options=forced)) == [3, 3]
    off = lowering.TileirOptions(load_latency=None)
    assert _latencies(_example_module("matmul", {"BM": 128, "BN": 256, "BK": 64}, options=off)) == [None, None]
    with pytest.raises(ValueError, match="load_latency"):
        _example_module("matmul", {}, options=lowering.TileirOptions(load_latency=11))


def test_the_thin_latency_reason_says_whether_the_dot_is_in_a_loop():
    """tlec -v's reason for latency 4: the rule was measured on K loops; a dot in none (one 32x32 product per
    program) gets the hint with a reason that says so, not one about a K loop it does not have."""
    thin = [("f32", (32, 32), None)]
    assert lowering._load_latency(thin)[1].endswith("whose K loop streams its operands")
    hint, why = lowering._load_latency(thin, looped=False)
    assert hint == 4 and why.endswith("though in no loop (the rule was measured on K loops, which stream their "
                                      "operands)")
    big = [("f32", (128, 256), None)]  # the same for the big-accumulator rule (a porter's report)
    assert lowering._load_latency(big)[1].endswith("whose K loop tileiras then pipelines deeper")
    hint, why = lowering._load_latency(big, looped=False)
    assert hint == 6 and why.endswith("though in no loop (the rule was measured on K loops, which tileiras then "
                                      "pipelines deeper)")


def test_a_batched_dot_takes_neither_latency_rule():
    """Both rules were measured on 2-D accumulators: a batch of 16 products of 32x64 (32,768 values, as many as
    128x256) is not a 128x256 accumulator, nor is a batch of thin ones a thin one."""
    assert lowering._load_latency([("f32", (16, 32, 64), None)]) == (None, "")
    assert lowering._load_latency([("f32", (4, 16, 32), None)]) == (None, "")


def test_options_force_each_choice():
    m = _example_module("softmax", {"BLOCK": 4096, "T": "bf16"}, options=OLD_CHOICES)
    assert not ops(m, "load_ptr_tko")
    assert [_allow_tma(op) for op in ops(m, "load_view_tko") + ops(m, "store_view_tko")] == [None, None]
    m = _example_module("softmax", {"BLOCK": 1024, "T": "f32"},
                        options=lowering.TileirOptions(pointer_loads="all", num_worker_warps=8, occupancy=4))
    assert len(ops(m, "load_ptr_tko")) == 1 and not ops(m, "load_view_tko")
    assert _entry_hint(m, "num_worker_warps") == 8 and _entry_hint(m, "occupancy") == 4
    m = _example_module("matmul", {"BM": 128, "BN": 256, "BK": 64}, options=lowering.TileirOptions(tma=False))
    assert [_allow_tma(op) for op in ops(m, "load_view_tko")] == [False, False]
    with pytest.raises(ValueError, match="pointer_loads"):
        _example_module("softmax", {}, options=lowering.TileirOptions(pointer_loads="some"))


@needs_tileiras
def test_row_kernels_compile_without_tma_and_with_room_for_several_ctas_per_sm():
    """The root cause of a 5x slower softmax: with TMA, tileiras warp-specialises the kernel (256 threads at 255
    registers: one CTA per SM). Without it: 128 threads, vectorised predicated loads, registers for 6 CTAs per SM."""
    path = os.path.join(ROOT, "examples", "softmax.tle")
    old = tileir.compile_tileir(_example_module("softmax", {"BLOCK": 4096, "T": "bf16"}, options=OLD_CHOICES))
    assert old.num_threads == 256 and old.extra["registers"] == 255
    module = _example_module("softmax", {"BLOCK": 4096, "T": "bf16"})
    new = tileir.compile_tileir(module)
    assert new.num_threads == 128 and new.extra["registers"] <= 80 and new.extra["stack_bytes"] == 0
    got = tileir.remarks(tileir.encode_bytecode(module))
    assert not [r for r in got if "TMA" in str(r)], [str(r) for r in got]
    # tileiras took the store's hint (the pointer load has no TMA form and gets no remark)
    assert any("allow_tma" in r.title and str(r.span) == f"{path}:8:5" for r in got), [str(r) for r in got]


@needs_tileiras
def test_a_128x256_matmul_gets_two_consumer_warp_groups_and_does_not_spill():
    consts = {"BM": 128, "BN": 256, "BK": 64, "T": "bf16"}
    old = tileir.compile_tileir(_example_module("matmul", consts, options=OLD_CHOICES))
    assert old.num_threads == 256 and old.extra["stack_bytes"] > 1000  # the accumulator spills
    new = tileir.compile_tileir(_example_module("matmul", consts))
    assert new.num_threads == 384 and new.extra["stack_bytes"] == 0 and new.extra["registers"] < 255


# ---- legality ------------------------------------------------------------------------------------------------------

ERF64 = """kernel k(x: tensor<f64>[N], y: tensor<f64>[N]) {
    let i = program_id(0)
    store(y, erf(load(x, tile=[64], at=[i])), at=[i])
}
"""


@needs_tileiras
@pytest.mark.parametrize("arch", ARCHS)
def test_no_blockers_for_the_examples(arch):
    for path in EXAMPLES:
        for name, src in example(path):
            assert tileir_blockers(build(src, name, file=path)[2], arch) == []


def test_an_unsupported_construct_is_a_blocker_at_its_location():
    module = build(ERF64, "k", file="k.tle")[2]
    blockers = [b for b in tileir_blockers(module, "sm_90") if "tileiras" not in b.reason and "writer" not in b.reason]
    assert len(blockers) == 1
    (b,) = blockers
    assert (b.span.file, b.span.line, b.span.col) == ("k.tle", 3, 14)
    assert "erf of f64" in b.reason and str(b).endswith(" at k.tle:3:14")
    with pytest.raises(TleError) as err:
        tle_to_tileir(module)
    assert (err.value.span.line, err.value.span.col) == (3, 14) and "erf of f64" in err.value.message


def test_an_op_without_lowering_and_a_non_power_of_two_tile_are_blockers():
    src = open(os.path.join(ROOT, "examples", "vector_add.tle")).read()
    module = build(src, "vector_add", file="v.tle")[2]
    func = module.body.operations[0].operation
    body = func.regions[0].blocks[0]
    ret = list(body.operations)[-1]
    with module.context, ir.Location.unknown(), ir.InsertionPoint(ret):
        x = ir.Operation.create("arith.constant", results=[ir.F32Type.get()],
                                attributes={"value": ir.FloatAttr.get(ir.F32Type.get(), 2.0)},
                                loc=ir.Location.file("v.tle", 7, 3)).result
        ir.Operation.create("math.cbrt", results=[ir.F32Type.get()], operands=[x], loc=ir.Location.file("v.tle", 8, 5))
        i32 = ir.IntegerType.get_signless(32)
        ir.Operation.create("tle.arange", results=[ir.RankedTensorType.get([100], i32)],
                            attributes={"start": ir.IntegerAttr.get(i32, 0), "end": ir.IntegerAttr.get(i32, 100)},
                            loc=ir.Location.file("v.tle", 9, 7))
    assert "math.cbrt" not in LOWERED_OPS
    blockers = [b for b in tileir_blockers(module, "sm_90") if b.span is not None and b.span.line > 1]
    assert [(b.span.line, b.span.col) for b in blockers] == [(8, 5), (9, 7)]
    assert blockers[0].reason == "no Tile IR lowering for math.cbrt"
    assert "tile shape [100] is not a power of two" in blockers[1].reason
    with pytest.raises(TleError) as err:
        tle_to_tileir(module)
    assert (err.value.span.line, err.value.span.col) == (8, 5) and "math.cbrt" in err.value.message


@pytest.mark.parametrize("arch", ["sm_75", "sm_70", "sm_200"])
def test_an_architecture_tileiras_does_not_target_is_a_blocker(arch):
    module = build(open(EXAMPLES[0]).read(), example(EXAMPLES[0])[0][0], file=EXAMPLES[0])[2]
    blockers = [b for b in tileir_blockers(module, arch) if arch in b.reason]
    assert len(blockers) == 1 and "sm_80" in blockers[0].reason and "sm_90" in blockers[0].reason
    assert blockers[0].span.file == EXAMPLES[0] and blockers[0].span.line > 0


def test_a_missing_tileiras_is_a_blocker(monkeypatch, tmp_path):
    monkeypatch.setenv("TLE_TILEIRAS", str(tmp_path / "no-tileiras"))
    module = build(open(EXAMPLES[0]).read(), example(EXAMPLES[0])[0][0], file=EXAMPLES[0])[2]
    blockers = tileir_blockers(module, "sm_90")
    assert any("TLE_TILEIRAS" in b.reason and "not an executable file" in b.reason for b in blockers)


@needs_tileiras
def test_the_architecture_list_comes_from_tileiras():
    from tle.lowering.tileir_legality import tileiras_archs
    archs = tileiras_archs(tileir.find_tileiras())
    assert {"sm_80", "sm_90", "sm_100", "sm_120"} <= set(archs)


# examples/matmul.tle as kernel k: its dot is on line 10
MATMUL = open(os.path.join(ROOT, "examples", "matmul.tle"), encoding="utf-8").read().replace("kernel matmul<",
                                                                                        "kernel k<")

MOE = """
kernel k<BM: int = 64, BN: int = 64, BK: int = 64>(x: tensor<bf16>[M, K], ids: tensor<i32>[P],
        experts: tensor<i32>[B], w: tensor<bf16>[E, N, K], y: tensor<f32>[M, N]) {
    let e = gather(experts, program_id(0))
    let tok = reshape(load(ids, tile=[BM], at=program_id(0)), [BM, 1])
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let cols = reshape(k * BK + arange(0, BK), [1, BK])
        let a = gather(x, [tok, cols], mask=(tok < M) & (cols < K))
        acc = dot(a, transpose(reshape(load(w, tile=[1, BN, BK], at=[e, program_id(1), k]), [BN, BK])), acc)
    }
    store(y, acc, at=[program_id(0), program_id(1)])
}
"""


CHANNEL_SCALE = """
kernel k<BLOCK: int = 1024>(x: tensor<f32>[R, L], w: tensor<f32>[C], y: tensor<f32>[R, L], HW: i32) {
    let r = program_id(0)
    for i in range(cdiv(L, BLOCK)) {
        let col = i * BLOCK + arange(0, BLOCK)
        let v = load(x, tile=[1, BLOCK], at=[r, i]) * gather(w, col / HW, mask=col < L)
        store(y, v, at=[r, i])
    }
}
"""


CONV1D = open(os.path.join(ROOT, "tests", "data", "causal_conv1d.tle"), encoding="utf-8").read().replace(
    "kernel causal_conv1d<", "kernel k<")
DWCONV = open(os.path.join(ROOT, "tests", "data", "dwconv3x3.tle"), encoding="utf-8").read().replace(
    "kernel dwconv3x3<", "kernel k<")
ROW_GATHER = """
kernel k<BS: int = 16, D: int = 128>(kc: tensor<bf16>[NB, BS, D], table: tensor<i32>[MAXB], o: tensor<f32>[D]) {
    let rows = reshape(arange(0, BS), [BS, 1])
    let dd = reshape(arange(0, D), [1, D])
    var acc = zeros<f32>[1, D]
    for j in range(MAXB) {
        acc += sum(cast<f32>(gather(kc, [load(table, at=j), rows, dd])), axis=0, keepdims=true)
    }
    store(o, reshape(acc, [D]), at=0)
}
"""

MAXPOOL = """
kernel k<BH: int = 16, BW: int = 64>(x: tensor<bf16>[NC, H, W], y: tensor<bf16>[NC, OH, OW]) {
    let t = load(x, tile=[1, 2 * BH, 2 * BW], at=[program_id(0), program_id(1), program_id(2)], pad=-inf)
    let m = max(max(reshape(t, [BH, 2, BW, 2]), axis=3), axis=1)
    store(y, reshape(m, [1, BH, BW]), at=[program_id(0), program_id(1), program_id(2)])
}
"""
GROUP_SUM = """
kernel k<BM: int = 16, BK: int = 256, G: int = 8>(x: tensor<bf16>[M, K], y: tensor<bf16>[M, KG]) {
    let t = load(x, tile=[BM, BK], at=[program_id(0), program_id(1)])
    store(y, cast<bf16>(sum(cast<f32>(reshape(t, [BM, BK / G, G])) * 0.5, axis=2)), at=[program_id(0), program_id(1)])
}
"""

# examples/layernorm.tle and softmax.tle as kernel k on 16-bit rows of 1024 (their kernels start on lines 4 and 3)
LAYERNORM16 = open(os.path.join(ROOT, "examples", "layernorm.tle"), encoding="utf-8").read().replace(
    "kernel layernorm<BLOCK: int = 1024, T: dtype = f32>", "kernel k<BLOCK: int = 1024, T: dtype = bf16>")
SOFTMAX16 = open(os.path.join(ROOT, "examples", "softmax.tle"), encoding="utf-8").read().replace(
    "kernel softmax<BLOCK: int = 1024, T: dtype = f32>", "kernel k<BLOCK: int = 512, T: dtype = f16>")
SCALE16 = """
kernel k<BLOCK: int = 1024>(x: tensor<bf16>[N], y: tensor<bf16>[N]) {
    store(y, load(x, tile=[BLOCK], at=program_id(0)) * 2.0, at=program_id(0))
}
"""
ROW_MAX16 = """
kernel k<BM: int = 4, N: int = 1024>(x: tensor<bf16>[M, N], v: tensor<bf16>[M], i: tensor<i32>[M]) {
    let t = load(x, tile=[BM, N], at=[program_id(0), 0], pad=-inf)
    store(v, max(t, axis=1), at=program_id(0))
    store(i, argmax(t, axis=1), at=program_id(0))
}
"""

# a softmax of 16-bit rows scaled by each row's f32 temperature: the side input is smaller than the rows
TEMP_SOFTMAX16 = """
kernel k<N: int = 512>(x: tensor<bf16>[M, N], temp: tensor<f32>[M], y: tensor<bf16>[M, N]) {
    let r = program_id(0)
    let t = cast<f32>(load(x, tile=[1, N], at=[r, 0])) * reshape(load(temp, tile=1, at=r), [1, 1])
    let e = exp(t - max(t, axis=1, keepdims=true))
    store(y, cast<bf16>(e / sum(e, axis=1, keepdims=true)), at=[r, 0])
}
"""
# a copy of 16-bit [H, D] tiles to slots read as scalars (a KV-cache write): a scalar load reduces a tile of one
SLOT_COPY16 = """
kernel k<H: int = 8, D: int = 128>(x: tensor<bf16>[NT, H, D], y: tensor<bf16>[NS, H, D], slots: tensor<i64>[NT]) {
    let slot = load(slots, at=program_id(0))
    if slot >= 0 {
        store(y, load(x, tile=[1, H, D], at=[program_id(0), 0, 0]), at=[cast<i32>(slot), 0, 0])
    }
}
"""

@pytest.mark.parametrize("src,rule,line", [
    (LAYERNORM16, "a row kernel on 16-bit tiles of at most 1024", 4),  # LayerNorm bf16 rows of 1024: 1.09-1.16x
    (SOFTMAX16, "a row kernel on 16-bit tiles of at most 1024", 3),    # softmax f16 rows of 512: 1.06-1.10x
    (LAYERNORM16.replace("BLOCK: int = 1024", "BLOCK: int = 2048"), None, 0),  # rows of 2048 were level
    (LAYERNORM16.replace("T: dtype = bf16", "T: dtype = f32"), None, 0),       # f32 rows were level
    (LAYERNORM16.replace("BLOCK: int = 1024", "BLOCK: int = 128"), None, 0),   # one warp's rows: not measured
    (SCALE16, None, 0),                                           # no reduction: elementwise, not measured
    (ROW_MAX16, None, 0),                                         # four rows a program, 4096 elements: level
    (TEMP_SOFTMAX16, "a row kernel on 16-bit tiles of at most 1024", 2),  # f32 temperatures: 1.03-1.10x
    (TEMP_SOFTMAX16.replace("tensor<f32>[M]", "tensor<f32>[M, N]").replace("tile=1, at=r), [1, 1])",
                                                                           "tile=[1, N], at=[r, 0]), [1, N])"),
     None, 0),                                                    # f32 tiles as large as the rows: f32 rows
    (SLOT_COPY16, None, 0),                                       # no row is reduced
    (MAXPOOL, "groups of 2 neighbouring elements", 4),            # 2x2 max pooling: 2.4-2.7x
    (GROUP_SUM, "groups of 8 neighbouring", 4),                   # through a cast and a product: 1.00-1.09x
    (GROUP_SUM.replace("G: int = 8", "G: int = 16"), None, 0),    # groups of 32 and 128 were level
    (GROUP_SUM.replace("BK / G, G]", "G, BK / G]"), None, 0),     # the groups' axis leads: not measured
    (GROUP_SUM.replace("reshape(t, [BM, BK / G, G])", "reshape(t, [BM, BK, 1])").replace("G: int = 8",
                                                                                          "G: int = 1"),
     None, 0),                                                    # a unit axis: no groups
    (MOE, "gathered through pointers", 10),                       # the MoE GEMM: 3.1x slower on Tile IR
    (CONV1D, "moves with the loop's counter", 13),               # Mamba's causal conv1d: 1.5-1.75x
    (DWCONV, "moves with the loop's counter", 14),               # a depthwise 3x3 convolution: 1.3-1.4x
    (DWCONV.replace("let ww = col + k % 3 - 1", "let ww = col"), None, 0),  # only a leading axis shifts
    (DWCONV.replace("let ww = col + k % 3 - 1", "let ww = col + k * BW"), None, 0),  # a tile a step: streaming
    (ROW_GATHER, None, 0),                   # the counter picks the leading axis (paged attention: 1.5x faster)
    (CHANNEL_SCALE, "divided by a run-time value inside a loop", 6),   # GroupNorm's channels: 1.2-1.45x
    (CHANNEL_SCALE.replace("col / HW", "col % HW"), "divided by a run-time value", 6),
    (CHANNEL_SCALE.replace("col / HW", "col / 64"), None, 0),             # a constant divisor: a shift
    (CHANNEL_SCALE.replace("col / HW", "col - r / HW"), None, 0),         # scalars: once per program
    (CHANNEL_SCALE.replace("for i in range(cdiv(L, BLOCK)) {", "let i = program_id(1)\n    if true {"),
     None, 0),                                                            # not in a loop: not measured
    (MOE.replace("let a = gather(x, [tok, cols], mask=(tok < M) & (cols < K))",
                 "let a = load(x, tile=[BM, BK], at=[program_id(0), k])"), None, 0),  # e reaches w's index only
    (MOE.replace("let a = gather(x, [tok, cols], mask=(tok < M) & (cols < K))",
                 "let a = load(x, tile=[BM, BK], at=[program_id(0), k]) * gather(x, [tok, 0])"),
     None, 0),                                                    # a gathered [BM, 1] scale over a loaded tile
    (BLOCK_SCALED, "scaled before it joins", 6),                   # the block-scaled FP8 GEMM: 1.6x
    (BLOCK_SCALED.replace("acc += part *", "acc = part *"), None, 0),
    (DOT_ADD, None, 0),                                            # acc += dot(a, b): folded, one mmaf
    (MATMUL.replace("BM: int = 128, BN: int = 128", "BM: int = 256, BN: int = 256"), "256x256 values", 10),
    (MATMUL.replace("BM: int = 128, BN: int = 128", "BM: int = 128, BN: int = 256"), None, 0),  # 8 warps hold it
    (MATMUL.replace("T: dtype = f16", "T: dtype = f32"), "f32 operands at full precision", 10),  # FMA: 3.7-7.8x
    (MATMUL.replace("T: dtype = f16", "T: dtype = f32").replace("acc)\n", "acc, tf32=true)\n"), None, 0),
    (MATMUL.replace("T: dtype = f16", "T: dtype = f64").replace("zeros<f32>", "zeros<T>"), "f64 operands", 10),
    (MATMUL.replace("zeros<f32>", "zeros<f16>"), "an f16 accumulator", 10),  # widened every step: 1.47-1.84x
])
def test_kernels_tile_ir_runs_much_slower_are_named(src, rule, line):
    from tle.lowering.tileir_legality import tileir_slower
    found = tileir_slower(build(src, "k", file="k.tle")[2])
    if rule is None:
        assert found == []
    else:
        (b,) = found
        assert rule in b.reason and "H200" in b.reason and b.span.line == line


def _tle_with_facts(src, name, consts, facts, filename="k.tle"):
    """The tle module of kernel `name` in `src` (the text of `filename`, where its imports are found) under its
    default spec plus the launch facts `facts`."""
    kernel = check_kernel(load_program(src, filename), name, consts)
    d = default_spec(kernel)
    return ast_to_tle(kernel, Spec(d.divisible16, d.unit_strides, d.inside | set(facts), d.divisible))


@pytest.mark.parametrize("tiles,waves,named", [
    ((64, 64, 32), 3, True), ((32, 64, 64), 3, True), ((16, 128, 64), 3, True), ((16, 64, 128), 3, True),
    ((32, 32, 64), 3, True),
    ((64, 64, 32), 2, False),   # up to two waves Tile IR won 16 of 18: decode grids stay there
    ((64, 64, 64), 3, False),   # bigger steps: neither path won throughout
    ((64, 128, 32), 3, False),
])
def test_a_small_dot_step_past_two_waves_takes_the_native_path(tiles, waves, named):
    """One dot of at most 64x64x32 multiply-adds a step, on a launch of more than two waves (ManyWaves, beside
    ManyPrograms): the native path ran 61 of 62 such matmuls faster (1.01-1.65x, H200), so auto takes it, naming the
    dot; up to two waves and on bigger steps the kernel keeps the Tile IR path."""
    from tle.abi import ManyPrograms, ManyWaves
    from tle.lowering.tileir_legality import tileir_slower
    bm, bn, bk = tiles
    facts = {ManyPrograms()} | ({ManyWaves()} if waves > 2 else set())
    module = _tle_with_facts(MATMUL, "k", {"BM": bm, "BN": bn, "BK": bk}, facts)
    assert ["tle.many_waves" in op.attributes for op in module.body.operations] == [waves > 2]
    found = tileir_slower(module)
    if not named:
        assert found == []
    else:
        (b,) = found
        assert f"takes {bm}x{bn}x{bk} multiply-adds a step" in b.reason and "more than two waves" in b.reason
        assert "H200" in b.reason and b.span.line == 10


# nn.Linear's layout, y = x @ w^T: w's tile transposed in registers before the dot (on line 9)
LINEAR_NT = """
kernel k<BM: int = 128, BN: int = 128, BK: int = 64>(
        x: tensor<bf16>[M, K], w: tensor<bf16>[N, K], y: tensor<bf16>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let xt = load(x, tile=[BM, BK], at=[pm, k])
        acc = dot(xt, transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)
    }
    store(y, cast<bf16>(acc), at=[pm, pn])
}
"""

ATOMIC_SPLIT_K = """
kernel k<BM: int = 16, BN: int = 64, BK: int = 128, SPLIT: int = 4>(
        a: tensor<bf16>[M, K], b: tensor<bf16>[K, N], c: tensor<f32>[M, N]) {
    let per = cdiv(cdiv(K, BK), SPLIT)
    var acc = zeros<f32>[BM, BN]
    for k in range(program_id(1) * per, min((program_id(1) + 1) * per, cdiv(K, BK))) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(2), k]), load(b, tile=[BK, BN], at=[k, program_id(0)]), acc)
    }
    let rows = reshape(program_id(2) * BM + arange(0, BM), [BM, 1])
    let cols = reshape(program_id(0) * BN + arange(0, BN), [1, BN])
    atomic_add(c, [rows, cols], acc, mask=(rows < M) & (cols < N))
}
"""
SPLIT_K = open(os.path.join(ROOT, "examples", "matmul_splitk.tle"), encoding="utf-8").read()


@pytest.mark.parametrize("src,name,consts,many,line", [
    (ATOMIC_SPLIT_K, "k", {}, True, 11),                          # atomic_add of the partial tile into C
    (ATOMIC_SPLIT_K, "k", {"BM": 32, "BN": 64, "BK": 128}, True, 11),  # 64x64x64 multiply-adds: the bound
    (ATOMIC_SPLIT_K, "k", {}, False, None),                       # one wave or less: Tile IR
    (ATOMIC_SPLIT_K, "k", {"BM": 64, "BN": 64, "BK": 128}, True, None),  # bigger steps: not measured
    (SPLIT_K, "matmul_splitk", {"BM": 32}, True, 44),             # the last program to arrive sums the partials
    (SPLIT_K, "matmul_splitk", {"BM": 32, "SPLIT": 1}, True, None),  # SPLIT=1 has no atomic
])
def test_split_k_with_atomics_past_one_wave_takes_the_native_path(src, name, consts, many, line):
    """A kernel with atomics whose one dot takes at most 64x64x64 multiply-adds a step, on a launch of more
    programs than SMs: both split-K forms ran faster natively on all 22 launches measured (1.01-1.90x, H200), so
    auto takes the native path and names the atomic."""
    from tle.abi import ManyPrograms
    from tle.lowering.tileir_legality import tileir_slower
    found = tileir_slower(_tle_with_facts(src, name, consts, {ManyPrograms()} if many else set()))
    if line is None:
        assert found == []
    else:
        (b,) = found
        assert "an atomic in a kernel whose one dot" in b.reason and "H200" in b.reason and b.span.line == line


@pytest.mark.parametrize("src,consts,unaligned,named", [
    (MATMUL, {}, {"a"}, True),                              # an odd K: a's rows
    (MATMUL, {}, {"b"}, True),                              # an odd N: b's rows
    (MATMUL, {"BN": 256}, {"a", "c"}, True),
    (MATMUL, {"BM": 64}, {"a"}, False),                     # 64x128 went either way
    (MATMUL, {}, {"c"}, False),                             # only the output's rows: Tile IR as fast or faster
    (MATMUL, {}, set(), False),
    (LINEAR_NT, {}, {"w"}, True),                           # through a transpose in registers
    (LINEAR_NT, {}, {"y"}, False),
    (MATMUL, {}, {"a", "split"}, False),                    # an odd K: Tile IR splits the loop and runs faster
])
def test_a_dot_operand_on_unaligned_rows_takes_the_native_path(src, consts, unaligned, named):
    """A dot of 128x128 or more accumulator values reading an operand from a tensor whose rows TMA cannot read
    (UnalignedRows, which the launch proves) ran 1.04-3.31x slower on Tile IR than natively (42 of 42 launches,
    H200), so auto takes the native path, naming the dot."""
    from tle.abi import LoopSplit, UnalignedRows
    from tle.lowering.tileir_legality import tileir_slower
    facts = {LoopSplit(0) if t == "split" else UnalignedRows(t) for t in unaligned}
    found = tileir_slower(_tle_with_facts(src, "k", consts, facts))
    if not named:
        assert found == []
    else:
        (b,) = found
        assert "not 16-byte aligned" in b.reason and "H200" in b.reason
        assert b.span.line == (9 if src is LINEAR_NT else 10)


def test_a_small_dot_step_beside_another_dot_keeps_the_tileir_path():
    """The rule was measured on one-dot kernels; attention's two small dots past two waves keep Tile IR."""
    from tle.abi import ManyPrograms, ManyWaves
    from tle.lowering.tileir_legality import tileir_slower
    src = open(os.path.join(ROOT, "examples", "attention.tle"), encoding="utf-8").read()
    module = _tle_with_facts(src, "attention", {"BM": 64, "BN": 32, "D": 32}, {ManyPrograms(), ManyWaves()})
    assert tileir_slower(module) == []


@pytest.mark.parametrize("kernel,consts,waves,line", [
    ("attention_bwd_dq", {}, 3, 87),                            # three 64x64x64 dots a step: Q K^T, dO V^T, dS K
    ("attention_bwd_dq", {"CAUSAL": True}, 3, 87),
    ("attention_bwd_dkdv", {}, 3, 42),                          # four: K Q^T, P^T dO, V dO^T, dS^T Q
    ("attention_bwd_dkdv", {"CAUSAL": True}, 3, 42),            # causal: slower natively alone, faster with dq
    ("attention_bwd_dq", {}, 2, None),                          # up to two waves: not measured
    ("attention_bwd_dq", {"D": 128}, 3, None),                  # head dim 128: Tile IR won all 18
    ("attention_bwd_dkdv", {"D": 128}, 3, None),
    ("attention_bwd_dkdv", {"BN": 128}, 3, None),               # 128x64x64 steps: Tile IR ran faster (594.5 us
    ("attention_bwd_dq", {"BM": 128}, 3, None),                 # against 676.7 native for dk/dv)
    ("attention_fwd", {}, 3, None),                             # two dots a step: Tile IR won all 6 at D = 64
])
def test_three_small_dots_in_one_loop_step_past_two_waves_take_the_native_path(kernel, consts, waves, line):
    """Attention's backward at head dim 64 (examples/attention_bwd.tle at its 64x64 tiles): dq and dk/dv chain three
    and four dots of at most 64x64x64 multiply-adds through each loop step; past two waves (ManyWaves) the two ran
    1.01-1.14x faster together natively (6 of 6 shapes, H200), so auto takes the native path, naming the loop's
    first dot. Bigger steps, the forward's two dots and launches of up to two waves keep Tile IR."""
    from tle.abi import ManyPrograms, ManyWaves
    from tle.lowering.tileir_legality import tileir_slower
    path = os.path.join(ROOT, "examples", "attention_bwd.tle")
    src = open(path, encoding="utf-8").read()
    facts = {ManyPrograms()} | ({ManyWaves()} if waves > 2 else set())
    found = tileir_slower(_tle_with_facts(src, kernel, consts, facts, path))
    if line is None:
        assert found == []
    else:
        (b,) = found
        assert f"holds {3 if kernel.endswith('dq') else 4} dots of at most 64x64x64" in b.reason
        assert "H200" in b.reason and b.span.line == line and b.span.file == path


SORT = """
kernel k<N: int = 16>(x: tensor<f32>[L], y: tensor<f32>[L]) {
    let t = load(x, tile=[N], at=0)
    store(y, sort(t), at=0)
}
"""


def test_a_dot_on_gathered_rows_gets_no_occupancy_hint_past_one_wave():
    """The MoE GEMM (64x64 accumulator, rows gathered) forced onto Tile IR: with ManyPrograms the occupancy rule
    would ask for 2 per SM, which ran it 1.35x slower (docs/tileir.md, "Performance"); it gets none. The same
    kernel with its rows loaded as a tile gets 2."""
    from tle.abi import ManyPrograms

    def occupancy(src):
        kernel = check_kernel(load_program(src, "k.tle"), "k", {})
        d = default_spec(kernel)
        spec = Spec(d.divisible16, d.unit_strides, d.inside | {ManyPrograms()}, d.divisible)
        return _entry_hint(tle_to_tileir(ast_to_tle(kernel, spec)), "occupancy")
    assert occupancy(MOE) is None
    assert occupancy(MOE.replace("let a = gather(x, [tok, cols], mask=(tok < M) & (cols < K))",
                                 "let a = load(x, tile=[BM, BK], at=[program_id(0), k])")) == 2


@pytest.mark.parametrize("n,named", [(8, False), (16, True), (1024, True)])
def test_sorting_networks_from_16_take_the_native_path(n, named):
    """tileiras compiles sort()/topk() networks slowly (37 s for a sort of 1024, the native path 1.7): from 10
    compare-and-swap steps (a sort of 16) auto takes the native path, naming the sort() call. A sort of 8 is not
    named so; it goes native as a reduction over groups of 2 (its compare-and-swap steps; sorts of 4 and 8 ran level
    on both paths)."""
    from tle.lowering.tileir_legality import tileir_slower
    found = tileir_slower(build(SORT.replace("N: int = 16", f"N: int = {n}"), "k", file="k.tle")[2])
    if not named:
        assert [b.reason.split(":")[0] for b in found] == [
            "a reduction over groups of 2 neighbouring elements (a reshape cuts the last axis into groups of 2, and a "
            "reduce takes each group)"]
    else:
        (b,) = found
        assert "sorting network" in b.reason and (b.span.line, b.span.col) == (4, 14)


WIDE_SCAN = """
kernel k<BLOCK: int = 16384>(x: tensor<bf16>[M, N], y: tensor<bf16>[M, N]) {
    let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])
    store(y, cast<bf16>(cumsum(t, axis=1)), at=[program_id(0), 0])
}
"""


@pytest.mark.parametrize("block,named", [(4096, False), (8192, False), (16384, True), (65536, True)])
def test_a_scan_over_more_than_8192_elements_takes_the_native_path(block, named):
    """cumsum over rows of 10000 to 65536 ran up to 1.29x slower on Tile IR than natively, and never faster (H200)."""
    from tle.lowering.tileir_legality import tileir_slower
    found = tileir_slower(build(WIDE_SCAN.replace("BLOCK: int = 16384", f"BLOCK: int = {block}"), "k", file="k.tle")[2])
    if not named:
        assert found == []
    else:
        (b,) = found
        assert f"a scan along an axis of {block} elements" in b.reason and "H200" in b.reason
        assert (b.span.line, b.span.col) == (4, 25)  # the cumsum call


def test_a_column_scan_of_a_tile_over_8192_elements_stays_on_tile_ir():
    """The rule reads the scanned axis: cumsum down [1024, 16] tiles (16384 elements) ran 1.16-1.19x faster on Tile
    IR in 3 of 4 cases (H100), where the tile's element count had sent it to the native path."""
    from tle.lowering.tileir_legality import tileir_slower
    src = WIDE_SCAN.replace("tile=[1, BLOCK]", "tile=[1024, 16]").replace("axis=1", "axis=0")
    assert tileir_slower(build(src, "k", file="k.tle")[2]) == []


WIDE_REDUCTION = """
kernel k<R: int = 1, BLOCK: int = 32768>(x: tensor<bf16>[M, N], y: tensor<bf16>[M, N]) {
    let t = cast<f32>(load(x, tile=[R, BLOCK], at=[program_id(0), 0], pad=-inf))
    let e = exp(t - max(t, axis=1, keepdims=true))
    store(y, cast<bf16>(e / sum(e, axis=1, keepdims=true)), at=[program_id(0), 0])
}
"""


@pytest.mark.parametrize("rows,block,named", [(1, 16384, False), (1, 32768, True), (2, 16384, True),
                                              (1, 65536, False), (4, 4096, False)])
def test_a_reduction_over_16385_to_32768_elements_takes_the_native_path(rows, block, named):
    """Softmax over rows of 20000 and 32000 in one tile ran up to 1.4x slower on Tile IR (8 worker warps at most)
    than on the native path's 32 warps; at 65536 elements both spill and neither wins, so the band stops at 32768.
    The count is the reduction's operand: a [2, 16384] tile is 32768 elements. The band is the one where the native
    path gives such a kernel 32 warps (tle/compiler.py, FULL_SM_TILE), written again in the legality check, which
    cannot import the driver: the two must name the same kernels."""
    from tle.compiler import FULL_SM_WARPS, default_num_warps
    from tle.lowering.tileir_legality import tileir_slower
    src = WIDE_REDUCTION.replace("R: int = 1, BLOCK: int = 32768", f"R: int = {rows}, BLOCK: int = {block}")
    kernel, _, module = build(src, "k", file="k.tle")
    assert (default_num_warps(kernel) == FULL_SM_WARPS) == named
    found = tileir_slower(module)
    if not named:
        assert found == []
    else:
        (b,) = found
        assert f"a reduction along the last axis of {rows * block} elements" in b.reason and "2.1x" in b.reason
        assert (b.span.line, b.span.col) == (4, 21)  # the first reduction, max(...)


with open(os.path.join(os.path.dirname(__file__), "..", "data", "streamed_row_max.tle")) as f:
    STREAMED_ROW = f.read()  # its reduction is on line 9
COLUMN_SUM = """
kernel k<BM: int = 256, BN: int = 128>(x: tensor<f32>[M, N], y: tensor<f32>[N]) {
    var acc = zeros<f32>[BN]
    for i in range(cdiv(M, BM)) {
        acc += sum(load(x, tile=[BM, BN], at=[i, program_id(0)]), axis=0)
    }
    store(y, acc, at=[program_id(0)])
}
"""


@pytest.mark.parametrize("src,named", [(STREAMED_ROW, True), (COLUMN_SUM, False),
                                       (COLUMN_SUM.replace("BM: int = 256", "BM: int = 64"), False)])
def test_the_wide_reduction_rule_asks_for_the_last_axis(src, named):
    """A row streamed in 32768-element tiles (cross-entropy, greedy, a vocabulary softmax) ran 1.05-2.08x slower on
    Tile IR; a column sum over 256x128 tiles (axis 0) 1.5-2.7x faster, and keeps the Tile IR path."""
    from tle.lowering.tileir_legality import tileir_slower
    found = tileir_slower(build(src, "k", file="k.tle")[2])
    assert [b.span.line for b in found] == ([9] if named else [])


def test_a_wide_reduction_beside_a_dot_keeps_the_tileir_path():
    """The rule counts the warps of a kernel without a dot; one with a dot gets its warps from its accumulator."""
    from tle.lowering.tileir_legality import tileir_slower
    src = """
kernel k(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f32>[M, N], s: tensor<f32>[M]) {
    let t = load(a, tile=[128, 256], at=[0, 0])
    store(c, dot(t, load(b, tile=[256, 64], at=[0, 0])), at=[0, 0])
    store(s, sum(cast<f32>(t), axis=1), at=[0])
}
"""
    assert tileir_slower(build(src, "k", file="k.tle")[2]) == []


def test_auto_takes_the_native_path_for_them_and_tileir_still_compiles():
    from tle.compiler import compile_kernel, route
    program = load_program(MOE, "k.tle")
    auto = compile_kernel(program, "k", {}, backend="auto", stop="tle")
    backend, why = route(auto.module, "k", "sm_90", "auto")
    assert backend == "triton" and "gathered through pointers" in why and why.endswith("at k.tle:10:15")
    assert route(auto.module, "k", "sm_90", "tileir") == ("tileir", None)
    assert compile_kernel(program, "k", {}, backend="tileir", stop="tileir").backend == "tileir"


def test_blockers_print_as_reason_at_location():
    from tle.diagnostics import Span
    assert str(Blocker(Span("k.tle", 3, 14), "erf of f64")) == "erf of f64 at k.tle:3:14"
    assert str(Blocker(None, "tileiras not found")) == "tileiras not found"


# ---- on the GPU: the Tile IR path against torch and the interpreter --------------------------------------------------
# Run there with: python3 -m pytest -m gpu -s tests/lowering/test_tle_to_tileir.py (skipped without a GPU).

GPU_RESULTS: list = []
_LOADED: dict = {}


def _flat(kernel, tensors: dict, scalars: dict) -> dict:
    """Argument values by ABI key (tle/abi.py), as the runtime binds them."""
    from tle.typed import TensorParam
    flat = {}
    for p in kernel.params:
        if isinstance(p, TensorParam):
            t = tensors[p.name]
            flat[p.name] = t
            for axis, d in enumerate(p.type.dims):
                if isinstance(d, str):
                    flat[d] = t.shape[axis]
                flat[f"{p.name}.stride{axis}"] = t.stride(axis)
        else:
            flat[p.name] = scalars[p.name]
    return flat


_spec_of = abi_spec_of  # the specialisation the runtime derives from real arguments


def _gpu_arch() -> str:
    import torch
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def _prepare(src, name, consts, tensors, scalars, file=None):
    """(key, typed kernel, spec, ABI-ordered args) of one launch."""
    kernel = check_kernel(load_program(src, file or f"{name}.tle"), name, consts)
    flat = _flat(kernel, tensors, scalars)
    spec = _spec_of(kernel, flat)
    return (src, name, tuple(sorted(consts.items())), spec), kernel, spec, [flat[a.key] for a in abi(kernel, spec)]


def _precompile(launches):
    """Compile every specialisation the launches need: lowering here, tileiras on all cores at once."""
    from concurrent.futures import ThreadPoolExecutor
    todo = {}
    for key, kernel, spec, _ in launches:
        if key not in _LOADED and key not in todo:
            todo[key] = tle_to_tileir(ast_to_tle(kernel, spec))
    arch = _gpu_arch()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        binaries = list(pool.map(lambda m: tileir.compile_tileir(m, arch), todo.values()))
    from tle.runtime.launch import load
    for key, binary in zip(todo, binaries):
        _LOADED[key] = (load(binary), binary)


def _launch(prepared, grid):
    import torch
    key, _, _, args = prepared
    _precompile([prepared])
    _LOADED[key][0].launch(tuple(grid) + (1,) * (3 - len(grid)), args)
    torch.cuda.synchronize()


def _rel_err(got, want) -> float:
    g, w = got.double().cpu(), want.double().cpu()
    both_nan = g.isnan() & w.isnan()
    g, w = g.masked_fill(both_nan, 0), w.masked_fill(both_nan, 0)
    if g.isnan().any() or w.isnan().any():
        return float("inf")
    return ((g - w).norm() / w.norm().clamp_min(1e-30)).item()


@pytest.mark.gpu
def test_examples_on_the_gpu():
    """Every example on the Tile IR path against torch: the reference shapes (ragged ones too), large ones, every
    dtype the example takes, contiguous and not (examples/reference.py)."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from reference import CASES, tolerance
    dt = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float8_e4m3fn: "f8e4m3",
          torch.float8_e5m2: "f8e5m2"}
    runs = []
    for name, case in sorted(CASES.items()):
        if "tileir" not in case.backends:  # gelu: inline PTX, native only
            continue
        path = os.path.join(ROOT, "examples", f"{name}.tle")
        src = open(path).read()
        pnames = [p.name for p in check_kernel(load_program(src, path), name, {}).params]
        torch.manual_seed(0)
        for dtype in case.dtypes:
            for shape in case.shapes + list(case.gpu_shapes):
                for noncontig in (False, True):
                    args, grid, consts, ref, outputs = case.make("cuda", dtype, shape, noncontig)
                    tensors = {n: a for n, a in zip(pnames, args) if isinstance(a, torch.Tensor)}
                    scalars = {n: a for n, a in zip(pnames, args) if not isinstance(a, torch.Tensor)}
                    prepared = _prepare(src, name, {**consts, "T": dt[dtype]}, tensors, scalars, path)
                    runs.append((name, dtype, shape, noncontig, args, grid, ref, outputs, prepared))
    _precompile([r[-1] for r in runs])
    failures = []
    for name, dtype, shape, noncontig, args, grid, ref, outputs, prepared in runs:
        _launch(prepared, grid)
        for got, want in zip(outputs(args), ref(args)):
            err = _rel_err(got, want)
            ok = err <= tolerance(name, dtype)
            GPU_RESULTS.append((name, dt[dtype], shape, noncontig, err, ok))
            if not ok:
                failures.append(f"{name} {dtype} {shape} noncontig={noncontig}: rel err {err:.3e}")
    assert not failures, "\n".join(failures)


def _gpu_inputs():
    """Construct kernels with inputs: name -> (source, kernel, consts, grid, tensors, scalars, outputs to compare
    (None: every tensor), tolerance (0: exact))."""
    import torch
    g = torch.Generator().manual_seed(1)

    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=g) * scale).to(dtype)

    def randint(lo, hi, *shape, dtype=torch.int32):
        return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)

    n = 1000
    cases = {}
    for t, tol in (("f32", 2e-6), ("f16", 2e-3), ("bf16", 1.6e-2)):
        d = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[t]
        cases[f"float_math_{t}"] = (FLOAT_MATH, "fm", {"T": t}, (16,), {
            "x": randn(n, dtype=d), "y": (randn(n).abs() + 0.5).to(d), "z": torch.zeros(n, dtype=d)}, {}, None, tol)
    nz = randint(1, 30, n) * (randint(0, 2, n) * 2 - 1)
    cases["int_math"] = (INT_MATH, "im", {}, (16,), {"x": randint(-1000, 1000, n), "y": nz,
                                                     "z": torch.zeros(n, dtype=torch.int32)}, {}, None, 0)
    x = randn(n)
    x[::7] = float("nan")
    cases["compare_select"] = (COMPARE, "cmp", {}, (16,), {"x": x, "y": randint(-12, 12, n)}, {"flag": 1}, None, 0)
    x = torch.cat([randn(n - 10, scale=300), torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 70000.0, -1e-9, 127.9,
                                                            -128.9])])
    cases["casts"] = (CASTS, "casts", {}, (16,), {
        "x": x, "h": torch.zeros(n, dtype=torch.float16), "b": torch.zeros(n, dtype=torch.bfloat16),
        "i": torch.zeros(n, dtype=torch.int32), "w": torch.zeros(n, dtype=torch.int8),
        "l": torch.zeros(n, dtype=torch.int64), "back": torch.zeros(n), "d": torch.zeros(n, dtype=torch.float64)},
        {}, None, 0)
    cases["shapes"] = (SHAPES, "shapes", {}, (1,), {"x": randn(4, 8), "y": torch.zeros(8, 4), "z": torch.zeros(4, 8),
                                                     "w": torch.zeros(32), "r": torch.zeros(32, dtype=torch.int32)},
                       {}, None, 1e-6)
    nan = float("nan")
    xr = torch.tensor([[1, 5, 5, -2, 5, -2, -2, 0, 0, 0, 0, 0, 0], [3, nan, 7, nan, -9, 1, 1, 1, 1, 1, 1, 1, 1],
                       [-1] * 13, [0.5, 2, -3, 4, 9, 9, -3, 1, 0, 0, 0, 0, 0]], dtype=torch.float32)
    cases["reductions"] = (REDUCE, "red", {}, (4,), {
        "x": xr, "s": torch.zeros(4), "mx": torch.zeros(4), "mn": torch.zeros(4),
        "am": torch.zeros(4, dtype=torch.int32), "an": torch.zeros(4, dtype=torch.int32),
        "k": randint(-5, 5, 4, 8), "cols": torch.zeros(8, dtype=torch.int32),
        "total": torch.zeros(1, dtype=torch.int32),
        "ak": torch.zeros(8, dtype=torch.int32)}, {}, None, 1e-6)
    for t, u, tol in (("f32", "f32", 1e-6), ("bf16", "bf16", 1e-2), ("i32", "i32", 0)):
        d = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}
        x = randint(-100, 100, 5, 50) if t == "i32" else randn(5, 50, scale=10, dtype=d[t])
        cases[f"scan_{t}"] = (SCAN, "cumsum", {"T": t, "U": u}, (5,), {"x": x, "y": torch.zeros(5, 50, dtype=d[u])},
                              {}, None, tol)
    for t, a, tf, tol in (("f16", "f32", False, 1e-6), ("f16", "f16", False, 2e-3), ("bf16", "f32", False, 1e-6),
                          ("f32", "f32", False, 1e-6), ("f32", "f32", True, 1e-6), ("f64", "f64", False, 1e-12),
                          ("i8", "i32", False, 0)):
        d = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
             "i8": torch.int8, "i32": torch.int32}
        mk = (lambda *s: randint(-5, 5, *s, dtype=torch.int8)) if t == "i8" else (lambda *s: randn(*s, dtype=d[t]))
        cases[f"dot_{t}_{a}{'_tf32' if tf else ''}"] = (DOT, "mm", {"T": t, "A": a, "TF": tf}, (1,), {
            "a": mk(32, 83), "b": mk(83, 32), "c": torch.zeros(32, 32, dtype=d[a])}, {}, None, tol)
    cases["gather_scatter"] = (GATHER_SCATTER, "permute", {}, (3,), {
        "x": randn(150), "idx": torch.randperm(150, generator=g).to(torch.int32), "y": torch.zeros(150),
        "z": torch.zeros(150), "m": randint(-100, 100, 5, 9), "rows": randint(0, 5, 16),
        "g": torch.zeros(16, dtype=torch.int32)}, {}, None, 0)
    for t, tol in (("i32", 0), ("f32", 1e-6)):
        w = randint(1, 5, 200) if t == "i32" else randn(200)
        d = w.dtype
        hi_init, lo_init = (-100, 100) if t == "i32" else (-1e30, 1e30)
        cases[f"atomics_{t}"] = (ATOMICS, "atom", {"T": t}, (7,), {
            "bins": randint(0, 7, 200), "w": w, "h": torch.zeros(7, dtype=d), "hi": torch.full((7,), hi_init, dtype=d),
            "lo": torch.full((7,), lo_init, dtype=d), "old": torch.zeros(200, dtype=d)}, {}, ("h", "hi", "lo"), tol)
    for t in ("f32", "bf16", "i32"):
        d = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}[t]
        x = randint(-50, 50, 8, 2, 16, dtype=d) if t == "i32" else randn(8, 2, 16, dtype=d)
        if t == "f32":
            x[0, 1, :4] = float("nan")  # max and min propagate NaN from either half
            x[1, 0, :4] = float("nan")
        cases[f"pair_reductions_{t}"] = (PAIRS, "pairs", {"T": t}, (2,), {
            "x": x, "s": torch.zeros(8, 16), "mx": torch.zeros(8, 16, dtype=d), "mn": torch.zeros(8, 16, dtype=d)},
            {}, ("s", "mx", "mn"), 0)
    for flag in (0, 2):
        cases[f"control_flow_{flag}"] = (CONTROL, "branchy", {}, (7,), {
            "x": randn(100), "y": torch.zeros(100), "n": torch.zeros(100, dtype=torch.int32)}, {"flag": flag}, None, 0)
    cases["grid"] = (GRID, "ids", {}, (5, 3, 4), {"y": torch.zeros(4, 3, 5, dtype=torch.int32)}, {}, None, 0)
    cases["edge_padding"] = (EDGE, "edge", {}, (1,), {
        "x": torch.arange(120, dtype=torch.float32).reshape(10, 12), "y": torch.zeros(10, 12), "z": torch.zeros(8, 8),
        "u": torch.zeros(8, 8)}, {}, None, 0)
    cases["tokens_reload"] = (RELOAD, "reload", {}, (16,), {"x": randn(n), "y": torch.zeros(n), "z": torch.zeros(n)},
                              {}, None, 0)
    cases["tokens_loop"] = (LOOP, "accum", {}, (16,), {"x": randn(n), "y": torch.full((n,), 7.0)}, {"steps": 5},
                            None, 0)
    cases["tokens_scatter_loop"] = (SCATTER_LOOP, "bump", {}, (1,), {
        "h": randint(0, 10, 16), "idx": torch.randperm(16, generator=g).to(torch.int32),
        "out": torch.zeros(16, dtype=torch.int32)}, {}, None, 0)
    return cases


@pytest.mark.gpu
def test_constructs_on_the_gpu_match_the_interpreter():
    """Each op class, and the token chains, on the Tile IR path against the CPU interpreter (the reference
    semantics) on the same inputs."""
    import torch
    from tle.runtime.interpreter import interpret
    cases = sorted(_gpu_inputs().items())
    gpu_args = {case: {k: v.cuda() for k, v in c[4].items()} for case, c in cases}
    prepared = {case: _prepare(c[0], c[1], c[2], gpu_args[case], c[5]) for case, c in cases}
    _precompile(list(prepared.values()))
    failures = []
    for case, (src, name, consts, grid, tensors, scalars, compare, tol) in cases:
        cpu, gpu = {k: v.clone() for k, v in tensors.items()}, gpu_args[case]
        try:
            _launch(prepared[case], grid)
            _, kernel, spec, _ = prepared[case]
            ref_flat = _flat(kernel, cpu, scalars)
            interpret(ast_to_tle(kernel, spec), tuple(grid) + (1,) * (3 - len(grid)),
                      [ref_flat[a.key] for a in abi(kernel, spec)])
        except Exception as e:  # noqa: BLE001 - report every case, not only the first
            failures.append(f"{case}: {type(e).__name__}: {str(e)[:400]}")
            GPU_RESULTS.append((case, "-", "-", "-", float("inf"), False))
            continue
        for k in (compare or tensors):
            got, want = gpu[k].cpu(), cpu[k]
            if tol == 0:
                same = torch.equal(got.view(torch.uint8) if got.is_floating_point() else got,
                                   want.view(torch.uint8) if want.is_floating_point() else want) or \
                    (got.is_floating_point() and torch.equal(got.nan_to_num(7.5), want.nan_to_num(7.5)))
                err = 0.0 if same else float("inf")
            else:
                err = _rel_err(got, want)
            ok = err <= tol
            GPU_RESULTS.append((case, k, tuple(got.shape), str(got.dtype).split(".")[-1], err, ok))
            if not ok:
                bad = (got.double() != want.double()).nonzero()[:3].tolist() if got.shape == want.shape else "shape"
                failures.append(f"{case}.{k}: rel err {err:.3e}; first mismatches at {bad}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.timing
def test_matmul_speed_with_the_facts():
    """f16 matmul 4096^3 with the example's own tiles, on the Tile IR path, against torch (cuBLAS); reported, and
    held to a floor that only a TMA + tensor-core kernel reaches."""
    import torch
    path = os.path.join(ROOT, "examples", "matmul.tle")
    src = open(path).read()
    m = n = k = 4096
    a, b = torch.randn(m, k, device="cuda").half(), torch.randn(k, n, device="cuda").half()
    c = torch.empty(m, n, device="cuda", dtype=torch.half)
    grid = (m // 128, n // 128)
    prepared = _prepare(src, "matmul", {}, {"a": a, "b": b, "c": c}, {}, path)
    _launch(prepared, grid)
    assert _rel_err(c, a.float() @ b.float()) < 1e-2

    def timed(fn, reps=20):
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / reps / 1e3

    loaded, binary = _LOADED[prepared[0]]
    args = prepared[3]
    t_tile = timed(lambda: loaded.launch(grid + (1,), args))
    assert prepared[2].divisible16 >= {"a", "b", "c", "M", "N", "K"}  # every fact: TMA and tensor cores
    t_torch = timed(lambda: torch.matmul(a, b, out=c))
    flops = 2 * m * n * k
    GPU_RESULTS.append(("matmul-speed", f"{flops / t_tile / 1e12:.0f} TFLOP/s tileir",
                        f"{flops / t_torch / 1e12:.0f} TFLOP/s torch", f"{t_torch / t_tile:.2f}x", 0.0, True))
    assert flops / t_tile / 1e12 > 200


def teardown_module(module):
    """A summary on stdout (worst error per case, every failure, the speed line); the full table in $OUT."""
    if not GPU_RESULTS:
        return
    rows = [f"{str(r[0]):<28} {str(r[1]):<11} {str(r[2]):<20} {str(r[3]):<8} {r[4]:<10.2e} {'PASS' if r[5] else 'FAIL'}"
            for r in GPU_RESULTS]
    worst: dict = {}
    for r in GPU_RESULTS:
        key = (r[0], r[1]) if isinstance(r[2], tuple) and len(r[2]) and isinstance(r[3], bool) else (r[0],)
        n, bad, err = worst.get(key, (0, 0, 0.0))
        worst[key] = (n + 1, bad + (not r[5]), max(err, r[4]))
    print("\nTile IR on the GPU: runs, failures and the worst error per case")
    for key, (n, bad, err) in worst.items():
        print(f"  {' '.join(map(str, key)):<34} {n:>4} runs {bad:>3} failed  worst {err:.2e}")
    for row, r in zip(rows, GPU_RESULTS):
        if not r[5] or r[0] == "matmul-speed":
            print("  " + row)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "tileir_gpu_results.txt"), "w") as f:
            f.write("\n".join(rows) + "\n")


@pytest.mark.parametrize("t, div, exp", [("f32", "full", "approx"), ("f64", "nearest_even", "full")])
def test_f32_div_and_exp_are_the_native_paths_fast_forms(t, div, exp):
    """docs/numerics.md: f32 `/` is div.full (within 2 ulp) and f32 exp the fast approximation on both GPU paths, as
    in hand-written Triton; f64 (and f16/bf16, computed in f32 by tileiras from their own ops) stay IEEE / full."""
    src = f"""kernel k(x: tensor<{t}>[N], y: tensor<{t}>[N]) {{
    let v = load(x, tile=[64], at=[program_id(0)])
    store(y, exp(v) / (v + 1.0), at=[program_id(0)])
}}"""
    m = lower(src, "k")
    assert [str(op.attributes["rounding_mode"]).strip('"') for op in ops(m, "divf")] == [div]
    assert [str(op.attributes["rounding_mode"]).strip('"') for op in ops(m, "exp")] == [exp]


# ---- a loaded tile broadcast in a loop ------------------------------------------------------------------------------

GEMV = open(os.path.join(ROOT, "tests", "filecheck", "tileir", "gemv.tle"), encoding="utf-8").read()

GEMV_WRITES_X = """
kernel gemv<BN: int = 16, BK: int = 256>(w: tensor<f32>[N, K], x: tensor<f32>[K], y: tensor<f32>[N]) {
    var acc = zeros<f32>[BN, BK]
    for k in range(cdiv(K, BK)) {
        let xs = load(x, tile=[BK], at=k)
        store(x, xs * 2.0, at=k)
        acc += load(w, tile=[BN, BK], at=[program_id(0), k]) * reshape(xs, [1, BK])
    }
    store(y, sum(acc, axis=1), at=program_id(0))
}
"""


def _broadcasts_of_loaded_rows(module) -> list:
    """Broadcasts of a loaded tile reshaped to [1, 256] (not of index tiles)."""
    def loaded(v):
        owner = v.owner
        return owner.name == "cuda_tile.reshape" and owner.operands[0].owner.name == "cuda_tile.load_ptr_tko"
    return [op for op in ops(module, "broadcast") if loaded(op.operands[0])]


def test_a_tile_loaded_in_a_loop_is_read_again_at_its_broadcast_shape():
    """broadcast_load: x's [256] tile, broadcast over w's 16 rows, is loaded as [16, 256] (rows of the same
    addresses, under the same bounds check on K) instead of broadcast."""
    module = lower(GEMV, "gemv")
    assert not _broadcasts_of_loaded_rows(module)
    loads = [tuple(ct.tile_of(op.results[0]).shape) for op in ops(module, "load_ptr_tko")]
    assert loads == [(16, 256), (256,), (16, 256)]  # w, x as written (left to tileiras to drop), x again


def test_a_tile_of_a_tensor_the_kernel_writes_is_broadcast_as_loaded():
    """Read again later, x could have changed in between (here the store right after the load), so the rule
    leaves a tensor the kernel writes alone."""
    module = lower(GEMV_WRITES_X, "gemv")
    assert len(_broadcasts_of_loaded_rows(module)) == 1


@needs_tileiras
def test_a_gemv_exchanges_nothing_through_shared_memory():
    """Broadcast, x went through shared memory with a barrier every iteration (1024 bytes of it); read at the
    broadcast shape, only the final row sums exchange anything (64 bytes; benchmarks/RESULTS.md, "GroupNorm, a
    KV-cache write and a GEMV": 60.4 -> 42.8 us)."""
    kernel, spec, module = build(GEMV, "gemv", spec=Spec(
        frozenset({"w", "x", "y", "N", "K", "w.stride0"}), frozenset({"w.stride1", "x.stride0", "y.stride0"})))
    binary = tileir.compile_tileir(tle_to_tileir(module))
    assert binary.extra["static_shared_mem"] <= 64 and binary.extra["stack_bytes"] == 0


WINDOWS = """
kernel windows<B: int = 16>(x: tensor<f16>[M, K], w: tensor<f16>[K, 16], y: tensor<f32>[M, 16], n: i32) {
    var acc = zeros<f32>[B, 16]
    let rows = slice(x, start=[program_id(0) * B, 0], shape=[n, K])
    for i in range(4) {
        let first = slice(x, start=[program_id(0) * B, 0], shape=[i, K])
        acc = dot(load(first, tile=[B, 16]), load(w, tile=[16, 16]), acc + cast<f32>(load(rows, tile=[B, 16])))
    }
    store(y, acc, at=[program_id(0), 0])
}
"""


def test_an_empty_window_keeps_a_tensor_map_of_size_one():
    """A tensor map cannot have a size of 0: each window's runtime size is at least 1 in its tensor view (maxi),
    and its view accesses take tile index 1 where the size is 0. Guarded: a scalar parameter (n) and a loop's
    variable (i), both 0 at times; not guarded: K, the tensor's own dim, which its whole view has as well."""
    module = lower(WINDOWS, "windows", options=VIEW_LOADS)
    assert len([op for op in ops(module, "cmpi") if "\"equal\"" in str(op)]) == 2  # n and i; not K
    assert len(ops(module, "maxi")) == 2
    assert len(ops(module, "make_tensor_view")) == 5  # x, w, y, and the two windows
    assert len(ops(module, "select")) == 2  # the row index of each window's one load; w's load has none


def test_a_refusal_gives_a_reason_once_and_the_other_places_it_holds():
    """Three erf of f64 gave the same paragraph three times as notes (a porter's FFT: a gather per stage)."""
    from tle.compiler import route
    src = ERF64.replace("erf(load(x, tile=[64], at=[i]))",
                        "erf(load(x, tile=[64], at=[i])) + erf(load(y, tile=[64], at=[i])) +\n"
                        "        erf(load(x, tile=[64], at=[i]) * 2.0)")
    module = build(src, "k", file="k.tle")[2]
    with pytest.raises(TleError) as err:
        route(module, "k", "sm_90", "tileir")
    notes = [n.message if hasattr(n, "message") else str(n) for n in err.value.notes]
    assert (err.value.span.line, err.value.span.col) == (3, 14) and "erf of f64" in err.value.message
    assert sum("erf of f64" in n for n in notes) == 0, notes
    assert notes[0] == "the same at 3:48, 4:9", notes


def test_a_refusal_in_a_split_loop_names_no_place_twice():
    """A loop split in two (its ragged last tile alone checked) holds each op twice: the refusal named its own
    place again as 'the same at 5:16' (a porter's report)."""
    from tle.abi import launch_spec
    from tle.compiler import compile_kernel
    src = """kernel g<BV: int = 128>(x: tensor<f32>[N], y: tensor<f32>[16]) {
    var acc = zeros<f32>[16]
    for c in range(cdiv(N, BV)) {
        let t = reshape(load(x, tile=[BV], at=c), [8, 16])
        acc += gather(max(t, axis=0), 15 - arange(0, 16))
    }
    store(y, acc)
}"""
    program = load_program(src, "g.tle")
    spec = launch_spec(check_kernel(program, "g", {}), {"N": 1000}, (1, 1, 1))
    with pytest.raises(TleError) as err:
        compile_kernel(program, "g", {}, spec, backend="tileir", stop="tileir")
    notes = [n.message if hasattr(n, "message") else str(n) for n in err.value.notes]
    assert (err.value.span.line, err.value.span.col) == (5, 16) and not any("the same at" in n for n in notes), notes


# ---- log1p, expm1, asin, acos: composed of Tile IR's ops -------------------------------------------------------------
_ELEMENTWISE_F32 = {
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide, "log": np.log, "exp": np.exp,
    "sqrt": np.sqrt, "atan2": np.arctan2,
}
_CMPF_NP = {"equal": np.equal, "less_than": np.less, "greater_than": np.greater}


def _run_elementwise(module, x: np.ndarray) -> np.ndarray:
    """The lowered kernel's ops from its load to its store, run on x with numpy, each computed in f64 and rounded
    to x's type (numpy's own f32 log is up to 3 ulp off): what the GPU computes with correctly rounded parts."""
    values, loaded = {}, False
    for op in walk(module):
        name = op.name.removeprefix("cuda_tile.")
        if name == "load_ptr_tko":
            values[op.results[0]], loaded = x, True
        elif not loaded:
            continue
        elif name == "constant":
            v = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
            values[op.results[0]] = x.dtype.type(ir.FloatAttr(v).value)
        elif name in _ELEMENTWISE_F32:
            with np.errstate(all="ignore"):
                wide = _ELEMENTWISE_F32[name](*(np.float64(values[v]) for v in op.operands))
                values[op.results[0]] = np.asarray(wide).astype(x.dtype)
        elif name == "cmpf":  # (ordered: false where an operand is NaN, as numpy's)
            compare = _CMPF_NP[ir.StringAttr(op.attributes["comparison_predicate"]).value]
            values[op.results[0]] = compare(*(values[v] for v in op.operands))
        elif name == "select":
            c, a, b = (values[v] for v in op.operands)
            values[op.results[0]] = np.where(c, a, b).astype(x.dtype)
        elif name == "store_view_tko":
            return values[op.operands[0]]
    raise AssertionError("no store")


ARC_AND_LOG = """
kernel f(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, FN(load(x, tile=[64], at=program_id(0))), at=program_id(0))
}
"""


@pytest.mark.parametrize("fn,exact,inputs", [
    ("log1p", math.log1p, [np.logspace(-30, 30, 4001), -np.logspace(-30, -1e-7, 4001), np.linspace(-0.999, 3, 4001)]),
    ("expm1", math.expm1, [np.logspace(-30, 1.9, 4001), -np.logspace(-30, 2, 4001), np.linspace(-3, 3, 4001)]),
    ("asin", math.asin, [np.linspace(-1, 1, 8001), 1 - np.logspace(-7, -1, 2001), np.logspace(-30, -1, 2001)]),
    ("acos", math.acos, [np.linspace(-1, 1, 8001), 1 - np.logspace(-7, -1, 2001), -1 + np.logspace(-7, -1, 2001)]),
])
def test_math_functions_tile_ir_lacks_are_composed_within_2_ulp(fn, exact, inputs):
    """Run on numpy, the ops the lowering emits are within 2 ulp of the exact function where their parts are
    correctly rounded, near 0 (log1p, expm1) and near +-1 (asin, acos) too, where the plain forms lose every digit;
    and they give the native path's special values."""
    module = lower(ARC_AND_LOG.replace("FN", fn), "f")
    assert not ops(module, fn) and ops(module, "select" if fn in ("log1p", "expm1") else "atan2")
    x = np.concatenate(inputs).astype(np.float32)
    got = _run_elementwise(module, x)
    worst = 0.0
    for g, v in zip(got.tolist(), x.tolist()):
        want = exact(v)
        if math.isinf(want) or abs(want) > 3e38:
            continue
        ulp = float(np.spacing(np.float32(abs(want)))) or 1e-45
        worst = max(worst, abs(g - want) / ulp)
    assert worst <= 2.0, worst
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 100.0, -100.0], np.float32)
    with np.errstate(all="ignore"):
        want = {"log1p": np.log1p, "expm1": np.expm1, "asin": np.arcsin, "acos": np.arccos}[fn](special)
    got = _run_elementwise(module, special)
    assert np.array_equal(got, want, equal_nan=True) or np.allclose(got, want, rtol=1e-6, equal_nan=True), (got, want)
    assert np.array_equal(np.signbit(got[:2]), np.signbit(want[:2]))  # log1p(-0.0) is -0.0, acos(+-0) pi/2


def test_an_operand_computed_from_a_gather_is_named_with_the_gather():
    """A weight dequantised by per-group scales that a gather reads at every element of the tile (a porter's int4
    GEMM): the operand is a load times a gathered tile, and the reason names the gather, not only the dot."""
    from tle.compiler import compile_kernel, route
    src = """kernel w4<BM: int = 64, BN: int = 128, BK: int = 64, GS: int = 128>(x: tensor<f16>[M, K],
        qw: tensor<i8>[K, N], scales: tensor<f16>[KG, N], y: tensor<f16>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    let cols = expand_dims(program_id(1) * BN + arange(0, BN), 0)
    for kk in range(cdiv(K, BK)) {
        let grp = expand_dims((kk * BK + arange(0, BK)) / GS, 1)
        let s = gather(scales, [grp, cols], mask=(grp < KG) and (cols < N))
        let w = cast<f16>(load(qw, tile=[BK, BN], at=[kk, program_id(1)])) * s
        acc = dot(load(x, tile=[BM, BK], at=[program_id(0), kk]), w, acc)
    }
    store(y, cast<f16>(acc), at=[program_id(0), program_id(1)])
}"""
    auto = compile_kernel(load_program(src, "w4.tle"), "w4", {}, backend="auto", stop="tle")
    backend, why = route(auto.module, "w4", "sm_90", "auto")
    assert backend == "triton", why
    assert "a dot operand is computed from a tile gathered through pointers (the gather at w4.tle:7:17)" in why
    assert why.endswith("at w4.tle:9:15")
