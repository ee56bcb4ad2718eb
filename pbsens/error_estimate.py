"""Error estimates of post-hoc sensitivities, and the grid refinement of ``sens_rtol``.

METHOD.md section 10 derives them. In short:

* **Step doubling on the same trajectory.** The march is repeated on the grid with
  every interval bisected; the states at the midpoints come from the state solver's
  dense output (``Trajectory.sol``) or, without one, from cubic Hermite interpolation
  with ``f`` at both ends (local state error ``O(h^4)``, below every method's
  ``O(h^{p+1})``). For a method of global order ``p``,
  ``S_h - S_exact ~ C h^p``, so ``S_h - S_exact ~ (2^p/(2^p - 1)) (S_h - S_h/2)``:
  the estimate is global (propagated by the march itself), not local.
* **Local error per interval** for ``sens_rtol``: with both marches stored at every
  point of the coarse grid, the increment of ``D_k = S_h(t_k) - S_h/2(t_k)`` over
  an interval is that interval's contribution (propagation over one interval
  neglected); intervals whose contribution exceeds their share of the tolerance are
  split into ``ceil((l_k / share_k)^(1/p))`` equal parts (local error ``h^(p+1)``
  per part, ``n`` parts).
* **The state solve** is not estimated by the above (both marches use the same
  states); :func:`state_error` compares the trajectory with a re-solve at a ten
  times tighter tolerance. Post-hoc accuracy cannot beat the state's.

Nothing here calls the state solver except :func:`state_error`.
"""
from __future__ import annotations

import warnings

import numpy as np

from .errors import AccuracyWarning

__all__ = ["method_order", "midpoint_states", "interpolate_states", "relative_difference", "refine_counts",
           "state_error", "warn_range"]


def method_order(method, branch_codes=None):
    """Global order used by the step-doubling estimate.

    ``exp``: 1. ``exp2``, ``pbs``, ``pbsr2``: 2. ``pbsr``: 1 if any interval took the
    first-order exponential step (``exp-stiff``), else 2 (``exp-equilibrium`` is exact).
    """
    from .kernels import codes
    if method == "exp":
        return 1
    if method == "pbsr":
        if branch_codes is not None and np.any(branch_codes == codes.BRANCH_STIFF):
            return 1
        return 2
    return 2


def interpolate_states(model, p, t_grid, x_grid, sol, t_new):
    """States at the times ``t_new`` (inside ``[t_grid[0], t_grid[-1]]``).

    From the solver's dense output ``sol`` when there is one, else by cubic Hermite
    interpolation between the grid states with ``f`` at both ends of each interval.
    """
    t_new = np.asarray(t_new, dtype=np.float64)
    if sol is not None:
        return np.ascontiguousarray(np.asarray(sol(t_new)).T.reshape(t_new.size, -1))
    k = np.clip(np.searchsorted(t_grid, t_new, side="right") - 1, 0, t_grid.size - 2)
    rhs_into, c = model.fns.rhs_into, model.constants
    nx = x_grid.shape[1]
    need = np.unique(np.concatenate([k, k + 1]))
    f = np.empty((t_grid.size, nx))
    for i in need:
        rhs_into(float(t_grid[i]), x_grid[i], p, c, f[i])
    h = (t_grid[k + 1] - t_grid[k])[:, None]
    s = (t_new - t_grid[k])[:, None] / h
    s2, s3 = s * s, s * s * s
    return np.ascontiguousarray((2 * s3 - 3 * s2 + 1) * x_grid[k] + (s3 - 2 * s2 + s) * h * f[k]
                                + (-2 * s3 + 3 * s2) * x_grid[k + 1] + (s3 - s2) * h * f[k + 1])


