"""Front-end diagnostics: every bad program in tests/check/ fails with one TleError at the right place.

Each tests/check/*.tle starts with

    // ERROR: LINE:COL: MESSAGE SUBSTRING
    // NOTE: NOTE SUBSTRING            (optional, any number)
    // CONSTANTS: NAME=VALUE ...       (optional: the compile-time constants to check with)

and is run through load_program + check_kernel (every kernel of the file). The error must be a TleError (a
Python traceback for a user's mistake is a bug), rendered clang-style: `path:LINE:COL: error: ...`, the source
line, and a caret line under the column. The rendering tests below pin the exact output for the tricky cases.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tle.check import check_kernel, load_program
from tle.cli import _scalar  # a constant as `tlec -D` gives it
from tle.diagnostics import Span, TleError, register_source, render

CHECK = Path(__file__).parent / "check"
CASES = sorted(CHECK.glob("*.tle"))


def _expectations(text: str):
    m = re.match(r"// ERROR: (\d+):(\d+): (.+)\n", text)
    assert m, "the first line must be // ERROR: LINE:COL: MESSAGE"
    notes = re.findall(r"^// NOTE: (.+)$", text, re.M)
    consts = re.search(r"^// CONSTANTS: (.+)$", text, re.M)
    constants = dict(kv.split("=", 1) for kv in consts.group(1).split()) if consts else {}
    return int(m.group(1)), int(m.group(2)), m.group(3), notes, {k: _scalar(v) for k, v in constants.items()}


def _check_file(path: str, text: str, constants: dict) -> None:
    program = load_program(text, path)
    for name in program.kernel_names():
        check_kernel(program, name, constants)


def test_comments_after_code_that_read_as_words_are_comments():
    """The floor-division check (tle/parser.py _no_floor_division) leaves alone a comment that starts with a word,
    one after a call statement (`at=0` is a keyword argument, not an assignment), and one naming nothing the file
    uses."""
    text = ("kernel k<B: int = 16>(x: tensor<i32>[N], y: tensor<i32>[N]) {\n"
            "    let t = load(x, tile=[B], at=0) // 2 programs a row\n"
            "    let u = t / 2 // the half\n"
            "    store(y, u, at=0)  // u\n"
            "    store(y, u + 1, at=0) // B\n"
            "    let v = u // TODO\n"
            "    let w = v // (see docs)\n"
            "}\n")
    _check_file("ok.tle", text, {})


def test_a_comment_naming_an_element_type_is_a_comment():
    """`// f32` or `// T` (a dtype constant) after a value says its type; neither can be a divisor, though the file
    uses both names (tensor<f32>, <T: dtype>)."""
    text = ("kernel k<T: dtype = f16>(x: tensor<T>[N], y: tensor<f32>[N]) {\n"
            "    let c = cumsum(load(x, tile=[128]))   // f32\n"
            "    let d = load(x, tile=[128]) // T\n"
            "    store(y, c + cast<f32>(d))\n"
            "}\n")
    _check_file("ok.tle", text, {})
    with pytest.raises(TleError, match="is not a division"):  # a name the file uses as a value still is one
        _check_file("bad.tle", text.replace("// T", "// N"), {})


def test_a_comment_giving_a_constant_in_hex_is_a_comment():
    """Hash code documents its multipliers' bits: `const C1 = -2048144789   // 0x85ebca6b`."""
    text = ("const C1 = -2048144789   // 0x85ebca6b\n"
            "kernel k(x: tensor<i32>[N]) {\n"
            "    let m = 255 // 0b11111111\n"
            "    store(x, load(x, tile=[16]) * C1 + m)\n"
            "}\n")
    _check_file("ok.tle", text, {})


def _deep_examples():
    from tle.parser import _EXAMPLES
    for label, examples in _EXAMPLES.items():
        for example in examples:
            # `= 1` and `)` would continue the statement before them (newlines are whitespace): not these
            if example.startswith("kernel k() { ") and example[13] not in "=)":
                yield label, example


@pytest.mark.parametrize("label,example", list(_deep_examples()))
def test_a_named_syntax_error_is_named_after_other_statements_too(label, example):
    """Lark's match_examples matched an example only at the same parser stack depth, so a mistake written after
    other statements lost its name ("missing '=' in the declaration" became "unexpected '1'")."""
    deep = example.replace("kernel k() { ", "kernel k(x: tensor<f32>[N]) {\n    let p = 1\n    let q = f(p)\n    ", 1)
    with pytest.raises(TleError) as info:
        load_program(deep, "deep.tle")
    assert label in str(info.value).splitlines()[0]


def test_there_are_enough_cases():
    assert len(CASES) >= 35


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_program(path: Path):
    text = path.read_text()
    line, col, message, notes, constants = _expectations(text)
    with pytest.raises(TleError) as info:
        _check_file(str(path), text, constants)
    rendered = str(info.value)
    lines = rendered.splitlines()
    assert lines[0].startswith(f"{path}:{line}:{col}: error: "), rendered
    assert message in lines[0], rendered
    for note in notes:
        assert note in rendered, rendered
    source = text.splitlines()[line - 1].expandtabs(4)
    assert lines[1] == "    " + source, rendered
    caret = re.fullmatch(r"( *)(\^+)", lines[2])
    assert caret, rendered
    prefix = text.splitlines()[line - 1][: col - 1].expandtabs(4)
    assert len(caret.group(1)) == 4 + len(prefix), rendered


# ---- rendering: exact output ----------------------------------------------------------------------------------
def _error(text: str, path: str = "t.tle") -> str:
    with pytest.raises(TleError) as info:
        _check_file(path, text, {})
    return str(info.value)


