"""What `trio-agents chat` shows: an agent's records and streamed text as terminal lines.
Pure; no trio import.

Live, the assistant's text is shown as it streams and the user's prompt is not repeated (the
terminal echoed it as it was typed); a replay of a resumed session shows both from the
records. Tool calls are one line (`[bash] ls`), their results a few clipped lines under
`[ok]` or `[error]`, and a turn that did not complete says how it ended (`[cancelled]`,
`[error: ...]`, `[max steps]`). Control characters are made visible, so neither a model nor
a command's output can move the cursor or send escape sequences to the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from .._frozen import thaw
from .._store._records import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    decode_turn_end,
)

__all__ = [
    "PROMPT",
    "Renderer",
    "describe_call",
    "describe_command",
    "describe_end",
    "describe_result",
    "replay_summary",
]

PROMPT: Final = "> "
REPLAY_TURNS: Final = 3
RESULT_LINES: Final = 8
COMMAND_LINES: Final = 40
WIDTH: Final = 200


def _visible(text: str) -> str:
    """`text` with control characters (other than newline and tab) made visible, so neither
    the model nor a command's output can drive the terminal (escape sequences, `\\r`)."""
    out: list[str] = []
    for char in text.replace("\r\n", "\n"):
        code = ord(char)
        if char in "\n\t" or (32 <= code < 127) or code > 159:
            out.append(char)
        elif code < 32 or code == 127:
            out.append("^" + chr(code ^ 0x40))
        else:
            out.append(f"\\x{code:02x}")
    return "".join(out)


def _clip(line: str, width: int = WIDTH) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def _lines_of(text: str) -> list[str]:
    return text.replace("\r\n", "\n").splitlines() or [""]


