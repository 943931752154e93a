"""Print an agent's spans: one turn that calls a tool, traced with `AgentTracer` and written
to standard output by the OpenTelemetry SDK's console exporter. Offline: a scripted model.

    pip install 'trio-agents[tracing]'
    python examples/tracing.py
"""

from __future__ import annotations

import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from trio_agents import AgentTracer, ToolCall, open_agent
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step


async def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    tracer = AgentTracer(provider, agent_name="coder", request_model="scripted")
    model = ScriptedModel([tool_step(ToolCall("c1", "echo", {"text": "hi"})), reply("done")])
    async with open_agent(model, tools=[EchoTool()]) as agent:
        stop = tracer.attach(agent)
        agent.send("say hi through the echo tool")
        await agent.wait_idle()
    stop()  # the turn's spans ended with it; this ends any still open
    provider.shutdown()


if __name__ == "__main__":
    trio.run(main)
