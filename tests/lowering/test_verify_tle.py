"""dialects/tle.py verify_tle: the op table checked in Python, for bindings without IRDL (jaxlib on the GPU machine),
where ast_to_tle calls it after building each module. Here, with torch-mlir's IRDL as the judge: it accepts every
module IRDL accepts (the examples and golden programs), and rejects what the table forbids."""
from __future__ import annotations

import glob
import os

import pytest

from tle.abi import default_spec
from tle.check import check_kernel, load_program
from tle.diagnostics import TleError
from tle.dialects.mlir import ir
from tle.dialects.tle import verify_tle
from tle.lowering.ast_to_tle import ast_to_tle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tle")) +
               glob.glob(os.path.join(ROOT, "tests", "filecheck", "*.tle")))


def _modules(path):
    try:
        program = load_program(open(path).read(), path)
    except TleError:
        return
    for name in program.kernel_names():
        try:
            kernel = check_kernel(program, name, {})
        except TleError:  # a deliberately bad program, or one that needs constants
            continue
        yield name, ast_to_tle(kernel, default_spec(kernel))


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, ROOT) for p in FILES])
def test_verify_tle_accepts_what_irdl_accepts(path):
    for _, module in _modules(path):
        module.operation.verify()  # IRDL's verdict (ast_to_tle already asked)
        verify_tle(module)


def test_verify_tle_rejects_a_missing_attribute_and_a_wrong_result_count():
    path = os.path.join(ROOT, "tests", "filecheck", "scan_combine.tle")
    (_, module), = _modules(path)
    scan = next(op for op in module.body.operations[0].regions[0].blocks[0].operations
                if op.operation.name == "tle.combine_scan").operation
    del scan.attributes["combine"]
    with pytest.raises(ValueError, match="tle.combine_scan is missing attribute 'combine'"):
        verify_tle(module)
    path = os.path.join(ROOT, "tests", "filecheck", "split.tle")
    for _, module in _modules(path):
        body = module.body.operations[0].regions[0].blocks[0]
        split = next((op.operation for op in body.operations if op.operation.name == "tle.split"), None)
        if split is None:
            continue
        with module.context, split.location, ir.InsertionPoint(split):
            ir.Operation.create("tle.split", results=[split.results[0].type], operands=[split.operands[0]])
        with pytest.raises(ValueError, match="tle.split expects 2 to 2 results, got 1"):
            verify_tle(module)
        return
    pytest.fail("split.tle has no tle.split")
