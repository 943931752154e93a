"""Many sessions (issue 20): one ACP server with 1,000 sessions, and one runtime with 10,000
agents taking turns at once, each against the same measured with few in the same run.

    python benchmarks/many_sessions.py [--repeat 3] [--sessions 1000] [--agents 10000]

The ACP server is `trio-agents acp` as a real subprocess on pipes, with a real SQLite file and
the offline model; a trio client in this process sends every session's prompts concurrently
(each session one prompt at a time, as an editor does) and times each answer. Memory per idle
session is the server's resident set (/proc/PID/status VmRSS) grown by creating the sessions,
divided by their number. The runtime case runs in process on a real SQLite file: every agent
is sent a prompt at once, and the figure is turns per second until the last is idle (every
turn committed: IDLE means durable).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from trio_agents import OfflineModel, SqliteStore, open_runtime


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Client:
    """JSON-RPC over a process's pipes: requests answered by id; notifications counted."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._send = process.stdin
        self._receive = process.stdout
        self._sending = trio.StrictFIFOLock()
        self._next = 0
        self._waiting: dict[int, trio.Event] = {}
        self._answers: dict[int, dict[str, Any]] = {}
        self.notifications = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        request_id = self._next
        self._waiting[request_id] = done = trio.Event()
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        async with self._sending:
            await self._send.send_all(json.dumps(frame).encode() + b"\n")
        await done.wait()
        answer = self._answers.pop(request_id)
        if "result" not in answer:
            raise RuntimeError(f"{method} failed: {answer}")
        return answer

    async def read(self) -> None:
        buffer = b""
        async for data in self._receive:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                frame = json.loads(line)
                if "method" in frame:
                    self.notifications += 1
                elif frame.get("id") in self._waiting:
                    self._answers[frame["id"]] = frame
                    self._waiting.pop(frame["id"]).set()

    async def close(self) -> None:
        await self._send.aclose()


@dataclass
class AcpRun:
    sessions: int
    prompts: int  # answered, in all
    seconds: float  # from the first prompt sent to the last answer
    latencies: list[float]
    idle_bytes: float  # resident set grown per idle session
    new_per_second: float

    @property
    def rate(self) -> float:
        return self.prompts / self.seconds


async def acp_run(sessions: int, prompts_each: int) -> AcpRun:
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "many.sqlite3")
        command = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", store]
        # stderr: the start-up line would interleave with the table (a failure shows as an
        # answer that never comes).
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        client = Client(process)
        latencies: list[float] = []
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.read)
                await client.request("initialize", {"protocolVersion": 1})
                # One session first, so the resident set is measured after start-up's own.
                params: dict[str, Any] = {"cwd": directory, "mcpServers": []}
                await client.request("session/new", params)
                before = rss_bytes(process.pid)
                start = time.perf_counter()
                ids = [
                    (await client.request("session/new", params))["result"]["sessionId"]
                    for _ in range(sessions)
                ]
                new_per_second = sessions / (time.perf_counter() - start)
                idle = (rss_bytes(process.pid) - before) / sessions

                async def prompter(sid: str) -> None:
                    for index in range(prompts_each):
                        text = [{"type": "text", "text": f"p{index}"}]
                        sent = time.perf_counter()
                        answer = await client.request(
                            "session/prompt", {"sessionId": sid, "prompt": text}
                        )
                        latencies.append(time.perf_counter() - sent)
                        assert answer["result"] == {"stopReason": "end_turn"}, answer

                start = time.perf_counter()
                async with trio.open_nursery() as prompting:
                    for sid in ids:
                        prompting.start_soon(prompter, sid)
                seconds = time.perf_counter() - start
                await client.close()
            code = await process.wait()
            if code != 0:
                raise RuntimeError(f"trio-agents acp exited {code}")
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()
    return AcpRun(sessions, len(latencies), seconds, latencies, idle, new_per_second)


async def agents_at_once(count: int, rounds: int) -> tuple[float, int]:
    """Turns per second when `count` agents of one runtime on a SQLite file are each sent a
    prompt at once, `rounds` times, until all are idle; and the commits made."""
    with tempfile.TemporaryDirectory() as directory:
        store = CountingStore(os.path.join(directory, "agents.sqlite3"))
        async with open_runtime(store) as rt:
            handles = [await rt.agents.create(model=OfflineModel()) for _ in range(count)]
            commits = store.commits
            start = time.perf_counter()
            for index in range(rounds):
                for handle in handles:
                    handle.agent.send(f"p{index}")
                async with trio.open_nursery() as nursery:
                    for handle in handles:
                        nursery.start_soon(handle.agent.wait_idle)
            seconds = time.perf_counter() - start
            commits = store.commits - commits
            for handle in handles:
                await handle.aclose()
    return count * rounds / seconds, commits


