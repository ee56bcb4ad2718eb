"""Simplified manifold MALA (Girolami and Calderhead 2011), METHOD.md section 8.

The metric ``G(theta)`` (Fisher information (1.3) plus prior precision) makes the
Langevin proposal position dependent::

    theta* ~ N(mu(theta), eps^2 G(theta)^-1),   mu(theta) = theta + (eps^2 / 2) G(theta)^-1 grad log pi(theta)

and the Metropolis-Hastings ratio uses the reverse proposal density, with the metric
at ``theta*``::

    log alpha = log pi(theta*) - log pi(theta) + log q(theta | theta*) - log q(theta* | theta)

Each iteration costs one evaluation of the posterior at ``theta*`` (one state +
sensitivity solve returning ``logp``, gradient and metric together).
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from ..errors import PbsensError, SolverError
from .adaptation import MetricWindows, StepSize, _burn_in_precision  # noqa: F401 - _burn_in_precision re-exported
from .checkpoint import restore_sampler, snapshot_sampler
# the convergence checks and their thresholds live in diagnostics.py; re-exported here, where
# pbsens.inference.chains and users import them
from .diagnostics import (BOUND_FRACTION, BOUND_TOL, ESS_PER_CHAIN, MIN_ACCEPT, MIN_DRAWS_ACCEPT,  # noqa: F401
                          RHAT_MAX, START_MARGIN, START_TOL, STEP_COLLAPSE, _chains, _fmt_bounds, _list,
                          _start_warnings, at_bound, bound_distance, chain_warnings, default_step_size,
                          mixing_warnings, movement_problems)

__all__ = ["smmala", "MCMCResult"]


@dataclass
class MCMCResult:
    """Output of :func:`smmala`.

    Attributes
    ----------
    chain : ndarray (n_samples, d)
        Samples after burn-in.
    logp : ndarray (n_samples,)
        Log-posterior of each sample.
    accept_rate : float
        Fraction of accepted proposals after burn-in.
    step_size : float
        The step size ``eps`` used after burn-in (adapted during burn-in).
    wall_time : float
        Seconds for the whole run (burn-in included).
    burn_in : int
    accept_rate_burn_in : float
    n_failed : int
        Proposals rejected because the solve failed (SolverError or non-finite values).
    n_non_pd : int
        Proposals rejected because the metric stayed non positive definite after jitter.
    n_jitter : int
        Evaluations whose metric needed diagonal jitter to be factorised.
    n_evaluations : int
        Posterior evaluations (1 + burn_in + n_samples).
    burn_in_chain, burn_in_logp : ndarray
        The burn-in iterations (for trace plots).
    step_size_trace : ndarray (burn_in,)
        ``eps`` at each burn-in iteration.
    param_names : list of str
    seed : int or None
    accepted : ndarray of bool (n_samples,)
        Whether each kept iteration accepted its proposal.
    accept_prob : ndarray (n_samples,)
        The Metropolis-Hastings acceptance probability ``min(1, alpha)`` of each
        kept iteration (0 for a rejected failed solve).
    solver_failed : ndarray of bool (n_samples,)
        Kept iterations whose proposal was rejected because its solve failed or its
        metric could not be factorised.
    step_size_initial : float
        ``eps`` at the first iteration (``step_size``, or its default).
    transform : str
        ``"logit"`` when :func:`smmala` sampled in unbounded coordinates (``chain``,
        ``logp`` and ``burn_in_*`` are then on the parameter scale, ``step_size`` is in
        the unbounded coordinates), else ``"none"``.
    unbounded : dict or None
        With a transform: ``{"chain": ..., "burn_in_chain": ...}`` in the unbounded coordinates.
    convergence_warnings : list of str
        The messages of the :class:`~pbsens.errors.ConvergenceWarning` s issued for this chain.
    """

    chain: np.ndarray
    logp: np.ndarray
    accept_rate: float
    step_size: float
    wall_time: float
    burn_in: int = 0
    accept_rate_burn_in: float = float("nan")
    n_failed: int = 0
    n_non_pd: int = 0
    n_jitter: int = 0
    n_evaluations: int = 0
    burn_in_chain: np.ndarray = None
    burn_in_logp: np.ndarray = None
    step_size_trace: np.ndarray = None
    param_names: list = field(default_factory=list)
    seed: object = None
    accepted: np.ndarray = None
    accept_prob: np.ndarray = None
    solver_failed: np.ndarray = None
    step_size_initial: float = float("nan")
    transform: str = "none"
    unbounded: dict = None
    convergence_warnings: list = field(default_factory=list)

    @property
    def n_samples(self) -> int:
        return int(self.chain.shape[0])

    def mean(self) -> np.ndarray:
        """Sample mean of the chain, (d,)."""
        return self.chain.mean(axis=0)

    def cov(self) -> np.ndarray:
        """Sample covariance of the chain, (d, d)."""
        return np.atleast_2d(np.cov(self.chain, rowvar=False))

    def ess(self) -> np.ndarray:
        """Effective sample size per parameter (``arviz.ess``, bulk), shape (d,).

        Raises
        ------
        PbsensError
            ArviZ is not installed (``pip install pbsens[mcmc]``).
        """
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import arviz
        except ImportError:
            raise PbsensError("MCMCResult.ess() needs ArviZ: pip install pbsens[mcmc] "
                              "(or pip install arviz)") from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.array([float(arviz.ess(np.ascontiguousarray(self.chain[:, j])))
                             for j in range(self.chain.shape[1])])

    def ess_per_second(self) -> np.ndarray:
        """:meth:`ess` divided by :attr:`wall_time`, (d,)."""
        return self.ess() / self.wall_time

    def __repr__(self):
        return (f"<MCMCResult: {self.n_samples} samples x {self.chain.shape[1]} parameters, "
                f"acceptance {self.accept_rate:.2f}, step {self.step_size:.3g}, {self.wall_time:.1f} s>")


# ----------------------------------------------------------------------------- helpers
def _chol(G, max_tries=8):
    """Cholesky factor of a symmetric matrix, with growing diagonal jitter if needed.

    The jitter ``tau = s 10^(k - 10)``, ``k = 0 .. max_tries - 1`` (``s`` the mean
    absolute diagonal), fixes round-off-level indefiniteness only (up to ``1e-3 s``);
    a genuinely indefinite metric is rejected. Returns ``(L, jittered)`` or
    ``(None, True)`` when ``G`` is not finite or stays non positive definite. A
    deterministic function of ``G``, so the proposal stays a valid MH proposal.
    """
    G = 0.5 * (G + G.T)
    if not np.isfinite(G).all():
        return None, True
    try:
        return np.linalg.cholesky(G), False
    except np.linalg.LinAlgError:
        pass
    scale = float(np.mean(np.abs(np.diag(G))))
    if not scale > 0:
        scale = 1.0
    d = G.shape[0]
    for k in range(max_tries):
        tau = scale * 10.0 ** (k - 10)
        try:
            return np.linalg.cholesky(G + tau * np.eye(d)), True
        except np.linalg.LinAlgError:
            continue
    return None, True


def _chol_floor(G, rel_floor):
    """Cholesky factor of ``G`` with its eigenvalues replaced by ``max(|lambda|, rel_floor lambda_max)``.

    Regularises a singular or indefinite metric (a non-identifiable direction, a
    Fisher information plus a non-convex prior term): the absolute value keeps the
    metric's scale in every direction (as the SoftAbs metric of Betancourt 2013 does
    smoothly), the floor bounds the proposal's spread in flat directions. A
    deterministic function of ``G`` (so of ``theta``): the proposal density is exact
    and Metropolis-Hastings keeps detailed balance. Returns ``(L, regularised)``.
    """
    G = 0.5 * (G + G.T)
    if not np.all(np.isfinite(G)):
        return None, True
    w, V = np.linalg.eigh(G)
    top = float(np.max(np.abs(w)))
    if not top > 0:
        return None, True
    floor = rel_floor * top
    w2 = np.maximum(np.abs(w), floor)
    reg = bool(np.any(w < floor))
    try:
        return np.linalg.cholesky((V * w2) @ V.T), reg
    except np.linalg.LinAlgError:
        return None, True


class _State:
    """A point with everything the proposal needs: ``theta, logp, L, v = G^-1 grad``."""

    __slots__ = ("theta", "logp", "L", "v", "half_logdet", "grad", "G")

    def __init__(self, theta, logp, L, grad, G=None):
        self.theta = theta
        self.logp = logp
        self.L = L
        self.grad = grad
        self.G = G
        self.v = cho_solve((L, True), grad, check_finite=False)   # L, grad: finite (_evaluate, _chol)
        self.half_logdet = float(np.sum(np.log(np.diag(L))))  # log det(G)^(1/2)


def _log_q(to, frm, eps):
    """``log q(to | frm)`` for ``N(mu(frm), eps^2 G(frm)^-1)`` (up to the shared constant)."""
    mu = frm.theta + 0.5 * eps * eps * frm.v
    u = frm.L.T @ (to - mu) / eps
    return frm.half_logdet - to.size * math.log(eps) - 0.5 * float(u @ u)


def _evaluate(posterior, theta, strict=False):
    """``(logp, grad, G)`` or ``None`` when the solve failed or returned non-finite values.

    With ``strict`` a :class:`SolverError` propagates (for a useful message at ``theta0``).
    """
    try:
        lp, g, G = posterior.evaluate(theta)
    except SolverError:
        if strict:
            raise
        return None
    lp = float(lp)
    g = np.asarray(g, dtype=np.float64).reshape(-1)
    G = np.asarray(G, dtype=np.float64)
    if not (math.isfinite(lp) and np.isfinite(g).all() and np.isfinite(G).all()):
        return None
    return lp, g, G


METRICS = ("fisher", "fisher+cov", "cov")

def _check_int(v, name, minimum):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise PbsensError(f"{name!r} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _progress_enabled(progress):
    if progress is None:
        try:
            return bool(sys.stderr.isatty())
        except (AttributeError, ValueError):
            return False
    return bool(progress)


# ----------------------------------------------------------------------------- sampler
def _check_posterior(posterior):
    if not hasattr(posterior, "evaluate"):
        raise PbsensError(f"'posterior' must have evaluate(theta) -> (logp, grad, metric), "
                          f"got {type(posterior).__name__}")


def _start_point(posterior, theta0):
    """``theta0`` as a finite float vector of the posterior's dimension."""
    try:
        theta = np.array(theta0, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"'theta0' must be an array of numbers, got {theta0!r}") from None
    d = theta.size
    dim = getattr(posterior, "dim", None)
    if d == 0 or (dim is not None and d != dim):
        raise PbsensError(f"'theta0' has length {d}, expected {dim} (the posterior's dimension)")
    if not np.all(np.isfinite(theta)):
        raise PbsensError(f"'theta0' contains NaN or inf: {theta.tolist()}")
    return theta


