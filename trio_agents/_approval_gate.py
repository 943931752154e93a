"""The gate a tool call passes before it runs: the policy's verdict, a remembered answer, or
the approver, asked inside the step's cancel scope with the step's clock stopped."""

from __future__ import annotations

import trio

from ._approval import Approval, ApprovalRequest, Approver, Decision
from ._turn import Turn
from ._util import describe

__all__ = ["decide"]


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
