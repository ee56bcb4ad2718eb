"""Helpers for the expression dialect of :mod:`pbsens.model.spec`, shared by the importers.

The SBML and SBtab readers both emit dialect text: they need the dialect's
function names, number literals written the same way, the value of a
name-free expression, the names an expression uses, fresh names for ids the
dialect would misread, and the sum of stoichiometric coefficient times flux
that makes a species' right-hand side.
None of this needs sympy (:mod:`pbsens.model.symbolic` is where expressions
become sympy objects).
"""
from __future__ import annotations

import ast
import keyword
import math

from ..errors import ModelError

__all__ = ["DIALECT_FUNCTIONS", "number_text", "eval_numeric", "names_in", "fresh_name", "flux_term",
           "flux_sum"]

#: Function names of the expression dialect (see pbsens.model.symbolic.FUNCTIONS).
DIALECT_FUNCTIONS = frozenset({
    "exp", "log", "ln", "log10", "log2", "sqrt", "pow", "abs", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "floor", "ceiling", "ceil",
    "min", "max", "piecewise", "heaviside"})


def number_text(v) -> str:
    """A float as a dialect literal (integral values without a decimal point)."""
    v = float(v)
    if not math.isfinite(v):
        raise ModelError(f"non-finite number {v!r} cannot be written in a model expression")
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


_NUMERIC_FUNCS = {
    "exp": math.exp, "ln": math.log, "log10": math.log10, "log2": math.log2,
    "sqrt": math.sqrt, "pow": math.pow, "abs": abs, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "floor": math.floor,
    "ceiling": math.ceil, "ceil": math.ceil, "min": min, "max": max,
    "log": lambda x, b=None: math.log(x) if b is None else math.log(x, b),
}


def eval_numeric(expr: str):
    """Value of a name-free arithmetic dialect expression, or None if it has names
    (other than ``pi``), conditions, or cannot be evaluated."""
    try:
        tree = ast.parse(expr.replace("^", "**"), mode="eval")
    except SyntaxError:
        return None

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return float(n.value)
        if isinstance(n, ast.Name) and n.id == "pi":
            return math.pi
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            op = type(n.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.Div:
                return a / b
            if op in (ast.Pow, ast.BitXor):
                return float(a ** b)
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords
                and n.func.id in _NUMERIC_FUNCS):
            return float(_NUMERIC_FUNCS[n.func.id](*[ev(a) for a in n.args]))
        raise ValueError("not numeric")

    try:
        v = ev(tree)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
        return None
    return v if isinstance(v, float) and math.isfinite(v) else None


def names_in(expr: str) -> set:
    """Identifiers an expression uses (function names of calls excluded)."""
    tree = ast.parse(expr.replace("^", "**"), mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def fresh_name(name, taken, reserved=()):
    """``name`` with ``_`` appended until it is not in ``taken``, not a Python keyword
    and not in ``reserved``."""
    while name in taken or keyword.iskeyword(name) or name in reserved:
        name += "_"
    return name


def flux_term(coef, flux):
    """One signed term of a flux sum: ``+flux``, ``-flux``, ``+2*flux``... ('' for 0)."""
    if coef == 0:
        return ""
    if coef == 1:
        return f"+{flux}"
    if coef == -1:
        return f"-{flux}"
    return f"{'+' if coef > 0 else '-'}{number_text(abs(coef))}*{flux}"


def flux_sum(terms):
    """Signed terms (as from :func:`flux_term`) joined into one expression; "0" when none."""
    return "".join(terms).lstrip("+") or "0"
