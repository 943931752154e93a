"""A scripted OpenAI-compatible chat-completions endpoint on 127.0.0.1, for agents under test.

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

Streaming replies are standard SSE (`data: {chunk}` events, a usage chunk when
`stream_options.include_usage` asks, `data: [DONE]`), chunked, over HTTP/1.1 with keep-alive
(h11). `stream: false` gets one `chat.completion` object; `GET /v1/models` lists the model.

`POST /v1/responses` (the Responses API, which codex-acp needs) is served for text: the same
scripts by token, `Say` and `Hold` streamed as Responses events (framed by `_responses`); its
tools are not read, so a `Shell` step goes on with the next step there.
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
from . import _responses as responses

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

MODEL = "conformance-model"
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


class ScriptedEndpoint:
    """The scripts by token, and what was served. Fill `scripts` before sending the prompt.

    port: the port it listens on, once started.
    served: every scripted call, in arrival order.
    unscripted: how many requests got the plain default answer.
    bodies: the JSON text of every model request (chat completion or Responses), in arrival
        order: what the model was shown, scripted or not (rule P18).
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
        await self._route(conn, stream, (request.method, request.path), request.body)
        return True

    async def _route(
        self, conn: h11.Connection, stream: trio.SocketStream, target: tuple[str, str], body: Any
    ) -> None:
        method, path = target
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path.endswith("/models"):
            models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "x"}]}
            await http.send_json(conn, stream, 200, models)
        elif method == "POST" and path.endswith("/chat/completions") and isinstance(body, dict):
            self.bodies.append(json.dumps(body, ensure_ascii=False))
            await self._complete(conn, stream, body)  # pyright: ignore[reportUnknownArgumentType]
        elif method == "POST" and path.endswith("/messages") and isinstance(body, dict):
            self.bodies.append(json.dumps(body, ensure_ascii=False))
            await self._message(conn, stream, body)  # pyright: ignore[reportUnknownArgumentType]
        elif method == "POST" and path.endswith("/responses") and isinstance(body, dict):
            self.bodies.append(json.dumps(body, ensure_ascii=False))
            await self._respond(conn, stream, body)  # pyright: ignore[reportUnknownArgumentType]
        else:
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

    async def _complete(
        self, conn: h11.Connection, stream: trio.SocketStream, body: Mapping[str, Any]
    ) -> None:
        token, index = locate(body.get("messages"))
        served = self._serve(token, index, body.get("tools"))
        step = served.step if served is not None else None
        call = _call_of(step, body.get("tools"))
        if served is not None and call is not None:
            served.tool = call[0]
        text = step.text if isinstance(step, Say | Hold | Cut) else ("ok" if call is None else "")
        try:
            await self._reply(conn, stream, body, served, text, call)
        finally:
            if served is not None:
                served.ended.set()

    async def _message(
        self, conn: h11.Connection, stream: trio.SocketStream, body: Mapping[str, Any]
    ) -> None:
        """An Anthropic Messages call (D474): the same scripts, framed as that API does."""
        token, index = anthropic.locate(body.get("messages"))
        tools = anthropic.functions(body.get("tools"))
        served = self._serve(token, index, tools)
        step = served.step if served is not None else None
        call = _call_of(step, tools)
        if served is not None and call is not None:
            served.tool = call[0]
        text = step.text if isinstance(step, Say | Hold | Cut) else ("ok" if call is None else "")
        message_id = f"msg_{next(self._ids)}"
        model = str(body.get("model") or MODEL)
        stop = anthropic.stop_reason(isinstance(step, Cut), call is not None)
        use = (f"toolu_{next(self._ids)}", *call) if call is not None else None
        try:
            if not body.get("stream"):
                reply = anthropic.message_object(message_id, model, text, use, stop)
                await http.send_json(conn, stream, 200, reply)
                return
            head = h11.Response(
                status_code=200,
                headers=[("content-type", "text/event-stream"), ("cache-control", "no-cache")],
            )
            await http.send(conn, stream, head)
            await http.send_data(conn, stream, anthropic.opening(message_id, model))
            block = 0
            if text or isinstance(step, Hold):
                await http.send_data(
                    conn, stream, anthropic.block_start(0, {"type": "text", "text": ""})
                )
                for piece in _pieces(text):
                    await http.send_data(conn, stream, anthropic.text_delta(0, piece))
                if isinstance(step, Hold) and served is not None:
                    served.reached.set()
                    if not await http.hold(stream, served.released):
                        served.gone = True
                        served.gone_at = trio.current_time()
                        return
                await http.send_data(conn, stream, anthropic.block_stop(0))
                block = 1
            if use is not None:
                await http.send_data(conn, stream, anthropic.tool_use_blocks(block, *use))
            await http.send_data(conn, stream, anthropic.closing(stop))
            await http.send(conn, stream, h11.EndOfMessage())
        finally:
            if served is not None:
                served.ended.set()

    async def _reply(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        body: Mapping[str, Any],
        served: Served | None,
        text: str,
        call: tuple[str, dict[str, Any]] | None,
    ) -> None:
        step = served.step if served is not None else None
        chat_id = f"chatcmpl-{next(self._ids)}"
        cut = isinstance(step, Cut)
        if not body.get("stream"):
            await http.send_json(conn, stream, 200, _completion(chat_id, text, call, cut=cut))
            return
        usage = bool(_dig(body, "stream_options", "include_usage"))
        head = h11.Response(
            status_code=200,
            headers=[("content-type", "text/event-stream"), ("cache-control", "no-cache")],
        )
        await http.send(conn, stream, head)
        await http.send_data(
            conn, stream, _event(_chunk(chat_id, {"role": "assistant", "content": ""}))
        )
        for piece in _pieces(text):
            await http.send_data(conn, stream, _event(_chunk(chat_id, {"content": piece})))
        if isinstance(step, Hold) and served is not None:
            served.reached.set()
            if not await http.hold(stream, served.released):
                served.gone = True
                served.gone_at = trio.current_time()
                return
        finish = "length" if cut else "stop"
        if call is not None:
            delta = {"tool_calls": [_tool_delta(call, chat_id)]}
            await http.send_data(conn, stream, _event(_chunk(chat_id, delta)))
            finish = "tool_calls"
        await http.send_data(conn, stream, _event(_chunk(chat_id, {}, finish)))
        if usage:
            await http.send_data(conn, stream, _event(_usage_chunk(chat_id)))
        await http.send_data(conn, stream, b"data: [DONE]\n\n")
        await http.send(conn, stream, h11.EndOfMessage())

    async def _respond(
        self, conn: h11.Connection, stream: trio.SocketStream, body: Mapping[str, Any]
    ) -> None:
        """A Responses API call: text only. Its tools are not read (a Shell step goes on with
        the script's next step, as for an agent that offers no shell tool)."""
        found = responses.user_and_steps(body.get("input"))
        tokens = TOKEN.findall(found[0]) if found is not None else []
        served = self._serve(str(tokens[-1]) if tokens else None, found[1] if found else 0, None)
        step = served.step if served is not None else None
        text = step.text if isinstance(step, Say | Hold | Cut) else "ok"
        cut = isinstance(step, Cut)
        number = next(self._ids)
        response_id, item_id, model = f"resp_{number}", f"msg_{number}", str(body.get("model"))
        try:
            if not body.get("stream"):
                reply = responses.reply_object(response_id, item_id, model, text, cut=cut)
                await http.send_json(conn, stream, 200, reply)
                return
            head = h11.Response(
                status_code=200,
                headers=[("content-type", "text/event-stream"), ("cache-control", "no-cache")],
            )
            await http.send(conn, stream, head)
            for frame in responses.opening(response_id, item_id, model):
                await http.send_data(conn, stream, frame)
            for piece in _pieces(text):
                await http.send_data(conn, stream, responses.text_delta(item_id, piece))
            if isinstance(step, Hold) and served is not None:
                served.reached.set()
                if not await http.hold(stream, served.released):
                    served.gone = True
                    served.gone_at = trio.current_time()
                    return
            for frame in responses.closing(response_id, item_id, model, text, cut=cut):
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


def _pieces(text: str) -> list[str]:
    """`text` in up to three chunks, cut at spaces: a stream, not one blob."""
    words = text.split(" ")
    if len(words) < 3:
        return [text] if text else []
    third = max(1, len(words) // 3)
    cuts = [words[:third], words[third : 2 * third], words[2 * third :]]
    return [" ".join(c) + (" " if i < 2 else "") for i, c in enumerate(cuts)]


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunk(chat_id: str, delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def _usage_chunk(chat_id: str) -> dict[str, Any]:
    return {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _tool_delta(call: tuple[str, dict[str, Any]], chat_id: str) -> dict[str, Any]:
    name, arguments = call
    return {
        "index": 0,
        "id": f"call_{chat_id.rsplit('-', 1)[-1]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _completion(
    chat_id: str, text: str, call: tuple[str, dict[str, Any]] | None, *, cut: bool = False
) -> object:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if call is not None:
        tool = _tool_delta(call, chat_id)
        del tool["index"]
        message["tool_calls"] = [tool]
    return {
        "id": chat_id,
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if call is not None else "length" if cut else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
