"""Write ``REPORT.md``: the paper's claims next to our numbers, from the experiments' JSON.

For every figure/table of the paper's Section 8: the claim, our number, and
whether it holds, in plain words, with the PNGs embedded. Verdicts use fixed
thresholds stated in the text (never tuned to agree).

Default: reads ``experiments/results/`` and writes ``experiments/REPORT.md``. For
any other results folder (e.g. ``results/quick/``) the report goes into that
folder, so a quick run never overwrites the committed report.

Usage: ``python3 experiments/make_report.py [--results DIR] [--out FILE]``.
"""
from __future__ import annotations

import datetime
import json
import math
import os
from pathlib import Path

EXPERIMENTS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = EXPERIMENTS_DIR / "results"
DEFAULT_REPORT = EXPERIMENTS_DIR / "REPORT.md"
ORDER = ["fig2_pka_error", "fig3_camkii_error", "fig4_pka_kappa", "fig5_camkii_kappa", "fig6_random_linear",
         "fig7_8_chua", "table2_runtime"]
PAPER_FS_B, PAPER_PBS_B, PAPER_EXP_B = 4.2, 3.7, 2.1
LABELS = {"pbsr": "PBSR", "exp": "Exp", "pbs": "PBS", "pbsr2": "PBSR2", "exp2": "Exp2", "fs": "FS"}


# --------------------------------------------------------------------------- formatting
def g(x, digits=2):
    """A number in short form: ``1.3e-03``, ``0.034``, ``12``; ``n/a`` for None/NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    x = float(x)
    if x == 0:
        return "0"
    if 1e-2 <= abs(x) < 1e4:
        return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def s(x):
    """Seconds."""
    if x is None:
        return "n/a"
    return f"{x:.3f} s" if x >= 0.01 else f"{x * 1000:.2f} ms"


def times(x):
    """A ratio as ``12x``."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x < 0.1:
        return f"{x:.2g}x"
    return f"{x:.1f}x" if x < 100 else f"{x:.0f}x"


def orders(x):
    """log10 of a ratio, in words."""
    if x is None or x <= 0 or not math.isfinite(x):
        return "n/a"
    return f"{math.log10(x):.1f} orders of magnitude"


def verdict(ok):
    return {True: "**holds**", False: "**does not hold**", None: "**partly holds**"}[ok]


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


class Report:
    def __init__(self, results_dir, report_path):
        self.dir = Path(results_dir)
        self.path = Path(report_path)
        self.lines = []
        self.summary = []   # rows of the summary table
        self.data = {}
        for name in ORDER:
            f = self.dir / f"{name}.json"
            if f.is_file():
                with open(f, encoding="utf-8") as fh:
                    self.data[name] = json.load(fh)

    def add(self, *text):
        self.lines.extend(text)

    def png(self, name, caption):
        f = self.dir / name
        if f.is_file():
            rel = os.path.relpath(f, self.path.parent).replace(os.sep, "/")
            self.add(f"![{caption}]({rel})", "")

    def missing(self, name, title):
        self.add(f"## {title}", "", f"Not run: no `{name}.json` in `{self.dir}`.", "")
        self.summary.append([title, "-", "not run", "-"])


