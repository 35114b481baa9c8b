"""The static pruning rules (docs/tuning.md) on examples/matmul.tle and others, for an sm_90 GPU."""
import os

import pytest

import tle
from tle.runtime import tuning
from tle.runtime.tuning import HARDWARE, TuneSpace, prune
from tuning_helpers import EXAMPLES, matmul_grid

H200 = HARDWARE["sm_90"]
BASE = {"BM": 128, "BN": 128, "BK": 64, "num_warps": 4}
SPACE_500 = TuneSpace({"BM": [16, 32, 64, 128, 256], "BN": [16, 32, 64, 128, 256], "BK": [16, 32, 64, 128],
                       "num_warps": [1, 2, 4, 8, 16]})


@pytest.fixture(scope="module")
def matmul():
    return tle.compile(os.path.join(EXAMPLES, "matmul.tle"))


def run_prune(mod, space, dims, base=BASE, hw=H200, **kw):
    return prune(mod.program, "matmul", space.configs(), fixed_constants={"T": "f16"}, dims=dims, grid=matmul_grid,
                 hw=hw, base=base, **kw)


def smem(c):
    return 3 * (c["BM"] * c["BK"] + c["BK"] * c["BN"]) * 2  # matmul.tle pipelines its loop with stages=3


def test_500_configs_pruned_to_under_a_fifth(matmul):
    assert len(SPACE_500.configs()) == 500
    p = run_prune(matmul, SPACE_500, {"M": 4096, "N": 4096, "K": 4096})
    assert len(p.kept) == 97, p.dropped
    assert sum(p.dropped.values()) == 500 - 97
    assert p.kept[0] == BASE, "the default configuration is kept first: it is the reference"
    for c in p.kept:
        assert smem(c) <= H200.smem
        assert c["BM"] * c["BN"] / (c["num_warps"] * 32) <= 128  # f32 accumulator registers per thread
        assert c["BM"] * c["BN"] / (c["BM"] + c["BN"]) >= 128 / 4  # intensity: a quarter of 256x256's
    kept = {tuple(c.values()) for c in p.kept}
    assert (128, 256, 64, 8) in kept  # the usual best for a large f16 square on Hopper
    assert (256, 256, 128, 16) not in kept  # 393 KB of shared memory
    # R1 drops nothing at 4096^3 and R2 comes before the register rule: it drops every config over 227 KB
    assert "R1 tile larger than the problem" not in p.dropped
    assert p.dropped["R2 shared memory estimate over the limit"] == sum(
        1 for c in SPACE_500.configs() if smem(c) > H200.smem)


def test_shared_memory_limit_depends_on_the_gpu(matmul):
    space = TuneSpace({"BM": [128, 256], "BN": [128, 256], "BK": [32, 64, 128], "num_warps": [8, 16]})
    dims = {"M": 8192, "N": 8192, "K": 8192}
    h100 = run_prune(matmul, space, dims, base=None)
    sm86 = run_prune(matmul, space, dims, base=None, hw=HARDWARE["sm_86"])
    assert all(smem(c) <= H200.smem for c in h100.kept)
    assert all(smem(c) <= 101376 for c in sm86.kept)
    assert any(smem(c) > 101376 for c in h100.kept), "227 KB admits tiles that 99 KB does not"
    assert sm86.dropped["R2 shared memory estimate over the limit"] > h100.dropped.get(
        "R2 shared memory estimate over the limit", 0)


def test_tiles_larger_than_the_problem_are_dropped(matmul):
    space = TuneSpace({"BM": [16, 32, 64, 128], "BN": [64, 128], "BK": [32, 64]})
    p = run_prune(matmul, space, {"M": 8, "N": 4096, "K": 4096}, base=None)
    assert {c["BM"] for c in p.kept} == {16}, "M = 8: a 16-row tile is the most that is not waste"
    assert p.dropped["R1 tile larger than the problem"] == 3 * 2 * 2
    p = run_prune(matmul, space, {"M": 100, "N": 4096, "K": 4096}, base=None)
    assert {c["BM"] for c in p.kept} <= {16, 32, 64, 128} and 128 in {c["BM"] for c in p.kept}  # 100 -> 128


