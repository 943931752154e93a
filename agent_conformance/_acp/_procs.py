"""The processes an agent started, as /proc shows them: its descendants, each known by pid
and start time (a pid alone may be reused), and which of those are still alive. Pure: no
trio."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

__all__ = ["Proc", "alive", "descendants", "kill_all", "proc_of"]


@dataclass(frozen=True)
class Proc:
    """A process: pid, start time (clock ticks since boot) and its command line."""

    pid: int
    start: int
    command: str


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of `pid`, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state (3), ppid (4), ... starttime (22).
    return fields[0].decode(), int(fields[1]), int(fields[19])


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def descendants(root: int) -> list[Proc]:
    """The live descendants of `root` (not itself), read from /proc at once."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[0] in ("Z", "X"):
            continue
        children.setdefault(stat[1], []).append(int(entry))
        starts[int(entry)] = stat[2]
    found: list[Proc] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(Proc(pid, starts[pid], _command(pid)))
        todo += children.get(pid, [])
    return found


def proc_of(pid: int) -> Proc | None:
    """The process `pid` now (with its start time, so a reused pid is told apart), or None
    when it is gone."""
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return None
    return Proc(pid, stat[2], _command(pid))


def alive(proc: Proc) -> bool:
    """Whether `proc` is still running: its pid has its start time and is no zombie."""
    stat = _stat(proc.pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[2] == proc.start


def kill_all(procs: list[Proc]) -> None:
    """SIGKILL those of `procs` that are still the same live processes (the suite's clean-up
    after an agent that left them)."""
    for proc in procs:
        if alive(proc):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)
