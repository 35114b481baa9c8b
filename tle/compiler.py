"""The pipeline, one call per stage: text -> AST -> checked kernel -> tle dialect -> (TTIR | Tile IR) -> cubin.

`compile_kernel(...)` runs the stages in order and stops after the one named by `stop` (like `toyc -emit`).
Each stage lives in its own module with one entry point:

    tle/parser.py                parse(text, file)               -> tle.ast.Module
    tle/check.py                 check_kernel(program, name, c)  -> tle.typed.Kernel
    lowering/ast_to_tle.py       ast_to_tle(kernel, spec)        -> ir.Module (tle dialect)
    lowering/tileir_legality.py  tileir_blockers(module, arch)   -> why the Tile IR path cannot take it
                                 tileir_slower(module)           -> where it would run much slower (auto only)
  native CUDA path (Triton):
    lowering/tle_to_ttir.py      tle_to_ttir(module)             -> TTIR text
    targets/triton.py            compile_ttir(ttir, arch, ...)   -> Binary (ttgir, llir, ptx, cubin)
  Tile IR path:
    lowering/tle_to_tileir.py    tle_to_tileir(module)           -> ir.Module (cuda_tile)
    targets/tileir.py            compile_tileir(module, arch)    -> Binary (tilebc, cubin)

This module only sequences them, routes `backend="auto"`, and records what each stage produced. The feedback
loops live here because each spans stages: when tileiras spills under the Tile IR lowering's own occupancy choice,
the kernel is lowered and compiled again with another hint (`_without_spills`), and one that tileiras leaves at a
single program per SM is tried at two (`_past_one_program`), and one it leaves at fewer than 12 warps per SM on
a launch of many waves at more (`_to_twelve_warps`); when ptxas spills a kernel without a dot on the native
path whose bounds checks the launch facts dropped, it is lowered again with the checks (`_triton_without_spills`);
and one whose full-precision f32 dot or scan ptxas spills on its default warps is compiled again on twice as many
(`_fma_dot_without_spills`, `_scan_without_spills`).
"""
from __future__ import annotations

import contextlib
import re
import math
import time
from dataclasses import dataclass, field, replace

from . import debug
from .abi import (AbiArg, FixedTile, GridTile, LoopSplit, LoopTile, Spec, UnalignedRows, WideDim, abi, default_spec,
                  dot_loop_reads, loop_facts)
from .check import Program, check_kernel
from .diagnostics import UNKNOWN, NetworkSpan, Note, TleError, TleErrors
from .typed import Bind, For, If, Kernel, Op, Read, dots, nodes
from .types import MLIR_F8, is_f8

STAGES = {
    "triton": ("ast", "tle", "ttir", "ttgir", "llir", "ptx", "cubin"),
    "tileir": ("ast", "tle", "tileir", "tilebc", "cubin"),
}
BACKENDS = ("auto", "triton", "tileir")
# The compute capabilities ptxas takes (CUDA 12.8/13): what an arch (tlec --arch, tle.compile(arch=), .ir(arch=))
# may name.
KNOWN_ARCHS = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})


def arch_problem(arch) -> str | None:
    """What is wrong with an arch's name ("sm_90"), or None. Said before ptxas runs: it would name an arch the
    user did not write (sm_95 -> sm_95a), and an int or "banana" would fail inside Triton."""
    if not isinstance(arch, str):
        return f"an arch is named by a string such as 'sm_90', not {type(arch).__name__} {arch!r}"
    if re.fullmatch(r"sm_\d+a", arch):
        return f"write {arch[:-1]} (the arch-specific features are used where the kernel needs them)"
    if not (arch.startswith("sm_") and arch[3:].isdigit()):
        return "expected sm_NN, e.g. sm_90"
    if int(arch[3:]) not in KNOWN_ARCHS:
        return ("not an NVIDIA GPU architecture ptxas knows; one of "
                f"{', '.join(f'sm_{a}' for a in sorted(KNOWN_ARCHS))}")
    return None


@dataclass
class Compiled:
    """What one compilation produced, stage by stage."""
    kernel: Kernel
    spec: Spec
    abi: list[AbiArg]
    backend: str
    arch: str
    stages: dict = field(default_factory=dict)  # stage name -> text (or bytes for tilebc and cubin)
    binary: object = None  # targets.binary.Binary once the cubin stage ran
    module: object = None  # the tle-dialect ir.Module
    fallback: str | None = None  # why backend="auto" did not take the Tile IR path
    asserts: bool = False  # assert() compiled into the GPU code (the `asserts` launch option; tlec --asserts)


def backend_for_stage(stop: str, backend: str) -> str:
    """`--emit=ttir` implies Triton and `--emit=tileir` implies Tile IR; otherwise the backend as given."""
    owners = [b for b, stages in STAGES.items() if stop in stages and stop not in ("ast", "tle", "cubin")]
    if owners and backend == "auto":
        return owners[0]
    if owners and owners[0] != backend:
        raise ValueError(f"--emit={stop} comes from the {owners[0]} backend, not {backend}")
    return backend


def route(module, kernel_name: str, arch: str, backend: str) -> tuple[str, str | None]:
    """Pick the backend for a kernel: (backend, why auto fell back to the native CUDA path or None)."""
    if backend == "triton":
        return "triton", None
    from .lowering.tileir_legality import tileir_blockers, tileir_slower
    blockers = tileir_blockers(module, arch)
    if not blockers and backend == "auto":
        blockers = tileir_slower(module)  # legal, but much slower there: auto takes the native path
    if not blockers:
        return "tileir", None
    first = blockers[0]
    where = f" at {first.span}" if getattr(first, "span", None) is not None and first.span.line > 0 else ""
    reason = f"{first.reason}{where}"
    if backend == "tileir":
        # each reason once: the same one at other places is a list of places (a gather in three stages of an
        # FFT repeated a paragraph three times)
        places: dict[str, list] = {first.reason: []}
        for b in blockers[1:]:
            places.setdefault(b.reason, []).append(b.span)
        notes = []
        own = f"{first.span.line}:{first.span.col}" if first.span is not None else None
        for why, spans in places.items():
            # each place once, and not the error's own: a loop split in two repeats its ops (a porter's report)
            at = [p for p in dict.fromkeys(f"{sp.line}:{sp.col}" for sp in spans if sp is not None) if p != own]
            if why == first.reason:
                notes += [f"the same at {', '.join(at)}"] if at else []
            elif spans:
                more = f" and {len(at) - 1} more" if len(at) > 1 else ""
                notes.append(why + (f" (at {at[0]}{more})" if at else ""))
        raise TleError(first.span, f"kernel '{kernel_name}' cannot take the Tile IR path: {first.reason}",
                       notes + ["use backend 'auto' or 'triton' to compile it on the native CUDA path"])
    return "triton", reason


