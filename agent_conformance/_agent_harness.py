"""The agent machine's instruments: a model and a tool that note what they were asked and
take a while to stop when cancelled, a host that reports a listener error which escaped the
agent, the wording its violations use, and `RandomSeeder`, which replays a drawn scheduler
seed. Each is what a careful reviewer would set up by hand: slow-to-stop calls so a close or
a second cancel lands while a step still unwinds."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import trio

from trio_agents import (
    Finish,
    Message,
    ModelChunk,
    ModelRequest,
    Record,
    TextDelta,
    ToolCall,
    ToolContext,
    ToolResult,
    Usage,
)
from trio_agents.testing import GateTool, ScriptedModel, ScriptedStep, TrioHost, reply, tool_step

from ._agent_checks import Reply
from ._agent_properties import LISTENER_ERRORS_CONTAINED
from ._vocabulary import TURN_END, TURN_START

__all__ = [
    "LISTENER_FAILURE",
    "NEIGHBOUR",
    "NEIGHBOUR_TEXT",
    "MachineGate",
    "MachineHost",
    "MachineModel",
    "QuietListenerFailures",
    "RandomSeeder",
    "answer_step",
    "describe_end",
    "is_listener_failure",
    "is_neighbours",
    "open_turn",
]

T = TypeVar("T")

# Another agent on the machine's bus (V1): its events are emitted by a rule, never the
# agent's, and the machine's own listeners pass them by.
NEIGHBOUR = "neighbour-agent"
NEIGHBOUR_TEXT = "the neighbour's text"


def is_neighbours(event: object) -> bool:
    """Whether `event` is the neighbour agent's, not the agent under test's."""
    return getattr(event, "agent_id", None) == NEIGHBOUR


# How many checkpoints a cancelled model or tool call takes to stop: more than the few
# scheduler batches a close, a waiter or a second cancel needs to land meanwhile.
STOP_CHECKPOINTS = 4


LISTENER_FAILURE = "an armed listener raised"
"""How the RuntimeError an armed raising listener raises begins: the agent must contain it
(A11). A RuntimeError, not a class of ours: any listener's bug may raise one."""


def is_listener_failure(exc: BaseException | None) -> bool:
    """Whether `exc` is what an armed raising listener raised."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(LISTENER_FAILURE)


async def _slow_stop() -> None:
    with trio.CancelScope(shield=True):
        for _ in range(STOP_CHECKPOINTS):
            await trio.lowlevel.checkpoint()


class MachineModel(ScriptedModel):
    """The machine's model: every call held until released. It notes how many records the
    session held when each call was made (`record_counts`, from `records`) and a copy of the
    messages each call was sent (`sent`: the requests are kept, and must not change, A19),
    and takes a few checkpoints to stop when cancelled, as a network call does."""

    def __init__(self) -> None:
        super().__init__(hold_all=True)
        self.records: Callable[[], int] = lambda: 0
        self.record_counts: list[int] = []
        self.sent: list[tuple[Message, ...]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """`ScriptedModel.stream`, noting the record count and the messages first and
        stopping slowly."""
        self.record_counts.append(self.records())
        self.sent.append(tuple(request.messages))
        inner = cast("AsyncGenerator[ModelChunk, None]", super().stream(request))
        try:
            async for chunk in inner:
                yield chunk
        except trio.Cancelled:
            await _slow_stop()
            raise
        finally:
            await inner.aclose()


class MachineGate(GateTool):
    """A GateTool that notes how many records the session held when each call reached it
    (`record_counts`, from `records`), and takes a few checkpoints to stop when cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.records: Callable[[], int] = lambda: 0
        self.record_counts: list[int] = []

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        """`GateTool.__call__`, noting the record count first and stopping slowly."""
        self.record_counts.append(self.records())
        try:
            return await super().__call__(arguments, context)
        except trio.Cancelled:
            await _slow_stop()
            raise


