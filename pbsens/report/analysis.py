"""Reading a :class:`~pbsens.sensitivity.result.SensitivityResult`: normalised sensitivities,
parameter rankings and identifiability from the Fisher information.

Everything here is plain NumPy on the result's arrays; nothing is recomputed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PbsensError
from ..sensitivity.result import SensitivityResult

__all__ = ["normalized_sensitivities", "rank_parameters", "identifiability", "Identifiability"]


# --------------------------------------------------------------------------- helpers
def _check_result(r, name="r"):
    if not isinstance(r, SensitivityResult):
        raise PbsensError(f"{name!r} must be a SensitivityResult, got {type(r).__name__}")
    return r


def _param_values(r, p):
    """Values of the parameters of ``r.S``'s columns (``p`` overrides ``r.p``)."""
    n = r.S.shape[2]
    vals = r.p if p is None else p
    try:
        vals = np.asarray(vals, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"'p' must be an array of {n} numbers, got {p!r}") from None
    if vals.size != n:
        if p is None:
            raise PbsensError(f"the result has {n} sensitivity columns but {vals.size} parameter values "
                              f"(a forward result for a subset of parameters?); pass 'p' with the {n} values "
                              f"of {r.param_names}")
        raise PbsensError(f"'p' must have {n} values (one per column of S), got {vals.size}")
    if not np.all(np.isfinite(vals)):
        raise PbsensError("'p' contains NaN or inf")
    return vals


def _state_indices(r, state):
    """Indices of ``state``: None (all), a name or index, or a list of them."""
    nx = r.S.shape[1]
    if state is None:
        return np.arange(nx)
    items = [state] if isinstance(state, (str, int, np.integer)) else list(state)
    if not items:
        raise PbsensError("'state' is empty: name at least one state (or pass None for all)")
    idx = []
    for s in items:
        if isinstance(s, str):
            if s not in r.state_names:
                raise PbsensError(f"'state': the result has no state {s!r} (states: {', '.join(r.state_names)})")
            idx.append(r.state_names.index(s))
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            if not -nx <= s < nx:
                raise PbsensError(f"'state': index {s} out of range for {nx} states")
            idx.append(int(s) % nx)
        else:
            raise PbsensError(f"'state' must be a state name or index (or a list of them), got {s!r}")
    return np.array(idx, dtype=np.int64)


def _names(r, kind, n):
    names = list(getattr(r, kind)) if r is not None else []
    return names if len(names) == n else [f"{kind[0]}{i}" for i in range(n)]


# --------------------------------------------------------------------------- normalised sensitivities
def normalized_sensitivities(r, p=None, x_tol=0.0):
    """Normalised (logarithmic) sensitivities ``(p_j / x_i) S_ij = d ln x_i / d ln p_j``.

    Parameters
    ----------
    r : SensitivityResult
    p : array_like (np,), optional
        Values of the parameters of ``r.S``'s columns; default ``r.p``. Needed
        when ``r`` holds only a subset of the model's parameters (a forward result
        with ``params=...``).
    x_tol : float
        Entries where ``|x_i(t_k)| <= x_tol`` are masked (default 0: only states
        that are exactly zero, where the ratio is undefined).

    Returns
    -------
    numpy.ma.MaskedArray (K, nx, np)
        Masked where the state is (near) zero. The underlying data hold 0 there,
        never NaN or inf.

    Raises
    ------
    PbsensError
        ``r`` is not a result, or ``p`` does not match the columns of ``S``.
    """
    _check_result(r)
    pv = _param_values(r, p)
    if not (np.isfinite(x_tol) and x_tol >= 0):
        raise PbsensError(f"'x_tol' must be a non-negative number, got {x_tol!r}")
    x = np.asarray(r.x, dtype=np.float64)
    small = ~(np.abs(x) > x_tol)  # also catches NaN in x
    safe_x = np.where(small, 1.0, x)
    data = r.S * pv[None, None, :] / safe_x[:, :, None]
    mask = np.broadcast_to(small[:, :, None], data.shape) | ~np.isfinite(data)
    data = np.where(mask, 0.0, data)
    return np.ma.MaskedArray(data, mask=mask.copy())


