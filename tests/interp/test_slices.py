"""slice(): windows of a tensor, against references in plain torch indexing, on the interpreter and (marked gpu) on
both GPU paths. Each case fails if the window's start, its size (the bounds its accesses are checked against) or
its strides were wrong; the strided variants pass tensors that are not contiguous (every stride at run time)."""
import pytest
import torch

import tle
from interp_harness import cdiv, noncontiguous
from tle.diagnostics import TleError

PACKED = """
kernel scale_packed<BM: int = 8, D: int = 16>(x: tensor<f32>[T, D], cu: tensor<i32>[B1], y: tensor<f32>[T, D]) {
    let s = program_id(0)
    let first = load(cu, at=s)
    let n = load(cu, at=s + 1) - first
    let xs = slice(x, start=[first, 0], shape=[n, D])
    let t = load(xs, tile=[BM, D], at=[program_id(1), 0], pad=100.0)
    store(slice(y, start=[first, 0], shape=[n, D]), t * cast<f32>(s + 1), at=[program_id(1), 0])
}
"""

OFFSET = """
kernel from_offset<B: int = 16>(x: tensor<f32>[N], y: tensor<f32>[B], e: i32) {
    store(y, load(slice(x, start=e), tile=B, pad=-1.0))
}
"""

NESTED = """
fn row_sum(src, r) {
    return sum(load(src, tile=[1, 8], at=[r, 0]), axis=1)
}

kernel nested(x: tensor<f32>[M, N], y: tensor<f32>[4]) {
    let inner = slice(slice(x, start=[2, 3]), start=[1, 2], shape=[4, 5])
    for r in range(4) {
        store(y, row_sum(inner, r), at=r)
    }
}
"""

INDEXED = """
kernel indexed(x: tensor<f32>[N], idx: tensor<i32>[K], out: tensor<f32>[N], hist: tensor<i32>[N]) {
    let w = slice(x, start=5, shape=10)
    let i = load(idx, tile=[8])
    let ok = i < 10
    let g = gather(w, i, mask=ok, other=-3.0)
    scatter(slice(out, start=20, shape=10), i, g * 2.0, mask=ok)
    atomic_add(slice(hist, start=1), i, 1, mask=ok)
}
"""

LINEAR = """
kernel packed_linear<BM: int = 16, BK: int = 16, N: int = 16>(x: tensor<f16>[T, K], cu: tensor<i32>[B1],
        w: tensor<f16>[K, N], y: tensor<f32>[T, N]) {
    let first = load(cu, at=program_id(0))
    let n = load(cu, at=program_id(0) + 1) - first
    let xs = slice(x, start=[first, 0], shape=[n, K])
    var acc = cast<f32>(load(xs, tile=[BM, N], at=[program_id(1), 0]))  // outside the loop: no TMA on Tile IR
    for k in range(cdiv(K, BK)) {
        acc = dot(load(xs, tile=[BM, BK], at=[program_id(1), k]), load(w, tile=[BK, N], at=[k, 0]), acc)
    }
    store(slice(y, start=[first, 0], shape=[n, N]), acc, at=[program_id(1), 0])
}
"""


def packed(strided):
    lens = [3, 0, 8, 17, 1]
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    rows = int(cu[-1]) + 2  # two rows that belong to no sequence
    x = torch.randn(rows, 16)
    x = noncontiguous(x) if strided else x
    want = torch.full((rows, 16), float("nan"))
    for s, (a, b) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        want[a:b] = x[a:b] * (s + 1)  # a tile past a sequence's end would bring pad=100 or the next one's factor
    return PACKED, "scale_packed", (len(lens), cdiv(max(lens), 8)), [x, cu, torch.full((rows, 16), float("nan"))], \
        {2: want}


def linear():
    """A dot over tiles of each sequence's window: Tile IR reads the window through a tensor map in the loop."""
    lens = [20, 3, 0, 33]
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    rows = int(cu[-1]) + 1
    x, w = torch.randn(rows, 48).half(), torch.randn(48, 16).half()
    want = torch.full((rows, 16), float("nan"))
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        want[a:b] = (x[a:b, :16].double() + x[a:b].double() @ w.double()).float()
    y = torch.full((rows, 16), float("nan"))
    return LINEAR, "packed_linear", (len(lens), cdiv(max(lens), 16)), [x, cu, w, y], {3: want}


def offset(e):
    x = torch.randn(100)
    want = torch.full((16,), -1.0)
    want[:max(0, min(16, 100 - e))] = x[e:e + 16]
    return OFFSET, "from_offset", (1,), [x, torch.zeros(16), e], {1: want}


def nested(strided):
    x = torch.randn(9, 12)
    x = noncontiguous(x) if strided else x
    return NESTED, "nested", (1,), [x, torch.zeros(4)], {1: x[3:7, 5:10].sum(1)}


def indexed():
    x = torch.randn(40)
    idx = torch.tensor([0, 9, 3, 10, 4, 7, 12, 1], dtype=torch.int32)
    want_out, want_hist = torch.zeros(40), torch.zeros(40, dtype=torch.int32)
    for i in idx.tolist():
        if i < 10:
            want_out[20 + i] = x[5 + i] * 2.0
            want_hist[1 + i] += 1
    return INDEXED, "indexed", (1,), [x, idx, torch.zeros(40), torch.zeros(40, dtype=torch.int32)], \
        {2: want_out, 3: want_hist}


CASES = {"packed": lambda: packed(False), "packed strided": lambda: packed(True),
         **{f"offset {e}": (lambda e=e: offset(e)) for e in (0, 3, 90, 100)},
         "nested": lambda: nested(False), "nested strided": lambda: nested(True), "indexed": indexed,
         "linear": linear}


def launch(case, backend):
    """Runs the case's kernel (CPU tensors: the interpreter; else CUDA copies on `backend`); its outputs and the
    wanted values, on the CPU."""
    source, name, grid, args, want = CASES[case]()
    if backend != "interp":
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    getattr(tle.compile(source), name)[grid](*args, backend=backend)
    return [(args[i].cpu(), w) for i, w in want.items()]


@pytest.mark.parametrize("case", CASES)
def test_slice_on_the_interpreter(case):
    torch.manual_seed(0)
    for got, want in launch(case, "interp"):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("case", CASES)
def test_slice_on_gpu(case, backend):
    torch.manual_seed(0)
    for got, want in launch(case, backend):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_a_window_outside_the_tensor_is_an_error_at_the_slice(tmp_path):
    path = tmp_path / "packed.tle"
    path.write_text(PACKED)
    cu = torch.tensor([0, 3, 9], dtype=torch.int32)  # the second sequence claims rows 3..8 of 7
    x, y = torch.randn(7, 16), torch.zeros(7, 16)
    with pytest.raises(TleError) as info:
        tle.compile(str(path)).scale_packed[(2, 1)](x, cu, y)
    text = str(info.value)
    assert "packed.tle:6:14" in text and "does not lie inside its shape [7, 16]" in text and "program (1, 0, 0)" in text
    assert "a stencil's halo" in text and "gather(x, indices, mask=inside, other=v)" in text  # reading past it


def test_programs_with_different_windows_run_one_by_one():
    """A window that differs between programs is per-program state, which the lockstep execution cannot hold."""
    from interp_harness import run
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    x, y = torch.randn(12, 16), torch.zeros(12, 16)
    compiled = run(PACKED, "scale_packed", (2, 1, 1), {"x": x, "cu": cu, "y": y})
    assert not compiled.batched
    assert torch.equal(y[:5], x[:5]) and torch.equal(y[5:], x[5:] * 2)
