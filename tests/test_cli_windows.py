"""tlec -v on the Tile IR path says, per slice, whether the launch proves its first element 16-byte aligned: what
vector and TMA accesses through the window need (docs/language.md, "Memory: slices of a tensor")."""
from __future__ import annotations

import os

from tle.cli import main

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "filecheck", "slice.tle")


def test_tlec_v_says_whether_a_slices_first_element_is_aligned(tmp_path, capsys):
    """Tile IR: a window of rows of 32 f16 (64 bytes) starts 16-byte aligned at any row, which --sizes lets the
    launch prove; without sizes the row stride is unknown, and tlec -v says the alignment is not proven."""
    golden = [GOLDEN, "--backend", "tileir", "-v", "-o", str(tmp_path / "w.cubin")]
    assert main(golden + ["--sizes", "T=1000,B1=9"]) == 0
    err = capsys.readouterr().err
    assert "the slice of 'x' at 10:14: its first element is 16-byte aligned" in err
    assert "the slice of 'y' at 12:11: its first element is 16-byte aligned" in err
    assert main(golden) == 0
    assert "the slice of 'x' at 10:14: its first element is not proven 16-byte aligned" in capsys.readouterr().err
