"""What a launch says about arguments that do not fit the kernel's parameters (LaunchError, before any compile)."""
from __future__ import annotations

import pytest
import torch

import tle
from tle.runtime.kernel import LaunchError

SCALE = """kernel scale<T: dtype = f32>(x: tensor<T>[N], gamma: tensor<T>[N], n: i32) {
    store(x, load(x, tile=[16]) * load(gamma, tile=[16]))
}
"""


def test_a_tensor_of_another_type_than_a_dtype_constant_names_where_the_type_came_from():
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=r"parameter 'gamma' is a tensor<bf16>\[N\] \(T = bf16, as 'x' is\); got a "
                                          r"tensor of torch.float32 \(convert it with .to\(torch.bfloat16\)\)"):
        k[(1,)](torch.randn(16).bfloat16(), torch.randn(16), 16, backend="interp")
    with pytest.raises(LaunchError, match=r"parameter 'x' is a tensor<f32>\[N\]; got a tensor of torch.bfloat16"):
        k[(1,)](torch.randn(16).bfloat16(), torch.randn(16), 16, T=torch.float32, backend="interp")


def test_a_scalar_of_the_wrong_kind_is_named_with_its_article():
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=r"parameter 'n' is an i32 scalar; got 1.5"):
        k[(1,)](torch.randn(16), torch.randn(16), 1.5, backend="interp")


SCALARS = """kernel k<B: int = 16>(p: tensor<f32>[N], lr: f32, step: i32, first: bool) {
    let t = load(p, tile=B, at=program_id(0))
    store(p, where(first, t * lr + cast<f32>(step), t), at=program_id(0))
}
"""


def test_a_scalar_parameter_is_named_as_read_and_a_zero_dim_tensor_is_told_how_to_pass():
    k = tle.compile(SCALARS).k
    p = torch.ones(16)
    with pytest.raises(LaunchError, match=r"parameter 'lr' is an f32 scalar; got tensor\(0.5000\), a 0-dim tensor: "
                                          r"pass lr.item\(\), or, .* declare lr: tensor<f32>\[1\] and read it with "
                                          r"load\(lr, at=0\)"):
        k[(1,)](p, torch.tensor(0.5), 1, True)
    with pytest.raises(LaunchError, match=r"parameter 'first' is a bool scalar; got 1$"):
        k[(1,)](p, 0.5, 1, 1)


@pytest.mark.parametrize("lr,step,first", [(0.5, 3, True), (0.25, 32, False)])
def test_numpy_scalars_pass_as_the_numbers_they_hold(lr, step, first):
    """np.float32, np.int64 and np.bool_ (what numpy arithmetic on the host gives) were refused; each plan passes
    them on as Python numbers, and an int's divisibility by 16 still keys the plan."""
    import numpy as np
    k = tle.compile(SCALARS).k
    p, q = torch.ones(16), torch.ones(16)
    k[(1,)](p, np.float32(lr), np.int64(step), np.bool_(first))
    k[(1,)](q, lr, step, first)
    assert torch.equal(p, q) and torch.equal(p, torch.full((16,), lr + step if first else 1.0))
    from tle.runtime.kernel import _signature
    assert _signature((np.int64(32),), {}) != _signature((np.int64(3),), {})  # an int divisible by 16 is a fact


def test_a_bool_tensor_is_refused_with_the_view_that_passes_it():
    src = """kernel mf(x: tensor<f32>[M, N], mask: tensor<i8>[M, N], out: tensor<f32>[M, N]) {
        let r = program_id(0)
        let t = load(x, tile=[1, 8], at=[r, 0])
        store(out, where(cast<i32>(load(mask, tile=[1, 8], at=[r, 0])) != 0, 0.0, t), at=[r, 0])
    }"""
    k = tle.compile(src.replace("tensor<i8>", "tensor<bool>")).mf
    x, keep = torch.randn(4, 8), torch.rand(4, 16) < 0.5
    with pytest.raises(LaunchError, match=r"declare tensor<i8> and pass mask.view\(torch.int8\) \(the same bytes"):
        k[(4,)](x, keep[:, ::2], torch.empty(4, 8))
    with pytest.raises(LaunchError, match=r"got a tensor of torch.bool \(pass mask.view\(torch.int8\): the same"):
        tle.compile(src).mf[(4,)](x, keep[:, ::2], torch.empty(4, 8))
    out = torch.empty(4, 8)
    tle.compile(src).mf[(4,)](x, keep[:, ::2].view(torch.int8), out)  # a strided view of the bools, no copy
    assert torch.equal(out, x.masked_fill(keep[:, ::2], 0.0))


