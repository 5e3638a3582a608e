"""Traces: OpenTelemetry spans of the event log (GenAI semantic conventions), a run's tree of
action and call spans, ``flink_agents.replayed`` after a crash and replay through the
action-state store, exported to an in-memory exporter and over OTLP/HTTP to a local receiver."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.weather import build_agent
from flink_agents.observability import EventLogConfig
from flink_agents.observability.sinks._extra import OTEL_EXTRA, otel_from_extra
from flink_agents.observability.sinks.otel import REPLAYED, SpanListener
from flink_agents.observability.sinks.sink_config import TracesConfig
from flink_agents.runtime import run_local
from tests.observability import agents
from tests.observability.agents import KEY_VARIABLE, SECRET
from tests.observability.otlp import Receiver
from tests.observability.scenarios import crash_and_replay

pytestmark = pytest.mark.usefixtures("fresh_probe")


@pytest.fixture
def exported() -> Iterator[tuple[SpanListener, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield SpanListener(provider), exporter
    provider.shutdown()


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    found = [
        s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def test_a_run_is_an_agent_span_with_action_spans_and_genai_call_spans_under_them(exported):
    listener, exporter = exported
    run_local(build_agent(), [{"city": "Oslo"}], key="city", listeners=[listener])
    listener.close()
    spans = list(exporter.get_finished_spans())

    [run] = [s for s in spans if s.parent is None]
    assert run.name == "invoke_agent weather_react"
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["flink_agents.run.key"] == '"Oslo"'
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    actions = _children(spans, run)
    assert [a.name for a in actions] == [
        "action react_start",
        "action chat_action",
        "action tool_call_action",
        "action chat_action",
        "action tool_call_action",
        "action chat_action",
        "action react_finish",
    ]
    calls = [(a.name, c) for a in actions for c in _children(spans, a)]
    assert [(a, c.name) for a, c in calls] == [
        ("action chat_action", "chat scripted-1"),
        ("action tool_call_action", "execute_tool get_temperature"),
        ("action chat_action", "chat scripted-1"),
        ("action tool_call_action", "execute_tool get_advice"),
        ("action chat_action", "chat scripted-1"),
    ]
    model = calls[0][1].attributes
    assert model["gen_ai.operation.name"] == "chat"
    assert model["gen_ai.request.model"] == "scripted-1"
    assert model["gen_ai.provider.name"] == "ScriptedChatModelConnection"
    assert model[REPLAYED] is False
    tool = calls[1][1].attributes
    assert (tool["gen_ai.operation.name"], tool["gen_ai.tool.name"]) == (
        "execute_tool",
        "get_temperature",
    )
    for _, call in calls:  # a call's span lies within its action's
        [parent] = [a for a in actions if a.context.span_id == call.parent.span_id]
        assert parent.start_time <= call.start_time <= call.end_time <= parent.end_time


def test_model_spans_carry_token_usage_and_never_a_payload(exported, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    listener, exporter = exported
    run_local(agents.leaky_agent(), [{"k": 1, "q": "hi"}], key="k", listeners=[listener])
    [call] = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
    assert call.attributes["gen_ai.usage.input_tokens"] == 7
    assert call.attributes["gen_ai.usage.output_tokens"] == 3
    assert call.attributes["gen_ai.provider.name"] == "LeakyConnection"
    everything = repr([(s.name, dict(s.attributes)) for s in exporter.get_finished_spans()])
    assert SECRET not in everything


def test_a_failed_call_and_run_are_error_spans(exported):
    listener, exporter = exported
    run_local(agents.failing_agent(), [{"k": 1, "q": "why"}], key="k", listeners=[listener])
    failed = {s.name: s for s in exporter.get_finished_spans() if not s.status.is_ok}
    assert set(failed) == {
        "invoke_agent failing",
        "action explode",
        "call tests.observability.agents:_fail",
    }
    call = failed["call tests.observability.agents:_fail"]
    assert call.status.description == "ValueError: cannot answer 'why'"
    assert call.attributes["error.type"] == "ValueError"


def _calls_by_trace(spans: list[Any]) -> list[list[tuple[str, bool]]]:
    """Per run span (in start order): its calls' ``(flink_agents.call.id, replayed)``."""
    runs = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time)
    return [
        [
            (c.attributes["flink_agents.call.id"], c.attributes[REPLAYED])
            for a in _children(spans, run)
            for c in _children(spans, a)
        ]
        for run in runs
    ]


def test_after_a_crash_the_replayed_calls_are_marked_replayed(exported):
    listener, exporter = exported
    crash_and_replay(listener)
    spans = list(exporter.get_finished_spans())
    assert _calls_by_trace(spans) == [
        [("#0", False), ("#1", False)],  # the third never finished: no span
        [("#0", True), ("#1", True), ("#2", False)],
    ]
    runs = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time)
    assert [r.attributes["flink_agents.run.status"] for r in runs] == ["cancelled", "succeeded"]


# --- over OTLP/HTTP --------------------------------------------------------------------------


def test_spans_are_exported_over_otlp_http_with_their_tree_and_replayed_flag(
    otlp_receiver: Receiver,
):
    listener = SpanListener.exporting(
        TracesConfig(endpoint=otlp_receiver.url, service_name="tickets")
    )
    crash_and_replay(listener)
    listener.close()  # flushes the batch processor

    assert otlp_receiver.paths and set(otlp_receiver.paths) == {"/v1/traces"}
    assert otlp_receiver.services() == {"tickets"}
    spans = otlp_receiver.spans()

    by_id = {s.span_id: s for s in spans}
    runs = sorted((s for s in spans if not s.parent_span_id), key=lambda s: s.start_time_unix_nano)
    assert [r.name for r in runs] == ["invoke_agent durable", "invoke_agent durable"]
    replayed = []
    for run in runs:
        calls = [
            s
            for s in spans
            if s.parent_span_id in by_id and by_id[s.parent_span_id].parent_span_id == run.span_id
        ]
        assert {by_id[c.parent_span_id].name for c in calls} == {"action three_calls"}
        assert {c.trace_id for c in calls} == {run.trace_id}
        attributes = [{a.key: a.value for a in c.attributes} for c in calls]
        replayed.append(
            sorted(
                (a["flink_agents.call.id"].string_value, a[REPLAYED].bool_value) for a in attributes
            )
        )
    assert replayed == [
        [("#0", False), ("#1", False)],
        [("#0", True), ("#1", True), ("#2", False)],
    ]


def test_traces_configured_in_the_event_log_config_build_an_exporting_listener(
    otlp_receiver: Receiver,
):
    config = EventLogConfig(traces=TracesConfig(endpoint=otlp_receiver.url))
    run_local(build_agent(), [{"city": "Oslo"}], key="city", event_log=config)
    names = {span.name for span in otlp_receiver.spans()}
    assert {"invoke_agent weather_react", "chat scripted-1", "execute_tool get_advice"} <= names


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    hint = f"pip install '{OTEL_EXTRA}'"
    with pytest.raises(ModuleNotFoundError, match=re.escape(hint)), otel_from_extra():
        import opentelemetry  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="no_such_module"), otel_from_extra():
        import no_such_module  # noqa: F401
