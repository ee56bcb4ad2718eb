"""The report's sections on runtime: Figure 6 (against the dimension) and Table 2 (PKA, CaMKII).

Section functions as in ``_report_accuracy``: ``(rep, name, d, title)``.
"""
from __future__ import annotations

from _plotting import LABELS
from _report_text import g, s, table, times, verdict


def fig6_section(rep, name, d, title):
    """Figure 6: runtime against the dimension n, fitted exponents b of a n^b."""
    f = d["fits"]
    paper_b = {m: f[m]["paper_b"] for m in ("fs", "pbs", "exp")}
    rep.heading(
        title, d,
        f"**Ours.** n = {d['ns'][0]}, {d['ns'][1]}, ..., {d['ns'][-1]}; {d['draws']} draws per n (seeds "
        f"0..{d['draws'] - 1}); t in [0, 10]; each run includes its state solve (LSODA, rtol 1e-5, atol 1e-6); "
        f"FS is BDF at the same tolerances. PBS: {pbs_draws_text(d)}. With the refinement "
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
                f" the paper's" for m, b, pb in (("fs", bf, paper_b["fs"]), ("pbs", bp, paper_b["pbs"]), ("exp", be, paper_b["exp"])))
            + " (close: within 0.5).")
    why = [" Why: (i) at small n every method is dominated by fixed per-call costs (Python, the state solve, "
           "scipy's step control), so exponents fitted from n = 5 on are effective, not asymptotic exponents; the "
           "n >= 50 column is closer to the asymptotics (Exp: one n x n exponential with its phi function per step, ~n^3 at a "
           "roughly constant number of steps; FS: the right-hand side A S costs n^3 per evaluation and each "
           "Newton solve has n + 1 right-hand sides)."]
    big_p = f["pbs"].get("n_ge_50_medians")
    if bf < paper_b["fs"]:
        why.append(" (ii) Our FS factors one n x n matrix per Newton update (the block-diagonal Newton matrix of "
                   "METHOD.md section 6), never the n(n+1) x n(n+1) one, and evaluates A S with compiled code; "
                   "we cannot tell what dominated the paper's FS cost, so we do not explain their 4.2.")
    if big_p and big_p["b"] > paper_b["pbs"]:
        why.append(f" (iii) PBS's exponent at n >= 50 ({g(big_p['b'], 3)}) is above the paper's {paper_b['pbs']}: its "
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
                                  for m, b, pb in (("fs", bf, paper_b["fs"]), ("pbs", bp, paper_b["pbs"]),
                                                   ("exp", be, paper_b["exp"])))
                        + f"; growth {verdict(grows)}"])


def pbs_draws_text(d):
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



def table2_section(rep, name, d, title):
    """Table 2: runtime of FS, PBSR and Exp (and pbsr2, exp2) on PKA and CaMKII."""
    t = d["table"]
    rep.heading(
        title, d,
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
