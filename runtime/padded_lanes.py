"""Padded lanes: the interpreter's check that a result does not depend on what a load put past a tensor's edge.

A tile load pads the lanes outside its tensor with `pad` (0 unless given). A kernel that reduces such a tile must
keep those lanes out of the result: pad a max with -inf, or mask the lanes with where(). Forgetting that is a
silent wrong value on the GPU as well (a max of negative values that comes out 0; a softmax whose sum counts
exp(0 - max) once per padded lane; a LayerNorm variance over x - mean in lanes that hold -mean; a histogram that
counts the padding in bin 0), and only for shapes that are not multiples of the tile.

The interpreter follows, per value, which lanes hold padding or values computed only from padding: a bool mask
kept in an env slot of its own beside the value's (None: no such lane). Loads set it; elementwise, shape and
select ops carry it; reductions, scans, dots and histograms check it: they run again with the padded lanes set to
the op's identity (0 for a sum, -inf for a max, ...), and where a result that is not itself all padding differs,
the kernel depends on its padding. A padded lane that holds the identity already (pad=-inf under a max, a where()
that put 0 there under a sum) changes nothing and passes.

Masks do not cross scf.for / scf.if (a loop-carried value has none) nor ops outside the rules below: a value whose
padding is not followed is taken as having none, so the check can miss a case but never invents one."""
from __future__ import annotations

import warnings
from typing import Callable

import torch

from tle.diagnostics import Note, TleError, TlePaddingWarning, render
from tle.dialects.mlir import ir, nested_ops, operand_groups
from tle.dialects.tle import NETWORK_STEP

# op name -> how its result's mask follows from its operands' masks
_SHAPE = ("tle.splat", "tle.broadcast", "tle.expand_dims", "tle.reshape", "tle.transpose", "tle.split")
_CHECKED = ("tle.reduce", "tle.scan", "tle.dot", "tle.histogram")
_OTHER = ("arith.select", "tle.join", "tle.tile_gather", "tle.gather")
_ARITH = ("arith.cmpf", "arith.cmpi", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
          "arith.extsi", "arith.extui", "arith.trunci", "arith.bitcast", "math.absi", "arith.divsi", "arith.remsi",
          "arith.shli", "arith.shrsi", "arith.shrui", "arith.mului_extended", "tle.inline_asm")

_MEMORY = ("tle.load", "tle.gather", "tle.atomic", "tle.undef")

_NOTE = ("the lanes of a load outside its tensor hold the load's pad (0 unless given), on the GPU as here: give the "
         "load a pad= that this op leaves unchanged (sum: 0, max: -inf, min: inf, product: 1), or set the lanes with "
         "where(inside, x, identity) before it")


class Origin:
    """Where a mask's padding came from: the load's span, its tensor's name and its pad value."""
    __slots__ = ("span", "name", "pad")

    def __init__(self, span, name: str, pad):
        self.span, self.name, self.pad = span, name, pad


