"""Fibers and plugins: rules F1-F3 of docs/contract.md."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trio_agents import EventBus, Fiber, FiberClosedError, MemoryStore, SessionStore, open_runtime
from trio_agents._registry import AgentRegistry


async def test_F1_disposers_run_strictly_lifo_one_after_another() -> None:
    log: list[str] = []
    running = 0

    async def dispose(name: str) -> None:
        nonlocal running
        running += 1
        assert running == 1, "disposers overlap"
        await trio.sleep(1)
        log.append(name)
        running -= 1

    async with open_runtime(MemoryStore()) as rt, rt.fiber("f") as f:
        for name in ("a", "b", "c"):
            f.push_async_callback(dispose, name)
        f.callback(log.append, "sync d")
    assert log == ["sync d", "c", "b", "a"]


async def test_F1_unwinding_continues_past_failures_and_raises_them_together() -> None:
    log: list[str] = []

    async def fail(name: str) -> None:
        log.append(name)
        await trio.lowlevel.checkpoint()
        raise RuntimeError(f"disposer {name} failed")

    with pytest.RaisesGroup(
        pytest.RaisesGroup(
            pytest.RaisesExc(RuntimeError, match="disposer b failed"),
            pytest.RaisesExc(RuntimeError, match="disposer a failed"),
            match="errors while closing fiber 'f'",
        ),
        match="errors while closing fiber 'runtime'",
    ):
        async with open_runtime(MemoryStore()) as rt:
            f = await rt.open_child("f")
            f.push_async_callback(fail, "a")
            f.callback(log.append, "middle")
            f.push_async_callback(fail, "b")
    assert log == ["b", "middle", "a"]


async def test_F1_child_fibers_close_before_their_parents_own_disposers() -> None:
    log: list[str] = []
    async with open_runtime(MemoryStore()) as rt:
        parent = await rt.open_child("parent")
        child = await parent.open_child("child")
        grandchild = await child.open_child("grandchild")
        # Registered after the children exist, yet it runs after they closed.
        parent.callback(log.append, "parent disposer")
        child.callback(log.append, "child disposer")
        grandchild.callback(log.append, "grandchild disposer")
        await parent.aclose()
        assert log == ["grandchild disposer", "child disposer", "parent disposer"]
        assert (parent.state, child.state, grandchild.state) == ("closed", "closed", "closed")


async def test_F1_close_is_memoized_and_joined_by_concurrent_callers() -> None:
    runs = 0

    async def slow() -> None:
        nonlocal runs
        runs += 1
        await trio.sleep(5)

    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")
        f.push_async_callback(slow)
        finished: list[float] = []

        async def closer() -> None:
            await f.aclose()
            finished.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(closer)
        assert runs == 1
        assert len(set(finished)) == 1  # all returned when the one unwinding ended


async def test_F1_a_cancelled_caller_does_not_abort_the_unwinding() -> None:
    log: list[str] = []

    async def slow() -> None:
        await trio.sleep(10)
        log.append("slow disposer finished")

    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")
        f.push_async_callback(slow)
        with trio.move_on_after(1):
            await f.aclose()
        # aclose is shielded: it returned only after the unwinding completed.
        assert log == ["slow disposer finished"]


async def test_F1_fiber_tasks_are_cancelled_after_the_disposers_ran() -> None:
    log: list[str] = []

    async def worker() -> None:
        try:
            await trio.sleep_forever()
        finally:
            log.append("worker cancelled")

    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")
        f.nursery.start_soon(worker)
        f.callback(log.append, "disposer")
        await trio.testing.wait_all_tasks_blocked()
        await f.aclose()
    assert log == ["disposer", "worker cancelled"]


async def test_F1_a_context_holding_a_nursery_can_be_closed_from_another_task() -> None:
    # The context is entered by one task and the fiber closed by another: the holder task
    # keeps entry and exit in one task, so trio sees no cross-task cancel scope.
    log: list[str] = []

    @asynccontextmanager
    async def service() -> AsyncGenerator[str, None]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            yield "service value"
            log.append("service exiting")
            nursery.cancel_scope.cancel()

    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")

        async def enter() -> None:
            assert await f.enter_async_context(service()) == "service value"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(f.aclose)
    assert log == ["service exiting"]


async def test_F1_nothing_can_be_attached_to_a_closed_fiber() -> None:
    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")
        await f.aclose()
        with pytest.raises(FiberClosedError, match=r"fiber 'f'.*closed"):
            f.callback(print)
        with pytest.raises(FiberClosedError):
            await f.open_child("late")
        with pytest.raises(FiberClosedError):
            _ = f.nursery


class Recording:
    """A plugin that records what happens to what it registered."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.applied = 0

    async def apply(self, fiber: Fiber) -> None:
        self.applied += 1
        n = self.applied
        self.log.append(f"apply {n}")
        fiber.push_async_callback(self._dispose, n)

        async def task() -> None:
            try:
                await trio.sleep_forever()
            finally:
                self.log.append(f"task {n} cancelled")

        fiber.nursery.start_soon(task)

    async def _dispose(self, n: int) -> None:
        await trio.sleep(1)
        self.log.append(f"dispose {n}")


