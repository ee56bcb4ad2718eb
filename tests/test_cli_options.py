"""The command line's shared option table (issue 36): the same --solver/--rtol/--atol/--quiet/
--force/--out on every command, defaults read from the Python API, outputs created only after
every check, no traceback on a closed pipe, plurals.

Most commands run in-process (``pbsens.cli.main``: the code the ``pbsens`` command runs, without
a process start-up and its compilation); the broken pipe needs real processes.
"""
import functools
import inspect
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import pbsens
from pbsens.cli import build_parser, main

DATA = Path(__file__).parent / "data" / "petab"
BOEHM = DATA / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"
ROOT = str(Path(pbsens.__file__).resolve().parent.parent)


def _defaults(fn):
    return {k: q.default for k, q in inspect.signature(fn).parameters.items()}


def run_main(args, cwd, capsys, models=()):
    """``pbsens.cli.main(args)`` in ``cwd``: (exit status, stdout, stderr); ``models`` are handed to
    the command by name (compiled in this process already)."""
    import pbsens.cli.common as common
    known = {m.name: m for m in models}
    load = common._model
    old = os.getcwd()
    os.chdir(cwd)
    common._model = lambda name: known[name] if name in known else load(name)
    try:
        try:
            status = main([str(a) for a in args])
        except SystemExit as exc:          # argparse: usage errors
            status = exc.code
    finally:
        common._model = load
        os.chdir(old)
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.fixture
def spy(monkeypatch):
    """Record the keyword arguments (and results) of an API function the CLI calls."""
    def install(owner, name):
        real = getattr(owner, name)
        calls = []

        @functools.wraps(real)                    # the CLI reads the API's defaults from its signature
        def wrapper(*a, **kw):
            res = real(*a, **kw)
            calls.append((kw, res))
            return res
        monkeypatch.setattr(owner, name, wrapper)
        return calls
    return install


# ------------------------------------------------------------------ defaults and the option table
def test_cli_defaults_are_the_api_defaults():
    from pbsens.cli.compare import compare_methods
    from pbsens.cli.run import _defaults as run_defaults
    from pbsens.problems import Problem
    parser = build_parser()
    ss, sens, fwd = _defaults(pbsens.solve_states), _defaults(pbsens.sensitivities), \
        _defaults(pbsens.forward_sensitivities)

    a = parser.parse_args(["simulate", "M", "--t-end", "1"])
    assert (a.solver, a.rtol, a.atol) == (ss["method"], ss["rtol"], ss["atol"])

    a = parser.parse_args(["run", "M", "--t-end", "1"])
    assert a.method == sens["method"] and a.solver is None and a.rtol is None and a.atol is None
    # ... resolved per method by compute_run from the API function behind it
    assert run_defaults("pbsr") == {"solver": sens["solver"], "rtol": sens["rtol"], "atol": sens["atol"]}
    assert run_defaults("fs") == {"solver": fwd["method"], "rtol": fwd["rtol"], "atol": fwd["atol"]}

    cm = _defaults(compare_methods)
    a = parser.parse_args(["compare", "M", "--t-end", "1"])
    assert (a.solver, a.rtol, a.atol) == (sens["solver"], sens["rtol"], sens["atol"]) \
        == (cm["solver"], cm["rtol"], cm["atol"])
    assert (a.fs_rtol, a.fs_atol) == (fwd["rtol"], fwd["atol"]) == (cm["fs_rtol"], cm["fs_atol"])
    for k in ("ref_rtol", "ref_atol", "ref_method", "ref_check", "samples", "seed", "repeats"):
        assert getattr(a, k) == cm[k], k

    smp = _defaults(pbsens.sample)
    a = parser.parse_args(["sample", "P"])
    assert (a.chains, a.draws, a.method, a.metric_floor, a.burn_in, a.seed) == \
        (smp["chains"], smp["draws"], smp["method"], smp["metric_floor"], smp["burn_in"], smp["seed"])
    # no solver option unless given: Problem.evaluate applies its own (checked with a spy below)
    assert a.solver is None and a.rtol is None and a.atol is None

    a = parser.parse_args(["petab", "P.yaml"])
    assert a.method == _defaults(Problem.evaluate)["method"]
    assert a.solver is None and a.rtol is None and a.atol is None


def test_every_solve_command_has_the_shared_options():
    from pbsens.solvers import SOLVERS
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("simulate", "run", "compare", "petab", "sample"):
        opts = {s: a for a in sub[name]._actions for s in a.option_strings}
        for o in ("--solver", "--rtol", "--atol", "--quiet", "-q", "--force", "--out"):
            assert o in opts, (name, o)
        assert set(opts["--solver"].choices) == set(SOLVERS), name     # the solver registry
        assert "rodas5p" in opts["--solver"].choices
    # the older name of petab's output keeps working
    a = parser.parse_args(["petab", "P.yaml", "--json", "r.json"])
    assert a.out == "r.json"
    # the help shows the API's defaults, not copies (sample's metric floor was 1e-6 against the API's 1e-8)
    floor = _defaults(pbsens.sample)["metric_floor"]
    assert f"default {floor:g}" in " ".join(sub["sample"].format_help().split())


