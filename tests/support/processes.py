"""What the kernel says about processes, read from /proc, independent of the library."""

from __future__ import annotations

import os
import pathlib

__all__ = ["descendants", "gone", "host_pid", "live_group_members", "with_marker"]


def gone(pid: int) -> bool:
    """Dead: absent from the process table, or a zombie waiting for init to reap it."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in ("Z", "X")


def live_group_members(pgid: int) -> list[int]:
    """Pids in group `pgid` that are not zombies, from /proc (independent of the library)."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] not in ("Z", "X"):
                parents[int(entry)] = int(stat[1])
    return parents


def descendants(root: int | None = None) -> list[int]:
    """The live descendants of `root` (default: this process), from /proc."""
    top = os.getpid() if root is None else root
    parents = _parents()
    found: list[int] = []
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor > 1:
            if ancestor == top:
                found.append(pid)
                break
            ancestor = parents.get(ancestor)
    return found


def host_pid(pid: int, marker: str | None = None) -> int:
    """This machine's pid of the live descendant that a sandboxed command knows as `pid` (the
    number in its own PID namespace); `pid` itself when no sandboxed descendant has it (an
    unsandboxed command's `$!` is already this machine's). With `marker`, a choice between
    several such descendants (several sandboxes each have their own pid 3) goes to the one
    whose command line contains it. Asserts it is not ambiguous.

    The marker only breaks ties: a process in the middle of an `exec` briefly has no
    command line to read, and one found by its number alone must not then be missed."""
    matches: list[int] = []
    for candidate in descendants():
        try:
            status = pathlib.Path(f"/proc/{candidate}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                numbers = [int(n) for n in line.split()[1:]]
                if len(numbers) > 1 and numbers[-1] == pid:
                    matches.append(candidate)
    if len(matches) > 1 and marker is not None:
        marked = set(with_marker(marker))
        matches = [candidate for candidate in matches if candidate in marked]
    assert len(matches) <= 1, f"several sandboxed descendants are pid {pid}: {matches}"
    return matches[0] if matches else pid


def with_marker(marker: str) -> list[int]:
    """The live processes whose command line contains `marker`, from /proc."""
    found: list[int] = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes()
                state = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in cmdline and state not in ("Z", "X"):
                found.append(int(entry))
    return found
