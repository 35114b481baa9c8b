"""Every example on the GPU (Triton path) against torch: several shapes including ragged ones, every dtype the
example takes, and a non-contiguous input. Skipped without a GPU."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tle  # noqa: E402
from reference import CASES, relative_error, tolerance  # noqa: E402

RESULTS = []  # (example, backend, dtype, shape, noncontig, rel err, ok) for the summary table


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_on_gpu(name, backend):
    case = CASES[name]
    mod = tle.compile(os.path.join(ROOT, "examples", f"{name}.tle"))
    kernel = getattr(mod, name)
    torch.manual_seed(0)
    failures = []
    shapes = case.shapes + ([(4096, 4096, 4096), (1, 4096, 4096), (333, 1000, 257)] if name == "matmul"
                            else [(1 << 20,)] if name == "vector_add" else [(4096, 4096), (3, 8191)])
    for dtype in case.dtypes:
        for shape in shapes:
            for noncontig in (False, True):
                args, grid, consts, ref, outputs = case.make("cuda", dtype, shape, noncontig)
                kernel[grid](*args, backend=backend, **consts)
                torch.cuda.synchronize()
                for got, want in zip(outputs(args), ref(args)):
                    err = relative_error(got, want)
                    ok = err <= tolerance(name, dtype)
                    RESULTS.append((name, backend, str(dtype).split(".")[-1], shape, noncontig, err, ok))
                    if not ok:
                        failures.append(f"{dtype} {shape} noncontig={noncontig}: rel err {err:.3e}")
    assert not failures, "\n".join(failures)


def teardown_module(module):
    if RESULTS:
        print("\nexample     backend dtype     shape                noncontig  rel.err    ok")
        for r in RESULTS:
            print(f"{r[0]:<11} {r[1]:<7} {r[2]:<9} {str(r[3]):<20} {str(r[4]):<10} {r[5]:.2e}  {'PASS' if r[6] else 'FAIL'}")
