"""trio's checkpoint rule for every public async call: it is always a checkpoint, or never.

A call that returns at once on some path (already closed, nothing to do, a second call)
must still checkpoint there, or a loop around it can starve every other task and never
see its cancellation. Each case below drives one public async callable down one path that
returns, under `trio.testing.assert_checkpoints`. A call that raises need not checkpoint
(trio's own functions promise only "checkpoint or raise"), so refusals are not measured.

For async context managers, entering and leaving are measured one by one. For model
streams, consuming the whole stream is measured, not each chunk: a stream may hand over
what it already holds without a checkpoint between chunks (design D48).

Long-running calls are measured on the path that returns: `Agent.run`, `Fiber.serve` and
`Runtime.serve` once closed, `AcpServer.serve` and `serve_stdio` at the end of input,
`wait_idle` once the turn ends, `GateTool` once released. Left out: those same calls while
they still run (they return only when closed or at end of input, which the cases do), and
every refusal (a closed fiber, a duplicate id, a second `serve`), which raises.

`test_every_public_async_callable_has_a_case` enumerates the public namespaces, so an
async method added without a case here fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Mapping
from contextlib import AbstractAsyncContextManager
from importlib.util import find_spec
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import agent_conformance
import trio_agents
import trio_agents.acp
import trio_agents.testing
from agent_conformance import AgentObserver, PeerAgent, open_asyncio_peer
from examples.observed_trio_agents import factory as observed_trio_agents
from trio_agents import (
    Agent,
    AgentConfig,
    AgentHandle,
    AgentOptions,
    BashTools,
    Closer,
    ConfiguredAgents,
    EventBus,
    Fiber,
    FileTools,
    Finish,
    MemoryStore,
    Message,
    ModelRequest,
    OfflineModel,
    OpenAICompatibleModel,
    PostgresStore,
    Runtime,
    Session,
    SessionStore,
    ShellExecutor,
    ShellRequest,
    SqliteStore,
    TextDelta,
    ToolContext,
    function_tool,
    open_agent,
    open_runtime,
)
from trio_agents.acp import AcpServer, serve_stdio
from trio_agents.acp._jsonrpc import ClientRequestError
from trio_agents.testing import EchoTool, GateTool, ScriptedModel, ScriptedStep, reply, tool_step

from .support.postgres import start_server

NAMESPACES = (trio_agents, trio_agents.acp, trio_agents.testing, agent_conformance)
ASYNC_DUNDERS = frozenset({"__aenter__", "__aexit__", "__aiter__", "__anext__", "__call__"})

# Public async callables with no case of their own, and why.
STORE_METHODS = (
    "delete", "exists", "flush", "list_sessions", "load", "persist", "restore", "running",
)  # fmt: skip
NOT_MEASURED: dict[str, str] = {
    "trio_agents.Plugin.apply": "documents the protocol (it only raises); plugins have cases",
    "trio_agents.Tool.__call__": "a Protocol; its implementations have cases",
    "trio_agents.Approver.__call__": "a Protocol; the ACP and terminal approvers have cases",
    **{
        f"agent_conformance.{name}": "a Protocol of what a target offers; the built-in "
        "implementations have cases"
        for name in (
            "AgentSurface.wait_idle",
            "ObservedAgent.wait_idle",
            "RuntimeSurface.load",
            "RuntimeSurface.open_child",
            "RuntimeSurface.reload",
        )
    },
    **{
        f"trio_agents.SessionStore.{name}": "abstract; measured on MemoryStore and SqliteStore"
        for name in STORE_METHODS
    },
}
NOT_MEASURED.update(
    {
        f"agent_conformance.{name}": "asyncio code on the peer's loop: it awaits asyncio "
        "futures, not trio checkpoints (tests/test_peer_adapters.py drives it)"
        for name in (
            "AsyncioModel.stream",
            "AsyncioTool.__call__",
            "PeerAgent.call_tool",
            "PeerAgent.next_step",
            "PeerAgent.run_turn",
            "PeerAgent.stream_reply",
        )
    }
)
# Cases for async callables the enumeration cannot see: instances of private classes.
EXTRA_TARGETS: dict[str, str] = {
    "trio_agents.BashTools.tools": "the tools' __call__ (bash, bash_output, bash_kill)",
    "trio_agents.FileTools.tools": "the tools' __call__ (read, edit, write)",
    "agent_conformance.observed": "the factory it returns and its surface's wait_idle",
}


class Probe:
    """Measures calls; a case that never measured anything fails, so no case is empty."""

    def __init__(self) -> None:
        self.measured = 0

    @contextlib.contextmanager
    def checkpoints(self) -> Generator[None]:
        with trio.testing.assert_checkpoints():
            yield
        self.measured += 1

    async def enter_and_exit(self, cm: AbstractAsyncContextManager[Any]) -> Any:
        with self.checkpoints():
            value = await cm.__aenter__()
        with self.checkpoints():
            await cm.__aexit__(None, None, None)
        return value

    async def consume(self, stream: AsyncIterator[Any]) -> list[Any]:
        with self.checkpoints():
            return [item async for item in stream]


Case = Callable[[Probe], Awaitable[None]]
CASES: list[tuple[tuple[str, ...], str, Case, tuple[pytest.MarkDecorator, ...]]] = []


def case(
    targets: str | tuple[str, ...], path: str, *marks: pytest.MarkDecorator
) -> Callable[[Case], Case]:
    """Register a case: what it measures (`Class.*` for every method of a store), the paths
    it drives, and the marks it runs under."""
    names = (targets,) if isinstance(targets, str) else targets

    def register(fn: Case) -> Case:
        CASES.append((names, path, fn, marks))
        return fn

    return register


subprocess_mark = pytest.mark.subprocess
realtime = pytest.mark.realtime


# -- Agent ------------------------------------------------------------------------------------


def new_agent(model: ScriptedModel | None = None) -> Agent:
    return Agent(session=Session("a"), model=model or ScriptedModel())


@case("trio_agents.Agent.run", "runs until its closer is awaited, then returns")
async def _(probe: Probe) -> None:
    agent = new_agent()

    async def measured(task_status: trio.TaskStatus[Closer]) -> None:
        with probe.checkpoints():
            await agent.run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        close: Closer = await nursery.start(measured)
        agent.send("hi")
        await agent.wait_idle()
        assert await close()


@case(
    ("trio_agents.Agent.run", "trio_agents.Closer.__call__"),
    "the closer it hands out: first call, and after the loop exited",
)
async def _(probe: Probe) -> None:
    agent = new_agent()
    async with trio.open_nursery() as nursery:
        close: Closer = await nursery.start(agent.run)
        with probe.checkpoints():
            assert await close()
        with probe.checkpoints():
            assert await close()


@case("trio_agents.Agent.wait_idle", "idle, busy until its turn ends, closed")
async def _(probe: Probe) -> None:
    async with open_agent(ScriptedModel()) as agent:
        with probe.checkpoints():
            await agent.wait_idle()
        agent.send("hi")
        with probe.checkpoints():
            await agent.wait_idle()
    with probe.checkpoints():
        await agent.wait_idle()


@case(
    (
        "trio_agents.TurnStream.__aenter__",
        "trio_agents.TurnStream.__anext__",
        "trio_agents.TurnStream.result",
        "trio_agents.TurnStream.__aexit__",
    ),
    "enter; each event, awaited or at hand, and the end; the result; leave; the result after",
)
async def _(probe: Probe) -> None:
    async with open_agent(ScriptedModel()) as agent:
        stream = agent.stream("hi")
        with probe.checkpoints():
            await stream.__aenter__()
        ended = False
        while not ended:
            with probe.checkpoints():
                try:
                    await stream.__anext__()
                except StopAsyncIteration:
                    ended = True
        with probe.checkpoints():
            await stream.result()
        with probe.checkpoints():
            await stream.__aexit__(None, None, None)
        with probe.checkpoints():
            await stream.result()


@case("agent_conformance.observed", "the factory it returns; its surface's wait_idle")
async def _(probe: Probe) -> None:
    cm = observed_trio_agents(ScriptedModel(), [], EventBus(), AgentOptions())
    with probe.checkpoints():
        agent = await cm.__aenter__()
    with probe.checkpoints():
        await agent.wait_idle()
    agent.send("hi")
    with probe.checkpoints():
        await agent.wait_idle()
    with probe.checkpoints():
        await cm.__aexit__(None, None, None)


# -- the runtime, fibers, handles, registries -------------------------------------------------


@case("trio_agents.open_runtime", "enter and leave")
async def _(probe: Probe) -> None:
    await probe.enter_and_exit(open_runtime(MemoryStore()))


@case("trio_agents.open_agent", "enter and leave")
async def _(probe: Probe) -> None:
    await probe.enter_and_exit(open_agent(ScriptedModel()))


@case("trio_agents.open_mcp_tools", "enter and leave, no server (the servers' paths await)")
async def _(probe: Probe) -> None:
    # Imported here: the name loads the `mcp` SDK, which the other cases do not need.
    from trio_agents import open_mcp_tools

    tools = await probe.enter_and_exit(open_mcp_tools([], base=[EchoTool()]))
    assert [tool.name for tool in tools] == ["echo"]


@case("trio_agents.AgentRegistry.create", "a new session")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        with probe.checkpoints():
            await rt.agents.create(model=ScriptedModel())


@case("trio_agents.AgentRegistry.resume", "a stored session, closed, and one a crash left open")
async def _(probe: Probe) -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s")
        handle.agent.send("hi")
        await handle.agent.wait_idle()
        await handle.aclose()
        with probe.checkpoints():
            await rt.agents.resume("s", model=ScriptedModel())
    crashed = Session("crashed")
    detach = store.enter(crashed)
    crashed.append("turn/start", {"turn": 1})
    detach()
    async with open_runtime(store) as rt:
        with probe.checkpoints():
            handle = await rt.agents.resume("crashed", model=ScriptedModel())
    assert handle.agent.session.records[-1].type == "turn/end"


@case("trio_agents.AgentHandle.aclose", "a live agent, then a second time")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=ScriptedModel())
        with probe.checkpoints():
            await handle.aclose()
        with probe.checkpoints():
            await handle.aclose()


@case(
    ("trio_agents.AgentHandle.__aenter__", "trio_agents.AgentHandle.__aexit__"),
    "enter; leave, which closes the agent; leave again once closed",
)
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle: AgentHandle = await rt.agents.create(model=ScriptedModel())
        await probe.enter_and_exit(handle)
        with probe.checkpoints():
            await handle.__aexit__(None, None, None)


class ClosesItsAgent:
    """A tool that closes its own agent, measuring that close."""

    name = "close_me"
    description = "closes its own agent"
    parameters: Mapping[str, Any] = {"type": "object"}

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.handle: AgentHandle | None = None

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        assert self.handle is not None
        # Shielded, so the checkpoint is counted instead of raising the turn's Cancelled.
        with self.probe.checkpoints(), trio.CancelScope(shield=True):
            await self.handle.aclose()
        await trio.sleep_forever()  # cancelled with the turn, as the close goes on
        raise AssertionError("unreachable")  # pragma: no cover


@case("trio_agents.AgentHandle.aclose", "from inside the agent it closes (a tool)")
async def _(probe: Probe) -> None:
    tool = ClosesItsAgent(probe)
    async with open_runtime(MemoryStore()) as rt:
        model = ScriptedModel([tool_step(("close_me", {}))])
        tool.handle = handle = await rt.agents.create(model=model, tools=[tool])
        handle.agent.send("close yourself")
        await handle.agent.wait_idle()
    assert handle.closed


@case("trio_agents.Fiber.aclose", "an agent's own fiber (handle.fiber), open and closed")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(model=ScriptedModel())
        with probe.checkpoints():
            await handle.fiber.aclose()
        with probe.checkpoints():
            await handle.fiber.aclose()


@case("trio_agents.Fiber.aclose", "open, already closed, and from one of its own tasks")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        fiber = await rt.open_child("f")
        with probe.checkpoints():
            await fiber.aclose()
        with probe.checkpoints():
            await fiber.aclose()
        other = await rt.open_child("g")
        done = trio.Event()

        async def closes_its_own_fiber() -> None:
            try:
                with probe.checkpoints():
                    await other.aclose()
                await trio.sleep_forever()
            finally:
                done.set()

        other.nursery.start_soon(closes_its_own_fiber)
        await done.wait()


@contextlib.asynccontextmanager
async def nothing() -> AsyncGenerator[str]:
    await trio.lowlevel.checkpoint()
    yield "value"


async def fiber_of_kind(rt: Runtime, kind: str) -> Fiber:
    """The runtime itself (the root fiber), or a child fiber of it."""
    return rt if kind == "Runtime" else await rt.open_child("f")


def fiber_cases(kind: str) -> None:
    @case(f"trio_agents.{kind}.enter_async_context", "a context manager")
    async def _(probe: Probe) -> None:
        async with open_runtime(MemoryStore()) as rt:
            fiber = await fiber_of_kind(rt, kind)
            with probe.checkpoints():
                assert await fiber.enter_async_context(nothing()) == "value"

    @case(f"trio_agents.{kind}.open_child", "a child")
    async def _(probe: Probe) -> None:
        async with open_runtime(MemoryStore()) as rt:
            fiber = await fiber_of_kind(rt, kind)
            with probe.checkpoints():
                await fiber.open_child("child")

    @case(f"trio_agents.{kind}.fiber", "enter and leave")
    async def _(probe: Probe) -> None:
        async with open_runtime(MemoryStore()) as rt:
            fiber = await fiber_of_kind(rt, kind)
            await probe.enter_and_exit(fiber.fiber("child"))


fiber_cases("Fiber")
fiber_cases("Runtime")


async def serve_until_closed(probe: Probe, fiber: Fiber) -> None:
    async def measured(task_status: trio.TaskStatus[Fiber]) -> None:
        with probe.checkpoints():
            await fiber.serve(task_status=task_status)

    async with trio.open_nursery() as nursery:
        await nursery.start(measured)
        await fiber.aclose()
    assert fiber.state == "closed"


@case("trio_agents.Fiber.serve", "serves until closed, then returns")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        await serve_until_closed(probe, Fiber("f", rt, None))


@case("trio_agents.Runtime.serve", "serves until closed, then returns")
async def _(probe: Probe) -> None:
    await serve_until_closed(probe, Runtime(MemoryStore(), EventBus()))


@case("trio_agents.Runtime.aclose", "inside open_runtime, then again as the block is left")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        with probe.checkpoints():
            await rt.aclose()
        with probe.checkpoints():
            await rt.aclose()


@case(
    ("trio_agents.Runtime.load", "trio_agents.Runtime.reload"),
    "load; reload a plugin not loaded, then a loaded one",
)
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        with probe.checkpoints():
            await rt.load(BashTools())
        plugin = BashTools()
        with probe.checkpoints():
            await rt.reload(plugin)
        with probe.checkpoints():
            await rt.reload(plugin)


@case("trio_agents.BashTools.apply", "a fresh fiber")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        fiber = await rt.open_child("bash")
        with probe.checkpoints():
            await BashTools().apply(fiber)


@case("trio_agents.McpServers.apply", "no server, in a fresh fiber")
async def _(probe: Probe) -> None:
    from trio_agents import McpServers  # beside the MCP cases' own lazy imports

    async with open_runtime(MemoryStore()) as rt:
        fiber = await rt.open_child("mcp")
        with probe.checkpoints():
            await McpServers([]).apply(fiber)


@case("trio_agents.ConfiguredAgents.apply", "no configs, a new session, a stored one")
async def _(probe: Probe) -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        empty = await rt.open_child("empty")
        with probe.checkpoints():
            await ConfiguredAgents().apply(empty)
        plugin = ConfiguredAgents(AgentConfig("a", ScriptedModel(), session_id="a-1"))
        fiber = await rt.open_child("configured")
        with probe.checkpoints():
            await plugin.apply(fiber)
        agent = plugin.agent("a")
        assert agent is not None
        agent.send("hi")
        await agent.wait_idle()
        await fiber.aclose()
        again = await rt.open_child("again")
        with probe.checkpoints():
            await plugin.apply(again)
        assert len(store.live_ids) == 1


# -- stores -----------------------------------------------------------------------------------


async def exercise_store(probe: Probe, store: SessionStore) -> None:
    """Every async method of a store, on paths with nothing to do and with something."""
    cm = store.running()
    with probe.checkpoints():
        await cm.__aenter__()
    try:
        with probe.checkpoints():
            assert await store.list_sessions() == []
        with probe.checkpoints():
            assert not await store.exists("s")
        session = Session("s")
        detach = store.enter(session)
        with probe.checkpoints():
            await store.flush(session)  # nothing appended yet
        session.append("turn/start", {"turn": 1})
        with probe.checkpoints():
            await store.flush(session)
        with probe.checkpoints():
            await store.flush(session)  # already durable
        detach()
        with probe.checkpoints():
            assert await store.exists("s")
        with probe.checkpoints():
            await store.load("s")
        with probe.checkpoints():
            repaired = await store.restore("s")  # the open turn is closed first
        assert repaired.records[-1].type == "turn/end"
        with probe.checkpoints():
            await store.restore("s")  # nothing to repair
        with probe.checkpoints():
            assert len(await store.list_sessions()) == 1
        empty = Session("p")
        detach = store.enter(empty)
        with probe.checkpoints():
            await store.persist(empty)  # no record: the header is written
        with probe.checkpoints():
            await store.persist(empty)  # already stored
        detach()
        with probe.checkpoints():
            assert await store.exists("p")
        with probe.checkpoints():
            assert await store.delete("p")
        with probe.checkpoints():
            assert not await store.delete("p")  # nothing to delete
    finally:
        with probe.checkpoints():
            await cm.__aexit__(None, None, None)


@case("trio_agents.Committer.commit", "a live session's, both stores, idle and not", realtime)
async def _(probe: Probe) -> None:
    with tempfile.TemporaryDirectory() as directory:
        for store in (MemoryStore(), SqliteStore(os.path.join(directory, "c.sqlite3"))):
            async with store.running():
                session = Session("c")
                detach = store.enter(session)
                committer = session.committer
                assert committer is not None
                with probe.checkpoints():
                    await committer.commit()  # nothing appended yet
                session.append("turn/start", {"turn": 1})
                with probe.checkpoints():
                    await committer.commit()
                assert committer.committed()
                detach()
                assert session.committer is None


@case("trio_agents.MemoryStore.*", "every method, with nothing to do and with something")
async def _(probe: Probe) -> None:
    await exercise_store(probe, MemoryStore())


@case("trio_agents.SqliteStore.*", "every method, with nothing to do and with something", realtime)
async def _(probe: Probe) -> None:
    with tempfile.TemporaryDirectory() as directory:
        await exercise_store(probe, SqliteStore(os.path.join(directory, "s.sqlite3")))
        store = SqliteStore(os.path.join(directory, "s.sqlite3"), readonly=True)
        await probe.enter_and_exit(store.running())


@case("trio_agents.SqliteStore.simulate_kill", "a running store; one never run", realtime)
async def _(probe: Probe) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(os.path.join(directory, "s.sqlite3"))
        async with store.running():
            with probe.checkpoints():
                await store.simulate_kill()
        with probe.checkpoints():
            await SqliteStore(os.path.join(directory, "t.sqlite3")).simulate_kill()


@case("trio_agents.PostgresStore.*", "every method, on a real server of its own", realtime)
async def _(probe: Probe) -> None:
    # A server of its own: cases take no fixtures, and this file's other cases need none.
    server = await trio.to_thread.run_sync(start_server)
    try:
        dsn = await trio.to_thread.run_sync(server.new_database)
        await exercise_store(probe, PostgresStore(dsn))
    finally:
        await trio.to_thread.run_sync(server.stop)


# -- the shell --------------------------------------------------------------------------------


@case(
    (
        "trio_agents.ShellExecutor.running",
        "trio_agents.ShellExecutor.close_jobs",
        "trio_agents.ShellExecutor.kill_owned",
    ),
    "enter and leave, nothing to kill in between",
)
async def _(probe: Probe) -> None:
    shell = ShellExecutor()
    cm = shell.running()
    with probe.checkpoints():
        await cm.__aenter__()
    with probe.checkpoints():
        await shell.kill_owned("nobody")
    with probe.checkpoints():
        await shell.close_jobs()
    with probe.checkpoints():
        await cm.__aexit__(None, None, None)


@case(
    (
        "trio_agents.ShellExecutor.start",
        "trio_agents.ShellExecutor.wait",
        "trio_agents.ShellExecutor.kill",
        "trio_agents.ShellExecutor.kill_owned",
        "trio_agents.ShellExecutor.close_jobs",
    ),
    "jobs running and ended: wait twice, kill an ended one, kill by owner, close",
    subprocess_mark,
)
async def _(probe: Probe) -> None:
    shell = ShellExecutor(grace=0.5)
    async with shell.running():
        with probe.checkpoints():
            quick = await shell.start(shell.resolve(ShellRequest("true")))
        with probe.checkpoints():
            await shell.wait(quick)
        with probe.checkpoints():
            await shell.wait(quick)
        with probe.checkpoints():
            await shell.kill(quick)  # ended by itself: nothing to kill
        slow = await shell.start(shell.resolve(ShellRequest("sleep 1000")))
        with probe.checkpoints():
            await shell.kill(slow)
        owned = await shell.start(shell.resolve(ShellRequest("sleep 1000", owner="o")))
        with probe.checkpoints():
            await shell.kill_owned("o")
        assert shell.result(owned) is not None
        await shell.start(shell.resolve(ShellRequest("sleep 1000")))
        with probe.checkpoints():
            await shell.close_jobs()


@case(
    "trio_agents.ShellExecutor.check_sandbox",
    "the first check (cached by the test session) and a repeated one",
)
async def _(probe: Probe) -> None:
    shell = ShellExecutor()
    with probe.checkpoints():
        assert await shell.check_sandbox()
    with probe.checkpoints():
        assert await shell.check_sandbox()
    unsandboxed = ShellExecutor(sandbox=None)
    with probe.checkpoints():
        assert not await unsandboxed.check_sandbox()


@case("trio_agents.ShellExecutor.run", "a quick command", subprocess_mark)
async def _(probe: Probe) -> None:
    shell = ShellExecutor()
    with probe.checkpoints():
        result = await shell.run(shell.resolve(ShellRequest("true")))
    assert result.exit_code == 0


@case(
    "trio_agents.ShellExecutor.kill_group",
    "a live group, then the same group gone",
    subprocess_mark,
)
async def _(probe: Probe) -> None:
    shell = ShellExecutor(grace=0.5)
    process = await trio.lowlevel.open_process(["sleep", "1000"], start_new_session=True)
    try:
        with probe.checkpoints():
            await shell.kill_group(process)
        assert process.returncode is not None
        with probe.checkpoints():
            await shell.kill_group(process)  # everything already gone
    finally:
        process.kill()
        await process.wait()


# -- tools and models -------------------------------------------------------------------------


CONTEXT = ToolContext("a", "c1", 1, 1)


@case(
    "trio_agents.BashTools.tools",
    "each tool: refused arguments, a run, not loaded",
    subprocess_mark,
)
async def _(probe: Probe) -> None:
    bash = BashTools()
    tools = {tool.name: tool for tool in bash.tools}
    async with open_runtime(MemoryStore()) as rt:
        await rt.load(bash)
        handle = await rt.agents.create(model=ScriptedModel())
        context = ToolContext(handle.agent.id, "c1", 1, 1)
        for name, arguments in [
            ("bash", {"command": ""}),
            ("bash", {"command": "true", "description": "does nothing"}),
            ("bash_output", {"job_id": "bash-9"}),
            ("bash_kill", {"job_id": "bash-9"}),
        ]:
            with probe.checkpoints():
                await tools[name](arguments, context)
        started = await tools["bash"](
            {"command": "true", "description": "x", "run_in_background": True}, context
        )
        job_id = str(getattr(started, "content", started)).rsplit(" ", 1)[-1]
        await rt.shell.wait(job_id)
        for name in ("bash_output", "bash_kill"):
            with probe.checkpoints():
                await tools[name]({"job_id": job_id}, context)
    for tool in bash.tools:
        with probe.checkpoints():
            await tool({}, CONTEXT)  # the plugin is unloaded


@case(
    "trio_agents.FileTools.tools",
    "each tool: refused arguments, a path outside, a missing file, a run",
    realtime,
)
async def _(probe: Probe) -> None:
    with tempfile.TemporaryDirectory() as cwd:
        tools = {tool.name: tool for tool in FileTools(cwd).tools}
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read", {}),
            ("edit", {"path": "f", "old_string": 1}),
            ("write", {"path": "f"}),
            ("read", {"path": "/"}),
            ("edit", {"path": "f", "old_string": "a", "new_string": "b"}),
            ("write", {"path": "f", "content": "a"}),
            ("read", {"path": "f", "offset": 0}),
            ("read", {"path": "f"}),
            ("edit", {"path": "f", "old_string": "a", "new_string": "b"}),
        ]
        for name, arguments in calls:
            with probe.checkpoints():
                await tools[name](arguments, CONTEXT)


@case(
    ("trio_agents.FileAccess.read_text", "trio_agents.FileAccess.write_text"),
    "FileTools' default access (the local file system): a write, a read, a missing file",
    realtime,
)
async def _(probe: Probe) -> None:
    with tempfile.TemporaryDirectory() as cwd:
        access = FileTools(cwd).access
        path = os.path.join(cwd, "f")
        with probe.checkpoints():
            await access.write_text(path, "a")
        with probe.checkpoints():
            assert await access.read_text(path) == "a"
        with probe.checkpoints(), contextlib.suppress(FileNotFoundError):
            await access.read_text(path + "-missing")


@case(
    "trio_agents.FunctionTool.__call__",
    "invalid arguments; an async function that never checkpoints itself",
)
async def _(probe: Probe) -> None:
    @function_tool
    async def at_once(n: int) -> int:
        return n

    with probe.checkpoints():
        assert await at_once({"n": "x"}, CONTEXT) != "x"
    with probe.checkpoints():
        assert await at_once({"n": 2}, CONTEXT) == "2"


@case("trio_agents.FunctionTool.__call__", "a sync function, in a worker thread", realtime)
async def _(probe: Probe) -> None:
    @function_tool
    def in_a_thread(n: int) -> int:
        return n

    with probe.checkpoints():
        assert await in_a_thread({"n": 3}, CONTEXT) == "3"


@case("trio_agents.testing.EchoTool.__call__", "a call")
async def _(probe: Probe) -> None:
    with probe.checkpoints():
        assert await EchoTool()({"text": "hi"}, CONTEXT) == "hi"


@case("trio_agents.testing.GateTool.__call__", "a call the test releases")
async def _(probe: Probe) -> None:
    gate = GateTool()

    async def measured() -> None:
        with probe.checkpoints():
            assert await gate({}, CONTEXT) == "done"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(measured)
        await trio.testing.wait_all_tasks_blocked()
        gate.release()


REQUEST = ModelRequest((Message("user", "hi"),), (), AgentOptions())


@case("trio_agents.testing.ScriptedModel.stream", "a reply, an empty step, a held step")
async def _(probe: Probe) -> None:
    model = ScriptedModel([reply("hello", chunks=3), ScriptedStep(())])
    chunks = await probe.consume(model.stream(REQUEST))
    assert chunks[-1] == Finish("stop")
    assert await probe.consume(model.stream(REQUEST)) == []
    held = ScriptedModel([reply("later", hold=True)])

    async def measured() -> None:
        assert await probe.consume(held.stream(REQUEST)) == [TextDelta("later"), Finish("stop")]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(measured)
        await trio.testing.wait_all_tasks_blocked()
        held.release()


@case(
    (
        "agent_conformance.open_asyncio_peer",
        "agent_conformance.PeerAgent.wait_idle",
        "agent_conformance.PeerAgent.aclose",
        "agent_conformance.AsyncioPeer.wait",
        "agent_conformance.AsyncioPeer.aclose",
    ),
    "enter; an idle agent; a close, twice; a task waited for; the peer closed; leave",
    pytest.mark.skipif(find_spec("trio_asyncio") is None, reason="needs trio-agents[peers]"),
)
async def _(probe: Probe) -> None:
    opened = open_asyncio_peer(ScriptedModel())
    with probe.checkpoints():
        peer = await opened.__aenter__()
    agent = PeerAgent(peer, AgentObserver(EventBus()), AgentOptions())
    agent.open()
    with probe.checkpoints():
        await agent.wait_idle()
    for _ in range(2):
        with probe.checkpoints():
            await agent.aclose()
    with probe.checkpoints():
        assert await peer.wait(peer.start(asyncio.sleep(0, "slept"))) == "slept"
    peer.start(asyncio.Event().wait())  # never set: aclose cancels it
    for _ in range(2):  # with a task to cancel, then with none
        with probe.checkpoints():
            await peer.aclose()
    with probe.checkpoints():
        await opened.__aexit__(None, None, None)


@case("trio_agents.OfflineModel.stream", "an echo, and a command for the bash tools")
async def _(probe: Probe) -> None:
    for prompt in ("hello", "!echo hi"):
        request = ModelRequest((Message("user", prompt),), (), AgentOptions())
        chunks = await probe.consume(OfflineModel().stream(request))
        assert isinstance(chunks[-1], Finish)


def sse(*payloads: object) -> bytes:
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads)


@case("trio_agents.OpenAICompatibleModel.stream", "a whole reply in one read")
async def _(probe: Probe) -> None:
    body = (
        sse(
            {"choices": [{"delta": {"content": "hi"}}]},
            {"choices": [{"delta": {"content": ""}, "finish_reason": "stop"}]},
        )
        + b"data: [DONE]\n\n"
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        model = OpenAICompatibleModel("m", base_url="http://model.test/v1", client=client)
        chunks = await probe.consume(model.stream(REQUEST))
    assert chunks[0] == TextDelta("hi")
    assert isinstance(chunks[-1], Finish)


# -- ACP --------------------------------------------------------------------------------------


@case("trio_agents.acp.AcpServer.serve", "end of input at once, and after one request")
async def _(probe: Probe) -> None:
    for lines in ([], [b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n']):
        async with open_runtime(MemoryStore()) as rt:
            server = AcpServer(rt, ScriptedModel)
            client_send, server_receive = trio.testing.memory_stream_one_way_pair()
            server_send, client_receive = trio.testing.memory_stream_one_way_pair()
            for line in lines:
                await client_send.send_all(line)
            await client_send.aclose()
            with probe.checkpoints():
                await server.serve(server_receive, server_send)
            if lines:
                assert b'"id":1' in await client_receive.receive_some()


@case("trio_agents.acp.AcpServer.aclose", "no sessions, then a second time")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        server = AcpServer(rt, ScriptedModel)
        with probe.checkpoints():
            await server.aclose()
        with probe.checkpoints():
            await server.aclose()


@case("trio_agents.acp.AcpServer.client_request", "answered, and once the input has ended")
async def _(probe: Probe) -> None:
    async with open_runtime(MemoryStore()) as rt:
        server = AcpServer(rt, ScriptedModel)
        client_send, server_receive = trio.testing.memory_stream_one_way_pair()
        server_send, client_receive = trio.testing.memory_stream_one_way_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve, server_receive, server_send)

            async def answer() -> None:
                request = json.loads(await client_receive.receive_some())
                reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}}
                await client_send.send_all(json.dumps(reply).encode() + b"\n")

            nursery.start_soon(answer)
            with probe.checkpoints():
                assert await server.client_request("x/y", {}) == {"ok": True}
            await client_send.aclose()
        with probe.checkpoints(), pytest.raises(ClientRequestError, match="has ended"):
            await server.client_request("x/y", {})


class Descriptor:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


@case("trio_agents.acp.serve_stdio", "end of input at once")
async def _(probe: Probe) -> None:
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.close(stdin_write)
    try:
        with pytest.MonkeyPatch.context() as patch:
            # serve_stdio only asks the streams for their descriptors.
            patch.setattr(sys, "stdin", Descriptor(stdin_read))
            patch.setattr(sys, "stdout", Descriptor(stdout_write))
            with probe.checkpoints():
                await serve_stdio(MemoryStore(), ScriptedModel)
    finally:
        for fd in (stdin_read, stdout_read, stdout_write):
            os.close(fd)


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(fn, id=f"{' '.join(targets)} | {path}", marks=marks)
        for targets, path, fn, marks in CASES
    ],
)
async def test_always_a_checkpoint(run: Case) -> None:
    probe = Probe()
    await run(probe)
    assert probe.measured > 0, "the case measured nothing"


def is_async(value: object) -> bool:
    fn = inspect.unwrap(value) if callable(value) else value
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)


def public_async_callables() -> set[str]:
    """Every async function in the namespaces' `__all__`, and every public async method or
    property (and async dunder) of the classes they export, inherited ones included."""
    found: set[str] = set()
    for namespace in NAMESPACES:
        for name in namespace.__all__:
            value = getattr(namespace, name)
            prefix = f"{namespace.__name__}.{name}"
            if not inspect.isclass(value):
                if is_async(value):
                    found.add(prefix)
                continue
            for attr in dir(value):
                if attr.startswith("_") and attr not in ASYNC_DUNDERS:
                    continue
                raw: object = inspect.getattr_static(value, attr)
                # A property's getter; else what the class gives (unwraps static and class
                # methods).
                member = raw.fget if isinstance(raw, property) else getattr(value, attr)
                if is_async(member):
                    found.add(f"{prefix}.{attr}")
    return found


def covered() -> set[str]:
    names: set[str] = set()
    for targets, _, _, _ in CASES:
        for target in targets:
            if target.endswith(".*"):
                names.update(f"{target[:-2]}.{method}" for method in STORE_METHODS)
            else:
                names.add(target)
    return names - set(EXTRA_TARGETS)


def test_every_public_async_callable_has_a_case() -> None:
    public = public_async_callables()
    cases = covered()
    assert public - cases - set(NOT_MEASURED) == set(), "give these a case above"
    assert cases - public == set(), "these cases name no public async callable"
    assert set(NOT_MEASURED) <= public, "stale NOT_MEASURED entries"
    assert not set(NOT_MEASURED) & cases


def test_the_enumeration_sees_what_it_should() -> None:
    # Guards the enumeration itself: an async method, an async dunder, an inherited method,
    # an async context manager and a module-level async function are all found.
    public = public_async_callables()
    for name in (
        "trio_agents.Agent.wait_idle",
        "trio_agents.AgentHandle.__aexit__",
        "trio_agents.Runtime.open_child",
        "trio_agents.ShellExecutor.running",
        "trio_agents.open_runtime",
        "trio_agents.acp.serve_stdio",
    ):
        assert name in public, name
    assert "trio_agents.Agent.send" not in public  # synchronous
