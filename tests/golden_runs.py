"""Reading the RUN lines of golden .tle files; shared by conftest.py (which runs them) and
test_golden_programs.py (which reads their -D constants)."""
from __future__ import annotations

import re


def run_lines(path: str) -> list[str]:
    """The RUN commands of a golden file, continuation lines (ending in \\) joined."""
    cmds, cur = [], ""
    for line in open(path, encoding="utf-8"):
        m = re.search(r"//\s*RUN:\s?(.*)$", line)
        if not m:
            continue
        part = m.group(1).rstrip()
        if part.endswith("\\"):
            cur += part[:-1] + " "
            continue
        cmds.append(cur + part)
        cur = ""
    return cmds
