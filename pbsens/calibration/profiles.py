"""Likelihood profiles by re-optimisation: :func:`profile`.

For parameter ``i``, starting at the optimum ``x*``, the profile walks ``theta_i`` down to its
lower bound and up to its upper bound, re-optimising all other parameters at each point
(``theta_i`` fixed), and stops a side once ``llh`` falls below ``llh* - chi2_1(q) / 2 - margin``
(``q = 0.95 + ...``: the confidence level's threshold plus a margin, so the interval's ends are
interpolated between computed points) or at the bound.

Steps adapt as pyPESTO's adaptive profiler does: each step is scaled so that the llh change
from the last point is about ``delta`` (default 0.1 of the threshold), growing by at most
``grow`` and shrinking as needed within ``[step_min, step_max]`` of the bound-to-bound width;
the other parameters start from a linear extrapolation of the last two profile points.

The confidence interval of level ``q``: ``theta_i`` where the profile crosses
``llh* - chi2_1(q) / 2`` (linear interpolation); an end at a bound is open (``-inf``/``inf``
means: not reached within the bounds); NaN: the walk stopped first (``max_points``, or
re-optimisations that failed at the smallest step).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .objective import FitError, Objective
from .optimizers import DEFAULT_OPTIMIZER, run_optimizer
from .starts import bounds_of

__all__ = ["profile", "ProfileResult", "ParameterProfile"]


@dataclass
class ParameterProfile:
    """The profile of one parameter: points sorted by ``theta``; ``llh`` the re-optimised
    log-likelihood at each (plus the log prior where the priors are not flat), ``x`` the full parameter
    vectors, ``interval`` the confidence interval ``(lower, upper)`` (infinite where the profile stays
    above the threshold to the bound, NaN where the walk stopped before the threshold or the bound)."""

    parameter: str
    index: int
    theta: list
    llh: list
    x: list
    interval: tuple
    n_opt: int = 0
    cpu: float = 0.0
    messages: list = field(default_factory=list)


class ProfileResult:
    """Profiles of several parameters (:func:`profile`); ``profiles[parameter_id]``."""

    def __init__(self, profiles, best_llh, level, threshold):
        self.profiles = {p.parameter: p for p in profiles}
        self.best_llh = float(best_llh)
        self.level = float(level)
        self.threshold = float(threshold)

    def __getitem__(self, pid):
        return self.profiles[pid]

    def __repr__(self):
        return f"<ProfileResult {len(self.profiles)} parameters, level {self.level}>"

    def intervals(self):
        """``{parameter: (lower, upper)}``."""
        return {k: tuple(p.interval) for k, p in self.profiles.items()}

    def to_dataframe(self):
        import pandas as pd
        rows = []
        for p in self.profiles.values():
            for t, ll in zip(p.theta, p.llh):
                rows.append({"parameter": p.parameter, "theta": t, "llh": ll, "ratio": math.exp(ll - self.best_llh)})
        return pd.DataFrame(rows)

    def to_dict(self):
        return {"best_llh": self.best_llh, "level": self.level, "threshold": self.threshold,
                "profiles": [asdict(p) for p in self.profiles.values()]}


class _Fixed:
    """``objective`` with parameter ``i`` fixed at ``value``: the reduced vector's interface."""

    def __init__(self, objective, i, value, d):
        self.obj, self.i, self.value_i, self.d = objective, i, float(value), d
        self.keep = np.array([j for j in range(d) if j != i], dtype=np.int64)

    def full(self, z):
        x = np.empty(self.d)
        x[self.keep] = z
        x[self.i] = self.value_i
        return x

    def value(self, z):
        return self.obj.value(self.full(z))

    def fun_grad(self, z):
        f, g = self.obj.fun_grad(self.full(z))
        return f, g[self.keep]

    def fun_grad_hess(self, z):
        f, g, h = self.obj.fun_grad_hess(self.full(z))
        return f, g[self.keep], h[np.ix_(self.keep, self.keep)]

    def residuals(self, z):
        r, j = self.obj.residuals(self.full(z))
        return r, j[:, self.keep]


