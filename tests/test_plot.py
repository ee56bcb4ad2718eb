"""Plots (pbsens.report.plot) and analysis helpers (pbsens.report.analysis) on hand-built results.

No model is compiled here: every result is built by hand so that the expected
answer (ranking, rank deficiency, shaded intervals, markers) is known exactly.
"""
import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from pbsens.report.analysis import Identifiability, identifiability, normalized_sensitivities, rank_parameters
from pbsens.errors import PbsensError  # noqa: E402
from pbsens.report.plot import branch_at_times, plot_kappa_bar, plot_relative_error, plot_sensitivities
from pbsens.sensitivity.result import SensitivityResult  # noqa: E402

#: branch of each of the 10 grid intervals of the fake PBSR run
BRANCHES = ["pbs", "pbs", "exp-stiff", "exp-stiff", "pbs", "exp-equilibrium", "exp-equilibrium",
            "exp-equilibrium", "pbs", "exp-stiff"]


def make_result(t_eval=None, S=None, x=None, p=None, method="pbsr"):
    """A 3-state, 3-parameter result on the grid 0, 1, ..., 10 with known branches."""
    grid = np.arange(11.0)
    t = grid if t_eval is None else np.asarray(t_eval, dtype=float)
    K = t.size
    if x is None:
        x = np.column_stack([1.0 + t, 2.0 + np.sin(t), np.where(t < 3, 0.0, t)])  # x3 = 0 for t < 3
    if S is None:
        S = np.zeros((K, 3, 3))
        S[:, :, 0] = 0.5 * t[:, None]
        S[:, :, 1] = -2.0 * t[:, None]
        S[:, :, 2] = 0.1 * t[:, None]
    p = np.array([1.0, 0.01, 100.0]) if p is None else np.asarray(p, dtype=float)
    return SensitivityResult(
        t=t, x=np.asarray(x, dtype=float), S=np.asarray(S, dtype=float), method=method, p=p,
        x0=np.asarray(x, dtype=float)[0], grid=grid, branch=np.array(BRANCHES), n_int=np.ones(10, dtype=int),
        model_name="fake", state_names=["A", "B", "C"], param_names=["ka", "kb", "kc"])


def read_png(path, width_in, height_in, dpi):
    assert path.exists() and path.stat().st_size > 1000
    img = mpimg.imread(str(path))
    assert img.shape[:2] == (round(height_in * dpi), round(width_in * dpi))
    assert float(np.std(img[..., :3])) > 0.01  # something was drawn
    return img


# ------------------------------------------------------------------ normalised sensitivities, ranking
def test_normalized_sensitivities_mask_zero_states():
    r = make_result()
    N = normalized_sensitivities(r)
    assert isinstance(N, np.ma.MaskedArray) and N.shape == r.S.shape
    assert np.all(np.isfinite(N.data))                  # never NaN, even where masked
    zero = r.x[:, 2] == 0
    assert zero.sum() == 3
    assert np.all(N.mask[zero, 2, :]) and not np.any(N.mask[~zero, 2, :])
    assert not np.any(N.mask[:, :2, :])
    k = 5
    assert N[k, 1, 2] == pytest.approx(r.p[2] / r.x[k, 1] * r.S[k, 1, 2], rel=1e-14)


def test_normalized_needs_matching_p():
    r = make_result()
    with pytest.raises(PbsensError, match="'p'"):
        normalized_sensitivities(r, p=[1.0, 2.0])
    r.p = np.array([1.0, 2.0, 3.0, 4.0])              # e.g. a forward result for a subset
    with pytest.raises(PbsensError, match="pass 'p'"):
        normalized_sensitivities(r)


def test_rank_parameters_known_order():
    r = make_result()
    # raw |S| per column: 0.5 t, 2 t, 0.1 t -> kb, ka, kc
    raw = rank_parameters(r, normalized=False)
    assert [n for n, _ in raw] == ["kb", "ka", "kc"]
    K = len(r.t)
    assert raw[0][1] == pytest.approx(2.0 * np.sqrt(np.mean(r.t ** 2)), rel=1e-12)
    # normalised by p = (1, 0.01, 100): 0.5, 0.02, 10 (times t / x) -> kc, ka, kb
    norm = rank_parameters(r, state="A")
    assert [n for n, _ in norm] == ["kc", "ka", "kb"]
    expect = np.sqrt(np.mean((100 * 0.1 * r.t / r.x[:, 0]) ** 2))
    assert norm[0][1] == pytest.approx(expect, rel=1e-12)
    # the masked times of state C are left out of its mean
    c = dict(rank_parameters(r, state="C"))
    keep = r.x[:, 2] != 0
    assert c["ka"] == pytest.approx(np.sqrt(np.mean((0.5 * r.t[keep] / r.x[keep, 2]) ** 2)), rel=1e-12)
    assert K == 11


