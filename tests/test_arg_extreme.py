"""argmax / argmin on the values that make a combine go wrong: NaN, +-inf, -0 against +0, ties, in every order.

The answer is torch's: the first index of the extreme, NaN counting as the extreme for both, -0 equal to +0. Both
lowerings build the pair combine from unordered compares (tle_to_ttir._arg_combine, tle_to_tileir's
arg_extreme); every row here mixes the special values at random, so each pair case meets the combine at every
level of the reduction tree (inside a thread, across lanes, across warps).

A max and an argmax of the same tile (a min and an argmin) are one reduction on both paths, whose carried value is
the max (dialects/tle.py extreme_partner): PAIRED checks both results of it, the max to the bit (NaN if any, +0
over -0)."""
import math
import random

import pytest
import torch

import tle

SRC = """
kernel arg_extreme<N: int = 64, T: dtype = f32>(x: tensor<T>[M, N], imax: tensor<i32>[M], imin: tensor<i32>[M]) {
    let t = load(x, tile=[1, N], at=[program_id(0), 0])
    store(imax, argmax(t, axis=1), at=[program_id(0)])
    store(imin, argmin(t, axis=1), at=[program_id(0)])
}
"""
PAIRED = """
kernel max_argmax<N: int = 64, T: dtype = f32>(x: tensor<T>[M, N], vmax: tensor<T>[M], imax: tensor<i32>[M],
        vmin: tensor<T>[M], imin: tensor<i32>[M]) {
    let t = load(x, tile=[1, N], at=[program_id(0), 0])
    store(vmax, max(t, axis=1), at=[program_id(0)])
    store(imax, argmax(t, axis=1), at=[program_id(0)])
    store(imin, argmin(t, axis=1), at=[program_id(0)])
    store(vmin, min(t, axis=1), at=[program_id(0)])
}
"""
SPECIAL = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5)


def first_extreme(row: list, largest: bool) -> int:
    """The first NaN's index if there is one; else the first index of the largest (smallest) value."""
    for i, v in enumerate(row):
        if math.isnan(v):
            return i
    best = 0
    for i, v in enumerate(row):
        if (v > row[best]) if largest else (v < row[best]):
            best = i
    return best


def extreme(row: list, largest: bool) -> float:
    """max (min) as docs/numerics.md has it: NaN if the row has one, and -0.0 below +0.0."""
    if any(math.isnan(v) for v in row):
        return math.nan
    key = lambda v: (v, math.copysign(1.0, v))  # noqa: E731 (ties of value broken by the sign: -0.0 first)
    return max(row, key=key) if largest else min(row, key=key)


def same_float(got: float, want: float) -> bool:
    return math.isnan(got) if math.isnan(want) else got == want and math.copysign(1, got) == math.copysign(1, want)


def rows(n: int, count: int, seed: int) -> list:
    """Rows drawn from SPECIAL with different weights, so some rows have no NaN, some only ties, some one value."""
    rng = random.Random(seed)
    out = []
    for r in range(count):
        pool = SPECIAL[1:] if r % 3 else SPECIAL  # two rows in three without NaN: the numbers decide
        if r % 5 == 0:
            pool = pool[:3]  # few distinct values: long runs of ties
        out.append([rng.choice(pool) for _ in range(n)])
    return out


def run(backend: str, device: str, dtype: torch.dtype, n: int, seed: int) -> None:
    data = rows(n, 96, seed)
    x = torch.tensor(data, dtype=dtype)  # every value of SPECIAL is exact in f16 and bf16
    kernel = tle.compile(SRC, filename="arg_extreme.tle").arg_extreme
    imax = torch.full((len(data),), -7, dtype=torch.int32, device=device)
    imin = torch.full_like(imax, -7)
    kwargs = {} if device == "cpu" else {"backend": backend}
    kernel[(len(data),)](x.to(device), imax, imin, N=n, **kwargs)  # T read off x
    for r, row in enumerate(data):
        assert imax[r].item() == first_extreme(row, True), (backend, dtype, "argmax", row)
        assert imin[r].item() == first_extreme(row, False), (backend, dtype, "argmin", row)


