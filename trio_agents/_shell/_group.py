"""Process groups, as the kernel sees them: signal one, ask whether any of its processes is
still alive, wait until none is. What a group kill needs, apart from the jobs it kills."""

from __future__ import annotations

import contextlib
import os

import trio

__all__ = [
    "GROUP_POLL",
    "group_gone",
    "group_has_live_members",
    "live_group_members",
    "live_groups",
    "live_processes",
    "signal_group",
    "signal_members",
]


GROUP_POLL = 0.005  # seconds between checks that a killed group is gone


async def group_gone(pgid: int) -> None:
    """Return once no process of group `pgid` is alive. A checkpoint."""
    while group_has_live_members(pgid):  # noqa: ASYNC110 - no event exists for this
        await trio.sleep(GROUP_POLL)


def group_has_live_members(pgid: int) -> bool:
    """Whether any process of group `pgid` is still alive (zombies are dead: they only wait
    for whoever adopted them, init in the end, to reap them)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # the kernel knows of no member, zombie or not: /proc need not be read
    except (PermissionError, ValueError, OverflowError):
        pass
    try:
        return bool(live_group_members(pgid))
    except OSError:
        return signal_group(pgid, 0)  # no /proc: ask the kernel (zombies then count)


def live_processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live (not zombie) process, read from /proc
    at once. Raises OSError if /proc cannot be listed."""
    found: list[tuple[int, int, int]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        # After the command name: state, ppid, pgrp, ...
        if fields[0] not in (b"Z", b"X"):
            found.append((int(entry), int(fields[1]), int(fields[2])))
    return found


def live_groups() -> dict[int, list[int]]:
    """The live (not zombie) pids of every process group, by group, read from /proc at once.
    Raises OSError if /proc cannot be listed."""
    groups: dict[int, list[int]] = {}
    for pid, _, group in live_processes():
        groups.setdefault(group, []).append(pid)
    return groups


def live_group_members(pgid: int) -> list[int]:
    """The live (not zombie) pids of group `pgid`, read from /proc. Raises OSError if /proc
    cannot be listed."""
    return live_groups().get(pgid, [])


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False if the group no longer exists (or is not ours)."""
    if pgid <= 0:
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_members(pgid: int, sig: int, *, spare: int, sent: set[int]) -> None:
    """Send `sig` to every live member of group `pgid` but `spare` and those in `sent`, one
    by one, and add them to `sent` (a process forked meanwhile misses it: whoever calls this
    calls it again, with the same set, until the group is gone)."""
    try:
        members = live_group_members(pgid)
    except OSError:
        return
    for pid in members:
        if pid != spare and pid not in sent:
            sent.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
