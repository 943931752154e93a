"""Regressions from the lifecycle review, one test each: self-close of a fiber, a child
opened while its parent closes, a close whose grace expires, a crash inside an agent, a
read-only store, a losing concurrent resume, disposers that must not pile up, a closed agent
freed without the cycle collector, and a create cancelled as its agent starts."""

from __future__ import annotations

import contextlib
import gc
import pathlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import (
    Agent,
    AgentOptions,
    DuplicateSessionError,
    MemoryStore,
    PersistenceError,
    Record,
    Runtime,
    SqliteStore,
    ToolContext,
    TrioAgentsError,
    open_runtime,
)
from trio_agents._fiber import AgentFiber
from trio_agents._registry import Lifecycle
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step

from .support.helpers import all_tasks


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


class FailingAtExitStore(MemoryStore):
    """A store whose `running()` fails on the way out, as a SQLite store whose writer hit a
    full disk does."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncGenerator[None, None]:
        await trio.lowlevel.checkpoint()
        yield
        raise OSError("the disk is full")


async def test_a_runtime_failing_under_its_block_raises_its_errors_and_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The block sees the runtime's failure as a cancellation; closing raises the failure and
    # the store's own, which propagate in its place rather than being logged (D357).
    def refuse(record: Record) -> None:
        raise OSError("disk gone")

    with pytest.RaisesGroup(
        pytest.RaisesExc(PersistenceError), pytest.RaisesExc(OSError), flatten_subgroups=True
    ):
        async with open_runtime(FailingAtExitStore()) as rt:
            handle = await rt.agents.create(model=ScriptedModel(), session_id="c")
            handle.agent.session.observe(refuse)
            handle.agent.send("boom")
            await trio.sleep_forever()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


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


def _count(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if type(o) is kind)


async def test_a_closed_agent_is_freed_without_the_cycle_collector() -> None:
    # The agent's fiber reaches its lifecycle to close it. Once the agent is closed that
    # link must not keep it (and its whole session) alive until the cycle collector runs.
    async with open_runtime(MemoryStore()) as rt:
        gc.collect()
        gc.disable()
        try:
            before = (_count(Lifecycle), _count(Agent), _count(AgentFiber))
            handle = await rt.agents.create(model=ScriptedModel([reply("hi")]))
            handle.fiber.callback(lambda: None)
            handle.agent.send("go")
            await handle.agent.wait_idle()
            await handle.aclose()
            del handle
            assert (_count(Lifecycle), _count(Agent), _count(AgentFiber)) == before
        finally:
            gc.enable()


async def test_a_closed_agents_fiber_still_reports_the_errors_of_its_close() -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=ScriptedModel())

        async def fail() -> None:
            raise ValueError("disposer failed")

        handle.fiber.push_async_callback(fail)
        with pytest.RaisesGroup(ValueError, match="errors while closing agent"):
            await handle.aclose()
        with pytest.RaisesGroup(ValueError, match="errors while closing agent"):
            await handle.fiber.aclose()  # memoized: the same outcome, after the close


class _SlowTeardown(Lifecycle):
    """A teardown that takes a (virtual) second, as a slow store or shell would."""

    async def _teardown(self) -> None:
        await trio.sleep(1)
        await super()._teardown()


class _SlowTeardownRuntime(Runtime):
    lifecycle_class = _SlowTeardown


class _CancelOnceStarted(trio.abc.Instrument):
    """Cancels `scope` right after the first step of an agent's lifecycle task: the task
    has moved itself into its owner's nursery, and its creator resumes cancelled."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("Lifecycle.serve"):
            self.scope.cancel()


async def test_a_create_cancelled_as_its_agent_starts_waits_for_its_rollback() -> None:
    async with open_runtime(MemoryStore(), runtime_class=_SlowTeardownRuntime) as rt:
        await trio.testing.wait_all_tasks_blocked()
        tasks, disposers = all_tasks(), len(rt._disposers)  # pyright: ignore[reportPrivateUsage]
        with trio.CancelScope() as scope:
            instrument = _CancelOnceStarted(scope)
            trio.lowlevel.add_instrument(instrument)
            try:
                await rt.agents.create(model=ScriptedModel(), session_id="a")
            finally:
                trio.lowlevel.remove_instrument(instrument)
        assert scope.cancelled_caught
        # The rollback is the agent's one teardown: the create returns after it is complete.
        assert all_tasks() == tasks
        assert len(rt._disposers) == disposers  # pyright: ignore[reportPrivateUsage]
        assert rt.agents.get("a") is None
        assert "a" not in rt.sessions.live_ids
