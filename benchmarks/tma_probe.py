#!/usr/bin/env python3
"""Do TMA loads (Triton tensor descriptors) beat pointer loads for tle's matmuls? (issue 5, matmul and decode)

Hand-written Triton, timed like bench.py (bench.time_events, inputs rotated out of L2, implementations in a rotating
order over rounds), beside cuBLAS:
  ptr   : grouped-order tiles, pointer loads (what tle's native path emits today, and triton_ref.matmul)
  tma   : the same program, its A and B tiles read through device-side tensor descriptors (TMA on sm_90)
  tmap  : tma, persistent: one program per SM walks the tiles (Triton's tutorial 09 layout)
and for decode shapes (M <= 128) the split-K partial-tile kernel, with B through pointers or a descriptor.

    python benchmarks/tma_probe.py [--sizes 4096,8192] [--decode] [--rounds 3] [--tle [--tle-only]]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import decode_probe  # noqa: E402


@triton.jit
def _tile_ids(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    width = GROUP_M * num_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pm = first_m + ((pid % width) % size_m)
    pn = (pid % width) // size_m
    return pm, pn


@triton.jit
def _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, pm, pn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C's tile (pm, pn) through pointer tiles, masked on every axis."""
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_ptr(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           GROUP_M: tl.constexpr):
    pm, pn = _tile_ids(tl.program_id(0), M, N, BM, BN, GROUP_M)
    _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, pm, pn, BM, BN, BK)


@triton.jit
def mm_tma(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           GROUP_M: tl.constexpr, TMA_STORE: tl.constexpr):
    pm, pn = _tile_ids(tl.program_id(0), M, N, BM, BN, GROUP_M)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pm * BM, k * BK])
        b = b_desc.load([k * BK, pn * BN])
        acc = tl.dot(a, b, acc)
    if TMA_STORE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        c_desc.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))
    else:
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WS):
        pm, pn = _tile_ids(t, M, N, BM, BN, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([pm * BM, k * BK]), b_desc.load([k * BK, pn * BN]), acc)
        c_desc.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def mm_ptr_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr):
    tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=FLATTEN):
        pm, pn = _tile_ids(t, M, N, BM, BN, GROUP_M)
        _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, pm, pn, BM, BN, BK)


@triton.jit
def splitk_part(a_ptr, b_ptr, part_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                SPLIT: tl.constexpr, TMA: tl.constexpr):
    pn, s, pm, first, end = decode_probe.splitk_slice(K, BK, SPLIT)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if TMA:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
        for k in range(first, end):
            acc = tl.dot(a_desc.load([pm * BM, k * BK]), b_desc.load([k * BK, pn * BN]), acc)
    else:
        for k in range(first, end):
            kk = k * BK + rk
            a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
    tl.store(part_ptr + s * M * N + rm[:, None] * N + rn[None, :], acc, mask=rm[:, None] < M)


def _alloc(size: int, align: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def square_variants(s, nsms, few=False):
    """The hand-written variants; few: only 128x256x64 w8 s3 (pointers, TMA persistent, flattened or not)."""
    out = []
    shapes = ((128, 256, 64, 8, 3),) if few else ((128, 256, 64, 8, 3), (128, 256, 32, 8, 4), (128, 128, 64, 8, 4),
                                                  (128, 128, 64, 4, 4), (128, 256, 64, 8, 2))
    for bm, bn, bk, w, st in shapes:
        cfg = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st)
        tag = f"{bm}x{bn}x{bk} w{w} s{st}"
        if st == 3:
            out.append(("ptr " + tag, mm_ptr, cfg, None))
        for fl in (False, True):
            if not few:
                out.append((f"ptrp{'/fl' if fl else ''} " + tag, mm_ptr_persistent,
                            {**cfg, "NUM_SMS": nsms, "FLATTEN": fl}, nsms))
            for ws in (False,) if few else (False, True):
                out.append((f"tmap{'/fl' if fl else ''}{'/ws' if ws else ''} " + tag, mm_tma_persistent,
                            {**cfg, "NUM_SMS": nsms, "FLATTEN": fl, "WS": ws}, nsms))
    return out


