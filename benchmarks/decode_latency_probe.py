#!/usr/bin/env python3
"""The Tile IR `latency` hint on decode matmuls: examples/matmul_splitk.tle on Tile IR at fixed configurations, with
the lowering's own choice and with each forced value of the view loads' latency hint, against torch.

    . .whl/prelude.sh && python3 benchmarks/decode_latency_probe.py
    . .whl/prelude.sh && python3 benchmarks/decode_latency_probe.py --variants auto,none,2,4,6 \
        --cases 16x4096x4096/bf16/16x64x256/1/swap,128x4096x4096/bf16/128x32x64/1

Each variant runs in its own process with its own kernel cache (the hint is a lowering option, TileirOptions
load_latency, which the runtime's cache key does not hold): `auto` is the lowering as it is (lowering/
tle_to_tileir.py `_load_latency`: 4 for one dot on an accumulator of at most 64x32, 6 for 128x256 and up, else
none), `none` forces no hint, a number forces that hint. Cells: us, the mean of two medians of bench.time_events
over inputs rotated out of L2, after a check against torch (BAD: wrong, not timed); `torch` is torch.mm in the
same process (the range over the variants' processes). benchmarks/RESULTS.md, "Decode: latency 4 on thin
accumulators", has the runs behind the rule.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "examples")]

EXTRA = ("1x4096x4096/bf16/16x64x128/1/swap,16x4096x4096/bf16/16x64x128/1/swap,32x4096x4096/bf16/32x64x128/1/swap,"
         "16x4096x14336/bf16/16x64x256/1/swap,16x4096x14336/bf16/16x64x256/2/swap,256x4096x4096/f16/32x64x128/1/swap")


def default_cases() -> str:
    """The benchmark's Tile IR decode configurations (bench.DECODE_CONFIGS; 4096x4096 in both dtypes), then EXTRA."""
    import bench
    out = []
    for (m, n, k), (_, (bm, bn, bk, split, swap)) in bench.DECODE_CONFIGS.items():
        for dt in (("bf16", "f16") if n == k == 4096 and m <= 32 else ("bf16",)):
            out.append(f"{m}x{n}x{k}/{dt}/{bm}x{bn}x{bk}/{split}" + ("/swap" if swap else ""))
    out += [c for c in EXTRA.split(",") if c not in out]
    return ",".join(out)


def parse_case(text: str) -> tuple:
    """'MxNxK/dtype/BMxBNxBK/SPLIT[/swap]' -> ((M, N, K), dtype, (BM, BN, BK), SPLIT, swap)"""
    parts = text.strip().split("/")
    if len(parts) not in (4, 5) or parts[1] not in ("f16", "bf16") or parts[4:] not in ([], ["swap"]):
        raise SystemExit(f"--cases: {text!r} is not MxNxK/f16|bf16/BMxBNxBK/SPLIT[/swap]")
    shape, tiles = (tuple(int(v) for v in p.split("x")) for p in (parts[0], parts[2]))
    return shape, parts[1], tiles, int(parts[3]), parts[4:] == ["swap"]


def force_latency(variant: str) -> None:
    """Makes every later Tile IR lowering in this process use `variant`'s load_latency (auto: leave it)."""
    if variant == "auto":
        return
    import tle.lowering.tle_to_tileir as lowering
    latency = None if variant == "none" else int(variant)
    options = lowering.TileirOptions
    lowering.TileirOptions = lambda **kw: options(**{**kw, "load_latency": latency})


def child(variant: str, cases: list) -> None:
    """One process, one variant: prints a JSON line per case."""
    force_latency(variant)
    import torch

    import bench
    import tle
    from reference import cdiv, splitk_workspace
    mod = tle.compile(os.path.join(HERE, "..", "examples", "matmul_splitk.tle"))
    data = {}
    for text in cases:
        (m, n, k), dts, (bm, bn, bk), split, swap = parse_case(text)
        dt = torch.float16 if dts == "f16" else torch.bfloat16
        if (m, n, k, dts) not in data:
            nsets = bench.probe_sets((m * k + k * n + m * n) * 2)
            sets = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt),
                     torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(nsets)]
            torch_us = bench.time_events(lambda i: torch.mm(sets[i][0], sets[i][1], out=sets[i][2]), nsets, 30,
                                         200)["us"]
            data[(m, n, k, dts)] = (sets, sets[0][0].float() @ sets[0][1].float(), torch_us)
        sets, want, torch_us = data[(m, n, k, dts)]
        part, count = splitk_workspace("cuda", m, n, bm, bn, split)
        grid = (cdiv(n, bn), split, cdiv(m, bm))

        def run(i):
            mod.matmul_splitk[grid](*sets[i], part, count, BM=bm, BN=bn, BK=bk, SPLIT=split, SWAP=swap,
                                    backend="tileir")
        us = bench.checked_us(run, len(sets), sets[0][2], want, timings=2)
        print(json.dumps({"case": text, "variant": variant, "us": us, "torch": torch_us}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="auto,none,3,4,5", help="auto, none or 1..10, comma-separated")
    ap.add_argument("--cases", default=None, help="MxNxK/dtype/BMxBNxBK/SPLIT[/swap],... (default: bench's decode "
                    "configurations and a few more)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    cases = list(dict.fromkeys(c.strip() for c in (args.cases or default_cases()).split(",") if c.strip()))
    for c in cases:
        parse_case(c)
    if args.child:
        child(args.child, cases)
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    results = {}  # (case, column): a variant may be listed twice (none,4,none,4) to see the order's own effect
    for column, variant in enumerate(variants):
        if variant not in ("auto", "none") and not (variant.isdigit() and 1 <= int(variant) <= 10):
            raise SystemExit(f"--variants: {variant!r} is not auto, none or 1..10")
        with tempfile.TemporaryDirectory() as cache:
            proc = subprocess.run([sys.executable, __file__, "--child", variant, "--cases", ",".join(cases)],
                                  env={**os.environ, "TLE_CACHE_DIR": cache}, capture_output=True, text=True)
        if proc.returncode:
            print(f"variant {variant} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
            return 1
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                results[(r["case"], column)] = r
                print(line, flush=True)
    print(f"\n{'case':40s} {'torch':>11s} " + " ".join(f"{v:>6s}" for v in variants))
    for case in cases:
        torch_us = [results[(case, c)]["torch"] for c in range(len(variants)) if (case, c) in results]
        cells = [results.get((case, c), {}).get("us") for c in range(len(variants))]
        print(f"{case:40s} {min(torch_us):5.1f}-{max(torch_us):5.1f} "
              + " ".join("   BAD" if c is None else f"{c:6.1f}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
