import os, statistics, torch, triton, tle
HERE = os.path.dirname(os.path.abspath(__file__))
tr = tle.compile(os.path.join(HERE, "examples", "attention_bwd.tle"))
fw = tle.compile(os.path.join(HERE, "examples", "attention.tle"))
def bench(f, n=25):
    for _ in range(3): f()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)
rows = []
for d in (64, 128):
    b, s = (32, 4096) if d == 64 else (16, 4096)
    q, k, v, do = (torch.randn(b, s, d, device="cuda").to(torch.float16) for _ in range(4))
    dq, dk, dv, o = (torch.empty(b, s, d, device="cuda", dtype=torch.float16) for _ in range(4))
    lse = torch.empty(b, s, device="cuda"); delta = torch.empty(b, s, device="cuda")
    tr.attention_fwd[(triton.cdiv(s, 64), b)](q, k, v, o, lse, d ** -0.5, D=d)
    tr.attention_bwd_delta[(triton.cdiv(s, 64), b)](o, do, delta, D=d)
    cases = [
        ("dkdv 64x64 s3", lambda w: tr.attention_bwd_dkdv[(triton.cdiv(s, 64), b)](q, k, v, do, lse, delta, dk, dv, d ** -0.5, D=d, backend="triton", num_warps=w)),
        ("dkdv 64x64 s2", lambda w: tr.attention_bwd_dkdv[(triton.cdiv(s, 64), b)](q, k, v, do, lse, delta, dk, dv, d ** -0.5, D=d, STAGES=2, backend="triton", num_warps=w)),
        ("dkdv c 64x64", lambda w: tr.attention_bwd_dkdv[(triton.cdiv(s, 64), b)](q, k, v, do, lse, delta, dk, dv, d ** -0.5, D=d, CAUSAL=True, backend="triton", num_warps=w)),
        ("dq 128x64", lambda w: tr.attention_bwd_dq[(triton.cdiv(s, 128), b)](q, k, v, do, lse, delta, dq, d ** -0.5, BM=128, BN=64, D=d, backend="triton", num_warps=w)),
    ]
    for name, f in cases:
        t = {}
        for w in (4, 8):
            try:
                t[w] = bench(lambda: f(w))
            except Exception as e:
                print(name, w, str(e)[-90:]); t[w] = float("nan")
        rows.append((d, name, t[4], t[8]))
        print(rows[-1], flush=True)
print("\nD  kernel        w4 us    w8 us   w4/w8")
for d, n, a, c in rows:
    print(f"{d:<3} {n:13} {a:8.1f} {c:8.1f}  {a / c:5.2f}")
