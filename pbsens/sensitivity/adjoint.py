"""Post-hoc adjoint gradients: :func:`adjoint_gradient` (issue #40, first slice).

For a functional of the states at output times ``t_i`` (e.g. a log-likelihood) with
``c_i = (dJ/dx(t_i))^T``, the gradient ``dJ/dp = sum_i c_i^T S(t_i) + dJ/dp|explicit`` needs
only ``c^T S``, not ``S``: instead of ``np`` columns forward, one vector ``lambda`` is marched
backward over the same grid (:mod:`pbsens.kernels.adjoint`; docs/METHOD.md section 16)::

    lambda_k = E_k^T lambda_k+1 (+ c_i where t_k = t_i),   dJ/dp = sum_k B_k^T F_k^T lambda_k+1
                                                                  + S_0^T lambda_0 + dJ/dp|explicit

with the forward exponential step's own ``E``, ``F`` (``exp``), or ``E``, ``G1``, ``G2`` of the
midpoint matrix (``exp2``): the discrete adjoint of the forward march, equal to the forward
march's contracted gradient to rounding. The grid is the one :func:`pbsens.sensitivities` marches
on with ``midpoint=False, freeze=0``: the trajectory's grid, refined by ``substeps`` from its
dense output, with the output times merged in. This module knows nothing of numba.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError
from ..kernels.codes import METHOD_EXP, METHOD_EXP2
from ..model.model import check_model
from ..solvers import Trajectory, check_t_eval, solve_states
from .march_setup import setup_march
from .options import check_options
from ..system.threads import limit_blas_threads

__all__ = ["adjoint_gradient", "ADJOINT_METHODS"]

#: The post-hoc methods with an adjoint march.
ADJOINT_METHODS = {"exp": METHOD_EXP, "exp2": METHOD_EXP2}


def _bound(model):
    """The model's bound adjoint kernel, once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "adjoint" not in cache:
        from ..kernels import adjoint  # numba kernels load on first use, not at import
        cache["adjoint"] = adjoint.bind(model.fns)
    return cache["adjoint"]


def _no_plan(model):
    raise PbsensError("adjoint_gradient: the methods 'exp' and 'exp2' need no switch plan")  # pragma: no cover


def _check_t_out(t_out, trajectory):
    """``t_out``: real, strictly increasing, inside the trajectory's span (named ``'t_out'``)."""
    if t_out is None or np.size(t_out) == 0:
        raise PbsensError("'t_out' must hold at least one output time")
    t = trajectory.t if isinstance(trajectory, Trajectory) else \
        (trajectory[0] if isinstance(trajectory, (tuple, list)) and len(trajectory) == 2 else None)
    try:
        span = (float(np.min(t)), float(np.max(t)))
    except (TypeError, ValueError):
        return              # the trajectory's own check names it
    check_t_eval(t_out, span, name="t_out")


