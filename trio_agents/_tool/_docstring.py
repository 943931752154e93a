"""A function's docstring, split into what a tool's schema needs: the text that describes the
function and one description per parameter. Google style (`Args:`) and Sphinx style
(`:param name:`) are read. No trio import."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

# The Google-style section headings. A line that is one of these, alone, starts a section;
# the first three hold the parameters.
_PARAMETER_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
_OTHER_SECTIONS = frozenset(
    {
        "returns", "return", "yields", "yield", "raises", "raise", "examples", "example",
        "note", "notes", "warning", "warnings", "see also", "todo", "attributes",
        "references",
    }
)  # fmt: skip
_SECTION = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
# `name (type): text` or `name: text`; the type in brackets is the reader's, not ours.
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:[a-z]+[^:]*:")


@dataclass(frozen=True, slots=True)
class Docstring:
    """description: the text before the first section, paragraphs kept.
    parameters: parameter name -> its description, continuation lines joined by spaces.
    """

    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict[str, str])


def parse_docstring(doc: str | None) -> Docstring:
    """Split `doc` (a `__doc__`, maybe None) into its description and parameter texts."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    parameters: dict[str, str] = {}
    section: str | None = None  # None: still in the description
    current: str | None = None  # the parameter whose text continues on indented lines
    entry_indent = 0
    for line in lines:
        stripped = line.strip()
        heading = _SECTION.match(line)
        if heading and heading.group(1).lower() in _PARAMETER_SECTIONS | _OTHER_SECTIONS:
            section, current = heading.group(1).lower(), None
            entry_indent = -1
            continue
        if sphinx := _SPHINX_PARAM.match(stripped):
            name = sphinx.group(1)
            section, current = ":param", name
            parameters[name] = sphinx.group(2).strip()
            continue
        if _SPHINX_FIELD.match(stripped):
            section, current = ":field", None  # :returns:, :raises ...: and the like
            continue
        if section is None:
            description.append(line)
            continue
        if not stripped:
            current = None if section != ":param" else current
            continue
        indent = len(line) - len(line.lstrip())
        if section in _PARAMETER_SECTIONS:
            if entry_indent < 0:
                entry_indent = indent
            entry = _ENTRY.match(stripped)
            if indent <= entry_indent and entry:
                name = entry.group(1).lstrip("*")
                parameters[name] = entry.group(2).strip()
                current = name
                continue
        if current is not None and (section == ":param" or indent > entry_indent):
            parameters[current] = f"{parameters[current]} {stripped}".strip()
    return Docstring("\n".join(description).strip(), parameters)
