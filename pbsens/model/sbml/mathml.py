"""SBML math (MathML) -> the pbsens expression dialect.

:class:`MathToDialect` walks a libsbml ``ASTNode`` tree and emits dialect text,
inlining function definitions (lambda bodies substituted), writing
``piecewise`` as the dialect's ``piecewise(v1, c1, ..., [otherwise])``, turning
the ``time`` csymbol into the model's time name and ``avogadro`` into
SBML's 6.02214179e23; :func:`sbml_math_to_expression` is its public form. The other
direction is :func:`pbsens.model.sbml.to_mathml.expression_to_sbml_math`.

The ``rateOf`` csymbol of a model symbol becomes that symbol's rate (through the hook
:attr:`MathToDialect.rate_of`, set by the SBML reader; see :mod:`.rates`).
Math without a dialect equivalent (``delay``, ``rateOf`` without the hook or of an
expression, ``factorial``,
``quotient``, ``rem``, non-finite numbers, package math) raises
:class:`UnsupportedModelError`; :meth:`MathToDialect.unsupported_kind` says so
for one node, without raising, so a reader can list every occurrence at once.
"""
from __future__ import annotations

import math

from ...errors import ModelError, UnsupportedModelError
from ..dialect import number_text
from .document import load_libsbml

#: The value SBML Level 3 core gives the ``avogadro`` csymbol (not the 2019 SI value 6.02214076e23;
#: SBML Test Suite cases 00960, 00961, 01323 expect it).
AVOGADRO = 6.02214179e23

# Operator precedences of the emitted (Python) syntax, low to high.
P_OR, P_AND, P_NOT, P_CMP, P_ADD, P_MUL, P_UNARY, P_POW, P_ATOM = range(1, 10)


def number_item(v):
    """``(text, precedence)`` of a number."""
    s = number_text(v)
    return s, (P_UNARY if s.startswith("-") else P_ATOM)


def _wrap(item, below):
    """Parenthesise ``item = (text, prec)`` when its precedence is < ``below``."""
    s, p = item
    return f"({s})" if p < below else s


def read_function_definitions(L, model, source, empty=None):
    """``{id: (bvar names, body ASTNode)}`` of a libsbml ``Model``'s function definitions.

    A definition without math (SBML Level 3 Version 2 allows it; test-suite case 01271) is left
    out and its id appended to ``empty`` when given (a call of it is then an unknown function,
    :class:`ModelError`), else refused; any other math that is not a lambda is refused."""
    fdefs = {}
    for i in range(model.getNumFunctionDefinitions()):
        fd = model.getFunctionDefinition(i)
        lam = fd.getMath()
        if lam is None and empty is not None:
            empty.append(fd.getId())
            continue
        if lam is None or lam.getType() != L.AST_LAMBDA:
            raise ModelError(f"{source}: function definition {fd.getId()!r} has no lambda")
        nch = lam.getNumChildren()
        bvars = [lam.getChild(j).getName() for j in range(nch - 1)]
        fdefs[fd.getId()] = (bvars, lam.getChild(nch - 1) if nch else None)
    return fdefs


