"""Running the machines of one `agent-conformance` run a few at a time (`--jobs`, D417).

Most machines wait on real processes much of the time (the shell's commands, the MCP
servers, the ACP agent): on two cores, two lanes finish the main job in about half the
time. Each machine runs in a process of its own, the same command with `--machine NAME
--jobs 1` and the run's seed: machines share nothing (trio's scheduler and a target's
globals are per process), and the seed replays each as a run of one lane does. The child
prints its progress lines, which are relayed as they come, then its report, relayed as one
block; its last line (`LANE` and JSON) says what the summary needs.

A child runs in a process group of its own, so a terminal's Ctrl-C reaches only this
process, which passes each one on: the first stops every machine before its next example,
the second interrupts them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "LANE",
    "OUTPUT",
    "READY",
    "LaneReport",
    "Lanes",
    "child_command",
    "lane_line",
    "progress",
    "run_lanes",
    "say",
]

OUTPUT = threading.RLock()
"""Held while a block of output is printed: one machine's report, or a progress line."""

LANE = "LANE "  # the prefix of a child's last line, before its JSON
READY = "LANE-READY"  # a child's first line: from now on it handles Ctrl-C
PROGRESS = "  ... "  # the prefix of a progress line
SIGNAL_LATENCY = 0.2
"""The longest the main thread waits for the lanes before it looks for a signal."""


@dataclass(frozen=True)
class LaneReport:
    """What a child said of its machine: what the summary line and Ctrl-C's message need."""

    machine: str
    checked: tuple[str, ...]
    passed: bool


def say(line: str) -> None:
    """Print one line, flushed, between other lanes' blocks."""
    with OUTPUT:
        print(line, flush=True)


def progress(machine: str, examples: int, seconds: float) -> None:
    """The progress line of a machine that runs, every few seconds."""
    say(f"{PROGRESS}{machine} machine: {examples} examples so far ({seconds:.0f}s)")


def lane_line(machine: str, checked: Sequence[str], passed: bool) -> str:
    """A child's last line."""
    return LANE + json.dumps({"machine": machine, "checked": list(checked), "passed": passed})


class Lanes:
    """The children of one run: started by `run`, each Ctrl-C passed on by `interrupt`."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._ready: dict[subprocess.Popen[str], bool] = {}
        self.interrupts = 0

    @property
    def stopping(self) -> bool:
        return self.interrupts > 0

    def interrupt(self) -> None:
        """Pass a Ctrl-C on to every running child that handles it already (the others get
        it once they do); start no other. Called from the signal handler of the main thread,
        which never holds the lock otherwise (it only waits for the lanes)."""
        with self._guard:
            self.interrupts += 1
            for child, ready in self._ready.items():
                if ready:
                    _sigint(child)

    def run(self, argv: Sequence[str]) -> tuple[int, list[LaneReport]]:
        """Run one child to its end, relaying its output; its exit status and reports."""
        with self._guard:
            if self.stopping:
                return 130, []
            # stdin closed: a child never competes for the terminal.
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
                process_group=0,
            )
            self._ready[child] = False
        reports: list[LaneReport] = []
        block: list[str] = []
        try:
            assert child.stdout is not None
            for line in child.stdout:
                line = line.rstrip("\n")
                if line == READY:
                    with self._guard:
                        self._ready[child] = True
                        for _ in range(self.interrupts):
                            _sigint(child)
                elif line.startswith(LANE):
                    fields = json.loads(line[len(LANE) :])
                    reports.append(
                        LaneReport(fields["machine"], tuple(fields["checked"]), fields["passed"])
                    )
                elif line.startswith(PROGRESS):
                    say(line)
                else:
                    block.append(line)
        finally:
            if child.stdout is not None:
                child.stdout.close()
            status = child.wait()
            with self._guard:
                del self._ready[child]
            if block:
                with OUTPUT:
                    print("\n".join(block), flush=True)
        return status, reports


def _sigint(child: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended since
        os.killpg(child.pid, signal.SIGINT)


def run_lanes(jobs: Sequence[Callable[[], object]], lanes: int) -> None:
    """Run `jobs`, at most `lanes` at a time, each started in the order given as a lane
    frees, in threads while the calling thread waits (and handles signals); return when all
    have ended. Once a job raises, no lane starts another; the first exception is raised
    here when the jobs already running have ended."""
    waiting = deque(jobs)
    guard = threading.Lock()
    raised: list[BaseException] = []

    def lane() -> None:
        while True:
            with guard:
                if not waiting or raised:
                    return
                job = waiting.popleft()
            try:
                job()
            except BaseException as exc:  # re-raised by the caller's thread, below
                with guard:
                    raised.append(exc)
                return

    threads = [
        threading.Thread(target=lane, name=f"conformance lane {n + 1}", daemon=True)
        for n in range(max(1, min(lanes, len(jobs))))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            # Never an unbounded join: the kernel may deliver the terminal's SIGINT to a
            # lane's thread, whose C handler only marks it; the main thread runs the Python
            # handler when it next runs bytecode, so it must wake on its own (D517).
            thread.join(SIGNAL_LATENCY)
    if raised:
        raise raised[0]


def installed(name: str) -> str | None:
    """The command `name` beside this Python (its install's), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.access(beside, os.X_OK) else shutil.which(name)


def child_command(prog: str, *args: str) -> list[str]:
    """The command of a child: this command as the user started it (`trio-agents
    conformance`, found beside this Python, or `agent-conformance`), from the same
    interpreter and checkout, so the child runs as the replay command a report prints."""
    runtime = installed("trio-agents") if prog.startswith("trio-agents") else None
    if runtime is not None:
        return [runtime, "conformance", *args]
    return [sys.executable, "-m", "agent_conformance._cli", *args]
