"""scipy's ODE methods stepped by pbsens's own loop (public scipy API only).

:func:`integrate` drives one of scipy's public stepper classes
(:class:`scipy.integrate.LSODA`, ``BDF``, ``Radau``, ``RK45``, ``RK23``,
``DOP853``) step by step: constructor, ``step()``, ``status``, ``t``, ``y``,
``nfev``/``njev``/``nlu`` and ``dense_output()``, the pieces joined by
:class:`scipy.integrate.OdeSolution`. Without stop times the accepted steps are
exactly those of scipy's own driver. The loop is the one place where

* a solve that makes no progress is stopped (:class:`StepGuard`: a bound on
  right-hand-side evaluations, and a stall detector for solvers that keep
  calling the right-hand side at one time, as scipy's LSODA wrapper does when
  the solution is about to overflow);
* the solve stops exactly at given times and restarts there (``tstops``: SBML
  events, piecewise inputs; no step crosses one);
* the grid and the dense output are assembled.

:func:`solve_scipy` is the state solve of a :class:`~pbsens.model.model.Model`
on top of it (the implementation behind ``solve_states(method="LSODA")`` etc.);
:func:`pbsens.sensitivity.forward.forward_sensitivities` uses :func:`integrate` directly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, OdeSolution, Radau

from ..errors import PbsensError, SolverError
from .trajectory import Trajectory, merge_grid

__all__ = ["STEPPERS", "WITH_JACOBIAN", "StepGuard", "Steps", "integrate", "solve_scipy"]

#: scipy's stepper classes by method name.
STEPPERS = {"LSODA": LSODA, "BDF": BDF, "Radau": Radau, "RK45": RK45, "RK23": RK23, "DOP853": DOP853}
#: The methods that use a Jacobian (the others ignore one).
WITH_JACOBIAN = ("LSODA", "BDF", "Radau")


class _Stop(Exception):
    """Raised inside the right-hand side by :class:`StepGuard`; :func:`integrate` turns it into SolverError."""

    def __init__(self, t, why):
        super().__init__(why)
        self.t, self.why = t, why


class StepGuard:
    """Stops a solve that makes no progress, from inside its right-hand side.

    Parameters
    ----------
    n : int
        Dimension of the system (sets the stall limit).
    max_nfev : int, optional
        Give up after this many right-hand-side evaluations (None: no bound).
    check_finite : bool
        Give up when the right-hand side is NaN or inf.

    Notes
    -----
    The stall limit: more than ``10 n + 1000`` consecutive calls at one ``t``.
    A step needs far fewer (Newton iterations, a finite-difference Jacobian
    with ``n`` calls); scipy's LSODA wrapper exceeds it only when it loops for
    ever at one time (the solution about to overflow).
    """

    def __init__(self, n, max_nfev=None, check_finite=False):
        self.stall_limit = 10 * int(n) + 1000
        self.max_nfev = max_nfev
        self.check_finite = check_finite
        self.calls = 0
        self._t = None
        self._same_t = 0

    def wrap(self, fun):
        """``fun(t, y)`` with the checks around it."""
        max_nfev, check_finite = self.max_nfev, self.check_finite

        def guarded(t, y):
            self.calls += 1
            if t == self._t:
                self._same_t += 1
                if self._same_t > self.stall_limit:
                    raise _Stop(float(t), "the solver stopped advancing (solution overflowing?)")
            else:
                self._t, self._same_t = t, 0
            if max_nfev is not None and self.calls > max_nfev:
                raise _Stop(float(t), f"more than max_nfev = {max_nfev} right-hand-side evaluations "
                                      f"(stuck near t = {t:.6g}; raise max_nfev if the problem is just long)")
            out = fun(t, y)
            if check_finite and not np.all(np.isfinite(out)):
                raise _Stop(float(t), f"the right-hand side is NaN/inf at t = {t:.6g}")
            return out

        return guarded


@dataclass
class Steps:
    """What :func:`integrate` returns: the accepted steps and the solver's counts."""

    t: np.ndarray      # (K,) t0, every accepted step, every tstop, t1
    y: np.ndarray      # (K, n)
    sol: object        # OdeSolution over [t0, t1], or None
    nfev: int
    njev: int
    nlu: int


