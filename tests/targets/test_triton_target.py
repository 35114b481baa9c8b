"""targets/triton.py: TTIR text -> Binary through triton.compile, on a machine without a GPU (ptxas from the wheel).

The TTIR inputs in data/ are in the generic form the upstream MLIR bindings print, with tle source locations.
"""
import re
from pathlib import Path

import pytest

from tle.diagnostics import TleError, render
from tle.targets.binary import Binary
from tle.targets.triton import TRITON_VERSION, compile_ttir, triton_version, verify_ttir

DATA = Path(__file__).parent / "data"
DIV16 = "{tt.divisibility = 16 : i32}"


def ttir(name: str) -> str:
    return (DATA / name).read_text()


def test_pinned_triton_version():
    # The ASTSource subclass and the scratch-parameter ABI are Triton internals checked against this version.
    assert triton_version() == TRITON_VERSION == "3.6.0"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
def test_vector_add_compiles_to_cubin(arch):
    b = compile_ttir(ttir("vector_add.ttir"), arch)
    assert b.cubin[:4] == b"\x7fELF"
    assert (b.backend, b.arch, b.name) == ("triton", arch, "add")
    assert b.params == ["ptr", "ptr", "ptr", "i32"]
    assert b.num_threads == 4 * 32 and b.shared_mem == 0
    assert {"ttir", "ttgir", "llir", "ptx"} <= set(b.stages)
    assert re.search(rf"^\.target {arch}a?$", b.stages["ptx"], re.MULTILINE)
    # Triton 3.6 appends a global-scratch and a profile-scratch pointer; a vector add needs neither.
    assert [(s["name"], s["size"]) for s in b.extra["scratch"]] == [("global_scratch", 0), ("profile_scratch", 0)]
    assert len(re.findall(r"\.param\s", b.stages["ptx"].split(".entry add(")[1].split(")")[0])) == 4 + 2


def test_options_reach_triton():
    b = compile_ttir(ttir("vector_add.ttir"), "sm_90", num_warps=8, num_stages=2)
    assert b.num_threads == 256
    assert '"ttg.num-warps" = 8' in b.stages["ttgir"]
    assert (b.extra["num_warps"], b.extra["num_stages"], b.extra["num_ctas"]) == (8, 2, 1)
    b = compile_ttir(ttir("vector_add.ttir"), "sm_90", num_ctas=2)
    assert '"ttg.num-ctas" = 2' in b.stages["ttgir"] and b.extra["num_ctas"] == 2


def test_divisibility_attributes_drive_vectorization():
    text = ttir("vector_add.ttir")
    aligned = text.replace(f"{DIV16}, {{}}]", f"{DIV16}, {DIV16}]")  # n divisible by 16 too: whole-vector masks
    unaligned = text.replace(DIV16, "{}")
    assert aligned != text and unaligned != text
    ptx_aligned = compile_ttir(aligned, "sm_90").stages["ptx"]
    ptx_unaligned = compile_ttir(unaligned, "sm_90").stages["ptx"]
    assert "ld.global.v4.b32" in ptx_aligned
    assert "ld.global.v4" not in ptx_unaligned and "ld.global.b32" in ptx_unaligned


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_block_pointers_compile_because_ttir_passes_run(arch):
    b = compile_ttir(ttir("block_ptr_double.ttir"), arch)
    assert b.cubin[:4] == b"\x7fELF" and b.params == ["ptr", "ptr", "i32"]
    assert "tt.make_tensor_ptr" in b.stages["source"]
    # rewrite_tensor_pointer (a TTIR pass) turned the block pointers into tensors of pointers.
    assert "tt.make_tensor_ptr" not in b.stages["ttir"] and "tt.advance" not in b.stages["ttir"]


def test_block_pointers_fail_from_a_ttir_file(tmp_path, capfd):
    # Why compile_ttir does not hand Triton a file: from a .ttir file the TTIR passes are skipped.
    # If this starts passing, Triton changed and the ASTSource subclass in targets/triton.py may be unnecessary.
    import triton
    from triton.backends.compiler import GPUTarget
    path = tmp_path / "double.ttir"
    path.write_text(ttir("block_ptr_double.ttir"))
    with pytest.raises(RuntimeError, match="PassManager::run failed"):
        triton.compile(str(path), target=GPUTarget("cuda", 90, 32))
    capfd.readouterr()


def test_tensor_descriptors_need_global_scratch():
    hopper = compile_ttir(ttir("tma_double.ttir"), "sm_90")
    assert "cp.async.bulk.tensor" in hopper.stages["ptx"]
    scratch = {s["name"]: s for s in hopper.extra["scratch"]}
    assert scratch["global_scratch"]["size"] > 0 and scratch["global_scratch"]["align"] >= 64
    ampere = compile_ttir(ttir("tma_double.ttir"), "sm_80")  # rewritten to plain pointers: no scratch
    assert all(s["size"] == 0 for s in ampere.extra["scratch"])


