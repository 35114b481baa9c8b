"""Every TLE_* environment variable, in one place.

TLE_DEBUG=N   1: time each stage; 2: also print the IR after each stage (with locations);
              3: also the final TTIR / Tile IR text; 4: Python tracebacks for errors in tlec.
TLE_CACHE_DIR the on-disk cache of kernels and of the parser's tables (default ~/.cache/tle); TLE_CACHE=0
              disables it.
TLE_TILEIRAS  the tileiras binary to use (else PATH, else the nvidia-cuda-tileiras package).
TLE_MLIR      torch_mlir | jaxlib: which MLIR Python bindings to use (default: whichever imports).
TLE_TUNE_DB   the autotuning database (default ~/.cache/tle/tuning.sqlite); TLE_TUNE_QUIET=1: no progress bar.
TLE_FAST_LAUNCH=0  no C launcher (runtime/fastlaunch.py): every launch takes the Python path.
TLE_ATOMIC_ORDER=shuffle  the interpreter applies the atomics of programs it runs together in a random order (a
              GPU's is unset), not in program order; TLE_ATOMIC_ORDER=shuffle:SEED repeats one order.

The cache directory is found here (cache_dir) and its files written here (write_cache_file), for the kernel cache
(runtime/cache.py) and the parser's tables (tle/parser.py) alike.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time


def level() -> int:
    try:
        return int(os.environ.get("TLE_DEBUG", "0"))
    except ValueError:
        return 1


def cache_dir() -> str | None:
    if os.environ.get("TLE_CACHE", "1") == "0":
        return None
    return os.environ.get("TLE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tle")


def write_cache_file(path: str, data: bytes) -> bool:
    """Write a file of the cache directory through a temporary file renamed into place, so that a process reading
    it concurrently sees the whole old file or the whole new one, never half; a failed write leaves no temporary
    file behind. False: not written (a read-only or full disk only costs rebuilding the entry next time)."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return False


@contextlib.contextmanager
def timed(stage: str):
    if level() < 1:
        yield
        return
    t0 = time.perf_counter()
    yield
    print(f"[tle] {stage}: {(time.perf_counter() - t0) * 1e3:.1f} ms", file=sys.stderr)


def dump(stage: str, text) -> None:
    if level() >= 2 and isinstance(text, str):
        print(f"// ----- [tle] IR after {stage} -----\n{text}", file=sys.stderr)


def note(message: str) -> None:
    """A one-line notice (e.g. a fallback to the native CUDA path), printed from TLE_DEBUG=1 on."""
    if level() >= 1:
        print(f"[tle] {message}", file=sys.stderr)


def atomic_order_seed() -> int | None:
    """TLE_ATOMIC_ORDER: None for program order (the default); else the seed of the interpreter's random order of
    atomics (a fresh one per process for `shuffle`, SEED for `shuffle:SEED`)."""
    value = os.environ.get("TLE_ATOMIC_ORDER", "")
    if not value.startswith("shuffle"):
        return None
    _, _, seed = value.partition(":")
    return int(seed) if seed.strip().lstrip("-").isdigit() else int.from_bytes(os.urandom(4), "little")

