#!/usr/bin/env python3
"""Why can tle's kernel be faster than the reference in Nsight Compute (kernel alone) yet slower under the
benchmark's events? Times one bench case's tle kernel and reference with bench.time_events, in alternating
order over many rounds, beside tle's same cubin launched three more ways: LoadedKernel.launch (tle's Python
runtime, no plan), the reference's launcher on the reference, and tle's kernel under the Python plan path
(kernel.launch). The difference between launch paths of one binary is the launch's; between binaries under one
path, the binary's.

    python benchmarks/launch_gap_probe.py --case "layernorm 4096x1024 bf16" --rounds 8
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--case", action="append", required=True)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    sys.argv = [sys.argv[0]]
    sys.path[:0] = [HERE]
    import torch
    import bench
    cases = {c.key: c for c in bench.build_cases(False)}
    for key in args.case:
        case = cases[key]
        torch.manual_seed(0)
        inputs, reference, outputs = case.make("cuda")
        nsets = 1 if case.bytes >= (240 << 20) else min(64, bench.cdiv(240 << 20, case.bytes))
        sets = [inputs] + [case.make("cuda")[0] for _ in range(nsets - 1)]
        tle_fn = bench.tle_impl("triton").make(case)
        ref_fn = bench.ref_impl().make(case)
        tle_fn(inputs)
        ref_fn(inputs)
        k = getattr(bench.tle_module(case.kernel), case.kernel)
        consts = dict(case.consts)
        grid = case.grid(consts)
        opts = dict(consts, backend="triton", num_warps=case.num_warps, num_stages=case.num_stages)
        py_fn = lambda a: k.launch(grid, *a, **opts)  # noqa: E731
        (entry,) = [e for e in k._entries.values() if e.compiled.backend == "triton"]
        runner = entry.runner
        # LoadedKernel.launch needs the ABI's values: what the plan hands the runner for each input set.
        abi_args = {id(s[0]): bench.runner_call(k, runner, grid, s, opts) for s in sets}
        torch.cuda.synchronize()
        raw_fn = lambda a: runner.launch(*abi_args[id(a[0])])  # noqa: E731
        impls = {"tle kernel[grid] (C)": tle_fn, "tle kernel.launch (Py)": py_fn, "tle LoadedKernel.launch": raw_fn,
                 "triton_ref": ref_fn}
        times = {n: [] for n in impls}
        names = list(impls)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                fn = impls[n]
                times[n].append(bench.time_events(lambda i: fn(sets[i]), nsets, 5, 20)["us"])
        print(f"\n{key}: median over {args.rounds} rounds of the per-round median (us), alternating order")
        for n in names:
            print(f"  {n:28s} {statistics.median(times[n]):8.3f}   rounds {[round(t, 2) for t in times[n]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
