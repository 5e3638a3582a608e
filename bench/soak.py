"""The soak: the support desk at a steady rate for a long while, with seeded faults mixed in.

``make soak DURATION=5m`` (or ``python -m bench.soak --duration 5m``) starts its own Kafka
broker and its own standalone Flink cluster with two TaskManagers of one slot each, on ports of
its own (9192, REST 8181, RPC 6223 by default: never a developer's 9092 or 8081), submits the
support desk (``jobs/support_desk``: a ReAct desk delegating to an internal ReAct researcher with
an HTTP tool and to an external billing sub-agent) with the Kafka action-state store and the
exactly-once Kafka sink, writes tickets to its input topic at ``--rate`` per second, and does the
faults of a schedule drawn from ``--seed`` (:mod:`bench.soak_schedule`; written out, and
``--schedule FILE`` repeats one). The model, tool and billing services answer with a heavy-tailed
latency and count every request (the witness). Meanwhile it samples what must not grow
(:mod:`bench.soak_growth`) and reads the store topic and the committed outputs. At the end it
drains and checks the whole history (:mod:`bench.soak_checker`). ``--mixed`` runs a second job
beside the desk on the same cluster (two slots per TaskManager): the refund desk of
:mod:`bench.soak_refunds`, a workflow agent with retrieval and an approval wait, with its own
topics, a scripted person deciding its waits, and its calls and waits checked too. It exits 1
on any violation or growth beyond its bound, and stops the services it started (it kills
TaskManagers only by the pids in its own cluster's pid folder).

Output in ``.cache/soak/<run>/``: ``schedule.json``, ``samples.jsonl``, ``verdict.json``;
``--record FILE`` also writes the summary (markdown) and a plot beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from bench.crash_oracle import (
    ModelCalls,
    Request,
    completed_at,
    requests_of,
    store_codec,
    terminal_calls,
)
from bench.native_heap import MALLOC_FIGURES, smaps_classes_mb
from bench.soak_checker import Happened, Output, Verdict, check_history, check_waits
from bench.soak_flink import (
    block_checkpoints,
    next_checkpoint_id,
    restart_count,
    restoring_state,
    unblock_checkpoints,
)
from bench.soak_growth import (
    MIN_COVERED_S,
    Growth,
    Segments,
    directory_mb,
    judge_growth,
    log_records,
    sample_process,
)
from bench.soak_heap import FOLDER_VARIABLE, read_heaps
from bench.soak_refunds import (
    Decider,
    expected_answers,
    gated_runs,
    order_line,
    resolutions,
    searches,
    write_plan,
    write_policy,
)
from bench.soak_refunds import build_agent as refund_desk
from bench.soak_refunds import witness_key as refund_witness_key
from bench.soak_schedule import KINDS, Fault, draw_schedule, read_schedule, write_schedule
from e2e.fault_harness import FlakyModelServices
from e2e.test_standalone_failover import (
    AGENT,
    TICKETS,
    cancel,
    cluster_script,
    expected_outputs,
    job_running,
    rest,
    submit,
    write_spec,
)
from flink_agents.durable.store import CallResult
from flink_agents.durable.store.kafka import KafkaStoreSettings

REPO = Path(__file__).resolve().parents[1]
KAFKA_SCRIPT = REPO / "scripts" / "kafka.sh"
CLUSTER_SCRIPT = REPO / "scripts" / "flink-cluster.sh"
TASKMANAGERS = 2
#: The client's timeout per model, tool or billing request; latencies stay below it (a slow
#: answer past it would be sent again by the client, not by a fault).
CLIENT_TIMEOUT_S = 12.0
LATENCY_CAP_S = 4.0
SLOW_FACTOR = 3.0
SAMPLE_EVERY_S = 5.0
#: scripts/flink-cluster.sh's heartbeat.timeout: a lost TaskManager is deregistered after it.
HEARTBEAT_TIMEOUT_S = 10.0
CHECKPOINT_INTERVAL_MS = 2000
#: The event-log topic keeps this much (``retention.ms``), in segments of EVENT_LOG_SEGMENT_MS,
#: and the soak's broker looks for segments past it every RETENTION_CHECK_MS: the topic holds
#: at most about 3 minutes of records however long the run.
EVENT_LOG_RETENTION_MS = 120_000
EVENT_LOG_SEGMENT_MS = 30_000
RETENTION_CHECK_MS = 30_000
#: How long :meth:`Faults._restore_restart` waits for the job to be restoring after its kill.
RESTORE_WAIT_S = 120.0
#: Runs this long or longer judge growth, and need samples enough for it (soak_growth).
JUDGED_RUN_S = 1800.0


# --- the services: heavy-tailed latency, failing or slow for a while --------------------------


class SoakServices(FlakyModelServices):
    """The example services (the witness) with a Pareto latency per request (most answers
    quick, a few up to :data:`LATENCY_CAP_S`), :meth:`slow_for` multiplying it, and the model
    endpoint failing while :meth:`fail_for` is in effect."""

    def __init__(self, port: int, seed: int, scale_s: float) -> None:
        self._rng = random.Random(seed)
        self.slow_until = 0.0
        super().__init__(port, scale_s, hang_seconds=3.0)

    @property  # type: ignore[override]
    def latency_seconds(self) -> float:
        """One draw per request (the handler sleeps this long before answering)."""
        draw = min(self._scale * self._rng.paretovariate(1.6), LATENCY_CAP_S)
        return draw * SLOW_FACTOR if time.time() < self.slow_until else draw

    @latency_seconds.setter
    def latency_seconds(self, scale: float) -> None:
        self._scale = scale

    def slow_for(self, seconds: float) -> None:
        self.slow_until = time.time() + seconds


#: The model connections' client options: the timeout, and a retry budget that outlasts the
#: longest model failure of the schedule.
CLIENT: dict[str, Any] = {
    "timeout_seconds": CLIENT_TIMEOUT_S,
    "retry": {"max_attempts": 10, "initial_backoff_seconds": 0.5},
}


def soak_agent(run_dir: Path, services_url: str) -> Path:
    """The support desk reaching the services at ``services_url`` with :data:`CLIENT`."""
    agent = yaml.safe_load(AGENT.read_text())
    desk = agent["agents"][0]
    connections = [desk["connections"], desk["subagents"]["researcher"]["agent"]["connections"]]
    for connection in connections:
        arguments = connection["services"]["arguments"]
        arguments["base_url"] = f"{services_url}/v1"
        arguments.update(CLIENT)
    desk["subagents"]["billing"]["arguments"]["url"] = f"{services_url}/billing"
    path = run_dir / "support_desk.yaml"
    path.write_text(yaml.safe_dump(agent, sort_keys=False))
    return path


# --- the own services: broker and cluster on the soak's ports ----------------------------------


@dataclass
class SoakCluster:
    """The soak's own standalone cluster (what the e2e helpers take: ``rest_url``, ``env``)."""

    rest_url: str
    env: dict[str, str]

    @property
    def pid_dir(self) -> Path:
        return Path(self.env["FLINK_PID_DIR"])

    def taskmanager_pids(self) -> list[int]:
        return [
            int(word)
            for pid_file in self.pid_dir.glob("*taskexecutor*.pid")
            for word in pid_file.read_text().split()
        ]

    def jobmanager_pid(self) -> int | None:
        found = [
            int(word)
            for pid_file in self.pid_dir.glob("*standalonesession*.pid")
            for word in pid_file.read_text().split()
        ]
        return found[0] if found else None

    def forget(self, pid: int) -> None:
        """Drop a killed TaskManager from the pid files (flink-cluster.sh stops what is left)."""
        for pid_file in self.pid_dir.glob("*taskexecutor*.pid"):
            kept = [word for word in pid_file.read_text().split() if word != str(pid)]
            pid_file.write_text("".join(f"{word}\n" for word in kept))

    def registered_taskmanagers(self) -> int:
        """TaskManagers the JobManager knows (0 while it does not answer, busy starting or with
        a failover on a loaded machine: the callers ask again)."""
        try:
            return len(rest(self, "/taskmanagers")["taskmanagers"])
        except OSError:
            return 0


