"""SBtab folder import (pbsens.model.sbtab).

Right-hand sides are checked against equations computed by hand; expressions are
evaluated with sympy.sympify and a locals dict (independent of pbsens's parser).
"""
import math
import os
import random
import shutil

import pytest
import sympy as sp

from pbsens.errors import ModelError
from pbsens.model.sbtab import read_sbtab

HERE = os.path.dirname(__file__)
SBTAB = os.path.join(HERE, "data", "sbtab")

FUNCS = {"exp": sp.exp, "log": sp.log, "ln": sp.log, "sqrt": sp.sqrt, "pi": sp.pi}


def num(text, env):
    loc = dict(FUNCS)
    loc.update({k: sp.Float(v, 30) for k, v in env.items()})
    return float(sp.sympify(text, locals=loc))


def evaluate(spec, t, x, p=None):
    p = p if p is not None else {q.name: q.value for q in spec.parameters}
    env = {spec.time: t, **x, **p}
    for d in spec.definitions:
        env[d.name] = num(d.expression, env)
    rhs = {s: num(spec.odes[s], env) for s in spec.state_names}
    outs = {o.name: num(o.expression, env) for o in spec.outputs}
    return rhs, outs, env


def close(a, b, rel=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b)) or abs(a - b) < 1e-300


def copy_case(tmp_path, case):
    dst = tmp_path / case
    shutil.copytree(os.path.join(SBTAB, case), dst)
    return dst


# ------------------------------------------------------------------ mass action
def test_mass_action_by_hand():
    s = read_sbtab(os.path.join(SBTAB, "mass_action"))
    assert s.name == "MassAction" and s.time == "t"
    assert s.state_names == ["A", "B", "C"]
    assert [(q.name, q.value) for q in s.parameters] == [("kf", pytest.approx(0.1, rel=1e-15)), ("kr", 0.3)]
    assert [d.name for d in s.definitions] == ["bind"]
    # stoichiometry: A + B <=> C  ->  dA = -v, dB = -v, dC = +v
    assert s.odes == {"A": "-bind", "B": "-bind", "C": "bind"}
    assert [q.value for q in s.states] == [1.5, 2.0, 0.25]
    rng = random.Random(0)
    for _ in range(5):
        x = {n: rng.uniform(0.1, 3) for n in "ABC"}
        p = {"kf": rng.uniform(0.01, 1), "kr": rng.uniform(0.01, 1)}
        rhs, outs, _ = evaluate(s, 0.0, x, p)
        v = p["kf"] * x["A"] * x["B"] - p["kr"] * x["C"]
        assert close(rhs["A"], -v) and close(rhs["B"], -v) and close(rhs["C"], v)
        # conserved totals: d(A + C)/dt = d(B + C)/dt = 0
        assert abs(rhs["A"] + rhs["C"]) < 1e-15 and abs(rhs["B"] + rhs["C"]) < 1e-15
        assert close(outs["A_total"], x["A"] + x["C"]) and close(outs["B_total"], x["B"] + x["C"])
    assert s.meta["reversible"] == {"bind": True}
    assert s.meta["units"]["kf"] == "1/(uM*s)"


# ------------------------------------------------------------------ full case
@pytest.fixture(scope="module")
def full():
    return read_sbtab(os.path.join(SBTAB, "full"))


def test_full_structure(full):
    s = full
    assert s.name == "FullCase"
    assert s.state_names == ["X", "Y", "Z"]                 # Enz is constant, Sig assigned
    assert [q.name for q in s.parameters] == ["k1", "k2", "Km", "X0", "u"]
    vals = {q.name: q.value for q in s.parameters}
    assert vals["k1"] == pytest.approx(0.1, rel=1e-15)      # log10 scale
    assert vals["Km"] == 1.0                                 # ln scale: exp(0)
    assert s.meta["inputs"] == ["X0", "u"]
    x0 = {q.name: q.value for q in s.states}
    assert x0["X"] == 1.0 and x0["Y"] == 1.0 and x0["Z"] == "2*X0"
    names = [d.name for d in s.definitions]
    assert names.index("mm") < names.index("rate2")          # ordered by dependency
    assert {"c", "Enz", "Sig", "stim", "r1", "r2", "r3", "r4"} <= set(names)
    assert s.output_names == ["obs1", "obs2"]
    assert s.meta["sbtab"]["other_tables"] == ["E0.tsv"]
    assert s.meta["reversible"] == {"r1": False, "r2": False, "r3": True, "r4": False}
    assert "boundary_participants" not in s.meta             # Enz is a constant compound


