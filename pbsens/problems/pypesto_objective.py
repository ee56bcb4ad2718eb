"""A PEtab :class:`~pbsens.problems.Problem` as a pyPESTO objective (extra ``fit``).

``pbsens.petab.pypesto_objective(problem, method="exp2", **solver_options)`` returns a
``pypesto.objective.ObjectiveBase`` whose values follow pyPESTO's AMICI objective
(``pypesto.objective.AmiciObjective`` with ``fim_for_hess=True``, its default):

* ``fval`` = ``-llh`` (the negative log-likelihood, normalisation constants included),
* ``grad`` = ``-gradient``,
* ``hess`` = the Fisher information (``EvaluationResult.fim``): the FIM stands in for
  the Hessian, as AMICI's forward sensitivities do in pyPESTO; fides's default
  ``hessian_update`` in pyPESTO ("default" -> ``HybridFixed``) assumes exactly that,
  ``hessian_update=None`` uses it in every iteration. ``hessian="gauss-newton"``
  gives ``J^T J`` of the weighted residuals instead (``J`` =
  ``EvaluationResult.residual_jacobian``): what AMICI returns as its "FIM" (checked on
  Boehm against AMICI 1.1 to 4e-7). The two agree when no ``sigma`` depends on the
  parameters; with estimated noise parameters the FIM is the expected information
  (``2/sigma^2`` weights on ``dsigma``), ``J^T J`` depends on the residuals,
* mode ``res``: ``res`` = the weighted residuals ``(T(m) - T(y)) / sigma`` and ``sres``
  their Jacobian (``EvaluationResult.residual_jacobian``), when the installed pbsens
  computes it (else ``check_mode("mode_res")`` is False). As in AMICI without sigma
  residuals, ``0.5 * sum(res**2)`` differs from ``fval`` by the normalisation terms
  (and is not the objective when ``sigma`` is estimated).

A failed simulation (:class:`~pbsens.errors.SolverError`, also an output that is NaN; and a
noise formula that is not positive at ``x``, a :class:`~pbsens.problems.PetabError`) is
not raised: ``fval = inf`` and NaN in ``grad``, ``hess``, ``res``, ``sres``, as pyPESTO's
AMICI objective reports a failed AMICI simulation (``get_error_output``), so optimisers
reject the step. Invalid input (a ``theta`` of the wrong length, an unknown method)
still raises. With ``method="exp2-adjoint"`` (issue #40) the objective offers ``fval`` and
``grad`` only (no FIM, no residuals).

pyPESTO is imported on first use; without it, :class:`PypestoMissingError`
(``pip install pbsens[fit]``). The objective class is built then too, and is reachable as
``pbsens.problems.pypesto_objective.PbsensObjective`` (pickles by reference).
"""
from __future__ import annotations

import copy

import numpy as np

from ..errors import PbsensError, SolverError
from .tables import PetabError

__all__ = ["pypesto_objective", "pypesto_problem", "PypestoMissingError"]


class PypestoMissingError(PbsensError, ImportError):
    """pyPESTO (the optional extra ``fit``) is not installed."""


_CLASS = None
#: what ``hess`` holds: the expected Fisher information, or J^T J of the weighted residuals (AMICI's "FIM")
HESSIANS = ("fim", "gauss-newton")


def _pypesto():
    try:
        import pypesto
        import pypesto.C
        import pypesto.objective
    except ImportError as exc:
        raise PypestoMissingError(f"pyPESTO is not installed ({exc}): pip install pbsens[fit] "
                                  "(pyPESTO and fides)") from None
    return pypesto


def _has_residual_jacobian():
    from .problem import EvaluationResult
    return "residual_jacobian" in getattr(EvaluationResult, "__dataclass_fields__", {})


