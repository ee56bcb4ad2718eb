"""Every bad input we know of, and pbsens's answer to it: one table.

Each row of :data:`CASES` is ``(description, provoke, error class, message fragment)``:
calling ``provoke()`` must raise exactly that :class:`pbsens.PbsensError` subclass (not
a subclass of it, not a raw exception from numpy, scipy, sympy or numba) with the
fragment in its message. Rows marked ``isolated`` used to crash the interpreter
(segmentation fault, abort, reads past an array): they run in a child process, so
that a regression fails the test instead of killing the test run.

``docs/make_errors.py`` writes ``docs/ERRORS.md`` from this table;
:func:`test_errors_md_is_generated_from_this_table` keeps the two equal.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pytest

import pbsens
from pbsens.errors import ModelError, PbsensError, SolverError, UnsupportedModelError

ROOT = Path(__file__).resolve().parent.parent


class Case(NamedTuple):
    area: str
    description: str
    provoke: Callable
    error: type
    fragment: str
    isolated: bool = False        # run in a child process (former interpreter crashes)


# ------------------------------------------------------------------ helpers (lazy, cached)
@functools.lru_cache(None)
def chua():
    return pbsens.load_model("Chua")


@functools.lru_cache(None)
def lin2():
    return pbsens.random_linear_model(2)


@functools.lru_cache(None)
def chua_traj():
    return pbsens.solve_states(chua(), (0.0, 1.0), t_eval=[0.5, 1.0])


@functools.lru_cache(None)
def robertson():
    """ROBER (Robertson's stiff chemical kinetics)."""
    return pbsens.load_model(pbsens.ModelSpec.from_dict({
        "name": "rober", "states": [{"name": "y1", "initial": 1.0}, {"name": "y2", "initial": 0.0},
                                    {"name": "y3", "initial": 0.0}],
        "parameters": [{"name": "k1", "value": 0.04}, {"name": "k2", "value": 1e4}, {"name": "k3", "value": 3e7}],
        "odes": {"y1": "-k1*y1 + k2*y2*y3", "y2": "k1*y1 - k2*y2*y3 - k3*y2**2", "y3": "k3*y2**2"}}))


def tmpdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="pbsens-bad-"))
    return d


def spec(odes=None, states=None, parameters=None, **extra):
    """A one-state model ``x' = -k x`` with the given pieces replaced, loaded from a dict."""
    d = {"name": "bad", "states": states or [{"name": "x", "initial": 1.0}],
         "parameters": parameters if parameters is not None else [{"name": "k", "value": 0.5}],
         "odes": odes or {"x": "-k*x"}}
    d.update(extra)
    return pbsens.load_model(pbsens.ModelSpec.from_dict(d))


def rate(expr):
    return lambda: spec(odes={"x": expr})


def json_file(text, name="m.json"):
    def go():
        p = tmpdir() / name
        p.write_text(text, encoding="utf-8")
        return pbsens.load_model(p)
    return go


def solve(**kw):
    return lambda: pbsens.solve_states(chua(), kw.pop("t_span", (0.0, 1.0)), **kw)


def sens(**kw):
    return lambda: pbsens.sensitivities(chua(), **kw)


def fwd(**kw):
    return lambda: pbsens.forward_sensitivities(chua(), kw.pop("t_span", (0.0, 1.0)), **kw)


def edited_trajectory(**changes):
    def go():
        tr = pbsens.solve_states(chua(), (0.0, 1.0))
        for k, v in changes.items():
            setattr(tr, k, v)
        return pbsens.sensitivities(chua(), tr)
    return go


