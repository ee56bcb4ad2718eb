"""SBML import/export (pbsens.model.sbml).

Expressions of the specs are evaluated with a small sympy-based evaluator defined
here (Python ``ast`` -> sympy), independent of pbsens's own parser.
"""
import ast
import math
import os
import random
import warnings

import numpy as np
import pytest
import sympy as sp

libsbml = pytest.importorskip("libsbml")

from pbsens.errors import ModelError, UnsupportedModelError  # noqa: E402
from pbsens.model.sbml import (expression_to_sbml_math, read_sbml,  # noqa: E402
                               sbml_math_to_expression, to_sbml)
from pbsens.model.spec import Definition, ModelSpec, Quantity, read_json_model  # noqa: E402

HERE = os.path.dirname(__file__)
SBML = os.path.join(HERE, "data", "sbml")
MODELS = os.path.join(HERE, "..", "data", "models")


# ----------------------------------------------------------------- evaluator
def _pw(*args):
    pieces = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
    if len(args) % 2:
        pieces.append((args[-1], True))
    return sp.Piecewise(*pieces)


FUNCS = {"exp": sp.exp, "log": lambda x, b=None: sp.log(x) if b is None else sp.log(x, b), "ln": sp.log,
         "log10": lambda x: sp.log(x, 10), "log2": lambda x: sp.log(x, 2), "sqrt": sp.sqrt, "pow": sp.Pow,
         "abs": sp.Abs, "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "asin": sp.asin, "acos": sp.acos,
         "atan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "floor": sp.floor,
         "ceiling": sp.ceiling, "ceil": sp.ceiling, "min": sp.Min, "max": sp.Max, "piecewise": _pw,
         "heaviside": lambda x: sp.Heaviside(x, 1)}
BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
       ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b, ast.BitXor: lambda a, b: a ** b}
CMP = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge, ast.Eq: sp.Eq, ast.NotEq: sp.Ne}


def sym(text, env):
    """Dialect string -> sympy, names looked up in ``env`` (numbers or sympy)."""
    def v(n):
        if isinstance(n, ast.Expression):
            return v(n.body)
        if isinstance(n, ast.Constant):
            return sp.nsimplify(n.value) if isinstance(n.value, int) else sp.Float(n.value, 30)
        if isinstance(n, ast.Name):
            if n.id in env:
                return env[n.id]
            assert n.id == "pi", f"unknown name {n.id} in {text}"
            return sp.pi
        if isinstance(n, ast.BinOp):
            return BIN[type(n.op)](v(n.left), v(n.right))
        if isinstance(n, ast.UnaryOp):
            return {ast.USub: lambda a: -a, ast.UAdd: lambda a: a, ast.Not: sp.Not}[type(n.op)](v(n.operand))
        if isinstance(n, ast.BoolOp):
            return (sp.And if isinstance(n.op, ast.And) else sp.Or)(*[v(x) for x in n.values])
        if isinstance(n, ast.Compare):
            parts, left = [], v(n.left)
            for op, c in zip(n.ops, n.comparators):
                right = v(c)
                parts.append(CMP[type(op)](left, right))
                left = right
            return sp.And(*parts)
        if isinstance(n, ast.Call):
            return FUNCS[n.func.id](*[v(a) for a in n.args])
        raise AssertionError(f"unexpected {ast.dump(n)}")
    return v(ast.parse(text.replace("^", "**"), mode="eval"))    # '^' is '**' (power precedence)


def num(text, env):
    return float(sp.N(sym(text, env), 30))


def evaluate(spec, t, x, p):
    """Numeric rhs and outputs of a spec at time t, states x, parameters p (dicts)."""
    env = {spec.time: sp.Float(t, 30)}
    env.update({k: sp.Float(val, 30) for k, val in x.items()})
    env.update({k: sp.Float(val, 30) for k, val in p.items()})
    for d in spec.definitions:
        env[d.name] = sp.Float(num(d.expression, env), 30)
    rhs = {s: num(spec.odes[s], env) for s in spec.state_names}
    outs = {o.name: num(o.expression, env) for o in spec.outputs}
    return rhs, outs, env


def initial(spec, p=None):
    p = p or {q.name: q.value for q in spec.parameters}
    env = {k: sp.Float(v, 30) for k, v in p.items()}
    return {s.name: (num(s.value, env) if isinstance(s.value, str) else float(s.value)) for s in spec.states}


