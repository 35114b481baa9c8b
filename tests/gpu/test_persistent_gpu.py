"""Persistent launches on the Tile IR path: a kernel with one 128x128 to 128x256 dot and a short K (tle/abi.py ShortK)
launched on a grid of at least 3 waves runs it as a loop (lowering/tle_to_tileir.py persistent_loop), and the
runtime starts one wave of programs with the grid behind the arguments (runtime/launch.py; the C launcher's plans
too). Each result is checked against torch, each output lies in a NaN-filled buffer (a tile left unwritten, or
written twice in the wrong place, shows), and each grid is launched three times, so the C launcher's plan runs
too."""
import os

import pytest
import torch

import tle
from tle.abi import ShortK

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BMM = """
kernel bmm<BM: int = 128, BN: int = 128, BK: int = 64, T: dtype = f16>(
        a: tensor<T>[B, M, K], b: tensor<T>[B, K, N], c: tensor<T>[B, M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(reshape(load(a, tile=[1, BM, BK], at=[program_id(2), program_id(0), k]), [BM, BK]),
                  reshape(load(b, tile=[1, BK, BN], at=[program_id(2), k, program_id(1)]), [BK, BN]), acc)
    }
    store(c, reshape(cast<T>(acc), [1, BM, BN]), at=[program_id(2), program_id(0), program_id(1)])
}
"""


def cdiv(a, b):
    return -(-a // b)


def binaries(kernel):
    return [e.compiled for e in kernel._entries.values() if e.compiled.backend == "tileir"]


def check(c, want, what):
    assert not c.isnan().any(), what
    assert (c.float() - want).norm() / want.norm() < 1e-2, what


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, dtype, bm, bn", [(4096, 4096, 128, torch.float16, 128, 128),
                                                    (4000, 3000, 320, torch.bfloat16, 128, 128),
                                                    (4096, 4096, 512, torch.float16, 128, 128),
                                                    (4096, 4096, 256, torch.float16, 128, 256),
                                                    (8192, 4000, 320, torch.bfloat16, 256, 128)])
def test_a_short_k_matmul_over_several_waves_runs_persistent(m, n, k, dtype, bm, bn):
    kern = tle.compile(os.path.join(ROOT, "examples", "matmul.tle"), backend="tileir").matmul
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    want = a.float() @ b.float()
    T = "f16" if dtype == torch.float16 else "bf16"
    grid = (cdiv(m, bm), cdiv(n, bn))
    for i in range(3):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        kern[grid](a, b, c, BM=bm, BN=bn, BK=64, T=T)
        torch.cuda.synchronize()
        check(c, want, (m, n, k, i))
    (compiled,) = binaries(kern)
    assert ShortK() in compiled.spec.inside and compiled.binary.extra.get("persistent")
    assert kern._fast.get(grid + (1,)) or kern._fast.get(grid), "no C plan for the grid"
    # the same binary under another grid of several waves: its own plan passes its own grid
    c = torch.full((m - 640, n), float("nan"), device="cuda", dtype=dtype)
    for _ in range(2):
        kern[(cdiv(m - 640, bm), grid[1])](a[:m - 640], b, c, BM=bm, BN=bn, BK=64, T=T)
    torch.cuda.synchronize()
    check(c, want[:m - 640], "fewer rows")
    # a callable grid (as tuned kernels have) proves the facts of the grid it gives: persistent too
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    kern[lambda meta: (cdiv(meta["M"], meta["BM"]), cdiv(meta["N"], meta["BN"]))](a, b, c, BM=bm, BN=bn, BK=64, T=T)
    torch.cuda.synchronize()
    check(c, want, "callable grid")
    assert all(x.binary.extra.get("persistent") for x in binaries(kern))


@pytest.mark.gpu
def test_a_batched_grid_of_three_axes_runs_persistent():
    """A 3-D grid (tiles of M, tiles of N, the batch) with ragged M, N and K (its rows still 16-byte aligned, as
    TMA needs): every program id the loop derives lands on its own tile."""
    kern = tle.compile(BMM, backend="tileir").bmm
    bs, m, n, k = 27, 333, 1000, 264
    a = torch.randn(bs, m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(bs, k, n, device="cuda", dtype=torch.float16)
    want = a.float() @ b.float()
    grid = (cdiv(m, 128), cdiv(n, 128), bs)  # 648 programs
    for i in range(3):
        c = torch.full((bs, m, n), float("nan"), device="cuda", dtype=torch.float16)
        kern[grid](a, b, c)
        torch.cuda.synchronize()
        check(c, want, i)
    (compiled,) = binaries(kern)
    assert compiled.binary.extra.get("persistent")


@pytest.mark.gpu
def test_a_long_k_or_few_waves_stays_one_program_per_tile():
    """K = 1024 (16 tiles of 64), a grid of under 3 waves, and rows TMA cannot read (K = 333 in f16) keep one
    program per tile."""
    kern = tle.compile(os.path.join(ROOT, "examples", "matmul.tle"), backend="tileir").matmul
    # each fails one condition: K = 1024; 256 programs (1.9 waves of 132); a's rows 666 bytes apart
    for m, n, k in ((8192, 2048, 1024), (2048, 2048, 512), (8192, 2048, 333)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        kern[(m // 128, n // 128)](a, b, c, BM=128, BN=128, BK=64)
        torch.cuda.synchronize()
        check(c, a.float() @ b.float(), (m, n, k))
    assert not any(x.binary.extra.get("persistent") for x in binaries(kern))
