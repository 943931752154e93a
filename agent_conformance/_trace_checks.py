"""What a traced agent's spans must be, read from its records (rules O1 and O2): the first
span that is missing, misplaced, misnamed or of the wrong status for a turn that has ended.

The records are the oracle: each `turn/start` to `turn/end` is one `invoke_agent` span,
each step a `trio_agents.step` child with one `chat` child, each `tool/call` an
`execute_tool` child of its step. The `error.type` a turn's end gives is written out here
from the contract's list, not taken from the tracer. A pure module: no trio, no
OpenTelemetry (the machine turns the SDK's spans into `SpanView`s).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trio_agents import Record

from ._agent_properties import SPANS_END_WITH_TURN, SPANS_MIRROR_RECORDS
from ._properties import Property

__all__ = ["SpanView", "TracedNames", "expected_error", "trace_problem"]

Problem = tuple[Property, str]

OPERATION = "gen_ai.operation.name"
TURN = "trio_agents.turn"
STEP = "trio_agents.step"
END_REASON = "trio_agents.turn.end_reason"
ERROR_TYPE = "error.type"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_STARTED = "trio_agents.tool.started"


@dataclass(frozen=True)
class SpanView:
    """An ended span, as the checks read it."""

    name: str
    span_id: int
    parent_id: int | None
    attributes: Mapping[str, Any]
    error: bool  # its status is ERROR
    start: int = 0  # when it began, in nanoseconds

    def describe(self) -> str:
        status = f"ERROR {self.attributes.get(ERROR_TYPE)!r}" if self.error else "UNSET"
        return f"span {self.name!r} ({status})"


@dataclass(frozen=True)
class TracedNames:
    """The names the tracer was given: `invoke_agent AGENT`, `chat MODEL`."""

    agent: str
    model: str


@dataclass
class _Step:
    number: int
    reply: Mapping[str, Any] | None = None  # the assistant/message read in full
    calls: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    results: dict[str, Mapping[str, Any]] = field(default_factory=dict[str, Mapping[str, Any]])


@dataclass
class _Turn:
    number: int
    reason: Mapping[str, Any] | None = None
    steps: list[_Step] = field(default_factory=list[_Step])


def expected_error(reason: Mapping[str, Any]) -> str | None:
    """The `error.type` of a turn that ended for `reason` (its `turn/end` record's), as the
    contract lists them; None for a completed turn."""
    kind = reason.get("kind")
    if kind == "completed":
        return None
    if kind == "aborted":
        cause = reason.get("cause")
        return {"timeout": "timeout", "step": "trio_agents.step_aborted"}.get(
            str(cause), "cancelled"
        )
    if kind == "error":
        name = str(reason.get("message", "")).partition(":")[0].strip()
        return name if name.isidentifier() else "_OTHER"
    if kind in ("max_steps", "closed", "interrupted"):
        return f"trio_agents.{kind}"
    return "_OTHER"


def _turns(records: Sequence[Record]) -> list[_Turn]:
    turns: list[_Turn] = []
    for record in records:
        data = record.data
        if record.type == "turn/start":
            turns.append(_Turn(int(data["turn"])))
        elif not turns:
            continue
        elif record.type == "step/start":
            turns[-1].steps.append(_Step(int(data["step"])))
        elif record.type == "turn/end":
            raw = data.get("reason")
            turns[-1].reason = raw if isinstance(raw, Mapping) else {}  # pyright: ignore[reportUnknownMemberType]
        elif turns[-1].steps:
            step = turns[-1].steps[-1]
            if record.type == "assistant/message" and not data.get("interrupted"):
                step.reply = data
            elif record.type == "tool/call":
                step.calls.append((str(data["call_id"]), str(data["name"])))
            elif record.type == "tool/result":
                step.results[str(data["call_id"])] = data
    return turns


def trace_problem(
    records: Sequence[Record],
    spans: Sequence[SpanView],
    started: Collection[str],
    names: TracedNames,
) -> Problem | None:
    """The first turn that has ended whose spans are not what its records say; `started`
    are the call ids whose tool started (a ToolStarted was emitted)."""
    for turn in _turns(records):
        if turn.reason is not None:
            problem = _turn_problem(turn, turn.reason, spans, started, names)
            if problem is not None:
                return problem
    return None


def _turn_problem(
    turn: _Turn,
    reason: Mapping[str, Any],
    spans: Sequence[SpanView],
    started: Collection[str],
    names: TracedNames,
) -> Problem | None:
    kind = str(reason.get("kind"))
    what = f"turn {turn.number} (ended {kind})"
    found = [s for s in spans if s.attributes.get(OPERATION) == "invoke_agent"]
    mine = [s for s in found if s.attributes.get(TURN) == turn.number]
    if not mine:
        return SPANS_END_WITH_TURN, f"{what} has no ended invoke_agent span"
    if len(mine) > 1:
        return SPANS_MIRROR_RECORDS, f"{what} has {len(mine)} invoke_agent spans"
    span = mine[0]
    error = expected_error(reason)
    problem = (
        _named(span, f"invoke_agent {names.agent}", what)
        or _attribute(span, END_REASON, kind, what)
        or _parented(span, None, what)
        or _status(span, error, f"the invoke_agent span of {what}")
    )
    if problem is not None:
        return problem
    # Its steps are its children of that name, in the order they began.
    steps = sorted(
        (s for s in spans if s.parent_id == span.span_id and s.name == "trio_agents.step"),
        key=lambda s: s.start,
    )
    if len(steps) != len(turn.steps):
        prop = SPANS_END_WITH_TURN if len(steps) < len(turn.steps) else SPANS_MIRROR_RECORDS
        return prop, (
            f"{what} recorded {len(turn.steps)} step(s); its invoke_agent span has "
            f"{len(steps)} ended trio_agents.step child span(s)"
        )
    for index, (step, step_span) in enumerate(zip(turn.steps, steps, strict=True)):
        last = index == len(turn.steps) - 1
        # A turn cut short fails its last step; max_steps fails the turn alone (O2).
        cut = error if last and kind != "max_steps" else None
        problem = _step_problem(turn, step, step_span, cut, spans, started, names)
        if problem is not None:
            return problem
    return None


def _step_problem(
    turn: _Turn,
    step: _Step,
    span: SpanView,
    cut: str | None,
    spans: Sequence[SpanView],
    started: Collection[str],
    names: TracedNames,
) -> Problem | None:
    what = f"step {step.number} of turn {turn.number}"
    problem = (
        _attribute(span, TURN, turn.number, what)
        or _attribute(span, STEP, step.number, what)
        or _status(span, cut, f"the span of {what}")
    )
    if problem is not None:
        return problem
    chats = [
        s for s in spans if s.attributes.get(OPERATION) == "chat" and s.parent_id == span.span_id
    ]
    if len(chats) != 1:
        prop = SPANS_END_WITH_TURN if not chats else SPANS_MIRROR_RECORDS
        return prop, f"{what} has {len(chats)} ended chat spans under its step span, not 1"
    chat = chats[0]
    problem = (
        _named(chat, f"chat {names.model}", f"the model call of {what}")
        or _attribute(chat, STEP, step.number, f"the model call of {what}")
    ) or (
        _reply_problem(chat, step.reply, what)
        if step.reply is not None
        else _status(chat, cut, f"the model call of {what}, which has no reply")
    )
    if problem is not None:
        return problem
    for call_id, name in step.calls:
        problem = _call_problem(call_id, name, step, span.span_id, cut, spans, started, what)
        if problem is not None:
            return problem
    return None


def _reply_problem(chat: SpanView, reply: Mapping[str, Any], what: str) -> Problem | None:
    said = f"the model call of {what}, whose reply was read in full"
    finish = chat.attributes.get(FINISH_REASONS)
    if finish is None or list(finish) != [str(reply.get("finish", "stop"))]:
        return SPANS_MIRROR_RECORDS, (
            f"{said} (finish {reply.get('finish')!r}) has {FINISH_REASONS} {finish!r}"
        )
    usage = reply.get("usage")
    if isinstance(usage, Mapping):
        tokens: Mapping[str, Any] = usage  # pyright: ignore[reportUnknownVariableType]
        for key, attribute in (("input_tokens", INPUT_TOKENS), ("output_tokens", OUTPUT_TOKENS)):
            problem = _attribute(chat, attribute, tokens.get(key), said)
            if problem is not None:
                return problem
    return _status(chat, None, said)


def _call_problem(
    call_id: str,
    name: str,
    step: _Step,
    step_span: int,
    cut: str | None,
    spans: Sequence[SpanView],
    started: Collection[str],
    what: str,
) -> Problem | None:
    call = f"tool call {call_id} ({name}) of {what}"
    mine = [s for s in spans if s.attributes.get(TOOL_CALL_ID) == call_id]
    if len(mine) != 1:
        prop = SPANS_END_WITH_TURN if not mine else SPANS_MIRROR_RECORDS
        return prop, f"{call} has {len(mine)} ended execute_tool spans, not 1"
    span = mine[0]
    result = step.results.get(call_id, {})
    if result.get("interrupted"):
        error = cut
    elif result.get("rejected"):
        error = "trio_agents.rejected"
    elif result.get("is_error"):
        error = "trio_agents.tool_error"
    else:
        error = None
    return (
        _named(span, f"execute_tool {name}", call)
        or _parented(span, step_span, call)
        or _attribute(span, TOOL_NAME, name, call)
        or _attribute(span, TOOL_STARTED, call_id in started, call)
        or _status(span, error, f"the span of {call}")
    )


def _named(span: SpanView, name: str, what: str) -> Problem | None:
    if span.name == name:
        return None
    return SPANS_MIRROR_RECORDS, f"the span of {what} is named {span.name!r}, not {name!r}"


def _attribute(span: SpanView, key: str, value: object, what: str) -> Problem | None:
    got = span.attributes.get(key)
    if got == value and type(got) is type(value):
        return None
    return SPANS_MIRROR_RECORDS, f"the span of {what} has {key} {got!r}, not {value!r}"


def _parented(span: SpanView, parent: int | None, what: str) -> Problem | None:
    if span.parent_id == parent:
        return None
    wanted = "no parent" if parent is None else "its parent's span as its parent"
    return SPANS_MIRROR_RECORDS, f"the {span.describe()} of {what} does not have {wanted}"


def _status(span: SpanView, error: str | None, what: str) -> Problem | None:
    got = span.attributes.get(ERROR_TYPE) if span.error else None
    if got == error and (error is None) == (not span.error):
        return None
    wanted = "UNSET" if error is None else f"ERROR with {ERROR_TYPE} {error!r}"
    return SPANS_END_WITH_TURN, f"{what} ended as a {span.describe()}; it should be {wanted}"
