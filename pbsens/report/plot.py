"""Figures of sensitivity results (matplotlib, no pyplot state, safe with the Agg backend).

Every function returns the :class:`matplotlib.figure.Figure` it drew on. Pass
``ax`` to draw into an existing Axes (the figure is then ``ax.figure``), or
``path`` to save the figure (PNG, PDF, SVG, ...; the pixel size of a PNG is
``figsize * dpi``). The figures mirror the paper's: sensitivity trajectories,
``kappa_bar`` over time with the intervals shaded where PBSR used the
exponential step (Figures 4-5), and ``E_k`` per step with markers on the
exponential steps (Figures 2-3).

The time-series figures (:func:`plot_kappa_bar`, :func:`plot_relative_error`)
share these keyword arguments: ``ax`` (matplotlib Axes, optional), ``path``
(str or path-like, optional), ``figsize`` ((float, float) inches), ``dpi``
(float), ``logx`` (bool: logarithmic time axis; output times <= 0 are left
out) and ``title`` (str, optional: replaces the default title).
"""
from __future__ import annotations

import os

import numpy as np
from matplotlib.figure import Figure

from .analysis import _check_result, _names, _state_indices, normalized_sensitivities, rank_parameters
from ..errors import PbsensError

__all__ = ["plot_sensitivities", "plot_kappa_bar", "plot_relative_error", "branch_at_times",
           "BRANCH_COLORS"]

#: Shading / marker colours of the exponential branches of PBSR (and of Exp steps).
BRANCH_COLORS = {"exp-stiff": "tab:red", "exp-equilibrium": "tab:green", "exp": "tab:purple",
                 "exp2": "tab:purple"}
_BRANCH_LABELS = {"exp-stiff": "exp step: too stiff", "exp-equilibrium": "exp step: equilibrium",
                  "exp": "exp step", "exp2": "exp2 step"}
_METHOD_LABELS = {"pbsr": "PBSR", "exp": "Exp", "pbs": "PBS", "exp2": "Exp2", "pbsr2": "PBSR2", "fs": "FS"}


# --------------------------------------------------------------------------- helpers
def _new_figure(figsize, dpi, nrows=1, ncols=1, **kw):
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _finish(fig, path):
    if path is not None:
        path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise PbsensError(f"'path': folder {parent!r} does not exist")
        fig.savefig(path, dpi=fig.dpi)
    return fig


def _label(r):
    return _METHOD_LABELS.get(r.method, r.method)


def _series(values, r, name):
    """``values`` as ``{label: (K,) array}`` (an array, or a mapping of label -> array)."""
    K = len(r.t)
    if isinstance(values, dict):
        items = list(values.items())
    else:
        items = [(_label(r), values)]
    if not items:
        raise PbsensError(f"{name!r} is empty")
    out = {}
    for label, v in items:
        try:
            a = np.asarray(v, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PbsensError(f"{name!r}: values for {label!r} are not numeric") from None
        if a.size != K:
            raise PbsensError(f"{name!r}: values for {label!r} have length {a.size}, but the result has "
                              f"{K} output times (r.t)")
        out[str(label)] = a
    return out


def _positive_for_log(a):
    """Mask values a log axis cannot show (<= 0 or non-finite): gaps, not silent clipping."""
    return np.ma.masked_where(~(np.isfinite(a) & (a > 0)), a)


def _time_series_axes(r, values, name, ax, figsize, dpi, logx):
    """Shared start of the per-time plots: the validated series of ``values``, the axes
    (a new figure when ``ax`` is None), the output times and which of them are shown."""
    _check_result(r)
    series = _series(values, r, name)
    if ax is None:
        ax = _new_figure(figsize, dpi)[1][0, 0]
    t = np.asarray(r.t)
    keep = t > 0 if logx else np.ones(t.size, dtype=bool)
    return series, ax, t, keep


def _log_time_axes(ax, logx, ylabel, title):
    """Log-scale values over time (log time too with ``logx``), labels, grid and title."""
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("t")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title, fontsize=10)


def branch_at_times(r):
    """The branch of the grid interval ending at each output time.

    Parameters
    ----------
    r : SensitivityResult

    Returns
    -------
    ndarray of str (K,)
        ``r.branch`` of the interval ``[grid[i-1], grid[i]]`` with ``grid[i] == r.t[k]``;
        ``""`` at the first grid point and for results without a grid (forward
        sensitivities).
    """
    _check_result(r)
    K = len(r.t)
    out = np.full(K, "", dtype=object)
    if r.grid is None or r.branch is None or len(r.branch) == 0:
        return out.astype(str)
    grid = np.asarray(r.grid)
    i = np.searchsorted(grid, r.t)
    ok = (i > 0) & (i < grid.size)
    ok[ok] &= grid[i[ok]] == np.asarray(r.t)[ok]
    out[ok] = np.asarray(r.branch)[i[ok] - 1]
    return out.astype(str)


