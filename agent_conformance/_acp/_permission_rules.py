"""How the ACP machine's client answers `session/request_permission` (rules P8 and P9 of
docs/contract.md's ACP section), and what each answer predicts. Pure: no trio.

The machine picks an answer per prompt: allow once, reject, an error, an option that was not
offered, an answer that is not a `RequestPermissionResponse` (an allow option's selection
with its outcome flattened, `{"outcome": "selected", "optionId": ...}`), the outcome
`cancelled`, or none yet (held: the machine sends `session/cancel` and
answers only after the prompt has). The prompt's one shell command writes a witness file in
the example's work directory, so "the call ran" is observable for any agent whatever its
tool updates say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

__all__ = [
    "ANSWERS",
    "ERROR",
    "GOING_ON",
    "LATE_ANSWERS",
    "NOT_OFFERED",
    "LateAnswer",
    "PermissionAnswer",
    "may_run",
    "reply",
]

PermissionAnswer = Literal[
    "allow", "reject", "error", "not-offered", "malformed", "cancelled", "held"
]
LateAnswer = Literal["allow", "cancelled"]

ANSWERS: Final[tuple[PermissionAnswer, ...]] = (
    "allow", "reject", "error", "not-offered", "malformed", "cancelled", "held",
)  # fmt: skip
GOING_ON: Final[tuple[PermissionAnswer, ...]] = (
    "allow", "reject", "error", "not-offered", "malformed",
)  # fmt: skip
"""The answers after which the turn goes on (the model is told, and calls again)."""
LATE_ANSWERS: Final[tuple[LateAnswer, ...]] = ("allow", "cancelled")
NOT_OFFERED: Final = "acp-check-not-offered"
ERROR: Final = (-32000, "the user closed the permission dialog")


def _pick(options: Sequence[Mapping[str, Any]], *kinds: str) -> str | None:
    by_kind = {str(o.get("kind")): str(o.get("optionId")) for o in options}
    for kind in kinds:
        if kind in by_kind:
            return by_kind[kind]
    return None


def reply(
    answer: PermissionAnswer | LateAnswer, options: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | tuple[int, str] | None:
    """The client's answer to a permission request offering `options`: a result, the
    (code, message) of an error, or None to hold it. An agent that offers no reject option
    is answered the error instead; one that offers no allow option, its first option."""
    if answer == "held":
        return None
    if answer == "cancelled":
        return {"outcome": {"outcome": "cancelled"}}
    if answer == "error":
        return ERROR
    if answer == "not-offered":
        offered = {str(o.get("optionId")) for o in options}
        unknown = NOT_OFFERED
        while unknown in offered:
            unknown += "-x"
        return {"outcome": {"outcome": "selected", "optionId": unknown}}
    if answer == "malformed":
        allowing = _pick(options, "allow_once", "allow_always")
        return {"outcome": "selected", "optionId": allowing or NOT_OFFERED}
    if answer == "reject":
        rejecting = _pick(options, "reject_once", "reject_always")
        if rejecting is None:
            return ERROR
        return {"outcome": {"outcome": "selected", "optionId": rejecting}}
    chosen = _pick(options, "allow_once", "allow_always")
    if chosen is None and options:
        chosen = str(options[0].get("optionId"))
    if chosen is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": chosen}}


def may_run(answer: PermissionAnswer) -> bool:
    """Whether the call asked about may run (P8: only once an allow option it offered was
    selected; P9: a held request's call never, whatever comes after the cancel)."""
    return answer == "allow"
