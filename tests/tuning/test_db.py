"""The tuning database: what keys a result, lazy lookups, two processes at once, export and import."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tle
from tle.runtime import tuning
from tuning_helpers import EXAMPLES, FakeTimer, matmul_grid

MATMUL = os.path.join(EXAMPLES, "matmul.tle")
SPACE = {"BM": [16, 32], "BN": [16, 32], "BK": [16, 32]}


def matmul_args(m, n=48, k=40):
    torch.manual_seed(0)
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    return a, b, torch.empty(m, n).half()


def tuned_kernel(source=None, timer=None):
    mod = tle.compile(source, filename=MATMUL) if source else tle.compile(MATMUL)
    timer = timer or FakeTimer({"BM": 32, "BN": 16, "BK": 32})
    mod.matmul.tune_space = tuning.TuneSpace(SPACE, timer=timer, on_cpu=True)
    return mod.matmul, timer


def test_same_bucket_hits_new_bucket_misses():
    k, timer = tuned_kernel()
    a, b, c = matmul_args(100)
    k[matmul_grid](a, b, c)
    assert timer.calls, "the first launch of a bucket tunes"
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    n = len(timer.calls)
    k[matmul_grid](*matmul_args(120))  # 100 and 120 both round up to 128; neither is divisible by 16
    assert len(timer.calls) == n
    k2, timer2 = tuned_kernel()  # a fresh process-like kernel: the result comes from the database
    k2[matmul_grid](*matmul_args(120))
    assert timer2.calls == []
    k[matmul_grid](*matmul_args(200))  # M bucket 256: tuned again
    assert len(timer.calls) > n
    assert len(tuning.rows()) == 2


def test_divisibility_is_part_of_the_key():
    k, timer = tuned_kernel()
    k[matmul_grid](*matmul_args(100))
    n = len(timer.calls)
    k[matmul_grid](*matmul_args(128))  # same bucket as 100, but M divisible by 16 changes the binary
    assert len(timer.calls) > n


def test_edited_source_misses():
    k, timer = tuned_kernel()
    k[matmul_grid](*matmul_args(100))
    with open(MATMUL, encoding="utf-8") as f:
        edited = f.read() + "\n// an edit\n"
    k2, timer2 = tuned_kernel(edited)
    k2[matmul_grid](*matmul_args(100))
    assert timer2.calls, "an edited kernel is tuned again"
    assert len({r["fingerprint"] for r in tuning.rows()}) == 2


def test_different_gpu_name_misses(monkeypatch):
    k, timer = tuned_kernel()
    monkeypatch.setattr(tuning, "_device_info", lambda device: ("NVIDIA H200", "sm_90"))
    k[matmul_grid](*matmul_args(100))
    n = len(timer.calls)
    k2, timer2 = tuned_kernel()
    k2[matmul_grid](*matmul_args(100))
    assert timer2.calls == []
    monkeypatch.setattr(tuning, "_device_info", lambda device: ("NVIDIA H100 80GB HBM3", "sm_90"))
    k3, timer3 = tuned_kernel()
    k3[matmul_grid](*matmul_args(100))
    assert timer3.calls and len(timer.calls) == n
    assert {r["device"] for r in tuning.rows()} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}


def test_changed_space_misses():
    k, timer = tuned_kernel()
    k[matmul_grid](*matmul_args(100))
    k.tune_space = tuning.TuneSpace({**SPACE, "BK": [16, 32, 64]}, timer=timer, on_cpu=True)
    n = len(timer.calls)
    k[matmul_grid](*matmul_args(100))
    assert len(timer.calls) > n


def test_lookup_is_lazy(isolated_db):
    for i in range(50):  # unrelated rows that must never be read
        tuning.store({**{c: f"x{i}" for c in tuning.KEY_COLUMNS}, "key": f"k{i}", "config": {"BM": 16},
                      "time_s": 1.0, "default_time_s": None, "exact_shape": "{}", "stats": {}, "created": "now"})
    statements = []
    tuning._db().set_trace_callback(statements.append)
    try:
        k, timer = tuned_kernel()
        k[matmul_grid](*matmul_args(100))  # tunes: one SELECT, one INSERT
        reads = [s for s in statements if "FROM tuned" in s]
        assert len(reads) == 1 and "WHERE key =" in reads[0]
        statements.clear()
        k[matmul_grid](*matmul_args(100))  # the plan cache
        k[matmul_grid](*matmul_args(110))  # a new signature in a known bucket: the in-memory table
        assert statements == []
        k2, _ = tuned_kernel()
        k2[matmul_grid](*matmul_args(100))  # a new kernel object: one indexed SELECT, nothing else
        assert len(statements) == 1 and "WHERE key =" in statements[0]
    finally:
        tuning._db().set_trace_callback(None)


def test_lookup_and_list():
    k, _ = tuned_kernel()
    a, b, c = matmul_args(100)
    assert tuning.lookup(k, a, b, c) is None
    k[matmul_grid](a, b, c)
    row = tuning.lookup(k, a, b, c)
    assert row["config"] == {"BM": 32, "BN": 16, "BK": 32}
    assert row["time_s"] == pytest.approx(1e-3) and row["created"].startswith("20")
    assert json.loads(row["shape"]) == {"K": 40, "M": 128, "N": 48}
    out = subprocess.run([sys.executable, "-m", "tle.runtime.tuning", "--list"], capture_output=True, text=True,
                         env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert "matmul" in out.stdout and "BK=32,BM=32,BN=16" in out.stdout


def test_export_import_round_trip(tmp_path, monkeypatch):
    k, _ = tuned_kernel()
    k[matmul_grid](*matmul_args(100))
    k[matmul_grid](*matmul_args(200))
    path = str(tmp_path / "tuned.json")
    assert tuning.export(path) == 2
    monkeypatch.setenv("TLE_TUNE_DB", str(tmp_path / "other.sqlite"))
    assert tuning.rows() == []
    assert tuning.import_(path) == 2
    k2, timer2 = tuned_kernel()
    k2[matmul_grid](*matmul_args(200))
    assert timer2.calls == [], "an imported result is used without tuning"
    assert sorted(r["key"] for r in tuning.rows()) == sorted(r["key"] for r in json.load(open(path))["rows"])
    data = json.load(open(path))
    data["rows"][0]["device"] = "something else"  # a row whose key no longer matches its columns
    json.dump(data, open(path, "w"))
    with pytest.raises(ValueError, match="key does not match"):
        tuning.import_(path)


WRITER = textwrap.dedent("""
    import sys
    from tle.runtime import tuning
    tag = sys.argv[1]
    for i in range(150):
        key = "shared" if i % 10 == 0 else f"{tag}{i}"
        tuning.store({**{c: tag for c in tuning.KEY_COLUMNS}, "key": key, "config": {"i": i}, "time_s": 1.0,
                      "default_time_s": None, "exact_shape": "{}", "stats": {}, "created": "now"})
    print("done")
