"""An estimation problem: log-likelihood, gradient and Fisher information of a PEtab problem.

:class:`Problem` evaluates, for estimated parameters ``theta`` (each on its
``parameterScale``), one simulation per simulation condition (preequilibration
first where the measurement table asks for it) on the one compiled model, the
observables and noise parameters per measurement row from the model's outputs,
and the measurement models of :mod:`pbsens.problems.noise`. Sensitivities
``S = dx/dp`` (post-hoc methods or forward sensitivities) give the output
sensitivities ``dy/dp = dh/dx S + dh/dp`` and, through the parameter maps,
``dy/dtheta``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PbsensError, SolverError
from ..sensitivity.methods import FORWARD
from . import noise
from .adjoint_evaluation import ADJOINT_METHOD, Unavailable, evaluate_adjoint
from .evaluation_setup import _bound_outputs, evaluation_options, steady_state_options_of  # noqa: F401
from .method_choice import AUTO_METHOD, ForwardLater, choose_gradient_method, refine_if_cancelling
from .priors import Priors, dunscale, unscale
from .theta_map import ThetaMap

__all__ = ["Problem", "EvaluationResult"]


@dataclass
class EvaluationResult:
    """Output of :meth:`Problem.evaluate`.

    Attributes
    ----------
    llh : float
        Log-likelihood (all normalisation constants included, as PEtab defines it).
    chi2 : float
        Sum of squared weighted residuals ``((T(m) - T(y)) / sigma)^2``.
    gradient : ndarray (d,) or None
        ``d llh / d theta`` on the parameter scale.
    fim : ndarray (d, d) or None
        Fisher information on the parameter scale (see :meth:`Problem.evaluate`).
    simulations : pandas.DataFrame
        The measurement table with ``measurement`` replaced by ``simulation``
        (PEtab's simulation-table format).
    timing : dict
        Seconds per simulation condition (key ``"<preeq>:<sim>"`` or ``"<sim>"``)
        and ``"total"``.
    theta : ndarray
    residuals : ndarray
        ``(T(m) - T(y)) / sigma`` per measurement row.
    sigmas : ndarray
        The noise parameter ``sigma`` of each measurement row (its noise formula's value).
    residual_jacobian : ndarray (R, d) or None
        ``d residuals / d theta`` (with ``sensitivities=True``): the Jacobian of the weighted
        residuals for least-squares optimisers (:func:`pbsens.fit`).
    sigma_jacobian : ndarray (R, d) or None
        ``d sigmas / d theta`` (with ``sensitivities=True``; zero rows for fixed noise).
    notes : list of str
        What the evaluation chose on its own, one line each: e.g. a preequilibration whose
        steady-state sensitivities were integrated because the Newton form ``A S = -B`` is not
        defined there (:func:`pbsens.simulation.steady_state.steady_state`, ``sensitivity_mode``).
    """

    llh: float
    chi2: float
    gradient: np.ndarray | None
    fim: np.ndarray | None
    simulations: object
    timing: dict = field(default_factory=dict)
    theta: np.ndarray = None
    residuals: np.ndarray = None
    sigmas: np.ndarray = None
    residual_jacobian: np.ndarray | None = None
    sigma_jacobian: np.ndarray | None = None
    notes: list = field(default_factory=list)
    #: With ``evaluate(..., cross_check=True)``: the :class:`~pbsens.problems.cross_check.CrossCheckReport`.
    cross_check: object = None

    def __getattribute__(self, name):
        # the table is built on first access (pandas costs more than a whole small evaluation)
        v = object.__getattribute__(self, name)
        if name == "simulations" and isinstance(v, _LazyTable):
            v = v.build()
            object.__setattr__(self, "simulations", v)
        elif name in _MAYBE_UNAVAILABLE and isinstance(v, Unavailable):
            raise PbsensError(v.message)     # a field the adjoint method does not compute
        elif name in _MAYBE_UNAVAILABLE and isinstance(v, ForwardLater):
            v = v.field(name)                # method="auto" took the adjoint: one forward evaluation now
            object.__setattr__(self, name, v)
        return v

    def computed(self, name) -> bool:
        """Whether the field ``name`` holds a value now (not one the adjoint left out, nor one
        ``method="auto"`` computes on first read)."""
        return not isinstance(object.__getattribute__(self, name), (Unavailable, ForwardLater))

    def __repr__(self):
        g = "" if self.gradient is None else f", |gradient| = {np.linalg.norm(self.gradient):.4g}"
        return f"<EvaluationResult llh = {self.llh:.10g}, chi2 = {self.chi2:.6g}{g}>"


#: Fields of an :class:`EvaluationResult` that ``method="exp2-adjoint"`` does not compute.
_MAYBE_UNAVAILABLE = frozenset(("fim", "residual_jacobian", "sigma_jacobian"))


class _LazyTable:
    """The simulation table of one evaluation, built when first read (see EvaluationResult)."""

    __slots__ = ("problem", "y")

    def __init__(self, problem, y):
        self.problem, self.y = problem, y

    def build(self):
        return self.problem._simulation_table(self.y)


def _simulate(model, times, p, x0, S0, method, sens, has_inf, opts, checked=None, key=None, columns=None):
    """States (K, nx) and sensitivities (K, nx, np) at ``times`` (plus the steady state
    when ``has_inf``), by :func:`pbsens.simulation.segments.simulate`.

    ``checked``: a set of option signatures ``key`` (hashable: method, sensitivities and
    the options) that :func:`simulate` has accepted before on this model; for those,
    its argument checks are skipped (``run_checked``).
    """
    from ..simulation.segments import run_checked, simulate, split_options
    t_eval = np.concatenate([times, [np.inf]]) if has_inf else times
    opts = dict(opts)
    opts.setdefault("steady_state_options", steady_state_options_of(opts))
    if checked is None or key is None:
        key = None
    elif key in checked and np.all(np.isfinite(p)) and np.all(np.isfinite(x0)):
        rest = dict(opts)
        solver, rtol, atol = rest.pop("solver", None), rest.pop("rtol", 1e-8), rest.pop("atol", 1e-10)
        ss = rest.pop("steady_state_options")
        r = run_checked(model, t_eval, p, np.array(x0, dtype=np.float64), S0, 0.0, method, sens, solver,
                        rtol, atol, ss, *split_options(rest), columns=columns)
        return r.x, r.S
    r = simulate(model, t_eval, p, x0=x0, S0=S0, t0=0.0, method=method, sensitivities=sens, columns=columns,
                 **opts)
    if key is not None:
        checked.add(key)
    return np.asarray(r.x), (None if r.S is None else np.asarray(r.S))


def _signature(method, sens, opts):
    """A hashable signature of one evaluation's simulation options, or None (e.g. array tolerances)."""
    try:
        key = (method, bool(sens), tuple(sorted(opts.items())))
        hash(key)
    except TypeError:
        return None
    return key


def _steady_state(model, p, x0, S0, sens, opts, columns=None):
    """``(x_ss, S_ss, note)``: ``S_ss`` only in ``columns`` (the model parameters estimated in the
    preequilibration; zero elsewhere), ``note`` when its sensitivities were integrated."""
    from ..simulation.steady_state import steady_state
    ss = steady_state_options_of(opts)
    ss.update(opts.get("steady_state_options") or {})
    ss.setdefault("columns", columns)
    ss.pop("return_info", None)
    x, S, info = steady_state(model, p, x0, S0, sensitivities=sens, return_info=True, **ss)
    return np.asarray(x), (None if S is None else np.asarray(S)), info.get("note")


class Problem:
    """A PEtab estimation problem on one compiled model.

    Build with :func:`pbsens.petab.load` or :meth:`from_petab`.

    Attributes
    ----------
    parameter_ids : list of str
        The estimated parameters (``estimate = 1``), in the parameter table's order.
    x_nominal : ndarray
        Their nominal values on their ``parameterScale`` (``-inf`` for a nominal 0 on a log scale;
        NaN where the table gives none).
    bounds : ndarray (d, 2)
        Lower and upper bounds on the parameter scale.
    scales : list of str
    model : Model
        The compiled model (observables and noise formulas are its outputs).
    petab_problem : petab.v1.Problem
    conditions : list of str
        The simulation conditions, ``"<preeq>:<sim>"`` or ``"<sim>"``.
    priors : Priors
    """

    def __init__(self, petab_problem, files, model, info, estimated, plans, rows, *, model_id=None,
                 cache_key=None, reread=None):
        self._petab_problem = petab_problem
        self._cache_key = cache_key       # set when built from the problem cache (petab_problem read lazily)
        self._reread = reread             # () -> petab.v1.Problem, from whoever built it without one
        self.model_id = model_id if model_id is not None else petab_problem.model.model_id
        self.files = files
        self._estimated = estimated
        self.model = model
        self._info = info
        self._plans = plans
        self._rows = rows
        self.parameter_ids = list(estimated["ids"])
        self._scales = estimated["scales"]
        self.scales = [("lin", "log", "log10")[s] for s in self._scales]
        self.x_nominal = estimated["nominal"].copy()
        self.bounds = np.column_stack([estimated["lower"], estimated["upper"]])
        self.priors = Priors(estimated["prior_types"], estimated["prior_params"], self._scales,
                             estimated["lower"], estimated["upper"], self.parameter_ids)
        self.conditions = [(f"{p.preeq_id}:{p.sim_id}" if p.preeq_id else p.sim_id) for p in plans]
        self._groups = [_group_rows(p, rows) for p in plans]
        self._maps = [_output_maps(p, g, rows) for p, g in zip(plans, self._groups)]
        self._ss_cache = {}
        self._noise = noise.MeasurementModel(rows["measurement"], rows["trafo"], rows["dist"])
        self._checked = set()        # option signatures simulate() has accepted (then it is not re-checked)

    # ---------------------------------------------------------------- build
    @classmethod
    def from_petab(cls, petab_problem, *, lint=True, files=None):
        """A :class:`Problem` from a ``petab.v1.Problem``."""
        from .petab import build_model, build_plan, lint as run_lint
        files = dict(files or {})
        # pbsens's own checks first (they name file, row and column), then petab's linter
        model, info = build_model(petab_problem, files)
        estimated, plans, rows = build_plan(petab_problem, files, model, info)
        if lint:
            run_lint(petab_problem, files)
        return cls(petab_problem, files, model, info, estimated, plans, rows)

    @property
    def petab_problem(self):
        """The ``petab.v1.Problem`` (read from the files on first use when this problem came
        from the problem cache, by the ``reread`` callable it was built with; :class:`PbsensError`
        if the files changed since)."""
        if self._petab_problem is None:
            if self._reread is None:
                raise PbsensError(f"the estimation problem {self.model_id!r} holds no PEtab tables and no "
                                  "way to read them; load it with pbsens.petab.load")
            self._petab_problem = self._reread()
        return self._petab_problem

    @petab_problem.setter
    def petab_problem(self, value):
        self._petab_problem = value

    @property
    def dim(self) -> int:
        return len(self.parameter_ids)

    @property
    def param_names(self):
        return list(self.parameter_ids)

    def __repr__(self):
        return (f"<pbsens Problem {self.model_id!r}: {self.dim} estimated parameters, "
                f"{len(self._plans)} conditions, {len(self._rows['measurement'])} measurements>")

    # ------------------------------------------------------------ evaluation
    def nominal_theta(self, finite=False):
        """A copy of :attr:`x_nominal`. A PEtab nominal value of 0 on a log or log10 scale is
        ``-inf`` on that scale: allowed (the parameter is 0, its gradient entry 0, as AMICI
        evaluates such a nominal vector) unless ``finite`` (starting points of samplers); a
        :class:`PbsensError` names every parameter whose nominal value is not allowed."""
        ok = np.isfinite(self.x_nominal) if finite else self._allowed_values(self.x_nominal)
        bad = [self.parameter_ids[i] for i in np.flatnonzero(~ok)]
        if bad:
            raise PbsensError(f"'theta' not given and the nominal value of {', '.join(map(repr, bad))} is not finite "
                              "on its scale (parameter table, nominalValue): pass theta explicitly")
        return self.x_nominal.copy()

    def _allowed_values(self, th):
        """Per entry of ``th``: finite, or ``-inf`` on a log/log10 scale (the value 0)."""
        return np.isfinite(th) | ((th == -np.inf) & (np.asarray(self._scales) != 0))

    def _theta(self, theta):
        if theta is None:
            return self.nominal_theta()
        try:
            th = np.array(theta, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PbsensError(f"'theta' must be an array of {self.dim} numbers, got {theta!r}") from None
        if th.size != self.dim:
            raise PbsensError(f"'theta' has {th.size} entries, the problem estimates {self.dim} "
                              f"({', '.join(self.parameter_ids)})")
        bad = np.flatnonzero(~self._allowed_values(th))
        if bad.size:
            raise PbsensError(f"'theta' contains NaN or inf at {bad.tolist()} (only -inf on a log scale, "
                              "the value 0, is allowed)")
        return th

    def evaluate(self, theta=None, *, sensitivities=True, method="exp2", cross_check=False, **solver_options):
        """Log-likelihood, chi2, gradient and Fisher information at ``theta``.

        Parameters
        ----------
        theta : array_like (d,), optional
            Estimated parameters on their scale; default :attr:`x_nominal`.
        sensitivities : bool
            Compute ``gradient`` and ``fim`` (else they are ``None``).
        method : str
            A post-hoc method of :func:`pbsens.sensitivities` (``"exp2"``, ``"pbsr"``,
            ...), ``"fs"`` (forward sensitivities), ``"exp2-adjoint"``: the gradient by one
            backward exp2 march per condition (:mod:`pbsens.problems.adjoint_evaluation`; no
            state-triggered, delayed or prioritized events; ``fim`` and the residual Jacobians
            then raise :class:`PbsensError` when read), or ``"auto"``: ``"exp2-adjoint"`` or
            ``"exp2"`` by the measured rule of :mod:`pbsens.problems.method_choice` (``notes``
            says which and why; after the adjoint, ``fim`` and the residual Jacobians are
            computed on first read by one forward exp2 evaluation); where the gradient is a sum
            of cancelling terms (near an optimum) ``"auto"`` returns a ``"fs"`` evaluation instead
            (issue #41; its last note says so).
        cross_check : bool
            Also run :meth:`cross_check` at ``theta`` with these ``solver_options`` (opt-in: several
            evaluations more) and attach its report as ``cross_check`` of the result; a
            :class:`~pbsens.errors.CrossCheckWarning` names each condition that disagrees.
        **solver_options
            ``solver``, ``rtol``, ``atol`` of the state solve (post-hoc methods, and
            every method with ``sensitivities=False``; default ``"rodas5p"``, 1e-8,
            1e-10, and the library's march options: 4 sub-steps, for ``"exp2"`` the
            midpoint correction on the solver's long steps instead; ``substeps=1``
            marches on the solver's own grid, faster and less accurate) or of the
            joint solve (``"fs"``; default ``"rodas5p"``, 1e-8, 1e-10), and any other
            option the simulation accepts (:func:`pbsens.simulation.segments.simulate`).
            ``max_nfev`` without a ``solver`` selects scipy's LSODA (BDF for ``"fs"``),
            the solvers that take it.

        Returns
        -------
        EvaluationResult
            ``fim`` is the expected Fisher information of the measurements on the
            parameter scale: ``sum_rows w_y dy/dtheta dy/dtheta^T + w_sigma
            dsigma/dtheta dsigma/dtheta^T`` with ``y`` the transformed observable,
            ``w_y = 1/sigma^2`` and ``w_sigma = 2/sigma^2`` (normal) or
            ``1/sigma^2`` (laplace). The second term is the information about
            noise parameters (and about any parameter the noise formula depends on);
            it is zero when ``sigma`` is a fixed number.

        Raises
        ------
        SolverError
            A simulation failed; the message names the condition.
        PbsensError
            Invalid ``theta`` or ``method``.
        PetabError
            A noise formula evaluates to ``sigma <= 0`` (or NaN): the message names
            the observable file's row and column and the measurement row.
        """
        from ..sensitivity.posthoc import METHODS
        if method != FORWARD and method != ADJOINT_METHOD and method != AUTO_METHOD and method not in METHODS:
            raise PbsensError(f"'method' must be 'fs', {ADJOINT_METHOD!r}, {AUTO_METHOD!r} or one of "
                              f"{', '.join(METHODS)}, got {method!r}")
        if cross_check not in (True, False):
            raise PbsensError(f"'cross_check' must be True or False, got {cross_check!r}")
        th = self._theta(theta)
        chosen = None
        if method == AUTO_METHOD:
            method, why = choose_gradient_method(self, sensitivities)
            chosen = f"method='auto': {method} ({why})"
        opts = evaluation_options(method, sensitivities, solver_options)
        from ..system.threads import blas_single_thread
        with blas_single_thread():     # once per evaluation, not once per solve inside it
            if method == ADJOINT_METHOD:
                r = evaluate_adjoint(self, th, sensitivities, opts, _bound_outputs(self.model), spread=bool(chosen))
                spread = r.pop("spread", None)
                if chosen is not None:
                    r["notes"] = [chosen] + list(r.get("notes") or [])
                    later = ForwardLater(self, th, solver_options) if sensitivities else None
                    for name in ("fim", "residual_jacobian", "sigma_jacobian"):
                        r[name] = later
                res = EvaluationResult(simulations=_LazyTable(self, r.pop("y")), **r)
            else:
                res, spread = self._evaluate(th, method, sensitivities, opts, with_spread=True)
                if chosen is not None:
                    res.notes.insert(0, chosen)
            if chosen is not None:       # near an optimum: forward sensitivities (method_choice.py)
                res = refine_if_cancelling(self, th, res, spread, solver_options)
        if cross_check:
            res.cross_check = self.cross_check(th, gradient=bool(sensitivities), **solver_options)
        return res

    def cross_check(self, theta=None, **options):
        """Each condition's llh by two state solvers and gradient by exp2 and fs, compared against
        their error estimates: :func:`pbsens.problems.cross_check.cross_check` (its options; the
        cost: several evaluations). Returns a ``CrossCheckReport``; a
        :class:`~pbsens.errors.CrossCheckWarning` names each condition that disagrees."""
        from .cross_check import cross_check
        return cross_check(self, theta, **options)

    def _evaluate(self, th, method, sensitivities, opts, with_spread=False):
        """The :class:`EvaluationResult` of one forward evaluation; with ``with_spread``, the pair
        ``(result, spread)``: ``spread`` the gradient without the residuals' signs (``None``
        without sensitivities), what ``method="auto"`` compares the gradient with."""
        t_all = time.perf_counter()
        p_lin = unscale(th, self._scales)
        dpdth = dunscale(th, self._scales)
        model, rows = self.model, self._rows
        R = rows["measurement"].size
        npar = model.n_params
        y = np.empty(R)
        sig = np.empty(R)
        dy = np.zeros((R, npar)) if sensitivities else None
        ds = np.zeros((R, npar)) if sensitivities else None
        timing = {}
        outputs = _bound_outputs(model)
        self._ss_cache = {}          # preequilibrations of this evaluation
        self._notes = []             # what it chose on its own (EvaluationResult.notes)
        for ci, plan in enumerate(self._plans):
            name = self.conditions[ci]
            t0 = time.perf_counter()
            try:
                x, S = self._simulate_condition(plan, p_lin, method, sensitivities, opts)
            except SolverError as exc:
                raise SolverError(f"condition {name!r}: {exc}") from None
            except PbsensError as exc:
                if "NaN" in str(exc) or "inf" in str(exc):
                    raise SolverError(f"condition {name!r}: {exc}") from None
                raise
            mp, JX, JP = self._condition_outputs(ci, x, p_lin, th.size, sensitivities, outputs, y, sig)
            rr, rg = mp["rows"], mp["g"]
            if sensitivities:
                Sr = S[mp["k"][rg]]
                dy[rr] = np.matmul(JX[rg, mp["oy"]][:, None, :], Sr)[:, 0, :] + JP[rg, mp["oy"]]
                ds[rr] = np.matmul(JX[rg, mp["os"]][:, None, :], Sr)[:, 0, :] + JP[rg, mp["os"]]
            timing[name] = time.perf_counter() - t0
            plan.timing = timing[name]
        self._check_outputs(y, sig)
        llh_i, chi2_i, g_y, g_s, w_y, w_s, resid = self._noise.terms(y, sig)
        llh = float(np.sum(llh_i))
        chi2 = float(np.sum(chi2_i))
        grad = fim = sres = spread = None
        if sensitivities:
            Jy = self._to_theta(dy, dpdth)
            Js = self._to_theta(ds, dpdth)
            grad = g_y @ Jy + g_s @ Js
            # r = (T(m) - T(y)) / sigma: dr = -(T'(y) / sigma) dy - (r / sigma) dsigma, T'(y) / sigma = sqrt(w_y)
            sres = -(np.sqrt(w_y)[:, None] * Jy) - (resid / sig)[:, None] * Js
            # Fisher information of the transformed observable: w_y already holds T'(y)^2 / sigma^2
            fim = (Jy * w_y[:, None]).T @ Jy + (Js * w_s[:, None]).T @ Js
            fim = 0.5 * (fim + fim.T)
            spread = np.abs(g_y) @ Jy + np.abs(g_s) @ Js      # the gradient without the residuals' signs
        self._ss_cache = {}
        timing["total"] = time.perf_counter() - t_all
        res = EvaluationResult(llh=llh, chi2=chi2, gradient=grad, fim=fim,
                               simulations=_LazyTable(self, y), timing=timing, theta=th,
                               residuals=resid,
                               sigmas=sig, residual_jacobian=sres,
                               sigma_jacobian=None if sres is None else Js, notes=self._notes)
        return (res, spread) if with_spread else res

    def _condition_outputs(self, ci, x, p_lin, n_theta, sensitivities, outputs, y, sig):
        """Observables and noise parameters of condition ``ci``'s rows into ``y``, ``sig``; returns
        ``(maps, JX, JP)``, the outputs' derivatives by state and parameter per output time.

        One evaluation of the outputs per output time and placeholder values (rows grouped, index
        maps built once per problem: :func:`_output_maps`), all output times in one compiled call
        (:mod:`pbsens.kernels.outputs`), then all rows of the condition at once."""
        model = self.model
        nx, npar, ny = model.n_states, model.n_params, model.n_outputs
        mp = self._maps[ci]
        P = np.where(mp["est"] >= 0, p_lin[np.maximum(mp["est"], 0)], mp["fixed"]) if n_theta \
            else np.where(mp["est"] >= 0, 0.0, mp["fixed"])
        G = mp["k"].size
        Yb = np.empty((G, ny))
        JX = np.empty((G, ny, nx) if sensitivities else (0, 0, 0))
        JP = np.empty((G, ny, npar) if sensitivities else (0, 0, 0))
        outputs(mp["t"], np.ascontiguousarray(x[mp["k"]]), np.ascontiguousarray(P, dtype=np.float64),
                model.constants, Yb, JX, JP, sensitivities)
        rr, rg = mp["rows"], mp["g"]
        y[rr] = Yb[rg, mp["oy"]]
        sig[rr] = Yb[rg, mp["os"]]
        return mp, JX, JP

    def _to_theta(self, d, dpdth):
        """``(R, np)`` derivatives w.r.t. model parameters -> ``(R, d)`` w.r.t. theta
        (:class:`pbsens.problems.theta_map.ThetaMap`, built once per problem)."""
        if getattr(self, "_theta_map", None) is None:
            self._theta_map = ThetaMap(self._rows["est"], self.dim)
        return self._theta_map(d, dpdth)

    def _initial(self, p, inits):
        x0 = self.model.initial_state(p)
        S0 = self.model.initial_sensitivity(p)
        for i, j in inits:
            x0[i] = p[j]
            S0[i, :] = 0.0
            S0[i, j] = 1.0
        return x0, S0

    def _simulate_condition(self, plan, p_lin, method, sens, opts):
        p, x0, S0 = self._condition_start(plan, p_lin, sens, opts)
        # the columns of S the likelihood reads: the model parameters mapped to estimated ones here
        return _simulate(self.model, plan.times, p, x0, S0, method, sens, plan.has_inf, opts,
                         getattr(self, "_checked", None), _signature(method, sens, opts),
                         np.flatnonzero(plan.sim.est >= 0))

    def _condition_start(self, plan, p_lin, sens, opts):
        """``(p, x0, S0)`` of one condition: its model parameters and start (after its preequilibration)."""
        p = plan.sim.values(p_lin)
        if plan.pre is None:
            x0, S0 = self._initial(p, plan.reinit)
        else:
            pp = plan.pre.values(p_lin)
            xp0, Sp0 = self._initial(pp, plan.pre_init)
            # conditions sharing a preequilibration (same parameters, same start) share its steady state
            cols = np.flatnonzero(plan.pre.est >= 0)
            key = (pp.tobytes(), xp0.tobytes(), Sp0.tobytes() if sens else b"", sens, cols.tobytes())
            if key not in self._ss_cache:
                self._ss_cache[key] = _steady_state(self.model, pp, xp0, Sp0 if sens else None, sens, opts, cols)
                note = self._ss_cache[key][2]
                if note and hasattr(self, "_notes"):
                    self._notes.append(f"preequilibration {plan.preeq_id!r}: {note}")
            x0, S0, _ = self._ss_cache[key]
            if sens:
                differ = plan.pre.est != plan.sim.est
                bad = np.flatnonzero(differ & np.any(S0 != 0.0, axis=0))
                if bad.size:
                    nm = self.model.param_names[bad[0]]
                    raise PbsensError(f"conditions {plan.preeq_id!r} (preequilibration) and {plan.sim_id!r} map "
                                      f"model parameter {nm!r} to different estimated parameters; pbsens "
                                      "needs the same estimated parameter (or fixed values) in both phases")
            x0 = np.array(x0, dtype=np.float64)
            S0 = np.array(S0, dtype=np.float64) if sens else None
            for i, j in plan.reinit:
                x0[i] = p[j]
                if sens:
                    S0[i, :] = 0.0
                    S0[i, j] = 1.0
        return p, x0, (S0 if sens else None)

    def _check_outputs(self, y, sig):
        rows, files = self._rows, self.files
        if np.all(sig > 0) and np.all(np.isfinite(sig)) and np.all(np.isfinite(y)) \
                and np.all(y[rows["trafo"] != 0] > 0):
            return
        from .petab import PetabError, _where
        bad = np.flatnonzero(~(sig > 0) | ~np.isfinite(sig))
        if bad.size:
            r = int(bad[0])
            oid = rows["observable"][r]
            raise PetabError(f"{_where(files, 'observable', rows['obs_row'][oid], 'noiseFormula')}: the noise "
                              f"formula of observable {oid!r} evaluates to {sig[r]!r} (must be > 0) for "
                              f"{_where(files, 'measurement', r)}")
        bad = np.flatnonzero(~np.isfinite(y) | ((rows["trafo"] != 0) & ~(y > 0)))
        if bad.size:
            r = int(bad[0])
            oid = rows["observable"][r]
            raise SolverError(f"observable {oid!r} is {y[r]!r} at {_where(files, 'measurement', r)} "
                              f"({'not finite' if not np.isfinite(y[r]) else 'not positive under a log transformation'})")

    def _simulation_table(self, y):
        df = self.petab_problem.measurement_df.copy()
        pos = list(df.columns).index("measurement")
        df = df.drop(columns=["measurement"])
        df.insert(pos, "simulation", y)
        return df

    # ---------------------------------------------------- objective interface
    def llh(self, theta=None, **options) -> float:
        """Log-likelihood at ``theta`` (no sensitivities)."""
        options.setdefault("method", "exp2")
        return self.evaluate(theta, sensitivities=False, **options).llh

    def gradient(self, theta=None, **options) -> np.ndarray:
        """``d llh / d theta`` on the parameter scale (default ``method="auto"``: forward exp2 or the
        adjoint, whichever :mod:`pbsens.problems.method_choice` picks, and fs near an optimum)."""
        options.setdefault("method", AUTO_METHOD)
        return self.evaluate(theta, **options).gradient

    def log_prior(self, theta=None) -> float:
        """Log-prior (see :mod:`pbsens.problems.priors`); ``-inf`` outside the bounds."""
        return self.priors.logpdf(self._theta(theta))

    def log_posterior(self, **options):
        """A log-posterior for :func:`pbsens.smmala`: ``evaluate(theta) -> (logp, grad, metric)``.

        ``logp = llh + log_prior``, ``metric = fim + prior precision``. Outside the
        bounds, and when a simulation fails (:class:`~pbsens.errors.SolverError`),
        ``logp`` is ``-inf`` (gradient and metric zero), so a sampler rejects the
        proposal. ``options`` go to :meth:`evaluate` (e.g. ``method="fs"``).
        """
        return _ProblemPosterior(self, options)


def _output_maps(plan, groups, rows):
    """Index maps of one condition's output evaluation (from :func:`_group_rows`), built once.

    ``k``, ``t``: output-time index and time of each group (``inf`` evaluated at 0);
    ``est``, ``fixed`` (G, np): each group's parameter map; ``rows``: the
    condition's measurement rows, ``g`` their group, ``oy``/``os`` the model
    outputs holding their observable and noise parameter.
    """
    tk = np.concatenate([plan.times, [np.inf]]) if plan.has_inf else np.asarray(plan.times, dtype=np.float64)
    ks = np.array([k for k, _, _, _ in groups], dtype=np.int64)
    est = np.array([e for _, _, _, e in groups], dtype=np.int64).reshape(len(groups), -1)
    fixed = np.array([f for _, _, f, _ in groups], dtype=np.float64).reshape(len(groups), -1)
    members = [grp for _, grp, _, _ in groups]
    r = np.concatenate(members).astype(np.int64) if members else np.empty(0, dtype=np.int64)
    g = np.concatenate([np.full(len(m), i, dtype=np.int64) for i, m in enumerate(members)]) if members \
        else np.empty(0, dtype=np.int64)
    t = np.array([float(tk[k]) if np.isfinite(tk[k]) else 0.0 for k in ks], dtype=np.float64)
    return {"k": ks, "t": t, "est": est, "fixed": fixed, "rows": r, "g": g,
            "oy": np.asarray(rows["out_y"])[r], "os": np.asarray(rows["out_sigma"])[r]}


def _group_rows(plan, rows):
    """Rows of one condition grouped by output time, with one merged parameter map per group.

    Rows at the same time differ from the condition's map only in their own
    observable's placeholders (``rows["ph"]``), so one parameter vector serves
    the whole group unless two rows give the same placeholder different values
    (replicates with different overrides: each such row gets its own group). Returns ``[(k, rows, fixed, est)]``.
    """
    groups = []
    base_f, base_e = plan.sim.fixed, plan.sim.est
    for k in np.unique(plan.row_k):
        members = plan.rows[plan.row_k == k]
        f, e = base_f.copy(), base_e.copy()
        set_ = np.zeros(base_e.size, dtype=bool)
        merged, alone = [], []
        for r in members:
            rf, re_ = rows["fixed"][r], rows["est"][r]
            own = rows["ph"][r]
            clash = own & set_ & ((re_ != e) | ~((rf == f) | (np.isnan(rf) & np.isnan(f))))
            if np.any(clash):
                alone.append(r)
                continue
            f[own], e[own] = rf[own], re_[own]
            set_ |= own
            merged.append(r)
        groups.append((int(k), np.array(merged, dtype=np.int64), f, e))
        groups += [(int(k), np.array([r], dtype=np.int64), rows["fixed"][r].copy(), rows["est"][r].copy())
                   for r in alone]
    return groups


class _ProblemPosterior:
    """``evaluate(theta) -> (logp, grad, metric)`` of a :class:`Problem` (see ``log_posterior``)."""

    def __init__(self, problem, options):
        self.problem = problem
        self.options = dict(options)

    @property
    def dim(self):
        return self.problem.dim

    @property
    def param_names(self):
        return self.problem.param_names

    @property
    def support(self):
        """``(lower, upper)`` outside which ``logp`` is ``-inf``: :func:`pbsens.smmala` samples inside it."""
        return self.problem.priors.support()

    def evaluate(self, theta):
        pr = self.problem
        th = pr._theta(theta)
        d = pr.dim
        lp, gp = pr.priors.logpdf_and_grad(th)
        if not math.isfinite(lp):
            return -math.inf, np.zeros(d), np.eye(d)
        try:
            res = pr.evaluate(th, **self.options)
        except SolverError:
            return -math.inf, np.zeros(d), np.eye(d)
        return res.llh + lp, res.gradient + gp, res.fim + pr.priors.precision(th)

    def logp(self, theta):
        return self.evaluate(theta)[0]

    def grad(self, theta):
        return self.evaluate(theta)[1]

    def metric(self, theta):
        return self.evaluate(theta)[2]