@dataclass
class Ports:
    kafka: int
    rest: int
    rpc: int
    services: int

    def refuse_shared(self) -> None:
        """The soak kills and restarts what it uses: never the shared defaults."""
        if self.kafka == 9092 or self.rest == 8081:
            sys.exit("bench.soak: 9092 and 8081 are the shared broker and cluster; use others")


def script_env(ports: Ports, slots: int = 1) -> dict[str, str]:
    """What the scripts start the soak's services with (``slots`` per TaskManager: one per
    job); the store secret the TaskManagers sign with is this process's too (it reads the store
    topic at the end)."""
    if not os.environ.get("FLINK_AGENTS_STORE_SECRET"):
        secret = run_script(REPO / "scripts" / "store-secret.sh", "", dict(os.environ)).strip()
        os.environ["FLINK_AGENTS_STORE_SECRET"] = secret
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_")},
        "KAFKA_PORT": str(ports.kafka),
        # The broker's data beside the soak's runs (deleted topics and all), not in a shared cache.
        "KAFKA_DATA_DIR": str(REPO / ".cache" / "soak" / f"kafka-data-{ports.kafka}"),
        "FLINK_REST_PORT": str(ports.rest),
        "FLINK_RPC_PORT": str(ports.rpc),
        "FLINK_TM_SLOTS": str(slots),
        "KAFKA_RETENTION_CHECK_MS": str(RETENTION_CHECK_MS),
        # The researcher's tool (examples/support_desk.py) runs in the TaskManagers.
        "FLINK_AGENTS_EXAMPLE_SERVICES": f"http://127.0.0.1:{ports.services}",
        # Where the job's interpreters write their heap figures (bench/soak_heap.py).
        FOLDER_VARIABLE: str(heap_folder(ports)),
    }


def heap_folder(ports: Ports) -> Path:
    """The folder the cluster's interpreters write their heap figures to (one per cluster: a
    cluster left up with ``--keep-services`` keeps writing there)."""
    return REPO / ".cache" / "soak" / f"python-heap-{ports.rest}"


def run_script(script: Path, command: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", str(script), *([command] if command else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} {command} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def start_cluster(env: dict[str, str], rest_port: int) -> SoakCluster:
    """Start the soak's cluster (a JobManager and :data:`TASKMANAGERS` TaskManagers)."""
    run_script(CLUSTER_SCRIPT, "start", env)
    exported = run_script(CLUSTER_SCRIPT, "env", env)
    cluster_env = dict(env)
    for assignment in exported.removeprefix("export ").split():
        name, _, value = assignment.partition("=")
        cluster_env[name] = value
    cluster = SoakCluster(f"http://127.0.0.1:{rest_port}", cluster_env)
    for _ in range(TASKMANAGERS - len(cluster.taskmanager_pids())):
        cluster_script(cluster, "start-taskmanager")
    deadline = time.monotonic() + 120
    while cluster.registered_taskmanagers() < TASKMANAGERS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {TASKMANAGERS} TaskManagers after 120 s")
        time.sleep(1)
    return cluster


# --- the workload: tickets in, answers out ------------------------------------------------------


def ticket_line(n: int, questions: list[str], customers: int) -> str:
    """The ``n``-th ticket: customers in turn, the support desk's questions in turn."""
    return json.dumps(
        {
            "ticket": f"T-{100000 + n}",
            "customer": f"soak-{n % customers}",
            "question": questions[n % len(questions)],
        }
    )


def ticket_lines(customers: int) -> Callable[[int], str]:
    """The support desk's tickets, ``n`` -> the ``n``-th (:func:`ticket_line`)."""
    questions = [json.loads(line)["question"] for line in TICKETS.read_text().splitlines()]
    return lambda n: ticket_line(n, questions, customers)


@dataclass
class Workload:
    """Writes ``line(n)`` for n = 0, 1, ... at ``rate`` per second until stopped (an idempotent
    producer: a broker fault delays inputs, never loses or doubles one)."""

    bootstrap: str
    topic: str
    rate: float
    line: Callable[[int], str]
    lines: list[str] = field(default_factory=list)
    acknowledged: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Workload:
        self._thread = threading.Thread(target=self._run, name=f"soak-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "log_level": 3,  # errors only: a broker fault is expected here
                "delivery.timeout.ms": 600_000,
                "linger.ms": 0,
            }
        )
        began = time.monotonic()
        while not self._stop.is_set():
            line = self.line(len(self.lines))
            self.lines.append(line)
            producer.produce(self.topic, line.encode(), on_delivery=self._delivered)
            producer.poll(0)
            # Steady: the n-th ticket at n / rate, however long a produce() took.
            self._stop.wait(max(0.0, began + len(self.lines) / self.rate - time.monotonic()))
        if producer.flush(600) > 0:
            raise RuntimeError(f"inputs to {self.topic} not acknowledged within 600 s of the end")

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            raise RuntimeError(f"input not written: {error}")
        self.acknowledged.append(time.time())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=660)


