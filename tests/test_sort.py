"""sort and topk on the interpreter against torch.sort / torch.topk: every element type they take, tiles of one to
three axes, every k, and argsort / argtopk against torch.sort(stable=True). Golden IR and the GPU
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
         t1: tensor<{dtype}>[M, A], t8: tensor<{dtype}>[M, B], every: tensor<{dtype}>[M, N]) {{
    let v = load(x, tile=[4, 32], at=[0, 0])
    store(up, sort(v), at=[0, 0])
    store(down, sort(v, descending=true), at=[0, 0])
    store(t1, topk(v, 1), at=[0, 0])
    store(t8, topk(v, 8), at=[0, 0])
    store(every, topk(v, 32), at=[0, 0])
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


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i32", "i8"])
def test_argsort_and_argtopk_are_stable_positions(tmp_path, dtype):
    """argsort / argtopk against torch.sort(stable=True)'s indices: ascending, descending (equal values lower
    position first), the first 8 of the descending order; topk's values are the values at argtopk's positions."""
    td = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32, "i8": torch.int8}[dtype]
    mod = _mod(tmp_path, f"""
kernel k(x: tensor<{dtype}>[M, N], up: tensor<i32>[M, N], down: tensor<i32>[M, N], top: tensor<i32>[M, K],
         vals: tensor<{dtype}>[M, K]) {{
    let v = load(x, tile=[8, 64], at=[0, 0])
    store(up, argsort(v), at=[0, 0])
    store(down, argsort(v, descending=true), at=[0, 0])
    store(top, argtopk(v, 8), at=[0, 0])
    store(vals, topk(v, 8), at=[0, 0])
}}
""")
    x = (torch.randint(-6, 6, (8, 64)).float() / (2 if td.is_floating_point else 1)).to(td)  # many ties
    if td.is_floating_point:
        x[0, 3], x[0, 9], x[1, 5], x[1, 6] = float("nan"), float("nan"), -0.0, 0.0
    up, down = torch.empty(8, 64, dtype=torch.int32), torch.empty(8, 64, dtype=torch.int32)
    top, vals = torch.empty(8, 8, dtype=torch.int32), torch.empty(8, 8, dtype=td)
    mod.k[(1,)](x, up, down, top, vals)
    key = x.double()
    key = torch.where(torch.signbit(key) & (key == 0), torch.full_like(key, -1e-300), key)  # -0.0 before 0.0
    key = torch.nan_to_num(key, nan=1e300)  # NaN last
    assert torch.equal(up.long(), torch.sort(key, dim=1, stable=True).indices)
    desc = torch.sort(-key, dim=1, stable=True).indices
    assert torch.equal(down.long(), desc)
    assert torch.equal(top.long(), desc[:, :8])
    assert _same(vals, torch.gather(x, 1, top.long()))


def _network_steps(src: str) -> int:
    """How many network steps (reductions marked NetworkSpan) a checked kernel holds."""
    from tle import typed as T
    from tle.check import check_kernel, load_program
    from tle.diagnostics import NetworkSpan
    k = check_kernel(load_program(src, "k.tle"), "k")
    return sum(1 for n in T.nodes(k.body) if isinstance(n, T.Op) and n.name == "reduce" and
               isinstance(n.span, NetworkSpan))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "i8"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_after_argsort_of_a_let_shares_its_network(tmp_path, dtype, descending):
    """sort(t) after argsort(t) of the same let and order reads its values out of argsort's network (a porter's
    sampler built two); the values are torch.sort's, NaN, -0.0 and ties included."""
    td = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
          "i8": torch.int8}[dtype]
    order = "true" if descending else "false"
    src = f"""
kernel k(x: tensor<{dtype}>[M, N], s: tensor<{dtype}>[M, N], ids: tensor<i32>[M, N]) {{
    let v = load(x, tile=[4, 64], at=[0, 0])
    store(ids, argsort(v, descending={order}), at=[0, 0])
    store(s, sort(v, descending={order}), at=[0, 0])
}}
"""
    alone = src.replace(f"    store(s, sort(v, descending={order}), at=[0, 0])\n", "")
    assert _network_steps(src) == _network_steps(alone)
    mod = _mod(tmp_path, src)
    x = (torch.randint(-6, 6, (4, 64)).float() / (2 if td.is_floating_point else 1)).to(td)
    if td.is_floating_point:
        x[0, 3], x[0, 9], x[1, 5], x[1, 6] = float("nan"), float("nan"), -0.0, 0.0
    s, ids = torch.empty(4, 64, dtype=td), torch.empty(4, 64, dtype=torch.int32)
    mod.k[(1,)](x, s, ids)
    assert _same(s, torch.gather(x, 1, ids.long()))
    want = torch.sort(x.float(), dim=1, descending=descending, stable=True).values.to(td)
    assert _same(s, want)


def _networks(src: str) -> int:
    """How many top-k networks a checked kernel holds: each ends in a halving, a max along an axis of 2."""
    from tle import typed as T
    from tle.check import check_kernel, load_program
    k = check_kernel(load_program(src, "k.tle"), "k")
    return sum(1 for n in T.nodes(k.body) if isinstance(n, T.Op) and n.name == "reduce"
               and n.attrs["kind"] == "max" and n.args[0].type.shape[1] == 2) // 3  # 64 -> 8: three halvings


@pytest.mark.parametrize("body,networks", [
    ("let t = v\n    store(ids, argtopk(t, 8), at=[0, 0])\n    store(top, topk(t, 8), at=[0, 0])", 1),
    ("let t = v\n    store(top, topk(t, 8), at=[0, 0])\n    store(ids, argtopk(t, 8), at=[0, 0])", 2),  # topk first
    ("var t = v\n    store(ids, argtopk(t, 8), at=[0, 0])\n    store(top, topk(t, 8), at=[0, 0])", 2),  # a var
    ("let t = v\n    if M > 0 {\n        store(ids, argtopk(t, 8), at=[0, 0])\n    }\n"
     "    store(top, topk(t, 8), at=[0, 0])", 2),                                   # argtopk in another block
])
def test_topk_after_argtopk_of_a_let_shares_its_network(tmp_path, body, networks):
    """topk(t, k) after argtopk(t, k) of the same let in the same block reads its values out of argtopk's network;
    otherwise it builds its own. Either way the values are the values at argtopk's positions."""
    src = f"""
kernel k(x: tensor<f32>[M, N], top: tensor<f32>[M, K], ids: tensor<i32>[M, K]) {{
    let v = load(x, tile=[4, 64], at=[0, 0])
    {body}
}}
"""
    assert _networks(src) == networks
    mod = _mod(tmp_path, src)
    x = torch.randint(-6, 6, (4, 64)).float() / 2
    top, ids = torch.empty(4, 8), torch.empty(4, 8, dtype=torch.int32)
    mod.k[(1,)](x, top, ids)
    assert torch.equal(top, torch.gather(x, 1, ids.long()))
    assert torch.equal(top, torch.topk(x, 8, dim=1).values)
