"""How a kernel's parameters are passed, and what the runtime proved about them.

A tensor parameter `x: tensor<f32>[M, N]` is passed as its base pointer, then each symbolic dim not passed
before (M, N), then one stride per axis (in elements). A stride the runtime saw equal to 1 is not passed at all:
it is a constant in the compiled code. A scalar parameter is passed as itself.

`Spec` is the specialisation key: which arguments are divisible by 16 (for a pointer: 16-byte aligned), which
dims and strides are divisible by 8, 4 or 2 only, which strides are 1, and which tiles the launch grid keeps inside
their tensor. The lowering writes these facts into the
IR (tle.divisibility, folded strides, tle.inside) so that the backends can vectorise, use TMA and drop masks, as
Triton does for its own arguments.

Past Triton, which only tells divisibility by 16: what vectorises a row is its start being 16-byte aligned, which
for f32 rows is a stride divisible by 4, for 16-bit rows by 8. A 4096x1000 f32 tensor has that, and with only
"not divisible by 16" to go on Triton loads its rows one element per instruction (24 `ld.global.b32` per thread in
examples/layernorm.tle at BLOCK = 1024; with the stride and N known divisible by 8, 6 `ld.global.v4`). So dims and
strides also carry the largest power of two under 16 that divides them (`Spec.divisible`). Scalars keep the
16-or-nothing rule: the launch plans see a scalar's value only as "divisible by 16 or not" (runtime/fastlaunch.py),
while dims and strides come from the tensors' shapes and strides, which the plans key on exactly.

The grid facts: a load or store whose tile index along axis i is `program_id(a)` itself reads tiles 0 .. grid[a]-1
along that axis; when grid[a] * tile[i] <= the tensor's size there, every one of them lies inside, and the bounds
check of that axis (a row kernel's `row < M`, an exact vector_add's `offs < n`) is dead code. Triton cannot know
this (its launcher does not look at the grid); tle's runtime plans each launch per grid, so it can.

The fixed-tile facts, proved in the same place: a tile at a constant index c along a symbolic dim (a row kernel's
`at=[row, 0]`) lies inside when (c + 1) * tile <= the dim's size, which the launch's sizes decide (a row of
N = 1024 read as one tile of 1024 needs no column mask). Likewise a loop from a constant to an expression of dims
runs at least once where the sizes say so (LoopRuns), and a tile whose index is such a loop's variable lies
inside when stop * tile <= the dim's size (LoopTile: a matmul's K loop over cdiv(K, BK) tiles when BK divides K);
where only its last tiles are ragged, the loop is split in two, the first part unchecked (LoopSplit). These need
no grid: the runtime plans per argument shapes, so a plan never meets sizes that break them, whether its
grid is numbers or a callable.

One fact is about the grid alone: a kernel with a `dot` launched with more programs than the GPU has SMs (a grid
the runtime planned for; ManyPrograms) may ask tileiras for more than one program per SM, which only costs where
every program has an SM to itself (lowering/tle_to_tileir.py, `_occupancy`). Beside it, ShortK: a grid of several waves
whose programs' one dot sums at most SHORT_K values of K each, so writing the output tile is a large part of a
program's time; the Tile IR lowering then runs the grid as a persistent loop (`_persistent`). And ManyWaves: more
than two waves, where a dot on small tiles runs faster on the native path (lowering/tileir_legality.py,
`tileir_slower`), and where a kernel without a dot that tileiras leaves at fewer than 12 warps per SM is compiled
again for more (tle/compiler.py, `_to_twelve_warps`): of these facts of the grid alone, the one proved for kernels
without a dot too. And UnalignedRows: a tensor whose rows TMA cannot read (a base or a stride other than 1 that is
not a multiple of 16 bytes), which the Tile IR router reads the same way.

Sizes and strides are passed as i32 where they fit, but a tensor may span more elements than 2**31 - 1 (32768
rows of a 128256-entry vocabulary: 4.2e9 elements), a stride may pass it (the batch axis of a [1, 32768, 128256]
tensor), and so may a size (a flat tensor of 3e9 elements). WideTensor marks such a tensor: its strides are passed
as i64 and the lowerings compute its element offsets in i64. WideDim marks a dim past 2**31 - 1: it is passed as
i64, the lowerings compute element indices along it (and its bounds checks) in i64, and where the kernel reads
its value the checker types it i64 for that launch (tle/check.py, check_kernel's wide_dims), as Triton types an
integer argument past 2**31 - 1. Every other tensor and dim keeps i32, the arithmetic hand-written Triton does and
the fastest.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, replace

from .types import BYTES
from .typed import Bind, Const, Dim, For, Kernel, Op, Read, TensorParam, dots, nodes


@dataclass(frozen=True)
class AbiArg:
    kind: str  # "ptr" | "dim" | "stride" | "scalar"
    name: str  # tensor, dim or scalar name
    dtype: str  # ptr: element type; dim: i32, or i64 for a WideDim; stride: i32, or i64 for a WideTensor's;
    #             scalar: its type
    axis: int = -1  # stride: which axis

    @property
    def key(self) -> str:
        return f"{self.name}.stride{self.axis}" if self.kind == "stride" else self.name


@dataclass(frozen=True)
class Spec:
    divisible16: frozenset = frozenset()  # AbiArg keys
    unit_strides: frozenset = frozenset()  # stride keys equal to 1
    inside: frozenset = frozenset()  # launch facts that hold: GridTile, FixedTile, LoopTile, LoopRuns, LoopSplit,
    #                                 ManyPrograms, ManyWaves, ShortK, UnalignedRows, WideTensor, WideDim
    divisible: frozenset = frozenset()  # (dim or stride key, 2 | 4 | 8): its largest power-of-two divisor under 16
    aliases: frozenset = frozenset()  # sorted tuples of tensor names whose memory overlaps, one written (aliases())

    def key(self) -> str:
        key = f"d16={','.join(sorted(self.divisible16))};unit={','.join(sorted(self.unit_strides))}"
        if self.inside:  # only then, so that every other key (and the tuning database's) stays as it was
            key += f";inside={','.join(sorted(str(f) for f in self.inside))}"
        if self.divisible:  # likewise
            key += f";div={','.join(f'{k}:{d}' for k, d in sorted(self.divisible))}"
        if self.aliases:  # likewise
            key += f";alias={','.join('+'.join(g) for g in sorted(self.aliases))}"
        return key

    def divisibility(self, key: str) -> int:
        """The power of two (1 to 16) the argument `key` is known to be divisible by."""
        if key in self.divisible16:
            return 16
        return next((d for k, d in self.divisible if k == key), 1)


def partial_divisor(v: int) -> int | None:
    """2, 4 or 8: the largest power of two dividing v, where that is under 16 (None for 16 and up, odd or v <= 0)."""
    d = v & -v if v > 0 else 0
    return d if 2 <= d < 16 else None


@dataclass(frozen=True, order=True)
class GridTile:
    """A tile access indexed by `program_id(axis)` along a dim of size `dim` with `tile` elements per index."""
    axis: int
    dim: str
    tile: int

    def __str__(self) -> str:
        return f"{self.axis}:{self.dim}:{self.tile}"


@dataclass(frozen=True, order=True)
class FixedTile:
    """A tile access at the constant tile index `index` along a dim of size `dim` with `tile` elements per index."""
    index: int
    dim: str
    tile: int

    def __str__(self) -> str:
        return f"@{self.index}:{self.dim}:{self.tile}"


@dataclass(frozen=True, order=True)
class ManyPrograms:
    """The launch grid has more programs than the GPU has SMs: more than one wave. Proved only for a kernel with a
    `dot`, the one kind the lowering asks it of, so that no other kernel's binaries split on the grid's size."""

    def __str__(self) -> str:
        return "waves>1"


# Measured on the H200 (twenty-eighth session; benchmarks/RESULTS.md "Small dot tiles past two waves"): one dot of at
# most 64x64x32 multiply-adds per K step ran faster on the native path than on Tile IR on 61 of 62 launches of more
# than two waves (1.01-1.65x), and slower on most launches of up to two (Tile IR 1.02-1.75x faster on 16 of 18).
MANY_WAVES = 2


@dataclass(frozen=True, order=True)
class ManyWaves:
    """The grid has more than MANY_WAVES times as many programs as the GPU has SMs. For a kernel with a `dot`, with
    ManyPrograms (the native-path routing of small dot tiles); for one without, alone: a kernel that tileiras leaves
    at fewer than 12 warps per SM is compiled again for 12 only on such a launch (tle/compiler.py,
    `_to_twelve_warps`), so these kernels' binaries split on the grid's size at this one bound."""

    def __str__(self) -> str:
        return f"waves>{MANY_WAVES}"


# ShortK's bounds: K values per program, and waves of programs. On the H200 (Tile IR, 128x128x64 tiles,
# benchmarks/RESULTS.md "Persistent on Tile IR") the persistent loop won at K = 64 to 512 on grids of 3 waves and
# more (400 to 8192 programs: 1.03-1.45x), lost or tied on grids under 2 (196-256 programs: 0.95-1.00x), went
# either way at K = 1024 (0.93-1.10x) and lost from 2048 on (0.90-0.98x).
SHORT_K = 512
SHORT_K_WAVES = 3


@dataclass(frozen=True, order=True)
class ShortK:
    """With ManyPrograms: the grid has at least SHORT_K_WAVES times as many programs as the GPU has SMs, and the
    kernel's one dot sums at most SHORT_K values of K per program under the launch's sizes. The dot is outside any
    loop, or inside one loop that loop_facts describes (no other loop around it), and that loop's trip count times
    the dot's K tile is at most SHORT_K."""

    def __str__(self) -> str:
        return f"k<={SHORT_K}"


