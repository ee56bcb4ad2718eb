"""Error estimates of post-hoc sensitivities, and the grid refinement of ``sens_rtol``.

METHOD.md section 11 derives them. In short:

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
* **The state solve** is not seen by the above (both marches use the same states):
  :func:`state_part` compares the march on the trajectory's states with the march on
  the same grid on states re-solved ten times tighter (:func:`tight_states`).
  Post-hoc accuracy cannot beat the states'.

Nothing here calls the state solver except :func:`tight_states`.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import AccuracyWarning

__all__ = ["method_order", "midpoint_states", "interpolate_states", "relative_difference", "signed_estimate",
           "extrapolate", "refine_counts",
           "tight_states", "state_part", "tighten_factor", "warn_range"]


def method_order(method, branch_codes=None):
    """Global order used by the step-doubling estimate: the method's ``order``
    (:data:`pbsens.sensitivity.methods.METHOD_INFO`), its ``stiff_order`` if any interval took the
    switch's ``exp-stiff`` branch (``exp-equilibrium`` is exact).

    ``exp``: 1. ``exp2``, ``pbs``, ``pbsr2``: 2. ``pbsr``: 1 if any interval took the
    first-order exponential step (``exp-stiff``), else 2. A name not in the table: 2.
    """
    from ..kernels import codes
    from .methods import METHOD_INFO
    info = METHOD_INFO.get(method)
    if info is None:
        return 2
    if (info.stiff_order < info.order and branch_codes is not None
            and np.any(branch_codes == codes.BRANCH_STIFF)):
        return info.stiff_order
    return info.order


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


def relative_difference(S, S_fine, order, c=None):
    """``(E, E_params)``: the step-doubling estimate of ``E_k`` overall and per parameter.

    ``E_k = c ||S_k - S_fine_k||_F / ||S_fine_k||_F`` with ``c = 2^p / (2^p - 1)``;
    where the norm of ``S_fine`` is zero the absolute value is used (as in
    :func:`pbsens.relative_error`). ``E_params[k, j]`` is the same for column ``j``.
    ``c`` overrides the factor (:data:`EXTRAPOLATION_FACTOR` for a pair of extrapolations).
    """
    c = 2.0 ** order / (2.0 ** order - 1.0) if c is None else c
    E, Ep = signed_estimate(S - S_fine, S_fine)
    return c * E, c * Ep


def signed_estimate(E_mat, S):
    """``(E, E_params)`` from the signed error estimate ``E_mat`` (K, nx, np): ``||E_mat_k||_F / ||S_k||_F``.

    ``S``: the estimate of the exact sensitivities, the result minus ``E_mat`` (a first
    step from ``S0 = 0`` may give ``S_1 = 0`` while its error is not).

    The discretization part ``c (S_h - S_h/2)`` and the state part ``(10/9) (S - S_tight)`` are
    added as matrices before the norm: where they have opposite signs the errors partly
    cancel in ``S`` as well (Brannmark ``Dose_100``: parts 8e-6 and 1.2e-5, true E 1.3e-6,
    sum of norms 2.0e-5, norm of the sum 4.0e-6). Where ``||S_k|| = 0``, the absolute value.
    """
    num = np.sqrt(np.einsum("kij,kij->k", E_mat, E_mat))
    den = np.sqrt(np.einsum("kij,kij->k", S, S))
    num_p = np.sqrt(np.einsum("kij,kij->kj", E_mat, E_mat))
    den_p = np.sqrt(np.einsum("kij,kij->kj", S, S))
    with np.errstate(divide="ignore", invalid="ignore"):
        E = np.where(den > 0, num / np.where(den > 0, den, 1.0), num)
        Ep = np.where(den_p > 0, num_p / np.where(den_p > 0, den_p, 1.0), num_p)
    return E, Ep


def tolerance_factor(order):
    """The ``sens_rtol`` result's error relative to the coarse march's estimate.

    First order (``exp``; ``pbsr`` with ``exp-stiff`` intervals): the result is the
    extrapolation of the pair (:func:`extrapolate`), whose error is taken as the finer
    march's, ``1/2`` of the coarse one's (measured: below it by 2-30x on Boehm,
    Fujita, PKA). Second order: the coarse march itself (extrapolating made exp2's
    error larger on Boehm, whose grid is not in the asymptotic range), factor 1.
    """
    return 0.5 if order == 1 else 1.0


#: Error of the extrapolation of the pair ``(h/2, h/4)`` of a first-order march relative to
#: ``||R_h - R_h/2||``, the difference of the extrapolations of ``(h, h/2)`` and ``(h/2, h/4)``:
#: with the remainder ``C h^2`` (the first-order term cancelled) ``R_h - R_h/2 = -(3/8) C h^2``
#: and ``R_h/2 - S_exact = -(1/8) C h^2``, hence ``1/3``. The same holds on intervals of a
#: ``pbsr`` march that took a second-order step (errors ``e, e/4, e/16``).
EXTRAPOLATION_FACTOR = 1.0 / 3.0


def extrapolate(S, S_fine, order):
    """Richardson extrapolation of the pair: ``S_fine + (S_fine - S) / (2^p - 1)``.

    Cancels the ``C h^p`` term of both marches' error. Where intervals of a
    ``pbsr`` march have different orders (``p = 1`` is used then), the
    second-order ones keep an error of half the coarse march's.
    """
    return S_fine + (S_fine - S) / (2.0 ** order - 1.0)


def refine_counts(t, S, S_fine, order, sens_rtol, sens_atol, max_split, c=None):
    """Sub-intervals per grid interval for the next refinement round.

    ``S``, ``S_fine``: the march on ``t`` and on ``t`` bisected, stored at every point of
    ``t``. The local contribution of interval ``k`` is ``l_k = c ||D_k+1 - D_k||_F``,
    ``D = S - S_fine``, ``c = (2^p / (2^p - 1))`` times :func:`tolerance_factor`. The tolerance ``tol_k = sens_rtol ||S_fine_k+1||_F + sens_atol`` is
    shared equally among the ``N`` intervals that matter (``l_k >= 1e-3 max l``):
    an interval is split into ``ceil((2 l_k N / tol_k)^(1/p))`` parts (local error
    ``h^(p+1)`` per part, ``n`` parts), but never more than
    ``ceil((2 g)^(1/p))`` with ``g`` the largest ratio of the global estimate to the
    tolerance (splitting every interval that much would meet it), nor ``max_split``.
    ``c`` overrides the factor (:data:`EXTRAPOLATION_FACTOR` when ``S``, ``S_fine`` are the
    extrapolations of the pairs ``(h, h/2)`` and ``(h/2, h/4)`` of a first-order march,
    whose remainder is second order: ``order=2`` then). Returns ``counts`` (1 = keep).
    """
    c = 2.0 ** order / (2.0 ** order - 1.0) * tolerance_factor(order) if c is None else c
    D = S - S_fine
    dD = D[1:] - D[:-1]
    loc = c * np.sqrt(np.einsum("kij,kij->k", dD, dD))
    nrm = np.sqrt(np.einsum("kij,kij->k", S_fine, S_fine))
    tol_pt = sens_rtol * nrm + sens_atol
    glob = c * np.sqrt(np.einsum("kij,kij->k", D, D))
    with np.errstate(divide="ignore", invalid="ignore"):
        g = float(np.max(np.where(tol_pt > 0, glob / np.where(tol_pt > 0, tol_pt, 1.0), np.inf)))
    counts = np.ones(t.size - 1, dtype=np.int64)
    if not np.any(loc > 0):
        return counts
    n_eff = max(1, int(np.sum(loc >= 1e-3 * loc.max())))
    share = np.maximum(tol_pt[1:], tol_pt[:-1]) / n_eff
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(share > 0, 2.0 * loc / np.where(share > 0, share, 1.0), np.inf)
        n = np.ceil(ratio ** (1.0 / order))
        cap = np.ceil((2.0 * g) ** (1.0 / order)) if np.isfinite(g) else max_split
    bad = ratio > 1.0
    counts[bad] = np.clip(np.nan_to_num(np.minimum(n[bad], cap), nan=max_split, posinf=max_split),
                          2, max_split).astype(np.int64)
    return counts


def tight_states(model, trajectory, t_grid, factor=10.0):
    """The trajectory re-solved at ``rtol/factor``, ``atol/factor`` (same solver): ``(x, sol)``.

    ``x``: states at the times ``t_grid`` (merged into the solve exactly); ``sol``: its
    dense output, or None if the solver keeps none.
    """
    from ..solvers import solve_states
    tight = solve_states(model, (trajectory.t[0], trajectory.t[-1]), t_eval=t_grid, p=trajectory.p,
                         x0=trajectory.x0, method=trajectory.method or "LSODA", rtol=trajectory.rtol / factor,
                         atol=np.asarray(trajectory.atol) / factor, dense_output=True,
                         tstops=getattr(trajectory, "tstops", None))
    if tight.eval_index is not None and tight.x.ndim == 2 and tight.eval_index.size == t_grid.size \
            and np.array_equal(tight.t[tight.eval_index], t_grid):
        return np.ascontiguousarray(tight.x[tight.eval_index]), tight.sol
    if tight.sol is not None:
        return np.ascontiguousarray(np.asarray(tight.sol(t_grid)).T), tight.sol
    from ..errors import SolverError
    raise SolverError(f"solver {trajectory.method!r} returned neither the states at t_eval nor a dense output")


def state_part(S, S_tight):
    """``(10/9) ||S_k - S_tight_k||_F / ||S_tight_k||_F``: the error of ``S`` caused by the states.

    ``S`` and ``S_tight`` are marched on the same grid by the same method, on the
    trajectory's states and on those of a solve ten times tighter: the discretization
    error cancels, the difference is the effect of the state error (of which the tight
    solve keeps about a tenth). Where ``||S_tight_k|| = 0``, the absolute value.
    """
    D = S - S_tight
    num = np.sqrt(np.einsum("kij,kij->k", D, D))
    den = np.sqrt(np.einsum("kij,kij->k", S_tight, S_tight))
    return (10.0 / 9.0) * np.where(den > 0, num / np.where(den > 0, den, 1.0), num)


def tighten_factor(E_state, sens_rtol, max_factor=1e4):
    """How much tighter than the trajectory's the states must be for ``sens_rtol``.

    ``E_state`` is the state part of the trajectory (solved at ``rtol``), measured
    against a solve at ``rtol/10``; the effect of the state error on ``S`` is taken
    proportional to the state tolerance, so a solve at ``rtol/f`` has
    ``E_state / f``. Returns 1 (no need), 10 (the ``rtol/10`` solve already in hand
    meets ``sens_rtol / 2``), or ``f = 2 max E_state / sens_rtol`` rounded up to a power
    of ten, at most ``max_factor``.
    """
    worst = float(np.max(E_state)) if E_state.size else 0.0
    if not worst > sens_rtol:
        return 1.0
    f = 2.0 * worst / sens_rtol
    return float(min(max_factor, max(10.0, 10.0 ** np.ceil(np.log10(f)))))


def warn_range(t, bad, what, stacklevel=3):
    """Issue an :class:`AccuracyWarning` naming the time range where ``bad`` holds."""
    if not np.any(bad):
        return
    idx = np.flatnonzero(bad)
    warnings.warn(f"{what} on t in [{t[idx[0]]:.6g}, {t[idx[-1]]:.6g}] ({idx.size} of {t.size} output times)",
                  AccuracyWarning, stacklevel=stacklevel)