class MathToDialect:
    """Recursive walker over libsbml ``ASTNode`` trees emitting dialect strings.

    ``resolve(name) -> (text, precedence)`` maps an SBML identifier; ``fdefs`` maps
    function-definition ids to ``(bvar names, body ASTNode)`` for inlining.
    """

    def __init__(self, L, fdefs, time_name):
        self.L = L
        self.fdefs = fdefs
        self.time = time_name
        #: ``rate_of(id) -> text``: the time derivative of an SBML symbol, for the ``rateOf``
        #: csymbol (set by the SBML reader; None: ``rateOf`` is unsupported)
        self.rate_of = None
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
            T.AST_FUNCTION_SEC: ("1/cos({x})", P_MUL), T.AST_FUNCTION_CSC: ("1/sin({x})", P_MUL),
            T.AST_FUNCTION_COT: ("cos({x})/sin({x})", P_MUL),
            T.AST_FUNCTION_SECH: ("1/cosh({x})", P_MUL), T.AST_FUNCTION_CSCH: ("1/sinh({x})", P_MUL),
            T.AST_FUNCTION_COTH: ("cosh({x})/sinh({x})", P_MUL),
            T.AST_FUNCTION_ARCSEC: ("acos(1/{x})", P_ATOM), T.AST_FUNCTION_ARCCSC: ("asin(1/{x})", P_ATOM),
            T.AST_FUNCTION_ARCCOT: ("atan(1/{x})", P_ATOM),
            T.AST_FUNCTION_ARCSINH: ("log({x} + sqrt({x}**2 + 1))", P_ATOM),
            T.AST_FUNCTION_ARCCOSH: ("log({x} + sqrt({x}**2 - 1))", P_ATOM),
            T.AST_FUNCTION_ARCTANH: ("log((1 + {x})/(1 - {x}))/2", P_MUL),
            T.AST_FUNCTION_ARCSECH: ("log(1/{x} + sqrt(1/{x}**2 - 1))", P_ATOM),
            T.AST_FUNCTION_ARCCSCH: ("log(1/{x} + sqrt(1/{x}**2 + 1))", P_ATOM),
            T.AST_FUNCTION_ARCCOTH: ("log(({x} + 1)/({x} - 1))/2", P_MUL),
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
            T.AST_LOGICAL_XOR, T.AST_LOGICAL_IMPLIES, T.AST_FUNCTION_MAX, T.AST_FUNCTION_MIN,
            T.AST_FUNCTION_RATE_OF})

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
        if t == L.AST_FUNCTION_RATE_OF and (self.rate_of is None or node.getNumChildren() != 1
                                            or node.getChild(0).getType() != L.AST_NAME):
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
            return number_item(node.getInteger())
        if t in (L.AST_REAL, L.AST_REAL_E):
            v = node.getReal()
            if not math.isfinite(v):
                raise UnsupportedModelError(f"{where}: non-finite number {v}", [("non-finite number", where)])
            return number_item(v)
        if t == L.AST_RATIONAL:
            num, den = node.getNumerator(), node.getDenominator()
            if den == 0:
                raise UnsupportedModelError(f"{where}: rational {num}/0", [("non-finite number", where)])
            s = f"{num}/{den}"
            return (f"-{-num}/{den}" if num < 0 else s), P_MUL
        if t == L.AST_NAME:
            return resolve(node.getName())
        if t == L.AST_NAME_TIME:
            return self.time, P_ATOM
        if t == L.AST_FUNCTION_RATE_OF:
            if self.rate_of is None or n != 1 or kids[0].getType() != L.AST_NAME or stack:
                raise UnsupportedModelError(f"{where}: rateOf of anything but a model symbol outside a function "
                                            f"definition", [("rateOf", where)])
            return f"({self.rate_of(kids[0].getName())})", P_ATOM
        if t == L.AST_NAME_AVOGADRO:
            return number_item(AVOGADRO)
        if t == L.AST_CONSTANT_E:
            return "exp(1)", P_ATOM
        if t == L.AST_CONSTANT_PI:
            return "pi", P_ATOM
        if t == L.AST_CONSTANT_TRUE:
            return "0 == 0", P_CMP
        if t == L.AST_CONSTANT_FALSE:
            return "0 != 0", P_CMP
        if t in (L.AST_PLUS, L.AST_TIMES):     # n-ary: the empty sum is 0, the empty product 1
            identity, sep, prec = ("0", " + ", P_ADD) if t == L.AST_PLUS else ("1", "*", P_MUL)
            if n == 0:
                return identity, P_ATOM
            if n == 1:
                return sub(kids[0])
            return sep.join(_wrap(sub(k), prec) for k in kids), prec
        if t == L.AST_MINUS:
            need(1, 2)
            if n == 1:
                return "-" + _wrap(sub(kids[0]), P_POW), P_UNARY
            return f"{_wrap(sub(kids[0]), P_ADD)} - {_wrap(sub(kids[1]), P_MUL)}", P_ADD
        if t == L.AST_DIVIDE:
            need(2, 2)
            return f"{_wrap(sub(kids[0]), P_MUL)}/{_wrap(sub(kids[1]), P_UNARY)}", P_MUL
        if t in (L.AST_POWER, L.AST_FUNCTION_POWER):
            need(2, 2)
            return f"{_wrap(sub(kids[0]), P_ATOM)}**{_wrap(sub(kids[1]), P_ATOM)}", P_POW
        if t in self.simple:
            need(1, 1)
            return f"{self.simple[t]}({sub(kids[0])[0]})", P_ATOM
        if t in self.derived:
            need(1, 1)
            tpl, prec = self.derived[t]
            return tpl.format(x=f"({sub(kids[0])[0]})"), prec
        if t == L.AST_FUNCTION_LOG:
            need(1, 2)
            if n == 1:
                return f"log10({sub(kids[0])[0]})", P_ATOM
            base, arg = sub(kids[0])[0], sub(kids[1])[0]
            if base in ("10", "10.0"):
                return f"log10({arg})", P_ATOM
            if base in ("2", "2.0"):
                return f"log2({arg})", P_ATOM
            return f"log({arg}, {base})", P_ATOM
        if t == L.AST_FUNCTION_ROOT:
            need(1, 2)
            if n == 1:
                return f"sqrt({sub(kids[0])[0]})", P_ATOM
            deg, arg = sub(kids[0]), sub(kids[1])
            if deg[0] in ("2", "2.0"):
                return f"sqrt({arg[0]})", P_ATOM
            return f"{_wrap(arg, P_ATOM)}**(1/{_wrap(deg, P_ATOM)})", P_POW
        if t in (L.AST_FUNCTION_MAX, L.AST_FUNCTION_MIN):
            need(1)
            fn = "max" if t == L.AST_FUNCTION_MAX else "min"
            return f"{fn}({', '.join(sub(k)[0] for k in kids)})", P_ATOM
        if t == L.AST_FUNCTION_PIECEWISE:
            need(1)
            # children: value1, condition1, ..., [otherwise]. Without otherwise SBML
            # leaves the value undefined where no condition holds; pbsens takes the
            # last piece's value there (its condition is dropped), which is exact
            # whenever the conditions cover every case, e.g. x > 0 / x <= 0.
            parts = [sub(k)[0] for k in kids]
            if len(parts) % 2 == 0:
                parts = parts[:-1]
            return f"piecewise({', '.join(parts)})", P_ATOM
        if t in self.relational:
            need(2)
            op = self.relational[t]
            items = [_wrap(sub(k), P_ADD) for k in kids]
            parts = [f"{items[i]} {op} {items[i + 1]}" for i in range(n - 1)]
            if len(parts) == 1:
                return parts[0], P_CMP
            return " and ".join(f"({p})" for p in parts), P_AND
        if t == L.AST_LOGICAL_AND or t == L.AST_LOGICAL_OR:
            is_and = t == L.AST_LOGICAL_AND
            if n == 0:
                return ("0 == 0", P_CMP) if is_and else ("0 != 0", P_CMP)
            if n == 1:
                return sub(kids[0])
            prec = P_AND if is_and else P_OR
            word = " and " if is_and else " or "
            return word.join(_wrap(sub(k), prec + 1) for k in kids), prec
        if t == L.AST_LOGICAL_NOT:
            need(1, 1)
            return "not " + _wrap(sub(kids[0]), P_CMP), P_NOT
        if t == L.AST_LOGICAL_XOR:
            if n == 0:
                return "0 != 0", P_CMP
            acc = sub(kids[0])
            for k in kids[1:]:
                a, b = _wrap(acc, P_ATOM), _wrap(sub(k), P_ATOM)
                acc = (f"({a} and not {b}) or (not {a} and {b})", P_OR)
            return acc
        if t == L.AST_LOGICAL_IMPLIES:
            need(2, 2)
            return f"not {_wrap(sub(kids[0]), P_CMP)} or {_wrap(sub(kids[1]), P_AND)}", P_OR
        if t == L.AST_FUNCTION:
            return self._call(node, kids, resolve, where, stack)
        kind = self.unsupported_kind(node) or f"math function {node.getName()!r}"
        raise UnsupportedModelError(f"{where}: {kind} has no equivalent in pbsens model expressions",
                                    [(kind, where)])

    def _call(self, node, kids, resolve, where, stack):
        name = node.getName()
        if name not in self.fdefs:
            raise ModelError(f"{where}: call of unknown function {name!r} (or of a function definition "
                             "without math)")
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
    L = load_libsbml()
    res = (lambda s: (s, P_ATOM)) if resolve is None else (lambda s: (resolve(s), P_ATOM))
    return MathToDialect(L, function_definitions or {}, time_name).convert(node, res, where)
