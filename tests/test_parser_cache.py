"""The parser's tables come from the disk cache after the first build (tle/parser.py, _build_parser)."""
import os
import subprocess
import sys
import time

import pytest

SOURCE = "kernel k(x: tensor<f32>[N]) { store(x, load(x, tile=[16], at=[0]), at=[0]) }"
# Prints the time the parser took to come up, then the parsed kernel's name.
PROBE = ("import time; t = time.perf_counter(); import tle.parser as p; "
         "print(time.perf_counter() - t); print(p.parse(%r, 'k.tle').kernels[0].name)" % SOURCE)


def _run(env):
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    seconds, name = out.stdout.split()
    return float(seconds), name


def _env(tmp_path, **extra):
    return dict(os.environ, TLE_CACHE_DIR=str(tmp_path), **extra)


@pytest.mark.timing
def test_first_import_writes_the_tables_and_the_next_reads_them(tmp_path):
    built, name = _run(_env(tmp_path))
    assert name == "k"
    files = list((tmp_path / "parser").iterdir())
    assert len(files) == 1 and files[0].name.startswith("lark-") and files[0].suffix == ".pickle"
    loaded = min(_run(_env(tmp_path))[0] for _ in range(3))
    assert loaded < built / 2, (built, loaded)  # about 1 s to build, 0.05 s to load on the CI machine
    assert [f.name for f in (tmp_path / "parser").iterdir()] == [files[0].name]  # read, not written again


def test_a_damaged_cache_file_is_rebuilt(tmp_path):
    _run(_env(tmp_path))
    (path,) = (tmp_path / "parser").iterdir()
    path.write_bytes(path.read_bytes()[:100])  # as a write cut short would leave it, were writes not atomic
    mtime = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert _run(_env(tmp_path))[1] == "k"
    assert path.stat().st_mtime_ns != mtime and path.stat().st_size > 100


def test_no_cache_when_caching_is_off(tmp_path):
    assert _run(_env(tmp_path, TLE_CACHE="0"))[1] == "k"
    assert not (tmp_path / "parser").exists()
