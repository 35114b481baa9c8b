"""tle dialect -> CUDA Tile IR (`cuda_tile.*` ops, dialects/cuda_tile.py), with every tle location kept.

Entry point: `tle_to_tileir(module) -> ir.Module`. The result holds one `cuda_tile.entry` per tle kernel, in the
tle module's context; targets/tileir.py encodes it to bytecode and runs tileiras. The tle module is left untouched.
lowering/tileir_legality.py says, before this runs, whether a kernel can take this path at all; this file raises a
TleError at the op's .tle location for anything it cannot lower (the legality pass reports the same things).

The entry takes the tle function's arguments in the same order (the runtime passes one ABI list to both backends;
an entry marked `tle.persistent` takes the launch grid as three more, see Performance choices):
`!tle.ptr<T>` -> `tile<ptr<T>>`, a scalar `T` -> `tile<T>`. Every value is a tile: a tle scalar is a rank-0 tile, a
`tensor<...>` the tile of that shape (Tile IR needs every dimension to be a power of two).

Lowering choices (the semantics are dialects/tle.py's, as runtime/interpreter.py executes them):
- Specialisation facts become `assume` ops at the top of the entry, and every use of the argument uses the
  assumed value (an assumption holds only where its result is used): a pointer with `tle.divisibility = 16` gets
  `div_by<16>` (bytes); an i32 argument used as a size or stride of a view gets `bounded<0, ?>`, plus
  `div_by<d>` with the attribute's d (16, or 8, 4, 2 for dims and strides: tle/abi.py) when it has one (any
  other i32 argument with the attribute gets `div_by<d>` alone). With aligned base
  pointers and row strides divisible by 16 elements tileiras selects TMA loads/stores (docs/tileir.md).
- tle.make_view -> `make_tensor_view` (constant sizes and strides, e.g. a stride folded to 1, are static in its
  type; dynamic ones i32, or i64 in a view of a tensor spanning more than 2**31 - 1 elements or with a larger
  stride, `tle.wide`, whose strides arrive as i64: tileiras computes view addresses in 64 bits either way, checked
  on the H200 past 2**32 elements, tests/gpu/test_wide_tensors_gpu.py; pointer offsets here are i64 anyway), and
  one `make_partition_view` per (tile shape, padding) that the kernel's loads and stores use, built right after it
  at the top of the kernel. A load's padding is part of the partition view's type: 0.0, -0.0, nan, +inf and -inf
  (and 0 for integers) are expressible there. A load with any other padding (pad=1.0, pad=-1000) is lowered
  through pointers instead: a tile of element pointers, a mask `index*tile + i < size` per axis (one unsigned
  compare, so negative tile indices are out of bounds too) and `load_ptr_tko` with a padding tile.
- tle.slice -> a `make_tensor_view` where the slice is made, at base + sum(start_i * stride_i) (an `offset` in
  i64), with the window's sizes (assumed >= 0) and the view's strides, and its own partition views; the base is
  assumed 16-byte aligned where the arguments' divisibility proves every start * stride a multiple of 16 bytes
  (_aligned_base), which keeps a packed sequence's windows as fast as whole tensors. Accesses through it outside
  any loop take no TMA (_Kernel.tma_for).
- tle.load / tle.store -> `load_view_tko` / `store_view_tko` at the same tile coordinates (Tile IR's indices are
  tile coordinates too, read as unsigned: a negative index is out of bounds, as in tle). Along the axes where
  the tile is known to lie inside the tensor (tle.inside: the launch, or a constant index along a static size,
  keeps it there; dialects/tle.py) a pointer load has no mask, and a view access whose every axis is inside says
  `inbounds` (all axes or none: tileiras mishandles a mixed vector, _all_or_none). A checked view access costs a
  branch around each 16-byte vector (bias + GELU on [32, 128] f32 tiles: 183 -> 139 us on the H200).
- tle.gather / scatter / atomic -> tiles of pointers `base + sum(idx_i * stride_i)` (offsets in i64) and
  `load_ptr_tko` (masked lanes read `other`) / `store_ptr_tko` / `atomic_rmw_tko` (device scope; acq_rel, or
  relaxed where no atomic's result is read: dialects/tle.py relaxed_atomics; masked lanes return 0, as the
  interpreter's). Float atomic max/min have no Tile IR mode: they use integer atomics on the bit pattern, signed
  max (min) for values with the sign bit clear and unsigned min (max) for values with it set, which orders -0.0
  below +0.0 (NaN operands are undefined in tle).
- Arithmetic maps op for op (arith.maximumf -> maxf propagate_nan, ...). erf, which Tile IR lacks, is libdevice's
  own __nv_erff algorithm (the same polynomials and exp2 step, read from libdevice.10.bc) in f32; f16/bf16 erf is
  computed in f32 and rounded once. i1 <-> int/float casts use select/compare so their values are tle's (true is
  -1 signed, 1 unsigned; int -> i1 keeps the low bit).
- tle.dot -> `mmaf` (f16/bf16/f32/f64, and 8-bit floats with `fast_acc`) or `mmai` (i8 -> i32), of 2-D tiles or
  of 3-D ones (a batch of products: both ops take `[B, M, K] x [B, K, N]` as they are). An f16
  accumulator is widened to f32 for the mma and rounded once, as the interpreter does; precision = "tf32" converts
  both operands to `tf32` (round to nearest even) first. `acc + dot(a, b)` (the dot from zeros, in the add's block)
  is one mma into `acc`, as Triton's combine pass makes it natively (_dot_into_add).
- In a kernel with a dot, an f32 or f64 `a * b + c`, `a * b - c` or `c - a * b` whose product has no other use is
  one `fma` (_fused_mul), the contraction ptxas makes on the native path and cuTile's front end makes for tileiras,
  which does not contract on its own (docs/numerics.md: backends may contract; the interpreter does not). Kernels
  without a dot keep mulf + addf: measured, they gained nothing and a softmax loop lost (_Kernel.choose).
- tle.reduce -> `reduce`: sum (identity -0.0, the true additive identity; f16/bf16 summed in f32), max / min with
  NaN-propagating maxf/minf, argmax / argmin as a two-operand reduce over (value, index) whose combine prefers the
  larger (smaller) value, then NaN, then the lower index: commutative, so Tile IR's unspecified order gives the
  first index of the extreme; a max and an argmax of the same tile and axis are one such reduce, carrying the max
  as its value (extreme_partner). tle.scan -> `scan` (sum, prod, max, min; `reverse` is scan's own flag).
  tle.combine_scan -> `scan` with the combine func's body lowered into the region (Tile IR interleaves the
  region's arguments per operand) and the op's identities; without identities the legality check keeps the
  kernel off this path. tle.combine_reduce -> that `scan`, then each result's last element (`reduce` combines
  in no defined order, and the fn need not be commutative), or the last elements of an earlier identical
  combine_scan (scan_to_reuse), or `reduce` itself where the kernel says the fn commutes.
- scf.for -> `for`, scf.if -> `if`, with results and carried values; tle.num_stages / tle.unroll are dropped
  (tileiras pipelines on its own), and so is tle.nonempty (the native path's reason for it, ptxas serialising
  wgmmas, was not seen here: x @ w^T with 128x256 tiles ran at 0.90-0.96x of cuBLAS on this path, against
  0.65-0.75x natively before the mark; benchmarks/RESULTS.md). tle.undef -> a zero constant (reading it is an
  error the interpreter reports).

Performance choices (TileirOptions; each was measured on the H200, docs/tileir.md "Performance"):
- A kernel without a tle.dot (row kernels, elementwise: memory-bound) puts `allow_tma = false` on every view load
  and store. Any TMA access makes tileiras warp-specialise the kernel: a producer warp group plus a consumer one
  whose threads get 255 registers, so one CTA (one row) per SM at a time; an 8192x4096 bf16 softmax ran at 193 us
  against Triton's 37. Kernels with a dot keep TMA: their K loop is pipelined through it.
- In such a kernel, every tile load goes through masked pointers (the pad=1.0 path above) even when a partition
  view could express the padding: tileiras guards each 16-byte vector of a bounds-checked view load with a branch
  (and sinks a widening to f32 into it), so each thread waits for one load before it issues the next; masked
  pointer loads are predicated and all in flight (8192x4096 bf16: softmax 70 -> 50 us, rmsnorm 59 -> 37, swiglu
  331 -> 197; bias + GELU on a ragged 8000x8000 f32: 170 -> 136 us, Triton 134). Stores stay view stores.
  A tile loaded in a loop and broadcast there, of a tensor the kernel does not write, is read again at the broadcast
  shape (broadcast_load): tileiras' broadcast goes through shared memory and a barrier that held back the loop's
  other loads (a GEMV over a 4096x14336 bf16 weight: 60.4 -> 42.8 us, native 43.8).
- In a kernel with a dot, loads of tiles whose rows span under 16 bytes (a [BM, 1] scale) go through masked pointers
  too: TMA cannot move them, so a view load would take that branchy path (a block-scaled FP8 product's two f32
  scale tiles: 331 -> 288 us at 4096^3).
- View loads of a kernel with a dot on a 128x256 accumulator or larger say `latency = 6` (_load_latency): tileiras
  then pipelines the K loop deeper (matmul 4096^3-8192^3: 0.93-0.99x -> 0.97-1.02x of cuBLAS). A kernel with one
  dot on a thin accumulator (at most 64x32: the decode matmul with its weight tile on the dot's left) says
  `latency = 4` (16x4096x4096 bf16: 13.7 -> 12.8 us); other tiles get no hint, which is what they ran best with.
- The entry's num_worker_warps hint (_worker_warps): 8 warps for a dot accumulator of more than 128 values per
  thread on 4 warps (128x256 f32: otherwise hundreds of spilled registers, 45 instead of 717 TFLOP/s; a dot added
  into a loop-carried tile counts both, _held_registers, and dots carried together in one loop count together,
  _live_registers), and for a kernel without a dot whose largest tile has more than 32 values per thread on 4
  warps; 1 warp for a kernel without a dot whose largest tile has at most 64 elements, 2 up to 128 (an
  EmbeddingBag's rows: 24.2-28.8 -> 16.7-24.5 us). A dot kernel that spills on 4 worker warps all the same is
  compiled again on 8 (tle/compiler.py).
- The entry's occupancy hint: 8 CTAs per SM for a kernel without a dot whose tiles are all loaded and stored in 16
  bits and hold at most 4096 elements (layernorm 8192x4096 bf16: 0.81x -> 0.99x of Triton, swiglu 0.91x -> 0.99x);
  f32 rows lose with it (rmsnorm f32 -6%, 8192-wide f32 rows -45%), so they get none. 2 CTAs per SM for a kernel
  with two or more dots on accumulators 4 warps hold (attention: 0.69-0.72x -> 0.94-1.01x of the native path), 4
  where each dot keeps at most 32 accumulator values per thread and no tile is larger (64x64 attention tiles: 0.63x
  -> 1.02x). 2 CTAs per SM also for one dot on a 32x32 to 128x128 accumulator launched past one wave of programs
  (tle.many_programs: 1.02-1.71x on 67 of 74 matmuls with 32x32 to 64x128 tiles, 0.89-0.99x on the rest).
- A kernel with one dot on a 128x128 to 128x256 accumulator, a short K and a grid of several waves (the launch facts
  tle.many_programs and tle.short_k, TMA-aligned tensors, no atomics) runs its grid as a persistent loop
  (_persistent, persistent_loop): one wave of programs, each walking the grid's programs, so one tile's store
  overlaps the next tile's loads (bmm 8x4096x4096x128: 144 -> 99 us, cuBLAS 92).

Memory tokens (docs/tileir.md states the rule): tensors passed to one launch must not overlap unless no kernel
access writes them (they are `restrict`), so accesses to different tensors are never ordered against each other,
and loads of a tensor the kernel never writes take no token at all. For each tensor the kernel writes (store,
scatter, atomic), a token chain orders every access after the previous write to it and every write after every
access since the previous write: state W (token of the last write) and A (tokens of the accesses since and
including it); a load takes W and joins A; a write takes join(A) and resets both to its own token. An atomic is a
fence across tensors (docs/language.md): it takes the join of every chain's A and becomes every chain's W. Loops and ifs
that access a written tensor carry (W, join(A)) as extra `for` iter values / `if` results of type token.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..diagnostics import TleError, span_of_location
from ..dialects import cuda_tile as ct
from ..dialects.mlir import has_uses, ir, nested_ops, operand_groups
from ..dialects.tle import (SCANS, combine_func, constant_int, extreme_partner, inside_axes, keeps_asserts,
                            print_label, relaxed_atomics, scan_to_reuse, unbroadcast, unit_insertion)
from ..types import BYTES, MLIR_F8

__all__ = ["tle_to_tileir", "TileirOptions", "LOWERED_OPS"]


@dataclass(frozen=True)
class TileirOptions:
    """Performance choices of the lowering. "auto" (the default of each) decides per kernel, as the module doc
    says under "Performance choices"; the other values force a choice (for measuring, benchmarks/tileir_probe.py).

    tma: "auto", None (no hint: tileiras decides) or False (`allow_tma = false` on every view load and store).
    pointer_loads: which loads with a view-expressible padding still go through masked pointers: "auto", "none",
      "narrow" (tiles whose rows span under 16 bytes), "16bit" (f16/bf16/i16 elements) or "all".
    num_worker_warps: "auto", None (no hint) or 4 / 8 (the entry's num_worker_warps hint).
    occupancy: "auto", None (no hint) or 1..32 (the entry's occupancy hint: CTAs per SM tileiras plans for).
    num_cta_in_cga: "auto" (no hint) or 1, 2, 4, ... (the entry's num_cta_in_cga hint; the cubin then says
      EIATTR_BLOCKS_ARE_CLUSTERS, so the launch grid stays one block per tile).
    load_latency: "auto", None (no hint) or 1..10 (the `latency` hint of every view load: how heavy the DRAM
      traffic is expected to be; tileiras pipelines deeper for a higher one).
    persistent: "auto", True or False: run the launch grid as a persistent loop (_persistent; the entry then takes
      the grid as three more i32 parameters, and the runtime launches one wave of programs).
    fma: "auto" (in a kernel with a dot), True or False: lower an f32/f64 product added once to one `fma`
      (_fused_mul).
    window_tma: "auto" (view accesses through a slice outside any loop say allow_tma = false) or "all" (they keep
      the kernel's choice): _Kernel.tma_for.
    """
    tma: object = "auto"
    pointer_loads: str = "auto"
    num_worker_warps: object = "auto"
    occupancy: object = "auto"
    num_cta_in_cga: object = "auto"
    load_latency: object = "auto"
    persistent: object = "auto"
    fma: object = "auto"
    window_tma: str = "auto"


def tle_to_tileir(module: "ir.Module", options: TileirOptions | None = None) -> "ir.Module":
    """A new module (same context) with one cuda_tile.entry per tle kernel (a func.func with `tle.kernel`)."""
    options = options or TileirOptions()
    with module.context, module.operation.location:
        out = ir.Module.create()
        for op in module.body.operations:
            op = op.operation
            if op.name == "func.func" and "tle.kernel" in op.attributes:
                with ir.InsertionPoint(out.body):
                    _Kernel(op, options).lower()
    return out


# ---- types --------------------------------------------------------------------------------------------------------

INT_ELEMS = ("i1", "i8", "i16", "i32", "i64")
HALF = ("f16", "bf16")
# The 8-bit floats (MLIR name -> tle name): loaded, stored, converted (ftof) and multiplied (mmaf) only.
F8 = MLIR_F8


def _is_i64(v: "ir.Value") -> bool:
    return ct.tile_of(v).elem == "i64"


def tle_type(t: "ir.Type") -> tuple[str, tuple[int, ...] | None, int]:
    """(kind, shape, rank) of a tle-dialect type, read from its text: kind is the element type for scalars and
    tensors (shape None for a scalar), "ptr:<elem>" for pointers and "view:<elem>" for views (rank set)."""
    s = str(t)
    if s.startswith("tensor<"):
        *dims, elem = s[len("tensor<"):-1].split("x")
        return elem, tuple(int(d) for d in dims), len(dims)
    if m := re.fullmatch(r"!tle\.ptr<(\w+)>", s):
        return f"ptr:{m.group(1)}", None, 0
    if m := re.fullmatch(r"!tle\.view<(\w+),\s*(\d+)(?:\s*:\s*i64)?>", s):
        return f"view:{m.group(1)}", None, int(m.group(2))
    return s, None, 0


def ct_type(t: "ir.Type") -> "ir.Type":
    """The cuda_tile type of a tle value (ValueError for a tile dimension that is not a power of two)."""
    kind, shape, _ = tle_type(t)
    if kind.startswith("ptr:"):
        return ct.tile_type((), ct.ptr(kind[4:]))
    if kind.startswith("view:"):
        raise TypeError(f"a view is not a value in Tile IR: {t}")
    return ct.tile_type(shape or (), kind)


def padding_name(attr: "ir.Attribute", elem: str) -> str | None:
    """The partition_view padding_value that reads as this tle padding constant, or None if there is none."""
    if elem in INT_ELEMS:
        return "zero" if ir.IntegerAttr(attr).value == 0 else None
    v = ir.FloatAttr(attr).value
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "pos_inf" if v > 0 else "neg_inf"
    if v == 0.0:
        return "neg_zero" if math.copysign(1.0, v) < 0 else "zero"
    return None


def _scalar_value(attr: "ir.Attribute", elem: str):
    if elem in INT_ELEMS:
        v = ir.IntegerAttr(attr).value
        return bool(v) if elem == "i1" else v
    return ir.FloatAttr(attr).value


def _int_min(elem: str) -> int:
    return -(1 << (int(elem[1:]) - 1))


def _int_max(elem: str) -> int:
    return (1 << (int(elem[1:]) - 1)) - 1


# libdevice's __nv_erff (libdevice.10.bc, CUDA 13.5), read with llvm-dis: |a| >= 1.00375843 takes the second
# polynomial in |a| and 1 - 2^-|r|, smaller |a| the first in a*a; r = fma(p(x), a, a). Float32 values, written as the
# bit patterns libdevice holds, highest coefficient first.
_ERF_THRESHOLD = 0x3F807B28
_ERF_SMALL = (0x388D8E09, 0xBA487A7D, 0x3BA886C1, 0xBCDBC4CF, 0x3DE712BB, 0xBEC09388, 0x3E0375D4)
_ERF_LARGE = (0x388E49B7, 0xBA73C723, 0x3BE3E044, 0xBD19B6F7, 0x3E2072AB, 0x3F6A18F3, 0x3F20F3EB)


def _f32(bits: int) -> float:
    import struct
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# ---- elementwise op tables ------------------------------------------------------------------------------------------

_FLOAT_BINARY = {"arith.addf": ct.addf, "arith.subf": ct.subf, "arith.mulf": ct.mulf, "arith.divf": ct.divf,
                 "arith.remf": ct.remf, "math.powf": ct.fpowf, "math.atan2": ct.atan2}
_FLOAT_MINMAX = {"arith.maximumf": (ct.maxf, True), "arith.minimumf": (ct.minf, True),
                 "arith.maxnumf": (ct.maxf, False), "arith.minnumf": (ct.minf, False)}
_INT_BINARY = {"arith.addi": ct.addi, "arith.subi": ct.subi, "arith.muli": ct.muli, "arith.andi": ct.andi,
               "arith.ori": ct.ori, "arith.xori": ct.xori, "arith.shli": ct.shli}
_BOOL_BINARY = {"arith.addi": ct.xori, "arith.subi": ct.xori, "arith.muli": ct.andi}  # i1 arithmetic is modulo 2
_SIGNED_BINARY = {"arith.divsi": (ct.divi, True), "arith.divui": (ct.divi, False), "arith.remsi": (ct.remi, True),
                  "arith.remui": (ct.remi, False), "arith.shrsi": (ct.shri, True), "arith.shrui": (ct.shri, False),
                  "arith.maxsi": (ct.maxi, True), "arith.maxui": (ct.maxi, False), "arith.minsi": (ct.mini, True),
                  "arith.minui": (ct.mini, False)}
_UNARY = {"arith.negf": ct.negf, "math.absf": ct.absf, "math.absi": ct.absi, "math.exp": ct.exp,
          "math.exp2": ct.exp2, "math.log": ct.log, "math.log2": ct.log2, "math.sqrt": ct.sqrt,
          "math.rsqrt": ct.rsqrt, "math.sin": ct.sin, "math.cos": ct.cos, "math.tan": ct.tan, "math.tanh": ct.tanh,
          "math.sinh": ct.sinh, "math.cosh": ct.cosh, "math.floor": ct.floor, "math.ceil": ct.ceil}
_CMPF = {1: ("equal", True), 2: ("greater_than", True), 3: ("greater_than_or_equal", True), 4: ("less_than", True),
         5: ("less_than_or_equal", True), 6: ("not_equal", True), 8: ("equal", False), 9: ("greater_than", False),
         10: ("greater_than_or_equal", False), 11: ("less_than", False), 12: ("less_than_or_equal", False),
         13: ("not_equal", False)}
_CMPI = {0: ("equal", True), 1: ("not_equal", True), 2: ("less_than", True), 3: ("less_than_or_equal", True),
         4: ("greater_than", True), 5: ("greater_than_or_equal", True), 6: ("less_than", False),
         7: ("less_than_or_equal", False), 8: ("greater_than", False), 9: ("greater_than_or_equal", False)}
_STRUCTURAL = ("func.return", "scf.yield")
# f32 ops that take the native path's fast form (docs/numerics.md): `/` is div.full.f32 (within 2 ulp; with IEEE
# division tileiras gives every element a checked slow path) and exp is ex2.approx.f32 of x * log2 e (with the
# accurate "full" exp, bf16 softmax 8192x4096 took 49.8 us on the H200, with "approx" 41.4; Triton: 36.9).
# exp2 flushes subnormal results to zero, as the native path's ex2.approx.ftz.f32 does (attention, whose softmax
# is exp2: 2-4% faster on the H200 than the non-flushing exp2).
_F32_FAST = {"arith.divf": {"rounding": "full"}, "math.exp": {"rounding": "approx"}, "math.exp2": {"ftz": True}}


def _all_or_none(axes: frozenset, rank: int) -> frozenset:
    """The `inbounds` axes of a view access: all of them, or none. tileiras 13.5 mishandles a mixed vector: a store
    with inbounds = [false, true] (rows past the end, the columns inside) wrote the rows past the end on the H200
    (tests/gpu/test_grid_facts_gpu.py, layernorm on M + 7 programs). cuTile only ever emits a uniform one."""
    return axes if len(axes) == rank else frozenset()


# num_worker_warps (tileiras' own choice is 4 worker warps, one warp group). Measured on the H200 (docs/tileir.md):
# - A dot's accumulator is split over the worker warp groups; at more than 128 f32 values per thread (128x256 or
#   256x128 on 4 warps: 256) the 255-register threads spill hundreds of values (STL/LDL) and a 4096^3 bf16 matmul
#   ran at 45 (128x256) and 75 (256x128) TFLOP/s; with 8 worker warps (two consumer warp groups, 168 registers, no
#   spills) at 717 and 687, as Triton with num_warps=8. Two 128x128 accumulators carried through one loop (a gated
#   MLP's gate and up products) are the same 256 values a thread: 255 registers and 512 bytes of spills on 4, and
#   2.8-4.0x slower than on 8 (thirty-fifth session, benchmarks/RESULTS.md "Two accumulators in one loop").
# - A kernel without a dot: 8 warps only when its largest tile has more than 32 values per thread on 4 warps. At
#   4096-element rows 8 warps were slower than 4 (softmax bf16 52.0 vs 49.8 us, layernorm 53.8 vs 47.4, rmsnorm 38.7
#   vs 37.1: fewer rows in flight per SM); at 8192 f32 elements 4 warps need 168 registers and 8 were faster (262
#   vs 278 us, Triton 266).
# - A kernel without a dot whose largest tile has at most 128 elements: 1 worker warp up to 64 elements, 2 up to 128
#   (tileiras 13.5 takes both). On 4 such a tile is held several times over. Forty-third session (benchmarks/
#   RESULTS.md "One warp for tiles of 128 elements or fewer"), against tileiras' 4: an EmbeddingBag over 32-, 64-
#   and 128-wide f32 rows and 128-wide bf16 16.7-24.5 us against 24.2-28.8 (1 against 2 warps: 16.7 / 17.0 at 32,
#   18.0 / 18.0 at 64, 25.5 / 24.5 and 21.5 / 18.3 at 128), a CSR SpMV's 64-entry steps 636 against 736 us
#   (2 warps: 636) and 189 against 190 (2 warps: 215). No occupancy hint (8, 16, 32) changed these.
# Bytecode 13.4 took 4 and 8 only; an accumulator too large for 8 warps (256x256 f32) still spills.
_ACC_VALUES_PER_THREAD = 128
_TILE_VALUES_PER_THREAD = 32
_ONE_WORKER_WARP_TILE = 64  # and twice this on 2 warps
_SMALL_DOTS_VALUES_PER_THREAD = 32  # _occupancy: dots this small leave room for 4 CTAs per SM


def _worker_warps(live: list, largest_tile: int) -> int | None:
    """The num_worker_warps hint: for a kernel with dots (`live`: the accumulator registers kept live together,
    _live_registers) 8 when the most exceeds _ACC_VALUES_PER_THREAD per thread on 4 warps; for one without, 8 when
    its largest tile (elements) exceeds _TILE_VALUES_PER_THREAD per thread on 4 warps, and 1 or 2 when it holds at
    most _ONE_WORKER_WARP_TILE or twice that; else none (tileiras' choice, 4)."""
    if live:
        return 8 if max(live) > _ACC_VALUES_PER_THREAD * 4 * 32 else None
    if largest_tile <= 2 * _ONE_WORKER_WARP_TILE:
        return 1 if largest_tile <= _ONE_WORKER_WARP_TILE else 2
    return 8 if largest_tile > _TILE_VALUES_PER_THREAD * 4 * 32 else None


# Elementwise ops a dot's result may pass through on its way into an accumulator (`acc += dot(a, b) * scale`).
_ELEMENTWISE = {"arith.mulf", "arith.divf", "arith.addf", "arith.subf", "arith.negf", "arith.muli", "arith.addi",
                "arith.subi"}


def _elem_bytes(elem: str) -> int:
    """Bytes of one element of a tle-dialect element type ("f32", "f8E4M3FN", "i1", ...)."""
    return BYTES[MLIR_F8.get(elem, elem)]


def _zeros(v: "ir.Value") -> bool:
    """Is v a constant tile of +0 (a dot's accumulator when the source gives none)?"""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant" or tle_type(v.type)[1] is None:
        return False
    dense = ir.DenseElementsAttr(owner.attributes["value"])
    if not dense.is_splat:
        return False
    value = _scalar_value(dense.get_splat_value(), tle_type(v.type)[0])
    return value == 0 and math.copysign(1.0, value) > 0  # not -0.0, as before


def _fused_mul(add):
    """The arith.mulf lowered into `add` (an f32 or f64 arith.addf or arith.subf) as one fma, or None: the add's
    first operand that is a product in the add's block with no other use, unless a dot folds into the add
    (_dot_into_add). ptxas contracts such pairs on the native path (Triton compiles with fp fusion) and cuTile's
    front end rewrites them to fma (`fuse_mul_addsub`); tileiras does not: attention's backward had an FMUL and an
    FADD per score (`qk * scale - lse`) where the native path's SASS had one FFMA. f16 and bf16 are left as they
    are: the kernels that matter compute in f32."""
    if add.name not in ("arith.addf", "arith.subf") or tle_type(add.result.type)[0] not in ("f32", "f64"):
        return None
    owners = [None if isinstance(v.owner, ir.Block) else v.owner for v in add.operands]
    if any(o is not None and o.name == "tle.dot" and (folded := _dot_into_add(o)) is not None and folded == add
           for o in owners):
        return None
    for v, mul in zip(add.operands, owners):
        if mul is not None and mul.name == "arith.mulf" and len(list(v.uses)) == 1 and \
                mul.operation.parent == add.operation.parent:
            return mul
    return None


def _mul_into_add(mul):
    """The add or sub an arith.mulf is lowered into (_fused_mul), or None."""
    if mul.name != "arith.mulf" or len(uses := list(mul.result.uses)) != 1:
        return None
    add = uses[0].owner
    fused = _fused_mul(add)
    return add if fused is not None and fused == mul else None


def _dot_into_add(dot):
    """The add a tle.dot is lowered into, or None: for `acc + dot(a, b)` (the dot from zeros, that add its only use,
    and the dot not an 8-bit one with fast accumulation) the lowering emits mmaf/mmai with `acc` as the accumulator,
    as Triton's combine pass does on the native path (and, like it, not for imprecise 8-bit accumulation, whose
    rounding the fold would change). tileiras does not fold it itself: `acc += dot(a, b)` in a 128x128 matmul kept
    a second accumulator and 128 FADDs per K step in the SASS."""
    if not _zeros(dot.operands[2]) or ir.StringAttr(dot.attributes["precision"]).value == "fast":
        return None
    uses = list(dot.result.uses)
    if len(uses) != 1:
        return None
    add = uses[0].owner
    if add.name not in ("arith.addf", "arith.addi") or str(add.operands[0].type) != str(add.operands[1].type):
        return None
    if add.operation.parent != dot.operation.parent:
        return None  # the add in a loop or if below the dot: moving the product there would repeat it
    if any(not isinstance(v.owner, ir.Block) and v.owner.name == "tle.dot" for v in add.operands if v != dot.result):
        return None  # dot + dot: both lowered as they are
    return add


def _held_registers(dot) -> int:
    """The 32-bit registers of accumulator values a tle.dot keeps live: its own tile (64-bit values count twice),
    plus the loop-carried tile its result is added into when it starts from zeros and reaches that add through
    elementwise ops. A block-scaled FP8 product (`acc += dot(x, w^T) * sx * sw`) holds both 128x128 f32 tiles:
    on tileiras' 4 worker warps it spilled 224 bytes per thread, on 8 none (H200: benchmarks/RESULTS.md). The native
    path counts the same way (tle.compiler.default_num_warps)."""
    def registers(t) -> int:
        elem, shape, _ = tle_type(t)
        return math.prod(shape) * (2 if elem in ("f64", "i64") else 1)
    partner = carried_partner(dot)
    return registers(dot.operands[2].type) + (registers(partner.type) if partner is not None else 0)


def _live_registers(dots, held: list) -> list:
    """The accumulator registers the kernel's dots keep live together: one entry per loop whose dots accumulate
    into two or more of its loop-carried tiles (their _held_registers summed: a gated MLP's `g = dot(x, wg^T, g)`
    and `u = dot(x, wu^T, u)` hold both 128x128 f32 tiles through the whole K loop), and one per other dot. A dot
    whose result is not carried (attention's scores, recomputed each iteration) counts alone, as before: attention
    runs best on 4 worker warps and 2 CTAs per SM (_occupancy). Two 128x128 accumulators on tileiras' 4 worker
    warps took 255 registers and spilled 512 bytes per thread, on 8 168 and none (H200, benchmarks/RESULTS.md
    "Two accumulators in one loop"). `held`: each dot's _held_registers."""
    alone, loops = [], {}  # loops: the scf.for -> [(a carried tile, its registers)]
    for dot, registers in zip(dots, held):
        tile = _carried_tile(dot)
        if tile is None:
            alone.append(registers)
            continue
        tiles = loops.setdefault(dot.operation.parent, [])
        if not any(tile == t for t, _ in tiles):  # two dots into one tile (an int4 product's halves) hold it once
            tiles.append((tile, registers))
    return alone + [sum(r for _, r in tiles) for tiles in loops.values()]


def _carried_tile(dot) -> "ir.Value | None":
    """The loop-carried tile (a block argument of the scf.for around the dot) its accumulation lives in: its acc
    operand (`acc = dot(a, b, acc)`), the tile `acc + dot(a, b)` adds into (_dot_into_add), or its carried_partner;
    None for a dot outside a loop or one whose result starts afresh each iteration."""
    loop = dot.operation.parent
    if loop is None or loop.name != "scf.for":
        return None
    carried = list(loop.regions[0].blocks[0].arguments)[1:]
    add = _dot_into_add(dot)
    candidates = [dot.operands[2]] if add is None else [o for o in add.operands if o != dot.result]
    partner = carried_partner(dot)
    if partner is not None:
        candidates.append(partner)
    return next((c for c in candidates if any(c == a for a in carried)), None)


def carried_partner(dot) -> "ir.Value | None":
    """The loop-carried tile a tle.dot's product is added into after elementwise ops, the dot starting from zeros
    (`acc += dot(x, w^T) * scale`), or None: a dot that accumulates into its operand, or is lowered so
    (_dot_into_add), has none."""
    if not _zeros(dot.operands[2]) or _dot_into_add(dot) is not None:
        return None
    loop = dot.operation.parent
    if loop is None or loop.name != "scf.for":
        return None
    carried = list(loop.regions[0].blocks[0].arguments)[1:]  # after the induction variable
    values, seen = [dot.result], []  # Values compare by identity; Python wrappers (and their id()) do not
    while values:
        v = values.pop()
        for use in v.uses:
            user = use.owner
            if user.name not in _ELEMENTWISE or any(user.results[0] == r for r in seen):
                continue
            seen.append(user.results[0])
            others = [o for o in user.operands if o != v]
            if user.name in ("arith.addf", "arith.addi") and any(o in carried for o in others):
                return next(o for o in others if o in carried)
            if str(user.results[0].type) == str(v.type):
                values.append(user.results[0])
    return None


def _upstream(v: "ir.Value", through=lambda op: True):
    """(value, the op that made it) for v and each value it is computed from, walking back through the ops `through`
    accepts (never through block arguments: loop-carried values and kernel parameters end the walk)."""
    todo, seen = [v], []
    while todo:
        x = todo.pop()
        owner = x.owner
        if isinstance(owner, ir.Block) or any(x == s for s in seen):
            continue
        seen.append(x)
        yield x, owner
        if through(owner):
            todo.extend(owner.operands)


def walks_tiles(ops) -> bool:
    """Does the kernel walk its tiles itself: a for loop whose bounds or step come from num_programs
    (`for t in range(program_id(0), tiles, num_programs(0))`, a persistent kernel)? A num_programs that only
    numbers a program's tile (split-K's `pm * num_programs(0) + pn`) does not count."""
    return any(op.name == "scf.for" and any(owner.name == "tle.num_programs" for v in list(op.operands)[:3]
                                            for _, owner in _upstream(v))
               for op in ops)


def gathered_operand(v: "ir.Value") -> bool:
    return operand_gather(v) is not None


def operand_gather(v: "ir.Value") -> "ir.Operation | None":
    """The tle.gather of as many elements as v (a dot operand) that v comes from, through the ops that compute it
    in registers (not through a load's indices), or None. A small gathered tile broadcast over a loaded one (a
    per-row scale) does not count: the operand's bulk still comes through a load tileiras can pipeline."""
    size = math.prod(tle_type(v.type)[1] or (1,))
    def in_registers(op) -> bool:
        return op.name not in ("tle.load", "arith.constant", "tle.make_view")
    return next((owner for x, owner in _upstream(v, in_registers)
                 if owner.name == "tle.gather" and math.prod(tle_type(x.type)[1] or (1,)) >= size), None)


def unaligned_operand(v: "ir.Value") -> bool:
    """Is v (a dot operand) loaded, through the ops that compute it in registers, from a view whose tensor the
    launch proved TMA cannot read (`tle.unaligned_rows` on its make_view: tle/abi.py UnalignedRows)?"""
    def in_registers(op) -> bool:
        return op.name not in ("tle.load", "arith.constant", "tle.make_view", "tle.gather")
    return any(owner.name == "tle.load" and "tle.unaligned_rows" in owner.operands[0].owner.attributes
               for _, owner in _upstream(v, in_registers))


# _occupancy: a kernel without a dot whose every loop reads tiles of at most this many bytes a step. Measured on the
# H200 (forty-second session, benchmarks/RESULTS.md "Loops that read little a step"), Tile IR without a hint
# against 8 programs per SM: an EmbeddingBag (a table row gathered a step, its id loaded in the same step; tileiras
# unrolled the loop on 93-112 registers, 4-5 programs per SM) with rows of 128, 256 and 512 f32 48.9 -> 28.1,
# 91.0 -> 40.9 and 98.2 -> 64.6 us, 128 and 2048 bf16 66.2 -> 24.7 and 139.3 -> 130.9 (the native path 27.5, 41.1,
# 67.2, 23.9, 138.8); a row sum of 128 to 1024 f32 a step 1.00-1.36x faster. At 8 KB a step it went either way: a
# vocabulary softmax in f32 gained (409.9 -> 393.0 and 421.2 -> 389.9; native 396.9, 391.1), paged attention lost
# 3-12%, and kernels carrying 4096-element tiles across steps (cross-entropy, greedy argmax) ran 1.9-2.6x slower.
# One loss below the bound: 512 bf16 a step gained only 61.2 -> 56.7 (native 38.5); it takes the hint all the same.
_SMALL_STEP_BYTES = 4096


def _extreme_of(is_max: bool, flt: bool):
    """max (min) of two values as the reductions combine them: NaN-propagating for floats, signed for integers."""
    if flt:
        fn = ct.maxf if is_max else ct.minf
        return lambda a, b: fn(a, b, propagate_nan=True)
    fn = ct.maxi if is_max else ct.mini
    return lambda a, b: fn(a, b, signed=True)


def largest_tile(ops) -> int:
    """The elements of the largest tile any of ops makes (1 where none makes a tile)."""
    return max((math.prod(tle_type(r.type)[1] or ()) for op in ops for r in op.results
                if str(r.type).startswith("tensor<")), default=1)


def enclosing_loop(op):
    """The innermost scf.for around op, or None."""
    parent = op.parent
    while parent is not None and parent.name != "scf.for":
        parent = parent.parent
    return parent


def loop_step_bytes(ops) -> list[int]:
    """For each loop of the kernel that loads anything, the bytes of tiles it reads a step (its tle.load and
    tle.gather results of more than one element, not counting those of loops nested in it), times its unroll
    factor. Scalar loads (an id, a bound; `load(ids, at=i)` is a one-element tile) count for nothing: a few bytes
    beside the tiles they locate."""
    steps = []
    for loop in (op for op in ops if op.name == "scf.for"):
        read, loads = 0, False
        for op in nested_ops(loop):
            if op.name not in ("tle.load", "tle.gather"):
                continue
            if enclosing_loop(op) == loop:
                elem, shape, _ = tle_type(op.result.type)
                loads, elements = True, math.prod(shape or ())
                read += elements * _elem_bytes(elem) if elements > 1 else 0
        if loads:
            unroll = loop.attributes["tle.unroll"] if "tle.unroll" in loop.attributes else None
            steps.append(read * (ir.IntegerAttr(unroll).value if unroll is not None else 1))
    return steps


def _occupancy(accumulators, held: list, live: list, io_elems: list, largest_tile: int,
               many_programs: bool = False, step_bytes: list = (), loop_scan: bool = False) -> tuple[int | None, str]:
    """(The occupancy hint, why, in words for `tlec -v`; "" with no hint).

    - A kernel with two or more dots, none of whose accumulators needs 8 worker warps (attention: Q K^T, then P V,
      with a softmax between them that the tensor cores wait for): 2 CTAs per SM, so one CTA's softmax runs under
      the other's dots. Attention 4096x64 and 4096x128 f16 on the H200 (BM=128): 0.72x -> 0.96x and 0.69x -> 1.00x
      of the native path. Where no dot keeps more than _SMALL_DOTS_VALUES_PER_THREAD accumulator values per thread
      on 4 warps, and no tile is larger either (64x64 f32 tiles), 4 CTAs: attention with BM = BN = D = 64, 32 x 4096
      x 64 f16, 537.6 -> 333.3 us (occupancy 3: 345.1; native 340.4), causal 222.8 -> 207.0. With D = 128 (a 64x128
      accumulator) 2 stays best (276.4; 3: 278.8, 4: 286.7). A W4A16 product (two dots on a 16x128 accumulator, but
      a 128x128 i32 tile of unpacked weights) spilled 1144 bytes per thread under 4.
    - A kernel without a dot that scans a tile inside a loop (`loop_scan`: a cumsum carried from step to step, along
      a row or down the columns): 4 CTAs per SM, before the two rules below. H200, Tile IR, forty-fifth session
      (benchmarks/RESULTS.md "Scans in a loop"), no hint (f32) or the small-step rule's 8 (bf16) against 4, us: a
      column cumsum in 64x32 tiles, 4096x16384 f32 218.1 -> 164.3 (native 181.6), bf16 179.6 -> 154.2 (167.3),
      16384x4096 bf16 386.2 -> 265.7 (411.9), f32 322.1 -> 336.0 (449.3; 128 programs, one each SM, the one loss);
      a row cumsum in 2048-element steps, 512x65536 bf16 50.9 -> 44.3, 4096x8192 bf16 39.0 -> 37.4, f32 level
      (75.0 and 72.3 -> 72.4). Without a hint tileiras took 144 registers for the f32 column cumsum, 3 CTAs per
      SM, so its 512 programs ran in two waves; under 8 (64 registers) it ran no step ahead.
    - A 16-bit row kernel (no dot, every tile loaded and stored in 16 bits): 32 warps per SM, so more rows are in
      flight. That is 8 CTAs of 4 warps for a largest tile 4 warps hold without extra warps, and 4 CTAs of the 8
      worker warps _worker_warps gives a tile up to twice that (docs/tileir.md, "Performance": layernorm bf16
      8192x4096 0.81x -> 0.99x of Triton, 16384x8192 0.73x -> 0.96x). f32 rows and larger tiles lose with it.
    - A kernel without a dot whose every loop reads tiles of at most _SMALL_STEP_BYTES a step (`step_bytes`,
      loop_step_bytes): the same 8 CTAs (4 past 4 warps' tile), since a step's loads are short and only more
      programs overlap them.
    - A kernel with one dot whose accumulator holds 32x32 to 128x128 values (at least _TWO_PER_SM_MIN_ACC, below
      the _LATENCY_MIN_ACC of the big tiles), launched with more programs than SMs (`tle.many_programs`): 2 CTAs per
      SM. Without a hint tileiras plans one CTA per SM with a deep pipeline (196,760 bytes of shared memory for a
      128x128x64 bmm), so a CTA's epilogue has no other CTA's loads and products beside it. H200, Tile IR,
      128x128x64 tiles, one program per tile, no hint -> 2 (twenty-fourth session, benchmarks/RESULTS.md
      "Occupancy 2 for one 128x128 dot"): matmul 2048^3 1.04-1.05x faster, 4096^3 1.04-1.06x, 8192^3 1.08-1.15x,
      8192x8192x1024 1.07x, 4096x4096x512 1.19-1.20x; linear + ReLU 1.03-1.10x; bmm 8x4096x4096x128 1.29x,
      32x1024^3 1.03-1.07x; int8 linear 1.07x at 4096^3 and 0.98x at 8192x14336x4096; tf32 matmul 1.10-1.12x.
      With fewer programs than SMs it lost (1024^3, 64 programs: 0.84x; 128x14336x4096, 112 programs: 0.89x): a
      program with an SM to itself only loses pipeline depth. 128x256 tiles (linear_nt, six cases) were level
      either way (0.99-1.04x). Smaller accumulators, down to 32x32 values, take the same hint (twenty-seventh
      session, benchmarks/RESULTS.md "Occupancy 2 for one dot on 64x64 to 64x128 tiles"): without it tileiras
      planned a 64x128x64 matmul on 255 registers and 204,992 bytes of shared memory, one CTA per SM, and ran it
      at 0.5-0.8x cuBLAS. Over 62 f16/bf16 matmuls with 64x128, 128x64 and 64x64 tiles, BK 32-128, K 128-4096 and
      1.1 to 30 waves, the hint ran 1.02-1.71x faster on 55 and lost on 7: six with 64x128 or 128x64 tiles and
      K = 4096 on grids of 1.1 and 2.5 waves (0.89-0.97x), and 4096^3 on 128x64x64 tiles (0.99x). Occupancy 4 won
      more on 64x64x64 tiles but cost up to 1.7x on 64x64x32 ones, so 2. Down to 32x32 values (the same session,
      `benchmarks/matmul_tiles_probe.py`, f16, 32x64, 64x32, 16x128 and 32x32 tiles at 4096x4096x512, 4096^3 and
      2048x1024x2048, 8 to 124 waves): 1.03-1.63x on all 12; occupancy 4 took up to 2.2x occupancy 2's time on
      32x32. The native path ran these tiny tiles faster still (Tile IR with the hint took 1.05-1.55x its time),
      but a decode product with such tiles and fewer programs than SMs (no hint) ran fastest on Tile IR
      (benchmarks/RESULTS.md, "Decode: the weight tile on the dot's left"). The twenty-eighth session measured
      where: past two waves the native path won 61 of 62 launches with steps of 64x64x32 multiply-adds or fewer,
      and split-K with atomics lost on Tile IR past one wave, so `auto` takes the native path for both
      (lowering/tileir_legality.py, `tileir_slower`); this hint serves launches of up to two waves and
      backend="tileir".
    - Otherwise none (a single matmul's pipelined K loop keeps the tensor cores busy on its own)."""
    if len(accumulators) >= 2 and _worker_warps(live, largest_tile) is None:
        small = _SMALL_DOTS_VALUES_PER_THREAD * 4 * 32
        if max(held) <= small and largest_tile <= small:
            return 4, (f"{len(accumulators)} dots, none holding more than {_SMALL_DOTS_VALUES_PER_THREAD} values a "
                       "thread on 4 warps: while one program works between or after its dots, the others' dots "
                       "run (the rule was measured on attention, whose softmax sits between its dots)")
        return 2, (f"{len(accumulators)} dots on accumulators 4 warps hold: while one program works between or "
                   "after its dots, the other's dots run (the rule was measured on attention, whose softmax sits "
                   "between its dots)")
    if many_programs and _one_two_per_sm_dot(accumulators):
        shape = "x".join(map(str, accumulators[0][1]))
        return 2, (f"one dot on a {shape} accumulator, launched with more programs than SMs: a program's epilogue "
                   "runs beside another's loads and products")
    if loop_scan and not accumulators:
        return 4, ("no dot, and a scan carried through a loop: 4 programs per SM leave tileiras the registers to "
                   "load a step ahead")
    sixteen = bool(io_elems) and all(e in ("f16", "bf16", "i16") for e in io_elems)
    small_steps = bool(step_bytes) and max(step_bytes) <= _SMALL_STEP_BYTES
    if accumulators or not (sixteen or small_steps):
        return None, ""
    four_warps = _TILE_VALUES_PER_THREAD * 4 * 32
    hint = 8 if largest_tile <= four_warps else (4 if largest_tile <= 2 * four_warps else None)
    if hint is None:
        return None, ""
    if sixteen:
        return hint, (f"no dot, every tile loaded and stored in 16 bits, the largest of {largest_tile} elements: "
                      f"{hint} programs per SM keep more rows in flight")
    return hint, (f"no dot, and no loop reads tiles of more than {max(step_bytes)} bytes a step: {hint} programs per "
                  "SM keep more steps in flight")


# The latency hint on the view loads of a kernel with a dot whose accumulator has 128x256 values or more. Measured
# on the H200 (docs/tileir.md, "Performance"; bench.py --only matmul, Tile IR against cuBLAS in the same process,
# two runs): at 4096^3 and 8192^3 with 128x256x64 tiles, no hint 0.93-0.99x, latency 6 0.97-1.02x, latency 10
# 0.97-1.02x; at 2048^3 with 128x128x64 tiles latency 6 changed nothing and 10 lost 21-23%, as it did on a linear
# + ReLU with 128x128 tiles (4096^3: 239.8 -> 285.7 us); latency 1 or 3 lost 20-35% on the big tiles. So 6, and
# only on the big tiles.
_DOT_LOAD_LATENCY = 6
_LATENCY_MIN_ACC = 128 * 256
_TWO_PER_SM_MIN_ACC = 32 * 32  # _occupancy: a one-dot kernel's accumulator from here up to _LATENCY_MIN_ACC
# _persistent: a one-dot kernel's accumulator from _PERSISTENT_MIN_ACC up to _PERSISTENT_MAX_ACC, 128x256 included.
# H200, f16, matmul with a K of 128-512 over 4-16 waves (benchmarks/RESULTS.md "Persistent on Tile IR: the 128x256
# tiles"): 128x256 and 256x128 tiles 1.12-1.32x faster persistent, 0.90-1.01x cuBLAS; 64x128 went either way
# (0.89-1.45x, twice), so smaller accumulators take the occupancy hint instead.
_PERSISTENT_MIN_ACC = 128 * 128
_PERSISTENT_MAX_ACC = 128 * 256


def _one_dot_values(accumulators) -> int:
    """The values of the accumulator of a kernel with exactly one dot; 0 for any other kernel."""
    return math.prod(accumulators[0][1]) if len(accumulators) == 1 else 0


def _one_two_per_sm_dot(accumulators) -> bool:
    """One dot, on an accumulator of _TWO_PER_SM_MIN_ACC (32x32) values up to (not including) _LATENCY_MIN_ACC
    (128x256): the kernels the occupancy-2 rule was measured on."""
    return _TWO_PER_SM_MIN_ACC <= _one_dot_values(accumulators) < _LATENCY_MIN_ACC


def _persistent(func, ops, accumulators) -> bool:
    """Run the launch grid as a persistent loop (persistent_loop)? For a kernel with one dot on a 128x128 to
    128x256 accumulator (_PERSISTENT_MIN_ACC to _PERSISTENT_MAX_ACC) launched on a grid of 3 waves or more with at
    most 512 values of K per program (`tle.many_programs` and `tle.short_k`: tle/abi.py ShortK), whose views are all
    TMA's (_tma_views), with no atomics and no num_programs of its own. With a short K a program's time goes largely
    to writing its output tile, and one program per tile leaves that write with nothing beside it but what the
    occupancy hint gives; a program that walks the tiles overlaps one tile's store with the next tile's loads.
    H200, Tile IR, 128x128x64 tiles, against one program per tile with the occupancy hint 2 (benchmarks/RESULTS.md
    "Persistent on Tile IR"; us, cuBLAS in brackets): bmm 8x4096x4096x128 144.3 -> 99.4 (91.9), 16x2048x2048x64
    62.9 -> 44.5 (44.7), matmul 4096x4096x128 22.1 -> 17.0 (17.9), 4096x4096x512 37.0 -> 33.4 (33.0); on grids of
    3 to 6 waves 1.06-1.29x; under 2 waves 0.95-1.00x. 128x256 and 256x128 tiles (no hint either way), K of 128 to
    512: 1.12-1.32x, e.g. 4096x4096x128 23.0 -> 18.3 (18.3), 8192x8192x256 90.0 -> 73.3 (67.5). At K = 1024 it
    went either way (0.93-1.10x), and from K = 2048 on it lost (0.90-0.98x): the tensor cores set the pace there.
    Where a stride keeps TMA off (a ragged K of 333 or 257 in 16-bit elements) tileiras spilled 1.3 KB per thread
    in the loop and it lost 0.53-0.59x. Atomics are left alone: a kernel that counts its programs (split-K's
    last-arriving reducer) is no product of independent tiles."""
    attrs = func.attributes
    one_dot = _PERSISTENT_MIN_ACC <= _one_dot_values(accumulators) <= _PERSISTENT_MAX_ACC
    return "tle.many_programs" in attrs and "tle.short_k" in attrs and one_dot and \
        not any(op.name in ("tle.num_programs", "tle.atomic") for op in ops) and _tma_views(func, ops)


def _alias_groups(func) -> list[list[str]]:
    """The groups of tensor names a launch passes overlapping (the `tle.aliases` that lowering/ast_to_tle.py sets
    from tle/abi.py's aliases()); none without it."""
    if "tle.aliases" not in func.attributes:
        return []
    return [[ir.StringAttr(n).value for n in ir.ArrayAttr(g)] for g in ir.ArrayAttr(func.attributes["tle.aliases"])]


def _arg_divisibility(func) -> list[int]:
    """Per argument of the tle kernel, the power of two its `tle.divisibility` says divides it (1 without one)."""
    args = func.regions[0].blocks[0].arguments
    if "arg_attrs" not in func.attributes:
        return [1] * len(args)
    dicts = [ir.DictAttr(a) for a in ir.ArrayAttr(func.attributes["arg_attrs"])]
    return [ir.IntegerAttr(d["tle.divisibility"]).value if "tle.divisibility" in d else 1 for d in dicts]


_MAX_DIVISIBILITY = 1 << 30


def _divisibility(v: "ir.Value", entry: "ir.Block", of_arg: list[int]) -> int:
    """A power of two that divides the integer (or, for a pointer argument, the address) v, as far as the launch's
    tle.divisibility facts on the kernel's arguments (of_arg, _arg_divisibility) and constants show it: through
    products, sums, differences and sign extensions. 1 where nothing is known."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return of_arg[ir.BlockArgument(v).arg_number] if owner == entry else 1
    name = owner.name
    if name == "arith.constant":
        c = constant_int(v)
        return 1 if c is None else _MAX_DIVISIBILITY if c == 0 else min(c & -c, _MAX_DIVISIBILITY)
    parts = [_divisibility(x, entry, of_arg) for x in owner.operands]
    if name == "arith.muli":
        return min(math.prod(parts), _MAX_DIVISIBILITY)
    if name in ("arith.addi", "arith.subi", "arith.extsi", "arith.extui"):
        return min(parts)
    return 1


def _root_view(view: "ir.Value") -> "ir.Operation":
    """The tle.make_view a view is, or is a slice (of a slice ...) of."""
    op = view.owner
    while op.name == "tle.slice":
        op = op.operands[0].owner
    return op


def _aligned_base(view: "ir.Value", entry: "ir.Block", of_arg: list[int]) -> bool:
    """Is the view's first element 16-byte aligned, as the arguments' tle.divisibility shows? A tensor parameter's
    is where its pointer is; a slice's, where its parent's is and each axis moves it by a multiple of 16 bytes
    (start * stride: a packed sequence's rows of H * D halves, whatever row it starts at)."""
    op = view.owner
    if op.name == "tle.make_view":
        return _divisibility(op.operands[0], entry, of_arg) % 16 == 0
    elem, _, rank = tle_type(view.type)
    nbytes = _elem_bytes(elem.removeprefix("view:"))
    strides = list(_root_view(view).operands)[1 + rank:]
    return _aligned_base(op.operands[0], entry, of_arg) and all(
        _divisibility(start, entry, of_arg) * _divisibility(stride, entry, of_arg) * nbytes % 16 == 0
        for start, stride in zip(list(op.operands)[1:1 + rank], strides))


def _tma_views(func, ops) -> bool:
    """Does every view of the kernel have what TMA needs of its tensor: a 16-byte aligned base (_aligned_base), and
    every stride but a unit one (folded to the constant 1) a multiple of 16 bytes, as the arguments'
    tle.divisibility says?"""
    of_arg, entry = _arg_divisibility(func), func.regions[0].blocks[0]
    for op in ops:
        if op.name not in ("tle.make_view", "tle.slice"):
            continue
        elem, _, rank = tle_type(op.results[0].type)
        nbytes = _elem_bytes(elem.removeprefix("view:"))
        strides = list(_root_view(op.result).operands)[1 + rank:]
        if not _aligned_base(op.result, entry, of_arg) or \
                any(constant_int(s) != 1 and _divisibility(s, entry, of_arg) * nbytes % 16 for s in strides):
            return False
    return True


# The latency hint on the view loads of a kernel with one dot on a thin accumulator: at most 64 rows and at most 32
# columns (wgmma's N), so each K step is a small product and the loop streams its operands. Such is the decode matmul
# with the weight tile on the dot's left (examples/matmul_splitk.tle SWAP=true: a [BN, BM] = [64, 16] or [64, 32]
# accumulator). H200, twenty-ninth session (benchmarks/RESULTS.md "Decode: latency 4 on thin accumulators"; us, no hint
# -> 4): 16x4096x4096 bf16 at 16x64x256 swapped 13.7 -> 12.8, 1x4096x4096 at 16x64x128 swapped 14.9 -> 12.8,
# 32x4096x4096 at 32x64x128 swapped 15.2 -> 13.8, 16x4096x14336 at 16x64x256 swapped 32.8 -> 31.4; level (within 0.2 us)
# on the unswapped [64, 32] and [16, 32] tiles and on a [64, 32] grid of 512 programs; with K tiles of 64, from 0.6 us
# slower (M = 1) to 0.6 faster (M = 16, 32). 3 won some and lost others by up to 13% ([16, 32]: 13.8 -> 15.2), 5 and up
# lost. Wider or taller accumulators keep no hint: [128, 32] lost 5% with 4 (128x4096x4096: 16.7 -> 17.5), [16, 128] 2%
# (16x14336x4096), [16, 64] over 7 waves 4%.
_THIN_LOAD_LATENCY = 4
_THIN_MAX_ROWS, _THIN_MAX_COLS = 64, 32


def _load_latency(accumulators, looped: bool = True) -> tuple[int | None, str]:
    """The view loads' latency hint and why (for tlec -v): _DOT_LOAD_LATENCY for a kernel with an accumulator of
    _LATENCY_MIN_ACC values or more, _THIN_LOAD_LATENCY for one with exactly one dot on a thin accumulator (at most
    _THIN_MAX_ROWS x _THIN_MAX_COLS), else none (tileiras infers one)."""
    # (both rules were measured on 2-D accumulators: a batched dot's [B, M, N] is neither)
    big = [shape for _, shape, _ in accumulators if len(shape) == 2 and math.prod(shape) >= _LATENCY_MIN_ACC]
    rows, cols = accumulators[0][1] if len(accumulators) == 1 and len(accumulators[0][1]) == 2 else (None, None)
    if big:
        hint, why = _DOT_LOAD_LATENCY, (f"a dot on a {'x'.join(map(str, big[0]))} accumulator (128x256 or more), "
                                        + ("whose K loop tileiras then pipelines deeper" if looped else
                                           "though in no loop (the rule was measured on K loops, which tileiras "
                                           "then pipelines deeper)"))
    elif rows is not None and rows <= _THIN_MAX_ROWS and cols <= _THIN_MAX_COLS:
        hint, why = _THIN_LOAD_LATENCY, (f"one dot on a {rows}x{cols} accumulator (at most {_THIN_MAX_ROWS}x"
                                         f"{_THIN_MAX_COLS}), " + ("whose K loop streams its operands" if looped else
                                                                   "though in no loop (the rule was measured on K "
                                                                   "loops, which stream their operands)"))
    else:
        return None, ""
    return hint, f"latency hint {hint} on every view load, the lowering's choice: {why}"


@dataclass
class _View:
    """A lowered tle.make_view: the tensor's base, sizes and strides (ints where static), its partition views."""
    name: str
    elem: str
    base: "ir.Value"
    sizes: list
    strides: list
    tensor_view: "ir.Value"
    parts: dict = field(default_factory=dict)  # (tile shape, padding name or None) -> partition view value
    empty: list = field(default_factory=list)  # a slice's: per axis None, True or the i1 "size is 0" (op_tle_slice)


@dataclass
class _Tokens:
    """The token chain of one written tensor: W = token of the last write (None: no write yet), A = tokens of the
    accesses since, the last write included."""
    w: "ir.Value | None" = None
    a: list = field(default_factory=list)


class _Kernel:
    def __init__(self, func: "ir.Operation", options: TileirOptions = TileirOptions()):
        self.func = func
        self.values: dict = {}  # tle value -> cuda_tile value
        self.views: dict = {}  # tle view value -> _View
        body = func.regions[0].blocks[0]
        self.ops = list(nested_ops(func))
        self.arg_divisibility = _arg_divisibility(func)  # per argument, what its tle.divisibility proves
        self.choose(options)
        # acq_rel unless no atomic's result is read (dialects/tle.py relaxed_atomics)
        self.atomic_ordering = "relaxed" if relaxed_atomics(func) else "acq_rel"
        self.device_asserts = keeps_asserts(func)  # the `asserts` launch option
        # Tensors a launch passes overlapping (tle.aliases) share one token chain, named by the group's first name:
        # Tile IR does not order accesses through two tensors otherwise, and a load of x could move across a store
        # to y that changes it (an in-place launch, k(x, x)).
        self.chain_of = {name: group[0] for group in _alias_groups(func) for name in group}
        # Which tensors' chains the kernel writes, and per view the partition views its loads/stores need.
        self.written = {self.chain(self.view_name(op.operands[0])) for op in self.ops
                        if op.name in ("tle.store", "tle.scatter", "tle.atomic")}
        self.tokens = {name: _Tokens() for name in sorted(self.written)}  # sorted: the same IR in every process
        # Loads first, so that a store reuses a load's partition view of the same tile shape (padding does not
        # matter to a store).
        self.part_keys: dict = {}
        for kind in ("tle.load", "tle.store"):
            for op in self.ops:
                if op.name != kind:
                    continue
                keys = self.part_keys.setdefault(op.operands[0], [])
                value = op.results[0] if kind == "tle.load" else op.operands[1]
                elem, shape, _ = tle_type(value.type)
                if kind == "tle.load":
                    pad = padding_name(op.attributes["padding"], elem)
                    if pad is not None and not self.through_pointers(elem, shape) and (shape, pad) not in keys:
                        keys.append((shape, pad))
                elif not any(k[0] == shape for k in keys):
                    keys.append((shape, None))
        self.body = body

    # -- performance choices (module doc, "Performance choices") --
    def choose(self, options: TileirOptions):
        dots = [op for op in self.ops if op.name == "tle.dot"]
        accumulators = [tle_type(op.operands[2].type) for op in dots]
        held = [_held_registers(op) for op in dots]
        live = _live_registers(dots, held)
        tma = options.tma
        self.allow_tma = (None if accumulators else False) if tma == "auto" else tma
        loads = options.pointer_loads
        self.pointer_loads = ("narrow" if accumulators else "all") if loads == "auto" else loads
        self.has_dot = bool(dots)
        if self.pointer_loads not in ("none", "narrow", "16bit", "all"):
            raise ValueError(f"pointer_loads = {loads!r} is not one of auto, none, narrow, 16bit, all")
        largest = largest_tile(self.ops)
        warps = options.num_worker_warps
        self.num_worker_warps = _worker_warps(live, largest) if warps == "auto" else warps
        persistent = options.persistent
        self.persistent = _persistent(self.func, self.ops, accumulators) if persistent == "auto" else bool(persistent)
        # Contraction where a dot is (_fused_mul). H200, Tile IR, every kernel of benchmarks/user_kernels_probe.py
        # whose binary it changes, timed with and without it in one run (thirty-seventh session): dot kernels gained
        # (block-scaled FP8 linear on 64x128 tiles 262.6 -> 188.7 us at 4096^3, 1777 -> 1425 at 8192x14336x4096;
        # attention forward up to 1.03x, the d128 training step 1.02x, none lost beyond noise); the kernels without
        # one gained little (paged attention 1.02x on one shape of two; cross-entropy, layernorm's backward level)
        # and one lost: vocab_softmax f32, 410 -> 464 us, where tileiras unrolled its fma loop further, on 139
        # registers instead of 122, 3 programs per SM instead of 4 (benchmarks/RESULTS.md, "fma on Tile IR").
        self.fma = bool(dots) if options.fma == "auto" else bool(options.fma)
        self.window_tma = options.window_tma
        self.fused = 0  # products lowered into fma (tlec -v says how many)
        self.windows: list[str] = []  # per slice, its place and alignment (tlec -v)
        occupancy = options.occupancy
        self.occupancy_why = ""  # the lowering's reason for its own hint (tlec -v); none for a hint it was given
        if occupancy == "auto":
            io = [tle_type(op.results[0].type if op.name == "tle.load" else op.operands[1].type)[0]
                  for op in self.ops if op.name in ("tle.load", "tle.store")]
            # a persistent kernel (it strides over its tiles by num_programs, or this lowering makes it so) is left
            # alone: 264 programs of the persistent bmm (examples/matmul_batched.tle) at 2 per SM ran 2.8-3.0x
            # slower than 132 without a hint. A kernel that only numbers its tile by num_programs is not one: the
            # one-launch split-K (examples/matmul_splitk.tle, 16x64x128 and 32x64x128 tiles, 224 to 3584 programs)
            # ran faster with 2 per SM on 11 of 12 launches, by up to 1.24x (twenty-eighth session,
            # benchmarks/RESULTS.md "Split-K with atomics past one wave")
            # nor a dot on gathered rows (a mixture-of-experts GEMM): its forced Tile IR form ran 1.35x slower
            # with 2 per SM (docs/tileir.md, "Performance"), and "auto" takes the native path for it anyway
            many = "tle.many_programs" in self.func.attributes and not self.persistent and \
                not walks_tiles(self.ops) and \
                not any(gathered_operand(v) for op in dots for v in list(op.operands)[:2])
            loop_scan = any(op.name in SCANS and enclosing_loop(op) is not None for op in self.ops)
            occupancy, self.occupancy_why = _occupancy(accumulators, held, live, io, largest, many,
                                                       loop_step_bytes(self.ops), loop_scan)
        self.occupancy = occupancy
        self.num_cta_in_cga = None if options.num_cta_in_cga == "auto" else options.num_cta_in_cga
        latency = options.load_latency
        # the lowering's reason for its own hint (tlec -v); none for a hint it was given
        looped = any(enclosing_loop(op) is not None for op in dots)
        self.load_latency, self.latency_why = _load_latency(accumulators, looped) if latency == "auto" else \
            (latency, "")
        if self.load_latency is not None and not 1 <= self.load_latency <= 10:
            raise ValueError(f"load_latency = {latency!r} is not auto, None or 1..10")

    def tma_for(self, op) -> "bool | None":
        """allow_tma of a view load or store: the kernel's choice (choose), except that an access through a slice
        outside any loop takes no TMA. A slice's tensor view is made per program, and each view TMA reads needs a
        tensor map built and fenced in the program; for one tile (the queries, the output) it costs more than it
        saves. H200, variable-length attention (benchmarks/user_kernels_probe.py varlen_attention, 32 heads of
        128, bf16; forty-sixth session, benchmarks/RESULTS.md "Slices"): with the q load and o store off TMA,
        64 sequences of 64-1024 tokens 766.0 -> 709.2 us (native 699.4), 16 of 512-4096 1979.7 -> 1978.5."""
        if self.window_tma == "auto" and op.operands[0].owner.name == "tle.slice" and enclosing_loop(op) is None:
            return False
        return self.allow_tma

    def through_pointers(self, elem: str, shape) -> bool:
        """Does a load of `elem` whose padding a partition view could express still go through pointers? Those the
        options say, and tiles whose rows span under 16 bytes (a [BM, 1] scale): TMA cannot move them, and a view
        load without TMA is the branch per vector that the module doc describes. A block-scaled FP8 product's
        [128, 1] and [1, 1] f32 scales through pointers: 331.2 -> 287.8 us at 4096^3 (H200, benchmarks/RESULTS.md)."""
        narrow = bool(shape) and shape[-1] * _elem_bytes(elem) < 16
        return self.pointer_loads == "all" or (self.pointer_loads == "16bit" and elem in ("f16", "bf16", "i16")) or \
            (self.pointer_loads == "narrow" and narrow)

    # -- values --
    def get(self, v: "ir.Value") -> "ir.Value":
        return self.values[v]

    def set(self, v: "ir.Value", lowered: "ir.Value") -> None:
        self.values[v] = lowered

    @staticmethod
    def view_name(v: "ir.Value") -> str:
        return ir.StringAttr(v.owner.attributes["name"]).value

    def fail(self, op: "ir.Operation", message: str):
        raise TleError(span_of_location(op.location), message)

    # -- the kernel --
    def lower(self):
        func = self.func
        name = ir.StringAttr(func.attributes["sym_name"]).value
        args = list(self.body.arguments)
        with func.location:
            try:
                types = [ct_type(a.type) for a in args]
            except ValueError as e:
                self.fail(func, f"kernel parameter type not expressible in Tile IR: {e}")
            if self.persistent:  # the launch grid, which the runtime passes behind the kernel's own parameters
                types += [ct.tile_type((), "i32")] * 3
            op, entry = ct.entry(name, types, occupancy=self.occupancy, num_worker_warps=self.num_worker_warps,
                                 num_cta_in_cga=self.num_cta_in_cga)
            with ir.InsertionPoint(entry):
                values = list(entry.arguments)
                for arg, value in zip(args, self.assume_facts(args, values[:len(args)])):
                    self.set(arg, value)
                if self.occupancy_why:
                    op.attributes[ct.OCCUPANCY_WHY_ATTR] = ir.StringAttr.get(self.occupancy_why)
                if self.latency_why:
                    op.attributes[ct.LATENCY_WHY_ATTR] = ir.StringAttr.get(self.latency_why)
                if self.persistent:
                    op.attributes[ct.PERSISTENT_ATTR] = ir.UnitAttr.get()
                    self.persistent_loop(values[len(args):])
                else:
                    self.block(self.body)
            if self.fused:
                op.attributes[ct.FMA_COUNT_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), self.fused)
            if self.windows:
                op.attributes[ct.WINDOWS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(w) for w in self.windows])

    def persistent_loop(self, grid):
        """The kernel's body inside `for t in range(program_id, programs, num_programs)`, where `programs` is the
        launch grid's size and t stands for the program (t % gx, t / gx % gy, t / (gx * gy)) of that grid: the
        runtime launches one wave and each program walks every num_programs-th program of the grid, in the order
        the GPU would have started them. The views come first, built once; the token chains of the written
        tensors are the loop's carried values, so a program's store waits for nothing of the next tile's, and no
        load of a read-only tensor waits for it (tileiras overlaps one tile's store with the next tile's work)."""
        gx, gy, gz = (ct.assume_bounded(g, 1, None) for g in grid)
        ops = [op.operation for op in self.body.operations]
        views = 0  # the leading make_view ops and the constants they take
        while views < len(ops) and ops[views].name in ("arith.constant", "tle.make_view"):
            views += 1
        self.lower_ops(ops[:views])
        chains = sorted(self.written)
        programs = ct.muli(ct.muli(gx, gy), gz)
        first, step = ct.get_tile_block_id()[0], ct.get_num_tile_blocks()[0]

        def tile(t, *tokens):
            self.set_chains(chains, list(tokens))
            rest = ct.divi(t, gx, signed=False)
            self.program_ids = (ct.remi(t, gx, signed=False), ct.remi(rest, gy, signed=False),
                                ct.divi(rest, gy, signed=False))
            self.lower_ops(ops[views:])
            return self.yielded_tokens(chains)

        self.grid = (gx, gy, gz)
        ct.for_(first, programs, step, self.yielded_tokens(chains), tile)
        ct.return_()

    def assume_facts(self, args, values):
        """The specialisation facts as `assume` ops; returns the value to use for each argument."""
        shape_args = set()
        for op in self.ops:
            if op.name == "tle.make_view":
                shape_args.update(v for v in list(op.operands)[1:] if isinstance(v.owner, ir.Block))
        out = []
        for arg, value, div in zip(args, values, self.arg_divisibility):
            kind, _, _ = tle_type(arg.type)
            if kind.startswith("ptr:"):
                if div % 16 == 0:
                    value = ct.assume_div_by(value, 16)
            elif kind in INT_ELEMS and kind != "i1":
                if arg in shape_args:
                    value = ct.assume_bounded(value, 0, None)
                if div > 1:
                    value = ct.assume_div_by(value, div)
            out.append(value)
        return out

    def block(self, block: "ir.Block"):
        self.lower_ops([op.operation for op in block.operations])

    def lower_ops(self, ops: list):
        for op in ops:
            if op.name in _STRUCTURAL:
                if op.name == "func.return" and not self.persistent:  # persistent_loop returns after its loop
                    with op.location:
                        ct.return_()
                continue
            with op.location:
                try:
                    self.lower_op(op)
                except ValueError as e:  # the builders' checks, e.g. a tile dimension that is not a power of two
                    self.fail(op, f"cannot lower {op.name} to Tile IR: {e}")

    def lower_op(self, op: "ir.Operation"):
        name = op.name
        method = getattr(self, "op_" + name.replace(".", "_"), None)
        if method is not None:
            return method(op)
        if name in _FLOAT_BINARY or name in _INT_BINARY or name in _SIGNED_BINARY or name in _FLOAT_MINMAX:
            return self.binary(op)
        if name in _UNARY:
            return self.unary(op)
        self.fail(op, f"{name} has no Tile IR lowering")

    # ---- helpers ------------------------------------------------------------------------------------------------
    @staticmethod
    def const(value, shape, elem) -> "ir.Value":
        return ct.constant(value, ct.tile_type(tuple(shape), elem))

    @staticmethod
    def splat(scalar: "ir.Value", shape) -> "ir.Value":
        """A scalar tile repeated to shape (reshape to all-ones, then broadcast)."""
        shape = tuple(shape)
        if not shape:
            return scalar
        return ct.broadcast(ct.reshape(scalar, [1] * len(shape)), shape)

    @staticmethod
    def along(vec: "ir.Value", axis: int, shape) -> "ir.Value":
        """A 1-D tile laid along `axis` of `shape` and broadcast over the other axes."""
        dims = [1] * len(shape)
        dims[axis] = shape[axis]
        return ct.broadcast(ct.reshape(vec, dims), tuple(shape)) if tuple(dims) != tuple(shape) else \
            ct.reshape(vec, dims)

    @staticmethod
    def elem(v: "ir.Value") -> str:
        return ct.tile_of(v).elem

    @staticmethod
    def shape(v: "ir.Value") -> tuple:
        return ct.tile_of(v).shape

    def bool_not(self, b: "ir.Value") -> "ir.Value":
        return ct.xori(b, self.const(True, self.shape(b), "i1"))

    def isnan(self, x: "ir.Value") -> "ir.Value":
        return ct.cmpf("not_equal", x, x, ordered=False)

    # ---- constants, mesh, values ----------------------------------------------------------------------------------
    def op_arith_constant(self, op):
        elem, shape, _ = tle_type(op.result.type)
        attr = op.attributes["value"]
        if shape is None:
            value = _scalar_value(attr, elem)
        else:
            dense = ir.DenseElementsAttr(attr)
            if dense.is_splat:
                value = _scalar_value(dense.get_splat_value(), elem)
            else:
                import numpy as np
                typed = ir.DenseIntElementsAttr(attr) if elem in INT_ELEMS else ir.DenseFPElementsAttr(attr)
                value = np.array(typed).reshape(shape)
        self.set(op.result, ct.constant(value, ct_type(op.result.type)))

    def op_tle_program_id(self, op):
        axis = "xyz".index(ir.StringAttr(op.attributes["axis"]).value)
        self.set(op.result, self.program_ids[axis] if self.persistent else ct.get_tile_block_id()[axis])

    def op_tle_num_programs(self, op):
        axis = "xyz".index(ir.StringAttr(op.attributes["axis"]).value)
        self.set(op.result, self.grid[axis] if self.persistent else ct.get_num_tile_blocks()[axis])

    def op_tle_undef(self, op):
        elem, shape, _ = tle_type(op.result.type)
        self.set(op.result, self.const(False if elem == "i1" else 0, shape or (), elem))

    def op_tle_arange(self, op):
        start = ir.IntegerAttr(op.attributes["start"]).value
        end = ir.IntegerAttr(op.attributes["end"]).value
        r = ct.iota(end - start, "i32")
        if start:
            r = ct.addi(r, self.const(start, (end - start,), "i32"))
        self.set(op.result, r)

    # ---- shapes -------------------------------------------------------------------------------------------------
    def op_tle_splat(self, op):
        _, shape, _ = tle_type(op.result.type)
        self.set(op.result, self.splat(self.get(op.operands[0]), shape))

    def op_tle_broadcast(self, op):
        _, shape, _ = tle_type(op.result.type)
        x = self.get(op.operands[0])
        if self.shape(x) != shape:
            x = self.broadcast_load(op) or ct.broadcast(x, shape)
        self.set(op.result, x)

    def broadcast_load(self, op):
        """The broadcast `op` of a tile loaded in the same loop iteration, read again directly in the broadcast
        shape (None where that does not apply). A GEMV's `w_tile * reshape(load(x, tile=[BK], at=k), [1, BK])`
        broadcasts the x tile over w's rows, which tileiras does through shared memory: a store, a barrier, then
        the loads. Its scheduler issued the iteration's w loads only after that barrier, so each iteration waited
        for two load latencies one after the other, and a 4096x14336 bf16 GEMV took 60.4 us (native 43.8). Read as
        [BN, BK] (every row the same addresses, served by L1), x needs no exchange: 42.8 us; 4096x4096 20.6 -> 16.4
        (benchmarks/RESULTS.md, "GroupNorm, a KV-cache write and a GEMV").

        It applies in a kernel without a dot (all of whose loads go through pointers) to a tile of a tensor the
        kernel never writes (so reading it again reads the same values), loaded inside a loop and seen through
        reshapes that insert size-1 axes and float casts; the first load is left to tileiras' dead-code
        elimination. Not in a kernel with a dot, where it was not measured: what is broadcast there is a
        block-scaled product's [BM, 1] scales, which would be read again for every accumulator element."""
        if self.has_dot:
            return None
        chain, v = [], op.operands[0]
        while not isinstance(v.owner, ir.Block) and v.owner.name in ("tle.reshape", "arith.extf", "arith.truncf"):
            chain.append(v.owner)
            v = v.owner.operands[0]
        load = v.owner
        if isinstance(load, ir.Block) or load.name != "tle.load" or load.parent.name != "scf.for" \
                or op.parent != load.parent:
            return None
        elem, src, _ = tle_type(load.result.type)
        _, shape, _ = tle_type(op.result.type)
        view = self.views[load.operands[0]]
        axes = unit_insertion(src, tle_type(op.operands[0].type)[1])
        if axes is None or self.chain(view.name) in self.tokens or (
                padding_name(load.attributes["padding"], elem) is not None and not self.through_pointers(elem, src)):
            return None
        tile, out = self.load_by_pointers(view, [self.get(i) for i in list(load.operands)[1:]], src,
                                          _scalar_value(load.attributes["padding"], elem), None, inside_axes(load),
                                          spread=(tuple(shape), axes))
        for c in reversed(chain):
            if c.name != "tle.reshape":
                tile = ct.ftof(tile, tle_type(c.result.type)[0])
        return tile

    def op_tle_reshape(self, op):
        _, shape, _ = tle_type(op.result.type)
        x = self.get(op.operands[0])
        self.set(op.result, x if self.shape(x) == (shape or ()) else ct.reshape(x, shape or ()))

    op_tle_expand_dims = op_tle_reshape

    def op_tle_transpose(self, op):
        perm = list(ir.DenseI32ArrayAttr(op.attributes["perm"]))
        x = self.get(op.operands[0])
        self.set(op.result, x if perm == sorted(perm) else ct.permute(x, perm))

    def op_tle_split(self, op):
        """Each half as the [..., 1] sub-tile at index 0 or 1 of the last axis, reshaped to drop that axis."""
        x = self.get(op.operands[0])
        shape = self.shape(x)
        zero, one = (self.const(i, (), "i32") for i in (0, 1))
        for r, index in zip(op.results, (zero, one)):
            part = ct.extract(x, [zero] * (len(shape) - 1) + [index], shape[:-1] + (1,))
            self.set(r, ct.reshape(part, shape[:-1]))

    def op_tle_join(self, op):
        """Both operands broadcast along a new trailing axis of 2, then a select on that axis' index. `cat` of the
        two [..., 1] tiles says the same, but tileiras moves it through shared memory (6 KB a program for
        dropout with words=4, where the select needs none)."""
        a, b = (self.get(v) for v in op.operands)
        shape = self.shape(a)
        full = shape + (2,)
        lane = ct.broadcast(ct.reshape(ct.iota(2, "i32"), (1,) * len(shape) + (2,)), full)
        first = ct.cmpi("equal", lane, self.const(0, full, "i32"))
        self.set(op.result, ct.select(first, ct.broadcast(ct.reshape(a, shape + (1,)), full),
                                      ct.broadcast(ct.reshape(b, shape + (1,)), full)))

    # ---- elementwise --------------------------------------------------------------------------------------------
    def binary(self, op):
        name = op.name
        for i, v in enumerate(op.operands):
            source = v.owner
            if not isinstance(source, ir.Block) and source.name == "tle.dot" and \
                    (add := _dot_into_add(source)) is not None and add == op:
                self.set(op.result, self.dot(source, self.get(op.operands[1 - i])))
                return
        if self.fma and _mul_into_add(op) is not None:
            return  # lowered at that add as one fma, below
        if self.fma and (mul := _fused_mul(op)) is not None:
            a, b = (self.get(v) for v in mul.operands)
            first = op.operands[0] == mul.result
            c = self.get(op.operands[1 if first else 0])
            if name == "arith.addf":
                r = ct.fma(a, b, c)
            elif first:  # a * b - c
                r = ct.fma(a, b, ct.negf(c))
            else:  # c - a * b
                r = ct.fma(ct.negf(a), b, c)
            self.fused += 1
            self.set(op.result, r)
            return
        a, b = (self.get(v) for v in op.operands)
        if name in _FLOAT_BINARY:
            r = _FLOAT_BINARY[name](a, b, **self.f32_fast(name, a))
        elif name in _FLOAT_MINMAX:
            fn, nan = _FLOAT_MINMAX[name]
            r = fn(a, b, propagate_nan=nan)
        elif name in _INT_BINARY:
            r = (_BOOL_BINARY.get(name, _INT_BINARY[name]) if self.elem(a) == "i1" else _INT_BINARY[name])(a, b)
        else:
            fn, signed = _SIGNED_BINARY[name]
            r = fn(a, b, signed=signed)
        self.set(op.result, r)

    def unary(self, op):
        x = self.get(op.operands[0])
        self.set(op.result, _UNARY[op.name](x, **self.f32_fast(op.name, x)))

    def f32_fast(self, name: str, x) -> dict:
        """The keywords of the native path's fast form (_F32_FAST) when `x` is f32, else none."""
        return _F32_FAST[name] if name in _F32_FAST and self.elem(x) == "f32" else {}

    def op_arith_mului_extended(self, op):
        """tle's umulhi: the high word is `mulhii` (the high half of the product of the operands' bits read as
        unsigned); the low word, where something reads it, `muli`."""
        a, b = (self.get(v) for v in op.operands)
        self.set(op.results[1], ct.mulhii(a, b))
        if has_uses(op.results[0]):
            self.set(op.results[0], ct.muli(a, b))

    def op_math_fma(self, op):
        self.set(op.result, ct.fma(*(self.get(v) for v in op.operands)))

    def op_math_atan(self, op):
        """Tile IR has atan2 but no atan: atan(x) = atan2(x, 1)."""
        x = self.get(op.operands[0])
        self.set(op.result, ct.atan2(x, self.const(1.0, self.shape(x), self.elem(x))))

    def math_in_f32(self, op, compute):
        """op's result: compute(x) on its operand, through f32 for f16 and bf16 (rounded once, as every math function
        on those types), in the operand's own type for f32 and f64: the math functions Tile IR lacks, composed of
        ops it has."""
        x = self.get(op.operands[0])
        elem = self.elem(x)
        narrow = elem in ("f16", "bf16")
        r = compute(ct.ftof(x, "f32") if narrow else x)
        self.set(op.result, ct.ftof(r, elem) if narrow else r)

    # log1p, expm1, asin and acos: Tile IR has none of them. The forms keep the digits the plain ones lose: near 0
    # for log1p and expm1, near +-1 for asin and acos. Each is within 2 ulp of the exact value where its parts (log,
    # exp, sqrt, atan2) are correctly rounded (f32; the emitted ops run on numpy in tests/lowering/
    # test_tle_to_tileir.py); libdevice's, on the native path, within 1-2.
    def op_math_log1p(self, op):
        """log(1 + x) as x * (log(u) / (u - 1)) with u = 1 + x rounded (Goldberg, "What every computer scientist
        should know about floating-point arithmetic", theorem 4): the rounding error of u cancels in the quotient.
        Where u is 1, x itself (-0.0 stays -0.0); where u is inf, inf (the quotient would be inf / inf)."""
        def compute(x):
            shape, elem = self.shape(x), self.elem(x)
            u = ct.addf(x, self.const(1.0, shape, elem))
            d = ct.subf(u, self.const(1.0, shape, elem))
            r = ct.mulf(ct.log(u), ct.divf(x, d))
            r = ct.select(ct.cmpf("equal", u, self.const(math.inf, shape, elem)), u, r)
            return ct.select(ct.cmpf("equal", d, self.const(0.0, shape, elem)), x, r)
        self.math_in_f32(op, compute)

    def op_math_expm1(self, op):
        """exp(x) - 1 as (u - 1) * (x / log(u)) with u = exp(x) (Kahan's): the error of u cancels again. Where u is
        1, x itself; where u - 1 is -1 (x far below 0), -1; where u is inf, inf."""
        def compute(x):
            shape, elem = self.shape(x), self.elem(x)
            u = ct.exp(x)
            um1 = ct.subf(u, self.const(1.0, shape, elem))
            r = ct.mulf(um1, ct.divf(x, ct.log(u)))
            r = ct.select(ct.cmpf("equal", u, self.const(math.inf, shape, elem)), u, r)
            r = ct.select(ct.cmpf("equal", um1, self.const(-1.0, shape, elem)), um1, r)
            return ct.select(ct.cmpf("equal", u, self.const(1.0, shape, elem)), x, r)
        self.math_in_f32(op, compute)

    def cosine_side(self, x):
        """sqrt(1 - x * x) as sqrt((1 - x) * (1 + x)): exact differences near +-1, where 1 - x * x cancels; NaN
        for |x| > 1."""
        shape, elem = self.shape(x), self.elem(x)
        one = self.const(1.0, shape, elem)
        return ct.sqrt(ct.mulf(ct.subf(one, x), ct.addf(one, x)))

    def op_math_asin(self, op):
        """asin(x) = atan2(x, sqrt(1 - x^2)) (-0.0 stays -0.0)."""
        self.math_in_f32(op, lambda x: ct.atan2(x, self.cosine_side(x)))

    def op_math_acos(self, op):
        """acos(x) = atan2(sqrt(1 - x^2), x): 0 at 1, pi at -1."""
        self.math_in_f32(op, lambda x: ct.atan2(self.cosine_side(x), x))

    def op_math_trunc(self, op):
        """Tile IR has no trunc: ceil below zero, floor elsewhere (both exact; -0.5 gives ceil's -0.0)."""
        x = self.get(op.operands[0])
        below = ct.cmpf("less_than", x, self.const(0.0, self.shape(x), self.elem(x)))
        self.set(op.result, ct.select(below, ct.ceil(x), ct.floor(x)))

    def op_math_roundeven(self, op):
        """Round half to even (torch.round; the native path's cvt.rni). Tile IR has no such op. For |x| < 2^(p-1),
        p the significand's bits, |x| + 2^(p-1) lies where floats are 1 apart, so the addition rounds |x| to an
        integer, ties to even, and subtracting 2^(p-1) again is exact; then x's sign bit goes back on (round(-0.3)
        is -0.0). From 2^(p-1) up every float is an integer, so larger |x|, infinities and NaN stay as they are.
        f16 and bf16 go through f32, which holds each of their values and rounds them the same."""
        def compute(a):
            wide, shape = self.elem(a), self.shape(a)
            fraction, ity, sign_bit = (52, "i64", 63) if wide == "f64" else (23, "i32", 31)
            magic = self.const(float(2 ** fraction), shape, wide)
            mag = ct.absf(a)
            r = ct.subf(ct.addf(mag, magic), magic)
            sign = ct.andi(ct.bitcast(a, ity), self.const(-(1 << sign_bit), shape, ity))
            r = ct.bitcast(ct.ori(ct.bitcast(r, ity), sign), wide)
            return ct.select(ct.cmpf("less_than", mag, magic), r, a)
        self.math_in_f32(op, compute)

    def op_math_erf(self, op):
        if self.elem(self.get(op.operands[0])) == "f64":
            self.fail(op, "erf of f64 has no Tile IR lowering (Tile IR has no erf; only libdevice's f32 erff is "
                          "reproduced)")
        self.math_in_f32(op, self.erf_f32)

    def erf_f32(self, a: "ir.Value") -> "ir.Value":
        """libdevice's __nv_erff, op for op."""
        shape = self.shape(a)
        t = ct.absf(a)
        big = ct.cmpf("greater_than_or_equal", t, self.const(_f32(_ERF_THRESHOLD), shape, "f32"))
        x = ct.select(big, t, ct.mulf(a, a))

        def coeff(i):
            return ct.select(big, self.const(_f32(_ERF_LARGE[i]), shape, "f32"),
                             self.const(_f32(_ERF_SMALL[i]), shape, "f32"))
        p = coeff(0)
        for i in range(1, len(_ERF_SMALL)):
            p = ct.fma(p, x, coeff(i))
        r = ct.fma(p, a, a)
        # |a| >= threshold: copysign(1 - 2^-|r|, a) (a is not NaN there, and not -0.0)
        v = ct.subf(self.const(1.0, shape, "f32"), ct.exp2(ct.negf(ct.absf(r)), ftz=True))
        signed = ct.select(ct.cmpf("less_than", a, self.const(0.0, shape, "f32")), ct.negf(v), v)
        return ct.select(big, signed, r)

    def op_arith_cmpf(self, op):
        a, b = (self.get(v) for v in op.operands)
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        if pred in _CMPF:
            name, ordered = _CMPF[pred]
            r = ct.cmpf(name, a, b, ordered=ordered)
        elif pred in (0, 15):  # false, true
            r = self.const(pred == 15, self.shape(a), "i1")
        elif pred == 7:  # ordered: neither is NaN
            r = ct.andi(ct.cmpf("equal", a, a), ct.cmpf("equal", b, b))
        else:  # 14, unordered: either is NaN
            r = ct.ori(self.isnan(a), self.isnan(b))
        self.set(op.result, r)

    def op_arith_cmpi(self, op):
        a, b = (self.get(v) for v in op.operands)
        name, signed = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value]
        self.set(op.result, ct.cmpi(name, a, b, signed=signed))

    def op_arith_select(self, op):
        c, a, b = (self.get(v) for v in op.operands)
        shape = self.shape(a)
        if self.shape(c) != shape:  # a scalar condition choosing whole tiles
            c = self.splat(c, shape)
        self.set(op.result, ct.select(c, a, b))

    # ---- conversions --------------------------------------------------------------------------------------------
    def _to(self, op) -> str:
        return tle_type(op.result.type)[0]

    def op_arith_extf(self, op):
        self.set(op.result, ct.ftof(self.get(op.operands[0]), self._to(op)))

    op_arith_truncf = op_arith_extf

    def _int_to_float(self, op, signed: bool):
        x, to = self.get(op.operands[0]), self._to(op)
        if self.elem(x) == "i1":
            one = -1.0 if signed else 1.0
            r = ct.select(x, self.const(one, self.shape(x), to), self.const(0.0, self.shape(x), to))
        else:
            r = ct.itof(x, to, signed=signed)
        self.set(op.result, r)

    def op_arith_sitofp(self, op):
        self._int_to_float(op, True)

    def op_arith_uitofp(self, op):
        self._int_to_float(op, False)

    def op_arith_fptosi(self, op):
        self.set(op.result, ct.ftoi(self.get(op.operands[0]), self._to(op), signed=True))

    def op_arith_fptoui(self, op):
        self.set(op.result, ct.ftoi(self.get(op.operands[0]), self._to(op), signed=False))

    def _extend(self, op, signed: bool):
        x, to = self.get(op.operands[0]), self._to(op)
        if self.elem(x) == "i1":
            r = ct.select(x, self.const(-1 if signed else 1, self.shape(x), to), self.const(0, self.shape(x), to))
        else:
            r = ct.exti(x, to, signed=signed)
        self.set(op.result, r)

    def op_arith_extsi(self, op):
        self._extend(op, True)

    def op_arith_extui(self, op):
        self._extend(op, False)

    def op_arith_trunci(self, op):
        x, to = self.get(op.operands[0]), self._to(op)
        if to == "i1":  # the low bit
            shape, elem = self.shape(x), self.elem(x)
            r = ct.cmpi("not_equal", ct.andi(x, self.const(1, shape, elem)), self.const(0, shape, elem))
        else:
            r = ct.trunci(x, to)
        self.set(op.result, r)

    def op_arith_bitcast(self, op):
        self.set(op.result, ct.bitcast(self.get(op.operands[0]), self._to(op)))

    # ---- matmul, reductions, scans --------------------------------------------------------------------------------
    def op_tle_dot(self, op):
        if _dot_into_add(op) is None:  # else lowered at that add (binary), with the add's other operand as acc
            self.set(op.result, self.dot(op, self.get(op.operands[2])))

    def dot(self, op, acc) -> "ir.Value":
        """tle.dot `op` of its a and b into the lowered accumulator `acc`."""
        a, b = (self.get(v) for v in list(op.operands)[:2])
        ea, eacc = self.elem(a), self.elem(acc)
        precision = ir.StringAttr(op.attributes["precision"]).value
        if ea == "i8" and eacc == "i32":
            r = ct.mmai(a, b, acc)
        elif ea in HALF and eacc in ("f32", "f16"):
            r = ct.mmaf(a, b, acc) if eacc == "f32" else ct.ftof(ct.mmaf(a, b, ct.ftof(acc, "f32")), eacc)
        elif ea == "f32" and eacc == "f32":
            if precision == "tf32":
                a, b = ct.ftof(a, "tf32"), ct.ftof(b, "tf32")
            r = ct.mmaf(a, b, acc)
        elif ea == "f64" and eacc == "f64":
            r = ct.mmaf(a, b, acc)
        elif ea in F8 and eacc == "f32":
            # precision "fast" (the default for 8-bit operands) is fast_acc: the tensor cores' own accumulation, as
            # the native path's tt.dot gets (Triton's default). Without it ("ieee", fast_acc=false) tileiras adds
            # each K step's products into a second f32 accumulator: twice the registers, and a 128x256 tile then
            # spilled and ran at 444-472 TFLOP/s against 1155-1303 with it (H200, benchmarks/RESULTS.md).
            r = ct.mmaf(a, b, acc, fast_acc=precision == "fast")
        else:
            self.fail(op, f"dot of {ea} into {eacc} has no Tile IR lowering (mmaf takes f16/bf16/f32/f64 and 8-bit "
                          f"floats, mmai i8 -> i32)")
        return r

    def op_tle_reduce(self, op):
        if op.result in self.values:  # lowered with its max/argmax partner
            return
        kind = ir.StringAttr(op.attributes["kind"]).value
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        x = self.get(op.operands[0])
        elem = self.elem(x)
        flt = elem not in INT_ELEMS
        if (partner := extreme_partner(op)) is not None:  # one (value, index) reduction gives both
            value, index = self.arg_extreme(x, axis, kind in ("max", "argmax"), carry_extreme=True)
            for reduce_op in (op, partner):
                self.set(reduce_op.result,
                         index if ir.StringAttr(reduce_op.attributes["kind"]).value.startswith("arg") else value)
            return
        if kind == "sum":
            src = ct.ftof(x, "f32") if elem in HALF else x
            (r,) = ct.reduce([src], axis, [-0.0 if flt else 0],
                             lambda l, r: [ct.addf(l, r) if flt else ct.addi(l, r)])
            if elem in HALF:
                r = ct.ftof(r, elem)
        elif kind in ("max", "min"):
            if flt:
                identity = -math.inf if kind == "max" else math.inf
            else:
                identity = _int_min(elem) if kind == "max" else _int_max(elem)
            fn = _extreme_of(kind == "max", flt)
            (r,) = ct.reduce([x], axis, [identity], lambda l, r: [fn(l, r)])
        elif kind in ("argmax", "argmin"):
            _, r = self.arg_extreme(x, axis, kind == "argmax")
        else:
            self.fail(op, f"reduce kind '{kind}' has no Tile IR lowering")
        self.set(op.result, r)

    def arg_extreme(self, x: "ir.Value", axis: int, is_max: bool, carry_extreme: bool = False):
        """The first index of the largest (smallest) value along axis, NaN counting as the extreme, and the value
        the reduction carried: with `carry_extreme`, the max (min) along axis itself, NaN-propagating (the
        TTIR lowering's _arg_combine says why the index is the same)."""
        shape, elem = self.shape(x), self.elem(x)
        flt = elem not in INT_ELEMS
        index = self.along(ct.iota(shape[axis], "i32"), axis, shape)
        better = "greater_than" if is_max else "less_than"
        if flt:
            worst = -math.inf if is_max else math.inf
        else:
            worst = _int_min(elem) if is_max else _int_max(elem)

        def combine(va, vb, ia, ib):
            lower = ct.cmpi("less_than", ia, ib)
            if flt:  # as the TTIR lowering's _arg_combine: "beats or is NaN, against a number", both ways round
                wins = ct.andi(ct.cmpf(better, va, vb, ordered=False), ct.cmpf("equal", vb, vb))  # vb not NaN
                loses = ct.andi(ct.cmpf(better, vb, va, ordered=False), ct.cmpf("equal", va, va))
                tie = self.bool_not(loses)  # tie or win: the win is taken first
            else:
                tie = ct.cmpi("equal", va, vb)
                wins = ct.cmpi(better, va, vb)
            pick = ct.ori(wins, ct.andi(tie, lower))
            value = _extreme_of(is_max, flt)(va, vb) if carry_extreme else ct.select(pick, va, vb)
            return [value, ct.select(pick, ia, ib)]

        value, idx = ct.reduce([x, index], axis, [worst, _int_max("i32")], combine)
        return value, idx

    def op_tle_scan(self, op):
        kind = ir.StringAttr(op.attributes["kind"]).value
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        reverse = "reverse" in op.attributes
        if kind not in ("sum", "prod", "max", "min"):
            self.fail(op, f"scan kind '{kind}' has no Tile IR lowering")
        x = self.get(op.operands[0])
        elem = self.elem(x)
        flt = elem not in INT_ELEMS
        src = ct.ftof(x, "f32") if elem in HALF and kind in ("sum", "prod") else x
        if kind == "sum":
            identity, fn = (-0.0 if flt else 0), (ct.addf if flt else ct.addi)
        elif kind == "prod":
            identity, fn = 1, (ct.mulf if flt else ct.muli)
        elif flt:
            identity, fn = (-math.inf if kind == "max" else math.inf), _extreme_of(kind == "max", flt)
        else:
            identity = _int_min(elem) if kind == "max" else _int_max(elem)
            fn = _extreme_of(kind == "max", flt)
        (r,) = ct.scan([src], axis, [identity], lambda l, r: [fn(l, r)], reverse=reverse)
        self.set(op.result, ct.ftof(r, elem) if src is not x else r)

    def op_tle_combine_scan(self, op):
        axis, reverse = ir.IntegerAttr(op.attributes["axis"]).value, "reverse" in op.attributes
        self.combined(op, lambda xs, ids, fn: ct.scan(xs, axis, ids, fn, reverse=reverse))

    def op_tle_combine_reduce(self, op):
        """A combine fn need not be commutative (a linear recurrence's is not), and Tile IR's reduce combines in no
        defined order (wrong results on the H200 for the recurrence, tests/gpu/test_scans_gpu.py). So: the scan,
        which keeps the order, then each result's last element along the axis (last_along)."""
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        if "commutative" in op.attributes:  # the kernel says the fn commutes (Welford's): any order will do
            self.combined(op, lambda xs, ids, fn: ct.reduce(xs, axis, ids, fn))
            return
        reused = scan_to_reuse(op)  # the same scan, already lowered earlier in the block
        if reused is not None:
            for r, scanned in zip(op.results, reused.results):
                self.set(r, self.last_along(self.get(scanned), axis))
            return
        self.combined(op, lambda xs, ids, fn: [self.last_along(r, axis) for r in ct.scan(xs, axis, ids, fn)])

    def last_along(self, x, axis: int):
        """x's last element along `axis` (that axis dropped): a reduce in which every other element is a value
        that changes nothing, -0.0 for floats (x + -0.0 is x, -0.0 included), 0 for integers, false for bools."""
        shape, elem = self.shape(x), self.elem(x)
        n = shape[axis]
        index = ct.broadcast(ct.reshape(ct.iota(n, "i32"), tuple(n if d == axis else 1 for d in range(len(shape)))),
                             shape)
        last = ct.cmpi("equal", index, self.const(n - 1, shape, "i32"))
        flt = elem not in INT_ELEMS
        zero = -0.0 if flt else 0
        kept = ct.select(last, x, self.const(zero, shape, elem))
        fn = ct.ori if elem == "i1" else ct.addf if flt else ct.addi
        (r,) = ct.reduce([kept], axis, [zero], lambda a, b: [fn(a, b)])
        return r

    def combined(self, op, build):
        """combine_scan / combine_reduce: Tile IR's scan / reduce over all operands with the combine func's body
        inlined into its region. Tile IR interleaves the region's arguments per operand (earlier0, later0,
        earlier1, ...); the func takes the earlier element's values first. The identities are the op's
        `identities` (the legality check sends a kernel without them to the native path)."""
        if "identities" not in op.attributes:
            self.fail(op, "scan() or reduce() with combine= has no Tile IR lowering without identity=")
        ids = [_scalar_value(a, tle_type(r.type)[0]) for a, r in zip(ir.ArrayAttr(op.attributes["identities"]),
                                                                      op.results)]
        body = combine_func(op).regions[0].blocks[0]

        def combine(*args):
            for a, v in zip(body.arguments, [*args[0::2], *args[1::2]]):
                self.set(a, v)
            for inner in body.operations:
                inner = inner.operation
                if inner.name == "func.return":
                    return [self.get(v) for v in inner.operands]
                with inner.location:
                    self.lower_op(inner)
            self.fail(op, "the combine func has no return")

        results = build([self.get(x) for x in op.operands], ids, combine)
        for r, v in zip(op.results, results):
            self.set(r, v)

    # ---- debugging ------------------------------------------------------------------------------------------------
    def op_tle_assert(self, op):
        """Tile IR's assert where the kernel keeps its asserts (dialects/tle.py keeps_asserts), else nothing. The
        device prints the op's .tle file and line, the program and the failing element before the message."""
        if self.device_asserts:
            ct.assert_(self.get(op.operands[0]), ir.StringAttr(op.attributes["message"]).value)

    def op_tle_print(self, op):
        """print_tko, the device's printf: the label, then one conversion per value (%d for i32, narrower ints and
        bools widened to it; %lld for i64; %f for floats, f16/bf16 widened to f32). No token: a print is ordered
        against nothing."""
        args, conversions = [], []
        for v in op.operands:
            x = self.get(v)
            elem = self.elem(x)
            if elem in HALF:
                x, elem = ct.ftof(x, "f32"), "f32"
            elif elem in ("i1", "i8", "i16"):
                x, elem = ct.exti(x, "i32", signed=elem != "i1"), "i32"
            conversions.append({"i32": "%d", "i64": "%lld"}.get(elem, "%f"))
            args.append(x)
        label = print_label(ir.StringAttr(op.attributes["message"]).value).replace("%", "%%")
        ct.print_tko(" ".join(([label] if label else []) + conversions) + "\n", args)

    # ---- views and memory ---------------------------------------------------------------------------------------
    def op_tle_make_view(self, op):
        operands = list(op.operands)
        rank = (len(operands) - 1) // 2
        self.tensor_view(op, self.get(operands[0]), [self.static_or_value(v) for v in operands[1:1 + rank]],
                         [self.static_or_value(v) for v in operands[1 + rank:]])

    def op_tle_slice(self, op):
        """A window of a view: its own tensor view at the window's first element, base + sum(start_i * stride_i) in
        i64, with the window's sizes and the view's strides, and partition views of it for its loads and stores.
        Made where the slice is (a packed sequence's window is per program). Its base is assumed 16-byte aligned
        where _aligned_base proves it, so tileiras keeps vector and TMA accesses for it."""
        parent = self.views[op.operands[0]]
        operands = list(op.operands)
        rank = len(parent.strides)
        offset = None
        for start, stride in zip(operands[1:1 + rank], parent.strides):
            if constant_int(start) == 0:
                continue
            term = self.get(start)
            term = term if _is_i64(term) else ct.exti(term, "i64")
            if not isinstance(stride, int):
                term = ct.muli(term, stride if _is_i64(stride) else ct.exti(stride, "i64"))
            elif stride != 1:
                term = ct.muli(term, self.const(stride, (), "i64"))
            offset = term if offset is None else ct.addi(offset, term)
        base = parent.base if offset is None else ct.offset(parent.base, offset)
        aligned = _aligned_base(op.result, self.body, self.arg_divisibility)
        if offset is not None and aligned:
            base = ct.assume_div_by(base, 16)
        at = span_of_location(op.location)
        self.windows.append(f"the slice of '{parent.name}' at {at.line}:{at.col}: its first element is "
                            + ("16-byte aligned, as the launch's divisibility facts prove" if aligned else
                               "not proven 16-byte aligned (a start * stride not known to be a multiple of 16 "
                               "bytes), so tileiras may not move it in vectors or by TMA"))
        # the kernel promises sizes >= 0 (dialects/tle.py), as the launch does for a tensor parameter's dims
        sizes = [c if (c := constant_int(v)) is not None else ct.assume_bounded(self.get(v), 0, None)
                 for v in operands[1 + rank:]]
        # An empty window (a sequence of no tokens) is legal, but a tensor map with a size of 0 is not: a TMA access
        # through it stopped the H200 with an illegal instruction. So the tensor view has at least 1 along each
        # runtime size, and each view access through it, where that size is 0, takes tile index 1 instead of its
        # own: wholly outside both the true and the widened window (a load reads padding, a store writes nothing),
        # as any index is outside an empty one. Pointer accesses mask with the true sizes.
        dims = list(_root_view(op.result).operands)[1:1 + rank]  # the tensor parameter's own sizes
        empty = [(None if v else True) if isinstance(v, int) else  # True: a constant size of 0
                 None if any(t == d for d in dims) else  # a dim of the tensor, as its own view has it
                 ct.cmpi("equal", v, self.const(0, (), self.elem(v))) for v, t in zip(sizes, operands[1 + rank:])]
        self.tensor_view(op, base, sizes, parent.strides, empty)

    def view_index(self, view: _View, index: list) -> list:
        """The tile index a view access through `view` uses: its own, or 1 along an axis of an empty slice
        (op_tle_slice)."""
        if not view.empty:
            return index
        out = []
        for i, e in zip(index, view.empty):
            one = None if e is None else self.const(1, (), self.elem(i))
            out.append(i if e is None else one if e is True else ct.select(e, one, i))
        return out

    def static_or_value(self, v):
        c = constant_int(v)
        return c if c is not None else self.get(v)

    def tensor_view(self, op, base, sizes, strides, empty=()):
        """The view `op` defines (a make_view or a slice): make_tensor_view of base with `sizes` and `strides`
        (lowered values, or ints where static), and one partition view per (tile shape, padding) its loads and
        stores use. `empty` (a slice's, op_tle_slice): per axis None, True (a constant size of 0) or the i1 "the
        size is 0"; the tensor view's size is then at least 1 there."""
        view_sizes = [v if e is None else 1 if e is True else ct.maxi(v, self.const(1, (), self.elem(v)))
                      for v, e in zip(sizes, empty)] if empty else sizes
        # A wide view's strides are i64 (tle/abi.py WideTensor), and so is a size past 2**31 - 1 (WideDim);
        # make_tensor_view takes one integer type for all its dynamic sizes and strides, so the others are widened
        # there (the view keeps them as they are for the masks)
        dynamic = [v for v in sizes + strides if not isinstance(v, int)]
        wide = any(_is_i64(v) for v in dynamic)

        def widened(vs):
            return [v if isinstance(v, int) or not wide or _is_i64(v) else ct.exti(v, "i64") for v in vs]
        elem = tle_type(op.result.type)[0][5:]
        view = _View(self.view_name(op.result), elem, base, sizes, strides,
                     ct.make_tensor_view(base, widened(view_sizes), widened(strides)), empty=list(empty))
        for shape, pad in self.part_keys.get(op.result, []):
            view.parts[(shape, pad)] = ct.make_partition_view(view.tensor_view, shape, padding=pad)
        self.views[op.result] = view

    # -- token chains --
    def chain(self, name: str) -> str:
        """The token chain of a tensor (by view name): its own, or its alias group's (tle.aliases)."""
        return self.chain_of.get(name, name)

    def read_token(self, view: _View):
        state = self.tokens.get(self.chain(view.name))
        return state.w if state is not None else None

    def after_read(self, view: _View, token):
        state = self.tokens.get(self.chain(view.name))
        if state is not None:  # the read waited for W, so its token stands for W from now on
            state.a = [t for t in state.a if state.w is None or t != state.w] + [token]

    def write_token(self, view: _View):
        state = self.tokens[self.chain(view.name)]
        deps = state.a or ([state.w] if state.w is not None else [])
        return self.join(deps) if deps else None

    def after_write(self, view: _View, token):
        self.tokens[self.chain(view.name)] = _Tokens(token, [token])

    def fence_token(self):
        """What an atomic waits for: every access so far to every tensor the kernel writes (docs/language.md: an
        atomic orders all of the program's memory accesses, so a program that sees its result also sees what the
        program wrote before it, e.g. the partial sums of a split-K arrival counter)."""
        deps = []
        for state in self.tokens.values():
            deps += state.a or ([state.w] if state.w is not None else [])
        return self.join(deps) if deps else None

    def after_fence(self, token):
        """After an atomic, every written tensor's accesses wait for it."""
        for name in self.tokens:
            self.tokens[name] = _Tokens(token, [token])

    @staticmethod
    def join(tokens: list):
        unique = list(dict.fromkeys(tokens))
        return unique[0] if len(unique) == 1 else ct.join_tokens(unique)

    def op_tle_load(self, op):
        view = self.views[op.operands[0]]
        index = [self.get(v) for v in list(op.operands)[1:]]
        elem, shape, _ = tle_type(op.result.type)
        pad = padding_name(op.attributes["padding"], elem)
        token = self.read_token(view)
        inside = inside_axes(op)
        if pad is not None and not self.through_pointers(elem, shape):
            tile, out = ct.load_view_tko(view.parts[(shape, pad)], self.view_index(view, index), token,
                                         allow_tma=self.tma_for(op),
                                         latency=self.load_latency, inbounds=_all_or_none(inside, len(index)))
        else:
            tile, out = self.load_by_pointers(view, index, shape, _scalar_value(op.attributes["padding"], elem), token,
                                              inside)
        self.after_read(view, out)
        self.set(op.result, tile)

    def load_by_pointers(self, view: _View, index, shape, pad, token, inside=frozenset(), spread=None):
        """A tile load whose padding a partition view cannot express: masked gather of the tile's elements
        (no mask along the axes in `inside`, no mask at all when every axis is). With `spread` = (out, axes) the
        tile is read directly in shape `out`, its axis d along out's axis axes[d] and repeated along the others
        (broadcast_load)."""
        out, axes = spread or (tuple(shape), list(range(len(shape))))
        elems, mask = [], None
        for axis, (i, size) in enumerate(zip(index, view.sizes)):
            it = "i64" if not isinstance(size, int) and _is_i64(size) else "i32"  # i64 along a WideDim
            i = ct.exti(i, it) if it == "i64" else i
            start = self.splat(ct.muli(i, self.const(shape[axis], (), it)), out)
            dims = tuple(shape[axis] if a == axes[axis] else 1 for a in range(len(out)))
            along = ct.reshape(ct.iota(shape[axis], it), dims)
            e = ct.addi(start, along if dims == out else ct.broadcast(along, out))
            if axis not in inside:
                bound = self.const(size, out, it) if isinstance(size, int) else self.splat(size, out)
                within = ct.cmpi("less_than", e, bound, signed=False)  # also false for negative e
                mask = within if mask is None else ct.andi(mask, within)
            elems.append(e)
        ptrs = self.pointers(view, elems, out)
        return ct.load_ptr_tko(ptrs, mask, self.const(pad, out, view.elem) if mask is not None else None, token)

    def pointers(self, view: _View, indices, shape) -> "ir.Value":
        """base + sum(indices[i] * strides[i]) for element-index tiles broadcast to `shape`, offsets in i64.
        Each index's term is computed at the index's own shape and terms of one shape are summed there, so only the
        last additions run at `shape`: a conv's gather([n, ih, iw, c]) of a [BM, BK] tile multiplies three
        [BM, 1] tiles, not three [BM, BK] ones. On the H200 that ran convolutions 5-10% faster on Tile IR
        (benchmarks/RESULTS.md, "Convolution as an implicit GEMM")."""
        sums: dict = {}
        for idx, stride in zip(indices, view.strides):
            at = self.shape(idx)
            term = idx if _is_i64(idx) else ct.exti(idx, "i64")
            if isinstance(stride, int):
                if stride != 1:
                    term = ct.muli(term, self.const(stride, at, "i64"))
            else:
                term = ct.muli(term, self.splat(stride if _is_i64(stride) else ct.exti(stride, "i64"), at))
            sums[at] = ct.addi(sums[at], term) if at in sums else term
        offset = None
        for at, term in sums.items():
            term = term if at == tuple(shape) else ct.broadcast(term, tuple(shape))
            offset = term if offset is None else ct.addi(offset, term)
        return ct.offset(self.splat(view.base, shape), offset)

    def op_tle_store(self, op):
        view = self.views[op.operands[0]]
        value = self.get(op.operands[1])
        index = [self.get(v) for v in list(op.operands)[2:]]
        shape = self.shape(value)
        part = next(p for (s, _), p in view.parts.items() if s == shape)
        inside = inside_axes(op)
        self.after_write(view, ct.store_view_tko(value, part, self.view_index(view, index), self.write_token(view),
                                                 allow_tma=self.tma_for(op),
                                                 inbounds=_all_or_none(inside, len(index))))

    def indexed(self, op, with_value: bool):
        """(view, value, index tiles, mask) of a gather / scatter / atomic."""
        view, *groups = operand_groups(op)
        value = self.get(groups.pop(0)[0]) if with_value else None
        idx, mask = groups[0], groups[1]
        mask = self.get(mask[0]) if mask else None
        return self.views[view[0]], value, [self.get(unbroadcast(v)) for v in idx], mask

    def op_tle_gather(self, op):
        view, _, idx, mask = self.indexed(op, False)
        elem, shape, _ = tle_type(op.result.type)
        ptrs = self.pointers(view, idx, shape)
        other = self.const(_scalar_value(op.attributes["other"], elem), shape, elem) if mask is not None else None
        tile, token = ct.load_ptr_tko(ptrs, mask, other, self.read_token(view))
        self.after_read(view, token)
        self.set(op.result, tile)

    def op_tle_scatter(self, op):
        view, value, idx, mask = self.indexed(op, True)
        ptrs = self.pointers(view, idx, self.shape(value))
        self.after_write(view, ct.store_ptr_tko(ptrs, value, mask, self.write_token(view)))

    def op_tle_atomic(self, op):
        view, value, idx, mask = self.indexed(op, True)
        kind = ir.StringAttr(op.attributes["kind"]).value
        shape, elem = self.shape(value), self.elem(value)
        ptrs = self.pointers(view, idx, shape)
        token = self.fence_token()
        flt = elem not in INT_ELEMS
        if kind == "cas":
            compare = self.get(operand_groups(op)[-1][0])
            old, out = ct.atomic_cas_tko(ptrs, compare, value, mask, token, ordering=self.atomic_ordering)
        elif kind == "add":
            old, out = ct.atomic_rmw_tko(ptrs, value, "addf" if flt else "add", mask, token,
                                         ordering=self.atomic_ordering)
        elif kind in ("and", "or", "xor", "xchg") or (kind in ("max", "min") and not flt):
            old, out = ct.atomic_rmw_tko(ptrs, value, kind, mask, token, ordering=self.atomic_ordering)
        elif kind in ("max", "min") and elem in ("f32", "f64"):
            old, out = self.float_atomic_extreme(ptrs, value, kind, mask, token)
        else:
            self.fail(op, f"atomic {kind} of {elem} has no Tile IR lowering")
        self.after_fence(out)
        if mask is not None:  # masked-off lanes return 0
            old = ct.select(mask, old, self.const(0, shape, elem))
        self.set(op.result, old)

    def float_atomic_extreme(self, ptrs, value, kind, mask, token):
        """Float atomic max/min through integer atomics on the bits (see the module doc)."""
        shape, elem = self.shape(value), self.elem(value)
        ielem = "i32" if elem == "f32" else "i64"
        bits = ct.bitcast(value, ielem)
        iptrs = ct.ptr_to_ptr(ptrs, ielem)
        negative = ct.cmpi("less_than", bits, self.const(0, shape, ielem))
        positive = self.bool_not(negative)
        if mask is not None:
            negative, positive = ct.andi(negative, mask), ct.andi(positive, mask)
        pos_mode, neg_mode = ("max", "umin") if kind == "max" else ("min", "umax")
        old_p, t_p = ct.atomic_rmw_tko(iptrs, bits, pos_mode, positive, token, ordering=self.atomic_ordering)
        old_n, t_n = ct.atomic_rmw_tko(iptrs, bits, neg_mode, negative, token, ordering=self.atomic_ordering)
        old = ct.bitcast(ct.select(negative, old_n, old_p), elem)
        return old, ct.join_tokens([t_p, t_n])

    # ---- control flow -------------------------------------------------------------------------------------------
    def carried_tensors(self, op) -> list[str]:
        """The written tensors that op's regions access: their token chains flow through op."""
        names = set()
        for inner in nested_ops(op):
            if inner.name == "tle.atomic":  # an atomic waits for, and orders, every written tensor's chain
                return sorted(self.written)
            if inner.name in ("tle.load", "tle.store", "tle.gather", "tle.scatter"):
                names.add(self.chain(self.view_name(inner.operands[0])))
        return sorted(names & self.written)

    def token_pair(self, name: str) -> list:
        """(W, join(A)) of a chain as two concrete tokens, for a loop's iter values or an if's results."""
        state = self.tokens[name]
        w = state.w if state.w is not None else ct.make_token()
        a = self.join(state.a) if state.a else w
        return [w, a]

    def yielded_tokens(self, names) -> list:
        out = []
        for name in names:
            out += self.token_pair(name)
        return out

    def set_chains(self, names, tokens):
        for i, name in enumerate(names):
            self.tokens[name] = _Tokens(tokens[2 * i], [tokens[2 * i + 1]])

    def op_scf_for(self, op):
        lb, ub, step, *inits = (self.get(v) for v in op.operands)
        chains = self.carried_tensors(op)
        inits = inits + self.yielded_tokens(chains)
        body = op.regions[0].blocks[0]
        n = len(op.results)
        terminator = list(body.operations)[-1].operation

        def lower_body(iv, *carried):
            self.set(body.arguments[0], iv)
            for arg, v in zip(list(body.arguments)[1:], carried[:n]):
                self.set(arg, v)
            self.set_chains(chains, list(carried[n:]))
            self.block(body)
            return [self.get(v) for v in terminator.operands] + self.yielded_tokens(chains)

        results = ct.for_(lb, ub, step, inits, lower_body)
        for r, v in zip(op.results, results[:n]):
            self.set(r, v)
        self.set_chains(chains, list(results[n:]))

    def op_scf_if(self, op):
        cond = self.get(op.operands[0])
        chains = self.carried_tensors(op)
        incoming = self.yielded_tokens(chains)
        types = [ct_type(r.type) for r in op.results] + [ct.token_type()] * len(incoming)

        def branch(region):
            def lower():
                self.set_chains(chains, incoming)
                if region.blocks and len(region.blocks[0].operations):
                    block = region.blocks[0]
                    self.block(block)
                    terminator = list(block.operations)[-1].operation
                    values = [self.get(v) for v in terminator.operands]
                else:
                    values = []
                return values + self.yielded_tokens(chains)
            return lower

        results = ct.if_(cond, types, branch(op.regions[0]), branch(op.regions[1]))
        n = len(op.results)
        for r, v in zip(op.results, results[:n]):
            self.set(r, v)
        self.set_chains(chains, list(results[n:]))


LOWERED_OPS = frozenset(
    [name[3:].replace("_", ".", 1) for name in dir(_Kernel) if name.startswith("op_")]
    + list(_FLOAT_BINARY) + list(_FLOAT_MINMAX) + list(_INT_BINARY) + list(_SIGNED_BINARY) + list(_UNARY)
    + list(_STRUCTURAL))
