"""Derive the model's view of a conversation from session records. Pure; no trio import.

The derivation is incremental: a `Transcript` consumes records once, so building a request
costs the new records, not the whole history. A request's messages are a `MessageView`, a
fixed-length view of the transcript's one list, so it costs O(1) too (D330).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import Any, cast, overload

from .._model._seam import Message, Role, ToolCall
from .._store._records import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
    Record,
)

__all__ = ["MessageView", "Transcript"]

_SOURCES = {
    USER_MESSAGE: "prompt",
    STEERING_MESSAGE: "steering",
    CONTEXT_MESSAGE: "context",
}


class Transcript:
    """The messages a model sees, kept in step with a session's records.

    Its list only grows, but for one change in place: a `tool/call` record replaces the
    list's last message (the assistant message the call belongs to). `MessageView` relies on
    that being the only one.
    """

    __slots__ = ("_messages",)

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._messages: list[Message] = []
        for record in records:
            self.add(record)

    @property
    def messages(self) -> list[Message]:
        return self._messages

    def view(self, head: tuple[Message, ...] = ()) -> MessageView:
        """The messages so far, after `head` (a system prompt), frozen: what one request
        holds. O(1)."""
        return MessageView(self._messages, len(self._messages), head)

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


class MessageView(Sequence[Message]):
    """The messages of one model request: a read-only, fixed-length view of a transcript's
    list, which later records never change.

    Making one costs O(1), not a copy of the conversation. The transcript's list only grows,
    except that a `tool/call` record replaces its last message; so a view keeps the first
    `length` messages of the list and holds its own reference to the last of them, the only
    one the list may still replace. `head` comes first (the system prompt). A view compares
    equal to a tuple of the same messages, as the tuples requests held before (D330); a
    slice of it is a tuple.
    """

    __slots__ = ("_count", "_head", "_last", "_messages")

    def __init__(
        self, messages: list[Message], length: int, head: tuple[Message, ...] = ()
    ) -> None:
        if not 0 <= length <= len(messages):
            raise ValueError(f"a view of a list of {len(messages)} messages cannot hold {length}")
        self._head = head
        self._messages = messages
        self._count = length
        self._last = messages[length - 1] if length else None

    def __len__(self) -> int:
        return len(self._head) + self._count

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self[at] for at in range(*index.indices(len(self))))
        size = len(self)
        at = index + size if index < 0 else index
        if not 0 <= at < size:
            raise IndexError(f"message index {index} out of range for {size} messages")
        head = len(self._head)
        if at < head:
            return self._head[at]
        at -= head
        if at == self._count - 1 and self._last is not None:
            return self._last
        return self._messages[at]

    def __iter__(self) -> Iterator[Message]:
        if self._last is None:
            return iter(self._head)
        return chain(self._head, islice(self._messages, self._count - 1), (self._last,))

    def __reversed__(self) -> Iterator[Message]:
        if self._last is None:
            return reversed(self._head)
        before = (self._messages[at] for at in range(self._count - 2, -1, -1))
        return chain((self._last,), before, reversed(self._head))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageView | tuple):
            return NotImplemented
        theirs = cast("Sequence[object]", other)
        return len(self) == len(theirs) and all(a == b for a, b in zip(self, theirs, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"
