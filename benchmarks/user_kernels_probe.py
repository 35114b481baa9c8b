#!/usr/bin/env python3
"""Kernels a user might write that bench.py does not cover, timed the way bench.py times its own (issue 5: "I time
kernels of my own, tuned and untuned, against torch and Triton").

Each kernel is written once in tle (below, or examples/attention.tle, examples/attention_bwd.tle,
examples/linear_fp8.tle, examples/dropout.tle and examples/linear_recurrence.tle) and once as hand-written Triton
of the same algorithm and tiles; both are checked against torch
on fresh random inputs before anything is timed (dropout, whose mask torch draws differently, against Triton's
tl.rand: tle's rand is the same Philox, bit for bit). Columns:
tle on the native path with no launch options (tle.compiler.default_num_warps: 4 unless its dots or tiles are big),
tle native with the reference's options, tle on Tile IR, the Triton reference, torch (and, for some kernels,
`tle:tuned` through the tuning database, or bmm's `tle:persistent`: examples/matmul_batched.tle; the configuration
linear_recurrence's and selective_scan's `tle:tuned` chose is printed under the case's line). The kernels
launched on both paths are also launched once with no backend named, checked, and the path `auto` took is named
on the case's line ("auto took tileir"); it is not timed, being one of the two. Timing:
bench.time_events (a spin kernel, then events around one launch), inputs rotated through enough copies to keep them
out of L2, implementations in a rotating order over --rounds rounds, median of the rounds.

    python benchmarks/user_kernels_probe.py [--only attention,transpose,colsum,bias_gelu,linear_relu,embedding,
                                                    vocab_softmax,linear_nt,bmm,add_rmsnorm,rope,rope_pairs,
                                                    attention_train,
                                                    cross_entropy,cross_entropy_bwd,linear_w8a8,linear_fp8,
                                                    linear_fp8_block,
                                                    moe_gemm,paged_attention,
                                                    matmul_tf32,matmul_f32,matmul_unaligned,softmax_bwd,greedy,
                                                    linear_w4a16,layernorm_bwd,dropout,topk,adam,quant_rows,
                                                    histogram,vector_sum,conv2d,gate_up_silu,
                                                    linear_wgrad,embedding_bwd,row_cumsum,group_norm,
                                                    kv_cache_write,gemv,mean_pool,ssm_update,causal_conv1d,
                                                    embedding_bag,dwconv3x3,heads_first,router_top1,
                                                    spmv_csr,lora,maxpool2x2,upsample_nearest2x,
                                                    upsample_bilinear2x,row_max,chunk_linear_attn,
                                                    qk_norm_rope,varlen_attention,col_cumsum,
                                                    cast_transpose,linear_recurrence,selective_scan,welford,
                                                    gelu_tanh]
                                                    [--rounds 3]
                                                    [--occupancy 4]
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import triton_ref  # noqa: E402

import tle  # noqa: E402

SMALL_TLE = r"""
kernel transpose<BM: int = 64, BN: int = 64, T: dtype = f32>(x: tensor<T>[M, N], y: tensor<T>[N, M]) {
    store(y, transpose(load(x, tile=[BM, BN], at=[program_id(0), program_id(1)])), at=[program_id(1), program_id(0)])
}

kernel colsum<BM: int = 64, BN: int = 128, T: dtype = f32>(x: tensor<T>[M, N], out: tensor<f32>[N]) {
    let j = program_id(0)
    var acc = zeros<f32>[BN]
    for i in range(cdiv(M, BM)) {
        acc += sum(cast<f32>(load(x, tile=[BM, BN], at=[i, j])), axis=0)
    }
    store(out, acc, at=[j])
}

kernel bias_gelu<BM: int = 32, BN: int = 128, T: dtype = bf16>(
        x: tensor<T>[M, N], b: tensor<T>[N], y: tensor<T>[M, N]) {
    let t = cast<f32>(load(x, tile=[BM, BN], at=[program_id(0), program_id(1)]))
            + cast<f32>(load(b, tile=[BN], at=[program_id(1)]))
    store(y, cast<T>(0.5 * t * (1.0 + erf(t * 0.7071067811865476))), at=[program_id(0), program_id(1)])
}

kernel linear_relu<BM: int = 128, BN: int = 128, BK: int = 64, T: dtype = f16>(
        a: tensor<T>[M, K], w: tensor<T>[K, N], bias: tensor<T>[N], c: tensor<T>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(a, tile=[BM, BK], at=[pm, k]), load(w, tile=[BK, BN], at=[k, pn]), acc)
    }
    acc += cast<f32>(load(bias, tile=[BN], at=[pn]))
    store(c, cast<T>(max(acc, 0.0)), at=[pm, pn])
}

// An embedding lookup: y[i, :] = w[ids[i], :]. Rows past M read row 0 (ids' padding) and are not stored.
kernel embedding<BM: int = 16, BN: int = 512, T: dtype = bf16>(ids: tensor<i32>[M], w: tensor<T>[V, D],
                                                               y: tensor<T>[M, D]) {
    let rows = reshape(load(ids, tile=[BM], at=[program_id(0)]), [BM, 1])
    let cols = reshape(program_id(1) * BN + arange(0, BN), [1, BN])
    store(y, gather(w, [rows, cols], mask=cols < D), at=[program_id(0), program_id(1)])
}

// The embedding's backward: dw[ids[i], :] += dy[i, :] in f32, one atomic add per element (tokens sharing an id add
// into one row). Rows past M read id -1 (the padding) and add nothing.
kernel embedding_bwd<BM: int = 16, BN: int = 512, T: dtype = bf16>(ids: tensor<i32>[M], dy: tensor<T>[M, D],
                                                                   dw: tensor<f32>[V, D]) {
    let rows = reshape(load(ids, tile=[BM], at=[program_id(0)], pad=-1), [BM, 1])
    let cols = reshape(program_id(1) * BN + arange(0, BN), [1, BN])
    let g = cast<f32>(load(dy, tile=[BM, BN], at=[program_id(0), program_id(1)]))
    atomic_add(dw, [rows, cols], g, mask=(rows >= 0) & (cols < D))
}

// A running sum along rows longer than a tile: each program scans its row tile by tile, in f32, carrying the sum
// of the tiles before.
kernel row_cumsum<BLOCK: int = 2048, T: dtype = f32>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    let row = program_id(0)
    var carry = 0.0
    for j in range(cdiv(N, BLOCK)) {
        let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, j]))
        store(y, cast<T>(cumsum(t, axis=1) + carry), at=[row, j])
        carry = carry + sum(t)
    }
}

// Softmax over rows too long for one tile (a vocabulary of logits): one pass keeps a running maximum and sum per
// lane, a second writes exp(x - max) / sum.
kernel vocab_softmax<BLOCK: int = 2048, T: dtype = bf16>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    let row = program_id(0)
    var mx = full<f32>[1, BLOCK](-inf)
    var total = zeros<f32>[1, BLOCK]
    for j in range(cdiv(N, BLOCK)) {
        let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, j], pad=-inf))
        let m2 = max(mx, t)
        total = total * exp(mx - m2) + exp(t - m2)
        mx = m2
    }
    let m = max(mx, axis=1, keepdims=true)
    let s = sum(total * exp(mx - m), axis=1, keepdims=true)
    for j in range(cdiv(N, BLOCK)) {
        let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, j], pad=-inf))
        store(y, cast<T>(exp(t - m) / s), at=[row, j])
    }
}
// nn.Linear's layout: y = x @ w^T with the weight stored [N, K] (out_features x in_features), each weight tile
// loaded as it lies and transposed for the dot.
kernel linear_nt<BM: int = 128, BN: int = 256, BK: int = 64, T: dtype = bf16>(
        x: tensor<T>[M, K], w: tensor<T>[N, K], y: tensor<T>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(x, tile=[BM, BK], at=[pm, k]), transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)
    }
    store(y, cast<T>(acc), at=[pm, pn])
}

// A batch of independent products c[b] = a[b] @ d[b] (program_id(2) is the batch), each operand tile loaded as
// [1, rows, cols] and reshaped to two dimensions.
kernel bmm<BM: int = 128, BN: int = 128, BK: int = 64, T: dtype = f16>(
        a: tensor<T>[B, M, K], d: tensor<T>[B, K, N], c: tensor<T>[B, M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    let b = program_id(2)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(reshape(load(a, tile=[1, BM, BK], at=[b, pm, k]), [BM, BK]),
                  reshape(load(d, tile=[1, BK, BN], at=[b, k, pn]), [BK, BN]), acc)
    }
    store(c, reshape(cast<T>(acc), [1, BM, BN]), at=[b, pm, pn])
}

// A transformer block's residual step: h = x + r is written back (the next residual) and normalised,
// y = h / sqrt(mean(h^2) + eps) * w. One program per row, BLOCK >= N.
kernel add_rmsnorm<BLOCK: int = 4096, T: dtype = bf16>(x: tensor<T>[M, N], r: tensor<T>[M, N], w: tensor<T>[N],
                                                       h: tensor<T>[M, N], y: tensor<T>[M, N], eps: f32) {
    let row = program_id(0)
    let hs = load(x, tile=[1, BLOCK], at=[row, 0]) + load(r, tile=[1, BLOCK], at=[row, 0])
    store(h, hs, at=[row, 0])
    let t = cast<f32>(hs)
    let rstd = rsqrt(sum(t * t, axis=1, keepdims=true) / N + eps)
    store(y, cast<T>(t * rstd * cast<f32>(reshape(load(w, tile=[BLOCK]), [1, BLOCK]))), at=[row, 0])
}

// Rotary position embedding, GPT-NeoX's rotate-half form: in each head of token s, the halves x1 and x2 of its D
// values become x1 * cos - x2 * sin and x2 * cos + x1 * sin, with cos and sin [S, D / 2] per position. One program
// per token and BH heads; a head's halves are tiles 0 and 1 along D (D = 2 * HALF).
kernel rope<BH: int = 8, HALF: int = 64, T: dtype = bf16>(x: tensor<T>[S, H, D], cosines: tensor<f32>[S, E],
                                                       sines: tensor<f32>[S, E], y: tensor<T>[S, H, D]) {
    let s = program_id(0)
    let hb = program_id(1)
    let x1 = cast<f32>(reshape(load(x, tile=[1, BH, HALF], at=[s, hb, 0]), [BH, HALF]))
    let x2 = cast<f32>(reshape(load(x, tile=[1, BH, HALF], at=[s, hb, 1]), [BH, HALF]))
    let c = load(cosines, tile=[1, HALF], at=[s, 0])
    let sn = load(sines, tile=[1, HALF], at=[s, 0])
    store(y, reshape(cast<T>(x1 * c - x2 * sn), [1, BH, HALF]), at=[s, hb, 0])
    store(y, reshape(cast<T>(x2 * c + x1 * sn), [1, BH, HALF]), at=[s, hb, 1])
}

// Rotary embedding on interleaved pairs (GPT-J's layout): x[..., 2i] and x[..., 2i + 1] rotate together by angle i.
// split takes the pairs apart, join puts them back.
kernel rope_pairs<BH: int = 8, D: int = 128, T: dtype = bf16>(x: tensor<T>[S, H, D], cosines: tensor<f32>[S, E],
                                                             sines: tensor<f32>[S, E], y: tensor<T>[S, H, D]) {
    let s = program_id(0)
    let hb = program_id(1)
    let even, odd = split(reshape(cast<f32>(load(x, tile=[1, BH, D], at=[s, hb, 0])), [BH, D / 2, 2]))
    let c = load(cosines, tile=[1, D / 2], at=[s, 0])
    let sn = load(sines, tile=[1, D / 2], at=[s, 0])
    store(y, reshape(cast<T>(join(even * c - odd * sn, even * sn + odd * c)), [1, BH, D]), at=[s, hb, 0])
}

// Cross-entropy of each row of logits against its target class: loss = logsumexp(x[row, :]) - x[row, target[row]].
// One pass keeps a running maximum and sum per lane (as vocab_softmax), then the target's logit is gathered.
kernel cross_entropy<BLOCK: int = 4096, T: dtype = bf16>(x: tensor<T>[M, V], target: tensor<i32>[M],
                                                         loss: tensor<f32>[M]) {
    let row = program_id(0)
    var mx = full<f32>[1, BLOCK](-inf)
    var total = zeros<f32>[1, BLOCK]
    for j in range(cdiv(V, BLOCK)) {
        let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, j], pad=-inf))
        let m2 = max(mx, t)
        total = total * exp(mx - m2) + exp(t - m2)
        mx = m2
    }
    let m = max(mx)
    let lse = m + log(sum(total * exp(mx - m)))
    let picked = cast<f32>(gather(x, [row, gather(target, row)]))
    store(loss, lse - picked, at=row)
}

// Its backward pass: dx = (softmax(x) - onehot(target)) * dloss per row, from the log-sum-exp the forward pass keeps
// per row (as fused cross-entropy kernels do), streamed through tiles of BLOCK: one read of x, one write of dx.
kernel cross_entropy_bwd<BLOCK: int = 4096, T: dtype = bf16>(x: tensor<T>[M, V], target: tensor<i32>[M],
        lse: tensor<f32>[M], dloss: tensor<f32>[M], dx: tensor<T>[M, V]) {
    let row = program_id(0)
    let l = gather(lse, row)
    let g = gather(dloss, row)
    let hit = gather(target, row)
    let lanes = reshape(arange(0, BLOCK), [1, BLOCK])
    for j in range(cdiv(V, BLOCK)) {
        let p = exp(cast<f32>(load(x, tile=[1, BLOCK], at=[row, j])) - l)
        store(dx, cast<T>((p - where(j * BLOCK + lanes == hit, 1.0, 0.0)) * g), at=[row, j])
    }
}
// W8A8 linear: int8 activations x [M, K] and weights w [N, K] (nn.Linear's layout), an i32 product on the tensor
// cores, then the per-row and per-channel scales of their quantisation, stored in T.
kernel linear_w8a8<BM: int = 128, BN: int = 128, BK: int = 128, T: dtype = bf16>(
        x: tensor<i8>[M, K], w: tensor<i8>[N, K], sx: tensor<f32>[M], sw: tensor<f32>[N], y: tensor<T>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<i32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(x, tile=[BM, BK], at=[pm, k]), transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)
    }
    let scale = reshape(load(sx, tile=[BM], at=[pm]), [BM, 1]) * reshape(load(sw, tile=[BN], at=[pn]), [1, BN])
    store(y, cast<T>(cast<f32>(acc) * scale), at=[pm, pn])
}

// Block-scaled FP8 linear layer (DeepSeek-V3's inference GEMM): x [M, K] scaled per row and per 128 of K (sx
// [M, K/128]), w [N, K] scaled per 128x128 block (sw [N/128, K/128]). Each K tile's 8-bit product is scaled in f32
// before it joins the accumulator, so BK = 128 and BN = 128 match the blocks.
kernel linear_fp8_block<BM: int = 128, BN: int = 128, BK: int = 128>(x: tensor<f8e4m3>[M, K],
        w: tensor<f8e4m3>[N, K], sx: tensor<f32>[M, KB], sw: tensor<f32>[NB, KB], y: tensor<bf16>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        let part = dot(load(x, tile=[BM, BK], at=[pm, k]), transpose(load(w, tile=[BN, BK], at=[pn, k])))
        acc += part * load(sx, tile=[BM, 1], at=[pm, k]) * load(sw, tile=[1, 1], at=[pn, k])
    }
    store(y, cast<bf16>(acc), at=[pm, pn])
}

// Mixture-of-experts expert GEMM (vLLM's fused_moe, top-1): tokens grouped by expert. Block b of BM rows holds the
// token ids ids[b * BM : (b + 1) * BM], all routed to expert experts[b]; ids of M pad a group to a whole block and
// are neither read nor written. y[t, :] = x[t, :] @ w[e]^T, w in nn.Linear's layout ([E, N, K]).
kernel moe_gemm<BM: int = 64, BN: int = 128, BK: int = 64, T: dtype = bf16>(x: tensor<T>[M, K], ids: tensor<i32>[P],
        experts: tensor<i32>[B], w: tensor<T>[E, N, K], y: tensor<T>[M, N]) {
    let pb = program_id(0)
    let pn = program_id(1)
    let e = gather(experts, pb)
    let tok = reshape(load(ids, tile=[BM], at=pb), [BM, 1])
    let real = tok < M
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        let cols = reshape(k * BK + arange(0, BK), [1, BK])
        let a = gather(x, [tok, cols], mask=real & (cols < K), other=0)
        let b = reshape(load(w, tile=[1, BN, BK], at=[e, pn, k]), [BN, BK])
        acc = dot(a, transpose(b), acc)
    }
    let n = reshape(pn * BN + arange(0, BN), [1, BN])
    scatter(y, [tok, n], cast<T>(acc), mask=real & (n < N))
}

// Paged-attention decode (vLLM's layout): one query token per sequence. The KV cache holds blocks of BS tokens,
// [blocks, BS, H, D]; block_table[b, j] is the cache block of sequence b's tokens j * BS ... One program per
// (sequence, head) walks its sequence's blocks with an online softmax.
kernel paged_attention<BS: int = 16, D: int = 128, T: dtype = bf16>(q: tensor<T>[B, H, D], kc: tensor<T>[NB, BS, H, D],
        vc: tensor<T>[NB, BS, H, D], block_table: tensor<i32>[B, MAXB], seq_lens: tensor<i32>[B],
        o: tensor<T>[B, H, D], scale: f32) {
    let b = program_id(0)
    let h = program_id(1)
    let n = load(seq_lens, at=b)
    let qv = cast<f32>(reshape(load(q, tile=[1, 1, D], at=[b, h, 0]), [1, D])) * (scale * 1.4426950408889634)
    let m, l, acc = walk_blocks(qv, kc, vc, block_table, b, h, n, 0, cdiv(n, BS))
    store(o, reshape(cast<T>(acc / l), [1, 1, D]), at=[b, h, 0])
}

// The online softmax of query qv (scaled by scale * log2(e)) against head h of sequence b's blocks first .. stop - 1
// (n tokens in all): the running max (log2 units), sum and unnormalised output ([1, D]).
fn walk_blocks(qv, kc, vc, block_table, b, h, n, first, stop) {
    var m = -inf
    var l = 0.0
    var acc = zeros<f32>[1, D]
    for j in range(first, stop) {
        let blk = load(block_table, at=[b, j])
        let k = cast<f32>(reshape(load(kc, tile=[1, BS, 1, D], at=[blk, 0, h, 0]), [BS, D]))
        let pos = j * BS + arange(0, BS)
        let s = where(pos < n, sum(k * qv, axis=1), -inf)
        let mnew = max(m, max(s))
        let p = exp2(s - mnew)
        let alpha = exp2(m - mnew)
        let v = cast<f32>(reshape(load(vc, tile=[1, BS, 1, D], at=[blk, 0, h, 0]), [BS, D]))
        l = l * alpha + sum(p)
        acc = acc * alpha + sum(reshape(p, [BS, 1]) * v, axis=0, keepdims=true)
        m = mnew
    }
    return m, l, acc
}

// Flash-decoding: the same walk split over programs, for long sequences. Program (b, h, p) walks partition p of
// sequence b, its tokens p * PART ... (p + 1) * PART - 1 (PART a multiple of BS), and writes that partition's max,
// sum and unnormalised output; paged_attention_combine merges them. Partitions past a sequence's end write -inf,
// 0 and zeros, which the merge weighs 0.
kernel paged_attention_split<BS: int = 16, D: int = 128, PART: int = 512, T: dtype = bf16>(q: tensor<T>[B, H, D],
        kc: tensor<T>[NB, BS, H, D], vc: tensor<T>[NB, BS, H, D], block_table: tensor<i32>[B, MAXB],
        seq_lens: tensor<i32>[B], part_max: tensor<f32>[B, H, P], part_sum: tensor<f32>[B, H, P],
        part_out: tensor<f32>[B, H, P, D], scale: f32) {
    let b = program_id(0)
    let h = program_id(1)
    let p = program_id(2)
    let n = load(seq_lens, at=b)
    let qv = cast<f32>(reshape(load(q, tile=[1, 1, D], at=[b, h, 0]), [1, D])) * (scale * 1.4426950408889634)
    let stop = min(cdiv(n, BS), (p + 1) * (PART / BS))
    let m, l, acc = walk_blocks(qv, kc, vc, block_table, b, h, n, p * (PART / BS), stop)
    store(part_max, full<f32>[1, 1, 1](m), at=[b, h, p])
    store(part_sum, full<f32>[1, 1, 1](l), at=[b, h, p])
    store(part_out, reshape(acc, [1, 1, 1, D]), at=[b, h, p, 0])
}

// Merges a sequence's P partitions (PP: P rounded up to a power of two): each partition's sum and output weighed
// by exp2(its max - the largest max).
kernel paged_attention_combine<D: int = 128, PP: int = 8, T: dtype = bf16>(part_max: tensor<f32>[B, H, P],
        part_sum: tensor<f32>[B, H, P], part_out: tensor<f32>[B, H, P, D], o: tensor<T>[B, H, D]) {
    let b = program_id(0)
    let h = program_id(1)
    let pm = reshape(load(part_max, tile=[1, 1, PP], at=[b, h, 0], pad=-inf), [PP, 1])
    let w = exp2(pm - max(pm))
    let total = sum(reshape(load(part_sum, tile=[1, 1, PP], at=[b, h, 0]), [PP, 1]) * w)
    let out = sum(reshape(load(part_out, tile=[1, 1, PP, D], at=[b, h, 0, 0]), [PP, D]) * w, axis=0, keepdims=true)
    store(o, reshape(cast<T>(out / total), [1, 1, D]), at=[b, h, 0])
}

// An f32 matrix product on the tensor cores in TF32 (torch's allow_tf32), or with TF32=false at full f32 precision
// (dot's default, as a user writes it first).
kernel matmul_tf32<BM: int = 128, BN: int = 128, BK: int = 32, TF32: bool = true>(
        a: tensor<f32>[M, K], b: tensor<f32>[K, N], c: tensor<f32>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        acc = dot(load(a, tile=[BM, BK], at=[pm, k]), load(b, tile=[BK, BN], at=[k, pn]), acc, tf32=TF32)
    }
    store(c, acc, at=[pm, pn])
}

// Softmax's backward pass: dx = y * (dy - sum(y * dy)) along each row. One program per row, BLOCK >= N.
kernel softmax_bwd<BLOCK: int = 4096, T: dtype = bf16>(y: tensor<T>[M, N], dy: tensor<T>[M, N], dx: tensor<T>[M, N]) {
    let row = program_id(0)
    let p = cast<f32>(load(y, tile=[1, BLOCK], at=[row, 0]))
    let g = cast<f32>(load(dy, tile=[1, BLOCK], at=[row, 0]))
    store(dx, cast<T>(p * (g - sum(p * g, axis=1, keepdims=true))), at=[row, 0])
}

// Greedy sampling: the index of each row's largest logit (the first one on ties, as torch.argmax). Each lane keeps
// its largest value and where it was; the row's answer is the least index among the lanes that hold the maximum.
kernel greedy<BLOCK: int = 4096, T: dtype = bf16>(x: tensor<T>[M, V], out: tensor<i32>[M]) {
    let row = program_id(0)
    let lanes = reshape(arange(0, BLOCK), [1, BLOCK])
    var best = full<f32>[1, BLOCK](-inf)
    var at = zeros<i32>[1, BLOCK]
    for j in range(cdiv(V, BLOCK)) {
        let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, j], pad=-inf))
        let better = t > best
        best = where(better, t, best)
        at = where(better, j * BLOCK + lanes, at)
    }
    store(out, full<i32>[1](min(where(best == max(best), at, V))), at=row)
}
// W4A16 linear: y = x @ dequant(w). w packs K = 2H weights per column in bytes: byte [h, n] holds row h in its low
// four bits and row H + h in its high four, each an unsigned 4-bit value with offset 8, scaled per column. The two
// halves of x (x[:, :H] and x[:, H:], views of one tensor) meet the two nibbles in two dots per K tile.
kernel linear_w4a16<BM: int = 16, BN: int = 128, BK: int = 128, T: dtype = bf16>(
        x1: tensor<T>[M, H], x2: tensor<T>[M, H], w: tensor<i8>[H, N], scale: tensor<T>[N], y: tensor<T>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(H, BK)) {
        let q = cast<i32>(load(w, tile=[BK, BN], at=[k, pn]))
        acc = dot(load(x1, tile=[BM, BK], at=[pm, k]), cast<T>((q & 15) - 8), acc)
        acc = dot(load(x2, tile=[BM, BK], at=[pm, k]), cast<T>(((q >> 4) & 15) - 8), acc)
    }
    let s = cast<f32>(reshape(load(scale, tile=[BN], at=[pn]), [1, BN]))
    store(y, cast<T>(acc * s), at=[pm, pn])
}

// LayerNorm's backward pass, first kernel: dx for ROWS rows per program, and that program's partial sums of dw and
// db (one row of dw_part / db_part each); layernorm_bwd_reduce sums the partials. mean and rstd are the forward
// pass's. BLOCK >= N.
kernel layernorm_bwd<ROWS: int = 16, BLOCK: int = 4096, T: dtype = bf16>(
        x: tensor<T>[M, N], dy: tensor<T>[M, N], w: tensor<T>[N], mean: tensor<f32>[M], rstd: tensor<f32>[M],
        dx: tensor<T>[M, N], dw_part: tensor<f32>[G, N], db_part: tensor<f32>[G, N]) {
    let p = program_id(0)
    let wt = cast<f32>(reshape(load(w, tile=[BLOCK]), [1, BLOCK]))
    let inside = reshape(arange(0, BLOCK), [1, BLOCK]) < N
    var dw = zeros<f32>[1, BLOCK]
    var db = zeros<f32>[1, BLOCK]
    for row in range(p * ROWS, min((p + 1) * ROWS, M)) {
        let g = cast<f32>(load(dy, tile=[1, BLOCK], at=[row, 0]))
        let rs = reshape(gather(rstd, row), [1, 1])
        let xhat = where(inside, (cast<f32>(load(x, tile=[1, BLOCK], at=[row, 0]))
                                  - reshape(gather(mean, row), [1, 1])) * rs, 0.0)
        let wdy = wt * g
        let c1 = sum(xhat * wdy, axis=1, keepdims=true) / N
        let c2 = sum(wdy, axis=1, keepdims=true) / N
        store(dx, cast<T>((wdy - (xhat * c1 + c2)) * rs), at=[row, 0])
        dw += g * xhat
        db += g
    }
    store(dw_part, dw, at=[p, 0])
    store(db_part, db, at=[p, 0])
}

// The second kernel: column sums of the partials into dw and db.
kernel layernorm_bwd_reduce<BG: int = 32, BN: int = 256>(dw_part: tensor<f32>[G, N], db_part: tensor<f32>[G, N],
                                                        dw: tensor<f32>[N], db: tensor<f32>[N]) {
    let j = program_id(0)
    var sw = zeros<f32>[BN]
    var sb = zeros<f32>[BN]
    for i in range(cdiv(G, BG)) {
        sw += sum(load(dw_part, tile=[BG, BN], at=[i, j]), axis=0)
        sb += sum(load(db_part, tile=[BG, BN], at=[i, j]), axis=0)
    }
    store(dw, sw, at=[j])
    store(db, sb, at=[j])
}

// Mixture-of-experts routing: each token's 8 largest router logits (torch.topk's values), BM tokens a program.
kernel router_topk<BM: int = 16, E: int = 256, K: int = 8>(x: tensor<f32>[T, N], y: tensor<f32>[T, J]) {
    store(y, topk(load(x, tile=[BM, E], at=[program_id(0), 0], pad=-inf), K), at=[program_id(0), 0])
}

// The same with the experts' ids (torch.topk's values and indices). argtopk first: topk then reads the values out
// of the same network.
kernel router_topk_ids<BM: int = 16, E: int = 256, K: int = 8>(x: tensor<f32>[T, N], y: tensor<f32>[T, J],
                                                               ids: tensor<i32>[T, J]) {
    let t = load(x, tile=[BM, E], at=[program_id(0), 0], pad=-inf)
    store(ids, argtopk(t, K), at=[program_id(0), 0])
    store(y, topk(t, K), at=[program_id(0), 0])
}

// Rows sorted ascending (torch.sort's values), BM rows a program.
kernel sort_rows<BM: int = 4, N: int = 1024>(x: tensor<f32>[T, L], y: tensor<f32>[T, L]) {
    store(y, sort(load(x, tile=[BM, N], at=[program_id(0), 0])), at=[program_id(0), 0])
}

// Dropout taking all four of Philox's words per generator run (words=4, Triton's rand4x): element e's number is
// word e % 4 of counter e / 4. A quarter of examples/dropout.tle's integer work per element.
kernel dropout4<BLOCK: int = 1024, T: dtype = f32>(x: tensor<T>[N], y: tensor<T>[N], seed: i64, p: f32) {
    let i = program_id(0)
    let t = cast<f32>(load(x, tile=[BLOCK], at=i))
    let r = reshape(rand(seed, i * (BLOCK / 4) + arange(BLOCK / 4), words=4), [BLOCK])
    store(y, cast<T>(where(r > p, t / (1.0 - p), 0.0)), at=i)
}

