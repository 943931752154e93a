"""What the durable machine checks of a resumed session (rule L6): the repair of an open turn
(an `interrupted` result for each dangling call, then `turn/end {interrupted}`, first and
durably), nothing appended to one closed cleanly, and a valid history. Pure functions of the
records; the machine calls them with what it saw and what the file holds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from trio_agents import Record

from ._durable_properties import (
    PARKED_RESTORED,
    REMEMBERED_ACROSS_RESUME,
    RESUME_AFTER_CLOSE_ADDS_NOTHING,
    RESUME_ANSWERS_DANGLING_CALLS,
    RESUME_ENDS_OPEN_TURN,
    RESUME_REPAIR_DURABLE,
    RESUME_REPAIR_FIRST,
    RESUMED_HISTORY_VALID,
    OpenTurn,
    show,
    shown,
)
from ._history import history_problems
from ._vocabulary import (
    PROMPT_DROPPED,
    PROMPT_QUEUED,
    PROMPT_RECORD_TYPES,
    STEP_START,
    TOOL_APPROVAL,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = [
    "Restored",
    "check_parked",
    "check_remembered",
    "check_repair_durable",
    "check_resumed",
    "committed_points",
    "highest_message_id",
    "parked_of",
    "suffixed",
]


@dataclass
class Restored:
    """What a resumed agent showed before anything else ran: `parked`, the ids `pending`,
    its status; with a cancel at once, what `cancel` returned and the ids `left` after."""

    parked: bool
    pending: list[str]
    status: str
    cancelled: bool | None = None
    left: list[str] = field(default_factory=list[str])


def parked_of(records: Sequence[Record]) -> list[str]:
    """The ids of the queued prompts a session holds that neither started (no
    `user/message` of that id) nor were dropped, in their order (L8)."""
    started = {str(r.data.get("id")) for r in records if r.type == USER_MESSAGE}
    dropped = {
        str(mid) for r in records if r.type == PROMPT_DROPPED for mid in r.data.get("ids", ())
    }
    queued = [str(r.data.get("id")) for r in records if r.type == PROMPT_QUEUED]
    return [mid for mid in queued if mid not in started and mid not in dropped]


def check_parked(
    sid: str,
    before: Sequence[Record],
    added: Sequence[Record],
    restored: Restored,
    cancelled: bool,
) -> None:
    """L8 on a resume of `sid`, which held `before`: `restored` shows its unstarted queued
    prompts parked, in order; a cancel at once (`cancelled`) dropped them, recorded in
    `added`. Raises ContractViolation."""
    wanted = parked_of(before)
    where = f"session {sid!r} held queued prompts {wanted} that never started"
    if not wanted:
        where = f"session {sid!r} held no queued prompt left to run"
    PARKED_RESTORED.check(
        restored.pending == wanted and restored.parked == bool(wanted),
        lambda: (
            f"{where}; resumed, its agent had pending {restored.pending} with parked "
            f"{restored.parked} (status {restored.status})"
        ),
    )
    if not cancelled:
        return
    drops = [r for r in added if r.type == PROMPT_DROPPED]
    dropped = [str(mid) for r in drops for mid in r.data.get("ids", ())]
    reasons = {str(r.data.get("reason")) for r in drops}
    PARKED_RESTORED.check(
        restored.cancelled == bool(wanted) and not restored.left,
        lambda: (
            f"{where}; cancel() right after its resume returned {restored.cancelled} and "
            f"left pending {restored.left}"
        ),
    )
    PARKED_RESTORED.check(
        dropped == wanted and reasons <= {"cancelled"},
        lambda: (
            f"{where}; cancel() right after its resume recorded {show(drops)}, not one "
            f"prompt/dropped of {wanted}, reason cancelled"
        ),
    )


def check_resumed(
    sid: str, before: Sequence[Record], records: Sequence[Record], *, clean: bool
) -> None:
    """`records` of `sid` once resumed and sent a prompt, `before` what the file held (its
    runtime closed `clean`ly, or crashed): the repair if a turn was open, nothing if not,
    and a valid history. Raises ContractViolation."""
    opened = OpenTurn(before)
    # The prompt queue's records stand outside turns (rule L8): a prompt sent to an
    # agent that restored parked prompts is queued behind them before any turn starts.
    added = [r for r in records[len(before) :] if r.type not in PROMPT_RECORD_TYPES]
    if opened.turn is None:
        RESUME_AFTER_CLOSE_ADDS_NOTHING.check(
            bool(added) and added[0].type == TURN_START,
            lambda: (
                f"{sid!r} was stored with its last turn ended "
                f"({'closed cleanly' if clean else 'then the runtime crashed'}); resuming it "
                f"and sending appended {show(added)}"
            ),
        )
    else:
        _check_repair(sid, opened, added)
    problems = history_problems(records, allow_open_turn=True)
    RESUMED_HISTORY_VALID.check(
        not problems, lambda: f"resumed session {sid!r}: {'; '.join(problems)}"
    )


def _check_repair(sid: str, opened: OpenTurn, added: Sequence[Record]) -> None:
    """What resuming appended (`added`) to a session stored with `opened` turn: its end as
    `interrupted`, a result for each dangling call, and the repair before the new turn."""
    turn = opened.turn
    where = f"{sid!r} was stored with turn {turn} open"
    if opened.dangling:
        where += f" and tool calls {opened.dangling} without a result"
    ends = [
        r
        for r in added
        if r.type == TURN_END
        and r.data.get("turn") == turn
        and dict(r.data.get("reason", {})).get("kind") == "interrupted"
    ]
    RESUME_ENDS_OPEN_TURN.check(
        bool(ends),
        lambda: (
            f"{where}; resuming it and sending appended {show(added)}, with no "
            f"turn/end {turn} interrupted"
        ),
    )
    answered = {
        str(r.data.get("call_id"))
        for r in added
        if r.type == TOOL_RESULT and r.data.get("interrupted") is True
    }
    missing = [c for c in opened.dangling if c not in answered]
    RESUME_ANSWERS_DANGLING_CALLS.check(
        not missing,
        lambda: (
            f"{where}; resuming it appended {show(added)}, with no interrupted result for {missing}"
        ),
    )
    expected = [*opened.repair_types, TURN_START]
    head = list(added[: len(expected)])
    results = {str(r.data.get("call_id")) for r in head if r.type == TOOL_RESULT}
    RESUME_REPAIR_FIRST.check(
        [r.type for r in head] == expected and results == set(opened.dangling),
        lambda: (
            f"{where}; resuming it and sending appended {show(added)}; the "
            f"contract's order is {expected}"
        ),
    )


def check_repair_durable(
    sid: str,
    before: Sequence[Record],
    records: Sequence[Record],
    found: Sequence[Record] | str | None,
) -> None:
    """The repair of `sid` is in the file (`found`, as the machine read it) before the new
    turn's records."""
    repaired = tuple(records[: len(before) + len(OpenTurn(before).repair_types)])
    RESUME_REPAIR_DURABLE.check(
        isinstance(found, tuple) and found[: len(repaired)] == repaired,
        lambda: (
            f"resumed {sid!r} holds {show(repaired)} up to its new turn; the file "
            f"holds {shown(found)}"
        ),
    )


