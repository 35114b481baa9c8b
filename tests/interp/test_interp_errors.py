"""What the interpreter checks that the GPU cannot: each error is a TleError at the .tle location of the op that
went wrong, naming what went wrong and in which program."""
import pytest
import torch

from interp_harness import build, cdiv, run
from tle.diagnostics import TleError, render
from tle.runtime.interpreter import compile_kernel


def position(src: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the nth occurrence of needle in src."""
    at = -1
    for _ in range(nth + 1):
        at = src.index(needle, at + 1)
    before = src[:at]
    return before.count("\n") + 1, at - (before.rfind("\n") + 1) + 1


def raises_at(src: str, needle: str, fn, *message_parts, nth: int = 0) -> TleError:
    with pytest.raises(TleError) as info:
        fn()
    err = info.value
    assert (err.span.line, err.span.col) == position(src, needle, nth), render(err)
    for part in message_parts:
        assert part in err.message, err.message
    assert "error:" in render(err)
    return err


GATHER = """
kernel g<BLOCK: int = 16>(x: tensor<f32>[N], idx: tensor<i32>[M], y: tensor<f32>[M]) {
    let i = program_id(0)
    let j = load(idx, tile=[BLOCK], at=[i])
    let live = arange(0, BLOCK) + i * BLOCK < M
    store(y, gather(x, j, mask=live), at=[i])
}
"""


@pytest.mark.parametrize("bad", [-1, 10, 12345])
def test_out_of_bounds_gather(bad):
    x, idx, y = torch.randn(10), torch.zeros(40, dtype=torch.int32), torch.zeros(40)
    idx[21] = bad  # program 1, lane 5
    err = raises_at(GATHER, "gather(", lambda: run(GATHER, "g", (3, 1, 1), {"x": x, "idx": idx, "y": y},
                                                    file="gather_oob.tle"),
                    "'x'", "axis 0", f"index {bad}", "[0, 10)", "program (1, 0, 0)", "[5]")
    assert err.span.file == "gather_oob.tle"
    assert str(err).startswith(f"gather_oob.tle:{position(GATHER, 'gather(')[0]}:")


def test_masked_off_lanes_are_not_checked():
    x, idx, y = torch.randn(10), torch.full((40,), 7, dtype=torch.int32), torch.zeros(40)
    # The last program's tile reads idx past M = 40 (padded with 0) and its lanes past M are masked off.
    run(GATHER, "g", (3, 1, 1), {"x": x, "idx": idx, "y": y})
    assert torch.equal(y, x[7].expand(40))
    idx[39] = 10  # a live lane
    with pytest.raises(TleError):
        run(GATHER, "g", (3, 1, 1), {"x": x, "idx": idx, "y": y})


def test_out_of_bounds_scatter_and_atomic_in_2d():
    src = """
    kernel s(x: tensor<f32>[M, N], r: tensor<i32>[8], c: tensor<i32>[8]) {
        let rows = load(r, tile=[8])
        let cols = load(c, tile=[8])
        scatter(x, [rows, cols], ones<f32>[8])
        atomic_add(x, [cols, rows], ones<f32>[8])
    }
    """
    x = torch.zeros(4, 6)
    r, c = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3], dtype=torch.int32), torch.arange(8, dtype=torch.int32) % 6
    c[6] = 6
    raises_at(src, "scatter(", lambda: run(src, "s", (1, 1, 1), {"x": x, "r": r, "c": c}),
              "scatter to 'x'", "axis 1", "index 6", "[0, 6)", "[6]")
    c[6] = 0
    raises_at(src, "atomic_add(", lambda: run(src, "s", (1, 1, 1), {"x": x, "r": r, "c": c}),
              "atomic_add on 'x'", "axis 0", "index 4", "[0, 4)", "[4]")


UNINIT_LOOP = """
kernel u(y: tensor<f32>[16], n: i32) {
    var acc: tile<f32>[16]
    for i in range(n) {
        acc = acc + 1.0
    }
    store(y, acc)
}
"""


def test_read_of_uninitialised_var_in_a_loop():
    y = torch.zeros(16)
    err = raises_at(UNINIT_LOOP, "acc + 1.0", lambda: run(UNINIT_LOOP, "u", (1, 1, 1), {"y": y}, {"n": 3}),
                    "read of uninitialised var 'acc'", "program (0, 0, 0)")
    assert err.notes and err.notes[0].span.line == position(UNINIT_LOOP, "var acc")[0]
    # With no iteration the poison flows out of the loop and the store reads it.
    raises_at(UNINIT_LOOP, "store(", lambda: run(UNINIT_LOOP, "u", (1, 1, 1), {"y": y}, {"n": 0}),
              "read of uninitialised var 'acc'")


UNINIT_IF = """
kernel u2(y: tensor<i32>[N]) {
    let i = program_id(0)
    var m: i32
    var k: i32
    k = 5
    if i < 3 { m = i * 10 }
    store(y, full<i32>[1](m + k), at=[i])
}
"""


def test_var_assigned_in_one_branch_is_an_error_only_where_the_other_runs():
    y = torch.zeros(5, dtype=torch.int32)
    run(UNINIT_IF, "u2", (3, 1, 1), {"y": y})  # every program takes the branch that assigns m
    assert y[:3].tolist() == [5, 15, 25]
    raises_at(UNINIT_IF, "m + k", lambda: run(UNINIT_IF, "u2", (5, 1, 1), {"y": y}),
              "read of uninitialised var 'm'", "program (3, 0, 0)")


def test_var_assigned_before_every_read_is_fine():
    src = """
    kernel ok(y: tensor<f32>[4]) {
        var m: f32
        for i in range(3) { m = cast<f32>(i) }
        var t: tile<f32>[4]
        if m > 1.0 { t = full<f32>[4](m) } else { t = zeros<f32>[4] }
        store(y, t)
    }
    """
    y = torch.zeros(4)
    run(src, "ok", (1, 1, 1), {"y": y})
    assert y.tolist() == [2.0] * 4


SCATTER = """
kernel sc(x: tensor<f32>[N], idx: tensor<i32>[M], v: tensor<f32>[M]) {
    let i = program_id(0)
    let live = arange(0, 8) + i * 8 < M
    scatter(x, load(idx, tile=[8], at=[i]), load(v, tile=[8], at=[i]), mask=live)
}
"""


def test_conflicting_scatter_in_one_program():
    x = torch.zeros(10)
    idx = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 8], dtype=torch.int32)
    v = torch.arange(12, dtype=torch.float32)
    v[10] = 2.0  # lane 10 (program 1) writes the same value to element 2 as lane 2 (program 0): different programs
    idx[9], v[9] = 8, 99.0  # lanes 8 and 9 of program 1 write 8.0 and 99.0 to element 8
    raises_at(SCATTER, "scatter(", lambda: run(SCATTER, "sc", (2, 1, 1), {"x": x, "idx": idx, "v": v}),
              "'x'", "8.0", "99.0", "[8]", "program (1, 0, 0)")


def test_same_value_scatter_is_fine():
    x = torch.zeros(10)
    idx = torch.tensor([0, 1, 2, 3, 3, 3, 6, 7, 7, 9, 2, 7], dtype=torch.int32)
    v = torch.tensor([0, 1, 2, 3, 3, 3, 6, 7, 7, 9, 2, 7], dtype=torch.float32)
    run(SCATTER, "sc", (2, 1, 1), {"x": x, "idx": idx, "v": v})
    assert x.tolist() == [0, 1, 2, 3, 0, 0, 6, 7, 0, 9]


@pytest.mark.parametrize("per_program", [False, True])
def test_conflicting_scatter_across_programs(per_program):
    src = SCATTER
    if per_program:  # an if on program_id makes the interpreter run programs one at a time
        src = SCATTER.replace("    scatter(", "    if i >= 0 {\n    scatter(")
        src = src.replace("mask=live)\n", "mask=live)\n    }\n")
    x = torch.zeros(10)
    idx = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3], dtype=torch.int32)
    v = torch.arange(12, dtype=torch.float32)
    compiled_batched = compile_kernel(build(src, "sc")[2]).batched
    assert compiled_batched != per_program
    err = raises_at(src, "scatter(", lambda: run(src, "sc", (2, 1, 1), {"x": x, "idx": idx, "v": v}),
                    "programs (0, 0, 0) and (1, 0, 0)", "2.0", "10.0", "[2]", "depends on which runs last")
    assert err


def test_scatter_in_a_loop_rewriting_its_own_elements_is_fine():
    src = """
    kernel again(x: tensor<i32>[8]) {
        for k in range(3) { scatter(x, arange(0, 8), full<i32>[8](k)) }
    }
    """
    x = torch.zeros(8, dtype=torch.int32)
    run(src, "again", (1, 1, 1), {"x": x})
    assert x.tolist() == [2] * 8


ARITH = """
kernel ar(a: tensor<i32>[N], b: tensor<i32>[N], f: tensor<f32>[N], q: tensor<i32>[N]) {
    let i = program_id(0)
    let x = load(a, tile=[4], at=[i])
    let y = load(b, tile=[4], at=[i], pad=1)
    store(q, x / y, at=[i])
    store(q, x << y, at=[i])
    store(q, cast<i32>(load(f, tile=[4], at=[i])), at=[i])
}
"""


def arith_tensors():
    return torch.ones(8, dtype=torch.int32), torch.ones(8, dtype=torch.int32), torch.zeros(8), \
        torch.zeros(8, dtype=torch.int32)


def test_integer_division_by_zero():
    a, b, f, q = arith_tensors()
    b[6] = 0
    raises_at(ARITH, "x / y", lambda: run(ARITH, "ar", (2, 1, 1), {"a": a, "b": b, "f": f, "q": q}),
              "integer division by zero", "program (1, 0, 0)", "[2]")


def test_shift_out_of_range():
    a, b, f, q = arith_tensors()
    b[1] = 32
    raises_at(ARITH, "x << y", lambda: run(ARITH, "ar", (2, 1, 1), {"a": a, "b": b, "f": f, "q": q}),
              "shift by 32", "program (0, 0, 0)")


@pytest.mark.parametrize("value", [3e9, -3e9, float("nan"), float("inf")])
def test_float_to_int_cast_out_of_range(value):
    a, b, f, q = arith_tensors()
    f[5] = value
    raises_at(ARITH, "cast<i32>", lambda: run(ARITH, "ar", (2, 1, 1), {"a": a, "b": b, "f": f, "q": q}),
              "to i32 is out of range", "program (1, 0, 0)")
    f[5] = -2147483648.0  # in range
    run(ARITH, "ar", (2, 1, 1), {"a": a, "b": b, "f": f, "q": q})
    assert q[5].item() == -2 ** 31


def test_atomic_max_of_nan():
    src = """
    kernel am(x: tensor<f32>[4], v: tensor<f32>[4]) {
        atomic_max(x, arange(0, 4), load(v, tile=[4]))
    }
    """
    v = torch.tensor([1.0, float("nan"), 2.0, 3.0])
    raises_at(src, "atomic_max(", lambda: run(src, "am", (1, 1, 1), {"x": torch.zeros(4), "v": v}),
              "atomic_max of NaN", "program (0, 0, 0)")


def test_view_outside_the_storage():
    src = """
    kernel v(x: tensor<f32>[N], y: tensor<f32>[N]) {
        store(y, load(x, tile=[16]))
    }
    """
    kernel, spec, module = build(src, "v")
    compiled = compile_kernel(module)
    x, y = torch.zeros(10), torch.zeros(10)
    with pytest.raises(TleError) as info:
        compiled.run((1, 1, 1), [x, 11, y])  # N = 11 but x holds 10 elements
    assert "'x'" in info.value.message and "storage of 10" in info.value.message
    assert (info.value.span.line, info.value.span.col) == position(src, "x: tensor")
    with pytest.raises(TleError, match="dtype torch.float64"):
        compiled.run((1, 1, 1), [x.double(), 10, y])
    with pytest.raises(TypeError, match="takes 3 arguments"):
        compiled.run((1, 1, 1), [x, 10])
    with pytest.raises(OverflowError):
        compiled.run((1, 1, 1), [x, 2 ** 31, y])
