"""Paused runs survive a savepoint and a rescale: 20 runs paused for approval at parallelism 1,
stopped with a savepoint, restored at parallelism 2, then decided (docs/waits.md, "Guarantees
at each crash point").

The job (tests/flink/paused_refunds.py) reads orders and decisions from Kafka topics, records
its calls in a Kafka action-state store and writes its outputs to a third topic. Each run quotes
its order at a local HTTP service, then pauses. Once all 20 are paused, the job stops with a
savepoint; the restored job (two subtasks, each with the keys of its key groups) gets the 20
decisions. The contract:

* every wait resolves once, with its decision: one answer per order, with the decider's verdict
  and name, one ``resumed`` record per wait in the event log, nothing refused;
* no completed call reaches the service again: one quote per order, all before the savepoint;
* each approved or edited order is refunded once (an edit with its amount), a rejected one never;
* the restored job ran both subtasks: each resumed some of the waits.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.flink.paused_refunds import PLAN, QUOTED, SLOW, RefundService

pytestmark = [pytest.mark.flink, pytest.mark.kafka, SLOW]

ORDERS = [f"o-{n}" for n in range(1, 21)]
EDITED_AMOUNT = 1000


def decision_for(order: str) -> dict[str, Any]:
    """The person: edits orders 1-3 to a smaller amount, rejects 4-6, approves the rest."""
    n = int(order[2:])
    if n <= 3:
        return {"verdict": "edit", "by": "bo", "arguments": {"amount": EDITED_AMOUNT}}
    if n <= 6:
        return {"verdict": "reject", "by": "cy", "message": "not eligible"}
    return {"verdict": "approve", "by": "ann"}


class Outputs:
    """The job's output topic, read as it fills; records kept in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.records: list[dict[str, Any]] = []
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"test-{topic}",
                "auto.offset.reset": "earliest",
            }
        )
        self._consumer.subscribe([topic])

    def until(self, enough: Any, job: Any, what: str, timeout_s: float = 180.0) -> None:
        """Read until ``enough(records)``; fails if the job ends first or time runs out."""
        deadline = time.monotonic() + timeout_s
        while not enough(self.records):
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout_s} s: {self.records[-5:]}")
            if _ended(job):
                job.get_job_execution_result().result()  # raises the job's failure
                pytest.fail(f"the job ended before {what}")
            message = self._consumer.poll(0.5)
            if message is not None and message.error() is None:
                self.records.append(json.loads(message.value()))

    def read_for(self, seconds: float) -> None:
        """Read what comes within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message = self._consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.records.append(json.loads(message.value()))

    def close(self) -> None:
        self._consumer.close()


def _ended(job: Any) -> bool:
    """Whether the job reached a final state (a local mini-cluster shuts down with its job)."""
    from py4j.protocol import Py4JJavaError

    try:
        return str(job.get_job_status().result()) in {"FINISHED", "FAILED", "CANCELED"}
    except Py4JJavaError:
        return True


def _topics(bootstrap: str) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"paused-{name}-{suffix}" for name in ("orders", "decisions", "outputs")}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
        future.result(30)
    return {**topics, "store": f"paused-store-{suffix}"}


def _spec(work: Path, bootstrap: str, topics: dict[str, str], parallelism: int) -> Any:
    from flink_agents.flink import load_job

    plan = work / "plan.json"
    plan.write_text(PLAN.to_json())

    def kafka(topic: str) -> dict[str, str]:
        return {"kind": "kafka", "topic": topic, "bootstrap_servers": bootstrap}

    spec = {
        "name": "paused-refunds",
        "agent": str(plan),
        "key": "order",
        "source": kafka(topics["orders"]),
        "decisions": kafka(topics["decisions"]),
        "sink": kafka(topics["outputs"]),
        "parallelism": parallelism,
        "checkpointing": {"interval_ms": 1000, "dir": str(work / "checkpoints")},
        "store": {"kind": "kafka", "bootstrap_servers": bootstrap, "topic": topics["store"]},
        "event_log": {"path": str(work / "events-{subtask}.jsonl")},
    }
    path = work / f"job-p{parallelism}.json"
    path.write_text(json.dumps(spec))
    return load_job(path)


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for record in records:
        producer.produce(topic, key=json.dumps(record["order"]), value=json.dumps(record))
    assert producer.flush(30) == 0


def _stop_with_savepoint(job: Any, folder: Path) -> str:
    """Stop the job with a savepoint (canonical format) into ``folder``; its location."""
    from pyflink.java_gateway import get_gateway

    # PyFlink 2.2's JobClient.stop_with_savepoint misses the format argument Java now takes.
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    location = str(job._j_job_client.stopWithSavepoint(False, folder.as_uri(), canonical).get())
    deadline = time.monotonic() + 60
    while not _ended(job) and time.monotonic() < deadline:
        time.sleep(0.1)
    return location


@pytest.fixture()
def service() -> Iterator[RefundService]:
    service = RefundService()
    yield service
    service.close()


def test_runs_paused_in_a_savepoint_resume_at_another_parallelism_once_each(
    kafka_bootstrap: str, tmp_path: Path, service: RefundService
) -> None:
    from flink_agents.flink import build_job, job_environment

    topics = _topics(kafka_bootstrap)
    outputs = Outputs(kafka_bootstrap, topics["outputs"])
    try:
        # 1. Parallelism 1: every run quotes its order and pauses; then a savepoint.
        spec = _spec(tmp_path, kafka_bootstrap, topics, parallelism=1)
        env = job_environment(spec)
        build_job(spec, env)
        job = env.execute_async("paused-refunds-p1")
        _produce(
            kafka_bootstrap,
            topics["orders"],
            [{"order": order, "service": service.url} for order in ORDERS],
        )
        outputs.until(lambda rs: sum("waiting" in r for r in rs) == len(ORDERS), job, "20 pauses")
        savepoint = _stop_with_savepoint(job, tmp_path / "savepoints")
        quotes_at_savepoint = service.counts("quote")
        assert quotes_at_savepoint == Counter(dict.fromkeys(ORDERS, 1))
        assert not service.counts("refund")
        waits = {r["key"]: r["waiting"]["wait_id"] for r in outputs.records if "waiting" in r}
        assert not [r for r in outputs.records if "waiting" not in r], outputs.records

        # 2. Restored at parallelism 2; the decisions come.
        spec = _spec(tmp_path, kafka_bootstrap, topics, parallelism=2)
        env = job_environment(spec, extra={"execution.state-recovery.path": savepoint})
        build_job(spec, env)
        job = env.execute_async("paused-refunds-p2")
        _produce(
            kafka_bootstrap,
            topics["decisions"],
            [{"order": o, "wait": waits[o], **decision_for(o)} for o in ORDERS],
        )
        outputs.until(lambda rs: sum("output" in r for r in rs) == len(ORDERS), job, "20 answers")
        outputs.read_for(3.0)  # room for anything wrong to follow: a second answer, a refusal
        if not _ended(job):
            job.cancel().result()
    finally:
        outputs.close()

    answers: dict[str, list[Any]] = {}
    for record in outputs.records:
        if "output" in record:
            answers.setdefault(record["key"], []).append(record["output"])
    assert not [r for r in outputs.records if "refused" in r or "error" in r]
    assert sum("waiting" in r for r in outputs.records) == len(ORDERS)  # no second pause
    expected, refunds = {}, {}
    for order in ORDERS:
        decision = decision_for(order)
        verdict = {"approve": "approved", "edit": "edited", "reject": "rejected"}
        amount = EDITED_AMOUNT if decision["verdict"] == "edit" else QUOTED
        refund = None if decision["verdict"] == "reject" else f"refunded {amount} on {order}"
        if refund is not None:
            refunds[order] = [amount]  # one request each
        expected[order] = [
            {"verdict": verdict[decision["verdict"]], "by": decision["by"], "refund": refund}
        ]
    assert answers == expected

    assert service.counts("quote") == quotes_at_savepoint  # 0 completed calls made again
    assert service.refunded == refunds

    resumed: dict[int, Counter[str]] = {}
    for subtask in (0, 1):
        log = tmp_path / f"events-{subtask}.jsonl"
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        resumed[subtask] = Counter(
            line["wait_id"]
            for line in lines
            if line.get("kind") == "wait" and line.get("change") == "resumed"
        )
    assert resumed[0] + resumed[1] == Counter(dict.fromkeys(waits.values(), 1))
    assert resumed[0] and resumed[1], "the restored job resumed all waits on one subtask"
