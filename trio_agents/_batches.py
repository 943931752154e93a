"""One writer task per output, writing what is queued in batches.

The ACP server's frames and the chat terminal's text are queued on an unbounded memory
channel by synchronous code and written by one task, so the order is the queue's and a
slow output never blocks the code that queues.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

__all__ = ["write_in_batches"]

T = TypeVar("T")


async def write_in_batches(
    receive: trio.MemoryReceiveChannel[T], write: Callable[[list[T]], Awaitable[bool]]
) -> None:
    """Until `receive` ends: take one item, then every item already queued, and `write` the
    batch (one write for a burst instead of one per item). `write` returns False once the
    output is gone; later batches are still received, and dropped, so the queue never grows
    behind an output nobody reads."""
    broken = False
    while True:
        # `receive()` with an item already queued would yield before returning it, a pass of
        # the scheduler per batch: take it at once, and wait only for an empty queue (a
        # checkpoint, as the write that follows is) (D365).
        try:
            first = receive.receive_nowait()
        except trio.WouldBlock:
            try:
                first = await receive.receive()
            except trio.EndOfChannel:
                return
            # Woken by the first frame of a burst: let the tasks already runnable queue the
            # rest of it (a turn's last update, then its answer), one write for all (D373).
            await trio.lowlevel.cancel_shielded_checkpoint()
        except trio.EndOfChannel:
            return
        batch = [first]
        while True:
            try:
                batch.append(receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        if not broken:
            broken = not await write(batch)
