"""A bounded job into a Kafka topic: it ends with every answer written and no restart, on the
mini-cluster (`flink-agents run`) and on the standalone cluster (`flink-agents submit`), with
and without a store; a job whose tasks did restart says so in `run`'s exit code and report.

The outputs a bounded input's end emits come from an event-time timer at the end of time; they
once carried its timestamp, which a Kafka 4 broker refuses (the task failed and restarted at
the end of every bounded job, and without a store the last inputs' answers were lost).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from flink_agents.durable import faults
from tests.conftest import submitted_job_id

REPO = Path(__file__).resolve().parents[2]
CITIES = REPO / "jobs" / "data" / "cities.jsonl"
WEATHER_RUNS = [
    ("Berlin", 0),
    ("Berlin", 1),
    ("Lisbon", 0),
    ("Lisbon", 1),
    ("Oslo", 0),
    ("Reykjavik", 0),
]
ONE_HOUR_MS = 3_600_000
"""A Kafka 4 broker refuses a record stamped further ahead (message.timestamp.after.max.ms)."""


def _job(
    folder: Path, bootstrap: str, topic: str, *, store: bool, delivery: str, extra: str = ""
) -> Path:
    job = folder / "job.yaml"
    store_block = (
        f"store: {{kind: kafka, bootstrap_servers: '{bootstrap}', topic: {topic}-store}}\n"
        if store
        else ""
    )
    job.write_text(
        f"name: bounded-{topic}\nagent: {REPO}/examples/weather.yaml\n"
        f"source: {{kind: list, path: {CITIES}}}\nkey: city\n"
        f"sink: {{kind: kafka, topic: {topic}, bootstrap_servers: '{bootstrap}', "
        f"delivery: {delivery}}}\n"
        f"checkpointing: {{interval_ms: 500, dir: {folder / 'checkpoints'}}}\n"
        "restart_strategy: {type: fixed-delay, attempts: 2, delay_ms: 500}\n" + store_block + extra
    )
    return job


def _outputs(bootstrap: str, topic: str) -> list[tuple[dict[str, Any], int]]:
    """Every committed record of ``topic`` (JSON value, record timestamp), read to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    found: list[tuple[dict[str, Any], int]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if found or message.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            found.append((json.loads(message.value()), message.timestamp()[1]))
    finally:
        consumer.close()
    return found


def _assert_every_answer_once_with_a_sane_timestamp(bootstrap: str, topic: str) -> None:
    outputs = _outputs(bootstrap, topic)
    assert sorted((value["key"], value["seq"]) for value, _ in outputs) == WEATHER_RUNS
    assert all(value["output"]["city"] == value["key"] for value, _ in outputs)
    now_ms = time.time() * 1000
    assert all(abs(stamp - now_ms) < ONE_HOUR_MS for _, stamp in outputs), outputs


def _run(job: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    return subprocess.run(
        [sys.executable, "-m", "flink_agents.cli", "run", str(job)],
        cwd=REPO,
        env=env | environ,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.kafka
@pytest.mark.flink
@pytest.mark.parametrize(("store", "delivery"), [(False, "at-least-once"), (True, "exactly-once")])
def test_a_bounded_job_into_kafka_ends_without_a_restart_on_the_mini_cluster(
    tmp_path: Path, kafka_bootstrap: str, store: bool, delivery: str
) -> None:
    topic = f"bounded-out-{uuid.uuid4().hex[:8]}"
    done = _run(_job(tmp_path, kafka_bootstrap, topic, store=store, delivery=delivery))

    # `run` reads the job's failures from its REST API: a restart would exit 3 and name it.
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failure" not in done.stderr
    _assert_every_answer_once_with_a_sane_timestamp(kafka_bootstrap, topic)


@pytest.mark.kafka
@pytest.mark.flink
def test_run_reports_a_restart_and_exits_3(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = f"bounded-out-{uuid.uuid4().hex[:8]}"
    job = _job(tmp_path, kafka_bootstrap, topic, store=True, delivery="at-least-once")
    markers = tmp_path / "markers"
    markers.mkdir()

    done = _run(
        job,
        **{
            faults.KILL_POINTS_ENV: f"{faults.KillPoint.AFTER_OUTPUT.value}@2",
            faults.KILL_MARKERS_ENV: str(markers),
        },
    )

    assert (markers / f"{faults.KillPoint.AFTER_OUTPUT.value}.fired").exists()
    assert done.returncode == 3, done.stderr[-3000:]
    assert "injected crash at kill point after-output" in done.stderr
    assert "finished, but its tasks restarted 1 time(s)" in done.stderr
    outputs = _outputs(kafka_bootstrap, topic)  # at least once: the replayed run's again
    assert sorted({(value["key"], value["seq"]) for value, _ in outputs}) == WEATHER_RUNS


@pytest.mark.kafka
@pytest.mark.flink
def test_run_fails_loudly_on_a_restart_loop(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = f"bounded-tiny-{uuid.uuid4().hex[:8]}"
    # Every output is larger than the topic takes: each attempt's sink fails again.
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "40"})])
    created[topic].result(timeout=30)

    done = _run(_job(tmp_path, kafka_bootstrap, topic, store=False, delivery="at-least-once"))

    assert done.returncode == 1, done.stderr[-3000:]
    # The attempts that failed before the last are named (the last may be gone with the API).
    assert done.stderr.count("RecordTooLargeException") >= 3, done.stderr
    assert "flink-agents run: failure 2 in " in done.stderr
    assert f"job 'bounded-{topic}' FAILED: " in done.stderr


def _submit(job: Path, flink_cluster: Any) -> subprocess.CompletedProcess[str]:
    jobmanager = flink_cluster.rest_url.removeprefix("http://")
    return subprocess.run(
        [sys.executable, "-m", "flink_agents.cli", "submit", str(job), "--jobmanager", jobmanager],
        cwd=REPO,
        env=flink_cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.kafka
@pytest.mark.flink
@pytest.mark.cluster
@pytest.mark.parametrize("store", [False, True])
def test_a_bounded_job_into_kafka_ends_without_a_restart_on_the_standalone_cluster(
    tmp_path: Path, kafka_bootstrap: str, flink_cluster: Any, store: bool
) -> None:
    topic = f"bounded-out-{uuid.uuid4().hex[:8]}"
    done = _submit(
        _job(tmp_path, kafka_bootstrap, topic, store=store, delivery="at-least-once"),
        flink_cluster,
    )

    job_id = submitted_job_id(done)
    assert flink_cluster.get(f"/jobs/{job_id}")["state"] == "FINISHED"
    history = flink_cluster.get(f"/jobs/{job_id}/exceptions")["exceptionHistory"]
    assert history["entries"] == [], history["entries"][0]["stacktrace"][:3000]
    assert "failure" not in done.stderr
    _assert_every_answer_once_with_a_sane_timestamp(kafka_bootstrap, topic)


@pytest.mark.kafka
@pytest.mark.flink
@pytest.mark.cluster
def test_submit_reports_a_restart_on_the_standalone_cluster_and_exits_3(
    tmp_path: Path, kafka_bootstrap: str, flink_cluster: Any
) -> None:
    topic = f"bounded-out-{uuid.uuid4().hex[:8]}"
    markers = tmp_path / "markers"
    markers.mkdir()
    kill = f"operator: {{kill_points: after-output@2, kill_markers_dir: '{markers}'}}\n"
    job = _job(tmp_path, kafka_bootstrap, topic, store=True, delivery="at-least-once", extra=kill)

    done = _submit(job, flink_cluster)

    assert (markers / f"{faults.KillPoint.AFTER_OUTPUT.value}.fired").exists()
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-3000:]
    assert "injected crash at kill point after-output" in done.stderr
    assert "finished, but its tasks restarted 1 time(s)" in done.stderr
