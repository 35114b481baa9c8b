"""On the native path, a kernel without a dot that ptxas spills once the launch facts have dropped its bounds checks
is compiled again with them, and the cubin that spills less is kept (tle/compiler.py, _triton_without_spills).
examples/rmsnorm.tle over bf16 rows of 8192 on 8 warps is the measured case: 8 bytes of spills without its masks,
none with them (ptxas 12.8 in Triton 3.6's wheel)."""
from __future__ import annotations

from pathlib import Path

from tle.abi import launch_spec
from tle.check import check_kernel, load_program
from tle.compiler import compile_kernel
from tle.targets.binary import kernel_attributes

RMSNORM = Path(__file__).parent.parent / "examples" / "rmsnorm.tle"


def compiled(block: int, m: int, n: int, dtype: str = "bf16"):
    program = load_program(RMSNORM.read_text(), str(RMSNORM))
    consts = {"BLOCK": block, "T": dtype}
    spec = launch_spec(check_kernel(program, "rmsnorm", consts), {"M": m, "N": n}, (m, 1, 1))
    return compile_kernel(program, "rmsnorm", consts, spec, backend="triton", num_warps=8, num_stages=3)


def test_the_spilling_row_keeps_its_masks_and_no_longer_spills():
    out = compiled(8192, 16384, 8192)
    binary = out.binary
    assert binary.extra["spilled_unchecked"] == 8 and binary.extra["stack_bytes"] == 0
    assert kernel_attributes(binary.cubin, binary.name).stack == 0  # the cubin kept is the one that does not spill
    assert "mask" in out.stages["ttir"] or "arith.cmpi" in out.stages["ttir"]  # the row's bounds check is back
    assert "tle.inside" not in out.stages["tle"]  # every stage kept is the retried one


def test_a_row_that_does_not_spill_keeps_the_facts():
    out = compiled(4096, 8192, 4096)
    assert out.binary.extra["stack_bytes"] == 0 and "spilled_unchecked" not in out.binary.extra
    assert "tle.inside" in out.stages["tle"]  # the checks stay dropped


def test_the_triton_binary_records_registers_and_stack():
    extra = compiled(1024, 4096, 1024).binary.extra
    assert 0 < extra["registers"] <= 255 and extra["stack_bytes"] == 0


def test_tlec_verbose_says_why_the_checks_stay(tmp_path, capsys):
    from tle.cli import main
    assert main([str(RMSNORM), "-v", "--backend", "triton", "-D", "BLOCK=8192", "-D", "T=bf16", "--num-warps", "8",
                 "--sizes", "M=16384,N=8192", "--grid", "16384", "-o", str(tmp_path / "k.cubin")]) == 0
    err = capsys.readouterr().err
    assert "no spills" in err
    assert "without bounds checks ptxas spilled 8 bytes per thread, so the cubin keeps the checks" in err
