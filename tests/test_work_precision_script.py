"""The matched-error summary of ``benchmarks/work_precision.py`` (issue #41's question), on hand-made rows."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def wp():
    spec = importlib.util.spec_from_file_location("_bench_work_precision", BENCH / "work_precision.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row(config, rtol, time, e_med, e_max=None, model="M"):
    return dict(model=model, config=config, rtol=rtol, time=time, E_med=e_med,
                E_max=e_med if e_max is None else e_max)


def test_cheapest_takes_the_cheapest_row_that_reaches_the_level(wp):
    rows = [row("rodas5p + exp2", 1e-3, 0.004, 5e-6), row("rodas5p + exp2 all", 1e-4, 0.008, 4e-7),
            row("rodas5p + exp2", 1e-5, 0.006, 4e-6), row("rodas5p FS", 1e-5, 0.003, 2e-6)]
    assert wp.cheapest(rows, wp.POST_HOC, "E_med", 1e-5)[:3] == (0.004, 5e-6, "rodas5p + exp2")
    assert wp.cheapest(rows, wp.POST_HOC, "E_med", 1e-6)[2] == "rodas5p + exp2 all"
    assert wp.cheapest(rows, wp.POST_HOC, "E_med", 1e-7) is None          # none reaches it
    assert wp.cheapest(rows, ("rodas5p FS",), "E_med", 1e-5)[0] == 0.003


def test_cheapest_skips_failed_runs(wp):
    rows = [row("AMICI FS (solver)", 1e-3, None, None), row("AMICI FS (solver)", 1e-4, 0.02, 1e-5)]
    assert wp.cheapest(rows, ("AMICI FS (solver)",), "E_med", 1e-3)[0] == 0.02


def test_matched_error_table_ratios(wp):
    rows = [row("rodas5p + exp2", 1e-3, 0.004, 5e-6, 2e-5), row("rodas5p FS", 1e-3, 0.002, 1e-4, 3e-4),
            row("rodas5p FS", 1e-5, 0.003, 2e-6, 5e-6), row("AMICI FS (solver)", 1e-5, 0.020, 1e-7, 1e-5)]
    lines = wp.matched_error_table(rows, "E_med")
    by_level = {ln.split(" | ")[1]: ln for ln in lines[2:]}
    # at 1e-5: post-hoc 4 ms, fs 3 ms (its rtol-1e-5 point), AMICI 20 ms
    assert by_level["1e-05"].endswith("| 0.75 | 5.00 |")
    # at 1e-3 fs's cheapest point is its rtol-1e-3 one
    assert "2.00 (rodas5p FS, 1e-03)" in by_level["1e-03"]
    # below the post-hoc error no ratio
    assert by_level["1e-06"].endswith("| - | - |")
    assert len(lines) == 2 + len(wp.LEVELS)


def test_ratio_line_names_only_configurations_that_ran(wp):
    assert "no ratio" in wp.ratio_line("PKA", 1e-5, {"rodas5p + exp2": 1.0})
    line = wp.ratio_line("PKA", 1e-5, {"LSODA + exp2": 3.0, "rodas5p + exp2": 1.0})
    assert "LSODA/rodas5p exp2 time 3.00x" in line and "pbsr2" not in line
