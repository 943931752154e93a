"""Durable session records and the turn-end reasons they carry. Pure data; no trio import.

A session is an append-only sequence of `Record`s. The record types and their data keys are
part of the public contract (docs/contract.md, Records); everything the loop does is
visible here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict

from .._frozen import freeze, thaw

__all__ = [
    "MESSAGE_RECORD_TYPES",
    "Aborted",
    "Closed",
    "Completed",
    "Errored",
    "Interrupted",
    "MaxSteps",
    "Record",
    "TurnEndReason",
    "aborted",
    "closed",
    "completed",
    "decode_turn_end",
    "errored",
    "interrupted",
    "max_steps",
]

TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
USER_MESSAGE: Final = "user/message"
STEERING_MESSAGE: Final = "steering/message"
CONTEXT_MESSAGE: Final = "context/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
PROMPT_QUEUED: Final = "prompt/queued"
PROMPT_DROPPED: Final = "prompt/dropped"
TOOL_APPROVAL: Final = "tool/approval"

# Records of the prompt queue (rule L8): they stand outside turns.
PROMPT_RECORD_TYPES: Final = frozenset({PROMPT_QUEUED, PROMPT_DROPPED})

# Records that carry a delivered inbox message (data keys `id` and `content`).
MESSAGE_RECORD_TYPES: Final = frozenset({USER_MESSAGE, STEERING_MESSAGE, CONTEXT_MESSAGE})


@dataclass(frozen=True, slots=True)
class Record:
    """One durable entry of a session: a type such as `turn/start` and its data.

    type: the record type: `turn/start`, `user/message`, `tool/call`, ... (see the contract).
    data: its fields. Made by `of`, as every record of a session is, it is a deep read-only
        copy: mappings are read-only and lists are tuples.
    """

    type: str
    data: Mapping[str, Any]

    @classmethod
    def of(cls, type: str, data: Mapping[str, Any]) -> Record:
        """A record holding a deep, read-only copy of `data`: what is recorded cannot be
        changed afterwards by whoever handed it in (a tool's arguments, a listener)."""
        return cls(type, freeze(data))

    def data_json(self) -> str:
        """`data` as JSON text, what `json.dumps` makes of `to_json()["data"]`, without
        the deep mutable copy in between (a store encodes every record it commits)."""
        return _DATA_ENCODER.encode(self.data)

    def to_json(self) -> dict[str, Any]:
        """`{"type": ..., "data": ...}`, with `data` as plain dicts and lists (a deep mutable
        copy): the shape a store serializes."""
        return {"type": self.type, "data": thaw(self.data)}


def _as_dict(value: object) -> dict[str, Any]:
    # The encoder's fallback: the read-only mappings `freeze` makes (tuples it encodes as
    # lists itself). Anything else is as unencodable as for `json.dumps`.
    if isinstance(value, Mapping):
        return dict(value)  # pyright: ignore[reportUnknownArgumentType]
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_DATA_ENCODER: Final = json.JSONEncoder(default=_as_dict)


class Completed(TypedDict):
    """The turn's last step returned no tool calls and no steering was pending."""

    kind: Literal["completed"]


class Aborted(TypedDict):
    """The turn was cancelled (`cause` "user" or "parent") or its step was aborted
    ("step", "timeout"); `reason` is the text the canceller gave."""

    kind: Literal["aborted"]
    reason: str
    cause: str


class Errored(TypedDict):
    """The model or the loop raised; `message` says what, in one line."""

    kind: Literal["error"]
    message: str


class MaxSteps(TypedDict):
    """The turn reached `AgentOptions.max_steps` model calls."""

    kind: Literal["max_steps"]


class Closed(TypedDict):
    """The agent was closed while the turn ran."""

    kind: Literal["closed"]


class Interrupted(TypedDict):
    """Written on resume for a turn a crash left open (rule L6)."""

    kind: Literal["interrupted"]


TurnEndReason = Completed | Aborted | Errored | MaxSteps | Closed | Interrupted
"""How a turn ended: the `reason` of its `turn/end` record, a closed union on `kind`."""


def completed() -> TurnEndReason:
    return {"kind": "completed"}


def aborted(reason: str, cause: str) -> TurnEndReason:
    return {"kind": "aborted", "reason": reason, "cause": cause}


def errored(message: str) -> TurnEndReason:
    return {"kind": "error", "message": message}


def max_steps() -> TurnEndReason:
    return {"kind": "max_steps"}


def closed() -> TurnEndReason:
    return {"kind": "closed"}


def interrupted() -> TurnEndReason:
    return {"kind": "interrupted"}


def decode_turn_end(value: Mapping[str, Any]) -> TurnEndReason | None:
    """The `reason` of a `turn/end` record (as stored or sent, possibly frozen) as a typed
    `TurnEndReason`, or None when its kind is not one this version knows (a newer writer).
    A field a known kind lacks reads as "" (text of another type as its `str`), so a reader
    still tells how the turn ended. Never raises."""

    def text(key: str) -> str:
        field = value.get(key)
        return "" if field is None else field if isinstance(field, str) else str(field)

    match value.get("kind"):
        case "completed":
            return completed()
        case "max_steps":
            return max_steps()
        case "closed":
            return closed()
        case "interrupted":
            return interrupted()
        case "aborted":
            return aborted(text("reason"), text("cause"))
        case "error":
            return errored(text("message"))
        case _:
            return None
