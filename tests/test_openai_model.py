"""OpenAICompatibleModel against a real HTTP server on loopback, and its pure SSE core.

The server (`tests/support/sse_server.py`) runs in the test's own trio run on 127.0.0.1, so these
tests keep the autojump MockClock: the backoff and Retry-After waits are virtual (and
measured exactly), and a hang is caught by the deadlock guard. Where a test needs the
network to split the stream at a given point, the server holds on an event the test
releases; nothing waits on the clock.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import json
import logging
import pathlib
import re
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import trio_agents
from trio_agents import (
    AgentOptions,
    Finish,
    Message,
    ModelChunk,
    ModelEndpointError,
    ModelRequest,
    OpenAICompatibleModel,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    open_agent,
)
from trio_agents._model._sse import ChatStream, ChatStreamError, ServerSentEvent, SSEParser
from trio_agents.testing import EchoTool

from .support.helpers import of_type, turn_ends
from .support.sse_server import (
    DONE,
    DROP,
    Hold,
    Reply,
    ScriptedServer,
    Step,
    error_reply,
    event,
    finish,
    serve,
    text,
    tool_delta,
    usage,
)

KEY = "sk-test-DO-NOT-LEAK-4f1c9a"
MODEL = "test-model"
ECHO = ToolSpec("echo", EchoTool.description, EchoTool.parameters)


def request(*messages: Message, tools: Sequence[ToolSpec] = ()) -> ModelRequest:
    return ModelRequest(messages or (Message("user", "hi"),), tools, AgentOptions())


def model_for(server: ScriptedServer, **kwargs: Any) -> OpenAICompatibleModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAICompatibleModel(MODEL, base_url=server.base_url, **kwargs)


async def collect(model: OpenAICompatibleModel, req: ModelRequest | None = None) -> list[Any]:
    return [chunk async for chunk in model.stream(req or request())]


async def failure(
    model: OpenAICompatibleModel, req: ModelRequest | None = None
) -> tuple[list[ModelChunk], ModelEndpointError]:
    """The chunks streamed before the model raised, and what it raised."""
    got: list[ModelChunk] = []
    try:
        async for chunk in model.stream(req or request()):
            got.append(chunk)
    except ModelEndpointError as exc:
        return got, exc
    raise AssertionError(f"the stream ended without an error; it yielded {got}")


def sse_reply(*steps: Step) -> Reply:
    return Reply(body=list(steps))


def text_reply(*pieces: str, reason: str = "stop") -> Reply:
    return sse_reply(*(text(p) for p in pieces), finish(reason), usage(10, 3), DONE)


def all_tasks() -> set[trio.lowlevel.Task]:
    found: set[trio.lowlevel.Task] = set()
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if task is None:
            continue
        found.add(task)
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return found


# -- 1. plain text ------------------------------------------------------------------------


async def test_text_streams_as_deltas_and_usage_arrives_in_a_final_chunk() -> None:
    role = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    split = text("wor")
    reply = sse_reply(
        role,
        text("Hel"),
        b": keep-alive comment\n\n",
        text("lo, "),
        split[:9],  # one event written in two sends, cut inside its JSON
        split[9:],
        text("ld").replace(b"\n", b"\r\n"),
        finish("stop"),
        usage(12, 4),
        DONE,
    )
    async with serve(reply) as server:
        model = model_for(server)
        req = request(Message("system", "be brief"), Message("user", "say hello"))
        chunks = await collect(model, req)
    assert chunks == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("wor"),
        TextDelta("ld"),
        Finish("stop", Usage(12, 4)),
    ]
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.body == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "say hello"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "text/event-stream"
    assert not server.disconnected.is_set()  # the whole body was read, not cut short


async def test_text_reaches_the_caller_before_the_stream_ends() -> None:
    hold = Hold()
    half = text("lo")
    reply = sse_reply(text("Hel"), half[:12], hold, half[12:], finish("stop"), DONE)
    got: list[ModelChunk] = []
    async with serve(reply) as server, trio.open_nursery() as nursery:
        model = model_for(server)

        async def consume() -> None:
            async for chunk in model.stream(request()):
                got.append(chunk)

        nursery.start_soon(consume)
        await hold.reached.wait()
        await trio.testing.wait_all_tasks_blocked()
        # The client holds the first half of the second event and has passed on the first.
        assert got == [TextDelta("Hel")]
        hold.release.set()
    assert got == [TextDelta("Hel"), TextDelta("lo"), Finish("stop")]


# -- 2. tool calls ------------------------------------------------------------------------


def two_calls_reply() -> Reply:
    # Call 0's arguments are cut mid-string and mid-UTF-8 character; call 1 interleaves.
    second = tool_delta(0, arguments='lo wörld"}')
    cut = second.index("ö".encode()) + 1
    return sse_reply(
        text("Let me echo."),
        tool_delta(0, id="call_a", name="echo", arguments=""),
        tool_delta(1, id="call_b", name="echo", arguments='{"te'),
        tool_delta(0, arguments='{"text": "hel'),
        second[:cut],
        second[cut:],
        tool_delta(1, arguments='xt": "sec'),
        tool_delta(1, arguments='ond"}'),
        finish("tool_calls"),
        usage(30, 9),
        DONE,
    )


async def test_tool_call_fragments_are_reassembled_into_whole_calls() -> None:
    async with serve(two_calls_reply()) as server:
        chunks = await collect(model_for(server), request(tools=[ECHO]))
    assert chunks == [
        TextDelta("Let me echo."),
        ToolCall("call_a", "echo", {"text": "hello wörld"}),
        ToolCall("call_b", "echo", {"text": "second"}),
        Finish("tool_calls", Usage(30, 9)),
    ]
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "description": EchoTool.description,
                "parameters": dict(EchoTool.parameters),
            },
        }
    ]


async def test_an_agent_turn_runs_the_tools_and_sends_their_results_back() -> None:
    async with serve(two_calls_reply(), text_reply("Both echoed.")) as server:
        model = model_for(server)
        options = AgentOptions(system_prompt="you echo")
        async with open_agent(model, tools=[EchoTool()], options=options) as agent:
            agent.send("echo two things")
            await agent.wait_idle()
    assert turn_ends(agent) == [{"kind": "completed"}]
    results = {d["call_id"]: d["content"] for d in of_type(agent, "tool/result")}
    assert results == {"call_a": "hello wörld", "call_b": "second"}
    assert [d["content"] for d in of_type(agent, "assistant/message")] == [
        "Let me echo.",
        "Both echoed.",
    ]
    first, second = (r.body for r in server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "you echo"},
        {"role": "user", "content": "echo two things"},
    ]
    system, user, assistant, *tools = second["messages"]
    assert (system, user) == tuple(first["messages"])
    calls = assistant.pop("tool_calls")
    assert assistant == {"role": "assistant", "content": "Let me echo."}
    assert [(c["id"], c["type"], c["function"]["name"]) for c in calls] == [
        ("call_a", "function", "echo"),
        ("call_b", "function", "echo"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"text": "hello wörld"},
        {"text": "second"},
    ]
    # Tool results are recorded in completion order, which the scheduler may vary.
    assert sorted(tools, key=lambda m: str(m["tool_call_id"])) == [
        {"role": "tool", "tool_call_id": "call_a", "content": "hello wörld"},
        {"role": "tool", "tool_call_id": "call_b", "content": "second"},
    ]


# -- 3. length ----------------------------------------------------------------------------


async def test_a_reply_cut_at_the_token_limit_finishes_length() -> None:
    async with serve(text_reply("Once upon a", reason="length")) as server:
        chunks = await collect(model_for(server))
    assert chunks == [TextDelta("Once upon a"), Finish("length", Usage(10, 3))]


async def test_a_tool_call_cut_at_the_token_limit_is_dropped_not_an_error() -> None:
    reply = sse_reply(
        tool_delta(0, id="call_a", name="echo", arguments='{"text": "unfinis'),
        finish("length"),
        DONE,
    )
    async with serve(reply) as server:
        chunks = await collect(model_for(server))
    assert chunks == [Finish("length")]


# -- 4. retries ---------------------------------------------------------------------------


async def test_a_429_is_retried_after_its_retry_after(caplog: pytest.LogCaptureFixture) -> None:
    busy = error_reply(429, "slow down", ("retry-after", "7"))
    async with serve(busy, text_reply("ok")) as server:
        start = trio.current_time()
        with caplog.at_level(logging.WARNING, logger="trio_agents.openai_model"):
            chunks = await collect(model_for(server))
        waited = trio.current_time() - start
    assert chunks == [TextDelta("ok"), Finish("stop", Usage(10, 3))]
    assert len(server.requests) == 2
    assert waited == pytest.approx(7.0)  # virtual seconds: the wait is a trio.sleep
    (record,) = caplog.records
    assert "HTTP 429" in record.getMessage()
    assert "retry 1 of 3" in record.getMessage()


async def test_retry_after_is_capped_by_max_wait() -> None:
    busy = error_reply(503, "down for maintenance", ("retry-after", "3600"))
    async with serve(busy, text_reply("ok")) as server:
        start = trio.current_time()
        await collect(model_for(server, max_wait=12))
        assert trio.current_time() - start == pytest.approx(12.0)


async def test_503_past_max_retries_names_the_status_and_the_url() -> None:
    replies = [error_reply(503, "overloaded, try later") for _ in range(4)]
    async with serve(*replies) as server:
        model = model_for(server)
        start = trio.current_time()
        got, error = await failure(model)
        waited = trio.current_time() - start
    assert got == []
    assert len(server.requests) == 4  # the first try and max_retries=3 more
    message = str(error)
    assert "HTTP 503" in message
    assert f"{server.base_url}/chat/completions" in message
    assert "after 4 attempts" in message
    assert "overloaded, try later" in message
    assert (error.status, error.url) == (503, f"{server.base_url}/chat/completions")
    # Backoff 0.5, 1, 2 seconds, each with up to 25% jitter off.
    assert 0.75 * 3.5 <= waited <= 3.5


async def test_a_404_is_not_retried_and_says_what_to_check() -> None:
    async with serve(error_reply(404, "The model `nope` does not exist")) as server:
        _, error = await failure(model_for(server))
    assert len(server.requests) == 1
    assert "HTTP 404 Not Found" in str(error)
    assert "does not exist" in str(error)
    assert "check OPENAI_BASE_URL" in str(error)


async def test_a_refused_connect_is_retried_until_the_server_is_there(
    caplog: pytest.LogCaptureFixture,
) -> None:
    probe = trio.socket.socket()
    await probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    model = OpenAICompatibleModel(MODEL, base_url=f"http://127.0.0.1:{port}/v1")
    got: list[ModelChunk] = []
    consumed = trio.Event()
    with caplog.at_level(logging.WARNING, logger="trio_agents.openai_model"):
        async with trio.open_nursery() as nursery:

            async def consume() -> None:
                got.extend(await collect(model))
                consumed.set()

            nursery.start_soon(consume)
            # While this task polls, the clock cannot jump: the backoff is still ahead.
            while not caplog.records:
                await trio.testing.wait_all_tasks_blocked()
            assert "ConnectError" in caplog.records[0].getMessage()
            async with serve(text_reply("up now"), port=port) as server:
                await consumed.wait()
    assert got == [TextDelta("up now"), Finish("stop", Usage(10, 3))]
    assert len(server.requests) == 1


async def test_connect_errors_past_max_retries_say_to_check_the_base_url() -> None:
    probe = trio.socket.socket()
    await probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    model = OpenAICompatibleModel(MODEL, base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    _, error = await failure(model)
    assert "could not connect to" in str(error)
    assert f"127.0.0.1:{port}/v1/chat/completions" in str(error)
    assert "after 2 attempts" in str(error)
    assert "check OPENAI_BASE_URL" in str(error)
    assert error.status is None


# -- 5. errors after the first chunk ------------------------------------------------------


def mid_stream_error() -> Reply:
    failure = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    return sse_reply(text("Hel"), event(failure))


async def test_an_error_after_the_first_chunk_is_raised_not_retried() -> None:
    async with serve(mid_stream_error(), text_reply("a retry must not happen")) as server:
        got, error = await failure(model_for(server))
    assert got == [TextDelta("Hel")]
    assert len(server.requests) == 1
    assert "upstream overloaded (server_error)" in str(error)
    assert f"{server.base_url}/chat/completions" in str(error)
    assert "after 1 text chunks" in str(error)


async def test_in_an_agent_a_mid_stream_error_ends_the_turn_error() -> None:
    async with (
        serve(mid_stream_error(), text_reply("never")) as server,
        open_agent(model_for(server)) as agent,
    ):
        agent.send("hello")
        await agent.wait_idle()
    (end,) = turn_ends(agent)
    assert end["kind"] == "error"
    assert end["message"].startswith("ModelEndpointError: the stream from http://127.0.0.1:")
    assert "upstream overloaded" in end["message"]
    assert of_type(agent, "assistant/message") == [{"content": "Hel", "interrupted": True}]
    assert len(server.requests) == 1


async def test_a_read_timeout_mid_stream_is_an_error_after_exactly_the_timeout() -> None:
    hold = Hold()  # never released
    async with serve(sse_reply(text("Hel"), hold)) as server:
        start = trio.current_time()
        got, error = await failure(model_for(server, timeout=5.0))
        assert trio.current_time() - start == pytest.approx(5.0)
        hold.release.set()
    assert got == [TextDelta("Hel")]
    assert "ReadTimeout" in str(error)
    assert len(server.requests) == 1


# -- 6. dropped connections ---------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close"])
async def test_a_connection_dropped_mid_stream_is_an_error(framing: Any) -> None:
    reply = Reply(body=[text("Hel"), text("lo"), DROP], framing=framing)
    async with serve(reply, text_reply("no retry")) as server:
        got, error = await failure(model_for(server))
    assert got == [TextDelta("Hel"), TextDelta("lo")]
    assert len(server.requests) == 1
    assert "after 2 text chunks" in str(error)
    assert "send the prompt again" in str(error)
    if framing == "close":
        assert "no finish_reason, no [DONE]" in str(error)
    else:
        assert "RemoteProtocolError" in str(error)


@pytest.mark.parametrize("framing", ["chunked", "close"])
async def test_an_end_after_the_finish_reason_without_done_is_complete(framing: Any) -> None:
    # Chunked (what OpenAI sends), the cut is a protocol error in httpx: still an end after
    # the model finished, so only the usage, which followed, is lost.
    reply = Reply(body=[text("Hi"), finish("stop"), usage(4, 1), DROP], framing=framing)
    async with serve(reply) as server:
        chunks = await collect(model_for(server))
    assert chunks == [TextDelta("Hi"), Finish("stop", Usage(4, 1))]


async def test_a_body_held_open_after_done_delays_the_finish_by_the_grace_only() -> None:
    hold = Hold()  # never released
    async with serve(sse_reply(text("Hi"), finish("stop"), DONE, hold)) as server:
        start = trio.current_time()
        chunks = await collect(model_for(server))
        assert trio.current_time() - start == pytest.approx(1.0)
        hold.release.set()
    assert chunks == [TextDelta("Hi"), Finish("stop")]


async def test_a_json_answer_to_a_streaming_request_is_an_error() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    reply = Reply(200, [body], (("content-type", "application/json"),), framing="length")
    async with serve(reply) as server:
        _, error = await failure(model_for(server))
    assert "HTTP 200 with application/json instead of an event stream" in str(error)
    assert "check that OPENAI_BASE_URL" in str(error)


# -- 7. cancellation ----------------------------------------------------------------------


async def test_cancelling_the_turn_mid_stream_closes_the_connection_at_once() -> None:
    hold = Hold()  # never released: only the client's close can end this reply
    async with serve(sse_reply(text("Hel"), text("lo"), hold)) as server:
        baseline = all_tasks()
        async with open_agent(model_for(server)) as agent:
            agent.send("talk")
            await hold.reached.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert [d["content"] for d in of_type(agent, "user/message")] == ["talk"]
            assert agent.cancel("changed my mind") is True
            await agent.wait_idle()
            start = trio.current_time()
            await server.disconnected.wait()
            # No virtual time passed: the close was seen, not timed out.
            assert trio.current_time() == start
            assert server.disconnected_after == 2  # the two text events, then the hold
            await trio.testing.wait_all_tasks_blocked()
            assert server.open_connections == 0
            assert turn_ends(agent) == [
                {"kind": "aborted", "reason": "changed my mind", "cause": "user"}
            ]
            assert of_type(agent, "assistant/message") == [
                {"content": "Hello", "interrupted": True}
            ]
        # Nothing of the model's is left running (the agent's own tasks are gone too).
        assert all_tasks() <= baseline
    assert len(server.requests) == 1


async def test_closing_the_iterator_early_closes_the_connection_without_warnings() -> None:
    hold = Hold()
    async with serve(sse_reply(text("Hel"), text("lo"), hold)) as server:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with contextlib.aclosing(model_for(server).stream(request())) as chunks:
                assert await anext(chunks) == TextDelta("Hel")
            gc.collect()
            await server.disconnected.wait()
            await trio.testing.wait_all_tasks_blocked()
        hold.release.set()
    assert [str(w.message) for w in caught] == []


async def test_an_injected_client_is_used_and_left_open() -> None:
    async with serve(text_reply("one"), text_reply("two")) as server, httpx.AsyncClient() as client:
        model = model_for(server, client=client)
        assert (await collect(model))[0] == TextDelta("one")
        assert (await collect(model))[0] == TextDelta("two")
        assert not client.is_closed
    assert len(server.requests) == 2


# -- 8. the API key -----------------------------------------------------------------------


async def test_the_key_is_sent_as_a_bearer_token_and_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    echoed = f"Incorrect API key provided: {KEY}"
    replies = [error_reply(429, echoed, ("retry-after", "1"))] + [error_reply(401, echoed)] * 2
    async with serve(*replies) as server:
        model = model_for(server)
        with caplog.at_level(logging.DEBUG):
            _, error = await failure(model)
            async with open_agent(model) as agent:
                agent.send("hi")
                await agent.wait_idle()
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 3
    assert "HTTP 401" in str(error)
    assert "Incorrect API key provided: <api key>" in str(error)
    assert "check OPENAI_API_KEY" in str(error)
    assert caplog.records  # the retry warning, httpx's own request lines, the failed turn
    for text_shown in [str(error), repr(error), repr(model), *turn_ends(agent)[0].values()]:
        assert KEY not in text_shown
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in str(record.args)


async def test_a_key_read_with_its_line_end_is_sent_without_it() -> None:
    async with serve(text_reply("hi")) as server:
        await collect(model_for(server, api_key=f" {KEY}\r\n"))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_key_that_cannot_go_in_a_header_is_refused_without_being_shown() -> None:
    # httpx would refuse it only when sending, in an error that quotes the header, key and
    # all, where the redaction cannot find it (it is escaped there): the turn's error, the
    # store and the log would show it.
    for bad in (f"{KEY[:8]}\n{KEY[8:]}", f"{KEY}\x00", f"{KEY}\u00e9"):
        with pytest.raises(ValueError, match="api_key") as info:
            OpenAICompatibleModel(MODEL, api_key=bad)
        assert KEY[:8] not in str(info.value)
        assert KEY[8:] not in str(info.value)


async def test_without_a_key_no_authorization_header_is_sent() -> None:
    async with serve(text_reply("hi")) as server:
        await collect(model_for(server, api_key=None))
    assert "authorization" not in server.requests[0].headers


# -- request building and configuration (no server) ---------------------------------------


def test_the_request_body_maps_history_tools_and_extra_fields() -> None:
    frozen = MappingProxyType({"text": "x", "tags": ("a", "b")})
    model = OpenAICompatibleModel(MODEL, extra_body={"max_tokens": 64, "temperature": 0})
    req = ModelRequest(
        [
            Message("system", "sys"),
            Message("user", "do it", source="prompt"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "echo", frozen),)),
            Message("tool", "x", call_id="c1"),
            Message("user", "job done", source="context"),
            Message("assistant", "done"),
        ],
        [ECHO],
        AgentOptions(),
    )
    body = model.request_body(req)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "do it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"text": "x", "tags": ["a", "b"]}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "user", "content": "job done"},
        {"role": "assistant", "content": "done"},
    ]
    assert body["tools"][0]["function"]["name"] == "echo"
    assert (body["max_tokens"], body["temperature"], body["stream"]) == (64, 0, True)
    json.dumps(body)  # everything in it is plain JSON


def test_from_env_reads_the_three_variables_and_requires_the_model() -> None:
    env = {
        "OPENAI_MODEL": " local-llama ",
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1/",
        "OPENAI_API_KEY": KEY,
    }
    model = OpenAICompatibleModel.from_env(env)
    assert (model.model, model.endpoint) == (
        "local-llama",
        "http://127.0.0.1:8080/v1/chat/completions",
    )
    assert KEY not in repr(model)
    assert OpenAICompatibleModel.is_configured(env)
    default = OpenAICompatibleModel.from_env({"OPENAI_MODEL": "gpt-4o-mini"})
    assert default.endpoint == "https://api.openai.com/v1/chat/completions"
    with pytest.raises(ValueError, match="OPENAI_BASE_URL must be an http"):
        OpenAICompatibleModel.from_env({"OPENAI_MODEL": "m", "OPENAI_BASE_URL": "localhost:8080"})
    for missing in ({}, {"OPENAI_API_KEY": KEY, "OPENAI_MODEL": "  "}):
        assert not OpenAICompatibleModel.is_configured(missing)
        with pytest.raises(ValueError, match="OPENAI_MODEL is not set"):
            OpenAICompatibleModel.from_env(missing)


def test_credentials_in_the_base_url_stay_out_of_the_endpoint_shown() -> None:
    model = OpenAICompatibleModel(MODEL, base_url="https://user:pw@proxy.test/v1?key=abc")
    assert model.endpoint == "https://proxy.test/v1/chat/completions"
    assert "pw" not in repr(model)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"model": ""}, "model"),
        ({"base_url": "api.openai.com/v1"}, "base_url"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
        ({"backoff": float("inf")}, "backoff"),
        ({"max_wait": -1}, "max_wait"),
        ({"extra_body": {"stream": False}}, "stream"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, Any], named: str) -> None:
    model = kwargs.pop("model", MODEL)
    with pytest.raises(ValueError, match=named):
        OpenAICompatibleModel(model, **kwargs)


def test_importing_trio_agents_does_not_import_httpx() -> None:
    code = "import sys, trio_agents; assert 'httpx' not in sys.modules, 'httpx imported eagerly'"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_sse_core_imports_neither_trio_nor_httpx() -> None:
    path = pathlib.Path(trio_agents.__file__).parent / "_model" / "_sse.py"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not {"trio", "httpx", "anyio", "hypothesis"} & imported


# -- 9. the SSE parser --------------------------------------------------------------------


def parse(*pieces: bytes) -> list[ServerSentEvent]:
    parser = SSEParser()
    return [e for piece in pieces for e in parser.feed(piece)]


def test_sse_fields_comments_and_multi_line_data() -> None:
    stream = (
        b": a comment\n"
        b"event: update\nid: 7\ndata: first\ndata:second\ndata\ndata:  two spaces\n\n"
        b'retry: 100\nunknown: ignored\ndata: {"a": 1}\n\n'
        b"data: no blank line after me"
    )
    assert parse(stream) == [
        ServerSentEvent("first\nsecond\n\n two spaces", "update", "7"),
        ServerSentEvent('{"a": 1}', "message", "7"),
    ]


def test_sse_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse(b"\n\n: only a comment\n\nevent: x\n\n") == []
    assert parse(b"data:\n\n") == [ServerSentEvent("")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_sse_line_endings_split_between_chunks(eol: bytes) -> None:
    stream = b"data: a" + eol + eol + b"data: b" + eol + eol
    whole = parse(stream)
    assert whole == [ServerSentEvent("a"), ServerSentEvent("b")]
    for cut in range(len(stream) + 1):
        assert parse(stream[:cut], stream[cut:]) == whole


def test_sse_a_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r\n") == [ServerSentEvent("a\nb")]


def test_sse_byte_order_mark_is_dropped_even_when_split() -> None:
    assert parse(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [ServerSentEvent("x")]
    assert parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []  # only the first is a BOM


def test_sse_a_line_that_never_ends_is_refused() -> None:
    parser = SSEParser(max_event_bytes=100)
    with pytest.raises(ChatStreamError, match="100 bytes"):
        parser.feed(b"data: " + b"x" * 200)


_LINE_TEXT = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text_out: list[str] = []
    expected: list[ServerSentEvent] = []
    if draw(st.booleans()):
        text_out.append("\ufeff")
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            text_out.append(":" + draw(_LINE_TEXT) + eol)
        name = draw(st.sampled_from(["", "message", "update", "weird: name"]))
        if name:
            text_out.append(f"event: {name}{eol}")
        lines = draw(st.lists(_LINE_TEXT, min_size=1, max_size=3))
        text_out.extend(f"data: {line}{eol}" for line in lines)
        text_out.append(eol)
        expected.append(ServerSentEvent("\n".join(lines), name or "message"))
    return "".join(text_out).encode(), expected


@given(event_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_sse_splitting_the_bytes_anywhere_yields_the_same_events(
    stream: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    data, expected = stream
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert parse(data) == expected
    assert parse(*pieces) == expected


# -- the chat-chunk reassembly ------------------------------------------------------------


def chat(*payloads: object) -> tuple[list[ModelChunk], ChatStream]:
    stream = ChatStream()
    out: list[ModelChunk] = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.extend(stream.event(ServerSentEvent(data)))
    return out, stream


def delta(delta: Mapping[str, Any], reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": dict(delta), "finish_reason": reason}]}


def call(index: int | None = None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {} if index is None else {"index": index}
    if "id" in fields:
        out["id"] = fields.pop("id")
    return delta({"tool_calls": [{**out, "function": fields}]})


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("stop", "stop"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("length", "length"),
        ("content_filter", "stop"),
    ],
)
def test_finish_reasons_are_mapped(reason: str, mapped: str) -> None:
    _, stream = chat(delta({"content": "x"}, reason))
    assert stream.complete
    assert not stream.done
    assert stream.finish() == [Finish(mapped, None)]  # type: ignore[arg-type]
    assert stream.unknown_reason == (None if reason != "content_filter" else reason)


def test_invalid_tool_arguments_name_the_tool_and_the_text() -> None:
    _, stream = chat(call(0, id="c1", name="echo", arguments='{"text": oops}'), "[DONE]")
    with pytest.raises(ChatStreamError) as info:
        stream.finish()
    message = str(info.value)
    assert "tool call 'echo' (id 'c1')" in message
    assert '{"text": oops}' in message
    assert "not valid JSON" in message


def test_arguments_that_are_not_an_object_are_an_error() -> None:
    _, stream = chat(call(0, id="c1", name="echo", arguments="[1, 2]"), "[DONE]")
    with pytest.raises(ChatStreamError, match="not a JSON object"):
        stream.finish()


def test_calls_without_index_and_empty_arguments() -> None:
    _, stream = chat(
        call(id="a", name="ls", arguments=""),
        call(id="b", name="cat", arguments='{"f": '),
        call(arguments='"x"}'),
        delta({}, "tool_calls"),
    )
    assert stream.finish() == [
        ToolCall("a", "ls", {}),
        ToolCall("b", "cat", {"f": "x"}),
        Finish("tool_calls"),
    ]


def test_a_name_sent_in_pieces_is_joined_and_a_name_sent_again_is_kept_once() -> None:
    # Gemini splits a long name across fragments; MiniMax (via NIM) repeats it in each.
    _, stream = chat(
        call(0, id="a", name="edit_ex", arguments=""),
        call(0, name="isting_file", arguments='{"p": '),
        call(0, arguments="1}"),
        call(1, id="b", name="read_file", arguments='{"p": '),
        call(1, id="b", name="read_file", arguments="2}"),
        delta({}, "tool_calls"),
    )
    assert stream.finish() == [
        ToolCall("a", "edit_existing_file", {"p": 1}),
        ToolCall("b", "read_file", {"p": 2}),
        Finish("tool_calls"),
    ]


def test_calls_sent_whole_at_one_reused_index_stay_separate() -> None:
    # Ollama streams parallel calls each whole, with its own id, all at index 0; LM Studio
    # sends a fresh id with every fragment of one call, but no name after the first.
    _, stream = chat(
        call(0, id="c1", name="write", arguments='{"f": "a"}'),
        call(0, id="c2", name="write", arguments='{"f": "b"}'),
        call(1, id="d1", name="ls", arguments='{"d": '),
        call(1, id="d2", arguments='"x"}'),
        delta({}, "tool_calls"),
    )
    assert stream.finish() == [
        ToolCall("c1", "write", {"f": "a"}),
        ToolCall("c2", "write", {"f": "b"}),
        ToolCall("d1", "ls", {"d": "x"}),
        Finish("tool_calls"),
    ]


def test_other_choices_are_ignored_and_usage_may_ride_with_the_finish() -> None:
    payload = {
        "choices": [
            {"index": 1, "delta": {"content": "other"}},
            {"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    out, stream = chat(payload)
    assert out == [TextDelta("mine")]
    assert stream.finish() == [Finish("stop", Usage(5, 1))]


def test_done_without_finish_reason_infers_it_and_ignores_what_follows() -> None:
    out, stream = chat(
        call(0, id="a", name="ls", arguments="{}"), "[DONE]", delta({"content": "x"})
    )
    assert out == []
    assert stream.done
    assert stream.finish() == [ToolCall("a", "ls", {}), Finish("tool_calls")]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("message", "not json", "not a JSON object: 'not json'"),
        ("message", "[1]", "not a JSON object"),
        ("message", json.dumps({"error": {"message": "boom", "code": "busy"}}), "boom (busy)"),
        ("error", "overloaded, try again", "error mid-stream: overloaded, try again"),
    ],
)
def test_bad_or_error_events_raise(name: str, data: str, message: str) -> None:
    with pytest.raises(ChatStreamError, match=re.escape(message)):
        ChatStream().event(ServerSentEvent(data, name))


@given(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8)), max_size=4),
    st.lists(st.integers(0, 200), max_size=6),
)
def test_arguments_split_anywhere_reassemble(arguments: dict[str, Any], cuts: list[int]) -> None:
    text_args = json.dumps(arguments)
    points = sorted({c % (len(text_args) + 1) for c in cuts})
    fragments = [
        text_args[a:b] for a, b in zip([0, *points], [*points, len(text_args)], strict=True)
    ]
    payloads = [call(0, id="c", name="f", arguments="")]
    payloads += [call(0, arguments=fragment) for fragment in fragments]
    _, stream = chat(*payloads, delta({}, "tool_calls"))
    assert stream.finish() == [ToolCall("c", "f", arguments), Finish("tool_calls")]
