"""A plugin: a notes file and an agent that writes to it, owned by the plugin's fiber.

    python examples/plugin.py

`rt.load(Notes(...))` applies it in a fiber of its own: the open file, the agent and its tool
belong to that fiber, so `rt.reload` (or leaving `open_runtime`) closes the agent, then the
file, in that order, and applying it again resumes the same session. The model is scripted,
so this runs offline; any `Model` (e.g. `OpenAICompatibleModel.from_env()`) fits instead.
"""

from __future__ import annotations

import pathlib
import tempfile
from typing import IO

import trio

from trio_agents import AgentHandle, Fiber, FunctionTool, function_tool, open_runtime
from trio_agents.testing import ScriptedModel, reply, tool_step

SESSION = "notes-keeper"


class Notes:
    """Give an agent a `note` tool that appends to `path`; the file is open while loaded."""

    def __init__(self, path: pathlib.Path, model: ScriptedModel) -> None:
        self.path = path
        self.model = model
        self.handle: AgentHandle | None = None

    async def apply(self, fiber: Fiber) -> None:
        file: IO[str] = self.path.open("a", encoding="utf-8")
        fiber.callback(file.close)  # registered first, so it runs last: after the agent

        @function_tool
        def note(text: str) -> str:
            """Write one line to the notes file."""
            file.write(text + "\n")
            file.flush()
            return "noted"

        tools: list[FunctionTool] = [note]
        if await fiber.runtime.sessions.exists(SESSION):  # applied again: go on where it was
            self.handle = await fiber.agents.resume(SESSION, model=self.model, tools=tools)
        else:
            self.handle = await fiber.agents.create(
                model=self.model, tools=tools, session_id=SESSION
            )


async def main() -> None:
    folder = pathlib.Path(tempfile.mkdtemp())
    model = ScriptedModel(
        [
            tool_step(("note", {"text": "buy milk"})),
            reply("Noted: buy milk."),
            tool_step(("note", {"text": "call Ada"})),
            reply("Noted: call Ada."),
        ]
    )
    notes = Notes(folder / "notes.txt", model)
    async with open_runtime(folder / "sessions.sqlite3") as rt:
        await rt.load(notes)
        assert notes.handle is not None
        notes.handle.agent.send("Remember to buy milk.")
        await notes.handle.agent.wait_idle()

        await rt.reload(notes)  # the agent closed, the file closed, then applied again
        assert notes.handle is not None
        notes.handle.agent.send("And to call Ada.")
        await notes.handle.agent.wait_idle()
        turns = sum(r.type == "turn/end" for r in notes.handle.agent.session.records)
    print("notes file:", (folder / "notes.txt").read_text().splitlines())
    print("turns in the resumed session:", turns)


if __name__ == "__main__":
    trio.run(main)
