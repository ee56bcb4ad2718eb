"""Read a model written as a folder of SBtab tables (one TSV file per table).

:func:`read_sbtab` accepts two layouts of each table:

* **standard SBtab**: a first line ``!!SBtab ... TableName='Reaction'
  TableType='Reaction' ...`` followed by a header row of ``!``-prefixed column
  names (``!ID``, ``!KineticLaw``, ``!ReactionFormula``, ``!InitialValue``...);
  a header row of ``!`` names without the ``!!SBtab`` line is accepted too;
* **simplified**: a plain header row whose first cell is ``id`` (or ``name``),
  or no header at all, in which case the columns are positional (below).

The kind of a table comes from ``TableName`` (which names the table in the
SBtabVFGEN convention, where e.g. Expression tables have
``TableType='Quantity'``), else ``TableType``, else the file name
(``Compound.tsv``, ``Reactions.tsv``...; case-insensitive, plural allowed).
Files of other kinds (data tables, event tables) are not read; they are listed
in ``meta["sbtab"]["other_tables"]``. Lines starting with ``%`` or ``#`` are
comments. Column names are matched case-insensitively, ignoring the leading
``!`` and any spaces/underscores; missing optional columns are fine.

=============  ====================================================  =============================
table          columns (aliases)                                     positional (headerless)
=============  ====================================================  =============================
Compound       ID, InitialValue (Value, InitialConcentration,        id, value, unit
               DefaultValue), Unit, Scale, IsConstant, Assignment
Parameter      ID, DefaultValue (Value), Scale, Unit                 id, value, scale
Input          ID, DefaultValue (Value), Scale, Unit                 id, value
Constant       ID, Value (DefaultValue), Scale, Unit                 id, value
Reaction       ID, KineticLaw, ReactionFormula, Reactants,           id, kinetic law, formula
               Products, IsReversible                                [, reversible] or id, law,
                                                                     reactants, products
                                                                     [, reversible]
Expression     ID, Formula                                           id, formula
Output         ID, Formula                                           id, formula
Experiments    ID, T0, then one column per input/parameter or        (header required)
               compound (``>name`` or ``!name`` or plain ``name``)
=============  ====================================================  =============================

How the tables map onto a :class:`~pbsens.model.spec.ModelSpec`
----------------------------------------------------------------
* Compounds are the **states** (concentrations; SBtab models here carry no
  volumes: ``Location`` is not used), in table order. ``InitialValue`` is a
  number in the row's ``Scale`` or an expression of parameters/inputs.
  ``IsConstant`` TRUE makes the compound a fixed numeric definition; an
  ``Assignment`` (an expression or an Expression's id; blank/NONE/FALSE/NO for
  none) makes it a definition with that value. Neither kind has an ODE.
* ``d[c]/dt = sum_r (coefficient of c among the products of r - coefficient
  among its reactants) * flux_r``; each flux is a definition named after the
  reaction's id. ``ReactionFormula`` is written ``A + 2 B <=> C`` (arrows
  ``<=>``, ``<->``, ``=>``, ``->``; coefficients as ``2 B``, ``2*B`` or ``2B``; an
  empty side, ``0``, ``∅`` or ``null`` for nothing); or use the ``Reactants`` and
  ``Products`` columns (``A + 2 B``). ``IsReversible`` is informational only (the
  kinetic law gives the flux's sign) and is kept in ``meta["reversible"]``. A
  participant that is not a compound but a known quantity (expression,
  parameter...) is not changed by the reaction; such cases are listed in
  ``meta["boundary_participants"]``.
* Parameters are sensitivity **parameters** with their values converted to
  linear scale (``Scale``: ``log10``/``base-10 logarithm`` -> ``10**v``;
  ``log``/``ln``/``natural logarithm`` -> ``exp(v)``; ``lin``/``linear``/blank ->
  ``v``).
* **Inputs** (known quantities set per experiment) are also spec
  *parameters*, after the Parameter-table ones, so switching experiments only
  changes parameter values (no recompilation) and their sensitivities are
  available; ``meta["inputs"]`` lists them so callers can leave them out.
* Constants are fixed numeric definitions.
* Expressions are definitions (ordered so each uses only earlier ones);
  outputs become ``spec.outputs``.
* Experiments are stored in ``meta["experiments"]`` as ``{id: {"inputs":
  {name: value}, "initial": {compound: value}, "t0": float}}`` (plus
  ``"other"`` for other columns, e.g. ``!Time``, ``!Type``, and free-text
  columns such as ``!Comment``/``comment``/``!Name``, which are ignored in
  every layout); values are linear.
  ``experiment=`` applies one of them to the spec's parameter values and
  initial values and records ``meta["experiment"]`` and ``meta["t0"]``.
* The time variable is ``t`` (``time`` if some table defines ``t``); formulas may
  write either. Formulas use ``^`` or ``**`` for powers (``^`` is rewritten to
  ``**``, so it binds as in mathematics).
* Formulas refer to quantities by ``!ID`` (``!Name``, ``!Description``,
  ``!Location`` and other columns are not used).
* IDs must be identifiers; an ID that is a Python keyword, a function name of
  the expression dialect (when not called) or ``pi`` is renamed with a trailing
  ``_`` in every formula, and ``meta["sbtab_names"]`` maps old -> new.
"""
from __future__ import annotations

