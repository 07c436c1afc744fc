"""Observability (SPEC §19): OpenTelemetry spans for a run, its slots, tool calls and guards.

`instrument=True` (the global tracer provider), a `TracerProvider`, or a pydantic-ai
`InstrumentationSettings` turns on pydantic-ai's own instrumentation of every agent
run (model requests, tool executions, usage and cost) and adds struckdown's spans
around it:

    struckdown run      struckdown.template, struckdown.segments, struckdown.slots
      struckdown slot   struckdown.slot.key, .type, .cached, .fallback_used, .truncated,
                        .requests, .cost  (one per slot; a guard's is "struckdown guard",
                        with struckdown.guard.triggered and .reason)
        agent run …     pydantic-ai's spans (chat requests, running tools)
          struckdown tool   struckdown.tool.name, .was_cached, .ok

The spans nest through OpenTelemetry's context (a contextvar), so a slot span is the
child of its run's span and a tool span a descendant of its slot's. With
instrumentation off nothing here is imported: the engine holds `None`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

TRACER_NAME = "struckdown"


class Tracing:
    """The tracer struckdown's spans go to, and pydantic-ai's instrumentation capability."""

    def __init__(self, instrument: Any) -> None:
        from opentelemetry import trace
        from pydantic_ai.capabilities.instrumentation import Instrumentation
        from pydantic_ai.models.instrumented import InstrumentationSettings

        from ._version import __version__

        if isinstance(instrument, InstrumentationSettings):  # its tracer (and so its provider) for ours too
            settings = instrument
            self.tracer = instrument.tracer
        else:
            provider = None if instrument is True else instrument
            settings = InstrumentationSettings(tracer_provider=provider)
            self.tracer = (provider or trace.get_tracer_provider()).get_tracer(TRACER_NAME, __version__)
        self.capabilities: tuple[Any, ...] = (Instrumentation(settings=settings),)

    @contextmanager
    def run(self, program: Any) -> Iterator[None]:
        template = program.template
        attributes = {
            "struckdown.template": template.filename or "<string>",
            "struckdown.segments": len(program.segments),
            "struckdown.slots": len(program.keys),
        }
        with self.tracer.start_as_current_span("struckdown run", attributes=attributes):
            yield

    @contextmanager
    def slot(self, key: str, type_name: str, is_guard: bool) -> Iterator[Callable[[Any], None]]:
        """A slot's span; the caller hands the finished SlotResult to the function it yields."""
        name = "struckdown guard" if is_guard else "struckdown slot"
        attributes = {"struckdown.slot.key": key, "struckdown.slot.type": type_name}
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:

            def finished(result: Any) -> None:
                span.set_attribute("struckdown.slot.cached", bool(result.cached))
                span.set_attribute("struckdown.slot.truncated", bool(getattr(result, "truncated", False)))
                fallback = getattr(result, "fallback_used", None)
                if fallback:
                    span.set_attribute("struckdown.slot.fallback_used", str(fallback))
                span.set_attribute("struckdown.slot.requests", result.usage.requests)
                cost = getattr(result.usage, "cost", None)
                if cost is not None:
                    span.set_attribute("struckdown.slot.cost", float(cost))
                if is_guard and isinstance(result.output, dict):
                    span.set_attribute("struckdown.guard.triggered", bool(result.output.get("triggered")))
                    span.set_attribute("struckdown.guard.reason", str(result.output.get("reason") or ""))

            yield finished

    async def tool(self, name: str, call: Callable[[], Awaitable[Any]]) -> Any:
        with self.tracer.start_as_current_span("struckdown tool", attributes={"struckdown.tool.name": name}):
            return await call()

    def tool_outcome(self, was_cached: bool, ok: bool) -> None:
        """Called inside a tool's span once its outcome is known."""
        from opentelemetry import trace

        span = trace.get_current_span()
        span.set_attribute("struckdown.tool.was_cached", was_cached)
        span.set_attribute("struckdown.tool.ok", ok)


def tracing_for(instrument: Any) -> Tracing | None:
    """`instrument=` as a Tracing (None when off)."""
    if instrument is None or instrument is False:
        return None
    return Tracing(instrument)


def _ignore(result: Any) -> None:
    return None


class _Nothing:
    """The span of a run without tracing: a shared, stateless context manager (no generator
    per slot) giving `_ignore`."""

    __slots__ = ()

    def __enter__(self) -> Callable[[Any], None]:
        return _ignore

    def __exit__(self, *exc: Any) -> None:
        return None


_NOTHING = _Nothing()


def _nothing(*args: Any) -> _Nothing:
    return _NOTHING


def run_span(tracing: Tracing | None, program: Any) -> Any:
    """The run's span (a no-op without tracing)."""
    return _nothing() if tracing is None else tracing.run(program)


def slot_span(tracing: Tracing | None, key: str, type_name: str, is_guard: bool) -> Any:
    """A slot's span (a no-op without tracing); yields a function taking the SlotResult."""
    return _nothing() if tracing is None else tracing.slot(key, type_name, is_guard)


def otlp_provider() -> Any:
    """`--otel`: a TracerProvider exporting over OTLP/HTTP, configured by the standard
    OTEL_EXPORTER_OTLP_* (and OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES) variables.
    Needs the `otel` extra."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError(
            f"--otel needs the OpenTelemetry SDK and OTLP exporter ({exc.name} is missing): "
            "pip install 'struckdown[otel]'"
        ) from None
    import os

    service = os.environ.get("OTEL_SERVICE_NAME") or "struckdown"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    timeout = None if os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT") else EXPORT_TIMEOUT_S  # theirs when set
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=timeout)))
    return provider


#: Seconds an OTLP export may take (`--otel`): a missing collector costs at most this at exit.
EXPORT_TIMEOUT_S = 2.0


class ExportProblems:
    """While installed, what OpenTelemetry's exporters log (a collector that does not answer
    prints a line per retry) is kept here instead of printed: the CLI says it once."""

    def __init__(self) -> None:
        import logging

        self.first: str | None = None
        self.logger = logging.getLogger("opentelemetry")
        self.handler = _Keep(self)
        self.propagate = self.logger.propagate

    def __enter__(self) -> ExportProblems:
        self.logger.addHandler(self.handler)
        self.logger.propagate = False
        return self

    def __exit__(self, *exc: Any) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self.propagate


class _Keep(logging.Handler):
    def __init__(self, problems: ExportProblems) -> None:
        super().__init__(logging.WARNING)
        self.problems = problems

    def emit(self, record: logging.LogRecord) -> None:
        if self.problems.first is None:
            self.problems.first = record.getMessage()
