"""Rodas5P, a stiffly accurate Rosenbrock method of order 5(4), compiled: the whole step loop in one call.

The method (Steinebach 2023) solves ``x' = f(t, x)`` with ``s = 8`` stages per
step. In the form of Hairer and Wanner (Solving ODEs II, Sec. IV.7, eq. 7.25;
the form of their code RODAS) that avoids matrix-vector products with the
Jacobian ``J = df/dx`` at the step's start, each stage solves one linear system
with the same iteration matrix ``W = I/(h gamma) - J``::

    u_i = x_n + sum_{j<i} a_ij k_j
    W k_i = f(t_n + c_i h, u_i) + sum_{j<i} (c_ij / h) k_j + h d_i df/dt(t_n, x_n)
    x_n+1 = u_8 + k_8

so a step costs one Jacobian, one LU factorisation (:mod:`pbsens.kernels.lu`),
eight right-hand sides and eight triangular solves. The method is stiffly
accurate (``x_n+1`` is the last stage's value) and L-stable. ``u_8 = x_n+1 - k_8``
is the embedded solution of order 4, so ``k_8`` is the local error estimate
(order 5 in ``h``). Dense output of order 4 between ``x_n`` and ``x_n+1``::

    x(t_n + theta h) = (1 - theta) x_n + theta (x_n+1 + (1 - theta)(e_1 + theta (e_2 + theta e_3))),
    e_r = sum_i h_ri k_i.

Coefficients: ``gamma``, ``a_ij``, ``c_ij``, ``c_i``, ``d_i`` (``= gamma_i``)
and the dense-output weights ``h_ri`` of Rodas5P from G. Steinebach,
"Construction of Rosenbrock-Wanner method Rodas5P and numerical benchmarks
within the Julia Differential Equations package", BIT Numerical Mathematics
63, 27 (2023), in the transformed form as tabulated in OrdinaryDiffEq.jl
(``lib/OrdinaryDiffEqRosenbrock/src/rosenbrock_tableaus.jl``,
``Rodas5PTableau``), which is the form above. ``tests/test_rosenbrock.py``
converts them back to the classical ``(alpha_ij, gamma_ij, b_i)`` and checks
the order conditions up to order 4 for both solutions, ``c_i = sum_j alpha_ij``
and ``d_i = sum_j gamma_ij``, and measures orders 5 (solution), 5 (local error
estimate) and 4 (dense output) on smooth problems.

Step-size control as in Hairer's RODAS (Solving ODEs II, Sec. IV.8 and the
code ``rodas.f``): the scaled RMS norm of ``k_8`` with ``atol_i + rtol_i
max(|x_n,i|, |x_n+1,i|)``; ``h_new = h / fac``, ``fac = err^(1/5) / 0.9``
bounded so that ``0.2 <= h_new / h <= 6``; Gustafsson's predictive controller
on accepted steps; no increase directly after a rejection; after a
rejection the Jacobian is kept (same ``t_n``, ``x_n``), only ``W`` is
refactorised. ``df/dt`` by a forward difference with increment
``sqrt(eps max(1e-5, |t|))`` as in ``rodas.f`` (skipped for autonomous models).
Initial step: Hairer, Norsett and Wanner, Solving ODEs I, Sec. II.4 (the
algorithm scipy's ODE solvers also use).

Stops (``tstops``, breakpoints): a step never crosses one. It is shortened to
end exactly there, and the right-hand side is evaluated at most at the
largest double below the stop during that step and at least at the smallest
double above it during the step after; so a right-hand side that jumps at the
stop (``t < t_s`` or ``t >= t_s`` alike) is seen from the correct side.

The same loop integrates the states and sensitivities of forward
sensitivity analysis (:func:`rodas5p_solve_sensitivities`): the right-hand
side, Jacobian and stage solve of either system come from
:mod:`pbsens.kernels.augmented` (block forward substitution with one
``nx x nx`` LU per step for the augmented system).

Nothing allocates inside the loop (:func:`_loop`, compiled without reference
counting). The grid, the states and the dense coefficients are written into
buffers; when they are full the loop returns and :func:`rodas5p_solve` doubles
them and resumes (amortised, a handful of times per solve at most).
"""
import math

import numpy as np
from numba import njit, types

