"""Model compiler: Jacobians vs finite differences, rhs vs direct sympy evaluation,
safe parsing, the on-disk cache, and model-file validation."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sympy

import pbsens
from pbsens.model.library import models_dir
from pbsens.model.spec import ModelSpec
from pbsens.model.symbolic import parse_expression

from conftest import make_model

MODELS = ["PKA", "CaMKII", "Chua"]


def _random_points(m, rng, n=4):
    """Random positive states near the typical scale and parameters near the defaults."""
    for _ in range(n):
        x = rng.uniform(0.1, 2.0, m.n_states) * (1.0 + np.abs(m.x0))
        p = m.p * rng.uniform(0.5, 1.5, m.n_params)
        t = rng.uniform(0, 100)
        yield t, x, p


def _fd_jacobian(f, v, rel=1e-6):
    cols = []
    for j in range(v.size):
        h = rel * max(abs(v[j]), 1e-3)
        vp, vm = v.copy(), v.copy()
        vp[j] += h
        vm[j] -= h
        cols.append((f(vp) - f(vm)) / (2 * h))
    return np.array(cols).T


def _models():
    return [pbsens.load_model(n) for n in MODELS] + [pbsens.random_linear_model(10, seed=3)]


@pytest.mark.parametrize("idx", range(4))
def test_jacobians_match_central_differences(idx):
    m = _models()[idx]
    rng = np.random.default_rng(idx)
    for t, x, p in _random_points(m, rng):
        A = m.jac_x(t, x, p)
        B = m.jac_p(t, x, p)
        A_fd = _fd_jacobian(lambda v: m.rhs(t, v, p), x)
        B_fd = _fd_jacobian(lambda v: m.rhs(t, x, v), p)
        for J, J_fd in ((A, A_fd), (B, B_fd)):
            scale = np.abs(J_fd).max() + 1e-300
            assert np.abs(J - J_fd).max() <= 1e-6 * scale


def _sympy_rhs(path, t, x, p):
    """Evaluate a JSON model's right-hand side with plain sympy (independent of pbsens)."""
    d = json.loads(path.read_text())
    env = {d.get("time", "t"): sympy.Float(t)}
    env.update({s["name"]: sympy.Float(v) for s, v in zip(d["states"], x)})
    env.update({q["name"]: sympy.Float(v) for q, v in zip(d["parameters"], p)})
    for df in d["definitions"]:
        env[df["name"]] = sympy.sympify(df["expression"], locals=dict(env)).evalf(30)
    return np.array([float(sympy.sympify(o["rhs"], locals=dict(env)).evalf(30)) for o in d["odes"]])


@pytest.mark.parametrize("name", MODELS)
def test_rhs_equals_direct_sympy_evaluation(name):
    m = pbsens.load_model(name)
    path = models_dir() / f"{name}.json"
    rng = np.random.default_rng(7)
    for t, x, p in _random_points(m, rng, n=3):
        ref = _sympy_rhs(path, t, x, p)
        got = m.rhs(t, x, p)
        assert np.allclose(got, ref, rtol=1e-11, atol=1e-11 * np.abs(ref).max())


def test_random_linear_model_structure():
    m = pbsens.random_linear_model(6, seed=11)
    rng = np.random.default_rng(11)
    Bm = rng.uniform(0, 1, (6, 6))
    p = rng.uniform(0, 1, 6)
    A = -Bm.T @ Bm
    x = rng.normal(size=6)
    assert np.allclose(m.p, p)
    assert np.allclose(m.x0, 1.0)
    assert np.allclose(m.jac_x(0.0, x, p), A)
    assert np.allclose(m.jac_p(0.0, x, p), 2 * np.diag(p))
    assert np.allclose(m.rhs(0.0, x, p), A @ x + p ** 2 + 1)
    with pytest.raises(pbsens.PbsensError, match="'n'"):
        pbsens.random_linear_model(0)


def test_model_attributes_are_copies(pka):
    p = pka.p
    p[0] = -1.0
    assert pka.p[0] != -1.0
    assert pka.n_states == len(pka.state_names) == 11
    assert pka.n_params == len(pka.param_names) == 35


