"""rand / randint / randn / umulhi on the interpreter: the same numbers as Triton's tl.rand family, bit for bit.

The reference is examples/reference.py's numpy Philox. It is checked here against Triton itself (tl.randint,
tl.rand, tl.randn run by Triton's CPU interpreter in a subprocess), so a mistake shared by tle and the reference
cannot hide. Golden IR and the GPU paths: tests/filecheck/random.tle and its entries in test_golden_programs.py.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tle
from tle import typed as T
from tle.check import check_kernel, load_program

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import reference as ref  # noqa: E402

# Triton's own generators: in a subprocess on its CPU interpreter (triton_numbers), and compiled for the GPU
# (test_gpu_numbers_are_tritons_tl_rand), from this one source.
_TRITON_KERNELS = r"""
import triton
import triton.language as tl


@triton.jit
def _store4(ptr, q, m, a, b, c, d):  # word w of offset q at 4 * q + w, as tle's words=4 reshaped
    tl.store(ptr + 4 * q, a, mask=m)
    tl.store(ptr + 4 * q + 1, b, mask=m)
    tl.store(ptr + 4 * q + 2, c, mask=m)
    tl.store(ptr + 4 * q + 3, d, mask=m)


@triton.jit
def singles(seed, bits, u, z, wide, r7, N, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < N
    tl.store(bits + off, tl.randint(seed, off), mask=m)
    tl.store(u + off, tl.rand(seed, off), mask=m)
    tl.store(z + off, tl.randn(seed, off), mask=m)
    tl.store(wide + off, tl.randint(seed, off.to(tl.int64) * 65537 + 3000000000), mask=m)
    tl.store(r7 + off, tl.randint(seed, off, n_rounds=7), mask=m)


@triton.jit
def fours(seed, bits, u, z, N, BLOCK: tl.constexpr):
    q = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = q < N
    i0, i1, i2, i3 = tl.randint4x(seed, q)
    _store4(bits, q, m, i0, i1, i2, i3)
    f0, f1, f2, f3 = tl.rand4x(seed, q)
    _store4(u, q, m, f0, f1, f2, f3)
    n0, n1, n2, n3 = tl.randn4x(seed, q)
    _store4(z, q, m, n0, n1, n2, n3)
"""

_TRITON_INTERPRETED = _TRITON_KERNELS + r"""
import json, sys, torch
out = {}
for seed in json.loads(sys.argv[1]):
    n = 300
    one = [torch.empty(n, dtype=torch.int32), torch.empty(n), torch.empty(n), torch.empty(n, dtype=torch.int32),
           torch.empty(n, dtype=torch.int32)]
    four = [torch.empty(4 * n, dtype=torch.int32), torch.empty(4 * n), torch.empty(4 * n)]
    singles[(3,)](seed, *one, n, BLOCK=128)
    fours[(3,)](seed, *four, n, BLOCK=128)
    out[str(seed)] = [x.tolist() for x in one + four]
print(json.dumps(out))
"""

SEEDS = [0, 12345, -5, 2 ** 31 - 1, 2 ** 40 + 3, -(2 ** 62) - 7]


def _mod(tmp_path, src: str, name: str = "k"):
    path = tmp_path / f"{name}.tle"
    path.write_text(src)
    return tle.compile(str(path))


@pytest.fixture(scope="module")
def triton_numbers():
    """Triton's own numbers for SEEDS, from its CPU interpreter (TRITON_INTERPRET=1, a fresh process: the flag is
    read when triton.jit decorates)."""
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-c", _TRITON_INTERPRETED, json.dumps(SEEDS)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_is_tritons_philox(triton_numbers, seed):
    i32, f32, normal, wide, r7, i4, f4, n4 = triton_numbers[str(seed)]
    off = torch.arange(300, dtype=torch.int32)
    assert ref.philox_randint(seed, off).tolist() == i32
    assert ref.philox_rand(seed, off).tolist() == f32
    assert ref.philox_randint(seed, off.to(torch.int64) * 65537 + 3000000000).tolist() == wide
    assert ref.philox_randint(seed, off, rounds=7).tolist() == r7
    # randn: Triton's interpreter computes log/sqrt/cos in numpy f32; the reference in f64 from the same uniforms
    torch.testing.assert_close(ref.philox_randn(seed, off).float(), torch.tensor(normal), rtol=1e-5, atol=1e-5)
    # the four-word forms: randint4x, rand4x, randn4x, word w of offset i at 4 * i + w
    assert ref.philox_randint(seed, off, words=4).flatten().tolist() == i4
    assert ref.philox_rand(seed, off, words=4).flatten().tolist() == f4
    torch.testing.assert_close(ref.philox_randn(seed, off, words=4).flatten().float(), torch.tensor(n4),
                               rtol=1e-5, atol=1e-5)


_ALL = """
kernel k<BLOCK: int = 128>(bits: tensor<i32>[N], u: tensor<f32>[N], z: tensor<f32>[N], seed: i64) {
    let off = program_id(0) * BLOCK + arange(BLOCK)
    store(bits, randint(seed, off), at=program_id(0))
    store(u, rand(seed, off), at=program_id(0))
    store(z, randn(seed, off), at=program_id(0))
}
"""


@pytest.mark.parametrize("seed", SEEDS)
def test_interpreter_matches_the_reference(tmp_path, seed):
    mod = _mod(tmp_path, _ALL)
    n = 300
    bits, u, z = torch.empty(n, dtype=torch.int32), torch.empty(n), torch.empty(n)
    mod.k[(3,)](bits, u, z, seed)
    off = torch.arange(n, dtype=torch.int32)
    assert torch.equal(bits, ref.philox_randint(seed, off))
    assert torch.equal(u, ref.philox_rand(seed, off))
    torch.testing.assert_close(z.double(), ref.philox_randn(seed, off), rtol=1e-6, atol=1e-6)


_WORDS = """
kernel k<B: int = 64>(bits: tensor<i32>[N], u: tensor<f32>[N], z: tensor<f32>[N], one: tensor<f32>[K], seed: i64) {
    let off = program_id(0) * B + arange(B)
    store(bits, reshape(randint(seed, off, words=4), [4 * B]), at=program_id(0))
    store(u, reshape(rand(seed, off, words=4), [4 * B]), at=program_id(0))
    store(z, reshape(randn(seed, off, words=4), [4 * B]), at=program_id(0))
    store(one, rand(seed, 5, words=4), at=0)
}
"""


@pytest.mark.parametrize("seed", [99, -(2 ** 40)])
def test_words_4_is_all_four_words_in_order(tmp_path, seed):
    """words=4 appends an axis of four: element [i, w] is word w of offset i (Triton's randint4x etc.); a scalar
    offset gives a tile of four."""
    mod = _mod(tmp_path, _WORDS)
    n = 4 * 64 * 3
    bits, u, z, one = torch.empty(n, dtype=torch.int32), torch.empty(n), torch.empty(n), torch.empty(4)
    mod.k[(3,)](bits, u, z, one, seed)
    off = torch.arange(64 * 3, dtype=torch.int32)
    assert torch.equal(bits, ref.philox_randint(seed, off, words=4).flatten())
    assert torch.equal(u, ref.philox_rand(seed, off, words=4).flatten())
    torch.testing.assert_close(z.double(), ref.philox_randn(seed, off, words=4).flatten(), rtol=1e-6, atol=1e-6)
    assert torch.equal(one, ref.philox_rand(seed, np.array([5], np.int32), words=4).flatten())


def test_join_stacks_along_a_new_last_axis(tmp_path):
    """join(a, b): promoted and broadcast like a binary op, then side by side; two scalars give a tile of 2."""
    mod = _mod(tmp_path, """
kernel k(x: tensor<f32>[R, C], i: tensor<i32>[N], out: tensor<f32>[M], pair: tensor<i32>[K]) {
    let a = load(x, tile=[8, 4], at=[0, 0])
    let b = reshape(load(i, tile=[4], at=0), [1, 4])
    store(out, reshape(join(a, b), [64]), at=0)
    store(pair, join(program_id(0), 7), at=0)
}
""")
    x, i = torch.randn(32), torch.arange(4, dtype=torch.int32) * 10
    out, pair = torch.empty(64), torch.empty(2, dtype=torch.int32)
    mod.k[(1,)](x.reshape(8, 4), i, out, pair)
    a, b = x.reshape(8, 4), i.float().reshape(1, 4).expand(8, 4)
    assert torch.equal(out, torch.stack([a, b], -1).reshape(64))
    assert pair.tolist() == [0, 7]


def test_a_scalar_offset_gives_a_scalar_and_one_round_broadcasts(tmp_path):
    """A scalar offset gives one number; with rounds=1 the first word depends on the key alone, and is still a tile
    of the offsets' shape."""
    mod = _mod(tmp_path, """
kernel k(one: tensor<i32>[K], r1: tensor<i32>[M, N], seed: i32) {
    let off = reshape(arange(4), [4, 1]) * 8 + reshape(arange(8), [1, 8])
    store(one, full<i32>[1](randint(seed, 77)), at=0)
    store(r1, randint(seed, off, rounds=1), at=[0, 0])
}
""")
    one, r1 = torch.empty(1, dtype=torch.int32), torch.empty(4, 8, dtype=torch.int32)
    mod.k[(1,)](one, r1, -9)
    assert one.item() == ref.philox_randint(-9, np.array([77], dtype=np.int32)).item()
    assert torch.equal(r1, ref.philox_randint(-9, torch.arange(32, dtype=torch.int32).reshape(4, 8), rounds=1))


def test_constant_seed_and_offsets_fold_at_compile_time():
    """With a literal seed and offset, every round folds: the checked kernel holds the final word as a constant."""
    k = check_kernel(load_program("kernel k(y: tensor<i32>[N]) { let r = randint(42, 7)\n"
                                  "store(y, full<i32>[1](r), at=0) }", "t.tle"), "k")
    assert [n for n in T.nodes(k.body) if isinstance(n, T.Op) and n.name == "umulhi"] == []
    (store,) = k.body  # no temporaries: nothing was left to compute at run time

    def consts(e):
        return [e.value] if isinstance(e, T.Const) else [v for a in getattr(e, "args", []) for v in consts(a)]
    assert ref.philox_randint(42, np.array([7], np.int32)).item() in consts(store.expr)


def test_rand_is_in_the_unit_interval_and_randn_is_normal(tmp_path):
    mod = _mod(tmp_path, _ALL)
    n = 1 << 16
    bits, u, z = torch.empty(n, dtype=torch.int32), torch.empty(n), torch.empty(n)
    mod.k[(n // 128,)](bits, u, z, 2026)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    assert abs(z.mean().item()) < 0.02 and abs(z.std().item() - 1.0) < 0.02
    assert len(set(bits.tolist())) > n - 5  # 32-bit words: collisions are rare


def test_umulhi_is_the_unsigned_high_word(tmp_path):
    mod = _mod(tmp_path, """
kernel k(a: tensor<i32>[N], b: tensor<i32>[N], h: tensor<i32>[N], c: tensor<i32>[N]) {
    let x = load(a, tile=[256], at=0)
    store(h, umulhi(x, load(b, tile=[256], at=0)), at=0)
    store(c, umulhi(x, 0xCD9E8D57) + umulhi(4000000000, 4000000000), at=0)
}
""")
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-2 ** 31, 2 ** 31, (256,), generator=g, dtype=torch.int64)
    b = torch.randint(-2 ** 31, 2 ** 31, (256,), generator=g, dtype=torch.int64)
    a[:4] = torch.tensor([-1, -2 ** 31, 2 ** 31 - 1, 0])
    b[:4] = torch.tensor([-1, -1, 2 ** 31 - 1, -1])
    h, c = torch.empty(256, dtype=torch.int32), torch.empty(256, dtype=torch.int32)
    mod.k[(1,)](a.to(torch.int32), b.to(torch.int32), h, c)

    def hi(x, y):  # Python integers: exact
        return [((int(p) & 0xFFFFFFFF) * (int(q) & 0xFFFFFFFF)) >> 32 for p, q in zip(x, y)]

    def i32(v):
        return [w - (1 << 32) if w >= 1 << 31 else w for w in v]
    assert h.tolist() == i32(hi(a, b))
    folded = (4000000000 * 4000000000) >> 32
    assert c.tolist() == i32([(w + folded) & 0xFFFFFFFF for w in hi(a, [0xCD9E8D57] * 256)])


def test_the_dropout_example_keeps_what_triton_keeps():
    """examples/dropout.tle on the interpreter against the reference mask (the same as tl.rand's, above)."""
    case = ref.CASES["dropout"]
    mod = tle.compile(os.path.join(ROOT, "examples", "dropout.tle"))
    args, grid, consts, want, outputs = case.make("cpu", torch.float32, (5000,))
    mod.dropout[grid](*args, **consts)
    kept = outputs(args)[0] != 0
    expected = want(args)[0]
    assert torch.equal(kept, expected != 0)
    assert 0.25 < 1 - kept.float().mean().item() < 0.35  # p = 0.3 of the elements dropped
    torch.testing.assert_close(outputs(args)[0], expected, rtol=1e-6, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_gpu_numbers_are_tritons_tl_rand(tmp_path, backend):
    """On the GPU, on either path: the words and uniforms of Triton's own tl.randint / tl.rand, compiled by Triton
    for this GPU, bit for bit; randn within f32 rounding of tl.randn (tle's sqrt is IEEE, Triton's approximate)."""
    pytest.importorskip("triton")
    (tmp_path / "tri_random.py").write_text(_TRITON_KERNELS)  # triton.jit reads its kernels' source from a file
    spec = importlib.util.spec_from_file_location("tri_random", tmp_path / "tri_random.py")
    tri = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tri)
    mod = _mod(tmp_path, _ALL)
    words = _mod(tmp_path, _WORDS, "words")
    n = 100_000
    for seed in (12345, -5, 2 ** 40 + 3):
        # words=4 against randint4x / rand4x / randn4x: 64 offsets a program, four words each
        m4 = 4 * 64 * 100
        outs = [[torch.empty(m4, dtype=torch.int32, device="cuda"), torch.empty(m4, device="cuda"),
                 torch.empty(m4, device="cuda")] for _ in range(2)]
        words.k[(100,)](*outs[0], torch.empty(4, device="cuda"), seed, backend=backend)
        tri.fours[(100,)](seed, *outs[1], 64 * 100, BLOCK=64)
        assert torch.equal(outs[0][0], outs[1][0]), f"seed {seed}: randint words=4 differs"
        assert torch.equal(outs[0][1], outs[1][1]), f"seed {seed}: rand words=4 differs"
        torch.testing.assert_close(outs[0][2], outs[1][2], rtol=1e-5, atol=2e-5)
        outs = [[torch.empty(n, dtype=torch.int32, device="cuda"), torch.empty(n, device="cuda"),
                 torch.empty(n, device="cuda")] for _ in range(2)]
        mod.k[(n // 128 + 1,)](*outs[0], seed, backend=backend)
        spare = [torch.empty(n, dtype=torch.int32, device="cuda") for _ in range(2)]
        tri.singles[(n // 128 + 1,)](seed, *outs[1], *spare, n, BLOCK=128)
        assert mod.k.last_backend == backend
        assert torch.equal(outs[0][0], outs[1][0]), f"seed {seed}: randint differs"
        assert torch.equal(outs[0][1], outs[1][1]), f"seed {seed}: rand differs"
        torch.testing.assert_close(outs[0][2], outs[1][2], rtol=1e-5, atol=2e-5)
