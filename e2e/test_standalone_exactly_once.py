"""With the exactly-once Kafka sink, a TaskManager killed with kill -9 leaves every answer once.

The support-desk job of ``e2e/test_standalone_failover.py`` (same agent, services, tickets and
kill), with ``sink.delivery: exactly-once``: outputs are written in Kafka transactions that
Flink commits when a checkpoint completes. Two consumers read the output topic: one with
``isolation.level=read_committed`` (what a downstream reader of an exactly-once sink uses) and
one with ``read_uncommitted`` (it also sees writes of transactions the kill aborted). The kill comes
while an answer is written but not committed (seen by the second consumer only), so the kill
aborts a transaction holding outputs that the replay writes again. Proved:

* the read_committed consumer sees every expected answer exactly once (count per (key, seq)),
  with its expected content, and no error record;
* no call whose answer was sent more than a second before the kill is sent again (the witness
  counts requests by idempotency key, as in the at-least-once test).

The same run with the default ``at-least-once`` sink is the control: it must lose nothing
either, and the duplicates it wrote are printed (not asserted: whether the kill catches an
output emitted since the last checkpoint is a matter of timing).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer

from e2e.test_standalone_failover import (
    DELEGATION_ROUTES,
    TaskManagerKill,
    cancel,
    create_ticket_topics,
    expected_outputs,
    job_running,
    release,
    rest,
    start_producer,
    start_witness,
    submit,
    taskmanager_log_tail,
    ticket_lines,
    totals,
    wait_for,
    write_spec,
)

pytestmark = [pytest.mark.cluster, pytest.mark.kafka, pytest.mark.flink]

CHECKPOINT_INTERVAL_MS = 3000


@dataclass
class TopicReader:
    """Every record of a topic, read from the start by a background thread with the given
    ``isolation.level`` (``read_committed`` skips aborted transactions and waits for commits)."""

    bootstrap: str
    topic: str
    isolation: str
    records: list[dict[str, Any]] = field(default_factory=list)
    first_seen: dict[tuple[str, int], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> TopicReader:
        self._thread = threading.Thread(target=self._run, name=f"e2e-{self.isolation}")
        self._thread.daemon = True
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"e2e-{self.isolation}-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": self.isolation,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.3)
                if message is None or message.error():
                    continue
                record = json.loads(message.value())
                with self._lock:
                    self.records.append(record)
                    self.first_seen.setdefault((record["key"], record["seq"]), time.time())
        finally:
            consumer.close()

    def counts(self) -> Counter[tuple[str, int]]:
        """How often each (key, seq) was read."""
        with self._lock:
            return Counter((r["key"], r["seq"]) for r in self.records)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.records)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def duplicates(counts: Counter[tuple[str, int]]) -> dict[tuple[str, int], int]:
    return {run: n for run, n in sorted(counts.items()) if n > 1}


def median_latency(
    expected: dict[tuple[str, int], str],
    produced: list[float],
    seen: dict[tuple[str, int], float],
    before: float,
) -> float:
    """Median seconds from a ticket's write to its answer's first read, over the answers read
    before ``before`` (the kill: later ones wait for the recovery). ``expected`` is in ticket
    order, like ``produced``."""
    delays = sorted(
        seen[run] - at for run, at in zip(expected, produced, strict=True) if seen[run] < before
    )
    return delays[len(delays) // 2]


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_taskmanager_kill_leaves_each_committed_answer_once(
    flink_cluster: Any,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    delivery: str,
) -> None:
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    lines = ticket_lines()
    expected = expected_outputs(lines)
    spec, topics = write_spec(tmp_path, kafka_bootstrap, run_id)
    settings = yaml.safe_load(spec.read_text())
    settings["sink"]["delivery"] = delivery
    # Transactions stay open for a checkpoint interval: long enough for the kill to catch one
    # holding outputs (the at-least-once control gets the same interval).
    settings["checkpointing"]["interval_ms"] = CHECKPOINT_INTERVAL_MS
    spec.write_text(yaml.safe_dump(settings, sort_keys=False))

    admin = create_ticket_topics(kafka_bootstrap, topics)
    witness = start_witness()
    committed = TopicReader(kafka_bootstrap, topics["output"], "read_committed").start()
    everything = TopicReader(kafka_bootstrap, topics["output"], "read_uncommitted").start()
    produced: list[float] = []
    job_id: str | None = None
    taskmanager: TaskManagerKill | None = None

    def state() -> str:
        return (
            f"job {job_id}; produced {len(produced)}/{len(lines)}, committed answers "
            f"{len(committed.counts())}, witness calls {totals(witness)}\n"
            + taskmanager_log_tail(flink_cluster)
        )

    try:
        job_id = submit(flink_cluster, spec)
        wait_for("the job to run", lambda: job_running(flink_cluster, job_id), 120, state)
        producer = start_producer(kafka_bootstrap, topics["input"], lines, produced)

        def ready_to_kill() -> bool:
            # Committed answers, a delegation being served and, with transactions, an answer
            # written but not committed yet: the kill leaves its transaction open.
            serving = witness.counters.open_now()
            if len(committed.counts()) < 4 or not set(DELEGATION_ROUTES) & set(serving):
                return False
            if delivery == "exactly-once" and len(everything.counts()) <= len(committed.counts()):
                return False
            return rest(flink_cluster, f"/jobs/{job_id}/checkpoints")["counts"]["completed"] > 0

        wait_for("committed answers and a delegation in flight", ready_to_kill, 120, state)
        committed_before = len(committed.counts())
        uncommitted_at_kill = len(everything.counts()) - committed_before
        taskmanager = TaskManagerKill(flink_cluster, job_id, state)
        kill_time = taskmanager.kill()
        taskmanager.recover()
        producer.join(timeout=60)
        wait_for(
            f"all {len(expected)} answers committed",
            lambda: set(expected) <= set(committed.counts()),
            180,
            state,
        )
        time.sleep(3)  # several more checkpoints: a late duplicate would be committed by now
    except BaseException:
        print(state())
        raise
    finally:
        if job_id:
            cancel(flink_cluster, job_id)
        if taskmanager is not None:
            taskmanager.restore()
        committed.stop()
        everything.stop()
        release(witness, admin, topics)

    counts = committed.counts()
    written = everything.counts()
    reinvoked = witness.counters.repeated_after(kill_time - 1.0)
    summary = [
        f"{delivery}: {len(lines)} tickets; killed after {committed_before} committed answers, "
        f"{uncommitted_at_kill} written but not committed; done in "
        f"{time.monotonic() - started:.0f} s",
        f"read_committed: {sum(counts.values())} records, duplicates {duplicates(counts)}, "
        "median ticket-to-answer before the kill "
        f"{median_latency(expected, produced, committed.first_seen, kill_time):.2f} s",
        f"read_uncommitted: {sum(written.values())} records, duplicates {duplicates(written)} "
        "(aborted transactions included)",
        f"witness calls {totals(witness)}; completed before the kill and re-invoked: {reinvoked}",
    ]
    with capsys.disabled():
        print("\n" + "\n".join(f"[exactly-once failover] {line}" for line in summary))

    records = committed.snapshot()
    assert not [r for r in records if "error" in r], "error outputs"
    missing = sorted(set(expected) - set(counts))
    assert not missing, f"inputs without a committed answer: {missing}"
    assert set(counts) == set(expected), f"answers to no input: {set(counts) - set(expected)}"
    wrong = [r for r in records if r["output"] != expected[(r["key"], r["seq"])]]
    assert not wrong, f"answers differing from the expected ones: {wrong[:3]}"
    assert not any(reinvoked.values()), f"completed calls made again after the kill: {reinvoked}"
    if delivery == "exactly-once":
        assert not duplicates(counts), f"read_committed saw answers twice: {duplicates(counts)}"
