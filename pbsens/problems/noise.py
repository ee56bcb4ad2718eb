"""Measurement models of PEtab v1: noise distributions and observable transformations.

For one measurement ``m`` with simulated observable ``y`` and noise parameter ``sigma``
(both from the model's outputs), the transformation ``T`` (``lin``: ``T(v) = v``;
``log``: ``ln v``; ``log10``: ``log10 v``) gives the residual
``r = (T(m) - T(y)) / sigma`` and

* ``normal``:  ``llh = -1/2 ln(2 pi sigma^2) - r^2 / 2 - ln J(m)``
* ``laplace``: ``llh = -ln(2 sigma) - |r| - ln J(m)``

with ``J(m) = 1, m, m ln 10`` for lin, log, log10 (the density of ``m`` itself,
as PEtab's reference implementation ``petab.v1.calculate_llh`` writes it).
``chi2 = r^2`` for both distributions.

:func:`terms` returns, per row, ``llh``, ``chi2``, the derivatives ``dllh/dy`` and
``dllh/dsigma`` and the Fisher-information weights ``w_y``, ``w_sigma``: the
expected information of one measurement about ``(y, sigma)`` is
``diag(w_y, w_sigma)`` (the cross term vanishes for both symmetric distributions):

* normal: ``w_y = (T'(y) / sigma)^2``, ``w_sigma = 2 / sigma^2``;
* laplace: ``w_y = (T'(y) / sigma)^2``, ``w_sigma = 1 / sigma^2``.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["TRANSFORMATIONS", "DISTRIBUTIONS", "terms", "transform", "MeasurementModel"]

#: observableTransformation codes
TRANSFORMATIONS = {"lin": 0, "log": 1, "log10": 2}
#: noiseDistribution codes
DISTRIBUTIONS = {"normal": 0, "laplace": 1}

_LN10 = math.log(10.0)


def transform(v, trafo):
    """``T(v)`` row-wise for transformation codes ``trafo`` (see :data:`TRANSFORMATIONS`)."""
    v = np.asarray(v, dtype=np.float64)
    out = v.copy()
    pos = trafo != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out[pos] = np.log(v[pos])
        out[trafo == 2] /= _LN10
    return out


def terms(m, y, sigma, trafo, dist):
    """Per-row ``(llh, chi2, dllh_dy, dllh_dsigma, w_y, w_sigma)``.

    ``m``, ``y``, ``sigma``: measurements, simulations (linear scale), noise
    parameters; ``trafo``, ``dist``: integer codes per row. The caller checks
    ``sigma > 0`` and ``y > 0`` where a log transformation applies.
    """
    return MeasurementModel(m, trafo, dist).terms(y, sigma)[:6]


class MeasurementModel:
    """The measurement-only parts of :func:`terms` for fixed rows, computed once.

    ``terms(y, sigma)`` then returns ``(llh, chi2, dllh_dy, dllh_dsigma, w_y,
    w_sigma, residual)`` per row, with ``residual = (T(m) - T(y)) / sigma``.
    """

    def __init__(self, m, trafo, dist):
        m = np.asarray(m, dtype=np.float64)
        self.trafo = np.asarray(trafo)
        self.Tm = transform(m, self.trafo)
        self.logjac = np.zeros_like(m)
        self.log_rows = np.flatnonzero(self.trafo != 0)
        self.log10_rows = np.flatnonzero(self.trafo == 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.logjac[self.trafo == 1] = np.log(m[self.trafo == 1])
            self.logjac[self.log10_rows] = np.log(m[self.log10_rows] * _LN10)
        self.normal = np.asarray(dist) == 0
        self.all_normal = bool(np.all(self.normal))
        self.w_sigma_num = np.where(self.normal, 2.0, 1.0)

    def terms(self, y, sigma):
        y = np.asarray(y, dtype=np.float64)
        s = np.asarray(sigma, dtype=np.float64)
        Ty = y.copy()
        dT = np.ones_like(y)
        if self.log_rows.size:
            lr = self.log_rows
            Ty[lr] = np.log(y[lr])
            dT[lr] = 1.0 / y[lr]
            Ty[self.log10_rows] /= _LN10
            dT[self.log10_rows] /= _LN10
        d = self.Tm - Ty
        r = d / s
        rr = r * r
        if self.all_normal:
            llh = -0.5 * np.log(2.0 * np.pi * s * s) - 0.5 * rr - self.logjac
            dllh_dy = r / s * dT
            dllh_ds = (rr - 1.0) / s
        else:
            normal = self.normal
            llh = np.where(normal, -0.5 * np.log(2.0 * np.pi * s * s) - 0.5 * rr,
                           -np.log(2.0 * s) - np.abs(r)) - self.logjac
            # d llh / d T(y): normal r/s, laplace sign(d)/s
            dllh_dy = np.where(normal, r / s, np.sign(d) / s) * dT
            dllh_ds = np.where(normal, (rr - 1.0) / s, (np.abs(r) - 1.0) / s)
        w_y = (dT / s) ** 2
        w_s = self.w_sigma_num / (s * s)
        return llh, rr, dllh_dy, dllh_ds, w_y, w_s, r
