"""Compile one example to a cubin, run it, and compare with torch.

    python examples/run_example.py softmax        # or vector_add, layernorm, rmsnorm, matmul, swiglu, cumsum,
                                                  # attention, linear_fp8, ... (examples/reference.py: CASES)
    python examples/run_example.py attention_bwd  # attention's forward and backward (four kernels), causal

The cubin is built for sm_90 (no GPU needed) with tlec's default `--backend=auto`: on the CUDA Tile IR path, or
on the native CUDA path (Triton) where the router's rules send the kernel (docs/tileir.md, "Legality"); tlec's
first line says which path and why (softmax: Tile IR; gelu, whose asm() Tile IR cannot carry: native). The
kernel then runs on the GPU when torch sees one, and on tle's CPU interpreter otherwise; either way its output
is checked against torch on random inputs.
"""
from __future__ import annotations

import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tle  # noqa: E402
from tle.cli import main as tlec  # noqa: E402
from reference import CASES, TRAINING_KERNELS, relative_error, tolerance  # noqa: E402


def main(argv: list[str]) -> int:
    name = argv[0] if argv else "softmax"
    if name not in CASES and name != "attention_bwd":
        print(f"unknown example '{name}'; choose one of: {', '.join(CASES)}, attention_bwd", file=sys.stderr)
        return 2
    path = os.path.join(HERE, f"{name}.tle")
    for kernel in TRAINING_KERNELS if name == "attention_bwd" else (name,):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, f"{kernel}.cubin")
            rc = tlec([path, "--kernel", kernel, "--emit=cubin", "--arch", "sm_90", "-o", out, "-v"])
            if rc != 0:
                return rc
            with open(out, "rb") as f:
                is_elf = f.read(4) == b"\x7fELF"
            print(f"compiled {name}.tle ({kernel}) -> {os.path.getsize(out)}-byte sm_90 cubin (ELF: {is_elf})")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "attention_bwd":
        return run_training(path, device)
    mod = tle.compile(path)
    case = CASES[name]
    torch.manual_seed(0)
    dtype = torch.float32 if torch.float32 in case.dtypes else case.dtypes[0]
    args, grid, consts, ref, outputs = case.make(device, dtype)
    options = {"backend": case.backends[0]} if device == "cuda" and len(case.backends) == 1 else {}
    getattr(mod, name)[grid](*args, **consts, **options)
    return report([(name, got, want) for got, want in zip(outputs(args), ref(args))], "torch",
                  tolerance(name, dtype), device)


def report(results: list, against: str, tol: float, device: str) -> int:
    """Print each (label, got, want)'s relative error; 0 if every one is within tol."""
    where = "GPU (" + torch.cuda.get_device_name() + ")" if device == "cuda" else "CPU interpreter"
    ok = True
    for label, got, want in results:
        err = relative_error(got, want)
        ok &= err <= tol
        print(f"ran {label} on the {where}: relative error vs {against} {err:.2e} -> {'match' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def run_training(path: str, device: str) -> int:
    """examples/attention_bwd.tle's four kernels, causal, on f16 [batch * heads, S, D] tensors, against autograd."""
    from reference import attention_training, attention_training_reference
    mod = tle.compile(path)
    torch.manual_seed(0)
    b, s, d = (8, 1024, 64) if device == "cuda" else (2, 100, 16)
    q, k, v, dout = (torch.randn(b, s, d, device=device).to(torch.float16) for _ in range(4))
    got = attention_training(mod, q, k, v, dout, d ** -0.5, True)
    want = attention_training_reference(q, k, v, dout, d ** -0.5, True)
    return report([(f"attention_bwd ({what})", g, w) for what, g, w in zip(("o", "lse", "dq", "dk", "dv"), got, want)],
                  "torch autograd", tolerance("attention", torch.float16), device)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
