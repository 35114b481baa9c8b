"""Whole kernels on the interpreter against references computed independently (torch in f64, numpy, or plain
Python), on ragged shapes (no multiple of the tile) and non-contiguous inputs, under both the default spec
(last strides folded to 1) and the generic one (every stride an argument)."""
import math

import numpy as np
import pytest
import torch

from interp_harness import SPECS, cdiv, noncontiguous, run, transposed
from tle.diagnostics import TlePaddingWarning

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def close(got, want, rtol, atol):
    got, want = got.double(), want.double()
    err = ((got - want).abs() - rtol * want.abs()).max().item()
    assert err <= atol, f"max excess error {err} (rtol {rtol}, atol {atol})"


VECTOR_ADD = """
kernel vector_add<BLOCK: int = 128, T: dtype = f32>(x: tensor<T>[N], y: tensor<T>[N], out: tensor<T>[N]) {
    let i = program_id(0)
    store(out, load(x, tile=[BLOCK], at=[i]) + load(y, tile=[BLOCK], at=[i]), at=[i])
}
"""


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("n", [1, 127, 1000])
def test_vector_add(dtype, spec, n):
    torch.manual_seed(n)
    x, y = torch.randn(n).to(DT[dtype]), torch.randn(n).to(DT[dtype])
    if spec == "generic":
        x = noncontiguous(x)
    out = torch.full((n,), 7.0, dtype=DT[dtype])
    run(VECTOR_ADD, "vector_add", (cdiv(n, 128), 1, 1), {"x": x, "y": y, "out": out}, consts={"T": dtype},
        spec=spec)
    # One f16/bf16 add computed in f32 and rounded once is the correctly rounded sum.
    assert torch.equal(out, (x.double() + y.double()).to(DT[dtype]))


def test_vector_add_writes_into_a_slice_only():
    base = torch.zeros(300)
    out = base[100:250]
    x = torch.arange(150.0)
    run(VECTOR_ADD, "vector_add", (2, 1, 1), {"x": x, "y": x, "out": out})
    assert torch.equal(base[100:250], 2 * x) and not base[:100].any() and not base[250:].any()


SOFTMAX = """
kernel softmax<BLOCK: int = 128, T: dtype = f32>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    let row = program_id(0)
    let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, 0], pad=-inf))
    let e = exp(t - max(t, axis=1, keepdims=true))
    store(y, cast<T>(e / sum(e, axis=1, keepdims=true)), at=[row, 0])
}
"""


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed"])
def test_softmax(dtype, layout):
    torch.manual_seed(0)
    m, n = 37, 100
    x = (torch.randn(m, n) * 3).to(DT[dtype])
    spec = "default"
    if layout == "sliced":
        x = torch.randn(m, n + 20).to(DT[dtype])[:, 7:7 + n]  # row stride 120, last stride 1
    elif layout == "transposed":
        x, spec = transposed(x), "generic"
    y = torch.zeros(m, n, dtype=DT[dtype])
    run(SOFTMAX, "softmax", (m, 1, 1), {"x": x, "y": y}, consts={"T": dtype}, spec=spec)
    want = torch.softmax(x.double(), dim=1)
    tol = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype]
    close(y, want, tol, 1e-6)


LAYERNORM = """
kernel layernorm<BLOCK: int = 64>(x: tensor<f32>[M, N], w: tensor<f32>[N], b: tensor<f32>[N],
                                  y: tensor<f32>[M, N], eps: f32) {
    let row = program_id(0)
    let t = load(x, tile=[1, BLOCK], at=[row, 0])
    let mean = sum(t, axis=1, keepdims=true) / N
    let inside = reshape(arange(0, BLOCK), [1, BLOCK]) < N
    let d = where(inside, t - mean, 0.0)
    let rstd = rsqrt(sum(d * d, axis=1, keepdims=true) / N + eps)
    let wt = reshape(load(w, tile=[BLOCK]), [1, BLOCK])
    let bt = reshape(load(b, tile=[BLOCK]), [1, BLOCK])
    store(y, d * rstd * wt + bt, at=[row, 0])
}
"""

RMSNORM = """
kernel rmsnorm<BLOCK: int = 64>(x: tensor<f32>[M, N], w: tensor<f32>[N], y: tensor<f32>[M, N], eps: f32) {
    let row = program_id(0)
    let t = load(x, tile=[1, BLOCK], at=[row, 0])
    let rstd = rsqrt(sum(t * t, axis=1, keepdims=true) / N + eps)
    store(y, t * rstd * reshape(load(w, tile=[BLOCK]), [1, BLOCK]), at=[row, 0])
}
"""


@pytest.mark.parametrize("spec", SPECS)
def test_layernorm(spec):
    torch.manual_seed(1)
    m, n, eps = 9, 50, 1e-5
    x, w, b = torch.randn(m, n) + 2, torch.randn(n), torch.randn(n)
    if spec == "generic":
        x = transposed(x)
    y = torch.zeros(m, n)
    run(LAYERNORM, "layernorm", (m, 1, 1), {"x": x, "w": w, "b": b, "y": y}, {"eps": eps}, spec=spec)
    want = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
    close(y, want, 1e-5, 1e-5)


@pytest.mark.parametrize("spec", SPECS)
def test_rmsnorm(spec):
    torch.manual_seed(2)
    m, n, eps = 11, 33, 1e-6
    x, w = torch.randn(m, n), torch.randn(n)
    y = torch.zeros(m, n)
    run(RMSNORM, "rmsnorm", (m, 1, 1), {"x": x, "w": w, "y": y}, {"eps": eps}, spec=spec)
    xd = x.double()
    want = xd * torch.rsqrt((xd * xd).mean(1, keepdim=True) + eps) * w.double()
    close(y, want, 1e-5, 1e-6)


