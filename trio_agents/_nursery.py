"""A nursery for background service tasks that does not wrap the body's own exception.

`open_runtime` and `open_agent` hold a nursery only for their service tasks. With trio's
strict exception groups, an exception raised by the user's block would come out wrapped in
an ExceptionGroup merely because a nursery was there. When the group holds exactly the
body's exception (the services themselves did not fail), it is re-raised as itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar, cast

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


__all__ = ["report_started", "runs_inside", "service_nursery", "start_service"]


@asynccontextmanager
async def service_nursery() -> AsyncGenerator[trio.Nursery, None]:
    """A nursery for service tasks; an exception the block raises comes out as itself unless
    a service failed too (then the nursery's group comes out, as always)."""
    # The block's exception is thrown in at the yield, so it is recorded here, where the
    # group that trio makes of it can be recognised.
    body: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                body = exc
                raise
    except BaseExceptionGroup as group:
        if body is not None and len(group.exceptions) == 1 and _same(group.exceptions[0], body):
            # Its own cause stays (a StoreBrokenError's is the writer's error); only the
            # group, which is the nursery's doing, is hidden from its context.
            raise body from body.__cause__
        raise


def _same(seen: BaseException, raised: BaseException) -> bool:
    # trio re-derives a group the body raised (to split out Cancelled), so a group is
    # recognised by its message and the identity of its leaves.
    if seen is raised:
        return True
    if isinstance(seen, BaseExceptionGroup) and isinstance(raised, BaseExceptionGroup):
        ours = cast("BaseExceptionGroup[BaseException]", seen)
        theirs = cast("BaseExceptionGroup[BaseException]", raised)
        return (
            ours.message == theirs.message
            and len(ours.exceptions) == len(theirs.exceptions)
            and all(_same(a, b) for a, b in zip(ours.exceptions, theirs.exceptions, strict=True))
        )
    return False


def runs_inside(task: trio.lowlevel.Task) -> bool:
    """Whether the current task is `task` or runs in a nursery below it: such a caller
    cannot wait for `task` to finish."""
    current: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    while current is not None:
        if current is task:
            return True
        nursery = current.parent_nursery
        current = nursery.parent_task if nursery is not None else None
    return False
