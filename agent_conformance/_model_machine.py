"""The model machine: random programs of model calls through the adapter under test (default:
the built-in `OpenAICompatibleModel`), against a scripted OpenAI-compatible endpoint on
127.0.0.1 (`_model_endpoint`) that answers each call as the rule drew.

    rules: stream a reply (after some retryable failures) / answer an error status / break
           the stream / close or cancel the stream early / call an endpoint nobody serves

Each check is a named property of a rule of the contract (`_model_properties`):

- E1: every request is a POST of the base URL's `/chat/completions` (its query kept), with
  the key exactly when one is given, and a body carrying the request as the rule says;
- E2: the chunks are the streamed text, then the tool calls reassembled, then one Finish with
  the reason and the usage sent, whatever the bytes' split, line ends, comments and [DONE];
- E3: 429 and 5xx are retried up to `max_retries` times, other statuses never, a begun
  stream never; a wait the answer asks for is kept (once per run: it takes real time);
- E4: each failure is a ModelEndpointError naming the endpoint and the status, without the
  key or the query;
- E5: a cut stream, a 2xx that is not a stream, data that is not JSON, an error event raise;
- E6: an iterator closed or cancelled early closes its connection.

The target is a maker `make(base_url, *, api_key, max_retries[, max_wait]) -> Model`. The
endpoint and the calls run in one trio run per example, on the real clock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, Literal

import trio
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition

from trio_agents import (
    AgentOptions,
    Finish,
    Message,
    Model,
    ModelEndpointError,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from trio_agents.testing import TrioHost, WallClock

from ._http import Request
from ._machine import ConformanceMachine, rule
from ._model_endpoint import ModelEndpoint, Status, Stream, open_model_endpoint, refused_url
from ._model_properties import (
    BROKEN_STREAM_RAISES,
    CLOSED_EARLY_DISCONNECTS,
    FAILURE_NAMED_NOT_LEAKED,
    FINISH_AND_USAGE,
    REQUEST_BODY,
    REQUEST_TARGET_AND_KEY,
    RETRIED_BEFORE_FIRST_CHUNK,
    STREAM_CONTENT,
)
from ._model_properties import PROPERTIES as PROPERTIES
from ._model_wire import CallSpec, Reason, Reply, body_problems, events, leaks, split
from ._targets import ModelFactory, builtin_model, takes_keyword

__all__ = ["PROPERTIES", "ModelMachine", "model_settings"]

API_KEY = "sk-conformance-SECRET-7f3a9c"
QUERY = "api-version=q-SECRET-91b2"
WITHIN = 10.0  # real seconds for a first chunk, or for the server to see a close
TEXTS = ("Hello", " world", "", "héllo wörld ✓ 日本", "line one\nline two", ' "quoted" \\ ')
CALL_NAMES = ("read_file", "bash", "grep")
ARGUMENTS: tuple[dict[str, Any], ...] = (
    {},
    {"path": "src/app.py"},
    {"command": "ls -la | head", "timeout": 30},
    {"pattern": "é+", "flags": ["i"], "nested": {"k": [1, 2.5, None, True]}},
)
PROMPTS = ("fix the bug", "naïve café ☕\nsecond line", "")
TOOLS = (
    ToolSpec(
        "bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}}
    ),
    ToolSpec(
        "read_file",
        "Read a file. Line numbers shown.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "default": 200},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
)
RETRYABLE = (429, 500, 502, 503)
# The waits a 429 or a 503 may ask for (E3), as (header, value, seconds), and how much later
# than asked the retry may come on a loaded machine (far under the 30 s `max_wait` a wait
# read in the wrong unit would reach).
ASKED_WAITS = (("retry-after-ms", "400", 0.4), ("retry-after", "1", 1.0))
WAIT_SLACK = 5.0
MAX_WAIT = 30.0  # the `max_wait` given to a maker that takes one, for the waits checked
REFUSED = (400, 401, 403, 404, 422)
Broken = Literal["cut", "json", "html", "not-json", "error-event"]
BROKEN: tuple[Broken, ...] = ("cut", "json", "html", "not-json", "error-event")
ERROR_EVENTS = ("data", "named", "both")  # how an error event is sent (E5)
Base = Literal["plain", "slash", "query"]


def _waited(machine: ModelMachine) -> bool:
    return type(machine).waited or not takes_max_wait(type(machine).factory)


def takes_max_wait(make: Callable[..., Any]) -> bool:
    """Whether a model maker takes `max_wait=` (the longest wait a retry keeps, seconds):
    without it, the wait an answer asks cannot be told from the maker's own cap (E3)."""
    return takes_keyword(make, "max_wait")


