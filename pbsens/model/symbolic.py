"""From a :class:`~pbsens.model.spec.ModelSpec` to sympy: right-hand side and Jacobians.

Expressions are parsed with Python's :mod:`ast` and translated node by node into
sympy objects through a whitelist (:func:`parse_expression`): user text is never
passed to ``eval`` (``sympy.sympify``/``parse_expr`` would evaluate it).
Definitions are substituted in order; ``A = df/dx`` and ``B = df/dp`` (METHOD.md
eq. (2.3)) are exact symbolic derivatives.
"""
from __future__ import annotations

import ast
import unicodedata
import io
import tokenize
from dataclasses import dataclass

import sympy as sp

from ..errors import ModelError
from .spec import ModelSpec

__all__ = ["FUNCTIONS", "parse_expression", "SymbolicModel", "derive"]


def _log(x, base=None):
    return sp.log(x) if base is None else sp.log(x, base)


def as_number(e):
    """A condition used as a number: 1 where it holds, 0 elsewhere (SBML's booleans in
    arithmetic); anything else unchanged."""
    return sp.Piecewise((sp.S.One, e), (sp.S.Zero, True)) if _is_condition(e) else e


def as_condition(e):
    """A number used as a condition: true where it is not 0 (SBML Level 3 Version 2); the
    condition itself for a boolean used as a number (``as_number``'s 0/1)."""
    if _is_condition(e):
        return e
    if isinstance(e, sp.Piecewise) and len(e.args) == 2 and e.args[0].expr == 1 and e.args[1].expr == 0 \
            and e.args[1].cond is sp.true:
        return e.args[0].cond
    return sp.Ne(e, 0)


def _piecewise(*args):
    if len(args) % 2 == 0:
        raise ValueError("piecewise needs an odd number of arguments (value, condition, ..., otherwise): "
                         "the last, the value where no condition holds, is missing")
    pieces = []
    for i in range(0, len(args) - 1, 2):
        pieces.append((as_number(args[i]), as_condition(args[i + 1])))
    pieces.append((as_number(args[-1]), True))
    return sp.Piecewise(*pieces)


def _is_condition(e):
    return isinstance(e, (sp.logic.boolalg.Boolean, sp.core.relational.Relational)) and not isinstance(e, sp.Expr)


#: Largest integer power accepted in an expression (``x**n``; larger ones stall code generation).
MAX_POWER = 1000
#: Longest expression text accepted (characters).
MAX_EXPRESSION_LENGTH = 100_000


def _power(a, b):
    if b.is_Number and abs(b) > MAX_POWER:
        raise ValueError(f"the exponent {b} is beyond the largest power allowed, {MAX_POWER}")
    return sp.Pow(a, b)


class floor(sp.floor):  # noqa: N801 - the name printers and the tape emitter look up
    """``floor`` whose derivative is 0: piecewise constant, so the Jacobians hold the zero part
    (as for a step in ``heaviside``); sympy's own leaves ``Derivative(floor(x), x)``, which no
    backend can evaluate."""

    def fdiff(self, argindex=1):
        return sp.S.Zero


class ceiling(sp.ceiling):  # noqa: N801
    """``ceiling`` whose derivative is 0 (see :class:`floor`)."""

    def fdiff(self, argindex=1):
        return sp.S.Zero


#: Functions a model expression may call, and their sympy meaning.
FUNCTIONS = {
    "exp": sp.exp, "log": _log, "ln": sp.log,
    "log10": lambda x: sp.log(x, 10), "log2": lambda x: sp.log(x, 2),
    "sqrt": sp.sqrt, "pow": _power, "abs": sp.Abs,
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan,
    "asin": sp.asin, "acos": sp.acos, "atan": sp.atan,
    "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh,
    "floor": floor, "ceiling": ceiling, "ceil": ceiling,
    "min": sp.Min, "max": sp.Max,
    "piecewise": _piecewise, "heaviside": lambda x: sp.Heaviside(x, 1),
}
#: Named constants, used only where the model does not define the name itself.
CONSTANTS = {"pi": sp.pi}

_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
    ast.Pow: _power,
}


def _caret_to_power(text: str) -> str:
    """Read ``^`` as ``**`` (SBML/SBtab infix), with power's precedence, at the token level."""
    if "^" not in text:
        return text
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError):
        return text  # let ast report the syntax error
    out = [(tok.type, "**" if tok.type == tokenize.OP and tok.string == "^" else tok.string) for tok in toks]
    return tokenize.untokenize(out).strip()
