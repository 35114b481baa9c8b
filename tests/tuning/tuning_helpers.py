"""Helpers shared by the tuning tests."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def cdiv(a, b):
    return -(-a // b)


def matmul_grid(m):
    return (cdiv(m["M"], m["BM"]), cdiv(m["N"], m["BN"]))


class FakeTimer:
    """A deterministic time per configuration (a bowl around `best`), counting its calls. Used only to test the
    search and the hook on the CPU; the GPU tests use the real CUDA-event timer."""

    def __init__(self, best: dict, run: bool = False):
        self.best, self.run, self.calls = best, run, []

    def __call__(self, config, trial, reps):
        self.calls.append(dict(config))
        if self.run:
            trial.run()
        return 1e-3 * (1 + sum(abs(_log2(config[k]) - _log2(v)) for k, v in self.best.items() if k in config))


def _log2(v):
    return v.bit_length() if isinstance(v, int) else 0
