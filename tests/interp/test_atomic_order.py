"""TLE_ATOMIC_ORDER=shuffle (tle/debug.py): the interpreter applies an atomic's lanes in a random order instead of
program order, so a kernel that relies on the order programs arrive in (a stream compaction that reserves its
slots with one atomic_add per program and expects them in program order) shows it on the CPU, as it would on a
GPU, while kernels that do not (a histogram, the last program to arrive summing partials) give the same result."""
import torch

import tle

COMPACT = """
kernel compact<BLOCK: int = 256>(x: tensor<f32>[N], out: tensor<f32>[N], count: tensor<i32>[1]) {
    let t = load(x, tile=[BLOCK], at=program_id(0))
    let keep = (program_id(0) * BLOCK + arange(0, BLOCK) < N) and (t > 0.0)
    let k = cast<i32>(keep)
    let base = atomic_add(count, 0, sum(k))
    scatter(out, base + cumsum(k) - k, t, mask=keep)
}
"""

HIST = """
kernel hist(x: tensor<i32>[N], bins: tensor<i32>[B], slot: tensor<i32>[N]) {
    let i = program_id(0)
    store(slot, atomic_add(bins, load(x, tile=[64], at=i), 1, mask=i * 64 + arange(0, 64) < N), at=i)
}
"""


def _compact(monkeypatch, order):
    if order is None:
        monkeypatch.delenv("TLE_ATOMIC_ORDER", raising=False)
    else:
        monkeypatch.setenv("TLE_ATOMIC_ORDER", order)
    x = torch.randn(2000, generator=torch.Generator().manual_seed(0))
    out, count = torch.full((2000,), float("nan")), torch.zeros(1, dtype=torch.int32)
    tle.compile(COMPACT).compact[(8,)](x, out, count)
    n = int(count)
    return x[x > 0], out[:n]


def test_program_order_by_default_and_a_random_one_under_shuffle(monkeypatch):
    kept, got = _compact(monkeypatch, None)
    assert torch.equal(got, kept)  # program order: the compaction happens to come out in order
    kept, shuffled = _compact(monkeypatch, "shuffle:1")
    assert torch.equal(shuffled.sort().values, kept.sort().values)  # the same elements, the slots in another order
    assert not torch.equal(shuffled, kept)
    assert torch.equal(_compact(monkeypatch, "shuffle:1")[1], shuffled)  # a seed repeats its order
    assert not torch.equal(_compact(monkeypatch, "shuffle:2")[1], shuffled)


def test_an_order_independent_kernel_gives_the_same_result(monkeypatch):
    """A histogram's counts do not depend on the order; each lane's old value (its slot in its bin) does, and
    every slot is still taken once."""
    x = torch.randint(0, 5, (1000,), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    results = []
    for order in (None, "shuffle:7"):
        if order is None:
            monkeypatch.delenv("TLE_ATOMIC_ORDER", raising=False)
        else:
            monkeypatch.setenv("TLE_ATOMIC_ORDER", order)
        bins, slot = torch.zeros(5, dtype=torch.int32), torch.empty(1000, dtype=torch.int32)
        tle.compile(HIST).hist[(16,)](x, bins, slot)
        assert torch.equal(bins, torch.bincount(x, minlength=5).int())
        for b in range(5):  # the slots of bin b are 0 .. count - 1, each once
            assert torch.equal(slot[x == b].sort().values, torch.arange(int(bins[b]), dtype=torch.int32))
        results.append(slot)
    assert not torch.equal(results[0], results[1])
