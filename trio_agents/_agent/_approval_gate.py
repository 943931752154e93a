"""The gate a tool call passes before it runs: the policy's verdict, a remembered answer, or
the approver, asked inside the step's cancel scope with the step's clock stopped; and what
the agent records and does with the decision (`admit`)."""

from __future__ import annotations

from typing import Protocol

import trio

from .._store._records import TOOL_APPROVAL, TOOL_RESULT
from .._store._session import Session
from .._util import describe
from ._approval import (
    Approval,
    ApprovalRequest,
    Approver,
    Decision,
    approval_record,
    rejection_text,
)
from ._turn import CancelCause, Turn, commit

__all__ = ["Cancel", "Gate", "admit", "decide"]


class Cancel(Protocol):
    """The agent's `cancel`, which a `cancel` decision calls."""

    def __call__(self, reason: str, *, cause: CancelCause) -> bool: ...


class Gate(Protocol):
    """The shape of `admit`: what a step passes each tool call through when its agent has
    an approval."""

    async def __call__(
        self,
        approval: Approval,
        request: ApprovalRequest,
        turn: Turn,
        *,
        session: Session,
        cancel: Cancel,
    ) -> bool: ...


async def admit(
    approval: Approval,
    request: ApprovalRequest,
    turn: Turn,
    *,
    session: Session,
    cancel: Cancel,
) -> bool:
    """Pass the call `request` asks about through the gate: False once it has its rejection
    result. Records the decision (`tool/approval`) in `session` and commits it before the
    call may run (rule L7); a `cancel` decision cancels the turn (`cancel`, the agent's own,
    with cause `user`) and raises Cancelled. A checkpoint only when the approver is asked or
    the store has the decision to commit."""
    decision = await decide(approval, request, turn)
    if decision is None:
        return True
    append = session.append
    append(TOOL_APPROVAL, approval_record(request, decision))
    if decision.outcome == "cancel":
        cancel("approval cancelled", cause="user")
        await trio.lowlevel.checkpoint()  # raises Cancelled: the call is interrupted
    if not decision.allows:
        append(
            TOOL_RESULT,
            {
                "call_id": request.call_id,
                "content": rejection_text(request, decision),
                "is_error": True,
                "rejected": True,
            },
        )
        return False
    # Write-ahead (rule L7) for the decision too: what allowed a side effect is durable
    # before the side effect starts.
    await commit(session, f"the approval of tool call {request.call_id!r}")
    return True


async def decide(approval: Approval, request: ApprovalRequest, turn: Turn) -> Decision | None:
    """The decision on one call, or None when the policy lets it run without one (then
    nothing is recorded). Asks the approver only when the policy says `ask` and the session
    remembers no answer for the tool. A policy or approver that fails rejects the call (fail
    closed). A cancel while asking propagates as `trio.Cancelled`. A checkpoint only when
    the approver is asked."""
    try:
        verdict = approval.policy.verdict(request)
    except Exception as exc:
        return Decision("reject_once", by="policy", note=f"the policy failed: {describe(exc)}")
    if verdict == "allow":
        return None
    if verdict not in ("ask", "reject"):
        return Decision("reject_once", by="policy", note=f"the policy answered {verdict!r}")
    decision = approval.settled(request, verdict)
    if decision is None:
        decision = await _ask(approval.approver, request, turn)
        approval.remember(request, decision)
    return decision


async def _ask(approver: Approver, request: ApprovalRequest, turn: Turn) -> Decision:
    # Waiting for a person is not the step's work: its step_timeout does not count the wait
    # (design D180).
    turn.stop_step_clock()
    try:
        try:
            answer: object = await approver(request)
        except Exception as exc:
            return Decision("reject_once", by="approver", note=f"it failed: {describe(exc)}")
    finally:
        turn.restart_step_clock()
    if not isinstance(answer, Decision):  # pyright: ignore[reportUnnecessaryIsInstance]
        name = type(answer).__name__
        return Decision("reject_once", by="approver", note=f"it answered a {name}, not a Decision")
    # A cancel that reached the turn while the approver answered wins over the answer.
    await trio.lowlevel.checkpoint_if_cancelled()
    return answer
