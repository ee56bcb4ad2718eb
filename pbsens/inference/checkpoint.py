"""Checkpoints of a sampling run, so that a killed :func:`pbsens.sample` run can be resumed.

A checkpoint directory holds ``run.json`` (the run's arguments, its seed and the chains'
starting points) and one ``chain_<k>.npz`` per chain, rewritten atomically (a temporary
file, then ``os.replace``) while the chain runs and when it ends. A running chain's file
holds its draws so far (``chain``, ``logp`` on the parameter scale) and the sampler's
complete state (keys ``s_*``, :func:`snapshot_sampler`): the current point with its
log-posterior, gradient, metric and factor, the random generator's state (JSON), the
step-size adaptation, the burn-in covariance term of the metric, the iterations so far with
their acceptance and failure records. A finished chain's file holds its result
(``finished = True``, keys ``r_*``). Only plain arrays and strings: files are read with
``allow_pickle=False``, so a checkpoint directory cannot run code.

Resuming restores each chain's state (:func:`restore_sampler`) and continues it; the result
is the uninterrupted run's, bit for bit (the same seed, arguments and starting points).
"""
from __future__ import annotations

import glob
import json
import os

import numpy as np

from ..errors import PbsensError

__all__ = ["snapshot_sampler", "restore_sampler", "open_dir", "run_settings", "start_run", "chain_states",
           "save_chain", "chain_path", "begin", "report", "RUN_FILE", "SECONDS"]

#: the file of the run's arguments in a checkpoint directory
RUN_FILE = "run.json"
#: a running chain's file is rewritten at most this often (seconds), and when the chain ends
SECONDS = 2.0
_FORMAT = 1
_TRACE = ("chain", "logp", "accepted", "prob", "failed")
_STATE = ("theta", "L", "grad", "G", "v")


# ------------------------------------------------------------------ the sampler's state
def snapshot_sampler(i, cur, steps, windows, trace, rng):
    """The SMMALA sampler's complete state after iterations ``0 .. i-1`` as plain arrays (keys
    ``s_*``): the current point ``cur`` and its cached values, the RNG's state (JSON), the
    step-size adaptation ``steps``, the learned metric term of ``windows``, the iterations so
    far in ``trace`` and the failure counts."""
    out = {f"s_{a}": np.array(getattr(cur, a)) for a in _STATE}
    out.update({f"s_tr_{a}": getattr(trace, a)[:i].copy() for a in _TRACE})
    P = windows.precision
    out.update(s_i=np.int64(i), s_n_total=np.int64(trace.chain.shape[0]), s_logp=np.float64(cur.logp), s_half_logdet=np.float64(cur.half_logdet),
               s_rng=np.array(json.dumps(rng.bit_generator.state)), s_log_eps=np.float64(steps.log_eps),
               s_eps_trace=steps.trace.copy(), s_eps_after=np.float64(steps.after),
               s_i_adapt=np.int64(steps.i_adapt), s_precision=np.zeros((0, 0)) if P is None else P.copy(),
               s_counts=np.array([trace.n_failed, trace.n_non_pd, trace.n_jitter], dtype=np.int64))
    return out


def restore_sampler(s, cur, steps, windows, trace, rng):
    """Set the blank state ``cur``, ``steps``, ``windows``, ``trace`` and ``rng`` from a
    :func:`snapshot_sampler` ``s``; returns ``(i, cur)``, the next iteration and the current state."""
    n_total, d = trace.chain.shape
    try:
        i = int(s["s_i"])
        if not (0 <= i <= n_total == int(s["s_n_total"]) and s["s_theta"].shape == (d,) and s["s_G"].shape == (d, d)
                and s["s_tr_chain"].shape == (i, d) and s["s_eps_trace"].shape == steps.trace.shape):
            raise ValueError("the arrays' shapes differ")
        for a in _STATE:
            setattr(cur, a, np.array(s[f"s_{a}"], dtype=np.float64))
        cur.logp, cur.half_logdet = float(s["s_logp"]), float(s["s_half_logdet"])
        for a in _TRACE:
            getattr(trace, a)[:i] = s[f"s_tr_{a}"]
        trace.n_failed, trace.n_non_pd, trace.n_jitter = (int(c) for c in s["s_counts"])
        steps.log_eps, steps.after = float(s["s_log_eps"]), float(s["s_eps_after"])
        steps.trace[:], steps.i_adapt = s["s_eps_trace"], int(s["s_i_adapt"])
        if s["s_precision"].size:
            windows.use(np.array(s["s_precision"], dtype=np.float64))
        rng.bit_generator.state = json.loads(str(s["s_rng"]))
    except (KeyError, ValueError, TypeError, IndexError, np.linalg.LinAlgError) as exc:
        raise PbsensError(f"the checkpoint does not continue this chain ({n_total} iterations of {d} "
                          f"parameters): {type(exc).__name__}: {exc}") from None
    return i, cur


# ------------------------------------------------------------------ files
def chain_path(path, k):
    return os.path.join(path, f"chain_{k}.npz")


def save_chain(path, arrays, state):
    """Write ``arrays`` to ``path`` (.npz) atomically: a killed process leaves the previous file.
    The first failure (a worker that does not see the directory) is kept in ``state["ckpt_error"]``
    (:func:`report` warns)."""
    try:
        tmp = path + ".tmp.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except OSError as exc:
        state.setdefault("ckpt_error", f"{type(exc).__name__}: {exc}")


