"""Sympy -> model tape (:mod:`pbsens.kernels.tape_format`): the cold half of the tape backend.

The right-hand side and its sparse Jacobians come from the chain rule through the
model's definitions (:func:`pbsens.model.chain.derive_chain`: no global CSE, no
substitution of definitions, structural non-zeros only). Every expression of every
target is emitted once into one single-assignment program (shared subexpressions are
found by identity of the sympy objects, which the chain derivation already shares);
each program slot is then cut out of it by dead-code elimination and given a compact
register file by linear-scan register allocation.

Imported only on a cache miss (it imports sympy); :mod:`pbsens.model.tape` loads
stored tapes without it.
"""
from __future__ import annotations

import sys

import numpy as np
import sympy as sp

from ..errors import ModelError
from ..kernels import tape_format as F
from .chain import derive_chain
from .spec import ModelSpec

__all__ = ["emit_tape"]

_FUNCS = {
    sp.exp: F.EXP, sp.log: F.LOG, sp.sin: F.SIN, sp.cos: F.COS, sp.tan: F.TAN, sp.asin: F.ASIN,
    sp.acos: F.ACOS, sp.atan: F.ATAN, sp.sinh: F.SINH, sp.cosh: F.COSH, sp.tanh: F.TANH,
    sp.floor: F.FLOOR, sp.ceiling: F.CEIL, sp.Abs: F.ABS, sp.sign: F.SIGN,
}
_REL = {"<": F.LT, "<=": F.LE, ">": F.GT, ">=": F.GE, "==": F.EQ, "!=": F.NE}
_HALF = sp.Rational(1, 2)


class _Emitter:
    """Single-assignment program over registers 0, 1, ... (one per emitted node)."""

    def __init__(self, t, xs, ps, inter, where):
        self.ops = []      # (op, dst, a, b) with dst == index
        self.memo = {}
        self.inter = inter
        self.where = where
        self.memo[t] = self._op(F.LOADT, 0, 0.0)
        self.leaf = {}
        for i, s in enumerate(xs):
            self.leaf[s] = (F.LOADX, i)
        for j, s in enumerate(ps):
            self.leaf[s] = (F.LOADP, j)
        self.consts = {}

    def _op(self, op, a=0, b=0.0):
        self.ops.append((op, len(self.ops), a, b))
        return len(self.ops) - 1

    def _fold(self, op, args, emit):
        """The binary ``op`` applied left to right over ``args``, each emitted by ``emit``."""
        acc = emit(args[0])
        for a in args[1:]:
            acc = self._op(op, acc, float(emit(a)))
        return acc

    def const(self, v):
        v = float(v)
        if not np.isfinite(v):
            raise ModelError(f"{self.where}: an expression evaluates to the non-finite constant {v}")
        r = self.consts.get(v)
        if r is None:
            r = self.consts[v] = self._op(F.CONST, 0, v)
        return r

    def emit(self, e):
        r = self.memo.get(e)
        if r is None:
            r = self.memo[e] = self._emit(e)
        return r

    def _emit(self, e):  # noqa: C901 - one branch per construct
        if e.is_Symbol:
            if e in self.leaf:
                op, i = self.leaf[e]
                return self._op(op, i)
            if e in self.inter:
                return self.emit(self.inter[e])
            raise ModelError(f"{self.where}: unknown symbol {e} in a derived expression")
        if e.is_Number or e.is_NumberSymbol:
            return self.const(e)
        if e.is_Add:
            args = e.args
            acc = self.emit(args[0])
            for a in args[1:]:
                if a.is_Mul and a.args[0] is sp.S.NegativeOne:
                    acc = self._op(F.SUB, acc, self.emit(sp.Mul._from_args(a.args[1:])))
                else:
                    acc = self._op(F.ADD, acc, self.emit(a))
            return acc
        if e.is_Mul:
            return self._mul(e)
        if e.is_Pow:
            return self._pow(e.base, e.exp)
        if isinstance(e, sp.Piecewise):
            args = e.args
            if args[-1].cond is not sp.true:
                raise ModelError(f"{self.where}: piecewise {e} has no 'otherwise' value")
            acc = self.emit(args[-1].expr)
            for pair in reversed(args[:-1]):
                cond = self.cond(pair.cond)
                val = self.emit(pair.expr)
                dst = self._op(F.COPY, acc)
                self.ops.append((F.SELECT, dst, cond, float(val)))
                acc = dst
            return acc
        if isinstance(e, sp.Heaviside):
            return self._op(F.HEAVISIDE, self.emit(e.args[0]))
        if isinstance(e, sp.DiracDelta):
            return self.const(0.0)   # as the code printer: the solvers stop at steps in time
        if isinstance(e, (sp.Min, sp.Max)):
            return self._fold(F.MIN if isinstance(e, sp.Min) else F.MAX, e.args, self.emit)
        if isinstance(e, sp.Derivative):
            raise ModelError(f"{self.where}: cannot generate code for the derivative {e}: the expression is "
                             "not differentiable in closed form")
        f = next((c for c in type(e).__mro__ if c in _FUNCS), type(e))   # symbolic.floor is a sp.floor
        if f in _FUNCS and len(e.args) == 1:
            return self._op(_FUNCS[f], self.emit(e.args[0]))
        raise ModelError(f"{self.where}: the tape backend cannot evaluate {f.__name__} (in {e}); "
                         "use backend='numba'")

    def cond(self, c):
        if c is sp.true:
            return self.const(1.0)
        if c is sp.false:
            return self.const(0.0)
        if c.is_Relational and c.rel_op in _REL:
            return self._op(_REL[c.rel_op], self.emit(c.lhs), float(self.emit(c.rhs)))
        if isinstance(c, (sp.And, sp.Or)):
            return self._fold(F.AND if isinstance(c, sp.And) else F.OR, c.args, self.cond)
        if isinstance(c, sp.Not):
            return self._op(F.NOT, self.cond(c.args[0]))
        raise ModelError(f"{self.where}: the tape backend cannot evaluate the condition {c}")

    def _mul(self, e):
        coef, num, den = 1.0, [], []
        for a in e.args:
            if a.is_Number:
                coef *= float(a)
            elif a.is_Pow and a.exp.is_Number and a.exp < 0:
                den.append(a.base if a.exp == -1 else sp.Pow(a.base, -a.exp))
            else:
                num.append(a)
        neg = coef < 0
        coef = abs(coef)
        acc = None
        if coef != 1.0 or not num:
            acc = self.const(coef)
        for a in num:
            r = self.emit(a)
            acc = r if acc is None else self._op(F.MUL, acc, float(r))
        if den:
            d = self.emit(den[0])
            for a in den[1:]:
                d = self._op(F.MUL, d, float(self.emit(a)))
            acc = self._op(F.DIV, acc, float(d))
        return self._op(F.NEG, acc) if neg else acc

    def _pow(self, b, x):
        rb = self.emit(b)
        if x.is_Integer:
            n = int(x)
            if n == 2:
                return self._op(F.SQUARE, rb)
            if n == 1:
                return rb
            if n < 0:
                # 1/b**|n|: the interpreter's integer power raises ZeroDivisionError at b = 0 for n < 0,
                # even in a piecewise branch not taken (SBML Test Suite case 01488); RECIP gives inf
                return self._op(F.RECIP, self._pow(b, -x))
            return self._op(F.POWI, rb, float(n))
        if x == _HALF:
            return self._op(F.SQRT, rb)
        if x == -_HALF:
            return self._op(F.RECIP, self._op(F.SQRT, rb))
        return self._op(F.POW, rb, float(self.emit(x)))


