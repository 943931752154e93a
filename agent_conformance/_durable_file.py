"""The durable machine's reads of its store's file (rules L7, L8, A14): each session as a
fresh read-only SqliteStore reads it, and what must already be committed there once every
task is blocked, without anyone flushing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
import trio.testing

from trio_agents import (
    AgentHandle,
    AgentStatus,
    CorruptSessionError,
    Record,
    SessionNotFoundError,
    SqliteStore,
)
from trio_agents.testing import GateTool

from ._durable_checks import committed_points
from ._durable_properties import (
    APPROVAL_DURABLE,
    IDLE_AFTER_COMMIT,
    QUEUED_PROMPT_COMMITTED,
    WRITE_AHEAD,
    show,
)
from ._machine import ConformanceMachine

__all__ = ["QUEUED_WITHIN", "FileReads", "held_of"]

# Real seconds a prompt/queued record may take to reach the file on its own: its commit is
# requested at once (rule L8), and a store that forgets to request it holds the record
# until the next commit, which a held tool or model call puts off for good.
QUEUED_WITHIN = 10.0


class FileReads(ConformanceMachine):
    """The durable machine's reads of the file and its check of what is committed.

    What it uses of the machine: `path`, `handles`, `gates`, and `_reader` (a read-only
    store the runtime's context keeps open, or None).
    """

    path: Path
    handles: dict[str, AgentHandle]
    gates: dict[str, GateTool]
    _reader: SqliteStore | None

    async def _check_committed(self, timely: bool = True) -> None:
        """Once every task is blocked, read the file (no flush): an agent with a tool
        running has its step's tool calls there (write-ahead), an IDLE agent with nothing
        parked its whole session; and, if `timely` (no other connection holds the write
        lock), a prompt/queued or prompt/dropped record gets there without anyone flushing,
        within QUEUED_WITHIN seconds (a commit requested at once has no bound of its own; a
        generous one costs a correct store nothing)."""
        await trio.testing.wait_all_tasks_blocked()
        needs: dict[str, tuple[int, int, str]] = {}
        for sid, handle in self.handles.items():
            records = handle.agent.session.records
            needs[sid] = committed_points(
                records,
                tool_running=self.gates[sid].held,
                idle=handle.agent.status == AgentStatus.IDLE and not handle.agent.parked,
            )
        if not timely:
            needs = {sid: (must, 0, why) for sid, (must, _, why) in needs.items()}
        if not any(must or queued for must, queued, _ in needs.values()):
            return
        files = await self._read_file(sorted(needs))
        for sid, (must, _, why) in needs.items():
            held = held_of(files[sid])
            prop = {"tool": WRITE_AHEAD, "approval": APPROVAL_DURABLE}.get(why, IDLE_AFTER_COMMIT)
            records = self.handles[sid].agent.session.records
            if len(held) < must:
                state = "its agent IDLE" if why == "idle" else "with a tool running"
                if why == "approval":
                    state += ", allowed by the last tool/approval"
                prop.fail(
                    f"session {sid!r} holds {show(records)}, {state}; before any flush, "
                    f"the store's file holds only {show(held)}"
                )
        late: dict[str, int] = {}
        with trio.move_on_after(QUEUED_WITHIN):
            while True:
                late = {
                    sid: need[1]
                    for sid, need in needs.items()
                    if len(held_of(files[sid])) < need[1]
                }
                if not late:
                    return
                await trio.sleep(0.005)
                files.update(await self._read_file(sorted(late)))
        sid, queued = next(iter(late.items()))
        records = self.handles[sid].agent.session.records
        QUEUED_PROMPT_COMMITTED.fail(
            f"session {sid!r} recorded {show(records[:queued])}; {QUEUED_WITHIN:.0f}s later, "
            f"with nobody flushing, the store's file holds only {show(held_of(files[sid]))}"
        )

    async def _read_file(self, ids: Sequence[str]) -> dict[str, tuple[Record, ...] | str | None]:
        """Each session as a fresh read-only SqliteStore reads it from the file: its records,
        None if it is not stored, or what made it unreadable."""
        if self._reader is not None:
            return await self._read_with(self._reader, ids)
        reader = SqliteStore(self.path, readonly=True)
        async with reader.running():
            return await self._read_with(reader, ids)

    @staticmethod
    async def _read_with(
        reader: SqliteStore, ids: Sequence[str]
    ) -> dict[str, tuple[Record, ...] | str | None]:
        found: dict[str, tuple[Record, ...] | str | None] = {}
        for sid in ids:
            try:
                found[sid] = tuple((await reader.load(sid)).records)
            except SessionNotFoundError:
                found[sid] = None
            except CorruptSessionError as exc:
                found[sid] = f"a corrupt session ({exc})"
        return found


def held_of(found: Sequence[Record] | str | None) -> tuple[Record, ...]:
    return tuple(found) if isinstance(found, tuple) else ()
