"""Launch facts (tle/abi.py): a tile indexed by program_id(a) along a dim loses its bounds check when the launch
grid proves grid[a] * tile <= dim (GridTile), a tile at a constant index c when the sizes prove (c + 1) * tile <=
dim (FixedTile), a tile indexed by a loop's variable when the sizes prove stop * tile <= dim (LoopTile), and each
keeps it otherwise. A loop over a range of sizes that the sizes prove non-empty (LoopRuns) is marked so, and its
TTIR says so to LLVM. FixedTile, LoopTile and LoopRuns rest on the sizes alone, so they hold without a grid too
(tlec --sizes without --grid). A callable grid is worked out when the launch is planned and proves what that grid
proves.

One behaviour per test: which accesses are candidates (grid_tiles), which facts a grid proves (spec_of), what the
lowering drops (tle.inside in the tle dialect, the mask in TTIR), and that the runtime plans per grid.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from tle.abi import (FixedTile, GridTile, LoopRuns, LoopSplit, LoopTile, ManyPrograms, ManyWaves, ShortK, Spec,
                     UnalignedRows, default_spec, grid_tiles, launch_spec, loop_facts, spec_of)
from tle.check import check_kernel, load_program
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tle_to_ttir import tle_to_ttir
from tle.targets.triton import verify_ttir

ROWS = """
kernel rows<B: int = 1024>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let row = program_id(0)
    store(y, load(x, tile=[1, B], at=[row, 0]) * 2.0, at=[row, 0])
}
"""

VADD = """
kernel vadd<B: int = 256>(x: tensor<f32>[N], o: tensor<f32>[N]) {
    store(o, load(x, tile=[B], at=[program_id(0)]) + 1.0, at=[program_id(0)])
}
"""


def kernel_of(src: str, consts: dict | None = None):
    prog = load_program(src, "k.tle")
    return check_kernel(prog, prog.kernel_names()[0], consts or {})


def with_facts(k, facts) -> Spec:
    return dataclasses.replace(default_spec(k), inside=frozenset(facts))


def ttir_of(k, spec: Spec) -> str:
    text = tle_to_ttir(ast_to_tle(k, spec))
    verify_ttir(text)
    return text


def test_candidates_are_accesses_indexed_by_program_id_itself():
    k = kernel_of("""
