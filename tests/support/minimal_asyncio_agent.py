"""The minimal correct asyncio agent, driven through `PeerAgent` (issue 34, item 6).

No framework: `run_turn` is a plain asyncio loop over the peer's `AsyncioModel` and
`AsyncioTool`s (call the model, run the reply's tool calls concurrently, again until a reply
asks for none and no steering waits), keeping its own history the way a framework would and
building each request from it. Whatever the agent machine finds in it is `PeerAgent`'s doing.
It honours `max_steps`, steering, context (user and system) and partial replies; it has no
step timeout and no approval (declared). `run_program` drives the agent machine through a
shrunk program, for the peer tests that pin one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import agent_conformance as ac
from agent_conformance import AgentMachine, ContractViolation, RandomSeeder
from agent_conformance._machine import machine_for
from trio_agents import (
    AgentOptions,
    Finish,
    Message,
    Model,
    ModelRequest,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
)

INTERRUPTED = "the tool call was interrupted"
"""What the agent tells its model of a tool call a cancel or a close cut."""


class MinimalAgent(ac.PeerAgent):
    """A plain asyncio agent loop on `PeerAgent`.

    history: every message the model has been or will be sent, in order (a framework's own
    conversation memory).
    """

    interrupted_content = INTERRUPTED

    def __init__(self, peer: ac.AsyncioPeer, observer: ac.AgentObserver, options: Any) -> None:
        super().__init__(peer, observer, options)
        self.history: list[Message] = []
        self._streamed: list[str] | None = None  # the open reply's text; None once it ended
        self._unanswered: list[str] = []  # the open step's calls without a result, in order

    def message_taken(self, message: Message) -> None:
        """A prompt, steering or context became history: so it is in the agent's."""
        self.history.append(message)

    async def run_turn(self, prompt: str) -> Mapping[str, Any] | None:
        try:
            return await self._loop()
        except asyncio.CancelledError:
            # What the cut step leaves in history, as PeerAgent records it.
            if self._streamed:
                self.history.append(Message("assistant", "".join(self._streamed)))
            self.history += [Message("tool", INTERRUPTED, call_id=c) for c in self._unanswered]
            raise
        finally:
            self._streamed, self._unanswered = None, []

    async def _loop(self) -> Mapping[str, Any] | None:
        limit = self.options.max_steps
        while True:
            if limit is not None and self.steps >= limit:
                self.end_step()
                return {"kind": "max_steps"}
            await self.next_step()  # its claims are history already (message_taken)
            calls = await self._reply()
            if calls:
                await self._run_tools(calls)
            elif not self.steering_waits():
                self.end_step()
                return None

    async def _reply(self) -> list[ToolCall]:
        """One model call on the history so far; the tool calls to run."""
        tools = self.peer.tools.values()
        specs = [ToolSpec(t.name, t.description, t.parameters) for t in tools]
        system = self.options.system_prompt
        messages = (*([Message("system", system)] if system else []), *self.history)
        request = ModelRequest(messages, specs, self.options)
        self._streamed = []
        calls: list[ToolCall] = []
        finish: Any = None
        async for chunk in self.peer.model.stream(request):
            if isinstance(chunk, TextDelta):
                self._streamed.append(chunk.text)
                self.observer.text_streamed(chunk.text)
            elif isinstance(chunk, ToolCall):
                calls.append(chunk)
            elif isinstance(chunk, Finish):  # pyright: ignore[reportUnnecessaryIsInstance]
                finish = chunk.reason
                break
        text, self._streamed = "".join(self._streamed), None
        finish = finish or ("tool_calls" if calls else "stop")
        calls = [] if finish == "length" else calls  # a cut reply's calls never run
        self.reply_ended(finish)
        self.history.append(Message("assistant", text, tuple(calls)))
        for call in calls:
            self.tool_called(call.call_id, call.name, call.arguments)
        self._unanswered = [call.call_id for call in calls]
        return calls

    async def _run_tools(self, calls: Sequence[ToolCall]) -> None:
        """The step's tool calls, concurrently; each result is history as it comes."""
        async with asyncio.TaskGroup() as group:
            for call in calls:
                group.create_task(self._run_tool(call))

    async def _run_tool(self, call: ToolCall) -> None:
        tool = self.peer.tools.get(call.name)
        if tool is None:
            result = ToolResult(f"no tool named {call.name!r}", is_error=True)
        else:
            context = ToolContext(self.observer.agent_id, call.call_id, self.turn, self.steps)
            try:
                result = await tool(dict(call.arguments), context)
            except Exception as exc:
                result = ToolResult(f"{type(exc).__name__}: {exc}", is_error=True)
        self._unanswered.remove(call.call_id)
        self.history.append(Message("tool", result.content, call_id=call.call_id))
        self.tool_answered(call.call_id, result)


@asynccontextmanager
async def open_minimal(
    model: Model, tools: Sequence[Tool], observer: ac.AgentObserver, options: AgentOptions
) -> AsyncGenerator[MinimalAgent, None]:
    """The adapter's factory: the minimal agent on a trio-asyncio loop, for its lifetime."""
    async with ac.open_asyncio_peer(model, tools) as peer:
        agent = MinimalAgent(peer, observer, options)
        agent.open()
        try:
            yield agent
        finally:
            await agent.aclose()


FEATURES = ac.Features(step_timeout=False, approval=False)
"""All of the contract but a step timeout and approval, which this loop does not have."""

factory = ac.observed(open_minimal)
factory.conformance_features = FEATURES  # type: ignore[attr-defined]


def run_program(factory: object, *steps: str) -> ContractViolation | None:
    """Drive the agent machine through `steps` (rules, as a shrunk program prints them)."""
    state = machine_for(AgentMachine, factory)()  # type: ignore[arg-type]
    try:
        state.open_agent(max_steps=None, step_timeout=None, scheduler=RandomSeeder(0))
        state.check()
        for step in steps:
            name, _, args = step.partition("(")
            kwargs = eval(f"dict({args}")
            getattr(state, name)(**kwargs)
            state.check()
    except ContractViolation as violation:
        return violation
    finally:
        state.teardown()
    return None
