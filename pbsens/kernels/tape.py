"""Generic interpreter of model tapes (:mod:`pbsens.kernels.tape_format`), compiled once per machine.

Each ``tape_*_into`` function has the signature of the corresponding generated model
function (:mod:`pbsens.kernels.signatures`) and reads its own program from the model
constants ``c``: a large model costs no numba compilation at all, only its tape.
Every call allocates one register file (``n_registers`` floats, from the tape's
register allocation): the programs are long, so this is small next to the work.
"""
import math

import numpy as np
from numba import njit

from . import tape_format as F
from .signatures import init_mat_sig, init_vec_sig, jacs_fn_sig, matrix_fn_sig, vector_fn_sig

__all__ = ["tape_rhs_into", "tape_jac_x_into", "tape_jac_p_into", "tape_jacs_into", "tape_x0_into",
           "tape_dx0_dp_into", "tape_out_into", "tape_out_jac_x_into", "tape_out_jac_p_into",
           "tape_jac_x_data_into", "tape_jac_p_data_into"]

_H, _SW, _OW = F.HEADER, F.SLOT_WIDTH, F.OP_WIDTH
(CONST, LOADT, LOADX, LOADP, COPY, ADD, SUB, MUL, DIV, NEG, POW, SQUARE, RECIP, SQRT, POWI) = (
    F.CONST, F.LOADT, F.LOADX, F.LOADP, F.COPY, F.ADD, F.SUB, F.MUL, F.DIV, F.NEG, F.POW, F.SQUARE,
    F.RECIP, F.SQRT, F.POWI)
(EXP, LOG, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, TANH, FLOOR, CEIL, ABS, SIGN, HEAVISIDE) = (
    F.EXP, F.LOG, F.SIN, F.COS, F.TAN, F.ASIN, F.ACOS, F.ATAN, F.SINH, F.COSH, F.TANH, F.FLOOR, F.CEIL,
    F.ABS, F.SIGN, F.HEAVISIDE)
(MIN, MAX, LT, LE, GT, GE, EQ, NE, AND, OR, NOT, SELECT) = (
    F.MIN, F.MAX, F.LT, F.LE, F.GT, F.GE, F.EQ, F.NE, F.AND, F.OR, F.NOT, F.SELECT)


@njit(cache=True, error_model="numpy", boundscheck=False)
def _run(c, slot, t, x, p, r):
    """Execute program ``slot`` of the tape ``c`` into the registers ``r`` (loads ``t``, ``x``,
    ``p`` and the constant pool first)."""
    nx, np_ = int(c[2]), int(c[3])
    r[0] = t
    for i in range(x.shape[0]):
        r[1 + i] = x[i]
    for j in range(np_):
        r[1 + nx + j] = p[j]
    cs, nc = int(c[8]), int(c[7])
    o = 1 + nx + np_
    for k in range(nc):
        r[o + k] = c[cs + k]
    h = _H + _SW * slot
    start = int(c[h])
    n = int(c[h + 1])
    for k in range(n):
        i = start + _OW * k
        op = int(c[i])
        d = int(c[i + 1])
        a = int(c[i + 2])
        if op == MUL:
            r[d] = r[a] * r[int(c[i + 3])]
        elif op == ADD:
            r[d] = r[a] + r[int(c[i + 3])]
        elif op == SUB:
            r[d] = r[a] - r[int(c[i + 3])]
        elif op == DIV:
            r[d] = r[a] / r[int(c[i + 3])]
        elif op == NEG:
            r[d] = -r[a]
        elif op == SQUARE:
            v = r[a]
            r[d] = v * v
        elif op == RECIP:
            r[d] = 1.0 / r[a]
        elif op == POWI:
            r[d] = r[a] ** int(c[i + 3])
        elif op == POW:
            r[d] = r[a] ** r[int(c[i + 3])]
        elif op == SQRT:
            r[d] = math.sqrt(r[a])
        elif op == EXP:
            r[d] = math.exp(r[a])
        elif op == LOG:
            r[d] = math.log(r[a])
        elif op == COPY:
            r[d] = r[a]
        elif op == SELECT:
            if r[a] != 0.0:
                r[d] = r[int(c[i + 3])]
        elif op == SIN:
            r[d] = math.sin(r[a])
        elif op == COS:
            r[d] = math.cos(r[a])
        elif op == TAN:
            r[d] = math.tan(r[a])
        elif op == ASIN:
            r[d] = math.asin(r[a])
        elif op == ACOS:
            r[d] = math.acos(r[a])
        elif op == ATAN:
            r[d] = math.atan(r[a])
        elif op == SINH:
            r[d] = math.sinh(r[a])
        elif op == COSH:
            r[d] = math.cosh(r[a])
        elif op == TANH:
            r[d] = math.tanh(r[a])
        elif op == FLOOR:
            r[d] = math.floor(r[a])
        elif op == CEIL:
            r[d] = math.ceil(r[a])
        elif op == ABS:
            r[d] = abs(r[a])
        elif op == SIGN:
            v = r[a]
            r[d] = 0.0 if v == 0 else math.copysign(1.0, v)
        elif op == HEAVISIDE:
            r[d] = 1.0 if r[a] >= 0 else 0.0
        elif op == MIN:
            v = r[int(c[i + 3])]
            r[d] = v if v < r[a] else r[a]
        elif op == MAX:
            v = r[int(c[i + 3])]
            r[d] = v if v > r[a] else r[a]
        elif op == LT:
            r[d] = 1.0 if r[a] < r[int(c[i + 3])] else 0.0
        elif op == LE:
            r[d] = 1.0 if r[a] <= r[int(c[i + 3])] else 0.0
        elif op == GT:
            r[d] = 1.0 if r[a] > r[int(c[i + 3])] else 0.0
        elif op == GE:
            r[d] = 1.0 if r[a] >= r[int(c[i + 3])] else 0.0
        elif op == EQ:
            r[d] = 1.0 if r[a] == r[int(c[i + 3])] else 0.0
        elif op == NE:
            r[d] = 1.0 if r[a] != r[int(c[i + 3])] else 0.0
        elif op == AND:
            r[d] = 1.0 if (r[a] != 0.0 and r[int(c[i + 3])] != 0.0) else 0.0
        elif op == OR:
            r[d] = 1.0 if (r[a] != 0.0 or r[int(c[i + 3])] != 0.0) else 0.0
        elif op == NOT:
            r[d] = 1.0 if r[a] == 0.0 else 0.0
        else:
            r[d] = np.nan   # unreachable: the emitter writes only the opcodes above