def check_remembered(
    sid: str, records: Sequence[Record], policies: Sequence[tuple[int, bool]] = ()
) -> None:
    """A17 over a whole session, resumes included: with a policy that remembers, each
    `tool/approval` decided by `remembered` holds the latest "always" answer for its tool
    before it (whoever recorded it), and a call asked in a step that began after such an
    answer was recorded is decided by `remembered`; with one that does not, nothing is
    decided by `remembered`. `policies`: from which record on the session's agents
    remembered, or not (default: always). Raises ContractViolation."""
    latest: dict[str, tuple[int, str]] = {}  # tool -> (index of the answer, its outcome)
    step_began = 0
    for index, record in enumerate(records):
        if record.type == STEP_START:
            step_began = index
        if record.type != TOOL_APPROVAL:
            continue
        remembers = next((r for start, r in reversed(policies) if start <= index), True)
        tool, by = str(record.data.get("tool")), record.data.get("by")
        decision = record.data.get("decision")
        kept = latest.get(tool)
        said = f"session {sid!r}: call {record.data.get('call_id')!r} of {tool!r} was decided "
        if by == "remembered":
            if not remembers:
                REMEMBERED_ACROSS_RESUME.fail(
                    f"{said}{decision} by remembered, by an agent whose policy does not "
                    f"remember: it should have asked: {show(records[: index + 1])}"
                )
            if kept is None or kept[1] != decision:
                REMEMBERED_ACROSS_RESUME.fail(
                    f"{said}{decision} by remembered, but the latest always-answer for "
                    f"{tool!r} before it is {kept[1] if kept else 'none'}: "
                    f"{show(records[: index + 1])}"
                )
            continue
        if remembers and kept is not None and kept[0] < step_began:
            REMEMBERED_ACROSS_RESUME.fail(
                f"{said}{decision} by {by}, asked in a step that began after the session "
                f"recorded {kept[1]} for {tool!r}: it should have been decided by "
                f"remembered, without asking: {show(records[: index + 1])}"
            )
        if decision in ("allow_always", "reject_always"):
            latest[tool] = (index, str(decision))


