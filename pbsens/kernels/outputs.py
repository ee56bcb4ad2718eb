"""The model's outputs and their Jacobians at many times in one compiled call.

A PEtab evaluation needs ``y = h(t, x, p)`` and, for the gradient, ``dh/dx`` and ``dh/dp``
at every measurement time of a condition. Called one by one from Python that is three
dispatcher calls per time (Boehm: 48 calls, 0.2 ms of a 2.8 ms evaluation); :func:`outputs_into`
loops in compiled code over the model's functions passed by address, as the march does
(:mod:`pbsens.kernels.march`, :func:`bind`).
"""
from numba import types

from .march import _Compiled
from .signatures import mat, matrix_fn, matrix_fn_sig, njit_quiet, tens, vec, vector_fn, vector_fn_sig

__all__ = ["outputs_into", "bind_outputs"]


@njit_quiet(types.void(vector_fn, matrix_fn, matrix_fn, vec, mat, mat, vec, mat, tens, tens, types.boolean),
             cache=True)
def outputs_into(out, jac_x, jac_p, t, X, P, c, Y, JX, JP, with_jacobians):
    """``Y[g] = h(t[g], X[g], P[g])`` and, with ``with_jacobians``, ``JX[g] = dh/dx``,
    ``JP[g] = dh/dp`` there, for every ``g`` (rows of ``X``, ``P`` contiguous)."""
    for g in range(t.shape[0]):
        out(t[g], X[g], P[g], c, Y[g])
        if with_jacobians:
            jac_x(t[g], X[g], P[g], c, JX[g])
            jac_p(t[g], X[g], P[g], c, JP[g])


def bind_outputs(fns):
    """``run(t, X, P, c, Y, JX, JP, with_jacobians)`` with the model's output functions bound."""
    out = _Compiled(fns.out_into, vector_fn_sig)
    jac_x = _Compiled(fns.out_jac_x_into, matrix_fn_sig)
    jac_p = _Compiled(fns.out_jac_p_into, matrix_fn_sig)

    def run(t, X, P, c, Y, JX, JP, with_jacobians):
        outputs_into(out, jac_x, jac_p, t, X, P, c, Y, JX, JP, bool(with_jacobians))

    return run