@dataclass(frozen=True, order=True)
class UnalignedRows:
    """The launch's tensor `tensor` has no row TMA can read: its base is not 16-byte aligned, or a stride other
    than 1 is not a multiple of 16 bytes (a slice one element in, an odd K). Proved only for a kernel with a `dot`,
    from the exact values of the launch (spec_of) or the sizes tlec was given (launch_spec), never assumed; the
    Tile IR router reads it (lowering/tileir_legality.py, tileir_slower). The rest of the spec already tells these
    tensors apart, so it splits no binaries."""
    tensor: str

    def __str__(self) -> str:
        return f"unaligned:{self.tensor}"


@dataclass(frozen=True, order=True)
class WideTensor:
    """The launch's tensor `tensor` spans more than 2**31 - 1 elements (sum of (size - 1) * stride over its axes)
    or has a stride past 2**31 - 1, so offsets into it do not fit i32: its strides are passed as i64 (abi) and the
    lowerings compute its offsets in i64 (`tle.wide` on its make_view). Proved from the launch's tensors (spec_of)
    or from the sizes tlec was given for a contiguous tensor (launch_spec)."""
    tensor: str

    def __str__(self) -> str:
        return f"wide:{self.tensor}"


@dataclass(frozen=True, order=True)
class WideDim:
    """The launch's dim `dim` is past 2**31 - 1 (a flat tensor of 3e9 elements): passed as i64, with element
    indices along it and its bounds checks in i64 (`tle.wide` views every tensor that has it, WideTensor). Where
    the kernel reads its value, that value is i64 (tle/compiler.py passes these dims to check_kernel)."""
    dim: str

    def __str__(self) -> str:
        return f"wide_dim:{self.dim}"


