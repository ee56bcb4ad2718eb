"""The finite-difference side of ``benchmarks/collection.py``: central differences over all or some
coordinates, the choice of the coordinates of a spot check, the time budget, and the error measures.

A spot check (for problems whose ``2 d`` FD llh evaluations do not fit the timeout) compares the
gradient with central differences on a few coordinates only: the ``k_top`` of largest ``|g|`` (where
a wrong gradient does most harm and the relative error is measured against a scale close to the full
``max|g|``) and ``k_random`` drawn from the others by a seeded generator (so that small components
are looked at too, reproducibly).
"""
from __future__ import annotations

import math

import numpy as np

#: coordinates of an automatic spot check: half of largest |gradient|, half seeded random
AUTO_SPOT = 6
SPOT_SEED = 0


def rel_err_max(g, g_ref):
    """``max|g - g_ref| / max|g_ref|`` (``inf`` for a non-finite ``g``; absolute when ``g_ref`` is 0)."""
    g, g_ref = np.asarray(g, dtype=float), np.asarray(g_ref, dtype=float)
    if g.shape != g_ref.shape:
        raise ValueError(f"gradient shapes differ: {g.shape} vs {g_ref.shape}")
    if not np.all(np.isfinite(g)):
        return math.inf
    scale = float(np.max(np.abs(g_ref))) if g_ref.size else 0.0
    err = float(np.max(np.abs(g - g_ref))) if g.size else 0.0
    return err / scale if scale > 0 else err


def richardson(g_h, g_half):
    """Central differences at steps ``h`` and ``h / 2`` extrapolated to step 0: their O(h^2) error
    cancels, ``(4 g_half - g_h) / 3`` is O(h^4)."""
    return (4.0 * np.asarray(g_half, dtype=float) - np.asarray(g_h, dtype=float)) / 3.0


def central_differences(f, theta, indices, step):
    """``(f(theta + step e_i) - f(theta - step e_i)) / (2 step)`` for each ``i`` in ``indices``."""
    theta = np.asarray(theta, dtype=float)
    out = np.empty(len(indices))
    for j, i in enumerate(indices):
        e = np.zeros(theta.size)
        e[i] = step
        out[j] = (f(theta + e) - f(theta - e)) / (2 * step)
    return out


def spot_coordinates(g, k, seed=SPOT_SEED):
    """``(top, random)``: index lists of a spot check with ``k`` coordinates of ``g``: the
    ``ceil(k / 2)`` of largest ``|g|`` (ties by index) and ``k - ceil(k / 2)`` others drawn without
    replacement by ``numpy.random.default_rng(seed)``; every coordinate when ``k >= len(g)``."""
    g = np.asarray(g, dtype=float)
    n = g.size
    k = int(k)
    if k < 1:
        raise ValueError(f"k: a spot check needs at least one coordinate, got {k}")
    if k >= n:
        return list(range(n)), []
    k_top = (k + 1) // 2
    order = sorted(range(n), key=lambda i: (-abs(g[i]) if np.isfinite(g[i]) else -math.inf, i))
    top = sorted(order[:k_top])
    rest = np.array(sorted(set(range(n)) - set(top)))
    rnd = np.random.default_rng(seed).choice(rest, size=k - k_top, replace=False) if k > k_top else []
    return top, sorted(int(i) for i in rnd)


def fd_budget_ok(t_eval, dim, elapsed, timeout, skip_above, margin=1.2):
    """``(ok, reason)``: whether the gradient check (``2 dim`` FD llh evaluations of ``t_eval``
    seconds each) should run, given the per-evaluation limit and what is left of the timeout."""
    if t_eval > skip_above:
        return False, f"one llh evaluation took {t_eval:.1f} s > --skip-gradient-above {skip_above:g} s"
    need = margin * 2 * dim * t_eval
    left = timeout - elapsed
    if need > left:
        return False, (f"{2 * dim} FD evaluations of ~{t_eval:.2f} s each (~{need:.0f} s) "
                       f"do not fit in the {left:.0f} s left of the {timeout:g} s timeout")
    return True, ""


def fd_plan(t_eval, dim, elapsed, timeout, forced=None, auto=AUTO_SPOT, margin=1.2):
    """``(k, reason)``: how many coordinates the FD check takes. ``k == dim`` is the full check;
    ``0 < k < dim`` a spot check (``reason`` says why); ``k == 0``: nothing fits (``reason``).

    ``forced``: the ``--fd-coordinates`` option (a spot check of that many coordinates, or of as
    many of them as fit); else the full check when its ``2 dim`` evaluations fit in what is left of
    the timeout, else a spot check of up to ``auto`` coordinates."""
    left = timeout - elapsed
    fit = int(left // (margin * 2 * max(t_eval, 1e-9)))
    want = dim if forced is None else min(int(forced), dim)
    if fit >= want:
        return want, ("" if want == dim else f"--fd-coordinates {int(forced)}")
    if fit < 1:
        return 0, (f"not even 2 FD evaluations of ~{t_eval:.2f} s fit in the {left:.0f} s left of the "
                   f"{timeout:g} s timeout")
    k = min(fit, want if forced is not None else auto)
    return k, (f"{2 * dim} FD evaluations of ~{t_eval:.2f} s each (~{margin * 2 * dim * t_eval:.0f} s) do not "
               f"fit in the {left:.0f} s left of the {timeout:g} s timeout")
