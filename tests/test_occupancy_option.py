"""The `occupancy` option: programs per SM for the Tile IR path's occupancy hint, from a launch (`occupancy=N`) or
tlec (`--occupancy N`), in place of the lowering's own choice. It reaches tileiras (fewer registers at a higher
occupancy), keys its own binary, and the native path and the interpreter ignore it."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

import tle
from tle.cli import main
from tle.runtime.kernel import LaunchError

# Two f32 tiles of 4096 carried across a loop: 133 registers on Tile IR without a hint (3 CTAs of 128 threads per
# SM), as the cross-entropy of benchmarks/user_kernels_probe.py.
STREAM = """
kernel stream<BLOCK: int = 4096>(x: tensor<f32>[M, V], out: tensor<f32>[M]) {
    let row = program_id(0)
    var mx = full<f32>[1, BLOCK](-inf)
    var total = zeros<f32>[1, BLOCK]
    for j in range(cdiv(V, BLOCK)) {
        let t = load(x, tile=[1, BLOCK], at=[row, j], pad=-inf)
        let m2 = max(mx, t)
        total = total * exp(mx - m2) + exp(t - m2)
        mx = m2
    }
    let m = max(mx)
    store(out, full<f32>[1](m + log(sum(total * exp(mx - m)))), at=row)
}
"""


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "stream.tle"
    path.write_text(STREAM)
    return str(path)


def registers(cubin: Path) -> int:
    import triton
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    out = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"REG:(\d+)", out).group(1))


def test_tlec_passes_the_hint_to_the_tile_ir_entry(source, capsys):
    assert main([source, "--backend", "tileir", "--emit", "tileir", "--occupancy", "4"]) == 0
    assert "occupancy = 4" in capsys.readouterr().out
    assert main([source, "--backend", "tileir", "--emit", "tileir"]) == 0
    assert "occupancy" not in capsys.readouterr().out  # f32 rows get no hint of the lowering's own


def test_a_higher_occupancy_makes_tileiras_use_fewer_registers(source, tmp_path):
    pytest.importorskip("triton")
    launch = ["--backend", "tileir", "--sizes", "M=1024,V=128256", "--grid", "1024"]
    assert main([source, *launch, "-o", str(tmp_path / "a.cubin")]) == 0
    assert main([source, *launch, "--occupancy", "4", "-o", str(tmp_path / "b.cubin")]) == 0
    assert registers(tmp_path / "a.cubin") > 128 >= registers(tmp_path / "b.cubin")  # 4 x 128 threads fit


def test_tlec_v_says_how_many_programs_fit_and_what_limits_them(source, tmp_path, capsys):
    launch = ["--backend", "tileir", "--sizes", "M=1024,V=128256", "--grid", "1024", "-v"]
    assert main([source, *launch, "-o", str(tmp_path / "a.cubin")]) == 0
    err = capsys.readouterr().err
    assert "tileiras: 133 registers per thread, 128 threads" in err
    assert "3 programs per SM (the limit: registers; --occupancy N asks tileiras to fit N)" in err
    assert main([source, *launch, "--occupancy", "4", "-o", str(tmp_path / "b.cubin")]) == 0
    assert "4 programs per SM (the limit: registers" in capsys.readouterr().err


def test_tlec_v_counts_a_kernel_that_fills_shared_memory_as_one_program(tmp_path, capsys):
    """tileiras gives this swapped split-K nearly all of an SM's shared memory (231648 bytes with tileiras 13.5, plus
    the driver's reserved kilobyte in its cubin section). The H200 ran such a kernel (BM=16, 231704 bytes, before
    its [64, 16] accumulator took the latency hint 4, with which tileiras plans 161976), one program per SM;
    counting the reserved kilobyte twice made tlec -v say 0."""
    path = str(Path(__file__).resolve().parent.parent / "examples" / "matmul_splitk.tle")
    consts = [a for c in ("BM=64", "BN=64", "BK=128", "SPLIT=1", "T=bf16", "SWAP=true") for a in ("-D", c)]
    assert main([path, "-k", "matmul_splitk", "--backend", "tileir", *consts, "--sizes", "M=64,K=4096,N=4096,TILES=64",
                 "-o", str(tmp_path / "a.cubin"), "-v"]) == 0
    err = capsys.readouterr().err
    fits = r"2[0-9]{5} bytes of shared memory, no spills: 1 program per SM \(the limit: shared memory\)"
    assert re.search(fits, err), err


def test_resident_programs():
    from tle.targets.binary import resident_programs
    assert resident_programs(133, 128, 1040) == (3, "registers")      # 136 x 128 = 17408 registers a program
    assert resident_programs(128, 128, 1040) == (4, "registers")
    assert resident_programs(31, 128, 1040) == (16, "threads")       # a tie with registers names threads
    assert resident_programs(209, 256, 164864) == (1, "shared memory")
    assert resident_programs(16, 32, 0) == (32, "CTAs")
    assert resident_programs(32, 128, 100000, "sm_80") == (1, "shared memory")  # 164 KB on sm_80


@pytest.mark.parametrize("bad", ["0", "33", "four"])
def test_tlec_refuses_an_occupancy_outside_1_to_32(source, bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([source, "--occupancy", bad])
    assert exit_.value.code == 2 and "expected programs per SM from 1 to 32" in capsys.readouterr().err


def test_a_launch_checks_the_option_and_the_interpreter_ignores_it():
    k = tle.compile(STREAM).stream
    x = torch.randn(3, 5000)
    out = torch.full((3,), float("nan"))
    k[(3,)](x, out, BLOCK=1024, occupancy=4)
    torch.testing.assert_close(out, torch.logsumexp(x, 1), rtol=1e-5, atol=1e-5)
    for bad in (0, 33, 2.0, "4"):
        with pytest.raises(LaunchError, match="occupancy must be an int from 1 to 32"):
            k[(3,)](x, out, BLOCK=1024, occupancy=bad)


def test_the_option_keys_its_own_binary_and_none_keeps_the_old_key():
    k = tle.compile(STREAM).stream
    from tle.check import check_kernel
    checked = check_kernel(k.program, "stream", {})
    from tle.abi import default_spec
    spec = default_spec(checked)
    plain = k._binary_key(checked, spec, "tileir", "sm_90", 4, 3)
    assert k._binary_key(checked, spec, "tileir", "sm_90", 4, 3, None) == plain
    assert k._binary_key(checked, spec, "tileir", "sm_90", 4, 3, 4) != plain


@pytest.mark.gpu
def test_on_the_gpu_the_hinted_binary_runs_and_is_right():
    k = tle.compile(STREAM).stream
    x = torch.randn(64, 20000, device="cuda")
    for occupancy in (None, 4):
        out = torch.full((64,), float("nan"), device="cuda")
        k[(64,)](x, out, backend="tileir", occupancy=occupancy)
        assert k.last_backend == "tileir"
        torch.testing.assert_close(out, torch.logsumexp(x, 1), rtol=1e-5, atol=1e-4)


# Two f32 tiles of 4096 from bf16 rows, live at once: the lowering's hint for 16-bit rows (8 programs per SM, 64
# registers) makes tileiras spill here, as the softmax backward pass of benchmarks/user_kernels_probe.py.
BACKWARD = """
kernel backward<BLOCK: int = 4096>(y: tensor<bf16>[M, N], dy: tensor<bf16>[M, N], dx: tensor<bf16>[M, N]) {
    let p = cast<f32>(load(y, tile=[1, BLOCK], at=[program_id(0), 0]))
    let g = cast<f32>(load(dy, tile=[1, BLOCK], at=[program_id(0), 0]))
    store(dx, cast<bf16>(p * (g - sum(p * g, axis=1, keepdims=true))), at=[program_id(0), 0])
}
"""


def _backward_binary(occupancy=None):
    from tle.abi import default_spec
    from tle.check import check_kernel
    from tle.compiler import compile_kernel
    program = tle.compile(BACKWARD).backward.program
    spec = default_spec(check_kernel(program, "backward", {}))
    return compile_kernel(program, "backward", {}, spec, backend="tileir", occupancy=occupancy)


def test_a_hint_of_the_lowering_that_makes_tileiras_spill_is_lowered():
    out = _backward_binary()
    assert "occupancy = 8" not in out.stages["tileir"] and "occupancy = 4" in out.stages["tileir"]
    extra = out.binary.extra
    assert extra["stack_bytes"] == 0
    first, spilled, kept = extra["spilled_under"]
    assert (first, kept) == (8, 4) and spilled > 0


def test_no_retry_after_a_tileiras_run_past_the_bound(monkeypatch):
    """A kernel tileiras took longer than TILEIRAS_RETRY_S over is kept as compiled: each retry would cost as much
    again (a 32768-wide sort: about 7 minutes a run)."""
    import tle.compiler as compiler
    monkeypatch.setattr(compiler, "TILEIRAS_RETRY_S", 0.0)
    out = _backward_binary()
    assert "occupancy = 8" in out.stages["tileir"] and out.binary.extra["stack_bytes"] > 0
    assert "spilled_under" not in out.binary.extra


def test_a_hint_the_caller_gives_is_kept_even_when_it_spills():
    extra = _backward_binary(occupancy=8).binary.extra
    assert extra["stack_bytes"] > 0 and "spilled_under" not in extra


def test_tlec_v_says_the_hint_was_lowered(tmp_path, capsys):
    path = tmp_path / "backward.tle"
    path.write_text(BACKWARD)
    assert main([str(path), "--backend", "tileir", "-v", "-o", str(tmp_path / "b.cubin")]) == 0
    err = capsys.readouterr().err
    assert "no spills" in err
    assert "spilled" in err and "under the lowering's occupancy hint of 8 programs per SM" in err
    assert "compiled with a hint of 4" in err


def test_next_hint_halves_down_to_two_then_drops_the_hint():
    from tle.compiler import _next_hint
    assert [_next_hint(h, False) for h in (8, 4, 2, 1)] == [4, 2, None, None]
    assert _next_hint(None, False) == 2   # tileiras spilled on its own: try 2 programs per SM
    assert _next_hint(None, True) is None  # a kernel with a dot keeps tileiras' choice


# A LayerNorm backward pass over bf16 rows of 4096, a loop over rows carrying two f32 tiles: without a hint
# tileiras gives it 256 threads of 255 registers and spills (benchmarks/user_kernels_probe.py's layernorm_bwd).
ROWS_BACKWARD = """
kernel rows_backward<ROWS: int = 16, BLOCK: int = 4096>(x: tensor<bf16>[M, N], dy: tensor<bf16>[M, N],
        w: tensor<bf16>[N], mean: tensor<f32>[M], rstd: tensor<f32>[M], dx: tensor<bf16>[M, N],
        dw_part: tensor<f32>[G, N], db_part: tensor<f32>[G, N]) {
    let p = program_id(0)
    let wt = cast<f32>(reshape(load(w, tile=[BLOCK]), [1, BLOCK]))
    var dw = zeros<f32>[1, BLOCK]
    var db = zeros<f32>[1, BLOCK]
    for row in range(p * ROWS, min((p + 1) * ROWS, M)) {
        let g = cast<f32>(load(dy, tile=[1, BLOCK], at=[row, 0]))
        let rs = reshape(gather(rstd, row), [1, 1])
        let xhat = (cast<f32>(load(x, tile=[1, BLOCK], at=[row, 0])) - reshape(gather(mean, row), [1, 1])) * rs
        let wdy = wt * g
        let c1 = sum(xhat * wdy, axis=1, keepdims=true) / N
        let c2 = sum(wdy, axis=1, keepdims=true) / N
        store(dx, cast<bf16>((wdy - (xhat * c1 + c2)) * rs), at=[row, 0])
        dw += g * xhat
        db += g
    }
    store(dw_part, dw, at=[p, 0])
    store(db_part, db, at=[p, 0])
}
"""


def test_a_kernel_without_a_dot_that_spills_without_a_hint_gets_two_programs_per_sm(tmp_path, capsys):
    path = tmp_path / "rows_backward.tle"
    path.write_text(ROWS_BACKWARD)
    launch = ["--backend", "tileir", "--sizes", "M=8192,N=4096,G=512", "--grid", "512", "-v"]
    assert main([str(path), *launch, "-o", str(tmp_path / "b.cubin")]) == 0
    err = capsys.readouterr().err
    assert "128 threads" in err and "no spills" in err
    assert "spilled" in err and "without a hint, so the cubin was compiled with a hint of 2" in err
    assert main([str(path), *launch, "--occupancy", "1", "-o", str(tmp_path / "c.cubin")]) == 0
    assert "bytes of stack (spills)" in capsys.readouterr().err  # the caller's hint stays, spills and all


def test_a_spill_of_a_few_bytes_keeps_the_lowerings_hint():
    """Causal attention with 64x64 tiles, compiled as a 32 x 4096 x 64 launch: tileiras spilled 8 bytes per thread
    under the hint of 4 programs per SM, and that ran 8% faster than the retry's 2 without spills (H200)."""
    import os
    from tle.abi import launch_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import SPILL_BYTES_KEPT, compile_kernel
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "attention.tle")
    program = load_program(open(path).read(), path)
    consts = {"CAUSAL": True, "D": 64}
    spec = launch_spec(check_kernel(program, "attention", consts), {"B": 32, "S": 4096, "L": 4096}, (64, 32, 1))
    out = compile_kernel(program, "attention", consts, spec, backend="tileir")
    assert "occupancy = 4" in out.stages["tileir"]
    assert out.binary.extra["stack_bytes"] <= SPILL_BYTES_KEPT and "spilled_under" not in out.binary.extra


