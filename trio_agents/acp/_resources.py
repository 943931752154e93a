"""Reading what a prompt's `resource_link` points at, for the model.

One function, `read_resource(session, uri)`, is the only place a link is read, so reading
through the client (`fs/read_text_file`, when the client offers it) replaces its body and
nothing else. It never raises for what the link names: a file outside the session's
directory, missing, not a regular file, not UTF-8 text or larger than MAX_BYTES becomes a
note the model reads instead (`_prompt.resource_note`).

The directory test resolves symbolic links first (`os.path.realpath`), so a link inside the
directory to a file outside it is outside. The file is opened without following a last
symbolic link and without blocking (a FIFO would hang the prompt), then checked to be a
regular file on the descriptor, so it cannot be swapped between the check and the read.
"""

from __future__ import annotations

import os
import stat
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, cast

import trio

from ._jsonrpc import INTERNAL_ERROR, ClientRequestError
from ._prompt import resource_note, resource_text

__all__ = ["MAX_BYTES", "ClientRead", "ResourceScope", "client_reader", "read_resource"]

MAX_BYTES = 256 * 1024  # a larger file is not given to the model (a note says so)


class ResourceScope(Protocol):
    """What reading a link needs of its session: the directory it may read in."""

    @property
    def cwd(self) -> str: ...


ClientRead = Callable[[str], Awaitable[str]]
"""Reads a file's text through the client (`fs/read_text_file`), given its absolute path."""


def client_reader(
    request: Callable[[str, Mapping[str, Any]], Awaitable[Any]], session_id: str
) -> ClientRead:
    """The `ClientRead` that asks the client with `request` (the server's `client_request`)
    for a file of session `session_id`. An answer without text raises ClientRequestError."""

    async def read(path: str) -> str:
        result = await request("fs/read_text_file", {"sessionId": session_id, "path": path})
        content: object = (
            cast("Mapping[str, Any]", result).get("content")
            if isinstance(result, Mapping)
            else None
        )
        if not isinstance(content, str):
            raise ClientRequestError(
                "fs/read_text_file", INTERNAL_ERROR, "its answer has no text", answered=True
            )
        return content

    return read


async def read_resource(
    session: ResourceScope, uri: str, *, through_client: ClientRead | None = None
) -> str:
    """The text the model gets for a link to `uri` in `session`: the file's text between
    markers, or a note saying why it was not read. Always a checkpoint.

    With `through_client`, a file inside the session's directory is read by the client,
    which sees what its editor has open, unsaved changes included (design D230); an error
    it answers becomes a note. Without, the server reads it, in a worker thread."""
    path = _local_path(uri)
    if path is None:
        await trio.lowlevel.checkpoint()
        return resource_note(uri, "only file: links are read")
    unusable = _unusable(path)
    if unusable is not None:
        await trio.lowlevel.checkpoint()
        return resource_note(uri, unusable)
    if through_client is not None:
        # Resolving links touches the disk: in a worker thread, as the local read does.
        if await trio.to_thread.run_sync(_inside, session.cwd, path) is None:
            return resource_note(uri, f"outside the session's directory {session.cwd}")
        try:
            given = await through_client(path)
        except ClientRequestError as exc:
            return resource_note(uri, f"the client could not read it: {exc}")
        if len(given.encode("utf-8", "surrogatepass")) > MAX_BYTES:
            return resource_note(uri, f"more than the {MAX_BYTES} bytes given to the model")
        return resource_text(uri, given)
    why_not, text = await trio.to_thread.run_sync(_read, session.cwd, path)
    return resource_note(uri, why_not) if text is None else resource_text(uri, text)


def _local_path(uri: str) -> str | None:
    """The absolute path a `file:` URI names (its fragment and query ignored), or None."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = urllib.parse.unquote(parsed.path)
    return path if os.path.isabs(path) else None


def _unusable(path: str) -> str | None:
    """Why no file system call can take `path`, or None: a URI's escapes may decode to NUL,
    or to bytes that are not UTF-8 (`unquote` makes them U+FFFD, which is harmless), and a
    JSON string may hold a lone surrogate (D381)."""
    if "\0" in path:
        return "its path holds a NUL byte, which no file name can"
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return "its path is not valid Unicode text (a lone surrogate)"
    return None


def _inside(cwd: str, path: str) -> str | None:
    """`path` with its symbolic links resolved, if that is inside `cwd`; else None."""
    root = os.path.realpath(cwd)
    real = os.path.realpath(path)
    return real if os.path.commonpath([root, real]) == root else None


def _read(cwd: str, path: str) -> tuple[str, str | None]:
    """(why it was not read, None) or ("", its text)."""
    real = _inside(cwd, path)
    if real is None:
        return f"outside the session's directory {cwd}", None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "no such file", None
    except OSError as exc:
        return f"cannot be opened: {exc.strerror or exc}", None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file", None
        if info.st_size > MAX_BYTES:
            return f"{info.st_size} bytes, more than the {MAX_BYTES} given to the model", None
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}", None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:  # it grew since the fstat
        return f"more than the {MAX_BYTES} bytes given to the model", None
    if b"\0" in data:
        return "binary, not text", None
    try:
        return "", data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary, not UTF-8 text", None