def test_waves(matmul):
    space = TuneSpace({"BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256], "BK": [32], "num_warps": [8]})
    p = run_prune(matmul, space, {"M": 1024, "N": 1024, "K": 8192}, base=None)
    for c in p.kept:
        assert (1024 // c["BM"]) * (1024 // c["BN"]) * 4 >= H200.sms
    assert p.dropped["R4 under a quarter wave"] > 0  # 256x256 gives 16 programs on 132 SMs


def test_options_a_binary_ignores_are_merged(matmul):
    space = TuneSpace({"BM": [64, 128], "BN": [64], "BK": [32], "num_warps": [4, 8], "num_stages": [2, 3, 4],
                       "backend": ["triton", "tileir"]})
    p = run_prune(matmul, space, {"M": 4096, "N": 4096, "K": 4096}, base=None)
    # matmul.tle's loop says pipeline(stages=3), so num_stages changes nothing; Tile IR ignores warps and stages
    triton = [c for c in p.kept if c["backend"] == "triton"]
    tileir = [c for c in p.kept if c["backend"] == "tileir"]
    assert len(triton) == 2 * 2 and len(tileir) == 2
    assert p.dropped["R0 duplicate (option the backend ignores)"] == 24 - 6


def test_occupancy_is_searched_on_tile_ir_and_merged_on_the_native_path(matmul):
    space = TuneSpace({"BM": [64, 128], "BN": [64], "BK": [32], "occupancy": [None, 2, 4],
                       "backend": ["triton", "tileir"]})
    p = run_prune(matmul, space, {"M": 4096, "N": 4096, "K": 4096}, base=None)
    triton = [c for c in p.kept if c["backend"] == "triton"]
    tileir = [c for c in p.kept if c["backend"] == "tileir"]
    assert len(triton) == 2 and len(tileir) == 2 * 3  # the native path takes no occupancy hint
    assert p.dropped["R0 duplicate (option the backend ignores)"] == 12 - 8


def test_auto_resolved_to_tile_ir_merges_warps(matmul):
    """backend "auto" that routes to Tile IR ignores num_warps: the 500-space keeps one config per tile shape
    (before this, 4 of every 5 compiled to the same Tile IR binary and were counted as failures)."""
    dims = {"M": 4096, "N": 4096, "K": 4096}
    auto = run_prune(matmul, SPACE_500, dims, fixed_backend="auto", auto_route="tileir")
    assert auto.dropped["R0 duplicate (option the backend ignores)"] == 400
    tiles = [(c["BM"], c["BN"], c["BK"]) for c in auto.kept]
    assert len(tiles) == len(set(tiles))
    # the kept one of each group reads num_warps=4, the base's value, not the first value of the space
    assert {c["num_warps"] for c in auto.kept} == {4}
    assert auto.kept[0] == BASE


def test_auto_resolved_to_triton_keeps_warps(matmul):
    dims = {"M": 4096, "N": 4096, "K": 4096}
    auto = run_prune(matmul, SPACE_500, dims, fixed_backend="auto", auto_route="triton")
    triton = run_prune(matmul, SPACE_500, dims, fixed_backend="triton")
    assert auto.kept == triton.kept and auto.dropped == triton.dropped


def test_route_of_follows_tile_ir_legality(matmul):
    from tle.lowering.tileir_legality import tileir_blockers
    module = tle.compiler.compile_kernel(matmul.program, "matmul", {"T": "f16"}, stop="tle").module
    legal = "triton" if tileir_blockers(module, "sm_90") else "tileir"
    assert tuning.route_of(matmul.program, "matmul", {"T": "f16"}, "sm_90") == legal
    erf64 = tle.compile("""kernel erf64<BLOCK: int = 256>(x: tensor<f64>[N], y: tensor<f64>[N]) {
    store(y, erf(load(x, tile=[BLOCK], at=[program_id(0)])), at=[program_id(0)])
}""")
    assert tuning.route_of(erf64.program, "erf64", {}, "sm_90") == "triton"  # erf on f64: no Tile IR lowering


def test_num_stages_kept_for_loops_without_pipeline():
    src = """
kernel mm<BM: int = 64, BN: int = 64, BK: int = 32>(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f16>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]), acc)
    }
    store(c, cast<f16>(acc), at=[program_id(0), program_id(1)])
}
"""
    mod = tle.compile(src)
    space = TuneSpace({"BM": [64], "BN": [64], "BK": [64], "num_stages": [2, 3, 4, 5]})
    p = prune(mod.program, "mm", space.configs(), fixed_constants={}, dims={"M": 4096, "N": 4096, "K": 4096},
              grid=matmul_grid, hw=H200)
    assert [c["num_stages"] for c in p.kept] != [] and len(p.kept) == 4
    facts = [p.facts[tuning._ckey(c)] for c in p.kept]
    assert sorted(f.smem for f in facts) == [s * (64 * 64 + 64 * 64) * 2 for s in (2, 3, 4, 5)]


def test_max_candidates_ranked_by_predicted_time(matmul):
    p = run_prune(matmul, SPACE_500, {"M": 4096, "N": 4096, "K": 4096}, max_candidates=10)
    assert len(p.kept) == 10 and p.kept[0] == BASE
    assert p.dropped["R6 over max_candidates (ranked by predicted time)"] == 87
    times = [tuning.predicted_time(p.facts[tuning._ckey(c)], c["num_warps"] * 32, H200) for c in p.kept[1:]]
    assert times == sorted(times)


def test_configs_that_do_not_check_are_dropped(matmul):
    space = TuneSpace({"BM": [64, 100], "BN": [64], "BK": [32]})  # 100 is no power of two
    p = run_prune(matmul, space, {"M": 4096, "N": 4096, "K": 4096}, base=None)
    assert [c["BM"] for c in p.kept] == [64] and p.dropped == {"does not check": 1}


def test_space_validation(matmul):
    with pytest.raises(ValueError, match="no compile-time constant 'BX'"):
        TuneSpace({"BX": [1]}).validate(matmul.program.kernels["matmul"])
    with pytest.raises(ValueError, match="int constant"):
        TuneSpace({"BM": [64, 1.5]}).validate(matmul.program.kernels["matmul"])
    # T is tensor<T>'s: the launch reads it off the tensors, so trials of another T could not launch
    with pytest.raises(ValueError, match="reads T off its tensors' dtypes, so it cannot be tuned"):
        TuneSpace({"T": ["f16", "bf16"]}).validate(matmul.program.kernels["matmul"])
    acc = tle.compile("kernel k<A: dtype = f32>(x: tensor<f32>[N]) {\n"
                      "    store(x, cast<f32>(cast<A>(load(x, tile=[16]))))\n}")
    with pytest.raises(ValueError, match="dtype constant"):
        TuneSpace({"A": ["f16", "f17"]}).validate(acc.program.kernels["k"])
    TuneSpace({"A": ["f16", "bf16"]}).validate(acc.program.kernels["k"])
    with pytest.raises(ValueError, match="has no symbolic dim 'M'"):
        TuneSpace({"A": ["f16"]}, key_dims=["M"]).validate(acc.program.kernels["k"])
    for bad in ({"budget_s": "60"}, {"jobs": 0}, {"max_candidates": 1.5}):
        with pytest.raises(ValueError, match="must be a positive"):
            TuneSpace({"A": ["f16"]}, **bad)
    with pytest.raises(ValueError, match="num_stages must be ints from 1 to 8"):
        TuneSpace({"num_stages": [2, 9]})
    with pytest.raises(ValueError, match="num_warps"):
        TuneSpace({"num_warps": [3]})
    with pytest.raises(ValueError, match="backend"):
        TuneSpace({"backend": ["cuda"]})
    with pytest.raises(ValueError, match="occupancy"):
        TuneSpace({"occupancy": [None, 0]})
    TuneSpace({"occupancy": [None, 2, 4]}).validate(matmul.program.kernels["matmul"])
    with pytest.raises(ValueError, match="twice"):
        TuneSpace({"BM": [64, 64]})
    with pytest.raises(ValueError, match="no values"):
        TuneSpace({"BM": []})
    with pytest.raises(ValueError):
        matmul.matmul.tune_space = {"BQ": [1]}
    matmul.matmul.tune_space = {"BM": [64], "key_dims": ["M"]}
    assert matmul.matmul.tune_space.key_dims == ["M"]
    matmul.matmul.tune_space = None


def test_persistent_loop_counts_an_average_programs_tiles():
    """examples/matmul_persistent.tle strides over the tiles by num_programs(0): with the grid known, one program's
    work is its share of the tiles (the cost model ranks tile shapes by it), not a single tile."""
    from tle.check import check_kernel
    mod = tle.compile(os.path.join(EXAMPLES, "matmul_persistent.tle"))
    dims = {"M": 4096, "N": 4096, "K": 4096}
    checked = check_kernel(mod.program, "matmul_persistent", {"BM": 128, "BN": 256, "BK": 64})
    one_tile = 2.0 * 128 * 256 * 4096
    tiles = (4096 // 128) * (4096 // 256)  # 512
    assert tuning.analyze(checked, dims, grid=(132,)).flops == one_tile * -(-tiles // 132)
    assert tuning.analyze(checked, dims, grid=(512,)).flops == one_tile
    assert tuning.analyze(checked, dims).flops == one_tile  # no grid: one trip, as for any unknown bound


def test_tma_only_constants_are_one_binary_on_tile_ir():
    """matmul_persistent's TMA feeds only tma= hints, which Tile IR ignores: on Tile IR, TMA=true and TMA=false
    are one configuration (R0); on the native path they are two. A constant used anywhere else stays."""
    mod = tle.compile(os.path.join(EXAMPLES, "matmul_persistent.tle"))
    assert tuning.hint_only_constants(mod.program, "matmul_persistent") == {"TMA"}
    space = TuneSpace({"BM": [128], "BN": [128, 256], "TMA": [True, False], "backend": ["triton", "tileir"]})
    p = prune(mod.program, "matmul_persistent", space.configs(), fixed_constants={"T": "f16"},
              dims={"M": 4096, "N": 4096, "K": 4096}, grid=lambda m: (132,), hw=H200, base=None)
    kept = [(c["BN"], c["TMA"], c["backend"]) for c in p.kept]
    assert sorted(k for k in kept if k[2] == "triton") == [(128, False, "triton"), (128, True, "triton"),
                                                           (256, False, "triton"), (256, True, "triton")]
    assert len([k for k in kept if k[2] == "tileir"]) == 2
    assert p.dropped["R0 duplicate (option the backend ignores)"] == 2
    from tle.check import load_program
    other = load_program("""
kernel k<B: int = 16, F: bool = true>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    if F { store(y, load(x, tile=[B], tma=F), at=[0]) }
}""")
    assert tuning.hint_only_constants(other, "k") == frozenset()  # F also decides the if


def test_a_tma_store_stages_its_tile_in_shared_memory():
    """A descriptor store stages its tile in shared memory beside the pipeline's buffers: matmul_persistent at
    128x256x64 with 4 stages and TMA needs 196,608 + 65,536 bytes, over the H200's 232,448 (Triton refuses it at
    load), so R2 drops it; 3 stages with TMA, and 4 without, fit."""
    mod = tle.compile(os.path.join(EXAMPLES, "matmul_persistent.tle"))
    space = TuneSpace({"BM": [128], "BN": [256], "BK": [64], "STAGES": [3, 4], "TMA": [True, False]})
    p = prune(mod.program, "matmul_persistent", space.configs(), fixed_constants={"T": "f16"},
              dims={"M": 4096, "N": 4096, "K": 4096}, grid=lambda m: (132,), hw=H200, base=None)
    assert sorted((c["STAGES"], c["TMA"]) for c in p.kept) == [(3, False), (3, True), (4, False)]
    assert p.dropped == {"R2 shared memory estimate over the limit": 1}
    assert p.facts[tuning._ckey({"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "TMA": True})].smem == 212992


SCALED = """
kernel scaled_mm<BM: int = 64, BN: int = 64, BK: int = 32>(a: tensor<f16>[M, K], b: tensor<f16>[K, N],
        s: tensor<f32>[M, KB], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=4) {
        acc += dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]))
               * load(s, tile=[BM, 1], at=[program_id(0), k])
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""

SCALED_OPERAND = """
kernel scaled_mm<BM: int = 64, BN: int = 64, BK: int = 32>(a: tensor<f16>[M, K], b: tensor<f16>[K, N],
        s: tensor<f32>[M, KB], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=4) {
        var x = load(a, tile=[BM, BK], at=[program_id(0), k])
        x = x * cast<f16>(load(s, tile=[BM, 1], at=[program_id(0), k]))
        acc += dot(x, load(b, tile=[BK, BN], at=[k, program_id(1)]))
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""

@pytest.mark.parametrize("source,kept", [
    (SCALED, 4),  # the scale load: staged too when num_stages is not the loop's 4 (another binary), not when it is
    (SCALED.replace("* load(s, tile=[BM, 1], at=[program_id(0), k])", ""), 1),  # every load feeds the dot: one
    # the scale reaches an operand through a var: it feeds the dot, so num_stages changes nothing again
    (SCALED_OPERAND, 1),
])
def test_num_stages_matters_for_a_pipelined_dot_loop_that_loads_more_than_its_operands(source, kept):
    """lowering/tle_to_ttir.py leaves a dot loop's pipeline(stages=N) to the kernel-wide num_stages where they are
    equal, so that only the dot's operand loads are staged; where they differ the loop keeps its own depth, and
    Triton then stages its other loads too. So a loop loading more than its dot's operands compiles to two binaries
    (the PTX of num_stages 4 and 5 differ), and R0 keeps num_stages for it."""
    mod = tle.compile(source)
    space = TuneSpace({"num_stages": [2, 3, 4, 5]})
    p = prune(mod.program, "scaled_mm", space.configs(), fixed_constants={}, grid=matmul_grid, hw=H200,
              dims={"M": 4096, "N": 4096, "K": 4096, "KB": 128})
    assert len(p.kept) == kept
    ptx = {ns: tle.compiler.compile_kernel(mod.program, "scaled_mm", {}, backend="triton", stop="ptx",
                                           num_stages=ns).stages["ptx"] for ns in (4, 5)}
    assert (ptx[4] != ptx[5]) == (kept > 1)
