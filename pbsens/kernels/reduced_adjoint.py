"""The sparse adjoint's dense-step vectors in the coordinates that the conservation laws leave.

On a dense-step interval the backward march (:mod:`pbsens.kernels.sparse_adjoint`) needs, for one
vector ``lam``, ``y = E^T lam`` and ``a, b, c = F1^T lam, F2^T lam / h, F3^T lam / h^2`` of
``Abar`` (``nx x nx``). With ``k`` linear conservation laws ``L`` holding at the interval's points
(``L A = 0``, ``L B = 0``), these come from the matrix functions of the ``r x r`` matrix
``Ared = Abar[ind, ind] - Abar[ind, dep] K`` (``r = nx - k``; ``dep``, ``ind``, ``K`` as in
:mod:`pbsens.kernels.reduced`, which takes the forward step this way), at about ``(r/nx)^3`` of the
cost (METHOD.md section 16, "In the coordinates the laws leave").

In the coordinates ``u = T S = [S[ind]; Z]``, ``Z = L[:, dep]^-1 L S = S[dep] + K S[ind]`` (constant
along the march), ``T Abar T^-1 = [[Ared, Aid], [0, 0]]`` with ``Aid = Abar[ind, dep]``, so
``E = T^-1 [[E_r, F1_r Aid], [0, I]] T`` exactly (the step is the same step in other coordinates).
With ``lam_s = lam[ind] - K^T lam[dep]``:

    y[ind] = E_r^T lam_s + K^T zeta,   y[dep] = zeta,   zeta = lam[dep] + Aid^T (F1_r^T lam_s).

``a``, ``b``, ``c`` enter the march only through products with vectors that the laws annihilate
(columns of ``B``, ``D x = (A_e - A_a) x``, ``(A_m - Abar) x``): for every such ``v``,
``lam^T F_j v = lam_s^T F_j,r v[ind]``, so ``a = [F1_r^T lam_s; 0]`` (``ind``; ``dep``), and so on,
serve in their place: different vectors (they differ from the full ones by a combination of the
laws' rows), the same gradient and ``lambda`` to rounding.

No allocation: the caller passes every work array.
"""
from numba import njit, types

from .dense import vecmat_into as _vecmat_into
from .phi import exp_phi123_into
from .linalg import exp_phi1_into, exp_phi12_into
from .reduced import reduce_into
from .signatures import f8, ivec, mat, tens, vec

__all__ = ["reduced_vectors", "REDUCED_WORK"]

i8 = types.int64

#: ``(Ar, EF, EFF, EF3, wsr, ls, VLr, zeta)``: ``Ared``, its matrix functions ``[E | F1]``,
#: ``[E | F1 | F2]``, ``[E | F1 | F2 | F3]``, their workspace, ``lam_s`` (``r``), ``lam_s^T [...]``
#: (``4 r``) and ``zeta`` (``k``).
REDUCED_WORK = types.Tuple((mat, mat, mat, mat, tens, vec, vec, vec))


@njit(types.void(ivec, ivec, vec, ivec, ivec, ivec, ivec, mat, f8, i8, types.boolean, vec, vec, vec, vec, vec,
                 REDUCED_WORK), cache=True, _nrt=False)
def reduced_vectors(Ap, Ai, Ause, rpos, dpos, ind, dep, K, h, chain, compute, lam, fy, fa, fb, fc, work):
    """``fy = E^T lam`` and the stand-ins ``fa``, ``fb``, ``fc`` of ``F1^T lam``, ``F2^T lam / h``,
    ``F3^T lam / h^2`` (``chain`` 1, 2, 3: those up to ``fa``, ``fb``, ``fc``; the others are not
    written) of the CSR matrix ``Ause`` on ``(Ap, Ai)``, from ``Ared``'s matrix functions (module
    docstring). ``compute``: form them (else those of the previous call are reused: the same
    interval, another vector). ``rpos[i]`` / ``dpos[i]``: state ``i``'s position in ``ind`` / ``dep``
    (-1 if not there)."""
    Ar, EF, EFF, EF3, wsr, ls, VLr, zeta = work
    r = ind.shape[0]
    nk = dep.shape[0]
    if compute:
        reduce_into(Ap, Ai, Ause, rpos, dpos, K, Ar)
        if chain == 3:
            exp_phi123_into(Ar, h, EF3, wsr)
        elif chain == 2:
            exp_phi12_into(Ar, h, EFF, wsr)
        else:
            exp_phi1_into(Ar, h, EF, wsr)
    M = EF3 if chain == 3 else (EFF if chain == 2 else EF)
    for q in range(r):
        ls[q] = lam[ind[q]]
    for d in range(nk):
        ld = lam[dep[d]]
        zeta[d] = ld
        if ld != 0.0:
            kd = K[d]
            for q in range(r):
                ls[q] -= kd[q] * ld
    _vecmat_into(ls, M, 0, (chain + 1) * r, VLr, 0)
    # zeta += Aid^T (F1_r^T lam_s), Aid = Abar[ind, dep] from the CSR rows of ind
    for i in range(Ap.shape[0] - 1):
        ri = rpos[i]
        if ri < 0:
            continue
        f1 = VLr[r + ri]
        if f1 == 0.0:
            continue
        for e in range(Ap[i], Ap[i + 1]):
            dj = dpos[Ai[e]]
            if dj >= 0:
                zeta[dj] += Ause[e] * f1
    hinv = 1.0 / h if h != 0.0 else 0.0
    for q in range(r):
        s = VLr[q]
        for d in range(nk):
            s += K[d, q] * zeta[d]
        i = ind[q]
        fy[i] = s
        fa[i] = VLr[r + q]
        if chain >= 2:
            fb[i] = VLr[2 * r + q] * hinv
        if chain >= 3:
            fc[i] = VLr[3 * r + q] * hinv * hinv
    for d in range(nk):
        i = dep[d]
        fy[i] = zeta[d]
        fa[i] = 0.0
        if chain >= 2:
            fb[i] = 0.0
        if chain >= 3:
            fc[i] = 0.0
