"""The interpreter's padded-lanes check (runtime/padded_lanes.py): a TlePaddingWarning where a result takes in the
lanes a load padded past its tensor's edge, and none where the kernel keeps them out (an identity pad, a where(),
whole rows of a block past the tensor, a forward scan, a sort padded to sort last); flip, take and sort networks
move the padding with the elements."""
import warnings

import pytest
import torch

import tle
from tle import TlePaddingWarning


def launch(source: str, kernel: str, grid, *args, **consts):
    """Run `kernel` on the interpreter; the TlePaddingWarnings it gave, as text."""
    mod = tle.compile(source)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", TlePaddingWarning)
        getattr(mod, kernel)[grid](*args, **consts)
    return [str(w.message) for w in seen if issubclass(w.category, TlePaddingWarning)]


ROW_MAX = """
kernel row_max<B: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0])
    store(y, max(t, axis=1), at=[program_id(0)])
}
"""


def test_max_over_a_row_padded_with_0_warns_and_keeps_the_defined_value():
    x = -1 - torch.rand(3, 6)
    y = torch.empty(3)
    got = launch(ROW_MAX, "row_max", (3,), x, y)
    assert len(got) == 1
    first = got[0].splitlines()
    assert "warning: max along axis 1 takes in lanes past the edge of 'x', which hold padding: in program " \
           "(0, 0, 0) the result at tile element [0] is 0 with them and" in first[0]
    assert any("note: the load that pads 'x' with 0" in line for line in first)
    assert torch.equal(y, torch.zeros(3))  # the GPU's value too: the padded 0 is the largest


def test_rows_that_fill_the_tile_do_not_warn():
    x = -1 - torch.rand(3, 8)
    y = torch.empty(3)
    assert launch(ROW_MAX, "row_max", (3,), x, y) == []
    assert torch.equal(y, x.amax(1))


def test_a_pad_that_the_reduction_leaves_unchanged_does_not_warn():
    src = ROW_MAX.replace("at=[program_id(0), 0])", "at=[program_id(0), 0], pad=-inf)")
    x = -1 - torch.rand(3, 6)
    y = torch.empty(3)
    assert launch(src, "row_max", (3,), x, y) == []
    assert torch.equal(y, x.amax(1))


def test_a_pad_the_ops_between_change_gets_advice_to_set_the_lanes_before_the_op():
    """Attention with the key mask forgotten: k pads with 0, the sum's identity, but the padded keys' scores reach
    the softmax's sum as exp(0 - max). No pad= fixes it, and the advice says so (a porter's report)."""
    src = """
    kernel attn<BM: int = 16, BN: int = 64, D: int = 16>(q: tensor<f32>[M, D], k: tensor<f32>[N, D],
            v: tensor<f32>[N, D], o: tensor<f32>[M, D]) {
        let s = dot(load(q, tile=[BM, D], at=[program_id(0), 0]), transpose(load(k, tile=[BN, D])))
        let p = exp(s - max(s, axis=1, keepdims=true))
        store(o, dot(p, load(v, tile=[BN, D])) / sum(p, axis=1, keepdims=true), at=[program_id(0), 0])
    }
    """
    q, k, v = torch.randn(16, 16), torch.randn(40, 16), torch.randn(40, 16)
    got = launch(src, "attn", (1,), q, k, v, torch.empty(16, 16))
    assert len(got) == 1 and "warning: sum along axis 1 takes in lanes past the edge of 'k'" in got[0]
    assert "note: its pad, 0, is what sum leaves unchanged, but the ops between change it: the lanes reach sum " \
           "holding " in got[0]
    assert "so no pad= helps; set them just before it, where(inside, x, 0)" in got[0]
    assert "where(cols < N, s, -inf)" in got[0] and "give the load a pad=" not in got[0]


def test_once_per_op_and_an_error_where_the_warning_is_one():
    mod = tle.compile(ROW_MAX)
    x, y = -1 - torch.rand(3, 6), torch.empty(3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", TlePaddingWarning)
        mod.row_max[(3,)](x, y)
        mod.row_max[(3,)](x, y)
    assert len([w for w in seen if issubclass(w.category, TlePaddingWarning)]) == 1
    mod = tle.compile(ROW_MAX)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TlePaddingWarning)
        for _ in range(2):  # raised at every launch, not only the first
            with pytest.raises(TlePaddingWarning, match="max along axis 1"):
                mod.row_max[(3,)](x, y)


LAYERNORM_VAR = """
kernel row_var<BLOCK: int = 16>(x: tensor<f32>[M, N], v: tensor<f32>[M]) {
    let row = program_id(0)
    let t = load(x, tile=[1, BLOCK], at=[row, 0])
    let mean = sum(t, axis=1, keepdims=true) / N
    let d = t - mean
    store(v, sum(d * d, axis=1) / N, at=[row])
}
"""


def test_a_variance_over_x_minus_mean_in_padded_lanes_warns():
    x = torch.randn(4, 10) + 3
    var = torch.empty(4)
    got = launch(LAYERNORM_VAR, "row_var", (4,), x, var)
    assert len(got) == 1 and "sum along axis 1 takes in lanes past the edge of 'x'" in got[0]


def test_the_same_variance_through_where_does_not_warn():
    src = LAYERNORM_VAR.replace("let d = t - mean",
                                "let d = where(reshape(arange(0, BLOCK), [1, BLOCK]) < N, t - mean, 0.0)")
    x = torch.randn(4, 10) + 3
    var = torch.empty(4)
    assert launch(src, "row_var", (4,), x, var) == []
    torch.testing.assert_close(var, x.var(1, unbiased=False))


def test_a_softmax_padded_with_0_warns_at_its_sum():
    src = """
    kernel softmax<B: int = 16>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
        let t = load(x, tile=[1, B], at=[program_id(0), 0])
        let e = exp(t - max(t, axis=1, keepdims=true))
        store(y, e / sum(e, axis=1, keepdims=true), at=[program_id(0), 0])
    }
    """
    x = torch.randn(2, 12) - 5
    got = launch(src, "softmax", (2,), x, torch.empty(2, 12))
    assert len(got) == 2  # the max (all values below 0) and the sum of exp(0 - max) per padded lane
    assert "max along axis 1" in got[0] and "sum along axis 1" in got[1]


def test_rows_of_a_block_past_the_last_row_are_padding_whole_and_do_not_warn():
    """A block of 4 rows over 6 rows: the second program's last two rows are all padding (the store drops them),
    the columns past N are set to -inf with where()."""
    src = """
    kernel block_max<BM: int = 4, BN: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
        let t = load(x, tile=[BM, BN], at=[program_id(0), 0])
        let v = where(reshape(arange(0, BN), [1, BN]) < N, t, -inf)
        store(y, max(v, axis=1), at=[program_id(0)])
    }
    """
    x = -1 - torch.rand(6, 5)
    y = torch.empty(6)
    assert launch(src, "block_max", (2,), x, y) == []
    assert torch.equal(y, x.amax(1))