def _branch_runs(r, kinds):
    """Merged ``(t_start, t_end, branch)`` runs of consecutive grid intervals whose branch is in ``kinds``."""
    if r.grid is None or r.branch is None:
        return []
    grid, br = np.asarray(r.grid), np.asarray(r.branch)
    runs = []
    i, n = 0, len(br)
    while i < n:
        j = i + 1
        while j < n and br[j] == br[i]:
            j += 1
        if br[i] in kinds:
            runs.append((grid[i], grid[j], str(br[i])))
        i = j
    return runs


def _shade(ax, r, kinds=("exp-stiff", "exp-equilibrium"), logx=False):
    """Shade the grid intervals of ``r`` whose branch is one of ``kinds``; return legend handles."""
    from matplotlib.patches import Patch

    seen = set()
    grid = np.asarray(r.grid) if r.grid is not None else np.array([])
    tmin = grid[grid > 0].min() if logx and np.any(grid > 0) else None
    for a, b, kind in _branch_runs(r, kinds):
        if tmin is not None:
            if b <= 0:
                continue
            a = max(a, tmin)
        ax.axvspan(a, b, color=BRANCH_COLORS.get(kind, "0.7"), alpha=0.15, lw=0)
        seen.add(kind)
    return [Patch(color=BRANCH_COLORS.get(k, "0.7"), alpha=0.3, label=f"{_label(r)}: {_BRANCH_LABELS.get(k, k)}")
            for k in kinds if k in seen]