# The accumulator size from which a dot's kernel gets 8 warps when the caller names none (default_num_warps).
WIDE_DOT_ELEMENTS = 128 * 256
# A kernel without a dot gets warps for its largest tile (default_num_warps): enough that each thread holds at most
# a number of its values that depends on what the kernel does with them, between 4 and MAX_DEFAULT_WARPS warps:
ELEMENTWISE_VALUES_PER_THREAD = 32    # they never leave their thread (elementwise work, loads and stores)
CROSS_THREAD_VALUES_PER_THREAD = 64   # an op of CROSS_THREAD_OPS moves them between threads (more warps, more steps)
SCAN_VALUES_PER_THREAD = 128          # a scan: each thread runs through its own values in order before any crosses
CROSS_THREAD_OPS = frozenset({"reduce", "reshape", "transpose", "join", "split", "tile_gather"})
MAX_DEFAULT_WARPS = 16
# A kernel without loops that reduces a tile of 16385 to FULL_SM_TILE elements along its last axis (a row kernel:
# softmax, LayerNorm, RMSNorm with the row in one tile), which the 64-a-thread budget puts on 16 warps, gets
# FULL_SM_WARPS: one program fills an SM's registers either way (ptxas: 95-128 registers a thread on 16 warps, 51-64
# on 32, at 32768), and 32 warps keep twice the loads in flight. Above it 32 warps hold 64 values a thread and spill
# as 16 do. Kernels that loop over such tiles (a row streamed in tiles of 32768: 32 won 4 of 12 and lost up to 17%)
# or reduce along another axis (a column sum: 1.3-1.8x slower on 32) keep 16.
FULL_SM_WARPS = 32
FULL_SM_TILE = FULL_SM_WARPS * 32 * 32  # lowering/tileir_legality.py's WIDE_REDUCTION_ELEMENTS: the same band (tested)
# A kernel without a dot whose largest tile has at most ONE_WARP_TILE elements gets one warp: on 4 warps a 64-element
# tile is held twice over and a reduction of it crosses warps through shared memory; one warp holds it at 4 values a
# thread or fewer, reduces with shuffles alone, and fits 32 programs per SM. Measured on the H200 (forty-third session;
# benchmarks/RESULTS.md "One warp for tiles of 128 elements or fewer"), 1 against 4 warps: an EmbeddingBag of 4096
# bags over 32-128-wide rows 15.4-25.1 us against 21.5-28.2 (f32, bf16), a CSR SpMV one row a program, 16-128
# entries a step, 162.6-637.1 against 163.3-718.0 (at 544 entries a row 182.2-192.4 against 182.8-334.3); 1 warp was
# the fastest or within 1% of it on 28 of 28, and 2 warps lost up to 17% to it (the SpMV at BK = 64 and 128).
ONE_WARP_TILE = 128


def default_num_warps(kernel: Kernel) -> int:
    """num_warps on the native path when the caller gives none. Triton's launcher takes 4 whatever the tiles.

    A kernel whose dots hold 128 x 256 32-bit values or more at once gets 8, because on 4 warps each thread holds
    256 or more of them and spills: examples/matmul_grouped.tle at its declared BM=128, BN=256 took 1437 us for a
    4096^3 f16 product on 4 warps and 190-220 us on 8 (H200, benchmarks/RESULTS.md). What a dot holds is its
    accumulator (_accumulator_elements), or in a loop with several dots (attention) all their results at once
    (_loop_dot_elements). Other kernels with a dot get 4.

    A kernel without a dot gets warps for its largest tile (largest_tile): one up to ONE_WARP_TILE elements (see
    there), else from 4 up. Measured on the H200
    (benchmarks/RESULTS.md "16384-element rows", "Scans", "Elementwise kernels" and "Wide rows"):
    - Values that cross threads (CROSS_THREAD_OPS), 64 a thread: 4 warps up to 8192 elements, 8 up to 16384, 16
      above. Softmax, layernorm, rmsnorm and cumsum (the last under the rule as it was then: scans follow), bf16
      and f32, 4096 rows in one tile:
      - at 8192, 4 and 8 warps were within 2-4% of each other;
      - at 16384 no count won everywhere, but 4 took up to 1.44x 8's time (f32 softmax, bf16 layernorm and
        rmsnorm), and 16 up to 1.75x the best (bf16 layernorm and cumsum). 8 took 0.947x 4's time on the geometric
        mean of 24 rows;
      - above 16384, 4 warps ran 1.03-2.1x (32000) and 2.3-11x (65536) slower than 16;
      - a kernel without loops that reduces 16385 to 32768 elements (FULL_SM_TILE) along the last axis, 32 warps:
        32 took 0.82-0.995x 16's time on all 18 rows of two runs (rows of 20000 and 32000; RMSNorm bf16
        0.82-0.83x, f32 LayerNorm at 32000 0.92x). At 65536 neither won (32 took 0.44x to 1.54x 16's time, two
        runs), and 16 stays. Streaming rows in 32768-element tiles (cross-entropy, greedy, vocabulary softmax over
        vocabularies of 32000 and 128256), 32 won 4 of 12 and lost up to 17%; a column sum with 256x128 and 128x256
        tiles lost 1.3-1.8x; both keep 16.
    - Elementwise, 32 a thread: 8 warps at 8192 elements and 16 from 16384. vector_add, dropout and swiglu over
      256 MB, bf16 and f32:
      - at 8192, 8 warps took 0.86-0.88x 4's time on dropout and bf16 swiglu, and tied elsewhere;
      - at 16384, 16 took 0.83-0.96x 8's time on dropout and bf16 swiglu. 4 took up to 1.35x 8's time on
        swiglu and 15x on dropout, which spills.
    - A scan over the largest tile, 128 a thread: 4 warps up to 16384 elements, 8 up to 32768, 16 above. cumsum,
      bf16 and f32, 4096 rows in one tile, 8192 to 65536 elements (20 rows over three runs): the count this gives
      was the fastest on 13 and within 2.4% of it on the rest. Against 64 a thread, 4 warps took 0.88-0.99x 8's
      time at 16384 (bf16) and 8 took 0.94-0.98x 16's at 32768."""
    return num_warps_choice(kernel)[0]


def num_warps_choice(kernel: Kernel) -> tuple[int, str]:
    """(default_num_warps, why, in words for `tlec -v`)."""
    held = max(_accumulator_elements(kernel), _loop_dot_elements(kernel))
    if held:
        warps = 8 if held >= WIDE_DOT_ELEMENTS else 4
        return warps, f"its dots hold {held} values at once (8 warps from {WIDE_DOT_ELEMENTS})"
    tile = largest_tile(kernel)
    if tile <= ONE_WARP_TILE:
        return 1, (f"no dot, and its largest tile has {tile} elements, at most {ONE_WARP_TILE}: one warp holds it, "
                   "without copies across warps or a reduction through shared memory")
    every = list(nodes(kernel.body))
    ops = [n for n in every if isinstance(n, Op)]
    crossing = sorted({n.name for n in ops if _crosses_threads(n)} & CROSS_THREAD_OPS)
    # a sort()/topk() is a network of reductions (tle/bitonic.py): name what the kernel wrote
    crossing = ["sort"] if any(isinstance(n.span, NetworkSpan) for n in ops if n.name in crossing) else crossing
    # A scan sets the budget only over the largest tile: a small one (a running count of 16 beside a wide row)
    # leaves the rest of the kernel's values to the other rules.
    if any(n.name == "scan" and math.prod(n.args[0].type.shape) >= tile for n in ops):
        per_thread, kind = SCAN_VALUES_PER_THREAD, "a scan runs through each thread's values in order"
    elif crossing:
        per_thread, kind = CROSS_THREAD_VALUES_PER_THREAD, f"a {crossing[0]} moves values between threads"
    else:
        per_thread, kind = ELEMENTWISE_VALUES_PER_THREAD, "its values stay in their threads"
    warps = 4
    while warps < MAX_DEFAULT_WARPS and tile > warps * 32 * per_thread:
        warps *= 2
    why = (f"no dot; its largest tile has {tile} elements, and {kind}: about {per_thread} a thread, from 4 to "
           f"{MAX_DEFAULT_WARPS} warps")
    lo = MAX_DEFAULT_WARPS * 32 * 32  # 16 warps hold more than 32 values a thread above this
    row = any(n.name == "reduce" and n.attrs["axis"] == len(n.args[0].type.shape) - 1
              and lo < math.prod(n.args[0].type.shape) <= FULL_SM_TILE for n in ops)
    loops = any(isinstance(n, For) for n in every)
    if per_thread == CROSS_THREAD_VALUES_PER_THREAD and row and not loops and tile <= FULL_SM_TILE:
        return FULL_SM_WARPS, why + (f", and {FULL_SM_WARPS} for a reduction along the last axis of {lo + 1} to "
                                     f"{FULL_SM_TILE} elements without a loop, where one program fills the SM's "
                                     f"registers on {MAX_DEFAULT_WARPS} too")
    return warps, why


