"""The kernels benchmarks/user_kernels_probe.py times, on the CPU: each tle kernel on the interpreter against
torch on ragged sizes (the probe itself checks them on the GPU before timing, at its own large sizes)."""
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
probe = pytest.importorskip("user_kernels_probe")

import tle  # noqa: E402


@pytest.fixture(scope="module")
def small():
    return tle.compile(probe.SMALL_TLE)


def test_transpose(small):
    x = torch.randn(70, 130)
    y = torch.full((130, 70), float("nan"))
    small.transpose[(2, 3)](x, y, BM=64, BN=64)
    assert torch.equal(y, x.t())


def test_colsum(small):
    x = torch.randn(150, 200, dtype=torch.bfloat16)
    out = torch.full((200,), float("nan"))
    small.colsum[(2,)](x, out, BM=64, BN=128)
    torch.testing.assert_close(out, x.float().sum(0), rtol=1e-5, atol=1e-4)


def test_bias_gelu(small):
    x, b = torch.randn(40, 200), torch.randn(200)
    y = torch.full((40, 200), float("nan"))
    small.bias_gelu[(2, 2)](x, b, y, BM=32, BN=128)
    # atol 3e-6: near t = -3.4, 1 + erf(t / sqrt 2) in f32 keeps about two digits of a result near 1e-3 (300
    # draws: 6 of them off by 1.01e-6 to 1.04e-6, which atol 1e-6 failed about one run in fifty)
    torch.testing.assert_close(y, torch.nn.functional.gelu(x + b), rtol=1e-5, atol=3e-6)


def test_linear_relu(small):
    a, w = torch.randn(40, 80, dtype=torch.float16), torch.randn(80, 70, dtype=torch.float16)
    bias = torch.randn(70, dtype=torch.float16)
    c = torch.full((40, 70), float("nan"), dtype=torch.float16)
    small.linear_relu[(2, 3)](a, w, bias, c, BM=32, BN=32, BK=32)
    want = torch.relu(a.float() @ w.float() + bias.float())
    torch.testing.assert_close(c.float(), want, rtol=2e-3, atol=2e-3)


def test_embedding(small):
    w = torch.randn(50, 300, dtype=torch.bfloat16)
    ids = torch.randint(0, 50, (21,), dtype=torch.int32)
    y = torch.full((21, 300), float("nan"), dtype=torch.bfloat16)
    small.embedding[(2, 3)](ids, w, y, BM=16, BN=128)
    assert torch.equal(y, w[ids.long()])


def test_embedding_bwd_adds_rows_that_share_an_id(small):
    # 21 tokens (a ragged last tile of ids) drawn from 5 ids, so rows collide; 300 columns, ragged against BN
    dy = torch.randn(21, 300, dtype=torch.bfloat16)
    ids = torch.randint(0, 5, (21,), dtype=torch.int32)
    dw = torch.zeros(50, 300)
    small.embedding_bwd[(2, 3)](ids, dy, dw, BM=16, BN=128)
    want = torch.zeros(50, 300).index_add_(0, ids, dy.float())
    torch.testing.assert_close(dw, want, rtol=1e-5, atol=1e-5)


def test_row_cumsum_carries_across_tiles(small):
    x = torch.randn(3, 1000)
    y = torch.full((3, 1000), float("nan"))
    small.row_cumsum[(3,)](x, y, BLOCK=256)  # 4 tiles, the last one 232 wide
    torch.testing.assert_close(y, torch.cumsum(x, 1), rtol=1e-5, atol=1e-4)
    xb = torch.randn(2, 600, dtype=torch.bfloat16)
    yb = torch.full((2, 600), float("nan"), dtype=torch.bfloat16)
    small.row_cumsum[(2,)](xb, yb, BLOCK=256)
    torch.testing.assert_close(yb.float(), torch.cumsum(xb.float(), 1), rtol=1e-2, atol=5e-2)


def test_col_cumsum_carries_down_the_columns(small):
    # 150 rows in tiles of 32 (the last one 22 high) and 200 columns in tiles of 128 (the second 72 wide)
    x = torch.randn(150, 200)
    y = torch.full((150, 200), float("nan"))
    small.col_cumsum[(2,)](x, y, BT=32, BD=128)
    torch.testing.assert_close(y, torch.cumsum(x, 0), rtol=1e-5, atol=1e-4)
    xb = torch.randn(70, 130, dtype=torch.bfloat16)
    yb = torch.full((70, 130), float("nan"), dtype=torch.bfloat16)
    small.col_cumsum[(3,)](xb, yb, BT=16, BD=64)
    torch.testing.assert_close(yb.float(), torch.cumsum(xb.float(), 0), rtol=1e-2, atol=5e-2)


def test_vocab_softmax_loops_over_a_ragged_row(small):
    x = torch.randn(3, 1000) * 4
    y = torch.full((3, 1000), float("nan"))
    small.vocab_softmax[(3,)](x, y, BLOCK=256)  # 4 tiles, the last one 232 wide
    torch.testing.assert_close(y, torch.softmax(x, -1), rtol=1e-5, atol=1e-7)


def test_linear_nt_transposes_the_weight_tiles(small):
    x, w = torch.randn(40, 80, dtype=torch.float16), torch.randn(70, 80, dtype=torch.float16)
    y = torch.full((40, 70), float("nan"), dtype=torch.float16)
    small.linear_nt[(2, 3)](x, w, y, BM=32, BN=32, BK=32)
    torch.testing.assert_close(y.float(), x.float() @ w.float().t(), rtol=2e-3, atol=2e-3)


