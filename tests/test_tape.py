"""The tape backend (programs run by a generic interpreter) against the numba-compiled backend.

The numba backend is the reference: it differentiates the fully substituted
expressions with sympy's dense Jacobian and prints them as Python code, while the
tape differentiates through the definitions by the chain rule and evaluates its own
instruction set, so agreement checks both the derivation and the interpreter.
"""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pbsens.errors import ModelError
from pbsens.model import tape as tape_mod
from pbsens.model.cache import CacheWarning
from pbsens.model.library import builtin_models, load_model, model_from_spec
from pbsens.model.networks import random_mass_action
from pbsens.model.spec import ModelSpec, Quantity, read_json_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PETAB = os.path.join(ROOT, "tests", "data", "petab")   # copies of the benchmark collection's files (BSD-3, LICENSE there)


def _close(a, b, what, rtol=1e-12):
    """|a - b| <= rtol * (|b| + max|b|): relative to the entry, floored by the array's scale."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, what
    scale = np.max(np.abs(b)) if b.size else 0.0
    bad = np.abs(a - b) > rtol * (np.abs(b) + scale) + 1e-300
    assert not bad.any(), f"{what}: {np.count_nonzero(bad)} entries differ, max {np.max(np.abs(a - b))}"


def _all_functions(m, t, x, p):
    """Every compiled function of ``m`` at (t, x, p), as a dict of arrays."""
    c, nx, np_, ny = m.constants, m.n_states, m.n_params, m.n_outputs
    out = {"rhs": np.empty(nx), "A": np.empty((nx, nx)), "B": np.empty((nx, np_)),
           "A2": np.empty((nx, nx)), "B2": np.empty((nx, np_)), "x0": np.empty(nx),
           "S0": np.empty((nx, np_)), "y": np.empty(ny), "Hx": np.empty((ny, nx)), "Hp": np.empty((ny, np_))}
    m.fns.rhs_into(t, x, p, c, out["rhs"])
    m.fns.jac_x_into(t, x, p, c, out["A"])
    m.fns.jac_p_into(t, x, p, c, out["B"])
    m.fns.jacs_into(t, x, p, c, out["A2"], out["B2"])
    m.fns.x0_into(p, c, out["x0"])
    m.fns.dx0_dp_into(p, c, out["S0"])
    m.fns.out_into(t, x, p, c, out["y"])
    m.fns.out_jac_x_into(t, x, p, c, out["Hx"])
    m.fns.out_jac_p_into(t, x, p, c, out["Hp"])
    return out


def _compare_backends(spec, draws=3, seed=0, scale_x=(0.5, 1.5)):
    mn = model_from_spec(spec, backend="numba")
    mt = model_from_spec(spec, backend="tape")
    assert (mn.backend, mt.backend) == ("numba", "tape")
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        x = np.abs(mn.x0) * rng.uniform(*scale_x, mn.n_states) + rng.uniform(0.05, 0.5, mn.n_states)
        p = mn.p * rng.uniform(0.5, 1.5, mn.n_params)
        t = float(rng.uniform(0.0, 10.0))
        ref, got = _all_functions(mn, t, x, p), _all_functions(mt, t, x, p)
        for k in ref:
            _close(got[k], ref[k], f"{spec.name}: {k}")
    return mn, mt


@pytest.mark.parametrize("name", ["PKA", "CaMKII", "Chua"])
def test_tape_matches_numba_on_paper_models(name):
    _compare_backends(read_json_model(builtin_models()[name]))


def test_tape_matches_numba_on_petab_model_with_outputs(monkeypatch):
    from pbsens.problems.petab import build_model, read_problem
    yaml = os.path.join(PETAB, "Boehm_JProteomeRes2014", "Boehm_JProteomeRes2014.yaml")
    problem, files = read_problem(yaml)
    monkeypatch.setenv("PBSENS_MODEL_BACKEND", "tape")
    mt, _ = build_model(problem, files)
    assert mt.backend == "tape" and mt.n_outputs > 0
    mn, mt2 = _compare_backends(mt.spec)
    rng = np.random.default_rng(5)
    x = mn.x0 + rng.uniform(0.1, 1.0, mn.n_states)
    f = _all_functions(mn, 1.0, x, mn.p)
    assert np.count_nonzero(f["Hx"]) and np.count_nonzero(f["Hp"])  # the outputs' Jacobians are exercised


def test_initial_values_of_parameters():
    spec = ModelSpec(name="X0P", states=[Quantity("a", "k1 * 2 + exp(k2)"), Quantity("b", 1.0),
                                         Quantity("c", "k1 / k2")],
                     parameters=[Quantity("k1", 0.7), Quantity("k2", 1.3)],
                     odes={"a": "-k1 * a", "b": "k1 * a - k2 * b", "c": "0"}).validate()
    mn, mt = _compare_backends(spec)
    S0 = mt.initial_sensitivity([0.7, 1.3])
    np.testing.assert_allclose(S0, [[2.0, math.exp(1.3)], [0.0, 0.0], [1 / 1.3, -0.7 / 1.3 ** 2]], rtol=1e-14)


# every construct of the expression dialect, and a plain-Python evaluation of each
_OPS = {
    "e1": ("exp(-a) + log(b) + ln(a*b) + log10(b) + log2(a) + log(b, 3)",
           lambda a, b, k, t: math.exp(-a) + math.log(b) + math.log(a * b) + math.log10(b) + math.log2(a)
           + math.log(b) / math.log(3)),
    "e2": ("sqrt(a) + pow(b, 2.5) + a^3 + b**-2 + 1/a - a/b + abs(a - b) + pi",
           lambda a, b, k, t: math.sqrt(a) + b ** 2.5 + a ** 3 + b ** -2 + 1 / a - a / b + abs(a - b) + math.pi),
    "e3": ("sin(a) + cos(b) + tan(a/4) + asin(a/5) + acos(b/5) + atan(a)",
           lambda a, b, k, t: math.sin(a) + math.cos(b) + math.tan(a / 4) + math.asin(a / 5) + math.acos(b / 5)
           + math.atan(a)),
    "e4": ("sinh(a) + cosh(b) + tanh(a - b) + floor(t) + ceiling(t/2) + ceil(t/3)",
           lambda a, b, k, t: math.sinh(a) + math.cosh(b) + math.tanh(a - b) + math.floor(t) + math.ceil(t / 2)
           + math.ceil(t / 3)),
    "e5": ("min(a, b) + max(a, 2*b) + min(a, b, k) + heaviside(a - b) + heaviside(t - 100)",
           lambda a, b, k, t: min(a, b) + max(a, 2 * b) + min(a, b, k) + (1.0 if a - b >= 0 else 0.0)
           + (1.0 if t - 100 >= 0 else 0.0)),
    "e6": ("piecewise(a, a < b and t > 1, b, a >= b or t <= 0, k*a, not (a == b), 0.5)",
           lambda a, b, k, t: a if (a < b and t > 1) else b if (a >= b or t <= 0) else k * a if a != b else 0.5),
    "e7": ("piecewise(a*b, a <= b, -a) - (-k) * a * b / (1 + k*a) + (a != b) * 0 + k**k",
           lambda a, b, k, t: (a * b if a <= b else -a) + k * a * b / (1 + k * a) + k ** k),
}


def _operator_spec():
    states = [Quantity("a", 1.2), Quantity("b", 0.8)] + [Quantity(n, 0.0) for n in _OPS]
    odes = {"a": "-k*a", "b": "k*a - b"}
    odes.update({n: text for n, (text, _) in _OPS.items()})
    return ModelSpec(name="Operators", states=states, parameters=[Quantity("k", 0.9)], odes=odes).validate()


def test_every_dialect_operator_evaluates_like_python():
    spec = _operator_spec()
    mn, mt = _compare_backends(spec, draws=6, scale_x=(0.3, 3.0))
    rng = np.random.default_rng(7)
    for _ in range(8):
        a, b = rng.uniform(0.2, 3.0, 2)
        k, t = rng.uniform(0.2, 2.0), float(rng.uniform(0.0, 6.0))
        x = np.zeros(mt.n_states)
        x[:2] = a, b
        f = np.empty(mt.n_states)
        mt.fns.rhs_into(t, x, np.array([k]), mt.constants, f)
        for i, (name, (_, ref)) in enumerate(_OPS.items()):
            assert f[2 + i] == pytest.approx(ref(a, b, k, t), rel=1e-13, abs=1e-13), name
    # both branches of piecewise and of the comparisons are reached
    x = np.zeros(mt.n_states)
    for (a, b, t) in [(1.0, 2.0, 2.0), (2.0, 1.0, 2.0), (1.0, 2.0, 0.5), (1.5, 1.5, 0.5)]:
        x[:2] = a, b
        f = np.empty(mt.n_states)
        mt.fns.rhs_into(t, x, np.array([0.9]), mt.constants, f)
        assert f[2 + 5] == pytest.approx(_OPS["e6"][1](a, b, 0.9, t), rel=1e-15)


def test_jacobian_of_every_operator_against_central_differences():
    spec = _operator_spec()
    spec.odes["e4"] = "sinh(a) + cosh(b) + tanh(a - b)"          # floor/ceiling of t: no x dependence
    mt = model_from_spec(spec, backend="tape")
    x = np.zeros(mt.n_states)
    x[:2] = 1.3, 0.7
    p = np.array([0.9])
    A, B = np.empty((mt.n_states, mt.n_states)), np.empty((mt.n_states, 1))
    mt.fns.jacs_into(1.7, x, p, mt.constants, A, B)

    def f(xx, pp):
        out = np.empty(mt.n_states)
        mt.fns.rhs_into(1.7, xx, pp, mt.constants, out)
        return out

    h = 1e-6
    for j in range(2):
        e = np.zeros(mt.n_states)
        e[j] = h
        np.testing.assert_allclose(A[:, j], (f(x + e, p) - f(x - e, p)) / (2 * h), rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(B[:, 0], (f(x, p + h) - f(x, p - h)) / (2 * h), rtol=1e-7, atol=1e-7)


def test_unsupported_construct_raises_model_error():
    # floor/ceiling of a state are piecewise constant: derivative 0 (tests/test_sbml_semantics.py)
    spec = ModelSpec(name="FloorOfState", states=[Quantity("a", 1.0)], parameters=[Quantity("k", 1.0)],
                     odes={"a": "-k * floor(a)"}).validate()
    mt = model_from_spec(spec, backend="tape")
    assert mt.jac_x(0.0, np.array([1.5]), mt.p)[0, 0] == 0.0
    import sympy as sp
    from pbsens.model.tape_emit import _Emitter
    x = sp.Symbol("x_0", real=True)
    em = _Emitter(sp.Symbol("t", real=True), [x], [], {}, "model 'G'")
    with pytest.raises(ModelError, match="derivative"):
        em.emit(sp.Derivative(sp.Function("g")(x), x))
    with pytest.raises(ModelError, match="cannot evaluate gamma"):
        em.emit(sp.gamma(x) + 1)


def _dense_from_csr(indptr, indices, data, ncols):
    M = np.zeros((len(indptr) - 1, ncols))
    for i in range(len(indptr) - 1):
        M[i, indices[indptr[i]:indptr[i + 1]]] = data[indptr[i]:indptr[i + 1]]
    return M


def _check_sparse(m, x, p, t=0.3):
    c, nx, np_ = m.constants, m.n_states, m.n_params
    for pat, data_into, dense_into, ncols in ((m.jac_x_pattern, m.fns.jac_x_data_into, m.fns.jac_x_into, nx),
                                              (m.jac_p_pattern, m.fns.jac_p_data_into, m.fns.jac_p_into, np_)):
        indptr, indices = pat
        assert indptr.dtype == np.int64 and indices.dtype == np.int64
        assert indptr[0] == 0 and indptr[-1] == len(indices) and np.all(np.diff(indptr) >= 0)
        for i in range(nx):   # row-major, strictly increasing columns within a row
            assert np.all(np.diff(indices[indptr[i]:indptr[i + 1]]) > 0)
        data = np.full(len(indices), np.nan)
        data_into(t, x, p, c, data)
        M = np.empty((nx, ncols))
        dense_into(t, x, p, c, M)
        np.testing.assert_array_equal(_dense_from_csr(indptr, indices, data, ncols), M)


@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_sparse_pattern_and_data_match_dense(backend):
    for spec in (read_json_model(builtin_models()["PKA"]), random_mass_action(40, seed=2)):
        m = model_from_spec(spec, backend=backend)
        rng = np.random.default_rng(1)
        x, p = m.x0 * rng.uniform(0.5, 1.5, m.n_states), m.p
        _check_sparse(m, x, p)
        A = np.empty((m.n_states, m.n_states))
        m.fns.jac_x_into(0.3, x, p, m.constants, A)
        assert len(m.jac_x_pattern[1]) < A.size        # sparse, and every non-zero lies in the pattern
        assert np.count_nonzero(A) <= len(m.jac_x_pattern[1])


def test_random_linear_model_sparse_interface():
    from pbsens import random_linear_model
    m = random_linear_model(6, seed=1)
    _check_sparse(m, np.ones(6), m.p)
    assert len(m.jac_p_pattern[1]) == 6


def test_lang_tape_jacobians_against_sympy_dense_derivative():
    """Lang (124 states, 317 parameters) is too large to compile with numba in a test: the
    reference is sympy's derivative of the fully substituted right-hand side (the numba
    backend's derivation), for a sample of Jacobian columns, evaluated by lambdify."""
    import sympy as sp
    from pbsens.model.sbml import read_sbml
    from pbsens.model.symbolic import expand_definitions
    spec = read_sbml(os.path.join(PETAB, "Lang_PLOSComputBiol2024", "model_Lang_PLOSComputBiol2024.xml"))
    m = model_from_spec(spec)                         # auto: large enough for the tape
    assert m.backend == "tape"
    rng = np.random.default_rng(3)
    x = m.x0 * rng.uniform(0.8, 1.2, m.n_states) + rng.uniform(0.01, 0.1, m.n_states)
    p = m.p * rng.uniform(0.9, 1.1, m.n_params)
    _check_sparse(m, x, p)
    A = np.empty((m.n_states, m.n_states))
    B = np.empty((m.n_states, m.n_params))
    m.fns.jacs_into(0.0, x, p, m.constants, A, B)
    f = np.empty(m.n_states)
    m.fns.rhs_into(0.0, x, p, m.constants, f)
    t, xs, ps, rhs, _, _ = expand_definitions(spec)
    jx = rng.choice(m.n_states, 10, replace=False)
    jp = rng.choice(m.n_params, 10, replace=False)
    F = sp.Matrix(rhs)
    exprs = [list(F), list(F.jacobian([xs[j] for j in jx])), list(F.jacobian([ps[j] for j in jp]))]
    ref = sp.lambdify([t] + xs + ps, exprs, modules="math", cse=False)
    f_ref, A_ref, B_ref = (np.array(v, dtype=float) for v in ref(0.0, *x, *p))
    A_ref, B_ref = A_ref.reshape(m.n_states, -1), B_ref.reshape(m.n_states, -1)
    _close(f, f_ref.ravel(), "Lang rhs", rtol=1e-12)
    _close(A[:, jx], A_ref, "Lang A columns", rtol=1e-12)
    _close(B[:, jp], B_ref, "Lang B columns", rtol=1e-12)
    assert np.count_nonzero(A_ref) and np.count_nonzero(B_ref)