def _cumsum_tileir(n: int, dtype: str):
    import os
    from tle.abi import launch_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import compile_kernel
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "cumsum.tle")
    program = load_program(open(path).read(), path)
    consts = {"BLOCK": 1 << (n - 1).bit_length(), "T": dtype}
    spec = launch_spec(check_kernel(program, "cumsum", consts), {"M": 4096, "N": n}, (4096, 1, 1))
    return compile_kernel(program, "cumsum", consts, spec, backend="tileir")


@pytest.mark.parametrize("n,dtype", [(16384, "bf16"), (12800, "f32")])
def test_a_kernel_tileiras_fits_once_per_sm_is_compiled_again_for_two(n, dtype):
    """cumsum over rows of 12800-16384 in one tile: tileiras gives 8 worker warps over 128 registers, one program
    per SM; with the hint of 2 it fits 128 (the f32 row spills 8 bytes) and ran 1.2-1.6x faster on the H200."""
    from tle.compiler import SPILL_BYTES_KEPT
    from tle.targets.binary import resident_programs
    out = _cumsum_tileir(n, dtype)
    extra = out.binary.extra
    assert extra["one_program"] > 128 and extra["registers"] <= 128
    assert extra["stack_bytes"] <= SPILL_BYTES_KEPT
    assert resident_programs(extra["registers"], out.binary.num_threads, 0)[0] == 2
    assert "occupancy = 2" in out.stages["tileir"]  # the IR the cubin was built from