MATMUL = """
kernel matmul<BM: int = 32, BN: int = 32, BK: int = 16, T: dtype = f16>(
        a: tensor<T>[M, K], b: tensor<T>[K, N], c: tensor<f32>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(a, tile=[BM, BK], at=[pm, k]), load(b, tile=[BK, BN], at=[k, pn]), acc)
    }
    store(c, acc, at=[pm, pn])
}
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("spec", SPECS)
def test_matmul_f32_accumulation(dtype, spec):
    torch.manual_seed(3)
    m, n, k = 70, 45, 83
    a, b = torch.randn(m, k).to(DT[dtype]), torch.randn(k, n).to(DT[dtype])
    if spec == "generic":
        b = transposed(b)
    c = torch.full((m, n), float("nan"))
    run(MATMUL, "matmul", (cdiv(m, 32), cdiv(n, 32), 1), {"a": a, "b": b, "c": c}, consts={"T": dtype}, spec=spec)
    # Products of f16/bf16 are exact in f32; only the f32 sums round.
    want = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    assert ((c.double() - want).abs() <= k * 2 ** -24 * scale).all()


def test_matmul_f16_output_and_f16_accumulator():
    src = """
    kernel mm16(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f16>[M, N]) {
        var acc = zeros<f16>[16, 16]
        for k in range(cdiv(K, 16)) {
            acc = dot(load(a, tile=[16, 16], at=[0, k]), load(b, tile=[16, 16], at=[k, 0]), acc)
        }
        store(c, acc, at=[0, 0])
    }
    """
    torch.manual_seed(4)
    a, b = torch.randn(16, 40).half(), torch.randn(40, 16).half()
    c = torch.zeros(16, 16).half()
    run(src, "mm16", (1, 1, 1), {"a": a, "b": b, "c": c})
    # The f16 accumulator is rounded once per dot (per loop iteration): replay that in f64.
    acc = torch.zeros(16, 16).half()
    for k in range(0, 40, 16):
        kk = slice(k, min(k + 16, 40))
        acc = (acc.double() + a[:, kk].double() @ b[kk, :].double()).half()
    close(c, acc, 1e-3, 1e-3)


def test_dot_tf32_rounds_operands():
    src = """
    kernel mm(a: tensor<f32>[16, 16], b: tensor<f32>[16, 16], c: tensor<f32>[16, 16], d: tensor<f32>[16, 16]) {
        let x = load(a, tile=[16, 16])
        let y = load(b, tile=[16, 16])
        store(c, dot(x, y, tf32=true))
        store(d, dot(x, y))
    }
    """
    torch.manual_seed(5)
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    c, d = torch.zeros(16, 16), torch.zeros(16, 16)
    run(src, "mm", (1, 1, 1), {"a": a, "b": b, "c": c, "d": d})
    close(d, a.double() @ b.double(), 1e-6, 1e-5)

    def tf32(x):  # round to nearest even, keeping 10 mantissa bits, in numpy
        bits = x.numpy().view(np.uint32).astype(np.uint64)
        bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
        return torch.from_numpy(bits.astype(np.uint32).view(np.float32))
    close(c, tf32(a).double() @ tf32(b).double(), 1e-6, 1e-5)
    assert not torch.allclose(c, d, rtol=0, atol=1e-5)  # the rounding is visible


SWIGLU_GELU = """
fn silu(x) { return x * sigmoid(x) }
fn gelu(x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)) }
kernel act<BM: int = 16, BN: int = 32>(gate: tensor<f32>[M, N], up: tensor<f32>[M, N], out: tensor<f32>[M, N],
                                      g: tensor<f32>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    let x = load(gate, tile=[BM, BN], at=[pm, pn])
    store(out, silu(x) * load(up, tile=[BM, BN], at=[pm, pn]), at=[pm, pn])
    store(g, gelu(x), at=[pm, pn])
}
"""


@pytest.mark.parametrize("spec", SPECS)
def test_swiglu_and_gelu(spec):
    torch.manual_seed(6)
    m, n = 40, 70
    gate, up = torch.randn(m, n) * 4, torch.randn(m, n)
    if spec == "generic":
        gate = transposed(gate)
    out, g = torch.zeros(m, n), torch.zeros(m, n)
    run(SWIGLU_GELU, "act", (cdiv(m, 16), cdiv(n, 32), 1), {"gate": gate, "up": up, "out": out, "g": g}, spec=spec)
    gd = gate.double()
    close(out, torch.nn.functional.silu(gd) * up.double(), 1e-5, 1e-6)
    close(g, torch.nn.functional.gelu(gd), 1e-5, 1e-6)


CUMSUM = """
kernel cumsum<BLOCK: int = 64, T: dtype = f32, U: dtype = f32>(x: tensor<T>[M, N], y: tensor<U>[M, N]) {
    let row = program_id(0)
    store(y, cast<U>(cumsum(load(x, tile=[1, BLOCK], at=[row, 0]), axis=1)), at=[row, 0])
}
"""


@pytest.mark.parametrize("t,u", [("f32", "f32"), ("f16", "f32"), ("bf16", "bf16"), ("i32", "i32"), ("i8", "i32")])
def test_cumsum(t, u):
    torch.manual_seed(7)
    m, n = 5, 50
    dt = {**DT, "i32": torch.int32, "i8": torch.int8}
    x = (torch.randn(m, n) * 10).to(dt[t]) if t in DT else torch.randint(-100, 100, (m, n)).to(dt[t])
    y = torch.zeros(m, n, dtype=dt[u])
    run(CUMSUM, "cumsum", (m, 1, 1), {"x": x, "y": y}, consts={"T": t, "U": u})
    if t in DT:  # f16/bf16 are summed in f32 (the checker casts), rounded once at the end
        close(y, torch.cumsum(x.double(), 1).to(dt[u]), {"f32": 1e-6, "bf16": 8e-3}[u], 1e-4)
    else:
        assert torch.equal(y, torch.cumsum(x.long(), 1).to(dt[u]))


def test_integer_cumsum_wraps():
    x = torch.tensor([[2 ** 31 - 1, 1, 5, -7]], dtype=torch.int32)
    y = torch.zeros(1, 4, dtype=torch.int32)
    run(CUMSUM, "cumsum", (1, 1, 1), {"x": x, "y": y}, consts={"T": "i32", "U": "i32"})
    assert y.tolist() == [[2 ** 31 - 1, -2 ** 31, -2 ** 31 + 5, -2 ** 31 - 2 + 2 ** 32]]


def test_integer_sums_wrap():
    src = """
    kernel s(x: tensor<i32>[4], y: tensor<i32>[1]) { store(y, full<i32>[1](sum(load(x, tile=[4])))) }
    """
    x = torch.tensor([2 ** 31 - 1, 1, 5, 0], dtype=torch.int32)
    y = torch.zeros(1, dtype=torch.int32)
    run(src, "s", (1, 1, 1), {"x": x, "y": y})
    assert y.item() == -2 ** 31 + 5


REDUCE = """
kernel red<BLOCK: int = 16>(x: tensor<f32>[M, N], s: tensor<f32>[M], mx: tensor<f32>[M], mn: tensor<f32>[M],
                            am: tensor<i32>[M], an: tensor<i32>[M]) {
    let row = program_id(0)
    let lo = load(x, tile=[1, BLOCK], at=[row, 0], pad=-inf)
    let hi = load(x, tile=[1, BLOCK], at=[row, 0], pad=inf)
    store(s, sum(load(x, tile=[1, BLOCK], at=[row, 0]), axis=1), at=[row])
    store(mx, max(lo, axis=1), at=[row])
    store(mn, min(hi, axis=1), at=[row])
    store(am, argmax(lo, axis=1), at=[row])
    store(an, argmin(hi, axis=1), at=[row])
}
"""


def _first_extreme(row, pick):
    """The tle definition, in plain Python: the first index of the extreme; NaN counts as the extreme."""
    vals = [float(v) for v in row]
    nans = [i for i, v in enumerate(vals) if math.isnan(v)]
    if nans:
        return nans[0], float("nan")
    best = pick(vals)
    return vals.index(best), best


def test_reductions_with_ties_and_nan():
    nan = float("nan")
    x = torch.tensor([
        [1, 5, 5, -2, 5, -2, -2, 0, 0, 0, 0, 0, 0],       # ties for max and min: the first wins
        [3, nan, 7, nan, -9, 1, 1, 1, 1, 1, 1, 1, 1],       # NaN: max/min are NaN, arg* the first NaN
        [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1],
        [0.5, 2, -3, 4, 9, 9, -3, 1, 0, 0, 0, 0, 0],
    ], dtype=torch.float32)
    m = x.shape[0]
    s, mx, mn = torch.zeros(m), torch.zeros(m), torch.zeros(m)
    am, an = torch.full((m,), -5, dtype=torch.int32), torch.full((m,), -5, dtype=torch.int32)
    run(REDUCE, "red", (m, 1, 1), {"x": x, "s": s, "mx": mx, "mn": mn, "am": am, "an": an})
    for r in range(m):
        i_max, v_max = _first_extreme(x[r], max)
        i_min, v_min = _first_extreme(x[r], min)
        assert am[r].item() == i_max and an[r].item() == i_min, r
        for got, want in ((mx[r].item(), v_max), (mn[r].item(), v_min)):
            assert (math.isnan(got) and math.isnan(want)) or got == want, r
        want_sum = math.fsum(float(v) for v in x[r])
        assert (math.isnan(s[r].item()) and math.isnan(want_sum)) or abs(s[r].item() - want_sum) < 1e-5


def test_reduce_over_axis_0_and_whole_tile():
    src = """
    kernel red2(x: tensor<i32>[M, N], cols: tensor<i32>[8], total: tensor<i32>[1], am: tensor<i32>[8]) {
        let t = load(x, tile=[4, 8], pad=-1000)
        store(cols, max(t, axis=0))
        store(am, argmax(t, axis=0))
        store(total, full<i32>[1](sum(t)))
    }
    """
    x = torch.randint(-5, 5, (3, 6), dtype=torch.int32)
    cols, am, total = (torch.zeros(n, dtype=torch.int32) for n in (8, 8, 1))
    # (the whole tile's sum reduces it flattened: no axis named, where 'along axis 0' read as the columns')
    with pytest.warns(TlePaddingWarning, match=r"warning: sum takes in lanes past the edge of 'x'"):
        run(src, "red2", (1, 1, 1), {"x": x, "cols": cols, "total": total, "am": am})  # the sum counts the pads
    padded = torch.full((4, 8), -1000, dtype=torch.int32)
    padded[:3, :6] = x
    assert torch.equal(cols, padded.max(0).values)
    assert am.tolist() == [col.tolist().index(max(col.tolist())) for col in padded.t()]
    assert total.item() == padded.sum().item()


GATHER_SCATTER = """
kernel permute<BLOCK: int = 64>(x: tensor<f32>[N], idx: tensor<i32>[N], y: tensor<f32>[N], z: tensor<f32>[N]) {
    let i = program_id(0)
    let lanes = arange(0, BLOCK) + i * BLOCK
    let live = lanes < N
    let j = load(idx, tile=[BLOCK], at=[i])
    let v = gather(x, j, mask=live, other=-1.0)
    scatter(y, j, v * 2.0, mask=live)
    store(z, v, at=[i])
}
"""


@pytest.mark.parametrize("spec", SPECS)
def test_gather_and_scatter_a_permutation(spec):
    torch.manual_seed(8)
    n = 150
    x = torch.randn(n)
    if spec == "generic":
        x = noncontiguous(x)
    perm = torch.randperm(n).to(torch.int32)
    y, z = torch.zeros(n), torch.zeros(n)
    run(GATHER_SCATTER, "permute", (cdiv(n, 64), 1, 1), {"x": x, "idx": perm, "y": y, "z": z}, spec=spec)
    assert torch.equal(z, x[perm.long()])
    want = torch.zeros(n)
    want[perm.long()] = 2 * x[perm.long()]
    assert torch.equal(y, want)


def test_gather_2d_with_mask_and_other():
    src = """
    kernel g2(x: tensor<i32>[M, N], rows: tensor<i32>[16], cols: tensor<i32>[16], y: tensor<i32>[16]) {
        let r = load(rows, tile=[16])
        let c = load(cols, tile=[16])
        store(y, gather(x, [r, c], mask=c >= 0, other=-7))
    }
    """
    x = torch.arange(5 * 9, dtype=torch.int32).reshape(5, 9)
    rows = torch.randint(0, 5, (16,), dtype=torch.int32)
    cols = torch.randint(-3, 9, (16,), dtype=torch.int32)
    y = torch.zeros(16, dtype=torch.int32)
    run(src, "g2", (1, 1, 1), {"x": x, "rows": rows, "cols": cols, "y": y}, spec="generic")
    want = [x[r, c].item() if c >= 0 else -7 for r, c in zip(rows.tolist(), cols.tolist())]
    assert y.tolist() == want


HISTOGRAM = """
kernel hist<BLOCK: int = 32, T: dtype = i32>(bins: tensor<i32>[N], w: tensor<T>[N], h: tensor<T>[B],
                                             old: tensor<T>[N]) {
    let i = program_id(0)
    let live = arange(0, BLOCK) + i * BLOCK < N
    let b = load(bins, tile=[BLOCK], at=[i])
    store(old, atomic_add(h, b, load(w, tile=[BLOCK], at=[i]), mask=live), at=[i])
}
"""


@pytest.mark.parametrize("dtype", ["i32", "f32"])
def test_atomic_add_histogram_with_duplicates(dtype):
    torch.manual_seed(9)
    n, nbins = 200, 7
    bins = torch.randint(0, nbins, (n,), dtype=torch.int32)
    w = torch.randint(1, 5, (n,), dtype=torch.int32) if dtype == "i32" else torch.rand(n)
    h = torch.zeros(nbins, dtype=w.dtype)
    h[3] = 100
    old = torch.zeros(n, dtype=w.dtype)
    run(HISTOGRAM, "hist", (cdiv(n, 32), 1, 1), {"bins": bins, "w": w, "h": h, "old": old}, consts={"T": dtype})
    # Lanes apply in order: program by program, and in tile order within a program.
    want_h = torch.zeros(nbins, dtype=torch.float64)
    want_h[3] = 100
    want_old = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        want_old[i] = want_h[bins[i]]
        want_h[bins[i]] += float(w[i])
    close(h, want_h, 1e-6, 0)
    close(old, want_old, 1e-6, 0)


def test_atomic_max_min_and_masked_lanes():
    src = """
    kernel amax(v: tensor<i32>[N], idx: tensor<i32>[N], hi: tensor<i32>[4], lo: tensor<i32>[4], old: tensor<i32>[N]) {
        let i = program_id(0)
        let live = arange(0, 16) + i * 16 < N
        let j = load(idx, tile=[16], at=[i])
        let x = load(v, tile=[16], at=[i])
        store(old, atomic_max(hi, j, x, mask=live), at=[i])
        atomic_min(lo, j, x, mask=live)
    }
    """
    torch.manual_seed(10)
    n = 40
    v = torch.randint(-50, 50, (n,), dtype=torch.int32)
    idx = torch.randint(0, 4, (n,), dtype=torch.int32)
    hi, lo = torch.full((4,), -100, dtype=torch.int32), torch.full((4,), 100, dtype=torch.int32)
    old = torch.zeros(n, dtype=torch.int32)
    run(src, "amax", (cdiv(n, 16), 1, 1), {"v": v, "idx": idx, "hi": hi, "lo": lo, "old": old})
    want_hi, want_lo, want_old = [-100] * 4, [100] * 4, []
    for x, j in zip(v.tolist(), idx.tolist()):
        want_old.append(want_hi[j])
        want_hi[j], want_lo[j] = max(want_hi[j], x), min(want_lo[j], x)
    assert hi.tolist() == want_hi and lo.tolist() == want_lo and old.tolist() == want_old


def test_atomic_by_every_program_on_one_counter():
    # Operands the same in every program: still one atomic per program (lockstep batching must not merge them).
    src = """
    kernel count(c: tensor<i32>[1], seen: tensor<i32>[N]) {
        let i = program_id(0)
        store(seen, atomic_add(c, zeros<i32>[1], ones<i32>[1]), at=[i])
    }
    """
    c, seen = torch.zeros(1, dtype=torch.int32), torch.zeros(10, dtype=torch.int32)
    compiled = run(src, "count", (10, 1, 1), {"c": c, "seen": seen})
    assert compiled.batched
    assert c.item() == 10 and sorted(seen.tolist()) == list(range(10))


def test_an_atomic_of_scalars_returns_a_scalar():
    # Scalar indices and value: one element, and its old value is a scalar (Triton's atomic on one pointer), so an
    # `if` can test it; the last program to arrive sees n - 1 and writes the flag.
    src = """
    kernel claim(c: tensor<i32>[2], slot: tensor<i32>[N], last: tensor<i32>[N]) {
        let i = program_id(0)
        let s = atomic_add(c, 0, 1)
        store(slot, s, at=i)
        if atomic_max(c, 1, i) < i and s == num_programs(0) - 1 {
            store(last, 1, at=i)
        }
    }
    """
    c = torch.zeros(2, dtype=torch.int32)
    slot, last = torch.full((10,), -1, dtype=torch.int32), torch.zeros(10, dtype=torch.int32)
    run(src, "claim", (10, 1, 1), {"c": c, "slot": slot, "last": last})
    assert c.tolist() == [10, 9] and sorted(slot.tolist()) == list(range(10))
    # last is set where the program was the 10th to count and saw a smaller max before its own
    assert last.sum().item() <= 1 and all(slot[j] == 9 for j in range(10) if last[j])


def test_a_gather_of_scalars_returns_a_scalar_and_a_scalar_reshapes_to_ones():
    # gather(x, i, mask=..., other=...) with scalars is a bounds-checked read of one element: a scalar, as from a load
    # without tile=; reshape makes a scalar the one element of a tile of ones
    src = """
    kernel k<B: int = 4>(x: tensor<f32>[N], y: tensor<f32>[M, B]) {
        let i = program_id(0)
        let v = gather(x, 2 * i, mask=2 * i < N, other=-1.0)
        store(y, reshape(v, [1, 1]) + reshape(cast<f32>(arange(0, B)), [1, B]), at=[i, 0])
    }
    """
    x, y = torch.randn(5), torch.zeros(4, 4)
    run(src, "k", (4, 1, 1), {"x": x, "y": y})
    want = torch.tensor([x[0], x[2], x[4], -1.0])[:, None] + torch.arange(4.0)[None, :]
    assert torch.equal(y, want)


BITWISE = """
kernel bitwise<K: int = 0>(v: tensor<i64>[N], idx: tensor<i32>[N], acc: tensor<i64>[4], old: tensor<i64>[N]) {
    let i = program_id(0)
    let live = arange(0, 16) + i * 16 < N
    let j = load(idx, tile=[16], at=[i])
    let x = load(v, tile=[16], at=[i])
    if K == 0 { store(old, atomic_or(acc, j, x, mask=live), at=[i]) }
    if K == 1 { store(old, atomic_and(acc, j, x, mask=live), at=[i]) }
    if K == 2 { store(old, atomic_xor(acc, j, x, mask=live), at=[i]) }
    if K == 3 { store(old, atomic_xchg(acc, j, x, mask=live), at=[i]) }
}
"""


@pytest.mark.parametrize("kind", ["or", "and", "xor", "xchg"])
def test_bitwise_atomics_and_exchange_lane_by_lane(kind):
    """Lanes sharing an element apply in order and each sees what the earlier ones left (an exchange sees the
    previous lane's value); masked-off lanes return 0 and change nothing."""
    torch.manual_seed(11)
    n = 45
    v = torch.randint(-2 ** 62, 2 ** 62, (n,), dtype=torch.int64)
    idx = torch.randint(0, 4, (n,), dtype=torch.int32)
    acc = torch.randint(-2 ** 62, 2 ** 62, (4,), dtype=torch.int64)
    start, old = acc.clone(), torch.full((n,), 7, dtype=torch.int64)
    run(BITWISE, "bitwise", (cdiv(n, 16), 1, 1), {"v": v, "idx": idx, "acc": acc, "old": old}, consts={"K": ["or", "and", "xor", "xchg"].index(kind)})
    op = {"or": lambda a, b: a | b, "and": lambda a, b: a & b, "xor": lambda a, b: a ^ b, "xchg": lambda a, b: b}
    want, want_old = start.tolist(), []
    for x, j in zip(v.tolist(), idx.tolist()):
        want_old.append(want[j])
        want[j] = op[kind](want[j], x)
    assert acc.tolist() == want and old.tolist() == want_old


CLAIM = """
kernel claim(owner: tensor<i32>[S], slot: tensor<i32>[P], got: tensor<i32>[P]) {
    let p = program_id(0)
    let s = load(slot, tile=[1], at=p)
    let was = atomic_cas(owner, s, -1, full<i32>[1](p))
    store(got, was, at=p)
}
"""


def test_atomic_cas_one_winner_per_slot():
    """Every program tries to take a slot that is free (-1): the first to arrive wins it, the others see its id."""
    torch.manual_seed(12)
    p, slots = 50, 6
    slot = torch.randint(0, slots, (p,), dtype=torch.int32)
    owner = torch.full((slots,), -1, dtype=torch.int32)
    owner[5] = 99  # taken before the launch: nobody gets it
    got = torch.zeros(p, dtype=torch.int32)
    run(CLAIM, "claim", (p, 1, 1), {"owner": owner, "slot": slot, "got": got})
    for s in range(slots):
        takers = (slot == s).nonzero().flatten().tolist()
        if s == 5:
            assert owner[s] == 99 and all(got[t] == 99 for t in takers)
        elif takers:
            winner = owner[s].item()
            assert winner in takers and got[winner] == -1  # it saw the slot free
            assert all(got[t] == winner for t in takers if t != winner)
        else:
            assert owner[s] == -1


def test_atomic_cas_in_a_tile_on_one_element():
    """Lanes of one tile on one element go in tile order: lane k compares with what lanes 0..k-1 left."""
    src = """
    kernel chain(x: tensor<i32>[1], out: tensor<i32>[8]) {
        let k = arange(8)
        store(out, atomic_cas(x, k * 0, k, k + 1), at=0)
    }
    """
    x, out = torch.zeros(1, dtype=torch.int32), torch.full((8,), -5, dtype=torch.int32)
    run(src, "chain", (1, 1, 1), {"x": x, "out": out})
    assert out.tolist() == list(range(8)) and x.item() == 8  # every compare matched the previous lane's write


BRANCHY = """
kernel branchy(x: tensor<f32>[N], y: tensor<f32>[N], flag: i32) {
    let i = program_id(0)
    let t = load(x, tile=[16], at=[i])
    var r = t
    if i % 2 == 0 { r = t * 2.0 } else if i == 3 { r = -t } else { r = t + 100.0 }
    if flag > 0 { r = r + 1000.0 }
    store(y, r, at=[i])
}
"""


@pytest.mark.parametrize("flag", [0, 1])
def test_if_else_on_program_id(flag):
    n = 100
    x, y = torch.randn(n), torch.zeros(n)
    compiled = run(BRANCHY, "branchy", (cdiv(n, 16), 1, 1), {"x": x, "y": y}, {"flag": flag})
    assert not compiled.batched  # the condition differs between programs
    want = x.clone()
    for i in range(cdiv(n, 16)):
        s = slice(16 * i, 16 * (i + 1))
        want[s] = x[s] * 2 if i % 2 == 0 else -x[s] if i == 3 else x[s] + 100
    assert torch.equal(y, want + 1000 * flag)


LOOP = """
kernel rowsum<BLOCK: int = 16>(x: tensor<f32>[M, N], y: tensor<f32>[M], n: tensor<i32>[M]) {
    let row = program_id(0)
    var acc = zeros<f32>[1, BLOCK]
    var count = 0
    var last = -1
    for k in range(0, cdiv(N, BLOCK)) {
        acc += load(x, tile=[1, BLOCK], at=[row, k])
        count += 1
        last = k
    }
    for k in range(5, 2) { count = 1000 }
    store(y, sum(acc, axis=1), at=[row])
    store(n, full<i32>[1](count * 100 + last), at=[row])
}
"""


@pytest.mark.parametrize("spec", SPECS)
def test_loop_with_carried_vars(spec):
    torch.manual_seed(11)
    m, nn = 6, 75
    x = torch.randn(m, nn)
    if spec == "generic":
        x = transposed(x)
    y, n = torch.zeros(m), torch.zeros(m, dtype=torch.int32)
    compiled = run(LOOP, "rowsum", (m, 1, 1), {"x": x, "y": y, "n": n}, spec=spec)
    assert compiled.batched
    close(y, x.double().sum(1), 1e-5, 1e-5)
    assert n.tolist() == [cdiv(nn, 16) * 100 + cdiv(nn, 16) - 1] * m


def test_loop_bound_depends_on_program_id():
    src = """
    kernel tri(y: tensor<i32>[N]) {
        let i = program_id(0)
        var s = 0
        for k in range(i + 1) { s += k }
        store(y, full<i32>[1](s), at=[i])
    }
    """
    y = torch.zeros(20, dtype=torch.int32)
    compiled = run(src, "tri", (20, 1, 1), {"y": y})
    assert not compiled.batched
    assert y.tolist() == [i * (i + 1) // 2 for i in range(20)]


def test_three_dimensional_grid():
    src = """
    kernel ids(y: tensor<i32>[Z, Y, X]) {
        let x = program_id(0)
        let yy = program_id(1)
        let z = program_id(2)
        let v = x + 10 * yy + 100 * z + 1000 * (num_programs(0) + num_programs(1) * 10 + num_programs(2) * 100)
        store(y, full<i32>[1, 1, 1](v), at=[z, yy, x])
    }
    """
    y = torch.zeros(4, 3, 5, dtype=torch.int32)
    run(src, "ids", (5, 3, 4), {"y": y})
    z, yy, x = torch.meshgrid(torch.arange(4), torch.arange(3), torch.arange(5), indexing="ij")
    assert torch.equal(y, (x + 10 * yy + 100 * z + 1000 * 435).int())


CASTS = """
kernel casts<BLOCK: int = 64>(x: tensor<f32>[N], h: tensor<f16>[N], b: tensor<bf16>[N], hb: tensor<bf16>[N],
                              bh: tensor<f16>[N], i: tensor<i32>[N], w: tensor<i8>[N], back: tensor<f32>[N],
                              flag: tensor<i32>[N]) {
    let p = program_id(0)
    let t = load(x, tile=[BLOCK], at=[p])
    store(h, cast<f16>(t), at=[p])
    store(b, cast<bf16>(t), at=[p])
    store(hb, cast<bf16>(cast<f16>(t)), at=[p])
    store(bh, cast<f16>(cast<bf16>(t)), at=[p])
    let n = cast<i32>(t)
    store(i, n, at=[p])
    store(w, cast<i8>(n), at=[p])
    store(back, cast<f32>(n) + cast<f32>(cast<bool>(t)), at=[p])
    store(flag, cast<i32>(t > 0.0), at=[p])
}
"""


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 (round to nearest even) -> f32, in numpy, for finite x."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def test_casts():
    torch.manual_seed(12)
    n = 150
    x = torch.cat([torch.randn(n - 10) * 300, torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 70000.0, -1e-9,
                                                             127.9, -128.9])])
    out = {k: torch.zeros(n, dtype=d) for k, d in (("h", torch.float16), ("b", torch.bfloat16),
                                                  ("hb", torch.bfloat16), ("bh", torch.float16), ("i", torch.int32),
                                                  ("w", torch.int8), ("back", torch.float32), ("flag", torch.int32))}
    run(CASTS, "casts", (cdiv(n, 64), 1, 1), {"x": x, **out})
    xn = x.numpy()
    with np.errstate(over="ignore"):  # 70000 overflows f16 to inf, as it must
        assert np.array_equal(out["h"].float().numpy(), xn.astype(np.float16).astype(np.float32))
        assert np.array_equal(out["b"].float().numpy(), _bf16_rne(xn))
        assert np.array_equal(out["hb"].float().numpy(), _bf16_rne(xn.astype(np.float16).astype(np.float32)))
        assert np.array_equal(out["bh"].float().numpy(), _bf16_rne(xn).astype(np.float16).astype(np.float32))
    trunc = np.trunc(xn).astype(np.int64)
    assert out["i"].tolist() == trunc.tolist()
    assert out["w"].tolist() == [((v + 128) % 256) - 128 for v in trunc.tolist()]  # i32 -> i8 wraps
    assert out["back"].tolist() == [float(v) + (1.0 if f != 0 else 0.0) for v, f in zip(trunc.tolist(), xn)]
    assert out["flag"].tolist() == [int(v > 0) for v in xn]


