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
