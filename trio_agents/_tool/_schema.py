"""A typed function's signature as a tool's arguments: their JSON schema, and the check that
turns a model's arguments into a call of the function or into one line saying what is wrong.

pydantic builds the schema and validates (design D280). It is imported when a signature is
first read, not with the package, so `import trio_agents` does not pay for it. No trio
import.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from ._docstring import parse_docstring
from ._seam import ToolContext

if typing.TYPE_CHECKING:
    import pydantic

__all__ = ["BoundCall", "ToolSignature", "label", "read_signature"]

_NAMED = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)
_SHOWN = 60  # the characters of a wrong value an error shows
# pydantic's error types for a key a model or a dataclass does not have
_UNKNOWN = frozenset({"extra_forbidden", "unexpected_keyword_argument"})


@dataclass(frozen=True, slots=True)
class BoundCall:
    """The function's arguments for one call, context included."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Parameter:
    name: str
    positional_only: bool
    is_context: bool
    field: str  # the model's field name; the parameter's name is its alias


@dataclass(frozen=True, slots=True)
class ToolSignature:
    """What `read_signature` made of a function.

    parameters: the JSON schema of the arguments (an object), sent to the model.
    description: the docstring's text before its sections ("" without a docstring).
    """

    tool: str
    parameters: dict[str, Any]
    description: str
    _order: tuple[_Parameter, ...]
    _model: type[pydantic.BaseModel]

    def bind(self, arguments: object, context: ToolContext) -> BoundCall | str:
        """The call `arguments` (the model's) make, converted to the annotated types, or a
        one-line error result naming each wrong argument and what is wrong with it."""
        import pydantic  # lazily: pydantic's import costs ~0.1 s (D280)

        try:
            values = self._model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            return self._explain(exc)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for parameter in self._order:
            value = context if parameter.is_context else getattr(values, parameter.field)
            if parameter.positional_only:
                args.append(value)
            else:
                kwargs[parameter.name] = value
        return BoundCall(tuple(args), kwargs)

    def _explain(self, exc: pydantic.ValidationError) -> str:
        names = [p.name for p in self._order if not p.is_context]
        problems: list[str] = []
        for error in exc.errors(include_url=False):
            where = _path(error["loc"])
            kind = error["type"]
            if not where:
                problems.append(f"the arguments must be a JSON object, got {_show(error['input'])}")
            elif kind == "missing":
                problems.append(f"{where!r} is required")
            elif kind in _UNKNOWN and len(error["loc"]) > 1:
                problems.append(f"{where!r} is not a field of its object")
            elif kind == "extra_forbidden":
                takes = ", ".join(names) or "no arguments"
                problems.append(f"{where!r} is not an argument (it takes {takes})")
            else:
                message = " ".join(str(error["msg"]).split())
                problems.append(f"{where!r}: {message}, got {_show(error['input'])}")
        return f"invalid arguments for {self.tool} (it was not run): " + "; ".join(problems)


def read_signature(function: Callable[..., Any], tool: str) -> ToolSignature:
    """Read `function`'s parameters, type hints and docstring. Raises TypeError, one line
    naming the function and the parameter, for what cannot become a JSON schema."""
    import pydantic  # lazily: pydantic's import costs ~0.1 s (D280)

    where = f"function_tool: {label(function)}()"
    source = _source(function)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} has no signature to read ({exc})") from None
    try:
        hints = typing.get_type_hints(source, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"{where}: its type hints cannot be resolved ({type(exc).__name__}: {exc}); "
            "define the types they name at module level, where the hints are resolved"
        ) from None
    doc = parse_docstring(inspect.getdoc(source) or inspect.getdoc(function))
    order: list[_Parameter] = []
    fields: dict[str, Any] = {}
    typed: list[tuple[str, Any]] = []
    for index, parameter in enumerate(signature.parameters.values()):
        name = parameter.name
        if parameter.kind not in _NAMED:
            star = "*" if parameter.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{where}: parameter {star}{name}: the model sends named arguments (a JSON "
                "object), so *args and **kwargs have no schema; name each argument"
            )
        if name not in hints:
            raise TypeError(
                f"{where}: parameter {name!r} has no type hint; annotate it "
                "(typing.Any takes any JSON value)"
            )
        hint, described = _without_text(hints[name])
        positional_only = parameter.kind is inspect.Parameter.POSITIONAL_ONLY
        if hint is ToolContext or hint == ToolContext | None:
            if any(p.is_context for p in order):
                raise TypeError(f"{where}: parameter {name!r} is a second ToolContext; keep one")
            order.append(_Parameter(name, positional_only, True, ""))
            continue
        field = f"p{index}"  # never a BaseModel attribute, whatever the parameter's name
        default = parameter.default
        _check_default(where, name, default)
        typed.append((name, hint))
        fields[field] = (
            hint,
            pydantic.Field(
                ... if default is inspect.Parameter.empty else default,
                alias=name,
                description=described or doc.parameters.get(name),
            ),
        )
        order.append(_Parameter(name, positional_only, False, field))
    known = {p.name for p in order if not p.is_context}
    stale = sorted(set(doc.parameters) - {p.name for p in order})
    if stale:
        raise TypeError(
            f"{where}: its docstring describes {', '.join(map(repr, stale))}, not a "
            f"parameter (it has {', '.join(sorted(known)) or 'none'}); fix the docstring"
        )
    try:
        model, schema = _build(tool, fields)
    except Exception as exc:
        # Only now is each type checked alone, to name the parameter: a second schema per
        # parameter would double the cost of every tool that is fine.
        for name, hint in typed:
            _check_type(where, name, hint)
        raise TypeError(f"{where}: no JSON schema for its arguments ({_first(exc)})") from None
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return ToolSignature(tool, schema, doc.description, tuple(order), model)