def model_settings(base: Settings) -> Settings:
    """Each example makes a model and up to 15 calls over loopback, a few tens of
    milliseconds each: a fifth of the examples of `base` (at least 10), in programs of at
    most 15 steps (D433)."""
    return Settings(
        base,
        max_examples=max(10, base.max_examples // 5),
        stateful_step_count=min(base.stateful_step_count, 15),
    )


def _draw_request(data: st.DataObject, number: int) -> ModelRequest:
    """A conversation as an agent sends it: a system prompt perhaps, prompts, steering,
    replies that call tools and the tools' answers."""
    messages: list[Message] = []
    if data.draw(st.booleans(), label="system prompt"):
        messages.append(Message("system", "You are a careful coding agent."))
    for turn in range(data.draw(st.integers(1, 3), label="exchanges")):
        prompt = data.draw(st.sampled_from(PROMPTS), label="prompt")
        source = data.draw(st.sampled_from(("prompt", "steering", "context")), label="source")
        messages.append(Message("user", prompt, source=source))
        calls = tuple(
            ToolCall(f"call_{number}_{turn}_{i}", name, arguments)
            for i, (name, arguments) in enumerate(
                data.draw(
                    st.lists(
                        st.tuples(st.sampled_from(CALL_NAMES), st.sampled_from(ARGUMENTS)),
                        max_size=2,
                    ),
                    label="calls made",
                )
            )
        )
        said = data.draw(st.sampled_from(("", "Let me look.", "Voilà ✓")), label="reply text")
        messages.append(Message("assistant", said, calls))
        messages += [Message("tool", f"result of {c.name} 🙂", call_id=c.call_id) for c in calls]
    tools = tuple(t for t in TOOLS if data.draw(st.booleans(), label=f"offers {t.name}"))
    return ModelRequest(tuple(messages), tools, AgentOptions())


def _draw_reply(data: st.DataObject, number: int) -> Reply:
    texts = tuple(data.draw(st.lists(st.sampled_from(TEXTS), max_size=4), label="texts"))
    drawn = data.draw(
        st.lists(
            st.tuples(st.sampled_from(CALL_NAMES), st.sampled_from(ARGUMENTS), st.integers(1, 4)),
            max_size=3,
        ),
        label="tool calls: name, arguments, fragments",
    )
    calls = tuple(
        CallSpec(i, f"call_r{number}_{i}", name, arguments, fragments)
        for i, (name, arguments, fragments) in enumerate(drawn)
    )
    default: Literal["stop", "tool_calls"] = "tool_calls" if calls else "stop"
    reason: Reason = data.draw(
        st.sampled_from((default, default, "length", "stop", "tool_calls")), label="finish_reason"
    )
    usage = data.draw(
        st.none() | st.tuples(st.integers(0, 9000), st.integers(0, 9000)), label="usage"
    )
    return Reply(
        texts=texts,
        calls=calls,
        reason=reason,
        usage=usage,
        usage_in_finish=data.draw(st.booleans(), label="usage on the finish chunk"),
        arrival=data.draw(
            st.sampled_from(("in order", "last first", "interleaved")), label="calls arrive"
        ),
        names=data.draw(
            st.sampled_from(("once", "every fragment", "split")), label="call names sent"
        ),
        line_end=data.draw(st.sampled_from(("\n", "\r\n", "\r")), label="line end"),
        comments=data.draw(st.booleans(), label="comment lines"),
        done=data.draw(st.booleans(), label="[DONE]"),
    )


def _cuts(data: st.DataObject) -> list[int]:
    return data.draw(st.lists(st.integers(0, 10**6), max_size=5), label="split at")


class ModelMachine(ConformanceMachine):
    """Calls of the model `factory` makes (the adapter under test) against a scripted
    endpoint: replies streamed in every shape compatible servers send, errors, broken
    streams and early closes.

    factory: the maker under test (default: the built-in `OpenAICompatibleModel`).
    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct rule traces produced.
    """

    factory: ClassVar[ModelFactory] = staticmethod(builtin_model)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()
    waited: ClassVar[bool] = False  # the run has checked the waits a failure asks (E3)

    def __init__(self) -> None:
        super().__init__(TrioHost(WallClock(), call_timeout=60.0, stall_timeout=60.0))
        # The built-in adapter logs each retry; the machine asks for hundreds of them.
        logging.getLogger("trio_agents.openai_model").addFilter(_quiet)
        self.trace: list[str] = []
        self.key: str | None = None
        self.max_retries = 0
        self.base_url = ""
        self.query = ""
        self._calls = 0

    @initialize(
        keyed=st.booleans(),
        max_retries=st.integers(0, 2),
        base=st.sampled_from(("plain", "slash", "query")),
    )
    def open_endpoint(self, keyed: bool, max_retries: int, base: Base) -> None:
        """Serve the endpoint and make the model of it: with a key or none, retrying up to
        `max_retries` times, its base URL plain, with a trailing slash or a query."""
        self.program.append(
            f"state.open_endpoint(keyed={keyed!r}, max_retries={max_retries!r}, base={base!r})"
        )
        self.endpoint: ModelEndpoint = self._start_service(open_model_endpoint)
        self.key = API_KEY if keyed else None
        self.max_retries = max_retries
        self.query = QUERY if base == "query" else ""
        self.base_url = self.endpoint.base("/v1/" if base == "slash" else "/v1")
        if self.query:
            self.base_url += "?" + self.query
        self.model: Model = type(self).factory(
            self.base_url, api_key=self.key, max_retries=max_retries
        )

    # -- rules -------------------------------------------------------------------------------

    @rule(data=st.data())
    def stream_reply(self, data: st.DataObject) -> None:
        """A reply streamed, after `k` answers of 429 or 5xx: retried up to `max_retries`
        times (E3), each request as the rule says (E1), the chunks as sent (E2)."""
        number = self._number()
        request = _draw_request(data, number)
        reply = _draw_reply(data, number)
        failures = data.draw(
            st.lists(st.sampled_from(RETRYABLE), max_size=self.max_retries + 1),
            label="failures first",
        )
        body = b"".join(events(reply, f"chatcmpl-{number}"))
        answers: list[Status | Stream] = [self._failure(status) for status in failures]
        answers.append(Stream(tuple(split(body, _cuts(data)))))
        self.endpoint.reset(answers)
        chunks, error = self.host.call(self._consume, request)
        told = f"a reply {reply!r} after answers {failures!r} (max_retries={self.max_retries})"
        self._check_requests(request, told)
        tries = min(len(failures), self.max_retries) + 1
        RETRIED_BEFORE_FIRST_CHUNK.check(
            len(self.endpoint.seen) == tries,
            lambda: f"{told}: the endpoint got {len(self.endpoint.seen)} request(s), not {tries}",
        )
        if len(failures) > self.max_retries:
            self._check_failure(error, failures[self.max_retries], told)
            BROKEN_STREAM_RAISES.check(
                not any(isinstance(c, Finish) for c in chunks),
                lambda: f"{told}: the stream ended with {chunks[-1]!r} after the request failed",
            )
            self.trace.append(f"gave up after {len(failures)}")
            return
        if error is not None:
            prop = (
                RETRIED_BEFORE_FIRST_CHUNK
                if failures and _status(error) in RETRYABLE
                else STREAM_CONTENT
            )
            prop.fail(f"{told}: the stream raised {type(error).__name__}: {error}")
        self._check_chunks(reply, chunks, told)
        self.trace.append(f"streamed {len(reply.texts)}/{len(reply.calls)}/{reply.reason}")

    @precondition(lambda self: not _waited(self))
    @rule(status=st.sampled_from((429, 503)))
    def retry_waits(self, status: int) -> None:
        """Answers of `status` asking a wait, in milliseconds and then in seconds, before a
        reply: each retry comes after the wait asked, not before it, and within
        WAIT_SLACK seconds past it (E3). Once per run: it takes the waits in real time."""
        for header, value, seconds in ASKED_WAITS:
            self._check_wait(status, header, value, seconds)
        type(self).waited = True
        self.trace.append(f"waited after {status}")

    def _check_wait(self, status: int, header: str, value: str, seconds: float) -> None:
        body = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}})
        answers: list[Status | Stream] = [
            Status(status, body.encode(), headers=((header, value),)),
            Stream(tuple(events(Reply(texts=("ok",)), "chatcmpl-wait"))),
        ]
        self.endpoint.reset(answers)
        make: Any = type(self).factory
        model = make(self.base_url, api_key=self.key, max_retries=1, max_wait=MAX_WAIT)
        request = ModelRequest((Message("user", "wait"),), (), AgentOptions())
        told = f"an answer of HTTP {status} with `{header}: {value}`"
        # A retry that came too late is tried once more with four times the slack: on a
        # loaded machine the adapter's task may wait seconds for a core (the bad-start
        # rule of the MCP machine does the same, D502). One that came early fails at once.
        for slack in (WAIT_SLACK, 4 * WAIT_SLACK):
            limit = seconds + slack
            done = self.host.call(self._consume_within, model, request, limit)
            arrived = list(self.endpoint.arrived)
            late = len(arrived) < 2 or arrived[1] - arrived[0] > limit
            if not late or slack != WAIT_SLACK:
                break
            self.endpoint.reset(answers)
            model = make(self.base_url, api_key=self.key, max_retries=1, max_wait=MAX_WAIT)
        RETRIED_BEFORE_FIRST_CHUNK.check(
            done or len(arrived) > 1, lambda: f"{told}: no retry came within {limit:g} s"
        )
        RETRIED_BEFORE_FIRST_CHUNK.check(
            len(arrived) == 2,
            lambda: f"{told}: the endpoint got {len(arrived)} request(s), not 2",
        )
        waited = arrived[1] - arrived[0]
        RETRIED_BEFORE_FIRST_CHUNK.check(
            seconds <= waited <= limit,
            lambda: f"{told}: the retry came {waited:.3f} s after it, not {seconds:g} s",
        )

    async def _consume_within(self, model: Model, request: ModelRequest, limit: float) -> bool:
        with trio.move_on_after(limit):
            await _consume(model, request)
            return True
        return False

    @rule(status=st.sampled_from(REFUSED), data=st.data())
    def refused(self, status: int, data: st.DataObject) -> None:
        """An answer of a status that is not retried (E3), whose body repeats the key and the
        URL: a ModelEndpointError that names the status, without either (E4)."""
        number = self._number()
        request = _draw_request(data, number)
        echo = f"Incorrect API key provided: {self.key or 'none'} for {self.base_url}"
        if data.draw(st.booleans(), label="JSON body"):
            body = json.dumps({"error": {"message": echo, "type": "invalid_request_error"}})
            answer = Status(status, body.encode())
        else:
            answer = Status(status, f"<html><body>{echo}</body></html>".encode(), "text/html")
        self.endpoint.reset([answer])
        chunks, error = self.host.call(self._consume, request)
        told = f"an answer of HTTP {status} ({answer.content_type})"
        self._check_requests(request, told)
        RETRIED_BEFORE_FIRST_CHUNK.check(
            len(self.endpoint.seen) == 1,
            lambda: f"{told}: the endpoint got {len(self.endpoint.seen)} requests, not 1",
        )
        self._check_failure(error, status, told)
        BROKEN_STREAM_RAISES.check(not chunks, lambda: f"{told}: the stream yielded {chunks!r}")
        self.trace.append(f"refused {status}")

    @rule(kind=st.sampled_from(BROKEN), data=st.data())
    def broken(self, kind: Broken, data: st.DataObject) -> None:
        """A stream cut before its finish, a 2xx that is not a stream, data that is not
        JSON, an error event: a ModelEndpointError (E5), never sent again (E3), named (E4)."""
        number = self._number()
        request = _draw_request(data, number)
        texts = tuple(
            data.draw(st.lists(st.sampled_from(TEXTS[:2]), min_size=1, max_size=3), label="texts")
        )
        reply = Reply(
            texts=texts,
            reason=None,
            line_end=data.draw(st.sampled_from(("\n", "\r\n")), label="line end"),
        )
        head = events(reply, f"chatcmpl-{number}")
        secret = f"key {self.key or 'none'} at {self.base_url}"
        answer: Status | Stream
        match kind:
            case "cut":
                answer = Stream(tuple(split(b"".join(head), _cuts(data))), end="cut")
            case "json":
                completion = {
                    "object": "chat.completion",
                    "choices": [{"message": {"content": secret}}],
                }
                answer = Status(200, json.dumps(completion).encode())
            case "html":
                answer = Status(
                    200, f"<html><title>Sign in</title>{secret}</html>".encode(), "text/html"
                )
            case "not-json":
                answer = Stream((*head, f"data: oops, {secret}\n\n".encode()))
            case _:
                # Servers send an error event in one of three shapes: an `error` object in
                # the data (OpenAI), an event named `error` whose data is the error itself,
                # or both.
                shape = data.draw(st.sampled_from(ERROR_EVENTS), label="error event")
                detail = {"message": f"overloaded: {secret}", "type": "server_error"}
                event = detail if shape == "named" else {"error": detail}
                name = "event: error\n" if shape != "data" else ""
                sent = f"{name}data: {json.dumps(event)}\n\n".encode()
                # A server may end the stream properly after it: the error still stands.
                done = data.draw(st.booleans(), label="[DONE] after it")
                answer = Stream((*head, sent, *([b"data: [DONE]\n\n"] if done else [])))
        self.endpoint.reset([answer])
        chunks, error = self.host.call(self._consume, request)
        told = f"a stream broken ({kind}) after {texts!r}"
        self._check_requests(request, told)
        BROKEN_STREAM_RAISES.check(
            error is not None and not any(isinstance(c, Finish) for c in chunks),
            lambda: (
                f"{told}: the stream gave {chunks!r}"
                + (f" and raised {error!r}" if error else ", and no error")
            ),
        )
        RETRIED_BEFORE_FIRST_CHUNK.check(
            len(self.endpoint.seen) == 1,
            lambda: f"{told}: the endpoint got {len(self.endpoint.seen)} requests, not 1",
        )
        self._check_failure(error, 200, told)
        self.trace.append(f"broken {kind}")

    @rule(cancel=st.booleans(), data=st.data())
    def close_early(self, cancel: bool, data: st.DataObject) -> None:
        """Read the first text of a held stream, then close the iterator (or cancel it):
        the server sees the client go (E6); the text came as it arrived (E2)."""
        number = self._number()
        request = _draw_request(data, number)
        reply = Reply(texts=("first ", "second"), reason="stop")
        self.endpoint.reset(
            [Stream(tuple(events(reply, f"chatcmpl-{number}")), end="hold", hold_after=2)]
        )
        first, gone, failure = self.host.call(self._close_early, request, cancel)
        how = "cancelled" if cancel else "closed (aclose)"
        STREAM_CONTENT.check(
            first is not None,
            lambda: (
                "the endpoint sent the text 'first ' and held the stream; "
                + (
                    f"the stream raised {type(failure).__name__}: {failure}"
                    if failure is not None
                    else f"no text came in {WITHIN:g} s"
                )
            ),
        )
        CLOSED_EARLY_DISCONNECTS.check(
            gone,
            lambda: (
                f"a stream {how} after its first chunk {first!r}: the server still held the "
                f"connection {WITHIN:g} s later"
            ),
        )
        self.trace.append(f"closed early {how}")

    @rule()
    def unreachable(self) -> None:
        """A model of a base URL where nothing listens: a ModelEndpointError with no status,
        naming the endpoint, without the key (E4)."""
        base = self.host.call(refused_url)
        if self.query:
            base += "?" + self.query
        model = type(self).factory(base, api_key=self.key, max_retries=self.max_retries)
        request = ModelRequest((Message("user", "hi"),), (), AgentOptions())
        chunks, error = self.host.call(_consume, model, request)
        self._check_failure(error, None, f"a call of {base}, where nothing listens", base=base)
        BROKEN_STREAM_RAISES.check(
            not chunks, lambda: f"a call where nothing listens yielded {chunks!r}"
        )
        self.trace.append("unreachable")

    # -- checks ------------------------------------------------------------------------------

    def _expected_endpoint(self, base: str | None = None) -> str:
        root = (base or self.base_url).split("?", 1)[0].rstrip("/")
        return f"{root}/chat/completions"

    def _check_requests(self, request: ModelRequest, told: str) -> None:
        for number, seen in enumerate(self.endpoint.seen):
            self._check_request(request, f"{told}: request {number}", seen)

    def _check_request(self, request: ModelRequest, told: str, seen: Request) -> None:
        path = self._expected_endpoint().split(str(self.endpoint.port), 1)[1]
        wanted = path + (f"?{self.query}" if self.query else "")
        REQUEST_TARGET_AND_KEY.check(
            seen.method == "POST"
            and seen.path == path
            and seen.target.partition("?")[2] == self.query,
            lambda: f"{told} was {seen.method} {seen.target}, not POST {wanted}",
        )
        auth = seen.header("authorization")
        key = f"Bearer {self.key}" if self.key else None
        REQUEST_TARGET_AND_KEY.check(
            auth == key,
            lambda: f"{told} sent Authorization {_masked(auth)!r}, not {_masked(key)!r}",
        )
        problem = body_problems(seen.body, request.messages, request.tools)
        REQUEST_BODY.check(problem is None, lambda: f"{told}: {problem}")

    def _check_failure(
        self, error: BaseException | None, status: int | None, told: str, *, base: str | None = None
    ) -> None:
        endpoint = self._expected_endpoint(base)
        FAILURE_NAMED_NOT_LEAKED.check(
            isinstance(error, ModelEndpointError),
            lambda: f"{told}: the call raised {error!r}, not a ModelEndpointError",
        )
        assert isinstance(error, ModelEndpointError)
        message = str(error)
        secrets = [s for s in (self.key, self.query.partition("=")[2]) if s]
        found = leaks(f"{message}\n{error.url}", secrets)
        FAILURE_NAMED_NOT_LEAKED.check(
            not found,
            lambda: (
                f"{told}: the error shows {', '.join(str(_masked(s)) for s in found)}: "
                f"{_masked_in(message, found)!r}"
            ),
        )
        FAILURE_NAMED_NOT_LEAKED.check(
            error.url == endpoint and error.status == status,
            lambda: (
                f"{told}: the error's url and status are {error.url!r}, {error.status!r}, "
                f"not {endpoint!r}, {status!r}"
            ),
        )
        host = endpoint.split("/")[2]
        named = host in message and (status is None or status < 300 or str(status) in message)
        FAILURE_NAMED_NOT_LEAKED.check(
            named and "\n" not in message,
            lambda: (
                f"{told}: the error's message {message!r} is not one line naming {host}"
                + (f" and HTTP {status}" if status is not None and status >= 300 else "")
            ),
        )

    def _check_chunks(self, reply: Reply, chunks: list[object], told: str) -> None:
        kinds = [type(c).__name__ for c in chunks]
        STREAM_CONTENT.check(
            all(isinstance(c, TextDelta | ToolCall | Finish) for c in chunks),
            lambda: f"{told}: the stream yielded {kinds!r}",
        )
        text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
        STREAM_CONTENT.check(
            text == reply.text, lambda: f"{told}: the text streamed is {text!r}, not {reply.text!r}"
        )
        calls = [(c.call_id, c.name, dict(c.arguments)) for c in chunks if isinstance(c, ToolCall)]
        wanted = [(c.call_id, c.name, dict(c.arguments)) for c in reply.calls]
        fine = calls == wanted or (reply.reason == "length" and all(c in wanted for c in calls))
        STREAM_CONTENT.check(
            fine, lambda: f"{told}: the tool calls yielded are {calls!r}, not {wanted!r}"
        )
        last_text = max((i for i, c in enumerate(chunks) if isinstance(c, TextDelta)), default=-1)
        first_call = min(
            (i for i, c in enumerate(chunks) if isinstance(c, ToolCall)), default=len(chunks)
        )
        STREAM_CONTENT.check(
            last_text < first_call,
            lambda: f"{told}: the stream yielded text after a tool call: {kinds!r}",
        )
        finishes = [c for c in chunks if isinstance(c, Finish)]
        FINISH_AND_USAGE.check(
            len(finishes) == 1 and isinstance(chunks[-1], Finish),
            lambda: f"{told}: the stream yielded {kinds!r}, not one Finish last",
        )
        usage = Usage(*reply.usage) if reply.usage is not None else None
        expected = Finish(reply.reason or "stop", usage)
        FINISH_AND_USAGE.check(
            finishes[0] == expected,
            lambda: f"{told}: it finished {finishes[0]!r}, not {expected!r}",
        )

    # -- calls -------------------------------------------------------------------------------

    async def _consume(self, request: ModelRequest) -> tuple[list[object], BaseException | None]:
        return await _consume(self.model, request)

    async def _close_early(
        self, request: ModelRequest, cancel: bool
    ) -> tuple[object | None, bool, Exception | None]:
        """The first text of a held stream, whether the server saw the client go after the
        stream was closed (or cancelled) there, and what the stream raised, if anything."""
        stream = self.model.stream(request)
        first: object | None = None
        failure: Exception | None = None
        try:
            with trio.move_on_after(WITHIN) as scope:
                async for chunk in stream:
                    if isinstance(chunk, TextDelta) and chunk.text:
                        first = chunk
                        if cancel:
                            scope.cancel()
                            # The iterator sees the cancel at its next checkpoint.
                            continue
                        break
        except Exception as exc:  # judged by the rule: E2 before the first text, else not E6's
            failure = exc
        finally:
            closing = getattr(stream, "aclose", None)
            if closing is not None and not cancel:
                with trio.move_on_after(WITHIN):
                    await closing()
        if first is None:
            return None, True, failure
        with trio.move_on_after(WITHIN):
            await self.endpoint.gone.wait()
        gone = self.endpoint.gone.is_set()
        self.endpoint.release.set()
        if cancel:
            closing = getattr(stream, "aclose", None)
            if closing is not None:
                with trio.move_on_after(WITHIN):
                    await closing()
        return first, gone, failure

    def _failure(self, status: int) -> Status:
        body = json.dumps({"error": {"message": f"try again ({status})", "type": "server_error"}})
        headers = (("retry-after-ms", "1"),) if status == 429 else ()
        return Status(status, body.encode(), headers=headers)

    def _number(self) -> int:
        self._calls += 1
        return self._calls

    # -- ConformanceMachine --------------------------------------------------------------------

    def _verify(self) -> None:
        """Every check is made by the rule that calls."""

    def _history(self) -> Hashable | None:
        return tuple(self.trace) or None

    def _check_closing(self) -> None:
        self._stop_service()

    def _after_close(self) -> None:
        logging.getLogger("trio_agents.openai_model").removeFilter(_quiet)


async def _consume(
    model: Model, request: ModelRequest
) -> tuple[list[object], BaseException | None]:
    """Every chunk of one call, and the exception that ended it (None if it ended)."""
    chunks: list[object] = []
    stream = model.stream(request)
    try:
        with trio.fail_after(60):
            async for chunk in stream:
                chunks.append(chunk)
    except Exception as exc:  # what the adapter raised is what is judged
        return chunks, exc
    finally:
        closing = getattr(stream, "aclose", None)
        if closing is not None:
            await closing()
    return chunks, None


def _quiet(record: logging.LogRecord) -> bool:
    """Drops every record (a logging filter)."""
    return False


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def _masked(value: str | None) -> str | None:
    """A secret as a violation shows it: its first characters only."""
    return None if value is None else (value[:9] + "..." if len(value) > 12 else value)


def _masked_in(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _masked(secret) or "")
    return text
