"""The durability table of docs/contract.md ("Durability"), checked by SIGKILLing real agent
processes (tests/support/kill_child.py) and reopening their SQLite files.

- A tool starts (rule L7): twenty sessions, in four child processes, are each inside running
  tools that made a real side effect (a line appended to a file) and then block, in a trio
  sleep, a worker thread, or by blocking the event loop itself; nothing flushes the store
  for the test. After the kill, every call whose side effect happened is on disk, and resume
  answers it with an `interrupted` result the next model call sees.
- A turn ends: earlier turns, also ones that ran back to back with the one under test, have
  their `turn/end` on disk.
- A step ends: a session whose next model call blocks has its ended step's call answered.
- `wait_idle` returns: the turn is on disk although the disk was slow when it ended.
- `send` returns (rule L8): prompts queued behind a running tool reach the disk with the
  commit `send` requested, nobody flushing; resume restores them parked, in order.

The parent waits on the children's lines, never on time.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pytest
import trio

from agent_conformance._history import history_problems
from tests.support.kill_child import BLOCKING, POINTS, Point
from tests.support.processes import gone
from trio_agents import Record, SqliteStore, open_runtime
from trio_agents.testing import ScriptedModel, reply

ROOT: Final = Path(__file__).resolve().parent.parent
LINE_LIMIT: Final = 60.0  # seconds a child may take to print its next line on a loaded machine


class Child:
    """A kill_child process whose stdout the test reads line by line."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process = process
        self._stderr = stderr
        self._buffer = bytearray()

    async def line(self) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        with trio.fail_after(LINE_LIMIT):
            while (end := self._buffer.find(b"\n")) < 0:
                chunk = await stdout.receive_some(65536)
                if not chunk:
                    await self.process.wait()
                    raise AssertionError(
                        f"the child exited ({self.process.returncode}) before printing a "
                        f"line; stderr:\n{self._stderr.read_text()}"
                    )
                self._buffer += chunk
        text = bytes(self._buffer[:end]).decode()
        del self._buffer[: end + 1]
        return text

    async def kill(self) -> None:
        """SIGKILL the child and reap it; it must not have exited on its own."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        if self.process.stdout is not None:
            await self.process.stdout.aclose()
        assert self.process.returncode == -signal.SIGKILL, self._stderr.read_text()
        assert gone(self.process.pid)


async def spawn(*args: str, stderr: Path) -> Child:
    with stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.support.kill_child", *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    return Child(process, stderr)


async def stored(db: Path, session: str) -> Sequence[Record]:
    """The session's records as the file holds them (no repair)."""
    store = SqliteStore(db, readonly=True)
    async with store.running():
        return (await store.load(session)).records


def calls(records: Sequence[Record]) -> list[str]:
    return [str(r.data["call_id"]) for r in records if r.type == "tool/call"]


def results(records: Sequence[Record]) -> dict[str, Record]:
    return {str(r.data["call_id"]): r for r in records if r.type == "tool/result"}


def effects_of(path: Path) -> set[tuple[str, str]]:
    """(session, call id) of every side effect the tools made, begun or whole."""
    if not path.exists():
        return set()
    lines = path.read_text().splitlines()
    return {(fields[0], fields[1]) for fields in (line.split() for line in lines)}


def step_under_test(point: Point) -> list[str]:
    return [point.call_id(point.turn, point.step, i) for i in range(len(point.calls))]


@pytest.mark.subprocess
@pytest.mark.parametrize("group", range(len(POINTS)))
async def test_a_tool_killed_mid_run_is_in_history_with_an_interrupted_result(
    tmp_path: Path, group: int
) -> None:
    points = POINTS[group]
    db, effects = tmp_path / "kills.sqlite3", tmp_path / "effects.log"
    expected = {line for point in points for line in point.blocked()}
    child = await spawn("points", str(db), str(effects), str(group), stderr=tmp_path / "err")
    try:
        seen: set[str] = set()
        while not expected <= seen:
            seen.add(await child.line())
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()

    happened = effects_of(effects)
    async with open_runtime(db) as rt:
        for point in points:
            before = await stored(db, point.session)
            assert history_problems(before) == [], point
            # Write-ahead: every call of the step under test was durable before any of its
            # tools started, without a result for the ones still blocked.
            assert set(step_under_test(point)) <= set(calls(before)), point
            blocked = [
                cid
                for cid, mode in zip(step_under_test(point), point.calls, strict=True)
                if mode in BLOCKING
            ]
            assert not set(blocked) & set(results(before)), point
            # Turn ends: every earlier turn's end is on disk, also where the turns ran back
            # to back and only the write-ahead of the turn under test committed it.
            ends = [r for r in before if r.type == "turn/end"]
            assert [dict(r.data["reason"]) for r in ends] == [{"kind": "completed"}] * point.turns
            # Every side effect the process made, in this session, has its call on disk.
            assert {cid for sid, cid in happened if sid == point.session} <= set(calls(before))

            model = ScriptedModel([reply("resumed")])
            handle = await rt.agents.resume(point.session, model=model)
            records = handle.agent.session.records
            assert history_problems(records, allow_open_turn=False) == [], point
            answers = results(records)
            assert set(calls(records)) <= set(answers)
            for cid in blocked:
                assert answers[cid].data["interrupted"] is True, (point, cid)
                assert answers[cid].data["is_error"] is True
            turn_ends = [r for r in records if r.type == "turn/end"]
            assert dict(turn_ends[-1].data["reason"]) == {"kind": "interrupted"}

            # The resumed model sees each call and its interrupted result, so it knows the
            # call ran (perhaps in part) and did not finish.
            handle.agent.send("what happened?")
            await handle.agent.wait_idle()
            [request] = model.requests
            asked = {c.call_id for m in request.messages for c in m.tool_calls}
            told = {m.call_id: m.content for m in request.messages if m.role == "tool"}
            for cid in blocked:
                assert cid in asked
                assert "interrupted" in told[cid]
            await handle.aclose()
    # Points that blocked a tool made their side effect before blocking.
    for point in points:
        for line in point.blocked():
            if not line.endswith(" model"):
                assert tuple(line.split()[1:]) in happened


