"""How to launch each example, with a torch reference: shared by run_example.py, the tests and benchmarks.

`CASES[name].make(device, dtype, shape, noncontig)` returns (args, grid, constants, reference, outputs):
launch with `mod.<name>[grid](*args, **constants)`, then compare `outputs(args)` with `reference(args)`.
Outputs start as NaN so that an element the kernel never wrote cannot pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def rand(shape, device, dtype, noncontig=False):
    """Random normal data; with noncontig, a transposed or strided view instead of a contiguous tensor."""
    if not noncontig:
        return torch.randn(shape, device=device, dtype=torch.float32).to(dtype)
    if len(shape) == 1:
        return torch.randn(shape[0] * 2, device=device).to(dtype)[::2]
    return torch.randn(tuple(reversed(shape)), device=device).to(dtype).t()  # inner stride != 1


def poison(shape, device, dtype):
    return torch.full(shape, float("nan"), device=device, dtype=dtype)


@dataclass
class Case:
    name: str
    make: Callable
    shapes: list  # small shapes (ragged ones included) for correctness tests
    dtypes: tuple = (torch.float32, torch.float16, torch.bfloat16)
    backends: tuple = ("triton", "tileir")  # the GPU paths the example is correct on, as make() launches it
    gpu_shapes: list = ((4096, 4096), (3, 8191))  # large and ragged shapes the GPU tests add to `shapes`

    @staticmethod
    def tol(dtype) -> float:
        return {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]


def _vector_add(device, dtype, shape=(10_000,), noncontig=False):
    (n,) = shape
    x, y = rand((n,), device, dtype, noncontig), rand((n,), device, dtype)
    out = poison((n,), device, dtype)
    return [x, y, out], (cdiv(n, 1024),), {"BLOCK": 1024}, lambda a: [a[0].float() + a[1].float()], lambda a: [a[2]]


def _softmax(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    x, y = rand((m, n), device, dtype, noncontig), poison((m, n), device, dtype)
    return [x, y], (m,), {"BLOCK": next_pow2(n)}, lambda a: [torch.softmax(a[0].float(), dim=1)], lambda a: [a[1]]


def _layernorm(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    x = rand((m, n), device, dtype, noncontig)
    w, b = rand((n,), device, dtype), rand((n,), device, dtype)
    y = poison((m, n), device, dtype)

    def ref(a):
        return [torch.nn.functional.layer_norm(a[0].float(), (n,), a[1].float(), a[2].float(), 1e-5)]
    return [x, w, b, y, 1e-5], (m,), {"BLOCK": next_pow2(n)}, ref, lambda a: [a[3]]


def _rmsnorm(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    x, w, y = rand((m, n), device, dtype, noncontig), rand((n,), device, dtype), poison((m, n), device, dtype)

    def ref(a):
        xf = a[0].float()
        return [xf * torch.rsqrt((xf * xf).mean(dim=1, keepdim=True) + 1e-6) * a[1].float()]
    return [x, w, y, 1e-6], (m,), {"BLOCK": next_pow2(n)}, ref, lambda a: [a[2]]


def _matmul(device, dtype, shape=(100, 70, 90), noncontig=False, tiles=(64, 64, 32)):
    m, n, k = shape
    bm, bn, bk = tiles
    a, b, c = rand((m, k), device, dtype, noncontig), rand((k, n), device, dtype), poison((m, n), device, dtype)
    return ([a, b, c], (cdiv(m, bm), cdiv(n, bn)), {"BM": bm, "BN": bn, "BK": bk},
            lambda t: [t[0].float() @ t[1].float()], lambda t: [t[2]])


def _matmul_grouped(device, dtype, shape=(100, 70, 90), noncontig=False, tiles=(32, 32, 32)):
    m, n, k = shape
    bm, bn, bk = tiles
    a, b, c = rand((m, k), device, dtype, noncontig), rand((k, n), device, dtype), poison((m, n), device, dtype)
    # GROUP_M=3 makes the last group short for most shapes here: the ragged case of the program ordering
    return ([a, b, c], (cdiv(m, bm) * cdiv(n, bn),), {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 3},
            lambda t: [t[0].float() @ t[1].float()], lambda t: [t[2]])


def _matmul_persistent(device, dtype, shape=(100, 70, 90), noncontig=False, tiles=(32, 32, 32)):
    m, n, k = shape
    bm, bn, bk = tiles
    a, b, c = rand((m, k), device, dtype, noncontig), rand((k, n), device, dtype), poison((m, n), device, dtype)
    # Fewer programs than tiles, so that programs walk several (an H200 has 132 SMs; 5 keeps the interpreter quick)
    programs = min(cdiv(m, bm) * cdiv(n, bn), 132 if device == "cuda" else 5)
    return ([a, b, c], (programs,), {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 3},
            lambda t: [t[0].float() @ t[1].float()], lambda t: [t[2]])


def splitk_workspace(device, m, n, bm, bn, split):
    """matmul_splitk's workspace: the f32 partial tiles and the per-tile arrival counters (zeros; every launch
    leaves them zeroed), allocated once and reused by later launches of the same shape."""
    part = torch.empty((split, m, n), device=device, dtype=torch.float32)
    count = torch.zeros(cdiv(m, bm) * cdiv(n, bn), device=device, dtype=torch.int32)
    return part, count


def _matmul_splitk(device, dtype, shape=(5, 70, 300), noncontig=False, tiles=(16, 32, 32), split=4):
    m, n, k = shape
    bm, bn, bk = tiles
    a, b, c = rand((m, k), device, dtype, noncontig), rand((k, n), device, dtype), poison((m, n), device, dtype)
    part, count = splitk_workspace(device, m, n, bm, bn, split)
    return ([a, b, c, part, count], (cdiv(n, bn), split, cdiv(m, bm)), {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split},
            lambda t: [t[0].float() @ t[1].float()], lambda t: [t[2]])


def _swiglu(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    g, u, o = rand((m, n), device, dtype, noncontig), rand((m, n), device, dtype), poison((m, n), device, dtype)

    def ref(a):
        return [torch.nn.functional.silu(a[0].float()) * a[1].float()]
    return [g, u, o], (cdiv(m, 16), cdiv(n, 256)), {"BM": 16, "BN": 256}, ref, lambda a: [a[2]]


def _cumsum(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    x, y = rand((m, n), device, dtype, noncontig), poison((m, n), device, dtype)
    return [x, y], (m,), {"BLOCK": next_pow2(n)}, lambda a: [torch.cumsum(a[0].float(), dim=1)], lambda a: [a[1]]


def _attention(device, dtype, shape=(2, 37, 50), noncontig=False, tiles=(32, 16), d=16):
    b, s, l = shape
    bm, bn = tiles
    q = (torch.randn((b, d, s), device=device).to(dtype).transpose(1, 2) if noncontig  # inner stride != 1
         else rand((b, s, d), device, dtype))
    k, v, o = rand((b, l, d), device, dtype), rand((b, l, d), device, dtype), poison((b, s, d), device, dtype)
    scale = d ** -0.5

    def ref(t):
        p = torch.softmax(t[0].float() @ t[1].float().transpose(1, 2) * scale, dim=-1)
        return [p @ t[2].float()]
    return [q, k, v, o, scale], (cdiv(s, bm), b), {"BM": bm, "BN": bn, "D": d}, ref, lambda t: [t[3]]


def _linear_fp8(device, dtype, shape=(100, 70, 300), noncontig=False, tiles=(64, 64, 64)):
    """x and w quantised to `dtype` (an 8-bit float) as examples/linear_fp8.tle's `quantize` does, with their
    scales; the reference is the exact product of those 8-bit values, scaled."""
    m, n, k = shape
    bm, bn, bk = tiles
    largest = torch.finfo(dtype).max
    x, w = rand((m, k), device, torch.float32, noncontig), rand((n, k), device, torch.float32)
    sx, sw = x.abs().amax(1).clamp_min(1e-12) / largest, w.abs().amax(1).clamp_min(1e-12) / largest
    qx, qw = (x / sx[:, None]).to(dtype), (w / sw[:, None]).to(dtype)  # a non-contiguous x stays strided
    y = poison((m, n), device, torch.bfloat16)

    def ref(t):
        return [(t[0].double() @ t[1].double().T) * t[2].double()[:, None] * t[3].double()[None, :]]
    return ([qx, qw, sx, sw, y], (cdiv(m, bm), cdiv(n, bn)), {"BM": bm, "BN": bn, "BK": bk}, ref,
            lambda t: [t[4]])


# The square matmuls' large GPU shapes: a full 4096 tile grid, one row, and ragged sizes.
SQUARE_GPU = [(4096, 4096, 4096), (1, 4096, 4096), (333, 1000, 257)]
CASES = {
    "vector_add": Case("vector_add", _vector_add, [(1,), (1000,), (4096,), (10_000,)], gpu_shapes=[(1 << 20,)]),
    "softmax": Case("softmax", _softmax, [(1, 1), (7, 33), (64, 256), (37, 1000)]),
    "layernorm": Case("layernorm", _layernorm, [(1, 8), (7, 33), (64, 256), (37, 1000)]),
    "rmsnorm": Case("rmsnorm", _rmsnorm, [(1, 8), (7, 33), (64, 256), (37, 1000)]),
    "matmul": Case("matmul", _matmul, [(16, 16, 16), (64, 64, 64), (100, 70, 90), (130, 257, 65)],
                   dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    "matmul_grouped": Case("matmul_grouped", _matmul_grouped, [(16, 16, 16), (100, 70, 90), (130, 257, 65)],
                           dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    "matmul_persistent": Case("matmul_persistent", _matmul_persistent, [(16, 16, 16), (100, 70, 90), (130, 257, 65)],
                              dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    # One launch with SPLIT > 1 needs ordered atomics, which only the native path gives (see the example's header).
    "matmul_splitk": Case("matmul_splitk", _matmul_splitk, [(1, 16, 16), (5, 70, 300), (33, 100, 257), (16, 64, 512)],
                          dtypes=(torch.float16, torch.bfloat16),
                          gpu_shapes=[(1, 4096, 4096), (128, 4096, 14336), (333, 1000, 257)]),
    "swiglu": Case("swiglu", _swiglu, [(1, 1), (7, 33), (64, 256), (37, 1000)]),
    "cumsum": Case("cumsum", _cumsum, [(1, 1), (7, 33), (64, 256), (37, 1000)]),
    # 8-bit floats need sm_89 or newer: the H200's 8-bit tensor cores
    "linear_fp8": Case("linear_fp8", _linear_fp8, [(16, 16, 32), (100, 70, 300), (130, 257, 65)],
                       dtypes=(torch.float8_e4m3fn, torch.float8_e5m2),
                       gpu_shapes=[(4096, 4096, 4096), (1, 4096, 4096), (333, 1000, 257)]),
    # (batch * heads, S, L): ragged S and L; L past S and below it
    "attention": Case("attention", _attention, [(1, 16, 16), (2, 37, 50), (3, 64, 29), (2, 130, 77)],
                      dtypes=(torch.float16, torch.bfloat16), gpu_shapes=[(8, 1024, 1024), (2, 333, 257)]),
}


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float64; NaN anywhere in got (an unwritten element) gives inf."""
    g, w = got.double().cpu(), want.double().cpu()
    if torch.isnan(g).any():
        return float("inf")
    return ((g - w).norm() / w.norm().clamp_min(1e-30)).item()


def tolerance(name: str, dtype) -> float:
    """What each example is held to against a float32/float64 torch reference (docs/numerics.md)."""
    if name == "linear_fp8":  # bf16 output (2^-8) over an exact reference; the f32 sum of exact 8-bit products
        return 1e-2
    base = Case.tol(dtype)
    if name.startswith("matmul"):
        return {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-4)
    if name == "cumsum" and dtype == torch.float32:
        return 1e-5
    return base