from .augmented import coupled_rhs as _rhs
from .augmented import coupled_solve as _coupled_solve
from .augmented import coupling_columns as _coupling_columns
from .augmented import system_jac as _system_jac
from .checks import all_finite as _finite
from .function_address import jacs_fn_at, matrix_fn_at, vector_fn_at
from .lu import lu_factor
from .dense_output import dense_eval, merge_outputs, outputs_upto
from .signatures import f8, ivec, jacs_fn, mat, matrix_fn, njit_quiet, tens, vec, vector_fn

__all__ = ["GAMMA", "A", "C", "C_NODES", "D", "H", "rodas5p_solve", "rodas5p_solve_sensitivities", "rodas5p_step", "dense_eval", "merge_outputs",
           "rodas5p_sensitivities_at",
           "STATUS_OK", "STATUS_STEP_TOO_SMALL", "STATUS_NOT_FINITE", "STATUS_MAX_STEPS",
           "STATUS_SINGULAR"]

i8 = types.int64

# ------------------------------------------------------------------ Rodas5P (Steinebach 2023)
S = 8
GAMMA = 0.21193756319429014
_a6 = [-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
       0.030198172008377946]
#: ``a_ij`` (stage arguments), strictly lower triangular.
A = np.array([
    [0.0] * 8,
    [3.0] + [0.0] * 7,
    [2.849394379747939, 0.45842242204463923] + [0.0] * 6,
    [-6.954028509809101, 2.489845061869568, -10.358996098473584] + [0.0] * 5,
    [2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641] + [0.0] * 4,
    _a6 + [0.0] * 3,
    _a6 + [1.0, 0.0, 0.0],
    _a6 + [1.0, 1.0, 0.0],
])
#: ``c_ij`` (coupling of earlier stages, divided by ``h`` in the step), strictly lower triangular.
C = np.array([
    [0.0] * 8,
    [-14.155112264123755] + [0.0] * 7,
    [-17.97296035885952, -2.859693295451294] + [0.0] * 6,
    [147.12150275711716, -1.41221402718213, 71.68940251302358] + [0.0] * 5,
    [165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306] + [0.0] * 4,
    [24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
     -0.6610691825249471] + [0.0] * 3,
    [30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
     -19.097331116725623, -28.087943162872662, 0.0, 0.0],
    [37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
     -40.06618937091002, -54.66780262877968, -9.48861652309627, 0.0],
])
#: Stage times ``c_i``.
C_NODES = np.array([0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716,
                    0.4288403609558664, 1.0, 1.0, 1.0])
#: ``d_i = gamma_i`` (coefficients of ``h df/dt``).
D = np.array([0.21193756319429014, -0.42387512638858027, -0.3384627126235924, 1.8046452872882734,
              2.325825639765069, 0.0, 0.0, 0.0])
#: Dense output weights ``h_ri`` (rows r = 1, 2, 3).
H = np.array([
    [25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
     0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493],
    [-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
     20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372],
    [11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
     -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722],
])
#: Order of the embedded solution (the error estimate is O(h^(ORDER_EMBEDDED + 1))).
ORDER_EMBEDDED = 4

# step-size control (Hairer's rodas.f defaults)
_SAFE = 0.9
_FAC_MIN = 0.2          # h_new / h >= 0.2
_FAC_MAX = 6.0          # h_new / h <= 6
_EXPO = 1.0 / (ORDER_EMBEDDED + 1)
_EPS = 2.0 ** -52
_MAX_SINGULAR = 5       # consecutive singular iteration matrices before giving up

#: Return codes of :func:`rodas5p_solve`.
STATUS_OK = 0
STATUS_STEP_TOO_SMALL = 2
STATUS_NOT_FINITE = 3
STATUS_MAX_STEPS = 4
STATUS_SINGULAR = 5
_STATUS_FULL = 1        # internal: buffers full, grow and resume

#: Slots of the ``counts`` output.
N_RHS, N_JAC, N_LU, N_SOLVE, N_ACCEPTED, N_REJECTED = 0, 1, 2, 3, 4, 5
# slots of the integer and float loop state (resume after growing the buffers)
_I_STOP, _I_N, _I_AFTER_STOP, _I_REJECTED, _I_NONFINITE = 0, 1, 2, 3, 4
_F_H, _F_HACC, _F_ERRACC = 0, 1, 2