def tle_variants(s, nsms, As, Bs, Cs):
    """tle's own kernels at 128x256x64, 8 warps, 3 stages: matmul.tle (the bench's tle:triton) and
    matmul_grouped.tle (pointers), matmul_persistent.tle with and without TMA, on the native path; the persistent
    one on Tile IR too."""
    import tle
    ex = os.path.join(HERE, "..", "examples")
    plain = tle.compile(os.path.join(ex, "matmul.tle")).matmul
    grouped = tle.compile(os.path.join(ex, "matmul_grouped.tle")).matmul_grouped
    persistent = tle.compile(os.path.join(ex, "matmul_persistent.tle")).matmul_persistent
    tiles = triton.cdiv(s, 128) * triton.cdiv(s, 256)
    cfg = dict(BM=128, BN=256, BK=64, STAGES=3, GROUP_M=8)
    out = {
        "tle matmul (2-D grid)": lambda i: plain[(triton.cdiv(s, 128), triton.cdiv(s, 256))](
            As[i], Bs[i], Cs[i], BM=128, BN=256, BK=64, num_warps=8, num_stages=3, backend="triton"),
        "tle grouped": lambda i: grouped[(tiles,)](As[i], Bs[i], Cs[i], **cfg, num_warps=8, backend="triton"),
        "tle persistent": lambda i: persistent[(min(nsms, tiles),)](As[i], Bs[i], Cs[i], **cfg, TMA=False,
                                                                     num_warps=8, backend="triton"),
        "tle persistent tma": lambda i: persistent[(min(nsms, tiles),)](As[i], Bs[i], Cs[i], **cfg, TMA=True,
                                                                         num_warps=8, backend="triton"),
        "tle persistent tileir": lambda i: persistent[(min(nsms, tiles),)](As[i], Bs[i], Cs[i], **cfg, TMA=False,
                                                                            backend="tileir"),
    }
    want = As[0].float() @ Bs[0].float()
    for name, run in out.items():
        Cs[0].zero_()
        run(0)
        torch.cuda.synchronize()
        assert max_rel(Cs[0], want) < 2e-2, name
    return out


def max_rel(got, want) -> float:
    return ((got.float() - want).abs().max() / want.abs().max()).item()


def timed_rounds(runs: dict, nsets: int, rounds: int, warmup_ms: float, rep_ms: float) -> dict:
    """name -> per-round medians (us), implementations in a rotating order (bench.rotated), as bench.py does."""
    res = {n: [] for n in runs}
    for r in range(rounds):
        for n in bench.rotated(list(runs), r):
            res[n].append(bench.time_events(runs[n], nsets, warmup_ms, rep_ms)["us"])
    return res


def ranked(res: dict, title: str, top: int | None = None) -> list[str]:
    """The title with cuBLAS's median, then each implementation, fastest first, with its ratio to cuBLAS."""
    base = statistics.median(res["torch"])
    lines = [f"{title}: cuBLAS {base:.2f} us"]
    for n in sorted(res, key=lambda n: statistics.median(res[n]))[:top]:
        med = statistics.median(res[n])
        lines.append(f"  {n:28s} {med:8.2f} us  x{base / med:.3f}  rounds " + " ".join(f"{t:.1f}" for t in res[n]))
    return lines


def checked(runs: dict, name: str, run, check, lines: list, where: str = "") -> None:
    """Add run under name if check(run) (one launch) gives a max relative error <= 2e-2; else say in lines why
    not (`where`: the shape, for the failures printed together at the end)."""
    try:
        err = check(run)
        if err > 2e-2:
            lines.append(f"  {where}{name}: wrong ({err:.2e})")
        else:
            runs[name] = run
    except Exception as exc:  # noqa: BLE001
        lines.append(f"  {where}{name}: failed: {bench.first_line(exc)}")


