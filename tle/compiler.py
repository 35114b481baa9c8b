"""The pipeline, one call per stage: text -> AST -> checked kernel -> tle dialect -> TTIR -> cubin.

`compile_kernel(...)` runs the stages in order and stops after the one named by `stop` (like `toyc -emit`).
Each stage lives in its own module with one entry point:

    tle/parser.py            parse(text, file)               -> tle.ast.Module
    tle/check.py             check_kernel(program, name, c)  -> tle.typed.Kernel
    lowering/ast_to_tle.py   ast_to_tle(kernel, spec)        -> ir.Module (tle dialect)
    lowering/tle_to_ttir.py  tle_to_ttir(module)             -> TTIR text
    targets/triton.py        compile_ttir(ttir, arch, ...)   -> Binary (ttgir, llir, ptx, cubin)

This module only sequences them and records what each produced.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import debug
from .abi import AbiArg, Spec, abi
from .check import Program, check_kernel
from .typed import Kernel

TRITON_STAGES = ("ast", "tle", "ttir", "ttgir", "llir", "ptx", "cubin")
BACKENDS = ("triton",)


@dataclass
class Compiled:
    """What one compilation produced, stage by stage."""
    kernel: Kernel
    spec: Spec
    abi: list[AbiArg]
    backend: str
    arch: str
    stages: dict = field(default_factory=dict)  # stage name -> text (or bytes for cubin)
    binary: object = None  # targets.binary.Binary once the cubin stage ran
    module: object = None  # the tle-dialect ir.Module


def stages_for(backend: str) -> tuple[str, ...]:
    return TRITON_STAGES


def compile_kernel(program: Program, name: str, constants: dict, spec: Spec | None = None, *,
                   backend: str = "triton", arch: str = "sm_90", stop: str = "cubin",
                   num_warps: int = 4, num_stages: int = 3) -> Compiled:
    order = stages_for(backend)
    if stop not in order:
        raise ValueError(f"stage '{stop}' is not produced by the {backend} backend; stages: {', '.join(order)}")
    upto = order.index(stop)
    with debug.timed("check"):
        kernel = check_kernel(program, name, constants)
    from .abi import default_spec
    spec = spec if spec is not None else default_spec(kernel)
    out = Compiled(kernel, spec, abi(kernel, spec), backend, arch)

    from .lowering.ast_to_tle import ast_to_tle
    with debug.timed("ast_to_tle"):
        module = ast_to_tle(kernel, spec)
    out.module = module
    out.stages["tle"] = module.operation.get_asm(enable_debug_info=debug.level() >= 2)
    debug.dump("tle", out.stages["tle"])
    if upto <= order.index("tle"):
        return out

    from .lowering.tle_to_ttir import tle_to_ttir
    with debug.timed("tle_to_ttir"):
        ttir = tle_to_ttir(module)
    out.stages["ttir"] = ttir
    debug.dump("ttir", ttir)
    if upto <= order.index("ttir"):
        return out

    from .targets.triton import compile_ttir
    with debug.timed("triton"):
        binary = compile_ttir(ttir, arch, num_warps=num_warps, num_stages=num_stages)
    out.binary = binary
    for s in ("ttgir", "llir", "ptx"):
        if s in binary.stages:
            out.stages[s] = binary.stages[s]
    out.stages["cubin"] = binary.cubin
    return out


def now() -> float:
    return time.perf_counter()
