"""Every example compiles to TTIR and to an sm_80 and sm_90 cubin on the CPU, and runs correctly on the
interpreter against torch (ragged and non-contiguous inputs included)."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tle  # noqa: E402
from reference import CASES, TRAINING_KERNELS, relative_error, tolerance  # noqa: E402
from tle.check import load_program  # noqa: E402
from tle.compiler import compile_kernel  # noqa: E402


def _program(name):
    path = os.path.join(ROOT, "examples", f"{name}.tle")
    with open(path) as f:
        return load_program(f.read(), path)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_example_compiles_to_cubin(name, arch):
    if name == "linear_fp8" and arch == "sm_80":  # f8e4m3 (its default) needs sm_89: a located error says so
        with pytest.raises(tle.TleError, match="f8e4m3 needs sm_89 or newer"):
            compile_kernel(_program(name), name, {}, arch=arch)
        return
    out = compile_kernel(_program(name), name, {}, arch=arch)
    assert out.binary.cubin[:4] == b"\x7fELF"
    assert f"tt.func" in out.stages["ttir"]
    if name == "matmul":
        assert "tt.dot" in out.stages["ttir"]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                                   torch.float8_e5m2], ids=["f32", "f16", "bf16", "f8e4m3", "f8e5m2"])
def test_example_on_interpreter(name, dtype):
    case = CASES[name]
    if dtype not in case.dtypes:
        pytest.skip(f"{name} does not take {dtype}")
    mod = tle.compile(os.path.join(ROOT, "examples", f"{name}.tle"))
    torch.manual_seed(1)
    for shape in case.shapes[1:3]:
        for noncontig in (False, True):
            args, grid, consts, ref, outputs = case.make("cpu", dtype, shape, noncontig)
            getattr(mod, name)[grid](*args, **consts)
            assert getattr(mod, name).last_backend == "interp"
            for got, want in zip(outputs(args), ref(args)):
                err = relative_error(got, want)
                assert err <= tolerance(name, dtype), f"{name} {shape} noncontig={noncontig}: rel err {err}"


@pytest.mark.parametrize("name", ["softmax", "matmul", "attention_bwd"])
def test_readme_main_command_runs_an_example(name):
    """README's first command ends with `python examples/run_example.py softmax`: it must compile, run and match."""
    import subprocess
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "run_example.py"), name],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ELF: True" in proc.stdout and "match" in proc.stdout


@pytest.mark.parametrize("shape", [s for s in CASES["attention"].shapes if len(s) == 4], ids=str)
def test_causal_attention_on_interpreter(shape):
    """CAUSAL=true: whole tiles before the diagonal unmasked, the band across it masked, later tiles skipped; ragged
    S and L, L below S (queries past L see every key) and above it."""
    mod = tle.compile(os.path.join(ROOT, "examples", "attention.tle"))
    torch.manual_seed(2)
    args, grid, consts, ref, outputs = CASES["attention"].make("cpu", torch.float16, shape, False)
    mod.attention[grid](*args, **consts)
    err = relative_error(outputs(args)[0], ref(args)[0])
    assert err <= tolerance("attention", torch.float16), f"{shape}: rel err {err}"


# ---- examples/attention_bwd.tle: four kernels (TRAINING_KERNELS), so not a CASES entry ----------------------------

@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_attention_training_kernels_compile_to_cubins(backend):
    program = _program("attention_bwd")
    for name in TRAINING_KERNELS:
        consts = {} if name == "attention_bwd_delta" else {"CAUSAL": True}
        out = compile_kernel(program, name, consts, backend=backend)
        assert out.binary.cubin[:4] == b"\x7fELF", name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("shape", [(2, 37, 50, False), (2, 37, 50, True), (1, 64, 29, True), (1, 70, 130, True),
                                   (2, 130, 77, False)], ids=str)
def test_attention_training_on_interpreter(shape, dtype):
    """Forward (with the log-sum-exp) and backward against torch autograd in float64: ragged S and L, L below S
    (queries past L see every key) and above it (causal keys past S get zero gradients)."""
    from reference import attention_training, attention_training_reference
    b, s, l, causal = shape
    torch.manual_seed(3)
    q, k, v, dout = (torch.randn(b, n, 16).to(dtype) for n in (s, l, l, s))
    mod = tle.compile(os.path.join(ROOT, "examples", "attention_bwd.tle"))
    got = attention_training(mod, q, k, v, dout, 0.25, causal, tiles=(32, 16))
    want = attention_training_reference(q, k, v, dout, 0.25, causal)
    for what, g, w in zip(("o", "lse", "dq", "dk", "dv"), got, want):
        err = relative_error(g, w)
        assert err <= tolerance("attention", dtype), f"{what}: rel err {err}"
