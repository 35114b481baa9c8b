"""Tensors spanning more than 2**31 - 1 elements, or with a stride or a size past it (tle/abi.py WideTensor,
WideDim): the runtime passes them, and both paths address them with 64-bit strides and offsets. Hand-written
Triton computes `row * stride` in i32 and reads the wrong rows (or faults) past 2**31 elements unless its author
casts to int64; in tle the same kernel text just works.

Each test fills a tensor just past 2**32 elements with fresh random data and checks rows on both sides of
element 2**31 (where i32 offsets wrap) and 2**32 (where u32 ones would) against torch. About 8.6 GB per wide bf16
tensor: each test frees what it made."""
import os

import pytest
import torch

import tle
from tle.abi import WideTensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
I32_MAX = 2 ** 31 - 1

ROWS = """
kernel scale<BLOCK: int = 1024, T: dtype = bf16>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    let row = program_id(0)
    store(y, load(x, tile=[1, BLOCK], at=[row, program_id(1)]) * cast<T>(2.0), at=[row, program_id(1)])
}

kernel scale3<BLOCK: int = 1024, T: dtype = bf16>(x: tensor<T>[S, M, N], y: tensor<T>[S, M, N]) {
    let b = program_id(2)
    let t = load(x, tile=[1, 1, BLOCK], at=[b, program_id(0), program_id(1)])
    store(y, t * cast<T>(2.0), at=[b, program_id(0), program_id(1)])
}

kernel tiles<BM: int = 64, BN: int = 64, T: dtype = bf16>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    store(y, load(x, tile=[BM, BN], at=[program_id(0), program_id(1)]) + cast<T>(1.0),
          at=[program_id(0), program_id(1)])
}

kernel strided<B: int = 1024, T: dtype = bf16>(x: tensor<T>[N], y: tensor<T>[N]) {
    // reads N's value: i64 in a launch past 2**31 - 1, so the loop counts in 64 bits and so do the positions
    for t in range(program_id(0), cdiv(N, B), num_programs(0)) {
        let i = t * B + arange(0, B)
        scatter(y, [i], gather(x, [i], mask=i < N, other=cast<T>(0.0)) * cast<T>(2.0), mask=i < N)
    }
}

kernel pick<BR: int = 16, BN: int = 256, T: dtype = bf16>(x: tensor<T>[M, N], ids: tensor<i32>[R],
                                                          y: tensor<T>[R, N]) {
    let r = reshape(load(ids, tile=[BR], at=program_id(0)), [BR, 1])
    let cols = reshape(program_id(1) * BN + arange(0, BN), [1, BN])
    store(y, gather(x, [r, cols], mask=(r < M) & (cols < N), other=cast<T>(0.0)), at=[program_id(0), program_id(1)])
}
"""


def _wide(rows, cols, dtype=torch.bfloat16):
    assert rows * cols > 2 ** 32
    return torch.randn(rows, cols, device="cuda", dtype=dtype)


