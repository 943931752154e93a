"""Known-bad runtimes and stores for the durable machine (the real SqliteStore, crashes and
resumes): each is the real one with one seeded defect."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from unittest import mock

import trio

from trio_agents import (
    AgentHandle,
    AgentOptions,
    AgentRegistry,
    Approval,
    Fiber,
    Model,
    Record,
    Runtime,
    Session,
    SessionInfo,
    SessionStore,
    SqliteStore,
    StoredSession,
    StoreLockedError,
    Tool,
    open_runtime,
)
from trio_agents._agent import _agent as _agent_module
from trio_agents._agent import _approval_gate, _inbox, _step, _turn
from trio_agents._agent._approval import Decision, DecisionOutcome
from trio_agents._fiber import require_open
from trio_agents._store import _record_shape, _session, _transcript
from trio_agents._store._base import title_of
from trio_agents._store._repair import closers

from ._seeded import Seeded

# -- a registry that resumes without the repair -------------------------------------------


class _LoadingRegistry(AgentRegistry):
    """Resume reads the stored session with `load` instead of `restore`: the open turn a
    crash left is never closed."""

    __slots__ = ()

    async def resume(
        self,
        session_id: str,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        options: AgentOptions | None = None,
        approval: Approval | None = None,
    ) -> AgentHandle:
        require_open(self.owner, "resume an agent in")
        self._reject_live(session_id)  # pyright: ignore[reportPrivateUsage]
        sessions = self._services.sessions  # pyright: ignore[reportPrivateUsage]
        stored = await sessions.load(session_id)  # the mistake: load, not restore
        session = Session(session_id, stored.header, stored.records)
        return await self._publish(session, model, tools, options, approval)  # pyright: ignore[reportPrivateUsage]


class _LoadingRuntime(Runtime):
    def agents_for(self, owner: Fiber) -> AgentRegistry:
        if owner.runtime is not self:
            raise ValueError("a fiber of another runtime")
        return _LoadingRegistry(self._services, owner)  # pyright: ignore[reportPrivateUsage]


def resume_skips_repair(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
    return open_runtime(store, runtime_class=_LoadingRuntime)


def _ids_from_one(session: Session) -> tuple[int, int]:
    turns, _ = _turn.resume_counters(session)
    return turns, 0  # the mistake: message ids start again at m1


@asynccontextmanager
async def message_ids_restart(store: SessionStore) -> AsyncGenerator[Runtime]:
    """A resumed agent numbers its turns on from the session's, but its message ids start
    again at `m1` (the counter lives in the agent, not in the session)."""
    with mock.patch.object(_agent_module, "resume_counters", _ids_from_one):
        async with open_runtime(store) as rt:
            yield rt


_cancel = _agent_module.Agent.cancel


def _cancel_skipping_parked(agent: Any, reason: str = "cancelled", *, cause: Any = "user") -> bool:
    if agent.parked and agent.status.value == "idle":
        return False  # the mistake: prompts waiting for a wake are taken as nothing queued
    return _cancel(agent, reason, cause=cause)


_begin_close = _agent_module.Agent._begin_close  # pyright: ignore[reportPrivateUsage]


def _close_drops_parked(agent: Any) -> None:
    if agent.parked and not agent._closing:
        # The mistake: parked prompts are queued work like any other, dropped at a close.
        agent._parked = False
    _begin_close(agent)


@asynccontextmanager
async def close_drops_parked_prompts(store: SessionStore) -> AsyncGenerator[Runtime]:
    """Closing a resumed agent whose restored prompts wait parked drops them (recorded
    `prompt/dropped`, reason closed) instead of keeping them for the next resume."""
    with mock.patch.object(_agent_module.Agent, "_begin_close", _close_drops_parked):
        async with open_runtime(store) as rt:
            yield rt


def _settled_whatever_the_policy(approval: Any, request: Any, verdict: Any) -> Any:
    kept = approval.remembered.get(request.tool) if verdict == "ask" else None
    if kept is not None:  # the mistake: the policy's `remembers` is not looked at
        outcome: DecisionOutcome = "allow_always" if kept == "allow" else "reject_always"
        return Decision(outcome, by="remembered", note="an earlier answer")
    return _settled(approval, request, verdict)


_settled = Approval.settled


@asynccontextmanager
async def restored_always_ignores_policy(store: SessionStore) -> AsyncGenerator[Runtime]:
    """A resumed agent whose policy does not remember still decides by the "always"
    answers its session holds, without asking."""
    with mock.patch.object(Approval, "settled", _settled_whatever_the_policy):
        async with open_runtime(store) as rt:
            yield rt


def _leave_by_id(store: Any, entry: Any) -> None:
    """`_leave` without the check that the live entry is this session: by id."""
    session = entry.session
    session.unobserve(entry)
    stop, entry.stop_committing = entry.stop_committing, lambda: None
    stop()
    if session.id in store._live:  # the mistake: not `is session`
        del store._live[session.id]
        store._detached(session)
        store._release(session.id)


@asynccontextmanager
async def detach_by_id(store: SessionStore) -> AsyncGenerator[Runtime]:
    """A session's detach takes whatever entry its id has out of the store: a stale one,
    called after the id was entered anew, removes the new session."""
    with mock.patch.object(SessionStore, "_leave", _leave_by_id):
        async with open_runtime(store) as rt:
            yield rt


def _records_of_sessions(self: Any) -> Any:
    """StoreLockedError counting the sessions it did not store, not their records."""
    ids = sorted({session.id for session, _, _ in self._pending})
    return StoreLockedError(
        f"{len(ids)} records of {len(ids)} session(s) were not stored in {self.path}: they "
        f"could not be committed within close_grace={self.close_grace}s"
    )


@asynccontextmanager
async def unstored_counted_by_session(store: SessionStore) -> AsyncGenerator[Runtime]:
    """Closing a store whose file another connection holds locked says how many sessions
    lost records, in the place of how many records were lost."""
    with mock.patch.object(SqliteStore, "_not_stored", _records_of_sessions):
        async with open_runtime(store) as rt:
            yield rt


@asynccontextmanager
async def cancel_skips_parked_prompts(store: SessionStore) -> AsyncGenerator[Runtime]:
    """`cancel` on a resumed agent that holds parked prompts and runs no turn finds
    nothing to cancel: the prompts stay, to run at the next wake."""
    with mock.patch.object(_agent_module.Agent, "cancel", _cancel_skipping_parked):
        async with open_runtime(store) as rt:
            yield rt


async def _checkpoint_only(session: Session, why: str) -> None:
    await trio.lowlevel.checkpoint()  # the mistake: the decision waits for the next commit


@asynccontextmanager
async def approval_left_to_the_next_commit(store: SessionStore) -> AsyncGenerator[Runtime]:
    """An allowing decision is appended and left for the step's next commit (the tool's
    result, or the turn's end) instead of being committed before the tool starts: the
    tool/call records were committed already, so it looked covered."""
    with mock.patch.object(_approval_gate, "commit", _checkpoint_only):
        async with open_runtime(store) as rt:
            yield rt


@asynccontextmanager
async def remembered_answers_not_restored(store: SessionStore) -> AsyncGenerator[Runtime]:
    """A resumed agent starts with no "always" answers: they were kept in memory by the
    agent that got them, and nothing reads them back from the session's records."""
    with mock.patch.object(Approval, "restore", return_value=None):
        async with open_runtime(store) as rt:
            yield rt


