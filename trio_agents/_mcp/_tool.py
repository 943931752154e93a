"""One tool of an MCP server as a `Tool`, and what its results become: text for the model,
with images, audio and resources described, and every failure an error result that names
the server."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import mcp_types
import trio

from .._tool._seam import ToolContext, ToolResult

__all__ = ["McpTool", "ToolCaller", "describe_result"]


class ToolCaller(Protocol):
    """What a tool needs of its server's connection."""

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Send `tools/call`; raises on a protocol error or a lost connection."""
        ...

    async def settle(self) -> None:
        """Return once the tools a `tools/list_changed` announced are listed (bounded)."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class McpTool:
    """A server's tool, named `mcp__<server>__<tool>` (`mcp_tool_name`), with the server's
    description and input schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    server: str
    tool: str
    connection: ToolCaller

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        """Call the tool on its server. A cancel cancels the request (the server receives
        `notifications/cancelled`) and propagates; any failure is an error result."""
        try:
            result = await self.connection.call(self.tool, dict(arguments))
        except Exception as exc:  # the model hears of it; the turn goes on
            await trio.lowlevel.checkpoint()
            return ToolResult(
                f"MCP server {self.server!r}: tool {self.tool!r} failed: {reason(exc)}",
                is_error=True,
            )
        # A change the server announced during the call is listed before the call ends, so
        # the next step has the new tools.
        await self.connection.settle()
        text = describe_result(result)
        if result.is_error:
            return ToolResult(
                f"MCP server {self.server!r}: tool {self.tool!r} reported an error: {text}",
                is_error=True,
            )
        return ToolResult(text)


def reason(exc: BaseException) -> str:
    """One line saying what went wrong: the innermost leaf of a group, as `Type: message`
    (the message alone for the SDK's protocol errors)."""
    while isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        exc = group.exceptions[0]
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if type(exc).__name__ == "MCPError":
        return message or "protocol error"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def describe_result(result: mcp_types.CallToolResult) -> str:
    """The text of a result: its text blocks as they are, other blocks described in a
    bracketed line; the structured content as JSON when there is no block."""
    parts = [_describe(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, sort_keys=True))
    return "\n".join(parts)


def _size(data: str) -> int:
    # base64 length to decoded bytes, without decoding
    return len(data) * 3 // 4 - data.count("=", -2)


_DESCRIBERS: dict[type[Any], Callable[[Any], str]] = {
    mcp_types.TextContent: lambda block: block.text,
    mcp_types.ImageContent: lambda block: f"[image: {block.mime_type}, {_size(block.data)} bytes]",
    mcp_types.AudioContent: lambda block: f"[audio: {block.mime_type}, {_size(block.data)} bytes]",
    mcp_types.ResourceLink: lambda block: f"[resource link: {block.uri} ({block.name})]",
}


def _describe(block: object) -> str:
    if isinstance(block, mcp_types.EmbeddedResource):
        contents = block.resource
        if isinstance(contents, mcp_types.TextResourceContents):
            return f"[resource {contents.uri}]\n{contents.text}"
        mime = contents.mime_type or "application/octet-stream"
        return f"[resource {contents.uri}: {mime}, {_size(contents.blob)} bytes]"
    describer = _DESCRIBERS.get(type(block))
    if describer is None:
        return f"[{type(block).__name__}]"
    return describer(block)
