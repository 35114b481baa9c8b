"""tle: a tile-level kernel language and compiler.

    import tle
    mod = tle.compile("softmax.tle")
    mod.softmax[(rows,)](x, y, BLOCK=1024)

See docs/language.md for the language and docs/architecture.md for the compiler's stages.
"""
__version__ = "0.1.0"

import sys  # noqa: E402

# The parser, the checker and the lowerings recurse along an expression's tree: one line adding 250 terms (an
# unrolled polynomial, generated code) went past Python's default of 1000 frames. Calls between Python functions
# take no C stack since 3.11, so a deeper limit costs nothing until it is used.
if sys.getrecursionlimit() < 20000:
    sys.setrecursionlimit(20000)

from .diagnostics import TleError, TlePaddingWarning, TleWarning  # noqa: E402
from .api import Module, compile  # noqa: E402,A004
from .runtime.kernel import LaunchError  # noqa: E402


def __getattr__(name):  # tle.tuning (runtime/tuning.py, through tle/tuning.py), imported on first use
    if name == "tuning":
        import importlib
        return importlib.import_module("tle.tuning")
    raise AttributeError(f"module 'tle' has no attribute '{name}'")


__all__ = ["compile", "Module", "TleError", "TleWarning", "TlePaddingWarning", "LaunchError", "tuning", "__version__"]
