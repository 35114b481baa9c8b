"""The on-disk kernel cache: compiled Binaries keyed by everything that decides their bytes.

The key (see runtime/kernel.py) covers the kernel's source text and every file it imports, its name, the
compile-time constants, the specialisation facts, the backend and its options, the target architecture, and the
versions of tle and of the backend compiler. So a second process with the same kernel and arguments compiles
nothing, and an edited kernel or an upgraded Triton never sees a stale binary.

Writes go to a temporary file renamed into place, so concurrent processes never read half a file.
"""
from __future__ import annotations

import hashlib
import os

from .. import debug


_BUILD_ID = None


def build_id() -> str:
    """tle's version plus a hash of its own source files: binaries built by an edited compiler (a development
    checkout between releases) never come back from the cache. Computed once per process (~1 ms)."""
    global _BUILD_ID
    if _BUILD_ID is None:
        import importlib
        from .. import __version__
        h = hashlib.sha256(__version__.encode())
        for part in ("tle", "tle.dialects", "tle.lowering", "tle.targets", "tle.runtime"):
            folder = os.path.dirname(importlib.import_module(part).__file__)
            for f in sorted(os.listdir(folder)):
                if f.endswith((".py", ".lark")):
                    with open(os.path.join(folder, f), "rb") as fh:
                        h.update(f.encode() + b"\0" + fh.read())
        _BUILD_ID = f"{__version__}+{h.hexdigest()[:12]}"
    return _BUILD_ID


def key_of(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _path(key: str) -> str | None:
    root = debug.cache_dir()
    return os.path.join(root, key[:2], key + ".bin") if root else None


def get(key: str) -> bytes | None:
    path = _path(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def put(key: str, data: bytes) -> None:
    path = _path(key)
    if path is not None:
        debug.write_cache_file(path, data)  # atomic; a read-only or full disk only costs a recompilation next time