@asynccontextmanager
async def prompts_after_commit_unseen(store: SessionStore) -> AsyncGenerator[Runtime]:
    """The inbox's `has_prompts` reads an empty queue (it looks at the wrong list): the loop
    does not look again after the commit that ends a turn, so a prompt sent during that
    commit is not seen, and the agent settles IDLE with it queued."""
    with mock.patch.object(_inbox.Inbox, "has_prompts", property(lambda self: False)):
        async with open_runtime(store) as rt:
            yield rt


_run_turn = _agent_module.Agent._run_turn  # pyright: ignore[reportPrivateUsage]


async def _run_turn_then_idle(agent: Any, prompt: Any) -> None:
    await _run_turn(agent, prompt)
    if not agent.pending and not agent.parked:
        agent._settle()  # the mistake: IDLE as the turn ends, the commit after it


@asynccontextmanager
async def idle_before_commit(store: SessionStore) -> AsyncGenerator[Runtime]:
    """An agent turns IDLE as soon as a turn ends with nothing queued, and commits the
    finished turn after (the commit is quick, its author thought): while another
    connection holds the file's write lock, `wait_idle` returns before the turn is
    durable."""
    with mock.patch.object(_agent_module.Agent, "_run_turn", _run_turn_then_idle):
        async with open_runtime(store) as rt:
            yield rt


