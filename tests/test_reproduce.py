"""pbsens.reproduce and the experiment scripts (experiments/): registry, where they are found, the output
folder (never the committed experiments/ files; no overwriting without force), progress lines, one tiny run,
the report."""
import hashlib
import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pbsens import PbsensError, reproduce

REPO = Path(__file__).resolve().parents[1]


def _numbers(obj):
    """Every number in a JSON tree."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def test_registry_lists_the_papers_experiments_in_order():
    """The registry names the paper's seven experiments in the paper's order, Table 2 (table2_runtime) last,
    each a script that exists with a description; the rows Table 2 times are checked in
    test_table2_times_the_compiled_fs_and_both_state_solvers."""
    assert list(reproduce.EXPERIMENTS) == ["fig2_pka_error", "fig3_camkii_error", "fig4_pka_kappa",
                                           "fig5_camkii_kappa", "fig6_random_linear", "fig7_8_chua",
                                           "table2_runtime"]
    for name, entry in reproduce.EXPERIMENTS.items():
        module, description = entry                       # a (module path, description) pair
        assert (REPO / module).is_file(), module
        assert str(entry) == description and description
    assert reproduce.experiments_dir() == REPO / "experiments"


def test_bad_arguments_raise():
    """An unknown name, an empty list, and overrides for an experiment that is not run (here Table 2's
    table2_runtime while only fig7_8_chua runs) raise PbsensError instead of being ignored."""
    with pytest.raises(PbsensError, match="unknown experiment"):
        reproduce.run(["fig99"])
    with pytest.raises(PbsensError, match="empty"):
        reproduce.run([])
    with pytest.raises(PbsensError, match="overrides"):
        reproduce.run(["fig7_8_chua"], overrides={"table2_runtime": {"repeats": 1}})


def test_missing_experiments_folder_raises_wherever_it_runs(monkeypatch, tmp_path):
    """An installed pbsens without the scripts says so; the current directory plays no part (not even the
    repository root, which an earlier version looked in)."""
    repo = reproduce.experiments_dir().parent
    fake = tmp_path / "site-packages" / "pbsens" / "reproduce.py"
    monkeypatch.setattr(reproduce, "__file__", str(fake))
    monkeypatch.delenv("PBSENS_EXPERIMENTS_DIR", raising=False)
    for where in (tmp_path, repo):
        monkeypatch.chdir(where)
        with pytest.raises(PbsensError, match="experiments folder"):
            reproduce.run(["fig7_8_chua"], quick=True, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()          # nothing created before the check
    # a wheel install carries the scripts as pbsens/_experiments (pyproject's force-include)
    shutil.copytree(repo / "experiments", fake.parent / "_experiments",
                    ignore=shutil.ignore_patterns("__pycache__", "*.png", "*.csv", "quick"))
    assert reproduce.experiments_dir() == fake.parent / "_experiments"
    assert reproduce.reference_dir() == fake.parent / "_experiments" / "results"
    # $PBSENS_EXPERIMENTS_DIR comes first
    monkeypatch.setenv("PBSENS_EXPERIMENTS_DIR", str(repo / "experiments"))
    assert reproduce.experiments_dir() == repo / "experiments"


def test_the_wheel_carries_every_script_and_the_reference_results():
    """pyproject's force-include maps every experiments/*.py (and the reference JSON) into pbsens/_experiments,
    and the sdist holds experiments/ (a wheel built from the sdist needs the files it force-includes)."""
    tomllib = pytest.importorskip("tomllib")
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    forced = conf["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    for script in sorted((REPO / "experiments").glob("*.py")):
        key = f"experiments/{script.name}"
        assert forced.get(key) == f"pbsens/_experiments/{script.name}", key
    for name in reproduce.EXPERIMENTS:
        key = f"experiments/results/{name}.json"
        assert (REPO / key).is_file(), key
        assert forced.get(key) == f"pbsens/_experiments/results/{name}.json", key
    for source in forced:
        assert (REPO / source).exists(), source
    assert "experiments" in conf["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]


def test_default_output_folders(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert reproduce.default_out_dir(quick=False) == tmp_path / "pbsens-reproduce"
    a, b = reproduce.default_out_dir(quick=True), reproduce.default_out_dir(quick=True)
    try:
        assert a != b and a.is_dir() and b.is_dir() and not any(a.iterdir())
        assert tmp_path not in a.parents                # a quick run leaves nothing in the current directory
    finally:
        a.rmdir()
        b.rmdir()


def test_a_folder_that_holds_files_is_used_only_with_force(tmp_path, capsys):
    from pbsens.cli import main
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("a user's file")
    with pytest.raises(PbsensError, match="not empty.*--force"):
        reproduce.prepare_out_dir(out)
    assert reproduce.prepare_out_dir(out, force=True) == out.resolve()
    assert (out / "mine.txt").read_text() == "a user's file"      # force writes into it, never clears it
    assert reproduce.prepare_out_dir(tmp_path / "new" / "deeper") == (tmp_path / "new" / "deeper").resolve()
    assert reproduce.prepare_out_dir(out / "mine").is_dir()          # a new folder inside it: fine
    with pytest.raises(PbsensError, match="not a folder"):
        reproduce.prepare_out_dir(out / "mine.txt", force=True)
    # the experiments folder (scripts, committed reference results) is never an output folder, even with force
    for inside in (reproduce.experiments_dir(), reproduce.experiments_dir() / "results",
                   reproduce.experiments_dir() / "results" / "new"):
        with pytest.raises(PbsensError, match="experiments folder"):
            reproduce.prepare_out_dir(inside, force=True)
    assert not (reproduce.experiments_dir() / "results" / "new").exists()
    # the command line refuses before running anything, with a clear message and exit status 1
    capsys.readouterr()
    assert main(["reproduce", "fig7_8_chua", "--quick", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "not empty" in err and "--force" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["mine", "mine.txt"]


def test_progress_lines_when_not_a_terminal():
    """Lines (flushed, on the given stream) per experiment, per sub-step, per loop item when the loop is short
    or ``every`` seconds have passed, and a heartbeat while nothing else is written; nothing when off."""
    import time
    buf = io.StringIO()
    with reproduce.Progress("lines", stream=buf, every=0.0, heartbeat=0.2) as prog:
        prog.begin(1, 2, "fig_a", "what it does")
        prog.step("fig_a: reference solve")
        assert list(prog.bar(["pbsr", "exp"], "fig_a: kappa_bar")) == ["pbsr", "exp"]
        assert list(prog.bar(range(30), "fig_a: timing")) == list(range(30))
        assert list(prog.bar(range(3), "fig_a: growing n", uniform=False)) == [0, 1, 2]
        time.sleep(1.0)                                   # the heartbeat speaks for a long sub-step
        prog.end(1.5)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "[1/2] fig_a: started (what it does)"
    assert any(line.startswith("    fig_a: reference solve (at ") for line in lines)
    assert any("fig_a: kappa_bar: 2/2 (exp)" in line for line in lines)
    assert any("fig_a: timing: 30/30" in line and "left)" in line for line in lines)
    growing = [line for line in lines if "fig_a: growing n: " in line]
    assert len(growing) == 3 and not any("left" in line for line in growing)   # no estimate for unequal items
    assert any("fig_a: still running" in line for line in lines)
    assert lines[-1].startswith("[1/2] fig_a: done in 1.5 s")
    quiet = io.StringIO()
    with reproduce.Progress("off", stream=quiet) as prog:
        prog.begin(1, 1, "x")
        list(prog.bar(range(3), "x"))
        prog.end()
    assert quiet.getvalue() == ""
    # bars (a terminal): tqdm's bars, the experiment's start and end as lines above them
    bars = io.StringIO()
    with reproduce.Progress("bars", stream=bars) as prog:
        prog.begin(1, 1, "fig_b")
        list(prog.bar(range(3), "fig_b: timing"))
        prog.end(2.0)
    text = bars.getvalue()
    assert "[1/1] fig_b: started" in text and "[1/1] fig_b: done in 2.0 s" in text
    assert "experiments: 100%" in text and "\r" in text
    # None picks lines for a stderr that is not a terminal (a log file, CI), bars for a terminal
    assert reproduce.Progress.auto(None).mode == "lines"
    assert reproduce.Progress.auto(False).mode == "off" and reproduce.Progress.auto(True).mode == "bars"


def _tree_hashes(folder):
    """``{relative path: sha256}`` of every file under ``folder`` except bytecode caches."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _git_status(path):
    try:
        res = subprocess.run(["git", "status", "--porcelain", "--", str(path)], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


@pytest.mark.slow
def test_tiny_chua_run_from_elsewhere_writes_only_its_folder(tmp_path, monkeypatch, capsys):
    """From another directory: results, PNGs and REPORT.md in the output folder, progress lines on the (not a
    terminal) stderr, and the repository's committed experiments/ files untouched."""
    experiments = REPO / "experiments"
    before, status_before = _tree_hashes(experiments), _git_status(experiments)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    tmp_path = tmp_path / "out"
    capsys.readouterr()
    out = reproduce.run(["fig7_8_chua"], quick=True, out_dir=tmp_path,
                        overrides={"fig7_8_chua": {"n_samples": 3, "repeats": 2}})
    err = capsys.readouterr().err
    assert Path(out["out_dir"]) == tmp_path
    assert _tree_hashes(experiments) == before
    assert _git_status(experiments) == status_before
    assert sorted(p.name for p in elsewhere.iterdir()) == []        # nothing written in the current directory
    lines = err.splitlines()
    assert "[1/1] fig7_8_chua: started (Figs 7, 8: " in err
    assert any(line.startswith("[1/1] fig7_8_chua: done in ") for line in lines)
    assert "fig7_chua_error: reference forward sensitivities" in err and "fig8_chua_kappa: kappa_bar" in err
    assert "\r" not in err                             # lines, not bars
    res = out["results"]["fig7_8_chua"]
    assert res["quick"] is True and res["overrides"] == {"n_samples": 3, "repeats": 2}

    data = json.loads((tmp_path / "fig7_8_chua.json").read_text())
    for key in ("name", "error", "kappa", "headline", "paper", "files", "wall_time_s", "environment"):
        assert key in data, key
    assert data["kappa"]["n_samples"] == 3
    assert set(data["error"]["E"]) >= {"pbsr", "exp", "pbsr2", "exp2", "reference_floor"}
    assert set(data["kappa"]["kappa_bar"]) == {"pbsr", "exp", "fs", "pbsr2", "exp2"}
    for key, value in data["headline"].items():
        assert isinstance(value, float) and math.isfinite(value) and value > 0, key
    nums = list(_numbers(data))
    assert nums and all(math.isfinite(x) for x in nums)
    # PBSR beats Exp on Chua by a wide margin whatever the sample size
    assert data["error"]["E"]["pbsr"]["median"] < data["error"]["E"]["exp"]["median"]

    for f in data["files"]:
        path = tmp_path / f
        assert path.is_file() and path.stat().st_size > 0, f
        if f.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert path.stat().st_size < 200_000
    assert {"fig7_chua_error.png", "fig8_chua_kappa.png", "fig7_chua_error.csv"} <= set(data["files"])

    # the report (a non-default folder: written next to the results) mentions every experiment
    report = Path(out["report"])
    assert report == tmp_path / "REPORT.md"
    text = report.read_text()
    for title in ("Figure 2", "Figure 3", "Figure 4", "Figure 5", "Figure 6", "Figures 7 and 8", "Table 2",
                  "issue 5"):
        assert title in text, title
    assert "](fig7_chua_error.png)" in text and "](fig8_chua_kappa.png)" in text
    assert "Quick mode" in text
    assert "Not run" in text            # the other experiments did not run in this folder
    # compared with the committed reference: the Chua rows, both verdicts
    assert "## Compared with the published reference" in text
    rows = {r["experiment"]: r for r in out["comparison"]["rows"]}
    assert set(rows) == {"Figures 7 and 8: Chua's circuit", "Second-order variants (issue 5): pbsr2 and exp2"}
    chua = rows["Figures 7 and 8: Chua's circuit"]
    assert chua["reference_verdict"].startswith("accuracy vs Exp holds") and chua["verdict"]
    assert out["comparison"]["wall_time_s"]["fig7_8_chua"]["reference"] > 0


def test_report_of_an_empty_folder_says_not_run(tmp_path):
    import importlib
    import sys
    folder = reproduce.experiments_dir()
    sys.path.insert(0, str(folder))
    try:
        make_report = importlib.import_module("make_report")
    finally:
        sys.path.remove(str(folder))
    path = make_report.write_report(tmp_path)
    text = path.read_text()
    assert path == tmp_path / "REPORT.md"
    for name in reproduce.EXPERIMENTS:
        if name != "fig7_8_chua":
            assert f"`{name}.json`" in text, name
    assert text.count("Not run") >= len(reproduce.EXPERIMENTS)


def _experiment_module(stem):
    """Import ``experiments/<stem>.py`` as pbsens.reproduce does (the folder on sys.path while importing)."""
    import importlib
    import sys
    folder = reproduce.experiments_dir()
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(stem)
    finally:
        sys.path.remove(str(folder))


def test_table2_times_the_compiled_fs_and_both_state_solvers():
    """Table 2 times the FS a pbsens user would pick, forward_sensitivities(method="rodas5p"), and labels it so,
    with scipy's BDF forward sensitivities (the paper's kind of setup) as a second, labelled FS row; every
    post-hoc method runs on both state solvers, LSODA (the paper's setup) and the compiled rodas5p, all at the
    paper's tolerances. The committed results hold every row, with FS/post-hoc ratios for both FS rows, and keep
    the keys the report reads (fs = BDF, post-hoc on LSODA). Checked without timing anything."""
    mod = _experiment_module("table2_runtime")
    rows = mod.ROWS
    assert list(rows)[:2] == ["fs_rodas5p", "fs"]
    assert rows["fs_rodas5p"] == ("FS (pbsens rodas5p)", "fs", "rodas5p")
    assert rows["fs"] == ("FS (scipy BDF)", "fs", "BDF")
    for meth in ("pbsr", "exp", "pbsr2", "exp2"):
        assert rows[meth][1:] == (meth, "LSODA") and "LSODA" in rows[meth][0]
        assert rows[f"{meth}_rodas5p"][1:] == (meth, "rodas5p") and "rodas5p" in rows[f"{meth}_rodas5p"][0]
    assert len(set(label for label, _, _ in rows.values())) == len(rows)     # every row labelled apart
    data = json.loads((REPO / "experiments" / "results" / "table2_runtime.json").read_text())
    assert data["fs_baseline"] == "fs_rodas5p" and set(data["rows"]) == set(rows)
    assert data["methods"] == ["fs", "pbsr", "exp", "pbsr2", "exp2"]
    assert data["settings"]["fs_rodas5p"]["method"] == "rodas5p" and data["settings"]["fs"]["method"] == "BDF"
    for model in ("PKA", "CaMKII"):
        t = data["table"][model]
        assert set(t["seconds"]) == set(rows)
        assert all(t["seconds"][k]["n"] == data["repeats"] and t["seconds"][k]["median"] > 0 for k in rows)
        for fs in ("fs_rodas5p", "fs"):
            for other in rows:
                if other not in ("fs_rodas5p", "fs"):
                    assert math.isfinite(t["ratios"][f"{fs}/{other} (median)"])


def test_every_experiment_has_its_own_run_in_its_script():
    """Family scripts (Figs 2/3, Figs 4/5) hold one run per figure; every script runs exactly its names."""
    by_script = {}
    for name, entry in reproduce.EXPERIMENTS.items():
        by_script.setdefault(entry.module, []).append(name)
    assert by_script["experiments/error_figures.py"] == ["fig2_pka_error", "fig3_camkii_error"]
    assert by_script["experiments/kappa_figures.py"] == ["fig4_pka_kappa", "fig5_camkii_kappa"]
    runs = []
    for module, names in by_script.items():
        mod = _experiment_module(Path(module).stem)
        assert sorted(mod.RUNS) == sorted(names), module
        runs += [mod.RUNS[n] for n in names]
    assert len(set(map(id, runs))) == len(reproduce.EXPERIMENTS)   # no two names share a run


def test_experiments_run_blas_on_one_thread_and_restore_it():
    from threadpoolctl import threadpool_info, threadpool_limits
    machine = _experiment_module("_machine")
    with threadpool_limits(limits=2, user_api="blas"):
        with machine.blas_threads(1):
            inside = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert inside and all(n == 1 for n in inside)
    assert all(n == 2 for n in after)
    kernels = machine.openblas_kernels()
    assert all(isinstance(core, str) and core for core in kernels.values())
