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


def _burn_in_precision(Z):
    """Inverse of the sample covariance of the burn-in window ``Z`` (n, d), shrunk toward a small
    diagonal as Stan's windowed adaptation does: ``(n / (n + 5)) C + 1e-3 (5 / (n + 5)) I``."""
    n, d = Z.shape
    C = np.atleast_2d(np.cov(Z, rowvar=False)) if n > 1 else np.zeros((d, d))
    C = (n / (n + 5.0)) * C + 1e-3 * (5.0 / (n + 5.0)) * np.eye(d)
    return np.linalg.inv(0.5 * (C + C.T))


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
def _run(posterior, theta0, n_samples, step_size=None, burn_in=None, seed=0, adapt=True,
         target_accept=0.6, progress=None, *, metric_floor=None, metric="fisher", callback=None) -> MCMCResult:
    """:func:`smmala` on ``posterior`` as given (no transform, no convergence checks).

    :func:`pbsens.sample` runs its chains through this (it transforms and checks itself).
    """
    if not hasattr(posterior, "evaluate"):
        raise PbsensError(f"'posterior' must have evaluate(theta) -> (logp, grad, metric), "
                          f"got {type(posterior).__name__}")
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
    n_samples = _check_int(n_samples, "n_samples", 1)
    burn_in = n_samples // 2 if burn_in is None else _check_int(burn_in, "burn_in", 0)
    if step_size is None:
        step_size = 1.65 * d ** (-1.0 / 6.0)
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

    t_start = time.perf_counter()
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
    if metric_floor is not None and (isinstance(metric_floor, bool) or not isinstance(
            metric_floor, (int, float, np.floating)) or not 0 < metric_floor < 1):
        raise PbsensError(f"'metric_floor' must be a number in (0, 1), got {metric_floor!r}")
    if metric not in METRICS:
        raise PbsensError(f"'metric' must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric != "fisher" and burn_in < 8:
        raise PbsensError(f"'metric'={metric!r} learns the covariance during burn-in: 'burn_in' must be >= 8, "
                          f"got {burn_in}")
    base_factor = _chol if metric_floor is None else (lambda M: _chol_floor(M, float(metric_floor)))
    factor = base_factor
    # covariance windows [burn_in 0.15, 0.4) and [0.4, 0.75): the second one, sampled with the first
    # estimate, sees the spread the Fisher metric alone explores too slowly
    windows = {} if metric == "fisher" else {int(0.4 * burn_in): int(0.15 * burn_in),
                                               int(0.75 * burn_in): int(0.4 * burn_in)}
    switch_at = max(windows) if windows else -1
    L, jit = factor(G)
    if L is None:
        raise PbsensError("'theta0': the metric is not positive definite there, even with jitter "
                          "(add a prior, or start elsewhere)")
    n_jitter = int(jit)
    cur = _State(theta, lp, L, g, G)
    precision = None
    i_adapt = 0

    n_total = burn_in + n_samples
    chain = np.empty((n_total, d))
    logps = np.empty(n_total)
    accepted = np.zeros(n_total, dtype=bool)
    probs = np.zeros(n_total)
    failed = np.zeros(n_total, dtype=bool)
    eps_trace = np.empty(burn_in)
    log_eps = math.log(step_size)
    n_failed = n_non_pd = 0
    eps_final = step_size

    bar = None
    if _progress_enabled(progress):
        from tqdm.auto import tqdm
        bar = tqdm(total=n_total, desc="SMMALA", unit="it", leave=False)
    try:
        for i in range(n_total):
            in_burn = i < burn_in
            if i in windows:
                precision = _burn_in_precision(chain[windows[i]:i])
                if metric == "cov":
                    L_fixed = np.linalg.cholesky(precision)
                    factor = lambda M: (L_fixed, False)        # noqa: E731
                else:
                    factor = lambda M: base_factor(M + precision)   # noqa: E731
                L_c, _ = factor(cur.G)
                if L_c is None:     # (burn-in: this one state may use P alone)
                    L_c = np.linalg.cholesky(precision)
                cur = _State(cur.theta, cur.logp, L_c, cur.grad, cur.G)
                i_adapt = 0
            if in_burn:
                eps = math.exp(log_eps)
                eps_trace[i] = eps
            else:
                if i == burn_in and burn_in > 0 and adapt:
                    tail = burn_in // 2 if switch_at < 0 else switch_at + (burn_in - switch_at) // 2
                    eps_final = float(np.exp(np.mean(np.log(eps_trace[tail:]))))
                eps = eps_final
            z = rng.standard_normal(d)
            log_u = math.log(rng.uniform())
            # theta* = mu + eps L^-T z, so that cov = eps^2 (L L^T)^-1 = eps^2 G^-1
            prop = cur.theta + 0.5 * eps * eps * cur.v + eps * solve_triangular(cur.L, z, lower=True, trans="T",
                                                                                 check_finite=False)
            alpha = 0.0
            ev = _evaluate(posterior, prop)
            if ev is None:
                n_failed += 1
                failed[i] = True
            else:
                L_new, jit = factor(ev[2])
                n_jitter += int(jit)
                if L_new is None:
                    n_non_pd += 1
                    failed[i] = True
                else:
                    new = _State(prop, ev[0], L_new, ev[1], ev[2])
                    log_alpha = new.logp - cur.logp + _log_q(cur.theta, new, eps) - _log_q(prop, cur, eps)
                    if math.isnan(log_alpha):
                        log_alpha = -math.inf
                    alpha = math.exp(min(0.0, log_alpha))
                    if log_u < log_alpha:
                        cur = new
                        accepted[i] = True
            if in_burn and adapt:
                log_eps += (alpha - target_accept) / (i_adapt + 10.0) ** 0.6
                i_adapt += 1
                log_eps = min(max(log_eps, math.log(1e-8)), math.log(1e3))
            chain[i] = cur.theta
            logps[i] = cur.logp
            probs[i] = alpha
            if callback is not None:
                callback(i, cur.theta, cur.logp, bool(accepted[i]), alpha, eps, bool(failed[i]))
            if bar is not None:
                bar.update(1)
                if (i + 1) % 50 == 0:
                    sl = slice(burn_in, i + 1) if not in_burn else slice(0, i + 1)
                    bar.set_postfix(acc=f"{accepted[sl].mean():.2f}", eps=f"{eps:.3g}")
    finally:
        if bar is not None:
            bar.close()
    if burn_in == 0 or not adapt:
        eps_final = step_size
    wall = time.perf_counter() - t_start
    return MCMCResult(
        chain=chain[burn_in:].copy(), logp=logps[burn_in:].copy(),
        accept_rate=float(accepted[burn_in:].mean()), step_size=float(eps_final), wall_time=wall,
        burn_in=burn_in, accept_rate_burn_in=float(accepted[:burn_in].mean()) if burn_in else float("nan"),
        n_failed=n_failed, n_non_pd=n_non_pd, n_jitter=n_jitter, n_evaluations=n_total + 1,
        burn_in_chain=chain[:burn_in].copy(), burn_in_logp=logps[:burn_in].copy(), step_size_trace=eps_trace,
        param_names=list(getattr(posterior, "param_names", []) or []),
        seed=seed if not isinstance(seed, np.random.Generator) else None,
        accepted=accepted[burn_in:].copy(), accept_prob=probs[burn_in:].copy(),
        solver_failed=failed[burn_in:].copy(), step_size_initial=float(step_size))


# ----------------------------------------------------------------------------- convergence checks
# Thresholds of the ConvergenceWarnings (pbsens.sample applies the same per-chain rules):
MIN_ACCEPT = 0.05        # acceptance after burn-in below 5%: the chain hardly moves (SMMALA targets 60%)
MIN_DRAWS_ACCEPT = 20    # ... judged on at least 20 kept draws (0 of 20 at a true 30% has probability 8e-4)
STEP_COLLAPSE = 1e-2     # final step below 1% of max(initial step, default 1.65 d^(-1/6)): proposals
                         # two orders of magnitude smaller than the metric's own scale
BOUND_TOL = 1e-4         # "on a bound": within 1e-4 of the bounds' width (one bound: of max(|bound|, |theta|))
BOUND_FRACTION = 0.5     # ... for more than half of the kept draws
START_TOL = 1e-3         # theta0 this close to a bound, sampled without a transform: a warning before the run
START_MARGIN = 1e-6      # a transformed start on a bound is moved this fraction of the width inside


def default_step_size(d):
    """SMMALA's default initial step size ``1.65 d^(-1/6)`` (optimal MALA scaling)."""
    return 1.65 * d ** (-1.0 / 6.0)


def bound_distance(theta, lower, upper):
    """Relative distance of ``theta`` (..., d) to its nearest finite bound, and which bound.

    The distance is divided by the bounds' width (two finite bounds) or by
    ``max(|bound|, |theta|)`` (one finite bound); ``inf`` without bounds. Returns
    ``(distance, side)``, ``side`` 0 for the lower and 1 for the upper bound.
    """
    th = np.asarray(theta, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    flo, fhi = np.isfinite(lo), np.isfinite(hi)
    width = np.where(flo & fhi, hi - lo, np.nan)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s_lo = np.where(flo & fhi, width, np.maximum(np.abs(np.where(flo, lo, 0.0)), np.abs(th)))
        s_hi = np.where(flo & fhi, width, np.maximum(np.abs(np.where(fhi, hi, 0.0)), np.abs(th)))
        d_lo = np.where(flo, np.abs(th - np.where(flo, lo, 0.0)) / np.maximum(s_lo, 1e-300), np.inf)
        d_hi = np.where(fhi, np.abs(np.where(fhi, hi, 0.0) - th) / np.maximum(s_hi, 1e-300), np.inf)
    return np.minimum(d_lo, d_hi), np.where(d_lo <= d_hi, 0, 1)


def at_bound(X, lower, upper, tol=BOUND_TOL, fraction=BOUND_FRACTION):
    """Parameters whose draws ``X`` (n, d) sit within ``tol`` of a bound (:func:`bound_distance`)
    for more than ``fraction`` of the draws: a list of ``(j, side, fraction_of_draws)``."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] == 0:
        return []
    dist, side = bound_distance(X, lower, upper)
    near = dist <= tol
    out = []
    for j in range(X.shape[1]):
        f = float(near[:, j].mean())
        if f > fraction:
            s = side[:, j][near[:, j]]
            out.append((j, int(np.round(s.mean())), f))
    return out


def movement_problems(accept_rate, n_draws, eps_final, eps_initial, d, adapted=True):
    """Why a chain hardly moves: ``(reasons, advice)``, two lists of phrases (empty when it moves)."""
    why, advice = [], []
    if n_draws >= MIN_DRAWS_ACCEPT and accept_rate < MIN_ACCEPT:
        why.append(f"acceptance {100 * accept_rate:.1f}% after burn-in")
    ref = max(eps_initial, default_step_size(d)) if math.isfinite(eps_initial) else default_step_size(d)
    if eps_final < STEP_COLLAPSE * ref:
        if adapted and math.isfinite(eps_initial) and eps_final < eps_initial:
            why.append(f"step size adapted from {eps_initial:.3g} down to {eps_final:.3g}")
        else:
            why.append(f"step size {eps_final:.3g}, below {STEP_COLLAPSE:g} x the default {default_step_size(d):.3g}")
            advice.append("pass a larger step_size or let it adapt during a burn-in")
    if why:
        advice += ["start from a point well inside the support (e.g. a fit)",
                   "sample bounded parameters in unbounded coordinates (transform=True)",
                   "regularise a nearly singular metric (metric_floor=1e-6, or metric='fisher+cov')",
                   "run a longer burn-in"]
    return why, advice


RHAT_MAX = 1.01          # rank-normalised split R-hat above this: not converged (Vehtari et al. 2021, ArviZ)
ESS_PER_CHAIN = 100      # bulk ESS below 100 x chains (400 for 4 chains: Vehtari et al. 2021, ArviZ's guidance)


def _list(items, limit=6):
    items = list(items)
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _chains(ids):
    ids = [int(c) for c in ids]
    return ("chain " if len(ids) == 1 else "chains ") + ", ".join(map(str, ids))


def mixing_warnings(X, ids, chain_ids):
    """R-hat and bulk-ESS :class:`~pbsens.errors.ConvergenceWarning` s for draws ``X`` (chains, draws, d).

    Rank-normalised split R-hat (``arviz.rhat``) above :data:`RHAT_MAX` (at least two
    chains, as ArviZ requires); bulk ESS (``arviz.ess``) below ``ESS_PER_CHAIN x chains``.
    Empty when ArviZ is not installed, or with fewer than 4 draws per chain.
    """
    from ..errors import ConvergenceWarning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import arviz
    except ImportError:
        return []
    X = np.asarray(X, dtype=np.float64)
    C, N, d = X.shape
    found = []
    if N < 4:
        return found

    moving = np.any(np.ptp(X, axis=1) > 0, axis=0)          # (d,): some chain moves in it (np.var of a
    #                                                          constant chain can be 1e-32, not 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # R-hat (as ArviZ, only between chains: one chain's split halves alone are too noisy at 1.01,
        # e.g. 1,000 draws of a 3-d Gaussian by SMMALA gave 1.012; its drift shows in the bulk ESS)
        rhat = np.full(d, np.nan)
        for j in np.flatnonzero(moving) if C >= 2 else []:
            rhat[j] = float(arviz.rhat(X[:, :, j]))
        bad = [j for j in np.argsort(-np.nan_to_num(rhat, nan=-1.0)) if rhat[j] > RHAT_MAX]   # nan: undefined
        if bad:
            parts, named = [], set()
            for j in bad:
                m = X[:, :, j].mean(axis=1)
                off = np.array([abs(m[c] - np.median(np.delete(m, c))) for c in range(C)])
                far = [chain_ids[c] for c in np.flatnonzero(off >= 0.5 * off.max())] if off.max() > 0 else []
                named.update(far if C > 2 else chain_ids)
                parts.append(f"{ids[j]} {rhat[j]:.3g} (chain means "
                             + ", ".join(f"{cid}: {v:.4g}" for cid, v in zip(chain_ids, m))
                             + (f"; {_chains(far)} furthest from the others)" if far and C > 2 else ")"))
            msg = (f"R-hat above {RHAT_MAX} (rank-normalised split R-hat, arviz.rhat) for {len(bad)} of {d} "
                   f"parameters: {_list(parts)}. The chains disagree: the draws are not yet from one "
                   f"distribution. Run more draws and a longer burn-in, start from a fit (theta0=), and look "
                   f"at the trace and rank plots for chains stuck in separate modes.")
            found.append(ConvergenceWarning(msg, kind="rhat", parameters=[ids[j] for j in bad],
                                            chains=sorted(named)))
        # bulk ESS
        need = ESS_PER_CHAIN * C
        ess = np.zeros(d)
        for j in np.flatnonzero(moving):
            ess[j] = float(arviz.ess(X[:, :, j], method="bulk"))
        bad = [j for j in np.argsort(np.nan_to_num(ess, nan=0.0)) if not ess[j] >= need]
        if bad:
            parts, named = [], set()
            for j in bad:
                per = [float(arviz.ess(X[c:c + 1, :, j], method="bulk")) if np.ptp(X[c, :, j]) > 0 else 0.0
                       for c in range(C)] if C > 1 else [ess[j]]
                named.update(cid for cid, e in zip(chain_ids, per) if not e >= ESS_PER_CHAIN)
                parts.append(f"{ids[j]} {np.nan_to_num(ess[j]):.0f}"
                             + (f" (per chain {', '.join(f'{e:.0f}' for e in np.nan_to_num(per))})" if C > 1 else ""))
            pos = ess[np.isfinite(ess) & (ess > 0)]
            more = (f" (about {need / pos.min():.0f} times the {N} per chain at this mixing)"
                    if pos.size and pos.min() < need else "")
            msg = (f"bulk ESS below {need} ({ESS_PER_CHAIN} per chain x {C} chain{'s' if C > 1 else ''}; Vehtari et "
                   f"al. 2021, ArviZ's guidance of 400 for 4 chains) for {len(bad)} of {d} parameters: "
                   f"{_list(parts)}; {_chains(sorted(named)) if named else 'no single chain'} below "
                   f"{ESS_PER_CHAIN}. Means and quantiles of these parameters are uncertain and R-hat is unreliable "
                   f"at this ESS: run more draws{more}, or make the chains mix better (start from a fit, "
                   f"metric='fisher+cov', transform=True).")
            found.append(ConvergenceWarning(msg, kind="ess", parameters=[ids[j] for j in bad],
                                            chains=sorted(named)))
    return found


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


def _fmt_bounds(items, names, theta, lower, upper):
    parts = []
    for j, side in items:
        b = lower[j] if side == 0 else upper[j]
        parts.append(f"{names[j]} = {theta[j]:.6g} ({'lower' if side == 0 else 'upper'} bound {b:.6g})")
    return ", ".join(parts)


def _start_warnings(theta, lower, upper, names, transformed):
    """A warning (or ``None``) for a start on (transformed) or near (as given) a bound."""
    from ..errors import ConvergenceWarning
    dist, side = bound_distance(theta, lower, upper)
    tol = START_MARGIN if transformed else START_TOL
    hit = [(int(j), int(side[j])) for j in np.flatnonzero(dist <= tol)]
    if not hit:
        return None
    where = _fmt_bounds(hit, names, theta, lower, upper)
    if transformed:
        msg = (f"theta0 is on a bound of the posterior's support for {where}: smmala samples in unbounded "
               f"(logit/log) coordinates, where a bound is at infinity, so the chain starts {START_MARGIN:g} of "
               f"the width inside it and may need many iterations to come away. Start from an interior point "
               f"(e.g. a fit), or widen the bound if the data push the parameter against it.")
    else:
        msg = (f"theta0 is on or within {START_TOL:g} of the bounds' width of a bound for {where}, and the "
               f"chain samples the parameters as they are (transform=False): proposals beyond a bound have "
               f"log posterior -inf and are rejected, so the chain may hardly move. A transform exists: "
               f"transform=True (the default when the posterior declares its support; "
               f"pbsens.inference.transform.UnboundedPosterior) samples logit(position within the bounds). "
               f"Or start from an interior point (e.g. a fit).")
    return ConvergenceWarning(msg, kind="start", parameters=[names[j] for j, _ in hit], chains=[0])


def chain_warnings(res, names, lower=None, upper=None, d=None, adapted=True):
    """The :class:`~pbsens.errors.ConvergenceWarning` s for one :class:`MCMCResult` (a list)."""
    from ..errors import ConvergenceWarning
    d = res.chain.shape[1] if d is None else d
    out = []
    why, advice = movement_problems(res.accept_rate, res.n_samples, res.step_size, res.step_size_initial, d,
                                    adapted)
    if why:
        n_bad = int(np.sum(res.solver_failed)) if res.solver_failed is not None else 0
        if n_bad:
            why.append(f"{n_bad} of {res.n_samples} kept proposals rejected because the log posterior was not "
                       f"finite there (outside the support, or a failed solve)")
        msg = (f"the chain hardly moves: {'; '.join(why)}. Its draws are not a sample of the posterior: "
               f"{'; '.join(advice)}.")
        out.append(ConvergenceWarning(msg, kind="stuck", parameters=[], chains=[0]))
    if lower is not None:
        hits = at_bound(res.chain, lower, upper)
        if hits:
            parts = [f"{names[j]} on its {'lower' if s == 0 else 'upper'} bound "
                     f"{(lower if s == 0 else upper)[j]:.6g} ({100 * f:.0f}% of the draws)" for j, s, f in hits]
            msg = (f"the chain sits on a bound: {', '.join(parts)} (within {BOUND_TOL:g} of the bounds' width). "
                   f"Either the chain is pinned there (sample in unbounded coordinates, transform=True, and start "
                   f"from a fit away from the bound) or the posterior piles up against the bound, which then "
                   f"decides the estimate more than the data do (widen the bound, or add a prior).")
            out.append(ConvergenceWarning(msg, kind="bound", parameters=[names[j] for j, _, _ in hits],
                                          chains=[0]))
    if not why:      # (a chain that hardly moves has no R-hat or ESS worth reporting)
        out += mixing_warnings(res.chain[None], names, [0])
    return out


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
    if not hasattr(posterior, "evaluate"):
        raise PbsensError(f"'posterior' must have evaluate(theta) -> (logp, grad, metric), "
                          f"got {type(posterior).__name__}")
    if transform is not None and not isinstance(transform, (bool, np.bool_)):
        raise PbsensError(f"'transform' must be True, False or None, got {transform!r}")
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