IDIV = """
kernel idiv(a: tensor<i32>[N], b: tensor<i32>[N], q: tensor<i32>[N], r: tensor<i32>[N],
            s: tensor<i32>[N]) {
    let i = program_id(0)
    let x = load(a, tile=[64], at=[i])
    let y = load(b, tile=[64], at=[i], pad=1)
    store(q, x / y, at=[i])
    store(r, x % y, at=[i])
    store(s, (x >> 3) + (y << 2), at=[i])
}
"""


def test_integer_division_truncates_toward_zero():
    torch.manual_seed(13)
    n = 100
    a = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    b = torch.randint(1, 30, (n,), dtype=torch.int32) * (torch.randint(0, 2, (n,), dtype=torch.int32) * 2 - 1)
    a[:4] = torch.tensor([-7, 7, -7, -2 ** 31], dtype=torch.int32)
    b[:4] = torch.tensor([2, -2, -2, -1], dtype=torch.int32)
    q, r, s = (torch.zeros(n, dtype=torch.int32) for _ in range(3))
    run(IDIV, "idiv", (cdiv(n, 64), 1, 1), {"a": a, "b": b, "q": q, "r": r, "s": s})
    for x, y, qq, rr, ss in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist(), s.tolist()):
        want_q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
        want_q = (want_q + 2 ** 31) % 2 ** 32 - 2 ** 31  # INT_MIN / -1 wraps to INT_MIN
        assert (qq, rr) == (want_q, 0 if y == -1 else x - want_q * y), (x, y)
        assert ss == (x >> 3) + (y << 2)  # Python's >> on ints is arithmetic, like shrsi
    assert (q[:3].tolist(), r[:3].tolist()) == ([-3, -3, 3], [-1, 1, -1])
    # Without a -1 divisor in the tile (the interpreter special-cases INT_MIN / -1).
    q.zero_(), r.zero_()
    run(IDIV, "idiv", (1, 1, 1), {"a": a[:3], "b": b[:3], "q": q[:3], "r": r[:3], "s": s[:3]})
    assert (q[:3].tolist(), r[:3].tolist()) == ([-3, -3, 3], [-1, 1, -1])


