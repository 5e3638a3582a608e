"""Metrics counted at the event log's hooks (no record built) and published into a host's sink."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable

from examples.weather import build_agent
from flink_agents.observability import EventLog, MetricsListener
from flink_agents.observability import event_log as log_module
from flink_agents.observability.sinks.metrics import COUNTERS
from flink_agents.runtime import run_local
from tests.observability import agents
from tests.observability.agents import KEY_VARIABLE, SECRET


class RecordingSink:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.gauges: dict[str, Callable[[], int]] = {}
        self.samples: defaultdict[str, list[int]] = defaultdict(list)

    def register_gauge(self, name: str, read: Callable[[], int]) -> None:
        self.gauges[name] = read

    def increment(self, name: str, amount: int) -> None:
        self.counters[name] += amount

    def sample(self, name: str, value: int) -> None:
        self.samples[name].append(value)


def test_runs_calls_by_kind_and_outcome_and_latencies_are_counted():
    metrics, sink = MetricsListener(), RecordingSink()
    metrics.publish(sink)
    assert set(sink.counters) == set(COUNTERS)  # every counter shows from the start, at zero
    assert sink.gauges["runs.in_flight"]() == 0

    cities = [{"city": "Oslo"}, {"city": "Lisbon"}, {"city": "Oslo"}]
    run_local(build_agent(), cities, key="city", listeners=[metrics])
    metrics.publish(sink)

    changed = {name: n for name, n in sink.counters.items() if n}
    assert changed == {
        "runs.started": 3,
        "runs.finished": 3,
        "calls.model.live": 9,
        "calls.tool.live": 6,
    }
    assert len(sink.samples["runs.latency_ms"]) == 3
    assert len(sink.samples["calls.latency_ms"]) == 15
    assert (sink.gauges["runs.in_flight"](), sink.gauges["runs.queued"]()) == (0, 0)

    metrics.publish(sink)  # nothing new: nothing added twice
    assert sink.counters["runs.started"] == 3


def test_tokens_in_and_out_and_failed_runs_are_counted(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    metrics, sink = MetricsListener(), RecordingSink()
    run_local(
        agents.leaky_agent(), [{"k": 1, "q": "a"}, {"k": 2, "q": "b"}], key="k", listeners=[metrics]
    )
    run_local(agents.failing_agent(), [{"k": 1, "q": "c"}], key="k", listeners=[metrics])
    metrics.publish(sink)
    assert (sink.counters["tokens.input"], sink.counters["tokens.output"]) == (14, 6)
    assert sink.counters["calls.function.failed"] == 1
    assert (sink.counters["runs.finished"], sink.counters["runs.failed"]) == (3, 1)


def test_the_metrics_alone_build_no_record(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a record was built for a counter")

    monkeypatch.setattr(log_module, "construct", forbidden)
    monkeypatch.setattr(EventLog, "emit", forbidden)
    metrics, sink = MetricsListener(), RecordingSink()
    run_local(build_agent(), [{"city": "Oslo"}, {"city": "Rome"}], key="city", listeners=[metrics])
    metrics.publish(sink)
    assert (sink.counters["runs.finished"], sink.counters["calls.model.live"]) == (2, 6)
    assert len(sink.samples["calls.latency_ms"]) == 10


def test_publishing_while_the_engine_counts_loses_nothing_and_pushes_nothing_twice():
    metrics, sink = MetricsListener(), RecordingSink()
    runs = 5_000  # fewer than the samples kept between two publishes: every one must arrive

    def engine() -> None:
        for _ in range(runs):
            metrics.on_run_started()
            metrics.on_run_finished("succeeded", 1.0, 1)

    counting = threading.Thread(target=engine)
    counting.start()
    while counting.is_alive():
        metrics.publish(sink)  # on another thread, as Flink's operator thread does
    counting.join()
    metrics.publish(sink)
    assert (sink.counters["runs.started"], sink.counters["runs.finished"]) == (runs, runs)
    assert len(sink.samples["runs.latency_ms"]) == runs


def test_paused_resumed_and_timed_out_waits_are_counted_and_the_runs_paused_now_gauged():
    metrics, sink = MetricsListener(), RecordingSink()
    metrics.publish(sink)
    assert sink.gauges["waits.open"]() == 0
    for _ in range(3):
        metrics.on_wait("paused", None)
    metrics.on_wait("resumed", "approved")
    metrics.on_wait("resumed", "timed_out")
    metrics.publish(sink)
    assert sink.gauges["waits.open"]() == 1
    assert [sink.counters[f"waits.{name}"] for name in ("paused", "resumed", "timed_out")] == [
        3,
        2,
        1,
    ]
    metrics.on_wait("resumed", "elapsed")  # a sleep's end: resumed, not a timeout
    metrics.on_wait("resumed", "approved")  # a wait paused before a restore: not counted here
    assert metrics.waiting == 0 and metrics.total("waits.timed_out") == 1
