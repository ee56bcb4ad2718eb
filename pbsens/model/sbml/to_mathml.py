"""The pbsens expression dialect -> SBML math (a libsbml ``ASTNode``), for :func:`to_sbml`.

:func:`expression_to_sbml_math` parses the expression with :mod:`ast` (as
pbsens parses it), writes it as an SBML Level 3 infix formula over neutral
placeholders and lets libsbml parse that; the placeholders are then renamed.
The other direction is :mod:`pbsens.model.sbml.mathml`.
"""
from __future__ import annotations

import ast

from ...errors import ModelError
from ..dialect import number_text
from .document import load_libsbml

__all__ = ["expression_to_sbml_math"]

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
    L = load_libsbml()
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
            return f"({number_text(v)})"
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