def test_a_where_that_puts_a_constant_other_than_the_identity_in_padded_lanes_warns():
    src = """
    kernel block_max<BN: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
        let t = load(x, tile=[1, BN], at=[program_id(0), 0])
        store(y, max(where(reshape(arange(0, BN), [1, BN]) < N, t, 0.0), axis=1), at=[program_id(0)])
    }
    """
    got = launch(src, "block_max", (2,), -1 - torch.rand(2, 5), torch.empty(2))
    assert len(got) == 1 and "max along axis 1" in got[0]


SCANS = """
kernel scans<B: int = 8>(x: tensor<f32>[N], fwd: tensor<f32>[N], rev: tensor<f32>[N]) {
    let t = load(x, tile=[B], pad=1.0)
    store(fwd, cumsum(t, axis=0))
    store(rev, cumsum(t, axis=0, reverse=true))
}
"""


def test_a_forward_scan_keeps_the_padding_behind_the_lanes_stored_and_a_reverse_one_does_not():
    x = torch.rand(5)
    fwd, rev = torch.empty(5), torch.empty(5)
    got = launch(SCANS, "scans", (1,), x, fwd, rev)
    assert len(got) == 1 and "cumulative sum along axis 0" in got[0] and got[0].startswith("<string>:5:")
    torch.testing.assert_close(fwd, x.cumsum(0))


MATMUL = """
kernel mm<BM: int = 16, BN: int = 16, BK: int = 16>(a: tensor<f32>[M, K], b: tensor<f32>[K, N], c: tensor<f32>[M, N]) {
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {
        acc = dot(FA(load(a, tile=[BM, BK], at=[program_id(0), k])), FA(load(b, tile=[BK, BN], at=[k, program_id(1)])),
                  acc)
    }
    store(c, acc, at=[program_id(0), program_id(1)])
}
"""


def test_a_ragged_k_padded_with_0_adds_nothing_to_a_dot():
    src = MATMUL.replace("FA(", "(")
    a, b = torch.randn(20, 24), torch.randn(24, 18)
    c = torch.empty(20, 18)
    assert launch(src, "mm", (2, 2), a, b, c) == []
    torch.testing.assert_close(c, a @ b)


def test_a_dot_over_padded_k_lanes_that_are_not_0_warns():
    src = MATMUL.replace("FA(", "exp(")  # exp(0) = 1 in the padded columns of a and rows of b: products of 1
    got = launch(src, "mm", (2, 2), torch.randn(20, 24), torch.randn(24, 18), torch.empty(20, 18))
    assert len(got) == 1 and "dot adds products of lanes past the edge of 'a'" in got[0]


def test_attention_scores_over_padded_keys_warn_at_the_row_max():
    """q k^T over a block of keys past the sequence's end: those columns are 0, not -inf."""
    src = """
    kernel scores<BN: int = 16, D: int = 16>(q: tensor<f32>[M, D], k: tensor<f32>[S, D], m: tensor<f32>[M]) {
        let qt = load(q, tile=[16, D], at=[program_id(0), 0])
        let kt = load(k, tile=[BN, D], at=[0, 0])
        store(m, max(dot(qt, transpose(kt)), axis=1), at=[program_id(0)])
    }
    """
    q = torch.randn(16, 16)
    k = -q[:1].sign() * torch.rand(10, 16)  # keys that score below 0 against q's first row
    got = launch(src, "scores", (1,), q, k, torch.empty(16))
    assert len(got) == 1 and "max along axis 1 takes in lanes past the edge of 'k'" in got[0]


def test_a_histogram_of_padded_lanes_warns_and_its_mask_keeps_them_out():
    src = """
    kernel hist<B: int = 64>(x: tensor<i32>[N], counts: tensor<i32>[8]) {
        let t = load(x, tile=[B])
        store(counts, histogram(t, 8MASK))
    }
    """
    x = torch.randint(1, 8, (50,), dtype=torch.int32)
    counts = torch.empty(8, dtype=torch.int32)
    got = launch(src.replace("MASK", ""), "hist", (1,), x, counts)
    assert len(got) == 1 and "histogram counts lanes past the edge of 'x'" in got[0]
    assert counts[0] == 14  # the 14 padded zeros, as the GPU counts them
    masked = src.replace("MASK", ", mask=arange(0, B) < N")
    assert launch(masked, "hist", (1,), x, counts) == []
    assert torch.equal(counts, torch.bincount(x, minlength=8).int())


def test_a_gather_through_padded_indices_summed_warns():
    """An embedding bag: the bag's ids past its end are the pad 0, and gather row 0 of the table."""
    src = """
    kernel bag<B: int = 8, D: int = 4>(ids: tensor<i32>[L], table: tensor<f32>[V, D], out: tensor<f32>[D]) {
        let i = load(ids, tile=[B])
        let rows = gather(table, [expand_dims(i, 1), expand_dims(arange(0, D), 0)])
        store(out, sum(rows, axis=0))
    }
    """
    got = launch(src, "bag", (1,), torch.tensor([3, 1, 2], dtype=torch.int32), torch.randn(5, 4), torch.empty(4))
    assert len(got) == 1 and "sum along axis 0 takes in lanes past the edge of 'ids'" in got[0]


def test_sorting_a_row_padded_to_sort_last_does_not_warn():
    src = """
    kernel s<B: int = 16>(x: tensor<f32>[N], y: tensor<f32>[N]) {
        store(y, sort(load(x, tile=[B], pad=inf)))
    }
    """
    x, y = torch.randn(10), torch.empty(10)
    assert launch(src, "s", (1,), x, y) == []
    assert torch.equal(y, x.sort().values)


# ---- sort, topk, flip and take move the padding with the elements ---------------------------------------------------
TOP4 = """
kernel top4(x: tensor<f32>[M, N], vals: tensor<f32>[M, 4], ids: tensor<i32>[M, 4]) {
    let t = load(x, tile=[1, 1024], at=[program_id(0), 0]PAD)
    store(ids, argtopk(t, 4), at=[program_id(0), 0])
    store(vals, topk(t, 4), at=[program_id(0), 0])
}
"""


def test_the_top_k_of_negative_logits_padded_with_0_warns_at_argtopk_and_one_padded_with_minus_inf_does_not():
    """The porter's router: the top 4 of 1000 negative logits loaded with the default pad are the padding's zeros,
    their positions past the row. One warning, at argtopk (topk reads its values out of the same network)."""
    x = -torch.rand(2, 1000) - 1.0
    vals, ids = torch.empty(2, 4), torch.empty(2, 4, dtype=torch.int32)
    got = launch(TOP4.replace("PAD", ""), "top4", (2,), x, vals, ids)
    assert len(got) == 1, got
    lines = got[0].splitlines()
    assert lines[0].startswith("<string>:4:16: warning: argtopk ranks lanes past the edge of 'x', which hold padding, "
                               "ahead of lanes with data: in program (0, 0, 0) the result at tile element [0, 0] "
                               "comes from a padded lane"), lines[0]
    assert "store(ids, argtopk(t, 4)" in lines[1]
    assert any("note: the load that pads 'x' with 0" in line for line in lines)
    assert any("pad it with a value that sorts last, -inf for topk and argtopk" in line for line in lines)
    assert torch.equal(vals, torch.zeros(2, 4)) and torch.equal(ids[0], torch.arange(1000, 1004, dtype=torch.int32))
    assert launch(TOP4.replace("PAD", ", pad=-inf"), "top4", (2,), x, vals, ids) == []
    assert torch.equal(ids.long(), x.topk(4).indices) and torch.equal(vals, x.topk(4).values)


