"""num_warps when the caller gives none (tle/compiler.py default_num_warps): 8 for a kernel whose dot accumulates
128 x 256 elements or more (a dot added into another accumulator counts both), else 4; tlec, the compiler and the
runtime all resolve it the same way."""
from __future__ import annotations

import os

import pytest

from tle.check import check_kernel, load_program
from tle.compiler import compile_kernel, default_num_warps

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def checked(example: str, consts: dict | None = None):
    with open(os.path.join(EXAMPLES, f"{example}.tle")) as f:
        program = load_program(f.read(), f"{example}.tle")
    return program, check_kernel(program, example, consts or {})


@pytest.mark.parametrize("example,consts,warps", [
    ("matmul", {}, 4),                                  # 128 x 128 accumulator
    ("matmul", {"BM": 128, "BN": 256}, 8),              # 128 x 256: 256 f32 accumulators a thread on 4 warps
    ("matmul", {"BM": 256, "BN": 128}, 8),
    ("matmul_grouped", {}, 8),                          # declared BM=128, BN=256
    ("matmul_splitk", {}, 4),
    ("layernorm", {"BLOCK": 8192}, 4),                  # no dot: rows of any width
    ("vector_add", {}, 4),
])
def test_default_num_warps_follows_the_widest_dot(example, consts, warps):
    assert default_num_warps(checked(example, consts)[1]) == warps


BLOCK_SCALED = """
kernel k<BM: int = 128, BN: int = 128, BK: int = 128>(x: tensor<f8e4m3>[M, K], w: tensor<f8e4m3>[N, K],
        sx: tensor<f32>[M, KB], y: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let part = dot(load(x, tile=[BM, BK], at=[program_id(0), k]), transpose(load(w, tile=[BN, BK], at=[0, k])))
        acc += part * load(sx, tile=[BM, 1], at=[program_id(0), k])
    }
    store(y, acc, at=[program_id(0), 0])
}
"""


@pytest.mark.parametrize("variant,warps", [
    (BLOCK_SCALED, 8),                                           # part and acc: 2 x 128 x 128 live at once
    (BLOCK_SCALED.replace("BN: int = 128", "BN: int = 64"), 4),  # 2 x 128 x 64
    (BLOCK_SCALED.replace("acc += part *", "acc = part *"), 4),  # acc is not read: one tile
    (BLOCK_SCALED.replace("let part = dot(", "acc += dot(").replace(
        "        acc += part * load(sx, tile=[BM, 1], at=[program_id(0), k])\n", ""), 8),  # 8-bit: Triton keeps both
    (BLOCK_SCALED.replace("f8e4m3", "f16").replace("let part = dot(", "acc += dot(").replace(
        "        acc += part * load(sx, tile=[BM, 1], at=[program_id(0), k])\n", ""), 4),  # folded: dot(x, w^T, acc)
])
def test_a_dot_added_into_an_accumulator_counts_both(variant, warps):
    """`acc += dot(a, b) * s` (a block-scaled product) keeps the dot's own tile and acc live: at 128x128 that is
    128 x 256 accumulator elements, and on 4 warps ptxas spilled (the probe's linear_fp8_block)."""
    assert default_num_warps(check_kernel(load_program(variant, "k.tle"), "k", {})) == warps
    assert default_num_warps(checked("attention")[1]) == 4  # its s = dot(q, k^T) is not added into a var


def test_the_compiler_uses_it_and_an_explicit_value_wins():
    program, _ = checked("matmul_grouped")
    auto = compile_kernel(program, "matmul_grouped", {}, backend="triton", stop="ttgir")
    assert '"ttg.num-warps" = 8' in auto.stages["ttgir"]
    four = compile_kernel(program, "matmul_grouped", {}, backend="triton", stop="ttgir", num_warps=4)
    assert '"ttg.num-warps" = 4' in four.stages["ttgir"]


def test_the_runtime_resolves_it_per_constants():
    torch = pytest.importorskip("torch")
    import tle
    k = tle.compile(os.path.join(EXAMPLES, "matmul.tle")).matmul
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    # The interpreter runs CPU tensors; the entry key still records the num_warps a GPU launch would compile with.
    for bm, bn in ((64, 64), (128, 256)):
        c = torch.empty(64, 64, dtype=torch.float16)
        k.launch((1, 1), a.half(), b.half(), c, BM=bm, BN=bn, BK=32)
        torch.testing.assert_close(c.float(), a.half().float() @ b.half().float(), rtol=1e-2, atol=1e-1)
    assert sorted(key[4] for key in k._entries) == [4, 8]
