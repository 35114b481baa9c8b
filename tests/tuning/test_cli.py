"""tlec tune and python -m tle.runtime.tuning, run as commands (the interpreter on the CPU)."""
import json
import os
import subprocess
import sys

import pytest

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
    assert code == 2 and "no compile-time constant 'BLOCKX'" in err
    code, err = run_main(capsys, "tune", VECTOR_ADD, "-P", "BLOCK=256", "--grid", "1", "--device", "cpu")
    assert code == 2 and "--shape: give N" in err
    code, err = run_main(capsys, "tune", VECTOR_ADD, "--shape", "N=100", "--grid", "1", "--device", "cpu")
    assert code == 2 and "declares no tuning space" in err


def test_tlec_compile_is_unchanged():
    out = tlec(VECTOR_ADD, "--emit=tle")
    assert out.returncode == 0 and "func.func @vector_add" in out.stdout
    out = tlec("--help")
    assert out.returncode == 0 and "--emit" in out.stdout


BASE = [VECTOR_ADD, "--shape", "N=2000", "--dtype", "f32", "-P", "BLOCK=256,1024", "--grid", "cdiv(N, BLOCK)",
        "--device", "cpu"]


def with_flag(flag, value):
    """BASE with `flag` set to `value` (replaced where BASE has it)."""
    args = list(BASE)
    if flag in args:
        args[args.index(flag) + 1] = value
        return args
    return args + [flag, value]


@pytest.mark.parametrize("args, says", [
    (["missing.tle"] + BASE[1:], "no file 'missing.tle'"),
    (with_flag("--grid", "cdiv(N, BLOK)"), "--grid 'cdiv(N, BLOK)': NameError"),
    (with_flag("--grid", "cdiv(N,"), "--grid 'cdiv(N,': SyntaxError"),
    (with_flag("--grid", "0"), "no program would run"),
    (with_flag("--grid", "1.5"), "expected 1 to 3 integers"),
    (with_flag("--shape", "N=-5"), "--shape N=-5: a dim is a positive integer"),
    (with_flag("--shape", "N=abc"), "--shape N=abc: a dim is a positive integer"),
    (with_flag("--shape", "N=2000,Q=5"), "--shape Q=5: kernel 'vector_add' has no dim Q"),
    (with_flag("--export", "/nonexistent/dir/e.json"), "--export /nonexistent/dir/e.json: its folder"),
    (with_flag("--import", "/nonexistent.json"), "--import /nonexistent.json: no such file"),
    (BASE + ["-P", "BLOCK=512"], "-P BLOCK is given twice"),
    (with_flag("--budget-s", "-1"), "--budget-s -1: give a positive number"),
    (with_flag("--budget-s", "nan"), "--budget-s nan: give a positive number"),
    (with_flag("--max-candidates", "0"), "--max-candidates 0: give a positive count"),
    (with_flag("--jobs", "-3"), "--jobs -3: give a positive count"),
    (with_flag("--device", "gpu"), "--device gpu: expected cuda, cuda:N or cpu"),
    (with_flag("--key-dims", "Q"), "--key-dims: TuneSpace.key_dims: kernel 'vector_add' has no symbolic dim 'Q'"),
])
def test_tlec_tune_command_line_errors(capsys, args, says):
    code, err = run_main(capsys, "tune", *args)
    assert code == 2 and says in err and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("tlec tune: error:")


def test_tlec_tune_without_a_gpu_refuses(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    code, err = run_main(capsys, "tune", *BASE[:-2])  # --device cuda, the default
    assert code == 2 and "--device cuda: no CUDA GPU here" in err


def test_tlec_tune_bad_grid_is_found_before_the_database(capsys, monkeypatch):
    from tle.runtime import tuning
    monkeypatch.setattr(tuning, "lookup_key", lambda *a, **k: pytest.fail("the database was asked"))
    code, err = run_main(capsys, "tune", *with_flag("--grid", "cdiv(N, BLOK)"))
    assert code == 2


def test_tlec_tune_occupancy_none_and_a_tuned_dtype(tmp_path, capsys):
    """-P occupancy=None,2 was the string 'None'; --dtype f32 pinned ACC, which the kernel's own space tunes."""
    code, err = run_main(capsys, "tune", *BASE, "-P", "occupancy=None,2")
    assert code == 0, err
    src = tmp_path / "rowsum.tle"
    src.write_text("""
kernel rowsum<BLOCK: int = 1024, ACC: dtype = f32>(x: tensor<f32>[M, N], y: tensor<f32>[M, 1])
        tune(BLOCK=[1024, 2048], ACC=[f32, f16]) {
    let t = cast<ACC>(load(x, tile=[1, BLOCK], at=[program_id(0), 0], pad=0))
    store(y, cast<f32>(sum(t, axis=1, keepdims=true)), at=[program_id(0), 0])
}
""")
    code, err = run_main(capsys, "tune", str(src), "--shape", "M=4,N=1000", "--dtype", "f32", "--grid", "M",
                         "--device", "cpu")
    assert code == 0, err
    from tle.runtime import tuning
    assert set(tuning.rows(kernel="rowsum")[0]["config"]) == {"BLOCK", "ACC"}


def test_tlec_tune_says_when_the_best_is_the_default():
    out = tlec("tune", *with_flag("-P", "BLOCK=1024"))
    assert out.returncode == 0, out.stderr
    assert "default  the same configuration" in out.stdout and "1.00x slower" not in out.stdout