def _optimise_fixed(obj, i, value, z0, lb, ub, optimizer, options):
    fx = _Fixed(obj, i, value, lb.size)
    keep = fx.keep
    out = run_optimizer(optimizer, fx, np.clip(z0[keep], lb[keep], ub[keep]), lb[keep], ub[keep], options)
    return fx.full(out["x"]), out["fval"], out["message"]


def _walk(obj, i, x_star, f_star, lb, ub, direction, cfg):
    """Points of one side of parameter ``i``'s profile: lists of ``(theta_i, fval, x)``."""
    width = ub[i] - lb[i]
    h = cfg["step_min"] * width * 4
    pts = [(x_star[i], f_star, x_star.copy())]
    stop_f = f_star + cfg["threshold"] + cfg["margin"]
    msgs = []
    while len(pts) <= cfg["max_points"]:
        t_last, f_last, x_last = pts[-1]
        t_new = t_last + direction * h
        at_bound = (t_new <= lb[i]) if direction < 0 else (t_new >= ub[i])
        if at_bound:
            t_new = lb[i] if direction < 0 else ub[i]
        # the other parameters start from a linear extrapolation of the last two points
        z0 = x_last.copy()
        if len(pts) >= 2 and t_last != pts[-2][0]:
            z0 = x_last + (x_last - pts[-2][2]) * (t_new - t_last) / (t_last - pts[-2][0])
        x_new, f_new, msg = _optimise_fixed(obj, i, t_new, z0, lb, ub, cfg["optimizer"], cfg["options"])
        if not math.isfinite(f_new):
            # a failed re-optimisation: halve the step, or give up at the smallest one
            msgs.append(f"theta = {t_new:.6g}: {msg}")
            if h <= cfg["step_min"] * width:
                break
            h = max(h / 2, cfg["step_min"] * width)
            continue
        df = abs(f_new - f_last)
        target = cfg["delta"]
        if df > 2 * target and h > cfg["step_min"] * width and not at_bound:
            h = max(h * max(0.25, target / df), cfg["step_min"] * width)   # too coarse: redo smaller
            continue
        pts.append((t_new, f_new, x_new))
        if at_bound or f_new > stop_f:
            break
        grow = cfg["grow"] if df < 1e-12 else min(cfg["grow"], max(0.5, target / df))
        h = float(np.clip(h * grow, cfg["step_min"] * width, cfg["step_max"] * width))
    return pts, msgs


def _crossing(pts, f_cut):
    """``theta`` where the walk (from the optimum outwards) first crosses ``f_cut``; None if never."""
    for (t0, f0, _), (t1, f1, _) in zip(pts[:-1], pts[1:]):
        if f0 <= f_cut < f1:
            return t0 + (t1 - t0) * (f_cut - f0) / (f1 - f0)
    return None


def _end(pts, f_cut, bound, open_end):
    """One end of the interval: the crossing of ``f_cut``; ``open_end`` (-inf/inf) when the walk reached the
    bound above it; NaN when it stopped before either (``max_points`` or failed re-optimisations)."""
    t = _crossing(pts, f_cut)
    if t is not None:
        return float(t)
    return open_end if pts[-1][0] == bound else math.nan


def _profile_one(problem, i, x_star, cfg):
    lb, ub = bounds_of(problem)
    obj = Objective(problem, method=cfg["method"], solver_options=cfg["solver_options"])
    t0 = time.process_time()
    f_star = obj.value(x_star)
    if not math.isfinite(f_star):
        raise FitError(f"the simulation fails at the optimum given to profile ({problem.parameter_ids[i]!r})")
    down, m1 = _walk(obj, i, x_star, f_star, lb, ub, -1, cfg)
    up, m2 = _walk(obj, i, x_star, f_star, lb, ub, +1, cfg)
    cut = f_star + cfg["threshold"]
    lo, hi = _end(down, cut, lb[i], -math.inf), _end(up, cut, ub[i], math.inf)
    pts = sorted(down[1:] + up, key=lambda p: p[0])
    return ParameterProfile(
        parameter=problem.parameter_ids[i], index=i, theta=[float(p[0]) for p in pts],
        llh=[-float(p[1]) for p in pts], x=[[float(v) for v in p[2]] for p in pts],
        interval=(lo, hi),
        n_opt=len(pts) - 1, cpu=time.process_time() - t0, messages=m1 + m2)


