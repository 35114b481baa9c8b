"""num_warps on one-tile rows, untuned: tle's default against fixed warp counts, the Triton reference and torch.

    . .whl/prelude.sh && python3 benchmarks/warps_probe.py                  # softmax, layernorm, rmsnorm, cumsum
    . .whl/prelude.sh && python3 benchmarks/warps_probe.py --kernels softmax --n 32000 --dtypes bf16

Each case is an example (`examples/<kernel>.tle`) over M rows of N elements, the whole row in one tile
(BLOCK = next_pow2(N)), one program per row. Columns, us (median over rotating rounds of bench.time_events):
- `tle:auto`: the launch a user writes, `k[(M,)](..., BLOCK=...)` with no options (the Tile IR path where it runs);
- `tle:triton`: the native path with no num_warps, i.e. tle.compiler.default_num_warps;
- `tle:tileir`: the Tile IR path, whether or not `backend="auto"` takes it;
- `w4` ... `w32`: the native path with that num_warps (`--warps`; `--warps ""` leaves them out);
- `ref wN`: benchmarks/triton_ref.py's kernel on bench.row_warps(BLOCK, 16) warps (05-layer-norm's rule up to 16);
- `torch`: the eager operator (bench.torch_impl).
Every column is checked against the float64 reference first; a wrong result prints BAD and is not timed.
benchmarks/RESULTS.md, "Wide rows", has the run behind the default for tiles over 16,384 elements.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402
import triton_ref  # noqa: E402

WARPS = (4, 8, 16, 32)


def columns(kernel: str, k, case, block: int, warps=WARPS) -> dict:
    """name -> fn(args): every way this probe launches the row kernel."""
    m = case.shape[0]
    out = {"tle:auto": lambda a: k[(m,)](*a, BLOCK=block),
           "tle:triton": lambda a: k[(m,)](*a, BLOCK=block, backend="triton"),
           "tle:tileir": lambda a: k[(m,)](*a, BLOCK=block, backend="tileir")}
    for w in warps:
        out[f"w{w}"] = (lambda w: lambda a: k[(m,)](*a, BLOCK=block, backend="triton", num_warps=w))(w)
    rw = bench.row_warps(block, 16)
    launch = triton_ref.LAUNCHERS[kernel]
    out[f"ref w{rw}"] = lambda a: launch(*a, BLOCK=block, num_warps=rw, num_stages=3)
    out["torch"] = bench.torch_impl().make(case)
    return out


def run_case(kernel: str, k, m: int, n: int, dtype: str, rounds: int, warps=WARPS) -> dict:
    import torch
    case = bench.row_case(kernel, m, n, dtype)
    args, ref, outputs = case.make("cuda")
    nsets = max(2, min(8, (240 << 20) // case.bytes + 1))  # rotate out of the 60 MB L2
    sets = [args] + [case.make("cuda")[0] for _ in range(nsets - 1)]
    want = ref(args)
    tol = 3e-2 if dtype in ("bf16", "f16") else 1e-3
    impls, cells = columns(kernel, k, case, case.consts["BLOCK"], warps), {}
    for name, fn in list(impls.items()):
        try:
            out = fn(args)
            torch.cuda.synchronize()
            got = outputs(args) if out is None else ([out] if torch.is_tensor(out) else list(out))
            err = max(bench.rel_err(g.float(), w) for g, w in zip(got, want))
            if err <= tol:
                cells[name] = None  # timed below, in this column's place
                continue
            cells[name] = f"BAD {err:.1e}"
        except Exception as e:  # noqa: BLE001 - a column that fails is reported, the others still run
            cells[name] = "ERR " + bench.first_line(e, 60)
        del impls[name]
    cells.update(time_columns(impls, sets, rounds))
    return {"case": f"{kernel} {m}x{n} {dtype}", "block": case.consts["BLOCK"], "bytes": case.bytes, "us": cells}


def time_columns(impls: dict, sets: list, rounds: int) -> dict:
    """{name: median us} of each fn(args) of `impls` over `rounds` rounds, in an order that rotates each round
    (bench.rotated), each a bench.time_events cycling through the input sets (enough of them to stay out of L2)."""
    times: dict = {name: [] for name in impls}
    for r in range(rounds):
        for name in bench.rotated(list(impls), r):
            times[name].append(bench.time_events(lambda i: impls[name](sets[i]), len(sets), 5, 40)["us"])
    return {name: statistics.median(v) for name, v in times.items()}


def table(rows: list) -> str:
    names = list(rows[0]["us"]) if rows else []
    head = f"{'case':28s} {'BLOCK':>6s} " + " ".join(f"{n:>10s}" for n in names) + "   best (GB/s)"
    lines = [head, "-" * len(head)]
    for r in rows:
        times = [v for v in r["us"].values() if isinstance(v, float)]
        best = min(times) if times else float("nan")
        cells = " ".join(f"{v:10.1f}" if isinstance(v, float) else f"{v[:10]:>10s}" for v in r["us"].values())
        lines.append(f"{r['case']:28s} {r['block']:6d} {cells}   {best:.1f} ({r['bytes'] / best / 1e3:.0f})")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kernels", default="softmax,layernorm,rmsnorm,cumsum")
    p.add_argument("--n", default="12800,32000,65536", help="row lengths")
    p.add_argument("--m", type=int, default=4096, help="rows")
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warps", default=",".join(map(str, WARPS)), help="fixed num_warps columns ('' for none)")
    a = p.parse_args(argv)
    warps = tuple(int(w) for w in a.warps.split(",") if w)
    import tle
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    rows = []
    for kernel in a.kernels.split(","):
        k = getattr(tle.compile(os.path.join(examples, f"{kernel}.tle")), kernel)
        for dtype in a.dtypes.split(","):
            for n in (int(x) for x in a.n.split(",")):
                rows.append(run_case(kernel, k, a.m, n, dtype, a.rounds, warps))
                print(rows[-1]["case"], {n: round(v, 1) if isinstance(v, float) else v
                                         for n, v in rows[-1]["us"].items()}, flush=True)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