def test_a_top_k_that_leaves_a_value_out_for_padding_warns_and_its_lanes_past_the_data_are_padding():
    src = """
    kernel k(x: tensor<f32>[N], y: tensor<f32>[K], ids: tensor<i32>[K], s: tensor<f32>[M]) {
        let t = load(x, tile=[8]PAD)
        store(ids, argtopk(t, 4))
        store(y, topk(t, 4))
        store(s, sum(topk(t, 4)))
    }
    """
    y, ids, s = torch.empty(4), torch.empty(4, dtype=torch.int32), torch.empty(1)
    # 3 elements padded with 0: the top 4 hold 5, 4 and two zeros of the padding, and -1 is left out (one network:
    # both topk read argtopk's; the sum of the padding's zeros changes nothing)
    got = launch(src.replace("PAD", ""), "k", (1,), torch.tensor([5.0, 4.0, -1.0]), y, ids, s)
    assert len(got) == 1 and "<string>:4:20: warning: argtopk ranks lanes past the edge of 'x'" in got[0], got
    assert "the result at tile element [2] comes from a padded lane" in got[0]
    # padded with -inf: the fourth lane is the padding's -inf, which the sum takes in
    got = launch(src.replace("PAD", ", pad=-inf"), "k", (1,), torch.tensor([5.0, 4.0, -1.0]), y, ids, s)
    assert len(got) == 1 and "sum takes in lanes past the edge of 'x'" in got[0], got
    assert ids.tolist()[:3] == [0, 1, 2] and y.tolist()[:3] == [5.0, 4.0, -1.0]


FLIP_CUMMAX = """
kernel suffix_max(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let t = load(x, tile=[1, 16], at=[program_id(0), 0]PAD)
    store(y, flip(cummax(flip(t, axis=1), axis=1), axis=1), at=[program_id(0), 0])
}
"""


def test_a_reverse_cummax_through_flip_warns_as_reverse_true_does_and_one_padded_with_minus_inf_does_not():
    """flip() moves the padding: a flipped ragged row starts with it, so a running max over it takes it in."""
    x, y = -torch.rand(1, 10) - 1, torch.empty(1, 10)
    got = launch(FLIP_CUMMAX.replace("PAD", ""), "suffix_max", (1,), x, y)
    assert len(got) == 1 and "cumulative max along axis 1 takes in lanes past the edge of 'x', which hold padding: " \
                              "in program (0, 0, 0) the result at tile element [0, 6] is 0 with them" in got[0], got
    assert torch.equal(y, torch.zeros(1, 10))
    assert launch(FLIP_CUMMAX.replace("PAD", ", pad=-inf"), "suffix_max", (1,), x, y) == []
    assert torch.equal(y, x.flip(1).cummax(1).values.flip(1))


@pytest.mark.parametrize("axis", ["axis=1", "axis=0", ""])
def test_a_flip_of_a_ragged_row_moves_its_padding(axis):
    """Summed, the padding's 0 changes nothing; a max takes it in; padded with -inf, it does not (the padded lanes
    followed to where flip() put them, not left where they were)."""
    src = """
    kernel k(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
        let t = flip(load(x, tile=[2, 16], at=[0, 0]PAD)AXIS)
        store(y, OP(t, axis=1), at=[0])
    }
    """.replace("AXIS", f", {axis}" if axis else "")
    x, y = -torch.rand(2, 10) - 1, torch.empty(2)
    rows = (lambda r: r) if axis == "axis=1" else (lambda r: r.flip(0))  # flip(t, axis=0) swaps the two rows
    assert launch(src.replace("PAD", "").replace("OP", "sum"), "k", (1,), x, y) == []
    assert torch.allclose(y, rows(x.sum(1)))
    got = launch(src.replace("PAD", "").replace("OP", "max"), "k", (1,), x, y)
    assert len(got) == 1 and "max along axis 1 takes in lanes past the edge of 'x'" in got[0], got
    assert launch(src.replace("PAD", ", pad=-inf").replace("OP", "max"), "k", (1,), x, y) == []
    assert torch.equal(y, rows(x.amax(1)))


SORT_ROWS = """
kernel k(x: tensor<f32>[M, N], y: tensor<f32>[M, N], ids: tensor<i32>[M, N]) {
    let t = load(x, tile=[4, 16], at=[0, 0]PAD)
    store(y, sort(tDESC), at=[0, 0])
    store(ids, argsort(tDESC), at=[0, 0])
}
"""


@pytest.mark.parametrize("descending,last,first", [(False, "inf", "-inf"), (True, "-inf", "inf")])
def test_a_sort_warns_where_padding_sorts_ahead_of_data(descending, last, first):
    """Rows 3 of a block of 4 is past the tensor (all padding: not checked); a pad that sorts last passes, also where
    it equals a value of the row (equal values keep the one with data first)."""
    src = SORT_ROWS.replace("DESC", ", descending=true" if descending else "")
    x = torch.randn(3, 10)
    x[1, 4] = float(last)  # a value equal to the pad
    y, ids = torch.empty(3, 10), torch.empty(3, 10, dtype=torch.int32)
    want = torch.sort(x, dim=1, descending=descending, stable=True)
    assert launch(src.replace("PAD", f", pad={last}"), "k", (1,), x, y, ids) == []
    assert torch.equal(y, want.values) and torch.equal(ids.long(), want.indices)
    got = launch(src.replace("PAD", f", pad={first}"), "k", (1,), x, y, ids)
    assert len(got) == 2 and all(f"{name} orders lanes past the edge of 'x', which hold padding, ahead of lanes "
                                 "with data: in program (0, 0, 0) the result at tile element [0, 0] comes from a "
                                 "padded lane" in g for g, name in zip(got, ("sort", "argsort"))), got
    assert any(f"a value that sorts last, {last} for {'a descending' if descending else 'an ascending'} sort" in g
               for g in got)
    assert (ids[:, 0] >= 10).all()  # positions of the padding