I32_MAX = 2 ** 31 - 1


def wide_facts(kernel: Kernel, layout) -> frozenset:
    """WideTensor for each tensor parameter whose `layout(param)`, (sizes, strides) or None where unknown, puts an
    element past offset I32_MAX or has a size or a stride past it (a size-1 axis's stride can, without the
    offset); WideDim for each dim past it."""
    def wide(sizes, strides):  # a stride past I32_MAX cannot be passed as i32 even where the tensor is empty
        return max(*strides, *sizes, 0) > I32_MAX or (
            0 not in sizes and sum((n - 1) * st for n, st in zip(sizes, strides)) > I32_MAX)
    dims = {d: n for p in kernel.params if isinstance(p, TensorParam) and (known := layout(p)) is not None
            for d, n in zip(p.type.dims, known[0]) if isinstance(d, str) and n > I32_MAX}
    return frozenset(WideTensor(p.name) for p in kernel.params
                     if isinstance(p, TensorParam) and (known := layout(p)) is not None and wide(*known)) | \
        frozenset(WideDim(d) for d in dims)


def unaligned_rows(kernel: Kernel, spec: Spec, known_strides) -> frozenset:
    """UnalignedRows for each tensor of a kernel with a dot whose base `spec` does not call 16-byte aligned, or
    whose stride among `known_strides` (keys whose value the caller knows) is neither 1 nor a multiple of 16
    bytes."""
    if next(dots(kernel.body), None) is None:
        return frozenset()
    out = set()
    for p in kernel.params:
        if not isinstance(p, TensorParam):
            continue
        strides = [f"{p.name}.stride{axis}" for axis in range(len(p.type.dims))]
        if p.name not in spec.divisible16 or any(
                k in known_strides and k not in spec.unit_strides and spec.divisibility(k) * BYTES[p.type.dtype] % 16
                for k in strides):
            out.add(UnalignedRows(p.name))
    return frozenset(out)


