"""Under pytest-xdist (`-n`), tests marked `timing` are skipped, not failed, and say how to run them (conftest.py):
their bounds on time would measure the other workers' load. Everything else runs as without -n."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("xdist")
HERE = os.path.dirname(os.path.abspath(__file__))


def test_timing_tests_are_skipped_under_xdist_and_the_rest_run():
    # tests/test_parser_cache.py: one timing test (a cache load against a build) and two without a time bound
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-rs", "-p", "no:cacheprovider",
                          os.path.join(HERE, "test_parser_cache.py")], capture_output=True, text=True, cwd=HERE)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "2 passed, 1 skipped" in log, log
    assert "test_parser_cache.py" in log and "python -m pytest -m timing" in log, log