def test_bmm_keeps_batches_apart(small):
    a, d = torch.randn(3, 40, 80, dtype=torch.float16), torch.randn(3, 80, 50, dtype=torch.float16)
    c = torch.full((3, 40, 50), float("nan"), dtype=torch.float16)
    small.bmm[(2, 2, 3)](a, d, c, BM=32, BN=32, BK=32)
    torch.testing.assert_close(c.float(), a.float() @ d.float(), rtol=2e-3, atol=2e-3)


def test_add_rmsnorm_writes_the_residual_and_the_norm(small):
    x, r, w = torch.randn(5, 300), torch.randn(5, 300), torch.randn(300)
    h, y = torch.full((5, 300), float("nan")), torch.full((5, 300), float("nan"))
    small.add_rmsnorm[(5,)](x, r, w, h, y, 1e-6, BLOCK=512)
    assert torch.equal(h, x + r)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x + r, (300,), w, 1e-6), rtol=1e-5, atol=1e-5)


def test_rope_rotates_the_two_halves_of_each_head(small):
    x = torch.randn(5, 11, 32, dtype=torch.bfloat16)  # 11 heads: the second program's block of 8 is ragged
    ang = torch.arange(5)[:, None] * (10000.0 ** (-torch.arange(0, 32, 2) / 32))
    cos, sin = ang.cos(), ang.sin()
    y = torch.full_like(x, float("nan"))
    small.rope[(5, 2)](x, cos, sin, y, BH=8, HALF=16)
    x1, x2 = x.float()[..., :16], x.float()[..., 16:]
    c, s = cos[:, None, :], sin[:, None, :]
    assert torch.equal(y, torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(torch.bfloat16))


def test_rope_pairs_rotates_interleaved_pairs(small):
    x = torch.randn(5, 11, 32, dtype=torch.bfloat16)
    ang = torch.arange(5)[:, None] * (10000.0 ** (-torch.arange(0, 32, 2) / 32))
    cos, sin = ang.cos(), ang.sin()
    y = torch.full_like(x, float("nan"))
    small.rope_pairs[(5, 2)](x, cos, sin, y, BH=8, D=32)
    p = x.float().unflatten(-1, (16, 2))
    e, o, c, s = p[..., 0], p[..., 1], cos[:, None, :], sin[:, None, :]
    assert torch.equal(y, torch.stack((e * c - o * s, e * s + o * c), -1).flatten(-2).to(torch.bfloat16))


def test_cross_entropy_over_a_ragged_vocabulary(small):
    x = torch.randn(4, 1000) * 3
    target = torch.tensor([0, 999, 512, 7], dtype=torch.int32)
    loss = torch.full((4,), float("nan"))
    small.cross_entropy[(4,)](x, target, loss, BLOCK=256)  # 4 tiles, the last one 232 wide
    want = torch.nn.functional.cross_entropy(x, target.long(), reduction="none")
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-5)


def test_cross_entropy_bwd_over_a_ragged_vocabulary(small):
    x = torch.randn(4, 1000) * 3
    target = torch.tensor([0, 999, 512, 256], dtype=torch.int32)  # the first and last column, a tile's first lane
    lse, dloss = torch.logsumexp(x, -1), torch.rand(4)
    dx = torch.full((4, 1000), float("nan"))
    small.cross_entropy_bwd[(4,)](x, target, lse, dloss, dx, BLOCK=256)  # 4 tiles, the last one 232 wide
    xg = x.clone().requires_grad_()
    torch.nn.functional.cross_entropy(xg, target.long(), reduction="none").backward(dloss)
    torch.testing.assert_close(dx, xg.grad, rtol=1e-5, atol=1e-6)
    xb, dxb = x.to(torch.bfloat16), torch.full((4, 1000), float("nan"), dtype=torch.bfloat16)
    small.cross_entropy_bwd[(4,)](xb, target, torch.logsumexp(xb.float(), -1), dloss, dxb, BLOCK=256)
    xg = xb.float().requires_grad_()
    torch.nn.functional.cross_entropy(xg, target.long(), reduction="none").backward(dloss)
    torch.testing.assert_close(dxb.float(), xg.grad, rtol=1e-2, atol=1e-3)


def test_linear_w8a8_scales_an_exact_integer_product(small):
    x = torch.randint(-128, 128, (40, 300), dtype=torch.int8)
    w = torch.randint(-128, 128, (70, 300), dtype=torch.int8)  # K = 300: the last K tile is ragged
    sx, sw = torch.rand(40) / 64, torch.rand(70) / 64
    y = torch.full((40, 70), float("nan"), dtype=torch.bfloat16)
    small.linear_w8a8[(2, 3)](x, w, sx, sw, y, BM=32, BN=32, BK=128)
    exact = x.long() @ w.long().t()
    assert exact.abs().max() < 2 ** 24  # so that the f32 products below are the kernel's, bit for bit
    want = (exact.float() * (sx[:, None] * sw[None, :])).to(torch.bfloat16)
    torch.testing.assert_close(y.float(), want.float(), rtol=8e-3, atol=1e-6)


