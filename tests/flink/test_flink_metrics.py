"""The operator's metric adapter pushes every value from the operator thread.

Flink never calls back into Python for a metric: a Python gauge was read from Flink's metrics
thread and crashed the TaskManager (SIGSEGV in ``take_gil``) when a task had just been cancelled.
Gauges are counters the adapter sets to the gauge's current value.
"""

from __future__ import annotations

from typing import Any

from flink_agents.flink.operator import FlinkMetrics


class FakeCounter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n


class FakeGroup:
    """A metric group that records what is registered; a Python gauge is refused."""

    def __init__(self) -> None:
        self.groups: dict[str, FakeGroup] = {}
        self.counters: dict[str, FakeCounter] = {}

    def add_group(self, name: str) -> FakeGroup:
        return self.groups.setdefault(name, FakeGroup())

    def counter(self, name: str) -> FakeCounter:
        return self.counters.setdefault(name, FakeCounter())

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
