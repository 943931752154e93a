"""The file tools' access through the ACP client: `fs/read_text_file` and
`fs/write_text_file`, each when `initialize` offered it, this machine's file system
otherwise (the file-access seam, `trio_agents._tool._file_access`).

Through the client the model reads what the editor holds, unsaved changes included, and an
edit lands in the editor's buffer, which the editor then shows, and saves, as its own
change; a write straight to the disk would leave an open buffer out of date, or be
overwritten by it (D521). Reads reuse the request path of a prompt's resource links
(`_resources.client_reader`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from .._tool._file_access import MAX_FILE_BYTES, FileAccess
from ._jsonrpc import ClientRequestError
from ._resources import client_reader

__all__ = ["ClientFiles"]

RESOURCE_NOT_FOUND = -32002  # ACP's error code for a resource (here a file) that is not there


class ClientFiles:
    """A session's file access: reads through the client when `reads`, writes through it
    when `writes`, and `local` does the rest. `request` is the server's `client_request`.

    An error the client answers is an OSError with its message; a read the client answers
    with "not found" (-32002), or with any error for a file the disk does not have either,
    is a FileNotFoundError, so a `write` knows it makes a new file.
    """

    def __init__(
        self,
        request: Callable[[str, Mapping[str, Any]], Awaitable[Any]],
        session_id: str,
        *,
        reads: bool,
        writes: bool,
        local: FileAccess,
    ) -> None:
        self._request = request
        self._session_id = session_id
        self._read = client_reader(request, session_id) if reads else None
        self._writes = writes
        self._local = local

    async def read_text(self, path: str) -> str:
        """See `FileAccess.read_text`."""
        if self._read is None:
            return await self._local.read_text(path)
        try:
            text = await self._read(path)
        except ClientRequestError as exc:
            if exc.code == RESOURCE_NOT_FOUND or not await trio.to_thread.run_sync(
                os.path.lexists, path
            ):
                raise FileNotFoundError(
                    errno.ENOENT, f"the client has no file: {exc}", path
                ) from None
            raise OSError(errno.EIO, f"the client could not read it: {exc}", path) from None
        if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, f"larger than the {MAX_FILE_BYTES} bytes the tools take")
        return text

    async def write_text(self, path: str, text: str) -> None:
        """See `FileAccess.write_text`."""
        if not self._writes:
            await self._local.write_text(path, text)
            return
        params = {"sessionId": self._session_id, "path": path, "content": text}
        try:
            await self._request("fs/write_text_file", params)
        except ClientRequestError as exc:
            raise OSError(errno.EIO, f"the client could not write it: {exc}", path) from None
