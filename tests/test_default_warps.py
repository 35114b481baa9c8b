"""num_warps when the caller gives none (tle/compiler.py default_num_warps): 8 for a kernel whose dot accumulates
128 x 256 elements or more (a dot added into another accumulator counts both), 16 for a kernel without a dot whose
largest tile has more than 16,384 elements, 1 for one whose largest tile has at most 128, else 4; tlec, the compiler
and the runtime all resolve it the same way."""
from __future__ import annotations

import os

import pytest

from tle.check import check_kernel, load_program
from tle.compiler import compile_kernel, default_num_warps, num_warps_choice

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
    ("layernorm", {"BLOCK": 8192}, 4),                  # no dot: 4 up to 8,192 elements a tile
    ("softmax", {"BLOCK": 16384}, 8),                   # 8 up to 16,384
    ("softmax", {"BLOCK": 32768}, 32),                  # a reduction up to 32,768: 32, as the register file fills
    ("layernorm", {"BLOCK": 65536}, 16),                # more: 16 (on 4 warps, 512 values a thread spill)
    ("cumsum", {"BLOCK": 32768}, 8),                    # a scan: 128 values a thread
    ("vector_add", {}, 4),
    ("vector_add", {"BLOCK": 128}, 1),                  # no dot, at most 128 elements: one warp holds the tile
    ("softmax", {"BLOCK": 64}, 1),                      # and reduces it with shuffles alone
    ("vector_add", {"BLOCK": 256}, 4),
    ("matmul", {"BM": 16, "BN": 16, "BK": 16}, 4),      # a dot, however small, keeps 4
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


def test_the_runtime_leaves_the_default_to_the_compiler():
    """A launch without num_warps keys its binary by None, as it does num_stages: the compiler works the default out
    per constants (the tests above) and may double it where ptxas spills a full-precision f32 dot
    (tests/test_triton_spills.py), so a default never shares a binary with a num_warps the caller gives."""
    torch = pytest.importorskip("torch")
    import tle
    k = tle.compile(os.path.join(EXAMPLES, "matmul.tle")).matmul
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    for bm, bn, options in ((64, 64, {}), (128, 256, {}), (64, 64, {"num_warps": 4})):
        c = torch.empty(64, 64, dtype=torch.float16)
        k.launch((1, 1), a.half(), b.half(), c, BM=bm, BN=bn, BK=32, **options)
        torch.testing.assert_close(c.float(), a.half().float() @ b.half().float(), rtol=1e-2, atol=1e-1)
    assert sorted((key[4] for key in k._entries), key=str) == [4, None, None]


def checked_in(example: str, kernel: str, consts: dict):
    path = os.path.join(EXAMPLES, f"{example}.tle")  # the full path: attention_bwd.tle imports attention.tle
    with open(path) as f:
        return check_kernel(load_program(f.read(), path), kernel, consts)


@pytest.mark.parametrize("kernel,consts,warps", [
    ("attention_bwd_dkdv", {"BN": 128}, 8),               # four 128x64 products in one iteration: 32,768 live
    ("attention_bwd_dkdv", {"BM": 128, "D": 128}, 8),     # four 64x128 products
    ("attention_bwd_dkdv", {"D": 128}, 4),                # 24,576: the example's 64x64 tiles
    ("attention_bwd_dq", {"BM": 128, "BN": 128}, 8),      # 128x128 twice and 128x64: 40,960
    ("attention_bwd_dq", {"BM": 128}, 4),                 # 3 x 128x64: 24,576
])
def test_a_loop_with_several_dots_holds_all_their_results(kernel, consts, warps):
    """One iteration of attention's backward holds its four products at once (H200: dk/dv at 64x128 tiles ran
    1961.6 us on 4 warps and 684.7 on 8; at the example's 64x64, 8 warps were 1.7x slower)."""
    assert default_num_warps(checked_in("attention_bwd", kernel, consts)) == warps


def two_dots(body: str, prelude: str = "") -> str:
    """A kernel with two 128x128 f32 accumulators, acc and acc2, and `body` as its loops."""
    return prelude + f"""
kernel k<BM: int = 128, BN: int = 128, BK: int = 64>(
        x: tensor<f16>[M, K], w: tensor<f16>[K, N], y: tensor<f32>[M, N], z: tensor<f32>[M, N]) {{
    var acc = zeros<f32>[BM, BN]
    var acc2 = zeros<f32>[BM, BN]
{body}
    store(y, acc, at=[program_id(0), 0])
    store(z, acc2, at=[program_id(0), 0])
}}
"""


def loop(*lines: str) -> str:
    return "\n".join(["for k in range(cdiv(K, BK)) {", *(f"    {x}" for x in lines), "}"])


def indent(text: str) -> str:
    return "\n".join(f"    {x}" for x in text.splitlines())


X, W0, W1 = ("load(x, tile=[BM, BK], at=[program_id(0), k])", "load(w, tile=[BK, BN], at=[k, 0])",
             "load(w, tile=[BK, BN], at=[k, 1])")
