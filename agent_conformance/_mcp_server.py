"""The reference MCP server the tests run, built with the `mcp` SDK's server side.

Run as ``python -m agent_conformance._mcp_server [options]``. It serves stdio by default, or
streamable HTTP on 127.0.0.1 with ``--http PORT_FILE`` (a free port, written to PORT_FILE once
the server listens; at `/mcp`), or the older HTTP+SSE transport with ``--http PORT_FILE --sse``
(at `/sse`). Tools:

- ``echo(text)``: returns ``text``.
- ``slow()``: waits until it is cancelled (``notifications/cancelled`` interrupts it).
- ``crash()``: the process exits in the middle of the call.
- ``add_tool(name)``: adds a tool ``name`` (it returns ``"<name> called"``) and sends
  ``notifications/tools/list_changed``.
- ``picture()``: an image result (a 1x1 PNG).
- ``fail(text)``: raises an error whose message is ``text`` (an error result).
- ``environment()``: a JSON object of the server's working directory (``cwd``) and its
  environment (``env``).

Options that make it misbehave on purpose, for the tests of the client's ownership:

- ``--record FILE``: appends one JSON line per event to FILE: ``ready`` (with the pid),
  ``child`` (with the child's pid), ``started`` and ``cancelled`` (the slow tool).
- ``--ignore-term``: ignores SIGTERM (so does the child of ``--spawn-child``).
- ``--child-ignores-term``: the child of ``--spawn-child`` ignores SIGTERM, the server does
  not (it exits on SIGTERM and leaves its child to the client's group kill).
- ``--spawn-child``: starts a long-lived child process in the same process group; its pid goes
  to stderr (``child-pid N``) and to the record file.
- ``--crash-on-start``: exits 3 before reading anything.
- ``--no-initialize``: reads stdin and never answers.
- ``--no-tools-list``: answers ``initialize`` and never answers ``tools/list``.

It runs on asyncio (the SDK's HTTP server needs it); the client side under test runs on trio.
"""

import argparse
import base64
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

# A valid 1x1 transparent PNG: the picture tool's image.
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PNG_BYTES = len(_PNG)  # what the client's description of the image says


class _Recorder:
    def __init__(self, path: str | None) -> None:
        self._path = path

    def event(self, event: str, **fields: object) -> None:
        if self._path is None:
            return
        line = json.dumps({"event": event, **fields}) + "\n"
        # One write per line with O_APPEND: a reader never sees half a line.
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agent_conformance._mcp_server")
    parser.add_argument("--http", metavar="PORT_FILE", default=None)
    parser.add_argument("--sse", action="store_true", help="with --http: the HTTP+SSE transport")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--child-ignores-term", action="store_true")
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--record", metavar="FILE", default=None)
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--no-initialize", action="store_true")
    parser.add_argument("--no-tools-list", action="store_true")
    return parser.parse_args(argv)


def _build(recorder: _Recorder) -> "MCPServer":
    # Imported here: the SDK takes seconds to import, and the servers that fail on purpose
    # (--crash-on-start, --no-initialize) should fail at once. Without `from __future__
    # import annotations`, the tools' annotations are objects, so the SDK needs no globals.
    from mcp.server.mcpserver import Context, Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name="reference", version="1")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Wait until cancelled.")
    async def slow() -> str:
        recorder.event("started", pid=os.getpid())
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            recorder.event("cancelled", pid=os.getpid())
            raise
        return "never"  # pragma: no cover

    @server.tool(description="Exit the server process in the middle of the call.")
    def crash() -> str:
        recorder.event("crash", pid=os.getpid())
        os._exit(1)

    @server.tool(description="Add a tool NAME and announce the change.")
    async def add_tool(name: str, ctx: Context) -> str:
        def added() -> str:
            return f"{name} called"

        server.add_tool(added, name=name, description=f"Added at run time as {name}.")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.tool(description="Return a 1x1 PNG image.")
    def picture() -> Image:
        return Image(data=_PNG, format="png")

    @server.tool(description="Fail with TEXT.")
    def fail(text: str) -> str:
        # ToolError: the SDK sends its message as the error result's text (any other
        # exception becomes "Error executing tool fail", without it).
        raise ToolError(text)

    @server.tool(description="Return the server's working directory and environment.")
    def environment() -> str:
        return json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)})

    return server


def _spawn_child(recorder: _Recorder, record: str | None, deaf: bool) -> None:
    # Same process group (no new session): the client's group kill must reach it. The record
    # file's path in its argv marks it as this server's in /proc, even if the server dies
    # before it records the child's pid (M5).
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if deaf else ""
    child = subprocess.Popen(
        [sys.executable, "-c", f"{ignore}import time\nwhile True: time.sleep(3600)", record or ""],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    print(f"child-pid {child.pid}", file=sys.stderr, flush=True)
    recorder.event("child", pid=child.pid)


async def _serve_http(server: "MCPServer", port_file: str, sse: bool) -> None:
    import uvicorn  # only the HTTP mode needs it: the stdio server starts faster without

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    app = server.sse_app() if sse else server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    # Write the port only once the socket listens, through a rename: a reader sees all of it.
    tmp = anyio.Path(port_file + ".tmp")
    await tmp.write_text(str(port))
    await tmp.rename(port_file)
    await userver.serve(sockets=[sock])


def _read_forever() -> None:
    while os.read(0, 65536):
        pass


def _initialize_only() -> None:
    """Answer `initialize` as a server with tools would, then nothing: not `tools/list`."""
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "initialize":
            result: dict[str, object] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "reference", "version": "1"},
            }
            answer: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            print(json.dumps(answer), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.crash_on_start:
        print("reference MCP server: crashing on start (--crash-on-start)", file=sys.stderr)
        return 3
    recorder = _Recorder(args.record)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.spawn_child:
        _spawn_child(recorder, args.record, args.child_ignores_term)
    recorder.event("ready", pid=os.getpid())
    if args.no_initialize:
        _read_forever()
        return 0
    if args.no_tools_list:
        _initialize_only()
        return 0
    # The SDK logs every session at INFO on stderr; the tests read stderr for the child's pid.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    server = _build(recorder)
    if args.http is not None:
        anyio.run(_serve_http, server, args.http, args.sse)
    else:
        anyio.run(server.run_stdio_async)
    return 0


if __name__ == "__main__":
    sys.exit(main())