# --------------------------------------------------------------------------- sections
def _error_section(rep, name, title, model):
    d = rep.data.get(name)
    if d is None:
        return rep.missing(name, title)
    E, ratio = d["E"], d["exp_over_pbsr"]
    r_pbs = ratio["median_ratio_on_pbs_intervals"]
    ok = None if r_pbs is None else (True if r_pbs >= 10 else (None if r_pbs >= 3 else False))
    bc = d["branch_counts"]
    rep.add(f"## {title}", "",
            f"**Paper.** {d['paper']['claim']}.", "",
            f"**Ours.** {model}, t in {d['t_span']}: {d['grid_points']} grid points of the LSODA state solve "
            f"(rtol 1e-5, atol 1e-6); PBSR took the PBS formula on {bc.get('pbs', 0)} intervals, the exponential "
            f"step on {bc.get('exp-stiff', 0)} 'too stiff' and {bc.get('exp-equilibrium', 0)} 'equilibrium' "
            f"intervals. Reference: FS (BDF, rtol 1e-8, atol 1e-10) at the same points; its own error "
            f"(Radau vs BDF) has median {g(E['reference_floor']['median'])}, far below every method's E_k.", "")
    rows = []
    for meth in ("pbsr", "exp", "pbsr2", "exp2"):
        if meth in E:
            b = E[meth]["median_by_branch"]
            c = d["cost_s"][meth]
            rows.append([LABELS[meth], g(E[meth]["median"]), g(b.get("pbs")), g(b.get("exp-stiff")),
                         g(E[meth]["max"]), g(E[meth]["final"]), s(c["total"]["median"]),
                         s(c["sensitivities"]["median"])])
    rep.add(table(["method", "median E_k", "median E_k at PBS intervals", "median E_k at exp-stiff intervals",
                   "max E_k", "final E_k", "runtime incl. state solve (median)", "sensitivity pass (median)"], rows),
            "")
    rep.add(f"On the points reached by a PBS interval, Exp's median E_k is {times(r_pbs)} PBSR's "
            f"({orders(r_pbs)}; pointwise median ratio {times(ratio['median_pointwise_ratio_on_pbs_intervals'])}); "
            f"over all points {times(ratio['median_ratio_all'])}.", "")
    if ok is True:
        rep.add(f"Verdict: the claim {verdict(True)} on the PBS intervals (threshold: a median ratio of at least "
                f"10x, i.e. one order of magnitude).")
    elif ok is None:
        rep.add(f"Verdict: the claim {verdict(None)}: PBSR is more accurate, but by less than one order of "
                f"magnitude on the PBS intervals (threshold 10x).")
    else:
        rep.add(f"Verdict: the claim {verdict(False)}: the median ratio on PBS intervals is below 3x.")
    if r_pbs is not None and ratio["median_ratio_all"] < r_pbs / 3:
        rep.add(" Over the whole span the gap is smaller: E_k is a global error, and every exponential step PBSR "
                "takes on a 'too stiff' interval adds Exp's first-order error, which the later PBS intervals "
                "carry along (the jumps of the PBSR curve at the red crosses).")
    if E["pbsr"]["final"] > 10 * E["pbsr"]["median"]:
        rep.add(f" Near the end of the span both PBSR and Exp reach E_k = {g(E['pbsr']['final'])}: the solver "
                f"takes long steps there and PBSR uses the exponential step on all of them, whose error is first "
                f"order in h with the Jacobian frozen at the left end; the exponential-midpoint variants stay at "
                f"{g(E['exp2']['final'] if 'exp2' in E else None)}.")
    rep.add("", "")
    rep.png(f"{name}.png", title)
    rep.summary.append([title, "PBSR 1-2 orders more accurate than Exp where PBS ran",
                        f"Exp/PBSR median E_k on PBS intervals {times(r_pbs)} (all points {times(ratio['median_ratio_all'])})",
                        verdict(ok)])


