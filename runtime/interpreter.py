"""The reference interpreter: runs a tle-dialect kernel on the CPU, whole tiles at a time, with torch.

    interpret(module, grid, args)   # module: what lowering/ast_to_tle.py built; args in ABI order (tle/abi.py)

It is the executable definition of tle's semantics (docs/numerics.md); the GPU backends are tested against it.

How it runs:
- The kernel is compiled once per module into Python closures, one per op (nested lists for scf regions). Values
  live in a flat list `env`, indexed by slot numbers that MLIR values get at compile time.
- Every runtime value has a leading *program* axis of size 1 or B: a tile<f32>[64, 32] is a torch tensor
  [B|1, 64, 32], a scalar is [B|1]. When no loop bound and no if condition depends on program_id, B programs run
  in lockstep in one pass (a size-1 value is the same for all of them and broadcasts). Otherwise programs run
  one at a time (B = 1), in order of linear id x + gx * (y + gy * z).
- Ops at the top of the kernel that depend only on the arguments (make_view, arithmetic on dims, constants) run
  once per launch.
- Loads and stores read and write the caller's storage through strided windows where the tiles of a chunk's
  programs step by a constant offset, and through index tensors otherwise.
- While it runs small tiles it sets torch to one thread (restored afterwards): waking threads for ops on a few
  thousand elements costs more than the ops.

Checks the GPU cannot make raise TleError at the op's .tle location: out-of-bounds gather/scatter/atomic
indices, scatters and stores whose result depends on the order of writes (programs whose last writes to an
element differ: _StoreClaims, _check_scatters_across_programs), loads whose result depends on it (a program reads
an element another program changes: _ReadClaims), reads of uninitialised vars, integer division by
zero, out-of-range shift amounts and float->int casts, NaN in atomic max/min, views that reach outside their
tensor's storage, a scan's or reduction's `identity=` that its combine fn does not leave elements unchanged
with (Tile IR pads with it), and a combine fn that is not associative (the GPU groups elements as it likes).
One more is a warning, the value being defined: a result that takes in the lanes a load padded past its
tensor's edge (runtime/padded_lanes.py).

Only the generic MLIR Python API is used (op.name, attributes, operands, results, regions, types as text), so
this runs with both binding providers (torch_mlir and jaxlib.mlir).
"""
from __future__ import annotations

import math
import numbers
import os
import re
from typing import Callable

import numpy as np
import torch

from tle import debug
from tle.diagnostics import Note, TleError, call_at, span_of_location
from tle.dialects.mlir import ir, nested_ops, operand_groups
from tle.dialects.tle import combine_func, print_label, relaxed_atomics
from tle.types import F8, MLIR_F8, overflows

from .padded_lanes import Origin, Padded, PaddedLanes

__all__ = ["interpret", "compile_kernel", "CompiledKernel", "Poison", "View"]

