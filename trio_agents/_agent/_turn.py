"""The pieces of a turn that are not the loop: the running turn's state (its cancel scope and
the first cause it received), the closer a loop hands its owner, and what the loop decides
from its records and its exceptions. No state of the agent lives here."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Final, Literal, NewType

import trio

from .._errors import PersistenceError, SessionClaimLostError
from .._frozen import thaw
from .._model._seam import Finish, ModelChunk, TextDelta, ToolCall
from .._store._records import (
    MESSAGE_RECORD_TYPES,
    PROMPT_QUEUED,
    TOOL_CALL,
    TURN_START,
    TurnEndReason,
    aborted,
    closed,
)
from .._store._session import Session
from .._tool._seam import Tool, ToolContext, ToolResult
from .._util import describe

__all__ = [
    "CLOSED_CAUSE",
    "CancelCause",
    "Closer",
    "MessageId",
    "StepAborted",
    "Turn",
    "Wakeup",
    "claim_lost",
    "commit",
    "committed",
    "holds",
    "read_reply",
    "replaces_cancellation",
    "resume_counters",
    "run_tool",
    "session_call_ids",
    "unique_call_ids",
]


MessageId = NewType("MessageId", str)
"""The id `send`, `steer` and `inject` return: `m1`, `m2`, ... per agent, continuing after
the highest id of a resumed session. The message's record carries it as `id`."""
CancelCause = Literal["user", "parent"]
"""Who asked `Agent.cancel` to stop a turn: `"user"` (a person: Ctrl-C, ACP's
`session/cancel`) or `"parent"` (the program or agent driving this one). The agent treats
both alike; the turn's `aborted` end records which it was."""
CLOSED_CAUSE: Final = "closed"
"""The cause a close gives the running turn: it ends `closed`, not `aborted`."""


class Closer:
    """The capability to close one agent's loop, handed to whoever starts `Agent.run()`
    (`close = await nursery.start(agent.run)`): only the loop's owner may close it."""

    __slots__ = ("_begin", "_wait")

    def __init__(self, begin: Callable[[], None], wait: Callable[[], Awaitable[bool]]) -> None:
        self._begin = begin
        self._wait = wait

    def begin(self) -> None:
        """Start closing: refuse new messages, drop queued work, end the running turn
        `closed` and wake the loop so it exits. Synchronous and idempotent; never blocks."""
        self._begin()

    async def __call__(self) -> bool:
        """`begin()`, then wait, shielded and bounded by `close_grace`, for the loop to exit.
        Returns whether it exited in time. Always a checkpoint."""
        return await self._wait()


class Turn:
    """The running turn: its number, its cancel scope, and the first cancel it received."""

    __slots__ = (
        "asking",
        "cause",
        "number",
        "reason",
        "scope",
        "step_abort",
        "step_left",
        "step_scope",
    )

    def __init__(self, number: int) -> None:
        self.number = number
        self.scope = trio.CancelScope()
        self.reason: str | None = None
        self.cause: str | None = None
        self.step_scope: trio.CancelScope | None = None
        self.step_abort: str | None = None
        # How many of the step's calls are waiting for an approver, and the step's time left
        # when the first began to wait: the step's clock stops while a person is asked.
        self.asking = 0
        self.step_left = math.inf

    @property
    def cancelled(self) -> bool:
        return self.cause is not None

    def claim(self, reason: str, cause: str) -> None:
        """Record the turn's cancel cause (the first one wins) without cancelling yet."""
        if self.cause is None:
            self.reason, self.cause = reason, cause

    def cancel(self, reason: str, cause: str) -> None:
        self.claim(reason, cause)
        self.scope.cancel(reason=f"{self.cause}: {self.reason}")

    def abort_step(self, reason: str) -> bool:
        """End the in-flight step (and so the turn) with `reason`. False, doing nothing, if no
        step is in flight or the turn is already cancelled."""
        if self.step_scope is None or self.cancelled:
            return False
        self.step_abort = reason
        self.step_scope.cancel(reason=f"step: {reason}")
        return True

    def end_reason(self, ended: TurnEndReason | None) -> TurnEndReason:
        """How the turn ends, given how its steps ended (None: cancelled from outside, the
        owner's scope is going away, which is a close)."""
        if self.cause is not None:
            # A cancel that reached the turn before it ended wins over how it ended.
            assert self.reason is not None
            return closed() if self.cause == CLOSED_CAUSE else aborted(self.reason, self.cause)
        return closed() if ended is None else ended

    def stop_step_clock(self) -> None:
        """A call begins to wait for an approver: `step_timeout` does not count the wait."""
        self.asking += 1
        scope = self.step_scope
        if self.asking == 1 and scope is not None:
            self.step_left = max(scope.deadline - trio.current_time(), 0.0)
            scope.deadline = math.inf

    def restart_step_clock(self) -> None:
        """A call has its decision: once none waits, the step's clock runs on from where it
        stopped."""
        self.asking -= 1
        scope = self.step_scope
        if self.asking == 0 and scope is not None and not math.isinf(self.step_left):
            scope.deadline = trio.current_time() + self.step_left


class StepAborted:
    __slots__ = ("cause", "reason")

    def __init__(self, reason: str, cause: str) -> None:
        self.reason, self.cause = reason, cause


