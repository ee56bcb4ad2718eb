"""Which parameters sensitivities are for: the ``params`` argument of forward sensitivities and likelihoods."""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError

__all__ = ["select_params"]


def select_params(model, params, *, allow_single=True):
    """Model indices and names of the sensitivity parameters.

    Parameters
    ----------
    model : Model
    params : None, sequence of str or int, or (with ``allow_single``) one str or int
        Parameter names or indices in the order wanted; ``None``: all, in model order.
    allow_single : bool
        Accept a single name or index as a one-element list.

    Returns
    -------
    (ndarray of int64, list of str)

    Raises
    ------
    PbsensError
        Not a list, empty, an unknown name or index, or a parameter named twice;
        the message names ``'params'``.
    """
    if params is None:
        idx = np.arange(model.n_params, dtype=np.int64)
        return idx, list(model.param_names)
    if isinstance(params, (str, bytes, int, np.integer)):
        if not allow_single or isinstance(params, bytes):
            raise PbsensError(f"'params' must be a list of parameter names or indices, got {params!r}")
        params = [params]
    try:
        params = list(params)
    except TypeError:
        raise PbsensError(f"'params' must be a list of parameter names or indices, got {params!r}") from None
    if not params:
        raise PbsensError("'params' is empty: name at least one parameter (or pass None for all)")
    try:
        idx = model.param_index(params)
    except PbsensError as exc:
        raise PbsensError(f"'params': {exc}") from None
    if np.unique(idx).size != idx.size:
        raise PbsensError(f"'params' names a parameter twice: {params!r}")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return idx, [model.param_names[i] for i in idx]
