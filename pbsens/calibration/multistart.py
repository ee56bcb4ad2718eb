"""Multi-start local optimisation of a PEtab problem: :func:`fit`.

Starts are drawn in this process (:func:`~pbsens.calibration.starts.draw_starts`, from the
seed), then run as tasks on local processes or dask (:func:`pbsens.parallel.map_tasks`; the
workers rebuild the problem from pbsens's caches, as :func:`pbsens.evaluate_many`'s do). Each
worker writes its start's record to ``out/starts/start_NNNNN.json`` the moment the start ends,
so a killed run loses only the starts in flight and ``resume=True`` runs only the others.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict

import numpy as np

from ..system.progress import progress_enabled
from .objective import FitError, Objective
from .optimizers import DEFAULT_OPTIMIZER, _check_optimizer, run_optimizer
from .result import FitResult, StartResult
from .starts import bounds_of, draw_starts

__all__ = ["DEFAULT_FIT_METHOD", "DEFAULT_REFINE", "METHOD_POLICIES", "fit"]

#: method policies beyond a single sensitivity method, as phases ``(method, looser solver options,
#: optimiser budget)``: ``"exp2+fs"`` optimises with exp2's post-hoc gradients until the optimiser
#: stops, then continues from there with forward sensitivities for at most 50 more iterations: exact
#: gradients where the optimum needs them, at fs's cost only there. (A first phase on states
#: solved at rtol 1e-6 was cheaper on Boehm but stopped early on Fujita's plateaus, leaving up to
#: 1000 fs iterations to the second: docs/PERFORMANCE.md, "Time to a converged fit".)
METHOD_POLICIES = {"exp2+fs": (("exp2", {}, None), ("fs", {}, 50))}

#: the default (docs/PERFORMANCE.md, "Time to a converged fit"): every start with exp2's post-hoc
#: gradients, then the best few refined with forward sensitivities (``DEFAULT_REFINE``)
DEFAULT_FIT_METHOD = "exp2"

#: the sensitivity method that refines the best starts once every start has ended (``fit(refine=)``)
DEFAULT_REFINE = "fs"

#: which starts are refined: the ``refine_starts`` with the lowest objective (as it was before any
#: refinement), of those within ``refine_within`` of the lowest. No window by default: on Fujita the
#: best exp2 start stopped at llh -108.0 and its fs refinement reached +17.6 (docs/PERFORMANCE.md)
DEFAULT_REFINE_STARTS = 5
DEFAULT_REFINE_WITHIN = math.inf

_FAULT = {}       # a test hook: {"at": k} makes the worker running start k exit without a word


# ------------------------------------------------------------------ worker side
def _phases(method, solver_options, options):
    """``[(method, solver options, optimiser options)]`` of the phases of ``method`` (a policy's looser
    solver options apply only where the caller's are tighter; its budget caps the iterations)."""
    out = []
    for m, loose, budget in METHOD_POLICIES.get(method, ((method, {}, None),)):
        opts = dict(solver_options)
        for k, v in loose.items():
            opts[k] = max(v, opts.get(k, v))
        o = dict(options)
        if budget is not None:
            key = "max_nfev" if "max_nfev" in o or o.get("_optimizer") == "least_squares" else "maxiter"
            o[key] = min(int(o.get(key, budget)), budget)
        o.pop("_optimizer", None)
        out.append((m, opts, o))
    return out


def _run_start(problem, opts, k, x0):
    """Run start ``k`` from ``x0``; a :class:`StartResult`."""
    lb, ub = bounds_of(problem)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    x = np.asarray(x0, float)
    phases, out, objs = [], None, []
    for m, solver_options, options in _phases(opts["method"], opts["solver_options"],
                                              dict(opts["options"], _optimizer=opts["optimizer"])):
        obj = Objective(problem, method=m, solver_options=solver_options)
        objs.append(obj)
        try:
            out = run_optimizer(opts["optimizer"], obj, x, lb, ub, options)
        except FitError:
            raise
        except Exception as exc:  # noqa: BLE001 - an optimiser's own failure ends this start, not the run
            out = {"x": x, "fval": math.inf, "n_iter": 0, "status": -99,
                   "message": f"{opts['optimizer']} raised {type(exc).__name__}: {exc}"}
        phases.append({"method": m, "fval": out["fval"], "n_iter": out["n_iter"], "status": out["status"],
                       "n_grad": obj.n_grad, "cpu": obj.cpu, "refine": bool(opts.get("refine_phase"))})
        if not math.isfinite(out["fval"]):
            break
        x = out["x"]
    # the llh at the end point by the last phase's method (the objective minus the log prior)
    last = objs[-1]
    llh = -math.inf
    if math.isfinite(out["fval"]):
        r = last.evaluate(out["x"], sensitivities=False)
        llh = -math.inf if r is None else float(r.llh)
    return StartResult(index=int(k), x0=[float(v) for v in x0], x=[float(v) for v in out["x"]], llh=llh,
                       fval=float(out["fval"]), n_iter=sum(p["n_iter"] for p in phases),
                       n_eval=sum(o.n_eval for o in objs), n_grad=sum(o.n_grad for o in objs),
                       n_failed=sum(o.n_failed for o in objs), cpu=time.process_time() - t_cpu,
                       wall=time.perf_counter() - t_wall, status=int(out["status"]), message=str(out["message"]),
                       optimizer=opts["optimizer"], method=opts["method"], phases=phases)


def _start_item(context, item):
    """Task of one start in a worker: run it, write its record, return it."""
    problem, opts = context
    if isinstance(problem, tuple):
        from ..batches import worker_problem
        problem = worker_problem(problem)
    from ..system.threads import blas_single_thread
    k = item["index"]
    if opts.get("fault", {}).get("at") == k and not item.get("refine"):
        os._exit(17)   # a test hook: this worker dies mid-run
    with blas_single_thread():
        if item.get("refine"):
            rec = _refine_start(problem, opts, StartResult(**item["record"]))
        else:
            rec = _run_start(problem, opts, k, item["x0"])
    if opts.get("dir"):
        _write_record(opts["dir"], rec)
    if opts.get("poll") is not None:
        opts["poll"]()
    return rec


def _refine_start(problem, opts, rec):
    """``rec`` refined: the optimiser again from its end point with ``opts["refine"]``'s sensitivities.
    The record keeps the better end point (the refinement's unless it failed or ended worse) and
    adds the refinement's phase, iterations, evaluations and time."""
    r = _run_start(problem, dict(opts, method=opts["refine"], refine_phase=True), rec.index, rec.x)
    for ph in r.phases:
        ph.update(start_cpu=r.cpu, start_wall=r.wall, llh_before=rec.llh, x_before=rec.x)   # cost, where from
    better = math.isfinite(r.fval) and r.fval <= rec.fval
    return StartResult(index=rec.index, x0=rec.x0, x=r.x if better else rec.x, llh=r.llh if better else rec.llh,
                       fval=r.fval if better else rec.fval, n_iter=rec.n_iter + r.n_iter,
                       n_eval=rec.n_eval + r.n_eval, n_grad=rec.n_grad + r.n_grad, n_failed=rec.n_failed + r.n_failed,
                       cpu=rec.cpu + r.cpu, wall=rec.wall + r.wall, status=r.status if better else rec.status,
                       message=(r.message if better else f"{rec.message} (refinement: {r.message})"),
                       optimizer=rec.optimizer, method=rec.method, phases=list(rec.phases) + list(r.phases),
                       refined=True)


def _fval_before_refinement(rec):
    """The objective at the end of a start's own phases (what chose it for refinement)."""
    own = [p for p in rec.phases if not p.get("refine")]
    return own[-1]["fval"] if rec.refined and own else rec.fval


def refine_candidates(records, n, within):
    """Indices of the starts to refine: at most ``n`` with the lowest objective before any refinement,
    within ``within`` of the lowest (deterministic, so a resumed fit refines the same starts)."""
    f = sorted(fr for fr in ((_fval_before_refinement(r), r.index) for r in records) if math.isfinite(fr[0]))
    if not f or n <= 0:
        return []
    return [k for v, k in f[:n] if v <= f[0][0] + within]


def _record_path(folder, k):
    return os.path.join(folder, "starts", f"start_{k:05d}.json")


def _write_record(folder, rec):
    path = _record_path(folder, rec.index)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(rec.to_json())
    os.replace(tmp, path)


def _read_records(folder, only=None):
    """``{index: StartResult}`` of the records in ``folder/starts`` (only those with an index in ``only``
    when given)."""
    recs = {}
    sdir = os.path.join(folder, "starts")
    if not os.path.isdir(sdir):
        return recs
    for name in sorted(os.listdir(sdir)):
        if not (name.startswith("start_") and name.endswith(".json")):
            continue
        try:
            if only is not None and int(name[6:-5]) not in only:
                continue
        except ValueError:
            pass
        path = os.path.join(sdir, name)
        try:
            with open(path, encoding="utf-8") as fh:
                rec = StartResult.from_json(fh.read(), where=path)
        except (OSError, FitError):
            continue        # a damaged record: that start runs again
        recs[rec.index] = rec
    return recs


# ------------------------------------------------------------------ progress
class _Progress:
    """A tqdm bar over the starts (or the refinements: ``desc="refine"``) with the best llh so far
    (stderr a terminal only); reads the records the workers write."""

    def __init__(self, total, done, folder, enabled, desc="starts", indices=()):
        self.folder = folder
        self.seen = dict(done)
        self.pending = set(indices)
        self.refining = desc == "refine"
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, initial=len(done), desc=desc, unit="start", leave=True)
            self._postfix()

    def _postfix(self):
        llh = [r.llh for r in self.seen.values() if math.isfinite(r.llh)]
        if llh and self.bar is not None:
            self.bar.set_postfix_str(f"best llh {max(llh):.6g}")

    def poll(self):
        if self.bar is None or not self.folder or not self.pending:
            return
        new = _read_records(self.folder, only=self.pending)      # only the records not yet counted
        new = {k: r for k, r in new.items() if r.refined or not self.refining}
        if new:
            self.seen.update(new)
            self.pending.difference_update(new)
            self.bar.update(len(new))
            self._postfix()

    def close(self):
        if self.bar is not None:
            self.poll()
            self.bar.close()


