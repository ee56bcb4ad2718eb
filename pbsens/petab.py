"""``pbsens.petab``: PEtab estimation problems (see :mod:`pbsens.problems`).

``pbsens.petab.load("problem.yaml")`` -> :class:`~pbsens.problems.Problem`. The
``petab`` library itself is imported absolutely (``petab.v1``) everywhere in pbsens.
"""
from .problems import EvaluationResult, PetabError, Problem, load

__all__ = ["load", "Problem", "EvaluationResult", "PetabError"]