fn tile_at(t, i) { return load(t, tile=[4, 8], at=[i, 0]) }
kernel k(a: tensor<f32>[M, N], b: tensor<f32>[M, N], c: tensor<f32>[P, Q], d: tensor<f32>[M, 8]) {
    let r = program_id(1)
    var v = program_id(0)
    let t = tile_at(a, r)                                    // through an inlined fn's parameter
    store(b, t, at=[r, program_id(2)])                       // directly, on two axes
    store(c, load(c, tile=[4, 8], at=[r + 1, v]), at=[0, 0]) // computed, or a var: not candidates
    store(d, t, at=[r, 0])                                   // a constant dim (8) needs no fact
}
""")
    # a's and b's column index 0 and c's store at [0, 0] are constant tile indices: FixedTile candidates.
    assert grid_tiles(k) == {GridTile(1, "M", 4), GridTile(2, "N", 8), FixedTile(0, "N", 8), FixedTile(0, "P", 4),
                             FixedTile(0, "Q", 8)}


def test_sizes_prove_a_fixed_tile_exactly_when_it_fits():
    k = kernel_of(ROWS)
    values = {"x": _Aligned(), "y": _Aligned(), "M": 8, "N": 1024, "x.stride0": 1024, "x.stride1": 1,
              "y.stride0": 1024, "y.stride1": 1}
    column = FixedTile(0, "N", 1024)
    assert column in spec_of(k, values, (8, 1, 1)).inside                  # the row is one whole tile
    assert column in spec_of(k, dict(values, N=3000), (8, 1, 1)).inside    # the tile is the row's first 1024
    assert column not in spec_of(k, dict(values, N=1000), (8, 1, 1)).inside  # the row ends inside the tile
    assert spec_of(k, values).inside == {column}  # no grid needed: the sizes alone prove it


def test_a_grid_proves_a_fact_exactly_when_its_tiles_fit():
    k = kernel_of(VADD)
    fact = GridTile(0, "N", 256)
    values = {"x": _Aligned(), "o": _Aligned(), "N": 1024, "x.stride0": 1, "o.stride0": 1}
    assert spec_of(k, values, (4, 1, 1)).inside == {fact}       # 4 x 256 = 1024
    assert spec_of(k, values, (5, 1, 1)).inside == frozenset()  # the fifth tile is outside
    assert spec_of(k, dict(values, N=1000), (4, 1, 1)).inside == frozenset()  # the fourth is partly outside
    assert spec_of(k, values, (0, 1, 1)).inside == frozenset()  # no programs: nothing to prove
    assert spec_of(k, values).inside == frozenset()  # no grid known (tlec without --grid)


MM = """
kernel mm<B: int = 64>(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f32>[M, N]) {
    store(c, dot(load(a, tile=[B, 16], at=[program_id(0), 0]), load(b, tile=[16, B], at=[0, program_id(1)])),
          at=[program_id(0), program_id(1)])
}
"""


def test_more_programs_than_sms_is_a_fact_of_kernels_with_a_dot():
    """ManyPrograms: the grid has more programs than the SM count the runtime gives, proved only for a kernel with
    a dot (the only kind whose lowering reads it), and never without a grid or an SM count."""
    k = kernel_of(MM)
    values = {"a": _Aligned(), "b": _Aligned(), "c": _Aligned(), "M": 64 * 12, "K": 16, "N": 64 * 12,
              "a.stride0": 16, "a.stride1": 1, "b.stride0": 64 * 12, "b.stride1": 1, "c.stride0": 64 * 12,
              "c.stride1": 1}
    assert ManyPrograms() in spec_of(k, values, (12, 12, 1), sms=132).inside  # 144 programs
    assert ManyPrograms() not in spec_of(k, values, (12, 11, 1), sms=132).inside  # 132: one wave
    assert ManyPrograms() not in spec_of(k, values, (12, 12, 1)).inside  # no SM count (tlec, the CPU)
    assert ManyPrograms() not in spec_of(k, values, None, sms=132).inside  # no grid (tlec)
    v = kernel_of(VADD)
    vvalues = {"x": _Aligned(), "o": _Aligned(), "N": 1 << 20, "x.stride0": 1, "o.stride0": 1}
    assert ManyPrograms() not in spec_of(v, vvalues, (4096, 1, 1), sms=132).inside  # no dot
    assert spec_of(k, values, (12, 12, 1), sms=132).key().endswith("waves>1")


class _At:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def _mm_values(k_stride: int, a_base: int = 256, **strides) -> dict:
    values = {"a": _At(a_base), "b": _At(256), "c": _At(256), "M": 4096, "K": 4096, "N": 4096,
              "a.stride0": k_stride, "a.stride1": 1, "b.stride0": 4096, "b.stride1": 1, "c.stride0": 4096,
              "c.stride1": 1}
    values.update({k.replace("_", "."): v for k, v in strides.items()})
    return values


@pytest.mark.parametrize("values,unaligned", [
    (_mm_values(4096), set()),
    (_mm_values(4104), set()),                           # 8208 bytes: 16 divides it
    (_mm_values(4099), {"a"}),                           # an odd K: 2-byte rows
    (_mm_values(4100), {"a"}),                           # 8-byte rows are not enough for TMA
    (_mm_values(4096, a_base=258), {"a"}),               # a slice one element in
    (_mm_values(4096, b_stride0=1, b_stride1=4099), {"b"}),  # w.t() of a [4099, 4096] weight: its row stride
    (_mm_values(4096, c_stride0=4099), {"c"}),
    (_mm_values(4096, a_stride0=1, a_stride1=4096), set()),  # x.t(): a unit stride and a 16-byte one
])
def test_rows_tma_cannot_read_are_a_fact_of_the_launch(values, unaligned):
    """UnalignedRows: a tensor whose base is not 16-byte aligned, or whose stride other than 1 is not a multiple
    of 16 bytes (f16: 8 elements), proved from the launch's exact values."""
    found = {f.tensor for f in spec_of(kernel_of(MM), values).inside if isinstance(f, UnalignedRows)}
    assert found == unaligned


