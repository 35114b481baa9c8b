"""Can a tle kernel take the CUDA Tile IR path? `tileir_blockers(module, arch) -> list[Blocker]`; empty: yes.

Each Blocker names what stands in the way and where (a .tle span): an op lowering/tle_to_tileir.py has no lowering
for, a tile shape Tile IR cannot hold (every dimension must be a power of two), an element-type combination Tile
IR's ops do not take (see _op_reason), an architecture tileiras does not compile for, or a missing tool (tileiras,
the pinned bytecode writer). The backend router prints the first one when it falls back to the native CUDA path:

    tle: kernel 'k' runs on the native CUDA path (Triton): <reason> at file:line:col

and raises it as a TleError when the Tile IR path was asked for explicitly.

`tileir_slower(module) -> list[Blocker]` names what Tile IR can compile but runs much slower than the native path
(measured on the H200). backend="auto" routes such a kernel to the native path and says why, in the same words;
backend="tileir" still compiles it.

Loads whose padding a partition view cannot express (pad=1.0) are not blockers: the lowering reads them through a
masked tile of pointers instead.
"""
from __future__ import annotations

import functools
import math
import re
import subprocess
from dataclasses import dataclass

from ..diagnostics import Span, TleError, span_of_location
from ..dialects.mlir import ir, nested_ops
from ..dialects.tle import SCANS, combine_func, is_kernel
from .tle_to_tileir import (F8, HALF, LOWERED_OPS, carried_partner, enclosing_loop, largest_tile, operand_gather,
                            tle_type, tle_to_tileir, unaligned_operand)

__all__ = ["Blocker", "tileir_blockers", "tileir_slower", "tileiras_archs"]

# What tileiras 13.5 lists under --gpu-name (used when it cannot be asked).
KNOWN_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
               "sm_120", "sm_121")


@dataclass(frozen=True)
class Blocker:
    """One reason a kernel cannot take the Tile IR path, at a source span (None: not tied to the source)."""
    span: Span | None
    reason: str

    def __str__(self) -> str:
        return f"{self.reason} at {self.span}" if self.span is not None and self.span.line > 0 else self.reason


def tileir_blockers(module: "ir.Module", arch: str) -> list[Blocker]:
    """Everything that keeps the kernels of a tle module off the Tile IR path for `arch` (e.g. "sm_90")."""
    kernels = [op.operation for op in module.body.operations if is_kernel(op.operation)]
    where = span_of_location(kernels[0].location) if kernels else None
    blockers = _tool_blockers(arch, where)
    op_blockers = []
    for kernel in kernels:
        for op in nested_ops(kernel):
            reason = _op_reason(op, arch)
            if reason is not None:
                op_blockers.append(Blocker(span_of_location(op.location), reason))
    if not op_blockers:
        # The rules above cover what the lowering rejects; lowering once catches anything they miss.
        try:
            tle_to_tileir(module)
        except TleError as e:
            op_blockers.append(Blocker(e.span, e.message))
    return blockers + op_blockers


# ---- kernels Tile IR takes, but much slower ---------------------------------------------------------------------

# Measured on the H200 (tileiras 13.5; benchmarks/RESULTS.md, fourteenth session), each against the native path in
# the same run, with every Tile IR hint the lowering has tried (latency, worker warps, occupancy, TMA off).
# A gathered operand, again in the thirty-fourth session (RESULTS.md "Convolution as an implicit GEMM"): tileiras
# stages it with cp.async like Triton, yet MoE GEMMs ran 1.5-2.0x slower on grids of 64 to 256 programs.
# Convolutions went either way: Tile IR 0.85-0.92x on the 9 of 16 with 128-filter tiles on at most one wave,
# 1.03-1.57x on the other 7. No rule told the MoE GEMMs of one wave from those convolutions, so every gathered
# operand takes the native path.
_GATHERED_OPERAND = ("a dot operand is gathered through pointers, which tileiras ran up to 3.2x slower than the "
                     "native path (H200: mixture-of-experts GEMMs 1.5-3.2x, convolutions 0.85-1.57x)")


def _gathered_operand(dot, gather) -> str:
    """_GATHERED_OPERAND, naming the gather where it is not the operand itself (a weight dequantised by gathered
    per-group scales: the whole tile is multiplied by a gathered one)."""
    if any(v.owner == gather for v in list(dot.operands)[:2] if not isinstance(v.owner, ir.Block)):
        return _GATHERED_OPERAND
    at = span_of_location(gather.location)
    return _GATHERED_OPERAND.replace("a dot operand is gathered through pointers",
                                     f"a dot operand is computed from a tile gathered through pointers (the gather "
                                     f"at {at.file}:{at.line}:{at.col})", 1)


_SCALED_PRODUCT = ("a dot's product is scaled before it joins a loop-carried accumulator, which tileiras runs 1.6x "
                   "slower than the native path (a block-scaled FP8 GEMM, H200)")