def _crosses_threads(op: Op) -> bool:
    """Can op move values between threads? Not a reduce of one element (how a scalar load reads its value:
    `load(ids, at=i)`), nor a reshape that only adds or drops axes of 1 (`[N]` to `[1, N]`)."""
    if op.name == "reduce":
        return math.prod(op.args[0].type.shape) > 1
    if op.name == "reshape":
        return [d for d in op.args[0].type.shape if d != 1] != [d for d in op.type.shape if d != 1]
    return True


def largest_tile(kernel: Kernel) -> int:
    """The elements of the kernel's largest tile: the widest value any of its operations makes (also the tuner's
    Facts.max_tile)."""
    return max((math.prod(n.type.shape) for n in nodes(kernel.body)
                if isinstance(n, Op) and hasattr(n.type, "shape")), default=1)


def _loop_dot_elements(kernel: Kernel) -> int:
    """The most dot-result elements one loop iteration holds: all its dots' results, which a loop with several
    dots keeps live together (attention's scores and output accumulator; its backward's four products), where
    _accumulator_elements sees one dot at a time. On the H200 (benchmarks/RESULTS.md "Attention for training"),
    from 128 x 256 on, 4 warps spilled and 8 ran 2-3x faster: attention's dk/dv kernel at 64x128 tiles and D=64
    (32,768) 1961.6 us on 4 warps and 684.7 on 8, at 128x64 and D=128 (32,768) 3495.2 and 1050.9; its dq kernel at
    128x128 and D=64 (40,960) 915.0 and 426.0. Below it 4 warps won: dk/dv at the example's 64x64 and D=128
    (24,576) 600.8 against 999.2, the forward at 128x128 and D=64 (24,576) 352.0 against 420.7."""
    def own_dots(body):  # the dots of one iteration: the body's and its ifs', not those of loops nested in it
        for s in body:
            if isinstance(s, If):
                yield from own_dots(s.then)
                yield from own_dots(s.orelse)
            elif not isinstance(s, For):
                yield from dots([s])

    def held(loop) -> int:
        # Dots that accumulate into the same tile (`acc = dot(a, b, acc)` twice, as an int4 product's two halves
        # do) hold it once: key each by the variable its acc reads, seen through the lets that only rename one (an
        # inlined fn's parameters).
        bound = {n.var: n.value for n in nodes(loop.body) if isinstance(n, Bind)}

        def key(d):
            acc = _through_renames(d.args[2], bound)
            return acc.var if isinstance(acc, Read) else d
        tiles = {key(d): math.prod(d.type.shape) for d in own_dots(loop.body)}
        return sum(tiles.values())
    return max((held(loop) for loop in nodes(kernel.body) if isinstance(loop, For)), default=0)


def _rescaled(e, bound: dict):
    """The var read that `e` rescales in place, lane by lane, or `e`: `acc * alpha` as a dot's accumulator (the
    online softmax's `dot(p, v, acc * alpha)`) updates acc's one tile as `acc = dot(p, v, acc)` does, and holds no
    second one (it counted twice: 8 warps for a porter's decode attention that holds 18,432 values, not 32,768)."""
    if isinstance(e, Op) and e.name in ("mul", "div") and getattr(e.type, "shape", None) is not None:
        scaled = e.args if e.name == "mul" else e.args[:1]  # acc / alpha, not alpha / acc
        reads = [a for a in (_through_renames(x, bound) for x in scaled)
                 if isinstance(a, Read) and getattr(a.type, "shape", None) == e.type.shape]
        if len(reads) == 1:
            return reads[0]
    return e


def _through_renames(e, bound: dict):
    """`e` seen through the lets that only rename a var (`bound`: var -> the value it was bound to). An inlined fn's
    parameter is such a let, bound to the caller's var; a var (mutable) is not followed, its value changes."""
    while isinstance(e, Read) and not e.var.mutable and isinstance(bound.get(e.var), Read):
        e = bound[e.var]
    return e


# Triton's own default for num_stages, taken when the kernel's dot loops name no single depth.
DEFAULT_NUM_STAGES = 3


def default_num_stages(module) -> int:
    """num_stages (kernel-wide) on the native path when the caller gives none: the `pipeline(stages=N)` of the
    kernel's loops that hold a dot, where they agree, else 3. Those loops then go to Triton without a loop
    attribute of their own, so that only the dot's operand loads are staged (lowering/tle_to_ttir.py, _for)."""
    from .lowering.tle_to_ttir import dot_loop_stages
    depths = dot_loop_stages(module)
    return depths.pop() if len(depths) == 1 else DEFAULT_NUM_STAGES


def _accumulator_elements(kernel: Kernel) -> int:
    """The most dot-accumulator elements a thread block holds at once: a dot's result, plus the var it is added
    into when the dot starts from zeros and the same assignment reads that var, directly or through a let
    (`let part = dot(a, b)` then `acc += part * scale`: a block-scaled FP8 product keeps both tiles live). That
    kernel at 128x128 tiles spilled 260 bytes on 4 warps and ran at 0.50x the same kernel in Triton on 8 (H200,
    benchmarks/RESULTS.md). `acc += dot(a, b)` itself holds one tile: Triton's combine pass makes it
    dot(a, b, acc) (except for 8-bit operands), as the Tile IR lowering does (_dot_into_add there). So does
    `acc = f(a, b, acc)` with a fn that returns dot(a, b, acc)."""
    widest = max((math.prod(d.type.shape) for d in dots(kernel.body)), default=0)
    if not widest:
        return 0
    bound: dict = {}  # var -> the value it was last bound to, to see through lets

    def parts(e, visited):  # the dots an expression computes, through the lets it reads, and the vars it reads
        if isinstance(e, Read):
            yield "read", e.var
            if e.var in bound and e.var not in visited:  # each let once: chains of lets that read several
                visited.add(e.var)                         # earlier ones (sort, rand) would be exponential
                yield from parts(bound[e.var], visited)
        elif isinstance(e, Op):
            if e.name == "dot":
                yield "dot", e
            for a in e.args:
                yield from parts(a, visited)
    for n in nodes(kernel.body):
        if not isinstance(n, Bind):
            continue
        bound[n.var] = n.value
        found = list(parts(n.value, set()))
        if ("read", n.var) not in found:
            continue
        folded = [a for a in n.value.args if isinstance(a, Op) and a.name == "dot" and
                  not is_f8(a.args[0].type.dtype)] if isinstance(n.value, Op) and n.value.name == "add" else []
        for kind, d in found:
            if kind != "dot":
                continue
            acc = _rescaled(_through_renames(d.args[2], bound), bound)
            if not (isinstance(acc, Read) and acc.var is n.var) and not any(d is f for f in folded):
                widest = max(widest, math.prod(d.type.shape) + math.prod(getattr(n.var.type, "shape", ())))
    return widest


