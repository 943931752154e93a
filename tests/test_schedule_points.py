"""Schedule points the hot path does not spend (D365): each is a pass of trio's scheduler,
and an ACP prompt's round trip is a handful of them. The checkpoint rules still hold (see
tests/test_checkpoints.py): what is removed is a yield right before another one."""

from __future__ import annotations

import math

import trio
import trio.testing

from trio_agents import OfflineModel, open_agent
from trio_agents._batches import write_in_batches


class StepCounter(trio.abc.Instrument):
    """How many times each task named in `names` was stepped."""

    def __init__(self, *names: str) -> None:
        self.steps = dict.fromkeys(names, 0)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        name = task.name.rsplit(".", 1)[-1]
        if name in self.steps:
            self.steps[name] += 1


async def test_waiting_for_a_running_agent_parks_at_once() -> None:
    async with open_agent(OfflineModel()) as agent:
        counter = StepCounter("waiter")

        async def waiter() -> None:
            await agent.wait_idle()

        trio.lowlevel.add_instrument(counter)
        try:
            async with trio.open_nursery() as nursery:
                agent.send("hi")
                nursery.start_soon(waiter)
        finally:
            trio.lowlevel.remove_instrument(counter)
        # Started (it parks there, its checkpoint) and woken once the turn settled: no
        # schedule point in between.
        assert counter.steps["waiter"] == 2
        assert agent.session.records[-1].type == "turn/end"


async def test_waiting_for_an_idle_agent_is_still_a_checkpoint() -> None:
    async with open_agent(OfflineModel()) as agent:
        await agent.wait_idle()
        with trio.CancelScope() as scope:
            scope.cancel()
            await agent.wait_idle()  # raises Cancelled at its checkpoint
        assert scope.cancelled_caught


async def test_the_writer_takes_a_queued_item_without_yielding_first() -> None:
    send, receive = trio.open_memory_channel[int](10)
    written: list[list[int]] = []
    counter = StepCounter("writer")

    async def write(batch: list[int]) -> bool:
        written.append(batch)
        await trio.lowlevel.checkpoint()  # as a stream's send_all is
        return True

    async def writer() -> None:
        await write_in_batches(receive, write)

    send.send_nowait(1)
    send.send_nowait(2)
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            await trio.testing.wait_all_tasks_blocked()
            assert written == [[1, 2]]
            # Its first step wrote the batch up to the write's checkpoint, its second
            # found the queue empty and parked: no yield before taking the queued items.
            assert counter.steps["writer"] == 2
            send.send_nowait(3)
            await trio.testing.wait_all_tasks_blocked()
            send.close()
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert written == [[1, 2], [3]]


async def test_a_burst_queued_in_one_pass_is_one_write() -> None:
    # A writer woken by a frame lets the tasks woken with it queue theirs first: a turn's
    # last update and its answer are one write (D373). Trio runs a pass's tasks in either
    # order, so the race is run many times: each time is one write.
    for _ in range(40):
        assert await burst_of_two() == [[1, 2]]


async def burst_of_two() -> list[list[int]]:
    """The batches written when a frame is queued as another task, woken in the same pass
    as the writer, is about to queue a second one."""
    send, receive = trio.open_memory_channel[int](math.inf)
    written: list[list[int]] = []
    go = trio.Event()

    async def write(batch: list[int]) -> bool:
        written.append(batch)
        await trio.lowlevel.checkpoint()
        return True

    async def second() -> None:
        await go.wait()
        send.send_nowait(2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_in_batches, receive, write)
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        go.set()
        send.send_nowait(1)
        await trio.testing.wait_all_tasks_blocked()
        send.close()
    return written