# A dot accumulator of more than 128x256 values: tileiras runs a CTA on at most 8 worker warps, whose threads then
# hold more than 128 accumulator values each beside the operands, and spill. Measured on the H200 (twenty-seventh
# session; benchmarks/RESULTS.md "Occupancy 2 for one dot on 64x64 to 64x128 tiles"), examples/matmul.tle at 256x256
# (tlec -v: 168 registers on 384 threads, 1,968 bytes of stack) against the native path's 8 warps: 4096x4096x128
# 114.8 against 66.6 us, 4096x4096x512 400.5 against 196.0, 8192x8192x1024 f16 3180.9 against 1532.3.
WIDE_ACCUMULATOR = 128 * 256


def _wide_accumulator(shape) -> str:
    return (f"a dot's accumulator holds {'x'.join(map(str, shape))} values, more than the {WIDE_ACCUMULATOR} "
            "(128x256) that tileiras' 8 worker warps hold without spilling: 256x256 matmuls ran 1.7-2.1x slower than "
            "on the native path (H200)")


# One dot of at most 64x64x32 multiply-adds per K step (a 64x64 accumulator with K tiles of 32, 32x64 or 16x128
# with 64, 16x64 with 128), on a launch of more than two waves (tle.many_waves; tle/abi.py ManyWaves). Measured on
# the H200 (twenty-eighth session; benchmarks/RESULTS.md "Small dot tiles past two waves"), examples/matmul.tle on
# Tile IR with the lowering's hints (occupancy 2) against the native path's defaults, f16 and bf16, square-ish
# products of 512 to 2048 (the twenty-seventh session's up to 8192) and decode-like ones (M of 16 to 128 against
# 4096x4096 to 28672x4096): the native path was faster on 44 of 45 such launches, by 1.01-1.62x (e.g.
# 2048x2048x1024 at 64x64x32: 41.2 against 25.4 us), and slower on one (64x14336x4096 at 16x64x128: 76.2 against
# 67.9); the twenty-seventh session's 17 (4 to 124 waves) were all faster natively, by 1.05-1.65x. On launches of
# up to two waves Tile IR won 16 of 18 (by 1.02-1.75x: decode grids under one wave, where Tile IR's split-K
# kernels are the fastest, stay there), and on bigger steps (64x64x64, 64x128x32, 16x128x128) neither path won
# throughout.
SMALL_DOT_MACS = 64 * 64 * 32


def _dot_step(dot) -> tuple[tuple, int]:
    """A tle.dot's accumulator shape and its K (a's last axis): one call does prod(shape) * K multiply-adds."""
    return tle_type(dot.operands[2].type)[1] or (1,), (tle_type(dot.operands[0].type)[1] or (1,))[-1]


def _multiply_adds(dot) -> int:
    acc, k = _dot_step(dot)
    return math.prod(acc) * k


def _small_dot(dot) -> str:
    acc, k = _dot_step(dot)
    return (f"the kernel's one dot takes {'x'.join(map(str, acc))}x{k} multiply-adds a step (64x64x32 or fewer) "
            "on a launch of more than two waves: matmuls with steps this small ran 1.01-1.65x faster on the native "
            "path (61 of 62 launches, H200)")


# One dot of at most 64x64x64 multiply-adds a step (16x64x128, 32x64x128, 16x128x128: split-K's decode tiles) in a
# kernel with atomics, on a launch of more programs than SMs (tle.many_programs). Measured on the H200 (twenty-eighth
# session; benchmarks/RESULTS.md "Split-K with atomics past one wave"), bf16, M of 1 to 32 against 4096x4096 to
# 28672x4096 weights, Tile IR with its occupancy hint against the native path's defaults: examples/matmul_splitk.tle
# (the last program to arrive at a tile's counter sums the partials) 10 of 10 launches of 224 to 3584 programs
# faster natively (1.01-1.23x), and a split-K that atomic_adds its f32 partial tile into C 12 of 12 (1.03-1.90x).
# Under one wave the two went either way (Tile IR 1.14-1.45x faster on 2 of 4 atomic_add launches), and decode's
# one-wave grids stay on Tile IR.
SPLIT_K_MACS = 64 * 64 * 64
_SPLIT_K_ATOMICS = ("an atomic in a kernel whose one dot takes at most 64x64x64 multiply-adds a step (split-K's "
                    "tiles), on a launch of more programs than SMs: such split-K matmuls ran 1.01-1.90x faster on the "
                    "native path (22 of 22 launches, H200)")


# Three or more dots in one loop step, each of at most 64x64x64 multiply-adds (attention's backward at head dim 64
# on 64x64 tiles: dq's Q K^T, dO V^T and dS K, dk/dv's four), on a launch of more than two waves (tle.many_waves).
# Measured on the H200 (thirty-sixth session; benchmarks/RESULTS.md "Attention's backward at head dim 64"),
# examples/attention_bwd.tle f16 at S of 1024, 4096 and 16384 (2048 programs each), causal and not, Tile IR with
# the lowering's hints against the native path's defaults: dq ran faster natively on 6 of 6 (1.03-1.14x), dk/dv on
# the 3 non-causal (1.08-1.17x) and slower on the 3 causal (Tile IR 1.03-1.07x faster); the two together 1.01-1.14x
# faster natively on 6 of 6, and the training step's three kernels (forward on Tile IR, which won all 6)
# 1.01-1.10x. At head dim 128 (steps of 64x64x128) Tile IR won all 18 kernels, by 1.03-1.35x: the forward's two
# dots a step won at both head dims, and 128-wide tiles at 64 (dk/dv at BN = 128) ran faster on Tile IR too.
CHAINED_DOTS = 3
CHAINED_DOT_MACS = 64 * 64 * 64


