"""Tools from plain typed functions, used by an agent (docs/contract.md, "Tools from functions").

Runs offline: the offline model calls a tool when a prompt says `/tool NAME {json}`, as a
language model would decide to. Run it with `python examples/function_tool.py`.
"""

from __future__ import annotations

import time
from typing import Annotated

import trio
import trio.lowlevel

from trio_agents import OfflineModel, ToolContext, function_tool, open_agent


@function_tool
async def add(a: int, b: Annotated[int, "the number added to a"] = 1) -> int:
    """Add two integers.

    Args:
        a: the first number.
    """
    await trio.lowlevel.checkpoint()
    return a + b


@function_tool(name="wait_and_say")
def slow_echo(text: str, seconds: float, context: ToolContext) -> str:
    """Wait (blocking: it runs in a worker thread), then say `text` back.

    Args:
        text: what to say.
        seconds: how long to wait first.
    """
    time.sleep(seconds)
    return f"{text} (call {context.call_id} of turn {context.turn})"


async def main() -> None:
    async with open_agent(OfflineModel(), tools=[add, slow_echo]) as agent:
        for prompt in (
            '/tool add {"a": 2, "b": 40}',
            '/tool add {"a": "two"}',
            '/tool wait_and_say {"text": "hello", "seconds": 0.01}',
        ):
            agent.send(prompt)
            await agent.wait_idle()
            result = [r.data for r in agent.session.records if r.type == "tool/result"][-1]
            marker = "error" if result["is_error"] else "ok"
            print(f"{prompt}\n  -> {marker}: {result['content']}")
    print("the schema the model sees for add:", add.parameters)


if __name__ == "__main__":
    trio.run(main)
