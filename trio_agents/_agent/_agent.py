"""The agent: an inbox, a status, and one driver task that turns prompts into turns.

Cancellation is trio's. A turn runs inside its own `trio.CancelScope`; `cancel()` cancels it
with `reason=`. Each step (one model call plus its tool calls, `_agent/_step.py`) runs inside
a nested scope, the private step abort, which also carries `step_timeout` as its deadline.
Because trio lets the outermost cancelled scope catch `Cancelled`, a turn cancel passes
through the step scope and a step abort stops at it, with no bookkeeping to tell them apart.

Every record is appended synchronously, so the `finally` blocks that keep history balanced
(an interrupted reply, a result for every started tool call, `step/end`, `turn/end`) run to
completion even while the task is being cancelled. The loop waits for its store twice: before
a step's tools start, for their calls, and before it settles IDLE, for the finished turns
(rule L7); everything else is written behind.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Final

import trio

from .._errors import AgentClosedError, AlreadyRunningError, PersistenceError
from .._model._seam import Message, Model
from .._nursery import runs_inside
from .._store._records import (
    PROMPT_DROPPED,
    PROMPT_QUEUED,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    TurnEndReason,
    aborted,
    closed,
    completed,
    errored,
    max_steps,
)
from .._store._repair import pending_prompts
from .._store._session import Session
from .._tool._seam import Tool
from .._util import describe
from ._approval import Approval
from ._approval_gate import Gate, admit
from ._events import (
    CancelRequested,
    EventBus,
    StatusChanged,
    TurnEnded,
    TurnStarted,
)
from ._inbox import Inbox, InboxMessage, MessageKind, context_of
from ._options import AgentOptions
from ._parts import check_parts
from ._status import AgentStatus
from ._step import StepParts, StepTools, run_step
from ._turn import (
    CLOSED_CAUSE,
    CancelCause,
    Closer,
    MessageId,
    StepAborted,
    Turn,
    Wakeup,
    claim_lost,
    commit,
    committed,
    holds,
    replaces_cancellation,
    resume_counters,
)
from ._turn_stream import TurnStream

__all__ = ["Agent"]

logger = logging.getLogger("trio_agents.agent")

_PUBLIC_CAUSES: Final = ("user", "parent")


class Agent:
    """One conversational agent. Its id is its session's id.

    Delivery (`send`, `steer`, `inject`) and `cancel` are synchronous: they change state at
    once and never block. `wait_idle` is the one awaitable. The loop itself runs in `run()`,
    which the agent's owner (`open_agent`, the registry) starts in a nursery it owns.
    `approval` (a policy and an approver) makes the agent ask before the calls its policy
    gates (rules A14-A18). `tools` is read again at each step, so a live sequence (the
    tools of an MCP server, `open_mcp_tools`) may change between steps. Constructing one
    raises ValueError if two of its tools have the same name.
    """

    __slots__ = (
        "_approval",
        "_cancelling",
        "_closing",
        "_events",
        "_exited",
        "_inbox",
        "_loop_started",
        "_loop_task",
        "_message_ids",
        "_model",
        "_options",
        "_parked",
        "_session",
        "_settled",
        "_status",
        "_tools",
        "_turn",
        "_turns",
        "_wake",
    )

    def __init__(
        self,
        *,
        session: Session,
        model: Model,
        tools: Sequence[Tool] = (),
        options: AgentOptions | None = None,
        events: EventBus | None = None,
        approval: Approval | None = None,
    ) -> None:
        check_parts(model=model, tools=tools, options=options, approval=approval)
        self._session = session
        self._approval = approval
        if approval is not None:
            # "Always" answers hold for the rest of the session, across resumes.
            approval.restore(session.records)
        self._model = model
        self._tools = StepTools(tools)
        self._options = options if options is not None else AgentOptions()
        self._events = events if events is not None else EventBus()
        self._inbox = Inbox()
        # Prompts a crash left queued (rule L8) wait, parked, until the agent is woken: a
        # resumed agent does not start work nobody asked this process for.
        for mid, content in pending_prompts(session.records):
            self._inbox.push(InboxMessage(mid, content, "prompt", durable=True))
        self._parked = self._inbox.has_prompts
        # Invariants of the agent's state, kept by every method:
        # - status is RUNNING while a turn runs or a prompt is queued (unless `_parked`: the
        #   prompts restored on resume, until woken), IDLE otherwise, and CLOSED from
        #   `_begin_close` on (CLOSED is final);
        # - `_turn` is the running turn, None between turns;
        # - `_closing` goes True once and never back; from then on nothing is accepted;
        # - `_loop_started` goes True once, when `run()` starts; `_exited` goes True once,
        #   when the loop has exited or, closed before it started, never will run;
        # - `_cancelling` is True only while `cancel()` delivers its CancelRequested.
        self._status = AgentStatus.IDLE
        self._turn: Turn | None = None
        self._turns, last_message = resume_counters(session)
        self._message_ids = itertools.count(last_message + 1)
        self._closing = False
        self._cancelling = False
        self._loop_started = False
        self._loop_task: trio.lowlevel.Task | None = None
        # The loop is the only task that waits to be woken: it parks itself here, which is
        # what a ParkingLot would do, without a lot and its dict per idle agent.
        self._wake = Wakeup()
        self._settled = trio.lowlevel.ParkingLot()
        # Whether the loop has exited (or will never run). Waiters park on `_settled`: an
        # Event per agent would cost more than the bool at ten thousand idle agents.
        self._exited = False

    # -- identity and state -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent's id, which is its session's id."""
        return self._session.id

    @property
    def session(self) -> Session:
        """The session the agent records its turns in."""
        return self._session

    @property
    def events(self) -> EventBus:
        """The bus the agent emits its events on (its runtime's, in a runtime)."""
        return self._events

    @property
    def options(self) -> AgentOptions:
        """The agent's options, fixed at construction."""
        return self._options

    @property
    def status(self) -> AgentStatus:
        """IDLE, RUNNING or CLOSED; each change is announced as `StatusChanged`."""
        return self._status

    @property
    def pending(self) -> tuple[tuple[MessageId, MessageKind], ...]:
        """Accepted messages not yet delivered, as (id, kind), in delivery order; on a
        resumed agent, first the prompts restored parked (see `wake`)."""
        return tuple((MessageId(m.id), m.kind) for m in self._inbox)

    @property
    def parked(self) -> bool:
        """Whether prompts restored on resume (queued but never started when the session
        was last live) are waiting for `wake`, a `send` or a `steer`. Never blocks."""
        return self._parked

    def wake(self) -> bool:
        """Run the prompts restored parked on resume, in their order: the status is RUNNING
        before this returns. Returns False, doing nothing, if none are parked (or the agent
        is closing). `send` and `steer` wake the agent too, their prompt queued after the
        restored ones; `cancel` drops them instead. Never blocks."""
        if not self._parked or self._closing:
            return False
        self._wake_driver()
        return True

    def __repr__(self) -> str:
        return f"<Agent {self.id!r} {self._status.value}>"

    # -- delivery -----------------------------------------------------------------------

    def send(self, content: str) -> MessageId:
        """Queue a prompt. Each prompt is one turn, in the order sent.

        From IDLE the status is RUNNING before this returns, so `await wait_idle()` right
        after waits for this prompt's turn. A prompt that queues behind other work (a
        running turn, queued or parked prompts) is recorded as `prompt/queued`, which the
        store commits without waiting for the turn (rule L8). Never blocks.

        Raises AgentClosedError once the agent is closing or closed, TypeError if `content`
        is not a str, PersistenceError if the session's store cannot take the record.
        """
        message = self._accept("send", content, "prompt")
        self._wake_driver()
        return MessageId(message.id)

    def stream(self, content: str) -> TurnStream:
        """Send `content` and follow its turn: `async with agent.stream(prompt) as turn:`,
        `async for event in turn:`, `await turn.result()` (see `TurnStream`). The prompt is
        sent on entering the block, exactly as by `send`; leaving it does not cancel the
        turn. Never blocks."""
        return TurnStream(self, self._events, content)

    def _queued_behind(self) -> bool:
        """Whether a prompt accepted now waits behind other work rather than starting at
        once: then it gets its own `prompt/queued` record (rule L8)."""
        return self._status is AgentStatus.RUNNING or self._inbox.has_prompts

    def steer(self, content: str) -> MessageId:
        """Deliver `content` before the next model call of the running turn.

        With no live turn (IDLE, or the turn is already cancelled) it is queued as a prompt,
        exactly like `send`: steering never joins a cancelled turn. Steering the turn does
        not take (it ends first) becomes the next prompts; a cancel or a close drops it. Never
        blocks.

        Raises AgentClosedError once the agent is closing or closed, TypeError if `content`
        is not a str.
        """
        turn = self._turn
        kind: MessageKind = "steering" if turn is not None and not turn.cancelled else "prompt"
        message = self._accept("steer", content, kind)
        if kind == "prompt":
            self._wake_driver()
        return MessageId(message.id)

    def inject(self, message: Message | str) -> MessageId:
        """Add context to the next step, whichever turn it belongs to. Never starts a turn.

        `message` is a `Message` of role "user" or "system" (how the model should read it),
        or a plain `str`, shorthand for user-role context. A cancel keeps it. Raises
        ValueError for another role or a message carrying tool calls, TypeError for anything
        else, and AgentClosedError once the agent is closing or closed. Never blocks.
        """
        if isinstance(message, str):
            return MessageId(self._accept("inject", message, "context").id)
        content, system = context_of(message)
        return MessageId(self._accept("inject", content, "context", system=system).id)

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        """Stop the running turn and drop queued prompts and steering.

        Returns False, doing and emitting nothing, when there is nothing to cancel: no live
        turn and nothing queued (a second cancel of a turn still unwinding is such a case).
        Otherwise emits `CancelRequested`, clears the queue and the steering (recording
        `prompt/dropped` for recorded prompts, rule L8), cancels the turn's scope, and
        returns True. Injected context is kept: it is information for the
        next step, not work. The first cause given to a turn is the one it records.

        On a closed agent it returns False. Never blocks: the turn unwinds in the agent's loop
        (`wait_idle` waits for that). Raises ValueError if `cause` is not `"user"` or
        `"parent"`, TypeError if `reason` is not a str.
        """
        if cause not in _PUBLIC_CAUSES:
            raise ValueError(f"cause must be 'user' or 'parent', got {cause!r}")
        if not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        if self._status is AgentStatus.CLOSED or self._cancelling:
            return False  # closed, or a cancel is being announced right now (re-entrant)
        turn = self._turn
        live = turn is not None and not turn.cancelled
        work = self._inbox.work_ids()
        if not live and not work:
            return False
        if turn is not None and live:
            # Claimed before anyone hears of it: the first cause stays first even if a
            # listener cancels again, and steering sent meanwhile cannot join this turn.
            turn.claim(reason, cause)
        self._cancelling = True
        try:
            self._events.emit(CancelRequested(self.id, cause, reason))
        finally:
            self._cancelling = False
        # Only the work there was when cancel() was called: a listener's send comes after.
        self._record_dropped(self._inbox.discard_work(only=work), "cancelled")
        if not self._inbox.has_prompts:
            self._parked = False
        if turn is not None and live:
            turn.cancel(reason, cause)
        return True

    async def wait_idle(self) -> None:
        """Wait until the agent is IDLE with nothing queued (parked prompts aside); on a
        CLOSED agent, until its loop has exited. The agent goes IDLE only once its finished
        turns are committed to its store (rule L7). Always a checkpoint. Never raises
        because a turn failed."""
        if self._status is AgentStatus.IDLE or (
            self._status is AgentStatus.CLOSED and self._exited
        ):
            await trio.lowlevel.checkpoint()
        # Otherwise the first park is the checkpoint: a schedule point before it would cost
        # a pass of the scheduler per prompt and change nothing (D365).
        while True:
            if self._status is AgentStatus.CLOSED:
                if self._exited:
                    return
            elif self._status is AgentStatus.IDLE:
                return
            await self._settled.park()

    # -- the loop -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Closer] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the agent's loop until it is closed.

        Its owner starts this once, with `close = await nursery.start(agent.run)`, and so
        receives the agent's closer: `await close()` stops the loop (the running turn ends
        `closed`) and waits, shielded and bounded by `close_grace`, for it to exit. Only the
        loop's owner holds that capability; `open_agent` owns it for you. (The registry runs
        the loop in the agent's one task and bounds its close itself, design D46.)

        Always a checkpoint (also for an agent closed before its loop started). A failing turn does
        not end the loop (the turn ends `error`); a PersistenceError does, and propagates. Raises
        RuntimeError if the loop was started before.
        """
        if self._loop_started:
            raise AlreadyRunningError(
                f"agent {self.id!r} is already running its loop; start run() once per agent"
            )
        self._loop_started = True
        task_status.started(Closer(self._begin_close, self._aclose))
        self._loop_task = trio.lowlevel.current_task()
        try:
            if self._closing:  # closed before it started: no turn, but still a checkpoint
                await trio.lowlevel.checkpoint()
            while not self._closing:
                # An outer cancellation that a model or tool swallowed must still stop us
                # before the next prompt is taken.
                await trio.lowlevel.checkpoint_if_cancelled()
                prompt = None if self._parked else self._inbox.pop_prompt()
                if prompt is not None:
                    await self._run_turn(prompt)
                    continue
                if not committed(self._session):
                    # IDLE promises that every finished turn is durable (rule L7). Once:
                    # only prompt records can be appended meanwhile, and a store that
                    # cannot tell must not spin this loop.
                    await commit(self._session, "the finished turns")
                    if self._inbox.has_prompts and not self._parked:
                        continue  # sent during the commit: run it first
                self._settle()
                # A status listener may have sent during the settle: only park if still idle.
                if self._status is AgentStatus.IDLE:
                    await self._wake.park()
        finally:
            self._closing = True
            self._set_status(AgentStatus.CLOSED)
            self._exited = True
            self._settled.unpark_all()

    async def _run_turn(self, prompt: InboxMessage) -> None:
        """Run one prompt's turn: its records, its events, and its end, however it ends. Seam:
        a double may change what happens around a turn (the status, who is woken, when)."""
        self._turns += 1
        turn = Turn(self._turns)
        self._turn = turn
        self._session.append(TURN_START, {"turn": turn.number})
        self._session.append(USER_MESSAGE, {"id": prompt.id, "content": prompt.content})
        self._events.emit(TurnStarted(self.id, turn.number))
        end: TurnEndReason | None = None
        try:
            with turn.scope:
                end = await self._run_steps(turn)
        except Exception as exc:
            if holds(exc, PersistenceError):
                lost = claim_lost(exc)
                if lost is not None:
                    # Another process has the session now: this turn ends here, saying why
                    # (in memory and in TurnEnded; the store writes nothing more of it).
                    end = errored(str(lost))
                raise  # a record that cannot be made durable must not pass as a failed turn
            if replaces_cancellation(exc):
                # A model or tool turned our own cancellation into an error: it was a close.
                end = closed()
            else:
                logger.warning("agent %r turn %d failed: %r", self.id, turn.number, exc)
                end = errored(describe(exc))
        finally:
            end = turn.end_reason(end)
            self._turn = None
            record = self._session.append(TURN_END, {"turn": turn.number, "reason": end})
            # Steering a turn never took is not lost: it becomes the next prompts.
            self._inbox.requeue_steering()
            self._events.emit(TurnEnded(self.id, turn.number, record.data["reason"]))

    async def _run_steps(self, turn: Turn) -> TurnEndReason:
        """The turn's steps, one after another, and the turn's end reason. Seam: a double may
        change when a turn stops stepping (the step limit, what a final answer is)."""
        limit = self._options.max_steps
        step = 0
        while True:
            if limit is not None and step >= limit:
                return max_steps()
            step += 1
            outcome = await self._run_step(turn, step)
            if isinstance(outcome, StepAborted):
                return aborted(outcome.reason, outcome.cause)
            if not outcome and not self._inbox.has_steering:
                return completed()

    async def _run_step(self, turn: Turn, step: int) -> bool | StepAborted:
        """One model call and its tools. True if the turn should continue."""
        # Made per step and held only by it: kept on the agent, its bound `cancel` would tie
        # the agent (and its session) into a reference cycle that outlives the close.
        parts = StepParts(
            self.id,
            self._session,
            self._events,
            self._model,
            self._tools,
            self._options,
            self._inbox,
            self._approval,
            self._gate(),
            self.cancel,
        )
        return await run_step(turn, step, parts)

    def _gate(self) -> Gate:
        """The approval gate each tool call passes before it runs, when the agent has an
        approval (`admit`). Seam: a double may return a gate with one flaw; it is taken
        at each step."""
        return admit

    # -- owner side ---------------------------------------------------------------------

    def _abort_step(self, reason: str) -> bool:
        """Private step abort: end the in-flight step (and so its turn) with `reason`,
        keeping queued prompts and steering. Returns False if no step is in flight."""
        turn = self._turn
        return turn is not None and turn.abort_step(reason)

    def _begin_close(self) -> None:
        """Start closing: refuse new messages, drop queued work, cancel the turn (cause
        `closed`) and wake the loop so it exits. Synchronous and idempotent. Seam: a double may
        change what closing does to the running turn and the queue."""
        if self._closing and self._status is AgentStatus.CLOSED:
            return
        self._closing = True
        dropped = self._inbox.discard_work()
        # Parked prompts were never taken up by this agent (a send or steer would have woken
        # it): they stay pending in the session, for the next resume (rule L8).
        if not self._parked:
            self._record_dropped(dropped, "closed")
        if self._turn is not None:
            self._turn.cancel(CLOSED_CAUSE, CLOSED_CAUSE)
        self._set_status(AgentStatus.CLOSED)
        if not self._loop_started:
            self._exited = True
        self._wake.ring()
        self._settled.unpark_all()

    async def _aclose(self) -> bool:
        """Close and wait, shielded and bounded by `close_grace`, for the loop to exit.
        Returns whether it exited in time.

        Called from inside the loop (a tool closing its own agent) it cannot wait for its own
        end: it starts the close and returns at once; the caller's next checkpoint raises
        Cancelled, as the turn is cancelled.
        """
        self._begin_close()
        if self._loop_task is not None and runs_inside(self._loop_task):
            await trio.lowlevel.checkpoint()
            return False
        if self._exited:
            # Closed before (or never run): nothing to wait for, but still a checkpoint,
            # shielded like the wait it stands for.
            with trio.CancelScope(shield=True):
                await trio.lowlevel.checkpoint()
            return True
        with trio.move_on_after(self._options.close_grace, shield=True):
            while not self._exited:
                await self._settled.park()
        if not self._exited:
            logger.error(
                "agent %r did not stop within close_grace=%ss; a tool is ignoring cancellation",
                self.id,
                self._options.close_grace,
            )
        return self._exited

    # -- helpers ------------------------------------------------------------------------

    def _accept(
        self, verb: str, content: str, kind: MessageKind, *, system: bool = False
    ) -> InboxMessage:
        """Check and take one delivered message (`send`, `steer`, `inject`) into the inbox.
        Seam: a double may change what is accepted, and with which kind and role."""
        if self._closing:
            raise AgentClosedError(
                f"cannot {verb} to agent {self.id!r}: it is {self._status.value}; "
                "create or resume an agent to continue this session"
            )
        if not isinstance(content, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"{verb}() takes a str, got {type(content).__name__}")
        mid = f"m{next(self._message_ids)}"
        durable = kind == "prompt" and self._queued_behind()
        message = InboxMessage(mid, content, kind, system, durable)
        if durable:
            # Appended before it is queued: an observer that fails leaves nothing queued.
            self._session.append(PROMPT_QUEUED, {"id": mid, "content": content})
        self._inbox.push(message)
        return message

    def _record_dropped(self, dropped: Sequence[InboxMessage], reason: str) -> None:
        ids = [m.id for m in dropped if m.durable]
        if ids:
            self._session.append(PROMPT_DROPPED, {"ids": ids, "reason": reason})

    def _wake_driver(self) -> None:
        """Unpark the restored prompts and, from IDLE, turn RUNNING and wake the loop. Seam: a
        double may change how a delivery wakes the loop."""
        self._parked = False
        if self._status is AgentStatus.IDLE:
            self._set_status(AgentStatus.RUNNING)
            self._wake.ring()

    def _settle(self) -> None:
        """Turn IDLE once the loop has nothing to run, and wake `wait_idle`'s waiters. Seam: a
        double may change what the loop does as it goes idle."""
        if self._status is AgentStatus.RUNNING:
            self._set_status(AgentStatus.IDLE)
        self._settled.unpark_all()

    def _set_status(self, status: AgentStatus) -> None:
        if self._status is not status:
            self._status = status
            self._events.emit(StatusChanged(self.id, status))