def test_the_padding_a_sort_moves_to_the_end_of_the_row_is_padding_there():
    """Two ragged rows of a block sorted as one row of 16: the padding in the middle (lanes 3 .. 7 and 11 .. 15)
    ends in lanes 6 .. 15, and a sum takes it in there, not where it was."""
    src = """
    kernel k(x: tensor<f32>[M, N], s: tensor<f32>[K], w: tensor<f32>[K]) {
        let r = sort(reshape(load(x, tile=[2, 8], at=[0, 0], pad=inf), [16]))
        store(s, sum(r))
        store(w, sum(where(arange(0, 16) < 2 * N, r, 0.0)))
    }
    """
    x, s, w = torch.randn(2, 3), torch.empty(1), torch.empty(1)
    got = launch(src, "k", (1,), x, s, w)
    assert len(got) == 1 and "<string>:4:18: warning: sum takes in lanes past the edge of 'x'" in got[0], got
    assert torch.allclose(w, x.sum().reshape(1))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "i8", "i16", "i64"])
def test_sort_and_topk_move_the_padding_of_each_element_type(dtype):
    """Every key width (i8 and i16 keys sum their pairs in i32): the padding moves to the end of an ascending sort
    and of a top k, where a sum takes it in (a pad that sorts last is no sum's identity), and where() that sets
    those lanes to 0 leaves it out."""
    bits = int(dtype[1:]) if dtype[0] == "i" else 0
    hi, lo = ("inf", "-inf") if not bits else (str(2 ** (bits - 1) - 1), str(-2 ** (bits - 1)))
    src = f"""
    kernel k(x: tensor<{dtype}>[M, N], y: tensor<{dtype}>[K], top: tensor<{dtype}>[L], s: tensor<f32>[J]) {{
        let r = sort(reshape(load(x, tile=[2, 8], at=[0, 0], pad={hi}), [16]))
        let t = topk(reshape(load(x, tile=[2, 8], at=[0, 0], pad={lo}), [16]), 8)
        store(y, r)
        store(top, t)
        store(s, cast<f32>(sum(where(arange(0, 16) < 2 * N, r, cast<{dtype}>(0)))), at=0)
        store(s, cast<f32>(sum(where(arange(0, 8) < 2 * N, t, cast<{dtype}>(0)))), at=1)
        store(s, cast<f32>(sum(r)), at=2)
    }}
    """
    td = getattr(torch, {"f16": "float16", "bf16": "bfloat16", "i8": "int8", "i16": "int16", "i64": "int64"}[dtype])
    x = torch.tensor([[3, -1, 2], [2, 5, -4]]).to(td)
    y, top, s = torch.empty(16, dtype=td), torch.empty(8, dtype=td), torch.empty(3)
    got = launch(src, "k", (1,), x, y, top, s)
    assert len(got) == 1 and "<string>:9:28: warning: sum takes in lanes past the edge of 'x'" in got[0], got
    assert torch.equal(y[:6], x.flatten().sort().values)
    assert torch.equal(top[:6], x.flatten().sort(descending=True).values)
    assert s[:2].tolist() == [7.0, 7.0]


def test_a_take_of_a_padded_lane_is_padding_and_of_a_lane_with_data_is_not():
    """take(t, k, axis=A) (where + max on the bits, for a run-time k): padded where the lane it takes is."""
    src = """
    kernel k(x: tensor<f32>[M, N], y: tensor<f32>[K], k: i32, r: i32) {
        let t = load(x, tile=[2, 16], at=[0, 0], pad=-inf)
        let u = load(x, tile=[2, 16], at=[0, 0])
        store(y, max(where(arange(0, 16) == 0, take(take(u, r, axis=0), k), take(t, r, axis=0))))
    }
    """
    x, y = -torch.rand(2, 10) - 1, torch.empty(1)
    assert launch(src, "k", (1,), x, y, 3, 1) == []  # the element at 3: data
    assert torch.equal(y, torch.maximum(x[1, 3], x[1, 1:].max()).reshape(1))  # lane 0 holds x[1, 3], not x[1, 0]
    got = launch(src, "k", (1,), x, y, 12, 1)  # at 12: padding, 0, now the largest
    assert len(got) == 1 and "max takes in lanes past the edge of 'x'" in got[0], got
    assert torch.equal(y, torch.zeros(1))
    # the row taken along axis 0 keeps its padded lanes (its 10 .. 15, 0 in u): a max over it warns
    got = launch(src.replace("where(arange(0, 16) == 0, take(take(u, r, axis=0), k), take(t, r, axis=0))",
                             "take(u, r, axis=0)"), "k", (1,), x, y, 12, 1)
    assert len(got) == 1 and "max takes in lanes past the edge of 'x'" in got[0], got


def test_a_reduction_over_pairs_that_the_kernel_wrote_is_checked():
    src = """
    kernel pair_max(x: tensor<i32>[N], y: tensor<i32>[M]) {
        store(y, max(reshape(load(x, tile=[16]), [8, 2]), axis=1))
    }
    """
    got = launch(src, "pair_max", (1,), -torch.arange(1, 16, dtype=torch.int32), torch.empty(8, dtype=torch.int32))
    assert len(got) == 1 and "max along axis 1" in got[0]


# ---- values a loop carries ------------------------------------------------------------------------------------------
# A lane of a loop-carried accumulator is padding in one iteration and data in another, so the check keeps, beside
# the carried tile, its shadow: the value had each padded lane it took in held the identity of the op that took it in.

BLOCK_VAR = """
kernel row_var<B: int = 8>(x: tensor<f32>[M, N], v: tensor<f32>[M]) {
    let row = program_id(0)
    var s = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) {
        s = s + load(x, tile=[1, B], at=[row, j])
    }
    let mean = sum(s, axis=1, keepdims=true) / N
    var acc = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) {
        let d = load(x, tile=[1, B], at=[row, j]) - mean
        acc = acc + UPDATE
    }
    store(v, sum(acc, axis=1) / N, at=[row])
}
"""
INSIDE = "reshape(arange(0, B), [1, B]) + j * B < N"


def test_a_variance_accumulated_over_column_blocks_warns_at_the_sum_after_the_loop():
    """The porter's BatchNorm: d = x - mean is -mean in the last block's padded lanes, and acc takes mean^2 in
    there; after the loop those lanes hold data from the earlier blocks too, so no mask can say they are padding."""
    x = torch.randn(3, 20) + 3
    v = torch.empty(3)
    got = launch(BLOCK_VAR.replace("UPDATE", "d * d"), "row_var", (3,), x, v)
    assert len(got) == 1
    lines = got[0].splitlines()
    assert lines[0].startswith("<string>:14:14: warning: sum along axis 1 takes in padding of 'x' that a loop "
                               "accumulated into a value it carries: in program (0, 0, 0) the result at tile element "
                               "[0] is ")
    assert "<string>:11:17: note: the load that pads 'x' with 0" in got[0]
    assert "<string>:12:15: note: here the loop's carried value takes the padded lanes in: put 0 in them first" \
           in got[0]
    assert not torch.allclose(v, x.var(1, unbiased=False))  # the GPU's value too: 4 lanes of mean^2 each


