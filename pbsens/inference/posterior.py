"""Log-posterior = log-likelihood + log-prior, with the SMMALA metric (METHOD.md section 8)."""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError

__all__ = ["LogPosterior"]


class LogPosterior:
    """Unnormalised log-posterior ``log pi(theta) = log L(theta) + log prior(theta)``.

    The interface samplers use (:func:`pbsens.inference.smmala`): :meth:`evaluate`
    returns ``(logp, grad, metric)`` from one state + sensitivity solve, with the
    metric ``G = F + prior precision`` (Fisher information (1.3) plus the prior's
    precision; Girolami and Calderhead 2011, METHOD.md section 8). The last point is
    cached, so :meth:`logp`, :meth:`grad` and :meth:`metric` at the same ``theta``
    share the solve.

    Parameters
    ----------
    likelihood : GaussianLikelihood
        Anything with ``dim`` and ``evaluate(theta) -> (loglik, grad, fisher)``.
    prior : NormalPrior or None
        Anything with ``logpdf``, ``grad`` and ``precision``; ``None`` for a flat
        prior (the metric is then the Fisher information alone and may be singular).
    support : (array_like, array_like), optional
        ``(lower, upper)`` bounds of ``theta`` (``-inf``/``inf`` for none): outside them
        ``logp`` is ``-inf`` (no solve), and :func:`pbsens.smmala` samples inside them
        in unbounded coordinates (:mod:`pbsens.inference.transform`). Default: none.
    """

    def __init__(self, likelihood, prior=None, support=None):
        if not hasattr(likelihood, "evaluate"):
            raise PbsensError(f"'likelihood' must have an evaluate(theta) method, got {type(likelihood).__name__}")
        self.likelihood = likelihood
        self.prior = prior
        d = getattr(likelihood, "dim", None)
        if prior is not None:
            for attr in ("logpdf", "grad", "precision"):
                if not hasattr(prior, attr):
                    raise PbsensError(f"'prior' must have logpdf, grad and precision methods; it lacks {attr!r}")
            pd = getattr(prior, "dim", None)
            if d is not None and pd is not None and pd != d:
                raise PbsensError(f"'prior' has dimension {pd} but the likelihood estimates {d} parameters")
        self.support = None
        if support is not None:
            try:
                lo, hi = (np.array(b, dtype=np.float64).reshape(-1) for b in support)
            except (TypeError, ValueError):
                raise PbsensError("'support' must be (lower, upper), two arrays of numbers") from None
            if lo.shape != hi.shape or (d is not None and lo.size != d) or np.any(np.isnan(lo) | np.isnan(hi)) \
                    or np.any(~(lo < hi)):
                raise PbsensError(f"'support' must be (lower, upper) with lower < upper, {d or 'dim'} entries each; "
                                  f"got {lo.tolist()} and {hi.tolist()}")
            self.support = (lo, hi)
        self._cache_theta = None
        self._cache = None

    @property
    def dim(self):
        return getattr(self.likelihood, "dim", None)

    @property
    def param_names(self):
        return list(getattr(self.likelihood, "param_names", []) or [])

    def evaluate(self, theta):
        """``(logp, grad, metric)`` at ``theta`` from one solve (cached for the last ``theta``).

        Outside ``support``: ``(-inf, 0, I)`` without a solve.

        Raises
        ------
        PbsensError
            Invalid ``theta``.
        SolverError
            The likelihood's solve failed (a sampler rejects such a proposal).
        """
        th = np.array(theta, dtype=np.float64).reshape(-1)
        if self.support is not None and th.size == self.support[0].size and (
                np.any(th < self.support[0]) or np.any(th > self.support[1])):
            return -np.inf, np.zeros(th.size), np.eye(th.size)
        if self._cache_theta is not None and np.array_equal(th, self._cache_theta):
            lp, g, G = self._cache
            return lp, g.copy(), G.copy()
        ll, g, F = self.likelihood.evaluate(th)
        lp = float(ll)
        G = np.array(F, dtype=np.float64)
        g = np.array(g, dtype=np.float64)
        if self.prior is not None:
            lp += float(self.prior.logpdf(th))
            g = g + self.prior.grad(th)
            G = G + self.prior.precision(th)
        self._cache_theta = th.copy()
        self._cache = (lp, g, G)
        return lp, g.copy(), G.copy()

    def logp(self, theta) -> float:
        """Unnormalised log-posterior."""
        return self.evaluate(theta)[0]

    def grad(self, theta) -> np.ndarray:
        """Gradient of :meth:`logp`."""
        return self.evaluate(theta)[1]

    def metric(self, theta) -> np.ndarray:
        """``G(theta) = F(theta) + prior precision`` (symmetric, (d, d))."""
        return self.evaluate(theta)[2]

    def __repr__(self):
        return f"<LogPosterior: {self.likelihood!r} + {self.prior!r}>"
