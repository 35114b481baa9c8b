"""The launch hook on the CPU (the interpreter), with an injected timer where speed does not matter."""
import io
import os

import pytest
import torch

import tle
from tle.runtime import tuning
from tle.runtime.tuning import TuneError, TuneSpace
from tuning_helpers import EXAMPLES, HISTOGRAM, FakeTimer, cdiv, matmul_grid



class ResettingTimer(FakeTimer):
    """Runs the trial as the CUDA timer does (reset, run) `reps` times, so that side effects would pile up."""

    def __call__(self, config, trial, reps):
        for _ in range(min(reps, 3)):
            trial.reset()
            trial.run()
        return super().__call__(config, trial, reps)


def test_tunes_on_first_call_then_uses_the_plan_cache(monkeypatch):
    mod = tle.compile(os.path.join(EXAMPLES, "matmul.tle"), backend="interp")
    timer = FakeTimer({"BM": 32, "BN": 16, "BK": 32})
    mod.matmul.tune_space = TuneSpace({"BM": [16, 32], "BN": [16, 32], "BK": [16, 32]}, timer=timer, on_cpu=True)
    a, b = torch.randn(70, 40).half(), torch.randn(40, 48).half()
    c = torch.empty(70, 48).half()
    mod.matmul[matmul_grid](a, b, c)
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert mod.matmul.last_backend == "interp"
    assert len(timer.calls) > 0
    assert len(mod.matmul._plans) == 1

    def fail(*args, **kwargs):
        raise AssertionError("a cached plan must not look up the tuning again")
    monkeypatch.setattr(tuning, "configure", fail)
    c.zero_()
    mod.matmul[matmul_grid](a, b, c)  # same signature: the plan, nothing else
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    entries = list(mod.matmul._entries.values())
    assert len(entries) == 1 and entries[0].compiled.kernel.constants["BM"] == 32, "only the winner stays loaded"


def test_pinned_parameters_are_not_tuned():
    mod = tle.compile(os.path.join(EXAMPLES, "matmul.tle"))
    timer = FakeTimer({"BM": 32, "BN": 16})
    mod.matmul.tune_space = TuneSpace({"BM": [16, 32], "BN": [16, 32]}, timer=timer, on_cpu=True)
    a, b, c = torch.randn(40, 32).half(), torch.randn(32, 40).half(), torch.empty(40, 40).half()
    mod.matmul[matmul_grid](a, b, c, BM=16, BK=16)
    assert {tuple(cfg) for cfg in timer.calls} == {("BN",)}
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert all(r["config"] == {"BN": 16} and '"BM": 16' in r["fixed"] for r in tuning.rows())


def test_a_grid_that_does_not_follow_the_constants_is_caught_by_the_check():
    """A fixed grid of 1 x 1 programs covers the 32 x 32 output only with BM = BN = 32: BM = 16 leaves rows unwritten
    (still NaN from the poisoning), so it is dropped however fast the timer says it is."""
    mod = tle.compile(os.path.join(EXAMPLES, "matmul.tle"))
    timer = FakeTimer({"BM": 16})
    mod.matmul.tune_space = TuneSpace({"BM": [32, 16]}, timer=timer, on_cpu=True)
    a, b, c = torch.randn(32, 32).half(), torch.randn(32, 32).half(), torch.empty(32, 32).half()
    result = mod.matmul.tune((1, 1, 1), a, b, c, BK=16, BN=32)
    assert result.config == {"BM": 32} and timer.calls == [{"BM": 32}] * len(timer.calls)
    assert result.stats["failed"] == 1


def test_atomics_tuning_leaves_no_side_effect():
    mod = tle.compile(HISTOGRAM, tune={"histogram": {"BLOCK": [16, 32, 64], "timer": ResettingTimer({"BLOCK": 32}), "on_cpu": True}})
    values = torch.randint(0, 1000, (1000,), dtype=torch.int32)
    bins = torch.full((10,), 5, dtype=torch.int32)
    mod.histogram[lambda m: (cdiv(m["N"], m["BLOCK"]),)](values, bins)
    want = torch.bincount(values.long() % 10, minlength=10).int() + 5
    assert torch.equal(bins, want), "tuning ran the kernel many times; only the real launch may count"
    assert tuning.rows()[0]["config"] == {"BLOCK": 32}


