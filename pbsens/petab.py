"""``pbsens.petab``: PEtab estimation problems (see :mod:`pbsens.problems`).

``pbsens.petab.load("problem.yaml")`` -> :class:`~pbsens.problems.Problem`. The
``petab`` library itself is imported absolutely (``petab.v1``) everywhere in pbsens.
``pbsens.petab.pypesto_objective(problem)`` / ``pypesto_problem(problem)``: the problem as
a pyPESTO objective / problem (extra ``fit``; :mod:`pbsens.problems.pypesto_objective`).
"""
from .problems import EvaluationResult, PetabError, Problem, load
from .problems.pypesto_objective import PypestoMissingError, pypesto_objective, pypesto_problem

__all__ = ["load", "Problem", "EvaluationResult", "PetabError", "pypesto_objective", "pypesto_problem",
           "PypestoMissingError"]
