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


def test_the_triton_side_of_the_porting_guide_compiles(tmp_path):
    """docs/porting.md sets Triton kernels beside tle's: they are real Triton 3.6, compiled here for sm_90."""
    import importlib.util
    import sys

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    text = open(os.path.join(ROOT, "docs", "porting.md")).read()
    kernels = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "@triton.jit" in b]
    assert len(kernels) == 2
    source = "import triton\nimport triton.language as tl\n\n" + "\n\n".join(
        "\n".join(line for line in b.splitlines() if "[(" not in line) for b in kernels)  # drop the launches
    path = tmp_path / "porting_kernels.py"  # Triton reads a jit function's source from its file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("porting_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["porting_kernels"] = module
    spec.loader.exec_module(module)
    target = GPUTarget("cuda", 90, 32)
    softmax = {"x_ptr": "*fp32", "y_ptr": "*fp32", "stride_x": "i32", "stride_y": "i32", "n_cols": "i32",
               "BLOCK": "constexpr"}
    assert triton.compile(ASTSource(fn=module.softmax_kernel, signature=softmax, constexprs={"BLOCK": 1024}),
                          target=target).asm["cubin"]
    matmul = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{n: "i32" for n in (
        "M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")}, **{n: "constexpr" for n in ("BM", "BN", "BK")}}
    assert triton.compile(ASTSource(fn=module.matmul_kernel, signature=matmul,
                                    constexprs={"BM": 128, "BN": 128, "BK": 64}), target=target).asm["cubin"]
