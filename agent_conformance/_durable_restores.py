"""The durable machine's restores apart from the runtime (rules L6, L13, L14): a store's
`restore` called as a program that reads or repairs sessions calls it (a second
process, a tool of its own), not as the runtime's resume does.

A stored session is restored once, or twice at once on the same store, as the file holds
it or in a copy of the file cut inside one of its turns, as a crash may leave it (the
machine's own crashes leave a turn open only now and then). Afterwards the file holds what
it held plus, if its last turn was open, the closers of L6 exactly once, and each restore
returned that; the session did not go live, so its claim is free: another open of the store
restores it at once, without SessionLiveElsewhereError.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import DuplicateSessionError, Record, SessionLiveElsewhereError, SqliteStore

from ._durable_file import FileReads
from ._durable_properties import RESTORE_FREES_CLAIM, RESTORE_REPAIRS_ONCE, OpenTurn, show, shown
from ._machine import rule
from ._targets import RuntimeSurface
from ._vocabulary import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_APPROVAL,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)

__all__ = ["RestoresApart", "check_restored", "crash_points", "cut_copy"]


class RestoresApart(FileReads):
    """The durable machine's rule that restores a stored session outside the runtime.

    What it uses of the machine: `host`, `path`, `rt` (its store's kind, `rt.sessions`),
    `expected` (what each stored session that is not live holds, updated here), `trace`,
    and the file's reads (`FileReads`).
    """

    path: Path
    expected: dict[str, tuple[Record, ...]]
    _cuts: ClassVar[int] = 0
    trace: list[str]
    rt: RuntimeSurface | None

    @precondition(lambda self: any(self.expected.values()) and self.rt is not None)
    @rule(data=st.data())
    def restore_apart(self, data: st.DataObject) -> None:
        """Restore a stored session on a store of the runtime's store's kind, once or twice
        at once, then from another open of the store: L6's repair once, and the claim freed
        (L14). The session is restored as the file holds it, or in a copy of the file cut
        where a crash may cut it, inside a turn."""
        stored = sorted(s for s, records in self.expected.items() if records)
        sid = data.draw(st.sampled_from(stored), label="sid")
        twice = data.draw(st.booleans(), label="twice at once")
        before = self.expected[sid]
        points = crash_points(before)
        # A crash that left a turn open is what L6 and L13 are about; the machine's own
        # crashes leave one only now and then, so a copy of the file is cut inside a turn.
        if len(points) > 0 and data.draw(st.booleans(), label="cut in a copy"):
            at = data.draw(st.sampled_from(points), label="cut after record")
            RestoresApart._cuts += 1
            path = self.path.with_name(f"cut-{RestoresApart._cuts}.sqlite3")
            cut_copy(self.path, path, sid, at)
            before = before[:at]
            where = f"in a copy of the store cut after record {at - 1} of {sid!r}"
        else:
            path, where = self.path, ""
        returned, raised, elsewhere = self.host.call(self._restore, path, sid, twice)
        self.trace.append(f"restore {sid}{' twice' if twice else ''}{' cut' if where else ''}")
        restores = "two restores at once" if twice else "a restore"
        told = f"{where + ', ' if where else ''}{restores} of {sid!r}, stored as {show(before)}"
        RESTORE_REPAIRS_ONCE.check(not raised, lambda: f"{told}: one raised {raised}")
        RESTORE_FREES_CLAIM.check(
            elsewhere == "restored",
            lambda: f"after {told}, another open of the store restoring it {elsewhere}",
        )
        if where:
            found = self.host.call(self._read_cut_copy, path, sid)
            check_restored(told, before, returned, found)
            return
        found = self.host.call(self._read_file, [sid])[sid]
        self.expected[sid] = check_restored(told, before, returned, found)

    async def _read_cut_copy(self, path: Path, sid: str) -> tuple[Record, ...] | str | None:
        reader = SqliteStore(path, readonly=True)
        async with reader.running():
            return (await self._read_with(reader, [sid]))[sid]

    async def _restore(
        self, path: Path, sid: str, twice: bool
    ) -> tuple[list[tuple[Record, ...]], str, str]:
        """What the restores of `sid` in the store file at `path` returned, the error one
        raised if any, and what another open of the store then did."""
        returned: list[tuple[Record, ...]] = []
        errors: list[str] = []

        assert self.rt is not None
        # A store of the runtime's own kind on the same file, as a program that reads or
        # repairs sessions opens it: the runtime's store instance is left to the runtime.
        kind = type(self.rt.sessions)
        assert issubclass(kind, SqliteStore)
        apart = kind(path)

        async def restore() -> None:
            try:
                stored = await apart.restore(sid)
            except DuplicateSessionError:
                # A store may refuse the second of two restores at once rather than wait;
                # the file must still hold the repair once.
                if not twice:
                    raise
                return
            except Exception as exc:  # the error is the finding: repaired twice, at once
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            returned.append(tuple(stored.records))

        async with apart.running(), trio.open_nursery() as nursery:
            nursery.start_soon(restore)
            if twice:
                nursery.start_soon(restore)
        if errors:
            return returned, errors[0], ""
        other = SqliteStore(path)
        async with other.running():
            try:
                await other.restore(sid)
            except SessionLiveElsewhereError as exc:
                return returned, "", f"raised SessionLiveElsewhereError: {exc}"
        return returned, "", "restored"


def check_restored(
    told: str,
    before: Sequence[Record],
    returned: Sequence[Sequence[Record]],
    found: Sequence[Record] | str | None,
) -> tuple[Record, ...]:
    """What the file holds (`found`) after the restores `told` of a session stored as
    `before`, each of which `returned` records: `before` and L6's closers once. Returns what
    the file holds."""
    wanted = OpenTurn(before).repair_types
    RESTORE_REPAIRS_ONCE.check(
        isinstance(found, tuple)
        and found[: len(before)] == tuple(before)
        and [r.type for r in found[len(before) :]] == wanted,
        lambda: (
            f"{told}, left the file holding {shown(found)}; it must hold what it held, then "
            f"{wanted or 'nothing more'} once"
        ),
    )
    assert isinstance(found, tuple)
    wrong = [got for got in returned if tuple(got) != found]
    RESTORE_REPAIRS_ONCE.check(
        not wrong,
        lambda: f"{told}, a restore returned {show(wrong[0])}; the file holds {show(found)}",
    )
    return found


# What a crash inside a turn may leave last: the records a turn appends one commit apart
# (a turn/start is appended with its user/message, so never alone).
_CUT_AFTER = frozenset(
    {USER_MESSAGE, STEP_START, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_APPROVAL, TOOL_RESULT, STEP_END}
)


def crash_points(records: Sequence[Record]) -> list[int]:
    """Each count of leading `records` a crash may leave with a turn open: the session cut
    after one of the records of a turn, before the turn ended."""
    points: list[int] = []
    for at in range(1, len(records)):
        if records[at - 1].type in _CUT_AFTER and OpenTurn(records[:at]).repair_types:
            points.append(at)
    return points


def cut_copy(source: Path, copy: Path, sid: str, at: int) -> None:
    """Copy the store file `source` to `copy` (a consistent snapshot, through SQLite's
    backup) with session `sid` holding only its first `at` records, as a crash leaves it."""
    with sqlite3.connect(source) as reader, sqlite3.connect(copy) as writer:
        reader.backup(writer)
        writer.execute("DELETE FROM records WHERE session_id = ? AND seq >= ?", (sid, at))
    writer.close()
    reader.close()
