"""runtime/fastlaunch.py without a GPU: the C launcher builds, keys arguments as the Python path does, packs each
parameter kind as launch.py's packer does, and runs its whole launch path on "test" plans that record what they
would pass to cuLaunchKernel. Kernels launched through it on CPU tensors still run on the interpreter with every
check of the Python path. (On a GPU: tests/runtime/test_fast_launch_gpu.py.)"""
import ctypes
import os
import struct
import subprocess
import sys

import pytest
import torch

import tle
from tle.runtime import fastlaunch, launch
from tle.runtime.kernel import LaunchError, _signature

K = fastlaunch.KINDS


def _buildable() -> bool:
    import sysconfig
    return fastlaunch._compiler() is not None and os.path.exists(
        os.path.join(sysconfig.get_paths()["include"], "Python.h"))


pytestmark = pytest.mark.skipif(not _buildable(), reason="no C compiler or no Python headers")


@pytest.fixture(scope="module")
def ext():
    module = fastlaunch.extension()
    assert module is not None, fastlaunch.UNAVAILABLE
    return module


def key(ext, *args, **kwargs):
    return ext.key(args, kwargs, True)


# ---- keys ---------------------------------------------------------------------------------------------------------
def test_key_is_what_decides_a_plan(ext):
    x, y = torch.zeros(64), torch.zeros(64)
    base = key(ext, x, y, 16, 2.0, True)
    assert base == key(ext, torch.ones(64), torch.empty(64), 32, -1.0, False)  # values do not matter
    for other in [
        key(ext, x, x, 16, 2.0, True),  # the same tensor twice (an in-place launch)
        key(ext, *(lambda z: (z[:64], z[16:]))(torch.zeros(80)), 16, 2.0, True),  # overlapping windows, aligned
        key(ext, x.double(), y, 16, 2.0, True),  # dtype
        key(ext, torch.zeros(65), y, 16, 2.0, True),  # shape
        key(ext, torch.zeros(64, 1), y, 16, 2.0, True),  # rank
        key(ext, torch.zeros(128)[::2], y, 16, 2.0, True),  # strides
        key(ext, torch.zeros(65)[1:], y, 16, 2.0, True),  # 16-byte alignment
        key(ext, x, y, 17, 2.0, True),  # divisibility by 16
        key(ext, x, y, 16, 2, True),  # int for float
        key(ext, x, y, True, 2.0, True),  # bool for int
        key(ext, x, y, 16, 2.0),  # count
        key(ext, x, y, 16, 2.0, True, BLOCK=64),  # keyword arguments
    ]:
        assert other is not None and other != base
    assert key(ext, torch.zeros(80)[16:], y, 16, 2.0, True) == base  # 64 bytes in: still aligned
    z = torch.zeros(128)
    assert key(ext, z[:64], z[64:], 16, 2.0, True) == base  # halves of one storage: adjacent, not overlapping


def test_keyword_arguments_by_type_and_value(ext):
    x = torch.zeros(8)
    k = key(ext, x, BLOCK=64, backend="triton")
    assert k == key(ext, torch.ones(8), BLOCK=64, backend="triton")
    assert k != key(ext, x, BLOCK=128, backend="triton")
    assert k != key(ext, x, backend="triton", BLOCK=64)  # order, as the Python key
    assert len({key(ext, x, BLOCK=v) for v in (1, True, 1.0)}) == 3  # 1 == True == 1.0 in Python; not here
    assert key(ext, x, T=torch.float16) != key(ext, x, T=torch.float32)


def test_what_the_key_does_not_describe_goes_to_python(ext):
    class Sub(torch.Tensor):
        pass
    x = torch.zeros(8)
    assert ext.key((x,), {}) is None  # a CPU tensor: the interpreter's business
    assert key(ext, x.as_subclass(Sub)) is None
    assert key(ext, [1, 2]) is None
    assert key(ext, None) is None
    assert key(ext, 1 << 70) is None
    assert key(ext, x, y=x) is None  # a tensor by name
    assert key(ext, x, BLOCK=[64]) is None
    assert key(ext, torch.nn.Parameter(x)) == key(ext, x)  # weights are Parameters


