"""Deterministic stand-ins for a model and a tool, with gates a test opens by hand.

`ScriptedModel` plays scripted steps. A step may contain `HOLD` markers: the stream stops
there until the test calls `release()`, so a test can land a cancel before the first chunk,
in the middle of the text, or just before the finish. `GateTool` is a tool that blocks until
released. Both record what they were asked, for assertions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import trio

from .._model._seam import Finish, ModelChunk, ModelRequest, TextDelta, ToolCall
from .._tool._seam import ToolContext, ToolResult

__all__ = [
    "HOLD",
    "EchoTool",
    "GateTool",
    "ScriptedModel",
    "ScriptedStep",
    "echo_reply",
    "reply",
    "tool_step",
]


class _Hold:
    __slots__ = ()

    def __repr__(self) -> str:
        return "HOLD"


HOLD: Final = _Hold()
"""Marker inside a scripted step: the stream waits here until `ScriptedModel.release()`."""

StepItem = ModelChunk | _Hold


@dataclass(frozen=True, slots=True)
class ScriptedStep:
    """What one model call streams, in order.

    items: the chunks, and `HOLD` markers where the stream waits for a `release()`.
    """

    items: tuple[StepItem, ...]


def reply(text: str, *, hold: bool = False, chunks: int = 1) -> ScriptedStep:
    """A text-only step, streamed in `chunks` pieces; `hold` waits before the first."""
    pieces = _split(text, chunks)
    items: list[StepItem] = [HOLD] if hold else []
    items.extend(TextDelta(p) for p in pieces)
    items.append(Finish("stop"))
    return ScriptedStep(tuple(items))


def tool_step(
    *calls: ToolCall | tuple[str, Mapping[str, Any]],
    text: str = "",
    hold: bool = False,
) -> ScriptedStep:
    """A step that asks for tool calls; a bare (name, arguments) gets a generated call id."""
    items: list[StepItem] = [HOLD] if hold else []
    if text:
        items.append(TextDelta(text))
    for call in calls:
        items.append(call if isinstance(call, ToolCall) else ToolCall(_call_ids.next(), *call))
    items.append(Finish("tool_calls"))
    return ScriptedStep(tuple(items))


def echo_reply(request: ModelRequest) -> ScriptedStep:
    """The default response: echo the last user message."""
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    return reply(f"echo: {last}")


class _CallIds:
    def __init__(self) -> None:
        self._n = 0

    def next(self) -> str:
        self._n += 1
        return f"call-{self._n}"


_call_ids = _CallIds()


class _Held:
    __slots__ = ("event", "replacement")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.replacement: ScriptedStep | None = None


class ScriptedModel:
    """A model that streams scripted steps, one per call, then `default(request)` forever.

    `hold_all=True` puts a `HOLD` before every step, so each model call waits for a
    `release()`; `release(step)` also replaces what the held stream sends next.

    requests: every request the model was called with, oldest first.
    """

    def __init__(
        self,
        steps: Iterable[ScriptedStep] = (),
        *,
        default: Callable[[ModelRequest], ScriptedStep] = echo_reply,
        hold_all: bool = False,
    ) -> None:
        self._script: deque[ScriptedStep] = deque(steps)
        self._default = default
        self._hold_all = hold_all
        self._held: deque[_Held] = deque()
        self.requests: list[ModelRequest] = []

    def add(self, *steps: ScriptedStep) -> None:
        """Append `steps` to the script, after the steps not yet played."""
        self._script.extend(steps)

    @property
    def held(self) -> int:
        """How many streams are waiting at a `HOLD`."""
        return len(self._held)

    def release(self, then: ScriptedStep | None = None) -> None:
        """Let the oldest held stream go on; with `then`, it streams `then` instead of the
        rest of its step. Never blocks: the stream goes on when its task next runs. Raises
        RuntimeError if no stream is held."""
        if not self._held:
            raise RuntimeError(
                "ScriptedModel.release(): no stream is held; "
                "let the agent reach the model first (trio.testing.wait_all_tasks_blocked())"
            )
        held = self._held.popleft()
        held.replacement = then
        held.event.set()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Record `request`, then stream the next scripted step (or `default(request)` once
        the script is used up), waiting at each `HOLD` until released. Each chunk comes
        after a checkpoint."""
        self.requests.append(request)
        step = self._script.popleft() if self._script else self._default(request)
        items = deque(step.items)
        if self._hold_all:
            items.appendleft(HOLD)
        while items:
            item = items.popleft()
            if isinstance(item, _Hold):
                held = _Held()
                self._held.append(held)
                try:
                    await held.event.wait()
                finally:
                    if held in self._held:
                        self._held.remove(held)
                if held.replacement is not None:
                    items = deque(held.replacement.items)
            else:
                await trio.lowlevel.checkpoint()
                yield item
        # The end of the stream is a checkpoint too, also for a step with nothing in it.
        await trio.lowlevel.checkpoint()


class GateTool:
    """A tool whose every call blocks until the test calls `release()`.

    name: the tool's name (`gate` unless given).
    description: the tool's description, for the model.
    parameters: an empty object schema: it takes no arguments.
    calls: the (arguments, context) of every call, oldest first.
    cancelled: how many calls were cancelled while held.
    """

    description = "Waits until the test releases it, then returns what the test gave."

    def __init__(self, name: str = "gate") -> None:
        self.name = name
        self.parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
        self._held: deque[tuple[trio.Event, list[ToolResult | str]]] = deque()
        self.calls: list[tuple[Mapping[str, Any], ToolContext]] = []
        self.cancelled = 0

    @property
    def held(self) -> int:
        """How many calls are waiting for a `release()`."""
        return len(self._held)

    def release(self, result: ToolResult | str = "done") -> None:
        """Let the oldest held call return `result`. Never blocks: the call returns when its
        task next runs. Raises RuntimeError if no call is held."""
        if not self._held:
            raise RuntimeError(
                f"GateTool({self.name!r}).release(): no call is held; "
                "let the agent reach the tool first (trio.testing.wait_all_tasks_blocked())"
            )
        event, box = self._held.popleft()
        box.append(result)
        event.set()

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        """Record the call, then wait until released (always a checkpoint) and return what
        `release()` gave. A cancelled call counts in `cancelled` and re-raises."""
        self.calls.append((arguments, context))
        entry: tuple[trio.Event, list[ToolResult | str]] = (trio.Event(), [])
        self._held.append(entry)
        try:
            await entry[0].wait()
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            if entry in self._held:
                self._held.remove(entry)
        return entry[1][0]


class EchoTool:
    """Returns its `text` argument.

    name: `echo`.
    description: the tool's description, for the model.
    parameters: the schema of its one required string argument, `text`.
    """

    name = "echo"
    description = "Returns the text it is given."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        """`arguments["text"]` as a str ("" without one). Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        return str(arguments.get("text", ""))


def _split(text: str, chunks: int) -> list[str]:
    if chunks <= 1 or len(text) <= 1:
        return [text] if text else []
    size = max(1, -(-len(text) // chunks))
    return [text[i : i + size] for i in range(0, len(text), size)]
