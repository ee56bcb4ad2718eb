"""Where the experiments write, and how: output folders, JSON and CSV files, progress bars."""
from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

EXPERIMENTS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = EXPERIMENTS_DIR / "results"


def out_dir_for(out_dir, quick):
    """The output folder: ``out_dir``, else ``results/`` (full) or ``results/quick/`` (quick)."""
    if out_dir is None:
        out_dir = RESULTS_DIR / "quick" if quick else RESULTS_DIR
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def show_progress(progress):
    """Whether to draw progress bars: ``progress``, or (None) only when stderr is a terminal."""
    if progress is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


def bar(iterable, progress, desc, total=None):
    """A tqdm bar when ``progress`` (None: only on a terminal); the iterable itself otherwise."""
    if not show_progress(progress):
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=False)


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
