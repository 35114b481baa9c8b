#!/usr/bin/env python3
"""Kernel-only figures of bench cases from Nsight Compute: tle's paths against the hand-written Triton reference.

    python benchmarks/ncu_probe.py --cases "layernorm 4096x1024 bf16;matmul 1024x1024x1024 bf16"
    python benchmarks/ncu_probe.py --cases "softmax 8192x4096 f32" --warps 4,8,16

The benchmark's events time a launch on the GPU from its start to its end, so a difference between tle and the
reference there may come from the kernel's own instructions or from its launch (parameter size, grid). Nsight
Compute's gpu__time_duration counts the kernel alone, beside the instructions it executed, its DRAM traffic and its
registers: the two together say which. Every implementation is compiled and checked against the reference on fresh
random inputs first; then each is launched `--launches` times on those inputs, and ncu profiles those launches alone
(the profiler is started after the checks), with its caches flushed before each and the GPU's clocks left as they
are (--clock-control none). The table gives the median over the launches.

--warps re-runs each case with these num_warps for tle's Triton path and the reference alike (the benchmark's
choice is the default), to see what the warps heuristic costs or leaves.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS = {
    "gpu__time_duration.sum": "us",
    "smsp__inst_executed.sum": "inst",
    "dram__bytes_read.sum": "rd",
    "dram__bytes_write.sum": "wr",
    "launch__registers_per_thread": "regs",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", required=True, help="bench case keys ('kernel shape dtype'), ';'-separated")
    p.add_argument("--impls", default="tle:triton,triton_ref", help="tle:triton, tle:tileir, triton_ref")
    p.add_argument("--warps", default="", help="num_warps values to try (default: the benchmark's)")
    p.add_argument("--launches", type=int, default=5)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def variants(args):
    """(label, case) for each requested case and warps value."""
    sys.argv = [sys.argv[0]]  # bench parses its own arguments at import
    import bench
    import dataclasses
    cases = {c.key: c for c in bench.build_cases(False)}
    out = []
    for key in [k.strip() for k in args.cases.split(";") if k.strip()]:
        if key not in cases:
            raise SystemExit(f"no bench case '{key}'; cases look like 'layernorm 4096x1024 bf16'")
        case = cases[key]
        for w in [int(x) for x in args.warps.split(",") if x] or [case.num_warps]:
            out.append((f"{key} w{w}", dataclasses.replace(case, num_warps=w)))
    return bench, out


def child(args) -> None:
    """Runs under ncu: compiles and checks every implementation of every variant first, then, with the profiler
    started, launches each args.launches times on one input set (ncu flushes the caches before each). Only those
    launches are profiled, in that order; main() maps them back by position."""
    import torch
    bench, todo = variants(args)
    impls = {i.name: i for i in (bench.tle_impl("triton"), bench.tle_impl("tileir"), bench.ref_impl())}
    runs = []
    for label, case in todo:
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
        inputs, reference, outputs = case.make("cuda")
        want = [w.float() for w in reference(inputs)]
        for name in args.impls.split(","):
            fn = impls[name].make(case)
            for o in outputs(inputs):
                o.fill_(float("nan"))
            got = bench._outputs(fn(inputs), outputs, inputs)
            torch.cuda.synchronize()
            err = max(bench.rel_err(g, w) for g, w in zip(got, want))
            ok = err <= bench.tolerance(case.kernel, bench.DTYPES[case.dtype])
            print(f"NCU_PROBE {label} | {name} | {'ok' if ok else 'FAIL'} rel_err {err:.1e}", flush=True)
            runs.append((label, name, fn, inputs))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for label, name, fn, inputs in runs:
        print(f"NCU_RUN {label} | {name}", flush=True)
        for _ in range(args.launches):
            fn(inputs)
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def report(stdout: str, launches: int) -> str:
    """The table from the child's output under ncu --csv: its NCU_RUN lines name the runs in launch order, and each
    run owns the next `launches` profiled kernels. Raises ValueError when the counts do not match."""
    lines = stdout.splitlines()
    runs = [ln[len("NCU_RUN "):] for ln in lines if ln.startswith("NCU_RUN")]
    by_id: dict = {}
    for r in csv.DictReader(io.StringIO("\n".join(ln for ln in lines if ln.startswith('"')))):
        v = float(r["Metric Value"].replace(",", ""))
        if r["Metric Name"] == "gpu__time_duration.sum":  # to us
            unit = r.get("Metric Unit", "")
            v = v / 1e3 if unit in ("nsecond", "ns") else v * 1e3 if unit in ("msecond", "ms") else v
        by_id.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]})[r["Metric Name"]] = v
    profiled = [by_id[i] for i in sorted(by_id)]
    if not runs or len(profiled) != len(runs) * launches:
        raise ValueError(f"expected {len(runs)} x {launches} profiled launches, got {len(profiled)}: "
                         f"{sorted({x['kernel'] for x in profiled})}")
    out = [f"{'case | impl':46s}{'kernel':>18s}" + "".join(f"{short:>9s}" for short in METRICS.values())]
    for i, run in enumerate(runs):
        mine = profiled[i * launches:(i + 1) * launches]
        cells = []
        for m in METRICS:
            med = statistics.median(x[m] for x in mine)
            cells.append(f"{med:9.2f}" if m == "gpu__time_duration.sum" or med < 1000 else f"{med / 1e6:8.2f}M")
        out.append(f"{run:46s}{mine[0]['kernel'][:17]:>18s}" + "".join(cells))
    return "\n".join(out)


def main() -> int:
    args = parse_args()
    if args.child:
        child(args)
        return 0
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    cmd = [ncu, "--csv", "--clock-control", "none", "--profile-from-start", "off", "--metrics", ",".join(METRICS),
           sys.executable, os.path.abspath(__file__), "--child", *sys.argv[1:]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for ln in proc.stdout.splitlines():
        if ln.startswith("NCU_PROBE"):
            print(ln)
    try:
        table = report(proc.stdout, args.launches)
    except ValueError as exc:
        print(exc, proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
        return proc.returncode or 1
    print("\n" + table)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
