"""On the native path, ptxas spills are compiled away where that is known to pay (tle/compiler.py):
- a kernel without a dot that ptxas spills once the launch facts have dropped its bounds checks is compiled again
  with them, and the cubin that spills less is kept (_triton_without_spills). examples/rmsnorm.tle over bf16 rows of
  8192 on 8 warps is the measured case: 8 bytes of spills without its masks, none with them (ptxas 12.8 in Triton
  3.6's wheel);
- a kernel with a full-precision f32 dot that spills on its default warps is compiled again on twice as many
  (_fma_dot_without_spills), and so is one with a scan and no dot (_scan_without_spills)."""
from __future__ import annotations

import importlib
import sys
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


# A matmul at full f32 precision (tf32=false) as a user writes it: Triton runs the dot on the FMA units, and on its
# default 4 warps a 128x128 tile with K tiles of 32 spills (tle/compiler.py, _fma_dot_without_spills).
F32_MATMUL = """
kernel mm<BM: int = 128, BN: int = 128, BK: int = 32>(a: tensor<f32>[M, K], b: tensor<f32>[K, N],
                                                      c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]), acc)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""


def f32_matmul(consts: dict, num_warps=None, source: str = F32_MATMUL):
    program = load_program(source, "mm.tle")
    spec = launch_spec(check_kernel(program, "mm", consts), {"M": 4000, "N": 4000, "K": 4000}, (32, 32, 1))
    return compile_kernel(program, "mm", consts, spec, backend="triton", num_warps=num_warps).binary


def test_a_spilling_full_precision_f32_dot_gets_twice_the_default_warps():
    binary = f32_matmul({})
    assert binary.num_threads == 256 and binary.extra["stack_bytes"] == 0
    warps, spilled = binary.extra["spilled_warps"]
    assert warps == 4 and spilled > 0
    assert kernel_attributes(binary.cubin, binary.name).stack == 0


def test_warps_the_caller_gives_are_kept_even_when_they_spill():
    binary = f32_matmul({}, num_warps=4)
    assert binary.num_threads == 128 and binary.extra["stack_bytes"] > 0 and "spilled_warps" not in binary.extra


def test_f32_dots_that_do_not_spill_and_tf32_dots_keep_the_default():
    assert f32_matmul({"BK": 16}).num_threads == 128  # 244 registers on 4 warps, no spill: 4-5% faster than 8
    tf32 = f32_matmul({}, source=F32_MATMUL.replace("acc)\n", "acc, tf32=true)\n"))
    assert tf32.num_threads == 128 and "spilled_warps" not in tf32.extra


def test_tlec_verbose_says_why_the_f32_dot_has_8_warps(tmp_path, capsys):
    from tle.cli import main
    src = tmp_path / "mm.tle"
    src.write_text(F32_MATMUL)
    assert main([str(src), "-v", "--backend", "triton", "--sizes", "M=4000,N=4000,K=4000",
                 "-o", str(tmp_path / "k.cubin")]) == 0
    err = capsys.readouterr().err
    assert "8 warps, the native path's default: twice the 4 its dots call for" in err
    assert "ptxas spilled" in err and "full-precision f32 dot" in err and "no spills" in err


# A column cumsum carried through a loop (benchmarks/scan_warps_probe.py, whose kernels these are, i32 by default): on
# 4 warps ptxas spilled 1288-1292 bytes a thread, and the H200 ran it 1.8x faster on 8; the same tile scanned once per
# program does not spill and stays on 4, where it ran fastest.
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
COLUMN_SCANS = importlib.import_module("scan_warps_probe").SOURCE


def column_scan(name: str, num_warps=None):
    program = load_program(COLUMN_SCANS, "scans.tle")
    grid = (8, 256, 1) if name == "colscan" else (256, 1, 1)
    spec = launch_spec(check_kernel(program, name, {}), {"L": 8192, "D": 4096}, grid)
    return compile_kernel(program, name, {}, spec, backend="triton", num_warps=num_warps).binary


def test_a_spilling_scan_gets_twice_the_default_warps_once():
    binary = column_scan("colscan_loop")
    warps, spilled = binary.extra["spilled_warps"]
    assert binary.num_threads == 256 and warps == 4 and spilled > 1000 and binary.extra["spilled_in"] == "scan"
    assert binary.extra["stack_bytes"] < spilled  # 156 bytes: less, not none, and no second doubling


def test_a_scan_that_does_not_spill_and_given_warps_keep_theirs():
    assert column_scan("colscan").num_threads == 128
    given = column_scan("colscan_loop", num_warps=4)
    assert given.num_threads == 128 and given.extra["stack_bytes"] > 0 and "spilled_warps" not in given.extra