// One step of Adam on f32 parameters (torch.optim.Adam's update, fused): c1 = 1 / (1 - beta1^t) and
// c2 = 1 / (1 - beta2^t) come from the host. Reads four tensors, writes three.
kernel adam<BLOCK: int = 1024>(p: tensor<f32>[N], g: tensor<f32>[N], m: tensor<f32>[N], v: tensor<f32>[N],
                               lr: f32, beta1: f32, beta2: f32, eps: f32, c1: f32, c2: f32) {
    let i = program_id(0)
    let gt = load(g, tile=[BLOCK], at=i)
    let mt = beta1 * load(m, tile=[BLOCK], at=i) + (1.0 - beta1) * gt
    let vt = beta2 * load(v, tile=[BLOCK], at=i) + (1.0 - beta2) * gt * gt
    store(m, mt, at=i)
    store(v, vt, at=i)
    store(p, load(p, tile=[BLOCK], at=i) - lr * c1 * mt / (sqrt(vt * c2) + eps), at=i)
}

// Symmetric int8 quantisation of each row: scale = max |x| / 127, q = x / scale truncated toward zero.
kernel quant_rows<BLOCK: int = 4096, T: dtype = bf16, Q: dtype = i8, QMAX: float = 127.0>(
        x: tensor<T>[M, N], q: tensor<Q>[M, N], s: tensor<f32>[M]) {
    let row = program_id(0)
    let t = cast<f32>(load(x, tile=[1, BLOCK], at=[row, 0]))
    let amax = max(max(abs(t)), 1e-12)
    store(q, cast<Q>(t * (QMAX / amax)), at=[row, 0])
    store(s, full<f32>[1](amax / QMAX), at=row)
}

// Counts of the values of x (each in [0, B)): one atomic per element.
kernel histogram<BLOCK: int = 4096>(x: tensor<i32>[N], bins: tensor<i32>[B]) {
    let offs = program_id(0) * BLOCK + arange(BLOCK)
    let inside = offs < N
    atomic_add(bins, gather(x, offs, mask=inside), 1, mask=inside)
}

// The same counts through histogram(): each program counts CHUNKS tiles of its own (warp votes and shared memory),
// then adds its B counts into bins with one atomic per bin. Padding (-1) is outside the bins, so it is not counted.
kernel histogram_local<BLOCK: int = 4096, CHUNKS: int = 4, B: int = 256>(x: tensor<i32>[N], bins: tensor<i32>[NB]) {
    var h = zeros<i32>[B]
    for c in range(CHUNKS) {
        h += histogram(load(x, tile=[BLOCK], at=program_id(0) * CHUNKS + c, pad=-1), B)
    }
    atomic_add(bins, arange(B), h)
}

// The sum of a vector: each program sums its tile and adds it to out[0] with an atomic (out starts at 0).
kernel vector_sum<BLOCK: int = 4096>(x: tensor<f32>[N], out: tensor<f32>[1]) {
    atomic_add(out, 0, sum(load(x, tile=[BLOCK], at=program_id(0))))
}

// 2-D convolution as an implicit GEMM: x in NHWC, w as [KH * KW, C, F], y as the NHWC output's [N * P * Q, F]
// view. Program (pm, pn) owns BM output pixels and BN filters; each K step is one filter tap (r, s) and BK
// channels, the pixels' inputs gathered (zero outside the image: the padding).
kernel conv2d<BM: int = 128, BN: int = 64, BK: int = 64, KH: int = 3, KW: int = 3, STRIDE: int = 1, PAD: int = 1,
              T: dtype = f16>(x: tensor<T>[NB, H, W, C], w: tensor<T>[TAPS, C, F], y: tensor<T>[PIX, F], P: i32,
                              Q: i32) {
    let pm = program_id(0)
    let pn = program_id(1)
    let pix = reshape(pm * BM + arange(0, BM), [BM, 1])
    let n = pix / (P * Q)
    let oh = pix % (P * Q) / Q
    let ow = pix % Q
    let real = pix < PIX
    let cb = cdiv(C, BK)
    var acc = zeros<f32>[BM, BN]
    for k in range(KH * KW * cb) pipeline(stages=3) {
        let tap = k / cb
        let ih = oh * STRIDE - PAD + tap / KW
        let iw = ow * STRIDE - PAD + tap % KW
        let cols = reshape(k % cb * BK + arange(0, BK), [1, BK])
        let inside = real & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        let a = gather(x, [n, ih, iw, cols], mask=inside & (cols < C), other=0)
        let b = reshape(load(w, tile=[1, BK, BN], at=[tap, k % cb, pn]), [BK, BN])
        acc = dot(a, b, acc)
    }
    store(y, cast<T>(acc), at=[pm, pn])
}

// A gated MLP's first half (Llama's gate_proj and up_proj with SwiGLU): y = silu(x @ wg^T) * (x @ wu^T), both
// weights in nn.Linear's [N, K] layout. Each x tile feeds two dots, so x is read once for both products, and only
// y is written: torch writes and reads both products, then the silu.
kernel gate_up_silu<BM: int = 128, BN: int = 128, BK: int = 64, T: dtype = bf16>(
        x: tensor<T>[M, K], wg: tensor<T>[N, K], wu: tensor<T>[N, K], y: tensor<T>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    var g = zeros<f32>[BM, BN]
    var u = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        let a = load(x, tile=[BM, BK], at=[pm, k])
        g = dot(a, transpose(load(wg, tile=[BN, BK], at=[pn, k])), g)
        u = dot(a, transpose(load(wu, tile=[BN, BK], at=[pn, k])), u)
    }
    store(y, cast<T>(g * sigmoid(g) * u), at=[pm, pn])
}

// A linear layer's weight gradient, dW = dY^T @ X (nn.Linear's [N, K] layout), summed over the M tokens: the left
// operand is dY's [BT, BN] tile transposed, so both tiles are loaded along the tokens as they lie.
kernel linear_wgrad<BN: int = 128, BK: int = 128, BT: int = 64, T: dtype = bf16>(
        dy: tensor<T>[M, N], x: tensor<T>[M, K], dw: tensor<T>[N, K]) {
    let pn = program_id(0)
    let pk = program_id(1)
    var acc = zeros<f32>[BN, BK]
    for t in range(cdiv(M, BT)) pipeline(stages=3) {
        acc = dot(transpose(load(dy, tile=[BT, BN], at=[t, pn])), load(x, tile=[BT, BK], at=[t, pk]), acc)
    }
    store(dw, cast<T>(acc), at=[pn, pk])
}

// A decode step's matrix-vector product without tensor cores, as a user writes it first: y = W x, each program
// BN rows of W (nn.Linear's [N, K]), products accumulated elementwise over the K tiles and summed once at the end.
kernel gemv<BN: int = 16, BK: int = 256, T: dtype = bf16>(w: tensor<T>[N, K], x: tensor<T>[K], y: tensor<T>[N]) {
    let pn = program_id(0)
    var acc = zeros<f32>[BN, BK]
    for k in range(cdiv(K, BK)) {
        acc += cast<f32>(load(w, tile=[BN, BK], at=[pn, k])) * cast<f32>(reshape(load(x, tile=[BK], at=k), [1, BK]))
    }
    store(y, cast<T>(sum(acc, axis=1)), at=pn)
}

// GroupNorm over NCHW activations (diffusion UNets): x viewed as [N * G, (C / G) * HW], one program per group,
// two passes over its elements (sums, then normalise); the channel of column j is (r % G) * (C / G) + j / HW.
kernel group_norm<BLOCK: int = 4096, T: dtype = bf16>(x: tensor<T>[R, L], w: tensor<T>[C], b: tensor<T>[C],
        y: tensor<T>[R, L], G: i32, HW: i32, eps: f32) {
    let r = program_id(0)
    var s = zeros<f32>[1, BLOCK]
    var q = zeros<f32>[1, BLOCK]
    for i in range(cdiv(L, BLOCK)) {
        let v = cast<f32>(load(x, tile=[1, BLOCK], at=[r, i]))
        s += v
        q += v * v
    }
    let mean = sum(s) / cast<f32>(L)
    let rstd = rsqrt(sum(q) / cast<f32>(L) - mean * mean + eps)
    let c0 = (r % G) * (L / HW)
    for i in range(cdiv(L, BLOCK)) {
        let col = i * BLOCK + arange(0, BLOCK)
        let inside = col < L
        let c = c0 + col / HW
        let wv = cast<f32>(gather(w, c, mask=inside))
        let bv = cast<f32>(gather(b, c, mask=inside))
        let v = cast<f32>(load(x, tile=[1, BLOCK], at=[r, i]))
        store(y, cast<T>((v - mean) * rstd * wv + bv), at=[r, i])
    }
}

// Masked mean pooling (a sentence embedding): y[b, :] = sum over tokens of mask[b, t] * x[b, t, :], divided by the
// number of unmasked tokens. One program per (sequence, BD columns), a loop over BT tokens at a time.
kernel mean_pool<BT: int = 32, BD: int = 256, T: dtype = bf16>(x: tensor<T>[B, S, D], mask: tensor<T>[B, S],
        y: tensor<T>[B, D]) {
    let b = program_id(0)
    let pd = program_id(1)
    var acc = zeros<f32>[BT, BD]
    var count = zeros<f32>[BT, 1]
    for t in range(cdiv(S, BT)) {
        let m = cast<f32>(reshape(load(mask, tile=[1, BT], at=[b, t]), [BT, 1]))
        acc += cast<f32>(reshape(load(x, tile=[1, BT, BD], at=[b, t, pd]), [BT, BD])) * m
        count += m
    }
    store(y, reshape(cast<T>(sum(acc, axis=0) / max(sum(count), 1.0)), [1, BD]), at=[b, pd])
}

// Mamba's selective state update for one decode step: per batch row b and channel d, with N state values,
// state' = state * exp(dt * A) + dt * x * B;  out = sum(state' * C) + D * x. One program per (b, BD channels).
// Out of place (state' into `next`; mamba_ssm updates in place) so that every timed launch does the same work.
kernel ssm_update<BD: int = 64, N: int = 16>(state: tensor<f32>[BS, DIM, N], x: tensor<f32>[BS, DIM],
        dt: tensor<f32>[BS, DIM], a: tensor<f32>[DIM, N], bm: tensor<f32>[BS, N], cm: tensor<f32>[BS, N],
        dskip: tensor<f32>[DIM], next: tensor<f32>[BS, DIM, N], out: tensor<f32>[BS, DIM]) {
    let b = program_id(0)
    let pd = program_id(1)
    let s = reshape(load(state, tile=[1, BD, N], at=[b, pd, 0]), [BD, N])
    let xv = reshape(load(x, tile=[1, BD], at=[b, pd]), [BD, 1])
    let dtv = reshape(load(dt, tile=[1, BD], at=[b, pd]), [BD, 1])
    let bv = load(bm, tile=[1, N], at=[b, 0])
    let cv = load(cm, tile=[1, N], at=[b, 0])
    let s2 = s * exp(dtv * load(a, tile=[BD, N], at=[pd, 0])) + dtv * xv * bv
    store(next, reshape(s2, [1, BD, N]), at=[b, pd, 0])
    let y = sum(s2 * cv, axis=1, keepdims=true) + reshape(load(dskip, tile=[BD], at=pd), [BD, 1]) * xv
    store(out, reshape(y, [1, BD]), at=[b, pd])
}

// Mamba's causal depthwise conv1d with SiLU (kernel width 4, channels first): y[b, d, t] = silu(bias[d] +
// sum_k w[d, k] * x[b, d, t - 3 + k]), x read as 0 before t = 0. One program per (b, BD channels, BL steps).
kernel causal_conv1d<BD: int = 16, BL: int = 256, T: dtype = bf16>(x: tensor<T>[B, D, L], w: tensor<T>[D, 4],
        bias: tensor<T>[D], y: tensor<T>[B, D, L]) {
    let b = program_id(0)
    let ch = reshape(program_id(1) * BD + arange(0, BD), [BD, 1])
    let t = reshape(program_id(2) * BL + arange(0, BL), [1, BL])
    var acc = cast<f32>(gather(bias, ch, mask=ch < D)) + zeros<f32>[BD, BL]
    for k in range(4) {
        let tt = t - 3 + k
        let xv = gather(x, [b, ch, tt], mask=(ch < D) & (tt >= 0) & (tt < L))
        acc += cast<f32>(xv) * cast<f32>(gather(w, [ch, k], mask=ch < D))
    }
    store(y, reshape(cast<T>(acc * sigmoid(acc)), [1, BD, BL]), at=[b, program_id(1), program_id(2)])
}

// EmbeddingBag in sum mode (recommendation models): out[b, :] = sum of table rows ids[offsets[b] .. offsets[b+1]].
// One program per (bag, BD columns), one row a step.
kernel embedding_bag<BD: int = 128, T: dtype = f32>(table: tensor<T>[V, D], ids: tensor<i32>[NNZ],
        offsets: tensor<i32>[B1], out: tensor<T>[B, D]) {
    let b = program_id(0)
    let cols = reshape(program_id(1) * BD + arange(0, BD), [1, BD])
    var acc = zeros<f32>[1, BD]
    for i in range(load(offsets, at=b), load(offsets, at=b + 1)) {
        acc += cast<f32>(gather(table, [load(ids, at=i), cols], mask=cols < D))
    }
    store(out, cast<T>(acc), at=[b, program_id(1)])
}

// vLLM's reshape_and_cache: token t's keys and values [H, D] go to slot slots[t] of a paged cache
// [blocks, BS, H, D] (block slot / BS, row slot % BS); a negative slot (padding) writes nothing.
kernel kv_cache_write<H: int = 8, D: int = 128, T: dtype = bf16>(k: tensor<T>[NT, H, D], v: tensor<T>[NT, H, D],
        kc: tensor<T>[NB, BS, H, D], vc: tensor<T>[NB, BS, H, D], slots: tensor<i64>[NT]) {
    let t = program_id(0)
    let slot = load(slots, at=t)
    if slot >= 0 {
        let blk = cast<i32>(slot / BS)
        let row = cast<i32>(slot % BS)
        store(kc, reshape(load(k, tile=[1, H, D], at=[t, 0, 0]), [1, 1, H, D]), at=[blk, row, 0, 0])
        store(vc, reshape(load(v, tile=[1, H, D], at=[t, 0, 0]), [1, 1, H, D]), at=[blk, row, 0, 0])
    }
}

// A depthwise 3x3 convolution (MobileNet-style, zero padding 1) over an NCHW image: y[n, c] = w[c] * x[n, c], each
// of the nine taps a shifted gather. One program per (n * C + c, BH rows, BW columns).
kernel dwconv3x3<BH: int = 16, BW: int = 64, T: dtype = bf16>(x: tensor<T>[N, C, H, W], w: tensor<T>[C, 9],
        y: tensor<T>[N, C, H, W]) {
    let n = program_id(0) / C
    let c = program_id(0) % C
    let h = reshape(program_id(1) * BH + arange(0, BH), [BH, 1])
    let col = reshape(program_id(2) * BW + arange(0, BW), [1, BW])
    var acc = zeros<f32>[BH, BW]
    for k in range(9) {
        let hh = h + k / 3 - 1
        let ww = col + k % 3 - 1
        let xv = gather(x, [n, c, hh, ww], mask=(hh >= 0) & (hh < H) & (ww >= 0) & (ww < W))
        acc += cast<f32>(xv) * cast<f32>(load(w, at=[c, k]))
    }
    store(y, reshape(cast<T>(acc), [1, 1, BH, BW]), at=[n, c, program_id(1), program_id(2)])
}

// Attention's layout change: [B, S, H, D] (as a QKV projection writes it) to [B, H, S, D]. One program per (b * H +
// h, BS positions), a [BS, D] tile read with a row stride of H * D and written contiguously.
kernel heads_first<BS: int = 64, D: int = 128, T: dtype = bf16>(x: tensor<T>[B, S, H, D], y: tensor<T>[B, H, S, D]) {
    let b = program_id(0) / H
    let h = program_id(0) % H
    let t = load(x, tile=[1, BS, 1, D], at=[b, program_id(1), h, 0])
    store(y, reshape(t, [1, 1, BS, D]), at=[b, h, program_id(1), 0])
}

// A mixture-of-experts router: each token's top-1 expert over E logits and its softmax weight (a Switch-style
// router). One program per BT tokens.
kernel router_top1<BT: int = 64, E: int = 64>(logits: tensor<f32>[M, E], weight: tensor<f32>[M],
        expert: tensor<i32>[M]) {
    let l = load(logits, tile=[BT, E], at=[program_id(0), 0], pad=-inf)
    let m = max(l, axis=1, keepdims=true)
    store(weight, 1.0 / sum(exp(l - m), axis=1), at=program_id(0))
    store(expert, argmax(l, axis=1), at=program_id(0))
}

// Sparse matrix times vector, CSR: y[r] = sum of vals[j] * x[cols[j]] over row r's entries. One program per row,
// BK entries a step.
kernel spmv_csr<BK: int = 64, T: dtype = f32>(row_ptr: tensor<i32>[M1], cols: tensor<i32>[NNZ],
        vals: tensor<T>[NNZ], x: tensor<T>[N], y: tensor<T>[M]) {
    let r = program_id(0)
    let stop = load(row_ptr, at=r + 1)
    var acc = zeros<f32>[BK]
    for j in range(load(row_ptr, at=r), stop, BK) {
        let e = j + arange(0, BK)
        let inside = e < stop
        acc += cast<f32>(gather(vals, e, mask=inside)) * cast<f32>(gather(x, gather(cols, e, mask=inside),
                                                                            mask=inside))
    }
    store(y, cast<T>(sum(acc, axis=0, keepdims=true)), at=r)
}

// A linear layer with a LoRA adapter: y = x @ w^T + scale * (x @ a^T) @ b^T, rank R, both products in one K loop.
kernel lora<BM: int = 128, BN: int = 128, BK: int = 64, R: int = 16, T: dtype = bf16>(x: tensor<T>[M, K],
        w: tensor<T>[N, K], a: tensor<T>[R, K], b: tensor<T>[N, R], y: tensor<T>[M, N], scale: f32) {
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    var xa = zeros<f32>[BM, R]
    for k in range(cdiv(K, BK)) pipeline(stages=3) {
        let xt = load(x, tile=[BM, BK], at=[pm, k])
        acc = dot(xt, transpose(load(w, tile=[BN, BK], at=[pn, k])), acc)
        xa = dot(xt, transpose(load(a, tile=[R, BK], at=[0, k])), xa)
    }
    acc = dot(cast<T>(xa * scale), transpose(load(b, tile=[BN, R], at=[pn, 0])), acc)
    store(y, cast<T>(acc), at=[pm, pn])
}

// 2x2 max pooling with stride 2 (NCHW, the channels folded into the first axis): each program reads a
// [2 BH, 2 BW] tile and takes the largest of each 2x2 square.
kernel maxpool2x2<BH: int = 16, BW: int = 64, T: dtype = bf16>(x: tensor<T>[NC, H, W], y: tensor<T>[NC, OH, OW]) {
    let t = load(x, tile=[1, 2 * BH, 2 * BW], at=[program_id(0), program_id(1), program_id(2)], pad=-inf)
    let m = max(max(reshape(t, [BH, 2, BW, 2]), axis=3), axis=1)
    store(y, reshape(m, [1, BH, BW]), at=[program_id(0), program_id(1), program_id(2)])
}

// torch.max(x, dim=1): each row's largest value and the first index of it (a NaN counting as the largest). Both
// come out of one reduction (dialects/tle.py extreme_partner).
kernel row_max<BM: int = 4, N: int = 1024, T: dtype = f32>(x: tensor<T>[M, N], v: tensor<T>[M], i: tensor<i32>[M]) {
    let t = load(x, tile=[BM, N], at=[program_id(0), 0], pad=-inf)
    store(v, max(t, axis=1), at=program_id(0))
    store(i, argmax(t, axis=1), at=program_id(0))
}

// Nearest-neighbour upsampling by 2 (a U-Net's or an FPN's decoder): each output element reads x[h / 2, w / 2].
kernel upsample_nearest2x<BH: int = 16, BW: int = 128, T: dtype = bf16>(x: tensor<T>[NC, H, W],
        y: tensor<T>[NC, OH, OW]) {
    let oh = reshape(program_id(1) * BH + arange(0, BH), [BH, 1])
    let ow = reshape(program_id(2) * BW + arange(0, BW), [1, BW])
    let v = gather(x, [program_id(0), oh / 2, ow / 2], mask=(oh < OH) & (ow < OW))
    store(y, reshape(v, [1, BH, BW]), at=[program_id(0), program_id(1), program_id(2)])
}

// Bilinear upsampling by 2, half-pixel centres (torch's align_corners=False): four gathers and their weights.
kernel upsample_bilinear2x<BH: int = 16, BW: int = 64, T: dtype = f32>(x: tensor<T>[NC, H, W],
        y: tensor<T>[NC, OH, OW]) {
    let nc = program_id(0)
    let oh = reshape(program_id(1) * BH + arange(0, BH), [BH, 1])
    let ow = reshape(program_id(2) * BW + arange(0, BW), [1, BW])
    let sh = max(cast<f32>(oh) * 0.5 - 0.25, 0.0)
    let sw = max(cast<f32>(ow) * 0.5 - 0.25, 0.0)
    let h0 = cast<i32>(sh)
    let w0 = cast<i32>(sw)
    let lh = sh - cast<f32>(h0)
    let lw = sw - cast<f32>(w0)
    let h1 = min(h0 + 1, H - 1)
    let w1 = min(w0 + 1, W - 1)
    let inside = (oh < OH) & (ow < OW)
    let top = (1.0 - lw) * cast<f32>(gather(x, [nc, h0, w0], mask=inside))
              + lw * cast<f32>(gather(x, [nc, h0, w1], mask=inside))
    let bottom = (1.0 - lw) * cast<f32>(gather(x, [nc, h1, w0], mask=inside))
                 + lw * cast<f32>(gather(x, [nc, h1, w1], mask=inside))
    store(y, reshape(cast<T>((1.0 - lh) * top + lh * bottom), [1, BH, BW]), at=[nc, program_id(1), program_id(2)])
}

// Causal linear attention forward, unnormalised and with no feature map: o_t = scale * sum over s <= t of
// (q_t . k_s) v_s, in chunks of C as flash-linear-attention's fused_chunk kernel computes it: within a chunk the
// scores masked to s <= t times v, from the chunks before it q times the state S, the f32 sum of k_s^T v_s over
// them ([D, D]). q, k, v, o: [BH, L, D] contiguous (batch and heads flattened). One program per BH walks the
// chunks in order. Launch: mod.chunk_linear_attn[(BH,)](q, k, v, o, scale, D=64).
kernel chunk_linear_attn<C: int = 64, D: int = 64, T: dtype = bf16>(q: tensor<T>[BH, L, D], k: tensor<T>[BH, L, D],
        v: tensor<T>[BH, L, D], o: tensor<T>[BH, L, D], scale: f32) {
    let b = program_id(0)
    let causal = expand_dims(arange(0, C), 1) >= expand_dims(arange(0, C), 0)
    var state = zeros<f32>[D, D]
    for c in range(cdiv(L, C)) {
        let qt = cast<T>(reshape(load(q, tile=[1, C, D], at=[b, c, 0]), [C, D]) * scale)  // scaled in f32
        let kt = reshape(load(k, tile=[1, C, D], at=[b, c, 0]), [C, D])
        let vt = reshape(load(v, tile=[1, C, D], at=[b, c, 0]), [C, D])
        let a = where(causal, dot(qt, transpose(kt)), 0.0)
        let ot = dot(qt, cast<T>(state), dot(cast<T>(a), vt))
        state = dot(transpose(kt), vt, state)
        store(o, reshape(cast<T>(ot), [1, C, D]), at=[b, c, 0])
    }
}

// Per-head RMSNorm of q (or k) before rotary embedding (Qwen3's q_norm / k_norm): each head's D values are divided
// by their own root mean square and scaled by w ([D], shared by the heads), then rotated as `rope` does (the
// rotate-half form). One program per token and BH heads; a head's halves are tiles 0 and 1 along D (D = 2 * HALF).
kernel qk_norm_rope<BH: int = 32, HALF: int = 64, T: dtype = bf16>(x: tensor<T>[S, H, D], w: tensor<T>[D],
        cosines: tensor<f32>[S, E], sines: tensor<f32>[S, E], y: tensor<T>[S, H, D], eps: f32) {
    let s = program_id(0)
    let hb = program_id(1)
    let x1 = cast<f32>(reshape(load(x, tile=[1, BH, HALF], at=[s, hb, 0]), [BH, HALF]))
    let x2 = cast<f32>(reshape(load(x, tile=[1, BH, HALF], at=[s, hb, 1]), [BH, HALF]))
    let rstd = rsqrt((sum(x1 * x1, axis=1, keepdims=true) + sum(x2 * x2, axis=1, keepdims=true)) / D + eps)
    let n1 = x1 * rstd * cast<f32>(reshape(load(w, tile=HALF, at=0), [1, HALF]))
    let n2 = x2 * rstd * cast<f32>(reshape(load(w, tile=HALF, at=1), [1, HALF]))
    let c = load(cosines, tile=[1, HALF], at=[s, 0])
    let sn = load(sines, tile=[1, HALF], at=[s, 0])
    store(y, reshape(cast<T>(n1 * c - n2 * sn), [1, BH, HALF]), at=[s, hb, 0])
    store(y, reshape(cast<T>(n2 * c + n1 * sn), [1, BH, HALF]), at=[s, hb, 1])
}

// FlashAttention's variable-length causal forward (flash_attn_varlen_func's packed "thd" layout): sequences of
// different lengths back to back in q, k, v, o [total tokens, H, D]; sequence b is tokens cu_seqlens[b] ..
// cu_seqlens[b + 1] - 1 and sees only its own keys, causally. Program (m, b, h) runs examples/attention.tle's
// online softmax for queries m * BM ... of sequence b in head h (nothing past the sequence's end). Each tensor is
// sliced to the sequence's rows, so tiles count from its first token and stop at its last: key tiles past the end
// read zeros, and query rows past it are not stored.
// Launch: mod.varlen_attention[(cdiv(max_seqlen, BM), B, H)](q, k, v, cu_seqlens, o, 1 / sqrt(D), D=128).
kernel varlen_attention<BM: int = 64, BN: int = 64, D: int = 128, T: dtype = bf16>(q: tensor<T>[N, H, D],
        k: tensor<T>[N, H, D], v: tensor<T>[N, H, D], cu_seqlens: tensor<i32>[B1], o: tensor<T>[N, H, D],
        scale: f32) {
    let m = program_id(0)
    let b = program_id(1)
    let h = program_id(2)
    let start, len = sequence_rows(cu_seqlens, b)
    if m * BM >= len {
        return
    }
    let ks = slice(k, start=[start, 0, 0], shape=[len, H, D])
    let vs = slice(v, start=[start, 0, 0], shape=[len, H, D])
    let qt = reshape(load(slice(q, start=[start, 0, 0], shape=[len, H, D]), tile=[BM, 1, D], at=[m, h, 0]), [BM, D])
    let rows = expand_dims(m * BM + arange(0, BM), 1)  // the queries' positions in the sequence, [BM, 1]
    var mi, li, acc = full<f32>[BM, 1](-inf), zeros<f32>[BM, 1], zeros<f32>[BM, D]
    let qk_scale = scale * 1.4426950408889634
    // key tiles before this program's first query lie inside the sequence and before every query: no mask; then
    // the band across the diagonal (up to the sequence's end), masked
    let whole = m * BM / BN
    for j in range(whole) pipeline(stages=3) {
        mi, li, acc = varlen_window_attend(qt, ks, vs, h, j, mi, li, acc, qk_scale, rows, false)
    }
    for j in range(whole, cdiv(min((m + 1) * BM, len), BN)) pipeline(stages=3) {
        mi, li, acc = varlen_window_attend(qt, ks, vs, h, j, mi, li, acc, qk_scale, rows, true)
    }
    store(slice(o, start=[start, 0, 0], shape=[len, H, D]), reshape(cast<T>(acc / li), [BM, 1, D]), at=[m, h, 0])
}

// The first row of packed sequence b and its number of rows, from its cumulative starts (cu_seqlens).
fn sequence_rows(cu_seqlens, b) {
    let start = load(cu_seqlens, at=b)
    return start, load(cu_seqlens, at=b + 1) - start
}

// Key tile j of head h of one sequence's windows ks, vs folded into the running max, sum and output; a `masked`
// tile gives -inf scores to keys after their query (which hides the zeros read past the sequence's end from every
// query inside it).
fn varlen_window_attend(qt, ks, vs, h, j, mi, li, acc, qk_scale, rows, masked) {
    let kt = reshape(load(ks, tile=[BN, 1, D], at=[j, h, 0]), [BN, D])
    var s = dot(qt, transpose(kt)) * qk_scale
    if masked {
        s = where(expand_dims(j * BN + arange(0, BN), 0) <= rows, s, -inf)
    }
    let mnew = max(mi, max(s, axis=1, keepdims=true))
    let p = exp2(s - mnew)
    let alpha = exp2(mi - mnew)
    return mnew, li * alpha + sum(p, axis=1, keepdims=true), dot(cast<T>(p), reshape(load(vs, tile=[BN, 1, D],
        at=[j, h, 0]), [BN, D]), acc * alpha)
}

