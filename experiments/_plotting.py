"""Figure helpers of the experiments: method names and colours, headless figures, PBSR's branches."""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: Display names of the methods (figures and report).
LABELS = {"pbsr": "PBSR", "exp": "Exp", "pbs": "PBS", "pbsr2": "PBSR2", "exp2": "Exp2", "fs": "FS"}
COLORS = {"pbsr": "tab:blue", "exp": "tab:orange", "pbs": "tab:cyan", "pbsr2": "tab:green",
          "exp2": "tab:purple", "fs": "black"}
BRANCH_COLORS = {"exp-stiff": "tab:red", "exp-equilibrium": "tab:olive"}
BRANCH_LABELS = {"exp-stiff": "PBSR used exp: too stiff", "exp-equilibrium": "PBSR used exp: equilibrium"}
DPI = 100


def new_figure(nrows=1, ncols=1, figsize=(8.0, 4.2), **kw):
    """A matplotlib Figure without pyplot (safe headless, no global state)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def save_figure(fig, path):
    fig.savefig(path, dpi=DPI)
    return Path(path).name


def finish_axes(ax, title, **legend):
    """Title, light major grid and legend, as on every per-step figure."""
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best", **legend)


def branch_runs(grid, branch, kinds=("exp-stiff", "exp-equilibrium")):
    """Merged ``(t_start, t_end, kind)`` runs of consecutive intervals whose branch is in ``kinds``."""
    runs, i, n = [], 0, len(branch)
    while i < n:
        j = i + 1
        while j < n and branch[j] == branch[i]:
            j += 1
        if branch[i] in kinds:
            runs.append((float(grid[i]), float(grid[j]), str(branch[i])))
        i = j
    return runs


def shade(ax, grid, branch, tmin=None):
    """Shade where PBSR used the exponential step; return legend handles."""
    from matplotlib.patches import Patch
    seen = set()
    for a, b, kind in branch_runs(grid, branch):
        if tmin is not None:
            if b <= tmin:
                continue
            a = max(a, tmin)
        ax.axvspan(a, b, color=BRANCH_COLORS[kind], alpha=0.18, lw=0)
        seen.add(kind)
    return [Patch(color=BRANCH_COLORS[k], alpha=0.35, label=BRANCH_LABELS[k]) for k in BRANCH_COLORS if k in seen]


def positive(a, floor=1e-300):
    """Values for a log axis (zeros raised to ``floor``)."""
    return np.maximum(np.asarray(a, dtype=np.float64), floor)
