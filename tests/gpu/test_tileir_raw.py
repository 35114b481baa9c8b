"""Tile IR cubins (targets/tileir.py) launched through runtime/launch.py, checked against torch.

The kernels are the hand-built cuda_tile modules of tests/targets/test_tileir_target.py. Also checked here: the
block size read from the cubin is the one the driver requires (another size fails to launch), and a matmul whose
shared memory exceeds 48 KiB runs without any opt-in (tileiras declares it statically).
"""
import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch

from tle.dialects.mlir import new_context
from tle.runtime.launch import load
from tle.targets import tileir

pytestmark = pytest.mark.gpu

_spec = importlib.util.spec_from_file_location(
    "tileir_kernels", Path(__file__).parent.parent / "targets" / "test_tileir_target.py")
kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernels)


def arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def compile_(build, *args):
    with new_context():
        return tileir.compile_tileir(build(*args), arch())


def test_vector_add_ragged():
    binary = compile_(kernels.vector_add)
    n = 1_000_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n + 1000,), float("nan"), device="cuda")
    load(binary).launch((cdiv(n, kernels.VADD_TILE), 1, 1), [x, y, out, n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out[:n], x + y, rtol=0, atol=0)
    assert out[n:].isnan().all()  # the partial last tile stores nothing past n


def test_block_size_is_the_one_the_cubin_requires():
    """Only the size in the cubin's EIATTR_REQNTID launches. (The driver does not tell it: on the H200,
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK of this 128-thread kernel reads 1024.)"""
    binary = compile_(kernels.vector_add)
    kernel = load(binary)
    n = 4096
    x, y, out = (torch.ones(n, device="cuda") for _ in range(3))
    half = binary.num_threads // 2  # the launcher takes the block shape from extra["reqntid"], so change both
    wrong = load(dataclasses.replace(binary, num_threads=half, extra={**binary.extra, "reqntid": [half, 1, 1]}))
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        wrong.launch((cdiv(n, kernels.VADD_TILE), 1, 1), [x, y, out, n])
    kernel.launch((cdiv(n, kernels.VADD_TILE), 1, 1), [x, y, out, n])
    torch.cuda.synchronize()
    assert (out == 2).all()


@pytest.mark.parametrize("m, n, k", [(512, 384, 256), (500, 264, 200)])  # the second pads all three edges
def test_matmul(m, n, k):
    binary = compile_(kernels.matmul, 128, 128, 64)
    assert binary.extra["static_shared_mem"] > 48 * 1024
    gen = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    load(binary).launch((cdiv(m, 128), cdiv(n, 128), 1), [a, b, c, m, n, k])
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=2e-2)


def test_softmax_rows():
    binary = compile_(kernels.softmax)
    rows, cols = 300, 1000
    x = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(x)
    load(binary).launch((rows, 1, 1), [x, out, rows, cols, cols])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_matmul_4096_throughput():
    """Correct at 4096^3, and how fast (printed; FACTS.md: a cuTile matmul with these tiles reached 548 TFLOP/s)."""
    binary = compile_(kernels.matmul, 128, 128, 64)
    s = 4096
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    c = torch.empty(s, s, device="cuda", dtype=torch.float16)
    kernel = load(binary)
    grid = (s // 128, s // 128, 1)
    kernel.launch(grid, [a, b, c, s, s, s])
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=1e-1)
    reps = 20
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        kernel.launch(grid, [a, b, c, s, s, s])
    stop.record()
    torch.cuda.synchronize()
    tile_s = start.elapsed_time(stop) / 1e3 / reps
    start.record()
    for _ in range(reps):
        torch.matmul(a, b, out=c)
    stop.record()
    torch.cuda.synchronize()
    torch_s = start.elapsed_time(stop) / 1e3 / reps
    flops = 2 * s ** 3
    print(f"\nmatmul 4096^3 f16: tile IR {flops / tile_s / 1e12:.0f} TFLOP/s, torch {flops / torch_s / 1e12:.0f} "
          f"TFLOP/s ({tile_s / torch_s:.2f}x torch's time)")
