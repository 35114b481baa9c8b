"""cat, stack and take, which tle/check.py builds out of joins, splits, reshapes, transposes and (take along an axis
that is not the last, from a 1-D tile, or at a run-time index) a where and a max of the elements' bits: the
interpreter against torch on random tiles of one to three axes, every axis (negative ones too) and several element
types, bit for bit (NaN, infinities and -0.0 among the floats); the IR each builds; cubins of each on both GPU
paths, on the CPU. The errors: tests/check/cat_*.tle, stack_*.tle and take_*.tle."""
from __future__ import annotations

import re
import warnings
import zlib

import pytest
import torch

import tle
from tle.check import load_program
from tle.compiler import compile_kernel
from tileir_available import has_tileiras

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "i8": torch.int8,
         "i64": torch.int64, "bool": torch.int8}  # bool tensors go in and out as i8 (docs/language.md)
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def _random(dtype: str, shape, g):
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g, dtype=torch.int8)
    td = TORCH[dtype]
    if td.is_floating_point:
        x = torch.randn(shape, generator=g).to(td)
        specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0]).to(td)
        flat = x.view(-1)
        picks = torch.randperm(flat.numel(), generator=g)[:len(specials)]
        flat[picks] = specials[:len(picks)]
        return x
    return torch.randint(-1000, 1000, shape, generator=g, dtype=torch.int64).to(td)


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal bits: a NaN is itself, -0.0 is not 0.0."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype in BITS:
        return torch.equal(got.view(BITS[got.dtype]), want.view(BITS[want.dtype]))
    return torch.equal(got, want)


def _along(shape, axis, n):
    """shape with n along axis."""
    out = list(shape)
    out[axis] = n
    return tuple(out)


class _Kernel:
    """Builds a kernel's source: tensor parameters each with dims of its own, tiles loaded whole at 0, and stores
    of expressions into outputs."""

    def __init__(self, dtype: str):
        self.dtype, self.params, self.lets, self.stores, self.outputs = dtype, [], [], [], []

    def _tensor(self, name, shape):
        dims = ", ".join(f"{name.upper()}{i}" for i in range(len(shape)))
        self.params.append(f"{name}: tensor<{'i8' if self.dtype == 'bool' else self.dtype}>[{dims}]")

    def input(self, name, shape):
        self._tensor(name, shape)
        at = ", ".join("0" for _ in shape)
        load = f"load({name}, tile={list(shape)}, at=[{at}])"
        self.lets.append(f"    let {name}_t = {load} != 0" if self.dtype == "bool" else f"    let {name}_t = {load}")

    def output(self, name, shape, expr):
        """Store expr (of `shape`; () for a scalar, stored into a tensor of 1)."""
        self._tensor(name, shape or (1,))
        value = f"cast<i8>({expr})" if self.dtype == "bool" else expr
        at = ", ".join("0" for _ in shape or (1,))
        self.stores.append(f"    store({name}, {value}, at=[{at}])")
        self.outputs.append((name, shape or (1,)))

    def source(self):
        params = ",\n         ".join(self.params + ["k: i32"])
        return f"kernel k({params}) {{\n" + "\n".join(self.lets + self.stores) + "\n}\n"


