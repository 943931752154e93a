"""AgentTracer (rules O1-O3): the spans of real turns, read back from the OpenTelemetry SDK's
in-memory exporter. The turns run on trio's MockClock with scripted models, so every case is
deterministic and takes milliseconds; the example program runs as a real process."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from trio_agents import (
    AgentOptions,
    AgentTracer,
    Approval,
    ApprovalPolicy,
    ApprovalRequest,
    Decision,
    EventBus,
    Finish,
    MemoryStore,
    PersistenceError,
    Record,
    Session,
    TextDelta,
    ToolCall,
    TracingUnavailableError,
    Usage,
    open_agent,
    open_runtime,
)
from trio_agents.testing import (
    HOLD,
    EchoTool,
    GateTool,
    ScriptedModel,
    ScriptedStep,
    reply,
    tool_step,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exported = InMemorySpanExporter()
    yield exported
    exported.clear()


def provider_for(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> Mapping[str, Any]:
    assert span.attributes is not None
    return span.attributes


def parent_of(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(
        s for s in spans if s.context is not None and s.context.span_id == span.parent.span_id
    )


def assert_tree_closed(spans: tuple[ReadableSpan, ...]) -> None:
    """Every parent of an exported span was exported too (so it ended), and each child lies
    within its parent's time."""
    for span in spans:
        parent = parent_of(span, spans)
        if parent is not None:
            assert parent.start_time is not None
            assert parent.end_time is not None
            assert span.start_time is not None
            assert span.end_time is not None
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time


async def test_O1_a_two_step_turn_cancelled_in_its_second_step(
    exporter: InMemorySpanExporter,
) -> None:
    """Acceptance 4: step 1 calls a tool, step 2 is cancelled while its reply streams."""
    model = ScriptedModel(
        [
            tool_step(ToolCall("c1", "echo", {"text": "hi"})),
            ScriptedStep((TextDelta("half a "), HOLD, TextDelta("reply"), Finish("stop"))),
        ]
    )
    tracer = AgentTracer(
        provider_for(exporter), agent_name="helper", provider_name="openai", request_model="m1"
    )
    async with open_agent(model, tools=[EchoTool()], session="s-cancel") as agent:
        stop = tracer.attach(agent)
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1  # the second step's reply is half streamed
        assert exporter.get_finished_spans() != ()  # step 1's spans are out already
        assert agent.cancel("the user pressed stop")
        await agent.wait_idle()
    stop()

    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == sorted(
        [
            "invoke_agent helper",
            "trio_agents.step",
            "chat m1",
            "execute_tool echo",
            "trio_agents.step",
            "chat m1",
        ]
    )
    assert_tree_closed(spans)
    (turn,) = by_name(spans, "invoke_agent helper")
    assert turn.parent is None
    assert turn.kind is SpanKind.INTERNAL
    assert attrs(turn)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(turn)["gen_ai.agent.id"] == "s-cancel"
    assert attrs(turn)["gen_ai.conversation.id"] == "s-cancel"
    assert attrs(turn)["gen_ai.agent.name"] == "helper"
    assert attrs(turn)["gen_ai.provider.name"] == "openai"
    assert attrs(turn)["trio_agents.turn"] == 1
    assert attrs(turn)["trio_agents.turn.end_reason"] == "aborted"
    assert attrs(turn)["trio_agents.cancel.cause"] == "user"
    assert attrs(turn)["trio_agents.cancel.reason"] == "the user pressed stop"
    assert attrs(turn)["error.type"] == "cancelled"
    assert turn.status.status_code is StatusCode.ERROR
    assert [e.name for e in turn.events] == ["trio_agents.cancel_requested"]

    step1, step2 = sorted(
        by_name(spans, "trio_agents.step"), key=lambda s: attrs(s)["trio_agents.step"]
    )
    assert parent_of(step1, spans) is turn
    assert parent_of(step2, spans) is turn
    assert step1.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs(step1)
    assert step2.status.status_code is StatusCode.ERROR
    assert attrs(step2)["error.type"] == "cancelled"

    chat1, chat2 = sorted(by_name(spans, "chat m1"), key=lambda s: attrs(s)["trio_agents.step"])
    assert parent_of(chat1, spans) is step1
    assert parent_of(chat2, spans) is step2
    assert chat1.kind is SpanKind.CLIENT
    assert attrs(chat1)["gen_ai.operation.name"] == "chat"
    assert attrs(chat1)["gen_ai.request.model"] == "m1"
    assert attrs(chat1)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat1.status.status_code is StatusCode.UNSET
    assert chat2.status.status_code is StatusCode.ERROR
    assert attrs(chat2)["error.type"] == "cancelled"
    assert "gen_ai.response.finish_reasons" not in attrs(chat2)

    (tool,) = by_name(spans, "execute_tool echo")
    assert parent_of(tool, spans) is step1
    assert attrs(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool)["gen_ai.tool.name"] == "echo"
    assert attrs(tool)["gen_ai.tool.call.id"] == "c1"
    assert attrs(tool)["trio_agents.tool.started"] is True
    assert tool.status.status_code is StatusCode.UNSET
    assert chat1.end_time is not None
    assert tool.start_time is not None
    assert chat1.end_time <= tool.start_time  # the tool ran after the reply was read