def _small_dots_in_one_step(dots) -> list:
    """The dots of the first loop whose step holds CHAINED_DOTS or more dots, each of at most CHAINED_DOT_MACS
    multiply-adds; [] when no loop does."""
    loops: dict = {}
    for dot in dots:
        if (loop := enclosing_loop(dot)) is not None:
            loops.setdefault(loop, []).append(dot)
    for step in loops.values():
        if len(step) >= CHAINED_DOTS and all(_multiply_adds(d) <= CHAINED_DOT_MACS for d in step):
            return step
    return []


def _many_small_dots(step) -> str:
    return (f"one loop step holds {len(step)} dots of at most 64x64x64 multiply-adds each, on a launch of more than "
            "two waves: attention's backward at head dim 64 ran its dq and dk/dv kernels 1.01-1.14x faster "
            "together on the native path (6 of 6 shapes, H200)")


# A dot at full precision on f32 or f64 operands (f32 without tf32=true, any f64): tileiras runs the f32 product on
# the FMA units, holding its tiles in registers that spill, and the f64 one on DMMA at half the native path's rate.
# Measured on the H200 (thirty-second session; benchmarks/RESULTS.md "Full-precision f32 and f64 matmuls"), a
# matmul as a user writes it (tiles of 64x64 to 128x256, K tiles of 16 and 32) on Tile IR against the native path
# at the same tiles and 4 warps: f32 at 4000^3 and 4096^3 16.3-32.9 ms against 3.0-6.6 (3.1-9.9x slower on 14 of 14
# launches; 64x64x32 at 4000^3 23.2 against 3.0, torch 2.6), f64 at 1024^3 to 4096^3 1.3-1.9x slower (13 of 13).
_FULL_PRECISION = {"f32": "f32 operands at full precision (tf32=false): tileiras multiplies them on the FMA units, "
                          "spilling, and 4000^3 and 4096^3 matmuls ran 3.1-9.9x slower than on the native path (14 "
                          "of 14 launches, H200)",
                   "f64": "f64 operands: 1024^3 to 4096^3 matmuls ran 1.3-1.9x slower on Tile IR than on the "
                          "native path (13 of 13 launches, H200)"}


# A dot into an f16 accumulator: the lowering widens it to f32 for each mmaf and narrows it back (the interpreter's
# rounding, once per dot), which tileiras does in registers every K step (HADD2.F32 and F2FP in the SASS). Measured
# on the H200 (thirty-second session; benchmarks/RESULTS.md "Full-precision f32 and f64 matmuls"), f16 matmuls at
# 128x128x64 and 128x256x64: 4096^3 345.1 and 474.8 us against the native path's 212.0 and 258.3, 8192^3 2777.8 and
# 3991.2 against 1894.8 and 2206.1 (1.47-1.84x slower, 4 of 4).
_F16_ACCUMULATOR = ("an f16 accumulator, which the Tile IR lowering widens to f32 and narrows back every K step: f16 "
                    "matmuls ran 1.47-1.84x slower than on the native path (4 of 4, H200); an f32 accumulator is "
                    "faster on both paths")


def _slow_dot(dot) -> str | None:
    """Why a tle.dot's element types make Tile IR much slower (_FULL_PRECISION, _F16_ACCUMULATOR), or None."""
    elem = tle_type(dot.operands[0].type)[0]
    if tle_type(dot.operands[2].type)[0] == "f16":
        return _F16_ACCUMULATOR
    if elem == "f32" and ir.StringAttr(dot.attributes["precision"]).value == "tf32":
        return None
    return _FULL_PRECISION.get(elem)


# A dot of at least 128x128 accumulator values with an operand read from a tensor whose rows TMA cannot read (its base
# not 16-byte aligned or a stride not a multiple of 16 bytes: an odd K, K = 4100, a slice one element in; the launch
# proves it, tle/abi.py UnalignedRows). Without TMA tileiras loads such tiles with plain loads it does not pipeline as
# far as Triton's. Measured on the H200 (thirty-third session; benchmarks/RESULTS.md "Matmuls on rows not 16-byte
# aligned"), examples/matmul.tle f16 and bf16 at 128x128x64, 128x256x64 and 128x128x32, Tile IR against the native
# path at the same tiles and its default warps: 1.04-3.31x slower on 42 of 42 launches (2048^2x2052 to
# 8192^2x8196, K or N of 4098, 4099 and 4100, transposed and sliced operands; 4096x4096x4099 at 128x128x32 1991 us
# against 601). At 64x128x64 the two went either way (Tile IR 0.43-0.98x on 11 of 16, 1.07-5.4x slower on 4), so the
# rule starts at 128x128. A dot in a loop Tile IR splits (an odd K; _in_split_loop) is not such a case. Where only
# the output is unaligned (x @ w.t() with N = 4099) Tile IR was as fast or faster (0.92-1.07x, 7 launches), so the
# rule reads the dot's operands.
UNALIGNED_MIN_ACC = 128 * 128
_UNALIGNED_OPERAND = ("a dot operand is read from a tensor whose rows are not 16-byte aligned (its base, or a stride "
                      "other than 1, is not a multiple of 16 bytes), which tileiras cannot load with TMA: matmuls with "
                      "such operands and 128x128 or larger tiles ran 1.04-3.31x slower than on the native path (42 of "
                      "42 launches, H200)")