def test_backend_choice_and_env(monkeypatch):
    small = read_json_model(builtin_models()["PKA"])
    assert tape_mod.choose_backend(small) == "numba"
    assert tape_mod.choose_backend(random_mass_action(40, seed=0)) == "tape"
    monkeypatch.setenv("PBSENS_MODEL_BACKEND", "tape")
    assert tape_mod.choose_backend(small) == "tape"
    assert tape_mod.choose_backend(small, "numba") == "numba"        # the argument wins
    assert load_model("Chua").backend == "tape"
    monkeypatch.setenv("PBSENS_MODEL_BACKEND", "fast")
    with pytest.raises(ModelError, match="PBSENS_MODEL_BACKEND"):
        tape_mod.choose_backend(small)
    with pytest.raises(ModelError, match="'backend'"):
        load_model("Chua", backend="llvm")


_WARM = textwrap.dedent("""
    import sys, json
    import numpy as np
    from pbsens.model.networks import random_mass_action
    from pbsens.model.library import model_from_spec
    m = model_from_spec(random_mass_action(60, seed=4), backend="tape")
    f = np.empty(m.n_states)
    m.fns.rhs_into(0.0, m.x0, m.p, m.constants, f)
    print(json.dumps({"sympy": "sympy" in sys.modules, "f": f.tolist()}))
""")


