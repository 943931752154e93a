"""The properties the MCP machine checks, rule by rule (M1, M2, M5-M8 of docs/contract.md).
Each says, in the contract's words, what a violation quotes. Pure: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = [
    "BAD_START",
    "CANCEL_REACHES_SERVER",
    "CLOSE_REAPS",
    "CONNECTION_USABLE",
    "PROPERTIES",
    "RESULT_TEXT",
    "SERVER_ENVIRONMENT",
    "TOOLS_RELISTED",
]


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

TOOLS_RELISTED = _mcp(
    "M1",
    "mcp-tools-relisted",
    "each tool of a server is a Tool named mcp__<server>__<tool> with the server's "
    "description, listed after the caller's `base` tools (kept first, as given); a change "
    "the server announces (notifications/tools/list_changed) before "
    "it answers a call is listed before that call's result is returned",
)
RESULT_TEXT = _mcp(
    "M2",
    "mcp-result-text",
    "a call's result is its text, each block other than text described on a line of its "
    "own ([image: image/png, 70 bytes]); a result the server marks as an error is an error "
    "result `MCP server 'S': tool 'T' reported an error: TEXT`; a server that died during "
    "the call, or before it, gives an error result `MCP server 'S': tool 'T' failed: REASON`, "
    "whose REASON gives the exit status of a stdio server that exited during the call",
)
SERVER_ENVIRONMENT = _mcp(
    "M6",
    "mcp-server-environment",
    "a stdio server runs in `cwd` with the scrubbed environment bash commands get (the "
    "allowed names of this process's environment, then NO_COLOR=1, TERM=dumb, PAGER=cat, "
    "GIT_PAGER=cat) plus its configured `env`: no other variable of this process reaches it",
)

BAD_START = _mcp(
    "M5",
    "mcp-bad-start-leaves-nothing",
    "a server that cannot be started, exits before it answers `initialize` or does not "
    "answer within `start_timeout` makes entering the block raise `McpServerError`: one "
    "line naming the server and the reason, `server` set to its name; two servers with one "
    "name raise `McpConfigError`; and no process of any server of the block (one that "
    "started, one still starting, the children they started) is left running",
)

PROPERTIES: tuple[Property, ...] = (
    TOOLS_RELISTED,
    RESULT_TEXT,
    BAD_START,
    SERVER_ENVIRONMENT,
    CLOSE_REAPS,
    CANCEL_REACHES_SERVER,
    CONNECTION_USABLE,
)
"""Every property of the MCP machine."""