@pytest.mark.parametrize("t", [0.0, 0.7, 3.0])
def test_full_rhs_by_hand(full, t):
    rng = random.Random(5)
    x = {n: rng.uniform(0.1, 2) for n in full.state_names}
    rhs, outs, _ = evaluate(full, t, x)
    X, Y, Z = x["X"], x["Y"], x["Z"]
    k1, k2, Km, u, c, Enz = 0.1, 2.0, 1.0, 1.0, 3.0, 0.1
    Sig = u * math.exp(-t)
    r1 = k1 * X * Sig
    r2 = k2 * Enz * Y / (Km + Y)
    r3 = c * Z ** 2 / (1 + Z ** 2)          # '^' is a power binding as in mathematics
    r4 = u
    assert close(rhs["X"], -r1 + r4)        # X -> 2 Y ; -> X + Enz
    assert close(rhs["Y"], 2 * r1 - r2)     # Y => Z
    assert close(rhs["Z"], r2 - 2 * r3)     # 2*Z <=> (nothing)
    assert close(outs["obs1"], X + Y) and close(outs["obs2"], 3 * Z)


def test_full_experiments(full):
    ex = full.meta["experiments"]
    assert ex["ctrl"]["inputs"] == {} and ex["ctrl"]["t0"] == 0.0
    assert ex["high"] == {"inputs": {"u": 5.0}, "initial": {"X": 2.0}, "t0": -10.0,
                          "other": {"Name": "High stimulus", "Time": "50", "Type": "Time Series"}}
    s = read_sbtab(os.path.join(SBTAB, "full"), experiment="high")
    assert {q.name: q.value for q in s.parameters}["u"] == 5.0
    assert {q.name: q.value for q in s.states}["X"] == 2.0
    assert s.meta["experiment"] == "high" and s.meta["t0"] == -10.0
    with pytest.raises(ModelError, match="no experiment 'nope'.*ctrl, high"):
        read_sbtab(os.path.join(SBTAB, "full"), experiment="nope")
    with pytest.raises(ModelError, match="no Experiments table"):
        read_sbtab(os.path.join(SBTAB, "mass_action"), experiment="x")


# ------------------------------------------------------- simplified (plain) form
def test_simple_plain_and_headerless_tables():
    s = read_sbtab(os.path.join(SBTAB, "simple"))
    assert s.name == "simple"
    assert s.state_names == ["A", "B"] and [q.value for q in s.states] == [1.0, 0.0]
    assert [(q.name, q.value) for q in s.parameters] == [("k", 1.0), ("lambda_", 2.0)]
    assert s.meta["sbtab_names"] == {"lambda": "lambda_"}
    assert s.odes == {"A": "-R1", "B": "R1-2*R2"}
    x = {"A": 0.8, "B": 1.7}
    rhs, outs, _ = evaluate(s, 0.0, x)
    R1, R2 = 1.0 * 0.8, 2.0 * 1.7 ** 2
    assert close(rhs["A"], -R1) and close(rhs["B"], R1 - 2 * R2)
    assert close(outs["y"], 2.0 * (0.8 + 1.7))
    assert s.meta["experiments"] == {"e1": {"inputs": {"k": 2.0}, "initial": {"A": 3.0}, "t0": 0.0},
                                     "e2": {"inputs": {}, "initial": {"A": 0.5}, "t0": 5.0}}
    e1 = read_sbtab(os.path.join(SBTAB, "simple"), experiment="e1")
    assert [q.value for q in e1.parameters] == [2.0, 2.0] and e1.states[0].value == 3.0