def _load(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (OSError, ValueError, EOFError) as exc:
        raise PbsensError(f"cannot read the checkpoint {path!r}: {exc}") from None


def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1)
    os.replace(tmp, path)


def _plain(obj):
    """``obj`` as JSON would give it back (tuples as lists, numpy numbers as numbers)."""
    return json.loads(json.dumps(obj, default=lambda v: v.tolist() if hasattr(v, "tolist") else repr(v)))


def open_dir(path, resume):
    """The stored ``run.json`` of the checkpoint directory ``path`` to resume, or None (a fresh run).

    Refuses (:class:`PbsensError`) a file in its place, and a directory that holds an earlier
    run's checkpoints without ``resume`` (it is never overwritten)."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise PbsensError(f"'checkpoint_dir': {path!r} exists and is not a directory")
    run_file = os.path.join(path, RUN_FILE)
    held = os.path.isfile(run_file) or bool(glob.glob(os.path.join(path, "chain_*.npz")))
    if held and not resume:
        raise PbsensError(f"'checkpoint_dir': {path!r} holds the checkpoints of an earlier run; pass "
                          f"resume=True (pbsens sample --resume) to continue it, or choose another directory")
    if not held:
        return None
    try:
        with open(run_file, encoding="utf-8") as fh:
            stored = json.load(fh)
        if stored.get("format") != _FORMAT:
            raise ValueError(f"format {stored.get('format')!r}, expected {_FORMAT}")
        stored["settings"]["seed"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PbsensError(f"'checkpoint_dir': {path!r} has chain checkpoints but no readable {RUN_FILE} "
                          f"({exc}); choose another directory") from None
    return stored


def run_settings(problem, opts, *, chains, seed, theta0, init_scale):
    """What must not change between a run and its resumption, as plain JSON values."""
    from ..batches import problem_recipe
    try:
        recipe = list(problem_recipe(problem))
    except PbsensError:
        recipe = None                          # a problem built in memory: its parameters identify it
    keys = ("method", "draws", "burn_in", "metric", "metric_floor", "box_metric", "step_size", "transform",
            "ridge", "target_accept", "solver_options")
    return _plain(dict(problem=recipe, parameter_ids=list(problem.parameter_ids), chains=chains, seed=seed,
                       theta0=None if theta0 is None else np.asarray(theta0, dtype=float).tolist(),
                       init_scale=init_scale, **{k: opts[k] for k in keys}))


def start_run(path, stored, settings, z0=None, starts=None):
    """Resuming (``stored`` from :func:`open_dir`): check that ``settings`` are the stored run's
    and return its ``(z0, starts)``. Otherwise create ``path`` and write ``run.json`` with
    ``settings`` and the starting points ``z0``, ``starts``; returns them."""
    path = os.fspath(path)
    if stored is not None:
        old = stored["settings"]
        diff = [f"{k}={old.get(k)!r} (this call: {v!r})" for k, v in settings.items() if old.get(k) != v]
        if diff:
            raise PbsensError(f"'checkpoint_dir': {path!r} holds a run with other arguments: "
                              + "; ".join(diff) + ". Resume with the same arguments, or choose another directory")
        z0 = None if stored["z0"] is None else np.array(stored["z0"], dtype=np.float64)
        return z0, np.array(stored["starts"], dtype=np.float64)
    os.makedirs(path, exist_ok=True)
    _write_json(os.path.join(path, RUN_FILE),
                dict(format=_FORMAT, settings=settings, z0=None if z0 is None else np.asarray(z0).tolist(),
                     starts=np.asarray(starts).tolist()))
    return z0, starts


def begin(path, stored, settings, starts_fn):
    """``(z0, starts, done, states)`` of a run checkpointed in ``path``: resuming (``stored``), the
    stored starting points and :func:`chain_states`; else ``starts_fn()``'s, recorded in ``run.json``."""
    if stored is not None:
        z0, starts = start_run(path, stored, settings)
        return (z0, starts, *chain_states(path, settings["chains"]))
    z0, starts = starts_fn()
    start_run(path, None, settings, z0, starts)
    return z0, starts, {}, {}


def report(results, done, states, path):
    """Warn about chains that could not write their checkpoints; returns the JSON
    ``{chain: iterations read back}`` (``attrs["resumed_iterations"]``)."""
    import warnings
    for r in results:
        if r.get("checkpoint_error"):
            warnings.warn(f"chain {r['chain']} could not write its checkpoint into {os.fspath(path)!r} "
                          f"({r['checkpoint_error']}): it cannot be resumed from there", RuntimeWarning, stacklevel=3)
    return json.dumps({k: int(len(done[k]["chain"]) if k in done else states[k]["s_i"])
                       for k in sorted({**done, **states})})


def chain_states(path, chains):
    """``(done, states)``: ``{k: result arrays}`` of the finished chains (keys ``r_*``, ``wall``) and
    ``{k: checkpoint arrays}`` of the chains to continue; a chain without a file starts afresh."""
    done, states = {}, {}
    for k in range(chains):
        f = chain_path(path, k)
        if not os.path.isfile(f):
            continue
        arrays = _load(f)
        if "finished" not in arrays or ("s_i" not in arrays and not bool(arrays["finished"])):
            raise PbsensError(f"the checkpoint {f!r} is not a chain checkpoint of pbsens.sample")
        (done if bool(arrays["finished"]) else states)[k] = arrays
    return done, states
