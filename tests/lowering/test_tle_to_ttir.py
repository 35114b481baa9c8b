"""lowering/tle_to_ttir.py: tle dialect -> TTIR.

Each kernel is checked three ways: its TTIR holds the ops we expect (FileCheck, generic form), Triton's own parser
accepts it (verify_ttir), and Triton's whole pipeline compiles it to an sm_90 cubin (compile_ttir), which proves
the later passes take what we emit. Semantics that only a GPU can show (results) are in the lead's GPU tests;
here we check the IR that carries them: masks on every ragged axis, padding values, NaN-propagating combines.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tle.abi import Spec, all_args, default_spec
from tle.check import check_kernel, load_program
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tle_to_ttir import lower, print_ttir, tle_to_ttir
from tle.targets.triton import compile_ttir, verify_ttir


def ttir(src: str, kernel: str | None = None, consts: dict | None = None, spec: str = "default",
         mode: str = "pointer", file: str = "k.tle") -> str:
    """TTIR of one kernel of `src`. spec: "default" (aligned pointers, unit last strides), "all16" (every
    argument divisible by 16 as well) or "generic" (nothing known)."""
    prog = load_program(src, file)
    k = check_kernel(prog, kernel or prog.kernel_names()[0], consts or {})
    d = default_spec(k)
    s = {"default": d, "generic": Spec(),
         "all16": Spec(frozenset(a.key for a in all_args(k)), d.unit_strides)}[spec]
    text = tle_to_ttir(ast_to_tle(k, s), mode)
    verify_ttir(text)
    return text


def cubin(text: str, **kw):
    b = compile_ttir(text, "sm_90", **kw)
    assert b.cubin[:4] == b"\x7fELF"
    return b


def filecheck(text: str, checks: str, tmp_path) -> None:
    path = tmp_path / "checks.txt"
    path.write_text(checks)
    proc = subprocess.run([sys.executable, "-m", "filecheck", "--enable-var-scope", str(path)], input=text,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n--- input ---\n" + text


def ops(text: str, name: str) -> list[str]:
    """The lines of `text` that create op `name` (generic form)."""
    return [line for line in text.splitlines() if f'"{name}"(' in line]


VADD = """
kernel vadd<B: int = 1024>(x: tensor<f32>[N], y: tensor<f32>[N], o: tensor<f32>[N]) {
    let i = program_id(0)
    let s = load(x, tile=[B], at=[i]) + load(y, tile=[B], at=[i])
    store(o, s, at=[i])
}
"""


# ---- kernel signature, mesh ----------------------------------------------------------------------------------

def test_vector_add(tmp_path):
    text = ttir(VADD)
    filecheck(text, r"""