def test_linear_fp8_scales_an_8bit_product():
    fp8 = tle.compile(os.path.join(ROOT, "examples", "linear_fp8.tle"))  # the kernel the probe times
    x = (torch.randn(40, 300) * 32).to(torch.float8_e4m3fn)
    w = (torch.randn(70, 300) * 32).to(torch.float8_e4m3fn)  # K = 300: the last K tile is ragged
    sx, sw = torch.rand(40) / 256 + 1e-3, torch.rand(70) / 256 + 1e-3
    y = torch.full((40, 70), float("nan"), dtype=torch.bfloat16)
    fp8.linear_fp8[(2, 3)](x, w, sx, sw, y, BM=32, BN=32, BK=128)
    want = (x.double() @ w.double().t()) * sx.double()[:, None] * sw.double()[None, :]
    torch.testing.assert_close(y.double(), want, rtol=8e-3, atol=1e-6)


def test_linear_fp8_block_scales_each_block(small):
    """128x128 weight blocks and 1x128 activation blocks, each scale applied to its own K tile's product: the
    reference expands the scales to the elements, and the kernel's f32 sums of exact products match it."""
    m, n, k = 40, 200, 300  # a ragged K tile, and two weight blocks along N (the second ragged)
    kb = -(-k // 128)
    x = (torch.randn(m, k) * 32).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k) * 32).to(torch.float8_e4m3fn)
    sx, sw = torch.rand(m, kb) / 256 + 1e-3, torch.rand(-(-n // 128), kb) / 256 + 1e-3
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    small.linear_fp8_block[(1, 2)](x, w, sx, sw, y, BM=64)
    xs = sx.repeat_interleave(128, dim=1)[:, :k]
    ws = sw.repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    want = (x.double() * xs.double()) @ (w.double() * ws.double()).t()
    torch.testing.assert_close(y.double(), want, rtol=8e-3, atol=1e-6)


def test_moe_gemm_multiplies_each_token_by_its_expert(small):
    """Tokens grouped by expert in blocks of 64, the last block of each group padded with the id M (neither read nor
    written); a ragged K and N."""
    m, k, n, experts = 150, 100, 200, 3
    route = torch.randint(0, experts, (m,))
    ids, blocks = [], []
    for e in range(experts):
        idx = (route == e).nonzero().flatten()
        nblk = -(-idx.numel() // 64)
        ids.append(torch.cat((idx, torch.full((nblk * 64 - idx.numel(),), m))))
        blocks += [e] * nblk
    x, w = torch.randn(m, k).bfloat16(), torch.randn(experts, n, k).bfloat16()
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    small.moe_gemm[(len(blocks), 2)](x, torch.cat(ids).int(), torch.tensor(blocks, dtype=torch.int32), w, y)
    want = torch.stack([x[i].double() @ w[route[i]].double().t() for i in range(m)])
    torch.testing.assert_close(y.double(), want, rtol=8e-3, atol=0.05)


def test_paged_attention_walks_each_sequences_blocks(small):
    """Sequences of 5, 40 and 33 tokens (one block partly used, a ragged last block) in shuffled cache blocks."""
    b, h, d, bs = 3, 2, 128, 16
    lens = torch.tensor([5, 40, 33], dtype=torch.int32)
    table = torch.randperm(20)[:9].view(b, 3).int()
    q = torch.randn(b, h, d).bfloat16()
    kc, vc = torch.randn(20, bs, h, d).bfloat16(), torch.randn(20, bs, h, d).bfloat16()
    o = torch.full((b, h, d), float("nan"), dtype=torch.bfloat16)
    small.paged_attention[(b, h)](q, kc, vc, table, lens, o, d ** -0.5)
    _check_paged(o, q, kc, vc, table, lens)


def _check_paged(o, q, kc, vc, table, lens):
    """o against softmax(k q * d^-0.5) v over each sequence's first lens[i] tokens of its blocks, in float64."""
    b, h, d = q.shape
    for i in range(b):
        n = int(lens[i])
        k = kc[table[i].long()].reshape(-1, h, d)[:n].double()
        v = vc[table[i].long()].reshape(-1, h, d)[:n].double()
        for j in range(h):
            want = torch.softmax(k[:, j] @ q[i, j].double() * d ** -0.5, 0) @ v[:, j]
            torch.testing.assert_close(o[i, j].double(), want, rtol=2e-2, atol=1e-2)


def test_paged_attention_split_over_partitions_then_combined(small):
    """Flash-decoding: partitions of 32 tokens (2 blocks), sequences of 5, 40, 33 and 100 tokens, so some programs
    walk nothing (their sequence ends before their partition) and some a ragged last block."""
    b, h, d, bs, part = 4, 2, 128, 16, 32
    lens = torch.tensor([5, 40, 33, 100], dtype=torch.int32)
    maxb = 7
    table = torch.randperm(40)[:b * maxb].view(b, maxb).int()
    q = torch.randn(b, h, d).bfloat16()
    kc, vc = torch.randn(40, bs, h, d).bfloat16(), torch.randn(40, bs, h, d).bfloat16()
    p = -(-maxb * bs // part)  # 4 partitions
    pm, ps, po = torch.empty(b, h, p), torch.empty(b, h, p), torch.empty(b, h, p, d)
    o = torch.full((b, h, d), float("nan"), dtype=torch.bfloat16)
    small.paged_attention_split[(b, h, p)](q, kc, vc, table, lens, pm, ps, po, d ** -0.5, PART=part)
    small.paged_attention_combine[(b, h)](pm, ps, po, o, PP=4)
    _check_paged(o, q, kc, vc, table, lens)
    assert torch.isinf(pm[0, :, 1:]).all() and (ps[0, :, 1:] == 0).all()  # 5 tokens: partitions 1-3 are empty


def test_matmul_tf32_on_ragged_tiles(small):
    a, b = torch.randn(40, 80), torch.randn(80, 70)
    c = torch.full((40, 70), float("nan"))
    small.matmul_tf32[(2, 3)](a, b, c, BM=32, BN=32, BK=32)
    torch.testing.assert_close(c, a @ b, rtol=1e-2, atol=2e-2)  # TF32 rounding allowed


def test_matmul_f32_on_ragged_tiles(small):
    a, b = torch.randn(40, 80), torch.randn(80, 70)
    c = torch.full((40, 70), float("nan"))
    small.matmul_tf32[(2, 3)](a, b, c, BM=32, BN=32, BK=32, TF32=False)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)  # full f32 precision


def test_softmax_bwd_over_a_ragged_row(small):
    y = torch.softmax(torch.randn(6, 1000), -1)
    dy = torch.randn(6, 1000)
    dx = torch.full((6, 1000), float("nan"))
    small.softmax_bwd[(6,)](y, dy, dx, BLOCK=1024)
    torch.testing.assert_close(dx, torch._softmax_backward_data(dy, y, -1, torch.float32), rtol=1e-5, atol=1e-7)


def test_greedy_takes_the_first_maximum_of_a_ragged_row(small):
    x = torch.randn(5, 1000)
    x[1, 10] = x[1, 900] = 50.0  # a tie in different lanes and tiles: the first index wins
    x[2, 999] = 50.0             # in the ragged last tile
    x[3, 3] = x[3, 259] = 50.0   # a tie in the same lane (3 and 256 + 3): the earlier tile wins
    out = torch.full((5,), -1, dtype=torch.int32)
    small.greedy[(5,)](x, out, BLOCK=256)
    assert out.tolist() == torch.argmax(x, -1).tolist()
    assert out[1:4].tolist() == [10, 999, 3]


def test_linear_w4a16_unpacks_both_nibbles(small):
    m, h, n = 5, 200, 70  # K = 400; both halves' last K tile ragged
    x = torch.randn(m, 2 * h, dtype=torch.bfloat16)
    q = torch.randint(-128, 128, (h, n), dtype=torch.int8)
    scale = (torch.rand(n) / 8).to(torch.bfloat16)
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    small.linear_w4a16[(1, 3)](x[:, :h], x[:, h:], q, scale, y, BM=16, BN=32, BK=128)
    w = torch.cat(((q & 15) - 8, ((q >> 4) & 15) - 8)).float()
    assert w.min() == -8 and w.max() == 7
    want = (x.float() @ w) * scale.float()
    torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-2)


def test_layernorm_bwd_matches_torch_with_partial_sums(small):
    m, n, rows = 37, 300, 16  # 3 programs, the last with 5 rows; a ragged row tile
    x, dy, w, b = torch.randn(m, n), torch.randn(m, n), torch.randn(n), torch.randn(n)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
    gp = -(-m // rows)
    dx = torch.full((m, n), float("nan"))
    dw_part, db_part = torch.full((gp, n), float("nan")), torch.full((gp, n), float("nan"))
    dw, db = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
    small.layernorm_bwd[(gp,)](x, dy, w, mean.view(m), rstd.view(m), dx, dw_part, db_part, ROWS=rows, BLOCK=512)
    small.layernorm_bwd_reduce[(-(-n // 64),)](dw_part, db_part, dw, db, BG=2, BN=64)
    want = torch.ops.aten.native_layer_norm_backward(dy, x, [n], mean, rstd, w, b, [True, True, True])
    for got, exp in zip((dx, dw, db), want):
        torch.testing.assert_close(got, exp, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("q,qmax", [(torch.int8, 127.0), (torch.float8_e4m3fn, 448.0)])
def test_quant_rows_scales_each_row_to_its_largest_value(small, q, qmax):
    x = torch.randn(5, 300, dtype=torch.bfloat16) * 3
    y = torch.zeros(5, 300, dtype=q)
    s = torch.full((5,), float("nan"))
    small.quant_rows[(5,)](x, y, s, BLOCK=512, QMAX=qmax)  # one ragged tile a row
    amax = x.float().abs().amax(1)
    torch.testing.assert_close(s, amax / qmax)
    # torch's `qmax / amax` multiplies by a reciprocal (1 ulp off IEEE division); the kernel divides
    scale = torch.full_like(amax, qmax) / amax
    assert torch.equal(y, (x.float() * scale[:, None]).to(q))  # int8 truncates, e4m3 rounds to nearest even


def test_output_error_fails_an_output_left_unwritten():
    want = torch.ones(4)
    assert probe.output_error([torch.ones(4), torch.ones(4)], [want, want]) == 0
    half = torch.tensor([1.0, 1.0, float("nan"), float("nan")])
    assert probe.output_error([torch.ones(4), half], [want, want]) == float("inf")  # not max(0, nan) == 0
    assert probe.output_error([torch.tensor([1.0, 1.1, 1.0, 1.0])], [want]) == pytest.approx(0.1)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    assert probe.output_error([idx], [idx.float()]) == 0
    assert probe.output_error([torch.tensor([3, 2], dtype=torch.int32)], [idx.float()]) == float("inf")


def test_dropout4(small):
    """Four words per generator run: element e keeps word e % 4 of counter e / 4 (Triton's rand4x)."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import reference
    n = 5000
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    small.dropout4[(5,)](x, y, seed=1234567, p=0.1, BLOCK=1024)
    words = reference.philox_rand(1234567, torch.arange(1250, dtype=torch.int32), words=4).flatten()[:n]
    p = torch.tensor(0.1).item()
    want = torch.where(words > p, x / torch.tensor(1 - p, dtype=torch.float32), torch.zeros(1))
    torch.testing.assert_close(y, want, rtol=1e-6, atol=0)


def test_router_topk_and_sort_rows(small):
    x = torch.randn(40, 256)
    y = torch.full((40, 8), float("nan"))
    small.router_topk[(3,)](x, y, BM=16, E=256, K=8)
    assert torch.equal(y, torch.topk(x, 8, dim=-1).values)
    x = torch.randn(10, 64)
    y = torch.full((10, 64), float("nan"))
    small.sort_rows[(3,)](x, y, BM=4, N=64)
    assert torch.equal(y, torch.sort(x, dim=-1).values)


def test_router_topk_ids(small):
    x = torch.randn(40, 256)
    y, ids = torch.full((40, 8), float("nan")), torch.full((40, 8), -1, dtype=torch.int32)
    small.router_topk_ids[(3,)](x, y, ids, BM=16, E=256, K=8)
    top = torch.topk(x, 8, dim=-1)
    assert torch.equal(y, top.values) and torch.equal(ids.long(), top.indices)


@pytest.mark.parametrize("nb, hw, c, f, kk, stride", [(2, 6, 32, 32, 3, 1), (2, 7, 48, 40, 3, 2), (1, 5, 16, 24, 1, 1)])
def test_conv2d(small, nb, hw, c, f, kk, stride):
    # ragged: channels past one BK tile, filters not a multiple of BN, pixels past one BM tile, padding at the edges
    pad = kk // 2
    p = (hw + 2 * pad - kk) // stride + 1
    x = torch.randn(nb, hw, hw, c, dtype=torch.float16)
    wt = torch.randn(f, c, kk, kk, dtype=torch.float16)
    w = wt.permute(2, 3, 1, 0).reshape(kk * kk, c, f).contiguous()
    y = torch.full((nb * p * p, f), float("nan"), dtype=torch.float16)
    small.conv2d[(-(-nb * p * p // 32), -(-f // 32))](x, w, y, p, p, BM=32, BN=32, BK=16, KH=kk, KW=kk,
                                                        STRIDE=stride, PAD=pad)
    want = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), wt.float(), stride=stride, padding=pad)
    torch.testing.assert_close(y.float(), want.permute(0, 2, 3, 1).reshape(-1, f), rtol=2e-3, atol=2e-2)


def test_gate_up_silu_fuses_two_products(small):
    # ragged on every axis: rows past one BM tile, N not a multiple of BN, K past one BK tile and not a multiple of it
    x = torch.randn(40, 50, dtype=torch.bfloat16)
    wg, wu = torch.randn(70, 50, dtype=torch.bfloat16), torch.randn(70, 50, dtype=torch.bfloat16)
    y = torch.full((40, 70), float("nan"), dtype=torch.bfloat16)
    small.gate_up_silu[(2, 3)](x, wg, wu, y, BM=32, BN=32, BK=16)
    g, u = x.float() @ wg.float().t(), x.float() @ wu.float().t()
    torch.testing.assert_close(y.float(), torch.nn.functional.silu(g) * u, rtol=2e-2, atol=2e-2)


def test_linear_wgrad_sums_over_tokens(small):
    # ragged on every axis: tokens past two BT tiles and not a multiple of BT, N and K not multiples of their tiles
    dy = torch.randn(70, 40, dtype=torch.bfloat16)
    x = torch.randn(70, 50, dtype=torch.bfloat16)
    dw = torch.full((40, 50), float("nan"), dtype=torch.bfloat16)
    small.linear_wgrad[(2, 2)](dy, x, dw, BN=32, BK=32, BT=16)
    torch.testing.assert_close(dw.float(), dy.float().t() @ x.float(), rtol=2e-2, atol=5e-2)


def test_gemv_over_ragged_rows_and_columns(small):
    w, x = torch.randn(40, 600, dtype=torch.bfloat16), torch.randn(600, dtype=torch.bfloat16)
    y = torch.full((40,), float("nan"), dtype=torch.bfloat16)
    small.gemv[(3,)](w, x, y)  # BN 16, BK 256: 40 rows in 3 programs, 600 columns in 3 tiles, both ragged
    torch.testing.assert_close(y.float(), w.float() @ x.float(), rtol=1e-2, atol=1e-2)


def test_group_norm_matches_torch(small):
    # 4 groups of 3 channels of 7x9 (189 elements each: a ragged last tile of 64), then the case's grouped views
    n, c, h, w, g = 2, 12, 7, 9, 4
    x, wt, b = torch.randn(n, c, h, w), torch.randn(c), torch.randn(c)
    y = torch.full_like(x, float("nan"))
    small.group_norm[(n * g,)](x.view(n * g, -1), wt, b, y.view(n * g, -1), g, h * w, 1e-5, BLOCK=64, T="f32")
    torch.testing.assert_close(y, torch.nn.functional.group_norm(x, g, wt, b, 1e-5), rtol=1e-4, atol=1e-4)


def test_kv_cache_write_skips_padding_slots(small):
    k, v = torch.randn(9, 2, 16, dtype=torch.bfloat16), torch.randn(9, 2, 16, dtype=torch.bfloat16)
    kc = torch.zeros(6, 4, 2, 16, dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    slots = torch.randperm(24)[:9]
    slots[4] = -1  # a padding token: nothing written
    small.kv_cache_write[(9,)](k, v, kc, vc, slots, H=2, D=16)
    ok = slots >= 0
    want_k, want_v = torch.zeros_like(kc), torch.zeros_like(vc)
    want_k.view(-1, 2, 16)[slots[ok]] = k[ok]
    want_v.view(-1, 2, 16)[slots[ok]] = v[ok]
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)

def test_mean_pool_counts_only_unmasked_tokens(small):
    # 70 tokens (a ragged last tile of 16), 300 columns (ragged against 256); one sequence fully masked (count 0)
    x = torch.randn(3, 70, 300)
    mask = (torch.rand(3, 70) > 0.3).float()
    mask[1] = 0
    y = torch.full((3, 300), float("nan"))
    small.mean_pool[(3, 2)](x, mask, y, BT=16, BD=256, T="f32")
    want = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def test_ssm_update_decays_and_adds_the_input(small):
    bs, dim, n = 2, 100, 16  # 100 channels: a ragged second tile of 64
    state, x, dt = torch.randn(bs, dim, n), torch.randn(bs, dim), torch.rand(bs, dim)
    a, bm, cm, dskip = -torch.rand(dim, n), torch.randn(bs, n), torch.randn(bs, n), torch.randn(dim)
    nxt, out = torch.full((bs, dim, n), float("nan")), torch.full((bs, dim), float("nan"))
    small.ssm_update[(bs, 2)](state, x, dt, a, bm, cm, dskip, nxt, out)
    s2 = state * torch.exp(dt[..., None] * a) + (dt * x)[..., None] * bm[:, None, :]
    torch.testing.assert_close(nxt, s2, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, (s2 * cm[:, None, :]).sum(-1) + dskip * x, rtol=1e-5, atol=1e-4)

def test_causal_conv1d_reads_zeros_before_the_first_step(small):
    x, w, bias = torch.randn(2, 20, 300), torch.randn(20, 4), torch.randn(20)  # 20 channels, 300 steps: ragged tiles
    y = torch.full((2, 20, 300), float("nan"))
    small.causal_conv1d[(2, 2, 2)](x, w, bias, y, T="f32")
    conv = torch.nn.functional.conv1d(x, w[:, None, :], bias, padding=3, groups=20)[..., :300]
    torch.testing.assert_close(y, torch.nn.functional.silu(conv), rtol=1e-5, atol=1e-5)


def test_embedding_bag_sums_each_bag_and_leaves_empty_ones_zero(small):
    offsets = torch.tensor([0, 3, 3, 10, 11, 20, 25, 30], dtype=torch.int32)  # bag 1 is empty
    ids = torch.randint(0, 50, (30,), dtype=torch.int32)
    table = torch.randn(50, 200)
    out = torch.full((7, 200), float("nan"))
    small.embedding_bag[(7, 2)](table, ids, offsets, out)  # 200 columns: a ragged second tile of 128
    want = torch.nn.functional.embedding_bag(ids.long(), table, offsets[:-1].long(), mode="sum")
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_dwconv3x3_pads_with_zeros(small):
    x, w = torch.randn(2, 3, 37, 70), torch.randn(3, 9)  # 37 rows, 70 columns: ragged against 16x64 tiles
    y = torch.full((2, 3, 37, 70), float("nan"))
    small.dwconv3x3[(6, 3, 2)](x, w, y, T="f32")
    want = torch.nn.functional.conv2d(x, w.view(3, 1, 3, 3), padding=1, groups=3)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def test_heads_first_moves_the_head_axis(small):
    x = torch.randn(2, 70, 3, 16)  # 70 positions: a ragged second tile of 64
    y = torch.full((2, 3, 70, 16), float("nan"))
    small.heads_first[(6, 2)](x, y, D=16, T="f32")
    assert torch.equal(y, x.permute(0, 2, 1, 3))


def test_router_top1_gives_each_token_its_expert_and_weight(small):
    logits = torch.randn(100, 8)  # 100 tokens: a ragged second tile of 64
    weight, expert = torch.full((100,), float("nan")), torch.full((100,), -1, dtype=torch.int32)
    small.router_top1[(2,)](logits, weight, expert, E=8)
    w, i = torch.softmax(logits, dim=1).max(dim=1)
    torch.testing.assert_close(weight, w, rtol=1e-6, atol=1e-6)
    assert torch.equal(expert, i.int())


def test_row_max_gives_torch_max_values_and_first_indices(small):
    x = torch.randn(23, 64)  # 23 rows: a ragged last tile of 4
    x[1, 9] = x[1, 50] = 8.0  # a tie: the first index
    x[2, 40] = x[2, 7] = float("nan")  # NaNs: the value is NaN, the index the first NaN's
    x[3] = -0.0  # -0.0 and +0.0 are equal for the index; the value is +0.0 (docs/numerics.md)
    x[3, 33] = 0.0
    v, i = torch.full((23,), 7.0), torch.full((23,), -1, dtype=torch.int32)
    small.row_max[(6,)](x, v, i, N=64)
    want = x.max(dim=1)
    want_i = want.indices.clone()
    want_i[1], want_i[2], want_i[3] = 9, 7, 0
    assert torch.equal(i, want_i.int())
    torch.testing.assert_close(v, want.values, equal_nan=True)
    assert v[3].item() == 0.0 and math.copysign(1.0, v[3].item()) == 1.0


def test_spmv_csr_sums_each_row_and_leaves_empty_ones_zero(small):
    lengths = torch.tensor([3, 0, 70, 1, 64, 0, 129])  # empty rows, one entry, ragged and whole tiles of 64
    row_ptr = torch.zeros(8, dtype=torch.int32)
    row_ptr[1:] = torch.cumsum(lengths, 0)
    nnz = int(row_ptr[-1])
    cols, vals, x = torch.randint(0, 50, (nnz,), dtype=torch.int32), torch.randn(nnz), torch.randn(50)
    y = torch.full((7,), float("nan"))
    small.spmv_csr[(7,)](row_ptr, cols, vals, x, y)
    want = torch.stack([(vals[s:e] * x[cols[s:e].long()]).sum() for s, e in zip(row_ptr[:-1], row_ptr[1:])])
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def test_lora_adds_the_scaled_low_rank_product(small):
    x, w, a, b = torch.randn(40, 70), torch.randn(50, 70), torch.randn(16, 70), torch.randn(50, 16)
    y = torch.full((40, 50), float("nan"))  # 40x50 out of 32x32 tiles, K = 70 of 32: ragged everywhere
    small.lora[(2, 2)](x, w, a, b, y, 0.25, BM=32, BN=32, BK=32, T="f32")
    torch.testing.assert_close(y, x @ w.t() + 0.25 * (x @ a.t()) @ b.t(), rtol=1e-4, atol=1e-4)


def test_maxpool2x2_drops_an_odd_last_row_and_keeps_nan(small):
    x = torch.randn(3, 37, 70)  # 37 rows: the 37th has no pair and is dropped; ragged against 32x128 windows
    x[1, 4, 9] = float("nan")
    y = torch.full((3, 18, 35), float("nan"))
    small.maxpool2x2[(3, 2, 1)](x, y, T="f32")
    want = torch.nn.functional.max_pool2d(x[:, None], 2)[:, 0]
    assert torch.isnan(y[1, 2, 4]) and torch.isnan(want[1, 2, 4])
    torch.testing.assert_close(y, want, equal_nan=True)


def test_upsample_nearest2x_repeats_each_element_in_a_2x2_square(small):
    x = torch.randn(3, 13, 70)  # 26x140 out of 16x128 tiles: ragged both ways
    y = torch.full((3, 26, 140), float("nan"))
    small.upsample_nearest2x[(3, 2, 2)](x, y, T="f32")
    assert torch.equal(y, torch.nn.functional.interpolate(x[None], scale_factor=2)[0])


def test_upsample_bilinear2x_matches_torch_at_half_pixel_centres(small):
    x = torch.randn(3, 13, 70)  # the last row and column clamp to the edge
    y = torch.full((3, 26, 140), float("nan"))
    small.upsample_bilinear2x[(3, 2, 3)](x, y)
    want = torch.nn.functional.interpolate(x[None], scale_factor=2, mode="bilinear", align_corners=False)[0]
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def _linear_attn(q, k, v, scale):
    """o_t = scale * sum over s <= t of (q_t . k_s) v_s, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    return (q @ k.transpose(1, 2) * scale).tril() @ v


@pytest.mark.parametrize("ln, d, c, t, tol", [(150, 32, 32, "f32", 1e-4), (192, 16, 16, "bf16", 2e-2)])
def test_chunk_linear_attn_carries_the_state_across_chunks(small, ln, d, c, t, tol):
    # 5 chunks of 32 in f32 (the last one 22 long: its padded rows must add nothing) and 12 of 16 in bf16. Measured
    # against the largest output as the probe measures (2e-7 in f32, 3e-3 in bf16), a mask that drops the diagonal
    # (i > j) was off by 0.17-0.28, one that keeps the upper triangle 0.34-0.39, the state updated before the
    # chunk's output 0.33-0.61, and no state at all 1.0
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[t]
    q, k, v = (torch.randn(3, ln, d).to(dt) for _ in range(3))
    o = torch.full((3, ln, d), float("nan"), dtype=dt)
    small.chunk_linear_attn[(3,)](q, k, v, o, 0.25, C=c, D=d, T=t)
    want = _linear_attn(q, k, v, 0.25)
    err = ((o.double() - want).abs().max() / want.abs().max()).item()  # the probe's measure (output_error)
    assert err <= tol, err


def test_qk_norm_rope_normalises_each_head_then_rotates_its_halves(small):
    # 5 tokens of 12 heads in tiles of 8 (the second head block is ragged); the weight differs per value, so a
    # norm over the wrong axis, a missing weight or swapped halves all show
    s_, h, d = 5, 12, 16
    x, w = torch.randn(s_, h, d), 1.0 + torch.rand(d)
    ang = torch.arange(s_)[:, None] * (100.0 ** (-torch.arange(0, d, 2) / d))
    cs, sn = ang.cos(), ang.sin()
    y = torch.full((s_, h, d), float("nan"))
    small.qk_norm_rope[(s_, 2)](x, w, cs, sn, y, 1e-6, BH=8, HALF=d // 2, T="f32")
    n = torch.nn.functional.rms_norm(x, (d,), w, 1e-6)
    n1, n2, c, s = n[..., :d // 2], n[..., d // 2:], cs[:, None, :], sn[:, None, :]
    torch.testing.assert_close(y, torch.cat((n1 * c - n2 * s, n2 * c + n1 * s), -1), rtol=1e-5, atol=1e-5)


def _varlen_attention(q, k, v, starts, scale):
    """Causal softmax attention of each packed sequence (tokens starts[b] .. starts[b + 1] - 1) over its own keys,
    in float64; rows after the last sequence stay 0."""
    o = torch.zeros(q.shape, dtype=torch.float64)
    for s_, e in zip(starts[:-1], starts[1:]):
        qs, ks, vs = (x[s_:e].double().transpose(0, 1) for x in (q, k, v))  # [H, len, D]
        scores = (qs @ ks.transpose(1, 2) * scale).masked_fill(torch.ones(e - s_, e - s_).triu(1).bool(), -math.inf)
        o[s_:e] = (scores.softmax(-1) @ vs).transpose(0, 1)
    return o


@pytest.mark.parametrize("kernel", ["varlen_attention", "varlen_attention_gather"])
@pytest.mark.parametrize("bm, bn, t, tol", [(16, 16, "f32", 1e-5), (32, 16, "f32", 1e-5), (16, 16, "bf16", 2e-2)])
def test_varlen_attention_keeps_each_packed_sequence_causal_and_apart(small, kernel, bm, bn, t, tol):
    # sequences of 5 (shorter than a tile), 70 (a ragged last tile) and 33 tokens packed from rows 0, 5 and 75, none
    # at a multiple of a tile, then 3 rows of no sequence that must stay unwritten (NaN); BM = 32 over BN = 16 has
    # two key tiles in each diagonal band. Measured as the probe measures (1e-7 to 2e-7 in f32, 1e-3 to 3e-3 in
    # bf16; four seeds), no causal mask was off by 0.95-1.3, `<` for its `<=` NaN (a first query that sees no key),
    # keys read from row 0 instead of the sequence's start 1.07-1.32, an accumulator not rescaled by alpha
    # 0.35-0.83, and a band of one key tile (stop at cdiv(min(m * BM + BN, len), BN)) 0.25-0.42 with BM = 32. The
    # interpreter itself stops a scatter masked `rows <= len` (two programs write a row), a dropped gather or
    # scatter mask and a first band tile read unmasked (out of bounds in the last sequence's ragged tile). The
    # sliced form (varlen_attention) reads and writes through windows of the sequence's rows instead: keys from a
    # window a row late were off by 1.25-1.34, and an output window a row too long wrote the row after the last
    # sequence
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[t]
    starts, h, d = [0, 5, 75, 108], 2, 16
    q, k, v = (torch.randn(111, h, d).to(dt) for _ in range(3))
    o = torch.full((111, h, d), float("nan"), dtype=dt)
    cu = torch.tensor(starts, dtype=torch.int32)
    getattr(small, kernel)[(math.ceil(70 / bm), 3, h)](q, k, v, cu, o, 0.25, BM=bm, BN=bn, D=d, T=t)
    want = _varlen_attention(q, k, v, starts, 0.25)
    err = ((o[:108].double() - want[:108]).abs().max() / want[:108].abs().max()).item()  # output_error's measure
    assert err <= tol, err
    assert o[108:].isnan().all()


def test_cast_transpose_writes_both_layouts_and_the_largest_magnitude(small):
    # 100x70 out of 64x64 tiles (ragged both ways); the scale (0.5) must reach both outputs, amax takes |x| before it
    x = torch.randn(100, 70, dtype=torch.bfloat16) * 4
    x[37, 51] = -300.0  # the largest magnitude, negative: amax is of |x|
    q = torch.full((100, 70), float("nan"), dtype=torch.float8_e4m3fn)
    qt = torch.full((70, 100), float("nan"), dtype=torch.float8_e4m3fn)
    amax = torch.zeros(1)
    small.cast_transpose[(2, 2)](x, torch.tensor([0.5]), q, qt, amax)
    want = (x.float() * 0.5).to(torch.float8_e4m3fn)
    assert torch.equal(q.float(), want.float()) and torch.equal(qt.float(), want.float().t())
    assert amax.item() == 300.0


def test_both_paths_names_the_path_auto_took(small):
    """_both_paths' `tle:auto` launches with no backend named and returns the path taken (the probe prints it, and
    does not time it); on the CPU that is the interpreter."""
    x = torch.randn(70, 130)
    y = torch.full((130, 70), float("nan"))
    impls = probe._both_paths(small.transpose, (2, 3), None, BM=64, BN=64)
    assert impls[probe.AUTO]([x, y]) == "interp"
    assert torch.equal(y, x.t())


def selective_scan_reference(u, dt, A, Bs, Cs, Ds):
    """mamba_ssm's selective_scan_ref without z: the state recurrence one time step at a time, in float64."""
    u, dt, A, Bs, Cs, Ds = (x.double() for x in (u, dt, A, Bs, Cs, Ds))
    h = torch.zeros(u.shape[0], u.shape[2], A.shape[1], dtype=torch.float64)
    ys = []
    for t in range(u.shape[1]):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * u[:, t])[:, :, None] * Bs[:, t, None, :]
        ys.append((h * Cs[:, t, None, :]).sum(2) + Ds * u[:, t])
    return torch.stack(ys, 1)


def test_selective_scan_carries_the_state_across_chunks(small):
    # 37 steps in chunks of 16 (the last one 5 long), 20 channels in blocks of 16 (the second 4 wide), 2 batches
    torch.manual_seed(3)
    b, n_steps, d, n = 2, 37, 20, 16
    u, Bs, Cs = torch.randn(b, n_steps, d), torch.randn(b, n_steps, n), torch.randn(b, n_steps, n)
    dt = torch.nn.functional.softplus(torch.randn(b, n_steps, d))
    A, Ds = -torch.rand(d, n) - 0.5, torch.randn(d)
    y = torch.full((b, n_steps, d), float("nan"))
    small.selective_scan[(2, b)](u, dt, A, Bs, Cs, Ds, y)
    torch.testing.assert_close(y.double(), selective_scan_reference(u, dt, A, Bs, Cs, Ds), rtol=1e-5, atol=1e-5)
