"""Fixtures for tests that run agents on the PyFlink mini-cluster."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

from flink_agents.flink.job import JobSpec


def job_spec_settings(checkpoint_dir: Path, **fields: Any) -> dict[str, str]:
    """The Flink configuration a job spec with these fields gets (as ``flink-agents run`` sets
    it); the agent and source are placeholders, since tests build their pipelines themselves."""
    checkpointing = {"dir": str(checkpoint_dir), **fields.pop("checkpointing", {})}
    spec = JobSpec(
        name="test",
        agent="unused",
        source={"kind": "list", "path": "unused"},
        key="k",
        checkpointing=checkpointing,
        **fields,
    )
    return spec.flink_config()


def crash_test_run(
    make_flink_env: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    folder: Path,
    name: str,
    *,
    witness_env: str,
    crash_env: str,
    crash: str | None,
    checkpoint_ms: int,
) -> tuple[Any, Path]:
    """One run of a crash test: a fresh witness file named in ``witness_env``, ``crash_env``
    set to ``crash`` (unset for the run without one), and a process-mode environment that
    checkpoints every ``checkpoint_ms`` into ``folder/<name>-ckpt`` and restarts 500 ms after a
    failure. Returns the environment and the witness file."""
    witness = folder / f"{name}.witness"
    witness.touch()
    monkeypatch.setenv(witness_env, str(witness))
    if crash is None:
        monkeypatch.delenv(crash_env, raising=False)
    else:
        monkeypatch.setenv(crash_env, crash)
    env = make_flink_env(
        **job_spec_settings(
            folder / f"{name}-ckpt",
            execution_mode="process",
            accept_slow_process_mode=True,
            checkpointing={"interval_ms": checkpoint_ms},
            restart_strategy={"delay_ms": 500},
        )
    )
    return env, witness


def filesystem_checkpoints(folder: Path, interval: str) -> dict[str, str]:
    """The settings of an environment of one's own that checkpoints every ``interval`` (e.g.
    ``"500 ms"``) into ``folder``, where each completed checkpoint leaves ``chk-<n>/_metadata``."""
    return {
        "execution.checkpointing.interval": interval,
        "execution.checkpointing.storage": "filesystem",
        "execution.checkpointing.dir": folder.as_uri(),
    }


def completed_checkpoints(folder: Path) -> list[Path]:
    """The ``_metadata`` files of the completed checkpoints in ``folder`` (Flink deletes the ones
    it subsumes)."""
    return sorted(folder.rglob("chk-*/_metadata"))


def produce_json(bootstrap: str, topic: str, records: Iterable[Any]) -> None:
    """Write ``records`` to ``topic`` as JSON values; returns once the broker acknowledged all."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        sent = [producer.send(topic, json.dumps(record).encode()) for record in records]
        for future in sent:
            future.get(timeout=30)
    finally:
        producer.close()


def consume_json(bootstrap: str, topic: str) -> list[Any]:
    """Every record on ``topic`` from its start, parsed as JSON (5 s without one ends it)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        group_id=f"check-{uuid.uuid4().hex}",
    )
    try:
        return [json.loads(message.value) for message in consumer]
    finally:
        consumer.close()


@pytest.fixture()
def fresh_flink_env(flink_env):
    """The session's mini-cluster environment with this test's pipeline only.

    PyFlink keeps transformations on the environment until executed; clearing them lets tests
    share one JVM (start-up costs ~10 s) without running each other's pipelines.
    """
    transformations = flink_env._j_stream_execution_environment.getTransformations()
    # Not clear(): py4j's list pops until an IndexError, and popping an empty Java list raises
    # a Py4JJavaError instead, so clear() always failed on a list that had anything in it.
    for _ in range(transformations.size()):
        transformations.pop()
    return flink_env


@pytest.fixture()
def make_flink_env(flink_env) -> Callable[..., object]:
    """A new environment with extra settings, in the session's JVM (the default execution mode,
    loopback, runs Python functions in this process, so tests can read model counters)."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    def make(**settings: str):
        config = Configuration()
        config.set_string("python.executable", sys.executable)
        config.set_string("python.client.executable", sys.executable)
        for name, value in settings.items():
            config.set_string(name, value)
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_parallelism(1)
        return env

    return make


def stop_with_savepoint(client: Any, folder: Path) -> Path:
    """Stop the job of ``client`` (a PyFlink ``JobClient``) with a canonical savepoint in
    ``folder``; returns the savepoint's directory once the job has finished."""
    from pyflink.java_gateway import get_gateway

    # PyFlink 2.2's JobClient.stop_with_savepoint misses the format argument Java now takes.
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    savepoint = client._j_job_client.stopWithSavepoint(False, folder.as_uri(), canonical).get()
    # Not the job's status: the job's own mini-cluster shuts down as soon as it finished.
    client.get_job_execution_result().result()
    return Path(str(savepoint).removeprefix("file:"))
