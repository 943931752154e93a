"""One long-lived trio run, driven step by step from synchronous code on the same thread.

Hypothesis state machines call rules synchronously, but an agent is a long-lived trio task.
`TrioHost` starts trio in guest mode with a queue as its event loop: trio advances only while
`call()` pumps that queue, so between two rules the run is frozen and every background step
happens inside a rule, in an order trio's (Hypothesis-seeded) scheduler makes reproducible.
"""

from __future__ import annotations

import contextlib
import math
import queue
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import outcome
import trio
import trio.lowlevel
import trio.testing

__all__ = ["TrioHost", "WallClock"]

T = TypeVar("T")


class WallClock(trio.abc.Clock):
    """Real time, for hosted runs that wait on real processes (the default clock of
    `TrioHost` is a MockClock)."""

    def start_clock(self) -> None:
        """Nothing to start: real time runs anyway."""
        pass

    def current_time(self) -> float:
        """`time.perf_counter()`, in seconds."""
        return time.perf_counter()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """The real seconds until `deadline`."""
        return deadline - time.perf_counter()


class TrioHost:
    """A trio run with a root nursery, owned by synchronous code.

    `call(afn, *args)` runs `afn` in the root nursery and pumps trio until it returns (or
    raises). `settle()` pumps until every task is blocked. `close()` cancels whatever is left
    and ends the run. The clock defaults to an autojump `MockClock`, so timeouts cost no
    real time and a rule that would block forever instead reaches its deadline.

    clock: the run's clock: the one given, or the default autojump MockClock.

    `call`, `run_sync`, `settle` and `close` are synchronous and block the calling thread
    while they pump trio; `start` only schedules. Once the run has ended, `call`, `run_sync`,
    `settle` and `start` raise RuntimeError.
    """

    def __init__(
        self,
        clock: trio.abc.Clock | None = None,
        *,
        call_timeout: float = 3600.0,
        stall_timeout: float = 60.0,
        close_timeout: float = 5.0,
    ) -> None:
        """`call_timeout`: trio seconds one `call` may stay blocked before it fails as a
        deadlock. With the default autojump clock that costs no real time: time only moves
        when every task is blocked, so a stuck rule fails at once instead of hanging.
        `stall_timeout`: real seconds the run may give no sign of life before `call` gives
        up; the backstop for a clock that does not move by itself (a MockClock without
        autojump, advanced by hand). A call stuck in a wait shielded from its deadline's
        cancellation fails too, one trio second after the deadline.
        `close_timeout`: real seconds `close` waits for the cancelled run to finish (tasks
        shielded from cancellation that never end would keep it) before it abandons the run
        and raises TimeoutError, so a close that never finishes fails a
        check instead of hanging it."""
        self.call_timeout = call_timeout
        self.stall_timeout = stall_timeout
        self.close_timeout = close_timeout
        self._queue: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._done: outcome.Outcome[None] | None = None
        self._end_raised = False
        self._nursery: trio.Nursery | None = None
        self._io_baseline = 0  # tasks waiting on I/O in a run that does nothing
        self._token: trio.lowlevel.TrioToken | None = None
        self.clock = clock if clock is not None else trio.testing.MockClock(autojump_threshold=0)
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self._queue.put,
            done_callback=self._finished,
            clock=self.clock,
            strict_exception_groups=True,
        )
        while self._nursery is None:
            self._pump()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        # Once trio's own tasks run, one of them waits on its wakeup socket: what a run that
        # does nothing waits on.
        await trio.testing.wait_all_tasks_blocked()
        self._io_baseline = _waiting_on_io()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await trio.sleep_forever()

    def _finished(self, result: outcome.Outcome[None]) -> None:
        self._done = result

    def _pump(self) -> None:
        if self._done is not None:
            self._raise_the_end()
            raise RuntimeError("the trio run has ended")
        try:
            callback = self._queue.get(timeout=self.stall_timeout)
        except queue.Empty:
            raise TimeoutError(
                f"TrioHost: the trio run made no progress for {self.stall_timeout:g} real "
                "seconds: every task is blocked and the clock does not move (a deadlock?)"
            ) from None
        callback()

    @property
    def closed(self) -> bool:
        """Whether the trio run has ended."""
        return self._done is not None

    def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run `afn(*args)` as a task of the root nursery; return its result or raise.

        Raises TimeoutError if it is still blocked after `call_timeout` trio seconds, or the
        run shows no sign of life for `stall_timeout` real seconds.
        """
        assert self._nursery is not None
        assert self._token is not None
        box: list[outcome.Outcome[T]] = []

        async def guarded() -> T:
            with trio.move_on_after(self.call_timeout) as scope:
                return await afn(*args)
            assert scope.cancelled_caught
            raise TimeoutError(
                f"TrioHost.call({getattr(afn, '__qualname__', afn)!r}) was still blocked after "
                f"{self.call_timeout:g} trio seconds: a deadlock, or a rule waiting for "
                "something no task will do"
            )

        async def one() -> None:
            box.append(await outcome.acapture(guarded))

        expired = self._watchdog(self.call_timeout + 1)
        self._token.run_sync_soon(self._nursery.start_soon, one)
        while not box:
            if expired.is_set():
                raise TimeoutError(
                    f"TrioHost.call({getattr(afn, '__qualname__', afn)!r}) did not return "
                    f"even {self.call_timeout:g} trio seconds after its deadline cancelled it: "
                    "a wait shielded from cancellation never ends (a close that never "
                    "finishes?)"
                )
            self._pump()
        self._token.run_sync_soon(expired.disarm)
        result = box[0]
        if isinstance(result, outcome.Error) and isinstance(result.error, trio.Cancelled):
            # Only the run's end cancels a call: something crashed the root nursery. Raise
            # that crash here, in the rule it happened in, not a bare Cancelled.
            while True:
                self._pump()
        return _unwrap(result)

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous `fn(*args)` inside the trio run (as trio code must be)."""

        async def wrapper() -> T:
            return fn(*args)

        return self.call(wrapper)

    @property
    def nursery(self) -> trio.Nursery:
        """The root nursery: `host.call(host.nursery.start, service)` starts a service."""
        assert self._nursery is not None
        return self._nursery

    def start(self, afn: Callable[..., Awaitable[object]], *args: Any) -> None:
        """Start `afn(*args)` in the background; it only runs while the host is pumped."""
        assert self._nursery is not None
        assert self._token is not None
        self._token.run_sync_soon(self._nursery.start_soon, afn, *args)

    def settle(self) -> None:
        """Pump until every task is blocked. Raises TimeoutError as `call` does."""
        self.call(trio.testing.wait_all_tasks_blocked)

    def close(self) -> None:
        """Cancel every remaining task and end the run. Idempotent. Raises the error the run
        ended with, if it ended with one."""
        if self._done is None:
            assert self._nursery is not None
            assert self._token is not None
            stuck: list[bool] = []
            if isinstance(self.clock, trio.testing.MockClock):
                self._token.run_sync_soon(
                    trio.lowlevel.spawn_system_task,
                    _report_a_dead_run,
                    self.clock,
                    stuck,
                    self._io_baseline,
                )
            self._token.run_sync_soon(self._nursery.cancel_scope.cancel)
            # Real time bounds it: an autojump clock with nothing left to wake keeps the run
            # ticking, so the queue alone never falls silent.
            deadline = time.monotonic() + self.close_timeout
            while self._done is None and not stuck and (left := deadline - time.monotonic()) > 0:
                try:
                    callback = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                callback()
            if self._done is None:
                # Tasks shielded from cancellation that never end: the run cannot finish.
                # Abandon it rather than hang the caller (its threads stay parked).
                self._done = outcome.Error(
                    TimeoutError(
                        "TrioHost.close(): the trio run could not finish: a task shielded "
                        "from cancellation never ends (a close that never finishes?)"
                    )
                )
                self._end_raised = False
                _forget_the_run(self._queue)
        self._raise_the_end()

    def _watchdog(self, seconds: float) -> _Watchdog:
        """A flag that is set once `seconds` of trio time have passed, unless disarmed."""
        assert self._nursery is not None
        assert self._token is not None
        watchdog = _Watchdog()
        self._token.run_sync_soon(self._nursery.start_soon, watchdog.run, seconds)
        return watchdog

    def _raise_the_end(self) -> None:
        """Raise the error the run ended with, the first time only: once a rule has seen
        the crash, closing the host must not raise it again over the rule's report."""
        assert self._done is not None
        if not self._end_raised:
            self._end_raised = True
            _unwrap(self._done)


