"""The ACP schemas the suite holds every message to: ACP v1's and the v2 draft's JSON schemas as
the newest published SDK carries them (`@agentclientprotocol/sdk` 2.4.0, `schema/v1/schema.json`
and `schema/v2/schema.json`, vendored unchanged as `acp-schema-v1.json` and
`acp-schema-v2.json`; Apache-2.0, as the protocol's repository), checked with `jsonschema`.
A connection is held to the schema of the version its `initialize` negotiated. Pure: no trio.

`problem(name, value, version)` says what is wrong with `value` as the definition `name` of
that version's schema (None: nothing), naming the place by its JSON path. Where the schema
picks a shape by a field (`sessionUpdate`, `type`, `outcome`: its `discriminator`, or a
`const` in each branch), the message is that shape's own complaint, not "valid under none
of them".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, Final, cast

from jsonschema import Draft202012Validator
from jsonschema import exceptions as _exceptions

__all__ = ["SCHEMA_SOURCE", "SCHEMA_SOURCES", "definitions", "problem"]

SCHEMA_SOURCES: Final = {
    1: "@agentclientprotocol/sdk 2.4.0 schema/v1/schema.json",
    2: "@agentclientprotocol/sdk 2.4.0 schema/v2/schema.json",
}
SCHEMA_SOURCE: Final = SCHEMA_SOURCES[1]
_FILES: Final = {1: "acp-schema-v1.json", 2: "acp-schema-v2.json"}
_SHOWN: Final = 160  # characters of a value a message quotes


@functools.cache
def definitions(version: int = 1) -> Mapping[str, Any]:
    """The definitions (`$defs`) of protocol `version`'s schema, by name."""
    package = resources.files(__name__.rpartition(".")[0])
    text = package.joinpath(_FILES[version]).read_text(encoding="utf-8")
    return cast("Mapping[str, Any]", json.loads(text)["$defs"])


# jsonschema's types are partly unknown to a strict checker: its objects are handled as Any.
_Error = Any


def best_match(errors: Iterable[_Error]) -> _Error:
    return cast("Any", _exceptions).best_match(errors)


@functools.cache
def _validator(name: str, version: int) -> Any:
    defs = definitions(version)
    if name not in defs:
        raise KeyError(f"the ACP v{version} schema has no definition {name!r}")
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": defs})


def problem(name: str, value: object, version: int = 1) -> str | None:
    """What is wrong with `value` as the definition `name` of protocol `version`'s schema,
    or None."""
    validator = _validator(name, version)
    if validator.is_valid(value):
        return None
    found = best_match(validator.iter_errors(value))
    assert found is not None  # not valid: there is an error
    error = _chosen(found)
    where = str(error.json_path)
    allowed = _allowed(error)
    if allowed is not None:
        said = f"{_cut(error.instance)} is not one of {', '.join(allowed)}"
    elif error.validator in ("oneOf", "anyOf"):
        said = f"{_cut(error.instance)} matches none of the shapes the schema allows there"
    else:
        said = _cut_message(str(error.message))
    return f"{name}: {where}: {said}"


def _chosen(error: _Error) -> _Error:
    """Down through one-of choices to the branch the value meant, where the schema says
    which (a field whose value picks the branch)."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        branches = cast("list[Any]", error.validator_value)
        index = _meant(branches, error.schema, error.instance)
        if index is None:
            return error
        mine = [e for e in error.context if e.schema_path and e.schema_path[0] == index]
        if not mine:
            return error
        picked = best_match(mine)
        assert picked is not None
        error = picked
    return error


def _allowed(error: _Error) -> list[str] | None:
    """The values a choice among constants allows (a kind, a stop reason), if it is one."""
    if error.validator not in ("oneOf", "anyOf"):
        return None
    values: list[str] = []
    for branch in cast("list[Any]", error.validator_value):
        if isinstance(branch, dict) and "const" in branch:
            values.append(json.dumps(cast("dict[str, Any]", branch)["const"]))
        elif isinstance(branch, dict) and cast("dict[str, Any]", branch).get("type") == "null":
            values.append("null")
        else:
            return None
    return values


def _meant(branches: list[Any], schema: Any, instance: object) -> int | None:
    """The index of the branch `instance` names by its discriminating field, if any."""
    if not isinstance(instance, dict):
        return None
    named = _field(schema, "discriminator")
    field_name = _field(named, "propertyName")
    fields: Iterable[str] = (
        (field_name,) if isinstance(field_name, str) else ("sessionUpdate", "type", "outcome")
    )
    value = cast("dict[str, Any]", instance)
    for field in fields:
        if field not in value:
            continue
        for index, branch in enumerate(branches):
            const = _const(branch, field)
            if const is not None and const == value[field]:
                return index
    return None


def _field(value: object, name: str) -> object:
    """`value[name]` if `value` is a JSON object, else None."""
    return cast("dict[str, Any]", value).get(name) if isinstance(value, dict) else None


def _const(branch: object, field: str) -> object:
    if not isinstance(branch, dict):
        return None
    properties = cast("dict[str, Any]", branch).get("properties")
    if not isinstance(properties, dict):
        return None
    spec = cast("dict[str, Any]", properties).get(field)
    return cast("dict[str, Any]", spec).get("const") if isinstance(spec, dict) else None


def _cut(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "\u2026"


def _cut_message(message: str) -> str:
    return message if len(message) <= 2 * _SHOWN else message[: 2 * _SHOWN - 1] + "\u2026"