def _run_options(d, n_samples, burn_in, step_size, target_accept, seed):
    """The checked ``(n_samples, burn_in, step_size, rng)`` of :func:`_run`."""
    n_samples = _check_int(n_samples, "n_samples", 1)
    burn_in = n_samples // 2 if burn_in is None else _check_int(burn_in, "burn_in", 0)
    if step_size is None:
        step_size = default_step_size(d)
    if isinstance(step_size, bool) or not isinstance(step_size, (int, float, np.integer, np.floating)) \
            or not math.isfinite(step_size) or step_size <= 0:
        raise PbsensError(f"'step_size' must be a positive number, got {step_size!r}")
    if isinstance(target_accept, bool) or not isinstance(target_accept, (int, float, np.floating)) \
            or not 0 < target_accept < 1:
        raise PbsensError(f"'target_accept' must be in (0, 1), got {target_accept!r}")
    if isinstance(seed, np.random.Generator):
        rng = seed
    else:
        try:
            rng = np.random.default_rng(seed)
        except (TypeError, ValueError):
            raise PbsensError(f"'seed' must be an integer, a numpy Generator or None, got {seed!r}") from None
    return n_samples, burn_in, step_size, rng


def _first_state(posterior, theta, burn_in, metric_floor, metric):
    """The chain's first :class:`_State` at ``theta0``, its metric's :class:`MetricWindows`, and
    whether that metric needed jitter (the checks that need the posterior's values)."""
    d = theta.size
    try:
        ev = _evaluate(posterior, theta, strict=True)
    except SolverError as exc:
        raise PbsensError(f"'theta0': the posterior cannot be evaluated at {theta.tolist()}: {exc}") from None
    if ev is None:
        raise PbsensError(f"'theta0': the posterior is NaN/inf at {theta.tolist()}")
    lp, g, G = ev
    if G.shape != (d, d) or g.shape != (d,):
        raise PbsensError(f"'posterior'.evaluate returned grad {g.shape} and metric {G.shape}, "
                          f"expected ({d},) and ({d}, {d})")
    windows = _windows(burn_in, metric_floor, metric)
    L, jit = windows.factor(G)
    if L is None:
        raise PbsensError("'theta0': the metric is not positive definite there, even with jitter "
                          "(add a prior, or start elsewhere)")
    return _State(theta, lp, L, g, G), windows, jit


