"""Where the experiments write, and how: output folders, JSON and CSV files, progress bars."""
from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

EXPERIMENTS_DIR = Path(__file__).resolve().parent
#: The committed reference results (read by ``make_report.py``'s default; never written by a run).
RESULTS_DIR = EXPERIMENTS_DIR / "results"


def out_dir_for(out_dir, quick=False):
    """The output folder ``out_dir``, created. There is no default: :func:`pbsens.reproduce.run` picks one
    (never inside this folder), and the scripts' command line goes through it."""
    if out_dir is None:
        raise ValueError("out_dir is required: run experiments through pbsens.reproduce.run (or `pbsens "
                         "reproduce`), which chooses the output folder")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def show_progress(progress):
    """Whether to draw progress bars: ``progress``, or (None) only when stderr is a terminal."""
    if progress is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


def bar(iterable, progress, desc, total=None, uniform=True):
    """``iterable`` with its progress shown.

    ``progress`` is what the experiment's ``run`` received: a
    :class:`pbsens.reproduce.Progress` (bars on a terminal, lines elsewhere), or a
    bool / None (a tqdm bar when true, or when None and stderr is a terminal).
    ``uniform=False``: the items' costs differ (no estimate of the time left).
    """
    if hasattr(progress, "bar"):
        return progress.bar(iterable, desc, total=total, uniform=uniform)
    if not show_progress(progress):
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=False)


def step(progress, text):
    """Announce a sub-step of the running experiment (a line when progress is shown as lines)."""
    if hasattr(progress, "step"):
        progress.step(text)


def strip_private(d):
    """Drop the in-memory helpers (keys starting with ``_``) before writing JSON."""
    return {k: v for k, v in d.items() if not k.startswith("_")}


def _clean(obj):
    """JSON-ready copy: numpy -> Python, non-finite floats -> None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(_clean(obj), fh, indent=1, allow_nan=False)
        fh.write("\n")


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([f"{v:.10g}" if isinstance(v, (float, np.floating)) else v for v in row])
