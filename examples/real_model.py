"""A coding agent on a real model: an OpenAI-compatible endpoint, the default system prompt,
a tool made from a function, and the turn streamed as it happens.

    export OPENAI_MODEL=gpt-4o-mini OPENAI_API_KEY=...   # or OPENAI_BASE_URL for a local one
    python examples/real_model.py "What is this project about?"

It reads files under the current directory only (the tool refuses any other path).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from trio_agents import (
    AgentOptions,
    OpenAICompatibleModel,
    TurnText,
    TurnToolCall,
    coding_system_prompt,
    function_tool,
    open_agent,
)


@function_tool
def read_file(path: str) -> str:
    """Read a UTF-8 text file of the project. `path` is relative to the working directory."""
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"{path!r} is outside the working directory; give a path inside it")
    return target.read_text(encoding="utf-8")


async def main(question: str) -> None:
    model = OpenAICompatibleModel.from_env()  # OPENAI_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY
    prompt = coding_system_prompt(os.getcwd(), [read_file])
    options = AgentOptions(system_prompt=prompt, max_steps=10)
    agent_cm = open_agent(model, tools=[read_file], options=options)
    async with agent_cm as agent, agent.stream(question) as turn:
        async for event in turn:
            if isinstance(event, TurnText):
                print(event.text, end="", flush=True)
            elif isinstance(event, TurnToolCall):
                print(f"\n[{event.name} {dict(event.arguments)}]", flush=True)
        result = await turn.result()
    end = result.end
    why = f": {end['message']}" if end["kind"] == "error" else ""
    print(f"\n[{end['kind']}{why}; {result.steps} steps; {result.usage}]")


if __name__ == "__main__":
    if not OpenAICompatibleModel.is_configured():
        sys.exit("set OPENAI_MODEL (and OPENAI_BASE_URL, OPENAI_API_KEY) to name a model first")
    trio.run(main, " ".join(sys.argv[1:]) or "What is this project about? Read README.md.")
