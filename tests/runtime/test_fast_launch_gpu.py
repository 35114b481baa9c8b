"""The C launcher (runtime/fastlaunch.py) on the GPU, on both paths: a repeated launch stays in C and passes this
launch's values; what decides a plan re-plans; errors are the Python path's; launches go to torch's current
stream and to the tensors' device. Skipped without a GPU (the CPU half: tests/runtime/test_fast_launch.py)."""
import pytest
import torch

import tle
from tle.runtime import fastlaunch
from tle.runtime.kernel import LaunchError

pytestmark = pytest.mark.gpu

SCALE = """
kernel scale<BLOCK: int = 256>(x: tensor<f32>[N], y: tensor<f32>[N], a: f32, n: i32) {
    let i = program_id(0)
    store(y, load(x, tile=[BLOCK], at=[i]) * a + cast<f32>(n), at=[i])
}
"""


@pytest.fixture(params=["triton", "tileir"])
def kernel(request):
    if fastlaunch.extension() is None:
        pytest.skip(f"no C launcher: {fastlaunch.UNAVAILABLE}")
    k = tle.compile(SCALE, backend=request.param).scale
    k.slow_calls = []
    original = k._launch_from_c

    def counted(grid, key, args, kwargs):
        k.slow_calls.append(key)
        return original(grid, key, args, kwargs)
    k._launch_from_c = counted  # before the first kernel[grid]: launchers hold this
    k.backend_name = request.param
    return k


def c_plans(k) -> int:
    """The C plans the kernel holds, over every grid's table."""
    return sum(len(table) for table in k._fast.values())


