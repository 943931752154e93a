"""A nursery for background service tasks that does not wrap the body's own exception.

`open_runtime` and `open_agent` hold a nursery only for their service tasks. With trio's
strict exception groups, an exception raised by the user's block would come out wrapped in
an ExceptionGroup merely because a nursery was there. When the group holds exactly the
body's exception (the services themselves did not fail), it is re-raised as itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import trio

T = TypeVar("T")


def report_started(task_status: trio.TaskStatus[T], value: T) -> bool:
    """`task_status.started(value)`, returning False if the task was abandoned.

    If the caller of `nursery.start()` was cancelled before the task started, trio leaves
    the task where it is and the caller waits for it to exit. A shielded service task that
    then waited to be closed would deadlock its starter, so it must wind itself down when
    this returns False.
    """
    task_status.started(value)
    task = trio.lowlevel.current_task()
    # A task that trio moved into its nursery no longer has an eventual parent.
    return task.eventual_parent_nursery is None


async def start_service(nursery: trio.Nursery, fn: Callable[..., Awaitable[object]]) -> object:
    """`await nursery.start(fn)` for a shielded service task that uses `report_started`.

    When the caller was cancelled during start-up, trio still returns the started value and
    only delivers the cancellation at the caller's next checkpoint. The service has already
    wound itself down by then, so deliver the cancellation now, instead of handing the caller
    a resource that is gone.
    """
    value = await nursery.start(fn)
    await trio.lowlevel.checkpoint_if_cancelled()
    return value


__all__ = ["BodyError", "report_started", "service_nursery", "start_service"]


class BodyError:
    """Where the block of a `service_nursery` records the exception it raised."""

    __slots__ = ("exception",)

    def __init__(self) -> None:
        self.exception: BaseException | None = None


@asynccontextmanager
async def service_nursery() -> AsyncGenerator[tuple[trio.Nursery, BodyError], None]:
    """Yields (nursery, slot); the block stores its exception in `slot.exception`."""
    slot = BodyError()
    try:
        async with trio.open_nursery() as nursery:
            yield nursery, slot
    except BaseExceptionGroup as group:
        body = slot.exception
        if body is not None and len(group.exceptions) == 1 and _same(group.exceptions[0], body):
            raise body from None
        raise


def _same(seen: BaseException, raised: BaseException) -> bool:
    # trio re-derives a group the body raised (to split out Cancelled), so a group is
    # recognised by its message and the identity of its leaves.
    if seen is raised:
        return True
    if isinstance(seen, BaseExceptionGroup) and isinstance(raised, BaseExceptionGroup):
        ours: tuple[BaseException, ...] = tuple(seen.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        theirs: tuple[BaseException, ...] = tuple(raised.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return (
            seen.message == raised.message
            and len(ours) == len(theirs)
            and all(_same(a, b) for a, b in zip(ours, theirs, strict=True))
        )
    return False
