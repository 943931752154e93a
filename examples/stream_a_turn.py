"""Follow a turn as it happens, then read its result. Offline: a scripted model plays a
two-step turn (a tool call, then an answer), so this runs without any endpoint.

    python examples/stream_a_turn.py

Swap the scripted model for `OpenAICompatibleModel(...)` to stream a real model's turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from trio_agents import (
    Finish,
    TextDelta,
    ToolCall,
    ToolContext,
    TurnEnd,
    TurnStepEnd,
    TurnText,
    TurnToolCall,
    TurnToolResult,
    Usage,
    open_agent,
)
from trio_agents.testing import ScriptedModel, ScriptedStep


class WordCount:
    """A tool: counts the words of `text`."""

    name = "word_count"
    description = "Counts the words of a text."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return str(len(str(arguments["text"]).split()))


# What a model would stream: step 1 asks for the tool, step 2 answers with its result.
MODEL = ScriptedModel(
    [
        ScriptedStep(
            (
                TextDelta("Let me count. "),
                ToolCall("call-1", "word_count", {"text": "the quick brown fox"}),
                Finish("tool_calls", Usage(input_tokens=20, output_tokens=8)),
            )
        ),
        ScriptedStep(
            (
                TextDelta("The text has "),
                TextDelta("4 words."),
                Finish("stop", Usage(input_tokens=35, output_tokens=6)),
            )
        ),
    ]
)


async def main() -> None:
    prompt = "How many words in 'the quick brown fox'?"
    async with open_agent(MODEL, tools=[WordCount()]) as agent, agent.stream(prompt) as turn:
        async for event in turn:
            match event:
                case TurnText(text=text):
                    print(text, end="", flush=True)
                case TurnToolCall(name=name, arguments=arguments):
                    print(f"\n[calling {name} with {dict(arguments)}]")
                case TurnToolResult(name=name, content=content):
                    print(f"[{name} answered {content!r}]")
                case TurnStepEnd(step=step):
                    print(f"\n[step {step} ended]")
                case TurnEnd(reason=reason):
                    print(f"[turn ended: {reason['kind']}]")
                case _:
                    pass
        result = await turn.result()
    print("final text:", result.text)
    print("tool calls:", [(call.name, call.content) for call in result.tool_calls])
    print("end:", result.end, "steps:", result.steps, "usage:", result.usage)


if __name__ == "__main__":
    trio.run(main)