def test_unaligned_rows_are_proved_only_for_a_kernel_with_a_dot_and_never_assumed():
    vvalues = {"x": _At(258), "o": _At(256), "N": 1 << 20, "x.stride0": 1, "o.stride0": 1}
    assert not any(isinstance(f, UnalignedRows) for f in spec_of(kernel_of(VADD), vvalues).inside)
    k = kernel_of(MM)
    assert not any(isinstance(f, UnalignedRows) for f in default_spec(k).inside)  # tlec: strides unknown
    # tlec --sizes: contiguous tensors of those sizes, so the strides of every tensor whose later dims are given
    assert {f for f in launch_spec(k, {"K": 4099}).inside if isinstance(f, UnalignedRows)} == {UnalignedRows("a")}
    assert not any(isinstance(f, UnalignedRows) for f in launch_spec(k, {"K": 4096, "N": 4096}).inside)
    assert spec_of(k, _mm_values(4099)).key().endswith(",unaligned:a")  # in the key: the tuning database sees it


def test_the_tle_dialect_marks_views_of_unaligned_rows():
    k = kernel_of(MM)
    text = str(ast_to_tle(k, spec_of(k, _mm_values(4099))))
    (line,) = [ln for ln in text.splitlines() if "tle.unaligned_rows" in ln]
    assert '"tle.make_view"' in line and 'name = "a"' in line
    assert "tle.unaligned_rows" not in str(ast_to_tle(k, spec_of(k, _mm_values(4096))))


def test_more_than_two_waves_is_a_fact_beside_many_programs():
    """ManyWaves: more than twice as many programs as SMs, given a grid and an SM count. For a kernel with a dot
    (where auto sends a dot on small tiles to the native path) beside ManyPrograms; for one without (where the
    compiler asks tileiras for 12 warps per SM) alone."""
    k = kernel_of(MM)
    values = {"a": _Aligned(), "b": _Aligned(), "c": _Aligned(), "M": 64 * 24, "K": 16, "N": 64 * 12,
              "a.stride0": 16, "a.stride1": 1, "b.stride0": 64 * 12, "b.stride1": 1, "c.stride0": 64 * 12,
              "c.stride1": 1}
    assert {ManyPrograms(), ManyWaves()} <= spec_of(k, values, (23, 12, 1), sms=132).inside  # 276 programs
    past_one = spec_of(k, values, (22, 12, 1), sms=132).inside  # 264: two waves exactly
    assert ManyPrograms() in past_one and ManyWaves() not in past_one
    assert ManyWaves() not in spec_of(k, values, (23, 12, 1)).inside  # no SM count
    v = kernel_of(VADD)
    vvalues = {"x": _Aligned(), "o": _Aligned(), "N": 1 << 20, "x.stride0": 1, "o.stride0": 1}
    no_dot = spec_of(v, vvalues, (4096, 1, 1), sms=132).inside
    assert ManyWaves() in no_dot and ManyPrograms() not in no_dot
    assert ManyWaves() not in spec_of(v, vvalues, (264, 1, 1), sms=132).inside  # two waves exactly
    assert ManyWaves() not in spec_of(v, vvalues, (4096, 1, 1)).inside  # no SM count
    assert spec_of(k, values, (23, 12, 1), sms=132).key().endswith("waves>1,waves>2")
    assert spec_of(v, vvalues, (4096, 1, 1), sms=132).key().endswith("waves>2")