def _check_dJdx(dJdx, n_out, nx):
    if dJdx is None or np.iscomplexobj(dJdx):
        raise PbsensError(f"'dJdx' must be a real array of shape (len(t_out), n_states) = ({n_out}, {nx})")
    try:
        d = np.ascontiguousarray(dJdx, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError("'dJdx' must be a numeric array of shape (len(t_out), n_states)") from None
    if d.ndim == 1 and n_out == 1 and d.size == nx:
        d = d.reshape(1, nx)
    if d.shape != (n_out, nx):
        raise PbsensError(f"'dJdx' must have shape (len(t_out), n_states) = ({n_out}, {nx}), got {d.shape}")
    if not np.all(np.isfinite(d)):
        raise PbsensError("'dJdx' contains NaN or inf")
    return d


def _check_dJdp(dJdp, npar):
    if dJdp is None:
        return np.zeros(npar)
    if np.iscomplexobj(dJdp):
        raise PbsensError("'dJdp_explicit' must be real")
    try:
        d = np.asarray(dJdp, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"'dJdp_explicit' must be a numeric array of length n_params = {npar}") from None
    if d.size != npar:
        raise PbsensError(f"'dJdp_explicit' must have length n_params = {npar}, got {d.size}")
    if not np.all(np.isfinite(d)):
        raise PbsensError("'dJdp_explicit' contains NaN or inf")
    return d


@limit_blas_threads()
def adjoint_gradient(model, trajectory, p, t_out, dJdx, dJdp_explicit=None, method="exp", x0_sens=None, *,
                     substeps=1, reuse_tol=1e-12, return_lambda=False):
    """``dJ/dp`` of ``J`` with ``dJ/dx(t_out[i]) = dJdx[i]``, by one backward (adjoint) march.

    Parameters
    ----------
    model : Model
    trajectory : Trajectory or (t, x)
        The solved states (:func:`pbsens.solve_states`). Output times that are not grid points
        are merged in from its dense output, as :func:`pbsens.sensitivities` does.
    p : array_like or None
        The parameters; must equal the trajectory's (None: the trajectory's, or the model's
        for a ``(t, x)`` pair).
    t_out : array_like (n_out,)
        Output times, strictly increasing, inside the trajectory's span.
    dJdx : array_like (n_out, n_states)
        ``dJ/dx`` at each output time (for a likelihood: ``sum_rows dllh/dy dh/dx``).
    dJdp_explicit : array_like (n_params,), optional
        The explicit part ``dJ/dp`` at fixed states (e.g. ``sum_rows dllh/dy dh/dp``), added.
    method : {"exp", "exp2"}
        The transpose of this forward exponential march.
    x0_sens : array_like (n_states, n_params), optional
        ``dx0/dp``; default from the model (``model.initial_sensitivity(p)``).
    substeps : int
        The grid: 1 (default) the trajectory's own; ``m > 1`` every accepted step split into
        ``m`` parts from the dense output (the forward march's ``substeps`` with
        ``midpoint=False, freeze=0``).
    reuse_tol : float
        Reuse the previous interval's matrix functions within this relative change (as the
        forward march).
    return_lambda : bool
        Also return ``lambda(t_0)`` (``dJ/dx0``).

    Returns
    -------
    ndarray (n_params,)
        The gradient; with ``return_lambda``, ``(gradient, lambda0)``.

    Raises
    ------
    PbsensError
        Bad input (the message names the argument); :class:`~pbsens.errors.SolverError` if
        ``lambda`` becomes NaN or inf.
    """
    if not isinstance(method, str) or method not in ADJOINT_METHODS:
        raise PbsensError(f"'method' must be one of {', '.join(ADJOINT_METHODS)} for the adjoint gradient "
                          f"(the transposes of the exponential marches), got {method!r}")
    if trajectory is None:
        raise PbsensError("'trajectory' is required: a solve_states result or a (t, x) pair")
    check_model(model)
    _check_t_out(t_out, trajectory)
    if x0_sens is not None:
        x0_sens = model.check_S(x0_sens, "x0_sens")
    if isinstance(trajectory, Trajectory) and trajectory.sol is None and substeps not in (None, 1):
        raise PbsensError("'substeps' > 1 needs a Trajectory with dense output "
                          "(solve_states(..., dense_output=True))")
    opts = check_options(model, t_eval=t_out, S0=x0_sens, method=method, solver="LSODA", rtol=1e-5, atol=1e-6,
                         n_factor=10.0, n_max=100, eq_tol=1e-4, norm="1", interpolation="linear",
                         reuse_tol=reuse_tol, substeps=substeps, estimate_error=False, sens_rtol=None,
                         sens_atol=None, state_error=None, max_refine=12, max_split=64, max_grid_factor=200,
                         max_substeps=10_000_000, tighten_states=False, linalg="dense", freeze=0.0,
                         midpoint=False)
    setup = setup_march(model, opts, trajectory, p=p, x0=None, S0=x0_sens, t_eval=t_out, t_span=None, params=None,
                        solve=solve_states, bind=_no_plan)
    nx, npar = model.n_states, model.n_params
    d = _check_dJdx(dJdx, setup.t_out.size, nx)
    explicit = _check_dJdp(dJdp_explicit, npar)
    lam0, grad = _bound(model)(setup.t, setup.x, setup.p, model.constants, setup.out_index, d,
                               ADJOINT_METHODS[method], opts.reuse_tol)
    grad = grad + setup.S_full.T @ lam0 + explicit
    return (grad, lam0) if return_lambda else grad
