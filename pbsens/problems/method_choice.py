"""``Problem.evaluate(method="auto")``: forward exp2 or the post-hoc adjoint for the gradient.

The rule (issue #40, measured with ``benchmarks/method_crossover.py``; docs/PERFORMANCE.md,
"Forward or adjoint: the choice rule"): both march the same state grid and exponentiate the same
``n x n`` matrices per interval; the forward march then multiplies ``np`` columns of ``S`` per
interval, the adjoint one vector. On 14 PEtab benchmark problems with 3 to 113 estimated
parameters and 4 to 34 states, the adjoint's whole evaluation took 0.87-1.09x of forward exp2's
CPU time up to 22 parameters on small models (a wash, within the shared machine's noise),
0.68-0.86x from 30 to 46 parameters and on Laske (34 states), 0.45x on Bachmann (113); on the
collection's problems with 50-136 parameters 0.42-0.88x (docs/PERFORMANCE.md, "Post-hoc adjoint on
the collection's large problems"). Since issue #41's check (below) the adjoint also marches the
spread's vector; since 2026-11-28 both kernels carry it through each interval's matrix functions with
the gradient's vector (they used to form them all again in a second march, 1.23-1.85x the adjoint
alone, when the threshold was raised from 3 to 100). Measured with the spread
(``benchmarks/method_crossover.py --spread``; docs/PERFORMANCE.md, "The spread's vector in the same
march"): (adjoint + spread) / forward exp2 0.94-1.01 from 9 to 22 parameters, 1.10 on Zhao (28, 4
states), 0.60-0.87 on 7 of 9 problems from 30 to 84 parameters (Schwen 30, Weber 36, Raia 39,
Isensee 46, Alkan 56, Beer 72, Lucarelli 84) and 0.98-1.09 on the other two (Zheng 46 and Giordano 50,
one condition each); 0.6 on Bachmann (113; ``benchmarks/adjoint_spread.py``). So from ``AUTO_ADJOINT_MIN_PARAMS`` = 30 estimated parameters the
adjoint is taken. The same rule holds on the sparse path (models with >= 60 states and a sparse
Jacobian): on Lang (124 states, 291 estimated parameters, stiff: the dense step on 8197 of 8261
intervals) the sparse adjoint with the spread takes 0.58x forward exp2's CPU (48.1 s against 83.3 s,
``benchmarks/bench_lang_adjoint.py --spread``; 0.93x while the spread was a second march, when the
sparse path kept forward exp2). The adjoint is never chosen where it does not apply: state-triggered,
delayed or prioritized events (it refuses them), or ``sensitivities=False`` (no gradient at all).

The adjoint has no columns of ``S``, so the Fisher information and the residual Jacobians are
not part of its result: with ``"auto"`` they are computed on first read, by one forward exp2
evaluation at the same ``theta`` and options (about the cost of ``method="exp2"``), so that a
caller that needs them still gets them; one that needs them on every call (fides, SMMALA) should
ask for ``method="exp2"``, which computes everything in one pass.

**Near an optimum** (issue #41) the gradient ``g = sum_rows dllh/dy dy/dtheta`` is a sum of terms
that cancel, while the post-hoc march's error in each ``dy/dtheta`` does not shrink with ``g``: at
the collection's published optima the default gradient was 13 % (Bruno), 21 % (Brannmark) and
77 % (Lucarelli) of its norm off a tight forward-sensitivity gradient. ``"auto"`` therefore
also forms the *spread* ``a = sum_rows |dllh/dy| dy/dtheta (+ the same for sigma)``, the gradient
without the residuals' signs (free on the forward path; one more backward pass on the adjoint's),
and when ``||a|| > GRADIENT_CANCELLATION ||g||`` it evaluates again by ``method="fs"`` (its error is
controlled on ``S`` itself), at tolerances tightened by ``FS_TIGHTEN / (||a|| / ||g||)`` where that is
below 1 (fs's error, too, is amplified by the cancellation: against ``||a||`` it was 6e-10 to
8.7e-8 at rtol 1e-8 on the five problems and a hand-written logistic one, so ``FS_TIGHTEN`` = 1e4
leaves it below ~1e-3 of ``||g||`` if it falls in proportion to rtol, which it did not always:
Brannmark's fs error went from 3.1e-4 to 1.7e-4 of ``||g||`` from rtol 1e-8 to 1e-9), and returns
that result, with a note. Measured
(``benchmarks/gradient_at_optimum.py``, docs/PERFORMANCE.md "The default gradient at the published
optimum"): ``||a|| / ||g||`` was 0.9-1.1 at ``x_nominal + 0.1`` on Bruno, Brannmark, Boehm and Fujita
and 2e3-3e5 at their nominal optima; the post-hoc error against ``||a||`` was at most 5.7e-5 at the
default tolerances, so below the limit of 10 the post-hoc gradient's relative error stays below ~6e-4.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError
from .adjoint_evaluation import ADJOINT_METHOD

__all__ = ["AUTO_METHOD", "AUTO_ADJOINT_MIN_PARAMS", "FORWARD_DEFAULT", "GRADIENT_CANCELLATION", "FS_TIGHTEN",
           "choose_gradient_method", "refine_if_cancelling"]

AUTO_METHOD = "auto"
#: The fewest estimated parameters for which ``"auto"`` takes the adjoint (3 until issue #41's check
#: made the adjoint pay a second backward march, then 100; 30 since the spread's vector shares the
#: gradient's march; module docstring).
AUTO_ADJOINT_MIN_PARAMS = 30
#: The forward post-hoc method ``"auto"`` falls back to.
FORWARD_DEFAULT = "exp2"
#: ``"auto"`` recomputes by ``method="fs"`` when the spread's norm exceeds this multiple of the
#: gradient's (module docstring).
GRADIENT_CANCELLATION = 10.0
#: The refinement's fs runs at the evaluation's ``rtol``, ``atol`` times ``min(1, FS_TIGHTEN / ratio)``
#: (``ratio = ||spread|| / ||gradient||``), not below ``FS_MIN_RTOL`` (``atol``: 1e-2 of it): fs's error
#: against the spread was at most 8.7x its ``rtol`` on the problems measured (module docstring).
FS_TIGHTEN = 1e4
FS_MIN_RTOL = 1e-12


def choose_gradient_method(problem, sensitivities=True):
    """``(method, reason)``: the method ``"auto"`` takes for ``problem`` (module docstring)."""
    if not sensitivities:
        return FORWARD_DEFAULT, "no gradient asked"
    from ..simulation.adjoint import check_adjoint_supported
    try:
        check_adjoint_supported(problem.model)
    except PbsensError as exc:
        return FORWARD_DEFAULT, f"the adjoint does not apply: {exc}"
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


def refine_if_cancelling(problem, th, result, spread, solver_options):
    """``result`` of an ``"auto"`` evaluation, or, when its gradient cancels (``||spread|| >
    GRADIENT_CANCELLATION ||gradient||``), the evaluation by ``method="fs"`` at the same ``theta`` and
    solver options (the post-hoc march options left out), its notes saying why."""
    if spread is None or result.gradient is None:
        return result
    ng, ns = float(np.linalg.norm(result.gradient)), float(np.linalg.norm(spread))
    if not ns > GRADIENT_CANCELLATION * ng:
        return result
    from ..sensitivity.methods import FORWARD
    from ..simulation.segments import SENSITIVITY_OPTIONS
    from .evaluation_setup import evaluation_options
    opts = evaluation_options(FORWARD, True, {k: v for k, v in solver_options.items() if k not in SENSITIVITY_OPTIONS})
    ratio = np.inf if ng == 0.0 else ns / ng
    factor = min(1.0, FS_TIGHTEN / ratio)       # fs's own error, too, is amplified by the cancellation
    if factor < 1.0 and isinstance(opts.get("rtol"), float) and isinstance(opts.get("atol"), float):
        opts["rtol"] = max(opts["rtol"] * factor, FS_MIN_RTOL)
        opts["atol"] = max(opts["atol"] * factor, FS_MIN_RTOL * 1e-2)
    refined = problem._evaluate(th, FORWARD, True, opts)
    note = (f"method='auto': the post-hoc gradient is a sum of cancelling terms (||sum |dllh/dy| dy/dtheta|| = "
            f"{ratio:.3g} x ||gradient|| > {GRADIENT_CANCELLATION:g}, as near an optimum, where the post-hoc error does "
            f"not shrink with the gradient): evaluated again by method='fs' (rtol {_short(opts.get('rtol'))}, atol "
            f"{_short(opts.get('atol'))}), whose result this is")
    refined.notes[:0] = list(result.notes) + [note]
    refined.timing["posthoc_total"] = result.timing.get("total")
    return refined


def _short(value):
    return f"{value:.3g}" if isinstance(value, (int, float)) else repr(value)
