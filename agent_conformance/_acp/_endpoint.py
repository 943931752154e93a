"""A scripted model endpoint on 127.0.0.1, for agents under test: OpenAI chat completions and
Responses, Anthropic Messages and Gemini.

The ACP machine puts a token (`acp-check-<n>`) in every prompt it sends and scripts what the
model answers to it, step by step: a step is the n-th model call of the turn, counted as the
assistant messages after the last user message. A request whose last user message carries
no token (a title, a summary, a "who speaks next" check an agent makes on its own) gets a
plain `ok`, so agents that make calls of their own still run. Steps:

    Say(text)        stream `text` in a few chunks, then finish_reason "stop"
    Hold(text)       stream `text`, then hold the stream open until released (or the client
                     goes away); a release ends it like `Say`
    Cut(text)        stream `text`, then finish_reason "length": the reply was cut at the
                     token limit (a Responses reply ends `incomplete`, max_output_tokens)
    Shell(command)   one tool call of the agent's shell tool (`bash`, `shell`, ... whichever
                     the request offers) running `command`; finish_reason "tool_calls"; an
                     agent that offers none gets the script's next step instead
    Mcp(server, tool, arguments)
                     one call of the tool `tool` of the MCP server the client named `server`
                     (offered under a name holding both, as `mcp__server__tool`); an agent
                     that offers none gets the script's next step instead

Each call's answer is put in its API's framing (`_framing`, D476), by the path it was sent
to, the scripts the same for all:

    POST .../chat/completions   OpenAI chat completions: SSE `data: {chunk}` events, a
                                usage chunk when `stream_options.include_usage` asks,
                                `data: [DONE]`; `stream: false` gets one `chat.completion`
    POST .../responses          the Responses API (`_responses`), function calls included
    POST .../messages           Anthropic Messages (`_anthropic`), `tool_use` included
    POST ...:streamGenerateContent, ...:generateContent
                                Gemini (`_gemini`), function calls included; SSE with
                                `alt=sse`, else one JSON array; `...:countTokens` 10
    GET .../models              the model, listed

Over HTTP/1.1 with keep-alive (h11). Anything else is answered 404 and recorded in
`bad_requests`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import h11
import trio

from .. import _http as http
from . import _anthropic as anthropic
from . import _gemini as gemini
from . import _responses as responses
from . import _wire as wire
from ._framing import MODEL, Framed, Turn, chat_framed

__all__ = [
    "API_KEY",
    "MODEL",
    "TOKEN",
    "Cut",
    "Hold",
    "Mcp",
    "Say",
    "ScriptedEndpoint",
    "Shell",
    "Step",
    "mcp_call",
    "open_endpoint",
    "shell_call",
]

API_KEY = "sk-conformance-local"
TOKEN = re.compile(r"acp-check-[0-9]+")
_SHELL_NAMES = (
    "bash",
    "shell",
    "run_shell_command",
    "exec_command",
    "execute_command",
    "run_terminal_cmd",
    "terminal",
)
_COMMAND_KEYS = ("command", "cmd", "commands", "script")


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Hold:
    text: str


@dataclass(frozen=True)
class Cut:
    text: str


@dataclass(frozen=True)
class Shell:
    command: str


@dataclass(frozen=True)
class Mcp:
    server: str
    tool: str
    arguments: Mapping[str, Any]


Step = Say | Hold | Cut | Shell | Mcp


@dataclass
class Served:
    """One scripted model call: its token, the step index, and what was answered."""

    token: str
    index: int
    step: Step | None
    tool: str | None = None  # the tool called, for a Shell step the agent offered one for
    reached: trio.Event = field(default_factory=trio.Event)  # held: the text was flushed
    released: trio.Event = field(default_factory=trio.Event)
    ended: trio.Event = field(default_factory=trio.Event)  # the reply is over, either way
    gone: bool = False  # the client closed the connection before the reply ended
    gone_at: float = 0.0  # when it did (trio.current_time())
    stamp: int = field(default_factory=wire.stamp)  # orders it among permission requests


class ScriptedEndpoint:
    """The scripts by token, and what was served. Fill `scripts` before sending the prompt.

    port: the port it listens on, once started.
    served: every scripted call, in arrival order.
    unscripted: how many requests got the plain default answer.
    bodies: the JSON text of every model request (whatever its API), in arrival order: what
        the model was shown, scripted or not (rule P18).
    """

    def __init__(self) -> None:
        self.port = 0
        self.scripts: dict[str, Sequence[Step]] = {}
        self.served: list[Served] = []
        self.unscripted = 0
        self.bodies: list[str] = []
        self.bad_requests: list[str] = []
        self._ids = itertools.count(1)
        self._arrival = trio.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self, token: str) -> list[Served]:
        return [s for s in self.served if s.token == token]

    async def held(self, token: str) -> Served:
        """The first held call of `token`, once its text is flushed: waits for it."""
        while True:
            for served in self.calls(token):
                if isinstance(served.step, Hold):
                    await served.reached.wait()
                    return served
            await self._arrival.wait()

    async def call(self, token: str, index: int = 0) -> Served:
        """The `index`-th call of `token`'s script, once it arrived: waits for it."""
        while True:
            for served in self.calls(token):
                if served.index == index:
                    return served
            await self._arrival.wait()

    def release(self, token: str | None = None) -> None:
        """End the held streams of `token` (of every token when None). Never blocks."""
        for served in self.served:
            if token is None or served.token == token:
                served.released.set()

    # -- HTTP ---------------------------------------------------------------------------

    async def handle(self, stream: trio.SocketStream) -> None:
        await http.serve_connection(stream, self._answer_request)

    async def _answer_request(
        self, conn: h11.Connection, stream: trio.SocketStream, request: http.Request
    ) -> bool:
        await self._route(conn, stream, (request.method, request.target), request.body)
        return True

    async def _route(
        self, conn: h11.Connection, stream: trio.SocketStream, target: tuple[str, str], body: Any
    ) -> None:
        method, where = target
        path, _, query = where.partition("?")
        path = path.rstrip("/")
        if method == "GET" and path.endswith("/models"):
            models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "x"}]}
            await http.send_json(conn, stream, 200, models)
            return
        if method == "POST" and path.endswith(":countTokens"):  # Gemini's, asked unscripted
            await http.send_json(conn, stream, 200, {"totalTokens": 10})
            return
        if method != "POST" or not isinstance(body, dict):
            await self._unknown(conn, stream, method, path)
            return
        request = cast("Mapping[str, Any]", body)
        if path.endswith("/chat/completions"):
            token, index = locate(request.get("messages"))
            turn, served = self._turn(token, index, request.get("tools"))
            usage = bool(_dig(request, "stream_options", "include_usage"))
            framed = chat_framed(turn, f"chatcmpl-{next(self._ids)}", usage=usage)
            streaming = bool(request.get("stream"))
        elif path.endswith("/messages"):
            token, index = anthropic.locate(request.get("messages"))
            turn, served = self._turn(token, index, anthropic.functions(request.get("tools")))
            number, model = next(self._ids), str(request.get("model") or MODEL)
            framed = anthropic.framed(turn, f"msg_{number}", f"toolu_{number}", model)
            streaming = bool(request.get("stream"))
        elif path.endswith("/responses"):
            found = responses.user_and_steps(request.get("input"))
            tokens = TOKEN.findall(found[0]) if found is not None else []
            token, index = (str(tokens[-1]) if tokens else None), (found[1] if found else 0)
            turn, served = self._turn(token, index, responses.functions(request.get("tools")))
            framed = responses.framed(turn, next(self._ids), str(request.get("model")))
            streaming = bool(request.get("stream"))
        elif gemini.is_generate(path):
            token, index = gemini.locate(request.get("contents"))
            turn, served = self._turn(token, index, gemini.functions(request.get("tools")))
            model = path.rsplit("/", 1)[-1].split(":", 1)[0]
            framed = gemini.framed(turn, model, sse="alt=sse" in query.split("&"))
            streaming = path.endswith(":streamGenerateContent")
        else:
            await self._unknown(conn, stream, method, path)
            return
        self.bodies.append(json.dumps(request, ensure_ascii=False))
        await self._send(conn, stream, served, framed, streaming)

    async def _unknown(
        self, conn: h11.Connection, stream: trio.SocketStream, method: str, path: str
    ) -> None:
        self.bad_requests.append(f"{method} {path}")
        error = {"error": {"message": f"no such endpoint: {method} {path}", "type": "x"}}
        await http.send_json(conn, stream, 404, error)

    def _serve(self, token: str | None, index: int, tools: object) -> Served | None:
        """Record a call: the script step it gets (None for an unscripted call)."""
        script = self.scripts.get(token) if token is not None else None
        if token is None or script is None:
            self.unscripted += 1
            return None
        step = script[index] if index < len(script) else None
        if _call_of(step, tools) is None and isinstance(step, Shell | Mcp):
            # No shell tool to call: the script goes on with its next step, so a turn
            # scripted to be held is still held.
            step = script[index + 1] if index + 1 < len(script) else Say("ok")
        served = Served(token, index, step)
        self.served.append(served)
        self._arrival.set()
        self._arrival = trio.Event()
        return served

    def _turn(self, token: str | None, index: int, tools: object) -> tuple[Turn, Served | None]:
        """What call `index` of `token`'s script answers (`ok` when unscripted), in no API's
        terms, and its record. `tools` in the chat-completions shape."""
        served = self._serve(token, index, tools)
        step = served.step if served is not None else None
        call = _call_of(step, tools)
        if served is not None and call is not None:
            served.tool = call[0]
        text = step.text if isinstance(step, Say | Hold | Cut) else ("ok" if call is None else "")
        return Turn(text, call, cut=isinstance(step, Cut), hold=isinstance(step, Hold)), served

    async def _send(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        served: Served | None,
        framed: Framed,
        streaming: bool,
    ) -> None:
        """Send one reply, whatever its API: whole, or streamed (and held open after its
        text until released or the client goes away)."""
        try:
            if not streaming:
                await http.send_json(conn, stream, 200, framed.whole)
                return
            head = h11.Response(
                status_code=200,
                headers=[("content-type", "text/event-stream"), ("cache-control", "no-cache")],
            )
            await http.send(conn, stream, head)
            for frame in (*framed.before, *framed.pieces):
                await http.send_data(conn, stream, frame)
            if served is not None and isinstance(served.step, Hold):
                served.reached.set()
                if not await http.hold(stream, served.released):
                    served.gone = True
                    served.gone_at = trio.current_time()
                    return
            for frame in framed.after:
                await http.send_data(conn, stream, frame)
            await http.send(conn, stream, h11.EndOfMessage())
        finally:
            if served is not None:
                served.ended.set()


