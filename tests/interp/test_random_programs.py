"""Random kernels (program_gen.py) on the interpreter against their torch references, under the default spec
with contiguous inputs and under the generic spec with column-major inputs."""
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp_harness import run, transposed
from program_gen import check, generate


def run_program(prog, seed: int, generic: bool) -> list[str]:
    inputs = prog.make_inputs(seed, "cpu")
    if generic:  # column-major copies of the 2-D inputs: every stride is a runtime value
        inputs = {k: transposed(v) if v.dim() == 2 and k not in prog.outputs and min(v.shape) > 1 else v
                  for k, v in inputs.items()}
    run(prog.source, prog.kernel, prog.grid, inputs, spec="generic" if generic else "default",
        file=f"{prog.kernel}.tle")
    problems = []
    for name, want in prog.reference(inputs).items():
        bad = check(inputs[name], want, *prog.tolerance[name])
        if bad:
            problems.append(f"{name}: {bad}")
    return problems


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32 - 1), st.booleans())
def test_random_program_matches_reference(seed, generic):
    prog = generate(random.Random(seed))
    problems = run_program(prog, seed, generic)
    assert not problems, f"{prog.kind}\n{prog.source}\n" + "\n".join(problems)


def test_generator_covers_every_kind_and_is_deterministic():
    kinds = {generate(random.Random(s)).kind.split(":")[0] for s in range(60)}
    assert kinds == {"elementwise", "rows", "matmul"}
    assert generate(random.Random(5)).source == generate(random.Random(5)).source
    source, kernel, reference, make_inputs = generate(random.Random(7))
    assert kernel in source and callable(reference) and callable(make_inputs)
