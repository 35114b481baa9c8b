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
