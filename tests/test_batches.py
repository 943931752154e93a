"""`write_in_batches`, the writer the ACP server and the chat terminal share."""

from __future__ import annotations

import math

import trio
import trio.testing

from trio_agents._batches import write_in_batches


async def test_what_is_queued_meanwhile_goes_out_in_one_batch_in_order() -> None:
    send, receive = trio.open_memory_channel[int](math.inf)
    batches: list[list[int]] = []
    release = trio.Event()

    async def write(batch: list[int]) -> bool:
        batches.append(batch)
        await release.wait()
        return True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_in_batches, receive, write)
        send.send_nowait(1)
        await trio.testing.wait_all_tasks_blocked()  # the writer holds [1]
        for item in (2, 3, 4):
            send.send_nowait(item)
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        send.send_nowait(5)
        send.close()
    assert batches == [[1], [2, 3, 4], [5]]


async def test_after_a_failed_write_the_rest_is_received_and_dropped() -> None:
    send, receive = trio.open_memory_channel[str](math.inf)
    batches: list[list[str]] = []

    async def write(batch: list[str]) -> bool:
        batches.append(batch)
        await trio.lowlevel.checkpoint()
        return False  # the output is gone

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_in_batches, receive, write)
        send.send_nowait("lost")
        await trio.testing.wait_all_tasks_blocked()
        send.send_nowait("dropped")
        send.send_nowait("also dropped")
        await trio.testing.wait_all_tasks_blocked()
        # Nothing is left behind the dead output.
        assert receive.statistics().current_buffer_used == 0
        send.close()
    assert batches == [["lost"]]


async def test_it_returns_when_the_channel_ends() -> None:
    send, receive = trio.open_memory_channel[int](math.inf)
    send.close()

    async def write(batch: list[int]) -> bool:  # pragma: no cover - nothing to write
        raise AssertionError(batch)

    with trio.fail_after(1):
        await write_in_batches(receive, write)