# Real seconds every task must stay blocked before a closing run on a MockClock counts as
# dead: long enough for a worker thread's short job to finish (trio does not count a task
# waiting for a thread as waiting on anything), far below `close_timeout`.
_DEAD_CUSHION = 0.2


def _waiting_on_io() -> int:
    """Tasks waiting on a file descriptor (trio's own wakeup reader among them)."""
    io: object = trio.lowlevel.current_statistics().io_statistics
    return int(getattr(io, "tasks_waiting_read", 0)) + int(getattr(io, "tasks_waiting_write", 0))


async def _report_a_dead_run(
    clock: trio.testing.MockClock, stuck: list[bool], io_baseline: int
) -> None:
    """Note in `stuck` when the closing run can never finish: every task blocked, waiting on
    no I/O and no callback, and no deadline the clock will ever reach. Then `close` gives up
    at once instead of after `close_timeout` real seconds, which a failure costs at every
    attempt to shrink it. A system task: the run's end cancels it."""
    frozen = clock.rate == 0 and math.isinf(clock.autojump_threshold)
    while True:
        # A task in wait_all_tasks_blocked keeps the clock from autojumping, so wait with no
        # cushion, then sleep until the next deadline (the autojump fires it); otherwise
        # wait a real cushion (I/O may wake a task meanwhile), and look.
        await trio.testing.wait_all_tasks_blocked()
        if not frozen and _next_deadline_in() < math.inf:
            await trio.sleep(_next_deadline_in())
            continue
        await trio.testing.wait_all_tasks_blocked(cushion=_DEAD_CUSHION)
        if _dead(io_baseline, frozen):
            stuck.append(True)
            return


