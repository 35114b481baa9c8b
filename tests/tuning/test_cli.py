"""tlec tune and python -m tle.runtime.tuning, run as commands (the interpreter on the CPU)."""
import json
import os
import subprocess
import sys

from tuning_helpers import EXAMPLES, ROOT

VECTOR_ADD = os.path.join(EXAMPLES, "vector_add.tle")


def tlec(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tle.cli", *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), cwd=ROOT, timeout=600)


TUNE = ["tune", VECTOR_ADD, "--shape", "N=20000", "--dtype", "f32", "-P", "BLOCK=256,1024", "--grid",
        "cdiv(N, BLOCK)", "--device", "cpu"]


def test_tlec_tune_then_from_the_database(tmp_path):
    out = tlec(*TUNE)
    assert out.returncode == 0, out.stderr
    assert "best     BLOCK=" in out.stdout and "tuned now: 2 configurations" in out.stdout
    out = tlec(*TUNE, "--export", str(tmp_path / "e.json"))
    assert out.returncode == 0, out.stderr
    assert "from the tuning database" in out.stdout
    rows = json.load(open(tmp_path / "e.json"))["rows"]
    assert len(rows) == 1 and rows[0]["kernel"] == "vector_add" and rows[0]["shape"] == '{"N": 32768}'
    env = dict(os.environ, TLE_TUNE_DB=str(tmp_path / "fresh.sqlite"))
    out = tlec("tune", "--import", str(tmp_path / "e.json"), env=env)
    assert out.returncode == 0 and "imported 1" in out.stderr, out.stderr
    out = tlec(*TUNE, env=env)
    assert "from the tuning database" in out.stdout, out.stdout + out.stderr
    listing = subprocess.run([sys.executable, "-m", "tle.runtime.tuning", "--list"], capture_output=True,
                             text=True, env=env)
    assert "vector_add" in listing.stdout and "best BLOCK=" in listing.stdout


def run_main(capsys, *args):
    from tle.cli import main
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's parser.error
        code = e.code
    return code, capsys.readouterr().err


def test_tlec_tune_errors(capsys):
    code, err = run_main(capsys, "tune", VECTOR_ADD, "--shape", "N=100", "-P", "BLOCK=256", "--device", "cpu")
    assert code == 2 and "--grid is required" in err
    code, err = run_main(capsys, "tune", VECTOR_ADD, "--shape", "N=100", "-P", "BLOCKX=256", "--grid", "1",
                         "--device", "cpu")
    assert code == 1 and "no compile-time constant 'BLOCKX'" in err
    code, err = run_main(capsys, "tune", VECTOR_ADD, "-P", "BLOCK=256", "--grid", "1", "--device", "cpu")
    assert code == 2 and "--shape: give N" in err
    code, err = run_main(capsys, "tune", VECTOR_ADD, "--shape", "N=100", "--grid", "1", "--device", "cpu")
    assert code == 2 and "declares no tuning space" in err


def test_tlec_compile_is_unchanged():
    out = tlec(VECTOR_ADD, "--emit=tle")
    assert out.returncode == 0 and "func.func @vector_add" in out.stdout
    out = tlec("--help")
    assert out.returncode == 0 and "--emit" in out.stdout
