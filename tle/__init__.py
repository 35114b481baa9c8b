"""tle: a tile-level kernel language and compiler."""
__version__ = "0.1.0"
