"""Writing a sampling run: netCDF, convergence summary table, trace / rank / pair plots."""
from __future__ import annotations

import json
import os
import warnings

import numpy as np

from ..errors import PbsensError

__all__ = ["summary", "write_sample_output", "prepare_out_dir", "check_out_dir"]

#: The files :func:`write_sample_output` writes (the plots only with ``plots=True``).
OUTPUT_FILES = ("posterior.nc", "summary.tsv", "trace.png", "rank.png", "pair.png")


def summary(idata):
    """``arviz.summary`` (mean, sd, HDI, MCSE, bulk/tail ESS, R-hat) plus ESS per second.

    ``ess_bulk_per_s`` / ``ess_tail_per_s`` divide by the chains' summed sampling
    seconds (``attrs["sampling_seconds"]``, CPU-seconds of sampling: it does not
    depend on how many chains ran at once).
    """
    import arviz
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = arviz.summary(idata, var_names=json.loads(idata.posterior.attrs["parameter_ids"]))
    secs = float(idata.posterior.attrs.get("sampling_seconds", np.nan))
    df["ess_bulk_per_s"] = df["ess_bulk"] / secs
    df["ess_tail_per_s"] = df["ess_tail"] / secs
    return df


def check_out_dir(out, force=False, option="--out"):
    """Whether ``out`` can receive the outputs, without creating anything (check before sampling).

    Raises :class:`PbsensError` naming ``option`` and the path when ``out`` is a file, a
    non-empty directory without ``force``, or cannot be created (its nearest existing
    ancestor is not a writable directory). Returns ``out`` as a string.
    """
    out = os.fspath(out)
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise PbsensError(f"'{option}': {out!r} exists and is not a directory")
        if os.listdir(out) and not force:
            raise PbsensError(f"'{option}': {out!r} exists and is not empty; use --force to overwrite it")
        return out
    parent = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise PbsensError(f"'{option}': cannot create {out!r} ({parent!r} is not a writable directory)")
    return out


def prepare_out_dir(out, force=False):
    """Create ``out`` after :func:`check_out_dir` (an existing non-empty directory needs ``force``)."""
    out = check_out_dir(out, force)
    os.makedirs(out, exist_ok=True)
    return out


def write_sample_output(idata, out, force=False, plots=True):
    """Write ``posterior.nc``, ``summary.tsv`` and ``trace.png``, ``rank.png``, ``pair.png`` into ``out``.

    ``out`` is created here; an existing non-empty one needs ``force``. An earlier run's
    outputs in ``out`` (:data:`OUTPUT_FILES`) are removed first, those this run does not
    write too (the plots with ``plots=False``), so that the folder describes one run.
    Returns ``{name: path}``.
    """
    import arviz
    out = prepare_out_dir(out, force)
    paths = {"netcdf": os.path.join(out, "posterior.nc"), "summary": os.path.join(out, "summary.tsv")}
    for name in OUTPUT_FILES:             # an earlier run's, rewritten or (plots=False) left out
        if os.path.isfile(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    idata.to_netcdf(paths["netcdf"])
    summary(idata).to_csv(paths["summary"], sep="\t", float_format="%.6g")
    if plots:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ids = json.loads(idata.posterior.attrs["parameter_ids"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, fn in (("trace", arviz.plot_trace), ("rank", arviz.plot_rank)):
                axes = fn(idata, var_names=ids, compact=False) if name == "trace" else fn(idata, var_names=ids)
                fig = np.asarray(axes).flat[0].figure
                fig.tight_layout()
                paths[name] = os.path.join(out, f"{name}.png")
                fig.savefig(paths[name], dpi=80)
                plt.close(fig)
            show = ids[:8]
            axes = arviz.plot_pair(idata, var_names=show, kind="scatter", marginals=True,
                                   scatter_kwargs={"alpha": 0.3, "s": 8},
                                   figsize=(2.0 * len(show), 2.0 * len(show)))
            fig = np.asarray(axes).flat[0].figure
            for ax in fig.axes:
                ax.xaxis.label.set_fontsize(8)
                ax.yaxis.label.set_fontsize(8)
                ax.tick_params(labelsize=7)
            fig.tight_layout()
            paths["pair"] = os.path.join(out, "pair.png")
            fig.savefig(paths["pair"], dpi=70)
            plt.close(fig)
    return paths