async def test_a_completed_turn_reports_usage_and_no_error(
    exporter: InMemorySpanExporter,
) -> None:
    model = ScriptedModel(
        [ScriptedStep((TextDelta("hello"), Finish("stop", Usage(input_tokens=7, output_tokens=3))))]
    )
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model) as agent:
        stop = tracer.attach(agent)
        agent.send("hi")
        await agent.wait_idle()
        spans = exporter.get_finished_spans()  # all ended before the agent even closed
    stop()
    assert sorted(s.name for s in spans) == ["chat", "invoke_agent", "trio_agents.step"]
    assert exporter.get_finished_spans() == spans  # stopping ended nothing more
    assert_tree_closed(spans)
    (turn,) = by_name(spans, "invoke_agent")
    assert attrs(turn)["trio_agents.turn.end_reason"] == "completed"
    assert turn.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs(turn)
    assert "gen_ai.provider.name" not in attrs(turn)
    (chat,) = by_name(spans, "chat")
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 7
    assert attrs(chat)["gen_ai.usage.output_tokens"] == 3


async def test_O2_a_step_timeout_ends_the_running_tool_span_as_a_timeout(
    exporter: InMemorySpanExporter,
) -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(ToolCall("g1", "gate", {}))])
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model, tools=[gate], options=AgentOptions(step_timeout=5)) as agent:
        stop = tracer.attach(agent)
        agent.send("wait forever")
        await agent.wait_idle()  # the autojump clock jumps to the step's deadline
    stop()
    assert gate.cancelled == 1
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat",
        "execute_tool gate",
        "invoke_agent",
        "trio_agents.step",
    ]
    assert_tree_closed(spans)
    (turn,) = by_name(spans, "invoke_agent")
    assert attrs(turn)["trio_agents.cancel.cause"] == "timeout"
    assert attrs(turn)["trio_agents.cancel.reason"] == "step-timeout"
    (tool,) = by_name(spans, "execute_tool gate")
    (step,) = by_name(spans, "trio_agents.step")
    for span in (turn, step, tool):
        assert attrs(span)["error.type"] == "timeout", span.name
        assert span.status.status_code is StatusCode.ERROR
    (chat,) = by_name(spans, "chat")
    assert chat.status.status_code is StatusCode.UNSET  # the reply was read in full


async def test_closing_the_agent_mid_tool_ends_every_span_closed(
    exporter: InMemorySpanExporter,
) -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(ToolCall("g1", "gate", {}))])
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model, tools=[gate]) as agent:
        stop = tracer.attach(agent)
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1
    stop()
    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    assert_tree_closed(spans)
    (turn,) = by_name(spans, "invoke_agent")
    assert attrs(turn)["trio_agents.turn.end_reason"] == "closed"
    assert {attrs(s).get("error.type") for s in spans if s.name != "chat"} == {"trio_agents.closed"}


async def test_stopping_mid_turn_ends_the_open_spans_unfinished(
    exporter: InMemorySpanExporter,
) -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(ToolCall("g1", "gate", {}))])
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model, tools=[gate]) as agent:
        stop = tracer.attach(agent)
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        stop()
        spans = exporter.get_finished_spans()
        assert sorted(s.name for s in spans) == [
            "chat",
            "execute_tool gate",
            "invoke_agent",
            "trio_agents.step",
        ]
        for span in spans:
            if span.name != "chat":
                assert attrs(span)["error.type"] == "trio_agents.unfinished", span.name
        stop()  # idempotent
        gate.release()
        await agent.wait_idle()
    assert exporter.get_finished_spans() == spans  # nothing after stopping


