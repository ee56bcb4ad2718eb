"""The objective an optimiser minimises: ``-(llh + log prior)`` of a PEtab problem, its gradient,
the Fisher information as its Hessian, and the weighted residuals with their Jacobian.

One :meth:`Problem.evaluate <pbsens.problems.Problem.evaluate>` per point, shared by the value,
the gradient, the Hessian and the residuals (optimisers that ask for them separately, such as
scipy's, pay once). A failed simulation (:class:`~pbsens.errors.SolverError`) is a failed
evaluation: the value is ``inf`` and the optimiser steps back (fides and the scipy optimisers
here shrink their step on a non-finite value), never an aborted start.

Least squares (:func:`residuals`). For rows with a normal noise model
``-llh = 1/2 sum r_i^2 + sum ln sigma_i + const``; when a ``sigma`` depends on estimated
parameters, the second sum is written as squares too, AMICI's way: one more residual per
such row, ``rs_i = sqrt(2 ln sigma_i + C)``, with ``C`` large enough to keep the root real, so
that ``1/2 (|r|^2 + |rs|^2) = -llh + const`` and a least-squares optimiser minimises the
same function as the others. Laplace rows have no least-squares form (a clear error).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import PbsensError, SolverError

__all__ = ["SIGMA_OFFSET", "FitError", "Objective"]

#: ``C`` of the sigma residuals ``sqrt(2 ln sigma + C)`` (AMICI's default minimum sigma residual is 50)
SIGMA_OFFSET = 50.0


class FitError(PbsensError):
    """A fit was asked for something the problem or the optimiser cannot do."""


class Objective:
    """``-(llh + log prior)`` of ``problem`` and its derivatives, for minimisers.

    Parameters
    ----------
    problem : Problem
    method : str
        Sensitivity method of :meth:`Problem.evaluate` (``"exp2"``, ``"fs"``, ...).
    solver_options : dict
        Passed to :meth:`Problem.evaluate`.

    Attributes
    ----------
    n_eval, n_grad : int
        Evaluations without and with sensitivities.
    n_failed : int
        Evaluations whose simulation failed (value ``inf``).
    cpu : float
        CPU seconds spent in evaluations (``time.process_time``).
    """

    def __init__(self, problem, method="exp2", solver_options=None):
        self.problem = problem
        self.method = method
        self.solver_options = dict(solver_options or {})
        self.n_eval = self.n_grad = self.n_failed = 0
        self.cpu = 0.0
        self._last = None                 # (theta bytes, sensitivities, EvaluationResult or None)
        self._flat_prior = all(t in (None, "uniform", "parameterScaleUniform") for t in problem.priors.types)
        self._sigma_rows = None

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, theta, sensitivities=True):
        """The :class:`EvaluationResult` at ``theta`` (``None`` when the simulation failed)."""
        th = np.asarray(theta, dtype=np.float64)
        key = th.tobytes()
        last = self._last
        if last is not None and last[0] == key and (last[1] or not sensitivities):
            return last[2]
        t0 = time.process_time()
        try:
            r = self.problem.evaluate(th, sensitivities=sensitivities, method=self.method, **self.solver_options)
            if not math.isfinite(r.llh) or (sensitivities and not self._finite_derivatives(r)):
                r = None
        except SolverError:
            r = None
        self.cpu += time.process_time() - t0
        if sensitivities:
            self.n_grad += 1
        else:
            self.n_eval += 1
        if r is None:
            self.n_failed += 1
        self._last = (key, sensitivities, r)
        return r

    def _finite_derivatives(self, r):
        """Whether the gradient and, where the method computes it, the Fisher information are finite:
        an overflow in ``S`` far from the data (``dy/dtheta`` ~ 1e200, squared) is a failed evaluation the
        optimiser steps back from, not a non-finite Hessian that ends the start."""
        if not np.all(np.isfinite(r.gradient)):
            return False
        return not r.computed("fim") or bool(np.all(np.isfinite(r.fim)))

    def _prior(self, th):
        """``(log prior, gradient, precision)``; zeros for flat priors within the bounds."""
        if self._flat_prior:
            return 0.0, 0.0, 0.0
        lp, g = self.problem.priors.logpdf_and_grad(th)
        return lp, g, self.problem.priors.precision(th)

    def value(self, theta):
        """``-(llh + log prior)``; ``inf`` where the simulation fails."""
        r = self.evaluate(theta, sensitivities=self._last_had_sensitivities(theta))
        if r is None:
            return math.inf
        return -(r.llh + self._prior(r.theta)[0])

    def _last_had_sensitivities(self, theta):
        last = self._last
        return bool(last is not None and last[1] and last[0] == np.asarray(theta, dtype=np.float64).tobytes())

    def fun_grad(self, theta):
        """``(value, gradient)``; ``(inf, nan)`` where the simulation fails."""
        r = self.evaluate(theta)
        if r is None:
            return math.inf, np.full(len(theta), np.nan)
        lp, g, _ = self._prior(r.theta)
        return -(r.llh + lp), -(r.gradient + g)

    def fun_grad_hess(self, theta):
        """``(value, gradient, Hessian)`` with the Fisher information (plus the prior's precision) as
        the Hessian; ``(inf, nan, nan)`` where the simulation fails."""
        r = self.evaluate(theta)
        d = len(theta)
        if r is None:
            return math.inf, np.full(d, np.nan), np.full((d, d), np.nan)
        lp, g, prec = self._prior(r.theta)
        return -(r.llh + lp), -(r.gradient + g), r.fim + prec

    # ------------------------------------------------------------------ least squares
    def check_least_squares_form(self):
        """A :class:`FitError` unless ``-log posterior`` is a sum of squares (flat priors, normal noise)."""
        if not self._flat_prior:
            raise FitError("least squares needs flat (uniform) priors: the problem has "
                           f"{sorted(set(self.problem.priors.types))}; use optimizer='fides' or 'L-BFGS-B'")
        dist = np.asarray(self.problem._rows["dist"])
        if np.any(dist != 0):
            raise FitError("least squares needs normal noise on every measurement: the measurement model has "
                           f"{int(np.sum(dist != 0))} Laplace rows (observable table, noiseDistribution); "
                           "use optimizer='fides' or 'L-BFGS-B'")

    def _check_least_squares(self, r):
        if self._sigma_rows is not None:
            return
        self.check_least_squares_form()
        # rows whose sigma moves with theta (a noise parameter estimated): a sigma residual each
        self._sigma_rows = np.flatnonzero(np.any(r.sigma_jacobian != 0, axis=1))

    def residuals(self, theta):
        """``(res, Jacobian)``: the weighted residuals ``(T(m) - T(y)) / sigma``, then a sigma residual
        ``sqrt(2 ln sigma + C)`` per row whose sigma is estimated; ``1/2 |res|^2 = -llh + const``.
        ``(inf..., nan)`` where the simulation fails."""
        r = self.evaluate(theta)
        if r is None:
            n = self._n_res()
            return np.full(n, np.inf), np.full((n, len(theta)), np.nan)
        self._check_least_squares(r)
        rows = self._sigma_rows
        if rows.size == 0:
            return r.residuals, r.residual_jacobian
        s = r.sigmas[rows]
        arg = 2.0 * np.log(s) + SIGMA_OFFSET
        if np.any(arg <= 0):
            raise FitError(f"a noise parameter sigma = {s[arg <= 0].min():.3g} is below exp(-{SIGMA_OFFSET / 2:g}): "
                           "the sigma residuals of least squares are not defined; use optimizer='fides'")
        rs = np.sqrt(arg)
        # d rs / d theta = (1 / (rs sigma)) d sigma / d theta;  d r / d theta's sigma part is -(r / sigma) dsigma
        dsig = r.sigma_jacobian[rows]
        return np.concatenate([r.residuals, rs]), np.vstack([r.residual_jacobian, dsig / (rs * s)[:, None]])

    def _n_res(self):
        base = np.asarray(self.problem._rows["measurement"]).size
        return base + (0 if self._sigma_rows is None else self._sigma_rows.size)