import ast
import csv
import keyword
import math
import os
import re

from ..errors import ModelError
from .dialect import DIALECT_FUNCTIONS, eval_numeric, flux_sum, flux_term, fresh_name, number_text
from .sbml.rules import toposort
from .spec import Definition, ModelSpec, Quantity

__all__ = ["read_sbtab"]

_KINDS = {
    "compound": ("compound", "compounds", "species"),
    "parameter": ("parameter", "parameters"),
    "input": ("input", "inputs"),
    "constant": ("constant", "constants"),
    "reaction": ("reaction", "reactions"),
    "expression": ("expression", "expressions", "definition", "definitions"),
    "output": ("output", "outputs", "observable", "observables"),
    "experiments": ("experiments", "experiment"),
}
_KIND_OF = {alias: kind for kind, aliases in _KINDS.items() for alias in aliases}

_VALUE = ("initialvalue", "value", "defaultvalue", "initialconcentration", "initialamount", "initial",
          "concentration")
_PVALUE = ("defaultvalue", "value", "initialvalue")
_COLUMNS = {
    "compound": {"id": ("id",), "value": _VALUE, "unit": ("unit",), "scale": ("scale",),
                 "isconstant": ("isconstant", "constant"), "assignment": ("assignment",)},
    "parameter": {"id": ("id",), "value": _PVALUE, "unit": ("unit",), "scale": ("scale",)},
    "input": {"id": ("id",), "value": _PVALUE, "unit": ("unit",), "scale": ("scale",)},
    "constant": {"id": ("id",), "value": _PVALUE, "unit": ("unit",), "scale": ("scale",)},
    "reaction": {"id": ("id",), "kineticlaw": ("kineticlaw", "ratelaw", "rate", "flux"),
                 "formula": ("reactionformula", "formula", "equation"),
                 "reactants": ("reactants", "substrates", "educts"), "products": ("products",),
                 "reversible": ("isreversible", "reversible", "reversibility")},
    "expression": {"id": ("id",), "formula": ("formula", "expression", "definition"), "unit": ("unit",)},
    "output": {"id": ("id",), "formula": ("formula", "expression", "observable"), "unit": ("unit",)},
    "experiments": {"id": ("id",), "t0": ("t0", "initialtime", "starttime")},
}
_POSITIONAL = {
    "compound": ("id", "value", "unit"), "parameter": ("id", "value", "scale"),
    "input": ("id", "value"), "constant": ("id", "value"),
    "expression": ("id", "formula"), "output": ("id", "formula"),
    "reaction": ("id", "kineticlaw"),     # then formula or reactants, products (see _stoichiometry)
}
_SCALES = {
    "": "lin", "lin": "lin", "linear": "lin", "none": "lin",
    "log10": "log10", "base-10 logarithm": "log10", "base10 logarithm": "log10", "decadic logarithm": "log10",
    "log": "ln", "ln": "ln", "natural logarithm": "ln", "natural log": "ln", "loge": "ln",
}
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0", ""}
_NO_ASSIGNMENT = {"", "none", "false", "no", "na", "-"}
_EMPTY_SIDE = {"", "0", "∅", "ø", "null", "nothing", "none", "[]"}
#: Free-text columns of an Experiments table, ignored in every layout (normalised names).
_FREE_TEXT = {"comment", "comments", "name", "description", "notes", "note", "remark", "remarks", "reference",
              "references", "source", "datasource", "figure"}
