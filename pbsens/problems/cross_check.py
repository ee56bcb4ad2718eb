"""A cross-check of a PEtab problem's log-likelihood and gradient, condition by condition (issue #39).

:func:`cross_check` (also :meth:`Problem.cross_check`, and ``Problem.evaluate(..., cross_check=True)``)
computes each simulation condition's contribution twice, by independent means, and compares the
difference with what the two computations' own error estimates allow:

* **llh** by the evaluation's state solver (default the compiled Rodas5P) and by a second state
  solver (default scipy's ``Radau``), both at the evaluation's ``rtol``/``atol``. The allowance
  of each side is its tolerance carried into the llh: per measurement row, the state error the
  tolerances admit at the output time, ``rtol |x_i| + atol_i``, through ``|dh/dx|`` of the
  observable and of the noise formula, weighted by ``|d llh / d y|`` and ``|d llh / d sigma|``.
* **gradient** by the post-hoc march (``exp2``, exactly as :meth:`Problem.evaluate` computes it)
  and by forward sensitivities (``fs``). The allowance of exp2 is its step-doubling error estimate
  (``estimate_error=True`` of :func:`pbsens.simulation.segments.simulate`: the signed matrix
  ``S - S_exact`` of the sub-step march, state part included, METHOD.md section 11) carried through
  ``dh/dx`` and the parameter maps into the condition's gradient; the allowance of fs is its
  tolerance, ``rtol |S_ij| + atol / |p_j|`` (the scaling of its error control), carried the same
  way. Both add the state tolerance's effect on ``d llh / d y``.

A quantity disagrees when ``|a - b| > factor * (allowance_a + allowance_b)`` (plus a rounding
floor of 64 machine epsilons of the terms summed): the comparison is in units of the error the two
sides claim, not a fixed threshold. ``ratio`` in the report is ``|a - b| / (allowance_a +
allowance_b)``. Tolerances bound local errors; the default ``factor`` of 10 leaves room for their
accumulation over a condition's horizon: on eight benchmark problems at their defaults the largest
ratio was 1.07 (docs/PERFORMANCE.md, "The cross-check").

Every disagreeing condition issues one :class:`~pbsens.errors.CrossCheckWarning` naming the
condition (``simulationConditionId``, and ``preequilibrationConditionId`` if any), each quantity
(``llh``, or ``gradient`` and the parameter id) and the numbers.

Cost (it is opt-in): one exp2 evaluation with sensitivities, one llh evaluation by the second solver
(states only), one fs evaluation, and one more exp2 simulation per condition with the error estimate
(the step doubling: 3-20x the march, and a state solve ten times tighter). Measured on eight benchmark
problems: 18-179x the CPU of one ``evaluate()`` with Radau (most of it Radau's), 6-29x with
``reference_solver="LSODA"`` (docs/PERFORMANCE.md, "The cross-check"); ``report.timing`` splits it.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import CrossCheckWarning, PbsensError, SolverError
from ..sensitivity.methods import FORWARD
from .priors import dunscale, unscale
from .evaluation_setup import _bound_outputs, evaluation_options, steady_state_options_of

__all__ = ["cross_check", "CrossCheckReport", "ConditionCheck", "DEFAULT_REFERENCE_SOLVER", "DEFAULT_FACTOR"]

#: The second state solver of the llh check: scipy's Radau IIA (implicit, order 5), another
#: family than the default Rosenbrock method.
DEFAULT_REFERENCE_SOLVER = "Radau"
#: Disagreement: a difference above this many times the two sides' error estimates.
DEFAULT_FACTOR = 10.0
_EPS64 = 64 * np.finfo(float).eps


@dataclass
class ConditionCheck:
    """One simulation condition of a :class:`CrossCheckReport`.

    ``llh`` / ``llh_reference``: its llh contribution by the evaluation's solver and by the second
    solver; ``llh_allowance``: the sum of the two sides' error estimates (disagreement above
    ``factor`` times it); ``gradient`` / ``gradient_fs`` / ``gradient_allowance``: the same per
    estimated parameter for exp2 and fs (None without the gradient check). ``notes``: where an
    estimate fell back to the tolerance (e.g. steady-state outputs have no step-doubling estimate).
    """

    condition: str
    simulation_condition_id: str
    preequilibration_id: str | None
    llh: float
    llh_reference: float
    llh_allowance: float
    llh_floor: float
    factor: float
    gradient: np.ndarray | None = None
    gradient_fs: np.ndarray | None = None
    gradient_allowance: np.ndarray | None = None
    gradient_floor: np.ndarray | None = None
    notes: list = field(default_factory=list)

    @property
    def llh_ratio(self) -> float:
        """``|llh - llh_reference| / llh_allowance``."""
        return _ratio(abs(self.llh - self.llh_reference), self.llh_allowance)

    @property
    def llh_agrees(self) -> bool:
        return abs(self.llh - self.llh_reference) <= self.factor * self.llh_allowance + self.llh_floor

    @property
    def gradient_ratio(self):
        """``|gradient - gradient_fs| / gradient_allowance`` per parameter (None without the check)."""
        if self.gradient is None:
            return None
        return np.array([_ratio(d, a) for d, a in zip(np.abs(self.gradient - self.gradient_fs),
                                                       self.gradient_allowance)])

    @property
    def gradient_agrees(self):
        """Per parameter, bool (None without the check)."""
        if self.gradient is None:
            return None
        return np.abs(self.gradient - self.gradient_fs) <= self.factor * self.gradient_allowance + self.gradient_floor

    @property
    def agrees(self) -> bool:
        g = self.gradient_agrees
        return self.llh_agrees and (g is None or bool(np.all(g)))

    def describe(self):
        """``'condition 'c1'`` (simulationConditionId ..., preequilibrationConditionId ...)``."""
        pre = f", preequilibrationConditionId {self.preequilibration_id!r}" if self.preequilibration_id else ""
        return f"condition {self.condition!r} (simulationConditionId {self.simulation_condition_id!r}{pre})"


