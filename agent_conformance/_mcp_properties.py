"""The properties the MCP machine checks, rule by rule (M7-M8 of docs/contract.md). Each says,
in the contract's words, what a violation quotes. Pure: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = ["CANCEL_REACHES_SERVER", "CLOSE_REAPS", "CONNECTION_USABLE", "PROPERTIES"]


def _mcp(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "mcp", says)


CLOSE_REAPS = _mcp(
    "M7",
    "mcp-close-reaps",
    "once the MCP tool set's `async with` has been left (its block ended, raised, or an outer "
    "cancel ended it), no process a stdio server started is alive: not the server (one "
    "that ignores SIGTERM too, or one that crashed), not a child it started in its group",
)
CANCEL_REACHES_SERVER = _mcp(
    "M8",
    "mcp-cancel-reaches-server",
    "a cancelled MCP tool call propagates the cancel and leaves no request pending: the "
    "server is told (notifications/cancelled) and stops the call",
)
CONNECTION_USABLE = _mcp(
    "M8",
    "mcp-connection-usable",
    "after a cancelled call the connection stays usable: the server answers the calls that "
    "follow, each with its own answer",
)

PROPERTIES: tuple[Property, ...] = (CLOSE_REAPS, CANCEL_REACHES_SERVER, CONNECTION_USABLE)
"""Every property of the MCP machine."""
