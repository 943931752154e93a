"""Google's Gemini API (`generateContent`), for the scripted endpoint: where a call is in its
script, the tools it offers, and the reply as the API streams it (D476). Pure: no trio, no
I/O.

A request is `POST {root}/v1beta/models/{model}:streamGenerateContent?alt=sse` (or
`:generateContent` for one answer) with `contents` (each a `role`, `user` or `model`, and
`parts`: `text`, `functionCall`, `functionResponse`, ...) and `tools` (each a list of
`functionDeclarations`: `name` and `parameters` or `parametersJsonSchema`). A tool's result
comes back as a *user* content of `functionResponse` parts, so the prompt a call answers is
the last user content that holds text, and the step is the number of model contents after
it.

A reply is a `GenerateContentResponse`: one candidate whose content is the model's parts,
with a `finishReason` (`STOP`, a function call included, or `MAX_TOKENS`) on the last one,
and `usageMetadata`. Streamed with `alt=sse` each response is one `data:` event; without
it the responses are the elements of one JSON array, sent as they come.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, cast

from ._framing import Framed, Turn, pieces

__all__ = [
    "ARRAY_END",
    "array_element",
    "chunk",
    "finish_reason",
    "framed",
    "functions",
    "is_generate",
    "locate",
    "sse_event",
]

TOKEN = re.compile(r"acp-check-\d+")
_USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def is_generate(path: str) -> bool:
    """Whether `path` (no query) asks for content: `...:generateContent` or
    `...:streamGenerateContent`."""
    return path.endswith((":generateContent", ":streamGenerateContent"))


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [
        cast("Mapping[str, Any]", v) for v in cast("list[object]", value) if isinstance(v, dict)
    ]


def locate(contents: object) -> tuple[str | None, int]:
    """The token of the last user content that holds text (None if it has none) and how many
    model contents follow it: which step of which script this call is."""
    items = _objects(contents)
    for position in range(len(items) - 1, -1, -1):
        content = items[position]
        if content.get("role", "user") != "user":
            continue
        texts = [str(p["text"]) for p in _objects(content.get("parts")) if "text" in p]
        if not texts:
            continue  # only function responses: the turn's next step, not a new prompt
        found = TOKEN.findall("\n".join(texts))
        if not found:
            return None, 0
        after = items[position + 1 :]
        return str(found[-1]), sum(1 for c in after if c.get("role") == "model")
    return None, 0


def _lowered(schema: object) -> object:
    """A schema with Gemini's upper-case type names (`STRING`, `OBJECT`) in JSON Schema's
    lower case, everywhere in it."""
    if isinstance(schema, list):
        return [_lowered(item) for item in cast("list[object]", schema)]
    if not isinstance(schema, dict):
        return schema
    fields = cast("dict[str, object]", schema)
    lowered = {key: _lowered(value) for key, value in fields.items()}
    kind = lowered.get("type")
    if isinstance(kind, str):
        lowered["type"] = kind.lower()
    return lowered


def functions(tools: object) -> list[dict[str, Any]]:
    """The request's function declarations in the chat-completions shape the scripts read
    (`{"function": {"name", "parameters"}}`)."""
    found: list[dict[str, Any]] = []
    for tool in _objects(tools):
        declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
        for declaration in _objects(declarations):
            name = declaration.get("name")
            if not isinstance(name, str):
                continue
            schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
            found.append({"function": {"name": name, "parameters": _lowered(schema or {})}})
    return found


def finish_reason(cut: bool) -> str:
    """`MAX_TOKENS` for a reply cut at the limit, else `STOP` (a function call's too)."""
    return "MAX_TOKENS" if cut else "STOP"


def chunk(
    model: str,
    *,
    text: str | None = None,
    call: tuple[str, Mapping[str, Any]] | None = None,
    finish: str | None = None,
) -> dict[str, Any]:
    """One `GenerateContentResponse`: the candidate's parts (`text`, then the function
    call), its finish reason when it is the last, usage on the last."""
    parts: list[Any] = []
    if text:
        parts.append({"text": text})
    if call is not None:
        name, arguments = call
        parts.append({"functionCall": {"name": name, "args": dict(arguments)}})
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if finish is not None:
        candidate["finishReason"] = finish
        response["usageMetadata"] = dict(_USAGE)
    return response


def sse_event(response: Mapping[str, Any]) -> bytes:
    """A response as one SSE event (`alt=sse`)."""
    return b"data: " + json.dumps(response).encode() + b"\r\n\r\n"


def array_element(index: int, response: Mapping[str, Any]) -> bytes:
    """A response as element `index` of the JSON array a stream without `alt=sse` is: the
    array's `[` before the first, a comma before the others (`ARRAY_END` closes it)."""
    return (b"[" if index == 0 else b",\r\n") + json.dumps(response).encode()


ARRAY_END = b"]"


def framed(turn: Turn, model: str, *, sse: bool) -> Framed:
    """`turn` as Gemini responses: one per piece of text, then one with the function call
    and the finish reason; as SSE events (`sse`) or a JSON array; or one response."""
    finish = finish_reason(turn.cut)
    texts = [chunk(model, text=piece) for piece in pieces(turn.text)]
    last = chunk(model, call=turn.call, finish=finish)

    def encode(index: int, response: Mapping[str, Any]) -> bytes:
        return sse_event(response) if sse else array_element(index, response)

    return Framed(
        whole=chunk(model, text=turn.text, call=turn.call, finish=finish),
        before=(),
        pieces=tuple(encode(i, r) for i, r in enumerate(texts)),
        after=(encode(len(texts), last),) + (() if sse else (ARRAY_END,)),
    )