CHECK: "tt.func"() ({
CHECK-NEXT: ^bb0(%[[X:.*]]: !tt.ptr<f32> {{[^,]*}}, %[[N:.*]]: i32 {{[^,]*}}, %[[Y:.*]]: !tt.ptr<f32> {{[^,]*}}, %[[O:.*]]: !tt.ptr<f32>
CHECK: %[[PID:.*]] = "tt.get_program_id"() {axis = 0 : i32}
CHECK: %[[R:.*]] = "tt.make_range"() {end = 1024 : i32, start = 0 : i32}
CHECK: %[[PTRS:.*]] = "tt.addptr"
CHECK: %[[M:.*]] = "arith.cmpi"({{.*}}, {{.*}}) <{predicate = 6 : i64}> : (tensor<1024xi32>, tensor<1024xi32>) -> tensor<1024xi1>
CHECK: %[[OTHER:.*]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<1024xf32>}>
CHECK: "tt.load"(%[[PTRS]], %[[M]], %[[OTHER]]) {operandSegmentSizes = array<i32: 1, 1, 1>}
CHECK: "tt.load"
CHECK: "tt.store"({{.*}}, {{.*}}, {{.*}}) : (tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>, tensor<1024xi1>) -> ()
CHECK: "tt.return"()
CHECK: arg_attrs = [{tt.divisibility = 16 : i32}, {}, {tt.divisibility = 16 : i32}, {tt.divisibility = 16 : i32}]
CHECK-SAME: function_type = (!tt.ptr<f32>, i32, !tt.ptr<f32>, !tt.ptr<f32>) -> ()
CHECK-SAME: sym_name = "vadd", sym_visibility = "public"
""", tmp_path)
    assert "tle." not in text  # nothing of the tle dialect is left
    b = cubin(text)
    assert b.params == ["ptr", "i32", "ptr", "ptr"]
    assert "ld.global" in b.stages["ptx"] and "st.global" in b.stages["ptx"]


def test_divisibility_copied_only_where_proven(tmp_path):
    src = "kernel k(x: tensor<f16>[M, N], s: i32) { store(x, load(x, tile=[16, 16], at=[s, 0]), at=[0, 0]) }"
    generic, all16 = ttir(src, spec="generic"), ttir(src, spec="all16")
    # generic: x, M, N, x.stride0, x.stride1, s with no facts; all16: every one divisible by 16 (stride1 folded).
    assert "arg_attrs = [{}, {}, {}, {}, {}, {}]" in generic
    assert "arg_attrs = [" + ", ".join(["{tt.divisibility = 16 : i32}"] * 5) + "]" in all16
    cubin(generic)
    cubin(all16)


def test_mesh_axes(tmp_path):
    text = ttir("""
kernel k(o: tensor<i32>[N]) {
    let v = program_id(0) + program_id(1) * 2 + program_id(2) * 3 + num_programs(0) + num_programs(2)
    store(o, full<i32>[16](v), at=[0])
}""")
    filecheck(text, r"""
CHECK: "tt.get_program_id"() {axis = 0 : i32} : () -> i32
CHECK: "tt.get_program_id"() {axis = 1 : i32} : () -> i32
CHECK: "tt.get_program_id"() {axis = 2 : i32} : () -> i32
CHECK: "tt.get_num_programs"() {axis = 0 : i32} : () -> i32
CHECK: "tt.get_num_programs"() {axis = 2 : i32} : () -> i32
""", tmp_path)
    cubin(text)


# ---- tile loads and stores -----------------------------------------------------------------------------------

SOFTMAX = """
kernel softmax<BLOCK: int = 1024>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let row = program_id(0)
    let t = load(x, tile=[1, BLOCK], at=[row, 0], pad=-inf)
    let e = exp(t - max(t, axis=1, keepdims=true))
    store(y, e / sum(e, axis=1, keepdims=true), at=[row, 0])
}
"""


def test_load_masks_every_ragged_axis_with_padding(tmp_path):
    text = ttir(SOFTMAX)
    # Row axis (tile 1): a scalar unsigned compare `row <u M` splatted; column axis (tile index 0): `k <s N` per
    # element, the compare user code writes. The tile base is computed in i32: row * stride0 (i64 only for a tensor
    # the launch proves spans more than 2**31 - 1 elements: test_wide_tensors.py).
    filecheck(text, r"""
CHECK: ^bb0(%[[X:[a-z0-9]+]]: !tt.ptr<f32> {{[^,]*}}, %[[M:[a-z0-9]+]]: i32 {{[^,]*}}, %[[N:[a-z0-9]+]]: i32 {{[^,]*}}, %[[S0:[a-z0-9]+]]: i32
CHECK: %[[ROW:.*]] = "tt.get_program_id"
CHECK-NOT: "arith.extsi"
CHECK: %[[OFF:.*]] = "arith.muli"(%[[ROW]], %[[S0]]) {{.*}} : (i32, i32) -> i32
CHECK: %[[K:.*]] = "tt.make_range"() {end = 1024 : i32, start = 0 : i32}
CHECK: %[[BASE:.*]] = "tt.addptr"(%[[X]], %[[OFF]]) : (!tt.ptr<f32>, i32) -> !tt.ptr<f32>
CHECK: "tt.splat"(%[[BASE]])
CHECK: %[[IN_ROWS:.*]] = "arith.cmpi"(%[[ROW]], %[[M]]) <{predicate = 6 : i64}> : (i32, i32) -> i1
CHECK: %[[SN:.*]] = "tt.splat"(%[[N]]) : (i32) -> tensor<1024xi32>
CHECK: "arith.cmpi"(%[[K]], %[[SN]]) <{predicate = 2 : i64}> : (tensor<1024xi32>, tensor<1024xi32>) -> tensor<1024xi1>
CHECK: "tt.splat"(%[[IN_ROWS]]) : (i1) -> tensor<1x1024xi1>
CHECK: %[[MASK:.*]] = "arith.andi"
CHECK: %[[PAD:.*]] = "arith.constant"() <{value = dense<0xFF800000> : tensor<1x1024xf32>}>
CHECK: "tt.load"({{.*}}, %[[MASK]], %[[PAD]]) {operandSegmentSizes = array<i32: 1, 1, 1>}
CHECK: "tt.reduce"
CHECK: "arith.maximumf"
CHECK: "tt.reduce.return"
CHECK: {axis = 1 : i32} : (tensor<1x1024xf32>) -> tensor<1xf32>
CHECK: "tt.store"({{.*}}, {{.*}}, %[[MASK2:.*]]) : (tensor<1x1024x!tt.ptr<f32>>, tensor<1x1024xf32>, tensor<1x1024xi1>)
""", tmp_path)
    cubin(text)


def test_nan_padding(tmp_path):
    text = ttir("kernel k(x: tensor<f16>[N]) { store(x, load(x, tile=[64], at=[1], pad=nan), at=[0]) }")
    assert re.search(r"dense<0x7E00> : tensor<64xf16>", text)
    cubin(text)


def test_integer_padding(tmp_path):
    text = ttir("kernel k(x: tensor<i8>[N]) { store(x, load(x, tile=[64], at=[1], pad=-3), at=[0]) }")
    assert "dense<-3> : tensor<64xi8>" in text
    cubin(text)


def test_mask_dropped_only_when_statically_inside(tmp_path):
    text = ttir("""
kernel k(x: tensor<f32>[128, 64], y: tensor<f32>[100, 64]) {
    let a = load(x, tile=[64, 64], at=[1, 0])
    store(x, a, at=[program_id(0), 0])
    store(y, load(y, tile=[64, 64], at=[1, 0]), at=[0, 0])
}""")
    loads, stores = ops(text, "tt.load"), ops(text, "tt.store")
    # x[64:128, 0:64] is inside the 128x64 tensor: no mask.
    assert "array<i32: 1, 0, 0>" in loads[0]
    # program_id(0) may be anything: masked (rows only; columns are statically inside).
    assert stores[0].count("tensor<64x64xi1>") == 1
    # y has 100 rows: the tile at row index 1 (rows 64..127) is ragged; the tile at 0 is inside.
    assert "array<i32: 1, 1, 1>" in loads[1]
    assert "tensor<64x64xi1>" not in stores[1]
    cubin(text)


def test_negative_tile_index_is_masked(tmp_path):
    # A tile index of -1 must read padding, not memory before the tensor: the compare is unsigned.
    text = ttir("kernel k(x: tensor<f32>[256]) { store(x, load(x, tile=[64], at=[program_id(0) - 1], pad=5.0), "
                "at=[0]) }")
    assert any("<{predicate = 6 : i64}>" in line for line in ops(text, "arith.cmpi"))
    assert not any("<{predicate = 2 : i64}>" in line for line in ops(text, "arith.cmpi"))  # no signed compare
    cubin(text)


def test_three_dimensional_tile(tmp_path):
    text = ttir("""
kernel k<B: int = 16>(x: tensor<f32>[A, M, N], o: tensor<f32>[A, M, N]) {
    let t = load(x, tile=[2, B, B], at=[program_id(0), program_id(1), 0])
    store(o, t * 2.0, at=[program_id(0), program_id(1), 0])
}""", spec="generic")
    # Three axes, three masks (none provably inside), strides of all three axes used. The two program_id axes
    # compare unsigned; the third starts at the constant 0 and compares signed.
    load = ops(text, "tt.load")[0]
    assert "array<i32: 1, 1, 1>" in load and "tensor<2x16x16x!tt.ptr<f32>>" in load
    assert len([l for l in ops(text, "arith.cmpi") if "predicate = 6" in l]) == 2 * 2
    assert len([l for l in ops(text, "arith.cmpi") if "predicate = 2" in l]) == 2 * 1
    cubin(text)


def test_tile_index_from_a_loop_goes_to_the_scalar_base(tmp_path):
    # A tile indexed by the loop variable adds j * 128 to a scalar base, so the per-element offsets (the arange)
    # stay loop-invariant, as a hand-written K loop advances one pointer. The row index, computed outside the
    # loop, is shared by the offsets and the mask (`pid * 16 + k`); the tile's column mask uses `j * 128 + k`.
    text = ttir("""
kernel rowsum<B: int = 128>(x: tensor<f32>[M, N], y: tensor<f32>[M, 1]) {
    var s = zeros<f32>[16, B]
    for j in range(cdiv(N, B)) {
        s += load(x, tile=[16, B], at=[program_id(0), j])
    }
    store(y, sum(s, axis=1, keepdims=true), at=[program_id(0), 0])
}""")
    filecheck(text, r"""
CHECK: ^bb0(%[[X:[a-z0-9]+]]: !tt.ptr<f32>
CHECK: "scf.for"
CHECK: ^bb0(%[[J:[a-z0-9]+]]: i32
CHECK: %[[ROWS:.*]] = "arith.addi"({{.*}}) {{.*}} -> tensor<16xi32>
CHECK: "arith.muli"(%[[ROWS]], %{{.*}}) {{.*}} : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi32>
CHECK: %[[OFF:.*]] = "arith.muli"(%[[J]], %{{.*}}) {{.*}} : (i32, i32) -> i32
CHECK: %[[BASE:.*]] = "tt.addptr"(%[[X]], %[[OFF]]) : (!tt.ptr<f32>, i32) -> !tt.ptr<f32>
CHECK: "tt.splat"(%[[BASE]]) : (!tt.ptr<f32>) -> tensor<16x128x!tt.ptr<f32>>
CHECK: "arith.cmpi"(%[[ROWS]], %{{.*}}) <{predicate = 6 : i64}> : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi1>
CHECK: "tt.load"
""", tmp_path)
    cubin(text)


def test_divisibility_vectorises_loads():
    aligned = cubin(ttir(SOFTMAX, spec="all16")).stages["ptx"]
    ragged = cubin(ttir(SOFTMAX)).stages["ptx"]
    # With N divisible by 16 the mask is constant over 4 elements: 128-bit accesses. Without, scalar ones.
    assert "ld.global.v4.b32" in aligned and "st.global.v4.b32" in aligned
    assert "ld.global.v4" not in ragged and "ld.global.b32" in ragged


# ---- gather, scatter, atomics ----------------------------------------------------------------------------------

def test_gather_and_scatter(tmp_path):
    text = ttir("""
kernel k<B: int = 128>(x: tensor<f32>[N], idx: tensor<i32>[M], y: tensor<f32>[M], z: tensor<f16>[R, C]) {
    let i = load(idx, tile=[B], at=[program_id(0)])
    let m = i >= 0 and i < N
    let g = gather(x, i, mask=m, other=-1.0)
    let r = arange(0, B)
    let g2 = gather(z, [r, r % 16])
    scatter(x, i, g + cast<f32>(g2), mask=m)
    scatter(y, r, g)
}""", spec="generic")
    filecheck(text, r"""
CHECK: ^bb0(%[[X:[a-z0-9]+]]: !tt.ptr<f32> {{[^,]*}}, %[[N:[a-z0-9]+]]: i32 {{[^,]*}}, %[[XS:[a-z0-9]+]]: i32 {{[^,]*}}, %[[IDX:[a-z0-9]+]]: !tt.ptr<i32> {{[^,]*}}, %[[M:[a-z0-9]+]]: i32 {{[^,]*}}, %[[IS:[a-z0-9]+]]: i32 {{[^,]*}}, %[[Y:[a-z0-9]+]]: !tt.ptr<f32> {{[^,]*}}, %[[YS:[a-z0-9]+]]: i32 {{[^,]*}}, %[[Z:[a-z0-9]+]]: !tt.ptr<f16> {{[^,]*}}, %[[R:[a-z0-9]+]]: i32 {{[^,]*}}, %[[C:[a-z0-9]+]]: i32 {{[^,]*}}, %[[ZS0:[a-z0-9]+]]: i32 {{[^,]*}}, %[[ZS1:[a-z0-9]+]]: i32
CHECK: %[[I:.*]] = "tt.load"
CHECK: %[[MASK:.*]] = "arith.andi"
CHECK: %[[XSS:.*]] = "tt.splat"(%[[XS]]) : (i32) -> tensor<128xi32>
CHECK: %[[OFF:.*]] = "arith.muli"(%[[I]], %[[XSS]])
CHECK: %[[XP:.*]] = "tt.splat"(%[[X]]) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
CHECK: %[[GP:.*]] = "tt.addptr"(%[[XP]], %[[OFF]])
CHECK: %[[OTHER:.*]] = "arith.constant"() <{value = dense<-1.000000e+00> : tensor<128xf32>}>
CHECK: "tt.load"(%[[GP]], %[[MASK]], %[[OTHER]]) {operandSegmentSizes = array<i32: 1, 1, 1>}
CHECK: "tt.splat"(%[[ZS0]])
CHECK: "tt.splat"(%[[ZS1]])
CHECK: "tt.load"({{.*}}) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f16>>) -> tensor<128xf16>
CHECK: "tt.store"({{.*}}, {{.*}}, %[[MASK]]) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>, tensor<128xi1>) -> ()
CHECK: "tt.store"({{.*}}, {{.*}}) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
""", tmp_path)
    cubin(text)


ATOMICS = """
kernel k<B: int = 128>(x: tensor<f32>[N], xi: tensor<i32>[N], xh: tensor<f16>[N], o: tensor<f32>[N]) {
    let r = arange(0, B)
    let v = load(o, tile=[B], at=[0])
    let m = r < N
    let a = atomic_add(x, r, v, mask=m)
    let b = atomic_max(x, r, v, mask=m)
    let c = atomic_min(x, r, v)
    atomic_add(xi, r, cast<i32>(v), mask=m)
    atomic_max(xi, r, cast<i32>(v))
    atomic_min(xi, r, cast<i32>(v))
    atomic_add(xh, r, cast<f16>(v), mask=m)
    store(o, a + b + c, at=[0])
}
"""


def test_atomics(tmp_path):
    text = ttir(ATOMICS)
    # atomic_rmw_op: fadd 5, add 4, max 6, min 7, umax 8, umin 9; sem acq_rel (4), scope gpu (1).
    filecheck(text, r"""
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 5 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>, tensor<128xi1>) -> tensor<128xf32>
COM: float max: bits of the value, NaN made +NaN, sign bit picks signed max or unsigned min.
CHECK: %[[BITS:.*]] = "tt.bitcast"(%[[V:.*]]) : (tensor<128xf32>) -> tensor<128xi32>
CHECK: %[[ISNAN:.*]] = "arith.cmpf"(%[[V]], %[[V]]) <{fastmath = #arith.fastmath<none>, predicate = 14 : i64}>
CHECK: %[[QNAN:.*]] = "arith.constant"() <{value = dense<2143289344> : tensor<128xi32>}>
CHECK: %[[B:.*]] = "arith.select"(%[[ISNAN]], %[[QNAN]], %[[BITS]])
CHECK: %[[NEG:.*]] = "arith.cmpi"(%[[B]], {{.*}}) <{predicate = 2 : i64}>
CHECK: %[[IPTRS:.*]] = "tt.bitcast"({{.*}}) : (tensor<128x!tt.ptr<f32>>) -> tensor<128x!tt.ptr<i32>>
CHECK: "tt.atomic_rmw"(%[[IPTRS]], %[[B]], {{.*}}) {atomic_rmw_op = 6 : i32, scope = 1 : i32, sem = 4 : i32}
CHECK: "tt.atomic_rmw"(%[[IPTRS]], %[[B]], {{.*}}) {atomic_rmw_op = 9 : i32, scope = 1 : i32, sem = 4 : i32}
CHECK: "tt.bitcast"({{.*}}) : (tensor<128xi32>) -> tensor<128xf32>
COM: float min: NaN made -NaN (0xFFC00000), signed min / unsigned max.
CHECK: "arith.constant"() <{value = dense<-4194304> : tensor<128xi32>}>
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 7 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<i32>>, tensor<128xi32>, tensor<128xi1>)
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 8 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<i32>>, tensor<128xi32>, tensor<128xi1>)
COM: integers: add, signed max, signed min directly; f16 add.
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 4 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<i32>>, tensor<128xi32>, tensor<128xi1>)
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 6 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<i32>>, tensor<128xi32>) -> tensor<128xi32>
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 7 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<i32>>, tensor<128xi32>) -> tensor<128xi32>
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 5 : i32, scope = 1 : i32, sem = 4 : i32} : (tensor<128x!tt.ptr<f16>>, tensor<128xf16>, tensor<128xi1>)
""", tmp_path)
    ptx = cubin(text).stages["ptx"]
    for ins in ("add.f32", "max.s32", "min.u32", "min.s32", "max.u32", "add.u32", "add.noftz.f16"):
        assert f"atom.global.gpu.acq_rel.{ins}" in ptx, ins


UNREAD_ATOMICS = """
kernel k(x: tensor<f32>[N], xi: tensor<i32>[N], o: tensor<f32>[N]) {
    let r = arange(0, 128)
    let v = load(o, tile=[128], at=[0])
    let ignored = atomic_add(x, r, v, mask=r < N)
    atomic_max(xi, r, cast<i32>(v))
}
"""


def test_unread_atomics_are_relaxed(tmp_path):
    """No atomic's result is read, so nothing can observe their order (dialects/tle.py relaxed_atomics): relaxed
    (sem 1). ATOMICS above reads three of its seven results, and all seven stay acquire-release."""
    text = ttir(UNREAD_ATOMICS)
    filecheck(text, r"""
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 5 : i32, scope = 1 : i32, sem = 1 : i32}
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 6 : i32, scope = 1 : i32, sem = 1 : i32}
""", tmp_path)
    ptx = cubin(text).stages["ptx"]
    assert "atom.global.gpu.relaxed.add.f32" in ptx and "atom.global.gpu.relaxed.max.s32" in ptx
    assert "acq_rel" not in ptx


def test_an_unread_atomic_of_scalars_is_relaxed_and_not_reduced(tmp_path):
    """A one-element atomic of scalars returns a scalar through a reduction of its tile of one; as a statement, or
    bound to `_`, nothing reads it, so there is no reduction and the atomic is relaxed. Reading it makes it
    acquire-release, with the reduction."""
    unread = ttir("""
