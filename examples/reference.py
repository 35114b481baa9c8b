"""How to launch each example, with a torch reference: shared by run_example.py, the tests and benchmarks.

`CASES[name].make(device, dtype, shape, noncontig)` returns (args, grid, constants, reference, outputs):
launch with `mod.<name>[grid](*args, **constants)`, then compare `outputs(args)` with `reference(args)`.
Outputs start as NaN so that an element the kernel never wrote cannot pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
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


def _matmul_batched(device, dtype, shape=(3, 100, 70, 90), noncontig=False, tiles=(32, 32, 32)):
    z, m, n, k = shape
    bm, bn, bk = tiles
    # noncontig: each of a's products transposed (inner stride != 1), as rand gives the 2-D examples
    a = rand((z, k, m), device, dtype).transpose(1, 2) if noncontig else rand((z, m, k), device, dtype)
    b, c = rand((z, k, n), device, dtype), poison((z, m, n), device, dtype)
    # Fewer programs than tiles, so that programs walk several and cross from one product to the next
    programs = min(z * cdiv(m, bm) * cdiv(n, bn), 132 if device == "cuda" else 5)
    return ([a, b, c], (programs,), {"BM": bm, "BN": bn, "BK": bk},
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


def _gelu(device, dtype, shape=(10_000,), noncontig=False):
    (n,) = shape
    x, y = rand((n,), device, dtype, noncontig) * 2, poison((n,), device, dtype)
    return ([x, y], (cdiv(n, 1024),), {"BLOCK": 1024},
            lambda a: [torch.nn.functional.gelu(a[0].float(), approximate="tanh")], lambda a: [a[1]])


def _cumsum(device, dtype, shape=(37, 300), noncontig=False):
    m, n = shape
    x, y = rand((m, n), device, dtype, noncontig), poison((m, n), device, dtype)
    return [x, y], (m,), {"BLOCK": next_pow2(n)}, lambda a: [torch.cumsum(a[0].float(), dim=1)], lambda a: [a[1]]


def _linear_recurrence(device, dtype, shape=(2, 100, 70), noncontig=False):
    b, n, d = shape
    a = torch.sigmoid(torch.randn((b, n, d), device=device)).to(dtype)  # decays in (0, 1): h stays bounded
    x = torch.randn((b, d, n), device=device).to(dtype).transpose(1, 2) if noncontig else rand((b, n, d), device,
                                                                                                  dtype)
    h = poison((b, n, d), device, dtype)

    def reference(args):
        a, x = args[0].double(), args[1].double()
        out, state = torch.empty_like(a), torch.zeros_like(a[:, 0])
        for t in range(a.shape[1]):
            state = a[:, t] * state + x[:, t]
            out[:, t] = state
        return [out]
    return [a, x, h], (cdiv(d, 64), b), {"BT": 64, "BD": 64}, reference, lambda args: [args[2]]


def attention_scores(q, k, scale: float, causal: bool):
    """q k^T * scale for [B, S, D] and [B, L, D]; with causal, -inf where the key comes after the query (query i
    sees keys 0..i, torch's is_causal=True)."""
    scores = q @ k.transpose(1, 2) * scale
    if causal:
        s, l = scores.shape[1:]
        after = torch.arange(l, device=scores.device)[None, :] > torch.arange(s, device=scores.device)[:, None]
        scores = scores.masked_fill(after, float("-inf"))
    return scores


def _attention(device, dtype, shape=(2, 37, 50), noncontig=False, tiles=(32, 16), d=16):
    """shape: (batch * heads, S, L) or (batch * heads, S, L, causal)."""
    b, s, l, causal = shape if len(shape) == 4 else (*shape, False)
    bm, bn = tiles
    q = (torch.randn((b, d, s), device=device).to(dtype).transpose(1, 2) if noncontig  # inner stride != 1
         else rand((b, s, d), device, dtype))
    k, v, o = rand((b, l, d), device, dtype), rand((b, l, d), device, dtype), poison((b, s, d), device, dtype)
    scale = d ** -0.5

    def ref(t):
        scores = attention_scores(t[0].float(), t[1].float(), scale, causal)
        return [torch.softmax(scores, dim=-1) @ t[2].float()]
    return ([q, k, v, o, scale], (cdiv(s, bm), b), {"BM": bm, "BN": bn, "D": d, "CAUSAL": causal}, ref,
            lambda t: [t[3]])


def _attention_varlen(device, dtype, shape=(2, 16, 5, 70, 33), noncontig=False, tiles=(32, 16)):
    """shape: (heads, D, *sequence lengths), packed back to back from row 0, then 3 rows of no sequence (not
    compared: tests/test_user_kernels_probe.py checks that such rows stay unwritten). A negative first length means
    not causal (its absolute value is the length)."""
    h, d, *lens = shape
    causal = lens[0] >= 0
    lens = [abs(n) for n in lens]
    starts = [0]
    for n in lens:
        starts.append(starts[-1] + n)
    rows = starts[-1] + 3
    bm, bn = tiles
    q = (torch.randn((rows, d, h), device=device).to(dtype).transpose(1, 2) if noncontig  # inner stride != 1
         else rand((rows, h, d), device, dtype))
    k, v, o = rand((rows, h, d), device, dtype), rand((rows, h, d), device, dtype), poison((rows, h, d), device, dtype)
    cu = torch.tensor(starts, device=device, dtype=torch.int32)
    scale = d ** -0.5

    def ref(t):
        out = torch.empty((starts[-1], h, d), device=t[0].device)
        for s, e in zip(starts[:-1], starts[1:]):
            qs, ks, vs = (x[s:e].float().transpose(0, 1) for x in t[:3])  # [H, len, D]
            out[s:e] = (torch.softmax(attention_scores(qs, ks, scale, causal), dim=-1) @ vs).transpose(0, 1)
        return [out]
    return ([q, k, v, cu, o, scale], (cdiv(max(lens), bm), len(lens), h),
            {"BM": bm, "BN": bn, "D": d, "CAUSAL": causal}, ref, lambda t: [t[4][:starts[-1]]])


# examples/attention_bwd.tle's kernels, in the order attention_training launches them
TRAINING_KERNELS = ("attention_fwd", "attention_bwd_delta", "attention_bwd_dkdv", "attention_bwd_dq")


def attention_training(mod, q, k, v, dout, scale: float, causal: bool, tiles=(64, 64), **options):
    """examples/attention_bwd.tle's four kernels in order, on [B, S, D] / [B, L, D] tensors: (o, lse, dq, dk, dv).
    `mod` is tle.compile("examples/attention_bwd.tle"); options (backend=...) go to every launch."""
    (b, s, d), l = q.shape, k.shape[1]
    bm, bn = tiles
    consts = {"BM": bm, "BN": bn, "D": d, "CAUSAL": causal, **options}
    o, dq = torch.empty_like(q), torch.empty_like(q)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    lse = torch.empty((b, s), device=q.device, dtype=torch.float32)
    delta = torch.empty_like(lse)
    mod.attention_fwd[(cdiv(s, bm), b)](q, k, v, o, lse, scale, **consts)
    mod.attention_bwd_delta[(cdiv(s, bm), b)](o, dout, delta, BM=bm, D=d, **options)
    mod.attention_bwd_dkdv[(cdiv(l, bn), b)](q, k, v, dout, lse, delta, dk, dv, scale, **consts)
    mod.attention_bwd_dq[(cdiv(s, bm), b)](q, k, v, dout, lse, delta, dq, scale, **consts)
    return o, lse, dq, dk, dv


def attention_training_reference(q, k, v, dout, scale: float, causal: bool):
    """(o, lse, dq, dk, dv) from torch autograd in float64; lse in attention_bwd.tle's units (log2 of each row's
    sum of exp2 of the scores times log2(e))."""
    q, k, v = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    scores = attention_scores(q, k, scale, causal)
    o = torch.softmax(scores, dim=-1) @ v
    o.backward(dout.double())
    lse = torch.logsumexp(scores, dim=-1) / math.log(2)
    return o.detach(), lse.detach(), q.grad, k.grad, v.grad


def _dropout(device, dtype, shape=(10_000,), noncontig=False, p=0.3, seed=1234567):
    """The mask is Philox's (philox_rand below), so the reference is exact up to the scaling's rounding."""
    (n,) = shape
    x, y = rand((n,), device, dtype, noncontig), poison((n,), device, dtype)
    p32 = torch.tensor(p, dtype=torch.float32).item()  # what the f32 parameter holds

    def ref(a):
        keep = philox_rand(seed, torch.arange(n, dtype=torch.int32)).to(a[0].device) > p32
        return [torch.where(keep, a[0].float() / (1.0 - p32), torch.zeros(1, device=a[0].device))]
    return [x, y, seed, p32], (cdiv(n, 1024),), {"BLOCK": 1024}, ref, lambda a: [a[1]]


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


# ---- Philox4x32, as Triton's tl.rand: the reference for rand/randint/randn (examples/dropout.tle, the tests) -------
# Written from the algorithm's definition and Triton's constants, not from tle/philox.py, in numpy uint64 (every
# product of two 32-bit words is exact there). tests/test_random.py checks it against Triton's own tl.randint
# through Triton's CPU interpreter.
PHILOX_MASK = np.uint64(0xFFFFFFFF)
PHILOX_ROUND_A, PHILOX_ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
PHILOX_KEY_A, PHILOX_KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)


