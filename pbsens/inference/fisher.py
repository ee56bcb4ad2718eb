"""Fisher information of Gaussian measurements, equation (1.3) (METHOD.md section 8)."""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError
from .observables import check_result

__all__ = ["fisher_information", "broadcast_sigma", "weighted_gram"]


def broadcast_sigma(sigma, shape, name="sigma", what="observables"):
    """Standard deviations as a (K, n) array: from a scalar, (n,) per column or (K, n).

    Raises :class:`PbsensError` naming ``name`` for wrong shapes, NaN/inf or values <= 0.
    """
    K, n = shape
    try:
        s = np.array(sigma, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a number or an array of numbers, got {sigma!r}") from None
    if s.ndim == 0:
        s = np.full((K, n), float(s))
    elif s.ndim == 1 and s.shape[0] == n:
        s = np.broadcast_to(s, (K, n)).copy()
    elif s.shape != (K, n):
        raise PbsensError(f"{name!r} must be a scalar, one value per {what[:-1]} ({n},) or one per "
                          f"point ({K}, {n}); got shape {s.shape}")
    if np.any(np.isnan(s)):
        raise PbsensError(f"{name!r} contains NaN (use NaN in the data, not in {name!r}, for missing values)")
    if not np.all(np.isfinite(s)):
        raise PbsensError(f"{name!r} contains inf")
    if np.any(s <= 0):
        raise PbsensError(f"{name!r} must be positive, got a minimum of {s.min()!r}")
    return s


def weighted_gram(J, w):
    """``sum_k J_k^T diag(w_k) J_k`` for ``J`` (K, n, d) and weights ``w`` (K, n); symmetric."""
    F = np.einsum("kij,ki,kil->jl", J, w, J, optimize=True)
    return 0.5 * (F + F.T)


def fisher_information(r, sigma):
    """Fisher information matrix of Gaussian state measurements, (1.3).

    ``F_ij = sum_{m,l} S_m^i(t_l) sigma_ml^-2 S_m^j(t_l)``: every state ``m`` is
    measured at every time ``t_l`` of the result with independent Gaussian noise of
    standard deviation ``sigma_ml`` (METHOD.md section 8). For observables other than
    the states use :func:`pbsens.inference.output_sensitivities` and
    :class:`pbsens.inference.GaussianLikelihood`.

    Parameters
    ----------
    r : SensitivityResult
        Sensitivities ``r.S`` (K, nx, np) at the measurement times ``r.t``.
    sigma : float or array_like
        Standard deviations: a scalar, one per state (nx,), or one per time and
        state (K, nx). Positive and finite.

    Returns
    -------
    ndarray (np, np)
        Symmetric positive semi-definite ``F`` for the parameters of ``r.S``'s columns.

    Raises
    ------
    PbsensError
        ``r`` is not a sensitivity result or contains NaN/inf; ``sigma`` has a wrong
        shape, NaN/inf or a value <= 0.
    """
    _, x, S = check_result(r)
    s = broadcast_sigma(sigma, x.shape, "sigma", "states")
    return weighted_gram(S, 1.0 / s**2)
