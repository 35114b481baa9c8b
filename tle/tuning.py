"""tle.tuning: the autotuner (runtime/tuning.py: TuneSpace, the search, the tuning database) under the name the docs
use, so that `import tle.tuning` and `from tle.tuning import TuneSpace` work. The name is that module itself, not
a copy of its names: setting tle.tuning.X sets it where the tuner reads it."""
import sys

from .runtime import tuning as _tuning

sys.modules[__name__] = _tuning
