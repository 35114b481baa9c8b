"""Random valid tle kernels as text, each with a torch reference computed from the same expression tree.

    prog = generate(random.Random(seed))         # a RandomProgram
    prog.source, prog.kernel                      # the .tle text and the kernel's name
    inputs = prog.make_inputs(seed, "cpu")        # {param: tensor}, outputs zero-filled, on any torch device
    ...launch prog.kernel on prog.grid with inputs (tensors in parameter order: prog.params)...
    for name, want in prog.reference(inputs).items():
        problem = check(inputs[name], want, *prog.gpu_tolerance[name])   # or prog.tolerance: the interpreter's
        assert problem is None, problem

Three shapes of kernel, on ragged tensor shapes (never a multiple of the tile) and power-of-two tiles:
- "elementwise": 2-D tiles of up to three inputs through a random expression (unary math, binary arithmetic,
  min/max, where, casts between f32/f16/bf16, literals), stored cast to the output type; a third of them on one
  window (`slice`) of every tensor, from a run-time row and a constant column;
- "rows": one tile per row block holding whole rows, an expression, then sum/max/min/argmax/argmin/cumsum/
  cummax/a reverse cumsum/flip over the row (padding masked out with where), a softmax-like normalisation, a sum by
  `reduce` with a combine fn, and a discounted running sum by `scan` with one;
- "matmul": a K loop of dot(f(a_tile), b_tile, acc) with f16/bf16/f32 operands and an f32 accumulator, then an
  elementwise epilogue.

The reference follows the language's numerics (docs/numerics.md): f16/bf16 elementwise ops are computed in f32
and rounded once per op; literals take the type of the other operand; f16 with bf16 promotes to f32; sigmoid is
1 / (1 + exp(-x)) with each op rounded. `tolerance` is what the interpreter is held to (it runs the same torch
ops as the reference, so elementwise results must match bit for bit); `gpu_tolerance` allows a few ulps per op
of the widest type involved, as docs/numerics.md does.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from tle.types import promote

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}
# Literals exactly representable in every float type, so the reference needs no rounding rule for them.
LITERALS = ("0.5", "1.5", "2.0", "0.25", "3.0", "1.0")
# The spacing of floats just above 1.0 (an ulp, relative), per type.
ULP = {"f32": 2 ** -23, "f16": 2 ** -10, "bf16": 2 ** -7}


@dataclass
class RandomProgram:
    source: str
    kernel: str
    reference: Callable[[dict], dict]
    make_inputs: Callable[..., dict]
    grid: tuple[int, int, int]
    params: list[str]  # the kernel's parameters in order (tensors; no scalars)
    outputs: list[str]
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)  # the interpreter's: (rtol, atol)
    gpu_tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)  # a GPU backend's
    kind: str = ""

    def __iter__(self):  # (source, kernel name, reference, make_inputs), as the generator's contract says
        return iter((self.source, self.kernel, self.reference, self.make_inputs))


# ---- expression trees ------------------------------------------------------------------------------------------------
@dataclass
class Node:
    text: str
    dtype: str  # "" for a weak literal (it takes the other operand's type)
    eval: Callable[[dict], torch.Tensor | float]
    depth: int = 0


def _in_f32(fn, dtype):
    """Apply fn the way the language does: f16/bf16 computed in f32, rounded once."""
    def apply(*xs):
        if dtype in ("f16", "bf16"):
            return fn(*[x.float() for x in xs]).to(TORCH[dtype])
        return fn(*xs)
    return apply


def _as(x, dtype):
    """A reference value as a tensor of dtype (a literal becomes a scalar tensor of that type)."""
    if isinstance(x, torch.Tensor):
        return x.to(TORCH[dtype])
    return torch.tensor(x, dtype=TORCH[dtype])


def leaf(name: str, dtype: str) -> Node:
    return Node(name, dtype, lambda env: env[name])


def literal(rng: random.Random) -> Node:
    v = rng.choice(LITERALS)
    return Node(v, "", lambda env: float(v))


def _sqrt(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded root (IEEE, the GPU's sqrt.rn, the interpreter's): torch's CPU sqrt is 1 ulp off for
    about 0.6% of f32 inputs, which made this reference fail the interpreter's exact match at random."""
    return torch.from_numpy(np.sqrt(x.contiguous().numpy())) if x.dtype in (torch.float32, torch.float64) \
        else torch.sqrt(x)


