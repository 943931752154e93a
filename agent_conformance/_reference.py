"""A small pure model of an agent's inbox and turns, the oracle of the agent state machine.

It describes the agent only at rest: after every operation the real agent is driven until
every task is blocked, at which point it is IDLE, or RUNNING and held at the model's gate,
in a tool, or (an agent that asks before acting) waiting for its approver's decision. In
that world the API rules (A1-A8, A14-A18) determine the state exactly, which this class
computes without any concurrency. No trio, no Hypothesis.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "POLICY_KINDS",
    "POLICY_REJECTS",
    "AgentReference",
    "PolicyKind",
    "StepSummary",
    "TurnSummary",
]

Phase = Literal["model", "tool", "approval"]
PolicyKind = Literal["ask", "ask-forgetful", "reject", "raises", "unknown"]
POLICY_KINDS: tuple[PolicyKind, ...] = ("ask", "ask-forgetful", "reject", "raises", "unknown")
POLICY_REJECTS: frozenset[PolicyKind] = frozenset({"reject", "raises", "unknown"})
"""The policies that decide every call without asking: a rejection by the policy."""
Outcome = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancel"]
Fate = Literal["pending", "delivered", "discarded"]


@dataclass
class StepSummary:
    """Ids of the steering/context messages recorded just before this step started."""

    claimed: list[str] = field(default_factory=list[str])


@dataclass
class TurnSummary:
    number: int
    prompt: str
    steps: list[StepSummary] = field(default_factory=list[StepSummary])
    end: dict[str, str] | None = None  # the turn/end reason, None while the turn runs


class AgentReference:
    """Expected status, queues, turns and model-call count of an agent at rest.

    Each operation mirrors one on the real agent and leaves the reference at rest again.
    Its state, which a machine compares with the agent's:

    max_steps: the agent's `max_steps` option.
    step_timeout: the agent's `step_timeout` option.
    steering_at_step_limit: steering left when `max_steps` ends a turn is `requeue`d as the
        next prompt, or `answer`ed by one more step beyond the limit (D91).
    cancel_after_final_answer: a cancel after the model's final answer (a StepEnded
        listener's) ends the turn `aborted`, or the answer stands: `completed` (D92).
    asks: the agent has an Approval (A14-A18), whose policy is `policy`: `ask` before
        every call, remembering "always" answers; `ask-forgetful` (remembers=False);
        `reject` every call; or a policy that `raises` or answers an `unknown` verdict
        (the call is rejected without asking: fail closed).
    remembered: the session's "always" answer for the tool (`allow`, `reject`), or None.
    clock: trio time; it only moves in `time_passes`.
    step_started_at: the clock when the current step called the model, moved on by the
        time its call waited for a decision (A18).
    asked_at: the clock when the held call began to wait for its decision.
    status: `idle`, `running` or `closed`.
    queue: the ids of the queued prompts, in order.
    step_input: (id, kind) of the steering and context the next step will claim.
    turns: every turn so far, the last one open while it runs.
    phase: where the running turn is held: `model`, `tool`, `approval`, or None.
    requests: how many model calls were made.
    fate: each message id's fate: `pending`, `delivered` or `discarded`.
    kind: each message id's kind as accepted: `prompt`, `steering` or `context`.
    status_trace: every status change, as StatusChanged reports it.
    cancels: (cause, reason) of each effective cancel.
    waiting: how many wait_idle calls have not returned yet.
    armed: the one-shot listeners armed: cancel at the next `TurnStarted`, `StepStarted`
        or `StepEnded`, or send at the next idle (`Idle`).
    idle_sends: the ids the sends of armed `Idle` listeners got, in order.
    """

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        step_timeout: float | None = None,
        steering_at_step_limit: Literal["requeue", "answer"] = "requeue",
        cancel_after_final_answer: Literal["aborted", "completed"] = "aborted",
        asks: bool = False,
        policy: PolicyKind = "ask",
    ) -> None:
        self.max_steps = max_steps
        self.step_timeout = step_timeout
        self.steering_at_step_limit = steering_at_step_limit
        self.cancel_after_final_answer = cancel_after_final_answer
        self.asks = asks
        self.policy: PolicyKind = policy
        self.remembered: Literal["allow", "reject"] | None = None
        self.clock = 0.0  # trio time; it only moves in `time_passes`
        self.step_started_at = 0.0
        self.asked_at = 0.0
        self.status: Literal["idle", "running", "closed"] = "idle"
        self.queue: list[str] = []
        self.step_input: list[tuple[str, Literal["steering", "context"]]] = []
        self.turns: list[TurnSummary] = []
        self.phase: Phase | None = None
        self.requests = 0
        self.fate: dict[str, Fate] = {}
        self.kind: dict[str, Literal["prompt", "steering", "context"]] = {}
        self.status_trace: list[str] = []  # every status change, as StatusChanged reports it
        self.cancels: list[tuple[str, str]] = []  # (cause, reason) of each effective cancel
        self.waiting = 0  # wait_idle calls that have not returned yet
        # One-shot listeners: cancel at the next TurnStarted / StepStarted / StepEnded, or
        # send at the next StatusChanged(IDLE). `idle_sends` holds the ids those sends got.
        self.armed: set[str] = set()
        self.idle_sends: deque[str] = deque()
        self._unwinding_step = False
        self._final_answer = False  # a StepEnded listener runs after the final answer

    @property
    def turn(self) -> TurnSummary | None:
        """The running turn, or None."""
        if self.turns and self.turns[-1].end is None:
            return self.turns[-1]
        return None

    # -- operations, each leaving the model at rest -------------------------------------

    def send(self, mid: str) -> None:
        """`Agent.send` returned `mid`: queue it, and let the driver run."""
        self._accept(mid, "prompt")
        self.queue.append(mid)
        if self.status == "idle":
            self._set_status("running")
        self._advance()

    def send_nowait(self, mid: str) -> None:
        """`send` without letting the driver run afterwards (it runs in a later batch)."""
        self._accept(mid, "prompt")
        self.queue.append(mid)
        if self.status == "idle":
            self._set_status("running")

    def settle(self) -> None:
        """Let the driver run until it blocks, after operations made with `*_nowait`."""
        self._advance()

    def wait_idle(self) -> None:
        """A wait_idle call starts; it returns as soon as the agent is idle (or, closed, at
        once: the loop has exited whenever the agent is at rest)."""
        if self.status == "running":
            self.waiting += 1

    def steer(self, mid: str) -> None:
        """`Agent.steer` returned `mid`: steering for the running turn, or a prompt."""
        if self.turn is None:
            self.send(mid)
            return
        self._accept(mid, "steering")
        self.step_input.append((mid, "steering"))

    def inject(self, mid: str) -> None:
        """`Agent.inject` returned `mid`: context for the next step."""
        self._accept(mid, "context")
        self.step_input.append((mid, "context"))

    def cancel(self, reason: str = "cancelled", cause: str = "user") -> bool:
        """Returns whether the cancel was effective."""
        effective = self.cancel_now(reason, cause)
        if effective:
            self._advance()
        return effective

    def cancel_now(self, reason: str, cause: str) -> bool:
        """The cancel itself, without letting the driver run on afterwards."""
        turn = self.turn
        steering = [m for m, kind in self.step_input if kind == "steering"]
        if turn is None and not self.queue and not steering:
            return False
        self.cancels.append((cause, reason))
        for mid in [*steering, *self.queue]:
            self.fate[mid] = "discarded"
        self.queue.clear()
        self.step_input = [(m, k) for m, k in self.step_input if k == "context"]
        if turn is not None:
            # The open step ends when the driver unwinds it, in a later batch: a StepEnded
            # listener fires then (in `_advance`), after anything else this batch did.
            self._unwinding_step = self.phase is not None
            if self._final_answer and self.cancel_after_final_answer == "completed":
                self._end_turn({"kind": "completed"})
            else:
                self._end_turn({"kind": "aborted", "reason": reason, "cause": cause})
        return True

    def release_model(self, reply: Literal["text", "tool"]) -> None:
        """The held model call answers with text (the step ends, and the turn too unless
        steering waits) or with a tool call (the step holds in the tool; an agent that asks
        holds for the decision instead, unless the session remembers one). Asserts that the
        model is held."""
        assert self.phase == "model", "the model is not held"
        if reply == "tool":
            self.phase = "tool"
            if self.asks and (self.remembered == "reject" or self.policy in POLICY_REJECTS):
                self.finish_tool()  # rejected without asking: the step ends (A17)
            elif self.asks and self.remembered is None:
                self.phase = "approval"
                self.asked_at = self.clock
            return
        self.phase = None
        steering = any(kind == "steering" for _, kind in self.step_input)
        if self._step_ended(final=not steering):
            pass  # a StepEnded listener cancelled the turn
        elif steering:
            self._next_step_or_max()
        else:
            self._end_turn({"kind": "completed"})
        self._advance()

    def finish_tool(self) -> None:
        """The held tool call returns: the next step starts, or `max_steps` ends the turn.
        Asserts that a tool is held."""
        assert self.phase == "tool", "no tool is held"
        self.phase = None
        if not self._step_ended():
            self._next_step_or_max()
        self._advance()

    def decide(self, outcome: Outcome) -> None:
        """The approver answers the held call: allowed, it runs (held in the tool); rejected,
        the step ends as if the tool had returned; `cancel` cancels the turn as `cancel()`
        does (A16). An "always" answer is remembered for the session (A17). The step's clock
        runs on from where the wait stopped it (A18). Asserts that a decision is awaited."""
        assert self.phase == "approval", "no call waits for a decision"
        if outcome == "cancel":
            self.cancel("approval cancelled", "user")
            return
        self.step_started_at += self.clock - self.asked_at
        if outcome.endswith("_always") and self.policy != "ask-forgetful":
            self.remembered = "allow" if outcome == "allow_always" else "reject"
        self.phase = "tool"
        if outcome.startswith("reject"):
            self.finish_tool()

    def time_passes(self, seconds: float) -> None:
        """Trio time jumps forward by `seconds`: a held step whose `step_timeout` expired in
        that interval is aborted when the jump lands (at most one: the next step starts
        then, at the end of the interval, so its deadline lies beyond it). A call waiting
        for its decision stops the step's clock (A18)."""
        end = self.clock + seconds
        self.clock = end
        timeout = self.step_timeout
        timed = self.phase in ("model", "tool")
        if timeout is not None and timed and self.step_started_at + timeout <= end:
            self.phase = None
            if not self._step_ended():
                self._end_turn({"kind": "aborted", "reason": "step-timeout", "cause": "timeout"})
            self._advance()

    def close(self) -> None:
        """The agent is closed: its turn ends `closed` and queued work is discarded."""
        self.armed.clear()
        if self.turn is not None:
            self._end_turn({"kind": "closed"})
        for mid in [*self.queue, *(m for m, k in self.step_input if k == "steering")]:
            self.fate[mid] = "discarded"
        self.queue.clear()
        self._set_status("closed")
        self.waiting = 0

    # -- internals -----------------------------------------------------------------------

    def _accept(self, mid: str, kind: Literal["prompt", "steering", "context"]) -> None:
        assert mid not in self.fate, f"message id {mid!r} was returned twice"
        self.fate[mid] = "pending"
        self.kind[mid] = kind

    def _advance(self) -> None:
        """Run the driver until it blocks: start the next turn and its first step, or idle."""
        if self._unwinding_step:
            self._unwinding_step = False
            self._step_ended()
        while True:
            if self._in_turn():
                if self.phase is None:
                    self._start_step()
                if self._in_turn():
                    return
                continue  # a listener cancelled the turn as its step started
            if self.queue:
                prompt = self.queue.pop(0)
                self.fate[prompt] = "delivered"
                self.turns.append(TurnSummary(len(self.turns) + 1, prompt))
                if "TurnStarted" in self.armed:
                    self.armed.discard("TurnStarted")
                    self._listener_cancel()
                continue
            self._set_status("idle")
            if "Idle" in self.armed:
                # The listener sends inside the settle: waiters see the replacement turn.
                self.armed.discard("Idle")
                self.send(self.idle_sends.popleft())
                return
            self.waiting = 0
            return

    def _in_turn(self) -> bool:
        return self.turn is not None

    def _set_status(self, status: Literal["idle", "running", "closed"]) -> None:
        if status != self.status:
            self.status = status
            self.status_trace.append(status)

    def _next_step_or_max(self) -> None:
        turn = self.turn
        assert turn is not None
        limit = self.max_steps
        if limit is not None and len(turn.steps) >= limit:
            # D91: steering waiting at the limit may be answered by one more step, once.
            steering = any(kind == "steering" for _, kind in self.step_input)
            if self.steering_at_step_limit == "answer" and steering and len(turn.steps) == limit:
                self.phase = None
                return
            self._end_turn({"kind": "max_steps"})
        else:
            self.phase = None

    def _start_step(self) -> None:
        turn = self.turn
        assert turn is not None
        claimed = [mid for mid, _ in self.step_input]
        for mid in claimed:
            self.fate[mid] = "delivered"
        self.step_input.clear()
        turn.steps.append(StepSummary(claimed))
        if "StepStarted" in self.armed:
            self.armed.discard("StepStarted")
            self._listener_cancel()  # before the model call: none is made
            self._step_ended()
            return
        self.requests += 1
        self.phase = "model"
        self.step_started_at = self.clock

    def _step_ended(self, *, final: bool = False) -> bool:
        """A step ended (`final`: with the turn's final answer): fire an armed StepEnded
        listener. True if it cancelled the turn."""
        if "StepEnded" not in self.armed:
            return False
        self.armed.discard("StepEnded")
        self._final_answer = final
        try:
            return self._listener_cancel()
        finally:
            self._final_answer = False

    def _listener_cancel(self) -> bool:
        return self.cancel_now("armed", "user")

    def _end_turn(self, reason: dict[str, str]) -> None:
        turn = self.turn
        assert turn is not None
        turn.end = reason
        self.phase = None
        if reason.get("cause") not in ("user", "parent"):
            # Unconsumed steering becomes the next prompts, ahead of the queue (rule A3);
            # only a cancel discards it.
            steering = [m for m, k in self.step_input if k == "steering"]
            self.step_input = [(m, k) for m, k in self.step_input if k == "context"]
            self.queue[:0] = steering