KLOOP = """
kernel mm<BK: int = 64>(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[128, 128]
    for k in range(cdiv(K, BK)) {
        acc = dot(load(a, tile=[128, BK], at=[program_id(0), k]), load(b, tile=[BK, 128], at=[k, program_id(1)]),
                  acc)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""

NESTED = """
kernel mm(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f32>[M, N]) {
    for r in range(2) {
        var acc = zeros<f32>[64, 64]
        for k in range(cdiv(K, 64)) {
            acc = dot(load(a, tile=[64, 64], at=[2 * program_id(0) + r, k]),
                      load(b, tile=[64, 64], at=[k, program_id(1)]), acc)
        }
        store(c, acc, at=[2 * program_id(0) + r, program_id(1)])
    }
}
"""


def test_a_short_k_is_a_fact_beside_many_programs():
    """ShortK: with ManyPrograms, a grid of at least 3 waves whose one dot sums at most SHORT_K (512) values of K
    per program under the launch's sizes: its K tile times its loop's trips, or its K tile alone outside a loop.
    Nested loops around the dot, or a grid of fewer waves, prove nothing."""
    def facts(src, k, grid=(40, 14, 1), bk=64):  # 560 programs: 4.2 waves of 132
        kernel = kernel_of(src, {"BK": bk} if "BK" in src else {})
        values = {"a": _Aligned(), "b": _Aligned(), "c": _Aligned(), "M": 128 * 40, "K": k, "N": 128 * 14,
                  "a.stride0": k, "a.stride1": 1, "b.stride0": 128 * 14, "b.stride1": 1, "c.stride0": 128 * 14,
                  "c.stride1": 1}
        return spec_of(kernel, values, grid, sms=132).inside
    assert ShortK() in facts(KLOOP, 512)  # 8 trips of 64
    assert ShortK() in facts(KLOOP, 500)  # 8 trips, the last ragged
    assert ShortK() not in facts(KLOOP, 513)  # 9 trips: 576 values
    assert ShortK() not in facts(KLOOP, 1024, bk=32)  # 32 trips of 32
    assert ShortK() in facts(KLOOP, 128, bk=128)
    assert ShortK() in facts(KLOOP, 128, grid=(33, 12, 1))  # 396 programs: 3 waves
    assert ShortK() not in facts(KLOOP, 128, grid=(35, 11, 1))  # 385 programs: 2.9 waves
    assert ManyPrograms() in facts(KLOOP, 128, grid=(35, 11, 1))
    assert ShortK() in facts(MM, 16, grid=(24, 22, 1))  # no loop: one K tile of 16
    assert ShortK() not in facts(NESTED, 128)
    assert str(ShortK()) == "k<=512"


def test_the_spec_key_is_unchanged_without_facts():
    k = kernel_of(VADD)
    assert "inside" not in default_spec(k).key()
    assert with_facts(k, [GridTile(0, "N", 256)]).key().endswith(";inside=0:N:256")


def test_a_row_kernel_loses_its_row_check_under_the_fact():
    k = kernel_of(ROWS)
    base, proven = ttir_of(k, default_spec(k)), ttir_of(k, with_facts(k, grid_tiles(k)))
    # The row check is the one unsigned compare of the program id against M (predicate 6, ult).
    assert base.count("predicate = 6") == 2  # the load's and the store's
    assert proven.count("predicate = 6") == 0
    # The column masks (the tile is 1024 wide) go too when the sizes prove N >= 1024; without that fact they stay.
    assert base.count("predicate = 2") == 2 and proven.count("predicate = 2") == 0
    rows_only = ttir_of(k, with_facts(k, [GridTile(0, "M", 1)]))
    assert rows_only.count("predicate = 6") == 0 and rows_only.count("predicate = 2") == 2


def test_an_exact_vector_add_is_unmasked():
    k = kernel_of(VADD)
    proven = ttir_of(k, with_facts(k, grid_tiles(k)))
    assert "arith.cmpi" not in proven
    assert "array<i32: 1, 0, 0>" in proven  # tt.load with no mask operand
    assert "arith.cmpi" in ttir_of(k, default_spec(k))


def test_a_fact_for_another_tile_size_changes_nothing():
    k = kernel_of(VADD)
    wrong = with_facts(k, [GridTile(0, "N", 128), GridTile(1, "N", 256)])
    assert ttir_of(k, wrong) == ttir_of(k, default_spec(k))


def test_the_tle_dialect_marks_the_proven_axes():
    k = kernel_of(ROWS)
    text = str(ast_to_tle(k, with_facts(k, grid_tiles(k))))
    assert text.count("tle.inside = array<i32: 0, 1>") == 2
    assert str(ast_to_tle(k, with_facts(k, [GridTile(0, "M", 1)]))).count("tle.inside = array<i32: 0>") == 2
    assert "tle.inside" not in str(ast_to_tle(k, default_spec(k)))


LOOPS = """
kernel loops<BK: int = 64>(x: tensor<f32>[M, K], o: tensor<f32>[M], n: i32) {
    var acc = zeros<f32>[1]
    for k in range(cdiv(K, BK)) { acc += sum(load(x, tile=[1, BK], at=[0, k]), axis=1) }  // loop0: a candidate
    for k in range(program_id(0), K) { acc += 1.0 }                                           // loop1: not
    for k in range(n) { acc += 1.0 }                                                          // loop2: not
    for k in range(2, M * K - 1, 4) { acc += 1.0 }                                            // loop3: a candidate
    store(o, acc, at=[0])
}
"""


def test_loop_candidates_start_at_a_constant_and_stop_at_an_expression_of_sizes():
    k = kernel_of(LOOPS)
    assert sorted((fact, start) for fact, start, _ in loop_facts(k).values()) == [(LoopRuns(0), 0), (LoopRuns(3), 2)]


def test_sizes_prove_a_loop_runs_exactly_when_its_range_is_not_empty():
    k = kernel_of(LOOPS)
    values = {"x": _Aligned(), "o": _Aligned(), "M": 1, "K": 1, "n": 5, "x.stride0": 1, "x.stride1": 1,
              "o.stride0": 1}

    def runs(**sizes):
        return {f for f in spec_of(k, dict(values, **sizes), (1, 1, 1)).inside if isinstance(f, LoopRuns)}
    assert runs() == {LoopRuns(0)}                   # cdiv(1, 64) = 1 trip; 2 < 1 * 1 - 1 fails
    assert runs(K=0) == set()                        # cdiv(0, 64) = 0 trips
    assert runs(M=1, K=4) == {LoopRuns(0), LoopRuns(3)}  # 2 < 3
    assert runs(M=3, K=1) == {LoopRuns(0)}           # 2 < 2 fails
    assert LoopRuns(0) not in runs(K=2 ** 31 - 1)    # K + 64 leaves i32 on the GPU: nothing rests on it
    assert {f for f in spec_of(k, values).inside if isinstance(f, LoopRuns)} == {LoopRuns(0)}  # no grid needed
    assert {f for f in spec_of(k, dict(values, K=0)).inside if isinstance(f, LoopRuns)} == set()


def test_a_loop_that_runs_gets_a_stop_of_at_least_start_plus_one_in_ttir():
    k = kernel_of(LOOPS)
    assert 'tle.nonempty' in str(ast_to_tle(k, with_facts(k, [LoopRuns(0)])))
    assert "tle.nonempty" not in str(ast_to_tle(k, default_spec(k)))
    raised = ttir_of(k, with_facts(k, [LoopRuns(0), LoopRuns(3)]))
    assert raised.count("arith.maxsi") == 2 and "arith.maxsi" not in ttir_of(k, default_spec(k))
    assert "value = 3 : i32" in raised  # loop3's stop is at least its start + 1
    assert "tle.nonempty" not in raised


def test_a_tile_indexed_by_such_a_loops_variable_is_a_candidate():
    k = kernel_of(LOOPS)
    assert {f for f in grid_tiles(k) if isinstance(f, LoopTile)} == {LoopTile(0, "K", 64)}


def test_sizes_prove_a_loops_tiles_inside_when_its_stop_times_the_tile_fits():
    k = kernel_of(LOOPS)
    values = {"x": _Aligned(), "o": _Aligned(), "M": 1, "n": 5, "x.stride0": 1, "x.stride1": 1, "o.stride0": 1}

    def tiles(K):
        return {f for f in spec_of(k, dict(values, K=K)).inside if isinstance(f, LoopTile)}
    assert tiles(256) == {LoopTile(0, "K", 64)}  # k < 4 and 4 * 64 <= 256
    assert tiles(300) == set()                   # k < 5 and 5 * 64 > 300: tile 4 is ragged
    assert tiles(0) == {LoopTile(0, "K", 64)}    # no trip, no tile: nothing to check
    assert tiles(2 ** 31 - 64) == set()          # the stop's K + 63 leaves i32 on the GPU: nothing rests on it


def test_sizes_split_a_loop_whose_first_tiles_are_whole_and_last_is_not():
    k = kernel_of(LOOPS)
    values = {"x": _Aligned(), "o": _Aligned(), "M": 1, "n": 5, "x.stride0": 1, "x.stride1": 1, "o.stride0": 1}

    def split(K):
        return {f for f in spec_of(k, dict(values, K=K)).inside if isinstance(f, LoopSplit)}
    assert split(300) == {LoopSplit(0)}  # 0 < 300 // 64 = 4 < 5
    assert split(256) == set()           # every tile whole: LoopTile instead
    assert split(32) == set()            # no tile whole: 0 < 0 fails
    assert split(0) == set()


SPLITS = """
kernel splits<B: int = 64>(x: tensor<f32>[M, N], o: tensor<f32>[M]) {
    var acc = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) { acc += load(x, tile=[1, B], at=[0, j]) }                    // loop0: split
    for j in range(0, cdiv(N, B), 2) { acc += load(x, tile=[1, B], at=[0, j]) }              // loop1: step 2
    for i in range(cdiv(M, 1)) {                                                              // loop2: not innermost
        for j in range(cdiv(N, B)) { acc += load(x, tile=[1, B], at=[i, j]) }                 // loop3: split
    }
    store(o, sum(acc, axis=1), at=[0])
}
"""


def test_only_innermost_loops_of_step_1_are_split():
    k = kernel_of(SPLITS)
    values = {"x": _Aligned(), "o": _Aligned(), "M": 3, "N": 300, "x.stride0": 300, "x.stride1": 1, "o.stride0": 1}
    assert {f for f in spec_of(k, values).inside if isinstance(f, LoopSplit)} == {LoopSplit(0), LoopSplit(3)}


MATMUL_SRC = Path(__file__).resolve().parents[2].joinpath("examples", "matmul.tle").read_text()


def _matmul_values(k: int, k_stride: int) -> dict:
    return {"a": _Aligned(), "b": _Aligned(), "c": _Aligned(), "M": 64, "N": 64, "K": k, "a.stride0": k_stride,
            "a.stride1": 1, "b.stride0": 64, "b.stride1": 1, "c.stride0": 64, "c.stride1": 1}


@pytest.mark.parametrize("k_size,split", [
    (328, False),  # 656 bytes: a multiple of 16, the ragged tile's mask still vectorises (measured: no gain)
    (300, True),   # 600 bytes: the mask breaks a's 16-byte vectors
    (299, True),
    (320, False),  # whole tiles: no ragged tile at all (LoopTile)
])
def test_a_dot_loop_is_split_only_where_k_is_not_a_multiple_of_16_bytes(k_size, split):
    """A matmul's K loop over a ragged K is split only where K along a's rows is not a multiple of 16 bytes: there
    the last tile's element-wise mask keeps every tile's loads scalar (tle/abi.py dot_loop_reads)."""
    k = kernel_of(MATMUL_SRC, {"BM": 64, "BN": 64, "BK": 64})
    inside = spec_of(k, _matmul_values(k_size, 512)).inside
    assert LoopRuns(0) in inside and (LoopSplit(0) in inside) == split


@pytest.mark.parametrize("k_size,k_stride,backends", [
    (300, 304, {"triton"}),            # aligned rows: the native path vectorises the unchecked tiles
    (299, 304, {"triton"}),            # Tile IR reads aligned rows with TMA, which fills the ragged tile itself
    (299, 299, {"tileir"}),            # unaligned rows and an odd K: Tile IR's loads were checked element by element
    (300, 300, set()),                 # unaligned rows, an even K: neither path gained
])
def test_each_path_takes_a_dot_loops_split_where_it_measured_faster(k_size, k_stride, backends):
    from tle.compiler import _spec_for
    k = kernel_of(MATMUL_SRC, {"BM": 64, "BN": 64, "BK": 64})
    spec = spec_of(k, _matmul_values(k_size, k_stride))
    assert LoopSplit(0) in spec.inside  # proven either way: the key does not depend on the path
    assert {b for b in ("triton", "tileir") if LoopSplit(0) in _spec_for(k, spec, b).inside} == backends
    assert _spec_for(k, spec, "auto") == _spec_for(k, spec, "tileir")


def test_loops_without_a_dot_are_split_on_both_paths():
    from tle.compiler import _spec_for
    k = kernel_of(SPLITS)
    values = {"x": _Aligned(), "o": _Aligned(), "M": 3, "N": 300, "x.stride0": 300, "x.stride1": 1, "o.stride0": 1}
    spec = spec_of(k, values)
    assert _spec_for(k, spec, "triton") == _spec_for(k, spec, "tileir") == spec


def test_the_two_loops_of_a_split_are_marked():
    k = kernel_of(MATMUL_SRC, {"BM": 64, "BN": 64, "BK": 64})
    text = str(ast_to_tle(k, spec_of(k, _matmul_values(300, 304))))
    assert text.count("tle.split") == 2 and text.count('"tle.dot"') == 2


def test_a_split_loop_is_two_loops_and_its_first_loads_unmasked():
    k = kernel_of(LOOPS)
    row = FixedTile(0, "M", 1)
    text = ttir_of(k, with_facts(k, [row, LoopRuns(0), LoopSplit(0)]))
    loads = [line for line in text.splitlines() if "tt.load" in line]
    assert len(loads) == 2 and "array<i32: 1, 0, 0>" in loads[0] and "array<i32: 1, 1, 1>" in loads[1]
    assert text.count('"scf.for"') == 5  # loop0 as two, then loops 1 to 3


def test_a_proven_loop_tile_loads_without_a_mask():
    k = kernel_of(LOOPS)
    row = FixedTile(0, "M", 1)
    loads = [line for line in ttir_of(k, with_facts(k, [row, LoopTile(0, "K", 64)])).splitlines() if "tt.load" in line]
    assert len(loads) == 1 and "array<i32: 1, 0, 0>" in loads[0]    # pointers only: no mask, no padding
    loads = [line for line in ttir_of(k, with_facts(k, [row])).splitlines() if "tt.load" in line]
    assert len(loads) == 1 and "array<i32: 1, 1, 1>" in loads[0]    # the column mask stays


class _Aligned:
    def data_ptr(self):
        return 256


@pytest.mark.parametrize("grid", [(4,), (5,)])
def test_the_runtime_plans_per_grid_and_stays_right(grid):
    """On the interpreter: an exact grid and one with a program too many both give the right answer, and each
    grid gets its own plan, with the facts that grid proves."""
    torch = pytest.importorskip("torch")
    from tle.runtime.kernel import Kernel
    from tle.check import load_program as lp
    k = Kernel(lp(VADD, "k.tle"), "vadd", "test")
    x = torch.randn(1024)
    o = torch.full((1024,), float("nan"))
    k.launch(grid, x, o)
    assert torch.equal(o, x + 1.0)
    (plan_key,) = k._plans
    assert plan_key[1] == grid + (1,) * (3 - len(grid))
    (entry_key,) = k._entries
    spec = entry_key[1]
    assert spec.inside == ({GridTile(0, "N", 256)} if grid == (4,) else frozenset())


def test_a_callable_grid_proves_the_facts_of_the_grid_it_gives_and_is_checked_at_each_launch():
    """A callable grid is worked out when the launch is planned, so a tuned kernel's grid proves its facts too; a
    callable that later gives another grid for the same arguments (it reads something else) is sent to that grid's
    own plan, and the answer stays right (on the interpreter, with a poisoned output)."""
    torch = pytest.importorskip("torch")
    from tle.runtime.kernel import Kernel
    from tle.check import load_program as lp
    k = Kernel(lp(VADD, "k.tle"), "vadd", "test")
    x = torch.randn(1024)
    extra = [0]
    grid = lambda meta: (meta["N"] // 256 + extra[0],)  # noqa: E731
    for more in (0, 0, 1):
        extra[0] = more
        o = torch.full((1024,), float("nan"))
        k.launch(grid, x, o)
        assert torch.equal(o, x + 1.0), more
    assert sorted(key[1] for key in k._plans if key[1] is not None) == [(5, 1, 1)]
    specs = sorted((e[1].inside for e in k._entries), key=len)
    assert specs == [frozenset(), frozenset({GridTile(0, "N", 256)})]


def test_x_times_w_transposed_keeps_its_wgmmas_in_flight():
    """The measured reason for LoopRuns: x @ w^T with 128x256 tiles, launched on 4096^3. With the loop's zero-trip
    path left in, ptxas serialises every wgmma of the loop (C7515; 251 against 190 us on the H200, bf16); with
    the loop known to run, three of the four per K step go out without waiting."""
    import subprocess
    import triton
    from tle.abi import launch_spec
    from tle.compiler import compile_kernel
    path = Path(__file__).parent.parent / "data" / "linear_nt.tle"
    prog = load_program(path.read_text(), str(path))
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"

    def waits_per_wgmma(loop_runs: bool):
        k = check_kernel(prog, "nt", {})
        spec = launch_spec(k, {"M": 4096, "N": 4096, "K": 4096}, (32, 16, 1))
        if not loop_runs:
            spec = dataclasses.replace(spec, inside=frozenset(f for f in spec.inside if not isinstance(f, LoopRuns)))
        cubin = compile_kernel(prog, "nt", {}, spec, num_warps=8).binary.cubin
        path = Path(tempfile.mkdtemp()) / "nt.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([str(cuobjdump), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
        wgmmas = [line for line in sass.splitlines() if "HGMMA" in line]
        assert len(wgmmas) == 4  # BK / 16, the loop body's
        return sum("gsb0" in line for line in wgmmas)
    assert waits_per_wgmma(False) == 4  # as before LoopRuns: the loop may run 0 times
    assert waits_per_wgmma(True) == 1   # the launch's sizes prove it runs
