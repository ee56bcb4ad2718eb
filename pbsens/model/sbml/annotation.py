"""The pbsens annotation of an SBML model: what :func:`to_sbml` records beyond the equations.

:func:`to_sbml` writes, in the namespace :data:`PBSENS_NS`, the spec's name,
title, time name, which assignment rules are outputs and the spec's ``meta``;
:func:`read_sbml` reads them back so a written spec reads back the same.
"""
from __future__ import annotations

import json
import warnings

#: Namespace of the annotation :func:`to_sbml` writes (time name, outputs, meta).
PBSENS_NS = "urn:pbsens:sbml-annotation:1"
_PREFIX = "pbsens"


def read_annotation(model):
    """The pbsens annotation of a libsbml ``Model`` as a dict ({} when absent)."""
    ann = model.getAnnotation()
    out = {}
    if ann is None:
        return out
    for i in range(ann.getNumChildren()):
        node = ann.getChild(i)
        if node.getURI() != PBSENS_NS or node.getName() != "spec":
            continue
        for key in ("name", "title", "time"):
            if node.hasAttr(key):
                out[key] = node.getAttrValue(key)
        for j in range(node.getNumChildren()):
            ch = node.getChild(j)
            text = "".join(ch.getChild(k).getCharacters() for k in range(ch.getNumChildren()))
            if ch.getName() == "outputs":
                out["outputs"] = text.split()
            elif ch.getName() == "meta":
                try:
                    meta = json.loads(text)
                except json.JSONDecodeError:
                    meta = None
                if isinstance(meta, dict):
                    out["meta"] = meta
    return out


def _xml_escape(s: str) -> str:
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def annotation_xml(spec):
    """The pbsens annotation of ``spec`` as XML text."""
    try:
        meta = json.dumps(spec.meta, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        warnings.warn(f"model {spec.name!r}: meta is not JSON-serialisable ({exc}); it is not written "
                      f"to the SBML annotation", stacklevel=3)
        meta = None
    parts = [f'<{_PREFIX}:spec xmlns:{_PREFIX}="{PBSENS_NS}" name="{_xml_escape(spec.name)}" '
             f'title="{_xml_escape(spec.title)}" time="{_xml_escape(spec.time)}">']
    if spec.outputs:
        parts.append(f"<{_PREFIX}:outputs>{' '.join(spec.output_names)}</{_PREFIX}:outputs>")
    if meta is not None:
        parts.append(f"<{_PREFIX}:meta>{_xml_escape(meta)}</{_PREFIX}:meta>")
    parts.append(f"</{_PREFIX}:spec>")
    return "".join(parts)
