"""The properties the model machine checks, rule by rule (E1-E6 of docs/contract.md). Each
says, in the contract's words, what a violation quotes. Pure: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = [
    "BROKEN_STREAM_RAISES",
    "CLOSED_EARLY_DISCONNECTS",
    "FAILURE_NAMED_NOT_LEAKED",
    "FINISH_AND_USAGE",
    "PROPERTIES",
    "REQUEST_BODY",
    "REQUEST_TARGET_AND_KEY",
    "RETRIED_BEFORE_FIRST_CHUNK",
    "STREAM_CONTENT",
]


def _model(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "model", says)


REQUEST_BODY = _model(
    "E1",
    "request-body",
    "the JSON body holds `model`, `stream: true`, `stream_options: {include_usage: true}`, "
    "the request's messages in order (role and content; an assistant's tool calls with "
    "their id, name and arguments as JSON text; a tool message's `tool_call_id`) and, when "
    "the request has tools, each as `{type: function, function: {name, description, "
    "parameters}}`",
)
REQUEST_TARGET_AND_KEY = _model(
    "E1",
    "request-target-and-key",
    "one attempt is one POST of `{base_url}/chat/completions`, a query string of the base "
    "URL kept after the path, with `Authorization: Bearer KEY` exactly when a key is given",
)
STREAM_CONTENT = _model(
    "E2",
    "stream-content",
    "the stream yields the streamed text in order, then each tool call once, reassembled "
    "from its fragments (id, name, arguments parsed from the joined text) in the order of "
    "the calls' indices; how the bytes are split, the line ends and comment lines change "
    "nothing",
)
FINISH_AND_USAGE = _model(
    "E2",
    "finish-and-usage",
    "one `Finish`, last: `stop`, `tool_calls` or `length` as the `finish_reason` says, with "
    "`Usage(prompt_tokens, completion_tokens)` when the endpoint reported usage and None "
    "when it did not; a `[DONE]` missing after the `finish_reason` changes nothing",
)
RETRIED_BEFORE_FIRST_CHUNK = _model(
    "E3",
    "retried-before-first-chunk",
    "an answer of 429 or 5xx is retried up to `max_retries` times before the first chunk; "
    "an answer of any other status is not retried; a request whose stream has begun is "
    "never sent again; an answer that asks a wait (`retry-after-ms` in milliseconds, "
    "`Retry-After` in seconds) is retried after that wait, not before it",
)
FAILURE_NAMED_NOT_LEAKED = _model(
    "E4",
    "failure-named-not-leaked",
    "every failure raises `ModelEndpointError`, `url` the endpoint without credentials or "
    "query, `status` the answer's HTTP status (None when no answer came); its message is "
    "one line naming the endpoint and, for an answer that is not 2xx, its status; neither "
    "holds the API key or the base URL's query, even where the server repeats them",
)
BROKEN_STREAM_RAISES = _model(
    "E5",
    "broken-stream-raises",
    "a stream that ends before a `finish_reason` or `[DONE]`, a 2xx answer that is not an "
    "event stream, an event whose data is not a JSON object, and an error event each raise "
    "`ModelEndpointError`: such a stream never ends with a `Finish`",
)
CLOSED_EARLY_DISCONNECTS = _model(
    "E6",
    "closed-early-disconnects",
    "closing the stream's iterator before its end, or cancelling it, closes the connection: "
    "the server sees the client go without the reply ending",
)

PROPERTIES: tuple[Property, ...] = (
    REQUEST_BODY,
    REQUEST_TARGET_AND_KEY,
    STREAM_CONTENT,
    FINISH_AND_USAGE,
    RETRIED_BEFORE_FIRST_CHUNK,
    FAILURE_NAMED_NOT_LEAKED,
    BROKEN_STREAM_RAISES,
    CLOSED_EARLY_DISCONNECTS,
)