INTO_ACC, INTO_ACC2 = f"acc = dot({X}, {W0}, acc)", f"acc2 = dot({X}, {W1}, acc2)"


@pytest.mark.parametrize("variant,warps", [
    # both accumulate into acc: one 128x128 tile (as an int4 product's two halves do)
    (two_dots(indent(loop(INTO_ACC, f"acc = dot({X}, {W1}, acc)"))), 4),
    # the same through a fn: each call's acc parameter is acc
    (two_dots(indent(loop(f"acc = step({X}, {W0}, acc)", f"acc = step({X}, {W1}, acc)")),
              prelude="fn step(a, b, acc) {\n    return dot(a, b, acc)\n}\n"), 4),
    # acc and acc2: two 128x128 tiles live together, as attention's dk and dv
    (two_dots(indent(loop(INTO_ACC, INTO_ACC2))), 8),
    # each in a loop of its own, one after the other: never live together
    (two_dots(indent(loop(INTO_ACC) + "\n" + loop(INTO_ACC2))), 4),
    # and those two loops inside one more: its iteration holds neither at once
    (two_dots(indent("for r in range(2) {\n" + indent(loop(INTO_ACC) + "\n" + loop(INTO_ACC2)) + "\n}")), 4),
])
def test_dots_into_one_accumulator_or_in_separate_loops_count_once(variant, warps):
    assert default_num_warps(check_kernel(load_program(variant, "k.tle"), "k", {})) == warps


WIDE = """
kernel k<BM: int = 64, BN: int = 256>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let t = load(x, tile=[BM, BN], at=[program_id(0), 0])
    store(y, exp(t), at=[program_id(0), 0])
}
"""
# The same tile through a reduction: its values cross threads.
ROWS = WIDE.replace("exp(t)", "t - broadcast(expand_dims(max(t, axis=1), 1), [BM, BN])")


def sized(program: str, bm: int) -> str:
    return program.replace("BM: int = 64", f"BM: int = {bm}")


@pytest.mark.parametrize("variant,warps", [
    # elementwise: about 32 values a thread
    (sized(WIDE, 16), 4),                                          # 16 x 256: 4,096 elements
    (sized(WIDE, 32), 8),                                          # 8,192
    (WIDE, 16),                                                    # 16,384
    (sized(WIDE, 256), 16),                                        # 65,536: 16 stays the most
    # values that cross threads: about 64 a thread
    (sized(ROWS, 32), 4),                                          # 8,192
    (ROWS, 8),                                                     # 16,384
    (sized(ROWS, 128), 32),                                        # 32,768: 32 with a reduction (next test)
    (sized(ROWS, 256), 16),                                        # 65,536
    # a scan: about 128 a thread
    (WIDE.replace("exp(t)", "cast<f32>(cumsum(cast<f16>(t) > 0.0, axis=1))"), 4),  # 16,384
    (sized(WIDE, 128).replace("exp(t)", "cumsum(t, axis=1)"), 8),                   # 32,768
    (sized(WIDE, 256).replace("exp(t)", "cumsum(t, axis=1)"), 16),                  # 65,536
    # a scan beside a reduction, both over the whole tile: the scan's budget
    (WIDE.replace("exp(t)", "cumsum(t, axis=1) - broadcast(expand_dims(sum(t, axis=1), 1), [BM, BN])"), 4),
    # a scan over a small tile beside a wide one: not the scan's budget (4 warps) but its sum's (8)
    (WIDE.replace("exp(t)", "exp(t) + sum(cumsum(load(x, tile=[1, 16], at=[0, 0]), axis=1))"), 8),
    (WIDE.replace("exp(t)", "transpose(transpose(t))"), 8),        # a change of layout, 16,384
    # what moves nothing between threads keeps 32 a thread: a scalar load (a reduce of one element) and a reshape
    # that only adds or drops axes of 1 (H200: the probe's embedding kernels level on 8 warps and 4,
    # benchmarks/RESULTS.md "Loops that read little a step")
    (sized(WIDE, 32).replace("exp(t)", "t * load(x, at=[0, 0])"), 8),                         # 8,192
    (sized(WIDE, 32).replace("exp(t)", "reshape(reshape(t, [1, BM, BN]), [BM, BN])"), 8),
    (sized(WIDE, 32).replace("exp(t)", "reshape(reshape(t, [BN, BM]), [BM, BN])"), 4),        # this one moves them
    (sized(WIDE, 128).replace("exp(t)", "transpose(transpose(t))"), 16),  # 32,768 without a reduction
    # 32,768 reduced along axis 0 (a column sum: 1.3-1.8x slower on 32 than on 16)
    (sized(WIDE, 128).replace("exp(t)", "broadcast(expand_dims(sum(t, axis=0), 0), [BM, BN])"), 16),
    # a wide value that is not loaded: the largest tile of any operation counts (32,768, through a reduction)
    (WIDE.replace("exp(t)", "reshape(sum(reshape(broadcast(expand_dims(t, 2), [BM, BN, 2]), [BM, BN, 2]), "
                            "axis=2), [BM, BN])"), 32),
    # a dot governs: its 64 x 64 accumulator keeps 4 warps whatever else the kernel holds
    (sized(WIDE, 128).replace(
        "store(y, exp(t), at=[program_id(0), 0])",
        "store(y, exp(t), at=[program_id(0), 0])\n    let d = dot(load(x, tile=[64, 64]), load(x, tile=[64, 64]))\n"
        "    store(y, d, at=[0, 0])"), 4),
])
def test_a_kernel_without_a_dot_gets_warps_by_its_largest_tile(variant, warps):
    """Elementwise kernels: about 32 values a thread (H200, 256 MB: dropout and bf16 swiglu 12-14% faster on 8 warps
    than on 4 at 8192 elements, 4-17% faster on 16 than on 8 at 16384). Kernels that reduce or reshape: about 64
    (softmax, layernorm, rmsnorm over 4096 rows in one tile: 8 warps faster than 4 on the geometric mean at 16384;
    4 warps 1.03-11x slower than 16 at 32000 and 65536). Scans: about 128 (cumsum: within 2.4% of the fastest count
    on 20 rows from 8192 to 65536). benchmarks/RESULTS.md, "Scans", "Elementwise kernels", "16384-element rows" and
    "Wide rows"."""
    assert default_num_warps(check_kernel(load_program(variant, "k.tle"), "k", {})) == warps


