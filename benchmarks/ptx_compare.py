#!/usr/bin/env python3
"""tle's Triton path against the hand-written Triton references (triton_ref.py), compared in the PTX and SASS,
on the CPU: no GPU needed (Triton 3.6 and the ptxas in its wheel build sm_90 cubins anywhere).

Each configuration is one that benchmarks/bench.py times (same tile sizes, num_warps, num_stages), compiled the
way a launch with the benchmark's tensors would be: tle through bench._tle_compile_for (the runtime's own
specialisation), the reference through triton_ref.compile_for_target (Triton's own binder: 16-byte aligned
pointers, ints divisible by 16 marked so).

    python benchmarks/ptx_compare.py                          # the summary table, every configuration
    python benchmarks/ptx_compare.py --only softmax,layernorm # some kernels
    python benchmarks/ptx_compare.py --diff softmax:bf16:8192 # + per-opcode PTX and SASS counts, tle vs reference
    python benchmarks/ptx_compare.py --dump DIR               # + write ttir, ttgir, ptx and cubin of each to DIR
    python benchmarks/ptx_compare.py --json FILE              # + every number as JSON
    python benchmarks/ptx_compare.py --against OLD.json       # + tle's counts now against an earlier --json run

Columns: `ptx` is the number of PTX instructions (labels, directives and comments not counted), `sass` the number
of SASS instructions in the cubin (cuobjdump -sass, NOPs not counted; static, so a slow path that rarely runs,
such as div.rn.f32's, counts in full), `regs` registers per thread (from the cubin's .nv.info), `i64` PTX integer
instructions on 64-bit types (address arithmetic; ld.param and cvta not counted), `ld`/`st` the global load/store
forms with their counts (`v4.b32x8`: eight ld.global.v4.b32), and `div`/`exp`/`rsqrt` the PTX forms of those
operations.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

import bench  # noqa: E402  (puts examples/ on sys.path too)
import triton_ref  # noqa: E402


def configurations(only=()):
    """(label, bench.Case) for every kernel/dtype/N configuration the benchmark compiles differently."""
    out = []
    for kernel in ("softmax", "layernorm", "rmsnorm"):
        for dt in ("bf16", "f32"):
            for m, n in ((4096, 1024), (8192, 4096), (16384, 8192)):
                out.append((f"{kernel}:{dt}:{n}", bench.row_case(kernel, m, n, dt)))
    out.append(("swiglu:bf16:16x256", bench.swiglu_case(8192, 14336, "bf16")))
    out.append(("vector_add:f32:1024", bench.vector_add_case(1 << 24)))
    for dt in ("f32", "bf16"):
        out.append((f"cumsum:{dt}:4096", bench.row_case("cumsum", 4096, 4096, dt)))
    for s in (4096, 1024):  # the two square matmul configurations (128x256x64 w8, 64x128x64 w4)
        c = bench.matmul_case(s, s, s, "bf16")
        out.append((f"matmul:bf16:{c.consts['BM']}x{c.consts['BN']}x{c.consts['BK']}", c))
    return [(label, case) for label, case in out if not only or case.kernel in only]


# ---- reading PTX and SASS -----------------------------------------------------------------------------------------

_PTX_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.M)


def ptx_instructions(ptx: str) -> list[str]:
    """The opcodes (with their type suffixes) of the PTX instructions in the kernel body, in order."""
    body = ptx[ptx.index(".entry"):]
    body = body[body.index("{"):]
    out = []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "$", "{", "}")) or s.endswith(":"):
            continue
        m = _PTX_INSTR.match(s)
        if m:
            out.append(m.group(1).rstrip(";"))
    return out


def _i64(op: str) -> bool:
    if op.startswith(("ld.", "st.", "cvta", "mov.", "cvt.")):
        return op.startswith("cvt.") and re.search(r"\.[su]64", op) is not None and ".f" not in op
    return re.search(r"\.(s64|u64|b64)$", op) is not None or op.startswith("mad.wide") or op.startswith("mul.wide")


def _forms(ops, prefixes) -> str:
    c = collections.Counter(o for o in ops if o.startswith(prefixes))
    return ",".join(f"{k}x{v}" for k, v in sorted(c.items())) or "-"


def _mem(ops, kind) -> str:
    c = collections.Counter(o[len(kind) + 8:] for o in ops if o.startswith(f"{kind}.global."))
    return ",".join(f"{k}x{v}" for k, v in sorted(c.items())) or "-"


def _cuobjdump() -> str:
    import triton.backends.nvidia as nv
    return os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump")


def sass(cubin: bytes) -> list[str]:
    """SASS opcodes of the cubin (NOPs dropped), from the cuobjdump in Triton's wheel."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([_cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text)
    return [o for o in ops if o != "NOP"]


def registers(cubin: bytes, name: str):
    from tle.targets.binary import kernel_attributes
    try:
        return kernel_attributes(cubin, name).registers
    except Exception:  # noqa: BLE001
        return None


