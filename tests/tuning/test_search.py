"""Successive halving with an injected, deterministic timer: a unit test of the search logic only (on the GPU the
CUDA-event timer is what runs)."""
import hashlib
import itertools
import math
import time

from tle.runtime.tuning import successive_halving

CONFIGS = [tuple(zip(("BM", "BN", "BK", "num_warps"), v))
           for v in itertools.product([32, 64, 128], [32, 64, 128], [16, 32, 64], [2, 4, 8])]
BEST = (("BM", 64), ("BN", 128), ("BK", 32), ("num_warps", 4))


def cost(c):
    """A bowl in log2 space with its bottom at BEST, every other config at least 10% slower."""
    d = dict(c)
    return 1e-3 * (1 + 0.1 * sum(abs(d[k].bit_length() - v.bit_length()) ** 1.5 for k, v in dict(BEST).items()))


def noisy(c, reps, calls):
    """The cost with +-3% deterministic pseudo-noise that shrinks with more launches (as a median would)."""
    h = int(hashlib.sha256(repr((c, calls)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return cost(c) * (1 + 0.06 * (h - 0.5) * math.sqrt(10 / reps))


def test_finds_the_optimum_with_fewer_launches_than_exhaustive():
    calls = []

    def measure(c, reps):
        calls.append((c, reps))
        return cost(c)
    s = successive_halving(CONFIGS, measure, reps=10, keep=3, max_reps=100)
    assert s.best == BEST and s.time_s == cost(BEST)
    # 81 at 10 launches, the best 27 at 20, the best 9 at 40, then the 3 finalists in 4 interleaved rounds of 50
    assert [r for _, r in calls] == [10] * 81 + [20] * 27 + [40] * 9 + [50] * 12
    exhaustive = len(CONFIGS) * 100  # every config timed at the precision of the final answer
    assert s.reps == 810 + 540 + 360 + 600 < exhaustive / 3
    assert s.calls == len(calls)
    finalists = [c for c, _ in calls[-12:-9]]
    assert [c for c, _ in calls[-12:]] == finalists + finalists[::-1] + finalists + finalists[::-1]


def test_noise_does_not_hide_the_optimum():
    n = [0]

    def measure(c, reps):
        n[0] += 1
        return noisy(c, reps, n[0])
    s = successive_halving(CONFIGS, measure)
    assert s.best == BEST


def test_failures_are_dropped():
    def measure(c, reps):
        return math.inf if dict(c)["num_warps"] == 4 else cost(c)  # BEST among the failures
    s = successive_halving(CONFIGS, measure)
    assert dict(s.best)["num_warps"] != 4 and math.isfinite(s.time_s)
    s = successive_halving(CONFIGS, lambda c, reps: math.inf)
    assert s.best is None


def test_configs_may_arrive_from_a_generator_and_the_deadline_stops_rounds():
    def arriving():
        yield from CONFIGS
    s = successive_halving(arriving(), lambda c, reps: cost(c), deadline=time.monotonic() - 1)
    assert s.best == BEST and s.calls == len(CONFIGS)  # the deadline had passed: round 0 only


def test_clock_drift_does_not_pick_between_near_equal_finalists():
    """Each timing 1% slower than the one before (a GPU heating up): timed one after another, A (1.000) read faster
    than B (0.995) because it went first; in alternating interleaved rounds the drift adds the same to both."""
    a, b, c = (("BM", 64),), (("BM", 128),), (("BM", 256),)
    true = {a: 1.000, b: 0.995, c: 1.050}
    n = [0]

    def drifting(cfg, reps):
        n[0] += 1
        return true[cfg] * (1 + 0.01 * n[0])
    s = successive_halving([a, b, c], drifting)
    assert s.best == b
    n[0] = 0
    s = successive_halving([a, b, c], drifting, final_rounds=0)  # no finals: the order of timing decides
    assert s.best == a