def compile_kernel(program: Program, name: str, constants: dict, spec: Spec | None = None, *,
                   backend: str = "triton", arch: str = "sm_90", stop: str = "cubin",
                   num_warps: int | None = None, num_stages: int | None = None,
                   occupancy: int | None = None, asserts: bool = False) -> Compiled:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}'; choose {', '.join(BACKENDS)}")
    disassemble, stop = stop == "sass", "cubin" if stop == "sass" else stop  # sass: the cubin's, disassembled
    backend = backend_for_stage(stop, backend)
    with debug.timed("check"):
        # a dim past 2**31 - 1 in this launch is an i64 value in the kernel (tle/abi.py WideDim)
        wide_dims = frozenset(f.dim for f in spec.inside if isinstance(f, WideDim)) if spec is not None else ()
        kernel = check_kernel(program, name, constants, wide_dims)
    spec = spec if spec is not None else default_spec(kernel)
    warps_chosen = num_warps is None  # the default: _fma_dot_without_spills may double it
    num_warps = num_warps if num_warps is not None else default_num_warps(kernel)
    out = Compiled(kernel, spec, abi(kernel, spec), backend, arch, asserts=asserts)
    module = _to_tle(out)
    debug.dump("tle", out.stages["tle"])
    if stop == "tle":
        return out

    asked = backend
    backend, out.fallback = route(module, name, arch, backend) if backend != "triton" else ("triton", None)
    routed = _spec_for(kernel, spec, out.backend)  # the facts the module above was lowered under
    out.backend = backend
    if _spec_for(kernel, spec, backend) != routed:  # the path taken splits other loops
        module = _to_tle(out)
        debug.dump("tle", out.stages["tle"])
    if out.fallback:
        debug.note(f"kernel '{name}' runs on the native CUDA path (Triton): {out.fallback}")
    order = STAGES[backend]
    if stop not in order:
        raise ValueError(f"stage '{stop}' is not produced by the {backend} backend; stages: {', '.join(order)}")
    upto = order.index(stop)
    with _at_the_kernel(kernel):
        if backend == "tileir":
            from .targets.tileir import TileirasCrash
            try:
                _tileir(out, module, arch, upto, occupancy, AUTO_TILEIRAS_TIMEOUT_S if asked == "auto" else None)
            except TileirasCrash as crash:
                if asked != "auto":
                    raise
                module = _native_after_tileiras_crash(out, module, crash)
                backend, upto = "triton", STAGES["triton"].index(stop)  # auto reaches tileiras only for a cubin
        if backend == "triton":
            _triton(out, module, arch, upto, num_warps, num_stages)
            if out.binary is not None:
                _triton_without_spills(out, arch, num_warps, num_stages)
                if warps_chosen:
                    _fma_dot_without_spills(out, arch, num_warps, num_stages)
                    _scan_without_spills(out, arch, num_warps, num_stages)
                _within_shared_memory(out, arch, out.binary.num_threads // 32, num_stages, warps_chosen)
    if disassemble:
        from .targets.binary import sass
        out.stages["sass"] = sass(out.binary.cubin)
    return out


def _native_after_tileiras_crash(out: Compiled, module, crash):
    """The tle module to compile on the native path when backend="auto" routed the kernel to Tile IR and tileiras
    failed on its first compile without naming a line of it (targets/tileir.py TileirasCrash): a failure of the
    tool rather than of the program, which the native path compiles as it would have with backend="triton".
    out.fallback says why, as route()'s reasons do (tlec -v, TLE_DEBUG, the launch's TleFallbackWarning)."""
    from .targets.tileir import DEFAULT_TIMEOUT_S, TileirasTimeout
    said = crash.message.removeprefix("tileiras: ")
    out.fallback = (f"tileiras {crash.version} did not finish the kernel's Tile IR in {crash.status:.0f} s (auto's "
                    f"limit; --backend tileir waits up to {DEFAULT_TIMEOUT_S:.0f})"
                    if isinstance(crash, TileirasTimeout) else
                    f"tileiras {crash.version} failed on the kernel's Tile IR (\"{said}\", exit status "
                    f"{crash.status}) and named no line of it")
    debug.note(f"kernel '{out.kernel.name}' runs on the native CUDA path (Triton): {out.fallback}")
    for stage in STAGES["tileir"][2:]:
        out.stages.pop(stage, None)  # what the Tile IR path produced before tileiras failed
    lowered = _spec_for(out.kernel, out.spec, out.backend)
    out.backend = "triton"
    if _spec_for(out.kernel, out.spec, "triton") == lowered:
        return module
    module = _to_tle(out)  # the native path splits other loops (_spec_for)
    debug.dump("tle", out.stages["tle"])
    return module


@contextlib.contextmanager
def _at_the_kernel(kernel: Kernel):
    """A backend failure that names no line of the kernel (a pass that crashed, a timeout in ptxas) is shown at
    the kernel's declaration rather than at no location."""
    try:
        yield
    except TleError as e:
        if e.span == UNKNOWN and not isinstance(e, TleErrors):
            e.span = kernel.span
            e.notes.append(Note(f"the backend named no line of kernel '{kernel.name}'"))
        raise


def _spec_for(kernel: Kernel, spec: Spec, backend: str) -> Spec:
    """The facts of `spec` that `backend`'s lowering uses ("auto": Tile IR's, which route() looks at first): all,
    less the LoopSplits of dot loops (tle/abi.py dot_loop_reads) that path does not take. A fact left out only
    keeps a check, so the binary still suits every launch of `spec`.

    Measured on the H200 (benchmarks/RESULTS.md "Matmuls on rows not 16-byte aligned"), f16 and bf16 matmuls at
    128x128x64 and 128x256x64 whose K is not a multiple of 8:
    - the native path gains where the rows are 16-byte aligned, so that the unchecked tiles' loads are vectorised
      (K = 4097, 4099 and 4100 in rows padded to 4104: 1.07-3.1x, 9 of 9), and goes either way on rows that are
      not (K = 4098 and 4100: 0.95-1.06x; K = 4099 and 8195: 1.31-1.38x at 128x128, 0.85x at 128x256), so it
      takes it only where no tensor the loop reads has UnalignedRows;
    - Tile IR, which reads aligned rows with TMA and its out-of-bounds fill, lost on them (0.67-0.92x, 9 of 9) and
      on rows of an even K (0.81-1.10x), and gained only where the rows are not aligned and K is odd, so that its
      loads were checked element by element (K = 4099 and 8195: 2.3-3.7x, 6 of 6; 4096x4096x4099 at 128x128x64:
      499.2 us against 1766.2, and the native path's 1168.3). It takes the split only there."""
    if not any(isinstance(f, LoopSplit) for f in spec.inside):
        return spec
    reads = dot_loop_reads(kernel)
    unaligned = {f.tensor for f in spec.inside if isinstance(f, UnalignedRows)}

    def taken(split: LoopSplit) -> bool:
        if split.ordinal not in reads:
            return True  # a loop without a dot: both paths split it
        loop = reads[split.ordinal]
        reads_unaligned = any(t.name in unaligned for t, _ in loop)
        if backend == "triton":
            return not reads_unaligned
        odd_k = any(isinstance(d := t.type.dims[axis], str) and spec.divisibility(d) == 1 for t, axis in loop
                    if axis == len(t.type.dims) - 1)
        return reads_unaligned and odd_k

    dropped = frozenset(f for f in spec.inside if isinstance(f, LoopSplit) and not taken(f))
    return replace(spec, inside=spec.inside - dropped) if dropped else spec


def split_dot_loops(out: Compiled) -> list:
    """The loops with a dot (typed Fors) that out's lowering ran as two (_spec_for), for `tlec -v`."""
    lowered = _spec_for(out.kernel, out.spec, out.backend)
    described = loop_facts(out.kernel)
    reads = dot_loop_reads(out.kernel, described)
    return [n for n in nodes(out.kernel.body) if isinstance(n, For) and id(n) in described
            and (ordinal := described[id(n)][0].ordinal) in reads and LoopSplit(ordinal) in lowered.inside]


def unstaged_loads(out: Compiled) -> list:
    """(loop span, if span, load spans) of each loop with pipeline(stages=N > 1) whose tile loads sit under an if
    in its body, for `tlec -v` on the native path: Triton's pipeliner stages only the loads at the loop's own
    level, so these run unstaged (a porter's block-sparse matmul, testing each K block: one stage of shared memory
    where its dense twin had three)."""
    from .dialects.mlir import ir, nested_ops
    from .diagnostics import span_of_location
    found = []
    for loop in nested_ops(out.module.operation):
        if loop.name != "scf.for" or "tle.num_stages" not in loop.attributes or \
                ir.IntegerAttr(loop.attributes["tle.num_stages"]).value < 2:
            continue
        for op in loop.regions[0].blocks[0].operations:
            op = op.operation
            if op.name != "scf.if":
                continue
            loads = [span_of_location(x.location) for x in nested_ops(op)
                     if x.name == "tle.load" and ir.RankedTensorType(x.results[0].type).rank > 0]
            if loads:
                found.append((span_of_location(loop.location), span_of_location(op.location), loads))
    return found


def ordered_reduces(out: Compiled) -> list:
    """(span, fn name) of each reduce() with combine= in out's tle module that keeps the elements' order as a scan
    of its own (not commutative=true, and no scan of the same values before it to take the last element from), for
    `tlec -v`: Welford's moments ran 0.42-0.79x their Triton twin that way on the H200 (benchmarks/RESULTS.md)."""
    from .dialects.mlir import ir, nested_ops
    from .dialects.tle import combine_func, scan_to_reuse
    from .diagnostics import span_of_location
    found = []
    for op in nested_ops(out.module.operation):
        if op.name == "tle.combine_reduce" and "commutative" not in op.attributes and scan_to_reuse(op) is None:
            fn = ir.StringAttr(combine_func(op).attributes["sym_name"]).value.split(".")[1]
            found.append((span_of_location(op.location), fn))
    return found


def _to_tle(out: Compiled):
    """Lower out.kernel under the facts of out.spec that out.backend takes (_spec_for) to the tle dialect:
    out.module and its text, out.stages["tle"]."""
    from .lowering.ast_to_tle import ast_to_tle
    with debug.timed("ast_to_tle"):
        out.module = ast_to_tle(out.kernel, _spec_for(out.kernel, out.spec, out.backend))
    if out.asserts:  # the GPU lowerings keep the kernel's tle.assert ops (dialects/tle.py keeps_asserts)
        from .dialects.tle import keep_asserts
        keep_asserts(out.module)
    out.stages["tle"] = out.module.operation.get_asm(enable_debug_info=debug.level() >= 2)
    return out.module


def _e4m3_before_sm89(module, arch: str) -> None:
    """Triton converts f8e4m3 only from sm_89 on (before, its LLVM lowering aborts with "Conversion from/to
    f8e4m3nv is only supported on compute capability >= 89", at the kernel); say so at the first op that uses it.
    f8e5m2 compiles for sm_80 (its products widened to f16)."""
    from .dialects.mlir import nested_ops
    from .diagnostics import span_of_location
    from .targets.triton import capability
    if capability(arch) >= 89:
        return
    e4m3 = next(mlir for mlir, name in MLIR_F8.items() if name == "f8e4m3")  # as the IR spells it
    for op in (o for top in module.body.operations for o in nested_ops(top.operation)):
        if any(e4m3 in str(v.type) for v in [*op.operands, *op.results]) and op.name != "func.func":
            raise TleError(span_of_location(op.location), f"f8e4m3 needs sm_89 or newer, not {arch}",
                           ["f8e5m2 works from sm_80 on the native CUDA path"])


def _triton(out: Compiled, module, arch, upto, num_warps, num_stages) -> None:
    order = STAGES["triton"]
    from .lowering.tle_to_ttir import tle_to_ttir
    from .targets.triton import capability, compile_ttir
    _e4m3_before_sm89(module, arch)
    num_stages = num_stages if num_stages is not None else default_num_stages(module)
    with debug.timed("tle_to_ttir"):
        # tma=true needs the Tensor Memory Accelerator
        ttir = tle_to_ttir(module, tma=capability(arch) >= 90, num_stages=num_stages)
    out.stages["ttir"] = ttir
    debug.dump("ttir", ttir)
    if upto <= order.index("ttir"):
        return
    with debug.timed("triton"):
        binary = compile_ttir(ttir, arch, num_warps=num_warps, num_stages=num_stages)
    out.binary = binary
    for s in ("ttgir", "llir", "ptx"):
        if s in binary.stages:
            out.stages[s] = binary.stages[s]
    out.stages["cubin"] = binary.cubin


# Launch facts that only take bounds checks away: each says a tile access (or a loop's tiles) lies inside its tensor.
# Without them the lowering keeps the checks, and nothing else about the kernel changes.
_BOUNDS_FACTS = (GridTile, FixedTile, LoopTile, LoopSplit)


def _triton_without_spills(out: Compiled, arch, num_warps, num_stages) -> None:
    """Compile a kernel without a dot again with its bounds checks kept, when ptxas spilled it without them and a
    launch fact took them away; keep whichever spills less (the first on a tie).

    Dropping a row's masks can leave ptxas a schedule that spills: examples/rmsnorm.tle over bf16 rows of 8192 (8
    warps) got 48 registers and 8 bytes of spills without its masks, and 51 registers and none with them, as the
    hand-written Triton reference has them. On the H200 (benchmarks/RESULTS.md, "RMSNorm bf16 at 8192 wide") the
    spilling kernel ran 0.7-0.8% behind the reference (134.8 against 133.8 us at 16384 rows, 265.5 against 263.4 at
    32768), and the reference without masks spilled the same 8 bytes and ran as slowly. Of the benchmark's 34 kernel
    configurations on this path it is the only one that spills, so the retry costs nothing elsewhere. Kernels with a
    dot are left alone: none was measured, and their bounds facts also choose the loop's form (LoopSplit)."""
    binary = out.binary
    checked = frozenset(f for f in out.spec.inside if not isinstance(f, _BOUNDS_FACTS))  # the facts a retry keeps
    has_dot = next(dots(out.kernel.body), None) is not None
    if not binary.extra.get("stack_bytes") or checked == out.spec.inside or has_dot:
        return
    spilled = binary.extra["stack_bytes"]
    debug.note(f"kernel '{binary.name}': ptxas spilled {spilled} bytes per thread without bounds checks; compiling "
               "again with them")
    # the ABI does not depend on `inside`
    if _triton_again(out, replace(out.spec, inside=checked), arch, num_warps, num_stages):
        out.binary.extra["spilled_unchecked"] = spilled  # tlec -v: why this binary keeps its bounds checks


def _fma_dot_without_spills(out: Compiled, arch, num_warps, num_stages) -> None:
    """Compile a kernel with a full-precision f32 dot (tf32=false) again on twice its default warps when ptxas
    spilled it; keep whichever spills less (the first on a tie). Only for the default warps: a num_warps the caller
    gives is kept.

    Triton multiplies such a dot on the FMA units, with slices of both operand tiles in registers beside the
    accumulator, so the spills follow the K tile more than the accumulator (default_num_warps' measure): on 4 warps
    a 128x128 tile spilled with K tiles of 32 and not of 16, and 128x64 and 64x128 tiles with K tiles of 64 (sm_90,
    ptxas 12.8). On 8 warps 7 of 9 such tiles spilled nothing. On the H200 (benchmarks/RESULTS.md,
    "Full-precision f32 and f64 matmuls") this ran six spilling tiles (128x128x32, 128x64x64, 64x128x64, 64x64x128,
    256x64x32, 64x256x32) 1.05-6.6x faster than 4 warps at 4096^3 and 4000^3, 12 of 12 (128x64x64 at 4096^3: 3098
    us against 20461). On the tiles that do not spill neither count won throughout (128x128x16 was 4-5% faster on 4
    warps at all four shapes measured, 128x64x16 2-8% slower), so they keep the default."""
    spilled = out.binary.extra.get("stack_bytes")
    full_f32 = any(d.args[0].type.dtype == "f32" and d.attrs.get("precision") == "ieee" for d in dots(out.kernel.body))
    if not spilled or not full_f32:
        return
    debug.note(f"kernel '{out.binary.name}': ptxas spilled {spilled} bytes per thread of a full-precision f32 dot on "
               f"{num_warps} warps; compiling again on {2 * num_warps}")
    if _triton_again(out, out.spec, arch, 2 * num_warps, num_stages):
        out.binary.extra["spilled_warps"] = (num_warps, spilled)  # tlec -v: why the binary has more warps


def _scan_without_spills(out: Compiled, arch, num_warps, num_stages) -> None:
    """Compile a kernel with a scan and no dot again on twice its default warps when ptxas spilled it; keep
    whichever spills less (the first on a tie). Only for the default warps, and only once: a second doubling spilled
    less still and ran slower.

    A scan keeps each thread's values live through its passes; the default gives it about 128 values a thread
    (default_num_warps), which one tile per program holds without spilling but a column scan carried through a
    loop does not: cumsum along axis 0 of [1024, 16] tiles plus a carry spilled 1292 bytes a thread (i32) and 932
    (f32) on 4 warps, 156 and 152 on 8, 136 and 84 on 16 (sm_90). On the H200 (benchmarks/RESULTS.md, "A carried
    column scan") it ran 279 us on 4 warps, 153 on 8 and 178 on 16 (i32, 8192 x 4096; f32 246, 139, 163); the same
    tile scanned once per program spilled nothing on 4 warps and ran fastest there (70.5 us against 72.2 on 8), so
    the default stays and only a spill doubles it."""
    from .targets.binary import max_shared_per_program
    spilled, limit = out.binary.extra.get("stack_bytes"), max_shared_per_program(arch)
    body = out.kernel.body
    if not spilled or next(dots(body), None) is not None or 2 * num_warps > 32 or \
            not any(isinstance(n, Op) and n.name == "scan" for n in nodes(body)):
        return
    if out.binary.shared_bytes() > limit:  # _within_shared_memory takes fewer warps instead, not more
        return
    debug.note(f"kernel '{out.binary.name}': ptxas spilled {spilled} bytes per thread of a scan on {num_warps} warps; "
               f"compiling again on {2 * num_warps}")
    if _triton_again(out, out.spec, arch, 2 * num_warps, num_stages, shared_limit=limit):
        out.binary.extra["spilled_warps"] = (num_warps, spilled)  # tlec -v: why the binary has more warps
        out.binary.extra["spilled_in"] = "scan"


def _triton_again(out: Compiled, spec: Spec, arch, num_warps, num_stages, shared_limit: int | None = None) -> bool:
    """Lower and compile out.kernel on the native path again, under `spec` and on `num_warps`; when ptxas spills
    that binary less than out.binary (and it needs no more than `shared_limit` bytes of shared memory, where given),
    it replaces out's module, binary and stages, and the answer is True (on a tie the first stays: the retries above
    change something only to take a spill away)."""
    retry = _native_retry(out, spec, arch, num_warps, num_stages)
    if retry.binary.extra.get("stack_bytes", 0) >= out.binary.extra["stack_bytes"] or \
            (shared_limit is not None and retry.binary.shared_bytes() > shared_limit):
        return False
    _take(out, retry)
    return True


def _native_retry(out: Compiled, spec: Spec, arch, num_warps, num_stages) -> Compiled:
    retry = Compiled(out.kernel, spec, out.abi, out.backend, arch, asserts=out.asserts)
    _triton(retry, _to_tle(retry), arch, len(STAGES["triton"]) - 1, num_warps, num_stages)
    return retry


def _take(out: Compiled, retry: Compiled) -> None:
    out.stages.update(retry.stages)
    out.module, out.binary = retry.module, retry.binary


def _within_shared_memory(out: Compiled, arch, num_warps, num_stages, warps_chosen: bool) -> None:
    """A native binary that asks for more shared memory than a program may have (max_shared_per_program) cannot
    launch. On the default warps the kernel is compiled again on half as many, down to one, until it fits: a
    cumsum along axis 0 of a 256 x 256 i32 tile took 262144 bytes on the default 16 warps (its values cross warps
    through shared memory: a copy of the whole tile) and 8 KB on 8. Where none fits, or the caller chose the warps
    or the stages (num_stages not None), it is an error at the kernel, before any launch: a matmul given 8 stages
    fitted only on 2 warps, spilling 1216 bytes a thread, which no one asking for 8 stages wants without a word."""
    from .targets.binary import max_shared_per_program
    limit, need = max_shared_per_program(arch), out.binary.shared_bytes()
    if need <= limit:
        return
    tried = [f"{need} bytes on {num_warps} warp{'s' if num_warps > 1 else ''}"]
    warps = num_warps // 2 if warps_chosen and num_stages is None else 0
    while warps >= 1:
        retry = _native_retry(out, out.spec, arch, warps, num_stages)
        if retry.binary.shared_bytes() <= limit:
            debug.note(f"kernel '{out.binary.name}': {tried[0]} of shared memory, more than {arch} allows a program "
                       f"({limit}); {retry.binary.shared_bytes()} on {warps}")
            _take(out, retry)
            out.binary.extra["shared_warps"] = (num_warps, need)  # tlec -v: why the binary has fewer warps
            return
        tried.append(f"{retry.binary.shared_bytes()} on {warps}")
        warps //= 2
    given = f" with num_stages={num_stages}" if num_stages is not None else ""
    raise TleError(out.kernel.span, f"kernel '{out.kernel.name}' needs more shared memory than {arch} gives a program "
                            f"({limit} bytes){given}: {', '.join(tried)}",
                   ["its tiles cross threads through shared memory (a reduction, scan, transpose or dot), and a "
                    "pipelined loop keeps num_stages copies of what it loads there: smaller tiles or fewer stages "
                    "need less" + ("" if warps_chosen else ", and so may another num_warps") +
                    ("; with num_stages left to its default, the compiler tries fewer warps itself"
                     if num_stages is not None and warps_chosen else "")])


def _next_hint(hint: int | None, has_dot: bool) -> int | None:
    """The occupancy hint to try next when tileiras spilled under `hint`: half as many programs per SM, down to 2,
    then none (tileiras' own register budget); from none, 2 for a kernel without a dot; None: nothing left."""
    if hint is None:
        return None if has_dot else 2
    return hint // 2 if hint > 2 else None


# Spills of at most this many bytes per thread keep the lowering's hint: a few values spilled, off the hot loop.
# Causal attention with 64x64 tiles (examples/attention.tle) spilled 8 bytes under its hint of 4 programs per SM and
# ran at 205.6 us; the retry's 2 programs per SM, without spills, at 222.7 (H200, 32 x 4096 x 64 f16). The spills
# the retry is for were 56 and 112 bytes (below).
SPILL_BYTES_KEPT = 16


def _without_spills(module, tileir, binary, arch, kernel: Kernel):
    """(Tile IR, binary) with the occupancy hint changed until tileiras no longer spills, when it did under the
    lowering's choice (a hint, or none); the same two objects when it did not spill or no retry spilled less.

    The hint caps registers per thread at 65536 / (programs x threads), and tileiras meets the cap by spilling to
    local memory when it must. The lowering's rule for 16-bit rows (8 programs per SM: 64 registers) fits the rows it
    was measured on, but a softmax backward pass over bf16 rows of 4096 (two f32 tiles live at once) spilled 56
    bytes per thread at 64 registers and ran at 59.2 us where 4 programs per SM, without spills, ran at 50.1 (H200;
    the Triton reference 50.8). Without a hint, tileiras gave a LayerNorm backward pass over bf16 rows of 4096 (a
    loop over 16 rows carrying two f32 tiles) 256 threads of 255 registers and spilled 112 bytes per thread: 136.2
    us; with 2 programs per SM it takes 128 threads, does not spill and runs at 89.7 (the native path 97.5, the
    Triton reference 108.1). Kernels with a dot keep tileiras' choice when it had no hint: no such kernel was timed
    with one. benchmarks/RESULTS.md has both. Only a kernel that spills more than SPILL_BYTES_KEPT pays for another
    tileiras run; a hint the caller gave (the `occupancy` launch option) is kept as given."""
    if binary.extra.get("stack_bytes", 0) <= SPILL_BYTES_KEPT:
        return tileir, binary  # the common case: nothing (or next to nothing) spilled
    from .dialects import cuda_tile as ct
    from .dialects.mlir import ir
    entry = ct.entries(tileir)[0]
    first = hint = ir.IntegerAttr(entry.attributes["occupancy"]).value if "occupancy" in entry.attributes else None
    has_dot = next(dots(kernel.body), None) is not None
    tried = {hint}
    while binary.extra.get("stack_bytes"):
        hint = _next_hint(hint, has_dot)
        if hint in tried:
            break
        tried.add(hint)
        spilled = binary.extra["stack_bytes"]
        debug.note(f"kernel '{binary.name}': tileiras spilled {spilled} bytes per thread under the occupancy hint "
                   f"{first}; compiling again with {hint or 'no'} hint")
        compiled = _compiled_with_hint(module, arch, hint, kept=binary)
        if compiled is None:
            continue  # tileiras failed on this hint: the next may still take the spill away
        retry, retried = compiled
        if retried.extra.get("stack_bytes", 0) < spilled:
            was = binary.extra.get("spilled_under") or (first, spilled)
            retried.extra["spilled_under"] = (*was[:2], hint)  # (first hint, its spill, the hint kept): tlec -v
            _carry_failed_retries(binary, retried)
            tileir, binary = retry, retried
    if has_dot:
        tileir, binary = _on_eight_worker_warps(module, tileir, binary, arch)
    return tileir, binary


def _on_eight_worker_warps(module, tileir, binary, arch):
    """(Tile IR, binary) compiled again on 8 worker warps, for a kernel with a dot that still spills more than
    SPILL_BYTES_KEPT on tileiras' 4 after the occupancy retries, when the retry spills less; else the same two.

    The lowering asks for 8 where it can count the accumulator values live at once (_worker_warps there), but dots
    hold more than their accumulators: attention's backward dk/dv kernel at BN = 128, D = 64 carries two 128x64
    tiles (within 4 warps' budget) beside two 128x64 products recomputed each step, and spilled 144 bytes per
    thread on 4 worker warps at 255 registers; on 8, 168 registers and none. H200, 32 x 4096 x 64 f16: 1283.6 ->
    594.5 us (the native path 676.7; benchmarks/RESULTS.md "Two accumulators in one loop"). No dot kernel that
    spilled on 4 worker warps has run faster there than on 8."""
    from .dialects import cuda_tile as ct
    from .dialects.mlir import ir
    spilled = binary.extra.get("stack_bytes", 0)
    entry = ct.entries(tileir)[0]
    if spilled <= SPILL_BYTES_KEPT or "num_worker_warps" in entry.attributes:
        return tileir, binary
    debug.note(f"kernel '{binary.name}': tileiras spilled {spilled} bytes per thread on 4 worker warps; compiling "
               "again on 8")
    # the occupancy hint of the IR kept so far (the last retry tried may have been dropped)
    occupancy = ir.IntegerAttr(entry.attributes["occupancy"]).value if "occupancy" in entry.attributes else None
    compiled = _compiled_with_hint(module, arch, occupancy, worker_warps=8, kept=binary)
    if compiled is None or compiled[1].extra.get("stack_bytes", 0) >= spilled:
        return tileir, binary
    retry, retried = compiled
    retried.extra["spilled_on_4_warps"] = spilled  # tlec -v: why the binary has 8 worker warps
    _carry_failed_retries(binary, retried)
    if "spilled_under" in binary.extra:
        retried.extra["spilled_under"] = binary.extra["spilled_under"]
    return retry, retried


def _past_one_program(module, tileir, binary, arch, kernel: Kernel):
    """(Tile IR, binary) compiled again with an occupancy hint of 2 programs per SM, for a kernel without a dot that
    tileiras left at one program per SM without a hint and without spills (more than 128 registers on its 8 worker
    warps), when the retry spills no more than SPILL_BYTES_KEPT; else the same two objects. One program of 8 warps
    leaves a memory-bound SM little to hide latency with. Measured on the H200 (benchmarks/RESULTS.md "Wide rows"),
    cumsum over 4096 rows of 12800 and 16384 elements: bf16 93.3 -> 58.3 and 98.5 -> 69.6 us, f32 127.0 -> 106.4 and
    143.2 -> 135.0 (the native path 54.8, 69.7, 105.9, 135.3; the f32 row of 12800 spills 8 bytes under the hint).
    Where 2 programs spill more it loses (the same kernels at 32000, 208 and 296 bytes: 185.7 -> 193.0 and 260.5 ->
    485.2 us; layernorm, 176 bytes: 177.6 -> 284.6), so such a retry is dropped."""
    if _programs_per_sm_unhinted(tileir, binary, arch, kernel) != 1:
        return tileir, binary
    debug.note(f"kernel '{binary.name}': tileiras fits one program per SM ({binary.extra['registers']} registers); "
               "compiling again with an occupancy hint of 2")
    return _kept_unless_it_spills(module, tileir, binary, arch, 2, "one_program", binary.extra["registers"])


# Warps per SM that _to_twelve_warps asks for. Measured on the H200 (benchmarks/RESULTS.md "Greedy decoding at 12 warps
# per SM"): a bf16 argmax streaming rows of 32000-128256 (205 registers, 2 programs of 4 warps per SM) ran 1.29-1.34x
# faster at 3 programs (tileiras then fits 4); a cross-entropy already at 3 programs of 4 warps ran 6% slower at 4 in
# bf16 (14% faster in f32), so the rule stops at 12.
_WARPS_PER_SM = 12


def _to_twelve_warps(module, tileir, binary, arch, kernel: Kernel, spec: Spec):
    """(Tile IR, binary) compiled again with an occupancy hint of enough programs for _WARPS_PER_SM warps per SM, for
    a kernel without a dot that tileiras left, without a hint and without spills, at two or more programs per SM
    but fewer warps (registers the limit), on a launch of more than two waves (ManyWaves), when the retry spills no
    more than SPILL_BYTES_KEPT; else the same two objects. The greedy argmax above (1024 and 4096 rows) went 88.5 ->
    68.6 and 95.5 -> 71.3 us, past the native path's 70.9 and 72.6; on grids under one wave (1 and 64 rows) the hint
    only changes the code, and lost (10.7 -> 12.4, 20.6 -> 22.0 us), hence the grid's bound. A LayerNorm backward
    pass in f32 at 2 programs spills 112 bytes per thread at 3, so it keeps its cubin."""
    from .abi import ManyWaves
    programs = _programs_per_sm_unhinted(tileir, binary, arch, kernel)
    warps = -(-binary.num_threads // 32)
    # (a binary _past_one_program kept has its hint of 2, so _programs_per_sm_unhinted gives None for it)
    if ManyWaves() not in spec.inside or programs is None or programs < 2 or programs * warps >= _WARPS_PER_SM:
        return tileir, binary
    hint = -(-_WARPS_PER_SM // warps)
    registers = binary.extra["registers"]
    debug.note(f"kernel '{binary.name}': tileiras fits {programs} programs of {warps} warps per SM ({registers} "
               f"registers) on a launch of more than two waves; compiling again with an occupancy hint of {hint}")
    return _kept_unless_it_spills(module, tileir, binary, arch, hint, "few_warps", (registers, programs, warps, hint))


def _programs_per_sm_unhinted(tileir, binary, arch, kernel: Kernel) -> int | None:
    """The programs per SM tileiras fits for a kernel without a dot that it compiled without an occupancy hint and
    without spills, where registers are what limits them (so a hint can raise them); else None."""
    from .dialects import cuda_tile as ct
    from .targets.binary import resident_programs
    extra = binary.extra
    if (extra.get("registers") is None or extra.get("stack_bytes") or extra.get("spilled_under")
            or next(dots(kernel.body), None) is not None
            or "occupancy" in ct.entries(tileir)[0].attributes):
        return None
    programs, limit = resident_programs(extra["registers"], binary.num_threads, binary.shared_bytes(), arch)
    return programs if limit == "registers" else None


def _kept_unless_it_spills(module, tileir, binary, arch, hint: int, why: str, first):
    """(Tile IR, binary) compiled again with the occupancy hint `hint`, with `first` (what the first compile gave)
    recorded as extra[why] for tlec -v, when the retry spills no more than SPILL_BYTES_KEPT; else the same two."""
    compiled = _compiled_with_hint(module, arch, hint, kept=binary)
    if compiled is None or compiled[1].extra.get("stack_bytes", 0) > SPILL_BYTES_KEPT:
        return tileir, binary
    retry, retried = compiled
    retried.extra[why] = first
    _carry_failed_retries(binary, retried)
    return retry, retried


# How long tileiras may take over a kernel's first compile: with --backend tileir, targets/tileir.py's limit
# (DEFAULT_TIMEOUT_S); under auto, which can compile the kernel on the native path instead, 120 s, twice the
# longest a kernel that auto sent to Tile IR took in the porters' reports (a 3x3 convolution, 30-57 s), since a
# path that compiles for minutes is not the better one for its user. A porter's persistent grouped GEMM never
# finished there (10 minutes, tileiras 13.5) and compiled natively in 2.4 s.
AUTO_TILEIRAS_TIMEOUT_S = 120.0

# A kernel that took tileiras longer than this gets none of the retries above: each would take as long again. A
# sort of 32768-element rows (a sorting network of 120 stages) took it about 7 minutes and 10 GB, and the spill
# retry as much again, for a binary that was then dropped (CPU machine, fiftieth session). Retries pay on kernels
# that compile in under a second.
TILEIRAS_RETRY_S = 30.0


def _compiled_with_hint(module, arch, occupancy: int | None, worker_warps="auto", *, kept):
    """(Tile IR, binary) of the kernel lowered with this occupancy hint (None: no hint) and num_worker_warps hint
    ("auto": the lowering's) and run through tileiras: one try of the retries above, to improve the binary `kept`.
    None where tileiras fails on it: `kept` compiled, so the retry is dropped rather than the build (the failure
    is noted, and recorded as kept.extra["retry_failed"] for tlec -v). tileiras 13.5.37 compiled a user's gated
    linear attention (a [256, 64] f32 state carried through its loop) with 152 bytes of spills, then exited with
    status 5 on the retry on 8 worker warps, under any occupancy hint."""
    from .lowering.tle_to_tileir import TileirOptions, tle_to_tileir
    from .targets.tileir import TileirasCrash, compile_tileir
    tileir = tle_to_tileir(module, TileirOptions(occupancy=occupancy, num_worker_warps=worker_warps))
    try:
        with debug.timed("tileiras"):  # (only kernels whose first compile took under TILEIRAS_RETRY_S are retried)
            return tileir, compile_tileir(tileir, arch, timeout_s=AUTO_TILEIRAS_TIMEOUT_S)
    except TleError as e:  # a crash, a timeout, or an error at a line that the first compile did not have
        what = (f"on {worker_warps} worker warps" if worker_warps != "auto" else
                f"with an occupancy hint of {occupancy}" if occupancy else "with no occupancy hint")
        why = f"{e.message}, exit status {e.status}" if isinstance(e, TileirasCrash) else e.message
        debug.note(f"kernel '{kept.name}': tileiras failed on the retry {what} ({why}); keeping the binary compiled "
                   "before it")
        kept.extra.setdefault("retry_failed", []).append((what, why))
        return None


def _carry_failed_retries(binary, retried) -> None:
    """Keep the record of the retries that failed on `binary` when a later retry's binary replaces it."""
    if "retry_failed" in binary.extra:
        retried.extra["retry_failed"] = binary.extra["retry_failed"]


def _tileir(out: Compiled, module, arch, upto, occupancy: int | None = None,
            timeout_s: float | None = None) -> None:
    order = STAGES["tileir"]
    from .lowering.tle_to_tileir import TileirOptions, tle_to_tileir
    with debug.timed("tle_to_tileir"):
        # occupancy: the caller's programs per SM for tileiras' occupancy hint, in place of the lowering's choice
        tileir = tle_to_tileir(module, TileirOptions(occupancy=occupancy) if occupancy is not None else None)
    out.stages["tileir"] = tileir.operation.get_asm(enable_debug_info=debug.level() >= 2)
    debug.dump("tileir", out.stages["tileir"])
    if upto <= order.index("tileir"):
        return
    from .targets.tileir import compile_tileir, encode_bytecode
    if upto == order.index("tilebc"):
        out.stages["tilebc"] = encode_bytecode(tileir)
        return
    started = time.monotonic()
    with debug.timed("tileiras"):
        binary = compile_tileir(tileir, arch, **({"timeout_s": timeout_s} if timeout_s else {}))
    took = time.monotonic() - started
    if occupancy is None and took > TILEIRAS_RETRY_S:
        debug.note(f"kernel '{binary.name}': tileiras took {took:.0f} s; no retries under other hints")
    elif occupancy is None:
        kept, binary = _without_spills(module, tileir, binary, arch, out.kernel)
        kept, binary = _past_one_program(module, kept, binary, arch, out.kernel)
        kept, binary = _to_twelve_warps(module, kept, binary, arch, out.kernel, out.spec)
        if kept is not tileir:  # the retried IR is what the cubin was built from
            out.stages["tileir"] = kept.operation.get_asm(enable_debug_info=debug.level() >= 2)
    out.binary = binary
    out.stages["tilebc"] = binary.stages.get("tilebc")
    out.stages["cubin"] = binary.cubin