def philox(seed: int, offsets, rounds: int = 10):
    """The four 32-bit output words (numpy uint64 arrays) for an integer seed (its 64 bits, two's complement) and
    integer offsets (i32 or i64 values: the low word is the first counter word, the high word of an i64 the
    second; an i32 offset's second word is 0)."""
    off = np.asarray(offsets.cpu().numpy() if isinstance(offsets, torch.Tensor) else offsets)
    wide = off.dtype == np.int64
    bits = off.astype(np.int64).view(np.uint64)
    c0 = bits & PHILOX_MASK
    c1 = (bits >> np.uint64(32)) & PHILOX_MASK if wide else np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    s = seed & 0xFFFFFFFFFFFFFFFF
    k0, k1 = np.uint64(s & 0xFFFFFFFF), np.uint64(s >> 32)
    for _ in range(rounds):
        p0, p2 = PHILOX_ROUND_A * c0, PHILOX_ROUND_B * c2  # exact: both factors are below 2**32
        hi0, hi2 = p0 >> np.uint64(32), p2 >> np.uint64(32)
        c0, c1, c2, c3 = hi2 ^ c1 ^ k0, p2 & PHILOX_MASK, hi0 ^ c3 ^ k1, p0 & PHILOX_MASK
        k0, k1 = (k0 + PHILOX_KEY_A) & PHILOX_MASK, (k1 + PHILOX_KEY_B) & PHILOX_MASK
    return c0, c1, c2, c3


