"""One step of a turn: the step's input, its model call inside the private step abort (a
nested cancel scope that also carries `step_timeout`), its tool calls, and the records that
keep its history balanced however it ends (D368). The agent's state stays in the agent, but
for `StepTools`, what its steps read of its tools.

`run_step` is a function of the agent's parts, and the agent passes its hooks (`_append`,
`_emit`, `_stream`, `_approved`) as bound methods, taken at each step: an agent that
overrides one (a seeded defect of the conformance suite) still has its override called, at
the same point of the step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence

import trio

from .._model._seam import Finish, ToolCall, ToolSpec
from .._store._records import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    Record,
)
from .._store._session import Session
from .._tool._seam import Tool, ToolContext
from ._approval import Approval
from ._events import Event, StepEnded, StepStarted, ToolStarted
from ._inbox import Inbox
from ._turn import StepAborted, Turn, commit, run_tool, session_call_ids, unique_call_ids

__all__ = ["Append", "Approved", "Emit", "StepTools", "Stream", "run_step"]

Append = Callable[[str, Mapping[str, object]], Record]
Emit = Callable[[Event], None]
Stream = Callable[[Turn, int, list[str]], Awaitable[tuple[list[ToolCall], Finish]]]
Approved = Callable[[Approval, Turn, int, ToolCall], Awaitable[bool]]


class StepTools:
    """An agent's tools as its steps see them: `by_name` and their `specs`, taken again from
    the agent's `tools` at each step, and the ids of the session's tool calls. Raises
    ValueError if two of the tools have the same name."""

    __slots__ = ("_call_ids", "_source", "by_name", "specs")

    def __init__(self, source: Sequence[Tool]) -> None:
        names = [tool.name for tool in source]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two tools are named {name!r}; tool names must be unique")
        self._source = source
        self.by_name: dict[str, Tool] = {}
        self.specs: tuple[ToolSpec, ...] = ()
        # The tool call ids of the session, made on its first step here (from the records of
        # a resumed session): a model's ids may repeat across steps or restart after a
        # reload, and a client keys a session's calls by id (D125).
        self._call_ids: set[str] | None = None
        self.refresh()

    def refresh(self) -> None:
        """Take the tools again from the agent's `tools`."""
        # A live sequence (an MCP server's tools, which follow its `tools/list_changed`)
        # changes between steps, never within one. Of two tools of one name, the first is the
        # one the step has.
        tools: dict[str, Tool] = {}
        for tool in self._source:
            tools.setdefault(tool.name, tool)
        if tools.keys() != self.by_name.keys() or any(
            tools[name] is not self.by_name[name] for name in tools
        ):
            self.by_name = tools
            self.specs = tuple(
                ToolSpec(t.name, t.description, t.parameters) for t in tools.values()
            )

    def unique(self, calls: list[ToolCall], session: Session) -> list[ToolCall]:
        """`calls` with ids unique in `session` (D125)."""
        if self._call_ids is None:
            self._call_ids = session_call_ids(session)
        return unique_call_ids(calls, self._call_ids)


