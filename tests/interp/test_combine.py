"""scan() and reduce() with a combine fn, and cumprod / cummax / cummin / reverse=, on the interpreter.

The golden programs (tests/filecheck/scan_combine.tle, reduce_combine.tle, cumulative.tle) run a linear recurrence
both ways, Welford's moments, a segmented sum and the cumulative builtins against torch on the interpreter and on
both GPU paths. Here: what only the interpreter checks (an identity that is not one), the corners of the
language (reduce without an axis, keepdims, a scalar operand, f16 and integer combines, fns calling fns), and
which path the legality check gives such kernels.
"""
import pytest
import torch

from interp_harness import build, run
from tle.diagnostics import TleError
from tle.lowering.tileir_legality import tileir_blockers

LINEAR = """
fn linear(a1, b1, a2, b2) {
    return a1 * a2, a2 * b1 + b2
}
kernel k(a: tensor<f32>[N], b: tensor<f32>[N], h: tensor<f32>[N]) {
    let ta = load(a, tile=[32])
    let tb = load(b, tile=[32])
    let _, hs = scan(ta, tb, axis=0, combine=linear, identity=IDENTITY)
    store(h, hs)
}
"""


def test_an_identity_that_is_not_one_is_reported_at_the_scan():
    a, b = torch.rand(32) + 0.5, torch.randn(32)
    with pytest.raises(TleError) as err:
        run(LINEAR.replace("IDENTITY", "[0.0, 0.0]"), "k", (1,), {"a": a, "b": b, "h": torch.empty(32)})
    e = err.value
    assert e.span.line == 8 and e.span.col == 17
    assert e.message.startswith("identity=[0.0, 0.0] is not an identity of combine fn 'linear': linear(identity, x) "
                                "gives 0.0 for operand 1, not x's ")
    assert e.message.endswith("at tile element [0] in program (0, 0, 0)")


def test_a_right_identity_passes_and_the_recurrence_is_sequential():
    a, b = torch.rand(32) + 0.5, torch.randn(32)
    h = torch.empty(32)
    run(LINEAR.replace("IDENTITY", "[1.0, 0.0]"), "k", (1,), {"a": a, "b": b, "h": h})
    want, acc = torch.empty(32), torch.zeros(())
    for i in range(32):
        acc = a[i] * acc + b[i]
        want[i] = acc
    assert torch.equal(h, want)  # the same f32 operations in the same order


def test_identity_is_checked_only_where_the_operands_are_finite():
    a, b = torch.rand(32) + 0.5, torch.randn(32)
    a[3] = float("inf")  # inf * 0 + b is NaN, not b: no identity survives an infinite factor
    run(LINEAR.replace("IDENTITY", "[1.0, 0.0]"), "k", (1,), {"a": a, "b": b, "h": torch.empty(32)})


REDUCE = """
fn add_max(s1, m1, s2, m2) {
    return s1 + s2, max(m1, m2)
}
kernel k(x: tensor<i32>[M, N], s: tensor<i32>[M], m: tensor<i32>[M], total: tensor<i32>[1], kept: tensor<i32>[M, 1]) {
    let t = load(x, tile=[4, 16])
    let rs, rm = reduce(t, t, axis=1, combine=add_max)
    store(s, rs)
    store(m, rm)
    let ws, wm = reduce(t, t, combine=add_max, keepdims=true)
    store(total, reshape(ws, [1]))
    let ks, km = reduce(t, -1, axis=1, combine=add_max, keepdims=true)
    store(kept, ks + km)
}
"""


def test_reduce_along_an_axis_over_the_whole_tile_and_with_keepdims():
    x = torch.randint(-100, 100, (4, 16), dtype=torch.int32)
    out = {n: torch.empty(shape, dtype=torch.int32) for n, shape in
           (("s", (4,)), ("m", (4,)), ("total", (1,)), ("kept", (4, 1)))}
    run(REDUCE, "k", (1,), {"x": x, **out})
    assert torch.equal(out["s"], x.sum(1, dtype=torch.int32))
    assert torch.equal(out["m"], x.amax(1))
    assert out["total"].item() == x.sum().item()
    assert torch.equal(out["kept"], (x.sum(1, dtype=torch.int32) - 1)[:, None])  # the scalar -1 is splat: max is -1


def test_reduce_keepdims_without_axis_keeps_every_axis():
    _, _, module = build(REDUCE, "k")
    module.operation.verify()
    text = str(module)
    assert "(tensor<64xi32>, tensor<64xi32>) -> (i32, i32)" in text  # the whole tile, as one row, to scalars
    assert '"tle.splat"(%9#0) : (i32) -> tensor<1x1xi32>' in text  # keepdims: [1, 1]


HALF = """
fn mul_add(a, b) {
    return a * b + 1.0
}
kernel k(x: tensor<f16>[N], y: tensor<f16>[N]) {
    store(y, scan(load(x, tile=[16]), axis=0, combine=mul_add))
}
"""


