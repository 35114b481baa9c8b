"""A batched dot, dot([B, M, K], [B, K, N]) (docs/language.md, "dot"): the interpreter against torch.bmm for each
operand type and on ragged sizes, both GPU paths' cubins built on the CPU (tt.dot and mmaf take 3-D tiles), and
both paths against torch on the GPU. Its errors: tests/check/dot_*.tle; its IR: tests/filecheck/dot_batched.tle."""
import pytest
import torch

import tle
from tileir_available import has_tileiras
from tle.check import check_kernel, load_program

BMM = """
kernel bmm<BB: int = 2, BM: int = 32, BN: int = 32, BK: int = 32, T: dtype = f16, A: dtype = f32, TF: bool = false>(
        a: tensor<T>[B, M, K], b: tensor<T>[B, K, N], c: tensor<A>[B, M, N]) {
    var acc = zeros<A>[BB, BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(load(a, tile=[BB, BM, BK], at=[program_id(2), program_id(0), k]),
                  load(b, tile=[BB, BK, BN], at=[program_id(2), k, program_id(1)]), acc, tf32=TF)
    }
    store(c, acc, at=[program_id(2), program_id(0), program_id(1)])
}
"""

# the operand type, the accumulator, tf32, and the tolerance (relative to the result's largest magnitude)
CASES = {"f16": (torch.float16, torch.float32, False, 1e-5), "bf16": (torch.bfloat16, torch.float32, False, 1e-5),
         "f32": (torch.float32, torch.float32, False, 1e-5), "tf32": (torch.float32, torch.float32, True, 2e-3),
         "i8": (torch.int8, torch.int32, False, 0)}
NAMES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.int8: "i8", torch.int32: "i32"}


def _inputs(shape_a, shape_b, dt, device="cpu"):
    g = torch.Generator(device=device).manual_seed(3)
    if dt == torch.int8:
        return (torch.randint(-100, 100, shape_a, generator=g, device=device, dtype=torch.int8),
                torch.randint(-100, 100, shape_b, generator=g, device=device, dtype=torch.int8))
    return (torch.randn(shape_a, generator=g, device=device).to(dt), torch.randn(shape_b, generator=g,
                                                                                device=device).to(dt))


def _run(kernel, sizes, case, device="cpu", **kw):
    dt, acc_dt, tf32, tol = CASES[case]
    B, M, N, K = sizes
    a, b = _inputs((B, M, K), (B, K, N), dt, device)
    c = torch.full((B, M, N), -7, dtype=acc_dt, device=device)
    grid = ((M + 31) // 32, (N + 31) // 32, (B + 1) // 2)
    kernel[grid](a, b, c, T=NAMES[dt], A=NAMES[acc_dt], TF=tf32, **kw)
    want = torch.bmm(a.double(), b.double())
    if tol == 0:
        assert torch.equal(c.double(), want)
    else:
        err = ((c.double() - want).abs().max() / want.abs().max()).item()
        assert err <= tol, (case, sizes, err)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sizes", [(4, 64, 64, 64), (5, 50, 70, 40)], ids=["even", "ragged"])
def test_the_interpreter_matches_torch_bmm(case, sizes):
    _run(tle.compile(BMM).bmm, sizes, case)


def test_acc_plus_a_batched_dot_and_its_type():
    src = """kernel k(q: tensor<bf16>[H, S, D], kk: tensor<bf16>[H, S, D], s: tensor<f32>[H, S, S]) {
        let x = load(q, tile=[4, 16, 32])
        let y = load(kk, tile=[4, 16, 32])
        let scores = dot(x, transpose(y, perm=[0, 2, 1])) * 0.5
        store(s, scores + dot(x, transpose(y, perm=[0, 2, 1])))
    }"""
    kernel = check_kernel(load_program(src, "k.tle"), "k", {})
    assert "Tile(dtype='f32', shape=(4, 16, 16))" in repr(kernel.body)
    q, k = torch.randn(4, 16, 32).bfloat16(), torch.randn(4, 16, 32).bfloat16()
    s = torch.empty(4, 16, 16)
    tle.compile(src).k[(1,)](q, k, s)
    torch.testing.assert_close(s, 1.5 * (q.float() @ k.float().transpose(1, 2)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("case", ["f16", "tf32", "i8"])
def test_both_paths_build_a_batched_dot(backend, case):
    """tt.dot and mmaf take [B, M, K] @ [B, K, N] as they are; the cubin is built on the CPU."""
    if backend == "tileir" and not has_tileiras():
        pytest.skip("tileiras is not installed")
    from tle.compiler import compile_kernel
    dt, acc_dt, tf32, _ = CASES[case]
    out = compile_kernel(load_program(BMM, "bmm.tle"), "bmm", {"T": NAMES[dt], "A": NAMES[acc_dt], "TF": tf32},
                         backend=backend, arch="sm_90")
    assert out.backend == backend and out.binary.cubin
    ir_text = out.stages["ttir" if backend == "triton" else "tileir"]
    op = "tt.dot" if backend == "triton" else ("cuda_tile.mmai" if case == "i8" else "cuda_tile.mmaf")
    assert any(op in line and "2x32x32x" in line for line in ir_text.splitlines()), ir_text[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_both_paths_match_torch_bmm_on_the_gpu(backend, case):
    kernel = tle.compile(BMM).bmm
    for sizes in ((8, 128, 128, 256), (5, 50, 70, 40)):
        _run(kernel, sizes, case, device="cuda", backend=backend)


def test_the_padding_check_sees_a_batched_dots_k_lanes():
    """Products of lanes past K must be 0, in every product of the batch: one operand padded with 0 is enough."""
    import warnings
    src = """kernel k(a: tensor<f32>[B, M, K], b: tensor<f32>[B, K, N], c: tensor<f32>[B, M, N]) {
        store(c, dot(load(a, tile=[2, 16, 32], pad=1.0), load(b, tile=[2, 32, 16]PAD)))
    }"""
    a, b, c = torch.randn(2, 16, 20), torch.randn(2, 20, 16), torch.empty(2, 16, 16)
    for pad, warns in (("", False), (", pad=1.0", True)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", tle.TlePaddingWarning)
            tle.compile(src.replace("PAD", pad)).k[(1,)](a, b, c)
        got = [str(w.message) for w in seen if issubclass(w.category, tle.TlePaddingWarning)]
        assert (len(got) == 1 and "dot adds products of lanes past the edge of 'a'" in got[0]) if warns else not got
        if not warns:
            torch.testing.assert_close(c, a @ b)