def square(args, dev, nsms) -> list[str]:
    lines = []
    for dname in args.dtypes.split(","):
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dname]
        for s in [int(x) for x in args.sizes.split(",") if x]:
            nsets = 2 if s >= 8192 else 3
            As = [torch.randn(s, s, device=dev).to(dt) for _ in range(nsets)]
            Bs = [torch.randn(s, s, device=dev).to(dt) for _ in range(nsets)]
            Cs = [torch.empty(s, s, device=dev, dtype=dt) for _ in range(nsets)]
            want = As[0].float() @ Bs[0].float()
            runs = {"torch": lambda i: torch.matmul(As[i], Bs[i], out=Cs[i])}
            if args.tle:
                runs.update(tle_variants(s, nsms, As, Bs, Cs))

            def check(run):
                Cs[0].zero_()
                run(0)
                torch.cuda.synchronize()
                return max_rel(Cs[0], want)
            for name, fn, cfg, persist in square_variants(s, nsms, few=args.tle) if not args.tle_only else ():
                def run(i, fn=fn, cfg=cfg, persist=persist):
                    tiles = triton.cdiv(s, cfg["BM"]) * triton.cdiv(s, cfg["BN"])
                    fn[(min(persist, tiles) if persist else tiles,)](As[i], Bs[i], Cs[i], s, s, s, **cfg)
                checked(runs, name, run, check, lines, f"{dname} {s} ")
            lines += ranked(timed_rounds(runs, nsets, args.rounds, 20, 60), f"matmul {s}^3 {dname}")
            print("\n".join(lines[-len(runs) - 1:]), flush=True)
            del As, Bs, Cs
    return lines


def decode(args, dev) -> None:
    for dname in args.dtypes.split(","):
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dname]
        for m, n, k in ((1, 4096, 4096), (16, 4096, 4096), (32, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336)):
            nsets = max(2, (200 << 20) // (k * n * 2))
            Bs = [torch.randn(k, n, device=dev).to(dt) for _ in range(nsets)]
            Xs = [torch.randn(m, k, device=dev).to(dt) for _ in range(nsets)]
            want = Xs[0].float() @ Bs[0].float()
            runs, lines = {"torch": lambda i: torch.matmul(Xs[i], Bs[i])}, []
            for bm, bn, bk, sp, w, st in ((16, 64, 64, 4, 4, 5), (16, 64, 128, 4, 4, 4), (16, 128, 64, 4, 4, 5),
                                          (16, 128, 128, 2, 4, 4), (16, 64, 64, 8, 4, 5), (16, 256, 64, 4, 4, 4),
                                          (32, 64, 64, 4, 4, 5)):
                if bm < m:
                    continue
                part = torch.empty(sp, m, n, device=dev)
                for tma in (False, True):
                    def run(i, bm=bm, bn=bn, bk=bk, sp=sp, w=w, st=st, tma=tma, part=part):
                        splitk_part[(triton.cdiv(n, bn), sp, triton.cdiv(m, bm))](
                            Xs[i], Bs[i], part, m, n, k, BM=bm, BN=bn, BK=bk, SPLIT=sp, TMA=tma,
                            num_warps=w, num_stages=st)

                    def check(run, part=part):
                        run(0)
                        torch.cuda.synchronize()
                        return max_rel(part.sum(0), want)
                    checked(runs, f"{'tma' if tma else 'ptr'} {bm}x{bn}x{bk} S{sp} w{w} s{st}", run, check, lines)
            res = timed_rounds(runs, nsets, args.rounds, 5, 30)
            print("\n".join(lines + ranked(res, f"decode {m}x{n}x{k} {dname} (partials only, no reduce)", 8)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tle", action="store_true", help="time tle's matmul_grouped and matmul_persistent too")
    ap.add_argument("--tle-only", action="store_true", help="with --tle: no hand-written Triton variants")
    args = ap.parse_args()
    triton.set_allocator(_alloc)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    lines = square(args, dev, torch.cuda.get_device_properties(dev).multi_processor_count)
    if args.decode:
        decode(args, dev)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