def test_gpu_backends_need_cuda_tensors():
    mod = tle.compile(os.path.join(EXAMPLES, "vector_add.tle"),
                      tune={"vector_add": {"BLOCK": [256, 512], "backend": ["interp", "triton"]}})
    x = torch.randn(1000)
    with pytest.raises(TuneError, match="backend triton runs on CUDA tensors"):
        mod.vector_add.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, x, torch.empty(1000))


def test_a_launch_on_cpu_tensors_runs_the_defaults_without_tuning():
    """A tuned kernel's CPU run is a correctness check on the interpreter, whose speed says nothing of a GPU's: the
    launch takes the kernel's defaults, tunes nothing and stores nothing (a user's first CPU launch of a spaced
    kernel once spent 42 s timing the interpreter, and a space naming GPU backends was an error)."""
    mod = tle.compile(os.path.join(EXAMPLES, "vector_add.tle"),
                      tune={"vector_add": {"BLOCK": [256, 512], "backend": ["tileir", "triton"]}})
    x, out = torch.randn(1000), torch.empty(1000)
    mod.vector_add[lambda m: (cdiv(m["N"], m["BLOCK"]),)](x, x, out)
    assert torch.equal(out, x + x) and mod.vector_add.last_backend == "interp"
    assert tuning.rows() == [] and not mod.vector_add._tuned


def test_tune_method_changes_nothing():
    mod = tle.compile(os.path.join(EXAMPLES, "matmul.tle"))
    mod.matmul.tune_space = TuneSpace({"BM": [16, 32], "BN": [16]}, timer=FakeTimer({"BM": 16}))
    a, b = torch.randn(40, 32).half(), torch.randn(32, 40).half()
    c = torch.full((40, 40), 7.0).half()
    result = mod.matmul.tune(matmul_grid, a, b, c, BK=16)
    assert not result.from_db and result.config == {"BM": 16, "BN": 16}
    assert result.default_config == {"BM": 16, "BN": 16} and result.default_time_s == result.time_s
    assert torch.equal(c, torch.full((40, 40), 7.0).half())
    again = mod.matmul.tune(matmul_grid, a, b, c, BK=16)
    assert again.from_db and again.config == result.config
    assert not mod.matmul.tune(matmul_grid, a, b, c, BK=16, force=True).from_db


def softmax_setup(blocks, **settings):
    mod = tle.compile(os.path.join(EXAMPLES, "softmax.tle"))
    timer = FakeTimer({"BLOCK": 128})  # claims the too-small BLOCK is fastest: it computes a wrong softmax
    mod.softmax.tune_space = TuneSpace({"BLOCK": blocks}, timer=timer, on_cpu=True, **settings)
    x = torch.randn(8, 300)
    return mod.softmax, x, torch.empty(8, 300), timer


def test_configs_with_wrong_output_are_dropped():
    kernel, x, y, timer = softmax_setup([512, 128])  # the first listed is the reference
    result = kernel.tune((8,), x, y)
    assert result.config == {"BLOCK": 512} and result.stats["failed"] == 1
    assert {"BLOCK": 128} not in timer.calls, "never timed: its output differs from the reference"


def test_reference_callable():
    kernel, x, y, _ = softmax_setup([128, 512], reference=lambda args: [torch.softmax(args[0], dim=1)])
    assert kernel.tune((8,), x, y).config == {"BLOCK": 512}
    kernel, x, y, _ = softmax_setup([128], reference=lambda args: [torch.softmax(args[0], dim=1)])
    with pytest.raises(TuneError, match="no configuration"):
        kernel.tune((8,), x, y)