def test_dispatchers_callable_from_njit(chua):
    from numba import njit
    rhs = chua.rhs

    @njit
    def twice(t, x, p):
        return 2.0 * rhs(t, x, p)

    x, p = chua.x0 + 0.3, chua.p
    assert np.allclose(twice(0.0, x, p), 2 * chua.rhs(0.0, x, p))


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "x.__class__", "[x for x in y]", "lambda: 1",
    "open('f')", "x if y else 1", "unknown_name + 1", "x; y",
])
def test_parser_rejects_unsafe_or_unknown(text):
    syms = {"x": sympy.Symbol("x"), "y": sympy.Symbol("y")}
    with pytest.raises(pbsens.ModelError):
        parse_expression(text, syms)


def test_parser_dialect():
    x, y = sympy.symbols("x y")
    syms = {"x": x, "y": y}
    assert parse_expression("x^2 + pow(y, 3)", syms) == x ** 2 + y ** 3
    assert parse_expression("ln(x) - log(y)", syms) == sympy.log(x) - sympy.log(y)
    pw = parse_expression("piecewise(1, x < y, 2)", syms)
    assert pw.subs({x: 0, y: 1}) == 1 and pw.subs({x: 2, y: 1}) == 2


def test_definitions_in_order_and_outputs(tmp_path):
    m = make_model(tmp_path, "defs", {"a": 1.0, "b": 2.0}, {"k": 3.0, "c": 0.5},
                   {"a": "-k*a + g2", "b": "g1*t"},
                   definitions=[("g1", "c*a*b"), ("g2", "g1**2")], outputs=[("y", "a + c*b")])
    t, x, p = 1.5, np.array([0.7, 1.3]), np.array([3.0, 0.5])
    g1 = 0.5 * 0.7 * 1.3
    assert np.allclose(m.rhs(t, x, p), [-3 * 0.7 + g1 ** 2, g1 * t])
    assert m.output_names == ["y"]
    assert np.allclose(m.outputs(t, x, p), [0.7 + 0.5 * 1.3])


def test_initial_values_depending_on_parameters(tmp_path):
    m = make_model(tmp_path, "init", {"x": "2*k0"}, {"k": 1.0, "k0": 3.0}, {"x": "-k*x"})
    assert np.allclose(m.x0, [6.0])
    assert np.allclose(m.initial_sensitivity(), [[0.0, 2.0]])


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["states"].append({"name": "x1", "initial": 0}), "used twice"),
    (lambda d: d["odes"].pop(), "no right-hand side"),
    (lambda d: d["parameters"].__setitem__(0, {"name": "p1", "value": float("nan")}), "p1"),
    (lambda d: d["definitions"].__setitem__(0, {"name": "g", "expression": "x1 + nope"}), "nope"),
    (lambda d: d["states"].__setitem__(0, {"name": "1x", "initial": 0}), "identifier"),
    (lambda d: d.pop("name"), "'name'"),
])
def test_invalid_model_files_raise_named_errors(tmp_path, mutate, match):
    d = json.loads((models_dir() / "Chua.json").read_text())
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(pbsens.ModelError, match=match):
        pbsens.load_model(path)


def test_load_model_bad_name():
    with pytest.raises(pbsens.PbsensError, match="name_or_path"):
        pbsens.load_model("NoSuchModel")


def test_spec_roundtrip():
    spec = pbsens.load_model("Chua").spec
    again = ModelSpec.from_dict(spec.to_dict())
    assert again.equations_key() == spec.equations_key()


def test_second_process_uses_disk_cache(tmp_path):
    """A second process finds the generated module and numba's machine code on disk."""
    code = textwrap.dedent("""
        import json, pbsens
        m = pbsens.load_model("Chua")
        m.fns.jacs_into  # force import
        import numpy as np
        A = np.empty((3, 3)); B = np.empty((3, 2))
        m.fns.jacs_into(0.0, m.x0, m.p, m.constants, A, B)
        s = m.fns.jacs_into.stats
        print(json.dumps({"hits": sum(s.cache_hits.values()), "misses": sum(s.cache_misses.values())}))
    """)
    env = dict(os.environ, PBSENS_CACHE_DIR=str(tmp_path / "cache"))
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                      text=True, check=True).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    assert runs[0]["misses"] == 1 and runs[0]["hits"] == 0
    assert runs[1]["hits"] == 1 and runs[1]["misses"] == 0
    assert any(f.endswith(".py") for f in os.listdir(tmp_path / "cache"))
