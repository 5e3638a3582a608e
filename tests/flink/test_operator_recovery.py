"""Which recovery marker restores the action-state store after a restart.

The operator is driven directly, without a cluster: keyed state, timers and the runtime context
are small stand-ins (what Flink restores is a copy of the keyed state), and the store is an
in-memory log shared by the attempts, the way a Kafka topic outlives a failed task. The
failover itself is covered on real clusters in e2e/.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pyflink.datastream import TimeDomain

from examples.weather import build_agent
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog, RecoveryMarker
from flink_agents.durable.store.config import StoreConfig
from flink_agents.flink import OperatorOptions
from flink_agents.flink.operator import AgentFunction, SavedKey
from flink_agents.plan.compile import compile_agent

PLAN_JSON = compile_agent(build_agent()).to_json()


class KeyedBackend:
    """Keyed state: one value per key, read and written under the current key."""

    def __init__(self, table: dict[str, str] | None = None) -> None:
        self.table = dict(table or {})
        self.current: str | None = None


class ValueState:
    def __init__(self, backend: KeyedBackend) -> None:
        self.backend = backend

    def value(self) -> str | None:
        return self.backend.table.get(self.backend.current)

    def update(self, value: str) -> None:
        self.backend.table[self.backend.current] = value


class RuntimeContext:
    def __init__(self, backend: KeyedBackend, attempt: int) -> None:
        self.backend, self.attempt = backend, attempt

    def get_state(self, descriptor: Any) -> ValueState:
        return ValueState(self.backend)

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_attempt_number(self) -> int:
        return self.attempt


class Timers:
    def __init__(self) -> None:
        self.processing: list[int] = []

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.processing.append(timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        pass


class Context:
    """The context of one element or timer, under `key`."""

    def __init__(self, backend: KeyedBackend, timers: Timers, key: str) -> None:
        self.key, self.timers = json.dumps(key), timers
        backend.current = self.key

    def get_current_key(self) -> str:
        return self.key

    def timer_service(self) -> Timers:
        return self.timers

    def time_domain(self) -> TimeDomain:
        return TimeDomain.PROCESSING_TIME


class RecordingStore(InMemoryActionStateStore):
    def __init__(self, log: InMemoryLog, restores: list[RecoveryMarker]) -> None:
        super().__init__(log)
        self.restores = restores

    def restore(self, marker: RecoveryMarker):
        self.restores.append(marker)
        return super().restore(marker)


class Attempt:
    """One task attempt: an operator opened over keyed state restored from `checkpoint`."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        log: InMemoryLog,
        checkpoint: dict[str, str],
        number: int,
        **options: Any,
    ) -> None:
        self.backend, self.timers = KeyedBackend(checkpoint), Timers()
        self.restores: list[RecoveryMarker] = []
        monkeypatch.setattr(StoreConfig, "build", lambda _: RecordingStore(log, self.restores))
        self.function = AgentFunction(
            PLAN_JSON, OperatorOptions(**options), StoreConfig(kind="memory")
        )
        self.function.open(RuntimeContext(self.backend, number))

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.function.close()

    def send(self, city: str) -> list[dict]:
        context = Context(self.backend, self.timers, city)
        records = self.function.process_element(json.dumps({"city": city}), context)
        return [json.loads(r) for r in records]

    def visit(self, city: str) -> list[dict]:
        """Fire the key's timer once."""
        context = Context(self.backend, self.timers, city)
        now = int(time.time() * 1000)
        return [json.loads(r) for r in self.function.on_timer(now, context)]

    def answers(self, city: str, timeout: float = 10.0) -> list[dict]:
        """Visit the key until its runs have finished and their outputs came out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            outputs = self.visit(city)
            if outputs:
                return outputs
            time.sleep(0.02)
        raise AssertionError(f"no output for {city!r} within {timeout} s")


def saved_marker(checkpoint: dict[str, str], city: str) -> RecoveryMarker:
    """The recovery marker a key's state holds in `checkpoint`."""
    saved = SavedKey.model_validate_json(checkpoint[json.dumps(city)])
    assert saved.marker is not None
    return RecoveryMarker.from_json(saved.marker)


def first_run(log: InMemoryLog, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A first attempt answers Oslo; returns its keyed state (the checkpoint)."""
    with Attempt(monkeypatch, log, {}, 0) as first:
        first.send("Oslo")
        assert first.answers("Oslo")[0]["output"]["city"] == "Oslo"
        assert first.restores == []  # a fresh start restores nothing
        return dict(first.backend.table)


def test_a_new_key_first_after_a_restart_waits_for_a_key_that_carries_a_marker(monkeypatch):
    log = InMemoryLog()
    checkpoint = first_run(log, monkeypatch)

    with Attempt(monkeypatch, log, checkpoint, 1) as second:
        assert second.send("Rome") == []  # a new key: no marker in its state
        assert second.restores == []  # not yet: the whole topic would have to be read
        assert second.timers.processing  # its timer will come back for it
        assert second.visit("Rome") == []  # still waiting; the input stays in state

        second.send("Oslo")  # a key saved before the checkpoint: it carries a marker
        assert second.restores == [saved_marker(checkpoint, "Oslo")]
        rome = second.answers("Rome")
        assert [(r["key"], r["seq"], r["output"]["city"]) for r in rome] == [("Rome", 0, "Rome")]


def test_without_any_marker_the_whole_topic_is_read_after_the_wait(monkeypatch):
    log = InMemoryLog()
    checkpoint = first_run(log, monkeypatch)

    with Attempt(monkeypatch, log, checkpoint, 1, marker_wait_ms=50) as second:
        assert second.send("Rome") == []
        assert second.restores == []
        time.sleep(0.1)
        rome = second.answers("Rome")
        [marker] = second.restores
        assert all(mark.low == 0 for mark in marker.partitions.values())  # from the start
        assert [(r["key"], r["seq"]) for r in rome] == [("Rome", 0)]


def test_a_start_from_a_savepoint_restores_the_store_when_declared(monkeypatch):
    log = InMemoryLog()
    savepoint = first_run(log, monkeypatch)

    # Attempt 0, as for any new job: only the option says that state was restored.
    with Attempt(monkeypatch, log, savepoint, 0, started_from_savepoint=True) as started:
        assert started.send("Rome") == []
        assert started.restores == []
        started.send("Oslo")
        assert started.restores == [saved_marker(savepoint, "Oslo")]
        assert [r["key"] for r in started.answers("Rome")] == ["Rome"]