def test_a_complex_tensor_is_told_view_as_real_not_a_cast_that_drops_its_imaginary_part():
    src = """kernel conj(z: tensor<f32>[N, 2]) {
        let re, im = split(load(z, tile=[8, 2], at=[program_id(0), 0]))
        store(z, join(re, -im), at=[program_id(0), 0])
    }"""
    k = tle.compile(src).conj
    z = torch.randn(8, dtype=torch.complex64)
    with pytest.raises(LaunchError, match=r"got a tensor of torch.complex64 \(pass torch.view_as_real\(z\) as a "
                                          r"tensor of \[\.\.\., 2\]"):
        k[(1,)](z)
    want = z.conj().resolve_conj()  # (conj() alone is a view of z)
    k[(1,)](torch.view_as_real(z))  # the same storage: z itself changes
    assert torch.equal(z, want)


def test_an_unsigned_tensor_is_refused_with_the_signed_view_that_passes_it():
    src = """kernel k(x: tensor<i8>[N], y: tensor<i32>[N]) {
        store(y, cast<i32>(load(x, tile=[64], at=program_id(0))) & 0xFF, at=program_id(0))
    }"""
    k = tle.compile(src).k
    x, y = torch.randint(0, 256, (64,), dtype=torch.uint8), torch.zeros(64, dtype=torch.int32)
    with pytest.raises(LaunchError, match=r"got a tensor of torch.uint8 \(pass x.view\(torch.int8\): the same bytes, "
                                          r"no copy; read them as unsigned with cast<i32>\(x\) & 0xFF\)"):
        k[(1,)](x, y)
    k[(1,)](x.view(torch.int8), y)
    assert torch.equal(y, x.int())


def test_a_zero_dim_tensor_passes_as_a_one_element_tensor():
    src = """kernel dyt(x: tensor<f32>[M, N], alpha: tensor<f32>[1], y: tensor<f32>[M, N]) {
        let a = load(alpha, at=0)
        store(y, tanh(load(x, tile=[1, 8], at=[program_id(0), 0]) * a), at=[program_id(0), 0])
    }"""
    k = tle.compile(src).dyt
    x = torch.randn(3, 8)
    y = torch.empty_like(x)
    k[(3,)](x, torch.tensor(0.5), y, backend="interp")
    assert torch.allclose(y, torch.tanh(x * 0.5))
    with pytest.raises(LaunchError, match=r"parameter 'x' is a tensor<f32>\[M, N\] \(2 dims\); got a tensor of "
                                          r"shape \(\)"):
        k[(3,)](torch.tensor(1.0), torch.tensor(0.5), y, backend="interp")


OPTIONAL = """kernel scale_rows<HAS_LABEL: bool = false>(x: tensor<f32>[M, N], label: tensor<i64>[M]) {
    let row = program_id(0)
    if HAS_LABEL {
        if load(label, at=row) == -100 { return }
    }
    store(x, load(x, tile=[1, 16], at=[row, 0]) * 2.0, at=[row, 0])
}
"""


def test_a_tensor_the_constants_leave_unread_may_be_none():
    k = tle.compile(OPTIONAL).scale_rows
    x = torch.randn(4, 16)
    want = x * 2
    k[(4,)](x, None, backend="interp")
    assert torch.equal(x, want)
    for backend in ("triton", "tileir"):  # compiled for a null pointer there, on both paths
        assert "EXIT" in k.ir((4,), x, None, stage="sass", backend=backend)
    with pytest.raises(LaunchError, match=r"parameter 'label' is None, but the kernel reads or writes it with these "
                                          r"constants; pass a tensor<i64>\[M\]"):
        k[(4,)](x, None, HAS_LABEL=True, backend="interp")
    x, labels = torch.randn(4, 16), torch.tensor([1, -100, 2, 3])
    want = torch.where((labels == -100)[:, None], x, x * 2)
    k[(4,)](x, labels, HAS_LABEL=True, backend="interp")
    assert torch.equal(x, want)


def test_a_dim_only_a_none_tensor_gives_is_refused_where_the_kernel_reads_it():
    src = """kernel k(x: tensor<f32>[N], extra: tensor<f32>[L]) {
        store(x, load(x, tile=[16]) * cast<f32>(L))
    }"""
    with pytest.raises(LaunchError, match=r"dim 'L' comes only from 'extra', which is None, and the kernel reads its "
                                          r"value; pass a tensor<f32>\[L\]"):
        tle.compile(src).k[(1,)](torch.randn(16), None, backend="interp")


