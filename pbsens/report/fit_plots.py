"""Figures of calibration: measured against simulated data, waterfall plots of multi-start fits
and likelihood profiles (matplotlib, no pyplot state, safe with the Agg backend).

Every function returns the :class:`matplotlib.figure.Figure` it drew on; ``path`` saves it
(PNG, PDF, SVG, ...).
"""
from __future__ import annotations

import math

import numpy as np

from .plot import _finish, _new_figure

__all__ = ["plot_data", "plot_waterfall", "plot_profiles"]


def _condition_keys(meas):
    key = meas["simulationConditionId"].astype(str)
    if "preequilibrationConditionId" in meas.columns:
        pre = meas["preequilibrationConditionId"].fillna("").astype(str)
        key = np.where(pre != "", pre + ":" + key, key)
    return np.asarray(key)


def plot_data(problem, result, *, path=None, title=None, dpi=110):
    """Measured (markers) and simulated (lines) values per observable, one colour per condition.

    ``result``: an :class:`~pbsens.problems.EvaluationResult` of ``problem`` (its ``simulations``).
    """
    from matplotlib import colormaps
    meas = problem.petab_problem.measurement_df
    sim = result.simulations
    obs = list(dict.fromkeys(meas["observableId"]))
    n = len(obs)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    fig, axes = _new_figure((4.6 * ncol, 3.4 * nrow + 0.8), dpi, nrow, ncol)
    key = _condition_keys(meas)
    conds = list(dict.fromkeys(key))
    colors = colormaps["tab10" if len(conds) <= 10 else "tab20"]
    t_all = meas["time"].to_numpy(float)
    y_meas, y_sim = meas["measurement"].to_numpy(float), sim["simulation"].to_numpy(float)
    for i, oid in enumerate(obs):
        ax = axes[i // ncol][i % ncol]
        for c_i, c in enumerate(conds):
            m = (meas["observableId"].to_numpy() == oid) & (key == c)
            if not m.any():
                continue
            t = t_all[m]
            finite = np.isfinite(t)       # steady-state measurements (time inf) drawn right of the rest
            t_plot = np.where(finite, t, np.nanmax(np.where(finite, t, np.nan)) * 1.1 if finite.any() else 1.0)
            order = np.argsort(t_plot, kind="stable")
            col = colors(c_i % colors.N)
            ax.plot(t_plot[order], y_meas[m][order], "o", ms=4, color=col, alpha=0.7)
            ax.plot(t_plot[order], y_sim[m][order], "-x", lw=1.4, ms=6, color=col, label=c)
        ax.set_title(oid, fontsize=10)
        ax.set_xlabel("time")
        ax.grid(alpha=0.3)
        if i == 0:
            ax.set_ylabel("measured (o) / simulated (x-)")
    for j in range(n, nrow * ncol):
        axes[j // ncol][j % ncol].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for a in axes.flat[1:]:
        for h, lab in zip(*a.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False,
               title="condition")
    fig.suptitle(title or f"{problem.model_id}: llh = {result.llh:.6g}", fontsize=11)
    return _finish(fig, path)


def _llh_of(fit):
    if hasattr(fit, "starts"):
        return np.array([s.llh for s in fit.starts], float)
    return np.sort(np.asarray(fit, float))[::-1]


def plot_waterfall(fits, *, path=None, best_llh=None, tol=0.5, title=None, figsize=(6.5, 4.2), dpi=110, ax=None):
    """Waterfall plot: each start's final ``-llh`` minus the best, starts sorted best first, log scale.

    Parameters
    ----------
    fits : FitResult, array of llh, or dict ``{label: FitResult or llh array}``
        Several fits (e.g. two tools on the same starts) share one axis.
    best_llh : float, optional
        The reference (default: the best over all fits).
    tol : float
        The convergence criterion drawn as a line (starts within ``tol`` of the best).
    """
    if not isinstance(fits, dict):
        fits = {"": fits}
    series = {k: _llh_of(v) for k, v in fits.items()}
    finite = [v[np.isfinite(v)] for v in series.values()]
    ref = best_llh if best_llh is not None else max(float(v.max()) for v in finite if v.size)
    if ax is None:
        fig, axes = _new_figure(figsize, dpi)
        ax = axes[0][0]
    else:
        fig = ax.figure
    floor = 1e-4
    for label, llh in series.items():
        d = np.where(np.isfinite(llh), ref - llh, np.nan)
        d = np.maximum(d, floor)
        n_conv = int(np.sum(np.isfinite(llh) & (llh >= ref - tol)))
        lab = f"{label}: " if label else ""
        ax.plot(np.arange(1, d.size + 1), d, "o-", ms=3, lw=1, label=f"{lab}{n_conv}/{d.size} within {tol:g}")
    ax.axhline(tol, color="0.4", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("start (sorted by final llh)")
    ax.set_ylabel(f"best llh - llh  (floor {floor:g})")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title(title or f"waterfall (best llh {ref:.6g})", fontsize=10)
    return _finish(fig, path)


def plot_profiles(profiles, *, path=None, dpi=110, ncol=3):
    """Likelihood-ratio profiles ``exp(llh - best)`` per parameter with the threshold of the level."""
    items = list(profiles.profiles.values())
    n = len(items)
    ncol = min(ncol, n)
    nrow = math.ceil(n / ncol)
    fig, axes = _new_figure((3.6 * ncol, 2.8 * nrow), dpi, nrow, ncol)
    cut = math.exp(-profiles.threshold)
    for i, p in enumerate(items):
        ax = axes[i // ncol][i % ncol]
        ratio = np.exp(np.asarray(p.llh) - profiles.best_llh)
        ax.plot(p.theta, ratio, "-o", ms=2.5, lw=1.2)
        ax.axhline(cut, color="tab:red", ls="--", lw=0.8)
        lo, hi = p.interval
        for v in (lo, hi):
            if math.isfinite(v):
                ax.axvline(v, color="0.5", lw=0.6, ls=":")
        ax.set_ylim(0, 1.05)
        ax.set_title(p.parameter, fontsize=9)
        ax.grid(alpha=0.3)
    for j in range(n, nrow * ncol):
        axes[j // ncol][j % ncol].set_visible(False)
    fig.suptitle(f"profile likelihood ratio, {100 * profiles.level:g} % threshold (red)", fontsize=10)
    return _finish(fig, path)
