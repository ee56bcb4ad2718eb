"""Write ``REPORT.md``: the paper's claims next to our numbers, from the experiments' JSON.

For every figure/table of the paper's Section 8: the claim, our number, and
whether it holds, in plain words, with the PNGs embedded. Verdicts use fixed
thresholds stated in the text (never tuned to agree).

Default: reads ``experiments/results/`` (the committed reference) and writes
``experiments/REPORT.md`` (maintainers, after copying a run's results there). For
any other results folder (what ``pbsens reproduce`` writes) the report goes into
that folder, with a section comparing its verdicts and wall times with the
reference's (``reference=``), so a run never overwrites the committed report.

Usage: ``python3 experiments/make_report.py [--results DIR] [--out FILE] [--reference DIR]``.
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

from _report_accuracy import chua_section, error_section, kappa_section, second_order_section
from _report_runtime import fig6_section, table2_section
from _report_text import Report, g, table
from _results_io import EXPERIMENTS_DIR, RESULTS_DIR

DEFAULT_REPORT = EXPERIMENTS_DIR / "REPORT.md"
#: The report's sections in the paper's order: (experiment, title, section writer, its extra arguments).
SECTIONS = [
    ("fig2_pka_error", "Figure 2: E_k on PKA", error_section, "PKA"),
    ("fig3_camkii_error", "Figure 3: E_k on CaMKII", error_section, "CaMKII"),
    ("fig4_pka_kappa", "Figure 4: kappa_bar on PKA, t in [0, 60000]", kappa_section, "PKA"),
    ("fig5_camkii_kappa", "Figure 5: kappa_bar on CaMKII", kappa_section, "CaMKII"),
    ("fig6_random_linear", "Figure 6: runtime against dimension (random linear system)", fig6_section),
    ("fig7_8_chua", "Figures 7 and 8: Chua's circuit", chua_section),
    ("table2_runtime", "Table 2: runtime on PKA and CaMKII", table2_section),
]


def _build(results_dir, out, only=None):
    """The report of ``results_dir`` (its sections written, its summary rows filled); ``only``: read the
    results of these experiments alone (the others are "not run")."""
    rep = Report(results_dir, out, [name for name, *_ in SECTIONS if only is None or name in only])
    for name, title, write, *args in SECTIONS:
        rep.section(name, title, write, *args)
    second_order_section(rep)
    return rep


def _plain(text):
    return str(text).replace("**", "")


def compare(results_dir, reference_dir, rep=None):
    """This folder's summary rows and wall times next to the reference's.

    Returns ``{"rows": [{"experiment", "verdict", "reference_verdict", "ours", "reference_ours",
    "same_verdict"}], "wall_time_s": {name: {"run", "reference"}}}`` for every experiment whose
    results are in ``results_dir`` (verdicts and numbers as plain text), or None when the reference
    cannot be read.
    """
    results_dir = Path(results_dir)
    rep = rep if rep is not None else _build(results_dir, results_dir / "REPORT.md")
    try:
        # the reference restricted to the experiments of this folder (rows that combine several, as the
        # second-order one, then summarise the same experiments on both sides)
        ref = _build(Path(reference_dir), results_dir / "REPORT.md", only=set(rep.data))
    except Exception:  # noqa: BLE001 - a reference written by another version: no comparison, never a failed run
        return None
    theirs = {row[0]: row for row in ref.summary}
    rows = []
    for title, _claim, ours, verdict_text in rep.summary:
        if ours == "not run":
            continue
        other = theirs.get(title, [title, "-", "not run", "-"])
        rows.append({"experiment": title, "verdict": _plain(verdict_text), "reference_verdict": _plain(other[3]),
                     "ours": _plain(ours), "reference_ours": _plain(other[2]),
                     "same_verdict": _plain(verdict_text) == _plain(other[3])})
    walls = {name: {"run": d.get("wall_time_s"), "reference": (ref.data.get(name) or {}).get("wall_time_s")}
             for name, d in rep.data.items()}
    return {"rows": rows, "wall_time_s": walls}


def _comparison_lines(cmp, reference_dir, quick):
    """The report's section comparing this folder's results with the reference's (none without rows)."""
    if not cmp or not cmp["rows"]:
        return []
    same = sum(r["same_verdict"] for r in cmp["rows"])
    lines = ["## Compared with the published reference", "",
             f"The committed results in `{reference_dir}` (the run behind `experiments/REPORT.md`) "
             f"against this folder's: the same verdict on {same} of {len(cmp['rows'])} rows."
             + (" This is a quick run (fewer repeats, samples and dimensions): numbers and some verdicts are "
                "expected to differ." if quick else " Timings depend on the machine and its load; accuracy "
                "numbers should agree to a few digits."), "",
             table(["experiment", "verdict here", "verdict in the reference", "numbers here",
                    "numbers in the reference"],
                   [[r["experiment"], r["verdict"], r["reference_verdict"], r["ours"], r["reference_ours"]]
                    for r in cmp["rows"]]), ""]
    walls = [(k, v["run"], v["reference"]) for k, v in cmp["wall_time_s"].items() if v["run"]]
    if walls:
        lines += ["Wall time here (reference): " + ", ".join(
            f"{k} {g(a, 3)} s ({g(b, 3) + ' s' if b else 'n/a'})" for k, a, b in walls) + ".", ""]
    return lines