def test_the_same_accumulation_through_where_does_not_warn():
    x = torch.randn(3, 20) + 3
    v = torch.empty(3)
    assert launch(BLOCK_VAR.replace("UPDATE", f"where({INSIDE}, d * d, 0.0)"), "row_var", (3,), x, v) == []
    torch.testing.assert_close(v, x.var(1, unbiased=False))


def test_the_accumulation_on_whole_blocks_does_not_warn():
    x = torch.randn(3, 16) + 3
    v = torch.empty(3)
    assert launch(BLOCK_VAR.replace("UPDATE", "d * d"), "row_var", (3,), x, v) == []
    torch.testing.assert_close(v, x.var(1, unbiased=False))


def test_lanes_of_a_single_block_that_never_took_data_are_padding_after_the_loop():
    """N < B: one iteration, and the lanes past N took nothing but padding: after the loop they are padding."""
    got = launch(BLOCK_VAR.replace("UPDATE", "d * d"), "row_var", (3,), torch.randn(3, 5) + 3, torch.empty(3))
    assert len(got) == 1 and "sum along axis 1 takes in lanes past the edge of 'x', which hold padding" in got[0]


def test_rows_of_a_block_past_the_last_row_accumulate_padding_without_a_warning():
    """A block of 4 rows over 6: the second program's last two rows take in nothing but padding in every iteration
    (their mean is 0, their d * d is 0 - but their lanes are not data), and the store drops them."""
    src = """
    kernel block_sq<BM: int = 4, BN: int = 8>(x: tensor<f32>[M, N], v: tensor<f32>[M]) {
        var acc = zeros<f32>[BM, BN]
        for j in range(cdiv(N, BN)) {
            let t = load(x, tile=[BM, BN], at=[program_id(0), j], pad=1.0)
            acc = acc + where(reshape(arange(0, BN), [1, BN]) + j * BN < N, t * t, 0.0) + (1.0 - t)
        }
        store(v, sum(acc, axis=1), at=[program_id(0)])
    }
    """
    x = torch.ones(6, 20) + torch.randn(6, 20) * 0  # 1.0 - t is 0 in the data lanes
    v = torch.empty(6)
    assert launch(src, "block_sq", (2,), x, v) == []
    torch.testing.assert_close(v, (x * x).sum(1))


def test_a_running_max_over_row_blocks_padded_with_0_warns_and_one_padded_with_minus_inf_does_not():
    src = """
    kernel colmax<BM: int = 4, BN: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[N]) {
        var m = full<f32>[BM, BN](-inf)
        for i in range(cdiv(M, BM)) {
            m = max(m, load(x, tile=[BM, BN], at=[i, 0]PAD))
        }
        store(y, max(m, axis=0))
    }
    """
    x = -1 - torch.rand(10, 8)
    y = torch.empty(8)
    got = launch(src.replace("PAD", ""), "colmax", (1,), x, y)
    assert len(got) == 1 and "max along axis 0 takes in padding of 'x' that a loop accumulated" in got[0]
    assert "put -inf in them first" in got[0]
    assert launch(src.replace("PAD", ", pad=-inf"), "colmax", (1,), x, y) == []
    assert torch.equal(y, x.amax(0))


def test_a_carried_tile_that_each_iteration_replaces_is_not_an_accumulation():
    """The last block, carried out of the loop and summed: its padded lanes hold the pad 0, which a sum leaves
    unchanged; the lanes the block before it held there are gone, not taken in."""
    src = """
    kernel last_sum<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        var last = zeros<f32>[B]
        for j in range(cdiv(N, B)) {
            last = load(x, tile=[B], at=[j])
        }
        store(y, sum(last), at=[0])
    }
    """
    x, y = torch.randn(20), torch.empty(1)
    assert launch(src, "last_sum", (1,), x, y) == []
    torch.testing.assert_close(y, x[16:].sum().reshape(1))


def test_a_loop_that_runs_no_iteration_does_not_warn():
    src = """
    kernel none<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        var acc = full<f32>[B](1.0)
        for j in range(cdiv(N, B)) {
            acc = acc * load(x, tile=[B], at=[j])
        }
        store(y, sum(acc), at=[0])
    }
    """
    y = torch.empty(1)
    assert launch(src, "none", (1,), torch.randn(0), y) == []
    assert y.item() == 8.0


def test_an_accumulation_under_an_if_is_followed_through_the_branch():
    src = """
    kernel odd_sum<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        var acc = zeros<f32>[B]
        for j in range(cdiv(N, B)) {
            if j % 2 == 0 {
                acc = acc + exp(load(x, tile=[B], at=[j]))
            }
        }
        store(y, sum(acc), at=[0])
    }
    """
    x, y = torch.randn(20), torch.empty(1)  # blocks 0 and 2; block 2 has 4 padded lanes of exp(0) = 1
    got = launch(src, "odd_sum", (1,), x, y)
    assert len(got) == 1 and "sum takes in padding of 'x' that a loop accumulated" in got[0]


def test_a_matmul_and_its_epilogue_on_ragged_sizes_do_not_warn():
    """Rows past M and columns past N of the accumulator take in nothing but padding: they hold no data."""
    src = MATMUL.replace("FA(", "(").replace("store(c, acc,", "store(c, acc / max(acc, axis=1, keepdims=true),")
    a, b = torch.rand(20, 24), torch.rand(24, 18)
    c = torch.empty(20, 18)
    assert launch(src, "mm", (2, 2), a, b, c) == []


def test_an_unrolled_sum_of_blocks_whose_last_is_padded_with_0_does_not_warn():
    """s += block j over static_range: the second block's padded lanes hold 0, which leaves the first block's data
    in those lanes; they are not padding (the sum warned that it lost 22 of 66)."""
    src = """
    kernel k<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        var s = zeros<f32>[B]
        for j in static_range(0, 2) {
            s += load(x, tile=[B], at=[j])
        }
        store(y, sum(s), at=[0])
    }
    """
    x, y = torch.arange(12.0), torch.empty(1)
    assert launch(src, "k", (1,), x, y) == []
    assert y.item() == 66.0
    src_max = src.replace("s += load(x, tile=[B], at=[j])", "s = max(s, load(x, tile=[B], at=[j]PAD))") \
        .replace("zeros<f32>[B]", "full<f32>[B](-inf)").replace("sum(s)", "max(s)")
    x = -1 - torch.rand(12)
    assert launch(src_max.replace("PAD", ", pad=-inf"), "k", (1,), x, y) == []
    assert y.item() == x.max().item()
    got = launch(src_max.replace("PAD", ""), "k", (1,), x, y)  # 0 in the padded lanes: the max of negatives is 0
    assert len(got) == 1 and "max takes in padding of 'x'" not in got[0] and "max takes in lanes past" in got[0]


def test_a_constant_beside_a_padded_identity_is_still_padding():
    src = """
    kernel k<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        store(y, max(zeros<f32>[B] + load(x, tile=[B], at=[0])), at=[0])
    }
    """
    got = launch(src, "k", (1,), -1 - torch.rand(5), torch.empty(1))
    assert len(got) == 1 and "max takes in lanes past the edge of 'x'" in got[0]


