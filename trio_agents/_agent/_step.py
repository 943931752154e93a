"""One step of a turn: the step's input, its model call inside the private step abort (a
nested cancel scope that also carries `step_timeout`), its tool calls, and the records that
keep its history balanced however it ends (D368, D389).

`run_step` is a function of its data, `StepParts`: the records it makes go to the session it
is given and its events to the bus it is given, at the moment the contract puts them (a
record in a `finally`, an event a listener may cancel on), so nothing comes back through the
agent. The agent builds the parts for each step; a test double changes a part (a session
that loses records, a model that sees another request, a bus, a gate), not a step hook.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from .._model._seam import Finish, Message, Model, ModelRequest, ToolCall, ToolSpec
from .._store._records import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
)
from .._store._session import Session
from .._tool._seam import Tool, ToolContext
from ._approval import Approval, ApprovalRequest
from ._approval_gate import Cancel, Gate
from ._events import EventBus, StepEnded, StepStarted, TextStreamed, ToolStarted
from ._inbox import Inbox
from ._options import AgentOptions
from ._turn import (
    StepAborted,
    Turn,
    commit,
    read_reply,
    run_tool,
    session_call_ids,
    unique_call_ids,
)

__all__ = ["StepParts", "StepTools", "run_step"]


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


@dataclass(frozen=True, slots=True)
class StepParts:
    """What a step of an agent reads and writes, made by the agent for each step (D389).

    agent_id: the agent's id, in the step's events and its tools' contexts.
    session: the history a request is made of, and where the step's records go.
    events: where the step's events go.
    model: whose `stream` the step calls, once.
    tools: the agent's tools as its steps see them (`StepTools`).
    options: the system prompt, `step_timeout`, and what every request carries.
    inbox: the steering and context the step claims as its input.
    approval: the policy and approver a call passes `gate` with first, or None.
    gate: the approval gate (`admit`).
    cancel: the agent's `cancel`, which a `cancel` decision calls (rule A16).
    """

    agent_id: str
    session: Session
    events: EventBus
    model: Model
    tools: StepTools
    options: AgentOptions
    inbox: Inbox
    approval: Approval | None
    gate: Gate
    cancel: Cancel


async def run_step(turn: Turn, step: int, parts: StepParts) -> bool | StepAborted:
    """One model call and its tools: True if the turn should continue, a `StepAborted` if the
    step abort or `step_timeout` ended it. The reply's call ids are made unique in the
    session (D125); each call passes the approval gate first when there is an approval.
    Always a checkpoint (the pre-step one)."""
    # The pre-step (or continuation) window: a cancel landing here ends the turn before
    # anything of this step is claimed or recorded.
    await trio.lowlevel.checkpoint()
    _open(turn, step, parts)
    text: list[str] = []
    streamed = dispatched = False
    unanswered: dict[int, ToolCall] = {}
    turn.step_abort = None
    timeout = parts.options.step_timeout
    scope = trio.CancelScope(relative_deadline=math.inf if timeout is None else timeout)
    turn.step_scope = scope
    try:
        with scope:
            # No model call may start once the turn is cancelled (e.g. by a StepStarted
            # listener, or by a task that ran at the pre-step checkpoint); nothing runs
            # between this check and the call. Not a schedule point: the pre-step
            # checkpoint was one, and the model call is another (D365).
            await trio.lowlevel.checkpoint_if_cancelled()
            calls, finish = await _model_call(turn, step, parts, text)
            streamed = True
            dispatched = _record_reply(parts, "".join(text), calls, finish, unanswered)
            if dispatched:
                # Write-ahead (rule L7): a tool's side effect may outlive this process,
                # so its call is durable before it starts, one commit for the step.
                await commit(parts.session, f"the tool calls of turn {turn.number} step {step}")
                # A listener or observer may have cancelled the turn since the stream's
                # last checkpoint: then no tool may start (they get interrupted results).
                await trio.lowlevel.checkpoint_if_cancelled()
                run_call = functools.partial(_call_tool, turn, step, parts, unanswered)
                async with trio.open_nursery() as nursery:
                    for index, call in enumerate(calls):
                        nursery.start_soon(run_call, index, call)
    finally:
        turn.step_scope = None
        _close(turn, step, parts, "" if streamed else "".join(text), unanswered)
    # A tool may absorb the step's cancellation (a worker thread, a tool that catches
    # Cancelled and returns), so look at whether the step scope was cancelled, not only
    # at whether it caught the exception.
    if scope.cancelled_caught or (scope.cancel_called and not turn.cancelled):
        if turn.step_abort is not None:
            return StepAborted(turn.step_abort, "step")
        return StepAborted("step-timeout", "timeout")
    return dispatched


def _open(turn: Turn, step: int, parts: StepParts) -> None:
    """The step's input (the steering and context it claims) and its start."""
    append = parts.session.append
    for message in parts.inbox.claim_step_input():
        kind = STEERING_MESSAGE if message.kind == "steering" else CONTEXT_MESSAGE
        data = {"id": message.id, "content": message.content}
        if message.system:
            data["role"] = "system"
        append(kind, data)
    append(STEP_START, {"turn": turn.number, "step": step})
    parts.events.emit(StepStarted(parts.agent_id, turn.number, step))