def _ratio(diff, allowance):
    if allowance > 0:
        return float(diff / allowance)
    return 0.0 if diff == 0 else float("inf")


@dataclass
class CrossCheckReport:
    """What :func:`cross_check` found: one :class:`ConditionCheck` per simulation condition.

    ``agree``: every condition agrees; ``disagreements()``: ``[(check, quantity, message)]``;
    ``settings``: the solvers, tolerances and ``factor`` used; ``str(report)``: a table.
    """

    parameter_ids: list
    theta: np.ndarray
    conditions: list
    settings: dict
    timing: dict = field(default_factory=dict)

    @property
    def agree(self) -> bool:
        return all(c.agrees for c in self.conditions)

    def __getitem__(self, condition):
        for c in self.conditions:
            if condition in (c.condition, c.simulation_condition_id):
                return c
        raise KeyError(condition)

    def disagreements(self):
        """``[(ConditionCheck, quantity, message)]``, quantity ``"llh"`` or ``"gradient[<parameterId>]"``."""
        s = self.settings
        out = []
        for c in self.conditions:
            if not c.llh_agrees:
                out.append((c, "llh", f"llh {s['solver']} {c.llh:.10g} vs {s['reference_solver']} "
                                      f"{c.llh_reference:.10g}: difference {abs(c.llh - c.llh_reference):.3g}, "
                                      f"{c.llh_ratio:.3g} x the two solvers' error estimate "
                                      f"{c.llh_allowance:.3g} (allowed {c.factor:g} x)"))
            if c.gradient is not None:
                for j in np.flatnonzero(~c.gradient_agrees):
                    pid = self.parameter_ids[j]
                    out.append((c, f"gradient[{pid}]",
                                f"gradient of {pid!r} exp2 {c.gradient[j]:.8g} vs fs {c.gradient_fs[j]:.8g}: "
                                f"difference {abs(c.gradient[j] - c.gradient_fs[j]):.3g}, "
                                f"{c.gradient_ratio[j]:.3g} x the two methods' error estimate "
                                f"{c.gradient_allowance[j]:.3g} (allowed {c.factor:g} x)"))
        return out

    def __str__(self):
        s = self.settings
        lines = [f"cross-check: llh by {s['solver']} vs {s['reference_solver']} (rtol {s['rtol']:g}, "
                 f"atol {s['atol']:g})" + ("; gradient by exp2 vs fs" if s["gradient"] else "")
                 + f"; disagreement above {s['factor']:g} x the error estimates",
                 f"  {'condition':<40s} {'llh diff':>10s} {'ratio':>8s} {'grad ratio':>10s}  verdict"]
        for c in self.conditions:
            gr = c.gradient_ratio
            g = "-" if gr is None or gr.size == 0 else f"{np.max(gr):.3g}"
            lines.append(f"  {c.condition:<40s} {abs(c.llh - c.llh_reference):10.3g} {c.llh_ratio:8.3g} "
                         f"{g:>10s}  {'agree' if c.agrees else 'DISAGREE'}")
        for c, _, msg in self.disagreements():
            lines.append(f"  {c.describe()}: {msg}")
        lines.append(f"cross-check: {'all conditions agree' if self.agree else 'DISAGREEMENT'}")
        return "\n".join(lines)

    def to_dict(self):
        """Plain data (JSON)."""
        def arr(a):
            return None if a is None else np.asarray(a).tolist()
        return {"agree": self.agree, "settings": dict(self.settings), "parameter_ids": list(self.parameter_ids),
                "theta": arr(self.theta), "timing": dict(self.timing),
                "disagreements": [{"condition": c.condition, "quantity": q, "message": m}
                                  for c, q, m in self.disagreements()],
                "conditions": [{"condition": c.condition, "simulation_condition_id": c.simulation_condition_id,
                                "preequilibration_id": c.preequilibration_id, "agrees": c.agrees,
                                "llh": c.llh, "llh_reference": c.llh_reference, "llh_allowance": c.llh_allowance,
                                "llh_ratio": c.llh_ratio, "gradient": arr(c.gradient), "gradient_fs": arr(c.gradient_fs),
                                "gradient_allowance": arr(c.gradient_allowance), "gradient_ratio": arr(c.gradient_ratio),
                                "notes": list(c.notes)} for c in self.conditions]}


