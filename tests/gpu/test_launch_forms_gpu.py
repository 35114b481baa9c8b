"""On the GPU, both paths: the fiftieth session's changes that only the CPU machine saw. A constant power as
multiplies (against the interpreter, bit for bit in f32), a tensor passed as None (a null pointer) and a 0-dim
tensor (a one-element tensor; the second launch goes through the C launcher), and a kernel whose default warps
would overflow shared memory (compiled on fewer); and the fifty-second session's launch checks."""
import pytest
import torch

import tle

pytestmark = pytest.mark.gpu
BACKENDS = ("triton", "tileir")

POW = """kernel p<P: int = 3, T: dtype = f32>(x: tensor<T>[N], y: tensor<T>[N]) {
    let i = program_id(0)
    store(y, load(x, tile=[1024], at=i) ** P, at=i)
}"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_constant_powers_match_the_interpreter(backend, dtype, p):
    k = tle.compile(POW).p
    x = (torch.randn(1 << 16, generator=torch.Generator().manual_seed(p)) * 3).to(dtype)
    want = torch.empty_like(x)
    k[(64,)](x, want, P=p, backend="interp")
    got = torch.empty_like(x, device="cuda")
    k[(64,)](x.cuda(), got, P=p, backend=backend)
    assert torch.equal(got.cpu(), want)


OPTIONAL = """kernel scale_rows<HAS_LABEL: bool = false>(x: tensor<f32>[M, N], label: tensor<i64>[M],
                                                        alpha: tensor<f32>[1]) {
    let row = program_id(0)
    if HAS_LABEL {
        if load(label, at=row) == -100 { return }
    }
    store(x, load(x, tile=[1, 64], at=[row, 0]) * load(alpha, at=0), at=[row, 0])
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_none_tensor_and_a_zero_dim_tensor(backend):
    k = tle.compile(OPTIONAL).scale_rows
    alpha = torch.tensor(0.5, device="cuda")
    for _ in range(2):  # the second launch of a signature goes through the C launcher
        x = torch.randn(8, 64, device="cuda")
        want = x * 0.5
        k[(8,)](x, None, alpha, backend=backend)
        torch.cuda.synchronize()
        assert torch.equal(x, want)
    labels = torch.tensor([0, -100, 1, 2, -100, 3, 4, 5], device="cuda")
    x = torch.randn(8, 64, device="cuda")
    want = torch.where((labels == -100)[:, None], x, x * 0.5)
    k[(8,)](x, labels, alpha, HAS_LABEL=True, backend=backend)
    assert torch.equal(x, want)


def test_a_scan_whose_default_warps_overflow_shared_memory_runs_on_fewer():
    src = """kernel colscan(x: tensor<i32>[M, N], y: tensor<i32>[M, N]) {
        store(y, cumsum(load(x, tile=[256, 256]), axis=0))
    }"""
    k = tle.compile(src).colscan
    x = torch.randint(-100, 100, (256, 256), device="cuda", dtype=torch.int32)
    y = torch.empty_like(x)
    k[(1,)](x, y, backend="triton")
    assert torch.equal(y, torch.cumsum(x, 0).int())


BF16_SUM = """kernel k(x: tensor<bf16>[N], acc: tensor<bf16>[M]) {
    let t = load(x, tile=[64], at=program_id(0))
    let _ = atomic_add(acc, arange(64) % 8, t)
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_atomic_add(backend):
    """Values of -1, 0 and 1: every partial sum of an element's 512 is an integer far inside bf16's exact range (up
    to 256; a random walk of 512 such steps stays within about 19 per standard deviation), so the sum is exact in
    any order and must equal torch's. (Random normal values needed a tolerance that the H100 broke once.)"""
    k = tle.compile(BF16_SUM).k
    x = torch.randint(-1, 2, (4096,), device="cuda").bfloat16()
    acc = torch.zeros(8, device="cuda").bfloat16()
    k[(64,)](x, acc, backend=backend)
    assert torch.equal(acc.float(), x.float().reshape(-1, 8).sum(0))


F64_SCATTER_ADD = """kernel k(idx: tensor<i32>[N], v: tensor<f64>[N], out: tensor<f64>[B]) {
    let i = load(idx, tile=[256], at=program_id(0), pad=-1)
    atomic_add(out, [i], load(v, tile=[256], at=program_id(0)), mask=i >= 0)
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_f64_atomic_add(backend):
    k = tle.compile(F64_SCATTER_ADD).k
    idx = torch.randint(0, 16, (1000,), device="cuda", dtype=torch.int32)
    v = torch.randn(1000, device="cuda", dtype=torch.float64)
    out = torch.zeros(16, device="cuda", dtype=torch.float64)
    k[(4,)](idx, v, out, backend=backend)
    want = torch.zeros(16, device="cuda", dtype=torch.float64).index_add_(0, idx.long(), v)
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)


NARROW = """kernel c<T: dtype = f16>(a: tensor<f64>[N], y: tensor<T>[N]) {
    store(y, cast<T>(load(a, tile=[256], at=program_id(0))), at=program_id(0))
}
kernel s<T: dtype = f32>(a: tensor<T>[N], y: tensor<T>[N]) {
    store(y, sqrt(load(a, tile=[256], at=program_id(0))), at=program_id(0))
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_f64_narrowing_and_sqrt_match_the_interpreter_bit_for_bit(backend):
    # cvt.rn.f16.f64 / F2F.F16.F64 round once, as the interpreter does; sqrt is IEEE on every path
    mod = tle.compile(NARROW)
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(4096, generator=g, dtype=torch.float64) * 300)
    a[:3] = torch.tensor([1 + 2**-11 + 2**-40, 65519.99999999999, 2**-25 + 2**-60], dtype=torch.float64)
    for dt in (torch.float16, torch.bfloat16):
        want = torch.empty(4096, dtype=dt)
        mod.c[(16,)](a, want, backend="interp")
        got = torch.empty(4096, dtype=dt, device="cuda")
        mod.c[(16,)](a.cuda(), got, backend=backend)
        assert torch.equal(got.cpu(), want), dt
    for dt in (torch.float32, torch.float64):
        x = torch.rand(4096, generator=g, dtype=dt) * 4
        want = torch.empty_like(x)
        mod.s[(16,)](x, want, backend="interp")
        got = torch.empty_like(x, device="cuda")
        mod.s[(16,)](x.cuda(), got, backend=backend)
        assert torch.equal(got.cpu(), want), dt


SCALE = """kernel s(x: tensor<f32>[N], a: f32, n: i32) {
    store(x, load(x, tile=[16], at=program_id(0)) * a + cast<f32>(n), at=program_id(0))
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_a_cached_plan_passes_as_they_come_are_checked_like_a_first_launchs(backend):
    """The C launcher's plan is keyed by types: an int past i32 or a float that rounds to inf in f32 go back to the
    Python path, which names the parameter (fifty-second session); a 3-tuple grid with a fraction is refused."""
    k = tle.compile(SCALE).s
    x = torch.ones(64, device="cuda")
    for _ in range(3):  # the second and third launches go through the C launcher
        k[(4,)](x, 2.0, 1, backend=backend)
    assert torch.equal(x, torch.full_like(x, 15.0))
    with pytest.raises(tle.LaunchError, match=r"scalar 'a' = 1e\+300 does not fit f32"):
        k[(4,)](x, 1e300, 1, backend=backend)
    with pytest.raises(tle.LaunchError, match=r"scalar 'n' = 1099511627776 does not fit i32"):
        k[(4,)](x, 2.0, 2 ** 40, backend=backend)
    with pytest.raises(tle.LaunchError, match=r"a grid of 1.5 programs"):
        k[(1.5, 1, 1)](x, 2.0, 1, backend=backend)
    with pytest.raises(tle.LaunchError, match=r"70000 programs along y, more than CUDA launches"):
        k[(1, 70000)](x, 2.0, 1, backend=backend)
    assert torch.equal(x, torch.full_like(x, 15.0))