def _kappa_section(rep, name, title, model, d=None, summary=True):
    d = d if d is not None else rep.data.get(name)
    if d is None:
        return rep.missing(name, title)
    kb = d["kappa_bar"]
    base = [m for m in ("pbsr", "exp", "fs") if m in kb]
    spread = d["late_spread_max_over_min"]
    ok = spread is not None and spread <= 10
    lw = d["late_window"]
    rep.add(f"## {title}", "",
            f"**Paper.** {d['paper']['claim'] if 'paper' in d else ''}.", "",
            f"**Ours.** {model}, t in {d['t_span']}, N = {d['n_samples']} perturbations (seed {d['seed']}, the same "
            f"for every method), perturbed states solved by LSODA at rtol 1e-12, atol 1e-14. FS here is BDF at the "
            f"state solver's tolerances (rtol 1e-5, atol 1e-6), output at the state grid. "
            f"PBSR used the exponential step on {g(100 * (d['fraction_of_time_pbsr_used_exp'] or 0), 3)} % of "
            f"the length of the time span (intervals per branch: {d['branch_counts']}).", "")
    rows = [[LABELS[m], g(kb[m]["median"]), g(kb[m]["median_transient"]), g(kb[m]["median_late"]), g(kb[m]["max"])]
            for m in kb]
    rep.add(table(["method", "median kappa_bar", f"median, t < {g(lw[0])}", f"median, t >= {g(lw[0])} (late)",
                   "max"], rows), "")
    late = {m: kb[m]["median_late"] for m in base}
    lo = min(late, key=late.get)
    hi = max(late, key=late.get)
    if ok:
        rep.add(f"Verdict: the claim {verdict(True)}: in the late window (t >= {g(lw[0])}) the medians of "
                f"{', '.join(LABELS[m] for m in base)} are within {times(spread)} of each other (threshold: one "
                f"order of magnitude).")
    else:
        rep.add(f"Verdict: the claim {verdict(False)} here: in the late window (t >= {g(lw[0])}) the medians "
                f"differ by {times(spread)} ({LABELS[hi]} {g(late[hi])} vs {LABELS[lo]} {g(late[lo])}; threshold "
                f"for 'similar': one order of magnitude).")
        if lo == "fs" and "pbsr" in late and "exp" in late and late["pbsr"] > 0 \
                and 0.5 < late["exp"] / late["pbsr"] < 2:
            extra = ""
            if "exp2" in kb:
                e2 = kb["exp2"]["median_late"]
                extra = (f" The exponential-midpoint step (Exp2, second order, not in the paper) on the same grid "
                         f"gets {g(e2)}, {times(late['exp'] / e2)} lower than Exp: the step's order explains that "
                         f"part of the gap; Exp2 is still {times(e2 / late['fs'])} above FS, the price of "
                         f"approximating the Jacobians by one matrix over each of the state solver's long steps.")
            rep.add(f" PBSR and Exp agree with each other (PBSR uses the exponential step almost everywhere "
                    f"late), but FS at the same tolerances is more accurate by {times(late['pbsr'] / late['fs'])}: "
                    f"the exponential step freezes the Jacobians at the left end of each interval, a first-order "
                    f"error, and near equilibrium the state solver's steps are long (the Jacobians still drift)."
                    f"{extra} Our FS (scipy BDF with error control on the sensitivities) may also be more "
                    f"accurate than the paper's CVODES run, whose sensitivity error control we do not know.")
    rep.add("", "")
    rep.png(f"{name}.png", title)
    if summary:
        rep.summary.append([title, "after the transient PBSR, Exp, FS have similar kappa_bar",
                            f"late medians: " + ", ".join(f"{LABELS[m]} {g(late[m])}" for m in base),
                            verdict(ok)])