// The same attention written before slices (forty-fifth session): a sequence starts at any row, not at a multiple
// of a tile, so its rows are gathered and scattered with element indices rather than loaded.
kernel varlen_attention_gather<BM: int = 64, BN: int = 64, D: int = 128, T: dtype = bf16>(q: tensor<T>[N, H, D],
        k: tensor<T>[N, H, D], v: tensor<T>[N, H, D], cu_seqlens: tensor<i32>[B1], o: tensor<T>[N, H, D],
        scale: f32) {
    let m = program_id(0)
    let b = program_id(1)
    let h = program_id(2)
    let start, len = sequence_rows(cu_seqlens, b)
    if m * BM < len {
        let rows = expand_dims(m * BM + arange(0, BM), 1)  // the queries' positions in the sequence, [BM, 1]
        let cols = expand_dims(arange(0, D), 0)
        let qt = gather(q, [start + rows, h, cols], mask=rows < len)
        var mi, li, acc = full<f32>[BM, 1](-inf), zeros<f32>[BM, 1], zeros<f32>[BM, D]
        let qk_scale = scale * 1.4426950408889634
        // key tiles before this program's first query lie inside the sequence and before every query: no mask;
        // then the band across the diagonal (up to the sequence's end), masked
        let whole = m * BM / BN
        for j in range(whole) pipeline(stages=3) {
            mi, li, acc = varlen_attend(qt, k, v, start, h, j, mi, li, acc, qk_scale, len, rows, false)
        }
        for j in range(whole, cdiv(min((m + 1) * BM, len), BN)) pipeline(stages=3) {
            mi, li, acc = varlen_attend(qt, k, v, start, h, j, mi, li, acc, qk_scale, len, rows, true)
        }
        scatter(o, [start + rows, h, cols], cast<T>(acc / li), mask=rows < len)
    }
}

// One tile of BN keys (sequence positions j * BN ...) folded into the running max, sum and output; a `masked`
// tile reads no key past the sequence's end and gives -inf scores to keys after their query (that mask alone
// hides the keys past the end from every query inside the sequence; rows past it are not stored).
fn varlen_attend(qt, k, v, start, h, j, mi, li, acc, qk_scale, len, rows, masked) {
    let pos = j * BN + arange(0, BN)
    let keys = expand_dims(pos, 1)  // as rows of k and v, [BN, 1]
    let cols = expand_dims(arange(0, D), 0)
    var s = zeros<f32>[BM, BN]
    var vt = zeros<T>[BN, D]
    if masked {
        let kt = gather(k, [start + keys, h, cols], mask=keys < len)
        s = where(expand_dims(pos, 0) <= rows, dot(qt, transpose(kt)) * qk_scale, -inf)
        vt = gather(v, [start + keys, h, cols], mask=keys < len)
    } else {
        s = dot(qt, transpose(gather(k, [start + keys, h, cols]))) * qk_scale
        vt = gather(v, [start + keys, h, cols])
    }
    let mnew = max(mi, max(s, axis=1, keepdims=true))
    let p = exp2(s - mnew)
    let alpha = exp2(mi - mnew)
    return mnew, li * alpha + sum(p, axis=1, keepdims=true), dot(cast<T>(p), vt, acc * alpha)
}

// Mamba's selective scan (the forward of mamba_ssm's selective_scan_fn, without the z gate): per batch b,
// channel d and state n, h[t] = exp(dt[t, d] * A[d, n]) * h[t-1] + dt[t, d] * Bs[t, n] * u[t, d], and
// y[t, d] = sum over n of Cs[t, n] * h[t] + Ds[d] * u[t, d]. One program per (block of BD channels, batch) walks
// time in chunks of BT steps, scanning [BT, BD, N] tiles of (decay, input) pairs along time with the linear
// recurrence's fn; the state of the chunks before enters through the products of the decays, and moves on by the
// same fn's reduction. u, dt, Bs, Cs, y are [B, L, D] / [B, L, N] / [B, L, D]; A is [D, N], Ds [D].
fn selective_step(a1, h1, a2, h2) {
    return a1 * a2, a2 * h1 + h2
}

kernel selective_scan<BT: int = 16, BD: int = 16, N: int = 16, T: dtype = f32>(
        u: tensor<T>[B, L, D], dt: tensor<T>[B, L, D], A: tensor<f32>[D, N], Bs: tensor<T>[B, L, N],
        Cs: tensor<T>[B, L, N], Ds: tensor<f32>[D], y: tensor<T>[B, L, D]) {
    let d = program_id(0)
    let b = program_id(1)
    let a = expand_dims(load(A, tile=[BD, N], at=[d, 0]), 0)                       // [1, BD, N]
    let skip = expand_dims(load(Ds, tile=[BD], at=d), 0)                          // [1, BD]
    var state = zeros<f32>[1, BD, N]
    for c in range(cdiv(L, BT)) {
        let tu = reshape(cast<f32>(load(u, tile=[1, BT, BD], at=[b, c, d])), [BT, BD])
        let tdt = reshape(cast<f32>(load(dt, tile=[1, BT, BD], at=[b, c, d])), [BT, BD])
        let tb = reshape(cast<f32>(load(Bs, tile=[1, BT, N], at=[b, c, 0])), [BT, 1, N])
        let tc = reshape(cast<f32>(load(Cs, tile=[1, BT, N], at=[b, c, 0])), [BT, 1, N])
        let decay = exp(expand_dims(tdt, 2) * a)                                   // [BT, BD, N]; 1 past L
        let input = expand_dims(tdt * tu, 2) * tb                                  // 0 past L
        let since, local = scan(decay, input, axis=0, combine=selective_step, identity=[1.0, 0.0])
        let h = since * state + local
        store(y, cast<T>(reshape(sum(h * tc, axis=2) + skip * tu, [1, BT, BD])), at=[b, c, d])
        let whole, last = reduce(decay, input, axis=0, combine=selective_step, identity=[1.0, 0.0], keepdims=true)
        state = whole * state + last
    }
}

// A running sum down the columns (torch.cumsum(x, dim=0), e.g. over time steps with features contiguous): each
// program walks BD columns from the top in [BT, BD] tiles, scans each along its leading axis in f32 and adds the
// column sums of the tiles above.
kernel col_cumsum<BT: int = 64, BD: int = 32, T: dtype = f32>(x: tensor<T>[M, N], y: tensor<T>[M, N]) {
    let col = program_id(0)
    var carry = zeros<f32>[1, BD]
    for i in range(cdiv(M, BT)) {
        let t = cast<f32>(load(x, tile=[BT, BD], at=[i, col]))
        store(y, cast<T>(cumsum(t, axis=0) + carry), at=[i, col])
        carry = carry + sum(t, axis=0, keepdims=true)
    }
}

// FP8 training's cast-transpose (TransformerEngine's cast_transpose): x [M, N] bf16 times the tensor's scale, cast
// to e4m3 and written twice, as is (q) and transposed (qt, for the backward's other product), and the tensor's
// largest |x| kept in amax (an atomic max per tile) for the next step's scale. One program per BM x BN tile.
kernel cast_transpose<BM: int = 64, BN: int = 64>(x: tensor<bf16>[M, N], scale: tensor<f32>[1],
        q: tensor<f8e4m3>[M, N], qt: tensor<f8e4m3>[N, M], amax: tensor<f32>[1]) {
    let t = cast<f32>(load(x, tile=[BM, BN], at=[program_id(0), program_id(1)]))
    let c = cast<f8e4m3>(t * load(scale, at=0))
    store(q, c, at=[program_id(0), program_id(1)])
    store(qt, transpose(c), at=[program_id(1), program_id(0)])
    atomic_max(amax, 0, max(abs(t)))
}

// GELU's tanh form (torch's approximate="tanh"), its tanh two ways: libdevice's tanhf, and the SFU's tanh.approx.f32
// through inline PTX (asm; the interpreter runs ref=). 1D over a flat tensor, 2048 elements a program.
kernel gelu_tanh<B: int = 2048, T: dtype = bf16>(x: tensor<T>[N], y: tensor<T>[N]) {
    let t = cast<f32>(load(x, tile=[B], at=program_id(0)))
    let u = 0.7978845608028654 * (t + 0.044715 * t * t * t)
    store(y, cast<T>(0.5 * t * (1.0 + tanh(u))), at=program_id(0))
}

kernel gelu_tanh_asm<B: int = 2048, T: dtype = bf16>(x: tensor<T>[N], y: tensor<T>[N]) {
    let t = cast<f32>(load(x, tile=[B], at=program_id(0)))
    let u = 0.7978845608028654 * (t + 0.044715 * t * t * t)
    store(y, cast<T>(0.5 * t * (1.0 + asm<f32>("tanh.approx.f32 $0, $1;", "=f,f", u, ref=tanh(u)))),
          at=program_id(0))
}

// Each row's mean and biased variance (torch.var_mean(x, dim=1, correction=0)) in f32, BM rows a program, the
// whole row in one [BM, BN] tile (BN >= N). welford_moments reduces (count, mean, sum of squared deviations)
// triples with a combine fn, as tests/filecheck/reduce_combine.tle does: the columns past N count 0, the identity's
// count, and change nothing. Both GPU paths lower such a reduce as a scan and its last element (the order a
// non-commutative fn needs); two_pass_moments is the plain way, a sum and then the sum of squared deviations.
fn welford(n1, m1, q1, n2, m2, q2) {
    let n = n1 + n2
    let d = m2 - m1
    let w = where(n > 0.0, n2 / n, 0.0)
    return n, m1 + d * w, q1 + q2 + d * d * n1 * w
}

kernel welford_moments<BM: int = 1, BN: int = 1024, T: dtype = f32, C: bool = false>(x: tensor<T>[M, N],
        mean: tensor<f32>[M], variance: tensor<f32>[M]) {
    let t = cast<f32>(load(x, tile=[BM, BN], at=[program_id(0), 0]))
    let count = where(arange(BN) < N, 1.0, 0.0)
    let n, m, q = reduce(count, t, 0.0, axis=1, combine=welford, identity=[0.0, 0.0, 0.0], commutative=C)
    store(mean, m, at=program_id(0))
    store(variance, q / n, at=program_id(0))
}

kernel two_pass_moments<BM: int = 1, BN: int = 1024, T: dtype = f32>(x: tensor<T>[M, N], mean: tensor<f32>[M],
        variance: tensor<f32>[M]) {
    let t = cast<f32>(load(x, tile=[BM, BN], at=[program_id(0), 0]))
    let m = sum(t, axis=1) / N
    let d = where(arange(BN) < N, t - expand_dims(m, 1), 0.0)
    store(mean, m, at=program_id(0))
    store(variance, sum(d * d, axis=1) / N, at=program_id(0))
}
"""


# ---- hand-written Triton, the same algorithms and tiles -----------------------------------------------------------

@triton.jit
def _attend_ref(q, k_base, v_base, rm, rd, lo, hi, L, mi, li, acc, qk_scale, BN: tl.constexpr, D: tl.constexpr,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    for j in range(lo, hi):
        rn = j * BN + tl.arange(0, BN)
        if MASKED:
            k = tl.load(k_base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        else:
            k = tl.load(k_base + rn[:, None] * D + rd[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = rn[None, :] < L
            if CAUSAL:
                keep = keep & (rn[None, :] <= rm[:, None])
            s = tl.where(keep, s, -float("inf"))
        mnew = tl.maximum(mi, tl.max(s, 1))
        p = tl.math.exp2(s - mnew[:, None])
        alpha = tl.math.exp2(mi - mnew)
        li = li * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        else:
            v = tl.load(v_base + rn[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        mi = mnew
    return mi, li, acc


@triton.jit
def _sweep_ref(q_ptr, k_ptr, v_ptr, S, L, scale, m, b, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
               CAUSAL: tl.constexpr):
    """examples/attention.tle's sweep: the running max, sum and output of queries m * BM ... over their keys."""
    rm = m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + b * S * D + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    mi = tl.full([BM], -float("inf"), tl.float32)
    li = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    qk_scale = scale * 1.4426950408889634
    k_base = k_ptr + b * L * D
    v_base = v_ptr + b * L * D
    if CAUSAL:
        whole = tl.minimum(m * BM, L) // BN
        stop = tl.cdiv(tl.minimum((m + 1) * BM, L), BN)
    else:
        whole = L // BN
        stop = tl.cdiv(L, BN)
    mi, li, acc = _attend_ref(q, k_base, v_base, rm, rd, 0, whole, L, mi, li, acc, qk_scale, BN, D, False, CAUSAL)
    mi, li, acc = _attend_ref(q, k_base, v_base, rm, rd, whole, stop, L, mi, li, acc, qk_scale, BN, D, True, CAUSAL)
    return rm, rd, mi, li, acc


@triton.jit
def attention_ref(q_ptr, k_ptr, v_ptr, o_ptr, S, L, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                  CAUSAL: tl.constexpr = False):
    """examples/attention.tle's algorithm: key tiles wholly inside L (and, causal, before the program's first
    query) unmasked, then the ragged tile or the diagonal band masked (the Triton tutorial's two stages)."""
    m = tl.program_id(0)
    b = tl.program_id(1)
    rm, rd, mi, li, acc = _sweep_ref(q_ptr, k_ptr, v_ptr, S, L, scale, m, b, BM, BN, D, CAUSAL)
    tl.store(o_ptr + b * S * D + rm[:, None] * D + rd[None, :], (acc / li[:, None]).to(o_ptr.dtype.element_ty),
             mask=rm[:, None] < S)


# examples/attention_bwd.tle's four kernels, the same algorithm and tiles (attention_train)
@triton.jit
def attention_fwd_ref(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, L, scale, BM: tl.constexpr, BN: tl.constexpr,
                      D: tl.constexpr, CAUSAL: tl.constexpr):
    m = tl.program_id(0)
    b = tl.program_id(1)
    rm, rd, mi, li, acc = _sweep_ref(q_ptr, k_ptr, v_ptr, S, L, scale, m, b, BM, BN, D, CAUSAL)
    tl.store(o_ptr + b * S * D + rm[:, None] * D + rd[None, :], (acc / li[:, None]).to(o_ptr.dtype.element_ty),
             mask=rm[:, None] < S)
    tl.store(lse_ptr + b * S + rm, mi + tl.math.log2(li), mask=rm < S)


@triton.jit
def attention_bwd_delta_ref(o_ptr, do_ptr, delta_ptr, S, BM: tl.constexpr, D: tl.constexpr):
    m = tl.program_id(0)
    b = tl.program_id(1)
    rm = m * BM + tl.arange(0, BM)
    at = b * S * D + rm[:, None] * D + tl.arange(0, D)[None, :]
    o = tl.load(o_ptr + at, mask=rm[:, None] < S, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + at, mask=rm[:, None] < S, other=0.0).to(tl.float32)
    tl.store(delta_ptr + b * S + rm, tl.sum(o * do, 1), mask=rm < S)


