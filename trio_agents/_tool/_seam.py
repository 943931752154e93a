"""The tool seam: what a tool is, what it receives, what it returns. No trio import."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from .._util import check_bool

__all__ = ["Tool", "ToolContext", "ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling: the agent (its id is also its session id), the turn, step and call.

    agent_id: the calling agent's id, which is also its session's id.
    call_id: the id of this tool call, as recorded in `tool/call` and `tool/result`.
    turn: the turn's number (1, 2, ... per session).
    step: the step's number within the turn (1, 2, ...).
    """

    agent_id: str
    call_id: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call answers.

    content: the text of the answer.
    is_error: whether it reports a failure; recorded in `tool/result` (the model is sent
        the content only).
    details: JSON data about the call for front ends, recorded in `tool/result` and never
        sent to the model, or None. A front end reads the keys it knows: `diff` (`path`,
        `old_text`, None for a new file, and `new_text`) and `locations` (a list of `path`
        and `line`), which an ACP editor shows as the call's diff and locations (D520).
    """

    content: str
    is_error: bool = False
    details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        # Recorded as it is: a result that is not text read back as a damaged session (D383).
        if not isinstance(self.content, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"ToolResult content must be a str, got {type(self.content).__name__} "
                f"{self.content!r}; give its text (json.dumps for data)"
            )
        check_bool("ToolResult is_error", self.is_error)
        if self.details is not None:
            _check_details(self.details)


def _check_details(details: object) -> None:
    # Recorded with the result: what JSON cannot hold would fail the store's commit, far
    # from the tool that made it.
    problem = None
    if not isinstance(details, Mapping):
        problem = f"a {type(details).__name__}"
    else:
        try:
            json.dumps(details, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            problem = f"not JSON data ({exc})"
        else:
            keys = cast("Mapping[object, Any]", details)
            if not all(isinstance(key, str) for key in keys):
                problem = "keyed by something other than text"
    if problem is not None:
        raise TypeError(
            f"ToolResult details must be a mapping of JSON data or None, got {problem}: "
            f"{details!r:.200}; give str keys and JSON values"
        )


class Tool(Protocol):
    """A tool the model may call. Cancellation arrives as `trio.Cancelled`, as anywhere in trio.

    Plain attributes satisfy the three properties. The tools of one agent must have
    distinct names.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the tool's arguments, sent to the model as is."""
        ...

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        """Run one call. `arguments` are the model's, a mutable copy the tool may keep;
        `context` says who calls.

        Return a ToolResult, or a str for a successful result (any other value is turned
        into a str). An exception becomes an error result, `"ExcType: message"`, that the
        model can react to; it does not fail the turn. A cancel, a step timeout or a close
        arrives as `trio.Cancelled`: let it propagate (the call is then recorded as
        interrupted); a tool that ignores it holds up its agent's close for up to
        `close_grace`. Must always checkpoint. The calls of one step run concurrently.
        """
        ...
