"""The `asserts` option: a kernel's assert()s compiled into its GPU code (launch option `asserts=True`,
`tle.compile(..., asserts=True)`, `tlec --asserts`). Without it both GPU lowerings drop them (the interpreter always
checks them); with it the native path calls __assertfail and Tile IR emits its assert, each binary keyed apart."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tle
from tle.compiler import compile_kernel
from tle.check import load_program
from tle.runtime.kernel import LaunchError

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "filecheck" / "asserts_on_gpu.tle"


def _cubin(backend: str, asserts: bool) -> bytes:
    program = load_program(GOLDEN.read_text(), str(GOLDEN))
    out = compile_kernel(program, "checked", {}, backend=backend, asserts=asserts)
    assert out.backend == backend
    return out.binary.cubin


def test_the_native_binary_calls_assertfail_only_with_the_option():
    assert b"__assertfail" in _cubin("triton", True)
    assert b"__assertfail" not in _cubin("triton", False)


def test_the_tile_ir_binary_holds_the_message_and_location_only_with_the_option():
    with_asserts = _cubin("tileir", True)
    assert b"x positive" in with_asserts and b"asserts_on_gpu.tle:10" in with_asserts  # the assert's line
    assert b"x positive" not in _cubin("tileir", False)


def test_the_option_keys_its_own_binary_and_false_keeps_the_old_key():
    k = tle.compile(str(GOLDEN)).checked
    from tle.abi import default_spec
    from tle.check import check_kernel
    checked = check_kernel(k.program, "checked", {})
    spec = default_spec(checked)
    plain = k._binary_key(checked, spec, "triton", "sm_90", 4, 3)
    assert k._binary_key(checked, spec, "triton", "sm_90", 4, 3, None, False) == plain
    assert k._binary_key(checked, spec, "triton", "sm_90", 4, 3, None, True) != plain


def test_a_launch_checks_the_option_and_the_interpreter_checks_asserts_anyway():
    k = tle.compile(str(GOLDEN)).checked
    x, y = torch.rand(100) + 0.5, torch.empty(100)
    k[(2,)](x, y, 100, asserts=True)
    torch.testing.assert_close(y, torch.log(x))
    with pytest.raises(LaunchError, match="asserts must be True or False"):
        k[(2,)](x, y, 100, asserts="on")
    with pytest.raises(tle.TleError, match="assert failed: x positive"):
        k[(2,)](-x, y, 100)  # the interpreter, without the option


def test_compile_checks_its_option():
    with pytest.raises(TypeError, match="asserts must be True or False"):
        tle.compile(str(GOLDEN), asserts="yes")
    assert tle.compile(str(GOLDEN), asserts=True).checked.asserts is True


# ---- on the GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_asserts_that_hold_cost_nothing_but_time(backend):
    mod = tle.compile(str(GOLDEN), asserts=True)
    x = torch.rand(1000, device="cuda") + 0.5
    y = torch.full_like(x, float("nan"))
    mod.checked[(16,)](x, y, 100, backend=backend)  # n < 1000: both asserts hold
    torch.cuda.synchronize()
    assert mod.checked.last_backend == backend
    torch.testing.assert_close(y, torch.log(x))


# A failing device assert leaves the CUDA context unusable, so it runs in a child process of its own.
CHILD = """
import sys, torch, tle
mod = tle.compile(sys.argv[1])
x = torch.rand(1000, device="cuda") + 0.5
x[700] = -1.0
y = torch.empty_like(x)
mod.checked[(16,)](x, y, 100, backend=sys.argv[2], asserts=sys.argv[3] == "on")
torch.cuda.synchronize()
print("finished")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_an_assert_that_fails_stops_the_launch_and_says_where(backend):
    run = lambda flag: subprocess.run([sys.executable, "-c", CHILD, str(GOLDEN), backend, flag],  # noqa: E731
                                      capture_output=True, text=True, timeout=300)
    off = run("off")
    assert off.returncode == 0 and "finished" in off.stdout, off.stderr[-2000:]  # compiled away: log(-1) is NaN
    on = run("on")
    assert on.returncode != 0 and "finished" not in on.stdout
    said = on.stdout + on.stderr
    assert "x positive" in said and "asserts_on_gpu.tle" in said, said[-3000:]
