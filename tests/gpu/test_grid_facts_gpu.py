"""Grid facts on the GPU (tle/abi.py): a launch whose grid keeps every tile inside runs a binary without those
bounds checks; a grid with programs past the end must get one with them. On the native path the checks are the
TTIR's masks; on the Tile IR path they are the view accesses' `inbounds` and the pointer loads' masks. Each output
lies inside a larger buffer whose guard band is poisoned, so a write past the end shows; each grid is launched
through kernel[grid] three times, so the C launcher's plans (kept per grid) are exercised too."""
import os

import pytest
import torch

import tle
from tle.abi import GridTile, ManyPrograms, ManyWaves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUARD = 4096


@pytest.fixture(autouse=True)
def _own_kernel_cache(tmp_path, monkeypatch):
    """A kernel cache of its own per test: some tests read what only a compile leaves (the tle stage, the binary's
    notes), which a binary another run put in the shared cache does not carry."""
    monkeypatch.setenv("TLE_CACHE_DIR", str(tmp_path / "cache"))


def guarded(shape, dtype):
    """An output of `shape` at the start of a NaN-filled buffer GUARD elements longer, and its guard band."""
    n = 1
    for s in shape:
        n *= s
    buf = torch.full((n + GUARD,), float("nan"), device="cuda", dtype=dtype)
    return buf[:n].view(shape), buf[n:]


def triton_plan_ttir(kernel) -> list[str]:
    """Triton's TTIR of each binary the kernel holds for the native path."""
    return [e.compiled.binary.stages.get("ttir", "") for e in kernel._entries.values()
            if e.compiled.backend == "triton"]


def plan_facts(kernel, backend) -> list[frozenset]:
    """The launch facts (Spec.inside) each binary of `backend` the kernel holds was built with."""
    return [e.compiled.spec.inside for e in kernel._entries.values() if e.compiled.backend == backend]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("extra", [0, 3])
