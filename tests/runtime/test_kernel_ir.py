"""kernel.ir(grid, *args, stage=...): the code a launch would run, compiled for the GPU and not launched, from
tensors on any device: the same specialisation (sizes, strides, alignment, grid facts) and options as the launch."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tle
from tle.runtime.kernel import LaunchError

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = str(ROOT / "examples" / "softmax.tle")


def test_ir_is_what_tlec_gives_for_the_same_sizes_and_grid():
    x = torch.randn(4096, 1000)
    ttir = tle.compile(SOFTMAX).softmax.ir((4096,), x, torch.empty_like(x), BLOCK=1024, stage="ttir")
    tlec = subprocess.run([sys.executable, "-m", "tle.cli", SOFTMAX, "-D", "BLOCK=1024", "--sizes", "M=4096,N=1000",
                           "--grid", "4096", "--emit=ttir"], capture_output=True, text=True, check=True, cwd=ROOT)
    assert ttir == tlec.stdout


def test_ir_follows_the_arguments_and_options():
    k = tle.compile(SOFTMAX).softmax
    ragged, even = torch.randn(64, 1000), torch.randn(64, 1024)
    a = k.ir((64,), ragged, torch.empty_like(ragged), BLOCK=1024, stage="ttir")
    b = k.ir((64,), even, torch.empty_like(even), BLOCK=1024, stage="ttir")
    assert "tt.divisibility = 16" in b and a != b  # a row of 1024 is 16-aligned, one of 1000 is not
    ttgir = k.ir((64,), even, torch.empty_like(even), BLOCK=1024, stage="ttgir", num_warps=8)
    assert '"ttg.num-warps" = 8' in ttgir


def test_ir_routes_auto_and_disassembles_either_path():
    k = tle.compile(SOFTMAX).softmax
    x = torch.randn(64, 1024)
    assert "cuda_tile.entry" in k.ir((64,), x, torch.empty_like(x), stage="tileir")
    for backend in ("triton", "tileir"):
        sass = k.ir((64,), x, torch.empty_like(x), stage="sass", backend=backend)
        assert re.search(r"//## .*softmax\.tle:\d+    ", sass), sass[:2000]


def test_ir_refuses_the_interpreter_and_binary_stages():
    k = tle.compile(SOFTMAX).softmax
    x = torch.randn(8, 1024)
    with pytest.raises(LaunchError, match="backend must be auto, triton or tileir"):
        k.ir((8,), x, torch.empty_like(x), backend="interp")
    with pytest.raises(LaunchError, match="stage 'cubin' is not one of tle, ttir, ttgir, llir, ptx, tileir, sass"):
        k.ir((8,), x, torch.empty_like(x), stage="cubin")


@pytest.mark.parametrize("stage,backend,owner", [("tileir", "triton", "tileir"), ("ttgir", "tileir", "triton")])
def test_ir_of_a_stage_the_backend_has_not_names_its_backend(stage, backend, owner):
    k = tle.compile(SOFTMAX).softmax
    x = torch.randn(8, 1024)
    with pytest.raises(LaunchError, match=f"stage '{stage}' comes from the {owner} backend; this asks for "
                                          f"backend='{backend}' \\(leave backend out, or give backend='{owner}'\\)"):
        k.ir((8,), x, torch.empty_like(x), stage=stage, backend=backend)
