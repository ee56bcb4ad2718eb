"""Reproduce the paper's Section 8: run the experiment scripts and write a report into an output folder.

>>> import pbsens.reproduce as rep
>>> out = rep.run(["fig7_8_chua"], quick=True, out_dir="chua-quick")     # doctest: +SKIP
>>> out["report"]                                                          # doctest: +SKIP
'.../chua-quick/REPORT.md'

Where results go. Every run writes its JSON/CSV/PNG results and its own
``REPORT.md`` into one output folder, never into the repository's committed
``experiments/REPORT.md`` and ``experiments/results/`` (the published reference,
which a run only reads, to compare its numbers with). The folder is ``out_dir``;
by default ``./pbsens-reproduce/`` in the current directory for a full run, and a
new temporary folder for a quick run (a smoke test: repeated quick runs neither
collide nor leave anything behind in the checkout). A folder that already holds
files is written into only with ``force=True`` (``--force``), which replaces the
files of the same names and leaves the others; the report then covers every
experiment's results found in the folder. The experiments folder itself (the
scripts and the committed reference) is never an output folder.

Where the scripts are. They live in the repository's ``experiments/`` folder, and a
wheel carries a copy as ``pbsens/_experiments/`` (``pyproject.toml``'s force-include,
with the reference results), so ``pbsens reproduce`` runs from any directory, from
a checkout, an editable install or a plain ``pip install .``. ``$PBSENS_EXPERIMENTS_DIR``
overrides both.

Progress goes to stderr: tqdm bars on a terminal; otherwise (a log file, CI, a pipe)
flushed lines, one when an experiment starts and one when it ends with its
elapsed time, one per sub-step and at least one a minute within a long
experiment (:class:`Progress`); ``progress=False`` silences both.

To update the published reference: run into a folder, copy its JSON/CSV/PNG files into
``experiments/results/`` and regenerate ``experiments/REPORT.md`` with
``python experiments/make_report.py``.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

from .errors import PbsensError

__all__ = ["EXPERIMENTS", "Experiment", "Progress", "run", "experiments_dir", "reference_dir", "default_out_dir",
           "prepare_out_dir", "format_duration", "DEFAULT_OUT"]

#: The default output folder of a full run, in the current directory.
DEFAULT_OUT = "pbsens-reproduce"


class Experiment(NamedTuple):
    """One experiment: its script (relative to the repository) and what it reproduces.

    A script may hold a family of experiments (Figs 2 and 3 in one, Figs 4 and 5
    in another); its ``RUNS`` maps each experiment's name to its ``run``.
    """

    module: str
    description: str

    def __str__(self):  # printing an entry shows its description
        return self.description


#: The experiments in the paper's order: name -> (script path, description).
EXPERIMENTS = OrderedDict([
    ("fig2_pka_error", Experiment("experiments/error_figures.py",
                                  "Fig 2: E_k per step of PBSR, Exp (+ pbsr2, exp2) vs tight FS, PKA [0, 600]")),
    ("fig3_camkii_error", Experiment("experiments/error_figures.py",
                                     "Fig 3: E_k per step of PBSR, Exp (+ pbsr2, exp2) vs tight FS, CaMKII [0, 600]")),
    ("fig4_pka_kappa", Experiment("experiments/kappa_figures.py",
                                  "Fig 4: kappa_bar(t) of PBSR, Exp, FS on PKA [0, 60000], N = 100")),
    ("fig5_camkii_kappa", Experiment("experiments/kappa_figures.py",
                                     "Fig 5: kappa_bar(t) of PBSR, Exp, FS on CaMKII [0, 600], N = 100")),
    ("fig6_random_linear", Experiment("experiments/fig6_random_linear.py",
                                      "Fig 6: runtime vs n for the random linear system, FS / PBS / Exp, a n^b fits")),
    ("fig7_8_chua", Experiment("experiments/fig7_8_chua.py",
                               "Figs 7, 8: E_k and kappa_bar on Chua [0, 10] (+ pbsr2, exp2)")),
    ("table2_runtime", Experiment("experiments/table2_runtime.py",
                                  "Table 2: runtime of FS, PBSR, Exp (+ pbsr2, exp2) on PKA and CaMKII [0, 600]")),
])


# --------------------------------------------------------------------------- where things are
def _candidates():
    here = Path(__file__).resolve().parent
    out = [here / "_experiments", here.parent / "experiments"]   # a wheel's copy; a checkout's folder
    if os.environ.get("PBSENS_EXPERIMENTS_DIR"):
        out.insert(0, Path(os.environ["PBSENS_EXPERIMENTS_DIR"]))
    return out


def experiments_dir() -> Path:
    """The folder of the experiment scripts.

    ``$PBSENS_EXPERIMENTS_DIR`` if set, else the copy inside the installed package
    (``pbsens/_experiments/``, a wheel install), else the repository's
    ``experiments/`` next to the package (a checkout or editable install). The
    current directory plays no part.

    Raises
    ------
    PbsensError
        When none of them holds the experiment scripts.
    """
    candidates = _candidates()
    for here in candidates:
        if here.is_dir() and (here / "_common.py").is_file():
            return here
    raise PbsensError("the experiments folder is missing (looked in "
                      + ", ".join(repr(str(c)) for c in candidates) + "): this installation of pbsens carries "
                      "no experiment scripts; install pbsens from its repository (pip install .) or set "
                      "PBSENS_EXPERIMENTS_DIR to the repository's experiments folder")


def reference_dir():
    """The committed reference results (``experiments/results/`` or the wheel's copy), or None if absent."""
    try:
        here = experiments_dir() / "results"
    except PbsensError:
        return None
    return here if here.is_dir() and any(here.glob("*.json")) else None


def default_out_dir(quick=False) -> Path:
    """Where a run writes without ``out_dir``: ``./pbsens-reproduce`` (full), a new temporary folder (quick)."""
    if quick:
        return Path(tempfile.mkdtemp(prefix="pbsens-reproduce-quick-"))
    return Path.cwd() / DEFAULT_OUT


def _inside(path, folder):
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def prepare_out_dir(out_dir, quick=False, force=False) -> Path:
    """The output folder, created; a folder that holds files only with ``force``.

    Raises
    ------
    PbsensError
        ``out_dir`` is a file, lies inside the experiments folder (the scripts and
        the committed reference results), or holds files and ``force`` is false.
    """
    out = default_out_dir(quick) if out_dir is None else Path(out_dir)
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise PbsensError(f"'out_dir': {str(out)!r} exists and is not a folder")
    protected = [c.resolve() for c in _candidates() if c.is_dir()]
    for folder in protected:
        if _inside(out, folder):
            raise PbsensError(f"'out_dir': {str(out)!r} is inside the experiments folder {str(folder)!r}, which "
                              "holds the scripts and the published reference results; choose another folder")
    if out.is_dir() and not force:
        entries = sorted(p.name for p in out.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (f", ... ({len(entries)} entries)" if len(entries) > 5 else "")
            raise PbsensError(f"the output folder {str(out)!r} is not empty ({shown}); pass --force "
                              "(force=True) to write into it, replacing the files of the same names, or choose "
                              "another folder with --out DIR (out_dir=)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PbsensError(f"'out_dir': cannot create {str(out)!r}: {exc.strerror or exc}") from None
    return out


# --------------------------------------------------------------------------- progress
def format_duration(seconds):
    """``12.3 s``, ``4 min 05 s``, ``1 h 02 min``."""
    seconds = max(0.0, float(seconds))
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    if round(seconds) < 3600:
        m, s = divmod(int(round(seconds)), 60)
        return f"{m} min {s:02d} s"
    h, m = divmod(int(round(seconds / 60)), 60)
    return f"{h} h {m:02d} min"


class Progress:
    """Progress of a run on stderr, in one of three modes.

    * ``"bars"``: tqdm bars (a terminal); start and end of each experiment as lines above them.
    * ``"lines"``: flushed plain lines (a log file, CI, a pipe): each experiment's
      start and end with its elapsed time; within it each sub-step
      (:meth:`step`), the first item of every loop, every item of a short loop
      (at most ``short`` items) and then one item at least every ``every`` seconds
      (:meth:`bar`); and, from a background thread, a "still running" line when
      nothing was written for ``heartbeat`` seconds (model compilation, a long
      reference solve).
    * ``"off"``: nothing.

    The experiment scripts receive it as their ``progress`` argument and call
    :meth:`bar` and :meth:`step` (through ``_results_io.bar`` / ``step``).
    """

    def __init__(self, mode="lines", stream=None, every=30.0, heartbeat=60.0, short=10):
        if mode not in ("bars", "lines", "off"):
            raise PbsensError(f"'mode' must be 'bars', 'lines' or 'off', got {mode!r}")
        self.mode, self._stream = mode, stream
        self.every, self.heartbeat, self.short = float(every), float(heartbeat), int(short)
        self._lock = threading.RLock()
        self._t0 = self._last = time.monotonic()
        self._name = self._what = self._t_exp = self._outer = None
        self._tag = ""
        self._stop = threading.Event()
        self._thread = None

    @classmethod
    def auto(cls, progress):
        """``progress`` as a :class:`Progress`: None -> bars on a terminal, lines otherwise; True -> bars;
        False -> off; ``"bars"`` / ``"lines"`` / ``"off"``; a :class:`Progress` as it is."""
        if isinstance(progress, Progress):
            return progress
        if progress is None:
            tty = getattr(sys.stderr, "isatty", lambda: False)()
            return cls("bars" if tty else "lines")
        if isinstance(progress, str):
            return cls(progress)
        return cls("bars" if progress else "off")

    # ---- output
    def write(self, text):
        """One line on stderr, flushed (above the bars in ``"bars"`` mode)."""
        if self.mode == "off":
            return
        with self._lock:
            stream = self._stream or sys.stderr
            if self.mode == "bars":
                from tqdm.auto import tqdm
                tqdm.write(text, file=stream)
            else:
                stream.write(text + "\n")
                stream.flush()
            self._last = time.monotonic()

    def _since(self):
        return format_duration(time.monotonic() - (self._t_exp if self._t_exp is not None else self._t0))

    # ---- experiments
    def begin(self, i, n, name, description=""):
        """Experiment ``name`` (number ``i`` of ``n``, from 1) starts."""
        with self._lock:
            self._name, self._what, self._t_exp = name, None, time.monotonic()
            self._tag = f"[{i}/{n}] {name}"
        if self.mode == "bars":
            if self._outer is None:
                from tqdm.auto import tqdm
                self._outer = tqdm(total=n, desc="experiments", unit="exp", file=self._stream or sys.stderr)
            self._outer.set_postfix_str(name)
        self.write(f"{self._tag}: started{' (' + description + ')' if description else ''}")
        self._start_heartbeat()

    def end(self, seconds=None):
        """The current experiment ends (its wall time ``seconds``, else measured here)."""
        if self._name is None:
            return
        took = time.monotonic() - self._t_exp if seconds is None else seconds
        self.write(f"{self._tag}: done in {format_duration(took)} (run so far {format_duration(time.monotonic() - self._t0)})")
        if self._outer is not None:
            self._outer.update(1)
        with self._lock:
            self._name = self._what = self._t_exp = None

    def step(self, text):
        """A sub-step of the current experiment starts (``"fig2_pka_error: reference forward sensitivities"``)."""
        with self._lock:
            self._what = text
        if self.mode == "bars":
            if self._outer is not None:
                self._outer.set_postfix_str(text)
            return
        self.write(f"    {text} (at {self._since()})")

    def bar(self, iterable, desc, total=None, uniform=True):
        """``iterable``, reporting its progress: a tqdm bar, lines, or nothing (see the class).

        ``uniform``: the items cost about the same, so the lines can estimate the time left
        (not for a loop over growing dimensions)."""
        if self.mode == "off":
            return iterable
        if self.mode == "bars":
            from tqdm.auto import tqdm
            return tqdm(iterable, desc=desc, total=total, leave=False, file=self._stream or sys.stderr)
        return self._lines(iterable, desc, total, uniform)

    def _lines(self, iterable, desc, total, uniform=True):
        if total is None:
            try:
                total = len(iterable)
            except TypeError:
                total = None
        t0 = last = time.monotonic()
        for i, item in enumerate(iterable):
            now = time.monotonic()
            with self._lock:
                self._what = f"{desc}, {i + 1}/{total if total is not None else '?'}"
            if i == 0 or (total is not None and total <= self.short) or now - last >= self.every:
                label = f" ({item})" if isinstance(item, str) else ""
                left = ""
                if i and total and uniform:
                    left = f", about {format_duration((now - t0) / i * (total - i))} left"
                self.write(f"    {desc}: {i + 1}/{total if total is not None else '?'}{label} "
                           f"(at {self._since()}{left})")
                last = now
            yield item
        with self._lock:
            self._what = None

    # ---- the heartbeat
    def _start_heartbeat(self):
        if self.mode != "lines" or self.heartbeat <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._beat, name="pbsens-reproduce-progress", daemon=True)
        self._thread.start()

    def _beat(self):
        tick = min(5.0, self.heartbeat / 4)
        while not self._stop.wait(tick):
            with self._lock:
                quiet_for = time.monotonic() - self._last
                name, what = self._name, self._what
            if name is not None and quiet_for >= self.heartbeat:
                self.write(f"    {what or name}: still running (at {self._since()})")

    def close(self):
        """Stop the heartbeat and close the bars."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._outer is not None:
            self._outer.close()
            self._outer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------- the scripts
def _import(stem, folder):
    """Import ``<experiments>/<stem>.py``; the folder goes on ``sys.path`` so that the scripts find their helpers."""
    if not (folder / f"{stem}.py").is_file():
        raise PbsensError(f"the experiment script {str(folder / (stem + '.py'))!r} is missing")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    mod = importlib.import_module(stem)
    where = Path(getattr(mod, "__file__", "") or "").resolve().parent
    if where != folder.resolve():
        raise PbsensError(f"importing the experiment script {stem!r} found another module of that name "
                          f"({getattr(mod, '__file__', None)!r}); rename it or run from a clean interpreter")
    return mod


def _runner(name, folder):
    """The ``run`` of experiment ``name``: ``RUNS[name]`` of its script."""
    mod = _import(Path(EXPERIMENTS[name].module).stem, folder)
    fn = getattr(mod, "RUNS", {}).get(name)
    if fn is None:
        raise PbsensError(f"the experiment script {EXPERIMENTS[name].module!r} has no run for {name!r} in its RUNS")
    return fn


def _check_names(names):
    if names is None:
        return list(EXPERIMENTS)
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise PbsensError(f"'names' must be a list of experiment names or None, got {names!r}") from None
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise PbsensError(f"'names': unknown experiment(s) {', '.join(map(repr, unknown))}; "
                          f"choose from {', '.join(EXPERIMENTS)}")
    if not names:
        raise PbsensError("'names' is empty: name at least one experiment (or pass None for all)")
    return list(dict.fromkeys(names))


def run(names=None, quick=False, out_dir=None, progress=None, overrides=None, force=False) -> dict:
    """Run experiments of the paper's Section 8 and write their report into the output folder.

    Parameters
    ----------
    names : list of str, optional
        Keys of :data:`EXPERIMENTS`; default all, in the paper's order.
    quick : bool
        Fewer repeats, samples and dimensions (all experiments in a few minutes).
    out_dir : path, optional
        Folder for the JSON/CSV/PNG results and ``REPORT.md``. Default
        ``./pbsens-reproduce`` (full) or a new temporary folder (quick); see the module.
    progress : None, bool, str or Progress
        None: tqdm bars when stderr is a terminal, progress lines otherwise; True:
        bars; False: nothing; ``"lines"``; or a :class:`Progress`.
    overrides : dict, optional
        ``{name: {option: value}}`` passed to that experiment's ``run`` (e.g.
        ``{"fig7_8_chua": {"n_samples": 3, "repeats": 2}}``; see each script's
        ``run`` for its options). For tests and experiments with the setup; the
        JSON records the overrides.
    force : bool
        Write into an output folder that already holds files (replacing the files
        of the same names).

    Returns
    -------
    dict
        ``out_dir`` and ``report`` (paths, str), ``wall_time_s``, ``results``
        (name -> the dict each experiment wrote as JSON) and ``comparison``
        (the report's comparison with the committed reference results:
        ``{"rows": [{"experiment", "verdict", "reference_verdict", "ours",
        "reference_ours", "same_verdict"}], "wall_time_s": {name: {"run",
        "reference"}}}``, or None without a reference).

    Raises
    ------
    PbsensError
        Unknown names, the experiments folder is missing, or the output folder
        holds files and ``force`` is false (checked before anything runs).
    """
    names = _check_names(names)
    overrides = dict(overrides or {})
    stray = [k for k in overrides if k not in names]
    if stray:
        raise PbsensError(f"'overrides' names experiment(s) that are not run: {', '.join(map(repr, stray))}")
    folder = experiments_dir()
    out = prepare_out_dir(out_dir, quick=quick, force=force)
    t0 = time.perf_counter()
    results = OrderedDict()
    prog = Progress.auto(progress)
    try:
        prog.write(f"pbsens reproduce: {len(names)} experiment(s){' (quick)' if quick else ''}, "
                   f"results in {out}")
        for i, name in enumerate(names, 1):
            prog.begin(i, len(names), name, EXPERIMENTS[name].description)
            t1 = time.perf_counter()
            results[name] = _runner(name, folder)(quick=quick, out_dir=out, progress=prog,
                                                  **overrides.get(name, {}))
            prog.end(time.perf_counter() - t1)
        prog.write("writing REPORT.md")
        make_report = _import("make_report", folder)
        ref = reference_dir()
        report = make_report.write_report(out, quick=quick, reference=ref)
        comparison = make_report.compare(out, ref) if ref is not None else None
        prog.write(f"done: {len(names)} experiment(s) in {format_duration(time.perf_counter() - t0)}; report {report}")
    finally:
        prog.close()
    return {"out_dir": str(out), "report": str(report), "wall_time_s": time.perf_counter() - t0,
            "results": results, "comparison": comparison}
