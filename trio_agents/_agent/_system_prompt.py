"""The system prompt a coding agent starts from: where it is, on what, and what its tools are for.

`trio-agents chat` and `trio-agents acp` send `coding_system_prompt(cwd, tools)` unless told
otherwise (`--system-prompt`, `--system-prompt-file`, or `system_prompt=` in code). Without it
a real model is not told its working directory, so it guesses paths, nor that its commands run
through a tool, so it describes commands instead of running them.
"""

from __future__ import annotations

import dataclasses
import os
import platform as _platform
from collections.abc import Callable, Sequence

from .._tool._seam import Tool
from ._options import AgentOptions

__all__ = ["SystemPrompt", "coding_system_prompt", "with_system_prompt"]

SystemPrompt = str | Callable[[str, Sequence[Tool]], str] | None
"""What a front end sends as the system prompt: a text, a function of the session's working
directory and tools that makes one, or None (no system prompt). An empty text is none."""

# A tool line names the tool and says what it is for: the description's first sentence is
# enough, since the full description goes with every request's tool list.
_TOOL_LINE_LIMIT = 160

_GUIDANCE = """\
How to work:
- Look before you change: read the files and run the commands that tell you how the project \
is built and tested before you edit it.
- Act through the tools; never claim a change, a file's content or a command's result you \
have not made or seen.
- Keep to what was asked, and to the working directory unless told otherwise.
- When a command fails, read its output and fix the cause; do not repeat it unchanged.
- End with a short account of what you did and what you found."""

_BACKGROUND = (
    "- Long-running commands (servers, watchers, builds you do not wait for) go to the "
    "background with bash's run_in_background; read them with bash_output and stop them with "
    "bash_kill."
)

_FILES = (
    "- Read files with read and change them with edit (or write, for a new file or a whole "
    "rewrite), not with shell commands: the user sees those changes as diffs."
)


def coding_system_prompt(
    cwd: str | os.PathLike[str],
    tools: Sequence[Tool] = (),
    *,
    platform: str | None = None,
) -> str:
    """The default system prompt of a coding agent working in `cwd` with `tools`.

    It says the working directory (where relative paths and commands start), the platform
    (`platform`, default this machine's, e.g. "Linux 6.8.0 (x86_64)"), each tool by name with
    the first sentence of its description, and how to work: look before changing, act through
    the tools, stay in scope. Deterministic for the same arguments, so a model's prompt cache
    keeps it.
    """
    where = os.fspath(cwd)
    on = platform if platform is not None else _this_platform()
    lines = [
        "You are a coding agent: you work in a user's project through the tools below, and "
        "you answer the user in plain text.",
        "",
        f"Working directory: {where} (relative paths and commands start here).",
        f"Platform: {on}.",
    ]
    if tools:
        lines += ["", "Tools:"]
        lines += [f"- {tool.name}: {_purpose(tool.description)}" for tool in tools]
    else:
        lines += ["", "You have no tools in this session: answer from what you are told."]
    lines += ["", _GUIDANCE]
    names = {tool.name for tool in tools}
    if {"bash", "bash_output", "bash_kill"} <= names:
        lines.append(_BACKGROUND)
    if {"read", "edit", "write"} <= names:
        lines.append(_FILES)
    return "\n".join(lines) + "\n"


def with_system_prompt(
    options: AgentOptions | None,
    prompt: SystemPrompt,
    cwd: str,
    tools: Sequence[Tool],
) -> AgentOptions | None:
    """The options of one session's agent: `options` with its system prompt made from
    `prompt` for `cwd` and `tools`. A system prompt already set in `options` is kept (it is
    the caller's explicit choice); `prompt` None or "" leaves `options` as they are.

    Raises TypeError when a `prompt` function returns something other than a str.
    """
    if options is not None and options.system_prompt is not None:
        return options
    text = prompt(cwd, tools) if callable(prompt) else prompt
    if text is not None and not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"the system prompt function {prompt!r} returned {type(text).__name__}, not a str"
        )
    if not text:
        return options
    return dataclasses.replace(options or AgentOptions(), system_prompt=text)


def _purpose(description: str) -> str:
    text = " ".join(description.split())
    if not text:
        return "(no description)"
    end = text.find(". ")
    first = text if end < 0 else text[: end + 1]
    if len(first) > _TOOL_LINE_LIMIT:
        first = first[: _TOOL_LINE_LIMIT - 1].rstrip() + "…"
    return first


def _this_platform() -> str:
    system = _platform.system() or "an unknown system"
    release = _platform.release()
    machine = _platform.machine()
    text = f"{system} {release}".strip()
    return f"{text} ({machine})" if machine else text