def summarise(ptx: str, cubin: bytes, name: str) -> dict:
    ops = ptx_instructions(ptx)
    s = sass(cubin)
    return {
        "ptx": len(ops), "sass": len(s), "regs": registers(cubin, name),
        "i64": sum(_i64(o) for o in ops),
        "ld": _mem(ops, "ld"), "st": _mem(ops, "st"),
        "div": _forms(ops, ("div.", "rcp.")), "exp": _forms(ops, ("ex2.",)),
        "rsqrt": _forms(ops, ("rsqrt.", "sqrt.")),
        "hist": dict(collections.Counter(ops)), "sass_hist": dict(collections.Counter(s)),
    }


# ---- compiling ----------------------------------------------------------------------------------------------------

def compile_pair(case):
    """(tle stages, tle cubin, tle kernel name), (ref stages, ref cubin, ref kernel name) for one case."""
    args = bench._empty_args(case)
    c = bench._tle_compile_for(case, args)
    tle = (dict(c.binary.stages, ttir=c.stages.get("ttir", "")), c.binary.cubin, c.binary.name)
    r = triton_ref.compile_for_target(case.kernel, *args, **case.consts, num_warps=case.num_warps,
                                      num_stages=case.num_stages)
    ref = ({k: r.asm[k] for k in ("ttir", "ttgir", "llir", "ptx")}, r.asm["cubin"], r.metadata.name)
    return tle, ref


def _row(label, t, r) -> str:
    def cell(x):
        return f"{x['ptx']:4d} {x['sass']:4d} {str(x['regs']):>4s} {x['i64']:3d}"
    return f"{label:22s} | {cell(t)} | {cell(r)} | {t['ptx'] - r['ptx']:+4d} {t['sass'] - r['sass']:+4d}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated kernels")
    p.add_argument("--diff", default="", help="comma-separated labels (kernel:dtype:N) whose histograms to print")
    p.add_argument("--dump", default="", help="directory for each configuration's ttir/ttgir/ptx/sass")
    p.add_argument("--json", default="", help="write every number to this file")
    p.add_argument("--against", default="", help="an earlier --json file: print tle's counts then and now")
    a = p.parse_args(argv)
    only = tuple(filter(None, a.only.split(",")))
    diffs = set(filter(None, a.diff.split(",")))
    results = {}
    print(f"{'config':22s} | {'tle: ptx sass regs i64':23s} | {'ref: ptx sass regs i64':23s} | d.ptx d.sass")
    details = []
    for label, case in configurations(only):
        try:
            (ts, tc, tn), (rs, rc, rn) = compile_pair(case)
        except Exception as exc:  # noqa: BLE001
            print(f"{label:22s} | ERROR {bench.first_line(exc)}")
            continue
        t, r = summarise(ts["ptx"], tc, tn), summarise(rs["ptx"], rc, rn)
        results[label] = {"config": case.config_text(), "tle": t, "ref": r}
        print(_row(label, t, r), flush=True)
        details.append((label, t, r))
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            stem = os.path.join(a.dump, label.replace(":", "_"))
            for who, stages, cubin in (("tle", ts, tc), ("ref", rs, rc)):
                for stage in ("ttir", "ttgir", "ptx"):
                    with open(f"{stem}.{who}.{stage}", "w") as f:
                        f.write(stages.get(stage, ""))
                with open(f"{stem}.{who}.cubin", "wb") as f:
                    f.write(cubin)
    print()
    print(f"{'config':22s} {'who':3s}  {'ld':28s} {'st':22s} {'div':22s} {'exp':18s} rsqrt")
    for label, t, r in details:
        for who, x in (("tle", t), ("ref", r)):
            print(f"{label:22s} {who:3s}  {x['ld']:28s} {x['st']:22s} {x['div']:22s} {x['exp']:18s} {x['rsqrt']}")
    for label, t, r in details:
        if label not in diffs:
            continue
        print(f"\n{label}: PTX opcodes, tle vs reference (equal counts not shown)")
        for key in sorted(set(t["hist"]) | set(r["hist"])):
            a_, b_ = t["hist"].get(key, 0), r["hist"].get(key, 0)
            if a_ != b_:
                print(f"  {key:32s} {a_:4d} {b_:4d}  {a_ - b_:+d}")
        print(f"{label}: SASS opcodes, tle vs reference (equal counts not shown)")
        for key in sorted(set(t["sass_hist"]) | set(r["sass_hist"])):
            a_, b_ = t["sass_hist"].get(key, 0), r["sass_hist"].get(key, 0)
            if a_ != b_:
                print(f"  {key:32s} {a_:4d} {b_:4d}  {a_ - b_:+d}")
    if a.against:
        with open(a.against) as f:
            old = json.load(f)
        print(f"\ntle then -> now (ptx, sass, regs), reference now; from {a.against}")
        for label, r in results.items():
            if label in old:
                o, t, ref = old[label]["tle"], r["tle"], r["ref"]
                print(f"{label:22s} ptx {o['ptx']:4d} -> {t['ptx']:4d} (ref {ref['ptx']:4d})  "
                      f"sass {o['sass']:4d} -> {t['sass']:4d} (ref {ref['sass']:4d})  "
                      f"regs {o['regs']} -> {t['regs']} (ref {ref['regs']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
