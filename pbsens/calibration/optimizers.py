"""Local optimisers of one start: fides (trust region, Fisher information as Hessian), scipy's
``least_squares`` (trust-region reflective on the weighted residuals and their Jacobian from
``S``) and scipy's L-BFGS-B.

Each runner takes an :class:`~pbsens.calibration.objective.Objective`, the start point and the
bounds (on the parameter scale) and returns a dict: ``x``, ``fval``, ``n_iter``, ``status``
(an integer, positive when the optimiser reports convergence) and ``message``. The objective
counts evaluations and CPU time itself.

Default tolerances are fides's own (``fatol = frtol = 1e-8``, ``gatol = 1e-6``, at most 1000
iterations), the settings pyPESTO passes to fides by default; the scipy optimisers get the
equivalents (``ftol = 1e-8``, ``gtol = 1e-6``).
"""
from __future__ import annotations

import logging
import math

import numpy as np

from .objective import FitError

__all__ = ["DEFAULT_OPTIMIZER", "OPTIMIZERS", "default_options", "run_optimizer"]

#: optimiser name -> what it uses of the objective
OPTIMIZERS = {
    "fides": "value, gradient, Fisher information as Hessian (trust region, interior reflective)",
    "least_squares": "weighted residuals and their Jacobian (scipy trust-region reflective)",
    "L-BFGS-B": "value and gradient (scipy, quasi-Newton)",
}

#: the default optimiser (docs/PERFORMANCE.md, "Time to a converged fit": converged starts per CPU minute)
DEFAULT_OPTIMIZER = "fides"


def default_options(optimizer):
    """The tolerances used when ``options`` does not say (see the module docstring)."""
    if optimizer == "fides":
        return {"maxiter": 1000, "fatol": 1e-8, "frtol": 1e-8, "gatol": 1e-6}
    if optimizer == "least_squares":
        return {"max_nfev": 1000, "ftol": 1e-8, "xtol": 1e-10, "gtol": 1e-8}
    return {"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-6}


def _check_optimizer(optimizer):
    if optimizer not in OPTIMIZERS:
        raise FitError(f"'optimizer' must be one of {', '.join(map(repr, OPTIMIZERS))}, got {optimizer!r}")
    if optimizer == "fides":
        try:
            import fides  # noqa: F401
        except ImportError:
            raise FitError("optimizer='fides' needs the fides package: pip install 'pbsens[fit]' "
                           "(or optimizer='least_squares' / 'L-BFGS-B', which need only scipy)") from None


def run_optimizer(optimizer, objective, x0, lb, ub, options=None):
    """Minimise ``objective`` from ``x0`` within ``[lb, ub]`` with ``optimizer``; see the module docstring."""
    _check_optimizer(optimizer)
    opts = default_options(optimizer)
    opts.update(options or {})
    x0 = np.clip(np.asarray(x0, dtype=np.float64), lb, ub)
    if not math.isfinite(objective.fun_grad(x0)[0]):    # evaluated with sensitivities: the optimiser reuses it
        return _failed_at_start(x0)
    run = {"fides": _fides, "least_squares": _least_squares, "L-BFGS-B": _lbfgsb}[optimizer]
    return run(objective, x0, np.asarray(lb, float), np.asarray(ub, float), opts)


def _fides(objective, x0, lb, ub, opts):
    import fides
    fopts = {getattr(fides.Options, k.upper()): v for k, v in opts.items()}
    opt = fides.Optimizer(objective.fun_grad_hess, ub=ub, lb=lb, verbose=logging.ERROR, options=fopts,
                          hessian_update=None)
    logging.getLogger("fides").setLevel(logging.ERROR)
    fval, x, _, _ = opt.minimize(x0)
    flag = opt.exitflag
    return {"x": np.asarray(x, float), "fval": float(fval), "n_iter": int(opt.iteration), "status": int(flag),
            "message": f"fides: {flag.name}"}


def _least_squares(objective, x0, lb, ub, opts):
    from scipy.optimize import least_squares

    def fun(x):
        return objective.residuals(x)[0]

    def jac(x):
        return objective.residuals(x)[1]

    r = least_squares(fun, x0, jac=jac, bounds=(lb, ub), method="trf", **opts)
    fval = objective.value(r.x)
    return {"x": r.x, "fval": float(fval), "n_iter": int(r.nfev), "status": int(r.status),
            "message": f"least_squares: {r.message}"}


def _lbfgsb(objective, x0, lb, ub, opts):
    from scipy.optimize import minimize
    def fg(x):
        f, g = objective.fun_grad(x)
        if not math.isfinite(f):      # L-BFGS-B's line search backs off from a large finite value
            return 1e300, np.zeros_like(x)
        return f, g

    r = minimize(fg, x0, jac=True, method="L-BFGS-B", bounds=list(zip(lb, ub)), options=opts)
    return {"x": r.x, "fval": float(objective.value(r.x)), "n_iter": int(r.nit),
            "status": 1 if r.success else -1, "message": f"L-BFGS-B: {r.message}"}


def _failed_at_start(x0):
    return {"x": np.asarray(x0, float), "fval": math.inf, "n_iter": 0, "status": -3,
            "message": "the simulation failed at the start point"}
