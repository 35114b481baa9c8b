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
the kernel depends on its padding. A reduce or scan with combine= (whose identity is optional) runs again with the
padded lanes left out of its fold instead. A padded lane that holds the identity already (pad=-inf under a max, a
where() that put 0 there under a sum) changes nothing and passes.

A loop-carried value cannot be followed by a mask: a lane of `acc += d * d` over column blocks is padding in the
last iteration and data in the others. So a tile the loop carries (an iter_arg, and what is computed from it) has a
carried state beside its value instead (`Carried`): its *shadow*, the value the kernel would hold had every padded
lane it took in held the identity of the op that took it in (`acc + t` takes t's padded lanes in as 0, `max(acc, t)`
as -inf), and its lanes that hold no data (nothing but constants and padding: the rows of a block past the last row,
or an accumulator's initial zeros). A reduction, scan or dot over such a tile is computed again from the shadow;
where a result with data differs, the padding an earlier iteration took in changed it. Padding that enters an update
before its fold (Welford's m + (t - m) / n) is caught at the loop's yield: there the lanes an accumulator's update
took padding into keep the shadow they had before it, as if the padded element were not there. After the loop, the
lanes that never took in data are padding, as a load's are. scf.if passes on the state of the branch it takes.

flip(), take() and the networks of sort and topk (their steps are reductions marked NETWORK_STEP) only move elements
between lanes, and the padding moves with them (_find_networks): a flip's swap swaps the mask, a take's lane is
padded where the lane it picks is, and a sort network's ops are not followed one by one: at its output, a stable sort
of its input keys (equal keys with data first) says which element each lane took, so which lanes hold padding, and a
padded element ordered ahead of one with data is a warning (a pad that does not sort last: 0 among negative logits).

Masks do not cross ops outside the rules below: a value whose padding is not followed is taken as having none, so the
check can miss a case but never invents one."""
from __future__ import annotations

import math
import warnings
from typing import Callable

import torch

from tle.diagnostics import Note, TleError, TlePaddingWarning, call_at, render, span_of_location
from tle.dialects.mlir import ir, nested_ops, operand_groups
from tle.dialects.tle import NETWORK_STEP

# op name -> how its result's mask follows from its operands' masks
_SHAPE = ("tle.splat", "tle.broadcast", "tle.expand_dims", "tle.reshape", "tle.transpose", "tle.split")
_COMBINED = ("tle.combine_reduce", "tle.combine_scan")
_CHECKED = ("tle.reduce", "tle.scan", "tle.dot", "tle.histogram", *_COMBINED)
_OTHER = ("arith.select", "tle.join", "tle.tile_gather", "tle.gather")
_ARITH = ("arith.cmpf", "arith.cmpi", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
          "arith.extsi", "arith.extui", "arith.trunci", "arith.bitcast", "math.absi", "arith.divsi", "arith.remsi",
          "arith.shli", "arith.shrsi", "arith.shrui", "arith.mului_extended", "tle.inline_asm")

_MEMORY = ("tle.load", "tle.gather", "tle.atomic", "tle.undef")

# Ops that fold one operand into another lane by lane (`acc + t`): where a carried value is the accumulator, a padded
# lane of a contribution is taken in as the op's identity in the shadow (t - acc is no accumulation of t).
# op -> (accumulator positions, contribution positions, identity; "min"/"max" for an integer type's extreme)
_INF = float("inf")
_BOTH = ((0, 1), (0, 1))
_FOLDS = {
    "arith.addf": (*_BOTH, 0), "arith.addi": (*_BOTH, 0), "arith.subf": ((0,), (1,), 0), "arith.subi": ((0,), (1,), 0),
    "arith.mulf": (*_BOTH, 1), "arith.muli": (*_BOTH, 1), "arith.ori": (*_BOTH, 0), "arith.xori": (*_BOTH, 0),
    "arith.andi": (*_BOTH, -1), "arith.maximumf": (*_BOTH, -_INF), "arith.maxnumf": (*_BOTH, -_INF),
    "arith.minimumf": (*_BOTH, _INF), "arith.minnumf": (*_BOTH, _INF), "arith.maxsi": (*_BOTH, "min"),
    "arith.minsi": (*_BOTH, "max"),
}
_CARRIES = frozenset(_SHAPE) | {"arith.select", "tle.join", "tle.reduce", "tle.scan", "tle.dot", *_COMBINED}

_NOTE = ("the lanes of a load outside its tensor hold the load's pad (0 unless given), on the GPU as here: give the "
         "load a pad= that this op leaves unchanged (sum: 0, max: -inf, min: inf, product: 1), or set the lanes with "
         "where(inside, x, identity) before it")
_NOTE_GATHERED = ("a gather's lanes that its mask= leaves out hold its other= (0 unless given), on the GPU as here: "
                  "give the gather an other= that this op leaves unchanged (sum: 0, max: -inf, min: inf, product: 1), "
                  "or set the lanes with where(mask, x, identity) before it")


class Origin:
    """Where a mask's padding came from: the load's span, its tensor's name and its pad value; or a gather's, whose
    mask= leaves lanes out (`gathered`), and its other= value."""
    __slots__ = ("span", "name", "pad", "gathered")

    def __init__(self, span, name: str, pad, gathered: bool = False):
        self.span, self.name, self.pad, self.gathered = span, name, pad, gathered

    @property
    def lanes(self) -> str:
        return f"lanes of '{self.name}' that a gather's mask= leaves out" if self.gathered else \
            f"lanes past the edge of '{self.name}'"

    def note(self) -> Note:
        if self.gathered:
            return Note(f"the gather whose mask= leaves lanes of '{self.name}' out: they hold other="
                        f"{_text(self.pad)}", self.span)
        return Note(f"the load that pads '{self.name}' with {_text(self.pad)}", self.span)


class PaddedLanes:
    """Which values may hold padded lanes (a pass over the kernel's ops, in order), their mask slots, and the steps
    that carry and check the masks. `slot` is the interpreter's value -> env slot map; `elementwise` the names of
    the ops computed lane by lane from their operands; `program_of(env, b)` names the program of batch row b;
    `type_info(type)` gives (element type name, shape or None); `identity_of(kind, elem)` a reduction's
    identity; `scalar_attr(attr, elem)` an attribute's value for an element type (a gather's other=, identity=)."""

    def __init__(self, func, slot: Callable, elementwise: frozenset, program_of: Callable, type_info: Callable,
                 identity_of: Callable, scalar_attr: Callable):
        self.slot, self.program_of = slot, program_of
        self.type_info, self.identity_of, self.scalar_attr = type_info, identity_of, scalar_attr
        self.warned: set = set()  # the spans of the ops warned about
        self.elementwise = elementwise | frozenset(_ARITH)
        self.masks: dict[int, int] = {}  # value slot -> its mask's slot
        # Values computed from the arguments and constants alone, never from memory (a where() that puts one in
        # padded lanes leaves them padding: a row of a ragged block that is all padding stays so)
        self.constant: set[int] = {self.slot(a) for a in func.regions[0].blocks[0].arguments}
        # every op with the slots of its operands and of its results (once: an MLIR value's hash is not cheap)
        ops = [(op, [self.slot(v) for v in op.operands], [self.slot(r) for r in op.results])
               for op in nested_ops(func)]
        self._find_networks(ops)
        for op, ins, outs in ops:
            first = outs[0] if outs else None
            if first in self.sorted_from:  # a network's output: padded where the input it sorted is
                padded = self.sorted_from[first] in self.masks
            elif first in self.picks:  # take's max: where the lane it picks is (or an index read from padding)
                padded = any(s in self.masks for s in self.picks[first][:2])
            else:
                padded = any(s in self.masks for s in ins) and op.name != "tle.histogram" and self._follows(op, first)
            # (a loop's tiles: the lanes that never took in data are padding after it, _Loop.leave)
            # (a gather with mask=: its lanes the mask leaves out hold other=, as a load's past the edge hold pad=)
            if op.name == "tle.load" or padded or (op.name == "tle.gather" and operand_groups(op)[2]):
                for r in op.results:
                    self.masks[self.slot(r)] = self.slot(("padded lanes of", r))
            elif op.name in ("scf.for", "scf.if"):  # (an if's: those of what the branch taken yields, branch())
                for r in op.results:
                    if self.type_info(r.type)[1]:
                        self.masks[self.slot(r)] = self.slot(("padded lanes of", r))
            if not len(op.regions) and op.name not in _MEMORY and all(s in self.constant for s in ins):
                self.constant.update(self.slot(r) for r in op.results)
            elif op.name == "scf.for" and all(s in self.constant for s in ins[:3]):  # its index: where(j == 0, ...)
                self.constant.add(self.slot(op.regions[0].blocks[0].arguments[0]))
        # The tiles that may hold a carried state: a loop's iter_args and results, and what is computed from them
        # (iterated: an scf.if's results carry what its branches yield, which come after it in the walk). Of those,
        # the accumulators: computed in a loop's body from its iter_args (a loop's result is carried, but after the
        # loop its lanes no longer move from iteration to iteration: d = x - mean folds nothing into mean)
        self.carried: dict[int, int] = {}  # value slot -> its state's slot
        self.accumulating: set[int] = set()
        before = None
        while before != (len(self.carried), len(self.accumulating)):
            before = (len(self.carried), len(self.accumulating))
            for op, ins, outs in ops:
                if op.name == "scf.for":
                    iters = list(op.regions[0].blocks[0].arguments)[1:]
                    self._carry(*iters, *op.results)
                    self._accumulate(*iters, *[r for r, s in zip(op.results, ins[3:]) if s in self.accumulating])
                elif op.name == "scf.if":
                    for yields in _branch_yields(op):
                        self._carry(*[r for r, y in zip(op.results, yields) if self.slot(y) in self.carried])
                        self._accumulate(*[r for r, y in zip(op.results, yields) if self.slot(y) in self.accumulating])
                elif any(s in self.carried for s in ins) and self._follows_carried(op, outs[0] if outs else None):
                    self._carry(*op.results)
                    if any(s in self.accumulating for s in ins):
                        self._accumulate(*op.results)

    def _accumulate(self, *values):
        self.accumulating.update(self.slot(v) for v in values if self.slot(v) in self.carried)

    def _carry(self, *values):
        for v in values:
            if self.type_info(v.type)[1] and self.slot(v) not in self.carried:  # tiles only
                self.carried[self.slot(v)] = self.slot(("carried state of", v))

    def _follows_carried(self, op, first: int | None) -> bool:
        return (op.name in self.elementwise or op.name in _CARRIES) and self._follows(op, first) and \
            first not in self.picks

    def _first(self, op) -> int | None:
        """The slot of op's first result (None for an op without results)."""
        return self.slot(op.results[0]) if len(op.results) else None

    def _follows(self, op, first: int | None) -> bool:
        """Whether the masks of op's results (`first`: the slot of its first) follow from its operands' by the rules
        of its kind (the ops inside a sort network and its output have rules of their own, _find_networks)."""
        name = op.name
        if first in self.in_network:
            return False
        if name == "tle.reduce" and NETWORK_STEP in str(op.location):
            # A step of a network that moves elements between lanes: take's max (followed by its own rule, _picked)
            # or a sum of a flip's pairs (the subtraction that swaps them has the rule, _swapped). Not checked.
            return first in self.picks
        return name in self.elementwise or name in _SHAPE or name in _CHECKED or name in _OTHER

    def _find_networks(self, ops: list):
        """The networks of steps marked NETWORK_STEP (a reduction over pairs; tle/bitonic.py, flip and take in
        tle/check.py), recognised by the ops around their steps. They only move elements between lanes, so the
        padded lanes follow exactly, by rules of their own:
        - flip's swap along an axis of 2, `sum(pair) - y` (a broadcast, a reshape and maybe a truncation after the
          sum, over y or y extended): its lanes are padded where y's swapped lanes are (self.swaps: the result ->
          (y, its axis));
        - take's where(k == arange, bits, lowest) and max along an axis: its lane is padded where the lane it picks
          is (self.picks: the max's result -> (the choice, the bits, the axis));
        - a sort or topk network: steps that each read keys through a reshape into pairs, and either pick with
          where(take, partner, pairs) (a compare-and-swap) or take a max along the pairs (topk's halving), then
          reshape back; each step's keys are the one before it's. The ops between the first step's keys (the
          network's input) and its last step's output are not followed (self.in_network); the output's padded
          lanes are those of the elements it took from the input, which the check finds by sorting the input
          (self.sorted_from: the output -> the input; _sorted). A recognition that fails leaves a network as it was
          before this rule: not checked, its result taken as holding no padding."""
        ins = [i for _, i, _ in ops]
        outs = [o for _, _, o in ops]
        ops = [op for op, _, _ in ops]
        producer: dict[int, int] = {}  # value -> the op (its number) that computes it
        users: dict[int, list[int]] = {}
        for i in range(len(ops)):
            producer.update((s, i) for s in outs[i])
            for s in ins[i]:
                users.setdefault(s, []).append(i)

        def made(s, *names) -> int | None:
            i = producer.get(s)
            return i if i is not None and ops[i].name in names else None

        def source(s, *names):  # the first operand of the op of one of names that computes s, else None
            i = made(s, *names)
            return ins[i][0] if i is not None else None

        def unextended(s: int) -> int:  # (i8 and i16 keys sum in i32)
            src = source(s, "arith.extsi", "arith.extui")
            return s if src is None else src

        def only_user(s: int, name: str) -> int | None:
            us = users.get(s, [])
            return us[0] if len(us) == 1 and ops[us[0]].name == name else None

        def swap_of(i):  # flip's sum(pair) - y: (y, the axis of the pairs), else None
            total = source(ins[i][0], "tle.broadcast")
            truncated = source(total, "arith.trunci")
            total = total if truncated is None else truncated
            step = made(source(total, "tle.reshape"), "tle.reduce")
            if step is None or not _is_step(ops[step], "sum"):
                return None
            y, summed = ins[i][1], ins[step][0]
            return (y, _axis(ops[step])) if y in (summed, unextended(summed)) else None

        self.swaps: dict[int, tuple[int, int]] = {}
        self.picks: dict[int, tuple[int, int, int]] = {}
        steps = []  # (the keys a sort network's step reads, its pairs, its output), in order
        for i, op in enumerate(ops):
            if op.name == "arith.subi":
                swap = swap_of(i)
                if swap is not None:
                    self.swaps[outs[i][0]] = swap
                continue
            if not _is_step(op):
                continue
            src = ins[i][0]
            chosen = made(src, "arith.select")
            if _is_step(op, "max") and chosen is not None:
                self.picks[outs[i][0]] = (ins[chosen][0], ins[chosen][1], _axis(op))
                continue
            pairs = unextended(src)
            into = made(pairs, "tle.reshape")
            if into is None:
                continue
            if _is_step(op, "max"):  # topk's halving
                out = only_user(outs[i][0], "tle.reshape")
            else:  # a compare-and-swap, or the first swap of a flip (no where)
                chosen = [u for u in users.get(pairs, []) if ops[u].name == "arith.select" and ins[u][2] == pairs]
                out = only_user(outs[chosen[0]][0], "tle.reshape") if len(chosen) == 1 else None
            if out is not None:
                steps.append((ins[into][0], pairs, outs[out][0]))
        # The input of each step's network: the keys of its first step, which no step put out
        firsts = {pairs for _, pairs, _ in steps}
        input_of = {}
        for keys, _, out in steps:
            input_of[out] = input_of.get(keys, keys)
        # Outputs that only the next step reads are inside the network; the others are read as its result
        self.sorted_from: dict[int, int] = {}
        for out in input_of:
            if any(not outs[u] or outs[u][0] not in firsts for u in users.get(out, [])):
                self.sorted_from[out] = input_of[out]
        self.in_network: set[int] = set(firsts)  # (the first results of the ops inside, and the outputs)
        if not steps:
            return
        inside = set(firsts)
        for i in range(len(ops)):
            if not outs[i]:
                continue
            first = outs[i][0]
            if first in self.sorted_from:
                self.in_network.add(first)
            elif first not in inside and any(s in inside for s in ins[i]):
                inside.update(outs[i])
                self.in_network.add(first)
        for s in self.in_network & set(self.swaps):  # (a compare-and-swap's partner, sum(pair) - key)
            del self.swaps[s]

    def skip_slot(self, op) -> int | None:
        """The slot where the check of a combine_reduce / combine_scan puts the lanes its rerun leaves out of the fold
        (the interpreter's step reads it; None where no operand may hold padded lanes)."""
        if not any(self.slot(v) in self.masks or self.slot(v) in self.carried for v in op.operands):
            return None
        return self.slot(("lanes left out of", op))

    def mask_slot(self, value) -> int | None:
        return self.masks.get(self.slot(value))

    def wrap(self, op, span, step):
        """`step` with the op's result masks set after it (and its check made), for ops that read a value that may
        hold padded lanes, and its results' carried states (and the check of a carried operand) for ops that read a
        carried tile; `step` itself otherwise."""
        masked = self._wrap_masks(op, span, step)
        if not any(self.slot(v) in self.carried for v in op.operands) or not self._follows_carried(op, self._first(op)):
            return masked
        name = op.name
        if self._first(op) in self.swaps:
            return self._carried_swap(op, masked)
        if name in self.elementwise:
            return self._carried_elementwise(op, span, step, masked)
        if name in _SHAPE or name == "tle.join":
            return self._carried_moved(op, step, masked)
        if name == "arith.select":
            return self._carried_select(op, step, masked)
        if name == "tle.dot":
            return self._carried_dot(op, span, step, masked)
        if name in _COMBINED:
            return self._carried_combined(op, span, step, masked)
        return self._carried_reduction(op, span, step, masked)

    def _wrap_masks(self, op, span, step):
        name = op.name
        first = self._first(op)
        if first in self.sorted_from or first in self.swaps or first in self.picks:
            out_mask = self.masks.get(first)
            if out_mask is None:
                return step
            if first in self.sorted_from:
                return self._sorted(span, step, self.sorted_from[first], first, out_mask)
            if first in self.swaps:
                return self._swapped(step, *self.swaps[first], out_mask)
            return self._picked(step, *self.picks[first], out_mask)
        ins = [self.masks.get(self.slot(v)) for v in op.operands]
        if name == "tle.gather" and operand_groups(op)[2]:
            return self._gather(op, span, step, ins, self.masks[first])
        if not any(m is not None for m in ins) or not self._follows(op, first):
            return step
        values = [self.slot(v) for v in op.operands]
        outs = [self.slot(r) for r in op.results]
        out_masks = [self.masks.get(s) for s in outs]
        if name in _FOLDS and len(values) == 2:
            return self._folded(step, _FOLDS[name], values, ins, out_masks)
        if name in self.elementwise:
            one = len(ins) == 1  # a conversion or bitcast of one value (take's bits) keeps its held lanes

            def carried(env):
                step(env)
                m = _either(*[env[s] for s in ins if s is not None])
                if one and m is not None:
                    m.held = env[ins[0]].held
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
            return self._gather(op, span, step, ins, out_masks[0])
        if name == "tle.histogram":
            return self._histogram(op, span, step, values, ins)
        if name == "tle.dot":
            return self._dot(span, step, values, ins, outs[0], out_masks[0])
        if name in _COMBINED:
            return self._combined(op, span, step, values, ins, outs, out_masks)
        kind = ir.StringAttr(op.attributes["kind"]).value
        identity = self.identity_of(kind, self.type_info(op.operands[0].type)[0])
        axis = ir.IntegerAttr(op.attributes["axis"]).value + 1
        reverse = name == "tle.scan" and "reverse" in op.attributes
        return self._reduction(span, step, name == "tle.scan", kind, axis, identity, values[0], ins[0], outs[0],
                               out_masks[0], reverse)

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

    def _folded(self, step, fold, values, masks, out_masks):
        """a + b, max(a, b), ...: a padded lane that holds the op's identity leaves the other operand's lane as it
        was, so it is padding only where that one is padding too (or a constant: a constant in padded lanes stays
        padding). Two blocks of one row added (an unrolled static_range sum: the second ragged, padded with 0) give
        the first block's data, not padding. Elsewhere, as any elementwise op: padded where an operand is."""
        contributions, identity = fold[1], fold[2]
        constant = [v in self.constant for v in values]

        def carried(env):
            step(env)
            ms = [env[m] if m is not None else None for m in masks]
            lanes = []
            for i, m in enumerate(ms):
                if m is None:
                    continue
                if i not in contributions:
                    lanes.append(m.mask)
                    continue
                x = env[values[i]]
                other = ms[1 - i]
                alone = _ALL if constant[1 - i] else (other.mask if other is not None else None)
                moved = m.mask & (x != _fold_identity(identity, x.dtype))  # (a NaN is no identity)
                lanes.append(moved if alone is None else moved | (m.mask & alone))
            out = _either_lane(lanes)
            out = Padded(out, next(m.origin for m in ms if m is not None)) if out is not None and bool(out.any()) \
                else None
            for s in out_masks:
                env[s] = out
        return carried

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

    def _gather(self, op, span, step, masks, out_mask):
        """A gather from memory: lanes at padded indices (where its mask= lets them load), and the lanes its mask=
        leaves out, which hold other= (0 unless given), as a load's lanes past the tensor's edge hold its pad: a
        segment's max(gather(vals, s + arange(0, B), mask=arange(0, B) < n)) over negative values is 0 there."""
        groups = operand_groups(op)
        n_idx = len(groups[1])
        idx_masks = masks[1:1 + n_idx]
        user_mask = self.slot(groups[2][0]) if groups[2] else None
        view = self.slot(groups[0][0])
        other = self.scalar_attr(op.attributes["other"], self.type_info(op.result.type)[0]) \
            if user_mask is not None else None
        op_out = self.slot(op.result)

        def carried(env):
            step(env)
            m = _either(*[env[s] for s in idx_masks if s is not None])
            if user_mask is not None:
                out = env[op_out]
                loads = env[user_mask]  # a bool tile, or a scalar per program
                loads = loads.reshape(*loads.shape, *[1] * (out.dim() - loads.dim()))
                if m is not None:
                    m = Padded(m.mask & loads, m.origin)
                left_out = ~loads
                if bool(left_out.any()):
                    m = _either(m, Padded(left_out, Origin(span, env[view].name, other, gathered=True)))
            env[out_mask] = m
        return carried

    def _swapped(self, step, y, axis, out_mask):
        """flip's swap along an axis of 2 (sum(pair) - y, exact in integers): padded where y's partners are."""
        mask = self.masks.get(y)
        axis += 1

        def swapped(env):
            step(env)
            m = env[mask] if mask is not None else None
            if m is None:
                env[out_mask] = None
                return
            # (a mask that broadcasts along the pairs is its own swap)
            env[out_mask] = Padded(m.mask.flip(axis) if m.mask.shape[axis] > 1 else m.mask, m.origin)
        return swapped

    def _picked(self, step, choice, bits, axis, out_mask):
        """take's max along an axis of where(k == arange, bits, lowest): padded where the lane it picks is, and
        where the choice is (k read from padding), as a gather's lanes are where its indices are."""
        mask, choice_mask = self.masks.get(bits), self.masks.get(choice)
        axis += 1

        def picked(env):
            step(env)
            m = env[mask] if mask is not None else None
            picked_lanes = None if m is None else (m.mask if m.held is None else m.mask & ~m.held)
            lanes = None if m is None else (picked_lanes & env[choice]).any(axis)
            took = Padded(lanes, m.origin) if lanes is not None and bool(lanes.any()) else None
            c = env[choice_mask] if choice_mask is not None else None
            by = None if c is None else Padded(c.mask.any(axis) if c.mask.dim() > axis else c.mask, c.origin)
            out = _either(took, by)
            env[out_mask] = out if out is not None and bool(out.mask.any()) else None
        return picked

    # ---- checks --------------------------------------------------------------------------------------------------
    def _sorted(self, span, step, keys, out, out_mask):
        """The output of a sort or topk network (tle/bitonic.py) over keys: padded where the elements it took from
        keys are. A network only moves its keys (equal keys are equal bits), so that is the order of a stable sort
        of keys that puts, among equal keys, those with data first: a pad equal to a value passes. The output
        holds the whole row sorted (ascending or descending: whichever it is), or the k largest, descending. A
        padded element ordered ahead of one with data (in the first lanes, as many as the row has elements with
        data) is a warning."""
        mask = self.masks[keys]

        def checked(env):
            step(env)
            m = env[mask]
            if m is None:
                env[out_mask] = None
                return
            got = env[out]
            shape = torch.broadcast_shapes(env[keys].shape, m.mask.shape)
            x, lanes = env[keys].expand(shape), m.mask.expand(shape)
            n, k = shape[-1], got.shape[-1]
            descending = k < n or (k > 1 and not bool((got[..., 1:] >= got[..., :-1]).all()))
            first = torch.sort(lanes.to(torch.uint8), dim=-1, stable=True).indices  # data first, stably
            order = torch.sort(x.gather(-1, first), dim=-1, descending=descending, stable=True).indices[..., :k]
            order = first.gather(-1, order)
            taken = x.gather(-1, order)
            if taken.shape != got.shape or not torch.equal(taken, got):
                env[out_mask] = None  # (not the network _find_networks took it for: as before that, not followed)
                return
            padded = lanes.gather(-1, order)
            bad = padded & (torch.arange(k) < (~lanes).sum(-1, keepdim=True))
            if bool(bad.any()):
                top = k < n
                called = call_at(span, ("argtopk",) if top else ("argsort",), "topk" if top else "sort")
                what, after = (f"{called} ranks", "ranks after it or is left out") if top else \
                    (f"{called} orders", "sorts after it")
                self._fail(env, span, m.origin, bad,
                           lambda w, p: f"{what} {m.origin.lanes}, which hold padding, ahead "
                                        f"of lanes with data: in program {p} the result{_pos(w)} comes from a "
                                        f"padded lane, and a lane with data {after}",
                           advice=_sort_note(descending, top))
            env[out_mask] = Padded(padded, m.origin) if bool(padded.any()) else None
        return checked

    def _reduction(self, span, step, scan: bool, kind: str, axis: int, identity, value, mask, out, out_mask,
                   reverse: bool = False):
        """reduce / scan: the result again with the padded lanes set to the identity; a difference in a result lane
        that is not all padding is an error. The result's lanes that are all padding are padded in turn (a scan's:
        its input's padded lanes, of which those that fold data alone are `held`: _scan_held)."""
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
            differs = None
            if bool(moved.any()):
                got = env[out]
                without, = self._shadow(env, step, {value: torch.where(lanes, identity, x)}, [out])
                differs = ~_same(got, without)
                bad = differs & ~whole
                if bool(bad.any()):
                    self._fail(env, span, m.origin, bad,
                               # (a 1-D tile's axis goes unsaid: sum(t) of a 2-D t reduces its flattened 1-D)
                               lambda w, p: f"{what}{f' along axis {axis - 1}' if scan or x.dim() > 2 else ''} takes "
                                            f"in {m.origin.lanes}, which hold padding: in program {p} the result"
                                            f"{_pos(w)} is {_item(got, w)} with them and {_item(without, w)} "
                                            f"without",
                               advice=_changed_on_the_way(m.origin, what, identity, x[moved][0].item()))
            env[out_mask] = Padded(whole, m.origin, _scan_held(lanes, axis, reverse, differs) if scan else None)
        return checked

    def _combined(self, op, span, step, values, masks, outs, out_masks):
        """scan / reduce with combine=: the result again with the padded lanes (of any operand: the operands are
        combined element by element together) left out of the fold, as if they were not there; a difference in a
        result lane that is not all padding is a warning. No identity is needed for that (one is optional): the rerun
        passes a left-out element by. With identity=, each operand's padded lanes are set to its identity instead,
        and lanes that hold the identities already change nothing and cost no rerun."""
        scan, reverse, axis, what, used = _combine_op(op)
        identities = None
        if "identities" in op.attributes:
            identities = [self.scalar_attr(a, self.type_info(x.type)[0])
                          for a, x in zip(ir.ArrayAttr(op.attributes["identities"]), op.operands)]
        skip = self.skip_slot(op)
        several = len(outs) > 1

        def checked(env):
            step(env)
            ms = [m for m in (env[s] for s in masks if s is not None) if m is not None]
            if not ms:
                for s in out_masks:
                    env[s] = None
                return
            xs = [env[v] for v in values]
            shape = torch.broadcast_shapes(*[x.shape for x in xs], *[m.mask.shape for m in ms])
            # an element with a padded lane in any operand: its result lanes are padded (positions past the edge)
            lanes = _either_lane([m.mask for m in ms]).expand(shape)
            if identities is None:  # and it is left out of the rerun's fold
                moved = bool(used)
                rerun = {skip: lanes}
            else:
                # each operand's padded lanes are set to its identity, its other lanes kept: a segmented scan's
                # flags padded at lane 0 (`s != gather(seg, i - 1, mask=i > 0)`) leave that lane's value in the fold
                own = [env[m].mask.expand(shape) if m is not None and env[m] is not None else None for m in masks]
                held = [o & ~_same(x, torch.full((), i, dtype=x.dtype)) for o, x, i in zip(own, xs, identities)
                        if o is not None]
                moved = bool(used) and any(bool(h.any()) for h in held)
                rerun = {v: torch.where(o, i, x) for v, o, x, i in zip(values, own, xs, identities) if o is not None}
            whole = lanes if scan else lanes.all(axis)
            differs = None
            if moved:
                got = [env[s] for s in outs]
                without = self._shadow(env, step, rerun, outs)
                differs = _either_lane([~_same(g, w) for g, w in zip(got, without)])
                for j in used:
                    g, w = got[j], without[j]
                    bad = ~_same(g, w) & ~whole
                    if bool(bad.any()):
                        origin = ms[0].origin
                        result = f" {j + 1}" if several else ""
                        self._fail(env, span, origin, bad,
                                   lambda at, p: f"{what}{f' along axis {axis - 1}' if scan or g.dim() > 2 else ''} "
                                                 f"takes in {origin.lanes}, which hold "
                                                 f"padding: in program {p} the result{result}{_pos(at)} is "
                                                 f"{_item(g, at)} with them and {_item(w, at)} without them",
                                   advice=_combined_note(identities))
                        break
            held = _scan_held(lanes, axis, reverse, differs) if scan else None
            for s in out_masks:
                env[s] = Padded(whole, ms[0].origin, held)
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
                               lambda w, p: f"dot adds products of {origin.lanes}, which "
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
                           lambda w, p: f"histogram counts {m.origin.lanes}, which hold "
                                        f"padding: in program {p} the lane{_pos(w)} holds {_item(x, w)}, one of "
                                        f"the {bins} bins",
                           ["pass mask= with the lanes inside the tensor"])
        return checked

    # ---- carried tiles -------------------------------------------------------------------------------------------
    def _state(self, env, value: int):
        """A carried operand's state; None for a value that is not carried."""
        c = self.carried.get(value)
        return env[c] if c is not None else None

    def _padded(self, env, value: int) -> "Padded | None":
        m = self.masks.get(value)
        return env[m] if m is not None else None

    def _padding(self, env, value: int):
        m = self._padded(env, value)
        return None if m is None else m.mask

    def _plain(self, env, value: int) -> "Carried":
        """The state of a value that no loop carried: its padded lanes hold no data, nor does a constant."""
        m = self._padded(env, value)
        if m is not None:
            return Carried(None, m.mask, m.origin, None)
        return Carried(None, _ALL, None, None) if value in self.constant else CLEAN

    def _set_states(self, env, results, states):
        for r, st in zip(results, states):
            c = self.carried.get(r)
            if c is not None:
                env[c] = st

    def _carried_elementwise(self, op, span, step, run):
        """An elementwise op on a carried tile: its shadow from the operands' shadows, with a contribution's padded
        lanes at the identity where the op folds it into a carried accumulator (acc + t). A lane holds data where
        an operand's lane does; after an op that is no fold, not where a value no loop carries holds this
        iteration's padding (t - c: a Kahan sum's c starts as constants, and t brings the data in)."""
        ins = [self.slot(v) for v in op.operands]
        out = self.slot(op.result)
        tiles = [bool(self.type_info(v.type)[1]) and s not in self.constant for v, s in zip(op.operands, ins)]
        fold = _FOLDS.get(op.name)

        def carried(env):
            run(env)
            states = [self._state(env, s) for s in ins]
            folding = fold is not None and any(ins[i] in self.accumulating for i in fold[0])
            shadows, lanes, origin, entered = {}, [], None, None
            padding = []  # the padded lanes of operands no loop carries
            for i, (s, st) in enumerate(zip(ins, states)):
                base = st.shadow if st is not None else None
                # a contribution folded into an accumulator: its padded lanes are taken in as the identity
                pm = self._padded(env, s) if folding and i in fold[1] and s not in self.accumulating else None
                if pm is None and folding and i in fold[0]:
                    pm = _initial_padding(st)
                padded = pm.mask if pm is not None else None
                if padded is not None:
                    x = env[s] if base is None else base
                    identity = _fold_identity(fold[2], x.dtype)
                    if bool((padded & (x != identity)).any()):  # (a NaN is no identity)
                        base = torch.where(padded, identity, x)
                        entered = entered or (span, identity, pm.origin)
                if base is not None:
                    shadows[s] = base
                if st is None:
                    if not tiles[i]:
                        continue  # a scalar or a constant: no lanes of its own, with or without data
                    st = self._plain(env, s)
                    padding.append(st.nodata)
                lanes.append(_either_lane([st.nodata, padded]))
                origin, entered = origin or st.origin, entered or st.entered
            shadow = None
            if shadows:
                got, = self._shadow(env, step, shadows, [out])
                shadow = None if _identical(got, env[out]) else got
            nodata = _both(lanes) if folding else _either_lane([_both(lanes), *padding])
            env[self.carried[out]] = Carried(shadow, nodata, origin, entered)
        return carried

    def _carried_moved(self, op, step, run):
        """Reshapes, broadcasts, transposes, splits and joins move the shadow's and the no-data lanes as the value's."""
        ins = [self.slot(v) for v in op.operands]
        outs = [self.slot(r) for r in op.results]

        def carried(env):
            run(env)
            states = [self._state(env, s) or self._plain(env, s) for s in ins]
            shadows = {s: st.shadow for s, st in zip(ins, states) if st.shadow is not None}
            shadow = self._shadow(env, step, shadows, outs) if shadows else [None] * len(outs)
            nodata = [None] * len(outs)
            if any(st.nodata is not None for st in states):
                nodata = self._shadow(env, step, {s: _lanes(st.nodata, env[s]) for s, st in zip(ins, states)}, outs)
            origin = next((st.origin for st in states if st.origin), None)
            entered = next((st.entered for st in states if st.entered), None)
            self._set_states(env, outs, [Carried(sh, None if nd is None or not bool(nd.any()) else nd, origin,
                                                 entered) for sh, nd in zip(shadow, nodata)])
        return carried

    def _carried_swap(self, op, run):
        """flip's swap of a carried tile's pairs: the shadow's and the no-data lanes swap as the value's do."""
        out = self.slot(op.result)
        y, axis = self.swaps[out]

        def carried(env):
            run(env)
            st = self._state(env, y) or self._plain(env, y)
            shadow = None if st.shadow is None else st.shadow.flip(axis + 1)
            nodata = None if st.nodata is None else _lanes(st.nodata, env[y]).flip(axis + 1)
            self._set_states(env, [out], [Carried(shadow, nodata, st.origin, st.entered)])
        return carried

    def _carried_select(self, op, step, run):
        """where(c, a, b): the shadow and the no-data lanes of the operand each lane takes."""
        c, a, b = ins = [self.slot(v) for v in op.operands]
        out = self.slot(op.result)
        data_choice = bool(self.type_info(op.operands[0].type)[1]) and c not in self.constant and c not in self.carried

        def carried(env):
            run(env)
            states = [self._state(env, s) or self._plain(env, s) for s in ins]
            shadows = {s: st.shadow for s, st in zip(ins, states) if st.shadow is not None}
            shadow = None
            if shadows:
                got, = self._shadow(env, step, shadows, [out])
                shadow = None if _identical(got, env[out]) else got
            nodata = None
            if states[1].nodata is not None or states[2].nodata is not None:
                nodata, = self._shadow(env, step, {a: _bits_of(states[1].nodata), b: _bits_of(states[2].nodata)},
                                       [out])
                if data_choice:  # where(t > 0.0, s + t, s): a lane kept by a choice made on data holds data
                    nodata = _both([nodata, self._padding(env, c)])
                nodata = nodata if nodata is not None and bool(nodata.any()) else None
            origin = states[1].origin or states[2].origin or states[0].origin
            entered = states[1].entered or states[2].entered or states[0].entered
            self._set_states(env, [out], [Carried(shadow, nodata, origin, entered)])
        return carried

    def _carried_reduction(self, op, span, step, run):
        """reduce / scan over a carried tile: the result again from the shadow, lanes without data (and padded ones)
        at the identity in both; a difference in a result with data is padding an earlier iteration took in."""
        kind = ir.StringAttr(op.attributes["kind"]).value
        identity = self.identity_of(kind, self.type_info(op.operands[0].type)[0])
        axis = ir.IntegerAttr(op.attributes["axis"]).value + 1
        scan = op.name == "tle.scan"
        value, out = self.slot(op.operands[0]), self.slot(op.result)
        what = ("cumulative " if scan else "") + kind

        def checked(env):
            run(env)
            st = self._state(env, value)
            if st is None:
                return self._set_states(env, [out], [None])
            x = env[value]
            shadow = None
            if st.shadow is not None:
                lanes = _lanes(_either_lane([st.nodata, self._padding(env, value)]), x)
                whole = lanes if scan else lanes.all(axis)
                got, = self._shadow(env, step, {value: torch.where(lanes, identity, x)}, [out])
                without, = self._shadow(env, step, {value: torch.where(lanes, identity, st.shadow)}, [out])
                bad = ~_same(got, without) & ~whole
                if st.entered is not None and st.entered[1] is None and bool(bad.any()):
                    # (the sizes the reduction adds up along the axis: a sum that cancels keeps their roundings)
                    sizes = torch.where(lanes, 0, torch.maximum(x.abs(), st.shadow.abs()))
                    scale = sizes.sum(axis, keepdim=scan) if sizes.is_floating_point() else None
                    bad &= ~_within_roundings(got, without, scale)
                if bool(bad.any()):
                    source = _source(st)
                    self._fail(env, span, source, bad,
                               lambda w, p: f"{what}{f' along axis {axis - 1}' if scan or x.dim() > 2 else ''} takes "
                                            f"in padding of '{source.name}' that a loop accumulated into a "
                                            f"value it carries: in program {p} the result{_pos(w)} is "
                                            f"{_item(got, w)} with it and {_item(without, w)} without",
                               _entered_notes(st))
                shadow = without
            nodata = None if st.nodata is None else (_lanes(st.nodata, x) if scan else _lanes(st.nodata, x).all(axis))
            self._set_states(env, [out], [Carried(shadow, nodata, st.origin, st.entered)])
        return checked

    def _carried_combined(self, op, span, step, run):
        """reduce / scan with combine= over carried tiles: the result again with the lanes that hold no data (a
        carried operand's, or this iteration's padding) left out of the fold, from the values and from their
        shadows; a difference in a result with data is padding an earlier iteration took in (`acc = acc & t` over
        blocks padded with 0, then reduced with a combine fn)."""
        scan, _, axis, what, used = _combine_op(op)
        values, outs = [self.slot(v) for v in op.operands], [self.slot(r) for r in op.results]
        skip = self.skip_slot(op)

        def checked(env):
            run(env)
            states = [self._state(env, v) for v in values]
            if all(st is None for st in states):
                return self._set_states(env, outs, [None] * len(outs))
            plain = [st or self._plain(env, v) for v, st in zip(values, states)]
            xs = [env[v] for v in values]
            shape = torch.broadcast_shapes(*[x.shape for x in xs])
            # left out: lanes no operand holds data in, and this iteration's padding (the operands are combined
            # element by element, as in _carried_elementwise)
            padding = [self._padding(env, v) for v, st in zip(values, states) if st is None]
            lanes = _lanes(_either_lane([_both([st.nodata for st in plain]), *padding]), torch.empty(shape))
            whole = lanes if scan else lanes.all(axis)
            shadows = {v: st.shadow for v, st in zip(values, states) if st is not None and st.shadow is not None}
            carried = next(st for st in states if st is not None)
            results = [None] * len(outs)
            if shadows and bool((~lanes).any()):
                got = self._shadow(env, step, {skip: lanes}, outs)
                without = self._shadow(env, step, {skip: lanes, **shadows}, outs)
                for j in used:
                    bad = ~_same(got[j], without[j]) & ~whole
                    if bool(bad.any()):
                        source = _source(carried)
                        g, w = got[j], without[j]
                        self._fail(env, span, source, bad,
                                   lambda at, p: f"{what}{f' along axis {axis - 1}' if scan or g.dim() > 2 else ''} "
                                                 f"takes in padding of '{source.name}' that a loop accumulated into "
                                                 f"a value it carries: in program {p} the result{_pos(at)} is "
                                                 f"{_item(g, at)} with it and {_item(w, at)} without",
                                   _entered_notes(carried))
                results = [w if not _identical(w, env[o]) else None for w, o in zip(without, outs)]
            nodata = whole if bool(whole.any()) else None
            origin = next((st.origin for st in plain if st.origin), None)
            self._set_states(env, outs, [Carried(r, nodata, origin, carried.entered) for r in results])
        return checked

    def _carried_dot(self, op, span, step, run):
        """dot(a, b, acc) where a carried tile is an operand. As a fold of a @ b into a carried acc: products of
        padded lanes (and of lanes without data) are 0 in the shadow. Where a or b is carried, the dot reduces over
        its lanes: checked as a reduction is, against the dot of the shadows."""
        a, b, c = ins = [self.slot(v) for v in op.operands]
        out = self.slot(op.result)

        def checked(env):
            run(env)
            states = [self._state(env, s) for s in ins]
            plain = [st or self._plain(env, s) for s, st in zip(ins, states)]
            xa, xb, xc = env[a], env[b], env[c]
            # a's and b's lanes without data: a carried operand's, a plain one's padded lanes (a constant's are data)
            na, nb = (st.nodata if st else self._padding(env, s) for s, st in ((a, states[0]), (b, states[1])))
            za = _lanes(na, xa) if na is not None else None
            zb = _lanes(nb, xb) if nb is not None else None
            # (only where a lane changes: a load padded with 0 costs no second dot)
            clean = {s: torch.where(z, 0, x) for s, z, x in ((a, za, xa), (b, zb, xb))
                     if z is not None and bool((z & (x != 0)).any())}
            shadows = dict(clean)
            for s, z, x, st in ((a, za, xa, plain[0]), (b, zb, xb, plain[1]), (c, None, xc, plain[2])):
                if st.shadow is not None:
                    shadows[s] = st.shadow if z is None else torch.where(z, 0, st.shadow)
            carried_ab = (states[0] and states[0].shadow is not None) or (states[1] and states[1].shadow is not None)
            whole = None  # (not needed where the result's lanes all hold data: a carried acc's after its first step)
            if carried_ab or c not in self.accumulating or plain[2].nodata is not None:
                if za is not None:
                    whole = za.all(-1).unsqueeze(-1)
                if zb is not None:
                    cols = zb.all(-2).unsqueeze(-2)
                    whole = cols if whole is None else whole | cols
            if carried_ab:
                got, = self._shadow(env, step, clean, [out]) if clean else [env[out]]
                without, = self._shadow(env, step, {**shadows, c: xc}, [out])
                bad = ~_same(got, without) if whole is None else ~_same(got, without) & ~whole
                if bool(bad.any()):
                    st = next(st for st in states[:2] if st and st.shadow is not None)
                    source = _source(st)
                    self._fail(env, span, source, bad,
                               lambda w, p: f"dot adds products of padding of '{source.name}' that a "
                                            f"loop accumulated into a value it carries: in program {p} "
                                            f"the result{_pos(w)} is {_item(got, w)} with it and "
                                            f"{_item(without, w)} without", _entered_notes(st))
            shadow = None
            if shadows:
                got, = self._shadow(env, step, shadows, [out])
                shadow = None if _identical(got, env[out]) else got
            # the lanes of a @ b from rows or columns without data hold none; folded into a carried acc, its lanes
            # that hold none keep none
            nodata = _both([plain[2].nodata, whole]) if c in self.accumulating else _both([whole])
            origin = next((st.origin for st in plain if st.origin), None)
            entered = next((st.entered for st in plain if st.entered), None)
            self._set_states(env, [out], [Carried(shadow, nodata, origin, entered)])
        return checked

    def loop(self, op) -> "_Loop | None":
        """The steps that pass a loop's carried states from its inits through each iteration to its results (the
        interpreter's scf.for calls them); None where the loop carries no tile."""
        body = op.regions[0].blocks[0]
        iters = [self.slot(a) for a in list(body.arguments)[1:]]
        if not any(s in self.carried for s in iters):
            return None
        inits = [self.slot(v) for v in list(op.operands)[3:]]
        yielded = list(list(body.operations)[-1].operation.operands)
        yields = [self.slot(v) for v in yielded]
        # (where an update takes padding in: the op that computes what the loop carries on)
        updates = [None if isinstance(v.owner, ir.Block) else span_of_location(v.owner.location) for v in yielded]
        return _Loop(self, inits, iters, yields, [self.slot(r) for r in op.results], updates)

    def branch(self, op):
        """A step that gives an scf.if's results the padded lanes and the carried state of what the branch taken
        yields (the interpreter's scf.if calls it with the branch's number); None where the if yields no tile."""
        outs = [self.slot(r) for r in op.results]
        if not any(s in self.carried or s in self.masks for s in outs):
            return None
        branches = [[self.slot(v) for v in yields] for yields in _branch_yields(op)]

        def passed(env, taken: int):
            yields = branches[taken] if taken < len(branches) else []
            for o, y in zip(outs, yields):
                if o in self.masks:
                    env[self.masks[o]] = env[self.masks[y]] if y in self.masks else None
                if o in self.carried:
                    env[self.carried[o]] = self._state(env, y) or self._plain(env, y)
        return passed

    def _fail(self, env, span, origin: Origin, bad: torch.Tensor, describe, notes=(), advice: str = _NOTE):
        """A TlePaddingWarning, once per op: the kernel is well defined (the GPU computes the same value), so it
        runs on; turn the warning into an error with warnings.simplefilter("error", tle.TlePaddingWarning)."""
        if span in self.warned:
            return
        where = tuple(bad.nonzero()[0].tolist())
        message = describe(where, self.program_of(env, where[0]))
        notes = list(notes)
        if " is nan with " in message and isinstance(origin.pad, float) and math.isinf(origin.pad):
            # (an online softmax over blocks: lanes that only ever held -inf give exp(-inf - -inf); the pad is right
            # for the max, so the generic advice alone would mislead)
            notes.append(Note(f"the pad {_text(origin.pad)} made a NaN before this op, in arithmetic on lanes that "
                              f"held nothing else (inf - inf, 0 * inf): exp(t - m) where m is still -inf, say; guard "
                              f"it (where(m == -inf, 0.0, exp(t - m))) or set those lanes before this op"))
        problem = TleError(span, message, [origin.note(), *notes,
                                           _NOTE_GATHERED if origin.gathered and advice is _NOTE else advice])
        # Attributed to the kernel's line (Python shows that line under the warning), not to the interpreter's
        warnings.warn_explicit(render(problem, "warning"), TlePaddingWarning, span.file, span.line)
        self.warned.add(span)  # after: where the warning is an error, every launch raises it


class Padded:
    """A value's padded lanes (a bool tensor that broadcasts to it) and where the padding came from. `held`: those
    of its lanes that a scan filled with a fold of data alone (_scan_held), or None; a take() of such a lane is
    data."""
    __slots__ = ("mask", "origin", "held")

    def __init__(self, mask: torch.Tensor, origin: Origin, held: torch.Tensor | None = None):
        self.mask, self.origin, self.held = mask, origin, held


def _either(*masks):
    """The lanes padded in any of masks (None for none), with the first one's origin."""
    masks = [m for m in masks if m is not None]
    return Padded(_either_lane([m.mask for m in masks]), masks[0].origin) if masks else None


def _bits(m):
    return _bits_of(m.mask if m is not None else None)


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a shadow is its value: torch.equal, one pass (a NaN in both keeps the shadow, which costs only the
    reruns of a shadow that is the value)."""
    return torch.equal(a, b)


def _scan_held(lanes: torch.Tensor, axis: int, reverse: bool, differs: torch.Tensor | None) -> torch.Tensor:
    """Of a scan's padded result lanes (`lanes`, its input's), those that hold a fold of data alone: they fold in
    a lane with data (every lane after the first with data, or before the last with `reverse`), and the scan with
    the padded lanes as the identity gives the same there (`differs`: where it does not; None where that rerun was
    not needed: they held the identity already). A cumsum's lanes past a row's end hold the row's total so, and
    `take(cumsum(t), BLOCK - 1)` (a chunked scan's decay to the chunk's end) is data. They stay padded lanes for
    everything else: a sum over a cumsum's lanes past the edge counts them."""
    ordered = lanes.flip(axis) if reverse else lanes
    alone = torch.cummin(ordered.to(torch.uint8), dim=axis).values.bool()
    alone = alone.flip(axis) if reverse else alone
    held = lanes & ~alone
    return held if differs is None else held & ~differs


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    same = a == b
    if a.dtype.is_floating_point:
        same |= torch.isnan(a) & torch.isnan(b)
    return same


