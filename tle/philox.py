"""Counter-based random numbers: `randint`, `rand` and `randn` expand here into typed integer and float ops.

The generator is Philox4x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) with the
constants, key schedule and conversions of Triton's `triton.language.random`. So `randint(seed, offset)` gives the
same 32 bits as `tl.randint(seed, offset)` and `rand` the same f32 as `tl.rand`, bit for bit, for the same seed,
offsets and rounds: a dropout mask made by a tle kernel and by a Triton kernel agree. `randn` follows `tl.randn`'s
Box-Muller transform; its log, sqrt and cos round as each path's math functions do (docs/numerics.md).

Why an expansion and not an op: each round is a handful of 32-bit multiplies and xors that both GPU paths and the
interpreter already have, plus one unsigned high multiply (`umulhi`). Expanded in the checker, every later stage
sees only ordinary ops, the TTIR is op for op what Triton's front end builds for `tl.rand`, and nothing below the
checker needs to know what Philox is.

Each call counts: `offset` (i32 or i64, scalar or tile) is the counter's first word (and, for i64, its second),
`seed` (a scalar integer) is the key. The state of every round is bound to a fresh immutable variable, so the
typed tree stays linear in `rounds` (a tree with shared operands would be emitted once per use).
"""
from __future__ import annotations

from . import typed as T
from .types import Scalar, Tile, wrap

ROUNDS = 10  # Triton's N_ROUNDS_DEFAULT; Random123 recommends 10 for Philox4x32 (7 pass its statistical tests)
MAX_ROUNDS = 64
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85  # the key schedule's increments (golden ratio, sqrt(3) - 1)
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57  # the round multipliers
# The largest f32 below 2**-31 such that (2**31 - 1) * scale, rounded to f32, is still below 1.0 (Triton's).
UNIFORM_SCALE = 4.6566127342e-10
TWO_PI = 6.283185307179586
NORMAL_FLOOR = 1.0e-7  # Box-Muller's log(u) needs u > 0


def generate(ck, kind: str, seed: T.Expr, offset: T.Expr, rounds: int, words: int, span) -> T.Expr:
    """The typed expression of `kind` ("randint", "rand" or "randn") for a checked scalar integer seed and an i32
    or i64 offset. words=1: the first of Philox's four output words per offset, a value of the offsets' shape.
    words=4: all four (Triton's randint4x / rand4x / randn4x), along a new last axis of 4. `ck` is the kernel
    checker: its `binary`, `umulhi`, `convert`, `coerce`, `join` and `temp` build and fold the ops."""
    seed, offset = ck.temp("seed", seed, span), ck.temp("offset", offset, span)  # each is read more than once
    state = _philox(ck, seed, offset, rounds, span)
    shape = offset.type.shape if isinstance(offset.type, Tile) else None
    if kind == "randint":
        out = list(state)
    elif kind == "rand":
        out = [_uniform(ck, ck.temp("philox_word", w, span), span) for w in state]
    else:
        # randn: Box-Muller on pairs of words; one pair's cosine branch (as tl.randn), or both branches of both
        # pairs (as tl.randn4x)
        out = []
        for i in (0, 2):
            u1 = _uniform(ck, ck.temp("philox_word", state[i], span), span)
            u2 = _uniform(ck, ck.temp("philox_word", state[i + 1], span), span)
            u1 = ck.binary("max", _f32(NORMAL_FLOOR, span), u1, span)
            theta = ck.temp("box_muller_theta", ck.binary("*", _f32(TWO_PI, span), u2, span), span)
            log_u1 = T.Op(span, u1.type, "log", [u1])
            radius = ck.temp("box_muller_radius",
                             _unary("sqrt", ck.binary("*", _f32(-2.0, span), log_u1, span), span), span)
            out.append(ck.binary("*", radius, _unary("cos", theta, span), span))
            if words == 1:
                break
            out.append(ck.binary("*", radius, _unary("sin", theta, span), span))
    if words == 1:
        return _shaped(ck, out[0], shape)
    out = [_shaped(ck, w, shape or (1,)) for w in out]
    # join's new axis is the last: [..., a, b] of join(join(w0, w2), join(w1, w3)) is word 2a + b
    four = ck.join(ck.join(out[0], out[2], span), ck.join(out[1], out[3], span), span)
    shape4 = (shape or ()) + (4,)
    return T.Op(span, Tile(four.type.dtype, shape4), "reshape", [four])


