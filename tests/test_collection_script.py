"""benchmarks/collection.py without the PEtab benchmark collection: the classification, the
tolerances, the references, the table and the reference llh of a simulation table, on made-up
numbers and a two-row hand-written PEtab problem."""
from __future__ import annotations

import importlib.util
import json
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
    (_rec(grad={"exp2": {"error": 1e-4}, "fs": {"error": 1e-7}, "shift": -0.5, "theta": "x_nominal - 0.5"}), "pass",
     ["gradient at x_nominal - 0.5"]),
    (_rec(grad={"exp2": {"error": 1e-4}, "fs": {"error": 1e-7, "options": {"rtol": 1e-6, "atol": 1e-8}},
                "shift": 0.01, "theta": "x_nominal + 0.01"}), "pass",
     ["gradient at x_nominal + 0.01", "fs at rtol 1e-06, atol 1e-08"]),
    (_rec(grad={"exp2": {"error": 1e-4}, "fs": {"error": 1e-7, "options": {"solver": "BDF", "max_steps": 5000}}}),
     "pass", ["fs at solver BDF, max_steps 5000"]),
    (_rec(exception={"kind": "refused", "type": "UnsupportedModelError", "stage": "load",
                     "message": "event E1 not supported"}), "refused", ["UnsupportedModelError", "not supported"]),
    (_rec(exception={"kind": "error", "type": "SolverError", "stage": "llh", "message": "step size"}),
     "error", ["SolverError"]),
    ({"problem": "P", "timeout": 600.0, "stage": "load", "references": {}}, "timeout", ["600"]),
    (_rec(timeout=600.0, grad={}), "timeout", ["gradient"]),
    # timed out after the gradients, before their FD check: not judged (was a TypeError on the None error)
    (_rec(timeout=600.0, grad={"exp2": {"first_s": 612.8}, "fs": {"first_s": 3000.0}}), "timeout",
     ["not checked", "600"]),
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


# --------------------------------------------------------------------------- spot checks and shifts

def test_spot_coordinates_take_the_largest_and_seeded_random_others():
    g = np.array([0.1, -5.0, 0.0, 3.0, 2.0, -0.5, 1.0, 0.2])
    top, rnd = col.spot_coordinates(g, 5, seed=0)
    assert top == [1, 3, 4]                                  # |g| 5, 3, 2
    assert len(rnd) == 2 and not set(rnd) & set(top) and set(rnd) <= set(range(8))
    assert col.spot_coordinates(g, 5, seed=0) == (top, rnd)  # reproducible
    others = {tuple(col.spot_coordinates(g, 5, seed=s)[1]) for s in range(20)}
    assert len(others) > 1                                   # the seed matters
    assert col.spot_coordinates(g, 8) == (list(range(8)), [])
    assert col.spot_coordinates(g, 1) == ([1], [])
    with pytest.raises(ValueError, match="k"):
        col.spot_coordinates(g, 0)


def test_central_differences_on_chosen_coordinates():
    f = lambda x: np.sin(x[0]) * np.exp(2 * x[1]) + x[2] ** 3     # noqa: E731
    x = np.array([0.3, -0.2, 0.7])
    exact = np.array([np.cos(0.3) * np.exp(-0.4), 2 * np.sin(0.3) * np.exp(-0.4), 3 * 0.49])
    got = col.central_differences(f, x, [2, 0], 1e-4)
    assert got == pytest.approx(exact[[2, 0]], rel=1e-7)


def test_fd_plan_full_when_it_fits_else_a_spot_check_of_what_fits():
    assert col.fd_plan(0.01, 10, 5.0, 600) == (10, "")
    k, why = col.fd_plan(6.4, 136, 100.0, 900)         # Raimundez: 1741 s do not fit in 800 s
    assert k == col.AUTO_SPOT and "272 FD evaluations" in why
    k, why = col.fd_plan(67.0, 25, 400.0, 900)          # Smith: 500 s left, 3 coordinates fit
    assert k == 3 and "do not fit" in why
    assert col.fd_plan(67.0, 25, 800.0, 900)[0] == 0
    assert col.fd_plan(0.01, 10, 5.0, 600, forced=4) == (4, "--fd-coordinates 4")
    assert col.fd_plan(0.01, 10, 5.0, 600, forced=40) == (10, "")


