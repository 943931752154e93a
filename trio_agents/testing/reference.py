"""A small pure model of an agent's inbox and turns, the oracle of the agent state machine.

It describes the agent only at rest: after every operation the real agent is driven until
every task is blocked, at which point it is IDLE, or RUNNING and held at the model's gate,
or RUNNING and held in a tool. In that world the API rules (A1-A8) determine the state
exactly, which this class computes without any concurrency. No trio, no Hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["AgentReference", "StepSummary", "TurnSummary"]

Phase = Literal["model", "tool"]
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
    end: str | None = None  # the turn/end reason kind, None while the turn runs


class AgentReference:
    """Expected status, queues, turns and model-call count of an agent at rest."""

    def __init__(self, *, max_steps: int | None = None) -> None:
        self.max_steps = max_steps
        self.status: Literal["idle", "running", "closed"] = "idle"
        self.queue: list[str] = []
        self.step_input: list[tuple[str, Literal["steering", "context"]]] = []
        self.turns: list[TurnSummary] = []
        self.phase: Phase | None = None
        self.requests = 0
        self.fate: dict[str, Fate] = {}

    @property
    def turn(self) -> TurnSummary | None:
        if self.turns and self.turns[-1].end is None:
            return self.turns[-1]
        return None

    # -- operations, each leaving the model at rest -------------------------------------

    def send(self, mid: str) -> None:
        self._accept(mid)
        self.queue.append(mid)
        if self.status == "idle":
            self.status = "running"
        self._advance()

    def steer(self, mid: str) -> None:
        if self.turn is None:
            self.send(mid)
            return
        self._accept(mid)
        self.step_input.append((mid, "steering"))

    def inject(self, mid: str) -> None:
        self._accept(mid)
        self.step_input.append((mid, "context"))

    def cancel(self) -> bool:
        """Returns whether the cancel was effective."""
        turn = self.turn
        steering = [m for m, kind in self.step_input if kind == "steering"]
        if turn is None and not self.queue and not steering:
            return False
        for mid in [*steering, *self.queue]:
            self.fate[mid] = "discarded"
        self.queue.clear()
        self.step_input = [(m, k) for m, k in self.step_input if k == "context"]
        if turn is not None:
            self._end_turn("aborted")
        self._advance()
        return True

    def release_model(self, reply: Literal["text", "tool"]) -> None:
        assert self.phase == "model", "the model is not held"
        if reply == "tool":
            self.phase = "tool"
            return
        if any(kind == "steering" for _, kind in self.step_input):
            self._next_step_or_max()
        else:
            self._end_turn("completed")
        self._advance()

    def finish_tool(self) -> None:
        assert self.phase == "tool", "no tool is held"
        self._next_step_or_max()
        self._advance()

    def close(self) -> None:
        if self.turn is not None:
            self._end_turn("closed")
        for mid in [*self.queue, *(m for m, k in self.step_input if k == "steering")]:
            self.fate[mid] = "discarded"
        self.queue.clear()
        self.status = "closed"

    # -- internals -----------------------------------------------------------------------

    def _accept(self, mid: str) -> None:
        assert mid not in self.fate, f"message id {mid!r} was returned twice"
        self.fate[mid] = "pending"

    def _advance(self) -> None:
        """Run the driver until it blocks: start the next turn and its first step, or idle."""
        if self.turn is not None and self.phase is None:
            self._start_step()
        if self.turn is not None:
            return
        if self.queue:
            prompt = self.queue.pop(0)
            self.fate[prompt] = "delivered"
            self.turns.append(TurnSummary(len(self.turns) + 1, prompt))
            self._start_step()
        else:
            self.status = "idle"

    def _next_step_or_max(self) -> None:
        turn = self.turn
        assert turn is not None
        if self.max_steps is not None and len(turn.steps) >= self.max_steps:
            self._end_turn("max_steps")
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
        self.requests += 1
        self.phase = "model"

    def _end_turn(self, kind: str) -> None:
        turn = self.turn
        assert turn is not None
        turn.end = kind
        self.phase = None
        if kind != "aborted":
            # Unconsumed steering becomes the next prompts, ahead of the queue (rule A3).
            steering = [m for m, k in self.step_input if k == "steering"]
            self.step_input = [(m, k) for m, k in self.step_input if k == "context"]
            self.queue[:0] = steering
