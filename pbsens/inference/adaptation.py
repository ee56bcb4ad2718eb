"""SMMALA's burn-in adaptation: the step size, and the learned metric term.

During burn-in only (the kept iterations are an exact Metropolis-Hastings chain with
a fixed proposal rule):

- :class:`StepSize`: Robbins-Monro adaptation of ``log eps`` toward the target
  acceptance, then ``eps`` fixed at the geometric mean of its values over the second
  half of burn-in (after the last metric update).
- :class:`MetricWindows`: with ``metric="fisher+cov"`` or ``"cov"``, the inverse
  sample covariance of the chain over burn-in windows (``_burn_in_precision``),
  added to the metric or used in its place.

No numba import here.
"""
from __future__ import annotations

import math

import numpy as np


def _burn_in_precision(Z):
    """Inverse of the sample covariance of the burn-in window ``Z`` (n, d), shrunk toward a small
    diagonal as Stan's windowed adaptation does: ``(n / (n + 5)) C + 1e-3 (5 / (n + 5)) I``."""
    n, d = Z.shape
    C = np.atleast_2d(np.cov(Z, rowvar=False)) if n > 1 else np.zeros((d, d))
    C = (n / (n + 5.0)) * C + 1e-3 * (5.0 / (n + 5.0)) * np.eye(d)
    return np.linalg.inv(0.5 * (C + C.T))


class MetricWindows:
    """The factorisation of the proposal's metric, and its burn-in updates.

    ``factor(G) -> (L, jittered)`` (``L`` None: not factorisable) starts as
    ``base_factor``. With ``metric`` ``"fisher+cov"`` or ``"cov"``, the chain's inverse
    covariance ``P`` over burn-in iterations ``[0.15, 0.4) burn_in`` is learned at
    iteration ``0.4 burn_in``, then re-estimated over ``[0.4, 0.75) burn_in`` (sampled
    with the first estimate) at ``0.75 burn_in``: the second window sees the spread the
    Fisher metric alone explores too slowly. ``factor`` becomes ``base_factor(G + P)``
    (``"fisher+cov"``) or the constant Cholesky factor of ``P`` (``"cov"``).
    """

    def __init__(self, metric, base_factor, burn_in):
        self.metric = metric
        self.base_factor = base_factor
        self.factor = base_factor
        #: {iteration of the update: first iteration of its window}
        self.windows = {} if metric == "fisher" else {int(0.4 * burn_in): int(0.15 * burn_in),
                                                      int(0.75 * burn_in): int(0.4 * burn_in)}
        #: the last update's iteration (-1: none)
        self.switch_at = max(self.windows) if self.windows else -1
        #: the learned ``P`` in use (None before the first update); a checkpoint saves it
        self.precision = None

    def use(self, precision):
        """Make ``factor`` use the learned ``precision`` (an update, or a restored checkpoint)."""
        self.precision = precision
        if self.metric == "cov":
            L_fixed = np.linalg.cholesky(precision)
            self.factor = lambda M: (L_fixed, False)
        else:
            base_factor = self.base_factor
            self.factor = lambda M: base_factor(M + precision)

    def update(self, i, chain, G):
        """Learn ``P`` from ``chain[window:i]`` (the update at iteration ``i``, one of
        :attr:`windows`); returns the new factor of the current state's metric ``G``."""
        precision = _burn_in_precision(chain[self.windows[i]:i])
        self.use(precision)
        L_c, _ = self.factor(G)
        if L_c is None:     # (burn-in: this one state may use P alone)
            L_c = np.linalg.cholesky(precision)
        return L_c


class StepSize:
    """The step size ``eps`` of each iteration, adapted during burn-in.

    With ``adapt``: Robbins-Monro steps of ``log eps`` toward ``target_accept`` (gain
    ``(i + 10)^-0.6``, ``i`` counted from the last metric update, :meth:`restart`),
    ``eps`` kept in ``[1e-8, 1e3]``; after burn-in ``eps`` is the geometric mean of its
    values over the second half of burn-in after the last metric update
    (``switch_at``). Without adaptation or burn-in: ``step_size`` throughout.
    """

    def __init__(self, step_size, burn_in, adapt, target_accept, switch_at=-1):
        self.initial = step_size
        self.burn_in = burn_in
        self.adapt = adapt
        self.target_accept = target_accept
        self.switch_at = switch_at
        self.log_eps = math.log(step_size)
        #: ``eps`` at each burn-in iteration
        self.trace = np.empty(burn_in)
        self.after = step_size
        self.i_adapt = 0

    def restart(self):
        """Restart the gain sequence (after a metric update)."""
        self.i_adapt = 0

    def at(self, i):
        """``eps`` of iteration ``i`` (called once per iteration, in order)."""
        if i < self.burn_in:
            eps = math.exp(self.log_eps)
            self.trace[i] = eps
            return eps
        if i == self.burn_in and self.burn_in > 0 and self.adapt:
            s = self.switch_at
            tail = self.burn_in // 2 if s < 0 else s + (self.burn_in - s) // 2
            self.after = float(np.exp(np.mean(np.log(self.trace[tail:]))))
        return self.after

    def update(self, i, alpha):
        """Adapt after iteration ``i`` whose acceptance probability was ``alpha``."""
        if i < self.burn_in and self.adapt:
            self.log_eps += (alpha - self.target_accept) / (self.i_adapt + 10.0) ** 0.6
            self.i_adapt += 1
            self.log_eps = min(max(self.log_eps, math.log(1e-8)), math.log(1e3))

    @property
    def final(self):
        """``eps`` after burn-in."""
        return self.initial if self.burn_in == 0 or not self.adapt else self.after
