"""tle.lowering: AST -> tle dialect -> TTIR | Tile IR, one module per step, plus the Tile IR legality check."""
