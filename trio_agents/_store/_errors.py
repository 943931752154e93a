"""What went wrong with a store file, in one sentence that names it. No trio import.

SQLite reports a read-only file, a full disk and a missing directory as error codes whose
messages do not name the file ("unable to open database file", "database or disk is
full"), and Python reports a path through a non-directory as `FileExistsError` on the
parent. `file_error` turns each into the library error a user can act on: the file, the
cause, and what to do.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from .._errors import NotAStoreError, StoreFileError, StoreLockedError, TrioAgentsError

__all__ = ["file_error", "is_busy", "is_file_error", "non_directory_ancestor", "on_read_only_fs"]

_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
# What the file or the system did, as opposed to what another writer of the file did to our
# rows (an IntegrityError), which is not the file's fault and propagates as it is.
_FILE_CODES = _BUSY | {
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_PERM,
}


def _code(exc: sqlite3.Error) -> int | None:
    """The primary result code (extended codes such as SQLITE_IOERR_WRITE keep it in the
    low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` means another connection holds a lock we need (worth retrying)."""
    return _code(exc) in _BUSY or "database is locked" in str(exc)


def is_file_error(exc: BaseException) -> bool:
    """Whether `file_error` has something to say about `exc`: an OSError, or an SQLite error
    about the file, the disk or a lock (not one of the library's own errors)."""
    if isinstance(exc, TrioAgentsError):
        return False
    if isinstance(exc, OSError):
        return True
    return isinstance(exc, sqlite3.Error) and (is_busy(exc) or _code(exc) in _FILE_CODES)


def on_read_only_fs(path: Path) -> bool:
    """Whether `path` (or its directory, when it does not exist) is on a read-only mount."""
    for candidate in (path, path.parent):
        try:
            return bool(os.statvfs(candidate).f_flag & os.ST_RDONLY)
        except OSError:
            continue
    return False


def _access_cause(path: Path, reading: bool) -> tuple[str, str] | None:
    """(why this process may not use the store at `path` as it tried to, only `reading` or
    also writing, and what to do), or None when no permission explains it."""
    if path.exists() and not os.access(path, os.R_OK):
        return (
            "this user may not read the file",
            "give it read access (chmod u+r), or use another path",
        )
    if on_read_only_fs(path):
        return "it is on a read-only file system", "copy it to a writable one, or use another path"
    if not reading and path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only", "make it writable (chmod u+w), or use another path"
    if not os.access(path.parent, os.W_OK):
        # Reading too: in WAL mode SQLite keeps its shared-memory file beside the store.
        need = " (even to read it, SQLite needs its -shm file there)" if reading else ""
        return (
            f"its directory {path.parent} is not writable{need}",
            "make it writable, or copy the store to one that is",
        )
    return None


def file_error(
    path: Path, exc: BaseException, doing: str, *, reading: bool = False
) -> TrioAgentsError:
    """The error to raise for `exc`, raised while `doing` ("open", "write", "read") the
    store at `path`, opened for `reading` only or not. Chain it: `raise file_error(...) from
    exc`."""
    where = str(path)
    if path.is_dir():
        # SQLite says "unable to open database file", or "disk I/O error" read-only.
        return StoreFileError(
            f"cannot {doing} {where}: {where} is a directory; give the path of a store file",
            path=where,
        )
    if isinstance(exc, sqlite3.Error):
        code = _code(exc)
        detail = f"SQLite: {exc}"
        if is_busy(exc):
            return StoreLockedError(
                f"cannot {doing} {where}: another process holds its write lock ({detail}); "
                "close that process, or try again"
            )
        if code == sqlite3.SQLITE_NOTADB:
            return NotAStoreError(f"{where} is not an SQLite database ({exc}); use another path")
        if code == sqlite3.SQLITE_FULL:
            return StoreFileError(
                f"cannot {doing} {where}: the disk is full ({detail}); free some space, or "
                "use another path",
                path=where,
            )
        if code == sqlite3.SQLITE_CORRUPT:
            return StoreFileError(
                f"cannot {doing} {where}: the file is damaged ({detail}); restore it from a "
                "backup, or use another path",
                path=where,
            )
        denied = _access_cause(path, reading)
        if denied is not None and (
            code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN) or "readonly" in str(exc)
        ):
            cause, hint = denied
            return StoreFileError(f"cannot {doing} {where}: {cause} ({detail}); {hint}", path=where)
        return StoreFileError(f"cannot {doing} {where}: {detail}", path=where)
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return StoreFileError(
                f"cannot {doing} {where}: the disk is full; free some space, or use another path",
                path=where,
            )
        blocker = non_directory_ancestor(path)
        if blocker is not None:
            return StoreFileError(
                f"cannot {doing} {where}: {blocker} is not a directory; use another path",
                path=where,
            )
        denied = _access_cause(path, reading) if exc.errno in (errno.EROFS, errno.EACCES) else None
        cause, hint = denied or (exc.strerror or str(exc), "use another path")
        return StoreFileError(f"cannot {doing} {where}: {cause}; {hint}", path=where)
    return StoreFileError(f"cannot {doing} {where}: {exc}", path=where)


def non_directory_ancestor(path: Path) -> Path | None:
    """The first ancestor of `path` that exists but is not a directory (`/dev/null` in
    `/dev/null/x.db`), or None."""
    for ancestor in reversed(path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return ancestor
    return None
