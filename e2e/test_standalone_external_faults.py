"""External faults on the standalone cluster lose no input and repeat no completed call.

The job, the witness and the oracle are in ``e2e/fault_harness.py`` (the support desk of
``test_standalone_failover.py``, whose ``kill -9`` of the TaskManager is the first external
fault). Each scenario here does one other fault while tickets are in flight and checks that every
ticket gets its answer, no call completed before the fault is made again, and no more calls are
sent again than were in flight around it; what protects each case is in docs/reliability.md.

The broker scenarios stop the broker the tests use (``KAFKA_PORT``) and the SIGSTOP scenario adds
a TaskManager to the cluster (``FLINK_REST_PORT``): run them against services of your own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.fault_harness import (
    FaultRun,
    FlakyModelServices,
    audit_store,
    process_cpu_seconds,
    require_own_service,
    start_services,
)
from e2e.test_standalone_failover import (
    AGENT,
    LATENCY_S,
    SERVICES_PORT,
    cluster_script,
    rest,
    taskmanager_pids,
)
from examples.services import ExampleServices

pytestmark = [pytest.mark.cluster, pytest.mark.kafka, pytest.mark.flink]

REPO = Path(__file__).resolve().parents[1]
KAFKA_SCRIPT = REPO / "scripts" / "kafka.sh"
BROKER_OUTAGE_S = 20.0


HEARTBEAT_TIMEOUT_MS = int(os.environ.get("FLINK_HEARTBEAT_TIMEOUT_MS", "10000"))
HEARTBEAT_INTERVAL_MS = 2000  # scripts/flink-cluster.sh's


def with_heartbeat(timeout_ms: int, interval_ms: int) -> Callable[[dict[str, Any]], None]:
    """A spec change telling the operator this heartbeat: its freeze fence's threshold is
    ``timeout_ms - interval_ms``."""

    def adjust(spec: dict[str, Any]) -> None:
        spec["operator"] = {
            "heartbeat_timeout_ms": timeout_ms,
            "heartbeat_interval_ms": interval_ms,
        }

    return adjust


class TaskManagerLogs:
    """The TaskManager logs of the cluster, read from where they stood when this was made.

    Files are told apart by inode: starting a TaskManager rotates the logs (``x.log`` becomes
    ``x.log.1``), so a name may hold another file's older lines later."""

    def __init__(self, cluster: Any) -> None:
        self._dir = Path(cluster.env["FLINK_LOG_DIR"])
        self._start = {log.stat().st_ino: log.stat().st_size for log in self._logs()}

    def new_lines_with(self, text: str) -> list[str]:
        found = []
        for log in self._logs():
            with log.open("rb") as file:
                file.seek(self._start.get(os.fstat(file.fileno()).st_ino, 0))
                new = file.read().decode(errors="replace")
            found += [line for line in new.splitlines() if text in line]
        return found

    def _logs(self) -> list[Path]:
        return sorted(self._dir.glob("*taskexecutor*"))


def stop_taskmanagers(cluster: Any) -> tuple[list[int], TaskManagerLogs, float]:
    """SIGSTOP the cluster's TaskManagers; returns their pids, their logs as they stood before,
    and the moment of the stop."""
    pids = taskmanager_pids(cluster)
    logs = TaskManagerLogs(cluster)
    moment = time.time()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids, logs, moment


def forget_taskmanager(cluster: Any, pid: int) -> None:
    """Drop ``pid`` from scripts/flink-cluster.sh's pid file (it was killed here)."""
    for pid_file in Path(cluster.env["FLINK_PID_DIR"]).glob("*taskexecutor*.pid"):
        kept = [word for word in pid_file.read_text().split() if word != str(pid)]
        pid_file.write_text("".join(f"{word}\n" for word in kept))