def test_an_f16_combine_rounds_each_op_to_f16():
    x = (torch.rand(16) * 0.5 + 0.5).half()
    y = torch.empty(16, dtype=torch.float16)
    run(HALF, "k", (1,), {"x": x, "y": y})
    acc, want = x[0], [x[0]]
    for i in range(1, 16):
        acc = ((acc.float() * x[i].float()).half().float() + 1.0).half()  # mulf, then addf, each in f16
        want.append(acc)
    assert torch.equal(y, torch.stack(want))


NESTED = """
fn larger(a, b) {
    return where(b > a, b, a)
}
fn pick(v1, j1, v2, j2) {
    return larger(v1, v2), where(v2 > v1, j2, j1)
}
kernel k<W: int = 8>(x: tensor<f32>[M, N], best: tensor<i32>[M]) {
    let t = load(x, tile=[2, W])
    let v, i = reduce(t, broadcast(expand_dims(arange(W), 0), [2, W]), axis=1, combine=pick)
    store(best, i)
}
"""


def test_a_combine_fn_may_call_fns():
    src = NESTED
    x = torch.randn(2, 8)
    x[1, 6] = x[1, 2] = 9.0  # a tie: the fn keeps the earlier index
    best = torch.empty(2, dtype=torch.int32)
    run(src, "k", (1,), {"x": x, "best": best})
    assert best.tolist() == [int(x[0].argmax()), 2]


def test_the_legality_check_sends_a_combine_without_identity_to_the_native_path():
    src = LINEAR.replace(", identity=IDENTITY", "")
    _, _, module = build(src, "k", file="lin.tle")
    reasons = [b for b in tileir_blockers(module, "sm_90") if b.span is not None and b.span.line > 0]
    assert len(reasons) == 1
    assert reasons[0].reason.startswith("scan() with combine= and no identity=: Tile IR's scan needs the combine "
                                        "fn's identity")
    assert (reasons[0].span.line, reasons[0].span.col) == (8, 17)
    _, _, module = build(LINEAR.replace("IDENTITY", "[1.0, 0.0]"), "k")
    assert [b for b in tileir_blockers(module, "sm_90") if b.span is not None and b.span.line > 0] == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_builtins_forwards_and_backwards(dtype, kind, reverse):
    src = f"""
kernel k(x: tensor<T>[M, N], y: tensor<T>[M, N]) {{
    store(y, {kind}(load(x, tile=[4, 32]), axis=1, reverse={'true' if reverse else 'false'}))
}}""".replace("T", "f32" if dtype == torch.float32 else "i32")
    x = (torch.rand(4, 32) + 0.5) if dtype == torch.float32 else torch.randint(-3, 4, (4, 32), dtype=torch.int32)
    if dtype == torch.float32:
        x[1, 5] = float("nan")
    y = torch.empty_like(x)
    run(src, "k", (1,), {"x": x, "y": y})
    t = x.flip(1) if reverse else x
    if kind in ("cummax", "cummin"):
        want = getattr(torch, kind)(t, 1).values
    else:
        want = getattr(torch, kind)(t.double() if dtype == torch.float32 else t.long(), 1).to(dtype)
    want = want.flip(1) if reverse else want
    if dtype == torch.float32:
        torch.testing.assert_close(y, want, equal_nan=True, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(y, want)


def test_a_scan_in_a_loop_the_launch_facts_split_is_built_in_each_half():
    """L = 100 with BT = 64: the launch facts split the time loop into an unchecked first chunk and a checked rest
    (tle/abi.py LoopSplit), so ast_to_tle lowers the body twice; each half gets its own scan and reduce."""
    import os
    from tle.abi import all_args, spec_of
    from tle.check import check_kernel, load_program
    from tle.lowering.ast_to_tle import ast_to_tle
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "linear_recurrence.tle")
    kernel = check_kernel(load_program(open(path).read(), path), "linear_recurrence", {"BT": 64, "BD": 64})
    a = torch.empty(2, 100, 64)
    sizes = {"B": 2, "L": 100, "D": 64}
    values = {arg.key: a if arg.kind == "ptr" else sizes.get(arg.key, 64 * 100 if arg.key.endswith("0") else 64)
              for arg in all_args(kernel)}
    module = ast_to_tle(kernel, spec_of(kernel, values, (1, 2, 1)))
    module.operation.verify()
    text = str(module)
    assert text.count("tle.split") == 2 and text.count('"tle.combine_scan"') == 2
    assert text.count('"tle.combine_reduce"') == 2 and text.count("func.func private") == 4


LOGCUMSUMEXP = """
fn log_add(a, b) {
    let hi = max(a, b)
    return GUARD
}
kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, scan(load(x, tile=[64], pad=-inf), axis=0, combine=log_add, identity=-inf))
}
"""


