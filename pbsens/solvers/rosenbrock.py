"""The compiled stiff state solver: :func:`solve_rosenbrock` (Rodas5P) -> :class:`~pbsens.solvers.trajectory.Trajectory`.

The whole solve is one call into compiled code (:mod:`pbsens.kernels.rosenbrock`:
the method, its coefficients and their source, step-size control, stops); the
output times are then merged into the accepted-step grid from the dense output
by a second compiled call. This module validates arguments, binds the model's
compiled functions once per model and process, and turns failures into
:class:`~pbsens.errors.SolverError`. It knows nothing of numba beyond
importing the kernels on first use.
"""
from __future__ import annotations

import math
import numbers
import re

import numpy as np

from ..errors import PbsensError, SolverError
from .trajectory import Trajectory, check_t_eval, check_t_span

__all__ = ["solve_rosenbrock", "RosenbrockDenseOutput", "METHOD"]

#: The name the solver is registered under (``Trajectory.method``).
METHOD = "rodas5p"
_INITIAL_CAPACITY = 256          # steps; the kernel doubles its buffers when needed
_MIN_RTOL = 100 * np.finfo(float).eps


def _kernels():
    from ..kernels import rosenbrock  # numba kernels load on first use, not at import
    return rosenbrock


def is_autonomous(model) -> bool:
    """Whether the model's right-hand side cannot depend on time (decided from its specification).

    True when the time symbol appears in no ODE and no definition of
    ``model.spec``. Models without a specification (generated in code) count as
    non-autonomous, which is always correct and costs one extra right-hand side
    per step (the ``df/dt`` difference).
    """
    spec = getattr(model, "spec", None)
    if spec is None:
        return False
    pat = re.compile(rf"(?<![\w.]){re.escape(spec.time)}(?!\w)")
    texts = [str(e) for e in spec.odes.values()] + [str(d.expression) for d in spec.definitions]
    return not any(pat.search(s) for s in texts)


def _bound(model):
    """The addresses of the model's compiled ``rhs_into``/``jac_x_into`` and its autonomy; memoised on the model."""
    cache = model.__dict__.setdefault("_kernels", {})
    hit = cache.get(METHOD)
    if hit is None or hit[0] is not model.fns:
        from ..kernels.function_address import addresses
        from ..kernels.signatures import matrix_fn_sig, vector_fn_sig
        fns = model.fns   # kept in the memo: the addresses stay valid while it lives
        addr = np.array(addresses(fns.rhs_into, vector_fn_sig) + addresses(fns.jac_x_into, matrix_fn_sig),
                        dtype=np.int64)
        hit = (fns, addr, 1 if is_autonomous(model) else 0)
        cache[METHOD] = hit
    return hit[1], hit[2]


