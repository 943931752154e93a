"""What the server holds per ACP session and per prompt in flight, and an answer that
carries the updates to send after it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._registry import AgentHandle
from . import _modes as modes
from . import _prompt as p

__all__ = ["Answer", "PromptState", "SessionState"]


@dataclass
class PromptState:
    parts: list[p.Block]
    first_record: int = 0  # the session's length when it was sent: its turn's records follow
    message_id: str | None = None  # None until it is sent (its links read)
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """A result, and the updates that follow it (the session must be known to the client
    before it hears about it)."""

    result: Any
    session_id: str
    updates: list[dict[str, Any]]


class SessionState:
    __slots__ = ("cwd", "handle", "id", "prompt", "settings", "stop_observing")

    def __init__(
        self,
        handle: AgentHandle,
        cwd: str,
        settings: modes.Settings,
        stop_observing: Callable[[], None],
    ) -> None:
        self.handle = handle
        self.id = handle.agent.id
        self.cwd = cwd  # its files are the ones a prompt's resource links may read
        self.prompt: PromptState | None = None
        self.settings = settings
        self.stop_observing = stop_observing
