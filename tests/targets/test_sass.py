"""`tlec --emit=sass`: the cubin's machine code under the .tle lines it came from, on both paths (Triton's cubins
carry ptxas line tables; tileiras writes them with --lineinfo, which leaves the code as it was)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tle.cli import main

SOFTMAX = str(Path(__file__).resolve().parents[2] / "examples" / "softmax.tle")


@pytest.mark.parametrize("backend", ["triton", "tileir"])
def test_sass_reads_against_the_source(backend, capsys):
    assert main([SOFTMAX, "--emit=sass", f"--backend={backend}"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"/\*[0-9a-f]{4}\*/\s+(@!?P\d )?LDG", out) and re.search(r"/\*[0-9a-f]{4}\*/\s+(@!?P\d )?STG", out)
    # each run of instructions sits under its file and line, with the line's text
    assert re.search(r"//## .*softmax\.tle:4    let row = program_id\(0\)", out), out[:3000]
    lines = {int(n) for n in re.findall(r"//## .*softmax\.tle:(\d+)", out)}
    assert len(lines) >= 4, lines  # the load, the max, the exp and sum, the store all have code


def test_tileiras_line_tables_leave_the_code_alone(tmp_path):
    """The same bytecode through tileiras with and without --lineinfo gives the same instructions."""
    import subprocess
    from tle.targets.binary import find_nvdisasm
    from tle.targets.tileir import _tool_env, find_tileiras
    assert main([SOFTMAX, "--emit=tilebc", "--backend=tileir", "-o", str(tmp_path / "k.tilebc")]) == 0
    tool, code = find_tileiras(), []
    for extra in ([], ["--lineinfo"]):
        cubin = tmp_path / f"k{len(extra)}.cubin"
        subprocess.run([tool, "--gpu-name=sm_90", "-o", str(cubin), str(tmp_path / "k.tilebc"), *extra], check=True,
                       env=_tool_env(tool))
        text = subprocess.run([find_nvdisasm(), "--print-code", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
        code.append([re.sub(r"/\*[0-9a-f]+\*/", "", line).strip() for line in text.splitlines() if "/*" in line])
    assert len(code[0]) > 50 and code[0] == code[1]
