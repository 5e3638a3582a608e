"""Traces: OpenTelemetry spans built from the event log's records (the optional ``otel`` extra).

:class:`SpanListener` is an ordinary listener, so spans, metrics and the event log come from one
emission point. Spans follow the GenAI semantic conventions where they apply:

* a run is an ``invoke_agent <agent>`` span (``gen_ai.operation.name=invoke_agent``);
* each action invocation is an ``action <name>`` span under its run;
* each durable call is a span under the action that made it: ``chat <model>`` for a model call
  (``gen_ai.request.model``, ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens`` and
  ``output_tokens``), ``execute_tool <tool>`` for a tool (``gen_ai.tool.name``),
  ``invoke_agent <name>`` for a sub-agent (``gen_ai.agent.name``), ``call <function>`` for any
  other function.

Every action and call span carries ``flink_agents.replayed``: true when its outcome was handed
back from the action-state store instead of being made again. A call's record arrives when it
ends, so its span is started at ``time - latency``. Spans never carry payloads (no secrets);
error messages are the event log's, already scrubbed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flink_agents.api.resources import resolve_env_references
from flink_agents.observability.log_records import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    LogRecord,
    RunFinished,
    RunStarted,
)
from flink_agents.observability.sinks._extra import otel_from_extra

with otel_from_extra():
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from flink_agents.observability.sinks.sink_config import TracesConfig

INSTRUMENTATION_SCOPE = "flink_agents"
REPLAYED = "flink_agents.replayed"
"""Span attribute: the outcome was handed back from the action-state store."""

# call kind -> (gen_ai.operation.name, the attribute naming what it called)
_GEN_AI_CALLS = {
    "model": ("chat", "gen_ai.request.model"),
    "tool": ("execute_tool", "gen_ai.tool.name"),
    "subagent": ("invoke_agent", "gen_ai.agent.name"),
}
_NS_PER_S = 1_000_000_000
_NS_PER_MS = 1_000_000

RunKey = tuple[str, str, int]  # agent, key as JSON, seq
InvocationKey = tuple[str, str]  # event id, action


class SpanListener:
    """Turns event-log records into spans on ``tracer_provider``.

    :meth:`exporting` builds one that sends spans over OTLP/HTTP from a batch processor's
    thread (the engine's loop only creates spans). A provider passed in stays the caller's:
    :meth:`close` flushes it but does not shut it down.
    """

    def __init__(self, tracer_provider: TracerProvider, *, owns_provider: bool = False) -> None:
        self.tracer_provider = tracer_provider
        self._owns_provider = owns_provider
        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE)
        self._runs: dict[RunKey, Span] = {}
        self._actions: dict[RunKey, dict[InvocationKey, Span]] = {}  # open ones, per run

    @classmethod
    def exporting(cls, config: TracesConfig) -> SpanListener:
        """A listener exporting to ``config.endpoint`` (OTLP/HTTP, protobuf)."""
        with otel_from_extra():
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        headers = resolve_env_references(config.headers)
        exporter = OTLPSpanExporter(
            endpoint=config.endpoint, headers=headers, timeout=config.timeout_s
        )
        provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, owns_provider=True)

    def on_record(self, record: LogRecord) -> None:
        run: RunKey = (record.agent, json.dumps(record.key, sort_keys=True), record.seq)
        if isinstance(record, RunStarted):
            self._start_run(run, record)
        elif isinstance(record, RunFinished):
            self._finish_run(run, record)
        elif isinstance(record, ActionStarted):
            span = self._start_action(run, record, _ns(record.time))
            self._actions.setdefault(run, {})[(record.event_id, record.action)] = span
        elif isinstance(record, ActionFinished):
            self._finish_action(run, record)
        elif isinstance(record, CallFinished):
            self._record_call(run, record)

    def close(self) -> None:
        """End what is still open (a run cut short), then flush (and shut down if owned)."""
        for actions in self._actions.values():
            for span in actions.values():
                span.end()
        for span in self._runs.values():
            span.end()
        self._actions.clear()
        self._runs.clear()
        if self._owns_provider:
            self.tracer_provider.shutdown()
        else:
            self.tracer_provider.force_flush()

    def _start_run(self, run: RunKey, record: RunStarted) -> None:
        self._runs[run] = self._tracer.start_span(
            f"invoke_agent {record.agent}",
            context=trace.set_span_in_context(trace.INVALID_SPAN),  # a new trace per run
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": record.agent,
                "flink_agents.run.key": run[1],
                "flink_agents.run.seq": record.seq,
            },
            start_time=_ns(record.time),
        )
        self._actions[run] = {}

    def _finish_run(self, run: RunKey, record: RunFinished) -> None:
        span = self._runs.pop(run, None)
        end = _ns(record.time)
        for action in self._actions.pop(run, {}).values():  # cut short with the run (cancelled)
            action.end(end)
        if span is None:
            return
        if record.status == "failed":
            _fail(span, record.error)
        span.set_attribute("flink_agents.run.status", record.status)
        span.set_attribute("flink_agents.run.outputs", record.outputs)
        span.end(end)

    def _start_action(
        self, run: RunKey, record: ActionStarted | ActionFinished, start_ns: int
    ) -> Span:
        return self._tracer.start_span(
            f"action {record.action}",
            context=self._context(run),
            attributes={
                "flink_agents.action": record.action,
                "flink_agents.event.id": record.event_id,
                "flink_agents.event.type": record.event_type,
            },
            start_time=start_ns,
        )

    def _finish_action(self, run: RunKey, record: ActionFinished) -> None:
        span = self._actions.get(run, {}).pop((record.event_id, record.action), None)
        if span is None:  # a replayed completion has no start: its span is its own
            span = self._start_action(run, record, _ns_before(record.time, record.latency_ms))
        span.set_attribute(REPLAYED, record.replayed)
        span.set_attribute("flink_agents.action.events_sent", record.events_sent)
        if record.error is not None:
            _fail(span, record.error)
        span.end(_ns(record.time))

    def _record_call(self, run: RunKey, record: CallFinished) -> None:
        parent = self._actions.get(run, {}).get((record.event_id, record.action))
        context = trace.set_span_in_context(parent) if parent is not None else self._context(run)
        end = _ns(record.time)
        span = self._tracer.start_span(
            _call_span_name(record),
            context=context,
            attributes=_call_attributes(record),
            start_time=_ns_before(record.time, record.latency_ms),
        )
        if record.outcome == "failed" or (record.outcome == "replayed" and record.error):
            _fail(span, record.error)
        span.end(end)

    def _context(self, run: RunKey) -> Any:
        span = self._runs.get(run)
        return trace.set_span_in_context(span if span is not None else trace.INVALID_SPAN)


def _call_span_name(record: CallFinished) -> str:
    gen_ai = _GEN_AI_CALLS.get(record.call_kind)
    if gen_ai is None:
        return f"call {record.function}"
    return f"{gen_ai[0]} {record.target}" if record.target else gen_ai[0]


def _call_attributes(record: CallFinished) -> Mapping[str, Any]:
    attributes: dict[str, Any] = {
        "flink_agents.call.id": record.call_id,
        "flink_agents.call.kind": record.call_kind,
        "flink_agents.call.function": record.function,
        "flink_agents.call.outcome": record.outcome,
        REPLAYED: record.outcome == "replayed",
    }
    if record.attempts is not None:
        attributes["flink_agents.call.attempts"] = record.attempts
    gen_ai = _GEN_AI_CALLS.get(record.call_kind)
    if gen_ai is not None:
        operation, target_attribute = gen_ai
        attributes["gen_ai.operation.name"] = operation
        if record.target:
            attributes[target_attribute] = record.target
    if record.provider:
        attributes["gen_ai.provider.name"] = record.provider
    if record.usage is not None:
        attributes["gen_ai.usage.input_tokens"] = record.usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = record.usage.output_tokens
    return attributes


def _fail(span: Span, error: str | None) -> None:
    span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    if error:
        span.set_attribute("error.type", error.partition(":")[0])


def _ns(seconds: float) -> int:
    return round(seconds * _NS_PER_S)


def _ns_before(seconds: float, latency_ms: float) -> int:
    """The start (ns) of what ended at ``seconds`` after ``latency_ms``."""
    return _ns(seconds) - round(latency_ms * _NS_PER_MS)
