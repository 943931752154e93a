"""Claims of sessions against other processes sharing a store file. No trio import.

A session live in a process is an exclusive `flock` on a file of its own in `<store>.live/`,
named by a hash of its id. The kernel drops the lock when the process dies, so a crash never
leaves a session claimed. The file is removed when the claim is released, with both halves of
the protocol that makes removing a lock file safe: the holder unlinks while it still holds
the lock, and a claimer that locked a file checks that the path still names it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from .._errors import SessionLiveElsewhereError

__all__ = ["claim", "release"]


def _lock_path(store: Path, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return Path(f"{store}.live") / name


def claim(store: Path, session_id: str) -> int:
    """Lock the claim file of `session_id` next to `store`; the locked descriptor. Raises
    SessionLiveElsewhereError if another process (or another open of the store) holds it."""
    path = _lock_path(store, session_id)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionLiveElsewhereError(
                f"session {session_id!r} is live in another process using {store}; "
                "close it there first"
            ) from None
        # The holder we got the lock after unlinks the file before it lets go: if the path
        # no longer names the file we locked, someone may hold the file that it names now.
        held = os.fstat(fd)
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


def release(store: Path, session_id: str, fd: int) -> None:
    """Give up the claim `claim` returned `fd` for, removing its file."""
    try:
        # Removed while still locked, so nobody can take a claim on it in between.
        os.unlink(_lock_path(store, session_id))
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)  # closing the descriptor drops the lock
