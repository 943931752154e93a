"""The one thread a SQLite store runs its connection in, and where it commits in groups.

A store's every SQLite call runs in this thread, in order: reads submitted from trio
(`call`), and commits, which nobody submits one by one. Trio only marks that records wait
(`kick`); the thread, when it is free, runs the store's commit step, which takes every record
queued by then, of every session, into one transaction. Records appended while a commit is
on the disk go in the next one, which starts as soon as that one ends, without a round trip
through the event loop. The thread wakes trio (`wake`, through the run's token) only when the
store has someone to wake: a commit that nobody waits for costs the event loop nothing. The
one exception to "every call here": while the thread sleeps, trio may borrow the connection
for a flush's own commit (`lend`, `give_back`; rule L19), and the thread runs nothing until
it is given back.

The thread is owned by the store's `running()`: started on entry, and on every way out
(the block's end, an error, a cancel, a signal's KeyboardInterrupt) stopped and joined before
`running()` returns, its connection closed in the thread itself.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import outcome
import trio

from .._errors import StoreClosedError

__all__ = ["StoreThread"]

# The commit step's answer: None when done (committed, or nothing to do, or failed for good),
# or the seconds to wait before it is tried again (another process holds the write lock).
CommitStep = Callable[[], "float | None"]

_JOIN_TIMEOUT: Final = 5.0  # seconds; the thread has exited when it says so, so join is at once


class StoreThread:
    """One thread running `commit_step` when kicked and calls in the order submitted.

    `lock` is held while the thread chooses what to do; the store guards the state it shares
    with the commit step by the same lock (appends, the commit counts, the waiters), so a
    `kick` is never lost between the thread's look at the queue and its wait."""

    def __init__(self, name: str, commit_step: CommitStep, *, defer: float) -> None:
        self.lock = threading.Condition()
        self._name = name
        self._commit_step = commit_step
        self._defer = defer
        self._calls: deque[tuple[Callable[[], Any], trio.lowlevel.Task]] = deque()
        self._kicked = False
        self._due: float | None = None  # when the kicks so far want their commit
        self._retry_at: float | None = None
        self._stopping = False
        self._exited = trio.Event()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.commits_halted = False
        self._refusing = False
        self._sleeping = False  # in `lock.wait`: a kick or a call must notify it
        self._working = False  # running a call or a commit step, outside `lock`
        self._untimed = False  # ... and with no timeout: a deferred kick must notify it too
        self._active = False  # kicked since the thread last went to sleep
        self._lent = False  # trio's thread is using what the thread owns (see `lend`)
        self._missed = False  # the thread woke while lent: `give_back` must wake it again

    def start(self) -> None:
        """Start the thread. Called from trio, once."""
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()

    def kick(self, *, waited: bool) -> None:
        """Have the commit step run: when the thread is free if someone `waited` for it,
        else within `defer` seconds, so that what is appended meanwhile (the rest of a
        quick turn, other sessions' records) shares the commit someone will wait for; and
        never before the current retry's wait if a commit was refused. Sync, never blocks:
        the caller may hold `lock` already (it is reentrant)."""
        with self.lock:
            due = time.monotonic() + (0.0 if waited else self._defer)
            if self._due is None or due < self._due:
                self._due = due
                # Waking a thread costs a trip through the kernel, and the thread then takes
                # the GIL from the event loop: only a thread that would sleep past `due`
                # needs it. A busy one looks at the queue again before it sleeps, and one
                # in a timed sleep wakes by itself within `defer` (see `_next`).
                if self._sleeping and (waited or self._untimed):
                    self.lock.notify()
            self._kicked = True
            self._active = True

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the thread, after everything submitted before it; its result or
        its exception. Always a checkpoint. Not cancellable once submitted, as
        `trio.to_thread.run_sync` is not: the call runs to its end, and a cancel is seen
        after."""
        await trio.lowlevel.checkpoint_if_cancelled()
        task = trio.lowlevel.current_task()
        with self.lock:
            if self._stopping or self._refusing:
                raise StoreClosedError("the store has stopped: its thread takes no more calls")
            self._calls.append((lambda: fn(*args), task))
            if self._sleeping:
                self.lock.notify()

        def abort(_: Any) -> trio.lowlevel.Abort:
            return trio.lowlevel.Abort.FAILED

        # The thread reschedules the task with the call's outcome, which this unwraps.
        return await trio.lowlevel.wait_task_rescheduled(abort)

    def lend(self) -> bool:
        """From trio: whether trio's thread may run a commit itself, now, on what this
        thread owns. Only when the thread runs nothing (asleep, or awake on its way back to
        its queue), with no call queued and no refused commit to retry; it then runs nothing
        until `give_back`. Sync, never blocks."""
        with self.lock:
            # Not only while it sleeps: a thread awake with nothing to run (a linger that
            # timed out) sees `_lent` before it runs anything, and a flush that found it so
            # would otherwise wait for the thread's commit and its wake, both trips (D366).
            if (
                self._working
                or self._lent
                or self._calls
                or self._stopping
                or self.commits_halted
                or self._retry_at is not None
            ):
                return False
            self._lent = True
            return True

    def give_back(self, *, settled: bool) -> None:
        """From trio, after `lend` said yes: the thread may run again. `settled`: the
        commit left nothing queued, so the kicks so far want nothing more."""
        with self.lock:
            self._lent = False
            if settled:
                self._kicked, self._due = False, None
            if self._missed:
                self._missed = False
                self.lock.notify()

    def wake(self, fn: Callable[[], object]) -> None:
        """Run `fn` in trio's thread soon. From the thread only."""
        assert self._token is not None
        # The owner joins the thread before its run ends; should that fail, drop the wake.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn)

    def halt_commits(self) -> None:
        """In the thread (submit it with `call`): no commit step runs after this one returns,
        so what is queued then stays queued."""
        with self.lock:
            self.commits_halted = True

    def refuse_calls(self) -> None:
        """In the thread (submit it with `call`): what a kill -9 leaves of a store, for the
        durable machine. No commit runs after this, and every call is refused, queued or
        not: the connection can then be closed from outside without a thread inside it."""
        with self.lock:
            self.commits_halted = True
            self._refusing = True

    async def stop(self) -> None:
        """Stop the thread after the call it is running, and join it. Always a checkpoint;
        the wait is not cancellable (callers shield it): the thread is never left behind."""
        with self.lock:
            self._stopping = True
            self.lock.notify()
        with trio.CancelScope(shield=True):
            await self._exited.wait()
        if self._thread is not None:
            self._thread.join(_JOIN_TIMEOUT)

    # -- in the thread ----------------------------------------------------------------------

    def _main(self) -> None:
        try:
            while True:
                job = self._next()
                if job is None:
                    return
                if isinstance(job, tuple):
                    fn, task = job
                    if self._refusing:
                        refused = StoreClosedError("the store has stopped: it takes no more calls")
                        result: outcome.Outcome[Any] = outcome.Error(refused)
                    else:
                        result = outcome.capture(fn)
                    with self.lock:
                        self._working = False
                    self.wake(functools.partial(trio.lowlevel.reschedule, task, result))
                else:
                    self._commit()
        finally:
            self.wake(self._exited.set)

    def _next(self) -> tuple[Callable[[], Any], trio.lowlevel.Task] | bool | None:
        """The next call to run, True for a commit step, or None to exit. Calls come before a
        commit, so a read is not held up behind a retried commit."""
        with self.lock:
            while True:
                if self._lent:
                    self._missed = True
                    self.lock.wait()
                    continue
                if self._calls:
                    self._working = True
                    return self._calls.popleft()
                if self._stopping:
                    return None
                # Lingering: a thread that was kicked since it last slept sleeps `defer`
                # at most, so while sessions keep appending, their deferred kicks need not
                # wake it (see `kick`); once a linger passes with no kick, it sleeps until
                # woken.
                timeout: float | None = self._defer if self._active else None
                if self._kicked and not self.commits_halted:
                    due = max(self._due or 0.0, self._retry_at or 0.0)
                    now = time.monotonic()
                    if now >= due:
                        self._kicked, self._due = False, None
                        self._working = True
                        return True
                    timeout = due - now
                self._active = False
                self._sleeping, self._untimed = True, timeout is None
                try:
                    self.lock.wait(timeout)
                finally:
                    self._sleeping = self._untimed = False

    def _commit(self) -> None:
        try:
            delay = self._commit_step()
        except BaseException:
            with self.lock:
                self._working = False
            raise
        # One hold of the lock: a `lend` between clearing `_working` and noting the retry
        # would lend past a refused commit.
        with self.lock:
            self._working = False
            if delay is None:
                self._retry_at = None
            else:
                self._kicked = True
                self._retry_at = time.monotonic() + delay
                self._due = self._due or 0.0
