"""Known-bad agents: each is the real agent with one seeded defect. The conformance suite
must fail on every one of them (see tests/test_known_bad.py)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from trio_agents import (
    Agent,
    AgentOptions,
    CancelCause,
    EventBus,
    MessageId,
    Model,
    Record,
    RunResult,
    Runtime,
    SessionStore,
    ShellExecutor,
    Tool,
    open_agent,
    open_runtime,
)
from trio_agents._inbox import Inbox, InboxMessage
from trio_agents._registry import Lifecycle


class _ForgetfulInbox(Inbox):
    __slots__ = ()

    def requeue_steering(self) -> list[InboxMessage]:
        steering = frozenset(m.id for m in self if m.kind == "steering")
        self.discard_work(only=steering)
        return []


class SteeringLostAtTurnEnd(Agent):
    """(f) Steering a turn did not consume is silently dropped when the turn ends, instead
    of being re-queued as a prompt."""

    __slots__ = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inbox = _ForgetfulInbox()


class IdleCancelEmits(Agent):
    """(b) An idle cancel emits CancelRequested and reports success."""

    __slots__ = ()

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        if super().cancel(reason, cause=cause):
            return True
        return self.status.value != "closed"


def factory_for(cls: type[Agent]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(
        model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
    ) -> AbstractAsyncContextManager[Agent]:
        return open_agent(
            model, tools=tools, events=events, options=options, session="bad", agent_class=cls
        )

    factory.__name__ = cls.__name__
    return factory


steering_lost_at_turn_end = factory_for(SteeringLostAtTurnEnd)
idle_cancel_emits = factory_for(IdleCancelEmits)


class QueuedPromptBatchedIntoCancelledTurn(Agent):
    """(a) A cancel takes the queued prompts into the cancelled turn's history (as the
    harness's first era batched them) instead of discarding them."""

    __slots__ = ()

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        turn = self._turn  # pyright: ignore[reportPrivateUsage]
        if turn is not None and not turn.cancelled:
            while (prompt := self._inbox.pop_prompt()) is not None:  # pyright: ignore[reportPrivateUsage]
                self.session.append("user/message", {"id": prompt.id, "content": prompt.content})
        return super().cancel(reason, cause=cause)


class WaitIdleAtTurnBoundary(Agent):
    """(e) `wait_idle` returns when a turn ends, even though a queued prompt has not
    started yet."""

    __slots__ = ()

    async def wait_idle(self) -> None:
        await trio.lowlevel.checkpoint()
        start = len(self.session)
        while self.status.value == "running":
            await trio.lowlevel.checkpoint()
            if any(r.type == "turn/end" for r in self.session.records[start:]):
                return
            await self._settled.park()  # pyright: ignore[reportPrivateUsage]

    async def _run_turn(self, prompt: InboxMessage) -> None:
        await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]
        self._settled.unpark_all()  # pyright: ignore[reportPrivateUsage]  # wakes waiters early


class ToolResultMissingAfterCancel(Agent):
    """(h) A cancelled turn records no result for the tool calls it interrupted."""

    __slots__ = ()

    def _append(self, type: str, data: Mapping[str, object]) -> Record:
        if type == "tool/result" and data.get("interrupted"):
            return Record.of(type, data)  # dropped: never reaches the session
        return super()._append(type, data)


queued_prompt_batched_into_cancelled_turn = factory_for(QueuedPromptBatchedIntoCancelledTurn)
wait_idle_at_turn_boundary = factory_for(WaitIdleAtTurnBoundary)
tool_result_missing_after_cancel = factory_for(ToolResultMissingAfterCancel)


# -- runtimes with one defect in publication or teardown -----------------------------------


class _AcloseBeforeLoopExit(Lifecycle):
    """(c) Closing unregisters and detaches at once, without waiting for the loop to exit."""

    def _request_close(self) -> None:
        super()._request_close()
        self._unregister()
        self._detach()  # the loop writes its turn/end after the detach


class _DetachBeforeFlush(Lifecycle):
    """(d) The session is detached before the loop's closing turn/end is flushed."""

    async def _teardown(self) -> None:
        self._detach()
        await super()._teardown()


class _LoserLeftRegistered(Lifecycle):
    """(g) The agent is registered before the session enters the store, and a loser of a
    same-id race is not unregistered."""

    def publish(self) -> None:
        self.services.live[self.agent.id] = self
        super().publish()

    def _unregister(self) -> None:
        if self._registered:  # pyright: ignore[reportPrivateUsage]
            super()._unregister()


def runtime_factory_for(lifecycle: type[Lifecycle]):  # type: ignore[no-untyped-def] # pyright: ignore
    class BadRuntime(Runtime):
        lifecycle_class = lifecycle

    def factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
        return open_runtime(store, runtime_class=BadRuntime)

    factory.__name__ = lifecycle.__name__.strip("_")
    return factory


aclose_before_loop_exit = runtime_factory_for(_AcloseBeforeLoopExit)
detach_before_flush = runtime_factory_for(_DetachBeforeFlush)
loser_left_registered = runtime_factory_for(_LoserLeftRegistered)


class SendDroppedRightAfterCancel(Agent):
    """A send that lands right after an effective cancel, in the same scheduler batch (before
    the driver has run again), is silently dropped: the harness's first era kept a pre-run
    "cancel requested" marker that swallowed it. Reachable only when the two operations share
    a batch, so only schedule exploration finds it."""

    __slots__ = ("_just_cancelled",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._just_cancelled = False

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        effective = super().cancel(reason, cause=cause)
        self._just_cancelled = self._just_cancelled or effective
        return effective

    def send(self, content: str) -> MessageId:
        if self._just_cancelled:
            return MessageId(f"m{next(self._message_ids)}")  # pyright: ignore[reportPrivateUsage]
        return super().send(content)

    async def _run_turn(self, prompt: InboxMessage) -> None:
        try:
            await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]
        finally:
            self._just_cancelled = False  # the driver has run: the marker is consumed

    def _settle(self) -> None:
        self._just_cancelled = False
        super()._settle()  # pyright: ignore[reportPrivateUsage]


send_dropped_right_after_cancel = factory_for(SendDroppedRightAfterCancel)


# -- shell executors with one defect ---------------------------------------------------------


class _LeaderOnlyKill(ShellExecutor):
    """(i) Kills signal the job's leader, not its process group: a grandchild survives."""

    async def kill_group(self, process: trio.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.grace):
            await process.wait()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


class _OwnerForgottenAtEnd(ShellExecutor):
    """(j) A finished job forgets its owner, so anyone may read it afterwards."""

    def owner_of(self, job_id: str) -> str | None:
        if self.has_job(job_id) and self.result(job_id) is not None:
            return None
        return super().owner_of(job_id)


class _NoticeForKilledJobs(ShellExecutor):
    """(k) Killed jobs still send a job-done notice (a closing owner's jobs included)."""

    async def kill(self, job_id: str, *, notify: bool = True) -> RunResult:
        return await super().kill(job_id, notify=True)


def shell_factory_for(executor: type[ShellExecutor]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(cwd: str) -> ShellExecutor:
        return executor(cwd=cwd, grace=0.1)

    factory.__name__ = executor.__name__.strip("_")
    return factory


leader_only_kill = shell_factory_for(_LeaderOnlyKill)
owner_forgotten_at_end = shell_factory_for(_OwnerForgottenAtEnd)
notice_for_killed_jobs = shell_factory_for(_NoticeForKilledJobs)
