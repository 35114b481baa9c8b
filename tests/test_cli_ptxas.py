"""tlec -v on the native path reports what ptxas says about the kernel: registers, spills, and each "Potential
Performance Loss" remark (wgmmas serialised) as a warning at the source line of the dot in a loop it is about (ptxas
names none), with what to try."""
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


def test_a_pipeline_without_registers_is_a_warning_at_the_loops_dot(nt, tmp_path, capsys):
    err = stderr_of(capsys, nt, "-v", "--backend", "triton", "--num-warps", "4", "-o", str(tmp_path / "k.cubin"),
                    *LAUNCH)
    assert "ptxas: 255 registers per thread" in err and "bytes spilled to local memory" in err
    assert f"{nt}:8:15: warning: ptxas: wgmma.mma_async instructions are serialized due to insufficient register " \
           "resources" in err
    assert "\n            acc = dot(load(x, " in err and "\n                  ^^^" in err  # the source line and carets
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


def test_wgmma_remarks_go_to_the_dot_that_accumulates_with_the_others_as_notes():
    """Attention's backward: the remark about accumulator registers belongs to the first dot adding into a carried
    accumulator, not to the score dot before it; every other dot in a loop is a note."""
    from tle.check import check_kernel, load_program
    from tle.cli import _wgmma_spans
    src = """
kernel k<B: int = 64>(q: tensor<f16>[N, 64], k: tensor<f16>[N, 64], dv: tensor<f32>[N, 64]) {
    let kt = load(k, tile=[B, 64], at=[program_id(0), 0])
    var acc = zeros<f32>[B, 64]
    for j in range(program_id(0), cdiv(N, B)) {
        let qt = load(q, tile=[B, 64], at=[j, 0])
        let p = dot(qt, transpose(kt))
        acc = dot(transpose(cast<f16>(p)), qt, acc)
    }
    store(dv, acc, at=[program_id(0), 0])
}
"""
    kernel = check_kernel(load_program(src, "k.tle"), "k", {})
    at, others = _wgmma_spans(kernel)
    assert (at.line, at.col) == (8, 15) and [(s.line, s.col) for s in others] == [(7, 17)]
    no_loop = check_kernel(load_program("""
kernel k(q: tensor<f16>[64, 64], o: tensor<f32>[64, 64]) {
    let t = load(q, tile=[64, 64])
    store(o, dot(t, t))
}
""", "k.tle"), "k", {})
    assert _wgmma_spans(no_loop) == (no_loop.span, [])
