"""`sort` and `topk` along a tile's last axis: bitonic networks, expanded here into typed tile ops.

A bitonic sort of n = 2**m elements is m merge stages; merge stage s is s compare-and-swap steps, and a step
pairs each element with the one 2**j places away (j from s - 1 down to 0). Tiles have static power-of-two shapes,
so every step is the same few whole-tile ops with no data-dependent control flow.

The network sorts integer keys. A float's key is its bits with the sign-magnitude order turned into two's
complement order (negative values have their other bits flipped), NaN first made positive: every key is distinct
unless the bits are, keys order as the values do, -0.0 before 0.0 and NaN after +inf (torch.sort's order), and
the bits come back exactly at the end (but for a NaN's sign). So a step is one integer compare, and equal keys are
equal values: the network only ever moves bits, as a permutation.

- View the keys as [outer, 2, 2**j] (outer covers the other axes and the higher bits of the position): a pair is
  the two entries of the middle axis, and each key's partner is the pair's sum minus itself (wrap-around keeps
  it exact; i8/i16 keys sum in i32).
- An element keeps the smaller key of its pair if it is the pair's left one, the larger if right, reversed in the
  runs this stage sorts descending: "left" is the middle index, "descending" a bit of the outer index.

`topk(x, k)` is Triton's bitonic top-k (Shanbhag et al., "Efficient Top-K Query Processing on Massively Parallel
Hardware", SIGMOD 2018): sort runs of k, then repeatedly keep the larger key of each pair of neighbouring runs (an
ascending run against a descending one: the k largest of the 2k, as a bitonic sequence) and merge them again;
log2(n / k) halvings leave the k largest, descending.

Everything is built with the kernel checker `ck` (its `binary`, `coerce`, `convert` and `temp`), so constants fold
and the later stages see ordinary reshape, reduce, arithmetic and select ops.

The interpreter's padded-lanes check (runtime/padded_lanes.py, `_find_networks`) recognises a network by the shape of
its steps, and computes where the padded elements end up from the network's input: each step reads its keys through
a reshape into pairs, has one reduction marked NetworkSpan, and ends in a reshape back, after where(take, partner,
pairs) (_compare_and_swap: the select's last operand is the pairs) or right after the reduction (_halve); each step's
keys are the previous step's output. A step built otherwise is not recognised, and the check then takes the network's
result as holding no padding (tests/interp/test_padded_lanes.py has tests that fail if so).
"""
from __future__ import annotations

import math

from . import typed as T
from .diagnostics import NetworkSpan
from .types import BITS, Scalar, Tile, is_float


def sort(ck, x: T.Expr, descending: bool, span) -> T.Expr:
    """x (a tile) sorted along its last axis."""
    key = _to_key(ck, x, span)
    n_dims = _log2(x.type.shape[-1])
    for stage in range(1, n_dims + 1):
        key = _merge(ck, key, stage, None if stage < n_dims else descending, span)
    return _from_key(ck, key, x.type.dtype, span)


def topk(ck, x: T.Expr, k: int, span) -> T.Expr:
    """The k largest elements along x's last axis, in descending order: a tile [..., k]."""
    key = _to_key(ck, x, span)
    n_dims, k_dims = _log2(x.type.shape[-1]), _log2(k)
    for stage in range(1, k_dims + 1):
        key = _merge(ck, key, stage, None if stage < n_dims else True, span)
    for i in range(k_dims + 1, n_dims + 1):
        key = _halve(ck, key, k, span)
        key = _merge(ck, key, k_dims, None if i < n_dims else True, span)
    return _from_key(ck, key, x.type.dtype, span)


def argsort(ck, x: T.Expr, descending: bool, span) -> T.Expr:
    """The positions along the last axis that sort x (i32, x's shape); equal values keep their order (stable)."""
    return positions(ck, sort_positions(ck, x, descending, span), x.type.shape[-1] if descending else None, span)


def sort_positions(ck, x: T.Expr, descending: bool, span) -> T.Expr:
    """The network of argsort(x): _with_position's i64 keys, sorted (a let). `positions` reads argsort's result out
    of it, `values` sort's (the checker shares one network between argsort(x) and a later sort(x))."""
    n = x.type.shape[-1]
    packed = _with_position(ck, x, descending, span)
    for stage in range(1, _log2(n) + 1):
        packed = _merge(ck, packed, stage, None if stage < _log2(n) else descending, span)
    return ck.temp("sort_packed", packed, span)


