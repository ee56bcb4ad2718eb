"""Objective priors of PEtab v1 (``objectivePriorType``, ``objectivePriorParameters``).

Each estimated parameter ``theta_i`` (on its ``parameterScale``; ``p_i`` the value on
the linear scale) has one prior:

=========================  ==========================================================
type                        log-density (parameters ``a;b`` of the table)
=========================  ==========================================================
uniform                     ``-ln(b - a)`` for ``a <= p <= b``
normal                      ``N(p; a, b^2)``
laplace                     ``-ln(2 b) - |p - a| / b``
logNormal                   ``N(ln p; a, b^2) - ln p`` (density of ``p``)
logLaplace                  ``-ln(2 b p) - |ln p - a| / b``
parameterScaleUniform       ``-ln(b - a)`` for ``a <= theta <= b``
parameterScaleNormal        ``N(theta; a, b^2)``
parameterScaleLaplace       ``-ln(2 b) - |theta - a| / b``
(none)                      ``0`` (flat on ``theta``)
=========================  ==========================================================

The bounds (``lowerBound``, ``upperBound`` mapped to the parameter scale) are the
support of every prior: outside them the log-prior is ``-inf``. Priors on the
linear value are densities of ``p``, evaluated at ``p(theta)``, as PEtab defines
them (the objective adds them as they are; no Jacobian ``dp/dtheta`` is added).
The gradient is with respect to ``theta``. :meth:`Priors.precision` is the
expected curvature used in the SMMALA metric: ``(dp/dtheta)^2 / b^2`` for normal,
``(d ln p / dtheta)^2 / b^2`` for logNormal, ``1/b^2`` for parameterScaleNormal,
and 0 for the others (their curvature is zero or not defined).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import PbsensError

__all__ = ["Priors", "PRIOR_TYPES", "unscale", "dunscale"]

PRIOR_TYPES = ("uniform", "normal", "laplace", "logNormal", "logLaplace",
               "parameterScaleUniform", "parameterScaleNormal", "parameterScaleLaplace")

SCALES = ("lin", "log", "log10")
_LN10 = math.log(10.0)


def unscale(theta, scales):
    """Linear values ``p`` of ``theta`` on ``scales`` (array of 0=lin, 1=log, 2=log10)."""
    theta = np.asarray(theta, dtype=np.float64)
    with np.errstate(over="ignore"):     # the branch not taken (a linear 1e5 is no log10 exponent)
        return np.where(scales == 0, theta, np.where(scales == 1, np.exp(theta), np.power(10.0, theta)))


def dunscale(theta, scales):
    """``dp/dtheta`` element-wise."""
    p = unscale(theta, scales)
    return np.where(scales == 0, 1.0, np.where(scales == 1, p, p * _LN10))


def scale(p, scales):
    """``theta`` for linear values ``p``."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scales == 0, p, np.where(scales == 1, np.log(p), np.log10(p)))


