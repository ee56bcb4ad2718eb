"""One case of the SBML Test Suite: its settings, its expected results, the spec with one
output per results column, and the comparison at the suite's tolerances.

Shared by ``benchmarks/sbml_suite.py`` (every semantic case) and
``tests/test_sbml_semantics.py`` (the cases copied into ``tests/data/sbml_suite/``). A case
folder ``DIR/NNNNN/`` holds ``NNNNN-settings.txt`` (start, duration, steps, variables,
absolute and relative tolerances, which variables are amounts and which concentrations),
``NNNNN-results.csv`` (time, then one column per variable), ``NNNNN-model.m`` (the
description, with ``componentTags``, ``testTags`` and ``testType``) and the SBML files
``NNNNN-sbml-lXvY.xml``.

An entry passes when ``|got - expected| <= absolute + relative * |expected|`` (the suite's
rule); ``NaN`` expected must be ``NaN``, an infinite value the same infinity.
"""
from __future__ import annotations

import csv
import os

import numpy as np

#: SBML files tried in this order (the newest level the case has).
LEVELS = ("l3v2", "l3v1", "l2v5", "l2v4", "l2v3", "l2v2", "l2v1", "l1v2")


def settings(folder, case):
    """The case's ``-settings.txt`` as ``{key: text}``."""
    out = {}
    with open(os.path.join(folder, case, f"{case}-settings.txt")) as fh:
        for line in fh:
            if ":" in line:
                key, value = line.split(":", 1)
                out[key.strip()] = value.strip()
    return out


def names_list(text):
    """``"S1, S2"`` -> ``["S1", "S2"]``."""
    return [v.strip() for v in (text or "").split(",") if v.strip()]


def expected(folder, case):
    """``(header, values)`` of the case's ``-results.csv`` (first column the time)."""
    with open(os.path.join(folder, case, f"{case}-results.csv")) as fh:
        rows = [r for r in csv.reader(fh) if r]
    return [h.strip() for h in rows[0]], np.array([[float(v) for v in r] for r in rows[1:]])


def description(folder, case):
    """``{"componentTags": [...], "testTags": [...], "testType": str}`` from ``-model.m``."""
    out = {"componentTags": [], "testTags": [], "testType": ""}
    path = os.path.join(folder, case, f"{case}-model.m")
    if not os.path.isfile(path):
        return out
    with open(path, errors="replace") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("componentTags", "testTags"):
                out[key] = names_list(value)
            elif key == "testType":
                out[key] = value.strip()
    return out


def sbml_file(folder, case, level=None):
    """The case's SBML file at ``level`` (e.g. ``"l3v2"``), or at the newest level it has."""
    for lv in ([level] if level else LEVELS):
        path = os.path.join(folder, case, f"{case}-sbml-{lv}.xml")
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"case {case}: no SBML file" + (f" at level {level}" if level else ""))


def suite_spec(path, header, amounts, read_sbml):
    """The spec of the SBML file ``path`` with one output ``suite_out_<id>`` per results
    column ``header[1:]``: the species amount for ids in ``amounts``, else the symbol's
    value (a species' concentration). Raises ``KeyError`` naming a variable the model lacks."""
    import libsbml

    from pbsens.model.spec import Definition

    spec = read_sbml(path)
    m = libsbml.readSBMLFromFile(path).getModel()
    names = spec.meta.get("sbml_names", {})
    known = set(spec.state_names) | set(spec.param_names) | {d.name for d in spec.definitions}
    fixed = {**spec.meta.get("compartments", {}), **spec.meta.get("fixed", {})}

    def value(ident):
        name = names.get(ident, ident)
        if name in known:
            return name
        if fixed.get(name) is None:
            raise KeyError(f"variable {ident!r} is not a quantity of the model")
        return repr(float(fixed[name]))

    outputs = []
    for v in header[1:]:
        expr = value(v)
        s = m.getSpecies(v)
        if s is not None:
            # SBML's meaning of the species' symbol (Level 3: a concentration unless
            # hasOnlySubstanceUnits, whatever the compartment's dimensions)
            c = m.getCompartment(s.getCompartment())
            conc = not s.getHasOnlySubstanceUnits() and not (m.getLevel() < 3 and c.getSpatialDimensions() == 0)
            size = value(c.getId())
            if v in amounts and conc:
                expr = f"({expr})*({size})"
            elif v not in amounts and not conc:
                expr = f"({expr})/({size})"
        outputs.append(Definition(f"suite_out_{v}", expr))
    spec.outputs = outputs
    return spec.validate()


def mismatches(got, want, atol, rtol):
    """Indices ``(i, j)`` where ``got`` is outside the suite's tolerance of ``want``."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    with np.errstate(invalid="ignore"):
        close = np.abs(got - want) <= atol + rtol * np.abs(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.argwhere(~(close | same))


def run_case(folder, case, backend="tape", level=None, rtol=1e-10, atol=1e-12):
    """Simulate one case and compare it with its results.

    Returns ``{"bad": [(t, name, got, want), ...] (at most 5), "n_bad": int, "n": int,
    "level": str}``; raises what pbsens raises (unsupported constructs, errors)."""
    from pbsens.model.library import model_from_spec
    from pbsens.model.sbml import read_sbml
    from pbsens.simulation.segments import simulate

    st = settings(folder, case)
    header, want = expected(folder, case)
    path = sbml_file(folder, case, level)
    spec = suite_spec(path, header, set(names_list(st.get("amount"))), read_sbml)
    model = model_from_spec(spec, backend)
    t = want[:, 0]
    sim = simulate(model, t, t0=float(st.get("start", 0) or 0), sensitivities=False, rtol=rtol, atol=atol)
    got = np.array([model.outputs(ti, xi, sim.p) for ti, xi in zip(t, sim.x)])
    bad = mismatches(got, want[:, 1:], float(st["absolute"]), float(st["relative"]))
    return {"bad": [(float(t[i]), header[j + 1], float(got[i, j]), float(want[i, j + 1])) for i, j in bad[:5]],
            "n_bad": len(bad), "n": int(got.size), "level": os.path.basename(path)[len(case) + 6:-4]}