@njit(f8(vec, vec, vec, vec, vec), cache=True, _nrt=False, error_model="numpy")
def _rms(v, x0, x1, rtol, atol):
    """``sqrt(mean((v_i / (atol_i + rtol_i max(|x0_i|, |x1_i|)))^2))``."""
    n = v.shape[0]
    s = 0.0
    for i in range(n):
        a = abs(x0[i])
        b = abs(x1[i])
        sc = atol[i] + rtol[i] * (a if a > b else b)
        q = v[i] / sc
        s += q * q
    return math.sqrt(s / n)



@njit(types.boolean(mat), cache=True, _nrt=False)
def _finite_mat(M):
    bad = 0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            a = M[i, j]
            bad |= (a - a) != 0.0
    return bad == 0


@njit_quiet(types.boolean(vector_fn, matrix_fn, jacs_fn, ivec, tens, tens, vec, vec, f8, f8, vec, i8, vec, mat, mat, ivec,
                    vec, ivec),
      cache=True, _nrt=False, error_model="numpy")
def _linearise(rhs, jac, jacs, idx, WA, WB, p, c, t_lo, t_room, x, autonomous, f0, J, Cs, pat, dT, counts):
    """``f0 = f(t_lo, x)``, ``J = df/dx`` and (non-autonomous) ``dT = df/dt`` at the step's start.

    With sensitivity columns ``J = A`` and the couplings go to ``Cs``/``pat``
    (:func:`pbsens.kernels.augmented.coupling_columns`).

    ``dT`` by a forward difference with increment ``sqrt(eps max(1e-5, |t|))``
    (rodas.f), at most half of ``t_room`` (the distance to the next stop).
    Returns whether ``f0`` and ``J`` are finite.
    """
    nx = x.shape[0]
    _rhs(rhs, jacs, idx, WA, WB, t_lo, x, p, c, f0)
    if idx.shape[0] == 0:
        _system_jac(jac, jacs, idx, WA, WB, t_lo, x, p, c, J)
    else:
        _coupling_columns(jacs, idx, WA, WB, t_lo, x, p, c, J, Cs, pat)
        if not _finite_mat(Cs[:pat[0]]):
            return False
    counts[N_RHS] += 1
    counts[N_JAC] += 1
    if not (_finite(f0) and _finite_mat(J)):
        return False
    if autonomous == 0:
        delt = math.sqrt(_EPS * max(1e-5, abs(t_lo)))
        if delt > 0.5 * t_room:
            delt = 0.5 * t_room
        if delt > 0.0:
            _rhs(rhs, jacs, idx, WA, WB, t_lo + delt, x, p, c, dT)
            counts[N_RHS] += 1
            for i in range(nx):
                dT[i] = (dT[i] - f0[i]) / delt
        else:
            for i in range(nx):
                dT[i] = 0.0
    return True


@njit(types.boolean(mat, f8, mat, ivec, ivec), cache=True, _nrt=False, error_model="numpy")
def _factor(J, h, W, piv, counts):
    """``W = I/(h gamma) - J[:nx]`` (the diagonal block), factorised in place; False if singular."""
    nx = W.shape[0]
    fac = 1.0 / (h * GAMMA)
    for i in range(nx):
        for j in range(nx):
            W[i, j] = -J[i, j]
        W[i, i] += fac
    counts[N_LU] += 1
    return lu_factor(W, piv) == 0


@njit_quiet(types.void(vector_fn, jacs_fn, ivec, tens, tens, vec, vec, f8, f8, f8, f8, vec, vec, vec, i8, mat, ivec, mat,
                 ivec, mat, vec, vec, vec, ivec),
      cache=True, _nrt=False, error_model="numpy")