@asynccontextmanager
async def open_endpoint() -> AsyncGenerator[ScriptedEndpoint, None]:
    """A `ScriptedEndpoint` serving on an ephemeral port of 127.0.0.1 until the block ends."""
    endpoint = ScriptedEndpoint()
    async with http.serving(endpoint.handle) as endpoint.port:
        try:
            yield endpoint
        finally:
            endpoint.release()


def locate(messages: object) -> tuple[str | None, int]:
    """The token of the last user message (None if it has none) and how many assistant
    messages follow it: which step of which script this call is."""
    items = _objects(messages)
    for position in range(len(items) - 1, -1, -1):
        if items[position].get("role") == "user":
            found = TOKEN.findall(_text_of(items[position].get("content")))
            if not found:
                return None, 0
            after = items[position + 1 :]
            return str(found[-1]), sum(1 for m in after if m.get("role") == "assistant")
    return None, 0


def _objects(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of a JSON array (anything else in it skipped)."""
    if not isinstance(value, list):
        return []
    items = cast("list[object]", value)
    return [cast("Mapping[str, Any]", item) for item in items if isinstance(item, dict)]


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in _objects(content))


def _call_of(step: Step | None, tools: object) -> tuple[str, dict[str, Any]] | None:
    if isinstance(step, Shell):
        return shell_call(tools, step.command)
    if isinstance(step, Mcp):
        return mcp_call(tools, step.server, step.tool, step.arguments)
    return None


def mcp_call(
    tools: object, server: str, tool: str, arguments: Mapping[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The request's tool that is `server`'s `tool`, called with `arguments`; None if the
    agent offers none. Agents name MCP tools their own way (`mcp__server__tool`,
    `server_tool`, `server.tool`, the tool's own name): a name ending with the tool's and
    holding the server's is taken first, else the tool's own name."""
    names = [
        name
        for each in _objects(tools)
        if isinstance(name := _dig(each.get("function"), "name"), str)
    ]
    chosen = next((n for n in names if n.endswith(tool) and server in n), None)
    if chosen is None:
        chosen = next((n for n in names if n == tool), None)
    return (chosen, dict(arguments)) if chosen is not None else None


def shell_call(tools: object, command: str) -> tuple[str, dict[str, Any]] | None:
    """The shell-like tool among the request's `tools` and arguments that run `command`,
    filled from its JSON schema; None if the agent offers no such tool."""
    functions: dict[str, Mapping[str, Any]] = {}
    for tool in _objects(tools):
        function = tool.get("function")
        name = _dig(function, "name")
        if isinstance(name, str):
            functions[name] = cast("Mapping[str, Any]", function)
    chosen = next((functions[n] for n in _SHELL_NAMES if n in functions), None)
    if chosen is None:
        chosen = next(
            (f for n, f in functions.items() if re.search(r"bash|shell|exec|command", n)), None
        )
    if chosen is None:
        return None
    schema: Any = chosen.get("parameters") or {}
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required: list[str] = list(schema.get("required") or [])
    arguments: dict[str, Any] = {}
    key = next((k for k in _COMMAND_KEYS if k in properties), None) or "command"
    kind = _dig(properties, key, "type")
    arguments[key] = ["bash", "-lc", command] if kind == "array" else command
    for name in required:
        if name not in arguments:
            arguments[name] = _filler(name, properties.get(name) or {})
    return str(chosen["name"]), arguments


def _dig(value: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = cast("Mapping[str, Any]", value).get(key)
    return value


def _filler(name: str, schema: Mapping[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]  # pyright: ignore[reportUnknownVariableType]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return 60000 if "timeout" in name else 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "a conformance check"
