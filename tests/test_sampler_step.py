"""The per-step pieces of SMMALA in unbounded coordinates, against analytic formulas.

``BoundedTransform.pieces`` (theta(z), log-Jacobian with its gradient and curvature,
and dtheta/dz from one pass) against the logistic / exponential maps written out with
scipy's ``expit``, including large |z| where a half-bounded map overflows; and the
unbounded posterior's metric with a ridge against ``J G J + diag(curv + ridge)``.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from pbsens.inference.transform import BoundedTransform, UnboundedPosterior

LO = np.array([1.0, -0.5, 0.3, -np.inf, -np.inf])
HI = np.array([3.0, 2.0, np.inf, 1.5, np.inf])


def _reference(z):
    """theta, log J, d log J / dz, -d2 log J / dz2, dtheta/dz by hand for LO, HI above."""
    th = np.empty(5)
    J = np.empty(5)
    for i in (0, 1):
        w = HI[i] - LO[i]
        s, c = expit(z[i]), expit(-z[i])        # c = 1 - s without cancellation
        th[i], J[i] = LO[i] + w * s, w * s * c
    th[2], J[2] = LO[2] + np.exp(z[2]), np.exp(z[2])
    th[3], J[3] = HI[3] - np.exp(z[3]), -np.exp(z[3])
    th[4], J[4] = z[4], 1.0
    s01, c01 = expit(z[:2]), expit(-z[:2])
    logj = float(np.sum(np.log(np.abs(J[:2]))) + z[2] + z[3])
    grad = np.array([c01[0] - s01[0], c01[1] - s01[1], 1.0, 1.0, 0.0])
    curv = np.array([2 * s01[0] * c01[0], 2 * s01[1] * c01[1], 0.0, 0.0, 0.0])
    return th, logj, grad, curv, J


@pytest.mark.parametrize("z", [np.array([-1.3, 0.7, 0.4, -0.2, 2.5]), np.array([12.0, -15.0, -3.0, 2.0, -7.0])])
def test_pieces_against_the_maps_written_out(z):
    th, (logj, grad, curv), J = BoundedTransform(LO, HI).pieces(z)
    r_th, r_logj, r_grad, r_curv, r_J = _reference(z)
    np.testing.assert_allclose(th, r_th, rtol=1e-14, atol=1e-15)
    assert logj == pytest.approx(r_logj, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grad, r_grad, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(curv, r_curv, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(J, r_J, rtol=1e-12, atol=1e-300)


def test_pieces_overflowing_half_bounded_map_is_clipped_not_nan():
    z = np.array([0.0, 0.0, 800.0, 800.0, 0.0])
    th, (logj, grad, curv), J = BoundedTransform(LO, HI).pieces(z)
    assert th[2] == np.inf and th[3] == -np.inf      # the support's own ends, no NaN
    assert not np.any(np.isnan(th)) and not np.any(np.isnan(grad))


class _Quadratic:
    dim = 5

    def __init__(self):
        A = np.random.default_rng(7).standard_normal((5, 5))
        self.P = A @ A.T + np.eye(5)

    def evaluate(self, th):
        r = np.where(np.isfinite(th), th, 0.0) - 0.3
        return -0.5 * float(r @ self.P @ r), -self.P @ r, self.P.copy()


def test_unbounded_metric_with_ridge_against_definition():
    post = UnboundedPosterior(_Quadratic(), LO, HI, ridge=0.25)
    z = np.array([0.2, -0.9, 0.5, 0.1, 1.0])
    lp, g, G = post.evaluate(z)
    th, logj, grad, curv, J = _reference(z)
    P = _Quadratic().P
    np.testing.assert_allclose(G, J[:, None] * P * J[None, :] + np.diag(curv + 0.25), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g, J * (-P @ (th - 0.3)) + grad, rtol=1e-12, atol=1e-13)
    r = th - 0.3
    assert lp == pytest.approx(-0.5 * float(r @ P @ r) + logj, rel=1e-12)
