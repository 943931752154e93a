"""The agent machine's properties: one named check per thing rules A1-A19 and V1-V4 of the
contract say, each quoting the rule in its words. A pure module: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = ["PROPERTIES"]


def _agent(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "agent", says)


STATUS_AFTER_SEND = _agent(
    "A1",
    "status-after-send",
    "`send` from IDLE sets `status` to RUNNING before it returns",
)
STATUS_AT_REST = _agent(
    "A1",
    "status-at-rest",
    "the agent is RUNNING while a turn runs or a prompt is queued, IDLE once it has settled "
    "with nothing queued, CLOSED once closed",
)
STATUS_EVENTS = _agent(
    "A1",
    "status-events",
    "every status change is announced by one StatusChanged carrying the new status, which "
    "`status` already shows to its listeners",
)
ONE_SEND_ONE_TURN = _agent(
    "A2",
    "one-send-one-turn",
    "one send is one turn, and turns run in the order their prompts were sent; a prompt is "
    "never merged into another prompt's turn",
)
DELIVERED_ONCE = _agent(
    "A2",
    "delivered-once",
    "each accepted message is delivered (recorded) at most once",
)
STEERING_DELIVERED = _agent(
    "A3",
    "steering-delivered",
    "`steer` while a turn runs is delivered before that turn's next model call",
)
STEERING_NEVER_LOST = _agent(
    "A3",
    "steering-never-lost",
    "steering that a turn did not take before it ended, naturally or by a step abort, is "
    "queued again as a prompt: it is never lost; only `cancel` discards it",
)
CONTEXT_NEXT_STEP = _agent(
    "A4",
    "context-next-step",
    "`inject` while a turn runs rides into the next step; while IDLE it is held for the first "
    "step of the next turn; a cancel keeps it",
)
INJECT_NEVER_WAKES = _agent(
    "A4",
    "inject-never-wakes",
    "`inject` never wakes the agent and never starts a turn",
)
IDLE_CANCEL_INERT = _agent(
    "A5",
    "idle-cancel-inert",
    "`cancel` with nothing to cancel (IDLE, nothing queued) returns False, emits nothing and "
    "changes nothing",
)
IDLE_CANCEL_STRANDS_NOTHING = _agent(
    "A5",
    "idle-cancel-strands-nothing",
    "a `cancel` with nothing to cancel cannot strand the next prompt: its turn runs as if the "
    "cancel had never been called",
)
CANCEL_EFFECTIVE = _agent(
    "A6",
    "cancel-effective",
    "a `cancel` while a turn runs or work is queued is effective and returns True",
)
CANCEL_REQUESTED = _agent(
    "A6",
    "cancel-requested",
    "an effective `cancel` emits exactly one `CancelRequested(agent_id, cause, reason)`; an "
    "ineffective one emits none",
)
CANCEL_ORDER = _agent(
    "A6",
    "cancel-order",
    "an effective `cancel` first emits `CancelRequested`, then clears the queued prompts and "
    "the steering, then cancels the running turn: its listeners still see the queue, the "
    "steering and the status as they were",
)
CANCELLED_PROMPT_NEVER_RUNS = _agent(
    "A7",
    "cancelled-prompt-never-runs",
    "a prompt (or steering) cancelled before its turn starts never reaches the model: it is "
    "never recorded",
)
NO_MODEL_CALL_AFTER_CANCEL = _agent(
    "A7",
    "no-model-call-after-cancel",
    "a cancel that lands in the pre-step or the continuation window ends the turn `aborted` "
    "with no further model call; every other step calls the model once",
)
SEND_AFTER_CANCEL_RUNS = _agent(
    "A7",
    "send-after-cancel-runs",
    "a `send` after a cancel is a turn of its own that runs; it is never folded into the "
    "cancelled turn nor dropped",
)
TURN_END_REASON = _agent(
    "A8",
    "turn-end-reason",
    "a cancelled turn ends with exactly one `turn/end`, whose reason is `aborted` with the "
    "reason and cause of the first cancel that reached it; a later cancel or a close does not "
    "rewrite it (other turns end `completed`, `max_steps`, `aborted{step-timeout, timeout}` "
    "or `closed`)",
)
HISTORY_VALID = _agent(
    "A8",
    "history-valid",
    "every tool call started in a turn gets a result record: history never holds a tool call "
    "without its result; turns and steps are balanced",
)
PARTIAL_REPLY_KEPT = _agent(
    "A8",
    "partial-reply-kept",
    "a reply cut short by a cancel (or a step abort, or a close) is kept: an "
    "`assistant/message` with the text streamed so far and `interrupted: true`",
)
WAIT_IDLE_RETURNS = _agent(
    "A9",
    "wait-idle-returns",
    "`wait_idle()` returns at once when the agent is IDLE with nothing queued, and otherwise "
    "when it settles out of RUNNING with nothing queued; never before",
)
WAIT_IDLE_CHECKPOINTS = _agent(
    "A9",
    "wait-idle-checkpoints",
    "`wait_idle()` returns after a checkpoint: awaited in a cancelled scope it raises "
    "Cancelled, whatever the agent's state, an IDLE agent's included",
)
WAIT_IDLE_CLOSED = _agent(
    "A9",
    "wait-idle-closed",
    "`wait_idle()` on a CLOSED agent waits until the loop has exited: the closing turn's "
    "`turn/end` is recorded by then",
)
CLOSED_REFUSES = _agent(
    "A10",
    "closed-refuses",
    "`send`, `steer` and `inject` on a CLOSED agent raise `AgentClosedError`, which is a "
    "`trio.ClosedResourceError`; `cancel` on a CLOSED agent returns False",
)
LISTENER_ERRORS_CONTAINED = _agent(
    "A11",
    "listener-errors-contained",
    "a listener that raises is logged and skipped, and cannot break a turn, a cancel or a close",
)
ONE_EVENT_ORDER = _agent(
    "A11",
    "one-event-order",
    "delivery is not re-entrant: an event emitted while another is being delivered (by a "
    "listener that calls back into the agent) waits until that one has reached every "
    "listener, so all listeners see the events in one order",
)
REQUEST_HISTORY = _agent(
    "A12",
    "request-history",
    "each model request holds exactly the history so far, in order: the prompts, the "
    "assistant replies with their tool calls, the tool results, and the steering and context "
    "claimed for that step, each in its role",
)
REQUEST_UNCHANGED = _agent(
    "A19",
    "request-unchanged",
    "a model request never changes once the step has made it: a model that keeps it reads "
    "the messages it was sent, whatever is recorded later",
)
RECORDS_COMPLETE = _agent(
    "A13",
    "records-complete",
    "every tool call the tools received is recorded as a `tool/call` with exactly one "
    "`tool/result`, and every model reply's text and tool calls are recorded as they streamed, "
    "with the token usage its model reported",
)
TOOL_CALLS_RUN = _agent(
    "A13",
    "tool-calls-run",
    "the tool calls a model reply asks for run in that step, and the turn waits for them "
    "before its next model call",
)
CUT_REPLY_CALLS_NOT_RUN = _agent(
    "A13",
    "cut-reply-calls-not-run",
    "the tool calls of a reply cut at the token limit (finish `length`) are never run nor "
    "recorded as `tool/call`: their arguments may be cut too",
)
SPANS_MIRROR_RECORDS = _agent(
    "O1",
    "spans-mirror-records",
    "a traced turn is one `invoke_agent` span with a `trio_agents.step` child per step, each "
    "with one `chat` child and an `execute_tool` child per tool call (one that never ran "
    "too), named, parented and attributed as the turn's records say",
)
SPANS_END_WITH_TURN = _agent(
    "O2",
    "spans-end-with-turn",
    "every span of a turn has ended once its `turn/end` is recorded; a turn that did not "
    "complete is ERROR with its `error.type`, and so are the spans it cut short (its last "
    "step, a model call with no reply, an interrupted tool call; for `max_steps`, the turn "
    "alone)",
)
APPROVAL_BEFORE_RUN = _agent(
    "A14",
    "approval-before-run",
    "a call the policy gates runs only once allowed: the tool never receives a call without "
    "a `tool/approval` record allowing it, recorded before the call starts, and `ToolStarted` "
    "announces no call that is not allowed",
)
REJECTED_CALL_ANSWERED = _agent(
    "A14",
    "rejected-call-answered",
    "a rejected call (by the approver, a remembered answer, or failing closed) never runs: it "
    "gets one `tool/result` with `is_error` and `rejected`, and the turn goes on",
)
ONE_APPROVAL_RECORD = _agent(
    "A14",
    "one-approval-record",
    "each call decided on has exactly one `tool/approval` record, with the decision and who "
    "made it, before its result; a call not yet decided has none",
)
CANCEL_ENDS_APPROVAL_WAIT = _agent(
    "A15",
    "cancel-ends-approval-wait",
    "a cancel while a decision is pending ends the wait at once: the call gets an "
    "`interrupted` result and never runs, and a decision arriving after the cancel is "
    "ignored: no `tool/approval` record",
)
CANCEL_DECISION_ABORTS = _agent(
    "A16",
    "cancel-decision-aborts",
    "a `cancel` decision is recorded and ends the turn `aborted` with reason `approval "
    "cancelled` and cause `user`, as `cancel()` would; the call gets an `interrupted` result",
)
ALWAYS_REMEMBERED = _agent(
    "A17",
    "always-remembered",
    "after an `allow_always` or `reject_always` decision, the tool's later calls in the "
    "session are decided without asking, each recorded `by: remembered`",
)
APPROVAL_WAIT_UNTIMED = _agent(
    "A18",
    "approval-wait-untimed",
    "waiting for a decision does not count against `step_timeout`; the step's own time "
    "before and after the wait does",
)
STREAM_FOLLOWS_ITS_TURN = _agent(
    "V1",
    "stream-follows-its-turn",
    "`agent.stream(prompt)` sends `prompt` as `send` does and yields the events of that "
    "prompt's turn only, in the order of its records: a step's `TurnText`s joined are its "
    "`assistant/message` content, each `TurnToolCall` is followed by exactly one "
    "`TurnToolResult` for its call id",
)
STREAM_ENDS_WITH_TURN_END = _agent(
    "V2",
    "stream-ends-with-turn-end",
    "the last event of a turn's stream is its `TurnEnd`, with the reason its `turn/end` "
    "records, and iteration ends after it; a prompt dropped before its turn gives one "
    "`TurnDropped` and no turn",
)
STREAM_SLOW_READER_LOSES_NOTHING = _agent(
    "V3",
    "stream-slow-reader-loses-nothing",
    "the agent never waits for a stream: a reader that reads nothing while the turn runs "
    "holds back neither the model nor the tools nor the turn's end, and still gets every "
    "event of the turn when it reads",
)
STREAM_RESULT_FROM_RECORDS = _agent(
    "V4",
    "stream-result-from-records",
    "`await stream.result()` returns the same `TurnResult` as `turn_result(records, "
    "prompt_id)`, and raises `TurnNotFoundError` for a prompt dropped before its turn",
)

PROPERTIES: tuple[Property, ...] = (
    STATUS_AFTER_SEND,
    STATUS_AT_REST,
    STATUS_EVENTS,
    ONE_SEND_ONE_TURN,
    DELIVERED_ONCE,
    STEERING_DELIVERED,
    STEERING_NEVER_LOST,
    CONTEXT_NEXT_STEP,
    INJECT_NEVER_WAKES,
    IDLE_CANCEL_INERT,
    IDLE_CANCEL_STRANDS_NOTHING,
    CANCEL_EFFECTIVE,
    CANCEL_REQUESTED,
    CANCEL_ORDER,
    CANCELLED_PROMPT_NEVER_RUNS,
    NO_MODEL_CALL_AFTER_CANCEL,
    SEND_AFTER_CANCEL_RUNS,
    TURN_END_REASON,
    HISTORY_VALID,
    PARTIAL_REPLY_KEPT,
    WAIT_IDLE_RETURNS,
    WAIT_IDLE_CHECKPOINTS,
    WAIT_IDLE_CLOSED,
    CLOSED_REFUSES,
    LISTENER_ERRORS_CONTAINED,
    ONE_EVENT_ORDER,
    REQUEST_HISTORY,
    REQUEST_UNCHANGED,
    RECORDS_COMPLETE,
    TOOL_CALLS_RUN,
    CUT_REPLY_CALLS_NOT_RUN,
    SPANS_MIRROR_RECORDS,
    SPANS_END_WITH_TURN,
    APPROVAL_BEFORE_RUN,
    REJECTED_CALL_ANSWERED,
    ONE_APPROVAL_RECORD,
    CANCEL_ENDS_APPROVAL_WAIT,
    CANCEL_DECISION_ABORTS,
    ALWAYS_REMEMBERED,
    APPROVAL_WAIT_UNTIMED,
    STREAM_FOLLOWS_ITS_TURN,
    STREAM_ENDS_WITH_TURN_END,
    STREAM_SLOW_READER_LOSES_NOTHING,
    STREAM_RESULT_FROM_RECORDS,
)
"""Every property of the agent machine, by rule."""
