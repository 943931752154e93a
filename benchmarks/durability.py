"""The cost of write-ahead (rule L7): turns on a SqliteStore with the agent's commits (before
tools start, before it goes idle) against the same turns with them skipped, in one run.

    python benchmarks/durability.py [--repeat 5] [--quick]

The baseline is the same runtime and store, with a store that tells the agent everything is
already committed, so the agent never waits (the writer still commits behind it, as before
issue 16). Models and tools answer at once, so this is the worst case: with a real model a
step takes hundreds of milliseconds and the commit is lost in it. Figures are medians of
`--repeat` interleaved repetitions; the machines here are shared, so ratios are what count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import trio

from trio_agents import (
    Finish,
    ModelChunk,
    ModelRequest,
    Session,
    SqliteStore,
    TextDelta,
    ToolCall,
    ToolContext,
    open_runtime,
)


class Model:
    """Per turn: `steps` steps of `calls` no-op tool calls each, then a short text."""

    def __init__(self, calls: int, steps: int) -> None:
        self.calls, self.steps = calls, steps

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        since = 0
        for message in reversed(request.messages):
            if message.role == "user" and message.source in (None, "prompt"):
                break
            if message.role == "assistant" and message.tool_calls:
                since += 1
        await trio.lowlevel.checkpoint()
        if since < self.steps:
            for index in range(self.calls):
                yield ToolCall(f"c{len(request.messages)}-{index}", "noop", {})
            yield Finish("tool_calls")
        else:
            yield TextDelta("ok")
            yield Finish("stop")


class Noop:
    name = "noop"
    description = "does nothing"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return "ok"


class NoWaitStore(SqliteStore):
    """The baseline: the agent is told its records are committed, so it never waits for
    the writer (which still commits everything behind it)."""

    def _committed_all(self, session: Session) -> bool:
        return True


async def turns(store_class: type[SqliteStore], calls: int, steps: int, count: int) -> float:
    """Seconds per turn of one agent, `count` turns, each `send` then `wait_idle`."""
    with tempfile.TemporaryDirectory() as directory:
        store = store_class(os.path.join(directory, "bench.sqlite3"))
        async with open_runtime(store) as rt:
            handle = await rt.agents.create(model=Model(calls, steps), tools=[Noop()])
            agent = handle.agent
            agent.send("warm up")
            await agent.wait_idle()
            start = time.perf_counter()
            for _ in range(count):
                agent.send("go")
                await agent.wait_idle()
            elapsed = time.perf_counter() - start
            await handle.aclose()
    return elapsed / count


async def burst(store_class: type[SqliteStore], agents: int, calls: int) -> float:
    """Seconds for `agents` agents to each run one turn with a step of `calls` tool calls
    at the same time: their dispatch commits share the writer's batches."""
    with tempfile.TemporaryDirectory() as directory:
        store = store_class(os.path.join(directory, "bench.sqlite3"))
        async with open_runtime(store) as rt:
            handles = [
                await rt.agents.create(model=Model(calls, 1), tools=[Noop()]) for _ in range(agents)
            ]
            start = time.perf_counter()
            for handle in handles:
                handle.agent.send("go")
            for handle in handles:
                await handle.agent.wait_idle()
            elapsed = time.perf_counter() - start
            for handle in handles:
                await handle.aclose()
    return elapsed


def timed_turns(
    store_class: type[SqliteStore], calls: int, steps: int, count: int
) -> Callable[[], float]:
    """A run of `turns` with these arguments, in a trio run of its own."""
    return lambda: trio.run(turns, store_class, calls, steps, count)


def interleaved(
    n: int, first: Callable[[], float], second: Callable[[], float]
) -> tuple[list[float], list[float]]:
    a: list[float] = []
    b: list[float] = []
    for _ in range(n):  # interleaved, so drift in machine load hits both alike
        a.append(first())
        b.append(second())
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer turns, for a smoke run")
    args = parser.parse_args(argv)
    n = args.repeat
    count = 50 if args.quick else 300
    print(f"write-ahead cost on SqliteStore: median of {n} interleaved runs")
    print(f"python {sys.version.split()[0]}, trio {trio.__version__}, {os.cpu_count()} cores\n")
    rows: list[tuple[str, str, str, str]] = []

    def row(name: str, with_: list[float], without: list[float], commits: int) -> None:
        """Per turn: with vs without, their ratio, and the time added per commit the agent
        waited for, against a target of 1 ms (a thread hop and an fsync-free SQLite commit)."""
        a, b = statistics.median(with_), statistics.median(without)
        each = (a - b) * 1e3 / commits
        verdict = f"{'met' if each <= 1.0 else 'MISSED'} (<= 1 ms per commit waited)"
        rows.append((name, f"{a * 1e3:.2f} ms vs {b * 1e3:.2f} ms", f"{a / b:.2f}x", ""))
        rows.append(("", f"  +{each:.2f} ms x {commits} commits", "", verdict))

    # One agent, instant model: the commit is the whole of the difference. A step with
    # tools waits for one commit before its tools start; the turn waits for one more
    # before the agent is idle.
    for calls, steps in ((1, 1), (4, 1), (16, 1), (1, 4)):
        with_, without = interleaved(
            n,
            timed_turns(SqliteStore, calls, steps, count),
            timed_turns(NoWaitStore, calls, steps, count),
        )
        row(f"turn, {steps} step(s) x {calls} call(s)", with_, without, steps + 1)
    agents = 20 if args.quick else 100
    with_, without = interleaved(
        n,
        lambda: trio.run(burst, SqliteStore, agents, 2),
        lambda: trio.run(burst, NoWaitStore, agents, 2),
    )
    a, b = statistics.median(with_), statistics.median(without)
    rows.append(
        (
            f"{agents} agents at once, 2 calls each",
            f"{a * 1e3:.2f} ms vs {b * 1e3:.2f} ms",
            f"{a / b:.2f}x",
            f"{'met' if a <= 2 * b else 'MISSED'} (<= 2x: the agents share commits)",
        )
    )

    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    for name, value, versus, verdict in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  {versus:<6}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
