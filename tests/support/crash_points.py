"""The crash points of tests/test_durability.py, shared with the PostgreSQL kill test
(tests/test_store_postgres_processes.py): the crash child, the record order of its turns,
where to kill it, and what the store must hold after the kill and after the resume.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import trio

from agent_conformance._history import history_problems
from trio_agents import PostgresStore, Record, SessionStore, SqliteStore, open_runtime
from trio_agents.testing import ScriptedModel

ROOT: Final = Path(__file__).resolve().parents[2]
SESSION: Final = "s1"

# Records of one crash-mode turn, in order (the two tool results may come in either order,
# their types do not).
TURN_TYPES: Final = (
    "turn/start",
    "user/message",
    "step/start",
    "assistant/message",
    "tool/call",
    "tool/call",
    "tool/result",
    "tool/result",
    "step/end",
    "step/start",
    "assistant/message",
    "step/end",
    "turn/end",
)
# Kill right after the child printed the k-th record of its crash loop: every position of
# the first turn (mid-step, mid-tool, just after a commit trigger, between turns), then
# points in later turns. Where the kill lands exactly varies with timing.
RECORD_POINTS: Final = (*range(1, 14), 19, 22, 26)
# Kill while this tool call runs, after the child made its `tool/call` durable: the setup
# turn uses call-1 and call-2, each later turn two more (call-3 and call-4 in its first).
HELD_CALLS: Final = ("call-3", "call-4", "call-6", "call-9")
KNOWN_TYPES: Final = frozenset(
    {*TURN_TYPES, "steering/message", "context/message"},
)


class Child:
    """A crash_child process whose stdout the test reads line by line."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process = process
        self._stderr = stderr
        self._buffer = bytearray()

    async def line(self) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        while (end := self._buffer.find(b"\n")) < 0:
            chunk = await stdout.receive_some(65536)
            if not chunk:
                await self.process.wait()
                raise AssertionError(
                    f"the child exited ({self.process.returncode}) before printing a line; "
                    f"stderr:\n{self._stderr.read_text()}"
                )
            self._buffer += chunk
        text = bytes(self._buffer[:end]).decode()
        del self._buffer[: end + 1]
        return text

    async def wait_for(self, prefix: str) -> str:
        while not (text := await self.line()).startswith(prefix):
            pass
        return text

    async def kill(self) -> None:
        """SIGKILL the child and reap it; it must not have exited on its own."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        if self.process.stdout is not None:
            await self.process.stdout.aclose()
        assert self.process.returncode == -signal.SIGKILL, self._stderr.read_text()


async def spawn(mode: str, db: Path, *args: str, target: str | None = None) -> Child:
    """A crash child on the file `db`, or on the database `target` (then `db` only names
    where its stderr goes)."""
    stderr = db.with_suffix(".stderr")
    with stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.support.crash_child", mode, target or str(db), *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    return Child(process, stderr)


async def load(db: Path | str) -> Sequence[Record]:
    """The stored records of the file, or (a `postgresql://` URL) of the database."""
    store: SessionStore = PostgresStore(db) if isinstance(db, str) else SqliteStore(db)
    async with store.running():
        return (await store.load(SESSION)).records


def open_turn(records: Sequence[Record]) -> int | None:
    """The number of the last turn if it never ended."""
    turn: int | None = None
    for record in records:
        if record.type == "turn/start":
            turn = int(record.data["turn"])
        elif record.type == "turn/end":
            turn = None
    return turn


def step_is_open(records: Sequence[Record]) -> bool:
    starts = sum(1 for rec in records if rec.type == "step/start")
    return starts > sum(1 for rec in records if rec.type == "step/end")


def unanswered_calls(records: Sequence[Record]) -> set[str]:
    calls = {str(rec.data["call_id"]) for rec in records if rec.type == "tool/call"}
    results = {str(rec.data["call_id"]) for rec in records if rec.type == "tool/result"}
    return calls - results


def check_stored(stored: Sequence[Record]) -> None:
    """Whole records only: each decodes to a mapping of a known type (and `load` checked
    that the sequence numbers are contiguous), the history is valid up to an open last
    turn, and the flushed setup turn is there, complete."""
    assert all(isinstance(rec.data, Mapping) for rec in stored)
    assert {rec.type for rec in stored} <= KNOWN_TYPES
    assert history_problems(stored, allow_open_turn=True) == []
    assert [rec.type for rec in stored[: len(TURN_TYPES)]] == list(TURN_TYPES)
    assert dict(stored[len(TURN_TYPES) - 1].data) == {"turn": 1, "reason": {"kind": "completed"}}


async def check_resume(db: Path | str, stored: Sequence[Record]) -> None:
    """Resume repairs an open turn with interrupted closers, then a new turn completes."""
    last_turn = open_turn(stored)
    dangling = unanswered_calls(stored)
    closer_types = [
        *["tool/result"] * len(dangling),
        *(["step/end"] if step_is_open(stored) else []),
        "turn/end",
    ]
    async with open_runtime(db) as rt:
        model = ScriptedModel()
        handle = await rt.agents.resume(SESSION, model=model)
        agent = handle.agent
        records = agent.session.records
        assert records[: len(stored)] == stored
        added = records[len(stored) :]
        assert history_problems(records, allow_open_turn=False) == []
        if last_turn is None:
            assert added == ()
        else:
            assert [rec.type for rec in added] == closer_types
            results = added[: len(dangling)]
            assert {str(rec.data["call_id"]) for rec in results} == dangling
            assert all(rec.data["interrupted"] is True for rec in results)
            assert dict(added[-1].data) == {"turn": last_turn, "reason": {"kind": "interrupted"}}

        agent.send("after the crash")
        await agent.wait_idle()
        assert agent.session.records[-1].type == "turn/end"
        turns = [rec.data for rec in agent.session.records if rec.type == "turn/start"]
        ended = agent.session.records[-1].data
        assert dict(ended) == {"turn": len(turns), "reason": {"kind": "completed"}}
        assert model.requests[-1].messages[-1].content == "after the crash"
        final = agent.session.records
        await handle.aclose()
    # The repair and the new turn are durable.
    durable = await load(db)
    assert durable == final
    assert history_problems(durable, allow_open_turn=False) == []
