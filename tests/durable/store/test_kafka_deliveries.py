"""How the Kafka store reads a flush's delivery reports, without a broker: a fake producer
serves them in any order, and every record must be acknowledged for the flush to pass."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from flink_agents.durable.store.errors import StoreWriteError
from flink_agents.durable.store.kafka import KafkaActionStateStore


class _Message:
    def __init__(self, offset: int | None) -> None:
        self._offset = offset

    def offset(self) -> int | None:
        return self._offset


class _FakeProducer:
    """Appends each partition's records in the order they were queued (as the idempotent
    producer does), then serves their reports newest first; ``failing`` names records (by key)
    that fail, ``unserved`` records whose report never comes (a flush that timed out),
    ``refused_once`` records the queue refuses the first time (full: queued again later)."""

    def __init__(
        self,
        failing: set[bytes] = frozenset(),
        unserved: set[bytes] = frozenset(),
        refused_once: set[bytes] = frozenset(),
    ) -> None:
        self.ends: dict[int, int] = {}
        self.queued: list[tuple[int, bytes, Any]] = []
        self.failing, self.unserved, self.refused = failing, unserved, set(refused_once)

    def produce_batch(self, topic: str, messages: list[dict], partition: int, on_delivery) -> int:
        accepted = 0
        for message in messages:
            if message["key"] in self.refused:
                self.refused.discard(message["key"])
                message["_error"] = KafkaError(KafkaError._QUEUE_FULL)
                continue
            self.queued.append((partition, message["key"], on_delivery))
            accepted += 1
        return accepted

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        appended = []
        for partition, key, report in self.queued:
            offset = self.ends.get(partition, 100 * partition)
            self.ends[partition] = offset + 1
            appended.append((key, report, offset))
        self.queued = []
        for key, report, offset in reversed(appended):
            if key in self.unserved:
                continue
            if key in self.failing:
                report("broker said no", _Message(None))
            else:
                report(None, _Message(offset))
        return len(self.unserved)


def _store(producer: _FakeProducer) -> KafkaActionStateStore:
    store = object.__new__(KafkaActionStateStore)  # the transport alone: no broker to connect
    store.topic = "t"
    store._producer = producer
    return store


RECORDS = [(1, b"a", b"1"), (0, b"b", b"2"), (1, b"c", b"3"), (0, b"d", None), (1, b"e", b"5")]


def test_offsets_come_back_in_record_order_whatever_order_reports_are_served_in() -> None:
    store = _store(_FakeProducer())
    assert store._await(store._send(RECORDS), None) == [100, 0, 101, 1, 102]
    # A second flush continues each partition's offsets.
    assert store._await(store._send(RECORDS[:2]), None) == [103, 2]


def test_a_record_the_full_queue_refused_gets_the_offset_it_was_queued_at() -> None:
    store = _store(_FakeProducer(refused_once={b"a"}))  # queued after c and e, its partition's
    assert store._await(store._send(RECORDS), None) == [102, 0, 100, 1, 101]


def test_one_failed_report_fails_the_flush() -> None:
    store = _store(_FakeProducer(failing={b"c"}))
    with pytest.raises(StoreWriteError, match=r"1 of 5 writes .* first error: broker said no"):
        store._await(store._send(RECORDS), None)


def test_a_report_that_never_came_fails_the_flush() -> None:
    store = _store(_FakeProducer(unserved={b"d"}))
    with pytest.raises(StoreWriteError, match=r"1 of 5 writes .* none in 2\.5 s \(1 writes queued"):
        store._await(store._send(RECORDS), 2.5)