@njit(cache=True)
def _registers(c):
    return np.empty(max(int(c[5]), 1))


@njit(cache=True, boundscheck=False)
def _scatter(c, slot, second, r, flat):
    h = _H + _SW * slot + (2 if second else 0)
    start = int(c[h + 2])
    for k in range(int(c[h + 3])):
        i = start + 2 * k
        flat[int(c[i])] = r[int(c[i + 1])]


@njit(cache=True, boundscheck=False)
def _data(c, slot, r, data):
    h = _H + _SW * slot
    start = int(c[h + 2])
    for k in range(int(c[h + 3])):
        data[k] = r[int(c[start + 2 * k + 1])]


@njit(cache=True)
def _vector(t, x, p, c, out, slot):
    r = _registers(c)
    _run(c, slot, t, x, p, r)
    out[:] = 0.0
    _scatter(c, slot, False, r, out)


@njit(cache=True)
def _matrix(t, x, p, c, M, slot):
    r = _registers(c)
    _run(c, slot, t, x, p, r)
    M[:, :] = 0.0
    _scatter(c, slot, False, r, M.reshape(M.size))


@njit(vector_fn_sig, cache=True)
def tape_rhs_into(t, x, p, c, out):
    _vector(t, x, p, c, out, F.RHS)


@njit(matrix_fn_sig, cache=True)
def tape_jac_x_into(t, x, p, c, A):
    _matrix(t, x, p, c, A, F.JX)


@njit(matrix_fn_sig, cache=True)
def tape_jac_p_into(t, x, p, c, B):
    _matrix(t, x, p, c, B, F.JP)


@njit(jacs_fn_sig, cache=True)
def tape_jacs_into(t, x, p, c, A, B):
    r = _registers(c)
    _run(c, F.JXP, t, x, p, r)
    A[:, :] = 0.0
    B[:, :] = 0.0
    _scatter(c, F.JXP, False, r, A.reshape(A.size))
    _scatter(c, F.JXP, True, r, B.reshape(B.size))


@njit(vector_fn_sig, cache=True)
def tape_jac_x_data_into(t, x, p, c, data):
    r = _registers(c)
    _run(c, F.JX, t, x, p, r)
    _data(c, F.JX, r, data)


@njit(vector_fn_sig, cache=True)
def tape_jac_p_data_into(t, x, p, c, data):
    r = _registers(c)
    _run(c, F.JP, t, x, p, r)
    _data(c, F.JP, r, data)


@njit(init_vec_sig, cache=True)
def tape_x0_into(p, c, out):
    _vector(0.0, np.empty(0), p, c, out, F.X0)


@njit(init_mat_sig, cache=True)
def tape_dx0_dp_into(p, c, S0):
    _matrix(0.0, np.empty(0), p, c, S0, F.DX0)


@njit(vector_fn_sig, cache=True)
def tape_out_into(t, x, p, c, out):
    _vector(t, x, p, c, out, F.H)


@njit(matrix_fn_sig, cache=True)
def tape_out_jac_x_into(t, x, p, c, H):
    _matrix(t, x, p, c, H, F.HX)


@njit(matrix_fn_sig, cache=True)
def tape_out_jac_p_into(t, x, p, c, H):
    _matrix(t, x, p, c, H, F.HP)
