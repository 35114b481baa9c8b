"""sort and topk on the interpreter against torch.sort / torch.topk: every element type they take, tiles of one to
three axes, every k, and the argsort idiom docs/language.md gives (keys that carry indices). Golden IR and the GPU
paths: tests/filecheck/sort.tle and its entry in test_golden_programs.py; routing: tests/lowering."""
from __future__ import annotations

import pytest
import torch

import tle


def _mod(tmp_path, src: str):
    path = tmp_path / "k.tle"
    path.write_text(src)
    return tle.compile(str(path))


def _values(dtype, shape, g):
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g).to(dtype)
        flat = x.view(-1)
        flat[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")]).to(dtype)
        flat[3:6] = torch.tensor([-0.0, 0.0, 1.0]).to(dtype)
        flat[6:9] = 1.0  # ties
        return x
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, shape, generator=g, dtype=torch.int64).to(dtype)
    x.view(-1)[:4] = torch.tensor([info.min, info.max, 0, 0]).to(dtype)
    return x


def _same(got, want):
    """Equal values (NaN equal to NaN), and for floats -0.0 strictly before 0.0 where both occur."""
    if got.is_floating_point():
        return torch.equal(torch.nan_to_num(got.double(), nan=7e300), torch.nan_to_num(want.double(), nan=7e300))
    return torch.equal(got, want)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i32", "i8", "i16", "i64"])
def test_sort_and_topk_match_torch(tmp_path, dtype):
    td = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
          "i32": torch.int32, "i8": torch.int8, "i16": torch.int16, "i64": torch.int64}[dtype]
    mod = _mod(tmp_path, f"""
kernel k(x: tensor<{dtype}>[M, N], up: tensor<{dtype}>[M, N], down: tensor<{dtype}>[M, N],
         t1: tensor<{dtype}>[M, A], t8: tensor<{dtype}>[M, B], all: tensor<{dtype}>[M, N]) {{
    let v = load(x, tile=[4, 32], at=[0, 0])
    store(up, sort(v), at=[0, 0])
    store(down, sort(v, descending=true), at=[0, 0])
    store(t1, topk(v, 1), at=[0, 0])
    store(t8, topk(v, 8), at=[0, 0])
    store(all, topk(v, 32), at=[0, 0])
}}
""")
    g = torch.Generator().manual_seed(3)
    x = _values(td, (4, 32), g)
    up, down, alll = (torch.empty(4, 32, dtype=td) for _ in range(3))
    t1, t8 = torch.empty(4, 1, dtype=td), torch.empty(4, 8, dtype=td)
    mod.k[(1,)](x, up, down, t1, t8, alll)
    if td.is_floating_point:
        # torch leaves -0.0 and 0.0 in either order; tle puts -0.0 first: sort f64 keys that separate them
        key = x.double()
        key = torch.where(torch.signbit(key) & (key == 0), torch.full_like(key, -1e-300), key).sort(dim=1).values
        asc = torch.where(key == -1e-300, torch.full_like(key, -0.0), key).to(td)
    else:
        asc = torch.sort(x, dim=1).values
    desc = asc.flip(1)
    assert _same(up, asc)
    if td.is_floating_point:  # -0.0 before 0.0 (NaNs come out positive: their sign is not compared)
        assert torch.equal(torch.signbit(up) & ~torch.isnan(up), torch.signbit(asc) & ~torch.isnan(asc))
    assert _same(down, desc)
    assert _same(alll, desc)
    assert _same(t8, desc[:, :8]) and _same(t1, desc[:, :1])


def test_one_and_three_axes(tmp_path):
    mod = _mod(tmp_path, """
kernel k(x: tensor<f32>[N], y: tensor<f32>[N], z: tensor<f32>[A, B, C], w: tensor<f32>[A, B, D]) {
    store(y, sort(load(x, tile=[64], at=0)), at=0)
    let t = load(z, tile=[2, 4, 16], at=[0, 0, 0])
    store(w, topk(t, 4), at=[0, 0, 0])
}
""")
    x, z = torch.randn(64), torch.randn(2, 4, 16)
    y, w = torch.empty(64), torch.empty(2, 4, 4)
    mod.k[(1,)](x, y, z, w)
    assert torch.equal(y, x.sort().values)
    assert torch.equal(w, torch.topk(z, 4, dim=-1).values)


def test_argsort_through_keys_that_carry_indices(tmp_path):
    """docs/language.md's idiom: an i64 key of (value bits made monotone, index) sorts by value, then index; its low
    32 bits are torch.sort(stable=True)'s indices."""
    mod = _mod(tmp_path, """
kernel k(x: tensor<f32>[M, N], idx: tensor<i32>[M, N]) {
    let v = load(x, tile=[8, 64], at=[0, 0])
    let b = bitcast<i32>(v)
    let bits = b ^ ((b >> 31) & 0x7FFFFFFF)
    let index = broadcast(reshape(arange(64), [1, 64]), [8, 64])
    let keys = (cast<i64>(bits) << 32) | cast<i64>(index)
    store(idx, cast<i32>(sort(keys)), at=[0, 0])
}
""")
    x = torch.randint(-5, 5, (8, 64)).float() / 2  # many ties: the index decides
    idx = torch.empty(8, 64, dtype=torch.int32)
    mod.k[(1,)](x, idx)
    assert torch.equal(idx.long(), torch.sort(x, dim=1, stable=True).indices)