def describe_call(name: str, arguments: Mapping[str, Any], *, width: int = WIDTH) -> str:
    """`[bash] ls -l`: the tool's name and its main argument (a command, a job id), else
    its arguments as compact JSON; one line."""
    command = arguments.get("command")
    if isinstance(command, str):
        lines = _lines_of(command.strip())
        detail = lines[0] + (" ..." if len(lines) > 1 else "")
        if arguments.get("run_in_background") is True:
            detail += "  (in the background)"
        workdir = arguments.get("workdir")
        if isinstance(workdir, str) and workdir.strip() and workdir.strip() != ".":
            detail += f"  (in {_lines_of(workdir.strip())[0]})"  # asked for: shown (D485)
    elif len(arguments) == 1 and isinstance(next(iter(arguments.values())), str):
        detail = _lines_of(str(next(iter(arguments.values()))))[0]
    else:
        try:
            detail = json.dumps(thaw(arguments), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            detail = repr(arguments)
    return _clip(_visible(f"[{name}] {detail}".rstrip()), width)


def describe_command(
    arguments: Mapping[str, Any], *, max_lines: int = COMMAND_LINES, width: int = WIDTH
) -> list[str]:
    """A command in full, indented, for the question before it runs: [] when its call's one
    line (`describe_call`) shows all of it already, else each of its lines (up to
    `max_lines`, then `... N more lines`), so a person approves what will run, not a summary."""
    command = arguments.get("command")
    if not isinstance(command, str):
        return []
    lines = _lines_of(_visible(command.strip()))
    if len(lines) == 1 and len(lines[0]) + len("[bash] ") <= width:
        return []
    shown = ["    " + _clip(line, width - 4) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"    ... {len(lines) - max_lines} more lines")
    return shown


def describe_result(
    content: str, is_error: bool, *, max_lines: int = RESULT_LINES, width: int = WIDTH
) -> list[str]:
    """`[ok] first line` (or `[error] ...`), then up to `max_lines - 1` more lines indented
    under it, then `... N more lines`."""
    label = "[error] " if is_error else "[ok] "
    text = content.rstrip("\n") or "(no output)"
    lines = [_clip(_visible(line), width) for line in _lines_of(text)]
    shown = lines[:max_lines]
    out = [label + shown[0]] + [" " * len(label) + line for line in shown[1:]]
    if len(lines) > max_lines:
        out.append(" " * len(label) + f"... {len(lines) - max_lines} more lines")
    return out


def describe_end(reason: Mapping[str, Any]) -> str | None:
    """How a turn ended, when that is worth a line: None for `completed`."""
    end = decode_turn_end(reason)
    if end is None:
        return _visible(f"[ended: {reason.get('kind')}]")
    match end["kind"]:
        case "completed":
            return None
        case "aborted":
            match end["cause"]:
                case "user":
                    return "[cancelled]"
                case "parent":
                    return "[cancelled by its parent]"
                case "timeout":
                    return "[step timed out]"
                case _:
                    return _visible(f"[aborted: {end['reason']}]")
        case "error":
            return _visible(f"[error: {end['message']}]")
        case "max_steps":
            return "[max steps]"
        case "closed":
            return "[closed]"
        case "interrupted":
            return "[interrupted: the process stopped during this turn]"


class Renderer:
    """Turns an agent's output into terminal text. Pure; the only state is whether the
    cursor is at the start of a line, so that a record after streamed text starts its own.

    Live, the assistant's text comes from `text()` as it streams, and the user's own prompt
    is not repeated (the terminal echoed it); in a replay both come from the records."""

    def __init__(self, *, max_lines: int = RESULT_LINES, width: int = WIDTH) -> None:
        self._max_lines = max_lines
        self._width = width
        self._line_start = True
        self._last_call: str | None = None  # the call id of the last line shown, if a call

    def text(self, delta: str) -> str:
        """A piece of streamed assistant text."""
        if not delta:
            return ""
        self._line_start = delta.endswith("\n")
        self._last_call = None
        return _visible(delta)

    def question(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> str:
        """What is shown before asking whether a call may run: its line, unless it is the
        last line shown already, then the command in full if that line clipped it."""
        lines = [] if call_id == self._last_call else [describe_call(name, arguments)]
        lines += describe_command(arguments, width=self._width)
        self._last_call = None
        return self._block(lines)

    def finish(self) -> str:
        """A newline if the cursor is not at the start of a line."""
        if self._line_start:
            return ""
        self._line_start = True
        return "\n"

    def _block(self, lines: Sequence[str]) -> str:
        if not lines:
            return self.finish()
        return self.finish() + "".join(f"{line}\n" for line in lines)

    def record(self, record: Record, *, replay: bool = False) -> str:
        """The terminal text of one record ("" for those not shown)."""
        shown = self._record(record, replay)
        if shown:
            is_call = record.type == TOOL_CALL
            self._last_call = str(record.data.get("call_id")) if is_call else None
        return shown

    def _record(self, record: Record, replay: bool) -> str:
        data = record.data
        kind = record.type
        if kind == USER_MESSAGE:
            if not replay:
                return ""
            lines = _lines_of(_visible(str(data.get("content", ""))))
            return self._block([PROMPT + lines[0], *("  " + line for line in lines[1:])])
        if kind == STEERING_MESSAGE:
            return self._block([_clip(_visible(f"[steering] {data.get('content', '')}"))])
        if kind == CONTEXT_MESSAGE:
            first = _lines_of(str(data.get("content", "")))[0]
            return self._block([_clip(_visible(f"[context] {first}"), self._width)])
        if kind == ASSISTANT_MESSAGE:
            content = str(data.get("content", ""))
            if not replay or not content:
                return ""
            return self.finish() + self.text(content) + self.finish()
        if kind == TOOL_CALL:
            raw: Any = data.get("arguments", {})
            arguments = (
                cast("Mapping[str, Any]", raw) if isinstance(raw, Mapping) else {"arguments": raw}
            )
            return self._block([describe_call(str(data.get("name", "?")), arguments)])
        if kind == TOOL_RESULT:
            return self._block(
                describe_result(
                    str(data.get("content", "")),
                    bool(data.get("is_error")),
                    max_lines=self._max_lines,
                    width=self._width,
                )
            )
        if kind == TURN_END:
            end = describe_end(data.get("reason", {}))
            return self._block([end] if end is not None else [])
        return ""


def replay_summary(records: Sequence[Record], *, turns: int = REPLAY_TURNS) -> str:
    """What a resumed session shows first: how many turns it has, then the last `turns` of
    them as they were (prompts, replies, tool calls and results, how each ended)."""
    starts = [index for index, record in enumerate(records) if record.type == TURN_START]
    if not starts:
        return "no earlier turns\n"
    shown = starts[-turns:] if turns > 0 else []
    plural = "s" if len(starts) != 1 else ""
    if not shown:
        return f"{len(starts)} earlier turn{plural}\n"
    head = f"{len(starts)} earlier turn{plural}"
    head += f"; the last {len(shown)}:" if len(shown) < len(starts) else ":"
    renderer = Renderer()
    body = "".join(renderer.record(record, replay=True) for record in records[shown[0] :])
    return f"{head}\n{body}{renderer.finish()}(end of history)\n"
