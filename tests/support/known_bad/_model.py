"""Seeded defects of the model machine's target: makers of model adapters for an
OpenAI-compatible endpoint, each the built-in `OpenAICompatibleModel` with one mistake
(E1-E6)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any
from unittest import mock

from trio_agents import (
    Finish,
    ModelChunk,
    ModelEndpointError,
    ModelRequest,
    OpenAICompatibleModel,
    TextDelta,
    Usage,
)
from trio_agents._model import _openai, _sse

from ._seeded import Seeded


def _builtin(base_url: str, *, api_key: str | None, max_retries: int) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        "m", base_url=base_url, api_key=api_key, max_retries=max_retries, backoff=0.0, max_wait=0.05
    )


class _ToolResultsUnanswered(OpenAICompatibleModel):
    """Sends a tool result without the id of the call it answers."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        body = super().request_body(request)
        for message in body["messages"]:
            message.pop("tool_call_id", None)
        return body


def tool_results_unanswered(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _ToolResultsUnanswered(
        "m", base_url=base_url, api_key=api_key, max_retries=max_retries, backoff=0.0
    )


def query_dropped(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    """Builds the URL from the base URL's path alone: a query (Azure's api-version) is lost."""
    model = _builtin(base_url, api_key=api_key, max_retries=max_retries)
    model._url = model._url.split("?", 1)[0]  # pyright: ignore[reportPrivateUsage]
    return model


def _no_asked_wait(headers: object) -> float | None:
    return None


class _AskedWaitIgnored(OpenAICompatibleModel):
    """Retries after its own backoff, whatever wait the answer asked for (`Retry-After`
    read as advice)."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        with mock.patch.object(_openai, "_retry_after", _no_asked_wait):
            async with aclosing(super().stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk


def asked_wait_ignored(
    base_url: str, *, api_key: str | None, max_retries: int, max_wait: float = 0.05
) -> Any:
    return _AskedWaitIgnored(
        "m",
        base_url=base_url,
        api_key=api_key,
        max_retries=max_retries,
        backoff=0.0,
        max_wait=max_wait,
    )


_sse_event = _sse.ChatStream.event


def _data_only(self: _sse.ChatStream, event: _sse.ServerSentEvent) -> list[ModelChunk]:
    return _sse_event(self, dataclasses.replace(event, event="message"))


class _EventNamesIgnored(OpenAICompatibleModel):
    """Reads only the data of each event, never its `event:` name: an event named `error`
    whose data is the error itself (no `error` key) is read as an empty chunk."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        with mock.patch.object(_sse.ChatStream, "event", _data_only):
            async with aclosing(super().stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk


def event_names_ignored(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _EventNamesIgnored(
        "m", base_url=base_url, api_key=api_key, max_retries=max_retries, backoff=0.0
    )


class _Wrapping:
    def __init__(self, inner: OpenAICompatibleModel) -> None:
        self.inner = inner


class _TextAfterCalls(_Wrapping):
    """Gathers the text and yields it in one piece at the end, after the tool calls."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        text: list[str] = []
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    text.append(chunk.text)
                elif isinstance(chunk, Finish):
                    if text:
                        yield TextDelta("".join(text))
                    yield chunk
                else:
                    yield chunk


def text_after_calls(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _TextAfterCalls(_builtin(base_url, api_key=api_key, max_retries=max_retries))


class _UsageSwapped(_Wrapping):
    """Reads prompt_tokens as the reply's and completion_tokens as the request's."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        async with aclosing(self.inner.stream(request)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, Finish) and chunk.usage is not None:
                    usage = Usage(chunk.usage.output_tokens, chunk.usage.input_tokens)
                    chunk = dataclasses.replace(chunk, usage=usage)
                yield chunk


def usage_swapped(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _UsageSwapped(_builtin(base_url, api_key=api_key, max_retries=max_retries))


def attempts_as_retries(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    """Counts the first attempt among the retries: one retry short."""
    return _builtin(base_url, api_key=api_key, max_retries=max(0, max_retries - 1))


def key_in_error(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    """Shows the endpoint's error text as it came: some servers repeat the key in it."""
    model = _builtin(base_url, api_key=api_key, max_retries=max_retries)
    model._secrets = []  # pyright: ignore[reportPrivateUsage]
    return model


class _DroppedStreamFinishes(_Wrapping):
    """Takes a stream that broke after some text for a reply that ended there."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        streamed = 0
        async with aclosing(self.inner.stream(request)) as chunks:
            try:
                async for chunk in chunks:
                    streamed += 1
                    yield chunk
            except ModelEndpointError:
                if not streamed:
                    raise
                yield Finish("stop")


def dropped_stream_finishes(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _DroppedStreamFinishes(_builtin(base_url, api_key=api_key, max_retries=max_retries))


class _IteratorKept(_Wrapping):
    """Keeps every stream it opened, to read its usage later: one closed early is never
    closed."""

    def __init__(self, inner: OpenAICompatibleModel) -> None:
        super().__init__(inner)
        self.opened: list[AsyncIterator[ModelChunk]] = []

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        chunks = self.inner.stream(request)
        self.opened.append(chunks)
        async for chunk in chunks:
            yield chunk


def iterator_kept(base_url: str, *, api_key: str | None, max_retries: int) -> Any:
    return _IteratorKept(_builtin(base_url, api_key=api_key, max_retries=max_retries))


SEEDED = (
    Seeded("tool-results-unanswered", tool_results_unanswered, "model", "request-body"),
    Seeded("query-dropped", query_dropped, "model", "request-target-and-key"),
    Seeded("text-after-calls", text_after_calls, "model", "stream-content"),
    Seeded("usage-swapped", usage_swapped, "model", "finish-and-usage"),
    Seeded("attempts-as-retries", attempts_as_retries, "model", "retried-before-first-chunk"),
    Seeded("asked-wait-ignored", asked_wait_ignored, "model", "retried-before-first-chunk"),
    Seeded("key-in-error", key_in_error, "model", "failure-named-not-leaked"),
    Seeded("dropped-stream-finishes", dropped_stream_finishes, "model", "broken-stream-raises"),
    Seeded("event-names-ignored", event_names_ignored, "model", "broken-stream-raises"),
    Seeded("iterator-kept", iterator_kept, "model", "closed-early-disconnects"),
)