def _objective_class():
    """The ``ObjectiveBase`` subclass, defined on first use (pyPESTO is optional)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    pypesto = _pypesto()
    from pypesto.C import FVAL, GRAD, HESS, MODE_FUN, MODE_RES, RES, SRES

    class PbsensObjective(pypesto.objective.ObjectiveBase):
        """``-llh``, ``-gradient`` and the FIM of a pbsens PEtab problem (module docstring)."""

        def __init__(self, problem, method="exp2", prior=False, hessian="fim", x_names=None, **solver_options):
            if not hasattr(problem, "evaluate") or not hasattr(problem, "parameter_ids"):
                raise PbsensError(f"'problem' must be a pbsens Problem (pbsens.petab.load), got {type(problem).__name__}")
            from ..sensitivity.methods import FORWARD
            from ..sensitivity.posthoc import METHODS
            from .adjoint_evaluation import ADJOINT_METHOD
            if method != FORWARD and method != ADJOINT_METHOD and method not in METHODS:
                raise PbsensError(f"'method' must be 'fs', {ADJOINT_METHOD!r} or one of {', '.join(METHODS)}, "
                                  f"got {method!r}")
            # the adjoint computes llh and gradient only: no FIM (sensi order 2) and no residuals (mode "res")
            self._gradient_only = method == ADJOINT_METHOD
            if hessian not in HESSIANS:
                raise PbsensError(f"'hessian' must be one of {', '.join(map(repr, HESSIANS))}, got {hessian!r}")
            if hessian == "gauss-newton" and not _has_residual_jacobian():
                raise PbsensError("hessian='gauss-newton' needs EvaluationResult.residual_jacobian, which this "
                                  "pbsens does not compute: use hessian='fim'")
            self.hessian = hessian
            super().__init__(x_names=list(problem.parameter_ids) if x_names is None else list(x_names))
            self.problem = problem
            self.method = method
            self.prior = bool(prior)
            self.solver_options = dict(solver_options)
            self.n_failed = 0           # simulations that failed (reported as fval = inf)
            self.last_error = None      # the message of the last of them

        # ---- what it can compute
        def check_mode(self, mode) -> bool:
            if mode == MODE_FUN:
                return True
            if mode == MODE_RES:
                return _has_residual_jacobian() and not self._gradient_only
            raise ValueError(f"Unknown mode {mode}.")

        def check_sensi_orders(self, sensi_orders, mode) -> bool:
            if not sensi_orders:
                return True
            if not self.check_mode(mode):
                return False
            top = 1 if self._gradient_only else (2 if mode == MODE_FUN else 1)
            return max(sensi_orders) <= top and min(sensi_orders) >= 0

        # ---- evaluation
        def call_unprocessed(self, x, sensi_orders, mode, return_dict=False, **kwargs):
            x = np.asarray(x, dtype=np.float64).reshape(-1)
            sens = bool(sensi_orders) and max(sensi_orders) >= 1
            if not np.all(np.isfinite(x)):
                return self._failure(x.size, sensi_orders, mode, "x contains NaN or inf")
            try:
                r = self.problem.evaluate(x, sensitivities=sens, method=self.method, **self.solver_options)
            except (SolverError, PetabError) as exc:   # PetabError: a noise formula <= 0 at this x
                return self._failure(x.size, sensi_orders, mode, str(exc))
            if mode == MODE_RES:
                return self._residual_output(r, x.size, sensi_orders)
            fval = -float(r.llh)
            grad = None if r.gradient is None else -np.asarray(r.gradient, dtype=np.float64)
            hess = None
            if 2 in sensi_orders and r.fim is not None:
                if self.hessian == "gauss-newton":
                    J = np.asarray(r.residual_jacobian, dtype=np.float64)
                    hess = J.T @ J
                else:
                    hess = np.array(r.fim, dtype=np.float64)
            if self.prior:
                lp, glp = self.problem.priors.logpdf_and_grad(x)
                fval -= lp
                if grad is not None:
                    grad = grad - glp
                if hess is not None:
                    hess = hess + self.problem.priors.precision(x)
            if not np.isfinite(fval) or (grad is not None and not np.all(np.isfinite(grad))):
                return self._failure(x.size, sensi_orders, mode, f"non-finite objective {fval!r} or gradient")
            out = {FVAL: fval}
            if 1 in sensi_orders:
                out[GRAD] = grad
            if 2 in sensi_orders:
                out[HESS] = hess
            return out

        def _residual_output(self, r, d, sensi_orders):
            out = {}
            if 0 in sensi_orders:
                out[RES] = np.asarray(r.residuals, dtype=np.float64)
            if 1 in sensi_orders:
                sres = getattr(r, "residual_jacobian", None)
                if sres is None:
                    raise PbsensError("this pbsens computes no residual Jacobian: use mode 'fun'")
                out[SRES] = np.asarray(sres, dtype=np.float64)
            if any(not np.all(np.isfinite(v)) for v in out.values()):
                return self._failure(d, sensi_orders, MODE_RES, "non-finite residuals")
            return out

        def _failure(self, d, sensi_orders, mode, message):
            """pyPESTO's output for a failed simulation: fval inf, NaN derivatives."""
            self.n_failed += 1
            self.last_error = message
            if mode == MODE_RES:
                n = len(self.problem._rows["measurement"]) if hasattr(self.problem, "_rows") else 0
                out = {}
                if 0 in sensi_orders:
                    out[RES] = np.full(n, np.nan)
                if 1 in sensi_orders:
                    out[SRES] = np.full((n, d), np.nan)
                return out
            out = {FVAL: np.inf}
            if 1 in sensi_orders:
                out[GRAD] = np.full(d, np.nan)
            if 2 in sensi_orders:
                out[HESS] = np.full((d, d), np.nan)
            return out

        # ---- copies (pyPESTO deep-copies objectives: share the compiled model)
        def __deepcopy__(self, memo):
            new = copy.copy(self)
            new.problem = copy.copy(self.problem)   # own per-evaluation caches, one compiled model
            new.solver_options = copy.deepcopy(self.solver_options, memo)
            new.pre_post_processor = copy.deepcopy(self.pre_post_processor, memo)
            new.history = copy.deepcopy(self.history, memo)
            return new

        def get_config(self) -> dict:
            info = super().get_config()
            info.update(method=self.method, prior=self.prior, hessian=self.hessian, solver_options=dict(self.solver_options),
                        problem=getattr(self.problem, "model_id", None))
            return info

        def __repr__(self):
            return (f"<PbsensObjective {getattr(self.problem, 'model_id', '?')!r}: {len(self._x_names)} parameters, "
                    f"method={self.method!r}>")

    PbsensObjective.__module__ = __name__
    PbsensObjective.__qualname__ = "PbsensObjective"
    _CLASS = PbsensObjective
    return _CLASS