CASES = [((8,), 0), ((8,), -1), ((4, 8), 0), ((4, 8), 1), ((4, 8), -2), ((2, 4, 8), 0), ((2, 4, 8), 1),
         ((2, 4, 8), 2), ((2, 4, 8), -1), ((16, 2), 1)]


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "bool"])
@pytest.mark.parametrize("shape,axis", CASES, ids=[f"{'x'.join(map(str, s))}-axis{a}" for s, a in CASES])
def test_against_torch(dtype, shape, axis):
    rank = len(shape)
    ax = axis % rank
    n = shape[ax]
    half, quarter = _along(shape, ax, n // 2), _along(shape, ax, max(n // 4, 1))
    kern = _Kernel(dtype)
    for name, s in (("a", shape), ("b", shape), ("h", half), ("q", quarter)):
        kern.input(name, s)
    g = torch.Generator().manual_seed(zlib.crc32(repr((dtype, shape, axis)).encode()))
    a, b, h, q = (_random(dtype, s, g) for s in (shape, shape, half, quarter))
    ta, tb = (x.bool() if dtype == "bool" else x for x in (a, b))
    th, tq = (x.bool() if dtype == "bool" else x for x in (h, q))
    want = {}

    def out(name, expr, value):
        kern.output(name, tuple(value.shape), expr)
        want[name] = value.to(torch.int8) if dtype == "bool" else value

    out("cat2", f"cat(a_t, b_t, axis={axis})", torch.cat([ta, tb], axis))
    out("cat4", f"cat(a_t, b_t, b_t, a_t, axis={axis})", torch.cat([ta, tb, tb, ta], axis))
    if n >= 4:  # lengths n, n/2, n/4, n/4: pairs of equal ones catted, shortest first
        out("mixed", f"cat(a_t, h_t, q_t, q_t, axis={axis})", torch.cat([ta, th, tq, tq], axis))
        out("down", f"concat(h_t, q_t, q_t, axis={axis})", torch.cat([th, tq, tq], axis))
    out("stack2", f"stack(a_t, b_t, axis={axis})", torch.stack([ta, tb], axis))
    order = [ta, tb, tb, ta, ta, ta, tb, tb]
    names = ["a_t" if x is ta else "b_t" for x in order]
    out("stack8", f"stack({', '.join(names)}, axis={axis})", torch.stack(order, axis))
    if axis == 0:  # the new axis last: its own case
        out("stack_last", "stack(a_t, b_t, a_t, b_t, axis=-1)", torch.stack([ta, tb, ta, tb], -1))
    for i, k in enumerate(sorted({0, 1, n // 2 + 1, n - 1, -1, -n} & set(range(-n, n)))):
        out(f"take{i}", f"take(a_t, {k}, axis={axis})", ta.select(ax, k))
    out("run", f"take(a_t, k, axis={axis})", ta.select(ax, 0))  # k a run-time value: its want is set per launch
    mod = tle.compile(kern.source())
    for k in (0, n - 1, -1, -n, n // 2):
        want["run"] = ta.select(ax, k).to(torch.int8) if dtype == "bool" else ta.select(ax, k)
        outs = {name: torch.empty(s, dtype=TORCH[dtype]) for name, s in kern.outputs}
        mod.k[(1,)](a, b, h, q, *outs.values(), k)
        assert mod.k.last_backend == "interp"
        for name, value in want.items():
            assert _same(outs[name].reshape(value.shape), value), (name, k, outs[name], value)


@pytest.mark.parametrize("dtype", ["i8", "bf16", "i64"])
def test_other_element_types(dtype):
    """Narrow and wide integers and bf16: joins move them; the max of a take reads i8, i16 and i64 bits."""
    src = f"""
kernel k(x: tensor<{dtype}>[M, N], c: tensor<{dtype}>[M, N2], s: tensor<{dtype}>[S, M, N],
         r: tensor<{dtype}>[N], l: tensor<{dtype}>[M], d: tensor<{dtype}>[N], n: i64) {{
    let t = load(x, tile=[4, 8], at=[0, 0])
    store(c, cat(t, t, axis=-1), at=[0, 0])
    store(s, stack(t, t, axis=0), at=[0, 0, 0])
    store(r, take(t, 2, axis=0), at=0)
    store(l, take(t, -3, axis=1), at=0)
    store(d, take(t, n, axis=0), at=0)
}}
"""
    g = torch.Generator().manual_seed(1)
    x = _random(dtype, (4, 8), g)
    c, s, r, l, d = (torch.empty(shape, dtype=TORCH[dtype]) for shape in ((4, 16), (2, 4, 8), (8,), (4,), (8,)))
    tle.compile(src).k[(1,)](x, c, s, r, l, d, -1)
    assert _same(c, torch.cat([x, x], -1)) and _same(s, torch.stack([x, x]))
    assert _same(r, x[2]) and _same(l, x[:, -3]) and _same(d, x[-1])


def test_a_run_time_index_out_of_range_fails_the_interpreters_assert():
    mod = tle.compile("""
kernel k(x: tensor<f32>[N], y: tensor<f32>[M], k: i32) {
    store(y, take(load(x, tile=[8], at=0), k), at=0)
}
""")
    x, y = torch.randn(8), torch.empty(1)
    mod.k[(1,)](x, y, -8)
    assert y[0] == x[0]
    for k in (8, -9, 1000):
        with pytest.raises(tle.TleError, match=r"assert failed: take\(\) index out of range for axis 0 of 8 "
                                               r"\(-8 to 7\)"):
            mod.k[(1,)](x, y, k)


def test_a_row_past_the_edge_is_taken_without_a_padding_warning():
    """take() of a row a load padded is padding, as the row itself is: the max that the where form takes it by moves
    one lane and is no reduction of padding (the interpreter's padded-lanes check would say it was)."""
    mod = tle.compile("""
kernel k(x: tensor<f32>[M, N], r: tensor<f32>[N], c: tensor<f32>[M], n: i32) {
    let t = load(x, tile=[8, 8], at=[0, 0], pad=-1.0)
    store(r, take(t, n, axis=0) + take(t, 7, axis=0), at=0)
    store(c, take(t, n, axis=1) + take(t, 7, axis=1), at=0)
}
""")
    x = torch.randn(5, 6)
    r, c = torch.empty(6), torch.empty(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.k[(1,)](x, r, c, 7)
    assert torch.equal(r, torch.full((6,), -2.0)) and torch.equal(c, torch.full((5,), -2.0))


def test_scalars_stack_into_a_tile():
    mod = tle.compile("""
kernel k(x: tensor<f32>[N], y: tensor<f32>[M], z: tensor<i32>[K]) {
    let a = load(x, at=0)
    store(y, stack(a, 2.0, a * 3.0, -0.0), at=0)
    store(z, stack(1, 2, axis=-1), at=0)
}
""")
    x, y, z = torch.tensor([1.5]), torch.empty(4), torch.empty(2, dtype=torch.int32)
    mod.k[(1,)](x, y, z)
    assert _same(y, torch.tensor([1.5, 2.0, 4.5, -0.0])) and z.tolist() == [1, 2]


# ---- what the checker builds ---------------------------------------------------------------------------------------
def _tle_ir(body: str, params: str = "x: tensor<f32>[M, N], y: tensor<f32>[P, Q]") -> str:
    src = f"kernel k({params}) {{\n    let t = load(x, tile=[64, 16], at=[0, 0])\n{body}\n}}\n"
    return compile_kernel(load_program(src, "k.tle"), "k", {}, stop="tle").stages["tle"]


def test_take_along_the_last_axis_is_one_reshape_and_a_split_per_bit():
    """A constant index along the last axis: log2(16) splits of one reshape, no reduction, no transpose; along
    another axis a where and one max (a transpose to split it would go through shared memory)."""
    ir = _tle_ir("    store(y, expand_dims(take(t, 5, axis=1), 1), at=[0, 0])")
    assert ir.count('"tle.split"') == 4 and ir.count('"tle.reshape"') == 1
    assert "tle.reduce" not in ir and "tle.transpose" not in ir
    ir = _tle_ir("    store(y, expand_dims(take(t, 5, axis=0), 0), at=[0, 0])")
    assert ir.count('"tle.reduce"') == 1 and 'kind = "max"' in ir and "tle.split" not in ir
    assert "tle.transpose" not in ir


def test_stack_and_cat_build_one_transpose_at_most():
    """N tiles: N - 1 joins and one transpose (none for a stack along the new last axis, nor for a cat of [.., 1]
    rows or of axes followed only by axes of 1)."""
    body = "    store(y, reshape(stack(t, t, t, t, axis={}), [256, 16]), at=[0, 0])"
    ir = _tle_ir(body.format(0))
    assert ir.count('"tle.join"') == 3 and ir.count('"tle.transpose"') == 1
    ir = _tle_ir(body.format(-1))
    assert ir.count('"tle.join"') == 3 and "tle.transpose" not in ir
    ir = _tle_ir("    store(y, cat(t, t, t, t, axis=1), at=[0, 0])")
    assert ir.count('"tle.join"') == 3 and ir.count('"tle.transpose"') == 1
    ir = _tle_ir("    let c = load(x, tile=[64, 1], at=[0, 0])\n    store(y, cat(c, c, axis=1), at=[0, 0])")
    assert ir.count('"tle.join"') == 1 and "tle.transpose" not in ir


def test_what_each_path_is_given():
    """The ops the desugaring leaves for the lowerings: the native path gets tt.join, tt.trans, tt.reshape and
    tt.split (and a tt.reduce of arith.maxsi for the where form); Tile IR a permute for the cat and extracts for the
    splits."""
    src = """
kernel k(x: tensor<f32>[M, N], c: tensor<f32>[M, N2], r: tensor<f32>[M], l: tensor<f32>[N]) {
    let t = load(x, tile=[16, 8], at=[program_id(0), 0])
    store(c, cat(t, t * 2.0, axis=1), at=[program_id(0), 0])
    store(r, take(t, 5, axis=1), at=program_id(0))
    store(l, take(t, -11, axis=0), at=0)
}
"""
    program = load_program(src, "k.tle")
    ttir = compile_kernel(program, "k", {}, backend="triton", stop="ttir").stages["ttir"]
    assert ttir.count('"tt.join"') == 1 and ttir.count('"tt.split"') == 3 and "arith.maxsi" in ttir
    assert re.search(r'"tt.trans"\(%\d+\) \{order = array<i32: 0, 2, 1>\}', ttir)
    assert re.search(r'"tt.reshape"\(%\d+\) : \(tensor<16x8xf32>\) -> tensor<16x2x2x2xf32>', ttir)
    tileir = compile_kernel(program, "k", {}, backend="tileir", stop="tileir").stages["tileir"]
    assert re.search(r'"cuda_tile.permute"\(%\d+\) \{permutation = array<i32: 0, 2, 1>\}', tileir)
    assert '"cuda_tile.extract"' in tileir and '"cuda_tile.maxi"' in tileir


# ---- both GPU paths, on the CPU --------------------------------------------------------------------------------
GPU_KERNEL = """
kernel k<T: dtype = f32>(x: tensor<T>[M, N], c: tensor<T>[M, N2], m: tensor<T>[M2, N], s: tensor<T>[M, S, N],
                         r: tensor<T>[M], l: tensor<T>[N], d: tensor<T>[N], one: tensor<T>[O], k: i32) {
    let t = load(x, tile=[16, 8], at=[program_id(0), 0])
    let h = load(x, tile=[8, 8], at=[program_id(0), 0])
    store(c, cat(t, t * t, axis=1), at=[program_id(0), 0])
    store(m, cat(t, h, h, axis=0), at=[program_id(0), 0])
    store(s, stack(t, t + t, t, t, axis=1), at=[program_id(0), 0, 0])
    store(r, take(t, 3, axis=-1), at=program_id(0))
    store(l, take(t, -2, axis=0), at=0)
    store(d, take(t, k, axis=0), at=0)
    store(one, take(take(t, 1, axis=0), 7), at=0)
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32"])
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_both_paths_compile_to_a_cubin(backend, dtype):
    if backend == "tileir" and not has_tileiras():
        pytest.skip("tileiras or the pinned cuda-tile bytecode writer is not installed")
    out = compile_kernel(load_program(GPU_KERNEL, "k.tle"), "k", {"T": dtype}, backend=backend, arch="sm_90")
    assert out.backend == backend and out.binary.cubin[:4] == b"\x7fELF"


def test_bool_tiles_compile_on_both_paths():
    src = """
kernel k(x: tensor<i8>[M, N], c: tensor<i8>[M, N2], r: tensor<i8>[M], l: tensor<i8>[N]) {
    let t = load(x, tile=[16, 8], at=[0, 0]) != 0
    store(c, cast<i8>(cat(t, not t, axis=1)), at=[0, 0])
    store(r, cast<i8>(take(t, 3, axis=1)), at=0)
    store(l, cast<i8>(take(t, 3, axis=0)), at=0)
}
"""
    for backend in ("triton", "tileir") if has_tileiras() else ("triton",):
        out = compile_kernel(load_program(src, "k.tle"), "k", {}, backend=backend, arch="sm_90")
        assert out.binary.cubin[:4] == b"\x7fELF"