def top_positions(ck, x: T.Expr, k: int, span) -> T.Expr:
    """The network of argtopk(x, k): the k largest of _with_position's i64 keys (a let), descending. `positions`
    reads argtopk's result out of it, `values` topk's (the checker shares one network between the two)."""
    return ck.temp("topk_packed", topk(ck, _with_position(ck, x, True, span), k, span), span)


def values(ck, packed, dtype: str, span) -> T.Expr:
    """topk's values (of dtype) from top_positions' keys, or sort's from sort_positions': the value key is the high
    32 bits."""
    high = ck.binary(">>", packed, T.Const(span, Scalar("i64"), 32), span)
    key = ck.convert(high, dtype if not is_float(dtype) else f"i{BITS[dtype]}", span)
    return _from_key(ck, key, dtype, span)


def _with_position(ck, x, descending: bool, span):
    """i64 keys (value key << 32) | p that order as the values and then by p: p is the position, or n - 1 -
    position when descending (so that, reversed, equal values still come lower position first). For values of up
    to 32 bits (the checker says so)."""
    shape = x.type.shape
    n = shape[-1]
    p = ck.coerce(T.Op(span, Tile("i32", (n,)), "arange", [], {"start": 0, "end": n}), Tile("i32", shape))
    if descending:
        p = ck.binary("-", T.Const(span, Scalar("i32"), n - 1), p, span)
    high = ck.binary("<<", ck.convert(_to_key(ck, x, span), "i64", span), T.Const(span, Scalar("i64"), 32), span)
    return ck.binary("|", high, ck.convert(p, "i64", span), span)


def positions(ck, packed, n, span) -> T.Expr:
    """The positions (i32) back out of _with_position's keys, for argsort and argtopk: their low 32 bits (n - 1 -
    that where n, the row's length, is given: the keys were built descending)."""
    low = ck.convert(packed, "i32", span)
    return low if n is None else ck.binary("-", T.Const(span, Scalar("i32"), n - 1), low, span)


def _merge(ck, key, stage: int, descending, span):
    """One bitonic merge stage: runs of 2**stage along the last axis come out sorted, all ascending or all
    descending (descending = False / True), or alternating from ascending (None: the runs a later stage merges;
    run r is descending when r is odd, i.e. when bit `stage` of the position is set)."""
    for j in range(stage - 1, -1, -1):
        key = _compare_and_swap(ck, key, stage if descending is None else bool(descending), j, span)
    return key


def _compare_and_swap(ck, key, flip, j: int, span):
    """Every key against the one 2**j places away along the last axis: the left one of each pair keeps the smaller,
    the right one the larger, reversed where `flip` (a bool for all, or the position bit that says so).

    The step works on the view [outer, 2, 2**j] ([outer, 2] for j = 0), where a pair is the middle axis: its index
    says left or right, and a position bit above j is a bit of the outer index. Everything happens in that view,
    between one reshape in and one out, so the native path keeps one layout through the step."""
    key = ck.temp("sort_key", key, span)
    shape, dtype = key.type.shape, key.type.dtype
    outer = math.prod(shape) // (2 << j)
    inner = (1 << j,) if j else ()  # no trailing axis of 1: its reshape back would be ambiguous to the lowering
    view = Tile(dtype, (outer, 2) + inner)
    pairs = ck.temp("sort_pairs", T.Op(span, view, "reshape", [key]), span)
    wide = ck.accumulation_input(pairs, "sum")  # i8/i16 keys sum in i32
    total = T.Op(NetworkSpan.of(span), Tile(wide.type.dtype, (outer,) + inner), "reduce", [wide],
                 {"kind": "sum", "axis": 1})
    total = ck.coerce(T.Op(span, Tile(wide.type.dtype, (outer, 1) + inner), "reshape", [total]), wide.type)
    partner = ck.temp("sort_partner", ck.convert(ck.binary("-", total, wide, span), dtype, span), span)
    # take the partner where it orders on this element's side: left and smaller, or right and not smaller (reversed
    # where flip); equal keys are equal bits, so either choice is right for them
    smaller = ck.binary("<", partner, pairs, span)
    take = ck.binary("^", smaller, _axis_bit(ck, view.shape, 1, 0, span), span)
    if flip is True:
        take = T.Op(span, take.type, "not", [take])
    elif flip is not False:  # bit `flip` of the position is bit flip - j - 1 of the outer index
        take = ck.binary("^", take, _axis_bit(ck, view.shape, 0, flip - j - 1, span), span)
    swapped = T.Op(span, view, "where", [take, partner, pairs])
    return T.Op(span, key.type, "reshape", [swapped])