def test_descriptors_and_names_read_the_same_attributes(ext):
    """The extension calls torch.Tensor's descriptors directly; looked up by name, the keys are the same."""
    args = (torch.zeros(4, 6).t(), torch.nn.Parameter(torch.zeros(3)), 16, 1.5)
    with_descriptors = ext.key(args, {}, True)
    try:
        fastlaunch.configure(ext, torch, descriptors=False)
        assert ext.key(args, {}, True) == with_descriptors
    finally:
        fastlaunch.configure(ext, torch)
    try:
        ext.configure(torch.Tensor, None, torch.dtype)  # nn.Parameter not known: keyed by nothing
        assert ext.key(args, {}, True) is None and ext.key(args[:1], {}, True) == ext.key(args[:1], {}, True)
    finally:
        fastlaunch.configure(ext, torch)
    with pytest.raises(TypeError):
        ext.configure(torch.Tensor, None, torch.dtype, (1, 2, 3))


def _python_key(args):
    return _signature(args, {})


def test_keys_agree_with_the_python_signature(ext):
    """Two positional argument lists get one C key exactly when they get one Python key."""
    t = torch.zeros(4, 6)
    values = [t, t.t(), t[:, 1:], torch.zeros(4, 6, dtype=torch.float16), torch.zeros(3, 6), t[1:], torch.zeros(24),
              0, 1, 16, -16, 17, 1 << 40, True, False, 0.5, 16.0]
    cases = [(a, b) for a in values for b in values[::3]]
    for i, a in enumerate(cases):
        for b in cases[i:]:
            same_c = key(ext, *a) == key(ext, *b)
            same_py = _python_key(a) == _python_key(b)
            assert same_c == same_py, (a, b)


def test_overlapping_tensors_key_a_plan_of_their_own_in_python_too():
    """An in-place launch needs its own binary (tle/abi.py aliases): the Python signature tells it apart as the C key
    does, and from a launch of halves of one storage, which do not overlap."""
    x, y, z = torch.zeros(64), torch.zeros(64), torch.zeros(128)
    assert _python_key((x, x)) != _python_key((x, y)) == _python_key((z[:64], z[64:]))
    assert _python_key((z[:64], z[32:96])) != _python_key((x, y))
    assert _python_key((x, x)) == _python_key((y, y))


# ---- packing ------------------------------------------------------------------------------------------------------
def plan(ext, kinds, sources, fixed=None, nargs=None, **kw):
    fixed = fixed or [0] * len(kinds)
    nargs = nargs if nargs is not None else sum(s >= 0 for s in sources)
    return ext.Plan(kw.pop("function", 0), kw.pop("context", 7), kw.pop("block", (128, 1, 1)), kw.pop("shared", 0),
                    0, nargs, [K[k] for k in kinds], sources, fixed, kw.pop("stream", lambda d: 0),
                    kw.pop("on_error", lambda e: None), None, kw.pop("test", True), **kw)


def words(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 8}Q", data))


def ctypes_words(kinds, values) -> list[int]:
    """What launch.py's packer writes into its slots, as 8-byte words."""
    slots = [launch._SLOT_TYPES[k]() for k in kinds]
    launch._packer("k", kinds, slots)(values)
    out = []
    for s in slots:
        raw = bytes(s) + bytes(8 - ctypes.sizeof(s))
        out.append(struct.unpack("<Q", raw)[0])
    return out


def test_packing_matches_the_python_packer(ext):
    x = torch.zeros(16)
    kinds = ["ptr", "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "f32", "f64", "bf16"]
    values = [x, True, -128, 32767, -5, -(1 << 63), 1.5, 3.14159, 2.5, 0.1, 7, 1 << 40, float("nan")]
    p = plan(ext, kinds, list(range(len(kinds))))
    got = words(ext.pack(p, tuple(values), True))
    want = ctypes_words(kinds, [x.data_ptr()] + values[1:])
    assert got == want


def test_fixed_values_fill_the_other_slots(ext):
    x = torch.zeros(16)
    p = plan(ext, ["ptr", "i32", "i32", "i32", "ptr"], [0, -1, 1, -1, -1], [0, 16, 0, -3, 0], nargs=2)
    assert words(ext.pack(p, (x, 9), True)) == [x.data_ptr(), 16, 9, (-3) & (2 ** 64 - 1), 0]  # fixed words as given


@pytest.mark.parametrize("kind, value", [
    ("i32", 1 << 31), ("i32", -(1 << 31) - 1), ("i8", 128), ("i32", 2.0), ("i32", True), ("i1", 1),
    ("f32", True), ("f16", 1e6), ("bf16", 1e300), ("ptr", 0), ("ptr", None),
])
def test_values_the_python_path_must_convert_or_reject(ext, kind, value):
    """The C path packs only what it converts exactly as the Python path would; the rest goes back to Python."""
    p = plan(ext, [kind], [0])
    assert ext.pack(p, (value,), True) is None


def test_pack_checks_the_argument_count(ext):
    p = plan(ext, ["i32"], [0])
    assert ext.pack(p, (1, 2), True) is None
    with pytest.raises(ValueError):
        plan(ext, ["i32"], [3], nargs=1)  # a source past the arguments


# ---- the launch path, on test plans -------------------------------------------------------------------------------
class Fallback:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, key, args, kwargs):
        self.calls.append((grid, key, args, kwargs))


