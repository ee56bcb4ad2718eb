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

__all__ = ["TRANSFORMATIONS", "DISTRIBUTIONS", "terms", "transform"]

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
    m = np.asarray(m, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(sigma, dtype=np.float64)
    Tm, Ty = transform(m, trafo), transform(y, trafo)
    dT = np.ones_like(y)
    dT[trafo == 1] = 1.0 / y[trafo == 1]
    dT[trafo == 2] = 1.0 / (y[trafo == 2] * _LN10)
    logjac = np.zeros_like(m)
    logjac[trafo == 1] = np.log(m[trafo == 1])
    logjac[trafo == 2] = np.log(m[trafo == 2] * _LN10)
    d = Tm - Ty
    r = d / s
    normal = dist == 0
    llh = np.where(normal, -0.5 * np.log(2.0 * np.pi * s * s) - 0.5 * r * r,
                   -np.log(2.0 * s) - np.abs(r)) - logjac
    chi2 = r * r
    # d llh / d T(y): normal r/s, laplace sign(d)/s
    dT_ll = np.where(normal, r / s, np.sign(d) / s)
    dllh_dy = dT_ll * dT
    dllh_ds = np.where(normal, (r * r - 1.0) / s, (np.abs(r) - 1.0) / s)
    w_y = (dT / s) ** 2
    w_s = np.where(normal, 2.0, 1.0) / (s * s)
    return llh, chi2, dllh_dy, dllh_ds, w_y, w_s
