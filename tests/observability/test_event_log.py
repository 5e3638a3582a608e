"""The event log of in-process runs: one record per run, action, event and durable call, with
lineage; token usage; errors; secrets kept out; listeners from Python and by reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.weather import build_agent
from flink_agents.durable.identity import RunId
from flink_agents.observability import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    EventLog,
    EventLogConfig,
    EventSent,
    RunAdmitted,
    RunFinished,
    RunStarted,
    read_records,
)
from flink_agents.observability import event_log as log_module
from flink_agents.runtime import ActionError, run_local
from tests.observability import agents
from tests.observability.agents import KEY_VARIABLE, SECRET, Collector
from tests.subagent_samples import ShoutAgent, caller_agent

CITIES = [{"city": "Oslo"}, {"city": "Lisbon"}]


@pytest.fixture(autouse=True)
def _fresh_collector():
    Collector.records = []


def _weather_log(tmp_path: Path) -> list:
    path = tmp_path / "events.jsonl"
    run_local(build_agent(), CITIES, key="city", event_log=EventLogConfig(path=str(path)))
    return list(read_records(path))


def test_every_run_action_event_and_call_has_a_record_with_its_lineage(tmp_path):
    records = _weather_log(tmp_path)
    kinds = {type(r) for r in records}
    assert kinds == {
        RunAdmitted,
        RunStarted,
        RunFinished,
        ActionStarted,
        ActionFinished,
        EventSent,
        CallFinished,
    }
    for city in ("Oslo", "Lisbon"):
        mine = [r for r in records if r.key == city]
        assert [r.seq for r in mine] == [0] * len(mine)
        [started] = [r for r in mine if isinstance(r, RunStarted)]
        [finished] = [r for r in mine if isinstance(r, RunFinished)]
        assert started.input == {"city": city}
        assert (finished.status, finished.outputs, finished.error) == ("succeeded", 1, None)
        invocations = {(r.event_id, r.action) for r in mine if isinstance(r, ActionStarted)}
        events = {r.event_id for r in mine if isinstance(r, EventSent)}
        calls = [r for r in mine if isinstance(r, CallFinished)]
        # each call belongs to an action invocation; each invocation handles the input event
        # or an event an earlier invocation sent
        assert {(c.event_id, c.action) for c in calls} <= invocations
        handled = {event_id for event_id, _ in invocations}
        assert len(handled - events) == 1  # the input event
        assert all(
            (e.upstream_id, e.action) in invocations for e in mine if isinstance(e, EventSent)
        )
        assert [(c.call_kind, c.outcome) for c in calls] == [
            ("model", "live"),
            ("tool", "live"),
            ("model", "live"),
            ("tool", "live"),
            ("model", "live"),
        ]
        assert all(c.latency_ms >= 0 and c.error is None for c in calls)
        assert calls[1].function == "examples.weather:get_temperature"  # the tool, not Tool
        assert calls[1].arguments["args"][0] == {"city": city}


def test_model_calls_carry_token_usage_and_no_record_holds_the_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    path = tmp_path / "events.jsonl"
    [result] = run_local(
        agents.leaky_agent(),
        [{"k": 1, "q": "hi"}],
        key="k",
        event_log=EventLogConfig(path=str(path)),
    )
    assert SECRET in result.output_values[0]["answer"]  # the run itself is untouched

    text = path.read_text()
    assert SECRET not in text
    assert "<redacted>" in text
    [call] = [r for r in read_records(path) if isinstance(r, CallFinished)]
    assert (call.call_kind, call.outcome) == ("model", "live")
    assert (call.usage.input_tokens, call.usage.output_tokens) == (7, 3)
    assert call.result["content"] == "the key is <redacted>"


def test_payloads_are_cut_at_the_configured_size(tmp_path):
    path = tmp_path / "events.jsonl"
    config = EventLogConfig(path=str(path), max_payload_chars=20)
    run_local(build_agent(), CITIES[:1], key="city", event_log=config)
    sent = [r for r in read_records(path) if isinstance(r, EventSent)]
    assert sent and all(len(r.payload["truncated"]) == 20 for r in sent)


def test_a_failing_call_and_action_record_their_error_and_the_run_fails():
    run_local(agents.failing_agent(), [{"k": 1, "q": "why"}], key="k", listeners=[Collector()])
    [call] = [r for r in Collector.records if isinstance(r, CallFinished)]
    assert (call.call_kind, call.outcome) == ("function", "failed")
    assert call.error == "ValueError: cannot answer 'why'"
    [action] = [r for r in Collector.records if isinstance(r, ActionFinished)]
    assert action.error == "ValueError: cannot answer 'why'"
    [finished] = [r for r in Collector.records if isinstance(r, RunFinished)]
    assert finished.status == "failed" and "cannot answer" in finished.error


def test_a_run_failing_under_the_fail_policy_is_recorded_before_the_error_surfaces():
    with pytest.raises(ActionError):
        run_local(
            agents.failing_agent("fail"), [{"k": 1, "q": "x"}], key="k", listeners=[Collector()]
        )
    [finished] = [r for r in Collector.records if isinstance(r, RunFinished)]
    assert finished.status == "failed" and finished.error.startswith("ActionError")


def test_listeners_come_from_python_or_from_a_reference_in_the_config():
    config = EventLogConfig(listeners=["tests.observability.agents:Collector"])
    from_python = Collector()
    run_local(build_agent(), CITIES[:1], key="city", event_log=config, listeners=[from_python])
    starts = [r for r in Collector.records if isinstance(r, RunStarted)]
    assert len(starts) == 2  # both listeners saw the run (they share the class-wide list)


def test_without_a_listener_nothing_is_built(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a record was built with no listener configured")

    for name in ("emit", "run_admitted", "observe_run", "action_started", "call_finished"):
        monkeypatch.setattr(EventLog, name, forbidden)
    [result] = run_local(build_agent(), CITIES[:1], key="city")
    assert result.output_values == [{"city": "Oslo", "advice": "coat"}]


class RunsAndCalls(Collector):
    """A listener that wants run and call records only (as the metrics do)."""

    record_kinds = frozenset({"run_started", "run_finished", "call"})


def test_records_no_listener_wants_are_not_built():
    counting = RunsAndCalls()
    run_local(build_agent(), CITIES[:1], key="city", listeners=[counting])
    kinds = {record.kind for record in Collector.records}
    assert kinds == {"run_admitted", "run_started", "run_finished", "call"}  # no action, event

    Collector.records = []
    run_local(build_agent(), CITIES[:1], key="city", listeners=[counting, Collector()])
    kinds = {record.kind for record in Collector.records}
    assert {"action_started", "action_finished", "event_sent"} <= kinds  # another wants them


def test_a_delegation_is_a_subagent_call_and_the_child_actions_are_recorded_under_the_run():
    parent = caller_agent(shouter=ShoutAgent(name="shout"))
    run_local(
        parent, [{"calls": [["shouter", "hi", None]]}], key=lambda _: "k", listeners=[Collector()]
    )
    [call] = [r for r in Collector.records if isinstance(r, CallFinished)]
    assert (call.call_kind, call.outcome, call.error) == ("subagent", "live", None)
    actions = [r.action for r in Collector.records if isinstance(r, ActionStarted)]
    assert actions == ["delegate", "shout"]  # the child's action, in the parent's run
    assert {(r.agent, r.key, r.seq) for r in Collector.records} == {("caller", "k", 0)}


@pytest.mark.parametrize(
    ("elapsed_ns", "latency_ms"),
    [(0, 0.0), (499, 0.0), (500, 0.001), (1_234_567, 1.235), (200_000_400_000, 200000.4)],
)
def test_a_latency_is_in_milliseconds_rounded_to_the_microsecond(
    elapsed_ns, latency_ms, monkeypatch
):
    monkeypatch.setattr(log_module.time, "perf_counter_ns", lambda: 10**12 + elapsed_ns)
    assert log_module._ms_since(10**12) == latency_ms
    assert repr(log_module._ms_since(10**12)) == repr(round(elapsed_ns / 1e6, 3))


class _RaisingLines:
    def __init__(self, *, never_raises: bool) -> None:
        self.never_raises = never_raises

    def on_line(self, line: bytes) -> None:
        raise RuntimeError("sink broke")


class _RaisingCounter(_RaisingLines):
    def on_run_admitted(self) -> None:
        raise RuntimeError("counter broke")

    def on_run_started(self) -> None: ...

    def on_run_finished(self, status, latency_ms, outputs) -> None: ...

    def on_call(self, kind, outcome, latency_ms, usage) -> None: ...


def test_an_observer_that_raises_is_logged_unless_it_declares_it_never_raises(caplog):
    run = RunId("agent", "k", 0)
    EventLog([_RaisingLines(never_raises=False), _RaisingCounter(never_raises=False)]).run_admitted(
        run
    )
    assert "failed on a line" in caplog.text
    assert "counter hook" in caplog.text
    # Declared never to raise, it is called unwrapped: a broken promise reaches the caller.
    with pytest.raises(RuntimeError, match="sink broke"):
        EventLog([_RaisingLines(never_raises=True)]).run_admitted(run)
    with pytest.raises(RuntimeError, match="counter broke"):
        EventLog([_RaisingCounter(never_raises=True)]).run_admitted(run)
