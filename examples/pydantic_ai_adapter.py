"""pydantic-ai, checked by the conformance suite: an adapter on the observer API.

    trio-agents conformance --target examples.pydantic_ai_adapter:factory

A turn is one or more `Agent.iter` runs, stepped node by node: the adapter claims steering
and context into each model request node's parts, and the model is a `FunctionModel` that
streams from the suite's scripted model. History is what pydantic-ai keeps (`all_messages()`,
also of a cancelled run); a cancel is pydantic-ai's own primitive, cancelling the run's task.
Needs `pip install 'trio-agents[peers]'`; see docs/conformance.md, "Other frameworks".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, ModelResponse
from pydantic_ai.messages import SystemPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.messages import UserPromptPart as UserPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool as PydanticTool

from trio_agents import AgentOptions, Message, Model, Tool, ToolCall, ToolContext, ToolSpec
from trio_agents import ModelRequest as TrioRequest
from trio_agents._model import Finish, TextDelta
from trio_agents.testing import AgentObserver, Features, observed
from trio_agents.testing._asyncio import AsyncioPeer, AsyncioTool, Claim, PeerAgent
from trio_agents.testing._asyncio import open_asyncio_peer as open_peer


def as_messages(history: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai's history as the suite's model sees a request."""
    out: list[Message] = []
    for message in history:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = tuple(
                ToolCall(p.tool_call_id, p.tool_name, p.args_as_dict())
                for p in message.parts
                if isinstance(p, ToolCallPart)
            )
            out.append(Message("assistant", text, calls))
            continue
        for part in message.parts:
            if isinstance(part, UserPart):
                out.append(Message("user", str(part.content)))
            elif isinstance(part, SystemPromptPart):
                out.append(Message("system", part.content))
            elif isinstance(part, ToolReturnPart):
                out.append(Message("tool", part.model_response_str(), call_id=part.tool_call_id))
    return out


def as_part(claim: Claim) -> ModelRequestPart:
    _, _, content, role = claim
    return SystemPromptPart(content) if role == "system" else UserPart(content)


class PydanticAiAgent(PeerAgent):
    """The `ObservedAgent` over a pydantic-ai `Agent`."""

    def __init__(self, peer: AsyncioPeer, observer: AgentObserver, options: AgentOptions) -> None:
        super().__init__(peer, observer, options)
        self.history: list[ModelMessage] = []
        self.specs = [ToolSpec(t.name, t.description, t.parameters) for t in peer.tools.values()]
        tools = [self._tool(tool) for tool in peer.tools.values()]
        self.agent = Agent(FunctionModel(self._respond), name="adapted", tools=tools)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = TrioRequest(as_messages(messages), self.specs, self.options)
        text: list[str] = []
        calls: list[ToolCall] = []
        finish: Any = "stop"
        async for chunk in self.peer.model.stream(request):
            if isinstance(chunk, TextDelta):
                text.append(chunk.text)
                self.observer.text_streamed(chunk.text)
            elif isinstance(chunk, ToolCall):
                calls.append(chunk)
            elif isinstance(chunk, Finish):
                finish = chunk.reason
                break
        self.reply_ended(finish)
        parts: list[TextPart | ToolCallPart] = [TextPart("".join(text))] if text else []
        parts += [ToolCallPart(c.name, dict(c.arguments), c.call_id) for c in calls]
        return ModelResponse(parts)

    def _tool(self, tool: AsyncioTool) -> PydanticTool[None]:
        async def call(ctx: RunContext[None], **arguments: Any) -> str:
            call_id = ctx.tool_call_id or ""
            self.tool_called(call_id, tool.name, arguments)
            context = ToolContext(self.observer.agent_id, call_id, self.turn, self.steps)
            result = await tool(arguments, context)
            self.tool_answered(call_id, result)
            return result.content

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
                        if Agent.is_model_request_node(node) and not begun:
                            self.end_step()  # the previous step's tools have answered
                            if self.at_limit():
                                return {"kind": "max_steps"}
                            await asyncio.sleep(0)  # where a StepEnded listener's cancel lands
                            claims = map(as_part, self.begin_step())
                            node.request.parts = [*node.request.parts, *claims]
                            await asyncio.sleep(0)  # ... and a StepStarted listener's
                        begun = False
                        node = await run.next(node)
                finally:
                    self.history = run.all_messages()
            self.end_step()
            if not self.steering_waits():
                return None
            if self.at_limit():
                return {"kind": "max_steps"}
            # Steering arrived during the final answer: one more step, in a new run.
            self.history = [*self.history, ModelRequest(list(map(as_part, self.begin_step())))]
            user, begun = None, True

    def at_limit(self) -> bool:
        limit = self.options.max_steps
        return limit is not None and self.steps >= limit


@asynccontextmanager
async def open_adapter(
    model: Model, tools: Sequence[Tool], observer: AgentObserver, options: AgentOptions
) -> AsyncGenerator[PydanticAiAgent, None]:
    """The adapter's factory: a pydantic-ai agent on a trio-asyncio loop, for its lifetime."""
    async with open_peer(model, tools) as peer:
        agent = PydanticAiAgent(peer, observer, options)
        agent.open()
        try:
            yield agent
        finally:
            await agent.aclose()


factory = observed(open_adapter)
"""What `--target examples.pydantic_ai_adapter:factory` names."""
# pydantic-ai keeps no partial reply, and sends a system part mid-history as a user
# `<system>` block (pydantic_ai/framing.py): design differences, not checked (D95).
factory.conformance_features = Features(partial_replies=False, system_context=False)  # type: ignore[attr-defined]
