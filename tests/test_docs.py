"""The docs stay true: every ```tle block in docs/*.md and README.md is a program whose kernels check and lower to
the tle dialect (a block that shows an error would be ```text)."""
import glob
import os
import re

import pytest

from tle.check import load_program
from tle.compiler import compile_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKS = [(os.path.relpath(path, ROOT), i, block)
          for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
          for i, block in enumerate(re.findall(r"```tle\n(.*?)```", open(path).read(), re.S))]


def test_the_docs_have_tle_blocks():
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize("path,index,block", BLOCKS, ids=[f"{p}#{i}" for p, i, _ in BLOCKS])
def test_doc_block_compiles(path, index, block):
    program = load_program(block, f"{path}#{index}")
    names = program.kernel_names()
    assert names, "a tle block without a kernel"
    for name in names:
        compile_kernel(program, name, {}, stop="tle")
