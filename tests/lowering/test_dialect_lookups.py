"""dialects/mlir.py: walking tle, tt and cuda_tile ops asks Python's import system for no dialect module."""
from __future__ import annotations

import os
import sys

from tle.cli import main

CUMSUM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "examples", "cumsum.tle")


class _Recorder:
    """A meta-path finder that only records what the import system was asked to find."""

    def __init__(self):
        self.names: list[str] = []

    def find_spec(self, name, path=None, target=None):
        self.names.append(name)
        return None


def test_lowering_asks_for_no_dialect_module(tmp_path):
    """The bindings look for a Python module of each wrapped op's dialect (<prefix>.<namespace>). tle's namespaces
    have none, and until dialects/mlir.py registered empty ones, every tle, tt and cuda_tile op the lowerings walked
    retried that failed import (48 times to take cumsum.tle to TTIR, about a quarter of the front end's time)."""
    runs = [["--backend=triton", "--emit=ttir"], ["--backend=tileir", "--emit=tileir"]]
    for run in runs:  # the first compile imports tle's own modules
        assert main([CUMSUM, *run, "-o", str(tmp_path / "first")]) == 0
    recorder = _Recorder()
    sys.meta_path.insert(0, recorder)
    try:
        for run in runs:
            assert main([CUMSUM, *run, "-o", str(tmp_path / "second")]) == 0
    finally:
        sys.meta_path.remove(recorder)
    asked = [n for n in recorder.names if n.rsplit(".", 1)[-1] in ("tle", "tt", "cuda_tile")]
    assert not asked, asked
