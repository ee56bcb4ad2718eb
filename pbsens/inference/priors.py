"""Priors for the sampled parameters ``theta`` (METHOD.md section 8)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import PbsensError

__all__ = ["NormalPrior"]


class NormalPrior:
    """Independent normal prior ``theta_i ~ N(mean_i, sd_i^2)``.

    With ``theta = ln p`` (the default of :class:`GaussianLikelihood`) this is a
    log-normal prior on ``p``; its precision ``diag(1/sd^2)`` is added to the Fisher
    information to form the SMMALA metric (METHOD.md section 8).

    Parameters
    ----------
    mean : array_like (d,)
        Prior means, e.g. ``np.log(p_nominal)``.
    sd : float or array_like (d,)
        Prior standard deviations, positive.
    """

    def __init__(self, mean, sd):
        try:
            m = np.array(mean, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PbsensError(f"'mean' must be an array of numbers, got {mean!r}") from None
        if m.size == 0 or not np.all(np.isfinite(m)):
            raise PbsensError(f"'mean' must be non-empty and finite, got {mean!r}")
        try:
            s = np.array(sd, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"'sd' must be a number or an array of numbers, got {sd!r}") from None
        if s.ndim == 0:
            s = np.full(m.size, float(s))
        if s.shape != m.shape:
            raise PbsensError(f"'sd' must be a scalar or have shape {m.shape} like 'mean', got {s.shape}")
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise PbsensError(f"'sd' must be positive and finite, got {s.tolist()}")
        self.mean = m
        self.sd = s
        self._prec = 1.0 / s**2
        self._norm = -float(np.sum(np.log(s))) - 0.5 * m.size * math.log(2.0 * math.pi)

    @property
    def dim(self) -> int:
        return int(self.mean.size)

    def _check(self, theta):
        th = np.asarray(theta, dtype=np.float64).reshape(-1)
        if th.shape != self.mean.shape:
            raise PbsensError(f"'theta' must have shape {self.mean.shape}, got {np.shape(theta)}")
        return th

    def logpdf(self, theta) -> float:
        """``log N(theta; mean, diag(sd^2))``."""
        d = self._check(theta) - self.mean
        return self._norm - 0.5 * float(np.sum(self._prec * d * d))

    def grad(self, theta) -> np.ndarray:
        """``-(theta - mean) / sd^2``."""
        return -self._prec * (self._check(theta) - self.mean)

    def precision(self, theta=None) -> np.ndarray:
        """``diag(1/sd^2)`` (minus the Hessian of :meth:`logpdf`), (d, d)."""
        return np.diag(self._prec)

    def sample(self, rng=None, size=None) -> np.ndarray:
        """Draws from the prior (``size`` draws of shape (d,))."""
        rng = np.random.default_rng(rng)
        shape = (self.dim,) if size is None else (int(size), self.dim)
        return self.mean + self.sd * rng.standard_normal(shape)

    def __repr__(self):
        return f"<NormalPrior: {self.dim} dimensions>"