def test_plural():
    from pbsens.cli.common import plural
    assert plural(1, "condition") == "1 condition"
    assert plural(0, "condition") == "0 conditions"
    assert plural(3, "PEtab problem") == "3 PEtab problems"


# ------------------------------------------------------------------ run / simulate with rodas5p
def test_run_and_simulate_accept_rodas5p(tmp_path, capsys, chua):
    te = np.linspace(0.0, 2.0, 11)
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--t-eval", "0:2:11", "--method", "exp2",
                               "--solver", "rodas5p", "--out", "r.npz"], tmp_path, capsys, models=[chua])
    assert code == 0, err
    assert "states (rodas5p, rtol 1e-05, atol 1e-06)" in out
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), t_eval=te, method="exp2", solver="rodas5p")
    np.testing.assert_allclose(np.load(tmp_path / "r.npz")["S"], r.S, rtol=1e-10, atol=1e-10)
    code, out, err = run_main(["simulate", "Chua", "--t-end", "2", "--solver", "rodas5p", "-q", "--out", "x.csv"],
                              tmp_path, capsys, models=[chua])
    assert code == 0 and out == "", err
    assert (tmp_path / "x.csv").read_text().startswith("t,x1,x2,x3")


def test_compare_includes_exp2_and_pbsr2(tmp_path, capsys, chua):
    # the default state solver, Rodas5P: its sub-steps refine some methods' grids (exp, exp2), yet every
    # method is compared at the same output times, the solver's grid (E of exp on 25 points against a
    # reference on 7 stopped the figure)
    code, out, err = run_main(["compare", "Chua", "--t-end", "1", "--samples", "0", "--repeats", "1",
                               "--ref-check", "none", "--out", "c.json", "--plot", "c.png"], tmp_path, capsys,
                              models=[chua])
    assert code == 0, err
    assert "different trajectories" not in err
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["solver"]["method"] == "rodas5p"
    assert doc["n_times"] == len(pbsens.solve_states(chua, (0.0, 1.0), method="rodas5p").t)
    assert (tmp_path / "c.png").stat().st_size > 0
    rows = {row["method"]: row for row in doc["rows"]}
    assert list(rows) == ["pbsr", "exp", "exp2", "pbsr2", "fs"]
    for row in rows.values():
        assert np.isfinite(row["E_median"]) and row["time_total"] > 0
    # exp2 is second order: on Chua far more accurate than exp on the same grid
    assert rows["exp2"]["E_median"] < 0.1 * rows["exp"]["E_median"]
    for label in ("PBSR ", "Exp ", "Exp2 ", "PBSR2 ", "FS "):
        assert label in out
    assert "median of 1 run" in out and "1 runs" not in out


# ------------------------------------------------------------------ petab
def test_petab_passes_solver_options_quiet_and_times_conditions_only(tmp_path, capsys, spy, monkeypatch):
    from pbsens.cli import petab as petab_cli
    from pbsens.problems import Problem
    monkeypatch.setattr(petab_cli, "REEVALUATE_SECONDS", 1e9)   # however slow this machine is today
    calls = spy(Problem, "evaluate")
    (tmp_path / "r.json").write_text("old")
    code, out, err = run_main(["petab", BOEHM, "--solver", "rodas5p", "--rtol", "1e-6", "--atol", "1e-8",
                               "--quiet", "--json", "r.json", "--force"], tmp_path, capsys)
    assert code == 0, err
    assert out == ""                                           # --quiet
    # a first evaluation compiles, the second is the one timed and reported; both with the options given
    assert len(calls) == 2
    for kw, _ in calls:
        assert (kw["solver"], kw["rtol"], kw["atol"], kw["method"]) == ("rodas5p", 1e-6, 1e-8, "exp2")
    doc = json.loads((tmp_path / "r.json").read_text())        # --force overwrote it
    res = calls[1][1]
    assert doc["llh"] == res.llh and doc["timing"] == res.timing
    assert doc["solver_options"] == {"solver": "rodas5p", "rtol": 1e-6, "atol": 1e-8}
    assert doc["load_and_compile_seconds"] > 0
    from pbsens.problems import load
    problem = load(BOEHM)
    assert doc["llh"] == pytest.approx(problem.evaluate(solver="rodas5p", rtol=1e-6, atol=1e-8).llh, rel=1e-12)

    # without solver options none is passed: Problem.evaluate's defaults apply
    calls.clear()
    code, out, err = run_main(["petab", BOEHM, "--no-gradient"], tmp_path, capsys)
    assert code == 0, err
    assert len(calls) == 2 and all(not {"solver", "rtol", "atol"} & set(kw) for kw, _ in calls)
    assert "1 condition," in out and "48 measurements" in out          # the plural
    assert "load and compile: " in out
    res = calls[1][1]
    name = problem.conditions[0]
    row = next(line for line in out.splitlines() if line.strip().startswith(name))
    assert float(row.split()[-1]) == pytest.approx(1e3 * res.timing[name], abs=0.01)