def _within_roundings(a: torch.Tensor, b: torch.Tensor, scale) -> torch.Tensor:
    """Where a and b agree to a few roundings of their type at `scale` (the size of what was added up). Padding
    left out of an update where it entered (the loop's yield) may change a value by roundings only, and rightly: a
    Kahan sum's padded 0 still applies its compensation. Only there is a difference this small not reported."""
    if scale is None or not a.dtype.is_floating_point:
        return torch.zeros(a.shape, dtype=torch.bool)
    eps = torch.finfo(a.dtype).eps
    return (a - b).abs() <= 8 * eps * torch.maximum(torch.maximum(a.abs(), b.abs()), scale.to(a.dtype))


def _item(x: torch.Tensor, where: tuple[int, ...]):
    idx = tuple(0 if n == 1 else i for n, i in zip(x.shape, where[len(where) - x.dim():]))
    return _text(x[idx].item())


def _text(v) -> str:
    return f"{v:.9g}" if isinstance(v, float) else str(v)  # 9 digits: any f32 exactly


def _pos(where: tuple[int, ...]) -> str:
    return f" at tile element {list(where[1:])}" if len(where) > 1 else ""


class Carried:
    """A carried tile's state: its shadow (the value had every padded lane it took in held the identity of the op
    that took it in; None: the value itself), its lanes that hold no data (nothing but constants and padding; a bool
    tensor that broadcasts to it, None: none), the load whose padding its lanes without data hold, and (span,
    identity, load) of the op where padding first entered its shadow. `initial`: a loop's init, as loaded (its
    lanes without data are a load's padding, which no op has taken in yet)."""
    __slots__ = ("shadow", "nodata", "origin", "entered", "initial")

    def __init__(self, shadow, nodata, origin, entered, initial=False):
        self.shadow, self.nodata, self.origin, self.entered = shadow, nodata, origin, entered
        self.initial = initial


