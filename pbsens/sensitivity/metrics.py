"""Accuracy measures of sensitivity approximations (METHOD.md section 7; paper Section 8.2).

* :func:`relative_error`: ``E_k = ||S_hat_k - S_ref_k||_F / ||S_ref_k||_F`` against
  a reference (usually forward sensitivities, :func:`pbsens.sensitivity.forward.forward_sensitivities`).
* :func:`kappa_bar`: the perturbation error (8.5)-(8.6), which needs no reference
  sensitivity: it compares ``2 S_hat(t) d`` with the central difference
  ``x(t, p + d) - x(t, p - d)`` of two tightly solved perturbed trajectories.
"""
from __future__ import annotations

import numbers
import sys

import numpy as np

from ..errors import PbsensError, SolverError
from ..solvers import SOLVERS, solve_states

__all__ = ["relative_error", "state_difference", "kappa_bar"]



# --------------------------------------------------------------------------- helpers

def _check_result(r, name):
    """``(t, S)`` of a result-like object, validated (finite, consistent shapes)."""
    try:
        t = np.asarray(r.t, dtype=np.float64)
        S = np.asarray(r.S, dtype=np.float64)
    except AttributeError:
        raise PbsensError(f"{name!r} must be a SensitivityResult (with .t and .S), "
                          f"got {type(r).__name__}") from None
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r}: .t and .S must be numeric arrays") from None
    if t.ndim != 1 or t.size == 0:
        raise PbsensError(f"{name!r}: .t must be a non-empty 1-d array, got shape {t.shape}")
    if S.ndim != 3 or S.shape[0] != t.size:
        raise PbsensError(f"{name!r}: .S must have shape (K, nx, np) with K = len(.t) = {t.size}, "
                          f"got {S.shape}")
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise PbsensError(f"{name!r}: .t must be finite and strictly increasing")
    if not np.all(np.isfinite(S)):
        k = int(np.argmax(~np.all(np.isfinite(S), axis=(1, 2))))
        raise PbsensError(f"{name!r}: .S contains NaN or inf (first at t = {t[k]:.6g})")
    return t, S


def _interpolate(t_ref, S_ref, t):
    """Piecewise-linear interpolation of ``S_ref`` (per entry) at ``t`` inside ``t_ref``."""
    if t_ref.size == 1:
        return np.broadcast_to(S_ref, (t.size,) + S_ref.shape[1:])
    i = np.clip(np.searchsorted(t_ref, t, side="right") - 1, 0, t_ref.size - 2)
    w = ((t - t_ref[i]) / (t_ref[i + 1] - t_ref[i]))[:, None, None]
    return (1.0 - w) * S_ref[i] + w * S_ref[i + 1]


def _progress(iterable, progress, total, desc):
    if progress is None:
        progress = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if not progress:
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc, leave=False)


def _positive(v, name):
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.floating)) or not np.isfinite(v) or v <= 0:
        raise PbsensError(f"{name!r} must be a positive finite number, got {v!r}")
    return float(v)


# --------------------------------------------------------------------------- relative error

def _interpolate_x(t_ref, x_ref, t):
    """Piecewise-linear interpolation of the states ``x_ref`` (K, nx) at ``t``."""
    if t_ref.size == 1:
        return np.broadcast_to(x_ref, (t.size, x_ref.shape[1]))
    return np.stack([np.interp(t, t_ref, x_ref[:, i]) for i in range(x_ref.shape[1])], axis=1)


def state_difference(r, ref):
    """Relative state difference per output time, ``||x_k - x_ref_k||_2 / ||x_ref_k||_2``.

    Two sensitivity results are only comparable if they were computed on (nearly)
    the same trajectory: post-hoc sensitivities inherit every error of the state
    solve they are computed on. ``ref.x`` is interpolated linearly if the times differ.
    Where ``||x_ref_k|| = 0`` the absolute difference is returned.
    """
    t, _ = _check_result(r, "r")
    t_ref, _ = _check_result(ref, "ref")
    try:
        x = np.asarray(r.x, dtype=np.float64)
        x_ref = np.asarray(ref.x, dtype=np.float64)
    except (AttributeError, TypeError, ValueError):
        raise PbsensError("'r' and 'ref' need states .x of shape (K, nx)") from None
    if x.shape != (t.size, x_ref.shape[-1]) or x_ref.shape[0] != t_ref.size:
        raise PbsensError(f"'r'.x {x.shape} and 'ref'.x {x_ref.shape} do not match their times and each other")
    x_at = x_ref if (t.size == t_ref.size and np.array_equal(t, t_ref)) else \
        _interpolate_x(t_ref, x_ref, np.clip(t, t_ref[0], t_ref[-1]))
    diff = np.linalg.norm(x - x_at, axis=1)
    norm = np.linalg.norm(x_at, axis=1)
    zero = norm == 0
    return np.where(zero, diff, diff / np.where(zero, 1.0, norm))


