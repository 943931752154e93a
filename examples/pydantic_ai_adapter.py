"""pydantic-ai, checked by the conformance suite: an adapter on the observer API.

    trio-agents conformance --target examples.pydantic_ai_adapter:factory

A turn is one or more `Agent.iter` runs, stepped node by node: the adapter claims steering
and context into each model request node's parts, and the model is a `FunctionModel` that
streams from the suite's scripted model. History is what pydantic-ai keeps (`all_messages()`,
also of a cancelled run); a cancel is pydantic-ai's own primitive, cancelling the run's task.
Needs `pip install 'trio-agents[peers]'`; see docs/conformance.md, "Other frameworks".
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool as PydanticTool

import agent_conformance as ta
from trio_agents import AgentOptions, Message, Model, Tool, ToolCall


def as_messages(history: Sequence[pm.ModelMessage]) -> list[Message]:
    """pydantic-ai's history as the suite's model sees a request."""
    out: list[Message] = []
    for message in history:
        if isinstance(message, pm.ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, pm.TextPart))
            calls = tuple(
                ToolCall(p.tool_call_id, p.tool_name, p.args_as_dict())
                for p in message.parts
                if isinstance(p, pm.ToolCallPart)
            )
            out.append(Message("assistant", text, calls))
            continue
        for part in message.parts:
            if isinstance(part, pm.UserPromptPart):
                out.append(Message("user", str(part.content)))
            elif isinstance(part, pm.SystemPromptPart):
                out.append(Message("system", part.content))
            elif isinstance(part, pm.ToolReturnPart):
                out.append(Message("tool", part.model_response_str(), call_id=part.tool_call_id))
    return out


def as_part(claim: tuple[str, str, str, str]) -> pm.ModelRequestPart:
    _, _, content, role = claim
    return pm.SystemPromptPart(content) if role == "system" else pm.UserPromptPart(content)


class PydanticAiAgent(ta.PeerAgent):
    """The `ObservedAgent` over a pydantic-ai `Agent`."""

    interrupted_content = "The tool call was interrupted before a result was produced."

    def __init__(self, peer: ta.AsyncioPeer, observer: ta.AgentObserver, options: Any) -> None:
        super().__init__(peer, observer, options)
        self.history: list[pm.ModelMessage] = []
        tools = [self._tool(tool) for tool in peer.tools.values()]
        self.agent = Agent(
            FunctionModel(self._respond), name="adapted", tools=tools, deps_type=None
        )

    async def _respond(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        text, calls = await self.stream_reply(as_messages(messages))
        parts: list[pm.TextPart | pm.ToolCallPart] = [pm.TextPart(text)] if text else []
        parts += [pm.ToolCallPart(c.name, dict(c.arguments), c.call_id) for c in calls]
        return pm.ModelResponse(parts)

    def _tool(self, tool: ta.AsyncioTool) -> PydanticTool[None]:
        async def call(ctx: RunContext[None], **arguments: Any) -> str:
            return await self.call_tool(tool.name, ctx.tool_call_id or "", arguments)

        schema = dict(tool.parameters)
        return PydanticTool.from_schema(call, tool.name, tool.description, schema, takes_ctx=True)

    async def run_turn(self, prompt: str) -> Mapping[str, Any] | None:
        user: str | None = prompt
        begun = False  # the next request's step has begun (its claims are in it)
        while True:
            async with self.agent.iter(user, message_history=self.history) as run:
                try:
                    node = run.next_node
                    while not Agent.is_end_node(node):
                        if Agent.is_model_request_node(node) and begun:
                            begun = False
                        elif Agent.is_model_request_node(node):
                            if self.at_limit():  # the previous step's tools have answered
                                self.end_step()
                                return {"kind": "max_steps"}
                            claims = map(as_part, await self.next_step())
                            node.request.parts = [*node.request.parts, *claims]
                        node = await run.next(node)
                finally:
                    self.history = run.all_messages()
            self.end_step()
            if not self.steering_waits():
                return None
            if self.at_limit():
                return {"kind": "max_steps"}
            # Steering arrived during the final answer: one more step, in a new run.
            self.history = [*self.history, pm.ModelRequest(list(map(as_part, self.begin_step())))]
            user, begun = None, True

    def at_limit(self) -> bool:
        limit = self.options.max_steps
        return limit is not None and self.steps >= limit


@asynccontextmanager
async def open_adapter(
    model: Model, tools: Sequence[Tool], observer: ta.AgentObserver, options: AgentOptions
) -> AsyncGenerator[PydanticAiAgent, None]:
    """The adapter's factory: a pydantic-ai agent on a trio-asyncio loop, for its lifetime."""
    async with ta.open_asyncio_peer(model, tools) as peer:
        agent = PydanticAiAgent(peer, observer, options)
        agent.open()
        try:
            yield agent
        finally:
            await agent.aclose()


factory = ta.observed(open_adapter)
"""What `--target examples.pydantic_ai_adapter:factory` names."""
# pydantic-ai keeps no partial reply, and sends a system part mid-history as a user
# `<system>` block (pydantic_ai/framing.py): design differences, not checked (D95). This
# adapter hands pydantic-ai a reply's text and calls, not its finish reason, so a reply cut
# at the token limit looks whole to it (pydantic-ai itself raises IncompleteToolCall for
# one): not checked (D421).
declared = ta.Features(
    partial_replies=False, system_context=False, step_timeout=False, length_cut=False
)
factory.conformance_features = declared  # type: ignore[attr-defined]