@pytest.fixture
def recorder(ext):
    ext.set_test(7, 0)
    yield ext
    ext.set_test(0, 0)


def test_a_registered_plan_launches_in_c(recorder):
    ext = recorder
    x, y = torch.zeros(64), torch.zeros(64)
    plans, fallback = {}, Fallback()
    launcher = ext.Launcher((3, 2), plans, fallback, True)
    launcher(x, y, 5)
    assert len(fallback.calls) == 1
    grid, k, args, kwargs = fallback.calls[0]
    assert grid == (3, 2) and k == key(ext, x, y, 5) and args == (x, y, 5) and kwargs == {}
    plans[k] = plan(ext, ["ptr", "ptr", "i32", "i32"], [0, 1, 2, -1], [0, 0, 0, 64], block=(256, 1, 1),
                    shared=1024, stream=lambda d: 0xABC)
    before = ext.recorded()["calls"]
    launcher(y, x, 21)  # another launch of the same key: new values, no Python
    assert len(fallback.calls) == 1
    rec = ext.recorded()
    assert rec["calls"] == before + 1
    assert rec["grid"] == (3, 2, 1) and rec["block"] == (256, 1, 1) and rec["shared"] == 1024
    assert rec["stream"] == 0xABC
    assert words(rec["params"]) == [y.data_ptr(), x.data_ptr(), 21, 64]
    launcher(x, y, 32)  # divisible by 16: another key
    assert len(fallback.calls) == 2


def test_a_plan_with_its_own_grid_launches_that_grid(recorder):
    """A persistent kernel's plan (runtime/launch.py fast_plan) fixes one wave as its grid and the launcher's grid
    as its last three parameters; an empty launcher grid still launches nothing."""
    ext = recorder
    x = torch.zeros(64)
    plans, fallback = {}, Fallback()
    launcher = ext.Launcher((64, 32, 2), plans, fallback, True)
    plans[key(ext, x)] = plan(ext, ["ptr", "i32", "i32", "i32"], [0, -1, -1, -1], [0, 64, 32, 2], nargs=1,
                              grid=(132, 1, 1))
    before = ext.recorded()["calls"]
    launcher(x)
    rec = ext.recorded()
    assert not fallback.calls and rec["calls"] == before + 1
    assert rec["grid"] == (132, 1, 1) and words(rec["params"]) == [x.data_ptr(), 64, 32, 2]
    empty = ext.Launcher((0, 32, 2), {key(ext, x): plans[key(ext, x)]}, fallback, True)
    empty(x)
    assert ext.recorded()["calls"] == before + 1


def test_what_goes_back_to_python(recorder):
    ext = recorder
    x = torch.zeros(64)
    plans, fallback = {}, Fallback()
    launcher = ext.Launcher((1,), plans, fallback, True)
    plans[key(ext, x, 3)] = p = plan(ext, ["ptr", "i8"], [0, 1])
    plans[key(ext, x, 400)] = plan(ext, ["ptr", "i8"], [0, 1])
    launcher(x, 3)
    assert not fallback.calls
    launcher(x, 400)  # does not fit i8: Python converts or raises
    assert fallback.calls[-1][1] is None
    launcher(x, 3, BLOCK=4)  # another key
    assert fallback.calls[-1][1] is not None and fallback.calls[-1][3] == {"BLOCK": 4}
    ext.set_test(8, 0)  # another CUDA context is current
    launcher(x, 3)
    assert len(fallback.calls) == 3 and fallback.calls[-1][1] is None
    ext.set_test(7, 0)
    p.disable()  # its module was unloaded
    launcher(x, 3)
    assert len(fallback.calls) == 4
    for grid in ([1], lambda meta: (1,), (1.0,), (-1,), (1, 1, 1, 1), (1 << 31,), ()):
        other = ext.Launcher(grid, plans, fallback, True)
        assert not other.fast_grid
        other(x, 3)
        assert fallback.calls[-1][0] is grid and fallback.calls[-1][1] is None