def __getattr__(name):          # pbsens.problems.pypesto_objective.PbsensObjective (pickle finds it here)
    if name == "PbsensObjective":
        return _objective_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pypesto_objective(problem, method="exp2", *, prior=False, hessian="fim", **solver_options):
    """A pyPESTO objective of a pbsens PEtab problem: ``fval = -llh``, ``grad``, ``hess = FIM``.

    Parameters
    ----------
    problem : Problem
        From :func:`pbsens.petab.load`.
    method : str
        As in :meth:`Problem.evaluate` (a post-hoc method, ``"fs"`` or ``"exp2-adjoint"``). The
        adjoint gives ``fval`` and ``grad`` only: ``check_sensi_orders`` admits no order 2 (no FIM:
        it needs the forward columns of ``S``, ``method="exp2"``) and ``check_mode("mode_res")`` is
        False, so an optimiser that asks for them is refused by pyPESTO before any evaluation.
    prior : bool
        Add the PEtab objective priors (:attr:`Problem.priors`): ``-log prior`` to
        ``fval``, its gradient to ``grad`` and the prior precision to ``hess`` (as
        pyPESTO's PEtab importer aggregates the prior into its objective). Default off:
        the objective is the negative log-likelihood only.
    hessian : {"fim", "gauss-newton"}
        ``hess``: the expected Fisher information (``EvaluationResult.fim``), or ``J^T J``
        of the weighted residuals, AMICI's "FIM" (module docstring; needs
        ``EvaluationResult.residual_jacobian``).
    **solver_options
        Passed to every :meth:`Problem.evaluate` (``solver``, ``rtol``, ``atol``, ...).

    Returns
    -------
    pypesto.objective.ObjectiveBase
        ``PbsensObjective``; ``x_names`` are ``problem.parameter_ids``. A failed
        simulation gives ``fval = inf`` and NaN derivatives (counted in ``.n_failed``,
        the message in ``.last_error``), never an exception.

    Raises
    ------
    PypestoMissingError
        pyPESTO is not installed (``pip install pbsens[fit]``).
    """
    return _objective_class()(problem, method=method, prior=prior, hessian=hessian, **solver_options)


def pypesto_problem(problem, method="exp2", *, prior=False, hessian="fim", x_guesses=None, objective=None,
                    **solver_options):
    """A ``pypesto.Problem``: :func:`pypesto_objective` within the PEtab bounds on the parameter scale.

    ``lb``, ``ub`` = ``problem.bounds`` (on each parameter's ``parameterScale``), ``x_names`` =
    ``problem.parameter_ids``, ``x_scales`` = ``problem.scales``; ``x_guesses`` (rows on the
    parameter scale) become pyPESTO's first start points; ``objective`` reuses one made by
    :func:`pypesto_objective` (else one is made from ``method``, ``prior``, ``hessian``,
    ``solver_options``).
    """
    pypesto = _pypesto()
    if objective is None:
        objective = pypesto_objective(problem, method, prior=prior, hessian=hessian, **solver_options)
    bounds = np.asarray(problem.bounds, dtype=np.float64)
    guesses = None
    if x_guesses is not None:
        guesses = np.atleast_2d(np.asarray(x_guesses, dtype=np.float64))
        if guesses.shape[1] != problem.dim:
            raise PbsensError(f"'x_guesses' rows have {guesses.shape[1]} entries, the problem estimates {problem.dim}")
    return pypesto.Problem(objective=objective, lb=bounds[:, 0], ub=bounds[:, 1], x_guesses=guesses,
                           x_names=list(problem.parameter_ids), x_scales=list(problem.scales))