def close(a, b, rel=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300) or abs(a - b) < 1e-300


def consistency_errors(path):
    doc = libsbml.readSBMLFromFile(str(path))
    doc.checkConsistency()
    return [doc.getError(i).getMessage() for i in range(doc.getNumErrors())
            if doc.getError(i).getSeverity() >= libsbml.LIBSBML_SEV_ERROR]


# ----------------------------------------------------------- supported fixture
@pytest.fixture(scope="module")
def supported():
    return read_sbml(os.path.join(SBML, "supported.xml"))


def test_supported_structure(supported):
    s = supported
    assert s.name == "supported" and s.title == "All supported constructs" and s.time == "t"
    assert s.state_names == ["A", "B", "C", "D", "Xr", "q"]
    assert s.param_names == ["k1", "k2", "kdeg", "Vm", "Km", "lambda_", "R2__k"]
    assert dict((q.name, q.value) for q in s.parameters)["R2__k"] == 0.25
    defs = [d.name for d in s.definitions]
    for name in ["cell", "nucleus", "Xb", "Xc", "p_ia", "Y", "amp", "R1", "R2", "R3", "R4"]:
        assert name in defs
    assert "unused_comp" not in defs and s.meta["compartments"]["unused_comp"] == 7.0
    assert s.meta["sbml_names"] == {"lambda": "lambda_"}
    assert s.meta["local_parameters"] == {"R2__k": ["R2", "k"]}
    assert s.meta["fixed"] == {"cell": 2.0, "nucleus": 0.5, "Xb": 3.0, "Xc": 10.0}
    # every definition uses only earlier names
    seen = set(s.state_names) | set(s.param_names) | {s.time}
    for d in s.definitions:
        names = {n.id for n in ast.walk(ast.parse(d.expression, mode="eval")) if isinstance(n, ast.Name)}
        assert names - {"pi"} - set(FUNCS) <= seen, d
        seen.add(d.name)


def test_supported_initial_values(supported):
    x0 = initial(supported)
    # A: concentration; B: amount 4 in cell of size 2; C amount; D = 2*k1; Xr; q
    assert x0 == pytest.approx({"A": 1.0, "B": 2.0, "C": 0.5, "D": 0.6, "Xr": 1.0, "q": 0.0}, rel=1e-14)
    assert isinstance(next(s.value for s in supported.states if s.name == "D"), str)


@pytest.mark.parametrize("t", [1.3, 7.0])
def test_supported_rhs_by_hand(supported, t):
    rng = random.Random(1)
    x = {n: rng.uniform(0.1, 2) for n in supported.state_names}
    p = {q.name: q.value for q in supported.parameters}
    rhs, _, env = evaluate(supported, t, x, p)
    A, B, C, Xr = x["A"], x["B"], x["C"], x["Xr"]
    k1, k2, kdeg, Vm, Km, lam, k = 0.3, 0.7, 0.1, 1.5, 0.8, 2.0, 0.25
    cell, nucleus, Xb, Xc = 2.0, 0.5, 3.0, 10.0
    amp = 1.0 if t < 5 else 2.0
    R1 = cell * k1 * A * Xb
    R2 = cell * k * B
    R3 = Vm * C / (Km + C) * amp * lam
    R4 = k2 * Xc
    expected = {"A": (R4 - R1) / cell, "B": (R1 - R2) / cell, "C": 2 * R2 - R3, "D": R3 / nucleus,
                "Xr": -kdeg * Xr, "q": math.sin(t)}
    for name, val in expected.items():
        assert close(rhs[name], val), (name, rhs[name], val)
    assert close(float(env["Y"]), A + C / cell)
    assert close(float(env["p_ia"]), 10 * k1)


