"""backend="auto" after tileiras: a kernel without a dot that the Tile IR path leaves below 12 warps per SM, even
after the occupancy retries, on a launch of more than two waves, goes to the native path when ptxas fits more warps
there (tle/compiler.py, _native_when_it_fits_more). Mamba's causal conv1d (tests/data/causal_conv1d.tle) ran 0.59x
the native path's speed on Tile IR (H200, benchmarks/RESULTS.md "Loops that read little a step")."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tle.cli import main

CONV = Path(__file__).parent / "data" / "causal_conv1d.tle"
SIZES = {"B": 16, "D": 4096, "L": 2048}
GRID = (16, 256, 8)  # 32768 programs: more than two waves of 132 SMs


def _compiled(grid, backend="auto", occupancy=None):
    from tle.abi import launch_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import compile_kernel
    program = load_program(CONV.read_text(), str(CONV))
    spec = launch_spec(check_kernel(program, "causal_conv1d", {}), SIZES, grid, sms=132)
    return compile_kernel(program, "causal_conv1d", {}, spec, backend=backend, occupancy=occupancy)


def test_few_warps_on_many_waves_take_the_native_path():
    from tle.compiler import _WARPS_PER_SM, _warps_per_sm
    out = _compiled(GRID)
    assert out.backend == "triton" and "ttir" in out.stages and "tileir" not in out.stages
    assert re.match(r"tileiras fits 2 programs of 4 warps per SM \(2\d\d registers a thread\), fewer than 12 warps "
                    r"after its occupancy retries, and the native path fits \d programs? of 4 warps", out.fallback), \
        out.fallback
    assert _warps_per_sm(out.binary, "sm_90")[1] > 8
    assert _WARPS_PER_SM == 12


def test_the_tile_ir_binary_it_replaces_holds_two_programs():
    """backend="tileir" keeps what tileiras gave: 2 programs of 4 warps per SM after the spill retries."""
    from tle.compiler import _warps_per_sm
    out = _compiled(GRID, backend="tileir")
    assert out.backend == "tileir" and out.fallback is None
    assert _warps_per_sm(out.binary, "sm_90") == (2, 8)
    assert out.binary.extra["spilled_under"][0] == 8  # the lowering's hint spilled; the retries ended at 2


@pytest.mark.parametrize("grid", [(1, 16, 8), None])
def test_a_launch_of_at_most_two_waves_or_unknown_keeps_tile_ir(grid):
    """128 programs fit one wave: every program has an SM slot at 2 per SM, so no more warps would run."""
    out = _compiled(grid)
    assert out.backend == "tileir" and out.fallback is None


def test_an_occupancy_the_caller_gives_keeps_tile_ir():
    out = _compiled(GRID, occupancy=2)
    assert out.backend == "tileir" and out.fallback is None


def test_tlec_v_says_why(tmp_path, capsys):
    assert main([str(CONV), "-v", "--sizes", "B=16,D=4096,L=2048", "--grid", "16,256,8", "--sms", "132",
                 "-o", str(tmp_path / "c.cubin")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"compiled for sm_90 on the native CUDA path \(Triton\): tileiras fits 2 programs of 4 warps "
                     r"per SM", err), err
    assert "ptxas:" in err
