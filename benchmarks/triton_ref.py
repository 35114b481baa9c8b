"""Hand-written Triton kernels of the same algorithms as examples/*.tle: the baseline tle is held to.

Each kernel is written the way the Triton tutorials write it (01-vector-add, 02-fused-softmax, 03-matrix-
multiplication, 05-layer-norm): pointer arithmetic, masks for ragged edges, statistics in f32. The wrappers take
the arguments in the order the tle kernel does (examples/reference.py builds them), allocate nothing, and accept
the tile sizes and `num_warps` / `num_stages`, so that a benchmark can launch tle and this reference with the
same configuration and compare the compilers, not the configurations:

    triton_ref.softmax(x, y, BLOCK=1024, num_warps=4)
    triton_ref.matmul(a, b, c, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)            # 2-D grid, as tle
    triton_ref.matmul(a, b, c, BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3)  # grouped order
    triton_ref.matmul_splitk(a, b, c, part, count, BM=16, BN=64, BK=128, SPLIT=4, num_warps=4, num_stages=4)

Correctness check, on the CPU through Triton's interpreter (small and ragged shapes, every dtype):

    TRITON_INTERPRET=1 python benchmarks/triton_ref.py
"""
from __future__ import annotations

import os
import sys

import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- kernels -----------------------------------------------------------------------------------------------------

@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_kernel(g_ptr, u_ptr, o_ptr, M, N, g_row_stride, u_row_stride, o_row_stride,
                  BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    g = tl.load(g_ptr + rows[:, None] * g_row_stride + cols[None, :], mask=mask).to(tl.float32)
    u = tl.load(u_ptr + rows[:, None] * u_row_stride + cols[None, :], mask=mask).to(tl.float32)
    out = g * tl.sigmoid(g) * u
    tl.store(o_ptr + rows[:, None] * o_row_stride + cols[None, :], out.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    if GROUP_M == 0:
        # One program per (BM, BN) tile on a 2-D grid, axis 0 over M: the order tle's example launches in.
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    else:
        # 03-matrix-multiplication's grouped order: GROUP_M row-tiles share B's column tiles while in L2.
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(M, BM)
        num_pid_n = tl.cdiv(N, BN)
        num_pid_in_group = GROUP_M * num_pid_n
        first_pid_m = (pid // num_pid_in_group) * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
    # Rows and columns past M and N wrap around (loads stay in bounds, the store is masked); K is masked.
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def matmul_splitk_kernel(a_ptr, b_ptr, c_ptr, part_ptr, count_ptr, M, N, K,
                         stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         stride_ps, stride_pm, stride_pn,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
                         FUSED: tl.constexpr, SWAP: tl.constexpr = False):
    """examples/matmul_splitk.tle: program (pid_n, s, pid_m) sums the s-th of SPLIT runs of BK-wide K tiles of
    the (BM, BN) tile. FUSED: the partial goes to part[s], an acq_rel atomic counts the tile's arrivals, and the
    last program to arrive sums part over s into C and sets the counter back to 0 (SPLIT == 1: straight to C).
    Not FUSED: only part[s] is written (splitk_reduce_kernel sums it). SWAP: each K tile's product is taken as
    (b^T a^T)^T, the weight tile on the dot's left (wgmma's 64-row side), as the tle kernel's SWAP does."""
    pid_n = tl.program_id(0)
    s = tl.program_id(1)
    pid_m = tl.program_id(2)
    tiles = tl.cdiv(K, BK)
    per = tl.cdiv(tiles, SPLIT)
    k_lo = s * per
    k_hi = tl.minimum(k_lo + per, tiles)
    # Rows and columns past M and N wrap around (loads stay in bounds, the stores are masked); K is masked.
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = k_lo * BK + tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BN, BM) if SWAP else (BM, BN), dtype=tl.float32)  # SWAP: the transpose, until the loop ends
    for k in range(k_lo, k_hi):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - (k - k_lo) * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - (k - k_lo) * BK, other=0.0)
        if SWAP:
            acc = tl.dot(tl.trans(b), tl.trans(a), acc)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    if SWAP:
        acc = tl.trans(acc)
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    if SPLIT == 1 and FUSED:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        p_ptrs = part_ptr + offs_cm[:, None] * stride_pm + offs_cn[None, :] * stride_pn
        tl.store(p_ptrs + s * stride_ps, acc, mask=c_mask)
        if FUSED:
            tile = pid_m * tl.num_programs(0) + pid_n
            tl.debug_barrier()  # every thread's partial stores come before the (one-thread) release below
            if tl.atomic_add(count_ptr + tile, 1, sem="acq_rel") == SPLIT - 1:
                total = tl.zeros((BM, BN), dtype=tl.float32)
                for j in range(SPLIT):
                    total += tl.load(p_ptrs + j * stride_ps, mask=c_mask, other=0.0)
                tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
                tl.store(count_ptr + tile, 0)