# Measured on the CPU (fifteenth session): tle's Tile IR compile against its native compile. At run time the Tile
# IR code is the faster (a top-8 of 256 for 65536 tokens: 58.5 against 66.3 us, H200, twenty-third session); the
# twenty-second session's faster-compiling form of the networks' steps ran 1.55x slower and was dropped
# (benchmarks/RESULTS.md, "Sorting networks on Tile IR"). backend="tileir" still compiles them there.
_SORTING_NETWORK = ("sort()/topk() build a sorting network that tileiras compiles slowly: a sort of 1024 took 37 s "
                    "to compile for Tile IR, a top-8 of 1024 10 s, against about 2 s on the native path")
# A sort of 16 elements is 10 compare-and-swap steps, one pair reduction (an axis of size 2) each; user code
# rarely reduces along an axis of 2 at all.
SORTING_NETWORK_STEPS = 10
# Measured on the H200 (twentieth session; benchmarks/RESULTS.md "Scans"), cumsum over 4096 rows in one tile, Tile
# IR (auto's route until then) against the native path's default warps: level at 8192 elements and below, and in f32
# up to 32768; in bf16 1.07-1.15x at rows of 10000 and 12800, 1.29x at 32000 and 1.14x at 65536, in f32 1.17x at
# 65536; never more than 1% faster. The rule reads the length of the scanned axis, which those rows were: a column
# cumsum of [1024, 16] tiles (16384 elements, an axis of 1024) ran 1.16-1.19x faster on Tile IR than natively in 3 of
# 4 cases and 0.94x in the fourth (H100, fifty-fourth session, benchmarks/scan_warps_probe.py --tileir), which the
# tile's element count had sent to the native path.
WIDE_SCAN_ELEMENTS = 8192


def _wide_scan(length: int) -> str:
    return (f"a scan along an axis of {length} elements, more than {WIDE_SCAN_ELEMENTS}: tileiras ran cumsum over rows "
            "that long up to 1.29x slower than the native path, and never faster (H200)")


# A reduction along the last axis of 16,385 to 32,768 elements, in a kernel without a dot: tileiras runs a CTA on at
# most 8 worker warps, so each thread holds over 64 of the tile's values, where the native path gives such a kernel
# 16 or 32 warps (tle.compiler.default_num_warps). Measured on the H200 (twenty-first session; benchmarks/RESULTS.md
# "Reductions over 16,385 to 32,768 elements"), Tile IR against the native path's default:
# - rows in one 32768-element tile (softmax, LayerNorm, RMSNorm over 4096 rows of 20000 and 32000; 32 warps):
#   softmax bf16 1.40x slower, RMSNorm bf16 1.22-1.23x, LayerNorm bf16 1.08-1.09x, the f32 rows 1.01-1.07x
#   (LayerNorm f32 at 20000 the one exception, 0.98x);
# - rows streamed in 32768-element tiles (cross-entropy, greedy and a vocabulary softmax over 1024 x 128256 and
#   4096 x 32000; 16 warps): 1.05-2.08x slower on all 12.
# A column sum (a reduction along axis 0 of 256x128 or 128x256 tiles, 16384 x 4096) ran 1.5-2.7x faster on Tile IR
# than on the native path at 8 or 16 warps, so the rule asks for the last axis. Above 32768 both paths spill and
# neither wins (at 65536-element tiles Tile IR ran 0.31x to 3.0x the native path's time), so the rule stops there.
# The band is the one tle/compiler.py gives 32 warps (FULL_SM_TILE); a lowering module does not import the driver,
# so test_a_reduction_over_16385_to_32768_elements_takes_the_native_path checks that the two name the same kernels.
WIDE_REDUCTION_ELEMENTS = (8 * 32 * 64, 32 * 32 * 32)


def _wide_reduction(elements: int) -> str:
    lo, hi = WIDE_REDUCTION_ELEMENTS
    return (f"a reduction along the last axis of {elements} elements (more than {lo}, at most {hi}) without a dot: "
            f"tileiras' 8 worker warps hold {elements // 256} values a thread where the native path gives 16 or 32 "
            "warps, and softmax, norms, cross-entropy and argmax over rows that wide ran up to 2.1x slower on Tile "
            "IR (H200)")


