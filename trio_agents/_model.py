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
    from ._options import AgentOptions

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
    """A complete tool call requested by the model."""

    call_id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the conversation sent to the model.

    Steering and injected context reach the model as `user` messages; `source` says which
    path they came by (`prompt`, `steering`, `context`), for adapters that want to render
    them differently.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """How a tool is described to the model: name, description, JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call sees."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    options: AgentOptions


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed assistant text."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of a model stream. `length` means the output was cut at the token limit."""

    reason: FinishReason
    usage: Usage | None = field(default=None)


ModelChunk = TextDelta | ToolCall | Finish


class Model(Protocol):
    """A language model: one `stream` call is one step's model call."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]: ...
