"""Reference forward sensitivities (FS): states and sensitivities integrated together.

METHOD.md section 6. The sensitivity matrix ``S = dx/dp`` solves the linear
variational equation (2.3)::

    S' = A(t) S + B(t),   A = df/dx,  B = df/dp,   S(t0) = dx0/dp,

which is appended to the state equation ``x' = f(t, x, p)``. The augmented state
``z = (x, S[:, 0], S[:, 1], ..., S[:, ns-1])`` has dimension ``nx (ns + 1)``
(columns of ``S`` stored one after the other, as in CVODES) and is integrated
with one of scipy's methods through pbsens's stepping loop
(:func:`pbsens.solvers.scipy_steppers.integrate`; public scipy API only).

Implementation notes
--------------------
* The augmented right-hand side and the first block column of its Jacobian
  are :func:`pbsens.kernels.augmented.system_rhs` and ``system_jac``, the
  ``@njit(cache=True)`` kernels the compiled Rodas5P path steps with; they take
  the model's ``rhs_into``/``jacs_into`` as first-class function arguments, so
  they are compiled once per machine, not once per model. Calling such a kernel
  from Python with dispatcher arguments is slow (the dispatchers are unboxed on
  every call), so each model gets small, non-cached ``@njit`` closures with the
  model's functions bound as closure variables, built once per process and
  memoised on the model object (:func:`_bound_stepping`, :func:`_bound_functions`).
* The implicit methods never see the dense ``nx (ns+1)`` square Jacobian
  (1260 x 1260 for CaMKII): BDF and Radau get the block lower-triangular
  Jacobian as a CSC matrix and factorise their Newton matrices with SuperLU.
  The notes of :func:`forward_sensitivities` list the forms.
* The solve itself is an entry of :data:`_AUGMENTED_SOLVERS` (method name ->
  solver of the augmented system). ``"rodas5p"`` runs pbsens's compiled
  Rodas5P (:func:`pbsens.kernels.rosenbrock.rodas5p_solve_sensitivities`, the
  same step loop as the state solver) on the augmented system: one compiled
  call, one ``nx x nx`` LU per step, block forward substitution per stage.
"""
from __future__ import annotations

import numbers
import time
from typing import NamedTuple

import numpy as np
from numba import njit, types
from scipy.sparse import csc_matrix, identity, kron

from ..errors import PbsensError, SolverError
from ..kernels.signatures import f8, ivec, mat, tens, vec
from .result import SensitivityResult
from .params import select_params
from ..model.model import check_model
from ..solvers import check_solver_options, check_t_eval, check_t_span, merge_grid
from ..solvers.scipy_steppers import StepGuard, integrate
from ..system.threads import limit_blas_threads

__all__ = ["forward_sensitivities"]

_SCIPY_METHODS = ("BDF", "Radau", "LSODA", "RK45", "RK23", "DOP853")
#: pbsens's compiled Rosenbrock method (:mod:`pbsens.kernels.rosenbrock`) on the augmented system.
_RODAS = "rodas5p"
_METHODS = _SCIPY_METHODS + (_RODAS,)
#: Jacobian forms and the solvers that accept them ("structured" is an alias of "sparse" for scipy's
#: methods; for rodas5p it is the block form solved by block forward substitution).
_JACOBIANS = {"structured": ("BDF", "Radau", _RODAS), "block-diagonal": ("BDF", "Radau"),
              "sparse": ("BDF", "Radau"), "dense": ("BDF", "Radau", "LSODA"), "none": _SCIPY_METHODS}
_DEFAULT_JACOBIAN = {"BDF": "structured", "Radau": "structured", "LSODA": "none", _RODAS: "structured"}
_RODAS_OPTIONS = ("first_step", "max_step", "max_steps", "tstops")

# --------------------------------------------------------------------------- kernels
#
# The right-hand side and the first block column of the Jacobian of the
# augmented system are :func:`pbsens.kernels.augmented.system_rhs` and
# ``system_jac``, the kernels the compiled Rodas5P path steps with; what scipy's
# implicit methods need on top, the CSC form of the Jacobian, is
# :func:`pbsens.kernels.augmented.fill_csc`.


def _csc_work(nx, ns):
    """Scratch for :func:`_csc_data`: room for every entry of the block pattern."""
    n = nx * (ns + 1)
    size = nx * n + ns * nx * nx
    return np.empty(size), np.empty(size, dtype=np.int32), np.empty(n + 1, dtype=np.int32)


