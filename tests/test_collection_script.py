"""benchmarks/collection.py without the PEtab benchmark collection: the classification, the
tolerances, the references, the table and the reference llh of a simulation table, on made-up
numbers and a two-row hand-written PEtab problem."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load():
    spec = importlib.util.spec_from_file_location("_bench_collection", BENCH / "collection.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


col = _load()


def _rec(llh=-100.0, refs=None, grad=None, **kw):
    rec = {"problem": "P", "llh": {"value": llh}, "references": {"amici": -100.0} if refs is None else refs,
           "gradient": {"exp2": {"error": 1e-4}, "fs": {"error": 1e-7}} if grad is None else grad}
    rec.update(kw)
    return rec


def test_script_imports_and_pins_the_collection():
    assert col.COLLECTION_COMMIT == "4d2085084b289f6215a95475b1ee639fd7d42283"
    assert col.FD == {"solver": "rodas5p", "rtol": 1e-12, "atol": 1e-14}
    assert col.GRAD_TOL == {"exp2": 1e-2, "fs": 1e-4}
    assert col.build_parser().parse_args([]).timeout == 600.0


def test_llh_tolerance_is_the_larger_of_absolute_and_relative():
    assert col.llh_tolerance(-138.2) == 1e-3
    assert col.llh_tolerance(-888198.4) == pytest.approx(0.8881984)
    assert col.llh_matches(-138.2 + 0.9e-3, -138.2)
    assert not col.llh_matches(-138.2 + 1.1e-3, -138.2)
    assert col.llh_matches(-888198.4 + 0.8, -888198.4)
    assert not col.llh_matches(-888198.4 + 0.9, -888198.4)
    assert not col.llh_matches(math.nan, 1.0) and not col.llh_matches(None, 1.0)


def test_rel_err_max():
    assert col.rel_err_max([1.0, 2.0], [1.0, 2.1]) == pytest.approx(0.1 / 2.1)
    assert col.rel_err_max([1.0, np.nan], [1.0, 2.0]) == math.inf
    assert col.rel_err_max([1e-3, 0.0], [0.0, 0.0]) == pytest.approx(1e-3)     # absolute when g_ref = 0
    with pytest.raises(ValueError):
        col.rel_err_max([1.0], [1.0, 2.0])


def test_richardson_removes_the_central_difference_truncation_error():
    """f = exp(3x) at x = 0.2, f' = 3 exp(0.6): central differences at h = 1e-2 are off by
    h^2 f_xxx / 6 (relative 1.5e-4), the extrapolation from h and h/2 by O(h^4)."""
    f, x, h = (lambda z: np.exp(3 * z)), 0.2, 1e-2
    exact = 3 * np.exp(0.6)
    d = lambda s: (f(x + s) - f(x - s)) / (2 * s)        # noqa: E731
    assert abs(d(h) - exact) / exact > 1e-4
    assert abs(col.richardson([d(h)], [d(h / 2)])[0] - exact) / exact < 1e-8


def test_reference_priority_amici_then_published_then_table():
    assert col.choose_reference({"amici": 1.0, "published": 2.0, "simulation_table": 3.0}) == ("amici", 1.0)
    assert col.choose_reference({"amici": None, "amici_default_tolerances": 1.5, "published": 2.0}) == \
        ("amici_default_tolerances", 1.5)
    assert col.choose_reference({"amici": None, "published": 2.0, "simulation_table": 3.0}) == ("published", 2.0)
    assert col.choose_reference({"simulation_table": 3.0}) == ("simulation_table", 3.0)
    assert col.choose_reference({}) == (None, None)


@pytest.mark.parametrize("rec, status, words", [
    (_rec(), "pass", []),
    (_rec(llh=-100.002), "wrong", ["llh", "amici"]),
    (_rec(llh=math.nan), "wrong", ["nan"]),
    (_rec(grad={"exp2": {"error": 2e-2}, "fs": {"error": 1e-7}}), "wrong", ["exp2 error 2.00e-02"]),
    (_rec(grad={"exp2": {"error": 1e-3}, "fs": {"error": 2e-4}}), "wrong", ["fs error"]),
    (_rec(grad={"skipped": "one llh evaluation took 75.0 s"}), "pass (llh only)", ["75.0 s"]),
    (_rec(refs={}), "pass", []),
    (_rec(exception={"kind": "refused", "type": "UnsupportedModelError", "stage": "load",
                     "message": "event E1 not supported"}), "refused", ["UnsupportedModelError", "not supported"]),
    (_rec(exception={"kind": "error", "type": "SolverError", "stage": "llh", "message": "step size"}),
     "error", ["SolverError"]),
    ({"problem": "P", "timeout": 600.0, "stage": "load", "references": {}}, "timeout", ["600"]),
    (_rec(timeout=600.0, grad={}), "timeout", ["gradient"]),
    ({"problem": "P", "unavailable": "files missing from the snapshot: m.xml"}, "unavailable", ["m.xml"]),
])
def test_classify(rec, status, words):
    got, detail = col.classify(rec)
    assert got == status, detail
    for w in words:
        assert w in detail


def test_llh_that_fails_the_published_value_but_matches_amici_passes_and_is_reported():
    rec = _rec(llh=-100.0004, refs={"amici": -100.0, "published": -200.0, "simulation_table": -100.0})
    assert col.classify(rec)[0] == "pass"
    d = col.published_disagreement(rec)
    assert "pbsens -100.0004" in d and "published (AMICI's test references) -200" in d
    assert "agreeing with AMICI 1.1 (rtol 1e-12), collection simulation table" in d
    assert col.published_disagreement(_rec(llh=-100.0, refs={"amici": -100.0, "published": -100.0005})) is None


def test_fd_budget():
    assert col.fd_budget_ok(0.01, 10, 5.0, 600, 60) == (True, "")
    ok, why = col.fd_budget_ok(61.0, 2, 0.0, 600, 60)
    assert not ok and "61.0 s > --skip-gradient-above 60" in why
    ok, why = col.fd_budget_ok(1.0, 722, 10.0, 600, 60)      # 1444 evaluations of 1 s
    assert not ok and "1444 FD evaluations" in why


def test_table_counts_and_coverage_section(tmp_path):
    recs = [dict(_rec(), problem="A"), dict(_rec(llh=-1.0), problem="B"),
            {"problem": "C", "unavailable": "no YAML"}]
    table = col.markdown_table(recs)
    assert len(table.splitlines()) == 2 + 3
    assert "| A | pass |" in table and "| B | wrong |" in table and "| C | unavailable |" in table
    assert col.summary_counts(recs) == {"pass": 1, "wrong": 1, "unavailable": 1}
    doc = tmp_path / "COVERAGE.md"
    doc.write_text("# Coverage\n\nbefore\n\n" + col.SECTION_START + "\nold\n" + col.SECTION_END + "\n\nafter\n")
    col.write_coverage(doc, recs, "python benchmarks/collection.py")
    text = doc.read_text()
    assert "before" in text and "after" in text and "\nold\n" not in text
    assert "pass: 1, wrong: 1, unavailable: 1 (of 3)" in text and col.COLLECTION_COMMIT in text


SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="m"><listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
  <listOfParameters><parameter id="k" value="1" constant="true"/></listOfParameters></model></sbml>
"""


