"""tlec --sizes / --grid: compiling as a described launch would (tle/abi.py launch_spec), and the command-line
errors for launches it cannot describe (exit 2, a one-line message)."""
from __future__ import annotations

import os

import pytest

from tle.cli import main

ROWS = """kernel rows(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let row = program_id(0)
    store(y, load(x, tile=[1, 1024], at=[row, 0]), at=[row, 0])
}
"""


@pytest.fixture
def rows(tmp_path):
    path = tmp_path / "rows.tle"
    path.write_text(ROWS)
    return str(path)


def emit(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_sizes_mark_the_dims_divisible_by_16(rows, capsys):
    text = emit(capsys, rows, "--emit=tle", "--sizes", "M=4096,N=1000")
    assert '{tle.divisibility = 16 : i32, tle.name = "M"}' in text
    assert 'tle.name = "N"}' in text and '{tle.divisibility = 16 : i32, tle.name = "N"}' not in text
    assert "tle.inside" not in text  # no grid: no grid facts


def test_sizes_mark_the_strides_of_contiguous_tensors(rows, capsys):
    """A contiguous [M, N] tensor's row stride is N: divisible by 16 when N is, unknown while N is not given."""
    assert '{tle.divisibility = 16 : i32, tle.name = "x.stride0"}' in \
        emit(capsys, rows, "--emit=tle", "--sizes", "M=100,N=1024")
    assert 'tle.divisibility = 16 : i32, tle.name = "x.stride0"' not in \
        emit(capsys, rows, "--emit=tle", "--sizes", "M=100,N=1000")
    assert 'tle.divisibility = 16 : i32, tle.name = "x.stride0"' not in \
        emit(capsys, rows, "--emit=tle", "--sizes", "M=4096")


def test_a_grid_that_fits_marks_the_row_inside(rows, capsys):
    assert emit(capsys, rows, "--emit=tle", "--sizes", "M=64,N=1000", "--grid", "64").count("tle.inside") == 2
    assert "tle.inside" not in emit(capsys, rows, "--emit=tle", "--sizes", "M=64,N=1000", "--grid", "65,1")


@pytest.mark.parametrize("argv,message", [
    (["--sizes", "M=0"], "--sizes M=0: expected DIM=N with a positive integer N"),
    (["--sizes", "M"], "--sizes M: expected DIM=N"),
    (["--grid", "4"], "--grid needs --sizes"),
    (["--sizes", "M=4", "--grid", "1,2,3,4"], "--grid 1,2,3,4: expected 1 to 3 positive integers"),
    (["--sizes", "M=4", "--generic"], "--generic assumes nothing about the arguments"),
    (["--sizes", "M=4", "--sms", "132"], "--sms needs --grid"),
    (["--sizes", "M=4", "--grid", "4", "--sms", "0"], "--sms needs --grid and a positive count"),
])
def test_launches_tlec_cannot_describe_are_command_line_errors(rows, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main([rows, "--emit=tle", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_size_for_no_dim_of_the_kernel_names_the_dims(rows, capsys):
    assert main([rows, "--emit=tle", "--sizes", "K=64"]) == 2
    assert "--sizes K: no kernel compiled from" in capsys.readouterr().err


def test_with_k_sizes_and_constants_of_the_files_other_kernels_are_ignored(tmp_path, capsys):
    """One --sizes and -D list for a whole file, used with -k for one kernel at a time (a porter's fp8 file): what
    belongs to another kernel of the file is no mistake; what belongs to none still is."""
    path = tmp_path / "two.tle"
    path.write_text("""
kernel a<B: int = 64>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, load(x, tile=[B], at=program_id(0)), at=program_id(0))
}
kernel b<C: int = 32>(x: tensor<f32>[M, K], y: tensor<f32>[M, K]) {
    store(y, load(x, tile=[1, C], at=[program_id(0), 0]), at=[program_id(0), 0])
}
""")
    ok = [str(path), "-k", "a", "--emit=tle", "--sizes", "N=1000,M=10,K=64", "-D", "C=64", "-D", "B=128"]
    assert main(ok) == 0 and "tensor<128xf32>" in capsys.readouterr().out  # B=128 taken, C=64 and M, K left
    assert main([str(path), "-k", "a", "--emit=tle", "--sizes", "N=1000,Q=3"]) == 2
    assert "--sizes Q: no kernel compiled from" in capsys.readouterr().err
    assert main([str(path), "-k", "a", "--emit=tle", "-D", "Z=3"]) == 2
    assert "-D Z: no kernel compiled from" in capsys.readouterr().err


def test_k_given_twice_compiles_both_kernels(tmp_path, capsys):
    """-k a -k b: both, in that order (it used to compile only the last, silently: a porter's report); a name the
    file does not have, anywhere in the list, is an error before anything compiles."""
    path = tmp_path / "two.tle"
    path.write_text("""
kernel a(x: tensor<f32>[N], y: tensor<f32>[N]) { store(y, load(x, tile=[64], at=program_id(0)), at=program_id(0)) }
kernel b(x: tensor<f32>[N], y: tensor<f32>[N]) { store(y, load(x, tile=[32], at=program_id(0)), at=program_id(0)) }
kernel c(x: tensor<f32>[N], y: tensor<f32>[N]) { store(y, load(x, tile=[16], at=program_id(0)), at=program_id(0)) }
""")
    assert main([str(path), "-k", "b", "-k", "a", "--emit=tle"]) == 0
    out = capsys.readouterr().out
    assert "@b(" in out and "@a(" in out and "@c(" not in out and out.index("@b(") < out.index("@a(")
    assert main([str(path), "-k", "a", "-k", "d", "--emit=tle"]) == 2
    captured = capsys.readouterr()
    assert "error: no kernel named 'd'" in captured.err and "@a(" not in captured.out


def test_a_kernel_the_file_does_not_have_is_a_command_line_error(rows, capsys):
    assert main([rows, "--emit=tle", "--kernel", "row"]) == 2
    assert "error: no kernel named 'row'" in capsys.readouterr().err


def test_a_size_for_a_constant_says_to_give_it_with_d(tmp_path, capsys):
    path = tmp_path / "c.tle"
    path.write_text(ROWS.replace("kernel rows(", "kernel rows<D: int = 1024>(").replace("1024]", "D]"))
    assert main([str(path), "--emit=tle", "--sizes", "M=64,D=512"]) == 2
    assert "; D is a compile-time constant: -D D=512" in capsys.readouterr().err


MATMUL = os.path.join(os.path.dirname(__file__), "..", "examples", "matmul.tle")
MATMUL_64x64x32 = ["-D", "BM=64", "-D", "BN=64", "-D", "BK=32", "--sizes", "M=1024,N=1280,K=1024", "--sms", "132"]


def test_more_than_two_waves_marks_the_kernel(capsys):
    """--grid and --sms prove ManyWaves as the runtime would: 320 programs on 132 SMs, not 256."""
    assert "tle.many_waves" in emit(capsys, MATMUL, "--emit=tle", *MATMUL_64x64x32, "--grid", "16,20")
    assert "tle.many_waves" not in emit(capsys, MATMUL, "--emit=tle", *MATMUL_64x64x32, "--grid", "16,16")


def test_auto_names_the_small_dot_step_it_leaves_tile_ir_for(capsys, tmp_path):
    """tlec -v on a launch of more than two waves of 64x64x32 matmul tiles: the native path, and why, at the dot."""
    assert main([MATMUL, "-v", *MATMUL_64x64x32, "--grid", "16,20", "-o", str(tmp_path / "mm.cubin")]) == 0
    err = capsys.readouterr().err
    assert "on the native CUDA path (Triton): the kernel's one dot takes 64x64x32 multiply-adds a step" in err
    assert "matmul.tle:10:15" in err


ATTENTION_BWD = os.path.join(os.path.dirname(__file__), "..", "examples", "attention_bwd.tle")


@pytest.mark.parametrize("d,native", [(64, True), (128, False)])
def test_auto_names_the_small_dots_of_attention_backward_it_leaves_tile_ir_for(capsys, tmp_path, d, native):
    """tlec -v on dq at head dim 64 over 2048 programs (more than two waves on 132 SMs): the native path, and why,
    at the loop step's first dot; at head dim 128 the Tile IR path."""
    assert main([ATTENTION_BWD, "-v", "--kernel", "attention_bwd_dq", "-D", f"D={d}", "--sizes",
                 "B=32,S=4096,L=4096", "--grid", "64,32", "--sms", "132", "-o", str(tmp_path / "dq.cubin")]) == 0
    err = capsys.readouterr().err
    if native:
        assert "on the native CUDA path (Triton): one loop step holds 3 dots of at most 64x64x64" in err
        assert "attention_bwd.tle:87:18" in err
    else:
        assert "compiled for sm_90 on the CUDA Tile IR path" in err


def test_an_output_in_a_missing_folder_is_a_command_line_error(rows, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([rows, "-o", str(tmp_path / "no" / "such" / "rows.cubin")])
    assert exit_.value.code == 2
    assert f"the folder {tmp_path / 'no' / 'such'} does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([rows, "-o", str(tmp_path)])
    assert exit_.value.code == 2 and "is a folder; give a file name" in capsys.readouterr().err


def test_an_unknown_constant_is_a_command_line_error_that_suggests_the_kernels_own(rows, capsys):
    """A misspelt -D was reported at the first kernel's declaration, as an error in the program (exit 1)."""
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "softmax.tle")
    assert main([path, "-D", "BLOCKS=64", "--emit=tle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tlec: error: -D BLOCKS: no kernel compiled from") and "did you mean 'BLOCK'?" in err
    assert len(err.splitlines()) == 1


def test_each_kernel_is_built_and_each_failure_reported(tmp_path, capsys):
    """--backend=tileir on a file whose middle kernel Tile IR cannot take (a gather within a tile) stopped at that
    kernel; the others are built now, each failure is reported, and the exit status is 1."""
    src = tmp_path / "three.tle"
    soft = ROWS.replace("kernel rows", "kernel soft").replace(
        "load(x, tile=[1, 1024], at=[row, 0])",
        "gather(load(x, tile=[1, 1024], at=[row, 0]), expand_dims(1023 - arange(0, 1024), 0), axis=1)")
    src.write_text(ROWS + soft + ROWS.replace("kernel rows", "kernel rows2"))
    assert main([str(src), "--backend=tileir", "--emit=tileir"]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("cuda_tile.entry") == 2  # rows and rows2
    assert "gather() from a tile has no Tile IR lowering" in captured.err
    assert captured.err.rstrip().endswith("tlec: 1 of 3 kernels failed: soft")


def test_an_output_for_several_kernels_names_each_file_it_writes(tmp_path, capsys):
    src = tmp_path / "two.tle"
    src.write_text(ROWS + ROWS.replace("kernel rows", "kernel rows2"))
    assert main([str(src), "-o", str(tmp_path / "o.cubin")]) == 0
    err = capsys.readouterr().err
    assert f"wrote {tmp_path / 'o.rows.cubin'}" in err and f"wrote {tmp_path / 'o.rows2.cubin'}" in err


def test_verbose_says_a_build_without_sizes_is_generic(rows, tmp_path, capsys):
    assert main([rows, "--backend=triton", "-v", "-o", str(tmp_path / "r.cubin")]) == 0
    assert "a build for no sizes in particular" in capsys.readouterr().err
    assert main([rows, "--backend=triton", "-v", "--sizes", "M=64,N=1024", "-o", str(tmp_path / "r.cubin")]) == 0
    err = capsys.readouterr().err
    assert "a build for no sizes in particular" not in err and "gives no size" not in err
    assert main([rows, "--backend=triton", "-v", "--sizes", "M=64", "-o", str(tmp_path / "r.cubin")]) == 0
    assert ("--sizes gives no size for N, so the build assumes nothing about it (a launch compiles for all its "
            "sizes: its registers and spills may differ)") in capsys.readouterr().err


def test_verbose_says_why_auto_took_tile_ir(rows, tmp_path, capsys):
    assert main([rows, "-v", "-o", str(tmp_path / "r.cubin")]) == 0
    err = capsys.readouterr().err
    assert "on the CUDA Tile IR path: auto's first choice, and no rule sends this kernel to the native path" in err
    assert "--sizes M=...,N=... and --grid X,Y show that launch's binary" in err  # the kernel's own dims


def test_verbose_says_when_emit_chose_the_path_and_what_auto_would_take(rows, tmp_path, capsys):
    """--emit=tileir without --backend said 'auto's first choice' for a kernel that auto sends to the native
    path (a porter's f32 dot)."""
    assert main([rows, "-v", "--emit=ttir", "-o", str(tmp_path / "r.ttir")]) == 0
    err = capsys.readouterr().err
    assert "on the native CUDA path (Triton), as --emit=ttir asks; auto would take the CUDA Tile IR path" in err
    src = tmp_path / "f32dot.tle"
    src.write_text("kernel mm(a: tensor<f32>[M, K], b: tensor<f32>[K, N], c: tensor<f32>[M, N]) {\n"
                   "    store(c, dot(load(a, tile=[32, 32]), load(b, tile=[32, 32])))\n}\n")
    assert main([str(src), "-v", "--emit=tileir", "-o", str(tmp_path / "mm.tileir")]) == 0
    err = capsys.readouterr().err
    assert ("on the CUDA Tile IR path, as --emit=tileir asks; auto would take the native CUDA path (Triton): a dot "
            "of f32 operands at full precision") in err
    assert "auto's first choice" not in err


BLOCK_SPARSE = """kernel bsmm<BM: int = 64, BN: int = 64, BK: int = 32>(a: tensor<f16>[M, K], b: tensor<f16>[K, N],
        mask: tensor<i8>[MB, KB], c: tensor<f16>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        if load(mask, at=[program_id(0), k]) != 0 {
            acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]),
                      acc)
        }
    }
    store(c, cast<f16>(acc), at=[program_id(0), program_id(1)])
}
"""


def test_verbose_says_a_pipelined_loops_loads_under_an_if_run_unstaged(tmp_path, capsys):
    """A porter's block-sparse matmul asked pipeline(stages=3) and tested each K block with an if: Triton's
    pipeliner left the loads unstaged (one stage of shared memory, where the same loop without the if has three),
    and nothing said so."""
    pytest.importorskip("triton")
    from tle.abi import launch_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import compile_kernel
    sizes = dict(M=4096, N=4096, K=4096, MB=64, KB=128)
    shared = {}
    for name, src in (("if", BLOCK_SPARSE), ("dense", BLOCK_SPARSE.replace(
            "if load(mask, at=[program_id(0), k]) != 0 {", "if true {"))):
        program = load_program(src, "bsmm.tle")
        spec = launch_spec(check_kernel(program, "bsmm", {}), sizes, (64, 64, 1), None)
        out = compile_kernel(program, "bsmm", {}, spec, backend="triton", arch="sm_90")
        shared[name] = out.binary.shared_bytes()
    assert shared == {"if": 8192, "dense": 24576}  # the fact the message states: 1 stage against 3
    path = tmp_path / "bsmm.tle"
    path.write_text(BLOCK_SPARSE)
    assert main([str(path), "--backend=triton", "-v", "-o", str(tmp_path / "b.cubin")]) == 0
    err = capsys.readouterr().err
    assert ("the loop at " + str(path) + ":4:5 asks pipeline(stages=...), but its loads at 6:23, 6:70 are under the "
            "if at 5:9, and the native path's pipeliner stages only the loads at the loop's own level") in err
    path.write_text(BLOCK_SPARSE.replace("if load(mask, at=[program_id(0), k]) != 0 {", "if true {"))
    assert main([str(path), "--backend=triton", "-v", "-o", str(tmp_path / "b.cubin")]) == 0
    assert "unstaged" not in capsys.readouterr().err
