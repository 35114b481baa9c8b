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
