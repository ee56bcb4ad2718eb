"""Per-call CPU of the compiled Rodas5P forward-sensitivity kernels on Bachmann_MSB2011 (issue #41 item 4).

Variant timing: each kernel of :mod:`pbsens.kernels.augmented` the step loop calls
(``coupling_columns`` once per step, ``coupled_rhs`` and ``coupled_solve`` once per stage) and a
stand-in for the stage combinations, run N times in a numba loop at a mid-trajectory state of the
first condition (113 sensitivity columns), process CPU per call. Indicative only (no repeats);
the whole-evaluation comparison is ``benchmarks/bench_fs.py``. Run from the repository root::

    OPENBLAS_NUM_THREADS=1 nice -n 19 python benchmarks/bench_fs_kernels.py
"""
import time, numpy as np
from numba import njit
import pbsens.petab as pbpetab
from pbsens.sensitivity import forward as F
problem = pbpetab.load(__import__("sys").argv[1] if len(__import__("sys").argv) > 1 else "/work/collection/Benchmark-Models/Bachmann_MSB2011/Bachmann_MSB2011.yaml")
cap = {}
orig = F._solve_rodas5p
def wrapped(model, p, idx, t_span, z0, t_eval, rtol, atol, method, jacobian, options):
    if not cap:
        cap.update(model=model, p=p, idx=idx, t_span=t_span, z0=z0, t_eval=t_eval, rtol=rtol, atol=atol, options=options)
    return orig(model, p, idx, t_span, z0, t_eval, rtol, atol, method, jacobian, options)
F._AUGMENTED_SOLVERS["rodas5p"] = wrapped
problem.evaluate(method="fs")
m, p, idx = cap["model"], cap["p"], cap["idx"]
nx, ns, npar = m.n_states, idx.size, m.n_params
r = F.forward_sensitivities(m, cap["t_span"], t_eval=None, p=p, method="rodas5p", rtol=cap["rtol"], atol=cap["atol"], params=list(idx), **cap["options"])
print("nx", nx, "ns", ns, "np", npar, "steps", r.options["stats"])
k = len(r.t) // 2
z = np.concatenate([r.x[k], r.S[k].ravel()])
h = r.t[k+1] - r.t[k]
from pbsens.kernels.augmented import coupling_columns, coupled_solve, coupled_rhs
from pbsens.kernels.lu import lu_factor
jacs, rhs = m.fns.jacs_into, m.fns.rhs_into
c = m.constants
@njit
def t_cc(N, idx, WA, WB, z, p, c, J, Cs, pat):
    for _ in range(N):
        coupling_columns(jacs, idx, WA, WB, 0.0, z, p, c, J, Cs, pat)
@njit
def t_rhs(N, idx, WA, WB, z, p, c, out):
    for _ in range(N):
        coupled_rhs(rhs, jacs, idx, WA, WB, 0.0, z, p, c, out)
@njit
def t_jacs(N, x, p, c, A, B):
    for _ in range(N):
        jacs(0.0, x, p, c, A, B)
@njit
def t_solve(N, W, piv, Cs, pat, g0, g):
    for _ in range(N):
        g[:] = g0
        coupled_solve(W, piv, Cs, pat, g)
@njit
def t_combo(N, K, u, x):
    for _ in range(N):
        for s in range(8):
            for i in range(u.shape[0]):
                u[i] = x[i]
            for j in range(s):
                for i in range(u.shape[0]):
                    u[i] += 0.3 * K[j, i]
            for j in range(s):
                for i in range(u.shape[0]):
                    u[i] += 0.3 * K[j, i]
WA, WB = np.empty((2, nx, nx)), np.empty((2, nx, npar))
J = np.empty((nx, nx)); Cs = np.empty((nx*nx, ns)); pat = np.zeros(1+2*nx*nx, dtype=np.int64)
out = np.empty(z.size)
def tm(f, *a, N=200):
    f(1, *a); c0 = time.process_time(); f(N, *a); return (time.process_time() - c0) / N * 1e6
print("coupling_columns us", tm(t_cc, idx, WA, WB, z, p, c, J, Cs, pat))
print("npat", pat[0], "nnz A", np.count_nonzero(J))
print("coupled_rhs us", tm(t_rhs, idx, WA, WB, z, p, c, out, N=2000))
A = np.empty((nx, nx)); B = np.empty((nx, npar))
print("jacs us", tm(t_jacs, z[:nx].copy(), p, c, A, B, N=5000))
W = np.eye(nx) / (h * 0.2119) - J; piv = np.empty(nx, dtype=np.int64); lu_factor(W, piv)
print("nnz LU", np.count_nonzero(W), "of", nx*nx)
g0 = np.random.default_rng(0).normal(size=z.size); g = g0.copy()
print("coupled_solve us", tm(t_solve, W, piv, Cs, pat, g0, g, N=2000))
K = np.random.default_rng(0).normal(size=(8, z.size)); u = np.empty(z.size)
print("stage combos per step us", tm(t_combo, K, u, z, N=500))