def test_a_lane_kept_by_a_choice_on_data_holds_data():
    """where(t > 0.0, s + t, s) with s from 1.0: lanes 4..7 keep the 1.0 by a choice on x's data in the first block,
    so after the loop they are not padding, though the second block pads them."""
    src = """
    kernel k<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1]) {
        var s = full<f32>[B](1.0)
        for j in range(cdiv(N, B)) {
            let t = load(x, tile=[B], at=[j])
            s = where(t > 0.0, s + t, s)
        }
        store(y, sum(s), at=[0])
    }
    """
    x, y = -torch.ones(12), torch.empty(1)
    x[0], x[9] = 2.0, 0.5
    assert launch(src, "k", (1,), x, y) == []
    assert y.item() == 10.5


def test_padding_passes_through_an_if_that_yields_it():
    src = """
    kernel k<B: int = 8>(x: tensor<f32>[N], y: tensor<f32>[1], flag: i32) {
        var m = full<f32>[B](-inf)
        if flag > 0 {
            for j in range(cdiv(N, B)) {
                m = max(m, load(x, tile=[B], at=[j]))
            }
        }
        store(y, max(m), at=[0])
    }
    """
    got = launch(src, "k", (1,), -1 - torch.rand(5), torch.empty(1), 1)
    assert len(got) == 1 and "max takes in lanes past the edge of 'x'" in got[0]


COMBINED = """
fn add(a, b) {
    return a + b
}

fn larger(a, b) {
    return max(a, b)
}

fn linear(a1, b1, a2, b2) {
    return a1 * a2, a2 * b1 + b2
}

kernel row_max<B: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0])
    store(y, reduce(t, axis=1, combine=larger), at=[program_id(0)])
}

kernel row_max_padded<B: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0], pad=-inf)
    store(y, reduce(t, axis=1, combine=larger), at=[program_id(0)])
}

kernel row_sum<B: int = 8, PAD: float = 0.0>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0], pad=PAD)
    store(y, reduce(t, axis=1, combine=add, identity=[0.0]), at=[program_id(0)])
}

kernel suffix_sum<B: int = 8, PAD: float = 0.0, REV: bool = false>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let t = load(x, tile=[1, B], at=[program_id(0), 0], pad=PAD)
    store(y, scan(t, axis=1, combine=add, reverse=REV), at=[program_id(0), 0])
}

kernel recurrence<B: int = 8, PAD: float = 0.0>(a: tensor<f32>[M, N], b: tensor<f32>[M, N], h: tensor<f32>[M, N]) {
    let ta = load(a, tile=[1, B], at=[program_id(0), 0])
    let tb = load(b, tile=[1, B], at=[program_id(0), 0], pad=PAD)
    let _, hs = scan(ta, tb, axis=1, combine=linear, reverse=true)
    store(h, hs, at=[program_id(0), 0])
}
"""


def test_a_reduce_with_combine_over_lanes_padded_with_0_warns_without_an_identity():
    x, y = -1 - torch.rand(3, 6), torch.empty(3)
    got = launch(COMBINED, "row_max", (3,), x, y)
    assert len(got) == 1
    first = got[0].splitlines()
    assert "warning: reduce with combine fn 'larger' takes in lanes past the edge of 'x', which hold padding: in " \
           "program (0, 0, 0) the result at tile element [0] is 0 with them and" in first[0]
    assert any("note: the load that pads 'x' with 0" in line for line in first)
    assert any("give the scan or reduce identity=[...]" in line for line in first)
    assert torch.equal(y, torch.zeros(3))
    assert launch(COMBINED, "row_max_padded", (3,), x, y) == []
    assert torch.equal(y, x.amax(1))


def test_a_reduce_with_combine_checks_lanes_padded_with_other_than_its_identity():
    x, y = torch.rand(3, 6), torch.empty(3)
    got = launch(COMBINED, "row_sum", (3,), x, y, PAD=1.0)
    assert len(got) == 1 and "reduce with combine fn 'add' takes in lanes past the edge of 'x'" in got[0]
    assert "pad each operand's load with its value in identity=[0.0]" in got[0]
    assert launch(COMBINED, "row_sum", (3,), x, y, PAD=0.0) == []
    assert torch.allclose(y, x.sum(1))


def test_a_forward_scan_with_combine_keeps_padding_behind_the_lanes_with_data_and_a_reverse_one_does_not():
    x, y = torch.rand(3, 6), torch.empty(3, 6)
    assert launch(COMBINED, "suffix_sum", (3,), x, y, PAD=1.0, REV=False) == []
    assert torch.allclose(y, x.cumsum(1))
    got = launch(COMBINED, "suffix_sum", (3,), x, y, PAD=1.0, REV=True)
    assert len(got) == 1 and "scan with combine fn 'add' along axis 1 takes in lanes past the edge of 'x'" in got[0]
    assert "the result at tile element [0, 0] is" in got[0]
    assert launch(COMBINED, "suffix_sum", (3,), x, y, PAD=0.0, REV=True) == []
    assert torch.allclose(y, x.flip(1).cumsum(1).flip(1))


def test_a_reverse_recurrence_is_checked_on_the_results_the_kernel_uses():
    """Padded decays of 0 change the scan's first result (the products of the decays), which the kernel drops; the
    state h it keeps is as without the padding while the inputs are padded with 0, and not with 1."""
    a, b, h = torch.rand(3, 6), torch.rand(3, 6), torch.empty(3, 6)
    assert launch(COMBINED, "recurrence", (3,), a, b, h, PAD=0.0) == []
    want = torch.zeros(3)
    for i in reversed(range(6)):
        want = a[:, i] * want + b[:, i]
        assert torch.allclose(h[:, i], want)
    got = launch(COMBINED, "recurrence", (3,), a, b, h, PAD=1.0)
    assert len(got) == 1
    assert "scan with combine fn 'linear' along axis 1 takes in lanes past the edge of 'a', which hold padding: in " \
           "program (0, 0, 0) the result 2 at tile element [0, 0]" in got[0]


WELFORD = """
kernel moments<B: int = 8, GUARDED: bool = false>(x: tensor<f32>[M, N], mean: tensor<f32>[M]) {
    let row = program_id(0)
    var m = zeros<f32>[1, B]
    var n = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) {
        let t = load(x, tile=[1, B], at=[row, j])
        let inside = j * B + arange(0, B) < N
        n = n + where(inside, 1.0, 0.0)
        if GUARDED {
            m = m + where(inside, t - m, 0.0) / max(n, 1.0)
        } else {
            m = m + (t - m) / max(n, 1.0)
        }
    }
    store(mean, sum(m * n, axis=1) / sum(n, axis=1), at=[row])
}

kernel kahan<B: int = 8, PAD: float = 0.0>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    var s = zeros<f32>[1, B]
    var c = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) {
        let t = load(x, tile=[1, B], at=[program_id(0), j], pad=PAD)
        let u = t - c
        let s2 = s + u
        c = (s2 - s) - u
        s = s2
    }
    store(y, sum(s, axis=1), at=[program_id(0)])
}

kernel first_block_replaces<B: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
    var m = zeros<f32>[1, B]
    for j in range(cdiv(N, B)) {
        let t = load(x, tile=[1, B], at=[program_id(0), j], pad=-inf)
        m = where(j == 0, t, max(m, t))
    }
    store(y, max(m, axis=1), at=[program_id(0)])
}
"""