_ARROW = re.compile(r"<=>|<->|<==>|=>|->|-->|→|⇌")
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")


def _norm(col: str) -> str:
    return re.sub(r"[\s_]", "", col.strip().lstrip("!>").lower())


class _Table:
    """One TSV table: kind, file, header (None when positional) and numbered rows."""

    def __init__(self, kind, path, header, rows, standard, header_line=0):
        self.kind = kind
        self.header_line = header_line
        self.path = path
        self.file = os.path.basename(path)
        self.header = header
        self.rows = rows            # [(line number, [cells])]
        self.standard = standard
        self.index = {}
        if header is not None:
            for i, h in enumerate(header):
                self.index.setdefault(_norm(h), i)

    def where(self, line, column=None):
        col = f", column {column!r}" if column else ""
        return f"SBtab table {self.file!r}, line {line}{col}"

    def error(self, line, column, msg):
        return ModelError(f"{self.where(line, column)}: {msg}")

    def column(self, key):
        """(index, label) of a logical column, or None when the table lacks it."""
        if self.header is None:
            pos = _POSITIONAL.get(self.kind, ())
            return (pos.index(key), key) if key in pos else None
        for alias in _COLUMNS[self.kind].get(key, (key,)):
            i = self.index.get(alias)
            if i is not None:
                return i, self.header[i]
        return None

    def get(self, cells, key):
        """(stripped cell text or '', column label or key)."""
        c = self.column(key)
        if c is None or c[0] >= len(cells):
            return "", (c[1] if c else key)
        return cells[c[0]].strip(), c[1]


def read_sbtab_rows(path):
    """``(attrs, rows)`` of one SBtab TSV file (model tables here, the estimation
    tables of :mod:`pbsens.problems.sbtab_problem`).

    ``attrs``: the ``key='value'`` pairs of the ``!!`` declaration row (keys in
    lower case), None without one; ``rows``: the other rows as ``(line number,
    stripped cells)``, blank rows and comment rows (``%``, ``#``) left out.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            raw = list(csv.reader(fh, delimiter="\t"))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ModelError(f"cannot read SBtab table {path!r}: {exc}") from None
    lines = [(i + 1, [c.strip() for c in row]) for i, row in enumerate(raw)]
    lines = [(n, r) for n, r in lines if any(r) and not r[0].startswith(("%", "#"))]
    if lines and lines[0][1][0].startswith("!!"):
        pairs = re.findall(r"(\w+)\s*=\s*['\"]([^'\"]*)['\"]", " ".join(lines[0][1]))
        return {k.lower(): v for k, v in pairs}, lines[1:]
    return None, lines


def _read_table(path):
    """Parse one file into a _Table (kind None when it is not a model table)."""
    attrs, lines = read_sbtab_rows(path)
    stem = os.path.splitext(os.path.basename(path))[0].strip().lower()
    kind = None
    standard = attrs is not None
    if standard:
        for key in ("tablename", "tabletype"):
            kind = _KIND_OF.get(attrs.get(key, "").strip().lower())
            if kind:
                break
    if kind is None:
        kind = _KIND_OF.get(stem)
    if kind is None:
        return _Table(None, path, None, [], standard)
    header, header_line = None, 0
    if lines and (lines[0][1][0].startswith("!") or _norm(lines[0][1][0]) in ("id", "name", "identifier")):
        header_line, header = lines[0]
        lines = lines[1:]
        standard = standard or header[0].startswith("!")
    elif kind == "experiments":
        raise ModelError(f"SBtab table {os.path.basename(path)!r}: an Experiments table needs a header row "
                         f"(e.g. '!ID  !T0  >input1  >compound2')")
    if header is not None and _norm(header[0]) in ("name", "identifier") and "id" not in {_norm(h) for h in header}:
        header = ["id"] + header[1:]
    table = _Table(kind, path, header, lines, standard, header_line)
    if header is not None and table.column("id") is None:
        raise ModelError(f"SBtab table {table.file!r}: the header has no ID column: {header}")
    return table


def number_cell(text, error):
    """The finite number in an SBtab cell; else raise ``error(why)`` (an exception
    for the message ``why``, which quotes ``text``)."""
    try:
        v = float(text)
    except ValueError:
        raise error(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise error(f"{text!r} is not a finite number")
    return v


def _number(text, table, line, column):
    return number_cell(text, lambda why: table.error(line, column, why))


def _scaled(value, scale_text, table, line, column):
    scale = _SCALES.get(scale_text.strip().lower())
    if scale is None:
        raise table.error(line, column, f"unknown scale {scale_text!r} (use linear, log10, or log/ln)")
    if scale == "log10":
        v = 10.0 ** value
    elif scale == "ln":
        v = math.exp(value)
    else:
        v = value
    if not math.isfinite(v):
        raise table.error(line, column, f"value {value} in scale {scale_text!r} overflows")
    return v


def _truth(text, table, line, column):
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise table.error(line, column, f"{text!r} is not a boolean (TRUE/FALSE)")


def read_sbtab(folder, experiment=None) -> ModelSpec:
    """Read a folder of SBtab TSV tables into a validated ModelSpec.

    See the module docstring for the tables, their columns and how they map
    onto the spec.

    Parameters
    ----------
    folder : str or os.PathLike
        Directory holding the ``.tsv`` (or ``.tab``) files, one table each.
    experiment : str, optional
        Id of a row of the Experiments table whose input values and initial
        values are applied to the spec (``meta["experiment"]``/``meta["t0"]``
        record it). Default: the tables' own values.

    Returns
    -------
    ModelSpec
        Validated; ``meta["sbtab"]`` records the folder and which file holds each table.

    Raises
    ------
    ModelError
        Missing folder or Compound table, unreadable or malformed tables; the
        message names the file, line and column (unknown species in a reaction,
        non-numeric value, unknown name in a formula, duplicate ids...), or an
        unknown ``experiment``.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ModelError(f"SBtab folder {folder!r} does not exist or is not a directory")
    files = sorted(f for f in os.listdir(folder) if f.lower().endswith((".tsv", ".tab")))
    tables, other = {}, []
    for f in files:
        t = _read_table(os.path.join(folder, f))
        if t.kind is None:
            other.append(f)
            continue
        if t.kind in tables:
            raise ModelError(f"SBtab folder {folder!r}: two {t.kind} tables, {tables[t.kind].file!r} and {f!r}")
        tables[t.kind] = t
    if "compound" not in tables:
        raise ModelError(f"SBtab folder {folder!r} has no Compound table (Compound.tsv or a table with "
                         f"TableType='Compound'); found: {', '.join(files) or 'no .tsv files'}")
    return _Builder(folder, tables, other).build(experiment)