def _none_held(session: Session) -> set[str]:
    return set()  # the mistake: the ids the session holds are taken as none


@asynccontextmanager
async def call_ids_of_this_process(store: SessionStore) -> AsyncGenerator[Runtime]:
    """An agent makes its tool-call ids unique among the ones it gave out itself, and
    starts from none: the ids its session held when it was resumed are not looked at."""
    with mock.patch.object(_step, "session_call_ids", _none_held):
        async with open_runtime(store) as rt:
            yield rt


# -- stores with one defect in their repair or their commits -------------------------------

Repair = Callable[[Sequence[Record]], list[Record]]


class _RepairingStore(SqliteStore):
    """`restore` with its own repair function (what `SessionStore.restore` does, concurrent
    restores of one id serialized, without claims: the machine never restores a session
    that another open of the store holds)."""

    repair: Repair = staticmethod(closers)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._repair_locks: dict[str, trio.Lock] = {}

    async def restore(self, session_id: str) -> StoredSession:
        if session_id in self.live_ids:
            raise AssertionError("the machine resumes a live session only through the registry")
        async with self._repair_locks.setdefault(session_id, trio.Lock()):
            stored = await self.load(session_id)
            repair = type(self).repair(stored.records)
            if repair:
                await self._append_durably(stored, repair)
                stored = StoredSession(stored.id, stored.header, [*stored.records, *repair])
            return stored


def _closers_without_results(records: Sequence[Record]) -> list[Record]:
    """The repair closes the open step and turn but forgets the tool calls left without a
    result."""
    return [r for r in closers(records) if r.type != "tool/result"]


def _closers_turn_end_first(records: Sequence[Record]) -> list[Record]:
    """The repair writes turn/end before the results and the step/end it closes."""
    repair = closers(records)
    return repair[-1:] + repair[:-1]


def _closers_of_closed_turns(records: Sequence[Record]) -> list[Record]:
    """The repair takes a turn that ended `closed` (a clean close cut it) for one the crash
    left open, and ends it again as interrupted."""
    repair = closers(records)
    last = records[-1] if records else None
    if repair or last is None or last.type != "turn/end":
        return repair
    if dict(last.data["reason"]).get("kind") != "closed":
        return repair
    return [Record.of("turn/end", {"turn": last.data["turn"], "reason": {"kind": "interrupted"}})]


class _ForgetfulRepairStore(_RepairingStore):
    repair = staticmethod(_closers_without_results)


class _TurnEndFirstStore(_RepairingStore):
    repair = staticmethod(_closers_turn_end_first)


class _ClosedTurnRepairStore(_RepairingStore):
    repair = staticmethod(_closers_of_closed_turns)