CLEAN = Carried(None, None, None, None)
_ALL = torch.ones((), dtype=torch.bool)
_NONE = torch.zeros((), dtype=torch.bool)


class _Loop:
    """An scf.for's carried states: from its inits, through each iteration's yields, to its results. A result's
    lanes that never took in data are padding after the loop, as a load's are (the rows of a block past the last
    row; the lanes of the one column block that lie past the row's end)."""

    def __init__(self, lanes: PaddedLanes, inits, iters, yields, outs, updates):
        self.lanes, self.inits, self.iters, self.yields, self.outs = lanes, inits, iters, yields, outs
        self.updates = updates

    def _passed(self, env, values):
        return [self.lanes._state(env, v) or self.lanes._plain(env, v) for v in values]

    def enter(self, env) -> list:
        """The inits' states: an init no loop carried and a load padded (`var m = load(...)`) is marked initial, so
        that the first fold into it takes its padded lanes in as the fold's identity (_initial_padding)."""
        lanes = self.lanes
        return [Carried(None, st.nodata, st.origin, None, initial=True)
                if lanes._state(env, v) is None and st.origin is not None and st.nodata is not None else st
                for v, st in zip(self.inits, self._passed(env, self.inits))]

    def begin(self, env, states):
        self.lanes._set_states(env, self.iters, states)

    def yielded(self, env) -> list:
        """The yields' states. Where an accumulator's update took in this iteration's padding (its lanes that the
        padded-lanes masks mark), its shadow keeps the value it had before the update: the padded element left out,
        as if it were not there. Past the identities put in at folds (acc + t), this catches padding that enters
        before the fold (Welford's mean + (t - mean) / n, a Kahan sum's compensation)."""
        states = self._passed(env, self.yields)
        lanes = self.lanes
        for i, (it, y) in enumerate(zip(self.iters, self.yields)):
            padded = lanes._padded(env, y)
            if padded is None or y not in lanes.accumulating or it not in lanes.carried:
                continue
            st, before = states[i], lanes._state(env, it)
            old = before.shadow if before is not None and before.shadow is not None else env[it]
            new = st.shadow if st.shadow is not None else env[y]
            kept = torch.where(padded.mask, old, new)
            if _identical(kept, new):
                continue
            entered = st.entered or (self.updates[i], None, padded.origin)
            states[i] = Carried(kept, st.nodata, st.origin or padded.origin, entered)
        return states

    def leave(self, env, states):
        self.lanes._set_states(env, self.outs, states)
        for out, st in zip(self.outs, states):
            mask = self.lanes.masks.get(out)
            if mask is not None:
                padded = st.nodata is not None and st.origin is not None and bool(st.nodata.any())
                env[mask] = Padded(st.nodata, st.origin) if padded else None