kernel k(c: tensor<i32>[N], x: tensor<i32>[M]) {
    atomic_add(c, 0, load(x, at=program_id(0)))
    let _ = atomic_max(c, 1, 2)
}
""")
    filecheck(unread, r"""
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 4 : i32, scope = 1 : i32, sem = 1 : i32}
CHECK-NOT: tt.reduce
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 6 : i32, scope = 1 : i32, sem = 1 : i32}
CHECK-NOT: tt.reduce
""", tmp_path)
    read = ttir("""
kernel k(c: tensor<i32>[N], out: tensor<i32>[M]) {
    store(out, atomic_add(c, 0, 1), at=program_id(0))
}
""")
    filecheck(read, r"""
CHECK: "tt.atomic_rmw"({{.*}}) {atomic_rmw_op = 4 : i32, scope = 1 : i32, sem = 4 : i32}
CHECK: "tt.reduce"
""", tmp_path)


# ---- tile computation ------------------------------------------------------------------------------------------

MATMUL = """
kernel mm<BM: int = 64, BN: int = 64, BK: int = 32, T: dtype = f16, A: dtype = f32>(a: tensor<T>[M, K], b: tensor<T>[K, N], c: tensor<A>[M, N]) {
    var acc = zeros<A>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), load(b, tile=[BK, BN], at=[k, program_id(1)]), acc)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""