# ------------------------------------------------------------------ the run file
def _run_doc(problem, starts, opts, seed, sampling):
    return {"format": "pbsens-fit-run-1", "model_id": problem.model_id, "parameter_ids": list(problem.parameter_ids),
            "n_starts": int(starts.shape[0]), "seed": seed, "sampling": sampling,
            "starts_sha1": hashlib.sha1(np.ascontiguousarray(starts).tobytes()).hexdigest(),
            "optimizer": opts["optimizer"], "method": opts["method"], "options": opts["options"],
            "solver_options": {k: repr(v) for k, v in sorted(opts["solver_options"].items())},
            **({} if opts["refine"] is None else _refine_doc(opts))}


def _refine_doc(opts):
    """The refinement settings as plain JSON (no window: ``refine_within`` None)."""
    w = opts["refine_within"]
    return {"refine": opts["refine"], "refine_starts": opts["refine_starts"],
            "refine_within": None if math.isinf(w) else w}


def _prepare_dir(out, doc, resume):
    """Create ``out`` (or check it for ``resume``); the records already there."""
    run_path = os.path.join(out, "run.json")
    if os.path.exists(run_path):
        if not resume:
            raise FitError(f"'out': {out} already holds a fit; pass resume=True (--resume) to continue it, "
                           "or choose another folder (nothing there is overwritten)")
        try:
            with open(run_path, encoding="utf-8") as fh:
                old = json.load(fh)
        except (OSError, ValueError) as exc:
            raise FitError(f"'out': cannot read {run_path} ({exc})") from None
        diff = [k for k in {**old, **doc}
                if json.dumps(old.get(k), sort_keys=True) != json.dumps(doc.get(k), sort_keys=True)]
        if diff:
            raise FitError(f"'resume': the fit in {out} was run with other settings ({', '.join(diff)} differ); "
                           "resume with the same arguments, or choose another folder")
        return _read_records(out)
    elif os.path.isdir(out) and os.listdir(out) and not resume:
        raise FitError(f"'out': {out} exists and is not empty; choose an empty or new folder")
    os.makedirs(os.path.join(out, "starts"), exist_ok=True)
    tmp = run_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, run_path)
    return _read_records(out)


