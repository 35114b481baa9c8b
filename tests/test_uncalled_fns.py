"""A fn that no kernel of its file reaches is never checked (a fn is checked at its calls, with their types): tle
says so with a TleWarning at the fn, from tle.compile and from tlec, so that a typo in it does not pass unseen (a
porter's report). Reached through a call, a combine= or another fn is reached; a file of fns alone (a library)
gets no warning."""
import warnings

import tle
from tle import TleWarning
from tle.cli import main

SRC = """
fn broken(x) {
    return x * no_such_thing
}
fn twice(x) {
    return x * 2.0
}
fn add(a: f32, b: f32) {
    return a + b
}
fn scaled(x) {
    return twice(x)
}
kernel k(x: tensor<f32>[N], y: tensor<f32>[N]) {
    let t = scaled(load(x, tile=[16]))
    store(y, scan(t, axis=0, combine=add))
}
"""


def _warnings_of(source: str) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tle.compile(source)
    return [str(w.message) for w in seen if issubclass(w.category, TleWarning)]


def test_an_uncalled_fn_gets_a_warning_and_reached_ones_do_not():
    got = _warnings_of(SRC)
    assert len(got) == 1, got
    assert got[0].startswith("<string>:2:4: warning: fn 'broken' is called by no kernel of this file, so its body "
                             "is never checked")


def test_a_file_of_fns_alone_gets_none():
    assert _warnings_of(SRC[:SRC.index("kernel k")]) == []


def test_tlec_prints_it(tmp_path, capsys):
    path = tmp_path / "f.tle"
    path.write_text(SRC)
    assert main([str(path), "--emit=tle"]) == 0
    err = capsys.readouterr().err
    assert f"{path}:2:4: warning: fn 'broken' is called by no kernel of this file" in err
    assert "'twice'" not in err and "'add'" not in err
