"""Start points of a multi-start fit: drawn within the PEtab bounds on the parameter scale.

``"uniform"`` (pyPESTO's default, ``UniformStartpoints``): independent uniform draws in the
box. ``"lhs"``: a Latin hypercube (scipy.stats.qmc), one draw in each of ``n`` equal slices of
every parameter's range. Both reproducible: the same ``seed`` gives the same points.
"""
from __future__ import annotations

import numpy as np

from .objective import FitError

__all__ = ["SAMPLINGS", "draw_starts"]

SAMPLINGS = ("uniform", "lhs")


def bounds_of(problem):
    """``(lower, upper)`` on the parameter scale; a :class:`FitError` naming unbounded parameters."""
    lb, ub = problem.bounds[:, 0].astype(float), problem.bounds[:, 1].astype(float)
    bad = [problem.parameter_ids[i] for i in np.flatnonzero(~(np.isfinite(lb) & np.isfinite(ub) & (ub > lb)))]
    if bad:
        raise FitError(f"parameters {', '.join(map(repr, bad))} have no finite bounds lower < upper on their scale "
                       "(parameter table, lowerBound / upperBound): a fit draws its starts within the bounds")
    return lb, ub


def draw_starts(problem, n, seed=None, sampling="uniform"):
    """``(n, d)`` start points within ``problem``'s bounds, on the parameter scale.

    Parameters
    ----------
    problem : Problem
    n : int
    seed : int or numpy.random.SeedSequence, optional
        The same seed gives the same points.
    sampling : {"uniform", "lhs"}
    """
    if sampling not in SAMPLINGS:
        raise FitError(f"'sampling' must be one of {', '.join(map(repr, SAMPLINGS))}, got {sampling!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise FitError(f"'n_starts' must be an integer >= 1, got {n!r}")
    lb, ub = bounds_of(problem)
    rng = np.random.default_rng(seed)
    if sampling == "uniform":
        u = rng.random((int(n), lb.size))
    else:
        from scipy.stats import qmc
        u = qmc.LatinHypercube(d=lb.size, seed=rng).random(int(n))
    return lb + u * (ub - lb)