def label(function: object) -> str:
    """How errors name a function: its qualified name, else its class's (a callable
    object), else what it wraps (a partial)."""
    if isinstance(function, functools.partial):
        return f"partial({label(function.func)})"
    name = getattr(function, "__qualname__", None)
    return name if isinstance(name, str) else type(function).__qualname__


def _source(function: Callable[..., Any]) -> Any:
    """What holds the hints and the docstring: a partial's function, a callable object's
    `__call__`, else the function itself."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or inspect.isclass(function):
        return function
    return type(function).__call__


def _build(tool: str, fields: dict[str, Any]) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    """The arguments' model and its JSON schema; a warning (a default or a type it would
    leave out) is an error, since the model would be sent a schema that is not the truth."""
    import pydantic  # lazily: pydantic's import costs ~0.1 s (D280)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = pydantic.create_model(
            f"{tool}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", populate_by_name=False),
            **fields,
        )
        return model, model.model_json_schema(schema_generator=_schema_generator())


def _check_type(where: str, name: str, hint: Any) -> None:
    """Raise the one-line TypeError for a parameter whose type has no JSON schema."""
    import pydantic  # lazily: pydantic's import costs ~0.1 s (D280)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pydantic.TypeAdapter(hint).json_schema()
    except Exception as exc:
        raise TypeError(
            f"{where}: parameter {name!r}: its type {_type_name(hint)} has no JSON schema "
            f"({_first(exc)}); use JSON types (str, int, float, bool, list, dict, a "
            "Literal, an Enum, a dataclass, a pydantic model)"
        ) from None


def _check_default(where: str, name: str, default: Any) -> None:
    """Raise the one-line TypeError for a default that is not a JSON value."""
    import pydantic_core  # lazily: pydantic's import costs ~0.1 s (D280)

    if default is inspect.Parameter.empty:
        return
    try:
        pydantic_core.to_json(default)
    except Exception:
        raise TypeError(
            f"{where}: parameter {name!r}: its default {default!r} is not a JSON value; "
            "use None or a JSON value"
        ) from None


def _without_text(hint: Any) -> tuple[Any, str | None]:
    """`Annotated[T, "text", ...]` -> (T with the other metadata, "text")."""
    if typing.get_origin(hint) is not Annotated:
        return hint, None
    base, *metadata = typing.get_args(hint)
    texts = [m for m in metadata if isinstance(m, str)]
    rest = [m for m in metadata if not isinstance(m, str)]
    kept: Any = Annotated[tuple([base, *rest])] if rest else base
    return kept, " ".join(texts) or None


def _schema_generator() -> type[Any]:
    # lazily: pydantic's import costs ~0.1 s (D280)
    from pydantic.json_schema import GenerateJsonSchema

    class NoFieldTitles(GenerateJsonSchema):
        """Titles repeat the property names; the model reads the names and descriptions."""

        def field_title_should_be_set(self, schema: Any) -> bool:
            return False

    return NoFieldTitles


def _path(location: Sequence[int | str]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _show(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _first(exc: BaseException) -> str:
    """The exception's first sentence: pydantic's next ones give advice for its own models."""
    lines = str(exc).strip().splitlines()
    first = lines[0].split(". ")[0].rstrip(".") if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint)
