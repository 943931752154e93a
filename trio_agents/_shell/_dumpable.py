"""Keep this process's memory and environment out of reach of its children: the
non-dumpable flag. Pure (no trio import).

A command runs as the same user as the server, and the kernel lets a process of the same
user read another's `/proc/<pid>/environ` and `/proc/<pid>/mem`, so any command could read
the server's credentials from `/proc/$PPID/environ`. Marking the process non-dumpable
(`prctl(PR_SET_DUMPABLE, 0)`) makes its `/proc/<pid>` files belong to root: a process of the
same, unprivileged, user can no longer read them or attach to it with ptrace (D144). The
side effects: no core dump of this process, and debuggers of the same user cannot attach.
Children get their own flag at exec, so commands are unaffected.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["make_non_dumpable"]

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_non_dumpable() -> bool:
    """Mark this process non-dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`), so commands it
    runs as the same unprivileged user cannot read its environment or memory through
    `/proc`. Also disables its core dumps and same-user debuggers. Idempotent.

    Returns True if the process is now non-dumpable; False where the platform has no such
    flag (not Linux), or the call failed. Never raises, never blocks.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The C library the interpreter already has loaded (dlopen of NULL): not
        # `ctypes.util.find_library`, which runs `ldconfig -p` in a subprocess, a cost paid
        # on every start of `trio-agents acp` before it can answer `initialize` (D375).
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return False
    prctl.restype = ctypes.c_int
    if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    return bool(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
