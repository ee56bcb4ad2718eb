"""Reproduce the paper's Section 8: run the scripts in ``experiments/`` and write the report.

The experiments are scripts in the repository's ``experiments/`` folder (next to
the package, not inside it): a wheel install without the repository has no
experiments and :func:`run` raises :class:`~pbsens.errors.PbsensError`.

>>> import pbsens.reproduce as rep
>>> out = rep.run(["fig7_8_chua"], quick=True)      # doctest: +SKIP
>>> out["report"]                                    # doctest: +SKIP
'.../experiments/results/quick/REPORT.md'

Full mode writes into ``experiments/results/`` and regenerates
``experiments/REPORT.md``; quick mode (fewer repeats, samples and dimensions)
writes into ``experiments/results/quick/`` and its report there, so a quick run
never overwrites the committed full results.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

from .errors import PbsensError

__all__ = ["EXPERIMENTS", "Experiment", "run", "experiments_dir"]


class Experiment(NamedTuple):
    """One experiment: its script (relative to the repository) and what it reproduces.

    A script may hold a family of experiments (Figs 2 and 3 in one, Figs 4 and 5
    in another); its ``RUNS`` maps each experiment's name to its ``run``.
    """

    module: str
    description: str

    def __str__(self):  # printing an entry shows its description
        return self.description


#: The experiments in the paper's order: name -> (script path, description).
EXPERIMENTS = OrderedDict([
    ("fig2_pka_error", Experiment("experiments/error_figures.py",
                                  "Fig 2: E_k per step of PBSR, Exp (+ pbsr2, exp2) vs tight FS, PKA [0, 600]")),
    ("fig3_camkii_error", Experiment("experiments/error_figures.py",
                                     "Fig 3: E_k per step of PBSR, Exp (+ pbsr2, exp2) vs tight FS, CaMKII [0, 600]")),
    ("fig4_pka_kappa", Experiment("experiments/kappa_figures.py",
                                  "Fig 4: kappa_bar(t) of PBSR, Exp, FS on PKA [0, 60000], N = 100")),
    ("fig5_camkii_kappa", Experiment("experiments/kappa_figures.py",
                                     "Fig 5: kappa_bar(t) of PBSR, Exp, FS on CaMKII [0, 600], N = 100")),
    ("fig6_random_linear", Experiment("experiments/fig6_random_linear.py",
                                      "Fig 6: runtime vs n for the random linear system, FS / PBS / Exp, a n^b fits")),
    ("fig7_8_chua", Experiment("experiments/fig7_8_chua.py",
                               "Figs 7, 8: E_k and kappa_bar on Chua [0, 10] (+ pbsr2, exp2)")),
    ("table2_runtime", Experiment("experiments/table2_runtime.py",
                                  "Table 2: runtime of FS, PBSR, Exp (+ pbsr2, exp2) on PKA and CaMKII [0, 600]")),
])


def experiments_dir() -> Path:
    """The repository's ``experiments/`` folder.

    Looked for in ``$PBSENS_EXPERIMENTS_DIR``, then next to the package folder (a
    source checkout or editable install), then in the current directory (an
    installed pbsens run from the repository root, as the README does).

    Raises
    ------
    PbsensError
        When none of them holds the experiment scripts.
    """
    candidates = [Path(__file__).resolve().parent.parent / "experiments", Path.cwd() / "experiments"]
    if os.environ.get("PBSENS_EXPERIMENTS_DIR"):
        candidates.insert(0, Path(os.environ["PBSENS_EXPERIMENTS_DIR"]))
    for here in candidates:
        if here.is_dir() and (here / "_common.py").is_file():
            return here
    raise PbsensError("the experiments folder is missing (looked in "
                      + ", ".join(repr(str(c)) for c in candidates) + "): the paper's experiments live in "
                      "the pbsens repository; run from its root or set PBSENS_EXPERIMENTS_DIR")


def _import(stem, folder):
    """Import ``experiments/<stem>.py``; the folder goes on ``sys.path`` so that the scripts find their helpers."""
    if not (folder / f"{stem}.py").is_file():
        raise PbsensError(f"the experiment script {str(folder / (stem + '.py'))!r} is missing")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    mod = importlib.import_module(stem)
    where = Path(getattr(mod, "__file__", "") or "").resolve().parent
    if where != folder.resolve():
        raise PbsensError(f"importing the experiment script {stem!r} found another module of that name "
                          f"({getattr(mod, '__file__', None)!r}); rename it or run from a clean interpreter")
    return mod


def _runner(name, folder):
    """The ``run`` of experiment ``name``: ``RUNS[name]`` of its script."""
    mod = _import(Path(EXPERIMENTS[name].module).stem, folder)
    fn = getattr(mod, "RUNS", {}).get(name)
    if fn is None:
        raise PbsensError(f"the experiment script {EXPERIMENTS[name].module!r} has no run for {name!r} in its RUNS")
    return fn


def _check_names(names):
    if names is None:
        return list(EXPERIMENTS)
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise PbsensError(f"'names' must be a list of experiment names or None, got {names!r}") from None
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise PbsensError(f"'names': unknown experiment(s) {', '.join(map(repr, unknown))}; "
                          f"choose from {', '.join(EXPERIMENTS)}")
    if not names:
        raise PbsensError("'names' is empty: name at least one experiment (or pass None for all)")
    return list(dict.fromkeys(names))


def run(names=None, quick=False, out_dir=None, progress=None, overrides=None) -> dict:
    """Run experiments of the paper's Section 8 and regenerate the report.

    Parameters
    ----------
    names : list of str, optional
        Keys of :data:`EXPERIMENTS`; default all, in the paper's order.
    quick : bool
        Fewer repeats, samples and dimensions (all experiments in a few minutes).
    out_dir : path, optional
        Folder for the JSON/CSV/PNG results. Default ``experiments/results/``
        (full) or ``experiments/results/quick/`` (quick).
    progress : bool or None
        tqdm progress bars; None: only when stderr is a terminal.
    overrides : dict, optional
        ``{name: {option: value}}`` passed to that experiment's ``run`` (e.g.
        ``{"fig7_8_chua": {"n_samples": 3, "repeats": 2}}``; see each script's
        ``run`` for its options). For tests and experiments with the setup; the
        JSON records the overrides.

    Returns
    -------
    dict
        ``out_dir`` and ``report`` (paths, str), ``wall_time_s`` and ``results``
        (name -> the dict each experiment wrote as JSON).

    Raises
    ------
    PbsensError
        Unknown names, or the experiments folder is missing.
    """
    names = _check_names(names)
    overrides = dict(overrides or {})
    stray = [k for k in overrides if k not in names]
    if stray:
        raise PbsensError(f"'overrides' names experiment(s) that are not run: {', '.join(map(repr, stray))}")
    folder = experiments_dir()
    results_io = _import("_results_io", folder)
    out = results_io.out_dir_for(out_dir, quick)
    show = results_io.show_progress(progress)
    t0 = time.perf_counter()
    results = OrderedDict()
    it = names
    if show:
        from tqdm.auto import tqdm
        it = tqdm(names, desc="experiments", unit="exp")
    for name in it:
        if show:
            it.set_postfix_str(name)
        results[name] = _runner(name, folder)(quick=quick, out_dir=out, progress=progress,
                                              **overrides.get(name, {}))
    report = _import("make_report", folder).write_report(out, quick=quick)
    return {"out_dir": str(out), "report": str(report), "wall_time_s": time.perf_counter() - t0,
            "results": results}
