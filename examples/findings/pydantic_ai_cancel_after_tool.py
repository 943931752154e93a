"""pydantic-ai alone: a cancel at the step boundary right after a tool completed drops that
tool's result from history.

    python examples/findings/pydantic_ai_cancel_after_tool.py

The run is cancelled (its task, pydantic-ai's own primitive) between the tool call's end and
the next model request. The snapshot it leaves ends with the tool call and no result, so the
next prompt fails with `UserError: ... unprocessed tool calls`; resuming without a prompt, as
that error suggests, runs the tool a second time. Prints what it saw; exits 1 if the loss is
gone (the finding no longer holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse([TextPart("done")])
    return ModelResponse([ToolCallPart("work", {}, "call-1")])


agent = Agent(FunctionModel(respond), name="finding")
runs = 0


@agent.tool_plain
async def work() -> str:
    """Does the work."""
    global runs
    runs += 1
    return "worked"


async def main() -> int:
    history: list[ModelMessage] = []

    async def cancelled_run() -> None:
        async with agent.iter("go") as run:
            async for node in run:
                history[:] = run.all_messages()
                if Agent.is_model_request_node(node) and runs == 1:
                    # The tool has returned; the next request would carry its result.
                    asyncio.current_task().cancel()  # type: ignore[union-attr]
                    await asyncio.sleep(0)

    task = asyncio.create_task(cancelled_run())
    with contextlib.suppress(asyncio.CancelledError):
        await task
    kinds = [type(p).__name__ for m in history for p in m.parts]
    print(f"after the cancel: tool ran {runs} time(s); history parts: {kinds}")
    lost = "ToolReturnPart" not in kinds and "ToolCallPart" in kinds
    try:
        await agent.run("next", message_history=history)
        print("the next prompt ran")
    except UserError as exc:
        print(f"the next prompt: UserError: {exc}")
    await agent.run(None, message_history=history)
    print(f"resumed without a prompt: the tool ran {runs} time(s)")
    return 0 if lost and runs == 2 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
