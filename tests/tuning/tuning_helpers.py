"""Helpers shared by the tuning tests."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


# A kernel that accumulates into its output with atomics: tuning must restore it before every timed launch.
HISTOGRAM = """
kernel histogram<BLOCK: int = 64>(values: tensor<i32>[N], bins: tensor<i32>[B]) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK)
    let inside = offs < N
    let v = gather(values, offs, mask=inside, other=0)
    atomic_add(bins, v % B, 1, mask=inside)
}
"""


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