@pytest.mark.parametrize("t,acc,ptx", [
    ("f16", "f32", "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"),
    ("f16", "f16", "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16"),
    ("bf16", "f32", "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"),
    ("i8", "i32", "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"),
    ("f64", "f64", "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64"),
    ("f32", "f32", "fma.rn.f32"),  # ieee: no tensor cores for f32
])
def test_dot(t, acc, ptx, tmp_path):
    text = ttir(MATMUL, consts={"T": t, "A": acc}, spec="all16")
    filecheck(text, rf"""
CHECK: "scf.for"
CHECK: "tt.dot"({{{{.*}}}}) {{inputPrecision = 2 : i32, maxNumImpreciseAcc = 0 : i32}} : (tensor<64x32x{t}>, tensor<32x64x{t}>, tensor<64x64x{acc}>) -> tensor<64x64x{acc}>
CHECK: "scf.yield"
""", tmp_path)
    assert ptx in cubin(text).stages["ptx"]


def test_dot_tf32_and_transposed_operand(tmp_path):
    text = ttir("""
kernel k<BM: int = 64, BN: int = 64, BK: int = 32>(a: tensor<f32>[M, K], b: tensor<f32>[N, K], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        let bt = transpose(load(b, tile=[BN, BK], at=[program_id(1), k]))
        acc = dot(load(a, tile=[BM, BK], at=[program_id(0), k]), bt, acc, tf32=true)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}""", spec="all16")
    filecheck(text, r"""
CHECK: "tt.trans"({{.*}}) {order = array<i32: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
CHECK: "tt.dot"({{.*}}) {inputPrecision = 0 : i32, maxNumImpreciseAcc = 0 : i32}
""", tmp_path)
    assert ".tf32.tf32" in cubin(text).stages["ptx"]


