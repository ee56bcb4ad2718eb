"""Gaussian log-likelihood of time-series data, its gradient and Fisher information.

METHOD.md section 8, equation (1.3). One state + sensitivity solve gives all
three::

    log L(theta) = -1/2 sum_{m,l} ((d_ml - y_ml) / sigma_ml)^2 - sum log(sqrt(2 pi) sigma_ml)
    grad         =      sum_{m,l} (d_ml - y_ml) / sigma_ml^2 * J_ml
    F            =      sum_{m,l} J_ml^T sigma_ml^-2 J_ml                       (1.3)

with ``y = h(t, x, p)`` the observables, ``J = dy/dtheta``: ``S_y`` (METHOD.md
section 8) for ``theta = p``, ``S_y diag(p)`` for ``theta = ln p``. Missing data
(NaN) are left out of all three sums.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import PbsensError, SolverError
from ..sensitivity.params import select_params
from ..solvers import check_t_eval, check_time
from .fisher import broadcast_sigma, weighted_gram
from .observables import n_observables, observable_names, output_sensitivities

__all__ = ["GaussianLikelihood", "LIKELIHOOD_METHODS"]

#: Sensitivity methods a likelihood can use: the post-hoc ones of
#: :func:`pbsens.sensitivities` and ``"fs"`` (:func:`pbsens.sensitivity.forward.forward_sensitivities`).
LIKELIHOOD_METHODS = ("pbsr", "exp", "pbs", "exp2", "pbsr2", "fs")
#: State solver of the post-hoc methods when ``solver`` is not given: LSODA, as documented, named here
#: since :func:`pbsens.sensitivities` defaults to Rodas5P (issue #41 changed its default, not this one).
_POSTHOC_SOLVER = "LSODA"

_LOG_MAX = math.log(np.finfo(np.float64).max) - 1.0


def _positive_tol(v, name):
    if v is None:
        return None
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a positive number, got {v!r}") from None
    if a.ndim != 0 or not np.isfinite(a) or a <= 0:
        raise PbsensError(f"{name!r} must be a positive finite number, got {v!r}")
    return float(a)


class GaussianLikelihood:
    """Gaussian measurement model for time-series data of a model's observables.

    The observables are the model's outputs ``y = h(t, x, p)`` (the ``"outputs"``
    of a model file), or its states when it has none. Parameters not in
    ``params`` are held fixed at ``p``. See METHOD.md section 8 and equation (1.3).

    Parameters
    ----------
    model : Model
    t : array_like (K,)
        Measurement times: finite, strictly increasing, ``>= t0``.
    data : array_like (K, ny)
        Observed values, ``ny`` = number of observables; NaN marks a missing value
        (left out of the likelihood). A 1-D array is accepted when ``ny == 1``.
    sigma : float or array_like
        Noise standard deviations: a scalar, one per observable (ny,), or one per
        point (K, ny). Positive and finite (values at missing points are ignored
        but must still be valid).
    params : sequence of str or int, optional
        Parameters to estimate (names or indices), in the order of ``theta``.
        Default: all model parameters.
    p : array_like, optional
        Full parameter vector supplying the fixed parameters (default ``model.p``).
    log : bool
        Work in ``theta = ln p`` (then ``dx/dtheta = S diag(p)``); default True.
    method : {"pbsr", "exp", "pbs", "exp2", "pbsr2", "fs"}
        How sensitivities are computed: a post-hoc method of
        :func:`pbsens.sensitivities` on the state solver's grid, or ``"fs"``, forward
        sensitivities (:func:`pbsens.sensitivity.forward.forward_sensitivities`) for ``params`` only.
    t0 : float
        Initial time of the solve (default 0).
    x0 : array_like, optional
        Initial state (default ``model.initial_state(p)`` for each ``p``).
    solver : str, optional
        Solver name (:data:`pbsens.solvers.SOLVERS`): of the state solve for the post-hoc methods (default
        ``"LSODA"``), of the augmented system for ``"fs"`` (default ``"BDF"``).
    rtol, atol : float, optional
        Solver tolerances (default: those of :func:`pbsens.sensitivities`, 1e-5/1e-6,
        or of ``forward_sensitivities``, 1e-8/1e-10).
    options : dict, optional
        Further keyword arguments for :func:`pbsens.sensitivities` (e.g.
        ``n_factor``) or ``forward_sensitivities`` (e.g. ``jacobian``).

    Attributes
    ----------
    dim : int
        Length of ``theta``.
    param_names, observable_names : list of str
    t, data, sigma : ndarray
        Validated inputs; ``sigma`` broadcast to (K, ny).
    mask : ndarray of bool (K, ny)
        Observed (not missing) points.
    n_solves : int
        Number of state + sensitivity solves so far.

    Notes
    -----
    :meth:`evaluate` returns log-likelihood, gradient and Fisher information from
    one solve and caches them for the last ``theta``, so calling :meth:`loglik`,
    :meth:`grad` and :meth:`fisher` at the same point solves once. Failures of the
    solver at a given ``theta`` (including non-finite parameters from ``exp(theta)``
    and non-finite observables) raise :class:`~pbsens.SolverError`, which samplers
    treat as a rejection.
    """

    def __init__(self, model, t, data, sigma, params=None, p=None, *, log=True, method="pbsr", t0=0.0,
                 x0=None, solver=None, rtol=None, atol=None, options=None):
        self.model = model
        if method not in LIKELIHOOD_METHODS:
            raise PbsensError(f"'method' must be one of {', '.join(LIKELIHOOD_METHODS)}, got {method!r}")
        self.method = method
        self.log = bool(log)
        t0 = check_time(t0, "t0")
        self.t0 = t0
        try:
            t_arr = np.array(t, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PbsensError(f"'t' must be an array of measurement times, got {t!r}") from None
        if t_arr.size and np.all(np.isfinite(t_arr)) and t_arr.min() < t0:
            raise PbsensError(f"'t': measurement times must be >= t0 = {t0}, got {t_arr.min()}")
        te = check_t_eval(t_arr, (t0, math.inf), name="t")
        if te[-1] <= t0:
            raise PbsensError(f"'t': the last measurement time must be after t0 = {t0}, got {te[-1]}")
        self.t = te
        K, ny = te.size, n_observables(model)
        self.observable_names = observable_names(model)
        try:
            d = np.array(data, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError("'data' must be a numeric array (NaN for missing values)") from None
        if d.ndim == 1 and ny == 1:
            d = d[:, None]
        if d.shape != (K, ny):
            raise PbsensError(f"'data' must have shape (len(t), n_observables) = ({K}, {ny}) "
                              f"(observables: {', '.join(self.observable_names)}), got {d.shape}")
        if np.any(np.isinf(d)):
            raise PbsensError("'data' contains inf (use NaN for missing values)")
        self.mask = ~np.isnan(d)
        if not self.mask.any():
            raise PbsensError("'data' has no observed values (all NaN)")
        self.data = d
        self.sigma = broadcast_sigma(sigma, (K, ny), "sigma")
        self._w = np.where(self.mask, 1.0 / self.sigma**2, 0.0)
        self._resid_data = np.where(self.mask, d, 0.0)
        self._log_norm = -float(np.sum(np.log(self.sigma[self.mask]))) \
            - 0.5 * math.log(2.0 * math.pi) * int(self.mask.sum())

        # parameters
        self.index, self.param_names = select_params(model, params, allow_single=False)
        self.p = model.check_p(p)
        self.x0 = None if x0 is None else model.check_x(x0, "x0")
        if solver is not None and not isinstance(solver, str):
            raise PbsensError(f"'solver' must be a solver name (pbsens.solvers.SOLVERS), got {solver!r}")
        self.solver = solver
        self.rtol = _positive_tol(rtol, "rtol")
        self.atol = _positive_tol(atol, "atol")
        if options is not None and not isinstance(options, dict):
            raise PbsensError(f"'options' must be a dict of keyword arguments, got {options!r}")
        self.options = dict(options or {})
        for key in ("t_span", "t_eval", "p", "x0", "method", "params", "trajectory", "solver", "rtol", "atol"):
            if key in self.options:
                raise PbsensError(f"'options': {key!r} is set by the likelihood; pass it as its own argument")
        self.n_solves = 0
        self._cache_theta = None
        self._cache = None

    # ------------------------------------------------------------------ sizes
    @property
    def dim(self) -> int:
        """Number of estimated parameters (length of ``theta``)."""
        return int(self.index.size)

    def __repr__(self):
        return (f"<GaussianLikelihood of {self.model.name!r}: {self.dim} parameters "
                f"({'ln p' if self.log else 'p'}), {self.t.size} times x {self.data.shape[1]} observables, "
                f"{int(self.mask.sum())} observed, method {self.method!r}>")

    # ------------------------------------------------------------ transforms
    def to_theta(self, p_sub=None) -> np.ndarray:
        """``theta`` of the estimated parameters' values ``p_sub`` (default: their values in ``p``)."""
        v = self.p[self.index] if p_sub is None else np.array(p_sub, dtype=np.float64).reshape(-1)
        if v.shape != (self.dim,) or not np.all(np.isfinite(v)):
            raise PbsensError(f"'p_sub' must be {self.dim} finite values, got {p_sub!r}")
        if self.log:
            if np.any(v <= 0):
                raise PbsensError(f"'p_sub': ln p needs positive values, got {v.tolist()}")
            return np.log(v)
        return v.copy()

    def check_theta(self, theta) -> np.ndarray:
        """Validate ``theta`` (length ``dim``, finite)."""
        try:
            th = np.array(theta, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"'theta' must be an array of {self.dim} numbers, got {theta!r}") from None
        if th.ndim == 0 and self.dim == 1:
            th = th.reshape(1)
        if th.shape != (self.dim,):
            raise PbsensError(f"'theta' must have shape ({self.dim},) ({', '.join(self.param_names)}), "
                              f"got {th.shape}")
        if not np.all(np.isfinite(th)):
            raise PbsensError(f"'theta' contains NaN or inf: {th.tolist()}")
        return th

    def full_p(self, theta) -> np.ndarray:
        """The full parameter vector for ``theta`` (fixed parameters from ``p``)."""
        th = self.check_theta(theta)
        p = self.p.copy()
        if self.log:
            if np.any(th > _LOG_MAX):
                raise SolverError(f"'theta': exp(theta) overflows at {th.tolist()}")
            p[self.index] = np.exp(th)
        else:
            p[self.index] = th
        return p

    # ---------------------------------------------------------------- solve
    def solve(self, theta):
        """One state + sensitivity solve: ``(y (K, ny), J (K, ny, dim))``, ``J = dy/dtheta``.

        Raises
        ------
        SolverError
            The solve fails or gives NaN/inf for this ``theta``.
        """
        from ..sensitivity.posthoc import sensitivities  # deferred: keeps import order simple

        p = self.full_p(theta)
        m = self.model
        t_span = (self.t0, float(self.t[-1]))
        kw = dict(self.options)
        if self.rtol is not None:
            kw["rtol"] = self.rtol
        if self.atol is not None:
            kw["atol"] = self.atol
        self.n_solves += 1
        try:
            if self.method == "fs":
                from ..sensitivity.forward import forward_sensitivities
                if self.solver is not None:
                    kw["method"] = self.solver
                r = forward_sensitivities(m, t_span, t_eval=self.t, p=p, x0=self.x0,
                                          params=self.index.tolist(), **kw)
                cols = slice(None)
            else:
                kw["solver"] = _POSTHOC_SOLVER if self.solver is None else self.solver
                kw.setdefault("estimate_error", False)   # costs several marches; opt in via options
                r = sensitivities(m, method=self.method, t_span=t_span, t_eval=self.t, p=p, x0=self.x0, **kw)
                cols = self.index
            y, Sy = output_sensitivities(m, r)
        except SolverError:
            raise
        except PbsensError as exc:
            raise SolverError(f"likelihood evaluation failed at theta = {np.asarray(theta).tolist()}: {exc}") \
                from None
        J = Sy[:, :, cols]
        if self.log:
            J = J * p[self.index]
        if y.shape != self.data.shape:  # pragma: no cover - guards against solver output surprises
            raise SolverError(f"the solve returned observables of shape {y.shape}, expected {self.data.shape}")
        return y, np.ascontiguousarray(J)

    def predict(self, theta) -> np.ndarray:
        """Observables ``y`` (K, ny) at the measurement times for ``theta``."""
        return self.solve(theta)[0]

    # ------------------------------------------------------------ the three
    def evaluate(self, theta):
        """Log-likelihood, gradient and Fisher information from ONE solve.

        Parameters
        ----------
        theta : array_like (dim,)
            ``ln p`` (``log=True``) or ``p`` of the estimated parameters.

        Returns
        -------
        loglik : float
        grad : ndarray (dim,)
            ``sum (d - y) / sigma^2 * J`` over observed points.
        fisher : ndarray (dim, dim)
            ``J^T diag(1/sigma^2) J`` summed over observed points, (1.3).

        Raises
        ------
        PbsensError
            Invalid ``theta``.
        SolverError
            The solve failed at ``theta``.
        """
        th = self.check_theta(theta)
        if self._cache_theta is not None and np.array_equal(th, self._cache_theta):
            ll, g, F = self._cache
            return ll, g.copy(), F.copy()
        y, J = self.solve(th)
        res = np.where(self.mask, self._resid_data - y, 0.0)
        wr = self._w * res
        ll = self._log_norm - 0.5 * float(np.sum(wr * res))
        g = np.einsum("ki,kij->j", wr, J)
        F = weighted_gram(J, self._w)
        if not (math.isfinite(ll) and np.all(np.isfinite(g)) and np.all(np.isfinite(F))):
            raise SolverError(f"likelihood or its derivatives are NaN/inf at theta = {th.tolist()}")
        self._cache_theta = th.copy()
        self._cache = (ll, g, F)
        return ll, g.copy(), F.copy()

    def loglik(self, theta) -> float:
        """Log-likelihood (with the Gaussian normalising constants)."""
        return self.evaluate(theta)[0]

    def grad(self, theta) -> np.ndarray:
        """Gradient of :meth:`loglik` with respect to ``theta``."""
        return self.evaluate(theta)[1]

    def fisher(self, theta) -> np.ndarray:
        """Fisher information (1.3) with respect to ``theta``."""
        return self.evaluate(theta)[2]