def test_an_empty_grid_launches_nothing(recorder):
    ext = recorder
    x = torch.zeros(64)
    plans, fallback = {}, Fallback()
    plans[key(ext, x)] = plan(ext, ["ptr"], [0])
    before = ext.recorded()["calls"]
    ext.Launcher((0, 4), plans, fallback, True)(x)
    assert ext.recorded()["calls"] == before and not fallback.calls


def test_a_failed_launch_raises_what_on_error_raises(recorder):
    ext = recorder
    x = torch.zeros(64)

    def on_error(err):
        raise RuntimeError(f"kernel k: cuLaunchKernel failed: {err}")
    plans = {key(ext, x): plan(ext, ["ptr"], [0], on_error=on_error)}
    ext.set_test(7, 701)
    with pytest.raises(RuntimeError, match="kernel k: cuLaunchKernel failed: 701"):
        ext.Launcher((1,), plans, Fallback(), True)(x)


def test_errors_from_python_propagate(recorder):
    ext = recorder

    def fallback(grid, key, args, kwargs):
        raise LaunchError("nope")
    with pytest.raises(LaunchError, match="nope"):
        ext.Launcher((1,), {}, fallback, True)(torch.zeros(2))
    x = torch.zeros(64)

    def stream(device):
        raise ValueError("no stream")
    with pytest.raises(ValueError, match="no stream"):
        ext.Launcher((1,), {key(ext, x): plan(ext, ["ptr"], [0], stream=stream)}, Fallback(), True)(x)


# ---- LoadedKernel.fast_plan, without a driver ---------------------------------------------------------------------
def fake_loaded(params, scratch=0, config=None, num_ctas=1, wave=None):
    k = object.__new__(launch.LoadedKernel)
    k._wave = wave  # a persistent kernel: programs in one wave
    k.name, k.params, k.device = "k", list(params), 0
    k._num_explicit = len(params)
    k._slots = [launch._SLOT_TYPES[p]() for p in params] + [ctypes.c_uint64() for _ in range(scratch)]
    k._scratch, k._config, k._num_ctas = [], config, num_ctas
    k._function, k._context, k._block, k._shared = 0x1234, 7, (128, 1, 1), 0
    import weakref
    k._fast_plans = weakref.WeakSet()
    return k


def test_fast_plan_of_a_loaded_kernel(ext, monkeypatch, recorder):
    monkeypatch.setattr(ext, "load_driver", lambda: None)
    k = fake_loaded(["ptr", "i32", "i32", "ptr", "f32"], scratch=2)
    p = k.fast_plan([("arg", 0), ("fixed", 100), ("fixed", 5), ("arg", 1), ("arg", 2)], 3)
    x, y = torch.zeros(4), torch.zeros(4)
    assert words(ext.pack(p, (x, y, 2.0), True)) == [x.data_ptr(), 100, 5, y.data_ptr(), 0x40000000, 0, 0]
    assert set(k._fast_plans) == {p}
    assert fake_loaded(["ptr"], config=object()).fast_plan([("arg", 0)], 1) is None  # cuLaunchKernelEx
    assert fake_loaded(["ptr"], num_ctas=2).fast_plan([("arg", 0)], 1) is None
    assert fake_loaded(["f32"]).fast_plan([("fixed", 1.5)], 0) is None
    assert fake_loaded(["ptr", "i32"]).fast_plan([("arg", 0)], 1) is None  # not one source per parameter


def test_fast_plan_of_a_persistent_kernel(ext, monkeypatch):
    """A persistent kernel's C plan is made for one grid, which it passes behind the caller's arguments; without
    the grid (a callable one) there is no plan, and the launch stays on the Python path."""
    monkeypatch.setattr(ext, "load_driver", lambda: None)
    k = fake_loaded(["ptr", "i32", "i32", "i32", "i32"], wave=264)
    x = torch.zeros(4)
    p = k.fast_plan([("arg", 0), ("fixed", 100)], 1, (300, 7, 1))
    assert words(ext.pack(p, (x,), True)) == [x.data_ptr(), 100, 300, 7, 1]
    assert k.fast_plan([("arg", 0), ("fixed", 100)], 1) is None


# ---- kernels ------------------------------------------------------------------------------------------------------
SCALE = """
kernel scale<BLOCK: int = 32>(x: tensor<f32>[N], y: tensor<f32>[N], a: f32, n: i32) {
    let i = program_id(0)
    store(y, load(x, tile=[BLOCK], at=[i]) * a + cast<f32>(n), at=[i])
}
"""


