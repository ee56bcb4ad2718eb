"""The problem cache: a warm ``pbsens.petab.load`` gives the same problem as reading the files,
without the petab library, and never serves stale, damaged or unlinted entries."""
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("petab")

from pbsens import petab as pbpetab  # noqa: E402
from pbsens.errors import PbsensError, PbsensWarning  # noqa: E402
from pbsens.problems import problem_cache  # noqa: E402

DATA = Path(__file__).parent / "data" / "petab"
BOEHM = "Boehm_JProteomeRes2014"


def _yaml(folder, name):
    return Path(folder) / name / f"{name}.yaml"


@pytest.fixture
def entries(tmp_path, monkeypatch):
    """Problem entries in a fresh folder (the compiled models stay in the shared test cache)."""
    d = tmp_path / "problems"
    monkeypatch.setattr(problem_cache, "entries_dir", lambda: str(d))
    monkeypatch.delenv("PBSENS_PROBLEM_CACHE", raising=False)
    return d


def _copy(tmp_path, name=BOEHM):
    dst = tmp_path / "copy"
    shutil.copytree(DATA / name, dst / name)
    return _yaml(dst, name)


def _same_evaluation(a, b, theta):
    ra, rb = a.evaluate(theta), b.evaluate(theta)
    assert ra.llh == rb.llh and ra.chi2 == rb.chi2
    np.testing.assert_array_equal(ra.gradient, rb.gradient)
    np.testing.assert_array_equal(ra.fim, rb.fim)
    np.testing.assert_array_equal(ra.residuals, rb.residuals)
    assert ra.simulations.equals(rb.simulations)


@pytest.mark.parametrize("name", [BOEHM, "Fujita_SciSignal2010", "Perelson_Science1996", "Brannmark_JBC2010"])
def test_warm_load_gives_the_problem_the_files_give(entries, name):
    path = _yaml(DATA, name)
    ref = pbpetab.load(path, cache=False)
    first = pbpetab.load(path)            # reads the files, stores the entry
    warm = pbpetab.load(path)             # from the entry
    assert first._cache_key is None and warm._cache_key is not None
    assert len(list(entries.glob("*.entry"))) == 1
    assert warm.parameter_ids == ref.parameter_ids and warm.scales == ref.scales
    assert warm.conditions == ref.conditions and warm.model_id == ref.model_id
    np.testing.assert_array_equal(warm.x_nominal, ref.x_nominal)
    np.testing.assert_array_equal(warm.bounds, ref.bounds)
    for k in ("fixed", "est", "cond", "ph", "measurement", "time", "out_y", "out_sigma"):
        np.testing.assert_array_equal(warm._rows[k], ref._rows[k])
        assert warm._rows[k].dtype == ref._rows[k].dtype
    assert list(warm._rows["observable"]) == list(ref._rows["observable"])
    theta = np.clip(ref.x_nominal + 0.05, ref.bounds[:, 0], ref.bounds[:, 1])
    _same_evaluation(warm, ref, theta)
    assert warm.log_prior(theta) == ref.log_prior(theta)


def test_an_edited_table_is_read_again(entries, tmp_path):
    path = _copy(tmp_path)
    before = pbpetab.load(path).llh()
    meas = path.parent / "measurementData_Boehm_JProteomeRes2014.tsv"
    lines = meas.read_text().splitlines(keepends=True)
    cols = lines[0].rstrip("\n").split("\t")
    row = lines[1].rstrip("\n").split("\t")
    k = cols.index("measurement")
    row[k] = repr(float(row[k]) + 1.0)
    lines[1] = "\t".join(row) + "\n"
    meas.write_text("".join(lines))
    after = pbpetab.load(path)
    assert after._cache_key is None                      # a miss: the files changed
    assert after.llh() != before
    assert after.llh() == pbpetab.load(path, cache=False).llh()
    assert len(list(entries.glob("*.entry"))) == 2