def rank_parameters(r, state=None, normalized=True, p=None):
    """Rank parameters by their influence on one state, several states, or all of them.

    The score of parameter ``j`` is the root mean square over time (and over the
    chosen states) of its sensitivity: normalised ``(p_j / x_i) S_ij`` by default,
    the raw ``S_ij`` with ``normalized=False``. Entries where a state is zero
    (normalised sensitivity undefined) are left out of the mean.

    Parameters
    ----------
    r : SensitivityResult
    state : str or int or list of them, optional
        State name(s) or index(es); default all states.
    normalized : bool
        Rank by normalised (logarithmic) sensitivities (default), which compare
        parameters of different units; else by ``S`` itself.
    p : array_like, optional
        Parameter values for the normalisation (see :func:`normalized_sensitivities`).

    Returns
    -------
    list of (str, float)
        ``(parameter name, score)``, most influential first; ties keep the
        parameters' order.

    Raises
    ------
    PbsensError
        Unknown state, or (normalised) the chosen states are zero at every time.

    Examples
    --------
    >>> rank_parameters(r, state="x1")[:3]          # doctest: +SKIP
    [('p2', 1.73), ('p1', 0.41)]
    """
    _check_result(r)
    idx = _state_indices(r, state)
    if normalized:
        V = normalized_sensitivities(r, p=p)[:, idx, :]
        count = V.count(axis=(0, 1))
        if np.all(count == 0):
            names = [r.state_names[i] if i < len(r.state_names) else str(i) for i in idx]
            raise PbsensError(f"'state': {', '.join(names)} is zero at every output time, so normalised "
                              "sensitivities are undefined; use normalized=False")
        sq = (V.filled(0.0) ** 2).sum(axis=(0, 1))
        score = np.sqrt(sq / np.maximum(count, 1))
    else:
        V = np.asarray(r.S)[:, idx, :]
        score = np.sqrt(np.mean(V ** 2, axis=(0, 1)))
    order = np.argsort(-score, kind="stable")
    names = _names(r, "param_names", r.S.shape[2])
    return [(names[j], float(score[j])) for j in order]


# --------------------------------------------------------------------------- identifiability
@dataclass
class Identifiability:
    """Local identifiability of the parameters from a Fisher information matrix.

    Attributes
    ----------
    param_names : list of str
    fisher : ndarray (np, np)
        The Fisher information matrix analysed.
    eigenvalues : ndarray (np,)
        Eigenvalues of ``fisher``, ascending (rounding noise below zero clipped to 0).
    eigenvectors : ndarray (np, np)
        Column ``k`` belongs to ``eigenvalues[k]``.
    rank : int
        Number of eigenvalues above ``tol * max(eigenvalues)``.
    condition_number : float
        ``max / min`` eigenvalue; ``inf`` when the smallest is zero.
    tol : float
        Relative eigenvalue threshold used for ``rank``.
    weak_directions : list of (float, dict)
        The eigen-directions of the smallest eigenvalues, each ``(eigenvalue,
        {parameter name: component})``: parameter combinations the data barely
        constrain. All directions below ``tol``, at least one.
    parallel_pairs : list of (str, str, float)
        Pairs of parameters whose (noise-weighted) sensitivity columns have
        ``|cosine| > cos_tol``: their effects cannot be told apart.
    insensitive : list of str
        Parameters whose sensitivity column is zero (``F_jj = 0``).
    cos_tol : float
    """

    param_names: list
    fisher: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    rank: int
    condition_number: float
    tol: float
    weak_directions: list = field(default_factory=list)
    parallel_pairs: list = field(default_factory=list)
    insensitive: list = field(default_factory=list)
    cos_tol: float = 0.99

    @property
    def n_params(self) -> int:
        """Number of parameters."""
        return len(self.param_names)

    @property
    def identifiable(self) -> bool:
        """True when the Fisher information has full rank."""
        return self.rank == self.n_params

    def __str__(self):
        n = self.n_params
        lines = [f"Fisher information of {n} parameters: rank {self.rank}/{n} "
                 f"({'full' if self.identifiable else 'deficient'}; relative tol {self.tol:.1e}), "
                 f"condition number {self.condition_number:.3g}"]
        lines.append(f"eigenvalues: {self.eigenvalues.min():.3g} .. {self.eigenvalues.max():.3g}")
        if self.insensitive:
            lines.append(f"no influence (zero sensitivity): {', '.join(self.insensitive)}")
        if self.parallel_pairs:
            lines.append(f"nearly parallel sensitivity columns (|cos| > {self.cos_tol}):")
            for a, b, c in self.parallel_pairs:
                lines.append(f"  {a} ~ {b}  (cos {c:+.6f})")
        else:
            lines.append(f"no nearly parallel sensitivity columns (|cos| > {self.cos_tol})")
        lines.append("weakest directions (eigenvalue: largest components):")
        shown = 5
        for lam, vec in self.weak_directions[:shown]:
            comps = sorted(vec.items(), key=lambda kv: -abs(kv[1]))[:4]
            terms = " ".join(f"{v:+.3f}*{k}" for k, v in comps if abs(v) >= 1e-3)
            lines.append(f"  {lam:.3g}: {terms}")
        if len(self.weak_directions) > shown:
            lines.append(f"  ... and {len(self.weak_directions) - shown} more (see .weak_directions)")
        return "\n".join(lines)


