"""A real process for tests/test_durability.py to SIGKILL.

Run from the repository root as `python -m tests.support.crash_child <mode> <db_path>`:

close
    Create an agent on a SqliteStore at `db_path`, start a turn whose model is held open,
    close the agent with `handle.aclose()` while another connection holds the database's
    write lock for a moment (a slow disk), print `CLOSED`, then block the event loop until
    killed. Nothing after `aclose` returns can make a record durable, and without waiting
    the write would still be pending: only `aclose` itself can have made the closing
    `turn/end` durable.

crash [CALL_ID]
    (`db_path` may be a `postgresql://` URL: the same, on a PostgresStore.) Run one
    complete setup turn and flush it (so the session is stored whenever the kill lands),
    print `READY`, then run turns forever. Each turn has a step with two tool calls and a
    text step; the model and the tools sleep for real between records, so the parent
    can land its kill mid-step, mid-tool or between turns. After every record appended
    past `READY` the child prints `RECORD <n> <type>` (n counts from 1).

    With CALL_ID (e.g. `call-3`, the first call after the setup turn), that tool call
    makes the session durable, prints `HELD <call_id>` and never returns: a kill then lands
    deterministically inside a running tool whose `tool/call` is on disk without a result.

Each line is flushed as it is printed: the parent waits on these lines, never on time.
"""

from __future__ import annotations

import itertools
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final

import trio
import trio.testing

from trio_agents import (
    Finish,
    ModelChunk,
    ModelRequest,
    Record,
    Runtime,
    TextDelta,
    ToolCall,
    ToolContext,
    ToolResult,
    open_runtime,
)
from trio_agents.testing import ScriptedModel, reply

SESSION: Final = "s1"
SLOW_DISK: Final = 0.2  # real seconds the close mode keeps the database locked
PAUSE: Final = 0.005  # real seconds between records, so kill points land in distinct phases
# A child whose parent never killed it (the parent died) exits on its own after this long.
ORPHAN_LIMIT: Final = 300.0


def freeze() -> None:
    """Block the event loop until killed: no task, e.g. the store's writer, runs again, so
    what is on disk is what was durable when the caller got here."""
    threading.Event().wait(ORPHAN_LIMIT)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class SlowModel:
    """Answers a prompt with two `slow` tool calls, and tool results with text, pausing for
    real time before chunks. Call ids are unique within the process."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        last = request.messages[-1] if request.messages else None
        if last is not None and last.role == "tool":
            for piece in ("all ", "done"):
                await trio.sleep(PAUSE)
                yield TextDelta(piece)
            yield Finish("stop")
            return
        await trio.sleep(PAUSE)
        yield TextDelta("calling tools")
        for _ in range(2):
            yield ToolCall(f"call-{next(self._ids)}", "slow", {"text": "x"})
        yield Finish("tool_calls")


class SlowTool:
    """Returns its `text` argument after a real pause; the call `hold` is held forever
    once the session is durable."""

    name = "slow"
    description = "Returns the text it is given, slowly."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self, rt: Runtime, hold: str | None) -> None:
        self._rt = rt
        self._hold = hold

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        if context.call_id == self._hold:
            agent = self._rt.agents.get(context.agent_id)
            assert agent is not None
            await self._rt.sessions.flush(agent.session)
            emit(f"HELD {context.call_id}")
            await trio.sleep(ORPHAN_LIMIT)
        await trio.sleep(PAUSE)
        return str(arguments.get("text", ""))


async def close_mode(path: Path) -> None:
    async with open_runtime(path) as rt, trio.open_nursery() as nursery:
        handle = await rt.agents.create(
            model=ScriptedModel([reply("never sent", hold=True)]), session_id=SESSION
        )
        handle.agent.send("hold on")
        await trio.testing.wait_all_tasks_blocked()
        # A slow disk: another connection holds the write lock for a while, so the store's
        # writer is still waiting when the agent's loop has exited. Only a close that waits
        # for its records to be durable gets past this before the lock is released.
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        await trio.to_thread.run_sync(blocker.execute, "BEGIN IMMEDIATE")

        async def release() -> None:
            await trio.sleep(SLOW_DISK)
            await trio.to_thread.run_sync(blocker.execute, "COMMIT")

        nursery.start_soon(release)
        await handle.aclose()
        emit("CLOSED")
        freeze()


async def crash_mode(path: Path | str, hold: str | None) -> None:
    async with open_runtime(path) as rt:
        handle = await rt.agents.create(
            model=SlowModel(), tools=[SlowTool(rt, hold)], session_id=SESSION
        )
        agent = handle.agent
        agent.send("setup")
        await agent.wait_idle()
        await rt.sessions.flush(agent.session)
        emit("READY")
        count = itertools.count(1)

        def progress(record: Record) -> None:
            emit(f"RECORD {next(count)} {record.type}")

        agent.session.observe(progress)
        with trio.move_on_after(ORPHAN_LIMIT):
            for n in itertools.count(1):
                agent.send(f"prompt {n}")
                await agent.wait_idle()
                await trio.sleep(PAUSE)


def _target(arg: str) -> Path | str:
    """A store file, or a PostgreSQL URL (tests/test_store_postgres_processes.py)."""
    return arg if arg.startswith("postgresql://") else Path(arg)


def main(argv: list[str]) -> None:
    match argv:
        case ["close", path]:
            trio.run(close_mode, Path(path))
        case ["crash", path]:
            trio.run(crash_mode, _target(path), None)
        case ["crash", path, hold]:
            trio.run(crash_mode, _target(path), hold)
        case _:
            sys.exit(
                "usage: python -m tests.support.crash_child close DB_PATH | crash DB_PATH [CALL_ID]"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
