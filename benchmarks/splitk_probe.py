#!/usr/bin/env python3
"""Split-K matmuls on both paths: examples/matmul_splitk.tle's one-launch kernel (the last program to arrive at a
tile sums the partials) and a split-K that `atomic_add`s each f32 partial tile into C (ATOMIC_SPLIT_K below), on
Tile IR with the lowering's own hints and without the occupancy hint, against the native path, torch, and the path
`backend="auto"` takes for that launch.

    . .whl/prelude.sh && python3 benchmarks/splitk_probe.py
    . .whl/prelude.sh && python3 benchmarks/splitk_probe.py --shapes 16x4096x4096 --configs 16x64x128/4 --dtype f16

Columns, us (median of bench.time_events over inputs rotated out of L2; each column checked against torch first,
BAD if wrong, and then not timed):
- `torch`: torch.mm into a C of the input type;
- `counter:tileir`, `counter:occ1`, `counter:native`: matmul_splitk on Tile IR with no options (what the lowering
  chooses for the launch: occupancy 2 past one wave, lowering/tle_to_tileir.py `_occupancy`), with `occupancy=1`
  (tileiras' own plan), and on the native path (`backend="triton"`, its default warps and stages);
- `atomic:...`: the same three for ATOMIC_SPLIT_K. Its C is f32 and must start at zeros: the check zeroes it, the
  timing does not (the sums grow; the atomics cost the same);
- `auto`: the backends `backend="auto"` ran the two kernels on (counter/atomic). Its rules
  are lowering/tileir_legality.py `tileir_slower`: an atomic in a kernel whose one dot takes at most 64x64x64
  multiply-adds a step, on a launch of more programs than SMs, takes the native path.
benchmarks/RESULTS.md, "Split-K with atomics past one wave", has the runs behind that rule.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "examples")]

import bench  # noqa: E402

SHAPES = "1x14336x4096,16x4096x14336,32x28672x4096,16x4096x4096"
CONFIGS = "16x64x128/4,32x64x128/4,16x128x128/2,16x64x128/1"

# Each program sums its K slice of a BM x BN tile and adds it into C with one f32 atomic per element: no workspace,
# no counters, but C must be zeros before the launch.
ATOMIC_SPLIT_K = """
kernel matmul_splitk_atomic<BM: int = 16, BN: int = 64, BK: int = 128, SPLIT: int = 4, T: dtype = bf16>(
        a: tensor<T>[M, K], b: tensor<T>[K, N], c: tensor<f32>[M, N]) {
    let pn = program_id(0)
    let s = program_id(1)
    let pm = program_id(2)
    let per = cdiv(cdiv(K, BK), SPLIT)
    var acc = zeros<f32>[BM, BN]
    for k in range(s * per, min((s + 1) * per, cdiv(K, BK))) {
        acc = dot(load(a, tile=[BM, BK], at=[pm, k]), load(b, tile=[BK, BN], at=[k, pn]), acc)
    }
    let rows = reshape(pm * BM + arange(0, BM), [BM, 1])
    let cols = reshape(pn * BN + arange(0, BN), [1, BN])
    atomic_add(c, [rows, cols], acc, mask=(rows < M) & (cols < N))
}
"""

VARIANTS = {"tileir": {"backend": "tileir"}, "occ1": {"backend": "tileir", "occupancy": 1},
            "native": {"backend": "triton"}}


def configs(text: str) -> list[tuple[int, int, int, int]]:
    """'BMxBNxBK/SPLIT,...' -> [(BM, BN, BK, SPLIT), ...]"""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if item:
            tiles, split = item.split("/")
            out.append((*(int(v) for v in tiles.split("x")), int(split)))
    return out


def launches(counter_mod, atomic_mod, a, b, m, n, cfg, dtype):
    """The two kernels' launches for one input pair, as {kernel: (launch(options), output, reset)}: reset() puts
    the output back to what a launch expects (NaN for the counter kernel's C, zeros for the atomic one's)."""
    import torch
    from reference import cdiv, splitk_workspace
    bm, bn, bk, split = cfg
    grid = (cdiv(n, bn), split, cdiv(m, bm))
    consts = {"BM": bm, "BN": bn, "BK": bk, "SPLIT": split}
    c = torch.empty(m, n, device=a.device, dtype=dtype)
    part, count = splitk_workspace(a.device, m, n, bm, bn, split)
    c32 = torch.empty(m, n, device=a.device, dtype=torch.float32)
    return {
        "counter": (lambda o: counter_mod.matmul_splitk[grid](a, b, c, part, count, **consts, **o), c,
                    lambda: c.fill_(float("nan"))),
        "atomic": (lambda o: atomic_mod.matmul_splitk_atomic[grid](a, b, c32, **consts, **o), c32, c32.zero_),
    }


def compile_kernels():
    import tle
    return tle.compile(os.path.join(HERE, "..", "examples", "matmul_splitk.tle")), tle.compile(ATOMIC_SPLIT_K)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES, help="MxNxK,...")
    ap.add_argument("--configs", default=CONFIGS, help="BMxBNxBK/SPLIT,...")
    ap.add_argument("--dtype", default="bf16", choices=("f16", "bf16"))
    args = ap.parse_args()
    import torch
    counter_mod, atomic_mod = compile_kernels()
    dt = torch.float16 if args.dtype == "f16" else torch.bfloat16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    names = [f"{kernel}:{v}" for kernel in ("counter", "atomic") for v in VARIANTS]
    rows = []
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        nsets = bench.probe_sets((m * k + k * n) * dt.itemsize + m * n * 6)
        pairs = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt))
                 for _ in range(nsets)]
        want = pairs[0][0].float() @ pairs[0][1].float()
        outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(nsets)]
        torch_us = bench.time_events(lambda i: torch.mm(*pairs[i], out=outs[i]), nsets, 30, 200)["us"]
        for cfg in configs(args.configs):
            sets = [launches(counter_mod, atomic_mod, a, b, m, n, cfg, dt) for a, b in pairs]
            cells, route = {}, []
            for kernel, kmod, kname in (("counter", counter_mod, "matmul_splitk"),
                                        ("atomic", atomic_mod, "matmul_splitk_atomic")):
                launch, out, reset = sets[0][kernel]
                for variant, options in VARIANTS.items():
                    cells[f"{kernel}:{variant}"] = bench.checked_us(lambda i: sets[i][kernel][0](options), nsets,
                                                                    out, want, reset)
                reset()
                launch({"backend": "auto"})
                route.append(getattr(kmod, kname).last_backend)
            bm, bn, bk, split = cfg
            programs = -(-n // bn) * split * -(-m // bm)
            rows.append((shape, f"{bm}x{bn}x{bk}/{split}", programs, torch_us, cells, "/".join(route)))
            print(rows[-1], flush=True)
    print(f"\n{sms} SMs; us; auto = the backends `auto` ran the counter and atomic kernels on")
    print(f"{'shape':14s} {'config':13s} {'programs':>8s} {'torch':>7s} " + " ".join(f"{x:>14s}" for x in names)
          + "  auto")
    for shape, cfg, programs, torch_us, cells, route in rows:
        print(f"{shape:14s} {cfg:13s} {programs:8d} {torch_us:7.1f} "
              + " ".join(f"{'BAD':>14s}" if cells[x] is None else f"{cells[x]:14.1f}" for x in names) + f"  {route}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