def _stages(rhs, jacs, idx, WA, WB, p, c, t, h, t_lo, t_hi, x, f0, dT, autonomous, W, piv, Cs, pat, K, u, g, xn,
            counts):
    """The eight stages of one step with the factorised ``W``; ``xn = x_n+1``, ``K[7]`` the error estimate.

    Stage times are clipped to ``[t_lo, t_hi]`` (the sides of adjacent stops).
    """
    nx = x.shape[0]
    for s in range(S):
        if s == 0:
            for i in range(nx):
                g[i] = f0[i]
        else:
            for i in range(nx):
                u[i] = x[i]
            for j in range(s):
                a = A[s, j]
                if a != 0.0:
                    for i in range(nx):
                        u[i] += a * K[j, i]
            ts = t + C_NODES[s] * h
            if ts < t_lo:
                ts = t_lo
            if ts > t_hi:
                ts = t_hi
            _rhs(rhs, jacs, idx, WA, WB, ts, u, p, c, g)
            counts[N_RHS] += 1
            for j in range(s):
                cc = C[s, j] / h
                for i in range(nx):
                    g[i] += cc * K[j, i]
        if autonomous == 0:
            hd = h * D[s]
            if hd != 0.0:
                for i in range(nx):
                    g[i] += hd * dT[i]
        _coupled_solve(W, piv, Cs, pat, g)
        counts[N_SOLVE] += idx.shape[0] + 1
        for i in range(nx):
            K[s, i] = g[i]
    k8 = K[S - 1]
    for i in range(nx):
        xn[i] = u[i] + k8[i]


@njit(types.void(mat, mat), cache=True, _nrt=False)
def _dense_coefficients(K, Dk):
    """``Dk[r] = sum_s H[r, s] K[s]``: the step's dense-output coefficients."""
    nx = K.shape[1]
    for r in range(3):
        for i in range(nx):
            acc = 0.0
            for s in range(S):
                acc += H[r, s] * K[s, i]
            Dk[r, i] = acc


@njit_quiet(i8(vector_fn, matrix_fn, jacs_fn, ivec, tens, tens, vec, vec, vec, vec, vec, f8, i8, i8, vec, mat, tens, vec,
         ivec, ivec, vec, vec, mat, mat, ivec, mat, ivec, mat, vec, vec, vec, vec),
      cache=True, _nrt=False, error_model="numpy")