def petab_case(edit_file=None, edit=None, case="0001", evaluate=False, write=None):
    """A copy of PEtab test-suite case ``case`` with ``edit_file`` changed by ``edit(df) -> df``
    (or replaced by ``write(path)``), loaded (and evaluated)."""
    def go():
        import pandas as pd
        import petabtests

        import pbsens.petab as pbpetab
        src = Path(petabtests.__file__).parent / "cases" / "v1.0.0" / "sbml" / case
        d = tmpdir() / case
        shutil.copytree(src, d, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
        if write:
            write(d / edit_file)
        elif edit_file:
            path = d / edit_file
            df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
            edit(df).to_csv(path, sep="\t", index=False)
        problem = pbpetab.load(d / f"_{case}.yaml", lint=False)
        return problem.evaluate() if evaluate else problem
    return go


def set_cell(row, col, value):
    def f(df):
        df.loc[row, col] = value
        return df
    return f


def many_rows(n):
    """A measurement table of ``n`` data rows (written as text: no pandas in the way)."""
    def write(path):
        path.write_text("observableId\tsimulationConditionId\ttime\tmeasurement\n" + "obs_a\tc0\t1\t0.5\n" * n)
    return write


def one_long_line(n_bytes):
    """A measurement table whose last row has one cell of ``n_bytes`` digits."""
    def write(path):
        with open(path, "a", encoding="utf-8") as f:
            f.write("obs_a\tc0\t1\t" + "9" * n_bytes + "\n")
    return write


def sparse_file(n_bytes):
    """A file of ``n_bytes`` (a sparse file: no disk space, no time to write)."""
    def write(path):
        with open(path, "r+b") as f:
            f.truncate(n_bytes)
    return write


def sbml_file(name):
    return lambda: pbsens.load_model(ROOT / "tests" / "data" / "sbml" / name)


def _petab_error():
    import pbsens.petab as pbpetab
    return pbpetab.PetabError


T3 = np.array([0.0, 1.0, 2.0])
ONES = np.ones((3, 2))

# ------------------------------------------------------------------------------ the table
CASES = [
    # -- former interpreter crashes (segfault, abort, out-of-bounds reads)
    Case("crash", "sensitivities of Chua on a trajectory of a 3-parameter model, with S0",
         lambda: pbsens.sensitivities(chua(), pbsens.solve_states(pbsens.random_linear_model(3), (0, 1)),
                                      S0=np.zeros((3, 2))),
         PbsensError, "'trajectory.p' has length 3, expected 2", isolated=True),
    Case("crash", "a Trajectory whose p was replaced by a longer vector after solving",
         edited_trajectory(p=np.ones(5)), PbsensError, "'trajectory.p' has length 5", isolated=True),
    Case("crash", "a Trajectory whose x was replaced by fewer columns after solving",
         edited_trajectory(x=np.ones((4, 2)), t=np.arange(4.0)), PbsensError, "x must have shape", isolated=True),
    Case("crash", "model.rhs(t, x, p) with x too short",
         lambda: chua().rhs(0.0, np.ones(1), chua().p), PbsensError, "'x' must be a 1-D array of length 3",
         isolated=True),
    Case("crash", "model.jac_x(t, x, p) with p too short",
         lambda: chua().jac_x(0.0, chua().x0, np.ones(1)), PbsensError, "'p' must be a 1-D array of length 2",
         isolated=True),
    Case("crash", "model.jac_p(t, x, p) with x too long",
         lambda: chua().jac_p(0.0, np.ones(30), chua().p), PbsensError, "'x' must be a 1-D array of length 3",
         isolated=True),
    Case("crash", "model.outputs(t, x) with x too short",
         lambda: chua().outputs(0.0, np.ones(2)), PbsensError, "'x' has length 2, expected 3", isolated=True),
    # -- hangs
    Case("hang", "method='pbs' with n_factor=1e300 (unbounded refinement)",
         lambda: pbsens.sensitivities(lin2(), (T3, ONES), method="pbs", n_factor=1e300),
         SolverError, "beyond the budget max_substeps=10000000"),
    Case("hang", "method='pbs' refinement beyond a small max_substeps",
         lambda: pbsens.sensitivities(lin2(), (T3, ONES), method="pbs", n_factor=1e6, max_substeps=1000),
         SolverError, "max_substeps=1000"),
    Case("hang", "method='pbs' on Robertson's stiff problem over [0, 1e5] at rtol 1e-3",
         lambda: pbsens.sensitivities(robertson(), t_span=(0.0, 1e5), rtol=1e-3, method="pbs"),
         SolverError, "sub-steps, beyond the budget max_substeps=10000000"),
    Case("hang", "max_substeps=0", lambda: pbsens.sensitivities(lin2(), (T3, ONES), max_substeps=0),
         PbsensError, "'max_substeps' must be a positive integer"),
    Case("hang", "a huge integer power x**100000000 in a rate", rate("x**100000000"),
         ModelError, "beyond the largest power allowed"),
    Case("hang", "a huge power through pow(x, 5000)", rate("pow(x, 5000)"),
         ModelError, "beyond the largest power allowed"),
    # -- model expressions
    Case("model", "a very long expression (120 000 characters)", rate("x+" * 60000 + "x"),
         ModelError, "beyond the limit of 100000"),
    Case("model", "a deeply nested expression (unary minus 40 000 deep)", rate("-" * 40000 + "x"),
         ModelError, "too deeply nested or too large"),
    Case("model", "a long flat sum (30 000 terms)", rate("x+" * 30000 + "x"),
         ModelError, "too deeply nested or too large"),
    Case("model", "too many nested parentheses", rate("(" * 300 + "x" + ")" * 300),
         ModelError, "cannot parse"),
    Case("model", "sqrt of a negative constant", rate("sqrt(-1)*x"), ModelError, "is complex"),
    Case("model", "division by zero in a rate", rate("x/0"), ModelError, "is not finite"),
    Case("model", "a non-finite initial expression", lambda: spec(states=[{"name": "x", "initial": "1/0"}]),
         ModelError, "is not finite"),
    Case("model", "an initial expression infinite at the default parameters",
         lambda: spec(states=[{"name": "x", "initial": "exp(k)"}], parameters=[{"name": "k", "value": 1e4}]),
         ModelError, "initial value of state(s) 'x' is not finite"),
    Case("model", "an initial value NaN", lambda: spec(states=[{"name": "x", "initial": float("nan")}]),
         ModelError, "must be a finite number"),
    Case("model", "piecewise without an otherwise branch", rate("piecewise(x, t > 1)"),
         ModelError, "the last, the value where no condition holds, is missing"),
    Case("model", "the ligature 'ﬁ' in an expression (NFKC reads it as 'fi')",
         lambda: spec(odes={"x": "-ﬁ*x"}, parameters=[{"name": "fi", "value": 1.0}]),
         ModelError, "Unicode NFKC normalisation"),
    Case("model", "micro sign 'µ' as a parameter name (NFKC reads it as Greek mu 'μ')",
         lambda: spec(odes={"x": "-μ*x"}, parameters=[{"name": "µ", "value": 1.0}]),
         ModelError, "changes under Unicode NFKC normalisation"),
    Case("model", "code in an expression (__import__)", rate("__import__('os').getcwd()"),
         ModelError, "only plain calls"),
    Case("model", "attribute access in an expression", rate("x.real"), ModelError, "Attribute is not allowed"),
    Case("model", "a lambda in an expression", rate("(lambda: 1)()"), ModelError, "only plain calls"),
    Case("model", "an unknown name in a rate", rate("-q*x"), ModelError, "unknown name 'q'"),
    Case("model", "an unknown function in a rate", rate("erf(x)"), ModelError, "unknown function 'erf'"),
    Case("model", "a syntax error in a rate", rate("x +* 2"), ModelError, "cannot parse"),
    Case("model", "an ODE for a name that is not a state", lambda: spec(odes={"x": "-x", "y": "1"}),
         ModelError, "which is not a state"),
    Case("model", "a state without an ODE", lambda: spec(odes={"y": "1"}), ModelError, "which is not a state"),
    Case("model", "a name used twice", lambda: spec(parameters=[{"name": "x", "value": 1.0}]),
         ModelError, "is used twice"),
    Case("model", "a state name that is not an identifier",
         lambda: spec(states=[{"name": "2x", "initial": 1.0}]), ModelError, "is not a valid identifier"),
    # -- model files
    Case("file", "ODEs for the same state given twice in a JSON object",
         json_file('{"name": "d", "states": [{"name": "x", "initial": 1}], "parameters": [],'
                   ' "odes": {"x": "-x", "x": "x"}}'), ModelError, "key 'x' appears twice"),
    Case("file", "ODEs for the same state given twice in a JSON list",
         json_file('{"name": "d", "states": [{"name": "x", "initial": 1}], "parameters": [],'
                   ' "odes": [{"state": "x", "rhs": "-x"}, {"state": "x", "rhs": "x"}]}'),
         ModelError, "two right-hand sides for state 'x'"),
    Case("file", "a model file that is not JSON", json_file("{not json"), ModelError, "is not valid JSON"),
    Case("file", "a model file without 'odes'", json_file('{"name": "d", "states": []}'),
         ModelError, "required key 'odes' is missing"),
    Case("file", "a model name that does not exist", lambda: pbsens.load_model("chua_typo"),
         ModelError, "is neither a built-in model"),
    Case("file", "a number where a model path is expected", lambda: pbsens.load_model(42),
         PbsensError, "'name_or_path' must be a model name or a path"),
    # -- SBML constructs pbsens cannot represent (each named with the file and the element)
    Case("sbml", "an SBML event triggered by an equality (A == 0.5)", sbml_file("unsupported_event.xml"),
         UnsupportedModelError, "unsupported_event.xml' uses SBML constructs pbsens cannot represent: "
                                "event trigger 'ev_pulse'"),
    Case("sbml", "an SBML algebraic rule", sbml_file("unsupported_algebraic.xml"), UnsupportedModelError,
         "unsupported_algebraic.xml' uses SBML constructs pbsens cannot represent: algebraic rule 'alg_total'"),
    Case("sbml", "delay() in SBML math (the delay csymbol in a kinetic law)", sbml_file("unsupported_delay.xml"),
         UnsupportedModelError, "unsupported_delay.xml' uses SBML constructs pbsens cannot represent: "
                                "delay 'delayed_decay'"),
    Case("sbml", "a fast reaction (fast=\"true\", SBML Level 3 Version 1)", sbml_file("unsupported_fast.xml"),
         UnsupportedModelError, "unsupported_fast.xml' uses SBML constructs pbsens cannot represent: "
                                "fast reaction 'fast_binding'"),
    Case("sbml", "a fast reaction (fast=\"true\", SBML Level 2 Version 4)", sbml_file("unsupported_fast_l2.xml"),
         UnsupportedModelError, "unsupported_fast_l2.xml' uses SBML constructs pbsens cannot represent: "
                                "fast reaction 'fast_unbinding'"),
    Case("sbml", "hierarchical model composition (the comp package, a submodel)", sbml_file("unsupported_comp.xml"),
         UnsupportedModelError, "unsupported_comp.xml' uses SBML constructs pbsens cannot represent: "
                                "package 'comp', comp submodel 'sub1'"),
    Case("sbml", "several unsupported constructs in one file (all listed in one error)",
         sbml_file("unsupported_many.xml"), UnsupportedModelError,
         "uses SBML constructs pbsens cannot represent: delay 'd', algebraic rule 'alg'"),
    # -- models as arguments
    Case("args", "a string where a model is expected (solve_states)",
         lambda: pbsens.solve_states("Chua", (0, 1)), PbsensError, "'model' must be a pbsens Model"),
    Case("args", "a string where a model is expected (sensitivities)",
         lambda: pbsens.sensitivities("Chua", t_span=(0, 1)), PbsensError, "'model' must be a pbsens Model"),
    Case("args", "a string where a model is expected (forward_sensitivities)",
         lambda: pbsens.forward_sensitivities("Chua", (0, 1)), PbsensError, "'model' must be a pbsens Model"),
    Case("args", "random_linear_model(10**6) (7 TiB of matrices)", lambda: pbsens.random_linear_model(10 ** 6),
         PbsensError, "is too large"),
    Case("args", "random_linear_model(0)", lambda: pbsens.random_linear_model(0), PbsensError,
         "'n' must be a positive integer"),
    Case("args", "random_linear_model(2.5)", lambda: pbsens.random_linear_model(2.5), PbsensError,
         "'n' must be a positive integer"),
    # -- solve_states
    Case("solve", "method='Radau' where the Jacobian is infinite (d sqrt(x)/dx at x = 0)",
         lambda: pbsens.solve_states(spec(odes={"x": "-sqrt(x)"}, states=[{"name": "x", "initial": 0.0}]),
                                     (0.0, 1.0), method="Radau"),
         SolverError, "failed near t = 0 (method Radau): array must not contain infs or NaNs; the Jacobian"),
    Case("solve", "rtol='tight'", solve(rtol="tight"), PbsensError, "'rtol' must be a positive number"),
    Case("solve", "rtol=0", solve(rtol=0.0), PbsensError, "'rtol' must be positive and finite"),
    Case("solve", "atol=NaN", solve(atol=float("nan")), PbsensError, "'atol' must be positive and finite"),
    Case("solve", "atol of the wrong length", solve(atol=[1e-6, 1e-6]), PbsensError,
         "'atol' must be a number or have one entry per state (3)"),
    Case("solve", "method=[...] (a list)", solve(method=["LSODA"]), PbsensError, "'method' must be one of"),
    Case("solve", "an unknown method name", solve(method="rk4"), PbsensError, "'method' must be one of"),
    Case("solve", "solver=[...] (not an option of solve_states)", solve(solver=["LSODA"]), PbsensError,
         "unknown solver option(s) 'solver'"),
    Case("solve", "max_step=-1", solve(max_step=-1), PbsensError, "`max_step` must be positive"),
    Case("solve", "an unknown solver option banana=3", solve(banana=3), PbsensError,
         "unknown solver option(s) 'banana'"),
    Case("solve", "complex x0", solve(x0=np.array([1 + 1j, 0, 0])), PbsensError, "'x0' must be real"),
    Case("solve", "x0 of the wrong length", solve(x0=[1.0, 2.0]), PbsensError, "'x0' has length 2, expected 3"),
    Case("solve", "x0 with NaN", solve(x0=[np.nan, 0, 0]), PbsensError, "'x0' contains NaN or inf"),
    Case("solve", "p of the wrong length", solve(p=[1.0]), PbsensError, "'p' has length 1, expected 2"),
    Case("solve", "p two-dimensional", solve(p=np.ones((2, 2))), PbsensError, "'p' must be one-dimensional"),
    Case("solve", "a 2-D t_eval", solve(t_eval=np.array([[0.1, 0.2], [0.3, 0.4]])), PbsensError,
         "'t_eval' must be one-dimensional"),
    Case("solve", "t_eval outside t_span", solve(t_eval=[0.5, 2.0]), PbsensError, "must lie inside t_span"),
    Case("solve", "t_eval not increasing", solve(t_eval=[0.5, 0.2]), PbsensError, "strictly increasing"),
    Case("solve", "t_span decreasing", solve(t_span=(1.0, 0.0)), PbsensError, "'t_span' must be increasing"),
    Case("solve", "t_span with inf", solve(t_span=(0.0, np.inf)), PbsensError, "'t_span' contains NaN or inf"),
    Case("solve", "t_span of three numbers", solve(t_span=(0.0, 1.0, 2.0)), PbsensError,
         "'t_span' must be a pair"),
    Case("solve", "complex t_span", solve(t_span=(0.0, 1.0 + 1j)), PbsensError, "real numbers"),
    Case("solve", "max_nfev=0", solve(max_nfev=0), PbsensError, "'max_nfev' must be a positive integer"),
    # -- sensitivities
    Case("sens", "an unknown method", sens(t_span=(0, 1), method="rk4"), PbsensError, "'method' must be one of"),
    Case("sens", "rtol='tight'", sens(t_span=(0, 1), rtol="tight"), PbsensError, "'rtol' must be a positive"),
    Case("sens", "solver=[...]", sens(t_span=(0, 1), solver=["LSODA"]), PbsensError, "'solver' must be one of"),
    Case("sens", "neither trajectory nor t_span", sens(), PbsensError, "give either 'trajectory'"),
    Case("sens", "S0 of the wrong shape", lambda: pbsens.sensitivities(chua(), chua_traj(), S0=np.zeros((2, 2))),
         PbsensError, "'S0' must have shape (n_states, n_params) = (3, 2)"),
    Case("sens", "complex S0", lambda: pbsens.sensitivities(chua(), chua_traj(), S0=np.zeros((3, 2)) * 1j),
         PbsensError, "'S0' must be real"),
    Case("sens", "a 2-D t_eval", lambda: pbsens.sensitivities(chua(), chua_traj(), t_eval=[[0.5], [1.0]]),
         PbsensError, "'t_eval' must be a one-dimensional"),
    Case("sens", "p that differs from the trajectory's",
         lambda: pbsens.sensitivities(chua(), chua_traj(), p=chua().p + 1), PbsensError,
         "'p' differs from the parameters the trajectory was solved with"),
    Case("sens", "a (t, x) pair with x of the wrong shape", lambda: pbsens.sensitivities(lin2(), (T3, np.ones((3, 3)))),
         PbsensError, "x must have shape (len(t), n_states) = (3, 2)"),
    Case("sens", "a (t, x) pair with NaN", lambda: pbsens.sensitivities(lin2(), (T3, ONES * np.nan)),
         PbsensError, "contains NaN or inf in t or x"),
    Case("sens", "a (t, x) pair with t decreasing", lambda: pbsens.sensitivities(lin2(), (T3[::-1], ONES)),
         PbsensError, "must be strictly increasing"),
    Case("sens", "a (t, x) pair with complex x", lambda: pbsens.sensitivities(lin2(), (T3, ONES * 1j)),
         PbsensError, "t and x must be real"),
    Case("sens", "a one-point grid", lambda: pbsens.sensitivities(lin2(), ([0.0], ONES[:1])), PbsensError,
         "needs at least two points"),
    Case("sens", "a trajectory that is a string", lambda: pbsens.sensitivities(lin2(), "traj"), PbsensError,
         "'trajectory' must be a Trajectory or a pair"),
    Case("sens", "n_factor=-1", lambda: pbsens.sensitivities(lin2(), (T3, ONES), n_factor=-1), PbsensError,
         "'n_factor' must be a positive number"),
    Case("sens", "n_max=2.5", lambda: pbsens.sensitivities(lin2(), (T3, ONES), n_max=2.5), PbsensError,
         "'n_max' must be a positive integer"),
    Case("sens", "an unknown norm", lambda: pbsens.sensitivities(lin2(), (T3, ONES), norm="2"), PbsensError,
         "'norm' must be one of"),
    Case("sens", "an unknown interpolation", lambda: pbsens.sensitivities(lin2(), (T3, ONES), interpolation="spline"),
         PbsensError, "'interpolation' must be one of"),
    Case("sens", "reuse_tol=1", lambda: pbsens.sensitivities(lin2(), (T3, ONES), reuse_tol=1.0), PbsensError,
         "'reuse_tol' must be a number in [0, 1)"),
    Case("sens", "sens_atol without sens_rtol", lambda: pbsens.sensitivities(lin2(), (T3, ONES), sens_atol=1e-6),
         PbsensError, "'sens_atol' needs 'sens_rtol'"),
    Case("sens", "estimate_error='yes'", lambda: pbsens.sensitivities(lin2(), (T3, ONES), estimate_error="yes"),
         PbsensError, "'estimate_error' must be True or False"),
    Case("sens", "state_error='always'", lambda: pbsens.sensitivities(lin2(), (T3, ONES), state_error="always"),
         PbsensError, "'state_error' must be"),
    # -- forward_sensitivities
    Case("fwd", "an unknown solver option banana=3", fwd(banana=3), PbsensError, "unknown solver option(s) 'banana'"),
    Case("fwd", "max_step=-1", fwd(max_step=-1), PbsensError, "`max_step` must be positive"),
    Case("fwd", "complex x0", fwd(x0=np.array([1 + 1j, 0, 0])), PbsensError, "'x0' must be real"),
    Case("fwd", "a 2-D t_eval", fwd(t_eval=np.array([[0.1, 0.2], [0.3, 0.4]])), PbsensError,
         "'t_eval' must be one-dimensional"),
    Case("fwd", "an unknown method", fwd(method="rk4"), PbsensError, "'method' must be one of"),
    Case("fwd", "an unknown parameter name in params", fwd(params=["nope"]), PbsensError, "no parameter 'nope'"),
    Case("fwd", "a solver option pbsens sets itself (jac)", fwd(jac=None), PbsensError,
         "is set by forward_sensitivities"),
    Case("fwd", "an explicit method (RK45) on Robertson's stiff problem over [0, 1e5] (budget max_nfev=20000)",
         lambda: pbsens.forward_sensitivities(robertson(), (0.0, 1e5), method="RK45", max_nfev=20_000),
         SolverError, "more than max_nfev = 20000 right-hand-side evaluations"),
    Case("fwd", "max_nfev=0", fwd(max_nfev=0), PbsensError, "'max_nfev' must be a positive integer"),
    # -- PEtab problems
    Case("petab", "a measurement table without the 'time' column",
         petab_case("_measurements.tsv", lambda df: df.drop(columns=["time"])), _petab_error,
         "'time'"),
    Case("petab", "a measurement naming an observable that does not exist",
         petab_case("_measurements.tsv", set_cell(1, "observableId", "no_such_observable")), _petab_error,
         "no_such_observable"),
    Case("petab", "a condition column that is not in the model",
         petab_case("_conditions.tsv", lambda df: df.assign(not_in_model="1"), case="0002"), _petab_error,
         "'not_in_model'"),
    Case("petab", "an unknown parameter in a condition value",
         petab_case("_conditions.tsv", set_cell(1, "a0", "no_such_parameter"), case="0002"), _petab_error,
         "no_such_parameter"),
    Case("petab", "a noise formula that evaluates to -1",
         petab_case("_observables.tsv", lambda df: df.assign(noiseFormula="1 - 2"), evaluate=True), _petab_error,
         "'noiseFormula'"),
    Case("petab", "code (__import__) in an observable formula",
         petab_case("_observables.tsv", lambda df: df.assign(observableFormula="__import__('os').getcwd()")),
         _petab_error, "observableFormula"),
    Case("petab", "a lambda in an observable formula",
         petab_case("_observables.tsv", lambda df: df.assign(observableFormula="(lambda: 1)()")),
         _petab_error, "column 'observableFormula': cannot read the formula '(lambda: 1)()'"),
    Case("petab", "attribute access in a noise formula",
         petab_case("_observables.tsv", lambda df: df.assign(noiseFormula="a.__class__")),
         _petab_error, "column 'noiseFormula': cannot read the formula 'a.__class__'"),
    Case("petab", "a measurement table of 200 001 rows (limit MAX_TABLE_ROWS = 200 000)",
         petab_case("_measurements.tsv", write=many_rows(200_001)), _petab_error,
         "_measurements.tsv' has more than 200000 data rows, the limit"),
    Case("petab", "a measurement table with one line of 50 MB",
         petab_case("_measurements.tsv", write=one_long_line(50_000_000)), _petab_error,
         "_measurements.tsv', line 4: the line is longer than the limit of 1048576 bytes"),
    Case("petab", "a 70 MB condition file (limit MAX_TABLE_BYTES = 64 MiB)",
         petab_case("_conditions.tsv", write=sparse_file(70 * 2**20)), _petab_error,
         "_conditions.tsv' has 73400320 bytes, more than the limit of 67108864"),
]


def error_class(case):
    """The expected class (PEtab's is looked up lazily: the petab extra is optional)."""
    return case.error() if case.error is _petab_error else case.error


def error_name(case):
    return "PetabError" if case.error is _petab_error else case.error.__name__


def case_id(case):
    return f"{case.area}-{CASES.index(case)}"


def check(case):
    """Run one row in this process; return None or a description of what went wrong."""
    expected = error_class(case)
    try:
        got = case.provoke()
    except PbsensError as exc:
        if type(exc) is not expected:
            return f"raised {type(exc).__name__} ({exc}), expected {expected.__name__}"
        if case.fragment not in str(exc):
            return f"message {str(exc)!r} lacks {case.fragment!r}"
        return None
    except BaseException as exc:  # noqa: BLE001 - a raw exception is the failure reported
        return f"raised a raw {type(exc).__name__}: {exc}"
    return f"accepted (returned {type(got).__name__}), expected {expected.__name__}"


def test_table_is_large_and_unique():
    assert len(CASES) >= 60
    descriptions = [(c.area, c.description) for c in CASES]
    assert len(set(descriptions)) == len(descriptions)
    assert all(issubclass(c.error, PbsensError) for c in CASES if c.error is not _petab_error)


@pytest.mark.parametrize("case", [c for c in CASES if not c.isolated], ids=case_id)
def test_bad_input_in_process(case):
    if case.area == "petab":
        pytest.importorskip("petabtests")
    problem = check(case)
    assert problem is None, problem


@pytest.mark.parametrize("case", [c for c in CASES if c.isolated], ids=case_id)
def test_former_crash_in_child_process(case):
    """A crash (signal) or a wrong answer in the child fails here, never kills the test run."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "import test_bad_inputs as T\n"
            f"problem = T.check(T.CASES[{CASES.index(case)}])\n"
            "print('PROBLEM:', problem) if problem else print('OK')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, f"child ended with code {r.returncode} (negative: killed by a signal)\n{r.stderr[-2000:]}"
    assert r.stdout.strip().endswith("OK"), r.stdout[-2000:]


def test_checked_dispatchers_stay_callable_from_njit():
    from numba import njit
    rhs = chua().rhs

    @njit
    def call(x, p):
        return rhs(0.0, x, p)

    assert np.array_equal(call(chua().x0, chua().p), chua().raw[0](0.0, chua().x0, chua().p))
    with pytest.raises(PbsensError, match="length 3"):
        call(np.ones(1), chua().p)


def test_errors_md_is_generated_from_this_table():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import make_errors
    finally:
        sys.path.pop(0)
    committed = (ROOT / "docs" / "ERRORS.md").read_text(encoding="utf-8")
    assert committed == make_errors.render(CASES), "docs/ERRORS.md is stale: run python docs/make_errors.py"


def test_json_duplicate_state_is_not_last_one_wins():
    """The JSON file with two ODEs for x must not load (it would silently use x' = x)."""
    d = json.loads('{"odes": {"x": "-x", "x": "x"}}')
    assert d["odes"] == {"x": "x"}          # what json does by default: the reason for the check
    assert check(CASES[[c.description for c in CASES].index(
        "ODEs for the same state given twice in a JSON object")]) is None
