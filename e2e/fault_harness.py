"""One external-fault scenario on the standalone cluster, from job submission to the oracle.

The job and its witness are those of ``e2e/test_standalone_failover.py`` (reused from there):
the support desk, submitted with ``flink-agents submit``, reading tickets from Kafka, writing
answers to Kafka, its durable calls in a Kafka action-state store, and the example services
counting every request by idempotency key. A scenario opens a :class:`FaultRun`, waits until
runs are in flight (:meth:`FaultRun.wait_for_calls_in_flight`), does its fault, and ends with
:meth:`FaultRun.finish` and :meth:`FaultRun.verdict`, whose :meth:`Verdict.check` is the oracle:

* every ticket gets exactly its expected answer (after de-duplication by (key, seq): the Kafka
  sink is at-least-once), no error output, no call the tickets do not need;
* no call answered more than a second before the fault is sent again (re-invoked = 0);
* calls sent again are at most the calls in flight around the fault (their outcome could not be
  recorded), per service; this holds with a zombie too (an old attempt's engine resumed beside
  the new one): its freeze fence stops it before it sends anything (the SIGSTOP scenario).

:func:`audit_store` reads the store topic independently and checks a restore against it.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import yaml
from kafka import KafkaConsumer

from e2e.test_standalone_failover import (
    CALLS_PER_TICKET,
    LATENCY_S,
    SERVICES_PORT,
    Outputs,
    cancel,
    create_ticket_topics,
    expected_outputs,
    failover_causes,
    job_running,
    job_status,
    release,
    rest,
    start_producer,
    submit,
    taskmanager_log_tail,
    ticket_lines,
    totals,
    wait_for,
    write_spec,
)
from examples.services import ExampleServices, _digest, _Handler
from flink_agents.durable.store import ActionState, ActionStateKey, RecordCodec, RecoveryMarker
from flink_agents.durable.store._codec import record_epoch
from flink_agents.durable.store.kafka import KafkaActionStateStore, KafkaStoreSettings

#: A call answered this long before a fault counts as recorded (the store acknowledges a result
#: before the action sees it; the slack covers that write on a loaded machine).
RECORDED_SLACK_S = 1.0


def start_services(make: Callable[[], ExampleServices]) -> ExampleServices:
    """Services from ``make`` on the witness's fixed port (the agent YAML's), which another
    test run may hold for a while (the whole test must stay within pytest's 300 s)."""
    deadline = time.monotonic() + 90
    while True:
        try:
            return make().start()
        except OSError as exc:
            if time.monotonic() > deadline:
                pytest.fail(f"the services' port stays busy ({exc})", pytrace=False)
            time.sleep(1)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat (utime, stime), counted after the command's closing parenthesis.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Verdict:
    """What the witness and the output topic saw, and the oracle over it."""

    name: str
    expected: dict[tuple[str, int], str]
    records: list[dict[str, Any]]
    calls: dict[str, int]
    distinct: dict[str, int]
    reinvoked: dict[str, int]
    in_flight: dict[str, int]
    failovers: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def sent_again(self) -> dict[str, int]:
        return {service: self.calls[service] - self.distinct[service] for service in self.calls}

    def report(self) -> str:
        answered = {(r["key"], r["seq"]) for r in self.records}
        lines = [
            f"{len(self.expected)} tickets, {len(self.records)} output records "
            f"({len(answered)} distinct (key, seq))",
            f"job failovers ({len(self.failovers)}, newest first): {self.failovers}",
            f"witness calls: {self.calls}; distinct: {self.distinct}",
            f"in flight around the fault: {self.in_flight}; sent again: {self.sent_again}",
            f"completed before the fault and re-invoked: {self.reinvoked} (expected all 0)",
            *self.notes,
        ]
        return "\n".join(f"[{self.name}] {line}" for line in lines)

    def check(self) -> None:
        """The oracle (see the module docstring)."""
        errors = [r for r in self.records if "error" in r]
        assert not errors, f"error outputs: {errors[:3]}"
        seen: dict[tuple[str, int], set[str]] = {}
        for record in self.records:
            seen.setdefault((record["key"], record["seq"]), set()).add(record["output"])
        missing = sorted(set(self.expected) - set(seen))
        assert not missing, f"inputs lost (no answer): {missing}"
        extra = sorted(set(seen) - set(self.expected))
        assert not extra, f"answers to no input (unexpected seq): {extra}"
        wrong = {k: v for k, v in seen.items() if v != {self.expected[k]}}
        assert not wrong, f"answers differing from the expected ones: {wrong}"
        tickets = len(self.expected)
        needed = {service: n * tickets for service, n in CALLS_PER_TICKET.items()}
        assert self.distinct == dict(sorted(needed.items())), (
            f"the witness saw other calls than the tickets need: {self.distinct} != {needed}"
        )
        assert not any(self.reinvoked.values()), f"completed calls re-invoked: {self.reinvoked}"
        over = {
            service: resent
            for service, resent in self.sent_again.items()
            if resent > self.in_flight.get(service, 0)
        }
        assert not over, (
            f"more calls sent again than were in flight around the fault: {over} > "
            f"{self.in_flight} (a completed call was made again)"
        )


class FaultRun:
    """The support-desk job on the standalone cluster with its witness, topics and producer.

    ``adjust_spec`` may change the job spec (a dict) before it is written; ``witness`` starts
    the services (the example services by default; a scenario may pass faulty ones).
    """

    def __init__(
        self,
        name: str,
        cluster: Any,
        bootstrap: str,
        tmp_path: Path,
        *,
        adjust_spec: Callable[[dict[str, Any]], None] | None = None,
        witness: Callable[[], ExampleServices] | None = None,
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.bootstrap = bootstrap
        self.lines = ticket_lines()
        self.expected = expected_outputs(self.lines)
        run_id = uuid.uuid4().hex[:8]
        self.spec, self.topics = write_spec(tmp_path, bootstrap, run_id)
        if adjust_spec is not None:
            spec = yaml.safe_load(self.spec.read_text())
            adjust_spec(spec)
            self.spec.write_text(yaml.safe_dump(spec, sort_keys=False))
        self._start_witness = witness or (
            lambda: start_services(lambda: ExampleServices(SERVICES_PORT, LATENCY_S))
        )
        self.produced: list[float] = []
        self.job_id: str | None = None
        self.started = time.monotonic()
        self.started_epoch = time.time()

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> FaultRun:
        self.admin = create_ticket_topics(self.bootstrap, self.topics)
        self.witness = self._start_witness()
        self.outputs = Outputs(self.bootstrap, self.topics["output"]).start()
        try:
            self.job_id = submit(self.cluster, self.spec)
            self.wait("the job to run", self.running, 120)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.producer = start_producer(
            self.bootstrap, self.topics["input"], self.lines, self.produced
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is not None:
            print(self.state())
        if self.job_id:
            cancel(self.cluster, self.job_id)
        self.outputs.stop()
        release(self.witness, self.admin, self.topics)

    # --- observing ------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def state(self) -> str:
        return (
            f"[{self.name}] +{self.elapsed():.1f} s job {self.job_id}: "
            f"{job_status(self.cluster, self.job_id)}\n"
            f"produced {len(self.produced)}/{len(self.lines)} tickets, "
            f"{len(self.outputs.answered())} answers, witness calls {totals(self.witness)}\n"
            + taskmanager_log_tail(self.cluster)
        )

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        wait_for(what, condition, timeout_s, self.state)

    def running(self) -> bool:
        assert self.job_id is not None
        return job_running(self.cluster, self.job_id)

    def completed_checkpoints(self) -> int:
        return int(rest(self.cluster, f"/jobs/{self.job_id}/checkpoints")["counts"]["completed"])

    def answered(self) -> int:
        return len(self.outputs.answered())

    def wait_for_calls_in_flight(self, answers: int = 4) -> None:
        """Until ``answers`` tickets are answered, a checkpoint completed and calls are open."""

        def ready() -> bool:
            if self.answered() < answers or sum(self.witness.counters.open_now().values()) < 2:
                return False
            return self.completed_checkpoints() > 0

        self.wait("answers, a checkpoint and calls in flight", ready, 120)

    def requests_started_after(self, moment: float) -> dict[str, int]:
        """Per service, requests that reached the witness after ``moment`` (epoch s)."""
        counters = self.witness.counters
        started_by = counters.in_flight_between(0.0, moment)  # every request started by then
        return {s: n - started_by.get(s, 0) for s, n in totals(self.witness).items()}

    def repeats_started_after(self, moment: float) -> dict[str, int]:
        """Per service, requests that reached the witness after ``moment`` (epoch s) repeating
        an idempotency key requested before it: calls sent again from then on."""
        return {
            service: sum(
                sum(1 for started, _ in times if started > moment)
                for times in per_key.values()
                if min(started for started, _ in times) <= moment
            )
            for service, per_key in self.witness.counters.requests().items()
        }

    # --- the end --------------------------------------------------------------------------------

    def finish(self, timeout_s: float = 150) -> None:
        """Until every ticket is produced and answered, then 2 s for late duplicates."""
        self.producer.join(timeout=60)
        self.wait(
            f"all {len(self.expected)} answers",
            lambda: set(self.expected) <= self.outputs.answered(),
            timeout_s,
        )
        time.sleep(2)

    def verdict(self, fault_start: float, fault_end: float | None = None) -> Verdict:
        """The oracle's inputs for a fault from ``fault_start`` to ``fault_end`` (epoch s)."""
        history = rest(self.cluster, f"/jobs/{self.job_id}/exceptions")["exceptionHistory"]
        counts = self.witness.counters.snapshot()
        counters = self.witness.counters
        return Verdict(
            name=self.name,
            expected=self.expected,
            records=self.outputs.snapshot(),
            calls={service: sum(keys.values()) for service, keys in sorted(counts.items())},
            distinct={service: len(keys) for service, keys in sorted(counts.items())},
            reinvoked=counters.repeated_after(fault_start - RECORDED_SLACK_S),
            in_flight=counters.in_flight_between(
                fault_start - RECORDED_SLACK_S, fault_end or fault_start
            ),
            failovers=failover_causes(history["entries"]),
        )


def require_own_service(port: int, what: str) -> None:
    """Faults on a service others share would disturb them: where ``FLINK_AGENTS_SERVICES_SHARED=1``
    says so, refuse the default ports (use your own broker and cluster there)."""
    if os.environ.get("FLINK_AGENTS_SERVICES_SHARED") == "1" and port in (9092, 8081):
        pytest.fail(
            f"this scenario stops the {what} on port {port}, and FLINK_AGENTS_SERVICES_SHARED=1 "
            f"says others share it; run it against your own (KAFKA_PORT / FLINK_REST_PORT)",
            pytrace=False,
        )


@dataclass
class StoreAudit:
    """The store topic read independently of the store, against what the store restores."""

    late: list[str]
    """Records written after a newer writer's record of their key (a zombie's late writes)."""
    late_behind: list[str]
    """Those of them behind the record before (they would undo progress if loaded)."""
    fenced: int
    """Records the store's restore skipped as a replaced writer's."""
    differing: list[str]
    """Keys whose restored state is not the newest writer's last record."""


def audit_store(bootstrap: str, topic: str) -> StoreAudit:
    """Read every record of the store topic (one partition) with their writer epochs, then
    restore the whole topic with the store itself, and compare: for each key, a restore must
    hand back the last record of the newest writer (flink_agents/durable/store/log_store.py)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    settings = KafkaStoreSettings(bootstrap_servers=bootstrap, topic=topic, partitions=1)
    codec = RecordCodec(settings.signing_secret(), scope=topic)  # as the job's store signs
    newest: dict[bytes, tuple[int, int, dict[str, Any] | None]] = {}  # key -> offset, epoch, body
    late: list[str] = []
    late_behind: list[str] = []
    try:
        for message in consumer:
            body = None
            if message.value is not None:
                _, envelope = codec.open(
                    message.key, message.value, topic=topic, partition=0, offset=message.offset
                )
                body = json.loads(envelope)["body"]
            epoch = 0 if message.value is None else record_epoch(message.value)
            previous = newest.get(message.key)
            if previous is not None and epoch < previous[1]:
                where = f"offset {message.offset} of {message.key.decode()} (after {previous[0]})"
                late.append(where)
                if _behind(body, previous[2]):
                    late_behind.append(where)
                continue
            newest[message.key] = (message.offset, epoch, body)
    finally:
        consumer.close()
    store = KafkaActionStateStore(settings)
    try:
        everything = RecoveryMarker(
            topic=topic, store_id="audit", taken=0, partitions={0: {"low": 0, "end": 0}}
        )
        report = store.restore(everything)
        differing = []
        for key, (_, _, body) in newest.items():
            restored = store.get(ActionStateKey.model_validate_json(key))
            expected = None if body is None else ActionState.model_validate(body)
            if (restored and restored.model_dump()) != (expected and expected.model_dump()):
                differing.append(key.decode())
    finally:
        store.close()
    return StoreAudit(late, late_behind, report.fenced, differing)


def _behind(state: dict[str, Any] | None, before: dict[str, Any] | None) -> bool:
    """Whether ``state`` undoes progress recorded in ``before`` (None: a tombstone)."""
    if before is None:  # nothing may follow a tombstone
        return True
    if state is None:
        return False
    if before["completed"] and not state["completed"]:
        return True
    finished = {c["call_id"] for c in before["calls"] if c["status"] != "pending"}
    still = {c["call_id"] for c in state["calls"] if c["status"] != "pending"}
    return not finished <= still


class FlakyModelServices(ExampleServices):
    """The example services, whose model endpoints fail while :meth:`fail_for` is in effect:
    every other request answers 500, the rest hang past the client's timeout. A failed attempt
    is counted apart (:attr:`failed_attempts`, per idempotency key), never as a served call."""

    def __init__(self, port: int, latency_seconds: float, hang_seconds: float) -> None:
        super().__init__(port, latency_seconds)
        self.RequestHandlerClass = _FlakyHandler
        self.hang_seconds = hang_seconds
        self.failing_until = 0.0
        self.failed_attempts: dict[str, int] = {}
        self._failures = 0
        self._failure_lock = threading.Lock()

    def fail_for(self, seconds: float) -> None:
        self.failing_until = time.time() + seconds

    def next_failure(self, key: str) -> int:
        """Count a failed attempt of ``key``; returns how many failed so far, all keys."""
        with self._failure_lock:
            self.failed_attempts[key] = self.failed_attempts.get(key, 0) + 1
            self._failures += 1
            return self._failures


class _FlakyHandler(_Handler):
    server: FlakyModelServices

    def do_POST(self) -> None:
        # The model endpoints fail (chat completions and embeddings), the other services not.
        if not self.path.startswith("/v1/") or time.time() >= self.server.failing_until:
            super().do_POST()
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = _digest(json.loads(raw))  # the key the model service counts a request under
        if self.server.next_failure(key) % 2:
            self._answer(500, {"error": {"message": "injected outage"}})
        else:
            time.sleep(self.server.hang_seconds)  # the client has given up meanwhile
            self._answer(503, {"error": {"message": "injected timeout"}})