def grid(n, block=256):
    return (-(-n // block),)


def test_repeated_launches_stay_in_c_and_pass_their_values(kernel):
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    kernel[grid(1000)](x, y, 2.0, 3)
    torch.testing.assert_close(y, x * 2 + 3)
    assert kernel.last_backend == kernel.backend_name
    assert len(kernel.slow_calls) == 1 and c_plans(kernel) == 1
    for a, n in [(-1.5, 7), (0.25, 5), (3, 1)]:  # new scalar values, the same plan
        x2, y2 = torch.randn(1000, device="cuda"), torch.empty(1000, device="cuda")
        kernel[grid(1000)](x2, y2, a, n)
        torch.testing.assert_close(y2, x2 * a + n)
    assert len(kernel.slow_calls) == 2  # a=3: an int where a float was: another key, then C again
    kernel[grid(1000)](x, y, 4, 9)
    assert len(kernel.slow_calls) == 2
    torch.testing.assert_close(y, x * 4 + 9)


def test_what_decides_a_plan_replans(kernel):
    base = torch.randn(4096, device="cuda")
    cases = [base[:1000], base[:1003], base[1:1001], base[::2][:1000], base[:1000].clone()]
    for n in (3, 16):  # divisibility by 16 of an int argument
        for x in cases:
            y = torch.full((x.numel(),), float("nan"), device="cuda")
            for _ in range(2):
                kernel[grid(x.numel())](x, y, 2.0, n)
                torch.testing.assert_close(y, x * 2 + n)
    # 5 cases x 2 values of n, less the clone (the key of base[:1000]): 8 plans, each made on its first launch
    assert c_plans(kernel) == 8 and len(kernel.slow_calls) == 8 and len(kernel._plans) == 8


def test_constants_options_and_parameters(kernel):
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        kernel[grid(1000, 64)](x, y, 2.0, 3, BLOCK=64, backend=kernel.backend_name)
        torch.testing.assert_close(y, x * 2 + 3)
    assert len(kernel.slow_calls) == 1
    w = torch.nn.Parameter(torch.randn(1000, device="cuda"))
    for _ in range(2):
        kernel[grid(1000)](w, y, 2.0, 3)
        torch.testing.assert_close(y, w.detach() * 2 + 3)
    assert len(kernel.slow_calls) == 2
    for _ in range(2):  # parameters by name: the Python path, every time
        kernel[grid(1000)](x, y=y, a=-1.0, n=2)
        torch.testing.assert_close(y, -x + 2)
    assert len(kernel.slow_calls) == 4


def test_errors_are_the_python_paths(kernel):
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    kernel[grid(1000)](x, y, 2.0, 3)
    kernel[grid(1000)](x, y, 2.0, 16)
    bad = [(x, y.double(), 2.0, 3), (x, y, 2.0), (x, y[:999], 2.0, 3), (x, y.cpu(), 2.0, 3), (x, y, "a", 3),
           (x, y, 2.0, 1 << 40), (x, y, 2.0, 1.5)]
    for args in bad:
        with pytest.raises(Exception) as c_error:
            kernel[grid(1000)](*args)
        with pytest.raises(Exception) as py_error:
            kernel.launch(grid(1000), *args)
        assert type(c_error.value) is type(py_error.value) and str(c_error.value) == str(py_error.value), args
    with pytest.raises(LaunchError, match="is a tensor<f32>"):
        kernel[grid(1000)](x, y.double(), 2.0, 3)


def test_launches_go_to_the_current_stream(kernel):
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    kernel[grid(1000)](x, y, 2.0, 3)
    kernel[grid(1000)](x, y, 2.0, 3)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # a launch on any stream but the capturing one would break the capture
        kernel[grid(1000)](x, y, 4.0, 1)
    assert len(kernel.slow_calls) == 1  # captured from C
    y.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 4 + 1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel[grid(1000)](x, y, -1.0, 0)
    side.synchronize()
    torch.testing.assert_close(y, -x)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_another_device_launch_there(kernel):
    x = torch.randn(1000, device="cuda:1")
    y = torch.empty_like(x)
    assert torch.cuda.current_device() == 0
    for a in (2.0, 3.0):
        kernel[grid(1000)](x, y, a, 3)  # device 0 is current: the Python path switches to device 1
        torch.testing.assert_close(y, x * a + 3)
    with torch.cuda.device(1):
        calls = len(kernel.slow_calls)
        kernel[grid(1000)](x, y, 5.0, 3)
        assert len(kernel.slow_calls) == calls  # device 1 current: C
        torch.testing.assert_close(y, x * 5 + 3)


IN_PLACE = """
kernel inplace<BLOCK: int = 128>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = load(x, tile=[BLOCK], at=[program_id(0)])
    store(y, t * 2.0, at=[program_id(0)])
    let u = load(x, tile=[BLOCK], at=[program_id(0)])
    store(y, u + 1.0, at=[program_id(0)])
}
"""


@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_an_in_place_launch_reads_its_own_stores_on_both_paths(backend):
    """k(x, x): the reload of x sees the store to y, on the interpreter and both GPU paths (Tile IR gets a binary
    whose x and y share a token chain: tle/abi.py aliases). Separate tensors first, so that the in-place launch
    must not reuse their plan, from C or from Python."""
    k = tle.compile(IN_PLACE, backend=backend).inplace
    x, y = torch.randn(4096, device="cuda"), torch.empty(4096, device="cuda")
    for _ in range(2):
        k[(32,)](x, y)
        torch.testing.assert_close(y, x + 1)  # separate tensors: the second load reads x as it was
    for launch in (lambda a: k[(32,)](a, a), lambda a: k.launch((32,), a, a)):
        for _ in range(2):
            a = torch.randn(4096, device="cuda")
            want = a * 2 + 1
            launch(a)
            torch.testing.assert_close(a, want)


@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_an_in_place_launch_gets_its_own_c_plan(backend):
    """Overlapping tensors are part of the C key (an overlap word per pair), so k(a, a) after k(x, y) takes the
    Python path once, to plan, and C from then on, as separate tensors do."""
    if fastlaunch.extension() is None:
        pytest.skip(f"no C launcher: {fastlaunch.UNAVAILABLE}")
    k = tle.compile(IN_PLACE, backend=backend).inplace
    k.slow_calls = []
    original = k._launch_from_c

    def counted(grid, key, args, kwargs):
        k.slow_calls.append(key)
        return original(grid, key, args, kwargs)
    k._launch_from_c = counted
    x, y = torch.randn(4096, device="cuda"), torch.empty(4096, device="cuda")
    a = torch.randn(4096, device="cuda")
    want = a
    for _ in range(3):
        k[(32,)](x, y)
        want = want * 2 + 1
        k[(32,)](a, a)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + 1)
    torch.testing.assert_close(a, want)
    assert len(k.slow_calls) == 2 and c_plans(k) == 2
