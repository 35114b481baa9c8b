#!/usr/bin/env python3
"""examples/matmul.tle at fixed tiles: the Tile IR path with the lowering's own hints and with each occupancy hint,
against the native path and torch (cuBLAS), one program per tile.

    . .whl/prelude.sh && python3 benchmarks/matmul_tiles_probe.py
    . .whl/prelude.sh && python3 benchmarks/matmul_tiles_probe.py --shapes 1536x1536x4096 --tiles 64x128x64 \
        --occupancy 1,2,4 --dtype bf16

Columns, us (median of bench.time_events over inputs rotated out of L2):
- `torch`: torch.mm into the same output;
- `tileir`: `backend="tileir"` with no options, what the lowering chooses for the launch (its occupancy rule reads
  whether the grid has more programs than SMs, lowering/tle_to_tileir.py `_occupancy`);
- `occN`: the same with `occupancy=N` (`--occupancy`; 1 is tileiras' plan without a hint);
- `native`: `backend="triton"` with its default warps.
Each column is checked against torch in a NaN-filled output first; a wrong result prints BAD and is not timed.
benchmarks/RESULTS.md, "Occupancy 2 for one dot on 64x64 to 64x128 tiles", has the runs behind the occupancy rule.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402

SHAPES = "4096x4096x512,4096x4096x4096,1536x1536x4096,2048x1024x2048"
TILES = "64x128x64,128x64x64,64x64x64,64x64x32"


def triples(text: str) -> list[tuple[int, int, int]]:
    return [tuple(int(v) for v in t.strip().split("x")) for t in text.split(",") if t.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES, help="MxNxK,... (each divisible by its tiles)")
    ap.add_argument("--tiles", default=TILES, help="BMxBNxBK,...")
    ap.add_argument("--occupancy", default="1,2", help="occupancy hints to time as extra Tile IR columns")
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    args = ap.parse_args()
    import torch

    import tle
    mod = tle.compile(os.path.join(HERE, "..", "examples", "matmul.tle"))
    dt = torch.float16 if args.dtype == "f16" else torch.bfloat16
    occupancies = [int(x) for x in args.occupancy.split(",") if x.strip()]
    names = ["tileir"] + [f"occ{n}" for n in occupancies] + ["native"]
    rows = []
    for m, n, k in triples(args.shapes):
        nsets = bench.probe_sets((m * k + k * n + m * n) * dt.itemsize)
        sets = [[torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt),
                 torch.empty(m, n, device="cuda", dtype=dt)] for _ in range(nsets)]
        want = sets[0][0].float() @ sets[0][1].float()
        torch_us = bench.time_events(lambda i: torch.mm(sets[i][0], sets[i][1], out=sets[i][2]), nsets, 30, 200)["us"]
        for bm, bn, bk in triples(args.tiles):
            if m % bm or n % bn:
                print(f"skipped {m}x{n}x{k} at {bm}x{bn}x{bk}: the tiles do not divide M and N", flush=True)
                continue
            grid = (m // bm, n // bn)
            options = {"tileir": {"backend": "tileir"}, "native": {"backend": "triton"},
                       **{f"occ{o}": {"backend": "tileir", "occupancy": o} for o in occupancies}}
            cells = {}
            for name in names:
                run = (lambda o: lambda i: mod.matmul[grid](*sets[i], BM=bm, BN=bn, BK=bk, **o))(options[name])
                cells[name] = bench.checked_us(run, nsets, sets[0][2], want)
            rows.append((f"{m}x{n}x{k}", f"{bm}x{bn}x{bk}", grid[0] * grid[1], torch_us, cells))
            print(rows[-1], flush=True)
    print(f"\n{'shape':16s} {'tiles':10s} {'programs':>8s} {'torch':>8s} " + " ".join(f"{x:>8s}" for x in names))
    for shape, tiles, programs, torch_us, cells in rows:
        print(f"{shape:16s} {tiles:10s} {programs:8d} {torch_us:8.1f} "
              + " ".join("     BAD" if cells[x] is None else f"{cells[x]:8.1f}" for x in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
