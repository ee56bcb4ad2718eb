"""Steady states ``f(t, x, p) = 0`` and their parameter sensitivities.

:func:`steady_state` finds the state a trajectory settles to and
``S = dx_ss/dp``:

1. **State.** By default (``strategy="simulate"``) the states are integrated
   from ``x0`` over horizons growing tenfold (from ``t``, the time advancing as
   in a simulation) until the weighted norm of the right-hand side
   ``sqrt(mean((f_i / (atol + rtol |x_i|))^2))`` is below 1, and the result is
   polished by a few damped Newton steps. ``strategy="newton"`` tries damped
   Newton from ``x0`` first and falls back to the simulation when it does not
   converge (faster, but may find another steady state than the one reached
   from ``x0`` when there are several).

   The approach is integrated by the compiled Rodas5P (``solver="rodas5p"``)
   unless the caller names another solver, within a budget of ``max_nfev``
   right-hand-side evaluations over all horizons; a failed or over-budget
   approach raises :class:`SolverError` naming the solver, its tolerances and the
   options to change. Rodas5P, not LSODA, because biochemical steady states are
   stiff and LSODA's stiffness detection can miss them near equilibrium: each
   horizon restarts LSODA in its non-stiff Adams mode, and at tight tolerances its
   corrector counts as converged after one evaluation (correction below
   ``100 eps`` times the weighted norm of ``x``, i.e. about ``1e-3`` at rtol
   1e-11), so the Lipschitz estimate its switch to BDF needs is never formed. On
   Brannmark_JBC2010's preequilibration (an eigenvalue of -5e5) LSODA at rtol
   1e-11, atol 1e-13 then stays at order 1 with a step of 1.2e-6 (one evaluation
   per step, 1e6 evaluations for 1.2 time units), or switches to BDF within 21
   steps, depending on the last bits of the parameters (8 of 20 perturbations by
   1e-15 relative got stuck; ``tests/test_steady_state_robust.py``). Rodas5P took
   the same 1008 evaluations on all 20.
2. **Conservation laws.** Newton steps and sensitivities respect the model's
   linear conservation laws ``L^T x = const`` (e.g. total protein): ``L`` spans
   the left null space of ``A = df/dx`` at the steady state (numerically, from
   its singular value decomposition) and each of its columns must also satisfy
   ``L^T B = 0`` (``B = df/dp``), which every structural conservation law does.
3. **Sensitivities.** Differentiating ``f(x_ss(p), p) = 0`` gives
   ``A S = -B``. When ``A`` is regular, ``S = -A^{-1} B`` (independent of
   ``S0``). When ``A`` is singular because of conservation laws, the steady
   state depends on the conserved totals, which the initial state fixes:
   ``L^T S = L^T S0``. pbsens solves the stacked, consistent system
   ``[A; L^T] S = [-B; L^T S0]`` by least squares (the projection onto the
   conserved subspace, exactly what integrating ``S' = A S + B`` from ``S0``
   to infinity would give when the other eigenvalues of ``A`` are negative).
   This Newton form needs each null direction ``l`` to be a conservation law
   along the whole approach (``l^T A = 0`` and ``l^T B = 0`` everywhere, so
   ``l^T S`` stays ``l^T S0``), which pbsens checks at the steady state, the
   start, their midpoint and one random positive state, on the columns of ``S``
   asked for (``columns``). A law that depends on the parameters (``x' = -a x``,
   ``z' = b x`` conserves ``b x + a z``), a zero eigenvalue of a non-conserved
   direction, or ``l^T B != 0`` at the steady state leave ``A S = -B`` without a
   unique (or any) solution.
4. **Sensitivities by integration** (``sensitivity_mode="auto"``, the default, where
   the Newton form is not defined; AMICI's integration-only mode, always with
   ``"integrate"``): states and sensitivities are integrated together from
   ``x0``, ``S0`` (:func:`pbsens.forward_sensitivities`, the compiled augmented
   Rodas5P at ``rtol/10``, ``atol/10``, the selected columns only) over horizons
   1, 10, 100, ... until, at the end of a horizon, the state has converged (as
   in 1.), the weighted norm of ``dS/dt = A S + B`` and that of the change of
   ``S`` over the horizon are below 1 (weights ``atol + rtol max(|S_ij|,
   max_i |S_ij|)``, i.e. relative to each column's size). Where ``l^T B != 0`` at
   the steady state, ``l^T S`` grows like ``t l^T B``: the limit does not exist.
   When ``S`` does not settle (within ``max_time``/``max_nfev``, or its integration
   fails on a later horizon), ``S`` is that of the approach at the first horizon end
   where the states had settled: the derivative of the preequilibration as the
   finite-time simulation the states come from (``sensitivities="finite-time"``, with
   a note saying so; a multi-start fit that starts in such a region then still gets a
   direction out of it). Only when not even that point was reached, a
   :class:`SolverError` naming the parameters. ``return_info``'s ``sensitivities``
   says which way was taken (``"newton"``, ``"integration"`` or ``"finite-time"``),
   ``note`` why.
   ``sensitivity_mode="newton"`` raises :class:`SolverError` instead of integrating.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError, SolverError
from ..solvers.trajectory import check_time

__all__ = ["steady_state", "conservation_laws"]

#: Relative size of a singular value of ``A`` counted as zero.
_RANK_TOL = 1e-11


def _wrms(f, x, rtol, atol):
    return float(np.sqrt(np.mean((f / (atol + rtol * np.abs(x))) ** 2))) if f.size else 0.0


def conservation_laws(A, B=None, tol=_RANK_TOL):
    """Left null vectors ``L`` (nx, m) of ``A`` that are conservation laws (``L^T B = 0``).

    Returns ``(L, inconsistent)``: the orthonormal basis of the left null space
    of ``A`` and a bool telling whether some null direction fails ``L^T B = 0``.
    """
    U, s, _ = np.linalg.svd(A)
    if s.size == 0 or s[0] == 0.0:
        L = U
    else:
        L = U[:, s <= tol * s[0]]
    inconsistent = False
    if B is not None and L.shape[1] and B.size:
        scale = max(np.abs(B).max(), 1e-300)
        inconsistent = bool(np.abs(L.T @ B).max() > 1e-7 * scale)
    return L, inconsistent


def _newton(model, t, x, p, rtol, atol, max_steps):
    """Damped Newton on ``f = 0`` keeping ``L^T x`` fixed; returns (x, wrms, converged)."""
    f = model.rhs(t, x, p)
    err = _wrms(f, x, rtol, atol)
    for _ in range(max_steps):
        if err < 1e-3:
            return x, err, True
        A = model.jac_x(t, x, p)
        L, _ = conservation_laws(A)
        M = np.vstack([A, L.T]) if L.shape[1] else A
        rhs = np.concatenate([-f, np.zeros(L.shape[1])])
        try:
            delta = np.linalg.lstsq(M, rhs, rcond=None)[0]
        except np.linalg.LinAlgError:
            return x, err, False
        lam, accepted = 1.0, False
        while lam > 1e-4:
            xn = x + lam * delta
            fn = model.rhs(t, xn, p)
            en = _wrms(fn, xn, rtol, atol)
            if np.all(np.isfinite(fn)) and en < err:
                x, f, err, accepted = xn, fn, en, True
                break
            lam *= 0.5
        if not accepted:
            break
    return x, err, err < 1.0


def _plausible(model, t, x0, x, p, atol):
    """A Newton result is kept only if it is stable (no eigenvalue of ``A`` with a positive real part)
    and keeps non-negative starting states non-negative; otherwise the simulation decides."""
    if np.all(x0 >= 0) and np.any(x < -10 * atol):
        return False
    A = model.jac_x(t, x, p)
    try:
        ev = np.linalg.eigvals(A)
    except np.linalg.LinAlgError:
        return False
    scale = max(np.abs(A).max(), 1e-300)
    return bool(np.all(ev.real <= 1e-8 * scale))


#: Right-hand-side evaluations per step of the compiled Rodas5P (its 8 stages share one ``f(x)``; plus
#: ``df/dt`` when the model depends on time): the approach's ``max_nfev`` becomes its ``max_steps``.
_RODAS5P_NFEV_PER_STEP = 8


def _budget(solver, rest):
    """The solver's own limit for a horizon when ``rest`` evaluations of the budget remain."""
    from ..solvers import SOLVERS, _accepts
    from ..solvers.rosenbrock import METHOD
    if solver == METHOD:
        return {"max_steps": max(1, rest // _RODAS5P_NFEV_PER_STEP)}
    fn = SOLVERS.get(solver)
    if fn is not None and _accepts(fn, "max_nfev"):
        return {"max_nfev": max(1, rest)}
    return {}


def _advice(rtol, atol, max_nfev):
    return ("change steady_state's options (steady_state_options={...} of Problem.evaluate, simulate and "
            "condition_estimates; Problem.evaluate's solver, rtol, atol set them too): "
            f"'max_nfev' (now {max_nfev}), 'solver' ('rodas5p' or 'BDF' for stiff models), "
            f"'rtol'/'atol' (now {rtol:g}/{atol:g}; the approach is integrated 10x tighter), "
            "or strategy='newton'")


def _simulate_to_steady_state(model, t, x, p, rtol, atol, solver, max_time, sim_rtol, sim_atol, max_nfev):
    """Integrate over horizons 1, 10, 100, ... until converged; return (x, t reached, wrms, evaluations)."""
    from ..solvers import solve_states
    f = model.rhs(t, x, p)
    err = _wrms(f, x, rtol, atol)
    horizon, elapsed, used = 1.0, 0.0, 0
    what = (f"steady state of model {model.name!r}: the approach by solver {solver!r} "
            f"(rtol {sim_rtol:g}, atol {sim_atol:g})")
    while err >= 1.0:
        if elapsed >= max_time:
            raise SolverError(f"steady state of model {model.name!r}: no steady state within time {max_time:.3g} "
                              f"of the start (weighted norm of f = {err:.3g}, needs < 1); raise 'max_time' or "
                              "check that the model has a stable steady state")
        a, b = t + elapsed, t + elapsed + horizon
        if used >= max_nfev:
            raise SolverError(f"{what} used {used} right-hand-side evaluations, the budget max_nfev = {max_nfev}, "
                              f"by t = {a:.6g} (weighted norm of f = {err:.3g}, needs < 1); "
                              + _advice(rtol, atol, max_nfev))
        try:
            tr = solve_states(model, (a, b), p=p, x0=x, method=solver, rtol=sim_rtol, atol=sim_atol,
                              dense_output=False, **_budget(solver, max_nfev - used))
        except SolverError as exc:
            raise SolverError(f"{what} failed on the horizon [{a:.6g}, {b:.6g}] after {used} of max_nfev = "
                              f"{max_nfev} right-hand-side evaluations (the solver was given the rest): {exc}; "
                              + _advice(rtol, atol, max_nfev)) from None
        used += int(tr.stats.get("nfev", 0)) if tr.stats else 0
        elapsed += horizon
        horizon *= 10.0
        x = tr.x[-1].copy()
        f = model.rhs(t + elapsed, x, p)
        err = _wrms(f, x, rtol, atol)
    return x, t + elapsed, err, used


def steady_state(model, p=None, x0=None, S0=None, *, sensitivities=True, t=0.0, strategy="simulate",
                 rtol=1e-8, atol=1e-10, solver="rodas5p", max_time=1e12, max_nfev=200_000, newton_steps=20,
                 return_info=False, columns=None, sensitivity_mode="auto"):
    """Steady state ``x_ss`` reached from ``x0`` and its sensitivity ``S_ss = dx_ss/dp``.

    Parameters
    ----------
    model : Model
    p : array_like, optional
        Parameters (default: the model's).
    x0 : array_like, optional
        Starting state (default ``model.initial_state(p)``).
    S0 : array_like (nx, np), optional
        ``dx0/dp``; matters only when the model has conservation laws (the
        totals it fixes determine the steady state). Default:
        ``model.initial_sensitivity(p)``.
    sensitivities : bool
        Compute ``S_ss`` (else ``None`` is returned in its place).
    t : float
        Time at which the approach starts (the right-hand side may depend on
        the time; the states are integrated forward from ``t``).
    strategy : {"simulate", "newton"}
        ``"simulate"``: integrate until converged, then polish with Newton.
        ``"newton"``: Newton from ``x0`` first, the simulation if that fails.
    rtol, atol : float
        Convergence: ``sqrt(mean((f_i / (atol + rtol |x_i|))^2)) < 1``; the
        approach is integrated with ``rtol/10``, ``atol/10``.
    solver : str
        :func:`pbsens.solve_states` method of the approach (default the compiled
        Rodas5P; see the module docstring for why not LSODA).
    max_time : float
        Give up (:class:`SolverError`) after integrating this long.
    max_nfev : int
        Give up (:class:`SolverError`) after about this many right-hand-side
        evaluations of the approach, all horizons together (the approach of
        Brannmark_JBC2010 takes about 1000). Each horizon's solve gets the rest
        as its own limit: ``max_nfev`` for scipy's solvers, ``max_steps`` = rest / 8
        for Rodas5P.
    newton_steps : int
        Maximum number of Newton steps.
    return_info : bool
        Also return a dict: ``strategy`` used ("newton" or "simulate"),
        ``time`` reached, ``wrms`` (the weighted norm of ``f`` at ``x_ss``),
        ``conservation_laws`` (their number), ``solver`` (of the approach; None
        when Newton alone converged), ``nfev`` (the approach's right-hand-side
        evaluations), ``sensitivities`` (``"newton"``, ``"integration"`` or None),
        ``note`` (why the sensitivities were integrated, else None),
        ``sensitivity_time`` and ``sensitivity_nfev`` (the integration's end time
        and right-hand-side evaluations of the augmented system; 0 for Newton).
    columns : array_like of int or bool (np,), optional
        The columns (parameters) of ``S_ss`` wanted; the others are returned as
        zero, and only the wanted ones must satisfy the Newton form's
        conditions (a parameter fixed at 0 that switches a reaction off leaves a
        null direction that is a law for every other parameter). Default: all.
    sensitivity_mode : {"auto", "newton", "integrate"}
        How ``S_ss`` is found (module docstring, 3. and 4.): the Newton form where
        it is defined, else by integration (``"auto"``); the Newton form or
        :class:`SolverError`; always by integration.

    Returns
    -------
    (x_ss, S_ss) : ndarray (nx,), ndarray (nx, np) or None
        (and ``info`` when ``return_info``)

    Raises
    ------
    PbsensError
        Bad arguments (named).
    SolverError
        No steady state within ``max_time``, the approach failed or took more than
        ``max_nfev`` evaluations (the message names the solver, its tolerances and
        the options to change), non-finite values, or a singular Jacobian whose
        null space is not made of conservation laws.
    """
    p = model.check_p(p)
    if x0 is None:
        x = model.initial_state(p)
    else:
        x = model.check_x(x0, "x0").copy()
    if S0 is None:
        S0 = model.initial_sensitivity(p)
    else:
        S0 = model.check_S(S0)
    if strategy not in ("simulate", "newton"):
        raise PbsensError(f"'strategy' must be 'simulate' or 'newton', got {strategy!r}")
    for name, v in (("rtol", rtol), ("atol", atol), ("max_time", max_time)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v) or v <= 0:
            raise PbsensError(f"{name!r} must be a positive finite number, got {v!r}")
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) or max_nfev < 1:
        raise PbsensError(f"'max_nfev' must be a positive integer, got {max_nfev!r}")
    if not isinstance(solver, str):
        raise PbsensError(f"'solver' must be the name of a state solver, got {solver!r}")
    if sensitivity_mode not in _MODES:
        raise PbsensError(f"'sensitivity_mode' must be one of {', '.join(map(repr, _MODES))}, got {sensitivity_mode!r}")
    cols = _check_columns(model, columns)
    t = check_time(t, "t")
    x_start = x.copy()

    used, t_ss, converged, nfev, approach = strategy, t, False, 0, None
    if strategy == "newton":
        xn, err, converged = _newton(model, t, x, p, rtol, atol, newton_steps)
        converged = converged and _plausible(model, t, x, xn, p, atol)
        if converged:
            x = xn
        else:
            used = "simulate"
    if not converged:
        x, t_ss, err, nfev = _simulate_to_steady_state(model, t, x, p, rtol, atol, solver, max_time,
                                                       rtol / 10.0, atol / 10.0, int(max_nfev))
        approach = solver
        x, err, _ = _newton(model, t_ss, x, p, rtol, atol, newton_steps)
    if not np.all(np.isfinite(x)):
        raise SolverError(f"steady state of model {model.name!r} is NaN/inf")
    A = model.jac_x(t_ss, x, p)
    L, _ = conservation_laws(A)
    info = {"strategy": used, "time": t_ss, "wrms": err, "conservation_laws": int(L.shape[1]),
            "solver": approach, "nfev": nfev, "sensitivities": None, "note": None,
            "sensitivity_time": None, "sensitivity_nfev": 0}
    S = None
    if sensitivities:
        why = None if sensitivity_mode == "integrate" else _newton_form_defect(model, t, t_ss, x_start, x, p, cols)
        if sensitivity_mode == "integrate" or why is not None:
            if sensitivity_mode == "newton":
                raise SolverError(f"steady state of model {model.name!r}: {why}; the steady-state sensitivities "
                                  "are not defined by A S = -B there (sensitivity_mode='auto' integrates them)")
            why = why or "sensitivity_mode='integrate'"
            S, t_s, nfev_s, unsettled = _integrate_sensitivity(model, t, x_start, p, S0, cols, rtol, atol, max_time,
                                                               int(max_nfev), why, t_ss)
            info.update(sensitivities="integration", sensitivity_time=t_s, sensitivity_nfev=nfev_s,
                        note=f"steady-state sensitivities integrated to t = {t_s:.6g} ({why})")
            if unsettled:
                info.update(sensitivities="finite-time", note=(
                    f"steady-state sensitivities not defined ({why}; {unsettled}): S is that of the approach at "
                    f"t = {t_s:.6g}, where the states had settled, i.e. the derivative of the preequilibration "
                    "as a finite-time simulation"))
        else:
            S = steady_state_sensitivity(model, t_ss, x, p, S0, cols)
            info["sensitivities"] = "newton"
    return (x, S, info) if return_info else (x, S)


_MODES = ("auto", "newton", "integrate")


def _check_columns(model, columns):
    """The wanted columns of ``S`` as sorted unique indices."""
    n = model.n_params
    if columns is None:
        return np.arange(n, dtype=np.int64)
    try:
        c = np.asarray(columns)
    except (TypeError, ValueError):
        c = None
    if c is not None and c.dtype == bool:
        if c.shape != (n,):
            raise PbsensError(f"'columns' as a mask must have {n} entries (one per parameter), got shape {c.shape}")
        return np.flatnonzero(c).astype(np.int64)
    if c is None or c.ndim != 1 or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise PbsensError(f"'columns' must be parameter indices or a boolean mask, got {columns!r}")
    if c.size and (c.min() < 0 or c.max() >= n):
        raise PbsensError(f"'columns' holds an index outside 0..{n - 1}: {columns!r}")
    return np.unique(c).astype(np.int64)


def _law_defect(model, t, x, p, L, cols, b_scale):
    """``(largest |L^T A| relative to |A|, largest |L^T B[:, cols]| relative to b_scale, its parameter)`` at ``x``."""
    A = model.jac_x(t, x, p)
    B = model.jac_p(t, x, p)[:, cols]
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
        return 0.0, 0.0, None
    la = float(np.abs(L.T @ A).max()) / max(float(np.abs(A).max()), 1e-300)
    LB = np.abs(L.T @ B)
    worst = int(cols[np.argmax(LB.max(axis=0))])
    return la, float(LB.max()) / b_scale, worst


#: how :func:`_newton_form_defect`'s reason begins where ``S`` cannot settle (``l^T B != 0`` at the steady state)
_GROWS = ("the Jacobian df/dx is singular but its null directions are not conservation laws: L^T df/dp != 0 at "
          "the steady state ")


def _newton_form_defect(model, t0, t_ss, x0, x_ss, p, cols):
    """None when every null direction of ``A`` at the steady state is a conservation law (on the wanted
    columns) at the steady state, the start, their midpoint and a random positive state; else why not.
    ``L^T B`` is measured against the largest ``|B|`` at the steady state and the start (``B`` may vanish
    at the steady state)."""
    A = model.jac_x(t_ss, x_ss, p)
    L, _ = conservation_laws(A)
    if L.shape[1] == 0 or cols.size == 0:
        return None
    b_scale = max(float(np.abs(model.jac_p(t_ss, x_ss, p)[:, cols]).max()),
                  float(np.nan_to_num(np.abs(model.jac_p(t0, x0, p)[:, cols])).max()), 1e-300)
    _, lb, worst = _law_defect(model, t_ss, x_ss, p, L, cols, b_scale)
    if lb > 1e-7:
        return _GROWS + (f"(largest for parameter {model.param_names[worst]!r}), so S grows without bound along "
                         "them")
    u = np.random.default_rng(0).uniform(-1.0, 1.0, x_ss.size)
    for where, tt, xx in (("the start", t0, x0), ("halfway from the start", t_ss, 0.5 * (x0 + x_ss)),
                          ("a random positive state", t_ss, (1.0 + np.abs(x_ss)) * np.exp(u))):
        la, lb, worst = _law_defect(model, tt, xx, p, L, cols, b_scale)
        if la > 1e-6 or lb > 1e-6:
            what = "df/dx" if la > 1e-6 else f"df/dp (parameter {model.param_names[worst]!r})"
            return (f"the Jacobian df/dx is singular at the steady state but its null directions are not "
                    f"conservation laws ({what} moves them at {where})")
    return None


def _integrate_sensitivity(model, t, x0, p, S0, cols, rtol, atol, max_time, max_nfev, why, t_states=None):
    """``(S, t reached, evaluations, unsettled)``: ``S`` by integrating states and sensitivities from
    ``(x0, S0)`` until both settle (module docstring, 4.); ``unsettled`` None. Where ``S`` does not
    settle (or its integration fails later), ``S`` at the first horizon end at or after ``t_states``
    (the time the states settled, on the same horizons) and ``unsettled`` saying why: the derivative
    of the approach as a finite-time simulation. Without such a point, :class:`SolverError`."""
    from ..sensitivity.forward import forward_sensitivities
    nx = model.n_states
    S_full = np.zeros((nx, model.n_params))
    if cols.size == 0:
        return S_full, t, 0, None
    x, S = np.array(x0, dtype=np.float64), np.ascontiguousarray(S0[:, cols], dtype=np.float64)
    horizon, elapsed, used, errs = 1.0, 0.0, 0, (np.inf, np.inf, np.inf)
    at_states = None                      # (t, S) where the states had settled
    what = f"steady state of model {model.name!r}: {why}; integrating the sensitivities (rodas5p, " \
           f"rtol {rtol / 10:g}, atol {atol / 10:g})"

    def give_up(message):
        if at_states is None:
            raise SolverError(message)
        S_full[:, cols] = at_states[1]
        return S_full, at_states[0], used, message.replace(what, "").strip(" :")

    while True:
        if elapsed >= max_time or used >= max_nfev:
            limit = f"time {max_time:.3g}" if elapsed >= max_time else f"max_nfev = {max_nfev} evaluations"
            return give_up(f"{what} did not settle within {limit} (weighted norms at t = {t + elapsed:.6g}: "
                           f"f {errs[0]:.3g}, dS/dt {errs[1]:.3g}, change of S over the last horizon "
                           f"{errs[2]:.3g}; each needs < 1): the steady-state sensitivities are not defined; "
                           "raise 'max_time'/'max_nfev' if they only converge slowly")
        a, b = t + elapsed, t + elapsed + horizon
        try:
            r = forward_sensitivities(model, (a, b), t_eval=[b], p=p, x0=x, S0=S, method="rodas5p",
                                      rtol=rtol / 10.0, atol=atol / 10.0, params=cols,
                                      max_steps=max(1, (max_nfev - used) // _RODAS5P_NFEV_PER_STEP))
        except SolverError as exc:
            return give_up(f"{what} failed on the horizon [{a:.6g}, {b:.6g}]: {exc}")
        stats = r.options.get("stats") or {}
        used += int(stats.get("nfev", stats.get("n_steps", 1) * _RODAS5P_NFEV_PER_STEP))
        elapsed += horizon
        horizon *= 10.0
        xn, Sn = np.array(r.x[-1]), np.array(r.S[-1])
        if not (np.all(np.isfinite(xn)) and np.all(np.isfinite(Sn))):
            return give_up(f"{what}: NaN/inf by t = {b:.6g}")
        dS = model.jac_x(b, xn, p) @ Sn + model.jac_p(b, xn, p)[:, cols]
        w = atol + rtol * np.maximum(np.abs(Sn), np.abs(Sn).max(axis=0, keepdims=True))
        errs = (_wrms(model.rhs(b, xn, p), xn, rtol, atol), float(np.sqrt(np.mean((dS / w) ** 2))),
                float(np.sqrt(np.mean(((Sn - S) / w) ** 2))))
        x, S = xn, Sn
        if max(errs) < 1.0:
            S_full[:, cols] = S
            return S_full, b, used, None
        if at_states is None and t_states is not None and b >= t_states * (1 - 1e-12) and errs[0] < 1.0:
            at_states = (b, S.copy())
            if why.startswith(_GROWS):     # S cannot settle: no use integrating on
                return give_up(f"{what}: l^T S grows like t l^T df/dp")


def steady_state_sensitivity(model, t, x, p, S0, columns=None):
    """``S`` with ``A S = -B`` and ``L^T S = L^T S0`` (see the module docstring); the columns not in
    ``columns`` (indices, default all) are zero."""
    cols = np.arange(model.n_params) if columns is None else np.asarray(columns, dtype=np.int64)
    A = model.jac_x(t, x, p)
    B = model.jac_p(t, x, p)[:, cols]
    S0 = np.asarray(S0)[:, cols]


    L, inconsistent = conservation_laws(A, B)
    if inconsistent:
        raise SolverError(f"steady state of model {model.name!r}: the Jacobian df/dx is singular but its null "
                          "directions are not conservation laws (L^T df/dp != 0); the steady-state "
                          "sensitivities are not defined there")
    if L.shape[1] == 0:
        try:
            S = -np.linalg.solve(A, B)
        except np.linalg.LinAlgError:
            raise SolverError(f"steady state of model {model.name!r}: df/dx is singular") from None
    else:
        M = np.vstack([A, L.T])
        R = np.vstack([-B, L.T @ S0])
        S = np.linalg.lstsq(M, R, rcond=None)[0]
    if not np.all(np.isfinite(S)):
        raise SolverError(f"steady-state sensitivities of model {model.name!r} are NaN/inf")
    out = np.zeros((model.n_states, model.n_params))
    out[:, cols] = S
    return out
