"""tle: a tile-level kernel language and compiler.

    import tle
    mod = tle.compile("softmax.tle")
    mod.softmax[(rows,)](x, y, BLOCK=1024)

See docs/language.md for the language and docs/architecture.md for the compiler's stages.
"""
__version__ = "0.1.0"

from .diagnostics import TleError  # noqa: E402
from .api import Module, compile  # noqa: E402,A004
from .runtime.kernel import LaunchError  # noqa: E402

__all__ = ["compile", "Module", "TleError", "LaunchError", "__version__"]
