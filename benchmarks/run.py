"""Benchmarks: the runtime against baselines measured in the same run.

    python benchmarks/run.py [--repeat 5] [--quick] [--no-peers] [--no-many] [--acp-peers]

Every figure is the median of `--repeat` repetitions (with min and max), and every ratio is
against a baseline measured in this run, on this machine: the machines here are shared and
noisy, so absolute numbers mean little and ratios are what is reported. Nothing here asserts
a speed; the targets are in the issue tracker and in README.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import trio
import trio.testing

from trio_agents import (
    AgentHandle,
    AgentOptions,
    Finish,
    MemoryStore,
    ModelChunk,
    ModelRequest,
    Runtime,
    Session,
    SqliteStore,
    TextDelta,
    ToolCall,
    ToolContext,
    open_runtime,
)

Row = tuple[str, list[float], str, list[float] | None, str]


# -- models and tools that cost nothing -----------------------------------------------------


class InstantModel:
    """Answers at once: `tool_steps` steps of one no-op tool call, then a short text."""

    def __init__(self, tool_steps: int = 0) -> None:
        self.tool_steps = tool_steps

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        if _tools_since_prompt(request) < self.tool_steps:
            # Unique per step: every step adds messages.
            yield ToolCall(f"c{len(request.messages)}", "noop", {})
            yield Finish("tool_calls")
        else:
            yield TextDelta("ok")
            yield Finish("stop")


def _tools_since_prompt(request: ModelRequest) -> int:
    # Only the current turn's tail is read: a double whose cost grew with the history would
    # hide whether the runtime's does (the history-growth row).
    count = 0
    for message in reversed(request.messages):
        if message.role == "tool":
            count += 1
        elif message.role == "user" and message.source in (None, "prompt"):
            break
    return count


class NoopTool:
    name = "noop"
    description = "does nothing"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return "ok"


class HeldModel:
    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        await trio.sleep_forever()
        yield Finish("stop")  # pragma: no cover - never reached


# -- turn overhead ------------------------------------------------------------------------


async def runtime_turns(tool_steps: int, turns: int) -> float:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=InstantModel(tool_steps), tools=[NoopTool()])
        agent = handle.agent
        agent.send("warm up")
        await agent.wait_idle()
        start = time.perf_counter()
        for _ in range(turns):
            agent.send("go")
            await agent.wait_idle()
        elapsed = time.perf_counter() - start
        await handle.aclose()
    return elapsed / turns


async def floor_turns(tool_steps: int, turns: int) -> float:
    """The floor: a hand-written loop in its own task doing the same work with no
    lifecycle: take a prompt, call the model per step, run the tool, keep records."""
    model, tool = InstantModel(tool_steps), NoopTool()
    send, receive = trio.open_memory_channel[str](1)
    records: list[dict[str, Any]] = []

    async def loop() -> None:
        from trio_agents import Message

        messages: list[Message] = []
        async for prompt in receive:
            messages.append(Message("user", prompt))
            while True:
                calls: list[ToolCall] = []
                text = ""
                request = ModelRequest(messages, [], AgentOptions())
                async for chunk in model.stream(request):
                    if isinstance(chunk, TextDelta):
                        text += chunk.text
                    elif isinstance(chunk, ToolCall):
                        calls.append(chunk)
                records.append({"type": "assistant", "content": text})
                messages.append(Message("assistant", text, tool_calls=tuple(calls)))
                if not calls:
                    break
                for call in calls:
                    result = await tool({}, ToolContext("a", call.call_id, 1, 1))
                    records.append({"type": "tool/result", "content": result})
                    messages.append(Message("tool", result, call_id=call.call_id))
            idle.set()

    idle = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        start = time.perf_counter()
        for _ in range(turns):
            idle = trio.Event()
            await send.send("go")
            await idle.wait()
        elapsed = time.perf_counter() - start
        await send.aclose()
    return elapsed / turns


# -- history growth ------------------------------------------------------------------------

HISTORY_AGENTS = 10
HISTORY_ROUNDS = 20
SHORT_HISTORY = 20
LONG_HISTORY = 2000


async def history_growth() -> tuple[float, float]:
    """The mean 1-step turn of agents whose sessions already hold SHORT_HISTORY turns, and
    of agents whose sessions hold LONG_HISTORY, measured turn by turn in one runtime.

    Each agent runs one real turn; its session is then filled up to its history with copies
    of that turn's records, renumbered, and resumed from the store, so the agent takes up the
    history as after a restart. After one untimed turn each, HISTORY_ROUNDS turns of each of
    the HISTORY_AGENTS agents of either history are timed, one short-history turn and one
    long-history turn in turn (which goes first alternating), so the history grows by at
    most HISTORY_ROUNDS turns while timed, and what the machine does meanwhile falls on both
    alike. Each turn is timed in the process's CPU time: the memory store does its work in
    this thread, and CPU time leaves out the time other processes of a shared machine take.
    A full garbage collection runs before the timed turns (see D332).
    """
    model = InstantModel()
    async with open_runtime(MemoryStore()) as rt:
        short: list[AgentHandle] = []
        long: list[AgentHandle] = []
        for index in range(HISTORY_AGENTS):
            short.append(await _resumed_with_history(rt, model, f"s{index}", SHORT_HISTORY))
            long.append(await _resumed_with_history(rt, model, f"l{index}", LONG_HISTORY))
        for handle in (*short, *long):
            handle.agent.send("warm up")
            await handle.agent.wait_idle()
        # A full collection now, not in the middle of the timed turns: its cost is that of
        # every object of the process (the histories built above), not of one turn's work.
        gc.collect()
        spent = [0.0, 0.0]  # short, long
        for lap in range(HISTORY_ROUNDS):
            for pair in zip(short, long, strict=True):
                order = [(0, pair[0]), (1, pair[1])]
                for which, handle in order if lap % 2 == 0 else order[::-1]:
                    start = time.process_time()
                    handle.agent.send("go")
                    await handle.agent.wait_idle()
                    spent[which] += time.process_time() - start
        for handle in (*short, *long):
            await handle.aclose()
    turns = HISTORY_AGENTS * HISTORY_ROUNDS
    return spent[0] / turns, spent[1] / turns


async def _resumed_with_history(
    rt: Runtime, model: InstantModel, session_id: str, turns: int
) -> AgentHandle:
    handle = await rt.agents.create(model=model, session_id=session_id)
    handle.agent.send("go")
    await handle.agent.wait_idle()
    session = handle.agent.session
    template = session.records
    for turn in range(2, turns + 1):
        for record in template:
            data = dict(record.data)
            if "turn" in data:
                data["turn"] = turn
            if record.type == "user/message":
                data["id"] = f"m{turn}"
            session.append(record.type, data)
    await handle.aclose()
    return await rt.agents.resume(session_id, model=model)


# -- cancel and close ----------------------------------------------------------------------


async def runtime_cancel(rounds: int) -> float:
    total = 0.0
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=HeldModel())
        agent = handle.agent
        for _ in range(rounds):
            agent.send("go")
            await trio.testing.wait_all_tasks_blocked()
            start = time.perf_counter()
            agent.cancel()
            await agent.wait_idle()
            total += time.perf_counter() - start
        await handle.aclose()
    return total / rounds


async def bare_cancel(rounds: int) -> float:
    total = 0.0
    for _ in range(rounds):
        resumed = trio.Event()
        scope = trio.CancelScope()

        async def task(scope: trio.CancelScope = scope, resumed: trio.Event = resumed) -> None:
            with scope:
                await trio.sleep_forever()
            resumed.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
            await trio.testing.wait_all_tasks_blocked()
            start = time.perf_counter()
            scope.cancel()
            await resumed.wait()
            total += time.perf_counter() - start
    return total / rounds


async def close_latency(running: bool, rounds: int) -> float:
    total = 0.0
    async with open_runtime(MemoryStore()) as rt:
        for _ in range(rounds):
            handle = await rt.agents.create(model=HeldModel() if running else InstantModel())
            if running:
                handle.agent.send("go")
                await trio.testing.wait_all_tasks_blocked()
            start = time.perf_counter()
            await handle.aclose()
            total += time.perf_counter() - start
    return total / rounds


# -- scale ---------------------------------------------------------------------------------


async def idle_agent_bytes(count: int) -> float:
    async with open_runtime(MemoryStore()) as rt:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for index in range(count):
            await rt.agents.create(model=InstantModel(), session_id=f"a{index}")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return (after - before) / count


async def blocked_task_bytes(count: int) -> float:
    async with trio.open_nursery() as nursery:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            nursery.start_soon(trio.sleep_forever)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        nursery.cancel_scope.cancel()
    return (after - before) / count


async def create_close_per_second(count: int) -> float:
    async with open_runtime(MemoryStore()) as rt:
        start = time.perf_counter()
        for _ in range(count):
            handle = await rt.agents.create(model=InstantModel())
            await handle.aclose()
        return count / (time.perf_counter() - start)


# -- store -----------------------------------------------------------------------------------


async def sqlite_records_per_second(turns: int) -> tuple[float, float]:
    """Records/s appended as turns (5 records each, committed per turn), and the time of
    the closing flush after 1,000 more queued records."""
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(os.path.join(directory, "bench.sqlite3"))
        async with store.running():
            session = Session("bench")
            detach = store.enter(session)
            start = time.perf_counter()
            for turn in range(1, turns + 1):
                session.append("turn/start", {"turn": turn})
                session.append("user/message", {"id": f"m{turn}", "content": "hi"})
                session.append("assistant/message", {"content": "ok"})
                session.append("step/end", {"turn": turn, "step": 1})
                session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            await store.flush(session)
            rate = turns * 5 / (time.perf_counter() - start)
            for index in range(1000):
                session.append("context/message", {"id": f"x{index}", "content": "c"})
            start = time.perf_counter()
            await store.flush(session)
            flush = time.perf_counter() - start
            detach()
    return rate, flush


# -- ACP over a real stdio subprocess --------------------------------------------------------

ECHO_SERVER = """
import json, trio

