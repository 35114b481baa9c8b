"""TuneSpace's validation, the messages of a tuning that finds nothing, and threads launching one new bucket."""
import os
import threading

import numpy as np
import pytest
import torch

import tle
from tle.runtime import tuning
from tle.runtime.tuning import TuneError, TuneSpace
from tuning_helpers import EXAMPLES, cdiv, matmul_grid

MATMUL = os.path.join(EXAMPLES, "matmul.tle")
VECTOR_ADD = os.path.join(EXAMPLES, "vector_add.tle")


def test_value_lists_of_other_kinds():
    assert TuneSpace({"BM": range(16, 48, 16)}).params == {"BM": [16, 32]}
    space = TuneSpace({"BM": np.array([16, 32]), "BN": [np.int64(64)]})
    assert space.params == {"BM": [16, 32], "BN": [64]} and all(type(v) is int for v in space.params["BM"])
    with pytest.raises(ValueError, match="BM: give the values as a list, not a set"):
        TuneSpace({"BM": {16, 32}})
    with pytest.raises(ValueError, match="lists a value twice"):
        TuneSpace({"S": [1, 1.0]})


@pytest.mark.parametrize("settings, says", [
    ({"budget_s": float("nan")}, "budget_s must be a positive number"),
    ({"budget_s": float("inf")}, "budget_s must be a positive number"),
    ({"key_dims": "MN"}, "key_dims must be a list of dim names"),
    ({"timer": 3}, "timer must be a function"),
    ({"reference": "softmax"}, "reference must be a function"),
    ({"on_cpu": 1}, "on_cpu must be True or False"),
])
def test_bad_settings(settings, says):
    with pytest.raises(ValueError, match=says):
        TuneSpace({"BM": [16, 32]}, **settings)


def test_settings_changed_after_attaching_are_checked_at_tuning():
    mod = tle.compile(MATMUL)
    mod.matmul.tune_space = TuneSpace({"BM": [16, 32]}, on_cpu=True)
    mod.matmul.tune_space.budget_s = float("nan")
    a, b, c = torch.randn(40, 32).half(), torch.randn(32, 40).half(), torch.empty(40, 40).half()
    with pytest.raises(ValueError, match="budget_s must be a positive number, got nan"):
        mod.matmul.tune(matmul_grid, a, b, c)


def test_every_configuration_pruned_says_why():
    mod = tle.compile(MATMUL)
    mod.matmul.tune_space = TuneSpace({"BM": [48, 24]}, on_cpu=True, timer=lambda c, t, r: 1e-3)
    a, b, c = torch.randn(40, 32).half(), torch.randn(32, 40).half(), torch.empty(40, 40).half()
    with pytest.raises(TuneError, match=r"every configuration was pruned: does not check \(2\): BM=48: .*power of "
                                        r"two"):
        mod.matmul.tune(matmul_grid, a, b, c)


def test_a_timer_returning_nan_is_the_reason_given():
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [256, 512], "timer": lambda c, t, r: float("nan"),
                                                       "on_cpu": True}})
    x = torch.randn(1000)
    with pytest.raises(TuneError, match="the timer returned nan, not a positive number of seconds"):
        mod.vector_add.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, x, torch.empty(1000))


def test_the_progress_line_counts_configurations(monkeypatch):
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True
    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [256, 512], "timer": lambda c, t, r: 1e-3,
                                                       "on_cpu": True}})
    x = torch.randn(1000)
    result = mod.vector_add.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, x, torch.empty(1000))
    assert result.stats["timer_calls"] > 2  # the finals time each again
    assert "timed 2 " in err.getvalue().splitlines()[-1].split("\r")[-1]


def test_threads_launching_one_new_bucket_tune_it_once():
    tuners = []

    def timer(config, trial, reps):
        tuners.append(threading.get_ident())
        return 1e-3 / config["BLOCK"]
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": [64, 128, 256], "timer": timer, "on_cpu": True}})
    results = {}
    start = threading.Barrier(4)

    def work(i):
        x, out = torch.randn(1000 + i), torch.empty(1000 + i)
        start.wait()
        mod.vector_add[lambda m: (cdiv(m["N"], m["BLOCK"]),)](x, x, out)
        results[i] = torch.equal(out, x + x)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: True, 2: True, 3: True}
    assert len(set(tuners)) == 1 and len(tuning.rows()) == 1
