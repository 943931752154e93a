"""`session/list`: the stored sessions as pages of ACP `SessionInfo`. Pure; no trio import.

Newest first by creation time (ties by id), and paged by position rather than by count: a
cursor is the (created_at, id) of the last session of its page, encoded, and the next page
is the sessions that sort after it. So a page never repeats or skips a session because
another was created meanwhile (a new session sorts before every cursor) or was written to
(the order does not depend on the update time, which the client can sort by itself).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from ._jsonrpc import JsonRpcError
from ._mapping import require_absolute

__all__ = ["PAGE_SIZE", "Listed", "page"]

PAGE_SIZE = 50


class Listed(Protocol):
    """What a page needs of a stored session (`SessionInfo` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def updated_at(self) -> float: ...
    @property
    def title(self) -> str | None: ...
    @property
    def cwd(self) -> str | None: ...


def page(
    sessions: Sequence[Listed], params: Mapping[str, Any], size: int = PAGE_SIZE
) -> dict[str, Any]:
    """The `session/list` result for `params` (checked by `_params`): the sessions that have
    a cwd (`params["cwd"]`, if given) after `params["cursor"]`, at most `size` of them, and
    `nextCursor` when more follow. Raises JsonRpcError (-32602) for a relative cwd and for a
    cursor this agent did not give."""
    cwd: str | None = params.get("cwd")
    if cwd is not None:
        cwd = require_absolute("cwd", cwd)
    cursor: str | None = params.get("cursor")
    after = _decode(cursor) if cursor is not None else None
    chosen = sorted(
        (
            s
            for s in sessions
            if s.cwd is not None and (cwd is None or os.path.normpath(s.cwd) == cwd)
        ),
        key=_key,
        reverse=True,
    )
    if after is not None:
        chosen = [s for s in chosen if _key(s) < after]
    shown = chosen[:size]
    result: dict[str, Any] = {"sessions": [_info(s) for s in shown]}
    if len(chosen) > size:
        result["nextCursor"] = _encode(_key(shown[-1]))
    return result


def _key(session: Listed) -> tuple[float, str]:
    return (session.created_at, session.id)


def _info(session: Listed) -> dict[str, Any]:
    assert session.cwd is not None
    info: dict[str, Any] = {
        "sessionId": session.id,
        "cwd": session.cwd,
        "updatedAt": iso_time(session.updated_at),
    }
    if session.title is not None:
        info["title"] = session.title
    return info


def iso_time(when: float) -> str:
    """`when` (seconds since the epoch) as ISO 8601 in UTC, to the millisecond."""
    moment = datetime.fromtimestamp(when, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _encode(key: tuple[float, str]) -> str:
    # repr-exact float through JSON: the next page starts exactly after this session.
    raw = json.dumps([key[0], key[1]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, sid = json.loads(raw)
        number = isinstance(created, int | float) and not isinstance(created, bool)
        if number and isinstance(sid, str):
            return (float(created), sid)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        pass
    shown = cursor if len(cursor) <= 40 else cursor[:37] + "..."
    raise JsonRpcError.invalid_params(
        f"cursor {shown!r} is not one this agent gave; send the nextCursor of the last "
        "page, or no cursor for the first"
    )
