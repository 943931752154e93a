"""Where spilled output lives: a private directory per executor, and in it one per session,
each held open by file descriptor. Pure and synchronous (no trio import).

A directory is trusted through the descriptor opened when it was made, never through its
path again (D143): files are created relative to the descriptor (`dir_fd`, O_EXCL,
O_NOFOLLOW, mode 0600), and a path is handed out only after checking that the path still
leads to the directory the descriptor holds (same st_dev and st_ino, by lstat). A directory
that was removed, replaced or turned into a symlink is refused with SpillDirectoryError, and
nothing is spilled into it again. Removal goes through the descriptors too, so it never
follows a link out of the directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import secrets
import shutil
import stat
import tempfile
import time
import weakref
from typing import BinaryIO

from .._errors import SpillDirectoryError

__all__ = ["SpillDirectory", "SpillRoot"]

logger = logging.getLogger("trio_agents.shell")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _check_path(path: str, fd: int) -> None:
    """Raise SpillDirectoryError unless `path` (not followed if a link) is the directory
    `fd` holds."""
    try:
        seen = os.lstat(path)
    except OSError as exc:
        raise SpillDirectoryError(
            f"the spill directory {path} is gone ({exc.strerror}); refusing to hand out a "
            "path in it: the command's full output is unavailable"
        ) from None
    if _identity(seen) != _identity(os.fstat(fd)):
        kind = "a symlink" if stat.S_ISLNK(seen.st_mode) else "another file or directory"
        raise SpillDirectoryError(
            f"the spill directory {path} was replaced by {kind}; refusing to hand out a path "
            "in it: the command's full output is unavailable"
        )


class SpillDirectory:
    """One session's directory (mode 0700) inside a SpillRoot, held by descriptor."""

    __slots__ = ("_fd", "_files", "_root", "name", "path", "refused")

    def __init__(self, root: _RootHandle, name: str) -> None:
        os.mkdir(name, 0o700, dir_fd=root.fd)
        self._fd = os.open(name, _DIR_FLAGS, dir_fd=root.fd)
        self._root = root
        self.name = name
        self.path = os.path.join(root.path, name)
        self._files: dict[str, tuple[int, int]] = {}
        self.refused: SpillDirectoryError | None = None

    def verify(self) -> None:
        """Raise SpillDirectoryError unless the root's and this directory's paths still lead
        to the directories held open. Once refused, always refused."""
        if self.refused is not None:
            raise self.refused
        if self._fd < 0:
            self.refused = SpillDirectoryError(
                f"the spill directory {self.path} was removed when its session closed"
            )
            raise self.refused
        try:
            _check_path(self._root.path, self._root.fd)
            _check_path(self.path, self._fd)
        except SpillDirectoryError as exc:
            # Once, for whoever runs the server: something is tampering with the directory.
            logger.warning("%s", exc)
            self.refused = exc
            raise

    def open_file(self, label: str, mode: int = 0o600) -> tuple[BinaryIO, str]:
        """Create a new file (a name nobody can guess) for writing, unbuffered; return it and
        its name. Raises SpillDirectoryError for a refused directory, OSError otherwise."""
        self.verify()
        name = f"{secrets.token_hex(8)}-{label}.log"
        fd = os.open(name, _FILE_FLAGS, mode, dir_fd=self._fd)
        self._files[name] = _identity(os.fstat(fd))
        return os.fdopen(fd, "wb", buffering=0), name

    def path_of(self, name: str) -> str:
        """The path of file `name`, checked: the directory is the one held, and `name` in it
        is still the file created. Raises SpillDirectoryError otherwise."""
        self.verify()
        try:
            seen = _identity(os.stat(name, dir_fd=self._fd, follow_symlinks=False))
        except OSError:
            seen = None
        if seen is None or seen != self._files.get(name):
            raise SpillDirectoryError(
                f"the spill file {os.path.join(self.path, name)} was removed or replaced; "
                "the command's full output is unavailable"
            )
        return os.path.join(self.path, name)

    def discard(self, name: str) -> None:
        """Remove file `name` (an incomplete spill); never raises."""
        self._files.pop(name, None)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=self._fd)

    def remove(self) -> None:
        """Remove the directory and everything in it, through the descriptors; never raises.
        A name in the root that no longer leads to this directory is left alone."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            with contextlib.suppress(OSError):
                mine = _identity(os.fstat(fd))
                if _identity(os.stat(self.name, dir_fd=self._root.fd, follow_symlinks=False)) == (
                    mine
                ):
                    shutil.rmtree(self.name, dir_fd=self._root.fd)
        finally:
            os.close(fd)
            self._files.clear()


class _RootHandle:
    __slots__ = ("directories", "fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.directories: dict[object, SpillDirectory] = {}

    def remove(self) -> None:
        if self.fd < 0:
            return
        for directory in self.directories.values():
            directory.remove()
        self.directories.clear()
        fd, self.fd = self.fd, -1
        try:
            with contextlib.suppress(OSError):
                # Through the parent's descriptor, so the name checked is the name removed.
                parent = os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY)
                try:
                    name = os.path.basename(self.path)
                    seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
                    if _identity(seen) == _identity(os.fstat(fd)):
                        os.rmdir(name, dir_fd=parent)
                finally:
                    os.close(parent)
        finally:
            os.close(fd)


PREFIX = "trio-agents-spill-"
LEFT_OVER_AFTER = 600.0
"""Seconds since a root was last changed before one nobody holds is taken as left over: a
root is locked right after it is made, and this leaves that moment well alone."""


def remove_left_over(parent: str) -> int:
    """Remove the spill roots in `parent` that are this user's, unchanged for
    LEFT_OVER_AFTER seconds, and held by no process (theirs died, by SIGKILL most often:
    nothing else removes them). Returns how many; never raises."""
    removed = 0
    try:
        parent_fd = os.open(parent, _DIR_FLAGS)
    except OSError:
        return 0
    try:
        with os.scandir(parent_fd) as entries:
            names = [e.name for e in entries if e.name.startswith(PREFIX)]
        now = time.time()
        for name in names:
            with contextlib.suppress(OSError):
                seen = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                if not stat.S_ISDIR(seen.st_mode) or seen.st_uid != os.getuid():
                    continue
                if now - seen.st_mtime < LEFT_OVER_AFTER:
                    continue
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
                try:
                    if _identity(os.fstat(fd)) != _identity(seen):
                        continue
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: OSError, kept
                    shutil.rmtree(name, dir_fd=parent_fd)
                    removed += 1
                finally:
                    os.close(fd)
    finally:
        os.close(parent_fd)
    return removed


class SpillRoot:
    """A private directory (mode 0700, made by mkdtemp) holding one SpillDirectory per key
    (a session's owner token, or None). Removed by `remove()`; as a last resort when it is
    collected or the interpreter exits."""

    __slots__ = ("__weakref__", "_handle", "_names")

    def __init__(self, parent: str | None = None) -> None:
        path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
        fd = os.open(path, _DIR_FLAGS)
        self._handle = _RootHandle(path, fd)
        self._names = itertools.count(1)
        weakref.finalize(self, self._handle.remove)
        _check_path(path, fd)  # nobody swapped it between mkdtemp and the open
        # Held while this process lives: the kernel lets it go when the process dies, even
        # by SIGKILL, which is how a later root knows this one is left over (D519).
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        remove_left_over(os.path.dirname(path))

    @property
    def path(self) -> str:
        """The root directory's path (it holds only the sessions' directories)."""
        return self._handle.path

    def directory(self, key: object) -> SpillDirectory:
        """The directory for `key`, made on first use. Raises OSError when it cannot be
        made (the root was removed, or replaced: SpillDirectoryError)."""
        handle = self._handle
        directory = handle.directories.get(key)
        if directory is None:
            if handle.fd < 0:
                raise SpillDirectoryError(f"the spill directory {handle.path} was removed")
            _check_path(handle.path, handle.fd)
            directory = SpillDirectory(handle, f"{next(self._names)}-{secrets.token_hex(4)}")
            handle.directories[key] = directory
        return directory

    def existing(self, key: object) -> SpillDirectory | None:
        """The directory for `key` if it has been made (and not removed), else None."""
        return self._handle.directories.get(key)

    def remove_directory(self, key: object) -> None:
        """Remove `key`'s directory and its files, if it has one; never raises."""
        directory = self._handle.directories.pop(key, None)
        if directory is not None:
            directory.remove()

    def remove(self) -> None:
        """Remove every directory, their files, and the root; never raises."""
        self._handle.remove()