with open(os.path.join(os.path.dirname(__file__), "data", "streamed_row_max.tle")) as f:
    STREAMED = f.read()


def test_a_row_streamed_in_wide_tiles_keeps_16_warps():
    """A loop over a row's 32768-element tiles (cross-entropy, greedy and a vocabulary softmax over 1024 x 128256 and
    4096 x 32000, H200): 32 warps won 4 of 12 and lost up to 17%, so such a kernel keeps 16."""
    assert default_num_warps(check_kernel(load_program(STREAMED, "k.tle"), "k", {})) == 16
    no_loop = STREAMED.replace("for j in range(cdiv(N, BLOCK))", "if true").replace("at=[program_id(0), j]",
                                                                                   "at=[program_id(0), 0]")
    assert default_num_warps(check_kernel(load_program(no_loop, "k.tle"), "k", {})) == 32


@pytest.mark.parametrize("block,warps", [(32768, 32), (65536, 16)])
def test_the_compiler_gives_a_wide_row_32_or_16_warps(block, warps):
    """A reduction over 16,385 to 32,768 elements takes 32 warps: one program per SM either way (ptxas: 95
    registers a thread on 16 warps, 51 on 32, for bf16 softmax), and on the H200 32 took 0.82-0.995x 16's time on
    all 18 rows of two runs (softmax, LayerNorm, RMSNorm over rows of 20000 and 32000, bf16 and f32). At 65536
    neither count won, and 16 stays (benchmarks/RESULTS.md "Reductions over 16,385 to 32,768 elements")."""
    program, _ = checked("softmax", {"BLOCK": block})
    auto = compile_kernel(program, "softmax", {"BLOCK": block}, backend="triton", stop="ttgir")
    assert f'"ttg.num-warps" = {warps}' in auto.stages["ttgir"]


def test_a_sort_is_named_as_what_moves_values_between_threads():
    """sort() is a network of reductions (tle/bitonic.py); `tlec -v` names the sort, which the kernel wrote, not a
    reduce, which it did not (a porter's report)."""
    src = """kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {
        store(y, sort(load(x, tile=[1024])))
    }"""
    warps, why = num_warps_choice(check_kernel(load_program(src, "k.tle"), "k", {}))
    assert warps == 4 and "a sort moves values between threads" in why, why



def test_a_rescaled_accumulator_counts_once():
    """dot(p, v, acc * alpha), the online softmax's update, holds acc's one tile as dot(p, v, acc) does (it counted
    twice, 32,768 values and 8 warps, for a porter's decode attention holding 18,432)."""
    src = """kernel k(q: tensor<f16>[M, D], kv: tensor<f16>[L, D], o: tensor<f32>[M, D]) {
        let qt = load(q, tile=[64, 128])
        var acc = zeros<f32>[64, 128]
        for j in range(cdiv(L, 64)) {
            let kt = load(kv, tile=[64, 128], at=[j, 0])
            let s = dot(qt, transpose(kt))
            acc = dot(cast<f16>(s), kt, ACC)
        }
        store(o, acc)
    }"""
    for acc in ("acc", "acc * 0.5", "acc / 2.0"):
        warps, why = num_warps_choice(check_kernel(load_program(src.replace("ACC", acc), "k.tle"), "k", {}))
        assert warps == 4 and "its dots hold 12288 values at once" in why, (acc, why)