@triton.jit
def _dkdv_ref(k, v, q_base, do_base, lse_base, delta_base, rn, rd, lo, hi, S, dk, dv, qk_scale,
              BM: tl.constexpr, D: tl.constexpr, MASKED: tl.constexpr):
    for m in range(lo, hi):
        rm = m * BM + tl.arange(0, BM)
        q = tl.load(q_base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
        lse = tl.load(lse_base + rm, mask=rm < S, other=0.0)
        pt = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASKED:
            pt = tl.where(rn[:, None] <= rm[None, :], pt, 0.0)
        do = tl.load(do_base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv)
        delta = tl.load(delta_base + rm, mask=rm < S, other=0.0)
        dst = pt * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk = tl.dot(dst.to(q.dtype), q, dk)
    return dk, dv


@triton.jit
def attention_bwd_dkdv_ref(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, S, L, scale,
                           BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    n = tl.program_id(0)
    b = tl.program_id(1)
    rn = n * BN + tl.arange(0, BN)
    rd = tl.arange(0, D)
    kv = b * L * D + rn[:, None] * D + rd[None, :]
    k = tl.load(k_ptr + kv, mask=rn[:, None] < L, other=0.0)
    v = tl.load(v_ptr + kv, mask=rn[:, None] < L, other=0.0)
    dk = tl.zeros([BN, D], tl.float32)
    dv = tl.zeros([BN, D], tl.float32)
    qk_scale = scale * 1.4426950408889634
    q_base, do_base = q_ptr + b * S * D, do_ptr + b * S * D
    lse_base, delta_base = lse_ptr + b * S, delta_ptr + b * S
    if CAUSAL:
        band_end = tl.minimum(tl.cdiv((n + 1) * BN, BM), tl.cdiv(S, BM))
        dk, dv = _dkdv_ref(k, v, q_base, do_base, lse_base, delta_base, rn, rd, (n * BN) // BM, band_end, S, dk,
                           dv, qk_scale, BM, D, True)
        dk, dv = _dkdv_ref(k, v, q_base, do_base, lse_base, delta_base, rn, rd, band_end, tl.cdiv(S, BM), S, dk, dv,
                           qk_scale, BM, D, False)
    else:
        dk, dv = _dkdv_ref(k, v, q_base, do_base, lse_base, delta_base, rn, rd, 0, tl.cdiv(S, BM), S, dk, dv,
                           qk_scale, BM, D, False)
    tl.store(dk_ptr + kv, (dk * scale).to(dk_ptr.dtype.element_ty), mask=rn[:, None] < L)
    tl.store(dv_ptr + kv, dv.to(dv_ptr.dtype.element_ty), mask=rn[:, None] < L)


@triton.jit
def _dq_ref(q, do, lse, delta, k_base, v_base, rm, rd, lo, hi, L, dq, qk_scale, BN: tl.constexpr, D: tl.constexpr,
            MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    for j in range(lo, hi):
        rn = j * BN + tl.arange(0, BN)
        if MASKED:
            k = tl.load(k_base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        else:
            k = tl.load(k_base + rn[:, None] * D + rd[None, :])
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        if MASKED:
            keep = rn[None, :] < L
            if CAUSAL:
                keep = keep & (rn[None, :] <= rm[:, None])
            p = tl.where(keep, p, 0.0)
        if MASKED:
            v = tl.load(v_base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        else:
            v = tl.load(v_base + rn[:, None] * D + rd[None, :])
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def attention_bwd_dq_ref(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, S, L, scale, BM: tl.constexpr,
                         BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    m = tl.program_id(0)
    b = tl.program_id(1)
    rm = m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    at = b * S * D + rm[:, None] * D + rd[None, :]
    q = tl.load(q_ptr + at, mask=rm[:, None] < S, other=0.0)
    do = tl.load(do_ptr + at, mask=rm[:, None] < S, other=0.0)
    lse = tl.load(lse_ptr + b * S + rm, mask=rm < S, other=0.0)
    delta = tl.load(delta_ptr + b * S + rm, mask=rm < S, other=0.0)
    dq = tl.zeros([BM, D], tl.float32)
    qk_scale = scale * 1.4426950408889634
    k_base, v_base = k_ptr + b * L * D, v_ptr + b * L * D
    if CAUSAL:
        whole = tl.minimum(m * BM, L) // BN
        stop = tl.cdiv(tl.minimum((m + 1) * BM, L), BN)
    else:
        whole = L // BN
        stop = tl.cdiv(L, BN)
    dq = _dq_ref(q, do, lse, delta, k_base, v_base, rm, rd, 0, whole, L, dq, qk_scale, BN, D, False, CAUSAL)
    dq = _dq_ref(q, do, lse, delta, k_base, v_base, rm, rd, whole, stop, L, dq, qk_scale, BN, D, True, CAUSAL)
    tl.store(dq_ptr + at, (dq * scale).to(dq_ptr.dtype.element_ty), mask=rm[:, None] < S)


@triton.jit
def transpose_ref(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    t = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], tl.trans(t), mask=tl.trans(mask))


@triton.jit
def colsum_ref(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros([BN], tl.float32)
    for i in range(0, tl.cdiv(M, BM)):
        rm = i * BM + tl.arange(0, BM)
        t = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
        acc += tl.sum(t.to(tl.float32), 0)
    tl.store(out_ptr + rn, acc, mask=rn < N)


@triton.jit
def bias_gelu_ref(x_ptr, b_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    t = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0).to(tl.float32) \
        + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    y = 0.5 * t * (1.0 + tl.math.erf(t * 0.7071067811865476))
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _a_b(a_ptr, b_ptr, rm, rn, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         PRECISION: tl.constexpr = None):
    """The f32 tile a[rm, :] @ b[:, rn] (both row-major), over K tiles of BK, masked on every axis; PRECISION is
    tl.dot's input_precision (what linear_relu_ref and matmul_tf32_ref share)."""
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def linear_relu_ref(a_ptr, w_ptr, bias_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = _a_b(a_ptr, w_ptr, rm, rn, M, N, K, BM, BN, BK)
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0).to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def embedding_ref(ids_ptr, w_ptr, y_ptr, M, D, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rows = tl.load(ids_ptr + rm, mask=rm < M, other=0)
    t = tl.load(w_ptr + rows[:, None] * D + rn[None, :], mask=rn[None, :] < D, other=0.0)
    tl.store(y_ptr + rm[:, None] * D + rn[None, :], t, mask=(rm[:, None] < M) & (rn[None, :] < D))


@triton.jit
def embedding_bwd_ref(ids_ptr, dy_ptr, dw_ptr, M, D, BM: tl.constexpr, BN: tl.constexpr, SEM: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rows = tl.load(ids_ptr + rm, mask=rm < M, other=-1)
    g = tl.load(dy_ptr + rm[:, None] * D + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < D), other=0.0)
    tl.atomic_add(dw_ptr + rows[:, None] * D + rn[None, :], g.to(tl.float32),
                  mask=(rows[:, None] >= 0) & (rn[None, :] < D), sem=SEM)


@triton.jit
def gemv_ref(w_ptr, x_ptr, y_ptr, N, K, BN: tl.constexpr, BK: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BN, BK), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        wv = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        acc += wv.to(tl.float32) * tl.load(x_ptr + kk, mask=kk < K, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rn, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=rn < N)


@triton.jit
def causal_conv1d_ref(x_ptr, w_ptr, bias_ptr, y_ptr, D, L, BD: tl.constexpr, BL: tl.constexpr):
    b = tl.program_id(0)
    ch = (tl.program_id(1) * BD + tl.arange(0, BD))[:, None]
    t = (tl.program_id(2) * BL + tl.arange(0, BL))[None, :]
    acc = tl.load(bias_ptr + ch, mask=ch < D, other=0.0).to(tl.float32) + tl.zeros((BD, BL), dtype=tl.float32)
    for k in range(4):
        tt = t - 3 + k
        xv = tl.load(x_ptr + b * D * L + ch * L + tt, mask=(ch < D) & (tt >= 0) & (tt < L), other=0.0)
        acc += xv.to(tl.float32) * tl.load(w_ptr + ch * 4 + k, mask=ch < D, other=0.0).to(tl.float32)
    tl.store(y_ptr + b * D * L + ch * L + t, (acc * tl.sigmoid(acc)).to(y_ptr.dtype.element_ty),
             mask=(ch < D) & (t < L))


@triton.jit
def embedding_bag_ref(table_ptr, ids_ptr, offsets_ptr, out_ptr, D, BD: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BD + tl.arange(0, BD)
    acc = tl.zeros((BD,), dtype=tl.float32)
    for i in range(tl.load(offsets_ptr + b), tl.load(offsets_ptr + b + 1)):
        row = tl.load(ids_ptr + i)
        acc += tl.load(table_ptr + row * D + cols, mask=cols < D, other=0.0).to(tl.float32)
    tl.store(out_ptr + b * D + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < D)


@triton.jit
def dwconv3x3_ref(x_ptr, w_ptr, y_ptr, C, H, W, BH: tl.constexpr, BW: tl.constexpr):
    nc = tl.program_id(0)
    c = nc % C
    h = (tl.program_id(1) * BH + tl.arange(0, BH))[:, None]
    col = (tl.program_id(2) * BW + tl.arange(0, BW))[None, :]
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for k in range(9):
        hh = h + k // 3 - 1
        ww = col + k % 3 - 1
        xv = tl.load(x_ptr + nc * H * W + hh * W + ww, mask=(hh >= 0) & (hh < H) & (ww >= 0) & (ww < W), other=0.0)
        acc += xv.to(tl.float32) * tl.load(w_ptr + c * 9 + k).to(tl.float32)
    tl.store(y_ptr + nc * H * W + h * W + col, acc.to(y_ptr.dtype.element_ty), mask=(h < H) & (col < W))


@triton.jit
def heads_first_ref(x_ptr, y_ptr, S, H, BS: tl.constexpr, D: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    s = (tl.program_id(1) * BS + tl.arange(0, BS))[:, None]
    d = tl.arange(0, D)[None, :]
    t = tl.load(x_ptr + ((b * S + s) * H + h) * D + d, mask=s < S)
    tl.store(y_ptr + (bh * S + s) * D + d, t, mask=s < S)


@triton.jit
def router_top1_ref(logits_ptr, weight_ptr, expert_ptr, M, BT: tl.constexpr, E: tl.constexpr):
    rows = tl.program_id(0) * BT + tl.arange(0, BT)
    l = tl.load(logits_ptr + rows[:, None] * E + tl.arange(0, E)[None, :], mask=rows[:, None] < M,
                other=-float("inf"))
    m = tl.max(l, axis=1)
    tl.store(weight_ptr + rows, 1.0 / tl.sum(tl.exp(l - m[:, None]), axis=1), mask=rows < M)
    tl.store(expert_ptr + rows, tl.argmax(l, axis=1), mask=rows < M)


@triton.jit
def spmv_csr_ref(row_ptr_ptr, cols_ptr, vals_ptr, x_ptr, y_ptr, BK: tl.constexpr):
    r = tl.program_id(0)
    stop = tl.load(row_ptr_ptr + r + 1)
    acc = tl.zeros((BK,), dtype=tl.float32)
    for j in range(tl.load(row_ptr_ptr + r), stop, BK):
        e = j + tl.arange(0, BK)
        inside = e < stop
        c = tl.load(cols_ptr + e, mask=inside, other=0)
        acc += tl.load(vals_ptr + e, mask=inside, other=0.0).to(tl.float32) * \
            tl.load(x_ptr + c, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + r, tl.sum(acc).to(y_ptr.dtype.element_ty))


@triton.jit
def lora_ref(x_ptr, w_ptr, a_ptr, b_ptr, y_ptr, M, N, K, scale, BM: tl.constexpr, BN: tl.constexpr,
             BK: tl.constexpr, R: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rr = tl.arange(0, R)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    xa = tl.zeros((BM, R), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + tl.arange(0, BK)
        xt = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        at = tl.load(a_ptr + rr[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
        acc = tl.dot(xt, tl.trans(wt), acc)
        xa = tl.dot(xt, tl.trans(at), xa)
    bt = tl.load(b_ptr + rn[:, None] * R + rr[None, :], mask=rn[:, None] < N, other=0.0)
    acc = tl.dot((xa * scale).to(x_ptr.dtype.element_ty), tl.trans(bt), acc)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def maxpool2x2_ref(x_ptr, y_ptr, H, W, OH, OW, BH: tl.constexpr, BW: tl.constexpr):
    nc = tl.program_id(0)
    rows = tl.program_id(1) * 2 * BH + tl.arange(0, 2 * BH)
    cols = tl.program_id(2) * 2 * BW + tl.arange(0, 2 * BW)
    t = tl.load(x_ptr + nc * H * W + rows[:, None] * W + cols[None, :],
                mask=(rows[:, None] < H) & (cols[None, :] < W), other=-float("inf"))
    m = tl.max(tl.max(tl.reshape(t, (BH, 2, BW, 2)), axis=3), axis=1)
    orow = tl.program_id(1) * BH + tl.arange(0, BH)
    ocol = tl.program_id(2) * BW + tl.arange(0, BW)
    tl.store(y_ptr + nc * OH * OW + orow[:, None] * OW + ocol[None, :], m,
             mask=(orow[:, None] < OH) & (ocol[None, :] < OW))


@triton.jit
def row_max_ref(x_ptr, v_ptr, i_ptr, M, BM: tl.constexpr, N: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    t = tl.load(x_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], mask=rows[:, None] < M, other=-float("inf"))
    tl.store(v_ptr + rows, tl.max(t, axis=1), mask=rows < M)
    tl.store(i_ptr + rows, tl.argmax(t, axis=1), mask=rows < M)


@triton.jit
def upsample_nearest2x_ref(x_ptr, y_ptr, H, W, OH, OW, BH: tl.constexpr, BW: tl.constexpr):
    nc = tl.program_id(0)
    oh = (tl.program_id(1) * BH + tl.arange(0, BH))[:, None]
    ow = (tl.program_id(2) * BW + tl.arange(0, BW))[None, :]
    inside = (oh < OH) & (ow < OW)
    v = tl.load(x_ptr + nc * H * W + (oh // 2) * W + ow // 2, mask=inside)
    tl.store(y_ptr + nc * OH * OW + oh * OW + ow, v, mask=inside)


@triton.jit
def upsample_bilinear2x_ref(x_ptr, y_ptr, H, W, OH, OW, BH: tl.constexpr, BW: tl.constexpr):
    nc = tl.program_id(0)
    oh = (tl.program_id(1) * BH + tl.arange(0, BH))[:, None]
    ow = (tl.program_id(2) * BW + tl.arange(0, BW))[None, :]
    sh = tl.maximum(oh.to(tl.float32) * 0.5 - 0.25, 0.0)
    sw = tl.maximum(ow.to(tl.float32) * 0.5 - 0.25, 0.0)
    h0 = sh.to(tl.int32)
    w0 = sw.to(tl.int32)
    lh = sh - h0.to(tl.float32)
    lw = sw - w0.to(tl.float32)
    h1 = tl.minimum(h0 + 1, H - 1)
    w1 = tl.minimum(w0 + 1, W - 1)
    inside = (oh < OH) & (ow < OW)
    base = x_ptr + nc * H * W
    top = (1.0 - lw) * tl.load(base + h0 * W + w0, mask=inside).to(tl.float32) + \
        lw * tl.load(base + h0 * W + w1, mask=inside).to(tl.float32)
    bottom = (1.0 - lw) * tl.load(base + h1 * W + w0, mask=inside).to(tl.float32) + \
        lw * tl.load(base + h1 * W + w1, mask=inside).to(tl.float32)
    tl.store(y_ptr + nc * OH * OW + oh * OW + ow, ((1.0 - lh) * top + lh * bottom).to(y_ptr.dtype.element_ty),
             mask=inside)


@triton.jit
def mean_pool_ref(x_ptr, mask_ptr, y_ptr, S, D, BT: tl.constexpr, BD: tl.constexpr):
    b = tl.program_id(0)
    rd = tl.program_id(1) * BD + tl.arange(0, BD)
    rt = tl.arange(0, BT)
    acc = tl.zeros((BT, BD), dtype=tl.float32)
    count = tl.zeros((BT,), dtype=tl.float32)
    for t in range(0, tl.cdiv(S, BT)):
        tt = t * BT + rt
        m = tl.load(mask_ptr + b * S + tt, mask=tt < S, other=0.0).to(tl.float32)
        xv = tl.load(x_ptr + b * S * D + tt[:, None] * D + rd[None, :], mask=(tt[:, None] < S) & (rd[None, :] < D),
                     other=0.0)
        acc += xv.to(tl.float32) * m[:, None]
        count += m
    y = tl.sum(acc, axis=0) / tl.maximum(tl.sum(count, axis=0), 1.0)
    tl.store(y_ptr + b * D + rd, y.to(y_ptr.dtype.element_ty), mask=rd < D)


@triton.jit
def ssm_update_ref(state_ptr, x_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, next_ptr, out_ptr, DIM, BD: tl.constexpr,
                   N: tl.constexpr):
    b = tl.program_id(0)
    rd = tl.program_id(1) * BD + tl.arange(0, BD)
    rn = tl.arange(0, N)
    md = rd < DIM
    at = b * DIM * N + rd[:, None] * N + rn[None, :]
    s = tl.load(state_ptr + at, mask=md[:, None], other=0.0)
    xv = tl.load(x_ptr + b * DIM + rd, mask=md, other=0.0)[:, None]
    dtv = tl.load(dt_ptr + b * DIM + rd, mask=md, other=0.0)[:, None]
    av = tl.load(a_ptr + rd[:, None] * N + rn[None, :], mask=md[:, None], other=0.0)
    bv = tl.load(b_ptr + b * N + rn)[None, :]
    cv = tl.load(c_ptr + b * N + rn)[None, :]
    s2 = s * tl.exp(dtv * av) + dtv * xv * bv
    tl.store(next_ptr + at, s2, mask=md[:, None])
    y = tl.sum(s2 * cv, axis=1, keep_dims=True) + tl.load(d_ptr + rd, mask=md, other=0.0)[:, None] * xv
    tl.store(out_ptr + b * DIM + rd[:, None], y, mask=md[:, None])


@triton.jit
def group_norm_ref(x_ptr, w_ptr, b_ptr, y_ptr, L, G, HW, eps, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    q = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, tl.cdiv(L, BLOCK)):
        col = i * BLOCK + cols
        v = tl.load(x_ptr + r * L + col, mask=col < L, other=0.0).to(tl.float32)
        s += v
        q += v * v
    mean = tl.sum(s, axis=0) / L
    rstd = tl.rsqrt(tl.sum(q, axis=0) / L - mean * mean + eps)
    c0 = (r % G) * (L // HW)
    for i in range(0, tl.cdiv(L, BLOCK)):
        col = i * BLOCK + cols
        inside = col < L
        c = c0 + col // HW
        wv = tl.load(w_ptr + c, mask=inside, other=0.0).to(tl.float32)
        bv = tl.load(b_ptr + c, mask=inside, other=0.0).to(tl.float32)
        v = tl.load(x_ptr + r * L + col, mask=inside, other=0.0).to(tl.float32)
        tl.store(y_ptr + r * L + col, ((v - mean) * rstd * wv + bv).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def kv_cache_write_ref(k_ptr, v_ptr, kc_ptr, vc_ptr, slots_ptr, BS, H: tl.constexpr, D: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slots_ptr + t)
    if slot >= 0:
        blk = slot // BS
        row = slot % BS
        hd = tl.arange(0, H)[:, None] * D + tl.arange(0, D)[None, :]
        dst = blk * BS * H * D + row * H * D + hd
        tl.store(kc_ptr + dst, tl.load(k_ptr + t * H * D + hd))
        tl.store(vc_ptr + dst, tl.load(v_ptr + t * H * D + hd))


@triton.jit
def row_cumsum_ref(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for j in range(0, tl.cdiv(N, BLOCK)):
        cols = j * BLOCK + tl.arange(0, BLOCK)
        t = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, (tl.cumsum(t, 0) + carry).to(y_ptr.dtype.element_ty), mask=cols < N)
        carry += tl.sum(t, 0)


@triton.jit
def col_cumsum_ref(x_ptr, y_ptr, M, N, BT: tl.constexpr, BD: tl.constexpr):
    cols = tl.program_id(0) * BD + tl.arange(0, BD)
    carry = tl.zeros((1, BD), dtype=tl.float32)
    for i in range(0, tl.cdiv(M, BT)):
        rows = i * BT + tl.arange(0, BT)
        offs = rows[:, None] * N + cols[None, :]
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        t = tl.load(x_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (tl.cumsum(t, 0) + carry).to(y_ptr.dtype.element_ty), mask=inside)
        carry += tl.sum(t, 0, keep_dims=True)


@triton.jit
def _linear_step(a1, h1, a2, h2):
    return a1 * a2, a2 * h1 + h2


@triton.jit
def selective_scan_ref(u_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, ds_ptr, y_ptr, L, D, BT: tl.constexpr,
                       BD: tl.constexpr, N: tl.constexpr):
    """The probe's selective_scan: [BT, BD, N] tiles scanned along time with tl.associative_scan, the state carried
    by the scan's last row (tl.reduce of the same fn would combine out of order: the fn is not commutative)."""
    d = tl.program_id(0) * BD + tl.arange(0, BD)
    n = tl.arange(0, N)
    b = tl.program_id(1)
    a = tl.load(a_ptr + d[:, None] * N + n[None, :], mask=d[:, None] < D, other=0.0)[None, :, :]
    skip = tl.load(ds_ptr + d, mask=d < D, other=0.0)[None, :]
    state = tl.zeros((1, BD, N), dtype=tl.float32)
    for c in range(0, tl.cdiv(L, BT)):
        t = c * BT + tl.arange(0, BT)
        offs = b * L * D + t[:, None] * D + d[None, :]
        inside = (t[:, None] < L) & (d[None, :] < D)
        tu = tl.load(u_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        tdt = tl.load(dt_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        bc = b * L * N + t[:, None] * N + n[None, :]
        tb = tl.load(b_ptr + bc, mask=t[:, None] < L, other=0.0).to(tl.float32)[:, None, :]
        tc = tl.load(c_ptr + bc, mask=t[:, None] < L, other=0.0).to(tl.float32)[:, None, :]
        decay = tl.exp(tdt[:, :, None] * a)
        inp = (tdt * tu)[:, :, None] * tb
        since, local = tl.associative_scan((decay, inp), 0, _linear_step)
        h = since * state + local
        tl.store(y_ptr + offs, (tl.sum(h * tc, 2) + skip * tu).to(y_ptr.dtype.element_ty), mask=inside)
        final = (tl.arange(0, BT) == BT - 1)[:, None, None]
        whole = tl.sum(tl.where(final, since, 0.0), 0, keep_dims=True)
        state = whole * state + tl.sum(tl.where(final, local, 0.0), 0, keep_dims=True)


@triton.jit
def linear_recurrence_ref(a_ptr, x_ptr, h_ptr, L, D, BT: tl.constexpr, BD: tl.constexpr):
    """examples/linear_recurrence.tle's algorithm: h[t] = a[t] h[t-1] + x[t] along L of [B, L, D], chunks of BT
    steps scanned with tl.associative_scan, the carry moved on by the scan's last row. (tl.reduce of the same
    combine gave results 0.5 off on the H200: it combines lanes out of order, and the fn is not commutative.)"""
    d = tl.program_id(0) * BD + tl.arange(0, BD)
    base = tl.program_id(1) * L * D
    carry = tl.zeros((1, BD), dtype=tl.float32)
    for c in range(0, tl.cdiv(L, BT)):
        t = c * BT + tl.arange(0, BT)
        offs = base + t[:, None] * D + d[None, :]
        inside = (t[:, None] < L) & (d[None, :] < D)
        ta = tl.load(a_ptr + offs, mask=inside, other=1.0).to(tl.float32)
        tx = tl.load(x_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        since, local = tl.associative_scan((ta, tx), 0, _linear_step)
        tl.store(h_ptr + offs, (since * carry + local).to(h_ptr.dtype.element_ty), mask=inside)
        final = (tl.arange(0, BT) == BT - 1)[:, None]
        carry = tl.sum(tl.where(final, since, 0.0), 0, keep_dims=True) * carry + \
            tl.sum(tl.where(final, local, 0.0), 0, keep_dims=True)


@triton.jit
def cast_transpose_ref(x_ptr, scale_ptr, q_ptr, qt_ptr, amax_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    t = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=inside, other=0.0).to(tl.float32)
    c = (t * tl.load(scale_ptr)).to(tl.float8e4nv)
    tl.store(q_ptr + rm[:, None] * N + rn[None, :], c, mask=inside)
    tl.store(qt_ptr + rn[:, None] * M + rm[None, :], tl.trans(c), mask=inside.T)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(t)))


@triton.jit
def gelu_tanh_ref(x_ptr, y_ptr, N, B: tl.constexpr, FAST: tl.constexpr):
    """The probe's gelu_tanh (FAST: its gelu_tanh_asm, tanh.approx.f32 by tl.inline_asm_elementwise)."""
    o = tl.program_id(0) * B + tl.arange(0, B)
    t = tl.load(x_ptr + o, mask=o < N, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (t + 0.044715 * t * t * t)
    if FAST:
        th = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [u], dtype=tl.float32, is_pure=True,
                                       pack=1)
    else:
        th = tl.extra.cuda.libdevice.tanh(u)
    tl.store(y_ptr + o, (0.5 * t * (1.0 + th)).to(y_ptr.dtype.element_ty), mask=o < N)


@triton.jit
def _welford_step(n1, m1, q1, n2, m2, q2):
    n = n1 + n2
    d = m2 - m1
    w = tl.where(n > 0.0, n2 / n, 0.0)
    return n, m1 + d * w, q1 + q2 + d * d * n1 * w


@triton.jit
def _moments_tile(x_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    return rows, cols, tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=inside, other=0.0).to(tl.float32)


@triton.jit
def welford_moments_ref(x_ptr, mean_ptr, var_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """The probe's welford_moments: (count, mean, M2) triples combined by tl.reduce. tl.reduce combines lanes in no
    defined order, which would be wrong for a non-commutative fn; Welford's combine is commutative (up to rounding),
    so this is a fair twin, and what a Triton user writes (tle's reduce(combine=) is a scan and its last element)."""
    rows, cols, t = _moments_tile(x_ptr, M, N, BM, BN)
    count = tl.broadcast_to(tl.where(cols < N, 1.0, 0.0)[None, :], (BM, BN))
    n, m, q = tl.reduce((count, t, tl.zeros((BM, BN), dtype=tl.float32)), 1, _welford_step)
    tl.store(mean_ptr + rows, m, mask=rows < M)
    tl.store(var_ptr + rows, q / n, mask=rows < M)


@triton.jit
def two_pass_moments_ref(x_ptr, mean_ptr, var_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows, cols, t = _moments_tile(x_ptr, M, N, BM, BN)
    m = tl.sum(t, 1) / N
    d = tl.where(cols[None, :] < N, t - m[:, None], 0.0)
    tl.store(mean_ptr + rows, m, mask=rows < M)
    tl.store(var_ptr + rows, tl.sum(d * d, 1) / N, mask=rows < M)


@triton.jit
def _row_max_sum(x_ptr, row, N, BLOCK: tl.constexpr):
    """One pass over row `row` of x in tiles of BLOCK: a running maximum and sum of exp per lane, folded at the end
    into the row's maximum m and sum(exp(x - m)) (what vocab_softmax_ref and cross_entropy_ref both need)."""
    cols = tl.arange(0, BLOCK)
    mx = tl.full([BLOCK], -float("inf"), tl.float32)
    total = tl.zeros([BLOCK], tl.float32)
    for j in range(0, tl.cdiv(N, BLOCK)):
        c = j * BLOCK + cols
        t = tl.load(x_ptr + row * N + c, mask=c < N, other=-float("inf")).to(tl.float32)
        m2 = tl.maximum(mx, t)
        total = total * tl.exp(mx - m2) + tl.exp(t - m2)
        mx = m2
    m = tl.max(mx, 0)
    return m, tl.sum(total * tl.exp(mx - m), 0)


@triton.jit
def vocab_softmax_ref(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m, s = _row_max_sum(x_ptr, row, N, BLOCK)
    for j in range(0, tl.cdiv(N, BLOCK)):
        c = j * BLOCK + cols
        t = tl.load(x_ptr + row * N + c, mask=c < N, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * N + c, (tl.exp(t - m) / s).to(y_ptr.dtype.element_ty), mask=c < N)


@triton.jit
def _rows_tile(ptr, rows, kk, R, K):
    """K tile `kk` of rows `rows` of an [R, K] row-major tensor, masked on both axes, zero past the edges."""
    return tl.load(ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < R) & (kk[None, :] < K), other=0.0)


@triton.jit
def _x_w_tiles(x_ptr, w_ptr, rm, rn, kk, M, N, K):
    """K tile `kk` of x[rm, :] and w[rn, :] in nn.Linear's layout (both [rows, K]), masked on every axis, zero past
    the edges (what _x_wt, linear_fp8_block_ref and gate_up_silu_ref share)."""
    return _rows_tile(x_ptr, rm, kk, M, K), _rows_tile(w_ptr, rn, kk, N, K)


@triton.jit
def _x_wt(x_ptr, w_ptr, rm, rn, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr):
    """The tile x[rm, :] @ w[rn, :]^T of nn.Linear's layout (w stored [N, K]), accumulated in ACC over K tiles of
    BK, masked on every axis (what linear_nt_ref and linear_scaled_ref share)."""
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        x, w = _x_w_tiles(x_ptr, w_ptr, rm, rn, k * BK + rk, M, N, K)
        acc = tl.dot(x, tl.trans(w), acc, out_dtype=ACC)
    return acc


@triton.jit
def linear_nt_ref(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = _x_wt(x_ptr, w_ptr, rm, rn, M, N, K, BM, BN, BK, tl.float32)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def bmm_ref(a_ptr, d_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    b = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr += b * M * K
    d_ptr += b * K * N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        d = tl.load(d_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, d, acc)
    tl.store(c_ptr + b * M * N + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def add_rmsnorm_ref(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    hs = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(r_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(h_ptr + row * N + cols, hs, mask=mask)
    t = hs.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(t * t, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (t * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _head_halves_ref(x_ptr, H, BH: tl.constexpr, HALF: tl.constexpr):
    """Token program_id(0)'s heads program_id(1) * BH ... of x [S, H, 2 * HALF]: (the offsets of their first halves,
    [BH, HALF]; the mask of heads inside H; both halves in f32)."""
    h = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    mask = h < H
    at = tl.program_id(0) * H * 2 * HALF + h * 2 * HALF + tl.arange(0, HALF)[None, :]
    x1 = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + at + HALF, mask=mask, other=0.0).to(tl.float32)
    return at, mask, x1, x2


@triton.jit
def _rotate_halves_ref(x1, x2, cos_ptr, sin_ptr, y_ptr, at, mask, HALF: tl.constexpr):
    """Stores halves x1, x2 rotated by token program_id(0)'s angles (rotate-half RoPE) at _head_halves_ref's at."""
    j = tl.program_id(0) * HALF + tl.arange(0, HALF)[None, :]
    c = tl.load(cos_ptr + j)
    sn = tl.load(sin_ptr + j)
    tl.store(y_ptr + at, (x1 * c - x2 * sn).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + at + HALF, (x2 * c + x1 * sn).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_ref(x_ptr, cos_ptr, sin_ptr, y_ptr, H, BH: tl.constexpr, HALF: tl.constexpr):
    at, mask, x1, x2 = _head_halves_ref(x_ptr, H, BH, HALF)
    _rotate_halves_ref(x1, x2, cos_ptr, sin_ptr, y_ptr, at, mask, HALF)


@triton.jit
def rope_pairs_ref(x_ptr, cos_ptr, sin_ptr, y_ptr, H, BH: tl.constexpr, D: tl.constexpr):
    s = tl.program_id(0)
    h = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    mask = h < H
    at = s * H * D + h * D + tl.arange(0, D)[None, :]
    even, odd = tl.split(tl.reshape(tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32), [BH, D // 2, 2]))
    i = tl.arange(0, D // 2)[None, :]
    c = tl.load(cos_ptr + s * (D // 2) + i)
    sn = tl.load(sin_ptr + s * (D // 2) + i)
    y = tl.reshape(tl.join(even * c - odd * sn, even * sn + odd * c), [BH, D])
    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cross_entropy_ref(x_ptr, target_ptr, loss_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m, s = _row_max_sum(x_ptr, row, V, BLOCK)
    lse = m + tl.log(s)
    picked = tl.load(x_ptr + row * V + tl.load(target_ptr + row)).to(tl.float32)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def cross_entropy_bwd_ref(x_ptr, target_ptr, lse_ptr, dloss_ptr, dx_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lse = tl.load(lse_ptr + row)
    g = tl.load(dloss_ptr + row)
    hit = tl.load(target_ptr + row)
    for j in range(0, tl.cdiv(V, BLOCK)):
        cols = j * BLOCK + tl.arange(0, BLOCK)
        mask = cols < V
        p = tl.exp(tl.load(x_ptr + row * V + cols, mask=mask, other=0.0).to(tl.float32) - lse)
        dx = (p - tl.where(cols == hit, 1.0, 0.0)) * g
        tl.store(dx_ptr + row * V + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def linear_scaled_ref(x_ptr, w_ptr, sx_ptr, sw_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, ACC: tl.constexpr):
    """The W8A8 (ACC int32) and FP8 (ACC float32) linear layers: x @ w^T accumulated in ACC, then scaled per row
    and output channel in f32."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = _x_wt(x_ptr, w_ptr, rm, rn, M, N, K, BM, BN, BK, ACC)
    scale = (tl.load(sx_ptr + rm, mask=rm < M, other=0.0)[:, None]
             * tl.load(sw_ptr + rn, mask=rn < N, other=0.0)[None, :])
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], (acc.to(tl.float32) * scale).to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def linear_fp8_block_ref(x_ptr, w_ptr, sx_ptr, sw_ptr, y_ptr, M, N, K, KB, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x, w = _x_w_tiles(x_ptr, w_ptr, rm, rn, k * BK + rk, M, N, K)
        a = tl.load(sx_ptr + rm * KB + k, mask=rm < M, other=0.0)
        b = tl.load(sw_ptr + pn * KB + k)
        acc += tl.dot(x, tl.trans(w)) * a[:, None] * b
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def moe_gemm_ref(x_ptr, ids_ptr, experts_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    pb, pn = tl.program_id(0), tl.program_id(1)
    e = tl.load(experts_ptr + pb)
    tok = tl.load(ids_ptr + pb * BM + tl.arange(0, BM))
    real = tok < M
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    w_e = w_ptr + e * N * K
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(x_ptr + tok[:, None] * K + kk[None, :], mask=real[:, None] & (kk[None, :] < K), other=0.0)
        b = tl.load(w_e + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(y_ptr + tok[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=real[:, None] & (rn[None, :] < N))


@triton.jit
def _walk_blocks_ref(q_ptr, kc_ptr, vc_ptr, bt_ptr, b, h, n, first, stop, scale, H, MAXB, BS: tl.constexpr,
                     D: tl.constexpr):
    rd, rs = tl.arange(0, D), tl.arange(0, BS)
    qv = tl.load(q_ptr + (b * H + h) * D + rd).to(tl.float32) * (scale * 1.4426950408889634)
    m = -float("inf")
    l = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for j in range(first, stop):
        blk = tl.load(bt_ptr + b * MAXB + j)
        at = ((blk * BS + rs[:, None]) * H + h) * D + rd[None, :]
        s = tl.where(j * BS + rs < n, tl.sum(tl.load(kc_ptr + at).to(tl.float32) * qv[None, :], 1), -float("inf"))
        mnew = tl.maximum(m, tl.max(s, 0))
        p = tl.exp2(s - mnew)
        alpha = tl.exp2(m - mnew)
        l = l * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * tl.load(vc_ptr + at).to(tl.float32), 0)
        m = mnew
    return m, l, acc


@triton.jit
def paged_attention_ref(q_ptr, kc_ptr, vc_ptr, bt_ptr, lens_ptr, o_ptr, scale, H, MAXB, BS: tl.constexpr,
                        D: tl.constexpr):
    b, h = tl.program_id(0), tl.program_id(1)
    n = tl.load(lens_ptr + b)
    m, l, acc = _walk_blocks_ref(q_ptr, kc_ptr, vc_ptr, bt_ptr, b, h, n, 0, tl.cdiv(n, BS), scale, H, MAXB, BS, D)
    tl.store(o_ptr + (b * H + h) * D + tl.arange(0, D), (acc / l).to(o_ptr.dtype.element_ty))


@triton.jit
def paged_attention_split_ref(q_ptr, kc_ptr, vc_ptr, bt_ptr, lens_ptr, pm_ptr, ps_ptr, po_ptr, scale, H, MAXB, P,
                              BS: tl.constexpr, D: tl.constexpr, PART: tl.constexpr):
    b, h, p = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n = tl.load(lens_ptr + b)
    first = p * (PART // BS)
    stop = tl.minimum(tl.cdiv(n, BS), (p + 1) * (PART // BS))
    m, l, acc = _walk_blocks_ref(q_ptr, kc_ptr, vc_ptr, bt_ptr, b, h, n, first, stop, scale, H, MAXB, BS, D)
    i = (b * H + h) * P + p
    tl.store(pm_ptr + i, m)
    tl.store(ps_ptr + i, l)
    tl.store(po_ptr + i * D + tl.arange(0, D), acc)


@triton.jit
def paged_attention_combine_ref(pm_ptr, ps_ptr, po_ptr, o_ptr, H, P, D: tl.constexpr, PP: tl.constexpr):
    b, h = tl.program_id(0), tl.program_id(1)
    rp = tl.arange(0, PP)
    i = (b * H + h) * P + rp
    pm = tl.load(pm_ptr + i, mask=rp < P, other=-float("inf"))
    w = tl.exp2(pm - tl.max(pm, 0))
    total = tl.sum(tl.load(ps_ptr + i, mask=rp < P, other=0.0) * w, 0)
    po = tl.load(po_ptr + i[:, None] * D + tl.arange(0, D)[None, :], mask=rp[:, None] < P, other=0.0)
    tl.store(o_ptr + (b * H + h) * D + tl.arange(0, D), (tl.sum(po * w[:, None], 0) / total).to(o_ptr.dtype.element_ty))


@triton.jit
def matmul_tf32_ref(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    PRECISION: tl.constexpr = "tf32"):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = _a_b(a_ptr, b_ptr, rm, rn, M, N, K, BM, BN, BK, PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def dropout_ref(x_ptr, y_ptr, N, p, seed, BLOCK: tl.constexpr):
    """Triton's "low-memory dropout" tutorial kernel."""
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = off < N
    x = tl.load(x_ptr + off, mask=mask).to(tl.float32)
    y = tl.where(tl.rand(seed, off) > p, x / (1 - p), 0.0)
    tl.store(y_ptr + off, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def router_topk_ref(x_ptr, y_ptr, T, E: tl.constexpr, BM: tl.constexpr, K: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    x = tl.load(x_ptr + rows[:, None] * E + tl.arange(0, E)[None, :], mask=rows[:, None] < T, other=float("-inf"))
    tl.store(y_ptr + rows[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K, dim=1), mask=rows[:, None] < T)


@triton.jit
def router_topk_ids_ref(x_ptr, y_ptr, ids_ptr, T, E: tl.constexpr, BM: tl.constexpr, K: tl.constexpr):
    """Values and ids through one tl.topk of i64 keys (the value's bits made monotone << 32 | E - 1 - id), the
    packing Triton MoE kernels use."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    x = tl.load(x_ptr + rows[:, None] * E + tl.arange(0, E)[None, :], mask=rows[:, None] < T, other=float("-inf"))
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    packed = (key.to(tl.int64) << 32) | (E - 1 - tl.arange(0, E))[None, :].to(tl.int64)
    top = tl.topk(packed, K, dim=1)
    hi = (top >> 32).to(tl.int32)
    out = rows[:, None] * K + tl.arange(0, K)[None, :]
    tl.store(y_ptr + out, (hi ^ ((hi >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True), mask=rows[:, None] < T)
    tl.store(ids_ptr + out, E - 1 - top.to(tl.int32), mask=rows[:, None] < T)


@triton.jit
def sort_rows_ref(x_ptr, y_ptr, T, N: tl.constexpr, BM: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    at = rows[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + at, mask=rows[:, None] < T)
    tl.store(y_ptr + at, tl.sort(x, dim=1), mask=rows[:, None] < T)


@triton.jit
def dropout4_ref(x_ptr, y_ptr, N, p, seed, BLOCK: tl.constexpr):
    """The tutorial's kernel with one rand4x per four elements, interleaved by tl.join (the same numbers as
    dropout4's words=4)."""
    q = tl.program_id(0) * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.rand4x(seed, q)
    r = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [BLOCK])
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = off < N
    x = tl.load(x_ptr + off, mask=mask).to(tl.float32)
    tl.store(y_ptr + off, tl.where(r > p, x / (1 - p), 0.0).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_ref(y_ptr, dy_ptr, dx_ptr, N, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * N + tl.arange(0, BLOCK)
    mask = tl.arange(0, BLOCK) < N
    p = tl.load(y_ptr + at, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(dy_ptr + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(dx_ptr + at, (p * (g - tl.sum(p * g, 0))).to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def greedy_ref(x_ptr, out_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], -float("inf"), tl.float32)
    at = tl.zeros([BLOCK], tl.int32)
    for j in range(0, tl.cdiv(V, BLOCK)):
        c = j * BLOCK + lanes
        t = tl.load(x_ptr + row * V + c, mask=c < V, other=-float("inf")).to(tl.float32)
        better = t > best
        best = tl.where(better, t, best)
        at = tl.where(better, c, at)
    tl.store(out_ptr + row, tl.min(tl.where(best == tl.max(best, 0), at, V), 0))


@triton.jit
def linear_w4a16_ref(x_ptr, w_ptr, scale_ptr, y_ptr, M, N, H, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(H, BK)):
        kk = k * BK + rk
        q = tl.load(w_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < H) & (rn[None, :] < N), other=0)
        q = q.to(tl.int32)
        xm = (rm[:, None] < M) & (kk[None, :] < H)
        x1 = tl.load(x_ptr + rm[:, None] * (2 * H) + kk[None, :], mask=xm, other=0.0)
        x2 = tl.load(x_ptr + rm[:, None] * (2 * H) + H + kk[None, :], mask=xm, other=0.0)
        acc = tl.dot(x1, ((q & 15) - 8).to(x_ptr.dtype.element_ty), acc)
        acc = tl.dot(x2, (((q >> 4) & 15) - 8).to(x_ptr.dtype.element_ty), acc)
    s = tl.load(scale_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], (acc * s[None, :]).to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def layernorm_bwd_ref(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, M, N, ROWS: tl.constexpr,
                      BLOCK: tl.constexpr):
    p = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    wt = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], tl.float32)
    db = tl.zeros([BLOCK], tl.float32)
    for row in range(p * ROWS, tl.minimum((p + 1) * ROWS, M)):
        at = row.to(tl.int64) * N + cols
        g = tl.load(dy_ptr + at, mask=mask, other=0.0).to(tl.float32)
        rs = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
                               - tl.load(mean_ptr + row)) * rs, 0.0)
        wdy = wt * g
        c1 = tl.sum(xhat * wdy, 0) / N
        c2 = tl.sum(wdy, 0) / N
        tl.store(dx_ptr + at, ((wdy - (xhat * c1 + c2)) * rs).to(dx_ptr.dtype.element_ty), mask=mask)
        dw += g * xhat
        db += g
    tl.store(dw_ptr + p * N + cols, dw, mask=mask)
    tl.store(db_ptr + p * N + cols, db, mask=mask)


@triton.jit
def layernorm_bwd_reduce_ref(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, G, N, BG: tl.constexpr, BN: tl.constexpr):
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    sw = tl.zeros([BN], tl.float32)
    sb = tl.zeros([BN], tl.float32)
    for i in range(0, tl.cdiv(G, BG)):
        rows = i * BG + tl.arange(0, BG)
        m = (rows[:, None] < G) & (cols[None, :] < N)
        sw += tl.sum(tl.load(dw_part_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0), 0)
        sb += tl.sum(tl.load(db_part_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0), 0)
    tl.store(dw_ptr + cols, sw, mask=cols < N)
    tl.store(db_ptr + cols, sb, mask=cols < N)


# ---- cases --------------------------------------------------------------------------------------------------------

@triton.jit
def adam_ref(p_ptr, g_ptr, m_ptr, v_ptr, lr, beta1, beta2, eps, c1, c2, N, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = at < N
    g = tl.load(g_ptr + at, mask=mask)
    m = beta1 * tl.load(m_ptr + at, mask=mask) + (1.0 - beta1) * g
    v = beta2 * tl.load(v_ptr + at, mask=mask) + (1.0 - beta2) * g * g
    tl.store(m_ptr + at, m, mask=mask)
    tl.store(v_ptr + at, v, mask=mask)
    tl.store(p_ptr + at, tl.load(p_ptr + at, mask=mask) - lr * c1 * m / (tl.sqrt_rn(v * c2) + eps), mask=mask)


@triton.jit
def quant_rows_ref(x_ptr, q_ptr, s_ptr, N, BLOCK: tl.constexpr, QMAX: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    t = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(t), 0), 1e-12)
    tl.store(q_ptr + row * N + cols, (t * (QMAX / amax)).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, amax / QMAX)


@triton.jit
def vector_sum_ref(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + at, mask=at < N, other=0.0), 0))


@triton.jit
def histogram_ref(x_ptr, bins_ptr, N, BLOCK: tl.constexpr, SEM: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    tl.atomic_add(bins_ptr + tl.load(x_ptr + offs, mask=inside, other=0), 1, mask=inside, sem=SEM)


@triton.jit
def histogram_local_ref(x_ptr, bins_ptr, N, B: tl.constexpr, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    h = tl.zeros([B], tl.int32)
    for c in range(CHUNKS):
        offs = (tl.program_id(0) * CHUNKS + c) * BLOCK + tl.arange(0, BLOCK)
        h += tl.histogram(tl.load(x_ptr + offs, mask=offs < N, other=0), B, mask=offs < N)
    tl.atomic_add(bins_ptr + tl.arange(0, B), h)


@triton.jit
def conv2d_ref(x_ptr, w_ptr, y_ptr, NB, H, W, C, F, P, Q, KH: tl.constexpr, KW: tl.constexpr, STRIDE: tl.constexpr,
               PAD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pix = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    n = pix // (P * Q)
    oh = pix % (P * Q) // Q
    ow = pix % Q
    real = pix < NB * P * Q
    cb = tl.cdiv(C, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, KH * KW * cb):
        tap = k // cb
        ih = oh * STRIDE - PAD + tap // KW
        iw = ow * STRIDE - PAD + tap % KW
        cols = k % cb * BK + tl.arange(0, BK)
        inside = real & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + (((n * H + ih) * W + iw) * C)[:, None] + cols[None, :],
                    mask=inside[:, None] & (cols < C)[None, :], other=0.0)
        b = tl.load(w_ptr + ((tap * C + cols) * F)[:, None] + rn[None, :],
                    mask=(cols < C)[:, None] & (rn < F)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(y_ptr + (pix * F)[:, None] + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=real[:, None] & (rn < F)[None, :])


@triton.jit
def gate_up_silu_ref(x_ptr, wg_ptr, wu_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    g = tl.zeros((BM, BN), dtype=tl.float32)
    u = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x, wg = _x_w_tiles(x_ptr, wg_ptr, rm, rn, k * BK + rk, M, N, K)
        wu = _rows_tile(wu_ptr, rn, k * BK + rk, N, K)
        g = tl.dot(x, tl.trans(wg), g)
        u = tl.dot(x, tl.trans(wu), u)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], (g * tl.sigmoid(g) * u).to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def linear_wgrad_ref(dy_ptr, x_ptr, dw_ptr, M, N, K, BN: tl.constexpr, BK: tl.constexpr, BT: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    rk = tl.program_id(1) * BK + tl.arange(0, BK)
    rt = tl.arange(0, BT)
    acc = tl.zeros((BN, BK), dtype=tl.float32)
    for t in range(0, tl.cdiv(M, BT)):
        tt = t * BT + rt  # the tokens of this step: rows of both dy and x
        acc = tl.dot(tl.trans(_rows_tile(dy_ptr, tt, rn, M, N)), _rows_tile(x_ptr, tt, rk, M, K), acc)
    tl.store(dw_ptr + rn[:, None] * K + rk[None, :], acc.to(dw_ptr.dtype.element_ty),
             mask=(rn[:, None] < N) & (rk[None, :] < K))


@triton.jit
def chunk_linear_attn_ref(q_ptr, k_ptr, v_ptr, o_ptr, L, scale, C: tl.constexpr, D: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * L * D
    rc = tl.arange(0, C)
    rd = tl.arange(0, D)
    causal = rc[:, None] >= rc[None, :]
    state = tl.zeros((D, D), dtype=tl.float32)
    for c in range(0, tl.cdiv(L, C)):
        rows = c * C + rc
        offs = base + rows[:, None] * D + rd[None, :]
        inside = rows[:, None] < L
        q = (tl.load(q_ptr + offs, mask=inside, other=0.0).to(tl.float32) * scale).to(k_ptr.dtype.element_ty)
        k = tl.load(k_ptr + offs, mask=inside, other=0.0)
        v = tl.load(v_ptr + offs, mask=inside, other=0.0)
        a = tl.where(causal, tl.dot(q, tl.trans(k)), 0.0)
        o = tl.dot(q, state.to(k.dtype), tl.dot(a.to(k.dtype), v))
        state = tl.dot(tl.trans(k), v, state)
        tl.store(o_ptr + offs, o.to(o_ptr.dtype.element_ty), mask=inside)


@triton.jit
def qk_norm_rope_ref(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr, H, eps, BH: tl.constexpr, HALF: tl.constexpr):
    at, mask, x1, x2 = _head_halves_ref(x_ptr, H, BH, HALF)
    rstd = tl.rsqrt((tl.sum(x1 * x1, 1) + tl.sum(x2 * x2, 1)) / (2 * HALF) + eps)[:, None]
    j = tl.arange(0, HALF)[None, :]
    n1 = x1 * rstd * tl.load(w_ptr + j).to(tl.float32)
    n2 = x2 * rstd * tl.load(w_ptr + HALF + j).to(tl.float32)
    _rotate_halves_ref(n1, n2, cos_ptr, sin_ptr, y_ptr, at, mask, HALF)


@triton.jit
def _varlen_attend_ref(q, k_ptr, v_ptr, base, rm, rd, lo, hi, ln, mi, li, acc, qk_scale, HD, BN: tl.constexpr,
                       MASKED: tl.constexpr):
    """varlen_attend: key tiles lo .. hi - 1 of the sequence whose head h starts at element `base` (i64)."""
    for j in range(lo, hi):
        rn = j * BN + tl.arange(0, BN)
        at = base + rn[:, None].to(tl.int64) * HD + rd[None, :]
        if MASKED:
            k = tl.load(k_ptr + at, mask=rn[:, None] < ln, other=0.0)
            s = tl.where(rn[None, :] <= rm[:, None], tl.dot(q, tl.trans(k)) * qk_scale, -float("inf"))
            v = tl.load(v_ptr + at, mask=rn[:, None] < ln, other=0.0)
        else:
            s = tl.dot(q, tl.trans(tl.load(k_ptr + at))) * qk_scale
            v = tl.load(v_ptr + at)
        mnew = tl.maximum(mi, tl.max(s, 1))
        p = tl.math.exp2(s - mnew[:, None])
        alpha = tl.math.exp2(mi - mnew)
        li = li * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        mi = mnew
    return mi, li, acc


@triton.jit
def varlen_attention_ref(q_ptr, k_ptr, v_ptr, cu_ptr, o_ptr, scale, H, BM: tl.constexpr, BN: tl.constexpr,
                         D: tl.constexpr):
    m, b, h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    start = tl.load(cu_ptr + b)
    ln = tl.load(cu_ptr + b + 1) - start
    if m * BM < ln:
        rm = m * BM + tl.arange(0, BM)
        rd = tl.arange(0, D)
        base = start.to(tl.int64) * H * D + h * D
        at = base + rm[:, None].to(tl.int64) * (H * D) + rd[None, :]
        q = tl.load(q_ptr + at, mask=rm[:, None] < ln, other=0.0)
        mi = tl.full([BM], -float("inf"), tl.float32)
        li = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        qk_scale = scale * 1.4426950408889634
        whole = m * BM // BN
        stop = tl.cdiv(tl.minimum((m + 1) * BM, ln), BN)
        mi, li, acc = _varlen_attend_ref(q, k_ptr, v_ptr, base, rm, rd, 0, whole, ln, mi, li, acc, qk_scale, H * D,
                                         BN, False)
        mi, li, acc = _varlen_attend_ref(q, k_ptr, v_ptr, base, rm, rd, whole, stop, ln, mi, li, acc, qk_scale,
                                         H * D, BN, True)
        tl.store(o_ptr + at, (acc / li[:, None]).to(o_ptr.dtype.element_ty), mask=rm[:, None] < ln)


def _sets(make, nbytes: int) -> list:
    """Input sets: enough copies that bench.py's default rotation (Context.rotate_bytes, 4x an H200's L2) separate
    two uses of one, at most 16."""
    return [make() for _ in range(max(1, min(16, math.ceil(bench.Context.rotate_bytes / max(1, nbytes)))))]


def _row_starts(lengths: torch.Tensor, dev) -> tuple[torch.Tensor, int]:
    """(CSR-style starts of rows of these lengths, on dev: i32, one more than rows; their total): an EmbeddingBag's
    offsets, a sparse matrix's row pointer. Summed on the CPU, so probe_survey.py builds the case on meta tensors."""
    starts = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    starts[1:] = torch.cumsum(lengths, 0).to(torch.int32)
    return starts.to(dev), int(starts[-1])


def _zeroed(f, out: int = 1):
    """f(set) after zeroing the set's output t[out], for kernels that add into it with atomics; f's result."""
    return lambda t: (t[out].zero_(), f(t))[1]


OCCUPANCY: list = []  # --occupancy: Tile IR occupancy hints to time beside the lowering's own choice
WARPS: list = []  # --warps: native num_warps to time beside the default (tle/compiler.py default_num_warps)
AUTO = "tle:auto"  # an impl checked but not timed: it returns the path backend="auto" took


def _both_paths(kernel, grid, ref, **consts) -> dict:
    """tle's kernel on both GPU paths (Triton's default launch options; `consts` are its constants) and the
    hand-written reference's launch; with --occupancy, Tile IR again with each of those hints (the `occupancy=`
    launch option); with --warps, the native path again on each of those num_warps."""
    impls = {"tle:triton": lambda t: kernel[grid](*t, **consts, backend="triton"),
             "tle:tileir": lambda t: kernel[grid](*t, **consts, backend="tileir"),
             # what a user who names no backend gets: checked, and its path named on the case's line, not timed
             # (its binary is one of the two above)
             AUTO: lambda t: (kernel[grid](*t, **consts), kernel.last_backend)[1],
             "triton_ref": ref}
    for n in OCCUPANCY:
        impls[f"tle:tileir occ{n}"] = lambda t, n=n: kernel[grid](*t, **consts, backend="tileir", occupancy=n)
    for n in WARPS:
        impls[f"tle:triton w{n}"] = lambda t, n=n: kernel[grid](*t, **consts, backend="triton", num_warps=n)
    return impls


def cases(dev, only):
    """(title, work (bytes, flops), sets, torch fn, {name: fn(set)}, output index in a set[, expected outputs of a
    set, where they are not the torch fn's (None: they are)[, {name: fn(set)} to time where the checked launch has
    setup the timing leaves out[, fn(set) after the case is timed: a line printed below the case's]]])."""
    attention = tle.compile(os.path.join(HERE, "..", "examples", "attention.tle"))
    fp8 = tle.compile(os.path.join(HERE, "..", "examples", "linear_fp8.tle"))
    small = tle.compile(SMALL_TLE)
    r = lambda *s, dt: torch.randn(*s, device=dev).to(dt)  # noqa: E731
    out = []
    if "attention" in only:
        attention_tuned = tle.compile(os.path.join(HERE, "..", "examples", "attention.tle"), tune={"attention": {
            "BM": [64, 128], "BN": [32, 64, 128], "num_warps": [4, 8], "STAGES": [2, 3]}})
        attention_tuned.attention.tune_space.budget_s = 40
        for causal in (False, True):
            for dt in (torch.float16, torch.bfloat16):
                for b, s, d in ((32, 1024, 64), (32, 4096, 64), (16, 4096, 128)):
                    if causal and s == 1024:
                        continue
                    nb = 4 * b * s * d * dt.itemsize
                    sets = _sets(lambda: [r(b, s, d, dt=dt), r(b, s, d, dt=dt), r(b, s, d, dt=dt),
                                          torch.empty(b, s, d, device=dev, dtype=dt)], nb)
                    h = 8
                    cfg = dict(BM=64, BN=64, CAUSAL=causal)
                    grid = (triton.cdiv(s, cfg["BM"]), b)

                    def sdpa(t, h=h, causal=causal):
                        q, k, v, o = (x.view(x.shape[0] // h, h, *x.shape[1:]) for x in t)
                        o.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    impls = {
                        "tle:triton": lambda t, c=cfg, g=grid, d=d: attention.attention[g](
                            *t, d ** -0.5, **c, D=d, backend="triton"),
                        "tle:triton w8": lambda t, c=cfg, g=grid, d=d: attention.attention[g](
                            *t, d ** -0.5, **c, D=d, backend="triton", num_warps=8),
                        "tle:tileir": lambda t, c=cfg, g=grid, d=d: attention.attention[g](
                            *t, d ** -0.5, **c, D=d, backend="tileir"),
                        "triton_ref w8": lambda t, c=cfg, g=grid, d=d, s=s: attention_ref[g](
                            *t, s, s, d ** -0.5, **c, D=d, num_warps=8, num_stages=3),
                        "triton_ref w4": lambda t, c=cfg, g=grid, d=d, s=s: attention_ref[g](
                            *t, s, s, d ** -0.5, **c, D=d, num_warps=4, num_stages=3),
                    }
                    if s == 4096 and dt == torch.float16:  # the tuning database over tiles, warps and stages
                        impls["tle:tuned"] = lambda t, d=d, c=causal: attention_tuned.attention[
                            lambda m: (triton.cdiv(m["S"], m["BM"]), m["B"])](*t, d ** -0.5, D=d, CAUSAL=c)
                    flops = 4 * b * s * s * d // (2 if causal else 1)
                    out.append((f"attention{' causal' if causal else ''} b{b} s{s} d{d} {str(dt)[6:]}",
                                (nb, flops), sets, sdpa, impls, 3))
    if "attention_train" in only:
        # a training step's attention: examples/attention_bwd.tle's forward (with the log-sum-exp) and backward
        # (delta, dk/dv, dq; 4 launches) against torch's scaled_dot_product_attention forward and autograd backward
        train = tle.compile(os.path.join(HERE, "..", "examples", "attention_bwd.tle"))
        # tuned (f16): the three kernels that hold dots, over tiles, warps, the backward's stages and the path
        both = {"num_warps": [4, 8], "backend": ["triton", "tileir"]}
        train_tuned = tle.compile(os.path.join(HERE, "..", "examples", "attention_bwd.tle"), tune={
            "attention_fwd": {"BM": [64, 128], **both},
            "attention_bwd_dkdv": {"BN": [64, 128], "STAGES": [2, 3], **both},
            "attention_bwd_dq": {"BM": [64, 128], "STAGES": [2, 3], **both}})
        for kernel in (train_tuned.attention_fwd, train_tuned.attention_bwd_dkdv, train_tuned.attention_bwd_dq):
            kernel.tune_space.budget_s = 25
        for causal in (False, True):
            for dt in (torch.float16, torch.bfloat16):
                for b, s, d in ((32, 4096, 64), (16, 4096, 128)):
                    nb = 8 * b * s * d * dt.itemsize
                    sets = _sets(lambda: [r(b, s, d, dt=dt) for _ in range(4)]
                                 + [torch.empty(b, s, d, device=dev, dtype=dt) for _ in range(4)]
                                 + [torch.empty(b, s, device=dev) for _ in range(2)], nb)
                    h = 8

                    def sdpa_train(t, h=h, causal=causal):
                        q, k, v, do = (x.view(x.shape[0] // h, h, *x.shape[1:]) for x in t[:4])
                        with torch.enable_grad():
                            q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
                            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            grads = torch.autograd.grad(o, (q, k, v), do)
                        for dst, src in zip(t[4:8], (o, *grads)):
                            dst.copy_(src.detach().reshape(dst.shape))

                    def tle_train(t, d=d, s=s, b=b, causal=causal, backend="triton"):
                        q, k, v, do, o, dq, dk, dv, lse, delta = t
                        c = dict(D=d, CAUSAL=causal, backend=backend)
                        g = (triton.cdiv(s, 64), b)
                        train.attention_fwd[g](q, k, v, o, lse, d ** -0.5, **c)
                        train.attention_bwd_delta[g](o, do, delta, D=d, backend=backend)
                        train.attention_bwd_dkdv[g](q, k, v, do, lse, delta, dk, dv, d ** -0.5, **c)
                        train.attention_bwd_dq[g](q, k, v, do, lse, delta, dq, d ** -0.5, **c)
                    def triton_train(t, d=d, s=s, b=b, causal=causal):
                        q, k, v, do, o, dq, dk, dv, lse, delta = t
                        c = dict(BM=64, BN=64, D=d, CAUSAL=causal, num_warps=4, num_stages=3)
                        g = (triton.cdiv(s, 64), b)
                        attention_fwd_ref[g](q, k, v, o, lse, s, s, d ** -0.5, **c)
                        attention_bwd_delta_ref[g](o, do, delta, s, BM=64, D=d)
                        attention_bwd_dkdv_ref[g](q, k, v, do, lse, delta, dk, dv, s, s, d ** -0.5, **c)
                        attention_bwd_dq_ref[g](q, k, v, do, lse, delta, dq, s, s, d ** -0.5, **c)
                    def tuned_train(t, d=d, causal=causal):
                        q, k, v, do, o, dq, dk, dv, lse, delta = t
                        c = dict(D=d, CAUSAL=causal)
                        rows = lambda m: (triton.cdiv(m["S"], m["BM"]), m["B"])  # noqa: E731
                        train_tuned.attention_fwd[rows](q, k, v, o, lse, d ** -0.5, **c)
                        train.attention_bwd_delta[(triton.cdiv(q.shape[1], 64), q.shape[0])](o, do, delta, D=d)
                        train_tuned.attention_bwd_dkdv[lambda m: (triton.cdiv(m["L"], m["BN"]), m["B"])](
                            q, k, v, do, lse, delta, dk, dv, d ** -0.5, **c)
                        train_tuned.attention_bwd_dq[rows](q, k, v, do, lse, delta, dq, d ** -0.5, **c)
                    impls = {"tle:triton": tle_train,
                             "tle:tileir": lambda t, f=tle_train: f(t, backend="tileir"),
                             AUTO: lambda t, f=tle_train: (f(t, backend="auto"), "/".join(
                                 k.last_backend for k in (train.attention_fwd, train.attention_bwd_dkdv,
                                                          train.attention_bwd_dq)) + " (forward/dk,dv/dq)")[1],
                             "triton_ref": triton_train}
                    if dt == torch.float16:
                        impls["tle:tuned"] = tuned_train
                    flops = 7 * 2 * b * s * s * d // (2 if causal else 1)  # 2 matmuls forward, 5 backward
                    out.append((f"attention_train{' causal' if causal else ''} b{b} s{s} d{d} {str(dt)[6:]}",
                                (nb, flops), sets, sdpa_train, impls, (4, 5, 6, 7)))
    if "transpose" in only:
        for dt in (torch.float32, torch.bfloat16):
            m = n = 8192
            nb = 2 * m * n * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(n, m, device=dev, dtype=dt)], nb)
            g = (m // 64, n // 64)
            out.append((f"transpose {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[1].copy_(t[0].t()),
                        _both_paths(small.transpose, g,
                                    lambda t, g=g, m=m, n=n: transpose_ref[g](*t, m, n, BM=64, BN=64)), 1))
    if "colsum" in only:
        for dt in (torch.float32, torch.bfloat16):
            m, n = 16384, 4096
            nb = m * n * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(n, device=dev)], nb)
            g = (n // 128,)
            out.append((f"colsum {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: torch.sum(t[0], 0, dtype=torch.float32, out=t[1]),
                        _both_paths(small.colsum, g,
                                    lambda t, g=g, m=m, n=n: colsum_ref[g](*t, m, n, BM=64, BN=128)), 1))
    if "bias_gelu" in only:
        # 8192^2: every tile inside (the launch drops all bounds checks); 8000^2: the last column of tiles ragged
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((8192, 8192), (8000, 8000))):
            nb = 2 * m * n * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), r(n, dt=dt), torch.empty(m, n, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(m, 32), triton.cdiv(n, 128))
            out.append((f"bias_gelu {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[2].copy_(torch.nn.functional.gelu(t[0] + t[1])),
                        _both_paths(small.bias_gelu, g,
                                    lambda t, g=g, m=m, n=n: bias_gelu_ref[g](*t, m, n, BM=32, BN=128)), 2))
    if "linear_relu" in only:
        for dt in (torch.float16, torch.bfloat16):
            for m, n, k in ((4096, 4096, 4096), (8192, 4096, 1024)):
                nb = (m * k + k * n + m * n) * dt.itemsize
                sets = _sets(lambda: [r(m, k, dt=dt), r(k, n, dt=dt), r(n, dt=dt),
                                      torch.empty(m, n, device=dev, dtype=dt)], nb)
                g = (m // 128, n // 128)
                out.append((f"linear_relu {m}x{n}x{k} {str(dt)[6:]}", (nb, 2 * m * n * k), sets,
                            lambda t: torch.relu_(torch.addmm(t[2], t[0], t[1], out=t[3])),
                            _both_paths(small.linear_relu, g,
                                        lambda t, g=g, m=m, n=n, k=k: linear_relu_ref[g](
                                            *t, m, n, k, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)), 3))
    if "embedding" in only:
        # Llama-2's vocabulary and width; 8192 tokens, ids drawn at random (rows gathered all over the table)
        for dt, (v, d, m) in itertools.product((torch.bfloat16, torch.float32), ((32000, 4096, 8192),)):
            nb = 2 * m * d * dt.itemsize + 4 * m
            w = r(v, d, dt=dt)  # one table: a model has one; the ids and outputs rotate
            sets = _sets(lambda: [torch.randint(0, v, (m,), device=dev, dtype=torch.int32), w,
                                  torch.empty(m, d, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(m, 16), triton.cdiv(d, 512))
            out.append((f"embedding {m} of {v}x{d} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: torch.index_select(t[1], 0, t[0], out=t[2]),
                        _both_paths(small.embedding, g,
                                    lambda t, g=g, m=m, d=d: embedding_ref[g](*t, m, d, BM=16, BN=512)), 2))
    if "embedding_bwd" in only:
        # Llama-2's table, 8192 tokens (ids at random: few share a row) and 32768 drawn from 512 ids (a small
        # vocabulary's contention); dw in f32 (mixed precision's master gradient), dy in T. One dw per case, zeroed
        # for the checked launches; the timed ones add into it (zeroing it, 524 MB, would outweigh the kernel).
        # `relaxed`: the twin with relaxed atomics, as tle makes them where no result is read (Triton's default is
        # acquire-release). torch: index_add_ (its atomics; from bf16 it first converts dy to f32)
        for dt, (v, d, m, ids) in itertools.product((torch.bfloat16, torch.float32),
                                                    ((32000, 4096, 8192, 32000), (32000, 4096, 32768, 512))):
            # dy and ids read; each dw row touched read and written once at best (the atomics run in L2, so the
            # 512 rows of the second shape, 8 MB, stay there)
            nb = m * d * dt.itemsize + 4 * m + 8 * min(m, ids) * d
            dw = torch.zeros(v, d, device=dev)
            sets = _sets(lambda: [torch.randint(0, ids, (m,), device=dev, dtype=torch.int32), r(m, d, dt=dt), dw],
                         nb)
            g = (triton.cdiv(m, 16), triton.cdiv(d, 512))

            def torch_index_add(t):
                t[2].index_add_(0, t[0], t[1].float())

            def want(t):
                t[2].zero_()
                torch_index_add(t)
                return [t[2].clone()]
            impls = _both_paths(small.embedding_bwd, g,
                                lambda t, g=g, m=m, d=d: embedding_bwd_ref[g](*t, m, d, BM=16, BN=512, SEM="acq_rel"))
            impls["triton_ref relaxed"] = lambda t, g=g, m=m, d=d: embedding_bwd_ref[g](*t, m, d, BM=16, BN=512,
                                                                                           SEM="relaxed")
            checked = {k: _zeroed(f, 2) for k, f in impls.items()}
            out.append((f"embedding_bwd {m} tokens of {ids} ids into {v}x{d} f32 from {str(dt)[6:]}", (nb, 0), sets,
                        torch_index_add, checked, 2, want, impls))
    if "row_cumsum" in only:
        # prefix sums along rows of 8192 (4096 rows: 31 waves of one program per SM) and 65536 (512 rows)
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((4096, 8192), (512, 65536))):
            nb = 2 * m * n * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(m, n, device=dev, dtype=dt)], nb)
            out.append((f"row_cumsum {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: torch.cumsum(t[0], 1, dtype=torch.float32, out=t[1]) if t[1].dtype ==
                        torch.float32 else t[1].copy_(torch.cumsum(t[0], 1, dtype=torch.float32)),
                        _both_paths(small.row_cumsum, (m,),
                                    lambda t, m=m, n=n: row_cumsum_ref[(m,)](*t, n, BLOCK=2048)), 1))
    if "gemv" in only:
        # M = 1 decode against Llama-3 8B's weights (4096x4096, the MLP's 14336x4096 and 4096x14336), bf16; each set
        # its own weight, rotated out of L2 as bench.py's decode cases are. torch: torch.mv (cuBLAS)
        for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
            nb = (n * k + n + k) * 2
            sets = _sets(lambda: [r(n, k, dt=torch.bfloat16), r(k, dt=torch.bfloat16),
                                  torch.empty(n, device=dev, dtype=torch.bfloat16)], nb)
            g = (triton.cdiv(n, 16),)
            out.append((f"gemv {n}x{k} bf16", (nb, 0), sets,
                        lambda t: torch.mv(t[0], t[1], out=t[2]),
                        _both_paths(small.gemv, g, lambda t, g=g, n=n, k=k: gemv_ref[g](*t, n, k, BN=16, BK=256)),
                        2))
    if "causal_conv1d" in only:
        # Mamba's conv1d before the scan (d_inner 4096 of Mamba-1.4B), a prefill of 16 sequences of 2048 tokens and
        # a batch of 4 of 512; bf16. torch: a grouped F.conv1d padded by 3, cut to L, then SiLU
        for bsz, dch, ln in ((16, 4096, 2048), (4, 4096, 512)):
            nb = 2 * bsz * dch * ln * 2
            wt = r(dch, 4, dt=torch.bfloat16)
            bias = r(dch, dt=torch.bfloat16)
            sets = _sets(lambda: [r(bsz, dch, ln, dt=torch.bfloat16), wt, bias,
                                  torch.empty(bsz, dch, ln, device=dev, dtype=torch.bfloat16)], nb)

            def torch_conv(t, ln=ln, dch=dch):
                t[3].copy_(torch.nn.functional.silu(torch.nn.functional.conv1d(
                    t[0], t[1][:, None, :], t[2], padding=3, groups=dch)[..., :ln]))
            g = (bsz, triton.cdiv(dch, 16), triton.cdiv(ln, 256))
            out.append((f"causal_conv1d {bsz}x{dch}x{ln} bf16", (nb, 0), sets, torch_conv,
                        _both_paths(small.causal_conv1d, g, lambda t, g=g, dch=dch, ln=ln: causal_conv1d_ref[g](
                            *t, dch, ln, BD=16, BL=256)), 3))
    if "embedding_bag" in only:
        # a recommendation model's EmbeddingBag (sum): 4096 bags of 1 to 63 ids (32 on average) over a table of a
        # million rows of 128 f32. torch: F.embedding_bag
        v, dd, bags = 1 << 20, 128, 4096
        table = r(v, dd, dt=torch.float32)
        offsets, nnz = _row_starts(torch.randint(1, 64, (bags,)), dev)
        nb = nnz * (dd * 4 + 4) + bags * dd * 4
        sets = _sets(lambda: [table, torch.randint(0, v, (nnz,), device=dev, dtype=torch.int32), offsets,
                              torch.empty(bags, dd, device=dev)], nb)
        g = (bags, 1)
        out.append((f"embedding_bag {bags} bags of {nnz // bags} from {v}x{dd} f32", (nb, 0), sets,
                    lambda t: t[3].copy_(torch.nn.functional.embedding_bag(t[1], t[0], t[2][:-1], mode="sum")),
                    _both_paths(small.embedding_bag, g, lambda t, g=g: embedding_bag_ref[g](*t, dd, BD=128)), 3))
    if "dwconv3x3" in only:
        # a depthwise 3x3 layer of a MobileNet-style network on 112x112 and 56x56 maps, and a 512x512 image batch;
        # bf16, zero padding 1. torch: a grouped F.conv2d
        for nn_, cc, hw in ((32, 96, 112), (32, 144, 56), (8, 32, 512)):
            nb = 2 * nn_ * cc * hw * hw * 2
            wt = r(cc, 9, dt=torch.bfloat16)
            sets = _sets(lambda: [r(nn_, cc, hw, hw, dt=torch.bfloat16), wt,
                                  torch.empty(nn_, cc, hw, hw, device=dev, dtype=torch.bfloat16)], nb)
            g = (nn_ * cc, triton.cdiv(hw, 16), triton.cdiv(hw, 64))
            out.append((f"dwconv3x3 {nn_}x{cc}x{hw}x{hw} bf16", (nb, 0), sets,
                        lambda t, cc=cc: t[2].copy_(torch.nn.functional.conv2d(t[0], t[1].view(cc, 1, 3, 3),
                                                                               padding=1, groups=cc)),
                        _both_paths(small.dwconv3x3, g, lambda t, g=g, cc=cc, hw=hw: dwconv3x3_ref[g](
                            *t, cc, hw, hw, BH=16, BW=64)), 2))
    if "heads_first" in only:
        # Llama-3 8B's 32 query heads of 128 over a prefill of 8 x 4096 tokens, and its 8 KV heads over 1 x 8192;
        # bf16. torch: permute(0, 2, 1, 3) copied into a contiguous tensor
        for bb, ss, hh in ((8, 4096, 32), (1, 8192, 8)):
            nb = 2 * bb * ss * hh * 128 * 2
            sets = _sets(lambda: [r(bb, ss, hh, 128, dt=torch.bfloat16),
                                  torch.empty(bb, hh, ss, 128, device=dev, dtype=torch.bfloat16)], nb)
            g = (bb * hh, triton.cdiv(ss, 64))
            out.append((f"heads_first {bb}x{ss}x{hh}x128 bf16", (nb, 0), sets,
                        lambda t: t[1].copy_(t[0].permute(0, 2, 1, 3)),
                        _both_paths(small.heads_first, g, lambda t, g=g, ss=ss, hh=hh: heads_first_ref[g](
                            *t, ss, hh, BS=64, D=128)), 1))
    if "router_top1" in only:
        # a Switch-style router over 64 experts for 32768 tokens, and over 8 (Mixtral) for 65536; f32 logits.
        # torch: softmax, then max (its weight and index)
        for mm, ee in ((32768, 64), (65536, 8)):
            nb = mm * ee * 4 + mm * 8
            sets = _sets(lambda: [r(mm, ee, dt=torch.float32), torch.empty(mm, device=dev),
                                  torch.empty(mm, device=dev, dtype=torch.int32)], nb)
            g = (triton.cdiv(mm, 64),)

            def torch_router(t):
                w, i = torch.softmax(t[0], dim=1).max(dim=1)
                t[1].copy_(w)
                t[2].copy_(i)
            out.append((f"router_top1 {mm} tokens x {ee} experts f32", (nb, 0), sets, torch_router,
                        _both_paths(small.router_top1, g, lambda t, g=g, mm=mm, ee=ee: router_top1_ref[g](
                            *t, mm, BT=64, E=ee), E=ee), (1, 2)))
    if "spmv_csr" in only:
        # a sparse matrix of a million rows times a vector (a graph's adjacency, 1 to 63 entries a row, 32 on
        # average), and 65536 rows of 64 to 1023 (a finite-element matrix); f32. torch: a CSR tensor @ x (cuSPARSE)
        for rows, lo, hi in ((1 << 20, 1, 64), (1 << 16, 64, 1024)):
            row_ptr, nnz = _row_starts(torch.randint(lo, hi, (rows,)), dev)
            nb = nnz * 8 + rows * 8 + rows * 4
            sets = _sets(lambda: [row_ptr, torch.randint(0, rows, (nnz,), device=dev, dtype=torch.int32),
                                  r(nnz, dt=torch.float32), r(rows, dt=torch.float32),
                                  torch.empty(rows, device=dev)], nb)

            def torch_spmv(t, rows=rows):
                t[4].copy_(torch.sparse_csr_tensor(t[0], t[1], t[2], (rows, rows)) @ t[3])
            g = (rows,)
            out.append((f"spmv_csr {rows} rows, {nnz // rows} a row f32", (nb, 0), sets, torch_spmv,
                        _both_paths(small.spmv_csr, g, lambda t, g=g: spmv_csr_ref[g](*t, BK=64)), 4))
    if "lora" in only:
        # a 4096x4096 projection and Llama-3 8B's 4096 -> 14336 MLP with a rank-16 LoRA adapter, for 4096 and 2048
        # tokens; bf16. torch: the three products as a user writes them
        for mm, nn_, kk in ((4096, 4096, 4096), (2048, 14336, 4096)):
            sets = _sets(lambda: [r(mm, kk, dt=torch.bfloat16), r(nn_, kk, dt=torch.bfloat16) / 64,
                                  r(16, kk, dt=torch.bfloat16) / 64, r(nn_, 16, dt=torch.bfloat16) / 4,
                                  torch.empty(mm, nn_, device=dev, dtype=torch.bfloat16)],
                          2 * (mm * kk + nn_ * kk + mm * nn_))
            g = (triton.cdiv(mm, 128), triton.cdiv(nn_, 128))
            out.append((f"lora {mm}x{nn_}x{kk} rank 16 bf16", (0, 2 * mm * nn_ * kk), sets,
                        lambda t: t[4].copy_(t[0] @ t[1].t() + 0.5 * ((t[0] @ t[2].t()) @ t[3].t())),
                        _both_paths(small.lora, g, lambda t, g=g, mm=mm, nn_=nn_, kk=kk: lora_ref[g](
                            *t, mm, nn_, kk, 0.5, BM=128, BN=128, BK=64, R=16, num_stages=3), scale=0.5), 4))
    if "maxpool2x2" in only:
        # 2x2 max pooling, stride 2: a ResNet-style 32x64x112x112 map and 16x256x128x128; bf16. torch: F.max_pool2d
        for nn_, cc, hw in ((32, 64, 112), (16, 256, 128)):
            nb = nn_ * cc * hw * hw * 2 * 5 // 4
            sets = _sets(lambda: [r(nn_ * cc, hw, hw, dt=torch.bfloat16),
                                  torch.empty(nn_ * cc, hw // 2, hw // 2, device=dev, dtype=torch.bfloat16)], nb)
            g = (nn_ * cc, triton.cdiv(hw // 2, 16), triton.cdiv(hw // 2, 64))
            out.append((f"maxpool2x2 {nn_}x{cc}x{hw}x{hw} bf16", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.max_pool2d(t[0], 2)),
                        _both_paths(small.maxpool2x2, g, lambda t, g=g, hw=hw: maxpool2x2_ref[g](
                            *t, hw, hw, hw // 2, hw // 2, BH=16, BW=64)), 1))
    if "row_max" in only:
        # torch.max(x, dim=1), values and indices: 16384 rows of 1024 bf16 (BM 4) and 65536 of 128 f32 (BM 32)
        for mm, nn_, bm, dt in ((16384, 1024, 4, torch.bfloat16), (65536, 128, 32, torch.float32)):
            nb = mm * nn_ * dt.itemsize + mm * (dt.itemsize + 4)
            sets = _sets(lambda: [r(mm, nn_, dt=dt), torch.empty(mm, device=dev, dtype=dt),
                                  torch.empty(mm, device=dev, dtype=torch.int32)], nb)
            g = (triton.cdiv(mm, bm),)

            def torch_row_max(t):
                v, i = torch.max(t[0], dim=1)
                t[1].copy_(v)
                t[2].copy_(i)
            out.append((f"row_max {mm}x{nn_} {str(dt)[6:]}", (nb, 0), sets, torch_row_max,
                        _both_paths(small.row_max, g, lambda t, g=g, mm=mm, nn_=nn_, bm=bm: row_max_ref[g](
                            *t, mm, BM=bm, N=nn_), BM=bm, N=nn_), (1, 2)))
    if "upsample_nearest2x" in only:
        # a decoder's 2x nearest upsampling: 32x128x64x64 -> 128x128 and 8x256x128x128 -> 256x256; bf16.
        # torch: F.interpolate(mode="nearest")
        for nn_, cc, hw in ((32, 128, 64), (8, 256, 128)):
            nb = nn_ * cc * hw * hw * 2 * 5
            sets = _sets(lambda: [r(nn_ * cc, hw, hw, dt=torch.bfloat16),
                                  torch.empty(nn_ * cc, 2 * hw, 2 * hw, device=dev, dtype=torch.bfloat16)], nb)
            g = (nn_ * cc, triton.cdiv(2 * hw, 16), triton.cdiv(2 * hw, 128))
            out.append((f"upsample_nearest2x {nn_}x{cc}x{hw}x{hw} bf16", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.interpolate(t[0][None], scale_factor=2)[0]),
                        _both_paths(small.upsample_nearest2x, g, lambda t, g=g, hw=hw: upsample_nearest2x_ref[g](
                            *t, hw, hw, 2 * hw, 2 * hw, BH=16, BW=128)), 1))
    if "upsample_bilinear2x" in only:
        # a segmentation head's 2x bilinear upsampling of 19-class logits, 8x19x256x512 f32, and of a 32x64x64x64
        # bf16 feature map. torch: F.interpolate(mode="bilinear", align_corners=False)
        for nn_, cc, hh, ww, dt in ((8, 19, 256, 512, torch.float32), (32, 64, 64, 64, torch.bfloat16)):
            nb = nn_ * cc * hh * ww * dt.itemsize * 5
            sets = _sets(lambda: [r(nn_ * cc, hh, ww, dt=dt),
                                  torch.empty(nn_ * cc, 2 * hh, 2 * ww, device=dev, dtype=dt)], nb)
            g = (nn_ * cc, triton.cdiv(2 * hh, 16), triton.cdiv(2 * ww, 64))
            out.append((f"upsample_bilinear2x {nn_}x{cc}x{hh}x{ww} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.interpolate(
                            t[0][None], scale_factor=2, mode="bilinear", align_corners=False)[0]),
                        _both_paths(small.upsample_bilinear2x, g, lambda t, g=g, hh=hh, ww=ww:
                                    upsample_bilinear2x_ref[g](*t, hh, ww, 2 * hh, 2 * ww, BH=16, BW=64)), 1))
    if "mean_pool" in only:
        # sentence embeddings: BERT-large's 1024 over 64 sequences of 512 tokens, and 256 of 128 at 768; about a
        # third of the tokens masked off. torch: the masked sum and the count, as a user writes it
        for dt, (b, sl, d) in itertools.product((torch.bfloat16,), ((64, 512, 1024), (256, 128, 768))):
            nb = b * sl * d * dt.itemsize + b * sl * dt.itemsize + b * d * dt.itemsize
            sets = _sets(lambda: [r(b, sl, d, dt=dt), (torch.rand(b, sl, device=dev) > 0.3).to(dt),
                                  torch.empty(b, d, device=dev, dtype=dt)], nb)

            def torch_mean_pool(t):
                m = t[1].float()
                t[2].copy_((t[0].float() * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1))
            g = (b, triton.cdiv(d, 256))
            out.append((f"mean_pool {b}x{sl}x{d} {str(dt)[6:]}", (nb, 0), sets, torch_mean_pool,
                        _both_paths(small.mean_pool, g, lambda t, g=g, sl=sl, d=d: mean_pool_ref[g](
                            *t, sl, d, BT=32, BD=256)), 2))
    if "ssm_update" in only:
        # Mamba-2.8B's decode step (d_inner 5120, d_state 16), batches of 64 and 1; f32 state. torch: the update
        # written out (mamba_ssm's reference)
        for bsz, dim, n in ((64, 5120, 16), (1, 5120, 16)):
            nb = 2 * bsz * dim * n * 4 + dim * n * 4 + 4 * bsz * dim * 4
            sets = _sets(lambda: [torch.randn(bsz, dim, n, device=dev), torch.randn(bsz, dim, device=dev),
                                  torch.rand(bsz, dim, device=dev), -torch.rand(dim, n, device=dev),
                                  torch.randn(bsz, n, device=dev), torch.randn(bsz, n, device=dev),
                                  torch.randn(dim, device=dev), torch.empty(bsz, dim, n, device=dev),
                                  torch.empty(bsz, dim, device=dev)], nb)

            def torch_ssm(t):
                s2 = t[0] * torch.exp(t[2][..., None] * t[3]) + (t[2] * t[1])[..., None] * t[4][:, None, :]
                t[7].copy_(s2)
                t[8].copy_((s2 * t[5][:, None, :]).sum(-1) + t[6] * t[1])
            g = (bsz, triton.cdiv(dim, 64))
            out.append((f"ssm_update {bsz}x{dim}x{n} f32", (nb, 0), sets, torch_ssm,
                        _both_paths(small.ssm_update, g, lambda t, g=g, dim=dim: ssm_update_ref[g](
                            *t, dim, BD=64, N=16)), (7, 8)))
    if "group_norm" in only:
        # GroupNorm in a diffusion UNet (32 groups, NCHW): 512 channels at 64x64 (512 groups of 65536 elements),
        # 1280 at 16x16 (256 of 10240), and SD-XL's first block, 320 at 128x128 (64 groups of 163840: fewer
        # programs than SMs, this algorithm's limit in the twin too). torch: F.group_norm (its own kernels)
        for dt, (n, c, h, w, g) in itertools.product((torch.bfloat16, torch.float32), (
                (16, 512, 64, 64, 32), (8, 1280, 16, 16, 32), (2, 320, 128, 128, 32))):
            nb = 2 * n * c * h * w * dt.itemsize  # read (the second pass mostly from L2) and written once
            rows, cols = n * g, c // g * h * w
            sets = _sets(lambda: [r(n, c, h, w, dt=dt), r(c, dt=dt), r(c, dt=dt),
                                  torch.empty(n, c, h, w, device=dev, dtype=dt)], nb)
            flat = lambda t, rows=rows: (t[0].view(rows, -1), t[1], t[2], t[3].view(rows, -1))  # noqa: E731
            impls = _both_paths(small.group_norm, (rows,), lambda t, g=g, h=h, w=w, rows=rows, cols=cols, flat=flat:
                                  group_norm_ref[(rows,)](*flat(t), cols, g, h * w, 1e-5, BLOCK=4096), T=dt)
            # the tle launches take the groups' 2-D views and three scalars (the twin's lambda makes its own)
            impls = {k: (lambda t, f=f, flat=flat, g=g, h=h, w=w: f([*flat(t), g, h * w, 1e-5]))
                     if k != "triton_ref" else f for k, f in impls.items()}
            out.append((f"group_norm {n}x{c}x{h}x{w} G={g} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t, g=g: t[3].copy_(torch.nn.functional.group_norm(t[0], g, t[1], t[2], 1e-5)),
                        impls, 3))
    if "kv_cache_write" in only:
        # vLLM's reshape_and_cache: a prefill of 8192 tokens and a decode batch of 256, Llama-3 8B's 8 KV heads
        # of 128, into a paged cache of 8192 blocks of 16 slots (one cache, as in a server; the tokens' keys,
        # values and slots rotate). Checked on the slots written. torch: index_copy_ into the flattened cache
        hd, d, blocks, bs = 8, 128, 8192, 16
        kc = torch.zeros(blocks, bs, hd, d, device=dev, dtype=torch.bfloat16)
        vc = torch.zeros_like(kc)
        for t_n in (8192, 256):
            nb = 4 * t_n * hd * d * 2 + 8 * t_n
            sets = _sets(lambda: [r(t_n, hd, d, dt=torch.bfloat16), r(t_n, hd, d, dt=torch.bfloat16), kc, vc,
                                  torch.randperm(blocks * bs, device=dev)[:t_n]], nb)

            def torch_cache_write(t):
                t[2].view(-1, hd, d).index_copy_(0, t[4], t[0])
                t[3].view(-1, hd, d).index_copy_(0, t[4], t[1])
            written = tuple((o, lambda s_, o=o: s_[o].view(-1, hd, d)[s_[4]]) for o in (2, 3))
            out.append((f"kv_cache_write {t_n} tokens, {hd}x{d} bf16", (nb, 0), sets, torch_cache_write,
                        _both_paths(small.kv_cache_write, (t_n,),
                                    lambda t, t_n=t_n: kv_cache_write_ref[(t_n,)](*t, bs, H=hd, D=d)), written))
    if "vocab_softmax" in only:
        # logits over Llama-3's vocabulary (128256: not a multiple of the block, so the last tile is ragged)
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((1024, 128256), (4096, 32000))):
            nb = 3 * m * n * dt.itemsize  # read twice, written once
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(m, n, device=dev, dtype=dt)], nb)
            g = (m,)
            out.append((f"vocab_softmax {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: torch.ops.aten._softmax.out(t[0], -1, False, out=t[1]),
                        _both_paths(small.vocab_softmax, g,
                                    lambda t, g=g, m=m, n=n: vocab_softmax_ref[g](*t, m, n, BLOCK=2048)), 1))
    if "linear_nt" in only:
        # tle:tuned: the same kernel through the tuning database (docs/tuning.md), over tiles, warps and backend
        tuned = tle.compile(SMALL_TLE, tune={"linear_nt": {
            "BM": [64, 128], "BN": [128, 256], "BK": [32, 64], "num_warps": [4, 8], "backend": ["triton", "tileir"]}})
        tuned.linear_nt.tune_space.budget_s = 60
        for dt in (torch.float16, torch.bfloat16):
            for m, n, k in ((4096, 4096, 4096), (8192, 14336, 4096), (4000, 4000, 4000)):
                nb = (m * k + k * n + m * n) * dt.itemsize
                sets = _sets(lambda: [r(m, k, dt=dt), r(n, k, dt=dt), torch.empty(m, n, device=dev, dtype=dt)], nb)
                g = (triton.cdiv(m, 128), triton.cdiv(n, 256))
                impls = _both_paths(small.linear_nt, g, lambda t, g=g, m=m, n=n, k=k: linear_nt_ref[g](
                    *t, m, n, k, BM=128, BN=256, BK=64, num_warps=8, num_stages=3))
                impls["tle:tuned"] = lambda t: tuned.linear_nt[
                    lambda c: (triton.cdiv(c["M"], c["BM"]), triton.cdiv(c["N"], c["BN"]))](*t)
                out.append((f"linear_nt {m}x{n}x{k} {str(dt)[6:]}", (nb, 2 * m * n * k), sets,
                            lambda t: torch.matmul(t[0], t[1].t(), out=t[2]), impls, 2))
    if "bmm" in only:
        # tuned (f16): tiles, warps and the path through the tuning database, as a user would after the fixed
        # 128x128x64 tiles on 4 warps (Triton's usual first try) fell behind cuBLAS at K = 128; and Tile IR's
        # occupancy hint, since without one tileiras plans a single program per SM there (RESULTS.md, "User kernels
        # again"; the native path ignores the option, so the tuner drops those duplicates)
        bmm_tuned = tle.compile(SMALL_TLE, tune={"bmm": {
            "BM": [64, 128], "BN": [64, 128, 256], "BK": [32, 64, 128], "num_warps": [4, 8],
            "backend": ["triton", "tileir"], "occupancy": [None, 2]}})
        bmm_tuned.bmm.tune_space.budget_s = 40
        # the persistent form (examples/matmul_batched.tle, its default tiles, backend auto): about one program per SM
        batched = tle.compile(os.path.join(HERE, "..", "examples", "matmul_batched.tle")).matmul_batched
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for dt in (torch.float16, torch.bfloat16):
            for b, m, n, k in ((32, 1024, 1024, 1024), (8, 4096, 4096, 128)):
                nb = b * (m * k + k * n + m * n) * dt.itemsize
                sets = _sets(lambda: [r(b, m, k, dt=dt), r(b, k, n, dt=dt),
                                      torch.empty(b, m, n, device=dev, dtype=dt)], nb)
                g = (m // 128, n // 128, b)
                out.append((f"bmm {b}x{m}x{n}x{k} {str(dt)[6:]}", (nb, 2 * b * m * n * k), sets,
                            lambda t: torch.bmm(t[0], t[1], out=t[2]),
                            _both_paths(small.bmm, g, lambda t, g=g, m=m, n=n, k=k: bmm_ref[g](
                                *t, m, n, k, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)), 2))
                out[-1][4]["tle:persistent"] = lambda t, p=min(sms, b * (m // 128) * (n // 128)): batched[(p,)](*t)
                if dt == torch.float16:
                    out[-1][4]["tle:tuned"] = lambda t: bmm_tuned.bmm[
                        lambda d: (triton.cdiv(d["M"], d["BM"]), triton.cdiv(d["N"], d["BN"]), d["B"])](*t)
    if "add_rmsnorm" in only:
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((8192, 4096), (4096, 8192))):
            nb = 4 * m * n * dt.itemsize
            w = r(n, dt=dt)
            sets = _sets(lambda: [r(m, n, dt=dt), r(m, n, dt=dt), w, torch.empty(m, n, device=dev, dtype=dt),
                                  torch.empty(m, n, device=dev, dtype=dt)], nb)

            def torch_add_rmsnorm(t, n=n):
                torch.add(t[0], t[1], out=t[3])
                t[4].copy_(torch.nn.functional.rms_norm(t[3], (n,), t[2], 1e-6))
            impls = {"tle:triton": lambda t, m=m, n=n: small.add_rmsnorm[(m,)](*t, 1e-6, BLOCK=n, backend="triton"),
                     "tle:tileir": lambda t, m=m, n=n: small.add_rmsnorm[(m,)](*t, 1e-6, BLOCK=n, backend="tileir"),
                     "triton_ref": lambda t, m=m, n=n: add_rmsnorm_ref[(m,)](*t, n, 1e-6, BLOCK=n)}
            for occ in OCCUPANCY:
                impls[f"tle:tileir occ{occ}"] = lambda t, m=m, n=n, occ=occ: small.add_rmsnorm[(m,)](
                    *t, 1e-6, BLOCK=n, backend="tileir", occupancy=occ)
            out.append((f"add_rmsnorm {m}x{n} {str(dt)[6:]}", (nb, 0), sets, torch_add_rmsnorm, impls, 4))
    for case in [c for c in ("rope", "rope_pairs") if c in only]:
        # Llama-2 7B's attention shapes (32 heads of 128) over a prefill of 8192 tokens and a batch of 512 tokens.
        # rope rotates each head's two halves; rope_pairs GPT-J's interleaved pairs (split and join, against
        # tl.split and tl.join)
        for dt, (sq, h, d) in itertools.product((torch.bfloat16, torch.float32), ((8192, 32, 128), (512, 32, 128))):
            nb = 2 * sq * h * d * dt.itemsize + 2 * sq * d * 2
            ang = torch.arange(sq, device=dev)[:, None] * (10000.0 ** (-torch.arange(0, d, 2, device=dev) / d))
            cs, sn = ang.cos().contiguous(), ang.sin().contiguous()
            sets = _sets(lambda: [r(sq, h, d, dt=dt), cs, sn, torch.empty(sq, h, d, device=dev, dtype=dt)], nb)
            g = (sq, triton.cdiv(h, 8))

            def torch_rope(t, half=d // 2, pairs=case == "rope_pairs"):
                x, c, s = t[0].float(), t[1][:, None, :], t[2][:, None, :]
                if pairs:
                    x = x.unflatten(-1, (half, 2))
                    e, o = x[..., 0], x[..., 1]
                    t[3].copy_(torch.stack((e * c - o * s, e * s + o * c), -1).flatten(-2))
                else:
                    x1, x2 = x[..., :half], x[..., half:]
                    t[3].copy_(torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1))
            if case == "rope":
                impls = _both_paths(small.rope, g, lambda t, g=g, h=h, d=d: rope_ref[g](*t, h, BH=8, HALF=d // 2))
            else:
                impls = _both_paths(small.rope_pairs, g, lambda t, g=g, h=h, d=d: rope_pairs_ref[g](*t, h, BH=8, D=d))
            out.append((f"{case} {sq}x{h}x{d} {str(dt)[6:]}", (nb, 0), sets, torch_rope, impls, 3))
    if "cross_entropy" in only:
        # a training step's logits over Llama-3's vocabulary (ragged last tile) and Llama-2's; and 32768 tokens over
        # Llama-3's in bf16, 4.2e9 logits: past 2^31 elements, so tle's offsets into them are i64 (tle/abi.py
        # WideTensor), as the twin's are (its row index is cast to int64)
        shapes = [*itertools.product((torch.bfloat16, torch.float32), ((1024, 128256), (4096, 32000))),
                  (torch.bfloat16, (32768, 128256))]
        for dt, (m, v) in shapes:
            nb = m * v * dt.itemsize + 8 * m
            sets = _sets(lambda: [r(m, v, dt=dt), torch.randint(0, v, (m,), device=dev, dtype=torch.int32),
                                  torch.empty(m, device=dev)], nb)
            out.append((f"cross_entropy {m}x{v} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[2].copy_(torch.nn.functional.cross_entropy(t[0], t[1].long(), reduction="none")),
                        _both_paths(small.cross_entropy, (m,), lambda t, m=m, v=v: cross_entropy_ref[(m,)](
                            *t, v, BLOCK=4096)), 2))
    if "cross_entropy_bwd" in only:
        # its backward pass on the same logits, from the forward's log-sum-exp; torch: the same expression, unfused
        for dt, (m, v) in itertools.product((torch.bfloat16, torch.float32), ((1024, 128256), (4096, 32000))):
            nb = 2 * m * v * dt.itemsize + 12 * m

            def ce_bwd_set(m=m, v=v, dt=dt):
                x = r(m, v, dt=dt)
                return [x, torch.randint(0, v, (m,), device=dev, dtype=torch.int32),
                        torch.logsumexp(x.float(), -1), torch.rand(m, device=dev) / m, torch.empty_like(x)]

            def torch_ce_bwd(t, v=v):
                onehot = torch.nn.functional.one_hot(t[1].long(), v)
                return t[4].copy_((torch.exp(t[0].float() - t[2][:, None]) - onehot) * t[3][:, None])

            out.append((f"cross_entropy_bwd {m}x{v} {str(dt)[6:]}", (nb, 0), _sets(ce_bwd_set, nb), torch_ce_bwd,
                        _both_paths(small.cross_entropy_bwd, (m,), lambda t, m=m, v=v: cross_entropy_bwd_ref[(m,)](
                            *t, v, BLOCK=4096)), 4))
    if "linear_w8a8" in only:
        # int8 x int8 -> i32 on the tensor cores, dequantised per row and channel; torch: cuBLASLt's _int_mm, then
        # the scales (two kernels)
        for m, n, k in ((4096, 4096, 4096), (8192, 14336, 4096)):
            nb = m * k + n * k + 4 * (m + n) + 2 * m * n
            i8 = lambda *s: torch.randint(-128, 128, s, device=dev, dtype=torch.int8)  # noqa: E731
            sets = _sets(lambda: [i8(m, k), i8(n, k), torch.rand(m, device=dev) / 64, torch.rand(n, device=dev) / 64,
                                  torch.empty(m, n, device=dev, dtype=torch.bfloat16)], nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 128))

            def torch_w8a8(t):
                t[4].copy_(torch._int_mm(t[0], t[1].t()).float() * t[2][:, None] * t[3][None, :])
            out.append((f"linear_w8a8 {m}x{n}x{k} i8->bf16", (nb, 2 * m * n * k), sets, torch_w8a8,
                        _both_paths(small.linear_w8a8, g, lambda t, g=g, m=m, n=n, k=k: linear_scaled_ref[g](
                            *t, m, n, k, BM=128, BN=128, BK=128, ACC=tl.int32, num_warps=4, num_stages=3)), 4))
    if "linear_fp8" in only:
        # 8-bit float operands (e4m3) on the 8-bit tensor cores, scaled per row and channel; torch: _scaled_mm with
        # row-wise scales and fast accumulation (the tensor cores' own, as Triton's tl.dot and tle accumulate fp8)
        for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096)):
            nb = m * k + n * k + 4 * (m + n) + 2 * m * n
            f8 = lambda *s: (torch.randn(*s, device=dev) * 32).to(torch.float8_e4m3fn)  # noqa: E731
            sets = _sets(lambda: [f8(m, k), f8(n, k), torch.rand(m, device=dev) / 256 + 1e-3,
                                  torch.rand(n, device=dev) / 256 + 1e-3,
                                  torch.empty(m, n, device=dev, dtype=torch.bfloat16)], nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 256))

            def torch_fp8(t):
                t[4].copy_(torch._scaled_mm(t[0], t[1].t(), scale_a=t[2][:, None], scale_b=t[3][None, :],
                                            out_dtype=torch.bfloat16, use_fast_accum=True))
            out.append((f"linear_fp8 {m}x{n}x{k} e4m3->bf16", (nb, 2 * m * n * k), sets, torch_fp8,
                        _both_paths(fp8.linear_fp8, g, lambda t, g=g, m=m, n=n, k=k: linear_scaled_ref[g](
                            *t, m, n, k, BM=128, BN=256, BK=128, ACC=tl.float32, num_warps=8, num_stages=3)), 4))
    if "linear_fp8_block" in only:
        # 128x128 weight blocks and 1x128 activation blocks, each with its own f32 scale; torch: dequantise to bf16
        # (the scales expanded to the elements), then cuBLAS (what one does without a block-scaled 8-bit kernel)
        for m, n, k in ((4096, 4096, 4096), (8192, 14336, 4096)):
            kb = triton.cdiv(k, 128)
            nb = m * k + n * k + 4 * (m * kb + triton.cdiv(n, 128) * kb) + 2 * m * n
            f8 = lambda *s: (torch.randn(*s, device=dev) * 32).to(torch.float8_e4m3fn)  # noqa: E731
            sets = _sets(lambda: [f8(m, k), f8(n, k), torch.rand(m, kb, device=dev) / 256 + 1e-3,
                                  torch.rand(triton.cdiv(n, 128), kb, device=dev) / 256 + 1e-3,
                                  torch.empty(m, n, device=dev, dtype=torch.bfloat16)], nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 128))

            def torch_block(t, k=k):
                xs = t[2].repeat_interleave(128, dim=1)[:, :k]
                ws = t[3].repeat_interleave(128, dim=0)[:t[1].shape[0]].repeat_interleave(128, dim=1)[:, :k]
                t[4].copy_((t[0].to(torch.bfloat16) * xs.to(torch.bfloat16))
                           @ (t[1].to(torch.bfloat16) * ws.to(torch.bfloat16)).t())
            impls = _both_paths(small.linear_fp8_block, g, lambda t, g=g, m=m, n=n, k=k, kb=kb:
                                linear_fp8_block_ref[g](*t, m, n, k, kb, BM=128, BN=128, BK=128, num_warps=8,
                                                        num_stages=3))
            # At 128x128 tiles tileiras spills (224 bytes, CPU); at 64x128 it does not
            g64 = (triton.cdiv(m, 64), triton.cdiv(n, 128))
            impls["tle:tileir 64x128"] = lambda t, g=g64: small.linear_fp8_block[g](*t, BM=64, backend="tileir")
            out.append((f"linear_fp8_block {m}x{n}x{k} e4m3->bf16", (nb, 2 * m * n * k), sets, torch_block, impls, 4))
    if "moe_gemm" in only:
        # top-1 routing of `tokens` over 8 experts, uniformly at random; tokens sorted by expert, each group padded
        # to whole blocks of 64 with the id M (vLLM's moe_align_block_size); torch: one matmul per expert
        for tokens, n, k in ((8192, 14336, 4096), (8192, 4096, 14336), (256, 14336, 4096)):
            experts_n, bm = 8, 64
            route = torch.randint(0, experts_n, (tokens,), device=dev)
            groups, ids, blocks = [], [], []
            for e in range(experts_n):
                idx = (route == e).nonzero().flatten()
                groups.append((e, idx))
                nblk = triton.cdiv(idx.numel(), bm)
                ids.append(torch.cat((idx, torch.full((nblk * bm - idx.numel(),), tokens, device=dev))))
                blocks += [e] * nblk
            ids = torch.cat(ids).to(torch.int32)
            blocks = torch.tensor(blocks, device=dev, dtype=torch.int32)
            nb = 2 * (tokens * k + experts_n * n * k + tokens * n)
            sets = _sets(lambda: [r(tokens, k, dt=torch.bfloat16), ids, blocks,
                                  r(experts_n, n, k, dt=torch.bfloat16),
                                  torch.empty(tokens, n, device=dev, dtype=torch.bfloat16)], nb)
            g = (blocks.numel(), triton.cdiv(n, 128))

            def torch_moe(t, groups=groups):
                for e, idx in groups:
                    t[4][idx] = t[0][idx] @ t[3][e].t()
            out.append((f"moe_gemm {tokens} tokens, 8 experts, {n}x{k} bf16", (nb, 2 * tokens * n * k), sets,
                        torch_moe, _both_paths(small.moe_gemm, g, lambda t, g=g, m=tokens, n=n, k=k: moe_gemm_ref[g](
                            *t, m, n, k, BM=64, BN=128, BK=64, num_warps=4, num_stages=3)), 4))
    if "paged_attention" in only:
        # decode: one query token per sequence, Llama-style 32 heads of 128, KV cache blocks of 16 tokens in a
        # shuffled order; torch gathers each sequence's blocks into a contiguous cache, then calls SDPA with a mask
        for seqs, longest in ((32, 4096), (128, 1024)):
            heads, d, bs = 32, 128, 16
            lens = torch.randint(longest // 4, longest + 1, (seqs,), device=dev, dtype=torch.int32)
            maxb = triton.cdiv(longest, bs)
            nblocks = seqs * maxb
            table = torch.randperm(nblocks, device=dev).view(seqs, maxb).to(torch.int32)
            nb = 2 * (2 * int(lens.sum()) * heads * d + 2 * seqs * heads * d)
            sets = _sets(lambda: [r(seqs, heads, d, dt=torch.bfloat16), r(nblocks, bs, heads, d, dt=torch.bfloat16),
                                  r(nblocks, bs, heads, d, dt=torch.bfloat16), table, lens,
                                  torch.empty(seqs, heads, d, device=dev, dtype=torch.bfloat16)], nb)
            g = (seqs, heads)
            scale = 1 / math.sqrt(d)
            mask = (torch.arange(maxb * bs, device=dev)[None, :] < lens[:, None])[:, None, None, :]

            def torch_paged(t, seqs=seqs, maxb=maxb, mask=mask):
                k = t[1][t[3]].view(seqs, maxb * 16, 32, 128).transpose(1, 2)
                v = t[2][t[3]].view(seqs, maxb * 16, 32, 128).transpose(1, 2)
                sdpa = torch.nn.functional.scaled_dot_product_attention
                t[5].copy_(sdpa(t[0][:, :, None], k, v, attn_mask=mask)[:, :, 0])
            impls = {f"tle:{be}": lambda t, g=g, be=be, scale=scale: small.paged_attention[g](*t, scale, backend=be)
                     for be in ("triton", "tileir")}
            impls["triton_ref"] = lambda t, g=g, maxb=maxb, scale=scale: paged_attention_ref[g](
                *t, scale, 32, maxb, BS=16, D=128)
            # flash-decoding: each sequence split into partitions of 512 tokens, then merged (tle:split*, the twin
            # `triton split`); the partials are scratch shared by the input sets
            parts = triton.cdiv(maxb * bs, 512)
            pp = 1 << (parts - 1).bit_length()
            scratch = [torch.empty(seqs, heads, parts, device=dev), torch.empty(seqs, heads, parts, device=dev),
                       torch.empty(seqs, heads, parts, d, device=dev)]

            def tle_split(t, be, g=g, parts=parts, pp=pp, scale=scale, scratch=scratch):
                small.paged_attention_split[(*g, parts)](*t[:5], *scratch, scale, PART=512, backend=be)
                small.paged_attention_combine[g](*scratch, t[5], PP=pp, backend=be)

            def triton_split(t, g=g, maxb=maxb, parts=parts, pp=pp, scale=scale, scratch=scratch):
                paged_attention_split_ref[(*g, parts)](*t[:5], *scratch, scale, 32, maxb, parts, BS=16, D=128,
                                                       PART=512)
                paged_attention_combine_ref[g](*scratch, t[5], 32, parts, D=128, PP=pp)
            for be in ("triton", "tileir"):
                impls[f"tle:split {be}"] = lambda t, be=be, f=tle_split: f(t, be)
            impls["triton split"] = triton_split  # not a triton_ref: the ratio column compares the one-pass kernels
            out.append((f"paged_attention {seqs} seqs up to {longest} tokens, 32x128 heads bf16", (nb, 0), sets,
                        torch_paged, impls, 5))
    for name, tf32 in (("matmul_tf32", True), ("matmul_f32", False)):
        if name not in only:
            continue
        # torch with allow_tf32, or at its default (off: cuBLAS's f32 GEMM); the twin at Triton's default warps
        for m, n, k in ((4096, 4096, 4096), (4000, 4000, 4000)):
            nb = 4 * (m * k + k * n + m * n)
            sets = _sets(lambda: [r(m, k, dt=torch.float32), r(k, n, dt=torch.float32),
                                  torch.empty(m, n, device=dev)], nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 128))

            def torch_mm(t, tf32=tf32):
                before = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.matmul(t[0], t[1], out=t[2])
                torch.backends.cuda.matmul.allow_tf32 = before
            out.append((f"{name} {m}x{n}x{k}", (nb, 2 * m * n * k), sets, torch_mm,
                        _both_paths(small.matmul_tf32, g, lambda t, g=g, m=m, n=n, k=k, tf32=tf32: matmul_tf32_ref[g](
                            *t, m, n, k, BM=128, BN=128, BK=32, PRECISION="tf32" if tf32 else "ieee", num_warps=4,
                            num_stages=3), TF32=tf32), 2))
    if "matmul_unaligned" in only:
        # examples/matmul.tle (128x128x64, 4 warps) on rows TMA cannot read, and auto's choice: an odd K; K = 4100
        # (8-byte rows); the odd K in rows padded to 4104 (a view); x @ w.t() into an output of N = 4099 (only the
        # output unaligned). The reference is bench.py's, at the same tiles (its K masks; no wrap-around needed).
        mm = tle.compile(os.path.join(HERE, "..", "examples", "matmul.tle")).matmul
        for title, (m, n, k), make_a, make_b in (
                ("4096x4096x4099", (4096, 4096, 4099), lambda m, k: r(m, k, dt=torch.float16), None),
                ("4096x4096x4100", (4096, 4096, 4100), lambda m, k: r(m, k, dt=torch.float16), None),
                ("4096x4096x4099 in rows of 4104", (4096, 4096, 4099),
                 lambda m, k: r(m, 4104, dt=torch.float16)[:, :k], None),
                ("x @ w.t() 4096x4099x4096", (4096, 4099, 4096), lambda m, k: r(m, k, dt=torch.float16),
                 lambda k, n: r(n, k, dt=torch.float16).t())):
            nb = 2 * (m * k + k * n + m * n)
            make_b = make_b or (lambda k, n: r(k, n, dt=torch.float16))
            sets = _sets(lambda: [make_a(m, k), make_b(k, n), torch.empty(m, n, device=dev, dtype=torch.float16)],
                         nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 128))
            impls = _both_paths(mm, g, lambda t: (lambda kern, grid, a, kw: kern[grid](*a, **kw))(
                *triton_ref._prep_matmul(*t)))
            impls["tle:auto"] = lambda t, g=g: mm[g](*t)
            out.append((f"matmul_unaligned {title} f16", (nb, 2 * m * n * k), sets,
                        lambda t: torch.matmul(t[0], t[1], out=t[2]), impls, 2))
    if "softmax_bwd" in only:
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((8192, 4096), (16384, 1000))):
            nb = 3 * m * n * dt.itemsize
            sets = _sets(lambda: [torch.softmax(r(m, n, dt=torch.float32), -1).to(dt), r(m, n, dt=dt),
                                  torch.empty(m, n, device=dev, dtype=dt)], nb)
            block = triton.next_power_of_2(n)
            out.append((f"softmax_bwd {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t, dt=dt: t[2].copy_(torch._softmax_backward_data(t[1], t[0], -1, dt)),
                        _both_paths(small.softmax_bwd, (m,), lambda t, m=m, n=n, b=block: softmax_bwd_ref[(m,)](
                            *t, n, BLOCK=b), BLOCK=block), 2))
    if "greedy" in only:
        # argmax over Llama-3's and Llama-2's vocabularies (greedy decoding of a batch of rows), and a serving
        # step's batches of 1 and 64 rows (grids under one wave)
        for dt, (m, v) in itertools.product((torch.bfloat16, torch.float32),
                                            ((1024, 128256), (4096, 32000), (1, 128256), (64, 128256))):
            nb = m * v * dt.itemsize + 4 * m
            sets = _sets(lambda: [r(m, v, dt=dt), torch.empty(m, device=dev, dtype=torch.int32)], nb)
            out.append((f"greedy {m}x{v} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.argmax(t[0], -1)),
                        _both_paths(small.greedy, (m,), lambda t, m=m, v=v: greedy_ref[(m,)](*t, v, BLOCK=4096)), 1))
    if "linear_w4a16" in only:
        # 4-bit weights, decode batches: against cuBLAS on the same weight dequantised to bf16 once (4x the bytes)
        for m, (n, k) in itertools.product((1, 16), ((14336, 4096), (4096, 14336))):
            h = k // 2
            nb = h * n + 2 * (m * k + m * n + n)

            def w4_set(m=m, n=n, k=k, h=h):
                x = r(m, k, dt=torch.bfloat16)
                q = torch.randint(-128, 128, (h, n), device=dev, dtype=torch.int8)
                sc = (torch.rand(n, device=dev) / 64).to(torch.bfloat16)
                w = torch.cat(((q & 15) - 8, ((q >> 4) & 15) - 8)).to(torch.bfloat16) * sc
                return [x[:, :h], x[:, h:], q, sc, torch.empty(m, n, device=dev, dtype=torch.bfloat16), w, x]
            sets = _sets(w4_set, nb)
            g = (triton.cdiv(m, 16), triton.cdiv(n, 128))
            out.append((f"linear_w4a16 {m}x{n}x{k} int4->bf16", (nb, 2 * m * n * k), sets,
                        lambda t: torch.matmul(t[6], t[5], out=t[4]),
                        {"tle:triton": lambda t, g=g: small.linear_w4a16[g](*t[:5], backend="triton"),
                         "tle:tileir": lambda t, g=g: small.linear_w4a16[g](*t[:5], backend="tileir"),
                         "triton_ref": lambda t, g=g, m=m, n=n, h=h: linear_w4a16_ref[g](
                             t[6], t[2], t[3], t[4], m, n, h, BM=16, BN=128, BK=128)}, 4))
    if "dropout" in only:
        # Training-time dropout without a stored mask; torch's F.dropout draws its own mask (and writes it)
        dropout = tle.compile(os.path.join(HERE, "..", "examples", "dropout.tle"))
        for dt, n in itertools.product((torch.float32, torch.bfloat16), (1 << 20, 1 << 24, 1 << 27)):
            nb, p, seed = 2 * n * dt.itemsize, 0.1, 1234567
            sets = _sets(lambda: [r(n, dt=dt), torch.empty(n, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(n, 1024),)

            def want(t, n=n, g=g):  # the same mask as tl.rand's
                dropout_ref[g](t[0], t[1], n, p, seed, BLOCK=1024)
                return [t[1].float().clone()]
            out.append((f"dropout {n} {str(dt)[6:]} p={p}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.dropout(t[0], p, training=True)),
                        _both_paths(dropout.dropout, g, lambda t, n=n, g=g: dropout_ref[g](
                            *t, n, p, seed, BLOCK=1024), seed=seed, p=p, BLOCK=1024), 1, want))

            def want4(t, n=n, g=g):
                dropout4_ref[g](t[0], t[1], n, p, seed, BLOCK=1024)
                return [t[1].float().clone()]
            out.append((f"dropout4 {n} {str(dt)[6:]} p={p}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.dropout(t[0], p, training=True)),
                        _both_paths(small.dropout4, g, lambda t, n=n, g=g: dropout4_ref[g](
                            *t, n, p, seed, BLOCK=1024), seed=seed, p=p, BLOCK=1024), 1, want4))
    if "topk" in only:
        # MoE routing: 8 of 128 or 256 experts per token; rows sorted whole
        for t, e in ((16384, 128), (65536, 256)):
            nb = t * e * 4 + t * 8 * 4
            sets = _sets(lambda: [r(t, e, dt=torch.float32), torch.empty(t, 8, device=dev)], nb)
            g = (triton.cdiv(t, 16),)
            out.append((f"router_topk {t}x{e} k=8 f32", (nb, 0), sets,
                        lambda t_: t_[1].copy_(torch.topk(t_[0], 8, dim=-1).values),
                        _both_paths(small.router_topk, g, lambda t_, t=t, e=e, g=g: router_topk_ref[g](
                            *t_, t, E=e, BM=16, K=8), BM=16, E=e, K=8), 1))
        for t, e in ((65536, 256),):
            nb = t * e * 4 + t * 8 * 8
            sets = _sets(lambda: [r(t, e, dt=torch.float32), torch.empty(t, 8, device=dev),
                                  torch.empty(t, 8, device=dev, dtype=torch.int32)], nb)
            g = (triton.cdiv(t, 16),)

            def torch_ids(t_):
                top = torch.topk(t_[0], 8, dim=-1)
                t_[1].copy_(top.values)
                t_[2].copy_(top.indices)
            impls = _both_paths(small.router_topk_ids, g, lambda t_, t=t, e=e, g=g: router_topk_ids_ref[g](
                *t_, t, E=e, BM=16, K=8), BM=16, E=e, K=8)
            del impls["tle:tileir"]  # a second network: about 20 s of tileiras (auto goes native)
            # The ids are checked through the values they pick: 16.8M randn floats hold ties, whose order
            # torch.topk leaves open (tle and the twin both take the lower id; the twenty-third session's run had
            # rows where torch did not). Each id must pick exactly the value reported beside it (a bool tile, so
            # output_error compares it exactly), and the values are checked against torch's as output 1.
            picked = (2, lambda s_: s_[0].gather(1, s_[2].long().clamp(0, s_[0].shape[1] - 1)) == s_[1])
            out.append((f"router_topk_ids {t}x{e} k=8 f32", (nb, 0), sets, torch_ids, impls, (1, picked)))
        # whole rows sorted, 4 a program at 1024, one at 8192 and 16384 (where the default 4 and 8 warps hold 64
        # values a thread and ptxas spilled the network on the CPU machine: --warps 8,16 times the alternatives)
        for t, n, bm in ((16384, 1024, 4), (4096, 8192, 1), (2048, 16384, 1)):
            nb = 2 * t * n * 4
            sets = _sets(lambda: [r(t, n, dt=torch.float32), torch.empty(t, n, device=dev)], nb)
            g = (triton.cdiv(t, bm),)
            impls = _both_paths(small.sort_rows, g, lambda t_, t=t, n=n, g=g, bm=bm: sort_rows_ref[g](
                *t_, t, N=n, BM=bm), BM=bm, N=n)
            del impls["tle:tileir"]  # tileiras takes about a minute on a 1024-wide sort (auto goes native)
            out.append((f"sort_rows {t}x{n} f32", (nb, 0), sets,
                        lambda t_: t_[1].copy_(torch.sort(t_[0], dim=-1).values), impls, 1))
    if "layernorm_bwd" in only:
        # dx, then dw and db through per-program partial sums (16 rows a program) and a column-sum kernel
        for dt, (m, n) in itertools.product((torch.bfloat16, torch.float32), ((8192, 4096), (16384, 1024))):
            rows, block = 16, triton.next_power_of_2(n)
            gp = triton.cdiv(m, rows)
            nb = 3 * m * n * dt.itemsize + 4 * gp * n * 4

            def ln_set(m=m, n=n, dt=dt, gp=gp):
                x, w, b = r(m, n, dt=dt), r(n, dt=dt), r(n, dt=dt)
                _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
                f32 = lambda *s: torch.empty(*s, device=dev)  # noqa: E731
                return [x, r(m, n, dt=dt), w, mean.view(m).float(), rstd.view(m).float(),
                        torch.empty(m, n, device=dev, dtype=dt), f32(gp, n), f32(gp, n), f32(n), f32(n), b]
            sets = _sets(ln_set, nb)

            def torch_ln_bwd(t, n=n):
                dx, dw, db = torch.ops.aten.native_layer_norm_backward(
                    t[1], t[0], [n], t[3].view(-1, 1), t[4].view(-1, 1), t[2], t[10], [True, True, True])
                t[5].copy_(dx), t[8].copy_(dw), t[9].copy_(db)

            def tle_ln_bwd(t, backend, occupancy=None, gp=gp, n=n, block=block):
                small.layernorm_bwd[(gp,)](*t[:8], ROWS=16, BLOCK=block, backend=backend, occupancy=occupancy)
                small.layernorm_bwd_reduce[(triton.cdiv(n, 64),)](*t[6:10], BG=32, BN=64, backend=backend)

            def ref_ln_bwd(t, gp=gp, m=m, n=n, block=block):
                layernorm_bwd_ref[(gp,)](*t[:8], m, n, ROWS=16, BLOCK=block)
                layernorm_bwd_reduce_ref[(triton.cdiv(n, 64),)](*t[6:10], gp, n, BG=32, BN=64)
            impls = {"tle:triton": lambda t, f=tle_ln_bwd: f(t, "triton"),
                     "tle:tileir": lambda t, f=tle_ln_bwd: f(t, "tileir"), "triton_ref": ref_ln_bwd}
            for occ in OCCUPANCY:  # the first kernel's hint
                impls[f"tle:tileir occ{occ}"] = lambda t, f=tle_ln_bwd, occ=occ: f(t, "tileir", occ)
            out.append((f"layernorm_bwd {m}x{n} {str(dt)[6:]}", (nb, 0), sets, torch_ln_bwd, impls, (5, 8, 9)))
    if "adam" in only:
        # an optimizer step over 2^24 and 2^27 f32 parameters (reads p, g, m, v; writes p, m, v)
        lr, b1, b2, eps, step = 1e-3, 0.9, 0.999, 1e-8, 10
        c1, c2 = 1 / (1 - b1 ** step), 1 / (1 - b2 ** step)
        for n in (1 << 24, 1 << 27):
            nb = 7 * 4 * n

            def adam_set(n=n):
                p, g, m = r(n, dt=torch.float32), r(n, dt=torch.float32), r(n, dt=torch.float32)
                v = torch.rand(n, device=dev)
                return [p, g, m, v, p.clone(), m.clone(), v.clone()]  # the last three: the step's inputs
            sets = _sets(adam_set, nb)

            def restore(t):  # every run starts from the same p, m, v (so that any run's result can be checked)
                t[0].copy_(t[4]), t[2].copy_(t[5]), t[3].copy_(t[6])

            def torch_adam(t, n=n):
                m = t[5] * b1 + (1 - b1) * t[1]
                v = t[6] * b2 + (1 - b2) * t[1] * t[1]
                t[2].copy_(m), t[3].copy_(v), t[0].copy_(t[4] - lr * c1 * m / ((v * c2).sqrt() + eps))

            def want(t):
                restore(t)
                torch_adam(t)
                return [t[0].float().clone(), t[2].float().clone(), t[3].float().clone()]

            def torch_fused(t, step_t=torch.tensor(float(step), device=dev)):  # torch.optim.Adam(fused=True)'s
                torch._fused_adam_([t[0]], [t[1]], [t[2]], [t[3]], [], [step_t], lr=lr, beta1=b1, beta2=b2,
                                   weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)
            g = (triton.cdiv(n, 1024),)
            scal = (lr, b1, b2, eps, c1, c2)
            # the restoring copies are outside the kernel; the timed runs skip them (a step on its own output)
            impls = {"tle:triton": lambda t, g=g: small.adam[g](*t[:4], *scal, BLOCK=1024, backend="triton"),
                     "tle:tileir": lambda t, g=g: small.adam[g](*t[:4], *scal, BLOCK=1024, backend="tileir"),
                     "triton_ref": lambda t, g=g, n=n: adam_ref[g](*t[:4], *scal, n, BLOCK=1024)}
            checked = {k: (lambda t, f=f: (restore(t), f(t))) for k, f in impls.items()}
            out.append((f"adam {n} f32", (nb, 0), sets, torch_fused, checked, (0, 2, 3), want, impls))
    if "quant_rows" in only:
        # int8 and FP8 (e4m3, saturating) rows with a per-row scale, the per-token quantisation before a W8A8 or
        # FP8 product (compared dequantised: q * s against x, the error under one step)
        for (q, qmax), dt, (m, n) in itertools.product(((torch.int8, 127.0), (torch.float8_e4m3fn, 448.0)),
                                                       (torch.bfloat16, torch.float32), ((8192, 4096), (16384, 1024))):
            nb = m * n * (dt.itemsize + 1) + 4 * m
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(m, n, device=dev, dtype=q),
                                  torch.empty(m, device=dev)], nb)

            def torch_quant(t, q=q, qmax=qmax):
                amax = t[0].float().abs().amax(1).clamp_min(1e-12)
                t[1].copy_((t[0].float() * (qmax / amax)[:, None]).to(q)), t[2].copy_(amax / qmax)
            if q == torch.int8:
                deq = (1, lambda t: t[1].float() * t[2][:, None])
            else:
                # each value dequantised within half an e4m3 step of x (|x| / 16, or half the subnormal step),
                # as 1 where it is: a scale an ulp or two off (GPU division, torch's reciprocal) moves a value at
                # a rounding midpoint by a whole step, 7% of the row's largest, so the values are not compared
                deq = (1, lambda t: ((t[1].float() * t[2][:, None] - t[0].float()).abs() <=
                                     t[0].float().abs() * (1.001 / 16) + t[2][:, None] * 2.0 ** -10).float())
            qname = "" if q == torch.int8 else " to e4m3"
            out.append((f"quant_rows {m}x{n} {str(dt)[6:]}{qname}", (nb, 0), sets, torch_quant,
                        _both_paths(small.quant_rows, (m,),
                                    lambda t, m=m, n=n, qmax=qmax: quant_rows_ref[(m,)](*t, n, BLOCK=n, QMAX=qmax),
                                    BLOCK=n, QMAX=qmax), (deq,)))
    if "histogram" in only:
        # torch.bincount's counts of 2^24 and 2^27 values in [0, B); out zeroed first by every implementation.
        # `relaxed`: the twin with relaxed atomics (tle's and Triton's default are acquire-release). `histogram()`:
        # examples of the per-program form (histogram_local) and its twin (tl.histogram), 4 tiles of 4096 a program
        for n, b in ((1 << 24, 256), (1 << 27, 256), (1 << 24, 4096), (1 << 27, 4096)):
            nb = 4 * n
            sets = _sets(lambda: [torch.randint(0, b, (n,), device=dev, dtype=torch.int32),
                                  torch.empty(b, device=dev, dtype=torch.int32)], nb)
            g, gl = (triton.cdiv(n, 4096),), (triton.cdiv(n, 4 * 4096),)
            impls = _both_paths(small.histogram, g,
                                lambda t, n=n, g=g: histogram_ref[g](*t, n, BLOCK=4096, SEM="acq_rel"))
            impls["triton_ref relaxed"] = lambda t, n=n, g=g: histogram_ref[g](*t, n, BLOCK=4096, SEM="relaxed")
            impls["tle:triton histogram()"] = lambda t, b=b, gl=gl: small.histogram_local[gl](*t, B=b)
            impls["triton_ref histogram()"] = lambda t, n=n, b=b, gl=gl: histogram_local_ref[gl](
                *t, n, B=b, BLOCK=4096, CHUNKS=4)
            out.append((f"histogram {n} in {b} bins", (nb, 0), sets,
                        lambda t, b=b: t[1].copy_(torch.bincount(t[0], minlength=b)),
                        {k: _zeroed(f) for k, f in impls.items()}, 1))
    if "vector_sum" in only:
        # a sum with one atomic per program; every implementation zeroes out[0] first (a memset torch's sum skips).
        # `BLOCK 16384`: a quarter of the atomics on the one address
        for n in (1 << 24, 1 << 28):
            nb = 4 * n
            sets = _sets(lambda: [r(n, dt=torch.float32), torch.empty(1, device=dev)], nb)
            g, g4 = (triton.cdiv(n, 4096),), (triton.cdiv(n, 16384),)
            impls = _both_paths(small.vector_sum, g, lambda t, n=n, g=g: vector_sum_ref[g](*t, n, BLOCK=4096))
            impls["tle:triton BLOCK 16384"] = lambda t, g4=g4: small.vector_sum[g4](*t, BLOCK=16384, backend="triton")
            impls["triton_ref BLOCK 16384"] = lambda t, n=n, g4=g4: vector_sum_ref[g4](*t, n, BLOCK=16384)
            out.append((f"vector_sum {n} f32", (nb, 0), sets, lambda t: torch.sum(t[0], 0, out=t[1][0]),
                        {k: _zeroed(f) for k, f in impls.items()}, 1))
    if "conv2d" in only:
        # ResNet-50's 3x3 convolutions (and a 1x1 and a stride-2 one) on a batch of 32 in f16, channels last; torch:
        # F.conv2d on the same NHWC memory (cuDNN, with cudnn.benchmark on), whose own output replaces y in the set
        torch.backends.cudnn.benchmark = True
        # tle:tuned: tiles, warps and the path through the tuning database, as a user would where 128-pixel tiles
        # leave SMs idle (7x7x512: 52 programs)
        conv_tuned = tle.compile(SMALL_TLE, tune={"conv2d": {
            "BM": [64, 128], "BN": [64, 128], "BK": [32, 64], "num_warps": [4, 8], "backend": ["triton", "tileir"]}})
        conv_tuned.conv2d.tune_space.budget_s = 30
        for nbt, hw, c, f, kk, stride in ((32, 56, 64, 64, 3, 1), (32, 28, 128, 128, 3, 1), (32, 14, 256, 256, 3, 1),
                                          (32, 7, 512, 512, 3, 1), (32, 56, 256, 64, 1, 1), (32, 56, 128, 128, 3, 2)):
            pad = kk // 2
            p_ = q_ = (hw + 2 * pad - kk) // stride + 1
            pix = nbt * p_ * q_
            nb = 2 * (nbt * hw * hw * c + kk * kk * c * f + pix * f)
            bn = min(f, 128)
            sets = _sets(lambda: (lambda x, wt: [x, wt.permute(2, 3, 1, 0).reshape(kk * kk, c, f).contiguous(),
                                                 torch.empty(pix, f, device=dev, dtype=torch.float16), wt])(
                r(nbt, hw, hw, c, dt=torch.float16), r(f, c, kk, kk, dt=torch.float16) / math.sqrt(kk * kk * c)), nb)
            g = (triton.cdiv(pix, 128), triton.cdiv(f, bn))
            consts = dict(BN=bn, KH=kk, KW=kk, STRIDE=stride, PAD=pad)

            def torch_conv(t, stride=stride, pad=pad, pix=pix, f=f):
                t[2] = torch.nn.functional.conv2d(t[0].permute(0, 3, 1, 2), t[3], stride=stride, padding=pad).permute(
                    0, 2, 3, 1).reshape(pix, f)
            impls = {"tle:triton": lambda t, g=g, c_=consts, p_=p_: small.conv2d[g](*t[:3], p_, p_, **c_,
                                                                                   backend="triton"),
                     "tle:tileir": lambda t, g=g, c_=consts, p_=p_: small.conv2d[g](*t[:3], p_, p_, **c_,
                                                                                   backend="tileir"),
                     "tle:auto": lambda t, g=g, c_=consts, p_=p_: small.conv2d[g](*t[:3], p_, p_, **c_),
                     "triton_ref": lambda t, g=g, a=(nbt, hw, hw, c, f, p_, p_), c_=consts: conv2d_ref[g](
                         *t[:3], *a, **c_, BM=128, BK=64, num_warps=4, num_stages=3),
                     "tle:tuned": lambda t, p_=p_, c_={k: v for k, v in consts.items() if k != "BN"}:
                         conv_tuned.conv2d[lambda d: (triton.cdiv(d["PIX"], d["BM"]), triton.cdiv(d["F"], d["BN"]))](
                             *t[:3], p_, p_, **c_)}
            out.append((f"conv2d {nbt}x{hw}x{hw}x{c} -> {f}, {kk}x{kk} stride {stride} f16",
                        (nb, 2 * pix * f * kk * kk * c), sets, torch_conv, impls, 2))
    if "gate_up_silu" in only:
        # Llama-3-8B's MLP input side (K = 4096, N = 14336) from decode-sized to prefill-sized batches; torch: the two
        # nn.Linear products, silu and the product (four kernels, cuBLAS for the GEMMs)
        gu_tuned = tle.compile(SMALL_TLE, tune={"gate_up_silu": {
            "BM": [64, 128], "BN": [64, 128], "BK": [32, 64], "num_warps": [4, 8], "backend": ["triton", "tileir"]}})
        gu_tuned.gate_up_silu.tune_space.budget_s = 60
        for m, n, k in ((128, 14336, 4096), (1024, 14336, 4096), (4096, 14336, 4096), (4000, 11008, 4096)):
            dt = torch.bfloat16
            nb = (m * k + 2 * k * n + m * n) * dt.itemsize
            sets = _sets(lambda: [r(m, k, dt=dt), r(n, k, dt=dt) / 8, r(n, k, dt=dt) / 8,
                                  torch.empty(m, n, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(m, 128), triton.cdiv(n, 128))
            impls = _both_paths(small.gate_up_silu, g, lambda t, g=g, m=m, n=n, k=k: gate_up_silu_ref[g](
                *t, m, n, k, BM=128, BN=128, BK=64, num_warps=8, num_stages=3))
            impls["tle:tuned"] = lambda t: gu_tuned.gate_up_silu[
                lambda c: (triton.cdiv(c["M"], c["BM"]), triton.cdiv(c["N"], c["BN"]))](*t)
            out.append((f"gate_up_silu {m}x{n}x{k} bf16", (nb, 4 * m * n * k), sets,
                        lambda t: torch.mul(torch.nn.functional.silu(torch.nn.functional.linear(t[0], t[1])),
                                            torch.nn.functional.linear(t[0], t[2]), out=t[3]), impls, 3))
    if "linear_wgrad" in only:
        # The weight gradients of Llama-3-8B's projections over a training step's tokens: q_proj's (4096x4096) at
        # 8192 and 16384 tokens, up_proj's (14336x4096) and down_proj's (4096x14336) at 8192, and a ragged 4000;
        # torch: dY^T @ X (cuBLAS on the transposed view)
        wg_tuned = tle.compile(SMALL_TLE, tune={"linear_wgrad": {
            "BN": [64, 128, 256], "BK": [64, 128, 256], "BT": [32, 64], "num_warps": [4, 8],
            "backend": ["triton", "tileir"]}})
        wg_tuned.linear_wgrad.tune_space.budget_s = 45
        for m, n, k in ((8192, 4096, 4096), (16384, 4096, 4096), (8192, 14336, 4096), (8192, 4096, 14336),
                        (4000, 4096, 4096)):
            dt = torch.bfloat16
            nb = (m * n + m * k + n * k) * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), r(m, k, dt=dt) / 8, torch.empty(n, k, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(n, 128), triton.cdiv(k, 128))
            impls = _both_paths(small.linear_wgrad, g, lambda t, g=g, m=m, n=n, k=k: linear_wgrad_ref[g](
                *t, m, n, k, BN=128, BK=128, BT=64, num_warps=8, num_stages=3))
            impls["tle:tuned"] = lambda t: wg_tuned.linear_wgrad[
                lambda c: (triton.cdiv(c["N"], c["BN"]), triton.cdiv(c["K"], c["BK"]))](*t)
            out.append((f"linear_wgrad {m}x{n}x{k} bf16", (nb, 2 * m * n * k), sets,
                        lambda t: torch.mm(t[0].t(), t[1], out=t[2]), impls, 2))
    if "chunk_linear_attn" in only:
        # causal linear attention's forward (flash-linear-attention's fused_chunk algorithm, chunks of 64), 8
        # sequences of 4096 tokens x 8 heads flattened to 64, head dims 64 and 128; bf16, fresh randn inputs and
        # scale 1 / sqrt(D) (an output near t then has a magnitude near sqrt(t): the error against torch, measured
        # on the largest, is about 4e-3). torch: the O(L^2) form a user writes, ((q @ k^T * scale).tril()) @ v
        for bh, ln, d in ((64, 4096, 64), (64, 4096, 128)):
            nb = 4 * bh * ln * d * 2
            sets = _sets(lambda: [r(bh, ln, d, dt=torch.bfloat16) for _ in range(3)]
                         + [torch.empty(bh, ln, d, device=dev, dtype=torch.bfloat16)], nb)
            g = (bh,)
            flops = bh * (ln // 64) * (4 * 64 * 64 * d + 4 * 64 * d * d)
            out.append((f"chunk_linear_attn {bh}x{ln}x{d} chunks of 64 bf16", (nb, flops), sets,
                        lambda t, d=d: torch.matmul((t[0] @ t[1].transpose(1, 2) * d ** -0.5).tril(), t[2],
                                                    out=t[3]),
                        _both_paths(small.chunk_linear_attn, g, lambda t, g=g, ln=ln, d=d: chunk_linear_attn_ref[g](
                            *t, ln, d ** -0.5, C=64, D=d), scale=d ** -0.5, C=64, D=d), 3))
    if "qk_norm_rope" in only:
        # Qwen3's q_norm + rotary embedding over a prefill of 8192 tokens: 32 query heads of 128 (BH 32), 8 key
        # heads (BH 8), and a batch of 512 tokens' queries; bf16, eps 1e-6. torch: F.rms_norm, then the halves
        for sq, h in ((8192, 32), (8192, 8), (512, 32)):
            d = 128
            nb = 2 * sq * h * d * 2 + 2 * sq * d * 2
            ang = torch.arange(sq, device=dev)[:, None] * (10000.0 ** (-torch.arange(0, d, 2, device=dev) / d))
            cs, sn = ang.cos().contiguous(), ang.sin().contiguous()
            sets = _sets(lambda: [r(sq, h, d, dt=torch.bfloat16), 1.0 + 0.1 * r(d, dt=torch.bfloat16), cs, sn,
                                  torch.empty(sq, h, d, device=dev, dtype=torch.bfloat16)], nb)
            g = (sq, 1)

            def torch_qk_norm_rope(t, half=d // 2):
                x = torch.nn.functional.rms_norm(t[0].float(), (2 * half,), t[1].float(), 1e-6)
                c, s = t[2][:, None, :], t[3][:, None, :]
                x1, x2 = x[..., :half], x[..., half:]
                t[4].copy_(torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1))
            out.append((f"qk_norm_rope {sq}x{h}x{d} bf16", (nb, 0), sets, torch_qk_norm_rope,
                        _both_paths(small.qk_norm_rope, g, lambda t, g=g, h=h: qk_norm_rope_ref[g](
                            *t, h, 1e-6, BH=h, HALF=64), eps=1e-6, BH=h), 4))
    if "varlen_attention" in only:
        # FlashAttention's varlen (packed "thd") causal forward, 32 heads of 128, bf16: 16 sequences of 512 to 4096
        # tokens (about 36K in all) and 64 of 64 to 1024; tiles of 64. torch: SDPA with is_causal=True sequence by
        # sequence, a Python loop over the batch (what a user without a varlen kernel writes); where this torch has
        # torch.nn.attention.varlen.varlen_attn (its FlashAttention varlen kernel), that too, as `torch varlen_attn`
        sdpa = torch.nn.functional.scaled_dot_product_attention
        try:
            from torch.nn.attention.varlen import varlen_attn
        except ImportError:
            varlen_attn = None
        for seqs, lo, hi in ((16, 512, 4096), (64, 64, 1024)):
            heads, d = 32, 128
            lens = torch.randint(lo, hi + 1, (seqs,), generator=torch.Generator().manual_seed(0))
            cu, total = _row_starts(lens, dev)
            starts = [0] + torch.cumsum(lens, 0).tolist()
            nb = 4 * total * heads * d * 2
            sets = _sets(lambda: [r(total, heads, d, dt=torch.bfloat16) for _ in range(3)]
                         + [cu, torch.empty(total, heads, d, device=dev, dtype=torch.bfloat16)], nb)
            g = (triton.cdiv(int(lens.max()), 64), seqs, heads)
            scale = d ** -0.5

            def torch_varlen(t, starts=starts):
                for s, e in zip(starts[:-1], starts[1:]):
                    q, k, v = (x[s:e].transpose(0, 1)[None] for x in t[:3])  # [1, H, len, D] views
                    t[4][s:e].copy_(sdpa(q, k, v, is_causal=True)[0].transpose(0, 1))
            impls = _both_paths(small.varlen_attention, g, lambda t, g=g, heads=heads, d=d, scale=scale:
                                varlen_attention_ref[g](*t, scale, heads, BM=64, BN=64, D=d), scale=scale, D=d)
            for path in ("triton", "tileir"):  # the form written before slices: rows gathered and scattered
                impls[f"tle gather:{path}"] = lambda t, g=g, path=path, scale=scale, d=d: \
                    small.varlen_attention_gather[g](*t, scale, D=d, backend=path)
            if varlen_attn is not None:
                impls["torch varlen_attn"] = lambda t, mx=int(lens.max()), scale=scale: t[4].copy_(varlen_attn(
                    t[0], t[1], t[2], t[3], t[3], mx, mx, scale=scale, window_size=(-1, 0)))
            flops = sum(2 * n * n * d * heads for n in lens.tolist())  # 4 n^2 D per head, halved by the mask
            out.append((f"varlen_attention {seqs} seqs of {lo}-{hi} ({total} tokens), 32x128 heads causal bf16",
                        (nb, flops), sets, torch_varlen, impls, 4))
    if "col_cumsum" in only:
        # prefix sums down the columns: 4096 steps of 16384 features and 16384 of 4096, f32 and bf16 (accumulated
        # in f32); tiles of 64 x 32, one program per 32 columns (512 and 128 programs). torch: torch.cumsum(x, 0)
        for dt, (m, n) in itertools.product((torch.float32, torch.bfloat16), ((4096, 16384), (16384, 4096))):
            nb = 2 * m * n * dt.itemsize
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(m, n, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(n, 32),)
            out.append((f"col_cumsum {m}x{n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.cumsum(t[0], 0, dtype=torch.float32)),
                        _both_paths(small.col_cumsum, g, lambda t, g=g, m=m, n=n: col_cumsum_ref[g](
                            *t, m, n, BT=64, BD=32)), 1))
    if "linear_recurrence" in only:
        # A gated linear RNN's recurrence along time, [B, L, D] with decays in (0, 1): examples/linear_recurrence.tle
        # (a scan with a combine fn, 64 x 64 tiles) against its Triton twin (tl.associative_scan, the carry from its
        # last row).
        # torch has no such op: its time loop (L small kernels a step) is what a user without a kernel runs.
        lr = tle.compile(os.path.join(HERE, "..", "examples", "linear_recurrence.tle")).linear_recurrence
        # tle:tuned: the tiles (untimed when written), warps and path through the tuning database
        lr_tuned = tle.compile(os.path.join(HERE, "..", "examples", "linear_recurrence.tle"), tune={
            "linear_recurrence": {"BT": [16, 32, 64], "BD": [16, 32, 64], "num_warps": [2, 4, 8],
                                  "backend": ["triton", "tileir"]}}).linear_recurrence
        lr_tuned.tune_space.budget_s = 25
        for dt, (b, n, d) in itertools.product((torch.float32, torch.bfloat16), ((8, 1024, 2048), (32, 512, 1024))):
            nb = 3 * b * n * d * dt.itemsize
            sets = _sets(lambda: [torch.sigmoid(r(b, n, d, dt=torch.float32)).to(dt), r(b, n, d, dt=dt),
                                  torch.empty(b, n, d, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(d, 64), b)  # the example's default tiles, 64 x 64, and the twin's

            def torch_recurrence(t):
                state = torch.zeros_like(t[0][:, 0], dtype=torch.float32)
                for i in range(t[0].shape[1]):
                    state = t[0][:, i].float() * state + t[1][:, i].float()
                    t[2][:, i] = state.to(t[2].dtype)
            impls = _both_paths(lr, g, lambda t, g=g, n=n, d=d: linear_recurrence_ref[g](*t, n, d, BT=64, BD=64))
            title, after = f"linear_recurrence {b}x{n}x{d} {str(dt)[6:]}", ()
            if dt == torch.bfloat16:  # tuned once per shape: 2 x 25 s at most; the choice printed after the case
                impls["tle:tuned"] = lambda t: lr_tuned[lambda m: (triton.cdiv(m["D"], m["BD"]), m["B"])](*t)
                after = (None, impls, _tuned_config(lr_tuned, title))
            out.append((title, (nb, 0), sets, torch_recurrence, impls, 2, *after))
    if "selective_scan" in only:
        # Mamba's selective scan forward (mamba-130m's inner width 1536 and state 16; 2.8b's 5120), f32 and bf16, dt
        # through softplus and A negative as Mamba keeps them. torch: mamba_ssm's reference loop over time steps
        ss_tuned = tle.compile(SMALL_TLE, tune={"selective_scan": {
            "BT": [8, 16, 32], "BD": [8, 16, 32], "num_warps": [2, 4, 8], "backend": ["triton", "tileir"]}})
        ss_tuned.selective_scan.tune_space.budget_s = 25
        for dt_, (b, n, d) in itertools.product((torch.float32, torch.bfloat16), ((4, 1024, 1536), (1, 2048, 5120))):
            nb = (3 * b * n * d + 2 * b * n * 16) * dt_.itemsize
            sets = _sets(lambda: [r(b, n, d, dt=dt_),
                                  torch.nn.functional.softplus(r(b, n, d, dt=torch.float32)).to(dt_),
                                  -torch.rand(d, 16, device=dev) - 0.5, r(b, n, 16, dt=dt_), r(b, n, 16, dt=dt_),
                                  r(d, dt=torch.float32), torch.empty(b, n, d, device=dev, dtype=dt_)], nb)
            g = (triton.cdiv(d, 16), b)

            def torch_selective_scan(t):
                u, delta, a, bs, cs, ds, y = t
                h = torch.zeros(u.shape[0], u.shape[2], a.shape[1], device=u.device)
                for i in range(u.shape[1]):
                    h = torch.exp(delta[:, i, :, None].float() * a) * h + \
                        (delta[:, i].float() * u[:, i].float())[:, :, None] * bs[:, i, None, :].float()
                    y[:, i] = ((h * cs[:, i, None, :].float()).sum(2) + ds * u[:, i].float()).to(y.dtype)
            impls = _both_paths(small.selective_scan, g, lambda t, g=g, n=n, d=d: selective_scan_ref[g](
                *t, n, d, BT=16, BD=16, N=16))
            title, after = f"selective_scan {b}x{n}x{d} state 16 {str(dt_)[6:]}", ()
            if dt_ == torch.bfloat16:  # tuned once per shape: 2 x 25 s at most; the choice printed after the case
                impls["tle:tuned"] = lambda t: ss_tuned.selective_scan[
                    lambda m: (triton.cdiv(m["D"], m["BD"]), m["B"])](*t)
                after = (None, impls, _tuned_config(ss_tuned.selective_scan, title))
            out.append((title, (nb, 0), sets, torch_selective_scan, impls, 6, *after))
    if "cast_transpose" in only:
        # FP8 training's cast + transpose + amax of an activation or weight, bf16 -> e4m3, scale 1 (randn stays far
        # below e4m3's 448): 8192x4096 and 16384x14336 (Llama-3 8B's MLP). amax is an atomic max: zeroed for the
        # checked launches; the timed ones max into it again (the same values: it does not change). torch: the
        # scaled cast, a transposed copy of it and abs().max()
        for m, n in ((8192, 4096), (16384, 14336)):
            nb = m * n * (2 + 1 + 1)
            f8 = torch.float8_e4m3fn
            sets = _sets(lambda: [r(m, n, dt=torch.bfloat16), torch.ones(1, device=dev),
                                  torch.empty(m, n, device=dev, dtype=f8), torch.empty(n, m, device=dev, dtype=f8),
                                  torch.zeros(1, device=dev)], nb)
            g = (triton.cdiv(m, 64), triton.cdiv(n, 64))

            def torch_cast_transpose(t):
                t[2].copy_((t[0].float() * t[1]).to(torch.float8_e4m3fn))
                t[3].copy_(t[2].t())
                t[4].copy_(t[0].abs().max().float())
            impls = _both_paths(small.cast_transpose, g, lambda t, g=g, m=m, n=n: cast_transpose_ref[g](
                *t, m, n, BM=64, BN=64))
            checked = {k: _zeroed(f, 4) for k, f in impls.items()}
            out.append((f"cast_transpose {m}x{n} bf16 -> e4m3", (nb, 0), sets, torch_cast_transpose, checked,
                        (2, 3, 4), None, impls))
    if "gelu_tanh" in only:
        # torch.nn.functional.gelu(x, approximate="tanh") over 64M and 256M elements, bf16 and f32: the tanh by
        # libdevice (tle, triton_ref) and by the SFU through inline PTX (tle asm, triton asm). Memory-bound, so the
        # question is whether libdevice's longer tanhf costs anything at all at HBM speed.
        for dt, n in itertools.product((torch.bfloat16, torch.float32), (1 << 26, 1 << 28)):
            nb = 2 * n * dt.itemsize
            sets = _sets(lambda: [r(n, dt=dt), torch.empty(n, device=dev, dtype=dt)], nb)
            g = (triton.cdiv(n, 2048),)
            impls = _both_paths(small.gelu_tanh, g, lambda t, g=g, n=n: gelu_tanh_ref[g](*t, n, B=2048, FAST=False))
            # the asm kernel takes the native path only (Tile IR cannot carry PTX)
            impls["tle asm:triton"] = lambda t, g=g: small.gelu_tanh_asm[g](*t, backend="triton")
            impls["triton asm"] = lambda t, g=g, n=n: gelu_tanh_ref[g](*t, n, B=2048, FAST=True)
            out.append((f"gelu_tanh {n} {str(dt)[6:]}", (nb, 0), sets,
                        lambda t: t[1].copy_(torch.nn.functional.gelu(t[0], approximate="tanh")), impls, 1))
    if "welford" in only:
        # Each row's mean and biased variance in f32, the whole row in one tile (BM rows a program: 4 of 1024, else
        # 1): what Welford's reduce with a combine fn costs now that both GPU paths scan it and take the last element,
        # against the two-pass way (tle two_pass) and against the twins (Triton's unordered tl.reduce of the same fn,
        # and `triton two_pass`, not a triton_ref: the ratio column compares the Welford kernels).
        # torch: torch.var_mean(x.float(), dim=1, correction=0)
        for dt, (m, n) in itertools.product((torch.float32, torch.bfloat16),
                                            ((16384, 1024), (4096, 4096), (2048, 8192))):
            bn = triton.next_power_of_2(n)
            bm = max(1, 4096 // bn)
            nb = m * n * dt.itemsize + 2 * m * 4
            sets = _sets(lambda: [r(m, n, dt=dt), torch.empty(m, device=dev), torch.empty(m, device=dev)], nb)
            g = (triton.cdiv(m, bm),)

            def torch_moments(t):
                var, mean = torch.var_mean(t[0].float(), dim=1, correction=0)
                t[1].copy_(mean)
                t[2].copy_(var)
            impls = _both_paths(small.welford_moments, g, lambda t, g=g, m=m, n=n, bm=bm, bn=bn: welford_moments_ref[g](
                *t, m, n, BM=bm, BN=bn), BM=bm, BN=bn)
            for path in ("triton", "tileir"):  # C: the reduce says its fn commutes, a tree as tl.reduce's
                impls[f"tle commutative:{path}"] = lambda t, g=g, bm=bm, bn=bn, path=path: small.welford_moments[g](
                    *t, BM=bm, BN=bn, C=True, backend=path)
                impls[f"tle two_pass:{path}"] = lambda t, g=g, bm=bm, bn=bn, path=path: small.two_pass_moments[g](
                    *t, BM=bm, BN=bn, backend=path)
            impls["triton two_pass"] = lambda t, g=g, m=m, n=n, bm=bm, bn=bn: two_pass_moments_ref[g](
                *t, m, n, BM=bm, BN=bn)
            out.append((f"welford {m}x{n} {str(dt)[6:]}", (nb, 0), sets, torch_moments, impls, (1, 2)))
    return out


def _tuned_config(kernel, title: str):
    """A case's `after` (see cases()): the configuration the tuning database holds for the tuned kernel's launch on
    a set, in one line (read only: tle.tuning.lookup, the bucket's stored row)."""
    def show(t):
        row = tle.tuning.lookup(kernel, *t)
        if row is None:
            return f"  {title} tle:tuned: no stored configuration"
        default = f", default {row['default_time_s'] * 1e6:.1f} us" if row.get("default_time_s") else ""
        return (f"  {title} tle:tuned chose " + ",".join(f"{k}={v}" for k, v in row["config"].items())
                + f" ({row['time_s'] * 1e6:.1f} us when tuned{default})")
    return show


def output_error(got: list, wants: list) -> float:
    """The worst error of a run's outputs against torch's (f32 copies): max |got - want| / max |want| for floats,
    0 or inf for integers (indices must be torch's exactly), inf where a NaN is left (an output not written)."""
    errs = [((g.float() - w).abs().max() / w.abs().max()).item() if g.is_floating_point()
            else (0.0 if torch.equal(g.float(), w) else math.inf) for g, w in zip(got, wants)]
    return math.inf if any(math.isnan(e) for e in errs) else max(errs)


# Every case, in the order they run
DEFAULT_ONLY = ("attention,attention_train,transpose,colsum,bias_gelu,linear_relu,embedding,"
                "embedding_bwd,vocab_softmax,"
                "linear_nt,bmm,add_rmsnorm,rope,rope_pairs,cross_entropy,cross_entropy_bwd,"
                "linear_w8a8,linear_fp8,"
                "linear_fp8_block,moe_gemm,paged_attention,"
                "matmul_tf32,matmul_f32,matmul_unaligned,softmax_bwd,greedy,linear_w4a16,"
                "layernorm_bwd,dropout,"
                "topk,adam,quant_rows,histogram,vector_sum,conv2d,gate_up_silu,linear_wgrad,"
                "row_cumsum,group_norm,kv_cache_write,gemv,mean_pool,ssm_update,causal_conv1d,embedding_bag,"
                "dwconv3x3,heads_first,router_top1,spmv_csr,lora,maxpool2x2,upsample_nearest2x,upsample_bilinear2x,"
                "row_max,chunk_linear_attn,qk_norm_rope,varlen_attention,col_cumsum,cast_transpose,"
                "linear_recurrence,selective_scan,welford,gelu_tanh")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=DEFAULT_ONLY)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--occupancy", default="",
                    help="comma-separated Tile IR occupancy hints (programs per SM) to time as extra columns, "
                         "e.g. 4 or 2,4 (kernels launched through _both_paths)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""),
                    help="also append each case's line to DIR/user_kernels.txt as it is measured (default: $OUT "
                         "where set, as on the device machine, whose reply keeps only the output's tail)")
    ap.add_argument("--warps", default="",
                    help="comma-separated num_warps to time the native path on as extra columns, e.g. 1,2,8 (kernels "
                         "launched through _both_paths; the plain tle:triton column has the default)")
    args = ap.parse_args()
    OCCUPANCY[:] = [int(x) for x in args.occupancy.split(",") if x.strip()]
    WARPS[:] = [int(x) for x in args.warps.split(",") if x.strip()]
    dev = "cuda"
    lines = []
    log = os.path.join(args.out, "user_kernels.txt") if args.out else None
    for title, (nbytes, flops), sets, base, impls, oi, *expected in cases(dev, args.only.split(",")):
        # The outputs checked: a set's index, or (index, what to compare of the set) where the raw output may
        # rightly differ from torch's; each named output is filled with NaN (-1) before a run, so one left unwritten
        # fails.
        outs = [o if isinstance(o, tuple) else (o, lambda s_, o=o: s_[o]) for o in (oi if isinstance(oi, tuple)
                                                                                      else (oi,))]
        base(sets[0])
        torch.cuda.synchronize()
        # what the outputs must be: torch's, or where torch computes something else (dropout's mask), the case's own
        wants = expected[0](sets[0]) if expected and expected[0] else [view(sets[0]).float().clone()
                                                                          for _, view in outs]
        runs = {"torch": lambda i, base=base, sets=sets: base(sets[i])}
        timed_impls = expected[1] if len(expected) > 1 else impls  # a case may check one launch, time another
        after = expected[2] if len(expected) > 2 else None  # e.g. the configuration a tuned kernel chose
        notes = []
        for name, fn in impls.items():
            try:
                for o, _ in outs:
                    sets[0][o].fill_(float("nan") if sets[0][o].is_floating_point() else -1)
                took = fn(sets[0])
                torch.cuda.synchronize()
                err = output_error([view(sets[0]) for _, view in outs], wants)
                if not err <= 2e-2:
                    notes.append(f"{name} wrong ({err:.2e})")
                    continue
                if name == AUTO:
                    notes.append(f"auto took {took}")
                    continue
                runs[name] = lambda i, fn=timed_impls[name], sets=sets: fn(sets[i])
            except Exception as exc:  # noqa: BLE001
                notes.append(f"{name} failed: {bench.first_line(exc)}")
        res = {n: [] for n in runs}
        for r in range(args.rounds):
            for n in bench.rotated(list(runs), r):
                res[n].append(bench.time_events(runs[n], len(sets), 20, 60)["us"])
        med = {n: statistics.median(v) for n, v in res.items()}
        ref = min((med[n] for n in med if n.startswith("triton_ref")), default=None)
        lines.append(f"{title}: " + "  ".join(
            f"{n} {med[n]:.1f}" + (f" ({flops / med[n] / 1e6:.0f}T)" if flops else f" ({nbytes / med[n] / 1e3:.0f}G)")
            for n in sorted(med, key=med.get)) + (f"  | best ref / tle:triton {ref / med['tle:triton']:.3f}"
                                                  if ref and "tle:triton" in med else "")
            + ("  [" + "; ".join(notes) + "]" if notes else ""))
        if after is not None:
            try:
                lines[-1] += "\n" + after(sets[0])
            except Exception as exc:  # noqa: BLE001
                lines[-1] += f"\n  {title}: after the case: {bench.first_line(exc)}"
        print(lines[-1], flush=True)
        if log:
            with open(log, "a") as f:
                f.write(lines[-1] + "\n")
        del sets
    print("\n".join(["", "summary (us, fastest first):"] + lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
