"""What the function machine checks of a tool made from a function (F4) and of a refused
one, and how it reads a call's answer (F6). Pure: no trio, no Hypothesis."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from jsonschema.validators import validator_for

from trio_agents import ToolResult

from ._function_properties import SCHEMA_FROM_SIGNATURE, SIGNATURE_REFUSED
from ._function_specs import FunctionSpec, Param, canonical, json_of, wrong

__all__ = ["Json", "check_refusal", "check_schema", "outcome_of"]


@dataclass(frozen=True)
class Json:
    """A call's content that must be `value` as JSON (F6: anything but a str or a
    ToolResult is its JSON)."""

    value: Any

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Json):
            return bool(self.value == other.value)
        if not isinstance(other, str):
            return NotImplemented
        try:
            return bool(json.loads(other) == self.value)
        except ValueError:
            return False

    def __hash__(self) -> int:
        return hash(json.dumps(self.value, sort_keys=True))


def outcome_of(result: object) -> tuple[object, bool]:
    """A tool's answer as (content, is_error): a str is content that is not an error."""
    if isinstance(result, ToolResult):
        return result.content, result.is_error
    return result, False


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    validator = validator_for(schema)(schema)
    return validator.is_valid(instance)


def check_schema(spec: FunctionSpec, tool: Any, text: str) -> None:
    """F4 for the tool made from the function whose source is `text`."""
    told = f"the tool made from\n{text}"
    SCHEMA_FROM_SIGNATURE.check(
        getattr(tool, "name", None) == spec.tool_name,
        lambda: f"{told}is named {getattr(tool, 'name', None)!r}, not {spec.tool_name!r}",
    )
    if spec.summary is not None or spec.description is not None:
        SCHEMA_FROM_SIGNATURE.check(
            getattr(tool, "description", None) == spec.tool_description,
            lambda: (
                f"{told}is described {getattr(tool, 'description', None)!r}, not "
                f"{spec.tool_description!r}"
            ),
        )
    given: object = getattr(tool, "parameters", None)
    schema = _object(given)
    SCHEMA_FROM_SIGNATURE.check(
        schema.get("type") == "object" and schema.get("additionalProperties") is False,
        lambda: f"{told}has parameters {given!r}: not an object schema refusing other keys",
    )
    properties = _object(schema.get("properties"))
    names = {p.name for p in spec.params}
    SCHEMA_FROM_SIGNATURE.check(
        set(properties) == names,
        lambda: f"{told}has the properties {sorted(properties)}, not {sorted(names)}",
    )
    required = {p.name for p in spec.params if p.required}
    listed: object = schema.get("required", [])
    said: set[str] = set()
    if isinstance(listed, list):
        said = {str(n) for n in cast("list[object]", listed)}
    SCHEMA_FROM_SIGNATURE.check(
        said == required,
        lambda: f"{told}requires {listed!r}, not {sorted(required)}",
    )
    for param in spec.params:
        _check_property(told, param, _object(properties[param.name]))
    _check_types(told, spec, schema)


def _object(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (which the checks then refuse)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _check_property(told: str, param: Param, prop: dict[str, Any]) -> None:
    if not param.required:
        SCHEMA_FROM_SIGNATURE.check(
            "default" in prop and prop["default"] == json_of(param.default),
            lambda: (
                f"{told}gives {param.name!r} {prop!r}, without its default "
                f"{json_of(param.default)!r}"
            ),
        )
    if param.described != "none":
        SCHEMA_FROM_SIGNATURE.check(
            prop.get("description") == param.text,
            lambda: f"{told}gives {param.name!r} {prop!r}, not the description {param.text!r}",
        )


def _check_types(told: str, spec: FunctionSpec, schema: dict[str, Any]) -> None:
    """JSON values of each parameter's type validate against the schema; a value of no
    other type does, no key the function lacks does, nor one a nested dataclass lacks."""
    good = {p.name: canonical(p.kind, 1) for p in spec.params}
    SCHEMA_FROM_SIGNATURE.check(
        _valid(schema, good), lambda: f"{told}refuses the valid arguments {good!r}"
    )
    for param in spec.params:
        bad = wrong(param.kind)
        if bad is None:
            continue
        instance = {**good, param.name: bad}
        SCHEMA_FROM_SIGNATURE.check(
            not _valid(schema, instance),
            f"{told}takes {bad!r} for {param.name!r}, which is no {param.kind}",
        )
        if param.kind == "point":
            extra = {**good, param.name: {"x": 1, "y": 2, "z": 3}}
            SCHEMA_FROM_SIGNATURE.check(
                not _valid(schema, extra),
                f"{told}takes a key 'z' the dataclass of {param.name!r} does not have",
            )
    SCHEMA_FROM_SIGNATURE.check(
        not _valid(schema, {**good, "surplus": 1}),
        lambda: f"{told}takes an argument 'surplus' the function does not have",
    )


def check_refusal(text: str, param: str | None, error: BaseException | None) -> None:
    """F4: applying the target to the function whose source is `text` raised `error`: it
    must be a TypeError, one line starting `function_tool:` naming the function and
    `param` (when there is one to name)."""
    told = f"function_tool applied to\n{text}"
    said = str(error) if error is not None else ""
    SIGNATURE_REFUSED.check(
        isinstance(error, TypeError)
        and "\n" not in said
        and said.startswith("function_tool:")
        and "broken" in said
        and (param is None or param in said),
        lambda: (
            (
                f"{told}raised {type(error).__name__}: {said}"
                if error is not None
                else f"{told}made a tool"
            )
            + "; it must raise TypeError, one line starting 'function_tool:' naming the function"
            + (f" and the parameter {param!r}" if param else "")
        ),
    )