def test_classify_a_spot_check():
    spot = {"k": 6, "of": 136, "reason": "272 FD evaluations ... do not fit", "largest_abs_fs_gradient": ["a", "b", "c"],
            "random": ["d", "e", "f"]}
    st, detail = col.classify(_rec(grad={"exp2": {"error": 1e-4}, "fs": {"error": 1e-7}, "spot_check": spot}))
    assert st == "pass (gradient spot check)" and "6 of 136 coordinates" in detail and "do not fit" in detail
    st, detail = col.classify(_rec(grad={"exp2": {"error": 1e-4}, "fs": {"error": 1e-3}, "spot_check": spot}))
    assert st == "wrong" and "fs error" in detail
    assert col.summary_counts([_rec(grad={"exp2": {"error": 0}, "fs": {"error": 0}, "spot_check": spot})]) == \
        {"pass (gradient spot check)": 1}


# dx/dt = k x^2, x(0) = 1: x = 1 / (1 - k t), a blow-up at t = 1 / k; y = a x + b, sigma 0.5.
# At k = 0.5 + 0.1 the last measurement (t = 1.9) lies beyond the blow-up (t = 1.67), at 0.5 - 0.1 not.
BLOW_K, BLOW_A, BLOW_B, BLOW_SIGMA = 0.5, 1.0, 0.2, 0.5
BLOW_DATA = ((0.5, 1.5), (1.0, 2.0), (1.5, 4.5), (1.9, 5.0))


def _blowup_petab(folder):
    pytest.importorskip("libsbml")
    from petab_files import write_one_species_sbml, write_problem_yaml
    folder.mkdir()
    write_one_species_sbml(folder / "model.xml", "blowup", {"k": BLOW_K, "a": BLOW_A, "b": BLOW_B}, "k * x * x",
                           species="x", initial=1.0, level=(3, 1))
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\ny\ta * x + b\t{BLOW_SIGMA}\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        + "".join(f"{p}\tlin\t-10\t10\t{v}\t1\n" for p, v in (("k", BLOW_K), ("a", BLOW_A), ("b", BLOW_B))))
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n"
                                             + "".join(f"y\tc0\t{y}\t{t}\n" for t, y in BLOW_DATA))
    return write_problem_yaml(folder)


def _blowup_llh_and_gradient(k, a, b):
    llh, g = 0.0, np.zeros(3)
    for t, meas in BLOW_DATA:
        x = 1.0 / (1.0 - k * t)
        r = (meas - (a * x + b)) / BLOW_SIGMA ** 2
        llh += -0.5 * math.log(2 * math.pi * BLOW_SIGMA ** 2) - 0.5 * (meas - a * x - b) ** 2 / BLOW_SIGMA ** 2
        g += r * np.array([a * t * x ** 2, x, 1.0])
    return llh, g


def test_worker_spot_check_after_a_blow_up_at_the_first_shift(tmp_path):
    """The worker on the hand-written blow-up problem with --fd-coordinates 2: the gradient check
    moves to x_nominal - 0.1 (the record names the failure at + 0.1), checks 2 of the 3 coordinates
    (the one of largest |gradient| and one seeded random), and its llh, FD values and errors agree
    with the closed form."""
    pytest.importorskip("petab")
    y = _blowup_petab(tmp_path / "Blowup")
    out = tmp_path / "Blowup.json"
    a = col.build_parser().parse_args(["--worker", "Blowup", "--yaml", str(y), "--json", str(out),
                                       "--fd-coordinates", "2", "--repeats", "0", "--timeout", "3000"])
    rec = col.run_worker(a)
    assert "exception" not in rec, rec.get("exception")
    llh0, _ = _blowup_llh_and_gradient(BLOW_K, BLOW_A, BLOW_B)
    assert rec["llh"]["value_fd_options"] == pytest.approx(llh0, abs=1e-6)     # rtol 1e-12
    assert rec["llh"]["value"] == pytest.approx(llh0, rel=1e-6)                # rtol 1e-8 (x = 20 at t = 1.9)
    grad = rec["gradient"]
    assert grad["shift"] == -0.1 and "x_nominal - 0.1" in grad["theta"]
    assert len(grad["failed_at"]) == 1 and grad["failed_at"][0].startswith("x_nominal + 0.1")
    _, g_exact = _blowup_llh_and_gradient(BLOW_K - 0.1, BLOW_A - 0.1, BLOW_B - 0.1)
    spot = grad["spot_check"]
    assert spot["k"] == 2 and spot["of"] == 3 and spot["reason"] == "--fd-coordinates 2"
    ids = ["k", "a", "b"]
    assert spot["largest_abs_fs_gradient"] == [ids[int(np.argmax(np.abs(g_exact)))]]
    idx = spot["indices"]
    assert [ids[i] for i in idx] == sorted(spot["largest_abs_fs_gradient"] + spot["random"], key=ids.index)
    assert grad["fd"]["values"] == pytest.approx(g_exact[idx], rel=1e-6)
    for m in ("exp2", "fs"):
        assert grad[m]["on_spot"] == pytest.approx(g_exact[idx], rel=1e-5)
        assert grad[m]["error"] < col.GRAD_TOL[m]
    assert col.classify(rec)[0] == "pass (gradient spot check)"
    assert json.loads(out.read_text())["gradient"]["spot_check"]["k"] == 2


