"""The output check and side effects of tuning: in-place launches, fixed grids, the base configuration not covering
the problem, tensors written only under some constants, grids without programs (the interpreter on the CPU)."""
import os

import pytest
import torch

import tle
from tle.runtime import tuning
from tle.runtime.tuning import TuneError, TuneSpace
from tuning_helpers import EXAMPLES, cdiv

SOFTMAX = os.path.join(EXAMPLES, "softmax.tle")
VECTOR_ADD = os.path.join(EXAMPLES, "vector_add.tle")


def claims(fast: dict):
    """A timer that says the configurations with these values are the fastest (1 ms against 2 ms)."""
    return lambda config, trial, reps: 1e-3 if all(config.get(k) == v for k, v in fast.items()) else 2e-3


def test_an_in_place_launch_keeps_the_output_check():
    """softmax(x, x): poisoning the output destroyed the input, every configuration "matched" the NaNs, and the
    too-small BLOCK (which leaves columns 128..299 as they were) was stored and served to later launches."""
    space = {"softmax": {"BLOCK": [512, 128], "timer": claims({"BLOCK": 128}), "on_cpu": True}}
    mod = tle.compile(SOFTMAX, tune=space)
    x = torch.randn(8, 300)
    want = torch.softmax(x, dim=1)
    mod.softmax[(8,)](x, x)
    assert torch.allclose(x, want, atol=1e-5), "the in-place launch computed the softmax of the input, once"
    row = tuning.rows()[0]
    assert row["config"] == {"BLOCK": 512} and row["stats"]["failed"] == 1
    later = tle.compile(SOFTMAX, tune=space)  # an out-of-place launch of the bucket, in a fresh module
    a, b = torch.randn(8, 300), torch.empty(8, 300)
    later.softmax[(8,)](a, b)
    assert torch.allclose(b, torch.softmax(a, dim=1), atol=1e-5)


def test_tune_of_an_in_place_launch_changes_nothing():
    mod = tle.compile(SOFTMAX, tune={"softmax": {"BLOCK": [512, 1024], "timer": claims({"BLOCK": 1024}),
                                                 "on_cpu": True}})
    x = torch.randn(8, 300)
    before = x.clone()
    assert mod.softmax.tune((8,), x, x).config == {"BLOCK": 1024}
    assert torch.equal(x, before)


def test_a_fixed_grid_is_part_of_the_key():
    """A callable grid's result (BLOCK=256, 4 programs) was served to a launch with the fixed grid (1,), where only
    BLOCK=1024 covers the 1000 elements: 744 were left unwritten."""
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [1024, 256], "timer": claims({"BLOCK": 256}),
                                                       "on_cpu": True}})
    x, out = torch.randn(1000), torch.empty(1000)
    mod.vector_add[lambda m: (cdiv(m["N"], m["BLOCK"]),)](x, x, out)
    assert torch.equal(out, x + x)
    out.zero_()
    mod.vector_add[(1,)](x, x, out)
    assert torch.equal(out, x + x)
    assert sorted(r["config"]["BLOCK"] for r in tuning.rows()) == [256, 1024]
    assert sum('"grid": [1]' in r["fixed"] for r in tuning.rows()) == 1
    mod.vector_add[(1, 1, 1)](x, x, out)  # the same grid written otherwise: the same key
    assert len(tuning.rows()) == 2


def test_the_base_not_covering_is_not_the_reference():
    """The base (BLOCK=256, the first value) leaves 244 of 500 elements unwritten under the grid (1,); the only
    covering configuration (512) was dropped for differing from it, and the base stored."""
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [256, 512], "timer": lambda c, t, r: 1e-3,
                                                       "on_cpu": True}})
    x, out = torch.randn(500), torch.empty(500)
    mod.vector_add[(1,)](x, x, out)
    assert torch.equal(out, x + x)
    row = tuning.rows()[0]
    assert row["config"] == {"BLOCK": 512} and row["default_time_s"] is None
    assert "unwritten" in row["stats"]["not_timed"]["wrong output"]["first"]


def test_a_config_that_leaves_elements_unwritten_fails_after_the_reference():
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [512, 256], "timer": claims({"BLOCK": 256}),
                                                       "on_cpu": True}})
    x, out = torch.randn(500), torch.empty(500)
    result = mod.vector_add.tune((1,), x, x, out)
    assert result.config == {"BLOCK": 512}
    assert "unwritten" in result.stats["not_timed"]["wrong output"]["first"]


def test_a_grid_without_programs_stores_nothing():
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [256, 512], "timer": lambda c, t, r: 1e-3,
                                                       "on_cpu": True}})
    x = torch.randn(500)
    with pytest.raises(TuneError, match="no program"):
        mod.vector_add.tune(lambda m: (0,), x, x, torch.empty(500))
    assert tuning.rows() == []


BRANCH = """
kernel pick<BLOCK: int = 64, F: bool = false>(x: tensor<f32>[N], y: tensor<f32>[N], z: tensor<f32>[N]) {
    let i = program_id(0)
    let t = load(x, tile=[BLOCK], at=[i])
    if F {
        store(y, t * 2.0, at=[i])
    } else {
        store(z, t * 3.0, at=[i])
    }
}
"""


def test_tensors_written_under_any_configuration_are_restored():
    """Only the first configuration's written tensors (z, under F=false) were saved: F=true left y modified."""
    mod = tle.compile(BRANCH, tune={"pick": {"F": [False, True], "timer": claims({"F": True}), "on_cpu": True}})
    x, y, z = torch.randn(256), torch.zeros(256), torch.zeros(256)
    mod.pick.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, y, z)
    assert torch.equal(y, torch.zeros(256)) and torch.equal(z, torch.zeros(256))


def test_reference_must_match_the_outputs():
    mod = tle.compile(SOFTMAX)
    x, y = torch.randn(8, 300), torch.empty(8, 300)
    mod.softmax.tune_space = TuneSpace({"BLOCK": [512, 1024]}, reference=lambda args: [], on_cpu=True,
                                       timer=lambda c, t, r: 1e-3)
    with pytest.raises(TuneError, match=r"the 1 tensor\(s\) the kernel writes, in order: y \(8, 300\); it returned "
                                        r"\[\]"):
        mod.softmax.tune((8,), x, y)
    mod.softmax.tune_space.reference = lambda args: torch.softmax(args[0], dim=1)  # one tensor: fine
    assert mod.softmax.tune((8,), x, y).config in ({"BLOCK": 512}, {"BLOCK": 1024})