def _escaped(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(is_listener_failure)[0] is not None  # pyright: ignore[reportUnknownMemberType]
    return is_listener_failure(exc)


class MachineHost(TrioHost):
    """A TrioHost that reports an armed listener's error escaping the agent (out of a call
    into it, or out of its loop) as the A11 violation it is, once."""

    def __init__(self, clock: trio.abc.Clock) -> None:
        super().__init__(clock)
        self._reported = False

    def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """`TrioHost.call`; an armed listener's error it raises is an A11 violation."""
        try:
            return super().call(afn, *args)
        except BaseException as exc:
            if not _escaped(exc):
                raise
            self._reported = True
            LISTENER_ERRORS_CONTAINED.fail(
                f"a listener raised ({_failure(exc)}) and the error escaped the agent"
            )

    def close(self) -> None:
        """`TrioHost.close`; an armed listener's error already reported is not raised again."""
        try:
            super().close()
        except BaseException as exc:
            if not _escaped(exc):
                raise
            if not self._reported:
                LISTENER_ERRORS_CONTAINED.fail(
                    f"a listener raised ({_failure(exc)}) and the error ended the agent's loop"
                )


def _failure(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        found = exc.split(is_listener_failure)[0]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return str(found.exceptions[0]) if found is not None else str(exc)  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
    return str(exc)


class QuietListenerFailures(logging.Filter):
    """Drops the log record of an armed listener's contained error: the agent logging it is what
    A11 asks for, and three hundred examples of its traceback would bury a real report."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the record of an armed listener's error."""
        info = record.exc_info
        return not (info and is_listener_failure(info[1]))


def open_turn(records: Sequence[Record]) -> int | None:
    """The number of the turn the records leave open, or None."""
    turn: int | None = None
    for record in records:
        if record.type == TURN_START:
            turn = int(record.data["turn"])
        elif record.type == TURN_END:
            turn = None
    return turn


def describe_end(end: Mapping[str, str] | None) -> str:
    """A turn-end reason in the contract's words: `aborted{reason 'stop', cause user}`."""
    if end is None:
        return "still running"
    details = ", ".join(
        f"{key} {value!r}" if key == "reason" else f"{key} {value}"
        for key, value in end.items()
        if key != "kind"
    )
    return f"{end.get('kind')}{{{details}}}" if details else str(end.get("kind"))


class RandomSeeder:
    """Replays a scheduler seed Hypothesis drew (printed as `RandomSeeder(n)` in a shrunk
    program): it seeds `random` and trio's scheduler randomness as Hypothesis did.

    seed: the seed.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __repr__(self) -> str:
        return f"RandomSeeder({self.seed})"

    def apply(self) -> None:
        """Seed `random` and trio's scheduler with `seed`."""
        random.seed(self.seed)
        # trio's batch shuffle draws from this module-level Random, which trio registers
        # with Hypothesis; there is no public handle on it.
        scheduler_random = getattr(trio._core._run, "_r", None)  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        if isinstance(scheduler_random, random.Random):
            scheduler_random.seed(self.seed)


def answer_step(
    answer: Literal["text", "tool", "cut"], n: int, tool: str, streamed: Reply, *, usage: bool
) -> ScriptedStep:
    """The rest of the held model call's reply, noted in `streamed`: text; a call of
    `tool`; or text and a call cut at the token limit (finish `length`), which must never
    run (A13). With `usage`, and always for a call, its finish reports tokens."""
    if answer == "text":
        step = reply(f"answer {n}")
        streamed.text.append(f"answer {n}")
    elif answer == "cut":
        cut = ToolCall(f"call-{n}", tool, {"cut": "at the tok"})
        step = ScriptedStep((TextDelta(f"cut {n}"), cut, Finish("length")))
        streamed.text.append(f"cut {n}")
        streamed.cut_calls.append(cut.call_id)
    else:
        step = tool_step(ToolCall(f"call-{n}", tool, {}))
        streamed.calls.append(f"call-{n}")
    streamed.finished = True
    # A reply that calls a tool always reports usage (most providers' do), so a turn of
    # several steps sums what its replies report (V4); a text reply reports it as drawn.
    if not usage and answer != "tool":
        return step
    reported = Usage(input_tokens=10 * n, output_tokens=n)
    streamed.usage = (reported.input_tokens, reported.output_tokens)
    items = tuple(
        Finish(item.reason, usage=reported) if isinstance(item, Finish) else item
        for item in step.items
    )
    return ScriptedStep(items)