def test_padding_that_enters_an_update_before_its_fold_warns():
    """Welford's running mean takes (t - m) in: with t padded, the padded lanes pull the mean towards the pad. The
    check keeps the lanes as they were before the update, as if the padded element were not there."""
    x, mean = torch.randn(3, 21) + 3, torch.empty(3)
    got = launch(WELFORD, "moments", (3,), x, mean)
    assert len(got) == 1
    lines = got[0].splitlines()
    assert "warning: sum along axis 1 takes in padding of 'x' that a loop accumulated into a value it carries" \
           in lines[0]
    assert any("here the loop's carried value takes the padded lanes in: keep its lanes as they were there" in line
               for line in lines)
    assert not torch.allclose(mean, x.mean(1))
    assert launch(WELFORD, "moments", (3,), x, mean, GUARDED=True) == []
    assert torch.allclose(mean, x.mean(1))


def test_a_kahan_sum_of_lanes_padded_with_1_warns_and_with_0_does_not():
    x, y = torch.randn(3, 21), torch.empty(3)
    got = launch(WELFORD, "kahan", (3,), x, y, PAD=1.0)
    assert len(got) == 1 and "sum along axis 1 takes in padding of 'x'" in got[0]
    assert torch.allclose(y, x.sum(1) + 3, atol=1e-5)
    assert launch(WELFORD, "kahan", (3,), x, y, PAD=0.0) == []
    assert torch.allclose(y, x.sum(1), atol=1e-5)


def test_a_choice_on_the_loop_index_is_no_data():
    """where(j == 0, t, max(m, t)): the first block replaces the zeros; its padded lanes (-inf) are no data, not
    data the choice kept."""
    x, y = -1 - torch.rand(3, 5), torch.empty(3)
    assert launch(WELFORD, "first_block_replaces", (3,), x, y) == []
    assert torch.equal(y, x.amax(1))


SEGMENT_MAX = """
kernel segment_max<BLOCK: int = 64, OTHER: float = 0.0>(rowptr: tensor<i32>[M1], vals: tensor<f32>[NNZ],
                                                        y: tensor<f32>[M]) {
    let s = load(rowptr, at=program_id(0))
    let n = load(rowptr, at=program_id(0) + 1) - s
    let v = gather(vals, s + arange(0, BLOCK), mask=arange(0, BLOCK) < n, other=OTHER)
    store(y, max(v), at=program_id(0))
}
"""


def test_a_gathers_lanes_its_mask_leaves_out_are_checked_as_a_loads_padding():
    """A CSR segment's max over a masked gather: the lanes the mask leaves out hold other= (0), which a max of
    negative values takes; other=-inf leaves them out."""
    rowptr = torch.tensor([0, 5, 9, 16], dtype=torch.int32)
    vals, y = -1 - torch.rand(16), torch.empty(3)
    got = launch(SEGMENT_MAX, "segment_max", (3,), rowptr, vals, y)
    assert len(got) == 1
    lines = got[0].splitlines()
    assert "warning: max takes in lanes of 'vals' that a gather's mask= leaves out, which hold padding: in program " \
           "(0, 0, 0) the result is 0 with them and" in lines[0]
    assert any("note: the gather whose mask= leaves lanes of 'vals' out: they hold other=0" in line for line in lines)
    assert any("give the gather an other= that this op leaves unchanged" in line for line in lines)
    assert torch.equal(y, torch.zeros(3))
    assert launch(SEGMENT_MAX, "segment_max", (3,), rowptr, vals, y, OTHER=float("-inf")) == []
    assert torch.equal(y, torch.stack([vals[0:5].max(), vals[5:9].max(), vals[9:16].max()]))


ONLINE_LSE = """
kernel lse<BLOCK: int = 128>(x: tensor<f32>[M, C], out: tensor<f32>[M]) {
    let row = program_id(0)
    var mx = full<f32>[1, BLOCK](-inf)
    var l = zeros<f32>[1, BLOCK]
    for k in range(cdiv(C, BLOCK)) {
        let t = load(x, tile=[1, BLOCK], at=[row, k], pad=-inf)
        let nm = max(mx, t)
        l = l * exp(mx - nm) + exp(t - nm)
        mx = nm
    }
    let gm = max(mx, axis=1, keepdims=true)
    store(out, reshape(gm + log(sum(l * exp(mx - gm), axis=1, keepdims=true)), [1]), at=row)
}
"""


def test_a_nan_the_infinite_pad_made_is_told_to_be_guarded_where_it_was_made():
    """Lanes that only ever held -inf give exp(-inf - -inf) = NaN: the pad is right for the max, so the warning says
    where a NaN like that comes from and how to guard it, beside the generic advice."""
    x, out = torch.randn(2, 100), torch.empty(2)
    got = launch(ONLINE_LSE, "lse", (2,), x, out)
    assert len(got) == 1 and "is nan with them" in got[0]
    assert "note: the pad -inf made a NaN before this op" in got[0]
    assert "where(m == -inf, 0.0, exp(t - m))" in got[0]


AND_BLOCKS = """
fn both(a, b) { return a & b }
kernel k<BN: int = 8>(x: tensor<i32>[M, N], y: tensor<i32>[M]) {
    var acc = full<i32>[1, BN](-1)
    for j in range(cdiv(N, BN)) {
        acc = acc & load(x, tile=[1, BN], at=[program_id(0), j]PAD)
    }
    store(y, reduce(acc, axis=1, combine=both, identity=[-1]), at=[program_id(0)])
}
"""


def test_a_combine_reduction_of_a_carried_tile_takes_in_what_the_loop_accumulated():
    """acc & t over column blocks padded with 0: the last block's padded lanes clear acc's bits there, and the
    combine fn's reduction after the loop takes them in. Padded with -1 (the fn's identity), nothing warns."""
    x = torch.randint(0, 1 << 20, (2, 20), dtype=torch.int32) | (1 << 21)
    y = torch.empty(2, dtype=torch.int32)
    got = launch(AND_BLOCKS.replace("PAD", ""), "k", (2,), x, y)
    assert len(got) == 1 and "warning: reduce with combine fn 'both' takes in padding of 'x' that a loop " \
                             "accumulated into a value it carries: in program (0, 0, 0) the result at tile element " \
                             "[0] is 0 with it and" in got[0]
    assert launch(AND_BLOCKS.replace("PAD", ", pad=-1"), "k", (2,), x, y) == []
    want = []
    for row in x.tolist():
        w = -1
        for v in row:
            w &= v
        want.append(w)
    assert y.tolist() == want