# ------------------------------------------------------------------ the front door
def fit(problem, n_starts=20, *, optimizer=DEFAULT_OPTIMIZER, method=DEFAULT_FIT_METHOD, seed=None, starts=None,
        sampling="uniform", n_workers=None, client=None, out=None, resume=False, progress=True, options=None,
        solver_options=None, refine=DEFAULT_REFINE, refine_starts=DEFAULT_REFINE_STARTS,
        refine_within=DEFAULT_REFINE_WITHIN):
    """Multi-start local optimisation of ``problem``'s log-likelihood (plus log prior).

    Parameters
    ----------
    problem : Problem
        From :func:`pbsens.petab.load`.
    n_starts : int
        Number of starts (ignored when ``starts`` is given).
    optimizer : {"fides", "least_squares", "L-BFGS-B"}
        ``"fides"`` (trust region with the Fisher information as Hessian; needs the fides
        package, ``pip install 'pbsens[fit]'``), ``"least_squares"`` (scipy's trust-region
        reflective on the weighted residuals and their Jacobian from ``S``; normal noise and
        flat priors only) or ``"L-BFGS-B"`` (scipy; value and gradient).
    method : str
        Sensitivity method of the gradient in every start: a method of :meth:`Problem.evaluate`
        (``"exp2"``, default, ``"fs"``, ...) or a policy: ``"exp2+fs"`` optimises with exp2 until
        the optimiser stops, then continues from there with forward sensitivities for at most 50
        more iterations.
    refine : str or None
        Once every start has ended, the best ones (``refine_starts``, ``refine_within``) run the
        optimiser again from their end points with this method's gradients (default ``"fs"``:
        exact to the solver tolerance, where the optimum needs it; post-hoc gradients are
        cheapest far from it). ``None``, or the method of the starts' last phase, refines nothing.
        Refined starts have ``refined=True`` and the refinement as their last phase.
    refine_starts : int
        How many starts are refined (default 5): those with the lowest objective before refinement...
    refine_within : float
        ... of those within this of the lowest (log-likelihood units; default ``inf``, no window).
    seed : int, optional
        Seed of the start points; default fresh entropy, recorded in ``result.info["seed"]``.
    starts : array_like (n, d), optional
        Start points on the parameter scale (instead of drawing them).
    sampling : {"uniform", "lhs"}
        Independent uniform draws within the bounds (pyPESTO's default) or a Latin hypercube.
    n_workers, client
        Where the starts run (:func:`pbsens.parallel.map_tasks`): local processes (default: the
        CPUs), a dask ``Client``, a scheduler address or ``"local"``. ``n_workers=1`` without a
        client runs the starts here, one after the other.
    out : str or path, optional
        A folder: ``run.json`` (the settings), ``starts/start_NNNNN.json`` (each start's record,
        written when it ends) and ``fit.json`` (the result). An existing fit there is refused
        unless ``resume``.
    resume : bool
        Continue the fit in ``out`` (same settings): starts already recorded are not rerun.
    progress : bool
        A progress bar with the best llh so far (when stderr is a terminal).
    options : dict, optional
        Optimiser options (:func:`pbsens.calibration.optimizers.default_options` lists the defaults).
    solver_options : dict, optional
        Passed to :meth:`Problem.evaluate` (``solver``, ``rtol``, ``atol``, ...).

    Returns
    -------
    FitResult
        The starts, best first; a failed start (its simulation failed at the start point, or the
        optimiser raised) is recorded with ``fval = inf`` and its message, never fatal.
    """
    _check_optimizer(optimizer)
    _check_method(method)
    refine = _checked_refine(method, refine, refine_starts, refine_within)
    if optimizer == "least_squares":
        Objective(problem).check_least_squares_form()
    if resume and out is None:
        raise FitError("'resume' needs 'out', the folder of the fit to continue")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    if starts is None:
        starts = draw_starts(problem, n_starts, seed=seed, sampling=sampling)
    else:
        starts = _checked_starts(problem, starts)
    opts = dict(optimizer=optimizer, method=method, options=dict(options or {}),
                solver_options=dict(solver_options or {}), fault=dict(_FAULT), refine=refine,
                refine_starts=int(refine_starts), refine_within=float(refine_within))
    doc = _run_doc(problem, starts, opts, seed, sampling)
    done = _prepare_dir(os.fspath(out), doc, resume) if out is not None else {}
    todo = [dict(index=k, x0=starts[k]) for k in range(starts.shape[0]) if k not in done]
    folder = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="pbsens-fit-")
    if out is None:
        os.makedirs(os.path.join(folder, "starts"), exist_ok=True)
    t0 = time.perf_counter()
    try:
        new = _run_starts(problem, opts, todo, folder, done, starts.shape[0], client, n_workers, progress)
        records = {**done, **{r.index: r for r in new}}
        if refine is not None:
            _refine(problem, opts, records, folder, client, n_workers, progress)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    info = {k: doc[k] for k in ("model_id", "n_starts", "seed", "sampling", "optimizer", "method", "options")}
    info.update(_refine_doc(opts))
    info["wall"] = time.perf_counter() - t0
    info["resumed"] = len(done)
    result = FitResult(list(records.values()), problem.parameter_ids, info)
    if out is not None:
        result.save(os.path.join(folder, "fit.json"), overwrite=True)
    return result


