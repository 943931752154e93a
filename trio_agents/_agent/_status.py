"""The agent's observable status."""

from __future__ import annotations

import enum

__all__ = ["AgentStatus"]


class AgentStatus(enum.Enum):
    """IDLE: nothing queued and no turn. RUNNING: a turn runs or is about to. CLOSED: final."""

    IDLE = "idle"
    RUNNING = "running"
    CLOSED = "closed"
