"""The front door's shape: one `sensitivities` whose signature and docstring editors and help()
see, and the method table (pbsens.sensitivity.methods) agreeing with the kernels' codes and with what the
march does on a tiny model."""
import ast
import importlib
import inspect
import os
import pydoc

import numpy as np
import pytest

import pbsens
from pbsens.sensitivity import error as error_estimate, sparse as sparse_path
from pbsens.kernels import codes
from pbsens.sensitivity.methods import FORWARD, METHOD_INFO, METHODS, MethodInfo, method_info, methods_with
from pbsens.sensitivity.result import BRANCH_NAMES

sens_module = importlib.import_module("pbsens.sensitivity.posthoc")   # the module, not the function


def test_signature_lists_the_real_parameters():
    sig = inspect.signature(pbsens.sensitivities)
    names = list(sig.parameters)
    assert names[:7] == ["model", "trajectory", "method", "p", "x0", "S0", "t_eval"]
    for name in ("t_span", "solver", "method", "sens_rtol", "sens_atol", "estimate_error", "substeps",
                 "linalg", "freeze", "params", "midpoint", "max_substeps", "tighten_states"):
        assert name in sig.parameters, name
    assert len(names) == 31
    assert sig.parameters["method"].default == "exp2"          # issue #41 (API.md, Changes)
    assert sig.parameters["solver"].default == "rodas5p"
    assert sig.parameters["sens_rtol"].kind is inspect.Parameter.KEYWORD_ONLY
    assert not any(q.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
                   for q in sig.parameters.values())


def test_help_shows_the_real_docstring():
    doc = pbsens.sensitivities.__doc__
    assert doc.startswith("Post-hoc sensitivities ``S = dx/dp``")
    assert doc is pbsens.sensitivities.__wrapped__.__doc__
    assert pbsens.sensitivities.__name__ == "sensitivities"
    text = pydoc.plain(pydoc.render_doc(pbsens.sensitivities))
    assert "Post-hoc sensitivities" in text
    assert "sens_rtol=None" in text and "method='exp2'" in text     # the signature, not (*args, **kwargs)
    for name in inspect.signature(pbsens.sensitivities).parameters:
        assert name in doc, f"{name} is not documented"


def test_one_definition_and_no_shadowing():
    path = sens_module.__file__
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "sensitivities"]
    assert len(defs) == 1
    assigned = [t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name) and t.id == "sensitivities"]
    assert not assigned and "F811" not in source
    assert os.path.basename(path) == "posthoc.py"


def test_every_method_has_one_record():
    assert METHODS == tuple(codes.METHOD_CODES) == sens_module.METHODS
    assert set(METHOD_INFO) == set(codes.METHOD_CODES)
    for name, info in METHOD_INFO.items():
        assert isinstance(info, MethodInfo) and info.name == name
        assert info.code == codes.METHOD_CODES[name]
        assert method_info(name) is info and method_info(info.code) is info
        with pytest.raises(Exception):
            info.order = 3                          # frozen
        assert info.order in (1, 2) and info.exp_order in (None, 1, 2)
        assert info.exponential == (info.branch is not None)
        assert not (info.exponential and info.switches)
        assert info.exp_order is not None or not (info.switches or info.exponential)
        assert not info.midpoint or info.exponential
    assert FORWARD not in METHOD_INFO
    assert sparse_path.SPARSE_METHODS == methods_with(sparse=True)


def _final_error(m, ref, method, n, T, **kw):
    t = np.linspace(0.0, T, n + 1)
    tr = pbsens.solve_states(m, (0.0, T), t_eval=t, rtol=1e-12, atol=1e-14)
    r = pbsens.sensitivities(m, (t, tr.x[tr.eval_index]), method=method, **kw)
    return np.linalg.norm(r.S[-1] - ref.S[-1]) / np.linalg.norm(ref.S[-1]), r


@pytest.mark.parametrize("name", METHODS)
def test_records_agree_with_the_march(chua, name):
    """Order (halving a uniform grid on Chua, [0, 1]), branches, the switch's fallback order
    (``n_max=1``: every interval "exp-stiff"), the sparse march, the midpoint correction and
    the frozen gaps, each as the record says."""
    info = METHOD_INFO[name]
    T = 1.0
    ref = pbsens.forward_sensitivities(chua, (0.0, T), t_eval=[T], rtol=1e-12, atol=1e-14)
    for kw, order in (({}, info.order), ({"n_max": 1}, info.stiff_order)):
        e1, r = _final_error(chua, ref, name, 16, T, **kw)
        e2, _ = _final_error(chua, ref, name, 32, T, **kw)
        assert abs(np.log2(e1 / e2) - order) < 0.3, (kw, e1, e2)
        branch_codes = np.array([BRANCH_NAMES.index(b) for b in r.branch])
        assert error_estimate.method_order(name, branch_codes) == order
        if info.exponential:
            assert set(r.branch) == {BRANCH_NAMES[info.branch]}
        elif not info.switches:
            assert set(r.branch) == {"pbs"}
        elif kw:
            assert set(r.branch) == {"exp-stiff"}
    tr = pbsens.solve_states(chua, (0.0, T), method="rodas5p")       # substeps 4 by default
    assert pbsens.sensitivities(chua, tr, method=name).options["midpoint"] == info.midpoint
    assert pbsens.sensitivities(chua, tr, method=name, midpoint=False).options["freeze"] == info.freeze
    if info.sparse:
        r = pbsens.sensitivities(chua, tr, method=name, linalg="sparse")
        assert r.options["linalg"] == "sparse" and np.all(np.isfinite(r.S))
    else:
        with pytest.raises(pbsens.PbsensError, match="'linalg': 'sparse' is available for method"):
            pbsens.sensitivities(chua, tr, method=name, linalg="sparse")
