"""Tensors spanning more than 2**31 - 1 elements (tle/abi.py WideTensor): which launches prove it, what the TTIR
does with it (i64 offsets where i32 ones would wrap, i32 everywhere else), that Tile IR needs nothing for it, and
the dims past 2**31 - 1 (tle/abi.py WideDim: passed as i64, and i64 values where the kernel reads them). The GPU
half, past 2**32 elements on both paths, is tests/gpu/test_wide_tensors_gpu.py.
"""
from __future__ import annotations

import re

import pytest
import torch

import tle
from tle.abi import Spec, WideDim, WideTensor, abi, default_spec, launch_spec, spec_of
from tle.diagnostics import TleError
from tle.check import check_kernel, load_program
from tle.typed import For
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tle_to_tileir import tle_to_tileir
from tle.lowering.tle_to_ttir import tle_to_ttir
from tle.runtime.kernel import LaunchError
from tle.targets import tileir
from tle.targets.triton import compile_ttir, verify_ttir
from tileir_available import has_tileiras

ROWS = """
kernel rows<B: int = 1024>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let row = program_id(0)
    store(y, load(x, tile=[1, B], at=[row, 0]) * 2.0, at=[row, 0])
}
"""

TILES = """
kernel tiles(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    store(y, load(x, tile=[32, 64], at=[program_id(0), program_id(1)]) + 1.0, at=[program_id(0), program_id(1)])
}
"""

PICK = """
kernel pick(x: tensor<f32>[M, N], ids: tensor<i32>[R], y: tensor<f32>[R, N]) {
    let r = reshape(load(ids, tile=[16], at=program_id(0)), [16, 1])
    let c = reshape(arange(0, 64), [1, 64])
    store(y, gather(x, [r, c], mask=(r < M) & (c < N), other=0.0), at=[program_id(0), 0])
}
"""

BATCHED = """
kernel rows3<B: int = 1024>(x: tensor<f32>[S, M, N], y: tensor<f32>[S, M, N]) {
    store(y, load(x, tile=[1, 1, B], at=[program_id(1), program_id(0), 0]) * 2.0, at=[program_id(1), program_id(0), 0])
}
"""

VADD = """
kernel vadd(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, load(x, tile=[256], at=[program_id(0)]), at=[program_id(0)])
}
"""

EDGE = 2 ** 31 // 131072  # 16384 rows of 131072: the last element is 2**31 - 1, the largest i32 offset


def _kernel(src):
    prog = load_program(src, "k.tle")
    return check_kernel(prog, prog.kernel_names()[0], {})


def _rows_flat(x, y):
    """The ABI values the runtime binds and checks for ROWS launched on (x, y)."""
    values, _, _ = tle.compile(ROWS).rows._bind((x, y), {})
    return tle.compile(ROWS).rows._check_args(_kernel(ROWS), values)[0]


def _rows_spec(x, y):
    """The spec the runtime proves for ROWS launched on (x, y)."""
    return spec_of(_kernel(ROWS), _rows_flat(x, y))


def _meta(*shape):
    return torch.empty(shape, device="meta")


def test_a_tensor_past_2_31_elements_is_wide():
    spec = _rows_spec(_meta(EDGE + 1, 131072), _meta(EDGE + 1, 131072))
    assert WideTensor("x") in spec.inside and WideTensor("y") in spec.inside


def test_a_tensor_whose_last_offset_is_2_31_minus_1_is_not():
    spec = _rows_spec(_meta(EDGE, 131072), _meta(EDGE, 131072))
    assert not any(isinstance(f, WideTensor) for f in spec.inside)


def test_a_slice_is_wide_by_its_reach_not_its_element_count():
    # 8 columns of 16385 rows: 131080 elements, but the last lies 2**31 + 7 elements past the first.
    spec = _rows_spec(_meta(EDGE + 1, 131072)[:, :8], _meta(EDGE + 1, 8))
    assert WideTensor("x") in spec.inside and WideTensor("y") not in spec.inside


def test_tlec_sizes_prove_it_for_contiguous_tensors():
    k = _kernel(ROWS)
    assert WideTensor("x") in launch_spec(k, {"M": EDGE + 1, "N": 131072}).inside
    assert WideTensor("x") not in launch_spec(k, {"M": EDGE, "N": 131072}).inside
    assert WideTensor("x") not in launch_spec(k, {"M": EDGE + 1}).inside  # N unknown: nothing proved


def _ttir(src, wide: set[str]):
    k = _kernel(src)
    d = default_spec(k)
    spec = Spec(d.divisible16, d.unit_strides, frozenset(WideTensor(t) for t in wide))
    text = tle_to_ttir(ast_to_tle(k, spec))
    verify_ttir(text)
    return text


