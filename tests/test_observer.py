"""The observer API: each instant builds the records and emits the events docs/conformance.md
says, a call out of order is an `ObserverMisuse` naming what to call first, and the
built-in `Agent` adapted through it passes the agent machine, in a test and from the CLI."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

from agent_conformance import (
    AgentFactory,
    AgentObserver,
    AgentSurface,
    ObservedAgent,
    check_agent_conformance,
)
from agent_conformance._conformance import run_conformance
from examples.observed_loop import LoopAgent
from examples.observed_loop import factory as loop_factory
from examples.observed_trio_agents import ObservedTrioAgent
from examples.observed_trio_agents import factory as observed_factory
from trio_agents import (
    AgentOptions,
    AgentStatus,
    CancelRequested,
    Event,
    EventBus,
    ObserverMisuse,
    StatusChanged,
    StepEnded,
    StepStarted,
    TextStreamed,
    TurnEnded,
    TurnStarted,
    Usage,
)
from trio_agents._cli._main import main
from trio_agents.testing import ScriptedModel

TARGET = "examples.observed_trio_agents:factory"
STATIC: AgentFactory = observed_factory  # mypy and pyright check that it is an AgentFactory


def observer() -> tuple[AgentObserver, list[Event]]:
    bus = EventBus()
    events: list[Event] = []
    bus.connect(events.append)
    return AgentObserver(bus, agent_id="a"), events


def records(obs: AgentObserver) -> list[tuple[str, dict[str, Any]]]:
    return [(r.type, r.to_json()["data"]) for r in obs.records]


# -- each instant ---------------------------------------------------------------------------


def test_a_turn_with_a_tool_call_builds_the_contracts_records_and_events() -> None:
    obs, events = observer()
    obs.status_changed("running")
    obs.turn_started("m1", "hello")
    obs.message_claimed("m2", "context", "be brief", role="system")
    obs.message_claimed("m3", "steering", "and polite")
    obs.step_started()
    obs.text_streamed("let me ")
    obs.text_streamed("")
    obs.text_streamed("look")
    obs.reply_ended(finish="tool_calls")
    obs.tool_called("c1", "gate", {"x": [1]})
    obs.tool_answered("c1", "done", is_error=True)
    obs.step_ended()
    obs.step_started()
    obs.text_streamed("ok")
    obs.reply_ended(usage=Usage(input_tokens=12, output_tokens=3))
    obs.step_ended()
    obs.turn_ended({"kind": "completed"})
    obs.status_changed(AgentStatus.IDLE)
    assert records(obs) == [
        ("turn/start", {"turn": 1}),
        ("user/message", {"id": "m1", "content": "hello"}),
        ("context/message", {"id": "m2", "content": "be brief", "role": "system"}),
        ("steering/message", {"id": "m3", "content": "and polite"}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", {"content": "let me look", "finish": "tool_calls"}),
        ("tool/call", {"call_id": "c1", "name": "gate", "arguments": {"x": [1]}}),
        ("tool/result", {"call_id": "c1", "content": "done", "is_error": True}),
        ("step/end", {"turn": 1, "step": 1}),
        ("step/start", {"turn": 1, "step": 2}),
        (
            "assistant/message",
            {
                "content": "ok",
                "finish": "stop",
                "usage": {"input_tokens": 12, "output_tokens": 3},
            },
        ),
        ("step/end", {"turn": 1, "step": 2}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert events == [
        StatusChanged("a", AgentStatus.RUNNING),
        TurnStarted("a", 1),
        StepStarted("a", 1, 1),
        TextStreamed("a", 1, 1, "let me "),
        TextStreamed("a", 1, 1, "look"),
        StepEnded("a", 1, 1),
        StepStarted("a", 1, 2),
        TextStreamed("a", 1, 2, "ok"),
        StepEnded("a", 1, 2),
        TurnEnded("a", 1, {"kind": "completed"}),
        StatusChanged("a", AgentStatus.IDLE),
    ]
    assert obs.status is AgentStatus.IDLE


def test_a_cancelled_turn_records_the_interrupted_reply_and_tool_call() -> None:
    obs, events = observer()
    obs.turn_started("m1", "go")
    obs.step_started()
    obs.reply_ended(finish="tool_calls")
    obs.tool_called("c1", "gate", {})
    obs.tool_called("c2", "gate", {})
    obs.cancel_requested("user", "stop")
    obs.tool_interrupted("c1")
    obs.tool_interrupted("c2", content="cancelled")
    obs.step_ended()
    obs.step_started()
    obs.text_streamed("half")
    obs.reply_ended(interrupted=True)
    obs.step_ended()
    obs.step_started()
    obs.reply_ended(interrupted=True)  # nothing streamed: no assistant/message at all
    obs.step_ended()
    obs.turn_ended({"kind": "aborted", "reason": "stop", "cause": "user"})
    assert records(obs)[6:8] == [
        (
            "tool/result",
            {
                "call_id": "c1",
                "content": "tool call 'gate' was interrupted before it finished",
                "is_error": True,
                "interrupted": True,
            },
        ),
        (
            "tool/result",
            {"call_id": "c2", "content": "cancelled", "is_error": True, "interrupted": True},
        ),
    ]
    assert ("assistant/message", {"content": "half", "interrupted": True}) in records(obs)
    assert [t for t, _ in records(obs)].count("assistant/message") == 2
    assert CancelRequested("a", "user", "stop") in events
    assert events[-1] == TurnEnded("a", 1, {"kind": "aborted", "reason": "stop", "cause": "user"})


def test_turns_and_steps_are_numbered_per_session_and_per_turn() -> None:
    obs, _ = observer()
    for prompt in ("m1", "m2"):
        obs.turn_started(prompt, prompt)
        for _ in range(2):
            obs.step_started()
            obs.step_ended()
        obs.turn_ended({"kind": "max_steps"})
    numbered = [(t, d.get("turn"), d.get("step")) for t, d in records(obs) if "step" in t]
    assert numbered == [
        ("step/start", 1, 1),
        ("step/end", 1, 1),
        ("step/start", 1, 2),
        ("step/end", 1, 2),
        ("step/start", 2, 1),
        ("step/end", 2, 1),
        ("step/start", 2, 2),
        ("step/end", 2, 2),
    ]


def test_a_status_announced_again_emits_nothing() -> None:
    obs, events = observer()
    obs.status_changed("idle")
    obs.status_changed(AgentStatus.RUNNING)
    obs.status_changed("running")
    obs.status_changed("closed")
    assert events == [
        StatusChanged("a", AgentStatus.RUNNING),
        StatusChanged("a", AgentStatus.CLOSED),
    ]


def test_a_listeners_cancel_runs_inside_the_instant_after_its_records() -> None:
    # What the adapter's cancel finds when a StepStarted listener calls it: the step/start
    # recorded, and its CancelRequested delivered once StepStarted reached every listener.
    bus = EventBus()
    obs = AgentObserver(bus)
    seen: list[str] = []

    def listener(event: Event) -> None:
        seen.append(type(event).__name__)
        if isinstance(event, StepStarted):
            seen.append(obs.records[-1].type)
            obs.cancel_requested("user", "armed")  # as the adapter's cancel would
            seen.append("cancel returned")

    bus.connect(listener)
    bus.connect(lambda event: seen.append(f"second {type(event).__name__}"))
    obs.turn_started("m1", "go")
    seen.clear()
    obs.step_started()
    assert seen == [
        "StepStarted",
        "step/start",
        "cancel returned",
        "second StepStarted",
        "CancelRequested",
        "second CancelRequested",
    ]


# -- misuse -----------------------------------------------------------------------------------


def _turn(obs: AgentObserver) -> None:
    obs.turn_started("m1", "go")


def _step(obs: AgentObserver) -> None:
    _turn(obs)
    obs.step_started()


def _replied(obs: AgentObserver) -> None:
    _step(obs)
    obs.reply_ended()


MISUSES: list[tuple[Callable[[AgentObserver], None], Callable[[AgentObserver], None], str]] = [
    (
        lambda o: None,
        lambda o: o.status_changed("busy"),  # type: ignore[arg-type]
        "status_changed('busy'): give an AgentStatus or 'idle', 'running', 'closed'",
    ),
    (
        lambda o: None,
        lambda o: o.cancel_requested("timeout", "r"),
        "cancel_requested('timeout', ...): the cause is 'user' or 'parent'",
    ),
    (
        _turn,
        lambda o: o.turn_started("m2", "again"),
        "turn_started('m2') while turn 1 is open: call turn_ended first",
    ),
    (
        lambda o: None,
        lambda o: o.message_claimed("m2", "steering", "x"),
        "message_claimed('m2', 'steering') outside a turn: call turn_started first",
    ),
    (
        _turn,
        lambda o: o.message_claimed("m2", "prompt", "x"),  # type: ignore[arg-type]
        "message_claimed('m2', 'prompt'): the kind is 'steering' or 'context'",
    ),
    (
        _turn,
        lambda o: o.message_claimed("m2", "steering", "x", role="system"),
        "message_claimed('m2', 'steering'): role 'system' is 'user', or 'system' for context only",
    ),
    (
        _step,
        lambda o: o.message_claimed("m2", "context", "x"),
        "message_claimed('m2', 'context') inside step 1 of turn 1: claim a step's messages "
        "before its step_started (call step_ended first)",
    ),
    (
        lambda o: None,
        lambda o: o.step_started(),
        "step_started() outside a turn: call turn_started first",
    ),
    (
        _step,
        lambda o: o.step_started(),
        "step_started() while step 1 is open: call step_ended first",
    ),
    (
        _turn,
        lambda o: o.text_streamed("x"),
        "text_streamed() outside a step: call step_started first",
    ),
    (
        _replied,
        lambda o: o.text_streamed("x"),
        "text_streamed() after reply_ended: the step's reply has ended",
    ),
    (_replied, lambda o: o.reply_ended(), "reply_ended() twice in one step: a step has one reply"),
    (
        _step,
        lambda o: o.reply_ended(finish="done"),  # type: ignore[arg-type]
        "reply_ended(finish='done'): finish is one of ('stop', 'tool_calls', 'length')",
    ),
    (
        _step,
        lambda o: o.tool_called("c1", "gate", {}),
        "tool_called('c1') before reply_ended: end the reply first",
    ),
    (
        _replied,
        lambda o: o.tool_answered("c9", "x"),
        "tool_answered('c9'): this step has no such call; call tool_called('c9') first",
    ),
    (
        _turn,
        lambda o: o.tool_interrupted("c9"),
        "tool_interrupted('c9') outside a step: call step_started first",
    ),
    (
        lambda o: None,
        lambda o: o.step_ended(),
        "step_ended() outside a turn: call turn_started first",
    ),
    (
        _step,
        lambda o: o.turn_ended({"kind": "completed"}),
        "turn_ended() while step 1 is open: call step_ended first",
    ),
    (
        _turn,
        lambda o: o.turn_ended({"kind": "finished"}),
        "turn_ended({'kind': 'finished'}): the reason is a TurnEndReason mapping, e.g. "
        "{'kind': 'completed'}",
    ),
]


@pytest.mark.parametrize(("before", "call", "message"), MISUSES, ids=[m for _, _, m in MISUSES])
def test_a_call_out_of_order_is_an_observer_misuse(
    before: Callable[[AgentObserver], None], call: Callable[[AgentObserver], None], message: str
) -> None:
    obs, _ = observer()
    before(obs)
    with pytest.raises(ObserverMisuse) as info:
        call(obs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
    assert "\n" not in message


def test_a_swallowed_misuse_is_raised_again_when_the_suite_looks() -> None:
    obs, _ = observer()
    with pytest.raises(ObserverMisuse):
        obs.step_started()
    with pytest.raises(ObserverMisuse, match="step_started"):
        _ = obs.records
    with pytest.raises(ObserverMisuse, match="step_started"):
        _ = obs.status


def test_a_misuse_in_the_agents_loop_ends_the_run_as_a_crash_not_a_violation() -> None:
    # An adapter that announces each step twice: the machine's run raises the misuse.
    import examples.observed_trio_agents as example

    relay = example.relay_record

    def twice(obs: AgentObserver, record: Any) -> None:
        relay(obs, record)
        if record.type == "step/start":
            obs.step_started()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(example, "relay_record", twice)
        with pytest.raises(Exception) as info:  # noqa: PT011 - checked below
            check_agent_conformance(
                observed_factory, settings=settings(max_examples=5, database=None, deadline=None)
            )
    assert "step_started() while step 1 is open" in repr(info.value) + repr(
        info.value.__cause__
    ) + "".join(repr(e) for e in getattr(info.value, "exceptions", ()))


# -- the built-in Agent, observed -----------------------------------------------------------


async def test_the_observed_surface_takes_its_state_from_the_observer() -> None:
    bus = EventBus()
    heard: list[Event] = []
    bus.connect(heard.append)
    async with observed_factory(ScriptedModel(), [], bus, AgentOptions()) as agent:
        assert isinstance(agent, AgentSurface)
        assert agent.id == "observed" == agent.session.id
        mid = agent.send("hi")
        assert agent.status is AgentStatus.RUNNING
        await agent.wait_idle()
        assert agent.status is AgentStatus.IDLE
        kinds = [r.type for r in agent.session.records]
        assert kinds[:2] == ["turn/start", "user/message"]
        assert agent.session.records[1].data["id"] == mid
        assert kinds[-1] == "turn/end"
        assert getattr(agent, "pending", None) == ()
    assert agent.status is AgentStatus.CLOSED
    assert [type(e).__name__ for e in heard][:3] == ["StatusChanged", "TurnStarted", "StepStarted"]


def test_the_example_adapters_are_observed_agents() -> None:
    assert issubclass(ObservedTrioAgent, ObservedAgent)
    assert issubclass(LoopAgent, ObservedAgent)


def test_an_adapter_without_pending_leaves_it_unchecked() -> None:
    from agent_conformance._observer import _ObservedSurface  # pyright: ignore[reportPrivateUsage]

    class Bare:
        pass

    surface = _ObservedSurface(Bare(), AgentObserver(EventBus()))  # type: ignore[arg-type]
    assert getattr(surface, "pending", None) is None


def test_the_agent_machine_passes_on_the_built_in_agent_observed() -> None:
    check_agent_conformance(
        observed_factory, settings=settings(max_examples=100, database=None, deadline=None)
    )


def test_the_agent_machine_passes_on_a_loop_written_against_the_observer() -> None:
    # Its own queue, history, status transitions and cancel: nothing of trio-agents' Agent.
    check_agent_conformance(
        loop_factory, settings=settings(max_examples=100, database=None, deadline=None)
    )


def test_run_conformance_passes_on_it() -> None:
    (report,) = run_conformance(observed_factory, factory_spec=TARGET, max_examples=40, seed=7)
    assert report.machine == "agent"
    assert report.passed, report.failure
    assert report.examples >= 40


def test_the_cli_checks_it_as_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conformance", "--target", TARGET, "--max-examples", "40", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert TARGET in out


def _code_lines(text: str) -> list[str]:
    lines = (line.split("  #")[0].rstrip() for line in text.splitlines())
    return [line for line in lines if line.strip() and not line.strip().startswith("#")]


def test_the_guides_complete_example_is_the_example_that_passes() -> None:
    root = pathlib.Path(__file__).parent.parent
    guide = (root / "docs" / "conformance.md").read_text()
    section = guide.split("### A complete example", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    example = set(_code_lines((root / "examples" / "observed_trio_agents.py").read_text()))
    assert [line for line in _code_lines(block) if line not in example] == []