def unary(op: str, a: Node) -> Node:
    d = a.dtype or "f32"
    t = a.text
    simple = {"neg": (f"-({t})", torch.neg), "abs": (f"abs({t})", torch.abs), "tanh": (f"tanh({t})", torch.tanh),
              "sin": (f"sin({t})", torch.sin), "cos": (f"cos({t})", torch.cos), "erf": (f"erf({t})", torch.erf),
              "floor": (f"floor({t})", torch.floor), "round": (f"round({t})", torch.round),
              "trunc": (f"trunc({t})", torch.trunc), "exp_tanh": None, "sqrt_abs": None, "log1p_abs": None,
              "sigmoid": None}
    f = lambda fn: _in_f32(fn, d)  # noqa: E731
    if simple.get(op):
        text, fn = simple[op]
        return Node(text, d, lambda env: f(fn)(_as(a.eval(env), d)), a.depth + 1)
    if op == "exp_tanh":  # bounded: exp of a tanh
        return Node(f"exp(tanh({t}))", d, lambda env: f(torch.exp)(f(torch.tanh)(_as(a.eval(env), d))), a.depth + 1)
    if op == "sqrt_abs":
        return Node(f"sqrt(abs({t}))", d, lambda env: f(_sqrt)(f(torch.abs)(_as(a.eval(env), d))), a.depth + 1)
    if op == "log1p_abs":
        return Node(f"log(abs({t}) + 1.0)", d,
                    lambda env: f(torch.log)(f(torch.add)(f(torch.abs)(_as(a.eval(env), d)), _as(1.0, d))),
                    a.depth + 1)
    if op == "sigmoid":  # lowered as 1 / (1 + exp(-x)), each op rounded
        def sig(env):
            x = _as(a.eval(env), d)
            return f(torch.div)(_as(1.0, d), f(torch.add)(_as(1.0, d), f(torch.exp)(f(torch.neg)(x))))
        return Node(f"sigmoid({t})", d, sig, a.depth + 1)
    raise ValueError(op)


UNARY = ("neg", "abs", "tanh", "sin", "cos", "erf", "floor", "round", "trunc", "exp_tanh", "sqrt_abs", "log1p_abs",
         "sigmoid")
ZERO_PRESERVING = ("neg", "abs", "tanh", "sin", "erf", "floor", "round", "trunc", "sqrt_abs", "log1p_abs")


def common(a: Node, b: Node) -> str:
    if not a.dtype and not b.dtype:
        return "f32"
    if not a.dtype or not b.dtype:
        return a.dtype or b.dtype
    return promote(a.dtype, b.dtype)


def binary(op: str, a: Node, b: Node) -> Node:
    d = common(a, b)
    x, y = a.text, b.text
    depth = max(a.depth, b.depth) + 1
    f = lambda fn: _in_f32(fn, d)  # noqa: E731
    ev = lambda n, env: _as(n.eval(env), d)  # noqa: E731
    if op in "+-*":
        fn = {"+": torch.add, "-": torch.sub, "*": torch.mul}[op]
        return Node(f"({x} {op} {y})", d, lambda env: f(fn)(ev(a, env), ev(b, env)), depth)
    if op in ("max", "min"):
        fn = torch.maximum if op == "max" else torch.minimum
        return Node(f"{op}({x}, {y})", d, lambda env: f(fn)(ev(a, env), ev(b, env)), depth)
    # In `abs(y) + 1.0` and `y * 0.5` the literal takes y's type, so those ops round in y's type; only then is
    # the result converted to the common type.
    db = b.dtype or "f32"
    fb = lambda fn: _in_f32(fn, db)  # noqa: E731
    if op == "div":  # a / (|b| + 1): no division by zero
        return Node(f"({x} / (abs({y}) + 1.0))", d,
                    lambda env: f(torch.div)(ev(a, env), _as(fb(torch.add)(fb(torch.abs)(_as(b.eval(env), db)),
                                                                           _as(1.0, db)), d)), depth)
    if op == "where":
        return Node(f"where({x} > {y}, {x}, {y} * 0.5)", d,
                    lambda env: torch.where(ev(a, env) > ev(b, env), ev(a, env),
                                            _as(fb(torch.mul)(_as(b.eval(env), db), _as(0.5, db)), d)), depth)
    raise ValueError(op)