def _fig6(rep):
    name, title = "fig6_random_linear", "Figure 6: runtime against dimension (random linear system)"
    d = rep.data.get(name)
    if d is None:
        return rep.missing(name, title)
    f = d["fits"]
    rep.add(f"## {title}", "", f"**Paper.** {d['paper']['claim']}.", "",
            f"**Ours.** n = {d['ns'][0]}, {d['ns'][1]}, ..., {d['ns'][-1]}; {d['draws']} draws per n (seeds "
            f"0..{d['draws'] - 1}); t in [0, 10]; each run includes its state solve (LSODA, rtol 1e-5, atol 1e-6); "
            f"FS is BDF at the same tolerances. PBS: {_pbs_draws_text(d)}. With the refinement "
            f"n_int = ceil(10 h ||A||) and ||A|| ~ n^2/4 for this system, PBS does ~10 T ||A|| sub-steps with "
            f"n x n products, i.e. ~n^5 work; because the Jacobians are constant, our march reuses each "
            f"sub-step's step matrices (one product per sub-step instead of the three of (4.6), the same result "
            f"bit for bit), which makes PBS about 3x cheaper than a literal implementation. Fits use the medians "
            f"over the draws.", "")
    same = all((f[m]["pbs_range_medians"] or {}).get("n_range") == (f[m]["all_n_medians"] or {}).get("n_range")
               for m in ("fs", "pbs", "exp"))
    rows = []
    for m in ("fs", "pbs", "exp"):
        a, c, big = f[m]["all_n_medians"], f[m]["pbs_range_medians"], f[m].get("n_ge_50_medians")
        row = [LABELS[m], g(f[m]["paper_b"]),
               f"{g(a['b'], 3)} (n {a['n_range'][0]}-{a['n_range'][1]})" if a else "n/a"]
        if not same:
            row.append(f"{g(c['b'], 3)} (n {c['n_range'][0]}-{c['n_range'][1]})" if c else "n/a")
        row += [f"{g(big['b'], 3)}" if big else "n/a",
                f"{g(f[m]['all_n_means']['b'], 3)}" if f[m]["all_n_means"] else "n/a"]
        rows.append(row)
    header = ["method", "paper b", "our b (medians)"] + ([] if same else ["our b on PBS's n range"]) + \
        ["our b, n >= 50 (medians)", "our b (means)"]
    rep.add(table(header, rows), "")
    pn = d["per_n"]
    ns = sorted(int(n) for n in pn["fs"])
    n0, n1 = ns[0], ns[-1]
    r0 = pn["fs"][str(n0)]["median_s"] / pn["exp"][str(n0)]["median_s"]
    r1 = pn["fs"][str(n1)]["median_s"] / pn["exp"][str(n1)]["median_s"]
    pbs_ns = sorted(int(n) for n in pn["pbs"])
    rp0 = pn["fs"][str(pbs_ns[0])]["median_s"] / pn["pbs"][str(pbs_ns[0])]["median_s"] if pbs_ns else None
    rp1 = pn["fs"][str(pbs_ns[-1])]["median_s"] / pn["pbs"][str(pbs_ns[-1])]["median_s"] if pbs_ns else None
    grows = r1 > r0
    rep.add(f"FS/Exp runtime ratio: {times(r0)} at n = {n0}, {times(r1)} at n = {n1}"
            + (f"; FS/PBS: {times(rp0)} at n = {pbs_ns[0]}, {times(rp1)} at n = {pbs_ns[-1]}." if pbs_ns else "."),
            "")
    bf, bp, be = (f[m]["all_n_medians"]["b"] if f[m]["all_n_medians"] else float("nan") for m in ("fs", "pbs", "exp"))
    rep.add(f"Verdict: Exp's advantage over FS growing with n {verdict(grows)} "
            f"({'the ratio rises' if grows else 'the ratio does not rise'} from {times(r0)} to {times(r1)}). "
            f"Exponents over the paper's range of n: FS {g(bf, 3)}, PBS {g(bp, 3)}, Exp {g(be, 3)} against 4.2, "
            f"3.7, 2.1: " + "; ".join(
                f"{LABELS[m]}'s {'is close to' if abs(b - pb) <= 0.5 else ('is well below' if b < pb else 'is well above')}"
                f" the paper's" for m, b, pb in (("fs", bf, PAPER_FS_B), ("pbs", bp, PAPER_PBS_B), ("exp", be, PAPER_EXP_B)))
            + " (close: within 0.5).")
    why = [" Why: (i) at small n every method is dominated by fixed per-call costs (Python, the state solve, "
           "scipy's step control), so exponents fitted from n = 5 on are effective, not asymptotic exponents; the "
           "n >= 50 column is closer to the asymptotics (Exp: one n x n exponential with its phi function per step, ~n^3 at a "
           "roughly constant number of steps; FS: the right-hand side A S costs n^3 per evaluation and each "
           "Newton solve has n + 1 right-hand sides)."]
    big_p = f["pbs"].get("n_ge_50_medians")
    if bf < PAPER_FS_B:
        why.append(" (ii) Our FS factors one n x n matrix per Newton update (the block-diagonal Newton matrix of "
                   "METHOD.md section 6), never the n(n+1) x n(n+1) one, and evaluates A S with compiled code; "
                   "we cannot tell what dominated the paper's FS cost, so we do not explain their 4.2.")
    if big_p and big_p["b"] > PAPER_PBS_B:
        why.append(f" (iii) PBS's exponent at n >= 50 ({g(big_p['b'], 3)}) is above the paper's {PAPER_PBS_B}: its "
                   "refinement count grows like ||A|| ~ n^2 on this system (median sub-steps per run: "
                   + ", ".join(f"n = {n}: {g(pn['pbs'][str(n)]['median_work'], 3)}" for n in pbs_ns[::max(1, len(pbs_ns) // 4)])
                   + "), times n^3 per sub-step, i.e. ~n^5 asymptotically; over n = 5..100 fixed costs pull the "
                   "fit down.")
    rep.add(*why, "")
    rep.png(f"{name}.png", title)
    rep.summary.append([title, "b = 4.2 (FS), 3.7 (PBS), 2.1 (Exp); advantage grows with n",
                        f"b = {g(bf, 3)} (FS), {g(bp, 3)} (PBS, n <= {d['pbs_max_n']}), {g(be, 3)} (Exp); FS/Exp "
                        f"{times(r0)} -> {times(r1)}",
                        "; ".join(f"{LABELS[m]} b {'close' if abs(b - pb) <= 0.5 else ('lower' if b < pb else 'higher')}"
                                  for m, b, pb in (("fs", bf, PAPER_FS_B), ("pbs", bp, PAPER_PBS_B),
                                                   ("exp", be, PAPER_EXP_B)))
                        + f"; growth {verdict(grows)}"])


def _pbs_draws_text(d):
    """``10 draws for n <= 40, 3 for n = 45..70, 1 for n = 75..100`` from the JSON."""
    dr = d.get("pbs_draws") or {}
    if not dr:
        return f"PBS up to n = {d.get('pbs_max_n')}"
    if len(set(dr.values())) == 1 and int(max(dr, key=int)) == max(d["ns"]):
        k = next(iter(dr.values()))
        return f"all {k} draws at every n"
    runs, prev = [], None
    for n, k in sorted(((int(n), k) for n, k in dr.items())):
        if prev is not None and prev[2] == k:
            prev[1] = n
        else:
            prev = [n, n, k]
            runs.append(prev)
    return ", ".join(f"{k} draw{'s' if k != 1 else ''} for n = {a}..{b}" if a != b else f"{k} for n = {a}"
                     for a, b, k in runs)


def _chua(rep):
    name, title = "fig7_8_chua", "Figures 7 and 8: Chua's circuit"
    d = rep.data.get(name)
    if d is None:
        return rep.missing(name, title)
    err, kap, h = d["error"], d["kappa"], d["headline"]
    E = err["E"]
    re, rk, rf = h["E_median_exp_over_pbsr"], h["kappa_median_exp_over_pbsr"], h["kappa_median_pbsr_over_fs"]
    ok_acc = re >= 10 ** 1.5 and rk >= 10 ** 1.5
    ok_fs = rf <= 3
    rep.add(f"## {title}", "", f"**Paper.** {d['paper']['claim']}.", "",
            f"**Ours (Figure 7, E_k).** {err['grid_points']} grid points; PBSR ran the PBS formula on every "
            f"interval ({err['branch_counts']}), so PBSR2 = PBSR here. Reference error (Radau vs BDF) "
            f"{g(E['reference_floor']['median'])}.", "")
    rows = [[LABELS[m], g(E[m]["median"]), g(E[m]["max"]), s(err["cost_s"][m]["total"]["median"]),
             s(err["cost_s"][m]["sensitivities"]["median"])] for m in ("pbsr", "exp", "pbsr2", "exp2") if m in E]
    rep.add(table(["method", "median E_k", "max E_k", "runtime incl. state solve", "sensitivity pass"], rows), "")
    rep.png("fig7_chua_error.png", "Figure 7: Chua, E_k")
    kb = kap["kappa_bar"]
    rep.add(f"**Ours (Figure 8, kappa_bar, N = {kap['n_samples']}).**", "")
    rows = [[LABELS[m], g(kb[m]["median"]), g(kb[m]["max"])] for m in kb]
    rep.add(table(["method", "median kappa_bar", "max kappa_bar"], rows), "")
    rep.png("fig8_chua_kappa.png", "Figure 8: Chua, kappa_bar")
    rep.add(f"Exp/PBSR: {times(re)} in median E_k and {times(rk)} in median kappa_bar ({orders(re)}, "
            f"{orders(rk)}). Verdict: 'about two orders of magnitude more accurate than Exp' "
            f"{verdict(ok_acc)} (threshold: at least 10^1.5 = 32x in both measures).", "")
    rep.add(f"PBSR vs FS: PBSR's median kappa_bar is {times(rf)} FS's. Verdict: 'close to FS' "
            f"{verdict(ok_fs)} (threshold: within 3x).")
    interp = d.get("pbsr_state_interpolation")
    if interp and not ok_fs:
        lin = interp.get("linear, n_factor 10", {}).get("median_E")
        her = interp.get("hermite, n_factor 10", {}).get("median_E")
        den = interp.get("dense, n_factor 100", {}).get("median_E")
        rep.add(f" Why: on Chua the PBSR error is dominated by the states at the refinement points, which the "
                f"paper (and our default) interpolates linearly between grid states. With cubic Hermite "
                f"interpolation PBSR's median E_k drops from {g(lin)} to {g(her)}, with the solver's dense output "
                f"and 10x more sub-steps to {g(den)} (side experiment, same grid and reference). The remaining "
                f"gap to FS is the price of marching on the state solver's grid.")
    rep.add("", "")
    rep.summary.append([title, "PBSR ~2 orders more accurate than Exp, close to FS",
                        f"Exp/PBSR {times(re)} (E_k), {times(rk)} (kappa_bar); PBSR/FS kappa_bar {times(rf)}",
                        f"accuracy vs Exp {verdict(ok_acc)}; close to FS {verdict(ok_fs)}"])


def _table2(rep):
    name, title = "table2_runtime", "Table 2: runtime on PKA and CaMKII"
    d = rep.data.get(name)
    if d is None:
        return rep.missing(name, title)
    t = d["table"]
    rep.add(f"## {title}", "", f"**Paper.** {d['paper']['claim']}.", "",
            f"**Ours.** t in [0, 600], {d['repeats']} runs per method, the methods interleaved in each round; every "
            f"run includes its state solve (LSODA rtol 1e-5, atol 1e-6 for the post-hoc methods; FS is scipy BDF "
            f"with a block-diagonal Newton matrix at the same tolerances); compilation excluded; one BLAS thread. "
            f"Medians (the paper reports means; ours are in the JSON/CSV too).", "")
    rows = []
    for model in d["models"]:
        sec, paper = t[model]["seconds"], t[model]["paper_seconds"] or {}
        for m in d["methods"]:
            rows.append([model, LABELS[m], s(sec[m]["median"]), s(sec[m]["mean"]),
                         f"{s(sec[m]['q25'])} - {s(sec[m]['q75'])}", s(paper[m]) if m in paper else "-"])
    rep.add(table(["model", "method", "ours: median", "ours: mean", "ours: IQR", "paper: mean"], rows), "")
    rows, ok_order, ok_growth = [], True, True
    for model in d["models"]:
        r, pr = t[model]["ratios"], t[model]["paper_ratios"] or {}
        rows.append([model, times(r["fs/pbsr (median)"]), times(pr.get("fs/pbsr")), times(r["fs/exp (median)"]),
                     times(pr.get("fs/exp")), times(r["fs/pbsr2 (median)"]), times(r["fs/exp2 (median)"])])
        sec = t[model]["seconds"]
        ok_order &= sec["fs"]["median"] > sec["pbsr"]["median"] > sec["exp"]["median"]
    rep.add(table(["model", "FS/PBSR ours", "FS/PBSR paper", "FS/Exp ours", "FS/Exp paper", "FS/PBSR2 ours",
                   "FS/Exp2 ours"], rows), "")
    if "PKA" in t and "CaMKII" in t:
        ok_growth = (t["CaMKII"]["ratios"]["fs/pbsr (median)"] > t["PKA"]["ratios"]["fs/pbsr (median)"]
                     and t["CaMKII"]["ratios"]["fs/exp (median)"] > t["PKA"]["ratios"]["fs/exp (median)"])
    rep.add(f"Verdict: the ordering FS > PBSR > Exp {verdict(bool(ok_order))} on "
            f"{' and '.join(d['models'])}; the speed-up over FS growing from PKA to the larger CaMKII "
            f"{verdict(bool(ok_growth))}. The sizes of the ratios do not match the paper's:")
    notes = []
    if "CaMKII" in t:
        c = t["CaMKII"]
        notes.append(f" our FS on CaMKII takes {s(c['seconds']['fs']['median'])} against the paper's 1.518 s, while "
                     f"our PBSR and Exp take {s(c['seconds']['pbsr']['median'])} and "
                     f"{s(c['seconds']['exp']['median'])} (paper 0.132 s and 0.030 s). Our FS factors one 21 x 21 "
                     f"matrix per Newton update (block-diagonal Newton matrix, METHOD.md section 6) and evaluates "
                     f"A S + B in compiled code; we do not know what made the paper's FS on CaMKII "
                     f"{times(1.518 / c['seconds']['fs']['median'])} slower than ours, and do not claim to. Of the post-hoc totals, "
                     f"the sensitivity pass is {s(c['sensitivity_pass_seconds']['pbsr']['median'])} (PBSR) and "
                     f"{s(c['sensitivity_pass_seconds']['exp']['median'])} (Exp); the rest is the state solve "
                     f"(scipy's LSODA, which calls the compiled right-hand side from Python).")
    rep.add(*notes, "")
    rep.png(f"{name}.png", title)
    for model in d["models"]:
        r, pr = t[model]["ratios"], t[model]["paper_ratios"] or {}
        sec = t[model]["seconds"]
        rep.summary.append([f"Table 2 ({model})",
                            f"FS/PBSR {times(pr.get('fs/pbsr'))}, FS/Exp {times(pr.get('fs/exp'))}",
                            f"FS/PBSR {times(r['fs/pbsr (median)'])}, FS/Exp {times(r['fs/exp (median)'])}; "
                            f"FS {s(sec['fs']['median'])}, PBSR {s(sec['pbsr']['median'])}, Exp {s(sec['exp']['median'])}",
                            "ordering holds, sizes differ" if ok_order else verdict(False)])


def _issue5(rep):
    title = "Second-order variants (issue 5): pbsr2 and exp2"
    rows, found, verdicts, exp2_vs_pbsr2, error_runs = [], False, [], [], []
    t2 = (rep.data.get("table2_runtime") or {}).get("table", {})
    for name, model, key in (("fig2_pka_error", "PKA [0, 600]", "PKA"), ("fig3_camkii_error", "CaMKII [0, 600]", "CaMKII"),
                             ("fig7_8_chua", "Chua [0, 10]", None)):
        d = rep.data.get(name)
        if d is None:
            continue
        d = d["error"] if name == "fig7_8_chua" else d
        error_runs.append(d)
        i5 = d.get("issue5")
        if not i5:
            continue
        found = True
        E = d["E"]
        tab = "-"
        if key in t2:
            sec, sp = t2[key]["seconds"], t2[key]["sensitivity_pass_seconds"]
            tab = (f"{g(sp['pbsr2']['median'] / sp['exp']['median'])}x / "
                   f"{g(sec['pbsr2']['median'] / sec['exp']['median'])}x")
        rows.append([model, g(E["pbsr"]["median"]), g(E["pbsr2"]["median"]), g(E["exp2"]["median"]),
                     f"{times(i5['accuracy_gain_pbsr_over_pbsr2'])} ({'yes' if i5['accuracy_holds'] else 'no'})",
                     f"{g(i5['cost_ratio_pbsr2_over_exp_sensitivity_pass'])}x "
                     f"({'yes' if i5['cost_holds_sensitivity_pass'] else 'no'})",
                     f"{g(i5['cost_ratio_pbsr2_over_exp_with_state_solve'])}x "
                     f"({'yes' if i5['cost_holds_with_state_solve'] else 'no'})", tab])
        if name != "fig7_8_chua":
            exp2_vs_pbsr2.append((model.split()[0], E["exp2"]["median"], E["pbsr2"]["median"]))
        verdicts.append((model, i5["accuracy_holds"], i5["cost_holds_sensitivity_pass"],
                         i5["cost_holds_with_state_solve"]))
    rep.add(f"## {title}", "")
    if not found:
        rep.add("Not run.", "")
        return
    better = [m for m, e2, p2 in exp2_vs_pbsr2 if e2 <= 1.1 * p2]
    exp2_note = (f" On {' and '.join(better)} Exp2 alone is as accurate as PBSR2 or more (within 10 %)."
                 if better else "")
    runs = sorted({str(d["settings"].get("timing_repeats", "?")) for d in error_runs})
    t2_runs = (rep.data.get("table2_runtime") or {}).get("repeats")
    rep.add("Issue 5's targets: on PKA [0, 600] at rtol 1e-5, pbsr2's median E_k against tight FS is at least 10x "
            "smaller than pbsr's, at a cost within 1.5x of exp. The cost is measured two ways: the sensitivity pass "
            "alone, and the whole run including the state solve (as in Table 2); medians over the timing repeats "
            f"of Figures 2, 3 and 7 ({' / '.join(runs)} runs, on the state solver's grid)"
            + (f", and over Table 2's {t2_runs} runs (the same computation, timed again)" if t2_runs else "") + ".", "")
    rep.add(table(["model", "median E_k PBSR", "median E_k PBSR2", "median E_k Exp2",
                   "PBSR/PBSR2 (target >= 10x)", "cost PBSR2/Exp, sensitivity pass (<= 1.5x)",
                   "cost PBSR2/Exp, with state solve (<= 1.5x)", "same from Table 2: pass / with solve"], rows), "")
    words = []
    for model, acc, c1, c2 in verdicts:
        cost = ("met" if c1 else ("met only when the state solve is counted" if c2 else "not met"))
        words.append(f"{model}: accuracy target {'met' if acc else 'not met'}, cost target {cost}")
    rep.add("Verdict: " + "; ".join(words) + ".", "")
    rep.add("Notes: on Chua PBSR never takes an exponential step, so PBSR2 is PBSR and the accuracy target cannot "
            "be met by changing the fallback step; there Exp2 alone is the interesting comparison (second order, "
            "no refinement). PBSR2 differs from PBSR only on the intervals where the exponential step is taken "
            "(exp-stiff, exp-equilibrium); its gain at the PBS intervals is the error it no longer carries over "
            "from them. PBSR2's cost over Exp is PBSR's refinement on the PBS intervals, not the exp2 step: Exp2 "
            "alone costs about what Exp costs (Table 2)." + exp2_note, "")
    rep.summary.append([title, "(ours) pbsr2 >= 10x more accurate than pbsr, cost <= 1.5x exp",
                        "; ".join(f"{r[0]}: {r[4]}, cost {r[5]} / {r[6]}" for r in rows),
                        "; ".join(f"{m.split()[0]}: accuracy {'yes' if a else 'no'}, cost {'yes' if c1 else 'no'} "
                                  f"(pass) / {'yes' if c2 else 'no'} (with solve)" for m, a, c1, c2 in verdicts)])


# --------------------------------------------------------------------------- report
def write_report(results_dir=None, out=None, quick=None):
    """Write the report; returns its path.

    ``results_dir`` defaults to ``experiments/results``; ``out`` to
    ``experiments/REPORT.md`` for that folder and ``<results_dir>/REPORT.md`` otherwise.
    """
    results_dir = Path(results_dir) if results_dir is not None else RESULTS_DIR
    if out is None:
        out = DEFAULT_REPORT if results_dir.resolve() == RESULTS_DIR.resolve() else results_dir / "REPORT.md"
    rep = Report(results_dir, out)
    if quick is None:
        quick = any(d.get("quick") for d in rep.data.values())
    env = next((d.get("environment") for d in rep.data.values() if d.get("environment")), {}) or {}
    walls = {k: d.get("wall_time_s") for k, d in rep.data.items()}

    _error_section(rep, "fig2_pka_error", "Figure 2: E_k on PKA", "PKA")
    _error_section(rep, "fig3_camkii_error", "Figure 3: E_k on CaMKII", "CaMKII")
    _kappa_section(rep, "fig4_pka_kappa", "Figure 4: kappa_bar on PKA, t in [0, 60000]", "PKA")
    _kappa_section(rep, "fig5_camkii_kappa", "Figure 5: kappa_bar on CaMKII", "CaMKII")
    _fig6(rep)
    _chua(rep)
    _table2(rep)
    _issue5(rep)

    head = ["# Reproducing Section 8 of Eriksson, Kramer, Milinanni, Nyquist (arXiv:2109.00067) with pbsens", ""]
    if quick:
        head += ["> **Quick mode**: few repeats, samples and dimensions. The numbers below are a smoke test, "
                 "not the reproduction; see `experiments/REPORT.md` for the full run.", ""]
    head += [f"Generated by `experiments/make_report.py` from the JSON files in `{_rel(results_dir, out)}` on "
             f"{datetime.date.today().isoformat()}. Regenerate everything with "
             f"`python3 -c \"import pbsens.reproduce as r; r.run()\"` (or `pbsens reproduce`); one experiment with "
             f"`python3 experiments/<name>.py`.", "",
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
    text = "\n".join(head + rep.lines).rstrip() + "\n"
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
    args = ap.parse_args()
    print(write_report(args.results, args.out))


if __name__ == "__main__":
    main()