def _windows(burn_in, metric_floor, metric):
    """The checked metric options as the :class:`MetricWindows` that factor the metric."""
    if metric_floor is not None and (isinstance(metric_floor, bool) or not isinstance(
            metric_floor, (int, float, np.floating)) or not 0 < metric_floor < 1):
        raise PbsensError(f"'metric_floor' must be a number in (0, 1), got {metric_floor!r}")
    if metric not in METRICS:
        raise PbsensError(f"'metric' must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric != "fisher" and burn_in < 8:
        raise PbsensError(f"'metric'={metric!r} learns the covariance during burn-in: 'burn_in' must be >= 8, "
                          f"got {burn_in}")
    base_factor = _chol if metric_floor is None else (lambda M: _chol_floor(M, float(metric_floor)))
    return MetricWindows(metric, base_factor, burn_in)


def _transition(posterior, cur, eps, factor, rng):
    """One SMMALA iteration from the state ``cur`` with step ``eps``.

    Returns ``(state, alpha, accepted, failure, jittered)``: the next state, the
    acceptance probability ``min(1, alpha)``, and ``failure`` ``"solve"`` (the
    proposal's posterior failed or is not finite), ``"metric"`` (its metric could not be
    factorised) or None.
    """
    z = rng.standard_normal(cur.theta.size)
    log_u = math.log(rng.uniform())
    # theta* = mu + eps L^-T z, so that cov = eps^2 (L L^T)^-1 = eps^2 G^-1
    prop = cur.theta + 0.5 * eps * eps * cur.v + eps * solve_triangular(cur.L, z, lower=True, trans="T",
                                                                         check_finite=False)
    ev = _evaluate(posterior, prop)
    if ev is None:
        return cur, 0.0, False, "solve", False
    L_new, jit = factor(ev[2])
    if L_new is None:
        return cur, 0.0, False, "metric", jit
    new = _State(prop, ev[0], L_new, ev[1], ev[2])
    log_alpha = new.logp - cur.logp + _log_q(cur.theta, new, eps) - _log_q(prop, cur, eps)
    if math.isnan(log_alpha):
        log_alpha = -math.inf
    alpha = math.exp(min(0.0, log_alpha))
    if log_u < log_alpha:
        return new, alpha, True, None, jit
    return cur, alpha, False, None, jit


class _Trace:
    """Every iteration of one run, burn-in included, and its failure counts."""

    def __init__(self, n_total, d):
        self.chain = np.empty((n_total, d))
        self.logp = np.empty(n_total)
        self.accepted = np.zeros(n_total, dtype=bool)
        self.prob = np.zeros(n_total)
        self.failed = np.zeros(n_total, dtype=bool)
        self.n_failed = self.n_non_pd = self.n_jitter = 0


def _iterate(posterior, cur, n_samples, rng, steps, windows, trace, progress, callback, start=0, checkpoint=None):
    """Run iterations ``start .. steps.burn_in + n_samples - 1`` from ``cur``, filling ``trace``;
    ``checkpoint(i, snapshot)`` after each (``snapshot()``: the state after iteration ``i``)."""
    burn_in = steps.burn_in
    n_total = burn_in + n_samples
    bar = None
    if _progress_enabled(progress):
        from tqdm.auto import tqdm
        bar = tqdm(total=n_total, initial=start, desc="SMMALA", unit="it", leave=False)
    try:
        for i in range(start, n_total):
            in_burn = i < burn_in
            if i in windows.windows:
                cur = _State(cur.theta, cur.logp, windows.update(i, trace.chain, cur.G), cur.grad, cur.G)
                steps.restart()
            eps = steps.at(i)
            cur, alpha, accepted, failure, jit = _transition(posterior, cur, eps, windows.factor, rng)
            trace.n_jitter += int(jit)
            if failure is not None:
                trace.failed[i] = True
                if failure == "solve":
                    trace.n_failed += 1
                else:
                    trace.n_non_pd += 1
            trace.accepted[i] = accepted
            steps.update(i, alpha)
            trace.chain[i] = cur.theta
            trace.logp[i] = cur.logp
            trace.prob[i] = alpha
            if callback is not None:
                callback(i, cur.theta, cur.logp, bool(trace.accepted[i]), alpha, eps, bool(trace.failed[i]))
            if checkpoint is not None:
                checkpoint(i, lambda i=i, cur=cur: snapshot_sampler(i + 1, cur, steps, windows, trace, rng))
            if bar is not None:
                bar.update(1)
                if (i + 1) % 50 == 0:
                    sl = slice(burn_in, i + 1) if not in_burn else slice(0, i + 1)
                    bar.set_postfix(acc=f"{trace.accepted[sl].mean():.2f}", eps=f"{eps:.3g}")
    finally:
        if bar is not None:
            bar.close()


def _run(posterior, theta0, n_samples, step_size=None, burn_in=None, seed=0, adapt=True,
         target_accept=0.6, progress=None, *, metric_floor=None, metric="fisher", callback=None,
         checkpoint=None, resume=None) -> MCMCResult:
    """:func:`smmala` on ``posterior`` as given (no transform, no convergence checks).

    :func:`pbsens.sample` runs its chains through this (it transforms and checks itself).
    ``checkpoint(i, snapshot)`` is called after every iteration ``i`` (``snapshot()`` returns
    the sampler's complete state,
    :func:`pbsens.inference.checkpoint.snapshot_sampler`); ``resume``, such a snapshot, continues the
    chain from it (``seed``, a Generator, gets the snapshot's RNG state; ``theta0`` is not
    evaluated): the result is the uninterrupted run's, bit for bit.
    """
    _check_posterior(posterior)
    theta = _start_point(posterior, theta0)
    d = theta.size
    n_samples, burn_in, step_size, rng = _run_options(d, n_samples, burn_in, step_size, target_accept, seed)

    t_start = time.perf_counter()
    if resume is None:
        cur, windows, jit = _first_state(posterior, theta, burn_in, metric_floor, metric)
    else:
        windows, jit = _windows(burn_in, metric_floor, metric), False
    steps = StepSize(step_size, burn_in, adapt, target_accept, windows.switch_at)
    n_total = burn_in + n_samples
    tr = _Trace(n_total, d)
    tr.n_jitter = int(jit)
    start = 0
    if resume is not None:
        start, cur = restore_sampler(resume, _State.__new__(_State), steps, windows, tr, rng)
    _iterate(posterior, cur, n_samples, rng, steps, windows, tr, progress, callback, start, checkpoint)
    wall = time.perf_counter() - t_start
    return MCMCResult(
        chain=tr.chain[burn_in:].copy(), logp=tr.logp[burn_in:].copy(),
        accept_rate=float(tr.accepted[burn_in:].mean()), step_size=float(steps.final), wall_time=wall,
        burn_in=burn_in, accept_rate_burn_in=float(tr.accepted[:burn_in].mean()) if burn_in else float("nan"),
        n_failed=tr.n_failed, n_non_pd=tr.n_non_pd, n_jitter=tr.n_jitter, n_evaluations=n_total + 1,
        burn_in_chain=tr.chain[:burn_in].copy(), burn_in_logp=tr.logp[:burn_in].copy(),
        step_size_trace=steps.trace,
        param_names=list(getattr(posterior, "param_names", []) or []),
        seed=seed if not isinstance(seed, np.random.Generator) else None,
        accepted=tr.accepted[burn_in:].copy(), accept_prob=tr.prob[burn_in:].copy(),
        solver_failed=tr.failed[burn_in:].copy(), step_size_initial=float(step_size))


def _names(posterior, d):
    names = list(getattr(posterior, "param_names", []) or [])
    return names if len(names) == d else [f"theta[{j}]" for j in range(d)]


def _support_of(posterior, d):
    """``(lower, upper)`` the posterior declares (attribute ``support``), or ``None``."""
    from .transform import UnboundedPosterior
    if isinstance(posterior, UnboundedPosterior):
        return None
    sup = getattr(posterior, "support", None)
    if sup is None:
        return None
    if callable(sup):
        sup = sup()
    try:
        lo, hi = (np.array(b, dtype=np.float64).reshape(-1) for b in sup)
    except (TypeError, ValueError):
        raise PbsensError("'posterior'.support must be (lower, upper), two arrays of numbers") from None
    if lo.size != d or hi.size != d:
        raise PbsensError(f"'posterior'.support has {lo.size} and {hi.size} bounds for {d} parameters")
    if not (np.any(np.isfinite(lo)) or np.any(np.isfinite(hi))):
        return None
    return lo, hi


# ----------------------------------------------------------------------------- the public sampler
def smmala(posterior, theta0, n_samples, step_size=None, burn_in=None, seed=0, adapt=True,
           target_accept=0.6, progress=None, *, metric_floor=None, metric="fisher", callback=None,
           transform=None) -> MCMCResult:
    """Simplified manifold MALA (Girolami and Calderhead 2011; METHOD.md section 8).

    Proposal ``theta* ~ N(theta + (eps^2/2) G^-1 grad, eps^2 G^-1)`` with the metric
    ``G`` (Fisher information (1.3) + prior precision) and gradient at the current
    point; Metropolis-Hastings acceptance with the reverse proposal density, whose
    metric and gradient are those at ``theta*``. ``G^-1`` is applied through a
    Cholesky factor; a metric that is not positive definite gets growing diagonal
    jitter, and is rejected if that does not help. A proposal whose solve fails
    (:class:`~pbsens.SolverError`, or NaN/inf) is rejected (``log pi = -inf``).

    Parameters
    ----------
    posterior : LogPosterior
        Anything with ``evaluate(theta) -> (logp, grad, metric)``.
    theta0 : array_like (d,)
        Starting point; the posterior must be finite there.
    n_samples : int
        Samples kept after burn-in.
    step_size : float, optional
        Initial ``eps``; default ``1.65 d^(-1/6)`` (optimal MALA scaling for a
        Gaussian target with exact metric).
    burn_in : int, optional
        Iterations discarded before the kept samples; default ``n_samples // 2``.
        The step size is adapted during burn-in only.
    seed : int, numpy Generator or None
        Random number generator seed.
    adapt : bool
        Robbins-Monro adaptation of ``log eps`` toward ``target_accept`` during
        burn-in (gain ``(i + 10)^-0.6``); afterwards ``eps`` is fixed at the geometric
        mean of its values over the second half of burn-in.
    target_accept : float
        Target acceptance probability, in (0, 1); default 0.6 (MALA's optimum is 0.574).
    progress : bool, optional
        Show a tqdm progress bar; default: only when stderr is a terminal.
    metric_floor : float, optional
        Regularise the metric by its eigenvalues: ``|lambda|`` floored at
        ``metric_floor * max |lambda|`` (see ``_chol_floor``), for singular or
        indefinite metrics (e.g. ``1e-6``). Default ``None``: Cholesky with
        round-off-level jitter only; a genuinely indefinite metric rejects the proposal.
    metric : str
        ``"fisher"`` (default): the posterior's metric ``G(theta)``. ``"fisher+cov"``:
        ``G(theta) + P`` and ``"cov"``: the constant ``P`` (preconditioned MALA), with
        ``P`` the inverse sample covariance of the chain over burn-in iterations
        ``[0.15, 0.4) burn_in`` (shrunk toward a small diagonal), then re-estimated
        over ``[0.4, 0.75) burn_in`` (sampled with the first estimate); ``eps`` is
        re-adapted after each update, and the metric is frozen after burn-in (the kept iterations are an exact
        Metropolis-Hastings chain with a fixed proposal rule). ``P`` supplies the scale
        of directions the Fisher information does not see (a non-identifiable
        parameter's spread in the posterior). Needs ``burn_in >= 8``.
    callback : callable, optional
        ``callback(i, theta, logp, accepted, accept_prob, step_size, failed)`` after
        every iteration ``i`` (burn-in included; the sample index is ``i - burn_in``); with a
        transform, ``theta`` and ``logp`` are on the parameter scale.
    transform : bool, optional
        Sample bounded parameters in unbounded coordinates: ``logit`` of the position
        within two finite bounds, ``log`` of the distance to one
        (:class:`~pbsens.inference.transform.UnboundedPosterior`, ridge 0.1; the
        log-Jacobian is added to the target, so the draws still follow ``posterior``),
        so that no proposal leaves the support. Needs a posterior that declares its
        support: an attribute ``support = (lower, upper)``, as
        :meth:`Problem.log_posterior` and a :class:`LogPosterior` with ``support=``
        have. Default ``None``: transform when the posterior declares a finite bound
        (and is not already an ``UnboundedPosterior``), else sample as given. ``chain``,
        ``logp`` and the callback are on the parameter scale either way; ``theta0`` on a
        bound starts :data:`START_MARGIN` of the width inside it. ``False``: sample
        ``posterior`` as given (proposals beyond a bound are rejected).

    Returns
    -------
    MCMCResult

    Warns
    -----
    ConvergenceWarning
        (:mod:`pbsens.errors`) Before the run: ``theta0`` on a bound (with a
        transform), or within ``1e-3`` of the bounds' width of one (without). After
        it: the chain hardly moves (acceptance after burn-in below 5% over at least 20
        draws, or a final step size below 1% of ``max(initial step, 1.65 d^(-1/6))``),
        or a parameter sits within ``1e-4`` of the bounds' width of a bound in more
        than half of the draws; with ArviZ installed and a chain that moves, also bulk
        ESS below 100 (the rule of :func:`pbsens.inference.chains.check_convergence`
        for one chain; R-hat needs several chains: :func:`pbsens.sample`). The message
        names the parameters and says what to try; the messages are also in
        ``result.convergence_warnings``.

    Raises
    ------
    PbsensError
        Invalid arguments, or a posterior that fails / has a singular metric at ``theta0``.
    """
    _check_posterior(posterior)
    if transform is not None and not isinstance(transform, (bool, np.bool_)):
        raise PbsensError(f"'transform' must be True, False or None, got {transform!r}")
    theta = _start_point(posterior, theta0)
    d = theta.size
    sup = _support_of(posterior, d)
    if transform and sup is None:
        raise PbsensError("'transform'=True needs a posterior that declares its support (an attribute "
                          "support = (lower, upper)); or wrap it in pbsens.inference.transform.UnboundedPosterior "
                          "and pass a start in the unbounded coordinates")
    transform = sup is not None if transform is None else bool(transform)
    names = _names(posterior, d)
    early = []
    if sup is not None:
        lo, hi = sup
        out = np.flatnonzero((theta < lo) | (theta > hi))
        if out.size:
            j = int(out[0])
            raise PbsensError(f"'theta0'[{j}] ({names[j]}) = {theta[j]} is outside the posterior's support "
                              f"[{lo[j]}, {hi[j]}]")
        w = _start_warnings(theta, lo, hi, names, transform)
        if w is not None:
            early.append(w)
            warnings.warn(w, stacklevel=2)
    kw = dict(step_size=step_size, burn_in=burn_in, seed=seed, adapt=adapt, target_accept=target_accept,
              progress=progress, metric_floor=metric_floor, metric=metric, callback=callback)
    if transform:
        from .transform import UnboundedPosterior, to_parameter_scale
        post = UnboundedPosterior(posterior, *sup)
        z0 = post.transform.to_unbounded(theta, margin=START_MARGIN)
        if callback is not None:
            def _cb(i, z, logp, accepted, prob, eps, failed):
                callback(i, post.transform.to_bounded(z), post.log_posterior_theta(logp, z), accepted, prob, eps,
                         failed)
            kw["callback"] = _cb
        res = _run(post, z0, n_samples, **kw)
        to_parameter_scale(res, post)
    else:
        res = _run(posterior, theta, n_samples, **kw)
    late = chain_warnings(res, names, *(sup if sup is not None else (None, None)), d=d,
                          adapted=bool(adapt) and res.burn_in > 0)
    for w in late:
        warnings.warn(w, stacklevel=2)
    res.convergence_warnings = [str(w) for w in early + late]
    return res