@pytest.mark.parametrize("option,value,message", [
    ("num_warps", 3, "num_warps must be a power of two from 1 to 32, got 3"),
    ("num_warps", 64, "num_warps must be a power of two from 1 to 32, got 64"),
    ("num_stages", 0, "num_stages must be an int from 1 to 8, got 0"),
    ("num_stages", 2.0, "num_stages must be an int from 1 to 8, got 2.0"),
])
def test_launch_options_are_checked_on_the_interpreter_too(option, value, message):
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=message):
        k[(1,)](torch.randn(16), torch.randn(16), 16, backend="interp", **{option: value})


def _frames(e: BaseException) -> list[str]:
    tb, files = e.__traceback__, []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def test_a_kernel_authors_error_comes_without_tles_own_frames(monkeypatch):
    # the message says where in the kernel; twenty checker frames above it would only bury it
    from tle.diagnostics import TleError
    src = """kernel k<BC: int = 8>(bias: tensor<f32>[C], y: tensor<f32>[C]) {
        store(y, load(bias, tile=[1, BC], at=[0, 0]), at=0)
    }"""
    monkeypatch.delenv("TLE_DEBUG", raising=False)
    with pytest.raises(TleError, match="tile= has 2 entries but 'bias' has 1 dim") as e:
        tle.compile(src)  # checked under its defaults when it compiles
    assert not any("check.py" in f for f in _frames(e.value))
    k = tle.compile(src.replace("BC: int = 8", "BC: int"), filename="k.tle").k  # no default: checked at launch
    for launch in (lambda: k[(1,)](torch.zeros(8), torch.zeros(8), BC=8),
                   lambda: k.launch((1,), torch.zeros(8), torch.zeros(8), BC=8),
                   lambda: k.ir((1,), torch.zeros(8), torch.zeros(8), BC=8)):
        with pytest.raises(TleError, match="tile= has 2 entries") as e:
            launch()
        assert not any("check.py" in f or "compiler.py" in f for f in _frames(e.value))
    monkeypatch.setenv("TLE_DEBUG", "4")  # for a report of a compiler bug: every frame
    with pytest.raises(TleError) as e:
        tle.compile(src)
    assert any("check.py" in f for f in _frames(e.value))


def test_a_grid_function_reading_a_name_meta_lacks_says_what_meta_holds():
    k = tle.compile("""kernel k<BLOCK: int = 16>(x: tensor<f32>[N]) {
        store(x, load(x, tile=[BLOCK], at=program_id(0)) * 2.0, at=program_id(0))
    }""").k
    with pytest.raises(LaunchError, match=r"the grid function read meta\['n'\], which this launch does not have; "
                                          r"meta holds the constants and dims: BLOCK, N"):
        k[lambda meta: (meta["n"],)](torch.zeros(64))
    x = torch.ones(64)
    k[lambda meta: (triton_cdiv(meta["N"], meta["BLOCK"]),)](x)
    assert x.tolist() == [2.0] * 64