def _halve(ck, key, k: int, span):
    """[..., n] -> [..., n / 2]: the larger key of runs 2r and 2r + 1 of k elements, element by element."""
    key = ck.temp("topk_key", key, span)
    shape = key.type.shape
    outer = math.prod(shape) // (2 * k)
    inner = (k,) if k > 1 else ()
    pairs = T.Op(span, Tile(key.type.dtype, (outer, 2) + inner), "reshape", [key])
    larger = T.Op(NetworkSpan.of(span), Tile(key.type.dtype, (outer,) + inner), "reduce", [pairs],
                  {"kind": "max", "axis": 1})
    return T.Op(span, Tile(key.type.dtype, shape[:-1] + (shape[-1] // 2,)), "reshape", [larger])


def _axis_bit(ck, shape, axis: int, bit: int, span) -> T.Expr:
    """Bit `bit` of each element's index along `axis`, as a bool tile of `shape` (an arange along that axis,
    broadcast)."""
    n = shape[axis]
    lane = T.Op(span, Tile("i32", (n,)), "arange", [], {"start": 0, "end": n})
    one = T.Const(span, Scalar("i32"), 1)
    if bit:
        lane = ck.binary(">>", lane, T.Const(span, Scalar("i32"), bit), span)
    is_set = ck.binary("==", ck.binary("&", lane, one, span), one, span)
    along = tuple(n if a == axis else 1 for a in range(len(shape)))
    return ck.coerce(T.Op(span, Tile("i1", along), "reshape", [is_set]), Tile("i1", shape))


def _to_key(ck, x, span):
    """Integer keys that order as x's values: integers as they are; a float's bits, NaN made positive, with the
    magnitude bits flipped where the sign bit is set."""
    if not is_float(x.type.dtype):
        return x
    x = ck.temp("sort_value", x, span)
    bits = f"i{BITS[x.type.dtype]}"
    raw = ck.temp("sort_bits", T.Op(span, Tile(bits, x.type.shape), "bitcast", [x]), span)
    # NaN's sign bit cleared on the bits (abs of a 16-bit NaN goes through f32, and the interpreter's conversion back
    # to bf16 gives 0xFFFF, a negative NaN)
    magnitude = ck.binary("&", raw, T.Const(span, Scalar(bits), (1 << (BITS[x.type.dtype] - 1)) - 1), span)
    raw = ck.temp("sort_bits", T.Op(span, raw.type, "where", [ck.binary("!=", x, x, span), magnitude, raw]), span)
    return ck.binary("^", raw, _magnitude_mask(ck, raw, span), span)


def _from_key(ck, key, dtype, span):
    """The inverse of _to_key (flipping the magnitude bits again where the sign bit is set)."""
    if not is_float(dtype):
        return key
    key = ck.temp("sort_key", key, span)
    raw = ck.binary("^", key, _magnitude_mask(ck, key, span), span)
    return T.Op(span, Tile(dtype, key.type.shape), "bitcast", [raw])


def _magnitude_mask(ck, raw, span):
    """All magnitude bits (0x7F..F) where raw's sign bit is set, else 0: (raw >> (bits - 1)) is -1 or 0."""
    width = BITS[raw.type.dtype]
    sign = ck.binary(">>", raw, T.Const(span, Scalar(raw.type.dtype), width - 1), span)
    return ck.binary("&", sign, T.Const(span, Scalar(raw.type.dtype), (1 << (width - 1)) - 1), span)


def _log2(n: int) -> int:
    return n.bit_length() - 1
