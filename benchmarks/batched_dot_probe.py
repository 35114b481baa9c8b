"""Many small products (torch.bmm of 16x16 to 64x64 matrices): one program per product with a 2-D dot, against BB
products per program with a batched (3-D) dot, on both paths, and torch.bmm.

    . .whl/prelude.sh && python3 benchmarks/batched_dot_probe.py

Each implementation is checked against torch.bmm first (a wrong result prints BAD and is not timed). Columns: us,
the median over 3 rounds of bench.time_events' medians, inputs rotated over 4 sets."""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402
import torch  # noqa: E402

import tle  # noqa: E402

SRC = """
kernel one<M: int = 32, N: int = 32, K: int = 64>(a: tensor<f16>[B, M, K], b: tensor<f16>[B, K, N],
        c: tensor<f16>[B, M, N]) {
    let z = program_id(0)
    let x = reshape(load(a, tile=[1, M, K], at=[z, 0, 0]), [M, K])
    let y = reshape(load(b, tile=[1, K, N], at=[z, 0, 0]), [K, N])
    store(c, reshape(cast<f16>(dot(x, y)), [1, M, N]), at=[z, 0, 0])
}
kernel many<BB: int = 4, M: int = 32, N: int = 32, K: int = 64>(a: tensor<f16>[B, M, K], b: tensor<f16>[B, K, N],
        c: tensor<f16>[B, M, N]) {
    let z = program_id(0)
    store(c, cast<f16>(dot(load(a, tile=[BB, M, K], at=[z, 0, 0]), load(b, tile=[BB, K, N], at=[z, 0, 0]))),
          at=[z, 0, 0])
}
"""


def main() -> None:
    mod = tle.compile(SRC)
    rows = []
    for (B, M, N, K) in ((16384, 32, 32, 64), (8192, 64, 64, 64), (4096, 16, 16, 128)):
        sets = [(torch.randn(B, M, K, device="cuda").half(), torch.randn(B, K, N, device="cuda").half(),
                 torch.empty(B, M, N, device="cuda", dtype=torch.half)) for _ in range(4)]
        want = torch.bmm(sets[0][0], sets[0][1])
        impls = {"torch": lambda s: torch.bmm(s[0], s[1], out=s[2])}
        for be in ("triton", "tileir"):
            impls[f"one {be}"] = lambda s, be=be, B=B, M=M, N=N, K=K: mod.one[(B,)](*s, M=M, N=N, K=K, backend=be)
            for bb in (2, 4, 8):
                impls[f"bb{bb} {be}"] = lambda s, be=be, bb=bb, B=B, M=M, N=N, K=K: mod.many[(B // bb,)](
                    *s, BB=bb, M=M, N=N, K=K, backend=be)
        res = {}
        for name, f in impls.items():
            s = sets[0]
            s[2].fill_(float("nan"))
            f(s)
            torch.cuda.synchronize()
            err = ((s[2].float() - want.float()).abs().max() / want.float().abs().max()).item()
            if not err < 2e-3:  # f16 outputs: a rounding of the largest is 5e-4 of it
                res[name] = f"BAD {err:.2e}"
                continue
            ts = [bench.time_events(lambda i, f=f: f(sets[i % 4]), 4, 20, 60)["us"] for _ in range(3)]
            res[name] = f"{statistics.median(ts):.1f}"
        rows.append((f"{B}x{M}x{N}x{K}", res))
    names = list(rows[0][1])
    print(f"{'case':18s}" + "".join(f"{n:>12s}" for n in names))
    for case, res in rows:
        print(f"{case:18s}" + "".join(f"{res[n]:>12s}" for n in names))


if __name__ == "__main__":
    main()
