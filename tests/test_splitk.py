"""examples/matmul_splitk.tle, the split-K decode matmul (issue 5), on the CPU: the one-launch kernel over several
splits and its two-launch form on the interpreter, the memory ordering its last-arriving program relies on in the
native path's PTX, the Triton twin (benchmarks/triton_ref.py) under Triton's interpreter, and the benchmark's decode
cases (benchmarks/bench.py --dry-run --decode)."""
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tle  # noqa: E402
from reference import CASES, relative_error, splitk_workspace, tolerance  # noqa: E402

PATH = os.path.join(ROOT, "examples", "matmul_splitk.tle")
CASE = CASES["matmul_splitk"]


@pytest.fixture(scope="module")
def mod():
    return tle.compile(PATH)


@pytest.mark.parametrize("split", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("shape", [(1, 40, 300), (20, 70, 513), (33, 100, 64)])
def test_one_launch_on_interpreter(mod, split, shape):
    """Every split (uneven ones, and more splits than K tiles, whose extra programs add zeros) gives A @ B, and
    leaves the arrival counters zeroed, so a second launch on the same workspace is right too."""
    torch.manual_seed(0)
    for launch in range(2):
        args, grid, consts, ref, outputs = CASE.make("cpu", torch.float16, shape, split=split)
        if launch:
            args[3:] = workspace
        workspace = args[3:]
        mod.matmul_splitk[grid](*args, **consts)
        assert mod.matmul_splitk.last_backend == "interp"
        assert relative_error(outputs(args)[0], ref(args)[0]) <= tolerance("matmul_splitk", torch.float16)
        assert int(args[4].abs().sum()) == 0, "a counter was left set"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_two_launches_on_interpreter(mod, dtype):
    torch.manual_seed(1)
    m, n, k, split = 19, 90, 400, 4
    args, _, consts, ref, outputs = CASE.make("cpu", dtype, (m, n, k), split=split)
    a, b, c, part, _ = args
    mod.matmul_splitk_partial[(-(-n // consts["BN"]), split, -(-m // consts["BM"]))](a, b, part, **consts)
    mod.splitk_reduce[(-(-n // 32), -(-m // 16))](part, c, RM=16, RN=32, SPLIT=split)
    assert relative_error(c, ref(args)[0]) <= tolerance("matmul_splitk", dtype)


def test_workspace_shapes():
    part, count = splitk_workspace("cpu", 33, 100, 16, 32, 4)
    assert tuple(part.shape) == (4, 33, 100) and part.dtype == torch.float32
    assert tuple(count.shape) == (3 * 4,) and count.dtype == torch.int32 and not count.any()


def _native_stage(bm, bn, bk, split, warps, stages, m=16, n=4096, k=4096, swap=False, stage="ptx"):
    """One stage of the native path's output for sm_90 (its PTX by default), specialised as a launch with tensors
    of these shapes would be."""
    from tle.check import check_kernel
    from tle.compiler import compile_kernel
    kern = tle.compile(PATH).matmul_splitk
    e = lambda *s, dt=torch.bfloat16: torch.empty(*s, dtype=dt)  # noqa: E731
    args = (e(m, k), e(k, n), e(m, n), *splitk_workspace("cpu", m, n, bm, bn, split))
    values, constants, _ = kern._bind(args, {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split, "SWAP": swap})
    checked = check_kernel(kern.program, kern.name, constants)
    flat, _, _ = kern._check_args(checked, values)
    out = compile_kernel(kern.program, kern.name, constants, kern._spec(checked, flat), backend="triton",
                         arch="sm_90", num_warps=warps, num_stages=stages,
                         **({"stop": stage} if stage != "ptx" else {}))
    return out.stages[stage] if stage != "ptx" else out.binary.stages["ptx"]


def _ptx(bm, bn, bk, split, warps, stages, m=16, n=4096, k=4096):
    return _native_stage(bm, bn, bk, split, warps, stages, m, n, k)


@pytest.mark.parametrize("cfg", [(16, 64, 64, 4, 4, 5), (128, 64, 64, 2, 8, 7)], ids=["mma", "wgmma"])
def test_native_path_orders_the_partials_around_the_atomic(cfg):
    """The last-arriving program reads partials other programs stored: on the native path that holds because the
    counter's atomic is acq_rel at GPU scope, done by one thread after a CTA barrier that follows every thread's
    partial stores, and its result reaches the other threads through shared memory behind another barrier (the
    pattern of CUTLASS's semaphore). tle has no fence builtin, so this test pins what Triton emits."""
    lines = _ptx(*cfg, m=cfg[0]).splitlines()
    atoms = [i for i, ln in enumerate(lines) if re.search(r"\batom\.global", ln)]
    assert len(atoms) == 1 and ".acq_rel" in lines[atoms[0]] and ".gpu" in lines[atoms[0]], lines[atoms[0]]
    a = atoms[0]
    last_store = max(i for i in range(a) if "st.global" in lines[i])
    assert any("bar.sync" in ln for ln in lines[last_store:a]), "no barrier between the partial stores and the atomic"
    after = lines[a:a + 12]
    assert any("st.shared" in ln for ln in after) and any("bar.sync" in ln for ln in after), \
        "the atomic's result is not broadcast through shared memory behind a barrier"


def test_split_one_has_no_atomic():
    assert "atom." not in _ptx(16, 32, 128, 1, 4, 4)


@pytest.mark.parametrize("split", [1, 3, 4])
@pytest.mark.parametrize("shape", [(1, 40, 300), (20, 70, 513), (33, 100, 64)])
def test_swapped_product_on_interpreter(mod, split, shape):
    """SWAP=true takes each K tile's product as (B^T A^T)^T: the same A @ B, counters left zeroed."""
    torch.manual_seed(2)
    args, grid, consts, ref, outputs = CASE.make("cpu", torch.float16, shape, split=split)
    mod.matmul_splitk[grid](*args, **consts, SWAP=True)
    assert relative_error(outputs(args)[0], ref(args)[0]) <= tolerance("matmul_splitk", torch.float16)
    assert int(args[4].abs().sum()) == 0, "a counter was left set"


def test_swap_gives_a_small_m_tile_hoppers_warp_group_mma():
    """Why SWAP exists: with BM = 16 the plain product takes mma.sync (an nvidia_mma of version 2, the weight
    tile copied from shared memory into registers), while the swapped one puts the 64-row weight tile on the
    left, where Hopper's wgmma reads it straight from shared memory (version 3, one warp_group_dot)."""
    plain = _native_stage(16, 64, 256, 2, 4, 3, stage="ttgir")
    swapped = _native_stage(16, 64, 256, 2, 4, 3, swap=True, stage="ttgir")
    assert "versionMajor = 2" in plain and "ttng.warp_group_dot " not in plain
    assert "versionMajor = 3" in swapped and "ttng.warp_group_dot " in swapped


def test_triton_twin_on_triton_interpreter():
    """benchmarks/triton_ref.py's matmul_splitk (one launch, SPLIT 1/3/4, the two-launch form, SWAP) under
    TRITON_INTERPRET=1, in a child process (the variable must be set before Triton is imported)."""
    code = (
        "import sys; sys.path[:0] = ['benchmarks', 'examples']\n"
        "import triton_ref, reference\n"
        "keep = {'matmul_splitk': reference.CASES['matmul_splitk']}\n"
        "reference.CASES.clear(); reference.CASES.update(keep)\n"
        "bad = triton_ref.check('cpu', verbose=False)\n"
        "print(bad); sys.exit(1 if bad else 0)\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_bench_decode_dry_run():
    """The benchmark's decode cases build, list their split-K configurations, and run tiny versions on the
    interpreters through the benchmark's own correctness code."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench.py"), "--dry-run", "--decode"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "SPLIT=" in proc.stdout and "dry run: 0 failures" in proc.stdout
    assert "1x4096x14336" in proc.stdout  # the down projection
