"""num_warps for a scan along axis 0 of a tall, narrow tile ([1024, 16]): the default against 8 and 16 warps.

    . .whl/prelude.sh && python3 benchmarks/scan_warps_probe.py

A porter's column cumsum with a carry (colscan_loop below) spilled on the default 4 warps (ptxas, sm_90: 1292 bytes a
thread for i32, 932 for f32; 156 and 152 on 8 warps; 136 and 84 on 16), and the default rule gives a scan "about
128 values a thread". This times both forms, one tile per program (colscan) and a loop over a column of tiles with
a carry (colscan_loop), on the native path (and with --tileir on the Tile IR path), each checked against torch first
(a wrong result prints BAD and is not timed). Columns: us, the median over --rounds of bench.time_events' medians;
`tle:triton` is the default warps.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402

SOURCE = """
kernel colscan<BT: int = 1024, BD: int = 16, T: dtype = i32>(x: tensor<T>[L, D], y: tensor<T>[L, D]) {
    store(y, cumsum(load(x, tile=[BT, BD], at=[program_id(0), program_id(1)]), axis=0),
          at=[program_id(0), program_id(1)])
}

kernel colscan_loop<BT: int = 1024, BD: int = 16, T: dtype = i32>(x: tensor<T>[L, D], y: tensor<T>[L, D]) {
    let d = program_id(0)
    var carry = zeros<T>[1, BD]
    for t in range(cdiv(L, BT)) {
        let v = load(x, tile=[BT, BD], at=[t, d])
        store(y, cumsum(v, axis=0) + carry, at=[t, d])
        carry += sum(v, axis=0, keepdims=true)
    }
}
"""


def main() -> None:
    import torch

    import tle
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warps", default="4,8,16")
    p.add_argument("--tileir", action="store_true",
                   help="a tle:tileir column too: the Tile IR path, which auto does not take for a scan of a tile "
                        "over 8192 elements (lowering/tileir_legality.py WIDE_SCAN_ELEMENTS, measured on rows)")
    args = p.parse_args()
    warps = [int(w) for w in args.warps.split(",")]
    mod = tle.compile(SOURCE)
    rows = []
    for kernel, (L, D) in (("colscan", (16384, 1024)), ("colscan_loop", (8192, 4096))):
        k = getattr(mod, kernel)
        grid = (L // 1024, D // 16) if kernel == "colscan" else (D // 16,)
        for dtype in ("i32", "f32"):
            tdt = {"i32": torch.int32, "f32": torch.float32}[dtype]
            nsets = bench.probe_sets(2 * L * D * 4)
            xs = [(torch.randint(-100, 100, (L, D), device="cuda").to(tdt)) for _ in range(nsets)]
            ys = [torch.empty_like(x) for x in xs]
            x64 = xs[0].double()
            want = (x64.view(L // 1024, 1024, D).cumsum(1).view(L, D) if kernel == "colscan" else x64.cumsum(0))
            times = {}
            for name, opts in [("tle:triton", {"backend": "triton"})] + \
                    [(f"w{w}", {"backend": "triton", "num_warps": w}) for w in warps] + \
                    ([("tle:tileir", {"backend": "tileir"})] if args.tileir else []):
                def run(i, opts=opts):
                    k[grid](xs[i], ys[i], T=dtype, **opts)
                us = []
                for _ in range(args.rounds):
                    got = bench.checked_us(run, nsets, ys[0], want.float(), reset=lambda: ys[0].zero_())
                    us.append(got)
                times[name] = None if None in us else statistics.median(us)
            rows.append((f"{kernel} {L}x{D} {dtype}", times))
    names = list(rows[0][1])
    print(f"{'case':32s}" + "".join(f"{n:>12s}" for n in names))
    for case, times in rows:
        print(f"{case:32s}" + "".join(f"{'BAD' if times[n] is None else f'{times[n]:.1f}':>12s}" for n in names))


if __name__ == "__main__":
    main()