BINARY = ("+", "-", "*", "max", "min", "div", "where")


def cast(dtype: str, a: Node) -> Node:
    return Node(f"cast<{dtype}>({a.text})", dtype, lambda env: _as(a.eval(env), a.dtype or "f32").to(TORCH[dtype]),
                a.depth + 1)


def expression(rng: random.Random, leaves: list[Node], depth: int, unary_ops=UNARY) -> Node:
    """A random expression over `leaves` of at most `depth` levels; never a bare literal."""
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(leaves)
    r = rng.random()
    if r < 0.35:
        return unary(rng.choice(unary_ops), expression(rng, leaves, depth - 1, unary_ops))
    if r < 0.45:
        return cast(rng.choice(("f32", "f16", "bf16")), expression(rng, leaves, depth - 1, unary_ops))
    a = expression(rng, leaves, depth - 1, unary_ops)
    b = literal(rng) if rng.random() < 0.25 else expression(rng, leaves, depth - 1, unary_ops)
    if rng.random() < 0.5:
        a, b = b, a
    if not a.dtype and not b.dtype:
        b = rng.choice(leaves)
    return binary(rng.choice(BINARY), a, b)


def _coarsest(text: str, dtype: str) -> str:
    """The least precise float type an expression's text rounds to (its leaves being of type dtype)."""
    types = [dtype] + [t for t in ("f16", "bf16") if f"cast<{t}>" in text]
    return max(types, key=lambda t: ULP[t])


def _tolerance(dtype: str, ops: int) -> tuple[float, float]:
    """A GPU's error bound: each op may be off by a few ulps of its type (approximate exp, sin, div; FMA)."""
    u = ULP[dtype if dtype in ULP else "f32"]
    return 4 * ops * u, 4 * ops * u


def _ragged(rng: random.Random, tile: int, most: int) -> int:
    """A size that is no multiple of the tile (unless the tile is 1)."""
    while True:
        n = rng.randint(1, most)
        if tile == 1 or n % tile:
            return n


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _randn(seed: int, shape, dtype: str, device, scale: float = 1.5) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(TORCH[dtype]).to(device)


