"""examples/matmul_splitk.tle on the GPU: the one-launch split-K is race-free on the native path. The last-arriving
program sums the partials in a fixed order (0 .. SPLIT-1), so every launch must give the same bits whatever order
the programs finish in; a partial read before it was written (a missing barrier or fence) changes them. Each
configuration is launched many times on one workspace and checked bit for bit, and against torch."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "benchmarks")]

import tle  # noqa: E402
from reference import relative_error, splitk_workspace, tolerance  # noqa: E402

CONFIGS = [  # (M, N, K), (BM, BN, BK, SPLIT, num_warps, num_stages, SWAP): decode shapes of benchmarks/bench.py
    ((1, 4096, 4096), (16, 64, 64, 2, 4, 7, False)),
    ((16, 4096, 4096), (16, 64, 64, 4, 4, 5, False)),
    ((32, 4096, 4096), (32, 128, 64, 4, 4, 5, False)),
    ((128, 4096, 4096), (128, 64, 64, 2, 8, 7, False)),
    ((1, 4096, 14336), (16, 128, 128, 4, 4, 3, False)),
    ((64, 4096, 14336), (64, 64, 64, 2, 4, 7, False)),
    ((5, 1000, 3000), (16, 64, 64, 16, 4, 4, False)),
    ((16, 4096, 4096), (16, 64, 256, 2, 4, 3, True)),
    ((32, 4096, 4096), (32, 64, 64, 2, 4, 7, True)),
    ((128, 14336, 4096), (128, 128, 64, 1, 4, 5, True)),
    ((5, 1000, 3000), (16, 64, 64, 16, 4, 4, True)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["tle", "tle-tileir", "triton_ref"])
@pytest.mark.parametrize("shape,cfg", CONFIGS, ids=[f"{s[0]}x{s[1]}x{s[2]}-S{c[3]}{'-swap' if c[6] else ''}"
                                                     for s, c in CONFIGS])
def test_same_bits_every_launch(shape, cfg, impl):
    m, n, k = shape
    bm, bn, bk, split, warps, stages, swap = cfg
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    part, count = splitk_workspace("cuda", m, n, bm, bn, split)
    consts = {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split, "SWAP": swap}
    if impl.startswith("tle"):
        kernel = tle.compile(os.path.join(ROOT, "examples", "matmul_splitk.tle")).matmul_splitk
        grid = (-(-n // bn), split, -(-m // bm))
        # Tile IR: the atomic's token joins every written tensor's chain (docs/tileir.md), so it must not race either
        options = {"backend": "tileir"} if impl == "tle-tileir" else \
            {"backend": "triton", "num_warps": warps, "num_stages": stages}

        def launch(c):
            kernel[grid](a, b, c, part, count, **options, **consts)
    else:
        import triton_ref

        def launch(c):
            triton_ref.matmul_splitk(a, b, c, part, count, num_warps=warps, num_stages=stages, **consts)
    outs = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(200)]
    for c in outs:
        launch(c)
    torch.cuda.synchronize()
    assert not count.any(), "a counter was left set"
    first = outs[0]
    assert relative_error(first, a.float() @ b.float()) <= tolerance("matmul_splitk", torch.bfloat16)
    differ = [i for i, c in enumerate(outs) if not torch.equal(c.view(torch.int16), first.view(torch.int16))]
    assert not differ, f"{len(differ)} of {len(outs)} launches gave other bits (first: launch {differ[0]})"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_graph_replays_compute_each_new_input(backend):
    """A decode step captured in a CUDA graph (how serving loops run it, and how bench.py's graph timer does):
    every replay reads the static inputs' new contents, and the arrival counters each launch leaves zeroed let the
    next replay's last-arriving programs reduce again."""
    m, n, k, (bm, bn, bk, split) = 16, 4096, 4096, (16, 64, 64, 4)
    kernel = tle.compile(os.path.join(ROOT, "examples", "matmul_splitk.tle")).matmul_splitk
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    part, count = splitk_workspace("cuda", m, n, bm, bn, split)
    consts = {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split}

    def step():
        kernel[(n // bn, split, 1)](a, b, c, part, count, backend=backend, **consts)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # compiled and loaded before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(5):
        a.copy_(torch.randn(m, k, device="cuda", dtype=torch.bfloat16))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert relative_error(c, a.float() @ b.float()) <= tolerance("matmul_splitk", torch.bfloat16)
    assert not count.any(), "a counter was left set"
