"""The operator's metric adapter pushes every value from the operator thread; with
``metrics: false`` the operator registers no metric group at all.

Flink never calls back into Python for a metric: a Python gauge was read from Flink's metrics
thread and crashed the TaskManager (SIGSEGV in ``take_gil``) when a task had just been cancelled.
Gauges are counters the adapter sets to the gauge's current value.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from pyflink.datastream import TimeDomain

from examples.weather import build_agent
from flink_agents.flink.operator import (
    METRIC_GROUP,
    PUBLISH_INTERVAL_S,
    VISITS,
    VISITS_IDLE,
    YOUNG_COLLECTION_THRESHOLD,
    AgentFunction,
    FlinkMetrics,
    PublishedMetrics,
)
from flink_agents.observability import MetricsListener
from flink_agents.plan.compile import compile_agent
from flink_agents.runtime.json_records import encode_input
from flink_agents.runtime.options import OperatorOptions
from flink_agents.runtime.settings import RuntimeSettings


class FakeCounter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n


class FakeDistribution:
    def __init__(self) -> None:
        self.values: list[int] = []

    def update(self, value: int) -> None:
        self.values.append(value)


class FakeGroup:
    """A metric group that records what is registered; a Python gauge is refused."""

    def __init__(self) -> None:
        self.groups: dict[str, FakeGroup] = {}
        self.counters: dict[str, FakeCounter] = {}
        self.distributions: dict[str, FakeDistribution] = {}

    def add_group(self, name: str) -> FakeGroup:
        return self.groups.setdefault(name, FakeGroup())

    def counter(self, name: str) -> FakeCounter:
        return self.counters.setdefault(name, FakeCounter())

    def distribution(self, name: str) -> FakeDistribution:
        return self.distributions.setdefault(name, FakeDistribution())

    def gauge(self, name: str, read: Any) -> None:
        raise AssertionError(f"a Python gauge {name!r} would be read from Flink's thread")


def test_a_gauge_is_a_counter_set_to_its_value_at_each_update() -> None:
    group = FakeGroup()
    metrics = FlinkMetrics(group)  # type: ignore[arg-type]
    values = iter([3, 5, 1, 1, 0])
    metrics.register_gauge("runs.in_flight", lambda: next(values))
    counter = group.groups["runs"].counters["in_flight"]

    seen = []
    for _ in range(5):
        metrics.update_gauges()
        seen.append(counter.count)

    assert seen == [3, 5, 1, 1, 0]


def test_a_gauge_is_not_read_between_updates() -> None:
    reads = []
    metrics = FlinkMetrics(FakeGroup())  # type: ignore[arg-type]
    metrics.register_gauge("runs.queued", lambda: reads.append(1) or len(reads))

    assert reads == []
    metrics.update_gauges()
    assert reads == [1]


def test_metrics_are_pushed_at_most_once_an_interval_while_runs_are_in_flight() -> None:
    """Each push is a call into the JVM per changed metric: not after every input and timer."""
    now = [100.0]
    group = FakeGroup()
    counts = MetricsListener()
    published = PublishedMetrics(counts, FlinkMetrics(group), clock=lambda: now[0])  # type: ignore[arg-type]
    published.publish()
    started = group.groups["runs"].counters["started"]

    counts.on_run_admitted()
    counts.on_run_started()
    published.publish_if_due()  # a run in flight, the interval not over: not pushed yet
    assert started.count == 0

    now[0] += PUBLISH_INTERVAL_S
    published.publish_if_due()
    assert started.count == 1


def test_metrics_are_pushed_at_once_when_nothing_is_in_flight() -> None:
    """The last runs' counts must not wait for an input or timer that may never come."""
    group = FakeGroup()
    counts = MetricsListener()
    published = PublishedMetrics(counts, FlinkMetrics(group), clock=lambda: 5.0)  # type: ignore[arg-type]
    published.publish()
    counts.on_run_admitted()
    counts.on_run_started()
    counts.on_run_finished("succeeded", 12.0, 1)

    published.publish_if_due()

    assert group.groups["runs"].counters["finished"].count == 1
    assert group.groups["runs"].counters["in_flight"].count == 0


# --- the operator with metrics on and off --------------------------------------------------------


class FakeState:
    def __init__(self) -> None:
        self.text: str | None = None

    def value(self) -> str | None:
        return self.text

    def update(self, value: str) -> None:
        self.text = value


