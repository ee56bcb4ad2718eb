"""Read SBML models into a :class:`~pbsens.model.spec.ModelSpec` and write them back.

:func:`read_sbml` turns an SBML document (Level 2 or 3, read with libsbml) into
the plain-data model of :mod:`pbsens.model.spec`; :func:`to_sbml` writes a spec
(or a compiled model) as an SBML Level 3 Version 2 document with the same
equations. Both directions convert math through small, explicit walkers, so the
expression dialect of :mod:`pbsens.model.spec` is produced and consumed exactly.

How SBML maps onto a spec
-------------------------
* **States** are the species changed by reactions (not ``boundaryCondition``, not
  ``constant``), species with a rate rule, and parameters with a rate rule, in
  document order (species first). A species state is the quantity its SBML
  symbol denotes: the *concentration* for ``hasOnlySubstanceUnits="false"``
  species, the *amount* for ``hasOnlySubstanceUnits="true"`` species (and for
  species in 0-dimensional compartments). Kinetic laws are in amount/time, so
  for a concentration species in compartment ``V``::

      d[S]/dt = conversionFactor * (sum_r stoich_r * flux_r) / V

  and for an amount species ``dS/dt = conversionFactor * sum_r stoich_r * flux_r``.
  The conversion factor (species' or model's) is omitted when unset.
* **Reaction fluxes** become definitions named after the reactions' ids, using
  the kinetic law verbatim.
* **Local parameters** (``<localParameter>``, or ``<parameter>`` in a Level 2
  kinetic law) are promoted to global names ``<reactionid>__<paramid>`` (with a
  trailing ``_`` added while the name is taken); ``meta["local_parameters"]``
  maps each promoted name to ``[reaction id, local id]``.
* **Constants** are the global parameters, local parameters, compartments and
  species whose value never changes (no rule, no initial assignment; species
  that are constant, boundary species without a rule, and species no reaction
  changes). The *sensitivity parameters* (``spec.parameters``) are, by
  default, the global parameters of that kind (whether or not ``constant`` is
  set: without rules and events their value cannot change) and all local
  parameters. ``parameters=`` picks any constants instead (by spec name or SBML
  id). Every constant not picked becomes a *fixed numeric definition*
  ``name = value``; their values are also listed in ``meta["fixed"]``.
* **Compartments** are constants of that kind: by default a compartment is a
  fixed numeric definition (so it is not a sensitivity parameter unless you
  name it in ``parameters=``). A fixed compartment that no expression uses is
  left out of the definitions; ``meta["compartments"]`` lists every
  compartment's size.
* **Assignment rules** become definitions; **rate rules** are right-hand sides;
  definitions are ordered so that each uses only earlier ones (an algebraic
  loop raises :class:`ModelError`).
* **Initial assignments** give states their initial value as an expression of
  the sensitivity parameters (everything else is substituted by its initial
  value; SBML's initial time is 0). An initial assignment to a parameter or a
  compartment makes it a definition whose expression is that initial value.
  An initial assignment to a species reference (a constant stoichiometry
  computed once) is substituted into the stoichiometry.
* **Function definitions** are inlined (lambda bodies substituted); the
  ``time`` csymbol is ``spec.time`` (the csymbol's own name when it is a usable
  identifier, else ``t``); ``avogadro`` is the number 6.02214076e23.
* **Names** that are Python keywords, functions of the expression dialect or
  ``pi`` get a trailing ``_``; ``meta["sbml_names"]`` maps SBML id -> spec name
  for every renamed element.

Unsupported constructs raise one :class:`UnsupportedModelError` listing every
occurrence as ``(kind, id)``: events, algebraic rules, ``delay``, ``rateOf``,
fast reactions, stoichiometry math or species references changed by rules
(variable stoichiometry), compartments changed by rules (non-constant
compartments), reactions without a kinetic law, math without a dialect
equivalent (``factorial``, ``quotient``, ``rem``, non-finite numbers, package
math) and required SBML packages. Ignored (they do not affect the equations,
and are listed in ``meta["sbml_ignored"]`` with a warning): constraints and
optional (``required="false"``) packages. Units, notes and annotations are not
used (except the pbsens annotation written by :func:`to_sbml`).
"""
from __future__ import annotations

import ast
import json
import keyword
import math
import os
import re
import warnings
import heapq

from ..errors import ModelError, PbsensError, UnsupportedModelError
from .spec import Definition, ModelSpec, Quantity

__all__ = ["read_sbml", "to_sbml", "sbml_math_to_expression", "expression_to_sbml_math"]

#: Namespace of the annotation :func:`to_sbml` writes (time name, outputs, meta).
PBSENS_NS = "urn:pbsens:sbml-annotation:1"
_PREFIX = "pbsens"

#: Function names of the expression dialect (see pbsens.model.symbolic.FUNCTIONS).
_DIALECT_FUNCTIONS = frozenset({
    "exp", "log", "ln", "log10", "log2", "sqrt", "pow", "abs", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "floor", "ceiling", "ceil",
    "min", "max", "piecewise", "heaviside"})
#: Names an SBML id may not keep: they would be read as something else.
_RESERVED = _DIALECT_FUNCTIONS | {"pi"}

_AVOGADRO = 6.02214076e23

# Operator precedences of the emitted (Python) syntax, low to high.
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_UNARY, _P_POW, _P_ATOM = range(1, 10)


def _libsbml():
    try:
        import libsbml  # noqa: PLC0415 - optional dependency, imported lazily
    except ImportError:
        raise PbsensError("reading or writing SBML needs python-libsbml: "
                          "pip install pbsens[sbml]") from None
    return libsbml


# ============================================================ number formatting
def _num(v) -> str:
    """A float as a dialect literal (integral values without a decimal point)."""
    v = float(v)
    if not math.isfinite(v):
        raise ModelError(f"non-finite number {v!r} cannot be written in a model expression")
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _num_p(v):
    s = _num(v)
    return s, (_P_UNARY if s.startswith("-") else _P_ATOM)


def _wrap(item, below):
    """Parenthesise ``item = (text, prec)`` when its precedence is < ``below``."""
    s, p = item
    return f"({s})" if p < below else s


_NUMERIC_FUNCS = {
    "exp": math.exp, "ln": math.log, "log10": math.log10, "log2": math.log2,
    "sqrt": math.sqrt, "pow": math.pow, "abs": abs, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "floor": math.floor,
    "ceiling": math.ceil, "ceil": math.ceil, "min": min, "max": max,
    "log": lambda x, b=None: math.log(x) if b is None else math.log(x, b),
}


def _eval_numeric(expr: str):
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