def _fixed_registers(ops, nx, np_):
    """``{ssa id: register}`` of the loads and constants (registers filled before a program runs)."""
    fixed, pool = {}, []
    for k, (o, d, a, b) in enumerate(ops):
        if o == F.LOADT:
            fixed[k] = 0
        elif o == F.LOADX:
            fixed[k] = 1 + a
        elif o == F.LOADP:
            fixed[k] = 1 + nx + a
        elif o == F.CONST:
            fixed[k] = 1 + nx + np_ + len(pool)
            pool.append(b)
    return fixed, np.array(pool, dtype=np.float64)


def _cut(ops, outs, fixed, n_fixed):
    """Dead-code elimination and register allocation of one slot.

    ``ops`` is the whole single-assignment program (list of (op, dst, a, b)), ``outs``
    the registers the slot returns, ``fixed`` the loads' and constants' registers.
    Returns ``(program rows, output registers, n_registers)``.
    """
    n = len(ops)
    reads_b = F.BINARY | {F.SELECT}
    live = bytearray(n)
    for r in outs:
        live[r] = 1
    keep = []
    for k in range(n - 1, -1, -1):
        o, d, a, b = ops[k]
        if live[d] and k not in fixed:
            live[k] = 1
            keep.append(k)
            live[a] = 1
            if o in reads_b:
                live[int(b)] = 1
    keep.reverse()
    # last use (position in keep) of every register; outputs live to the end
    last = {}
    for pos, k in enumerate(keep):
        o, d, a, b = ops[k]
        last[a] = pos
        if o in reads_b:
            last[int(b)] = pos
        if d != k:          # SELECT reads its own destination
            last[d] = pos
    end = len(keep)
    for r in outs:
        last[r] = end
    phys = dict(fixed)
    free, n_reg = [], n_fixed
    rows = []
    frees_at = {}
    for pos, k in enumerate(keep):
        o, d, a, b = ops[k]
        pa = phys[a]
        pb = float(phys[int(b)]) if o in reads_b else b
        fr = frees_at.pop(pos, None)
        if fr:
            free.extend(fr)
        pd = phys.get(d)
        if pd is None:
            if free:
                pd = free.pop()
            else:
                pd = n_reg
                n_reg += 1
            phys[d] = pd
            lk = last.get(d, pos)
            if lk < end:
                frees_at.setdefault(lk + 1, []).append(pd)
        rows.append((o, pd, pa, pb))
    out_regs = np.array([phys[r] for r in outs], dtype=np.int64)
    prog = np.array(rows, dtype=np.float64).reshape(-1, F.OP_WIDTH)
    return prog, out_regs, n_reg