class Priors:
    """Independent priors of the estimated parameters (one per ``theta_i``).

    Parameters
    ----------
    types : list of str or None
        One of :data:`PRIOR_TYPES` per parameter, or ``None`` (flat).
    params : list of (float, float) or None
    scales : ndarray of int
        0 lin, 1 log, 2 log10 per parameter.
    lower, upper : ndarray
        Bounds on the parameter scale.
    names : list of str
    """

    def __init__(self, types, params, scales, lower, upper, names):
        self.types = list(types)
        self.params = [tuple(map(float, pp)) if pp is not None else None for pp in params]
        self.scales = np.asarray(scales, dtype=np.int64)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.names = list(names)
        for nm, t, pp in zip(self.names, self.types, self.params):
            if t is None:
                continue
            if t not in PRIOR_TYPES:
                raise PbsensError(f"parameter {nm!r}: objectivePriorType {t!r} is not one of "
                                  f"{', '.join(PRIOR_TYPES)}")
            if pp is None or len(pp) != 2 or not all(math.isfinite(v) for v in pp):
                raise PbsensError(f"parameter {nm!r}: objectivePriorParameters must be two numbers "
                                  f"'a;b' for a {t} prior, got {pp!r}")
            if t.endswith("niform") and not pp[1] > pp[0]:
                raise PbsensError(f"parameter {nm!r}: uniform prior needs a < b, got {pp!r}")
            if not t.endswith("niform") and not pp[1] > 0:
                raise PbsensError(f"parameter {nm!r}: the {t} prior's scale (second value) must be "
                                  f"positive, got {pp[1]!r}")

    @property
    def dim(self) -> int:
        return len(self.types)

    def _check(self, theta):
        th = np.asarray(theta, dtype=np.float64).reshape(-1)
        if th.size != self.dim:
            raise PbsensError(f"'theta' must have {self.dim} entries (the estimated parameters), got {th.size}")
        return th

    def support(self):
        """``(lower, upper)`` on the parameter scale: :func:`support` of these priors."""
        return support(self)

    def in_support(self, theta) -> bool:
        th = self._check(theta)
        return bool(np.all(th >= self.lower) and np.all(th <= self.upper))

    def logpdf_and_grad(self, theta):
        """``(log prior, d log prior / d theta)``; ``(-inf, zeros)`` outside the bounds."""
        th = self._check(theta)
        g = np.zeros(self.dim)
        if not self.in_support(th):
            return -math.inf, g
        p = unscale(th, self.scales)
        dp = dunscale(th, self.scales)
        total = 0.0
        for i, (t, pp) in enumerate(zip(self.types, self.params)):
            if t is None:
                continue
            a, b = pp
            ps = t.startswith("parameterScale")
            v, dv = (th[i], 1.0) if ps else (p[i], dp[i])
            if t in ("uniform", "parameterScaleUniform"):
                if not a <= v <= b:
                    return -math.inf, np.zeros(self.dim)
                total += -math.log(b - a)
            elif t in ("normal", "parameterScaleNormal"):
                total += -0.5 * math.log(2 * math.pi * b * b) - 0.5 * ((v - a) / b) ** 2
                g[i] += -(v - a) / (b * b) * dv
            elif t in ("laplace", "parameterScaleLaplace"):
                total += -math.log(2 * b) - abs(v - a) / b
                g[i] += -math.copysign(1.0, v - a) / b * dv if v != a else 0.0
            else:  # logNormal, logLaplace: densities of p > 0
                if v <= 0:
                    return -math.inf, np.zeros(self.dim)
                lv, dlv = math.log(v), dv / v
                if t == "logNormal":
                    total += -0.5 * math.log(2 * math.pi * b * b) - 0.5 * ((lv - a) / b) ** 2 - lv
                    g[i] += (-(lv - a) / (b * b) - 1.0) * dlv
                else:
                    total += -math.log(2 * b) - lv - abs(lv - a) / b
                    g[i] += (-1.0 - (math.copysign(1.0, lv - a) / b if lv != a else 0.0)) * dlv
        return total, g

    def logpdf(self, theta) -> float:
        return self.logpdf_and_grad(theta)[0]

    def grad(self, theta) -> np.ndarray:
        return self.logpdf_and_grad(theta)[1]

    def precision(self, theta) -> np.ndarray:
        """Diagonal prior curvature for the SMMALA metric (see the module docstring)."""
        th = self._check(theta)
        p = unscale(th, self.scales)
        dp = dunscale(th, self.scales)
        d = np.zeros(self.dim)
        for i, (t, pp) in enumerate(zip(self.types, self.params)):
            if t == "parameterScaleNormal":
                d[i] = 1.0 / pp[1] ** 2
            elif t == "normal":
                d[i] = dp[i] ** 2 / pp[1] ** 2
            elif t == "logNormal" and p[i] > 0:
                d[i] = (dp[i] / p[i]) ** 2 / pp[1] ** 2
        return np.diag(d)

    def __repr__(self):
        n = sum(t is not None for t in self.types)
        return f"<Priors: {self.dim} parameters, {n} with a prior>"


def support(priors):
    """``(lower, upper)`` on the parameter scale: the bounds, narrowed by a uniform prior's interval."""
    lo, hi = np.array(priors.lower, float), np.array(priors.upper, float)
    for i, (t, pp) in enumerate(zip(priors.types, priors.params)):
        if t == "parameterScaleUniform":
            a, b = pp
        elif t == "uniform":
            with np.errstate(all="ignore"):
                a, b = (float(v) for v in scale(np.array(pp), np.full(2, priors.scales[i])))
            if not np.isfinite(a):
                a = -np.inf
        else:
            continue
        lo[i], hi[i] = max(lo[i], a), min(hi[i], b)
    return lo, hi