""")


def test_two_processes_write_at_once(isolated_db):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for tag in ("a", "b")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "done", err
    keys = [r["key"] for r in tuning.rows()]
    assert len(keys) == 2 * 135 + 1 and keys.count("shared") == 1
    assert tuning._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


TUNER = textwrap.dedent("""
    import sys, torch, tle
    from tle.runtime import tuning
    calls = []
    def timer(config, trial, reps):
        calls.append(config)
        return 1e-3 * (1 + abs(config["BM"] - 32) + abs(config["BN"] - 16))
    mod = tle.compile(sys.argv[1], tune={"matmul": {"BM": [16, 32], "BN": [16, 32], "timer": timer, "on_cpu": True}})
    a, b, c = torch.randn(100, 40).half(), torch.randn(40, 48).half(), torch.empty(100, 48).half()
    mod.matmul[lambda m: (-(-m["M"] // m["BM"]), -(-m["N"] // m["BN"]))](a, b, c, BK=16)
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    print(len(calls))
""")


def test_tuned_once_across_processes():
    def run():
        out = subprocess.run([sys.executable, "-c", TUNER, MATMUL], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])
    first = run()
    assert first > 0
    assert run() == 0, "a second process finds the result and tunes nothing"
    rows = tuning.rows()
    assert len(rows) == 1 and rows[0]["config"] == {"BM": 32, "BN": 16}


def test_the_key_holds_the_source_not_the_path(monkeypatch, tmp_path):
    """`tlec tune examples/x.tle` from the project root and tle.compile('/abs/.../x.tle') never shared a row: the
    fingerprint hashed the path as typed."""
    k, timer = tuned_kernel()
    a, b, c = matmul_args(100)
    k[matmul_grid](a, b, c)
    monkeypatch.chdir(os.path.dirname(EXAMPLES))
    mod = tle.compile(os.path.join("examples", "matmul.tle"))
    mod.matmul.tune_space = tuning.TuneSpace(SPACE, timer=timer, on_cpu=True)
    assert tuning.lookup(mod.matmul, a, b, c)["config"] == {"BM": 32, "BN": 16, "BK": 32}
    copy = tmp_path / "elsewhere.tle"  # the same text in another file: the same kernel
    copy.write_text(open(MATMUL, encoding="utf-8").read())
    mod = tle.compile(str(copy))
    mod.matmul.tune_space = tuning.TuneSpace(SPACE, timer=timer, on_cpu=True)
    assert tuning.lookup(mod.matmul, a, b, c) is not None
    assert tuning.rows()[0]["tle_version"] == tle.__version__, "the release, not a hash of tle's own files"


def test_defaults_given_explicitly_and_value_order_share_the_key():
    k, timer = tuned_kernel()
    a, b, c = matmul_args(100)
    k[matmul_grid](a, b, c)
    n = len(timer.calls)
    k[matmul_grid](a, b, c, T="f16")  # the dtype the tensors give
    k[matmul_grid](a, b, c, backend="auto")  # the kernel's backend
    k[matmul_grid](a, b, c, occupancy=None)  # the option's default
    assert len(timer.calls) == n and len(tuning.rows()) == 1
    k2, timer2 = tuned_kernel()
    k2.tune_space = tuning.TuneSpace({"BK": [32, 16], "BN": [32, 16], "BM": [32, 16]}, timer=timer2, on_cpu=True)
    k2[matmul_grid](a, b, c)
    assert timer2.calls == [], "the same space in another order is the same space"


def test_a_constant_given_its_declared_default_shares_the_key():
    mod = tle.compile(MATMUL)  # BK: int = 64
    timer = FakeTimer({"BM": 32, "BN": 16})
    mod.matmul.tune_space = tuning.TuneSpace({"BM": [16, 32], "BN": [16, 32]}, timer=timer, on_cpu=True)
    a, b, c = matmul_args(40, 40, 64)
    mod.matmul[matmul_grid](a, b, c)
    n = len(timer.calls)
    mod.matmul[matmul_grid](a, b, c, BK=64)
    assert len(timer.calls) == n and len(tuning.rows()) == 1


def test_lookup_takes_the_launch_grid():
    """lookup() built its key without a grid, so a result tuned under a fixed grid (part of the key) could not be
    found; it takes the launch's grid as a keyword, and without one still finds the results of callable grids."""
    k, _ = tuned_kernel()
    a, b, c = matmul_args(100)
    k[(7, 3)](a, b, c)  # covers M=100, N=48 with any tile of 16 or more
    assert tuning.lookup(k, a, b, c) is None, "no grid: the key of a callable grid"
    row = tuning.lookup(k, a, b, c, grid=(7, 3))
    assert row["config"] == {"BM": 32, "BN": 16, "BK": 32} and json.loads(row["fixed"])["grid"] == [7, 3]
    assert tuning.lookup(k, a, b, c, grid=(7, 3, 1)) == row, "one grid, written two ways"
    assert tuning.lookup(k, a, b, c, grid=(8, 3)) is None
    assert tuning.lookup(k, a, b, c, grid=matmul_grid) is None
    k[matmul_grid](a, b, c)
    assert tuning.lookup(k, a, b, c, grid=matmul_grid) == tuning.lookup(k, a, b, c) != row
