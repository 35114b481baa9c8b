"""runtime/launch.py: Triton-compiled cubins launched through the CUDA driver API, checked against torch.

The kernels are the hand-written TTIR files of tests/targets/data. Skipped without a GPU (tests/conftest.py);
the host-side argument packing is tested without one in tests/targets/test_launch_args.py.
"""
import time
from pathlib import Path

import pytest
import torch

from tle.runtime.launch import load
from tle.targets.triton import compile_ttir

DATA = Path(__file__).parent.parent / "targets" / "data"
DIV16 = "{tt.divisibility = 16 : i32}"

pytestmark = pytest.mark.gpu


def arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def ttir(name: str) -> str:
    return (DATA / name).read_text()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def check_elementwise(binary, per_program: int, n: int, expect, **launch_kw):
    """Launch a (x, [y,] out, n) kernel over n ragged elements; out[n:] must stay untouched (the mask works)."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    inputs = [torch.randn(n, device="cuda", generator=gen) for _ in range(len(binary.params) - 2)]
    out = torch.full((n + 100,), float("nan"), device="cuda")
    load(binary).launch((cdiv(n, per_program), 1, 1), [*inputs, out, n], **launch_kw)
    torch.cuda.synchronize()
    torch.testing.assert_close(out[:n], expect(*inputs), rtol=0, atol=0)
    assert out[n:].isnan().all()


def test_vector_add_ragged():
    b = compile_ttir(ttir("vector_add.ttir"), arch())
    check_elementwise(b, 1024, 1_000_003, lambda x, y: x + y)


def test_vector_add_vectorized_with_divisible_n():
    text = ttir("vector_add.ttir").replace(f"{DIV16}, {{}}]", f"{DIV16}, {DIV16}]")
    b = compile_ttir(text, arch())
    assert "ld.global.v4" in b.stages["ptx"]
    check_elementwise(b, 1024, 16 * 62_501, lambda x, y: x + y)  # divisible by 16, not by 1024


def test_addresses_and_explicit_stream():
    b = compile_ttir(ttir("vector_add.ttir"), arch())
    n = 5000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    load(b).launch((cdiv(n, 1024), 1, 1), [x.data_ptr(), y.data_ptr(), out.data_ptr(), n],
                   stream=stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_block_pointer_kernel():
    b = compile_ttir(ttir("block_ptr_double.ttir"), arch())
    check_elementwise(b, 512, 300_007, lambda x: 2 * x)


@pytest.mark.parametrize("n", [
    100_004,
    # Seen on the H200 (triton 3.6.0, 2026-11-29): with n = 100_003 every out[:n] was right but out[n] was
    # written too (with 0): the TMA store seems to round the extent up to 16 bytes. Strict, to notice a fix.
    pytest.param(100_003, marks=pytest.mark.xfail(strict=True, reason="TMA store writes past n*4 bytes "
                                                                      "rounded up to 16")),
])
def test_tensor_descriptor_kernel_gets_global_scratch(n):
    b = compile_ttir(ttir("tma_double.ttir"), arch())
    if torch.cuda.get_device_capability()[0] >= 9:
        assert b.extra["scratch"][0]["size"] > 0  # device-side TMA descriptors live in global scratch
    check_elementwise(b, 256, n, lambda x: 2 * x)


def test_two_cta_clusters():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("clusters need sm_90")
    b = compile_ttir(ttir("vector_add.ttir"), arch(), num_ctas=2)
    check_elementwise(b, 1024, 200_003, lambda x, y: x + y)


def test_launch_argument_errors_name_the_kernel():
    k = load(compile_ttir(ttir("vector_add.ttir"), arch()))
    x = torch.zeros(16, device="cuda")
    with pytest.raises(TypeError, match="kernel add takes 4 arguments"):
        k.launch((1, 1, 1), [x, x, x])
    with pytest.raises(TypeError, match="kernel add: argument 1 must be a CUDA tensor"):
        k.launch((1, 1, 1), [x, torch.zeros(16), x, 16])
    with pytest.raises(OverflowError, match="kernel add: argument 3"):
        k.launch((1, 1, 1), [x, x, x, 1 << 40])
    with pytest.raises(RuntimeError, match="kernel add: cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"):
        k.launch((1, 1 << 20, 1), [x, x, x, 16])  # grid y above 65535


@pytest.mark.timing
def test_launch_overhead_close_to_raw_driver_call():
    """Host time per launch: tle's LoadedKernel.launch against a bare cuLaunchKernel with pre-packed arguments."""
    import triton
    import triton.language as tl
    from cuda.bindings import driver as cu

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) + tl.load(y + offs, mask=offs < n), mask=offs < n)

    x = torch.zeros(1024, device="cuda")
    k = load(compile_ttir(ttir("vector_add.ttir"), arch()))
    args = [x, x, x, 0]  # n = 0: the kernel does nothing, so the host side is what is timed
    k.launch((1, 1, 1), args)
    stream = torch.cuda.current_stream().cuda_stream
    f, argv = k._function, k._argv_address

    def raw():
        cu.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, stream, argv, 0)

    def tle():
        k.launch((1, 1, 1), args)

    def triton_jit():
        add[(1,)](x, x, x, 0, BLOCK=1024)

    def per_launch_us(fns, count=2000, rounds=7):
        """Best time per launch of each fn. The fns take turns within every round, so that a host whose speed
        drifts during the test (seen on the H200's: raw 4.8 us while tle's launch read 7.8, against 4.8 and 5.6
        in one bench.py run) slows all of them alike instead of whichever happened to run then."""
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(rounds):
            for name, fn in fns.items():
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(count):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - start) / count * 1e6)
                torch.cuda.synchronize()
        return best

    triton_jit()
    times = per_launch_us({"raw cuLaunchKernel": raw, "tle launch": tle, "triton jit": triton_jit})
    print("\nhost time per launch (us, best of 7 x 2000, taking turns):")
    for name, us in times.items():
        print(f"  {name:20s} {us:7.2f}  ({us / times['raw cuLaunchKernel']:.2f}x raw)")
    assert times["tle launch"] <= 1.5 * times["raw cuLaunchKernel"]
