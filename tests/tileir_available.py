"""Whether this machine can assemble Tile IR: tileiras and the pinned cuda-tile bytecode writer, both optional
(the nvidia-cuda-tileiras extra). Tests that run tileiras skip without them; tests/conftest.py's folder is on
sys.path, so any test imports this."""
from tle.targets import tileir


def has_tileiras() -> bool:
    try:
        tileir.find_tileiras()
        tileir._bc()
        return True
    except (FileNotFoundError, ImportError):
        return False
