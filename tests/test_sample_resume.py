"""Resumable sampling: ``pbsens.sample(checkpoint_dir=..., resume=True)`` and ``pbsens sample --resume``.

A run in a child process is killed with SIGKILL (its whole process group, workers included)
after a chain has checkpointed part way (the ``_FAULT`` hook ``mode="hang"`` writes the
checkpoint at a chosen iteration and then sleeps, so that the kill lands there every time);
resuming must give the uninterrupted run's draws and statistics exactly, read the finished
chain back instead of rerunning it, and continue the others from their checkpoints (the
``resumed_iterations`` attribute says from where). The sampler's state alone (position,
cached metric, RNG, step-size adaptation, burn-in covariance) is checked on a Gaussian at
every kind of iteration. Refusals: other arguments, an existing checkpoint without resume.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("petab.v1")
az = pytest.importorskip("arviz")

import pbsens  # noqa: E402
import pbsens.petab as pbpetab  # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402
from pbsens.inference.smmala import _run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BOEHM = ROOT / "tests" / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"
KW = dict(chains=2, draws=16, burn_in=12, seed=20261123, progress=False)
N_TOTAL = KW["draws"] + KW["burn_in"]


@pytest.fixture(scope="module")
def boehm():
    return pbpetab.load(BOEHM)


@pytest.fixture(scope="module")
def reference(boehm):
    """The uninterrupted run, without checkpoints."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pbsens.sample(boehm, n_workers=1, **KW)


def _same_draws(a, b):
    assert list(a.posterior.chain.values) == list(b.posterior.chain.values)
    for v in b.posterior.data_vars:
        np.testing.assert_array_equal(a.posterior[v].values, b.posterior[v].values, err_msg=v)
    for v in b.sample_stats.data_vars:
        np.testing.assert_array_equal(a.sample_stats[v].values, b.sample_stats[v].values, err_msg=v)


def _chain_file(path):
    """The arrays of a chain checkpoint, or None while it is not there (or being replaced)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, KeyError):
        return None


def _kill_when(code, ready, timeout=240):
    """Run ``code`` in a child ``python -c`` of its own process group; SIGKILL the group once
    ``ready()`` is true. Fails if the child ends by itself or ``ready`` never comes."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    try:
        while not ready():
            if proc.poll() is not None:
                pytest.fail(f"the run ended by itself (code {proc.returncode}):\n{proc.stdout.read().decode()}")
            if time.monotonic() - t0 > timeout:
                pytest.fail(f"no checkpoint after {timeout} s")
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def _at(path, i, finished=False):
    def ready():
        a = _chain_file(path)
        return a is not None and (bool(a["finished"]) if finished else "s_i" in a and int(a["s_i"]) == i)
    return ready


HEADER = ("import sys, warnings; warnings.simplefilter('ignore')\n"
          "from pbsens.inference import chains\n")


def test_killed_run_resumes_to_the_uninterrupted_draws(boehm, reference, tmp_path):
    """Two worker processes; chain 0 is killed in burn-in at iteration 6 (between the two
    covariance updates of the metric, at 4 and 9), chain 1 has finished by then."""
    ck = tmp_path / "ck"
    code = HEADER + (f"chains._FAULT = dict(chain=0, at=6, mode='hang')\n"
                     f"import pbsens, pbsens.petab\n"
                     f"pbsens.sample(pbsens.petab.load({str(BOEHM)!r}), n_workers=2, checkpoint_dir={str(ck)!r}, "
                     f"**{KW!r})\n")
    c0, c1 = _at(ck / "chain_0.npz", 6), _at(ck / "chain_1.npz", None, finished=True)
    _kill_when(code, lambda: c0() and c1())
    assert int(_chain_file(ck / "chain_0.npz")["s_i"]) == 6      # nothing ran after the kill
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pbsens.sample(boehm, n_workers=1, checkpoint_dir=ck, resume=True, **{**KW, "seed": None})
    _same_draws(idata, reference)
    assert json.loads(idata.posterior.attrs["resumed_iterations"]) == {"0": 6, "1": N_TOTAL}
    assert idata.posterior.attrs["seed"] == KW["seed"]            # from run.json
    assert bool(_chain_file(ck / "chain_0.npz")["finished"])
    # resuming a finished run reads it back
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = pbsens.sample(boehm, n_workers=1, checkpoint_dir=ck, resume=True, **KW)
    _same_draws(again, reference)
    assert json.loads(again.posterior.attrs["resumed_iterations"]) == {"0": N_TOTAL, "1": N_TOTAL}


def test_cli_killed_run_resumes_with_resume(reference, tmp_path, capsys):
    """``pbsens sample`` in one process (--workers 1): chain 0 finishes, chain 1 is killed after
    burn-in at iteration 20; ``--resume`` finishes chain 1 only, and the draws are the reference's."""
    from pbsens.cli import main
    out = tmp_path / "run"
    args = ["sample", str(BOEHM), "--chains", "2", "--draws", "16", "--burn-in", "12", "--seed", str(KW["seed"]),
            "--workers", "1", "--out", str(out), "--no-plots", "-q"]
    code = HEADER + (f"chains._FAULT = dict(chain=1, at=20, mode='hang')\n"
                     f"from pbsens.cli import main\nsys.exit(main({args!r}))\n")
    _kill_when(code, _at(out / "checkpoint" / "chain_1.npz", 20))
    assert not (out / "posterior.nc").exists()
    capsys.readouterr()
    assert main(args) == 1                          # no silent overwrite: --resume (or --force) needed
    assert "--resume" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args[:-6] + ["--out", str(out), "--no-plots", "-q", "--resume"]) == 0   # --seed left out
    idata = az.from_netcdf(out / "posterior.nc")
    _same_draws(idata, reference)
    assert json.loads(idata.posterior.attrs["resumed_iterations"]) == {"0": N_TOTAL, "1": 20}
    capsys.readouterr()
    assert main(args + ["--resume"]) == 1           # the outputs besides the checkpoint need --force
    assert "besides its checkpoint folder (posterior.nc, summary.tsv)" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args + ["--force"]) == 0         # a fresh run: the old checkpoint discarded
    idata = az.from_netcdf(out / "posterior.nc")
    _same_draws(idata, reference)
    assert json.loads(idata.posterior.attrs["resumed_iterations"]) == {}


