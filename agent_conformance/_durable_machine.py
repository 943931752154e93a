"""The durable machine: random programs of agents on the real `SqliteStore`, in a real file,
whose runtime is closed cleanly or crashed the way a kill -9 leaves it, and whose sessions
are resumed by the runtime opened next over the same file.

Checked, in the contract's words (rule L6, and L1 and L3 where the file shows them):

- after a crash, the file holds every record whose flush returned, in order, each one as it
  was appended, and nothing torn (read back by a fresh store);
- resuming a session whose last turn is open first appends an `interrupted` result for
  every tool call without one and `turn/end {interrupted}`, durably, before the new turn;
  a session closed cleanly is resumed with nothing appended; the history is valid;
- resuming a live session is refused and appends nothing;
- after a clean close of the runtime, every closed session is in the file as it was,
  ending with its closing `turn/end`;
- before the machine flushes anything (rules L7, L8): while a tool runs, its step's
  `tool/call` records and all before them are in the file; an IDLE agent's whole session is
  there; a `prompt/queued` or `prompt/dropped` record gets there on its own.
- at rest, the runtime lists its stored sessions oldest first (L13), and a copy of the file
  with one session damaged is read as L12 says (`_durable_damage`).

A crash, honestly and deterministically: after every rule the machine flushes each live
session (so no write is in flight and "flushed" means everything appended so far); a crash
then takes from the runtime's store what the kernel takes from a killed process (its
connection, without committing an open transaction, and its session claims) before the
runtime's trio run is discarded, so nothing of the old runtime reaches the file afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import AsyncGenerator, Generator, Hashable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ClassVar, Literal

import trio
import trio.testing
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition

from trio_agents import (
    AgentHandle,
    AgentStatus,
    DuplicateSessionError,
    Record,
    Runtime,
    SessionInfo,
    SessionStore,
    SqliteStore,
    ToolCall,
    open_runtime,
)
from trio_agents.testing import (
    GateTool,
    ScriptedModel,
    ScriptedStep,
    TrioHost,
    WallClock,
    reply,
    tool_step,
)

from ._agent_checks import request_problem
from ._durable_asking import ANSWERS, AskingSessions
from ._durable_checks import (
    Restored,
    check_parked,
    check_remembered,
    check_repair_durable,
    check_resumed,
    highest_message_id,
    parked_of,
    suffixed,
    title_problem,
)
from ._durable_damage import DamagedCopies
from ._durable_file import FileReads
from ._durable_properties import (
    CALL_IDS_UNIQUE,
    CLOSED_SESSION_IN_FILE,
    CRASH_KEEPS_FLUSHED,
    CRASH_NO_TORN_RECORD,
    LISTED_OLDEST_FIRST,
    NOTHING_STRANDED,
    PARKED_RESTORED,
    PROPERTIES,
    QUEUED_PROMPT_COMMITTED,
    REQUEST_HISTORY_KEPT,
    RESUME_OF_LIVE_REFUSED,
    RESUMED_IDS_CONTINUE,
    show,
    shown,
)
from ._durable_restores import RestoresApart
from ._durable_store import StoreItself
from ._history import history_problems
from ._machine import ConformanceMachine, rule
from ._targets import RuntimeFactory, RuntimeSurface
from ._vocabulary import (
    PROMPT_QUEUED,
    TOOL_CALL,
    TURN_END,
    TURN_START,
)

__all__ = [
    "PROPERTIES",
    "DurableMachine",
    "RuntimeFactory",
    "durable_settings",
]

CRASH_CLOSE_TIMEOUT = 1.0  # real seconds the crashed run may take to end
# time.time() as a store keeps it (a REAL column; another store may keep milliseconds).
_CLOCK_SLACK = 0.01

IDS = ("a", "b")
# Prompts as users type them: a word, lines (a session's title is its first prompt on one
# line), more than a title holds, and text beyond ASCII.
PROMPTS = (
    "hello",
    # On one line, exactly a title's length: kept whole (the boundary of SessionInfo.title).
    "fix the failing test\nin tests/test_io.py\r\n\n  then run it again and show the diff now",
    "read the whole repository, then explain how a session is stored, resumed after a "
    "crash and listed, with the files and functions involved",
    "r\u00e9sum\u00e9 the caf\u00e9 \u2014 \u65e5\u672c\u8a9e\tplease",
)
# The ids a model gives its tool calls: fresh, one id twice in a reply, or one the session
# already holds.
CallIds = Literal["fresh", "twice-in-reply", "held-before"]
CALL_IDS: tuple[CallIds, ...] = ("fresh", "twice-in-reply", "held-before")


def builtin_runtime_factory(store: SessionStore) -> contextlib.AbstractAsyncContextManager[Runtime]:
    return open_runtime(store)


def durable_settings(base: Settings) -> Settings:
    """A real file costs real time: a third of the examples of `base`, shorter programs."""
    return Settings(
        base,
        max_examples=max(10, base.max_examples // 3),
        stateful_step_count=min(base.stateful_step_count, 20),
    )


def _memory_dir() -> str | None:
    """A RAM-backed directory if there is one (Linux's /dev/shm): a file there survives a
    killed process exactly as on a disk (the kernel holds what was written), and its fsyncs
    cost nothing; what only a power loss would lose, the contract does not promise anyway.
    None: the default temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class DurableMachine(
    AskingSessions, DamagedCopies, RestoresApart, StoreItself, FileReads, ConformanceMachine
):
    """Subclass and set `factory` to check another runtime over the real `SqliteStore`
    (`factory(store)` may use the store it is given, or another `SqliteStore` on its file).

    What a subclass's rules and checks can use:

    host: the TrioHost the current runtime runs in, on a WallClock (SQLite writes in worker
        threads); a crash replaces it.
    path: the example's store file, in a temporary directory removed after the example.
    rt: the runtime under test (None while it is restarted).
    store: the runtime's store (`rt.sessions`), a SqliteStore.
    handles: the handles of the live agents, by id.
    models: the ScriptedModel of each live agent (every model call is held).
    gates: the GateTool of each live agent (every tool call is held).
    expected: what the file must hold of each stored session that is not live: its
        records when it was closed, or when the runtime crashed.
    cleanly_closed: the ids in `expected` that were closed cleanly (not by a crash).
    trace: what the rules did, for the history fingerprint.

    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct rule traces produced.
    """

    factory: ClassVar[RuntimeFactory] = staticmethod(builtin_runtime_factory)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(self._new_host())
        self._dir = tempfile.mkdtemp(prefix="trio-agents-durable-machine-", dir=_memory_dir())
        self.path = Path(self._dir) / "sessions.sqlite3"
        self.rt: RuntimeSurface | None = None
        self._store: SqliteStore | None = None
        self.handles: dict[str, AgentHandle] = {}
        self.models: dict[str, ScriptedModel] = {}
        self.gates: dict[str, GateTool] = {}
        self.expected: dict[str, tuple[Record, ...]] = {}
        self.cleanly_closed: set[str] = set()
        self.trace: list[str] = []
        self.created: dict[str, int] = {}  # when each id was last created, in creations
        # Each session's record count at the last listing, and time.time() just before it:
        # a record counted later was written later (SessionInfo.updated_at).
        self._listed: dict[str, tuple[int, float]] = {}
        self._calls = 0
        self._closed_here: set[str] = set()  # closed in the current runtime
        # A connection the machine holds open on the file, as a reader of it would: the
        # store's connection is then never the last one, so closing it does not fold the
        # WAL into the file (an fsync each time), as a killed process's would not either.
        self._keeper: sqlite3.Connection | None = None
        self._store_checks: set[str] = set()
        self._reader: SqliteStore | None = None
        self._resumed_id = ""  # what the first send after the last resume returned
        self._cancels = 0  # cancels of a running turn so far
        self._restored = Restored(False, [], "")  # what the last resume gave

    @staticmethod
    def _new_host() -> TrioHost:
        # Real time: SQLite runs in worker threads, and an autojump clock would leap while
        # one runs, firing the agents' close graces.
        return TrioHost(WallClock(), call_timeout=30.0, stall_timeout=30.0)

    @property
    def store(self) -> SqliteStore:
        """The runtime's store (`rt.sessions`)."""
        assert self._store is not None
        return self._store

    # -- the runtime -----------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """Open the runtime over a new SqliteStore on the example's file."""
        self._open_runtime()

    def _open_runtime(self) -> None:
        self.rt = self._start_service(self._runtime)
        if self._keeper is None:
            # A short busy timeout: the lock it may take is tried at rest, when a store
            # commits nothing (D420).
            self._keeper = sqlite3.connect(self.path, check_same_thread=False, timeout=1.0)
            self._keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()
        self._settle()

    @asynccontextmanager
    async def _runtime(self) -> AsyncGenerator[RuntimeSurface, None]:
        async with type(self).factory(SqliteStore(self.path)) as rt:
            store = rt.sessions
            if not isinstance(store, SqliteStore):
                raise TypeError(
                    f"the durable machine checks runtimes over a SqliteStore; rt.sessions is "
                    f"{store!r}"
                )
            self._store = store
            # A reader of the file of its own, for the checks while the runtime runs.
            reader = SqliteStore(self.path, readonly=True)
            async with reader.running():
                self._reader = reader
                try:
                    yield rt
                finally:
                    self._reader = None

    def _settle(self) -> None:
        # What the runtime must have committed by itself is checked first: the machine's
        # own flush, next, commits everything.
        self.host.call(self._check_committed)
        self.host.call(self._quiesce)
        for sid, handle in self.handles.items():
            check_remembered(sid, handle.agent.session.records, self.policies.get(sid, []))

    async def _quiesce(self) -> None:
        # wait_all_tasks_blocked does not wait for worker threads: flushing every live
        # session does. An agent a flush lets go on (its commit done, it asks, records and
        # commits again, in a thread) may append more: flush again until a round appends
        # nothing, so afterwards no write is in flight and everything appended is flushed.
        await trio.testing.wait_all_tasks_blocked()
        while True:
            sizes = {sid: len(handle.agent.session) for sid, handle in self.handles.items()}
            for handle in list(self.handles.values()):
                await self.store.flush(handle.agent.session)
            await trio.testing.wait_all_tasks_blocked()
            if sizes == {sid: len(h.agent.session) for sid, h in self.handles.items()}:
                return

    def _history(self) -> Hashable:
        return tuple(self.trace)

    def _check_closing(self) -> None:
        self._close_runtime()

    def _after_close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _close_runtime(self) -> None:
        """Check the runtime's listing of its sessions, close it cleanly, then read every
        session it closed back from the file."""
        self._check_listing()
        sessions = {sid: handle.agent.session for sid, handle in self.handles.items()}
        self._stop_service()
        # Closing waits for worker threads, which settling does not: wait for the close.
        self.host.call(self._stopped.wait)
        for sid, session in sessions.items():
            self._forget(sid, session.records, clean=True)
        self.rt = None
        self._store = None
        files = self.host.call(self._read_file, sorted(self._closed_here))
        for sid in sorted(self._closed_here):
            self._check_closed(sid, files[sid])
        self._closed_here.clear()

    def _forget(self, sid: str, records: Sequence[Record], *, clean: bool) -> None:
        del self.handles[sid], self.models[sid], self.gates[sid]
        self.approvers.pop(sid, None)
        if records:
            self.expected[sid] = tuple(records)
            if clean:
                self.cleanly_closed.add(sid)
                self._closed_here.add(sid)
            else:
                self.cleanly_closed.discard(sid)

    def _check_closed(self, sid: str, found: Sequence[Record] | str | None) -> None:
        expected = self.expected[sid]
        CLOSED_SESSION_IN_FILE.check(
            found == expected and expected[-1].type == TURN_END,
            lambda: (
                f"session {sid!r} was closed holding {show(expected)}; read back from "
                f"the file it holds {shown(found)}"
            ),
        )

    # -- rules -----------------------------------------------------------------------------

    def _free(self) -> list[str]:
        return [sid for sid in IDS if sid not in self.handles and sid not in self.expected]

    def _any_stored_live(self) -> bool:
        # Restarting or crashing a runtime whose agents recorded nothing checks nothing.
        return any(len(handle.agent.session) for handle in self.handles.values())

    def _held_models(self) -> list[str]:
        return sorted(sid for sid, model in self.models.items() if model.held)

    def _held_gates(self) -> list[str]:
        return sorted(sid for sid, gate in self.gates.items() if gate.held)

    @precondition(lambda self: bool(self._free()))
    @rule(data=st.data())
    def create(self, data: st.DataObject) -> None:
        """Create an id that is neither live nor stored, with a held model and a gate
        tool."""
        sid = data.draw(st.sampled_from(self._free()), label="sid")
        asks = data.draw(st.booleans(), label="asks")
        remembers = asks and data.draw(st.booleans(), label="remembers")
        if asks:
            self.asking.add(sid)
        else:
            self.asking.discard(sid)
        self.host.call(self._create, sid, asks, remembers)
        said = f"{' asking' if asks else ''}{' remembering' if remembers else ''}"
        self.trace.append(f"create {sid}{said}")
        self._settle()

    async def _create(self, sid: str, asks: bool, remembers: bool) -> None:
        assert self.rt is not None
        model, gate = ScriptedModel(hold_all=True), GateTool()
        self.policies[sid] = [(0, remembers)]  # a new session
        approval = self._approval(sid, asks, remembers)
        handle = await self.rt.agents.create(
            model=model, tools=[gate], session_id=sid, approval=approval
        )
        self.handles[sid], self.models[sid], self.gates[sid] = handle, model, gate
        self.created[sid] = max(self.created.values(), default=-1) + 1

    @precondition(lambda self: bool(self.handles) or bool(self.expected))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        """Resume a live or stored id and send it a prompt at once: a live session must be
        refused; a stored one gets its open turn repaired before the new turn starts."""
        sid = data.draw(st.sampled_from(sorted({*self.handles, *self.expected})), label="sid")
        if sid in self.handles:
            self._resume_live(sid)
        else:
            self._resume_stored(sid, data.draw(st.booleans(), label="cancel first"))

    def _resume_stored(self, sid: str, cancel_first: bool, remembers: bool | None = None) -> None:
        asks = sid in self.asking
        before = self.expected.pop(sid)
        clean = sid in self.cleanly_closed
        self.cleanly_closed.discard(sid)
        if remembers is None:
            # Derived, not drawn (the programs stay as they were): every other stored length
            # resumes with a policy that does not remember, which must ask again even about
            # a tool the session holds an "always" answer for (A17).
            remembers = len(before) % 2 == 0
        self.host.call(self._resume, sid, cancel_first, asks, remembers)
        self.trace.append(
            f"resume {sid}{' cancel' if cancel_first else ''}{' asking' if asks else ''}"
        )
        records = self.handles[sid].agent.session.records
        check_parked(sid, before, records[len(before) :], self._restored, cancel_first)
        parked = parked_of(before)
        if parked and not cancel_first:
            # Sent while restored prompts were queued ahead of it: queued work (L8).
            queued = [
                str(r.data.get("id")) for r in records[len(before) :] if r.type == PROMPT_QUEUED
            ]
            QUEUED_PROMPT_COMMITTED.check(
                self._resumed_id in queued,
                lambda: (
                    f"session {sid!r} was resumed with the prompts {parked} parked; the prompt "
                    f"{self._resumed_id!r} sent then, behind them, has no prompt/queued record: "
                    f"{show(records[len(before) :])}"
                ),
            )
        self._settle()
        records = self.handles[sid].agent.session.records
        wanted = f"m{highest_message_id(before) + 1}"
        RESUMED_IDS_CONTINUE.check(
            self._resumed_id == wanted,
            lambda: (
                f"session {sid!r} held {show(before)} (its highest id "
                f"m{highest_message_id(before)}); the first send after its resume returned "
                f"{self._resumed_id!r}, not {wanted!r}"
            ),
        )
        check_resumed(sid, before, records, clean=clean)
        files = self.host.call(self._read_file, [sid])
        check_repair_durable(sid, before, records, files[sid])

    async def _resume(self, sid: str, cancel_first: bool, asks: bool, remembers: bool) -> None:
        assert self.rt is not None
        model, gate = ScriptedModel(hold_all=True), GateTool()
        approval = self._approval(sid, asks, remembers)
        handle = await self.rt.agents.resume(sid, model=model, tools=[gate], approval=approval)
        # From here on (after the repair a resume appends), the agent remembers or not (A17).
        self.policies.setdefault(sid, []).append((len(handle.agent.session.records), remembers))
        self.handles[sid], self.models[sid], self.gates[sid] = handle, model, gate
        agent = handle.agent
        # Before any other task runs: the repair must already be there, and the queued
        # prompts restored parked (L8).
        restored = Restored(agent.parked, [str(m) for m, _ in agent.pending], agent.status.value)
        if cancel_first:
            restored.cancelled = agent.cancel()
            restored.left = [str(m) for m, _ in agent.pending]
        self._restored = restored
        self._resumed_id = str(agent.send("after the resume"))

    @precondition(lambda self: any(parked_of(r) for r in self.expected.values()))
    @rule(data=st.data())
    def resume_parked_and_close(self, data: st.DataObject) -> None:
        """Resume a stored session that holds queued prompts a crash left unstarted, and
        close its agent before anything wakes it: the prompts must come back parked, and
        the close must keep them (no `prompt/dropped`) for the next resume (L8)."""
        choices = sorted(sid for sid, records in self.expected.items() if parked_of(records))
        self._resume_parked_and_close(data.draw(st.sampled_from(choices), label="sid"))

    def _resume_parked_and_close(self, sid: str) -> None:
        asks = sid in self.asking
        before = self.expected.pop(sid)
        self.cleanly_closed.discard(sid)

        async def resume_and_close() -> Restored:
            assert self.rt is not None
            handle = await self.rt.agents.resume(
                sid,
                model=ScriptedModel(hold_all=True),
                tools=[GateTool()],
                approval=self._approval(sid, asks),
            )
            agent = handle.agent
            restored = Restored(
                agent.parked, [str(m) for m, _ in agent.pending], agent.status.value
            )
            await handle.aclose()
            return restored

        restored = self.host.call(resume_and_close)
        self.trace.append(f"resume {sid} close parked")
        self._settle()
        files = self.host.call(self._read_file, [sid])
        found = files[sid]
        records = found if isinstance(found, tuple) else ()
        check_parked(sid, before, records[len(before) :], restored, cancelled=False)
        wanted = parked_of(before)
        PARKED_RESTORED.check(
            parked_of(records) == wanted,
            lambda: (
                f"session {sid!r} held queued prompts {wanted} that never started; resumed and "
                f"closed before anything woke it, it is stored holding "
                f"{parked_of(records) if records else shown(found)} left to run: "
                f"{show(records[len(before) :])} were appended"
            ),
        )
        if records:
            self.expected[sid] = records
            self.cleanly_closed.add(sid)

    def _resume_live(self, sid: str) -> None:
        session = self.handles[sid].agent.session
        before = len(session)
        outcome = self.host.call(self._try_resume_live, sid)
        self.trace.append(f"resume live {sid}: {outcome}")
        RESUME_OF_LIVE_REFUSED.check(
            outcome == "refused",
            f"resuming {sid!r} while it is live {outcome}",
        )
        self._settle()
        RESUME_OF_LIVE_REFUSED.check(
            len(session) == before,
            lambda: f"the refused resume of live {sid!r} appended {show(session.records[before:])}",
        )

    async def _try_resume_live(self, sid: str) -> str:
        assert self.rt is not None
        try:
            handle = await self.rt.agents.resume(sid, model=ScriptedModel(hold_all=True))
        except DuplicateSessionError:
            return "refused"
        except Exception as exc:
            return f"raised {type(exc).__name__}, not DuplicateSessionError"
        await handle.aclose()
        return "succeeded"

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        """Send a prompt to the live agent `sid`."""
        sid = data.draw(st.sampled_from(sorted(self.handles)), label="sid")
        handle = self.handles[sid]
        prompt = data.draw(st.sampled_from(PROMPTS), label="prompt")
        self.host.run_sync(handle.agent.send, prompt)
        self.trace.append(f"send {sid}")
        self._settle()

    @precondition(lambda self: bool(self._held_models()))
    @rule(calls=st.integers(0, 2), ids=st.sampled_from(CALL_IDS), data=st.data())
    def release_model(self, calls: int, data: st.DataObject, ids: CallIds = "fresh") -> None:
        """Let a held model call answer: text (`calls` 0), or `calls` gate tool calls,
        which are held in turn. Their ids are fresh, or, as some models and servers send
        them, one id twice in the reply, or an id the session already holds (a model's
        ids restart after a reload): each must be recorded unique (A13)."""
        sid = data.draw(st.sampled_from(self._held_models()), label="sid")
        approver = self.approvers.get(sid)
        if approver is not None and calls:
            answers = st.lists(st.sampled_from(ANSWERS), min_size=calls, max_size=calls)
            approver.answers.extend(data.draw(answers, label="answers"))
        session = self.handles[sid].agent.session
        self._check_request(sid)
        before = {str(r.data["call_id"]) for r in session.records if r.type == TOOL_CALL}
        asked: list[str] = []
        if calls:
            asked = [f"{sid}-call-{self._calls + n}" for n in range(calls)]
            self._calls += calls
            if ids == "twice-in-reply" and calls == 2:
                asked[1] = asked[0]
            elif ids == "held-before" and before:
                asked[0] = sorted(before)[0]
            step = tool_step(*(ToolCall(c, "gate", {}) for c in asked))
        else:
            step = reply("a reply")
        known = len(session)
        # A reply of text ends the turn: a prompt may then arrive while the agent commits
        # before it settles IDLE (its store works in a thread), and must start its turn.
        then_send = not calls and data.draw(st.booleans(), label="send while committing")
        # Another connection may hold the file's write lock meanwhile (a reader's tool, a
        # second process): the agent's commits wait for it, and so must what they guard (a
        # tool's start, L7's write-ahead; IDLE, L7's commit before it).
        take = data.draw(st.booleans(), label="write lock held elsewhere")
        with self._write_lock(take) as locked:
            self.host.call(self._release, sid, step, then_send)
            if locked:
                # Nothing can commit: only what is already in the file counts.
                self.host.call(self._check_committed, False)
        self.trace.append(
            f"release {sid} {calls} {ids if calls else ''}{' locked' if locked else ''}"
        )
        self._settle()
        self._check_at_rest()
        if asked:
            self._check_call_ids(sid, asked, before, session.records[known:])

    def _check_request(self, sid: str) -> None:
        """The held model call's request holds the session's history (A12): nothing but
        prompts queued behind the turn (not history yet) can be recorded while it is held."""
        requests = self.models[sid].requests
        if not requests:
            return
        records = self.handles[sid].agent.session.records
        problem = request_problem(records, requests[-1].messages, {}, {})
        if problem is not None:
            REQUEST_HISTORY_KEPT.fail(
                f"the held model request of {sid!r}, whose session holds {show(records)}: {problem}"
            )

    @contextlib.contextmanager
    def _write_lock(self, take: bool) -> Generator[bool]:
        """Hold the file's write lock on the machine's own connection for the block, if
        `take` and it can be had (`_lock`); yields whether it is held."""
        locked = take and self._lock()
        try:
            yield locked
        finally:
            if locked:
                assert self._keeper is not None
                self._keeper.execute("ROLLBACK")

    def _lock(self) -> bool:
        """Take the file's write lock on the machine's own connection; False if the store
        holds a write transaction open at rest (a store that commits lazily: what it has not
        committed is another property's finding), so the lock cannot be had."""
        assert self._keeper is not None
        try:
            self._keeper.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # "database is locked", after the busy timeout
            return False
        return True

    async def _release(self, sid: str, step: ScriptedStep, then_send: bool) -> None:
        self.models[sid].release(step)
        if then_send:
            # Every task blocked: the agent, if it is committing, waits for its thread.
            await trio.testing.wait_all_tasks_blocked()
            self.handles[sid].agent.send("sent while the turn commits")

    def _check_at_rest(self) -> None:
        """Every task at rest, every write flushed: an IDLE agent holds nothing queued but
        prompts restored parked (A1: a prompt it accepted has started its turn)."""
        for sid, handle in self.handles.items():
            agent = handle.agent
            queued = [str(mid) for mid, _ in agent.pending]
            if agent.status == AgentStatus.IDLE and queued and not agent.parked:
                NOTHING_STRANDED.fail(
                    f"agent {sid!r} is IDLE at rest with {queued} pending and not parked; "
                    f"its session holds {show(agent.session.records)}"
                )

    def _check_call_ids(
        self, sid: str, asked: Sequence[str], before: set[str], new: Sequence[Record]
    ) -> None:
        recorded = [str(r.data["call_id"]) for r in new if r.type == TOOL_CALL]
        held = set(before)
        for model_id, call_id in zip(asked, recorded, strict=False):
            fine = call_id == model_id if model_id not in held else suffixed(call_id, model_id)
            CALL_IDS_UNIQUE.check(
                fine and call_id not in held,
                lambda: (
                    f"the model of {sid!r} asked for the calls {list(asked)} while the session "
                    f"held the ids {sorted(before)}; the step recorded tool/call {recorded}"
                ),
            )
            held.add(call_id)

    @precondition(lambda self: bool(self._held_gates()))
    @rule(data=st.data())
    def finish_tool(self, data: st.DataObject) -> None:
        """Let the oldest held gate call of an agent return."""
        sid = data.draw(st.sampled_from(self._held_gates()), label="sid")
        gate = self.gates[sid]
        self.host.run_sync(gate.release, "done")
        self.trace.append(f"finish tool {sid}")
        self._settle()

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """Cancel the live agent `sid`, perhaps while another connection holds the file's
        write lock: a cancelled turn ends too, and its agent may go IDLE only once the end
        is committed (L7), as after a reply (`release_model`)."""
        sid = data.draw(st.sampled_from(sorted(self.handles)), label="sid")
        handle = self.handles[sid]
        # Every other cancel of a running turn, not a draw: a draw here would change every
        # program the machine makes, and which rare combinations a derandomised run reaches.
        self._cancels += handle.agent.status == AgentStatus.RUNNING
        with self._write_lock(self._cancels % 2 == 1) as locked:
            self.host.run_sync(handle.agent.cancel)
            if locked:
                self.host.call(self._check_committed, False)
        self.trace.append(f"cancel {sid}{' locked' if locked else ''}")
        self._settle()

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        """Close the agent `sid` through its handle."""
        sid = data.draw(st.sampled_from(sorted(self.handles)), label="sid")
        handle = self.handles[sid]
        self.host.call(handle.aclose)
        self._forget(sid, handle.agent.session.records, clean=True)
        self.trace.append(f"close {sid}")
        self._settle()

    @precondition(lambda self: self._any_stored_live())
    @rule()
    def restart(self) -> None:
        """Close the runtime cleanly, check what it left in the file, open a new one."""
        self._close_runtime()
        self.trace.append("restart")
        self._open_runtime()

    @precondition(lambda self: self._any_stored_live())
    @rule(queue_first=st.booleans(), cancel_first=st.booleans(), leave=st.booleans())
    def crash(
        self, queue_first: bool = False, cancel_first: bool = False, leave: bool = False
    ) -> None:
        """Kill the runtime as kill -9 would, at rest (everything appended has been flushed),
        then open a new runtime over a new SqliteStore on the same file, read every stored
        session back from it, and resume the sessions the crash cut (cancelling each at
        once, when `cancel_first`: the prompts it restored parked must be dropped), unless
        `leave`: they stay stored with their turns open, for a later resume or restore."""
        cut = sorted(self.handles)
        if queue_first:
            # A prompt queued behind each running turn, committed at once (L8): the crash
            # leaves it for the resume to restore parked.
            for sid in cut:
                agent = self.handles[sid].agent
                if agent.status == AgentStatus.RUNNING:
                    self.host.run_sync(agent.send, "queued before the crash")
            self.host.call(self._check_committed)
        for sid in cut:
            self._forget(sid, self.handles[sid].agent.session.records, clean=False)
        self._closed_here.clear()  # already checked: the crash check covers them
        self.host.call(self.store.simulate_kill)
        # The old run's tasks only meet a store without a connection now; whatever they
        # raise while they are discarded is not the new runtime's. (One trio run per
        # thread: the old one must end before the new one starts.)
        # A kill -9 waits for nothing: give the old run a moment to unwind (so its threads
        # do not pile up), not the close bound a clean close gets.
        self.host.close_timeout = min(self.host.close_timeout, CRASH_CLOSE_TIMEOUT)
        with contextlib.suppress(Exception), _silenced():
            self.host.close()
        self.host = self._new_host()
        self.rt = None
        self._store = None
        self.trace.append("crash")
        self._open_runtime()
        files = self.host.call(self._read_file, sorted(self.expected))
        for sid in sorted(self.expected):
            self._check_crashed(sid, files[sid])
        self._check_listing()
        for sid in [] if leave else cut:
            if self.expected.get(sid):
                self._resume_stored(sid, cancel_first)
        if leave and queue_first:
            # Left stored with prompts queued: one of them is resumed and closed parked.
            parked = [sid for sid in cut if parked_of(self.expected.get(sid, ()))]
            if parked:
                self._resume_parked_and_close(parked[0])

    def _check_listing(self) -> None:
        """At rest (every live session flushed), the runtime's store lists every stored
        session, oldest first, with its counts (L13)."""
        before = time.time()
        listed = self.host.call(self.store.list_sessions)
        held = {sid: tuple(h.agent.session.records) for sid, h in self.handles.items()}
        held = {**self.expected, **held}
        order = self.created
        stored = sorted((sid for sid in order if held.get(sid)), key=order.__getitem__)
        ids = [info.id for info in listed]
        LISTED_OLDEST_FIRST.check(
            ids == stored,
            lambda: (
                f"list_sessions() listed {ids}; the stored sessions, oldest first, are {stored}"
            ),
        )
        for info in listed:
            records = held[info.id]
            ends = [r for r in records if r.type == TURN_END]
            wanted = (
                len(records),
                sum(1 for r in records if r.type == TURN_START),
                str(dict(ends[-1].data["reason"]).get("kind")) if ends else None,
                None,
            )
            got = (info.records, info.turns, info.last_end, info.damage)
            if got != wanted:
                LISTED_OLDEST_FIRST.fail(
                    f"list_sessions() gives {info.id!r} (records, turns, last_end, damage) = "
                    f"{got}; the file holds {wanted}"
                )
            titled = title_problem(records, info.title)
            if titled:
                LISTED_OLDEST_FIRST.fail(f"list_sessions() gives {info.id!r} the {titled}")
            self._check_updated_at(info, before)
        self._listed = {info.id: (info.records, before) for info in listed}

    def _check_updated_at(self, info: SessionInfo, now: float) -> None:
        """`updated_at` is when the store last wrote the session: after the last listing if
        it holds records that listing did not count, and never in the future."""
        counted, since = self._listed.get(info.id, (info.records, -math.inf))
        told = f"list_sessions() gives {info.id!r} updated_at {info.updated_at!r}"
        if info.records > counted and info.updated_at < since - _CLOCK_SLACK:
            LISTED_OLDEST_FIRST.fail(
                f"{told}, but {info.records - counted} of its {info.records} records were "
                f"written after the listing before, made at time.time() = {since!r}"
            )
        if info.updated_at > time.time() + _CLOCK_SLACK:
            LISTED_OLDEST_FIRST.fail(f"{told}, later than now ({now!r} before the listing)")

    def _check_crashed(self, sid: str, found: Sequence[Record] | str | None) -> None:
        appended = self.expected[sid]
        held = found if isinstance(found, tuple) else ()
        problems = history_problems(held, allow_open_turn=True)
        CRASH_NO_TORN_RECORD.check(
            isinstance(found, tuple) and appended[: len(held)] == held and not problems,
            lambda: (
                f"session {sid!r} had {show(appended)} when the runtime crashed; the "
                f"file holds {shown(found)}" + (f" ({'; '.join(problems)})" if problems else "")
            ),
        )
        CRASH_KEEPS_FLUSHED.check(
            len(held) == len(appended),
            lambda: (
                f"session {sid!r} was flushed holding {show(appended)} before the "
                f"runtime crashed; the file holds only {show(held)}"
            ),
        )
        # The file is what the next runtime resumes.
        self.expected[sid] = held

    # -- after every rule ------------------------------------------------------------------

    def _verify(self) -> None:
        """Nothing between rules: every check reads the file, and the rules that change
        what it must hold (a crash, a resume, a clean close) make them."""


@contextlib.contextmanager
def _silenced() -> Generator[None, None, None]:
    """No logging while a killed runtime's tasks are discarded: a killed process says
    nothing, and its complaints about the store it lost are not the new runtime's."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)
