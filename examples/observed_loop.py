"""An agent loop written from scratch, reporting to the suite through the observer API.

It stands for a framework with a loop of its own: it keeps its own queue and history (as
`Message`s), and calls the observer's instants inline, where docs/conformance.md says
("Checking an agent the suite does not own"). Its status is the observer's.

    trio-agents conformance --target examples.observed_loop:factory
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from itertools import count

import trio

from agent_conformance import AgentObserver, observed
from trio_agents import (
    AgentClosedError,
    AgentOptions,
    AgentStatus,
    CancelCause,
    Finish,
    Message,
    Model,
    ModelRequest,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolSpec,
)

_CLOSE = "closed"  # the cause a close gives the turn it stops


class LoopAgent:
    """Prompts, steering and context in lists; one turn at a time in `run`."""

    def __init__(
        self, model: Model, tools: Sequence[Tool], observer: AgentObserver, options: AgentOptions
    ) -> None:
        self._model, self._tools, self._obs, self._options = model, tools, observer, options
        self._ids = count(1)
        self._turns = 0
        self._prompts: list[tuple[str, str]] = []
        self._input: list[tuple[str, str, str]] = []  # (id, kind, role): steering, context
        self._contents: dict[str, str] = {}
        self._history: list[Message] = []
        self._scope: trio.CancelScope | None = None  # the running turn's
        self._first: tuple[str, str] | None = None  # (reason, cause) of its first cancel
        self._closing = self._exited = self._cancelling = False
        self._wake = trio.Event()
        self._settled = trio.Event()

    @property
    def pending(self) -> tuple[tuple[str, str], ...]:
        return (*((m, k) for m, k, _ in self._input), *((m, "prompt") for m, _ in self._prompts))

    def send(self, content: str) -> str:
        mid = self._accept(content)
        self._prompts.append((mid, content))
        if self._obs.status is AgentStatus.IDLE:
            self._obs.status_changed("running")
            self._wake.set()
        return mid

    def steer(self, content: str) -> str:
        if self._scope is None or self._first is not None:
            return self.send(content)  # no live turn: steering is a prompt
        mid = self._accept(content)
        self._input.append((mid, "steering", "user"))
        return mid

    def inject(self, message: Message | str, /) -> str:
        role, content = (
            ("user", message) if isinstance(message, str) else (message.role, message.content)
        )
        mid = self._accept(content)
        self._input.append((mid, "context", role))
        return mid

    def cancel(self, reason: str, *, cause: CancelCause) -> bool:
        live = self._scope is not None and self._first is None
        work = {m for m, _ in self._prompts} | {m for m, k, _ in self._input if k == "steering"}
        if self._closing or self._cancelling or not (live or work):
            return False
        if live:
            self._first = (reason, cause)
        self._cancelling = True
        try:
            self._obs.cancel_requested(cause, reason)  # before anything is cleared (A6)
        finally:
            self._cancelling = False
        self._prompts = [p for p in self._prompts if p[0] not in work]
        self._input = [m for m in self._input if m[0] not in work]
        if live and self._scope is not None:
            self._scope.cancel()
        return True

    async def wait_idle(self) -> None:
        await trio.lowlevel.checkpoint()
        while not (self._exited or (not self._closing and self._obs.status is AgentStatus.IDLE)):
            await self._settled.wait()

    def close(self) -> None:
        self._closing = True
        self._prompts.clear()
        self._input = [m for m in self._input if m[1] == "context"]
        if self._scope is not None:
            self._first = self._first or (_CLOSE, _CLOSE)
            self._scope.cancel()
        self._obs.status_changed("closed")
        self._wake.set()
        self._notify()

    async def run(self) -> None:
        try:
            while not self._closing:
                if self._prompts:
                    await self._turn(*self._prompts.pop(0))
                    continue
                self._obs.status_changed("idle")
                self._notify()
                if self._obs.status is AgentStatus.IDLE and not self._closing:
                    self._wake = trio.Event()
                    await self._wake.wait()
        finally:
            self._exited = True
            self._notify()

    async def _turn(self, mid: str, content: str) -> None:
        self._scope, self._first = trio.CancelScope(), None
        self._turns += 1
        end: dict[str, str] | None = None
        self._history.append(Message("user", content))
        self._obs.turn_started(mid, content)
        try:
            with self._scope:
                end = await self._steps()
        finally:
            end = self._cancelled_end() or end  # a cancel that reached the turn wins
            self._scope = None
            steering = [(m, self._contents[m]) for m, k, _ in self._input if k == "steering"]
            self._input = [m for m in self._input if m[1] == "context"]
            self._prompts[0:0] = steering  # steering the turn never took: the next prompts
            self._obs.turn_ended(end or {"kind": "closed"})

    async def _steps(self) -> dict[str, str]:
        limit = self._options.max_steps
        for step in count(1):
            if limit is not None and step > limit:
                return {"kind": "max_steps"}
            await trio.lowlevel.checkpoint()  # a cancel at TurnStarted or StepEnded ends here
            for mid, kind, role in self._input:
                self._history.append(Message(role, self._contents[mid]))  # type: ignore[arg-type]
                self._obs.message_claimed(mid, kind, self._contents[mid], role=role)  # type: ignore[arg-type]
            self._input.clear()
            self._obs.step_started()
            timeout = self._options.step_timeout
            more = False
            with trio.CancelScope(relative_deadline=timeout or math.inf) as scope:
                more = await self._step(step)
            if scope.cancelled_caught:
                return _aborted("step-timeout", "timeout")
            if not more and not any(k == "steering" for _, k, _ in self._input):
                return {"kind": "completed"}
        raise AssertionError("unreachable")

    async def _step(self, step: int) -> bool:
        text: list[str] = []
        calls: list[ToolCall] = []
        open_calls: dict[str, str] = {}
        replied = False
        try:
            await trio.lowlevel.checkpoint()  # a StepStarted listener's cancel: no model call
            specs = [ToolSpec(t.name, t.description, t.parameters) for t in self._tools]
            request = ModelRequest(tuple(self._history), specs, self._options)
            finish: Finish | None = None
            stream = self._model.stream(request)
            try:
                async for chunk in stream:
                    if isinstance(chunk, TextDelta) and chunk.text:
                        text.append(chunk.text)
                        self._obs.text_streamed(chunk.text)
                    elif isinstance(chunk, ToolCall):
                        calls.append(chunk)
                    elif isinstance(chunk, Finish):
                        finish = chunk
                        break
            finally:  # close the model call on every path (a cancel, a timeout)
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            reason = finish.reason if finish else "tool_calls" if calls else "stop"
            replied = True
            run = calls if reason != "length" else []  # calls cut at the limit never run
            self._history.append(Message("assistant", "".join(text), tool_calls=tuple(run)))
            self._obs.reply_ended(finish=reason, usage=finish.usage if finish else None)
            for call in run:
                self._obs.tool_called(call.call_id, call.name, call.arguments)
                open_calls[call.call_id] = call.name
            await trio.lowlevel.checkpoint_if_cancelled()
            async with trio.open_nursery() as nursery:
                for call in run:
                    nursery.start_soon(self._call, step, call, open_calls)
            return bool(run)
        finally:
            if not replied:
                if text:
                    self._history.append(Message("assistant", "".join(text)))
                self._obs.reply_ended(interrupted=True)
            for call_id, name in open_calls.items():
                said = f"tool call {name!r} was interrupted before it finished"
                self._history.append(Message("tool", said, call_id=call_id))
                self._obs.tool_interrupted(call_id, content=said)
            self._obs.step_ended()

    async def _call(self, step: int, call: ToolCall, open_calls: dict[str, str]) -> None:
        tool = next(t for t in self._tools if t.name == call.name)
        context = ToolContext(self._obs.agent_id, call.call_id, self._turns, step)
        result = await tool(dict(call.arguments), context)
        content, is_error = (
            (result, False) if isinstance(result, str) else (result.content, result.is_error)
        )
        del open_calls[call.call_id]
        self._history.append(Message("tool", content, call_id=call.call_id))
        self._obs.tool_answered(call.call_id, content, is_error=is_error)

    def _cancelled_end(self) -> dict[str, str] | None:
        if self._first is None:
            return None
        reason, cause = self._first
        return {"kind": "closed"} if cause == _CLOSE else _aborted(reason, cause)

    def _accept(self, content: str) -> str:
        if self._closing:
            raise AgentClosedError("the agent is closed")
        mid = f"m{next(self._ids)}"
        self._contents[mid] = content
        return mid

    def _notify(self) -> None:
        self._settled.set()
        self._settled = trio.Event()


def _aborted(reason: str, cause: str) -> dict[str, str]:
    return {"kind": "aborted", "reason": reason, "cause": cause}


@asynccontextmanager
async def open_loop(
    model: Model, tools: Sequence[Tool], observer: AgentObserver, options: AgentOptions
) -> AsyncGenerator[LoopAgent, None]:
    agent = LoopAgent(model, tools, observer, options)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.run)
        try:
            yield agent
        finally:
            agent.close()


factory = observed(open_loop)
