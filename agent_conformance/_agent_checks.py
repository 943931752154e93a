"""What the agent machine checks against the records, apart from its reference: that every
model reply and tool call that happened is recorded (A13, A8's interrupted reply), and that
each model request held exactly the history recorded before it (A12).

The machine logs what it released (`Reply`) and what the tools received; these functions
compare that with the records, independently of the implementation's own transcript. A
pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trio_agents import Message, Record

from ._agent_properties import CUT_REPLY_CALLS_NOT_RUN, PARTIAL_REPLY_KEPT, RECORDS_COMPLETE
from ._properties import Property
from ._vocabulary import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    MESSAGE_RECORD_TYPES,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
)

__all__ = ["Reply", "records_problem", "request_problem"]

Problem = tuple[Property, str]
# (role, content, call ids of its tool calls, call id it answers): a message as compared.
Seen = tuple[str, str, tuple[str, ...], str | None]


@dataclass
class Reply:
    """What the machine let one model call stream: its text pieces, the ids of the tool
    calls it asked for, and whether it was released to its end."""

    text: list[str] = field(default_factory=list[str])
    calls: list[str] = field(default_factory=list[str])
    finished: bool = False
    cut_calls: list[str] = field(default_factory=list[str])
    """The calls of a reply that finished `length`, which must never run (A13)."""
    usage: tuple[int, int] | None = None
    """The (input, output) tokens its finish reported, if it reported any."""


class _Index:
    """One pass over the records: where each step starts and ends, and where each tool call
    and its results are."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.starts: list[int] = []
        self.ends: dict[int, int] = {}  # step/start index -> its step/end index
        self.calls: dict[str, list[int]] = {}
        self.results: dict[str, list[Record]] = {}
        for index, record in enumerate(records):
            if record.type == STEP_START:
                self.starts.append(index)
            elif record.type == STEP_END and self.starts:
                self.ends.setdefault(self.starts[-1], index)
            elif record.type == TOOL_CALL:
                self.calls.setdefault(str(record.data["call_id"]), []).append(index)
            elif record.type == TOOL_RESULT:
                self.results.setdefault(str(record.data["call_id"]), []).append(record)

    def step_of(self, at: int) -> tuple[int, int | None]:
        """The step that was open when `at` records existed: (its step/start, its step/end
        or None while it runs)."""
        start = self.starts[bisect.bisect_left(self.starts, at) - 1]
        return start, self.ends.get(start)


def records_problem(
    records: Sequence[Record],
    replies: Sequence[Reply],
    record_counts: Sequence[int],
    gate_calls: Sequence[str],
    outputs: Mapping[str, str],
    contents: Mapping[str, str],
) -> Problem | None:
    """The first model reply, tool call or message whose record is missing or wrong."""
    index = _Index(records)
    for record in records:
        if record.type in MESSAGE_RECORD_TYPES:
            mid = str(record.data["id"])
            if mid in contents and record.data["content"] != contents[mid]:
                return RECORDS_COMPLETE, (
                    f"{record.type} {mid} holds {record.data['content']!r}, but {mid} was "
                    f"accepted with {contents[mid]!r}"
                )
    for number, (reply, at) in enumerate(zip(replies, record_counts, strict=False), 1):
        if not index.starts or index.starts[0] >= at:
            return RECORDS_COMPLETE, f"model call {number} was made outside any step"
        start, end = index.step_of(at)
        step = records[start : len(records) if end is None else end]
        said = [r for r in step if r.type == ASSISTANT_MESSAGE]
        text = "".join(reply.text)
        data = records[start].data
        what = f"model call {number} (turn {data['turn']}, step {data['step']})"
        if reply.finished:
            if len(said) != 1 or said[0].data.get("interrupted"):
                return RECORDS_COMPLETE, (
                    f"{what} streamed its whole reply {text!r}, but its step records "
                    f"{len(said)} assistant/message(s): {[dict(r.data) for r in said]}"
                )
            if said[0].data["content"] != text:
                return RECORDS_COMPLETE, (
                    f"{what} streamed {text!r}, but its assistant/message holds "
                    f"{said[0].data['content']!r}"
                )
            usage = _usage_problem(reply, said[0].data.get("usage"))
            if usage:
                return RECORDS_COMPLETE, f"{what} {usage}"
            called = [str(r.data["call_id"]) for r in step if r.type == TOOL_CALL]
            if reply.cut_calls and called:
                return CUT_REPLY_CALLS_NOT_RUN, (
                    f"{what} was cut at the token limit (finish 'length') with the tool calls "
                    f"{reply.cut_calls}, but its step records tool/call {called}"
                )
            if called != reply.calls:
                return RECORDS_COMPLETE, (
                    f"{what} asked for the tool calls {reply.calls}, but its step records "
                    f"tool/call {called}"
                )
        elif end is not None and text:
            kept = [r for r in said if r.data["content"] == text and r.data.get("interrupted")]
            if len(said) != 1 or not kept:
                return PARTIAL_REPLY_KEPT, (
                    f"{what} had streamed {text!r} when its step was cut, but the step "
                    f"records {[dict(r.data) for r in said] or 'no assistant/message'}"
                )
    cut = {call_id for reply in replies for call_id in reply.cut_calls}
    for call_id in gate_calls:
        if call_id in cut:
            return CUT_REPLY_CALLS_NOT_RUN, (
                f"the tool received call {call_id!r}, asked for by a reply cut at the token "
                "limit (finish 'length'), which must never run"
            )
        calls = index.calls.get(call_id, [])
        if len(calls) != 1:
            return RECORDS_COMPLETE, (
                f"the tool received call {call_id!r}, which the records hold as tool/call "
                f"{len(calls)} time(s)"
            )
        _, end = index.step_of(calls[0] + 1)
        results = index.results.get(call_id, [])
        if end is not None and len(results) != 1:
            return RECORDS_COMPLETE, (
                f"tool call {call_id!r} ran and its step ended, but the records hold "
                f"{len(results)} tool/result(s) for it"
            )
        output = outputs.get(call_id)
        ended = results and not results[0].data.get("interrupted")
        if output is not None and ended and results[0].data["content"] != output:
            return RECORDS_COMPLETE, (
                f"tool call {call_id!r} returned {output!r}, but its tool/result holds "
                f"{results[0].data['content']!r}"
            )
    return None


