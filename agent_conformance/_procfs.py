"""Process groups as the kernel sees them, read from /proc: what the shell machine checks a
job's end against, independently of the executor under test. Pure; no trio import."""

from __future__ import annotations

import os

__all__ = ["live_groups"]


def live_groups() -> dict[int, list[int]]:
    """The live (not zombie) pids of every process group, by group, read from /proc at once.
    Raises OSError if /proc cannot be listed."""
    groups: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                # After the command name, which may hold anything: state, ppid, pgrp, ...
                state, _, group = stat_file.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # exited while we looked
        if state not in (b"Z", b"X"):
            groups.setdefault(int(group), []).append(int(entry))
    return groups
