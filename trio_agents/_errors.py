"""The library's exceptions.

Every error the library raises on purpose derives from `TrioAgentsError`, so callers can catch
the library's refusals without catching their own bugs.
"""

from __future__ import annotations

import trio

__all__ = [
    "AgentClosedError",
    "CorruptSessionError",
    "DuplicateSessionError",
    "PersistenceError",
    "TrioAgentsError",
]


class TrioAgentsError(Exception):
    """Base class of every error trio-agents raises deliberately."""


class AgentClosedError(TrioAgentsError, trio.ClosedResourceError):
    """A message was delivered to an agent that is closing or closed.

    It is a `trio.ClosedResourceError`, like using any other closed trio resource.
    """


class DuplicateSessionError(TrioAgentsError):
    """A session id is already live: it lost a same-id race or names a session still open."""


class PersistenceError(TrioAgentsError):
    """A session record could not be handed to its store. It propagates out of the agent's
    loop rather than being recorded as a failed turn: history that cannot be kept must not
    pass silently."""


class CorruptSessionError(TrioAgentsError, ValueError):
    """A stored session is damaged beyond what crash repair may fix (a record is missing in
    the middle). It is never repaired silently."""
