"""Handles, registry transactions and the store: rules L1-L6 of docs/contract.md, and the races of
issue 3's acceptance 2 (deterministic: gates and the autojump clock, no sleeps to wait)."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from agent_conformance._history import history_problems
from trio_agents import (
    AgentClosed,
    AgentCreated,
    AgentStatus,
    DuplicateSessionError,
    Event,
    FiberClosedError,
    MemoryStore,
    Record,
    SessionClosed,
    SessionCreated,
    SessionNotFoundError,
    SqliteStore,
    open_runtime,
)
from trio_agents._store._base import StoredSession
from trio_agents.testing import EchoTool, GateTool, ScriptedModel, reply, tool_step

from .support.helpers import all_tasks, of_type, turn_ends


class GatedStore(MemoryStore):
    """A memory store whose reads wait at a gate the test opens, so a create or resume can
    be parked at exactly that await."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None
        self.waiting = 0

    async def _read(self, session_id: str) -> StoredSession | None:
        if self.gate is not None:
            self.waiting += 1
            await self.gate.wait()
            self.waiting -= 1
        return await super()._read(session_id)


def lifecycle_events(events: list[Event]) -> list[str]:
    kinds = (AgentCreated, AgentClosed, SessionCreated, SessionClosed)
    return [type(e).__name__ for e in events if isinstance(e, kinds)]


async def test_L1_teardown_order_and_the_closing_turn_end_is_durable_first() -> None:
    store = MemoryStore()
    observed: list[str] = []
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([reply("x", hold=True)]), session_id="a"
        )
        agent = handle.agent

        def on_event(event: Event) -> None:
            if isinstance(event, AgentClosed):
                stored = store._data["a"][1]  # pyright: ignore[reportPrivateUsage]
                observed.append(
                    f"AgentClosed: registered={rt.agents.get('a') is not None} "
                    f"session live={'a' in store.live_ids} "
                    f"stored last={stored[-1].type} loop={agent.status.value}"
                )
            elif isinstance(event, SessionClosed):
                observed.append(f"SessionClosed: session live={'a' in store.live_ids}")

        rt.events.connect(on_event)
        handle.fiber.callback(
            lambda: observed.append(f"agent fiber unwinds: session live={'a' in store.live_ids}")
        )
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        await handle.aclose()
        assert observed == [
            "AgentClosed: registered=False session live=True stored last=turn/end loop=closed",
            "SessionClosed: session live=False",
            "agent fiber unwinds: session live=False",
        ]
        assert turn_ends(agent) == [{"kind": "closed"}]


async def test_L1_aclose_is_shielded_and_still_completes_when_its_caller_is_cancelled() -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=ScriptedModel([reply("x", hold=True)]))
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as scope:
            scope.cancel()
            await handle.aclose()
        assert handle.closed
        assert rt.agents.get(handle.agent.id) is None


async def test_L1_an_uncooperative_tool_is_bounded_by_close_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Stubborn(GateTool):
        async def __call__(self, arguments, context):  # type: ignore[no-untyped-def] # pyright: ignore
            with trio.CancelScope(shield=True):
                await trio.sleep(100)  # ignores the turn's cancellation for a while
            return "late"

    from trio_agents import AgentOptions

    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([tool_step(("gate", {}))]),
            tools=[Stubborn()],
            options=AgentOptions(close_grace=5),
        )
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        with caplog.at_level(logging.ERROR):
            await handle.aclose()
        # The shielded sleep cannot be cut short; close waited for it, no longer.
        assert trio.current_time() - start == pytest.approx(100)
        assert "did not stop within close_grace" in caplog.text


async def test_L2_handle_fiber_and_runtime_close_concurrently_and_join_one_teardown() -> None:
    events: list[Event] = []
    fiber_runs = 0
    async with open_runtime(MemoryStore()) as rt:
        rt.events.connect(events.append)
        f = await rt.open_child("owner")
        handle = await f.agents.create(model=ScriptedModel([reply("x", hold=True)]))

        async def slow_unwind() -> None:
            nonlocal fiber_runs
            fiber_runs += 1
            await trio.sleep(3)

        handle.fiber.push_async_callback(slow_unwind)
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        finished: dict[str, float] = {}

        async def close(name: str, fn: object) -> None:
            await fn()  # type: ignore[operator]
            finished[name] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "handle", handle.aclose)
            nursery.start_soon(close, "fiber", f.aclose)
            nursery.start_soon(close, "runtime", rt.aclose)
            nursery.start_soon(close, "handle again", handle.aclose)
        assert sorted(finished) == ["fiber", "handle", "handle again", "runtime"]
        assert fiber_runs == 1  # the agent's teardown ran once
        # Every owner returned only after that one teardown (3 virtual seconds) was over.
        assert min(finished.values()) >= 3
    await_closed = lifecycle_events(events)
    assert await_closed.count("AgentClosed") == 1
    assert await_closed.count("SessionClosed") == 1