REDUCE = """
kernel k<B: int = 64, T: dtype = f32>(x: tensor<T>[M, N], o: tensor<T>[M], oi: tensor<i32>[M], s: tensor<T>[1]) {
    let t = load(x, tile=[B, B], at=[program_id(0), 0])
    store(o, max(t * t, axis=1) + min(t, axis=1) + cast<T>(sum(t, axis=1)), at=[program_id(0)])
    store(oi, argmax(t, axis=1) + argmin(t, axis=0), at=[program_id(0)])
    store(x, cast<T>(cumsum(t, axis=1)), at=[0, 0])
    store(s, full<T>[1](max(reshape(t, [B * B]))), at=[0])
}
"""


def test_reduce_float(tmp_path):
    text = ttir(REDUCE)
    filecheck(text, r"""
CHECK: "tt.reduce"(%{{.*}}) ({
CHECK-NEXT: ^bb0(%[[A:.*]]: f32 {{[^,]*}}, %[[B:.*]]: f32
CHECK-NEXT: %[[R:.*]] = "arith.maximumf"(%[[A]], %[[B]])
CHECK-NEXT: "tt.reduce.return"(%[[R]]) : (f32) -> ()
CHECK-NEXT: }) {axis = 1 : i32} : (tensor<64x64xf32>) -> tensor<64xf32>
CHECK: "arith.minimumf"
CHECK: "arith.addf"
CHECK: "tt.reduce.return"
COM: argmax: (value, index) pairs, the index a make_range along the axis.
CHECK: "tt.store"
CHECK: %[[IDX:.*]] = "tt.make_range"() {end = 64 : i32, start = 0 : i32}
CHECK: %[[IDX2:.*]] = "tt.expand_dims"(%[[IDX]]) {axis = 0 : i32} : (tensor<64xi32>) -> tensor<1x64xi32>
CHECK: %[[IDX3:.*]] = "tt.broadcast"(%[[IDX2]]) : (tensor<1x64xi32>) -> tensor<64x64xi32>
CHECK: "tt.reduce"(%{{.*}}, %[[IDX3]]) ({
CHECK-NEXT: ^bb0(%[[V1:.*]]: f32 {{[^,]*}}, %[[I1:.*]]: i32 {{[^,]*}}, %[[V2:.*]]: f32 {{[^,]*}}, %[[I2:.*]]: i32
COM: better: v1 > v2 or v1 NaN (unordered >), and v2 a number (ordered); worse: the same, swapped.
CHECK-NEXT: %[[GT:.*]] = "arith.cmpf"(%[[V1]], %[[V2]]) <{fastmath = #arith.fastmath<none>, predicate = 9 : i64}>
CHECK-NEXT: %[[NUM2:.*]] = "arith.cmpf"(%[[V2]], %[[V2]]) <{fastmath = #arith.fastmath<none>, predicate = 7 : i64}>
CHECK-NEXT: %[[BETTER:.*]] = "arith.andi"(%[[GT]], %[[NUM2]])
CHECK-NEXT: %[[LT:.*]] = "arith.cmpf"(%[[V2]], %[[V1]]) <{fastmath = #arith.fastmath<none>, predicate = 9 : i64}>
CHECK-NEXT: %[[NUM1:.*]] = "arith.cmpf"(%[[V1]], %[[V1]]) <{fastmath = #arith.fastmath<none>, predicate = 7 : i64}>
CHECK-NEXT: %[[WORSE:.*]] = "arith.andi"(%[[LT]], %[[NUM1]])
CHECK: %[[LOWER:.*]] = "arith.cmpi"(%[[I1]], %[[I2]]) <{predicate = 2 : i64}>
CHECK: %[[FIRST:.*]] = "arith.ori"
CHECK-NEXT: %[[V:.*]] = "arith.select"(%[[FIRST]], %[[V1]], %[[V2]])
CHECK-NEXT: %[[I:.*]] = "arith.select"(%[[FIRST]], %[[I1]], %[[I2]])
CHECK-NEXT: "tt.reduce.return"(%[[V]], %[[I]]) : (f32, i32) -> ()
CHECK-NEXT: }) {axis = 1 : i32} : (tensor<64x64xf32>, tensor<64x64xi32>) -> (tensor<64xf32>, tensor<64xi32>)
COM: argmin along axis 0: the index runs down the rows; unordered less-than.
CHECK: "tt.expand_dims"({{.*}}) {axis = 1 : i32} : (tensor<64xi32>) -> tensor<64x1xi32>
CHECK: "arith.cmpf"({{.*}}) <{fastmath = #arith.fastmath<none>, predicate = 11 : i64}>
CHECK: }) {axis = 0 : i32} : (tensor<64x64xf32>, tensor<64x64xi32>) -> (tensor<64xf32>, tensor<64xi32>)
CHECK: "tt.scan"(%{{.*}}) ({
CHECK: "arith.addf"
CHECK-NEXT: "tt.scan.return"
CHECK-NEXT: }) {axis = 1 : i32, reverse = false} : (tensor<64x64xf32>) -> tensor<64x64xf32>
COM: a 1-D reduce gives a scalar.
CHECK: "tt.reshape"({{.*}}) : (tensor<64x64xf32>) -> tensor<4096xf32>
CHECK: }) {axis = 0 : i32} : (tensor<4096xf32>) -> f32
""", tmp_path)
    cubin(text)


