"""The measurement table of a PEtab problem, row by row (part of :func:`.petab.build_plan`).

Each row is checked (observable, conditions, time and value), gets its
observable's noise model, its placeholder overrides and the model outputs it
compares with. Errors name the file, the row and the column, as everywhere in
:mod:`pbsens.problems.petab`, which imports this module.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .tables import PetabError, _is_empty, _petab, _where

__all__ = ["check_rows", "noise_model", "placeholder_overrides", "output_indices"]


def check_rows(problem, files):
    """:class:`PetabError` unless every row names a known observable and known conditions,
    and has a number as time (not negative) and as measurement (finite)."""
    meas_df, obs_df, cond_df = problem.measurement_df, problem.observable_df, problem.condition_df
    obs_ids = list(obs_df.index)
    cond_ids = set(cond_df.index)
    preeq_col = "preequilibrationConditionId" in meas_df.columns
    for r in range(len(meas_df)):
        row = meas_df.iloc[r]
        if row["observableId"] not in obs_df.index:
            raise PetabError(f"{_where(files, 'measurement', r, 'observableId')}: unknown observable "
                             f"{row['observableId']!r} (the observable table has {', '.join(obs_ids)})")
        for col in ("simulationConditionId", "preequilibrationConditionId"):
            if col == "preequilibrationConditionId" and (not preeq_col or _is_empty(row[col])):
                continue
            if row[col] not in cond_ids:
                raise PetabError(f"{_where(files, 'measurement', r, col)}: unknown condition {row[col]!r}")
        for col in ("time", "measurement"):
            v = row[col]
            if not isinstance(v, numbers.Number) or math.isnan(v) or (col == "measurement" and math.isinf(v)):
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {v!r} is not a number")
        if row["time"] < 0:
            raise PetabError(f"{_where(files, 'measurement', r, 'time')}: negative time {row['time']!r}")


def noise_model(problem, files):
    """``(measurement, trafo, dist)`` per row: the measured values and the codes
    (:mod:`.noise`) of their observable's transformation and noise distribution.

    :class:`PetabError` on an unknown transformation or distribution, and on a
    measurement that is not positive for a log-transformed observable.
    """
    from .noise import DISTRIBUTIONS, TRANSFORMATIONS
    meas_df, obs_df = problem.measurement_df, problem.observable_df
    R = len(meas_df)
    trafo = np.zeros(R, dtype=np.int64)
    dist = np.zeros(R, dtype=np.int64)
    obs_trafo, obs_dist = {}, {}
    for r, (oid, row) in enumerate(obs_df.iterrows()):
        t = row.get("observableTransformation", "lin")
        d = row.get("noiseDistribution", "normal")
        t = "lin" if _is_empty(t) else t
        d = "normal" if _is_empty(d) else d
        if t not in TRANSFORMATIONS:
            raise PetabError(f"{_where(files, 'observable', r, 'observableTransformation')}: {t!r} is not "
                             "one of lin, log, log10")
        if d not in DISTRIBUTIONS:
            raise PetabError(f"{_where(files, 'observable', r, 'noiseDistribution')}: {d!r} is not one of "
                             "normal, laplace")
        obs_trafo[oid], obs_dist[oid] = TRANSFORMATIONS[t], DISTRIBUTIONS[d]
    meas = meas_df["measurement"].to_numpy(dtype=np.float64)
    for r in range(R):
        oid = meas_df.iloc[r]["observableId"]
        trafo[r], dist[r] = obs_trafo[oid], obs_dist[oid]
        if trafo[r] and not meas[r] > 0:
            raise PetabError(f"{_where(files, 'measurement', r, 'measurement')}: {meas[r]!r} is not positive, "
                             f"but observable {oid!r} is log-transformed")
    return meas, trafo, dist


def placeholder_overrides(problem, files, resolve, pindex, spec_name):
    """The rows' own values of the observable and noise placeholders of their formulas.

    ``resolve``: :func:`.petab._resolver`'s function; ``pindex``: model parameter
    name -> index; ``spec_name``: PEtab id -> model parameter name. Returns
    ``dict(row, param, fixed, est)``, arrays with one entry per override: the row,
    the model parameter, and its fixed value (NaN if estimated) or the index of the
    estimated parameter (-1 if fixed).
    """
    petab_v1 = _petab()
    meas_df, obs_df = problem.measurement_df, problem.observable_df
    ph_r, ph_j, ph_fixed, ph_est = [], [], [], []     # the rows' own placeholders, as triplets
    for r in range(len(meas_df)):
        row = meas_df.iloc[r]
        oid = row["observableId"]
        orow = list(obs_df.index).index(oid)
        for kind, col, fcol in (("observable", "observableParameters", "observableFormula"),
                                ("noise", "noiseParameters", "noiseFormula")):
            names = petab_v1.observables.get_formula_placeholders(str(obs_df.loc[oid, fcol]), oid, kind)
            raw = row[col] if col in meas_df.columns else None
            try:
                vals = petab_v1.measurements.split_parameter_replacement_list(
                    None if raw is None or _is_empty(raw) else raw)
            except ValueError as exc:
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {exc}") from None
            if len(vals) != len(names):
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {len(vals)} value(s) given, but "
                                 f"the {fcol} of observable {oid!r} (observable file row {orow + 1}) has "
                                 f"{len(names)} placeholder(s) {names}")
            for nm, v in zip(names, vals):
                res = resolve(v, _where(files, "measurement", r, col))
                if res is None:
                    raise PetabError(f"{_where(files, 'measurement', r, col)}: NaN is not a valid override")
                ph_r.append(r)
                ph_j.append(pindex[spec_name[nm]])
                ph_fixed.append(res[1] if res[0] == "fixed" else np.nan)
                ph_est.append(-1 if res[0] == "fixed" else res[1])
    return dict(row=np.array(ph_r, dtype=np.int64), param=np.array(ph_j, dtype=np.int64),
                fixed=np.array(ph_fixed, dtype=np.float64), est=np.array(ph_est, dtype=np.int64))


def output_indices(meas_df, out_index):
    """``(out_y, out_sigma)``: per row, the model outputs of its observable's formula and noise
    formula (``out_index``: ``(observable id, "y" or "sigma")`` -> output index)."""
    out_y = np.array([out_index[(o, "y")] for o in meas_df["observableId"]], dtype=np.int64)
    out_s = np.array([out_index[(o, "sigma")] for o in meas_df["observableId"]], dtype=np.int64)
    return out_y, out_s