def run_paired(backend: str, device: str, dtype: torch.dtype, n: int, seed: int) -> None:
    data = rows(n, 96, seed + 1)
    x = torch.tensor(data, dtype=dtype)
    kernel = tle.compile(PAIRED, filename="max_argmax.tle").max_argmax
    vmax = torch.full((len(data),), 7.0, dtype=dtype, device=device)
    vmin = torch.full_like(vmax, 7.0)
    imax = torch.full((len(data),), -7, dtype=torch.int32, device=device)
    imin = torch.full_like(imax, -7)
    kwargs = {} if device == "cpu" else {"backend": backend}
    kernel[(len(data),)](x.to(device), vmax, imax, vmin, imin, N=n, **kwargs)
    for r, row in enumerate(data):
        assert imax[r].item() == first_extreme(row, True), (backend, dtype, "argmax", row)
        assert imin[r].item() == first_extreme(row, False), (backend, dtype, "argmin", row)
        assert same_float(vmax[r].item(), extreme(row, True)), (backend, dtype, "max", vmax[r].item(), row)
        assert same_float(vmin[r].item(), extreme(row, False)), (backend, dtype, "min", vmin[r].item(), row)


DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [32, 1024])
def test_interpreter_takes_torchs_first_extreme(dtype, n):
    run("interp", "cpu", dtype, n, seed=n)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [32, 1024])
def test_gpu_takes_torchs_first_extreme(backend, dtype, n):
    run(backend, "cuda", dtype, n, seed=n)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [32, 1024])
def test_interpreter_max_beside_argmax(dtype, n):
    run_paired("interp", "cpu", dtype, n, seed=n)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [32, 1024])
def test_gpu_max_beside_argmax_is_one_reduction(backend, dtype, n):
    run_paired(backend, "cuda", dtype, n, seed=n)


INT_PAIRED = """
kernel int_max_argmax(x: tensor<i32>[M, 64], vmax: tensor<i32>[M], imax: tensor<i32>[M], vmin: tensor<i32>[M],
        imin: tensor<i32>[M]) {
    let t = load(x, tile=[4, 64], at=[program_id(0), 0])
    store(vmax, max(t, axis=1), at=program_id(0))
    store(imax, argmax(t, axis=1), at=program_id(0))
    store(vmin, min(t, axis=1), at=program_id(0))
    store(imin, argmin(t, axis=1), at=program_id(0))
}
"""


def run_int_paired(backend: str, device: str) -> None:
    """Integers pair the same way (maxsi / maxi as the carried value): few distinct values, so ties everywhere, and
    the type's extremes (a max of INT_MIN only, a min of INT_MAX only)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randint(-3, 3, (10, 64), generator=g, dtype=torch.int32)
    x[8] = -2 ** 31
    x[9] = 2 ** 31 - 1
    outs = [torch.full((10,), 7, dtype=torch.int32, device=device) for _ in range(4)]
    kwargs = {} if device == "cpu" else {"backend": backend}
    tle.compile(INT_PAIRED, filename="int_max_argmax.tle").int_max_argmax[(3,)](x.to(device), *outs, **kwargs)
    rows = x.tolist()
    assert outs[0].cpu().tolist() == [max(r) for r in rows], backend
    assert outs[1].cpu().tolist() == [r.index(max(r)) for r in rows], backend
    assert outs[2].cpu().tolist() == [min(r) for r in rows], backend
    assert outs[3].cpu().tolist() == [r.index(min(r)) for r in rows], backend


def test_interpreter_int_max_beside_argmax():
    run_int_paired("interp", "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_gpu_int_max_beside_argmax_is_one_reduction(backend):
    run_int_paired(backend, "cuda")