@pytest.mark.parametrize("t", ["f16", "bf16", "f64", "i8", "i16", "i32", "i64"])
def test_reduce_dtypes(t):
    text = ttir(REDUCE, consts={"T": t})
    if t.startswith("i"):
        assert ops(text, "arith.maxsi") and ops(text, "arith.minsi") and ops(text, "arith.addi")
        assert not ops(text, "arith.maximumf")
    cubin(text)


def test_shape_ops(tmp_path):
    text = ttir("""
kernel k<B: int = 32>(x: tensor<f32>[M, N], o: tensor<f32>[M, N]) {
    let t = load(x, tile=[B, B], at=[0, 0])
    let q = reshape(reshape(transpose(t), [B * B]), [B, B])
    let e = broadcast(cast<f32>(expand_dims(arange(8, 8 + B), 0)), [B, B])
    store(o, q + e + full<f32>[B, B](cast<f32>(program_id(0))), at=[0, 0])
}""")
    filecheck(text, r"""
CHECK: "tt.trans"({{.*}}) {order = array<i32: 1, 0>} : (tensor<32x32xf32>) -> tensor<32x32xf32>
CHECK: "tt.reshape"({{.*}}) : (tensor<32x32xf32>) -> tensor<1024xf32>
CHECK: "tt.reshape"({{.*}}) : (tensor<1024xf32>) -> tensor<32x32xf32>
CHECK: "tt.make_range"() {end = 40 : i32, start = 8 : i32} : () -> tensor<32xi32>
CHECK: "tt.expand_dims"({{.*}}) {axis = 0 : i32} : (tensor<32xi32>) -> tensor<1x32xi32>
CHECK: "tt.broadcast"({{.*}}) : (tensor<1x32xf32>) -> tensor<32x32xf32>
CHECK: "tt.splat"({{.*}}) : (f32) -> tensor<32x32xf32>
""", tmp_path)
    cubin(text)


def test_undef_is_zero_and_control_flow(tmp_path):
    text = ttir("""
kernel k<B: int = 64>(x: tensor<f32>[M, N], o: tensor<f32>[M]) {
    var acc: tile<f32>[B, 1]
    var k: i32
    k = 0
    acc = zeros<f32>[B, 1]
    for j in range(cdiv(N, B)) unroll(2) {
        acc += sum(load(x, tile=[B, B], at=[program_id(0), j]), axis=1, keepdims=true)
    }
    for j in range(0, 10, 2) { k += j }
    if k > 3 { acc = acc * 2.0 } else { acc = acc - 1.0 }
    store(o, reshape(acc, [B]), at=[program_id(0)])
}""")
    filecheck(text, r"""
CHECK: "arith.constant"() <{value = dense<0.000000e+00> : tensor<64x1xf32>}>
CHECK: "arith.constant"() <{value = 0 : i32}>
CHECK: "scf.for"
CHECK: {tt.loop_unroll_factor = 2 : i32}
CHECK: "scf.for"
CHECK: "scf.if"
CHECK: "scf.yield"
CHECK: "scf.yield"
""", tmp_path)
    b = cubin(text)
    # The unroll factor reached Triton's loop_unroll pass: the first loop became a main loop and a remainder.
    assert b.stages["ttir"].count("scf.for") > text.count('"scf.for"')


# ---- elementwise ops -------------------------------------------------------------------------------------------

ELEMENTWISE = """
kernel k<B: int = 128, T: dtype = f32>(x: tensor<T>[N], o: tensor<T>[N], s: T) {
    let t = load(x, tile=[B], at=[program_id(0)])
    let a = exp(t) + exp2(t) + log(t) + log2(t) + sqrt(t) + rsqrt(t) + sin(t) + cos(t) + tanh(t) + erf(t)
    let b = floor(t) + ceil(t) + abs(t) + sigmoid(t) + t ** t + t / (t + 1.0) + t % s - t + max(t, s) + min(t, s)
    let c = where(t > s, -t, t / s)
    store(o, a + b + c + cast<T>(-s / s), at=[program_id(0)])
}
"""


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64"])
def test_elementwise_ops_compile(t):
    text = ttir(ELEMENTWISE, consts={"T": t})
    # Triton 3.6 cannot legalize these: negation flips the sign bit; tanh and pow call libdevice.
    assert not ops(text, "arith.negf") and not ops(text, "math.tanh") and not ops(text, "math.powf")
    suffix = "f" if t != "f64" else ""
    symbols = re.findall(r'symbol = "(\w+)"', text)
    assert f"__nv_tanh{suffix}" in symbols and f"__nv_pow{suffix}" in symbols
    if t == "f64":
        assert ops(text, "arith.divf") and ops(text, "math.sqrt")
    elif t == "f32":  # Triton's `/` (div.full.f32, <= 2 ulp); IEEE sqrt
        assert ops(text, "arith.divf") and not ops(text, "tt.precise_divf")
        assert ops(text, "tt.precise_sqrt") and not ops(text, "math.sqrt")
    else:  # IEEE division and sqrt, computed in f32 and rounded once
        assert not ops(text, "arith.divf") and not ops(text, "math.sqrt")
        assert ops(text, "tt.precise_divf") and ops(text, "tt.precise_sqrt")
    ptx = cubin(text).stages["ptx"]
    if t == "f32":  # (`%` keeps a div.rn.f32: Triton's own lowering of arith.remf)
        assert "div.full.f32" in ptx and "sqrt.rn.f32" in ptx
    elif t != "f64":
        assert "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx and "div.full.f32" not in ptx


