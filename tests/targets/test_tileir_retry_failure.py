"""A Tile IR retry that tileiras fails on (tle/compiler.py _compiled_with_hint) is dropped, not the build: the binary
it was to improve is kept, and TLE_DEBUG says which retry failed. A first compile that tileiras fails on without
naming a line (targets/tileir.py TileirasCrash) stays an error, except under backend="auto", which then compiles the
kernel on the native path and says why, as for its other fallbacks.

The first tests stand a fake in for compile_tileir (each call: a binary, or a crash), so they run in a second; the
last ones run tileiras 13.5.37 on kernels it fails on: a gated linear attention (a user's port) on 8 worker warps,
and a reduced form of it on its first compile.
"""
from __future__ import annotations

import textwrap

import pytest

from tle.abi import launch_spec
from tle.check import check_kernel, load_program
from tle import compiler
from tle.compiler import compile_kernel
from tle.diagnostics import TleError
from tle.dialects import cuda_tile as ct
from tle.dialects.mlir import ir
from tle.lowering import tileir_legality
from tle.targets import tileir
from tle.targets.binary import Binary
from tileir_available import has_tileiras


needs_tileiras = pytest.mark.skipif(not has_tileiras(), reason="tileiras or the cuda-tile bytecode writer missing")

# A dot kernel (one 128x128 accumulator: no worker-warp hint of the lowering's) whose fake first compile spills.
MATMUL = """
kernel mm<BM: int = 128, BN: int = 128, BK: int = 64>(a: tensor<bf16>[M, K], b: tensor<bf16>[K, N],
                                                      c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]), acc)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""

# bf16 rows without a dot: the lowering hints 8 programs per SM (tests/test_occupancy_option.py, BACKWARD).
ROWS = """
kernel backward<BLOCK: int = 4096>(y: tensor<bf16>[M, N], dy: tensor<bf16>[M, N], dx: tensor<bf16>[M, N]) {
    let p = cast<f32>(load(y, tile=[1, BLOCK], at=[program_id(0), 0]))
    let g = cast<f32>(load(dy, tile=[1, BLOCK], at=[program_id(0), 0]))
    store(dx, cast<bf16>(p * (g - sum(p * g, axis=1, keepdims=true))), at=[program_id(0), 0])
}
"""


def _crash() -> tileir.TileirasCrash:
    return tileir.TileirasCrash(None, "tileiras: failed to compile Tile IR program",
                                ["tileiras 13.5.37 --gpu-name=sm_90 --opt-level=3 exited with status 5"], 5, "13.5.37")


class FakeTileiras:
    """compile_tileir, answering its calls in order with `answers`: a spill in bytes (a binary) or "crash". Records
    each call's entry hints (occupancy, num_worker_warps) in `hints`."""

    def __init__(self, *answers):
        self.answers, self.hints, self.binaries = list(answers), [], []

    def __call__(self, module, arch="sm_90", **_):
        entry = ct.entries(module)[0]
        self.hints.append(tuple(ir.IntegerAttr(entry.attributes[a]).value if a in entry.attributes else None
                                for a in ("occupancy", "num_worker_warps")))
        answer = self.answers.pop(0)
        if answer == "crash":
            raise _crash()
        binary = Binary("tileir", arch, ir.StringAttr(entry.attributes["sym_name"]).value, b"\x7fELF", [], 384,
                        extra={"registers": 168, "stack_bytes": answer, "static_shared_mem": 0})
        self.binaries.append(binary)
        return binary


@pytest.fixture
def fake(monkeypatch):
    """Installs a FakeTileiras; tileiras itself need not be installed (route()'s check for it is skipped)."""
    monkeypatch.setattr(tileir_legality, "_tool_blockers", lambda arch, where: [])

    def install(*answers):
        tool = FakeTileiras(*answers)
        monkeypatch.setattr(tileir, "compile_tileir", tool)
        return tool
    return install


def _compile(source: str, name: str, sizes: dict, backend: str = "tileir", **options):
    program = load_program(textwrap.dedent(source), f"{name}.tle")
    spec = launch_spec(check_kernel(program, name, {}), sizes, None)
    return compile_kernel(program, name, {}, spec, backend=backend, **options)