async def main():
    # The floor for a JSON-RPC server on trio: read a line, parse it, answer it.
    receive = trio.lowlevel.FdStream(0)
    send = trio.lowlevel.FdStream(1)
    buffer = b""
    async for data in receive:
        buffer += data
        while b"\\n" in buffer:
            line, buffer = buffer.split(b"\\n", 1)
            request = json.loads(line)
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
            await send.send_all(json.dumps(answer).encode() + b"\\n")

trio.run(main)
"""


MEMORY_STORE_SERVER = """
import trio
from trio_agents import MemoryStore, OfflineModel
from trio_agents.acp import serve_stdio

# `trio-agents acp` with the memory store: what the SQLite commits cost, by difference.
trio.run(serve_stdio, MemoryStore(), OfflineModel)
"""


def _request(process: subprocess.Popen[bytes], frame: dict[str, Any]) -> dict[str, Any]:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(json.dumps(frame).encode() + b"\n")
    process.stdin.flush()
    while True:
        answer: dict[str, Any] = json.loads(process.stdout.readline())
        if "method" not in answer and answer.get("id") == frame.get("id"):
            return answer


def _cpu_seconds(pid: int) -> float:
    """User and system time of a process so far (Linux's /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spawn_server(command: list[str]) -> tuple[subprocess.Popen[bytes], float]:
    """A server started and past its answer to `initialize`, and the time that took."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    start = time.perf_counter()
    # stderr: the server's start-up line would interleave with the table; a server that fails
    # shows as an answer that never comes.
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        _request(process, init)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process, time.perf_counter() - start


def _serve_interleaved(
    servers: list[tuple[list[str], Callable[[subprocess.Popen[bytes]], dict[str, Any]]]],
    rounds: int,
) -> list[tuple[float, float, float]]:
    """For each (command, prepare) server: (spawn to the answer to `initialize`, mean round
    trip of the frame `prepare` built, the server's CPU time per round trip). The servers
    run side by side and take their rounds in turn, in a rotating order, so that a ratio of
    two of them compares the same moments of a noisy machine (D370); the CPU time is less at
    the mercy of a loaded machine's scheduler than the wall time, though tick-grained, so
    take many rounds."""
    spawned: list[tuple[subprocess.Popen[bytes], float]] = []
    try:
        for command, _ in servers:
            spawned.append(_spawn_server(command))
        frames = [
            prepare(process) for (process, _), (_, prepare) in zip(spawned, servers, strict=True)
        ]
        for (process, _), frame in zip(spawned, frames, strict=True):
            _request(process, frame)  # warm up
        cpus = [_cpu_seconds(process.pid) for process, _ in spawned]
        totals = [0.0] * len(servers)
        order = list(range(len(servers)))
        for index in range(rounds):
            for which in order[index % len(order) :] + order[: index % len(order)]:
                process = spawned[which][0]
                start = time.perf_counter()
                _request(process, frames[which])
                totals[which] += time.perf_counter() - start
        cpus = [
            (_cpu_seconds(process.pid) - cpu) / rounds
            for (process, _), cpu in zip(spawned, cpus, strict=True)
        ]
    finally:
        for process, _ in spawned:
            assert process.stdin is not None
            process.stdin.close()
        for process, _ in spawned:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return [
        (spawn, total / rounds, cpu)
        for (_, spawn), total, cpu in zip(spawned, totals, cpus, strict=True)
    ]


def acp_figures(prompts: int) -> tuple[float, ...]:
    """(ACP round trip, echo round trip, ACP spawn-to-initialize, echo spawn-to-answer, ACP
    round trip with the memory store, the server's CPU per prompt with SQLite, the same with
    the memory store)."""
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "acp.sqlite3")
        binary = os.path.join(os.path.dirname(sys.executable), "trio-agents")

        def prompt_frame(process: subprocess.Popen[bytes]) -> dict[str, Any]:
            where: dict[str, Any] = {"cwd": directory, "mcpServers": []}
            new = _request(
                process, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": where}
            )
            text = [{"type": "text", "text": "hi"}]
            params = {"sessionId": new["result"]["sessionId"], "prompt": text}
            return {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params}

        def echo_frame(process: subprocess.Popen[bytes]) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {}}

        (
            (agent_spawn, agent_trip, agent_cpu),
            (echo_spawn, echo_trip, _),
            (
                _,
                memory_trip,
                memory_cpu,
            ),
        ) = _serve_interleaved(
            [
                ([binary, "acp", "--store", store], prompt_frame),
                ([sys.executable, "-c", ECHO_SERVER], echo_frame),
                ([sys.executable, "-c", MEMORY_STORE_SERVER], prompt_frame),
            ],
            prompts,
        )
    return agent_trip, echo_trip, agent_spawn, echo_spawn, memory_trip, agent_cpu, memory_cpu


# -- the table -------------------------------------------------------------------------------


def repeat(times: int, measure: Callable[[], float]) -> list[float]:
    return [measure() for _ in range(times)]


def trio_measure(afn: Callable[..., Awaitable[float]], *args: Any) -> Callable[[], float]:
    return lambda: trio.run(afn, *args)


def summary(values: list[float], scale: float, unit: str) -> str:
    median = statistics.median(values) * scale
    return f"{median:10.1f} {unit} (min {min(values) * scale:.1f}, max {max(values) * scale:.1f})"


def ratio(values: list[float], baseline: list[float]) -> str:
    ratios = sorted(v / b for v, b in zip(values, baseline, strict=True))
    return f"{statistics.median(ratios):6.2f}x (min {ratios[0]:.2f}, max {ratios[-1]:.2f})"


def verdict(ok: bool, target: str) -> str:
    return f"{'met' if ok else 'MISSED'} ({target})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer iterations, for a smoke run")
    parser.add_argument("--no-peers", action="store_true", help="skip the peer frameworks")
    parser.add_argument(
        "--no-many", action="store_true", help="skip the 1,000 sessions and 10,000 agents"
    )
    parser.add_argument(
        "--acp-peers",
        action="store_true",
        help="also time third-party ACP agents (npm installs: see benchmarks/acp_peers.py)",
    )
    args = parser.parse_args(argv)
    n = args.repeat
    turns = 200 if args.quick else 2000
    agents = 1000 if args.quick else 10_000
    print(f"trio-agents benchmarks: median of {n} runs, ratios against baselines of the same run")
    print(f"python {sys.version.split()[0]}, trio {trio.__version__}, {os.cpu_count()} cores\n")

    rows: list[tuple[str, str, str, str]] = []

    def interleaved(
        first: Callable[[], float], second: Callable[[], float]
    ) -> tuple[list[float], list[float]]:
        a: list[float] = []
        b: list[float] = []
        for _ in range(n):  # interleaved, so drift in machine load hits both alike
            a.append(first())
            b.append(second())
        return a, b

    one, floor_one = interleaved(
        trio_measure(runtime_turns, 0, turns), trio_measure(floor_turns, 0, turns)
    )
    three, floor_three = interleaved(
        trio_measure(runtime_turns, 2, turns // 2), trio_measure(floor_turns, 2, turns // 2)
    )
    extra = [(t - o) / 2 for t, o in zip(three, one, strict=True)]
    histories = [trio.run(history_growth) for _ in range(n)]
    short_history, long_history = [h[0] for h in histories], [h[1] for h in histories]
    cancel, bare = interleaved(trio_measure(runtime_cancel, 200), trio_measure(bare_cancel, 200))

    peer_rows, fastest_one, fastest_extra = measure_peers(n, turns, skip=args.no_peers)

    target_one = f"<= 8x floor{', >= 4x faster than the fastest peer' if fastest_one else ''}"
    one_ok = statistics.median(one) <= 8 * statistics.median(floor_one)
    if fastest_one is not None:
        one_ok = one_ok and fastest_one[1] >= 4
    rows.append(
        (
            "1-step turn",
            summary(one, 1e6, "us"),
            f"{ratio(one, floor_one)} trio floor"
            + (
                f"; fastest peer {fastest_one[0]} {fastest_one[1]:.0f}x slower"
                if fastest_one
                else ""
            ),
            verdict(one_ok, target_one),
        )
    )
    rows.append(
        ("3-step turn", summary(three, 1e6, "us"), f"{ratio(three, floor_three)} trio floor", "")
    )
    extra_versus = ""
    extra_verdict = "no peer installed"
    if fastest_extra is not None:
        times = fastest_extra[1]
        extra_versus = f"fastest peer {fastest_extra[0]} {times:.0f}x dearer"
        extra_verdict = verdict(times >= 10, "10x cheaper than the fastest peer's")
    rows.append(("each extra tool step", summary(extra, 1e6, "us"), extra_versus, extra_verdict))
    growth = statistics.median(
        long / short for long, short in zip(long_history, short_history, strict=True)
    )
    rows.append(
        (
            f"1-step turn, {LONG_HISTORY:,} turns of history",
            summary(long_history, 1e6, "us CPU"),
            f"{ratio(long_history, short_history)} the same at {SHORT_HISTORY} turns"
            f" ({statistics.median(short_history) * 1e6:.1f} us CPU)",
            verdict(growth <= 1.2, "<= 1.2x"),
        )
    )
    rows.append(
        (
            "cancel -> wait_idle",
            summary(cancel, 1e6, "us"),
            f"{ratio(cancel, bare)} bare scope cancel",
            verdict(statistics.median(cancel) <= 3 * statistics.median(bare), "<= 3x"),
        )
    )
    idle_close = repeat(n, trio_measure(close_latency, False, 200))
    rows.append(("aclose, idle agent", summary(idle_close, 1e6, "us"), "", ""))
    busy_close = repeat(n, trio_measure(close_latency, True, 200))
    rows.append(("aclose, running agent", summary(busy_close, 1e6, "us"), "", ""))
    per_agent = repeat(min(n, 3), trio_measure(idle_agent_bytes, agents))
    per_task = repeat(min(n, 3), trio_measure(blocked_task_bytes, agents))
    rows.append(
        (
            f"memory per idle agent ({agents:,})",
            summary(per_agent, 1 / 1024, "KiB"),
            f"{ratio(per_agent, per_task)} one blocked trio task",
            verdict(statistics.median(per_agent) <= 8 * 1024, "<= 8 KiB"),
        )
    )
    rate = repeat(n, trio_measure(create_close_per_second, 1000))
    rows.append(
        (
            "create+close, memory store",
            summary(rate, 1, "/s"),
            "",
            verdict(statistics.median(rate) >= 5000, ">= 5,000/s"),
        )
    )
    store = [trio.run(sqlite_records_per_second, 500) for _ in range(n)]
    rows.append(
        ("SQLite appends, turns not waited for", summary([s[0] for s in store], 1, "rec/s"), "", "")
    )
    rows.append(("closing flush, 1,000 records", summary([s[1] for s in store], 1e3, "ms"), "", ""))
    rows.extend(postgres_rows(n, args.quick))
    acp = [acp_figures(50 if args.quick else 200) for _ in range(n)]
    trips, echo_trips = [a[0] for a in acp], [a[1] for a in acp]
    spawns, echo_spawns = [a[2] for a in acp], [a[3] for a in acp]
    rows.append(
        (
            "ACP prompt round trip, SQLite",  # answered after its commit (rule L9)
            summary(trips, 1e6, "us"),
            f"{ratio(trips, echo_trips)} bare trio echo",
            verdict(statistics.median(trips) <= 3 * statistics.median(echo_trips), "<= 3x"),
        )
    )
    memory_trips = [a[4] for a in acp]
    rows.append(
        (
            "  the same, memory store",
            summary(memory_trips, 1e6, "us"),
            f"{ratio(memory_trips, echo_trips)} bare trio echo",
            "",
        )
    )
    cpus, memory_cpus = [a[5] for a in acp], [a[6] for a in acp]
    rows.append(
        (
            "  server CPU per prompt, SQLite",
            summary(cpus, 1e6, "us"),
            f"{ratio(cpus, memory_cpus)} memory store "
            f"({statistics.median(memory_cpus) * 1e6:.0f} us)",
            "",
        )
    )
    rows.append(
        (
            "ACP spawn -> initialize",
            summary(spawns, 1e3, "ms"),
            f"{ratio(spawns, echo_spawns)} bare trio echo",
            verdict(statistics.median(spawns) <= 2.5 * statistics.median(echo_spawns), "<= 2.5x"),
        )
    )
    if not args.no_many:
        import many_sessions

        figures = many_sessions.measure(
            1 if args.quick else min(n, 3),
            sessions=200 if args.quick else 1000,
            agents=agents,
            prompts=600 if args.quick else 3000,
        )
        rows.extend(many_sessions.rows(figures))
    rows.extend(peer_rows)
    if args.acp_peers:
        import acp_peers

        third_party = acp_peers.ROOT / ".third-party"
        rows.extend(acp_peers.rows(3 if args.quick else 7, 4 if args.quick else 8, third_party))

    width = max(len(name) for name, _, _, _ in rows)
    value_width = max(len(value) for _, value, _, _ in rows)
    versus_width = max(len(versus) for _, _, versus, _ in rows)
    for name, value, versus, target in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  {versus:<{versus_width}}  {target}")
    return 0


def postgres_rows(repeat: int, quick: bool) -> list[tuple[str, str, str, str]]:
    """PostgreSQL appends against SQLite (benchmarks/store_appends.py), on a server started
    for the run; one row saying why when psycopg or the server cannot be had."""
    # Imported here: psycopg is the optional `postgres` extra, and this file runs without it.
    try:
        import store_appends

        return store_appends.measure(repeat, quick, os.environ.get("TRIO_AGENTS_BENCH_DSN"))
    except (ImportError, AssertionError) as exc:
        return [("PostgreSQL appends", "not measured", str(exc).splitlines()[0][:60], "")]


def measure_peers(
    n: int, turns: int, *, skip: bool
) -> tuple[list[tuple[str, str, str, str]], tuple[str, float] | None, tuple[str, float] | None]:
    """Rows for the peer frameworks, and the fastest peer's 1-step turn and extra step, each
    as a multiple of ours measured interleaved with it over the same number of turns (both
    peers redo work over the whole history every turn, so the count matters)."""
    import peers

    rows: list[tuple[str, str, str, str]] = []
    fastest_one: tuple[str, float] | None = None
    fastest_extra: tuple[str, float] | None = None
    peer_turns = 50 if turns < 2000 else 200
    for name, version in peers.available().items():
        if version is None or skip:
            why = "skipped (--no-peers)" if skip else "not installed: pip install -e '.[bench]'"
            rows.append((f"peer {name}", why, "", ""))
            continue
        ours_one: list[float] = []
        one: list[float] = []
        ours_three: list[float] = []
        three: list[float] = []
        ours_cancel: list[float] = []
        cancel: list[float] = []
        for _ in range(n):
            ours_one.append(trio.run(runtime_turns, 0, peer_turns))
            one.append(peers.turn_seconds(name, 0, peer_turns))
            ours_three.append(trio.run(runtime_turns, 2, peer_turns // 2))
            three.append(peers.turn_seconds(name, 2, peer_turns // 2))
            ours_cancel.append(trio.run(runtime_cancel, 50))
            cancel.append(peers.cancel_seconds(name, 50))
        extra = [(t - o) / 2 for t, o in zip(three, one, strict=True)]
        ours_extra = [(t - o) / 2 for t, o in zip(ours_three, ours_one, strict=True)]
        for figure, theirs, ours in (
            (f"1-step turn ({peer_turns} turns)", one, ours_one),
            ("3-step turn", three, ours_three),
            ("extra tool step", extra, ours_extra),
            ("cancel", cancel, ours_cancel),
        ):
            rows.append(
                (
                    f"peer {name} {version}: {figure}",
                    summary(theirs, 1e6, "us"),
                    f"{ratio(theirs, ours)} trio-agents",
                    "",
                )
            )
        times_one = statistics.median(one) / statistics.median(ours_one)
        times_extra = statistics.median(extra) / statistics.median(ours_extra)
        if fastest_one is None or times_one < fastest_one[1]:
            fastest_one = (name, times_one)
        if fastest_extra is None or times_extra < fastest_extra[1]:
            fastest_extra = (name, times_extra)
    return rows, fastest_one, fastest_extra


if __name__ == "__main__":
    sys.exit(main())