def midpoint_states(model, p, t, x, t_orig, x_orig, sol, counts=None):
    """The grid ``t`` with interval ``k`` split into ``counts[k]`` (default 2) equal parts.

    Returns ``(t_new, x_new, pos)``: ``t_new[pos] == t`` and ``x_new[pos] == x`` (the
    old points keep their states bitwise); new states from :func:`interpolate_states`
    on the original solver grid ``(t_orig, x_orig)``.
    """
    K = t.size
    counts = np.full(K - 1, 2, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    extra = counts - 1
    n_new = int(extra.sum())
    pos = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    t_new = np.empty(K + n_new)
    x_new = np.empty((K + n_new, x.shape[1]))
    t_new[pos] = t
    x_new[pos] = x
    if n_new:
        k_of = np.repeat(np.arange(K - 1), extra)
        i_of = np.arange(n_new) - np.repeat(np.concatenate(([0], np.cumsum(extra)[:-1])), extra) + 1
        tm = t[k_of] + i_of * (t[k_of + 1] - t[k_of]) / counts[k_of]
        where = pos[k_of] + i_of
        t_new[where] = tm
        x_new[where] = interpolate_states(model, p, t_orig, x_orig, sol, tm)
    if np.any(np.diff(t_new) <= 0):   # intervals too short to split in floating point
        keep = np.concatenate(([True], np.diff(t_new) > 0))
        keep[pos] = True
        t_new, x_new = t_new[keep], x_new[keep]
        pos = np.searchsorted(t_new, t)
    return np.ascontiguousarray(t_new), np.ascontiguousarray(x_new), pos


def relative_difference(S, S_fine, order):
    """``(E, E_params)``: the step-doubling estimate of ``E_k`` overall and per parameter.

    ``E_k = c ||S_k - S_fine_k||_F / ||S_fine_k||_F`` with ``c = 2^p / (2^p - 1)``;
    where the norm of ``S_fine`` is zero the absolute value is used (as in
    :func:`pbsens.relative_error`). ``E_params[k, j]`` is the same for column ``j``.
    """
    c = 2.0 ** order / (2.0 ** order - 1.0)
    D = S - S_fine
    num = np.sqrt(np.einsum("kij,kij->k", D, D))
    den = np.sqrt(np.einsum("kij,kij->k", S_fine, S_fine))
    E = c * np.where(den > 0, num / np.where(den > 0, den, 1.0), num)
    num_p = np.sqrt(np.einsum("kij,kij->kj", D, D))
    den_p = np.sqrt(np.einsum("kij,kij->kj", S_fine, S_fine))
    Ep = c * np.where(den_p > 0, num_p / np.where(den_p > 0, den_p, 1.0), num_p)
    return E, Ep


def refine_counts(t, S, S_fine, order, sens_rtol, sens_atol, max_split):
    """Sub-intervals per grid interval so that each meets its share of the tolerance.

    ``S``, ``S_fine``: the march on ``t`` and on ``t`` bisected, stored at every point of
    ``t``. The local contribution of interval ``k`` is
    ``l_k = c ||D_k+1 - D_k||_F``, ``D = S - S_fine``; its share of the tolerance is
    ``tol_k (t_k+1 - t_k) / (t_K - t_0)`` with ``tol_k = sens_rtol ||S_fine_k+1||_F + sens_atol``.
    Returns ``counts`` (1 = keep), each at most ``max_split``.
    """
    c = 2.0 ** order / (2.0 ** order - 1.0)
    D = S - S_fine
    dD = D[1:] - D[:-1]
    loc = c * np.sqrt(np.einsum("kij,kij->k", dD, dD))
    nrm = np.sqrt(np.einsum("kij,kij->k", S_fine, S_fine))
    tol = sens_rtol * np.maximum(nrm[1:], nrm[:-1]) + sens_atol
    share = tol * np.diff(t) / (t[-1] - t[0])
    # safety factor 2 on the ratio: the next round should pass, not just reach the tolerance
    ratio = np.where(share > 0, 2.0 * loc / np.where(share > 0, share, 1.0), np.inf)
    counts = np.ones(t.size - 1, dtype=np.int64)
    bad = ratio > 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        n = np.ceil(ratio[bad] ** (1.0 / order))
    counts[bad] = np.clip(np.nan_to_num(n, nan=max_split, posinf=max_split), 2, max_split).astype(np.int64)
    return counts


def state_error(model, trajectory, t_out, x_out):
    """Relative state error at ``t_out`` estimated by a re-solve at tolerances ``/10``.

    ``||x_k - x_tight_k|| / ||x_tight_k||`` (2-norm) with ``x_tight`` from
    :func:`pbsens.solve_states` with the trajectory's method and ``rtol/10``, ``atol/10``:
    the error of the tighter solve is about ten times smaller, so the difference
    estimates the trajectory's own error. Costs one more state solve.
    """
    from .solve import solve_states
    x = x_out
    tight = solve_states(model, (trajectory.t[0], trajectory.t[-1]), t_eval=t_out, p=trajectory.p,
                         x0=trajectory.x0, method=trajectory.method or "LSODA", rtol=trajectory.rtol / 10,
                         atol=np.asarray(trajectory.atol) / 10, dense_output=False)
    xt = tight.x[tight.eval_index]
    num = np.linalg.norm(x - xt, axis=1)
    den = np.linalg.norm(xt, axis=1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), num)


def warn_range(t, bad, what, stacklevel=3):
    """Issue an :class:`AccuracyWarning` naming the time range where ``bad`` holds."""
    if not np.any(bad):
        return
    idx = np.flatnonzero(bad)
    warnings.warn(f"{what} on t in [{t[idx[0]]:.6g}, {t[idx[-1]]:.6g}] ({idx.size} of {t.size} output times)",
                  AccuracyWarning, stacklevel=stacklevel)