def test_an_accumulator_that_starts_as_a_padded_load_takes_the_padding_in():
    """m starts as the ragged last block (padded with 0) and folds in the whole blocks with max: the padded lanes
    take part in every max after. Padded with -inf, or started from a constant, nothing warns."""
    src = """
    kernel k<BN: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M]) {
        let nb = cdiv(N, BN)
        var m = load(x, tile=[1, BN], at=[program_id(0), nb - 1]PAD)
        for j in range(0, nb - 1) {
            m = max(m, load(x, tile=[1, BN], at=[program_id(0), j]))
        }
        store(y, max(m, axis=1), at=[program_id(0)])
    }
    """
    x, y = -1 - torch.rand(3, 20), torch.empty(3)
    got = launch(src.replace("PAD", ""), "k", (3,), x, y)
    assert len(got) == 1 and "warning: max along axis 1 takes in padding of 'x' that a loop accumulated into a " \
                             "value it carries" in got[0]
    assert "note: the load that pads 'x' with 0" in got[0] and "var m = load(x" in got[0]
    assert torch.equal(y, torch.zeros(3))
    assert launch(src.replace("PAD", ", pad=-inf"), "k", (3,), x, y) == []
    assert torch.equal(y, x.amax(1))


CHUNK_DECAY = """
kernel k<CH: int = 32>(a: tensor<f32>[L], b: tensor<f32>[L], out: tensor<f32>[1]) {
    let cum = cumsum(load(a, tile=[CH]))
    let last = take(cum, CH - 1)
    let bt = load(b, tile=[CH])
    store(out, full<f32>[1](sum(bt * exp(last - cum))))
}
"""


def test_a_cumsum_past_the_edge_holds_the_total_which_is_data():
    """A chunked scan's decay to the chunk's end (Mamba2's SSD, GLA): `take(cumsum(a), CH - 1)` over a ragged chunk
    reads a lane past the edge, which holds the chunk's total (a pads 0, the sum's identity), not padding. It used
    to warn, blaming b (a porter's report)."""
    a, b, out = -torch.rand(13), torch.randn(13), torch.empty(1)
    assert launch(CHUNK_DECAY, "k", (1,), a, b, out) == []
    cum = a.cumsum(0)
    torch.testing.assert_close(out, (b * torch.exp(cum[-1] - cum)).sum().reshape(1))


def test_a_reverse_cumsum_holds_the_total_in_its_first_lane_and_a_sum_over_a_cumsum_still_warns():
    """take(cumsum(t, reverse=true), 0) is the total too; but the lanes past the edge stay padding for anything
    but a take: a sum over a ragged row's cumsum counts the total once per lane past the edge, and warns."""
    src = """kernel k(x: tensor<f32>[N], y: tensor<f32>[2]) {
        let t = load(x, tile=[16])
        store(y, join(take(cumsum(t, reverse=true), 0), sum(t)))
    }"""
    x, y = torch.randn(10), torch.empty(2)
    assert launch(src, "k", (1,), x, y) == []
    torch.testing.assert_close(y, x.sum().repeat(2))
    src = """kernel k(x: tensor<f32>[N], y: tensor<f32>[1]) {
        store(y, full<f32>[1](sum(cumsum(load(x, tile=[16])))))
    }"""
    got = launch(src, "k", (1,), x, torch.empty(1))
    assert len(got) == 1 and "sum takes in lanes past the edge of 'x'" in got[0]


SEGMENTED = """
fn segadd(fa: bool, a: f32, fb: bool, b: f32) {
    return fa or fb, where(fb, b, a + b)
}
kernel k<B: int = 16, ID: bool = true>(x: tensor<f32>[N], seg: tensor<i32>[N], out: tensor<f32>[N]) {
    let idx = program_id(0) * B + arange(0, B)
    let prev = gather(seg, idx - 1, mask=(idx > 0) and (idx < N), other=-1)
    let start = load(seg, tile=[B], at=program_id(0), pad=-1) != prev
    if ID {
        let _, run = scan(start, load(x, tile=[B], at=program_id(0)), axis=0, combine=segadd, identity=[false, 0.0])
        store(out, run, at=program_id(0))
    } else {
        let _, run = scan(start, load(x, tile=[B], at=program_id(0)), axis=0, combine=segadd)
        store(out, run, at=program_id(0))
    }
}
"""


@pytest.mark.parametrize("n", [16, 13])
def test_a_segment_flag_from_a_masked_gather_keeps_its_value_in_the_fold(n):
    """A segmented sum whose first flag compares with a gathered previous id that the mask leaves out (a porter's
    report): with identity=, only the flag's lane is set to its identity in the check's rerun, and the element's
    value stays in the fold, so a correct kernel does not warn. Without identity= the element is left out whole."""
    x = torch.arange(1.0, n + 1)
    seg = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4], dtype=torch.int32)[:n].contiguous()
    want = torch.tensor([1., 3., 6., 4., 9., 6., 13., 21., 30., 40., 11., 23., 36., 50., 15., 31.])[:n]
    out = torch.full((n,), float("nan"))
    assert launch(SEGMENTED, "k", (1,), x, seg, out) == []
    assert torch.equal(out, want)
    got = launch(SEGMENTED, "k", (1,), x, seg, out, ID=False)
    assert len(got) == 1 and "scan with combine fn 'segadd'" in got[0]


def test_an_operand_padded_with_other_than_its_identity_still_warns():
    """(value, index) pairs: the values pad 0, not the max's -inf identity; the indices have no padding. Setting
    the values' padded lanes to -inf changes the result, which is caught."""
    src = """
    fn pick(a: f32, i: i32, b: f32, j: i32) {
        return where(b > a, b, a), where(b > a, j, i)
    }
    kernel k(x: tensor<f32>[N], y: tensor<i32>[1]) {
        let _, at = reduce(load(x, tile=[16]), arange(0, 16), axis=0, combine=pick, identity=[-inf, 0])
        store(y, full<i32>[1](at))
    }"""
    x, y = -1 - torch.rand(10), torch.empty(1, dtype=torch.int32)
    got = launch(src, "k", (1,), x, y)
    assert len(got) == 1 and "reduce with combine fn 'pick'" in got[0]


def test_a_sum_over_a_segmented_scans_lanes_past_the_edge_still_warns():
    """The lanes past the edge of a scan with identity= hold the running total there: positions past the edge, which
    a sum over them counts (the flags, from arange, have no padding; the values do)."""
    src = SEGMENTED.replace("""        store(out, run, at=program_id(0))
    } else {""", """        store(out, full<f32>[1](sum(run)), at=0)
    } else {""")
    x = torch.arange(1.0, 14)
    seg = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3], dtype=torch.int32)
    got = launch(src, "k", (1,), x, seg, torch.empty(13))
    assert len(got) == 1 and "sum takes in lanes past the edge of" in got[0], got