async def test_F2_a_plugin_owns_what_it_registers_and_reload_awaits_the_old_close() -> None:
    log: list[str] = []
    plugin = Recording(log)
    async with open_runtime(MemoryStore()) as rt:
        first = await rt.load(plugin)
        await trio.testing.wait_all_tasks_blocked()
        second = await rt.reload(plugin)
        # The old fiber was closed completely before apply ran again.
        assert log == ["apply 1", "dispose 1", "task 1 cancelled", "apply 2"]
        assert first.state == "closed"
        assert second.state == "open"
        assert rt.plugin_fiber(plugin) is second
    assert log[-2:] == ["dispose 2", "task 2 cancelled"]


async def test_F2_a_failing_apply_undoes_what_it_did() -> None:
    log: list[str] = []

    class Failing:
        async def apply(self, fiber: Fiber) -> None:
            fiber.callback(log.append, "undone")
            await trio.lowlevel.checkpoint()
            raise ValueError("bad config")

    async with open_runtime(MemoryStore()) as rt:
        plugin = Failing()
        with pytest.raises(ValueError, match="bad config"):
            await rt.load(plugin)
        assert log == ["undone"]
        assert rt.plugin_fiber(plugin) is None
        with pytest.raises(ValueError, match="bad config"):
            await rt.load(plugin)  # it can be loaded (and fail) again


async def test_F2_loading_a_loaded_plugin_twice_is_refused() -> None:
    async with open_runtime(MemoryStore()) as rt:
        plugin = Recording([])
        await rt.load(plugin)
        with pytest.raises(ValueError, match="already loaded; use reload"):
            await rt.load(plugin)


async def test_F3_services_are_plain_typed_attributes() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        assert rt.sessions is store
        assert isinstance(rt.sessions, SessionStore)
        assert isinstance(rt.events, EventBus)
        assert isinstance(rt.agents, AgentRegistry)
        assert rt.agents.owner is rt
        async with rt.fiber("f") as f:
            assert f.agents.owner is f
            assert f.runtime is rt
        # No string-keyed service locator.
        assert not hasattr(rt, "get")
        assert not hasattr(rt, "inject")


async def test_cancelling_enter_async_context_during_start_up_releases_and_raises() -> None:
    # trio leaves a started task behind when its starter was cancelled meanwhile; the holder
    # must notice, exit the context, and the caller must see its cancellation.
    log: list[str] = []

    @asynccontextmanager
    async def slow_to_enter() -> AsyncGenerator[str, None]:
        await trio.sleep(5)
        log.append("entered")
        yield "value"
        log.append("exited")

    async with open_runtime(MemoryStore()) as rt:
        f = await rt.open_child("f")
        with trio.move_on_after(1) as scope:
            await f.enter_async_context(slow_to_enter())
            log.append("caller got the value")  # must not happen
        assert scope.cancelled_caught
        assert log == ["entered", "exited"]
        await f.aclose()  # and closing does not wait for a holder nobody released


async def test_cancelling_open_runtime_during_start_up_neither_hangs_nor_runs_the_body() -> None:
    class SlowStore(MemoryStore):
        @asynccontextmanager
        async def running(self) -> AsyncGenerator[None, None]:
            await trio.sleep(5)
            yield

    ran = False
    with trio.move_on_after(1) as scope:
        async with open_runtime(SlowStore()):
            ran = True
    assert scope.cancelled_caught
    assert not ran


async def test_cancelling_open_child_during_start_up_closes_the_orphan() -> None:
    async with open_runtime(MemoryStore()) as rt:
        with trio.CancelScope() as scope:
            scope.cancel()
            await rt.open_child("orphan")
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert rt._children == []  # pyright: ignore[reportPrivateUsage]


async def test_a_runtime_refuses_a_registry_for_a_fiber_of_another_runtime() -> None:
    async with open_runtime(MemoryStore()) as one, open_runtime(MemoryStore()) as other:
        with pytest.raises(ValueError, match="belongs to another runtime"):
            one.agents_for(other)
        assert one.agents_for(one).owner is one
