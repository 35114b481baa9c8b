#!/usr/bin/env python3
"""Times variants of the Tile IR lowering's performance choices (lowering.tle_to_tileir.TileirOptions) on the GPU,
beside the hand-written Triton reference and torch, to pick the lowering's defaults from measurements.

    . .whl/prelude.sh && python3 benchmarks/tileir_probe.py            # GPU: check, then time every variant
    python benchmarks/tileir_probe.py --compile-only                   # CPU: lower and compile every variant
    python benchmarks/tileir_probe.py --f32                            # f32 rows without and with occupancy 4

Each variant is lowered from examples/*.tle with the specialisation real tensors give (as the runtime derives it),
compiled by tileiras (variants whose bytecode is identical are compiled and timed once), checked against torch on
fresh random data (outputs poisoned with NaN first), then timed: CUDA events around single launches after a spin
kernel that covers the host's enqueueing, median of many, inputs rotated so that a set is out of L2 when it comes
round again. Prints one table; writes $OUT/tileir_probe.json when OUT is set.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
sys.path[:0] = [HERE, EXAMPLES]

from tle.abi import Spec, abi, all_args  # noqa: E402
from tle.abi import spec_of as abi_spec_of  # noqa: E402
from tle.check import check_kernel, load_program  # noqa: E402
from tle.lowering.ast_to_tle import ast_to_tle  # noqa: E402
from tle.lowering.tle_to_tileir import TileirOptions, tle_to_tileir  # noqa: E402
from tle.targets import tileir  # noqa: E402

O = TileirOptions
OLD = O(tma=None, pointer_loads="none", num_worker_warps=None, occupancy=None)  # the lowering before the choices
ROW = {
    "old": OLD,
    "old_occ4": O(tma=None, pointer_loads="none", num_worker_warps=None, occupancy=4),
    "view_notma": O(tma=False, pointer_loads="none", num_worker_warps=None),
    "view_notma_w8": O(tma=False, pointer_loads="none", num_worker_warps=8),
    "ptr16": O(tma=False, pointer_loads="16bit", num_worker_warps=None),
    "ptr16_w8": O(tma=False, pointer_loads="16bit", num_worker_warps=8),
    "ptrall": O(tma=False, pointer_loads="all", num_worker_warps=None),
    "ptrall_w8": O(tma=False, pointer_loads="all", num_worker_warps=8),
    "ptr16_occ8": O(tma=False, pointer_loads="16bit", num_worker_warps=None, occupancy=8),
    "auto": O(),
}
SMALL = {k: ROW[k] for k in ("old", "view_notma", "ptr16", "ptr16_w8", "auto")}
# Rows wider than the occupancy rule's 4096 elements (8 worker warps by the warps rule): occupancy hints on top.
WIDE = {"auto": O(), "occ2": O(occupancy=2), "occ4": O(occupancy=4), "w4_occ4": O(num_worker_warps=4, occupancy=4),
        "w4_occ8": O(num_worker_warps=4, occupancy=8), "w16": O(num_worker_warps=16)}
# f32 kernels, which the occupancy rule leaves without a hint: does occupancy 4 (what closed the f32 cross-entropy's
# gap, benchmarks/RESULTS.md eleventh session) cost any of them? On the CPU, layernorm 16384x8192 f32 changed
# (78 -> 55 registers); the others here compiled the same.
F32 = {"auto": O(), "occ4": O(occupancy=4)}
MATMUL = {
    "old": OLD,
    "w8": O(tma=None, pointer_loads="none", num_worker_warps=8),
    "w8_cga2": O(tma=None, pointer_loads="none", num_worker_warps=8, num_cta_in_cga=2),
    "auto": O(),
}


def row_warps(block: int) -> int:
    return min(max(block // 256, 1), 8)


# (kernel, shape, dtype, tle consts, tiles for matmul, triton num_warps, variants)
def cases(quick: bool, wide: bool = False, f32: bool = False):
    if wide:
        return [(kernel, (16384, 8192), "bf16", {"BLOCK": 8192}, None, row_warps(8192), WIDE)
                for kernel in ("softmax", "layernorm", "rmsnorm")]
    if f32:
        return [(kernel, (m, n), "f32", {"BLOCK": n}, None, row_warps(n), F32)
                for kernel in ("layernorm", "softmax", "rmsnorm") for m, n in ((16384, 8192), (8192, 4096))] + \
            [("cumsum", (4096, 4096), "f32", {"BLOCK": 4096}, None, 8, F32)]
    out = []
    for kernel, m, n, dt in (("softmax", 8192, 4096, "bf16"), ("softmax", 8192, 4096, "f32"),
                             ("layernorm", 8192, 4096, "bf16"), ("rmsnorm", 8192, 4096, "bf16"),
                             ("rmsnorm", 8192, 4096, "f32"), ("softmax", 16384, 8192, "f32"),
                             ("softmax", 4096, 1024, "bf16")):
        block = 1 << (n - 1).bit_length()
        out.append((kernel, (m, n), dt, {"BLOCK": block}, None, row_warps(block), ROW))
    out.append(("cumsum", (4096, 4096), "bf16", {"BLOCK": 4096}, None, 8, SMALL))
    out.append(("vector_add", (1 << 24,), "bf16", {"BLOCK": 1024}, None, 4, SMALL))
    out.append(("vector_add", (1 << 24,), "f32", {"BLOCK": 1024}, None, 4, SMALL))
    out.append(("swiglu", (8192, 14336), "bf16", {"BM": 16, "BN": 256}, None, 4, SMALL))
    out.append(("matmul", (4096, 4096, 4096), "bf16", {"BM": 128, "BN": 256, "BK": 64}, (128, 256, 64), 8, MATMUL))
    out.append(("matmul", (4096, 4096, 4096), "bf16", {"BM": 128, "BN": 128, "BK": 64}, (128, 128, 64), 4,
                {"old": OLD, "auto": O()}))
    out.append(("matmul", (4096, 4096, 4096), "bf16", {"BM": 256, "BN": 128, "BK": 64}, (256, 128, 64), 8,
                {"old": OLD, "auto": O()}))
    out.append(("matmul", (16, 4096, 4096), "bf16", {"BM": 16, "BN": 32, "BK": 128}, (16, 32, 128), 4,
                {"old": OLD, "auto": O()}))
    first = [0, 11, 1, 2, 3, 10]  # softmax bf16, matmul 128x256, softmax f32, layernorm, rmsnorm bf16, swiglu
    out = [out[i] for i in first] + [c for i, c in enumerate(out) if i not in first]
    if quick:
        out = out[:1]
    return out


# ---- building --------------------------------------------------------------------------------------------------

def typed_kernel(kernel: str, consts: dict, dtype: str):
    path = os.path.join(EXAMPLES, f"{kernel}.tle")
    src = open(path, encoding="utf-8").read()
    return check_kernel(load_program(src, path), kernel, dict(consts, T=dtype))


def flat_args(kernel, tensors: list):
    """Argument values by ABI key, from the example's argument list (tensors and scalars in parameter order)."""
    from tle.typed import TensorParam
    flat = {}
    for p, value in zip(kernel.params, tensors):
        flat[p.name] = value
        if isinstance(p, TensorParam):
            for axis, d in enumerate(p.type.dims):
                if isinstance(d, str):
                    flat[d] = value.shape[axis]
                flat[f"{p.name}.stride{axis}"] = value.stride(axis)
    return flat