TORCH_DTYPES = {"i1": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
                "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
                "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}
INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
HALF = ("f16", "bf16")
# The 8-bit floats (MLIR names) and their largest finite values: conversions to them saturate (docs/numerics.md).
F8_LARGEST = {mlir: F8[name][2] for mlir, name in MLIR_F8.items()}
FLOATS = ("f16", "bf16", "f32", "f64", *F8_LARGEST)

# env slots that every kernel has: this chunk's program ids along x, y, z, the grid size, and the launch state.
PID = (0, 1, 2)
NUM_PROGRAMS = (3, 4, 5)
LAUNCH = 6
_FIRST_SLOT = 7

# Batched execution keeps B * (largest tile) under this many elements, so the int64 index tensors of a chunk's
# loads stay around 32 MiB.
_BATCH_ELEMENTS = 1 << 22
# Below this many elements per step (largest tile times programs per chunk) torch runs single-threaded.
_THREADED_ELEMENTS = 1 << 16

Env = list
Step = Callable[[Env], None]


# ---- values that are not tensors ----------------------------------------------------------------------------------
class Poison:
    """The value of a var declared without a value (tle.undef). It may flow through scf.for iter_args and scf.if /
    scf.for results; any op that computes with it or stores it reports a read of an uninitialised var."""
    __slots__ = ("name", "span")

    def __init__(self, name: str, span):
        self.name, self.span = name, span

    def __repr__(self) -> str:
        return f"Poison({self.name!r})"


class View:
    """A strided view of a kernel argument's storage (tle.make_view). Elements are addressed by flat offsets into
    `storage`, a 1-D tensor over the caller's whole storage, so every write lands in the caller's tensor."""
    __slots__ = ("name", "dtype", "storage", "base", "sizes", "strides", "address")

    def __init__(self, tensor, name: str, elem: str, sizes: list[int], strides: list[int], span):
        if not isinstance(tensor, torch.Tensor):
            raise TleError(span, f"tensor '{name}' must be passed as a torch tensor, got {type(tensor).__name__}")
        if tensor.device.type != "cpu":
            raise TleError(span, f"the interpreter runs on the CPU; tensor '{name}' is on {tensor.device}")
        if tensor.dtype != TORCH_DTYPES[elem]:
            raise TleError(span, f"tensor '{name}' has dtype {tensor.dtype}, the kernel expects {elem}")
        if any(s < 0 for s in sizes):
            raise TleError(span, f"tensor '{name}' gets a negative size: {sizes}")
        n = tensor.untyped_storage().nbytes() // tensor.element_size()
        self.storage = torch.as_strided(tensor.detach(), (n,), (1,), 0)  # detached: writes are not autograd ops
        self.base = tensor.storage_offset()
        if all(s > 0 for s in sizes):
            low = self.base + sum(min(0, (s - 1) * st) for s, st in zip(sizes, strides))
            high = self.base + sum(max(0, (s - 1) * st) for s, st in zip(sizes, strides))
            if low < 0 or high >= n:
                raise TleError(span, f"tensor '{name}' with sizes {sizes} and strides {strides} (storage offset "
                                     f"{self.base}) reaches element {low if low < 0 else high} of a storage of {n} "
                                     f"elements", ["the sizes or strides passed do not describe this tensor"])
        self.name, self.dtype = name, tensor.dtype
        self.sizes, self.strides = list(sizes), list(strides)
        self.address = self.storage.data_ptr()  # storage identity, for scatter conflict checks

    def window(self, starts: list[int], sizes: list[int]) -> "View":
        """tle.slice: the window of this view from element `starts` with sizes `sizes`, in the same storage and
        strides. ValueError for a window that does not lie inside the view (the GPU paths would read and write
        past it)."""
        for axis, (first, size, whole) in enumerate(zip(starts, sizes, self.sizes)):
            if first < 0 or size < 0 or first + size > whole:
                raise ValueError(f"slice of '{self.name}' from {starts} with shape {sizes} does not lie inside its "
                                 f"shape {self.sizes} (axis {axis})")
        out = object.__new__(View)
        out.name, out.dtype, out.storage, out.address = self.name, self.dtype, self.storage, self.address
        out.base = self.base + sum(first * st for first, st in zip(starts, self.strides))
        out.sizes, out.strides = list(sizes), list(self.strides)
        return out


class _Launch:
    """Per-launch state: the grid, every scatter write (checked for cross-program conflicts at the end), and which
    program last stored each element of each tensor (_StoreClaims)."""

    def __init__(self, grid: tuple[int, int, int]):
        self.grid = grid
        self.scatters: list[tuple] = []
        self.stores = _StoreClaims(self)
        self.reads = _ReadClaims(self, frozenset())  # run() names the storages to track
        # Linear ids [first, end) of the programs running now (one chunk in lockstep, or one program): programs
        # below `first` have finished.
        self.first, self.end = 0, 1

    def program(self, linear: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return linear % gx, linear // gx % gy, linear // (gx * gy)


class _StoreClaims:
    """Races between stores: two programs whose last stores to one element write different values. On the GPU the
    programs run in no set order, so which value stays depends on which runs last (a partial result stored at the
    same `at=` by every program is the usual way to get one).

    Per tensor storage it keeps the linear id of the program that last stored each element (-1: none yet). A store
    over an element another program stored: with the same bits nothing is wrong; with other bits, if that program is
    still running (the same lockstep chunk) the two race now; if it has finished, its value was its last, and the
    race stands unless the overwriting program puts the same bits back before it finishes (`pending`, settled at
    the end of each chunk). Stores through the strided windows are checked through the same windows of the map.
    A tensor's first store of a launch through a window only notes the window (`deferred`): most kernels store
    each element once, and the map is built when a second store comes (vector_add over 4M elements: 56 -> 36 ms
    on the interpreter, 33 without any check)."""

    NOTE = ("programs run in no set order on the GPU: give each program its own tile (an at= that depends on "
            "program_id), or add the programs' values with atomic_add")

    def __init__(self, launch: _Launch):
        self.launch = launch
        self.writers: dict[tuple, torch.Tensor] = {}
        self.deferred: dict[tuple, tuple] = {}  # a storage's first window store: (shape, strides, offset, owner)
        self.pending: list[tuple] = []

    @staticmethod
    def _key(view: View) -> tuple:
        return view.storage.data_ptr(), view.storage.element_size(), view.storage.numel()

    def map_of(self, view: View) -> torch.Tensor:
        key = self._key(view)
        if key not in self.writers:
            owners = self.writers[key] = torch.full((view.storage.numel(),), -1, dtype=torch.int32)
            if key in self.deferred:
                shape, strides, offset, mine = self.deferred.pop(key)
                torch.as_strided(owners, shape, strides, offset).copy_(torch.as_tensor(mine).expand(shape))
        return self.writers[key]

    def window(self, span, view: View, offset: int, shape, strides, new: torch.Tensor, programs=None) -> None:
        """Store through one strided window of the storage at `offset`. With `programs` (linear ids [n]) the
        window has a leading program axis (shape [n, *tile], its stride the step between their tiles, which do
        not overlap) and `new` is [n or 1, *tile]. Without, every running program stores this one window and
        `new` is [1 or chunk, *tile]: one row each, which must agree."""
        data = torch.as_strided(view.storage, shape, strides, offset)
        if programs is None:
            new = self._agreed(span, view, new, lambda: offset + _window_offsets(shape, strides))[0]
            mine = self.launch.end - 1
        else:
            mine = programs.reshape([-1] + [1] * (len(shape) - 1))
        reads = self.launch.reads
        if reads.tracks(view):
            lo, hi = reads.every_running() if programs is None else \
                (int(programs),) * 2 if programs.numel() == 1 else (mine.to(torch.int32),) * 2
            reads.stored(span, view, _Elements(offset, shape, strides), data, new.expand(shape), lo, hi)
        key = self._key(view)
        if key not in self.writers and key not in self.deferred:  # nothing stored into this tensor yet
            data.copy_(new.expand(data.shape))
            self.deferred[key] = (tuple(shape), tuple(strides), offset, mine)
            return
        owner = torch.as_strided(self.map_of(view), shape, strides, offset)
        self._check(span, view, lambda: data, owner, new, mine, programs is None,
                    lambda mask: offset + _window_offsets(shape, strides)[mask])
        data.copy_(new.expand(data.shape))
        owner.copy_(torch.as_tensor(mine).expand(owner.shape))

    def lanes(self, span, view: View, flat: torch.Tensor, new: torch.Tensor, valid, disjoint: bool) -> None:
        """Store through storage offsets `flat` ([n or 1, *tile], n programs' tiles; 1: every running program's)
        where `valid` (None: everywhere). `disjoint`: the n tiles are known not to share an element (distinct tile
        indices in a view whose strides do not overlap)."""
        key = self._key(view)
        fresh = key not in self.writers and key not in self.deferred  # nothing stored into this tensor yet
        storage, owners = view.storage, self.map_of(view)
        shape = _broadcast(flat.shape, new.shape)
        uniform = flat.shape[0] == 1
        if uniform:
            new = self._agreed(span, view, new, lambda: flat[0], None if valid is None else valid[0])
            shape = (1, *shape[1:])
            program = torch.full(shape, self.launch.end - 1, dtype=torch.int32)
        else:
            program = (self.launch.first + torch.arange(shape[0], dtype=torch.int32)).reshape(
                [-1] + [1] * (len(shape) - 1)).expand(shape)
        flat, new = flat.expand(shape), new.expand(shape)
        if valid is not None:
            valid = valid.expand(shape)
            flat, new, program = flat[valid], new[valid], program[valid]
        flat, new, program = flat.reshape(-1), new.reshape(-1), program.reshape(-1)
        reads = self.launch.reads
        if reads.tracks(view):
            lo, hi = reads.every_running() if uniform else (program,) * 2
            reads.stored(span, view, _Elements(flat=flat), storage[flat], new, lo, hi)
        if not fresh:
            self._check(span, view, lambda: storage[flat], owners[flat], new, program, uniform,
                        lambda mask: flat[mask])
        storage[flat] = new
        owners[flat] = program
        if not uniform and not disjoint:  # lanes of two programs on one element: the owner that landed is not theirs
            other = owners[flat]
            clash = other != program
            if bool(clash.any()):
                differ = clash & (_bits(storage[flat]) != _bits(new))
                if bool(differ.any()):
                    k = int(differ.nonzero()[0])
                    self._race(span, view, int(other[k]), int(program[k]), storage[flat[k]], new[k], int(flat[k]))

    def settle(self) -> None:
        """At the end of a chunk: a finished program's value overwritten with other bits is a race unless the
        overwriting program put the same bits back."""
        for span, view, flat, old, earlier in self.pending:
            now = view.storage[flat]
            differ = _bits(now) != _bits(old)
            if bool(differ.any()):
                k = int(differ.nonzero()[0])
                later = int(self.map_of(view)[flat[k]])
                self._race(span, view, int(earlier[k]), later, old[k], now[k], int(flat[k]))
        self.pending.clear()

    def _agreed(self, span, view: View, new: torch.Tensor, offsets, valid=None) -> torch.Tensor:
        """The rows ([chunk, *tile]) of a tile every running program stores at the same place (offsets(): their
        storage offsets, a tile; where `valid`): they must hold the same bits. The row every program stores."""
        if new.shape[0] > 1:
            bits = _bits(new)
            differ = bits != bits[-1:]
            if valid is not None:
                differ = differ & valid
            if bool(differ.any()):
                p, *e = differ.nonzero()[0].tolist()
                last = new.shape[0] - 1
                self._race(span, view, self.launch.first + p, self.launch.first + last, new[(p, *e)],
                           new[(last, *e)], int(offsets().expand(new.shape[1:])[tuple(e)]))
        return new[-1:]

    def _check(self, span, view: View, old_of, owner, new, mine, uniform: bool, offsets_of) -> None:
        """Elements another program stored (for a store of every running program: one that has finished) whose
        bits this store changes: a race now if that program is running, else pending until this chunk ends.
        old_of(): the values there now (read only where another program stored)."""
        if owner.numel() == 0 or int(owner.max()) < 0:  # nothing stored there yet in this launch: the common case
            return
        foreign = (owner >= 0) & ((owner < self.launch.first) if uniform else (owner != mine))
        if not bool(foreign.any()):
            return
        old = old_of()
        new = new.expand(old.shape)
        changed = foreign & (_bits(old) != _bits(new))
        if not bool(changed.any()):
            return
        running = changed & (owner >= self.launch.first)
        if bool(running.any()):
            k = tuple(running.nonzero()[0].tolist())
            mine_k = int(torch.as_tensor(mine).expand(old.shape)[k])
            self._race(span, view, int(owner[k]), mine_k, old[k], new[k], int(offsets_of(running)[0]))
        self.pending.append((span, view, offsets_of(changed).reshape(-1), old[changed].clone(), owner[changed]))

    def _race(self, span, view: View, a: int, b: int, x, y, offset: int):
        first, second = sorted((a, b))
        va, vb = (x, y) if a == first else (y, x)
        raise TleError(span, f"{_writer(span)} to '{view.name}': programs {self.launch.program(first)} and "
                             f"{self.launch.program(second)} write {_scalar_text(va)} and {_scalar_text(vb)} to "
                             f"element {_element_of(view, offset)}; the result depends on which runs last",
                       [self.NOTE])


class _Elements:
    """The elements of a storage that one access touches: a strided window that does not overlap itself
    (`offset`, `shape`, `strides`), or lanes at flat storage offsets (`flat`, [k]). A window reads and updates
    the per-element maps of _ReadClaims in place, as cheaply as the access itself."""
    __slots__ = ("offset", "shape", "strides", "flat")

    def __init__(self, offset=0, shape=(), strides=(), flat=None):
        self.offset, self.shape, self.strides, self.flat = offset, tuple(shape), tuple(strides), flat

    def of(self, m: torch.Tensor) -> torch.Tensor:
        """m's values at these elements (a view of m for a window)."""
        return m[self.flat] if self.flat is not None else torch.as_strided(m, self.shape, self.strides, self.offset)

    def put(self, m: torch.Tensor, value, where=None) -> None:
        """m = value at these elements (where `where`, if given)."""
        if self.flat is None:
            w = self.of(m)
            w.copy_(torch.as_tensor(value, dtype=m.dtype).expand(w.shape) if where is None else
                    torch.where(where, torch.as_tensor(value, dtype=m.dtype), w))
        elif where is None:
            m[self.flat] = torch.as_tensor(value, dtype=m.dtype).expand(self.flat.shape)
        else:
            m[self.flat[where]] = torch.as_tensor(value, dtype=m.dtype).expand(self.flat.shape)[where]

    def fold(self, m: torch.Tensor, value: torch.Tensor, how: str) -> None:
        """m = min (how "amin") or max ("amax") of m and value at these elements."""
        if self.flat is None:  # in place through the window, one pass
            self.of(m).clamp_(max=value) if how == "amin" else self.of(m).clamp_(min=value)
        else:
            m.scatter_reduce_(0, self.flat, torch.as_tensor(value, dtype=m.dtype).expand(self.flat.shape).contiguous(),
                              how)

    def offset_of(self, bad: torch.Tensor) -> int:
        """The storage offset of the first element where `bad` (in this access's shape)."""
        if self.flat is not None:
            return int(self.flat[bad][0])
        return self.offset + int(_window_offsets(self.shape, self.strides)[bad][0])


# Released int32 maps of _ReadClaims by length, for the next launch (up to _MAP_POOL_LIMIT bytes in all).
_MAP_POOL: dict[int, list[torch.Tensor]] = {}
_MAP_POOL_BYTES, _MAP_POOL_LIMIT = 0, 256 << 20


def _pooled_map(n: int) -> torch.Tensor:
    """An int32 tensor of n elements, from the pool if it has one (its values are stale: fill it)."""
    global _MAP_POOL_BYTES
    pooled = _MAP_POOL.get(n)
    if not pooled:
        return torch.empty(n, dtype=torch.int32)
    _MAP_POOL_BYTES -= 4 * n
    return pooled.pop()


def _release_map(t: torch.Tensor) -> None:
    global _MAP_POOL_BYTES
    if _MAP_POOL_BYTES + t.nbytes <= _MAP_POOL_LIMIT:
        _MAP_POOL.setdefault(t.numel(), []).append(t)
        _MAP_POOL_BYTES += t.nbytes


class _ReadClaims:
    """Races between a read and a store: a program reads an element that another program of the launch changes
    with a plain store or scatter. On the GPU the programs run in no set order, so the read may see the value
    from before the store or from after it (a device-side step counter that every program reads and bumps, a
    read-modify-write through gather and scatter of an element two programs share, a stencil updated in place).

    Only kernels whose programs cannot order one another are checked: where an atomic's result is read (the last
    program of a split reduction reading the others' partials), programs may wait for each other, and the
    interpreter runs such kernels one program at a time, in order. Only storages the kernel both reads and writes
    are tracked (`tracked`: their data pointers). Per element it keeps the lowest and highest linear id of the
    programs that read it and of those that stored to it, and the program that last changed its bits, with the ops
    that did. A store that changes an element some other program has read is a race; so is a read of an element
    that a program outside the storing ones changed. Ranges, not sets, keep that to a few int32 maps: a program
    between two storing ones counts as one of them (a race missed, never one invented). Accesses through strided
    windows update the maps through the same windows (an in-place AdamW step over 4M elements: 62 ms unchecked)."""

    NOTE = ("programs run in no set order on the GPU, and a load sees another program's store only if it happens "
            "to run later: give each program the elements it reads and writes, or read the old values from a "
            "copy, or add with atomic_add")
    NONE, FIRST = -1, torch.iinfo(torch.int32).max

    def __init__(self, launch: _Launch, tracked: frozenset):
        self.launch = launch
        self.tracked = tracked
        self.maps: dict[int, dict[str, torch.Tensor]] = {}
        self.ops: list = []  # the spans of the reading and storing ops, by their index in the op maps
        self.op_index: dict[int, int] = {}

    def tracks(self, view: View) -> bool:
        return view is not None and view.address in self.tracked

    def _maps(self, view: View) -> dict[str, torch.Tensor]:
        m = self.maps.get(view.address)
        if m is None:
            n = view.storage.numel()

            def full(v):
                return _pooled_map(n).fill_(v)
            m = self.maps[view.address] = {"read_lo": full(self.FIRST), "read_hi": full(self.NONE),
                                           "store_lo": full(self.FIRST), "store_hi": full(self.NONE),
                                           "changer": full(self.NONE),
                                           "read_lo_op": None, "read_hi_op": None, "change_op": None,
                                           "changed": False}
        return m

    def release(self) -> None:
        """At the end of the launch: keep the maps' memory for the next launch (new memory costs a page fault per
        4 KB, which made the maps' allocation most of the check's cost on an in-place AdamW step)."""
        for m in self.maps.values():
            for key in ("read_lo", "read_hi", "store_lo", "store_hi", "changer"):
                _release_map(m[key])
        self.maps.clear()

    def _note_op(self, m: dict, key: str, at: _Elements, span, where=None) -> None:
        """Record which op changed these elements (key "change_op"), or read them in their lowest or highest
        reading program ("read_lo_op", "read_hi_op"): one index while only one op has, a map once a second one
        does. `where` (a mask over the access, or a function giving it, called only once there is a map) limits
        it to some elements."""
        k = self._op(span)
        if m[key] is None:
            m[key] = k
        elif isinstance(m[key], int) and m[key] != k:
            m[key] = torch.full_like(m["read_lo"], m[key], dtype=torch.int16)
        if isinstance(m[key], torch.Tensor):
            at.put(m[key], k, where() if callable(where) else where)

    def _op_at(self, m: dict, key: str, offset: int):
        op = m[key]
        return self.ops[op if isinstance(op, int) else int(op[offset])]

    def _op(self, span) -> int:
        k = self.op_index.get(id(span))
        if k is None:
            k = self.op_index[id(span)] = len(self.ops)
            self.ops.append(span)
        return k

    def every_running(self) -> tuple[int, int]:
        """(lowest, highest) linear id of the running programs: an access they all make. Program ids are Python
        ints where one value serves every element (torch takes them as scalars: no tensor to build per access,
        which was most of the check's cost with programs run one at a time)."""
        return self.launch.first, self.launch.end - 1

    def rows(self, n: int, rank: int) -> torch.Tensor:
        """The linear ids of the running programs, [n, 1, ...] over an access of `rank` more axes."""
        return (self.launch.first + torch.arange(n, dtype=torch.int32)).reshape([n] + [1] * rank)

    def lanes(self, flat: torch.Tensor, valid=None):
        """(_Elements, lowest, highest program) of lanes at storage offsets flat ([rows, ...]: a row per running
        program, or one row for all of them) where `valid`."""
        lo, hi = self.every_running() if flat.shape[0] == 1 else (self.rows(flat.shape[0], flat.dim() - 1),) * 2
        lo, hi = torch.as_tensor(lo).expand(flat.shape), torch.as_tensor(hi).expand(flat.shape)
        if valid is not None:
            valid = valid.expand(flat.shape)
            return _Elements(flat=flat[valid]), lo[valid], hi[valid]
        return _Elements(flat=flat.reshape(-1)), lo.reshape(-1), hi.reshape(-1)

    def read(self, span, view: View, at: _Elements, lo, hi) -> None:
        """Programs lo .. hi (ints, or tensors that broadcast over the elements; lo == hi: one program's) read
        `at`."""
        if at.flat is not None and at.flat.numel() == 0:
            return
        m = self._maps(view)
        if m["changed"]:
            changer = at.of(m["changer"])
            store_lo = at.of(m["store_lo"])
            stale = (changer >= 0) & ((lo < store_lo) | (hi > at.of(m["store_hi"])))
            if bool(stale.any()):
                k, lo_k, hi_k, offset = _first_of(stale, lo, hi, at)
                reader = lo_k if lo_k < int(store_lo[k]) else hi_k
                store = self._op_at(m, "change_op", offset)
                raise TleError(span, f"{_reader(span)} from '{view.name}': program {self.launch.program(reader)} reads "
                                     f"element {_element_of(view, offset)}, which program "
                                     f"{self.launch.program(int(changer[k]))} changes to "
                                     f"{_scalar_text(view.storage[offset])}; what the load sees depends on which "
                                     f"program runs first", [Note(f"the {_writer(store)}", store), self.NOTE])
        at.fold(m["read_lo"], lo, "amin")
        at.fold(m["read_hi"], hi, "amax")
        # the op of each element's lowest and of its highest reader: a race names the load of the program it names
        # (one op's name for all readers pointed a stencil's race at the neighbour's gather that was not racing)
        self._note_op(m, "read_lo_op", at, span, lambda: at.of(m["read_lo"]) == lo)
        self._note_op(m, "read_hi_op", at, span, lambda: at.of(m["read_hi"]) == hi)

    def stored(self, span, view: View, at: _Elements, old: torch.Tensor, new: torch.Tensor, lo, hi) -> None:
        """Programs lo .. hi store `new` over `old` at `at` (old and new in its shape; lo == hi: one program's)."""
        if at.flat is not None and at.flat.numel() == 0:
            return
        m = self._maps(view)
        changed = ~_same_bits(old, new)
        read_lo, read_hi = at.of(m["read_lo"]), at.of(m["read_hi"])
        if isinstance(lo, int) and lo != hi:  # several programs store: any reader is another's
            seen = changed & (read_hi >= 0)
        else:  # (no reader: read_lo is FIRST and read_hi NONE, outside any program's id)
            seen = changed & ((read_lo < lo) | (read_hi > hi))
        if bool(seen.any()):
            k, lo_k, hi_k, offset = _first_of(seen, lo, hi, at)
            reader = int(read_lo[k]) if int(read_lo[k]) != lo_k or lo_k != hi_k else int(read_hi[k])
            writer = lo_k if lo_k != reader else hi_k
            load = self._op_at(m, "read_lo_op" if reader == int(read_lo[k]) else "read_hi_op", offset)
            what = _reader(load)
            raise TleError(span, f"{_writer(span)} to '{view.name}': program {self.launch.program(writer)} changes "
                                 f"element {_element_of(view, offset)} from {_scalar_text(old[k])} to "
                                 f"{_scalar_text(new.expand(old.shape)[k])}, which program "
                                 f"{self.launch.program(reader)} reads; what that {what} sees depends on which "
                                 f"program runs first", [Note(f"the {what}", load), self.NOTE])
        at.fold(m["store_lo"], lo, "amin")
        at.fold(m["store_hi"], hi, "amax")
        if bool(changed.any()):
            m["changed"] = True
            at.put(m["changer"], hi if isinstance(hi, int) else hi.expand(changed.shape), changed)
            self._note_op(m, "change_op", at, span, changed)


def _first_of(bad: torch.Tensor, lo, hi, at: _Elements) -> tuple:
    """The first element where `bad`: (its index in the access, the lowest and highest program of it, its storage
    offset)."""
    k = tuple(bad.nonzero()[0].tolist())

    def at_k(p):
        return p if isinstance(p, int) else int(p.expand(bad.shape)[k])
    return k, at_k(lo), at_k(hi), at.offset_of(bad)


def _window_offsets(shape, strides) -> torch.Tensor:
    """The storage offsets of a strided window's elements, relative to its first, in its shape."""
    out = torch.zeros(shape, dtype=torch.int64)
    for a, (n, st) in enumerate(zip(shape, strides)):
        out = out + torch.arange(n, dtype=torch.int64).reshape([n if i == a else 1 for i in range(len(shape))]) * st
    return out


def _element_of(view: View, offset: int) -> list[int]:
    """The index in `view` of the element at storage `offset` (its strides do not overlap: a store's view)."""
    rest, index = offset - view.base, [0] * len(view.sizes)
    for axis in sorted(range(len(view.sizes)), key=lambda a: -view.strides[a]):
        if view.strides[axis] > 0:
            index[axis], rest = divmod(rest, view.strides[axis])
    return index


def _scalar_text(x) -> str:
    v = x.item() if isinstance(x, torch.Tensor) else x
    return repr(v) if isinstance(v, float) else str(v)


# ---- MLIR access (generic API only) -------------------------------------------------------------------------------
def type_info(t) -> tuple[str, tuple[int, ...] | None]:
    """(element type, tile shape) of an MLIR type, shape None for a scalar. From the type's text, which both
    binding providers print the same way."""
    s = str(t)
    if s.startswith("tensor<"):
        *dims, elem = s[len("tensor<"):-1].split("x")
        return elem, tuple(int(d) for d in dims)
    return s, None


def _view_type(t) -> tuple[str, int]:
    m = re.search(r"<\s*(\w+)\s*,\s*(\d+)", str(t))
    if not m:
        raise ValueError(f"not a !tle.view type: {t}")
    return m.group(1), int(m.group(2))


def _ptr_elem(t) -> str | None:
    m = re.fullmatch(r"!tle\.ptr<\s*(\w+)\s*>", str(t))
    return m.group(1) if m else None


def _take(storage: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """torch.take, which CPU torch lacks for the 8-bit floats: those are taken as bytes and viewed back."""
    if storage.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.take(storage.view(torch.uint8), flat).view(storage.dtype)
    return torch.take(storage, flat)


def _int_attr(a) -> int:
    return ir.IntegerAttr(a).value


def _str_attr(a) -> str:
    return ir.StringAttr(a).value


def _scalar_attr(a, elem: str):
    if elem in FLOATS:
        return ir.FloatAttr(a).value
    v = ir.IntegerAttr(a).value
    return bool(v) if elem == "i1" else v


def _ops(block) -> list:
    return [op.operation for op in block.operations]


def _span(op):
    return span_of_location(op.location)


# ---- helpers on batched tensors -----------------------------------------------------------------------------------
def _program_of(env: Env, b: int) -> tuple[int, int, int]:
    return tuple(int(env[s][b if env[s].shape[0] > 1 else 0]) for s in PID)


def _first(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(bad.nonzero()[0].tolist())


def _fail(env: Env, span, bad: torch.Tensor, describe: Callable[[tuple[int, ...]], str], notes=None):
    """Raise TleError for the first true element of `bad` (leading axis: programs); describe(index) says what."""
    where = _first(bad)
    raise TleError(span, f"{describe(where)} in program {_program_of(env, where[0])}", notes)


def _at(x: torch.Tensor, where: tuple[int, ...]):
    """x's element at `where` (an index into a tensor x broadcasts to)."""
    idx = tuple(0 if n == 1 else i for n, i in zip(x.shape, where[len(where) - x.dim():]))
    return x[idx].item()


def _tile_pos(where: tuple[int, ...]) -> str:
    return f" at tile element {list(where[1:])}" if len(where) > 1 else ""


def _broadcast(*shapes) -> tuple[int, ...]:
    """numpy broadcasting of shapes (torch.broadcast_shapes imports sympy on first use: seconds)."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, n in enumerate(s, rank - len(s)):
            if n != 1:
                if out[i] not in (1, n):
                    raise ValueError(f"shapes {shapes} do not broadcast")
                out[i] = n
    return tuple(out)


def _unsigned(x: torch.Tensor, elem: str) -> torch.Tensor:
    """Values whose signed order is the unsigned order of x's bits."""
    if elem == "i1":
        return x
    if elem == "i64":
        return x ^ torch.iinfo(torch.int64).min
    return x.to(torch.int64) & ((1 << INT_BITS[elem]) - 1)


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The bit pattern of each element as int64 (so NaNs with equal bits compare equal)."""
    if x.is_floating_point():
        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        return x.view(ints[x.element_size()]).to(torch.int64)
    return x.to(torch.int64)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Where a and b hold the same bits (NaNs with equal bits compare equal), without widening."""
    if a.is_floating_point():
        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return a.view(ints) == b.to(a.dtype).view(ints)
    return a == b


def _round_tf32(x: torch.Tensor) -> torch.Tensor:
    """f32 -> tf32 (10-bit mantissa), round to nearest even; NaN and inf kept."""
    bits = x.view(torch.int32)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x)


def _in_f32(fn, elem: str):
    """fn computed in f32 and rounded once to elem, for f16/bf16 (docs/numerics.md); fn itself otherwise."""
    if elem not in HALF:
        return fn
    dt = TORCH_DTYPES[elem]
    return lambda *xs: fn(*[x.float() for x in xs]).to(dt)


# ---- elementwise op tables ------------------------------------------------------------------------------------------
def _maximum(a, b):
    """IEEE 754-2019 maximum, as arith.maximumf: NaN-propagating, and -0.0 < +0.0 (torch returns either zero)."""
    return torch.where(a == b, torch.where(torch.signbit(a), b, a), torch.maximum(a, b))


def _minimum(a, b):
    return torch.where(a == b, torch.where(torch.signbit(a), a, b), torch.minimum(a, b))


def _amax(x, axis):
    """max over an axis: NaN-propagating, and +0.0 when the slice's largest values are zeros of both signs."""
    r = torch.amax(x, axis)
    if not x.is_floating_point() or not (r == 0).any():
        return r
    positive_zero = ((x == 0) & ~torch.signbit(x)).any(axis)
    return torch.where((r == 0) & positive_zero, torch.zeros_like(r), r)


def _amin(x, axis):
    r = torch.amin(x, axis)
    if not x.is_floating_point() or not (r == 0).any():
        return r
    negative_zero = ((x == 0) & torch.signbit(x)).any(axis)
    return torch.where((r == 0) & negative_zero, torch.full_like(r, -0.0), r)


def _sqrt(x: torch.Tensor) -> torch.Tensor:
    """IEEE sqrt (correctly rounded), as both GPU paths' sqrt.rn: torch's CPU sqrt is not (6507 of 2^20 random f32
    inputs 1 ulp off, f64 too), numpy's is. f16/bf16 arrive in f32, whose correctly rounded root rounds correctly
    again to 16 bits."""
    if x.dtype not in (torch.float32, torch.float64):
        return torch.sqrt(x)
    with np.errstate(invalid="ignore"):  # a negative gives NaN, as IEEE says
        return torch.from_numpy(np.sqrt(x.contiguous().numpy()))


def _narrowed(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """x rounded once to nearest even in dt. torch takes f64 to f16 and bf16 through f32, rounding twice (1 + 2^-11
    + 2^-40 became 1.0, 65519.99999999999 inf): round to f32 by rounding to odd first (toward zero, then the last
    bit set where inexact), which keeps the information the second rounding needs."""
    if x.dtype != torch.float64 or dt not in (torch.float16, torch.bfloat16):
        return x.to(dt)
    y = x.to(torch.float32)
    away = y.to(torch.float64).abs() > x.abs()  # round-to-nearest went away from zero: step back toward it
    y = torch.where(away, torch.nextafter(y, torch.zeros_like(y)), y)
    inexact = (y.to(torch.float64) != x) & ~torch.isnan(x)
    y = torch.where(inexact, (y.view(torch.int32) | 1).view(torch.float32), y)
    return y.to(dt)


_FLOAT_BINARY = {
    "arith.addf": torch.add, "arith.subf": torch.sub, "arith.mulf": torch.mul, "arith.divf": torch.div,
    "arith.remf": torch.fmod,  # C fmod: the sign of the dividend, like MLIR's remf
    "arith.maximumf": _maximum, "arith.minimumf": _minimum,  # NaN-propagating
    "arith.maxnumf": torch.fmax, "arith.minnumf": torch.fmin,  # NaN-ignoring
    "math.powf": torch.pow, "math.atan2": torch.atan2,
}
_FLOAT_UNARY = {
    "arith.negf": torch.neg, "math.exp": torch.exp, "math.exp2": torch.exp2, "math.log": torch.log,
    "math.log2": torch.log2, "math.sqrt": _sqrt, "math.rsqrt": torch.rsqrt, "math.sin": torch.sin,
    "math.cos": torch.cos, "math.tanh": torch.tanh, "math.erf": torch.erf, "math.absf": torch.abs,
    "math.log1p": torch.log1p, "math.expm1": torch.expm1,
    "math.floor": torch.floor, "math.ceil": torch.ceil,
    "math.roundeven": torch.round, "math.trunc": torch.trunc,  # torch.round: half to even
    "math.tan": torch.tan, "math.sinh": torch.sinh, "math.cosh": torch.cosh, "math.asin": torch.asin,
    "math.acos": torch.acos, "math.atan": torch.atan,
}
_INT_BINARY = {  # torch integer arithmetic wraps (two's complement), like arith without overflow flags
    "arith.addi": torch.add, "arith.subi": torch.sub, "arith.muli": torch.mul, "arith.andi": torch.bitwise_and,
    "arith.ori": torch.bitwise_or, "arith.xori": torch.bitwise_xor, "arith.maxsi": torch.maximum,
    "arith.minsi": torch.minimum,
}
_BOOL_BINARY = {  # i1 arithmetic is modulo 2
    "arith.addi": torch.bitwise_xor, "arith.subi": torch.bitwise_xor, "arith.muli": torch.bitwise_and,
    "arith.andi": torch.bitwise_and, "arith.ori": torch.bitwise_or, "arith.xori": torch.bitwise_xor,
}


def _unordered(a, b):
    return torch.isnan(a) | torch.isnan(b)


_CMPF = {  # MLIR's CmpFPredicate numbering. torch's comparisons are ordered, except != which is unordered.
    0: lambda a, b: torch.zeros_like(a == b), 1: torch.eq, 2: torch.gt, 3: torch.ge, 4: torch.lt, 5: torch.le,
    6: lambda a, b: (a != b) & ~_unordered(a, b), 7: lambda a, b: ~_unordered(a, b),
    8: lambda a, b: (a == b) | _unordered(a, b), 9: lambda a, b: ~(a <= b), 10: lambda a, b: ~(a < b),
    11: lambda a, b: ~(a >= b), 12: lambda a, b: ~(a > b), 13: torch.ne, 14: _unordered,
    15: lambda a, b: torch.ones_like(a == b),
}
_CMPI_SIGNED = {0: torch.eq, 1: torch.ne, 2: torch.lt, 3: torch.le, 4: torch.gt, 5: torch.ge}
_CMPI_UNSIGNED = {6: torch.lt, 7: torch.le, 8: torch.gt, 9: torch.ge}

_ELEMENTWISE = frozenset(_FLOAT_BINARY) | frozenset(_FLOAT_UNARY) | frozenset(_INT_BINARY)


def _identity(kind: str, elem: str):
    """The value that a reduction or scan of this kind leaves the others unchanged with."""
    if kind == "sum":
        return 0.0 if elem in FLOATS else 0
    if kind == "prod":
        return 1.0 if elem in FLOATS else 1
    low = kind in ("max", "argmax")
    if elem == "i1":
        return not low
    if elem in FLOATS:
        return -math.inf if low else math.inf
    info = torch.iinfo(TORCH_DTYPES[elem])
    return info.min if low else info.max


# Ops that never run in the once-per-launch prologue: they touch memory, depend on the program, or hold regions.
_NOT_HOISTABLE = ("tle.program_id", "tle.print", "tle.assert", "tle.load", "tle.store", "tle.gather", "tle.scatter",
                  "tle.atomic", "scf.for", "scf.if", "func.return")


# ---- the compiler ---------------------------------------------------------------------------------------------------
class CompiledKernel:
    """A tle kernel compiled to closures. run(grid, args) executes it; compile once, run many times."""

    def __init__(self, module: "ir.Module"):
        func = _find_kernel(module)
        self.name = _str_attr(func.attributes["sym_name"])
        self.span = _span(func)
        self._slots: dict = {}
        self._nslots = _FIRST_SLOT
        entry = func.regions[0].blocks[0]
        self.arg_slots = [self._slot(a) for a in entry.arguments]
        self.arg_types = [str(a.type) for a in entry.arguments]
        self.arg_names = _arg_names(func, len(self.arg_slots))
        self.poison = self._taint(entry, lambda op: op.name == "tle.undef", through_ops=False)
        self.padded = PaddedLanes(func, self._slot, _ELEMENTWISE, _program_of, type_info, _identity, _scalar_attr)
        self.varying = self._taint(entry, lambda op: op.name in ("tle.program_id", "tle.atomic"), through_ops=True)
        self.batched = not self._control_varies(entry)
        # Arguments whose storage a read-write race can involve (_ReadClaims): none where an atomic's result is read.
        self.read_args, self.stored_args = self._accessed_args(func) if relaxed_atomics(func) else (set(), set())
        self.max_tile = max([math.prod(s) for s in self._tile_shapes(entry)] or [1])
        self.programs_per_chunk = max(1, _BATCH_ELEMENTS // self.max_tile) if self.batched else 1
        self.prologue: list[Step] = []
        self.body: list[Step] = []
        invariant = set(self.arg_slots)
        for op in _ops(entry):
            if op.name == "func.return":
                continue
            step = self._op(op)
            ins = [self._slot(v) for v in op.operands]
            if op.name not in _NOT_HOISTABLE and all(s in invariant for s in ins):
                self.prologue.append(step)
                invariant.update(self._slot(r) for r in op.results)
            else:
                self.body.append(step)

    # ---- analysis ------------------------------------------------------------------------------------------------
    def _slot(self, value) -> int:
        s = self._slots.get(value)
        if s is None:
            s = self._slots[value] = self._nslots
            self._nslots += 1
        return s

    @staticmethod
    def _accessed_args(func) -> tuple[set[int], set[int]]:
        """The argument numbers of the tensors the kernel reads (load, gather) and of those it stores to (store,
        scatter), through make_view and slice. A view from anywhere else counts as every tensor argument."""
        every = {i for i, a in enumerate(func.regions[0].blocks[0].arguments) if _ptr_elem(str(a.type)) is not None}

        def args_of(view) -> set[int]:
            while not isinstance(view.owner, ir.Block):
                if view.owner.name not in ("tle.make_view", "tle.slice"):
                    return every
                view = view.owner.operands[0]
            return {ir.BlockArgument(view).arg_number}
        read, stored = set(), set()
        for op in nested_ops(func):
            if op.name in ("tle.load", "tle.gather"):
                read |= args_of(op.operands[0])
            elif op.name in ("tle.store", "tle.scatter"):
                stored |= args_of(op.operands[0])
        return read, stored

    def _taint(self, entry, is_source, through_ops: bool) -> set[int]:
        """Slots that may hold a value derived from a source op: through scf.for/scf.if results and iter_args
        always, and through every other op when through_ops. Iterated to a fixpoint (loops carry values back)."""
        tainted: set[int] = set()

        def walk(block):
            for op in _ops(block):
                ins = [self._slot(v) for v in op.operands]
                outs = [self._slot(r) for r in op.results]
                if op.name == "scf.for":
                    body = op.regions[0].blocks[0]
                    args = [self._slot(a) for a in body.arguments]
                    yields = [self._slot(v) for v in _ops(body)[-1].operands]
                    if through_ops and any(s in tainted for s in ins[:3]):
                        tainted.add(args[0])
                        tainted.update(outs)
                    for init, arg, y, out in zip(ins[3:], args[1:], yields, outs):
                        if init in tainted or y in tainted:
                            tainted.update((arg, out))
                    walk(body)
                elif op.name == "scf.if":
                    for region in op.regions:
                        for block in region.blocks:
                            yields = [self._slot(v) for v in _ops(block)[-1].operands]
                            tainted.update(o for o, y in zip(outs, yields) if y in tainted)
                            walk(block)
                    if through_ops and ins[0] in tainted:
                        tainted.update(outs)
                elif is_source(op) or (through_ops and any(s in tainted for s in ins)):
                    tainted.update(outs)

        while True:
            before = len(tainted)
            walk(entry)
            if len(tainted) == before:
                return tainted

    def _control_varies(self, block) -> bool:
        """Whether a loop bound, an if condition or a slice's window may differ between programs (then programs run
        one by one)."""
        for op in _ops(block):
            n = {"scf.for": 3, "scf.if": 1, "tle.slice": len(op.operands)}.get(op.name, 0)
            if any(self._slot(v) in self.varying for v in list(op.operands)[:n]):
                return True
            if any(self._control_varies(b) for r in op.regions for b in r.blocks):
                return True
        return False

    def _tile_shapes(self, block):
        for op in _ops(block):
            for r in op.results:
                _, shape = type_info(r.type)
                if shape:
                    yield shape
            for region in op.regions:
                for b in region.blocks:
                    yield from self._tile_shapes(b)

    # ---- ops -------------------------------------------------------------------------------------------------------
    def _block(self, block, terminator: str = "scf.yield") -> tuple[list[Step], list[int]]:
        """The steps of a region's block, and the slots its terminator (scf.yield, or a combine func's return)
        passes on."""
        steps, yields = [], []
        for op in _ops(block):
            if op.name == terminator:
                yields = [self._slot(v) for v in op.operands]
            else:
                steps.append(self._op(op))
        return steps, yields

    def _op(self, op) -> Step:
        name = op.name
        span = _span(op)
        if name in _FLOAT_BINARY or name in _FLOAT_UNARY or name in _INT_BINARY:
            step = self._elementwise(op)
        else:
            handler = getattr(self, "op_" + name.replace(".", "_"), None)
            if handler is None:
                raise TleError(span, f"the interpreter does not support the op {name}")
            step = handler(op, span)
        step = self.padded.wrap(op, span, step)
        # Only scf.for's iter_arg inits may hold poison (a var that is assigned in the loop); anything else that
        # reads a maybe-poison slot checks it first. Slots that can never hold poison cost nothing.
        ins = [self._slot(v) for v in op.operands]
        if name == "scf.for":
            ins = ins[:3]
        checked = [s for s in ins if s in self.poison]
        if not checked:
            return step

        def poison_checked(env):
            for s in checked:
                v = env[s]
                if type(v) is Poison:
                    # Poison only arises under control flow that is the same for the whole chunk of programs.
                    raise TleError(span, f"read of uninitialised var '{v.name}' in program {_program_of(env, 0)}",
                                   [Note(f"'{v.name}' is declared here without a value", v.span)])
            step(env)
        return poison_checked

    def _io(self, op):
        return [self._slot(v) for v in op.operands], [self._slot(r) for r in op.results]

    def _elementwise(self, op) -> Step:
        name = op.name
        elem, _ = type_info(op.operands[0].type)
        if name in _FLOAT_BINARY:
            fn = _in_f32(_FLOAT_BINARY[name], elem)
        elif name in _FLOAT_UNARY:
            fn = _in_f32(_FLOAT_UNARY[name], elem)
        else:
            fn = (_BOOL_BINARY if elem == "i1" else _INT_BINARY)[name]
        return self._apply(op, fn)

    def _apply(self, op, fn) -> Step:
        """A step computing the op's one result as fn(operands...)."""
        ins, (out,) = self._io(op)
        if len(ins) == 1:
            a, = ins

            def step(env):
                env[out] = fn(env[a])
        elif len(ins) == 2:
            a, b = ins

            def step(env):
                env[out] = fn(env[a], env[b])
        else:
            def step(env):
                env[out] = fn(*[env[s] for s in ins])
        return step

    # arith ------------------------------------------------------------------------------------------------------
    def op_arith_constant(self, op, span) -> Step:
        elem, shape = type_info(op.result.type)
        attr = op.attributes["value"]
        dt = TORCH_DTYPES[elem]
        if shape is None:
            value = torch.tensor([_scalar_attr(attr, elem)], dtype=dt)
        else:
            dense = ir.DenseElementsAttr(attr)
            if dense.is_splat:
                value = torch.full((1, *shape), _scalar_attr(dense.get_splat_value(), elem), dtype=dt)
            else:
                value = torch.from_numpy(np.array(dense)).to(dt).reshape(1, *shape)
        out = self._slot(op.result)

        def step(env):
            env[out] = value  # never written in place: every op makes new tensors
        return step

    def op_arith_mului_extended(self, op, span) -> Step:
        """Unsigned widening multiply: (low, high) words of the 2N-bit product. Only i32 reaches here (tle's
        umulhi). The high word is computed exactly in int64, without overflow: with a = ah * 2**16 + al,
        floor(a * b / 2**32) = floor((ah * b + floor(al * b / 2**16)) / 2**16), every term below 2**49."""
        (a, b), (lo, hi) = self._io(op)
        elem, _ = type_info(op.operands[0].type)
        if elem != "i32":
            raise TleError(span, f"the interpreter supports arith.mului_extended on i32 only, not {elem}")

        def step(env):
            x, y = env[a], env[b]
            ux, uy = x.to(torch.int64) & 0xFFFFFFFF, y.to(torch.int64) & 0xFFFFFFFF
            high = (((ux >> 16) * uy + (((ux & 0xFFFF) * uy) >> 16)) >> 16)
            env[hi] = high.to(torch.int32)  # below 2**32: the same bits as an i32
            env[lo] = torch.mul(x, y)  # wraps, as arith.muli
        return step

    def _int_division(self, op, span, rem: bool) -> Step:
        (a, b), (out,) = self._io(op)

        def step(env):
            x, y = env[a], env[b]
            zero = y == 0
            if zero.any():
                _fail(env, span, zero.expand(_broadcast(x.shape, y.shape)),
                      lambda w: f"integer division by zero{_tile_pos(w)}")
            minus_one = y == -1  # INT_MIN / -1 traps on x86; its wrapped result is -x (remainder 0)
            if minus_one.any():
                y = torch.where(minus_one, 1, y)
            if rem:
                env[out] = torch.fmod(x, y)  # C remainder: the sign of the dividend
            else:
                q = torch.div(x, y, rounding_mode="trunc")
                env[out] = torch.where(minus_one, -x, q) if minus_one.any() else q
        return step

    def op_arith_divsi(self, op, span):
        return self._int_division(op, span, rem=False)

    def op_arith_remsi(self, op, span):
        return self._int_division(op, span, rem=True)

    def _shift(self, op, span, kind: str) -> Step:
        (a, b), (out,) = self._io(op)
        elem, _ = type_info(op.result.type)
        bits = INT_BITS[elem]

        def step(env):
            x, n = env[a], env[b]
            bad = (n < 0) | (n >= bits)
            if bad.any():
                bad = bad.expand(_broadcast(x.shape, n.shape))
                _fail(env, span, bad, lambda w: f"shift by {_at(n, w)} is out of range for {elem} (0 to {bits - 1})"
                                                f"{_tile_pos(w)}")
            if kind == "shl":
                env[out] = torch.bitwise_left_shift(x, n)
            elif kind == "shrs":
                env[out] = torch.bitwise_right_shift(x, n)
            else:  # logical: shift the zero-extended bits, then wrap back to the signed type
                env[out] = torch.bitwise_right_shift(_unsigned(x, elem), n.to(torch.int64)).to(x.dtype)
        return step

    def op_arith_shli(self, op, span):
        return self._shift(op, span, "shl")

    def op_arith_shrsi(self, op, span):
        return self._shift(op, span, "shrs")

    def op_arith_shrui(self, op, span):
        return self._shift(op, span, "shru")

    def op_arith_cmpf(self, op, span):
        pred = _int_attr(op.attributes["predicate"])
        return self._apply(op, _CMPF[pred])

    def op_arith_cmpi(self, op, span):
        pred = _int_attr(op.attributes["predicate"])
        if pred in _CMPI_SIGNED:
            return self._apply(op, _CMPI_SIGNED[pred])
        elem, _ = type_info(op.operands[0].type)
        cmp = _CMPI_UNSIGNED[pred]
        return self._apply(op, lambda a, b: cmp(_unsigned(a, elem), _unsigned(b, elem)))

    def op_arith_select(self, op, span):
        _, shape = type_info(op.result.type)
        _, cshape = type_info(op.operands[0].type)
        if shape is not None and cshape is None:  # a scalar condition choosing whole tiles
            rank = len(shape)
            return self._apply(op, lambda c, a, b: torch.where(c.reshape(c.shape[0], *([1] * rank)), a, b))
        return self._apply(op, torch.where)

    def op_arith_extf(self, op, span):
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        return self._apply(op, lambda x: x.to(dt))

    def op_arith_truncf(self, op, span):
        """Rounds to nearest even (torch); overflow gives inf, except into an 8-bit float, where the GPUs' conversion
        (cvt.rn.satfinite) saturates to the largest finite value, infinities included, and NaN stays NaN."""
        elem = type_info(op.result.type)[0]
        dt = TORCH_DTYPES[elem]
        if elem in F8_LARGEST:
            largest = F8_LARGEST[elem]
            return self._apply(op, lambda x: x.clamp(-largest, largest).to(dt))
        return self._apply(op, lambda x: _narrowed(x, dt))

    def op_arith_sitofp(self, op, span):
        src = type_info(op.operands[0].type)[0]
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        if src == "i1":  # a signed i1 true is -1
            return self._apply(op, lambda x: (-x.to(torch.int32)).to(dt))
        return self._apply(op, lambda x: x.to(dt))

    def op_arith_uitofp(self, op, span):
        src = type_info(op.operands[0].type)[0]
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        if src == "i64":
            return self._apply(op, lambda x: torch.where(x < 0, x.to(torch.float64) + 2.0 ** 64,
                                                         x.to(torch.float64)).to(dt))
        return self._apply(op, lambda x: _unsigned(x, src).to(dt))

    def op_arith_fptosi(self, op, span):
        dst = type_info(op.result.type)[0]
        dt = TORCH_DTYPES[dst]
        info = torch.iinfo(dt)
        out = self._slot(op.result)
        a = self._slot(op.operands[0])

        def step(env):
            x = env[a]
            t = torch.trunc(x.to(torch.float64))
            bad = ~((t >= info.min) & (t <= info.max))  # NaN fails too
            if bad.any():
                _fail(env, span, bad, lambda w: f"cast of {_at(x, w)} to {dst} is out of range{_tile_pos(w)}",
                      ["a float->int cast truncates toward zero; out-of-range values (and NaN) are undefined. "
                       "Clamp first, or use where() to keep such values out"])
            env[out] = t.to(dt)
        return step

    def op_arith_extsi(self, op, span):
        src = type_info(op.operands[0].type)[0]
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        if src == "i1":
            return self._apply(op, lambda x: -x.to(dt))
        return self._apply(op, lambda x: x.to(dt))

    def op_arith_extui(self, op, span):
        src = type_info(op.operands[0].type)[0]
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        return self._apply(op, lambda x: _unsigned(x, src).to(dt))

    def op_arith_trunci(self, op, span):
        dst = type_info(op.result.type)[0]
        dt = TORCH_DTYPES[dst]
        if dst == "i1":  # the low bit, not "nonzero"
            return self._apply(op, lambda x: (x & 1).to(torch.bool))
        return self._apply(op, lambda x: x.to(dt))  # wraps

    def op_arith_bitcast(self, op, span):
        dt = TORCH_DTYPES[type_info(op.result.type)[0]]
        return self._apply(op, lambda x: x.view(dt))

    def op_math_absi(self, op, span):
        return self._apply(op, torch.abs)  # abs(INT_MIN) wraps to INT_MIN

    # scf -------------------------------------------------------------------------------------------------------------
    def op_scf_for(self, op, span) -> Step:
        (lb, ub, step_slot, *inits), outs = self._io(op)
        body = op.regions[0].blocks[0]
        iv, *iters = [self._slot(a) for a in body.arguments]
        iv_dtype = TORCH_DTYPES[type_info(body.arguments[0].type)[0]]  # i32, or i64 where a bound is (a WideDim)
        steps, yields = self._block(body)
        carry = self.padded.loop(op)  # the padded-lanes check's states of the tiles it carries

        def run(env):
            lo, hi, st = int(env[lb]), int(env[ub]), int(env[step_slot])
            values = [env[s] for s in inits]
            states = carry.enter(env) if carry else None
            if lo < hi:
                for i in torch.arange(lo, hi, st, dtype=iv_dtype).split(1):
                    env[iv] = i
                    for s, v in zip(iters, values):
                        env[s] = v
                    if carry:
                        carry.begin(env, states)
                    for f in steps:
                        f(env)
                    values = [env[s] for s in yields]
                    if carry:
                        states = carry.yielded(env)
            for s, v in zip(outs, values):
                env[s] = v
            if carry:
                carry.leave(env, states)
        return run

    def op_scf_if(self, op, span) -> Step:
        (cond,), outs = self._io(op)
        branches = [self._block(r.blocks[0]) if len(r.blocks) else ([], []) for r in op.regions]
        carry = self.padded.branch(op)

        def run(env):
            taken = 0 if bool(env[cond]) else 1
            steps, yields = branches[taken]
            for f in steps:
                f(env)
            for s, y in zip(outs, yields):
                env[s] = env[y]
            if carry:
                carry(env, taken)
        return run

    # tle: mesh and values --------------------------------------------------------------------------------------------
    def op_tle_program_id(self, op, span):
        src = PID["xyz".index(_str_attr(op.attributes["axis"]))]
        out = self._slot(op.result)

        def step(env):
            env[out] = env[src]
        return step

    def op_tle_num_programs(self, op, span):
        src = NUM_PROGRAMS["xyz".index(_str_attr(op.attributes["axis"]))]
        out = self._slot(op.result)

        def step(env):
            env[out] = env[src]
        return step

    def op_tle_undef(self, op, span):
        value = Poison(_str_attr(op.attributes["name"]), span)
        out = self._slot(op.result)

        def step(env):
            env[out] = value
        return step

    def op_tle_arange(self, op, span):
        start, end = _int_attr(op.attributes["start"]), _int_attr(op.attributes["end"])
        value = torch.arange(start, end, dtype=torch.int32).reshape(1, -1)
        out = self._slot(op.result)

        def step(env):
            env[out] = value
        return step

    def op_tle_splat(self, op, span):
        _, shape = type_info(op.result.type)
        ones = [1] * len(shape)
        return self._apply(op, lambda x: x.reshape(x.shape[0], *ones).expand(x.shape[0], *shape))

    def op_tle_broadcast(self, op, span):
        _, shape = type_info(op.result.type)
        return self._apply(op, lambda x: x.expand(x.shape[0], *shape))

    def op_tle_expand_dims(self, op, span):
        axis = _int_attr(op.attributes["axis"]) + 1
        return self._apply(op, lambda x: x.unsqueeze(axis))

    def op_tle_reshape(self, op, span):
        _, shape = type_info(op.result.type)
        return self._apply(op, lambda x: x.reshape(x.shape[0], *(shape or ())))

    def op_tle_join(self, op, span):
        return self._apply(op, lambda a, b: torch.stack(torch.broadcast_tensors(a, b), dim=-1))

    def op_tle_split(self, op, span):
        (x,), (lhs, rhs) = self._io(op)

        def step(env):
            env[lhs], env[rhs] = env[x][..., 0], env[x][..., 1]
        return step

    def op_tle_tile_gather(self, op, span):
        axis = _int_attr(op.attributes["axis"]) + 1  # behind the programs' axis
        (x, idx), (out,) = self._io(op)
        n = type_info(op.operands[0].type)[1][axis - 1]

        def step(env):
            src, i = env[x], env[idx]
            bad = (i < 0) | (i >= n)
            if bad.any():
                _fail(env, span, bad, lambda w: f"gather() index {_at(i, w)} is out of range for an axis of {n}"
                                                f"{_tile_pos(w)}", ["Triton's tl.gather leaves that undefined"])
            shape = _broadcast(src.shape[:1], i.shape[:1]) + src.shape[1:]
            ishape = shape[:1] + i.shape[1:]
            env[out] = torch.gather(src.expand(shape), axis, i.to(torch.int64).expand(ishape))
        return step

    def op_tle_inline_asm(self, op, span):
        """The interpreter cannot run PTX: it runs the kernel's `ref=`, the same computation in tle."""
        ref = operand_groups(op)[-1]
        if not ref:
            raise TleError(span, "the interpreter cannot run asm(): it runs PTX", [
                "give asm() a ref= with the same computation in tle, which the interpreter runs instead",
                "or run the kernel on a GPU"])
        src, (out,) = self._slot(ref[0]), self._io(op)[1]

        def step(env):
            env[out] = env[src]
        return step

    def op_tle_transpose(self, op, span):
        perm = [0] + [p + 1 for p in ir.DenseI32ArrayAttr(op.attributes["perm"])]
        return self._apply(op, lambda x: x.permute(perm))

    # tle: computation ------------------------------------------------------------------------------------------------
    def op_tle_dot(self, op, span):
        elem, _ = type_info(op.operands[0].type)
        acc_elem, _ = type_info(op.operands[2].type)
        acc_dt = TORCH_DTYPES[acc_elem]
        tf32 = _str_attr(op.attributes["precision"]) == "tf32"
        if elem in HALF or elem in F8_LARGEST:
            # Products of f16/bf16 (and of 8-bit floats) are exact in f32; they are summed in f32 and acc is added
            # in f32, then the result is rounded once to acc's type (a no-op for an f32 accumulator).
            def dot(a, b, c):
                return _baddbmm(c.float(), a.float(), b.float()).to(acc_dt)
        elif elem == "i8":
            # Exact in f64 (|sum| < 2^53 for any K a tile can have), then wrapped into i32 with acc.
            def dot(a, b, c):
                p = torch.matmul(a.to(torch.float64), b.to(torch.float64)).to(torch.int64)
                return (p + c.to(torch.int64)).to(acc_dt)
        elif tf32:
            def dot(a, b, c):
                return _baddbmm(c, _round_tf32(a), _round_tf32(b))
        else:
            def dot(a, b, c):
                return _baddbmm(c, a, b)
        return self._apply(op, dot)

    def op_tle_reduce(self, op, span):
        kind = _str_attr(op.attributes["kind"])
        axis = _int_attr(op.attributes["axis"]) + 1
        elem, _ = type_info(op.operands[0].type)
        dt = TORCH_DTYPES[elem]
        if kind == "sum":
            if elem in FLOATS:
                fn = _in_f32(lambda x: x.sum(axis), elem)
            else:  # wraps like the GPU's i32/i64 adds
                fn = lambda x: x.sum(axis, dtype=torch.int64).to(dt)  # noqa: E731
        elif kind in ("max", "min"):
            fn = (lambda x: _amax(x, axis)) if kind == "max" else (lambda x: _amin(x, axis))
        elif kind in ("argmax", "argmin"):
            # torch returns the first index of the extreme, and treats NaN as the extreme: the tle definition.
            f = torch.argmax if kind == "argmax" else torch.argmin
            fn = lambda x: f(x, axis).to(torch.int32)  # noqa: E731
        else:
            raise TleError(span, f"unknown reduction kind '{kind}'")
        return self._apply(op, fn)

    def op_tle_scan(self, op, span):
        kind = _str_attr(op.attributes["kind"])
        axis = _int_attr(op.attributes["axis"]) + 1
        elem, _ = type_info(op.operands[0].type)
        dt = TORCH_DTYPES[elem]
        if kind == "sum":
            fn = _in_f32(lambda x: x.cumsum(axis), elem) if elem in FLOATS else \
                (lambda x: x.cumsum(axis, dtype=torch.int64).to(dt))  # wraps like the GPU's adds
        elif kind == "prod":
            fn = _in_f32(lambda x: x.cumprod(axis), elem) if elem in FLOATS else \
                (lambda x: x.cumprod(axis, dtype=torch.int64).to(dt))
        elif kind in ("max", "min"):  # by doubling: exact, as max and min do not round
            if elem in FLOATS:
                pick = _maximum if kind == "max" else _minimum  # NaN-propagating, -0.0 < +0.0
            else:
                pick = torch.maximum if kind == "max" else torch.minimum

            def fn(x):
                d, n = 1, x.shape[axis]
                while d < n:
                    x = torch.cat([x.narrow(axis, 0, d), pick(x.narrow(axis, d, n - d), x.narrow(axis, 0, n - d))],
                                  axis)
                    d *= 2
                return x
        else:
            raise TleError(span, f"unknown scan kind '{kind}'")
        if "reverse" in op.attributes:  # the scan of the flipped tile, flipped back
            forward = fn
            fn = lambda x: forward(x.flip(axis)).flip(axis)  # noqa: E731
        return self._apply(op, fn)

    def op_tle_combine_scan(self, op, span):
        return self._combined(op, span, scan=True)

    def op_tle_combine_reduce(self, op, span):
        return self._combined(op, span, scan=False)

    def _combined(self, op, span, scan: bool) -> Step:
        """combine_scan / combine_reduce: the combine func's steps run once per element along the axis, on every other
        element (and program) at once, folding from the first element (from the last with reverse). That order is
        the definition; the GPU's tree of combines gives the same values for an associative fn, up to rounding. With
        identity=, each run first checks that the identities leave every element of the operands as they are on
        either side of the fn (Tile IR pads with them)."""
        ins, outs = self._io(op)
        axis = _int_attr(op.attributes["axis"]) + 1
        reverse = "reverse" in op.attributes
        func = combine_func(op)
        fn_name = _str_attr(func.attributes["sym_name"]).split(".")[1]
        body = func.regions[0].blocks[0]
        params = [self._slot(a) for a in body.arguments]
        steps, results = self._block(body, "func.return")
        identities = None
        if "identities" in op.attributes:
            identities = [_scalar_attr(a, type_info(x.type)[0])
                          for a, x in zip(ir.ArrayAttr(op.attributes["identities"]), op.operands)]
        # The padded-lanes check's rerun puts here the lanes to leave out of the fold (None: none)
        skip = self.padded.skip_slot(op)

        def combine(env, earlier, later):
            for s, v in zip(params, [*earlier, *later]):
                env[s] = v
            for f in steps:
                f(env)
            shapes = [torch.broadcast_shapes(e.shape, l.shape) for e, l in zip(earlier, later)]
            return [env[s].expand(shape) if env[s].shape != shape else env[s] for s, shape in zip(results, shapes)]

        shown = ", ".join(repr(v) for v in identities or ())
        self_checked = False  # the identity with itself: independent of the data, checked on the op's first run

        def check_identities(env, xs):
            nonlocal self_checked
            ids = [torch.full((1,), v, dtype=x.dtype) for v, x in zip(identities, xs)]
            if not self_checked:
                for j, (g, i) in enumerate(zip(combine(env, ids, ids), ids)):  # the GPU may combine two paddings
                    if not (torch.equal(g, i) or (g.is_floating_point() and
                                                  bool(torch.isnan(g).all() & torch.isnan(i)))):
                        raise TleError(span, f"identity=[{shown}] is not an identity of combine fn '{fn_name}': "
                                             f"{fn_name}(identity, identity) gives {g.flatten()[0].item()!r} for "
                                             f"operand {j + 1}, not {identities[j]!r}",
                                       ["the GPU may combine the identity with itself where it pads a scan or "
                                        "reduction; guard the fn's arithmetic for that case, e.g. with where(...)"])
                self_checked = True
            finite = torch.ones(xs[0].shape, dtype=torch.bool)
            for x in xs:
                if x.is_floating_point():
                    finite &= torch.isfinite(x)
            for side, got in (("left", combine(env, ids, xs)), ("right", combine(env, xs, ids))):
                for j, (g, x) in enumerate(zip(got, xs)):
                    same = (g == x) | (torch.isnan(g) & torch.isnan(x)) if x.is_floating_point() else g == x
                    bad = ~same & finite
                    if bad.any():
                        call = f"{fn_name}(identity, x)" if side == "left" else f"{fn_name}(x, identity)"
                        _fail(env, span, bad, lambda w: (
                            f"identity=[{shown}] is not an identity of combine fn '{fn_name}': {call} gives "
                            f"{_at(g, w)} for operand {j + 1}, not x's {_at(x, w)}{_tile_pos(w)}"),
                            ["the GPU may combine the identity with any element (Tile IR pads its scans and "
                             "reductions with it), so a wrong one changes results there"])

        commutative = "commutative" in op.attributes

        def check_commutes(env, earlier, later, straight, swapped, i):
            """reduce(..., commutative=true) lets the GPU combine in any order: each fold step also runs the fn with
            its two sides swapped, which must give the same values (up to a few roundings for floats)."""
            for j, (g, h) in enumerate(zip(straight, swapped)):
                if g.is_floating_point():
                    rtol = 2e-2 if g.dtype in (torch.float16, torch.bfloat16) else 1e-5
                    scale = g.abs() + h.abs() + earlier[j].abs() + later[j].abs()
                    bad = ~((g == h) | (torch.isnan(g) & torch.isnan(h)) | ((g - h).abs() <= rtol * scale))
                else:
                    bad = g != h
                if bad.any():
                    _fail(env, span, bad, lambda w: (
                        f"combine fn '{fn_name}' does not commute, but this reduce() says commutative=true: with the "
                        f"fold of elements 0..{i - 1} as a and element {i} as b, {fn_name}(a, b) gives {_at(g, w)} "
                        f"and {fn_name}(b, a) gives {_at(h, w)} for result {j + 1}{_tile_pos(w)}"),
                        ["drop commutative=true: the GPU then keeps the elements' order (a scan and its last "
                         "element), as the interpreter does"])

        def check_associates(env, columns):
            """The GPU combines elements in a tree of its choosing, so f must be associative: on the first three
            elements, f(f(a, b), c) and f(a, f(b, c)) must agree (up to rounding: the tolerance is loose, against
            the size of every value involved, so only a fn that is not associative in exact arithmetic fails)."""
            a, b, c = ([col[k] for col in columns] for k in range(3))
            ab, bc = combine(env, a, b), combine(env, b, c)
            left, right = combine(env, ab, c), combine(env, a, bc)
            for j, (g, h) in enumerate(zip(left, right)):
                if g.is_floating_point():
                    rtol = 5e-2 if g.dtype in (torch.float16, torch.bfloat16) else 1e-3
                    scale = sum(v[j].abs().to(g.dtype) for v in (a, b, c, ab, bc)) + g.abs() + h.abs()
                    bad = ((g - h).abs() > rtol * scale) & ~torch.isnan(g) & ~torch.isnan(h) & torch.isfinite(scale)
                else:
                    bad = g != h
                if bad.any():
                    _fail(env, span, bad, lambda w: (
                        f"combine fn '{fn_name}' is not associative: with elements 0, 1 and 2 as a, b and c, "
                        f"{fn_name}({fn_name}(a, b), c) gives {_at(g, w)} and {fn_name}(a, {fn_name}(b, c)) gives "
                        f"{_at(h, w)} for result {j + 1}{_tile_pos(w)}"),
                        ["the GPU combines the elements in a tree, in an order of its choosing, so a scan or a "
                         "reduce needs an associative fn; a recurrence that is not associative is a for loop over "
                         "the elements"])

        def step(env):
            xs = [env[s] for s in ins]
            lead = max(x.shape[0] for x in xs)
            xs = [x.expand(lead, *x.shape[1:]) for x in xs]
            left_out = env[skip] if skip is not None else None
            checking = left_out is None  # (a rerun that leaves lanes out has run the checks on these values already)
            if checking and identities is not None:
                check_identities(env, xs)
            if reverse:
                xs = [x.flip(axis) for x in xs]
            columns = [x.unbind(axis) for x in xs]
            if checking and xs[0].shape[axis] >= 3:
                check_associates(env, columns)
            gaps = None
            if left_out is not None:
                left_out = left_out.expand(xs[0].shape)
                gaps = (left_out.flip(axis) if reverse else left_out).unbind(axis)
            acc = [c[0] for c in columns]
            started = ~gaps[0] if gaps is not None else None  # lanes whose fold has taken in an element
            done = [[a] for a in acc]
            for i in range(1, xs[0].shape[axis]):
                later = [c[i] for c in columns]
                straight = combine(env, acc, later)
                if gaps is not None:
                    # the fold as if the left-out element were not there: the acc passes it by, and the first element
                    # taken in starts the fold
                    taken = ~gaps[i]
                    straight = [torch.where(taken & started, s, torch.where(taken, l, a))
                                for s, l, a in zip(straight, later, acc)]
                    started = started | taken
                elif commutative:  # (combine's values are new tensors: a second run leaves these as they are)
                    check_commutes(env, acc, later, straight, combine(env, later, acc), i)
                acc = straight
                if scan:
                    for d, a in zip(done, acc):
                        d.append(a)
            if scan:
                acc = [torch.stack(d, axis) for d in done]
                if reverse:
                    acc = [a.flip(axis) for a in acc]
            for s, a in zip(outs, acc):
                env[s] = a
        return step

    def op_tle_assert(self, op, span):
        (cond,), _ = self._io(op)
        message = _str_attr(op.attributes["message"])

        def step(env):
            ok = env[cond]
            if not bool(ok.all()):
                _fail(env, span, ~ok, lambda w: f"assert failed{': ' + message if message else ''}{_tile_pos(w)}")
        return step

    def op_tle_print(self, op, span):
        """One line per program, in program order: `pid (x, y, z) label value ...`, a tile as its nested list (numpy's
        text, abbreviated past 1000 elements)."""
        ins = [self._slot(v) for v in op.operands]
        label = print_label(_str_attr(op.attributes["message"]))

        def text(v: torch.Tensor) -> str:
            if v.dtype == torch.bool:
                v = v.to(torch.int32)
            elif v.dtype in (torch.float16, torch.bfloat16):
                v = v.float()
            return np.array2string(v.numpy(), separator=", ") if v.dim() else str(v.item())

        def step(env):
            programs = max([env[s].shape[0] for s in PID] + [env[s].shape[0] for s in ins])
            for b in range(programs):
                values = [text(env[s][b if env[s].shape[0] > 1 else 0]) for s in ins]
                print(" ".join([f"pid {_program_of(env, b)}", *([label] if label else []), *values]), flush=True)
        return step

    def op_tle_histogram(self, op, span):
        bins = type_info(op.result.type)[1][0]

        def count(x, mask=None):  # x: [programs, n]; one row of counts per program
            x = x.long()  # an i8 tile compared with 256 in its own type would wrap
            inside = (x >= 0) & (x < bins)
            if mask is not None:
                inside &= mask.expand(x.shape)
            out = torch.zeros(x.shape[0], bins, dtype=torch.int32)
            return out.scatter_add_(1, torch.where(inside, x, 0).long(), inside.to(torch.int32))
        return self._apply(op, count)

    # tle: memory -----------------------------------------------------------------------------------------------------
    def op_tle_make_view(self, op, span):
        ins, (out,) = self._io(op)
        rank = (len(ins) - 1) // 2
        name = _str_attr(op.attributes["name"])
        elem, _ = _view_type(op.result.type)

        def step(env):
            if env[ins[0]] is None:  # a tensor passed as None: the launch checked that no op addresses it
                env[out] = None
                return
            sizes = [int(env[s]) for s in ins[1:1 + rank]]
            strides = [int(env[s]) for s in ins[1 + rank:]]
            env[out] = View(env[ins[0]], name, elem, sizes, strides, span)
        return step

    def op_tle_slice(self, op, span):
        (v, *rest), (out,) = self._io(op)
        rank = len(rest) // 2

        def step(env):  # one program at a time where a start or size differs between programs (_control_varies)
            try:
                env[out] = env[v].window([int(env[s]) for s in rest[:rank]], [int(env[s]) for s in rest[rank:]])
            except ValueError as e:
                raise TleError(span, f"{e} in program {_program_of(env, 0)}",
                               ["a slice's start and shape must keep it inside the tensor: 0 <= start and "
                                "start + shape <= the tensor's size on every axis",
                                "to read past its edges (a stencil's halo, a window that starts before 0), load "
                                "at a tile index, which pads what lies outside, or gather(x, indices, mask=inside, "
                                "other=v), which reads any element"]) from None
        return step

    def op_tle_load(self, op, span):
        (v, *idx), (out,) = self._io(op)
        elem, tile = type_info(op.result.type)
        pad = _scalar_attr(op.attributes["padding"], elem)
        aranges = _axis_aranges(tile)
        padded = self.padded.mask_slot(op.result)

        def step(env):
            view, starts = env[v], [env[s] for s in idx]
            env[out] = _load(view, starts, tile, pad, aranges)
            lanes = _padded_lanes(view, starts, tile, aranges)
            env[padded] = None if lanes is None else Padded(lanes, Origin(span, view.name, pad))
            reads = env[LAUNCH].reads
            if reads.tracks(view):
                _note_tile_read(reads, span, view, starts, tile, aranges)
        return step

    def op_tle_store(self, op, span):
        (v, val, *idx), _ = self._io(op)
        _, tile = type_info(op.operands[1].type)
        aranges = _axis_aranges(tile)

        def step(env):
            _store(env[LAUNCH].stores, span, env[v], [env[s] for s in idx], tile, env[val], aranges)
        return step

    def _indexed(self, op, with_value: bool):
        """Operand slots of gather/scatter/atomic: (view, value or None, index tiles, mask or None)."""
        view, *groups = [[self._slot(v) for v in g] for g in operand_groups(op)]
        value = groups.pop(0)[0] if with_value else None
        idx, mask = groups[0], groups[1]
        return view[0], value, idx, (mask[0] if mask else None)

    def op_tle_gather(self, op, span):
        v, _, idx, m = self._indexed(op, False)
        out = self._slot(op.result)
        elem, _ = type_info(op.result.type)
        other = _scalar_attr(op.attributes["other"], elem)

        def step(env):
            view, mask = env[v], (env[m] if m is not None else None)
            flat = _lane_offsets(env, span, "gather from", view, [env[s] for s in idx], mask)
            reads = env[LAUNCH].reads
            if reads.tracks(view):
                reads.read(span, view, *reads.lanes(flat, mask))
            if mask is None:
                env[out] = _take(view.storage, flat)
            else:
                mask = mask.expand(flat.shape)
                if mask.any():
                    got = _take(view.storage, torch.where(mask, flat, 0))
                else:  # nothing to read (and the storage may be empty)
                    got = torch.zeros(flat.shape, dtype=view.dtype)
                env[out] = torch.where(mask, got, torch.tensor(other, dtype=view.dtype))
        return step

    def op_tle_scatter(self, op, span):
        v, val, idx, m = self._indexed(op, True)

        def step(env):
            view, mask = env[v], (env[m] if m is not None else None)
            flat = _lane_offsets(env, span, "scatter to", view, [env[s] for s in idx], mask)
            value = env[val]
            shape = _broadcast(flat.shape, value.shape)
            program = _lane_programs(env, shape)
            lanes = torch.stack([i.to(torch.int64).expand(shape) for i in (env[s] for s in idx)], -1)
            flat, value = flat.expand(shape), value.expand(shape)
            if mask is not None:
                mask = mask.expand(shape)
                flat, value, program, lanes = flat[mask], value[mask], program[mask], lanes[mask]
            flat, value = flat.reshape(-1), value.reshape(-1)
            program, lanes = program.reshape(-1), lanes.reshape(-1, lanes.shape[-1])
            bits = _bits(value)
            _check_scatter_in_program(env, span, view, flat, bits, value, program, lanes)
            reads = env[LAUNCH].reads
            if reads.tracks(view):  # lanes every running program makes are logged for the first: all of them
                lo, hi = reads.every_running() if shape[0] == 1 else (program.to(torch.int32),) * 2
                reads.stored(span, view, _Elements(flat=flat), view.storage[flat], value, lo, hi)
            view.storage[flat] = value
            env[LAUNCH].scatters.append((span, view.name, view.address + flat * view.storage.element_size(), bits,
                                         value.to(torch.float64), program, lanes))
        return step

    def op_tle_atomic(self, op, span):
        v, val, idx, m = self._indexed(op, True)
        out = self._slot(op.result)
        kind = _str_attr(op.attributes["kind"])
        elem, _ = type_info(op.result.type)
        cmp = self._slot(operand_groups(op)[-1][0]) if kind == "cas" else None

        def step(env):
            view, mask = env[v], (env[m] if m is not None else None)
            flat = _lane_offsets(env, span, f"atomic_{kind} on", view, [env[s] for s in idx], mask)
            # Every program of the chunk performs the atomic, even when its operands are the same for all.
            programs = max(env[s].shape[0] for s in PID)
            value = env[val]
            shape = _broadcast(flat.shape, value.shape, (programs,) + (1,) * (flat.dim() - 1))
            active = mask.expand(shape) if mask is not None else torch.ones(shape, dtype=torch.bool)
            value = value.expand(shape)
            if kind in ("max", "min") and value.is_floating_point():
                nan = torch.isnan(value) & active
                if nan.any():
                    _fail(env, span, nan, lambda w: f"atomic_{kind} of NaN on '{view.name}' is undefined"
                                                    f"{_tile_pos(w)}",
                          ["GPUs order floats for atomic max/min by their bits, where NaN has no place"])
            old = torch.zeros(shape, dtype=value.dtype)  # masked-off lanes return 0
            # Boolean indexing keeps row-major order: lanes in program order, then in tile order.
            compare = env[cmp].expand(shape)[active] if cmp is not None else None
            lanes, values = flat.expand(shape)[active], value[active]
            order = _atomic_order(lanes.numel())
            if order is None:
                old[active] = _atomic(view.storage, lanes, values, kind, elem, compare)
            else:  # TLE_ATOMIC_ORDER=shuffle: the lanes take effect in a random order, as on a GPU they may
                seen = _atomic(view.storage, lanes[order], values[order], kind, elem,
                               compare[order] if compare is not None else None)
                old[active] = torch.empty_like(seen).index_copy_(0, order, seen)
            env[out] = old
        return step

    # ---- running ---------------------------------------------------------------------------------------------------
    def _arg(self, i: int, value):
        t, name = self.arg_types[i], self.arg_names[i]
        if _ptr_elem(t) is not None:
            return value  # checked by make_view, which knows the dims and strides
        dt = TORCH_DTYPES.get(t)
        if dt is None:
            raise TypeError(f"kernel {self.name}: argument {i} ({name}) has a type the interpreter cannot pass: {t}")
        if t in FLOATS:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise TypeError(f"kernel {self.name}: argument {i} ({name}) must be a number, got {value!r}")
            if overflows(float(value), MLIR_F8.get(t, t)):
                raise OverflowError(f"kernel {self.name}: argument {i} ({name}) = {value!r} does not fit {t}")
            return torch.tensor([float(value)], dtype=dt)
        if t == "i1":
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"kernel {self.name}: argument {i} ({name}) must be a bool, got {value!r}")
            return torch.tensor([bool(value)])
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TypeError(f"kernel {self.name}: argument {i} ({name}) must be an int, got {value!r}")
        value = int(value)
        bits = INT_BITS[t]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise OverflowError(f"kernel {self.name}: argument {i} ({name}) = {value} does not fit {t}")
        return torch.tensor([value], dtype=dt)

    def run(self, grid, args) -> None:
        """Run every program of `grid` (1 to 3 sizes) with `args` in ABI order."""
        gx, gy, gz = (tuple(int(g) for g in grid) + (1, 1))[:3]
        if len(args) != len(self.arg_slots):
            raise TypeError(f"kernel {self.name} takes {len(self.arg_slots)} arguments "
                            f"({', '.join(self.arg_names)}), got {len(args)}")
        total = gx * gy * gz
        if total == 0:
            return
        launch = _Launch((gx, gy, gz))
        _restart_atomic_order()
        env: Env = [None] * self._nslots
        env[LAUNCH] = launch
        for s, n in zip(NUM_PROGRAMS, (gx, gy, gz)):
            env[s] = torch.tensor([n], dtype=torch.int32)
        zero = torch.zeros(1, dtype=torch.int32)
        env[PID[0]] = env[PID[1]] = env[PID[2]] = zero  # for messages from the prologue
        for i, (s, a) in enumerate(zip(self.arg_slots, args)):
            env[s] = self._arg(i, a)
        if self.stored_args:
            def storages(which):
                return {args[i].untyped_storage().data_ptr() for i in which if isinstance(args[i], torch.Tensor)}
            launch.reads.tracked = frozenset(storages(self.read_args) & storages(self.stored_args))
        for f in self.prologue:
            f(env)
        # Tiles of a few thousand elements never gain from torch's threads; waking them costs more than the op
        # (milliseconds per op on a busy 2-core machine). Big lockstep chunks keep them.
        threads = torch.get_num_threads()
        small = self.max_tile * min(total, self.programs_per_chunk) < _THREADED_ELEMENTS
        if small and threads > 1:
            torch.set_num_threads(1)
        try:
            self._run_programs(env, launch, zero)
        finally:
            launch.reads.release()
            if small and threads > 1:
                torch.set_num_threads(threads)
        if total > 1 and launch.scatters:
            _check_scatters_across_programs(launch)

    def _run_programs(self, env: Env, launch: _Launch, zero: torch.Tensor) -> None:
        gx, gy, gz = launch.grid
        total = gx * gy * gz
        body = self.body
        if self.batched:
            linear = torch.arange(total, dtype=torch.int64)
            for start in range(0, total, self.programs_per_chunk):
                lin = linear[start:start + self.programs_per_chunk]
                launch.first, launch.end = start, start + len(lin)
                e = env.copy()
                # An axis of size 1 stays a size-1 (uniform) value, so that it does not widen what it touches.
                ids = (lin % gx, lin // gx % gy, lin // (gx * gy))
                for s, i, n in zip(PID, ids, (gx, gy, gz)):
                    e[s] = zero if n == 1 else i.to(torch.int32)
                for f in body:
                    f(e)
                launch.stores.settle()
        else:
            xs, ys, zs = (torch.arange(n, dtype=torch.int32).split(1) for n in (gx, gy, gz))
            for z in zs:
                for y in ys:
                    for x in xs:
                        e = env.copy()
                        e[PID[0]], e[PID[1]], e[PID[2]] = x, y, z
                        launch.first = int(x) + gx * (int(y) + gy * int(z))
                        launch.end = launch.first + 1
                        for f in body:
                            f(e)
                        launch.stores.settle()


def _find_kernel(module):
    kernels = [op.operation for op in module.body.operations
               if op.operation.name == "func.func" and "tle.kernel" in op.operation.attributes]
    if len(kernels) != 1:
        raise ValueError(f"expected one func.func with tle.kernel in the module, found {len(kernels)}")
    return kernels[0]


def _arg_names(func, n: int) -> list[str]:
    try:
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        return [_str_attr(ir.DictAttr(attrs[i])["tle.name"]) for i in range(n)]
    except Exception:  # noqa: BLE001 - names only make messages nicer
        return [f"arg{i}" for i in range(n)]


# ---- memory access --------------------------------------------------------------------------------------------------
def _writer(span) -> str:
    """What the race messages call the op at span that writes: a store or a scatter (one message serves both)."""
    return call_at(span, ("scatter",), "store")


def _reader(span) -> str:
    return call_at(span, ("gather",), "load")


def _baddbmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c + a @ b for [P, M, K] @ [P, K, N] tiles, or [P, B, M, K] @ [P, B, K, N] (a batched dot), where P, the
    programs' axis, may be 1 in any of them: through one baddbmm over the programs (and batches) flattened."""
    lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a, b = (x.expand(*lead, *x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (a, b))
    c = c.expand(*lead, *c.shape[-2:]).reshape(-1, *c.shape[-2:])
    out = torch.baddbmm(c, a, b)
    return out.reshape(*lead, *out.shape[-2:])


def _axis_aranges(tile: tuple[int, ...]) -> list[torch.Tensor]:
    """For each axis a, arange(tile[a]) shaped to broadcast along that axis of a [program, *tile] tensor."""
    rank = len(tile)
    return [torch.arange(t, dtype=torch.int64).reshape([1] + [t if i == a else 1 for i in range(rank)])
            for a, t in enumerate(tile)]


# Loads and stores take one of three paths: one tile for all programs (a strided window of the storage); tiles
# that move by a constant stride from program to program (one strided window with a program axis per run of such
# programs, the few partly outside the view one by one); anything else through index tensors.
_MAX_WINDOWS = 32


def _load(view: View, starts: list[torch.Tensor], tile, pad, aranges) -> torch.Tensor:
    if all(s.shape[0] == 1 for s in starts):
        return _load_strided(view, [int(s) * t for s, t in zip(starts, tile)], tile, pad)
    plan = _window_plan(view, starts, tile, store=False)
    if plan is not None:
        runs, partial = plan
        out = torch.empty((max(s.shape[0] for s in starts), *tile), dtype=view.dtype)
        for first, end, step, offset in runs:
            out[first:end] = torch.as_strided(view.storage, (end - first, *tile), (step, *view.strides), offset)
        for p, origin in partial:
            out[p] = _load_strided(view, origin, tile, pad)[0]
        return out
    flat, valid = _tile_offsets(view, starts, tile, aranges)
    if valid is None:
        return _take(view.storage, flat)
    got = _take(view.storage, torch.where(valid, flat, 0)) if view.storage.numel() else \
        torch.zeros(flat.shape, dtype=view.dtype)
    return torch.where(valid, got, torch.tensor(pad, dtype=view.dtype))


def _padded_lanes(view: View, starts: list[torch.Tensor], tile, aranges) -> torch.Tensor | None:
    """The lanes of a load's tiles outside the view, which it pads, as a bool tensor that broadcasts to the tiles
    ([programs or 1, *tile], size 1 along the axes no lane of which is outside); None when there are none."""
    outside = None
    for a in range(len(tile)):
        out = _outside(view, a, _first_lanes(starts, tile, a), tile, aranges)
        if out is not None:
            outside = out if outside is None else outside | out
    return outside


def _first_lanes(starts: list[torch.Tensor], tile, axis: int) -> torch.Tensor:
    """Per program, the element at which its tile starts along `axis`, as [programs, 1, ...] (rank + 1 dims)."""
    return starts[axis].to(torch.int64).reshape([-1] + [1] * len(tile)) * tile[axis]


def _outside(view: View, axis: int, first: torch.Tensor, tile, aranges) -> torch.Tensor | None:
    """Which lanes along `axis` of the tiles starting at `first` (_first_lanes) fall outside the view, as a bool
    tensor that broadcasts to the tiles; None when none does (the common case, decided without the lanes)."""
    if int(first.min()) >= 0 and int(first.max()) + tile[axis] <= view.sizes[axis]:
        return None
    pos = first + aranges[axis]
    return (pos < 0) | (pos >= view.sizes[axis])


def _note_tile_read(reads: _ReadClaims, span, view: View, starts: list[torch.Tensor], tile, aranges) -> None:
    """Tell `reads` which elements a load's programs read: through the windows _load reads through where they
    do not overlap themselves, else lane by lane."""
    if all(s.shape[0] == 1 for s in starts):
        window = _clipped_window(view, [int(s) * t for s, t in zip(starts, tile)], tile)
        if window is not None and _non_overlapping(window.shape, window.strides):
            reads.read(span, view, window, *reads.every_running())
            return
        if window is None:
            return
    else:
        plan = _window_plan(view, starts, tile, store=True)  # store=True: windows that do not overlap themselves
        if plan is not None:
            runs, partial = plan
            for first, end, step, offset in runs:
                ids = reads.rows(end - first, len(tile)) + first
                reads.read(span, view, _Elements(offset, (end - first, *tile), (step, *view.strides)), ids, ids)
            for p, origin in partial:
                window = _clipped_window(view, origin, tile)
                if window is not None:
                    reads.read(span, view, window, reads.launch.first + p, reads.launch.first + p)
            return
    reads.read(span, view, *reads.lanes(*_tile_offsets(view, starts, tile, aranges)))


def _clipped_window(view: View, start: list[int], tile) -> _Elements | None:
    """The part of the tile at element `start` inside the view, as a window (None: nothing is inside)."""
    clipped = _clipped(view, start, tile)
    return None if clipped is None else _Elements(clipped[1], clipped[2], view.strides)


def _store(claims: _StoreClaims, span, view: View, starts: list[torch.Tensor], tile, value: torch.Tensor,
           aranges) -> None:
    """Store a tile per program (value [programs or 1, *tile]), each element through claims (races)."""
    if all(s.shape[0] == 1 for s in starts) and _store_strided(
            claims, span, view, [int(s) * t for s, t in zip(starts, tile)], tile, value, None):
        return
    plan = _window_plan(view, starts, tile, store=True)
    if plan is not None:
        runs, partial = plan
        for first, end, step, offset in runs:
            claims.window(span, view, offset, (end - first, *tile), (step, *view.strides),
                          value[first:end] if value.shape[0] > 1 else value,
                          claims.launch.first + torch.arange(first, end))
        for p, origin in partial:
            _store_strided(claims, span, view, origin, tile, value[p:p + 1] if value.shape[0] > 1 else value,
                           torch.tensor([claims.launch.first + p]))
        return
    flat, valid = _tile_offsets(view, starts, tile, aranges)
    # Programs at distinct tile indices store disjoint tiles where the view's strides do not overlap.
    disjoint = _non_overlapping(list(view.sizes), view.strides) and \
        torch.stack([s.expand(flat.shape[0]) for s in starts], 1).unique(dim=0).shape[0] == flat.shape[0]
    claims.lanes(span, view, flat, value, valid, disjoint)


def _window_plan(view: View, starts: list[torch.Tensor], tile, store: bool):
    """Split the programs into runs whose tiles lie inside the view and whose storage offsets step by a constant
    (one strided window each), and the programs whose tile is partly outside: ([(first, end, step, offset)],
    [(program, origin)]). None when that takes too many windows, or a stride is negative, or (for a store) a
    window would overlap itself."""
    if min(view.strides) < 0 or (store and not _non_overlapping(list(tile), view.strides)):
        return None
    n = max(s.shape[0] for s in starts)
    origins = torch.stack([s.to(torch.int64).expand(n) * t for s, t in zip(starts, tile)])  # [rank, programs]
    sizes = torch.tensor(view.sizes, dtype=torch.int64).unsqueeze(1)
    extent = torch.tensor(tile, dtype=torch.int64).unsqueeze(1)
    inside = ((origins >= 0) & (origins + extent <= sizes)).all(0)
    offset = view.base + (origins * torch.tensor(view.strides, dtype=torch.int64).unsqueeze(1)).sum(0)
    step = offset[1:] - offset[:-1]
    # A run breaks where "inside" changes, or where the step changes (one program too early: still valid runs).
    breaks = torch.zeros(n, dtype=torch.bool)
    breaks[0] = True
    breaks[1:] |= inside[1:] != inside[:-1]
    breaks[2:] |= step[1:] != step[:-1]
    firsts = breaks.nonzero().flatten().tolist() + [n]
    if len(firsts) > _MAX_WINDOWS + 1 or int((~inside).sum()) > _MAX_WINDOWS:
        return None
    runs, partial = [], []
    for first, end in zip(firsts[:-1], firsts[1:]):
        if not bool(inside[first]):
            partial.extend((p, origins[:, p].tolist()) for p in range(first, end))
            continue
        stride = int(step[first]) if end - first > 1 else 0
        if stride < 0 or (store and not _non_overlapping([end - first, *tile], [stride, *view.strides])):
            return None
        runs.append((first, end, stride, int(offset[first])))
    return runs, partial


def _tile_offsets(view: View, starts: list[torch.Tensor], tile, aranges):
    """Flat storage offsets of a tile whose tile index differs per program, and the in-view mask (None when
    every element is inside the view)."""
    flat, valid = view.base, None
    for a in range(len(tile)):
        first = _first_lanes(starts, tile, a)
        flat = flat + (first + aranges[a]) * view.strides[a]
        outside = _outside(view, a, first, tile, aranges)
        if outside is not None:
            valid = ~outside if valid is None else valid & ~outside
    shape = _broadcast(flat.shape, valid.shape if valid is not None else (1,))
    flat = flat.expand(shape)
    if valid is not None:
        valid = valid.expand(shape)
    return flat, valid


def _clip(view: View, start: list[int], tile):
    """Per axis, the part [lo, hi) of the tile that is inside the view; None when nothing is."""
    parts = []
    for s, t, size in zip(start, tile, view.sizes):
        lo, hi = max(0, -s), min(t, size - s)
        if hi <= lo:
            return None
        parts.append((lo, hi))
    return parts


def _clipped(view: View, start: list[int], tile):
    """(per axis [lo, hi), storage offset, sizes) of the part of the tile at element `start` inside the view; None
    when nothing is."""
    parts = _clip(view, start, tile)
    if parts is None:
        return None
    offset = view.base + sum((s + lo) * st for s, (lo, _), st in zip(start, parts, view.strides))
    return parts, offset, [hi - lo for lo, hi in parts]


def _load_strided(view: View, start: list[int], tile, pad) -> torch.Tensor:
    """One tile for all programs: read the in-view part as a strided window (no index tensors)."""
    clipped = _clipped(view, start, tile)
    if clipped is None:
        return torch.full((1, *tile), pad, dtype=view.dtype)
    parts, offset, sizes = clipped
    if min(view.strides) < 0:  # as_strided takes no negative strides
        window = view.storage[offset + sum(torch.arange(n).reshape([n if i == a else 1 for i in range(len(sizes))])
                                           * st for a, (n, st) in enumerate(zip(sizes, view.strides)))]
    else:
        window = torch.as_strided(view.storage, sizes, view.strides, offset)
    if sizes == list(tile):
        return window.clone().unsqueeze(0)  # a copy: later stores must not change a loaded tile
    out = torch.full(tuple(tile), pad, dtype=view.dtype)
    out[tuple(slice(lo, hi) for lo, hi in parts)] = window
    return out.unsqueeze(0)


def _store_strided(claims: _StoreClaims, span, view: View, start: list[int], tile, value: torch.Tensor,
                   programs) -> bool:
    """Store one tile through a strided window: every running program's (programs None; value one row each) or
    one program's (programs: its linear id, [1]). False when the view's strides make that unsafe (negative, or
    axes that overlap in memory), and the caller goes through index tensors."""
    clipped = _clipped(view, start, tile)
    if clipped is None:
        return True
    parts, offset, sizes = clipped
    if not _non_overlapping(sizes, view.strides):
        return False
    part = value[(slice(None), *(slice(lo, hi) for lo, hi in parts))]
    if programs is None:
        claims.window(span, view, offset, sizes, view.strides, part)
    else:
        claims.window(span, view, offset, (1, *sizes), (0, *view.strides), part, programs)
    return True


def _non_overlapping(sizes, strides) -> bool:
    if any(st < 0 for st in strides):
        return False
    axes = sorted((st, n) for n, st in zip(sizes, strides) if n > 1)
    extent = 1
    for st, n in axes:
        if st < extent:
            return False
        extent = st * n
    return True


def _lane_offsets(env, span, what: str, view: View, indices: list[torch.Tensor], mask) -> torch.Tensor:
    """Flat storage offsets of gather/scatter/atomic lanes, after checking every active index is in bounds."""
    flat = view.base
    for axis, (i, size, stride) in enumerate(zip(indices, view.sizes, view.strides)):
        bad = (i < 0) | (i >= size)
        if mask is not None:
            bad = bad & mask
        if bad.any():
            _fail(env, span, bad, lambda w: f"{what} '{view.name}' out of bounds: index {_at(i, w)} on axis "
                                            f"{axis} is outside [0, {size}){_tile_pos(w)}",
                  ["a mask= covering this element would skip it"])
        flat = flat + i.to(torch.int64) * stride
    if mask is not None:
        flat = flat.expand(_broadcast(flat.shape, mask.shape))
    return flat


def _lane_programs(env, shape) -> torch.Tensor:
    """The linear program id of every lane of a [programs, *tile] shape."""
    launch = env[LAUNCH]
    gx, gy, _ = launch.grid
    x, y, z = (env[s].to(torch.int64) for s in PID)
    lin = x + gx * (y + gy * z)
    if shape[0] == 1:  # the same lanes for every program of the chunk: executed once, logged for the first
        lin = lin[:1]
    return lin.reshape([-1] + [1] * (len(shape) - 1)).expand(shape)


def _check_scatter_in_program(env, span, view, flat, bits, value, program, lanes):
    """Two active lanes of one program writing different values to one element: which lands is undefined."""
    if flat.numel() < 2:
        return
    order = torch.argsort(flat, stable=True)
    order = order[torch.argsort(program[order], stable=True)]  # by program, then address
    f, b, p = flat[order], bits[order], program[order]
    clash = (f[1:] == f[:-1]) & (p[1:] == p[:-1]) & (b[1:] != b[:-1])
    if clash.any():
        k = int(clash.nonzero()[0])
        i, j = int(order[k]), int(order[k + 1])
        raise TleError(span, f"scatter to '{view.name}' writes {value[i].item()} and {value[j].item()} to element "
                             f"{lanes[i].tolist()} in program {env[LAUNCH].program(int(p[k]))}: which one lands is "
                             f"undefined", ["make the indices unique, or mask all but one lane per element"])


def _check_scatters_across_programs(launch: _Launch):
    """Programs whose last writes to one element differ: the result depends on which program runs last."""
    spans, names, addr, bits, values, programs, lanes, ops = [], [], [], [], [], [], [], []
    for k, (span, name, a, b, v, p, lane) in enumerate(launch.scatters):
        spans.append(span)
        names.append(name)
        addr.append(a)
        bits.append(b)
        values.append(v)
        programs.append(p)
        lanes.append(lane)
        ops.append(torch.full(a.shape, k, dtype=torch.int64))
    addr, bits, values, programs, ops = (torch.cat(x) for x in (addr, bits, values, programs, ops))
    if addr.numel() < 2:
        return
    lane_index = torch.cat([torch.arange(x.shape[0]) for x in lanes])
    # Writes are logged in execution order, so a stable sort by (address, program) keeps each program's writes to
    # an element in order and its last write last.
    order = torch.argsort(programs, stable=True)
    order = order[torch.argsort(addr[order], stable=True)]
    a, p = addr[order], programs[order]
    last = torch.ones_like(a, dtype=torch.bool)
    last[:-1] = (a[1:] != a[:-1]) | (p[1:] != p[:-1])
    order = order[last]
    a, b = addr[order], bits[order]
    clash = (a[1:] == a[:-1]) & (b[1:] != b[:-1])
    if not clash.any():
        return
    k = int(clash.nonzero()[0])
    i, j = int(order[k]), int(order[k + 1])
    op_i, op_j = int(ops[i]), int(ops[j])
    element = lanes[op_j][int(lane_index[j])].tolist()
    notes = [] if op_i == op_j else [Note(f"program {launch.program(int(programs[i]))} wrote there", spans[op_i])]
    raise TleError(spans[op_j], f"scatter to '{names[op_j]}': programs {launch.program(int(programs[i]))} and "
                                f"{launch.program(int(programs[j]))} write {values[i].item()} and "
                                f"{values[j].item()} to element {element}; the result depends on which runs last",
                   notes)


_ATOMIC_COMBINE = {"add": torch.add, "max": torch.maximum, "min": torch.minimum, "and": torch.bitwise_and,
                   "or": torch.bitwise_or, "xor": torch.bitwise_xor}


# TLE_ATOMIC_ORDER=shuffle: its value -> the generator of the lanes' random order (one per process for `shuffle`,
# so that each launch takes another; `shuffle:SEED` starts each launch from SEED, so that a launch repeats)
_ATOMIC_ORDER: dict = {}


def _atomic_order(n: int) -> torch.Tensor | None:
    """A random permutation of an atomic's n lanes under TLE_ATOMIC_ORDER=shuffle (tle/debug.py), else None (lanes
    in program order, then tile order). Programs run one at a time (their control flow reads an atomic's result)
    keep the order they run in; the lanes of each of their atomics are shuffled."""
    key = os.environ.get("TLE_ATOMIC_ORDER", "")
    if n < 2 or not key.startswith("shuffle"):
        return None
    if key not in _ATOMIC_ORDER:
        _ATOMIC_ORDER[key] = torch.Generator().manual_seed(debug.atomic_order_seed())
    return torch.randperm(n, generator=_ATOMIC_ORDER[key])


def _restart_atomic_order() -> None:
    """At a launch: under TLE_ATOMIC_ORDER=shuffle:SEED the order starts from SEED again, so that a launch repeats."""
    key = os.environ.get("TLE_ATOMIC_ORDER", "")
    if ":" in key:
        _ATOMIC_ORDER.pop(key, None)


def _atomic(storage: torch.Tensor, flat: torch.Tensor, value: torch.Tensor, kind: str, elem: str,
            compare: torch.Tensor | None = None) -> torch.Tensor:
    """Apply atomic updates lane by lane in order (program-major, then row-major in the tile); return the old
    values each lane saw. Float adds on one element are summed in f64 and rounded once per lane (the exact
    order-dependent rounding of the GPU is not reproduced)."""
    if flat.numel() == 0:
        return value[:0]
    order, a, first = _by_element(flat)
    if kind in ("xchg", "cas"):
        return _atomic_in_rounds(storage, flat, value, compare, order, a, first)
    combine = _ATOMIC_COMBINE[kind]
    v = value[order]
    if bool(first.all()):  # every lane its own element
        old = storage[flat]
        storage[flat] = _in_f32(combine, elem)(old, value)
        return old
    init = storage[a]
    segment = torch.cumsum(first, 0) - 1
    last = torch.ones_like(first)
    last[:-1] = first[1:]
    if kind == "add":
        wide = torch.float64 if value.is_floating_point() else torch.int64
        w = v.to(wide)
        inclusive = torch.cumsum(w, 0)
        before = inclusive - w
        exclusive = before - before[first][segment]  # the sum of the earlier lanes of the same element
        old_sorted = (init.to(wide) + exclusive).to(value.dtype)
        final = (init.to(wide) + exclusive + w)[last].to(value.dtype)
    else:
        # Segmented inclusive max/min scan by doubling (exact: max and min do not round).
        x, d, n = v, 1, v.shape[0]
        while d < n:
            same = segment[d:] == segment[:-d]
            x = torch.cat([x[:d], torch.where(same, combine(x[d:], x[:-d]), x[d:])])
            d *= 2
        previous = torch.cat([x[:1], x[:-1]])
        old_sorted = torch.where(first, init, combine(init, previous))
        final = combine(init, x)[last]
    storage[a[last]] = final
    old = torch.empty_like(old_sorted)
    old[order] = old_sorted
    return old


def _by_element(flat: torch.Tensor):
    """The lanes sorted by element, in lane order within an element: (order, the sorted elements, whether each
    sorted lane is its element's first)."""
    order = torch.argsort(flat, stable=True)
    a = flat[order]
    first = torch.ones_like(a, dtype=torch.bool)
    first[1:] = a[1:] != a[:-1]
    return order, a, first


def _atomic_in_rounds(storage: torch.Tensor, flat: torch.Tensor, value: torch.Tensor,
                      compare: torch.Tensor | None, order, a, first) -> torch.Tensor:
    """Exchange (compare None) or compare-and-swap, lane by lane in order (order, a, first: _by_element). An
    exchange's lane sees the value of the element's previous lane (the first sees memory) and the last one's value
    stays. Compare-and-swap goes in rounds: round r applies the r-th lane of every element at once (no two lanes of
    a round share an element)."""
    if compare is None:
        v = value[order]
        old_sorted = torch.where(first, storage[a], torch.cat([v[:1], v[:-1]]))
        last = torch.ones_like(first)
        last[:-1] = first[1:]
        storage[a[last]] = v[last]
        old = torch.empty_like(old_sorted)
        old[order] = old_sorted
        return old
    start = torch.cummax(torch.where(first, torch.arange(a.numel()), 0), 0).values
    rank = torch.arange(a.numel()) - start  # each sorted lane's place among its element's lanes
    by_round = order[torch.argsort(rank, stable=True)]  # lanes of round 0, then of round 1, ...
    counts = torch.bincount(rank).tolist()
    old = torch.empty_like(value)
    done = 0
    for n in counts:
        lanes = by_round[done:done + n]
        done += n
        at = flat[lanes]
        seen = storage[at]
        old[lanes] = seen
        storage[at] = torch.where(seen == compare[lanes], value[lanes], seen)
    return old


# ---- entry points ---------------------------------------------------------------------------------------------------
def compile_kernel(module: "ir.Module") -> CompiledKernel:
    """Compile the module's tle kernel once; CompiledKernel.run(grid, args) runs it."""
    return CompiledKernel(module)


_compiled: dict[int, tuple[object, CompiledKernel]] = {}
_MAX_CACHED = 64


def interpret(module: "ir.Module", grid: tuple[int, int, int], args: list) -> None:
    """Run the module's tle kernel for every program id in `grid`, with `args` in ABI order: a CPU torch tensor
    for each !tle.ptr argument (writes land in it), Python ints for dims, strides and int scalars, Python floats
    (or ints) for float scalars. Raises TleError at the .tle location of an op that goes wrong."""
    key = id(module)
    hit = _compiled.get(key)
    if hit is None or hit[0] is not module:
        if len(_compiled) >= _MAX_CACHED:
            _compiled.pop(next(iter(_compiled)))
        hit = _compiled[key] = (module, CompiledKernel(module))  # holds the module, so its id stays unique
    hit[1].run(grid, args)
