"""Parallel SMMALA chains on an estimation problem, returned as an ArviZ ``InferenceData``.

:func:`sample` runs ``chains`` independent :func:`~pbsens.smmala` chains on the
posterior ``PEtab priors x likelihood`` on the parameter scale (a parameter
without a prior is uniform on its bounds), in parallel through
:mod:`pbsens.parallel` (local processes, or dask). Chain ``k``'s random numbers
come from ``numpy.random.SeedSequence(seed).spawn(chains)[k]``: independent
streams, reproducible from the one ``seed``, whatever worker runs the chain.

A chain that raises, or whose worker dies, is reported (a warning naming its
seed and chain number, and ``idata.attrs["failed_chains"]``); the draws it made
before (from the worker's last checkpoint when the process died) are kept in
the group ``partial_chain_<k>``; the other chains form the posterior.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings

import numpy as np

from ..errors import ConvergenceWarning, PbsensError
from . import checkpoint as ckp
from .smmala import ESS_PER_CHAIN, RHAT_MAX, MCMCResult, _chains, _list  # noqa: F401 - the thresholds, re-exported
from .transform import UnboundedPosterior, to_parameter_scale
from ..sensitivity.methods import FORWARD, METHOD_INFO
from ..system.progress import progress_enabled

__all__ = ["sample", "check_convergence"]

#: the arrays of a chain's result that :func:`sample` uses (and a finished chain's checkpoint keeps)
_RESULT = ("chain", "logp", "accepted", "accept_prob", "solver_failed")

# A test hook, not an option: dict(chain=k, at=i, mode="exit"|"raise"|"hang") makes chain k's worker exit
# (or raise, or write its checkpoint and sleep for an hour) at iteration i. Read when sample() is called and
# shipped to the workers with the options.
_FAULT = None


def _check_int(v, name, minimum):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise PbsensError(f"{name!r} must be an integer >= {minimum}, got {v!r}")
    return int(v)


# ------------------------------------------------------------------ worker side
def _write(path, text):
    try:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass   # a remote worker without the scratch directory: no progress display


def _checkpoint(path, chain, logp, n):
    try:
        tmp = path + ".tmp.npz"
        np.savez(tmp, chain=chain[:n], logp=logp[:n])
        os.replace(tmp, path)
    except OSError:
        pass


def _chain_item(context, item):
    """Run one chain in a worker; returns a dict (``"result"`` or ``"error"`` + partial draws)."""
    problem, opts = context
    if isinstance(problem, tuple):
        from ..batches import worker_problem
        problem = worker_problem(problem)
    from .smmala import _run
    k = item["chain"]
    rng = np.random.default_rng(np.random.SeedSequence(item["entropy"], spawn_key=(k,)))
    n_total = opts["burn_in"] + opts["draws"]
    d = problem.dim
    buf = np.empty((n_total, d))
    lbuf = np.empty(n_total)
    resume = item.get("resume")          # the chain's last checkpoint (pbsens.inference.checkpoint)
    n0 = 0 if resume is None else int(resume["s_i"])
    if resume is not None:
        buf[:n0], lbuf[:n0] = resume["chain"], resume["logp"]
    state = {"n": n0, "t_prog": 0.0, "t_ckpt": time.perf_counter(),
             "wall0": 0.0 if resume is None else float(resume["wall"])}
    scratch, ckdir = opts.get("scratch"), opts.get("checkpoint_dir")
    prog = os.path.join(scratch, f"chain_{k}.progress") if scratch else None
    ckpt = os.path.join(ckdir or scratch, f"chain_{k}.npz") if (ckdir or scratch) else None
    fault = opts.get("fault") or {}

    def callback(i, theta, logp, accepted, prob, eps, failed):
        buf[i] = theta
        lbuf[i] = logp
        state["n"] = i + 1
        now = time.perf_counter()
        if prog and now - state["t_prog"] > 0.3:
            state["t_prog"] = now
            _write(prog, f"{i + 1} {n_total}")
            if opts.get("poll") is not None:     # chains run in this process: update the bars here
                opts["poll"]()

    def checkpoint(i, snapshot):
        now = time.perf_counter()
        at_fault = fault.get("chain") == k and i + 1 == fault.get("at")
        if ckdir and (now - state["t_ckpt"] >= ckp.SECONDS or (at_fault and fault.get("mode") == "hang")):
            state["t_ckpt"] = now
            ckp.save_chain(ckpt, dict(snapshot(), chain=buf[:i + 1], logp=lbuf[:i + 1], finished=False,
                                      wall=state["wall0"] + now - t0), state)
        elif ckpt and not ckdir and ((i + 1) % 25 == 0 or now - state["t_ckpt"] > 2.0):
            state["t_ckpt"] = now
            _checkpoint(ckpt, buf, lbuf, i + 1)
        if at_fault:
            if fault.get("mode") == "exit":
                os._exit(17)   # a test hook: the worker process dies mid-chain
            if fault.get("mode") == "hang":
                time.sleep(3600)   # a test hook: a chain to kill from outside after its checkpoint
            raise RuntimeError(f"test fault in chain {k} at iteration {i + 1}")

    post = problem.log_posterior(method=opts["method"], **opts.get("solver_options", {}))
    if opts.get("box_metric"):
        post = _BoxMetric(post, problem.priors)
    start = item["theta0"]
    user_cb = callback
    if opts.get("transform"):
        # sample z = logit of the position within the bounds; record theta(z) and log pi(theta(z))
        post = UnboundedPosterior(post, *problem.priors.support(), ridge=opts["ridge"])
        start = item["z0"]

        def callback(i, z, logp, accepted, prob, eps, failed):
            user_cb(i, post.transform.to_bounded(z), post.log_posterior_theta(logp, z), accepted, prob, eps,
                    failed)
    t0 = time.perf_counter()
    try:
        res = _run(post, start, opts["draws"], step_size=opts.get("step_size"),
                   burn_in=opts["burn_in"], seed=rng, target_accept=opts["target_accept"], progress=False,
                   metric_floor=opts.get("metric_floor"), metric=opts.get("metric", "fisher"), callback=callback,
                   checkpoint=checkpoint, resume=resume)
        if opts.get("transform"):
            to_parameter_scale(res, post)
    except Exception as exc:  # noqa: BLE001 - reported with the chain's seed, partial draws kept
        import traceback
        n = state["n"]
        return {"chain": k, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                "partial": buf[:n].copy(), "partial_logp": lbuf[:n].copy(),
                "wall": state["wall0"] + time.perf_counter() - t0, "checkpoint_error": state.get("ckpt_error")}
    if prog:
        _write(prog, f"{n_total} {n_total}")
    wall = state["wall0"] + time.perf_counter() - t0
    if ckdir:
        ckp.save_chain(ckpt, dict(chain=buf, logp=lbuf, finished=True, wall=wall, r_step_size=res.step_size,
                                  **{f"r_{a}": getattr(res, a) for a in _RESULT}), state)
    return {"chain": k, "result": res, "wall": wall, "checkpoint_error": state.get("ckpt_error")}


def dispersed_starts(problem, chains, rng, *, method="exp2", scale=2.0, ridge=0.1, center=None,
                     solver_options=None, max_sd=1.0):
    """Starting points ``z`` of ``chains`` chains, dispersed around ``center`` (default the nominal values).

    Draws from ``N(z_c, scale^2 diag(1 / G_z,ii(z_c)))`` in the unbounded coordinates
    (:mod:`pbsens.inference.transform`), ``G_z`` the regularised SMMALA metric at the
    centre: each parameter dispersed by ``scale`` times its conditional standard
    deviation, at most ``max_sd`` (dispersed starts, so that R-hat can detect chains that have not
    forgotten where they began). A centre
    on a bound is first moved ``1e-6`` of the width inside. Returns ``(z0, theta0)``,
    each (chains, d).
    """
    post = UnboundedPosterior(problem.log_posterior(method=method, **(solver_options or {})), *problem.priors.support(),
                              ridge=ridge)
    c = problem.nominal_theta(finite=True) if center is None else np.asarray(center, dtype=np.float64)
    zc = post.transform.to_unbounded(c, margin=1e-6)
    lp, _, G = post.evaluate(zc)
    if not np.isfinite(lp):
        raise PbsensError(f"the posterior is not finite at the centre of the starting points {c.tolist()}")
    # conditional standard deviations 1/sqrt(G_ii): each parameter moved by about its own
    # resolution (eigen-directions of a nearly singular G would mix identifiable
    # parameters into the wide non-identifiable spread and start chains in regions
    # where the model is stiff and the solve costs seconds)
    # parameters without curvature (non-identifiable, J -> 0 at a bound) have sd
    # 1/sqrt(ridge) ~ 3 there; capped at ``max_sd``: Boehm chains started ~2 sd out in
    # k_imp_homo (at 1e-5 instead of near 1e5) climbed into a separate basin (log-posterior
    # 11 below the main mode) and stayed there for 1,500 iterations
    sd = np.minimum(1.0 / np.sqrt(np.maximum(np.diag(G), ridge)), max_sd)
    Z = zc + scale * sd * rng.standard_normal((chains, zc.size))
    return Z, np.array([post.transform.to_bounded(z) for z in Z])


class _BoxMetric:
    """A posterior whose SMMALA metric adds, for each parameter without a proper prior, the
    precision ``12 / width^2`` of the uniform distribution on its support (bounds, or a
    uniform prior's interval).

    Evidence (Boehm at its nominal point): the Fisher information has eigenvalues from
    2e-10 to 6e3, so a relative eigenvalue floor alone leaves proposals in the flat
    directions wider than the bounds, and nearly all of them are rejected. The added
    term caps the proposal's spread at about the support's width. It changes the
    proposal only (a deterministic function of ``theta``), not the target.
    """

    def __init__(self, post, priors):
        self.post = post
        lo, hi = np.array(priors.lower, float), np.array(priors.upper, float)
        for i, (t, pp) in enumerate(zip(priors.types, priors.params)):
            if t is not None and t.endswith("niform"):
                lo[i], hi[i] = pp
        flat = np.array([t is None or t.endswith("niform") for t in priors.types])
        width = hi - lo
        ok = flat & np.isfinite(width) & (width > 0)
        self.extra = np.diag(np.where(ok, 12.0 / np.where(ok, width, 1.0) ** 2, 0.0))
        self.dim = post.dim
        self.param_names = post.param_names

    def evaluate(self, theta):
        lp, g, G = self.post.evaluate(theta)
        return lp, g, G + self.extra


# ------------------------------------------------------------------ progress
class _Bars:
    def __init__(self, chains, total, scratch, enabled):
        self.scratch = scratch
        self.bars = None
        if enabled:
            from tqdm.auto import tqdm
            size = shutil.get_terminal_size((100, 24))     # a pty may report 0 x 0: tqdm then hides bars
            width, rows = size.columns or 100, max(size.lines, chains + 2)
            self.bars = [tqdm(total=total, desc=f"chain {k}", position=k, leave=True, unit="it", ncols=width,
                              nrows=rows)
                         for k in range(chains)]

    def poll(self):
        if self.bars is None:
            return
        for k, bar in enumerate(self.bars):
            try:
                with open(os.path.join(self.scratch, f"chain_{k}.progress"), encoding="utf-8") as fh:
                    n = int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if n > bar.n:
                bar.update(n - bar.n)

    def close(self):
        if self.bars is not None:
            self.poll()
            for bar in self.bars:
                bar.close()




# ------------------------------------------------------------------ the sampler
def sample(problem, chains=4, draws=1000, burn_in=None, method="exp2", seed=None, client=None, n_workers=None,
           progress=True, *, theta0=None, metric_floor=1e-8, box_metric=None, step_size=None, target_accept=0.6,
           solver_options=None, transform=True, ridge=0.1, init_scale=2.0, metric=None, checkpoint_dir=None,
           resume=False):
    """Run ``chains`` SMMALA chains in parallel on ``problem``'s posterior.

    Parameters
    ----------
    problem : Problem
        From :func:`pbsens.petab.load` (a PEtab YAML or an SBtab folder).
    chains, draws : int
        Number of chains and kept draws per chain.
    burn_in : int, optional
        Iterations discarded per chain, during which (only) the step size adapts;
        default ``draws // 2``.
    method : str
        Sensitivity method of the likelihood: ``"exp2"``, ``"pbsr"``, ... or ``"fs"``.
    seed : int, optional
        Root seed; chain ``k`` uses ``SeedSequence(seed).spawn(chains)[k]``. Default:
        fresh entropy, recorded in ``idata.attrs["seed"]`` to rerun the same chains.
    client, n_workers
        Where the chains run (:func:`pbsens.parallel.map_tasks`): local processes
        (default ``min(chains, CPUs)``), a dask ``Client``, a scheduler address or
        ``"local"``. ``n_workers=1`` without a client runs the chains here, one after
        the other.
    progress : bool
        A tqdm bar per chain when stderr is a terminal (quiet otherwise).
    theta0 : array_like (d,) or (chains, d), optional
        Starting points. Default: with ``transform``, one point per chain drawn from
        a widened Laplace approximation around the nominal values
        (:func:`dispersed_starts`, ``init_scale``; from the root seed); without, the
        nominal values. A single point (d,) is used as the centre of the dispersed
        starts (with ``transform``) or by every chain (without).
    metric_floor : float or None
        Eigenvalue floor of the SMMALA metric, relative to its largest eigenvalue
        (see :func:`pbsens.smmala`); ``None`` for jitter-or-reject.
    box_metric : bool, optional
        Add to the metric the precision ``12 / width^2`` of the uniform distribution
        on each flat parameter's support (see ``_BoxMetric``): keeps proposals in
        non-identifiable directions within the bounds. Default: only without ``transform``.
    transform : bool
        Sample the bounded parameters as ``z = logit((theta - lb) / (ub - lb))``
        (:mod:`pbsens.inference.transform`: the log-Jacobian added to the target,
        gradient and metric by the chain rule), so that no proposal leaves the
        support; draws and ``lp`` are reported on the parameter scale. Default True.
    ridge : float
        With ``transform``: added to the diagonal of the metric in ``z``.
    init_scale : float
        With ``transform`` and the default starts: widening of the Laplace approximation.
    step_size, target_accept, metric
        As in :func:`pbsens.smmala`. ``metric`` default: ``"fisher+cov"`` (the inverse
        burn-in covariance of each chain, in ``z`` with ``transform``, added to the
        metric) when ``burn_in >= 8``, else ``"fisher"``. Evidence (Boehm, 2 x 300
        draws): with ``"fisher"`` the step size adapts to 0.08-0.12 and the smallest bulk
        ESS is 2; with ``"fisher+cov"`` to 1.6-1.8 and 10 (docs/PERFORMANCE.md).
    solver_options : dict, optional
        Passed to ``Problem.evaluate`` (``rtol``, ``atol``, ``solver``).
    checkpoint_dir : str or path, optional
        Keep the run resumable: each chain writes ``chain_<k>.npz`` there (its draws and
        the sampler's complete state: position, cached gradient and metric, random
        generator, step-size adaptation, burn-in covariance, counters;
        :mod:`pbsens.inference.checkpoint`) at most every 2 s and when it ends, atomically,
        and ``run.json`` records the arguments and starting points. The workers must see
        the directory. A directory holding an earlier run's checkpoints is refused
        unless ``resume``.
    resume : bool
        Continue the run in ``checkpoint_dir`` (killed part way, even by SIGKILL): finished
        chains are read back, the others continue from their last checkpoint, and the
        result equals the uninterrupted run's, draw for draw. The arguments must be the
        stored run's (``seed=None`` takes its seed); otherwise PbsensError. With no
        checkpoint there, the run starts afresh.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (dims ``chain``, ``draw``; one variable per estimated
        parameter id), ``sample_stats`` (``lp``, ``accepted``, ``acceptance_rate``,
        ``step_size``, ``solver_failed``), ``observed_data`` (the measurements), and
        ``attrs`` with the seed, method, per-chain seconds and failures, the initial step
        size, the support (JSON ``[lower, upper]``) and ``convergence_warnings`` (a JSON
        list of the messages below); with ``checkpoint_dir``, ``resumed_iterations`` (JSON
        ``{chain: iterations read back from its checkpoint}``).

    Warns
    -----
    ConvergenceWarning
        (:mod:`pbsens.errors`; the rules are :func:`check_convergence`'s) R-hat above
        1.01, bulk ESS below 100 per chain, a parameter pinned to a bound in a chain, a
        chain that hardly moves. Each names the parameters and chains and says what to try.

    Raises
    ------
    PbsensError
        Invalid arguments, every chain failed (the message names each seed), or a
        ``checkpoint_dir`` that holds a run without ``resume`` / another run's arguments.
    """
    stored = None if checkpoint_dir is None else ckp.open_dir(checkpoint_dir, resume)
    if seed is None and stored is not None:
        seed = stored["settings"]["seed"]
    chains, draws, burn_in, entropy, metric = _checked_arguments(chains, draws, burn_in, method, seed, metric)
    if box_metric is None:
        box_metric = not transform
    opts = dict(method=method, draws=draws, burn_in=burn_in, metric_floor=metric_floor, box_metric=box_metric,
                step_size=step_size, transform=bool(transform), ridge=float(ridge),
                target_accept=target_accept, metric=metric, fault=_FAULT,
                solver_options=dict(solver_options or {}))

    def starts_fn():
        return _start_points(problem, chains, theta0, transform, entropy, method=method, init_scale=init_scale,
                             ridge=ridge, solver_options=solver_options)
    done, states = {}, {}
    if checkpoint_dir is None:
        z0, starts = starts_fn()
    else:
        opts["checkpoint_dir"] = os.path.abspath(os.fspath(checkpoint_dir))
        settings = ckp.run_settings(problem, opts, chains=chains, seed=entropy, theta0=theta0, init_scale=init_scale)
        z0, starts, done, states = ckp.begin(checkpoint_dir, stored, settings, starts_fn)
    items = [dict(chain=k, entropy=entropy, theta0=starts[k], z0=None if z0 is None else z0[k], resume=states.get(k))
             for k in range(chains) if k not in done]
    ok, failed, wall = _run_chains(problem, opts, items, client, n_workers, progress, chains) if items else ([], [], 0.)
    ok = sorted(ok + [_finished(k, a) for k, a in done.items()], key=lambda r: r["chain"])
    _report_failures(ok, failed, entropy)
    info = _run_info(problem, opts, entropy, chains, wall)
    if checkpoint_dir is not None:
        info["resumed_iterations"] = ckp.report(ok + failed, done, states, checkpoint_dir)
    idata = _inference_data(problem, ok, failed, info, starts)
    _warn_convergence(idata)
    return idata


# ------------------------------------------------------------------ the sampler's steps
def _checked_arguments(chains, draws, burn_in, method, seed, metric):
    """:func:`sample`'s checked ``(chains, draws, burn_in, seed, metric)``: ArviZ present, the
    defaults filled in (a fresh recorded seed, the metric for this burn-in)."""
    try:
        import arviz  # noqa: F401
    except ImportError:
        raise PbsensError("sample() needs ArviZ: pip install arviz") from None
    chains = _check_int(chains, "chains", 1)
    draws = _check_int(draws, "draws", 1)
    burn_in = draws // 2 if burn_in is None else _check_int(burn_in, "burn_in", 0)
    if not isinstance(method, str) or (method != FORWARD and method not in METHOD_INFO):
        raise PbsensError(f"'method' must be {FORWARD!r} or one of {', '.join(METHOD_INFO)}, got {method!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or not 0 <= seed < 2 ** 63):
        raise PbsensError(f"'seed' must be an integer in [0, 2**63) or None, got {seed!r}")
    if seed is None:      # fresh, recorded (a 63-bit integer fits the netCDF attributes)
        import secrets
        seed = secrets.randbits(63)
    from .smmala import METRICS
    if metric is None:
        metric = "fisher+cov" if burn_in >= 8 else "fisher"
    if metric not in METRICS:
        raise PbsensError(f"'metric' must be one of {', '.join(METRICS)}, got {metric!r}")
    return chains, draws, burn_in, int(seed), metric


def _start_points(problem, chains, theta0, transform, entropy, *, method, init_scale, ridge, solver_options):
    """``(z0, starts)``: each chain's start in the unbounded coordinates (None without
    ``transform``) and on the parameter scale, (chains, d) (see :func:`sample`'s ``theta0``)."""
    d = problem.dim
    z0 = None
    if transform and (theta0 is None or np.shape(theta0) == (d,)):
        rng0 = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(2 ** 31,)))
        z0, starts = dispersed_starts(problem, chains, rng0, method=method, scale=init_scale, ridge=ridge,
                                      center=theta0, solver_options=solver_options)
    elif theta0 is None:
        starts = np.tile(problem.nominal_theta(finite=True), (chains, 1))
    else:
        try:
            starts = np.array(theta0, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"'theta0' must be an array of numbers, shape ({d},) or ({chains}, {d})") from None
        if starts.shape == (d,):
            starts = np.tile(starts, (chains, 1))
        if starts.shape != (chains, d) or not np.all(np.isfinite(starts)):
            raise PbsensError(f"'theta0' must be finite with shape ({d},) or ({chains}, {d}), got {starts.shape}")
        if transform:
            from .transform import BoundedTransform
            tr = BoundedTransform(*problem.priors.support())
            z0 = np.array([tr.to_unbounded(t, margin=1e-6) for t in starts])
    return z0, starts