def test_a_retry_that_spills_keeps_one_program_per_sm():
    """At 32000 f32 the hint of 2 spills hundreds of bytes (485.2 against 260.5 us on the H200): dropped."""
    out = _cumsum_tileir(32000, "f32")
    extra = out.binary.extra
    assert "one_program" not in extra and extra["registers"] > 128 and "occupancy" not in out.stages["tileir"]


def test_tlec_v_says_one_program_per_sm_was_retried(tmp_path, capsys):
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "cumsum.tle")
    assert main([path, "-D", "BLOCK=16384", "-D", "T=bf16", "--backend", "tileir", "--sizes", "M=4096,N=16384",
                 "--grid", "4096", "-v", "-o", str(tmp_path / "c.cubin")]) == 0
    err = capsys.readouterr().err
    assert "2 programs per SM" in err and "one program per SM (its block is 8 worker warps" in err
    assert "so the cubin was compiled with a hint of 2" in err


def test_tlec_v_says_why_the_lowering_chose_its_hint(tmp_path, capsys):
    """The lowering's own hint comes with its reason (lowering/tle_to_tileir.py _occupancy), recorded on the entry
    and in the Binary; a hint the caller gave, and a kernel with none, print no such line."""
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "matmul.tle")
    launch = [path, "-D", "BM=32", "-D", "BN=64", "--backend", "tileir", "--sizes", "M=4096,N=4096,K=1024",
              "--grid", "128,64", "--sms", "132", "-v", "-o", str(tmp_path / "m.cubin")]
    assert main(launch) == 0
    err = capsys.readouterr().err
    assert "occupancy hint 2, the lowering's choice: one dot on a 32x64 accumulator, launched with more programs " \
           "than SMs" in err and "--occupancy N to choose" in err
    assert main(launch + ["--occupancy", "3"]) == 0
    assert "the lowering's choice" not in capsys.readouterr().err
    assert main([path, "--backend", "tileir", "-v", "-o", str(tmp_path / "m3.cubin")]) == 0  # no grid: no fact
    assert "the lowering's choice" not in capsys.readouterr().err