def _csc_data(J, work):
    """``(data, indices, indptr)`` of the augmented Jacobian from its first block column ``J``.

    ``work``: scratch from :func:`_csc_work`; the arrays returned are fresh (the solver keeps them).
    """
    from ..kernels.augmented import fill_csc   # numba kernels load on first use, not at import
    data, indices, indptr = work
    nnz = fill_csc(J, data, indices, indptr)
    return data[:nnz].copy(), indices[:nnz].copy(), indptr.copy()


def _bound_functions(model):
    """Per-model numba closures around the cached kernels, memoised on ``model``.

    Returns ``(rhs, jac_blocks)``: ``rhs(t, z, p, c, idx) -> dz/dt`` and
    ``jac_blocks(t, z, p, c, idx, A, C)`` (fills ``A`` (nx, nx) and the
    couplings ``C`` (ns, nx, nx) in place), for tests and single calls; and
    through :func:`_bound_stepping` the forms with caller-owned scratch that the
    solve uses.
    """
    memo = model.__dict__.setdefault("_pbsens_memo", {})
    key = ("fs", id(model.fns.rhs_into), id(model.fns.jacs_into))
    hit = memo.get(key)
    if hit is not None:
        return hit
    rhs, column = _bound_stepping(model)

    @njit(vec(f8, vec, vec, vec, ivec))
    def fs_rhs(t, z, p, c, idx):
        nx = z.shape[0] // (idx.shape[0] + 1)
        return rhs(t, z, p, c, idx, np.empty((2, nx, nx)), np.empty((2, nx, p.shape[0])))

    @njit(types.void(f8, vec, vec, vec, ivec, mat, tens))
    def fs_jac_blocks(t, z, p, c, idx, A, C):
        nx = A.shape[0]
        J = np.empty((z.shape[0], nx))
        column(t, z.copy(), p, c, idx, np.empty((2, nx, nx)), np.empty((2, nx, p.shape[0])), J)
        A[:, :] = J[:nx]
        for j in range(idx.shape[0]):
            C[j] = J[nx * (j + 1):nx * (j + 2)]

    memo[key] = (fs_rhs, fs_jac_blocks)
    return memo[key]


def _bound_stepping(model):
    """``(rhs, column)`` for the solve, memoised on ``model``: the model's functions bound as closure variables.

    ``rhs(t, z, p, c, idx, WA, WB) -> dz/dt`` and ``column(t, z, p, c, idx, WA,
    WB, J)`` (the first block column ``(A; C_0; ...)`` into ``J``; ``z`` is
    perturbed and restored bit for bit). ``WA`` (2, nx, nx), ``WB`` (2, nx, np)
    are scratch (:mod:`pbsens.kernels.augmented`). Calling the cached kernels
    from Python with dispatcher arguments would unbox them on every call.
    """
    memo = model.__dict__.setdefault("_pbsens_memo", {})
    key = ("fs-stepping", id(model.fns.rhs_into), id(model.fns.jac_x_into), id(model.fns.jacs_into))
    hit = memo.get(key)
    if hit is not None:
        return hit
    from ..kernels.augmented import system_jac, system_rhs   # loaded on first use, not at import
    rhs_into, jac_into, jacs_into = model.fns.rhs_into, model.fns.jac_x_into, model.fns.jacs_into
    sys_rhs, sys_jac = system_rhs, system_jac

    @njit(vec(f8, vec, vec, vec, ivec, tens, tens))
    def rhs(t, z, p, c, idx, WA, WB):
        out = np.empty(z.shape[0])
        sys_rhs(rhs_into, jacs_into, idx, WA, WB, t, z, p, c, out)
        return out

    @njit(types.void(f8, vec, vec, vec, ivec, tens, tens, mat))
    def column(t, z, p, c, idx, WA, WB, J):
        sys_jac(jac_into, jacs_into, idx, WA, WB, t, z, p, c, J)

    memo[key] = (rhs, column)
    return memo[key]


# --------------------------------------------------------------------------- the solve