def _tolerance(v, name, nx):
    """A positive finite tolerance, scalar or one per state, as a vector of length ``nx``."""
    if (type(v) is float or type(v) is int) and 0 < v < math.inf and (name != "rtol" or v >= _MIN_RTOL):
        return np.full(nx, float(v))       # the common case, without the checks below
    if isinstance(v, bool):
        raise PbsensError(f"{name!r} must be a positive number or one per state, got {v!r}")
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a positive number or one per state, got {v!r}") from None
    if a.ndim == 0:
        a = np.full(nx, float(a))
    elif a.shape != (nx,):
        raise PbsensError(f"{name!r} must be a number or have one entry per state ({nx}), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise PbsensError(f"{name!r} must be positive and finite, got {v!r}")
    if name == "rtol" and np.any(a < _MIN_RTOL):
        raise PbsensError(f"'rtol' must be at least {_MIN_RTOL:.3g} (100 machine epsilons), got {v!r}")
    return a


def _positive_number(v, name, allow_inf=False):
    if type(v) is float and 0 < v < math.inf or (allow_inf and v == math.inf and type(v) is float):
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or math.isnan(v) or v <= 0 \
            or (math.isinf(v) and not allow_inf):
        raise PbsensError(f"{name!r} must be a positive number, got {v!r}")
    return float(v)


class RosenbrockDenseOutput:
    """The solver's continuous solution: ``sol(t)`` -> ``(nx,)`` for a scalar, ``(nx, m)`` for ``m`` times.

    Piecewise polynomials of degree 4 in time, one per accepted step (the
    method's dense output, :mod:`pbsens.kernels.rosenbrock`), continuous, and
    exact at the grid points. Like scipy's ``OdeSolution``; times must lie in
    ``[t_min, t_max]`` (no extrapolation).

    Attributes
    ----------
    ts : ndarray
        The accepted-step grid (segment boundaries).
    h_free : ndarray
        Per accepted step, the size the step control chose before the step was
        shortened to end at a stop (an output time with ``stop_at_outputs``, a
        ``tstops`` time, the end); ``diff(ts)`` where no step was shortened.
        :func:`pbsens.solvers.refine.refine_grid` measures intervals against it.
    t_min, t_max : float
    """

    def __init__(self, T, X, Dn, h_free=None):
        self.ts = T
        self.h_free = np.diff(T) if h_free is None else np.maximum(h_free, np.diff(T))
        self._X = X
        self._D = Dn
        self.t_min = float(T[0])
        self.t_max = float(T[-1])

    def __call__(self, t):
        tq = np.asarray(t, dtype=np.float64)
        scalar = tq.ndim == 0
        tq = np.ascontiguousarray(tq.reshape(-1))
        if not np.all(np.isfinite(tq)):
            raise PbsensError("'t' contains NaN or inf")
        if tq.size and (tq.min() < self.t_min or tq.max() > self.t_max):
            raise PbsensError(f"'t' must lie in [{self.t_min}, {self.t_max}] (the solved interval), "
                              f"got [{tq.min()}, {tq.max()}]")
        out = np.empty((tq.size, self._X.shape[1]))
        _kernels().dense_eval(self.ts, self._X, self._D, tq, out)
        return out[0] if scalar else out.T


def _fail(model, status, t, h, at_state, counts, max_steps):
    k = _kernels()
    where = f"state solve of model {model.name!r} failed at t = {t:.6g} (method {METHOD})"
    if status == k.STATUS_STEP_TOO_SMALL:
        msg = (f"{where}: step size {h:.3g} below the resolution of t (a singularity, a blow-up, or "
               f"tolerances the problem cannot meet)")
    elif status == k.STATUS_NOT_FINITE:
        if at_state:
            msg = f"{where}: the right-hand side or its Jacobian is NaN/inf at the current (finite) state"
        else:
            msg = (f"{where}: every trial step produced NaN/inf states, down to step size {h:.3g} "
                   f"(the solution leaves the model's domain or blows up)")
    elif status == k.STATUS_MAX_STEPS:
        msg = (f"{where}: 'max_steps' = {max_steps} steps taken ({counts[k.N_ACCEPTED]} accepted, "
               f"{counts[k.N_REJECTED]} rejected) before the end of t_span; raise max_steps if the "
               f"problem is just long")
    elif status == k.STATUS_SINGULAR:
        msg = (f"{where}: the iteration matrix I/(h gamma) - J is singular even after halving the "
               f"step size {k._MAX_SINGULAR} times (last h = {h:.3g})")
    else:  # pragma: no cover - every kernel status is handled above
        msg = f"{where}: status {status}"
    return SolverError(msg)


def solve_rosenbrock(model, t_span, t_eval=None, p=None, x0=None, rtol=1e-5, atol=1e-6, tstops=None,
                     first_step=None, max_step=math.inf, max_steps=100_000, dense_output=True,
                     stop_at_outputs=8) -> Trajectory:
    """Solve the state ODE with the compiled Rodas5P method; keep its accepted-step grid.

    Parameters
    ----------
    model, t_span, p, x0
        As for :func:`pbsens.solvers.solve_states`.
    t_eval : array_like, optional
        Output times inside ``t_span``; merged into the grid exactly, states
        there from the dense output (they are not stops: steps cross them).
    rtol, atol : float or array_like (n_states,)
        Relative and absolute tolerances, scalar or one per state: the local
        error estimate of each step, scaled by ``atol_i + rtol_i max(|x_i|,
        |x_new,i|)``, must have RMS norm at most 1 (as in scipy's ODE solvers).
    tstops : array_like, optional
        Times inside ``t_span`` where steps must end exactly (breakpoints of a
        right-hand side that jumps in time, dosing or event times). Strictly
        increasing. They are grid points of the result.
    first_step : float, optional
        Initial step size (default: chosen from the right-hand side at ``t0``).
    max_step : float
        Largest step size (default: unbounded).
    max_steps : int
        Give up (:class:`SolverError`) after this many steps, accepted plus
        rejected.
    dense_output : bool
        Keep the continuous solution in ``Trajectory.sol``.
    stop_at_outputs : bool or int
        Every ``k``-th output time (``k = stop_at_outputs``; True: every one) is a
        stop as in ``tstops``: a step ends there exactly, so no step holds more than
        ``k - 1`` output times inside it, whose states come from the dense output.
        The dense output's error inside a long step, though within the tolerance,
        can be far larger than the error at the step's ends: CaMKII at rtol 1e-5
        takes one step over [91.5, 492.8] near its steady state, with state errors
        2e-11 and 4e-13 (relative) at its ends and ~8e-12 at the 134 output times
        inside it, and post-hoc sensitivities amplify the state error there ~4e4
        times (median error of ``S`` 2.5e-7 with every output interpolated, 4e-12
        with ``k = 8``, 3.9e-12 with ``k = 1``; docs/PERFORMANCE.md). Default 8: a
        stop every 8 outputs costs CaMKII 22 steps (42 -> 64) and PKA about as
        many; ``k = 1`` costs a step per output time. False: steps cross output
        times freely (the state solve alone).

    Returns
    -------
    Trajectory
        ``method = "rodas5p"``; ``stats``: ``nfev`` (right-hand sides, including
        the ``df/dt`` differences and the initial-step trial), ``njev``, ``nlu``,
        ``n_solves`` (triangular solves), ``n_steps`` (accepted), ``n_rejected``.

    Raises
    ------
    PbsensError
        Bad arguments (the message names the argument).
    SolverError
        Step size below the resolution of ``t``, NaN/inf in the right-hand side,
        Jacobian or every trial step, ``max_steps`` reached, or a singular
        iteration matrix.
    """
    t0, t1 = check_t_span(t_span)
    te = check_t_eval(t_eval, (t0, t1))
    default_p = p is None
    p = model.check_p(p)
    if x0 is None:
        x0 = model.x0 if default_p else model.initial_state(p)   # model.x0: x0 at the default p
    else:
        x0 = model.check_x(x0, "x0")
    nx = model.n_states
    rtol_v = _tolerance(rtol, "rtol", nx)
    atol_v = _tolerance(atol, "atol", nx)
    ts = check_t_eval(tstops, (t0, t1), name="tstops")
    if isinstance(stop_at_outputs, (bool, np.bool_)):
        stride = 1 if stop_at_outputs else 0
    elif isinstance(stop_at_outputs, numbers.Integral) and stop_at_outputs >= 1:
        stride = int(stop_at_outputs)
    else:
        raise PbsensError(f"'stop_at_outputs' must be True, False or a positive integer, got {stop_at_outputs!r}")
    if stride and te is not None:
        every = te[stride - 1::stride]
        ts = every if ts is None else np.union1d(ts, every)
    if ts is None:
        stops = np.array([t1])
    else:
        inner = ts[(ts > t0) & (ts < t1)]
        stops = np.empty(inner.size + 1)
        stops[:-1] = inner
        stops[-1] = t1
    if first_step is None:
        h0 = 0.0
    else:
        h0 = _positive_number(first_step, "first_step")
        if h0 > t1 - t0:
            raise PbsensError(f"'first_step' = {first_step!r} is longer than t_span {(t0, t1)}")
    hmax = _positive_number(max_step, "max_step", allow_inf=True)
    if type(max_steps) is not int and (isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral)) \
            or max_steps < 1:
        raise PbsensError(f"'max_steps' must be a positive integer, got {max_steps!r}")
    fn_addr, autonomous = _bound(model)
    k = _kernels()
    counts = np.zeros(6, dtype=np.int64)
    info = np.zeros(3)
    status, T, X, Dn, Hf = k.rodas5p_solve(fn_addr, t0, x0, p, model.constants, rtol_v, atol_v, stops, h0, hmax,
                                       int(max_steps), autonomous, _INITIAL_CAPACITY, counts, info)
    if status != k.STATUS_OK:
        raise _fail(model, status, info[0], info[1], info[2] != 0.0, counts, max_steps)
    if te is not None:
        t_all = np.empty(T.size + te.size)
        x_all = np.empty((T.size + te.size, nx))
        idx = np.empty(te.size, dtype=np.int64)
        m = k.merge_outputs(T, X, Dn, te, t_all, x_all, idx)
        t_out, x_out = t_all[:m], x_all[:m]
    else:
        t_out, x_out, idx = T, X, None
    stats = {"nfev": int(counts[k.N_RHS]), "njev": int(counts[k.N_JAC]), "nlu": int(counts[k.N_LU]),
             "n_solves": int(counts[k.N_SOLVE]), "n_steps": int(counts[k.N_ACCEPTED]),
             "n_rejected": int(counts[k.N_REJECTED])}
    return Trajectory(t=t_out, x=x_out, p=p, x0=x0, t_eval=te, eval_index=idx,
                      sol=RosenbrockDenseOutput(T, X, Dn, Hf) if dense_output else None, method=METHOD,
                      rtol=rtol, atol=atol, stats=stats)
