"""One-line notices for long silent waits: the kernels' first compilation (an empty numba cache)
and a new model's compilation; once per process, silenced by PBSENS_QUIET."""
import os

import pytest

import pbsens.kernels as kernels
from pbsens.system import notices


@pytest.fixture
def fresh_notices(monkeypatch):
    monkeypatch.setattr(notices, "_said", set())
    monkeypatch.delenv("PBSENS_QUIET", raising=False)


def test_notice_once_per_key_and_quiet(fresh_notices, capsys, monkeypatch):
    assert notices.notice("a", "first")
    assert not notices.notice("a", "again")
    assert capsys.readouterr().err == "pbsens: first\n"
    monkeypatch.setenv("PBSENS_QUIET", "1")
    assert not notices.notice("b", "quiet")
    assert capsys.readouterr().err == ""


def test_empty_kernel_cache_is_announced_and_a_warm_one_is_not(fresh_notices, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    kernels._check_cache()        # nothing compiled under this cache yet
    assert "compiling the numerical kernels once" in capsys.readouterr().err
    here = os.path.dirname(os.path.abspath(kernels.__file__))
    d = kernels.numba_cache_dir(here)
    assert d.startswith(str(tmp_path))
    open(os.path.join(d, "march.f-1.py311.nbi"), "wb").close()
    monkeypatch.setattr(notices, "_said", set())
    kernels._check_cache()        # machine code present (and the stamp matches): silent
    assert capsys.readouterr().err == ""


def test_new_model_compilation_is_announced(fresh_notices, capsys, monkeypatch, tmp_path):
    from pbsens.model import cache, codegen
    from pbsens.model.spec import ModelSpec
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_resolved", {})
    spec = ModelSpec.from_dict({"name": "notice_decay", "states": [{"name": "x", "initial": 1.0}],
                                "parameters": [{"name": "k", "value": 0.31}],
                                "odes": [{"state": "x", "rhs": "-k*x + 0.123"}]})
    codegen.compile_spec(spec)
    assert "compiling model 'notice_decay' once" in capsys.readouterr().err