async def test_L2_closing_the_owner_fiber_or_the_runtime_closes_its_agents() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        async with rt.fiber("f") as f:
            by_fiber = await f.agents.create(model=ScriptedModel())
            by_rt = await rt.agents.create(model=ScriptedModel())
        assert by_fiber.closed
        assert not by_rt.closed
        assert rt.agents.list() == [by_rt.agent]
    assert by_rt.closed
    assert by_rt.agent.status is AgentStatus.CLOSED
    assert store.live_ids == frozenset()


async def test_L3_same_id_race_one_wins_the_loser_leaves_nothing_behind() -> None:
    store = GatedStore()
    events: list[Event] = []
    async with open_runtime(store) as rt:
        rt.events.connect(events.append)
        store.gate = trio.Event()
        outcomes: list[str] = []

        async def create(label: str) -> None:
            try:
                await rt.agents.create(model=ScriptedModel(), session_id="same")
                outcomes.append(f"{label} won")
            except DuplicateSessionError as exc:
                outcomes.append(f"{label} lost: {exc}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create, "first")
            nursery.start_soon(create, "second")
            await trio.testing.wait_all_tasks_blocked()
            assert store.waiting == 2  # both prepared past the live check
            store.gate.set()
        assert sorted(o.split(":")[0].split()[1] for o in outcomes) == ["lost", "won"]
        assert any("is already live" in o for o in outcomes)
        assert [a.id for a in rt.agents.list()] == ["same"]
        assert store.live_ids == {"same"}
        assert lifecycle_events(events) == ["SessionCreated", "AgentCreated"]
        # The loser's private fiber and loop are gone: only the winner's tasks remain.
        assert len(rt.nursery.child_tasks) == 3  # the store and shell holders, the winner


async def test_L3_an_id_is_reusable_by_resume_once_its_entry_detached() -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s")
        handle.agent.send("a turn, so the session is stored")
        await handle.agent.wait_idle()
        with pytest.raises(DuplicateSessionError, match="is live"):
            await rt.agents.resume("s", model=ScriptedModel())
        await handle.aclose()
        again = await rt.agents.resume("s", model=ScriptedModel())
        assert again.agent.id == "s"
        await again.aclose()
        # A stored id is never reused for a fresh session: only resume takes it over.
        with pytest.raises(DuplicateSessionError, match="already exists"):
            await rt.agents.create(model=ScriptedModel(), session_id="s")


async def test_L4_create_racing_its_fibers_close_disposes_and_raises() -> None:
    store = GatedStore()
    events: list[Event] = []
    async with open_runtime(store) as rt:
        rt.events.connect(events.append)
        f = await rt.open_child("owner")
        store.gate = trio.Event()
        raised: list[BaseException] = []

        async def create() -> None:
            try:
                await f.agents.create(model=ScriptedModel(), session_id="x")
            except FiberClosedError as exc:
                raised.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(f.aclose)
            await trio.testing.wait_all_tasks_blocked()
            store.gate.set()
        assert len(raised) == 1
        assert "owner" in str(raised[0])
        assert rt.agents.get("x") is None
        assert store.live_ids == frozenset()
        assert lifecycle_events(events) == []


async def test_L4_create_whose_owner_closes_after_the_agent_task_started_rolls_back() -> None:
    events: list[Event] = []
    async with open_runtime(MemoryStore()) as rt:
        rt.events.connect(events.append)
        f = await rt.open_child("owner")

        # The owner's close starts in the same scheduler batch as the create.
        async def create() -> None:
            with pytest.raises(FiberClosedError):
                await f.agents.create(model=ScriptedModel(), session_id="y")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            nursery.start_soon(f.aclose)
        assert rt.agents.get("y") is None
        assert rt.sessions.live_ids == frozenset()
        # Whichever way the batch ran, nothing is half-published: either nothing was
        # announced, or every announcement is paired with its close.
        assert lifecycle_events(events) in (
            [],
            ["SessionCreated", "AgentCreated", "AgentClosed", "SessionClosed"],
        )


async def test_resume_racing_a_close_of_the_same_id_sees_the_drained_log() -> None:
    store = GatedStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([reply("x", hold=True)]), session_id="r"
        )
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        results: list[str] = []

        async def resume() -> None:
            try:
                resumed = await rt.agents.resume("r", model=ScriptedModel())
                results.append(f"resumed with {resumed.agent.session.records[-1].type}")
            except DuplicateSessionError:
                results.append("refused: live")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle.aclose)
            nursery.start_soon(resume)
        # Either the resume came while the id was live (refused) or after the drain, in
        # which case it saw the closing turn/end.
        assert results in (["refused: live"], ["resumed with turn/end"])
        if results == ["refused: live"]:
            resumed = await rt.agents.resume("r", model=ScriptedModel())
            assert resumed.agent.session.records[-1].type == "turn/end"


