"""Asking before acting: which tool calls need a person's (or a program's) approval, what
the answer can be, and what the session remembers of the answers. Pure; no trio import.

The agent holds an `Approval` (a policy and an approver). Before a call runs, the policy
gives its verdict: `allow` (run it, nothing recorded), `reject` (never run it), or `ask`.
Asked, the approver answers with a `Decision`. A decision to allow or reject "always" is
remembered for the rest of the session, for that tool, when the policy keeps such answers;
a resumed session remembers them too, from its `tool/approval` records. Every call the
policy does not simply allow gets exactly one `tool/approval` record: who decided, what,
and when.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, get_args

from .._store._records import TOOL_APPROVAL, Record

__all__ = [
    "Approval",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "DecisionOutcome",
    "Policy",
    "Verdict",
    "approval_record",
    "rejection_text",
    "remembered_decisions",
]

Verdict = Literal["allow", "ask", "reject"]
"""A policy's verdict on one call: run it, ask the approver first, or never run it."""

DecisionOutcome = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancel"]
"""What an approver decided: allow (this call, or this tool for the rest of the session),
reject (likewise), or cancel the turn."""

_OUTCOMES: Final = frozenset(get_args(DecisionOutcome))


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One tool call waiting for a decision.

    agent_id: the calling agent's id (its session's id).
    call_id: the call's id, as in its `tool/call` record.
    turn: the turn's number.
    step: the step's number within the turn.
    tool: the tool's name.
    arguments: the model's arguments, read-only.
    """

    agent_id: str
    call_id: str
    turn: int
    step: int
    tool: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """An approver's answer.

    outcome: `allow_once`, `allow_always`, `reject_once`, `reject_always` or `cancel`.
    by: who decided, as history should show it: `"user"`, `"acp-client"`, a program's name.
    note: why, in words, if the approver knows (a rejection's note reaches the model).

    Raises ValueError for another outcome, or an empty `by`.
    """

    outcome: DecisionOutcome
    by: str = "approver"
    note: str | None = None

    def __post_init__(self) -> None:
        if self.outcome not in _OUTCOMES:
            known = ", ".join(sorted(_OUTCOMES))
            raise ValueError(f"a decision's outcome is one of {known}, got {self.outcome!r}")
        if not isinstance(self.by, str) or not self.by:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"a decision's `by` names who decided, got {self.by!r}")

    @property
    def allows(self) -> bool:
        """Whether the call may run."""
        return self.outcome in ("allow_once", "allow_always")


class Approver(Protocol):
    """Who is asked: a person through an editor or a terminal, or a program.

    Called inside the step's cancel scope: a cancel of the turn while it waits arrives as
    `trio.Cancelled` (let it propagate; whatever it would have answered is then ignored).
    An exception it raises rejects the call (fail closed), and the rejection's note names
    the exception. Must always checkpoint.
    """

    async def __call__(self, request: ApprovalRequest) -> Decision:
        """Decide on one call. Always a checkpoint."""
        ...


class Policy(Protocol):
    """Which calls need approval. Consulted synchronously before each call; may look at the
    tool, the arguments, or state of its own (a mode an editor switches). A policy may also
    have a method `rejection_note(request) -> str`: what the model is told, in words, when
    its verdict is `reject` (else "the policy does not allow it")."""

    def verdict(self, request: ApprovalRequest) -> Verdict:
        """`allow`, `ask` or `reject` for this call."""
        ...

    @property
    def remembers(self) -> bool:
        """Whether `allow_always` and `reject_always` decisions are kept for the session."""
        ...


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """The common policy: ask before the tools in `ask` (every tool: `"all"`), never run
    those in `reject`, run the rest. `remembers` keeps "always" answers for the session.

    Raises ValueError if a tool is both asked for and rejected.
    """

    ask: frozenset[str] | Literal["all"] = "all"
    reject: frozenset[str] = frozenset()
    remembers: bool = True

    def __post_init__(self) -> None:
        if self.ask != "all":
            object.__setattr__(self, "ask", frozenset(self.ask))
            both = self.reject & frozenset(self.ask)
            if both:
                raise ValueError(f"tools both asked for and rejected: {sorted(both)}")
        object.__setattr__(self, "reject", frozenset(self.reject))

    def verdict(self, request: ApprovalRequest) -> Verdict:
        """`reject` for a rejected tool, `ask` for one asked for, `allow` otherwise."""
        if request.tool in self.reject:
            return "reject"
        if self.ask == "all" or request.tool in self.ask:
            return "ask"
        return "allow"


@dataclass(slots=True)
class Approval:
    """What an agent is given to ask before acting: a `policy` and an `approver`.

    remembered: the session's "always" answers, tool by tool (`"allow"` or `"reject"`); an
        agent restores them from its session's records when it is made. One Approval serves
        one agent.
    """

    policy: Policy
    approver: Approver
    remembered: dict[str, Literal["allow", "reject"]] = field(
        default_factory=dict[str, Literal["allow", "reject"]]
    )

    def settled(self, request: ApprovalRequest, verdict: Verdict) -> Decision | None:
        """For a call the policy gave `verdict` (`ask` or `reject`), the decision made
        without asking, if any: the policy's rejection, or an answer remembered for this
        tool. None when the approver must be asked."""
        if verdict == "reject":
            return Decision("reject_once", by="policy", note=_rejection_note(self.policy, request))
        if verdict == "ask" and self.policy.remembers:
            kept = self.remembered.get(request.tool)
            if kept is not None:
                note = "an earlier answer for this tool in this session"
                outcome: DecisionOutcome = "allow_always" if kept == "allow" else "reject_always"
                return Decision(outcome, by="remembered", note=note)
        return None

    def remember(self, request: ApprovalRequest, decision: Decision) -> None:
        """Keep an "always" decision for the rest of the session, if the policy keeps them."""
        if not self.policy.remembers:
            return
        if decision.outcome == "allow_always":
            self.remembered[request.tool] = "allow"
        elif decision.outcome == "reject_always":
            self.remembered[request.tool] = "reject"

    def restore(self, records: Sequence[Record]) -> None:
        """Take up the "always" answers of a resumed session's history."""
        self.remembered.update(remembered_decisions(records))


def _rejection_note(policy: Policy, request: ApprovalRequest) -> str:
    # A policy may say why it rejects (a mode names itself): `rejection_note(request)`.
    explain: object = getattr(policy, "rejection_note", None)
    if callable(explain):
        return str(explain(request))
    return "the policy does not allow it"


def remembered_decisions(records: Sequence[Record]) -> dict[str, Literal["allow", "reject"]]:
    """The "always" answers in `records`, the latest per tool."""
    kept: dict[str, Literal["allow", "reject"]] = {}
    for record in records:
        if record.type != TOOL_APPROVAL or record.data.get("by") == "remembered":
            continue
        outcome = record.data.get("decision")
        if outcome == "allow_always":
            kept[str(record.data["tool"])] = "allow"
        elif outcome == "reject_always":
            kept[str(record.data["tool"])] = "reject"
    return kept


def approval_record(request: ApprovalRequest, decision: Decision) -> dict[str, Any]:
    """The data of a `tool/approval` record: the call, the decision, who made it and when
    (`at`: seconds since the epoch, UTC wall clock)."""
    data: dict[str, Any] = {
        "call_id": request.call_id,
        "tool": request.tool,
        "decision": decision.outcome,
        "by": decision.by,
        "at": round(time.time(), 3),
    }
    if decision.note is not None:
        data["note"] = decision.note
    return data


# How the model is told who rejected a call, for the `by`s the library itself writes.
_WHO: Final = {
    "user": "the user",
    "acp-client": "the user",
    "terminal": "the user",
    "policy": "the approval policy",
    "approver": "the approver",
    "remembered": "a standing decision of this session",
}


def rejection_text(request: ApprovalRequest, decision: Decision) -> str:
    """What the model is told when a call is rejected."""
    who = _WHO.get(decision.by, decision.by)
    text = f"{who} rejected the call to {request.tool!r}; it did not run"
    if decision.note:
        text += f" ({decision.note})"
    return text
