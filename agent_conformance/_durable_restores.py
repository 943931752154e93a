"""The durable machine's restores apart from the runtime (rules L6, L13, L14): a store's
`restore` called as a program that reads or repairs sessions calls it (a second
process, a tool of its own), not as the runtime's resume does.

A stored session is restored once, or twice at once on the same store. Afterwards the file
holds what it held plus, if its last turn was open, the closers of L6 exactly once, and
each restore returned that; the session did not go live, so its claim is free: another open
of the store restores it at once, without SessionLiveElsewhereError.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import DuplicateSessionError, Record, SessionLiveElsewhereError, SqliteStore

from ._durable_file import FileReads
from ._durable_properties import RESTORE_FREES_CLAIM, RESTORE_REPAIRS_ONCE, OpenTurn, show, shown
from ._machine import rule
from ._targets import RuntimeSurface

__all__ = ["RestoresApart", "check_restored"]


class RestoresApart(FileReads):
    """The durable machine's rule that restores a stored session outside the runtime.

    What it uses of the machine: `host`, `path`, `rt` (its store's kind, `rt.sessions`),
    `expected` (what each stored session that is not live holds, updated here), `trace`,
    and the file's reads (`FileReads`).
    """

    path: Path
    expected: dict[str, tuple[Record, ...]]
    trace: list[str]
    rt: RuntimeSurface | None

    @precondition(lambda self: any(self.expected.values()) and self.rt is not None)
    @rule(data=st.data())
    def restore_apart(self, data: st.DataObject) -> None:
        """Restore a stored session on a store of the runtime's store's kind, once or twice
        at once, then from another open of the store: L6's repair once, and the claim freed
        (L14)."""
        sid = data.draw(
            st.sampled_from(sorted(s for s, records in self.expected.items() if records)),
            label="sid",
        )
        twice = data.draw(st.booleans(), label="twice at once")
        before = self.expected[sid]
        returned, raised, elsewhere = self.host.call(self._restore, sid, twice)
        self.trace.append(f"restore {sid}{' twice' if twice else ''}")
        restores = "two restores at once" if twice else "a restore"
        told = f"{restores} of {sid!r}, stored as {show(before)}"
        RESTORE_REPAIRS_ONCE.check(not raised, lambda: f"{told}: one raised {raised}")
        RESTORE_FREES_CLAIM.check(
            elsewhere == "restored",
            lambda: f"after {told}, another open of the store restoring it {elsewhere}",
        )
        found = self.host.call(self._read_file, [sid])[sid]
        self.expected[sid] = check_restored(told, before, returned, found)

    async def _restore(self, sid: str, twice: bool) -> tuple[list[tuple[Record, ...]], str, str]:
        """What the restores returned, the error one raised if any, and what another open
        of the store then did."""
        returned: list[tuple[Record, ...]] = []
        errors: list[str] = []

        assert self.rt is not None
        # A store of the runtime's own kind on the same file, as a program that reads or
        # repairs sessions opens it: the runtime's store instance is left to the runtime.
        kind = type(self.rt.sessions)
        assert issubclass(kind, SqliteStore)
        apart = kind(self.path)

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
        other = SqliteStore(self.path)
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