def _finished(k, arrays):
    """A finished chain's result, read back from its checkpoint (``arrays``)."""
    res = MCMCResult(accept_rate=float(np.mean(arrays["r_accepted"])), step_size=float(arrays["r_step_size"]),
                     wall_time=float(arrays["wall"]), **{a: arrays[f"r_{a}"] for a in _RESULT})
    return {"chain": k, "result": res, "wall": float(arrays["wall"])}


def _run_chains(problem, opts, items, client, n_workers, progress, n_chains):
    """Run the chains ``items`` (:func:`_chain_item`) where :func:`sample` was told to, with a
    progress bar for each of the ``n_chains`` chains; returns ``(ok, failed, wall)``, the finished and the
    failed chains' results (a failed chain's draws up to its last checkpoint) and the seconds taken."""
    chains = len(items)
    if n_workers is None and client is None:
        n_workers = max(1, min(chains, os.cpu_count() or 1))
    in_process = client is None and n_workers == 1
    from ..batches import problem_recipe
    from ..parallel import TaskFailure, map_tasks
    target = problem if in_process else problem_recipe(problem)
    scratch = tempfile.mkdtemp(prefix="pbsens-chains-")
    opts = dict(opts, scratch=scratch)
    n_total = opts["burn_in"] + opts["draws"]
    start = {it["chain"]: 0 if it["resume"] is None else int(it["resume"]["s_i"]) for it in items}
    for k in range(n_chains):        # a resumed run's bars start where the checkpoints are
        _write(os.path.join(scratch, f"chain_{k}.progress"), f"{start.get(k, n_total)} {n_total}")
    bars = _Bars(n_chains, n_total, scratch, progress_enabled(progress))
    if in_process:
        opts["poll"] = bars.poll
    t0 = time.perf_counter()
    try:
        raw = map_tasks(_chain_item, (target, opts), items, client=client, n_workers=n_workers, chunk_size=1,
                        poll=bars.poll)
    finally:
        bars.close()
    wall = time.perf_counter() - t0
    ok, failed = [], []
    for item, r in zip(items, raw):
        k = item["chain"]
        if isinstance(r, TaskFailure):
            part = _read_checkpoint(opts.get("checkpoint_dir") or scratch, k)
            failed.append(dict(chain=k, error=r.error, partial=part[0], partial_logp=part[1], wall=float("nan")))
        elif "error" in r:
            failed.append(r)
        else:
            ok.append(r)
    shutil.rmtree(scratch, ignore_errors=True)
    return ok, failed, wall