def test_taskmanager_stopped_past_the_heartbeat_timeout_leaves_no_zombie_write(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGSTOP the TaskManager until the JobManager declares it lost (``heartbeat.timeout``,
    10 s with scripts/flink-cluster.sh), recover on a new TaskManager, then SIGCONT the old one
    while the new attempt replays. Its late store writes are fenced at restore by the writer
    epoch; its engine sees the freeze and sends no call after the resume (the freeze fence):
    calls sent again are only those in flight at the stop, which the new attempt resends.
    The job does not set the heartbeat: the operator reads it from the cluster's configuration
    (``$FLINK_CONF_DIR``), so the fence trips at the cluster's timeout - interval (8 s)."""
    require_own_service(int(flink_cluster.rest_url.rsplit(":", 1)[1]), "Flink cluster")
    with FaultRun("sigstop", flink_cluster, kafka_bootstrap, tmp_path) as run:
        run.wait_for_calls_in_flight()
        stopped, logs, stopped_at = stop_taskmanagers(flink_cluster)
        # The stopped attempt can only have runs of tickets not answered yet.
        unanswered = len(run.produced) - run.answered()
        try:
            run.wait(
                "the job to declare the stopped TaskManager lost", lambda: not run.running(), 60
            )
            lost_after = time.time() - stopped_at
            cluster_script(flink_cluster, "start-taskmanager")
            run.wait("the job to recover on a new TaskManager", run.running, 150)
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        resumed_at = time.time()
        run.finish()
        # The resumed TaskManager registers again and idles; its interpreter, and any engine the
        # stopped attempt left in it, lives on: end it so the cluster is back to one TaskManager.
        for pid in stopped:
            os.kill(pid, signal.SIGKILL)
            forget_taskmanager(flink_cluster, pid)
        verdict = run.verdict(stopped_at)
        after_resume = run.requests_started_after(resumed_at)
        fence_trips = logs.new_lines_with("freeze fence tripped")
        audit = audit_store(kafka_bootstrap, run.topics["store"])
        verdict.notes += [
            f"TaskManager stopped at +{stopped_at - run.started_epoch:.1f} s, declared lost "
            f"{lost_after:.1f} s later, resumed at +{resumed_at - run.started_epoch:.1f} s",
            f"requests that reached the services after the SIGCONT: {after_resume}, of which "
            f"calls sent again: {run.repeats_started_after(resumed_at)}; tickets unanswered at "
            f"the stop: {unanswered}",
            f"late store writes after a newer writer's record of their key: {len(audit.late)} "
            f"({len(audit.late_behind)} undoing progress); fenced by the restore: "
            f"{audit.fenced}; keys restored other than the newest writer's last record: "
            f"{audit.differing[:5]}",
            f"freeze fence trips logged by the stopped TaskManager: {fence_trips[:2]}",
        ]
    with capsys.disabled():
        print("\n" + verdict.report())
    assert any(
        "TaskManager" in cause or "heartbeat" in cause.lower() for cause in verdict.failovers
    )
    # The resumed engine saw the freeze (longer than heartbeat.timeout - interval) and failed:
    # it sent no call after its resume, so calls sent again are at most those in flight at the
    # stop (resent by the new attempt, their outcome unrecorded), per service.
    assert fence_trips, "the stopped TaskManager's engine did not report its freeze"
    # The threshold came from the cluster's configuration, not the operator's 50 s default.
    cluster_fence_s = (HEARTBEAT_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000
    assert all(f"fence's {cluster_fence_s:.1f} s" in line for line in fence_trips), fence_trips
    verdict.check()
    assert audit.fenced == len(audit.late), "a restore loaded a replaced writer's late record"
    assert not audit.differing, f"restored states other than the newest: {audit.differing[:5]}"


def test_a_pause_past_the_fence_but_not_the_heartbeat_timeout_fails_the_task_loudly(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator is told an interval that leaves a 4 s fence; the TaskManager is stopped for
    6 s, not long enough to be declared lost. At the resume its engine trips the fence, so the
    task fails (a failover naming the freeze) and restarts from its checkpoint on the same
    TaskManager: nothing lost, nothing completed made again."""
    require_own_service(int(flink_cluster.rest_url.rsplit(":", 1)[1]), "Flink cluster")
    fence_ms = 4000
    adjust = with_heartbeat(HEARTBEAT_TIMEOUT_MS, HEARTBEAT_TIMEOUT_MS - fence_ms)
    with FaultRun("pause", flink_cluster, kafka_bootstrap, tmp_path, adjust_spec=adjust) as run:
        run.wait_for_calls_in_flight()
        paused, logs, paused_at = stop_taskmanagers(flink_cluster)
        try:
            time.sleep(fence_ms / 1000 + 2)
        finally:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)
        run.finish()
        verdict = run.verdict(paused_at)
        fence_trips = logs.new_lines_with("freeze fence tripped")
        history = rest(flink_cluster, f"/jobs/{run.job_id}/exceptions")["exceptionHistory"]
        fenced = [e for e in history["entries"] if "FrozenProcessError" in str(e)]
        verdict.notes.append(f"freeze fence trips logged: {fence_trips[:2]}")
    with capsys.disabled():
        print("\n" + verdict.report())
    assert fence_trips, "the paused TaskManager's engine did not report its freeze"
    assert fenced, f"no failover names the freeze: {verdict.failovers}"
    verdict.check()


def kafka_script(bootstrap: str, command: str) -> None:
    """``scripts/kafka.sh`` for the broker at ``bootstrap`` (the tests' own)."""
    port = bootstrap.rsplit(":", 1)[1]
    done = subprocess.run(
        ["bash", str(KAFKA_SCRIPT), command],
        env={**os.environ, "KAFKA_PORT": port},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"kafka.sh {command} failed:\n{done.stdout}{done.stderr}"


def broker_pid(bootstrap: str) -> int:
    """The broker scripts/kafka.sh started on ``bootstrap``'s port (from its pid file)."""
    port = bootstrap.rsplit(":", 1)[1]
    cache = Path(os.environ.get("FLINK_AGENTS_CACHE", REPO / ".cache"))
    return int((cache / "kafka" / f"run-{port}" / "kafka.pid").read_text())


def test_broker_restart_mid_run_loses_nothing(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stop the broker (store, source and sink alike) while runs are in flight and start it
    again: store writes wait for it (the producer retries until ``delivery_timeout_ms``)."""
    require_own_service(int(kafka_bootstrap.rsplit(":", 1)[1]), "Kafka broker")
    with FaultRun("broker-restart", flink_cluster, kafka_bootstrap, tmp_path) as run:
        run.wait_for_calls_in_flight()
        # The tickets' producer (this test's) would time out while the broker restarts: the
        # fault comes once every ticket is written, with the last ones still running.
        run.producer.join(timeout=60)
        stopped_at = time.time()
        try:
            kafka_script(kafka_bootstrap, "stop")
            down_at = time.time()
        finally:
            kafka_script(kafka_bootstrap, "start")
        up_at = time.time()
        run.finish()
        verdict = run.verdict(stopped_at, up_at)
        verdict.notes.append(
            f"broker stopped at +{stopped_at - run.started_epoch:.1f} s (down after "
            f"{down_at - stopped_at:.1f} s), serving again {up_at - stopped_at:.1f} s after it"
        )
    with capsys.disabled():
        print("\n" + verdict.report())
    assert sum(verdict.in_flight.values()), "no call in flight at the restart"
    verdict.check()


def test_broker_unreachable_for_20_s_waits_without_a_busy_loop(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGSTOP the broker for 20 s (connections hang, nothing is refused): store writes wait
    and resume, and the TaskManager does not spin meanwhile (its CPU from /proc)."""
    require_own_service(int(kafka_bootstrap.rsplit(":", 1)[1]), "Kafka broker")
    broker = broker_pid(kafka_bootstrap)
    with FaultRun("broker-unreachable", flink_cluster, kafka_bootstrap, tmp_path) as run:
        run.wait_for_calls_in_flight()
        (taskmanager,) = taskmanager_pids(flink_cluster)
        before = process_cpu_seconds(taskmanager)
        time.sleep(5)
        busy_rate = (process_cpu_seconds(taskmanager) - before) / 5
        stopped_at = time.time()
        os.kill(broker, signal.SIGSTOP)
        try:
            cpu_start = process_cpu_seconds(taskmanager)
            time.sleep(BROKER_OUTAGE_S)
            outage_rate = (process_cpu_seconds(taskmanager) - cpu_start) / BROKER_OUTAGE_S
            during = run.requests_started_after(stopped_at)
        finally:
            os.kill(broker, signal.SIGCONT)
        resumed_at = time.time()
        run.finish()
        verdict = run.verdict(stopped_at, resumed_at)
        verdict.notes += [
            f"broker stopped at +{stopped_at - run.started_epoch:.1f} s for {BROKER_OUTAGE_S:g} s",
            f"TaskManager CPU: {busy_rate:.2f} cores while running, {outage_rate:.2f} during the "
            f"outage; requests that reached the services during it: {during}",
        ]
    with capsys.disabled():
        print("\n" + verdict.report())
    verdict.check()
    # A spinning thread (retrying without a pause) keeps a core busy: about 1.0 core.
    assert outage_rate < 0.5, f"the TaskManager used {outage_rate:.2f} cores while Kafka was away"


MODEL_TIMEOUT_S = 2.0
MODEL_ATTEMPTS = 3
MODEL_OUTAGE_S = 6.0


def flaky_agent(tmp_path: Path) -> Path:
    """The support desk with a short model timeout (so a hung request is retried soon)."""
    agent = yaml.safe_load(AGENT.read_text())
    desk = agent["agents"][0]
    connections = [desk["connections"], desk["subagents"]["researcher"]["agent"]["connections"]]
    for connection in connections:
        arguments = connection["services"]["arguments"]
        arguments["timeout_seconds"] = MODEL_TIMEOUT_S
        arguments["retry"] = {"max_attempts": MODEL_ATTEMPTS, "initial_backoff_seconds": 0.5}
    path = tmp_path / "flaky_support_desk.yaml"
    path.write_text(yaml.safe_dump(agent, sort_keys=False))
    return path


def test_model_service_failing_for_a_while_is_retried_within_the_attempt_budget(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model service answers 500 or hangs past the client's timeout for 6 s: calls retry
    (each at most ``max_attempts`` times, counted at the service), most finish; a call whose
    budget is spent fails its run with an error output (``error_policy: emit``); no call that
    was answered is made again, and no input is lost."""
    agent = flaky_agent(tmp_path)
    services: list[Any] = []

    def witness() -> ExampleServices:
        flaky = start_services(
            lambda: FlakyModelServices(SERVICES_PORT, LATENCY_S, hang_seconds=MODEL_TIMEOUT_S + 1)
        )
        services.append(flaky)
        return flaky

    def use_flaky_agent(spec: dict[str, Any]) -> None:
        spec["agent"] = str(agent)

    with FaultRun(
        "model-outage",
        flink_cluster,
        kafka_bootstrap,
        tmp_path,
        adjust_spec=use_flaky_agent,
        witness=witness,
    ) as run:
        run.wait_for_calls_in_flight()
        flaky = services[0]
        outage_at = time.time()
        flaky.fail_for(MODEL_OUTAGE_S)
        run.producer.join(timeout=60)
        answered = lambda: {(r["key"], r["seq"]) for r in run.outputs.snapshot()}  # noqa: E731
        run.wait(
            f"an output for all {len(run.expected)} tickets",
            lambda: set(run.expected) <= answered(),
            150,
        )
        time.sleep(2)
        records = run.outputs.snapshot()
        served = run.witness.counters.snapshot()
        failed_attempts = dict(flaky.failed_attempts)
    errors = [r for r in records if "error" in r]
    served_model = served.get("model", {})
    attempts = {
        key: failed_attempts.get(key, 0) + served_model.get(key, 0)
        for key in set(failed_attempts) | set(served_model)
    }
    recovered = [key for key in failed_attempts if served_model.get(key)]
    with capsys.disabled():
        print(
            f"\n[model-outage] {len(records)} outputs, {len(errors)} errors "
            f"({sorted({json.dumps(e['error'])[:160] for e in errors})}); failed attempts "
            f"{sum(failed_attempts.values())} over {len(failed_attempts)} calls, "
            f"{len(recovered)} of them answered on a retry; most attempts at one call: "
            f"{max(attempts.values())}; outage from +{outage_at - run.started_epoch:.1f} s"
        )
    assert failed_attempts, "the outage caught no model call"
    assert recovered, "no call recovered by a retry"
    assert max(attempts.values()) <= MODEL_ATTEMPTS, "a call was tried beyond its budget"
    repeated = {key: n for service in served.values() for key, n in service.items() if n > 1}
    assert not repeated, f"calls answered and made again: {repeated}"
    for record in records:
        if "error" in record:  # a spent budget: the run fails with the model call's error
            assert "ModelCallError" in json.dumps(record["error"]), record
        else:
            assert record["output"] == run.expected[(record["key"], record["seq"])], record