# ---- the three kinds of kernel ---------------------------------------------------------------------------------------
def elementwise_program(rng: random.Random) -> RandomProgram:
    bm, bn = rng.choice((1, 2, 4, 8, 16, 32)), rng.choice((1, 2, 4, 8, 16, 32, 64))
    m, n = _ragged(rng, bm, 3 * bm + 3), _ragged(rng, bn, 3 * bn + 3)
    count = rng.randint(1, 3)
    dtypes = [rng.choice(("f32", "f32", "f16", "bf16")) for _ in range(count)]
    leaves = [leaf(f"a{i}", d) for i, d in enumerate(dtypes)]
    e = expression(rng, leaves, rng.randint(1, 4))
    out_dtype = rng.choice(("f32", "f16", "bf16"))
    params = [f"x{i}: tensor<{d}>[M, N]" for i, d in enumerate(dtypes)] + [f"out: tensor<{out_dtype}>[M, N]"]
    # A third of them work on one window of the tensors instead (slice), drawn last so that the others stay as they
    # were: rows from M - R (a run-time start) and columns from a constant, h0 x h1 elements; the rest of out is
    # never written (stays zero).
    h0, h1 = rng.randint(1, m), rng.randint(1, n)
    r0, s1 = rng.randint(h0, m), rng.randint(0, n - h1)  # rows start at m - r0
    window = rng.random() < 1 / 3
    at = f"start=[M - {r0}, {s1}], shape=[{h0}, {h1}]"
    src = (lambda t: f"slice({t}, {at})") if window else (lambda t: t)
    loads = "\n".join(f"    let a{i} = load({src(f'x{i}')}, tile=[BM, BN], at=[pm, pn])" for i in range(count))
    source = f"""kernel rand_elementwise<BM: int = {bm}, BN: int = {bn}>({", ".join(params)}) {{
    let pm = program_id(0)
    let pn = program_id(1)
{loads}
    store({src("out")}, cast<{out_dtype}>({e.text}), at=[pm, pn])
}}
"""
    rows, cols = (slice(m - r0, m - r0 + h0), slice(s1, s1 + h1)) if window else (slice(0, m), slice(0, n))

    def make_inputs(seed: int = 0, device="cpu") -> dict:
        t = {f"x{i}": _randn(seed + i, (m, n), d, device) for i, d in enumerate(dtypes)}
        t["out"] = torch.zeros(m, n, dtype=TORCH[out_dtype], device=device)
        return t

    def reference(inputs: dict) -> dict:
        env = {f"a{i}": inputs[f"x{i}"][rows, cols] for i in range(count)}
        out = torch.zeros(m, n, dtype=TORCH[out_dtype], device=inputs["out"].device)
        out[rows, cols] = _as(e.eval(env), e.dtype).to(TORCH[out_dtype])
        return {"out": out}

    worst = max(dtypes + [out_dtype], key=lambda d: ULP[d])
    grid = (_cdiv(h0, bm), _cdiv(h1, bn), 1) if window else (_cdiv(m, bm), _cdiv(n, bn), 1)
    return RandomProgram(source, "rand_elementwise", reference, make_inputs, grid,
                         [f"x{i}" for i in range(count)] + ["out"], ["out"], {"out": (0.0, 0.0)},
                         {"out": _tolerance(worst, 1 + e.depth)}, "elementwise:window" if window else "elementwise")