def holds(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` is a `kind`, or a group (at any depth) that contains one."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(kind)[0] is not None  # pyright: ignore[reportUnknownMemberType]
    return isinstance(exc, kind)


def claim_lost(exc: BaseException) -> SessionClaimLostError | None:
    """The SessionClaimLostError behind `exc` (itself, a member of a group at any depth, or
    a cause, as `commit` chains it to its PersistenceError), or None. Such a loss ends its
    agent alone, not the runtime (design D492)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, SessionClaimLostError):
            return link
        if isinstance(link, BaseExceptionGroup):
            todo.extend(link.exceptions)  # pyright: ignore[reportUnknownMemberType,reportUnknownArgumentType]
        if link.__cause__ is not None:
            todo.append(link.__cause__)
    return None


def replaces_cancellation(exc: BaseException) -> bool:
    """Whether `exc` was raised while a trio.Cancelled was being handled."""
    seen: set[int] = set()
    link: BaseException | None = exc.__context__
    while link is not None and id(link) not in seen:
        if isinstance(link, trio.Cancelled):
            return True
        seen.add(id(link))
        link = link.__context__
    return False


def unique_call_ids(calls: list[ToolCall], seen: set[str]) -> list[ToolCall]:
    """Tool results are matched to calls by id, but some servers send empty or repeated
    ids, and a model's ids may restart after a reload: make every id unique (and
    non-empty) among `seen`, the ids the session already holds, before anything is
    recorded. Adds the ids it returns to `seen`."""
    out: list[ToolCall] = []
    for index, call in enumerate(calls):
        base = call_id = call.call_id or f"call-{index + 1}"
        suffix = index + 1
        while call_id in seen:
            call_id = f"{base}#{suffix}"
            suffix += 1
        seen.add(call_id)
        out.append(
            call if call_id == call.call_id else ToolCall(call_id, call.name, call.arguments)
        )
    return out


def session_call_ids(session: Session) -> set[str]:
    """The ids of every tool call already in `session`."""
    return {str(r.data["call_id"]) for r in session.records if r.type == TOOL_CALL}


def resume_counters(session: Session) -> tuple[int, int]:
    """The last turn number and the highest `m<N>` message id already in `session`."""
    last_turn = 0
    last_message = 0
    for record in session.records:
        if record.type == TURN_START:
            last_turn = max(last_turn, int(record.data["turn"]))
        elif record.type in MESSAGE_RECORD_TYPES or record.type == PROMPT_QUEUED:
            mid = str(record.data.get("id", ""))
            if mid.startswith("m") and mid[1:].isdigit():
                last_message = max(last_message, int(mid[1:]))
    return last_turn, last_message


async def read_reply(
    stream: AsyncIterator[ModelChunk], on_text: Callable[[str], None]
) -> tuple[list[ToolCall], Finish]:
    """Read one model reply up to its `Finish`: each non-empty text delta goes to `on_text`
    as it arrives, the tool calls are collected. The stream is closed on every path, so a
    cancelled step closes its model call (an HTTP response, say) at once. A stream that just
    ends is a normal finish."""
    calls: list[ToolCall] = []
    finish: Finish | None = None
    try:
        async for chunk in stream:
            if isinstance(chunk, TextDelta):
                if chunk.text:
                    on_text(chunk.text)
            elif isinstance(chunk, ToolCall):
                calls.append(chunk)
            else:
                finish = chunk
                break
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    if finish is None:
        finish = Finish("tool_calls" if calls else "stop")
    return calls, finish


class Wakeup:
    """Where the agent's loop, the one task that waits to be woken, parks while idle: what a
    ParkingLot would do for one task, without a lot and its dict per idle agent."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    async def park(self) -> None:
        """Wait until `ring()` (or a cancel). A checkpoint: it always blocks first."""
        task = trio.lowlevel.current_task()
        self._task = task

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            if self._task is task:
                self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def ring(self) -> None:
        """Wake the parked task, if there is one. Never blocks."""
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)


async def run_tool(tools: Mapping[str, Tool], call: ToolCall, context: ToolContext) -> ToolResult:
    """Run one tool call. An unknown tool, or a tool that raises, is an error result the
    model can react to, not a failed turn; `Cancelled` propagates. The tool gets its own
    copy of the arguments: what it does to them never rewrites history."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(f"unknown tool {call.name!r}; this agent has: {known}", True)
    try:
        raw = await tool(thaw(call.arguments), context)
    except Exception as exc:
        return ToolResult(describe(exc), is_error=True)
    return raw if isinstance(raw, ToolResult) else ToolResult(str(raw))


def committed(session: Session) -> bool:
    """Whether every record of `session` so far is durable in its store (always, in none).
    Never blocks."""
    committer = session.committer
    return committer is None or committer.committed()


async def commit(session: Session, what: str) -> None:
    """Wait until every record of `session` so far is durable in its store (nothing to wait
    for in none, and then no checkpoint). A store that cannot make them durable raises
    PersistenceError, which stops the agent's loop: what follows (a tool's side effect, an
    idle agent) must not look durable when it is not."""
    committer = session.committer
    if committer is None or committer.committed():
        return
    try:
        await committer.commit()
    except Exception as exc:
        raise PersistenceError(
            f"session {session.id!r}: {what} could not be committed to the store "
            "(the cause says why); close the runtime and check the store"
        ) from exc
