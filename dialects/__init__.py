"""tle.dialects: the tle MLIR dialect (tle.py) and helpers for the tt and cuda_tile ops tle emits."""