def test_an_identity_the_fn_cannot_combine_with_itself_is_reported():
    """log(e^a + e^b) written directly gives NaN for two -inf (inf - inf), and Tile IR may combine two paddings."""
    naive = LOGCUMSUMEXP.replace("GUARD", "hi + log(1.0 + exp(-abs(a - b)))")
    x = torch.randn(64)
    with pytest.raises(TleError) as err:
        run(naive, "k", (1,), {"x": x, "y": torch.empty(64)})
    assert err.value.message == ("identity=[-inf] is not an identity of combine fn 'log_add': log_add(identity, "
                                 "identity) gives nan for operand 1, not -inf")
    assert (err.value.span.line, err.value.span.col) == (7, 14)
    guarded = LOGCUMSUMEXP.replace("GUARD", "where(hi == -inf, hi, hi + log(1.0 + exp(-abs(a - b))))")
    y = torch.empty(64)
    run(guarded, "k", (1,), {"x": x, "y": y})
    torch.testing.assert_close(y, torch.logcumsumexp(x, 0), rtol=1e-5, atol=1e-5)


LINEAR_REDUCE = """
fn linear(a1, b1, a2, b2) {
    return a1 * a2, a2 * b1 + b2
}
kernel k(a: tensor<f32>[N], b: tensor<f32>[N], h: tensor<f32>[1]) {
    let ta = load(a, tile=[32])
    let tb = load(b, tile=[32])
    let _, last = reduce(ta, tb, axis=0, combine=linear, identity=[1.0, 0.0], commutative=true)
    store(h, full<f32>[1](last))
}
"""


def test_commutative_true_on_a_fn_that_does_not_commute_is_reported_at_the_reduce():
    a, b = torch.rand(32) + 0.5, torch.randn(32)
    with pytest.raises(TleError) as err:
        run(LINEAR_REDUCE, "k", (1,), {"a": a, "b": b, "h": torch.empty(1)})
    e = err.value
    assert (e.span.line, e.span.col) == (8, 19)
    assert e.message.startswith("combine fn 'linear' does not commute, but this reduce() says commutative=true: "
                                "with the fold of elements 0..0 as a and element 1 as b, linear(a, b) gives ")
    assert "for result 2" in e.message
    assert any("drop commutative=true" in n.message for n in e.notes)


def test_commutative_true_holds_where_the_data_makes_the_fn_commute():
    """The check is on the values the reduce meets: with every decay 1 the recurrence is a plain sum, which
    commutes; the result is the sequential fold either way."""
    b = torch.randn(32)
    h = torch.empty(1)
    run(LINEAR_REDUCE, "k", (1,), {"a": torch.ones(32), "b": b, "h": h})
    want = torch.zeros(())
    for v in b:
        want = want + v
    assert torch.equal(h[0], want)


SUB_SCAN = """
fn sub(a, b) {
    return a - b
}

kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {
    store(y, scan(load(x, tile=[32]), axis=0, combine=sub))
}
"""


def test_a_combine_fn_that_is_not_associative_is_reported_at_the_scan():
    # the interpreter folds in order, so it alone would give one answer; the GPU's tree gives another
    with pytest.raises(TleError) as err:
        run(SUB_SCAN, "k", (1,), {"x": torch.randn(32), "y": torch.empty(32)})
    e = err.value
    assert (e.span.line, e.span.col) == (7, 14)
    assert e.message.startswith("combine fn 'sub' is not associative: with elements 0, 1 and 2 as a, b and c, "
                                "sub(sub(a, b), c) gives ")
    assert any("a tree, in an order of its choosing" in n.message for n in e.notes)


def test_rounding_alone_does_not_make_a_fn_unassociative():
    # a linear recurrence with values of very different sizes: (a1 a2) a3 and a1 (a2 a3) differ only by rounding
    g = torch.Generator().manual_seed(5)
    a, b = torch.rand(32, generator=g) * 4, torch.randn(32, generator=g) * 1e6
    h = torch.empty(1)
    run(LINEAR_REDUCE.replace(", commutative=true", ""), "k", (1,), {"a": a, "b": b, "h": h})
    assert torch.isfinite(h).all()


def test_tlec_v_names_each_order_keeping_reduce_and_the_way_out(capsys):
    """Only `moments` in reduce_combine.tle: moments_any_order says commutative=true, and steps_and_last's reduce
    takes the last element of the scan before it."""
    import os
    from tle.cli import main
    path = os.path.join(os.path.dirname(__file__), "..", "filecheck", "reduce_combine.tle")
    assert main([path, "--emit=ttir", "-v", "-o", os.devnull]) == 0
    lines = [l for l in capsys.readouterr().err.splitlines() if "keeps the elements' order" in l]
    assert len(lines) == 1, lines
    assert lines[0].startswith("tlec: kernel 'moments': the reduce() at ") and "reduce_combine.tle:21:19" in lines[0]
    assert "'welford' need not commute" in lines[0] and "commutative=true" in lines[0]
