"""The PEtab (v1) problem file of the hand-written test problems: one SBML model and the four tables
under their usual names (model.xml, conditions.tsv, measurements.tsv, observables.tsv, parameters.tsv)."""
from pathlib import Path


def write_problem_yaml(folder, name="problem.yaml"):
    """Write ``folder/name`` naming the tables in ``folder``; returns its path."""
    path = Path(folder) / name
    path.write_text("format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [model.xml]\n"
                    "  condition_files: [conditions.tsv]\n  measurement_files: [measurements.tsv]\n"
                    "  observable_files: [observables.tsv]\n")
    return path


def write_one_species_sbml(path, model_id, params, rate, species="X", initial=0.0, level=(3, 2)):
    """Write an SBML model of one species ``species`` (an amount, starting at ``initial``: a number,
    or formula text set by an initial assignment) made by one reaction of kinetic law ``rate``
    (L3 formula text), with the constant parameters ``params`` ({id: value}); returns ``path``."""
    import libsbml
    doc = libsbml.SBMLDocument(*level)
    m = doc.createModel()
    m.setId(model_id)
    c = m.createCompartment()
    c.setId("cell"); c.setSize(1.0); c.setConstant(True)                        # noqa: E702
    s = m.createSpecies()
    s.setId(species); s.setCompartment("cell")                                   # noqa: E702
    s.setInitialAmount(0.0 if isinstance(initial, str) else initial)
    s.setHasOnlySubstanceUnits(True); s.setBoundaryCondition(False); s.setConstant(False)  # noqa: E702
    for pid, value in params.items():
        p = m.createParameter()
        p.setId(pid); p.setValue(value); p.setConstant(True)                    # noqa: E702
    if isinstance(initial, str):
        ia = m.createInitialAssignment()
        ia.setSymbol(species); ia.setMath(libsbml.parseL3Formula(initial))       # noqa: E702
    r = m.createReaction()
    r.setId("make_" + species); r.setReversible(False)                         # noqa: E702
    if level < (3, 2):
        r.setFast(False)
    prod = r.createProduct()
    prod.setSpecies(species); prod.setStoichiometry(1.0); prod.setConstant(True)  # noqa: E702
    r.createKineticLaw().setMath(libsbml.parseL3Formula(rate))
    libsbml.writeSBMLToFile(doc, str(path))
    return path