def _next_deadline_in() -> float:
    return trio.lowlevel.current_statistics().seconds_to_next_deadline


def _dead(io_baseline: int, frozen: bool) -> bool:
    stats = trio.lowlevel.current_statistics()
    return (
        _waiting_on_io() <= io_baseline
        and stats.run_sync_soon_queue_size == 0
        and (frozen or math.isinf(stats.seconds_to_next_deadline))
    )


_ABANDONED: list[object] = []
"""Abandoned runs, kept alive: collecting their half-run tasks and nurseries would raise
(as unraisable errors) in whatever code runs next."""


def _forget_the_run(keep: object) -> None:
    """Make this thread forget an abandoned guest run. Between ticks trio keeps the run in a
    thread-local, so every later run on this thread would fail with `Attempted to call run()
    from inside a run()`; trio clears it itself when a run ends (also an abandoned one, once
    its generator is collected, which a parked I/O thread prevents). No public API does it."""
    context = getattr(trio._core._run, "GLOBAL_RUN_CONTEXT", None)  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    if context is None:
        return
    runner = getattr(context, "runner", None)
    _ABANDONED.append((runner, keep))
    # What trio's own end of a run does: release the I/O manager and the signal wakeup fd.
    with contextlib.suppress(Exception):
        if runner is not None:
            runner.close()
    context.__dict__.clear()


class _Watchdog:
    """Set after a delay in trio time; `disarm` ends it early."""

    def __init__(self) -> None:
        self._expired = False
        self._scope = trio.CancelScope()

    def is_set(self) -> bool:
        return self._expired

    def disarm(self) -> None:
        self._scope.cancel()

    async def run(self, seconds: float) -> None:
        with self._scope:
            await trio.sleep(seconds)
            self._expired = True


def _unwrap(result: outcome.Outcome[T]) -> T:
    """`result.unwrap()`, except that a crash which nurseries wrapped in groups of one is
    raised as itself, with its own traceback: `ExceptionGroup: Exceptions from Trio nursery
    (1 sub-exception)` would hide what went wrong inside the implementation."""
    try:
        return result.unwrap()
    except BaseExceptionGroup as group:
        leaf = _only_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


def _only_leaf(exc: BaseException) -> BaseException | None:
    """The one exception nested groups of one hold (trio's Cancelled aside), if there is
    exactly one."""
    while isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        inner = [e for e in group.exceptions if not isinstance(e, trio.Cancelled)]
        if len(inner) != 1:
            return None
        exc = inner[0]
    return exc