def _report_failures(ok, failed, entropy):
    """A warning per failed chain (for the caller of :func:`sample`); an error when every chain failed."""
    for f in failed:
        n = 0 if f["partial"] is None else len(f["partial"])
        warnings.warn(f"chain {f['chain']} (seed {entropy}, SeedSequence spawn key ({f['chain']},)) failed after "
                      f"{n} iterations: {f['error']}; its {n} iterations are kept in group "
                      f"'partial_chain_{f['chain']}'", RuntimeWarning, stacklevel=3)
    if not ok:
        raise PbsensError("every chain failed: " + "; ".join(
            f"chain {f['chain']} (seed {entropy}, spawn key ({f['chain']},)): {f['error']}" for f in failed))


def _run_info(problem, opts, entropy, chains, wall):
    """The run's settings, the attributes of the ``InferenceData``'s groups."""
    from .smmala import default_step_size
    step_size = opts["step_size"]
    return dict(seed=entropy, method=opts["method"], draws=opts["draws"], burn_in=opts["burn_in"], chains=chains,
                wall_time=wall, metric_floor=opts["metric_floor"], box_metric=int(bool(opts["box_metric"])),
                transform="logit" if opts["transform"] else "none", ridge=opts["ridge"], metric=opts["metric"],
                step_size_initial=float(step_size) if step_size is not None else default_step_size(problem.dim),
                support=json.dumps([b.tolist() for b in problem.priors.support()]))


