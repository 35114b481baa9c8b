"""The Tile IR target on CPU: cuda_tile modules built with dialects/cuda_tile.py, encoded to bytecode
(targets/tileir.py), checked with tileirdisasm, and compiled by tileiras to cubins for sm_90 and sm_100.

The kernel builders here (vector_add, matmul, softmax) are also launched on the GPU by tests/gpu/test_tileir_raw.py.
Tests that need tileiras are skipped, with the reason, when it is not installed.
"""
from __future__ import annotations

import re

import pytest

from tle.diagnostics import TleError, register_source, render
from tle.dialects import cuda_tile as ct
from tle.dialects.mlir import ir, nested_ops, new_context
from tle.targets import tileir
from tle.targets.binary import _elf_sections, kernel_attributes


def _has(find) -> str | None:
    try:
        return find()
    except FileNotFoundError:
        return None


def _cuda_tile_pinned() -> bool:
    try:
        tileir._bc()
        return True
    except ImportError:
        return False


needs_encoder = pytest.mark.skipif(not _cuda_tile_pinned(),
                                   reason=f"cuda-tile=={tileir.CUDA_TILE_VERSION} (the bytecode writer) not installed")
needs_tileiras = pytest.mark.skipif(_has(tileir.find_tileiras) is None,
                                    reason="tileiras not installed (pip install nvidia-cuda-tileiras)")
needs_disasm = pytest.mark.skipif(_has(tileir.find_tileirdisasm) is None, reason="tileirdisasm not installed")

ARCHS = ["sm_90", "sm_100"]


def loc(file: str, line: int, col: int):
    return ir.Location.file(file, line, col)


# --------------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------------

VADD_TILE = 1024