def _profile_item(context, i):
    problem, x_star, cfg = context
    if isinstance(problem, tuple):
        from ..batches import worker_problem
        problem = worker_problem(problem)
    from ..system.threads import blas_single_thread
    with blas_single_thread():
        return _profile_one(problem, int(i), np.asarray(x_star, float), cfg)


def profile(problem, fit, parameters=None, *, level=0.95, optimizer=DEFAULT_OPTIMIZER, method="fs", delta=None,
            step_min=1e-3, step_max=0.1, grow=1.5, max_points=100, n_workers=None, client=None, options=None,
            solver_options=None):
    """Likelihood profiles of ``parameters`` through the optimum of ``fit``.

    Parameters
    ----------
    problem : Problem
    fit : FitResult or array_like (d,)
        The optimum: a fit (its best start) or a point on the parameter scale.
    parameters : list of str or int, optional
        Parameter ids or indices (default: all estimated parameters).
    level : float
        Confidence level of the intervals (threshold ``chi2_1(level) / 2`` below the best llh).
    optimizer, method, options, solver_options
        Of the re-optimisations (as :func:`fit`'s; default forward sensitivities, whose exact
        gradient a re-optimisation near the optimum needs).
    delta : float, optional
        Target llh change per step; default a tenth of the threshold.
    step_min, step_max : float
        Step bounds, as fractions of the parameter's bound-to-bound width.
    grow : float
        Largest factor by which a step grows over the previous one.
    max_points : int
        Points per side at most.
    n_workers, client
        Parameters profiled in parallel (:func:`pbsens.parallel.map_tasks`); ``n_workers=1`` here.

    Returns
    -------
    ProfileResult
    """
    from scipy.stats import chi2
    if not 0 < level < 1:
        raise FitError(f"'level' must be in (0, 1), got {level!r}")
    x_star = np.asarray(fit.x if hasattr(fit, "x") and hasattr(fit, "starts") else fit, dtype=np.float64)
    if x_star.shape != (problem.dim,):
        raise FitError(f"'fit' must be a FitResult or a point of {problem.dim} entries, got shape {x_star.shape}")
    idx = _parameter_indices(problem, parameters)
    threshold = 0.5 * float(chi2.ppf(level, 1))
    cfg = {"optimizer": optimizer, "method": method, "options": dict(options or {}),
           "solver_options": dict(solver_options or {}), "threshold": threshold,
           "margin": 0.25 * threshold, "delta": threshold / 10 if delta is None else float(delta),
           "step_min": float(step_min), "step_max": float(step_max), "grow": float(grow),
           "max_points": int(max_points)}
    if n_workers is None and client is None:
        n_workers = 1
    if client is None and n_workers == 1:
        profs = [_profile_item((problem, x_star, cfg), i) for i in idx]
    else:
        from ..batches import problem_recipe
        from ..parallel import TaskFailure, map_tasks
        raw = map_tasks(_profile_item, (problem_recipe(problem), x_star, cfg), idx, client=client,
                        n_workers=n_workers, chunk_size=1)
        bad = [r for r in raw if isinstance(r, TaskFailure)]
        if bad:
            raise FitError(f"profiling failed: {bad[0].error}")
        profs = raw
    best = -Objective(problem, method=method, solver_options=cfg["solver_options"]).value(x_star)
    return ProfileResult(profs, best, level, threshold)


def _parameter_indices(problem, parameters):
    if parameters is None:
        return list(range(problem.dim))
    if isinstance(parameters, (str, int, np.integer)):
        parameters = [parameters]
    out = []
    for p in parameters:
        if isinstance(p, (int, np.integer)) and not isinstance(p, bool) and 0 <= p < problem.dim:
            out.append(int(p))
        elif isinstance(p, str) and p in problem.parameter_ids:
            out.append(problem.parameter_ids.index(p))
        else:
            raise FitError(f"'parameters': {p!r} is not an estimated parameter id or index "
                           f"({', '.join(problem.parameter_ids)})")
    return out

