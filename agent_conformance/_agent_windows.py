"""The agent machine's rules that act inside the agent rather than between its steps:
one-shot listeners armed at an event (the pre-step, pre-model and continuation windows, the
replacement-turn race, a raising listener) and `cancel` and `send` raced in one scheduler
batch; the approval window's rules come from `ApprovalWindow`.

`AgentMachine` runs these with its other rules; its docstring lists the state they use.
"""

from __future__ import annotations

from typing import ClassVar, Literal, cast

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import (
    AgentStatus,
    CancelRequested,
    Event,
    EventBus,
    StatusChanged,
    StepEnded,
    StepStarted,
    TextStreamed,
    TurnEnded,
    TurnStarted,
)

from ._agent_harness import LISTENER_FAILURE, is_neighbours
from ._agent_properties import STATUS_AFTER_SEND
from ._approval_window import ApprovalWindow
from ._machine import rule

__all__ = ["RAISING_AT", "AgentWindows"]

# The events a raising listener may be armed at (A11).
RAISING_AT: dict[str, type] = {
    "CancelRequested": CancelRequested,
    "StatusChanged": StatusChanged,
    "StepEnded": StepEnded,
    "StepStarted": StepStarted,
    "TextStreamed": TextStreamed,
    "TurnEnded": TurnEnded,
    "TurnStarted": TurnStarted,
}


class AgentWindows(ApprovalWindow):
    """The rules inside the agent's windows (see `AgentMachine`)."""

    explore_schedules: ClassVar[bool]
    bus: EventBus
    events: list[Event]
    witnesses: list[tuple[int, list[Event]]]
    _counter: int

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def _content(self, what: str) -> str:
        """A content no other message has: a request that misplaces one shows it."""
        return f"{what} {self._next()}"

    def _rule_cancel(self, reason: str, cause: Literal["user", "parent"]) -> bool:
        self._rule_cancelling = True
        self._cancel_views.clear()
        try:
            return bool(self.agent.cancel(reason, cause=cause))
        finally:
            self._rule_cancelling = False

    # -- rules ---------------------------------------------------------------------------

    @precondition(
        lambda self: self.has.same_batch_races and _exploring(self) and self.ref.status != "closed"
    )
    @rule(cancel_spawned_first=st.booleans())
    def race_cancel_and_send(self, cancel_spawned_first: bool) -> None:
        """cancel() and send() from two tasks started in the same scheduler batch: which
        runs first is the scheduler's choice. Both are synchronous, so the order they ran in
        is observed exactly and the reference applies them in it, with no driver step in
        between (a task they wake runs in a later batch)."""
        ran: list[tuple[str, object]] = []
        content = self._content("raced")

        async def cancel() -> None:
            before = (self._ref_pending(), self.ref.status)  # the reference, as yet unmoved
            ran.append(("cancel", (self._rule_cancel("race", "user"), before)))

        async def send() -> None:
            mid = str(self.agent.send(content))
            ran.append(("send", (mid, self.agent.status)))

        async def both() -> None:
            async with trio.open_nursery() as nursery:
                for op in (cancel, send) if cancel_spawned_first else (send, cancel):
                    nursery.start_soon(op)

        self.host.call(both)
        self._raise_observed()
        self.host.settle()
        cancelled_first = after_cancel = idle_cancel_first = after_idle_cancel = False
        sent = ""
        for op, result in ran:
            if op == "send":
                mid, status = cast("tuple[str, AgentStatus]", result)
                self.contents[mid] = content
                was = self.ref.status
                self.ref.send_nowait(mid)
                if was == "idle" and status is not AgentStatus.RUNNING:
                    STATUS_AFTER_SEND.fail(
                        f"send() of {mid} from IDLE returned with the agent {status.value}"
                    )
                sent, after_cancel, after_idle_cancel = mid, cancelled_first, idle_cancel_first
            else:
                effective, _ = cast("tuple[bool, object]", result)
                # What the agent was before the cancel, as the reference has it now.
                before = (self._ref_pending(), self.ref.status)
                expected = self.ref.cancel_now("race", "user")
                self._check_cancel(effective, expected, before, "cancel() racing a send()")
                cancelled_first, idle_cancel_first = expected, not expected
        self.ref.settle()
        if after_cancel:
            self._check_sent_runs(sent)
        if after_idle_cancel:
            self.host.settle()
            self._check_not_stranded(sent)

    @precondition(lambda self: self.has.listener_windows)
    @rule(event=st.sampled_from(["TurnStarted", "StepStarted", "StepEnded", "Idle"]))
    def arm(self, event: str) -> None:
        """A one-shot listener: cancel at the next TurnStarted/StepStarted/StepEnded (the
        pre-step, pre-model and continuation windows), or send at the next IDLE (the
        replacement-turn race)."""
        if event in self.ref.armed or self.ref.status == "closed":
            return
        self.ref.armed.add(event)
        kinds: dict[str, type] = {
            "TurnStarted": TurnStarted,
            "StepStarted": StepStarted,
            "StepEnded": StepEnded,
            "Idle": StatusChanged,
        }
        fired: list[bool] = []

        def listener(e: Event) -> None:
            if fired or not isinstance(e, kinds[event]) or is_neighbours(e):
                return
            if event == "Idle" and not (
                isinstance(e, StatusChanged) and e.status is AgentStatus.IDLE
            ):
                return
            fired.append(True)
            disconnect()
            if event == "Idle":
                content = self._content("follow-up")
                mid = str(self.agent.send(content))
                self.contents[mid] = content
                self.ref.idle_sends.append(mid)
            else:
                self.agent.cancel("armed", cause="user")

        disconnect = self.bus.connect(listener)
        self._witness()

    def _witness(self) -> None:
        """A listener connected after the one just armed, which records every event: an
        event the armed one causes while another is being delivered must reach it after
        that one, as it reaches the machine's first listener (A11: one order)."""
        seen: list[Event] = []
        self.witnesses.append((len(self.events), seen))
        self.bus.connect(lambda e: None if is_neighbours(e) else seen.append(e))

    @precondition(lambda self: self.has.raising_listeners)
    @rule(event=st.sampled_from(sorted(RAISING_AT)))
    def arm_raising(self, event: str) -> None:
        """A one-shot listener that raises at the next event of a kind: the agent must
        contain it, and nothing else may change (A11)."""
        fired: list[bool] = []

        def listener(e: Event) -> None:
            if fired or not isinstance(e, RAISING_AT[event]) or is_neighbours(e):
                return
            fired.append(True)
            disconnect()
            raise RuntimeError(f"{LISTENER_FAILURE} at {event}")

        disconnect = self.bus.connect(listener)


def _exploring(machine: AgentWindows) -> bool:
    return type(machine).explore_schedules