def _warn_convergence(idata):
    """:func:`check_convergence` on a run: its messages in the attributes, and warned (for the
    caller of :func:`sample`)."""
    found = check_convergence(idata)
    for ds in (idata.posterior, idata.sample_stats):
        ds.attrs["convergence_warnings"] = json.dumps([str(w) for w in found])
    for w in found:
        warnings.warn(w, stacklevel=3)


def _read_checkpoint(scratch, k):
    try:
        with np.load(os.path.join(scratch, f"chain_{k}.npz")) as z:
            return z["chain"].copy(), z["logp"].copy()
    except (OSError, KeyError, ValueError):
        return None, None


def _observed(problem):
    import xarray as xr
    m = problem.petab_problem.measurement_df
    coords = {"row": np.arange(len(m)),
              "observableId": ("row", m["observableId"].astype(str).to_numpy()),
              "simulationConditionId": ("row", m["simulationConditionId"].astype(str).to_numpy()),
              "time": ("row", m["time"].to_numpy(dtype=float))}
    return xr.Dataset({"measurement": ("row", m["measurement"].to_numpy(dtype=float))}, coords=coords)


def _inference_data(problem, ok, failed, info, starts=None):
    import arviz
    import xarray as xr
    ids = list(problem.parameter_ids)
    chain_ids = np.array([r["chain"] for r in ok])
    res = [r["result"] for r in ok]
    X = np.stack([r.chain for r in res])           # (chains, draws, d)
    n_draws = X.shape[1]
    coords = {"chain": chain_ids, "draw": np.arange(n_draws)}
    post = xr.Dataset({pid: (("chain", "draw"), X[:, :, j]) for j, pid in enumerate(ids)}, coords=coords)
    stats = xr.Dataset({
        "lp": (("chain", "draw"), np.stack([r.logp for r in res])),
        "accepted": (("chain", "draw"), np.stack([r.accepted for r in res])),
        "acceptance_rate": (("chain", "draw"), np.stack([r.accept_prob for r in res])),
        "step_size": (("chain", "draw"), np.stack([np.full(n_draws, r.step_size) for r in res])),
        "solver_failed": (("chain", "draw"), np.stack([r.solver_failed for r in res])),
    }, coords=coords)
    attrs = dict(info)
    attrs["chain_seconds"] = json.dumps({int(r["chain"]): float(r["wall"]) for r in ok})
    attrs["sampling_seconds"] = float(sum(r["wall"] for r in ok))
    attrs["failed_chains"] = json.dumps([{"chain": int(f["chain"]), "seed": info["seed"],
                                          "spawn_key": [int(f["chain"])], "error": f["error"],
                                          "iterations_kept": 0 if f["partial"] is None else int(len(f["partial"]))}
                                         for f in failed])
    attrs["parameter_ids"] = json.dumps(ids)
    if starts is not None:
        attrs["starting_points"] = json.dumps(np.asarray(starts).tolist())
    attrs["inference_library"] = "pbsens"
    attrs["metric_floor"] = "none" if info["metric_floor"] is None else float(info["metric_floor"])
    for ds in (post, stats):
        ds.attrs.update(attrs)
    groups = {"posterior": post, "sample_stats": stats, "observed_data": _observed(problem)}
    idata = arviz.InferenceData(**groups)
    for f in failed:
        if f["partial"] is None:
            continue
        P = np.asarray(f["partial"])
        ds = xr.Dataset({pid: ("iteration", P[:, j]) for j, pid in enumerate(ids)},
                        coords={"iteration": np.arange(P.shape[0])})
        ds["lp"] = ("iteration", np.asarray(f["partial_logp"]))
        ds.attrs.update({"chain": int(f["chain"]), "seed": info["seed"], "error": f["error"],
                         "burn_in": info["burn_in"]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata.add_groups({f"partial_chain_{f['chain']}": ds})
    return idata


# ------------------------------------------------------------------ convergence checks
def check_convergence(idata, lower=None, upper=None):
    """Why the draws of a sampling run may not be a sample of the posterior.

    The checks :func:`sample` runs (and warns about) on its result; also usable on a
    run read back with ``arviz.from_netcdf``. Each finding is one
    :class:`~pbsens.errors.ConvergenceWarning` (returned, not issued) naming the
    parameters and chains:

    - ``"stuck"``: a chain that hardly moves: acceptance after burn-in below 5%
      (at least 20 draws), or a final step size below 1% of
      ``max(initial step, 1.65 d^(-1/6))`` (``sample_stats.accepted``, ``step_size``,
      ``attrs["step_size_initial"]``).
    - ``"bound"``: a parameter within ``1e-4`` of the bounds' width of a bound in
      more than half of a chain's draws (bounds: ``lower``/``upper``, default
      ``attrs["support"]``).
    - ``"rhat"``: rank-normalised split R-hat (``arviz.rhat``, Vehtari et al. 2021)
      above 1.01, ArviZ's threshold; the chains whose means lie furthest from the
      others' are named. Needs two chains (as in ArviZ); one chain's drift shows in its ESS.
    - ``"ess"``: bulk ESS (``arviz.ess``) below ``100 x chains``: Vehtari et al.'s
      rule of 100 per chain, so 400 for the default 4 chains as ArviZ recommends;
      below it R-hat and the ESS estimate themselves are unreliable. Chains whose
      own bulk ESS is below 100 are named.

    R-hat and ESS need at least 4 draws per chain. Returns a list (empty when nothing
    was found).
    """
    from .smmala import at_bound, mixing_warnings, movement_problems
    post = idata.posterior
    att = post.attrs
    ids = json.loads(att["parameter_ids"]) if "parameter_ids" in att else list(post.data_vars)
    chain_ids = [int(c) for c in post.chain.values]
    X = np.stack([np.asarray(post[p].values, dtype=np.float64) for p in ids], axis=-1)   # (C, N, d)
    C, N, d = X.shape
    if lower is None and "support" in att:
        lower, upper = (np.array(b, dtype=np.float64) for b in json.loads(att["support"]))
    found = []

    # chains that hardly move
    st = getattr(idata, "sample_stats", None)
    if st is not None and "accepted" in st and "step_size" in st:
        eps0 = float(att.get("step_size_initial", np.nan))
        adapted = int(att.get("burn_in", 1)) > 0
        rows = []
        for c, cid in enumerate(chain_ids):
            acc = np.asarray(st["accepted"].values[c], dtype=float)
            why, advice = movement_problems(float(acc.mean()) if acc.size else 0.0, acc.size,
                                            float(np.asarray(st["step_size"].values[c]).reshape(-1)[-1]), eps0, d,
                                            adapted)
            if why:
                n_bad = int(np.sum(st["solver_failed"].values[c])) if "solver_failed" in st else 0
                if n_bad:
                    why.append(f"{n_bad} of {acc.size} kept proposals non-finite (outside the support, or a "
                               f"failed solve)")
                rows.append((cid, why, advice))
        if rows:
            advice = list(dict.fromkeys(a for _, _, adv in rows for a in adv))   # in order, once each
            advice = [a.replace("start from a point well inside the support (e.g. a fit)",
                                "start from a fit (theta0=)") for a in advice]
            msg = (f"{_chains([c for c, _, _ in rows])} hardly move{'s' if len(rows) == 1 else ''} ("
                   + "; ".join(f"chain {c}: {', '.join(w)}" for c, w, _ in rows)
                   + f"): {'its' if len(rows) == 1 else 'their'} draws are not a sample of the posterior. To do: "
                     f"{'; '.join(advice)}.")
            found.append(ConvergenceWarning(msg, kind="stuck", parameters=[], chains=[c for c, _, _ in rows]))

    # parameters pinned to a bound
    if lower is not None:
        lo, hi = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        pinned = {}
        for c, cid in enumerate(chain_ids):
            for j, side, frac in at_bound(X[c], lo, hi):
                pinned.setdefault((j, side), []).append((cid, frac))
        if pinned:
            parts, chains_hit = [], set()
            for (j, side), hits in sorted(pinned.items()):
                b = (lo if side == 0 else hi)[j]
                parts.append(f"{ids[j]} on its {'lower' if side == 0 else 'upper'} bound {b:.6g} in "
                             f"{_chains([c for c, _ in hits])} ({', '.join(f'{100 * f:.0f}%' for _, f in hits)} "
                             f"of the draws)")
                chains_hit.update(c for c, _ in hits)
            msg = (f"parameters sit on a bound (within 1e-4 of the bounds' width): {_list(parts)}. Either those "
                   f"chains are pinned there (sample with transform=True, start from a fit away from the bound, "
                   f"theta0=) or the posterior piles up against the bound, which then decides the estimate more "
                   f"than the data do (widen the bound in the parameter table, or add a prior).")
            found.append(ConvergenceWarning(msg, kind="bound", parameters=sorted({ids[j] for j, _ in pinned},
                                                                                 key=ids.index),
                                            chains=sorted(chains_hit)))
    found += mixing_warnings(X, ids, chain_ids)
    return found