@dataclass(frozen=True, order=True)
class LoopRuns:
    """The `ordinal`-th for loop of the kernel (program order) runs at least once: its start, a constant, is below
    its stop, an expression of dims and constants (`range(cdiv(K, BK))`), under the launch's sizes."""
    ordinal: int

    def __str__(self) -> str:
        return f"loop{self.ordinal}"


@dataclass(frozen=True, order=True)
class LoopTile:
    """A tile access whose index along a dim of size `dim` (`tile` elements per index) is the variable of the
    `ordinal`-th for loop, a loop from a constant >= 0 to a stop of dims and constants (`for k in range(cdiv(K,
    BK))`). Every index the loop gives is below its stop, so the tile lies inside when stop * tile <= dim."""
    ordinal: int
    dim: str
    tile: int

    def __str__(self) -> str:
        return f"loop{self.ordinal}@{self.dim}:{self.tile}"


@dataclass(frozen=True, order=True)
class LoopSplit:
    """The `ordinal`-th for loop (step 1) indexes tiles with its variable (LoopTile candidates), and under the
    launch's sizes its first iterations have every such tile inside and its last do not: start < mid < stop, where
    mid = min(dim // tile) over those tiles. The lowering then runs it as two loops, [start, mid) with those tiles
    unchecked and [mid, stop) checked: a softmax over a vocabulary of 128256 in tiles of 4096 checks one tile of
    32, not all 32."""
    ordinal: int

    def __str__(self) -> str:
        return f"split{self.ordinal}"


def all_args(kernel: Kernel) -> list[AbiArg]:
    """Every argument a kernel could take, strides included, in ABI order."""
    out, seen = [], set()
    for p in kernel.params:
        if isinstance(p, TensorParam):
            out.append(AbiArg("ptr", p.name, p.type.dtype))
            for d in p.type.dims:
                if isinstance(d, str) and d not in seen:
                    seen.add(d)
                    out.append(AbiArg("dim", d, "i32"))
            out.extend(AbiArg("stride", p.name, "i32", axis) for axis in range(len(p.type.dims)))
        else:
            out.append(AbiArg("scalar", p.name, p.type.dtype))
    return out


def abi(kernel: Kernel, spec: Spec) -> list[AbiArg]:
    """The arguments actually passed under `spec`: unit strides dropped, a WideTensor's strides and a WideDim
    as i64."""
    def wide(a):
        return (a.kind == "stride" and WideTensor(a.name) in spec.inside) or (a.kind == "dim" and WideDim(a.name)
                                                                              in spec.inside)
    return [replace(a, dtype="i64") if wide(a) else a
            for a in all_args(kernel) if not (a.kind == "stride" and a.key in spec.unit_strides)]


def spec_of(kernel: Kernel, values: dict, grid: tuple | None = None, sms: int | None = None) -> Spec:
    """The specialisation real arguments prove. `values` maps AbiArg keys to the launch values: tensors for
    pointers (their data_ptr() is checked for 16-byte alignment), ints for dims, strides and scalars. With the
    launch `grid` (3 ints), also the grid facts it proves, and with the device's SM count `sms`, ManyPrograms; a
    binary built with them may only be launched with a grid that proves them too (the runtime plans per grid)."""
    d16, unit, part = set(), set(), set()
    for a in all_args(kernel):
        v = values[a.key]
        if a.kind == "ptr":
            if v.data_ptr() % 16 == 0:
                d16.add(a.key)
        elif a.kind == "stride" and v == 1:
            unit.add(a.key)
        elif isinstance(v, int) and not isinstance(v, bool) and a.dtype.startswith("i") and v % 16 == 0:
            d16.add(a.key)
        elif a.kind in ("dim", "stride") and (div := partial_divisor(v)):
            part.add((a.key, div))
    spec = Spec(frozenset(d16), frozenset(unit), launch_facts(kernel, grid, values, sms), frozenset(part))
    strides = {a.key for a in all_args(kernel) if a.kind == "stride"}

    def layout(p):  # the launch's sizes and strides of tensor p
        sizes = [d if isinstance(d, int) else values[d] for d in p.type.dims]
        return sizes, [values[f"{p.name}.stride{axis}"] for axis in range(len(sizes))]
    wide = wide_facts(kernel, layout)
    return replace(spec, inside=spec.inside | unaligned_rows(kernel, spec, strides) | wide,
                   aliases=aliases(kernel, {p.name: values.get(p.name) for p in kernel.params
                                            if isinstance(p, TensorParam)}))


