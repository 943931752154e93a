"""Approvers a test or a machine answers: `HeldApprover`, whose requests each wait until
`answer` gives its decision (or `fail` makes it raise), a cancel while one waits noted; and
`QueuedApprover`, which answers each request at once with the next outcome queued."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import trio

from trio_agents import ApprovalRequest, Decision, DecisionOutcome

__all__ = ["QUEUED_BY", "HeldApprover", "QueuedApprover"]

QUEUED_BY = "queued-approver"  # the `by` of a QueuedApprover's decisions


@dataclass
class QueuedApprover:
    """An `Approver` that answers each request at once (after a checkpoint) with the next
    outcome in `answers`, or `allow_once` when none is queued.

    answers: the outcomes still to give, oldest first.
    asked: every request it was asked, oldest first.
    """

    answers: deque[DecisionOutcome] = field(default_factory=deque[DecisionOutcome])
    asked: list[ApprovalRequest] = field(default_factory=list[ApprovalRequest])

    async def __call__(self, request: ApprovalRequest) -> Decision:
        await trio.lowlevel.checkpoint()
        self.asked.append(request)
        outcome = self.answers.popleft() if self.answers else "allow_once"
        return Decision(outcome, by=QUEUED_BY)


@dataclass
class _Waiting:
    request: ApprovalRequest
    event: trio.Event = field(default_factory=trio.Event)
    answer: Decision | object | None = None


class HeldApprover:
    """An `Approver` whose every request is held until the test answers it.

    requests: every request it was asked, oldest first.
    cancelled: the call ids of the requests whose wait a cancel ended.
    """

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []
        self.cancelled: list[str] = []
        self._waiting: list[_Waiting] = []
        self._asked = trio.Event()

    @property
    def pending(self) -> tuple[str, ...]:
        """The call ids of the requests waiting for an answer, oldest first."""
        return tuple(w.request.call_id for w in self._waiting)

    def answer(self, decision: Decision | object, call_id: str | None = None) -> None:
        """Answer the request for `call_id` (default: the oldest) with `decision`; anything
        not a Decision is answered as it is (a junk answer), and an exception instance is
        raised by the approver. Never blocks: the approver returns when its task next runs.
        Raises RuntimeError if no such request waits."""
        waiting = next(
            (w for w in self._waiting if call_id is None or w.request.call_id == call_id), None
        )
        if waiting is None:
            raise RuntimeError(f"HeldApprover.answer(): no request for {call_id!r} is waiting")
        self._waiting.remove(waiting)
        waiting.answer = decision
        waiting.event.set()

    async def until_asked(self) -> None:
        """Wait until a request is waiting (over a store's worker thread, where waiting for
        every task to block says nothing). Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        while not self._waiting:
            self._asked = trio.Event()
            await self._asked.wait()

    async def __call__(self, request: ApprovalRequest) -> Decision:
        """Hold `request` until answered. Always a checkpoint."""
        self.requests.append(request)
        waiting = _Waiting(request)
        self._waiting.append(waiting)
        self._asked.set()
        try:
            await waiting.event.wait()
        except trio.Cancelled:
            self.cancelled.append(request.call_id)
            raise
        finally:
            if waiting in self._waiting:
                self._waiting.remove(waiting)
        if isinstance(waiting.answer, BaseException):
            raise waiting.answer
        return waiting.answer  # type: ignore[return-value]  # junk is the test's to give
