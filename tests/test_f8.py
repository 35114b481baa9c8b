"""The 8-bit floats f8e4m3 and f8e5m2 (docs/language.md, "Element types"): constants round as the GPUs convert,
the types promote and reduce as documented, both GPU paths compile an 8-bit product to the 8-bit tensor-core
instruction (checked in the cubin, on the CPU), and the interpreter runs a quantise-then-multiply pipeline against
torch. The golden programs tests/filecheck/f8_casts.tle, f8_dot.tle and tileir/f8.tle check the IR and run on
every backend (tests/test_golden_programs.py)."""
import math
import os
import random
import re
import shutil
import subprocess

import pytest
import torch

import tle
from tileir_available import has_tileiras
from tle.check import check_kernel, load_program
from tle.types import promote, round_f8

LARGEST = {"f8e4m3": (torch.float8_e4m3fn, 448.0), "f8e5m2": (torch.float8_e5m2, 57344.0)}


@pytest.mark.parametrize("dtype", sorted(LARGEST))
def test_round_f8_matches_a_saturating_conversion(dtype):
    torch_dt, largest = LARGEST[dtype]
    rng = random.Random(5)
    values = [0.0, -0.0, 1.1, 168.0, -168.0, 447.9, 460.0, 464.0, 1e6, -1e6, math.inf, -math.inf, 1e-9, 2.0 ** -9,
              3 * 2.0 ** -10, 2.0 ** -16, 57344.0, 61440.0]
    values += [rng.gauss(0, 1) * 10 ** rng.uniform(-6, 6) for _ in range(20000)]
    want = torch.tensor(values, dtype=torch.float64).clamp(-largest, largest).to(torch_dt).double().tolist()
    got = [round_f8(v, dtype) for v in values]
    assert got == want
    assert math.isnan(round_f8(math.nan, dtype))
    assert round_f8(math.inf, dtype) == largest and round_f8(-math.inf, dtype) == -largest


def test_promotion_and_sum():
    assert promote("f8e4m3", "f8e5m2") == "f16"  # holds both exactly
    assert promote("f8e4m3", "bf16") == "bf16" and promote("f8e5m2", "f32") == "f32"
    src = """kernel k(x: tensor<f8e5m2>[N], y: tensor<f32>[1], z: tensor<f32>[N]) {
        let t = load(x, tile=[64])
        store(y, full<f32>[1](sum(t)))
        store(z, cumsum(t))
    }"""
    kernel = check_kernel(load_program(src, "k.tle"), "k", {})
    assert "Tile(dtype='f32', shape=(64,))" in repr(kernel.body)  # sum and cumsum of 8-bit floats run in f32
    x = (torch.randn(50) * 4).to(torch.float8_e5m2)
    y, z = torch.empty(1), torch.empty(50)
    tle.compile(src).k[(1,)](x, y, z)
    assert torch.allclose(y, x.double().sum().float(), rtol=1e-6)
    assert torch.allclose(z, x.double().cumsum(0).float(), rtol=1e-6, atol=1e-6)


def test_launch_checks_the_element_type():
    mod = tle.compile("kernel k(x: tensor<f8e4m3>[N]) { store(x, zeros<f8e4m3>[16]) }")
    with pytest.raises(tle.LaunchError, match=r"float8_e4m3fn"):
        mod.k[(1,)](torch.zeros(16, dtype=torch.float8_e5m2))
    x = torch.ones(16, dtype=torch.float8_e4m3fn)
    mod.k[(1,)](x)
    assert (x.float() == 0).all()