# Integer division or remainder of a tile by a run-time value, in a loop of a kernel without a dot. tileiras divides
# every element (a signed division by a loop-invariant value: some ten instructions), where Triton's axis analysis
# sees that a run of contiguous values divided by a multiple of 16 has one quotient and divides once per run.
# Measured on the H200 (forty-first session; benchmarks/RESULTS.md "GroupNorm, a KV-cache write and a GEMV"), the
# probe's GroupNorm (the channel of each element, `col / HW`, per element of a 4096-wide tile), Tile IR against the
# native path: bf16 88.3 against 61.4 us (16x512x64x64), 13.4 against 10.3 (8x1280x16x16), 78.5 against 57.0
# (2x320x128x128); f32 118.3 against 111.5, 14.8 against 12.2, and 128.9 against 131.1 (the one launch Tile IR won, by
# 2%). With the divisor a compile-time power of two (a shift), Tile IR took 69.8 us at 16x512x64x64 bf16: the
# division was two thirds of the gap. A division of scalars (a row's start) costs one instruction sequence per
# program and is not counted; divisions outside loops were not measured.
_TILE_DIVISION = ("a tile is divided by a run-time value inside a loop (integer `/` or `%`): tileiras divides every "
                  "element, where the native path divides once per run of 16 contiguous values, and a GroupNorm "
                  "ran 1.2-1.45x slower on Tile IR (H200)")
_DIVISIONS = ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui")


def _tile_division(op) -> bool:
    """A tile divided (or taken modulo) by a value that is not a constant, inside a loop."""
    if op.name not in _DIVISIONS or tle_type(op.result.type)[1] is None:
        return False
    divisor = op.operands[1]
    while not isinstance(divisor.owner, ir.Block) and divisor.owner.name in ("tle.splat", "tle.broadcast"):
        divisor = divisor.owner.operands[0]
    if not isinstance(divisor.owner, ir.Block) and divisor.owner.name == "arith.constant":
        return False
    return enclosing_loop(op) is not None


# A reduction over small groups of neighbouring elements: a reduce along the last axis of a tile that a reshape made
# by cutting its source's last axis into groups of G <= 8 (`max(reshape(t, [BH, 2, BW, 2]), axis=3)`, a 2x2 max
# pooling; `sum(reshape(t, [BM, BK / 4, 4]), axis=2)`). In the pooling, tileiras moves the regrouped tile through
# shared memory element by element (24 16-bit STS, 16 LDS, two barriers). Measured on the H200 (forty-third session;
# benchmarks/RESULTS.md "Reductions over small groups"), 16384x8192 bf16 summed or maxed in groups of G, tiles of
# 16x256, 8x256 and 32x128, Tile IR against the native path: G = 2 2.2-4.4x slower, G = 4 1.2-2.3x, G = 8
# 1.00-1.09x, G = 32 and 128 level; the probe's 2x2 max pooling 2.4-2.7x (52.5 against 19.3 us at 32x64x112x112).
# Tile IR was faster at no G up to 8; sorts of 4 and 8 along rows (steps of such pairs) ran level on both paths.
SMALL_GROUP = 8


def _small_groups(G: int) -> str:
    return (f"a reduction over groups of {G} neighbouring elements (a reshape cuts the last axis into groups of "
            f"{G}, and a reduce takes each group): tileiras moves such tiles through shared memory, and reductions "
            f"over groups of 2 to {SMALL_GROUP} ran up to 4.4x slower on Tile IR (H200)")


def _small_group_reduction(op) -> int:
    """G for a tle.reduce along the last axis of a reshape's result (through elementwise ops and casts of that
    shape) that cut its source's last axis into groups of 2 <= G <= SMALL_GROUP; else 0."""
    if op.name != "tle.reduce":
        return 0
    shape = tle_type(op.operands[0].type)[1]
    if not shape or ir.IntegerAttr(op.attributes["axis"]).value != len(shape) - 1 or \
            not 2 <= shape[-1] <= SMALL_GROUP:
        return 0
    todo, seen = [op.operands[0]], set()
    while todo:
        v = todo.pop()
        if isinstance(v.owner, ir.Block) or v.owner.operation in seen or tle_type(v.type)[1] != shape:
            continue
        seen.add(v.owner.operation)
        if v.owner.name == "tle.reshape":
            source = tle_type(v.owner.operands[0].type)[1] or (1,)
            if source[-1] > shape[-1]:
                return shape[-1]
        elif v.owner.name.startswith(("arith.", "math.")):
            todo.extend(v.owner.operands)
    return 0


# A row kernel on short 16-bit rows: no dot and no loop, a reduce along a tile's last axis, the largest tiles it loads
# (the rows) f16 or bf16, and its largest tile more than 128 (the native path's one-warp bound) and at most 1024
# elements. Smaller side inputs may be of any type: with f32 rotary cos and sin beside bf16 heads (the probe's
# qk_norm_rope, 4-16 heads of 128 a program) Tile IR took 1.05-1.23x the native path's time, and with an f32
# temperature per row (a softmax of bf16 rows of 256-1024) 1.03-1.10x (forty-fifth session, 12 of 12 slower). Measured
# on the H200 (forty-fourth session; benchmarks/RESULTS.md "Short 16-bit rows"), examples/ LayerNorm, softmax and
# RMSNorm, bf16 and f16, 8192 and 32768 rows of 256, 512 and 1024 (one row a program), Tile IR against the native
# path: slower on 32 of 36 launches, 0.94-1.16x its time (LayerNorm 1.02-1.16x, softmax 1.03-1.11x, RMSNorm
# 0.94-1.09x, slower on 8 of 12); the probe's int8 row quantisation at 16384x1024 1.07x. The LayerNorm's SASS:
# 256 instructions against 200 (no contraction into FFMA without a dot, two reciprocals of N) for 8 values a
# thread, so the difference shows on rows this short. At 2048 and 4096 the two were level (0.96-1.04x), and f32
# rows of 512-2048 too (0.96-1.03x); occupancy hints of 4 to 16 moved none of the 1024-wide launches.
SHORT_16BIT_ROWS = (128, 1024)


