"""Scans and reductions with a combine fn, and the cumulative builtins, on both GPU paths against the interpreter
(the language's definition: it folds in order, from the first element or, reversed, from the last).

The combine is a linear recurrence's, which is not commutative: a path that passed the later element first, or
reversed the other way round, fails. Tiles and warps are chosen so that the scan runs inside a thread, across the
lanes of a warp and across warps (through shared memory), along the last axis and along the first."""
import pytest
import torch

import tle

SOURCE = """
fn linear(a1, b1, a2, b2) {
    return a1 * a2, a2 * b1 + b2
}

kernel rec<BM: int = 1, BN: int = 1024, AXIS: int = 1, REV: bool = false>(a: tensor<f32>[M, N], b: tensor<f32>[M, N],
                                                                        h: tensor<f32>[M, N], p: tensor<f32>[M, N],
                                                                        last: tensor<f32>[M, N]) {
    let i = program_id(0)
    let j = program_id(1)
    let ta = load(a, tile=[BM, BN], at=[i, j], pad=1.0)
    let tb = load(b, tile=[BM, BN], at=[i, j])
    let _, hs = scan(ta, tb, axis=AXIS, combine=linear, identity=[1.0, 0.0], reverse=REV)
    store(h, hs, at=[i, j])
    // padded with max's identity: a reverse cummax meets the padding first (the interpreter warns where it is 0)
    let tm = load(b, tile=[BM, BN], at=[i, j], pad=-inf)
    store(p, cumprod(ta, axis=AXIS, reverse=REV) + cummax(tm, axis=AXIS, reverse=REV), at=[i, j])
    let _, whole = reduce(ta, tb, axis=AXIS, combine=linear, identity=[1.0, 0.0], keepdims=true)
    store(last, broadcast(whole, [BM, BN]), at=[i, j])
}
"""

# (BM, BN, AXIS, num_warps): the scan's extent is BN along axis 1, BM along axis 0
CONFIGS = [(1, 32, 1, 1), (1, 1024, 1, 4), (1, 4096, 1, 8), (4, 256, 1, 4), (256, 4, 0, 4), (64, 32, 0, 8),
           (32, 32, 0, 4)]


@pytest.fixture(scope="module")
def mod():
    return tle.compile(SOURCE)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("rev", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("bm,bn,axis,warps", CONFIGS, ids=[f"{c[0]}x{c[1]}-axis{c[2]}-w{c[3]}" for c in CONFIGS])
def test_scan_with_a_combine_fn_matches_the_interpreter(mod, backend, rev, bm, bn, axis, warps):
    torch.manual_seed(bm * 7 + bn + axis)
    m, n = 3 * bm - (1 if bm > 1 else 0), 2 * bn - 3  # ragged: padding enters every scan's last tile
    a = torch.rand(m, n) * 0.5 + 0.5  # decays in (0.5, 1): the recurrence stays bounded over 8191 steps
    b = torch.randn(m, n)
    consts = dict(BM=bm, BN=bn, AXIS=axis, REV=rev)
    grid = (-(-m // bm), -(-n // bn))
    want = [torch.full((m, n), float("nan")) for _ in range(3)]
    mod.rec[grid](a, b, *want, **consts)
    # (CPU tensors run on the interpreter; last_backend names the last launch that was planned, not this one)
    got = [torch.full((m, n), float("nan"), device="cuda") for _ in range(3)]
    mod.rec[grid](a.cuda(), b.cuda(), *got, **consts, backend=backend, num_warps=warps)
    assert mod.rec.last_backend == backend
    for name, g, w in zip(("h", "cumprod + cummax", "reduce"), got, want):
        scale = max(1.0, w.abs().max().item())
        err = ((g.cpu() - w).abs() / scale).max().item()
        assert err <= 1e-5 * max(bm, bn) ** 0.5, f"{name}: max error {err:.3g} (scale {scale:.3g})"