def _loop(rhs, jac, jacs, idx, WA, WB, p, c, rtol, atol, stops, max_step, max_steps, autonomous,
          T, X, Dn, Hf, counts, ist, fst, info, W, J, piv, Cs, pat, K, u, f0, dT, g):
    """The step loop; resumes from ``ist``/``fst`` and the last stored grid point.

    Returns a status code; ``_STATUS_FULL`` when the buffers ``T``, ``X``,
    ``Dn``, ``Hf`` hold ``Dn.shape[0]`` steps (the caller grows them and calls again).
    ``Hf[n]``: the size step ``n`` had before it was shortened to end at a stop (its
    own size if it was not), i.e. the step the error control chose there.
    """
    nx = u.shape[0]
    cap = Dn.shape[0]
    nstops = stops.shape[0]
    istop = ist[_I_STOP]
    n = ist[_I_N]
    after_stop = ist[_I_AFTER_STOP] != 0
    rejected = ist[_I_REJECTED] != 0
    n_nonfinite = ist[_I_NONFINITE]
    h = fst[_F_H]
    h_acc = fst[_F_HACC]
    err_acc = fst[_F_ERRACC]
    t = T[n]
    t_stop = stops[istop]
    need_jac = True
    n_singular = 0
    status = STATUS_OK
    while True:
        x = X[n]
        # after a stop, the right-hand side is evaluated from its right side on
        t_lo = np.nextafter(t, np.inf) if after_stop else t
        if need_jac:
            if not _linearise(rhs, jac, jacs, idx, WA, WB, p, c, t_lo, t_stop - t_lo, x, autonomous, f0, J, Cs,
                              pat, dT, counts):
                status = STATUS_NOT_FINITE
                info[0] = t
                info[1] = h
                info[2] = 1.0   # at an accepted state: the right-hand side or Jacobian itself
                break
            need_jac = False
            if h <= 0.0:
                # initial step (Solving ODEs I, II.4), for an error of order ORDER_EMBEDDED + 1
                d0 = _rms(x, x, x, rtol, atol)
                d1 = _rms(f0, x, x, rtol, atol)
                h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
                h0 = min(h0, t_stop - t)
                for i in range(nx):
                    u[i] = x[i] + h0 * f0[i]
                _rhs(rhs, jacs, idx, WA, WB, t_lo + h0, u, p, c, g)
                counts[N_RHS] += 1
                for i in range(nx):
                    g[i] -= f0[i]
                d2 = _rms(g, x, x, rtol, atol) / h0
                dm = max(d1, d2)
                if dm <= 1e-15:
                    h1 = max(1e-6, h0 * 1e-3)
                else:
                    h1 = (0.01 / dm) ** _EXPO
                h = min(100.0 * h0, h1)
                if not h > 0.0:      # NaN from a non-finite trial evaluation
                    h = h0
        if counts[N_ACCEPTED] + counts[N_REJECTED] >= max_steps:
            status = STATUS_MAX_STEPS
            info[0] = t
            info[1] = h
            break
        # ---- step size: bounds, and stop exactly at the next stop
        if h > max_step:
            h = max_step
        h_free = h
        hit = False
        if t + 1.0001 * h >= t_stop:
            h = t_stop - t
            hit = True
        if h < 10.0 * (np.nextafter(t, np.inf) - t) or not h > 0.0:
            status = STATUS_NOT_FINITE if n_nonfinite > 0 else STATUS_STEP_TOO_SMALL
            info[0] = t
            info[1] = h
            break
        # before a stop, the right-hand side is evaluated from its left side
        t_hi = np.nextafter(t_stop, -np.inf) if hit else np.inf
        if not _factor(J, h, W, piv, counts):
            n_singular += 1
            if n_singular > _MAX_SINGULAR:
                status = STATUS_SINGULAR
                info[0] = t
                info[1] = h
                break
            h *= 0.5
            continue
        n_singular = 0
        xn = X[n + 1]
        _stages(rhs, jacs, idx, WA, WB, p, c, t, h, t_lo, t_hi, x, f0, dT, autonomous, W, piv, Cs, pat, K, u, g,
                xn, counts)
        err = _rms(K[S - 1], x, xn, rtol, atol)
        if not (err <= 1e300 and _finite(xn)):
            # NaN/inf in the trial step: shrink hard and retry (not an accepted state)
            n_nonfinite += 1
            counts[N_REJECTED] += 1
            rejected = True
            h *= _FAC_MIN
            continue
        n_nonfinite = 0
        fac = (err ** _EXPO) / _SAFE
        fac = min(1.0 / _FAC_MIN, max(1.0 / _FAC_MAX, fac))
        h_new = h / fac
        if err <= 1.0:
            # ---- accept
            if counts[N_ACCEPTED] > 0:
                # Gustafsson's predictive controller (rodas.f, PRED = 1)
                facgus = (h_acc / h) * (err * err / err_acc) ** _EXPO / _SAFE
                facgus = min(1.0 / _FAC_MIN, max(1.0 / _FAC_MAX, facgus))
                if facgus > fac:
                    h_new = h / facgus
            h_acc = h
            err_acc = max(1e-2, err)
            _dense_coefficients(K, Dn[n])
            Hf[n] = h_free if h_free > h else h
            t = t_stop if hit else t + h
            n += 1
            T[n] = t
            counts[N_ACCEPTED] += 1
            if rejected and h_new > h:
                h_new = h
            rejected = False
            need_jac = True
            after_stop = False
            h = h_new
            if hit:
                if istop == nstops - 1:
                    status = STATUS_OK
                    break
                istop += 1
                t_stop = stops[istop]
                after_stop = True
            if n == cap:
                status = _STATUS_FULL
                break
        else:
            # ---- reject: same t, x and Jacobian, smaller h
            counts[N_REJECTED] += 1
            h = h * 0.1 if counts[N_ACCEPTED] == 0 else h_new
            rejected = True
    ist[_I_STOP] = istop
    ist[_I_N] = n
    ist[_I_AFTER_STOP] = 1 if after_stop else 0
    ist[_I_REJECTED] = 1 if rejected else 0
    ist[_I_NONFINITE] = n_nonfinite
    fst[_F_H] = h
    fst[_F_HACC] = h_acc
    fst[_F_ERRACC] = err_acc
    return status