def _addptr_offsets(text):
    return re.findall(r'"tt\.addptr"\(.*\) : \((?:tensor<[0-9x]+x)?!tt\.ptr<f32>>?, (\S+?)\)', text)


def test_wide_row_base_is_an_i64_product():
    text = _ttir(ROWS, {"x", "y"})
    assert re.search(r'"arith\.muli".*: \(i64, i64\) -> i64', text)
    offsets = _addptr_offsets(text)
    assert offsets.count("i64") == 2  # x's and y's row base: row * stride in i64
    assert "tensor<1x1024xi32>" in offsets  # the columns within the row stay i32 (stride 1: k < 1024)
    compile_ttir(text, "sm_90")


def test_only_the_wide_tensor_gets_i64_offsets():
    text = _ttir(ROWS, {"x"})
    assert _addptr_offsets(text).count("i64") == 1


def test_wide_2d_tile_rows_are_i64_per_element():
    # k * stride along a 32-row tile with a runtime row stride may pass 2**31 - 1: i64 per element; the unit-stride
    # columns are i32 and are widened only where the two are added.
    text = _ttir(TILES, {"x", "y"})
    assert re.search(r'"arith\.muli".*: \(tensor<32xi64>, tensor<32xi64>\) -> tensor<32xi64>', text)
    assert "tensor<32x64xi64>" in _addptr_offsets(text)
    compile_ttir(text, "sm_90")


def test_wide_gather_offsets_are_i64():
    text = _ttir(PICK, {"x"})
    assert "tensor<16x64xi64>" in _addptr_offsets(text)
    assert "tensor<16x64xi64>" not in _addptr_offsets(_ttir(PICK, set()))
    compile_ttir(text, "sm_90")


def _tileir(src, wide: set[str]):
    k = _kernel(src)
    d = default_spec(k)
    return str(tle_to_tileir(ast_to_tle(k, Spec(d.divisible16, d.unit_strides,
                                                 frozenset(WideTensor(t) for t in wide)))))


def test_a_wide_tensors_strides_are_passed_as_i64():
    k = _kernel(ROWS)
    d = default_spec(k)
    spec = Spec(d.divisible16, d.unit_strides, frozenset({WideTensor("x")}))
    assert {a.key: a.dtype for a in abi(k, spec) if a.kind != "ptr"} == \
        {"M": "i32", "N": "i32", "x.stride0": "i64", "y.stride0": "i32"}


def test_a_stride_past_2_31_minus_1_makes_a_tensor_wide_on_its_own():
    # [1, 16384, 131072]: the last element is at 2**31 - 1, but the batch axis's stride is 2**31
    k = _kernel(BATCHED)
    tle_k = tle.compile(BATCHED).rows3
    x = _meta(1, EDGE, 131072)
    values, _, _ = tle_k._bind((x, x), {})
    flat, _, _ = tle_k._check_args(k, values)
    assert flat["x.stride0"] == 2 ** 31
    assert WideTensor("x") in spec_of(k, flat).inside
    assert WideTensor("x") in launch_spec(k, {"S": 1, "M": EDGE, "N": 131072}).inside


@pytest.mark.skipif(not has_tileiras(), reason="tileiras or the pinned cuda-tile bytecode writer is not installed")
def test_tile_ir_views_of_a_wide_tensor_take_i64_sizes_and_strides():
    # make_tensor_view takes one integer type for its dynamic sizes and strides: with i64 strides, the sizes are
    # widened for it; the plain view keeps i32 throughout. tileiras compiles both.
    wide, plain = _tileir(ROWS, {"x"}), _tileir(ROWS, set())
    views = re.findall(r'"cuda_tile\.make_tensor_view".* : \((.*?)\) ->', wide)
    assert len(views) == 2 and "tile<i32>" not in views[0] and "tile<i64>" not in views[1]
    assert "tile<i64>" not in " ".join(re.findall(r'"cuda_tile\.make_tensor_view".* : \((.*?)\) ->', plain))
    k = _kernel(ROWS)
    d = default_spec(k)
    for spec in (d, Spec(d.divisible16, d.unit_strides, frozenset({WideTensor("x")}))):
        assert tileir.compile_tileir(tle_to_tileir(ast_to_tle(k, spec)), "sm_90").cubin[:4] == b"\x7fELF"