def _branch_yields(op) -> list:
    """What each region of an scf.if yields (nothing for an absent else)."""
    return [list(list(r.blocks[0].operations)[-1].operation.operands) if len(r.blocks) else [] for r in op.regions]


def _is_step(op, kind: str | None = None) -> bool:
    """Whether op is a network's step (NETWORK_STEP: a reduction over pairs that moves elements), of kind."""
    return op.name == "tle.reduce" and NETWORK_STEP in str(op.location) and \
        (kind is None or ir.StringAttr(op.attributes["kind"]).value == kind)


def _axis(op) -> int:
    return ir.IntegerAttr(op.attributes["axis"]).value


def _either_lane(lanes):
    """The lanes set in any of lanes (None: none)."""
    lanes = [m for m in lanes if m is not None]
    if not lanes:
        return None
    out = lanes[0]
    for m in lanes[1:]:
        out = out | m
    return out


def _initial_padding(st: "Carried | None") -> "Padded | None":
    """An accumulator's lanes that a load padded before the loop (`var m = load(x, ...)` of a ragged block, then
    m = max(m, t)): the loop's init as loaded (Carried.initial: the first iteration only), its lanes without data.
    The fold takes them in as its identity, as it does a contribution's padded lanes. Lanes of a constant
    (`full(-inf)`, `zeros`) are no padding: a kernel starts from them on purpose."""
    if st is None or not st.initial or st.nodata is _ALL:
        return None
    return Padded(st.nodata, st.origin)