@njit(cache=True)
def _workspace(nx, nx_model):
    """The step's arrays, allocated once per solve: iteration matrix W (nx_model^2; the
    sensitivity columns reuse its LU), Jacobian J (nx_model^2), pivots, the compressed couplings
    ``Cs``, ``pat`` (:func:`pbsens.kernels.augmented.coupling_columns`; empty without sensitivity
    columns), the stages K, and u, f0, dT, g."""
    ns = nx // nx_model - 1
    nn = nx_model * nx_model
    Cs = np.empty((nn, ns)) if ns > 0 else np.empty((0, 0))
    pat = np.zeros(1 + 2 * nn if ns > 0 else 1, dtype=np.int64)
    return (np.empty((nx_model, nx_model)), np.empty((nx_model, nx_model)), np.empty(nx_model, dtype=np.int64),
            Cs, pat, np.empty((S, nx)), np.empty(nx), np.empty(nx), np.zeros(nx), np.empty(nx))


@njit(cache=True)
def _start(t0, x0, cap, first_step, counts, info):
    """Step buffers for ``cap`` steps with the first point ``(t0, x0)``, the counters zeroed, and
    the loop's resume state ``ist``, ``fst`` (first step ``first_step``; 0: chosen)."""
    nx = x0.shape[0]
    T = np.empty(cap + 1)
    X = np.empty((cap + 1, nx))
    Dn = np.empty((cap, 3, nx))
    Hf = np.empty(cap)
    T[0] = t0
    for i in range(nx):
        X[0, i] = x0[i]
    for k in range(counts.shape[0]):
        counts[k] = 0
    for k in range(info.shape[0]):
        info[k] = 0.0
    ist = np.zeros(5, dtype=np.int64)
    fst = np.zeros(3)
    fst[_F_H] = first_step
    return T, X, Dn, Hf, ist, fst


@njit_quiet(types.Tuple((i8, vec, mat, tens, vec))(vector_fn, matrix_fn, jacs_fn, ivec, tens, tens, i8, f8, vec, vec, vec,
                                             vec, vec, vec, f8, f8, i8, i8, i8, ivec, vec),
      cache=True)
def _run(rhs, jac, jacs, idx, WA, WB, nx_model, t0, x0, p, c, rtol, atol, stops, first_step, max_step, max_steps,
         autonomous, capacity, counts, info):
    """Allocate the workspaces, run :func:`_loop`, grow the buffers when full; shared by both solves."""
    nx = x0.shape[0]
    cap = max(capacity, 1)
    T, X, Dn, Hf, ist, fst = _start(t0, x0, cap, first_step, counts, info)
    W, J, piv, Cs, pat, K, u, f0, dT, g = _workspace(nx, nx_model)
    while True:
        status = _loop(rhs, jac, jacs, idx, WA, WB, p, c, rtol, atol, stops, max_step, max_steps, autonomous,
                       T, X, Dn, Hf, counts, ist, fst, info, W, J, piv, Cs, pat, K, u, f0, dT, g)
        if status != _STATUS_FULL:
            break
        cap2 = 2 * cap
        T2 = np.empty(cap2 + 1)
        X2 = np.empty((cap2 + 1, nx))
        D2 = np.empty((cap2, 3, nx))
        H2 = np.empty(cap2)
        T2[:cap + 1] = T
        X2[:cap + 1] = X
        D2[:cap] = Dn
        H2[:cap] = Hf
        T, X, Dn, Hf, cap = T2, X2, D2, H2, cap2
    n = ist[_I_N]
    return status, T[:n + 1], X[:n + 1], Dn[:n], Hf[:n]


@njit_quiet(types.Tuple((i8, vec, mat, tens, vec))(ivec, f8, vec, vec, vec, vec, vec, vec, f8, f8, i8, i8, i8, ivec, vec),
      cache=True)
