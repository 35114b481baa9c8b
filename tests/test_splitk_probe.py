"""benchmarks/splitk_probe.py on the CPU: its configuration parser, and both split-K kernels it times, through its own
launch builder, on the interpreter against torch on ragged sizes (the probe checks them again on the GPU before
timing, at its own sizes)."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
probe = pytest.importorskip("splitk_probe")


def test_configs_reads_tiles_and_split():
    assert probe.configs("16x64x128/4, 32x64x128/1,") == [(16, 64, 128, 4), (32, 64, 128, 1)]


@pytest.fixture(scope="module")
def kernels():
    return probe.compile_kernels()


@pytest.mark.parametrize("cfg", [(16, 32, 32, 1), (16, 32, 32, 3), (32, 16, 64, 8)])
@pytest.mark.parametrize("kernel", ["counter", "atomic"])
def test_each_kernel_gives_a_times_b(kernels, kernel, cfg):
    """Uneven splits, more splits than K tiles, and M, N, K that no tile divides; reset() then a second launch on
    the same workspace is right too (the counters are left zeroed, the atomic's C is zeroed again)."""
    torch.manual_seed(0)
    m, n, k = 5, 70, 200
    a, b = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(k, n, dtype=torch.bfloat16)
    want = a.float() @ b.float()
    launch, out, reset = probe.launches(*kernels, a, b, m, n, cfg, torch.bfloat16)[kernel]
    for _ in range(2):
        reset()
        launch({})
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
