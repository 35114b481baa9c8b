"""Native binaries that ask for more shared memory than a program may have (232448 bytes on sm_90) cannot launch:
on the default warps the compiler takes fewer until the kernel fits; on warps the caller gives it is an error at
the kernel, before any launch (tle/compiler.py _within_shared_memory)."""
from __future__ import annotations

import pytest

from tle.check import load_program
from tle.cli import main
from tle.compiler import compile_kernel
from tle.diagnostics import TleError
from tle.targets.binary import max_shared_per_program

# a cumsum along axis 0 of a 256 x 256 i32 tile: on the default 16 warps its values cross warps through a copy of
# the whole tile in shared memory, 262144 bytes
COLSCAN = """kernel colscan(x: tensor<i32>[M, N], y: tensor<i32>[M, N]) {
    let t = load(x, tile=[256, 256])
    store(y, cumsum(t, axis=0))
}
"""


def test_the_default_warps_give_way_to_fewer_when_shared_memory_does_not_fit():
    out = compile_kernel(load_program(COLSCAN, "colscan.tle"), "colscan", {})
    assert out.binary.extra["shared_warps"] == (16, 262144)
    assert out.binary.num_threads == 8 * 32
    assert out.binary.shared_bytes() <= max_shared_per_program("sm_90") == 232448


def test_warps_the_caller_gives_that_do_not_fit_are_an_error_at_the_kernel():
    with pytest.raises(TleError, match=r"kernel 'colscan' needs more shared memory than sm_90 gives a program "
                                       r"\(232448 bytes\): 262144 bytes on 16 warps") as e:
        compile_kernel(load_program(COLSCAN, "colscan.tle"), "colscan", {}, num_warps=16)
    assert e.value.span.line == 1


def test_tlec_verbose_says_why_the_kernel_has_fewer_warps(tmp_path, capsys):
    path = tmp_path / "colscan.tle"
    path.write_text(COLSCAN)
    assert main([str(path), "--backend=triton", "-v", "-o", str(tmp_path / "c.cubin")]) == 0
    assert ("8 warps, the native path's default: not the 16 its tiles call for" in capsys.readouterr().err)


def test_stages_the_caller_gives_that_do_not_fit_are_an_error_not_fewer_warps():
    # as for given warps: a matmul given 8 stages fitted only on 2 warps, spilling, which its author did not ask for
    with pytest.raises(TleError, match=r"\(232448 bytes\) with num_stages=2: 262144 bytes on 16 warps") as e:
        compile_kernel(load_program(COLSCAN, "colscan.tle"), "colscan", {}, num_stages=2)
    assert "with num_stages left to its default, the compiler tries fewer warps itself" in str(e.value)


def test_tlec_refuses_warps_stages_and_archs_no_gpu_takes(tmp_path, capsys):
    path = tmp_path / "colscan.tle"
    path.write_text(COLSCAN)
    for argv, said in ((["--num-warps", "64"], "--num-warps 64: a power of two from 1 to 32"),
                       (["--num-warps", "3"], "--num-warps 3: a power of two from 1 to 32"),
                       (["--num-stages", "0"], "--num-stages 0: from 1 to 8"),
                       (["--arch", "sm_999"], "--arch sm_999: not an NVIDIA GPU architecture ptxas knows"),
                       (["--arch", "sm_90a"], "--arch sm_90a: write sm_90")):
        with pytest.raises(SystemExit) as exit_:
            main([str(path), "--emit=ttir", *argv])
        assert exit_.value.code == 2
        assert said in capsys.readouterr().err
