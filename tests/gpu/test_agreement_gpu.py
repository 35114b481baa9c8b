"""The three backends agree: every example and a few dozen random programs (tests/interp/program_gen.py) run on
the interpreter, the native CUDA path (Triton) and the CUDA Tile IR path, on the same inputs. GPU results are
held to docs/numerics.md's tolerances against the interpreter and the torch reference. A table of the largest
relative error per program and backend is printed at the end (pytest -s)."""
import os
import random
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "tests", "interp"))

import tle  # noqa: E402
from program_gen import check, generate  # noqa: E402
from reference import CASES, relative_error, tolerance  # noqa: E402

GPU_BACKENDS = ("triton", "tileir")
TABLE: dict = {}  # program -> {backend: worst relative error against the interpreter}


def _record(program, backend, err):
    row = TABLE.setdefault(program, {})
    row[backend] = max(row.get(backend, 0.0), err)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_examples_agree_across_backends(name):
    case = CASES[name]
    kernel = getattr(tle.compile(os.path.join(ROOT, "examples", f"{name}.tle")), name)
    for dtype in case.dtypes:
        shape = case.shapes[-1]
        args, grid, consts, ref, outputs = case.make("cpu", dtype, shape)
        kernel[grid](*args, **consts)  # CPU tensors: the interpreter
        interp = [o.clone() for o in outputs(args)]
        want = ref(args)
        for w, i in zip(want, interp):
            _record(f"{name} {str(dtype)[6:]}", "interp", relative_error(i, w))
        for backend in (b for b in GPU_BACKENDS if b in case.backends):
            gargs = [a.cuda() if hasattr(a, "cuda") else a for a in args]
            for o in outputs(gargs):
                o.fill_(float("nan"))
            kernel[grid](*gargs, backend=backend, **consts)
            for got, i, w in zip(outputs(gargs), interp, want):
                err = relative_error(got, i)
                _record(f"{name} {str(dtype)[6:]}", backend, err)
                assert err <= tolerance(name, dtype), f"{name} {dtype} {backend}: {err:.2e} from the interpreter"
                assert relative_error(got, w) <= tolerance(name, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(40))
def test_random_programs_agree_across_backends(seed):
    prog = generate(random.Random(seed))
    mod = tle.compile(prog.source, filename=f"{prog.kernel}.tle")
    kernel = getattr(mod, prog.kernel)
    inputs = prog.make_inputs(seed, "cpu")
    kernel[prog.grid](**inputs)
    interp = {k: inputs[k].clone() for k in prog.outputs}
    reference = prog.reference(inputs)
    problems = []
    for backend in GPU_BACKENDS:
        fresh = {k: v.cuda() for k, v in prog.make_inputs(seed, "cpu").items()}  # the same numbers
        kernel[prog.grid](**fresh, backend=backend)
        for k in prog.outputs:
            _record(f"random {seed} ({prog.kind.split(':')[0]})", backend, relative_error(fresh[k], interp[k]))
            bad = check(fresh[k], reference[k], *prog.gpu_tolerance[k])
            if bad:
                problems.append(f"{backend} {k}: {bad}")
    assert not problems, f"{prog.kind}\n{prog.source}\n" + "\n".join(problems)


def teardown_module(module):
    if TABLE:
        print("\nmax relative error against the interpreter (interp column: the interpreter against torch)")
        print(f"{'program':<34} {'interp':>10} {'triton':>10} {'tileir':>10}")
        for prog, row in TABLE.items():
            cells = " ".join(f"{row[b]:>10.2e}" if b in row else f"{'-':>10}" for b in ("interp",) + GPU_BACKENDS)
            print(f"{prog:<34} {cells}")