def test_tlec_v_says_why_the_lowering_chose_a_latency_hint(tmp_path, capsys):
    """The view loads' latency hint comes with its reason too (lowering/tle_to_tileir.py _load_latency): 4 for the
    swapped decode kernel's thin [64, 16] accumulator, 6 for a 128x256 one, no line for a 128x128 one."""
    import os
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    swapped = [os.path.join(examples, "matmul_splitk.tle"), "-k", "matmul_splitk", "-D", "BM=16", "-D", "BN=64",
               "-D", "BK=256", "-D", "SPLIT=1", "-D", "SWAP=true"]
    for args, want in ((swapped, "latency hint 4 on every view load, the lowering's choice: one dot on a 64x16 "
                                 "accumulator (at most 64x32)"),
                       ([os.path.join(examples, "matmul.tle"), "-D", "BN=256"],
                        "latency hint 6 on every view load, the lowering's choice: a dot on a 128x256 accumulator"),
                       ([os.path.join(examples, "matmul.tle")], None)):
        assert main(args + ["--backend", "tileir", "-v", "-o", str(tmp_path / "k.cubin")]) == 0
        err = capsys.readouterr().err
        assert (want in err) if want else "latency hint" not in err, err


def test_a_dot_kernel_that_still_spills_on_4_worker_warps_is_compiled_again_on_8(tmp_path, capsys):
    """Attention's backward dk/dv at BN = 128, D = 64: two carried 128x64 tiles (within the lowering's count for
    4 worker warps) beside two 128x64 products each step. On 4, 255 registers and 144 bytes of spills after the
    occupancy retries (2 -> none); on 8, 168 registers and none (2.16x faster on the H200, benchmarks/RESULTS.md
    "Two accumulators in one loop")."""
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "attention_bwd.tle")
    launch = [path, "--kernel", "attention_bwd_dkdv", "-D", "BN=128", "-D", "D=64", "--backend", "tileir",
              "--sizes", "B=16,S=4096,L=4096", "-v", "-o", str(tmp_path / "a.cubin")]
    assert main(launch) == 0
    err = capsys.readouterr().err
    assert re.search(r"tileiras spilled \d+ bytes per thread on its 4 worker warps, so the cubin was compiled on 8",
                     err)
    assert "384 threads" in err and "no spills" in err
    # a hint the caller gives is kept: the occupancy retries and this one run only for the lowering's own choices
    assert main(launch + ["--occupancy", "2"]) == 0
    assert "worker warps" not in capsys.readouterr().err


