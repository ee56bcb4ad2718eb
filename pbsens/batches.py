"""Batches of pbsens work on workers: :func:`evaluate_many` (a PEtab problem at many
parameter vectors) and :func:`sensitivities_many` (a model at many parameter vectors), on
local processes or dask (:func:`pbsens.parallel.map_tasks`).

Workers do not receive compiled models: they receive a *recipe* (a PEtab YAML
path, an SBtab folder, a :class:`~pbsens.ModelSpec`) and build the model from
pbsens's on-disk cache of compiled models (no recompilation; see
``benchmarks/bench_batch.py`` for a worker's first-call time against a fresh
compile), keeping it for later tasks (per worker process and thread).
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

from .errors import PbsensError
from .parallel import map_tasks
from .parallel.tasks import check_errors, finish_batch, map_here, float_rows

__all__ = ["evaluate_many", "sensitivities_many", "problem_recipe", "model_recipe", "worker_problem",
           "worker_model", "worker_load_time"]


# ------------------------------------------------------------------ worker side
_WORKER_CACHE = {}
_CACHE_LOCK = threading.Lock()


def _cached(kind, recipe, build):
    """``build(recipe)`` once per worker process and thread (Problem objects are not thread-safe)."""
    key = (kind, repr(recipe), threading.get_ident())
    with _CACHE_LOCK:
        hit = _WORKER_CACHE.get(key)
    if hit is None:
        t0 = time.perf_counter()
        obj = build(recipe)
        hit = (obj, time.perf_counter() - t0)
        with _CACHE_LOCK:
            _WORKER_CACHE[key] = hit
    return hit[0]


def worker_load_time(kind, recipe):
    """Seconds this worker (process, thread) spent building ``recipe``, or None if not built."""
    hit = _WORKER_CACHE.get((kind, repr(recipe), threading.get_ident()))
    return None if hit is None else hit[1]


def _build_problem(recipe):
    kind, path = recipe[0], recipe[1]
    if kind == "petab":
        from .problems import load
        return load(path, lint=False)      # from the problem cache when the files are unchanged
    if kind == "sbtab":
        from .problems import load
        return load(path)                  # a folder: load_sbtab, through the problem cache
    raise PbsensError(f"unknown problem recipe {recipe!r}")


def _build_model(recipe):
    if recipe[0] == "spec":
        from .model.library import model_from_spec
        return model_from_spec(recipe[1], recipe[2] if len(recipe) > 2 else None)   # the same backend
    if recipe[0] == "random_linear":
        from .model.library import random_linear_model
        return random_linear_model(recipe[1], seed=recipe[2])
    raise PbsensError(f"unknown model recipe {recipe!r}")


def worker_problem(recipe):
    """The :class:`~pbsens.problems.Problem` of ``recipe`` in this worker (built once)."""
    return _cached("problem", recipe, _build_problem)


def worker_model(recipe):
    """The :class:`~pbsens.Model` of ``recipe`` in this worker (built once, from the disk cache)."""
    return _cached("model", recipe, _build_model)


# ------------------------------------------------------------------ problem batches
def problem_recipe(problem):
    """How a worker rebuilds ``problem``: ``("petab", yaml)`` or ``("sbtab", folder)``."""
    src = getattr(problem, "source", None)
    if isinstance(src, tuple) and len(src) == 2:
        return src
    files = getattr(problem, "files", None) or {}
    if files.get("yaml"):
        return ("petab", os.path.abspath(files["yaml"]))
    raise PbsensError("'problem' was not read from a file (no PEtab YAML or SBtab folder), so worker "
                      "processes cannot rebuild it: load it with pbsens.petab.load(yaml)")


def _evaluate_item(context, theta):
    recipe, options = context
    res = worker_problem(recipe).evaluate(theta, **options)
    res.simulations = None   # the table stays in the worker; llh, gradient and FIM travel
    return res


def evaluate_many(problem, thetas, *, client=None, n_workers=None, chunk_size=None, errors="raise",
                  dispatch="auto", **options):
    """:meth:`Problem.evaluate <pbsens.problems.Problem.evaluate>` for each row of ``thetas``.

    Parameters
    ----------
    problem : Problem
        Read from a file (workers reload it from there, compiled model from the cache).
    thetas : array_like (n, d)
        Parameter vectors on the parameter scale.
    client, n_workers, chunk_size
        See :func:`map_tasks`.
    dispatch : {"auto", "tasks", "resident"}
        How chunks reach dask workers, see :func:`map_tasks` (``"auto"``: resident
        actors on single-threaded workers, where a batch costs a few ms of dask
        instead of tens).
    errors : {"raise", "keep"}
        ``"raise"``: a failed evaluation raises :class:`BatchError` (``.results`` keeps
        the others); ``"keep"``: a :class:`TaskFailure` (with its ``theta``) takes its
        place and a warning names it.
    **options
        Passed to ``evaluate`` (``method``, ``sensitivities``, solver options).

    Returns
    -------
    list of EvaluationResult
        In input order; ``simulations`` is ``None`` (call ``evaluate`` for the table).
    """
    check_errors(errors)
    th = float_rows(thetas, "thetas", problem.dim)
    if not np.all(np.isfinite(th)):
        raise PbsensError(f"'thetas' contains NaN or inf in rows "
                          f"{np.flatnonzero(~np.all(np.isfinite(th), axis=1)).tolist()[:10]}")
    if client is None and n_workers == 1:   # in this process: no reload needed
        return map_here(lambda t: problem.evaluate(t, **options), th, errors, "evaluations")
    res = map_tasks(_evaluate_item, (problem_recipe(problem), options), th, client=client,
                    n_workers=n_workers, chunk_size=chunk_size, dispatch=dispatch)
    return finish_batch(res, errors, "evaluations")


# ------------------------------------------------------------------ sensitivity batches
def model_recipe(model):
    """How a worker rebuilds ``model`` from the compiled-model cache."""
    spec = getattr(model, "spec", None)
    if spec is not None:
        backend = getattr(model, "backend", None)
        return ("spec", spec, backend) if backend in ("numba", "tape") else ("spec", spec)
    meta = getattr(model, "meta", {}) or {}
    name = getattr(model, "name", "")
    if name.startswith("RandomLinear") and "seed" in meta:
        return ("random_linear", model.n_states, meta["seed"])
    raise PbsensError(f"'model' {name!r} has no ModelSpec, so worker processes cannot rebuild it")


def _sensitivities_item(context, p):
    recipe, kwargs = context
    from .sensitivity.posthoc import sensitivities
    return sensitivities(worker_model(recipe), p=p, **kwargs)


def sensitivities_many(model, ps, *, client=None, n_workers=None, chunk_size=None, errors="raise",
                       dispatch="auto", **kwargs):
    """:func:`pbsens.sensitivities` for each row of ``ps`` (parameter vectors), in input order.

    ``kwargs`` are :func:`~pbsens.sensitivities`'s (``t_span`` is required,
    ``t_eval``, ``method``, ``x0``, tolerances...). ``client``, ``n_workers``,
    ``chunk_size``, ``errors`` and ``dispatch`` as in :func:`evaluate_many`.

    Returns
    -------
    list of SensitivityResult
    """
    check_errors(errors)
    if "trajectory" in kwargs:
        raise PbsensError("'trajectory' cannot be given to sensitivities_many (each p needs its own solve); "
                          "give t_span")
    if kwargs.get("t_span") is None:
        raise PbsensError("'t_span' is required by sensitivities_many")
    P = float_rows(ps, "ps", model.n_params)
    if client is None and n_workers == 1:
        from .sensitivity.posthoc import sensitivities
        return map_here(lambda p: sensitivities(model, p=p, **kwargs), P, errors, "sensitivity solves")
    res = map_tasks(_sensitivities_item, (model_recipe(model), kwargs), P, client=client,
                    n_workers=n_workers, chunk_size=chunk_size, dispatch=dispatch)
    return finish_batch(res, errors, "sensitivity solves")
