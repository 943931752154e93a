"""A session: the durable, append-only record of one agent's conversation. Pure; no trio.

The agent appends synchronously, so a record is in the session the moment the loop decides
it; a store that persists it observes appends and writes them behind (see `SessionStore`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

from .._errors import PersistenceError
from .._model._seam import Message
from ._records import Record
from ._transcript import MessageView, Transcript

__all__ = ["Committer", "Session"]

RecordObserver = Callable[[Record], None]


class Committer(Protocol):
    """How a live session's records are made durable: its store's side of the session."""

    def committed(self) -> bool:
        """Whether every record appended so far is durable. Never blocks."""
        ...

    async def commit(self) -> None:
        """Return once every record appended so far is durable; raise if they cannot be.
        Always a checkpoint (a store's `flush`)."""
        ...


class Session:
    """`id`, a `header` fixed at creation, and `records`, which only grow.

    The header is a read-only copy; a session the registry creates holds `version`,
    `created_at` and the `meta` given to `create`. Constructing one raises ValueError unless
    `id` is a non-empty str.
    """

    __slots__ = ("_committer", "_observers", "_records", "_transcript", "header", "id")

    def __init__(
        self,
        id: str,
        header: Mapping[str, Any] | None = None,
        records: Iterable[Record] = (),
    ) -> None:
        if not isinstance(id, str) or not id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"a session id must be a non-empty str, got {id!r}")
        self.id = id
        self.header: Mapping[str, Any] = MappingProxyType(dict(header or {}))
        self._records: list[Record] = list(records)
        self._transcript = Transcript(self._records)
        self._observers: list[RecordObserver] = []
        self._committer: Committer | None = None

    @property
    def records(self) -> Sequence[Record]:
        """Every record so far, oldest first (a copy)."""
        return tuple(self._records)

    def __len__(self) -> int:
        """How many records the session holds (without copying them)."""
        return len(self._records)

    def records_since(self, start: int) -> Sequence[Record]:
        """The records from index `start` on (a copy): a reader that remembers where it
        stopped need not copy the whole history again."""
        return tuple(self._records[start:])

    def messages(self) -> list[Message]:
        """The conversation as the model sees it (a copy)."""
        return list(self._transcript.messages)

    def message_snapshot(self, head: tuple[Message, ...] = ()) -> MessageView:
        """The conversation as the model sees it, after `head` (a system prompt), frozen:
        what one model request holds. O(1): a view later records do not change (D330)."""
        return self._transcript.view(head)

    def append(self, type: str, data: Mapping[str, Any]) -> Record:
        """Append a record holding a deep, read-only copy of `data`, hand it to every
        observer, and return it. Never blocks: a store writes behind (see `SessionStore`).

        Raises PersistenceError, chained to the observer's error, if an observer raises; the
        record is in the session by then, and later observers are not called.
        """
        record = Record.of(type, data)
        self._records.append(record)
        self._transcript.add(record)
        for observer in tuple(self._observers):
            try:
                observer(record)
            except Exception as exc:
                raise PersistenceError(
                    f"session {self.id!r}: observer {observer!r} failed on record "
                    f"{len(self._records) - 1} ({type})"
                ) from exc
        return record

    def observe(self, observer: RecordObserver) -> Callable[[], None]:
        """Call `observer` with every later record; returns a function that stops it.

        Observers are the persistence path: unlike event listeners, an observer that raises
        is not contained (it raises PersistenceError from `append`, which stops the agent's
        loop), because a record that cannot be made durable must not pass silently.
        """
        self._observers.append(observer)
        return lambda: self.unobserve(observer)

    def unobserve(self, observer: RecordObserver) -> None:
        """Stop calling `observer`; nothing happens if it is not observing."""
        if observer in self._observers:
            self._observers.remove(observer)

    @property
    def committer(self) -> Committer | None:
        """The commit path of the store the session is live in, None while it is in none:
        the agent awaits it before a tool starts (rule L7) and before it goes idle."""
        return self._committer

    def commit_with(self, committer: Committer) -> Callable[[], None]:
        """Make `committer` the session's commit path (a store does this as the session
        enters it); returns a function that removes it again, if it is still the one."""
        self._committer = committer

        def stop() -> None:
            if self._committer is committer:
                self._committer = None

        return stop
