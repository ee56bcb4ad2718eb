"""The report's sections on accuracy: E_k (Figs 2, 3), kappa_bar (Figs 4, 5), Chua (Figs 7, 8), pbsr2/exp2.

Each section function takes ``(rep, name, d, title, ...)``: the report being
written, the experiment's name, its JSON and the section's title (see
``Report.section``).
"""
from __future__ import annotations

from _plotting import LABELS
from _report_text import g, orders, s, table, times, verdict


def error_section(rep, name, d, title, model):
    """Figures 2 and 3: E_k of the post-hoc methods against tight FS."""
    E, ratio = d["E"], d["exp_over_pbsr"]
    r_pbs = ratio["median_ratio_on_pbs_intervals"]
    ok = None if r_pbs is None else (True if r_pbs >= 10 else (None if r_pbs >= 3 else False))
    bc = d["branch_counts"]
    rep.heading(
        title, d,
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
    rep.figure_and_summary(name, title, "PBSR 1-2 orders more accurate than Exp where PBS ran",
                           f"Exp/PBSR median E_k on PBS intervals {times(r_pbs)} (all points "
                           f"{times(ratio['median_ratio_all'])})", verdict(ok))


def kappa_section(rep, name, d, title, model):
    """Figures 4 and 5: kappa_bar of PBSR, Exp and FS after the transient."""
    kb = d["kappa_bar"]
    base = [m for m in ("pbsr", "exp", "fs") if m in kb]
    spread = d["late_spread_max_over_min"]
    ok = spread is not None and spread <= 10
    lw = d["late_window"]
    rep.heading(
        title, d,
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
    rep.figure_and_summary(name, title, "after the transient PBSR, Exp, FS have similar kappa_bar",
                           "late medians: " + ", ".join(f"{LABELS[m]} {g(late[m])}" for m in base), verdict(ok))



def chua_section(rep, name, d, title):
    """Figures 7 and 8: E_k and kappa_bar on Chua's circuit."""
    err, kap, h = d["error"], d["kappa"], d["headline"]
    E = err["E"]
    re, rk, rf = h["E_median_exp_over_pbsr"], h["kappa_median_exp_over_pbsr"], h["kappa_median_pbsr_over_fs"]
    ok_acc = re >= 10 ** 1.5 and rk >= 10 ** 1.5
    ok_fs = rf <= 3
    rep.heading(
        title, d,
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



def second_order_section(rep, title="Second-order variants (issue 5): pbsr2 and exp2"):
    """Issue 5's targets for pbsr2 (accuracy over pbsr, cost against exp), from Figs 2, 3, 7 and Table 2."""
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