def rows_program(rng: random.Random) -> RandomProgram:
    bm = rng.choice((1, 2, 4, 8))
    bn = rng.choice((2, 4, 8, 16, 32, 64))
    m, n = _ragged(rng, bm, 3 * bm + 2), rng.randint(max(1, bn // 2), bn)  # the whole row is one tile
    dtype = rng.choice(("f32", "f32", "f16", "bf16"))
    leaves = [leaf("a0", dtype), leaf("a1", "f32")]
    e = cast("f32", expression(rng, leaves, rng.randint(1, 3)))
    kind = rng.choice(("sum", "max", "min", "argmax", "argmin", "cumsum", "softmax", "cummax", "rcumsum", "fnsum",
                       "fnscan", "flip"))
    neutral = {"sum": "0.0", "cumsum": "0.0", "max": "-inf", "argmax": "-inf", "softmax": "-inf", "min": "inf",
               "argmin": "inf", "cummax": "-inf", "rcumsum": "0.0", "fnsum": "0.0", "fnscan": "0.0", "flip": "0.0"}[kind]
    out_type, out_shape = ("i32", "[M]") if kind.startswith("arg") else ("f32", "[M]")
    if kind in ("cumsum", "softmax", "cummax", "rcumsum", "fnscan", "flip"):
        out_shape = "[M, N]"
    body = {
        "sum": "store(out, sum(v, axis=1), at=[pm])",
        "max": "store(out, max(v, axis=1), at=[pm])",
        "min": "store(out, min(v, axis=1), at=[pm])",
        "argmax": "store(out, argmax(v, axis=1), at=[pm])",
        "argmin": "store(out, argmin(v, axis=1), at=[pm])",
        "cumsum": "store(out, cumsum(v, axis=1), at=[pm, 0])",
        "softmax": "let z = exp(v - max(v, axis=1, keepdims=true))\n"
                   "    store(out, z / sum(z, axis=1, keepdims=true), at=[pm, 0])",
        "cummax": "store(out, cummax(v, axis=1), at=[pm, 0])",
        "flip": "store(out, flip(v, axis=1), at=[pm, 0])",  # the row's padding (zeros) comes first
        "rcumsum": "store(out, cumsum(v, axis=1, reverse=true), at=[pm, 0])",
        "fnsum": "store(out, reduce(v, axis=1, combine=add, identity=0.0), at=[pm])",
        # h = h / 2 + v along the row: a scan of (decay, value) pairs
        "fnscan": "let _, h = scan(0.5, v, axis=1, combine=linear, identity=[1.0, 0.0])\n"
                  "    store(out, h, at=[pm, 0])",
    }[kind]
    fns = {"fnsum": "fn add(a, b) {\n    return a + b\n}\n",
           "fnscan": "fn linear(a1, b1, a2, b2) {\n    return a1 * a2, a2 * b1 + b2\n}\n"}.get(kind, "")
    source = fns + f"""kernel rand_rows<BM: int = {bm}, BN: int = {bn}>(x0: tensor<{dtype}>[M, N], x1: tensor<f32>[M, N],
                                                   out: tensor<{out_type}>{out_shape}) {{
    let pm = program_id(0)
    let a0 = load(x0, tile=[BM, BN], at=[pm, 0])
    let a1 = load(x1, tile=[BM, BN], at=[pm, 0])
    let inside = reshape(arange(0, BN), [1, BN]) < N
    let v = where(inside, {e.text}, {neutral})
    {body}
}}
"""

    def make_inputs(seed: int = 0, device="cpu") -> dict:
        shape = (m, n) if out_shape == "[M, N]" else (m,)
        return {"x0": _randn(seed, (m, n), dtype, device), "x1": _randn(seed + 1, (m, n), "f32", device),
                "out": torch.zeros(shape, dtype=TORCH[out_type], device=device)}

    def reference(inputs: dict) -> dict:
        v = e.eval({"a0": inputs["x0"], "a1": inputs["x1"]})
        if kind == "sum":
            r = v.double().sum(1).float()
        elif kind in ("max", "min"):
            r = v.amax(1) if kind == "max" else v.amin(1)
        elif kind in ("argmax", "argmin"):  # the first index of the extreme; NaN is the extreme
            r = (v.argmax(1) if kind == "argmax" else v.argmin(1)).to(torch.int32)
        elif kind == "cumsum":
            r = v.double().cumsum(1).float()
        elif kind == "cummax":
            r = torch.cummax(v, 1).values
        elif kind == "flip":
            r = torch.cat([v, torch.zeros(v.shape[0], bn - v.shape[1], dtype=v.dtype)], 1).flip(1)[:, :v.shape[1]]
        elif kind == "rcumsum":
            r = v.double().flip(1).cumsum(1).flip(1).float()
        elif kind == "fnsum":
            r = v.double().sum(1).float()
        elif kind == "fnscan":
            r, h = torch.empty_like(v, dtype=torch.float64), torch.zeros(v.shape[0], dtype=torch.float64)
            for i in range(v.shape[1]):
                h = 0.5 * h + v[:, i].double()
                r[:, i] = h
            r = r.float()
        else:
            z = torch.exp(v - v.amax(1, keepdim=True))
            r = (z.double() / z.double().sum(1, keepdim=True)).float()
        return {"out": r}

    gpu = _tolerance(dtype, 1 + e.depth)
    if kind in ("sum", "cumsum", "softmax", "rcumsum", "fnsum", "fnscan"):  # f32 sums in another order
        interp = (0.0, 4 * n * ULP["f32"])
        gpu = (gpu[0], max(gpu[1], 4 * n * ULP["f32"]))
    else:  # max, min, cummax, flip and the arg* pick an element: the interpreter computes the same elements as the reference
        interp = (0.0, 0.0)
    # An arg* compares indices: exact, also for a GPU (near-ties after different rounding show up here).
    if kind.startswith("arg"):
        gpu = (0.0, 0.0)
    return RandomProgram(source, "rand_rows", reference, make_inputs, (_cdiv(m, bm), 1, 1), ["x0", "x1", "out"],
                         ["out"], {"out": interp}, {"out": gpu}, f"rows:{kind}")


def matmul_program(rng: random.Random) -> RandomProgram:
    bm, bn, bk = rng.choice((16, 32)), rng.choice((16, 32)), rng.choice((16, 32))
    m, n, k = _ragged(rng, bm, 70), _ragged(rng, bn, 70), _ragged(rng, bk, 70)
    dtype = rng.choice(("f16", "bf16", "f32"))
    tf32 = dtype == "f32" and rng.random() < 0.3
    pre = expression(rng, [leaf("ta", dtype)], rng.randint(0, 2), ZERO_PRESERVING)  # f(0) = 0: padding adds 0
    pre = cast(dtype, pre)
    post = expression(rng, [leaf("acc", "f32")], rng.randint(0, 2))
    post = cast("f32", post)
    source = f"""kernel rand_matmul<BM: int = {bm}, BN: int = {bn}, BK: int = {bk}>(
        a: tensor<{dtype}>[M, K], b: tensor<{dtype}>[K, N], c: tensor<f32>[M, N]) {{
    let pm = program_id(0)
    let pn = program_id(1)
    var acc = zeros<f32>[BM, BN]
    for k in range(cdiv(K, BK)) {{
        let ta = load(a, tile=[BM, BK], at=[pm, k])
        acc = dot({pre.text}, load(b, tile=[BK, BN], at=[k, pn]), acc{", tf32=true" if tf32 else ""})
    }}
    store(c, {post.text}, at=[pm, pn])
}}
"""

    def make_inputs(seed: int = 0, device="cpu") -> dict:
        return {"a": _randn(seed, (m, k), dtype, device, 1.0), "b": _randn(seed + 1, (k, n), dtype, device, 1.0),
                "c": torch.zeros(m, n, device=device)}

    def reference(inputs: dict) -> dict:
        fa = pre.eval({"ta": inputs["a"]})
        b = inputs["b"]
        if tf32:
            fa, b = _tf32(fa), _tf32(b)
        acc = (fa.double() @ b.double()).float()
        return {"c": post.eval({"acc": acc})}

    # The f32 sum over K runs in another order; tensor cores round differently again. A cast to f16/bf16 in the
    # epilogue can turn that into an ulp of the narrower type, which later ops may amplify.
    coarse = _coarsest(post.text, "f32")
    epilogue = 0.0 if coarse == "f32" else 4 * (1 + post.depth) * ULP[coarse]
    interp = (epilogue, 4 * k * ULP["f32"])
    gpu = (max(epilogue, 1e-5 if dtype == "f32" and not tf32 else 2e-3),
           max(8 * k * ULP["f32"], 2e-3 if tf32 else 0.0))
    return RandomProgram(source, "rand_matmul", reference, make_inputs, (_cdiv(m, bm), _cdiv(n, bn), 1),
                         ["a", "b", "c"], ["c"], {"c": interp}, {"c": gpu}, "matmul")


def _tf32(x: torch.Tensor) -> torch.Tensor:
    bits = x.float().view(torch.int32).to(torch.int64)
    bits = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF)
    return torch.where(torch.isfinite(x), (bits & 0xFFFFFFFF).to(torch.int32).view(torch.float32), x)


def generate(rng: random.Random) -> RandomProgram:
    """One random kernel: elementwise (half the time), row reductions or matmul."""
    r = rng.random()
    if r < 0.5:
        return elementwise_program(rng)
    if r < 0.75:
        return rows_program(rng)
    return matmul_program(rng)


def check(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> str | None:
    """None when every element satisfies |got - want| <= atol * scale + rtol * |want|, scale = max(1, max |want|)
    (atol is relative to the output's magnitude: cancellation leaves errors of the size of the operands), NaN
    matching NaN and inf matching the same inf; otherwise a description of the worst element."""
    g, w = got.double().cpu(), want.double().cpu()
    if g.shape != w.shape:
        return f"shape {tuple(g.shape)} != {tuple(w.shape)}"
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    finite = w[torch.isfinite(w)]
    scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
    excess = torch.where(same, torch.zeros_like(g), (g - w).abs() - atol * scale - rtol * w.abs())
    excess = torch.nan_to_num(excess, nan=float("inf"))
    if (excess <= 0).all():
        return None
    i = int(excess.argmax())
    return (f"element {i}: got {g.flatten()[i].item()!r}, want {w.flatten()[i].item()!r} "
            f"(rtol {rtol:g}, atol {atol:g}; {(excess > 0).sum().item()} of {excess.numel()} differ)")
