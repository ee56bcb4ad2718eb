"""Convergence checks of SMMALA chains: the thresholds, and the per-chain and mixing rules.

:func:`pbsens.smmala` warns with :func:`chain_warnings` (and, before its run,
``_start_warnings``); :func:`pbsens.inference.chains.check_convergence` applies the
same rules (:func:`movement_problems`, :func:`at_bound`, :func:`mixing_warnings`)
per chain to the chains of :func:`pbsens.sample`. Each finding is a
:class:`~pbsens.errors.ConvergenceWarning` naming the parameters and chains.
ArviZ (the ``mcmc`` extra) is needed only for R-hat and ESS.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ConvergenceWarning

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



def _fmt_bounds(items, names, theta, lower, upper):
    parts = []
    for j, side in items:
        b = lower[j] if side == 0 else upper[j]
        parts.append(f"{names[j]} = {theta[j]:.6g} ({'lower' if side == 0 else 'upper'} bound {b:.6g})")
    return ", ".join(parts)


def _start_warnings(theta, lower, upper, names, transformed):
    """A warning (or ``None``) for a start on (transformed) or near (as given) a bound."""
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
    """The :class:`~pbsens.errors.ConvergenceWarning` s for one :class:`~pbsens.inference.smmala.MCMCResult`
    (a list)."""
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
