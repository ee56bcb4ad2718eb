"""The parameter table of a PEtab problem: the estimated parameters (part of :func:`.petab.build_plan`).

Their ids, scales, bounds and nominal values on their scales, and priors. Errors
name the file, the row and the column, as everywhere in
:mod:`pbsens.problems.petab`, which imports this module.
"""
from __future__ import annotations

import math

import numpy as np

from .tables import PetabError, _is_empty, _where

__all__ = ["estimated_parameters", "scaled_bounds", "objective_priors"]

_SCALES = {"lin": 0, "log": 1, "log10": 2}


def estimated_parameters(par_df, files):
    """``(est_ids, est_index, scales)``: the estimated parameters' ids in table order, id ->
    index, and their scale codes; :class:`PetabError` on an unknown ``parameterScale``."""
    est_ids = [pid for pid in par_df.index if int(par_df.loc[pid, "estimate"]) == 1]
    est_index = {pid: k for k, pid in enumerate(est_ids)}
    scales = []
    for r, pid in enumerate(par_df.index):
        sc = par_df.loc[pid, "parameterScale"]
        if sc not in _SCALES:
            raise PetabError(f"{_where(files, 'parameter', r, 'parameterScale')}: {sc!r} is not one of "
                             "lin, log, log10")
        if pid in est_index:
            scales.append(_SCALES[sc])
    return est_ids, est_index, np.array(scales, dtype=np.int64)


def scaled_bounds(par_df, files, est_ids, scales):
    """``(lower, upper, nominal, no_nominal)`` of the estimated parameters on their scales.

    Bounds must be finite (:class:`PetabError`); a nominal value of 0 on a log scale stays
    ``-inf`` (the value 0, which :meth:`Problem.evaluate` accepts); any other nominal value
    that is not finite is NaN and listed in ``no_nominal`` (where, for the warning).
    """
    from .priors import scale

    def col(name, default=np.nan):
        return [par_df.loc[p, name] if name in par_df.columns else default for p in est_ids]

    lower = scale(np.array(col("lowerBound"), dtype=np.float64), scales)
    upper = scale(np.array(col("upperBound"), dtype=np.float64), scales)
    nominal = scale(np.array(col("nominalValue"), dtype=np.float64), scales)
    no_nominal = []
    for k, pid in enumerate(est_ids):
        r = list(par_df.index).index(pid)
        for name, arr in (("nominalValue", nominal), ("lowerBound", lower), ("upperBound", upper)):
            if math.isfinite(arr[k]):
                continue
            if name == "nominalValue" and arr[k] == -np.inf and scales[k] != 0:
                continue                 # 0 on a log scale (Lang_PLOSComputBiol2024): the value 0
            if name == "nominalValue":   # e.g. missing or negative on a log scale: loadable,
                no_nominal.append(f"{_where(files, 'parameter', r, name)}: {pid!r} = {par_df.loc[pid, name]}")
                nominal[k] = np.nan      # but theta must then be given (Problem._theta says so)
                continue
            raise PetabError(f"{_where(files, 'parameter', r, name)}: parameter {pid!r} needs a finite "
                             f"value on its scale, got {par_df.loc[pid, name]!r}")
    return lower, upper, nominal, no_nominal


def objective_priors(par_df, files, est_ids):
    """``(prior_types, prior_params)`` of the estimated parameters (``None`` where none is given)."""
    ptypes, pparams = [], []
    for k, pid in enumerate(est_ids):
        t = par_df.loc[pid, "objectivePriorType"] if "objectivePriorType" in par_df.columns else None
        pp = par_df.loc[pid, "objectivePriorParameters"] if "objectivePriorParameters" in par_df.columns else None
        if _is_empty(t):
            ptypes.append(None)
            pparams.append(None)
            continue
        r = list(par_df.index).index(pid)
        try:
            vals = [float(x) for x in str(pp).split(";")]
        except ValueError:
            raise PetabError(f"{_where(files, 'parameter', r, 'objectivePriorParameters')}: {pp!r} is not "
                             "two numbers 'a;b'") from None
        ptypes.append(str(t))
        pparams.append(vals)
    return ptypes, pparams