def triton_cdiv(a, b):
    return -(-a // b)


VADD = """kernel vadd<BLOCK: int = 64>(x: tensor<f32>[N], y: tensor<f32>[N], out: tensor<f32>[N]) {
    let i = program_id(0)
    store(out, load(x, tile=[BLOCK], at=[i]) + load(y, tile=[BLOCK], at=[i]), at=[i])
}
kernel fill(y: tensor<i32>[N], v: i32) {
    store(y, full<i32>[16](v))
}
"""


@pytest.mark.parametrize("grid", [(1.5, 1, 1), (2, -1, 1), ("2", 1, 1)])
def test_a_grid_of_three_sizes_is_checked_like_any_other(grid):
    """A 3-tuple took a fast path that passed 1.5 on (one program: 64 of 100 elements written)."""
    k = tle.compile(VADD).vadd
    with pytest.raises(LaunchError, match="grid"):
        k[grid](torch.randn(100), torch.randn(100), torch.zeros(100))


def test_a_scalar_that_a_cached_plan_cannot_pass_is_a_launch_error_naming_it():
    """The plan of fill(y, 5) is keyed by the scalar's type, not its value: the next launch's value is checked as a
    first launch's would be."""
    k = tle.compile(VADD).fill
    y = torch.zeros(16, dtype=torch.int32)
    k[(1,)](y, 5)
    with pytest.raises(LaunchError, match=r"fill: scalar 'v' = 1099511627776 does not fit i32"):
        k[(1,)](y, 2 ** 40)
    import numpy as np
    k[(1,)](y, np.array(5))
    with pytest.raises(LaunchError, match=r"parameter 'v' is an i32 scalar; got 5.5"):
        k[(1,)](y, np.array(5.5))


def test_constants_from_numpy_and_ones_that_are_no_values():
    import numpy as np
    k = tle.compile(VADD).vadd
    x, y, out = torch.randn(100), torch.randn(100), torch.zeros(100)
    k[(4,)](x, y, out, BLOCK=np.int64(32))
    assert torch.equal(out, x + y)
    with pytest.raises(LaunchError, match=r"constant BLOCK=\[64\]: expected an int, float, bool or element type"):
        k[(2,)](x, y, out, BLOCK=[64])


def test_a_sparse_tensor_is_told_to_be_dense():
    k = tle.compile(VADD).vadd
    with pytest.raises(LaunchError, match=r"parameter 'x' is a torch.sparse_coo tensor; .* pass x.to_dense\(\)"):
        k[(2,)](torch.randn(100).to_sparse(), torch.randn(100), torch.zeros(100))


@pytest.mark.parametrize("name", ["num_warps", "backend"])
def test_a_constant_or_parameter_named_like_a_launch_option_is_refused(name):
    with pytest.raises(tle.TleError, match=f"'{name}' has the name of a launch option"):
        tle.compile(f"kernel k<{name}: int = 4>(y: tensor<i32>[N]) {{ store(y, full<i32>[16](1)) }}")
    with pytest.raises(tle.TleError, match=f"parameter '{name}' has the name of a launch option"):
        tle.compile(f"kernel k(y: tensor<i32>[N], {name}: i32) {{ store(y, full<i32>[16]({name})) }}")


def test_ir_and_compile_check_stage_arch_sms_and_backend_first():
    k = tle.compile(VADD).vadd
    x = torch.randn(100)
    with pytest.raises(LaunchError, match=r"stage 'PTX' is not one of tle, ttir, ttgir, llir, ptx, tileir, sass"):
        k.ir((2,), x, x, x, stage="PTX")
    with pytest.raises(LaunchError, match=r"arch 90: an arch is named by a string such as 'sm_90'"):
        k.ir((2,), x, x, x, arch=90)
    with pytest.raises(LaunchError, match=r"sms is the GPU's count of SMs, a positive int; got 0"):
        k.ir((2,), x, x, x, sms=0)
    with pytest.raises(ValueError, match="backend must be auto, triton, tileir or interp, not 'bogus'"):
        tle.compile(VADD, backend="bogus")
    with pytest.raises(ValueError, match="arch 'sm_999': not an NVIDIA GPU architecture ptxas knows"):
        tle.compile(VADD, arch="sm_999")
    with pytest.raises(TypeError, match=r"got bytes \(decode bytes first"):
        tle.compile(VADD.encode())


def test_a_float_scalar_that_rounds_to_inf_in_its_type_is_refused_on_every_launch():
    k = tle.compile("kernel s(x: tensor<f32>[N], a: f32) {\n    store(x, load(x, tile=[16]) * a)\n}").s
    x = torch.ones(16)
    with pytest.raises(LaunchError, match=r"scalar 'a' = 1e\+300 does not fit f32: it would round to inf"):
        k[(1,)](x, 1e300)
    k[(1,)](x, 2.0)
    with pytest.raises(LaunchError, match=r"scalar 'a' = -1e\+39 does not fit f32"):  # through the cached plan
        k[(1,)](x, -1e39)
    k[(1,)](x, float("inf"))  # an infinity given is one
    assert torch.isinf(x).all()


def test_a_misspelt_keyword_gets_a_did_you_mean_from_parameters_constants_and_options():
    k = tle.compile(VADD).vadd
    x = torch.randn(100)
    with pytest.raises(LaunchError, match=r"no parameter, constant or launch option 'BLOKC' \(did you mean 'BLOCK'\?\)"):
        k[(2,)](x, x, x, BLOKC=64)
    with pytest.raises(LaunchError, match=r"'num_warp' \(did you mean 'num_warps'\?\); parameters: x, y, out; "
                                          r"constants: BLOCK; launch options: num_warps"):
        k[(2,)](x, x, x, num_warp=4)
