"""The stdio MCP server the ACP machine hands an agent in `session/new` (rules P15, P17).

Run by path, `python .../_echo_server.py RECORD`, so it starts in tens of milliseconds (the
`mcp` SDK's server takes about two seconds to import, and the machine starts one per MCP
session). It speaks MCP's JSON-RPC over stdio, one message per line: `initialize` (the
client's protocol version when it is one this server knows, else the newest), `ping`,
`tools/list` (one tool, `echo(text)`), `tools/call` of `echo` (its text back); any other
request gets "method not found", a notification nothing.

As it starts, it starts a child process in its own process group, as many servers do (an
`npx` wrapper, a language server), and appends to RECORD one JSON line per process: `child`
and `ready`, each with its pid. It exits at the end of its input; the child lives until it
is killed (with the group, as rule P17 asks of the agent).

Standard library only: no trio, no Hypothesis, not even this package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, cast

VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")

ECHO = {
    "name": "echo",
    "description": "Return the text unchanged.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to return."}},
        "required": ["text"],
    },
}


def _record(path: str, event: str, pid: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps({"event": event, "pid": pid}) + "\n").encode())
    finally:
        os.close(fd)


def _result(method: str, params: dict[str, Any]) -> Any:
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "acp-check-echo", "version": "1"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [ECHO]}
    if method == "tools/call" and params.get("name") == "echo":
        arguments = params.get("arguments")
        text = (
            cast("dict[str, Any]", arguments).get("text") if isinstance(arguments, dict) else None
        )
        return {"content": [{"type": "text", "text": str(text)}], "isError": False}
    return None


def main() -> int:
    record = sys.argv[1]
    # Same process group: the agent's group kill must reach it. Its argv names the record,
    # so /proc shows whose it is.
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(3600)", record],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    _record(record, "child", child.pid)
    _record(record, "ready", os.getpid())
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification, or a response to nothing this server asked
        fields = cast("dict[str, Any]", message)
        params = fields.get("params")
        result = _result(
            str(fields["method"]),
            cast("dict[str, Any]", params) if isinstance(params, dict) else {},
        )
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": fields["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": f"no method {fields['method']}"}
        else:
            reply["result"] = result
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