def test_a_size_past_2_31_minus_1_is_a_wide_dim_passed_as_i64():
    k = tle.compile(VADD).vadd
    x = _meta(3_000_000_000)
    values, _, _ = k._bind((x, x), {})
    kernel = _kernel(VADD)
    spec = spec_of(kernel, k._check_args(kernel, values)[0])
    assert {WideDim("N"), WideTensor("x"), WideTensor("y")} <= spec.inside
    assert [a.dtype for a in abi(kernel, spec) if a.kind == "dim"] == ["i64"]
    assert WideDim("N") in launch_spec(kernel, {"N": 3_000_000_000}).inside


def test_along_a_wide_dim_indices_and_bounds_are_i64():
    k = _kernel(VADD)
    d = default_spec(k)
    spec = Spec(d.divisible16, d.unit_strides, frozenset({WideDim("N"), WideTensor("x"), WideTensor("y")}))
    text = tle_to_ttir(ast_to_tle(k, spec))
    verify_ttir(text)
    # the tile's start, program_id * 256, and its bounds check against N in i64; the offsets within it stay i32
    assert re.search(r'"arith\.cmpi".* : \(tensor<256xi64>, tensor<256xi64>\) -> tensor<256xi1>', text)
    assert "tensor<256xi32>" in _addptr_offsets(text) and "i64" in _addptr_offsets(text)
    compile_ttir(text, "sm_90")
    if has_tileiras():
        assert tileir.compile_tileir(tle_to_tileir(ast_to_tle(k, spec)), "sm_90").cubin[:4] == b"\x7fELF"


def test_a_2d_view_with_one_dim_past_2_31_minus_1_takes_i64_sizes_throughout():
    """A view's sizes are one type (the dialect's variadic operand group, which IRDL verifies): beside a wide dim,
    an i32 dim is sign-extended for the view, and the module verifies (ast_to_tle checks) and compiles."""
    prog = load_program(ROWS, "k.tle")
    k = check_kernel(prog, "rows", {}, wide_dims={"M"})
    d = default_spec(k)
    spec = Spec(d.divisible16, d.unit_strides, frozenset({WideDim("M"), WideTensor("x"), WideTensor("y")}))
    module = ast_to_tle(k, spec)
    text = str(module)
    assert re.search(r'arith\.extsi %arg2 : i32 to i64', text)  # N, beside M
    assert re.search(r'"tle\.make_view"\(%arg0, %arg1, %\d+, %arg3, %c1_i64\)', text)  # the unit stride i64 too
    verify_ttir(tle_to_ttir(module))
    if has_tileiras():
        assert tileir.compile_tileir(tle_to_tileir(module), "sm_90").cubin[:4] == b"\x7fELF"


MASKED = """
kernel masked<B: int = 256>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let i = program_id(0) * B + arange(0, B)
    store(y, gather(x, i, mask=i < N, other=0.0), at=[program_id(0)])
}
"""

STRIDED = """
kernel strided<B: int = 256>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    // a grid-stride loop over tiles: its bound and positions come from N's value
    for t in range(program_id(0), cdiv(N, B), num_programs(0)) {
        let i = t * B + arange(0, B)
        scatter(y, [i], gather(x, [i], mask=i < N, other=0.0) * 2.0, mask=i < N)
    }
}
"""


def _wide_dim_module(src):
    """The tle module of src with its dim N past 2**31 - 1: N and its tensors wide, N read as i64."""
    prog = load_program(src, "k.tle")
    k = check_kernel(prog, prog.kernel_names()[0], {}, wide_dims={"N"})
    d = default_spec(k)
    spec = Spec(d.divisible16, d.unit_strides, frozenset({WideDim("N"), WideTensor("x"), WideTensor("y")}))
    return ast_to_tle(k, spec)


def test_a_wide_dims_value_is_i64_where_the_kernel_reads_it():
    # `i < N` with i an i32 tile: the compare is i64 (N's value may pass 2**31 - 1), i widened for it; the same
    # kernel at a narrower launch compares in i32 as before
    module = _wide_dim_module(MASKED)
    text = tle_to_ttir(module)
    verify_ttir(text)
    assert re.search(r'"arith\.cmpi".* : \(tensor<256xi64>, tensor<256xi64>\) -> tensor<256xi1>', text)
    assert not re.search(r'"arith\.cmpi".* : \(tensor<256xi32>', text)
    assert re.search(r'"arith\.cmpi".* : \(tensor<256xi32>, tensor<256xi32>\)', _ttir(MASKED, set()))
    compile_ttir(text, "sm_90")
    if has_tileiras():
        assert tileir.compile_tileir(tle_to_tileir(module), "sm_90").cubin[:4] == b"\x7fELF"