def relative_error(r, ref, scale="linear", state_tol=1e-3, return_state=False):
    """Relative error per output time, ``E_k = ||S_hat_k - S_ref_k||_F / ||S_ref_k||_F``.

    METHOD.md section 7 (paper Section 8.2, Figures 2, 3 and 7).

    Parameters
    ----------
    r : SensitivityResult
        The approximation ``S_hat`` (e.g. PBSR or Exp) at times ``r.t``.
    ref : SensitivityResult
        The reference (e.g. forward sensitivities). If ``ref.t`` differs from
        ``r.t``, ``ref.S`` is interpolated linearly in time, entry by entry;
        every ``r.t`` must then lie inside ``[ref.t[0], ref.t[-1]]``. Linear
        interpolation is second-order accurate only: for a sharp reference,
        compute it at ``t_eval=r.t`` instead. If ``ref`` has more parameters
        than ``r`` and both carry ``param_names``, the matching columns of
        ``ref`` are used.
    scale : {"linear", "log"}
        ``"log"``: compare the log-parameter sensitivities ``p_j S[:, :, j]``
        (``dx/d ln p``), which samplers in ``ln p`` use; in plain units a few tiny
        parameters with huge ``S`` columns can dominate ``||S||``. Uses ``r.p``.
    state_tol : float
        An ``AccuracyWarning`` is issued when the relative state difference
        :func:`state_difference` exceeds this somewhere (default 1e-3): the two
        results were computed on different trajectories, and ``E`` then measures
        the state solves as much as the sensitivity methods.
    return_state : bool
        Also return the state difference: ``(E, state_difference)``.

    Returns
    -------
    E : ndarray (K,)
        ``E_k`` at ``r.t``. Where the reference is exactly zero (typically at
        ``t0`` when ``S0 = 0``), the relative error is undefined and ``E_k`` is
        the absolute error ``||S_hat_k||_F`` instead (0 when both vanish), so the
        result is never NaN.

    Raises
    ------
    PbsensError
        Mismatched shapes or parameters, NaN/inf in either result, or times of
        ``r`` outside the reference's span (the message names the argument).
    """
    t, S = _check_result(r, "r")
    t_ref, S_ref = _check_result(ref, "ref")
    names, names_ref = list(getattr(r, "param_names", []) or []), list(getattr(ref, "param_names", []) or [])
    if S.shape[2] != S_ref.shape[2] and names and names_ref and set(names) <= set(names_ref):
        S_ref = S_ref[:, :, [names_ref.index(n) for n in names]]
    elif names and names_ref and len(names) == len(names_ref) and names != names_ref:
        raise PbsensError(f"'ref' has parameters {names_ref}, but 'r' has {names}")
    if S.shape[1:] != S_ref.shape[1:]:
        raise PbsensError(f"'ref'.S has {S_ref.shape[1]} states x {S_ref.shape[2]} parameters, but 'r'.S has "
                          f"{S.shape[1]} x {S.shape[2]}")
    if t.size == t_ref.size and np.array_equal(t, t_ref):
        S_at = S_ref
    else:
        span = t_ref[-1] - t_ref[0]
        tol = 1e-12 * max(span, abs(t_ref[0]), abs(t_ref[-1]), 1e-300)
        if t[0] < t_ref[0] - tol or t[-1] > t_ref[-1] + tol:
            raise PbsensError(f"'r'.t spans [{t[0]:.6g}, {t[-1]:.6g}], outside the reference's "
                              f"'ref'.t [{t_ref[0]:.6g}, {t_ref[-1]:.6g}]: cannot interpolate")
        S_at = _interpolate(t_ref, S_ref, np.clip(t, t_ref[0], t_ref[-1]))
    if scale not in ("linear", "log"):
        raise PbsensError(f"'scale' must be 'linear' or 'log', got {scale!r}")
    if scale == "log":
        try:
            pv = np.asarray(r.p, dtype=np.float64).reshape(-1)
        except (AttributeError, TypeError, ValueError):
            raise PbsensError("'scale': 'log' needs the parameters 'r'.p") from None
        if pv.size != S.shape[2]:
            raise PbsensError(f"'scale': 'log' needs 'r'.p with {S.shape[2]} entries, got {pv.size}")
        S = S * pv
        S_at = S_at * pv
    diff = np.sqrt(np.sum((S - S_at) ** 2, axis=(1, 2)))
    norm = np.sqrt(np.sum(S_at ** 2, axis=(1, 2)))
    zero = norm == 0
    E = np.where(zero, diff, diff / np.where(zero, 1.0, norm))
    dx = None
    if getattr(r, "x", None) is not None and getattr(ref, "x", None) is not None:
        dx = state_difference(r, ref)
        bad = dx > _positive(state_tol, "state_tol")
        if np.any(bad):
            import warnings
            from ..errors import AccuracyWarning
            i = np.flatnonzero(bad)
            warnings.warn(f"relative_error: the states of 'r' and 'ref' differ by up to {dx.max():.3g} (relative) "
                          f"on t in [{t[i[0]]:.6g}, {t[i[-1]]:.6g}]: the results were computed on different "
                          "trajectories, so E includes the state solves' errors", AccuracyWarning, stacklevel=2)
    if return_state:
        return E, dx
    return E


