"""Model definition and compilation: spec -> sympy -> generated, cached numba code."""