def rodas5p_solve(fn_addr, t0, x0, p, c, rtol, atol, stops, first_step, max_step, max_steps, autonomous,
                  capacity, counts, info):
    """Solve ``x' = rhs(t, x, p, c)`` from ``(t0, x0)`` to ``stops[-1]`` with Rodas5P.

    Parameters
    ----------
    fn_addr : ndarray (4,) int64
        Addresses (:func:`pbsens.kernels.function_address.addresses`) of the
        model's ``rhs_into(t, x, p, c, out)`` (slots 0, 1) and
        ``jac_x_into(t, x, p, c, J)`` (slots 2, 3); passed as integers because
        numba unboxes function arguments slowly.
    t0 : float
    x0, p, c : ndarray
    rtol, atol : ndarray (nx,)
        Per-state tolerances, positive.
    stops : ndarray
        Strictly increasing times ``> t0`` that steps end at exactly; the last is
        the end of the interval.
    first_step : float
        Initial step size; 0 selects it automatically.
    max_step : float
        Largest step size (``inf`` for none).
    max_steps : int
        Give up after this many steps (accepted and rejected).
    autonomous : int
        1 if ``rhs`` does not depend on ``t`` (skips the ``df/dt`` difference).
    capacity : int
        Initial buffer size in steps (grown by doubling).
    counts : ndarray (6,) int64, output
        Right-hand sides, Jacobians, LU factorisations, solves, accepted and
        rejected steps (slots ``N_RHS`` .. ``N_REJECTED``).
    info : ndarray (3,), output
        On failure: the time, the step size, and 1.0 if the right-hand side or
        Jacobian was non-finite at an accepted state (0.0 if in a trial step).

    Returns
    -------
    (status, T, X, Dn, Hf)
        Status code; the accepted grid ``T`` (K,), states ``X`` (K, nx), dense
        coefficients ``Dn`` (K - 1, 3, nx) and free step sizes ``Hf`` (K - 1,),
        up to the last accepted step also on failure. ``Hf[k]`` is the size the
        step control chose for step ``k`` before it was shortened to end at a
        stop (``T[k+1] - T[k]`` for a step that was not): the solution's time
        scale there, which a stop does not change.
    """
    rhs = vector_fn_at(fn_addr[0], fn_addr[1])
    jac = matrix_fn_at(fn_addr[2], fn_addr[3])
    jacs = jacs_fn_at(0, 0)            # never called: no sensitivity columns
    nx = x0.shape[0]
    return _run(rhs, jac, jacs, np.empty(0, dtype=np.int64), np.empty((2, 0, 0)), np.empty((2, 0, 0)), nx,
                t0, x0, p, c, rtol, atol, stops, first_step, max_step, max_steps, autonomous, capacity, counts, info)


@njit_quiet(types.Tuple((i8, vec, mat, tens))(ivec, f8, vec, vec, vec, ivec, vec, vec, vec, f8, f8, i8, i8, i8, ivec, vec),
      cache=True)
def rodas5p_solve_sensitivities(fn_addr, t0, z0, p, c, idx, rtol, atol, stops, first_step, max_step, max_steps,
                                autonomous, capacity, counts, info):
    """Forward sensitivities: Rodas5P on the augmented system ``z = (x, S)``, ``S`` (nx, ns) row-major.

    ``z[nx + i ns + j] = S[i, j]`` (the transpose of :func:`pbsens.kernels.augmented.system_rhs`'s
    layout); ``z' = (f, A S + B[:, idx])`` (:func:`pbsens.kernels.augmented.coupled_rhs`), one
    ``nx x nx`` LU of ``I/(h gamma) - A`` per step and block forward substitution in each stage with
    the couplings kept as their nonzero entries (:func:`pbsens.kernels.augmented.coupled_solve`);
    never the ``nx (ns+1)`` square. Error control, dense output and stops as in
    :func:`rodas5p_solve`, on all of ``z`` (``rtol``, ``atol`` of length ``nx (ns+1)``, same layout).

    Parameters as :func:`rodas5p_solve`, except: ``fn_addr`` (6,) also holds the
    addresses of the model's ``jacs_into(t, x, p, c, A, B)`` (slots 4, 5);
    ``z0`` the initial augmented state; ``idx`` (ns,) the model parameter
    indices of the sensitivity columns (at least one). ``counts[N_SOLVE]``
    counts ``nx x nx`` triangular solves with one right-hand side (``ns + 1`` per stage; the
    ``ns`` are done as one matrix right-hand side).
    """
    rhs = vector_fn_at(fn_addr[0], fn_addr[1])
    jac = matrix_fn_at(fn_addr[2], fn_addr[3])
    jacs = jacs_fn_at(fn_addr[4], fn_addr[5])
    nx = z0.shape[0] // (idx.shape[0] + 1)
    npar = p.shape[0]
    status, T, Z, Dn, _ = _run(rhs, jac, jacs, idx, np.empty((2, nx, nx)), np.empty((2, nx, npar)), nx, t0, z0,
                               p, c, rtol, atol, stops, first_step, max_step, max_steps, autonomous, capacity,
                               counts, info)
    return status, T, Z, Dn




