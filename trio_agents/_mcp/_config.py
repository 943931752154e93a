"""What an MCP server is, as configured: the common file shape and ACP's. No trio import.

Two shapes describe the same servers. Configuration files (Claude Desktop, Cursor, most
editors) hold `{"mcpServers": {"name": {"command": ..., "args": [...], "env": {...}}}}`,
with `url` (and `headers`, optionally `type`) for a remote server. ACP's `session/new`
sends a list: `{"name", "command", "args", "env": [{"name", "value"}]}` for stdio, and
`{"type": "http"|"sse", "name", "url", "headers": [{"name", "value"}]}`. Both become
`McpServer` values; every mistake is one `McpConfigError` line naming the entry and field.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import McpConfigError

__all__ = [
    "McpServer",
    "McpTransport",
    "mcp_servers_from_acp",
    "mcp_servers_from_config",
    "mcp_tool_name",
]

McpTransport = Literal["stdio", "http", "sse"]

_NAME_LIMIT = 64  # the longest tool name the OpenAI API accepts
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class McpServer:
    """One MCP server to connect to.

    name: what the server is called in the configuration; its tools are named after it.
    transport: `"stdio"` (a command this runtime starts and owns), `"http"` (streamable
        HTTP) or `"sse"` (the older HTTP+SSE transport).
    command: the program a stdio server runs (looked up on PATH).
    args: its arguments.
    env, cwd: the rest of how a stdio server is started. `env` is added to a scrubbed
        environment (no secrets of this process leak to it).
    url: where an http or sse server is (`http://` or `https://`).
    headers: the headers sent to an http or sse server.
    """

    name: str
    transport: McpTransport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: {})
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=lambda: {})

    def __post_init__(self) -> None:
        if not self.name:
            raise McpConfigError("an MCP server needs a non-empty name")
        if self.transport == "stdio" and not self.command:
            raise McpConfigError(f"MCP server {self.name!r}: a stdio server needs a command")
        if self.transport != "stdio" and not self.url.startswith(("http://", "https://")):
            raise McpConfigError(
                f"MCP server {self.name!r}: url must start with http:// or https://, "
                f"got {self.url!r}"
            )


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by: `mcp__<server>__<tool>`, with characters
    model APIs refuse replaced by `_`, cut to 64 characters."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:_NAME_LIMIT]


def mcp_servers_from_config(data: object, *, source: str) -> tuple[McpServer, ...]:
    """The servers of a configuration file's parsed JSON (`source` names the file in
    errors). Raises McpConfigError naming the entry and field for anything else."""
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise McpConfigError(f'{source}: expected an object with "mcpServers"')
    entries: object = data["mcpServers"]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(entries, dict):
        raise McpConfigError(f"{source}: mcpServers must be an object of named servers")
    servers: list[McpServer] = []
    for name, entry in entries.items():  # pyright: ignore[reportUnknownVariableType]
        where = f"{source}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise McpConfigError(f"{where} must be an object")
        servers.append(_from_entry(str(name), entry, where))  # pyright: ignore[reportUnknownArgumentType]
    return tuple(servers)


def _from_entry(name: str, entry: dict[str, Any], where: str) -> McpServer:
    if "url" in entry:
        kind = entry.get("type", "http")
        if kind == "streamable-http":
            kind = "http"
        if kind not in ("http", "sse"):
            raise McpConfigError(f'{where}.type must be "http" or "sse", got {kind!r}')
        with _entry(where):
            return McpServer(
                name,
                transport=kind,
                url=_string(entry["url"], f"{where}.url"),
                headers=_string_map(entry.get("headers", {}), f"{where}.headers"),
            )
    if "command" not in entry:
        raise McpConfigError(f'{where} needs "command" (a stdio server) or "url"')
    cwd = entry.get("cwd")
    with _entry(where):
        return McpServer(
            name,
            command=_string(entry["command"], f"{where}.command"),
            args=_strings(entry.get("args", []), f"{where}.args"),
            env=_string_map(entry.get("env", {}), f"{where}.env"),
            cwd=None if cwd is None else _string(cwd, f"{where}.cwd"),
        )


def mcp_servers_from_acp(items: object) -> tuple[McpServer, ...]:
    """The servers of ACP's `mcpServers` list (session/new, session/load). Raises
    McpConfigError naming the entry (`mcpServers[i]`) and field."""
    if not isinstance(items, list):
        raise McpConfigError("mcpServers must be a list")
    servers: list[McpServer] = []
    names: set[str] = set()
    for i, item in enumerate(items):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        where = f"mcpServers[{i}]"
        if not isinstance(item, dict):
            raise McpConfigError(f"{where} must be an object")
        entry: dict[str, Any] = item  # pyright: ignore[reportUnknownVariableType]
        name = _string(entry.get("name"), f"{where}.name")
        if name in names:
            raise McpConfigError(f"{where}.name: two MCP servers are named {name!r}")
        names.add(name)
        kind = entry.get("type", "stdio")
        if kind in ("http", "sse"):
            with _entry(where):
                server = McpServer(
                    name,
                    transport=kind,
                    url=_string(entry.get("url"), f"{where}.url"),
                    headers=_pairs(entry.get("headers", []), f"{where}.headers"),
                )
        elif kind == "stdio":
            with _entry(where):
                server = McpServer(
                    name,
                    command=_string(entry.get("command"), f"{where}.command"),
                    args=_strings(entry.get("args", []), f"{where}.args"),
                    env=_pairs(entry.get("env", []), f"{where}.env"),
                )
        else:
            raise McpConfigError(f'{where}.type must be "http" or "sse" (or absent), got {kind!r}')
        servers.append(server)
    return tuple(servers)


@contextmanager
def _entry(where: str) -> Generator[None]:
    """Name the entry in a message McpServer's own checks raise without it."""
    try:
        yield
    except McpConfigError as exc:
        message = str(exc)
        named = message if message.startswith(where) else f"{where}: {message}"
        raise McpConfigError(named) from None


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise McpConfigError(f"{where} must be a string, got {value!r}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise McpConfigError(f"{where} must be a list of strings, got {value!r}")
    strings: list[str] = value  # pyright: ignore[reportUnknownVariableType]
    return tuple(strings)


def _string_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str)
        for k, v in value.items()  # pyright: ignore[reportUnknownVariableType]
    ):
        raise McpConfigError(f"{where} must be an object of strings, got {value!r}")
    return dict(value)  # pyright: ignore[reportUnknownArgumentType]


def _pairs(value: object, where: str) -> dict[str, str]:
    """ACP's `[{"name": ..., "value": ...}]` lists (env variables, HTTP headers)."""
    if not isinstance(value, list):
        raise McpConfigError(f"{where} must be a list of {{name, value}} objects, got {value!r}")
    pairs: dict[str, str] = {}
    for j, pair in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if not (
            isinstance(pair, dict)
            and isinstance(pair.get("name"), str)  # pyright: ignore[reportUnknownMemberType]
            and isinstance(pair.get("value"), str)  # pyright: ignore[reportUnknownMemberType]
        ):
            raise McpConfigError(f"{where}[{j}] must be {{name: string, value: string}}")
        pairs[pair["name"]] = pair["value"]
    return pairs
