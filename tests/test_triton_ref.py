"""benchmarks/triton_ref.py, the hand-written Triton kernels the benchmark holds tle to, against torch on Triton's
CPU interpreter: every reference on examples/reference.py's small and ragged shapes, and every example without a
reference said so rather than a crash."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_reference_matches_torch_on_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "triton_ref.py")], env=env,
                         capture_output=True, text=True, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 0 and log.rstrip().endswith("0 failures"), log[-3000:]
    for name in ("vector_add", "softmax", "layernorm", "rmsnorm", "swiglu", "matmul", "cumsum", "matmul_splitk",
                 "matmul_grouped"):
        assert any(line.startswith(name + " ") and line.rstrip().endswith("ok") for line in log.splitlines()), name
    assert "matmul_persistent skipped: no hand-written reference" in log
