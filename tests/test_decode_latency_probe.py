"""benchmarks/decode_latency_probe.py on the CPU: its case syntax, its default cases (the benchmark's Tile IR decode
configurations), and that each variant really changes the latency hint in the Tile IR the runtime compiles."""
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
probe = pytest.importorskip("decode_latency_probe")

from tle.check import load_program  # noqa: E402
from tle.compiler import compile_kernel  # noqa: E402


def test_parse_case():
    assert probe.parse_case("16x4096x4096/bf16/16x64x256/1/swap") == ((16, 4096, 4096), "bf16", (16, 64, 256), 1,
                                                                      True)
    assert probe.parse_case("128x4096x14336/f16/128x64x128/2")[3:] == (2, False)
    for bad in ("16x4096x4096/f32/16x64x256/1", "16x4096x4096/bf16/16x64x256", "1x2x3/bf16/1x2x3/1/swapped"):
        with pytest.raises(SystemExit, match="--cases"):
            probe.parse_case(bad)


def test_default_cases_are_the_benchmarks_tileir_decode_configurations():
    import bench
    cases = [probe.parse_case(c) for c in probe.default_cases().split(",")]
    for (m, n, k), (_, (bm, bn, bk, split, swap)) in bench.DECODE_CONFIGS.items():
        assert ((m, n, k), "bf16", (bm, bn, bk), split, swap) in cases


@pytest.mark.parametrize("variant, want", [("auto", {"4"}), ("none", set()), ("6", {"6"})])
def test_each_variant_sets_the_view_loads_latency(monkeypatch, variant, want):
    """The swapped decode kernel's [64, 16] accumulator takes 4 from the lowering itself (auto)."""
    import tle.lowering.tle_to_tileir as lowering
    monkeypatch.setattr(lowering, "TileirOptions", lowering.TileirOptions)  # undone after the test
    probe.force_latency(variant)
    program = load_program(open(os.path.join(ROOT, "examples", "matmul_splitk.tle")).read(), "matmul_splitk.tle")
    consts = {"BM": 16, "BN": 64, "BK": 256, "SPLIT": 1, "SWAP": True}
    tileir = compile_kernel(program, "matmul_splitk", consts, backend="tileir", stop="tileir").stages["tileir"]
    loads = [line for line in tileir.splitlines() if "load_view_tko" in line]
    assert loads and {m for line in loads for m in re.findall(r"latency = (\d+)", line)} == want