def _scipy_jacobian(jacobian, column, nx, ns):
    """``jac(t, z)`` of the augmented system in the form ``jacobian`` names (None for ``"none"``).

    ``column(t, z)`` returns the first block column ``(A; C_0; ...)``.
    """
    n_aug = nx * (ns + 1)
    if jacobian == "none":
        return None
    if jacobian == "block-diagonal":
        eye_blocks = identity(ns + 1, format="csc")
        return lambda t, z: kron(eye_blocks, csc_matrix(column(t, z)[:nx]), format="csc")
    work = _csc_work(nx, ns)

    def jac(t, z):
        return csc_matrix(_csc_data(column(t, z), work), shape=(n_aug, n_aug))

    if jacobian == "dense":
        return lambda t, z: jac(t, z).toarray()
    return jac  # "sparse", "structured"


def _scipy_system(model, p, idx):
    """``(fun, column)`` of the augmented system for scipy's methods, with scratch owned by the pair.

    ``fun(t, z) -> dz/dt``; ``column(t, z)`` -> the first block column
    ``(A; C_0; ...)`` of the Jacobian ((ns+1) nx, nx; ``z`` is not changed).
    """
    rhs, jac_column = _bound_stepping(model)
    c = model.constants
    nx = model.n_states
    n_aug = nx * (idx.size + 1)
    WA, WB = np.empty((2, nx, nx)), np.empty((2, nx, model.n_params))

    def fun(t, z):
        return rhs(t, np.ascontiguousarray(z), p, c, idx, WA, WB)

    def column(t, z):
        J = np.empty((n_aug, nx))
        jac_column(t, np.array(z, dtype=np.float64), p, c, idx, WA, WB, J)
        return J

    return fun, column


def _solve_scipy(model, p, idx, t_span, z0, t_eval, rtol, atol, method, jacobian, options):
    """The augmented system on scipy's ``method`` -> ``(t, Z, stats)``.

    ``t`` is ``t_eval`` (``Z`` there from the dense output, exact where a step
    ends) or else the accepted steps. An entry of :data:`_AUGMENTED_SOLVERS`.
    """
    nx, ns = model.n_states, idx.size
    fun, column = _scipy_system(model, p, idx)
    max_nfev = options.pop("max_nfev", 1_000_000)     # a bound on work: an explicit method on a stiff problem
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, numbers.Integral) or max_nfev < 1:
        raise PbsensError(f"'max_nfev' must be a positive integer, got {max_nfev!r}")
    steps = integrate(method, fun, t_span, z0, rtol=rtol, atol=atol, jac=_scipy_jacobian(jacobian, column, nx, ns),
                      dense_output=t_eval is not None, guard=StepGuard(z0.size, max_nfev=int(max_nfev)),
                      what=f"forward sensitivities of model {model.name!r}", **options)
    stats = {"nfev": steps.nfev, "njev": steps.njev, "nlu": steps.nlu, "n_steps": int(steps.t.size - 1)}
    if t_eval is None:
        return steps.t, steps.y, stats
    _, Z, where = merge_grid(steps.t, steps.y, t_eval, steps.sol)
    return t_eval, Z[where], stats


def _rodas_addresses(model):
    """Addresses of the model's ``rhs_into``, ``jac_x_into``, ``jacs_into`` and its autonomy; memoised on ``model``."""
    from ..kernels.function_address import addresses
    from ..kernels.signatures import jacs_fn_sig, matrix_fn_sig, vector_fn_sig
    from ..solvers.rosenbrock import is_autonomous
    memo = model.__dict__.setdefault("_pbsens_memo", {})
    hit = memo.get("fs-rodas5p")
    if hit is None or hit[0] is not model.fns:
        fns = model.fns   # kept in the memo: the addresses stay valid while it lives
        addr = np.array(addresses(fns.rhs_into, vector_fn_sig) + addresses(fns.jac_x_into, matrix_fn_sig)
                        + addresses(fns.jacs_into, jacs_fn_sig), dtype=np.int64)
        hit = (fns, addr, 1 if is_autonomous(model) else 0)
        memo["fs-rodas5p"] = hit
    return hit[1], hit[2]


#: Doubles the compiled Rodas5P's step buffers may hold when only output times are wanted (32 MB).
_OUTPUT_BUFFER_DOUBLES = 4_000_000