@triton.jit
def splitk_reduce_kernel(part_ptr, c_ptr, M, N, stride_ps, stride_pm, stride_pn, stride_cm, stride_cn,
                         RM: tl.constexpr, RN: tl.constexpr, SPLIT: tl.constexpr):
    offs_m = tl.program_id(1) * RM + tl.arange(0, RM)
    offs_n = tl.program_id(0) * RN + tl.arange(0, RN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    p_ptrs = part_ptr + offs_m[:, None] * stride_pm + offs_n[None, :] * stride_pn
    total = tl.zeros((RM, RN), dtype=tl.float32)
    for j in range(SPLIT):
        total += tl.load(p_ptrs + j * stride_ps, mask=mask, other=0.0)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, total.to(c_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, tl.cumsum(x, axis=0).to(y_ptr.dtype.element_ty), mask=mask)


# ---- launchers: arguments in the tle kernel's order (see examples/reference.py) ---------------------------------
#
# prepare(name, *args, **config) -> (jit kernel, grid, kernel args, kernel kwargs); each launcher is prepare + launch.
# prepare is also what compile_for_target() uses to build a cubin without a GPU.

def _rows(t):
    assert t.dim() == 2 and t.stride(1) == 1, "row kernels need rows with unit stride"
    return t.stride(0)


def _opts(num_warps, num_stages):
    return {"num_warps": num_warps, "num_stages": num_stages}


def _prep_vector_add(x, y, out, *, BLOCK=1024, num_warps=4, num_stages=3):
    n = out.numel()
    return (vector_add_kernel, (triton.cdiv(n, BLOCK),), (x, y, out, n),
            {"BLOCK": BLOCK, **_opts(num_warps, num_stages)})


def _prep_softmax(x, y, *, BLOCK, num_warps=4, num_stages=3):
    m, n = x.shape
    assert BLOCK >= n
    return softmax_kernel, (m,), (x, y, n, _rows(x), _rows(y)), {"BLOCK": BLOCK, **_opts(num_warps, num_stages)}


def _prep_layernorm(x, w, b, y, eps, *, BLOCK, num_warps=4, num_stages=3):
    m, n = x.shape
    assert BLOCK >= n
    return (layernorm_kernel, (m,), (x, w, b, y, n, _rows(x), _rows(y), eps),
            {"BLOCK": BLOCK, **_opts(num_warps, num_stages)})


def _prep_rmsnorm(x, w, y, eps, *, BLOCK, num_warps=4, num_stages=3):
    m, n = x.shape
    assert BLOCK >= n
    return (rmsnorm_kernel, (m,), (x, w, y, n, _rows(x), _rows(y), eps),
            {"BLOCK": BLOCK, **_opts(num_warps, num_stages)})


def _prep_swiglu(gate, up, out, *, BM=16, BN=256, num_warps=4, num_stages=3):
    m, n = gate.shape
    return (swiglu_kernel, (triton.cdiv(m, BM), triton.cdiv(n, BN)),
            (gate, up, out, m, n, _rows(gate), _rows(up), _rows(out)),
            {"BM": BM, "BN": BN, **_opts(num_warps, num_stages)})


def _prep_matmul(a, b, c, *, BM=128, BN=128, BK=64, GROUP_M=0, num_warps=4, num_stages=3):
    m, k = a.shape
    k2, n = b.shape
    assert k == k2 and tuple(c.shape) == (m, n)
    if GROUP_M == 0:
        grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    else:
        grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    return (matmul_kernel, grid,
            (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
            {"BM": BM, "BN": BN, "BK": BK, "GROUP_M": GROUP_M, **_opts(num_warps, num_stages)})


def _prep_matmul_splitk(a, b, c, part, count, *, BM=16, BN=64, BK=128, SPLIT=4, FUSED=True, SWAP=False,
                        num_warps=4, num_stages=4):
    m, k = a.shape
    k2, n = b.shape
    assert k == k2 and tuple(c.shape) == (m, n) and tuple(part.shape) == (SPLIT, m, n)
    assert count.numel() >= triton.cdiv(m, BM) * triton.cdiv(n, BN)
    return (matmul_splitk_kernel, (triton.cdiv(n, BN), SPLIT, triton.cdiv(m, BM)),
            (a, b, c, part, count, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
             c.stride(1), part.stride(0), part.stride(1), part.stride(2)),
            {"BM": BM, "BN": BN, "BK": BK, "SPLIT": SPLIT, "FUSED": FUSED, "SWAP": SWAP,
             **_opts(num_warps, num_stages)})


def _prep_splitk_reduce(part, c, *, RM=16, RN=256, SPLIT=4, num_warps=4, num_stages=1):
    split, m, n = part.shape
    assert split == SPLIT and tuple(c.shape) == (m, n)
    return (splitk_reduce_kernel, (triton.cdiv(n, RN), triton.cdiv(m, RM)),
            (part, c, m, n, part.stride(0), part.stride(1), part.stride(2), c.stride(0), c.stride(1)),
            {"RM": RM, "RN": RN, "SPLIT": SPLIT, **_opts(num_warps, num_stages)})


def _prep_cumsum(x, y, *, BLOCK, num_warps=4, num_stages=3):
    m, n = x.shape
    assert BLOCK >= n
    return cumsum_kernel, (m,), (x, y, n, _rows(x), _rows(y)), {"BLOCK": BLOCK, **_opts(num_warps, num_stages)}


_PREPARE = {"vector_add": _prep_vector_add, "softmax": _prep_softmax, "layernorm": _prep_layernorm,
            "rmsnorm": _prep_rmsnorm, "swiglu": _prep_swiglu, "matmul": _prep_matmul, "cumsum": _prep_cumsum,
            "matmul_splitk": _prep_matmul_splitk, "splitk_reduce": _prep_splitk_reduce}


def prepare(name, *args, **config):
    return _PREPARE[name](*args, **config)


@triton.jit
def weight_read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Each program sums ITERS consecutive blocks of x: the tensor read once from HBM and nothing else. Not an
    example's twin: the bench times it on a decode matmul's weight as the floor any kernel that reads the weight
    must pay in the same harness (launch and ramp-up included)."""
    base = tl.program_id(0) * BLOCK * ITERS
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))


# The read configurations (BLOCK, ITERS, num_warps) the floor takes the fastest of: the fastest on the 33.6 MB
# (4096x4096 bf16) and 117 MB (4096x14336) weights among ~200 read kernels timed by benchmarks/read_floor.py on the
# H200 (12.0 and 30.7 us; the single configuration used before, 4096 x 8 on 8 warps, took 13.3 and 32.3 us).
WEIGHT_READ_CONFIGS = ((8192, 1, 4), (1024, 4, 8), (2048, 2, 8))


def weight_read_out(x):
    """The f32 buffer weight_read(x, out, ...) writes its per-program sums to (long enough for every config)."""
    import torch
    per = min(block * iters for block, iters, _ in WEIGHT_READ_CONFIGS)
    return torch.empty(triton.cdiv(x.numel(), per), device=x.device, dtype=torch.float32)


def weight_read(x, out, BLOCK=8192, ITERS=1, num_warps=4):
    """Read contiguous `x` once (out: weight_read_out(x))."""
    n = x.numel()
    weight_read_kernel[(triton.cdiv(n, BLOCK * ITERS),)](x, out, n, BLOCK=BLOCK, ITERS=ITERS, num_warps=num_warps,
                                                          num_stages=4)


@triton.jit
def empty_kernel(out_ptr):
    """Does nothing: its time in a harness is that harness's fixed cost per launch."""
    pass


def empty(out):
    empty_kernel[(1,)](out)


def _launcher(name):
    def launch(*args, **config):
        kernel, grid, kargs, kkw = _PREPARE[name](*args, **config)
        kernel[grid](*kargs, **kkw)
    launch.__name__ = name
    launch.__doc__ = f"Launch the {name} reference: {name}(<tle argument order>, **tiles, num_warps=, num_stages=)."
    return launch


vector_add = _launcher("vector_add")
softmax = _launcher("softmax")
layernorm = _launcher("layernorm")
rmsnorm = _launcher("rmsnorm")
swiglu = _launcher("swiglu")
matmul = _launcher("matmul")
cumsum = _launcher("cumsum")
matmul_splitk = _launcher("matmul_splitk")
splitk_reduce = _launcher("splitk_reduce")



def matmul_grouped(a, b, c, *, BM=128, BN=256, BK=64, GROUP_M=8, STAGES=3, num_warps=4, num_stages=None):
    """examples/matmul_grouped.tle's twin: the matmul kernel with the grouped order (a 1-D grid); the tle kernel's
    STAGES constant is the pipeline depth, Triton's num_stages."""
    matmul(a, b, c, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, num_warps=num_warps,
           num_stages=STAGES if num_stages is None else num_stages)


LAUNCHERS = {"vector_add": vector_add, "softmax": softmax, "layernorm": layernorm, "rmsnorm": rmsnorm,
             "swiglu": swiglu, "matmul": matmul, "cumsum": cumsum, "matmul_splitk": matmul_splitk,
             "matmul_grouped": matmul_grouped}


def compile_for_target(name, *args, arch: int = 90, **config):
    """Compile the reference for sm_<arch> without a GPU (CPU tensors are fine: only dtypes, shapes, strides and
    alignment matter), specialised exactly as a launch with these arguments would be. Returns Triton's
    CompiledKernel (.asm["ttgir"/"ptx"/"cubin"], .metadata.shared). Uses Triton 3.6 internals (the JIT's binder);
    not for use under TRITON_INTERPRET=1."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    kernel, _, kargs, kkw = prepare(name, *args, **config)
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*kargs, **kkw)
    options, signature, constexprs, attrs = kernel._pack_args(backend, dict(kkw), bound, specialization, options)
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options.__dict__)


# ---- correctness check -------------------------------------------------------------------------------------------

def _fix_interpreter_for_numpy2() -> None:
    """Triton 3.6's interpreter turns a scalar into a Python int with int(array of shape (1,)), which numpy >= 2.4
    refuses ("only 0-dimensional arrays can be converted"): `range(tl.cdiv(K, BK))` then fails. Patch that one
    conversion. Only used under TRITON_INTERPRET=1."""
    from triton.runtime import interpreter as ti
    if getattr(ti._patch_lang_tensor, "_tle_fixed", False):
        return
    original = ti._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._tle_fixed = True
    ti._patch_lang_tensor = patched


# Triton's interpreter keeps bf16 as raw uint16 and does arithmetic on the bits, so a kernel that adds or dots
# bf16 values without converting them to f32 first (vector_add, matmul) gives garbage there (relative errors of
# 1e9 seen); on the GPU they are right. Those two are skipped under the interpreter; their f16 runs cover the code.
INTERPRETER_UNSUPPORTED = {("vector_add", "bfloat16"), ("matmul", "bfloat16"), ("matmul_splitk", "bfloat16"),
                           ("matmul_grouped", "bfloat16")}


if os.environ.get("TRITON_INTERPRET", "0") == "1":
    _fix_interpreter_for_numpy2()


def check(device: str = "cpu", verbose: bool = True) -> list[str]:
    """Run every reference on examples/reference.py's small shapes (ragged ones included) and dtypes, on fresh
    random inputs with NaN-poisoned outputs, against torch in f32/f64. Returns the failures."""
    import torch
    interpreted = os.environ.get("TRITON_INTERPRET", "0") == "1"
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    from reference import CASES, relative_error, tolerance

    failures = []
    for name, case in CASES.items():
        launch = LAUNCHERS.get(name)
        if launch is None:  # an example the benchmark times against torch or a probe's twin only (benchmarks/README)
            if verbose:
                print(f"{name:10s} skipped: no hand-written reference in this file")
            continue
        variants = [{}]
        if name == "matmul":  # also the grouped order, and tiles bigger than the matrix
            variants = [{}, {"GROUP_M": 8}]
        if name == "matmul_splitk":  # also no split (straight to C), an uneven split, the two-launch form, and SWAP
            variants = [{}, {"SPLIT": 1}, {"SPLIT": 3}, {"FUSED": False}, {"SWAP": True}, {"SWAP": True, "SPLIT": 3}]
        for dtype in case.dtypes:
            if interpreted and (name, str(dtype)[6:]) in INTERPRETER_UNSUPPORTED:
                if verbose:
                    print(f"{name:10s} {str(dtype)[6:]:8s} skipped: the Triton interpreter does bf16 add/dot "
                          "on raw bits")
                continue
            for shape in case.shapes:
                for extra in variants:
                    torch.manual_seed(hash((name, shape, str(dtype))) % 2**31)
                    if name == "matmul":
                        args, _, consts, ref, outputs = case.make(device, dtype, shape, tiles=(32, 32, 16))
                    elif name == "matmul_splitk":
                        args, _, consts, ref, outputs = case.make(device, dtype, shape,
                                                                  split=extra.get("SPLIT", 4))
                        consts = {**consts, **extra}
                        extra = {}
                    else:
                        args, _, consts, ref, outputs = case.make(device, dtype, shape)
                    launch(*args, **consts, **extra)
                    if name == "matmul_splitk" and not consts.get("FUSED", True):
                        splitk_reduce(args[3], args[2], SPLIT=consts["SPLIT"])
                    if name == "matmul_splitk":
                        assert int(args[4].abs().sum()) == 0, "matmul_splitk left a counter set"
                    for got, want in zip(outputs(args), ref(args)):
                        err = relative_error(got, want)
                        ok = err <= tolerance(name, dtype)
                        shown = extra or {k: v for k, v in consts.items() if k in ("SPLIT", "FUSED")}
                        label = f"{name:10s} {str(dtype)[6:]:8s} {str(shape):16s} {shown or ''}"
                        if verbose:
                            print(f"{label:60s} rel err {err:.2e}  {'ok' if ok else 'FAIL'}")
                        if not ok:
                            failures.append(f"{label}: {err:.2e}")
    return failures


if __name__ == "__main__":
    dev = "cuda" if os.environ.get("TRITON_INTERPRET", "0") != "1" else "cpu"
    bad = check(dev)
    print(f"{len(bad)} failures" + ("".join(f"\n  {b}" for b in bad)))
    sys.exit(1 if bad else 0)
