"""num_stages when the caller gives none (tle/compiler.py default_num_stages), and the loops that then go to Triton
without a tt.num_stages of their own (lowering/tle_to_ttir.py, _for). A loop that holds a dot and asks for the
kernel-wide depth leaves its pipelining to Triton's kernel-wide option, which stages only the dot's operand loads;
with the loop attribute Triton 3.6 stages every load of the loop (a block-scaled product's scales too)."""
from __future__ import annotations

import os
import re

import pytest

from tle.check import check_kernel, load_program
from tle.compiler import compile_kernel, default_num_stages
from tle.abi import default_spec
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tle_to_ttir import dot_loop_stages, tle_to_ttir

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def module_of(src: str, consts: dict | None = None, name: str = "k"):
    k = check_kernel(load_program(src, "k.tle"), name, consts or {})
    return ast_to_tle(k, default_spec(k))


def example(name: str, consts: dict | None = None):
    with open(os.path.join(EXAMPLES, f"{name}.tle")) as f:
        return module_of(f.read(), consts, name)


SCALED = """
kernel k<BM: int = 64, BN: int = 64, BK: int = 32, S: int = 4>(a: tensor<f16>[M, K], b: tensor<f16>[K, N],
        s: tensor<f32>[M, KB], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=S) {
        acc += dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]))
               * load(s, tile=[BM, 1], at=[program_id(0), k])
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""

STREAM = """
kernel k<B: int = 128>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    var acc = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) pipeline(stages=3) {
        acc += load(x, tile=[1, B], at=[program_id(0), j])
    }
    store(y, sum(acc, axis=1), at=[program_id(0)])
}
"""

DOT_IN_IF = """
kernel k<B: int = 64>(a: tensor<f16>[M, M], c: tensor<f32>[M, M]) {
    var acc = zeros<f32>[B, B]
    for k in range(cdiv(M, B)) pipeline(stages=2) {
        let t = load(a, tile=[B, B], at=[0, k])
        if k > 0 {
            acc = dot(t, t, acc)
        }
    }
    store(c, acc, at=[0, 0])
}
"""

TWO_LOOPS = SCALED.replace("    store(c, acc", """    for k in range(cdiv(K, BK)) pipeline(stages=2) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]), acc)
    }
    store(c, acc""")


@pytest.mark.parametrize("module,depths", [
    (lambda: module_of(SCALED), {4}),
    (lambda: module_of(SCALED, {"S": 2}), {2}),
    (lambda: example("matmul_grouped"), {3}),
    (lambda: example("matmul_grouped", {"STAGES": 5}), {5}),
    (lambda: example("attention"), {3}),
    (lambda: example("layernorm"), set()),     # no dot
    (lambda: module_of(STREAM), set()),        # pipelined, but no dot
    (lambda: module_of(DOT_IN_IF), set()),     # the dot is in an if: Triton's pipeliner looks at the loop's own ops
    (lambda: module_of(TWO_LOOPS), {2, 4}),
])
def test_dot_loop_stages(module, depths):
    assert dot_loop_stages(module()) == depths


def test_default_num_stages_is_the_dot_loops_depth_where_they_agree():
    assert default_num_stages(module_of(SCALED)) == 4
    assert default_num_stages(module_of(STREAM)) == 3   # Triton's own default
    assert default_num_stages(module_of(TWO_LOOPS)) == 3


def _loop_stages(ttir: str) -> list[int]:
    return [int(n) for n in re.findall(r"tt\.num_stages = (\d+) : i32", ttir)]


def test_a_dot_loop_at_the_kernel_wide_depth_loses_its_attribute():
    assert _loop_stages(tle_to_ttir(module_of(SCALED), num_stages=4)) == []
    assert _loop_stages(tle_to_ttir(module_of(SCALED), num_stages=2)) == [4]   # another depth: its own stays
    assert _loop_stages(tle_to_ttir(module_of(STREAM), num_stages=3)) == [3]   # without a dot Triton needs it
    assert _loop_stages(tle_to_ttir(module_of(DOT_IN_IF), num_stages=2)) == [2]
    assert sorted(_loop_stages(tle_to_ttir(module_of(TWO_LOOPS), num_stages=3))) == [2, 4]


def test_the_compiler_compiles_with_it_and_an_explicit_value_wins():
    program = load_program(SCALED, "k.tle")
    auto = compile_kernel(program, "k", {}, backend="triton")
    assert auto.binary.extra["num_stages"] == 4 and _loop_stages(auto.stages["ttir"]) == []
    # The scale [64, 1] is a plain load: no shared-memory staging for it
    assert not re.search(r"async_copy_global_to_local [^\n]*tensor<64x1x!tt\.ptr<f32>", auto.stages["ttgir"])
    two = compile_kernel(program, "k", {}, backend="triton", num_stages=2)
    assert two.binary.extra["num_stages"] == 2 and _loop_stages(two.stages["ttir"]) == [4]
    assert re.search(r"async_copy_global_to_local [^\n]*tensor<64x1x!tt\.ptr<f32>", two.stages["ttgir"])


def test_the_runtime_passes_none_unless_given():
    torch = pytest.importorskip("torch")
    import tle
    k = tle.compile(os.path.join(EXAMPLES, "matmul.tle")).matmul
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    for options in ({}, {"num_stages": 2}):
        c = torch.empty(64, 64, dtype=torch.float16)
        k.launch((1, 1), a, b, c, BM=64, BN=64, BK=32, **options)
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
    assert sorted((key[5] for key in k._entries), key=str) == [2, None]