def _check_method(method):
    from ..sensitivity.posthoc import METHODS
    if method in METHOD_POLICIES or method == "fs" or method in METHODS:
        return
    raise FitError(f"'method' must be 'fs', a post-hoc method ({', '.join(METHODS)}) or a policy "
                   f"({', '.join(METHOD_POLICIES)}), got {method!r}")


def _checked_refine(method, refine, n, within):
    """``refine`` checked; ``None`` where it would repeat the starts' own last method."""
    if refine is None:
        return None
    try:
        _check_method(refine)
    except FitError as exc:
        raise FitError(str(exc).replace("'method'", "'refine'", 1)) from None
    if refine in METHOD_POLICIES:
        raise FitError(f"'refine' must be a sensitivity method (e.g. 'fs'), not the policy {refine!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise FitError(f"'refine_starts' must be an integer >= 0, got {n!r}")
    if isinstance(within, bool) or not isinstance(within, (int, float)) or not within >= 0:
        raise FitError(f"'refine_within' must be a number >= 0 (inf: no window), got {within!r}")
    last = METHOD_POLICIES.get(method, ((method, {}, None),))[-1][0]
    return None if refine == last or n == 0 else refine


def _refine(problem, opts, records, folder, client, n_workers, progress):
    """Refine the best of ``records`` (``{index: StartResult}``, updated in place; :func:`refine_candidates`;
    those refined before a resume are not refined again); each refined record replaces its start's file
    when it ends."""
    todo = [{"index": k, "refine": True, "record": asdict(records[k])}
            for k in refine_candidates(records.values(), opts["refine_starts"], opts["refine_within"])
            if not records[k].refined]
    if todo:
        new = _run_starts(problem, opts, todo, folder, {}, len(todo), client, n_workers, progress, desc="refine")
        for r in new:
            if r.status != -98:             # -98: its worker died; the start keeps its record, unrefined
                records[r.index] = r


def _checked_starts(problem, starts):
    try:
        s = np.array(starts, dtype=np.float64, ndmin=2)
    except (TypeError, ValueError):
        raise FitError(f"'starts' must be an array of shape (n, {problem.dim}), got {starts!r}") from None
    if s.ndim != 2 or s.shape[1] != problem.dim or s.shape[0] < 1:
        raise FitError(f"'starts' must have shape (n, {problem.dim}), got {s.shape}")
    lb, ub = bounds_of(problem)
    bad = np.flatnonzero(~np.all(np.isfinite(s) & (s >= lb) & (s <= ub), axis=1))
    if bad.size:
        raise FitError(f"'starts': rows {bad[:10].tolist()} are not finite points within the bounds")
    return s


def _run_starts(problem, opts, todo, folder, done, total, client, n_workers, progress, desc="starts"):
    """Run ``todo`` where asked; the new records (a start whose worker died is recorded as failed)."""
    from ..parallel import TaskFailure, map_tasks
    if not todo:
        return []
    if n_workers is None and client is None:
        n_workers = max(1, min(len(todo), os.cpu_count() or 1))
    in_process = client is None and n_workers == 1
    if in_process:
        target = problem
    else:
        from ..batches import problem_recipe
        target = problem_recipe(problem)
    bar = _Progress(total, done, folder, progress_enabled(progress), desc=desc, indices={t["index"] for t in todo})
    opts = dict(opts, dir=folder, poll=bar.poll if in_process else None)
    try:
        raw = map_tasks(_start_item, (target, opts), todo, client=client, n_workers=n_workers, chunk_size=1,
                        poll=bar.poll)
    finally:
        bar.close()
    out = []
    for item, r in zip(todo, raw):
        if isinstance(r, TaskFailure):
            x0 = [float(v) for v in item["x0"]]
            r = StartResult(index=item["index"], x0=x0, x=x0, llh=-math.inf, fval=math.inf, n_iter=0, n_eval=0,
                            n_grad=0, n_failed=0, cpu=0.0, wall=0.0, status=-98,
                            message=f"the worker failed: {r.error}", optimizer=opts["optimizer"],
                            method=opts["method"])
        out.append(r)
    return out

