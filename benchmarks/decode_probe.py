#!/usr/bin/env python3
"""Which decode-matmul algorithm gets within reach of the weight-read floor? (issue 5, decode target)

Hand-written Triton variants of C = A @ B for M <= 32 on a 4096x4096 weight, timed like bench.py (bench.time_events,
weights rotated out of L2) beside cuBLAS and the fastest read-only kernel of benchmarks/read_floor.py:
  dot   : tensor-core tiles BM x BK @ BK x BN (what examples/matmul_splitk.tle does)
  fma   : M = 1 only, no tensor cores: acc[BK, BN] += a[k] * B[k, n], summed over BK at the end
and two ways to add up the SPLIT partial tiles of C:
  part  : each program stores its partial tile, counts itself in; the last to arrive sums the SPLIT partials
  atom  : each program atomically adds its partial tile into an f32 workspace, counts itself in; the last to arrive
          reads the sum, writes C and zeroes the workspace tile (no memset between launches)
The atomic adds are either relaxed (`red`) with one acq_rel counter after them, or acq_rel each (tle's rule).

    python benchmarks/decode_probe.py [--m 1,16,32] [--deadline-s 240] [--timer graph] [--no-fma]
"""
from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import time

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import read_floor  # noqa: E402


@triton.jit
def splitk_slice(K, BK: tl.constexpr, SPLIT: tl.constexpr):
    """(pn, s, pm, first, end) of a split-K program on the grid (N tiles, SPLIT, M tiles): its tile of C and the
    K tiles [first, end) of its slice, SPLIT near-equal runs of BK-wide tiles (examples/matmul_splitk.tle's)."""
    tiles = tl.cdiv(K, BK)
    per = tl.cdiv(tiles, SPLIT)
    s = tl.program_id(1)
    return tl.program_id(0), s, tl.program_id(2), s * per, tl.minimum((s + 1) * per, tiles)


@triton.jit
def decode_mm(a_ptr, b_ptr, c_ptr, ws_ptr, count_ptr, M, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
              FMA: tl.constexpr, ATOM: tl.constexpr, SEM: tl.constexpr):
    pn, s, pm, first, end = splitk_slice(K, BK, SPLIT)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if FMA:
        acc2 = tl.zeros((BK, BN), dtype=tl.float32)
        for k in range(first, end):
            kk = k * BK + rk
            bt = tl.load(b_ptr + kk[:, None] * N + rn[None, :])
            xv = tl.load(a_ptr + kk)
            acc2 += xv.to(tl.float32)[:, None] * bt.to(tl.float32)
        acc = tl.sum(acc2, axis=0)  # 1-D: M = 1
        cm = rn < N
        coffs = rn
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(first, end):
            kk = k * BK + rk
            at = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=rm[:, None] < M, other=0.0)
            bt = tl.load(b_ptr + kk[:, None] * N + rn[None, :])
            acc = tl.dot(at, bt, acc)
        cm = rm[:, None] < M
        coffs = rm[:, None] * N + rn[None, :]
    if SPLIT == 1:
        tl.store(c_ptr + coffs, acc.to(c_ptr.dtype.element_ty), mask=cm)
    else:
        t = pm * tl.num_programs(0) + pn
        if ATOM:
            tl.atomic_add(ws_ptr + coffs, acc, mask=cm, sem=SEM)
        else:
            tl.store(ws_ptr + s * M * N + coffs, acc, mask=cm)
        tl.debug_barrier()  # every thread's partial stores / adds come before the (one-thread) release below
        old = tl.atomic_add(count_ptr + t, 1, sem="acq_rel")
        if old == SPLIT - 1:
            if ATOM:
                total = tl.load(ws_ptr + coffs, mask=cm, other=0.0, cache_modifier=".cg")
                tl.store(ws_ptr + coffs, tl.zeros_like(total), mask=cm)
            else:
                total = tl.zeros_like(acc)
                for j in range(SPLIT):
                    total += tl.load(ws_ptr + j * M * N + coffs, mask=cm, other=0.0, cache_modifier=".cg")
            tl.store(c_ptr + coffs, total.to(c_ptr.dtype.element_ty), mask=cm)
            tl.store(count_ptr + t, 0)


def configs(m):
    """The variants for M, in a fixed shuffled order (a deadline then samples the whole space)."""
    out = list(_configs(m))
    random.Random(m).shuffle(out)
    return out


