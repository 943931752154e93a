"""Asking the editor before a tool call runs: `session/request_permission`, and its answer as
a `Decision`. Pure; no trio import (the request itself is sent by the caller's function).

Fail closed: an answer that is an error, names an option that was not offered, or is not a
`RequestPermissionResponse` at all rejects the call, and the decision's note says why (the
model is told). `cancelled` cancels the turn, as the spec asks. A cancel of the turn while
the editor is asked propagates out of the request (the request is then abandoned, and a
late answer is ignored).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

from .._agent._approval import ApprovalRequest, Decision, DecisionOutcome
from .._frozen import thaw
from ._jsonrpc import ClientRequestError
from ._mapping import call_preview, json_safe, tool_call_title, tool_kind

__all__ = ["BY", "OPTIONS", "AcpApprover", "decision_for", "permission_params"]

BY: Final = "acp-client"  # who decided, as `tool/approval` records name the editor

OPTIONS: Final[tuple[dict[str, str], ...]] = (
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
)
"""The options every permission request offers: one per `PermissionOptionKind`."""

_OUTCOME_OF: Final[dict[str, DecisionOutcome]] = {
    option["optionId"]: cast("DecisionOutcome", option["kind"]) for option in OPTIONS
}

ClientRequest = Callable[[str, Mapping[str, Any]], Awaitable[Any]]


def permission_params(
    session_id: str, request: ApprovalRequest, cwd: str | None = None
) -> dict[str, Any]:
    """The `RequestPermissionRequest` for one call: the tool call as its `tool_call` update
    showed it (id, title, kind, raw input, and for a file tool its file and the change it
    asks for, a relative path taken from `cwd`), still `pending`, and the four options."""
    # A deep plain copy (records hold read-only mappings and tuples), strict JSON or its repr,
    # as in the `tool_call` update the client already has.
    arguments = thaw(request.arguments)
    return {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": request.call_id,
            "title": tool_call_title(request.tool, arguments),
            "kind": tool_kind(request.tool),
            "status": "pending",
            "rawInput": json_safe(arguments),
            **call_preview(request.tool, arguments, cwd),
        },
        "options": [dict(option) for option in OPTIONS],
    }


def decision_for(result: object) -> Decision:
    """The decision a `RequestPermissionResponse` result means; anything else rejects."""
    outcome: object = None
    shown: object = result
    if isinstance(result, dict):
        outcome = cast("dict[str, Any]", result).get("outcome")
    if not isinstance(outcome, dict):
        return _refused(f"its answer has no outcome object: {_short(shown)}")
    fields = cast("dict[str, Any]", outcome)
    kind = fields.get("outcome")
    if kind == "cancelled":
        return Decision("cancel", by=BY, note="the client cancelled the permission request")
    if kind != "selected":
        return _refused(f"its answer's outcome is {_short(kind)}, not selected or cancelled")
    option = fields.get("optionId")
    chosen = _OUTCOME_OF.get(option) if isinstance(option, str) else None
    if chosen is None:
        offered = ", ".join(_OUTCOME_OF)
        return _refused(f"it chose option {_short(option)}, which was not offered ({offered})")
    return Decision(chosen, by=BY)


def _refused(why: str) -> Decision:
    return Decision("reject_once", by=BY, note=f"no valid answer from the client: {why}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class AcpApprover:
    """The approver of one ACP session, whose working directory is `cwd`: asks the client
    with `session/request_permission` through `request` (the server's `client_request`)."""

    def __init__(self, session_id: str, request: ClientRequest, cwd: str | None = None) -> None:
        self._session_id = session_id
        self._request = request
        self._cwd = cwd

    async def __call__(self, request: ApprovalRequest) -> Decision:
        """Ask the client about `request`. Always a checkpoint (the client request's)."""
        try:
            result = await self._request(
                "session/request_permission",
                permission_params(self._session_id, request, self._cwd),
            )
        except ClientRequestError as exc:
            if not exc.answered:
                # Nobody is left to ask: the turn ends, as the connection's end ends it.
                return Decision("cancel", by="acp-server", note=exc.message)
            return _refused(f"it answered error {exc.code}: {exc.message}")
        return decision_for(result)