def _rows_across_the_boundary(cols, rows):
    """Row indices on both sides of elements 2**31 and 2**32, and the last rows."""
    out = {0, rows - 2, rows - 1}
    for edge in (2 ** 31, 2 ** 32):
        out.update(r for r in range(edge // cols - 1, edge // cols + 2) if 0 <= r < rows)
    return sorted(out)


def _twice(launch, out):
    """Launch twice, `out` zeroed between: the first launch plans in Python, the second runs the C launcher's plan
    (runtime/fastlaunch.py), which packs the i64 strides itself."""
    launch()
    torch.cuda.synchronize()
    out.zero_()
    launch()
    torch.cuda.synchronize()


def _free():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


@pytest.fixture(scope="module")
def mod():
    return tle.compile(ROWS)


def _wide_specs(kernel, backend):
    return [e.compiled.spec.inside for e in kernel._entries.values() if e.compiled.backend == backend]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_row_tiles_past_two_to_the_31_elements(mod, backend):
    rows, cols, block = 524_400, 8192, 1024  # 4.3e9 elements
    x = _wide(rows, cols)
    y = torch.empty_like(x)
    _twice(lambda: mod.scale[(rows, cols // block)](x, y, BLOCK=block, backend=backend), y)
    assert all(WideTensor("x") in s and WideTensor("y") in s for s in _wide_specs(mod.scale, backend))
    for r in _rows_across_the_boundary(cols, rows):
        assert torch.equal(y[r], x[r] * 2), f"row {r}"
    del x, y
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("batch", [1, 2])
def test_a_batch_stride_past_two_to_the_31(mod, backend, batch):
    # [1, 524400, 8192]: the batch axis's stride is 2**32 + ..., which only i64 strides can pass; [2, 262200, 8192]:
    # a stride of 2**31 + ... and an element past 2**32
    rows, cols, block = 524_400 // batch, 8192, 1024
    x = torch.randn(batch, rows, cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    assert x.stride(0) > I32_MAX
    _twice(lambda: mod.scale3[(rows, cols // block, batch)](x, y, BLOCK=block, backend=backend), y)
    assert sum(len(table) for table in mod.scale3._fast.values()) >= 1  # the second launch had a C plan
    flat_x, flat_y = x.view(-1, cols), y.view(-1, cols)
    for r in _rows_across_the_boundary(cols, rows * batch):
        assert torch.equal(flat_y[r], flat_x[r] * 2), f"row {r}"
    del x, y, flat_x, flat_y
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_a_flat_tensor_past_two_to_the_32_elements(backend):
    # a size past 2**31 - 1 (tle/abi.py WideDim): the tile's start and its bounds check are i64; the grid is exact
    # but for a ragged last tile
    k = tle.compile(os.path.join(ROOT, "examples", "vector_add.tle")).vector_add
    n, block = 2 ** 32 + 4097, 1024
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(n + 64, device="cuda", dtype=torch.bfloat16).fill_(float("nan"))
    _twice(lambda: k[((n + block - 1) // block,)](x, y, out[:n], BLOCK=block, backend=backend), out[:n])
    for edge in (0, 2 ** 31, 2 ** 32, n - 2048):
        lo = max(0, edge - 2048)
        assert torch.equal(out[lo:edge + 2048], x[lo:edge + 2048] + y[lo:edge + 2048]), f"elements near {edge}"
    assert torch.isnan(out[n:]).all(), "the ragged last tile wrote past the end"
    del x, y, out
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_a_kernel_that_reads_a_size_past_two_to_the_32(mod, backend):
    # N's value is i64 in this launch (tle/check.py, wide_dims): a grid-stride loop over 2**32 + 4097 elements on
    # a few waves of programs, its bound, positions and masks from N
    n = 2 ** 32 + 4097
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(n + 64, device="cuda", dtype=torch.bfloat16).fill_(float("nan"))
    _twice(lambda: mod.strided[(132 * 8,)](x, y[:n], backend=backend), y[:n])
    assert torch.equal(y[:n], x * 2)  # every element: each program's loop covers a strided share of them
    assert torch.isnan(y[n:]).all(), "the masks let a position past N through"
    del x, y
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_2d_tiles_with_a_dynamic_row_stride(mod, backend):
    # A column slice: rows 8320 elements apart, 8192 read, so the row stride is not the width.
    rows, cols, width = 524_400, 8192, 8320
    base = _wide(rows, width)
    x = base[:, :cols]
    y = torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16)  # 4.3e9 elements: wide as well
    # one more row of tiles than the rows: masked off
    _twice(lambda: mod.tiles[(rows // 64 + 1, cols // 64)](x, y, backend=backend), y)
    for r in _rows_across_the_boundary(width, rows):
        assert torch.equal(y[r], x[r] + 1), f"row {r}"
    del base, x, y
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_gather_past_two_to_the_31_elements(mod, backend):
    rows, cols = 524_400, 8192
    x = _wide(rows, cols)
    ids = torch.tensor(_rows_across_the_boundary(cols, rows) * 2, device="cuda", dtype=torch.int32)[:16]
    ids = ids[torch.randperm(16, device="cuda")]
    y = torch.empty(16, cols, device="cuda", dtype=torch.bfloat16)
    _twice(lambda: mod.pick[(1, cols // 256)](x, ids, y, backend=backend), y)
    assert torch.equal(y, x[ids.long()])
    del x, y
    _free()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("example", ["matmul", "matmul_persistent"])
def test_matmul_with_a_wide_operand(backend, example):
    # matmul: pointer tiles; matmul_persistent with TMA=true: tensor descriptors on the native path (i64 strides)
    k = getattr(tle.compile(os.path.join(ROOT, "examples", f"{example}.tle")), example)
    m, kk, n = 65_600, 65_536, 128  # a: 4.3e9 elements
    a = _wide(m, kk)
    b = torch.randn(kk, n, device="cuda", dtype=torch.bfloat16) / 64
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if example == "matmul":
        _twice(lambda: k[((m + 127) // 128, 1)](a, b, c, backend=backend), c)
    else:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        _twice(lambda: k[(sms,)](a, b, c, BN=128, TMA=True, backend=backend), c)
    rows = torch.tensor(_rows_across_the_boundary(kk, m), device="cuda")
    want = (a[rows].float() @ b.float())
    torch.testing.assert_close(c[rows].float(), want, atol=2e-2, rtol=2e-2)
    del a, b, c
    _free()