spec_of = abi_spec_of  # the specialisation the runtime derives from real arguments


def fake_tensors(kernel_name, shape, dtype, tiles):
    """Meta tensors of the right shapes and dtypes (only shapes, strides and alignment matter for the spec; a meta
    tensor's address is 0, aligned like every CUDA allocation). The GPU run checks its real spec is the same."""
    import torch
    from reference import CASES
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    extra = {"tiles": tiles} if kernel_name == "matmul" else {}
    args, *_ = CASES[kernel_name].make("meta", dt, shape, **extra)
    return args


# ---- timing ----------------------------------------------------------------------------------------------------

def time_us(run, nsets: int, rep_ms: float = 60.0) -> dict:
    """bench.py's event timer (spin kernel, events around one launch, median), so the probe and the benchmark
    measure alike."""
    import bench
    t = bench.time_events(run, nsets, warmup_ms=10.0, rep_ms=rep_ms)
    return {"us": t["us"], "p20": t["p20_us"], "p80": t["p80_us"], "reps": t["reps"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--arch", default=None)
    ap.add_argument("--wide", action="store_true", help="only 16-bit rows of 8192 (occupancy hints beyond the rule)")
    ap.add_argument("--f32", action="store_true", help="only f32 rows, without and with occupancy 4")
    args = ap.parse_args()
    t0 = time.time()
    gpu = not args.compile_only
    if gpu:
        import torch
        major, minor = torch.cuda.get_device_capability()
        arch = args.arch or f"sm_{major}{minor}"
    else:
        arch = args.arch or "sm_90"

    # Lower every variant (main thread), dedupe by bytecode, compile in parallel.
    jobs = []  # (case index, variant name, bytecode key)
    modules = {}  # bytecode -> module
    all_cases = cases(args.quick, args.wide, args.f32)
    specs = []
    for ci, (kname, shape, dtype, consts, tiles, _, variants) in enumerate(all_cases):
        kernel = typed_kernel(kname, consts, dtype)
        tensors = fake_tensors(kname, shape, dtype, tiles)
        spec = spec_of(kernel, flat_args(kernel, tensors))
        specs.append(spec)
        tle_module = ast_to_tle(kernel, spec)
        for vname, options in variants.items():
            try:
                module = tle_to_tileir(tle_module, options)
                bc = tileir.encode_bytecode(module)
            except Exception as e:  # noqa: BLE001
                print(f"lower {kname} {vname}: {type(e).__name__}: {e}", flush=True)
                continue
            modules.setdefault(bc, module)
            jobs.append((ci, vname, bc))
    print(f"lowered {len(jobs)} variants, {len(modules)} distinct, in {time.time() - t0:.1f} s", flush=True)

    def build(bc):
        try:
            return tileir.compile_tileir(modules[bc], arch)
        except Exception as e:  # noqa: BLE001
            return e
    with ThreadPoolExecutor(max_workers=min(32, os.cpu_count() or 4)) as pool:
        binaries = dict(zip(modules, pool.map(build, list(modules))))
    print(f"compiled in {time.time() - t0:.1f} s", flush=True)
    for ci, vname, bc in jobs:
        b = binaries[bc]
        if isinstance(b, Exception):
            print(f"  {all_cases[ci][0]} {vname}: compile failed: {str(b)[:300]}", flush=True)
    if not gpu:
        for ci, vname, bc in jobs:
            b = binaries[bc]
            if not isinstance(b, Exception):
                print(f"  {all_cases[ci][0]} {all_cases[ci][1]} {all_cases[ci][2]} {vname:14s} threads={b.num_threads} "
                      f"regs={b.extra.get('registers')} stack={b.extra.get('stack_bytes')} "
                      f"smem={b.extra['static_shared_mem']}")
        return

    import torch
    import triton_ref
    from reference import CASES, relative_error, tolerance
    from tle.runtime.launch import load
    results = []
    loaded = {}
    src = torch.empty(1 << 28, device="cuda")  # 1 GiB: the device-to-device copy ceiling, read + write
    dst = torch.empty_like(src)
    t = time_us(lambda i: dst.copy_(src), 1, rep_ms=30)
    print(f"copy ceiling: {2 * src.numel() * 4 / t['us'] * 1e-6:.2f} TB/s", flush=True)
    del src, dst
    for ci, (kname, shape, dtype, consts, tiles, warps, variants) in enumerate(all_cases):
        if time.time() - t0 > 165:
            print("time budget spent; stopping", flush=True)
            break
        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        extra = {"tiles": tiles} if kname == "matmul" else {}
        case_args, grid, _, ref, outputs = CASES[kname].make("cuda", dt, shape, **extra)
        nbytes = sum(t.numel() * t.element_size() for t in case_args if isinstance(t, torch.Tensor))
        nsets = 1 if kname == "matmul" else max(1, min(6, -(-(240 << 20) // nbytes)))
        sets = [case_args] + [CASES[kname].make("cuda", dt, shape, **extra)[0] for _ in range(nsets - 1)]
        kernel = typed_kernel(kname, consts, dtype)
        flats = [flat_args(kernel, s) for s in sets]
        spec = spec_of(kernel, flats[0])
        if spec != specs[ci]:
            print(f"{kname}: the real arguments' spec {spec.key()} is not the one compiled for ({specs[ci].key()})")
            continue
        abi_args = [[f[a.key] for a in abi(kernel, spec)] for f in flats]
        want = ref(case_args)
        tol = tolerance(kname, dt)
        grid3 = tuple(grid) + (1,) * (3 - len(grid))
        label = f"{kname} {'x'.join(map(str, shape))} {dtype}"
        if kname == "matmul":
            label += f" {tiles[0]}x{tiles[1]}x{tiles[2]}"
        flops = 2 * shape[0] * shape[1] * shape[2] if kname == "matmul" else 0
        moved = nbytes

        def record(impl, run, extra_info=None):
            try:
                for o in outputs(case_args):
                    o.fill_(float("nan"))
                run(0)
                torch.cuda.synchronize()
                err = max(relative_error(g, w) for g, w in zip(outputs(case_args), want))
                if not err <= tol:
                    print(f"{label:38s} {impl:14s} FAIL rel_err={err:.3g} (tol {tol})", flush=True)
                    results.append({"case": label, "impl": impl, "fail": err, **(extra_info or {})})
                    return
                t = time_us(run, nsets)
                rate = f"{flops / t['us'] * 1e-6:7.1f} TFLOP/s" if flops else f"{moved / t['us'] * 1e-6:7.2f} TB/s"
                info = " ".join(f"{k}={v}" for k, v in (extra_info or {}).items())
                print(f"{label:34s} {impl:13s} {t['us']:8.1f} us {rate} [{t['p20']:.1f}-{t['p80']:.1f}] {info}",
                      flush=True)
                results.append({"case": label, "impl": impl, **t, "rel_err": err, **(extra_info or {})})
            except Exception as e:  # noqa: BLE001
                print(f"{label:38s} {impl:14s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
                results.append({"case": label, "impl": impl, "error": str(e)[:500]})

        # The Triton reference with the bench's configuration, and torch.
        rkw = dict(consts, num_warps=warps, num_stages=3)
        launch = triton_ref.LAUNCHERS[kname]
        record("triton_ref", lambda i: launch(*sets[i], **rkw), {"warps": warps})
        seen = {}
        for cj, vname, bc in jobs:
            if cj != ci:
                continue
            b = binaries[bc]
            if isinstance(b, Exception):
                continue
            if bc in seen:
                print(f"{label:38s} {vname:14s} = {seen[bc]}", flush=True)
                results.append({"case": label, "impl": vname, "same_as": seen[bc]})
                continue
            seen[bc] = vname
            if bc not in loaded:
                loaded[bc] = load(b)
            k = loaded[bc]
            record(vname, lambda i, k=k: k.launch(grid3, abi_args[i]),
                   {"threads": b.num_threads, "regs": b.extra.get("registers"), "stack": b.extra.get("stack_bytes"),
                    "smem": b.extra["static_shared_mem"]})
        del sets, abi_args, flats, case_args
        torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.1f} s", flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "tileir_probe.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