@dataclass
class CommittedOutputs:
    """Every answer of the topic as a downstream reader of the exactly-once sink sees it
    (``read_committed``), with when it was read; the other records (``waiting``, ``refused``)
    go to ``on_record``, in the order read (the decider reads them there)."""

    bootstrap: str
    topic: str
    on_record: Callable[[dict[str, Any]], None] = lambda record: None
    outputs: list[Output] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> CommittedOutputs:
        self._thread = threading.Thread(target=self._run, name="soak-outputs", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"soak-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "log_level": 3,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.3)
                if message is None or message.error():
                    continue
                body = json.loads(message.value())
                if "output" not in body and "error" not in body:
                    self.on_record(body)
                    continue
                with self._lock:
                    self.outputs.append(Output(body["key"], body["seq"], time.time(), body))
        finally:
            consumer.close()

    def snapshot(self) -> list[Output]:
        with self._lock:
            return list(self.outputs)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@dataclass
class StoreTail:
    """Every finished call on a store topic, read from its start while the run goes on: the
    store tombstones a run's records a minute after it ended and compaction then removes them
    (segments of 60 s, :func:`create_topics`), so the topic read after an hour no longer holds
    the early calls; a reader that keeps up sees every record before compaction can act."""

    store: KafkaStoreSettings
    outcomes: list[tuple[float, CallResult]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> StoreTail:
        self._thread = threading.Thread(target=self._run, name="soak-store-tail", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        codec = store_codec(self.store)
        consumer = Consumer(
            {
                "bootstrap.servers": str(self.store.bootstrap_servers),
                "group.id": f"soak-store-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "log_level": 3,
            }
        )
        consumer.assign([TopicPartition(self.store.topic, 0, 0)])
        at_end = False
        try:
            while not (at_end and self._stop.is_set()):  # stopped: once caught up
                message = consumer.poll(0.3)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    at_end = at_end or error.code() == KafkaError._PARTITION_EOF
                    continue
                at_end = False
                self.outcomes.extend(terminal_calls(codec, message))
        finally:
            consumer.close()

    def stop(self) -> list[tuple[float, CallResult]]:
        """Read up to the topic's end, then stop; every finished call read."""
        self._stop.set()
        self._thread.join(timeout=120)
        if self._thread.is_alive():
            raise RuntimeError(f"the store topic {self.store.topic} not read to its end in 120 s")
        return self.outcomes


# --- the faults --------------------------------------------------------------------------------


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1
    return int(fields[11]) + int(fields[12])


def busiest(pids: list[int]) -> int:
    """The TaskManager using the most CPU over a second: the one running the job (at once when
    there is one)."""
    if len(pids) == 1:
        return pids[0]
    if not pids:
        raise RuntimeError("no TaskManager left to pick from")
    before = {pid: cpu_ticks(pid) for pid in pids}
    time.sleep(1)
    return max(pids, key=lambda pid: cpu_ticks(pid) - before[pid])


class Done(NamedTuple):
    """What a fault method returns: when it began and ended (epoch seconds), what the job did
    about it where the method looked ("" where it did not), and whether it may explain a call
    sent again (:class:`bench.soak_checker.Happened`)."""

    start: float
    end: float
    outcome: str = ""
    explains_resends: bool = True


def job_restarts(cluster: SoakCluster, job_id: str) -> int | None:
    """The job's ``numRestarts`` (None when the JobManager does not answer)."""
    try:
        found: Any = rest(cluster, f"/jobs/{job_id}/metrics?get=numRestarts")  # a list
    except OSError:
        return None
    return restart_count(found)


def checkpoint_figures(cluster: SoakCluster, job_id: str) -> dict[str, Any]:
    """``GET /jobs/<id>/checkpoints``: counts, latest completed and failed, recent history."""
    return rest(cluster, f"/jobs/{job_id}/checkpoints")


@dataclass
class SoakJob:
    """A job of the soak: its ``label`` in what a fault reports ("" for the first, the support
    desk), its id once submitted, and its checkpoint folder (``checkpointing.dir``)."""

    label: str
    checkpoints: Path
    job_id: str = ""


class Faults:
    """Does the faults of a schedule on the soak's own cluster, broker and services, and the
    checkpoint folders of its ``jobs``."""

    def __init__(
        self,
        cluster: SoakCluster,
        env: dict[str, str],
        services: SoakServices,
        broker_pid: Path,
        jobs: list[SoakJob],
    ) -> None:
        self.cluster, self.env, self.services, self.broker_pid = cluster, env, services, broker_pid
        self.jobs = jobs
        self.happened: list[Happened] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # One fault of a target at a time: a kill whose replacement TaskManager is still starting
        # (a minute on a loaded machine) holds the next TaskManager fault back.
        self._targets = {target: threading.Lock() for target, _, _ in KINDS.values()}

    def start(self, fault: Fault) -> None:
        thread = threading.Thread(target=self._do, args=(fault,), name=fault.fault_id)
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def _do(self, fault: Fault) -> None:
        try:
            with self._targets[fault.target]:
                done = Done(*getattr(self, "_" + fault.kind.replace("-", "_"))(fault.duration))
        except Exception as exc:  # a fault that could not be done is reported, not fatal
            self.errors.append(f"{fault.fault_id}: {exc}")
            return
        start, end, outcome, explains = done
        with self._lock:
            self.happened.append(
                Happened(fault.fault_id, fault.kind, start, end, outcome, explains)
            )
        said = f": {outcome}" if outcome else ""
        print(f"soak: {fault.fault_id} done ({end - start:.1f} s){said}", flush=True)

    def _kill_taskmanager(self) -> float:
        """``kill -9`` of the busiest TaskManager, forgotten by the pid files; when it was."""
        victim = busiest(self.cluster.taskmanager_pids())
        moment = time.time()
        os.kill(victim, signal.SIGKILL)
        self.cluster.forget(victim)
        return moment

    def _taskmanager_kill(self, _: float) -> Done:
        moment = self._kill_taskmanager()
        self._top_up(wait_s=HEARTBEAT_TIMEOUT_S)
        return moment, moment, ""

    def _restore_restart(self, _: float) -> Done:
        """Kill the job's TaskManager, wait until the job is being deployed again or restoring
        its state on the one left, and kill that one then: a failure during a restore."""
        first = self._kill_taskmanager()
        deadline = time.monotonic() + RESTORE_WAIT_S
        while (state := self._restoring()) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the job was not restoring {RESTORE_WAIT_S:.0f} s after a kill")
            time.sleep(0.1)
        second = self._kill_taskmanager()
        self._top_up(wait_s=HEARTBEAT_TIMEOUT_S)
        return first, second, f"second kill {second - first:.1f} s after the first, tasks {state}"

    def _restoring(self) -> str | None:
        """What a job being restored is doing (the first job found so), else None."""
        for job in self.jobs:
            try:
                state = restoring_state(rest(self.cluster, f"/jobs/{job.job_id}"))
            except OSError:
                continue  # the JobManager busy with the failover: ask again
            if state is not None:
                return state
        return None

    def _checkpoint_failing(self, duration: float) -> Done:
        """Every job's checkpoints fail for ``duration``
        (:func:`bench.soak_flink.block_checkpoints`: the JobManager cannot create their
        folders). Reported per job: the checkpoints that failed, the job's restarts meanwhile,
        and when one completed again."""
        before = {
            job.job_id: (checkpoint_figures(self.cluster, job.job_id), self._restarts(job))
            for job in self.jobs
        }
        # Each interval triggers one checkpoint (one id); a margin for restarts' extra triggers.
        count = int(duration * 1000 / CHECKPOINT_INTERVAL_MS) * 3 + 20
        start = time.time()
        made = [
            path
            for job in self.jobs
            for path in block_checkpoints(
                job.checkpoints / job.job_id,
                next_checkpoint_id(before[job.job_id][0]["history"]),
                count,
            )
        ]
        try:
            time.sleep(duration)
        finally:
            unblock_checkpoints(made)
        end = time.time()
        outcomes, restarted = [], []
        for job in self.jobs:
            figures, restarts_before = before[job.job_id]
            after = checkpoint_figures(self.cluster, job.job_id)
            failed = after["counts"]["failed"] - figures["counts"]["failed"]
            message = (after["latest"].get("failed") or {}).get("failure_message") or "-"
            restarts_after = self._restarts(job)
            restarted.append(
                "?"
                if restarts_before is None or restarts_after is None
                else str(restarts_after - restarts_before)
            )
            recovered = self._next_checkpoint_s(job, end, after)
            outcomes.append(
                (f"job {job.label}: " if job.label else "")
                + f"{failed} checkpoints failed ({message.splitlines()[0][:120]}), job restarts "
                f"{restarted[-1]}, next checkpoint completed {recovered}"
            )
        return Done(
            start,
            end,
            "; ".join(outcomes),
            # Failed checkpoints the jobs tolerated restart nothing, so they send nothing again.
            explains_resends=any(n != "0" for n in restarted),
        )

    def _restarts(self, job: SoakJob) -> int | None:
        return job_restarts(self.cluster, job.job_id)

    def _next_checkpoint_s(self, job: SoakJob, since: float, figures: dict[str, Any]) -> str:
        """How long after ``since`` a checkpoint of ``job`` completed again (waits up to a
        minute)."""
        completed = figures["counts"]["completed"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if checkpoint_figures(self.cluster, job.job_id)["counts"]["completed"] > completed:
                return f"{time.time() - since:.1f} s after"
            time.sleep(0.5)
        return "not within 60 s"

    def _taskmanager_stop(self, duration: float) -> Done:
        victim = busiest(self.cluster.taskmanager_pids())
        start = time.time()
        os.kill(victim, signal.SIGSTOP)
        try:
            time.sleep(duration)
        finally:
            os.kill(victim, signal.SIGCONT)
        end = time.time()
        # Resumed, it registers again or gives up; either way two TaskManagers serve after it.
        self._top_up(wait_s=HEARTBEAT_TIMEOUT_S * 2)
        return start, end, ""

    def _top_up(self, wait_s: float) -> None:
        """After ``wait_s`` (a lost TaskManager drops out after the heartbeat timeout), start as
        many as fewer than :data:`TASKMANAGERS` are registered or alive (a killed one may still
        be registered), and wait until they registered. ``flink-cluster.sh start-taskmanager
        --no-wait``: waiting for a free slot would not end (a restarting job takes it at once),
        and Flink's own ``taskmanager.sh`` alone would start it without the cluster's allocator
        (until 2026-12-05 every replacement TaskManager ran on glibc's malloc so)."""
        time.sleep(wait_s)
        alive = [pid for pid in self.cluster.taskmanager_pids() if Path(f"/proc/{pid}").exists()]
        missing = TASKMANAGERS - min(self.cluster.registered_taskmanagers(), len(alive))
        for _ in range(missing):
            cluster_script(self.cluster, "start-taskmanager", "--no-wait")
        deadline = time.monotonic() + 180
        while self.cluster.registered_taskmanagers() < TASKMANAGERS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {TASKMANAGERS} TaskManagers 180 s after a start")
            time.sleep(1)

    def _broker_restart(self, _: float) -> Done:
        start = time.time()
        try:
            run_script(KAFKA_SCRIPT, "stop", self.env)
        finally:
            run_script(KAFKA_SCRIPT, "start", self.env)
        return start, time.time(), ""

    def _broker_outage(self, duration: float) -> Done:
        pid = int(self.broker_pid.read_text())
        start = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(duration)
        finally:
            os.kill(pid, signal.SIGCONT)
        return start, time.time(), ""

    def _model_failing(self, duration: float) -> Done:
        start = time.time()
        self.services.fail_for(duration)
        time.sleep(duration)
        return start, time.time(), ""

    def _model_slow(self, duration: float) -> Done:
        start = time.time()
        self.services.slow_for(duration)
        time.sleep(duration)
        return start, time.time(), ""


# --- growth ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    """Where the sampler looks besides the processes: the store topics' (one per job) and the
    event-log topic's partition folders on the broker's disk, the event-log topic (for its
    offsets), and the folder the job's interpreters write their heap figures to."""

    bootstrap: str
    store_dirs: list[Path]
    event_log_topic: str
    event_log_dir: Path
    heap_dir: Path


class Sampler:
    """Every :data:`SAMPLE_EVERY_S`: processes, the interpreters' heaps, the jobs' checkpoint
    sizes and restarts and store topics (each summed over the jobs), the event-log topic, answers
    (all jobs')."""

    def __init__(
        self,
        cluster: SoakCluster,
        watched: Watched,
        outputs: list[CommittedOutputs],
        jobs: list[SoakJob],
        path: Path,
    ) -> None:
        self.cluster, self.watched, self.outputs, self.path = cluster, watched, outputs, path
        self.jobs = jobs
        self.samples: list[dict[str, float]] = []
        #: Per TaskManager pid, the C allocator its interpreter reported (glibc or jemalloc).
        self.allocators: dict[int, str] = {}
        self._stop = threading.Event()

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        # Offsets only: never subscribes, so no group and nothing committed. Quiet: it would log
        # every reconnect attempt while a fault has the broker down; a missing figure says so.
        self._offsets = Consumer(
            {
                "bootstrap.servers": self.watched.bootstrap,
                "group.id": "soak-sampler",
                "log_level": 0,
            }
        )
        try:
            with self.path.open("w") as out:
                while not self._stop.wait(SAMPLE_EVERY_S):
                    sample = self.sample()
                    self.samples.append(sample)
                    out.write(json.dumps(sample) + "\n")
                    out.flush()
        finally:
            self._offsets.close()

    def sample(self) -> dict[str, float]:
        """One row: ``metric@pid`` per process, ``metric`` for the run's."""
        answers = sum(len(reader.snapshot()) for reader in self.outputs)
        row: dict[str, float] = {"t": time.time(), "outputs": answers}
        jobmanager = self.cluster.jobmanager_pid()
        roles = [("taskmanager", pid) for pid in self.cluster.taskmanager_pids()]
        for role, pid in roles + ([("jobmanager", jobmanager)] if jobmanager else []):
            found = sample_process(pid)
            if found is not None:
                row[f"{role}_rss_mb@{pid}"] = found.rss_mb
                row[f"{role}_fds@{pid}"] = found.fds
                row[f"{role}_threads@{pid}"] = found.threads
                if role == "taskmanager":  # what its RSS is made of (recorded, not bounded)
                    with contextlib.suppress(OSError):  # gone while read
                        kinds = smaps_classes_mb(pid)
                        row.update((f"rss_{kind}_mb@{pid}", mb) for kind, mb in kinds.items())
        for pid, heap in read_heaps(self.watched.heap_dir, row["t"], 3 * SAMPLE_EVERY_S).items():
            if sample_process(pid) is not None:  # not a stopped one's last figures
                row[f"python_blocks@{pid}"] = heap["python_blocks"]
                row[f"python_threads@{pid}"] = heap["python_threads"]
                if "malloc" in heap:
                    self.allocators[pid] = heap["malloc"]
                for name in MALLOC_FIGURES:
                    if name in heap:
                        row[f"{name}@{pid}"] = heap[name]
                for name, count in heap.get("thread_names", {}).items():  # which ones grow
                    row[f"python_thread:{name}@{pid}"] = float(count)
        sizes, restarts = [], []
        for job in self.jobs:
            try:
                latest = rest(self.cluster, f"/jobs/{job.job_id}/checkpoints")["latest"]
                completed = latest["completed"]
                sizes.append(completed["state_size"] / 1024 if completed else None)
            except OSError:
                sizes.append(None)  # the JobManager busy with a failover: no figure this time
            restarts.append(job_restarts(self.cluster, job.job_id))
        if None not in sizes:  # a figure only when every job gave one
            row["checkpoint_kb"] = sum(size for size in sizes if size is not None)
        if None not in restarts:
            row["job_restarts"] = sum(n for n in restarts if n is not None)
        row["store_topic_mb"] = sum(directory_mb(folder) for folder in self.watched.store_dirs)
        row["store_topic_records"] = sum(log_records(folder) for folder in self.watched.store_dirs)
        row["event_log_topic_mb"] = directory_mb(self.watched.event_log_dir)
        try:
            low, high = self._offsets.get_watermark_offsets(
                TopicPartition(self.watched.event_log_topic, 0), timeout=2.0
            )
            row["event_log_records"] = high - low
        except KafkaException:
            pass  # the broker down or stopped by a fault: no record count this time
        return row

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def series(self) -> dict[str, Segments]:
        """Per metric, its segments: one per process (``metric@pid``), or ``""``."""
        found: dict[str, Segments] = {}
        for sample in self.samples:
            for name, value in sample.items():
                if name != "t":
                    metric, _, segment = name.partition("@")
                    found.setdefault(metric, {}).setdefault(segment, []).append(
                        (sample["t"], value)
                    )
        return found


# --- the run ------------------------------------------------------------------------------------


def parse_target_gap(text: str) -> tuple[str, float]:
    """``TARGET=SECONDS`` of ``--target-gap``."""
    target, _, seconds = text.partition("=")
    try:
        return target, float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TARGET=SECONDS, got {text!r}") from None


def parse_duration(text: str) -> float:
    """``90s``, ``5m``, ``1h`` or plain seconds."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smh]?)", text.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 5m, 1h)")
    return float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]


def create_topics(bootstrap: str, topics: dict[str, str]) -> None:
    """Input and output (and decisions, if named) with one partition each (a customer's seq
    follows the file order); the store topic as the store would create it, plus short segments
    so compaction acts within a run, and the broker's append time as each record's timestamp
    (when it became durable); the event-log topic, if named, as a log that keeps a few minutes
    (:data:`EVENT_LOG_RETENTION_MS`)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    store_config = {
        "cleanup.policy": "compact",
        "segment.ms": "60000",
        "min.cleanable.dirty.ratio": "0.1",
        "delete.retention.ms": "60000",
        "message.timestamp.type": "LogAppendTime",
    }
    event_log_config = {
        "cleanup.policy": "delete",
        "retention.ms": str(EVENT_LOG_RETENTION_MS),
        "segment.ms": str(EVENT_LOG_SEGMENT_MS),
    }
    configs = {"store": store_config, "event_log": event_log_config}
    try:
        admin.create_topics(
            [
                NewTopic(
                    topics[name],
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs=configs.get(name, {}),
                )
                for name in ("input", "output", "decisions", "store", "event_log")
                if name in topics
            ]
        )
    finally:
        admin.close()


def soak(args: argparse.Namespace) -> int:
    ports = Ports(args.kafka_port, args.rest_port, args.rpc_port, args.services_port)
    ports.refuse_shared()
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
    run_dir = REPO / ".cache" / "soak" / run_id
    run_dir.mkdir(parents=True)
    faults = (
        read_schedule(args.schedule)
        if args.schedule
        else draw_schedule(
            args.seed, args.duration, args.mean_gap, target_gaps=dict(args.target_gap)
        )
    )
    write_schedule(run_dir / "schedule.json", args.seed, faults)
    print(f"soak {run_id}: {args.duration:.0f} s, {len(faults)} faults, output in {run_dir}")

    env = script_env(ports, slots=2 if args.mixed else 1)
    try:
        return run_soak(args, run_id, run_dir, faults, env, ports)
    finally:
        if not args.keep_services:
            run_script(CLUSTER_SCRIPT, "stop", env)
            run_script(KAFKA_SCRIPT, "stop", env)


def job_settings(spec: Path, agent: str, checkpoints: Path, args: argparse.Namespace) -> Any:
    """The job spec at ``spec`` (:func:`e2e.test_standalone_failover.write_spec`'s) as every
    soak job runs: ``agent``, the exactly-once sink, checkpoints every
    :data:`CHECKPOINT_INTERVAL_MS` into ``checkpoints`` (tolerating
    ``--tolerable-failed-checkpoints``), restarts without end."""
    settings = yaml.safe_load(spec.read_text())
    settings["agent"] = agent
    settings["sink"]["delivery"] = "exactly-once"
    settings["checkpointing"] = {
        "interval_ms": CHECKPOINT_INTERVAL_MS,
        "dir": str(checkpoints),
        "tolerable_failed_checkpoints": args.tolerable_failed_checkpoints,
    }
    settings["restart_strategy"] = {"type": "fixed-delay", "attempts": 100_000, "delay_ms": 2000}
    return settings


@dataclass
class RefundDeskRun:
    """The mixed workload's second job (:mod:`bench.soak_refunds`) and what feeds and reads it."""

    job: SoakJob
    spec: Path
    topics: dict[str, str]
    witness: Path
    decider: Decider
    outputs: CommittedOutputs
    workload: Workload

    @classmethod
    def prepare(
        cls, args: argparse.Namespace, run_dir: Path, run_id: str, bootstrap: str, services_url: str
    ) -> RefundDeskRun:
        """Its spec, plan, policy records and topics; its output reader (the decider reading
        the ``waiting`` records) started."""
        folder = run_dir / "refunds"
        folder.mkdir()
        base, topics = write_spec(folder, bootstrap, run_id + "refunds")
        topics["decisions"] = f"soak-decisions-{run_id}"
        create_topics(bootstrap, topics)
        witness = folder / "searches.jsonl"
        policy = write_policy(folder / "policy.json")
        agent = refund_desk(services_url, policy, witness, args.approval_timeout, CLIENT)
        job = SoakJob("refunds", folder / "ckpt")
        settings = job_settings(
            base, str(write_plan(folder / "refund_desk.json", agent)), job.checkpoints, args
        )
        settings["name"] = f"soak-refund-desk-{run_id}"
        settings["key"] = "order"
        # The heap sampler here too: a TaskManager may hold this job alone.
        settings["event_log"] = {"listeners": ["bench.soak_heap:PythonHeapSampler"]}
        settings["decisions"] = {
            "kind": "kafka",
            "topic": topics["decisions"],
            "bootstrap_servers": bootstrap,
        }
        base.unlink()
        spec = folder / "refund_desk_job.yaml"
        spec.write_text(yaml.safe_dump(settings, sort_keys=False))
        decider = Decider(bootstrap, topics["decisions"])
        outputs = CommittedOutputs(bootstrap, topics["output"], decider).start()
        workload = Workload(bootstrap, topics["input"], args.refund_rate, order_line)
        return cls(job, spec, topics, witness, decider, outputs, workload)

    def summary(self) -> dict[str, Any]:
        verdicts: dict[str, int] = {}
        for decision in self.decider.decided.values():
            verdicts[decision["verdict"]] = verdicts.get(decision["verdict"], 0) + 1
        return {
            "orders": len(self.workload.lines),
            "waiting_records": self.decider.waiting,
            "decisions_sent": dict(sorted(verdicts.items())),
            "refused_records": len(self.decider.refused),
        }


def run_soak(
    args: argparse.Namespace,
    run_id: str,
    run_dir: Path,
    faults: list[Fault],
    env: dict[str, str],
    ports: Ports,
) -> int:
    """The soak on the services of ``env`` (started here if they are not running)."""
    bootstrap = f"127.0.0.1:{ports.kafka}"
    run_script(KAFKA_SCRIPT, "start", env)
    cluster = start_cluster(env, ports.rest)
    spec, topics = write_spec(run_dir, bootstrap, run_id.replace("-", ""))
    topics["event_log"] = f"soak-events-{run_id.replace('-', '')}"
    create_topics(bootstrap, topics)
    services = SoakServices(ports.services, args.seed, args.latency_scale).start()
    desk = SoakJob("", run_dir / "ckpt")
    settings = job_settings(spec, str(soak_agent(run_dir, services.url)), desk.checkpoints, args)
    # The event log on a topic (sampled for growth), and the heap sampler in the job's process.
    settings["event_log"] = {
        "kafka": {"topic": topics["event_log"], "bootstrap_servers": bootstrap, "partitions": 1},
        "listeners": ["bench.soak_heap:PythonHeapSampler"],
    }
    spec.write_text(yaml.safe_dump(settings, sort_keys=False))
    outputs = CommittedOutputs(bootstrap, topics["output"]).start()
    workload = Workload(bootstrap, topics["input"], args.rate, ticket_lines(args.customers))
    refunds = (
        RefundDeskRun.prepare(args, run_dir, run_id.replace("-", ""), bootstrap, services.url)
        if args.mixed
        else None
    )
    jobs = [(desk, spec)] + ([(refunds.job, refunds.spec)] if refunds else [])
    readers = [outputs] + ([refunds.outputs] if refunds else [])
    workloads = [workload] + ([refunds.workload] if refunds else [])
    broker_pid = REPO / ".cache" / "kafka" / f"run-{ports.kafka}" / "kafka.pid"
    data = Path(env["KAFKA_DATA_DIR"])
    store_topics = {
        job.label: job_topics["store"]
        for job, job_topics in [(desk, topics)]
        + ([(refunds.job, refunds.topics)] if refunds else [])
    }
    tails = {
        label: StoreTail(
            KafkaStoreSettings(bootstrap_servers=bootstrap, topic=topic, partitions=1)
        ).start()
        for label, topic in store_topics.items()
    }
    watched = Watched(
        bootstrap,
        store_dirs=[data / f"{topic}-0" for topic in store_topics.values()],
        event_log_topic=topics["event_log"],
        event_log_dir=data / f"{topics['event_log']}-0",
        heap_dir=heap_folder(ports),
    )
    doer = Faults(cluster, env, services, broker_pid, [job for job, _ in jobs])
    sampler = Sampler(
        cluster, watched, readers, [job for job, _ in jobs], run_dir / "samples.jsonl"
    )
    try:
        for job, job_spec in jobs:
            job.job_id = submit(cluster, job_spec)
        deadline = time.monotonic() + 180
        while not all(job_running(cluster, job.job_id) for job, _ in jobs):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"jobs {[job.job_id for job, _ in jobs]} not running after 180 s"
                )
            time.sleep(1)
        sampler.start()
        for each in workloads:
            each.start()
        began = time.monotonic()
        for fault in faults:
            time.sleep(max(0.0, began + fault.at - time.monotonic()))
            print(f"soak: +{fault.at:.0f} s {fault.fault_id} ({fault.duration:g} s)", flush=True)
            doer.start(fault)
        time.sleep(max(0.0, began + args.duration - time.monotonic()))
        for each in workloads:
            each.stop()
        doer.join()
        expected = expected_outputs(workload.lines)
        if refunds:
            expected |= expected_answers(refunds.workload.lines)
        drain_until = time.monotonic() + args.drain
        while time.monotonic() < drain_until:
            answered = {(o.key, o.seq) for reader in readers for o in reader.snapshot()}
            if len(answered) >= len(expected):
                break
            time.sleep(2)
        time.sleep(5)  # late duplicates, if any, arrive too
        sampler.stop()
    finally:
        for job, _ in jobs:
            if job.job_id:
                cancel(cluster, job.job_id)
        for reader in readers:
            reader.stop()
        if refunds:
            refunds.decider.close()
        services.shutdown()
        services.server_close()
    outcomes = {label: tail.stop() for label, tail in tails.items()}
    verdict = check(services, outcomes, refunds, doer.happened, expected, readers)
    # A short run (a smoke) cannot tell a warm-up from growth: its slopes are shown, not judged
    # unmeasured.
    growth = judge_growth(
        sampler.series(),
        sampler.samples[0]["t"],
        sampler.samples[-1]["t"],
        required_s=MIN_COVERED_S if args.duration >= JUDGED_RUN_S else 0.0,
    )
    summary = summarize(args, run_id, faults, doer, verdict, growth, sampler)
    summary["allocator_errors"] = allocator_errors(
        sampler.allocators, os.environ.get("FLINK_MALLOC", "glibc")
    )
    if refunds:
        summary["refund_desk"] = refunds.summary()
    (run_dir / "verdict.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print_summary(summary)
    if args.record:
        record(args.record, summary, sampler, doer.happened)
    judged = verdict.ok and all(g.ok for g in growth)
    return 0 if judged and not doer.errors and not summary["allocator_errors"] else 1


def allocator_errors(allocators: dict[int, str], expected: str) -> list[str]:
    """Each TaskManager whose interpreter ran on another C allocator than the cluster was
    started with (``FLINK_MALLOC``): its RSS figures are not the configuration under test."""
    return [
        f"TaskManager {pid} ran on {found}'s malloc, the cluster on {expected}'s (FLINK_MALLOC)"
        for pid, found in sorted(allocators.items())
        if found != expected
    ]


def check(
    services: SoakServices,
    outcomes: dict[str, list[tuple[float, CallResult]]],
    refunds: RefundDeskRun | None,
    faults: list[Happened],
    expected: dict[tuple[str, int], str],
    readers: list[CommittedOutputs],
) -> Verdict:
    """The checker over both jobs' history: every finished call of their store topics (per
    job label), every witness (the services'; the refund desk's searches), every committed
    answer; the refund desk's waits too."""
    requests = requests_of(services)
    if refunds:
        requests += [Request("search", *found) for found in searches(refunds.witness)]
    verdict = check_history(
        requests,
        completed_at(
            [outcome for found in outcomes.values() for outcome in found],
            ModelCalls(services),
            refund_witness_key,
        ),
        faults,
        expected,
        [output for reader in readers for output in reader.snapshot()],
    )
    if refunds:
        check_waits(
            verdict,
            resolutions(outcomes[refunds.job.label]),
            gated_runs(services.refund_requests),
            [json.loads(line)["order"] for line in refunds.workload.lines],
            faults,
        )
    return verdict


def summarize(
    args: argparse.Namespace,
    run_id: str,
    faults: list[Fault],
    doer: Faults,
    verdict: Verdict,
    growth: list[Growth],
    sampler: Sampler,
) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for happened in doer.happened:
        kinds[happened.kind] = kinds.get(happened.kind, 0) + 1
    overlapping = sum(
        1
        for a in doer.happened
        for b in doer.happened
        if a.fault_id < b.fault_id and a.start <= b.end and b.start <= a.end
    )
    return {
        "run": run_id,
        "seed": args.seed,
        "duration_s": args.duration,
        "rate_per_s": args.rate,
        "inputs": verdict.inputs,
        "outputs_read": verdict.outputs,
        "requests": verdict.requests,
        "calls": verdict.calls,
        "resends": verdict.resends,
        "faults_scheduled": len(faults),
        "faults_done": len(doer.happened),
        "faults_by_kind": dict(sorted(kinds.items())),
        "overlapping_pairs": overlapping,
        "fault_errors": doer.errors,
        "checks": verdict.counts(),
        "violations": [v.line() for v in verdict.violations[:50]],
        "growth": [asdict(g) | {"ok": g.ok, "measured": g.measured} for g in growth],
        "samples": len(sampler.samples),
        "faults": [asdict(h) for h in doer.happened],
    }


def print_summary(summary: dict[str, Any]) -> None:
    for name in ("inputs", "outputs_read", "requests", "calls", "resends", "faults_by_kind"):
        print(f"soak: {name}: {summary[name]}")
    if "refund_desk" in summary:
        print(f"soak: refund desk: {summary['refund_desk']}")
    print(f"soak: checks: {summary['checks']}")
    for line in summary["violations"]:
        print(f"soak: VIOLATION {line}")
    for error in summary["fault_errors"]:
        print(f"soak: FAULT NOT DONE {error}")
    for error in summary.get("allocator_errors", []):
        print(f"soak: ALLOCATOR {error}")
    for fault in summary["faults"]:
        if fault["outcome"]:
            print(f"soak: {fault['fault_id']}: {fault['outcome']}")
    for g in summary["growth"]:
        print(
            f"soak: growth {g['metric']}: {g['slope']:+.1f} {g['unit']} "
            f"(bound {g['bound']:g}, {g['covered_s'] / 60:.0f} min of samples) "
            f"{growth_verdict(g).upper()}"
        )


def growth_verdict(growth: dict[str, Any]) -> str:
    """``ok``, ``above`` its bound, or ``unmeasured`` (too few samples in the last half)."""
    if not growth["measured"]:
        return "unmeasured"
    return "ok" if growth["ok"] else "above"


def record(path: Path, summary: dict[str, Any], sampler: Sampler, happened: list[Happened]) -> None:
    """The summary as markdown at ``path`` and the timeline plot beside it."""
    from bench.plots import soak_timeline  # matplotlib: only when a run is recorded

    plot = soak_timeline(sampler.samples, [asdict(h) for h in happened], path.with_suffix(".png"))
    growth = "\n".join(
        f"| {g['metric']} | {g['slope']:+.1f} {g['unit']} | {g['bound']:g} | "
        f"{g['covered_s'] / 60:.0f} min | {growth_verdict(g)} |"
        for g in summary["growth"]
    )
    checks = "\n".join(f"| {name} | {n} |" for name, n in summary["checks"].items())
    outcomes = "".join(
        f"- {f['fault_id']}: {f['outcome']}\n" for f in summary["faults"] if f["outcome"]
    )
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary["faults_by_kind"].items())
    refunds = summary.get("refund_desk")
    mixed = (
        f"- and the refund desk (`--mixed`): {refunds['orders']} orders, "
        f"{refunds['waiting_records']} waiting records, decisions sent "
        f"{refunds['decisions_sent']}, {refunds['refused_records']} refused records\n"
        if refunds
        else ""
    )
    path.write_text(
        f"# Soak run {summary['run']}\n\n"
        f"Written by `python -m bench.soak --record {path}`; raw figures in "
        f"`.cache/soak/{summary['run']}/`.\n\n"
        f"- duration {summary['duration_s'] / 60:.0f} min, seed {summary['seed']}, "
        f"{summary['rate_per_s']:g} tickets/s: {summary['inputs']} inputs, "
        f"{summary['outputs_read']} committed outputs read\n{mixed}"
        f"- {summary['requests']} service requests over {summary['calls']} calls, "
        f"{summary['resends']} sent again\n"
        f"- {summary['faults_done']} faults ({kinds}); {summary['overlapping_pairs']} "
        f"overlapping pairs; not done: {len(summary['fault_errors'])}\n\n"
        + (f"What the job did:\n\n{outcomes}\n" if outcomes else "")
        + f"| check | violations |\n|---|---|\n{checks}\n\n"
        f"| growth over the last half | slope | bound | samples | |\n|---|---|---|---|---|\n"
        f"{growth}\n\n"
        f"![throughput and RSS over time, faults marked]({plot.name})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=parse_duration, default=parse_duration("5m"))
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--schedule", type=Path, help="repeat a schedule.json of an earlier run")
    parser.add_argument("--mean-gap", type=float, default=60.0, help="s between faults of a target")
    parser.add_argument(
        "--target-gap",
        type=parse_target_gap,
        action="append",
        default=[],
        metavar="TARGET=S",
        help="another mean gap for one target's faults (taskmanager, broker, model, checkpoints)",
    )
    parser.add_argument("--rate", type=float, default=1.0, help="tickets per second")
    parser.add_argument("--customers", type=int, default=40)
    parser.add_argument(
        "--mixed", action="store_true", help="also the refund desk (bench/soak_refunds.py)"
    )
    parser.add_argument("--refund-rate", type=float, default=0.2, help="orders per second")
    parser.add_argument(
        "--approval-timeout", type=float, default=120.0, help="s before an undecided wait ends"
    )
    parser.add_argument(
        "--tolerable-failed-checkpoints",
        type=int,
        default=0,
        help="checkpoints that may fail in a row before a job fails over",
    )
    parser.add_argument("--latency-scale", type=float, default=0.08, help="Pareto scale, s")
    parser.add_argument("--drain", type=float, default=240.0, help="s to wait for the last answers")
    parser.add_argument("--kafka-port", type=int, default=9192)
    parser.add_argument("--rest-port", type=int, default=8181)
    parser.add_argument("--rpc-port", type=int, default=6223)
    parser.add_argument("--services-port", type=int, default=8865)
    parser.add_argument("--record", type=Path, help="write the summary (markdown) and plot here")
    parser.add_argument("--keep-services", action="store_true", help="leave broker and cluster up")
    # A run started in the background ignores SIGINT: SIGTERM stops it with its services.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(soak(parser.parse_args()))


if __name__ == "__main__":
    main()