def _names_in(expr: str) -> set:
    """Identifiers an expression uses (function names of calls excluded)."""
    tree = ast.parse(expr.replace("^", "**"), mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


# ======================================================= MathML -> dialect
class _MathToDialect:
    """Recursive walker over libsbml ``ASTNode`` trees emitting dialect strings.

    ``resolve(name) -> (text, precedence)`` maps an SBML identifier; ``fdefs`` maps
    function-definition ids to ``(bvar names, body ASTNode)`` for inlining.
    """

    def __init__(self, L, fdefs, time_name):
        self.L = L
        self.fdefs = fdefs
        self.time = time_name
        T = L
        self.simple = {
            T.AST_FUNCTION_ABS: "abs", T.AST_FUNCTION_ARCCOS: "acos", T.AST_FUNCTION_ARCSIN: "asin",
            T.AST_FUNCTION_ARCTAN: "atan", T.AST_FUNCTION_CEILING: "ceiling", T.AST_FUNCTION_COS: "cos",
            T.AST_FUNCTION_COSH: "cosh", T.AST_FUNCTION_EXP: "exp", T.AST_FUNCTION_FLOOR: "floor",
            T.AST_FUNCTION_LN: "log", T.AST_FUNCTION_SIN: "sin", T.AST_FUNCTION_SINH: "sinh",
            T.AST_FUNCTION_TAN: "tan", T.AST_FUNCTION_TANH: "tanh",
        }
        # functions without a dialect name: template over the argument "{x}" (already parenthesised)
        self.derived = {
            T.AST_FUNCTION_SEC: ("1/cos({x})", _P_MUL), T.AST_FUNCTION_CSC: ("1/sin({x})", _P_MUL),
            T.AST_FUNCTION_COT: ("cos({x})/sin({x})", _P_MUL),
            T.AST_FUNCTION_SECH: ("1/cosh({x})", _P_MUL), T.AST_FUNCTION_CSCH: ("1/sinh({x})", _P_MUL),
            T.AST_FUNCTION_COTH: ("cosh({x})/sinh({x})", _P_MUL),
            T.AST_FUNCTION_ARCSEC: ("acos(1/{x})", _P_ATOM), T.AST_FUNCTION_ARCCSC: ("asin(1/{x})", _P_ATOM),
            T.AST_FUNCTION_ARCCOT: ("atan(1/{x})", _P_ATOM),
            T.AST_FUNCTION_ARCSINH: ("log({x} + sqrt({x}**2 + 1))", _P_ATOM),
            T.AST_FUNCTION_ARCCOSH: ("log({x} + sqrt({x}**2 - 1))", _P_ATOM),
            T.AST_FUNCTION_ARCTANH: ("log((1 + {x})/(1 - {x}))/2", _P_MUL),
            T.AST_FUNCTION_ARCSECH: ("log(1/{x} + sqrt(1/{x}**2 - 1))", _P_ATOM),
            T.AST_FUNCTION_ARCCSCH: ("log(1/{x} + sqrt(1/{x}**2 + 1))", _P_ATOM),
            T.AST_FUNCTION_ARCCOTH: ("log(({x} + 1)/({x} - 1))/2", _P_MUL),
        }
        self.relational = {
            T.AST_RELATIONAL_EQ: "==", T.AST_RELATIONAL_NEQ: "!=", T.AST_RELATIONAL_LT: "<",
            T.AST_RELATIONAL_LEQ: "<=", T.AST_RELATIONAL_GT: ">", T.AST_RELATIONAL_GEQ: ">=",
        }
        self.handled = (set(self.simple) | set(self.derived) | set(self.relational) | {
            T.AST_PLUS, T.AST_MINUS, T.AST_TIMES, T.AST_DIVIDE, T.AST_POWER, T.AST_FUNCTION_POWER,
            T.AST_INTEGER, T.AST_REAL, T.AST_REAL_E, T.AST_RATIONAL, T.AST_NAME, T.AST_NAME_TIME,
            T.AST_NAME_AVOGADRO, T.AST_CONSTANT_E, T.AST_CONSTANT_PI, T.AST_CONSTANT_TRUE,
            T.AST_CONSTANT_FALSE, T.AST_FUNCTION, T.AST_FUNCTION_LOG, T.AST_FUNCTION_ROOT,
            T.AST_FUNCTION_PIECEWISE, T.AST_LOGICAL_AND, T.AST_LOGICAL_OR, T.AST_LOGICAL_NOT,
            T.AST_LOGICAL_XOR, T.AST_LOGICAL_IMPLIES, T.AST_FUNCTION_MAX, T.AST_FUNCTION_MIN})

    # ------------------------------------------------------------ public
    def convert(self, node, resolve, where):
        """Dialect string of ``node``; ``where`` names the element for errors."""
        if node is None:
            raise ModelError(f"{where}: the math element is missing")
        return self._expr(node, resolve, where, ())[0]

    def unsupported_kind(self, node):
        """Kind string for an unconvertible node, or None when it is supported."""
        L = self.L
        t = node.getType()
        if t == L.AST_FUNCTION_DELAY:
            return "delay"
        if t == L.AST_FUNCTION_RATE_OF:
            return "rateOf"
        if t in (L.AST_REAL, L.AST_REAL_E, L.AST_INTEGER, L.AST_RATIONAL) and not math.isfinite(node.getValue()):
            return "non-finite number"
        if t not in self.handled:
            name = node.getName() or f"type {t}"
            return f"math function {name!r}"
        return None

    # ----------------------------------------------------------- walker
    def _expr(self, node, resolve, where, stack):
        L = self.L
        t = node.getType()
        n = node.getNumChildren()
        kids = [node.getChild(i) for i in range(n)]

        def sub(k):
            return self._expr(k, resolve, where, stack)

        def need(lo, hi=None):
            if n < lo or (hi is not None and n > hi):
                name = node.getName() or f"operator type {t}"
                raise ModelError(f"{where}: {name} has {n} argument(s)")

        if t == L.AST_INTEGER:
            return _num_p(node.getInteger())
        if t in (L.AST_REAL, L.AST_REAL_E):
            v = node.getReal()
            if not math.isfinite(v):
                raise UnsupportedModelError(f"{where}: non-finite number {v}", [("non-finite number", where)])
            return _num_p(v)
        if t == L.AST_RATIONAL:
            num, den = node.getNumerator(), node.getDenominator()
            if den == 0:
                raise UnsupportedModelError(f"{where}: rational {num}/0", [("non-finite number", where)])
            s = f"{num}/{den}"
            return (f"-{-num}/{den}" if num < 0 else s), _P_MUL
        if t == L.AST_NAME:
            return resolve(node.getName())
        if t == L.AST_NAME_TIME:
            return self.time, _P_ATOM
        if t == L.AST_NAME_AVOGADRO:
            return _num_p(_AVOGADRO)
        if t == L.AST_CONSTANT_E:
            return "exp(1)", _P_ATOM
        if t == L.AST_CONSTANT_PI:
            return "pi", _P_ATOM
        if t == L.AST_CONSTANT_TRUE:
            return "0 == 0", _P_CMP
        if t == L.AST_CONSTANT_FALSE:
            return "0 != 0", _P_CMP
        if t == L.AST_PLUS:
            if n == 0:
                return "0", _P_ATOM
            if n == 1:
                return sub(kids[0])
            return " + ".join(_wrap(sub(k), _P_ADD) for k in kids), _P_ADD
        if t == L.AST_MINUS:
            need(1, 2)
            if n == 1:
                return "-" + _wrap(sub(kids[0]), _P_POW), _P_UNARY
            return f"{_wrap(sub(kids[0]), _P_ADD)} - {_wrap(sub(kids[1]), _P_MUL)}", _P_ADD
        if t == L.AST_TIMES:
            if n == 0:
                return "1", _P_ATOM
            if n == 1:
                return sub(kids[0])
            return "*".join(_wrap(sub(k), _P_MUL) for k in kids), _P_MUL
        if t == L.AST_DIVIDE:
            need(2, 2)
            return f"{_wrap(sub(kids[0]), _P_MUL)}/{_wrap(sub(kids[1]), _P_UNARY)}", _P_MUL
        if t in (L.AST_POWER, L.AST_FUNCTION_POWER):
            need(2, 2)
            return f"{_wrap(sub(kids[0]), _P_ATOM)}**{_wrap(sub(kids[1]), _P_ATOM)}", _P_POW
        if t in self.simple:
            need(1, 1)
            return f"{self.simple[t]}({sub(kids[0])[0]})", _P_ATOM
        if t in self.derived:
            need(1, 1)
            tpl, prec = self.derived[t]
            return tpl.format(x=f"({sub(kids[0])[0]})"), prec
        if t == L.AST_FUNCTION_LOG:
            need(1, 2)
            if n == 1:
                return f"log10({sub(kids[0])[0]})", _P_ATOM
            base, arg = sub(kids[0])[0], sub(kids[1])[0]
            if base in ("10", "10.0"):
                return f"log10({arg})", _P_ATOM
            if base in ("2", "2.0"):
                return f"log2({arg})", _P_ATOM
            return f"log({arg}, {base})", _P_ATOM
        if t == L.AST_FUNCTION_ROOT:
            need(1, 2)
            if n == 1:
                return f"sqrt({sub(kids[0])[0]})", _P_ATOM
            deg, arg = sub(kids[0]), sub(kids[1])
            if deg[0] in ("2", "2.0"):
                return f"sqrt({arg[0]})", _P_ATOM
            return f"{_wrap(arg, _P_ATOM)}**(1/{_wrap(deg, _P_ATOM)})", _P_POW
        if t in (L.AST_FUNCTION_MAX, L.AST_FUNCTION_MIN):
            need(1)
            fn = "max" if t == L.AST_FUNCTION_MAX else "min"
            return f"{fn}({', '.join(sub(k)[0] for k in kids)})", _P_ATOM
        if t == L.AST_FUNCTION_PIECEWISE:
            need(1)
            # children: value1, condition1, ..., [otherwise]; without otherwise the
            # value is undefined when no condition holds (as in SBML).
            return f"piecewise({', '.join(sub(k)[0] for k in kids)})", _P_ATOM
        if t in self.relational:
            need(2)
            op = self.relational[t]
            items = [_wrap(sub(k), _P_ADD) for k in kids]
            parts = [f"{items[i]} {op} {items[i + 1]}" for i in range(n - 1)]
            if len(parts) == 1:
                return parts[0], _P_CMP
            return " and ".join(f"({p})" for p in parts), _P_AND
        if t == L.AST_LOGICAL_AND or t == L.AST_LOGICAL_OR:
            is_and = t == L.AST_LOGICAL_AND
            if n == 0:
                return ("0 == 0", _P_CMP) if is_and else ("0 != 0", _P_CMP)
            if n == 1:
                return sub(kids[0])
            prec = _P_AND if is_and else _P_OR
            word = " and " if is_and else " or "
            return word.join(_wrap(sub(k), prec + 1) for k in kids), prec
        if t == L.AST_LOGICAL_NOT:
            need(1, 1)
            return "not " + _wrap(sub(kids[0]), _P_CMP), _P_NOT
        if t == L.AST_LOGICAL_XOR:
            if n == 0:
                return "0 != 0", _P_CMP
            acc = sub(kids[0])
            for k in kids[1:]:
                a, b = _wrap(acc, _P_ATOM), _wrap(sub(k), _P_ATOM)
                acc = (f"({a} and not {b}) or (not {a} and {b})", _P_OR)
            return acc
        if t == L.AST_LOGICAL_IMPLIES:
            need(2, 2)
            return f"not {_wrap(sub(kids[0]), _P_CMP)} or {_wrap(sub(kids[1]), _P_AND)}", _P_OR
        if t == L.AST_FUNCTION:
            return self._call(node, kids, resolve, where, stack)
        kind = self.unsupported_kind(node) or f"math function {node.getName()!r}"
        raise UnsupportedModelError(f"{where}: {kind} has no equivalent in pbsens model expressions",
                                    [(kind, where)])

    def _call(self, node, kids, resolve, where, stack):
        name = node.getName()
        if name not in self.fdefs:
            raise ModelError(f"{where}: call of unknown function {name!r}")
        if name in stack:
            raise ModelError(f"{where}: function definition {name!r} calls itself")
        bvars, body = self.fdefs[name]
        if len(kids) != len(bvars):
            raise ModelError(f"{where}: function {name!r} takes {len(bvars)} argument(s), "
                             f"called with {len(kids)}")
        args = {b: self._expr(k, resolve, where, stack) for b, k in zip(bvars, kids)}

        def body_resolve(sym):
            if sym in args:
                return args[sym]
            raise ModelError(f"function definition {name!r} uses {sym!r}, which is not one of its "
                             f"arguments ({', '.join(bvars) or 'none'})")

        if body is None:
            raise ModelError(f"function definition {name!r} has no body")
        return self._expr(body, body_resolve, f"function definition {name!r}", stack + (name,))


def sbml_math_to_expression(node, resolve=None, time_name="t", function_definitions=None,
                            where="math"):
    """Convert a libsbml ``ASTNode`` to a pbsens expression string.

    Parameters
    ----------
    node : libsbml.ASTNode
        The math to convert.
    resolve : callable, optional
        ``resolve(sbml_id) -> str`` gives the spec text for an identifier
        (default: the identifier itself).
    time_name : str
        Text for the ``time`` csymbol.
    function_definitions : dict, optional
        ``{id: (list of bvar names, body ASTNode)}`` for inlining calls.
    where : str
        Element named in error messages.

    Returns
    -------
    str
        The expression in the dialect of :mod:`pbsens.model.spec`.
    """
    L = _libsbml()
    res = (lambda s: (s, _P_ATOM)) if resolve is None else (lambda s: (resolve(s), _P_ATOM))
    return _MathToDialect(L, function_definitions or {}, time_name).convert(node, res, where)


# ======================================================= dialect -> MathML
_CMP_L3 = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_SAME_L3 = {"exp": "exp", "sqrt": "sqrt", "abs": "abs", "sin": "sin", "cos": "cos", "tan": "tan",
            "asin": "arcsin", "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh",
            "tanh": "tanh", "floor": "floor", "ceiling": "ceil", "ceil": "ceil", "ln": "ln"}


def expression_to_sbml_math(expr, symbols, time_name="t", where="expression"):
    """Convert a pbsens expression string to a libsbml ``ASTNode`` (MathML).

    The expression is parsed with :mod:`ast` (as pbsens parses it: ``^`` is ``**``)
    and written as an SBML L3 infix formula in which every identifier is replaced
    by a neutral placeholder, parsed with ``libsbml.parseL3Formula``, and the
    placeholders are then renamed; so ids that the L3 syntax reserves (``time``,
    ``avogadro``, ``inf``, ``pi``...) keep their meaning as plain identifiers.

    Parameters
    ----------
    expr : str
        Expression in the dialect of :mod:`pbsens.model.spec`.
    symbols : collection of str
        Identifiers the expression may use (besides ``time_name`` and ``pi``).
    time_name : str
        The model's time variable, written as the ``time`` csymbol.
    where : str
        Element named in error messages.

    Returns
    -------
    libsbml.ASTNode

    Raises
    ------
    ModelError
        Syntax errors, unknown names or functions, or a formula libsbml rejects.
    """
    L = _libsbml()
    try:
        # '^' is power with power's precedence (as pbsens.model.symbolic reads it)
        tree = ast.parse(str(expr).strip().replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ModelError(f"{where}: cannot parse {expr!r}: {exc.msg}") from None
    placeholders: dict[str, str] = {}

    def ph(name):
        if name not in placeholders:
            placeholders[name] = f"pbsensph{len(placeholders)}"
        return placeholders[name]

    def bad(msg):
        raise ModelError(f"{where}: {msg} in {expr!r}")

    def w(n):
        if isinstance(n, ast.Expression):
            return w(n.body)
        if isinstance(n, ast.Constant):
            v = n.value
            if isinstance(v, bool):
                return "true" if v else "false"
            if not isinstance(v, (int, float)):
                bad(f"unsupported literal {v!r}")
            return f"({_num(v)})"
        if isinstance(n, ast.Name):
            if n.id in symbols or n.id == time_name:
                return ph(n.id)
            if n.id == "pi":
                return "pi"
            bad(f"unknown name {n.id!r}")
        if isinstance(n, ast.BinOp):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "^", ast.BitXor: "^"}
            if type(n.op) not in ops:
                bad(f"operator {type(n.op).__name__} is not allowed")
            return f"({w(n.left)} {ops[type(n.op)]} {w(n.right)})"
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                return f"(-{w(n.operand)})"
            if isinstance(n.op, ast.UAdd):
                return w(n.operand)
            if isinstance(n.op, ast.Not):
                return f"(!{w(n.operand)})"
            bad(f"operator {type(n.op).__name__} is not allowed")
        if isinstance(n, ast.BoolOp):
            word = " && " if isinstance(n.op, ast.And) else " || "
            return "(" + word.join(w(v) for v in n.values) + ")"
        if isinstance(n, ast.Compare):
            parts, left = [], w(n.left)
            for op, comp in zip(n.ops, n.comparators):
                if type(op) not in _CMP_L3:
                    bad(f"comparison {type(op).__name__} is not allowed")
                right = w(comp)
                parts.append(f"({left} {_CMP_L3[type(op)]} {right})")
                left = right
            return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.keywords:
                bad("only plain calls like exp(x) are allowed")
            fn, args = n.func.id, [w(a) for a in n.args]
            if fn in symbols:
                bad(f"{fn!r} is a model symbol and cannot be called")

            def nargs(lo, hi):
                if not lo <= len(args) <= hi:
                    bad(f"{fn}() takes {lo}{'' if lo == hi else f' to {hi}'} argument(s), got {len(args)}")

            if fn in _SAME_L3:
                nargs(1, 1)
                return f"{_SAME_L3[fn]}({args[0]})"
            if fn == "log":
                nargs(1, 2)
                return f"ln({args[0]})" if len(args) == 1 else f"log({args[1]}, {args[0]})"
            if fn == "log10":
                nargs(1, 1)
                return f"log10({args[0]})"
            if fn == "log2":
                nargs(1, 1)
                return f"log(2, {args[0]})"
            if fn == "pow":
                nargs(2, 2)
                return f"({args[0]} ^ {args[1]})"
            if fn in ("min", "max"):
                nargs(1, 10 ** 6)
                return f"{fn}({', '.join(args)})"
            if fn == "piecewise":
                nargs(1, 10 ** 6)
                return f"piecewise({', '.join(args)})"
            if fn == "heaviside":
                nargs(1, 1)
                return f"piecewise(1, {args[0]} >= 0, 0)"
            bad(f"unknown function {fn!r}")
        bad(f"{type(n).__name__} is not allowed")

    formula = w(tree)
    settings = L.L3ParserSettings()
    settings.setParseLog(L.L3P_PARSE_LOG_AS_LN)
    settings.setParseAvogadroCsymbol(False)
    node = L.parseL3FormulaWithSettings(formula, settings)
    if node is None:
        raise ModelError(f"{where}: libsbml cannot parse {expr!r} (as {formula!r}): "
                         f"{L.getLastParseL3Error()}")
    back = {v: k for k, v in placeholders.items()}

    def rename(nd):
        if nd.getType() == L.AST_NAME and nd.getName() in back:
            real = back[nd.getName()]
            if real == time_name:
                nd.setType(L.AST_NAME_TIME)
            nd.setName(real)
        elif nd.getType() == L.AST_NAME:
            raise ModelError(f"{where}: unexpected name {nd.getName()!r} in {expr!r} (as {formula!r})")
        for i in range(nd.getNumChildren()):
            rename(nd.getChild(i))

    rename(node)
    return node


# ================================================================ reading
def read_sbml(path, parameters=None) -> ModelSpec:
    """Read an SBML file into a validated :class:`~pbsens.model.spec.ModelSpec`.

    See the module docstring for how SBML elements map onto the spec.

    Parameters
    ----------
    path : str or os.PathLike
        The SBML file (any level/version libsbml reads).
    parameters : list of str, optional
        The sensitivity parameters, by spec name (e.g. ``"R1__k"`` for a local
        parameter ``k`` of reaction ``R1``) or SBML id. Any constant quantity may
        be named: global or local parameters, compartments, and species that no
        reaction or rule changes. Constants not named become fixed numeric
        definitions. Default: all global parameters not set by rules or initial
        assignments, and all local parameters.

    Returns
    -------
    ModelSpec

    Raises
    ------
    ModelError
        Unreadable or invalid SBML (libsbml's errors are quoted), missing
        values, algebraic loops, or a bad ``parameters`` entry.
    UnsupportedModelError
        The model uses constructs pbsens cannot represent; ``.unsupported``
        lists every one as ``(kind, id)``.
    """
    L = _libsbml()
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelError(f"SBML file {path!r} does not exist")
    doc = L.readSBMLFromFile(path)
    source = f"SBML file {path!r}"
    _raise_on_errors(L, doc, source, "cannot be read")
    if doc.getModel() is None:
        raise ModelError(f"{source} contains no <model>")
    reader = _SbmlReader(L, doc, source, path)
    reader.scan()
    doc.setConsistencyChecks(L.LIBSBML_CAT_UNITS_CONSISTENCY, False)
    doc.setConsistencyChecks(L.LIBSBML_CAT_MODELING_PRACTICE, False)
    doc.checkConsistency()
    _raise_on_errors(L, doc, source, "is not valid SBML")
    reader.raise_unsupported()
    return reader.build(parameters)


def _raise_on_errors(L, doc, source, what):
    errs = [doc.getError(i) for i in range(doc.getNumErrors())]
    errs = [e for e in errs if e.getSeverity() >= L.LIBSBML_SEV_ERROR]
    if errs:
        lines = [f"line {e.getLine()}: {e.getShortMessage()}: {e.getMessage().strip()}" for e in errs[:10]]
        more = f"\n  ... and {len(errs) - 10} more" if len(errs) > 10 else ""
        raise ModelError(f"{source} {what} ({len(errs)} error(s)):\n  " + "\n  ".join(lines) + more)


def _elem_id(el, kind, i):
    """An element's id, else its metaid, else '<kind> #i' (1-based)."""
    ident = el.getIdAttribute() if hasattr(el, "getIdAttribute") else el.getId()
    if ident:
        return ident
    if el.isSetMetaId() and el.getMetaId():
        return el.getMetaId()
    return f"{kind} #{i + 1}"


class _SbmlReader:
    """One SBML model on its way to a ModelSpec (see :func:`read_sbml`)."""

    def __init__(self, L, doc, source, path):
        self.L = L
        self.doc = doc
        self.m = doc.getModel()
        self.src = source
        self.path = path
        self.unsupported: list = []
        self.ignored: list = []
        self.time_names: set = set()
        m = self.m
        self.fdefs = {}
        for i in range(m.getNumFunctionDefinitions()):
            fd = m.getFunctionDefinition(i)
            lam = fd.getMath()
            if lam is None or lam.getType() != L.AST_LAMBDA:
                raise ModelError(f"{source}: function definition {fd.getId()!r} has no lambda")
            nch = lam.getNumChildren()
            bvars = [lam.getChild(j).getName() for j in range(nch - 1)]
            self.fdefs[fd.getId()] = (bvars, lam.getChild(nch - 1) if nch else None)
        self.walker = _MathToDialect(L, self.fdefs, "t")

    # ------------------------------------------------------------ scanning
    def _add(self, kind, ident):
        if (kind, ident) not in self.unsupported:
            self.unsupported.append((kind, ident))

    def _scan_math(self, node, owner):
        if node is None:
            return
        kind = self.walker.unsupported_kind(node)
        if kind:
            self._add(kind, owner)
        if node.getType() == self.L.AST_NAME_TIME:
            self.time_names.add(node.getName() or "")
        for i in range(node.getNumChildren()):
            self._scan_math(node.getChild(i), owner)

    def scan(self):
        """Collect every unsupported construct (raised later, all at once)."""
        L, m, doc = self.L, self.m, self.doc
        # SBML packages exist from Level 3 on (libsbml attaches layout/render plugins to
        # Level 2 documents by itself: those are annotations there)
        for i in range(doc.getNumPlugins() if doc.getLevel() >= 3 else 0):
            pkg = doc.getPlugin(i).getPackageName()
            if pkg == "l3v2extendedmath":     # libsbml's internal name for L3V2 core math
                continue
            if doc.getPackageRequired(pkg):
                self._add("package", pkg)
            else:
                self.ignored.append(("package", pkg))
        for i in range(doc.getNumUnknownPackages()):
            uri = doc.getUnknownPackageURI(i)
            prefix = doc.getUnknownPackagePrefix(i)
            if doc.getPackageRequired(uri):
                self._add("package", prefix or uri)
            else:
                self.ignored.append(("package", prefix or uri))
        for i in range(m.getNumEvents()):
            self._add("event", _elem_id(m.getEvent(i), "event", i))
        for i in range(m.getNumConstraints()):
            self.ignored.append(("constraint", _elem_id(m.getConstraint(i), "constraint", i)))
        comp_ids = {m.getCompartment(i).getId() for i in range(m.getNumCompartments())}
        sref_ids = set()
        for i in range(m.getNumReactions()):
            r = m.getReaction(i)
            rid = r.getId()
            if r.isSetFast() and r.getFast():
                self._add("fast reaction", rid)
            if r.getKineticLaw() is None:
                self._add("reaction without kinetic law", rid)
            else:
                self._scan_math(r.getKineticLaw().getMath(), rid)
            for lst in (r.getListOfReactants(), r.getListOfProducts()):
                for j in range(lst.size()):
                    sr = lst.get(j)
                    sid = sr.getId() if sr.isSetId() else ""
                    if sid:
                        sref_ids.add(sid)
                    if hasattr(sr, "isSetStoichiometryMath") and sr.isSetStoichiometryMath():
                        self._add("stoichiometry math", sid or f"{rid}:{sr.getSpecies()}")
        for i in range(m.getNumRules()):
            rule = m.getRule(i)
            if rule.isAlgebraic():
                self._add("algebraic rule", _elem_id(rule, "algebraic rule", i))
                continue
            var = rule.getVariable()
            if var in comp_ids:
                self._add("non-constant compartment", var)
            elif var in sref_ids:
                self._add("variable stoichiometry", var)
            self._scan_math(rule.getMath(), var)
        for i in range(m.getNumInitialAssignments()):
            ia = m.getInitialAssignment(i)
            self._scan_math(ia.getMath(), ia.getSymbol())
        for fid, (_, body) in self.fdefs.items():
            self._scan_math(body, fid)

    def raise_unsupported(self):
        if self.unsupported:
            listing = ", ".join(f"{k} {i!r}" for k, i in self.unsupported)
            raise UnsupportedModelError(
                f"{self.src} uses SBML constructs pbsens cannot represent: {listing}", self.unsupported)

    # ------------------------------------------------------------ building
    def build(self, parameters):
        L, m = self.L, self.m
        src = self.src
        if self.ignored:
            warnings.warn(f"{src}: ignored (no effect on the equations): "
                          + ", ".join(f"{k} {i!r}" for k, i in self.ignored), stacklevel=3)
        comps = {c.getId(): c for c in (m.getCompartment(i) for i in range(m.getNumCompartments()))}
        species = {s.getId(): s for s in (m.getSpecies(i) for i in range(m.getNumSpecies()))}
        params = {p.getId(): p for p in (m.getParameter(i) for i in range(m.getNumParameters()))}
        reactions = {r.getId(): r for r in (m.getReaction(i) for i in range(m.getNumReactions()))}
        self.comps, self.species, self.params, self.reactions = comps, species, params, reactions
        assign, rate = {}, {}
        for i in range(m.getNumRules()):
            rule = m.getRule(i)
            (assign if rule.isAssignment() else rate)[rule.getVariable()] = rule.getMath()
        ia = {}
        for i in range(m.getNumInitialAssignments()):
            x = m.getInitialAssignment(i)
            ia[x.getSymbol()] = x.getMath()
        self.assign, self.rate, self.ia = assign, rate, ia
        annotation = self._read_annotation()

        # ---- species references, stoichiometry and reaction participants
        srefs = {}            # sref id -> SpeciesReference
        participants = {}     # rid -> list of (species id, sign, SpeciesReference)
        for rid, r in reactions.items():
            parts = []
            for sign, lst in ((-1, r.getListOfReactants()), (1, r.getListOfProducts())):
                for j in range(lst.size()):
                    sr = lst.get(j)
                    if sr.isSetId() and sr.getId():
                        srefs[sr.getId()] = sr
                    parts.append((sr.getSpecies(), sign, sr))
            participants[rid] = parts
        self.srefs = srefs

        # ---- roles
        changed = set()   # species changed by reactions
        for rid, parts in participants.items():
            for sid, _, _ in parts:
                sp = species.get(sid)
                if sp is None:
                    raise ModelError(f"{src}: reaction {rid!r} uses unknown species {sid!r}")
                if not sp.getBoundaryCondition() and not sp.getConstant():
                    changed.add(sid)
        states = [s for s in species if s in rate or (s in changed and s not in assign)]
        states += [p for p in params if p in rate]
        state_set = set(states)

        # ---- names
        time_name = self._time_name(annotation)
        self.time = time_name
        self.walker.time = time_name
        all_ids = set(comps) | set(species) | set(params) | set(reactions)
        taken = set(all_ids) | {time_name}
        names, renamed = {}, {}
        for ident in list(comps) + list(species) + list(params) + list(reactions):
            new = ident
            if new in _RESERVED or keyword.iskeyword(new) or new == time_name:
                while new in taken or new in _RESERVED or keyword.iskeyword(new) or new == time_name:
                    new += "_"
                taken.add(new)
                renamed[ident] = new
            names[ident] = new
        local = {}            # (rid, local id) -> (spec name, value)
        local_meta = {}
        for rid, r in reactions.items():
            kl = r.getKineticLaw()
            lst = kl.getListOfLocalParameters() if self.m.getLevel() >= 3 else kl.getListOfParameters()
            for j in range(lst.size()):
                lp = lst.get(j)
                new = f"{names[rid]}__{lp.getId()}"
                while new in taken or keyword.iskeyword(new):
                    new += "_"
                taken.add(new)
                value = lp.getValue()
                if not lp.isSetValue() or not math.isfinite(value):
                    raise ModelError(f"{src}: local parameter {lp.getId()!r} of reaction {rid!r} has no "
                                     f"finite value")
                local[(rid, lp.getId())] = (new, float(value))
                local_meta[new] = [rid, lp.getId()]
        self.names = names
        self.local = local

        # ---- constants (candidate sensitivity parameters), by spec name
        candidates = {}       # spec name -> (sbml id or (rid, lid), kind)
        for cid, c in comps.items():
            if cid not in ia:
                candidates[names[cid]] = (cid, "compartment")
        for sid in species:
            if sid not in state_set and sid not in assign and sid not in ia:
                candidates[names[sid]] = (sid, "species")
        for pid in params:
            if pid not in state_set and pid not in assign and pid not in ia:
                candidates[names[pid]] = (pid, "parameter")
        for key, (nm, _) in local.items():
            candidates[nm] = (key, "local parameter")
        by_sbml_id = {v[0]: k for k, v in candidates.items() if isinstance(v[0], str)}

        if parameters is None:
            selected = [n for n, (_, kind) in candidates.items() if kind in ("parameter", "local parameter")]
        else:
            if isinstance(parameters, str):
                parameters = [parameters]
            selected = []
            for p in parameters:
                nm = p if p in candidates else by_sbml_id.get(p)
                if nm is None:
                    why = self._why_not_candidate(p, state_set)
                    raise ModelError(f"{src}: parameters= names {p!r}, which {why}; constants that can be "
                                     f"sensitivity parameters: {', '.join(candidates) or 'none'}")
                if nm not in selected:
                    selected.append(nm)
        self.selected = set(selected)
        self.candidates = candidates

        # ---- numeric values of the candidates (species: from the initial values)
        self._init_cache, self._init_busy = {}, []
        self._numeric_mode = True
        values = {nm: self._candidate_value(*candidates[nm]) for nm in selected}

        # ---- parameters
        spec_params = []
        for nm in selected:
            v = values[nm]
            if v is None:
                key, kind = candidates[nm]
                raise ModelError(f"{src}: {kind} {key!r} cannot be a sensitivity parameter: its value "
                                 f"is not a number")
            spec_params.append(Quantity(nm, float(v)))

        # ---- initial values in terms of the selected parameters
        self._init_cache, self._init_busy = {}, []
        self._numeric_mode = False
        spec_states = []
        for sid in states:
            expr = self._init(sid)
            v = _eval_numeric(expr)
            spec_states.append(Quantity(names[sid], v if v is not None else expr))

        # ---- definitions (natural order; sorted topologically below)
        defs = []        # (name, expression, sbml id)
        fixed_meta = {}
        sizeless = []
        for nm, (key, kind) in candidates.items():
            if nm in self.selected:
                continue
            if kind == "compartment" and self._candidate_value(key, kind) is None:
                sizeless.append(nm)      # an error only if an expression uses it (checked below)
                continue
            expr = self._init(key)       # a number unless it depends on sensitivity parameters
            v = _eval_numeric(expr)
            if v is not None:
                fixed_meta[nm] = v
            defs.append((nm, expr, key))
        for ident in list(comps) + list(params):
            if ident in ia and ident not in state_set:
                defs.append((names[ident], self._init(ident), ident))
        for sid in species:
            if sid in ia and sid not in state_set and sid not in assign:
                defs.append((names[sid], self._init(sid), sid))
        for i in range(m.getNumRules()):
            rule = m.getRule(i)
            if rule.isAssignment():
                var = rule.getVariable()
                if var not in names:
                    raise ModelError(f"{src}: assignment rule for unknown symbol {var!r}")
                defs.append((names[var], self._convert(rule.getMath(), f"assignment rule for {var!r}"), var))
        for rid, r in reactions.items():
            defs.append((names[rid], self._convert(r.getKineticLaw().getMath(), f"kinetic law of reaction "
                                                   f"{rid!r}", rid), rid))

        # ---- right-hand sides
        odes = {}
        for ident in states:
            if ident in rate:
                odes[names[ident]] = self._convert(rate[ident], f"rate rule for {ident!r}")
            else:
                odes[names[ident]] = self._species_rhs(ident, participants)

        # ---- outputs (marked by to_sbml's annotation) and unused compartments
        out_names = set(annotation.get("outputs", ()))
        used = set()
        for e in list(odes.values()) + [d[1] for d in defs] + [s.value for s in spec_states
                                                                   if isinstance(s.value, str)]:
            used |= _names_in(e)
        outputs = []
        if out_names:
            keep = []
            for d in defs:
                if d[0] in out_names and d[2] in assign and d[0] not in used:
                    outputs.append(Definition(d[0], d[1]))
                else:
                    keep.append(d)
            defs = keep
            used = set()
            for e in list(odes.values()) + [d[1] for d in defs] + [o.expression for o in outputs]:
                used |= _names_in(e)
        for nm in sizeless:
            if nm in used:
                raise ModelError(f"{src}: compartment {candidates[nm][0]!r} has no size, but an expression "
                                 f"or a species concentration needs it")
        compartments_meta = {}
        for cid, c in comps.items():
            size = c.getSize()
            compartments_meta[names[cid]] = float(size) if c.isSetSize() and math.isfinite(size) else None
        defs = [d for d in defs if not (d[2] in comps and d[0] not in used and d[0] not in self.selected)]
        for nm in list(fixed_meta):
            if nm not in {d[0] for d in defs}:
                del fixed_meta[nm]
        definitions = _toposort(defs, src)

        # ---- meta
        meta = dict(annotation.get("meta", {}))
        meta["sbml"] = {"file": self.path, "level": self.doc.getLevel(), "version": self.doc.getVersion(),
                        "model_id": m.getId()}
        if renamed:
            meta["sbml_names"] = renamed
        if local_meta:
            meta["local_parameters"] = local_meta
        if fixed_meta:
            meta["fixed"] = fixed_meta
        if compartments_meta:
            meta["compartments"] = compartments_meta
        if self.ignored:
            meta["sbml_ignored"] = [list(x) for x in self.ignored]
        name = annotation.get("name") or m.getId() or m.getName() or os.path.splitext(os.path.basename(self.path))[0]
        title = annotation.get("title", m.getName() if m.isSetName() else "")
        spec = ModelSpec(name=name, states=spec_states, parameters=spec_params, odes=odes,
                         definitions=definitions, outputs=outputs, time=time_name, title=title, meta=meta)
        return spec.validate()

    # ----------------------------------------------------------- helpers
    def _why_not_candidate(self, p, state_set):
        ids = {nm: i for i, nm in self.names.items()}
        ident = ids.get(p, p)
        if ident in state_set:
            return "is a state (changed by reactions or a rate rule)"
        if ident in self.assign:
            return "is set by an assignment rule"
        if ident in self.ia:
            return "is set by an initial assignment"
        if ident in self.reactions:
            return "is a reaction"
        return "is not in the model"

    def _read_annotation(self):
        """The pbsens annotation written by :func:`to_sbml` ({} when absent)."""
        ann = self.m.getAnnotation()
        out = {}
        if ann is None:
            return out
        for i in range(ann.getNumChildren()):
            node = ann.getChild(i)
            if node.getURI() != PBSENS_NS or node.getName() != "spec":
                continue
            for key in ("name", "title", "time"):
                if node.hasAttr(key):
                    out[key] = node.getAttrValue(key)
            for j in range(node.getNumChildren()):
                ch = node.getChild(j)
                text = "".join(ch.getChild(k).getCharacters() for k in range(ch.getNumChildren()))
                if ch.getName() == "outputs":
                    out["outputs"] = text.split()
                elif ch.getName() == "meta":
                    try:
                        meta = json.loads(text)
                    except json.JSONDecodeError:
                        meta = None
                    if isinstance(meta, dict):
                        out["meta"] = meta
        return out

    def _time_name(self, annotation):
        ids = {self.m.getCompartment(i).getId() for i in range(self.m.getNumCompartments())}
        ids |= {self.m.getSpecies(i).getId() for i in range(self.m.getNumSpecies())}
        ids |= {self.m.getParameter(i).getId() for i in range(self.m.getNumParameters())}
        ids |= {self.m.getReaction(i).getId() for i in range(self.m.getNumReactions())}

        def ok(nm):
            return (isinstance(nm, str) and nm.isidentifier() and nm.isascii() and not keyword.iskeyword(nm)
                    and nm not in _RESERVED and nm not in ids)

        wanted = [annotation.get("time")] + sorted(n.strip() for n in self.time_names)
        for nm in wanted:
            if ok(nm):
                return nm
        for nm in ("t", "time", "t_", "time_"):
            if ok(nm):
                return nm
        nm = "time_"
        while not ok(nm):
            nm += "_"
        return nm

    def _resolver(self, rid=None):
        """resolve(id) -> (text, prec) for rhs/definitions (names)."""
        names, srefs, local = self.names, self.srefs, self.local

        def resolve(ident):
            if rid is not None and (rid, ident) in local:
                return local[(rid, ident)][0], _P_ATOM
            if ident in names:
                return names[ident], _P_ATOM
            if ident in srefs:
                text = self._stoich(srefs[ident])
                return text, (_P_ATOM if _eval_numeric(text) is not None and not text.startswith("-") else _P_OR)
            raise ModelError(f"{self.src}: unknown symbol {ident!r}")

        return resolve

    def _convert(self, node, where, rid=None):
        return self.walker.convert(node, self._resolver(rid), f"{self.src}: {where}")

    def _stoich(self, sr):
        """Stoichiometry of a species reference as text (number, or expression of parameters)."""
        if sr.isSetId() and sr.getId() in self.ia:
            saved = self._numeric_mode
            self._numeric_mode = False
            try:
                return self._init(sr.getId())
            finally:
                self._numeric_mode = saved
        v = sr.getStoichiometry()
        if self.m.getLevel() < 3 and hasattr(sr, "getDenominator"):
            v = v / sr.getDenominator()
        if not math.isfinite(v):
            warnings.warn(f"{self.src}: species reference to {sr.getSpecies()!r} in reaction "
                          f"{sr.getParentSBMLObject().getParentSBMLObject().getId()!r} has no stoichiometry; "
                          f"using 1", stacklevel=5)
            v = 1.0
        return _num(v)

    def _compartment_of(self, sp):
        cid = sp.getCompartment()
        c = self.comps.get(cid)
        if c is None:
            raise ModelError(f"{self.src}: species {sp.getId()!r} is in unknown compartment {cid!r}")
        return c

    def _amount_only(self, sp):
        c = self._compartment_of(sp)
        return sp.getHasOnlySubstanceUnits() or c.getSpatialDimensionsAsDouble() == 0

    def _candidate_value(self, key, kind):
        if kind == "local parameter":
            return self.local[key][1]
        if kind == "parameter":
            p = self.params[key]
            v = p.getValue()
            if not p.isSetValue() or not math.isfinite(v):
                raise ModelError(f"{self.src}: parameter {key!r} has no value (and no rule or initial "
                                 f"assignment sets it)")
            return float(v)
        if kind == "compartment":
            c = self.comps[key]
            v = c.getSize()
            if not c.isSetSize() or not math.isfinite(v):
                if c.getSpatialDimensionsAsDouble() == 0:
                    return 1.0
                return None   # an error only if some expression needs it (see _init)
            return float(v)
        return _eval_numeric(self._init(key))   # species

    # initial values ------------------------------------------------------
    def _init(self, ident):
        """Initial value of an SBML symbol as dialect text in the selected parameters
        (or, in numeric mode, only numbers)."""
        cache_key = (ident, self._numeric_mode)
        if cache_key in self._init_cache:
            return self._init_cache[cache_key]
        if ident in self._init_busy:
            cycle = self._init_busy[self._init_busy.index(ident):] + [ident]
            raise ModelError(f"{self.src}: initial values depend on each other in a loop: "
                             + " -> ".join(map(str, cycle)))
        self._init_busy.append(ident)
        try:
            text = self._init_uncached(ident)
        finally:
            self._init_busy.pop()
        v = _eval_numeric(text)
        if v is not None:
            text = _num(v)
        self._init_cache[cache_key] = text
        return text

    def _init_resolver(self, rid=None):
        def resolve(ident):
            if rid is not None and (rid, ident) in self.local:
                nm, v = self.local[(rid, ident)]
                if not self._numeric_mode and nm in self.selected:
                    return nm, _P_ATOM
                return _num_p(v)
            text = self._init(ident)
            return text, (_P_ATOM if re.fullmatch(r"[A-Za-z_]\w*|\d+(\.\d*)?(e[-+]?\d+)?", text) else _P_OR)

        return resolve

    def _init_math(self, node, where, rid=None):
        saved = self.walker.time
        self.walker.time = "0"
        try:
            return self.walker.convert(node, self._init_resolver(rid), f"{self.src}: {where}")
        finally:
            self.walker.time = saved

    def _init_uncached(self, ident):
        if isinstance(ident, tuple):          # local parameter key
            nm, v = self.local[ident]
            return nm if (not self._numeric_mode and nm in self.selected) else _num(v)
        nm = self.names.get(ident)
        if nm is not None and not self._numeric_mode and nm in self.selected:
            return nm
        if ident in self.ia:
            return self._init_math(self.ia[ident], f"initial assignment for {ident!r}")
        if ident in self.assign:
            return self._init_math(self.assign[ident], f"assignment rule for {ident!r} (at the initial time)")
        if ident in self.params:
            return _num(self._candidate_value(ident, "parameter"))
        if ident in self.comps:
            v = self._candidate_value(ident, "compartment")
            if v is None:
                raise ModelError(f"{self.src}: compartment {ident!r} has no size, but a species "
                                 f"concentration or an expression needs it")
            return _num(v)
        if ident in self.species:
            sp = self.species[ident]
            if sp.isSetInitialAmount():
                amount = _num(sp.getInitialAmount())
                if self._amount_only(sp):
                    return amount
                return f"{amount}/({self._init(sp.getCompartment())})"
            if sp.isSetInitialConcentration():
                conc = _num(sp.getInitialConcentration())
                if not self._amount_only(sp) or self._compartment_of(sp).getSpatialDimensionsAsDouble() == 0:
                    return conc
                return f"{conc}*({self._init(sp.getCompartment())})"
            raise ModelError(f"{self.src}: species {ident!r} has no initial amount, concentration or "
                             f"initial assignment")
        if ident in self.reactions:
            return self._init_math(self.reactions[ident].getKineticLaw().getMath(),
                                   f"kinetic law of reaction {ident!r} (at the initial time)", rid=ident)
        if ident in self.srefs:
            return self._stoich(self.srefs[ident])
        raise ModelError(f"{self.src}: unknown symbol {ident!r} in an initial value")

    # right-hand sides ----------------------------------------------------
    def _species_rhs(self, sid, participants):
        sp = self.species[sid]
        terms = []
        for rid, parts in participants.items():
            coef_num, coef_expr = 0.0, []
            for s2, sign, sr in parts:
                if s2 != sid:
                    continue
                st = self._stoich(sr)
                v = _eval_numeric(st)
                if v is not None:
                    coef_num += sign * v
                else:
                    coef_expr.append(("-" if sign < 0 else "+") + f"({st})")
            flux = self.names[rid]
            if coef_expr:
                coef = "".join(coef_expr) + (("+" if coef_num >= 0 else "") + _num(coef_num) if coef_num else "")
                coef = coef.lstrip("+")
                terms.append(f"+{coef}*{flux}" if re.fullmatch(r"\([^()]*\)", coef) else f"+({coef})*{flux}")
            elif coef_num == 1:
                terms.append(f"+{flux}")
            elif coef_num == -1:
                terms.append(f"-{flux}")
            elif coef_num != 0:
                terms.append(f"{'+' if coef_num > 0 else '-'}{_num(abs(coef_num))}*{flux}")
        total = "".join(terms).lstrip("+") or "0"
        cf = sp.getConversionFactor() if hasattr(sp, "isSetConversionFactor") and sp.isSetConversionFactor() \
            else (self.m.getConversionFactor() if self.m.getLevel() >= 3 and self.m.isSetConversionFactor() else "")
        if cf and total != "0":
            if cf not in self.names:
                raise ModelError(f"{self.src}: conversion factor {cf!r} of species {sid!r} is not a parameter")
            total = f"{self.names[cf]}*{total}" if re.fullmatch(r"\w+", total) else f"{self.names[cf]}*({total})"
        if not self._amount_only(sp) and total != "0":
            comp = self.names[sp.getCompartment()]
            total = f"{total}/{comp}" if re.fullmatch(r"\w+", total) else f"({total})/{comp}"
        return total

def _toposort(defs, source):
    """Order ``[(name, expression, origin), ...]`` so each uses only earlier names.

    Ties keep the given order. Raises :class:`ModelError` naming the definitions of
    an algebraic loop (or a name defined twice).
    """
    order = {}
    for i, d in enumerate(defs):
        if d[0] in order:
            raise ModelError(f"{source}: {d[0]!r} is defined twice")
        order[d[0]] = i
    uses = {d[0]: _names_in(d[1]) for d in defs}
    for d in defs:
        if d[0] in uses[d[0]]:
            raise ModelError(f"{source}: the value of {d[0]!r} depends on itself ({d[1]!r})")
    deps = {n: u & set(order) for n, u in uses.items()}
    users = {n: [] for n in order}
    for n, ds in deps.items():
        for x in ds:
            users[x].append(n)
    missing = {n: len(ds) for n, ds in deps.items()}
    heap = [order[n] for n, k in missing.items() if k == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        d = defs[heapq.heappop(heap)]
        out.append(Definition(d[0], d[1]))
        for u in users[d[0]]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(heap, order[u])
    if len(out) != len(defs):
        loop = sorted((n for n, k in missing.items() if k > 0), key=order.get)
        raise ModelError(f"{source}: definitions form an algebraic loop (each needs another to be "
                         f"computed first) among {', '.join(loop)}")
    return out


# ================================================================ writing
def to_sbml(model_or_spec, path):
    """Write a model as an SBML Level 3 Version 2 file with the same equations.

    The document has one compartment (``size=1``, unused by the equations);
    each state is a species (``hasOnlySubstanceUnits="true"``,
    ``boundaryCondition="false"``) driven by a rate rule; parameters are constant
    parameters; definitions and outputs are non-constant parameters set by
    assignment rules; a state whose initial value is an expression gets an
    initial assignment. The model annotation (namespace :data:`PBSENS_NS`)
    records the time name, which assignment rules are outputs, the spec's name,
    title and ``meta``, so :func:`read_sbml` gives back the same spec (with
    extra ``meta`` entries).

    Parameters
    ----------
    model_or_spec : ModelSpec or object with a ``.spec`` attribute
        The model (e.g. a compiled :class:`pbsens.Model`).
    path : str or os.PathLike
        Output file.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ModelError
        The spec is invalid, a name is not a valid SBML id, an expression cannot
        be converted, or libsbml finds the document inconsistent.
    """
    L = _libsbml()
    spec = model_or_spec if isinstance(model_or_spec, ModelSpec) else getattr(model_or_spec, "spec", None)
    if not isinstance(spec, ModelSpec):
        raise ModelError(f"to_sbml needs a ModelSpec or an object with a .spec, got "
                         f"{type(model_or_spec).__name__}")
    spec.validate()
    path = os.fspath(path)
    where = f"model {spec.name!r}"
    all_names = spec.state_names + spec.param_names + [d.name for d in spec.definitions] + spec.output_names
    for nm in all_names + [spec.time]:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", nm):
            raise ModelError(f"{where}: name {nm!r} is not a valid SBML id (ASCII letters, digits, _)")
    doc = L.SBMLDocument(3, 2)
    m = doc.createModel()
    mid = re.sub(r"\W", "_", spec.name, flags=re.ASCII) or "model"
    if not re.match(r"[A-Za-z_]", mid):
        mid = "m_" + mid
    while mid in all_names:            # the model id shares the SId namespace
        mid += "_model"
    _check(m.setId(mid), L, f"{where}: model id {mid!r}")
    m.setName(spec.title or spec.name)
    comp = "compartment"
    while comp in all_names or comp == spec.time:
        comp += "_"
    c = m.createCompartment()
    c.setId(comp)
    c.setSize(1.0)
    c.setConstant(True)
    c.setSpatialDimensions(3)

    # symbols an expression may use; outputs may not be used by other expressions
    core = set(spec.state_names) | set(spec.param_names) | {d.name for d in spec.definitions}
    pnames = set(spec.param_names)

    def math_of(expr, what, symbols=core):
        return expression_to_sbml_math(expr, symbols, spec.time, f"{where}: {what}")

    for s in spec.states:
        sp = m.createSpecies()
        sp.setId(s.name)
        sp.setCompartment(comp)
        sp.setHasOnlySubstanceUnits(True)
        sp.setBoundaryCondition(False)
        sp.setConstant(False)
        if isinstance(s.value, str):
            a = m.createInitialAssignment()
            a.setSymbol(s.name)
            _check(a.setMath(math_of(s.value, f"initial value of {s.name!r}", pnames)), L,
                   f"{where}: initial value of {s.name!r}")
        else:
            sp.setInitialAmount(float(s.value))
    for q in spec.parameters:
        p = m.createParameter()
        p.setId(q.name)
        p.setValue(float(q.value))
        p.setConstant(True)
    for d in list(spec.definitions) + list(spec.outputs):
        p = m.createParameter()
        p.setId(d.name)
        p.setConstant(False)
        r = m.createAssignmentRule()
        r.setVariable(d.name)
        kind = "output" if d in spec.outputs else "definition"
        _check(r.setMath(math_of(d.expression, f"{kind} {d.name!r}")), L, f"{where}: {kind} {d.name!r}")
    for s in spec.states:
        r = m.createRateRule()
        r.setVariable(s.name)
        _check(r.setMath(math_of(spec.odes[s.name], f"right-hand side of {s.name!r}")), L,
               f"{where}: right-hand side of {s.name!r}")

    ann = L.XMLNode.convertStringToXMLNode(_annotation_xml(spec, L))
    if ann is None or m.setAnnotation(ann) != L.LIBSBML_OPERATION_SUCCESS:
        raise ModelError(f"{where}: cannot build the pbsens annotation")
    doc.setConsistencyChecks(L.LIBSBML_CAT_UNITS_CONSISTENCY, False)
    doc.setConsistencyChecks(L.LIBSBML_CAT_MODELING_PRACTICE, False)
    doc.checkConsistency()
    _raise_on_errors(L, doc, f"SBML written for {where}", "is inconsistent")
    if not L.writeSBMLToFile(doc, path):
        raise PbsensError(f"cannot write SBML file {path!r}")
    return path


def _check(status, L, what):
    if status != L.LIBSBML_OPERATION_SUCCESS:
        raise ModelError(f"{what}: libsbml refused it ({L.OperationReturnValue_toString(status)})")


def _xml_escape(s: str) -> str:
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _annotation_xml(spec, L):
    try:
        meta = json.dumps(spec.meta, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        warnings.warn(f"model {spec.name!r}: meta is not JSON-serialisable ({exc}); it is not written "
                      f"to the SBML annotation", stacklevel=3)
        meta = None
    parts = [f'<{_PREFIX}:spec xmlns:{_PREFIX}="{PBSENS_NS}" name="{_xml_escape(spec.name)}" '
             f'title="{_xml_escape(spec.title)}" time="{_xml_escape(spec.time)}">']
    if spec.outputs:
        parts.append(f"<{_PREFIX}:outputs>{' '.join(spec.output_names)}</{_PREFIX}:outputs>")
    if meta is not None:
        parts.append(f"<{_PREFIX}:meta>{_xml_escape(meta)}</{_PREFIX}:meta>")
    parts.append(f"</{_PREFIX}:spec>")
    return "".join(parts)