def committed_points(
    records: Sequence[Record], *, tool_running: int, idle: bool
) -> tuple[int, int, str]:
    """(how many of `records` must be in the store already, and why: `idle`, `tool` (the
    step's tool calls, L7) or `approval` (the allowing tool/approval of each of the
    `tool_running` calls that run, oldest first, A14); how many must get there without a
    flush: through the last prompt/queued or prompt/dropped record)."""
    queued = max((i + 1 for i, r in enumerate(records) if r.type in PROMPT_RECORD_TYPES), default=0)
    if idle:
        return len(records), queued, "idle"
    if tool_running:
        calls = [i + 1 for i, r in enumerate(records) if r.type == TOOL_CALL]
        must = calls[-1] if calls else 0
        answered = {str(r.data.get("call_id")) for r in records if r.type == TOOL_RESULT}
        allowing = [
            i + 1
            for i, r in enumerate(records)
            if r.type == TOOL_APPROVAL
            and r.data.get("decision") in ("allow_once", "allow_always")
            and str(r.data.get("call_id")) not in answered
        ]
        if allowing and allowing[min(tool_running, len(allowing)) - 1] > must:
            return allowing[min(tool_running, len(allowing)) - 1], queued, "approval"
        return must, queued, "tool"
    return 0, queued, "tool"


def highest_message_id(records: Sequence[Record]) -> int:
    """N of the highest `mN` id the records hold (0 for none): of prompts, steering and
    context, queued and dropped prompts included."""
    ids: list[str] = []
    for record in records:
        if "id" in record.data:
            ids.append(str(record.data["id"]))
        elif record.type == "prompt/dropped":
            ids.extend(str(i) for i in record.data.get("ids", ()))
    return max((int(i[1:]) for i in ids if i[:1] == "m" and i[1:].isdigit()), default=0)


def suffixed(call_id: str, model_id: str) -> bool:
    """A repeated model id made unique: `ID#N` (the Records table)."""
    return re.fullmatch(re.escape(model_id) + r"#\d+", call_id) is not None


TITLE_LENGTH = 80  # the contract's bound on `SessionInfo.title`


def title_problem(records: Sequence[Record], title: object) -> str | None:
    """What is wrong with `title`, the listed title of a session stored as `records`, if
    anything: None before the first prompt, else that prompt on one line, at most
    TITLE_LENGTH characters. How whitespace is joined and where a long one is cut are the
    store's: the title's words must be the prompt's, the last one perhaps cut short and
    followed by an ellipsis."""
    prompt = next((str(r.data["content"]) for r in records if r.type == USER_MESSAGE), None)
    if prompt is None:
        return None if title is None else f"title {title!r} before any prompt (it must be None)"
    told = f"title {title!r} for the first prompt {prompt!r}"
    if not isinstance(title, str):
        return f"{told} (it must be that prompt on one line)"
    if "\n" in title or "\r" in title or len(title) > TITLE_LENGTH:
        return f"{told}: it must be one line of at most {TITLE_LENGTH} characters"
    words, said = prompt.split(), title.split()
    if said == words:
        return None
    shortened = said[-1].rstrip("\u2026.") if said else ""
    if len(" ".join(words)) > TITLE_LENGTH and said:
        kept = [*said[:-1], shortened] if shortened else said[:-1]
        if (
            kept
            and kept[:-1] == words[: len(kept) - 1]
            and words[len(kept) - 1].startswith(kept[-1])
        ):
            return None
    return f"{told}: it must be that prompt's words on one line"
