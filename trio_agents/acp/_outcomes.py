"""What became of each prompt a client is owed an outcome for: answered (its turn's stop
reason), dropped with a reason, or still queued (design D531). Pure; no trio import.

The server feeds `Outcomes` every record of a session as it is appended, and tells it when
a cancel or a close has just changed the agent's queue; it hands back the outcomes that are
now known. A prompt's turn is the turn whose `user/message` (or, for steering a turn took,
`steering/message`) carries its id; it is answered with that turn's stop reason when the
turn ends. A queued prompt a cancel or a close drops is told by its `prompt/dropped` record;
steering has no record until a step takes it, so steering that left the agent's queue
without being taken (a cancel clears it) is found by asking the agent what is still
pending, right after the cancel and at each turn's end.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from .._store._records import (
    ASSISTANT_MESSAGE,
    PROMPT_DROPPED,
    PROMPT_QUEUED,
    STEERING_MESSAGE,
    TOOL_APPROVAL,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    TurnEndReason,
    decode_turn_end,
)

__all__ = ["OUTCOME_METHOD", "Outcome", "Outcomes", "replay_outcomes"]

OUTCOME_METHOD = "_trio-agents/prompt_outcome"
"""The notification that tells a client the outcome of a prompt it gave by `session/inject`,
`_trio-agents/steer` or `_trio-agents/queue` (an extension method: the v1 protocol has no
message for it; the v2 draft's `state_update` is where it is going)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """`state` is `answered` (with `stop_reason`), `failed` (with `reason`: the turn's
    error), `dropped` (with `reason`: `cancelled` or `closed`) or `queued` (a replay's
    prompt that neither ran nor was dropped: it waits, parked, in the loaded session)."""

    message_id: str
    state: str
    stop_reason: str | None = None
    reason: str | None = None

    def params(self, session_id: str) -> dict[str, Any]:
        """The notification's params."""
        out: dict[str, Any] = {
            "sessionId": session_id,
            "messageId": self.message_id,
            "outcome": self.state,
        }
        if self.stop_reason is not None:
            out["stopReason"] = self.stop_reason
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class Outcomes:
    """The watched prompts of one session whose outcome is not known yet."""

    __slots__ = ("_approval_cancelled", "_finish", "_taken", "_turn", "_watched")

    def __init__(self) -> None:
        self._watched: dict[str, None] = {}  # insertion-ordered: outcomes come in that order
        self._taken: list[str] = []  # watched prompts the running turn took
        self._turn: int | None = None
        self._finish: str | None = None
        self._approval_cancelled = False

    def watch(self, message_id: str) -> None:
        self._watched[message_id] = None

    def forget(self, message_id: str) -> None:
        """Stop watching `message_id`: a `session/prompt` once answered, whose answer was
        its outcome (nothing more is told of it)."""
        self._watched.pop(message_id, None)
        if message_id in self._taken:
            self._taken.remove(message_id)

    @property
    def watched(self) -> Collection[str]:
        return self._watched.keys()

    def on_record(self, record: Record, pending: Collection[str] | None) -> list[Outcome]:
        """The outcomes `record` settles. `pending`: the ids still queued in the agent (its
        `pending`), or None in a replay, where what left no record cannot be told."""
        kind = record.type
        if kind == TURN_START:
            self._turn = int(record.data["turn"])
            self._taken = []
            self._finish = None
            self._approval_cancelled = False
        elif kind in (USER_MESSAGE, STEERING_MESSAGE):
            mid = record.data.get("id")
            if isinstance(mid, str) and mid in self._watched and mid not in self._taken:
                self._taken.append(mid)
        elif kind == ASSISTANT_MESSAGE:
            finish = record.data.get("finish")
            self._finish = finish if isinstance(finish, str) else None
        elif kind == TOOL_APPROVAL and record.data.get("decision") == "cancel":
            self._approval_cancelled = True
        elif kind == PROMPT_DROPPED:
            reason = str(record.data.get("reason") or "dropped")
            ids: Iterable[Any] = record.data.get("ids") or ()
            dropped = [i for i in ids if isinstance(i, str) and i in self._watched]
            return [self._settle(Outcome(i, "dropped", reason=reason)) for i in dropped]
        elif kind == TURN_END:
            return self._turn_over(record.data.get("reason"), pending)
        return []

    def left_queue(self, pending: Collection[str], reason: str) -> list[Outcome]:
        """After a cancel or a close: the watched prompts no longer pending and not taken by
        the running turn were dropped (steering has no `prompt/dropped` record)."""
        gone = [m for m in self._watched if m not in pending and m not in self._taken]
        return [self._settle(Outcome(m, "dropped", reason=reason)) for m in gone]

    def closed(self) -> list[Outcome]:
        """After the session closed: the prompts its turn had taken end `cancelled` (their
        turn ended with the close), the rest were dropped `closed`."""
        out = [self._settle(Outcome(m, "answered", stop_reason="cancelled")) for m in self._taken]
        self._taken = []
        return out + [
            self._settle(Outcome(m, "dropped", reason="closed")) for m in list(self._watched)
        ]

    def _turn_over(self, end: object, pending: Collection[str] | None) -> list[Outcome]:
        state, stop, why = _ending(end, self._finish, self._approval_cancelled)
        out = [
            self._settle(Outcome(m, state, stop_reason=stop, reason=why))
            for m in self._taken
            if m in self._watched
        ]
        self._taken = []
        self._turn = None
        if pending is not None:
            # Steering a cancel cleared, or a close: it left the queue untaken.
            decoded = _decoded(end)
            closed = decoded is not None and decoded["kind"] == "closed"
            out += self.left_queue(pending, "closed" if closed else "cancelled")
        return out

    def _settle(self, outcome: Outcome) -> Outcome:
        del self._watched[outcome.message_id]
        return outcome


def _ending(
    end: object, finish: str | None, approval_cancelled: bool
) -> tuple[str, str, str | None]:
    """(state, stop reason, reason) of a prompt whose turn ended with `end`: as
    `_mapping.stop_reason` answers a `session/prompt`, and `failed` for a turn that failed."""
    reason = _decoded(end)
    if reason is None:
        return "answered", "end_turn", None
    if approval_cancelled:
        return "answered", "cancelled", None
    match reason["kind"]:
        case "error":
            return "failed", "end_turn", reason["message"]
        case "max_steps":
            return "answered", "max_turn_requests", None
        case "completed":
            return "answered", "max_tokens" if finish == "length" else "end_turn", None
        case _:  # aborted, closed, interrupted: the turn was stopped
            return "answered", "cancelled", None


def _decoded(end: object) -> TurnEndReason | None:
    """A `turn/end` record's reason, typed (None: not one this version knows)."""
    if not isinstance(end, Mapping):
        return None
    return decode_turn_end(cast("Mapping[str, Any]", end))


def replay_outcomes(records: Iterable[Record]) -> list[Outcome]:
    """The outcome of every prompt of `records` that was queued or steered (recorded
    `prompt/queued` or `steering/message`), in the order they came, for a `session/load`:
    what the client was told live, and `queued` for those that still wait."""
    outcomes = Outcomes()
    out: list[Outcome] = []
    for record in records:
        mid = record.data.get("id")
        if record.type in (PROMPT_QUEUED, STEERING_MESSAGE) and isinstance(mid, str):
            outcomes.watch(mid)
        out += outcomes.on_record(record, None)
    out += [Outcome(m, "queued") for m in outcomes.watched]
    return out