def test_a_failed_retry_on_8_worker_warps_keeps_the_first_binary(fake, monkeypatch, capsys):
    monkeypatch.setenv("TLE_DEBUG", "1")
    tool = fake(152, "crash")
    out = _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096})
    assert tool.hints == [(None, None), (None, 8)]  # no occupancy retry for a dot without a hint; then 8 warps
    assert out.binary is tool.binaries[0] and out.backend == "tileir"
    assert "num_worker_warps" not in out.stages["tileir"]  # the IR of the binary kept
    why = "tileiras: failed to compile Tile IR program, exit status 5"
    assert out.binary.extra["retry_failed"] == [("on 8 worker warps", why)]
    assert "spilled_on_4_warps" not in out.binary.extra
    err = capsys.readouterr().err
    assert (f"kernel 'mm': tileiras failed on the retry on 8 worker warps ({why}); keeping the binary compiled "
            "before it") in err


def test_a_failed_hint_retry_is_skipped_and_the_next_hint_still_tried(fake):
    tool = fake(56, "crash", 0)
    out = _compile(ROWS, "backward", {"M": 4096, "N": 4096})
    assert [h for h, _ in tool.hints] == [8, 4, 2]
    assert out.binary is tool.binaries[1] and "occupancy = 2" in out.stages["tileir"]
    assert out.binary.extra["spilled_under"] == (8, 56, 2)
    # the failure stays on record once a later retry's binary replaces the one it was to improve
    assert out.binary.extra["retry_failed"] == [("with an occupancy hint of 4",
                                                 "tileiras: failed to compile Tile IR program, exit status 5")]


def test_every_hint_retry_failing_keeps_the_first_binary(fake):
    tool = fake(56, "crash", "crash", "crash")
    out = _compile(ROWS, "backward", {"M": 4096, "N": 4096})
    assert [h for h, _ in tool.hints] == [8, 4, 2, None]
    assert out.binary is tool.binaries[0] and "occupancy = 8" in out.stages["tileir"]
    assert [what for what, _ in out.binary.extra["retry_failed"]] == [
        "with an occupancy hint of 4", "with an occupancy hint of 2", "with no occupancy hint"]


def test_a_failed_retry_of_the_few_warps_rules_keeps_the_binary(fake):
    """_past_one_program and _to_twelve_warps retry through _kept_unless_it_spills."""
    from tle.compiler import _kept_unless_it_spills
    tool = fake("crash")
    program = load_program(textwrap.dedent(ROWS), "backward.tle")
    module = compile_kernel(program, "backward", {}, backend="tileir", stop="tle").module
    first = Binary("tileir", "sm_90", "backward", b"", [], 256, extra={"registers": 200, "stack_bytes": 0})
    assert _kept_unless_it_spills(module, "the first IR", first, "sm_90", 2, "one_program", 200) == (
        "the first IR", first)
    assert tool.hints == [(2, None)] and "one_program" not in first.extra
    assert [what for what, _ in first.extra["retry_failed"]] == ["with an occupancy hint of 2"]


def test_a_first_compile_tileiras_fails_on_stays_an_error_on_the_tile_ir_backend(fake):
    fake("crash")
    with pytest.raises(tileir.TileirasCrash) as err:
        _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096})
    assert str(err.value.span).startswith("mm.tle:2:")  # at the kernel, tileiras having named no line


def test_auto_takes_the_native_path_when_the_first_compile_crashes(fake, monkeypatch, capsys):
    pytest.importorskip("triton")
    monkeypatch.setenv("TLE_DEBUG", "1")
    fake("crash")
    out = _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096}, backend="auto")
    assert out.backend == "triton" and out.binary.backend == "triton" and "ptx" in out.stages
    assert "tileir" not in out.stages and "tilebc" not in out.stages
    assert out.fallback == ('tileiras 13.5.37 failed on the kernel\'s Tile IR ("failed to compile Tile IR program", '
                            'exit status 5) and named no line of it')
    assert f"[tle] kernel 'mm' runs on the native CUDA path (Triton): {out.fallback}" in capsys.readouterr().err


def test_auto_waits_120_s_for_tileiras_then_takes_the_native_path(monkeypatch, capsys):
    """A kernel tileiras never finishes (a porter's persistent grouped GEMM): auto gives it AUTO_TILEIRAS_TIMEOUT_S
    and compiles natively; --backend tileir waits targets/tileir.py's limit and says so at the kernel."""
    pytest.importorskip("triton")
    monkeypatch.setattr(tileir_legality, "_tool_blockers", lambda arch, where: [])
    limits = []

    def slow(module, arch="sm_90", timeout_s=tileir.DEFAULT_TIMEOUT_S, **_):
        limits.append(timeout_s)
        raise tileir.TileirasTimeout(None, f"tileiras did not finish in {timeout_s:.0f} s compiling kernel 'mm'",
                                     [], timeout_s, "13.5.37")
    monkeypatch.setattr(tileir, "compile_tileir", slow)
    out = _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096}, backend="auto")
    assert limits == [compiler.AUTO_TILEIRAS_TIMEOUT_S] == [120.0]
    assert out.backend == "triton" and out.binary.backend == "triton"
    assert out.fallback == ("tileiras 13.5.37 did not finish the kernel's Tile IR in 120 s (auto's limit; "
                            "--backend tileir waits up to 600)")
    with pytest.raises(tileir.TileirasTimeout, match="did not finish in 600 s") as err:
        _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096})
    assert limits[-1] == 600.0 and str(err.value.span).startswith("mm.tle:2:")