def test_float_remainder_has_the_sign_of_the_dividend():
    src = """
    kernel frem(a: tensor<f32>[8], b: tensor<f32>[8], r: tensor<f32>[8]) {
        store(r, load(a, tile=[8]) % load(b, tile=[8]))
    }
    """
    a = torch.tensor([7.5, -7.5, 7.5, -7.5, 1.0, 0.0, 5.0, -0.0])
    b = torch.tensor([2.0, 2.0, -2.0, -2.0, 0.0, 3.0, float("inf"), 1.0])
    r = torch.zeros(8)
    run(src, "frem", (1, 1, 1), {"a": a, "b": b, "r": r})
    want = [math.fmod(x, y) if y != 0 else float("nan") for x, y in zip(a.tolist(), b.tolist())]
    assert all((math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
               for g, w in zip(r.tolist(), want))


def test_math_functions_in_f16_round_once():
    src = """
    kernel m(x: tensor<f16>[N], y: tensor<f16>[N], z: tensor<bf16>[N]) {
        let i = program_id(0)
        let t = load(x, tile=[64], at=[i])
        store(y, exp(t) + sqrt(abs(t)), at=[i])
        store(z, cast<bf16>(tanh(t)), at=[i])
    }
    """
    torch.manual_seed(14)
    n = 100
    x = (torch.randn(n) * 2).half()
    y, z = torch.zeros(n).half(), torch.zeros(n).bfloat16()
    run(src, "m", (2, 1, 1), {"x": x, "y": y, "z": z})
    f = x.float()
    e, s = torch.exp(f).half(), torch.sqrt(f.abs()).half()  # each op rounded to f16 ...
    assert torch.equal(y, (e.float() + s.float()).half())   # ... and the add rounded once more
    assert torch.equal(z, torch.tanh(f).half().float().bfloat16())


def test_bitcast_and_bool_logic():
    src = """
    kernel bc(x: tensor<f32>[8], bits: tensor<i32>[8], back: tensor<f32>[8], l: tensor<i32>[8]) {
        let t = load(x, tile=[8])
        let b = bitcast<i32>(t)
        store(bits, b)
        store(back, bitcast<f32>(b ^ (-1 << 31)))
        let pos = t > 0.0
        store(l, cast<i32>(pos and not (t > 2.0)) + 2 * cast<i32>(pos or t != t))
    }
    """
    x = torch.tensor([1.0, -2.0, 0.0, float("nan"), 3.0, -0.0, float("inf"), 1.5])
    bits, back, l = torch.zeros(8, dtype=torch.int32), torch.zeros(8), torch.zeros(8, dtype=torch.int32)
    run(src, "bc", (1, 1, 1), {"x": x, "bits": bits, "back": back, "l": l})
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(back.view(torch.int32), (-x).view(torch.int32))  # sign flipped, NaN included
    xs = x.tolist()
    assert l.tolist() == [int(v > 0 and not v > 2) + 2 * int(v > 0 or v != v) for v in xs]


def test_transpose_expand_dims_broadcast_reshape():
    src = """
    kernel shapes(x: tensor<f32>[4, 8], y: tensor<f32>[8, 4], z: tensor<f32>[4, 8], w: tensor<f32>[32]) {
        let t = load(x, tile=[4, 8])
        store(y, transpose(t))
        let col = expand_dims(sum(t, axis=1), 1)
        store(z, broadcast(col, [4, 8]) + t)
        store(w, reshape(t, [32]))
    }
    """
    x = torch.randn(4, 8)
    y, z, w = torch.zeros(8, 4), torch.zeros(4, 8), torch.zeros(32)
    run(src, "shapes", (1, 1, 1), {"x": x, "y": y, "z": z, "w": w})
    assert torch.equal(y, x.t()) and torch.equal(w, x.reshape(32))
    close(z, x.double().sum(1, keepdim=True) + x.double(), 1e-6, 1e-6)


def test_scalar_float_and_int_params_and_pid_arithmetic():
    src = """
    kernel axpy<BLOCK: int = 32>(x: tensor<f32>[N], y: tensor<f32>[N], a: f32, off: i32) {
        let i = program_id(0)
        store(y, a * load(x, tile=[BLOCK], at=[i]) + cast<f32>(off + i), at=[i])
    }
    """
    x, y = torch.randn(70), torch.zeros(70)
    run(src, "axpy", (3, 1, 1), {"x": x, "y": y}, {"a": 0.5, "off": -4})
    want = 0.5 * x + torch.tensor([float(-4 + i // 32) for i in range(70)])
    assert torch.equal(y, want)


def test_loads_and_stores_out_of_the_view_are_padded_and_dropped():
    src = """
    kernel edge(x: tensor<f32>[M, N], y: tensor<f32>[M, N], z: tensor<f32>[8, 8], u: tensor<f32>[8, 8]) {
        let t = load(x, tile=[8, 8], at=[1, 1], pad=-5.0)
        store(z, t)
        store(y, t + 1.0, at=[1, 1])
        store(u, load(x, tile=[8, 8], at=[-1, 0], pad=3.0))
        store(y, t, at=[-1, 0])
    }
    """
    x = torch.arange(10 * 12, dtype=torch.float32).reshape(10, 12)
    for spec in ("default", "generic"):
        y, z, u = torch.zeros(10, 12), torch.zeros(8, 8), torch.zeros(8, 8)
        run(src, "edge", (1, 1, 1), {"x": x, "y": y, "z": z, "u": u}, spec=spec)
        want = torch.full((8, 8), -5.0)
        want[:2, :4] = x[8:10, 8:12]
        assert torch.equal(z, want)
        want_y = torch.zeros(10, 12)
        want_y[8:10, 8:12] = x[8:10, 8:12] + 1
        assert torch.equal(y, want_y)
        assert torch.equal(u, torch.full((8, 8), 3.0))


def test_bitwise_compound_assignments_and_binary_literals():
    """murmur3's finaliser as hash code writes it: h ^= h >> 16 (arithmetic, as i32's >> is: masked to a logical
    shift), h *= a multiplier given by its bits, and masks in binary."""
    src = """
    kernel fmix(x: tensor<i32>[N]) {
        var h = load(x, tile=[16])
        h ^= (h >> 16) & 0xFFFF
        h *= cast<i32>(0x85ebca6b)
        h ^= (h >> 13) & 0x7FFFF
        h |= 0b1010
        h <<= 1
        h &= 0x7fffffff
        h >>= 0b10
        store(x, h)
    }
    """
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (16,), dtype=torch.int32)
    h = x.long() & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = ((h | 0b1010) << 1) & 0x7FFFFFFF
    h >>= 2
    run(src, "fmix", (1, 1, 1), {"x": x})
    assert torch.equal(x.long(), h)
