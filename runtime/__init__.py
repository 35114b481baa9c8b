"""tle.runtime: compiled kernels, argument binding and checks, launch, caches, the CPU interpreter."""
