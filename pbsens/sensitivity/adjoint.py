"""Post-hoc adjoint gradients: :func:`adjoint_gradient` (issue #40, first slice).

For a functional of the states at output times ``t_i`` (e.g. a log-likelihood) with
``c_i = (dJ/dx(t_i))^T``, the gradient ``dJ/dp = sum_i c_i^T S(t_i) + dJ/dp|explicit`` needs
only ``c^T S``, not ``S``: instead of ``np`` columns forward, one vector ``lambda`` is marched
backward over the same grid (:mod:`pbsens.kernels.adjoint`; docs/METHOD.md section 16)::

    lambda_k = E_k^T lambda_k+1 (+ c_i where t_k = t_i),   dJ/dp = sum_k B_k^T F_k^T lambda_k+1
                                                                  + S_0^T lambda_0 + dJ/dp|explicit

with the forward exponential step's own ``E``, ``F`` (``exp``), or ``E``, ``G1``, ``G2`` of the
midpoint matrix (``exp2``), with the transpose of the midpoint correction on the long intervals:
the discrete adjoint of the forward march, equal to the forward march's contracted gradient to
rounding. The grid is the one :func:`pbsens.sensitivities` marches on (``freeze=0``): the
trajectory's grid with the output times merged in, less the lone points of the midpoint
correction, or refined by ``substeps`` without it. This module knows nothing of numba.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import PbsensError
from ..kernels.codes import METHOD_EXP, METHOD_EXP2
from ..model.model import check_model
from ..solvers import Trajectory, check_t_eval, solve_states
from ..solvers.refine import without_lone_points
from ..system.threads import limit_blas_threads
from .march_setup import setup_march
from .options import check_options

__all__ = ["ADJOINT_METHODS", "adjoint_gradient", "march_backward", "march_plan"]

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


def march_plan(model, trajectory, p, t_out, method="exp2", x0_sens=None, *, substeps=None, reuse_tol=1e-12,
               midpoint=None, linalg="auto"):
    """The grid, states, output rows and midpoint plan the forward march of ``method`` would use.

    Returns ``(setup, mid)``: the :class:`~pbsens.sensitivity.march_setup.MarchSetup` (its ``t``,
    ``x``, ``out_index`` the grid marched, less the lone points where the midpoint correction
    applies) and ``mid = (X_mid, mid_index)`` or None. ``substeps=None`` resolves as
    :func:`pbsens.sensitivities` does (4 for a Rodas5P trajectory with dense output), and so does
    ``midpoint=None`` (the correction for ``exp2`` where ``substeps`` calls intervals long);
    ``midpoint=False`` refines the grid by ``substeps`` instead, without freezing (``freeze=0``: the
    forward march's freezing test reads ``S``, which the adjoint does not have). ``linalg``: as
    :func:`pbsens.sensitivities`' (``opts.use_sparse``: the sparse transpose, :func:`march_backward`).
    """
    opts = check_options(model, t_eval=t_out, S0=x0_sens, method=method, solver="LSODA", rtol=1e-5, atol=1e-6,
                         n_factor=10.0, n_max=100, eq_tol=1e-4, norm="1", interpolation="linear",
                         reuse_tol=reuse_tol, substeps=substeps, estimate_error=False, sens_rtol=None,
                         sens_atol=None, state_error=None, max_refine=12, max_split=64, max_grid_factor=200,
                         max_substeps=10_000_000, tighten_states=False, linalg=linalg, freeze=0.0,
                         midpoint=midpoint)
    setup = setup_march(model, opts, trajectory, p=p, x0=None, S0=x0_sens, t_eval=t_out, t_span=None, params=None,
                        solve=solve_states, bind=_no_plan)
    mid = None
    if setup.use_mid:
        t, x, out_index = without_lone_points(setup.t, setup.x, setup.out_index, setup.sol,
                                              getattr(setup.trajectory, "tstops", None))
        setup = dataclasses.replace(setup, t=t, x=x, out_index=out_index)
        mid = setup.midpoint_plan(t, x)
    return setup, opts, mid


def march_backward(model, setup, opts, mid, dJdx, lam_end=None, cols=None, nonzero_start=None):
    """``(lambda(t_0), grad)``: the backward march over ``setup``'s grid (:func:`march_plan`) with
    ``c_i = dJdx[i]`` at the output times and ``lam_end`` carried into the last grid point;
    ``grad`` holds the intervals' ``B^T`` terms only (not ``S_0^T lambda_0``). ``dJdx`` of shape
    ``(nv, n_out, nx)`` (``lam_end`` ``(nv, nx)``): ``nv`` functionals in one march, ``lambda(t_0)``
    ``(nv, nx)`` and ``grad`` ``(nv, np)``.

    With ``opts.use_sparse`` the transpose of the sparse march (:meth:`pbsens.sensitivity.sparse.
    SparseRunner.adjoint`); ``cols`` (default all) and ``nonzero_start`` (which of them the forward
    march starts non-zero; default: those of ``setup.S_full``) are the forward march's columns, which
    set its step choice (``grad`` is zero outside ``cols``). The dense transpose ignores them."""
    if opts.use_sparse:
        from .sparse import runner
        if cols is None:
            cols = np.arange(model.n_params, dtype=np.int64)
        if nonzero_start is None:
            nonzero_start = np.any(np.asarray(setup.S_full)[:, cols] != 0.0, axis=0)
        return runner(model).adjoint(setup.t, setup.x, setup.p, setup.out_index, dJdx, ADJOINT_METHODS[opts.method],
                                     lam_end=lam_end, cols=cols, nonzero_start=nonzero_start, mid=mid)
    return _bound(model)(setup.t, setup.x, setup.p, model.constants, setup.out_index, dJdx,
                         ADJOINT_METHODS[opts.method], opts.reuse_tol, lam_end, mid,
                         _dense_laws(model, setup.t, setup.x, setup.p))


#: The dense transpose takes its matrix functions in the coordinates the conservation laws leave
#: (:mod:`pbsens.kernels.reduced_adjoint`) from this many states on; below it the laws are not looked for.
LAWS_MIN_STATES = 16


def _dense_laws(model, t, x, p):
    """``(Lm, dep, K)`` for the dense transpose: the model's conservation laws and the states they eliminate
    (chosen on the first grid: any well-conditioned choice gives the same step; found once per model and
    process); None below :data:`LAWS_MIN_STATES` or without laws."""
    if model.n_states < LAWS_MIN_STATES:
        return None
    cache = model.__dict__.setdefault("_kernels", {})
    if "laws" not in cache:
        from ..model.conservation import eliminated_on_grid, shared_left_null_space
        laws = shared_left_null_space(model, p)
        dep, K, _ = eliminated_on_grid(model, laws, t, x, p)
        cache["laws"] = None if dep.size == 0 else (laws, dep, K)
    return cache["laws"]


@limit_blas_threads()
def adjoint_gradient(model, trajectory, p, t_out, dJdx, dJdp_explicit=None, method="exp", x0_sens=None, *,
                     substeps=1, reuse_tol=1e-12, midpoint=None, return_lambda=False, linalg="auto"):
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
    substeps : int or None
        The grid: 1 (default) the trajectory's own; ``m > 1`` (or None: 4 for a Rodas5P
        trajectory with dense output, as :func:`pbsens.sensitivities`) intervals longer than
        ``1/m`` of their accepted step are long: with ``method="exp2"`` and ``midpoint`` they
        take the midpoint correction, else they are split into ``m`` parts from the dense output.
    reuse_tol : float
        Reuse the previous interval's matrix functions within this relative change (as the
        forward march).
    midpoint : bool, optional
        ``exp2``: the transpose of the midpoint correction on the long intervals (METHOD.md
        sections 14, 16), as :func:`pbsens.sensitivities` (``None``: ``DEFAULT_MIDPOINT``, on);
        False: sub-steps instead (``freeze=0``).
    return_lambda : bool
        Also return ``lambda(t_0)`` (``dJ/dx0``).
    linalg : {"auto", "dense", "sparse"}
        As :func:`pbsens.sensitivities`' (``"auto"``: sparse for large sparse models): the transpose of
        the dense march or of the sparse one (METHOD.md section 16, "Sparse").

    Returns
    -------
    ndarray (n_params,)
        The gradient; with ``return_lambda``, ``(gradient, lambda0)``. It equals, to rounding, the
        forward march's ``sum_i dJdx[i] S(t_out[i]) + dJdp_explicit`` for
        ``sensitivities(model, trajectory, method, t_eval=t_out, substeps=substeps, midpoint=midpoint,
        freeze=0, linalg=linalg)``.

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
    setup, opts, mid = march_plan(model, trajectory, p, t_out, method, x0_sens, substeps=substeps,
                                  reuse_tol=reuse_tol, midpoint=midpoint, linalg=linalg)
    d = _check_dJdx(dJdx, setup.t_out.size, model.n_states)
    explicit = _check_dJdp(dJdp_explicit, model.n_params)
    lam0, grad = march_backward(model, setup, opts, mid, d)
    grad = grad + setup.S_full.T @ lam0 + explicit
    return (grad, lam0) if return_lambda else grad
