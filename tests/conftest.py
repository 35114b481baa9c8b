"""pytest set-up for tle.

- `@pytest.mark.gpu` tests are skipped when torch sees no CUDA device.
- `@pytest.mark.timing` tests (they assert a bound on time or speed) are skipped under pytest-xdist (`-n`).
- Every `.tle` file under tests/ with `// RUN:` lines is one test (golden IR, as LLVM's lit does): each RUN line
  runs in bash with `%s` replaced by the file's path, `tlec` by this Python's tlec, `filecheck` by the Python
  FileCheck, and `not CMD` meaning CMD must fail. A failure shows FileCheck's own message.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from golden_runs import run_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# A test that asserts a bound on time (a launch's host cost, a tuning budget, a speed floor) measures a machine that
# pytest-xdist's other workers are loading at the same moment, so under -n it is skipped rather than failed.
TIMING_UNDER_XDIST = "asserts a time bound, which other -n workers' load would break: run `python -m pytest -m timing`"


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # this process is one of pytest-xdist's workers (-n)
        for item in items:
            if item.get_closest_marker("timing") is not None:
                item.add_marker(pytest.mark.skip(reason=TIMING_UNDER_XDIST))
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".tle" and "RUN:" in file_path.read_text(encoding="utf-8", errors="replace"):
        return GoldenFile.from_parent(parent, path=file_path)
    return None


class GoldenFile(pytest.File):
    def collect(self):
        yield GoldenItem.from_parent(self, name=self.path.name)


def _tool(name: str) -> str:
    """The executable `name` next to this Python (the venv's), else a `python -m` invocation."""
    exe = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(exe):
        return shlex.quote(exe)
    return {"tlec": f"{shlex.quote(sys.executable)} -m tle.cli",
            "filecheck": f"{shlex.quote(sys.executable)} -m filecheck"}[name]


def expand(cmd: str, path: str) -> str:
    cmd = cmd.replace("%s", shlex.quote(path))
    for tool in ("tlec", "filecheck"):  # at a command position: start, after a pipe, after `not`
        cmd = re.sub(rf"(^|\|\s*|\bnot\s+){tool}\b", lambda m, t=tool: m.group(1) + _tool(t), cmd)
    # `not CMD | ...`: CMD must fail; its output still flows into the pipe.
    cmd = re.sub(r"^not\s+([^|]*)", lambda m: "{ ! " + m.group(1).strip() + "; }", cmd)
    return cmd


class GoldenItem(pytest.Item):
    def runtest(self):
        path = str(self.path)
        env = dict(os.environ, FILECHECK_OPTS="--enable-var-scope")
        for cmd in run_lines(path):
            full = expand(cmd, path)
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", full], capture_output=True, text=True,
                                  cwd=os.path.dirname(path), env=env, timeout=300)
            if proc.returncode != 0:
                raise GoldenFailure(cmd, proc.stdout + proc.stderr)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, GoldenFailure):
            return f"RUN: {excinfo.value.cmd}\n{excinfo.value.output}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"golden: {self.name}"


class GoldenFailure(Exception):
    def __init__(self, cmd, output):
        super().__init__(cmd)
        self.cmd = cmd
        self.output = output