def test_all_scalar_parameter_types():
    text = '''"builtin.module"() ({
  "tt.func"() <{function_type = (!tt.ptr<f16>, i1, i8, i16, i32, i64, f16, bf16, f32, f64, !tt.ptr<i64>) -> (),
               sym_name = "k", sym_visibility = "public"}> ({
  ^bb0(%a: !tt.ptr<f16>, %b: i1, %c: i8, %d: i16, %e: i32, %f: i64, %g: f16, %h: bf16, %i: f32, %j: f64, %k: !tt.ptr<i64>):
    "tt.return"() : () -> ()
  }) : () -> ()
}) : () -> ()'''
    b = compile_ttir(text, "sm_90")
    assert b.params == ["ptr", "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "ptr"]


# ---- errors ----------------------------------------------------------------------------------------------------

def _tle_loc_of(text: str, needle: str) -> tuple[str, str]:
    """The first line containing `needle` and the tle location it carries (through its #loc alias)."""
    line = next(l for l in text.splitlines() if needle in l)
    alias = re.search(r"loc\((#loc\d+)\)", line).group(1)
    return line, re.search(rf"^{alias} = loc\((\"add.tle\":\d+:\d+)\)", text, re.MULTILINE).group(1)


def _verifier_error() -> tuple[str, str]:
    # tt.make_range's verifier rejects a range that does not match its type; MLIR reports the op's location.
    text = ttir("vector_add.ttir")
    line, tle_loc = _tle_loc_of(text, '"tt.make_range"')
    return text.replace(line, line.replace("end = 1024", "end = 1000")), tle_loc


def _parse_error() -> tuple[str, str]:
    # An undefined value: the parser reports a position in the TTIR text; the TTIR line says where in the tle source.
    text = ttir("vector_add.ttir")
    line, tle_loc = _tle_loc_of(text, '"tt.load"')
    return text.replace(line, re.sub(r'"tt.load"\((%\d+)', '"tt.load"(%undefined', line)), tle_loc


@pytest.mark.parametrize("entry", [verify_ttir, compile_ttir])
@pytest.mark.parametrize("make_bad", [_verifier_error, _parse_error])
def test_malformed_ttir_is_a_tle_error_at_the_source_location(entry, make_bad):
    text, tle_loc = make_bad()
    with pytest.raises(TleError) as info:
        entry(text)
    err = info.value
    assert f'"{err.span.file}":{err.span.line}:{err.span.col}' == tle_loc
    assert err.message.startswith("Triton rejected the TTIR: ")
    assert any("Parse MLIR file failed" in n.message for n in err.notes)  # Triton's own words
    if make_bad is _parse_error:
        assert "undeclared SSA value" in err.message
        assert any(re.search(r"at add\.ttir:\d+:\d+ in the TTIR", n.message) for n in err.notes)
    else:
        assert "must match size of range" in err.message
    assert "Traceback" not in render(err)


def test_verify_accepts_good_ttir():
    verify_ttir(ttir("vector_add.ttir"))
    verify_ttir(ttir("block_ptr_double.ttir"))


def test_syntax_error_without_location_points_into_the_ttir():
    text = '''"builtin.module"() ({
  "tt.func"() <{function_type = () -> (), sym_name = "k", sym_visibility = "public"}> ({
    "tt.return"( : () -> ()
  }) : () -> ()
}) : () -> ()'''
    with pytest.raises(TleError) as info:
        verify_ttir(text)
    err = info.value
    assert (err.span.file, err.span.line, err.span.col) == ("k.ttir", 3, 17)
    rendered = render(err)
    assert rendered.startswith("k.ttir:3:17: error: Triton rejected the TTIR: expected ')'")
    assert '"tt.return"( : () -> ()' in rendered  # the offending TTIR line is shown


DOT_F64 = '''"builtin.module"() ({
  "tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "dotk", sym_visibility = "public"}> ({
  ^bb0(%o: !tt.ptr<f32> loc("d.tle":1:10)):
    %a = "arith.constant"() <{value = dense<1.0> : tensor<16x16xf64>}> : () -> tensor<16x16xf64> loc("d.tle":2:3)
    %c = "arith.constant"() <{value = dense<0.0> : tensor<16x16xf32>}> : () -> tensor<16x16xf32> loc("d.tle":3:3)
    %d = "tt.dot"(%a, %a, %c) <{inputPrecision = 0 : i32, maxNumImpreciseAcc = 0 : i32}> : (tensor<16x16xf64>, tensor<16x16xf64>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("d.tle":4:9)
    %r = "tt.make_range"() <{end = 16 : i32, start = 0 : i32}> : () -> tensor<16xi32> loc("d.tle":5:3)
    %r2 = "tt.expand_dims"(%r) <{axis = 1 : i32}> : (tensor<16xi32>) -> tensor<16x1xi32> loc("d.tle":5:3)
    %r3 = "tt.broadcast"(%r2) : (tensor<16x1xi32>) -> tensor<16x16xi32> loc("d.tle":5:3)
    %os = "tt.splat"(%o) : (!tt.ptr<f32>) -> tensor<16x16x!tt.ptr<f32>> loc("d.tle":6:3)
    %op = "tt.addptr"(%os, %r3) : (tensor<16x16x!tt.ptr<f32>>, tensor<16x16xi32>) -> tensor<16x16x!tt.ptr<f32>> loc("d.tle":6:3)
    "tt.store"(%op, %d) : (tensor<16x16x!tt.ptr<f32>>, tensor<16x16xf32>) -> () loc("d.tle":6:3)
    "tt.return"() : () -> () loc("d.tle":7:1)
  }) : () -> () loc("d.tle":1:1)
}) : () -> () loc("d.tle":1:1)'''


def test_pass_failure_is_a_tle_error_at_the_failing_op():
    verify_ttir(DOT_F64)  # valid TTIR; Triton 3.6 has no MMA for f64 x f64 -> f32 and fails in LLVM lowering
    with pytest.raises(TleError) as info:
        compile_ttir(DOT_F64, "sm_90")
    err = info.value
    assert str(err.span) == "d.tle:4:9"
    assert err.message.startswith("Triton failed in make_llir: ")
    assert any("PassManager::run failed" in n.message for n in err.notes)
    assert not any("Failures have been detected" in n.message for n in err.notes)  # MLIR's noise is dropped


def test_ptxas_failure_maps_back_through_ptx_line_info():
    text = ttir("vector_add.ttir")
    addf = next(l for l in text.splitlines() if '"arith.addf"' in l)
    result = re.match(r"\s*(%\d+) = ", addf).group(1)
    bogus = (f'    %asm = "tt.elementwise_inline_asm"({result}) <{{asm_string = "bogus.op.f32 $0, $1;", '
             f'constraints = "=r,r", packed_element = 1 : i32, pure = true}}> : (tensor<1024xf32>) -> '
             f'tensor<1024xf32> loc("add.tle":7:20)')
    text = text.replace(addf, addf + "\n" + bogus)
    text = re.sub(rf'("tt.store"\(%\d+, ){result}(, %\d+\))', r"\g<1>%asm\g<2>", text)
    assert "%asm," in text
    with pytest.raises(TleError) as info:
        compile_ttir(text, "sm_90")
    err = info.value
    assert str(err.span) == "add.tle:7:20"
    assert err.message.startswith("ptxas rejected the kernel: ")
    assert any("bogus" in n.message for n in err.notes)


def test_bad_arch_is_a_value_error():
    with pytest.raises(ValueError, match="sm_90"):
        compile_ttir(ttir("vector_add.ttir"), "hopper")


# ---- Binary -----------------------------------------------------------------------------------------------------

def test_binary_round_trips_through_bytes():
    b = compile_ttir(ttir("vector_add.ttir"), "sm_90")
    data = b.to_bytes()
    again = Binary.from_bytes(data)
    assert again == b
    assert again.to_bytes() == data


def test_binary_round_trips_bytes_stages():
    b = Binary("tileir", "sm_90", "k", b"\x7fELF\x00\x01", ["ptr", "i32"], 128, 0,
               stages={"tilebc": b"\x00\xffbytecode", "mlir": "cuda_tile.module {}"}, extra={"note": [1, 2]})
    again = Binary.from_bytes(b.to_bytes())
    assert again == b and isinstance(again.stages["tilebc"], bytes) and isinstance(again.stages["mlir"], str)


def test_binary_rejects_garbage():
    data = Binary("triton", "sm_90", "k", b"\x7fELF", ["ptr"], 128).to_bytes()
    with pytest.raises(ValueError, match="magic"):
        Binary.from_bytes(b"x" + data)
    with pytest.raises(ValueError, match="header describes"):
        Binary.from_bytes(data[:-1])
    with pytest.raises(ValueError, match="unknown parameter types"):
        Binary("triton", "sm_90", "k", b"", ["tensor"], 128)


@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_a_backend_failure_without_a_line_is_shown_at_the_kernel(backend, monkeypatch):
    """A pass that crashes (or a ptxas timeout) may name no location: tle then points at the kernel's declaration,
    so the error still has a file:line:col, the source line and a caret."""
    import tle.targets.tileir as tileir_target
    import tle.targets.triton as triton_target
    from tle.check import load_program
    from tle.compiler import compile_kernel

    def crash(*a, **k):
        raise TleError(None, "Triton failed in make_llir: LLVM ERROR: out of registers")
    monkeypatch.setattr(triton_target if backend == "triton" else tileir_target,
                        "compile_ttir" if backend == "triton" else "compile_tileir", crash)
    src = "// a kernel\nkernel copy(x: tensor<f32>[N], y: tensor<f32>[N]) {\n" \
          "    store(y, load(x, tile=[128], at=program_id(0)), at=program_id(0))\n}\n"
    with pytest.raises(TleError) as info:
        compile_kernel(load_program(src, "copy.tle"), "copy", {}, backend=backend)
    text = render(info.value)
    assert text.startswith("copy.tle:2:"), text
    assert "kernel copy(" in text and "^" in text and "the backend named no line of kernel 'copy'" in text