class _LazyCommitStore(SqliteStore):
    """Saves a round trip per batch: a batch's transaction is committed when the next batch
    begins (or when the store closes), so the last batch whose flush returned is still
    uncommitted when the process dies."""

    def _write_batch(
        self,
        headers: Mapping[str, Mapping[str, Any]],
        batch: Sequence[tuple[Session, int, Record]],
    ) -> None:
        assert self._conn is not None
        conn = self._conn
        if conn.in_transaction:
            conn.execute("COMMIT")  # the previous batch
        conn.execute("BEGIN IMMEDIATE")
        for sid, header in headers.items():
            conn.execute(
                "INSERT INTO sessions (id, header, created_at) VALUES (?, ?, ?)",
                (sid, _json(header), float(header.get("created_at", 0.0))),
            )
        conn.executemany(
            "INSERT INTO records (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
            [(s.id, seq, rec.type, _json(rec.to_json()["data"])) for s, seq, rec in batch],
        )
        # the mistake: no COMMIT here; the next batch's begins with it

    def _append_sync(self, stored: StoredSession, records: Sequence[Record]) -> None:
        self._commit_open()
        super()._append_sync(stored, records)

    async def _drain(self) -> None:
        await super()._drain()
        await self._db(self._commit_open)

    def _commit_open(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            conn.execute("COMMIT")


class _ClaimsCommittedStore(SqliteStore):
    """Says a session's records are committed once they are queued for the writer: the
    agent's commit before its tools (and before it settles IDLE) returns at once, and the
    records wait for the writer's next trigger."""

    def _committed_all(self, session: Session) -> bool:
        return True


class _QueuedPromptLingersStore(SqliteStore):
    """Commits at turn boundaries only: a prompt/queued or prompt/dropped record waits in
    memory for the turn it queues behind to reach its next boundary."""

    def _appended(self, session: Session, record: Record) -> None:
        if record.type in ("prompt/queued", "prompt/dropped"):
            with self._guarded():
                self._pending.append((session, len(session) - 1, record))
            return
        super()._appended(session, record)


class _ListedNewestFirstStore(SqliteStore):
    """Lists sessions newest first (what a listing shown to a person usually wants, but not
    the contract's oldest first)."""

    async def list_sessions(self) -> list[SessionInfo]:
        return list(reversed(await super().list_sessions()))


class _DamageHiddenStore(SqliteStore):
    """Lists only the sessions that can be read (a listing of what can be resumed, so a
    person is never offered a session that fails): a damaged one disappears."""

    async def list_sessions(self) -> list[SessionInfo]:
        return [info for info in await super().list_sessions() if info.damage is None]


class _OwnLocks(dict[str, trio.Lock]):
    def setdefault(self, key: str, default: trio.Lock | None = None) -> trio.Lock:
        return trio.Lock()  # a lock of its own for every restore: none waits for another


class _UnserializedRestoreStore(SqliteStore):
    """Gives each restore a lock of its own instead of one per session id (a dict of locks
    that forgets them): two restores of one crashed session at once both append the
    closers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._restoring = _OwnLocks()
        self._at_once: dict[str, int] = {}

    async def restore(self, session_id: str) -> StoredSession:
        self._at_once[session_id] = self._at_once.get(session_id, 0) + 1
        try:
            return await super().restore(session_id)
        finally:
            self._at_once[session_id] -= 1

    async def load(self, session_id: str) -> StoredSession:
        stored = await super().load(session_id)
        # The missing lock's window, held open: a restore beside another of the same id
        # lets the other load too before it repairs. Without this the defect shows only
        # when the two worker threads happen to overlap, which a loaded machine may not do.
        if self._at_once.get(session_id, 0) > 1:
            await trio.sleep(0.2)
        return stored


class _TitledByLatestPromptStore(SqliteStore):
    """Titles a session with its latest prompt, the one a user last saw, rather than its
    first."""

    async def list_sessions(self) -> list[SessionInfo]:
        listed = await super().list_sessions()
        titled: list[SessionInfo] = []
        for info in listed:
            prompts: list[str] = []
            if info.damage is None:
                stored = await self.load(info.id)
                said = [r for r in stored.records if r.type == "user/message"]
                prompts = [str(r.data["content"]) for r in said]
            title = title_of(prompts[-1]) if prompts else info.title
            titled.append(dataclasses.replace(info, title=title))
        return titled


class _UpdatedWhenMadeStore(SqliteStore):
    """Reports when a session was made as when it was last written (the row's time is set
    when the session is made, and appends leave it alone)."""

    async def list_sessions(self) -> list[SessionInfo]:
        listed = await super().list_sessions()
        return [dataclasses.replace(info, updated_at=info.created_at) for info in listed]


class _RestoreKeepsClaimStore(SqliteStore):
    """Keeps the claim a restore took (the session is about to go live anyway, its author
    thought): a restore that does not resume, a reader's, leaves the session claimed
    against every other process."""

    async def restore(self, session_id: str) -> StoredSession:
        stored = await super().restore(session_id)
        self._claim(session_id)
        return stored


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value))


def _any_int(value: object) -> bool:
    return isinstance(value, int)  # a bool is an int too


@asynccontextmanager
async def bools_counted_as_numbers(store: SessionStore) -> AsyncGenerator[Runtime]:
    """(L12) A store's check of a whole number takes any `int`, so `true` passes for a
    `turn` or a `step` (a bool is an int in Python, though not in JSON)."""
    lenient = {
        kind: tuple(
            (key, (what, _any_int) if what == "a whole number" else (what, check))
            for key, (what, check) in fields
        )
        for kind, fields in _record_shape._FIELDS.items()  # pyright: ignore[reportPrivateUsage]
    }
    with mock.patch.dict(_record_shape._FIELDS, lenient):  # pyright: ignore[reportPrivateUsage]
        async with open_runtime(store) as rt:
            yield rt


def store_factory_for(store_class: type[SqliteStore]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
        assert isinstance(store, SqliteStore)
        return open_runtime(store_class(store.path))

    factory.__name__ = store_class.__name__.strip("_")
    return factory


repair_forgets_dangling_calls = store_factory_for(_ForgetfulRepairStore)
repair_turn_end_first = store_factory_for(_TurnEndFirstStore)
repair_of_closed_turn = store_factory_for(_ClosedTurnRepairStore)
last_batch_uncommitted = store_factory_for(_LazyCommitStore)
claims_committed = store_factory_for(_ClaimsCommittedStore)
queued_prompt_lingers = store_factory_for(_QueuedPromptLingersStore)
sessions_listed_newest_first = store_factory_for(_ListedNewestFirstStore)
damaged_sessions_unlisted = store_factory_for(_DamageHiddenStore)
restores_repair_twice = store_factory_for(_UnserializedRestoreStore)
restore_keeps_its_claim = store_factory_for(_RestoreKeepsClaimStore)
titled_by_latest_prompt = store_factory_for(_TitledByLatestPromptStore)
updated_when_made = store_factory_for(_UpdatedWhenMadeStore)


class _TranscriptWithoutInterrupted(_transcript.Transcript):
    """A history rebuilt from stored records leaves out the results marked interrupted (the
    repair's), taken for noise: the resumed model sees calls without their results."""

    __slots__ = ()

    def __init__(self, records: Any = ()) -> None:
        super().__init__(
            r for r in records if not (r.type == "tool/result" and r.data.get("interrupted"))
        )


@asynccontextmanager
async def restored_without_interrupted(store: SessionStore) -> AsyncGenerator[Runtime]:
    with mock.patch.object(_session, "Transcript", _TranscriptWithoutInterrupted):
        async with open_runtime(store) as rt:
            yield rt


SEEDED: tuple[Seeded, ...] = (
    Seeded("idle-before-commit", idle_before_commit, "durable", "idle-after-commit"),
    Seeded(
        "restored-without-interrupted",
        restored_without_interrupted,
        "durable",
        "request-history-kept",
    ),
    Seeded("detach-by-id", detach_by_id, "durable", "stale-detach-harmless"),
    Seeded(
        "unstored-counted-by-session",
        unstored_counted_by_session,
        "durable",
        "close-reports-unstored",
    ),
    Seeded("restores-repair-twice", restores_repair_twice, "durable", "restore-repairs-once"),
    Seeded(
        "titled-by-latest-prompt",
        titled_by_latest_prompt,
        "durable",
        "list-sessions-oldest-first",
    ),
    Seeded(
        "restore-keeps-its-claim", restore_keeps_its_claim, "durable", "restore-frees-its-claim"
    ),
    Seeded(
        "claims-committed",
        claims_committed,
        "durable",
        "tool-call-durable-before-tool",
        also=("idle-after-commit",),
    ),
    Seeded("queued-prompt-lingers", queued_prompt_lingers, "durable", "queued-prompt-committed"),
    Seeded("updated-when-made", updated_when_made, "durable", "list-sessions-oldest-first"),
    Seeded(
        "sessions-listed-newest-first",
        sessions_listed_newest_first,
        "durable",
        "list-sessions-oldest-first",
    ),
    Seeded(
        "bools-counted-as-numbers", bools_counted_as_numbers, "durable", "damaged-session-named"
    ),
    Seeded(
        "damaged-sessions-unlisted",
        damaged_sessions_unlisted,
        "durable",
        "damaged-session-named",
    ),
    Seeded(
        "call-ids-of-this-process",
        call_ids_of_this_process,
        "durable",
        "call-ids-unique-in-session",
    ),
    Seeded("message-ids-restart", message_ids_restart, "durable", "resumed-ids-continue"),
    Seeded(
        "approval-left-to-the-next-commit",
        approval_left_to_the_next_commit,
        "durable",
        "approval-durable-before-tool",
    ),
    Seeded(
        "remembered-answers-not-restored",
        remembered_answers_not_restored,
        "durable",
        "always-answers-resumed",
    ),
    Seeded(
        "prompts-after-commit-unseen",
        prompts_after_commit_unseen,
        "durable",
        "no-prompt-stranded",
        # The same property read on resume: restored prompts are not parked; and the prompt
        # the agent went IDLE past was queued after its commit, so not in the file (L7).
        also=("parked-prompts-restored", "idle-after-commit"),
    ),
    Seeded(
        "cancel-skips-parked-prompts",
        cancel_skips_parked_prompts,
        "durable",
        "parked-prompts-restored",
    ),
    Seeded("resume-skips-repair", resume_skips_repair, "durable", "resume-ends-open-turn"),
    Seeded(
        "restored-always-ignores-policy",
        restored_always_ignores_policy,
        "durable",
        "always-answers-resumed",
    ),
    Seeded(
        "close-drops-parked-prompts",
        close_drops_parked_prompts,
        "durable",
        "parked-prompts-restored",
    ),
    Seeded(
        "repair-forgets-dangling-calls",
        repair_forgets_dangling_calls,
        "durable",
        "resume-answers-dangling-calls",
        also=("restore-repairs-once",),  # the same repair, read by a restore alone
    ),
    Seeded(
        "repair-turn-end-first",
        repair_turn_end_first,
        "durable",
        "resume-repair-comes-first",
        also=("restore-repairs-once",),
    ),
    Seeded(
        "repair-of-closed-turn",
        repair_of_closed_turn,
        "durable",
        "resume-after-close-adds-nothing",
        also=("restore-repairs-once",),
    ),
    Seeded(
        "last-batch-uncommitted",
        last_batch_uncommitted,
        "durable",
        "crash-keeps-flushed-records",
        # A lost batch can also be a session's first: then the file lacks the whole session,
        # which the torn-record check sees first, depending on when the writer thread ran;
        # or it holds a step's tool calls, which write-ahead (L7) wants before the tool; or
        # it holds a finished turn, which L7 wants committed before the agent settles IDLE.
        also=(
            "crash-leaves-no-torn-record",
            "tool-call-durable-before-tool",
            "idle-after-commit",
            "approval-durable-before-tool",  # an allowing answer is in the uncommitted batch
            "closed-session-in-file",  # a closed session whose last batch a damage rule reads
        ),
    ),
)
