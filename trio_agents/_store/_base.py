"""Session stores: where sessions live while open and where their records are kept.

A store has two jobs. It keeps the live set: a session enters when its agent is published and
detaches when the agent closes, and an id that is live cannot enter again (rule L3). And it
keeps records: appends are observed as they happen and made durable by `flush`, and a stored
session can be restored, with a turn a crash left open closed first (rule L6).
"""

from __future__ import annotations

import abc
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from .._errors import SessionLiveError, SessionNotFoundError
from ._records import TURN_END, TURN_START, USER_MESSAGE, Record
from ._repair import closers
from ._session import Session

__all__ = ["MemoryStore", "SessionInfo", "SessionStore", "StoredSession"]

TITLE_LENGTH = 80  # characters of the first prompt a session's title keeps


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as its store holds it, from `SessionStore.restore`.

    id: the session's id.
    header: its header (`created_at`, and the `meta` it was created with).
    records: every record, in order (after crash repair, when `restore` did one).
    """

    id: str
    header: Mapping[str, Any]
    records: Sequence[Record]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A stored session at a glance.

    id: the session's id.
    created_at: when it was created (`time.time()`; 0.0 if its header does not say).
    records: how many records it holds.
    turns: how many turns it started.
    last_end: the kind of its last `turn/end` (`completed`, `aborted`, ...), None if no turn
        ended (or the session is damaged).
    damage: None, or why the session cannot be read: the message of the CorruptSessionError
        that `load` raises for it. `records` and `turns` then count the stored rows.
    title: the first prompt, on one line and shortened to 80 characters; None before the
        first prompt (or for a damaged session).
    updated_at: when the store last wrote the session (`time.time()`): its creation, or the
        commit of its latest records. Records carry no time, so this is the store's own.
    cwd: the `cwd` its header names (what `trio-agents acp` and `chat` give it), or None.
    """

    id: str
    created_at: float
    records: int
    turns: int
    last_end: str | None  # the kind of the last turn/end, or None if no turn ended
    damage: str | None = None
    title: str | None = None
    updated_at: float = 0.0
    cwd: str | None = None


def _nothing() -> None:
    pass


def new_header(meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"version": 1, "created_at": time.time(), **(meta or {})}


def summarize(
    session_id: str,
    header: Mapping[str, Any],
    records: Sequence[Record],
    updated_at: float | None = None,
) -> SessionInfo:
    """The glance at one readable session; `updated_at` defaults to its creation time."""
    turns = sum(1 for record in records if record.type == TURN_START)
    ends = [record for record in records if record.type == TURN_END]
    last = str(ends[-1].data["reason"]["kind"]) if ends else None
    first = next((record for record in records if record.type == USER_MESSAGE), None)
    created = float(header.get("created_at", 0.0))
    return SessionInfo(
        session_id,
        created,
        len(records),
        turns,
        last,
        title=title_of(str(first.data["content"])) if first is not None else None,
        updated_at=created if updated_at is None else updated_at,
        cwd=header_cwd(header),
    )


# A resource a front end put into a prompt (`trio_agents.acp._prompt`, whose tests pin this
# format): in a title it is only its name, as the editor showed it (`@file.py`).
_RESOURCE = re.compile(r'<resource uri="([^"]*)"(?: unread="[^"]*")?(?:/>|>.*?</resource>)', re.S)


def title_of(prompt: str) -> str:
    """A prompt as a title: its words on one line, each resource it carries as `@name`, at
    most TITLE_LENGTH characters (a longer one is cut at a word and ends with an
    ellipsis)."""
    named = _RESOURCE.sub(lambda found: "@" + _last_part(found[1]), prompt)
    line = " ".join(named.split())
    if len(line) <= TITLE_LENGTH:
        return line
    cut = line[: TITLE_LENGTH - 1]
    space = cut.rfind(" ")
    # A word longer than half the title is cut inside, rather than leaving a stub.
    return (cut[:space] if space > TITLE_LENGTH // 2 else cut) + "\u2026"


def _last_part(uri: str) -> str:
    path = uri.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1] or uri