def _solve_rodas5p(model, p, idx, t_span, z0, t_eval, rtol, atol, method, jacobian, options):
    """The augmented system on pbsens's compiled Rodas5P -> ``(t, Z, stats)``; an entry of :data:`_AUGMENTED_SOLVERS`.

    One compiled call (:func:`pbsens.kernels.rosenbrock.rodas5p_solve_sensitivities`, ``S`` row-major
    inside: ``z0``, ``atol`` and the result are permuted in and out here):
    one ``nx x nx`` LU of ``I/(h gamma) - A`` per step, block forward
    substitution per stage, error control on ``x`` and ``S``; ``t_eval`` from
    the dense output, interpolated as the steps go (the step buffers are emptied when full, so
    memory does not grow with the number of steps). ``options``: ``first_step``,
    ``max_step``, ``max_steps`` (default 100 000), ``tstops``.
    """
    import math

    from ..kernels import rosenbrock as k
    from ..solvers.rosenbrock import _MIN_RTOL, _fail, _positive_number
    bad = sorted(set(options) - set(_RODAS_OPTIONS))
    if bad:
        raise PbsensError(f"solver option {bad[0]!r} is not known to method {_RODAS!r} "
                          f"(known: {', '.join(_RODAS_OPTIONS)})")
    if rtol < _MIN_RTOL:
        raise PbsensError(f"'rtol' must be at least {_MIN_RTOL:.3g} (100 machine epsilons) with method "
                          f"{_RODAS!r}, got {rtol!r}")
    t0, t1 = t_span
    ts = check_t_eval(options.get("tstops"), (t0, t1), name="tstops")
    stops = np.array([t1]) if ts is None else np.append(ts[(ts > t0) & (ts < t1)], t1)
    first = options.get("first_step")
    h0 = 0.0 if first is None else _positive_number(first, "first_step")
    hmax = _positive_number(options.get("max_step", math.inf), "max_step", allow_inf=True)
    max_steps = options.get("max_steps", 100_000)
    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1:
        raise PbsensError(f"'max_steps' must be a positive integer, got {max_steps!r}")
    fn_addr, autonomous = _rodas_addresses(model)
    counts = np.zeros(6, dtype=np.int64)
    info = np.zeros(3)
    # the compiled solve keeps S row-major, z = (x, S (nx, ns)): columns of S one after the other here
    nx, ns = model.n_states, idx.size
    perm = np.concatenate([np.arange(nx), nx + np.arange(nx * ns).reshape(ns, nx).T.ravel()])
    atol = np.broadcast_to(np.asarray(atol, dtype=np.float64), z0.shape)
    args = (fn_addr, float(t0), np.ascontiguousarray(z0[perm]), p, model.constants, idx,
            np.full(z0.size, float(rtol)), np.ascontiguousarray(atol[perm]), stops, h0, hmax, int(max_steps),
            autonomous)
    if t_eval is not None:     # only the outputs: memory bounded by the buffer, not by the number of steps
        capacity = int(min(256, max(8, _OUTPUT_BUFFER_DOUBLES // (4 * z0.size))))
        T = t_eval
        status, Z = k.rodas5p_sensitivities_at(*args, capacity, counts, info,
                                               np.ascontiguousarray(t_eval, dtype=np.float64))
    else:
        status, T, Z, _ = k.rodas5p_solve_sensitivities(*args, 256, counts, info)
    back = np.empty_like(perm)
    back[perm] = np.arange(perm.size)
    Z = Z[:, back]
    if status != k.STATUS_OK:
        err = _fail(model, status, info[0], info[1], info[2] != 0.0, counts, max_steps)
        raise SolverError(str(err).replace("state solve", "forward sensitivities", 1))
    stats = {"nfev": int(counts[k.N_RHS]), "njev": int(counts[k.N_JAC]), "nlu": int(counts[k.N_LU]),
             "n_solves": int(counts[k.N_SOLVE]), "n_steps": int(counts[k.N_ACCEPTED]),
             "n_rejected": int(counts[k.N_REJECTED])}
    return T, Z, stats


#: Method -> solver of the augmented system, ``f(model, p, idx, t_span, z0, t_eval, rtol, atol,
#: method, jacobian, options) -> (t, Z, stats)`` with ``Z[:, :nx] = x`` and the columns of ``S``
#: after it.
_AUGMENTED_SOLVERS = {name: _solve_scipy for name in _SCIPY_METHODS}
_AUGMENTED_SOLVERS[_RODAS] = _solve_rodas5p


# --------------------------------------------------------------------------- front door

def _check_tol(v, name, nx, pscale):
    """Tolerance of the augmented system from a scalar, per-state or full-length value.

    A scalar or per-state value ``a`` applies to ``x``; for the sensitivity
    column ``S[:, j]`` it is divided by ``pscale[j]`` (see :func:`forward_sensitivities`).
    """
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a positive number or array, got {v!r}") from None
    if a.ndim > 1 or a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise PbsensError(f"{name!r} must be positive and finite, got {v!r}")
    n_aug = nx * (pscale.size + 1)
    if a.ndim == 1 and a.size == n_aug:
        return a.copy()
    if a.ndim == 0 or a.size == nx:
        ax = np.broadcast_to(a, (nx,))
        return np.concatenate([ax, (ax[None, :] / pscale[:, None]).ravel()])
    raise PbsensError(f"{name!r} must be a scalar or have length {nx} (states) or {n_aug} "
                      f"(states and sensitivities), got length {a.size}")


def _check_jacobian(jacobian, method):
    """Resolve the ``jacobian`` argument for ``method`` (see :func:`forward_sensitivities`)."""
    if jacobian is None:
        return _DEFAULT_JACOBIAN.get(method, "none")
    if jacobian not in _JACOBIANS:
        raise PbsensError(f"'jacobian' must be one of {list(_JACOBIANS)} or None, got {jacobian!r}")
    allowed = _JACOBIANS[jacobian]
    if method not in allowed:
        raise PbsensError(f"'jacobian'={jacobian!r} is not available with method {method!r} "
                          f"(only with {', '.join(allowed)})")
    return jacobian


def _check_method_and_rtol(method, rtol):
    """``rtol`` as a float, once ``method`` is known (see :func:`forward_sensitivities`)."""
    if not isinstance(method, str) or method not in _METHODS:
        raise PbsensError(f"'method' must be one of {list(_METHODS)}, got {method!r}")
    if (isinstance(rtol, bool) or not isinstance(rtol, (numbers.Real, np.floating))
            or not np.isfinite(rtol) or rtol <= 0):
        raise PbsensError(f"'rtol' must be a positive finite number, got {rtol!r}")
    return float(rtol)


def _check_S0(S0, model, p, idx):
    """The initial sensitivity ``(nx, ns)``, C-contiguous: ``S0`` checked, or the model's for ``p``."""
    nx, ns = model.n_states, idx.size
    if S0 is None:
        S0 = model.initial_sensitivity(p)[:, idx]
    else:
        try:
            S0 = np.array(S0, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"'S0' must be an array of numbers, got {S0!r}") from None
        if S0.shape != (nx, ns):
            raise PbsensError(f"'S0' has shape {S0.shape}, expected ({nx}, {ns}) "
                              f"(states x sensitivity parameters)")
        if not np.all(np.isfinite(S0)):
            raise PbsensError("'S0' contains NaN or inf")
    return np.ascontiguousarray(S0)


def _check_fs_solver_options(method, solver_options):
    """Refuse the options forward_sensitivities sets itself; scipy's methods check the rest here."""
    for key in ("fun", "jac", "t_eval", "dense_output", "args", "y0", "t_span"):
        if key in solver_options:
            raise PbsensError(f"solver option {key!r} is set by forward_sensitivities and cannot be passed")
    if method != _RODAS:   # the compiled path checks its own options (first_step, max_step, max_steps, tstops)
        check_solver_options(method, {k: v for k, v in solver_options.items() if k not in ("jac_sparsity", "max_nfev")})


def _augmented_start(x0, S0):
    """``z0 = (x0, S0[:, 0], S0[:, 1], ...)``, the start of the augmented system."""
    nx, ns = S0.shape
    z0 = np.empty(nx * (ns + 1))
    z0[:nx] = x0
    z0[nx:] = S0.T.ravel()  # column j of S at z[nx (j+1) : nx (j+2)]
    return z0


def _check_rhs_at_t0(model, method, t0, x0, z0, p, idx):
    """:class:`SolverError` unless the right-hand side is finite at ``t0``; for scipy's methods
    this first call also compiles (or loads) the per-model closures before the timed solve."""
    if method == _RODAS:
        f_t0 = np.empty(model.n_states)   # the compiled solve needs no per-model closures (kernels cached on disk)
        model.fns.rhs_into(t0, x0, p, model.constants, f_t0)
    else:
        fs_rhs, _ = _bound_functions(model)
        f_t0 = fs_rhs(t0, z0, p, model.constants, idx)  # also compiles/loads everything before the timed solve
    if not np.all(np.isfinite(f_t0)):
        raise SolverError(f"the right-hand side of model {model.name!r} is NaN or inf at t0 = {t0:.6g} "
                          "(check p and x0)")


class _Setup(NamedTuple):
    """A checked call of :func:`forward_sensitivities`, ready for the solve."""

    t_span: tuple          # (t0, t1)
    t_eval: np.ndarray | None
    p: np.ndarray
    x0: np.ndarray
    S0: np.ndarray         # (nx, ns)
    idx: np.ndarray        # indices of the sensitivity parameters
    names: list            # their names
    rtol: float
    atol: np.ndarray       # (nx (ns + 1),)
    jacobian: str          # the resolved form
    z0: np.ndarray         # the augmented start


def _setup(model, t_span, t_eval, p, x0, S0, method, rtol, atol, params, jacobian, solver_options):
    """Everything :func:`forward_sensitivities` does before the solve: the arguments checked
    in the order its errors are documented, and the right-hand side checked at ``t0``."""
    check_model(model)
    t0, t1 = check_t_span(t_span)
    te = check_t_eval(t_eval, (t0, t1))
    p = model.check_p(p)
    x0 = model.initial_state(p) if x0 is None else model.check_x(x0, "x0")
    idx, names = select_params(model, params)
    rtol_v = _check_method_and_rtol(method, rtol)
    pabs = np.abs(p[idx])
    atol_v = _check_tol(atol, "atol", model.n_states, np.where(pabs > 0, pabs, 1.0))
    S0 = _check_S0(S0, model, p, idx)
    _check_fs_solver_options(method, solver_options)
    jacobian = _check_jacobian(jacobian, method)
    z0 = _augmented_start(x0, S0)
    _check_rhs_at_t0(model, method, t0, x0, z0, p, idx)
    return _Setup((t0, t1), te, p, x0, S0, idx, names, rtol_v, atol_v, jacobian, z0)


def _solve(model, method, run, solver_options):
    """``(t, Z, stats)`` of the augmented system from the entry of :data:`_AUGMENTED_SOLVERS` for ``method``."""
    return _AUGMENTED_SOLVERS[method](model, run.p, run.idx, run.t_span, run.z0, run.t_eval, run.rtol, run.atol,
                                      method, run.jacobian, dict(solver_options))


def _options(method, rtol, atol, params, solver_options, run, stats):
    """``SensitivityResult.options``: the call's method, tolerances and options as given, and the solver's statistics."""
    return {"solver": method, "rtol": rtol, "atol": atol, "t_span": run.t_span,
            "params": None if params is None else list(run.names), "jacobian": run.jacobian,
            "solver_options": dict(solver_options), "stats": stats}


def _result(model, method, run, t, Z, options, timings):
    """The :class:`SensitivityResult` of the solution ``Z`` at ``t`` (:class:`SolverError` on NaN/inf)."""
    if not np.all(np.isfinite(Z)):
        k = int(np.argmax(~np.all(np.isfinite(Z), axis=1)))
        raise SolverError(f"forward sensitivities of model {model.name!r} produced NaN/inf "
                          f"at t = {t[k]:.6g} (method {method})")
    nx, ns = model.n_states, run.idx.size
    K = t.size
    x = np.ascontiguousarray(Z[:, :nx])
    S = np.ascontiguousarray(Z[:, nx:].reshape(K, ns, nx).transpose(0, 2, 1))
    return SensitivityResult(
        t=np.ascontiguousarray(t, dtype=np.float64), x=x, S=S, method="fs", p=run.p, x0=run.x0, S0=run.S0,
        model_name=model.name, state_names=list(model.state_names), param_names=list(run.names),
        options=options, timings=timings)


@limit_blas_threads
def forward_sensitivities(model, t_span, t_eval=None, p=None, x0=None, S0=None, method="BDF",
                          rtol=1e-8, atol=1e-10, params=None, jacobian=None, **solver_options):
    """Forward sensitivities: integrate states and sensitivities together (FS).

    The reference method of METHOD.md section 6: the state equation
    ``x' = f(t, x, p)`` and the variational equation (2.3)
    ``S' = A(t) S + B(t)``, ``S(t0) = S0``, are solved as one system of dimension
    ``nx (ns + 1)`` by one of scipy's methods, stepped by
    :func:`pbsens.solvers.scipy_steppers.integrate`, with ``ns`` the number of
    sensitivity parameters.

    Parameters
    ----------
    model : Model
        The compiled model (:func:`pbsens.load_model`).
    t_span : (float, float)
        Start and end time, ``t0 < t1``.
    t_eval : array_like, optional
        Output times inside ``t_span``, where states and sensitivities are
        read from the solver's dense output. Default: the solver's accepted
        steps (including ``t0``).
    p : array_like, optional
        Parameters (default: the model's).
    x0 : array_like, optional
        Initial state (default ``model.initial_state(p)``).
    S0 : array_like (nx, ns), optional
        Initial sensitivity ``dx(t0)/dp`` for the selected parameters. Default
        ``model.initial_sensitivity(p)`` restricted to ``params`` (zero unless the
        model's initial values are expressions of parameters). Pass it explicitly
        when ``x0`` is a custom vector with a different dependence on ``p``.
    method : str
        One of scipy's methods: ``"BDF"`` (default),
        ``"Radau"``, ``"LSODA"``, or an explicit one (``"RK45"``, ``"RK23"``,
        ``"DOP853"``); or ``"rodas5p"``, pbsens's compiled Rosenbrock method
        (:mod:`pbsens.kernels.rosenbrock`) on the augmented system, one
        compiled call, one ``nx x nx`` LU per step (see Notes).
    rtol : float
        Relative tolerance of the augmented system.
    atol : float or array_like
        Absolute tolerance. A scalar or one value per state applies to ``x``;
        for the column ``S[:, j]`` it is divided by ``|p_j|`` (by 1 when
        ``p_j = 0``), i.e. ``atol`` bounds the error of the log-parameter
        sensitivity ``p_j S[:, j]``. This is CVODES' default scaling of
        sensitivity tolerances; without it tight tolerances ask for absolute
        accuracy below the rounding error of large ``S`` entries, and the
        solver stalls. An array of length ``nx (ns + 1)`` is used as given.
    params : sequence of str or int, optional
        Parameters (names or indices) whose sensitivities are computed; ``S``
        then has ``len(params)`` columns in this order. Default: all.
    jacobian : {None, "structured", "block-diagonal", "sparse", "dense", "none"}
        How the implicit methods get the Jacobian of the augmented system (see
        Notes). ``None``: ``"structured"`` for BDF and Radau, ``"none"`` for
        LSODA and the explicit methods.
    **solver_options
        Passed on to scipy's stepper (e.g. ``max_step``, ``first_step``), and
        ``max_nfev`` (scipy's methods): the budget of right-hand-side
        evaluations of the augmented system, default 1 000 000, beyond which
        :class:`SolverError` ends the solve (an explicit method on a stiff
        problem would otherwise run for hours). With
        ``"rodas5p"``: ``first_step``, ``max_step``, ``max_steps`` and
        ``tstops`` (times steps end at exactly, as in
        :func:`pbsens.solvers.rosenbrock.solve_rosenbrock`).

    Returns
    -------
    SensitivityResult
        ``method="fs"``; ``t`` (K,), ``x`` (K, nx), ``S`` (K, nx, ns),
        ``param_names`` the selected parameters; ``options`` records the solver
        method, tolerances, ``params``, ``t_span`` and solver statistics;
        ``timings`` has ``"setup"`` (validation, binding, first-call
        compilation), ``"sensitivities"`` (the joint solve of states and
        sensitivities) and ``"total"`` seconds.

    Raises
    ------
    PbsensError
        Invalid input; the message names the argument.
    SolverError
        The solver failed or produced NaN/inf.

    Notes
    -----
    **Jacobian.** The Jacobian of the augmented system is block lower
    triangular: ``ns + 1`` diagonal blocks ``A = df/dx`` and, in the first block
    column, the couplings ``C_j = d(A S_j + B_j)/dx``, which involve second
    derivatives of ``f``. ``A`` comes from the model's symbolic Jacobian; the
    ``C_j`` are forward differences of the symbolic Jacobians (one evaluation
    of ``A`` and ``B`` per state). The Jacobian only steers the Newton
    iteration: the residual uses the exact right-hand side, so any of the
    forms below converges to the same solution, at different cost.

    * ``"sparse"``: the Jacobian as a CSC matrix (nonzeros only): scipy's
      BDF and Radau factorise ``I - gamma J`` with SuperLU. This is the form
      public scipy accepts that never forms the dense ``nx (ns+1)`` square.
    * ``"structured"`` (default for BDF, Radau): an alias of ``"sparse"``,
      kept so that existing calls work. It used to factorise ``I - gamma J``
      through one ``nx x nx`` LU and block forward substitution, by replacing
      private members of scipy's solver classes; pbsens now uses public scipy
      only (a block solve will come back with pbsens's own compiled solver,
      through :data:`_AUGMENTED_SOLVERS`). The price, BDF at rtol 1e-5,
      atol 1e-6 on [0, 600] (Table 2's setting; CPU medians of 21 runs,
      interleaved, same process): PKA 29 ms with the old block solve -> 72 ms,
      CaMKII 75 ms -> 259 ms. The same 35/45 LUs and 336/458 Newton solves
      are done either way (same steps, same results to 2e-11 of max |S|);
      the difference is SuperLU: ~2 ms CPU to factorise the 1260 x 1260
      CaMKII Newton matrix and ~90 us per solve (``python
      benchmarks/bench_forward.py --fs-only --fs-methods BDF --linalg``),
      against microseconds for one ``nx x nx`` LU. Neither the order of the
      unknowns (SuperLU's COLAMD ordering makes it irrelevant; with ``x``
      last the matrix is block upper triangular, and factorises no faster)
      nor the dense form (LAPACK; twice as slow on PKA's 396 unknowns) help,
      and public scipy offers no way to hand BDF another linear solver.
      With ``method="rodas5p"`` it is the block form: ``W = I/(h gamma) - A``
      is factorised once per step (``nx x nx``) and each stage solves
      ``W k_0 = r_0``, ``W k_j = r_j + C_j k_0``; the square is never formed,
      the ``C_j`` are kept as their nonzero entries and the ``ns`` columns are
      solved together as one matrix right-hand side (METHOD.md section 6).
    * ``"block-diagonal"``: ``C_j = 0``, the simultaneous-corrector
      approximation of CVODES, as a block-diagonal CSC matrix. With scipy's
      Newton convergence test this stalls on stiff models with large
      sensitivities: on CaMKII over [0, 600] (rtol 1e-5, atol 1e-6) BDF needed
      57 000 right-hand sides and 20 000 LUs against 460 and 45 with the
      coupling blocks. Kept for comparison only.
    * ``"dense"``: the full square matrix; for debugging and for LSODA.
    * ``"none"``: the solver's own finite differences. LSODA (ODEPACK)
      accepts only dense or banded Jacobians and factorises a dense
      ``nx (ns+1)`` matrix in its stiff mode whatever it is given; its own
      finite differences were faster than passing the dense matrix (PKA,
      rtol 1e-5: 0.8 s vs 1.7 s CPU), so that is its default. Prefer BDF.

    **rodas5p.** A Rosenbrock method uses the Jacobian in its formula, not
    only in a Newton iteration, so the finite-difference couplings ``C_j``
    enter the solution; the error control on ``x`` and ``S`` (the same
    tolerances as above) sees their effect. Measured against Radau at rtol
    1e-10, atol 1e-12, 201 output times on [0, 600], atol = rtol / 10, max
    ``|S - S_ref|`` over max ``|S_ref|``: PKA 6.2e-6, 5.4e-7, 5.9e-10 and CaMKII
    2.6e-6, 3.5e-7, 1.0e-8 at rtol 1e-5, 1e-6, 1e-8 (BDF: PKA 3.0e-5, 1.4e-6,
    1.1e-7; CaMKII 4.9e-5, 1.4e-5, 3.6e-7). Cost (``benchmarks/bench_forward.py
    --fs-only --rtols 1e-5 1e-8``, CPU medians, same run): PKA 6.4 ms vs BDF
    83 ms (rtol 1e-5), 16 vs 154 ms (1e-8); CaMKII 39 vs 253 ms, 150 vs 518 ms.
    """
    t_start = time.perf_counter()
    run = _setup(model, t_span, t_eval, p, x0, S0, method, rtol, atol, params, jacobian, solver_options)
    t_solve = time.perf_counter()
    t, Z, stats = _solve(model, method, run, solver_options)
    t_end = time.perf_counter()
    timings = {"setup": t_solve - t_start, "sensitivities": t_end - t_solve, "total": t_end - t_start}
    return _result(model, method, run, t, Z, _options(method, rtol, atol, params, solver_options, run, stats), timings)