def expected_messages(
    records: Sequence[Record], contents: Mapping[str, str], roles: Mapping[str, str]
) -> list[Seen]:
    """The history the records hold, as a model request must carry it: each accepted
    message with the content and role it was given, replies with their tool calls, results."""
    out: list[Seen] = []
    for record in records:
        data = record.data
        if record.type in MESSAGE_RECORD_TYPES:
            mid = str(data["id"])
            fallback = "system" if data.get("role") == "system" else "user"
            role = roles.get(mid, fallback if record.type == CONTEXT_MESSAGE else "user")
            out.append((role, contents.get(mid, str(data["content"])), (), None))
        elif record.type == ASSISTANT_MESSAGE:
            out.append(("assistant", str(data["content"]), (), None))
        elif record.type == TOOL_CALL:
            last = out[-1] if out else None
            if last is not None and last[0] == "assistant":
                out[-1] = (last[0], last[1], (*last[2], str(data["call_id"])), None)
            else:
                out.append(("assistant", "", (str(data["call_id"]),), None))
        elif record.type == TOOL_RESULT:
            out.append(("tool", str(data["content"]), (), str(data["call_id"])))
    return out


def seen(messages: Sequence[Message]) -> list[Seen]:
    """Messages as `expected_messages` describes them."""
    return [
        (m.role, m.content, tuple(c.call_id for c in m.tool_calls), m.call_id) for m in messages
    ]


def request_problem(
    records: Sequence[Record],
    messages: Sequence[Message],
    contents: Mapping[str, str],
    roles: Mapping[str, str],
) -> str | None:
    """How a request's messages differ from the history `records` (those recorded when it
    was made) hold, or None."""
    expected = expected_messages(records, contents, roles)
    actual = seen(messages)
    if actual == expected:
        return None
    first = next(
        (i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e),
        min(len(actual), len(expected)),
    )
    got = actual[first] if first < len(actual) else "nothing"
    want = expected[first] if first < len(expected) else "nothing"
    return (
        f"it holds {len(actual)} messages where the history has {len(expected)}; message "
        f"{first + 1} is {got}, the history's is {want} (as (role, content, tool calls, "
        "call id))"
    )


def _usage_problem(reply: Reply, recorded: object) -> str | None:
    """What is wrong with the `usage` an assistant/message of `reply` records, if anything:
    the tokens its model reported, or none when it reported none. A record without usage
    for a reply that reported some is not judged: an adapter may have no way to learn it."""
    if recorded is None:
        return None
    if reply.usage is None:
        return f"reported no usage, but its assistant/message records usage {recorded!r}"
    wanted = {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}
    if recorded != wanted:
        return f"reported usage {wanted}, but its assistant/message records {recorded!r}"
    return None
