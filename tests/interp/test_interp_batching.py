"""The interpreter's ways of running the same kernel agree: programs one by one, in lockstep chunks of any size,
and the three memory paths (one strided window, windows per run of programs, index tensors)."""
import random

import pytest
import torch

import tle.runtime.interpreter as interp
from interp_harness import abi_args, build, cdiv, run, transposed
from program_gen import generate
from tle.diagnostics import TleError
from tle.runtime.interpreter import compile_kernel


def outputs_of(prog, seed, generic, configure):
    kernel, spec, module = build(prog.source, prog.kernel, spec="generic" if generic else "default")
    compiled = compile_kernel(module)
    configure(compiled)
    inputs = prog.make_inputs(seed, "cpu")
    if generic:
        inputs = {k: transposed(v) if v.dim() == 2 and min(v.shape) > 1 and k not in prog.outputs else v
                  for k, v in inputs.items()}
    compiled.run(prog.grid, abi_args(kernel, spec, inputs))
    return {k: inputs[k] for k in prog.outputs}


def one_by_one(c):
    c.batched, c.programs_per_chunk = False, 1


def chunks_of_3(c):
    c.programs_per_chunk = 3


def same(a, b):
    return torch.equal(a, b) or torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])


@pytest.mark.parametrize("seed", range(12))
def test_schedules_and_memory_paths_agree(seed, monkeypatch):
    prog = generate(random.Random(1000 + seed))
    generic = seed % 2 == 1
    want = outputs_of(prog, seed, generic, lambda c: None)
    for configure in (one_by_one, chunks_of_3):
        got = outputs_of(prog, seed, generic, configure)
        assert all(same(got[k], want[k]) for k in want), (configure.__name__, prog.source)
    monkeypatch.setattr(interp, "_MAX_WINDOWS", 0)  # every batched load/store through index tensors
    got = outputs_of(prog, seed, generic, lambda c: None)
    assert all(same(got[k], want[k]) for k in want), ("index tensors", prog.source)


TILES_2D = """
kernel copy2d<BM: int = 4, BN: int = 8>(x: tensor<f32>[M, N], y: tensor<f32>[M, N]) {
    let pm = program_id(0)
    let pn = program_id(1)
    store(y, load(x, tile=[BM, BN], at=[pm, pn], pad=9.0) * 2.0, at=[pm, pn])
}
"""


@pytest.mark.parametrize("shape", [(13, 29), (4, 8), (1, 1), (70, 3), (3, 70)])
@pytest.mark.parametrize("layout", ["default", "transposed", "overlapping"])
def test_2d_tiles_over_a_2d_grid(shape, layout):
    torch.manual_seed(0)
    m, n = shape
    x = torch.randn(m, n)
    spec = "default"
    if layout == "transposed":
        x, spec = transposed(x), "generic"
    if layout == "overlapping":  # rows that share storage: a read-only view with row stride 1
        base = torch.randn(m + n)
        x, spec = base.as_strided((m, n), (1, 1)), "generic"
    y = torch.zeros(m, n)
    grid = (cdiv(m, 4), cdiv(n, 8), 1)
    for chunk in (None, 1, 2, 5):
        y.zero_()
        kernel, s, module = build(TILES_2D, "copy2d", spec=spec)
        compiled = compile_kernel(module)
        if chunk:
            compiled.programs_per_chunk = chunk
        compiled.run(grid, abi_args(kernel, s, {"x": x, "y": y}))
        assert torch.equal(y, x * 2), chunk


def test_store_through_a_self_overlapping_view_uses_index_tensors():
    # y's rows overlap in memory (row stride 1): element (r, c) is buf[r + c], and the windowed path would overlap
    # itself. Each program writes r + c there, so programs whose tiles overlap agree on every element (no race).
    src = """
    kernel w<BM: int = 1>(y: tensor<f32>[M, N]) {
        let i = program_id(0)
        let r = i * BM + expand_dims(arange(BM), 1)
        store(y, cast<f32>(r + expand_dims(arange(4), 0)), at=[i, 0])
    }
    """
    buf = torch.full((8,), -1.0)
    y = buf.as_strided((5, 4), (1, 1))
    run(src, "w", (5, 1, 1), {"y": y}, spec="generic")
    assert buf.tolist() == list(range(8))
    # Two rows per tile: the last program's tile is partly outside the view.
    buf.fill_(-1.0)
    run(src, "w", (3, 1, 1), {"y": y}, spec="generic", consts={"BM": 2})
    assert buf.tolist() == list(range(8))
    # Eight rows per tile: no program's tile is inside the view; program 0 writes all of it.
    buf.fill_(-1.0)
    run(src, "w", (2, 1, 1), {"y": y}, spec="generic", consts={"BM": 8})
    assert buf.tolist() == list(range(8))


def test_programs_storing_different_values_through_overlapping_rows_race():
    src = """
    kernel w(y: tensor<f32>[M, N]) {
        let i = program_id(0)
        store(y, full<f32>[1, 4](cast<f32>(i)), at=[i, 0])
    }
    """
    y = torch.zeros(8).as_strided((5, 4), (1, 1))
    with pytest.raises(TleError, match=r"store to 'y': programs \(0, 0, 0\) and \(1, 0, 0\) write 0.0 and 1.0 "
                                       r"to element \[1, 0\]; the result depends on which runs last"):
        run(src, "w", (5, 1, 1), {"y": y}, spec="generic")


def test_uniform_scatter_in_a_batched_kernel():
    src = """
    kernel u(x: tensor<i32>[8], seen: tensor<i32>[N]) {
        scatter(x, arange(0, 8), arange(0, 8) * 3)
        store(seen, full<i32>[1](program_id(0)), at=[program_id(0)])
    }
    """
    x, seen = torch.zeros(8, dtype=torch.int32), torch.zeros(10, dtype=torch.int32)
    compiled = run(src, "u", (10, 1, 1), {"x": x, "seen": seen})
    assert compiled.batched and x.tolist() == [3 * i for i in range(8)] and seen.tolist() == list(range(10))