def test_rank_parameters_errors():
    r = make_result()
    with pytest.raises(PbsensError, match="'state'.*'Z'"):
        rank_parameters(r, state="Z")
    x = r.x.copy()
    x[:, 1] = 0.0
    r0 = make_result(x=x)
    with pytest.raises(PbsensError, match="zero at every output time"):
        rank_parameters(r0, state="B")
    assert [n for n, _ in rank_parameters(r0, state="B", normalized=False)] == ["kb", "ka", "kc"]


# ------------------------------------------------------------------ identifiability
def test_identifiability_duplicate_columns():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(20, 3, 3))
    S[:, :, 2] = S[:, :, 0]                              # kc acts exactly like ka
    r = make_result(t_eval=np.arange(20.0) / 2, S=S, x=np.ones((20, 3)))
    J = S.reshape(-1, 3)
    res = identifiability(J.T @ J, param_names=["ka", "kb", "kc"])
    assert isinstance(res, Identifiability)
    assert res.rank == 2 and not res.identifiable
    assert res.condition_number > 1e12
    assert [(a, b) for a, b, _ in res.parallel_pairs] == [("ka", "kc")]
    assert res.parallel_pairs[0][2] == pytest.approx(1.0, abs=1e-12)
    lam, vec = res.weak_directions[0]
    v = np.array([vec["ka"], vec["kb"], vec["kc"]])
    assert abs(v @ np.array([1, 0, -1]) / np.sqrt(2)) == pytest.approx(1.0, abs=1e-8)
    text = str(res)
    assert "rank 2/3" in text and "ka ~ kc" in text
    # from the result itself (Fisher information with sigma), same conclusions
    res2 = identifiability(r, sigma=0.5)
    assert res2.rank == 2 and res2.param_names == ["ka", "kb", "kc"]
    assert np.allclose(res2.fisher, 4 * J.T @ J)
    assert [(a, b) for a, b, _ in res2.parallel_pairs] == [("ka", "kc")]


def test_identifiability_full_rank_and_antiparallel():
    # orthogonal columns with norms 1, 2, 4: F = diag(1, 4, 16)
    F = np.diag([1.0, 4.0, 16.0])
    res = identifiability(F)
    assert res.rank == 3 and res.identifiable
    assert res.condition_number == pytest.approx(16.0)
    assert res.parallel_pairs == [] and res.insensitive == []
    assert res.weak_directions[0][0] == pytest.approx(1.0)
    assert abs(res.weak_directions[0][1]["p0"]) == pytest.approx(1.0)
    # anti-parallel columns are confounded too; a zero column is reported as insensitive
    J = np.array([[1.0, -2.0, 0.0], [2.0, -4.001, 0.0], [0.5, -1.0, 0.0]])
    res = identifiability(J.T @ J, param_names=["a", "b", "c"])
    assert [(a, b) for a, b, _ in res.parallel_pairs] == [("a", "b")]
    assert res.parallel_pairs[0][2] < -0.99
    assert res.insensitive == ["c"] and res.rank == 2
    assert res.condition_number == float("inf")


