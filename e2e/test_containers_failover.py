"""On a cluster of containers, a TaskManager container killed with kill -9 loses nothing.

The cluster is ``scripts/containers.sh``'s: a Kafka broker, a JobManager and two TaskManagers of
one slot each, all containers of the project image (docker/Dockerfile, ``make image``) on the
host network, on ports beside the shared ones (broker 19092, REST 18081). The job is the
support desk of ``e2e/test_standalone_failover.py`` (same agent, tickets and witness: the example
services in this process, counting every request by idempotency key), submitted from a container
of the image (``flink-agents submit``) at parallelism 2, so each TaskManager runs one subtask,
with its durable calls in a Kafka action-state store and the exactly-once Kafka sink.

Once committed answers arrive, a checkpoint completed, a delegation is being served and an answer
is written but not committed, TaskManager 1's container is killed (``kill -9`` of its JVM, the
container's init) and started again. Proved:

* a reader with ``isolation.level=read_committed`` sees every expected answer exactly once (0
  lost, 0 duplicates), with its expected content, and no error record;
* no call answered more than a second before the kill is sent again (0 re-invoked);
* every ticket's model conversation equals that of a no-fault run of the same agent over the same
  tickets on the local runner (byte for byte, a request sent again counting once).

Slow (minutes), so ``make test`` skips it: ``make e2e-containers`` runs it (it sets
FLINK_AGENTS_CONTAINERS=1), bringing the cluster up and down unless one is up already. Without
podman or docker it skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.test_standalone_exactly_once import TopicReader, duplicates
from e2e.test_standalone_failover import (
    CALLS_PER_TICKET,
    DELEGATION_ROUTES,
    SERVICES_PORT,
    DeathWatch,
    cancel,
    create_ticket_topics,
    expected_outputs,
    failover_causes,
    job_running,
    release,
    rest,
    start_producer,
    start_witness,
    taskmanager_log_tail,
    ticket_lines,
    totals,
    wait_for,
    write_spec,
)
from examples.demo import no_fault_run
from flink_agents.flink import load_job
from tests.conftest import submitted_job_id

REQUESTED = os.environ.get("FLINK_AGENTS_CONTAINERS") == "1"
ENGINE = os.environ.get("CONTAINER_ENGINE") or shutil.which("podman") or shutil.which("docker")

pytestmark = [
    pytest.mark.containers,
    pytest.mark.skipif(not REQUESTED, reason="slow: runs from `make e2e-containers`"),
    pytest.mark.skipif(ENGINE is None, reason="needs podman or docker (apt-get install podman)"),
]

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = REPO / "scripts" / "containers.sh"
KAFKA_PORT = int(os.environ.get("CLUSTER_KAFKA_PORT", "19092"))
REST_PORT = int(os.environ.get("CLUSTER_REST_PORT", "18081"))
IMAGE_AGENT = "/opt/flink-agents/jobs/support_desk/agent.yaml"
"""The support desk's agent as the image holds it (a copy of jobs/support_desk/agent.yaml)."""
PARALLELISM = 2
CHECKPOINT_INTERVAL_MS = 3000  # transactions stay open long enough for the kill to catch one
KILLED = "1"  # the TaskManager killed and started again


@dataclass(frozen=True)
class ContainerCluster:
    """What the harness of e2e/test_standalone_failover.py needs of a cluster."""

    rest_url: str
    env: dict[str, str]


