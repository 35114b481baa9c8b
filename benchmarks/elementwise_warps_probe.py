"""num_warps on elementwise kernels with wide tiles, untuned: tle's default against 4, 8 and 16 warps.

    . .whl/prelude.sh && python3 benchmarks/elementwise_warps_probe.py
    . .whl/prelude.sh && python3 benchmarks/elementwise_warps_probe.py --dtypes bf16 --rounds 5

Cases, on the native path (`backend="triton"`), each over 256 MB-class inputs: examples/vector_add.tle and
examples/dropout.tle over 2^26 elements with BLOCK = 8192 and 16384, and examples/swiglu.tle over 8192 x 14336 with
BM x BN tiles of 8192 (32x256) and 16384 elements (64x256, 16x1024, 8x2048). Columns, us (median over rotating
rounds of bench.time_events): `default` is the launch with no num_warps (tle.compiler.default_num_warps), `wN` the
same launch on N warps. Every column is checked against torch first; a wrong result prints BAD and is not timed.
benchmarks/warps_probe.py does the same for row kernels, whose values cross threads (reductions and scans).
benchmarks/RESULTS.md, "16384-element rows", has the run behind the default.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402
import warps_probe  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
COLUMNS = {"default": None, "w4": 4, "w8": 8, "w16": 16}
P_DROP = 0.3


def run_case(launch, make, check, nsets: int, rounds: int) -> dict:
    """column -> median us, or 'BAD err' where the result is wrong."""
    import torch
    sets = [make() for _ in range(nsets)]
    impls = {name: (lambda a, warps=warps: launch(a, {} if warps is None else {"num_warps": warps}))
             for name, warps in COLUMNS.items()}
    cells = {}
    for name, fn in list(impls.items()):
        fn(sets[0])
        torch.cuda.synchronize()
        err = check(sets[0])
        cells[name] = None if err <= 2e-2 else f"BAD {err:.1e}"  # None: timed below, in this column's place
        if cells[name] is not None:
            del impls[name]
    cells.update(warps_probe.time_columns(impls, sets, rounds))
    return cells


def cases(dtypes: list[str]):
    """(label, launch(args, kw), make() -> args, check(args) -> relative error) for each case."""
    import torch
    import tle
    va = tle.compile(os.path.join(EXAMPLES, "vector_add.tle")).vector_add
    dr = tle.compile(os.path.join(EXAMPLES, "dropout.tle")).dropout
    sw = tle.compile(os.path.join(EXAMPLES, "swiglu.tle")).swiglu
    n, (m, k) = 1 << 26, (8192, 14336)
    for dt in dtypes:
        dtype = bench.DTYPES[dt]

        def randn(*shape, dtype=dtype):
            return torch.randn(*shape, device="cuda", dtype=dtype)

        def dropped(a):  # kept elements scaled by 1 / (1 - p), and about 1 - p of them kept
            x, y = a[0].float(), a[1].float()
            kept = y != 0
            return bench.rel_err(y[kept], x[kept] / (1 - P_DROP)) + abs(kept.float().mean().item() - (1 - P_DROP))
        for block in (8192, 16384):
            yield (f"vector_add {n} {dt} BLOCK={block}",
                   lambda a, kw, block=block: va[(n // block,)](*a, BLOCK=block, backend="triton", **kw),
                   lambda: [randn(n), randn(n), torch.empty(n, device="cuda", dtype=dtype)],
                   lambda a: bench.rel_err(a[2].float(), a[0].float() + a[1].float()))
            yield (f"dropout {n} {dt} BLOCK={block}",
                   lambda a, kw, block=block: dr[(n // block,)](a[0], a[1], 1234, P_DROP, BLOCK=block,
                                                               backend="triton", **kw),
                   lambda: [randn(n), torch.empty(n, device="cuda", dtype=dtype)], dropped)
        for bm, bn in ((32, 256), (64, 256), (16, 1024), (8, 2048)):
            yield (f"swiglu {m}x{k} {dt} {bm}x{bn}",
                   lambda a, kw, bm=bm, bn=bn: sw[(m // bm, k // bn)](*a, BM=bm, BN=bn, backend="triton", **kw),
                   lambda: [randn(m, k), randn(m, k), torch.empty(m, k, device="cuda", dtype=dtype)],
                   lambda a: bench.rel_err(a[2].float(), torch.nn.functional.silu(a[0].float()) * a[1].float()))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sets", type=int, default=4, help="input sets rotated through (each case moves 256-768 MB)")
    a = p.parse_args(argv)
    print(f"{'case':36s}" + "".join(f"{c:>10s}" for c in COLUMNS))
    for label, launch, make, check in cases(a.dtypes.split(",")):
        row = run_case(launch, make, check, a.sets, a.rounds)
        print(f"{label:36s}" + "".join(f"{v:10.1f}" if isinstance(v, float) else f"{v[:10]:>10s}"
                                      for v in row.values()), flush=True)


if __name__ == "__main__":
    main()