def test_a_tileiras_run_past_its_limit_is_a_timeout_at_the_kernel(monkeypatch, tmp_path):
    """compile_tileir itself: subprocess's TimeoutExpired becomes a TileirasTimeout located at the kernel."""
    import subprocess

    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))
    monkeypatch.setattr(tileir, "find_tileiras", lambda: str(tmp_path / "tileiras"))
    monkeypatch.setattr(tileir, "_version_of", lambda tool: "13.5.37")
    monkeypatch.setattr(subprocess, "run", hangs)
    program = load_program(textwrap.dedent(MATMUL), "mm.tle")
    module = compile_kernel(program, "mm", {}, backend="tileir", stop="tileir")
    from tle.lowering.tle_to_tileir import tle_to_tileir
    tileir_module = tle_to_tileir(module.module)
    with pytest.raises(tileir.TileirasTimeout) as err:
        tileir.compile_tileir(tileir_module, "sm_90", timeout_s=7)
    assert err.value.message == "tileiras did not finish in 7 s compiling kernel 'mm'" and err.value.status == 7
    assert "--backend triton compiles on the native path" in err.value.notes[0].message


def test_auto_keeps_an_error_tileiras_places_on_a_line(fake, monkeypatch):
    def located(module, arch="sm_90", **_):
        raise TleError(None, "tileiras: 'cuda_tile.addf' op failed to verify")
    fake()  # route() without tileiras
    monkeypatch.setattr(tileir, "compile_tileir", located)
    with pytest.raises(TleError, match="failed to verify"):
        _compile(MATMUL, "mm", {"M": 4096, "N": 4096, "K": 4096}, backend="auto")


# The user's kernel (a gated linear attention, K = 256): tileiras 13.5.37 compiles it with 152 bytes of spills under
# the lowering's hint of 2 programs per SM and without one, then exits with status 5 and "failed to compile Tile IR
# program" on 8 worker warps, whatever the hint.
GLA = """
kernel lin_attn<BT: int = 64, BK: int = 256, BV: int = 64>(q: tensor<bf16>[L, K], k: tensor<bf16>[L, K],
        v: tensor<bf16>[L, V], g: tensor<f32>[L], o: tensor<bf16>[L, V]) {
    let causal = expand_dims(arange(BT), 1) >= expand_dims(arange(BT), 0)
    var S = zeros<f32>[BK, BV]
    for c in range(cdiv(L, BT)) {
        let tq = load(q, tile=[BT, BK], at=[c, 0])
        let tk = load(k, tile=[BT, BK], at=[c, 0])
        let tv = load(v, tile=[BT, BV], at=[c, 0])
        let gc = expand_dims(cumsum(load(g, tile=BT, at=c), axis=0), 1)
        let glast = sum(load(g, tile=BT, at=c))
        let A = where(causal, dot(tq, transpose(tk)) * exp(gc - transpose(gc)), 0.0)
        let qg = cast<bf16>(cast<f32>(tq) * exp(gc))
        store(o, cast<bf16>(dot(qg, cast<bf16>(S)) + dot(cast<bf16>(A), tv)), at=[c, 0])
        let kd = cast<bf16>(cast<f32>(tk) * exp(glast - gc))
        S = S * exp(glast) + dot(transpose(kd), tv)
    }
}
"""


@needs_tileiras
def test_the_users_kernel_builds_with_its_first_binary(monkeypatch, capsys):
    monkeypatch.setenv("TLE_DEBUG", "1")
    # the retries are what this tests: on a loaded machine the first compile can pass the 30 s after which
    # tle/compiler.py tries none (a 2-CPU machine under pytest -n 8 did)
    monkeypatch.setattr(compiler, "TILEIRAS_RETRY_S", float("inf"))
    out = _compile(GLA, "lin_attn", {"L": 4096, "K": 256, "V": 64}, backend="auto")
    assert out.backend == "tileir" and out.fallback is None
    extra = out.binary.extra
    assert [what for what, _ in extra["retry_failed"]] == ["on 8 worker warps"]
    assert "exit status 5" in extra["retry_failed"][0][1]
    assert extra["stack_bytes"] > 0 and "spilled_on_4_warps" not in extra
    assert "num_worker_warps" not in out.stages["tileir"]
    assert "tileiras failed on the retry on 8 worker warps" in capsys.readouterr().err