def cross_check(problem, theta=None, *, reference_solver=DEFAULT_REFERENCE_SOLVER, factor=DEFAULT_FACTOR,
                gradient=True, warn=True, reference_options=None, fs_options=None,
                **solver_options) -> CrossCheckReport:
    """Cross-check ``problem``'s llh (two state solvers) and gradient (exp2 and fs) per condition.

    Parameters
    ----------
    problem : Problem
    theta : array_like (d,), optional
        Estimated parameters on their scale (default the nominal values).
    reference_solver : str
        The second state solver (a name in ``pbsens.solvers.SOLVERS`` other than the evaluation's).
    factor : float
        A difference above ``factor`` times the sum of the two sides' error estimates disagrees.
    gradient : bool
        Also compare the gradients of exp2 and fs (else the llh only: two state solves per condition).
    warn : bool
        Issue a :class:`~pbsens.errors.CrossCheckWarning` per disagreeing condition.
    reference_options, fs_options : dict, optional
        Options of the second solver's and of fs's evaluations, updating ``rtol``/``atol`` (and the
        preequilibration's) taken from the evaluation's.
    **solver_options
        The evaluation checked, as :meth:`Problem.evaluate` takes them for ``method="exp2"``
        (``solver`` default ``"rodas5p"``, ``rtol`` 1e-8, ``atol`` 1e-10, march options).

    Returns
    -------
    CrossCheckReport

    Notes
    -----
    Cost: one exp2 evaluation, one states-only evaluation by ``reference_solver``, one fs evaluation
    and one exp2 simulation per condition with its step-doubling error estimate: 18-179x one
    ``evaluate()``'s CPU with Radau, 6-29x with LSODA on eight benchmark problems (the module
    docstring). The allowances are described there too.

    Raises
    ------
    PbsensError
        Bad ``factor``, ``reference_solver`` (unknown, or the evaluation's own), options or ``theta``.
    SolverError
        A simulation failed (the message names the condition and which side).
    """
    import time

    from ..solvers import SOLVERS
    from ..system.threads import blas_single_thread
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.floating)) \
            or not np.isfinite(factor) or factor <= 0:
        raise PbsensError(f"'factor' must be a positive finite number, got {factor!r}")
    for name, v in (("gradient", gradient), ("warn", warn)):
        if v not in (True, False):
            raise PbsensError(f"'{name}' must be True or False, got {v!r}")
    for name, v in (("reference_options", reference_options), ("fs_options", fs_options)):
        if v is not None and not isinstance(v, dict):
            raise PbsensError(f"'{name}' must be a dict of options, got {v!r}")
    th = problem._theta(theta)
    opts_a = evaluation_options("exp2", True, solver_options)
    if not isinstance(reference_solver, str) or reference_solver not in SOLVERS:
        raise PbsensError(f"'reference_solver' must be one of {', '.join(SOLVERS)}, got {reference_solver!r}")
    if reference_solver == opts_a["solver"]:
        raise PbsensError(f"'reference_solver' is {reference_solver!r}, the solver checked: pass another one "
                          "(an independent second solver)")
    base = {k: opts_a[k] for k in ("rtol", "atol")}
    if "steady_state_options" in opts_a:
        base["steady_state_options"] = opts_a["steady_state_options"]
    opts_b = {**base, "solver": reference_solver, **(reference_options or {})}
    opts_c = evaluation_options(FORWARD, True, {**base, **(fs_options or {})})
    timing = {}
    with blas_single_thread():
        t = time.perf_counter()
        a = _side(problem, th, "exp2", gradient, opts_a, "the checked evaluation (exp2)")
        timing["exp2"] = time.perf_counter() - t
        t = time.perf_counter()
        b = _side(problem, th, "exp2", False, opts_b, f"the second solver ({reference_solver})")
        timing["reference"] = time.perf_counter() - t
        c = est = None
        if gradient:
            t = time.perf_counter()
            c = _side(problem, th, FORWARD, True, opts_c, "forward sensitivities (fs)")
            timing["fs"] = time.perf_counter() - t
            t = time.perf_counter()
            est = _exp2_estimate(problem, th, a, opts_a)
            timing["error_estimate"] = time.perf_counter() - t
    checks = []
    for ci, plan in enumerate(problem._plans):
        rows = problem._maps[ci]["rows"]
        llh_a, llh_b = (float(np.sum(s["llh"][rows])) for s in (a, b))
        chk = ConditionCheck(problem.conditions[ci], plan.sim_id, plan.preeq_id, llh_a, llh_b,
                             float(np.sum(a["llh_tol"][rows]) + np.sum(b["llh_tol"][rows])),
                             float(_EPS64 * (np.sum(np.abs(a["llh"][rows])) + np.sum(np.abs(b["llh"][rows])))),
                             float(factor))
        if gradient:
            e_rows, notes = est[ci]
            chk.gradient = np.sum(a["grad"][rows], axis=0)
            chk.gradient_fs = np.sum(c["grad"][rows], axis=0)
            no_est = np.all(np.isnan(e_rows), axis=1) if e_rows.shape[1] else np.zeros(rows.size, dtype=bool)
            signed = np.abs(np.sum(np.where(np.isnan(e_rows), 0.0, e_rows), axis=0))
            chk.gradient_allowance = (signed + np.sum(a["grad_tol_S"][rows][no_est], axis=0)
                                      + np.sum(a["grad_tol_x"][rows], axis=0)
                                      + np.sum(c["grad_tol_S"][rows], axis=0) + np.sum(c["grad_tol_x"][rows], axis=0))
            chk.gradient_floor = _EPS64 * (np.sum(np.abs(a["grad"][rows]), axis=0)
                                           + np.sum(np.abs(c["grad"][rows]), axis=0))
            chk.notes += notes
        checks.append(chk)
    settings = {"solver": opts_a["solver"], "rtol": float(np.max(opts_a["rtol"])),
                "atol": float(np.max(opts_a["atol"])), "reference_solver": reference_solver,
                "reference_options": {k: v for k, v in opts_b.items() if k != "steady_state_options"},
                "fs_options": {k: v for k, v in opts_c.items() if k != "steady_state_options"},
                "factor": float(factor), "gradient": bool(gradient),
                "exp2_estimate": "step doubling of the sub-step march (estimate_error=True; no midpoint correction)"}
    report = CrossCheckReport(list(problem.parameter_ids), th, checks, settings, timing)
    if warn:
        _warn(report)
    return report