# ------------------------------------------------------------------- errors
def _write(folder, name, lines):
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("fname, lines, pattern", [
    ("Reaction.tsv", ["R1\tk*A\tA\tQ\tfalse"],
     r"'Reaction.tsv', line 1, column '4': unknown species 'Q' in reaction 'R1'"),
    ("Reaction.tsv", ["id\tkineticlaw\treactionformula", "R1\tk*A\tA + 2 Q <=> B"],
     r"'Reaction.tsv', line 2, column 'reactionformula': unknown species 'Q'"),
    ("Reaction.tsv", ["id\tkineticlaw\treactionformula", "R1\tk*A\tA -> B -> A"], r"exactly one arrow"),
    ("Reaction.tsv", ["id\tkineticlaw\treactionformula", "R1\tk*Q\tA -> B"], r"line 2.*unknown name 'Q'"),
    ("Reaction.tsv", ["id\tkineticlaw\treactionformula", "R1\tgamma(A)\tA -> B"], r"unknown function 'gamma'"),
    ("Reaction.tsv", ["id\tkineticlaw\treactionformula\treversible", "R1\tk*A\tA -> B\tmaybe"],
     r"column 'reversible': 'maybe' is not a boolean"),
    ("Parameter.tsv", ["id\tvalue\tscale", "k\tfast\tlinear"],
     r"'Parameter.tsv', line 2, column 'value': 'fast' is not a number"),
    ("Parameter.tsv", ["id\tvalue\tscale", "k\t1\tlog2"], r"line 2, column 'scale': unknown scale 'log2'"),
    ("Parameter.tsv", ["id\tvalue", "k\t1", "k\t2"], r"line 3.*'k' is already defined in 'Parameter.tsv', line 2"),
    ("Parameter.tsv", ["id\tvalue", "2k\t1"], r"ID '2k' is not a valid identifier"),
    ("Compound.tsv", ["A\t1\tmM", "B\t\tmM"], r"'Compound.tsv', line 2.*no initial value"),
    ("Expression.tsv", ["total\tA + (B"], r"'Expression.tsv', line 1.*cannot parse"),
    ("Expression.tsv", ["total\tA + loop", "loop\ttotal*2"], r"algebraic loop.*total, loop"),
    ("Experiments.tsv", ["id\tt0\tk\tZZ", "e1\t0\t1\t2"], r"'Experiments.tsv', line 1, column 'ZZ'"),
    ("Experiments.tsv", ["id\tt0\tk", "e1\tsoon\t1"], r"line 2, column 't0': 'soon' is not a number"),
    ("Experiments.tsv", ["id\tR1", "e1\t1"], r"column 'R1' names 'R1', which is a reaction"),
])
def test_bad_tables(tmp_path, fname, lines, pattern):
    folder = copy_case(tmp_path, "simple")
    _write(folder, fname, lines)
    with pytest.raises(ModelError, match=pattern):
        read_sbtab(folder)


def test_missing_folder_and_tables(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        read_sbtab(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no Compound table"):
        read_sbtab(tmp_path / "empty")


def test_boundary_participant_and_time_alias(tmp_path):
    folder = copy_case(tmp_path, "simple")
    _write(folder, "Expression.tsv", ["total\tA + B", "src\t2*time"])
    _write(folder, "Reaction.tsv", ["R1\tk*A\tsrc + A\tB\tfalse", "R2\tlambda*B^2\t2 B\t\tfalse"])
    s = read_sbtab(folder)
    assert s.meta["boundary_participants"] == {"R1": ["src"]}
    assert {d.name: d.expression for d in s.definitions}["src"] == "2*t"   # 'time' is the time variable
    assert s.odes["A"] == "-R1"


def test_sbtab_to_sbml_round_trip(tmp_path, full):
    pytest.importorskip("libsbml")
    from pbsens.model.sbml import read_sbml, to_sbml
    out = tmp_path / "full.xml"
    to_sbml(full, out)
    back = read_sbml(out)
    assert back.state_names == full.state_names and back.output_names == full.output_names
    assert [(q.name, q.value) for q in back.parameters] == [(q.name, q.value) for q in full.parameters]
    assert back.meta["experiments"] == full.meta["experiments"]
    x = {"X": 0.3, "Y": 1.1, "Z": 0.9}
    r1, o1, _ = evaluate(full, 0.4, x)
    r2, o2, _ = evaluate(back, 0.4, x)
    assert all(close(r1[k], r2[k]) for k in r1) and all(close(o1[k], o2[k]) for k in o1)