def integrate(method, fun, t_span, y0, *, rtol, atol, jac=None, tstops=None, dense_output=True,
              guard=None, what="solve", **options):
    """Step scipy's ``method`` from ``t_span[0]`` to ``t_span[1]``, stopping exactly at ``tstops``.

    Parameters
    ----------
    method : str
        A key of :data:`STEPPERS`.
    fun : callable
        ``fun(t, y) -> dy/dt``.
    t_span : (float, float)
        Validated, increasing.
    y0 : ndarray
    rtol, atol :
        Tolerances as scipy takes them.
    jac : callable, optional
        Jacobian for the implicit methods (dense or sparse, as scipy accepts).
    tstops : ndarray, optional
        Sorted times strictly inside ``t_span``: each segment between two
        stops is a fresh solve started from where the last one ended, so no
        step crosses a stop and every stop is a grid point.
    dense_output : bool
        Keep the interpolants (``Steps.sol``).
    guard : StepGuard, optional
        Wraps ``fun`` (default: a stall detector only).
    what : str
        The solve's name for error messages (e.g. ``"state solve of model 'PKA'"``).
    **options
        Passed to the stepper class (``max_step``, ``first_step``, ...).

    Raises
    ------
    PbsensError
        scipy rejects the options.
    SolverError
        A step fails, the guard fires, or the linear algebra breaks down.
    """
    cls = STEPPERS[method]
    guard = guard or StepGuard(np.size(y0))
    f = guard.wrap(fun)
    if jac is not None and method in WITH_JACOBIAN:
        options["jac"] = jac
    t0, t1 = t_span
    ends = list(tstops if tstops is not None else ()) + [t1]
    ts, ys, pieces = [t0], [np.array(y0, dtype=np.float64)], []
    nfev = njev = nlu = 0
    t, y = t0, ys[0]
    with np.errstate(all="ignore"):
        for end in ends:
            try:
                solver = cls(f, t, y, end, rtol=rtol, atol=atol, **options)
            except (ValueError, TypeError) as exc:
                raise PbsensError(f"solver options rejected by scipy's {method}: {exc}") from None
            except _Stop as exc:
                raise SolverError(f"{what} failed at t = {exc.t:.6g} (method {method}): {exc.why}") from None
            try:
                while solver.status == "running":
                    message = solver.step()
                    if solver.status == "failed":
                        raise SolverError(f"{what} failed at t = {solver.t:.6g} (method {method}): {message}")
                    ts.append(solver.t)
                    ys.append(solver.y.copy())
                    if dense_output:
                        pieces.append(solver.dense_output())
            except _Stop as exc:
                raise SolverError(f"{what} failed at t = {exc.t:.6g} (method {method}): {exc.why}") from None
            except (RuntimeError, np.linalg.LinAlgError, ZeroDivisionError) as exc:  # SuperLU: singular
                raise SolverError(f"{what} failed near t = {solver.t:.6g} (method {method}): {exc}") from None
            except ValueError as exc:   # scipy's LU of a Jacobian with NaN/inf entries (Radau, BDF)
                hint = ""
                if "infs or NaNs" in str(exc):
                    hint = ("; the Jacobian has NaN/inf entries there (e.g. a power x**h "
                            "differentiated at x = 0); LSODA may pass where it starts without one")
                raise SolverError(f"{what} failed near t = {solver.t:.6g} (method {method}): {exc}{hint}") \
                    from None
            nfev += solver.nfev
            njev += solver.njev
            nlu += solver.nlu
            if ts[-1] != end:  # LSODA lands on its critical time within rounding: make the stop exact
                if abs(ts[-1] - end) > 1e-12 * max(abs(end), abs(t1 - t0)):
                    raise SolverError(f"{what}: the solver ended at t = {ts[-1]!r}, not at {end!r} "
                                      f"(method {method})")
                ts[-1] = end
            t, y = end, ys[-1]
    sol = OdeSolution(np.array(ts), pieces) if dense_output else None
    return Steps(t=np.array(ts), y=np.array(ys), sol=sol, nfev=int(nfev), njev=int(njev), nlu=int(nlu))


def solve_scipy(model, t_span, t_eval=None, p=None, x0=None, rtol=1e-5, atol=1e-6, tstops=None,
                dense_output=True, max_nfev=1_000_000, *, method="LSODA", **options):
    """State solve with one of scipy's methods (the registry contract of :mod:`pbsens.solvers`).

    ``solve_states`` validates the arguments before calling; ``method`` is a key
    of :data:`STEPPERS` (bound by the registry). The compiled Jacobian
    ``jac_x`` is given to the implicit methods.
    """
    p = model.check_p(p)
    x0 = model.initial_state(p) if x0 is None else model.check_x(x0, "x0")
    fns, c = model.fns, model.constants
    nx = model.n_states
    rhs_into, jac_x_into = fns.rhs_into, fns.jac_x_into

    def fun(t, x):
        out = np.empty(nx)
        rhs_into(float(t), np.ascontiguousarray(x, dtype=np.float64), p, c, out)
        return out

    def jac(t, x):
        out = np.empty((nx, nx))
        jac_x_into(float(t), np.ascontiguousarray(x, dtype=np.float64), p, c, out)
        return out

    jac = options.pop("jac", jac)
    steps = integrate(method, fun, t_span, x0, rtol=rtol, atol=atol, jac=jac, tstops=tstops,
                      dense_output=dense_output or t_eval is not None,
                      guard=StepGuard(nx, max_nfev=max_nfev, check_finite=True),
                      what=f"state solve of model {model.name!r}", **options)
    tg, xg = steps.t, steps.y
    if not np.all(np.isfinite(xg)):
        k = int(np.argmax(~np.all(np.isfinite(xg), axis=1)))
        raise SolverError(f"state solve of model {model.name!r} produced NaN/inf at t = {tg[k]:.6g}")
    if t_eval is not None:
        t, x, idx = merge_grid(tg, xg, t_eval, steps.sol)
    else:
        t, x, idx = tg, xg, None
    stats = {"nfev": steps.nfev, "njev": steps.njev, "nlu": steps.nlu, "n_steps": int(tg.size - 1)}
    return Trajectory(t=np.ascontiguousarray(t), x=np.ascontiguousarray(x), p=p, x0=x0, t_eval=t_eval,
                      eval_index=idx, sol=steps.sol if dense_output else None, method=method,
                      rtol=rtol, atol=atol, stats=stats, tstops=tstops)