async def test_a_turn_that_reaches_max_steps_fails_alone(exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel([tool_step(ToolCall("c1", "echo", {"text": "again"}))])
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model, tools=[EchoTool()], options=AgentOptions(max_steps=1)) as agent:
        stop = tracer.attach(agent)
        agent.send("loop")
        await agent.wait_idle()
    stop()
    spans = exporter.get_finished_spans()
    (turn,) = by_name(spans, "invoke_agent")
    assert attrs(turn)["error.type"] == "trio_agents.max_steps"
    assert turn.status.status_code is StatusCode.ERROR
    others = [s for s in spans if s is not turn]
    assert len(others) == 3
    assert all(s.status.status_code is StatusCode.UNSET for s in others)


async def test_a_rejected_or_failing_tool_call_is_an_error_span(
    exporter: InMemorySpanExporter,
) -> None:
    model = ScriptedModel([tool_step(ToolCall("u1", "nope", {}))])
    tracer = AgentTracer(provider_for(exporter))
    async with open_agent(model) as agent:
        stop = tracer.attach(agent)
        agent.send("call a tool that is not there")
        await agent.wait_idle()
    stop()
    (tool,) = by_name(exporter.get_finished_spans(), "execute_tool nope")
    assert attrs(tool)["error.type"] == "trio_agents.tool_error"
    assert tool.status.status_code is StatusCode.ERROR
    assert "unknown tool" in (tool.status.description or "")


async def test_records_a_failing_store_kept_from_the_tracer_are_read_when_it_stops(
    exporter: InMemorySpanExporter,
) -> None:
    """A store observer that raises keeps later observers (the tracer's) from a record: the
    turn's end is then read from the session at the agent's next event (here its close) or
    when tracing stops, so its spans still end, with the recorded reason."""
    session = Session("s-broken")

    def failing_store(record: Record) -> None:
        if record.type == "turn/end":
            raise OSError("disk full")

    session.observe(failing_store)
    tracer = AgentTracer(provider_for(exporter))
    stops: list[Callable[[], None]] = []

    async def run_one_turn() -> None:
        async with open_agent(ScriptedModel(), session=session) as agent:
            stops.append(tracer.attach(agent))
            agent.send("hi")
            await agent.wait_idle()

    with pytest.raises(ExceptionGroup) as info:
        await run_one_turn()
    assert info.group_contains(PersistenceError)
    (stop,) = stops
    stop()
    (turn,) = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert attrs(turn)["trio_agents.turn.end_reason"] == "completed"
    assert len(exporter.get_finished_spans()) == 3


async def _reject(request: ApprovalRequest) -> Decision:
    await trio.lowlevel.checkpoint()
    return Decision("reject_once", by="test", note="not now")


async def test_a_call_its_approval_rejects_is_a_span_that_never_started(
    exporter: InMemorySpanExporter,
) -> None:
    echo = EchoTool()
    model = ScriptedModel([tool_step(ToolCall("r1", "echo", {"text": "x"})), reply("ok")])
    tracer = AgentTracer(provider_for(exporter))
    approval = Approval(ApprovalPolicy(), _reject)
    async with open_agent(model, tools=[echo], approval=approval) as agent:
        stop = tracer.attach(agent)
        agent.send("try")
        await agent.wait_idle()
    stop()
    (tool,) = by_name(exporter.get_finished_spans(), "execute_tool echo")
    assert attrs(tool)["trio_agents.tool.started"] is False
    assert attrs(tool)["error.type"] == "trio_agents.rejected"
    (turn,) = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert attrs(turn)["trio_agents.turn.end_reason"] == "completed"