_CMP = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge,
        ast.Eq: sp.Eq, ast.NotEq: sp.Ne}


def _number(value):
    """Exact rationals for literals such as ``4/63`` keep sympy's algebra clean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"unsupported literal {value!r}")
    if isinstance(value, int):
        return sp.Integer(value)
    if not float(value).is_integer() or abs(value) >= 2 ** 53:
        # beyond 2**53 a float's integer value is not the number written (avogadro's 6.02214179e23
        # would become 602214179000000006225920): keep it a float, which code generation prints as one
        return sp.Float(value, 17)
    return sp.Integer(int(value))


def parse_expression(text: str, symbols: dict, where: str = "expression") -> sp.Expr:
    """Parse ``text`` into a sympy expression using only whitelisted constructs.

    Parameters
    ----------
    text : str
        The expression, in the dialect described in :mod:`pbsens.model.spec`.
    symbols : dict of str -> sympy.Expr
        Names the expression may use (states, parameters, time, definitions).
    where : str
        Context for error messages ("definition 'g' of model 'Chua'").

    Raises
    ------
    ModelError
        Syntax errors, unknown names, unsupported operators or functions.
    """
    if not isinstance(text, str):
        raise ModelError(f"{where}: an expression must be a string, got {text!r}")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ModelError(f"{where}: the expression is {len(text)} characters long, beyond the limit of "
                         f"{MAX_EXPRESSION_LENGTH} (starts {text[:40]!r})")
    if unicodedata.normalize("NFKC", text) != text:
        bad = sorted({ch for ch in text if unicodedata.normalize("NFKC", ch) != ch})
        raise ModelError(f"{where}: {text!r} contains character(s) {', '.join(map(repr, bad))} that Python reads "
                         "as different ones (Unicode NFKC normalisation); write the names in their plain form")
    try:
        return _parse(text, symbols, where)
    except (RecursionError, MemoryError):
        raise ModelError(f"{where}: the expression is too deeply nested or too large to parse "
                         f"(starts {text[:40]!r})") from None


def _parse(text, symbols, where):
    try:
        tree = ast.parse(_caret_to_power(text.strip()), mode="eval")
    except SyntaxError as exc:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ModelError(f"{where}: cannot parse {shown!r}: {exc.msg}") from None

    def visit(node):
        if isinstance(node, ast.Expression):
            return visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return sp.true if node.value else sp.false   # a condition; 1/0 where used as a number
            try:
                return _number(node.value)
            except ModelError as exc:
                raise ModelError(f"{where}: {exc} in {text!r}") from None
        if isinstance(node, ast.Name):
            if node.id in symbols:
                return symbols[node.id]
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise ModelError(f"{where}: unknown name {node.id!r} in {text!r}")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = as_number(visit(node.left)), as_number(visit(node.right))
            try:
                return _BINOPS[type(node.op)](a, b)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"{where}: {text!r}: {exc}") from None
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return -as_number(visit(node.operand))
            if isinstance(node.op, ast.UAdd):
                return as_number(visit(node.operand))
            if isinstance(node.op, ast.Not):
                return sp.Not(as_condition(visit(node.operand)))
        if isinstance(node, ast.BoolOp):
            op = sp.And if isinstance(node.op, ast.And) else sp.Or
            return op(*[as_condition(visit(v)) for v in node.values])
        if isinstance(node, ast.Compare):
            parts, left = [], visit(node.left)
            for op, comp in zip(node.ops, node.comparators):
                if type(op) not in _CMP:
                    raise ModelError(f"{where}: comparison {type(op).__name__} is not allowed in {text!r}")
                right = as_number(visit(comp))
                parts.append(_CMP[type(op)](as_number(left), right))
                left = right
            return parts[0] if len(parts) == 1 else sp.And(*parts)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.keywords:
                raise ModelError(f"{where}: only plain calls like exp(x) are allowed in {text!r}")
            name = node.func.id
            if name not in FUNCTIONS or name in symbols:
                raise ModelError(f"{where}: unknown function {name!r} in {text!r}; "
                                 f"allowed: {', '.join(sorted(FUNCTIONS))}")
            args = [visit(a) for a in node.args]
            if name != "piecewise":     # piecewise reads its conditions as conditions
                args = [as_number(a) for a in args]
            try:
                return FUNCTIONS[name](*args)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"{where}: bad call {name}(...) in {text!r}: {exc}") from None
        raise ModelError(f"{where}: {type(node).__name__} is not allowed in {text!r}")

    expr = as_number(visit(tree))   # a condition as a whole expression is its 0/1 value
    if expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
        raise ModelError(f"{where}: {text!r} is not finite (it simplifies to {expr})")
    if expr.has(sp.I):
        raise ModelError(f"{where}: {text!r} is complex (it simplifies to {expr}); a model must be real")
    return expr


@dataclass
class SymbolicModel:
    """Sympy form of a model, with symbols ``t``, ``x_i``, ``p_j`` in file order."""

    t: sp.Symbol
    x: list
    p: list
    f: sp.Matrix             # (nx, 1)
    A: sp.Matrix             # df/dx (nx, nx)
    B: sp.Matrix             # df/dp (nx, np)
    x0: sp.Matrix            # (nx, 1), expressions of p
    dx0_dp: sp.Matrix        # (nx, np)
    h: sp.Matrix             # outputs (ny, 1)
    dh_dx: sp.Matrix         # (ny, nx)
    dh_dp: sp.Matrix         # (ny, np)


def environment(spec: ModelSpec):
    """Symbols ``t``, ``x_i``, ``p_j`` and the name environment, definitions expanded in order.

    Each definition is parsed with the symbols known before it, so every entry of the
    environment is an expression of ``t``, ``x`` and ``p`` only.
    """
    t = sp.Symbol("t", real=True)
    xs = [sp.Symbol(f"x_{i}", real=True) for i in range(len(spec.states))]
    ps = [sp.Symbol(f"p_{j}", real=True) for j in range(len(spec.parameters))]
    env = {spec.time: t}
    env.update({s.name: xs[i] for i, s in enumerate(spec.states)})
    env.update({q.name: ps[j] for j, q in enumerate(spec.parameters)})
    for d in spec.definitions:
        env[d.name] = parse_expression(d.expression, env, f"model {spec.name!r}: definition {d.name!r}")
    return t, xs, ps, env


def expand_definitions(spec: ModelSpec):
    """Parse everything; return (t, xs, ps, rhs list, output list, x0 list).

    Each definition is parsed with the symbols known before it and replaced by its
    (already expanded) expression, so later expressions see only ``t``, ``x``, ``p``.
    """
    t, xs, ps, env = environment(spec)
    return (t, xs, ps) + parse_equations(spec, env, ps)


def parse_equations(spec: ModelSpec, env, ps):
    """``(rhs list, output list, x0 list)``: the right-hand sides and outputs parsed in ``env``
    (names -> sympy expressions), the initial values in the parameters ``ps`` alone."""
    model = f"model {spec.name!r}"
    rhs = [parse_expression(spec.odes[s], env, f"{model}: right-hand side of {s!r}") for s in spec.state_names]
    outs = [parse_expression(o.expression, env, f"{model}: output {o.name!r}") for o in spec.outputs]
    penv = {q.name: ps[j] for j, q in enumerate(spec.parameters)}
    x0 = []
    for s in spec.states:
        if isinstance(s.value, str):
            x0.append(parse_expression(s.value, penv, f"{model}: initial value of {s.name!r} "
                                                      "(may use parameters only)"))
        else:
            x0.append(_number(float(s.value)))
    return rhs, outs, x0


def derive(spec: ModelSpec) -> SymbolicModel:
    """Symbolic right-hand side, Jacobians, initial state and outputs of ``spec``."""
    t, xs, ps, rhs, outs, x0 = expand_definitions(spec)
    f = sp.Matrix(rhs)
    x0m = sp.Matrix(x0)
    h = sp.Matrix(outs) if outs else sp.zeros(0, 1)
    np_ = len(ps)
    return SymbolicModel(
        t=t, x=xs, p=ps, f=f,
        A=f.jacobian(xs),
        B=f.jacobian(ps) if np_ else sp.zeros(len(xs), 0),
        x0=x0m,
        dx0_dp=x0m.jacobian(ps) if np_ else sp.zeros(len(xs), 0),
        h=h,
        dh_dx=h.jacobian(xs) if outs else sp.zeros(0, len(xs)),
        dh_dp=h.jacobian(ps) if (outs and np_) else sp.zeros(len(outs), np_),
    )
