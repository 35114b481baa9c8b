"""benchmarks/probe_survey.py on the CPU: the probe's own cases built on meta tensors, each `auto` launch compiled
(not run) as the runtime would for an H200, one line per kernel a case launches."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
survey = pytest.importorskip("probe_survey")


def test_greedy_shows_the_twelve_warp_retry_only_past_two_waves():
    lines = survey.survey(["greedy"], 132)
    assert len(lines) == 8  # 4 shapes x 2 dtypes, one kernel each
    by_case = {line.split(" [")[0]: line for line in lines}
    assert "few_warps" in by_case["greedy 1024x128256 bfloat16"]           # 1024 programs: more than two waves
    assert "4 programs per SM" in by_case["greedy 1024x128256 bfloat16"]
    assert "few_warps" not in by_case["greedy 64x128256 bfloat16"]         # under one wave
    assert "2 programs per SM (registers)" in by_case["greedy 64x128256 bfloat16"]
    assert all(" tileir: " in line for line in lines)                      # the path auto takes


def test_a_case_launched_through_its_own_code_says_so():
    lines = survey.survey(["adam"], 132)
    assert lines and all(line.endswith("no auto launch (launched through its own code)") for line in lines)


def test_a_case_auto_sends_to_the_native_path_says_why():
    """quant_rows' 16384x1024 bf16 rows take the native path under the short-16-bit-rows rule; its f32 rows and its
    rows of 4096 stay on Tile IR (lowering/tileir_legality.py _short_16bit_rows)."""
    by_case = {line.split(" [")[0]: line for line in survey.survey(["quant_rows"], 132)}
    assert " triton: " in by_case["quant_rows 16384x1024 bfloat16"]
    assert "-- a row kernel on 16-bit tiles of at most 1024 elements" in by_case["quant_rows 16384x1024 bfloat16"]
    f32 = by_case["quant_rows 16384x1024 float32"]
    assert " tileir: " in f32 and "--" not in f32
    assert " tileir: " in by_case["quant_rows 8192x4096 bfloat16"]


def test_a_native_kernel_limited_by_its_shared_memory_says_so():
    """A Triton cubin asks for its shared memory at launch (Binary.shared_mem), not in the ELF: the survey counts it,
    as tlec -v does. conv2d on the native path (the gathered-operand rule), 3x3 over 64 channels: 118 registers
    would allow 4 programs of 128 threads per SM, its shared memory 3."""
    by_case = {line.split(" [")[0]: line for line in survey.survey(["conv2d"], 132)}
    line = by_case["conv2d 32x56x56x64 -> 64, 3x3 stride 1 f16"]
    assert " triton: " in line and "3 programs per SM (shared memory)" in line