def identifiability(F, sigma=1.0, tol=None, cos_tol=0.99, param_names=None):
    """Rank, conditioning, weak directions and confounded parameter pairs from the Fisher information.

    Parameters
    ----------
    F : ndarray (np, np) or SensitivityResult
        A Fisher information matrix (symmetric positive semi-definite), or a
        result from which it is computed with
        :func:`pbsens.inference.fisher.fisher_information` ``(r, sigma)``.
    sigma : float or array_like (K, nx)
        Measurement noise standard deviations (only used with a result). A
        scalar does not change rank, cosines or condition number.
    tol : float, optional
        Eigenvalues ``<= tol * max eigenvalue`` count as zero. Default
        ``np * 1e3 * machine epsilon``: only numerically singular directions (e.g.
        duplicate parameters). Raise it (e.g. 1e-8) to ask for practical
        identifiability.
    cos_tol : float
        Pairs of parameters whose weighted sensitivity columns have
        ``|cos| > cos_tol`` (default 0.99) are reported. The cosine is
        ``F_ij / sqrt(F_ii F_jj)``, exactly the cosine between the stacked columns
        ``sigma^-1 S[:, :, j]``.
    param_names : list of str, optional
        Names for the rows of ``F`` (default the result's names, or ``p0, p1, ...``).

    Returns
    -------
    Identifiability
        ``print()`` it for a readable report.

    Raises
    ------
    PbsensError
        ``F`` is not square, symmetric and finite, or the arguments are invalid.
    """
    if isinstance(F, SensitivityResult):
        r = F
        try:
            from ..inference.fisher import fisher_information
        except ImportError as exc:
            raise PbsensError("identifiability(r, ...) needs pbsens.inference.fisher.fisher_information, "
                              f"which cannot be imported ({exc}); pass a Fisher matrix instead") from None
        F = fisher_information(r, sigma)
        if param_names is None:
            param_names = list(r.param_names)
    try:
        F = np.array(F, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError("'F' must be a square numeric matrix or a SensitivityResult") from None
    if F.ndim != 2 or F.shape[0] != F.shape[1] or F.shape[0] == 0:
        raise PbsensError(f"'F' must be a non-empty square matrix, got shape {F.shape}")
    if not np.all(np.isfinite(F)):
        raise PbsensError("'F' contains NaN or inf")
    n = F.shape[0]
    scale = np.max(np.abs(F))
    if np.max(np.abs(F - F.T)) > 1e-8 * max(scale, np.finfo(float).tiny):
        raise PbsensError("'F' must be symmetric")
    F = 0.5 * (F + F.T)
    if param_names is None:
        param_names = [f"p{i}" for i in range(n)]
    param_names = [str(s) for s in param_names]
    if len(param_names) != n:
        raise PbsensError(f"'param_names' has {len(param_names)} names for a {n} x {n} matrix")
    if tol is None:
        tol = n * 1e3 * np.finfo(float).eps
    if not (np.isfinite(tol) and tol >= 0):
        raise PbsensError(f"'tol' must be a non-negative number, got {tol!r}")
    if not (np.isfinite(cos_tol) and 0 < cos_tol <= 1):
        raise PbsensError(f"'cos_tol' must be in (0, 1], got {cos_tol!r}")

    lam, V = np.linalg.eigh(F)
    lam_max = float(lam[-1])
    if lam_max < -1e-12 * max(scale, 1.0) or lam[0] < -1e-6 * max(abs(lam_max), np.finfo(float).tiny):
        raise PbsensError(f"'F' is not positive semi-definite (smallest eigenvalue {lam[0]:.3g}, "
                          f"largest {lam_max:.3g})")
    lam = np.maximum(lam, 0.0)
    thresh = tol * lam[-1]
    rank = int(np.sum(lam > thresh)) if lam[-1] > 0 else 0
    cond = float(lam[-1] / lam[0]) if lam[0] > 0 else float("inf")
    n_weak = max(1, n - rank)
    weak = [(float(lam[k]), {param_names[i]: float(V[i, k]) for i in range(n)}) for k in range(min(n_weak, n))]

    d = np.diag(F)
    insensitive = [param_names[i] for i in range(n) if not d[i] > 0]
    pairs = []
    for i in range(n):
        for j in range(i + 1, n):
            if d[i] > 0 and d[j] > 0:
                c = F[i, j] / np.sqrt(d[i] * d[j])
                if abs(c) > cos_tol:
                    pairs.append((param_names[i], param_names[j], float(np.clip(c, -1.0, 1.0))))
    pairs.sort(key=lambda t: -abs(t[2]))
    return Identifiability(param_names=param_names, fisher=F, eigenvalues=lam, eigenvectors=V, rank=rank,
                           condition_number=cond, tol=float(tol), weak_directions=weak,
                           parallel_pairs=pairs, insensitive=insensitive, cos_tol=float(cos_tol))
