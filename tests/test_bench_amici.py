"""The AMICI bridge of the benchmarks (benchmarks/amici_bridge.py) without AMICI.

AMICI is never needed here: the "not installed" path, the choice of its Python,
the decoding of the JSON that benchmarks/amici_side.py writes, and the id
mapping are checked against hand-made inputs. A fake "AMICI Python" (a shell
script writing a fixed JSON) checks the subprocess plumbing.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bridge = _load("amici_bridge")


def _enc(a):
    a = np.ascontiguousarray(a, dtype="<f8")
    return {"shape": list(a.shape), "dtype": "<f8", "base64": base64.b64encode(a.tobytes()).decode()}


def test_not_installed_returns_none_and_says_so(monkeypatch, capsys):
    monkeypatch.delenv(bridge.ENV_VAR, raising=False)
    assert bridge.run_amici(["petab", "x.yaml"]) is None
    assert "AMICI: not installed" in capsys.readouterr().out


def test_python_option_wins_over_environment_and_bad_paths_are_named(tmp_path):
    exe = tmp_path / "py"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = {bridge.ENV_VAR: str(tmp_path / "missing")}
    assert bridge.amici_python(str(exe), environ=env) == str(exe)
    with pytest.raises(FileNotFoundError, match=r"\$PBSENS_AMICI_PYTHON.*missing"):
        bridge.amici_python(None, environ=env)
    with pytest.raises(FileNotFoundError, match="--amici-python"):
        bridge.amici_python(str(tmp_path / "nope"), environ={})
    assert bridge.amici_python(None, environ={}) is None


def test_parse_result_decodes_arrays_exactly_and_nan_strings():
    S = np.arange(24, dtype=float).reshape(2, 3, 4) / 7.0
    text = json.dumps({"mode": "sbml", "runs": [{"S": _enc(S), "llh": "nan", "status": "ok"}]})
    out = bridge.parse_result(text)
    got = out["runs"][0]["S"]
    assert got.shape == (2, 3, 4) and np.array_equal(got, S)
    assert np.isnan(out["runs"][0]["llh"]) and out["runs"][0]["status"] == "ok"


@pytest.mark.parametrize("text", ["not json", json.dumps({"runs": []}), json.dumps([1, 2])])
def test_parse_result_rejects_what_the_side_never_writes(text):
    with pytest.raises(ValueError):
        bridge.parse_result(text)


def test_decode_array_checks_size():
    bad = _enc(np.ones(5))
    bad["shape"] = [2, 3]
    with pytest.raises(ValueError, match="shape"):
        bridge.decode_array(bad)


def test_strip_arrays_keeps_everything_but_the_bytes():
    raw = {"mode": "sbml", "runs": [{"S": _enc(np.ones((2, 2))), "wall_ms": 1.5}]}
    s = bridge.strip_arrays(raw)
    assert s["runs"][0]["S"] == {"shape": [2, 2], "dtype": "<f8", "omitted": True}
    assert s["runs"][0]["wall_ms"] == 1.5 and "base64" in raw["runs"][0]["S"]


def test_reorder_maps_by_id():
    S = np.zeros((1, 2, 3))
    S[0, :, 0], S[0, :, 1], S[0, :, 2] = 10, 20, 30
    out = bridge.reorder(S, ["b", "c", "a"], ["a", "b", "c"], axis=2, what="parameter")
    assert out[0, 0].tolist() == [30, 10, 20]
    with pytest.raises(ValueError, match="parameter.*'z'"):
        bridge.reorder(S, ["b", "c", "a"], ["a", "z"], axis=2, what="parameter")


@pytest.mark.skipif(sys.platform == "win32", reason="the fake interpreter is a POSIX shell script")
def test_run_amici_through_a_fake_interpreter(tmp_path):
    S = np.linspace(0, 1, 6).reshape(1, 2, 3)
    payload = {"mode": "sbml", "state_ids": ["x1", "x2"], "runs": [{"S": _enc(S), "cpu_ms": 0.5}]}
    data = tmp_path / "payload.json"
    data.write_text(json.dumps(payload))
    fake = tmp_path / "fakepy"
    # writes the payload to the file after --out, as amici_side.py would
    fake.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ]; do if [ "$1" = "--out" ]; then cp "%s" "$2"; fi; '
                    'shift; done\n' % data)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    raw = tmp_path / "raw.json"
    res = bridge.run_amici(["sbml", "m.xml"], str(fake), raw_out=raw)
    assert np.array_equal(res["runs"][0]["S"], S) and res["state_ids"] == ["x1", "x2"]
    kept = json.loads(raw.read_text())
    assert kept["runs"][0]["S"]["omitted"] is True and kept["runs"][0]["cpu_ms"] == 0.5


@pytest.mark.skipif(sys.platform == "win32", reason="the fake interpreter is a POSIX shell script")
def test_run_amici_failure_raises_with_the_error_output(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text("#!/bin/sh\necho 'CVODES exploded' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(RuntimeError, match=r"exit 3(.|\n)*CVODES exploded"):
        bridge.run_amici(["petab", "x.yaml"], str(fake))


def test_side_script_does_not_import_pbsens():
    text = (BENCH / "amici_side.py").read_text()
    assert "import pbsens" not in text and "from pbsens" not in text
    assert os.path.exists(bridge.SIDE_SCRIPT)


common = _load("amici_common")


def test_benchmark_settings_are_amicis_own_benchmark_tests():
    # AMICI's tests/benchmark_models/test_petab_benchmark.py: rtol = atol = 1e-8, Brannmark and
    # Isensee with steady-state sensitivities by integration; pyPESTO: likelihood-only ReturnData
    b = common.petab_settings("benchmark", "Boehm_JProteomeRes2014")
    assert (b["rtol"], b["atol"], b["steady_state_integration"], b["reporting"]) == (1e-8, 1e-8, False, "likelihood")
    assert common.petab_settings("benchmark", "Brannmark_JBC2010")["steady_state_integration"] is True
    d = common.petab_settings("defaults", "Brannmark_JBC2010")
    assert (d["rtol"], d["atol"], d["steady_state_integration"], d["reporting"]) == (None, None, False, "full")


def test_explicit_tolerances_and_steady_state_mode_win():
    s = common.petab_settings("benchmark", "Boehm_JProteomeRes2014", rtol=1e-5, atol=1e-6, steady_state="integration")
    assert (s["rtol"], s["atol"], s["steady_state_integration"]) == (1e-5, 1e-6, True)
    s = common.petab_settings("benchmark", "Brannmark_JBC2010", steady_state="default")
    assert s["steady_state_integration"] is False
    assert common.petab_settings("defaults", "x", atol=1e-8)["atol"] == 1e-8


@pytest.mark.parametrize("kw", [dict(settings="fast"), dict(steady_state="newton")])
def test_bad_settings_are_named(kw):
    args = dict(settings="benchmark", problem_id="p") | kw
    with pytest.raises(ValueError, match=list(kw)[0]):
        common.petab_settings(**args)


def test_pick_matched_takes_the_fastest_point_within_the_error():
    bench = _load("bench_petab")
    pts = [dict(tol=1e-6, seconds=0.010, grad_err=1e-7), dict(tol=1e-5, seconds=0.008, grad_err=2e-3),
           dict(tol=1e-4, seconds=0.007, grad_err=5e-4), dict(tol=1e-3, seconds=None, grad_err=None),
           dict(tol=1e-7, seconds=0.012, grad_err=float("nan"))]
    # the error is not monotone in the tolerance: 1e-4 passes where 1e-5 does not
    assert bench.pick_matched(pts, 1e-3)["tol"] == 1e-4
    assert bench.pick_matched(pts, 1e-6)["tol"] == 1e-6
    assert bench.pick_matched(pts, 1e-8) is None
    assert bench.pick_matched(pts, float("nan")) is None
    # equal times: the looser tolerance
    assert bench.pick_matched([dict(tol=1e-6, seconds=0.01, grad_err=0.0),
                               dict(tol=1e-5, seconds=0.01, grad_err=0.0)], 1.0)["tol"] == 1e-5


def _am(proc_fwd, err_fwd, proc_adj=0.04, best=None):
    keys = ("llh", "llh+grad", "llh+grad adjoint")
    return {"llh": 0.001, "llh+grad": 0.02, "llh+grad adjoint": 0.05,
            "proc": {"llh": 0.001, "llh+grad": proc_fwd, "llh+grad adjoint": proc_adj},
            "cpu": dict.fromkeys(keys, 0.001), "wall_petab": {"llh": 0.1, "llh+grad": None, "llh+grad adjoint": 0.2},
            "status": dict.fromkeys(keys, "ok"), "grad_err": {"llh+grad": err_fwd, "llh+grad adjoint": 1e-6},
            "llh_value": -1.5, "rtol": 1e-8, "atol": 1e-8, "defaults": None,
            "matched": {"points": [], "best": best}}


def test_against_row_divides_amici_by_exp2_on_cpu_time():
    bench = _load("bench_petab")
    rows = [{"method": "exp2", "c_grad": 0.010, "grad_err": 1e-5}, {"method": "fs", "c_grad": 0.5, "grad_err": 1e-8}]
    best = {"tol": 1e-6, "seconds": 0.025, "solver_seconds": 0.02, "wall": 0.03, "grad_err": 2e-6}
    line = bench.against_rows("P", rows, _am(0.050, 1e-7, best=best))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == "**5.0x**" and cells[5] == "**2.5x**" and cells[7] == "**4.0x**"
    assert "rtol = atol 1e-06: 25.0 ms" in cells[4]
    failed = _am(None, None)
    failed["status"]["llh+grad"] = "AMICI_ERR_FAILURE in 3 of 6 conditions"
    cells = [c.strip() for c in bench.against_rows("P", rows, failed).strip("|").split("|")]
    assert cells[2].startswith("failed (AMICI_ERR_FAILURE") and cells[3] == ""
    assert cells[4].startswith("none of the tolerances")


def test_amici_rows_without_simulate_petab_timing_and_with_the_extra_rows():
    bench = _load("bench_petab")
    am = _am(0.05, 1e-7, best={"tol": 1e-7, "seconds": 0.03, "solver_seconds": 0.02, "wall": 0.04, "grad_err": 1e-7})
    am["defaults"] = _am(0.1, 2e-7)
    am["defaults"]["atol"] = 1e-16
    lines = bench.amici_rows("P", am)
    assert len(lines) == 4
    assert "20.0 (process 50.0" in lines[0] and "[" not in lines[0].split("|")[6]   # no simulate_petab time
    assert "Solver defaults" in lines[2] and "1e-08, 1e-16" in lines[2]
    assert "matched accuracy" in lines[3] and "process 30.0" in lines[3]
