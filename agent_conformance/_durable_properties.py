"""The durable machine's properties (rule L6, and L1 and L3 where the file shows them) and
its own reading of stored records: what a resume must repair, in the contract's words. Pure:
no trio, no Hypothesis."""

from __future__ import annotations

from collections.abc import Sequence

from trio_agents import Record

from ._properties import Property
from ._vocabulary import STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START

__all__ = ["PROPERTIES", "OpenTurn", "show", "shown"]

CRASH_NO_TORN_RECORD = Property(
    "L6",
    "crash-leaves-no-torn-record",
    "durable",
    "a crash never leaves a torn record: the store holds whole records, numbered without a "
    "gap, each as it was appended, nothing that was not, and a valid history up to a last "
    "turn the crash may have left open",
)
CRASH_KEEPS_FLUSHED = Property(
    "L6",
    "crash-keeps-flushed-records",
    "durable",
    "appends are committed in transactional batches: after a crash the store holds every "
    "record whose flush returned, in order",
)
RESUME_ENDS_OPEN_TURN = Property(
    "L6",
    "resume-ends-open-turn",
    "durable",
    "resuming a session whose last turn is open first appends turn/end with reason "
    "interrupted, before the agent runs",
)
RESUME_ANSWERS_DANGLING_CALLS = Property(
    "L6",
    "resume-answers-dangling-calls",
    "durable",
    "resuming a session whose last turn is open first appends an interrupted result for "
    "every tool call without one",
)
RESUME_REPAIR_FIRST = Property(
    "L6",
    "resume-repair-comes-first",
    "durable",
    "the repair of an open turn comes before anything the resumed agent does: the "
    "interrupted results, the open step's step/end, turn/end with reason interrupted, and "
    "only then the new turn",
)
RESUME_REPAIR_DURABLE = Property(
    "L6",
    "resume-repair-durable",
    "durable",
    "resuming appends the repair of an open turn durably: it is in the store's file after "
    "the records it follows",
)
RESUME_AFTER_CLOSE_ADDS_NOTHING = Property(
    "L6",
    "resume-after-close-adds-nothing",
    "durable",
    "only a session whose last turn is open is repaired: resuming one that was closed "
    "cleanly appends nothing before the new turn",
)
RESUMED_HISTORY_VALID = Property(
    "L6",
    "resumed-history-valid",
    "durable",
    "after its repair a resumed session's history is valid: every turn ends before the next "
    "starts, every tool call has exactly one result",
)
RESUME_OF_LIVE_REFUSED = Property(
    "L3",
    "resume-of-live-refused",
    "durable",
    "the store rejects an id that is live: resuming a live session raises "
    "DuplicateSessionError (SessionLiveError) and appends nothing to it",
)
CLOSED_SESSION_IN_FILE = Property(
    "L1",
    "closed-session-in-file",
    "durable",
    "the closing turn/end is durable in the store before aclose returns: after a clean "
    "close, read back from the file by a fresh store, a closed session holds every record "
    "it had, ending with turn/end",
)

CLOSE_REPORTS_UNSTORED = Property(
    "L11",
    "close-reports-unstored",
    "durable",
    "a SQLite store closed while another connection holds the file's write lock keeps what "
    "was flushed and whole records only (the file holds a prefix of the session), and if "
    "any record was not stored, leaving running() raises StoreLockedError naming the file "
    "and how many",
)
STALE_DETACH_HARMLESS = Property(
    "L3",
    "stale-detach-harmless",
    "durable",
    "a session's detach removes only its exact entry: called again after the id was "
    "entered anew, it leaves the new entry live, and what that entry appends is stored",
)

WRITE_AHEAD = Property(
    "L7",
    "tool-call-durable-before-tool",
    "durable",
    "write-ahead: a step's tool/call records, and every record before them, are committed "
    "to the store before any of its tools starts",
)
IDLE_AFTER_COMMIT = Property(
    "L7",
    "idle-after-commit",
    "durable",
    "the agent commits before it settles IDLE: every record of a finished turn is in the "
    "store when wait_idle returns",
)
QUEUED_PROMPT_COMMITTED = Property(
    "L8",
    "queued-prompt-committed",
    "durable",
    "a prompt accepted while other work runs is recorded as prompt/queued, its drop as "
    "prompt/dropped, and both records request a commit at once: they reach the store, with "
    "every record before them, without waiting for the turn they wait behind",
)

