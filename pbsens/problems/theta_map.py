"""Derivatives with respect to the model's parameters, per measurement row, mapped to the estimated ones.

A PEtab problem's row ``r`` (a measurement) reads model parameter ``j`` from the estimated parameter
``est[r, j]`` (``< 0``: a fixed value), through ``p = scale(theta)`` with derivative ``dpdth``; a matrix
of derivatives ``d`` (``R x np``, e.g. ``dy/dp`` per row) becomes ``out[r, est[r, j]] += d[r, j]
dpdth[est[r, j]]`` (``R x dim``). The rows of one condition share their mapping.

Two ways, chosen once per problem by the number of estimated entries per distinct mapping: one scatter
over every estimated entry (few rows per mapping), or, per mapping, one product of its rows with an
``np x dim`` matrix (many rows per mapping). Measured (2026-11-28, this machine): Beer_MolBioSystems2014,
27,132 rows x 80 parameters, 38 mappings: 22 ms against the scatter's 139 ms; Bachmann_MSB2011, 541 rows,
49 mappings: the scatter 1.2 ms against 2.7 ms for the products. A scatter costs ~30-65 ns per entry, a
product ~60 us of overhead, hence :data:`GROUP_ENTRIES`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ThetaMap", "GROUP_ENTRIES"]

#: Products per mapping once there are more than this many estimated entries per distinct mapping.
GROUP_ENTRIES = 2000


class ThetaMap:
    """``ThetaMap(est, dim)(d, dpdth)`` -> ``(R, dim)`` (module docstring); ``kind``: ``"scatter"`` or
    ``"groups"``."""

    def __init__(self, est, dim, group_entries=None):
        est = np.asarray(est)
        self.dim = int(dim)
        mask = est >= 0
        patterns, inverse = np.unique(est, axis=0, return_inverse=True)
        limit = GROUP_ENTRIES if group_entries is None else group_entries
        if np.count_nonzero(mask) > limit * patterns.shape[0]:
            inverse = np.asarray(inverse).reshape(-1)
            self.kind = "groups"
            self._groups = []
            for u, pattern in enumerate(patterns):
                j_idx = np.flatnonzero(pattern >= 0)
                if j_idx.size:
                    self._groups.append((np.flatnonzero(inverse == u), j_idx, pattern[j_idx]))
        else:
            self.kind = "scatter"
            r_idx, j_idx = np.nonzero(mask)
            self._scatter = (r_idx, j_idx, est[mask])

    def __call__(self, d, dpdth):
        out = np.zeros((d.shape[0], self.dim))
        if self.kind == "scatter":
            r_idx, j_idx, k_idx = self._scatter
            np.add.at(out, (r_idx, k_idx), d[r_idx, j_idx] * dpdth[k_idx])
            return out
        for rows, j_idx, k_idx in self._groups:
            P = np.zeros((j_idx.size, self.dim))
            P[np.arange(j_idx.size), k_idx] = dpdth[k_idx]
            out[rows] = d[np.ix_(rows, j_idx)] @ P
        return out
