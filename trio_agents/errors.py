"""The library's exceptions.

Every error the library raises on purpose derives from `TrioAgentsError`, so callers can catch
the library's refusals without catching their own bugs.
"""

from __future__ import annotations

import trio

__all__ = ["AgentClosedError", "DuplicateSessionError", "TrioAgentsError"]


class TrioAgentsError(Exception):
    """Base class of every error trio-agents raises deliberately."""


class AgentClosedError(TrioAgentsError, trio.ClosedResourceError):
    """A message was delivered to an agent that is closing or closed.

    It is a `trio.ClosedResourceError`, like using any other closed trio resource.
    """


class DuplicateSessionError(TrioAgentsError):
    """A session id is already live: it lost a same-id race or names a session still open."""
