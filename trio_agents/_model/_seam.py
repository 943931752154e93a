"""The model seam: what the agent sends to a model and the chunks a model streams back.

Pure data and a Protocol; no trio import. A model is anything whose `stream(request)` returns
an async iterator of chunks. The agent closes the iterator when a step ends, is cancelled or
times out, so an adapter can release its connection in `finally`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .._agent._options import AgentOptions

__all__ = [
    "Finish",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call requested by the model.

    call_id: the model's id for the call; the agent makes empty or repeated ids unique.
    name: the tool to call.
    arguments: the call's arguments, a JSON object.
    """

    call_id: str
    name: str
    arguments: Mapping[str, Any]

    def __post_init__(self) -> None:
        # A call with an id that is not text was recorded, and its session then read back
        # as damaged (D383).
        if not isinstance(self.call_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ToolCall call_id must be a str, got {self.call_id!r}")
        if not isinstance(self.name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ToolCall name must be a str, got {self.name!r}")
        if not isinstance(self.arguments, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"ToolCall arguments must be a mapping (a JSON object), got {self.arguments!r}"
            )


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the conversation sent to the model.

    Steering and injected context reach the model as `user` messages; `source` says which
    path they came by (`prompt`, `steering`, `context`), for adapters that want to render
    them differently.

    role: `system`, `user`, `assistant` or `tool`.
    content: the text; empty for an assistant message that only calls tools.
    tool_calls: on an assistant message, the tool calls it made.
    call_id: on a tool message, the id of the call it answers.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """How a tool is described to the model: name, description, JSON schema.

    name: the tool's name.
    description: what it does, for the model.
    parameters: the JSON schema of its arguments.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call sees.

    messages: the conversation so far as the model sees it, after the system prompt if the
        options have one; a snapshot the model may keep, which never changes (rule A19): a
        read-only sequence, not a list or a tuple, equal to the tuple of its messages.
    tools: the agent's tools.
    options: the agent's options.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    options: AgentOptions


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed assistant text.

    text: the piece; an empty one is ignored.
    """

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one model call used, as the endpoint reported them.

    input_tokens: tokens of the request.
    output_tokens: tokens of the reply.
    """

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of a model stream. `length` means the output was cut at the token limit.

    reason: `stop` (the reply is complete), `tool_calls` (the reply asks for tool calls) or
        `length`; the tool calls of a `length` reply are never run.
    usage: the tokens used, or None if the model did not say.
    """

    reason: FinishReason
    usage: Usage | None = field(default=None)


ModelChunk = TextDelta | ToolCall | Finish
"""What a model's stream yields."""


class Model(Protocol):
    """A language model: one `stream` call is one step's model call."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the reply to `request`: text deltas and tool calls, then one `Finish`.

        The contract an implementation meets (an async generator method is the usual one):

        - Calling `stream` must not block; the work happens as the agent iterates.
        - The agent reads up to the `Finish` and no further. A stream that just ends counts
          as `Finish("tool_calls")` if it yielded calls, else `Finish("stop")`.
        - Tool calls must be complete when yielded; the agent runs them after the stream.
        - When the step ends, however it ends, the agent closes the iterator (`aclose`, if
          it has one): release connections in `finally`.
        - A cancel, a step timeout or a close arrives as `trio.Cancelled` at the iterator's
          checkpoints: wait only at trio checkpoints, and let `Cancelled` propagate. Chunks
          already at hand may be yielded without a checkpoint between them.
        - An exception ends the turn with reason `error` (`"ExcType: message"`).
        """
        ...
