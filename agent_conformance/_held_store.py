"""A session store whose writes a rule can hold open: the lifecycle machine's slow store.

`MemoryStore` makes a record durable the moment it is appended, so a teardown that detaches
before it flushes, or returns before the flush has finished, looks just like a correct one.
`HeldStore` keeps appended records pending until `flush` moves them to the durable side,
and a rule can hold flushes (and reads, which is where a create or resume waits in the store)
open until it releases them: the windows of rules L1 and L4 stay open for as long as the
rule needs to look at them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import trio

from trio_agents import MemoryStore, Record, Session, StoredSession

__all__ = ["FlushCall", "HeldStore"]

Holdable = Literal["flush", "read"]


@dataclass(frozen=True)
class FlushCall:
    """One call of `flush`, as the store saw it when it began.

    session_id: the session flushed.
    records: the session's records at that moment.
    live: whether the session was live in this store then.
    """

    session_id: str
    records: tuple[Record, ...]
    live: bool


class HeldStore(MemoryStore):
    """A `MemoryStore` whose records become durable only when their session is flushed,
    and whose flushes and reads wait, while held, until `release`.

    flushes: every call of `flush`, in the order they began.
    waiting: how many flushes or reads are waiting for `release` now.
    """

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, list[Record]] = {}
        self._held: set[Holdable] = set()
        self._gate = trio.Event()
        self.flushes: list[FlushCall] = []
        self.waiting = 0

    def __repr__(self) -> str:
        return f"<HeldStore {len(self._data)} sessions>"

    # -- holding ------------------------------------------------------------------------

    def hold(self, what: Holdable) -> None:
        """From now on every `flush` (or every read: `exists`, `load`, `restore`) waits
        until `release`. Never blocks."""
        if not self._held:
            self._gate = trio.Event()
        self._held.add(what)

    def release(self) -> None:
        """Let every held call go on, and stop holding. Never blocks."""
        self._held.clear()
        self._gate.set()

    @property
    def holding(self) -> bool:
        """Whether anything is held now."""
        return bool(self._held)

    async def _wait_if_held(self, what: Holdable) -> None:
        if what in self._held:
            self.waiting += 1
            try:
                await self._gate.wait()
            finally:
                self.waiting -= 1

    # -- what is durable ----------------------------------------------------------------

    def durable(self, session_id: str) -> tuple[Record, ...]:
        """The records of `session_id` that are durable now (none if it is not stored).
        Never blocks: a rule reads it at the exact moment something returns."""
        stored = self._data.get(session_id)
        return tuple(stored[1]) if stored is not None else ()

    def _appended(self, session: Session, record: Record) -> None:
        self._pending.setdefault(session.id, []).append(record)

    def _committed_all(self, session: Session) -> bool:
        # Not MemoryStore's True: what is pending is durable only once flushed (D372).
        return not self._pending.get(session.id)

    async def flush(self, session: Session) -> None:
        """Make the records appended to `session` so far durable, after waiting while
        flushes are held. Always a checkpoint."""
        live = self.get(session.id) is session
        self.flushes.append(FlushCall(session.id, tuple(session.records), live))
        await self._wait_if_held("flush")
        await trio.lowlevel.checkpoint()
        pending = self._pending.pop(session.id, [])
        if pending:
            stored = self._data.get(session.id)
            if stored is None:
                stored = self._data[session.id] = (self._headers.pop(session.id), [])
            stored[1].extend(pending)

    def _detached(self, session: Session) -> None:
        # What was not flushed before the detach is lost, as a store writing behind may lose
        # it: the teardown flushes first (rule L1), and one that does not is caught by it.
        self._pending.pop(session.id, None)
        super()._detached(session)

    async def _read(self, session_id: str) -> StoredSession | None:
        await self._wait_if_held("read")
        return await super()._read(session_id)

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        await self._wait_if_held("flush")
        await super()._append_durably(stored, records)