GREEDY = Path(__file__).parent / "data" / "greedy.tle"


def _greedy_tileir(rows: int, dtype: str = "bf16"):
    from tle.abi import launch_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import compile_kernel
    program = load_program(GREEDY.read_text(), str(GREEDY))
    consts = {"T": dtype}
    spec = launch_spec(check_kernel(program, "greedy", consts), {"M": rows, "V": 128256}, (rows, 1, 1), sms=132)
    return compile_kernel(program, "greedy", consts, spec, backend="tileir")


def test_few_warps_per_sm_on_many_waves_are_compiled_again_for_twelve():
    """2 programs of 4 warps per SM on 1024 rows (more than two waves of 132 SMs): compiled again with a hint of
    3, which tileiras meets at 125 registers, 4 programs; 1.29-1.34x faster on the H200 (benchmarks/RESULTS.md
    "Greedy decoding at 12 warps per SM")."""
    from tle.compiler import SPILL_BYTES_KEPT
    from tle.targets.binary import resident_programs
    out = _greedy_tileir(1024)
    extra = out.binary.extra
    registers, programs, warps, hint = extra["few_warps"]
    assert (programs, warps, hint) == (2, 4, 3) and registers > 170
    assert extra["stack_bytes"] <= SPILL_BYTES_KEPT
    assert resident_programs(extra["registers"], out.binary.num_threads, 0)[0] >= 3
    assert "occupancy = 3" in out.stages["tileir"]  # the IR the cubin was built from