def _warn(report):
    by_condition = {}
    for c, q, msg in report.disagreements():
        by_condition.setdefault(c.condition, (c, [], []))
        by_condition[c.condition][1].append(q)
        by_condition[c.condition][2].append(msg)
    for c, quantities, msgs in by_condition.values():
        w = CrossCheckWarning(f"pbsens cross-check: {c.describe()} disagrees: " + "; ".join(msgs),
                              condition=c.condition, simulation_condition_id=c.simulation_condition_id,
                              preequilibration_id=c.preequilibration_id, quantities=quantities)
        warnings.warn(w, stacklevel=4)


def _state_tol(X, rtol, atol):
    """The state error the tolerances admit at each row's output time, ``rtol |x| + atol`` (R, nx)."""
    nx = X.shape[1]
    atol = np.asarray(atol, dtype=np.float64).reshape(-1)
    atol_x = atol[:nx] if atol.size >= nx else np.full(nx, atol[0])
    rt = float(np.max(rtol))
    return rt * np.abs(X) + atol_x


def _side(problem, th, method, sens, opts, label):
    """One evaluation's per-row arrays: llh terms, gradient terms (R, d) and their tolerance allowances.

    As :meth:`Problem._evaluate` (same simulations, outputs and noise model), keeping per row what it sums.
    """
    p_lin = unscale(th, problem._scales)
    dpdth = dunscale(th, problem._scales)
    model, rows = problem.model, problem._rows
    R, nx, npar, d = rows["measurement"].size, model.n_states, model.n_params, th.size
    y, sig = np.empty(R), np.empty(R)
    JXy, JXs, X = np.zeros((R, nx)), np.zeros((R, nx)), np.zeros((R, nx))
    dy = np.zeros((R, npar)) if sens else None
    ds = np.zeros((R, npar)) if sens else None
    tdy = np.zeros((R, npar)) if sens else None
    tds = np.zeros((R, npar)) if sens else None
    outputs = _bound_outputs(model)
    rtol, atol = opts["rtol"], opts["atol"]
    problem._ss_cache, problem._notes = {}, []
    try:
        for ci, plan in enumerate(problem._plans):
            try:
                x, S = problem._simulate_condition(plan, p_lin, method, sens, opts)
            except SolverError as exc:
                raise SolverError(f"cross-check, {label}: condition {problem.conditions[ci]!r}: {exc}") from None
            mp, JX, JP = problem._condition_outputs(ci, x, p_lin, d, True, outputs, y, sig)
            rr, rg = mp["rows"], mp["g"]
            k = mp["k"][rg]
            JXy[rr], JXs[rr], X[rr] = JX[rg, mp["oy"]], JX[rg, mp["os"]], x[k]
            if sens:
                Sr = S[k]
                dy[rr] = np.einsum("rn,rnp->rp", JXy[rr], Sr) + JP[rg, mp["oy"]]
                ds[rr] = np.einsum("rn,rnp->rp", JXs[rr], Sr) + JP[rg, mp["os"]]
                # the tolerance of S as the error control of fs scales it: rtol |S_ij| + atol_i / |p_j|
                pabs = np.abs(plan.sim.values(p_lin))
                atol_x = _state_tol(np.zeros((1, nx)), 0.0, atol)[0]
                dS = float(np.max(rtol)) * np.abs(Sr) + atol_x[None, :, None] / np.where(pabs > 0, pabs, 1.0)[None, None, :]
                tdy[rr] = np.einsum("rn,rnp->rp", np.abs(JXy[rr]), dS)
                tds[rr] = np.einsum("rn,rnp->rp", np.abs(JXs[rr]), dS)
    finally:
        problem._ss_cache = {}
    problem._check_outputs(y, sig)
    llh, rr2, g_y, g_s, w_y, _, resid = problem._noise.terms(y, sig)
    dx = _state_tol(X, rtol, atol)
    ey = np.einsum("rn,rn->r", np.abs(JXy), dx)       # the output error the state tolerance admits
    es = np.einsum("rn,rn->r", np.abs(JXs), dx)
    out = {"llh": llh, "llh_tol": np.abs(g_y) * ey + np.abs(g_s) * es, "JXy": JXy, "JXs": JXs,
           "g_y": g_y, "g_s": g_s, "dpdth": dpdth}
    if sens:
        Jy, Js = problem._to_theta(dy, dpdth), problem._to_theta(ds, dpdth)
        adp = np.abs(dpdth)
        out["grad"] = g_y[:, None] * Jy + g_s[:, None] * Js
        out["grad_tol_S"] = (np.abs(g_y)[:, None] * problem._to_theta(tdy, adp)
                             + np.abs(g_s)[:, None] * problem._to_theta(tds, adp))
        # the states' error moves d llh / d y and d llh / d sigma by their second derivatives (normal
        # noise; T'' left out): d2/dy2 = -w_y, d2/dy dsigma = -2 r sqrt(w_y) / sigma, d2/dsigma2 = (1 - 3 r^2) / sigma^2
        cross = 2.0 * np.abs(resid) * np.sqrt(w_y) / sig
        out["grad_tol_x"] = ((w_y * ey + cross * es)[:, None] * np.abs(Jy)
                             + (cross * ey + (1.0 + 3.0 * rr2) / sig ** 2 * es)[:, None] * np.abs(Js))
    return out