def _philox(ck, seed, offset, rounds, span):
    k0, k1 = _key(ck, seed, span)
    if offset.type.dtype == "i64":  # a 64-bit counter word: low half first, as Triton's randint4x
        c0 = ck.temp("offset_lo", ck.convert(offset, "i32", span), span)
        c1 = ck.temp("offset_hi", ck.convert(ck.binary(">>", offset, _i(32, span, "i64"), span), "i32", span), span)
    else:
        c0, c1 = offset, _i(0, span)
    c2 = c3 = _i(0, span)
    a, b = _i(wrap(ROUND_A, "i32"), span), _i(wrap(ROUND_B, "i32"), span)
    for r in range(rounds):
        x0, x2 = c0, c2
        c0 = ck.temp("philox_c0", _xor(ck, _xor(ck, ck.umulhi(b, x2, span), c1, span), k0, span), span)
        c2 = ck.temp("philox_c2", _xor(ck, _xor(ck, ck.umulhi(a, x0, span), c3, span), k1, span), span)
        c1 = ck.temp("philox_c1", ck.binary("*", b, x2, span), span)
        c3 = ck.temp("philox_c3", ck.binary("*", a, x0, span), span)
        if r + 1 < rounds:  # the last round's key is never read
            k0 = ck.temp("philox_k0", ck.binary("+", k0, _i(wrap(KEY_A, "i32"), span), span), span)
            k1 = ck.temp("philox_k1", ck.binary("+", k1, _i(wrap(KEY_B, "i32"), span), span), span)
    return c0, c1, c2, c3


def _key(ck, seed, span):
    """The seed's 64 bits as two i32 key words, low first. An i32 seed is sign-extended first (Triton converts a
    signed seed to u64 the same way)."""
    if isinstance(seed, T.Const):
        bits = seed.value & 0xFFFFFFFFFFFFFFFF
        return _i(wrap(bits, "i32"), span), _i(wrap(bits >> 32, "i32"), span)
    if seed.type.dtype == "i32":
        return seed, ck.temp("seed_hi", ck.binary(">>", seed, _i(31, span), span), span)
    lo = ck.temp("seed_lo", ck.convert(seed, "i32", span), span)
    hi = ck.temp("seed_hi", ck.convert(ck.binary(">>", seed, _i(32, span, "i64"), span), "i32", span), span)
    return lo, hi


def _uniform(ck, x, span):
    """Triton's uint_to_uniform_float for 32 bits: fold the negative half onto the positive (-x - 1 maps
    -2**31..-1 onto 2**31 - 1..0), then scale into [0, 1)."""
    negative = ck.binary("<", x, _i(0, span), span)
    folded = ck.binary("-", T.Op(span, x.type, "neg", [x]), _i(1, span), span)
    x = T.Op(span, x.type, "where", [negative, folded, x])
    return ck.binary("*", x, T.Const(span, Scalar("f32"), UNIFORM_SCALE, weak=True), span)


def _xor(ck, a, b, span):
    if isinstance(a, T.Const) and a.value == 0:  # the first rounds xor with words still zero
        return b
    if isinstance(b, T.Const) and b.value == 0:
        return a
    return ck.binary("^", a, b, span)


def _shaped(ck, x, shape):
    """x broadcast to the offsets' shape: with one round, the first word does not depend on the offsets yet."""
    if shape is None or (isinstance(x.type, Tile) and x.type.shape == shape):
        return x
    return ck.coerce(x, Tile(x.type.dtype, shape))


def _unary(name, x, span):
    return T.Op(span, x.type, name, [x])


def _i(v: int, span, dtype: str = "i32") -> T.Const:
    return T.Const(span, Scalar(dtype), v)


def _f32(v: float, span) -> T.Const:
    return T.Const(span, Scalar("f32"), v, weak=True)
