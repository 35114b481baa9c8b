"""A tuning database that cannot be used (garbage, a directory, another schema, locked, read-only) and imports
of bad files: messages that name the file and what to do, launches that go on, imports that are all or nothing."""
import contextlib
import copy
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch

import tle
from tle.runtime import tuning
from tle.runtime.tuning import TuneError
from tuning_helpers import EXAMPLES, cdiv

VECTOR_ADD = os.path.join(EXAMPLES, "vector_add.tle")


@pytest.fixture(autouse=True)
def fresh_connections(monkeypatch):
    monkeypatch.setattr(tuning, "_connections", {})
    monkeypatch.setattr(tuning, "_warned", set(), raising=False)


def launch(block=(256, 1024), n=1000):
    mod = tle.compile(VECTOR_ADD, tune={"vector_add": {"BLOCK": list(block), "timer": lambda c, t, r: 1e-3,
                                                       "on_cpu": True}})
    x, out = torch.randn(n), torch.empty(n)
    mod.vector_add[lambda m: (cdiv(m["N"], m["BLOCK"]),)](x, x, out)
    assert torch.equal(out, x + x)
    return mod


def test_a_garbage_file_is_named_and_the_launch_goes_on(isolated_db):
    with open(isolated_db, "w") as f:
        f.write("this is not sqlite at all " * 10)
    with pytest.raises(TuneError, match=f"{isolated_db}: the file is not an SQLite database.*TLE_TUNE_DB"):
        tuning.rows()
    with pytest.warns(RuntimeWarning, match="not an SQLite database"):
        launch()


def test_a_directory_another_schema_and_a_file_as_parent(tmp_path, monkeypatch):
    os.mkdir(tmp_path / "d.sqlite")
    monkeypatch.setenv("TLE_TUNE_DB", str(tmp_path / "d.sqlite"))
    with pytest.raises(TuneError, match="d.sqlite is a directory"):
        tuning.rows()
    other = sqlite3.connect(tmp_path / "other.sqlite")
    other.execute("CREATE TABLE tuned (key TEXT PRIMARY KEY, payload BLOB)")
    other.commit()
    monkeypatch.setenv("TLE_TUNE_DB", str(tmp_path / "other.sqlite"))
    with pytest.raises(TuneError, match="other.sqlite has another schema"):
        tuning.rows()
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("TLE_TUNE_DB", str(tmp_path / "file" / "t.sqlite"))
    with pytest.raises(TuneError, match="cannot make its folder"):
        tuning.rows()