def test_parameters_argument(supported):
    path = os.path.join(SBML, "supported.xml")
    s = read_sbml(path, parameters=["k1", "cell", "R2__k", "lambda"])
    assert s.param_names == ["k1", "cell", "R2__k", "lambda_"]
    assert {d.name for d in s.definitions} >= {"k2", "kdeg", "Vm", "Km", "nucleus"}
    assert s.meta["fixed"]["k2"] == 0.7
    b0 = next(q.value for q in s.states if q.name == "B")
    assert isinstance(b0, str) and "cell" in b0           # amount 4 / cell, cell now a parameter
    assert num(b0, {"cell": sp.Float(4.0)}) == pytest.approx(1.0)
    # the equations do not change at the default values
    rng = random.Random(2)
    x = {n: rng.uniform(0.1, 2) for n in s.state_names}
    r1, _, _ = evaluate(supported, 2.0, x, {q.name: q.value for q in supported.parameters})
    r2, _, _ = evaluate(s, 2.0, x, {q.name: q.value for q in s.parameters})
    assert all(close(r1[k], r2[k]) for k in r1)


@pytest.mark.parametrize("name, why", [("A", "state"), ("Y", "assignment rule"),
                                       ("p_ia", "initial assignment"), ("R1", "reaction"),
                                       ("nope", "not in the model")])
def test_parameters_argument_errors(name, why):
    with pytest.raises(ModelError, match=why):
        read_sbml(os.path.join(SBML, "supported.xml"), parameters=[name])


# ------------------------------------------------------------- small fixtures
def test_mass_action_stoichiometry_by_hand():
    s = read_sbml(os.path.join(SBML, "mass_action.xml"))
    assert s.state_names == ["A", "B", "C"] and s.param_names == ["kf", "kr"]
    assert s.odes["A"].replace(" ", "") == "(-bind)/V" and s.odes["C"].replace(" ", "") == "bind/V"
    rng = random.Random(3)
    for _ in range(5):
        x = {n: rng.uniform(0.1, 3) for n in "ABC"}
        p = {"kf": rng.uniform(0.01, 1), "kr": rng.uniform(0.01, 1)}
        rhs, _, env = evaluate(s, 0.0, x, p)
        v = p["kf"] * x["A"] * x["B"] - p["kr"] * x["C"]        # volume cancels: V*v/V
        assert close(rhs["A"], -v) and close(rhs["B"], -v) and close(rhs["C"], v)
        assert abs(rhs["A"] + rhs["C"]) < 1e-14 and abs(rhs["B"] + rhs["C"]) < 1e-14   # conserved totals
        assert close(float(env["A_total"]), x["A"] + x["C"])
        assert close(float(env["bind"]), 2.5 * v)


def test_stoichiometry_initial_assignment_and_conversion_factor():
    s = read_sbml(os.path.join(SBML, "stoich_conversion.xml"))
    x = {"A": 1.7, "B": 0.3}
    p = {"k": 0.4, "n": 1.5, "cf": 0.5}
    rhs, _, _ = evaluate(s, 0.0, x, p)
    R = 0.4 * 1.7
    assert close(rhs["A"], -R)
    assert close(rhs["B"], 0.5 * (2 * 1.5) * R / 2.0)
    p["n"] = 4.0                           # the stoichiometry follows its parameter
    rhs, _, _ = evaluate(s, 0.0, x, p)
    assert close(rhs["B"], 0.5 * 8.0 * R / 2.0)


def test_level2_local_parameters_and_function_definition():
    s = read_sbml(os.path.join(SBML, "level2_local.xml"))
    assert s.time == "t"
    assert s.param_names == ["k", "K", "R1__k"]
    x = {"S": 1.2, "P": 0.4}
    rhs, _, _ = evaluate(s, 0.0, x, {"k": 100.0, "K": 3.0, "R1__k": 0.2})
    R1 = 1.5 * 0.2 * 1.2 * 16 / (9 + 16)
    assert close(rhs["S"], -R1 / 1.5) and close(rhs["P"], R1 / 1.5)


def test_constraint_is_ignored_with_warning():
    with pytest.warns(UserWarning, match="c_nonneg"):
        s = read_sbml(os.path.join(SBML, "constraint_ignored.xml"))
    assert s.meta["sbml_ignored"] == [["constraint", "c_nonneg"]]
    assert s.odes["A"] == "-decay"


# --------------------------------------------------------------- unsupported
@pytest.mark.parametrize("fname, kind, ident", [
    ("unsupported_event.xml", "event trigger", "ev_pulse"),
    ("unsupported_algebraic.xml", "algebraic rule", "alg_total"),
    ("unsupported_delay.xml", "delay", "delayed_decay"),
    ("unsupported_fast.xml", "fast reaction", "fast_binding"),
])
def test_unsupported_constructs(fname, kind, ident):
    with pytest.raises(UnsupportedModelError) as info:
        read_sbml(os.path.join(SBML, fname))
    assert (kind, ident) in info.value.unsupported
    assert ident in str(info.value) and kind in str(info.value)