async def test_L5_after_a_close_by_any_path_nothing_remains_and_events_were_paired() -> None:
    store = MemoryStore()
    events: list[Event] = []
    async with open_runtime(store) as rt:
        rt.events.connect(events.append)
        by_handle = await rt.agents.create(model=ScriptedModel(), session_id="h")
        f = await rt.open_child("f")
        await f.agents.create(model=ScriptedModel(), session_id="f")
        await rt.agents.create(model=ScriptedModel(), session_id="r")
        await by_handle.aclose()
        await f.aclose()
        for sid in ("h", "f"):
            assert rt.agents.get(sid) is None
            assert sid not in [a.id for a in rt.agents.list()]
            assert sid not in store.live_ids
    assert store.live_ids == frozenset()
    for sid in ("h", "f", "r"):
        mine = [e for e in events if getattr(e, "agent_id", getattr(e, "session_id", None)) == sid]
        assert [type(e).__name__ for e in mine if not hasattr(e, "status")] == [
            "SessionCreated",
            "AgentCreated",
            "AgentClosed",
            "SessionClosed",
        ]


async def test_L5_a_raising_agent_closed_listener_does_not_stop_the_session_detach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:

        def explode(event: Event) -> None:
            if isinstance(event, AgentClosed):
                raise RuntimeError("listener bug")

        rt.events.connect(explode)
        handle = await rt.agents.create(model=ScriptedModel(), session_id="z")
        with caplog.at_level(logging.ERROR, logger="trio_agents.events"):
            await handle.aclose()
        assert store.live_ids == frozenset()
        assert "listener bug" in caplog.text


@pytest.mark.realtime
async def test_L6_sqlite_store_is_wal_and_writes_batches_transactionally(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with open_runtime(path) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([tool_step(("echo", {"text": "a"})), reply("ok")]),
            tools=[EchoTool()],
            session_id="w",
        )
        handle.agent.send("hi")
        await handle.agent.wait_idle()
        await handle.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    seqs = [
        row[0] for row in conn.execute("SELECT seq FROM records WHERE session_id='w' ORDER BY seq")
    ]
    assert seqs == list(range(len(seqs)))
    conn.close()


@pytest.mark.realtime
async def test_L6_resume_repairs_an_open_turn_before_the_agent_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    # A session as a crash leaves it: a turn open in the middle of a tool call.
    broken = [
        Record.of("turn/start", {"turn": 1}),
        Record.of("user/message", {"id": "m1", "content": "hi"}),
        Record.of("step/start", {"turn": 1, "step": 1}),
        Record.of("assistant/message", {"content": "", "finish": "tool_calls"}),
        Record.of("tool/call", {"call_id": "c1", "name": "gate", "arguments": {}}),
    ]
    async with store.running():  # creates the schema
        pass
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO sessions VALUES ('crashed', '{\"created_at\": 1}', 1)")
    for seq, record in enumerate(broken):
        conn.execute(
            "INSERT INTO records VALUES ('crashed', ?, ?, ?)",
            (seq, record.type, json.dumps(record.to_json()["data"])),
        )
    conn.commit()
    conn.close()
    async with open_runtime(store) as rt:
        handle = await rt.agents.resume("crashed", model=ScriptedModel())
        records = handle.agent.session.records
        assert [r.type for r in records[5:]] == ["tool/result", "step/end", "turn/end"]
        assert dict(records[7].data) == {"turn": 1, "reason": {"kind": "interrupted"}}
        assert history_problems(records, allow_open_turn=False) == []
        handle.agent.send("again")
        await handle.agent.wait_idle()
        assert turn_ends(handle.agent) == [{"kind": "interrupted"}, {"kind": "completed"}]
        assert of_type(handle.agent, "turn/start")[-1] == {"turn": 2}
    # The repair itself was durable before the agent ran.
    async with store.running():
        stored = await store.load("crashed")
        assert [r.type for r in stored.records][5:8] == ["tool/result", "step/end", "turn/end"]


async def test_resume_of_an_unknown_session_names_it() -> None:
    async with open_runtime(MemoryStore()) as rt:
        with pytest.raises(SessionNotFoundError, match="no session 'nope' is stored"):
            await rt.agents.resume("nope", model=ScriptedModel())


async def test_an_idle_agent_is_one_task_and_closing_it_leaves_none() -> None:
    # One lifecycle task hosts the agent's fiber and runs its loop: the memory of ten
    # thousand idle agents is mostly tasks, nurseries and cancel scopes (docs/design.md).
    async with open_runtime(MemoryStore()) as rt:
        await trio.testing.wait_all_tasks_blocked()
        before = all_tasks()
        handles = [await rt.agents.create(model=ScriptedModel()) for _ in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        assert all_tasks() == before + 3
        for handle in handles:
            await handle.aclose()
        assert all_tasks() == before


async def test_closing_an_agents_own_fiber_closes_the_agent() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([reply("x", hold=True)]), session_id="a"
        )
        unwound: list[str] = []
        handle.fiber.callback(lambda: unwound.append("fiber"))
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        await handle.fiber.aclose()
        assert handle.closed
        assert unwound == ["fiber"]
        assert rt.agents.get("a") is None
        assert "a" not in store.live_ids
        assert turn_ends(handle.agent) == [{"kind": "closed"}]
