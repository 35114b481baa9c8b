"""print() on both GPU paths: the device's printf reaches the process's stdout (Triton's tt.print natively, one line
per element; Tile IR's print_tko). The exact text is each backend's own; this checks that every print shows its
label and that the values get through."""
import os

import pytest
import torch

import tle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_print_reaches_stdout(backend, capfd):
    mod = tle.compile(os.path.join(ROOT, "tests", "filecheck", "print.tle"))
    x = torch.full((8,), 1.5, device="cuda", dtype=torch.float16)
    n = torch.full((8,), 123456789012, device="cuda", dtype=torch.int64)
    capfd.readouterr()
    mod.show[(2,)](x, n, backend=backend)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert mod.show.last_backend == backend
    assert "t =" in out and "program:" in out and "done:" in out, out[:2000]
    assert "123456789012" in out and "1.5" in out, out[:2000]