LISTED_OLDEST_FIRST = Property(
    "L13",
    "list-sessions-oldest-first",
    "durable",
    "`list_sessions` lists every stored session once, oldest first, each with the number of "
    "its records, of its turns, and the kind of its last turn/end, as the store holds them, "
    "its title: its first prompt on one line, at most 80 characters, and `updated_at`: when "
    "the store last wrote it",
)
CALL_IDS_UNIQUE = Property(
    "A13",
    "call-ids-unique-in-session",
    "durable",
    "every tool call a reply asks for is recorded as a tool/call whose call_id is unique "
    "within the session: the model's id when the session does not hold it yet, else that id "
    "with a #N suffix (one id twice in a reply, or an id of an earlier turn or before a "
    "resume)",
)
RESUMED_IDS_CONTINUE = Property(
    "L8",
    "resumed-ids-continue",
    "durable",
    "a resumed agent's message ids continue after the highest id its session holds (`m1`, "
    "`m2`, ... per agent), queued and dropped prompts included: a prompt sent after a resume "
    "never takes the id of one the session holds, nor of one restored parked",
)
PARKED_RESTORED = Property(
    "L8",
    "parked-prompts-restored",
    "durable",
    "an agent resumed over a session whose queued prompts neither started nor were dropped "
    "restores them, in their order, parked: it is IDLE with exactly them in `pending` and "
    "`parked` True (and False with none); `cancel` then drops them: it returns True and "
    "records one `prompt/dropped` naming them, reason `cancelled`",
)
APPROVAL_DURABLE = Property(
    "A14",
    "approval-durable-before-tool",
    "durable",
    "an allowing tool/approval is committed to the session's store before its call starts: "
    "with the call running, the store's file holds it, without a flush",
)
REMEMBERED_ACROSS_RESUME = Property(
    "A17",
    "always-answers-resumed",
    "durable",
    "an allow_always or reject_always answer holds for its tool for the rest of the session, "
    "across resumes: a call of that tool asked in a later step is decided without asking, "
    "`by: remembered`, with the latest such answer the session holds; and `remembered` "
    "never decides a call the session holds no such answer for",
)
NOTHING_STRANDED = Property(
    "A1",
    "no-prompt-stranded",
    "durable",
    "at rest, with its store committing in worker threads, an agent is IDLE only with "
    "nothing pending but the prompts restored parked: a prompt sent while the agent "
    "commits the end of a turn before settling IDLE starts its turn",
)
RESTORE_REPAIRS_ONCE = Property(
    "L6",
    "restore-repairs-once",
    "durable",
    "a store's `restore` of a session whose last turn is open appends the closers of L6 "
    "(an interrupted result for each call without one, then turn/end interrupted) durably "
    "and once, even for two restores of it at once (L13), and returns what the file then "
    "holds; of a session whose turns are closed it appends nothing",
)
RESTORE_FREES_CLAIM = Property(
    "L14",
    "restore-frees-its-claim",
    "durable",
    "a `restore` that ends without the session going live releases its claim: another "
    "open of the store (as another process would) can restore the session at once",
)
DAMAGE_NAMED = Property(
    "L12",
    "damaged-session-named",
    "durable",
    "a store reads a session whole and checks it: a damaged record or header, or a gap in "
    "the numbering, makes `exists`, `load` and a resume raise CorruptSessionError naming "
    "the session and the record; `list_sessions` lists it with its `damage`, so one damaged "
    "session hides no other; a restore that fails leaves no claim file in `<store>.live/`",
)
REQUEST_HISTORY_KEPT = Property(
    "A12",
    "request-history-kept",
    "durable",
    "each model request holds the session's history as its records hold it: each reply with "
    "all of its tool calls (two in one reply are one assistant message), each result in its "
    "place; after a resume too, the repair's results included",
)

PROPERTIES: tuple[Property, ...] = (
    CLOSE_REPORTS_UNSTORED,
    STALE_DETACH_HARMLESS,
    CRASH_NO_TORN_RECORD,
    CRASH_KEEPS_FLUSHED,
    RESUME_ENDS_OPEN_TURN,
    RESUME_ANSWERS_DANGLING_CALLS,
    RESUME_REPAIR_FIRST,
    RESUME_REPAIR_DURABLE,
    RESUME_AFTER_CLOSE_ADDS_NOTHING,
    RESUMED_HISTORY_VALID,
    RESUME_OF_LIVE_REFUSED,
    CLOSED_SESSION_IN_FILE,
    WRITE_AHEAD,
    IDLE_AFTER_COMMIT,
    QUEUED_PROMPT_COMMITTED,
    LISTED_OLDEST_FIRST,
    DAMAGE_NAMED,
    RESTORE_REPAIRS_ONCE,
    RESTORE_FREES_CLAIM,
    CALL_IDS_UNIQUE,
    RESUMED_IDS_CONTINUE,
    PARKED_RESTORED,
    APPROVAL_DURABLE,
    REMEMBERED_ACROSS_RESUME,
    NOTHING_STRANDED,
    REQUEST_HISTORY_KEPT,
)
"""The properties this machine checks, each of one rule of the contract."""


def show(records: Sequence[Record]) -> str:
    return "[" + ", ".join(_describe(r) for r in records) + "]"


def _describe(record: Record) -> str:
    data = record.data
    if record.type == TURN_END:
        return f"turn/end {data.get('turn')} {dict(data.get('reason', {})).get('kind')}"
    if record.type in (TURN_START, STEP_START, STEP_END):
        return f"{record.type} {data.get('turn', data.get('step'))}"
    if record.type in (TOOL_CALL, TOOL_RESULT):
        extra = " interrupted" if data.get("interrupted") else ""
        return f"{record.type} {data.get('call_id')}{extra}"
    return record.type


class OpenTurn:
    """What a resume must repair in stored records: the open turn, whether a step is open,
    and the tool calls of that step without a result (a reading of the contract, kept apart
    from the implementation's own repair)."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.turn: int | None = None
        self.step_open = False
        self.dangling: list[str] = []
        for record in records:
            if record.type == TURN_START:
                self.turn, self.step_open, self.dangling = int(record.data["turn"]), False, []
            elif record.type == TURN_END:
                self.turn, self.step_open, self.dangling = None, False, []
            elif record.type in (STEP_START, STEP_END):
                self.step_open, self.dangling = record.type == STEP_START, []
            elif record.type == TOOL_CALL:
                self.dangling.append(str(record.data["call_id"]))
            elif record.type == TOOL_RESULT:
                call_id = str(record.data["call_id"])
                if call_id in self.dangling:
                    self.dangling.remove(call_id)

    @property
    def repair_types(self) -> list[str]:
        if self.turn is None:
            return []
        return [TOOL_RESULT] * len(self.dangling) + [STEP_END] * self.step_open + [TURN_END]


def shown(found: Sequence[Record] | str | None) -> str:
    if found is None:
        return "nothing (the session is not stored)"
    if isinstance(found, str):
        return found
    return show(found)
