"""The settings of one :meth:`Problem.evaluate`: its solver options and the compiled output loop.

Here, not in :mod:`.problem`, so that the modules :class:`Problem` calls on demand
(:mod:`.cross_check`) can use them without importing :mod:`.problem` back;
:mod:`.problem` re-exports :func:`evaluation_options` and :func:`steady_state_options_of`.
"""
from __future__ import annotations

from ..sensitivity.methods import FORWARD

__all__ = ["evaluation_options", "steady_state_options_of"]


#: Default solver options of :meth:`Problem.evaluate`, for every method: the compiled Rodas5P state
#: solver (for ``method="fs"`` its augmented solve of states and sensitivities). Chosen from benchmarks/bench_petab.py
#: (docs/PERFORMANCE.md): on Boehm, Fujita and Brannmark the llh is within 1e-4 of the reference values,
#: 3-6x faster than LSODA.
_DEFAULTS = dict(solver="rodas5p", rtol=1e-8, atol=1e-10)
#: The march takes the library's options (DEFAULT_SUBSTEPS, 4, for Rodas5P; for exp2 the midpoint
#: correction on the long intervals, METHOD.md section 14). Until wave 9 exp2 marched on the solver's
#: own grid (substeps=1): a gradient error floor of 1e-3 (Boehm) and 3e-4 (Fujita) at rtol 1e-8; with
#: the correction 4.9e-7 and 4.2e-6 for 40 % more time, and Pareto-better at every rtol from 1e-3 to
#: 1e-9 (benchmarks/work_precision_petab.py, docs/PERFORMANCE.md).
#: For ``method="fs"`` the same: the compiled augmented Rodas5P solve (gradient error <= 1e-7 on the
#: three problems; BDF took 10-20x longer).
#: Options only scipy's solvers take: given without a ``solver``, they select scipy's (LSODA; BDF for fs).
_SCIPY_ONLY_OPTIONS = ("max_nfev",)


def evaluation_options(method, sensitivities, solver_options):
    """The solver options of one evaluation: the defaults above, updated by the caller's."""
    fs = method == FORWARD
    opts = dict(_DEFAULTS)
    if "solver" not in solver_options and any(k in solver_options for k in _SCIPY_ONLY_OPTIONS):
        opts["solver"] = "BDF" if fs and sensitivities else "LSODA"
    opts.update(solver_options)
    return opts


def _bound_outputs(model):
    """The model's output functions bound into one compiled loop over times, once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "outputs" not in cache:
        from ..kernels.outputs import bind_outputs   # numba kernels load on first use, not at import
        cache["outputs"] = bind_outputs(model.fns)
    return cache["outputs"]


def steady_state_options_of(opts):
    """Steady-state options from the evaluation's: its tolerances, and its state solver for the approach."""
    ss = {k: opts[k] for k in ("rtol", "atol") if k in opts}
    if isinstance(opts.get("solver"), str):
        ss["solver"] = opts["solver"]
    return ss