# --------------------------------------------------------------------------- sensitivities
def plot_sensitivities(r, states=None, top=5, normalized=False, *, ax=None, path=None, figsize=None, dpi=100,
                       logx=False, p=None):
    """Sensitivity trajectories of the most influential parameters, one panel per state.

    Parameters
    ----------
    r : SensitivityResult
    states : str or int or list of them, optional
        States to show (names or indices). Default: all states if there are at
        most 6, else the 6 with the largest sensitivities (RMS over time and
        parameters, normalised if ``normalized``).
    top : int
        Parameters per panel: the ``top`` highest ranked for that state by
        :func:`pbsens.report.analysis.rank_parameters` (RMS over time).
    normalized : bool
        Plot ``(p_j / x_i) S_ij = d ln x_i / d ln p_j`` instead of ``S_ij``; times
        where ``x_i = 0`` are gaps (masked), not NaN.
    ax : matplotlib Axes or array of Axes, optional
        Draw here (one Axes per state) instead of a new figure.
    path : str or path-like, optional
        Save the figure there.
    figsize : (float, float), optional
        Inches; default ``(5 * ncols, 3 * nrows)`` for the panel grid.
    dpi : float
        Resolution of the new figure (a saved PNG has ``figsize * dpi`` pixels).
    logx : bool
        Logarithmic time axis (the first output time is dropped if it is <= 0).
    p : array_like, optional
        Parameter values for the normalisation (see :func:`pbsens.report.analysis.normalized_sensitivities`).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    PbsensError
        Unknown state, bad ``top``, or ``ax`` not matching the number of panels.
    """
    _check_result(r)
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise PbsensError(f"'top' must be a positive integer, got {top!r}")
    V = normalized_sensitivities(r, p=p) if normalized else np.ma.MaskedArray(np.asarray(r.S))
    nx = V.shape[1]
    if states is None:
        if nx <= 6:
            idx = np.arange(nx)
        else:
            cnt = np.maximum(V.count(axis=(0, 2)), 1)
            score = np.sqrt((V.filled(0.0) ** 2).sum(axis=(0, 2)) / cnt)
            idx = np.sort(np.argsort(-score, kind="stable")[:6])
    else:
        idx = _state_indices(r, states)
    n = idx.size
    own = ax is None
    if own:
        ncols = 1 if n == 1 else 2 if n <= 4 else 3
        nrows = -(-n // ncols)
        figsize = figsize or (5.0 * ncols, 3.0 * nrows)
        fig, axes = _new_figure(figsize, dpi, nrows, ncols)
        axes = axes.ravel()
        for a in axes[n:]:
            a.set_visible(False)
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if axes.size != n:
            raise PbsensError(f"'ax': {axes.size} Axes given for {n} state panel(s); pass one Axes per state")
        fig = axes[0].figure
    t = np.asarray(r.t)
    keep = t > 0 if logx else np.ones(t.size, dtype=bool)
    state_names = _names(r, "state_names", nx)
    pnames = _names(r, "param_names", V.shape[2])
    for a, i in zip(axes, idx):
        try:
            ranking = rank_parameters(r, state=int(i), normalized=normalized, p=p)
        except PbsensError:  # state zero everywhere: fall back to the raw ranking
            ranking = rank_parameters(r, state=int(i), normalized=False)
        for name, _score in ranking[:top]:
            j = pnames.index(name)
            a.plot(t[keep], V[keep, i, j], label=name, lw=1.2)
        a.axhline(0.0, color="0.6", lw=0.6, zorder=0)
        a.set_title(state_names[i], fontsize=10)
        a.set_ylabel(f"d ln {state_names[i]} / d ln p" if normalized else f"d{state_names[i]}/dp")
        if logx:
            a.set_xscale("log")
        a.legend(fontsize=7, loc="best", frameon=False)
        a.grid(alpha=0.3)
        a.set_xlabel("t")
    if own:
        kind = "normalised sensitivities" if normalized else "sensitivities"
        fig.suptitle(f"{r.model_name or 'model'}: {kind} ({_label(r)}), "
                     f"top {min(top, V.shape[2])} parameters per state", fontsize=11)
    return _finish(fig, path)


# --------------------------------------------------------------------------- kappa_bar
def plot_kappa_bar(r, kb, *, ax=None, path=None, figsize=(7.0, 4.0), dpi=100, shade=True, logx=False,
                   title=None):
    """``kappa_bar`` over time, shading the intervals where PBSR used the exponential step.

    Like the paper's Figures 4-5: grid intervals of ``r`` whose branch is
    ``"exp-stiff"`` (too stiff to refine) or ``"exp-equilibrium"`` (constant
    Jacobians) are shaded in two colours.

    Parameters
    ----------
    r : SensitivityResult
        The result whose branches are shaded (normally the PBSR one); its ``t``
        are the times of ``kb``.
    kb : array_like (K,) or dict of str -> array_like (K,)
        ``kappa_bar`` at ``r.t`` (from :func:`pbsens.kappa_bar`); a dict draws
        several methods (e.g. ``{"PBSR": kb1, "Exp": kb2, "FS": kb3}``), all at ``r.t``.
        Values <= 0 (e.g. at ``t0``) cannot be shown on the log axis and are gaps.
    shade : bool
        Shade the exponential branches of ``r`` (default True).
    ax, path, figsize, dpi, logx, title
        As for every time-series figure (see the module docstring).

    Returns
    -------
    matplotlib.figure.Figure
    """
    series, ax, t, keep = _time_series_axes(r, kb, "kb", ax, figsize, dpi, logx)
    fig = ax.figure
    handles = []
    for label, v in series.items():
        (h,) = ax.plot(t[keep], _positive_for_log(v[keep]), lw=1.2, label=label)
        handles.append(h)
    if shade:
        handles += _shade(ax, r, logx=logx)
    _log_time_axes(ax, logx, r"$\bar\kappa(t)$",
                   title if title is not None else f"{r.model_name or 'model'}: perturbation error")
    ax.legend(handles=handles, fontsize=8, loc="best")
    return _finish(fig, path)


# --------------------------------------------------------------------------- E_k
def plot_relative_error(r, E, *, ax=None, path=None, figsize=(7.0, 4.0), dpi=100, markers=True, logx=False,
                        title=None):
    """Relative error ``E_k`` per step (log scale), with markers where the exponential step ran.

    Like the paper's Figures 2-3. ``E`` is given at the output times ``r.t``; the
    branch at ``t_k`` is the one of the grid interval ending there
    (:func:`branch_at_times`), and a marker is drawn on the (first) curve when
    that interval took an exponential step (``"exp-stiff"``,
    ``"exp-equilibrium"``, or every step of Exp).

    Parameters
    ----------
    r : SensitivityResult
        The result whose branches are marked (normally PBSR); its ``t`` are the
        times of ``E``.
    E : array_like (K,) or dict of str -> array_like (K,)
        ``E_k`` from :func:`pbsens.relative_error`; a dict draws several methods,
        all at ``r.t``; markers go on the first entry. Values <= 0 are gaps.
    markers : bool
        Mark the exponential steps (default True).
    ax, path, figsize, dpi, logx, title
        As for every time-series figure (see the module docstring).

    Returns
    -------
    matplotlib.figure.Figure
    """
    series, ax, t, keep = _time_series_axes(r, E, "E", ax, figsize, dpi, logx)
    fig = ax.figure
    first = None
    for label, v in series.items():
        (h,) = ax.plot(t[keep], _positive_for_log(v[keep]), lw=1.0, label=label)
        if first is None:
            first = v
    if markers:
        br = branch_at_times(r)
        v = first
        for kind in ("exp-stiff", "exp-equilibrium", "exp", "exp2"):
            sel = keep & (br == kind) & np.isfinite(v) & (v > 0)
            if np.any(sel):
                ax.plot(t[sel], v[sel], ls="none", marker="o", ms=3.5, mfc="none",
                        color=BRANCH_COLORS[kind], label=f"{_label(r)}: {_BRANCH_LABELS[kind]}")
    _log_time_axes(ax, logx, r"$E_k$",
                   title if title is not None else f"{r.model_name or 'model'}: relative error against FS")
    ax.legend(fontsize=8, loc="best")
    return _finish(fig, path)