@njit_quiet(types.boolean(ivec, f8, vec, vec, vec, f8, i8, vec, vec, mat), cache=True)
def rodas5p_step(fn_addr, t, x, p, c, h, autonomous, x_new, err, Dk):
    """One step of size ``h`` from ``(t, x)`` without error control (for tests and analysis).

    Fills ``x_new``, the local error estimate ``err = k_8`` (``x_new`` minus the
    embedded solution) and the step's dense coefficients ``Dk`` (3, nx) (see
    :func:`dense_eval`). Returns False if ``f``/``J`` are not finite at ``(t, x)``
    or the iteration matrix is singular.
    """
    rhs = vector_fn_at(fn_addr[0], fn_addr[1])
    jac = matrix_fn_at(fn_addr[2], fn_addr[3])
    nx = x.shape[0]
    counts = np.zeros(6, dtype=np.int64)
    W, J, piv, Cs, pat, K, u, f0, dT, g = _workspace(nx, nx)
    idx = np.empty(0, dtype=np.int64)
    WA = np.empty((2, 0, 0))
    jacs = jacs_fn_at(0, 0)            # never called: no sensitivity columns
    if not _linearise(rhs, jac, jacs, idx, WA, WA, p, c, t, np.inf, x, autonomous, f0, J, Cs, pat, dT, counts):
        return False
    if not _factor(J, h, W, piv, counts):
        return False
    _stages(rhs, jacs, idx, WA, WA, p, c, t, h, t, np.inf, x, f0, dT, autonomous, W, piv, Cs, pat, K, u, g, x_new,
            counts)
    for i in range(nx):
        err[i] = K[S - 1, i]
    _dense_coefficients(K, Dk)
    return True


@njit_quiet(types.Tuple((i8, mat))(ivec, f8, vec, vec, vec, ivec, vec, vec, vec, f8, f8, i8, i8, i8, ivec, vec, vec),
      cache=True)
def rodas5p_sensitivities_at(fn_addr, t0, z0, p, c, idx, rtol, atol, stops, first_step, max_step, max_steps,
                             autonomous, capacity, counts, info, te):
    """:func:`rodas5p_solve_sensitivities` returning only the augmented states at the output
    times ``te`` (strictly increasing in ``[t0, stops[-1]]``): ``(status, Z_at_te)``.

    The same steps, to the bit; but the buffers hold at most ``capacity`` steps: when they
    are full, the output times they cover are interpolated and only the last point is kept.
    Memory is ``O(capacity nx (ns+1))`` instead of ``O(steps nx (ns+1))`` (a long span with
    many sensitivity columns ran out of memory the other way).
    """
    rhs = vector_fn_at(fn_addr[0], fn_addr[1])
    jac = matrix_fn_at(fn_addr[2], fn_addr[3])
    jacs = jacs_fn_at(fn_addr[4], fn_addr[5])
    nz = z0.shape[0]
    nx = nz // (idx.shape[0] + 1)
    WA, WB = np.empty((2, nx, nx)), np.empty((2, nx, p.shape[0]))
    T, Z, Dn, Hf, ist, fst = _start(t0, z0, max(capacity, 1), first_step, counts, info)
    out = np.empty((te.shape[0], nz))
    W, J, piv, Cs, pat, K, u, f0, dT, g = _workspace(nz, nx)
    k = 0
    while True:
        status = _loop(rhs, jac, jacs, idx, WA, WB, p, c, rtol, atol, stops, max_step, max_steps, autonomous,
                       T, Z, Dn, Hf, counts, ist, fst, info, W, J, piv, Cs, pat, K, u, f0, dT, g)
        n = ist[_I_N]
        k = outputs_upto(T, Z, Dn, n, te, k, out)
        if status != _STATUS_FULL:
            break
        T[0] = T[n]                      # keep the last point: the loop resumes from it
        for i in range(nz):
            Z[0, i] = Z[n, i]
        ist[_I_N] = 0
    return status, out
