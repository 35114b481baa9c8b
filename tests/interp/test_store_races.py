"""Races between stores on the interpreter: programs whose last stores to one element write different values (on a
GPU the element keeps whichever lands last). Each schedule the interpreter uses is covered: one lockstep chunk
(one window for every program, or one window per program), programs one at a time (a loop bound that depends on
program_id), and index tensors (tiles that do not step by a constant)."""
import pytest
import torch

from interp_harness import run
from tle.diagnostics import TleError

RACE = r"the result depends on which runs last"


def test_every_program_storing_its_own_partial_at_one_place_races():
    # DyT's backward with the program id left out of the partial sums' at=
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[1, N]) {
        let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])
        store(out, t * 2.0, at=[0, 0])
    }
    """
    x = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    with pytest.raises(TleError, match=r"store to 'out': programs \(0, 0, 0\) and \(3, 0, 0\) write 0.0 and 96.0 "
                                       r"to element \[0, 0\]; " + RACE) as e:
        run(src, "k", (4, 1, 1), {"x": x, "out": torch.zeros(1, 16)})
    assert "give each program its own tile" in str(e.value)
    assert e.value.span.line == 4


def test_programs_storing_the_same_bits_do_not_race():
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[1, N]) {
        store(out, load(x, tile=[1, BLOCK], at=[0, 0]) * 2.0, at=[0, 0])
    }
    """
    x, out = torch.randn(4, 16), torch.zeros(1, 16)
    run(src, "k", (4, 1, 1), {"x": x, "out": out})
    assert torch.equal(out, x[:1] * 2)


def test_a_program_overwrites_its_own_stores():
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[M, N]) {
        let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])
        store(out, t, at=[program_id(0), 0])
        store(out, t * 3.0, at=[program_id(0), 0])
    }
    """
    x, out = torch.randn(4, 16), torch.zeros(4, 16)
    run(src, "k", (4, 1, 1), {"x": x, "out": out})
    assert torch.equal(out, x * 3)


def test_programs_run_one_at_a_time_race_too():
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[1, N]) {
        var acc = zeros<f32>[1, BLOCK]
        for i in range(program_id(0) + 1) {
            acc = acc + load(x, tile=[1, BLOCK], at=[i, 0])
        }
        store(out, acc, at=[0, 0])
    }
    """
    x = torch.ones(4, 16)
    with pytest.raises(TleError, match=r"programs \(0, 0, 0\) and \(1, 0, 0\) write 1.0 and 2.0 to element \[0, 0\]"):
        run(src, "k", (4, 1, 1), {"x": x, "out": torch.zeros(1, 16)})


def test_a_finished_programs_value_put_back_is_no_race():
    # Every program (run one at a time) stores 1 and then 2 at one place: each one's last store is 2, so the order
    # of the programs does not matter, though program 1's first store changes what program 0 left.
    src = """
    kernel k(x: tensor<f32>[N], out: tensor<f32>[4]) {
        for i in range(program_id(0) + 1) {
            store(out, full<f32>[4](1.0), at=0)
        }
        store(out, full<f32>[4](2.0), at=0)
    }
    """
    out = torch.zeros(4)
    run(src, "k", (3, 1, 1), {"x": torch.zeros(4), "out": out})
    assert out.tolist() == [2.0] * 4


def test_overlapping_tiles_of_programs_in_one_chunk_race():
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[M, N]) {
        let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])
        store(out, t, at=[program_id(0) / 2, 0])
    }
    """
    x = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    with pytest.raises(TleError, match=r"programs \(0, 0, 0\) and \(1, 0, 0\) write 0.0 and 16.0 to element \[0, 0\]"):
        run(src, "k", (4, 1, 1), {"x": x, "out": torch.zeros(4, 16)})


def test_tiles_stored_through_index_tensors_race():
    # (7 * i) % 40 over 48 programs: tiles that do not step by a constant, and programs i and i + 40 on one row
    src = """
    kernel k<BLOCK: int = 16>(x: tensor<f32>[M, N], out: tensor<f32>[R, N]) {
        let t = load(x, tile=[1, BLOCK], at=[program_id(0), 0])
        store(out, t, at=[(7 * program_id(0)) % 40, 0])
    }
    """
    x = torch.arange(48 * 16, dtype=torch.float32).reshape(48, 16)
    out = torch.zeros(40, 16)
    with pytest.raises(TleError, match=r"programs \(0, 0, 0\) and \(40, 0, 0\) write 0.0 and 640.0 to element "
                                       r"\[0, 0\]; " + RACE):
        run(src, "k", (48, 1, 1), {"x": x, "out": out})
    # the first 40 alone write every row once
    out.zero_()
    run(src, "k", (40, 1, 1), {"x": x, "out": out})
    assert torch.equal(out[(7 * torch.arange(40)) % 40], x[:40])