def test_all_unsupported_constructs_in_one_error():
    with pytest.raises(UnsupportedModelError) as info:
        read_sbml(os.path.join(SBML, "unsupported_many.xml"))
    assert set(info.value.unsupported) == {("algebraic rule", "alg"), ("delay", "d")}


def test_bad_files(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        read_sbml(tmp_path / "missing.xml")
    bad = tmp_path / "bad.xml"
    bad.write_text("<sbml><model id='x'>")
    with pytest.raises(ModelError, match="cannot be read"):
        read_sbml(bad)


# ----------------------------------------------------------------- round trips
def _compare_specs(s1, s2, n_points=4, seed=0):
    assert s2.state_names == s1.state_names
    assert [(q.name, q.value) for q in s2.parameters] == [(q.name, q.value) for q in s1.parameters]
    assert s2.output_names == s1.output_names
    assert s2.time == s1.time
    p = {q.name: q.value for q in s1.parameters}
    x01, x02 = initial(s1, p), initial(s2, p)
    assert all(close(x01[k], x02[k]) for k in x01)
    rng = random.Random(seed)
    for _ in range(n_points):
        t = rng.uniform(0, 10)
        x = {n: rng.uniform(0.05, 3) for n in s1.state_names}
        pp = {k: v * rng.uniform(0.5, 2) for k, v in p.items()}
        r1, o1, _ = evaluate(s1, t, x, pp)
        r2, o2, _ = evaluate(s2, t, x, pp)
        for k in r1:
            assert close(r1[k], r2[k]), (k, r1[k], r2[k])
        for k in o1:
            assert close(o1[k], o2[k]), (k, o1[k], o2[k])


@pytest.mark.parametrize("name", ["PKA", "CaMKII", "Chua"])
def test_json_models_round_trip(tmp_path, name):
    spec = read_json_model(os.path.join(MODELS, f"{name}.json"))
    out = tmp_path / f"{name}.xml"
    to_sbml(spec, out)
    assert consistency_errors(out) == []
    back = read_sbml(out)
    assert back.name == spec.name and back.title == spec.title
    assert [d.name for d in back.definitions] == [d.name for d in spec.definitions]
    for key in ("experiments", "solver_tolerances"):
        assert back.meta[key] == spec.meta[key]
    _compare_specs(spec, back, n_points=3)


def test_supported_round_trip(tmp_path, supported):
    out = tmp_path / "supported_rt.xml"
    to_sbml(supported, out)
    assert consistency_errors(out) == []
    _compare_specs(supported, read_sbml(out))


def test_round_trip_outputs_expressions_and_awkward_names(tmp_path):
    spec = ModelSpec(
        name="awkward model", title="names SBML infix reserves",
        states=[Quantity("time", 1.0), Quantity("x", "2*inf + avogadro")],
        parameters=[Quantity("inf", 0.5), Quantity("avogadro", 3.0), Quantity("e", 0.25),
                    Quantity("exponentiale", 1.5)],
        definitions=[Definition("g", "piecewise(x**2, x > 1 and not (time < 0.5), -x, tau > 3 or x == 2, "
                                     "heaviside(x - 1))"),
                     Definition("h", "log(x, 3) + log2(x) + log10(x) + ln(x) + log(x) + sqrt(x) + pow(x, e)"),
                     Definition("w", "abs(-x) + floor(x) + ceiling(x) + min(x, 1, e) + max(x, 2) + exp(1) + pi"),
                     Definition("tr", "sin(x) + cos(x) + tan(x) + asin(e) + acos(e) + atan(x) + sinh(x) "
                                      "+ cosh(x) + tanh(x)"),
                     Definition("tau", "x ^ 2 - -e ** -x")],
        odes={"time": "-inf*time + g", "x": "avogadro*(h - w) + tr*exponentiale - tau"},
        outputs=[Definition("y", "x + time"), Definition("total", "g*2")],
        time="t_", meta={"experiments": {"a": {"t_span": [0, 1]}}, "notes": "kept"})
    # 'tau' is used by g before it is defined: reorder so the spec is valid
    spec.definitions = [spec.definitions[4]] + spec.definitions[:4]
    spec.validate()
    out = tmp_path / "awkward.xml"
    to_sbml(spec, out)
    assert consistency_errors(out) == []
    back = read_sbml(out)
    assert back.name == "awkward model" and back.time == "t_"
    assert back.output_names == ["y", "total"]
    assert back.meta["notes"] == "kept" and back.meta["experiments"] == spec.meta["experiments"]
    _compare_specs(spec, back, n_points=6)


def test_to_sbml_accepts_model_objects(tmp_path):
    spec = read_json_model(os.path.join(MODELS, "Chua.json"))

    class Compiled:
        pass

    m = Compiled()
    m.spec = spec
    to_sbml(m, tmp_path / "chua.xml")
    assert read_sbml(tmp_path / "chua.xml").state_names == spec.state_names
    with pytest.raises(ModelError, match="ModelSpec"):
        to_sbml(object(), tmp_path / "x.xml")


# ------------------------------------------------------------ math conversion
@pytest.mark.parametrize("formula, expected", [
    ("sec(x)", 1 / math.cos(0.7)), ("csc(x)", 1 / math.sin(0.7)), ("cot(x)", 1 / math.tan(0.7)),
    ("sech(x)", 1 / math.cosh(0.7)), ("csch(x)", 1 / math.sinh(0.7)), ("coth(x)", 1 / math.tanh(0.7)),
    ("arcsec(y)", math.acos(1 / 1.6)), ("arccsc(y)", math.asin(1 / 1.6)), ("arccot(x)", math.atan(1 / 0.7)),
    ("arcsinh(x)", math.asinh(0.7)), ("arccosh(y)", math.acosh(1.6)), ("arctanh(x)", math.atanh(0.7)),
    ("arcsech(x)", math.acosh(1 / 0.7)), ("arccsch(x)", math.asinh(1 / 0.7)),
    ("arccoth(y)", math.atanh(1 / 1.6)),
    ("root(3, y)", 1.6 ** (1 / 3)), ("sqrt(y)", math.sqrt(1.6)), ("log(2, y)", math.log2(1.6)),
    ("log(5, y)", math.log(1.6, 5)), ("log10(y)", math.log10(1.6)), ("ln(y)", math.log(1.6)),
    ("exponentiale^x", math.exp(0.7)), ("avogadro", 6.02214179e23), ("-x^2", -0.49), ("(-x)^2", 0.49),
    ("x - (y - x)", -0.2), ("x / (y * x)", 1 / 1.6), ("2 - -x", 2.7),
    ("piecewise(1, xor(x < 1, y < 1), 2)", 1.0), ("piecewise(1, implies(x > 1, y < 1), 2)", 1.0),
    ("piecewise(1, true && !false, 2)", 1.0), ("piecewise(1, lt(0, x, y, 2), 2)", 1.0),
    ("piecewise(1, geq(x, y) || eq(x, 0.7), 2)", 1.0), ("piecewise(1, neq(x, 0.7), 2)", 2.0),
    # no otherwise (valid SBML; Alkan_SciSignal2018 uses it): exhaustive conditions, either branch
    ("piecewise(1, x > 0.5, 0, x <= 0.5)", 1.0), ("piecewise(1, x > 1, 0, x <= 1)", 0.0),
    ("piecewise(3, y > 1)", 3.0),
    ("max(x, y, 0)", 1.6), ("min(x, y)", 0.7), ("abs(-y)", 1.6), ("ceil(x) + floor(y)", 2.0),
    ("f(x, y)", 0.7 * 1.6 + 1), ("pi", math.pi), ("time * 2", 4.0),
])
def test_mathml_to_expression(formula, expected):
    settings = libsbml.L3ParserSettings()
    settings.setParseLog(libsbml.L3P_PARSE_LOG_AS_LN)
    node = libsbml.parseL3FormulaWithSettings(formula, settings)
    assert node is not None, libsbml.getLastParseL3Error()
    lam = libsbml.parseL3Formula("lambda(a, b, a*b + 1)")
    fdefs = {"f": (["a", "b"], lam.getChild(2))}
    expr = sbml_math_to_expression(node, time_name="tt", function_definitions=fdefs)
    env = {"x": sp.Float(0.7, 30), "y": sp.Float(1.6, 30), "tt": sp.Float(2, 30)}
    assert close(num(expr, env), expected, 1e-13), expr


def test_rational_and_e_notation():
    node = libsbml.readMathMLFromString(
        '<math xmlns="http://www.w3.org/1998/Math/MathML"><apply><plus/>'
        '<cn type="rational">1<sep/>3</cn><cn type="e-notation">2<sep/>-3</cn></apply></math>')
    expr = sbml_math_to_expression(node)
    assert close(num(expr, {}), 1 / 3 + 0.002, 1e-15)


@pytest.mark.parametrize("expr", [
    "a + b*c - a/b**2", "-(a + b)**-c", "a ^ 2", "pow(a, b) + sqrt(c)", "log(a) + log(a, b) + log2(b) + log10(c)",
    "piecewise(a, b < c, c, a >= b, 0)", "piecewise(1, not (a < b) and (b != c or a == b), 0)",
    "heaviside(a - b) + heaviside(0*a)", "exp(1)*pi + abs(a - b)", "min(a, b) + max(a, b, c)",
    "floor(a) + ceiling(b) + ceil(c)", "asin(a/4) + acos(a/4) + atan(b) + sinh(a) + cosh(b) + tanh(c)",
    "1e-05*a + 2.5e10/b + 4/63",
])
def test_expression_round_trip(expr):
    node = expression_to_sbml_math(expr, {"a", "b", "c"})
    back = sbml_math_to_expression(node)
    rng = random.Random(4)
    for _ in range(3):
        env = {k: sp.Float(rng.uniform(0.2, 3), 30) for k in "abc"}
        assert close(num(expr, env), num(back, env), 1e-13), (expr, back)


def test_caret_is_power_with_power_precedence():
    back = sbml_math_to_expression(expression_to_sbml_math("a + b^2*c", {"a", "b", "c"}))
    env = {"a": sp.Float(1.5), "b": sp.Float(2.0), "c": sp.Float(3.0)}
    assert close(num(back, env), 1.5 + 4.0 * 3.0)


def test_expression_to_math_errors():
    with pytest.raises(ModelError, match="unknown name 'zz'"):
        expression_to_sbml_math("a + zz", {"a"})
    with pytest.raises(ModelError, match="unknown function 'gamma'"):
        expression_to_sbml_math("gamma(a)", {"a"})
    with pytest.raises(ModelError, match="cannot parse"):
        expression_to_sbml_math("a +", {"a"})
    with pytest.raises(ModelError, match="takes 1 argument"):
        expression_to_sbml_math("exp(a, a)", {"a"})


def test_time_is_written_as_csymbol():
    node = expression_to_sbml_math("2*time + tt", {"time"}, time_name="tt")
    types = []

    def walk(n):
        types.append((n.getType(), n.getName()))
        for i in range(n.getNumChildren()):
            walk(n.getChild(i))

    walk(node)
    assert (libsbml.AST_NAME_TIME, "tt") in types and (libsbml.AST_NAME, "time") in types


def test_no_warnings_for_clean_files():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_sbml(os.path.join(SBML, "mass_action.xml"))


# ---------------------------------------------------------------------------
# Compiled round trip: to_sbml -> load_model(.xml) gives the same compiled functions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["PKA", "CaMKII", "Chua"])
def test_compiled_round_trip_rhs_and_jacobians(tmp_path, name):
    import pbsens
    m = pbsens.load_model(name)
    path = tmp_path / f"{name}.xml"
    pbsens.to_sbml(m, path)
    back = pbsens.load_model(path)
    assert back.param_names == m.param_names and back.state_names == m.state_names
    assert np.array_equal(back.p, m.p) and np.array_equal(back.x0, m.x0)
    rng = np.random.default_rng(5)
    for _ in range(5):
        x = rng.uniform(0.1, 2.0, m.n_states) * (1 + np.abs(m.x0))
        p = m.p * rng.uniform(0.5, 1.5, m.n_params)
        t = rng.uniform(0, 100)
        for f, g in ((m.rhs, back.rhs), (m.jac_x, back.jac_x), (m.jac_p, back.jac_p)):
            a, b = f(t, x, p), g(t, x, p)
            assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()
