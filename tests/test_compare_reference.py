"""``pbsens compare``'s forward-sensitivity reference: its integrator (Radau by default, not BDF,
which missed its tolerance on a stiff model), the cross-check by a second integrator, bad input."""
import warnings

import numpy as np
import pytest

import pbsens
from pbsens.cli.compare import compare_methods
from pbsens.errors import AccuracyWarning, PbsensError


@pytest.fixture(scope="module")
def pka():
    return pbsens.load_model("PKA")


def test_default_reference_is_radau_and_agrees_with_a_tighter_independent_solve(pka):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        c = compare_methods(pka, (0.0, 20.0), t_eval=np.linspace(0.0, 20.0, 11), samples=0, repeats=1)
    ref = c["reference"]
    assert ref["solver"] == "Radau" and ref["check"]["solver"] == "rodas5p"
    assert ref["check"]["E_max"] < 1e-7
    # independent of compare's own check: a tighter Rodas5P forward solve at the same times
    tight = pbsens.forward_sensitivities(pka, (0.0, 20.0), t_eval=c["ref"].t, p=c["ref"].p, method="rodas5p",
                                         rtol=1e-12, atol=1e-14)
    d = np.linalg.norm((c["ref"].S - tight.S)[1:].reshape(10, -1), axis=1)
    assert np.max(d / np.linalg.norm(tight.S[1:].reshape(10, -1), axis=1)) < 1e-7


def test_loose_references_warn_that_they_disagree(pka):
    with pytest.warns(AccuracyWarning, match="differ by up to"):
        c = compare_methods(pka, (0.0, 20.0), t_eval=np.linspace(0.0, 20.0, 11), samples=0, repeats=1,
                            ref_rtol=1e-3, ref_atol=1e-4)
    assert c["reference"]["check"]["E_max"] > 1e-6


def test_no_check_and_bdf_on_request(pka):
    c = compare_methods(pka, (0.0, 5.0), t_eval=np.linspace(0.0, 5.0, 6), samples=0, repeats=1,
                        ref_method="BDF", ref_check=None)
    assert c["reference"]["solver"] == "BDF" and c["reference"]["check"] is None


@pytest.mark.parametrize("kw, name", [(dict(ref_method="LSODA"), "ref_method"),
                                      (dict(ref_check="Radau"), "ref_check"),
                                      (dict(ref_check="RK45"), "ref_check")])
def test_bad_reference_methods_name_the_argument(pka, kw, name):
    with pytest.raises(PbsensError, match=name):
        compare_methods(pka, (0.0, 5.0), samples=0, repeats=1, **kw)
