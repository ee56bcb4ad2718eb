"""The part of the error of post-hoc sensitivities caused by the state solve (METHOD.md section 11).

Both marches of the step-doubling estimate run on the same states, so they do not see the
state solver's own error. :func:`state_error_part` (``state_error="resolve"``) re-solves the
states ten times tighter, marches again on the same grid, and adds the difference to the
estimate; with ``sens_rtol`` and ``tighten_states`` it returns ``x`` and ``S`` on states solved
as much tighter as the tolerance needs. The helpers are in :mod:`pbsens.sensitivity.error`.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from . import error as error_estimate
from ..errors import AccuracyWarning, PbsensError
from ..solvers import Trajectory
from ..solvers.refine import corrected_plan
from .step_doubling import Marched

__all__ = ["StateErrorPart", "state_error_part", "resolved_mode"]

#: ``stacklevel`` of a warning issued in :func:`state_error_part`: the call of
#: :func:`pbsens.sensitivities` (this module, sensitivities, its BLAS-scope wrapper, the caller).
_CALLER = 4


@dataclass(frozen=True)
class StateErrorPart:
    """``marched``: the march with the state part added (``S_out``, ``x`` on tighter states where
    ``factor > 1``; the estimate including the state part); ``E_state``: the state part per output
    time, or None; ``factor``: how much tighter the states returned are (1: the trajectory's);
    ``mode``: ``state_error`` resolved (``"resolve"`` or None)."""

    marched: Marched
    E_state: np.ndarray | None
    factor: float
    mode: str | None


def resolved_mode(opts, trajectory):
    """``state_error`` with ``"auto"`` resolved: ``"resolve"`` for a Trajectory when an estimate
    (``estimate_error`` or ``sens_rtol``) is asked for, else None."""
    if opts.state_error == "auto":
        return ("resolve" if isinstance(trajectory, Trajectory)
                and (opts.estimate_error or opts.sens_rtol is not None) else None)
    return opts.state_error


def state_error_part(model, opts, setup, march, marched, timings) -> StateErrorPart:
    """Estimate (and with ``sens_rtol`` reduce) the error of ``S`` caused by the states.

    ``march``: the call's :class:`~pbsens.sensitivity.marcher.Marcher`; ``marched``: its result
    (:class:`~pbsens.sensitivity.step_doubling.Marched`). ``timings`` gains ``"state_error"``.
    """
    mode = resolved_mode(opts, setup.trajectory)
    if mode != "resolve":
        return StateErrorPart(marched, None, 1.0, mode)
    t1 = time.perf_counter()
    m = marched
    try:
        x_t, sol_t = error_estimate.tight_states(model, setup.trajectory, m.t)
    except PbsensError as exc:
        warnings.warn(f"the state solve's error could not be estimated (re-solve at rtol/10 failed: {exc}); "
                      "error_estimate covers the sensitivity march only", AccuracyWarning, stacklevel=_CALLER)
        return StateErrorPart(marched, None, 1.0, mode)
    S_t = march(m.t, x_t, m.out_index, setup.t_out.size, dense=sol_t, gap_end=m.gap_end,
                mid=_mid(m, sol_t))[0]   # the same march
    # the state part compares the same march on both states (an extrapolated S_out against the
    # plain march on tight states would count the discretization error as the states')
    S_base = m.S_out if m.S_plain is None else m.S_plain
    E_state = error_estimate.state_part(S_base, S_t)
    D_state = (10.0 / 9.0) * (S_base - S_t)    # signed, the same model as E_state
    S_out, x, factor = m.S_out, m.x, 1.0
    if opts.sens_rtol is not None and opts.tighten_states:
        factor, E_new, D_state, S_t, x_t = _tighten(model, opts, setup, march, m, E_state, D_state, S_t, x_t)
        if factor > 1.0:
            # the state effect S_t - S_base added to the result (kept extrapolated where it was)
            S_out, x = (S_t if m.S_plain is None else m.S_out + (S_t - S_base)), x_t
            E_state = E_new
            if factor == 10.0:
                D_state = D_state / 10.0
    timings["state_error"] = time.perf_counter() - t1
    error_estimate.warn_range(setup.t_out, E_state > 1e-2, "the estimated error of S caused by the state solve "
                              "exceeds 1e-2 (post-hoc sensitivities cannot be more accurate than the states "
                              "they are computed on; solve the states with a smaller rtol)", stacklevel=_CALLER + 1)
    E_est, E_par, E_mat = m.E_est, m.E_par, m.E_mat
    if E_est is not None:
        # the two parts added signed (they may cancel in S too), the norm taken after
        E_mat = E_mat + D_state
        E_est, E_par = error_estimate.signed_estimate(E_mat, S_out - E_mat)
    return StateErrorPart(replace(m, S_out=S_out, x=x, E_est=E_est, E_par=E_par, E_mat=E_mat), E_state, factor, mode)


def _mid(m, sol):
    """The march's midpoint plan (``m.mid_index``) with the states at the midpoints from ``sol``, the
    tighter solve's dense output (the same solver as the trajectory's, which had one): the same
    corrected march on the other states; None without one."""
    return None if m.mid_index is None else corrected_plan(m.t, sol, m.mid_index >= 0)


def _tighten(model, opts, setup, march, m, E_state, D_state, S_t, x_t):
    """The states limit ``S`` beyond ``sens_rtol``: march on states solved tighter (an rtol/10 solve
    is in hand). Returns ``(factor, E_new, D_state, S_t, x_t)``, the last three of the tightest solve."""
    factor = error_estimate.tighten_factor(E_state, opts.sens_rtol)
    E_new = E_state / factor
    if factor > 10.0:
        try:
            x_f, sol_f = error_estimate.tight_states(model, setup.trajectory, m.t, factor=factor)
            S_f = march(m.t, x_f, m.out_index, setup.t_out.size, dense=sol_f, gap_end=m.gap_end,
                        mid=_mid(m, sol_f))[0]
        except PbsensError:
            factor = 10.0
            E_new = E_state / factor
        else:
            # the rtol/10 and rtol/f solves differ by (1/10 - 1/f) of the effect at rtol
            E_new = (10.0 / (factor - 10.0)) * error_estimate.state_part(S_t, S_f) * 0.9
            D_state = (10.0 / (factor - 10.0)) * (S_t - S_f)
            S_t, x_t = S_f, x_f
    return factor, E_new, D_state, S_t, x_t