def test_worker_runs_fs_at_the_given_tolerances_and_records_them(tmp_path, monkeypatch):
    """--fs-rtol/--fs-atol reach every fs evaluation of the check (not exp2's), the record keeps
    them and the status names them; the gradient still agrees with the closed form at x_nominal - 0.1."""
    pytest.importorskip("petab")
    from pbsens.problems.problem import Problem
    calls = []
    original = Problem.evaluate

    def spy(self, theta=None, **kw):
        calls.append(kw)
        return original(self, theta, **kw)
    monkeypatch.setattr(Problem, "evaluate", spy)
    y = _blowup_petab(tmp_path / "Blowup")
    out = tmp_path / "Blowup.json"
    a = col.build_parser().parse_args(["--worker", "Blowup", "--yaml", str(y), "--json", str(out), "--shifts", "-0.1",
                                       "--fs-rtol", "1e-7", "--fs-atol", "1e-9", "--repeats", "1",
                                       "--timeout", "3000"])
    rec = col.run_worker(a)
    assert "exception" not in rec, rec.get("exception")
    fs_calls = [kw for kw in calls if kw.get("method") == "fs"]
    assert len(fs_calls) == 2 and all(kw["rtol"] == 1e-7 and kw["atol"] == 1e-9 for kw in fs_calls)
    exp2_calls = [kw for kw in calls if kw.get("method") == "exp2" and kw.get("sensitivities", True)]
    assert len(exp2_calls) == 2 and all("rtol" not in kw for kw in exp2_calls)
    grad = rec["gradient"]
    assert grad["fs"]["options"] == {"rtol": 1e-7, "atol": 1e-9} and "options" not in grad["exp2"]
    assert grad["fs"]["error"] < col.GRAD_TOL["fs"]
    status, detail = col.classify(rec)
    assert status == "pass" and "fs at rtol 1e-07, atol 1e-09" in detail and "x_nominal - 0.1" in detail


def test_exp2_when_fs_fails_records_the_failure_and_checks_exp2_alone(tmp_path, monkeypatch):
    """With --exp2-when-fs-fails, an fs solver failure where exp2 solved is recorded, exp2 is
    checked against FD (its spot check's coordinates by largest |exp2 gradient|, against the closed
    form), and the status is error with exp2's check in the detail; without the flag the failure
    moves the check on and, at the last shift, is the record's exception."""
    pytest.importorskip("petab")
    from pbsens.errors import SolverError
    from pbsens.problems.problem import Problem
    original = Problem.evaluate

    def fs_fails(self, theta=None, **kw):
        if kw.get("method") == "fs":
            raise SolverError("'max_steps' = 100000 steps taken (made up)")
        return original(self, theta, **kw)
    monkeypatch.setattr(Problem, "evaluate", fs_fails)
    y = _blowup_petab(tmp_path / "Blowup")
    args = ["--worker", "Blowup", "--yaml", str(y), "--shifts", "-0.1", "--fd-coordinates", "2", "--repeats", "0",
            "--timeout", "3000"]
    rec = col.run_worker(col.build_parser().parse_args(args + ["--json", str(tmp_path / "a.json"),
                                                               "--exp2-when-fs-fails"]))
    assert "exception" not in rec, rec.get("exception")
    grad = rec["gradient"]
    assert "max_steps" in grad["fs"]["failed"] and "error" not in grad["fs"]
    _, g_exact = _blowup_llh_and_gradient(BLOW_K - 0.1, BLOW_A - 0.1, BLOW_B - 0.1)
    spot = grad["spot_check"]
    ids = ["k", "a", "b"]
    assert spot["largest_abs_gradient_of"] == "exp2"
    assert spot["largest_abs_fs_gradient"] == [ids[int(np.argmax(np.abs(g_exact)))]]
    assert grad["fd"]["values"] == pytest.approx(g_exact[spot["indices"]], rel=1e-6)
    assert grad["exp2"]["error"] < col.GRAD_TOL["exp2"]
    status, detail = col.classify(rec)
    assert status == "error" and "fs failed" in detail and "max_steps" in detail and "x_nominal - 0.1" in detail
    assert "exp2 error" in detail and "on 2 of 3 coordinates" in detail
    assert "|exp2 gradient|" not in detail          # not a pass: no spot-check sentence
    rec = col.run_worker(col.build_parser().parse_args(args + ["--json", str(tmp_path / "b.json")]))
    assert rec["exception"]["type"] == "SolverError" and col.classify(rec)[0] == "error"
    assert "exp2" not in rec["gradient"]