def test_identifiability_rejects_bad_matrices():
    with pytest.raises(PbsensError, match="'F'.*square"):
        identifiability(np.ones((2, 3)))
    with pytest.raises(PbsensError, match="symmetric"):
        identifiability(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(PbsensError, match="NaN"):
        identifiability(np.array([[np.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(PbsensError, match="semi-definite"):
        identifiability(np.array([[1.0, 0.0], [0.0, -1.0]]))


# ------------------------------------------------------------------ plots
def xspan(patch):
    """Data x-range of an axvspan patch (a Rectangle in new matplotlib, a Polygon in old)."""
    if hasattr(patch, "get_width"):
        a, b = patch.get_x(), patch.get_x() + patch.get_width()
    else:
        xy = np.asarray(patch.get_xy())
        a, b = xy[:, 0].min(), xy[:, 0].max()
    return round(float(a), 9), round(float(b), 9)


def test_branch_at_times_maps_interval_ending_at_t():
    r = make_result()
    b = branch_at_times(r)
    assert b[0] == "" and list(b[1:]) == BRANCHES
    r2 = make_result(t_eval=[0.0, 3.0, 6.0, 10.0])          # output at some grid points only
    assert list(branch_at_times(r2)) == ["", BRANCHES[2], BRANCHES[5], BRANCHES[9]]


def test_plot_sensitivities_png(tmp_path):
    r = make_result()
    path = tmp_path / "s.png"
    fig = plot_sensitivities(r, top=2, path=path, figsize=(6, 4), dpi=50)
    assert isinstance(fig, Figure)
    read_png(path, 6, 4, 50)
    visible = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in visible] == ["A", "B", "C"]
    assert [ln.get_label() for ln in visible[0].get_lines() if not ln.get_label().startswith("_")] == ["kb", "ka"]
    # normalised, one chosen state, into a given Axes; the masked zeros of C are gaps, not NaN
    fig2 = Figure(figsize=(5, 3), dpi=40)
    ax = fig2.add_subplot()
    out = plot_sensitivities(r, states="C", top=3, normalized=True, ax=ax, path=tmp_path / "n.png")
    assert out is fig2
    read_png(tmp_path / "n.png", 5, 3, 40)
    y = ax.get_lines()[0].get_ydata()
    assert np.ma.isMaskedArray(y) and np.ma.count_masked(y) == 3
    with pytest.raises(PbsensError, match="'ax'"):
        plot_sensitivities(r, ax=ax)                        # 3 panels, one Axes
    with pytest.raises(PbsensError, match="'top'"):
        plot_sensitivities(r, top=0)


def test_plot_kappa_bar_shades_exp_intervals(tmp_path):
    r = make_result()
    kb = {"PBSR": 1e-6 * (1 + r.t), "Exp": 1e-4 * (1 + r.t)}
    kb["PBSR"][0] = 0.0                                     # t0: not drawable on a log axis, a gap
    path = tmp_path / "kb.png"
    fig = plot_kappa_bar(r, kb, path=path, figsize=(7, 4), dpi=60)
    read_png(path, 7, 4, 60)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    spans = sorted(xspan(pt) for pt in ax.patches)
    # exp-stiff [2, 4] and [9, 10], exp-equilibrium [5, 8]: merged runs of intervals
    assert spans == [(2.0, 4.0), (5.0, 8.0), (9.0, 10.0)]
    colors = {tuple(np.round(pt.get_facecolor()[:3], 3)) for pt in ax.patches}
    assert len(colors) == 2                                  # stiff and equilibrium differ
    # log time axis: t = 0 left out, shading kept
    fig = plot_kappa_bar(r, kb, logx=True)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and min(ax.get_lines()[0].get_xdata()) == 1.0 and len(ax.patches) == 3
    with pytest.raises(PbsensError, match="'kb'.*length 3"):
        plot_kappa_bar(r, np.ones(3))


def test_plot_relative_error_marks_exp_steps(tmp_path):
    r = make_result()
    E = 1e-5 * (1 + r.t)
    path = tmp_path / "E.png"
    fig = plot_relative_error(r, {"PBSR": E, "Exp": 10 * E}, path=path, figsize=(8, 3), dpi=50)
    read_png(path, 8, 3, 50)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    stiff = lines["PBSR: exp step: too stiff"]
    eq = lines["PBSR: exp step: equilibrium"]
    # E at t_k carries the branch of the interval ending at t_k
    assert list(stiff.get_xdata()) == [3.0, 4.0, 10.0]
    assert list(eq.get_xdata()) == [6.0, 7.0, 8.0]
    assert np.allclose(stiff.get_ydata(), E[[3, 4, 10]])
    # an Exp result: every step is marked
    re = make_result(method="exp")
    re.branch = np.array(["exp"] * 10)
    fig = plot_relative_error(re, E, markers=True)
    marked = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "Exp: exp step"]
    assert len(marked) == 1 and len(marked[0].get_xdata()) == 10