def header_cwd(header: Mapping[str, Any]) -> str | None:
    cwd = header.get("cwd")
    return cwd if isinstance(cwd, str) else None


class SessionStore(abc.ABC):
    """The live set plus durable records. Subclasses provide the record backend.

    A subclass implements `flush` and `list_sessions` and the private `_attach`,
    `_appended`, `_read` and `_append_durably`; `running`, `_claim`, `_release`,
    `_detached` and `_check_running` are hooks with do-nothing defaults. A session is
    stored from its first record on, or from `persist`: one that never recorded anything
    and was not persisted leaves no trace.
    """

    class _LiveEntry:
        """A live session's link to its store: the observer that persists its appends, and
        its exact detach. One small object rather than three closures per live session.
        Nested in the store, whose protected hooks it calls."""

        __slots__ = ("session", "stop_committing", "store")

        def __init__(self, store: SessionStore, session: Session) -> None:
            self.store, self.session = store, session
            self.stop_committing: Callable[[], None] = _nothing

        def __call__(self, record: Record) -> None:
            self.store._appended(self.session, record)

        def committed(self) -> bool:
            return self.store._committed_all(self.session)

        async def commit(self) -> None:
            await self.store.flush(self.session)

        def detach(self) -> None:
            self.store._leave(self)

        def __repr__(self) -> str:
            return f"<persistence of session {self.session.id!r} in {self.store!r}>"

    def __init__(self) -> None:
        self._live: dict[str, Session] = {}
        self._restoring: dict[str, trio.Lock] = {}

    # -- the live set -------------------------------------------------------------------

    @property
    def live_ids(self) -> frozenset[str]:
        """The ids of the sessions live in this store now (a snapshot)."""
        return frozenset(self._live)

    def get(self, session_id: str) -> Session | None:
        """The live session with that id, or None. Never blocks."""
        return self._live.get(session_id)

    def enter(self, session: Session) -> Callable[[], None]:
        """Make `session` live and persist its appends; returns its exact detach.

        Raises SessionLiveError (a DuplicateSessionError) if a session with that id is live. The
        detach is idempotent and only ever removes this exact entry, so a stale detach can never
        remove a later session that reuses the id. Never blocks.

        Also raises what `_check_running` raises (a SqliteStore that is not running or is
        read-only: StoreClosedError, ReadOnlyStoreError) and what `_claim` raises
        (SessionLiveElsewhereError when another process has the session live).
        """
        if session.id in self._live:
            raise SessionLiveError(
                f"session {session.id!r} is already live in this store; close its agent "
                "first, or use another id"
            )
        self._check_running()
        self._claim(session.id)
        self._live[session.id] = session
        self._attach(session)
        entry = SessionStore._LiveEntry(self, session)
        session.observe(entry)
        entry.stop_committing = session.commit_with(entry)
        return entry.detach

    def _leave(self, entry: SessionStore._LiveEntry) -> None:
        session = entry.session
        session.unobserve(entry)
        # A detached session commits nowhere. The closure refers back to the entry: drop it,
        # so that a closed session is freed at once, not by the cycle collector (D376).
        stop, entry.stop_committing = entry.stop_committing, _nothing
        stop()
        if self._live.get(session.id) is session:
            del self._live[session.id]
            self._detached(session)
            self._release(session.id)

    # -- records ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None, None]:
        """Keep the store's background machinery (if any) running for the block.

        `open_runtime` enters it before anything else and leaves it last. This default has
        no machinery: entering is a checkpoint, leaving is not. A store that needs a
        connection or a writer task overrides it.
        """
        await trio.lowlevel.checkpoint()
        yield
        await trio.lowlevel.checkpoint()  # leaving is a checkpoint too

    async def restore(self, session_id: str) -> StoredSession:
        """Load a stored session for resuming it. If its last turn is open (a crash), the
        closers of rule L6 are appended durably first. Raises SessionNotFoundError.

        Concurrent restores of one id are serialized, so the repair is appended once.
        Always a checkpoint. Also raises DuplicateSessionError if the session is live, here
        or (a store that claims sessions) in another process, and CorruptSessionError for
        damaged records (a store that validates them).
        """
        # Two concurrent restores of one id must not both append closers: serialize them,
        # and let the second read the first one's repair.
        async with self._one_at_a_time(session_id):
            if session_id in self._live:
                raise SessionLiveError(
                    f"session {session_id!r} became live while it was being restored; "
                    "close its agent before resuming it again"
                )
            # Held while the repair is appended, so another process cannot be using the
            # session meanwhile; released again unless the session went live.
            self._claim(session_id)
            try:
                stored = await self.load(session_id)
                repair = closers(stored.records)
                if repair:
                    await self._append_durably(stored, repair)
                    records = [*stored.records, *repair]
                    stored = StoredSession(stored.id, stored.header, records)
            finally:
                if session_id not in self._live:
                    self._release(session_id)
            return stored

    @asynccontextmanager
    async def _one_at_a_time(self, session_id: str) -> AsyncGenerator[None, None]:
        """Hold the per-id lock `restore` and `delete` share, and forget it once unused."""
        lock = self._restoring.setdefault(session_id, trio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._restoring.pop(session_id, None)

    async def load(self, session_id: str) -> StoredSession:
        """The stored header and records (no repair). Raises SessionNotFoundError, and
        CorruptSessionError for damaged records (a store that validates them). Always a
        checkpoint."""
        stored = await self._read(session_id)
        if stored is None:
            raise SessionNotFoundError(f"no session {session_id!r} is stored in {self!r}")
        return stored

    async def delete(self, session_id: str) -> bool:
        """Remove a stored session, its header and records, for good: it is no longer
        listed, loaded or restored, and its id may be used again. Whether it was stored
        (deleting a session that is not stored is no error: the outcome is the same).

        Always a checkpoint. Raises SessionLiveError if the session is live in this store
        (close its agent first), SessionLiveElsewhereError if another process has it live
        (a store that claims sessions), what the store raises when it cannot write
        (not running, read-only, broken), and NotImplementedError for a store subclass
        that does not implement `_delete`. Serialized with `restore` of the same id.
        """
        async with self._one_at_a_time(session_id):
            self._check_running()
            await self._settle(session_id)
            if session_id in self._live:
                raise SessionLiveError(
                    f"session {session_id!r} is live in this store; close its agent "
                    "before deleting it"
                )
            # Held while the rows go, so no other process enters the session meanwhile.
            self._claim(session_id)
            try:
                return await self._delete(session_id)
            finally:
                if session_id not in self._live:
                    self._release(session_id)

    async def _settle(self, session_id: str) -> None:
        """Return once no record of `session_id` is queued for writing (a closed session
        whose flush timed out), which would write the session again after its delete.
        Always checkpoints; this default has no queue."""
        await trio.lowlevel.checkpoint()

    async def _delete(self, session_id: str) -> bool:
        """Remove the stored session `session_id` (not live, and claimed here); whether it
        was stored. Always checkpoints."""
        raise NotImplementedError(
            f"{self!r} cannot delete sessions: its class does not implement _delete"
        )

    async def exists(self, session_id: str) -> bool:
        """Whether the session is stored (it has a record). Always a checkpoint. Raises
        CorruptSessionError for damaged records (a store that validates them)."""
        return await self._read(session_id) is not None

    async def persist(self, session: Session) -> None:
        """Store live `session` now, even before its first record, and return once it is
        durable: from then on it is listed, `exists` is True, and it can be loaded and
        resumed (empty). With records already appended, the same as `flush`.

        Always a checkpoint. Raises ValueError if `session` is not live in this store, and
        what `flush` raises. A subclass stores a session with no records by overriding
        `_persist`; one that does not (a store written before `persist` existed) keeps its
        sessions from their first record only, and `persist` is then `flush`.
        """
        if self._live.get(session.id) is not session:
            raise ValueError(f"session {session.id!r} is not live in {self!r}; enter it first")
        await self._persist(session)

    async def _persist(self, session: Session) -> None:
        """Write `session`'s header (if not yet written) and its records durably."""
        await self.flush(session)

    @abc.abstractmethod
    async def flush(self, session: Session) -> None:
        """Return once every record appended to `session` so far is durable.

        The contract: always checkpoint, and raise (rather than return) if the records
        cannot be made durable. An agent's teardown calls it, bounded by `close_grace`.
        """

    @abc.abstractmethod
    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first. The contract: always checkpoint, and list a
        damaged session with its `damage` rather than raise (rule L12)."""

    @abc.abstractmethod
    def _attach(self, session: Session) -> None:
        """A session entered: remember its header for its first write."""

    def _claim(self, session_id: str) -> None:  # noqa: B027 - optional hook
        """Claim the session against other processes sharing the backend; raise
        SessionLiveElsewhereError if one of them has it live. Idempotent within a process."""

    def _release(self, session_id: str) -> None:  # noqa: B027 - optional hook
        """Give up the claim of `_claim`."""

    def _detached(self, session: Session) -> None:  # noqa: B027 - optional hook
        """A session left the live set: forget per-session bookkeeping."""

    @abc.abstractmethod
    def _appended(self, session: Session, record: Record) -> None:
        """A record was appended to a live session (synchronously, in the agent's task)."""

    @abc.abstractmethod
    async def _read(self, session_id: str) -> StoredSession | None:
        """The stored header and records of `session_id`, or None if it is not stored.
        Always checkpoints."""

    @abc.abstractmethod
    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        """Append `records` after `stored`'s and return once they are durable (the repair
        `restore` makes). Always checkpoints."""

    def _check_running(self) -> None:  # noqa: B027 - a hook with a do-nothing default
        """Raise if sessions cannot be entered now (a store that needs `running()`)."""

    def _committed_all(self, session: Session) -> bool:
        """Whether every record appended to live `session` so far is durable, without
        blocking. False (this default) means "ask `flush`", which is always correct."""
        return False


class MemoryStore(SessionStore):
    """Keeps everything in memory: nothing touches the disk, and a session can be resumed
    for as long as the store object lives. As in every store, a session is stored from its
    first record on (or from `persist`): one that never recorded anything leaves no trace."""

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, tuple[Mapping[str, Any], list[Record]]] = {}
        self._headers: dict[str, Mapping[str, Any]] = {}
        self._updated: dict[str, float] = {}  # session id -> time of its last write

    def __repr__(self) -> str:
        return f"<MemoryStore {len(self._data)} sessions>"

    def _attach(self, session: Session) -> None:
        if session.id not in self._data:
            self._headers[session.id] = session.header

    def _detached(self, session: Session) -> None:
        self._headers.pop(session.id, None)

    def _appended(self, session: Session, record: Record) -> None:
        self._stored(session)[1].append(record)
        self._updated[session.id] = time.time()

    def _stored(self, session: Session) -> tuple[Mapping[str, Any], list[Record]]:
        stored = self._data.get(session.id)
        if stored is None:
            stored = self._data[session.id] = (self._headers.pop(session.id), [])
            self._updated[session.id] = time.time()
        return stored

    async def _persist(self, session: Session) -> None:
        self._stored(session)
        await trio.lowlevel.checkpoint()

    def _committed_all(self, session: Session) -> bool:
        return True  # a record is stored as it is appended

    async def flush(self, session: Session) -> None:
        """Nothing to wait for: a record is stored as it is appended. Always a checkpoint."""
        await trio.lowlevel.checkpoint()

    async def _read(self, session_id: str) -> StoredSession | None:
        await trio.lowlevel.checkpoint()
        stored = self._data.get(session_id)
        if stored is None:
            return None
        return StoredSession(session_id, stored[0], tuple(stored[1]))

    async def _delete(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        self._updated.pop(session_id, None)
        return self._data.pop(session_id, None) is not None

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        await trio.lowlevel.checkpoint()
        self._data[stored.id][1].extend(records)
        self._updated[stored.id] = time.time()

    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first. Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        infos = [
            summarize(sid, header, recs, self._updated.get(sid))
            for sid, (header, recs) in self._data.items()
        ]
        return sorted(infos, key=lambda info: (info.created_at, info.id))
