"""The file-access seam: how the file tools read and write a file's text.

`FileAccess` is the seam. `LocalFiles` reads and writes this machine's file system, in a
worker thread; the ACP server gives a session whose client offers `fs.readTextFile` or
`fs.writeTextFile` an access that goes through the client's `fs/*` methods instead
(`trio_agents.acp._client_files`), so the model reads what the editor holds, unsaved
changes included, and an edit lands in the editor's buffer. The tools decide what may be
touched (inside the working directory, symbolic links resolved) before they ask the access;
an access only reads and writes the path it is given, which is absolute and resolved.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Protocol

import trio

__all__ = ["MAX_FILE_BYTES", "FileAccess", "LocalFiles"]

MAX_FILE_BYTES = 1024 * 1024
"""The largest file the tools read or edit: a larger one is refused (`read` still pages
through a file up to this size with offset and limit)."""


class FileAccess(Protocol):
    """Reads and writes a file's whole text, given its absolute, resolved path."""

    async def read_text(self, path: str) -> str:
        """The file's text. Raises FileNotFoundError when there is no such file, another
        OSError when it cannot be read (`errno.EFBIG` past MAX_FILE_BYTES), ValueError when
        it is not UTF-8 text. Always a checkpoint."""
        ...

    async def write_text(self, path: str, text: str) -> None:
        """Make the file hold `text`, creating it (and, locally, its missing directories).
        Raises OSError when it cannot. Always a checkpoint."""
        ...


class LocalFiles:
    """This machine's file system, read and written in a worker thread (never the event
    loop). The path is opened one component at a time from `/`, none of them followed if it
    is a symbolic link: the path the tools checked has none, so a directory swapped for a
    link after the check (by a command of the session, say) fails the open rather than
    leading outside the working directory. A file is opened without blocking (a FIFO would
    hang the call) and checked to be a regular file on its descriptor."""

    async def read_text(self, path: str) -> str:
        """See `FileAccess.read_text`."""
        return await trio.to_thread.run_sync(_read, path)

    async def write_text(self, path: str, text: str) -> None:
        """See `FileAccess.write_text`."""
        await trio.to_thread.run_sync(_write, path, text)


_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_exactly(path: str, flags: int, *, make_directories: bool = False) -> int:
    """Open the absolute path `path`, which has no symbolic link in it, following none: a
    component that is a link now fails with ELOOP or ENOTDIR. Missing directories are made
    on the way when `make_directories`."""
    *directories, name = [part for part in path.split("/") if part]
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for directory in directories:
            if make_directories:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(directory, 0o777, dir_fd=fd)
            inner = os.open(
                directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = inner
        return os.open(name, flags | _FLAGS, 0o666, dir_fd=fd)
    finally:
        os.close(fd)


def _read(path: str) -> str:
    fd = _open_exactly(path, os.O_RDONLY)
    try:
        _require_regular(fd, path)
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(errno.EFBIG, f"larger than the {MAX_FILE_BYTES} bytes the tools take", path)
    if b"\0" in data:
        raise ValueError("binary, not text")
    return data.decode("utf-8")


def _write(path: str, text: str) -> None:
    data = text.encode("utf-8")
    # Truncated only once the descriptor is known to be a regular file's.
    fd = _open_exactly(path, os.O_WRONLY | os.O_CREAT, make_directories=True)
    try:
        _require_regular(fd, path)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _require_regular(fd: int, path: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