def _both(lanes):
    """The lanes set in all of lanes (None: none, as where one of them is None)."""
    if not lanes or any(m is None for m in lanes):
        return None
    out = lanes[0]
    for m in lanes[1:]:
        out = out & m
    return out if bool(out.any()) else None


def _lanes(lanes, x: torch.Tensor) -> torch.Tensor:
    """lanes (None: none), which broadcast to x, expanded to x's shape."""
    return (_NONE if lanes is None else lanes).expand(x.shape)


def _bits_of(lanes):
    return _NONE if lanes is None else lanes


def _fold_identity(identity, dtype: torch.dtype):
    """A fold's identity in dtype: "min" / "max" are an integer type's extremes; a bool's -1 is True."""
    if dtype == torch.bool:
        return bool(identity)
    if isinstance(identity, str):
        info = torch.iinfo(dtype)
        return info.min if identity == "min" else info.max
    return identity


def _source(st: Carried) -> Origin:
    """The load whose padding made a carried tile's shadow differ from it."""
    return st.entered[2] if st.entered is not None else st.origin


def _combine_op(op) -> tuple:
    """A tle.combine_reduce or combine_scan as the checks read it: (a scan?, reversed?, its axis on the values'
    program-batched tensors, what messages call it, the results the kernel reads; one it drops is not checked: a
    recurrence's products of the decays, `let _, h = scan(...)`)."""
    scan = op.name == "tle.combine_scan"
    fn = ir.FlatSymbolRefAttr(op.attributes["combine"]).value.split(".")[1]
    return (scan, scan and "reverse" in op.attributes, ir.IntegerAttr(op.attributes["axis"]).value + 1,
            f"{'scan' if scan else 'reduce'} with combine fn '{fn}'",
            [j for j, r in enumerate(op.results) if any(True for _ in r.uses)])