def write_report(results_dir=None, out=None, quick=None, reference=None):
    """Write the report; returns its path.

    ``results_dir`` defaults to ``experiments/results``; ``out`` to
    ``experiments/REPORT.md`` for that folder and ``<results_dir>/REPORT.md`` otherwise.
    ``reference``: a folder of reference results (the committed ``experiments/results``)
    to compare with, in a section after the summary; ignored when it is ``results_dir``.
    """
    results_dir = Path(results_dir) if results_dir is not None else RESULTS_DIR
    if out is None:
        out = DEFAULT_REPORT if results_dir.resolve() == RESULTS_DIR.resolve() else results_dir / "REPORT.md"
    rep = _build(results_dir, out)
    if quick is None:
        quick = any(d.get("quick") for d in rep.data.values())
    env = next((d.get("environment") for d in rep.data.values() if d.get("environment")), {}) or {}
    walls = {k: d.get("wall_time_s") for k, d in rep.data.items()}
    cmp_lines = []
    if reference is not None and Path(reference).resolve() != results_dir.resolve():
        cmp_lines = _comparison_lines(compare(results_dir, reference, rep), reference, quick)

    head = ["# Reproducing Section 8 of Eriksson, Kramer, Milinanni, Nyquist (arXiv:2109.00067) with pbsens", ""]
    if quick:
        head += ["> **Quick mode**: few repeats, samples and dimensions. The numbers below are a smoke test, "
                 "not the reproduction; see `experiments/REPORT.md` for the full run.", ""]
    where = _rel(results_dir, out)
    head += [f"Generated by `experiments/make_report.py` from the JSON files in "
             f"{'this folder' if where == '.' else '`' + where + '`'} on {datetime.date.today().isoformat()}. "
             f"Regenerate everything with `pbsens reproduce all --out DIR` (or `python3 -c \"import pbsens.reproduce "
             f"as r; r.run(out_dir='DIR')\"`); one experiment with `pbsens reproduce <name> --out DIR`.", "",
             "**Setup.** State solves: LSODA (scipy), rtol 1e-5, atol 1e-6 (the paper: CVODE BDF at the same "
             "tolerances). Reference sensitivities: forward sensitivities (FS), scipy BDF, rtol 1e-8, atol 1e-10. "
             "FS for timings and kappa_bar: BDF at rtol 1e-5, atol 1e-6. Fixed seeds. Timings include the state "
             "solve and exclude numba compilation; methods are interleaved and we report medians (the machine "
             f"is shared). Machine: {env.get('cpu_count', '?')} CPUs ({env.get('cpu', '?')}), load average at start "
             f"{_load(env)}; Python {env.get('python', '?')}, numpy {env.get('numpy', '?')}, scipy "
             f"{env.get('scipy', '?')}, numba {env.get('numba', '?')}, pbsens {env.get('pbsens', '?')}"
             f"{_blas_kernels(env)}. BLAS "
             "limited to one thread during the experiments: under load, OpenBLAS's default threading made the "
             "small LU solves inside FS up to ~50x slower, which would have distorted every FS timing.", "",
             "Verdicts use thresholds fixed before looking at the numbers and stated in each section; we did not "
             "tune anything to agree with the paper.", "",
             "## Summary", "",
             table(["experiment", "paper", "ours", "verdict"], rep.summary), ""]
    if walls:
        head += ["Wall time per experiment: " + ", ".join(f"{k} {g(v, 3)} s" for k, v in walls.items() if v)
                 + f" (total {g(sum(v for v in walls.values() if v), 3)} s, numba compilation included).", ""]
    text = "\n".join(head + cmp_lines + rep.lines).rstrip() + "\n"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    return Path(out)


def _rel(path, out):
    try:
        return os.path.relpath(path, Path(out).parent).replace(os.sep, "/")
    except ValueError:
        return str(path)


def _blas_kernels(env):
    """", OpenBLAS kernels: Haswell (libscipy_openblas...)" from the environment record, or ""."""
    cores = env.get("openblas_kernels") or {}
    if not cores:
        return ""
    return "; OpenBLAS kernels: " + ", ".join(f"{core} ({lib})" for lib, core in sorted(cores.items()))


def _load(env):
    la = env.get("load_average_at_start")
    return "/".join(f"{x:.1f}" for x in la) if la else "?"


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Write REPORT.md from the experiments' JSON results.")
    ap.add_argument("--results", default=None, help="results folder (default experiments/results)")
    ap.add_argument("--out", default=None, help="report file (default experiments/REPORT.md for the default "
                                                "results folder, else <results>/REPORT.md)")
    ap.add_argument("--reference", default=None, help="reference results to compare with (e.g. experiments/results)")
    args = ap.parse_args()
    print(write_report(args.results, args.out, reference=args.reference))


if __name__ == "__main__":
    main()
