"""asm<T>(...): inline PTX on the native path. What the golden file (tests/filecheck/inline_asm.tle) cannot show:
where a mistake in the PTX is reported, what `auto` and the interpreter do with it."""
from __future__ import annotations

import warnings

import pytest
import torch

import tle
from tle.check import load_program
from tle.compiler import compile_kernel
from tle.diagnostics import TleError

KERNEL = """kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = load(x, tile=[128], at=program_id(0))
    let r = asm<f32>("PTX", "=f,f", t, ref=REF)
    store(y, r, at=program_id(0))
}
"""


def source(ptx: str = "tanh.approx.f32 $0, $1;", ref: str = "tanh(t)") -> str:
    text = KERNEL.replace("PTX", ptx).replace("REF", ref)
    return text if ref else text.replace(", ref=", "")


def test_a_ptxas_error_in_the_ptx_is_reported_at_the_asm_call():
    program = load_program(source("tanh.aprox.f32 $0, $1;"), "fast.tle")
    with pytest.raises(TleError) as info:
        compile_kernel(program, "k", {}, backend="triton", stop="cubin")
    err = info.value
    assert (err.span.file, err.span.line, err.span.col) == ("fast.tle", 3, 13)
    assert err.message.startswith("ptxas rejected the kernel: ") and ".aprox" in err.message


def test_auto_takes_the_native_path_and_says_why():
    program = load_program(source(), "fast.tle")
    compiled = compile_kernel(program, "k", {}, backend="auto", stop="cubin")
    assert compiled.backend == "triton"
    assert compiled.fallback.startswith("asm() inlines PTX") and compiled.fallback.endswith("at fast.tle:3:13")


def test_the_ref_is_dead_code_in_the_native_cubin():
    program = load_program(source(), "fast.tle")
    ptx = compile_kernel(program, "k", {}, backend="triton", stop="ptx").stages["ptx"]
    assert "tanh.approx.f32" in ptx and "__nv_tanhf" not in ptx
    # without the asm, the same tanh() is libdevice's: the ref would have shown up had it been kept
    plain = load_program(KERNEL.replace('asm<f32>("PTX", "=f,f", t, ref=REF)', "tanh(t)"), "plain.tle")
    assert "tanh.approx.f32" not in compile_kernel(plain, "k", {}, backend="triton", stop="ptx").stages["ptx"]


def test_the_interpreter_runs_the_ref():
    k = tle.compile(source(ref="t * 2.0 + 1.0")).k
    x = torch.randn(300)
    y = torch.full((300,), float("nan"))
    k[(3,)](x, y, backend="interp")
    torch.testing.assert_close(y, x * 2.0 + 1.0, rtol=0, atol=0)


def test_the_interpreter_without_a_ref_says_what_to_add():
    k = tle.compile(source(ref="")).k
    with pytest.raises(TleError, match=r"the interpreter cannot run asm\(\)") as info:
        k[(1,)](torch.randn(128), torch.empty(128), backend="interp")
    assert info.value.span.line == 3
    assert any("ref=" in n.message for n in info.value.notes)


def test_a_tied_input_and_a_clobber_are_not_operands_to_count():
    text = KERNEL.replace("f32", "i32").replace('asm<i32>("PTX", "=f,f", t, ref=REF)',
                                                 'asm<i32>("add.s32 $0, $0, 1;", "=r,0,~{memory}", t, ref=t + 1)')
    ptx = compile_kernel(load_program(text, "tied.tle"), "k", {}, backend="triton", stop="ptx").stages["ptx"]
    assert "add.s32" in ptx
    k = tle.compile(text).k
    x = torch.randint(-100, 100, (128,), dtype=torch.int32)
    y = torch.empty_like(x)
    k[(1,)](x, y, backend="interp")
    assert torch.equal(y, x + 1)


@pytest.mark.parametrize("pure", ["true", "false"])
def test_a_discarded_asm_runs_only_where_it_is_not_pure(pure):
    text = ("kernel k(x: tensor<i32>[N]) {\n    let t = load(x, tile=[128], at=program_id(0))\n"
            f'    let _ = asm<i32>("add.s32 $0, $1, 7;", "=r,r", t, pure={pure})\n}}\n')
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ptx = compile_kernel(load_program(text, "d.tle"), "k", {}, backend="triton", stop="ptx").stages["ptx"]
    assert ("add.s32" in ptx and ", 7;" in ptx) == (pure == "false")
    # a pure asm whose result goes nowhere leaves a kernel that writes nothing, which is said
    said = [str(w.message) for w in seen if issubclass(w.category, tle.TleWarning)]
    assert (len(said) == 1 and "kernel 'k' writes nothing" in said[0]) == (pure == "true")
