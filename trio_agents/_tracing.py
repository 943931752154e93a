"""OpenTelemetry spans for an agent's turns, steps, model calls and tool calls. No trio import.

The spans follow the OpenTelemetry GenAI semantic conventions (development status; names as
of schema 1.44.0): a turn is an `invoke_agent` span (INTERNAL), each of its steps a
`trio_agents.step` span, the step's model call a `chat` span (CLIENT) and each tool call an
`execute_tool` span (INTERNAL), both children of their step.

A tracer reads what it reports from the session's records, which the agent appends the
moment it decides them (so a span starts and ends exactly then), and one event, ToolStarted,
for when a tool call begins to run (after its write-ahead commit and its approval). It never
changes what the agent does: whatever it raises is logged and dropped (rule O3).

OpenTelemetry is an optional dependency (the `tracing` extra): nothing here imports it until
an `AgentTracer` is made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from ._agent._events import AgentClosed, AgentCreated, CancelRequested, Event, ToolStarted
from ._errors import TracingUnavailableError
from ._store._records import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Record,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ._agent._agent import Agent
    from ._runtime import Runtime
    from ._store._session import Session

__all__ = ["AgentTracer"]

logger = logging.getLogger("trio_agents.tracing")

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.44.0"

# Attribute names: the GenAI conventions' (gen_ai.*, error.type), then our own.
OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
ERROR_TYPE: Final = "error.type"
TURN: Final = "trio_agents.turn"
STEP: Final = "trio_agents.step"
END_REASON: Final = "trio_agents.turn.end_reason"
CANCEL_CAUSE: Final = "trio_agents.cancel.cause"
CANCEL_REASON: Final = "trio_agents.cancel.reason"
TURN_ERROR: Final = "trio_agents.turn.error"
TOOL_STARTED: Final = "trio_agents.tool.started"
STEP_SPAN: Final = "trio_agents.step"
UNFINISHED: Final = "trio_agents.unfinished"


def end_error(reason: Mapping[str, Any]) -> tuple[str, str] | None:
    """The `error.type` and status description of a turn that ended for `reason` (the
    `turn/end` record's), None for a completed turn. Every `error.type` this module reports
    is one of these (D302)."""
    kind = str(reason.get("kind", ""))
    if kind == "completed":
        return None
    if kind == "aborted":
        cause = str(reason.get("cause", ""))
        text = f"aborted ({cause}): {reason.get('reason', '')}"
        if cause == "timeout":
            return "timeout", text
        if cause == "step":
            return "trio_agents.step_aborted", text
        return "cancelled", text
    if kind == "error":
        message = str(reason.get("message", ""))
        # The loop records "ExcType: message": the exception's name is the low-cardinality
        # class the conventions ask for.
        name = message.partition(":")[0].strip()
        return (name if name.isidentifier() else "_OTHER"), message
    if kind in ("max_steps", "closed", "interrupted"):
        return f"trio_agents.{kind}", kind
    return "_OTHER", f"turn ended {kind or 'for an unknown reason'}"


def _headline(content: object, limit: int = 200) -> str:
    """The first line of a tool's error result, cut at `limit` characters: enough to say what
    failed without copying a tool's whole output into the trace (D306)."""
    line = str(content or "").strip().partition("\n")[0]
    return line if len(line) <= limit else f"{line[: limit - 3]}..."


class _Parked:
    """A span whose end time is known but whose status waits for the turn's end reason: the
    chat span of a step cut before its reply, an interrupted tool call, the last step."""

    __slots__ = ("end", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.end = time.time_ns()


class _Spans:
    """What every span of one `AgentTracer` shares: the OpenTelemetry tracer, the attributes
    its settings give, and the span names that follow from them."""

    __slots__ = ("chat_name", "common", "invoke_name", "tracer")

    def __init__(
        self, tracer: Tracer, agent_name: str | None, provider: str | None, model: str | None
    ) -> None:
        self.tracer = tracer
        common: dict[str, str] = {}
        if agent_name:
            common[AGENT_NAME] = agent_name
        if provider:
            common[PROVIDER] = provider
        if model:
            common[REQUEST_MODEL] = model
        self.common: Mapping[str, str] = common
        self.invoke_name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        self.chat_name = f"chat {model}" if model else "chat"

    def tool_name(self, tool: str) -> str:
        return f"execute_tool {tool}" if tool else "execute_tool"


class _AgentTrace:
    """The open spans of one agent, driven by its session's records and its ToolStarted."""

    def __init__(self, spans: _Spans, agent_id: str, session: Session) -> None:
        self._tracer = spans
        self._agent_id = agent_id
        self.session = session
        # Records before the tracer attached belong to turns it did not see start.
        self._seen = len(session)
        self._turn: Span | None = None
        self._step: Span | None = None
        self._chat: Span | None = None
        self._tools: dict[str, Span] = {}
        self._names: dict[str, str] = {}
        self._parked: list[_Parked] = []
        self._done = False

    # -- inputs, each contained (rule O3) ----------------------------------------------

    def on_record(self, _record: Record) -> None:
        """Session observer. Reads every record not yet seen, not only this one: a store
        observer that raised before ours was called made us miss earlier ones."""
        try:
            self._catch_up()
        except Exception:
            logger.exception("tracing agent %r failed on a record; ignored", self._agent_id)

    def on_event(self, event: Event) -> None:
        """Event listener for this agent's events."""
        try:
            self._catch_up()  # the records the event follows come first
            if isinstance(event, ToolStarted):
                self._tool_started(event)
            elif isinstance(event, CancelRequested) and self._turn is not None:
                self._turn.add_event(
                    "trio_agents.cancel_requested",
                    {CANCEL_CAUSE: event.cause, CANCEL_REASON: event.reason},
                )
        except Exception:
            logger.exception("tracing agent %r failed on %r; ignored", self._agent_id, event)

    def finish(self) -> None:
        """Read what is left, then end every span still open (D303). Idempotent."""
        if self._done:
            return
        self._done = True
        try:
            self._catch_up()
        except Exception:
            logger.exception("tracing agent %r failed while finishing", self._agent_id)
        try:
            self._end_turn(
                (UNFINISHED, "tracing stopped before the turn ended (detached or closed)")
            )
        except Exception:
            logger.exception("tracing agent %r failed to end its spans", self._agent_id)

    # -- records -------------------------------------------------------------------------

    def _catch_up(self) -> None:
        if self._done and self._turn is None:
            return
        records = self.session.records_since(self._seen)
        self._seen += len(records)
        for record in records:
            # One record at a time: a span that failed to start must not cost the records
            # after it (a turn/end among them would leave its turn open).
            try:
                self._record(record)
            except Exception:
                logger.exception(
                    "tracing agent %r failed on a %s record; ignored", self._agent_id, record.type
                )

    def _record(self, record: Record) -> None:
        data = record.data
        kind = record.type
        if kind == TURN_START:
            if self._turn is not None:  # a turn/end we never saw: end its spans now
                self._end_turn((UNFINISHED, "the turn's end was not recorded"))
            self._turn = self._start(
                self._tracer.invoke_name,
                None,
                "INTERNAL",
                {OPERATION: "invoke_agent", TURN: int(data["turn"])},
            )
        elif self._turn is None:
            return  # part of a turn that started before we attached
        elif kind == STEP_START:
            self._settle_parked(None)  # the previous step went on: it ended well
            step = int(data["step"])
            turn = int(data["turn"])
            self._step = self._start(STEP_SPAN, self._turn, "INTERNAL", {TURN: turn, STEP: step})
            self._chat = self._start(
                self._tracer.chat_name, self._step, "CLIENT", {OPERATION: "chat", STEP: step}
            )
        elif kind == ASSISTANT_MESSAGE and self._chat is not None:
            chat, self._chat = self._chat, None
            if data.get("interrupted"):
                self._parked.append(_Parked(chat))
                return
            chat.set_attribute(FINISH_REASONS, [str(data.get("finish", "stop"))])
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                tokens = cast("Mapping[str, int]", usage)
                chat.set_attribute(INPUT_TOKENS, int(tokens.get("input_tokens", 0)))
                chat.set_attribute(OUTPUT_TOKENS, int(tokens.get("output_tokens", 0)))
            chat.end()
        elif kind == TOOL_CALL:
            self._names[str(data["call_id"])] = str(data["name"])
        elif kind == TOOL_RESULT:
            self._tool_result(data)
        elif kind == STEP_END:
            if self._chat is not None:  # cut before any reply: cancelled, timed out, raised
                self._parked.append(_Parked(self._chat))
                self._chat = None
            for span in self._tools.values():  # defensive: every call has a result by now
                self._parked.append(_Parked(span))
            self._tools.clear()
            if self._step is not None:
                self._parked.append(_Parked(self._step))
                self._step = None
        elif kind == TURN_END:
            raw = data.get("reason")
            empty: Mapping[str, Any] = {}
            reason = cast("Mapping[str, Any]", raw) if isinstance(raw, Mapping) else empty
            self._end_turn(end_error(reason), reason)

    def _tool_started(self, event: ToolStarted) -> None:
        if self._step is None or event.call_id in self._tools:
            return
        self._tools[event.call_id] = self._tool_span(event.call_id, event.tool, started=True)

    def _tool_span(self, call_id: str, name: str, *, started: bool) -> Span:
        span = self._start(
            self._tracer.tool_name(name),
            self._step if self._step is not None else self._turn,
            "INTERNAL",
            {
                OPERATION: "execute_tool",
                TOOL_NAME: name,
                TOOL_CALL_ID: call_id,
                TOOL_TYPE: "function",
                TOOL_STARTED: started,
            },
        )
        return span

    def _tool_result(self, data: Mapping[str, Any]) -> None:
        call_id = str(data["call_id"])
        span = self._tools.pop(call_id, None)
        if span is None:
            # Never started: rejected by its approval, or interrupted while waiting for its
            # commit or its approver. Still a span, so every call the model made is seen.
            span = self._tool_span(call_id, self._names.get(call_id, ""), started=False)
        if data.get("interrupted"):
            self._parked.append(_Parked(span))  # why: the turn's end will say
            return
        if data.get("rejected"):
            self._fail(span, "trio_agents.rejected", _headline(data.get("content")))
        elif data.get("is_error"):
            self._fail(span, "trio_agents.tool_error", _headline(data.get("content")))
        span.end()

    # -- ending ------------------------------------------------------------------------

    def _end_turn(
        self, error: tuple[str, str] | None, reason: Mapping[str, Any] | None = None
    ) -> None:
        """End the turn's span and everything under it still open or parked, with the
        turn's status: every span of a turn has ended once this returns (rule O2)."""
        for span in (*self._tools.values(), self._chat, self._step):
            if span is not None:
                self._parked.append(_Parked(span))
        self._tools.clear()
        self._chat = self._step = None
        self._names.clear()
        # A turn that reached max_steps ended after a step that went well: only the turn
        # itself did not complete.
        limited = reason is not None and reason.get("kind") == "max_steps"
        self._settle_parked(None if limited else error)
        turn, self._turn = self._turn, None
        if turn is None:
            return
        if reason is not None:
            kind = str(reason.get("kind", ""))
            turn.set_attribute(END_REASON, kind)
            if kind == "aborted":
                turn.set_attribute(CANCEL_CAUSE, str(reason.get("cause", "")))
                turn.set_attribute(CANCEL_REASON, str(reason.get("reason", "")))
            elif kind == "error":
                turn.set_attribute(TURN_ERROR, str(reason.get("message", "")))
        if error is not None:
            self._fail(turn, *error)
        turn.end()

    def _settle_parked(self, error: tuple[str, str] | None) -> None:
        parked, self._parked = self._parked, []
        for item in parked:
            if error is not None:
                self._fail(item.span, *error)
            item.span.end(end_time=item.end)

    def _fail(self, span: Span, error_type: str, description: str) -> None:
        # Imported here: OpenTelemetry is optional, loaded only once a tracer exists.
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, description))

    def _start(
        self, name: str, parent: Span | None, kind: str, attributes: Mapping[str, Any]
    ) -> Span:
        # Imported here: OpenTelemetry is optional, loaded only once a tracer exists.
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        given = {
            **self._tracer.common,
            AGENT_ID: self._agent_id,
            CONVERSATION: self.session.id,
            **attributes,
        }
        return self._tracer.tracer.start_span(
            name, context=context, kind=trace.SpanKind[kind], attributes=given
        )