def _sparse_rows(d, ncols):
    """``{(i, j): e}`` -> (flat indices, exprs) in CSR order."""
    keys = sorted(d)
    return [i * ncols + j for i, j in keys], [d[k] for k in keys]


def emit_tape(spec: ModelSpec, cm=None) -> np.ndarray:
    """The tape (float64 array ``c``) of ``spec``; ``cm`` a :func:`derive_chain` result to reuse.

    Parsing keeps Python's recursion limit (an expression too deeply nested to parse is a
    ModelError, :func:`pbsens.model.symbolic.parse_expression`); only the emission, which
    recurses through chains of definitions, runs with a higher one.
    """
    cm = cm or derive_chain(spec)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100_000))
    try:
        return _emit_tape(spec, cm)
    except RecursionError:
        raise ModelError(f"model {spec.name!r}: its expressions are too deeply nested to evaluate") from None
    finally:
        sys.setrecursionlimit(old)


def _emit_tape(spec, cm):
    nx, np_, ny = len(cm.x), len(cm.p), len(cm.h)
    em = _Emitter(cm.t, cm.x, cm.p, cm.inter, f"model {spec.name!r}")
    dx0 = {}
    pidx = {s: j for j, s in enumerate(cm.p)}
    for i, e in enumerate(cm.x0):
        for s in e.free_symbols:       # once per entry: nx * np lookups were quadratic
            if s in pidx:
                d = sp.diff(e, s)
                if d != 0:
                    dx0[(i, pidx[s])] = d

    def vec(exprs):
        return list(range(len(exprs))), [em.emit(e) for e in exprs]

    def mat(d, ncols):
        idx, exprs = _sparse_rows(d, ncols)
        return idx, [em.emit(e) for e in exprs]

    targets = {
        F.RHS: [vec(cm.f)], F.JX: [mat(cm.A, nx)], F.JP: [mat(cm.B, np_)],
        F.X0: [vec(cm.x0)], F.DX0: [mat(dx0, np_)], F.H: [vec(cm.h)],
        F.HX: [mat(cm.Hx, nx)], F.HP: [mat(cm.Hp, np_)],
    }
    targets[F.JXP] = targets[F.JX] + targets[F.JP]
    ops = em.ops
    fixed, pool = _fixed_registers(ops, nx, np_)
    n_fixed = 1 + nx + np_ + pool.size
    progs, blocks, n_reg = [], [], n_fixed
    for s in range(F.N_SLOTS):
        outs = [r for _, regs in targets[s] for r in regs]
        prog, out_regs, nr = _cut(ops, outs, fixed, n_fixed)
        n_reg = max(n_reg, nr)
        progs.append(prog)
        bl, pos = [], 0
        for idx, regs in targets[s]:
            bl.append(np.column_stack([np.asarray(idx, dtype=np.float64).reshape(-1),
                                       out_regs[pos:pos + len(regs)].astype(np.float64)]).reshape(-1))
            pos += len(regs)
        blocks.append(bl)
    head = np.zeros(F.HEADER + F.SLOT_WIDTH * F.N_SLOTS)
    head[:8] = [F.MAGIC, F.FORMAT_VERSION, nx, np_, ny, n_reg, F.N_SLOTS, pool.size]
    head[8] = head.size
    parts, pos = [head, pool], head.size + pool.size
    for s in range(F.N_SLOTS):
        h = F.HEADER + F.SLOT_WIDTH * s
        head[h], head[h + 1] = pos, progs[s].shape[0]
        parts.append(progs[s].reshape(-1))
        pos += progs[s].size
        for q, bl in enumerate(blocks[s]):
            head[h + 2 + 2 * q], head[h + 3 + 2 * q] = pos, bl.size // 2
            parts.append(bl)
            pos += bl.size
    return np.concatenate(parts)