def test_kernels_on_cpu_tensors_through_the_c_launcher(ext):
    k = tle.compile(SCALE).scale
    k._launchers.clear()
    launcher = k[(2,)]
    assert isinstance(launcher, ext.Launcher) and k[(2,)] is launcher
    x, y = torch.arange(50, dtype=torch.float32), torch.zeros(50)
    launcher(x, y, 2.0, 3)
    torch.testing.assert_close(y, x * 2 + 3)
    assert not any(k._fast.values())  # the interpreter has no C plan


def test_launch_errors_are_the_python_paths(ext):
    k = tle.compile(SCALE).scale
    k._launchers.clear()
    x = torch.zeros(8)
    cases = [(x,), (x, x, 1.0, 1, 5), (x, x.double(), 1.0, 1), (x, x, 1.0, 1 << 40), (x, x, "a", 1),
             (x, torch.zeros(9), 1.0, 1), (x, x, 1.0, 1.5)]
    for args in cases:
        with pytest.raises(LaunchError) as c_error:
            k[(1,)](*args)
        with pytest.raises(LaunchError) as py_error:
            k.launch((1,), *args)
        assert str(c_error.value) == str(py_error.value)
    with pytest.raises(LaunchError, match="grid must be 1 to 3 non-negative ints"):
        k[(1, 2, 3, 4)](x, x, 1.0, 1)


def test_a_grid_of_a_fractional_float_is_refused_not_rounded_down():
    """`k[(N / BLOCK,)]` with N = 100, BLOCK = 32 would launch 3 programs for 4 tiles (int() rounds down) and leave
    the last 4 elements unwritten; a whole float (3.0), numpy's ints and 0-d tensors are sizes like an int."""
    import numpy as np
    k = tle.compile(SCALE).scale
    x, y = torch.randn(100), torch.full((100,), float("nan"))
    with pytest.raises(LaunchError, match=r"a grid of 3\.125 programs: .* round up with triton\.cdiv"):
        k[(100 / 32,)](x, y, 2.0, 1)
    assert torch.isnan(y).all()  # nothing ran
    # a bare count is its 1-tuple: 4.0 and np.int64(4) were refused bare and taken as (4.0,) and (np.int64(4),)
    for grid in [(4.0,), (np.int64(4),), (torch.tensor(4),), 4, [4], 4.0, np.int64(4), torch.tensor(4)]:
        y.fill_(float("nan"))
        k[grid](x, y, 2.0, 1)
        assert torch.equal(y, x * 2.0 + 1.0), grid
    with pytest.raises(LaunchError, match="grid must be 1 to 3 non-negative ints"):
        k[("4",)](x, y, 2.0, 1)
    for grid, message in [(True, "an int, not a bool"), ((4, False), "an int, not a bool"),
                          (float("nan"), "a whole number"), ((float("inf"),), "a whole number")]:
        with pytest.raises(LaunchError, match=message):  # int(True) launched one program
            k[grid](x, y, 2.0, 1)


def test_calling_a_kernel_without_a_grid_says_how_to_launch_it():
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=r"scale\(\) is launched with a grid: scale\[grid\]\(\.\.\.\)"):
        k(torch.randn(8), torch.randn(8), 1.0, 1)


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_without_a_compiler_launches_stay_on_the_python_path(tmp_path):
    code = ("import torch, tle; from tle.runtime import fastlaunch\n"
            "assert fastlaunch.extension() is None\n"
            "k = tle.compile('examples/vector_add.tle').vector_add\n"
            "x = torch.ones(10); o = torch.empty(10); k[(1,)](x, x, o, BLOCK=16); assert (o == 2).all()\n"
            "print('reason:', fastlaunch.UNAVAILABLE)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "CC": str(tmp_path / "no-such-cc"), "TLE_DEBUG": "1",
                               "TLE_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "the C launcher is unavailable" in done.stderr and "launches take the Python path" in done.stderr
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "TLE_FAST_LAUNCH": "0", "TLE_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "reason: TLE_FAST_LAUNCH=0" in done.stdout


def test_the_build_is_cached_by_source_python_and_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("TLE_CACHE_DIR", str(tmp_path))
    cc = fastlaunch._compiler()
    path = fastlaunch.library_path(cc)
    assert path.startswith(str(tmp_path)) and path != fastlaunch.library_path(cc + ["-O1"])
    fastlaunch._build(cc, __import__("sysconfig").get_paths()["include"], path)
    module = fastlaunch._load(path)
    assert module.MAX_SLOTS == fastlaunch.MAX_SLOTS
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]  # no temporary files left
