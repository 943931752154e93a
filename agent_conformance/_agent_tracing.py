"""The agent machine's tracer (rules O1, O2): an `AgentTracer` on the built-in agent under
test, its spans kept in memory by the OpenTelemetry SDK, read back as `SpanView`s for the
pure checks of `_trace_checks`. Another implementation's agent is not traced: the tracer is
a component of this runtime, checked on the turns the machine drives."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trio_agents import Agent, AgentTracer

from ._trace_checks import SpanView, TracedNames

__all__ = ["NAMES", "MachineTrace", "trace_of"]

NAMES = TracedNames(agent="conformance", model="scripted")


class MachineTrace:
    """One agent traced into an in-memory exporter."""

    def __init__(self, agent: Agent) -> None:
        # Imported here: the SDK is the `tracing` extra, which a plain install leaves out.
        from opentelemetry.sdk.resources import Resource  # (the extra)
        from opentelemetry.sdk.trace import TracerProvider  # (the extra)
        from opentelemetry.sdk.trace.export import (
            SimpleSpanProcessor,  # (the extra)
            in_memory_span_exporter,  # (the extra)
        )

        InMemorySpanExporter = in_memory_span_exporter.InMemorySpanExporter

        self._exporter = InMemorySpanExporter()
        # An empty resource: the default one runs its detectors in a pool of threads, per
        # provider, which the machine would report as threads of the target.
        provider = TracerProvider(resource=Resource.get_empty())
        provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        tracer = AgentTracer(provider, agent_name=NAMES.agent, request_model=NAMES.model)
        self.stop: Callable[[], None] = tracer.attach(agent)

    def spans(self) -> Sequence[SpanView]:
        """Every span that has ended, oldest first."""
        return [_view(span) for span in self._exporter.get_finished_spans()]


def _view(span: Any) -> SpanView:
    from opentelemetry.trace import StatusCode  # the `tracing` extra: loaded once traced

    parent = span.parent.span_id if span.parent is not None else None
    return SpanView(
        name=span.name,
        span_id=span.context.span_id,
        parent_id=parent,
        attributes=dict(span.attributes or {}),
        error=span.status.status_code is StatusCode.ERROR,
        start=span.start_time or 0,
    )


def trace_of(agent: object) -> MachineTrace | None:
    """A trace of `agent` if it is the built-in `Agent` and the SDK is installed."""
    if not isinstance(agent, Agent):
        return None
    try:
        # Whether the `tracing` extra is installed: a plain install leaves it out.
        import opentelemetry.sdk.trace  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return None
    return MachineTrace(agent)
