#!/usr/bin/env python3
"""Configuration sweep of examples/matmul_splitk.tle on decode shapes (issue 5), against torch (cuBLAS), the
hand-written Triton twin (benchmarks/triton_ref.py) and a read-only stream of the weight (the floor).

    python benchmarks/decode_sweep.py [--dtype bf16] [--deadline-s 200] [--jobs 15] [--out DIR]
    python benchmarks/decode_sweep.py --cpu          # tiny shapes on the interpreters: checks this script

Phase 1 compiles and checks every configuration in worker processes (one launch each on fresh random inputs
against torch in f32, a second launch to check the arrival counters were left zeroed). Phase 2 times what passed
in this process with bench.time_events (CUDA events around single launches; --timer graph: bench.time_graph, replays
of a graph of back-to-back launches), inputs rotated through enough copies that 240 MB separate two uses of one, so
the weight is never in the 60 MB L2, shape by shape, every workspace
allocated once outside the timing. Phase 3 retimes the best two per shape with other pipeline depths and warps,
with the Triton twin at each configuration (swapped for swap), and the fused ones' two-launch forms.
Variants: fused = matmul_splitk (one launch; native CUDA path only when SPLIT > 1), swap = the same with SWAP=true
(C^T = B^T A^T: the weight tile is the dot's 64-row side, so BM < 64 still gets Hopper's wgmma), two =
matmul_splitk_partial + splitk_reduce (two launches, either path), ref = the Triton twin of fused, refswap = of
swap (the twin's SWAP), ref2 = its two-launch form. --variants keeps some of fused, swap, tileir, swap-tileir
(default: all but the swap ones).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
sys.path[:0] = [HERE, EXAMPLES]
T0 = time.perf_counter()
SPLITK = os.path.join(EXAMPLES, "matmul_splitk.tle")


def cdiv(a, b):
    return -(-a // b)


def elapsed():
    return time.perf_counter() - T0


def bm_for(m):
    return 16 if m <= 16 else (32 if m <= 32 else (64 if m <= 64 else 128))


def stages_for(stage_bytes, budget=128 << 10):
    return max(3, min(6, budget // stage_bytes))


def candidates(m, n, k):
    """Fused-kernel configurations (BM, BN, BK, SPLIT, warps, stages): 120 to 600 programs, at least 4 K tiles per
    split, 8 to 64 KB loaded per pipeline stage."""
    out = []
    for bm in [bm_for(m)] + ([64] if m > 64 else []):
        for bn in (32, 64, 128, 256):
            for bk in (64, 128, 256):
                if bk == 256 and bn > 32:
                    continue
                for split in (1, 2, 4, 8, 16):
                    progs = cdiv(n, bn) * cdiv(m, bm) * split
                    if not 120 <= progs <= 600 or cdiv(cdiv(k, bk), split) < 4:
                        continue
                    stage = (bm * bk + bk * bn) * 2
                    if not 8192 <= stage <= 65536:
                        continue
                    warps = 8 if bm * bn >= 64 * 128 else 4
                    out.append((bm, bn, bk, split, warps, stages_for(stage)))
    return out


def swap_candidates(m, n, k):
    """SWAP=true configurations (BM, BN, BK, SPLIT, warps, stages): BN is the weight tile's rows, wgmma's 64-row
    side, so 64 or 128 (one warp group of 4 warps, or two); BM is M's tile, wgmma's N (8 to 256)."""
    bm = bm_for(m)
    out = []
    for bn in (64, 128):
        for bk in (64, 128, 256):
            for split in (1, 2, 4, 8):
                progs = cdiv(n, bn) * cdiv(m, bm) * split
                if not 64 <= progs <= 600 or cdiv(cdiv(k, bk), split) < 4:
                    continue
                stage = (bm * bk + bk * bn) * 2
                if stage > 65536:
                    continue
                for warps in ((4, 8) if bn == 128 else (4,)):
                    out.append((bm, bn, bk, split, warps, stages_for(stage)))
    return out


def tileir_candidates(m, n, k):
    """Tile IR takes no warps/stages: the fused kernel unsplit and split (its atomics are ordered: docs/language.md),
    64 to 600 programs, at least 4 K tiles per split; and the two-launch form."""
    bm = bm_for(m)
    out = []
    for bn in (16, 32, 64, 128):
        for bk in (64, 128, 256):
            for split in (1, 2, 4, 8):
                progs = cdiv(n, bn) * cdiv(m, bm) * split
                if 64 <= progs <= 600 and cdiv(cdiv(k, bk), split) >= 4 and (bm * bk + bk * bn) * 2 <= 65536:
                    out.append(("fused", (bm, bn, bk, split, 4, 3)))
    for bn, bk, split in ((64, 128, 2), (64, 128, 4), (128, 128, 4), (128, 64, 8), (256, 64, 8)):
        if 120 <= cdiv(n, bn) * cdiv(m, bm) * split <= 600:
            out.append(("two", (bm, bn, bk, split, 4, 3)))
    return out


# ---- one implementation of one configuration ---------------------------------------------------------------------

class Runner:
    """Builds the launch of (variant, backend, config) for a shape; the workspace is allocated once here."""

    _MODULE = None

    def __init__(self, impl, cfg, m, n, device):
        import torch
        from reference import splitk_workspace
        self.impl, self.cfg = impl, cfg
        bm, bn, bk, split, warps, stages = cfg
        self.part, self.count = splitk_workspace(device, m, n, bm, bn, split)
        self.grid = (cdiv(n, bn), split, cdiv(m, bm))
        self.consts = {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split}
        self.opts = {"num_warps": warps, "num_stages": stages}
        self.rgrid = (cdiv(n, 256), cdiv(m, 16))
        self.torch = torch

    @classmethod
    def module(cls):
        if cls._MODULE is None:
            import tle
            cls._MODULE = tle.compile(SPLITK)
        return cls._MODULE

    def __call__(self, a, b, c):
        variant, _, backend = self.impl.partition(":")
        split = self.consts["SPLIT"]
        if variant in ("fused", "swap"):
            opts = self.opts if backend == "triton" else {}
            self.module().matmul_splitk[self.grid](a, b, c, self.part, self.count, backend=backend,
                                                   SWAP=variant == "swap", **self.consts, **opts)
        elif variant == "two":
            opts = self.opts if backend == "triton" else {}
            mod = self.module()
            mod.matmul_splitk_partial[self.grid](a, b, self.part, backend=backend, **self.consts, **opts)
            mod.splitk_reduce[self.rgrid](self.part, c, RM=16, RN=256, SPLIT=split, backend=backend)
        elif variant in ("ref", "refswap"):
            import triton_ref
            triton_ref.matmul_splitk(a, b, c, self.part, self.count, SWAP=variant == "refswap", **self.consts,
                                     **self.opts)
        elif variant == "ref2":
            import triton_ref
            triton_ref.matmul_splitk(a, b, c, self.part, self.count, FUSED=False, **self.consts, **self.opts)
            triton_ref.splitk_reduce(self.part, c, RM=16, RN=256, SPLIT=split)
        else:
            raise ValueError(self.impl)


def make_inputs(m, n, k, dtype, device):
    import torch
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    c = torch.full((m, n), float("nan"), device=device, dtype=dtype)
    return a, b, c


def check_task(task):
    """Compile (by launching) and check one configuration; returns the task with ok/err/first_s."""
    import torch
    from reference import relative_error, tolerance
    m, n, k = task["shape"]
    device = task["device"]
    dtype = getattr(torch, task["dtype"])
    res = dict(task)
    try:
        t = time.perf_counter()
        run = Runner(task["impl"], tuple(task["cfg"]), m, n, device)
        errs = []
        for rep in range(2):  # the second launch finds the counters the first one left
            torch.manual_seed(1000 + rep)
            a, b, c = make_inputs(m, n, k, dtype, device)
            run(a, b, c)
            if device == "cuda":
                torch.cuda.synchronize()
            if rep == 0:
                res["first_s"] = time.perf_counter() - t
            errs.append(relative_error(c, a.float() @ b.float()))
        res["err"] = max(errs)
        res["ok"] = res["err"] <= tolerance("matmul_splitk", dtype) and int(run.count.abs().sum()) == 0
        if not res["ok"] and int(run.count.abs().sum()):
            res["why"] = "counters left set"
    except Exception as exc:  # noqa: BLE001
        res["ok"] = False
        res["why"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    return res


def _worker_init():
    import torch  # noqa: F401
    if os.environ.get("TRITON_INTERPRET") != "1":
        torch.cuda.init()


def run_checks(tasks, jobs):
    if jobs <= 1:
        return [check_task(t) for t in tasks]
    ctx = mp.get_context("spawn")
    with ctx.Pool(jobs, initializer=_worker_init) as pool:
        return list(pool.imap_unordered(check_task, tasks, chunksize=1))


# ---- timing ------------------------------------------------------------------------------------------------------

def timer(device, kind="events"):
    if device == "cuda":
        import bench
        return lambda run, nsets: bench.TIMERS[kind](run, nsets, 5, 25)["us"]

    def cpu(run, nsets):
        t = time.perf_counter()
        run(0)
        return (time.perf_counter() - t) * 1e6
    return cpu


def time_shape(shape, dtype, device, impls, rotate_bytes, kind="events"):
    """{impl: {cfg: us}} plus torch and the floor, on one set of rotated inputs."""
    import torch
    m, n, k = shape
    dt = getattr(torch, dtype)
    es = torch.tensor([], dtype=dt).element_size()
    nbytes = (m * k + k * n + m * n) * es
    nsets = max(2, cdiv(rotate_bytes, nbytes)) if device == "cuda" else 1
    sets = [make_inputs(m, n, k, dt, device) for _ in range(nsets)]
    t = timer(device, kind)
    out = {"bytes": nbytes, "sets": nsets}
    out["torch"] = t(lambda i: torch.matmul(sets[i][0], sets[i][1], out=sets[i][2]), nsets)
    if device == "cuda":
        import triton_ref
        fl, partial = triton_ref.weight_read, triton_ref.weight_read_out(sets[0][1])
        out["floor"] = t(lambda i: fl(sets[i][1], partial), nsets)
    times = out["times"] = []
    for impl, cfg in impls:
        try:
            run = Runner(impl, cfg, m, n, device)
            us = t(lambda i: run(*sets[i]), nsets)
            times.append((impl, list(cfg), us))
        except Exception as exc:  # noqa: BLE001
            times.append((impl, list(cfg), None))
            print(f"  timing {impl} {cfg}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
    del sets
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def cfg_text(cfg):
    bm, bn, bk, split, w, s = cfg
    return f"BM{bm} BN{bn} BK{bk} S{split} w{w} s{s}"


def report(shape, res, copy_Bps):
    m, n, k = shape
    rows = sorted((r for r in res["times"] if r[2]), key=lambda r: r[2])
    fl = res.get("floor")
    head = (f"== {m}x{n}x{k}: torch {res['torch']:.1f} us" + (f", floor (read the weight once) {fl:.1f} us" if fl
                                                                else "") + f", {res['sets']} sets")
    lines = [head]
    best = {}
    for impl, cfg, us in rows:
        best.setdefault(impl, (cfg, us))
    for impl, cfg, us in rows[:6] + [(i, c, u) for i, (c, u) in best.items() if (i, c, u) not in rows[:6]]:
        bw = res["bytes"] / (us * 1e-6)
        pct = f" {100 * bw / copy_Bps:4.0f}% copy" if copy_Bps else ""
        lines.append(f"  {impl:14s} {cfg_text(cfg):32s} {us:8.1f} us  x{res['torch'] / us:5.2f} torch  "
                     f"{bw / 1e9:6.0f} GB/s{pct}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--deadline-s", type=float, default=200)
    p.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)))
    p.add_argument("--out", default=os.environ.get("OUT") or "decode_sweep_out")
    p.add_argument("--cpu", action="store_true", help="tiny shapes on the interpreters (tests this script)")
    p.add_argument("--shapes", default="", help="MxNxK,... (default: the decode set)")
    p.add_argument("--variants", default="fused,tileir",
                   help="which of fused, swap (native path), tileir, swap-tileir (Tile IR's fused and two-launch "
                        "forms, and its SWAP=true form) to sweep")
    p.add_argument("--timer", choices=("events", "graph"), default="events",
                   help="bench.time_events (events around single launches) or bench.time_graph (graph replays)")
    args = p.parse_args()
    if args.cpu:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import bench  # noqa: F401  (time_events; imports triton_ref, which patches the interpreter when interpreted)
    device = "cpu" if args.cpu else "cuda"
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    elif args.cpu:
        shapes = [(1, 96, 256), (20, 64, 384)]
    else:
        shapes = [(m, n, k) for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)) for m in (1, 16, 32, 64, 128)]
    dtype = "float16" if args.cpu else {"bf16": "bfloat16", "f16": "float16"}.get(args.dtype, args.dtype)
    os.makedirs(args.out, exist_ok=True)
    report_path = os.path.join(args.out, "decode_sweep.json")
    log = {"shapes": {}, "dtype": dtype}

    copy_Bps = None
    if device == "cuda":
        import bench as B
        props = torch.cuda.get_device_properties(0)
        print(f"{props.name} {props.multi_processor_count} SMs; torch {torch.__version__}", flush=True)
        ctx = B.Context(device="cuda", timing=True, warmup_ms=5, rep_ms=25)
        cc = B._copy_ceiling(ctx, 1 << 28)
        copy_Bps = cc["copy_GBps"] * 1e9
        log["copy_GBps"] = cc["copy_GBps"]
        print(f"copy ceiling {cc['copy_GBps']:.0f} GB/s ({elapsed():.0f} s)", flush=True)

    # phase 1: compile and check everything, in parallel
    native = "interp" if args.cpu else "triton"
    tasks = []
    variants = {v.strip() for v in args.variants.split(",") if v.strip()}
    unknown = variants - {"fused", "swap", "tileir", "swap-tileir"}
    if unknown:
        raise SystemExit(f"--variants: unknown {sorted(unknown)}")
    tiny = [(16, 32, 64, 1, 4, 3), (16, 32, 64, 4, 4, 3), (16, 64, 64, 3, 4, 3)]
    tileir = "interp" if args.cpu else "tileir"
    for shape in shapes:
        if "fused" in variants:
            for cfg in (candidates(*shape) if not args.cpu else tiny):
                tasks.append({"impl": f"fused:{native}", "cfg": cfg, "shape": shape})
        if variants & {"swap", "swap-tileir"}:
            for cfg in (swap_candidates(*shape) if not args.cpu else [(16, 64, 64, 1, 4, 3), (16, 64, 64, 3, 4, 3)]):
                if "swap" in variants:
                    tasks.append({"impl": f"swap:{native}", "cfg": cfg, "shape": shape})
                if "swap-tileir" in variants:
                    tasks.append({"impl": f"swap:{tileir}", "cfg": cfg[:4] + (4, 3), "shape": shape})
        if "tileir" in variants:
            tir = tileir_candidates(*shape) if not args.cpu else [("fused", (16, 32, 64, 1, 4, 3)),
                                                                  ("two", (16, 32, 64, 4, 4, 3))]
            for variant, cfg in tir:
                tasks.append({"impl": f"{variant}:{tileir}", "cfg": cfg, "shape": shape})
    tasks = list({(t["impl"], t["cfg"], t["shape"]): t for t in tasks}.values())
    for t in tasks:
        t.update(device=device, dtype=dtype)
    print(f"phase 1: {len(tasks)} compile+check tasks on {args.jobs} workers", flush=True)
    checked = run_checks(tasks, args.jobs if not args.cpu else 1)
    bad = [r for r in checked if not r["ok"]]
    print(f"phase 1 done at {elapsed():.0f} s: {len(checked) - len(bad)} ok, {len(bad)} failed", flush=True)
    for r in bad[:40]:
        print(f"  FAIL {r['impl']} {r['shape']} {cfg_text(r['cfg'])}: {r.get('why') or 'rel err %.2e' % r['err']}")
    log["failed"] = [{k: r.get(k) for k in ("impl", "cfg", "shape", "why", "err")} for r in bad]

    # phase 2: time what passed, shape by shape
    ok = {}
    for r in checked:
        if r["ok"]:
            ok.setdefault(tuple(r["shape"]), []).append((r["impl"], tuple(r["cfg"])))
    results = {}
    for shape in shapes:
        if elapsed() > args.deadline_s * 0.75:
            print(f"deadline: {shape} not timed", flush=True)
            continue
        impls = sorted(ok.get(shape, []))
        res = results[shape] = time_shape(shape, dtype, device, impls, 240 << 20, args.timer)
        print(report(shape, res, copy_Bps) + f"   [{elapsed():.0f} s]", flush=True)
        log["shapes"]["x".join(map(str, shape))] = res
        with open(report_path, "w") as f:
            json.dump(log, f, indent=1, default=str)

    # phase 3: the best two fused (and swap) configurations per shape with other depths and warps, each with its
    # twin (the swapped twin for swap)
    tasks = []
    for shape, res in results.items():
        best2 = [r for v in ("fused", "swap")
                 for r in sorted((r for r in res["times"] if r[0] == f"{v}:{native}" and r[2]), key=lambda r: r[2])[:2]]
        for impl0, cfg, _ in best2:
            bm, bn, bk, split, w, s = cfg
            twin = ("ref",) if impl0.startswith("fused") else ("refswap",)
            for impl in twin:
                tasks.append({"impl": impl, "cfg": tuple(cfg), "shape": shape, "device": device, "dtype": dtype})
            for w2, s2 in {(w, s - 1), (w, s + 1), (8 if w == 4 else 4, s), (w, s + 2)}:
                if 2 <= s2 <= 8:
                    for impl in (impl0, *twin):
                        tasks.append({"impl": impl, "cfg": (bm, bn, bk, split, w2, s2), "shape": shape,
                                      "device": device, "dtype": dtype})
            if split > 1 and impl0.startswith("fused"):
                for impl in (f"two:{native}", "ref2"):
                    tasks.append({"impl": impl, "cfg": tuple(cfg), "shape": shape, "device": device, "dtype": dtype})
    if tasks and elapsed() < args.deadline_s * 0.8:
        print(f"phase 3: {len(tasks)} tasks at {elapsed():.0f} s", flush=True)
        checked = run_checks(tasks, args.jobs if not args.cpu else 1)
        ok3 = {}
        for r in checked:
            if r["ok"]:
                ok3.setdefault(tuple(r["shape"]), []).append((r["impl"], tuple(r["cfg"])))
            else:
                print(f"  FAIL {r['impl']} {r['shape']} {cfg_text(r['cfg'])}: {r.get('why') or r.get('err')}")
        for shape in shapes:
            if shape not in ok3 or elapsed() > args.deadline_s:
                continue
            res = time_shape(shape, dtype, device, sorted(ok3[shape]), 240 << 20, args.timer)
            results[shape]["times"] += res["times"]
            results[shape]["torch3"] = res["torch"]
            print(report(shape, results[shape], copy_Bps) + f"   [phase 3, torch now {res['torch']:.1f} us, "
                  f"{elapsed():.0f} s]", flush=True)
            log["shapes"]["x".join(map(str, shape))] = results[shape]
            with open(report_path, "w") as f:
                json.dump(log, f, indent=1, default=str)

    # summary: per shape, torch, the best fused (native path), its twin at the same configuration, the best Tile IR
    print("\nsummary (us; x = torch / that; % = bytes / time against the copy ceiling):")
    print(f"{'shape':18s} {'torch':>7s} {'floor':>7s} | {'best fused:triton':42s} | {'ref same cfg':>12s} | "
          f"{'best two:triton':>15s} | {'best tileir':>26s} | {'best swap (either path)':>42s} | "
          f"{'refswap same cfg':>16s}")
    for shape, res in results.items():
        def best(pred):
            rows = sorted((r for r in res["times"] if r[2] and pred(r)), key=lambda r: r[2])
            return rows[0] if rows else None
        f = best(lambda r: r[0] == f"fused:{native}")
        ref = best(lambda r: r[0] == "ref" and f and r[1] == f[1])
        two = best(lambda r: r[0] == f"two:{native}")
        tir = best(lambda r: r[0].endswith(":tileir") and not r[0].startswith("swap"))
        sw = best(lambda r: r[0].startswith("swap:"))
        refsw = best(lambda r: r[0] == "refswap" and sw and sw[0] == f"swap:{native}" and r[1] == sw[1])
        tt = res["torch"]
        pct = (lambda us: f"{100 * res['bytes'] / (us * 1e-6) / copy_Bps:3.0f}%") if copy_Bps else (lambda us: "")
        cell = lambda r: f"{r[2]:7.1f} x{tt / r[2]:4.2f} {pct(r[2])}"  # noqa: E731
        print(f"{'x'.join(map(str, shape)):18s} {tt:7.1f} {res.get('floor', 0):7.1f} | "
              f"{(cell(f) + ' ' + cfg_text(f[1])) if f else '-':42s} | {(f'{ref[2]:7.1f}') if ref else '-':>12s} | "
              f"{(f'{two[2]:7.1f}') if two else '-':>15s} | "
              f"{(cell(tir) + ' ' + tir[0].split(':')[0] + ' ' + cfg_text(tir[1])[:-6]) if tir else '-':>26s} | "
              f"{(cell(sw) + ' ' + sw[0].split(':')[1] + ' ' + cfg_text(sw[1])) if sw else '-':>42s} | "
              f"{(f'{refsw[2]:7.1f}') if refsw else '-':>16s}")
    log["elapsed_s"] = elapsed()
    with open(report_path, "w") as f:
        json.dump(log, f, indent=1, default=str)
    print(f"done in {elapsed():.0f} s", flush=True)


if __name__ == "__main__":
    main()
