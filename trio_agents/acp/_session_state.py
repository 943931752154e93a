"""What the server holds per ACP session and per prompt in flight, and an answer that
carries the updates to send after it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from .._errors import TrioAgentsError
from .._registry import AgentHandle
from .._util import describe
from . import _modes as modes
from . import _prompt as p
from ._outcomes import Outcomes
from ._session_scope import SessionScope

__all__ = ["Answer", "PromptState", "SessionState"]

logger = logging.getLogger("trio_agents.acp")


@dataclass
class PromptState:
    parts: list[p.Block]
    first_record: int = 0  # the session's length when it was sent: its turn's records follow
    message_id: str | None = None  # None until it is sent (its links read)
    cancel_requested: bool = False
    accepted: bool = False  # v2: answered with its receipt; its turn ends with an `idle`
    # Set when its turn has ended, or it was dropped: it is answered then, even while
    # prompts queued behind it run (D532).
    over: trio.Event = field(default_factory=trio.Event)
    answered: trio.Event = field(default_factory=trio.Event)  # its answer is queued


@dataclass(frozen=True, slots=True)
class Answer:
    """A result, and the updates that follow it (the session must be known to the client
    before it hears about it)."""

    result: Any
    session_id: str
    updates: list[dict[str, Any]]


class SessionState:
    __slots__ = (
        "cwd", "handle", "id", "outcomes", "prompt", "scope", "settings", "stop_observing",
    )  # fmt: skip

    def __init__(
        self,
        scope: SessionScope,
        handle: AgentHandle,
        cwd: str,
        settings: modes.Settings,
        stop_observing: Callable[[], None],
    ) -> None:
        self.scope = scope  # closing it closes the agent, then the MCP servers
        self.handle = handle
        self.id = handle.agent.id
        self.cwd = cwd  # its files are the ones a prompt's resource links may read
        self.prompt: PromptState | None = None
        # The prompts whose outcome is owed: steered and queued ones, and the prompt in
        # flight (whose outcome ends its wait, D532).
        self.outcomes = Outcomes()
        self.settings = settings
        self.stop_observing = stop_observing

    async def aclose(self) -> None:
        """Close the session's agent, then its MCP servers, and stop observing its records.
        A failure is logged, not raised (the server's other sessions close regardless).
        Always a checkpoint (a shielded one)."""
        try:
            await self.scope.aclose()
        except Exception as exc:
            if _refusal(exc):
                # The library said what went wrong (a store that cannot write), in words:
                # a traceback would bury the sentence.
                logger.error("closing ACP session %s failed: %s", self.id, describe(exc))
            else:
                logger.exception("closing ACP session %s failed", self.id)
        finally:
            self.stop_observing()


def _refusal(exc: Exception) -> bool:
    """Whether `exc` is the library's own refusal (every leaf of a group a TrioAgentsError)."""
    if isinstance(exc, ExceptionGroup):
        group: ExceptionGroup[Exception] = exc  # pyright: ignore[reportUnknownVariableType]
        return group.split(TrioAgentsError)[1] is None
    return isinstance(exc, TrioAgentsError)