class PaddedLanes:
    """Which values may hold padded lanes (a pass over the kernel's ops, in order), their mask slots, and the steps
    that carry and check the masks. `slot` is the interpreter's value -> env slot map; `elementwise` the names of
    the ops computed lane by lane from their operands; `program_of(env, b)` names the program of batch row b;
    `type_info(type)` gives (element type name, shape or None); `identity_of(kind, elem)` a reduction's
    identity."""

    def __init__(self, func, slot: Callable, elementwise: frozenset, program_of: Callable, type_info: Callable,
                 identity_of: Callable):
        self.slot, self.program_of = slot, program_of
        self.type_info, self.identity_of = type_info, identity_of
        self.warned: set = set()  # the spans of the ops warned about
        self.elementwise = elementwise | frozenset(_ARITH)
        self.masks: dict[int, int] = {}  # value slot -> its mask's slot
        # Values computed from the arguments and constants alone, never from memory (a where() that puts one in
        # padded lanes leaves them padding: a row of a ragged block that is all padding stays so)
        self.constant: set[int] = {self.slot(a) for a in func.regions[0].blocks[0].arguments}
        for op in nested_ops(func):
            ins = [self.slot(v) for v in op.operands]
            if op.name == "tle.load" or (self._follows(op) and op.name != "tle.histogram"
                                         and any(s in self.masks for s in ins)):
                for r in op.results:
                    self.masks[self.slot(r)] = self.slot(("padded lanes of", r))
            if not len(op.regions) and op.name not in _MEMORY and all(s in self.constant for s in ins):
                self.constant.update(self.slot(r) for r in op.results)

    def _follows(self, op) -> bool:
        name = op.name
        if name == "tle.reduce" and NETWORK_STEP in str(op.location):
            # A compare-and-swap step of a sort or topk network (tle/bitonic.py), or a swap of flip(): it moves
            # padded lanes between lanes by design (a pad that sorts last ends past the row), which a lane mask
            # cannot follow. Not checked, and its result is taken as holding no padding.
            return False
        return name in self.elementwise or name in _SHAPE or name in _CHECKED or name in _OTHER

    def mask_slot(self, value) -> int | None:
        return self.masks.get(self.slot(value))

    def wrap(self, op, span, step):
        """`step` with the op's result masks set after it (and its check made), for ops that read a value that may
        hold padded lanes; `step` itself otherwise."""
        name = op.name
        ins = [self.masks.get(self.slot(v)) for v in op.operands]
        if not any(m is not None for m in ins) or not self._follows(op):
            return step
        values = [self.slot(v) for v in op.operands]
        outs = [self.slot(r) for r in op.results]
        out_masks = [self.masks.get(s) for s in outs]
        if name in self.elementwise:
            def carried(env):
                step(env)
                m = _either(*[env[s] for s in ins if s is not None])
                for s in out_masks:
                    env[s] = m
            return carried
        if name in _SHAPE:
            return self._shaped(step, values[0], ins[0], outs, out_masks)
        if name == "arith.select":
            return self._select(step, values, ins, outs[0], out_masks[0])
        if name == "tle.join":
            return self._join(step, values, ins, outs[0], out_masks[0])
        if name == "tle.tile_gather":
            return self._tile_gather(step, values, ins, outs[0], out_masks[0])
        if name == "tle.gather":
            return self._gather(op, step, ins, out_masks[0])
        if name == "tle.histogram":
            return self._histogram(op, span, step, values, ins)
        if name == "tle.dot":
            return self._dot(span, step, values, ins, outs[0], out_masks[0])
        kind = ir.StringAttr(op.attributes["kind"]).value
        identity = self.identity_of(kind, self.type_info(op.operands[0].type)[0])
        axis = ir.IntegerAttr(op.attributes["axis"]).value + 1
        return self._reduction(span, step, name == "tle.scan", kind, axis, identity, values[0], ins[0], outs[0],
                               out_masks[0])

    # ---- carrying masks -----------------------------------------------------------------------------------------
    @staticmethod
    def _shadow(env, step, inputs: dict, outs: list):
        """Run step on other operand values (the masks) and return what it writes to outs, leaving env as it was."""
        saved = {s: env[s] for s in inputs}
        kept = [env[s] for s in outs]
        for s, v in inputs.items():
            env[s] = v
        step(env)
        got = [env[s] for s in outs]
        for s, v in saved.items():
            env[s] = v
        for s, v in zip(outs, kept):
            env[s] = v
        return got

    def _shaped(self, step, value, mask, outs, out_masks):
        """Reshapes, broadcasts, transposes, splits: the op itself moves the mask's lanes as it moves the value's
        (the mask expanded to the value's shape first: masks keep the size-1 axes they broadcast along, which makes
        carrying them through elementwise ops cheap)."""
        def carried(env):
            step(env)
            m = env[mask]
            got = [None] * len(outs) if m is None else \
                self._shadow(env, step, {value: m.mask.expand(env[value].shape)}, outs)
            for s, g in zip(out_masks, got):
                env[s] = None if g is None else Padded(g, m.origin)
        return carried

    def _select(self, step, values, masks, out, out_mask):
        """where(c, a, b): the lanes it takes from padded lanes; and where it puts a constant in place of a padded
        lane (where(inside, x, 0.0)), that lane is still padding (the rows of a block past the tensor's last row
        stay all padding, and a constant that is not the identity is caught)."""
        c, a, b = values
        a_constant, b_constant = a in self.constant, b in self.constant

        def carried(env):
            step(env)
            mc, ma, mb = (env[m] if m is not None else None for m in masks)
            if ma is None and mb is None:
                picked = None
            else:
                la, lb = _bits(ma), _bits(mb)
                if a_constant:
                    la = lb
                if b_constant:
                    lb = la
                got, = self._shadow(env, step, {a: la, b: lb}, [out])
                picked = Padded(got, (ma or mb).origin)
            if mc is not None:  # a condition computed from padding: padded wherever it is
                rank = env[out].dim()
                mc = Padded(mc.mask.reshape(*mc.mask.shape, *[1] * (rank - mc.mask.dim())), mc.origin)
            env[out_mask] = _either(picked, mc)
        return carried

    def _join(self, step, values, masks, out, out_mask):
        def carried(env):
            step(env)
            ma, mb = (env[m] if m is not None else None for m in masks)
            if ma is None and mb is None:
                env[out_mask] = None
                return
            got, = self._shadow(env, step, {values[0]: _bits(ma), values[1]: _bits(mb)}, [out])
            env[out_mask] = Padded(got, (ma or mb).origin)
        return carried

    def _tile_gather(self, step, values, masks, out, out_mask):
        """gather(x, idx) within a tile: the lanes it takes from x's padded lanes, and those of padded indices."""
        def carried(env):
            step(env)
            mx, mi = (env[m] if m is not None else None for m in masks)
            took = None
            if mx is not None:
                got, = self._shadow(env, step, {values[0]: mx.mask.expand(env[values[0]].shape)}, [out])
                took = Padded(got, mx.origin)
            env[out_mask] = _either(took, mi)
        return carried

    def _gather(self, op, step, masks, out_mask):
        """A gather from memory: lanes at padded indices (where its mask= lets them load)."""
        groups = operand_groups(op)
        n_idx = len(groups[1])
        idx_masks = masks[1:1 + n_idx]
        user_mask = self.slot(groups[2][0]) if groups[2] else None

        def carried(env):
            step(env)
            m = _either(*[env[s] for s in idx_masks if s is not None])
            if m is not None and user_mask is not None:
                loads = env[user_mask]  # a bool tile, or a scalar per program
                loads = loads.reshape(*loads.shape, *[1] * (m.mask.dim() - loads.dim()))
                m = Padded(m.mask & loads, m.origin)
            env[out_mask] = m
        return carried

    # ---- checks --------------------------------------------------------------------------------------------------
    def _reduction(self, span, step, scan: bool, kind: str, axis: int, identity, value, mask, out, out_mask):
        """reduce / scan: the result again with the padded lanes set to the identity; a difference in a result lane
        that is not all padding is an error. The result's lanes that are all padding are padded in turn."""
        what = ("cumulative " if scan else "") + kind

        def checked(env):
            step(env)
            m = env[mask]
            if m is None:
                env[out_mask] = None
                return
            x = env[value]
            lanes = m.mask.expand(torch.broadcast_shapes(m.mask.shape, x.shape))
            whole = lanes if scan else lanes.all(axis)
            moved = lanes & ~_same(x, torch.full((), identity, dtype=x.dtype))
            if bool(moved.any()):
                got = env[out]
                without, = self._shadow(env, step, {value: torch.where(lanes, identity, x)}, [out])
                bad = ~_same(got, without) & ~whole
                if bool(bad.any()):
                    self._fail(env, span, m.origin, bad,
                               # (a 1-D tile's axis goes unsaid: sum(t) of a 2-D t reduces its flattened 1-D)
                               lambda w, p: f"{what}{f' along axis {axis - 1}' if scan or x.dim() > 2 else ''} takes "
                                            f"in lanes past the edge of "
                                            f"'{m.origin.name}', which hold padding: in program {p} the result"
                                            f"{_pos(w)} is {_item(got, w)} with them and {_item(without, w)} "
                                            f"without")
            env[out_mask] = Padded(whole, m.origin)
        return checked

    def _dot(self, span, step, values, masks, out, out_mask):
        """dot(a, b, acc): products of padded lanes along K must be 0. Rows of a and columns of b that are all
        padding give result lanes that are padding."""
        a, b, c = values

        def checked(env):
            step(env)
            ma, mb, mc = (env[m] if m is not None else None for m in masks)
            if ma is None and mb is None and mc is None:
                env[out_mask] = None
                return
            xa, xb = env[a], env[b]
            la = ma.mask.expand(torch.broadcast_shapes(ma.mask.shape, xa.shape)) if ma is not None else None
            lb = mb.mask.expand(torch.broadcast_shapes(mb.mask.shape, xb.shape)) if mb is not None else None
            whole = None
            if la is not None:
                whole = la.all(-1).unsqueeze(-1)
            if lb is not None:
                cols = lb.all(-2).unsqueeze(-2)
                whole = cols if whole is None else whole | cols
            if mc is not None:
                whole = mc.mask if whole is None else whole | mc.mask
            moved = [lanes is not None and bool((lanes & (x != 0)).any()) for lanes, x in ((la, xa), (lb, xb))]
            if any(moved):
                got = env[out]
                zeroed = {s: torch.where(lanes, 0, x) for s, lanes, x, m in ((a, la, xa, moved[0]),
                                                                            (b, lb, xb, moved[1])) if m}
                without, = self._shadow(env, step, zeroed, [out])
                bad = ~_same(got, without) & ~whole if whole is not None else ~_same(got, without)
                if bool(bad.any()):
                    origin = (ma if moved[0] else mb).origin
                    self._fail(env, span, origin, bad,
                               lambda w, p: f"dot adds products of lanes past the edge of '{origin.name}', which "
                                            f"hold padding that is not 0: in program {p} the result{_pos(w)} is "
                                            f"{_item(got, w)} with them and {_item(without, w)} without")
            env[out_mask] = None if whole is None else Padded(whole, (ma or mb or mc).origin)
        return checked

    def _histogram(self, op, span, step, values, masks):
        """histogram(x, bins, mask=): it must not count padded lanes that fall in a bin."""
        bins = self.type_info(op.results[0].type)[1][0]
        user_mask = values[1] if len(values) > 1 else None

        def checked(env):
            step(env)
            m = env[masks[0]]
            if m is None:
                return
            x = env[values[0]]
            counted = m.mask & (x >= 0) & (x < bins)
            if user_mask is not None:
                counted = counted & env[user_mask]
            if bool(counted.any()):
                self._fail(env, span, m.origin, counted,
                           lambda w, p: f"histogram counts lanes past the edge of '{m.origin.name}', which hold "
                                        f"padding: in program {p} the lane{_pos(w)} holds {_item(x, w)}, one of "
                                        f"the {bins} bins",
                           ["pass mask= with the lanes inside the tensor"])
        return checked

    def _fail(self, env, span, origin: Origin, bad: torch.Tensor, describe, notes=()):
        """A TlePaddingWarning, once per op: the kernel is well defined (the GPU computes the same value), so it
        runs on; turn the warning into an error with warnings.simplefilter("error", tle.TlePaddingWarning)."""
        if span in self.warned:
            return
        where = tuple(bad.nonzero()[0].tolist())
        problem = TleError(span, describe(where, self.program_of(env, where[0])),
                           [Note(f"the load that pads '{origin.name}' with {_text(origin.pad)}", origin.span),
                            *notes, _NOTE])
        # Attributed to the kernel's line (Python shows that line under the warning), not to the interpreter's
        warnings.warn_explicit(render(problem, "warning"), TlePaddingWarning, span.file, span.line)
        self.warned.add(span)  # after: where the warning is an error, every launch raises it


class Padded:
    """A value's padded lanes (a bool tensor that broadcasts to it) and where the padding came from."""
    __slots__ = ("mask", "origin")

    def __init__(self, mask: torch.Tensor, origin: Origin):
        self.mask, self.origin = mask, origin


def _either(*masks):
    """The lanes padded in any of masks (None for none)."""
    masks = [m for m in masks if m is not None]
    if not masks:
        return None
    out = masks[0].mask
    for m in masks[1:]:
        out = out | m.mask
    return Padded(out, masks[0].origin)


def _bits(m):
    return m.mask if m is not None else torch.zeros((), dtype=torch.bool)


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    same = a == b
    if a.dtype.is_floating_point:
        same |= torch.isnan(a) & torch.isnan(b)
    return same


def _item(x: torch.Tensor, where: tuple[int, ...]):
    idx = tuple(0 if n == 1 else i for n, i in zip(x.shape, where[len(where) - x.dim():]))
    return _text(x[idx].item())


def _text(v) -> str:
    return f"{v:.9g}" if isinstance(v, float) else str(v)  # 9 digits: any f32 exactly


def _pos(where: tuple[int, ...]) -> str:
    return f" at tile element {list(where[1:])}" if len(where) > 1 else ""
