"""A model that needs no network: it echoes, and runs commands you spell out through the bash
tools. It says plainly what it is, so nobody mistakes it for a language model.

Prompts it understands (anything else is echoed back):

    !COMMAND          run COMMAND with `bash` and report its output
    !&COMMAND         start COMMAND as a background job (`bash` with run_in_background)
    /output JOB       read a background job's new output (`bash_output`)
    /kill JOB         stop a background job (`bash_kill`)
    /tool NAME JSON   call the tool NAME (an MCP server's, say) with the JSON object's
                      arguments (`{}` when JSON is left out)
    /tools            list the tools this agent has
    /system           show the system prompt the request carries
    /hold             start answering, then wait until the turn is cancelled
    /loop             call `bash true` forever (until the agent's max_steps ends the turn)
    /fail             fail the model call (the turn ends with an error)

It decides from the last user message of the request, so it is deterministic: the front ends
(`trio-agents acp`, `trio-agents chat`) and their tests use it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import trio

from ._seam import Finish, ModelChunk, ModelRequest, TextDelta, ToolCall

__all__ = ["COMMANDS", "OfflineModel"]

# The slash commands above, as (name, description, input hint): what `trio-agents acp`
# advertises to the editor (`available_commands_update`) for a session on this model.
COMMANDS: tuple[tuple[str, str, str | None], ...] = (
    ("output", "read a background job's new output", "job id, e.g. bash-1"),
    ("kill", "stop a background job", "job id, e.g. bash-1"),
    ("tool", "call a tool by name with JSON arguments", 'NAME {"arg": "value"}'),
    ("tools", "list the tools this agent has", None),
    ("system", "show the system prompt this session's requests carry", None),
    ("hold", "start answering, then wait until the turn is cancelled", None),
    ("loop", "call `bash true` until the turn's max_steps ends it", None),
    ("fail", "fail the model call (the turn ends with an error)", None),
)

INTRO = "[offline model: no language model is configured; I echo, and run !commands] "


class OfflineModel:
    """The built-in model for when no endpoint is configured."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Answer the last prompt as `Model.stream` describes: echo it, or call the bash
        tools for `!command`, `!&command`, `/output JOB` and `/kill JOB`. Needs no network.
        Always a checkpoint (`/loop` and `/hold` wait until the turn is cancelled)."""
        prompt, answers = _last_prompt_and_tool_results(request)
        # Numbered after the calls in the history, so a reloaded session goes on counting;
        # counted only for a prompt that may call a tool, so that an echo reads only the
        # request's tail and costs the same at any length of history.
        commands = prompt.startswith(("!", "/"))
        number = 1 + sum(len(m.tool_calls) for m in request.messages) if commands else 0
        if prompt == "/loop":
            await trio.lowlevel.checkpoint()
            yield _call(number, "bash", {"command": "true", "description": "loop once more"})
            yield Finish("tool_calls")
            return
        if answers:
            # Its call was answered: report the result (context that arrived since, such
            # as a job-done notice, does not make it call again).
            await trio.lowlevel.checkpoint()
            for chunk in _pieces(f"tool said:\n{answers[-1]}"):
                yield TextDelta(chunk)
            yield Finish("stop")
            return
        if prompt == "/system":
            await trio.lowlevel.checkpoint()
            for chunk in _pieces(_system_prompt(request)):
                yield TextDelta(chunk)
            yield Finish("stop")
            return
        if prompt == "/tools" or prompt.startswith("/tool "):
            await trio.lowlevel.checkpoint()
            named = _tool_command(number, prompt, request)
            if isinstance(named, ToolCall):
                yield named
                yield Finish("tool_calls")
                return
            for chunk in _pieces(named):
                yield TextDelta(chunk)
            yield Finish("stop")
            return
        call = _command(number, prompt)
        if call is not None:
            await trio.lowlevel.checkpoint()
            yield call
            yield Finish("tool_calls")
            return
        if prompt == "/fail":
            await trio.lowlevel.checkpoint()
            raise RuntimeError("the offline model was asked to fail (/fail)")
        if prompt == "/hold":
            yield TextDelta("holding until you cancel...")
            await trio.sleep_forever()
        # The whole reply is at hand at once, as when one network read holds several
        # events: its pieces go out without a checkpoint between them.
        await trio.lowlevel.checkpoint()
        for chunk in _pieces(f"{INTRO}echo: {prompt}"):
            yield TextDelta(chunk)
        yield Finish("stop")


def _command(number: int, prompt: str) -> ToolCall | None:
    if prompt.startswith("!&") and prompt[2:].strip():
        arguments = {"command": prompt[2:].strip(), "description": "start a background job"}
        return _call(number, "bash", {**arguments, "run_in_background": True})
    if prompt.startswith("!") and prompt[1:].strip():
        return _call(number, "bash", {"command": prompt[1:].strip(), "description": "run it"})
    for verb, tool in (("/output ", "bash_output"), ("/kill ", "bash_kill")):
        if prompt.startswith(verb) and prompt[len(verb) :].strip():
            return _call(number, tool, {"job_id": prompt[len(verb) :].strip()})
    return None


def _system_prompt(request: ModelRequest) -> str:
    """`/system`: the request's leading system message, as sent, or a line saying none."""
    if request.messages and request.messages[0].role == "system":
        return "system prompt:\n" + request.messages[0].content
    return "(no system prompt)"


def _tool_command(number: int, prompt: str, request: ModelRequest) -> ToolCall | str:
    """`/tools`: the names of the request's tools; `/tool NAME JSON`: a call of NAME, or a
    sentence saying why not (no such tool, arguments that are not a JSON object)."""
    names = [spec.name for spec in request.tools]
    if prompt == "/tools":
        return "tools: " + (", ".join(names) if names else "(none)")
    name, _, raw = prompt[len("/tool ") :].strip().partition(" ")
    if name not in names:
        return f"no tool is named {name!r}; the tools are: {', '.join(names) or '(none)'}"
    try:
        arguments: object = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return f"/tool {name}: the arguments are not JSON ({exc.msg}); give an object"
    if not isinstance(arguments, dict):
        return f"/tool {name}: the arguments must be a JSON object, got {raw.strip()}"
    return _call(number, name, arguments)  # pyright: ignore[reportUnknownArgumentType]


def _call(number: int, name: str, arguments: Mapping[str, Any]) -> ToolCall:
    return ToolCall(f"offline-{number}", name, dict(arguments))


def _last_prompt_and_tool_results(request: ModelRequest) -> tuple[str, list[str]]:
    """The last prompt (or steering) and the tool results that came after it."""
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role == "tool":
            results.append(message.content)
        elif message.role == "user" and message.source in (None, "prompt", "steering"):
            return message.content.strip(), results[::-1]
    return "", results[::-1]


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