def test_a_damaged_entry_is_a_miss_and_is_rewritten(entries):
    path = _yaml(DATA, BOEHM)
    ref = pbpetab.load(path).llh()
    (entry,) = entries.glob("*.entry")
    data = bytearray(entry.read_bytes())
    data[-200] ^= 0xFF                                   # inside the arrays (the file ends with the npz)
    entry.write_bytes(bytes(data))
    again = pbpetab.load(path)
    assert again._cache_key is None and again.llh() == ref
    assert pbpetab.load(path)._cache_key is not None     # rewritten by the load that missed
    data = entry.read_bytes()
    assert b'"linted": true' in data
    entry.write_bytes(data.replace(b'"linted": true', b'"linted": false'))   # edited: hash mismatch
    assert pbpetab.load(path)._cache_key is None


def test_an_unlinted_entry_does_not_serve_a_linted_load(entries, monkeypatch):
    from pbsens.problems import petab as petab_mod
    calls = []
    real = petab_mod.lint
    monkeypatch.setattr(petab_mod, "lint", lambda *a: calls.append(1) or real(*a))
    path = _yaml(DATA, BOEHM)
    assert pbpetab.load(path, lint=False)._cache_key is None and calls == []
    assert pbpetab.load(path, lint=False)._cache_key is not None
    linted = pbpetab.load(path)                          # the entry was not linted: read and lint
    assert linted._cache_key is None and calls == [1]
    assert pbpetab.load(path)._cache_key is not None and calls == [1]
    assert pbpetab.load(path, lint=False)._cache_key is not None


def test_the_cache_can_be_turned_off(entries, monkeypatch):
    monkeypatch.setenv("PBSENS_PROBLEM_CACHE", "0")
    path = _yaml(DATA, BOEHM)
    pbpetab.load(path)
    assert pbpetab.load(path)._cache_key is None
    assert not entries.exists() or not list(entries.iterdir())


def test_the_warnings_of_a_load_are_issued_again(entries, tmp_path):
    path = _copy(tmp_path)
    par = path.parent / "parameters_Boehm_JProteomeRes2014.tsv"
    lines = par.read_text().splitlines(keepends=True)
    cols = lines[0].rstrip("\n").split("\t")
    for i, line in enumerate(lines[1:], 1):
        row = line.rstrip("\n").split("\t")
        if row[cols.index("estimate")] == "1" and row[cols.index("parameterScale")] == "log10":
            row[cols.index("nominalValue")] = "-1"      # no value on a log scale: loads with a warning
            lines[i] = "\t".join(row) + "\n"
            pid = row[cols.index("parameterId")]
            break
    par.write_text("".join(lines))
    for expect_hit in (False, True):
        with pytest.warns(PbsensWarning, match=pid):
            problem = pbpetab.load(path)
        assert (problem._cache_key is not None) == expect_hit
    with pytest.raises(PbsensError, match="nominal value"):
        problem.llh()


def test_petab_problem_is_read_on_first_use_and_refuses_changed_files(entries, tmp_path):
    path = _copy(tmp_path)
    ref = pbpetab.load(path, cache=False).petab_problem
    pbpetab.load(path)
    warm = pbpetab.load(path)
    assert warm._cache_key is not None and warm._petab_problem is None
    assert warm.petab_problem.measurement_df.equals(ref.measurement_df)
    stale = pbpetab.load(path)
    with open(path, "a") as fh:
        fh.write("\n# edited\n")
    with pytest.raises(PbsensError, match="changed after it was loaded"):
        stale.petab_problem


def test_a_warm_load_in_a_fresh_process_does_not_import_petab(tmp_path):
    path = _copy(tmp_path)
    ref = pbpetab.load(path)                # stores the entry in the test cache
    theta = ref.x_nominal + 0.01
    code = ("import json, sys\nimport numpy as np\nimport pbsens.petab\n"
            "p = pbsens.petab.load(sys.argv[1])\n"
            "r = p.evaluate(np.array(json.loads(sys.argv[2])))\n"
            "print(json.dumps({'petab': 'petab' in sys.modules, 'hit': p._cache_key is not None, "
            "'llh': r.llh, 'gradient': r.gradient.tolist()}))\n")
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(theta.tolist())], env=env,
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["hit"] and not got["petab"]
    r = ref.evaluate(theta)
    assert got["llh"] == r.llh
    np.testing.assert_array_equal(got["gradient"], r.gradient)