def _tiny_petab(folder, sim_rows):
    folder.mkdir()
    (folder / "model.xml").write_text(SBML)
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text("observableId\tobservableFormula\tnoiseFormula\ny\tk\t0.5\n")
    (folder / "parameters.tsv").write_text("parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\t"
                                           "estimate\nk\tlin\t0\t10\t1\t1\n")
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n"
                                             "y\tc0\t1.2\t1\ny\tc0\t0.7\t2\n")
    (folder / "simulatedData_tiny.tsv").write_text(
        "observableId\tsimulationConditionId\tsimulation\ttime\tnoiseParameters\n" + sim_rows)
    (folder / "tiny.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [model.xml]\n"
        "  condition_files: [conditions.tsv]\n  measurement_files: [measurements.tsv]\n"
        "  observable_files: [observables.tsv]\n")
    return folder / "tiny.yaml"


def test_simulation_table_llh_pairs_rows_by_key_not_position(tmp_path):
    pytest.importorskip("petab")
    # rows swapped and a noise column the measurement table does not have
    y = _tiny_petab(tmp_path / "tiny", "y\tc0\t0.9\t2\t0.5\ny\tc0\t1.0\t1\t0.5\n")
    sigma = 0.5
    hand = sum(-0.5 * math.log(2 * math.pi * sigma ** 2) - 0.5 * ((m - s) / sigma) ** 2
               for m, s in ((1.2, 1.0), (0.7, 0.9)))
    assert col.simulation_table_llh(y) == pytest.approx(hand, rel=1e-12)
    assert col.find_yaml(y.parent) == y and col.missing_files(y) == []


def test_missing_files_make_a_problem_unavailable_without_running_it(tmp_path):
    y = _tiny_petab(tmp_path / "Tiny", "y\tc0\t1.0\t1\t0.5\n")
    (y.parent / "model.xml").unlink()
    y.rename(y.parent / "Tiny.yaml")
    args = col.build_parser().parse_args(["--collection", str(tmp_path), "--out-dir", str(tmp_path / "out")])
    rec = col.run_problem("Tiny", args)
    assert rec["status"] == "unavailable" and "model.xml" in rec["status_detail"]
    assert (tmp_path / "out" / "Tiny.json").is_file()
