"""Every example on the GPU, on both the native CUDA path (Triton) and the CUDA Tile IR path, against torch:
several shapes including ragged ones, every dtype the example takes, and a non-contiguous input. The two paths
must also agree with each other. Skipped without a GPU."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tle  # noqa: E402
import tle.runtime.kernel  # noqa: E402
from reference import CASES, relative_error, tolerance  # noqa: E402

RESULTS = []  # (example, backend, dtype, shape, noncontig, rel err, ok) for the summary table


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_on_gpu(name, backend):
    case = CASES[name]
    if backend not in case.backends:
        pytest.skip(f"{name} is launched on {', '.join(case.backends)} only (examples/reference.py)")
    mod = tle.compile(os.path.join(ROOT, "examples", f"{name}.tle"))
    kernel = getattr(mod, name)
    torch.manual_seed(0)
    failures = []
    shapes = case.shapes + list(case.gpu_shapes)
    for dtype in case.dtypes:
        for shape in shapes:
            for noncontig in (False, True):
                args, grid, consts, ref, outputs = case.make("cuda", dtype, shape, noncontig)
                kernel[grid](*args, backend=backend, **consts)
                torch.cuda.synchronize()
                assert kernel.last_backend == backend
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


@pytest.mark.gpu
def test_paths_agree_with_each_other():
    """The same kernel in one process on both paths: outputs agree to within the dtype's tolerance."""
    for name in ("softmax", "matmul", "layernorm"):
        case = CASES[name]
        kernel = getattr(tle.compile(os.path.join(ROOT, "examples", f"{name}.tle")), name)
        dtype = case.dtypes[-1]
        args, grid, consts, ref, outputs = case.make("cuda", dtype, case.shapes[-1])
        kernel[grid](*args, backend="triton", **consts)
        first = [o.clone() for o in outputs(args)]
        for o in outputs(args):
            o.fill_(float("nan"))
        kernel[grid](*args, backend="tileir", **consts)
        for a, b in zip(first, outputs(args)):
            assert relative_error(b, a) <= 2 * tolerance(name, dtype)


FALLBACK = """
kernel erf64<BLOCK: int = 256>(x: tensor<f64>[N], y: tensor<f64>[N]) {
    let i = program_id(0)
    store(y, erf(load(x, tile=[BLOCK], at=[i])), at=[i])
}
"""


@pytest.mark.gpu
def test_auto_falls_back_to_the_native_path_and_says_why():
    """erf on f64 has no Tile IR lowering: auto runs it on Triton, warns (quiet=False) and is correct;
    a forced tileir is an error naming the reason."""
    mod = tle.compile(FALLBACK, quiet=False)
    x = torch.randn(1000, device="cuda", dtype=torch.float64)
    y = torch.full_like(x, float("nan"))
    with pytest.warns(tle.runtime.kernel.TleFallbackWarning, match="erf64.*native CUDA path"):
        mod.erf64[(4,)](x, y)
    assert mod.erf64.last_backend == "triton"
    assert relative_error(y, torch.erf(x)) < 1e-12
    with pytest.raises(tle.TleError, match="cannot take the Tile IR path"):
        mod.erf64[(4,)](x, y, backend="tileir")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_attention_training_on_gpu(backend):
    """examples/attention_bwd.tle's forward (with the log-sum-exp) and backward against torch autograd in float64,
    on the example's default 64x64 tiles: D 64 and 128, causal or not, a ragged shape and L past S."""
    from reference import attention_training, attention_training_reference
    mod = tle.compile(os.path.join(ROOT, "examples", "attention_bwd.tle"))
    torch.manual_seed(0)
    failures = []
    for dtype in (torch.float16, torch.bfloat16):
        for b, s, l, d in ((4, 1024, 1024, 64), (2, 333, 257, 128), (2, 200, 300, 64)):
            for causal in (False, True):
                q, k, v, dout = (torch.randn(b, n, d, device="cuda").to(dtype) for n in (s, l, l, s))
                got = attention_training(mod, q, k, v, dout, d ** -0.5, causal, backend=backend)
                torch.cuda.synchronize()
                want = attention_training_reference(q, k, v, dout, d ** -0.5, causal)
                for what, g, w in zip(("o", "lse", "dq", "dk", "dv"), got, want):
                    err = relative_error(g, w)
                    ok = err <= tolerance("attention", dtype)
                    RESULTS.append((f"attn_{what}", backend, str(dtype).split(".")[-1], (b, s, l, d, causal), False,
                                    err, ok))
                    if not ok:
                        failures.append(f"{what} {dtype} {(b, s, l, d, causal)}: rel err {err:.3e}")
    assert not failures, "\n".join(failures)