@pytest.mark.subprocess
async def test_a_kill_during_the_next_model_call_leaves_the_ended_step_answered(
    tmp_path: Path,
) -> None:
    """The step-end row, on the two held-model points: their last ended step's call is on
    disk with a result (its own, or `interrupted` after resume), never unanswered."""
    held = [(g, p) for g, group in enumerate(POINTS) for p in group if not p.calls]
    assert held
    group = held[0][0]
    points = [p for p in POINTS[group] if not p.calls]
    db, effects = tmp_path / "kills.sqlite3", tmp_path / "effects.log"
    expected = {line for point in POINTS[group] for line in point.blocked()}
    child = await spawn("points", str(db), str(effects), str(group), stderr=tmp_path / "err")
    try:
        seen: set[str] = set()
        while not expected <= seen:
            seen.add(await child.line())
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()
    async with open_runtime(db) as rt:
        for point in points:
            handle = await rt.agents.resume(point.session, model=ScriptedModel())
            records = handle.agent.session.records
            ended = point.call_id(point.turn, point.steps, 0)
            assert ended in calls(records)
            assert ended in results(records)
            assert history_problems(records, allow_open_turn=False) == []
            await handle.aclose()


@pytest.mark.subprocess
async def test_a_turn_is_on_disk_when_wait_idle_returns(tmp_path: Path) -> None:
    """The child's disk is slow (another connection holds the write lock) as its turn ends;
    it prints `IDLE` when `wait_idle` returns and blocks its event loop. Without a commit
    before the agent goes idle the turn would still be waiting for the lock."""
    db = tmp_path / "idle.sqlite3"
    child = await spawn("idle", str(db), stderr=tmp_path / "err")
    try:
        assert await child.line() == "IDLE"
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()
    records = await stored(db, "idle")
    assert [r.type for r in records].count("turn/end") == 2
    assert records[-1].type == "turn/end"
    assert dict(records[-1].data["reason"]) == {"kind": "completed"}
    assert history_problems(records, allow_open_turn=False) == []


def queued_rows(db: Path) -> int:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        query = "SELECT count(*) FROM records WHERE type = 'prompt/queued'"
        return int(conn.execute(query).fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0
    finally:
        conn.close()


@pytest.mark.subprocess
async def test_prompts_queued_behind_a_running_tool_survive_a_kill_and_wait_parked(
    tmp_path: Path,
) -> None:
    db = tmp_path / "prompts.sqlite3"
    child = await spawn("prompts", str(db), stderr=tmp_path / "err")
    try:
        assert await child.line() == "AT prompts prompts-t1-s1-c1"
        assert await child.line() == "SENT"
        # The commit `send` requested lands on its own; the child never flushes. Polled
        # with a bound: the writer is a real thread on a loaded machine.
        with trio.fail_after(LINE_LIMIT):
            # No event exists for another process's commit.
            while await trio.to_thread.run_sync(queued_rows, db) < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()

    async with open_runtime(db) as rt:
        model = ScriptedModel()
        handle = await rt.agents.resume("prompts", model=model)
        agent = handle.agent
        assert agent.pending == (("m2", "prompt"), ("m3", "prompt"))
        assert agent.parked
        assert agent.status.value == "idle"
        await agent.wait_idle()
        assert model.requests == []  # parked: nothing runs until the agent is woken
        assert agent.wake()
        await agent.wait_idle()
        delivered = [
            (str(r.data["id"]), str(r.data["content"]))
            for r in agent.session.records
            if r.type == "user/message"
        ]
        assert delivered == [("m1", "the turn under test"), ("m2", "second"), ("m3", "third")]
        assert agent.send("fourth") == "m4"
        await handle.aclose()
