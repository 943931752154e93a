"""Derive the model's view of a conversation from session records. Pure; no trio import.

The derivation is incremental: a `Transcript` consumes records once, so building a request
costs the new records, not the whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._model import Message, Role, ToolCall
from ._records import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
    Record,
)

__all__ = ["Transcript"]

_SOURCES = {
    USER_MESSAGE: "prompt",
    STEERING_MESSAGE: "steering",
    CONTEXT_MESSAGE: "context",
}


class Transcript:
    """The messages a model sees, kept in step with a session's records."""

    __slots__ = ("_messages",)

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._messages: list[Message] = []
        for record in records:
            self.add(record)

    @property
    def messages(self) -> list[Message]:
        return self._messages

    def add(self, record: Record) -> None:
        data = record.data
        source = _SOURCES.get(record.type)
        if source is not None:
            # Injected context may be meant as a system message (`agent.inject(message)`).
            system = record.type == CONTEXT_MESSAGE and data.get("role") == "system"
            role: Role = "system" if system else "user"
            self._messages.append(Message(role, str(data["content"]), source=source))
        elif record.type == ASSISTANT_MESSAGE:
            # An interrupted prefix is kept: the model should see what the user saw.
            self._messages.append(Message("assistant", str(data["content"])))
        elif record.type == TOOL_CALL:
            self._attach_call(data)
        elif record.type == TOOL_RESULT:
            self._messages.append(
                Message("tool", str(data["content"]), call_id=str(data["call_id"]))
            )

    def _attach_call(self, data: Mapping[str, Any]) -> None:
        call = ToolCall(str(data["call_id"]), str(data["name"]), data["arguments"])
        last = self._messages[-1] if self._messages else None
        if last is not None and last.role == "assistant" and last.call_id is None:
            self._messages[-1] = Message(
                "assistant", last.content, tool_calls=(*last.tool_calls, call)
            )
        else:
            self._messages.append(Message("assistant", "", tool_calls=(call,)))