def test_the_encoding_round_trips_every_kind_of_value():
    from pbsens.problems.petab import ConditionPlan, ParameterMap
    m = ParameterMap(np.array([1.0, np.nan]), np.array([-1, 0]))
    value = {"plans": [ConditionPlan(None, "c0", m, m.copy(), [(0, 1)], [], np.array([0.0, 1.5]), True,
                                     np.array([0, 1]), np.array([0, 2]), {"t": 1.0})],
             ("obs", "y"): 3, "ids": np.array(["a", "bb"], dtype=object), "flag": np.bool_(True),
             "x": np.float64(2.5), "none": None}
    arrays = {}
    enc = json.loads(json.dumps(problem_cache._encode(value, arrays)))
    back = problem_cache._decode(enc, arrays)
    assert back[("obs", "y")] == 3 and back["flag"] is True and back["x"] == 2.5 and back["none"] is None
    assert back["ids"].dtype == object and list(back["ids"]) == ["a", "bb"]
    p = back["plans"][0]
    assert isinstance(p, ConditionPlan) and isinstance(p.sim, ParameterMap) and p.reinit == [(0, 1)]
    np.testing.assert_array_equal(p.sim.fixed, [1.0, np.nan])
    np.testing.assert_array_equal(p.row_k, [0, 2])
    with pytest.raises(problem_cache._Unstorable):
        problem_cache._encode({"f": lambda: 0}, {})
    with pytest.raises(problem_cache._Unstorable):
        problem_cache._encode(np.array([object()]), {})


def test_cache_clear_removes_the_problems(entries, capsys):
    from pbsens.cli.cache import run
    pbpetab.load(_yaml(DATA, BOEHM))
    assert problem_cache.count() == 1

    class Args:
        action = "clear"
    # the CLI clears models too: point it at an empty model cache
    with pytest.MonkeyPatch.context() as mp:
        import pbsens.model.cache as mc
        mp.setattr(mc, "cache_clear", lambda: {"directory": "x", "removed": 0, "freed_bytes": 0, "skipped": 0})
        assert run(Args()) == 0
    assert problem_cache.count() == 0
    assert "1 PEtab problem," in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error", PbsensWarning)
        assert pbpetab.load(_yaml(DATA, BOEHM))._cache_key is None


def test_a_hit_names_the_yaml_as_given_now(entries, tmp_path, monkeypatch):
    path = _copy(tmp_path)
    monkeypatch.chdir(path.parent)
    pbpetab.load(path.name)                              # relative to the problem's folder
    monkeypatch.chdir(tmp_path)
    rel = os.path.relpath(path, tmp_path)
    warm = pbpetab.load(rel)
    assert warm._cache_key is not None and warm.files["yaml"] == rel
    assert len(warm.petab_problem.measurement_df) == len(warm._rows["measurement"])


def test_an_sbtab_folder_is_cached_too(entries, tmp_path):
    src = Path(__file__).parent / "data" / "sbtab" / "uqsa_decay"
    folder = tmp_path / "uqsa_decay"
    shutil.copytree(src, folder)
    ref = pbpetab.load(folder, cache=False)
    pbpetab.load(folder)
    warm = pbpetab.load(folder)
    assert warm._cache_key is not None
    assert warm.source == ref.source and warm.sbtab_info == ref.sbtab_info
    theta = ref.x_nominal + 0.02
    _same_evaluation(warm, ref, theta)
    assert warm.petab_problem.measurement_df.equals(ref.petab_problem.measurement_df)
    exp = folder / "decay_E1.tsv"
    exp.write_text(exp.read_text() + "\n")          # any file of the folder is part of the key
    assert pbpetab.load(folder)._cache_key is None