async def run_step(
    turn: Turn,
    step: int,
    *,
    agent_id: str,
    session: Session,
    inbox: Inbox,
    step_timeout: float | None,
    append: Append,
    emit: Emit,
    tools: StepTools,
    stream: Stream,
    approval: Approval | None,
    approved: Approved,
) -> bool | StepAborted:
    """One model call and its tools: True if the turn should continue, a `StepAborted` if the
    step abort or `step_timeout` ended it. `stream` makes the model call, streaming its text
    into the list it is given; `tools` makes the reply's call ids unique in the session (D125)
    and runs the calls, each through `approved` first when there is an `approval`. Always a
    checkpoint (the pre-step one)."""
    # The pre-step (or continuation) window: a cancel landing here ends the turn before
    # anything of this step is claimed or recorded.
    await trio.lowlevel.checkpoint()
    for message in inbox.claim_step_input():
        kind = STEERING_MESSAGE if message.kind == "steering" else CONTEXT_MESSAGE
        data = {"id": message.id, "content": message.content}
        if message.system:
            data["role"] = "system"
        append(kind, data)
    append(STEP_START, {"turn": turn.number, "step": step})
    emit(StepStarted(agent_id, turn.number, step))
    text: list[str] = []
    streamed = False
    dispatched = False
    unanswered: dict[int, ToolCall] = {}
    turn.step_abort = None
    scope = trio.CancelScope(
        relative_deadline=step_timeout if step_timeout is not None else math.inf
    )
    turn.step_scope = scope
    try:
        with scope:
            # No model call may start once the turn is cancelled (e.g. by a StepStarted
            # listener, or by a task that ran at the pre-step checkpoint); nothing runs
            # between this check and the call. Not a schedule point: the pre-step
            # checkpoint was one, and the model call is another (D365).
            await trio.lowlevel.checkpoint_if_cancelled()
            calls, finish = await stream(turn, step, text)
            calls = tools.unique(calls, session)
            streamed = True
            assistant: dict[str, object] = {"content": "".join(text), "finish": finish.reason}
            if finish.usage is not None:
                assistant["usage"] = {
                    "input_tokens": finish.usage.input_tokens,
                    "output_tokens": finish.usage.output_tokens,
                }
            append(ASSISTANT_MESSAGE, assistant)
            # A reply cut at the token limit may hold truncated calls: never run them.
            if calls and finish.reason != "length":
                for index, call in enumerate(calls):
                    append(
                        TOOL_CALL,
                        {
                            "call_id": call.call_id,
                            "name": call.name,
                            "arguments": call.arguments,
                        },
                    )
                    unanswered[index] = call
                dispatched = True
                # Write-ahead (rule L7): a tool's side effect may outlive this process,
                # so its call is durable before it starts, one commit for the step.
                await commit(session, f"the tool calls of turn {turn.number} step {step}")
                # A listener or observer may have cancelled the turn since the stream's
                # last checkpoint: then no tool may start (they get interrupted results).
                await trio.lowlevel.checkpoint_if_cancelled()
                run_call = functools.partial(
                    _call_tool,
                    agent_id=agent_id,
                    tools=tools,
                    approval=approval,
                    approved=approved,
                    append=append,
                    emit=emit,
                )
                async with trio.open_nursery() as nursery:
                    for index, call in enumerate(calls):
                        nursery.start_soon(run_call, turn, step, index, call, unanswered)
    finally:
        turn.step_scope = None
        if not streamed and text:
            append(ASSISTANT_MESSAGE, {"content": "".join(text), "interrupted": True})
        for call in unanswered.values():
            append(
                TOOL_RESULT,
                {
                    "call_id": call.call_id,
                    "content": f"tool call {call.name!r} was interrupted before it finished",
                    "is_error": True,
                    "interrupted": True,
                },
            )
        append(STEP_END, {"turn": turn.number, "step": step})
        emit(StepEnded(agent_id, turn.number, step))
    # A tool may absorb the step's cancellation (a worker thread, a tool that catches
    # Cancelled and returns), so look at whether the step scope was cancelled, not only
    # at whether it caught the exception.
    if scope.cancelled_caught or (scope.cancel_called and not turn.cancelled):
        if turn.step_abort is not None:
            return StepAborted(turn.step_abort, "step")
        return StepAborted("step-timeout", "timeout")
    return dispatched


async def _call_tool(
    turn: Turn,
    step: int,
    index: int,
    call: ToolCall,
    unanswered: dict[int, ToolCall],
    *,
    agent_id: str,
    tools: StepTools,
    approval: Approval | None,
    approved: Approved,
    append: Append,
    emit: Emit,
) -> None:
    if approval is not None and not await approved(approval, turn, step, call):
        del unanswered[index]
        return
    emit(ToolStarted(agent_id, turn.number, step, call.call_id, call.name))
    context = ToolContext(agent_id, call.call_id, turn.number, step)
    result = await run_tool(tools.by_name, call, context)
    del unanswered[index]
    append(
        TOOL_RESULT,
        {"call_id": call.call_id, "content": result.content, "is_error": result.is_error},
    )