def test_vector_add_exact_and_oversized_grids(extra, backend):
    k = tle.compile(os.path.join(ROOT, "examples", "vector_add.tle")).vector_add
    n, block = 1 << 20, 1024
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out, guard = guarded((n,), torch.float32)
    for _ in range(3):
        k[(n // block + extra,)](x, y, out, BLOCK=block, backend=backend)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    assert torch.isnan(guard).all(), "a program past the end wrote outside the tensor"
    (facts,) = plan_facts(k, backend)
    # exact: the loads lose their masks, the Tile IR store says inbounds (1024 programs: ManyWaves either way)
    assert bool(facts - {ManyWaves()}) == (extra == 0)
    if backend == "triton":
        (text,) = triton_plan_ttir(k)
        assert ("arith.cmpi" in text) == (extra > 0)  # exact: no mask at all


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_layernorm_rows_past_the_end_stay_masked(backend):
    k = tle.compile(os.path.join(ROOT, "examples", "layernorm.tle")).layernorm
    m, n = 1000, 1024
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    for grid in ((m,), (m + 7,), (m,)):  # exact, 7 rows past the end, exact again (its plan is reused)
        y, guard = guarded((m, n), torch.bfloat16)
        for _ in range(3):
            k[grid](x, w, b, y, 1e-5, BLOCK=n, backend=backend)
        torch.cuda.synchronize()
        assert (y.float() - want).norm() / want.norm() < 1e-2, grid
        assert torch.isnan(guard).all(), f"grid {grid}: a row past M was written"
    facts = plan_facts(k, backend)
    # one binary per grid fact, not per launch; only the exact grid's has the rows' fact (the columns' holds in both)
    assert len(facts) == 2 and sorted(any(isinstance(f, GridTile) for f in fs) for fs in facts) == [False, True]


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn", [(128, 128), (64, 128), (64, 64), (32, 64)])
def test_a_one_dot_matmul_past_one_wave_asks_tileiras_for_two_programs_per_sm(bm, bn):
    """examples/matmul.tle at 128x128x64, 64x128x64, 64x64x64 and 32x64x64 on Tile IR: a grid of more programs than SMs
    proves ManyPrograms and the binary carries the occupancy hint 2 (lowering/tle_to_tileir.py _occupancy); a grid
    of one wave or less, and the native path, do not split on it. Both results are right. K = 2048, past ShortK (a
    shorter K runs a 128x128 grid as a persistent loop instead: test_persistent_gpu.py)."""
    k = tle.compile(os.path.join(ROOT, "examples", "matmul.tle")).matmul
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m in (bm * 2 * sms, bm * 4):  # 2 x sms x 1 programs, then 4
        a = torch.randn(m, 2048, device="cuda", dtype=torch.float16)
        b = torch.randn(2048, bn, device="cuda", dtype=torch.float16)
        for backend in ("tileir", "triton"):
            c = torch.full((m, bn), float("nan"), device="cuda", dtype=torch.float16)
            k[(m // bm, 1)](a, b, c, BM=bm, BN=bn, BK=64, backend=backend)
            torch.cuda.synchronize()
            want = a.float() @ b.float()
            assert (c.float() - want).norm() / want.norm() < 1e-2, (m, backend)
    tileir = {ManyPrograms() in e.compiled.spec.inside: e.compiled.binary.stages["tileir"]
              for e in k._entries.values() if e.compiled.backend == "tileir"}
    assert sorted(tileir) == [False, True]
    assert "occupancy = 2" in tileir[True] and "occupancy =" not in tileir[False]
    assert not any(ManyPrograms() in fs for fs in plan_facts(k, "triton"))


@pytest.mark.gpu
def test_auto_takes_the_native_path_for_a_small_dot_step_past_two_waves():
    """examples/matmul.tle at 32x64x64 with backend="auto": a grid of more than twice as many programs as SMs proves
    ManyWaves and runs on the native path (lowering/tileir_legality.py tileir_slower); a grid of two waves keeps the
    Tile IR path with its occupancy hint. Both results are right."""
    k = tle.compile(os.path.join(ROOT, "examples", "matmul.tle")).matmul
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chosen = {}
    for programs in (2 * sms, 2 * sms + 1):
        a = torch.randn(32 * programs, 512, device="cuda", dtype=torch.float16)
        b = torch.randn(512, 64, device="cuda", dtype=torch.float16)
        c = torch.full((32 * programs, 64), float("nan"), device="cuda", dtype=torch.float16)
        k[(programs, 1)](a, b, c, BM=32, BN=64, BK=64)
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        assert (c.float() - want).norm() / want.norm() < 1e-2, programs
        chosen[programs] = k.last_backend
    assert chosen == {2 * sms: "tileir", 2 * sms + 1: "triton"}
    assert [ManyWaves() in fs for fs in plan_facts(k, "triton")] == [True]
    assert [ManyWaves() in fs for fs in plan_facts(k, "tileir")] == [False]


@pytest.mark.gpu
@pytest.mark.parametrize("k_size,k_stride,backend,split", [
    (258, 258, "triton", False),  # rows 516 bytes apart, which TMA cannot read: the native path (UnalignedRows)
    (259, 259, "tileir", True),   # an odd K on such rows: Tile IR, with the K loop split (tle/compiler.py _spec_for)
    (259, 264, "tileir", False),  # the same K in rows padded to 264 elements: TMA, no split
])
def test_a_dot_on_unaligned_rows_takes_the_faster_path(k_size, k_stride, backend, split):
    """auto's choice for a matmul whose a has rows that are not 16-byte aligned (lowering/tileir_legality.py), and
    whether that path splits the K loop; each gives torch's product."""
    from tle.abi import UnalignedRows
    mod = tle.compile(os.path.join(ROOT, "examples", "matmul.tle"))
    k = mod.matmul
    a = torch.randn(256, k_stride, device="cuda", dtype=torch.float16)[:, :k_size]
    b = torch.randn(k_size, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    k[(2, 2)](a, b, c)
    torch.cuda.synchronize()
    assert k.last_backend == backend
    (entry,) = k._entries.values()
    assert (UnalignedRows("a") in entry.compiled.spec.inside) == (k_stride % 8 != 0)
    assert ("tle.split" in entry.compiled.stages["tle"]) == split
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.1, rtol=0.02)


@pytest.mark.gpu
@pytest.mark.parametrize("d,backend", [(64, "triton"), (128, "tileir")])
def test_auto_takes_the_native_path_for_attention_backward_at_head_dim_64(d, backend):
    """examples/attention_bwd.tle's dq and dk/dv at their 64x64 tiles with backend="auto" on a grid of more than two
    waves: at head dim 64 their loop steps hold three and four dots of 64x64x64 multiply-adds, which ran faster on
    the native path (lowering/tileir_legality.py tileir_slower); at 128 Tile IR keeps them. Each result matches the
    other path's."""
    mod = tle.compile(os.path.join(ROOT, "examples", "attention_bwd.tle"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    s = 1024
    b = -(-(2 * sms + 1) // (s // 64))  # programs: (s / 64) * b, more than two waves
    q, k, v, do = (torch.randn(b, s, d, device="cuda", dtype=torch.float16) for _ in range(4))
    o = torch.empty_like(q)
    lse, delta = torch.empty(b, s, device="cuda"), torch.empty(b, s, device="cuda")
    grid, scale = (s // 64, b), d ** -0.5
    mod.attention_fwd[grid](q, k, v, o, lse, scale, D=d)
    mod.attention_bwd_delta[grid](o, do, delta, D=d)
    got = {}
    other = "tileir" if backend == "triton" else "triton"
    for how in ("auto", other):
        dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
        mod.attention_bwd_dkdv[grid](q, k, v, do, lse, delta, dk, dv, scale, D=d, backend=how)
        mod.attention_bwd_dq[grid](q, k, v, do, lse, delta, dq, scale, D=d, backend=how)
        torch.cuda.synchronize()
        got[how] = (dq.float(), dk.float(), dv.float())
        if how == "auto":
            chosen = (mod.attention_bwd_dkdv.last_backend, mod.attention_bwd_dq.last_backend)
    assert chosen == (backend, backend)
    for a, want in zip(got["auto"], got[other]):
        assert torch.isfinite(a).all() and (a - want).norm() / want.norm() < 1e-2


@pytest.mark.gpu
def test_an_argmax_past_two_waves_runs_at_twelve_warps_per_sm():
    """The greedy argmax of tests/data/greedy.tle over bf16 rows of 128256: tileiras gives it 2 programs of
    4 warps per SM; on a grid of more than two waves (ManyWaves, from the device's SM count) the binary is the one
    compiled again with an occupancy hint of 3 (tle/compiler.py _to_twelve_warps), on one wave or less the first.
    Both argmaxes are right (ties are unlikely in random bf16 rows, and the kernel takes the first maximum)."""
    k = tle.compile(os.path.join(ROOT, "tests", "data", "greedy.tle")).greedy
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for rows in (64, 2 * sms + 1):
        x = torch.randn(rows, 128256, device="cuda", dtype=torch.bfloat16)
        out = torch.full((rows,), -1, device="cuda", dtype=torch.int32)
        k[(rows,)](x, out, backend="tileir")
        torch.cuda.synchronize()
        assert torch.equal(out.long(), torch.argmax(x.float(), -1)), rows
    hints = {ManyWaves() in e.compiled.spec.inside: e.compiled.binary.extra.get("few_warps")
             for e in k._entries.values()}
    assert hints[False] is None and hints[True][1:] == (2, 4, 3)
