"""tle.targets: IR -> binary. triton.py (TTIR -> cubin) and tileir.py (Tile IR -> bytecode -> tileiras -> cubin)."""
