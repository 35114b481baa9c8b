"""tlec -v on the Tile IR path says how many products the lowering fused to fma: their results round once, where
the interpreter rounds the product and the sum apart (docs/numerics.md)."""
from __future__ import annotations

import os

from tle.cli import main

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_tlec_v_counts_the_products_fused_in_a_dot_kernel(tmp_path, capsys):
    """attention's backward dq (dots) fuses `qk * scale - lse` and one more; softmax (no dot) keeps them apart."""
    dq = [os.path.join(EXAMPLES, "attention_bwd.tle"), "--kernel", "attention_bwd_dq"]
    assert main(dq + ["--backend", "tileir", "-v", "-o", str(tmp_path / "dq.cubin")]) == 0
    assert "tlec: kernel 'attention_bwd_dq': 2 products added once fused to fma" in capsys.readouterr().err
    softmax = [os.path.join(EXAMPLES, "softmax.tle")]
    assert main(softmax + ["--backend", "tileir", "-v", "-o", str(tmp_path / "s.cubin")]) == 0
    assert "fma" not in capsys.readouterr().err


def test_tlec_v_says_whether_a_slices_first_element_is_aligned(tmp_path, capsys):
    """Tile IR: a window of rows of 32 f16 (64 bytes) starts 16-byte aligned at any row, which --sizes lets the
    launch prove; without sizes the row stride is unknown, and tlec -v says the alignment is not proven."""
    golden = [os.path.join(os.path.dirname(EXAMPLES), "tests", "filecheck", "slice.tle"), "--backend", "tileir",
              "-v", "-o", str(tmp_path / "w.cubin")]
    assert main(golden + ["--sizes", "T=1000,B1=9"]) == 0
    err = capsys.readouterr().err
    assert "the slice of 'x' at 10:14: its first element is 16-byte aligned" in err
    assert "the slice of 'y' at 12:11: its first element is 16-byte aligned" in err
    assert main(golden) == 0
    assert "the slice of 'x' at 10:14: its first element is not proven 16-byte aligned" in capsys.readouterr().err
