"""PEtab 2.0 problems (pbsens.problems.petab_v2): a v1 problem upgraded by the petab library's own
converter (petab.v2.petab1to2) gives the same llh and gradient (v2 has no parameterScale: the v2
gradient is on the linear scale, so it is compared through dp/dtheta)."""
from pathlib import Path

import numpy as np
import pytest

import pbsens
import pbsens.petab

DATA = Path(__file__).parent / "data" / "petab"
petab1to2 = pytest.importorskip("petab.v2.petab1to2").petab1to2


def _both(name, tmp_path):
    v1 = DATA / name / f"{name}.yaml"
    out = tmp_path / "v2"
    petab1to2(str(v1), str(out))
    return pbsens.petab.load(v1), pbsens.petab.load(out / f"{name}.yaml"), out


@pytest.mark.parametrize("name", ["Boehm_JProteomeRes2014", "Brannmark_JBC2010"])
def test_upgraded_problem_gives_the_same_llh_and_gradient(name, tmp_path):
    a, b, _ = _both(name, tmp_path)
    assert a.parameter_ids == b.parameter_ids and len(a.conditions) == len(b.conditions)
    assert set(a.scales) == {"log10"} and set(b.scales) == {"lin"}
    th = a.nominal_theta()
    ra, rb = a.evaluate(th), b.evaluate(10.0**th)
    assert rb.llh == pytest.approx(ra.llh, rel=1e-12, abs=1e-9)
    g = rb.gradient * np.log(10.0) * 10.0**th
    assert np.abs(g - ra.gradient).max() <= 1e-9 * np.abs(ra.gradient).max()


def test_unsupported_noise_distribution_names_file_row_column(tmp_path):
    _, _, out = _both("Boehm_JProteomeRes2014", tmp_path)
    f = out / "observables_Boehm_JProteomeRes2014.tsv"
    lines = f.read_text().splitlines()
    head = lines[0].split("\t")
    row = lines[2].split("\t")
    row[head.index("noiseDistribution")] = "cauchy"
    lines[2] = "\t".join(row)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(pbsens.PbsensError) as exc:
        pbsens.petab.load(out / "Boehm_JProteomeRes2014.yaml")
    assert "observables_Boehm_JProteomeRes2014.tsv" in str(exc.value)


def test_cli_petab_reads_v2(tmp_path, capsys, monkeypatch):
    from pbsens.cli.main import main
    _, _, out = _both("Boehm_JProteomeRes2014", tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["petab", str(out / "Boehm_JProteomeRes2014.yaml")])
    assert code in (0, None)
    assert "-138.22" in capsys.readouterr().out
