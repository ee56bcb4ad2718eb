"""``Problem.evaluate(method="auto")``: forward exp2 or the post-hoc adjoint for the gradient.

The rule (issue #40, measured with ``benchmarks/method_crossover.py``; docs/PERFORMANCE.md,
"Forward or adjoint: the choice rule"): both march the same state grid and exponentiate the same
``n x n`` matrices per interval; the forward march then multiplies ``np`` columns of ``S`` per
interval, the adjoint one vector. On 14 PEtab benchmark problems with 3 to 113 estimated
parameters and 4 to 34 states, the adjoint's whole evaluation took 0.87-1.09x of forward exp2's
CPU time up to 22 parameters on small models (a wash, within the shared machine's noise),
0.68-0.86x from 30 to 46 parameters and on Laske (34 states), 0.45x on Bachmann (113). Below
``AUTO_ADJOINT_MIN_PARAMS`` estimated parameters nothing was measured and forward exp2 is kept. The adjoint is never chosen
where it does not apply: state-triggered, delayed or prioritized events (it refuses them), or
``sensitivities=False`` (no gradient at all); nor on models that take the sparse march
(``linalg="auto"``: >= 60 states and a sparse Jacobian): the sparse adjoint matches the forward march
and scales with ``np`` as intended on generated networks, but on Lang (124 states, 291 estimated
parameters, stiff: the dense step on 8197 of 8261 intervals) it took 1.0x forward exp2's CPU
(``benchmarks/bench_lang_adjoint.py``; docs/PERFORMANCE.md, "The sparse adjoint"): both evaluate a
dense matrix function per interval, the forward's in the 103 coordinates the conservation laws leave
and without ``F3``, the adjoint's on all 124 states with ``F3``, which eats what the one vector saves.
(Before a fix of the adjoint's branch test it did not finish at all there.)

The adjoint has no columns of ``S``, so the Fisher information and the residual Jacobians are
not part of its result: with ``"auto"`` they are computed on first read, by one forward exp2
evaluation at the same ``theta`` and options (about the cost of ``method="exp2"``), so that a
caller that needs them still gets them; one that needs them on every call (fides, SMMALA) should
ask for ``method="exp2"``, which computes everything in one pass.
"""
from __future__ import annotations

from ..errors import PbsensError
from .adjoint_evaluation import ADJOINT_METHOD

__all__ = ["AUTO_METHOD", "AUTO_ADJOINT_MIN_PARAMS", "FORWARD_DEFAULT", "choose_gradient_method"]

AUTO_METHOD = "auto"
#: The fewest estimated parameters for which ``"auto"`` takes the adjoint (the smallest measured).
AUTO_ADJOINT_MIN_PARAMS = 3
#: The forward post-hoc method ``"auto"`` falls back to.
FORWARD_DEFAULT = "exp2"


def choose_gradient_method(problem, sensitivities=True):
    """``(method, reason)``: the method ``"auto"`` takes for ``problem`` (module docstring)."""
    if not sensitivities:
        return FORWARD_DEFAULT, "no gradient asked"
    from ..simulation.adjoint import check_adjoint_supported
    try:
        check_adjoint_supported(problem.model)
    except PbsensError as exc:
        return FORWARD_DEFAULT, f"the adjoint does not apply: {exc}"
    from ..sensitivity import sparse as sparse_path
    if sparse_path.choose(problem.model, FORWARD_DEFAULT, "auto"):
        return FORWARD_DEFAULT, ("a large sparse model: the sparse adjoint saved nothing on the one measured "
                                 "(Lang: 1.0x forward exp2's CPU)")
    if problem.dim < AUTO_ADJOINT_MIN_PARAMS:
        return FORWARD_DEFAULT, f"{problem.dim} estimated parameters < {AUTO_ADJOINT_MIN_PARAMS}"
    return ADJOINT_METHOD, f"{problem.dim} estimated parameters >= {AUTO_ADJOINT_MIN_PARAMS}"


class ForwardLater:
    """The fields of an ``"auto"`` evaluation that took the adjoint and that only a forward
    evaluation has (``fim``, ``residual_jacobian``, ``sigma_jacobian``): one forward exp2
    evaluation at the same ``theta`` and options, made when the first of them is read and shared."""

    __slots__ = ("problem", "theta", "options", "result")

    def __init__(self, problem, theta, options):
        self.problem, self.theta, self.options, self.result = problem, theta, dict(options), None

    def field(self, name):
        if self.result is None:
            self.result = self.problem.evaluate(self.theta, method=FORWARD_DEFAULT, **self.options)
        return getattr(self.result, name)
