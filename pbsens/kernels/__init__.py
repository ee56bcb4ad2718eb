"""Numba kernels: matrix functions, single steps, and the march over a grid.

Kernels know nothing of models' names or files: they receive compiled model
functions as first-class function arguments (see :mod:`pbsens.kernels.signatures`).
"""