def test_a_range_over_a_wide_dim_counts_in_i64():
    # range(pid, cdiv(N, B), num_programs): the bounds widen to i64, and so does the loop variable, t * B and the
    # gather's positions, which reach the pointers without a truncation
    module = _wide_dim_module(STRIDED)
    text = tle_to_ttir(module)
    verify_ttir(text)
    assert re.search(r'"scf\.for".*\n\s*\^bb0\(%arg\d+: i64', text)
    assert "arith.trunci" not in text
    assert "tensor<256xi64>" in _addptr_offsets(text)
    compile_ttir(text, "sm_90")
    if has_tileiras():
        tir = tle_to_tileir(module)
        assert re.search(r'"cuda_tile\.for".*\n\s*\^bb0\(%\w+: !cuda_tile\.tile<i64>', str(tir))
        assert tileir.compile_tileir(tir, "sm_90").cubin[:4] == b"\x7fELF"


COUNT = """
kernel count(out: tensor<i64>[1], n: i64) {
    var c: i64 = 0
    for i in range(n - 2, n) {
        c = c + i
    }
    store(out, full<i64>[1](c), at=[0])
}
"""


def test_an_i64_bound_of_range_counts_in_i64():
    # an i64 bound the author wrote (a cast, a parameter) is kept, not truncated to i32: the loop counts in i64
    loop = next(s for s in _kernel(COUNT).body if isinstance(s, For))
    assert loop.var.type.dtype == "i64"
    out = torch.zeros(1, dtype=torch.int64)
    tle.compile(COUNT).count[(1,)](out, 2 ** 40)
    assert out.item() == 2 * 2 ** 40 - 3
    assert re.search(r'"scf\.for".*\n\s*\^bb0\(%arg\d+: i64', _ttir(COUNT, set()))


def test_an_error_that_only_a_wide_dim_causes_says_so(tmp_path, capsys):
    src = """
kernel narrow<B: int = 256>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let n: i32 = N
    store(y, load(x, tile=[B], at=[program_id(0)]) * cast<f32>(n), at=[program_id(0)])
}
"""
    prog = load_program(src, "k.tle")
    check_kernel(prog, "narrow", {})  # i32 at any launch whose N fits
    with pytest.raises(TleError, match=r"cannot assign a value of type i64") as e:
        check_kernel(prog, "narrow", {}, wide_dims={"N"})
    assert "in this launch the dim 'N' is past 2^31 - 1, so its value is i64" in str(e.value)
    from tle.cli import main
    f = tmp_path / "narrow.tle"
    f.write_text(src)
    assert main([str(f), "--emit", "ttir", "--sizes", "N=3000000000", "-o", str(tmp_path / "o.ttir")]) != 0
    err = capsys.readouterr().err
    assert "narrow.tle:3:18: error: cannot assign a value of type i64" in err and "its value is i64" in err


def test_no_loop_fact_rests_on_a_dim_past_2_31_minus_1():
    # the runtime proves loop facts on the kernel checked before its launch's WideDims were known, where N reads as
    # i32: N / 4096 fits, but N does not, so nothing may be proved from it
    k = _kernel("""
kernel blocks(x: tensor<f32>[N], y: tensor<f32>[1]) {
    var acc = zeros<f32>[4096]
    for b in range(N / 4096) {
        acc = acc + load(x, tile=[4096], at=[b])
    }
    store(y, full<f32>[1](sum(acc)), at=[0])
}
""")
    assert {str(f) for f in launch_spec(k, {"N": 2 ** 31 - 4096}).inside} >= {"loop0", "loop0@N:4096"}
    assert not {str(f) for f in launch_spec(k, {"N": 3 * 2 ** 30}).inside} & {"loop0", "loop0@N:4096"}


@pytest.fixture
def everything_wide(monkeypatch):
    """No CPU test can afford 2**31 elements, so every launch calls each of its tensors and dims wide."""
    import tle.abi
    monkeypatch.setattr(tle.abi, "wide_facts", lambda kernel, layout: frozenset(
        WideTensor(p.name) for p in kernel.params if hasattr(p.type, "dims")) | frozenset(
        WideDim(d) for d in kernel.dims))


def test_the_interpreter_runs_kernels_that_read_wide_dims(everything_wide):
    # the kernels then compare and count in i64, and give what they give in i32
    x = torch.randn(1000)
    for src, name, grid in ((MASKED, "masked", 4), (STRIDED, "strided", 3)):
        y = torch.full((1000,), float("nan"))
        k = getattr(tle.compile(src), name)
        k[(grid,)](x, y)
        assert torch.equal(y, x if name == "masked" else x * 2), name
        entry = next(iter(k._entries.values()))
        assert WideDim("N") in entry.compiled.spec.inside
        assert [a.dtype for a in entry.compiled.abi if a.kind == "dim"] == ["i64"]


