"""Mutants of every example and golden program: whatever a changed number, type, operator or name does to a
kernel, tle answers with a located error (`file:line:col: error:`) or compiles it, through TTIR and Tile IR. A
larger run of the same mutations found a fixed dim past 2**31 - 1 compiled to wrong code, an arange past 2**20
elements and a flip of a tall tile that never finished lowering (each an internal error or a hang before)."""
from __future__ import annotations

import glob
import os
import random
import re

import pytest

from tle.check import load_program
from tle.compiler import compile_kernel
from tle.diagnostics import TleError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(f for f in glob.glob(os.path.join(ROOT, "examples", "*.tle")) +
               glob.glob(os.path.join(ROOT, "tests", "filecheck", "*.tle"))
               if not os.path.basename(f).startswith(("error_", "bad_")))
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"[^"\n]*"|\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|0x[0-9a-fA-F]+|\d+|'
                    r'[A-Za-z_]\w*|\*\*|<<|>>|==|!=|<=|>=|\S', re.S)
_TYPES = ["f32", "f16", "bf16", "i32", "i64", "i8", "bool", "f64", "f8e4m3"]
_NUMBERS = ["0", "1", "3", "-1", "2", "1024", "65536", "1e30", "0.5", "2147483648", "7"]
_OPERATORS = ["+", "-", "*", "/", "%", "<", ">", "==", "&", "|", "^", "<<", ">>", "**"]


def mutant(src: str, rng: random.Random) -> str:
    """src with one or two tokens changed: a number, an element type, an operator or a name swapped for another of
    its kind, or (a fifth of the time) a token dropped."""
    for _ in range(rng.choice((1, 1, 2))):
        tokens = [m for m in _TOKEN.finditer(src) if not m.group().startswith(("//", "/*"))]
        names = sorted({m.group() for m in tokens if re.fullmatch(r"[A-Za-z_]\w*", m.group())})
        m = rng.choice(tokens)
        tok = m.group()
        if rng.random() < 0.2:
            new = ""
        elif tok in _TYPES:
            new = rng.choice(_TYPES)
        elif re.fullmatch(r"[\d.]+(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+", tok):
            new = rng.choice(_NUMBERS)
        elif tok in _OPERATORS:
            new = rng.choice(_OPERATORS)
        elif re.fullmatch(r"[A-Za-z_]\w*", tok):
            new = rng.choice(names)
        else:
            continue
        src = src[:m.start()] + new + src[m.end():]
    return src


@pytest.mark.parametrize("seed", range(8))
def test_mutants_get_located_errors_or_compile(seed):
    rng = random.Random(seed)
    for _ in range(40):
        path = rng.choice(FILES)
        src = mutant(open(path).read(), rng)
        try:
            program = load_program(src, path)
            for name in program.kernel_names():
                compile_kernel(program, name, {}, stop="ttir", backend="triton")
                compile_kernel(program, name, {}, stop="tileir", backend="tileir")
        except TleError as e:
            first = str(e).splitlines()[0]
            assert re.match(r".+:\d+:\d+: error: ", first), f"an unlocated error for this mutant:\n{src}\n{e}"
