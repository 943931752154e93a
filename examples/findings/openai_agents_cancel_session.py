"""openai-agents alone: a cancelled `Runner.run` keeps only the user message in its session,
so a tool call that completed before the cancel disappears.

    python examples/findings/openai_agents_cancel_session.py

The model asks for two tool calls in one step; the first completes, the second is held, and
the run's task is cancelled there (asyncio's own primitive; `Runner.run` has no other). The
session then holds the prompt alone: the next run's model request never learns the first
tool ran. Prints what it saw; exits 1 if the loss is gone (the finding no longer holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner, SQLiteSession
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall

finished: list[str] = []
quick_done = asyncio.Event()


class TwoCalls(Model):
    """Every step asks for the tool twice."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        calls = [
            ResponseFunctionToolCall(
                id=f"fc-{k}", call_id=f"call-{k}", type="function_call", name="work",
                arguments=f'{{"which": "{k}"}}',
            )
            for k in ("quick", "slow")
        ]  # fmt: skip
        return ModelResponse(output=list(calls), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def work(_context: Any, arguments: str) -> str:
    if "slow" in arguments:
        await asyncio.Event().wait()  # held until the cancel
    finished.append(arguments)
    quick_done.set()
    return "worked"


tool = FunctionTool(
    name="work",
    description="Does the work.",
    params_json_schema={"type": "object", "properties": {"which": {"type": "string"}}},
    on_invoke_tool=work,
    strict_json_schema=False,
)


async def main() -> int:
    agent = Agent(name="finding", model=TwoCalls(), tools=[tool])
    session = SQLiteSession("finding")
    config = RunConfig(tracing_disabled=True)
    task = asyncio.create_task(Runner.run(agent, "go", session=session, run_config=config))
    await quick_done.wait()  # the quick call has completed; the slow one is held
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    items: list[Any] = list(await session.get_items())
    kinds = [item.get("type", item.get("role")) for item in items]
    print(f"after the cancel: {len(finished)} tool call(s) completed; the session holds {kinds}")
    return 0 if finished and kinds == ["user"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
