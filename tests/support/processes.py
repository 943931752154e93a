"""What the kernel says about processes, read from /proc, independent of the library."""

from __future__ import annotations

import os
import pathlib

__all__ = ["gone", "live_group_members"]


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