def philox_i32(words) -> torch.Tensor:
    """32-bit words as the i32 values that carry the same bits."""
    return torch.from_numpy(words.astype(np.uint32).view(np.int32).copy())


def philox_uniform(words) -> torch.Tensor:
    """Triton's uint_to_uniform_float: the i32 bits folded onto 0..2**31-1, to f32, times an f32 scale."""
    x = philox_i32(words)
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def _words(values: list, words: int) -> torch.Tensor:
    """The first value (words=1), or all four along a new last axis (words=4: Triton's randint4x and friends)."""
    return values[0] if words == 1 else torch.stack(values, dim=-1)


def philox_randint(seed, offsets, rounds=10, words=1) -> torch.Tensor:
    return _words([philox_i32(w) for w in philox(seed, offsets, rounds)], words)


def philox_rand(seed, offsets, rounds=10, words=1) -> torch.Tensor:
    return _words([philox_uniform(w) for w in philox(seed, offsets, rounds)], words)


def philox_randn(seed, offsets, rounds=10, words=1) -> torch.Tensor:
    """Box-Muller on pairs of words, in float64 from their f32 uniforms: the cosine branch of the first pair
    (tl.randn), or both branches of both pairs (tl.randn4x: n1, n2 from words 0 and 1, n3, n4 from 2 and 3)."""
    u = [philox_uniform(w) for w in philox(seed, offsets, rounds)]
    floor = torch.tensor(1.0e-7, dtype=torch.float32).item()
    out = []
    for i in (0, 2):
        radius = torch.sqrt(-2.0 * torch.log(torch.clamp(u[i], min=floor).double()))
        theta = (torch.tensor(6.283185307179586, dtype=torch.float32) * u[i + 1]).double()
        out += [radius * torch.cos(theta), radius * torch.sin(theta)]
    return _words(out, words)


