"""Run: nice -n 10 python benchmarks/collection_smith_spot.py OUT.json [K] (from the repository root).

Spot check of Smith_BMCSystBiol2013's gradient (the full FD check does not fit the 900 s timeout):
exp2 and fs at x_nominal + 0.1 against central FD (step 1e-4, rodas5p rtol 1e-12 atol 1e-14) on the
K coordinates with the largest |fs gradient|; protocol of benchmarks/collection.py otherwise."""
import datetime, json, os, subprocess, sys, time
import numpy as np
import pbsens.petab as pbpetab
K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
out = sys.argv[1]
FD = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
y = os.path.join(os.environ.get("PBSENS_PETAB_COLLECTION", "/work/collection/Benchmark-Models"), "Smith_BMCSystBiol2013", "Smith_BMCSystBiol2013.yaml")
rec = {"problem": "Smith_BMCSystBiol2013", "what": __doc__.strip(),
       "pbsens_commit": subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
p = pbpetab.load(y)
theta = np.asarray(p.x_nominal, float) + 0.1
g = {}
for m in ("exp2", "fs"):
    t0 = time.perf_counter(); g[m] = np.asarray(p.evaluate(theta, method=m).gradient, float)
    rec[f"{m}_s"] = time.perf_counter() - t0
    print(m, rec[f"{m}_s"], flush=True)
idx = np.argsort(-np.abs(g["fs"]))[:K]
rec["coordinates"] = [p.parameter_ids[i] for i in idx]
fd = []
for i in idx:
    e = np.zeros(p.dim); e[i] = 1e-4
    t0 = time.perf_counter()
    fd.append((p.llh(theta + e, **FD) - p.llh(theta - e, **FD)) / 2e-4)
    print(i, fd[-1], g["exp2"][i], g["fs"][i], time.perf_counter() - t0, flush=True)
fd = np.array(fd)
rec["fd"] = fd.tolist()
for m in ("exp2", "fs"):
    rec[m] = g[m][idx].tolist()
    rec[f"{m}_rel_err"] = float(np.max(np.abs(g[m][idx] - fd)) / np.max(np.abs(fd)))
rec["max_abs_fs_gradient_all"] = float(np.max(np.abs(g["fs"])))
rec["exp2_vs_fs_rel_all"] = float(np.max(np.abs(g["exp2"] - g["fs"])) / np.max(np.abs(g["fs"])))
json.dump(rec, open(out, "w"), indent=1)
print(json.dumps(rec, indent=1))
