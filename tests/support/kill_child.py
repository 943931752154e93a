"""A real agent process for tests/test_durability_kills.py to SIGKILL.

Run from the repository root as `python -m tests.support.kill_child <mode> <db_path> ...`:

points EFFECTS GROUP
    Run the kill points of group GROUP (see `POINTS`) one session after another in one
    runtime on a SqliteStore at `db_path`. Each session plays its earlier turns and steps to
    the end (with two earlier turns or more, all its prompts are sent at once, so the turns
    run back to back), then starts the step under test, whose `mark` tools append a line to
    EFFECTS (a real side effect, written with no fsync and no flush of the store) and then
    block: on a trio sleep, in a worker thread, or by blocking the whole event loop (only the last
    point of a group does that). Every blocked call prints `AT <session> <call_id>` after
    its side effect; a held model prints `AT <session> model`. Nothing in the child flushes
    the store: what is on disk when the parent kills is what the library made durable.

idle
    Hold the database's write lock from another connection for a moment (a slow disk), run
    one turn, `await wait_idle()`, print `IDLE`, then block the event loop until killed.

prompts
    Start a turn whose tool blocks, `send()` two more prompts while it runs, print `SENT`,
    then wait until killed (the parent watches the file for their records: nothing in the
    child flushes).

Each line is flushed as it is printed: the parent waits on these lines, never on time. A
child whose parent never kills it exits on its own after `ORPHAN_LIMIT` seconds.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import trio

from trio_agents import (
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolContext,
    open_runtime,
)

ORPHAN_LIMIT: Final = 300.0
SLOW_DISK: Final = 0.3  # real seconds the idle and close modes keep the database locked

Mode = Literal["done", "async", "thread", "loop", "partial"]
# What a call of the step under test does after its side effect: return at once ("done"),
# block on a trio sleep ("async"), in a worker thread ("thread"), block the event loop
# itself ("loop"), or block between the two halves of its side effect ("partial").
BLOCKING: Final = frozenset({"async", "thread", "loop", "partial"})


@dataclass(frozen=True)
class Point:
    """One kill point: a session that played `turns` whole turns (each with one tool step),
    then, in its last turn, `steps` tool steps to the end, and then the step under test:
    its calls run in `calls` modes, or (no calls) its model call is held."""

    session: str
    turns: int
    steps: int
    calls: tuple[Mode, ...]

    @property
    def turn(self) -> int:
        return self.turns + 1

    @property
    def step(self) -> int:
        return self.steps + 1

    def call_id(self, turn: int, step: int, index: int) -> str:
        return f"{self.session}-t{turn}-s{step}-c{index + 1}"

    def blocked(self) -> list[str]:
        """The `AT` lines this point prints, in no particular order."""
        if not self.calls:
            return [f"AT {self.session} model"]
        return [
            f"AT {self.session} {self.call_id(self.turn, self.step, i)}"
            for i, mode in enumerate(self.calls)
            if mode in BLOCKING
        ]


def _points() -> tuple[tuple[Point, ...], ...]:
    """Twenty points inside running tools and two held model calls, in four groups (one
    child each). Each group ends with a tool that blocks the event loop."""
    shapes: list[tuple[int, int, tuple[Mode, ...]]] = [
        (0, 0, ("async",)),
        (0, 0, ("async", "async")),
        (0, 0, ("done", "done", "async")),
        (0, 1, ("thread",)),
        (1, 1, ()),
        (0, 0, ("loop",)),
        (1, 0, ("partial",)),
        (2, 0, ("done", "thread")),
        (0, 2, ("async",)),
        (0, 0, ("thread", "async", "partial")),
        (1, 0, ("loop",)),
        (3, 0, ("async",)),
        (0, 1, ("done", "partial")),
        (2, 1, ("thread",)),
        (0, 1, ()),
        (0, 0, ("loop",)),
        (1, 2, ("async", "done")),
        (0, 3, ("partial",)),
        (1, 1, ("thread", "thread")),
        (0, 0, ("done", "async")),
        (4, 0, ("async",)),
        (2, 0, ("loop",)),
    ]
    groups: list[list[Point]] = [[]]
    for index, (turns, steps, calls) in enumerate(shapes):
        groups[-1].append(Point(f"p{index + 1}", turns, steps, calls))
        if "loop" in calls:
            groups.append([])
    return tuple(tuple(group) for group in groups if group)


POINTS: Final = _points()


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def freeze() -> None:
    """Block the event loop until killed: no task, e.g. the store's writer, runs again."""
    threading.Event().wait(ORPHAN_LIMIT)