class CountingStore(SqliteStore):
    """Counts its transactions (batches committed)."""

    commits = 0

    def _write_batch(self, headers: Any, batch: Any) -> None:
        super()._write_batch(headers, batch)
        self.commits += 1


@dataclass
class Figures:
    few: list[AcpRun]
    many: list[AcpRun]
    agents_few: list[tuple[float, int]]
    agents_many: list[tuple[float, int]]
    sessions: int
    agents: int


def measure(repeat: int, sessions: int, agents: int, prompts: int = 3000) -> Figures:
    """Interleaved, so drift in the machine's load hits both sides alike. The same number of
    prompts (and of turns) on each side: few sessions prompt more times each."""
    few_sessions = 10
    few: list[AcpRun] = []
    many: list[AcpRun] = []
    agents_few: list[tuple[float, int]] = []
    agents_many: list[tuple[float, int]] = []
    few_agents = 100
    for _ in range(repeat):
        few.append(trio.run(acp_run, few_sessions, max(1, prompts // few_sessions)))
        many.append(trio.run(acp_run, sessions, max(1, prompts // sessions)))
        agents_few.append(trio.run(agents_at_once, few_agents, max(1, agents // few_agents)))
        agents_many.append(trio.run(agents_at_once, agents, 1))
    return Figures(few, many, agents_few, agents_many, sessions, agents)


def rows(figures: Figures) -> list[tuple[str, str, str, str]]:
    """Rows for benchmarks/run.py's table: (figure, value, versus, target and verdict)."""

    def spread(values: Sequence[float], scale: float, unit: str, fmt: str = ".1f") -> str:
        median = statistics.median(values) * scale
        low, high = min(values) * scale, max(values) * scale
        return f"{median:10{fmt}} {unit} (min {low:{fmt}}, max {high:{fmt}})"

    many, few = figures.many, figures.few
    ratios = sorted(m.rate / f.rate for m, f in zip(many, few, strict=True))
    ratio = statistics.median(ratios)
    agent_ratios = sorted(
        m[0] / f[0] for m, f in zip(figures.agents_many, figures.agents_few, strict=True)
    )
    agent_ratio = statistics.median(agent_ratios)
    n = figures.sessions
    turns = [m[0] for m in figures.agents_many]
    commits = statistics.median(m[1] / figures.agents for m in figures.agents_many)
    return [
        (
            f"ACP, {n:,} sessions: prompts/s",
            spread([m.rate for m in many], 1, "/s", ".0f"),
            f"{ratio:6.2f}x (min {ratios[0]:.2f}, max {ratios[-1]:.2f}) 10 sessions",
            f"{'met' if ratio >= 0.8 else 'MISSED'} (>= 0.8x 10 sessions)",
        ),
        (
            "  p50 answer",
            spread([pct(m.latencies, 0.5) for m in many], 1e3, "ms"),
            f"10 sessions {statistics.median(pct(f.latencies, 0.5) for f in few) * 1e3:.2f} ms",
            "",
        ),
        (
            "  p99 answer",
            spread([pct(m.latencies, 0.99) for m in many], 1e3, "ms"),
            f"10 sessions {statistics.median(pct(f.latencies, 0.99) for f in few) * 1e3:.2f} ms",
            "",
        ),
        (
            "  memory per idle session",
            spread([m.idle_bytes for m in many], 1 / 1024, "KiB"),
            f"session/new {statistics.median(m.new_per_second for m in many):.0f}/s",
            "",
        ),
        (
            f"{figures.agents:,} agents at once: turns/s",
            spread(turns, 1, "/s", ".0f"),
            f"{agent_ratio:6.2f}x (min {agent_ratios[0]:.2f}, max {agent_ratios[-1]:.2f}) "
            f"100 agents; {commits:.3g} commits per turn",
            f"{'met' if agent_ratio >= 0.8 else 'MISSED'} (>= 0.8x 100 agents)",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=3000, help="prompts per ACP run, in all")
    args = parser.parse_args(argv)
    figures = measure(args.repeat, args.sessions, args.agents, args.prompts)
    table = rows(figures)
    width = max(len(row[0]) for row in table)
    for name, value, versus, target in table:
        print(f"{name:<{width}}  {value}  {versus}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