def test_a_failed_write_warns_and_the_launch_takes_the_tuning(isolated_db):
    """A database locked past the busy timeout crashed the launch and lost its tuning."""
    launch(n=100)  # makes the database
    holder = sqlite3.connect(isolated_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.warns(RuntimeWarning, match=f"could not be saved.*{isolated_db}.*locked"):
            mod = launch(n=5000)
        assert len(mod.vector_add._tuned) == 1
    finally:
        holder.execute("COMMIT")


# Another process inside a write transaction on the database until a line comes on its stdin (or it closes).
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("DELETE FROM tuned WHERE key = 'none'")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def locked(path):
    """The database held by a writer in another process; yields a function that ends its transaction."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def release():
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield release
    finally:
        release()
        assert proc.wait(timeout=60) == 0


def timed_store(monkeypatch, when_called=None):
    """tuning.store wrapped to record how long each call took (and run `when_called` as it starts)."""
    spent, real = [], tuning.store

    def store(*args, **kwargs):
        if when_called:
            when_called()
        t0 = time.monotonic()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.monotonic() - t0)
    monkeypatch.setattr(tuning, "store", store)
    return spent


def test_a_locked_database_holds_a_launch_only_briefly(isolated_db, monkeypatch):
    """A launch that tuned waited out SQLite's 60 s busy timeout to write its result while another process held
    the database: the program stalled for a minute. It waits LAUNCH_WRITE_WAIT_S (2 s), warns and goes on. Reads
    (WAL) do not wait for the writer at all: they run here on a connection that would fail at once if they had to."""
    known = launch(n=100)
    monkeypatch.setattr(tuning, "_connections", {})  # a fresh process: it opens the locked database
    monkeypatch.setattr(tuning, "BUSY_TIMEOUT_S", 0.0)  # a read that waited for the lock would raise "locked"
    spent = timed_store(monkeypatch)
    with locked(isolated_db):
        assert len(tuning.rows()) == 1
        x = torch.randn(100)
        assert tuning.lookup(known.vector_add, x, x, torch.empty(100), grid=lambda m: (cdiv(m["N"], m["BLOCK"]),))
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a lookup that failed would warn
            launch(n=100)  # a known bucket: one lookup, no write
        assert spent == []
        with pytest.warns(RuntimeWarning, match=f"could not be saved.*{isolated_db}.*locked for 2 s"):
            mod = launch(n=5000)
    assert len(mod.vector_add._tuned) == 1, "the launch took its tuning"
    assert len(spent) == 1 and 1.9 < spent[0] < 20, f"the write waited {spent[0]:.1f} s, not 2"
    assert tuning._db().execute("PRAGMA busy_timeout").fetchone()[0] == 0, "put back after the write"


def test_a_lock_released_within_the_wait_lets_the_launch_store(isolated_db, monkeypatch):
    """A launch's write still waits for a lock (another process writing its own result): released 0.3 s into the
    write, the result is stored without a warning."""
    launch(n=100)
    with locked(isolated_db) as release:
        spent = timed_store(monkeypatch, lambda: threading.Timer(0.3, release).start())
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # "could not be saved" would fail the test
            launch(n=5000)
    assert len(tuning.rows()) == 2 and spent[0] > 0.25


def test_an_explicit_tuning_waits_longer_than_a_launch(isolated_db, monkeypatch):
    """kernel.tune() (and tlec tune, which calls it) was asked for the result: it waits past LAUNCH_WRITE_WAIT_S."""
    mod = launch(n=100)
    with locked(isolated_db) as release:
        spent = timed_store(monkeypatch, lambda: threading.Timer(tuning.LAUNCH_WRITE_WAIT_S + 1.5, release).start())
        x = torch.randn(5000)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            result = mod.vector_add.tune(lambda m: (cdiv(m["N"], m["BLOCK"]),), x, x, torch.empty(5000))
    assert not result.from_db and spent[0] > tuning.LAUNCH_WRITE_WAIT_S
    assert len(tuning.rows()) == 2, "stored once the lock was released"


def test_a_read_only_database_serves_lookups(isolated_db, monkeypatch):
    launch()
    monkeypatch.setattr(tuning, "_connections", {})
    monkeypatch.setattr(tuning, "_writable", lambda path: False)  # the tests run as root: no permission says so
    statements = []
    real = sqlite3.connect

    def connect(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn
    monkeypatch.setattr(sqlite3, "connect", connect)
    assert len(tuning.rows()) == 1
    assert not any("journal_mode" in s or "CREATE" in s for s in statements)
    with pytest.warns(RuntimeWarning, match="read-only"):
        launch(n=5000)  # a new bucket: tuned, used, not stored


def test_every_way_into_the_database_names_the_file(isolated_db, monkeypatch):
    """Opening, reading and writing share one error path (tuning._using): each says which file, and a connection
    opened read-only stays so while a writable one opened later for the same file stores."""
    with open(isolated_db, "w") as f:
        f.write("garbage " * 100)
    row = {**{c: "x" for c in tuning.KEY_COLUMNS}, "key": "k", "config": {"BM": 16}, "time_s": 1.0,
           "default_time_s": None, "exact_shape": "{}", "stats": {}, "created": "now"}
    for use in (tuning._db, tuning.rows, lambda: tuning.lookup_key("k"), lambda: tuning.store(row)):
        monkeypatch.setattr(tuning, "_connections", {})
        with pytest.raises(tuning.TuneDBError, match=f"{isolated_db}: the file is not an SQLite database"):
            use()
    os.remove(isolated_db)
    tuning.store(row)
    monkeypatch.setattr(tuning, "_connections", {})
    with monkeypatch.context() as m:
        m.setattr(tuning, "_writable", lambda path: False)
        assert tuning.lookup_key("k")["config"] == {"BM": 16}
        with pytest.raises(tuning.TuneDBError, match="read-only here"):
            tuning.store({**row, "time_s": 2.0})
    monkeypatch.setattr(tuning, "_connections", {})
    tuning.store({**row, "time_s": 2.0})
    assert [r["time_s"] for r in tuning.rows()] == [2.0]


def good_export(tmp_path):
    launch()
    path = tmp_path / "e.json"
    tuning.export(str(path))
    return json.loads(path.read_text())


def write(tmp_path, data, name="i.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize("edit, why", [
    (lambda r: None, "a row must be an object, not NoneType"),
    (lambda r: {**r, "config": "BLOCK=64"}, "config must be an object"),
    (lambda r: {**r, "time_s": float("nan")}, "time_s must be a positive finite number"),
    (lambda r: {**r, "time_s": "fast"}, "time_s must be a positive finite number"),
    (lambda r: {**r, "stats": [1]}, "stats must be an object or null"),
    (lambda r: {**r, "extra": 1}, "unknown field extra"),
])
def test_import_refuses_a_bad_row_and_imports_nothing(tmp_path, monkeypatch, edit, why):
    data = good_export(tmp_path)
    other = dict(data["rows"][0], key="k", kernel="other")
    other["key"] = tuning.make_key(other)
    data["rows"] = [other, edit(copy.deepcopy(data["rows"][0]))]
    path = write(tmp_path, data)
    monkeypatch.setenv("TLE_TUNE_DB", str(tmp_path / "dst.sqlite"))
    with pytest.raises(TuneError, match=f"{path}: row .*{why}.*nothing was imported"):
        tuning.import_(path)
    assert tuning.rows() == [], "the good row before the bad one is not imported either"


def test_import_keeps_the_faster_of_duplicates_and_of_local_rows(tmp_path, capsys):
    data = good_export(tmp_path)
    row = data["rows"][0]
    slower = {**row, "config": {"BLOCK": 256}, "time_s": row["time_s"] * 2}
    faster = {**row, "config": {"BLOCK": 1024}, "time_s": row["time_s"] / 2}
    assert tuning.import_(write(tmp_path, {"tle_tuning": 1, "rows": [slower, faster]})) == 1
    assert tuning.rows()[0]["config"] == {"BLOCK": 1024}, "of a key twice in a file, the faster"
    assert tuning.import_(write(tmp_path, {"tle_tuning": 1, "rows": [slower]}, "slow.json")) == 0
    assert tuning.rows()[0]["config"] == {"BLOCK": 1024}, "a slower imported row does not replace a faster one"
    assert "kept 1 local result faster" in capsys.readouterr().err


def test_list_shows_a_bad_row(isolated_db):
    launch()
    tuning._db().execute("UPDATE tuned SET config = 'not json', time_s = 'x', stats = 'null'")
    tuning._db().commit()
    out = subprocess.run([sys.executable, "-m", "tle.runtime.tuning", "--list"], capture_output=True, text=True,
                         env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert "best None: 'x' (not a time)" in out.stdout


def test_the_module_command_line_errors(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "tle.runtime.tuning", *args], capture_output=True, text=True,
                              env=os.environ.copy())
    out = run("--import", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "--import: cannot import" in out.stderr and "Traceback" not in out.stderr
    out = run("--export", str(tmp_path / "no" / "e.json"))
    assert out.returncode == 2 and "--export: cannot write the export to" in out.stderr
    os.mkdir(tmp_path / "adir")
    out = run("--export", str(tmp_path / "adir"))  # written to adir.tmpPID, which cannot replace a directory
    assert out.returncode == 2 and "--export: cannot write" in out.stderr
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f], "no adir.tmpPID left behind"
