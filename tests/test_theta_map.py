"""``pbsens.problems.theta_map.ThetaMap``: both ways (one scatter, products per mapping) against a slow,
obvious loop, with repeated estimated parameters in a row, fixed entries and rows of every mapping."""
import numpy as np
import pytest

from pbsens.problems.theta_map import ThetaMap


def _reference(est, d, dpdth, dim):
    out = np.zeros((d.shape[0], dim))
    for r in range(est.shape[0]):
        for j in range(est.shape[1]):
            k = est[r, j]
            if k >= 0:
                out[r, k] += d[r, j] * dpdth[k]
    return out


@pytest.mark.parametrize("group_entries, kind", [(0, "groups"), (10 ** 9, "scatter")])
def test_both_ways_against_the_loop(group_entries, kind):
    rng = np.random.default_rng(0)
    dim, npar = 7, 9
    mappings = rng.integers(-1, dim, size=(4, npar))
    mappings[0, :3] = 2                        # three model parameters read the same estimated one
    mappings[3] = -1                           # a condition with nothing estimated
    rows = rng.integers(0, 4, size=60)
    est = mappings[rows]
    d = rng.standard_normal((60, npar))
    dpdth = rng.standard_normal(dim)
    tm = ThetaMap(est, dim, group_entries=group_entries)
    assert tm.kind == kind
    want = _reference(est, d, dpdth, dim)
    np.testing.assert_allclose(tm(d, dpdth), want, rtol=1e-14, atol=1e-14)
    assert np.all(tm(d, dpdth)[rows == 3] == 0.0)


def test_the_default_switch():
    est = np.zeros((10, 3), dtype=np.int64)                          # 30 entries, one mapping: a scatter
    assert ThetaMap(est, 1).kind == "scatter"
    assert ThetaMap(np.zeros((3000, 3), dtype=np.int64), 1).kind == "groups"    # 9000 entries, one mapping
