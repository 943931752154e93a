"""Regressions from the lifecycle review, one test each: self-close of a fiber, a child
opened while its parent closes, a close whose grace expires, a crash inside an agent, a
read-only store, a losing concurrent resume, and disposers that must not pile up."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import (
    AgentOptions,
    DuplicateSessionError,
    MemoryStore,
    PersistenceError,
    Record,
    SqliteStore,
    ToolContext,
    TrioAgentsError,
    open_runtime,
)
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step


async def test_a_task_of_a_fiber_can_close_its_own_fiber() -> None:
    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")

        async def close_myself() -> None:
            await f.aclose()
            await trio.sleep_forever()  # cancelled when the fiber's nursery is

        f.nursery.start_soon(close_myself)
        await trio.testing.wait_all_tasks_blocked()
        assert f.state == "closed"


async def test_a_child_opened_while_its_parent_closes_is_closed_with_it() -> None:
    async with open_runtime(MemoryStore()) as rt:
        parent = await rt.open_child("parent")
        opened: list[object] = []

        async def open_child() -> None:
            try:
                opened.append(await parent.open_child("child"))
            except trio.ClosedResourceError:
                opened.append("refused")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(open_child)
            nursery.start_soon(parent.aclose)
        assert parent.state == "closed"
        assert parent._children == []  # pyright: ignore[reportPrivateUsage]
        assert all(o == "refused" or getattr(o, "state", None) == "closed" for o in opened)


async def test_when_the_grace_expires_the_closing_turn_end_is_still_stored_first() -> None:
    class Stubborn(EchoTool):
        name = "stubborn"

        async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
            with trio.CancelScope(shield=True):
                await trio.sleep(100)
            return "late"

    store = MemoryStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([tool_step(("stubborn", {}))]),
            tools=[Stubborn()],
            options=AgentOptions(close_grace=5),
            session_id="s",
        )
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        await handle.aclose()
        stored = (await store.load("s")).records
        # The loop's closing records reached the store before the session detached.
        assert [r.type for r in stored[-3:]] == ["tool/result", "step/end", "turn/end"]
        assert dict(stored[-1].data["reason"]) == {"kind": "closed"}


async def test_a_crash_inside_an_agent_still_unregisters_and_detaches_it() -> None:
    store = MemoryStore()
    closed: list[str] = []

    def refuse(record: Record) -> None:
        raise OSError("disk gone")

    with pytest.RaisesGroup(pytest.RaisesExc(PersistenceError), flatten_subgroups=True):
        async with open_runtime(store) as rt:
            rt.events.connect(lambda e: closed.append(type(e).__name__))
            handle = await rt.agents.create(model=ScriptedModel(), session_id="c")
            handle.agent.session.observe(refuse)
            handle.agent.send("boom")
            await trio.sleep_forever()
    assert store.live_ids == frozenset()
    assert "AgentClosed" in closed
    assert "SessionClosed" in closed


@pytest.mark.realtime
async def test_a_read_only_store_refuses_agents_and_closes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with SqliteStore(path).running():
        pass
    with pytest.raises(TrioAgentsError, match="read-only"):
        async with open_runtime(SqliteStore(path, readonly=True)) as rt:
            await rt.agents.create(model=ScriptedModel())


async def test_a_losing_concurrent_resume_does_not_repair_the_winners_session() -> None:
    store = MemoryStore()
    crashed = [
        Record.of("turn/start", {"turn": 1}),
        Record.of("user/message", {"id": "m1", "content": "x"}),
    ]
    store._data["r"] = ({}, list(crashed))  # pyright: ignore[reportPrivateUsage]
    async with open_runtime(store) as rt:
        outcomes: list[str] = []

        async def resume() -> None:
            try:
                await rt.agents.resume("r", model=ScriptedModel([reply("x", hold=True)]))
                outcomes.append("won")
            except DuplicateSessionError:
                outcomes.append("lost")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(resume)
            nursery.start_soon(resume)
        assert sorted(outcomes) == ["lost", "won"]
        stored = (await store.load("r")).records
        assert [r.type for r in stored].count("turn/end") == 1


async def test_closed_agents_leave_no_disposer_behind_on_their_owner() -> None:
    async with open_runtime(MemoryStore()) as rt:
        before = len(rt._disposers)  # pyright: ignore[reportPrivateUsage]
        for _ in range(10):
            handle = await rt.agents.create(model=ScriptedModel())
            await handle.aclose()
        assert len(rt._disposers) == before  # pyright: ignore[reportPrivateUsage]
