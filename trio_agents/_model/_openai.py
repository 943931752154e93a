"""A `Model` for any OpenAI-compatible chat-completions endpoint, streamed over httpx on trio.

`OpenAICompatibleModel` posts `{base_url}/chat/completions` with `stream: true`, parses the
server-sent events as they arrive (`_model/_sse`), and yields text deltas, then the
reassembled tool calls, then one `Finish`. Rate limits (429), server errors (5xx) and
failed connects are retried with backoff, but only before the first chunk is yielded: a
stream that already reached the agent is never replayed. Closing the iterator (the agent
does when a step ends or is cancelled) closes the HTTP response at once.

httpx is imported on first use, not with `trio_agents`: the command-line front ends that
never talk to an endpoint do not pay for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import parse_qsl, urlsplit

import trio

from .._errors import ChatStreamError, ModelEndpointError
from .._frozen import thaw
from ._seam import Finish, Message, ModelChunk, ModelRequest, ToolSpec
from ._sse import ChatStream, SSEParser, describe, snippet

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatibleModel"]

logger = logging.getLogger("trio_agents.openai_model")

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
_RESERVED: Final = frozenset({"model", "messages", "stream", "stream_options", "tools"})
_ERROR_BODY_LIMIT: Final = 8192
_DONE_GRACE: Final = 1.0
# A 2xx with one of these is a completion that ignored `stream: true`, or a web page.
_NOT_A_STREAM: Final = frozenset({"application/json", "text/html"})
_HINTS: Final[Mapping[int, str]] = {
    400: "the endpoint rejected the request; check OPENAI_MODEL and the request options",
    401: "check OPENAI_API_KEY",
    403: "check OPENAI_API_KEY and that it may use this model",
    404: "check OPENAI_BASE_URL (it should end in /v1 or the like) and OPENAI_MODEL",
    429: "the endpoint is rate-limiting or out of quota; wait, or raise the limit",
}


class OpenAICompatibleModel:
    """A streaming chat-completions client for OpenAI and compatible servers (vLLM, llama.cpp,
    Ollama, LM Studio, proxies).

    Arguments are taken as given; `from_env()` reads `OPENAI_MODEL`, `OPENAI_BASE_URL` and
    `OPENAI_API_KEY` instead. Without `client`, each `stream()` call opens its own httpx
    client and closes it with the stream, so the model holds no connection between steps and
    needs no closing (design D41); pass a `client` you own to share a connection pool.

    max_retries: attempts after the first, on 429, 5xx and connect errors, before the first
        chunk only. Backoff doubles from `backoff` seconds (with jitter); a `Retry-After`
        header is honoured instead. Either wait is capped at `max_wait`.
    timeout: httpx timeout for this model's requests; None means 10 s to connect and 300 s
        for anything else, e.g. the gap between two streamed chunks. With an injected
        client, None leaves the client's own timeout in force.
    extra_body: more request fields, e.g. `{"max_tokens": 1024, "temperature": 0}`.

    model: the model name sent in every request.
    endpoint: the chat-completions URL as errors and logs show it: no credentials, no query.

    Raises ValueError for an empty model, a base URL that is not http(s), a negative or
    non-int `max_retries`, a negative or infinite `backoff` or `max_wait`, an API key with
    characters an HTTP header cannot hold, or `extra_body` setting a field the model sets.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        max_retries: int = 3,
        timeout: float | httpx.Timeout | None = None,
        backoff: float = 0.5,
        max_wait: float = 30.0,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                f"model must name the model the endpoint serves (e.g. 'gpt-4o-mini'), got {model!r}"
            )
        if not _is_http_url(base_url):
            raise ValueError(
                f"base_url must be an http:// or https:// URL such as {DEFAULT_BASE_URL!r}, "
                f"got {base_url!r}"
            )
        if not _is_count(max_retries):
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        for name, value in (("backoff", backoff), ("max_wait", max_wait)):
            if not _is_seconds(value):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        # Surrounding whitespace, as a key read from a file has, is no part of it. Anything
        # else a header cannot hold would fail only when sending, in an httpx error quoting
        # the header escaped, where redaction cannot find the key: refuse it now, unshown.
        api_key = api_key.strip() if api_key else None
        if api_key and not all(" " <= char <= "~" for char in api_key):
            raise ValueError(
                "api_key may hold only printable ASCII characters (it goes in an HTTP "
                "header); this one has a line end, a control or a non-ASCII character "
                "(not shown here)"
            )
        clash = sorted(_RESERVED & set(extra_body or {}))
        if clash:
            raise ValueError(
                f"extra_body may not set {', '.join(clash)}: the model sets those itself"
            )
        self.model = model.strip()
        parts = urlsplit(base_url)
        path = parts.path.rstrip("/") + "/chat/completions"
        # A query string (e.g. Azure's api-version) stays after the path.
        self._url = parts._replace(path=path, fragment="").geturl()
        # Shown in errors and logs: never userinfo or a query string, which may hold secrets.
        self.endpoint = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{path}"
        self._api_key = api_key or None
        # What an error text must never show, longest first: a server may echo the URL it
        # was asked, query and credentials included, or the key (D433).
        user = parts.username or ""
        hidden = [api_key or "", parts.query, parts.password or "", user if len(user) >= 8 else ""]
        hidden += [value for _, value in parse_qsl(parts.query) if len(value) >= 4]
        self._secrets = sorted({h for h in hidden if h}, key=len, reverse=True)
        self._client = client
        self._max_retries = max_retries
        self._timeout = timeout
        self._backoff = float(backoff)
        self._max_wait = float(max_wait)
        self._extra_body = dict(extra_body or {})
        self._ssl: ssl.SSLContext | None = None

    # -- configuration ------------------------------------------------------------------

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        max_retries: int = 3,
        timeout: float | httpx.Timeout | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> OpenAICompatibleModel:
        """A model configured by `OPENAI_MODEL` (required), `OPENAI_BASE_URL` (default the
        OpenAI API) and `OPENAI_API_KEY` (optional: local servers often need none), read from
        `env` (default `os.environ`). Raises ValueError if `OPENAI_MODEL` is not set, if
        `OPENAI_BASE_URL` is not an http(s) URL, or for what the constructor refuses."""
        env = os.environ if env is None else env
        base_url = env.get("OPENAI_BASE_URL", "").strip() or DEFAULT_BASE_URL
        if not _is_http_url(base_url):
            raise ValueError(
                f"OPENAI_BASE_URL must be an http:// or https:// URL such as "
                f"{DEFAULT_BASE_URL!r}, got {base_url!r}"
            )
        model = env.get("OPENAI_MODEL", "").strip()
        if not model:
            raise ValueError(
                "OPENAI_MODEL is not set: set it to the model your endpoint serves "
                "(e.g. OPENAI_MODEL=gpt-4o-mini), and OPENAI_BASE_URL for a server other than "
                "OpenAI's"
            )
        return cls(
            model,
            base_url=base_url,
            api_key=env.get("OPENAI_API_KEY"),
            client=client,
            max_retries=max_retries,
            timeout=timeout,
            extra_body=extra_body,
        )

    @staticmethod
    def is_configured(env: Mapping[str, str] | None = None) -> bool:
        """Whether `env` (default `os.environ`) names an endpoint's model, so that `from_env`
        would succeed. A key or base URL alone is not enough: no request can name a model."""
        env = os.environ if env is None else env
        return bool(env.get("OPENAI_MODEL", "").strip())

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"<OpenAICompatibleModel {self.model!r} at {self.endpoint} (api key: {key})>"

    # -- the Model seam -----------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream one chat-completions call for `request`, as `Model.stream` describes.

        Text deltas come as they arrive; the reassembled tool calls and the `Finish` come
        at the end. Waiting for the network is a checkpoint; chunks parsed from one read are
        yielded without one between them. Raises ModelEndpointError when the endpoint cannot
        be reached, answers an error status or something other than an event stream, or
        the stream breaks or ends before the model finished (only failures before the first
        chunk are retried).
        """
        # Lazy: httpx loads on first use, not with trio_agents (D45).
        import httpx

        body = self.request_body(request)
        # A client whose transport never blocks (an in-memory one) would make the whole
        # stream pass without a checkpoint.
        await trio.lowlevel.checkpoint()
        async with contextlib.AsyncExitStack() as stack:
            client = self._client
            if client is None:
                client = await stack.enter_async_context(self._new_client())
            response = await self._open(client, body)
            pieces = response.aiter_bytes()
            streamed = 0
            chat = ChatStream()
            try:
                parser = SSEParser()
                try:
                    async for piece in pieces:
                        for event in parser.feed(piece):
                            for chunk in chat.event(event):
                                streamed += 1
                                yield chunk
                        if chat.done:
                            # The body ends right after [DONE]: reading its end lets a shared
                            # client reuse the connection. A server that holds it open is not
                            # waited for.
                            with (
                                trio.move_on_after(_DONE_GRACE),
                                contextlib.suppress(httpx.TransportError),
                            ):
                                async for _ in pieces:
                                    pass
                            break
                except httpx.TransportError:
                    # A cut after the finish_reason is an end like any other (chunked, httpx
                    # reports it as a protocol error): only the usage may be missing.
                    if not chat.complete:
                        raise
                if not chat.complete:
                    raise ModelEndpointError(
                        f"the stream from {self.endpoint} ended before the model finished "
                        f"(no finish_reason, no [DONE]) after {streamed} text chunks: the "
                        "connection was dropped; send the prompt again",
                        url=self.endpoint,
                        status=response.status_code,
                    )
                final = chat.finish()
            except ChatStreamError as exc:
                raise ModelEndpointError(
                    f"the stream from {self.endpoint} failed after {streamed} text chunks: "
                    f"{self._redact(str(exc))}",
                    url=self.endpoint,
                    status=response.status_code,
                ) from None
            except httpx.TransportError as exc:
                raise ModelEndpointError(
                    f"the stream from {self.endpoint} broke after {streamed} text chunks "
                    f"({_describe_transport(exc, self._redact)}); send the prompt again",
                    url=self.endpoint,
                    status=response.status_code,
                ) from exc
            finally:
                # Also when cancelled or closed early: the server sees the disconnect at once
                # and stops generating.
                await _close(response, pieces)
            finish = final[-1]
            assert isinstance(finish, Finish)
            if chat.unknown_reason is not None:
                logger.warning(
                    "model endpoint %s finished with finish_reason %r, unknown to this "
                    "client; recorded as %r",
                    self.endpoint,
                    chat.unknown_reason,
                    finish.reason,
                )
            for chunk in final:
                yield chunk

    # -- request building ---------------------------------------------------------------

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the chat-completions call for `request`."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        body.update(self._extra_body)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self._api_key is not None:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _new_client(self) -> httpx.AsyncClient:
        # Lazy: httpx loads on first use, not with trio_agents (D45).
        import httpx

        if self._ssl is None:
            # Building a context loads the CA bundle (tens of ms, blocking the event loop):
            # once per model, not once per step, and not at all for a plain-HTTP endpoint (a
            # local server), whose requests never use it. Its context, with no CA, verifies
            # nothing and so trusts nothing: a TLS connection through it fails closed.
            if self._url.startswith("http://"):
                self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            else:
                self._ssl = httpx.create_ssl_context()
        timeout = self._timeout if self._timeout is not None else httpx.Timeout(300.0, connect=10.0)
        return httpx.AsyncClient(timeout=timeout, verify=self._ssl)

    # -- the request and its retries ----------------------------------------------------

    async def _open(self, client: httpx.AsyncClient, body: Mapping[str, Any]) -> httpx.Response:
        """Send the request, retrying what may be retried; return a 2xx streaming response."""
        # Lazy: httpx loads on first use, not with trio_agents (D45).
        import httpx

        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            request = client.build_request(
                "POST",
                self._url,
                json=body,
                headers=self._headers(),
                timeout=httpx.USE_CLIENT_DEFAULT if self._timeout is None else self._timeout,
            )
            try:
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt == attempts:
                    raise ModelEndpointError(
                        f"could not connect to {self.endpoint}{_attempts(attempt)} "
                        f"({_describe_transport(exc, self._redact)}); "
                        "check OPENAI_BASE_URL and that the server is running",
                        url=self.endpoint,
                    ) from exc
                await self._wait(attempt, None, type(exc).__name__)
                continue
            except httpx.TransportError as exc:
                raise ModelEndpointError(
                    f"POST {self.endpoint} failed before any answer "
                    f"({_describe_transport(exc, self._redact)})",
                    url=self.endpoint,
                ) from exc
            status = response.status_code
            content_type = _content_type(response)
            if 200 <= status < 300 and content_type not in _NOT_A_STREAM:
                return response
            try:
                text = await _read_some(response)
            except httpx.TransportError:
                text = ""
            if 200 <= status < 300:
                raise ModelEndpointError(
                    f"POST {self.endpoint} answered HTTP {status} with {content_type} instead "
                    f"of an event stream ({self._redact(_error_text(text))}); check that "
                    "OPENAI_BASE_URL is the API's URL (often ending in /v1) and that the "
                    "server supports stream: true",
                    url=self.endpoint,
                    status=status,
                )
            if (status == 429 or status >= 500) and attempt < attempts:
                await self._wait(attempt, _retry_after(response.headers), f"HTTP {status}")
                continue
            hint = _HINTS.get(status, "the endpoint is failing; try again later")
            raise ModelEndpointError(
                f"POST {self.endpoint} answered HTTP {status} "
                f"{response.reason_phrase}{_attempts(attempt)}: "
                f"{self._redact(_error_text(text))}; {hint}",
                url=self.endpoint,
                status=status,
            )
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _wait(self, attempt: int, retry_after: float | None, why: str) -> None:
        if retry_after is not None:
            delay = min(retry_after, self._max_wait)
        else:
            # Jitter, so agents rate-limited together do not retry in lockstep.
            delay = min(self._backoff * 2 ** (attempt - 1), self._max_wait)
            delay *= random.uniform(0.75, 1.0)
        logger.warning(
            "model endpoint %s: %s; retry %d of %d in %.2fs",
            self.endpoint,
            why,
            attempt,
            self._max_retries,
            delay,
        )
        await trio.sleep(delay)

    def _redact(self, text: str) -> str:
        # Some servers echo the credential, or the URL with its query, in an error body.
        for secret in self._secrets:
            shown = "<api key>" if secret == self._api_key else "<hidden>"
            text = text.replace(secret, shown)
        return text


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.call_id or "", "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # OpenAI's own shape for a reply that only calls tools is a null content.
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(thaw(call.arguments), ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": thaw(tool.parameters),
        },
    }


def _is_http_url(value: object) -> bool:
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _is_count(value: object) -> bool:
    # Checked at run time: the annotation does not stop a caller passing 2.5 or True.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


def _attempts(attempt: int) -> str:
    return f" after {attempt} attempts" if attempt > 1 else ""


def _describe_transport(exc: Exception, redact: Callable[[str], str]) -> str:
    return f"{type(exc).__name__}: {redact(str(exc)) or 'no detail'}"


def _content_type(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "")).split(";")[0].strip().lower()


async def _read_some(response: httpx.Response) -> str:
    """At most `_ERROR_BODY_LIMIT` bytes of the body, then close it: an error page is no
    reason to wait."""
    data = bytearray()
    pieces = response.aiter_bytes()
    try:
        async for piece in pieces:
            data += piece
            if len(data) >= _ERROR_BODY_LIMIT:
                break
    finally:
        await _close(response, pieces)
    return data[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")


async def _close(response: httpx.Response, pieces: AsyncIterator[bytes]) -> None:
    """Close `response`, and unwind the iterator over its body.

    httpx reads a body through a chain of async generators. One left suspended is finalized
    by the garbage collector, which trio reports as a ResourceWarning (encode/httpx#3686), and
    `aclose()` on the outer one cannot reach the inner ones. Once the response is closed, the
    next read fails at once, and that failure unwinds the whole chain.
    """
    try:
        await response.aclose()
    finally:
        with contextlib.suppress(Exception):
            async for _ in pieces:
                pass


def _error_text(text: str) -> str:
    try:
        body: object = json.loads(text)
    except ValueError:
        return snippet(text) or "(empty body)"
    if isinstance(body, dict):
        return describe(cast("dict[str, Any]", body))
    return snippet(text)


def _retry_after(headers: httpx.Headers) -> float | None:
    """The server's requested wait in seconds (`retry-after-ms` or `retry-after` in
    seconds; an HTTP date is ignored and the backoff used instead)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 <= seconds < math.inf:
            return seconds
    return None