def vector_add(file: str = "vadd.tle") -> ir.Module:
    """out[i] = x[i] + y[i] for i < n, one 1024-element tile per tile block; entry vadd(x, y, out, n)."""
    with loc(file, 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            p, i32 = ct.tile_type((), ct.ptr("f32")), ct.tile_type((), "i32")
            _, body = ct.entry("vadd", [p, p, p, i32])
        with ir.InsertionPoint(body):
            x, y, out, n = body.arguments
            with loc(file, 2, 5):
                n = ct.assume_bounded(n, 0, None)
                views = []
                for arg in (x, y, out):
                    base = ct.assume_div_by(arg, 16)  # torch allocations are 256-byte aligned
                    tensor = ct.make_tensor_view(base, [n], [1])
                    views.append(ct.make_partition_view(tensor, [VADD_TILE]))
                bid, _, _ = ct.get_tile_block_id()
                token = ct.make_token()
            with loc(file, 3, 9):
                a, ta = ct.load_view_tko(views[0], [bid], token)
                b, tb = ct.load_view_tko(views[1], [bid], token)
            with loc(file, 4, 9):
                s = ct.addf(a, b)
            with loc(file, 5, 5):
                ct.store_view_tko(s, views[2], [bid], ct.join_tokens([ta, tb]))
                ct.return_()
    return module


def matmul(tm: int = 128, tn: int = 128, tk: int = 64, file: str = "matmul.tle") -> ir.Module:
    """c = a @ b for row-major f16 a [M, K], b [K, N], c [M, N], f32 accumulation; grid (M/tm, N/tn);
    entry matmul(a, b, c, M, N, K). K and N are asserted divisible by 8 (16-byte rows, so TMA can be used)."""
    with loc(file, 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            p, i32 = ct.tile_type((), ct.ptr("f16")), ct.tile_type((), "i32")
            _, body = ct.entry("matmul", [p, p, p, i32, i32, i32])
        with ir.InsertionPoint(body):
            a, b, c, m, n, k = body.arguments
            with loc(file, 2, 5):
                m, n, k = (ct.assume_bounded(v, 0, None) for v in (m, n, k))
                n, k = ct.assume_div_by(n, 8), ct.assume_div_by(k, 8)
                a, b, c = (ct.assume_div_by(v, 16) for v in (a, b, c))
                pa = ct.make_partition_view(ct.make_tensor_view(a, [m, k], [k, 1]), [tm, tk], padding="zero")
                pb = ct.make_partition_view(ct.make_tensor_view(b, [k, n], [n, 1]), [tk, tn], padding="zero")
                pc = ct.make_partition_view(ct.make_tensor_view(c, [m, n], [n, 1]), [tm, tn])
                bx, by, _ = ct.get_tile_block_id()
                k_tiles = ct.get_index_space_shape(pa)[1]
                i32_t = ct.tile_type((), "i32")
                zero, one = ct.constant(0, i32_t), ct.constant(1, i32_t)
                acc0 = ct.constant(0.0, ct.tile_type((tm, tn), "f32"))
                token = ct.make_token()

            def step(kk, acc):
                with loc(file, 3, 9):
                    ta, _ = ct.load_view_tko(pa, [bx, kk], token)
                    tb, _ = ct.load_view_tko(pb, [kk, by], token)
                with loc(file, 4, 15):
                    return [ct.mmaf(ta, tb, acc)]

            with loc(file, 3, 5):
                (acc,) = ct.for_(zero, k_tiles, one, [acc0], step)
            with loc(file, 5, 5):
                ct.store_view_tko(ct.ftof(acc, "f16"), pc, [bx, by], token)
                ct.return_()
    return module


SOFTMAX_COLS = 1024


def softmax(file: str = "softmax.tle") -> ir.Module:
    """Row softmax of an f32 [rows, cols] matrix (cols <= 1024, row stride given), one row per tile block:
    the row max and the sum of exp(x - max) are `reduce` ops; out-of-row elements load as -inf.
    Entry softmax(x, out, rows, cols, stride)."""
    with loc(file, 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            p, i32 = ct.tile_type((), ct.ptr("f32")), ct.tile_type((), "i32")
            _, body = ct.entry("softmax", [p, p, i32, i32, i32])
        with ir.InsertionPoint(body):
            x, out, rows, cols, stride = body.arguments
            row_tile = ct.tile_type((1, SOFTMAX_COLS), "f32")
            with loc(file, 2, 5):
                rows, cols, stride = (ct.assume_bounded(v, 0, None) for v in (rows, cols, stride))
                views = [ct.make_partition_view(ct.make_tensor_view(v, [rows, cols], [stride, 1]), [1, SOFTMAX_COLS],
                                                padding=pad) for v, pad in ((x, "neg_inf"), (out, None))]
                row, _, _ = ct.get_tile_block_id()
                zero = ct.constant(0, ct.tile_type((), "i32"))
                t, _ = ct.load_view_tko(views[0], [row, zero])
            with loc(file, 3, 13):
                (mx,) = ct.reduce([t], 1, [float("-inf")], lambda l, r: [ct.maxf(l, r)])
                mx = ct.broadcast(ct.reshape(mx, [1, 1]), [1, SOFTMAX_COLS])
            with loc(file, 4, 13):
                e = ct.exp(ct.subf(t, mx))
            with loc(file, 5, 13):
                (sm,) = ct.reduce([e], 1, [0.0], lambda l, r: [ct.addf(l, r)])
                y = ct.divf(e, ct.broadcast(ct.reshape(sm, [1, 1]), [1, SOFTMAX_COLS]))
            assert str(y.type) == str(row_tile)
            with loc(file, 6, 5):
                ct.store_view_tko(y, views[1], [row, zero])
                ct.return_()
    return module


def every_op(file: str = "ops.tle") -> ir.Module:
    """One kernel that uses every builder of dialects/cuda_tile.py (the values are meaningless)."""
    with loc(file, 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            pf, pi, i32 = ct.tile_type((), ct.ptr("f32")), ct.tile_type((), ct.ptr("i32")), ct.tile_type((), "i32")
            _, body = ct.entry("ops", [pf, pi, i32], occupancy=2)
        with ir.InsertionPoint(body):
            fp, ip, n = body.arguments
            f32 = lambda *s: ct.tile_type(s, "f32")  # noqa: E731
            i32s = lambda *s: ct.tile_type(s, "i32")  # noqa: E731
            token = ct.make_token()
            bx, _, _ = ct.get_tile_block_id()
            gx, _, _ = ct.get_num_tile_blocks()
            n = ct.assume_bounded(n, 0, 1 << 20)
            tv = ct.make_tensor_view(ct.assume_div_by(fp, 16), [n, 64], [64, 1])
            (rows, _) = ct.get_tensor_shape(tv)
            pv = ct.make_partition_view(tv, [16, 64], padding="neg_inf")
            (tiles, _) = ct.get_index_space_shape(pv)
            zero, one, four = (ct.constant(v, i32) for v in (0, 1, 4))
            x, t1 = ct.load_view_tko(pv, [bx, zero], token, latency=3)
            c1 = ct.constant(1.0, f32(16, 64))
            y = ct.fma(ct.divf(ct.mulf(ct.subf(ct.addf(x, c1), c1), c1), c1, rounding="approx"), c1, c1)
            y = ct.atan2(ct.fpowf(ct.remf(ct.minf(ct.maxf(y, c1), c1, propagate_nan=True), c1), c1), c1)
            for f in (ct.negf, ct.absf, ct.log, ct.log2, ct.sin, ct.cos, ct.tan, ct.sinh, ct.cosh, ct.floor,
                      ct.ceil, ct.exp, ct.exp2, ct.tanh, ct.sqrt, ct.rsqrt):
                y = f(y)
            y = ct.select(ct.cmpf("less_than", y, c1), y, c1)
            xi, i1 = ct.ftoi(y, "i32"), ct.constant(1, i32s(16, 64))
            for f in (ct.addi, ct.subi, ct.muli, ct.shli, ct.maxi, ct.mini, ct.remi, ct.shri, ct.andi, ct.ori,
                      ct.xori, ct.mulhii, ct.divi):
                xi = f(xi, i1)
            xi = ct.select(ct.cmpi("not_equal", xi, i1, signed=False), ct.absi(ct.negi(xi)), i1)
            xf = ct.itof(ct.trunci(ct.exti(xi, "i64"), "i32"), "f32")
            halves = ct.bitcast(ct.ftof(xf, "f16"), "i16")
            wide = ct.broadcast(ct.reshape(ct.reshape(ct.permute(xf, [1, 0]), [1024]), [1, 1024]), [4, 1024])
            cols = ct.broadcast(ct.reshape(ct.iota(64), [1, 64]), [16, 64])
            piece = ct.extract(ct.cat(ct.iota(16), ct.iota(16), 0), [one], [16])
            (total,) = ct.reduce([xf], 1, [0.0], lambda l, r: [ct.addf(l, r)])
            (best, where) = ct.reduce([xf, cols], 1, [float("-inf"), 0], lambda lv, rv, li, ri: [
                ct.maxf(lv, rv), ct.select(ct.cmpf("greater_than", lv, rv), li, ri)])
            (prefix,) = ct.scan([xf], 1, [0.0], lambda l, r: [ct.addf(l, r)], reverse=True)
            b16 = ct.broadcast(ct.reshape(ct.iota(16), [1, 16]), [64, 16])
            mm = ct.mmaf(ct.ftof(xf, "f16"), ct.ftof(ct.itof(b16, "f32"), "f16"), ct.constant(0.0, f32(16, 16)))
            mi = ct.mmai(ct.trunci(xi, "i8"), ct.trunci(b16, "i8"), ct.constant(0, i32s(16, 16)))
            (s,) = ct.for_(zero, four, one, [zero], lambda iv, acc: [ct.addi(acc, iv)])
            (r,) = ct.if_(ct.cmpi("equal", s, zero), [i32], lambda: [s], lambda: [zero])

            def count_up(a):
                ct.if_(ct.cmpi("greater_than", a, four), [], lambda: ct.break_([a]))
                return [ct.addi(a, one)]

            (lp,) = ct.loop([zero], [i32], count_up)
            ct.assert_(ct.cmpi("greater_than_or_equal", lp, zero), "lp >= 0")
            ct.print_tko("lp = %d\n", [lp])
            base = ct.assume_div_by(ip, 16)
            ptrs = ct.offset(ct.broadcast(ct.reshape(base, [1]), [16]), ct.iota(16))
            mask = ct.cmpi("less_than", ct.iota(16), ct.broadcast(ct.reshape(n, [1]), [16]))
            v, t2 = ct.load_ptr_tko(ptrs, mask, ct.constant(0, i32s(16)), token)
            t3 = ct.store_ptr_tko(ptrs, ct.addi(v, piece), mask, t2)
            old, t4 = ct.atomic_rmw_tko(ptrs, v, "add", mask, t3)
            _, t5 = ct.atomic_cas_tko(ptrs, v, old, None, t4)
            ct.ptr_to_ptr(ct.int_to_ptr(ct.ptr_to_int(base), "i32"), "f32")
            # Combine everything so that nothing is dead.
            col = lambda t: ct.broadcast(ct.reshape(t, [16, 1]), [16, 64])  # noqa: E731
            o = ct.addf(ct.addf(ct.addf(col(total), prefix), col(best)), ct.itof(col(where), "f32"))
            scalar = ct.addi(ct.addi(ct.addi(r, lp), ct.addi(tiles, rows)), gx)
            o = ct.addf(o, ct.broadcast(ct.itof(ct.reshape(scalar, [1, 1]), "f32"), [16, 64]))
            o = ct.addf(o, ct.reshape(ct.broadcast(ct.reshape(ct.addf(mm, ct.itof(mi, "f32")), [16, 16, 1]),
                                                   [16, 16, 4]), [16, 64]))
            o = ct.addf(o, ct.itof(ct.exti(halves, "i32"), "f32"))
            o = ct.addf(o, ct.reshape(ct.extract(wide, [zero, zero], [1, 1024]), [16, 64]))
            ct.store_view_tko(o, pv, [bx, zero], ct.join_tokens([t1, t5]), allow_tma=False)
            ct.return_()
    return module


# --------------------------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "tile<f32>", "tile<128x64xf16>", "tile<ptr<f32>>", "tile<16xptr<bf16>>", "token",
    "tensor_view<?x?xf16, strides=[?,1]>", "tensor_view<8192x8192xf32, strides=[8192,1]>",
    "partition_view<tile=(128x64), tensor_view<?x?xf16, strides=[?,?]>>",
    "partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>",
    "partition_view<tile=(64x32), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>, dim_map=[1, 0]>",
])
def test_type_text_round_trips(text):
    with new_context():
        t = ct.parse_type(text)
        assert str(t) == text
        assert ct.parse_type(ct.to_mlir(t)) == t
        assert str(ct.to_mlir(t)) == f"!cuda_tile.{text}"


def test_type_helpers_check_their_arguments():
    with new_context():
        assert str(ct.tile_type((128, 64), "f16")) == "!cuda_tile.tile<128x64xf16>"
        with pytest.raises(ValueError, match="powers of two"):
            ct.tile_type((100,), "f32")
        with pytest.raises(ValueError, match="unknown Tile IR element type"):
            ct.tile_type((16,), "float")
        view = ct.tensor_view_type("f16", [None, None], [None, 1])
        with pytest.raises(ValueError, match="rank-2"):
            ct.partition_view_type([128], view)
        with pytest.raises(TypeError, match="cannot read cuda_tile type"):
            ct.parse_type("tile<128xf32")


# --------------------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------------------

def _mnemonics(module: ir.Module) -> set[str]:
    return {op.name.removeprefix("cuda_tile.") for op in nested_ops(module.operation)}


@needs_encoder
@needs_disasm
def test_every_op_encodes_under_its_tile_ir_name():
    """Every builder's op survives bytecode -> tileirdisasm, which verifies the module and prints each op under
    its Tile IR mnemonic: our op names must be those mnemonics."""
    with new_context():
        module = every_op()
        text = tileir.disassemble(tileir.encode_bytecode(module))
        printed = set(re.findall(r"^\s*(?:%[\w:#, %]+=\s*)?([a-z_0-9]+)\b", text, re.M)) | {"entry"}
        built = _mnemonics(module)
        assert built - printed == set(), text
        # Every table entry is exercised by this kernel, so each encoder mapping is checked at least once.
        assert {f"cuda_tile.{n}" for n in built} == set(tileir.SUPPORTED_OPS)


@needs_encoder
@needs_disasm
def test_vector_add_bytecode_reads_back():
    with new_context():
        text = tileir.disassemble(tileir.encode_bytecode(vector_add()), debug_info=True)
    assert "entry @vadd(%arg0: tile<ptr<f32>>, %arg1: tile<ptr<f32>>, %arg2: tile<ptr<f32>>, %arg3: tile<i32>)" in text
    assert re.search(r"assume div_by<16>, %arg0 : tile<ptr<f32>>", text)
    assert re.search(r"assume bounded<0, \?>, %arg3 : tile<i32>", text)
    assert "make_tensor_view %assume_0, shape = [%assume], strides = [1]" in text
    assert "partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>" in text
    assert re.search(r"load_view_tko weak %pview\[%blockId_x\] token = %0 .* -> tile<1024xf32>, token", text)
    assert re.search(r"join_tokens %result_token, %result_token_\d+ : token", text)
    assert "store_view_tko weak" in text
    # Each op carries its source location as debug info.
    assert 'loc("vadd.tle":4:9)' in text and 'linkageName = "vadd"' in text


@needs_encoder
@needs_disasm
def test_matmul_bytecode_has_the_loop_and_mma():
    with new_context():
        text = tileir.disassemble(tileir.encode_bytecode(matmul(64, 64, 32)))
    assert re.search(r"for %loopIdx in \(%cst_0_i32 to %\w+#1, step %cst_1_i32\) : tile<i32> "
                     r"iter_values\(%iterArg0 = %cst_0_f32\) -> \(tile<64x64xf32>\)", text), text
    assert "mmaf %tile, %tile_" in text and "continue" in text
    assert "partition_view<tile=(64x32), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>" in text


def test_constant_payloads():
    """Tile IR keeps constants in MLIR's DenseElementsAttr layout: a splat is one element, i1 true is 0xff."""
    if not _cuda_tile_pinned():
        pytest.skip(f"cuda-tile=={tileir.CUDA_TILE_VERSION} not installed")
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            consts = [ct.constant(1.0, ct.tile_type((4,), "f32")), ct.constant(True, ct.tile_type((4,), "i1")),
                      ct.constant(-1, ct.tile_type((), "i16")), ct.constant([1, 2, 3, 4], ct.tile_type((4,), "i32")),
                      ct.constant([[True, False], [False, True]], ct.tile_type((2, 2), "i1")),
                      ct.constant(-2.0, ct.tile_type((), "bf16"))]
        enc = tileir._Encoder.__new__(tileir._Encoder)
        enc.bc = tileir._bc()
        got = [enc.constant_bytes(v.owner) for v in consts]
    assert got == [b"\x00\x00\x80\x3f", b"\xff", b"\xff\xff", bytes([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]),
                   bytes([0b1001]), b"\x00\xc0"]


@needs_encoder
def test_unknown_op_is_an_error_at_its_location():
    with new_context(), loc("k.tle", 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            _, body = ct.entry("k", [])
        with ir.InsertionPoint(body):
            ir.Operation.create("cuda_tile.frobnicate", loc=loc("k.tle", 7, 3))
            ct.return_()
        with pytest.raises(TleError) as err:
            tileir.encode_bytecode(module)
    assert str(err.value.span) == "k.tle:7:3"
    assert "cuda_tile.frobnicate cannot be encoded" in err.value.message


def test_pinned_encoder_version(monkeypatch):
    if not _cuda_tile_pinned():
        pytest.skip(f"cuda-tile=={tileir.CUDA_TILE_VERSION} not installed")
    monkeypatch.setattr("cuda.tile._version.__version__", "9.9.9")
    with pytest.raises(ImportError, match=r"pinned to cuda-tile==1\.7\.0, found 9\.9\.9"):
        tileir._bc.__wrapped__()


def test_tileiras_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TLE_TILEIRAS", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="TLE_TILEIRAS"):
        tileir.find_tileiras()
    fake = tmp_path / "tileiras"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.9, V13.9.1'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TLE_TILEIRAS", str(fake))
    assert tileir.find_tileiras() == str(fake)
    assert tileir.tileiras_version() == "13.9.1"


# --------------------------------------------------------------------------------------------------------------
# Compiling with tileiras
# --------------------------------------------------------------------------------------------------------------

def _check_binary(binary, name, params):
    assert binary.backend == "tileir" and binary.name == name
    assert binary.cubin[:4] == b"\x7fELF"
    assert binary.params == params
    assert binary.stages["tilebc"][:8] == b"\x7fTileIR\x00"
    assert "cuda_tile.entry" in binary.stages["tileir"]
    # num_threads comes from the cubin, and is the launch block size (x) the cubin demands.
    attrs = kernel_attributes(binary.cubin, name)
    assert binary.num_threads == attrs.reqntid[0] and attrs.reqntid[1:] == (1, 1)
    return attrs


@needs_encoder
@needs_tileiras
@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_compiles(arch):
    with new_context():
        binary = tileir.compile_tileir(vector_add(), arch)
    _check_binary(binary, "vadd", ["ptr", "ptr", "ptr", "i32"])
    assert binary.arch == arch and binary.num_threads == 128  # FACTS.md: a vector add runs with 128 threads
    assert kernel_attributes(binary.cubin, "vadd").param_sizes == [8, 8, 8, 4]


# Seen with tileiras 13.5.37 (EIATTR_REQNTID), for sm_90 and sm_100 alike, and in FACTS.md for a cuTile matmul of
# these tiles on the H200; tests/gpu/test_tileir_raw.py checks that this size launches and another does not.
MATMUL_THREADS = 256


@needs_encoder
@needs_tileiras
@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_compiles(arch):
    with new_context():
        binary = tileir.compile_tileir(matmul(128, 128, 64), arch)
    _check_binary(binary, "matmul", ["ptr", "ptr", "ptr", "i32", "i32", "i32"])
    assert binary.num_threads == MATMUL_THREADS
    # Two 128x64 and 64x128 f16 tiles per pipeline stage do not fit 48 KiB: the cubin declares more, statically.
    assert binary.extra["static_shared_mem"] > 48 * 1024


@needs_encoder
@needs_tileiras
def test_static_shared_memory_leaves_out_the_drivers_reserved_kilobyte():
    """The cubin's `.nv.shared.<kernel>` section also holds the 1 KB the driver reserves per CTA; on the H200
    cuFuncGetAttribute(SHARED_SIZE_BYTES) gave that section's size less 1024 (twenty-second session), and
    kernel_attributes counts the same."""
    with new_context():
        binary = tileir.compile_tileir(matmul(128, 128, 64), "sm_90")
    section = len(_elf_sections(binary.cubin)[".nv.shared.matmul"])
    assert binary.extra["static_shared_mem"] == section - 1024 > 48 * 1024


@needs_encoder
@needs_tileiras
@pytest.mark.parametrize("arch", ARCHS)
def test_softmax_compiles(arch):
    with new_context():
        binary = tileir.compile_tileir(softmax(), arch)
    _check_binary(binary, "softmax", ["ptr", "ptr", "i32", "i32", "i32"])
    assert binary.num_threads == 128


@needs_encoder
@needs_tileiras
def test_every_op_compiles():
    with new_context():
        binary = tileir.compile_tileir(every_op(), "sm_90")
    _check_binary(binary, "ops", ["ptr", "ptr", "i32"])


@needs_encoder
@needs_tileiras
@needs_disasm
def test_tileiras_error_points_at_the_source_line(tmp_path):
    """A module tileiras rejects (adding tiles of different shapes) fails at the line of the bad op. tileiras
    names no location for verifier errors; tileirdisasm, beside it, does (without it: the kernel's location)."""
    source = tmp_path / "bad.tle"
    register_source(str(source), "kernel bad(x: *f32) {\n  let t = load(x, [128])\n  let u = t + ones([64])\n}\n")
    with new_context(), loc(str(source), 1, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            _, body = ct.entry("bad", [ct.tile_type((), ct.ptr("f32"))])
        with ir.InsertionPoint(body):
            with loc(str(source), 2, 11):
                view = ct.make_partition_view(ct.make_tensor_view(body.arguments[0], [1024], [1]), [128])
                t, _ = ct.load_view_tko(view, [ct.get_tile_block_id()[0]])
                ones = ct.constant(1.0, ct.tile_type((64,), "f32"))
            with loc(str(source), 3, 11):
                ct.addf(t, ones)
            ct.return_()
        with pytest.raises(TleError) as err:
            tileir.compile_tileir(module, "sm_90")
    e = err.value
    assert (e.span.file, e.span.line, e.span.col) == (str(source), 3, 11)
    assert "'cuda_tile.addf' op failed to verify that all of {lhs, rhs, result} have same type" in e.message
    assert any("tileiras 13." in n.message and "--gpu-name=sm_90" in n.message for n in e.notes)
    rendered = render(e)
    assert rendered.startswith(f"{source}:3:11: error: tileiras: ")
    assert "  let u = t + ones([64])" in rendered


@needs_encoder
@needs_tileiras
def test_tileiras_failure_without_location_falls_back_to_the_kernel():
    """A failure tileirdisasm cannot place (a bytecode type tileiras rejects while reading: a tile dimension that
    is not a power of two, which the builders would refuse, so the type is written by hand) is reported at the
    kernel's own location."""
    with new_context(), loc("k.tle", 4, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            _, body = ct.entry("k", [ct.tile_type((), ct.ptr("f32"))])
        with ir.InsertionPoint(body):
            with loc("k.tle", 5, 3):
                view = ct.make_tensor_view(body.arguments[0], [1024], [1])
                bad = ir.Type.parse("!cuda_tile.partition_view<tile=(100), tensor_view<1024xf32, strides=[1]>>")
                ir.Operation.create("cuda_tile.make_partition_view", results=[bad], operands=[view])
            ct.return_()
        with pytest.raises(TleError) as err:
            tileir.compile_tileir(module, "sm_90")
    assert str(err.value.span) == "k.tle:4:1"
    assert "tile shape dimensions must have power of two length" in err.value.message


def test_kernel_parameters_must_be_scalars():
    with new_context(), loc("k.tle", 2, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            _, body = ct.entry("k", [ct.tile_type((16,), "f32")])
        with ir.InsertionPoint(body):
            ct.return_()
        with pytest.raises(TleError, match="scalars and pointers only") as err:
            tileir.compile_tileir(module)
    assert str(err.value.span) == "k.tle:2:1"


def test_remarks_are_parsed():
    text = '''In function: vadd:

  category: Memory
    remark[passed]: Load instruction selected
      --> "/src/k.tle":9:8
       |
       = name: RemarkMemoryLoadInstructionSelected
       = note: Instruction = Global-memory load instruction

    remark[failed]: Failed to select TMA load instruction
      --> "/src/k.tle":9:8
       |
       = name: RemarkMemoryTmaLoadFailed
       = reason: loc("/src/k.tle":9:8): base pointer not 16-byte aligned
'''
    passed, failed = tileir.parse_remarks(text)
    assert (passed.kind, passed.title, str(passed.span)) == ("passed", "Load instruction selected", "/src/k.tle:9:8")
    assert failed.kind == "failed" and failed.details == ["reason: base pointer not 16-byte aligned"]


@needs_encoder
@needs_tileiras
def test_matmul_assumptions_give_tma_and_tensor_cores():
    """With base pointers div_by<16> and row strides div_by<8>, tileiras reports TMA loads and stores and
    tensor-core MMAs, each at the op's source line (as FACTS.md measured: without them it falls back, 30x slower)."""
    with new_context():
        found = {(r.kind, r.title, str(r.span)): r.details
                 for r in tileir.remarks(tileir.encode_bytecode(matmul()), "sm_90")}
    assert "note: Instruction = TMA Load instruction" in found[("passed", "Load instruction selected",
                                                                 "matmul.tle:3:9")]
    assert "note: Instruction = TMA Store instruction" in found[("passed", "Store instruction selected",
                                                                  "matmul.tle:5:5")]
    assert ("passed", "MMA operation successfully optimized to use Tensor Cores", "matmul.tle:4:15") in found
