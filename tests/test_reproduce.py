"""pbsens.reproduce and the experiment scripts (experiments/): registry, errors, one tiny run, the report."""
import json
import math
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
    assert list(reproduce.EXPERIMENTS) == ["fig2_pka_error", "fig3_camkii_error", "fig4_pka_kappa",
                                           "fig5_camkii_kappa", "fig6_random_linear", "fig7_8_chua",
                                           "table2_runtime"]
    for name, entry in reproduce.EXPERIMENTS.items():
        module, description = entry                       # a (module path, description) pair
        assert (REPO / module).is_file(), module
        assert str(entry) == description and description
    assert reproduce.experiments_dir() == REPO / "experiments"


def test_bad_arguments_raise():
    with pytest.raises(PbsensError, match="unknown experiment"):
        reproduce.run(["fig99"])
    with pytest.raises(PbsensError, match="empty"):
        reproduce.run([])
    with pytest.raises(PbsensError, match="overrides"):
        reproduce.run(["fig7_8_chua"], overrides={"table2_runtime": {"repeats": 1}})


def test_missing_experiments_folder_raises(monkeypatch, tmp_path):
    """An installed pbsens run outside the repository cannot find the experiments."""
    repo = reproduce.experiments_dir().parent
    fake = tmp_path / "site-packages" / "pbsens" / "reproduce.py"
    monkeypatch.setattr(reproduce, "__file__", str(fake))
    monkeypatch.delenv("PBSENS_EXPERIMENTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PbsensError, match="experiments folder"):
        reproduce.run(["fig7_8_chua"], quick=True, out_dir=tmp_path)
    # run from the repository root (the README's commands), it finds them again
    monkeypatch.chdir(repo)
    assert reproduce.experiments_dir() == repo / "experiments"


@pytest.mark.slow
def test_tiny_chua_run_writes_json_png_and_report(tmp_path):
    out = reproduce.run(["fig7_8_chua"], quick=True, out_dir=tmp_path, progress=False,
                        overrides={"fig7_8_chua": {"n_samples": 3, "repeats": 2}})
    assert Path(out["out_dir"]) == tmp_path
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