def _configs(m):
    bm = 1 if m == 1 else max(16, triton.next_power_of_2(m))
    for fma in ((True, False) if m == 1 else (False,)):
        for bn, bk, split, w, st in itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (1, 2, 4, 8, 16, 32),
                                                     (4, 8), (3, 4, 6)):
            progs = 4096 // bn * split
            if not 128 <= progs <= 1100 or 4096 // bk < 2 * split or bk * bn > 16384 or bk * bn < 2048:
                continue
            if (bk * bn * 2) * st > 160 << 10:
                continue
            for atom, sem in (((False, "relaxed"),) if split == 1 else
                              ((False, "relaxed"), (True, "relaxed"), (True, "acq_rel"))):
                yield dict(BM=16 if (m == 1 and not fma) else bm, BN=bn, BK=bk, SPLIT=split, FMA=fma, ATOM=atom,
                           SEM=sem, num_warps=w, num_stages=st)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--m", default="1,16,32")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--deadline-s", type=float, default=240)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--timer", choices=("events", "graph"), default="events",
                   help="bench.time_events (events around single launches) or bench.time_graph (graph replays)")
    p.add_argument("--no-fma", action="store_true", help="tensor-core tiles only (M = 1)")
    args = p.parse_args()
    t0 = time.perf_counter()
    dev, dt = "cuda", getattr(torch, args.dtype)
    k = n = args.n
    timer = (lambda run, nsets: bench.TIMERS[args.timer](run, nsets, 5, 30)["us"])
    nsets = 8
    ws_b = [torch.randn(k, n, device=dev).to(dt) for _ in range(nsets)]
    out = torch.empty(1 << 20, device=dev, dtype=torch.float32)
    floor = timer(lambda i: read_floor.read_tiles[(n // 128, 16)](ws_b[i], out, k, n, BK=64, BN=128, SPLIT=16,
                                                                   num_warps=8, num_stages=3), nsets)
    ms = [int(x) for x in args.m.split(",")]
    per_m = max(20.0, (args.deadline_s - (time.perf_counter() - t0)) / len(ms))
    for m in ms:
        t_m = time.perf_counter()
        xs = [torch.randn(m, k, device=dev).to(dt) for _ in range(nsets)]
        c = torch.empty(m, n, device=dev, dtype=dt)
        cublas = timer(lambda i: torch.matmul(xs[i], ws_b[i]), nsets)
        ref = (xs[0].float() @ ws_b[0].float())
        part = torch.zeros(32 * m * n, device=dev, dtype=torch.float32)
        count = torch.zeros(4096, device=dev, dtype=torch.int32)
        rows, bad = [], 0
        for cfg in configs(m):
            if args.no_fma and cfg["FMA"]:
                continue
            if time.perf_counter() - t_m > per_m:
                break
            grid = (n // cfg["BN"], cfg["SPLIT"], triton.cdiv(m, max(1, cfg["BM"])))

            def run(i, cfg=cfg, grid=grid):
                decode_mm[grid](xs[i], ws_b[i], c, part, count, m, n, k, **cfg)
            try:
                c.fill_(float("nan"))
                part.zero_()  # a 'part' variant leaves partials where an 'atom' one expects zeros
                run(0)
                run(0)  # twice: the workspace and counters must have been left clean
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                if not err < 2e-2:
                    bad += 1
                    continue
                rows.append((timer(run, nsets), cfg))
            except Exception as exc:
                print(f"  failed {cfg}: {bench.first_line(exc)}")
        rows.sort(key=lambda r: r[0])
        print(f"\nM={m} K=N={n} {args.dtype}: cuBLAS {cublas:.2f} us (1.2x needs <= {cublas / 1.2:.2f}); "
              f"read floor {floor:.2f} us; {len(rows)} timed, {bad} wrong")
        for us, cfg in rows[:args.top]:
            tag = ("fma" if cfg["FMA"] else "dot") + (" atom-" + cfg["SEM"] if cfg["ATOM"] else " part")
            print(f"  {us:7.2f} us  x{cublas / us:5.2f}  {tag:18s} BM={cfg['BM']} BN={cfg['BN']} BK={cfg['BK']} "
                  f"SPLIT={cfg['SPLIT']} w{cfg['num_warps']} s{cfg['num_stages']}")
        for tag in ("part", "atom-relaxed", "atom-acq_rel"):
            best = [r for r in rows if (("atom-" + r[1]["SEM"]) if r[1]["ATOM"] else "part") == tag]
            if best:
                print(f"  best {tag}: {best[0][0]:.2f} us")
    print(f"elapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