class _StepsFail:
    """A tracer whose step spans fail to start; the rest go to the SDK's."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "trio_agents.step":
            raise RuntimeError("no step spans today")
        return self._real.start_span(name, *args, **kwargs)


class _StepsFailProvider:
    def __init__(self, real: TracerProvider) -> None:
        self._real = real

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _StepsFail(self._real.get_tracer(*args, **kwargs))


async def test_a_span_that_fails_to_start_costs_no_other_span(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([tool_step(ToolCall("c1", "echo", {"text": "hi"})), reply("done")])
    tracer = AgentTracer(_StepsFailProvider(provider_for(exporter)))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with caplog.at_level(logging.ERROR, logger="trio_agents.tracing"):
        async with open_agent(model, tools=[EchoTool()]) as agent:
            stop = tracer.attach(agent)
            agent.send("go")
            await agent.wait_idle()
            spans = exporter.get_finished_spans()
        stop()
    (turn,) = by_name(spans, "invoke_agent")  # ended with its turn, not when tracing stopped
    assert attrs(turn)["trio_agents.turn.end_reason"] == "completed"
    assert "error.type" not in attrs(turn)
    assert by_name(spans, "trio_agents.step") == []
    assert any("no step spans today" in str(r.exc_info) for r in caplog.records)


class _BrokenTracer:
    def start_span(self, *args: object, **kwargs: object) -> object:
        raise RuntimeError("the exporter is broken")


class _BrokenProvider:
    def get_tracer(self, *args: object, **kwargs: object) -> object:
        return _BrokenTracer()


async def test_O3_a_failing_tracer_never_breaks_the_agent(caplog: pytest.LogCaptureFixture) -> None:
    """Rule O3: the same turn as the acceptance case completes, its records intact."""
    model = ScriptedModel([tool_step(ToolCall("c1", "echo", {"text": "hi"}))])
    tracer = AgentTracer(_BrokenProvider())  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with caplog.at_level(logging.ERROR, logger="trio_agents.tracing"):
        async with open_agent(model, tools=[EchoTool()]) as agent:
            stop = tracer.attach(agent)
            agent.send("go")
            await agent.wait_idle()
            records = [r.type for r in agent.session.records]
        stop()
    assert records[-1] == "turn/end"
    assert agent.session.records[-1].data["reason"] == {"kind": "completed"}
    assert "tool/result" in records
    assert any("the exporter is broken" in str(r.exc_info) for r in caplog.records)


async def test_a_runtime_traces_every_agent_it_publishes(exporter: InMemorySpanExporter) -> None:
    tracer = AgentTracer(provider_for(exporter))
    async with open_runtime(MemoryStore()) as runtime:
        stop = tracer.attach_runtime(runtime)
        registry = runtime.agents_for(runtime)
        for name in ("a1", "a2"):
            handle = await registry.create(
                model=ScriptedModel([tool_step(ToolCall("c1", "echo", {"text": name}))]),
                tools=[EchoTool()],
                session_id=name,
            )
            handle.agent.send("go")
            await handle.agent.wait_idle()
            await handle.aclose()
        stop()
    spans = exporter.get_finished_spans()
    turns = by_name(spans, "invoke_agent")
    assert sorted(attrs(t)["gen_ai.agent.id"] for t in turns) == ["a1", "a2"]
    assert len(by_name(spans, "execute_tool echo")) == 2
    assert_tree_closed(spans)


async def test_closing_a_runtime_mid_tool_ends_its_agents_spans_closed(
    exporter: InMemorySpanExporter,
) -> None:
    gate = GateTool()
    tracer = AgentTracer(provider_for(exporter))
    async with open_runtime(MemoryStore()) as runtime:
        stop = tracer.attach_runtime(runtime)
        handle = await runtime.agents_for(runtime).create(
            model=ScriptedModel([tool_step(ToolCall("g1", "gate", {}))]), tools=[gate]
        )
        handle.agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1
    spans = exporter.get_finished_spans()  # the runtime's close ended them, not stop()
    stop()
    assert exporter.get_finished_spans() == spans
    assert sorted(s.name for s in spans) == [
        "chat",
        "execute_tool gate",
        "invoke_agent",
        "trio_agents.step",
    ]
    assert_tree_closed(spans)
    assert {attrs(s).get("error.type") for s in spans if s.name != "chat"} == {"trio_agents.closed"}


def test_without_opentelemetry_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(TracingUnavailableError) as info:
        AgentTracer()
    assert "pip install 'trio-agents[tracing]'" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_a_second_attach_of_one_agent_is_refused() -> None:
    async def main() -> None:
        tracer = AgentTracer(TracerProvider())
        async with open_agent(ScriptedModel(), events=EventBus()) as agent:
            stop = tracer.attach(agent)
            with pytest.raises(ValueError, match="already traces agent"):
                tracer.attach(agent)
            stop()
            tracer.attach(agent)()  # once stopped, it may be traced again

    trio.run(main)


@pytest.mark.subprocess
def test_the_example_prints_its_spans_and_trio_agents_alone_does_not_import_opentelemetry() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tracing.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    for name in ('"invoke_agent coder"', '"chat scripted"', '"execute_tool echo"'):
        assert f'"name": {name}' in done.stdout, done.stdout
    assert '"trio_agents.turn.end_reason": "completed"' in done.stdout
    bare = subprocess.run(
        [sys.executable, "-c", "import sys, trio_agents; print('opentelemetry' in sys.modules)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bare.stdout.strip() == "False", bare.stderr