def append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class Reached:
    """Counts the `AT` lines each session printed, so the child starts the next point only
    once this one is blocked where it should be."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lot = trio.lowlevel.ParkingLot()

    def at(self, session: str, what: str) -> None:
        emit(f"AT {session} {what}")
        self._counts[session] = self._counts.get(session, 0) + 1
        self._lot.unpark_all()

    async def wait(self, session: str, count: int) -> None:
        while self._counts.get(session, 0) < count:
            await self._lot.park()


class PointModel:
    """Plays a point's script: per turn, its tool steps and a text reply; in the last turn,
    the step under test (tool calls, or a model call that blocks)."""

    def __init__(self, point: Point, reached: Reached) -> None:
        self._point = point
        self._reached = reached
        self._turn = 0
        self._step = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        point = self._point
        last = request.messages[-1]
        if last.role == "user":
            self._turn += 1
            self._step = 0
        self._step += 1
        await trio.lowlevel.checkpoint()
        final = self._turn == point.turn
        tool_steps = point.steps if final else 1
        if self._step <= tool_steps:
            yield ToolCall(point.call_id(self._turn, self._step, 0), "mark", {"mode": "done"})
            yield Finish("tool_calls")
        elif final and self._step == point.step and point.calls:
            for index, mode in enumerate(point.calls):
                call_id = point.call_id(self._turn, self._step, index)
                yield ToolCall(call_id, "mark", {"mode": mode})
            yield Finish("tool_calls")
        elif final and self._step == point.step:
            self._reached.at(point.session, "model")
            await trio.sleep(ORPHAN_LIMIT)
        else:
            yield TextDelta("ok")
            yield Finish("stop")


class MarkTool:
    """Appends `<session> <call_id>` to the effects file, then does what its mode says."""

    name = "mark"
    description = "Records that it ran, then maybe blocks."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "required": ["mode"],
    }

    def __init__(self, effects: Path, reached: Reached) -> None:
        self._effects = effects
        self._reached = reached

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        mode = str(arguments["mode"])
        done = f"{context.agent_id} {context.call_id}"
        append_line(self._effects, f"{done} begin" if mode == "partial" else done)
        if mode == "done":
            return "done"
        self._reached.at(context.agent_id, context.call_id)
        if mode in ("async", "partial"):
            await trio.sleep(ORPHAN_LIMIT)
        elif mode == "thread":
            await trio.to_thread.run_sync(threading.Event().wait, ORPHAN_LIMIT)
        else:
            freeze()
        if mode == "partial":
            append_line(self._effects, f"{done} end")
        return "late"


async def points_mode(path: Path, effects: Path, group: Sequence[Point]) -> None:
    reached = Reached()
    async with open_runtime(path) as rt:
        for point in group:
            handle = await rt.agents.create(
                model=PointModel(point, reached),
                tools=[MarkTool(effects, reached)],
                session_id=point.session,
            )
            agent = handle.agent
            # With two earlier turns or more, every prompt is sent at once: the turns run
            # back to back, never idle in between, so only the write-ahead of the turn under
            # test can have committed the earlier turns' ends.
            together = point.turns >= 2
            for n in range(point.turns):
                agent.send(f"earlier turn {n + 1}")
                if not together:
                    await agent.wait_idle()
            agent.send("the turn under test")
            await reached.wait(point.session, len(point.blocked()))
        await trio.sleep(ORPHAN_LIMIT)


async def slow_disk(path: Path, nursery: trio.Nursery) -> None:
    """Another connection holds the write lock for `SLOW_DISK`: the store's writer waits."""
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    await trio.to_thread.run_sync(blocker.execute, "BEGIN IMMEDIATE")

    async def release() -> None:
        await trio.sleep(SLOW_DISK)
        await trio.to_thread.run_sync(blocker.execute, "COMMIT")
        blocker.close()

    nursery.start_soon(release)


async def idle_mode(path: Path) -> None:
    async with open_runtime(path) as rt, trio.open_nursery() as nursery:
        point = Point("idle", 1, 0, ("done",))
        handle = await rt.agents.create(
            model=PointModel(point, Reached()),
            tools=[MarkTool(path.with_suffix(".effects"), Reached())],
            session_id=point.session,
        )
        handle.agent.send("warm up")  # the session is stored before the disk slows down
        await handle.agent.wait_idle()
        await slow_disk(path, nursery)
        handle.agent.send("the turn under test")
        await handle.agent.wait_idle()
        emit("IDLE")
        freeze()


async def prompts_mode(path: Path) -> None:
    reached = Reached()
    async with open_runtime(path) as rt:
        point = Point("prompts", 0, 0, ("async",))
        handle = await rt.agents.create(
            model=PointModel(point, reached),
            tools=[MarkTool(path.with_suffix(".effects"), reached)],
            session_id=point.session,
        )
        handle.agent.send("the turn under test")
        await reached.wait(point.session, 1)
        handle.agent.send("second")
        handle.agent.send("third")
        emit("SENT")
        await trio.sleep(ORPHAN_LIMIT)


def main(argv: list[str]) -> None:
    match argv:
        case ["points", path, effects, group]:
            trio.run(points_mode, Path(path), Path(effects), POINTS[int(group)])
        case ["idle", path]:
            trio.run(idle_mode, Path(path))
        case ["prompts", path]:
            trio.run(prompts_mode, Path(path))
        case _:
            sys.exit(
                "usage: python -m tests.support.kill_child "
                "points DB EFFECTS GROUP | idle DB | prompts DB"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