def _short_16bit_rows(ops) -> str | None:
    """The reason when ops (one kernel's) make a row kernel on short 16-bit rows (above), else None."""
    lo, hi = SHORT_16BIT_ROWS
    # (a reduce of one element is a scalar load's, not a row's)
    if any(op.name in ("tle.dot", "scf.for") for op in ops) or not any(_last_axis_reduction(op) > 1 for op in ops):
        return None
    loaded = [tle_type(op.result.type) for op in ops if op.name == "tle.load"]
    loaded = [(elem, math.prod(shape)) for elem, shape, _ in loaded if shape]
    # the rows themselves: the largest tiles loaded. Smaller side inputs (a norm's weight, rotary cos and sin) may
    # be of any type
    rows = max((n for _, n in loaded), default=0)
    if not loaded or any(elem not in ("f16", "bf16") for elem, n in loaded if n == rows):
        return None
    largest = largest_tile(ops)
    if not lo < largest <= hi:
        return None
    return (f"a row kernel on 16-bit tiles of at most {hi} elements (its largest holds {largest}) without a dot or "
            f"a loop: tileiras ran LayerNorm, softmax and RMSNorm over 16-bit rows of {lo * 2} to {hi} 0.94-1.16x "
            "the native path's time, slower on 32 of 36 launches (H200)")


_STENCIL = ("a gather in a loop whose last-axis index moves with the loop's counter (a stencil's taps, `t - 3 + k`; a "
            "CSR row read a block a step, `j + arange(0, BK)`, and what its loaded column ids index): Mamba's causal "
            "conv1d and a depthwise 3x3 convolution ran 1.3-1.75x slower on Tile IR, a CSR SpMV level or slower "
            "(H200)")


def _stencil_tap(op) -> bool:
    """A gather inside a loop whose last-axis index is a sum (through splats, broadcasts, adds and subtracts) with a
    term that follows the loop's counter other than through a product: `t - 3 + k`, `col + k % 3 - 1`. A window
    streamed a tile a step (`j * BLOCK + arange`) is not one, nor a gather whose counter reaches only a leading
    axis (paged attention's block, an EmbeddingBag's row: paged attention written with gathers ran 1.5x faster on
    Tile IR). A counter that itself steps by the tile (a CSR SpMV's `for j in range(start, stop, BK)` reading
    `j + arange(0, BK)`) counts: not a stencil, but measured level or slower on Tile IR all the same (forty-third
    session: 636.1 against 636.0 us and 189.0 against 185.8 on 1 worker warp, 736 and 190 on tileiras' 4)."""
    if op.name != "tle.gather" or math.prod(tle_type(op.result.type)[1] or (1,)) == 1:
        return False
    loop = enclosing_loop(op)
    if loop is None:
        return False
    counter = loop.regions[0].blocks[0].arguments[0]
    index = op.operands[tle_type(op.operands[0].type)[2]]  # operands: the view, one index per axis, the mask

    def follows_counter(v, seen) -> bool:  # v depends on the counter through no product
        if v == counter:
            return True
        if isinstance(v.owner, ir.Block) or v.owner.name in ("arith.muli", "scf.for") or v.owner.operation in seen:
            return False
        seen.add(v.owner.operation)
        return any(follows_counter(x, seen) for x in v.owner.operands)

    terms = [index]
    while terms:
        v = terms.pop()
        if not isinstance(v.owner, ir.Block) and v.owner.name in ("tle.splat", "tle.broadcast", "arith.addi",
                                                                   "arith.subi"):
            terms.extend(v.owner.operands)
        elif follows_counter(v, set()):
            return True
    return False