@pytest.mark.parametrize("rows", [64, 264])
def test_few_warps_per_sm_on_at_most_two_waves_keep_their_code(rows):
    """64 rows (a serving step's batch) lost 7-16% with the hint on the H200: every program has a slot at 2 per SM,
    so the hint only costs registers. 264 = 2 x 132 is the bound."""
    from tle.targets.binary import resident_programs
    out = _greedy_tileir(rows)
    extra = out.binary.extra
    assert "few_warps" not in extra and "occupancy" not in out.stages["tileir"]
    assert resident_programs(extra["registers"], out.binary.num_threads, 0)[0] == 2


def test_twelve_warps_per_sm_need_no_retry():
    """In f32 the same argmax gets 124 registers, 4 programs of 4 warps per SM: no retry."""
    out = _greedy_tileir(1024, "f32")
    assert "few_warps" not in out.binary.extra and "occupancy" not in out.stages["tileir"]


def test_tlec_v_says_few_warps_per_sm_were_retried(tmp_path, capsys):
    launch = [str(GREEDY), "--backend", "tileir", "--sizes", "M=1024,V=128256", "--sms", "132", "-v",
              "-o", str(tmp_path / "g.cubin")]
    assert main(launch + ["--grid", "1024"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"without a hint tileiras gave \d+ registers per thread, 2 programs of 4 warps per SM, so on "
                     r"this launch of more than two waves the cubin was compiled with a hint of 3", err), err
    assert main(launch + ["--grid", "64"]) == 0
    assert "warps per SM, so on" not in capsys.readouterr().err


def test_a_small_spill_under_the_lowerings_hint_says_what_capped_the_registers(tmp_path, capsys):
    """The causal attention above through tlec -v: its spill warning names the hint's register cap and why a spill
    that small keeps it (a porter's BatchNorm was told only that smaller tiles need fewer registers)."""
    import os
    from tle.compiler import SPILL_BYTES_KEPT
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "attention.tle")
    assert main([path, "-D", "CAUSAL=true", "-D", "D=64", "--backend", "tileir", "--sizes", "B=32,S=4096,L=4096",
                 "--grid", "64,32", "-v", "-o", str(tmp_path / "a.cubin")]) == 0
    err = capsys.readouterr().err
    assert "warning: tileiras spilled 8 bytes per thread to local memory" in err
    assert (f"note: the lowering's occupancy hint of 4 programs per SM caps a thread at 64 registers; a spill of "
            f"at most {SPILL_BYTES_KEPT} bytes keeps it") in err