def test_other_arguments_or_no_resume_refused(boehm, tmp_path):
    ck = tmp_path / "ck"
    kw = dict(chains=1, draws=4, burn_in=0, seed=5, progress=False, n_workers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = pbsens.sample(boehm, checkpoint_dir=ck, **kw)
    assert sorted(os.listdir(ck)) == ["chain_0.npz", "run.json"]
    before = (ck / "chain_0.npz").read_bytes()
    with pytest.raises(PbsensError, match=r"holds the checkpoints of an earlier run; pass resume=True"):
        pbsens.sample(boehm, checkpoint_dir=ck, **kw)
    for change, shown in ((dict(seed=6), "seed=5 (this call: 6)"), (dict(draws=5), "draws=4 (this call: 5)"),
                          (dict(method="pbsr"), "method='exp2' (this call: 'pbsr')"),
                          (dict(chains=2), "chains=1 (this call: 2)")):
        with pytest.raises(PbsensError, match=r"holds a run with other arguments: .*" + r"\(this call") as err:
            pbsens.sample(boehm, checkpoint_dir=ck, resume=True, **{**kw, **change})
        assert shown in str(err.value)
    assert (ck / "chain_0.npz").read_bytes() == before           # refused before touching anything
    (tmp_path / "file").write_text("x")
    with pytest.raises(PbsensError, match="not a directory"):
        pbsens.sample(boehm, checkpoint_dir=tmp_path / "file", **kw)
    # resume=True without a checkpoint starts afresh; the same run as without checkpoints
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = pbsens.sample(boehm, checkpoint_dir=tmp_path / "new", resume=True, **kw)
    _same_draws(fresh, first)
    assert json.loads(fresh.posterior.attrs["resumed_iterations"]) == {}


class _Gaussian:
    """N(m, C), strongly correlated, whose metric sees little (0.01 I): the covariance term matters."""
    dim = 2
    m = np.array([1.0, -2.0])
    C = np.array([[1.0, 0.95 * 3.0], [0.95 * 3.0, 9.0]])

    def evaluate(self, th):
        r = th - self.m
        P = np.linalg.inv(self.C)
        return -0.5 * float(r @ P @ r), -P @ r, 0.01 * np.eye(2)


@pytest.mark.parametrize("metric", ["fisher", "fisher+cov", "cov"])
def test_sampler_state_continues_bit_for_bit(metric):
    """Resumed from its state after i iterations, for i at the start, before / at / after each
    covariance update (16, 30 of 40 burn-in), at the end of burn-in and at the end, the chain is
    the uninterrupted one; a wrong seed given to the resumed run does not matter (the state has it)."""
    snaps = {}
    kw = dict(burn_in=40, progress=False, metric=metric)
    ref = _run(_Gaussian(), np.zeros(2), 60, seed=np.random.default_rng(3), **kw,
               checkpoint=lambda i, snap: snaps.__setitem__(i + 1, snap()))
    assert sorted(snaps) == list(range(1, 101))
    for i in (1, 15, 16, 17, 30, 31, 40, 41, 99, 100):
        res = _run(_Gaussian(), np.zeros(2), 60, seed=np.random.default_rng(999), **kw, resume=snaps[i])
        for a in ("chain", "logp", "accepted", "accept_prob", "solver_failed", "burn_in_chain", "step_size_trace"):
            np.testing.assert_array_equal(getattr(res, a), getattr(ref, a), err_msg=f"{a} after {i}")
        assert (res.step_size, res.n_jitter, res.n_failed) == (ref.step_size, ref.n_jitter, ref.n_failed)
    # and the state matters: without the RNG state the continuation differs
    bad = dict(snaps[50])
    bad["s_rng"] = np.array(json.dumps(np.random.default_rng(1).bit_generator.state))
    res = _run(_Gaussian(), np.zeros(2), 60, seed=np.random.default_rng(3), **kw, resume=bad)
    assert not np.array_equal(res.chain, ref.chain)
    with pytest.raises(PbsensError, match="does not continue this chain"):
        _run(_Gaussian(), np.zeros(2), 61, seed=np.random.default_rng(3), **kw, resume=snaps[100])


def test_unwritable_checkpoint_warns_and_the_run_goes_on(boehm, tmp_path, monkeypatch):
    """A worker that cannot write its checkpoint (e.g. a dask worker elsewhere) keeps sampling; the
    run warns that the chain cannot be resumed."""
    real = os.replace

    def replace(src, dst):
        if str(dst).endswith("chain_0.npz"):
            raise PermissionError(13, "denied", str(dst))
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        idata = pbsens.sample(boehm, chains=1, draws=4, burn_in=0, seed=5, progress=False, n_workers=1,
                              checkpoint_dir=tmp_path / "ck")
    assert idata.posterior.sizes["draw"] == 4
    assert any("chain 0 could not write its checkpoint" in str(w.message) and "PermissionError" in str(w.message)
               for w in rec)