def test_negation_flips_the_sign_bit(tmp_path):
    text = ttir("kernel k(x: tensor<f32>[N]) { store(x, -load(x, tile=[16], at=[0]), at=[0]) }")
    filecheck(text, r"""
CHECK: %[[T:.*]] = "tt.load"
CHECK: %[[B:.*]] = "tt.bitcast"(%[[T]]) : (tensor<16xf32>) -> tensor<16xi32>
CHECK: %[[S:.*]] = "arith.constant"() <{value = dense<-2147483648> : tensor<16xi32>}>
CHECK: %[[X:.*]] = "arith.xori"(%[[B]], %[[S]])
CHECK: "tt.bitcast"(%[[X]]) : (tensor<16xi32>) -> tensor<16xf32>
""", tmp_path)
    cubin(text)


@pytest.mark.parametrize("t", ["i8", "i16", "i32", "i64"])
def test_integer_ops_compile(t):
    text = ttir("""
kernel k<B: int = 128, T: dtype = i32>(x: tensor<T>[N], o: tensor<T>[N], f: tensor<f32>[N], s: T) {
    let t = load(x, tile=[B], at=[program_id(0)], pad=7)
    let a = t + t * s - t / (s + 1) + t % 3 + (t & s) + (t | 1) + (t ^ s) + (t << 1) + (t >> 1) + abs(t) + max(t, s) + min(t, s) + (-t)
    let b = where(t > s and not (t == 3), a, cast<T>(t < s))
    store(o, b + cast<T>(load(f, tile=[B], at=[0])), at=[program_id(0)])
    store(f, cast<f32>(b) + cast<f32>(cast<bool>(t)) + cast<f32>(cast<bool>(load(f, tile=[B], at=[1]))), at=[0])
}""", consts={"T": t})
    cubin(text)


# ---- locations, modes ------------------------------------------------------------------------------------------

def test_locations_survive():
    text = ttir(VADD, file="vadd.tle")
    aliases = dict(re.findall(r"^(#loc\d*) = (loc\(.*\))$", text, re.MULTILINE))
    # Every op carries a location from the .tle file, none is unknown.
    assert "unknown" not in text
    load = ops(text, "tt.load")[0]
    ref = re.search(r"loc\((#loc\d*)\)$", load).group(1)
    assert aliases[ref].startswith('loc("vadd.tle":4:13')  # the first load() on line 4
    # and they reach the PTX line table, so ptxas errors and profilers point at .tle lines.
    ptx = cubin(text).stages["ptx"]
    assert re.search(r'\.file\s+\d+\s+".*vadd\.tle"', ptx)


def test_lower_returns_a_module():
    prog = load_program(VADD, "vadd.tle")
    k = check_kernel(prog, "vadd", {})
    tle_module = ast_to_tle(k, default_spec(k))
    before = str(tle_module)
    module = lower(tle_module)
    assert print_ttir(module) == tle_to_ttir(tle_module)
    assert str(tle_module) == before  # the input is not modified
    with pytest.raises(ValueError, match="mode"):
        lower(tle_module, mode="block")


def test_descriptor_mode_uses_tma_for_zero_padded_2d_tiles(tmp_path):
    text = ttir(MATMUL, spec="all16", mode="descriptor")
    # One descriptor per (view, tile shape), built once before the loop; the loop loads through them.
    filecheck(text, r"""
CHECK: ^bb0(%[[A:[a-z0-9]+]]: !tt.ptr<f16> {{[^,]*}}, %[[M:[a-z0-9]+]]: i32 {{[^,]*}}, %[[K:[a-z0-9]+]]: i32 {{[^,]*}}, %[[SA:[a-z0-9]+]]: i32
CHECK: %[[SA64:.*]] = "arith.extsi"(%[[SA]]) : (i32) -> i64
CHECK: %[[DA:.*]] = "tt.make_tensor_descriptor"(%[[A]], %[[M]], %[[K]], %[[SA64]], %{{.*}}) : (!tt.ptr<f16>, i32, i32, i64, i64) -> !tt.tensordesc<tensor<64x32xf16>>
CHECK: "tt.make_tensor_descriptor"
CHECK: "tt.make_tensor_descriptor"
CHECK: "scf.for"
CHECK: "tt.descriptor_load"(%[[DA]], %{{.*}}, %{{.*}}) : (!tt.tensordesc<tensor<64x32xf16>>, i32, i32) -> tensor<64x32xf16>
CHECK: "tt.descriptor_load"
CHECK: "tt.dot"
CHECK: "tt.descriptor_store"
""", tmp_path)
    assert not ops(text, "tt.load") and not ops(text, "tt.store")
    b = cubin(text)
    assert "cp.async.bulk.tensor.2d" in b.stages["ptx"]
    # Device-side descriptors live in Triton's global scratch: the runtime must call triton.set_allocator.
    assert b.extra["scratch"][0]["size"] > 0


def test_descriptor_mode_falls_back_to_pointers(tmp_path):
    # Row stride not known to be 16-byte aligned (default spec): TMA cannot take it.
    assert not ops(ttir(MATMUL, mode="descriptor"), "tt.make_tensor_descriptor")
    # Padding other than zero (TMA fills with zeros): pointers, masked, with the padding.
    text = ttir(SOFTMAX, spec="all16", mode="descriptor")
    assert not ops(text, "tt.make_tensor_descriptor") and ops(text, "tt.load")
    cubin(text)


def test_unit_axis_reshape_becomes_expand_dims():
    """Inserting size-1 axes lowers to tt.expand_dims, which Triton's axis analysis sees through (tt.reshape
    would hide the contiguity of an arange and scalarise the masks built from it); a real reshape stays."""
    src = """
kernel k<B: int = 64>(x: tensor<f32>[M, N], y: tensor<f32>[M, N], z: tensor<f32>[4, 16]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0])
    store(y, where(reshape(arange(0, B), [1, B]) < N, t, 0.0), at=[program_id(0), 0])
    store(z, reshape(reshape(t, [B]), [4, 16]), at=[0, 0])
}
"""
    from tle.abi import default_spec
    from tle.check import check_kernel, load_program
    from tle.lowering.ast_to_tle import ast_to_tle
    from tle.lowering.tle_to_ttir import tle_to_ttir
    kernel = check_kernel(load_program(src, "r.tle"), "k", {})
    ttir = tle_to_ttir(ast_to_tle(kernel, default_spec(kernel)))
    assert '"tt.expand_dims"' in ttir and "(tensor<64xi32>) -> tensor<1x64xi32>" in ttir
    reshapes = [line for line in ttir.splitlines() if '"tt.reshape"' in line]
    assert len(reshapes) == 2  # [1, 64] -> [64] and [64] -> [4, 16] are real reshapes
    assert not any("tensor<64xi32>) -> tensor<1x64xi32>" in r for r in reshapes)


