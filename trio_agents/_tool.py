"""The tool seam: what a tool is, what it receives, what it returns. No trio import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Tool", "ToolContext", "ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling: the agent (its id is also its session id), the turn, step and call."""

    agent_id: str
    call_id: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False


class Tool(Protocol):
    """A tool the model may call. Cancellation arrives as `trio.Cancelled`, as anywhere in trio."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str: ...