def tileir_slower(module: "ir.Module") -> list[Blocker]:
    """What makes the Tile IR path much slower than the native one on a kernel it can take (module doc)."""
    out = []
    for top in module.body.operations:
        if not is_kernel(top.operation):  # a scan's combine func: its ops are the scan's
            continue
        ops = list(nested_ops(top.operation))
        pairs = [op for op in ops if _pair_reduction(op)]
        if len(pairs) >= SORTING_NETWORK_STEPS:
            out.append(Blocker(span_of_location(pairs[0].location), _SORTING_NETWORK))
        if not any(op.name == "tle.dot" for op in ops):
            lo, hi = WIDE_REDUCTION_ELEMENTS
            wide = [(op, n) for op in ops for n in [_last_axis_reduction(op)] if lo < n <= hi]
            if wide:
                out.append(Blocker(span_of_location(wide[0][0].location), _wide_reduction(wide[0][1])))
            divisions = [op for op in ops if _tile_division(op)]
            if divisions:
                out.append(Blocker(span_of_location(divisions[0].location), _TILE_DIVISION))
            taps = [op for op in ops if _stencil_tap(op)]
            if taps:
                out.append(Blocker(span_of_location(taps[0].location), _STENCIL))
            groups = [(op, g) for op in ops for g in [_small_group_reduction(op)] if g]
            if groups and len(pairs) < SORTING_NETWORK_STEPS:  # a sorting network's pairs are named as one
                out.append(Blocker(span_of_location(groups[0][0].location), _small_groups(groups[0][1])))
            if (why := _short_16bit_rows(ops)) is not None:
                out.append(Blocker(span_of_location(top.operation.location), why))
        dots = [op for op in ops if op.name == "tle.dot"]
        atomics = [op for op in ops if op.name == "tle.atomic"]
        if "tle.many_waves" in top.operation.attributes and len(dots) == 1 and \
                _multiply_adds(dots[0]) <= SMALL_DOT_MACS:
            out.append(Blocker(span_of_location(dots[0].location), _small_dot(dots[0])))
        elif "tle.many_programs" in top.operation.attributes and len(dots) == 1 and atomics and \
                _multiply_adds(dots[0]) <= SPLIT_K_MACS:
            out.append(Blocker(span_of_location(atomics[0].location), _SPLIT_K_ATOMICS))
        elif "tle.many_waves" in top.operation.attributes and (step := _small_dots_in_one_step(dots)):
            out.append(Blocker(span_of_location(step[0].location), _many_small_dots(step)))
        for op in ops:
            if op.name in SCANS:
                length = (tle_type(op.operands[0].type)[1] or (1,))[ir.IntegerAttr(op.attributes["axis"]).value]
                if length > WIDE_SCAN_ELEMENTS:
                    out.append(Blocker(span_of_location(op.location), _wide_scan(length)))
            if op.name != "tle.dot":
                continue
            if (why := _slow_dot(op)) is not None:
                out.append(Blocker(span_of_location(op.location), f"a dot of {why}"))
            elif (gather := next((g for v in list(op.operands)[:2] if (g := operand_gather(v)) is not None),
                                 None)) is not None:
                out.append(Blocker(span_of_location(op.location), _gathered_operand(op, gather)))
            elif carried_partner(op) is not None:
                out.append(Blocker(span_of_location(op.location), _SCALED_PRODUCT))
            elif math.prod(_dot_step(op)[0]) >= UNALIGNED_MIN_ACC and not _in_split_loop(op) and \
                    any(unaligned_operand(v) for v in list(op.operands)[:2]):
                out.append(Blocker(span_of_location(op.location), _UNALIGNED_OPERAND))
            elif math.prod(acc := _dot_step(op)[0]) > WIDE_ACCUMULATOR:
                out.append(Blocker(span_of_location(op.location), _wide_accumulator(acc)))
    return out


def _in_split_loop(op) -> bool:
    """Is op inside one of the two loops a LoopSplit made (`tle.split`)? Tile IR takes a dot loop's split only
    where its unaligned rows have an odd K (tle/compiler.py _spec_for), and there it ran 2.3-3.7x faster than
    unsplit and 1.8-2.3x faster than the native path (4096x4096x4099 at 128x128x64: 499.2 us against 1168.3)."""
    parent = op.parent
    while parent is not None:
        if parent.name == "scf.for" and "tle.split" in parent.attributes:
            return True
        parent = parent.parent
    return False


def _last_axis_reduction(op) -> int:
    """The elements a tle.reduce along its operand's last axis takes in (a whole tile reduces so); 0 for any other
    op."""
    if op.name != "tle.reduce":
        return 0
    shape = tle_type(op.operands[0].type)[1] or (1,)
    return math.prod(shape) if ir.IntegerAttr(op.attributes["axis"]).value == len(shape) - 1 else 0


def _pair_reduction(op) -> bool:
    """A tle.reduce along an axis of size 2: one compare-and-swap step of tle/bitonic.py's networks."""
    if op.name != "tle.reduce":
        return False
    shape = tle_type(op.operands[0].type)[1] or ()
    return shape[ir.IntegerAttr(op.attributes["axis"]).value] == 2



# ---- tools and architectures ----------------------------------------------------------------------------------------

def _tool_blockers(arch: str, where: Span | None) -> list[Blocker]:
    from ..targets import tileir
    out = []
    try:
        tileir._bc()
    except ImportError as e:
        out.append(Blocker(where, f"the Tile IR bytecode writer is unavailable ({e})"))
    try:
        tool = tileir.find_tileiras()
    except FileNotFoundError as e:
        out.append(Blocker(where, str(e)))
        tool = None
    archs = tileiras_archs(tool) if tool is not None else KNOWN_ARCHS
    if arch not in archs:
        out.append(Blocker(where, f"tileiras does not compile for {arch} (it targets {', '.join(archs)})"))
    return out


