"""Whether a stored record has the fields its type needs. Pure; no trio import.

The contract's record table (docs/contract.md, Records) names the data keys of each record
type. A store reads records back from a file that anything may have written, and the code
that resumes a session, repairs an open turn or maps history to ACP reads these keys
directly. So a store checks each record as it reads it: a record that lacks a key, or holds
it with the wrong type, is damage to report (CorruptSessionError), not a KeyError to raise
from deep inside a resume. Extra keys are allowed (readers ignore them), and so are record
types this version does not know (a newer writer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ._records import (
    ASSISTANT_MESSAGE,
    MESSAGE_RECORD_TYPES,
    PROMPT_QUEUED,
    STEP_END,
    STEP_START,
    TOOL_APPROVAL,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)

__all__ = ["shape_problem"]


def _whole(value: object) -> bool:
    return type(value) is int  # not a bool, which is an int too


def _text(value: object) -> bool:
    return isinstance(value, str)


def _flag(value: object) -> bool:
    return isinstance(value, bool)


def _mapping(value: object) -> bool:
    return isinstance(value, Mapping)


def _present(value: object) -> bool:
    return True


# What a field must be: a phrase for the problem, and its check.
_Kind = tuple[str, Callable[[object], bool]]
_WHOLE: Final[_Kind] = ("a whole number", _whole)
_TEXT: Final[_Kind] = ("text", _text)
_FLAG: Final[_Kind] = ("true or false", _flag)
_MAPPING: Final[_Kind] = ("an object", _mapping)
_ANY: Final[_Kind] = ("present", _present)

_FIELDS: Final[dict[str, tuple[tuple[str, _Kind], ...]]] = {
    TURN_START: (("turn", _WHOLE),),
    TURN_END: (("turn", _WHOLE), ("reason", _MAPPING)),
    STEP_START: (("turn", _WHOLE), ("step", _WHOLE)),
    STEP_END: (("turn", _WHOLE), ("step", _WHOLE)),
    ASSISTANT_MESSAGE: (("content", _TEXT),),
    TOOL_CALL: (("call_id", _TEXT), ("name", _TEXT), ("arguments", _ANY)),
    TOOL_RESULT: (("call_id", _TEXT), ("content", _TEXT), ("is_error", _FLAG)),
    # A resumed agent takes up its "always" answers from these (rule A17).
    TOOL_APPROVAL: (("call_id", _TEXT), ("tool", _TEXT), ("decision", _TEXT), ("by", _TEXT)),
    # A resumed agent restores its queued prompts, parked, from these (rule L8).
    **{
        kind: (("id", _TEXT), ("content", _TEXT)) for kind in (*MESSAGE_RECORD_TYPES, PROMPT_QUEUED)
    },
}


def shape_problem(kind: str, data: object) -> str | None:
    """None if a record of type `kind` with `data` (as decoded from JSON) has every field
    its type needs, else what is wrong, as a phrase ("its 'turn' is not a whole number")."""
    if not isinstance(data, Mapping):
        return f"its data is {type(data).__name__}, not an object"
    fields: Mapping[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    for key, (what, check) in _FIELDS.get(kind, ()):
        if key not in fields:
            return f"it has no {key!r}"
        if not check(fields[key]):
            return f"its {key!r} is not {what}"
    if kind == TURN_END and not isinstance(fields["reason"].get("kind"), str):
        return "its 'reason' has no 'kind' text"
    return None
