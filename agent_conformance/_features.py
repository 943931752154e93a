"""What an agent under test declares it has, and the designs it chose where sound designs
differ: the agent machine runs only the rules of what is declared and follows the declared
designs, and the report says which properties that left unchecked and why.

`GATES` is the one table of what each feature gates: the machine's rules that never run
without it, the properties then not checked at all, and those checked on fewer programs.
A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Literal, get_args

from ._agent_properties import (
    ALWAYS_REMEMBERED,
    APPROVAL_BEFORE_RUN,
    APPROVAL_WAIT_UNTIMED,
    CANCEL_DECISION_ABORTS,
    CANCEL_EFFECTIVE,
    CANCEL_ENDS_APPROVAL_WAIT,
    CANCEL_ORDER,
    CLOSED_REFUSES,
    CONTEXT_NEXT_STEP,
    CUT_REPLY_CALLS_NOT_RUN,
    DELIVERED_ONCE,
    INJECT_NEVER_WAKES,
    LISTENER_ERRORS_CONTAINED,
    NO_MODEL_CALL_AFTER_CANCEL,
    ONE_APPROVAL_RECORD,
    ONE_SEND_ONE_TURN,
    PARTIAL_REPLY_KEPT,
    REJECTED_CALL_ANSWERED,
    REQUEST_HISTORY,
    SEND_AFTER_CANCEL_RUNS,
    STEERING_DELIVERED,
    STEERING_NEVER_LOST,
    STREAM_ENDS_WITH_TURN_END,
    STREAM_FOLLOWS_ITS_TURN,
    STREAM_RESULT_FROM_RECORDS,
    STREAM_SLOW_READER_LOSES_NOTHING,
    TURN_END_REASON,
    WAIT_IDLE_CLOSED,
    WAIT_IDLE_RETURNS,
)
from ._properties import Property

__all__ = [
    "ATTRIBUTE",
    "GATES",
    "CancelAfterFinalAnswer",
    "Features",
    "Gate",
    "SteeringAtStepLimit",
    "coverage",
    "features_of",
    "raised_by_features",
]

SteeringAtStepLimit = Literal["requeue", "answer"]
CancelAfterFinalAnswer = Literal["aborted", "completed"]

ATTRIBUTE = "conformance_features"
"""The attribute of an agent factory that declares its `Features`."""


@dataclass(frozen=True)
class Features:
    """What an agent under test has (each True by default: the built-in `Agent` has all of
    it) and the design it chose where the contract allows two (default: the built-in's).
    A value of the wrong kind raises ValueError naming it.

    steer: `steer` exists (A3).
    inject: `inject` exists (A4).
    system_context: `inject` takes a `Message` of role system.
    step_timeout: the `step_timeout` option is honoured.
    max_steps: the `max_steps` option is honoured.
    listener_windows: a listener may cancel inside TurnStarted, StepStarted and StepEnded,
        and send inside StatusChanged(IDLE).
    raising_listeners: a listener may raise (A11).
    partial_replies: a reply cut short keeps its streamed prefix (A8).
    pending: the agent has `pending`, the `(message id, kind)` pairs it holds.
    same_batch_races: `cancel` and `send` may run in one scheduler batch.
    close_while_cancelling: a close may land while a cancelled turn unwinds.
    approval: the factory takes `approval=` (an `Approval`) and the agent asks before the
        calls its policy gates (A14-A18). A factory without an `approval` parameter is
        checked without it, as if it declared none.
    steering_at_step_limit: steering left when `max_steps` ends a turn is `requeue`d as the
        next prompt (A3), or `answer`ed by one more model step beyond the limit, after which
        the turn ends `max_steps` (steering that arrives during that step is re-queued).
    stream: the agent has `stream(prompt)`, whose readers get the events of that prompt's
        turn (V1-V4). An agent without a `stream` attribute is checked without it, as if it
        declared none.
    length_cut: a reply that finished `length` (cut at the token limit) has its tool calls
        never run (A13).
    cancel_after_final_answer: a cancel landing after the model's final answer (a StepEnded
        listener's) ends the turn `aborted`, or the answer stands and it ends `completed`;
        either way the cancel is effective and drops the queue.
    """

    steer: bool = True
    inject: bool = True
    system_context: bool = True
    step_timeout: bool = True
    max_steps: bool = True
    listener_windows: bool = True
    raising_listeners: bool = True
    partial_replies: bool = True
    pending: bool = True
    same_batch_races: bool = True
    close_while_cancelling: bool = True
    approval: bool = True
    stream: bool = True
    length_cut: bool = True
    steering_at_step_limit: SteeringAtStepLimit = "requeue"
    cancel_after_final_answer: CancelAfterFinalAnswer = "aborted"

    def __post_init__(self) -> None:
        for name in FEATURES:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"Features({name}={value!r}): {name} must be True or False")
        for name, allowed in DESIGNS.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(
                    f"Features({name}={value!r}): {name} must be one of "
                    f"{', '.join(map(repr, allowed))}"
                )

    @property
    def missing(self) -> tuple[str, ...]:
        """The features declared absent, in declaration order."""
        return tuple(name for name in FEATURES if not getattr(self, name))

    @property
    def designs(self) -> dict[str, str]:
        """The design parameters that differ from the contract's defaults."""
        default = Features()
        return {
            name: getattr(self, name)
            for name in DESIGNS
            if getattr(self, name) != getattr(default, name)
        }


FEATURES: tuple[str, ...] = tuple(f.name for f in fields(Features) if f.type == "bool")
DESIGNS: dict[str, tuple[str, ...]] = {
    "steering_at_step_limit": get_args(SteeringAtStepLimit),
    "cancel_after_final_answer": get_args(CancelAfterFinalAnswer),
}


@dataclass(frozen=True)
class Gate:
    """What one feature gates in the agent machine.

    rules: the machine's rules that never run without it (or the option never set).
    skips: the properties then not checked at all.
    narrows: the properties then checked on fewer programs.
    """

    rules: tuple[str, ...]
    skips: tuple[Property, ...] = ()
    narrows: tuple[Property, ...] = ()


GATES: dict[str, Gate] = {
    "steer": Gate(
        ("steer", "steer_as_the_turn_ends", "steer on the CLOSED agent"),
        (STEERING_DELIVERED, STEERING_NEVER_LOST),
        (CLOSED_REFUSES,),
    ),
    "inject": Gate(
        ("inject", "inject on the CLOSED agent"),
        (CONTEXT_NEXT_STEP, INJECT_NEVER_WAKES),
        (CLOSED_REFUSES, REQUEST_HISTORY),
    ),
    "system_context": Gate(
        ("inject(role='system'), injected as role user",), (), (REQUEST_HISTORY,)
    ),
    "step_timeout": Gate(
        ("the step_timeout option", "time_passes"),
        (APPROVAL_WAIT_UNTIMED,),
        (TURN_END_REASON, STEERING_NEVER_LOST, PARTIAL_REPLY_KEPT),
    ),
    "max_steps": Gate(("the max_steps option",), (), (TURN_END_REASON, STEERING_NEVER_LOST)),
    "listener_windows": Gate(
        ("arm", "cancel_at_the_final_answer"), (), (NO_MODEL_CALL_AFTER_CANCEL, WAIT_IDLE_RETURNS)
    ),
    "raising_listeners": Gate(("arm_raising",), (LISTENER_ERRORS_CONTAINED,)),
    "partial_replies": Gate(("release_partial",), (PARTIAL_REPLY_KEPT,)),
    "pending": Gate(
        ("the pending checks",),
        (),
        (CANCEL_ORDER, CANCEL_EFFECTIVE, DELIVERED_ONCE, ONE_SEND_ONE_TURN, STEERING_NEVER_LOST),
    ),
    "same_batch_races": Gate(
        ("race_cancel_and_send", "race_decision_and_cancel"),
        (SEND_AFTER_CANCEL_RUNS,),
        (CANCEL_ENDS_APPROVAL_WAIT,),
    ),
    "close_while_cancelling": Gate(("cancel_then_close",), (), (TURN_END_REASON, WAIT_IDLE_CLOSED)),
    "approval": Gate(
        ("the approval option", "call_gated_tool", "decide", "race_decision_and_cancel"),
        (
            APPROVAL_BEFORE_RUN,
            REJECTED_CALL_ANSWERED,
            ONE_APPROVAL_RECORD,
            CANCEL_ENDS_APPROVAL_WAIT,
            CANCEL_DECISION_ABORTS,
            ALWAYS_REMEMBERED,
            APPROVAL_WAIT_UNTIMED,
        ),
    ),
    "stream": Gate(
        ("send_streamed (a plain send instead)", "read_streams"),
        (
            STREAM_FOLLOWS_ITS_TURN,
            STREAM_ENDS_WITH_TURN_END,
            STREAM_SLOW_READER_LOSES_NOTHING,
            STREAM_RESULT_FROM_RECORDS,
        ),
    ),
    "length_cut": Gate(("release_model(answer='cut')",), (CUT_REPLY_CALLS_NOT_RUN,)),
}
"""Feature -> what it gates; every feature of `Features` has an entry."""


def features_of(target: object) -> Features:
    """The features `target` (an agent factory) declares in its `conformance_features`
    attribute; all of them when it has none. Raises TypeError for anything else."""
    declared: object = getattr(target, ATTRIBUTE, None)
    if declared is None:
        return Features()
    if not isinstance(declared, Features):
        name = getattr(target, "__name__", repr(target))
        raise TypeError(
            f"{name}.{ATTRIBUTE} is a {type(declared).__name__}; it must be an "
            "agent_conformance.Features"
        )
    return declared


def raised_by_features(exc: BaseException) -> bool:
    """Whether `exc` was raised here: by `Features` validation or `features_of`."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename == __file__


def _why(feature: str, absent: Iterable[str]) -> str:
    if feature in absent:
        return f"the agent has no `{feature}`"
    return f"the target declares no {feature}"


Reasoned = tuple[tuple[Property, str], ...]


def coverage(
    properties: Iterable[Property], features: Features, *, absent: Iterable[str] = ()
) -> tuple[tuple[Property, ...], Reasoned, Reasoned]:
    """Of `properties` (a machine's): those checked, those skipped with the reason, and
    those checked only in part with the reason, given the declared `features` and the
    features found `absent` while running (an agent without `pending`)."""
    gone = [*features.missing, *(name for name in absent if name not in features.missing)]
    found = set(absent)
    skipped: dict[Property, str] = {}
    narrowed: dict[Property, list[str]] = {}
    for feature in gone:
        gate = GATES[feature]
        for prop in gate.skips:
            skipped.setdefault(prop, _why(feature, found))
        for prop in gate.narrows:
            narrowed.setdefault(prop, []).append(_why(feature, found))
    ordered = list(properties)
    checked = tuple(p for p in ordered if p not in skipped)
    return (
        checked,
        tuple((p, skipped[p]) for p in ordered if p in skipped),
        tuple((p, "; ".join(narrowed[p])) for p in checked if p in narrowed),
    )