TMA_HINT = """
kernel k(x: tensor<f16>[M, N], y: tensor<f16>[M, N], z: tensor<f16>[M, N]) {
    let a = load(x, tile=[16, 64], at=[program_id(0), 0], tma=true)
    let b = load(x, tile=[16, 64], at=[program_id(0), 1])
    let c = load(x, tile=[16, 64], at=[program_id(0), 2], pad=-inf, tma=true)
    store(y, a + b, at=[program_id(0), 0], tma=true)
    store(z, c, at=[program_id(0), 0])
}
"""


def test_tma_hint_takes_descriptors_only_where_asked_and_allowed():
    """tma=true moves that load or store through a descriptor; a load of the same view and shape without it, a
    load padded with -inf (TMA fills zeros) and a store without it keep pointers."""
    text = ttir(TMA_HINT, spec="all16")
    assert len(ops(text, "tt.make_tensor_descriptor")) == 2  # x's and y's [16, 64]; z's store keeps pointers
    assert len(ops(text, "tt.descriptor_load")) == 1 and len(ops(text, "tt.descriptor_store")) == 1
    assert len(ops(text, "tt.load")) == 2 and len(ops(text, "tt.store")) == 1
    cubin(text)
    # Row strides not known 16-byte aligned: the hint cannot be taken, every access keeps pointers.
    generic = ttir(TMA_HINT)
    assert not ops(generic, "tt.make_tensor_descriptor") and len(ops(generic, "tt.load")) == 3


TMA_THROUGH_A_SLICE = """
kernel k(x: tensor<f16>[M, N], y: tensor<f16>[M, N]) {
    let w = slice(x, start=[program_id(0) * 3, 0], shape=[40, N])
    store(y, load(w, tile=[16, 64], at=[1, 0], tma=true) + load(x, tile=[16, 64], tma=true), at=[0, 0])
}
"""


def test_tma_hint_through_a_slice_keeps_pointers():
    """Descriptors are built once at the kernel's start, for whole tensors: a load through a slice (a window that
    starts per program) keeps pointers from the window's base; the whole tensor's load beside it takes one."""
    text = ttir(TMA_THROUGH_A_SLICE, spec="all16")
    assert len(ops(text, "tt.make_tensor_descriptor")) == 1 and len(ops(text, "tt.descriptor_load")) == 1
    assert len(ops(text, "tt.load")) == 1
    cubin(text)


def test_tma_hint_needs_a_target_with_tma():
    """Before sm_90 there is no TMA (Triton would rewrite descriptors into pointer code that has lost the
    alignment facts): compile_kernel lowers tma=true accesses to pointers there, and keeps them on sm_90."""
    from tle.abi import Spec, all_args, default_spec
    from tle.check import check_kernel, load_program
    from tle.compiler import compile_kernel
    prog = load_program(TMA_HINT, "k.tle")
    k = check_kernel(prog, "k", {})
    spec = Spec(frozenset(a.key for a in all_args(k)), default_spec(k).unit_strides)
    sm80 = compile_kernel(prog, "k", {}, spec, backend="triton", arch="sm_80", stop="ttir").stages["ttir"]
    sm90 = compile_kernel(prog, "k", {}, spec, backend="triton", arch="sm_90", stop="ttir").stages["ttir"]
    assert not ops(sm80, "tt.make_tensor_descriptor") and len(ops(sm80, "tt.load")) == 3
    assert len(ops(sm90, "tt.make_tensor_descriptor")) == 2


def test_row_beside_a_gather_shares_its_layout():
    """tests/filecheck/gather_beside_row.tle (GroupNorm's second pass): the [1, 4096] row read beside a [4096]
    gather of per-channel weights is loaded 1-D, so Triton gives both one layout. Loaded 2-D, the gather got one
    element a thread and each iteration converted it through shared memory (stmatrix), and its `col / HW` ran per
    element instead of once per 4 (HW divisible by 16): 33 div.s32 against 9 (one outside the loops)."""
    path = os.path.join(os.path.dirname(__file__), "..", "filecheck", "gather_beside_row.tle")
    ptx = cubin(ttir(open(path).read(), "group_norm", {"BLOCK": 4096}, spec="all16", file=path)).stages["ptx"]
    assert "stmatrix" not in ptx and ptx.count("bar.sync") <= 2  # the barriers of sum(s), outside the loops
    assert ptx.count("div.s32") <= 9
    assert ptx.count("ld.global.v4") == 16  # the row's two reads stay 16-byte vectors

def test_attention_keeps_q_in_shared_memory_for_its_first_dot():
    """examples/attention.tle loads each head as reshape(load(q, tile=[1, BM, D], ...), [BM, D]). Loaded squeezed
    (no tt.reshape), Q goes straight into an NVMMA shared-memory tile that the loop's first wgmma reads; through a
    tt.reshape it was copied out of shared memory into registers on every iteration (0.92x of hand-written Triton
    on the H200, benchmarks/RESULTS.md)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "attention.tle")
    src = open(path).read()
    text = ttir(src, "attention", {"BM": 128, "BN": 64, "D": 64}, spec="all16", file=path)
    assert not ops(text, "tt.reshape")
    ttgir = cubin(text, num_warps=4, num_stages=3).stages["ttgir"]
    loop = ttgir[ttgir.index("scf.for"):]
    assert "ttg.local_load" not in loop, "Q is reloaded from shared memory inside the loop"
    dots = [line for line in loop.splitlines() if "ttng.warp_group_dot " in line]
    # two loops (whole key tiles, then the masked ones), each with Q K^T reading Q from shared memory, then P V
    assert len(dots) == 4 and all("!ttg.memdesc<128x64x" in d.split("*")[0] for d in dots[0::2])
