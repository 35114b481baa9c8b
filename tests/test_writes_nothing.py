"""A kernel that writes nothing compiles with a TleWarning: it has no effect, and the GPU compilers drop its loads."""
import warnings

import torch

import tle
from tle import TleWarning
from tle.cli import main

NO_STORE = """kernel f(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = load(x, tile=[128], at=program_id(0))
    let u = t * 2.0
}
"""

STORE_UNDER_A_CONSTANT = """kernel g<WRITE: bool = true>(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = load(x, tile=[128], at=program_id(0))
    if WRITE {
        store(y, t, at=program_id(0))
    }
}
"""


def recorded(run) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in seen if issubclass(w.category, TleWarning)]


def test_a_kernel_without_a_store_warns_where_it_is_declared_and_where_it_reads():
    got = recorded(lambda: tle.compile(NO_STORE, filename="k.tle"))
    assert len(got) == 1
    lines = got[0].splitlines()
    assert lines[0] == ("k.tle:1:1: warning: kernel 'f' writes nothing: it has no store, scatter or atomic, so "
                        "running it has no effect (the GPU compilers drop its loads as well)")
    assert "k.tle:2:13: note: it reads 'x' here, and what it computes goes nowhere" in lines
    assert "note: write a tile with store(y, t, at=...), or elements with scatter(y, offsets, t)" in lines


def test_a_store_under_a_constant_counts_where_the_constant_takes_its_branch():
    assert recorded(lambda: tle.compile(STORE_UNDER_A_CONSTANT, filename="k.tle")) == []
    mod = tle.compile(STORE_UNDER_A_CONSTANT, filename="k.tle")
    x, y = torch.rand(128), torch.zeros(128)
    got = recorded(lambda: mod.g[(1,)](x, y, WRITE=False))
    assert len(got) == 1 and "kernel 'g' writes nothing" in got[0]
    assert "with its constants as given (WRITE=false)" in got[0]
    assert torch.equal(y, torch.zeros(128))


def test_printing_or_an_atomic_is_an_effect():
    for body in ("print(\"t\", t)", "atomic_add(y, arange(0, 128), t)"):
        src = NO_STORE.replace("let u = t * 2.0", body)
        assert recorded(lambda: tle.compile(src, filename="k.tle")) == [], body


def test_tlec_prints_the_warning_as_it_prints_errors(tmp_path, capsys):
    f = tmp_path / "k.tle"
    f.write_text(NO_STORE)
    assert main([str(f), "--emit", "ttir", "-o", str(tmp_path / "k.ttir")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:1:1: warning: kernel 'f' writes nothing")
    assert "TleWarning" not in err