# The square matmuls' large GPU shapes: a full 4096 tile grid, one row, and ragged sizes.
SQUARE_GPU = [(4096, 4096, 4096), (1, 4096, 4096), (333, 1000, 257)]
# The row examples' large GPU shapes: a full tile, a ragged one, a ragged 16384 tile (Tile IR's cumsum compiled again
# at 2 programs per SM: tle/compiler.py _past_one_program) and a row of a vocabulary in one 32768 tile (on the native
# path by default 32 warps for a reduction, 8 for cumsum's scan: tle/compiler.py default_num_warps; backend="auto"
# takes the native path there: lowering/tileir_legality.py WIDE_REDUCTION_ELEMENTS, WIDE_SCAN_ELEMENTS).
ROW_GPU = [(4096, 4096), (3, 8191), (7, 12800), (5, 32000)]
CASES = {
    "vector_add": Case("vector_add", _vector_add, [(1,), (1000,), (4096,), (10_000,)], gpu_shapes=[(1 << 20,)]),
    "softmax": Case("softmax", _softmax, [(1, 1), (7, 33), (64, 256), (37, 1000)], gpu_shapes=ROW_GPU),
    "layernorm": Case("layernorm", _layernorm, [(1, 8), (7, 33), (64, 256), (37, 1000)], gpu_shapes=ROW_GPU),
    "rmsnorm": Case("rmsnorm", _rmsnorm, [(1, 8), (7, 33), (64, 256), (37, 1000)], gpu_shapes=ROW_GPU),
    "matmul": Case("matmul", _matmul, [(16, 16, 16), (64, 64, 64), (100, 70, 90), (130, 257, 65)],
                   dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    "matmul_grouped": Case("matmul_grouped", _matmul_grouped, [(16, 16, 16), (100, 70, 90), (130, 257, 65)],
                           dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    "matmul_persistent": Case("matmul_persistent", _matmul_persistent, [(16, 16, 16), (100, 70, 90), (130, 257, 65)],
                              dtypes=(torch.float16, torch.bfloat16), gpu_shapes=SQUARE_GPU),
    # (batch, M, N, K); on the GPU a short K, the case the example is for, and a ragged batch
    "matmul_batched": Case("matmul_batched", _matmul_batched, [(1, 16, 16, 16), (3, 100, 70, 90), (2, 130, 257, 65)],
                           dtypes=(torch.float16, torch.bfloat16),
                           gpu_shapes=[(8, 1024, 1024, 128), (4, 1024, 1024, 1024), (5, 333, 1000, 257)]),
    # One launch with SPLIT > 1 needs ordered atomics, which only the native path gives (see the example's header).
    "matmul_splitk": Case("matmul_splitk", _matmul_splitk, [(1, 16, 16), (5, 70, 300), (33, 100, 257), (16, 64, 512)],
                          dtypes=(torch.float16, torch.bfloat16),
                          gpu_shapes=[(1, 4096, 4096), (128, 4096, 14336), (333, 1000, 257)]),
    "dropout": Case("dropout", _dropout, [(1,), (1000,), (4096,), (10_000,)], gpu_shapes=[(1 << 20,)]),
    "swiglu": Case("swiglu", _swiglu, [(1, 1), (7, 33), (64, 256), (37, 1000)]),
    # inline PTX: the native path only (Tile IR cannot carry it)
    "gelu": Case("gelu", _gelu, [(1,), (1000,), (4096,), (10_000,)], backends=("triton",), gpu_shapes=[(1 << 20,)]),
    "cumsum": Case("cumsum", _cumsum, [(1, 1), (7, 33), (64, 256), (37, 1000)], gpu_shapes=ROW_GPU),
    # (batch, time, channels): one chunk of time, several with a ragged last one, channels past one block
    "linear_recurrence": Case("linear_recurrence", _linear_recurrence, [(1, 64, 64), (2, 100, 70), (3, 200, 33)],
                              gpu_shapes=[(8, 4096, 1024), (3, 1000, 333)]),
    # 8-bit floats need sm_89 or newer: the H200's 8-bit tensor cores
    "linear_fp8": Case("linear_fp8", _linear_fp8, [(16, 16, 32), (100, 70, 300), (130, 257, 65)],
                       dtypes=(torch.float8_e4m3fn, torch.float8_e5m2),
                       gpu_shapes=[(4096, 4096, 4096), (1, 4096, 4096), (333, 1000, 257)]),
    # (batch * heads, S, L[, causal]): ragged S and L; L past S and below it
    "attention": Case("attention", _attention, [(1, 16, 16), (2, 37, 50), (3, 64, 29), (2, 130, 77),
                                                (1, 64, 64, True), (2, 37, 50, True), (3, 64, 29, True),
                                                (2, 130, 77, True)],
                      dtypes=(torch.float16, torch.bfloat16),
                      gpu_shapes=[(8, 1024, 1024), (2, 333, 257), (8, 1024, 1024, True), (2, 333, 257, True)]),
    # (heads, D, *sequence lengths packed from row 0; a negative first length: not causal): sequences shorter than
    # a tile, ragged, empty, and none starting at a multiple of a tile
    "attention_varlen": Case("attention_varlen", _attention_varlen,
                             [(1, 16, 16), (2, 16, 5, 70, 0, 33), (2, 16, -5, 70, 0, 33), (1, 32, 40, 3)],
                             dtypes=(torch.float16, torch.bfloat16),
                             gpu_shapes=[(8, 128, 700, 1500, 64, 2048), (8, 64, -700, 1500, 64, 2048)]),
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
    if name == "gelu" and dtype == torch.float32:  # tanh.approx.f32: a relative error up to 2^-10.987 in the tanh
        return 1e-3
    return base
