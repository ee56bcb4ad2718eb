"""Estimation problems: PEtab problems as log-likelihood, gradient and Fisher information.

``pbsens.petab.load(yaml_path)`` (also :func:`load` here) reads a PEtab v1 problem
into a :class:`Problem`; see ``docs/API.md``.
"""
from __future__ import annotations

from .petab import PetabError
from .problem import EvaluationResult, Problem

__all__ = ["load", "Problem", "EvaluationResult", "PetabError"]


def load(yaml_path, *, lint=True, cache=True) -> Problem:
    """Read, validate and compile a PEtab v1 problem (its YAML file).

    The tables are read and checked with the ``petab`` library (``petab.v1``,
    including its linter unless ``lint=False``); bad files raise
    :class:`PetabError` naming the file, row and column. The SBML model is
    compiled once, with the observables and noise formulas as its outputs (the
    on-disk cache keeps it). A folder instead of a YAML file is read as an SBtab
    estimation problem (UQSA layout, :func:`pbsens.problems.sbtab_problem.load_sbtab`).

    ``cache``: keep the loaded problem in the on-disk problem cache and load it from there
    when the files have not changed (:mod:`pbsens.problems.problem_cache`: a warm load
    without the ``petab`` library; the result is the same problem).
    """
    import os

    from . import problem_cache
    use_cache = cache and problem_cache.enabled()
    key = problem_cache.problem_key(yaml_path) if use_cache else None   # before reading: what is read is keyed
    if key is not None:
        hit = problem_cache.lookup(yaml_path, lint=lint, key=key)
        if hit is not None:
            return hit
    with problem_cache.recording_warnings() as issued:
        if os.path.isdir(os.fspath(yaml_path)):     # an SBtab folder (UQSA layout)
            from .sbtab_problem import load_sbtab
            loaded = load_sbtab(yaml_path, lint=lint)
        else:
            from .petab import read_problem
            problem, files = read_problem(yaml_path)
            loaded = Problem.from_petab(problem, lint=lint, files=files)
    if key is not None and problem_cache.problem_key(yaml_path) == key:      # unchanged while it was read
        problem_cache.store(key, loaded, linted=lint, issued=issued)
    return loaded