class _Builder:
    def __init__(self, folder, tables, other):
        self.folder = folder
        self.tables = tables
        self.other = other
        self.src = f"SBtab folder {folder!r}"

    # ------------------------------------------------------------ ids
    def _rows(self, kind):
        t = self.tables.get(kind)
        return [] if t is None else [(t, n, cells) for n, cells in t.rows]

    def _collect_ids(self):
        self.defined = {}      # id -> (kind, table, line)
        for kind in ("compound", "parameter", "input", "constant", "expression", "reaction", "output"):
            for t, n, cells in self._rows(kind):
                ident, col = t.get(cells, "id")
                if not ident:
                    raise t.error(n, col, "empty ID")
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
                    raise t.error(n, col, f"ID {ident!r} is not a valid identifier (letters, digits, _; "
                                          f"not starting with a digit)")
                if ident in ("and", "or", "not", "if", "else", "True", "False", "None"):
                    raise t.error(n, col, f"ID {ident!r} is a reserved word of the formula syntax; rename it")
                if ident in self.defined:
                    k2, t2, n2 = self.defined[ident]
                    raise t.error(n, col, f"ID {ident!r} is already defined in {t2.file!r}, line {n2}")
                self.defined[ident] = (kind, t, n)
        self.time = "t" if "t" not in self.defined else ("time" if "time" not in self.defined else "t_")
        renames, call_renames = {}, {}
        for ident in self.defined:
            if keyword.iskeyword(ident) or ident == "pi":
                renames[ident] = self._fresh(ident)
            elif ident in DIALECT_FUNCTIONS:
                call_renames[ident] = self._fresh(ident)
        for alias in ("t", "time"):
            if alias not in self.defined and alias != self.time:
                renames[alias] = self.time
        self.renames, self.call_renames = renames, call_renames
        self.name = {i: renames.get(i, call_renames.get(i, i)) for i in self.defined}

    def _fresh(self, ident):
        return fresh_name(ident + "_", self.defined)

    def _rewrite(self, text):
        """Apply renames to a formula and turn ``^`` into ``**``."""
        text = text.replace("^", "**")

        def repl(m):
            name = m.group(1)
            if name in self.renames:
                return self.renames[name]
            if name in self.call_renames:
                rest = text[m.end():].lstrip()
                if not rest.startswith("("):
                    return self.call_renames[name]
            return name

        return _IDENT.sub(repl, text)

    def _formula(self, text, table, line, column, allowed=None):
        """Checked, rewritten formula; names must be known (or in ``allowed``)."""
        if not text:
            raise table.error(line, column, "empty formula")
        expr = self._rewrite(text)
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError as exc:
            raise table.error(line, column, f"cannot parse formula {text!r}: {exc.msg}") from None
        known = set(self.name.values()) | {self.time} if allowed is None else set(allowed)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in DIALECT_FUNCTIONS:
                    fn = getattr(node.func, "id", ast.dump(node.func))
                    raise table.error(line, column, f"unknown function {fn!r} in {text!r}; allowed: "
                                                    f"{', '.join(sorted(DIALECT_FUNCTIONS))}")
            elif isinstance(node, ast.Name):
                if node.id not in known and node.id != "pi" and node.id not in DIALECT_FUNCTIONS:
                    what = "unknown name" if allowed is None else "name not allowed here"
                    raise table.error(line, column, f"{what} {node.id!r} in {text!r}")
            elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
                                       ast.Constant, ast.Load, ast.operator, ast.unaryop, ast.boolop,
                                       ast.cmpop)):
                raise table.error(line, column, f"{type(node).__name__} is not allowed in {text!r}")
        return expr

    # ------------------------------------------------------------ build
    def build(self, experiment):
        self._collect_ids()
        name = self.name
        meta = {"sbtab": {"folder": self.folder,
                          "tables": {k: t.file for k, t in self.tables.items()}}}
        if self.other:
            meta["sbtab"]["other_tables"] = list(self.other)
        units = {}

        def unit(t, n, cells, ident):
            u, _ = t.get(cells, "unit")
            if u:
                units[name[ident]] = u

        # parameters and inputs
        params, inputs = [], []
        for kind, dest in (("parameter", params), ("input", inputs)):
            for t, n, cells in self._rows(kind):
                ident, _ = t.get(cells, "id")
                raw, col = t.get(cells, "value")
                if not raw:
                    raise t.error(n, col, f"{kind} {ident!r} has no value")
                scale, scol = t.get(cells, "scale")
                v = _scaled(_number(raw, t, n, col), scale, t, n, scol)
                dest.append(Quantity(name[ident], v))
                unit(t, n, cells, ident)
        pnames = [q.name for q in params + inputs]

        defs = []         # (name, expression, origin)
        for t, n, cells in self._rows("constant"):
            ident, _ = t.get(cells, "id")
            raw, col = t.get(cells, "value")
            scale, scol = t.get(cells, "scale")
            v = _scaled(_number(raw, t, n, col), scale, t, n, scol)
            defs.append((name[ident], number_text(v), ident))
            unit(t, n, cells, ident)

        # compounds
        states, constant_compounds, assigned = [], set(), set()
        for t, n, cells in self._rows("compound"):
            ident, _ = t.get(cells, "id")
            nm = name[ident]
            unit(t, n, cells, ident)
            assignment, acol = t.get(cells, "assignment")
            if assignment.lower() not in _NO_ASSIGNMENT:
                defs.append((nm, self._formula(assignment, t, n, acol), ident))
                assigned.add(nm)
                continue
            raw, col = t.get(cells, "value")
            if not raw:
                raise t.error(n, col, f"compound {ident!r} has no initial value")
            try:
                v = float(raw)
            except ValueError:
                v = None
            if v is not None:
                scale, scol = t.get(cells, "scale")
                value = _scaled(_number(raw, t, n, col), scale, t, n, scol)
            else:
                value = self._formula(raw, t, n, col, allowed=pnames)
                num = eval_numeric(value)
                value = num if num is not None else value
            const, ccol = t.get(cells, "isconstant")
            if const and _truth(const, t, n, ccol):
                if isinstance(value, str):
                    defs.append((nm, value, ident))
                else:
                    defs.append((nm, number_text(value), ident))
                constant_compounds.add(nm)
            else:
                states.append(Quantity(nm, value))
        if not states:
            raise ModelError(f"{self.src}: the Compound table {self.tables['compound'].file!r} has no "
                             f"compound that changes (all are constant or assigned)")
        state_names = {s.name for s in states}

        for t, n, cells in self._rows("expression"):
            ident, _ = t.get(cells, "id")
            text, col = t.get(cells, "formula")
            defs.append((name[ident], self._formula(text, t, n, col), ident))
            unit(t, n, cells, ident)

        # reactions
        coefs = {s: [] for s in state_names}      # state -> [(reaction name, coefficient)]
        reversible, boundary = {}, {}
        for t, n, cells in self._rows("reaction"):
            ident, _ = t.get(cells, "id")
            rname = name[ident]
            law, lcol = t.get(cells, "kineticlaw")
            defs.append((rname, self._formula(law, t, n, lcol), ident))
            net, rev, rcol = self._stoichiometry(t, n, cells, ident)
            for sp, c in net.items():
                nm = name[sp]
                if nm in state_names:
                    if c != 0:
                        coefs[nm].append((rname, c))
                elif nm not in constant_compounds and nm not in assigned:
                    boundary.setdefault(ident, []).append(sp)
            if rev:
                reversible[ident] = _truth(rev, t, n, rcol)
        odes = {s.name: flux_sum(flux_term(c, rname) for rname, c in coefs[s.name]) for s in states}

        outputs = []
        for t, n, cells in self._rows("output"):
            ident, _ = t.get(cells, "id")
            text, col = t.get(cells, "formula")
            outputs.append(Definition(name[ident], self._formula(text, t, n, col)))
            unit(t, n, cells, ident)
        out_names = {o.name for o in outputs}
        for d in defs:
            used = set(re.findall(r"[A-Za-z_]\w*", d[1])) & out_names
            if used:
                raise ModelError(f"{self.src}: {d[2]!r} uses output(s) {', '.join(sorted(used))}; outputs "
                                 f"cannot be used by expressions, kinetic laws or other outputs")
        definitions = toposort(defs, self.src)

        experiments = self._experiments(state_names, constant_compounds, set(pnames))
        renamed = {k: v for k, v in name.items() if k != v}
        meta.update((key, value) for key, value in (
            ("inputs", [q.name for q in inputs]), ("experiments", experiments), ("reversible", reversible),
            ("boundary_participants", boundary), ("units", units), ("sbtab_names", renamed)) if value)

        parameters = params + inputs
        if experiment is not None:
            if experiment not in experiments:
                raise ModelError(f"{self.src}: no experiment {experiment!r}; experiments: "
                                 f"{', '.join(experiments) or 'none (no Experiments table)'}")
            e = experiments[experiment]
            parameters = [Quantity(q.name, e["inputs"].get(q.name, q.value)) for q in parameters]
            states = [Quantity(s.name, e["initial"].get(s.name, s.value)) for s in states]
            definitions = [Definition(d.name, number_text(e["initial"][d.name])) if d.name in e["initial"] else d
                           for d in definitions]
            meta["experiment"] = experiment
            meta["t0"] = e["t0"]
        title = ""
        model_name = os.path.basename(os.path.normpath(self.folder)) or "sbtab_model"
        doc = self._document_name()
        if doc:
            model_name = doc
        if not model_name.isidentifier():
            title = model_name
        spec = ModelSpec(name=model_name, states=states, parameters=parameters, odes=odes,
                         definitions=definitions, outputs=outputs, time=self.time, title=title, meta=meta)
        return spec.validate()

    def _document_name(self):
        for t in self.tables.values():
            try:
                with open(t.path, encoding="utf-8-sig") as fh:
                    first = fh.readline()
            except OSError:  # pragma: no cover - already read once
                continue
            m = re.search(r"Document\s*=\s*['\"]([^'\"]+)['\"]", first)
            if first.startswith("!!") and m:
                return m.group(1).strip()
        return ""

    # ---------------------------------------------------------- stoichiometry
    def _side(self, text, t, n, col, ident):
        """{species id: coefficient} of one side ``A + 2 B``."""
        out = {}
        if text.strip().lower() in _EMPTY_SIDE:
            return out
        for term in text.split("+"):
            term = term.strip()
            if not term:
                raise t.error(n, col, f"empty term in {text!r} of reaction {ident!r}")
            m = re.fullmatch(r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)?\s*\*?\s*([A-Za-z_]\w*)", term)
            if not m:
                raise t.error(n, col, f"cannot read {term!r} in {text!r} of reaction {ident!r} "
                                      f"(write e.g. 'A + 2 B')")
            coef = float(m.group(1)) if m.group(1) else 1.0
            sp = m.group(2)
            if sp not in self.defined:
                raise t.error(n, col, f"unknown species {sp!r} in reaction {ident!r}")
            kind = self.defined[sp][0]
            if kind in ("reaction", "output"):
                raise t.error(n, col, f"{sp!r} in reaction {ident!r} is a {kind}, not a species")
            out[sp] = out.get(sp, 0.0) + coef
        return out

    def _stoichiometry(self, t, n, cells, ident):
        """(net {species id: coefficient}, reversibility text, its column label)."""
        if t.header is None:
            # positional: id, law, formula[, reversible]  or  id, law, reactants, products[, reversible]
            cell = [c.strip() for c in cells] + [""] * 5
            if _ARROW.search(cell[2]):
                formula, fcol, rev = cell[2], "3", cell[3]
                left = right = None
            else:
                formula, fcol = "", "3"
                left, lcol, right, rcol, rev = cell[2], "3", cell[3], "4", cell[4]
            revcol = "4" if formula else "5"
        else:
            formula, fcol = t.get(cells, "formula")
            left, lcol = t.get(cells, "reactants")
            right, rcol = t.get(cells, "products")
            rev, revcol = t.get(cells, "reversible")
        if formula:
            parts = _ARROW.split(formula)
            if len(parts) != 2:
                raise t.error(n, fcol, f"reaction formula {formula!r} of {ident!r} needs exactly one arrow "
                                       f"(<=>, ->, =>)")
            left, right = parts
            lcol = rcol = fcol
        elif not left and not right:
            raise t.error(n, fcol, f"reaction {ident!r} has no ReactionFormula and no Reactants/Products")
        net = {}
        for sp, c in self._side(left, t, n, lcol, ident).items():
            net[sp] = net.get(sp, 0.0) - c
        for sp, c in self._side(right, t, n, rcol, ident).items():
            net[sp] = net.get(sp, 0.0) + c
        return net, rev, revcol

    # ------------------------------------------------------------ experiments
    def _experiments(self, state_names, constant_compounds, pnames):
        t = self.tables.get("experiments")
        if t is None:
            return {}
        id_col = t.column("id")
        t0_col = t.column("t0")
        roles = []      # per column: (role, target name) role in id/t0/input/initial/other
        for i, h in enumerate(t.header):
            raw = h.strip()
            bare = raw.lstrip("!>").strip()
            if id_col and i == id_col[0]:
                roles.append(("id", None))
            elif t0_col and i == t0_col[0]:
                roles.append(("t0", None))
            elif bare in self.defined:
                nm = self.name[bare]
                if nm in pnames:
                    roles.append(("inputs", nm))
                elif nm in state_names or nm in constant_compounds:
                    roles.append(("initial", nm))
                else:
                    raise t.error(t.header_line, raw,
                                  f"column {raw!r} names {bare!r}, which is a {self.defined[bare][0]}, not an "
                                  f"input, parameter or compound")
            elif _norm(raw) in _FREE_TEXT:
                roles.append(("other", raw.lstrip("!").strip()))   # free text (comments, names, sources)
            elif raw.startswith(">") or (not t.standard and not raw.startswith("!")):
                raise t.error(t.header_line, raw,
                              f"column {raw!r} is not an input, parameter or compound of the model "
                              f"(nor ID or T0)")
            else:
                roles.append(("other", raw.lstrip("!").strip()))
        out = {}
        for n, cells in t.rows:
            eid = cells[id_col[0]].strip() if id_col[0] < len(cells) else ""
            if not eid:
                raise t.error(n, id_col[1], "empty experiment ID")
            if eid in out:
                raise t.error(n, id_col[1], f"experiment {eid!r} appears twice")
            e = {"inputs": {}, "initial": {}, "t0": 0.0}
            other = {}
            for i, (role, target) in enumerate(roles):
                cell = cells[i].strip() if i < len(cells) else ""
                if not cell or role == "id":
                    continue
                if role == "t0":
                    e["t0"] = _number(cell, t, n, t.header[i])
                elif role in ("inputs", "initial"):
                    e[role][target] = _number(cell, t, n, t.header[i])
                else:
                    other[target] = cell
            if other:
                e["other"] = other
            out[eid] = e
        return out
