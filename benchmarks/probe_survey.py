#!/usr/bin/env python3
"""What each kernel of benchmarks/user_kernels_probe.py compiles to at the probe's own sizes, on the CPU: the path
`backend="auto"` takes (after "--", why it took the native path), and for that binary its registers, threads,
programs per SM and what limits them, and which of the compiler's retries (tle/compiler.py) it went through. No
GPU: the probe's cases are built on meta tensors (shapes, strides and dtypes, no data), and each launch the probe
checks with no backend named is bound, checked and specialised by the runtime's own code for an sm_90 GPU of --sms
SMs, then compiled instead of launched.

A rule that changes a binary (an occupancy retry, a routing rule) should say which kernels it touches; this lists
them before any GPU time is spent (`diff` two runs, one before the change and one after).

    python benchmarks/probe_survey.py [--only greedy,cross_entropy] [--sms 132]

Cases whose setup reads tensor data (e.g. paged attention's block tables) cannot be built on meta tensors and
say so; cases the probe launches through their own code rather than _both_paths (e.g. layernorm_bwd) have no
`auto` launch to survey and say so (`tlec -v --sizes ... --grid ... --sms 132` compiles those by hand).
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import user_kernels_probe as probe  # noqa: E402

from tle.compiler import compile_kernel  # noqa: E402
from tle.runtime.kernel import Kernel  # noqa: E402
from tle.targets.binary import resident_programs  # noqa: E402

ARCH = "sm_90"
# Binary.extra keys the compiler's retries leave (what tlec -v explains), in the order they happen
RETRIES = ("spilled_under", "spilled_on_4_warps", "one_program", "few_warps", "spilled_unchecked", "spilled_warps",
           "persistent", "fma_count")


def compiled_launch(kernel: Kernel, grid, args, kwargs, sms: int):
    """The Compiled a launch kernel[grid](*args, **kwargs) on a GPU of `sms` SMs would run, built the way the
    runtime's plan builds it (Kernel._plan: bind, check, specialise, compile), without launching."""
    values, constants, options = kernel._bind(args, dict(kwargs))
    checked = kernel._checked.get(tuple(sorted(constants.items())))
    if checked is None:
        from tle.check import check_kernel
        checked = check_kernel(kernel.program, kernel.name, constants)
    flat, _, _ = kernel._check_args(checked, values)
    spec = kernel._spec(checked, flat, Kernel._concrete_grid(grid), sms)
    num_warps, num_stages = options.get("num_warps"), options.get("num_stages")
    return compile_kernel(kernel.program, kernel.name, constants, spec, backend=options.get("backend", "auto"),
                          arch=ARCH, num_warps=None if num_warps is None else int(num_warps),
                          num_stages=None if num_stages is None else int(num_stages),
                          occupancy=options.get("occupancy"))


def describe(compiled) -> str:
    binary = compiled.binary
    extra = binary.extra
    line = compiled.backend
    if extra.get("registers") is not None:
        programs, limit = resident_programs(extra["registers"], binary.num_threads, binary.shared_bytes(), ARCH)
        line += (f": {extra['registers']} registers x {binary.num_threads} threads, "
                 f"{extra.get('stack_bytes', 0)} bytes of stack: {programs} programs per SM ({limit})")
    retried = {k: extra[k] for k in RETRIES if extra.get(k)}
    line += f" {retried}" if retried else ""
    # why auto took the native path, up to the measurement in parentheses (the rule's own words)
    return line + (f" -- {compiled.fallback.split(' (')[0].split(':')[0][:100]}" if compiled.fallback else "")


def survey(only: list[str], sms: int) -> list[str]:
    """One line per kernel the probe's `auto` launches compile, per case of `only`."""
    lines, seen = [], []
    original = Kernel.__getitem__

    def record(kernel, grid):
        def launch(*args, **kwargs):  # recorded, not run: what the case does next sees meta tensors
            seen.append((kernel.name, compiled_launch(kernel, grid, args, kwargs, sms)))
        return launch

    sets = probe._sets
    Kernel.__getitem__ = record
    probe._sets = lambda make, nbytes: [make()]  # one input set per case: nothing is timed
    try:
        for name in only:
            try:
                cases = probe.cases("meta", [name])
            except Exception as exc:  # noqa: BLE001 - a case that reads data cannot be built on meta tensors
                lines.append(f"{name}: not built on meta tensors ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            for title, _work, sets, _base, impls, *_ in cases:
                if probe.AUTO not in impls:
                    lines.append(f"{title}: no auto launch (launched through its own code)")
                    continue
                seen.clear()
                try:
                    impls[probe.AUTO](sets[0])
                except Exception as exc:  # noqa: BLE001 - a step after the launches that needs data
                    if not seen:
                        lines.append(f"{title}: its auto launch needs data ({type(exc).__name__}: {str(exc)[:80]})")
                lines += [f"{title} [{kernel}] {describe(compiled)}" for kernel, compiled in seen]
    finally:
        Kernel.__getitem__ = original
        probe._sets = sets
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated probe cases (default: every case)")
    ap.add_argument("--sms", type=int, default=132, help="the GPU's SM count (default: an H200's 132)")
    args = ap.parse_args()
    only = args.only.split(",") if args.only else probe.DEFAULT_ONLY.split(",")
    for line in survey(only, args.sms):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