async def _model_call(
    turn: Turn, step: int, parts: StepParts, text: list[str]
) -> tuple[list[ToolCall], Finish]:
    """The model call, its text streamed into `text` and announced piece by piece; the
    reply's calls with ids unique in the session."""
    # A frozen view, not a copy: a model may keep the request, and a step costs the same at
    # any length of history (D330).
    prompt = parts.options.system_prompt
    head = () if prompt is None else (Message("system", prompt),)
    messages = parts.session.message_snapshot(head)
    parts.tools.refresh()
    request = ModelRequest(messages, parts.tools.specs, parts.options)

    def streamed(piece: str) -> None:
        text.append(piece)
        parts.events.emit(TextStreamed(parts.agent_id, turn.number, step, piece))

    calls, finish = await read_reply(parts.model.stream(request), streamed)
    return parts.tools.unique(calls, parts.session), finish


def _record_reply(
    parts: StepParts,
    text: str,
    calls: list[ToolCall],
    finish: Finish,
    unanswered: dict[int, ToolCall],
) -> bool:
    """Record the reply and the calls to run, each unanswered until its result; whether
    there are any."""
    assistant: dict[str, object] = {"content": text, "finish": finish.reason}
    if finish.usage is not None:
        assistant["usage"] = {
            "input_tokens": finish.usage.input_tokens,
            "output_tokens": finish.usage.output_tokens,
        }
    parts.session.append(ASSISTANT_MESSAGE, assistant)
    # A reply cut at the token limit may hold truncated calls: never run them.
    if not calls or finish.reason == "length":
        return False
    for index, call in enumerate(calls):
        data = {"call_id": call.call_id, "name": call.name, "arguments": call.arguments}
        parts.session.append(TOOL_CALL, data)
        unanswered[index] = call
    return True


def _close(
    turn: Turn, step: int, parts: StepParts, cut: str, unanswered: dict[int, ToolCall]
) -> None:
    """What keeps the history balanced however the step ended: the text of a reply it cut,
    a result for every call without one, and the step's end."""
    append = parts.session.append
    if cut:
        append(ASSISTANT_MESSAGE, {"content": cut, "interrupted": True})
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
    parts.events.emit(StepEnded(parts.agent_id, turn.number, step))


async def _call_tool(
    turn: Turn,
    step: int,
    parts: StepParts,
    unanswered: dict[int, ToolCall],
    index: int,
    call: ToolCall,
) -> None:
    if parts.approval is not None:
        request = ApprovalRequest(
            parts.agent_id, call.call_id, turn.number, step, call.name, call.arguments
        )
        if not await parts.gate(
            parts.approval, request, turn, session=parts.session, cancel=parts.cancel
        ):
            del unanswered[index]
            return
    parts.events.emit(ToolStarted(parts.agent_id, turn.number, step, call.call_id, call.name))
    context = ToolContext(parts.agent_id, call.call_id, turn.number, step)
    result = await run_tool(parts.tools.by_name, call, context)
    del unanswered[index]
    data: dict[str, object] = {
        "call_id": call.call_id,
        "content": result.content,
        "is_error": result.is_error,
    }
    if result.details is not None:
        data["details"] = result.details
    parts.session.append(TOOL_RESULT, data)