def aliases(kernel: Kernel, tensors: dict) -> frozenset:
    """The groups of tensor parameters whose memory overlaps in this launch (`tensors`: name -> torch tensor, None
    for one not passed), where the kernel writes one of them: an in-place launch, k(x, x), or x and x[1:]. Each
    group is a sorted tuple of names. Tile IR orders memory accesses only through tokens, one chain per tensor the
    kernel writes (lowering/tle_to_tileir.py), so tensors that overlap must share a chain: a binary built for
    separate tensors may move a load of x across a store to y, and then reads what x held before it. The native
    path orders accesses through any two pointers already. Overlap is of the address ranges the tensors span
    (conservative for interleaved strides)."""
    written = {n.tensor.param.name for n in nodes(kernel.body)
               if isinstance(n, Op) and n.name in ("store", "scatter", "atomic")}
    if not written:
        return frozenset()
    spans = []
    for name, t in tensors.items():
        # not passed (None, or runtime/kernel.py's null pointer), empty, or without storage (meta tensors)
        if not hasattr(t, "numel") or t.numel() == 0 or t.device.type == "meta" or not t.data_ptr():
            continue
        spans.append((*byte_span(t), name))
    spans.sort()
    groups, end = [], -1
    for start, stop, name in spans:  # sorted by start: a span overlaps its group when it starts before the group ends
        if start < end:
            groups[-1].append(name)
        else:
            groups.append([name])
        end = max(end, stop) if start < end else stop
    return frozenset(tuple(sorted(g)) for g in groups if len(g) > 1 and written.intersection(g))


def byte_span(t) -> tuple[int, int]:
    """(first byte, one past the last byte) of the memory a non-empty torch tensor spans: what aliases() and the
    launch key (runtime/kernel.py _overlapping) compare."""
    start = t.data_ptr()
    return start, start + (1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))) * t.element_size()