# --------------------------------------------------------------------------- kappa bar

def _state_solver(model, method):
    """``solve(p, x0, t0, t_eval, rtol, atol) -> x (K, nx)``: :func:`pbsens.solvers.solve_states`."""

    def solve(p, x0, t0, t_eval, rtol, atol):
        if t_eval[-1] <= t0:  # every output at t0
            return np.tile(x0, (t_eval.size, 1))
        try:
            tr = solve_states(model, (t0, t_eval[-1]), t_eval=t_eval[t_eval > t0], p=p, x0=x0, method=method,
                              rtol=rtol, atol=atol, dense_output=False)
        except SolverError as exc:
            raise SolverError(f"perturbed state solve of model {model.name!r} for kappa_bar failed "
                              f"(method {method}, rtol {rtol:g}): {exc}") from None
        x = np.empty((t_eval.size, x0.size))
        x[t_eval == t0] = x0  # exactly, not from the solver's interpolant
        x[t_eval > t0] = tr.x[tr.eval_index]
        return x

    return solve


def kappa_bar(model, r, n_samples=100, seed=0, h_low=1e-5, h_high=1e-4, eps=None, rtol=1e-12, atol=1e-14,
              method="LSODA", progress=None, return_samples=False):
    """Perturbation error ``kappa_bar(t)`` of sensitivities ``r.S``, (8.5)-(8.6).

    For ``N = n_samples`` random perturbations ``d = h (.) p``, ``h_j ~ U(h_low, h_high)``
    (8.6), with ``x(t, p +- d)`` from two tightly solved state trajectories::

        kappa_d(t) = ||x(t, p+d) - x(t, p-d) - 2 S_hat(t) d|| / (||x(t, p+d) - x(t, p-d)|| + eps)   (8.5)

    and ``kappa_bar(t)`` is the mean of ``kappa_d(t)`` over the samples. Norms are
    Euclidean over the states. METHOD.md section 7; the paper uses N = 100.

    Parameters
    ----------
    model : Model
        The model ``r`` was computed for.
    r : SensitivityResult
        Sensitivities to assess, at ``r.t``. Perturbations are centred on ``r.p``.
        If ``r.param_names`` is a subset of the model's parameters (e.g.
        ``forward_sensitivities(..., params=...)``), only those are perturbed.
        The perturbed solves start at ``r.options["t_span"][0]`` if recorded,
        else at ``r.grid[0]``, else at ``r.t[0]``. Initial states: if ``r.x0`` is
        the model's ``x0(r.p)``, ``x0(p +- d)`` is evaluated by the model (exact
        when initial values are expressions of parameters); a custom ``r.x0`` is
        perturbed as ``x0 +- S0 d`` (``S0 = r.S0``, zero if absent).
    n_samples : int
        ``N``, the number of random perturbations.
    seed : int or numpy.random.Generator
        Seed of :func:`numpy.random.default_rng`; the same seed gives the same ``d``.
    h_low, h_high : float
        Range of the relative perturbation sizes ``h_j``.
    eps : float or None
        Regulariser of the denominator. The paper writes ``||eps + dx||`` with a
        small constant ``eps``; here it is added to the norm (the denominator then
        stays positive whatever the signs of ``dx``). Default (None):
        ``eps_k = ||atol + rtol |x(t_k)| ||``, the size of the local error the
        perturbed solves are allowed; a difference ``dx`` below it carries no
        information about ``S`` (scale-aware, negligible wherever ``dx`` is
        resolved). A float is used as given (may be 0).
    rtol, atol : float
        Tolerances of the perturbed state solves (they must be far tighter than
        the perturbation ``h``: the numerator is a difference of ``O(h)`` terms
        whose truncation error is ``O(h^3)``).
    method : str
        State solver of the perturbed solves, a :data:`pbsens.solvers.SOLVERS`
        name (the compiled state Jacobian is passed to LSODA, BDF and Radau).
    progress : bool or None
        Show a tqdm progress bar over the samples; None: only when stderr is a
        terminal.
    return_samples : bool
        Also return the per-sample values ``kappa_d(t_k)``.

    Returns
    -------
    kappa_bar : ndarray (K,)
    per_sample : ndarray (N, K)
        Only with ``return_samples=True``.

    Notes
    -----
    At ``t0`` with ``x0`` independent of ``p`` (and ``S0 = 0``) both the
    numerator and ``dx`` vanish exactly; ``kappa = 0 / eps = 0`` there. With
    ``eps = 0``, ``0 / 0`` is defined as 0 and ``c / 0`` (c > 0) as inf: the
    result never contains NaN.

    Raises
    ------
    PbsensError
        Invalid arguments (the message names the argument); :class:`SolverError`
        when a perturbed solve fails.
    """
    t, S = _check_result(r, "r")
    p = model.check_p(getattr(r, "p", None), "r.p")
    names = list(getattr(r, "param_names", []) or [])
    if names:
        try:
            idx = model.param_index(names)
        except PbsensError as exc:
            raise PbsensError(f"'r'.param_names do not match model {model.name!r}: {exc}") from None
    else:
        idx = np.arange(model.n_params)
    if S.shape[1:] != (model.n_states, idx.size):
        raise PbsensError(f"'r'.S has shape {S.shape[1:]} per time, expected ({model.n_states}, {idx.size}) "
                          f"for model {model.name!r}")
    if (isinstance(n_samples, bool) or not isinstance(n_samples, (numbers.Integral, np.integer))
            or n_samples < 1):
        raise PbsensError(f"'n_samples' must be a positive integer, got {n_samples!r}")
    h_low = _positive(h_low, "h_low")
    h_high = _positive(h_high, "h_high")
    if h_high < h_low:
        raise PbsensError(f"'h_high' ({h_high:g}) must not be smaller than 'h_low' ({h_low:g})")
    rtol = _positive(rtol, "rtol")
    atol = _positive(atol, "atol")
    if eps is not None:
        if isinstance(eps, bool) or not isinstance(eps, (numbers.Real, np.floating)) or not np.isfinite(eps) \
                or eps < 0:
            raise PbsensError(f"'eps' must be None or a finite number >= 0, got {eps!r}")
        eps = float(eps)
    if not isinstance(method, str) or method not in SOLVERS:
        raise PbsensError(f"'method' must be one of {list(SOLVERS)}, got {method!r}")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise PbsensError(f"'seed' must be an integer or a numpy Generator, got {seed!r}") from None

    # initial time and initial states
    options = getattr(r, "options", None) or {}
    if options.get("t_span") is not None:
        t0 = float(options["t_span"][0])
    elif getattr(r, "grid", None) is not None and len(r.grid):
        t0 = float(r.grid[0])
    else:
        t0 = float(t[0])
    if t[0] < t0:
        raise PbsensError(f"'r'.t starts at {t[0]:.6g}, before the initial time {t0:.6g} of the result")
    x0_model = model.initial_state(p)
    x0 = x0_model if getattr(r, "x0", None) is None else model.check_x(r.x0, "r.x0")
    exact_x0 = np.array_equal(x0, x0_model)
    S0 = getattr(r, "S0", None)
    S0 = np.zeros((model.n_states, idx.size)) if S0 is None else np.asarray(S0, dtype=np.float64)

    x_ref = np.asarray(r.x, dtype=np.float64) if getattr(r, "x", None) is not None else None
    solve = _state_solver(model, method)
    H = rng.uniform(h_low, h_high, size=(n_samples, idx.size))
    per_sample = np.empty((n_samples, t.size))
    for s in _progress(range(n_samples), progress, n_samples, "kappa_bar"):
        d_sub = H[s] * p[idx]
        d = np.zeros(model.n_params)
        d[idx] = d_sub
        pp, pm = p + d, p - d
        if exact_x0:
            x0p, x0m = model.initial_state(pp), model.initial_state(pm)
        else:
            x0p, x0m = x0 + S0 @ d_sub, x0 - S0 @ d_sub
        xp = solve(pp, x0p, t0, t, rtol, atol)
        xm = solve(pm, x0m, t0, t, rtol, atol)
        dx = xp - xm
        num = np.linalg.norm(dx - 2.0 * (S @ d_sub), axis=1)
        den = np.linalg.norm(dx, axis=1)
        if eps is None:
            xs = 0.5 * (xp + xm) if x_ref is None or x_ref.shape != xp.shape else x_ref
            den = den + np.linalg.norm(atol + rtol * np.abs(xs), axis=1)
        else:
            den = den + eps
        pos = den > 0
        per_sample[s] = np.where(pos, num / np.where(pos, den, 1.0), np.where(num > 0, np.inf, 0.0))
    kb = per_sample.mean(axis=0)
    return (kb, per_sample) if return_samples else kb