def test_warm_load_reads_cache_without_sympy(tmp_path):
    import json
    env = dict(os.environ, PBSENS_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", _WARM], env=env, capture_output=True, text=True, cwd=ROOT)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    cold, warm = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert cold["sympy"] is True and warm["sympy"] is False
    assert warm["f"] == cold["f"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_damaged_tape_cache_is_rebuilt_with_warning(tmp_path, monkeypatch, damage):
    from pbsens.model import cache
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tape_mod, "_loaded", {})
    spec = random_mass_action(20, seed=9)
    m1 = model_from_spec(spec, backend="tape")
    path = cache.entry_path(cache.cache_dir(), tape_mod.tape_key(spec))
    raw = open(path, "rb").read()
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        i = len(raw) - 100
        raw = raw[:i] + (b"A" if raw[i:i + 1] != b"A" else b"B") + raw[i + 1:]
    else:
        raw = raw.replace(tape_mod.tape_key(spec).encode(), b"0" * 24, 1)
    open(path, "wb").write(raw)
    monkeypatch.setattr(tape_mod, "_loaded", {})
    with pytest.warns(CacheWarning, match="damaged"):
        m2 = model_from_spec(spec, backend="tape")
    np.testing.assert_array_equal(m2.constants, m1.constants)
    assert cache.read_entry(cache.cache_dir(), tape_mod.tape_key(spec))[0] == "ok"


def test_tape_model_runs_the_sensitivity_kernels():
    """A tape model goes through the state solve and a sensitivity method like a compiled one.

    Both march along the same trajectory (two LSODA solves would differ at the solver
    tolerance: the right-hand sides differ in the last bits)."""
    import pbsens
    spec = read_json_model(builtin_models()["PKA"])
    mn = model_from_spec(spec, backend="numba")
    mt = model_from_spec(spec, backend="tape")
    t = np.linspace(0.0, 60.0, 7)
    trn, trt = pbsens.solve_states(mn, (0, 60), t_eval=t), pbsens.solve_states(mt, (0, 60), t_eval=t)
    assert trt.stats["nfev"] > 0 and np.all(np.isfinite(trt.x))        # the tape drives LSODA too
    rn = pbsens.sensitivities(mn, trn, method="exp2")
    rt = pbsens.sensitivities(mt, trn, method="exp2")
    _close(rt.S, rn.S, "S along one trajectory", rtol=1e-10)