def test_multi_character_span_underlines_the_whole_expression():
    text = "kernel k(x: tensor<f32>[M, N]) {\n    let t = load(x, tile=[16, 32])\n    let u = t + zeros<f32>[16]\n}\n"
    assert _error(text) == (
        "t.tle:3:13: error: tile shapes [16, 32] and [16] do not broadcast\n"
        "        let u = t + zeros<f32>[16]\n"
        "                ^^^^^^^^^^^^^^^^^^\n"
        "note: sizes must match, or be 1, axis by axis from the right (numpy rules); reshape or expand_dims one "
        "side, or reduce with keepdims=true")


def test_error_at_the_end_of_the_file_points_after_the_last_token():
    text = "kernel k(x: tensor<f32>[N]) {\n    let t = load(x, tile=[16])\n\n// a comment after the code\n"
    assert _error(text) == (
        "t.tle:2:31: error: syntax error: missing '}' at the end of the block\n"
        "        let t = load(x, tile=[16])\n"
        "                                  ^")


def test_error_in_the_middle_of_a_line():
    assert _error("kernel k() { let a = 1 $ 2 }\n") == (
        "t.tle:1:24: error: unexpected character '$'\n"
        "    kernel k() { let a = 1 $ 2 }\n"
        "                           ^")


def test_tabs_are_expanded_in_the_line_and_the_carets():
    # Columns count characters (a tab is one); the display expands tabs to 4 and the carets follow.
    text = "kernel k(x: tensor<f32>[N]) {\n\tlet\tt = lod(x, tile=[16])\n}\n"
    assert _error(text) == (
        "t.tle:2:10: error: unknown name 'lod'\n"
        "        let t = lod(x, tile=[16])\n"
        "                ^^^\n"
        "note: did you mean 'load'?")


def test_wide_characters_count_twice_for_the_caret():
    text = "kernel k() { let a = /* 表 */ zz + 1 }\n"
    lines = _error(text).splitlines()
    assert lines[0] == "t.tle:1:30: error: unknown name 'zz'"  # 29 characters before zz ...
    assert lines[2] == "    " + " " * 30 + "^^"  # ... 30 columns wide on a terminal


def test_notes_with_a_position_show_their_own_source_line():
    text = "kernel k() {\n    let a = 1\n    let a = 2\n}\n"
    assert _error(text) == (
        "t.tle:3:9: error: redefinition of 'a'\n"
        "        let a = 2\n"
        "            ^\n"
        "t.tle:2:9: note: 'a' was first defined here\n"
        "        let a = 1\n"
        "            ^")


def test_a_missing_closer_points_after_the_previous_token():
    text = "kernel k(x: tensor<f32>[N]) {\n    let t = load(x, tile=[16]   // comment\n    store(x, t)\n}\n"
    assert _error(text).splitlines()[:3] == [
        "t.tle:2:30: error: syntax error: missing ')'",
        "        let t = load(x, tile=[16]   // comment",
        "                                 ^"]


def test_a_span_over_several_lines_underlines_to_the_end_of_its_first_line():
    register_source("m.tle", "let a = f(1,\n   2)\n")
    err = TleError(Span("m.tle", 1, 9, 2, 5), "bad call")
    assert render(err) == "m.tle:1:9: error: bad call\n    let a = f(1,\n            ^^^^"


def test_an_error_without_a_position_renders_without_one():
    assert render(TleError(None, "no kernel")) == "error: no kernel"
    assert render(TleError(Span("a.tle", 0, 0), "declares no kernel")) == "a.tle: error: declares no kernel"


def test_errors_in_an_imported_file_name_the_import(tmp_path: Path):
    (tmp_path / "lib.tle").write_text("fn helper(x) {\n    return x +\n}\n")
    main = tmp_path / "main.tle"
    main.write_text('import "lib.tle"\nkernel k() {\n}\n')
    rendered = _error(main.read_text(), str(main))
    assert rendered.splitlines()[0] == f"{tmp_path / 'lib.tle'}:3:1: error: syntax error: an expression is missing"
    assert f"{main}:1:1: note: in 'lib.tle', imported here" in rendered


def test_an_import_cycle_through_two_files_shows_the_chain(tmp_path: Path):
    (tmp_path / "a.tle").write_text('import "b.tle"\n')
    (tmp_path / "b.tle").write_text('import "a.tle"\n')
    rendered = _error((tmp_path / "a.tle").read_text(), str(tmp_path / "a.tle"))
    assert rendered.splitlines()[0] == f"{tmp_path / 'b.tle'}:1:1: error: import cycle: a.tle -> b.tle -> a.tle"


def test_unknown_kernel_name_suggests_one():
    program = load_program("kernel softmax() {\n}\n", "s.tle")
    with pytest.raises(TleError) as info:
        check_kernel(program, "sofmax")
    assert str(info.value) == "s.tle: error: no kernel named 'sofmax' in s.tle\nnote: did you mean 'softmax'?"


def test_backend_locations_keep_their_range():
    """MLIR prints same-line ranges as `to :C2`; the span must keep the end column so carets cover it."""
    from tle.diagnostics import Span, span_of_location_text
    assert span_of_location_text('loc("g.tle":6:14 to :36)') == Span("g.tle", 6, 14, 6, 36)
    assert span_of_location_text('loc("g.tle":3:1 to 9:2)') == Span("g.tle", 3, 1, 9, 2)
    assert span_of_location_text('loc("g.tle":3:1)') == Span("g.tle", 3, 1, 3, 0)
