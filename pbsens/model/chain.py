"""Sparse symbolic Jacobians by the chain rule through a model's definitions.

:func:`pbsens.model.symbolic.derive` substitutes every definition into the
right-hand side and differentiates the expanded expressions: for a reaction
network whose right-hand side sums dozens of fluxes, each flux built on
conserved totals, that makes expressions of tens of thousands of nodes and a
common-subexpression pass over all Jacobian entries at once (superlinear).

Here the definitions stay intermediate variables ``v_k``. Each definition's
gradient in ``x`` and ``p`` is derived once, sparsely, from the gradients of the
definitions it uses (forward mode over the definitions' graph)::

    dv_k/dx_j = d e_k/d x_j + sum_m d e_k/d v_m * dv_m/dx_j

and every non-trivial gradient entry becomes a variable ``vx_k_j``/``vp_k_j``.
For ``f = N v(x, p)`` this is ``A = N dv/dx``: every flux is differentiated once.
Only structural non-zeros are kept. The cost is linear in the size of the model
text times the fan-out of the definitions.

:func:`derive_chain` returns a :class:`ChainModel`; :meth:`ChainModel.needed`
lists the intermediate variables a set of targets needs, in an order where every
variable comes after the ones it uses.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .spec import ModelSpec
from .symbolic import parse_equations, parse_expression

__all__ = ["ChainModel", "derive_chain"]


@dataclass
class ChainModel:
    """Right-hand side, outputs and their sparse Jacobians over intermediate variables.

    ``inter`` maps each intermediate symbol to its expression (of ``t``, ``x``,
    ``p`` and earlier intermediates), in a valid evaluation order. Sparse
    Jacobians are dicts ``{(row, col): expr}`` holding structural non-zeros only.
    """

    t: sp.Symbol
    x: list
    p: list
    inter: dict
    f: list
    h: list
    x0: list
    A: dict
    B: dict
    Hx: dict
    Hp: dict
    _order: dict = field(default_factory=dict)

    def needed(self, exprs) -> list:
        """The intermediate symbols the expressions use (transitively), in evaluation order."""
        inter = self.inter
        seen = set()
        stack = [s for e in exprs for s in e.free_symbols if s in inter]
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            stack.extend(u for u in inter[s].free_symbols if u in inter and u not in seen)
        if not self._order:
            self._order.update({s: i for i, s in enumerate(inter)})
        return sorted(seen, key=self._order.__getitem__)


def _diff(e, s):
    """``de/ds``, recursing by hand through sums and products into the factors that hold ``s``.

    Same result as ``sympy.diff``, which differentiates every term and factor (also those
    free of ``s``) through its general machinery: that dominated import time on
    networks with long sums of fluxes.
    """
    if e.is_Add:
        return sp.Add(*[_diff(a, s) for a in e.args if s in a.free_symbols])
    if e.is_Mul:
        args = e.args
        terms = []
        for i, a in enumerate(args):
            if s in a.free_symbols:
                d = _diff(a, s)
                if d != 0:
                    terms.append(sp.Mul(*args[:i], d, *args[i + 1:]))
        return sp.Add(*terms)
    if e == s:
        return sp.S.One
    return sp.diff(e, s)


def _gradient(e, t, xidx, pidx, gx, gp):
    """Sparse ``(de/dx, de/dp)`` of ``e`` as dicts, through the intermediates' gradients."""
    rx, rp = {}, {}
    for s in sorted(e.free_symbols, key=sp.default_sort_key):
        if s == t:
            continue
        if s in xidx:
            d = _diff(e, s)
            if d != 0:
                j = xidx[s]
                rx[j] = rx[j] + d if j in rx else d
        elif s in pidx:
            d = _diff(e, s)
            if d != 0:
                j = pidx[s]
                rp[j] = rp[j] + d if j in rp else d
        elif s in gx:
            gsx, gsp = gx[s], gp[s]
            if not gsx and not gsp:
                continue
            d = _diff(e, s)
            if d == 0:
                continue
            for j, g in gsx.items():
                rx[j] = rx[j] + d * g if j in rx else d * g
            for j, g in gsp.items():
                rp[j] = rp[j] + d * g if j in rp else d * g
    rx = {j: v for j, v in rx.items() if v != 0}
    rp = {j: v for j, v in rp.items() if v != 0}
    return rx, rp


def derive_chain(spec: ModelSpec) -> ChainModel:
    """The sparse chain-rule form of ``spec`` (see the module docstring)."""
    t = sp.Symbol("t", real=True)
    xs = [sp.Symbol(f"x_{i}", real=True) for i in range(len(spec.states))]
    ps = [sp.Symbol(f"p_{j}", real=True) for j in range(len(spec.parameters))]
    xidx = {s: i for i, s in enumerate(xs)}
    pidx = {s: j for j, s in enumerate(ps)}
    env = {spec.time: t}
    env.update({s.name: xs[i] for i, s in enumerate(spec.states)})
    env.update({q.name: ps[j] for j, q in enumerate(spec.parameters)})
    model = f"model {spec.name!r}"
    inter, gx, gp = {}, {}, {}
    for k, d in enumerate(spec.definitions):
        e = parse_expression(d.expression, env, f"{model}: definition {d.name!r}")
        if e.is_Atom:  # numbers and plain names are substituted: 1/c with c = 1 simplifies
            env[d.name] = e
            continue
        v = sp.Symbol(f"v_{k}", real=True)
        env[d.name] = v
        inter[v] = e
        rx, rp = _gradient(e, t, xidx, pidx, gx, gp)
        for tag, grad in (("vx", rx), ("vp", rp)):
            for j, g in list(grad.items()):
                if not g.is_Atom:
                    s = sp.Symbol(f"{tag}_{k}_{j}", real=True)
                    inter[s] = g
                    grad[j] = s
        gx[v], gp[v] = rx, rp

    f, h, x0 = parse_equations(spec, env, ps)

    def jacobians(rows):
        Jx, Jp = {}, {}
        for i, e in enumerate(rows):
            rx, rp = _gradient(e, t, xidx, pidx, gx, gp)
            Jx.update({(i, j): v for j, v in rx.items()})
            Jp.update({(i, j): v for j, v in rp.items()})
        return Jx, Jp

    A, B = jacobians(f)
    Hx, Hp = jacobians(h)
    return ChainModel(t=t, x=xs, p=ps, inter=inter, f=f, h=h, x0=x0, A=A, B=B, Hx=Hx, Hp=Hp)
