"""openai-agents, checked by the conformance suite: an adapter on the observer API.

    trio-agents conformance --target examples.openai_agents_adapter:factory

A turn is one `Runner.run` over the agent's session (the framework keeps the history), with
`max_turns` as the step limit; the model is a custom `Model` streaming from the suite's model,
the tool a `FunctionTool`, a cancel the run's task cancel (what `Runner.run` offers). It has
no steering or injection into a run: declared absent. Needs `pip install 'trio-agents[peers]'`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from agents import Agent, FunctionTool, MaxTurnsExceeded, RunConfig, Runner, SessionABC
from agents.items import ModelResponse
from agents.models.interface import Model as AgentsModel
from agents.tool_context import ToolContext as AgentsToolContext
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall as FunctionCall
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import agent_conformance as ta
from trio_agents import AgentOptions, Message, Model, Tool, ToolCall


def as_messages(items: str | Sequence[Mapping[str, Any]]) -> list[Message]:
    """openai-agents' input items as the suite's model sees a request."""
    out: list[Message] = []
    user: Mapping[str, Any] = {"role": "user", "content": items}
    for item in [user] if isinstance(items, str) else items:
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            call = ToolCall(item["call_id"], item["name"], json.loads(item["arguments"] or "{}"))
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = Message("assistant", last.content, (*last.tool_calls, call))
            else:
                out.append(Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            out.append(Message("tool", str(item["output"]), call_id=item["call_id"]))
        elif role == "assistant":
            parts: Sequence[Mapping[str, Any]] = item["content"]
            out.append(Message("assistant", "".join(p.get("text", "") for p in parts)))
        elif role in ("user", "system"):
            out.append(Message("system" if role == "system" else "user", str(item["content"])))
    return out


class MemorySession(SessionABC):
    """A session in memory: `SQLiteSession` works in threads, which the suite forbids."""

    def __init__(self, session_id: str) -> None:
        self.session_id, self.items = session_id, list[Any]()

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return self.items[-limit:] if limit else list(self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


class ScriptedAgentsModel(AgentsModel):
    """An openai-agents `Model` whose every response streams from the suite's model."""

    def __init__(self, adapter: OpenAIAgentsAgent) -> None:
        self.adapter = adapter

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        adapter = self.adapter
        await adapter.next_step()
        text, calls = await adapter.stream_reply(as_messages(kwargs["input"]))
        output: list[Any] = [
            FunctionCall(
                id=f"fc-{c.call_id}", call_id=c.call_id, type="function_call", name=c.name,
                arguments=json.dumps(dict(c.arguments)),
            )
            for c in calls
        ]  # fmt: skip
        if text:
            part = ResponseOutputText(text=text, type="output_text", annotations=[])
            output.insert(0, ResponseOutputMessage(
                id=f"msg-{adapter.steps}", type="message", role="assistant",
                status="completed", content=[part],
            ))  # fmt: skip
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError  # the adapter runs Runner.run


class OpenAIAgentsAgent(ta.PeerAgent):
    """The `ObservedAgent` over an openai-agents `Agent` and its session."""

    def __init__(self, peer: ta.AsyncioPeer, observer: ta.AgentObserver, options: Any) -> None:
        super().__init__(peer, observer, options)
        tools: list[Any] = [self._tool(tool) for tool in peer.tools.values()]
        self.agent = Agent(name="adapted", model=ScriptedAgentsModel(self), tools=tools)
        self.session = MemorySession(observer.agent_id)
        self.config = RunConfig(tracing_disabled=True)

    def _tool(self, tool: ta.AsyncioTool) -> FunctionTool:
        async def call(ctx: AgentsToolContext[Any], arguments: str) -> str:
            return await self.call_tool(tool.name, ctx.tool_call_id, json.loads(arguments or "{}"))

        return FunctionTool(
            name=tool.name, description=tool.description, on_invoke_tool=call,
            params_json_schema=dict(tool.parameters), strict_json_schema=False,
        )  # fmt: skip

    async def run_turn(self, prompt: str) -> Mapping[str, Any] | None:
        limit = self.options.max_steps or 10**6
        try:
            await Runner.run(self.agent, prompt, session=self.session, run_config=self.config,
                             max_turns=limit)  # fmt: skip
        except MaxTurnsExceeded:
            return {"kind": "max_steps"}
        return None


@asynccontextmanager
async def open_adapter(
    model: Model, tools: Sequence[Tool], observer: ta.AgentObserver, options: AgentOptions
) -> AsyncGenerator[OpenAIAgentsAgent, None]:
    """The adapter's factory: an openai-agents agent on a trio-asyncio loop."""
    async with ta.open_asyncio_peer(model, tools) as peer:
        agent = OpenAIAgentsAgent(peer, observer, options)
        agent.open()
        try:
            yield agent
        finally:
            await agent.aclose()


factory = ta.observed(open_adapter)
"""What `--target examples.openai_agents_adapter:factory` names."""
# No steering or injection into a run, and no partial reply kept: not checked (D95). The
# adapter hands the framework a reply's text and calls, not its finish reason: a reply cut
# at the token limit looks whole to it, not checked (D421).
factory.conformance_features = ta.Features(  # type: ignore[attr-defined]
    steer=False,
    inject=False,
    system_context=False,
    partial_replies=False,
    step_timeout=False,
    length_cut=False,
)