@functools.cache
def tileiras_archs(tool: str) -> tuple[str, ...]:
    """The --gpu-name values a tileiras binary lists in its --help (KNOWN_ARCHS if it lists none)."""
    try:
        from ..targets.tileir import _tool_env
        out = subprocess.run([tool, "--help"], capture_output=True, text=True, env=_tool_env(tool), timeout=60)
        found = tuple(dict.fromkeys(re.findall(r"=\s*(sm_\d+[a-z]?)\b", out.stdout)))
    except (OSError, subprocess.TimeoutExpired):
        found = ()
    return found or KNOWN_ARCHS


def _sm(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    return int(m.group(1)) if m else 0


# ---- ops ------------------------------------------------------------------------------------------------------------

def _op_reason(op: "ir.Operation", arch: str) -> str | None:
    """Why op cannot be lowered to Tile IR for arch, or None."""
    name = op.name
    if name == "tle.histogram":
        return ("histogram() has no Tile IR lowering: Tile IR has no histogram operation, and counting by "
                "comparing each value with every bin would hold values x bins elements (for a few bins, write that "
                "count yourself: sum(cast<i32>(expand_dims(t, 1) == expand_dims(arange(B), 0)), axis=0), with "
                "'and expand_dims(mask, 1)' inside the cast where the histogram has a mask=; or add one atomic_add "
                "per element)")
    if name == "tle.inline_asm":
        return ("asm() inlines PTX, and Tile IR has no way to carry native code: tileiras compiles Tile IR "
                "operations only")
    if name == "tle.tile_gather":
        return ("gather() from a tile has no Tile IR lowering: Tile IR moves values between a tile's elements only "
                "by reshape, permute and reductions, not by an index (the native path's tt.gather does; from a small "
                "tile, a one-hot sum reads the same values on both paths: sum(where(expand_dims(idx, 1) == "
                "expand_dims(arange(E), 0), expand_dims(t, 0), 0.0), axis=1))")
    if name not in LOWERED_OPS:
        return f"no Tile IR lowering for {name}"
    for v in list(op.results) + list(op.operands):
        elem, shape, _ = tle_type(v.type)
        if shape and any(d <= 0 or d & (d - 1) for d in shape):
            return (f"tile shape {list(shape)} is not a power of two in every dimension (Tile IR tiles must be; "
                    f"pad the tile to {[1 << (d - 1).bit_length() for d in shape]})")
        f8 = elem.split(":")[-1]
        if f8 in F8 and _sm(arch) < 89:  # tileiras: "Incompatibility with architecture 'sm_80': unsupported type"
            return f"{F8[f8]} needs sm_89 or newer on Tile IR, not {arch}"
    if name == "tle.dot":
        a, acc = tle_type(op.operands[0].type)[0], tle_type(op.operands[2].type)[0]
        ok = ((a in HALF or a in F8) and acc == "f32") or (a == "f16" and acc == "f16") or (a, acc) in (
            ("f32", "f32"), ("f64", "f64"), ("i8", "i32"))
        if not ok:
            return f"dot of {a} into {acc}: Tile IR's mmaf/mmai do not take that combination"
    if name == "math.erf" and tle_type(op.operands[0].type)[0] == "f64":
        return "erf of f64: Tile IR has no erf, and only libdevice's f32 erff is reproduced"
    if name == "tle.atomic":
        kind = ir.StringAttr(op.attributes["kind"]).value
        elem = tle_type(op.operands[1].type)[0]
        if kind == "add" and elem not in ("i32", "i64", "f16", "bf16", "f32", "f64"):
            return f"atomic add of {elem}: Tile IR's atomic_rmw adds i32, i64, f16, bf16, f32 and f64"
        if kind == "add" and elem == "bf16" and _sm(arch) < 90:
            return f"atomic add of bf16 needs sm_90 or newer for Tile IR (not {arch})"
        if kind in ("max", "min") and elem not in ("i32", "i64", "f32", "f64"):
            return f"atomic {kind} of {elem}: Tile IR has integer max/min of i32 and i64 only"
        if kind in ("and", "or", "xor", "xchg", "cas") and elem not in ("i32", "i64", "f32", "f64"):
            return f"atomic {kind} of {elem}: Tile IR's atomics take 32- and 64-bit elements only"
    if name in ("tle.reduce", "tle.scan"):
        kind = ir.StringAttr(op.attributes["kind"]).value
        allowed = ("sum", "max", "min", "argmax", "argmin") if name == "tle.reduce" else ("sum", "prod", "max", "min")
        if kind not in allowed:
            return f"{name[4:]} kind '{kind}' has no Tile IR lowering"
        if tle_type(op.operands[0].type)[0] == "i1":
            return f"{name[4:]} of an i1 tile has no Tile IR lowering"
    if name in ("tle.combine_scan", "tle.combine_reduce"):
        what = name[len("tle.combine_"):]
        if "identities" not in op.attributes:
            return (f"{what}() with combine= and no identity=: Tile IR's {what} needs the combine fn's identity (give "
                    f"identity=[...] to let the kernel take this path)")
        for inner in nested_ops(combine_func(op)):  # the func's body is lowered into the op's region
            if (why := _op_reason(inner, arch)) is not None:
                return f"in the combine fn of this {what}(): {why}"
    return None