def launch_facts(kernel: Kernel, grid: tuple | None, sizes: dict, sms: int | None = None) -> frozenset:
    """The launch facts of a planned launch, given the dims' sizes (a dim missing from `sizes` proves nothing):
    the FixedTiles its sizes keep inside ((index + 1) * tile <= size), the loops they make run (LoopRuns), the
    loops whose every tile they keep inside (LoopTile: stop * tile <= size) or whose first tiles only (LoopSplit),
    and, where the grid is known (3 ints), the GridTiles it keeps inside (grid[axis] * tile <= size, with at least
    one program). A grid of None (tlec without --grid) gives all but GridTiles: they rest on the sizes alone, and
    every plan is made for exact sizes. ManyPrograms, ManyWaves and ShortK need the grid and the device's SM
    count `sms` both."""
    described = loop_facts(kernel)
    loops = {fact.ordinal: _size_expr_value(stop, sizes) for fact, _, stop in described.values()}

    def holds(f) -> bool:
        if f.dim not in sizes:
            return False
        if isinstance(f, GridTile):
            return grid is not None and 1 <= grid[f.axis] and grid[f.axis] * f.tile <= sizes[f.dim]
        if isinstance(f, LoopTile):
            return loops.get(f.ordinal) is not None and loops[f.ordinal] * f.tile <= sizes[f.dim]
        return (f.index + 1) * f.tile <= sizes[f.dim]

    candidates = grid_tiles(kernel, described)
    facts = {f for f in candidates if holds(f)}
    sms = sms or 0
    programs = math.prod(grid) if grid is not None and sms else 0  # 0: no grid or no SM count proves nothing
    if programs > MANY_WAVES * sms:
        facts.add(ManyWaves())  # any kernel's (with a dot, beside ManyPrograms)
    if programs > sms and next(dots(kernel.body), None) is not None:
        facts.add(ManyPrograms())
        if programs >= SHORT_K_WAVES * sms and (k := k_per_program(kernel, described, loops)) is not None \
                and k <= SHORT_K:
            facts.add(ShortK())
    splittable = step1_loops(kernel, described) | {
        ordinal for ordinal, reads in dot_loop_reads(kernel, described).items()
        if any(axis == len(t.type.dims) - 1 and isinstance(dim := t.type.dims[axis], str) and dim in sizes
               and sizes[dim] * BYTES[t.type.dtype] % 16 for t, axis in reads)}
    for fact, start, stop in described.values():
        if (end := loops[fact.ordinal]) is not None and start < end:
            facts.add(fact)
            tiles = [t for t in candidates if isinstance(t, LoopTile) and t.ordinal == fact.ordinal]
            if tiles and fact.ordinal in splittable and all(t.dim in sizes for t in tiles) and \
                    start < min(sizes[t.dim] // t.tile for t in tiles) < end:
                facts.add(LoopSplit(fact.ordinal))
    return frozenset(facts)


def k_per_program(kernel: Kernel, described: dict, stops: dict) -> int | None:
    """How many values of K the kernel's one dot sums in a program: its K tile times the trip count of the one loop
    around it (1 without a loop), that loop's stop taken from `stops` (loop ordinal -> value under the launch's
    sizes, as launch_facts works them out). None where the kernel has no dot or several, where loops are nested
    around the dot, or where the loop's trips are not known from the sizes."""
    found = list(dots(kernel.body))
    if len(found) != 1:
        return None
    dot = found[0]
    around = [n for n in nodes(kernel.body) if isinstance(n, For) and any(d is dot for d in dots(n.body))]
    trips = 1
    if len(around) > 1:
        return None
    if around:
        loop = around[0]
        if id(loop) not in described or stops.get(described[id(loop)][0].ordinal) is None:
            return None
        fact, start, _ = described[id(loop)]
        trips = max(0, -(-(stops[fact.ordinal] - start) // loop.step.value))
    return trips * dot.args[0].type.shape[-1]


def step1_loops(kernel: Kernel, described: dict | None = None) -> frozenset:
    """The ordinals of the loops a LoopSplit may split whatever their sizes: those loop_facts describes whose step
    is 1, innermost (a split doubles the body) and without a dot. Measured on the H200 (benchmarks/RESULTS.md,
    eleventh session): splitting streams of tiles (a cross-entropy or softmax over 128256 logits in tiles of 4096)
    made them 2-3% faster on both paths; splitting a matmul's K loop (K = 4000) did not pay, since the tensor cores,
    not the one ragged tile's checks, set its pace, and the second pipelined loop cost registers (196 -> 230). A
    loop with a dot is split only where its K is not a multiple of 16 bytes (dot_loop_reads)."""
    described = loop_facts(kernel) if described is None else described  # loop_facts(kernel), if already at hand
    return frozenset(described[id(n)][0].ordinal for n in nodes(kernel.body)
                     if _innermost_step1(n, described) and next(dots(n.body), None) is None)


def _innermost_step1(n, described: dict) -> bool:
    """Is n a for loop that loop_facts describes, of step 1, with no loop inside (a split doubles the body)?"""
    return isinstance(n, For) and id(n) in described and n.step.value == 1 and \
        not any(isinstance(m, For) for m in nodes(n.body))


def dot_loop_reads(kernel: Kernel, described: dict | None = None) -> dict:
    """Per loop that a LoopSplit may split although it holds a dot (its ordinal): the (tensor parameter, axis) of
    each load its variable indexes (a LoopTile). Such a loop is innermost, of step 1, and holds one dot (a matmul's K
    loop). launch_facts splits it only where the split dim, along the last axis of a tensor it reads, is not a
    multiple of 16 bytes of that tensor's elements: there the one ragged tile's mask, element by element, keeps every
    tile's loads from being vectorised (an odd K). Each GPU path then takes the split or not
    (tle/compiler.py, _spec_for): measured on the H200 (benchmarks/RESULTS.md "Matmuls on rows not 16-byte
    aligned"), the native path ran f16 and bf16 matmuls at K = 4097, 4099 and 4100 in rows padded to 4104 1.07-3.1x
    faster split (9 of 9; 4096x4096x4099 at 128x128x64: 318.6 us against 988.9), Tile IR ran K = 4099 and 8195 on
    rows of that length 2.3-3.7x faster split (6 of 6; 499.2 against 1766.2). Where K is a multiple of 16 bytes
    (K = 4000) the split did not pay (step1_loops), so it is not made."""
    described = loop_facts(kernel) if described is None else described
    facts = access_facts(kernel, described)
    out = {}
    for n in nodes(kernel.body):
        if not _innermost_step1(n, described) or len(list(dots(n.body))) != 1:
            continue
        ordinal = described[id(n)][0].ordinal
        out[ordinal] = [(m.tensor, axis) for m in nodes(n.body) if isinstance(m, Op) and m.name == "load"
                        for axis, f in facts.get(id(m), ()) if isinstance(f, LoopTile) and f.ordinal == ordinal]
    return out


def grid_tiles(kernel: Kernel, described: dict | None = None) -> frozenset:
    """Every GridTile, FixedTile and LoopTile of the kernel (access_facts, over all its loads and stores)."""
    return frozenset(f for axes in access_facts(kernel, described).values() for _, f in axes)


def access_facts(kernel: Kernel, described: dict | None = None) -> dict:
    """Per load or store of the kernel (keyed by id() of its typed Op), the (axis, fact) pairs whose fact would let
    that axis go unchecked: a tile index that is `program_id(a)` itself (directly or through a `let`) gives a
    GridTile, a constant >= 0 a FixedTile, the variable of a loop that loop_facts describes a LoopTile, along a
    symbolic dim. The runtime proves facts from this (grid_tiles); lowering/ast_to_tle.py marks an access's axes
    (tle.inside) where the Spec holds their fact."""
    found, pids = {}, {}
    loops = loop_facts(kernel) if described is None else described  # loop_facts(kernel), if already at hand
    loop_vars = {}  # a loop variable -> its loop's ordinal, where a LoopTile may rest on it
    for n in nodes(kernel.body):
        if isinstance(n, For) and id(n) in loops and loops[id(n)][1] >= 0:
            loop_vars[n.var] = loops[id(n)][0].ordinal

    def axis_of(x):
        if isinstance(x, Op) and x.name == "program_id":
            return x.attrs["axis"]
        return pids.get(x.var) if isinstance(x, Read) else None

    for n in nodes(kernel.body):
        if isinstance(n, Op) and n.name in ("load", "store"):
            at = n.args if n.name == "load" else n.args[1:]
            tile = n.attrs["tile"] if n.name == "load" else n.args[0].type.shape
            axes = []
            for i, (idx, dim) in enumerate(zip(at, n.tensor.type.dims)):
                if not isinstance(dim, str):
                    continue
                axis = axis_of(idx)
                if axis is not None:
                    axes.append((i, GridTile(axis, dim, tile[i])))
                elif isinstance(idx, Const) and type(idx.value) is int and idx.value >= 0:
                    axes.append((i, FixedTile(idx.value, dim, tile[i])))
                elif isinstance(idx, Read) and idx.var in loop_vars:
                    axes.append((i, LoopTile(loop_vars[idx.var], dim, tile[i])))
            if axes:
                found[id(n)] = axes
        elif isinstance(n, Bind) and not n.var.mutable and axis_of(n.value) is not None:
            pids[n.var] = axis_of(n.value)  # `let row = program_id(0)`, or an inlined fn's parameter bound to it
        elif isinstance(n, Bind) and not n.var.mutable and isinstance(n.value, Read) and n.value.var in loop_vars:
            loop_vars[n.var] = loop_vars[n.value.var]  # likewise for a loop's variable
    return found


def loop_facts(kernel: Kernel) -> dict:
    """Per for loop of the kernel (keyed by id() of its typed For) whose start is a constant, whose step is a
    positive constant and whose stop is an expression of dims and constants only: (LoopRuns, start, stop). The
    runtime proves the fact from the sizes (launch_facts); lowering/ast_to_tle.py marks the loop (tle.nonempty)."""
    found, ordinal = {}, 0
    for n in nodes(kernel.body):
        if not isinstance(n, For):
            continue
        if isinstance(n.start, Const) and isinstance(n.step, Const) and type(n.start.value) is int \
                and type(n.step.value) is int and n.step.value > 0 and _is_size_expr(n.stop):
            found[id(n)] = (LoopRuns(ordinal), n.start.value, n.stop)
        ordinal += 1
    return found


_SIZE_OPS = ("add", "sub", "mul", "div", "min", "max")  # cdiv(a, b) is (a + b - 1) / b by now (tle/check.py)


def _is_size_expr(e) -> bool:
    """Is e an i32 expression of dims and integer constants only (what _size_expr_value can evaluate)?"""
    if isinstance(e, Dim):
        return True
    if isinstance(e, Const):
        return type(e.value) is int
    return isinstance(e, Op) and e.name in _SIZE_OPS and getattr(e.type, "dtype", None) == "i32" and \
        all(_is_size_expr(a) for a in e.args)


def _size_expr_value(e, sizes: dict) -> int | None:
    """The value an _is_size_expr expression has on the GPU (i32 arithmetic), given the dims' sizes; None where a
    dim is not given, a step leaves i32 or one divides by zero (then no fact may rest on it)."""
    if isinstance(e, Dim):
        n = sizes.get(e.name)
        return n if n is None or n <= I32_MAX else None  # past it the dim is an i64 value (WideDim), not this i32
    if isinstance(e, Const):
        return e.value
    args = [_size_expr_value(a, sizes) for a in e.args]
    if None in args:
        return None
    a, b = args
    if e.name == "div":
        if b == 0:
            return None
        value = _trunc_div(a, b)
    else:
        value = {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b)}[e.name]
    return value if _I32_MIN <= value <= I32_MAX else None


_I32_MIN = -2 ** 31


def _trunc_div(a: int, b: int) -> int:
    """arith.divsi: the quotient rounded towards zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def default_spec(kernel: Kernel) -> Spec:
    """What tlec assumes without real tensors: 16-byte aligned base pointers and contiguous rows (last stride 1).
    Nothing is assumed about sizes or other strides."""
    d16, unit = set(), set()
    for p in kernel.params:
        if isinstance(p, TensorParam):
            d16.add(p.name)
            unit.add(f"{p.name}.stride{len(p.type.dims) - 1}")
    return Spec(frozenset(d16), frozenset(unit))


def launch_spec(kernel: Kernel, sizes: dict, grid: tuple | None = None, sms: int | None = None) -> Spec:
    """What tlec assumes for a launch its command line describes (--sizes, --grid, --sms) on contiguous tensors:
    default_spec's pointers and unit strides, each given dim's divisibility (by 16, else by 8, 4 or 2), each
    stride's where the dims after it are all given (a contiguous tensor's stride is their product), and the launch
    facts over the given dims (launch_facts: with `grid`, 3 ints, the grid's too, and with the SM count `sms` those
    of the grid's size). Sizes of dims the kernel does not have are ignored (tlec checks them against every kernel
    it compiles)."""
    d = default_spec(kernel)
    given = {name: v for name, v in sizes.items() if name in kernel.dims}
    for p in kernel.params:
        if isinstance(p, TensorParam):
            dims = [x if isinstance(x, int) else sizes.get(x) for x in p.type.dims]
            for axis in range(len(dims) - 1):
                after = dims[axis + 1:]
                if None not in after:
                    given[f"{p.name}.stride{axis}"] = math.prod(after)
    d16 = set(d.divisible16) | {k for k, v in given.items() if v % 16 == 0}
    part = {(k, div) for k, v in given.items() if (div := partial_divisor(v))}
    spec = Spec(frozenset(d16), d.unit_strides, launch_facts(kernel, grid, sizes, sms), frozenset(part))

    def contiguous(p):  # the sizes and strides of tensor p, contiguous, where every dim is given
        dims = [x if isinstance(x, int) else sizes.get(x) for x in p.type.dims]
        return None if None in dims else (dims, [math.prod(dims[axis + 1:]) for axis in range(len(dims))])
    wide = wide_facts(kernel, contiguous)
    return replace(spec, inside=spec.inside | unaligned_rows(kernel, spec, given) | wide)


def generic_spec(kernel: Kernel) -> Spec:
    """Assume nothing (tlec --generic)."""
    return Spec()
