"""An MCP server on the older HTTP+SSE transport (the SDK's `sse_app`), on 127.0.0.1 and a
free port, for the test that `mcpCapabilities.sse` is true of something that works. Run as
`python -m tests.support.mcp_sse_server PORT_FILE`: it writes the port to PORT_FILE (through
a rename, so a reader sees all of it) once it listens, and serves `echo(text)` until killed."""

from __future__ import annotations

import os
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer


def main(port_file: str) -> None:
    server = MCPServer(name="sse-reference", version="1")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:  # pyright: ignore[reportUnusedFunction]
        return text

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    with open(port_file + ".tmp", "w") as file:
        file.write(str(sock.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    config = uvicorn.Config(server.sse_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1])