def test_key_dims():
    """A callable grid: a fixed one is part of the key (test_a_fixed_grid_is_part_of_the_key)."""
    kernel, x, y, timer = softmax_setup([512, 1024], key_dims=["N"])
    rows = lambda m: (m["M"],)  # noqa: E731
    kernel[rows](x, y)
    n = len(timer.calls)
    kernel[rows](torch.randn(40, 300), torch.empty(40, 300))  # M is not a key dim
    assert len(timer.calls) == n
    assert tuning.rows()[0]["shape"] == '{"N": 512}'


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar(monkeypatch):
    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    kernel, x, y, _ = softmax_setup([512, 1024])
    kernel.tune((8,), x, y)
    assert "[tle tune softmax] compiled 2/2" in err.getvalue() and "best" in err.getvalue()
    monkeypatch.setenv("TLE_TUNE_QUIET", "1")
    err.truncate(0)
    kernel.tune((8,), x, y, force=True)
    assert err.getvalue() == ""


def test_quiet_when_not_a_tty(capsys):
    kernel, x, y, _ = softmax_setup([512, 1024])
    kernel.tune((8,), x, y)
    assert capsys.readouterr().err == ""


def test_real_cpu_timer_measures():
    """Without an injected timer the interpreter is timed for real (wall clock): slow, but a real measurement."""
    mod = tle.compile(os.path.join(EXAMPLES, "vector_add.tle"), tune={"vector_add": {"BLOCK": [64, 4096]}})
    x, y, out = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    result = mod.vector_add.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, y, out)
    # 64 programs of 64 elements against one of 4096: the interpreter's cost is per program
    assert result.config == {"BLOCK": 4096} and result.default_time_s > result.time_s > 0


def test_the_kernels_own_tune_clause():
    """`tune(...)` in the source becomes the kernel's TuneSpace; a dtype constant not tied to a tensor (the
    accumulation type) can be tuned, and the output check holds it to the default's result."""
    src = """
kernel rowsum<BLOCK: int = 1024, ACC: dtype = f32>(x: tensor<f32>[M, N], y: tensor<f32>[M, 1])
        tune(BLOCK=[1024, 2048], ACC=[f32, f16]) {
    let t = cast<ACC>(load(x, tile=[1, BLOCK], at=[program_id(0), 0], pad=0))
    store(y, cast<f32>(sum(t, axis=1, keepdims=true)), at=[program_id(0), 0])
}
"""
    mod = tle.compile(src)
    space = mod.rowsum.tune_space
    assert space.params == {"BLOCK": [1024, 2048], "ACC": ["f32", "f16"]}
    space.timer = lambda config, trial, reps: 1e-3 if config["ACC"] == "f16" else 2e-3  # claims f16 is faster
    space.on_cpu = True
    x = torch.rand(4, 1000) * 1e5  # a third of the values are past f16's largest finite value (65504)
    y = torch.empty(4, 1)
    mod.rowsum[(4,)](x, y)
    assert torch.allclose(y[:, 0], x.double().sum(1).float(), rtol=1e-4)
    row = tuning.rows()[0]
    assert row["config"] == {"BLOCK": 1024, "ACC": "f32"} and row["stats"]["failed"] == 1  # f16 overflowed
    assert row["stats"]["pruned"] == {"R1 tile larger than the problem": 2}  # 2048 > next_pow2(1000)


def test_a_space_with_the_occupancy_hint_tunes():
    """`occupancy: [None, 2]` in a space: the base configuration takes None (the lowering's own choice, the default
    of the launch option). The base once looked up the option's default where there was none, a KeyError on the
    first call (user_kernels_probe's tuned bmm, on the H200)."""
    mod = tle.compile(os.path.join(EXAMPLES, "matmul.tle"), backend="interp")
    timer = FakeTimer({"BM": 32})
    mod.matmul.tune_space = TuneSpace({"BM": [16, 32], "occupancy": [None, 2]}, timer=timer, on_cpu=True)
    a, b, c = torch.randn(40, 32).half(), torch.randn(32, 40).half(), torch.empty(40, 40).half()
    mod.matmul[matmul_grid](a, b, c)
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    # the interpreter ignores the hint (pruning rule R0): one configuration per BM, each timed with the default
    assert {(cfg["BM"], cfg["occupancy"]) for cfg in timer.calls} == {(16, None), (32, None)}


def test_tle_tuning_is_the_tuner_under_every_import_form():
    import importlib
    import tle
    import tle.runtime.tuning as tuner
    assert importlib.import_module("tle.tuning") is tuner and tle.tuning is tuner
    from tle.tuning import TuneSpace
    assert TuneSpace is tuner.TuneSpace
