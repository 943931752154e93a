"""What the MCP machine starts, and how it finds what is left of it: the reference server
(`agent_conformance._mcp_server`) as a configuration, the servers that cannot start (M5),
the opener under test by default, and the processes in /proc. Pure: no trio import."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal

from trio_agents import McpServer, Tool

__all__ = [
    "BAD_REASONS",
    "BAD_SAYS",
    "BAD_STARTS",
    "BESIDE",
    "BROKEN",
    "CONFIGURED_TERM",
    "DEAF",
    "DEAF_SHOWN",
    "SERVER",
    "SILENT",
    "SILENT_TIMEOUT",
    "BadStart",
    "Deaf",
    "broken_server",
    "builtin_opener",
    "gone",
    "marked",
    "reference_server",
]

SERVER = "ref-srv"  # a dash, which tool names keep (M1)
CONFIGURED_TERM = "trio-agents-configured-term"
SILENT_TIMEOUT = 1.0  # the start_timeout of a block with a server that never answers (D483)
BROKEN = "broken"  # the name of the server that cannot start (M5)
BESIDE = "beside"  # the name of the good server opened with it
BadStart = Literal["missing", "exits", "silent", "list-silent", "same-name"]
BAD_STARTS: tuple[BadStart, ...] = ("missing", "exits", "silent", "list-silent", "same-name")
SILENT: tuple[BadStart, ...] = ("silent", "list-silent")  # wait out SILENT_TIMEOUT
Deaf = Literal["nobody", "server", "child"]
DEAF: tuple[Deaf, ...] = ("nobody", "server", "child")
DEAF_SHOWN: dict[Deaf, str] = {"nobody": "plain", "server": "deaf", "child": "deaf child"}
# What the one line of each bad start says of the reason (M5's examples).
BAD_SAYS: dict[BadStart, str] = {
    "missing": f"{BROKEN!r}'s command does not exist",
    "exits": f"{BROKEN!r} exits with status 3 at once",
    "silent": f"{BROKEN!r} never answers initialize (start_timeout {SILENT_TIMEOUT:g}s)",
    "list-silent": (
        f"{BROKEN!r} answers initialize, never tools/list (start_timeout {SILENT_TIMEOUT:g}s)"
    ),
    "same-name": f"two servers are named {BESIDE!r}",
}
BAD_REASONS: dict[BadStart, str] = {
    "missing": "cannot start",
    "exits": "status 3",
    "silent": "no answer to initialize within",
    "list-silent": "no answer to tools/list within",
    "same-name": "",
}


def checkout() -> str:
    """The directory this `agent_conformance` (and the `trio_agents` beside it) is imported
    from, for the server's PYTHONPATH (its environment is scrubbed: it gets only what its
    configuration says)."""
    return str(Path(__file__).resolve().parent.parent)


def reference_server(record: str, *, deaf: Deaf) -> McpServer:
    """The reference server, recording to `record`, with a child in its group; `deaf`: who
    of the two ignores SIGTERM ("server": both, as the child inherits it)."""
    args = ["-m", "agent_conformance._mcp_server", "--record", record, "--spawn-child"]
    if deaf == "server":
        args.append("--ignore-term")
    elif deaf == "child":
        args.append("--child-ignores-term")
    # TERM too, which the scrubbed environment sets: the configured value must win (M6).
    env = {"PYTHONPATH": checkout(), "TERM": CONFIGURED_TERM}
    return McpServer(SERVER, command=sys.executable, args=tuple(args), env=env)


def builtin_opener(
    servers: Sequence[McpServer], **options: Any
) -> AbstractAsyncContextManager[Sequence[Tool]]:
    """`open_mcp_tools`, imported when called: `agent-conformance` imports this module
    for every run, and the SDK only the MCP machine needs takes a second to import."""
    # Imported here: the SDK takes a second to import, which only the MCP machine needs.
    from trio_agents import open_mcp_tools

    return open_mcp_tools(servers, **options)


def marked(mark: str) -> list[int]:
    """The live pids whose command line holds `mark` (a record file's path, which the
    reference server and its child carry): found even if nobody recorded their pids."""
    found: list[int] = []
    wanted = mark.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if wanted in cmdline and not gone(int(entry)):
            found.append(int(entry))
    return sorted(found)


def gone(pid: int) -> bool:
    """Dead: absent from /proc, or a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def broken_server(kind: BadStart, mark: str, good: McpServer, folder: str) -> McpServer:
    """The server of a bad start of `kind` (M5); `mark` is its record file."""
    if kind == "same-name":
        return good
    if kind == "missing":
        return McpServer(BROKEN, command=os.path.join(folder, "no-such-server"))
    flags: dict[BadStart, str] = {
        "exits": "--crash-on-start",
        "silent": "--no-initialize",
        "list-silent": "--no-tools-list",
    }
    flag = flags[kind]
    args = ("-m", "agent_conformance._mcp_server", flag, "--record", mark)
    return McpServer(BROKEN, command=sys.executable, args=args, env={"PYTHONPATH": checkout()})