def _combined_note(identities) -> str:
    if identities is None:
        return ("give the scan or reduce identity=[...] (values the fn leaves any element unchanged with) and the "
                "load that pad, or set the lanes with where(inside, x, identity) before it")
    shown = ", ".join(str(i).lower() if isinstance(i, bool) else repr(i) for i in identities)
    return (f"pad each operand's load with its value in identity=[{shown}], or set the lanes with "
            f"where(inside, x, identity) before it")


def _changed_on_the_way(origin: Origin, what: str, identity, held) -> str:
    """The advice for a reduction or scan whose padded lanes hold other than its identity. Where the pad is the
    identity already, the ops between the load and here changed it (attention's scores of padded keys are 0, and
    reach the softmax's sum as exp(0 - max)), and no pad= helps: the lanes must be set just before the op."""
    if isinstance(origin.pad, bool) or not _numbers_equal(origin.pad, identity):
        return _NOTE_GATHERED if origin.gathered else _NOTE
    given = "its other=" if origin.gathered else "its pad"
    return (f"{given}, {_text(origin.pad)}, is what {what} leaves unchanged, but the ops between change it: the lanes "
            f"reach {what} holding {_text(held)}, so no {'other' if origin.gathered else 'pad'}= helps; set them "
            f"just before it, where(inside, x, {_text(identity)}) (for attention or a softmax over padded keys, mask "
            f"the scores before the max: where(cols < N, s, -inf))")


def _numbers_equal(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def _sort_note(descending: bool, top: bool) -> str:
    last = "-inf" if descending else "inf"
    which = "topk and argtopk" if top else "a descending sort" if descending else "an ascending sort"
    return (f"the lanes of a load outside its tensor hold the load's pad (0 unless given), on the GPU as here: pad it "
            f"with a value that sorts last, {last} for {which} (an integer type's "
            f"{'smallest' if descending else 'largest'} value), or set the lanes with where(inside, x, {last}) "
            f"before it")


def _entered_notes(st: Carried) -> list:
    if st.entered is None:
        return []
    span, identity, _ = st.entered
    if identity is None:
        return [Note("here the loop's carried value takes the padded lanes in: keep its lanes as they were there "
                     "(where(inside, update, before)), or reduce the padding out inside the loop", span)]
    return [Note(f"here the loop's carried value takes the padded lanes in: put {_text(identity)} in them first "
                 f"(where(inside, ..., {_text(identity)})), or reduce them inside the loop", span)]
