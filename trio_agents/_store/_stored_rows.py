"""A stored session read back from rows, as every durable store keeps them: a JSON header
and `(seq, type, data)` records. What can be wrong with rows that anything may have written
is the same whatever the store, so it is said once: each problem is a CorruptSessionError
naming the session, the record and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._errors import CorruptSessionError
from ._base import StoredSession
from ._record_shape import shape_problem
from ._records import Record
from ._repair import validate

__all__ = ["corrupt", "decode", "stored_session"]


def stored_session(
    session_id: str,
    header: object,
    rows: Sequence[tuple[int, object, object]],
    backup: str,
) -> StoredSession:
    """The session of `header` (JSON text) and `rows` (seq, type, JSON data), in seq order.
    `backup` names what a user restores from a backup ("store file", "database").

    Raises CorruptSessionError for a header or record that is not JSON text or not of its
    type's shape, a type that is not text, or seqs that do not run 0, 1, 2, ...
    """
    decoded = decode(session_id, None, header, backup=backup)
    if not isinstance(decoded, dict):
        raise corrupt(session_id, None, "it is not an object", backup)
    validate(session_id, [seq for seq, _, _ in rows])
    records: list[Record] = []
    for seq, kind, text in rows:
        if not isinstance(kind, str):
            raise corrupt(session_id, seq, f"its type is {kind!r}, not text", backup)
        data = decode(session_id, seq, text, f"a {kind!r} record: ", backup)
        problem = shape_problem(kind, data)
        if problem is not None:
            raise corrupt(session_id, seq, f"a {kind!r} record: {problem}", backup)
        records.append(Record.of(kind, data))
    return StoredSession(session_id, decoded, tuple(records))  # pyright: ignore[reportUnknownArgumentType]


def decode(
    session_id: str, seq: int | None, text: object, what: str = "", backup: str = "store file"
) -> Any:
    """The JSON value of a stored text column, or CorruptSessionError saying why not."""
    try:
        if isinstance(text, bytes):
            raise ValueError("it is not UTF-8 text")
        if not isinstance(text, str):
            raise ValueError(f"it is stored as {type(text).__name__}")
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise corrupt(session_id, seq, f"{what}it is not valid JSON ({exc})", backup) from exc


def corrupt(
    session_id: str, seq: int | None, problem: str, backup: str = "store file"
) -> CorruptSessionError:
    """The error for damage at `seq` (None: the header) of `session_id`."""
    what = "its header" if seq is None else f"record {seq}"
    return CorruptSessionError(
        f"session {session_id!r} is damaged: {what} cannot be read: {problem}; restore the "
        f"{backup} from a backup, or remove the session",
        session_id=session_id,
        seq=seq,
    )
