"""tlec -v on the native path reports what ptxas says about the kernel: registers, spills, and each "Potential
Performance Loss" remark (wgmmas serialised) as a warning at the kernel's source line, with what to try."""
from __future__ import annotations

from pathlib import Path

import pytest

from tle.cli import main

NT = Path(__file__).parent / "data" / "linear_nt.tle"  # x @ w^T, 128x256 tiles; the kernel is on line 4
LAUNCH = ["--sizes", "M=4096,N=4096,K=4096", "--grid", "32,16"]


@pytest.fixture
def nt():
    return str(NT)


def stderr_of(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().err


def test_a_pipeline_without_registers_is_a_warning_at_the_kernel(nt, tmp_path, capsys):
    err = stderr_of(capsys, nt, "-v", "--backend", "triton", "--num-warps", "4", "-o", str(tmp_path / "k.cubin"),
                    *LAUNCH)
    assert "ptxas: 255 registers per thread" in err and "bytes spilled to local memory" in err
    assert f"{nt}:4:1: warning: ptxas: wgmma.mma_async instructions are serialized due to insufficient register " \
           "resources" in err
    assert "    kernel nt<" in err and "\n    ^^^" in err  # the source line and carets
    assert "note: the accumulators and the pipeline's operands do not fit the registers" in err


def test_the_zero_trip_path_warning_goes_away_when_the_loop_is_known_to_run(nt, tmp_path, capsys):
    out = str(tmp_path / "k.cubin")
    scalar_stop = tmp_path / "nts.tle"  # the same loop, stopping at a scalar parameter: no size says it runs
    scalar_stop.write_text(NT.read_text().replace("y: tensor<bf16>[M, N]) {", "y: tensor<bf16>[M, N], kt: i32) {")
                           .replace("range(cdiv(K, BK))", "range(kt)"))
    err = stderr_of(capsys, str(scalar_stop), "-v", "--backend", "triton", *LAUNCH, "-o", out)
    assert "warning: ptxas: wgmma.mma_async instructions are serialized due to non wgmma instructions defining " \
           "accumulator registers" in err
    assert "one that stops at a scalar parameter is not" in err
    err = stderr_of(capsys, nt, "-v", "--backend", "triton", *LAUNCH, "-o", out)
    assert "no spills" in err and "warning" not in err


def test_without_verbose_nothing_is_said(nt, tmp_path, capsys):
    assert stderr_of(capsys, nt, "--backend", "triton", "--num-warps", "4", *LAUNCH,
                     "-o", str(tmp_path / "k.cubin")) == ""


def test_verbose_says_how_many_programs_an_sm_holds_and_why(nt, tmp_path, capsys):
    err = stderr_of(capsys, nt, "-v", "--backend", "triton", *LAUNCH, "-o", str(tmp_path / "k.cubin"))
    # 8 warps (a 128x256 accumulator) and a three-stage pipeline of 128x64 + 256x64 bf16 tiles in shared memory
    assert "256 threads, 147456 bytes of shared memory, no spills: 1 program per SM (the limit: shared memory)" in err
    rows = tmp_path / "rows.tle"
    rows.write_text("kernel rows<BLOCK: int = 4096>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {\n"
                    "    let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])\n"
                    "    store(y, t * rsqrt(sum(t * t, axis=1, keepdims=true) / N), at=[program_id(0), 0])\n}\n")
    err = stderr_of(capsys, str(rows), "-v", "--backend", "triton", "--sizes", "M=4096,N=4096", "--grid", "4096",
                    "-o", str(tmp_path / "r.cubin"))
    assert "128 threads" in err and "programs per SM (the limit: registers; smaller tiles need fewer)" in err


def test_verbose_says_why_the_default_num_warps(nt, tmp_path, capsys):
    out = str(tmp_path / "k.cubin")
    err = stderr_of(capsys, nt, "-v", "--backend", "triton", *LAUNCH, "-o", out)
    assert "kernel 'nt': 8 warps, the native path's default: its dots hold 32768 values at once" in err
    wide = tmp_path / "wide.tle"
    wide.write_text("kernel wide<BLOCK: int = 16384>(x: tensor<f32>[N], y: tensor<f32>[N]) {\n"
                    "    store(y, exp(load(x, tile=[BLOCK], at=program_id(0))), at=program_id(0))\n}\n")
    err = stderr_of(capsys, str(wide), "-v", "--backend", "triton", "-o", out)
    assert "16 warps, the native path's default: no dot; its largest tile has 16384 elements, and its values " \
           "stay in their threads: about 32 a thread" in err and "512 threads" in err
    err = stderr_of(capsys, str(wide), "-v", "--backend", "triton", "--num-warps", "4", "-o", out)
    assert "default" not in err and "128 threads" in err  # a count the caller names is not explained
