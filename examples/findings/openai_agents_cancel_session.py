"""openai-agents alone: a cancelled `Runner.run` keeps only the user message in its session,
so a tool call that completed before the cancel disappears.

    python examples/findings/openai_agents_cancel_session.py

Step 1 calls a tool, which completes; step 2's model call is held and the run's task is
cancelled there (asyncio's own primitive; `Runner.run` has no other). The session then holds
the prompt alone, and the next run's model request never learns the tool ran. Prints what it
saw; exits 1 if the loss is gone (the finding no longer holds).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner, SQLiteSession
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses import ResponseOutputText

held = asyncio.Event()
inputs: list[Any] = []
runs = 0
STREAMED = len(sys.argv) > 1


class Scripted(Model):
    """Step 1 calls the tool; every later call waits on `held` (never set) once the tool ran."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        inputs.append(kwargs["input"])
        if runs == 0:
            call = ResponseFunctionToolCall(
                id="fc1", call_id="call-1", type="function_call", name="work", arguments="{}"
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        if len(inputs) == 2:
            await asyncio.Event().wait()
        text = ResponseOutputText(text="ok", type="output_text", annotations=[], logprobs=[])
        message = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def work(_context: Any, _arguments: str) -> str:
    global runs
    runs += 1
    return "worked"


tool = FunctionTool(
    name="work",
    description="Does the work.",
    params_json_schema={"type": "object", "properties": {}, "additionalProperties": False},
    on_invoke_tool=work,
)


async def main() -> int:
    agent = Agent(name="finding", model=Scripted(), tools=[tool])
    session = SQLiteSession("finding")
    config = RunConfig(tracing_disabled=True)
    if STREAMED:
        result = Runner.run_streamed(agent, "go", session=session, run_config=config)
        async for _event in result.stream_events():
            if len(inputs) == 2:
                result.cancel()
    else:
        task = asyncio.create_task(Runner.run(agent, "go", session=session, run_config=config))
        while len(inputs) < 2 and not task.done():
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    items = await session.get_items()
    kinds = [item.get("type", item.get("role")) for item in items]  # type: ignore[union-attr]
    print(f"after the cancel: the tool ran {runs} time(s); the session holds {kinds}")
    await Runner.run(agent, "next", session=session, run_config=config, max_turns=1)
    print(f"the next run's model request: {inputs[-1]}")
    lost = runs == 1 and not any(k in ("function_call", "function_call_output") for k in kinds)
    return 0 if lost else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
