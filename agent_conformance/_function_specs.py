"""The functions the function machine turns into tools: a signature drawn as users write
them (its parameters' types, defaults and descriptions, a ToolContext parameter anywhere,
sync or async), its source, and what the contract's rules F4-F6 make of it: the schema's
parts, the arguments a model may send (as the type's JSON, or a JSON value that means it)
and the values the function must then receive. Pure: no trio, no Hypothesis.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "KINDS",
    "NO_DEFAULT",
    "Color",
    "Described",
    "FunctionSpec",
    "Kind",
    "Param",
    "Point",
    "canonical",
    "json_of",
    "lax",
    "received",
    "source",
    "wrong",
]


class Color(enum.Enum):
    """The Enum a drawn parameter may have: the model sends its value."""

    RED = "red"
    GREEN = "green"


@dataclass(frozen=True)
class Point:
    """The dataclass a drawn parameter may have: the model sends an object."""

    x: int
    y: int


Kind = Literal["int", "str", "float", "bool", "enum", "list", "optional", "point", "any"]
KINDS: tuple[Kind, ...] = (
    "int",
    "str",
    "float",
    "bool",
    "enum",
    "list",
    "optional",
    "point",
    "any",
)

_HINTS: dict[Kind, str] = {
    "int": "int",
    "str": "str",
    "float": "float",
    "bool": "bool",
    "enum": "Color",
    "list": "list[int]",
    "optional": "int | None",
    "point": "Point",
    "any": "Any",
}

NO_DEFAULT: Any = object()
"""A parameter without a default."""

Described = Literal["none", "annotated", "google", "sphinx"]
Returns = Literal["str", "tool-result", "json", "none", "raise"]


@dataclass(frozen=True)
class Param:
    """One parameter: its name, its type's kind, its default (NO_DEFAULT: required), how
    it is described and the text, and whether it is keyword-only."""

    name: str
    kind: Kind
    default: Any = NO_DEFAULT
    described: Described = "none"
    text: str = ""
    keyword_only: bool = False

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@dataclass(frozen=True)
class FunctionSpec:
    """A function as a user writes it, and how `function_tool` is applied to it.

    name: the function's name; `override` the `name=` given, if any; `summary` its
    docstring's text before the sections (None: no docstring), `description` the
    `description=` given, if any. `context` is where a ToolContext parameter stands (None:
    there is none) and whether it is keyword-only. `returns` what the function returns.
    """

    name: str
    params: tuple[Param, ...]
    is_async: bool = False
    summary: str | None = None
    override: str | None = None
    description: str | None = None
    context: tuple[int, bool] | None = None
    returns: Returns = "str"
    style: Literal["google", "sphinx"] = "google"

    @property
    def tool_name(self) -> str:
        return self.override if self.override is not None else self.name

    @property
    def tool_description(self) -> str:
        if self.description is not None:
            return self.description
        return self.summary or ""


def _hint(param: Param) -> str:
    hint = _HINTS[param.kind]
    if param.described == "annotated":
        return f"Annotated[{hint}, {param.text!r}]"
    return hint


def _default(param: Param) -> str:
    if param.default is NO_DEFAULT:
        return ""
    if isinstance(param.default, Color):
        return f" = Color.{param.default.name}"
    return f" = {param.default!r}"


def source(spec: FunctionSpec, recorder: str) -> str:
    """The function's source: its signature, its docstring, and a body that passes its
    arguments (by name) and its context to `recorder(name, arguments, context)` and
    returns what that returns."""
    positional = [p for p in spec.params if not p.keyword_only]
    keyword = [p for p in spec.params if p.keyword_only]
    # Python wants required positional parameters before those with defaults.
    positional.sort(key=lambda p: not p.required)
    parts = [f"{p.name}: {_hint(p)}{_default(p)}" for p in positional]
    kw_parts = [f"{p.name}: {_hint(p)}{_default(p)}" for p in keyword]
    if spec.context is not None:
        at, keyword_only = spec.context
        # `ToolContext | None` half the time (F6), with a default of None where the
        # parameter may have one (keyword-only), as users write an optional context.
        optional = at % 2 == 1
        if keyword_only:
            hint = "ctx: ToolContext | None = None" if optional else "ctx: ToolContext"
            kw_parts.insert(min(at, len(kw_parts)), hint)
        else:
            # Before the first positional parameter with a default: it has none itself.
            first_default = next((i for i, p in enumerate(positional) if not p.required), None)
            limit = len(parts) if first_default is None else first_default
            parts.insert(
                min(at, limit), "ctx: ToolContext | None" if optional else "ctx: ToolContext"
            )
    if kw_parts:
        parts += ["*", *kw_parts]
    keyword_def = "async def" if spec.is_async else "def"
    lines = [f"{keyword_def} {spec.name}({', '.join(parts)}) -> Any:"]
    doc = _docstring(spec)
    if doc:
        lines += ['    """' + doc.replace("\n", "\n    ") + '\n    """']
    names = ", ".join(f"{p.name!r}: {p.name}" for p in spec.params)
    context = "ctx" if spec.context is not None else "None"
    lines.append(f"    return {recorder}({spec.name!r}, {{{names}}}, {context})")
    return "\n".join(lines) + "\n"


CONTEXT_TEXT = "the call's context"


def _docstring(spec: FunctionSpec) -> str:
    entries = [(p.name, p.text) for p in spec.params if p.described in ("google", "sphinx")]
    # A section that documents its ToolContext parameter too, as users write them (half the
    # time, by where it stands: no draw of its own). It is a parameter the function has.
    if entries and spec.context is not None and spec.context[0] % 2 == 0:
        entries.insert(min(spec.context[0], len(entries)), ("ctx", CONTEXT_TEXT))
    if spec.summary is None and not entries:
        return ""
    text = spec.summary or ""
    if entries and spec.style == "google":
        text += "\n\nArgs:\n" + "\n".join(f"    {name}: {what}" for name, what in entries)
    elif entries:
        text += "\n\n" + "\n".join(f":param {name}: {what}" for name, what in entries)
    return text


def canonical(kind: Kind, pick: int) -> Any:
    """A JSON value of the type `kind`, as its schema gives it (`pick` chooses which)."""
    values: dict[Kind, list[Any]] = {
        "int": [0, 7, -3],
        "str": ["", "two words", "\u00fcn\u00efc\u00f6d\u00e9"],
        "float": [1.5, -0.25, 3.0],
        "bool": [True, False],
        "enum": ["red", "green"],
        "list": [[], [1, 2], [5]],
        "optional": [None, 4],
        "point": [{"x": 1, "y": 2}, {"x": -5, "y": 0}],
        "any": [{"k": [1, "v"]}, "text", 3, None],
    }
    options = values[kind]
    return options[pick % len(options)]


def lax(kind: Kind, value: Any) -> Any:
    """A JSON value that means `value` of type `kind` without being its schema's form, as
    F5 says a model may send it (`"3"` for an int), or `value` itself where the contract
    names none."""
    if kind == "int":
        return str(value)
    if kind == "float" and float(value).is_integer():
        return int(value)
    return value


def received(kind: Kind, value: Any) -> Any:
    """What the function must receive for the JSON `value` of type `kind` (F5)."""
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "enum":
        return Color(value)
    if kind == "point":
        return Point(**value)
    if kind == "optional":
        return None if value is None else int(value)
    return value


def wrong(kind: Kind) -> Any | None:
    """A JSON value no argument of type `kind` may be (None: every value is one)."""
    values: dict[Kind, Any] = {
        "int": "two",
        "str": {"not": "text"},
        "float": "much",
        "bool": {"yes": 1},
        "enum": "purple",
        "list": {"a": 1},
        "optional": "nothing",
        "point": {"x": 1},
    }
    return values.get(kind)


def json_of(default: Any) -> Any:
    """A default as the schema gives it: its JSON form (an Enum member as its value)."""
    if isinstance(default, Color):
        return default.value
    return json.loads(json.dumps(default))
