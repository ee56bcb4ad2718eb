"""Compatibility module: the state solve lives in :mod:`pbsens.solvers`.

``pbsens.solve.Trajectory``, ``solve_states``, ``check_t_span``,
``check_t_eval`` and ``merge_grid`` keep working.
"""
from .solvers import Trajectory, check_t_eval, check_t_span, merge_grid, solve_states

__all__ = ["Trajectory", "solve_states", "check_t_span", "check_t_eval", "merge_grid"]