class AgentTracer:
    """Turns agents' turns, steps, model calls and tool calls into OpenTelemetry spans, after
    the GenAI semantic conventions (docs/contract.md, Tracing).

    `tracer_provider` is the provider to take a tracer from (None: the global one).
    `agent_name` names the agents (`gen_ai.agent.name`, and the turn span `invoke_agent
    NAME`); `provider_name` and `request_model` say which provider and model the agents'
    model calls go to (`gen_ai.provider.name`, `gen_ai.request.model`, and the chat span
    `chat MODEL`), when known. Constructing one raises TracingUnavailableError if the
    OpenTelemetry API is not installed (the `tracing` extra).
    """

    __slots__ = ("_spans", "_traces")

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        agent_name: str | None = None,
        provider_name: str | None = None,
        request_model: str | None = None,
    ) -> None:
        try:
            # Imported here, so that the runtime never needs OpenTelemetry (an extra).
            from opentelemetry import trace
        except ImportError as exc:
            raise TracingUnavailableError(
                "AgentTracer needs the OpenTelemetry API, which is not installed: "
                "pip install 'trio-agents[tracing]'"
            ) from exc
        tracer = trace.get_tracer(
            "trio_agents", tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )
        self._spans = _Spans(tracer, agent_name, provider_name, request_model)
        self._traces: dict[str, _AgentTrace] = {}

    def attach(self, agent: Agent) -> Callable[[], None]:
        """Trace `agent`'s turns from its next record on; returns a function that stops.

        Stopping (idempotent) ends every span still open, with `error.type`
        `trio_agents.unfinished`: call it after the agent has closed (after `open_agent`'s
        block) and every turn's spans have ended by themselves. Raises ValueError if this
        tracer already traces an agent of that id. Never blocks.
        """
        trace = self._begin(agent.id, agent.session)
        agent_id = agent.id

        def on_event(event: Event) -> None:
            if getattr(event, "agent_id", None) == agent_id:
                trace.on_event(event)

        disconnect = agent.events.connect(on_event)
        return self._stopper(agent_id, trace, disconnect)

    def attach_runtime(self, runtime: Runtime) -> Callable[[], None]:
        """Trace every agent `runtime` publishes from now on, each from its first record,
        until it closes (its spans end as it does); returns a function that stops, ending
        what is still open as `attach`'s does. Never blocks."""
        stoppers: dict[str, Callable[[], None]] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, AgentCreated):
                session = runtime.sessions.get(event.agent_id)
                if session is not None and event.agent_id not in self._traces:
                    begun = self._begin(event.agent_id, session)
                    stoppers[event.agent_id] = self._stopper(event.agent_id, begun, None)
                return
            agent_id = getattr(event, "agent_id", None)
            trace = self._traces.get(agent_id) if isinstance(agent_id, str) else None
            if trace is not None and agent_id in stoppers:
                trace.on_event(event)
            if isinstance(event, AgentClosed) and event.agent_id in stoppers:
                stoppers.pop(event.agent_id)()

        disconnect = runtime.events.connect(on_event)

        def stop() -> None:
            disconnect()
            for stopper in list(stoppers.values()):
                stopper()
            stoppers.clear()

        return stop

    def _begin(self, agent_id: str, session: Session) -> _AgentTrace:
        if agent_id in self._traces:
            raise ValueError(f"this AgentTracer already traces agent {agent_id!r}")
        trace = _AgentTrace(self._spans, agent_id, session)
        self._traces[agent_id] = trace
        return trace

    def _stopper(
        self, agent_id: str, trace: _AgentTrace, disconnect: Callable[[], None] | None
    ) -> Callable[[], None]:
        # The session observer starts last, after everything that could raise.
        unobserve = trace.session.observe(trace.on_record)

        def stop() -> None:
            if disconnect is not None:
                disconnect()
            unobserve()
            trace.finish()
            if self._traces.get(agent_id) is trace:
                del self._traces[agent_id]

        return stop