QUANT_LINEAR = """
kernel quant<BLOCK: int = 256, T: dtype = f8e4m3>(x: tensor<bf16>[M, N], q: tensor<T>[M, N], scale: tensor<f32>[M]) {
    let t = cast<f32>(load(x, tile=[1, BLOCK], at=[program_id(0), 0]))
    let s = 448.0 / max(max(abs(t)), 1e-12)
    store(q, cast<T>(t * s), at=[program_id(0), 0])
    store(scale, full<f32>[1](1.0 / s), at=program_id(0))
}
kernel linear<BM: int = 64, BN: int = 64, BK: int = 64, T: dtype = f8e4m3>(x: tensor<T>[M, K], w: tensor<T>[N, K],
        sx: tensor<f32>[M], sw: tensor<f32>[N], y: tensor<bf16>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(load(x, tile=[BM, BK], at=[pm, k]), transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)
    }
    let s = reshape(load(sx, tile=[BM], at=pm), [BM, 1]) * reshape(load(sw, tile=[BN], at=pn), [1, BN])
    store(y, cast<bf16>(acc * s), at=[pm, pn])
}
"""


def test_interpreter_quantised_linear_against_torch():
    """Row-wise quantisation to f8e4m3 then x @ w^T: the product of the quantised values is exact in f32 on the
    interpreter, and the whole is within f8e4m3's 2^-4 relative step of the bf16 product."""
    mod = tle.compile(QUANT_LINEAR)
    g = torch.Generator().manual_seed(3)
    m, n, k = 70, 90, 200
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = torch.randn(n, k, generator=g).to(torch.bfloat16)
    qx, qw = torch.empty(m, k, dtype=torch.float8_e4m3fn), torch.empty(n, k, dtype=torch.float8_e4m3fn)
    sx, sw = torch.full((m,), math.nan), torch.full((n,), math.nan)
    mod.quant[(m,)](x, qx, sx)
    mod.quant[(n,)](w, qw, sw)
    assert (qx.float().abs().amax(1) == 448).all()  # each row's largest value lands on the top of the range
    assert torch.allclose(qx.float() * sx[:, None], x.float(), rtol=2 ** -4, atol=1e-6)
    y = torch.full((m, n), math.nan, dtype=torch.bfloat16)
    mod.linear[(-(-m // 64), -(-n // 64))](qx, qw, sx, sw, y)
    exact = (qx.double() @ qw.double().T) * sx.double()[:, None] * sw.double()[None, :]
    assert torch.allclose(y.double(), exact, rtol=2 ** -7, atol=1e-3)
    full = x.double() @ w.double().T
    assert (y.double() - full).abs().max() < 0.05 * full.abs().max()


def _cuobjdump():
    import triton
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return path if os.path.exists(path) else shutil.which("cuobjdump")


@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_both_paths_use_the_8bit_tensor_cores(backend):
    """The cubin of an f8e4m3 x @ w^T holds the 8-bit wgmma (Triton) or HGMMA ...E4M3.E4M3 (Tile IR)."""
    if backend == "tileir" and not has_tileiras():
        pytest.skip("tileiras is not installed")
    from tle.compiler import compile_kernel
    out = compile_kernel(load_program(QUANT_LINEAR, "q.tle"), "linear", {"BM": 128, "BN": 128, "BK": 64},
                         backend=backend, arch="sm_90")
    assert out.backend == backend
    if backend == "triton":
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in out.stages["ptx"]
        return
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tle_f8_{os.getpid()}.cubin")
    with open(path, "wb") as f:
        f.write(out.binary.cubin)
    try:
        sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
    finally:
        os.remove(path)
    assert re.search(r"GMMA\.64x\d+x32\.F32\.E4M3\.E4M3", sass), sass[:2000]


def test_before_sm89():
    """Tile IR takes no 8-bit floats before sm_89 (auto falls back); Triton converts f8e4m3 only from sm_89 on, so
    that is an error at the first use, and f8e5m2 compiles for sm_80 on the native path."""
    from tle.compiler import compile_kernel
    with pytest.raises(tle.TleError, match=r"f8e4m3 needs sm_89 or newer on Tile IR, not sm_80"):
        compile_kernel(load_program(QUANT_LINEAR, "q.tle"), "linear", {}, backend="tileir", arch="sm_80", stop="tileir")
    with pytest.raises(tle.TleError, match=r"f8e4m3 needs sm_89 or newer, not sm_80") as err:
        compile_kernel(load_program(QUANT_LINEAR, "q.tle"), "linear", {}, backend="auto", arch="sm_80")
    assert err.value.span.line == 8  # x: tensor<T>[M, K], the first value of that type
    out = compile_kernel(load_program(QUANT_LINEAR, "q.tle"), "linear", {"T": "f8e5m2"}, backend="auto", arch="sm_80")
    assert out.backend == "triton" and out.binary.cubin[:4] == b"\x7fELF"


def test_fast_acc_false_promotes_every_dot():
    """dot(..., fast_acc=false): each dot's products are added to the f32 accumulator at f32 precision: Triton's
    maxNumImpreciseAcc becomes the dot's K (one promotion per loop step), Tile IR's mmaf loses fast_acc. The
    default (fast) is the tensor cores' own accumulation on both paths."""
    from tle.compiler import compile_kernel
    precise = QUANT_LINEAR.replace("transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)",
                                   "transpose(load(w, tile=[BN, BK], at=[pn, k])), acc, fast_acc=false)")
    assert precise != QUANT_LINEAR
    for src, imprecise, fast in ((QUANT_LINEAR, 1 << 30, True), (precise, 64, False)):
        program = load_program(src, "q.tle")
        ttir = compile_kernel(program, "linear", {}, backend="triton", stop="ttir").stages["ttir"]
        assert f"maxNumImpreciseAcc = {imprecise} : i32" in ttir
        tileir = compile_kernel(program, "linear", {}, backend="tileir", stop="tileir").stages["tileir"]
        mmaf = next(line for line in tileir.splitlines() if "cuda_tile.mmaf" in line)
        assert ("fast_acc = true" in mmaf) == fast
    # on the interpreter both are the exact f32 sum of exact products
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 128, generator=g) * 8).to(torch.float8_e4m3fn)
    w = (torch.randn(64, 128, generator=g) * 8).to(torch.float8_e4m3fn)
    ones = torch.ones(64)
    ys = []
    for src in (QUANT_LINEAR, precise):
        y = torch.empty(64, 64, dtype=torch.bfloat16)
        tle.compile(src).linear[(1, 1)](x, w, ones, ones, y)
        ys.append(y)
    assert torch.equal(ys[0], ys[1])


def test_fast_acc_needs_8bit_operands():
    src = """kernel k(a: tensor<f16>[M, K], b: tensor<f16>[K, N], c: tensor<f32>[M, N]) {
        store(c, dot(load(a, tile=[32, 32]), load(b, tile=[32, 32]), fast_acc=false))
    }"""
    with pytest.raises(tle.TleError, match="fast_acc= only applies to 8-bit float operands, not f16"):
        check_kernel(load_program(src, "k.tle"), "k", {})


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_fast_acc_false_is_more_accurate_on_the_gpu(backend):
    """Over K = 16384 the tensor cores' own accumulation (the default) drifts; fast_acc=false holds the error at
    the per-tile level. H200, f32 output, relative to the exact product: 3.1e-3 against 1.3e-4 on both paths
    (benchmarks/RESULTS.md)."""
    src = QUANT_LINEAR.replace("y: tensor<bf16>[M, N]", "y: tensor<f32>[M, N]").replace(
        "store(y, cast<bf16>(acc * s), at=[pm, pn])", "store(y, acc * s, at=[pm, pn])")
    precise = src.replace("transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)",
                          "transpose(load(w, tile=[BN, BK], at=[pn, k])), acc, fast_acc=false)")
    g = torch.Generator(device="cuda").manual_seed(1)
    m, n, k = 256, 256, 16384
    x = (torch.randn(m, k, device="cuda", generator=g) * 32).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda", generator=g) * 32).to(torch.float8_e4m3fn)
    ones_m, ones_n = torch.ones(m, device="cuda"), torch.ones(n, device="cuda")
    exact = x.double() @ w.double().T
    errs = []
    for text in (src, precise):
        y = torch.full((m, n), math.nan, device="cuda")
        tle.compile(text).linear[(m // 64, n // 64)](x, w, ones_m, ones_n, y, backend=backend)
        errs.append(((y.double() - exact).norm() / exact.norm()).item())
    fast_err, precise_err = errs
    assert precise_err < 5e-4 and fast_err > 2 * precise_err, errs
