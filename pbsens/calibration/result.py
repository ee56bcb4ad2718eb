"""The result of a multi-start fit: one record per start, sorted by the objective, with a tidy
table, save and load (JSON, exact floats), and the waterfall criterion of convergence."""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from .objective import FitError

__all__ = ["CONVERGED_LLH_TOL", "FitResult", "StartResult"]

#: a start "converged" when its llh is within this of the best found (the usual waterfall criterion)
CONVERGED_LLH_TOL = 0.5


@dataclass
class StartResult:
    """One local optimisation.

    ``x0``/``x``: start and end point on the parameter scale; ``llh``: log-likelihood at ``x``
    (``-inf`` if failed); ``fval``: the minimised objective ``-(llh + log prior)``; ``n_iter``:
    optimiser iterations; ``n_eval``/``n_grad``: objective evaluations without/with
    sensitivities; ``n_failed``: of those, the failed simulations; ``cpu``: CPU seconds of the
    start (objective and optimiser, in its worker); ``wall``: its seconds; ``status``: the
    optimiser's exit code (positive: converged by its criteria); ``message``; ``phases``: the
    optimiser runs in order (method, objective, iterations, ...); ``refined``: the start was one of
    the best and ran again with ``fit(refine=)``'s method (its last phase), counted in the totals.
    """

    index: int
    x0: list
    x: list
    llh: float
    fval: float
    n_iter: int
    n_eval: int
    n_grad: int
    n_failed: int
    cpu: float
    wall: float
    status: int
    message: str
    optimizer: str = ""
    method: str = ""
    phases: list = field(default_factory=list)
    refined: bool = False

    def to_json(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text, where="start file"):
        try:
            d = json.loads(text)
            return cls(**d)
        except (ValueError, TypeError) as exc:
            raise FitError(f"{where}: not a pbsens start record ({exc})") from None


class FitResult:
    """The starts of a multi-start fit, best (lowest ``fval``) first.

    Attributes
    ----------
    starts : list of StartResult
    parameter_ids : list of str
    info : dict
        The run's settings (optimizer, method, seed, sampling, ...).
    """

    def __init__(self, starts, parameter_ids, info=None):
        self.starts = sorted(starts, key=lambda s: (_nan_last(s.fval), s.index))
        self.parameter_ids = list(parameter_ids)
        self.info = dict(info or {})

    def __len__(self):
        return len(self.starts)

    def __repr__(self):
        b = self.best
        best = "no start finished" if b is None else f"best llh = {b.llh:.10g}"
        return (f"<FitResult {len(self.starts)} starts, {best}, {self.n_converged()} converged, "
                f"{self.n_failed} failed>")

    @property
    def best(self):
        """The start with the lowest objective (``None`` if no start finished)."""
        ok = [s for s in self.starts if math.isfinite(s.fval)]
        return ok[0] if ok else None

    @property
    def x(self):
        """The best start's end point (parameter scale)."""
        b = self.best
        if b is None:
            raise FitError("no start of this fit ended with a finite objective")
        return np.array(b.x)

    @property
    def llh(self):
        return np.array([s.llh for s in self.starts])

    @property
    def n_failed(self):
        """Starts whose optimisation failed (non-finite end value)."""
        return sum(1 for s in self.starts if not math.isfinite(s.fval))

    def n_converged(self, tol=CONVERGED_LLH_TOL, best_llh=None):
        """Starts whose llh is within ``tol`` of ``best_llh`` (default: the best of this fit)."""
        b = self.best
        if b is None:
            return 0
        ref = b.llh if best_llh is None else best_llh
        return int(sum(1 for s in self.starts if math.isfinite(s.llh) and s.llh >= ref - tol))

    @property
    def cpu(self):
        """CPU seconds of all starts."""
        return float(sum(s.cpu for s in self.starts))

    def to_dataframe(self):
        """A tidy table: one row per start (best first), with the end point's parameters as columns."""
        import pandas as pd
        rows = []
        for rank, s in enumerate(self.starts):
            row = {"rank": rank, "start": s.index, "llh": s.llh, "fval": s.fval, "n_iter": s.n_iter,
                   "n_eval": s.n_eval, "n_grad": s.n_grad, "n_failed": s.n_failed, "cpu": s.cpu, "wall": s.wall,
                   "status": s.status, "message": s.message, "refined": s.refined}
            row.update({pid: v for pid, v in zip(self.parameter_ids, s.x)})
            rows.append(row)
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ save / load
    def save(self, path, overwrite=False):
        """Write the fit as JSON (exact floats). An existing file is kept unless ``overwrite``."""
        path = os.fspath(path)
        if os.path.exists(path) and not overwrite:
            raise FitError(f"'path': {path} exists; pass overwrite=True to replace it")
        doc = {"format": "pbsens-fit-1", "parameter_ids": self.parameter_ids, "info": self.info,
               "starts": [asdict(s) for s in self.starts]}
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path):
        """Read a fit written by :meth:`save` (or ``pbsens fit``'s ``fit.json``)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "fit.json")
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise FitError(f"'path': cannot read {path} ({exc.strerror})") from None
        except ValueError as exc:
            raise FitError(f"'path': {path} is not JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != "pbsens-fit-1":
            raise FitError(f"'path': {path} is not a pbsens fit (no format 'pbsens-fit-1')")
        try:
            starts = [StartResult(**s) for s in doc["starts"]]
        except (KeyError, TypeError) as exc:
            raise FitError(f"'path': {path}: a start record is damaged ({exc})") from None
        return cls(starts, doc["parameter_ids"], doc.get("info"))


def _nan_last(v):
    return v if math.isfinite(v) else math.inf