class FakeRuntimeContext:
    """What the operator asks PyFlink's runtime context for; counts metric group requests."""

    def __init__(self) -> None:
        self.group = FakeGroup()
        self.metric_groups_asked = 0
        self.gc_thresholds: list[tuple[int, ...]] = []

    def get_metrics_group(self) -> FakeGroup:
        self.metric_groups_asked += 1
        return self.group

    def get_state(self, descriptor: Any) -> FakeState:
        return FakeState()

    def get_attempt_number(self) -> int:
        return 0

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_number_of_parallel_subtasks(self) -> int:
        return 1

    def get_max_number_of_parallel_subtasks(self) -> int:
        return 128


class FakeTimers:
    def __init__(self) -> None:
        self.now = 0

    def current_processing_time(self) -> int:
        return self.now

    def register_processing_time_timer(self, at: int) -> None:
        pass

    def register_event_time_timer(self, at: int) -> None:
        pass


class FakeContext:
    def __init__(self, key: str) -> None:
        self.key = key
        self.timers = FakeTimers()

    def timer_service(self) -> FakeTimers:
        return self.timers

    def get_current_key(self) -> str:
        return self.key

    def time_domain(self) -> TimeDomain:
        return TimeDomain.PROCESSING_TIME


def _one_run(monkeypatch: pytest.MonkeyPatch, options: OperatorOptions) -> FakeRuntimeContext:
    """Open an operator with ``options``, run one input of one key to its output, close it."""
    monkeypatch.setattr(gc, "freeze", lambda: None)  # keep this test process collectable
    monkeypatch.setattr(logging.getLogger(), "level", logging.getLogger().level)
    runtime = FakeRuntimeContext()
    # Keep this test process's collector as it is; the thresholds asked for are recorded.
    monkeypatch.setattr(gc, "set_threshold", lambda *limits: runtime.gc_thresholds.append(limits))
    function = AgentFunction(
        compile_agent(build_agent()).to_json(), RuntimeSettings(operator=options)
    )
    function.open(runtime)  # type: ignore[arg-type]
    try:
        ctx = FakeContext(encode_input("Oslo"))
        outputs = list(function.process_element(encode_input({"city": "Oslo"}), ctx))  # type: ignore[arg-type]
        deadline = time.monotonic() + 30
        while not outputs:
            assert time.monotonic() < deadline, "the run did not finish"
            time.sleep(0.01)
            ctx.timers.now += 10
            outputs = list(function.on_timer(ctx.timers.now, ctx))  # type: ignore[arg-type]
    finally:
        function.close()
    assert len(outputs) == 1
    return runtime


def test_with_metrics_off_no_metric_group_is_registered(monkeypatch) -> None:
    runtime = _one_run(monkeypatch, OperatorOptions(metrics=False))
    assert runtime.metric_groups_asked == 0
    assert runtime.group.groups == {} and runtime.group.counters == {}


def test_with_metrics_on_the_counters_move(monkeypatch) -> None:
    runtime = _one_run(monkeypatch, OperatorOptions())
    [group] = runtime.group.groups.values()
    assert group.groups["runs"].counters["started"].count == 1
    assert group.groups["runs"].counters["finished"].count == 1
    assert group.groups["calls"].groups["model"].counters["live"].count == 3
    assert group.groups["calls"].groups["tool"].counters["live"].count == 2
    assert group.groups["runs"].counters["in_flight"].count == 0
    assert len(group.groups["runs"].distributions["latency_ms"].values) == 1


def test_the_operator_counts_its_timer_visits_and_those_that_emitted_nothing(monkeypatch) -> None:
    runtime = _one_run(monkeypatch, OperatorOptions())
    operator = runtime.group.groups[METRIC_GROUP].groups["operator"].counters
    assert set(operator) == {"visits", "visits_idle"}
    # One run, polled until its one output came out: every visit but the last found nothing.
    assert operator["visits"].count >= 1
    assert operator["visits_idle"].count == operator["visits"].count - 1


def test_opening_the_operator_raises_the_young_collection_threshold(monkeypatch) -> None:
    default_older = gc.get_threshold()[1:]
    runtime = _one_run(monkeypatch, OperatorOptions())
    assert runtime.gc_thresholds == [(YOUNG_COLLECTION_THRESHOLD, *default_older)]
    assert YOUNG_COLLECTION_THRESHOLD > 700  # Python's default


def test_the_visit_counters_are_documented_with_the_other_metrics() -> None:
    table = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    for name in (VISITS, VISITS_IDLE):
        assert f"| `{name}` | counter |" in table