def _exp2_estimate(problem, th, a, opts):
    """Per condition ``(E_rows (R_c, d), notes)``: the signed step-doubling estimate of each row's gradient
    term's error (NaN rows: no estimate there, the tolerance stands in), from one more simulation
    with ``estimate_error=True``."""
    from ..simulation.segments import simulate
    p_lin = unscale(th, problem._scales)
    dpdth = a["dpdth"]
    model = problem.model
    o = {k: v for k, v in opts.items() if k != "midpoint"}   # estimate_error marches the sub-steps
    o.setdefault("steady_state_options", steady_state_options_of(o))
    out = []
    problem._ss_cache, problem._notes = {}, []
    try:
        for ci, plan in enumerate(problem._plans):
            mp = problem._maps[ci]
            rr, k = mp["rows"], mp["k"][mp["g"]]
            E_rows = np.full((rr.size, th.size), np.nan)
            notes = []
            times = np.asarray(plan.times, dtype=np.float64)
            if plan.has_inf:
                notes.append("steady-state (t = inf) outputs: exp2's allowance there is the tolerance, "
                             "as fs's (no step-doubling estimate)")
            if times.size:
                p, x0, S0 = problem._condition_start(plan, p_lin, True, o)
                cols = np.flatnonzero(plan.sim.est >= 0)
                try:
                    sim = simulate(model, times, p, x0=x0, S0=S0, method="exp2", estimate_error=True,
                                   columns=cols, **o)
                except PbsensError as exc:
                    sim = None
                    notes.append(f"no step-doubling estimate ({exc}); exp2's allowance is the tolerance")
                if sim is not None and sim.error_matrix is not None:
                    fin = k < times.size
                    E = sim.error_matrix[k[fin]]                          # (rows, nx, np)
                    R = problem._rows["measurement"].size
                    ey, es = np.zeros((R, model.n_params)), np.zeros((R, model.n_params))
                    ey[rr[fin]] = np.einsum("rn,rnp->rp", a["JXy"][rr[fin]], E)
                    es[rr[fin]] = np.einsum("rn,rnp->rp", a["JXs"][rr[fin]], E)
                    g = (a["g_y"][:, None] * problem._to_theta(ey, dpdth)
                         + a["g_s"][:, None] * problem._to_theta(es, dpdth))
                    E_rows[fin] = g[rr[fin]]
            out.append((E_rows, notes))
    finally:
        problem._ss_cache = {}
    return out
