#!/usr/bin/env python3
"""Why can the tuner's winner lose in the benchmark? (issue 5, tuning)

The third and fourth sessions saw the tuner pick Tile IR 128x256x32 for matmul 4096^3 (faster by ~1% in the tuner)
and the benchmark then time it 5-8% behind the untuned Triton 128x256x64 w8, late in a full run with the GPU hot.
This times the two finalists (examples/matmul_grouped.tle) and cuBLAS, after heating the GPU, three ways, in
interleaved rounds:
  tuner  : runtime/tuning.cuda_timer: a 256 MiB L2 flush before each launch, events around the launch
  burst  : events around 20 back-to-back launches, no flush (sustained throughput, the GPU never idles)
  bench  : bench.time_events: a spin kernel, events around one launch, inputs rotated through 3 copies

    python benchmarks/tuner_probe.py [--n 4096] [--dtype float16] [--heat-s 8]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "examples")]
import bench  # noqa: E402
import tle  # noqa: E402
from tle.runtime.tuning import cuda_timer  # noqa: E402

CONFIGS = {  # name: (backend, consts, options)
    "tileir 128x256x32 s4": ("tileir", dict(BM=128, BN=256, BK=32, STAGES=4, GROUP_M=8), {}),
    "triton 128x256x64 w8 s3": ("triton", dict(BM=128, BN=256, BK=64, STAGES=3, GROUP_M=8), {"num_warps": 8}),
}


def tuner_way(run, reps=50):
    """runtime/tuning.cuda_timer itself, on a trial that launches `run` on the first input set (us)."""
    trial = types.SimpleNamespace(device=torch.device("cuda"), run=lambda: run(0), reset=lambda: None)
    return cuda_timer({}, trial, reps) * 1e6


def burst_way(run, bursts=5, per=20):
    out = []
    for _ in range(bursts):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(per):
            run(i % 3)
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / per)
    return statistics.median(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--heat-s", type=float, default=8)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    n, dt = args.n, getattr(torch, args.dtype)
    sets = [(torch.randn(n, n, device="cuda").to(dt), torch.randn(n, n, device="cuda").to(dt),
             torch.empty(n, n, device="cuda", dtype=dt)) for _ in range(3)]
    k = tle.compile(os.path.join(HERE, "..", "examples", "matmul_grouped.tle")).matmul_grouped
    runs = {}
    for name, (backend, consts, opts) in CONFIGS.items():
        grid = (-(-n // consts["BM"]) * -(-n // consts["BN"]),)

        def run(i, grid=grid, backend=backend, consts=consts, opts=opts):
            a, b, c = sets[i]
            k[grid](a, b, c, backend=backend, **consts, **opts)
        run(0)
        torch.cuda.synchronize()
        a, b, c = sets[0]
        err = bench.rel_err(c[:256].float(), a[:256].float() @ b.float())
        assert err < 1e-2, f"{name}: rel err {err}"
        runs[name] = run
    runs["torch"] = lambda i: torch.matmul(sets[i][0], sets[i][1], out=sets[i][2])
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.heat_s:  # heat the GPU as a full benchmark run has by its matmuls
        for _ in range(50):
            runs["torch"](0)
        torch.cuda.synchronize()
    ways = {"tuner": tuner_way, "burst": burst_way,
            "bench": lambda run: bench.time_events(run, 3, 10, 60)["us"]}
    res = {(name, w): [] for name in runs for w in ways}
    for r in range(args.rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for name in order:
            for w, f in ways.items():
                res[(name, w)].append(f(runs[name]))
    print(f"\nmatmul {n}^3 {args.dtype}, after {args.heat_s:.0f} s of heating, {args.rounds} interleaved rounds "
          f"(us, median of rounds; each round's figure in brackets)")
    print(f"{'config':26s}" + "".join(f"{w:>30s}" for w in ways))
    for name in runs:
        cells = ""
        for w in ways:
            v = res[(name, w)]
            cells += f"{statistics.median(v):10.1f} [{' '.join(f'{x:.0f}' for x in v)}]".rjust(30)
        print(f"{name:26s}{cells}")


if __name__ == "__main__":
    main()
