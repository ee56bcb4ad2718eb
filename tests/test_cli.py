"""The ``pbsens`` command line, run as subprocesses (``python -m pbsens ...``).

Every process pays for importing numba and compiling the model's march kernel,
so the commands are started together (module fixture ``procs``) and run
concurrently; each test then waits for the ones it checks. Files written are
compared with the same call through the Python API (to 1e-10).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pbsens
from pbsens.sensitivity.forward import forward_sensitivities

ROOT = str(Path(pbsens.__file__).resolve().parent.parent)
TIMEOUT = 600


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PBSENS_CACHE_DIR"] = os.environ["PBSENS_CACHE_DIR"]  # the tests' shared cache (conftest)
    env["MPLBACKEND"] = "Agg"
    return env


class Proc:
    """A started ``python -m pbsens`` process; ``result()`` waits for it."""

    def __init__(self, args, cwd):
        self.args = [str(a) for a in args]
        self.p = subprocess.Popen([sys.executable, "-m", "pbsens", *self.args], cwd=cwd, env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._out = None

    def result(self):
        if self._out is None:
            out, err = self.p.communicate(timeout=TIMEOUT)
            self._out = subprocess.CompletedProcess(self.args, self.p.returncode, out, err)
        return self._out


def pbsens_cmd(*args, cwd=None):
    return Proc(args, cwd).result()


# Chua on [0, 2]: fast; t_eval as a file and as a:b:n
TE = np.linspace(0.0, 2.0, 11)
SPECS = {
    # heavy ones first, so that they start first
    "pka": ["run", "PKA", "--t-end", "60", "--t-eval", "0:60:7", "--out", "pka.npz", "-q"],
    # the paper's setting, named (the defaults are exp2 on Rodas5P since issue #41)
    "pbsr": ["run", "Chua", "--t-end", "2", "--method", "pbsr", "--solver", "LSODA", "--out", "pbsr.npz",
             "--plot", "pbsr.png"],
    "fs": ["run", "Chua", "--t-span", "0", "2", "--method", "fs", "--t-eval", "te.txt", "--out", "fs.npz"],
    "compare": ["compare", "Chua", "--t-end", "1", "--samples", "3", "--repeats", "1", "--solver", "LSODA",
                "--out", "cmp.json", "--plot", "cmp.png"],
    # refused before any computation
    "exists_out": ["run", "Chua", "--t-end", "2", "--out", "keep.npz"],
    "models": ["models"],
    "reproduce_bad": ["reproduce", "no-such-experiment"],
}
HELP = [[], ["models"], ["simulate"], ["run"], ["compare"], ["reproduce"]]
BAD = {  # arguments -> (exit status, text the message must contain)
    "method": (["run", "Chua", "--t-end", "2", "--method", "rk4"], 2, "--method"),
    "rtol": (["run", "Chua", "--t-end", "2", "--rtol", "-1"], 2, "--rtol"),
    "span": (["run", "Chua"], 2, "--t-end"),
    "t_end": (["run", "Chua", "--t-end", "-3"], 1, "--t-end"),
    "param": (["run", "Chua", "--t-end", "2", "--param", "nope=1"], 1, "--param"),
    "param_value": (["run", "Chua", "--t-end", "2", "--param", "p1=abc"], 1, "--param"),
    "t_eval": (["run", "Chua", "--t-end", "2", "--t-eval", "0:5:3"], 1, "--t-eval"),
    "t_eval_file": (["run", "Chua", "--t-end", "2", "--t-eval", "missing.txt"], 1, "--t-eval"),
    "out_ext": (["run", "Chua", "--t-end", "2", "--out", "S.txt"], 1, "--out"),
    "plot_ext": (["run", "Chua", "--t-end", "2", "--plot", "S.npz"], 1, "--plot"),
    "out_dir": (["run", "Chua", "--t-end", "2", "--out", "no/such/dir/S.npz"], 1, "--out"),
    "model": (["run", "NoSuchModel", "--t-end", "2"], 1, "NoSuchModel"),
    "samples": (["compare", "Chua", "--t-end", "1", "--samples", "-2"], 2, "--samples"),
    "compare_out": (["compare", "Chua", "--t-end", "1", "--out", "table.npz"], 1, "--out"),
    "interp_fs": (["run", "Chua", "--t-end", "2", "--method", "fs", "--interpolation", "dense"], 1,
                  "--interpolation"),
    "simulate_solver": (["simulate", "Chua", "--t-end", "2", "--solver", "Euler"], 2, "--solver"),
}
#: of these, run as subprocesses too (the others in-process through pbsens.cli.main: same code, no start-up)
BAD_SUBPROCESS = ("method", "param")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    np.savetxt(d / "te.txt", TE)
    (d / "exp.csv").write_text("old content\n")   # overwritten with --force
    for name in ("keep.npz", "keep.png", "keep.json"):
        (d / name).write_bytes(b"precious")
    return d


@pytest.fixture(scope="module")
def procs(work):
    started = {}
    try:
        for key, args in SPECS.items():
            started[key] = Proc(args, work)
        started["help"] = Proc(["--help"], work)
        for key in BAD_SUBPROCESS:
            started[f"bad_{key}"] = Proc(BAD[key][0], work)
        yield started
    finally:
        for pr in started.values():
            if pr.p.poll() is None:
                pr.p.kill()
                pr.p.communicate()


def ok(proc):
    res = proc.result()
    assert res.returncode == 0, f"pbsens {' '.join(res.args)} failed:\n{res.stdout}\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def chua():
    return pbsens.load_model("Chua")


def run_main(args, cwd, capsys, models=()):
    """``pbsens.cli.main(args)`` in-process: (exit status, stdout, stderr).

    ``models``: already loaded models to hand to the command by name (their kernels
    are compiled in this process already; loading the file again would compile anew).
    """
    import pbsens.cli.common as cli  # the commands load models through common._model
    known = {m.name: m for m in models}
    load = cli._model
    old = os.getcwd()
    os.chdir(cwd)
    cli._model = lambda name: known[name] if name in known else load(name)
    try:
        try:
            status = main_entry(list(args))
        except SystemExit as exc:  # argparse: --help, usage errors
            status = exc.code
    finally:
        cli._model = load
        os.chdir(old)
    out = capsys.readouterr()
    return status, out.out, out.err


def main_entry(args):
    from pbsens.cli import main
    return main(args)


# ------------------------------------------------------------------ run
def test_run_pbsr_npz_matches_api(procs, work, chua):
    res = ok(procs["pbsr"])
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), method="pbsr", solver="LSODA")
    d = np.load(work / "pbsr.npz")
    assert list(d["state_names"]) == ["x1", "x2", "x3"] and list(d["param_names"]) == ["p1", "p2"]
    assert d["S"].shape == (len(r.t), 3, 2) and d["x"].shape == (len(r.t), 3)
    assert str(d["method"]) == "pbsr" and str(d["model"]) == "Chua"
    np.testing.assert_allclose(d["t"], r.t, rtol=0, atol=1e-10)
    np.testing.assert_allclose(d["x"], r.x, rtol=0, atol=1e-10)
    np.testing.assert_allclose(d["S"], r.S, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(d["p"], chua.p)
    assert list(d["branch"]) == list(r.branch) and np.array_equal(d["n_int"], r.n_int)
    # summary: grid size, branches with counts, timings
    out = res.stdout
    assert f"grid of {len(r.grid)} points" in out
    for name, count in r.branch_counts().items():
        assert f"{name} {count}" in out
    assert "states (LSODA" in out and "sensitivities:" in out and " ms" in out
    # the plot: default figsize for 3 states (2 x 2 panels of 5 x 3 in) at 100 dpi
    import matplotlib.image as mpimg
    img = mpimg.imread(str(work / "pbsr.png"))
    assert img.shape[:2] == (600, 1000) and float(np.std(img[..., :3])) > 0.01


def test_run_defaults_are_exp2_on_rodas5p_and_the_api_call(work, chua, capsys):
    """Without --method/--solver: exp2 on Rodas5P (issue #41), the very numbers of the one API call
    that solves the states itself (dense output, sub-steps, midpoint states as it asks for them)."""
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--out", "default.npz"], work, capsys, models=[chua])
    assert code == 0, err
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), method="exp2", solver="rodas5p")
    d = np.load(work / "default.npz")
    assert str(d["method"]) == "exp2"
    assert "states (rodas5p, rtol 1e-05, atol 1e-06)" in out and f"grid of {len(r.grid)} points" in out
    for key in ("t", "x", "S", "grid", "n_int"):
        np.testing.assert_array_equal(d[key], getattr(r, key), err_msg=key)
    assert list(d["branch"]) == list(r.branch)
    # with output times too (merged into the grid from the dense output)
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--t-eval", "0:2:11", "--out", "default_te.npz"],
                              work, capsys, models=[chua])
    assert code == 0, err
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), t_eval=TE, method="exp2", solver="rodas5p")
    d = np.load(work / "default_te.npz")
    np.testing.assert_array_equal(d["t"], TE)
    for key in ("x", "S", "grid"):
        np.testing.assert_array_equal(d[key], getattr(r, key), err_msg=key)


def test_run_exp_csv_named_columns_and_force(work, chua, capsys):
    # in-process (pbsens.cli.main, the code the subprocesses run): the Chua kernels are compiled here already
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), t_eval=TE, method="exp")
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--method", "exp", "--t-eval", "0:2:11",
                               "--out", "exp.csv", "--force"], work, capsys, models=[chua])
    assert code == 0, err
    text = (work / "exp.csv").read_text()
    assert "old content" not in text                     # --force overwrote it
    header = text.splitlines()[0].split(",")
    assert header == ["t", "x1", "x2", "x3", "dx1/dp1", "dx1/dp2", "dx2/dp1", "dx2/dp2", "dx3/dp1", "dx3/dp2"]
    data = np.loadtxt(work / "exp.csv", delimiter=",", skiprows=1)
    assert data.shape == (11, 10)
    np.testing.assert_allclose(data[:, 0], TE, rtol=0, atol=1e-12)
    np.testing.assert_allclose(data[:, 1:4], r.x, rtol=1e-10, atol=1e-10)
    col = header.index("dx3/dp1")
    np.testing.assert_allclose(data[:, col], r.S[:, 2, 0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(data[:, 4:].reshape(11, 3, 2), r.S, rtol=1e-10, atol=1e-10)
    assert f"branches: exp {len(r.grid) - 1}" in out


@pytest.mark.parametrize("method", ["exp2", "pbsr2"])
def test_run_second_order_methods_match_api(work, chua, capsys, method):
    """The exponential-midpoint methods are selectable on the command line (issue 5)."""
    r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), t_eval=TE, method=method)
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--method", method, "--t-eval", "0:2:11",
                               "--out", f"{method}.npz"], work, capsys, models=[chua])
    assert code == 0, err
    d = np.load(work / f"{method}.npz")
    assert str(d["method"]) == method
    np.testing.assert_allclose(d["S"], r.S, rtol=1e-10, atol=1e-10)
    assert list(d["branch"]) == list(r.branch)


def test_run_fs_matches_forward_sensitivities(procs, work, chua):
    res = ok(procs["fs"])
    ref = forward_sensitivities(chua, (0.0, 2.0), t_eval=TE)
    d = np.load(work / "fs.npz")
    assert str(d["method"]) == "fs" and d["branch"].size == 0
    np.testing.assert_allclose(d["t"], TE, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d["S"], ref.S, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(d["x"], ref.x, rtol=1e-10, atol=1e-10)
    assert "forward solve (BDF, rtol 1e-08, atol 1e-10)" in res.stdout


def test_run_pka_quiet(procs, work, pka):
    res = ok(procs["pka"])
    assert res.stdout == ""                              # --quiet
    d = np.load(work / "pka.npz")
    assert d["S"].shape == (7, 11, 35) and d["x"].shape == (7, 11)
    assert list(d["state_names"]) == pka.state_names and list(d["param_names"]) == pka.param_names
    np.testing.assert_allclose(d["t"], np.linspace(0, 60, 7))
    assert np.all(np.isfinite(d["S"])) and np.abs(d["S"]).max() > 0
    # the defaults: exp2 on every interval of Rodas5P's grid, the API's numbers for that call
    assert str(d["method"]) == "exp2"
    assert set(d["branch"]) == {"exp2"} and d["branch"].size == d["grid"].size - 1
    r = pbsens.sensitivities(pka, t_span=(0.0, 60.0), t_eval=np.linspace(0, 60, 7), method="exp2", solver="rodas5p")
    np.testing.assert_allclose(d["grid"], r.grid, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d["S"], r.S, rtol=1e-10, atol=1e-10 * np.abs(r.S).max())


def test_existing_outputs_are_kept_without_force(procs, work, capsys):
    res = procs["exists_out"].result()
    assert res.returncode == 1
    assert "'--out'" in res.stderr and "keep.npz" in res.stderr and "--force" in res.stderr
    assert (work / "keep.npz").read_bytes() == b"precious"
    assert "Traceback" not in res.stderr
    # the plot file is checked too, before anything is computed or written
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--out", "new.csv", "--plot", "keep.png"], work,
                              capsys)
    assert code == 1 and "'--plot'" in err and "keep.png" in err and "--force" in err
    assert (work / "keep.png").read_bytes() == b"precious"
    assert not (work / "new.csv").exists()


def test_compare_keeps_existing_table(work, capsys):
    code, out, err = run_main(["compare", "Chua", "--t-end", "1", "--out", "keep.json"], work, capsys)
    assert code == 1 and "'--out'" in err and "--force" in err
    assert (work / "keep.json").read_bytes() == b"precious"


@pytest.mark.parametrize("key", sorted(BAD_SUBPROCESS))
def test_bad_arguments_subprocess(procs, key):
    args, status, text = BAD[key]
    res = procs[f"bad_{key}"].result()
    assert res.returncode == status, res.stderr
    assert text in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("key", sorted(BAD))
def test_bad_arguments_name_the_argument(key, work, capsys):
    args, status, text = BAD[key]
    code, out, err = run_main(args, work, capsys)
    assert code == status, err
    assert text in err, err
    assert "error" in err


# ------------------------------------------------------------------ models, help, reproduce
def test_models_lists_sizes(procs):
    out = ok(procs["models"]).stdout
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[1:] if line.split()}
    assert rows["PKA"] == ["11", "35"] and rows["CaMKII"] == ["21", "59"] and rows["Chua"] == ["3", "2"]


def test_help_subprocess(procs):
    res = ok(procs["help"])
    assert res.stdout.startswith("usage: pbsens")
    for word in ["run", "compare", "reproduce", "models", "simulate", "--version"]:
        assert word in res.stdout


@pytest.mark.parametrize("i", range(len(HELP)))
def test_help_of_each_subcommand(i, work, capsys):
    code, out, err = run_main(HELP[i] + ["--help"], work, capsys)
    assert code == 0 and err == ""
    assert out.startswith("usage: pbsens")
    for word in {0: ["run", "compare", "reproduce", "models", "simulate"],
                 1: ["models"], 2: ["--t-end", "--out"],
                 3: ["--method", "--t-eval", "--param", "--rtol", "--atol", "--out", "--plot", "--force", "--quiet"],
                 4: ["--samples", "--out", "--plot", "--repeats"],
                 5: ["--quick", "--out", "NAME"]}[i]:
        assert word in out


def test_reproduce_unknown_or_missing(procs):
    res = procs["reproduce_bad"].result()
    assert res.returncode == 1 and "Traceback" not in res.stderr
    try:
        import pbsens.reproduce  # noqa: F401
    except ModuleNotFoundError:
        assert "pbsens.reproduce" in res.stderr and "missing" in res.stderr
    else:
        assert "no-such-experiment" in res.stderr


# ------------------------------------------------------------------ compare
def test_compare_table_and_figure(procs, work, chua):
    from pbsens.sensitivity.metrics import relative_error
    res = ok(procs["compare"])
    doc = json.loads((work / "cmp.json").read_text())
    rows = {row["method"]: row for row in doc["rows"]}
    assert set(rows) == {"pbsr", "exp", "exp2", "pbsr2", "fs"}
    for row in rows.values():
        for k in ("E_median", "E_max", "kappa_bar_median", "time_sensitivities", "time_total"):
            assert np.isfinite(row[k]) and row[k] >= 0, (row, k)
        assert row["E_max"] >= row["E_median"]
    assert doc["reference"]["rtol"] == 1e-10 and doc["reference"]["atol"] == 1e-12 and doc["samples"] == 3
    assert doc["reference"]["solver"] == "Radau" and doc["reference"]["check"]["E_max"] < 1e-6
    # E_k of PBSR against the API's reference (Radau, the command's default), same call (the paper's
    # state solver LSODA, named: the default is Rodas5P since issue #41)
    r = pbsens.sensitivities(chua, t_span=(0.0, 1.0), method="pbsr", solver="LSODA")
    ref = forward_sensitivities(chua, (0.0, 1.0), t_eval=r.t, method="Radau", rtol=1e-10, atol=1e-12)
    E = relative_error(r, ref)
    assert rows["pbsr"]["E_median"] == pytest.approx(float(np.median(E[np.isfinite(E)])), rel=1e-10)
    # the paper's claim on Chua: PBSR much more accurate than Exp
    assert rows["pbsr"]["E_median"] < 0.1 * rows["exp"]["E_median"]
    for label in ("PBSR", "Exp", "FS"):
        assert label in res.stdout
    import matplotlib.image as mpimg
    assert mpimg.imread(str(work / "cmp.png")).shape[:2] == (700, 700)


# ------------------------------------------------------------------ printed error estimates
def test_run_prints_estimated_error(work, chua, capsys):
    """``--estimate-error`` prints the estimate beside the result: the API's numbers, and
    within 10x of the true largest error (tight forward sensitivities)."""
    import re
    import warnings
    from pbsens.errors import AccuracyWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(chua, t_span=(0.0, 2.0), t_eval=TE, method="exp2", estimate_error=True)
        code, out, err = run_main(["run", "Chua", "--t-end", "2", "--method", "exp2", "--t-eval", "0:2:11",
                                   "--estimate-error"], work, capsys, models=[chua])
    assert code == 0, err
    m = re.search(r"estimated error E .*: median (\S+), max (\S+) at t = (\S+)", out)
    assert m, out
    assert float(m.group(2)) == pytest.approx(r.error_estimate.max(), rel=0.05)
    ref = forward_sensitivities(chua, (0.0, 2.0), t_eval=TE, method="Radau", rtol=1e-10, atol=1e-12)
    E = pbsens.relative_error(r, ref)
    assert 0.1 <= float(m.group(2)) / E[1:].max() <= 10
    assert "of which from the state solve" in out
    # without the flag: nothing printed (the estimate is opt-in)
    code, out, err = run_main(["run", "Chua", "--t-end", "2", "--method", "exp2", "--t-eval", "0:2:11"],
                              work, capsys, models=[chua])
    assert code == 0 and "estimated error" not in out


def test_run_sens_rtol_prints_subdivisions(work, chua, capsys):
    import re
    import warnings
    from pbsens.errors import AccuracyWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        code, out, err = run_main(["run", "Chua", "--t-end", "2", "--method", "exp2", "--t-eval", "0:2:11",
                                   "--sens-rtol", "1e-4"], work, capsys, models=[chua])
    assert code == 0, err
    assert re.search(r"sens_rtol 0.0001: [1-9]\d* grid intervals subdivided", out), out
    assert float(re.search(r"estimated error E .*: median (\S+),", out).group(1)) <= 1e-4


def test_petab_prints_estimated_error_per_condition(work, capsys):
    import re
    from pathlib import Path
    yaml = Path(__file__).parent / "data" / "petab" / "Perelson_Science1996" / "Perelson_Science1996.yaml"
    code, out, err = run_main(["petab", str(yaml), "--method", "pbsr", "--estimate-error", "--rtol", "1e-5",
                               "--atol", "1e-6"], work, capsys)
    assert code == 0, err
    m = re.search(r"condition1\s+\S+\s+E (\S+)", out)
    assert m, out
    # pbsr on Perelson with the 1-norm switch: true max E ~ 7e-2 (tests/test_error_estimate.py)
    assert 5e-3 <= float(m.group(1)) <= 0.7
