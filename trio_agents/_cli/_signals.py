"""What SIGTERM, SIGHUP and SIGINT do to `trio-agents acp` and `chat` (issue 16).

    SIGINT, SIGTERM, SIGHUP (trio.open_signal_receiver) ──► QuitPolicy (pure) ──►
        interrupt: the chat's Ctrl-C, passed on as an item of `SignalWatch.events`
        quit:      a `Quit` item: the command runs its teardown as at end of input, and
                   a deadline is armed (`teardown_limit`)
        force:     a second signal, or the deadline: SIGKILL every process group of the
                   shell, and every group a child of this process leads (an MCP server's),
                   one line on stderr, `os._exit` (no teardown, no finally)

A terminal closing, an editor stopping its agent and a service manager stopping a unit send
TERM or HUP: they mean "quit", so the command closes its agents (a running turn ends
`closed`, every job is killed, the store is flushed) and exits 128 + the signal's number, as
a shell reports a command a signal ended. The forced exit is for a teardown that hangs (a
client that stopped reading, a store that does not answer) or a user who will not wait.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, Literal, NoReturn

import trio

from .._nursery import service_nursery
from .._shell._executor import ShellExecutor
from .._shell._group import live_processes, signal_group

__all__ = [
    "HANDLED",
    "Quit",
    "QuitPolicy",
    "SignalWatch",
    "child_groups",
    "exit_status",
    "teardown_limit",
    "watching_signals",
]

HANDLED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_status(signum: int) -> int:
    """128 + the signal's number: 143 for SIGTERM, 129 for SIGHUP, 130 for SIGINT."""
    return 128 + signum


def teardown_limit(close_grace: float, shell_grace: float) -> float:
    """How long a teardown a signal started may take before the exit is forced: an agent's
    close waits up to `close_grace` for its loop and again for its flush, and a job's kill
    up to `shell_grace` between TERM and KILL and again until its group is gone."""
    return 2 * close_grace + 2 * shell_grace


@dataclass(frozen=True, slots=True)
class Quit:
    """An item of `SignalWatch.events`: signal `signum` asks the command to quit."""

    signum: int


Action = Literal["interrupt", "quit", "force"]


class QuitPolicy:
    """Which signal means what, given what came before. Pure: no trio, no clock.

    `interrupt_signals` are passed on as interrupts until a quit has begun (the chat's
    Ctrl-C); every other handled signal is a quit. Once a quit has begun, any handled
    signal forces the exit."""

    def __init__(self, interrupt_signals: tuple[int, ...] = ()) -> None:
        self._interrupts = interrupt_signals
        self.quitting: int | None = None
        """The signal that began the quit, once one has."""

    def on_signal(self, signum: int) -> Action:
        if self.quitting is not None:
            return "force"
        if signum in self._interrupts:
            return "interrupt"
        self.quitting = signum
        return "quit"


class SignalWatch:
    """The command's signals while `watching_signals` is open. `events` yields each
    interrupt (the signal's number) and the first `Quit`; `status(code)` is the exit status:
    128 + the first quit signal's number if one came, else `code`."""

    def __init__(
        self,
        policy: QuitPolicy,
        events: trio.MemoryReceiveChannel[int | Quit],
        force: Callable[[int, str], NoReturn],
    ) -> None:
        self.events = events
        self._policy = policy
        self._force = force
        self._deadline = trio.CancelScope(deadline=math.inf)

    def status(self, code: int) -> int:
        quitting = self._policy.quitting
        return code if quitting is None else exit_status(quitting)

    async def run(
        self,
        signals: AsyncIterator[int],
        send: trio.MemorySendChannel[int | Quit],
        limit: float,
    ) -> None:
        async with service_nursery() as nursery:
            nursery.start_soon(self._expire, limit)
            async for signum in signals:
                action = self._policy.on_signal(signum)
                if action == "force":
                    self._force(signum, f"{_name(signum)} during the teardown")
                item: int | Quit = signum if action == "interrupt" else Quit(signum)
                with contextlib.suppress(trio.BrokenResourceError):
                    send.send_nowait(item)
                if action == "quit":
                    self._deadline.deadline = trio.current_time() + limit

    async def _expire(self, limit: float) -> None:
        with self._deadline:
            await trio.sleep_forever()
        quitting = self._policy.quitting
        assert quitting is not None
        self._force(quitting, f"the teardown took longer than {limit:g}s")


@asynccontextmanager
async def watching_signals(
    command: str,
    shell: ShellExecutor,
    limit: float,
    *,
    interrupt_signals: tuple[int, ...] = (),
) -> AsyncGenerator[SignalWatch]:
    """Handle SIGINT, SIGTERM and SIGHUP for the block (see the module docstring); the
    forced exit kills `shell`'s process groups and names `command` in its line. Must be
    entered in the main thread (signal handlers live there)."""

    def force(signum: int, why: str) -> NoReturn:
        killed = shell.kill_now()
        # The MCP servers' groups are their owners' to end, and no owner runs after this:
        # every group a child of ours leads is ended here (design D267).
        for pgid in child_groups():
            signal_group(pgid, signal.SIGKILL)
        line = (
            f"trio-agents {command}: {why}: exiting at once, without the teardown "
            f"({killed} command group(s) killed, and every other process group it started; "
            "the store keeps what it committed)\n"
        )
        with contextlib.suppress(OSError):
            os.write(2, line.encode())
        os._exit(exit_status(signum))

    send, receive = trio.open_memory_channel[int | Quit](math.inf)
    watch = SignalWatch(QuitPolicy(interrupt_signals), receive, force)
    with trio.open_signal_receiver(*HANDLED) as signals:
        async with service_nursery() as nursery:
            nursery.start_soon(watch.run, signals, send, limit)
            try:
                yield watch
            finally:
                nursery.cancel_scope.cancel(reason="the command is over")


def child_groups() -> list[int]:
    """The process groups that a live child of this process leads (it was started with a
    session of its own: a shell command, an MCP server), read from /proc; [] without it."""
    me = os.getpid()
    try:
        return [pid for pid, parent, group in live_processes() if parent == me and group == pid]
    except OSError:
        return []


def _name(signum: int) -> str:
    return signal.Signals(signum).name