def containers(*args: str, timeout_s: float = 300) -> str:
    """``scripts/containers.sh ARGS``; fails the test with its output when it fails."""
    done = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, (
        f"containers.sh {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def container_cluster() -> Iterator[ContainerCluster]:
    """The cluster of containers: the one up already, else one brought up here and down after."""
    started = time.monotonic()
    already = subprocess.run(["bash", str(CLUSTER_SCRIPT), "status"], capture_output=True)
    if already.returncode != 0:
        containers("up")
        print(f"[containers] cluster up in {time.monotonic() - started:.0f} s")
    log_dir = REPO / ".cache" / "containers" / f"cluster-{REST_PORT}" / "log"
    try:
        yield ContainerCluster(f"http://127.0.0.1:{REST_PORT}", {"FLINK_LOG_DIR": str(log_dir)})
    finally:
        if already.returncode != 0:
            containers("down")


def container_spec(host_spec: Path, folder: Path, run_id: str) -> Path:
    """The job spec of ``host_spec`` as the containers see it: the agent from the image,
    checkpoints on the folder every container mounts, parallelism 2, the exactly-once sink.
    Written alone in ``folder``, which submit ships to the cluster."""
    spec = yaml.safe_load(host_spec.read_text())
    spec["agent"] = IMAGE_AGENT
    spec["parallelism"] = PARALLELISM
    spec["sink"]["delivery"] = "exactly-once"
    spec["checkpointing"] = {
        "interval_ms": CHECKPOINT_INTERVAL_MS,
        "dir": f"/flink-data/checkpoints/{run_id}",
    }
    folder.mkdir()
    path = folder / "support_desk_containers.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_taskmanager_container_kill_loses_nothing_and_commits_each_answer_once(
    container_cluster: ContainerCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = container_cluster
    started = time.monotonic()
    bootstrap = f"127.0.0.1:{KAFKA_PORT}"
    run_id = uuid.uuid4().hex[:8]
    lines = ticket_lines()
    expected = expected_outputs(lines)
    host_spec, topics = write_spec(tmp_path, bootstrap, run_id)
    spec = container_spec(host_spec, tmp_path / "job", run_id)
    # The reference: the same agent over the same tickets on the local runner, no failure.
    records = [json.loads(line) for line in lines]
    reference = no_fault_run(load_job(host_spec), records, SERVICES_PORT, frozenset())
    timings: dict[str, float] = {"reference run": time.monotonic() - started}

    admin = create_ticket_topics(bootstrap, topics)
    witness = start_witness()
    committed = TopicReader(bootstrap, topics["output"], "read_committed").start()
    everything = TopicReader(bootstrap, topics["output"], "read_uncommitted").start()
    produced: list[float] = []
    job_id: str | None = None
    killed = restarted = False

    def state() -> str:
        return (
            f"job {job_id}; produced {len(produced)}/{len(lines)}, committed answers "
            f"{len(committed.counts())}, witness calls {totals(witness)}\n"
            + taskmanager_log_tail(cluster)
        )

    def elapsed() -> float:
        return time.monotonic() - started

    try:
        submit_started = time.monotonic()
        submitted = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "submit", str(spec), "--detached"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        job_id = submitted_job_id(submitted)
        timings["submit (job client container)"] = time.monotonic() - submit_started
        wait_for("the job to run", lambda: job_running(cluster, job_id), 120, state)
        timings["running"] = elapsed()
        vertices = {
            v["name"][:30]: v["parallelism"] for v in rest(cluster, f"/jobs/{job_id}")["vertices"]
        }
        producer = start_producer(bootstrap, topics["input"], lines, produced)

        def ready_to_kill() -> bool:
            serving = witness.counters.open_now()
            if len(committed.counts()) < 4 or not set(DELEGATION_ROUTES) & set(serving):
                return False
            if len(everything.counts()) <= len(committed.counts()):
                return False  # no answer written but not committed: wait for one
            return rest(cluster, f"/jobs/{job_id}/checkpoints")["counts"]["completed"] > 0

        wait_for("committed answers and a delegation in flight", ready_to_kill, 120, state)
        committed_before = len(committed.counts())
        uncommitted_at_kill = len(everything.counts()) - committed_before
        death = DeathWatch([int(containers("pid", KILLED))]).start()
        containers("kill-taskmanager", KILLED)
        killed = True
        kill_time = death.wait(timeout_s=10)
        timings["killed"] = elapsed()
        wait_for(
            "the job to notice the killed TaskManager",
            lambda: not job_running(cluster, job_id),
            60,
            state,
        )
        containers("start-taskmanager", KILLED)
        restarted = True
        wait_for("the job to recover", lambda: job_running(cluster, job_id), 150, state)
        timings["running again"] = elapsed()
        producer.join(timeout=60)
        wait_for(
            f"all {len(expected)} answers committed",
            lambda: set(expected) <= set(committed.counts()),
            180,
            state,
        )
        timings["all committed"] = elapsed()
        time.sleep(3)  # more checkpoints: a late duplicate would be committed by now
        history = rest(cluster, f"/jobs/{job_id}/exceptions")["exceptionHistory"]["entries"]
    except BaseException:
        print(state())
        raise
    finally:
        if job_id:
            cancel(cluster, job_id)
        if killed and not restarted:
            containers("start-taskmanager", KILLED)
        committed.stop()
        everything.stop()
        release(witness, admin, topics)

    counts = committed.counts()
    distinct = {service: len(keys) for service, keys in sorted(witness.counters.snapshot().items())}
    reinvoked = witness.counters.repeated_after(kill_time - 1.0)
    conversations = witness.conversations.by_ticket()
    equal = sum(
        1 for t, bodies in reference.conversations.items() if conversations.get(t) == bodies
    )
    summary = [
        f"{len(lines)} tickets at parallelism {PARALLELISM} (vertices {vertices}); TaskManager "
        f"{KILLED} killed after {committed_before} committed answers, {uncommitted_at_kill} "
        "written but not committed",
        "timings (s from the start): "
        + ", ".join(f"{what} {seconds:.1f}" for what, seconds in timings.items()),
        f"job exception history: {failover_causes(history)}",
        f"read_committed: {sum(counts.values())} records, {len(counts)} distinct, "
        f"duplicates {duplicates(counts)}, lost {sorted(set(expected) - set(counts))}",
        f"witness calls {totals(witness)}; completed before the kill and re-invoked: {reinvoked}",
        f"conversations equal to the no-fault run: {equal}/{len(reference.conversations)}",
    ]
    with capsys.disabled():
        print("\n" + "\n".join(f"[containers failover] {line}" for line in summary))

    assert set(vertices.values()) >= {PARALLELISM}, vertices
    lost_tm = [e for e in history if "taskmanager" in json.dumps(e).lower().replace(" ", "")]
    assert lost_tm, (
        f"no TaskManager loss in the job's exception history: {failover_causes(history)}"
    )
    committed_records: list[dict[str, Any]] = committed.snapshot()
    assert not [r for r in committed_records if "error" in r], "error outputs"
    assert set(counts) == set(expected), (
        f"lost {sorted(set(expected) - set(counts))}, extra {sorted(set(counts) - set(expected))}"
    )
    assert not duplicates(counts), f"read_committed saw answers twice: {duplicates(counts)}"
    wrong = [r for r in committed_records if r["output"] != expected[(r["key"], r["seq"])]]
    assert not wrong, f"answers differing from the expected ones: {wrong[:3]}"
    assert not any(reinvoked.values()), f"completed calls made again after the kill: {reinvoked}"
    needed = {service: n * len(lines) for service, n in CALLS_PER_TICKET.items()}
    assert distinct == dict(sorted(needed.items())), distinct
    assert len(reference.conversations) == len(lines)
    assert conversations == reference.conversations, "conversations differ from the no-fault run"
