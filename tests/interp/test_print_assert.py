"""print() and assert() on the interpreter: print gives one line per program and print, `pid (x, y, z) label
values`, in program order; a false assert stops the launch with a located error naming the program and element."""
import re

import pytest
import torch

from interp_harness import run
from tle.diagnostics import TleError

SOURCE = """
kernel show(x: tensor<f16>[N], n: tensor<i64>[N]) {
    let t = load(x, tile=[4], at=program_id(0))
    print("t =", t, load(n, tile=[4], at=program_id(0)), t > 0.0)
    print("program", program_id(0))
    print("done")
    assert(abs(cast<f32>(t)) < 100.0, "t in range")
}
"""


def test_each_program_prints_its_label_and_values(capsys):
    x = torch.tensor([1.5, -2.0, 0.25, 3.0, -1.0, 0.5, 2.0, -0.5], dtype=torch.float16)
    n = torch.arange(8, dtype=torch.int64) * 10 ** 10
    run(SOURCE, "show", (2,), {"x": x, "n": n})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "pid (0, 0, 0) t = [ 1.5 , -2.  ,  0.25,  3.  ] [          0, 10000000000, 20000000000, 30000000000] "
        "[1, 0, 1, 1]",
        "pid (1, 0, 0) t = [-1. ,  0.5,  2. , -0.5] [40000000000, 50000000000, 60000000000, 70000000000] "
        "[0, 1, 1, 0]",
        "pid (0, 0, 0) program: 0", "pid (1, 0, 0) program: 1",
        "pid (0, 0, 0) done:", "pid (1, 0, 0) done:"]


def test_a_print_of_values_that_do_not_depend_on_the_program_still_prints_once_per_program(capsys):
    run("kernel k(x: tensor<f32>[N]) {\n    print(\"n\", 7)\n}\n", "k", (3,), {"x": torch.zeros(1)})
    assert capsys.readouterr().out.splitlines() == [f"pid ({i}, 0, 0) n: 7" for i in range(3)]


ASSERTS = """
kernel k(x: tensor<f32>[N]) {
    let t = load(x, tile=[4], at=program_id(0))
    assert(t > 0.0, "t positive")
    assert(program_id(0) < 2)
}
"""


def test_a_false_assert_names_its_program_and_element():
    run(ASSERTS, "k", (2,), {"x": torch.rand(8) + 0.1})  # holds everywhere
    x = torch.rand(8) + 0.1
    x[6] = -1.0
    with pytest.raises(TleError) as err:
        run(ASSERTS, "k", (2,), {"x": x})
    assert err.value.message == "assert failed: t positive at tile element [2] in program (1, 0, 0)"
    assert (err.value.span.line, err.value.span.col) == (4, 5)
    with pytest.raises(TleError) as err:
        run(ASSERTS, "k", (3,), {"x": torch.rand(12) + 0.1})
    assert err.value.message == "assert failed in program (2, 0, 0)"


@pytest.mark.parametrize("src,message", [
    ('    let a = print("x")\n', "print() returns no value"),
    ('    print()\n', "print() needs a message or a value to show"),
    ('    print("x", x)\n', "tensor 'x' is not a value"),
    ('    store(x, "text")\n', "a string can only be print()'s message"),
    ('    print("x", end="")\n', "print() takes no keyword arguments"),
    ('    assert(1)\n', "assert() needs bool operands, got i32"),
    ('    assert(false, "never")\n', "this assert() always fails: never"),
    ('    assert(true, 3)\n', "assert() takes a condition and, optionally, a message string"),
    ('    let a = assert(true)\n', "assert() returns no value"),
])
def test_misuse_is_a_located_error(src, message):
    with pytest.raises(TleError, match=re.escape(message)):
        run("kernel k(x: tensor<f32>[N]) {\n" + src + "}\n", "k", (1,), {"x": torch.zeros(4)})