def test_the_interpreter_runs_wide_views(everything_wide):
    # the interpreter then runs the kernel with i64 sizes and strides in its views, and must give what it gives
    # without them
    x = torch.randn(6, 40, 72)[:, 3:, :50]  # a strided slice
    y = torch.empty(6, 37, 50)
    k = tle.compile(BATCHED).rows3
    k[(37, 6)](x, y, B=64)
    assert torch.equal(y, x * 2)
    entry = next(iter(k._entries.values()))
    assert WideTensor("x") in entry.compiled.spec.inside
    assert [a.dtype for a in entry.compiled.abi if a.kind != "ptr"] == ["i64"] * 7  # 3 dims, 4 strides (the unit
    #                                                                                 strides dropped)


def test_an_empty_tensor_with_a_stride_past_2_31_minus_1_is_wide():
    k = _kernel(ROWS)
    assert WideTensor("x") in spec_of(k, _rows_flat(torch.empty(0, device="meta").as_strided((0, 8), (2 ** 31, 1)),
                                                    _meta(0, 8))).inside


def test_tlec_v_names_the_wide_tensors(tmp_path, capsys):
    from tle.cli import main
    src = tmp_path / "rows.tle"
    src.write_text(ROWS)
    out = str(tmp_path / "rows.ttir")
    assert main([str(src), "--backend", "triton", "--emit", "ttir", "-v", "--sizes", f"M={EDGE + 1},N=131072",
                 "-o", out]) == 0
    assert "kernel 'rows': x, y span more than 2^31 - 1 elements under these sizes, so their strides and offsets " \
           "are 64-bit" in capsys.readouterr().err
    assert main([str(src), "--backend", "triton", "--emit", "ttir", "-v", "--sizes", f"M={EDGE},N=131072",
                 "-o", out]) == 0
    assert "2^31" not in capsys.readouterr().err


def test_tlec_v_names_the_wide_dims(tmp_path, capsys):
    from tle.cli import main
    src = tmp_path / "vadd.tle"
    src.write_text(VADD)
    assert main([str(src), "--backend", "triton", "--emit", "ttir", "-v", "--sizes", "N=3000000000",
                 "-o", str(tmp_path / "vadd.ttir")]) == 0
    assert "x, y span more than 2^31 - 1 elements under these sizes, so their strides and offsets are 64-bit, and " \
           "the dim N, past it, is 64-bit (an i64 value where the kernel reads it)" in capsys.readouterr().err


PACKED_ROWS = """
kernel packed(x: tensor<f32>[M, N], cu: tensor<i32>[S], y: tensor<f32>[M, N]) {
    let first = load(cu, at=program_id(0))
    let w = slice(x, start=[first, 0], shape=[load(cu, at=program_id(0) + 1) - first, N])
    store(y, load(w, tile=[4, 256], at=[program_id(1), 0]), at=[program_id(1), 0])
}
"""


def test_a_slice_of_a_wide_tensor_moves_its_base_in_i64():
    # first * row stride can pass 2**31 - 1 in a wide tensor: the window's base moves by an i64 product there, and
    # by an i32 one in a plain tensor, where every element's offset fits.
    wide, plain = _ttir(PACKED_ROWS, {"x"}), _ttir(PACKED_ROWS, set())
    assert re.search(r'"tt\.addptr"\(%arg0, %\d+\) : \(!tt\.ptr<f32>, i64\)', wide)
    assert re.search(r'"tt\.addptr"\(%arg0, %\d+\) : \(!tt\.ptr<f32>, i32\)', plain)
    compile_ttir(wide, "sm_90")


@pytest.mark.skipif(not has_tileiras(), reason="tileiras is not installed")
def test_a_slice_of_a_wide_tensor_compiles_on_tile_ir():
    k = _kernel(PACKED_ROWS)
    d = default_spec(k)
    text = tle_to_tileir(ast_to_tle(k, Spec(d.divisible16, d.unit_strides, frozenset({WideTensor("x")}))))
    assert re.search(r'"cuda_tile\.offset"\(%\d+, %\d+\) : \(!cuda_tile\.tile<ptr<f32>>, !cuda_tile\.tile<i64>\)',
                     str(text))
    assert tileir.compile_tileir(text, "sm_90").cubin[:4] == b"\x7fELF"