def test_petab_long_first_evaluation_is_not_repeated(tmp_path, capsys, spy, monkeypatch):
    """A first evaluation longer than REEVALUATE_SECONDS (a large problem) is the one reported,
    labelled as such: repeating it would double the wait."""
    from pbsens.cli import petab as petab_cli
    from pbsens.problems import Problem
    monkeypatch.setattr(petab_cli, "REEVALUATE_SECONDS", 0.0)
    calls = spy(Problem, "evaluate")
    code, out, err = run_main(["petab", BOEHM, "--no-gradient"], tmp_path, capsys)
    assert code == 0, err
    assert len(calls) == 1
    assert "time per condition [ms] (the first evaluation)" in out and "first evaluation " in out


def test_petab_refuses_an_existing_output_without_force(tmp_path, capsys, spy):
    from pbsens.problems import Problem
    calls = spy(Problem, "evaluate")
    for name in ("r.json", "fit.png"):
        (tmp_path / name).write_bytes(b"precious")
    for args, option, path in ((["--json", "r.json"], "'--out'", "r.json"),
                               (["--out", "r.json"], "'--out'", "r.json"),
                               (["--plot", "fit.png"], "'--plot'", "fit.png")):
        code, out, err = run_main(["petab", BOEHM, *args], tmp_path, capsys)
        assert code == 1 and option in err and path in err and "--force" in err, err
    assert (tmp_path / "r.json").read_bytes() == b"precious" and (tmp_path / "fit.png").read_bytes() == b"precious"
    assert calls == []                                         # refused before loading or computing


# ------------------------------------------------------------------ sample
def test_sample_out_is_created_only_after_validation_and_reused_with_force(tmp_path, capsys, spy):
    pytest.importorskip("arviz")
    import pbsens.inference.chains as chains
    calls = spy(chains, "sample")
    out = tmp_path / "run"
    base = ["sample", BOEHM, "--out", out]
    # refused arguments: by argparse, by the CLI, by pbsens.sample itself; no folder is left behind
    for bad, status in ((["--chains", "0"], 2), (["--method", "nope"], 2), (["--solver", "Euler"], 2),
                        (["--rtol", "-1"], 2), (["--seed", "-1", "--chains", "1", "--draws", "2"], 1)):
        code, _, err = run_main(base + bad, tmp_path, capsys)
        assert code == status, (bad, err)
        assert not out.exists(), bad
    code, _, err = run_main(["sample", tmp_path / "missing.yaml", "--out", out], tmp_path, capsys)
    assert code == 1 and "missing.yaml" in err and not out.exists()

    good = base + ["--chains", "2", "--draws", "4", "--burn-in", "2", "--seed", "3", "--workers", "1",
                   "--solver", "rodas5p", "--rtol", "1e-6", "--atol", "1e-8", "--no-plots", "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # 4 draws do not converge
        code, stdout, err = run_main(good, tmp_path, capsys)
    assert code == 0, err
    assert stdout == ""                          # --quiet
    kw = calls[-1][0]
    assert kw["solver_options"] == {"solver": "rodas5p", "rtol": 1e-6, "atol": 1e-8}
    assert kw["progress"] is False and kw["metric_floor"] == _defaults(pbsens.sample)["metric_floor"]
    assert sorted(os.listdir(out)) == ["checkpoint", "posterior.nc", "summary.tsv"]   # the resumable run's checkpoints

    # the same --out again: refused without --force (naming the folder), nothing touched
    before = (out / "posterior.nc").stat().st_mtime_ns
    n_calls = len(calls)
    code, _, err = run_main(good, tmp_path, capsys)
    assert code == 1 and str(out) in err and "--force" in err
    assert (out / "posterior.nc").stat().st_mtime_ns == before and len(calls) == n_calls
    # with --force: rewritten, and an earlier run's outputs this run does not write are removed
    (out / "trace.png").write_bytes(b"old plot")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, _, err = run_main(good + ["--force"], tmp_path, capsys)
    assert code == 0, err
    assert sorted(os.listdir(out)) == ["checkpoint", "posterior.nc", "summary.tsv"]   # the resumable run's checkpoints


def test_sample_out_file_in_the_way_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code, _, err = run_main(["sample", BOEHM, "--out", tmp_path / "f"], tmp_path, capsys)
    assert code == 1 and "not a directory" in err
    code, _, err = run_main(["sample", BOEHM, "--out", tmp_path / "f" / "sub"], tmp_path, capsys)
    assert code == 1 and "cannot create" in err


# ------------------------------------------------------------------ broken pipe
def test_closed_pipe_gives_no_traceback(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = []
    for args in (["cache", "info"], ["models"]):
        p = subprocess.Popen([sys.executable, "-m", "pbsens", *args], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()                         # the reader is gone before the command writes (| head -0)
        procs.append((args, p))
    for args, p in procs:
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipe" not in err, (args, err)
        assert err == "", (args, err)
        assert p.returncode == 141, (args, p.returncode)
