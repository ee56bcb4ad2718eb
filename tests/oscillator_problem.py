"""A damped linear oscillator as a hand-written PEtab problem with an analytic solution (tests of the
cross-check, tests/test_cross_check.py).

``dA/dt = -w B - c (A - u)``, ``dB/dt = w A - c B`` with ``c = k + d``; ``z = A + i B`` solves
``dz/dt = (-c + i w) z + c u``. ``A(0) = a0`` (an initial assignment), ``B(0) = 0``. Estimated: ``k``,
``a0``; the conditions fix ``w``, ``u`` and the extra damping ``d``. ``c_slow`` (w = 1) and ``c_fast``
(w = W_FAST, some hundred periods) start at ``(a0, 0)``; ``c_pre`` starts from the steady state of the
preequilibration ``pre`` (u = 1, d = 1: ``z0 = c u / (c - i w)``) and decays with ``u = 0``.
Observable ``y = A``, sigma 0.1.
"""
from __future__ import annotations

import math

import numpy as np

from petab_files import write_problem_yaml

K, A0, SIGMA = 0.02, 1.0, 0.1
W_FAST = 40.0
#: conditionId -> (w, u, d)
CONDITIONS = {"c_slow": (1.0, 0.0, 0.0), "c_fast": (W_FAST, 0.0, 0.0), "pre": (1.0, 1.0, 1.0), "c_pre": (2.0, 0.0, 0.0)}
#: (preequilibrationConditionId or '', simulationConditionId, output times)
EXPERIMENTS = [("", "c_slow", np.linspace(0.5, 5.0, 10)), ("", "c_fast", np.linspace(1.0, 60.0, 25)),
               ("pre", "c_pre", np.linspace(0.5, 4.0, 8))]


def z0(pre, k, a0):
    """The start ``A + i B`` of a condition."""
    if not pre:
        return complex(a0, 0.0)
    w, u, d = CONDITIONS[pre]
    return (k + d) * u / complex(k + d, -w)


def observable(pre, sim, t, k, a0):
    w, _, d = CONDITIONS[sim]
    return (z0(pre, k, a0) * np.exp(complex(-(k + d), w) * np.asarray(t))).real


def experiments(fast=True):
    """:data:`EXPERIMENTS`, without ``c_fast`` unless ``fast``."""
    return [e for e in EXPERIMENTS if fast or e[1] != "c_fast"]


def measurements(fast=True):
    """Fixed data: the model at (k, a0) = (0.03, 0.9) plus a fixed offset per row."""
    out = []
    for pre, sim, ts in experiments(fast):
        y = observable(pre, sim, ts, 0.03, 0.9) + 0.05 * np.sin(np.arange(ts.size) + len(out))
        out.append(y)
    return out


def llh_by_condition(theta, fast=True):
    """Analytic ``{simulationConditionId: llh}``."""
    k, a0 = theta
    res = {}
    for (pre, sim, ts), m in zip(experiments(fast), measurements(fast)):
        y = observable(pre, sim, ts, k, a0)
        res[sim] = float(np.sum(-0.5 * math.log(2 * math.pi * SIGMA ** 2) - 0.5 * ((m - y) / SIGMA) ** 2))
    return res


def write(folder, fast=True):
    """The problem's files in ``folder`` (``c_fast`` only if ``fast``); returns the YAML's path."""
    import libsbml
    doc = libsbml.SBMLDocument(3, 2)
    m = doc.createModel()
    m.setId("oscillator")
    c = m.createCompartment()
    c.setId("cell"); c.setSize(1.0); c.setConstant(True)                       # noqa: E702
    for sid in ("A", "B"):
        s = m.createSpecies()
        s.setId(sid); s.setCompartment("cell"); s.setHasOnlySubstanceUnits(True)  # noqa: E702
        s.setBoundaryCondition(False); s.setConstant(False); s.setInitialAmount(0.0)  # noqa: E702
    for pid, val in (("k", K), ("a0", A0), ("w", 1.0), ("u", 0.0), ("d", 0.0)):
        p = m.createParameter()
        p.setId(pid); p.setConstant(True); p.setValue(val)                     # noqa: E702
    ia = m.createInitialAssignment()
    ia.setSymbol("A"); ia.setMath(libsbml.parseL3Formula("a0"))                 # noqa: E702
    for var, formula in (("A", "-w * B - (k + d) * (A - u)"), ("B", "w * A - (k + d) * B")):
        r = m.createRateRule()
        r.setVariable(var); r.setMath(libsbml.parseL3Formula(formula))          # noqa: E702
    libsbml.writeSBMLToFile(doc, str(folder / "model.xml"))
    (folder / "conditions.tsv").write_text("conditionId\tw\tu\td\n" + "".join(
        f"{cid}\t{w}\t{u}\t{d}\n" for cid, (w, u, d) in CONDITIONS.items() if fast or cid != "c_fast"))
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\ny\tA\t{SIGMA}\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"k\tlin\t0.001\t10\t{K}\t1\na0\tlin\t0.01\t10\t{A0}\t1\n")
    rows = "".join(f"y\t{pre}\t{sim}\t{float(mv)!r}\t{float(t)!r}\n" for (pre, sim, ts), ms in zip(experiments(fast), measurements(fast))
                   for t, mv in zip(ts, ms))
    (folder / "measurements.tsv").write_text(
        "observableId\tpreequilibrationConditionId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    return write_problem_yaml(folder)
