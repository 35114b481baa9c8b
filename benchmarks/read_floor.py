#!/usr/bin/env python3
"""How fast can one kernel read a decode matmul's weight, in the bench's harness? (issue 5, decode target)

The bench's decode floor (triton_ref.weight_read) is one read kernel at one configuration. This sweeps read-only
kernels over the decode weights (4096x4096 and 4096x14336 bf16, rotated so the weight is never in L2) and timed
exactly as bench.py times a case (bench.time_events: a spin kernel, then events around one launch), to see whether
that floor is a property of the GPU or of that one kernel. Also times an empty launch (the harness's fixed cost),
torch's sum over the weight and cuBLAS at M = 1 and 16.

    python benchmarks/read_floor.py [--top 8]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import triton_ref  # noqa: E402


@triton.jit
def read_unrolled(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """triton_ref.weight_read_kernel's blocks (ITERS consecutive blocks per program, a runtime loop), unrolled: every
    load of the program is issued before the first add."""
    base = tl.program_id(0) * BLOCK * ITERS
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))


@triton.jit
def read_persistent(x_ptr, out_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """A fixed grid striding over the tensor, UNROLL blocks per step."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK * UNROLL
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for base in range(pid * BLOCK * UNROLL, n, step):
        for i in tl.static_range(UNROLL):
            offs = base + i * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


@triton.jit
def read_tiles(x_ptr, out_ptr, K, N, BK: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr):
    """The decode kernel's access: program (pn, s) reads BK x BN tiles of a K x N weight down its K slice."""
    pn = tl.program_id(0)
    s = tl.program_id(1)
    tiles = tl.cdiv(K, BK)
    per = tl.cdiv(tiles, SPLIT)
    rk = tl.arange(0, BK)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BK, BN), dtype=tl.float32)
    for k in range(s * per, tl.minimum((s + 1) * per, tiles)):
        acc += tl.load(x_ptr + (k * BK + rk)[:, None] * N + rn[None, :]).to(tl.float32)
    tl.store(out_ptr + pn * SPLIT + s, tl.sum(acc))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--top", type=int, default=8)
    args = p.parse_args()
    dev = "cuda"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(1 << 20, device=dev, dtype=torch.float32)
    timer = (lambda run, nsets: bench.time_events(run, nsets, 10, 60)["us"])
    print(f"empty kernel, 1 program: {timer(lambda i: triton_ref.empty_kernel[(1,)](out), 1):.2f} us; "
          f"{sms} programs: {timer(lambda i: triton_ref.empty_kernel[(sms,)](out), 1):.2f} us")
    for k, n in ((4096, 4096), (4096, 14336)):
        nbytes = k * n * 2
        nsets = max(2, -(-(240 << 20) // nbytes))
        ws = [torch.randn(k, n, device=dev).to(torch.bfloat16) for _ in range(nsets)]
        xs = [torch.randn(16, k, device=dev).to(torch.bfloat16) for _ in range(nsets)]
        numel = k * n
        rows = []

        def add(name, run):
            try:
                us = timer(run, nsets)
            except Exception as exc:  # a configuration Triton refuses: report, go on
                print(f"  {name}: failed: {bench.first_line(exc)}")
                return
            rows.append((us, name))

        add("triton_ref.weight_read (bench floor)", lambda i: triton_ref.weight_read(ws[i], out))
        for block in (1024, 2048, 4096, 8192):
            for iters in (1, 2, 4, 8, 16):
                progs = triton.cdiv(numel, block * iters)
                if progs > (1 << 20) or progs < sms // 2:
                    continue
                for warps in (4, 8):
                    for kern, tag in ((triton_ref.weight_read_kernel, "loop"), (read_unrolled, "unrolled")):
                        if tag == "unrolled" and iters > 8:
                            continue
                        add(f"{tag} BLOCK={block} ITERS={iters} w{warps}",
                            lambda i, kern=kern, b=block, it=iters, w=warps, g=progs:
                            kern[(g,)](ws[i], out, numel, BLOCK=b, ITERS=it, num_warps=w))
        for block in (1024, 2048, 4096):
            for unroll in (1, 2, 4):
                for per_sm in (1, 2, 4):
                    for warps in (4, 8):
                        g = sms * per_sm
                        add(f"persistent BLOCK={block} UNROLL={unroll} grid={per_sm}x{sms} w{warps}",
                            lambda i, b=block, u=unroll, g=g, w=warps:
                            read_persistent[(g,)](ws[i], out, numel, BLOCK=b, UNROLL=u, num_warps=w))
        for bk, bn in ((64, 64), (128, 64), (64, 128), (128, 128), (256, 64), (32, 256)):
            for split in (1, 2, 4, 8, 16):
                g = (triton.cdiv(n, bn), split)
                if not sms <= g[0] * split <= 8 * sms or triton.cdiv(k, bk) < 2 * split:
                    continue
                for warps in (4, 8):
                    for stages in (3, 4):
                        add(f"tiles BK={bk} BN={bn} SPLIT={split} w{warps} s{stages}",
                            lambda i, bk=bk, bn=bn, sp=split, g=g, w=warps, st=stages:
                            read_tiles[g](ws[i], out, k, n, BK=bk, BN=bn, SPLIT=sp, num_warps=w, num_stages=st))
        add("torch w.sum(dtype=f32)", lambda i: ws[i].sum(dtype=torch.float32))
        add("torch (cuBLAS) 1 x K @ W", lambda i: torch.matmul(xs[i][:1], ws[i]))
        add("torch (cuBLAS) 16 x K @ W", lambda i: torch.matmul(xs[i], ws[i]))
        rows.sort()
        print(f"\nweight {k}x{n} bf16 ({nbytes / 1e6:.1f} MB, {nsets} copies rotated): fastest {args.top}, and the "
              f"reference rows")
        for rank, (us, name) in enumerate(rows):
            if rank < args.top or "bench floor" in name or "torch" in name:
                print(f"  {rank + 1:4d}  {us:8.2f} us  {nbytes / us / 1e3:7.0f} GB/s  {name}")


if __name__ == "__main__":
    main()