# The same kernel less its intra-chunk term (A): tileiras 13.5.37 fails on its first compile, on 4 worker warps.
GLA_INTER = (GLA.replace("    let causal = expand_dims(arange(BT), 1) >= expand_dims(arange(BT), 0)\n", "")
             .replace("        let A = where(causal, dot(tq, transpose(tk)) * exp(gc - transpose(gc)), 0.0)\n", "")
             .replace(" + dot(cast<bf16>(A), tv)", ""))
assert "causal" not in GLA_INTER and "A, tv" not in GLA_INTER  # each replacement applied


@needs_tileiras
def test_auto_compiles_on_the_native_path_what_tileiras_fails_on_first():
    pytest.importorskip("triton")
    out = _compile(GLA_INTER, "lin_attn", {"L": 4096, "K": 256, "V": 64}, backend="auto")
    assert out.backend == "triton" and "exit status 5" in out.fallback and out.binary.cubin


def test_tlec_exits_3_when_tileiras_fails_without_naming_a_line(fake, tmp_path, capsys):
    from tle.cli import main
    fake("crash")
    src = tmp_path / "mm.tle"
    src.write_text(textwrap.dedent(MATMUL))
    rc = main([str(src), "--emit=cubin", "--backend=tileir", "--sizes", "M=4096,N=4096,K=4096",
               "-o", str(tmp_path / "mm.cubin")])
    err = capsys.readouterr().err
    assert rc == 3 and "error: tileiras: failed to compile Tile IR program" in err
    assert "the backend named no line of kernel 'mm'" in err


def test_tlec_v_says_which_retry_tileiras_failed_on(fake, tmp_path, capsys):
    from tle.cli import main
    fake(152, "crash")
    src = tmp_path / "mm.tle"
    src.write_text(textwrap.dedent(MATMUL))
    rc = main([str(src), "--emit=cubin", "--backend=tileir", "--sizes", "M=4096,N=4096,K=4096", "-v",
               "-o", str(tmp_path / "mm.cubin")])
    assert rc == 0
    assert ("tlec: kernel 'mm': tileiras failed on the retry on 8 worker warps (tileiras: failed to compile Tile IR "
            "program, exit status 5), so that retry was dropped and the binary compiled before it kept"
            ) in capsys.readouterr().err


def test_tlec_v_warns_of_tileiras_spills_and_an_occupancy_it_did_not_meet(fake, tmp_path, capsys):
    from tle.cli import main
    fake(152, 152)  # the first compile and the retry on 8 worker warps both spill
    src = tmp_path / "mm.tle"
    src.write_text(textwrap.dedent(MATMUL))
    assert main([str(src), "--emit=cubin", "--backend=tileir", "--sizes", "M=4096,N=4096,K=4096", "-v",
                 "--occupancy", "2", "-o", str(tmp_path / "mm.cubin")]) == 0
    err = capsys.readouterr().err
    assert "--occupancy 2 is a hint tileiras did not meet: 1 program per SM (the limit: registers)" in err
    assert "warning: tileiras spilled 152 bytes per thread to local memory" in err


def test_tlec_v_on_a_path_auto_chose_says_how_to_see_and_time_the_other(fake, tmp_path, capsys):
    """A porter's paged attention spilled 520 bytes on the Tile IR path auto took, and none on the native one: the
    spill warning says that auto chose without compiling the other path, and how to compare them."""
    from tle.cli import main
    src = tmp_path / "mm.tle"
    src.write_text(textwrap.dedent(MATMUL))
    advice = "auto took the Tile IR path by its rules, without compiling the native one"
    for backend, told in (("tileir", False), ("auto", True)):
        fake(152, 152)
        assert main([str(src), "--emit=cubin", f"--backend={backend}", "--sizes", "M=4096,N=4096,K=4096", "-v",
                     "-o", str(tmp_path / "mm.cubin")]) == 0
        err = capsys.readouterr().err
        assert "warning: tileiras spilled 152 bytes per thread to local memory" in err, backend
        assert (advice in err) == told, backend
        if told:
            assert "tune(backend=[triton, tileir]) times both" in err
