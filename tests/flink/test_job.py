"""Job specs: validation with file:line errors, Flink 2.x settings, a mini-cluster run."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from flink_agents.durable.store import kafka
from flink_agents.flink.job import load_job
from flink_agents.plan.yaml.loader import YamlAgentError

REPO = Path(__file__).resolve().parents[2]


def test_example_job_loads_and_compiles_its_agent() -> None:
    spec = load_job(REPO / "examples" / "jobs" / "weather.yaml")
    assert spec.key == "city"
    assert spec.plan().name == "weather_react"
    config = spec.flink_config()
    assert config["execution.checkpointing.interval"] == "1000 ms"
    assert config["restart-strategy.type"] == "fixed-delay"
    assert config["execution.checkpointing.dir"].startswith("file:///")


def test_a_bad_field_is_named_with_file_and_line(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text("name: x\nagent: a.yaml\nsource:\n  kind: list\nkey: k\nparallelism: zero\n")
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    message = str(error.value)
    assert f"{job}:6:" in message and "parallelism" in message
    assert "source.list.path" in message or "source.path" in message


def test_an_unknown_source_kind_is_rejected(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text("name: x\nagent: a.yaml\nsource:\n  kind: s3\nkey: k\n")
    with pytest.raises(YamlAgentError, match="source"):
        load_job(job)


@pytest.mark.flink
def test_file_sink_job_runs_on_the_mini_cluster(tmp_path: Path, fresh_flink_env) -> None:
    from flink_agents.flink.job_runner import build

    out = tmp_path / "out"
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: weather-file\nagent: {REPO}/examples/weather.yaml\n"
        f"source: {{kind: list, path: {REPO}/examples/jobs/data/cities.jsonl}}\n"
        f"key: city\nsink: {{kind: file, path: {out}}}\n"
    )
    build(load_job(job), fresh_flink_env)
    fresh_flink_env.execute("weather-file")

    lines = [
        json.loads(line)
        for part in out.rglob("*")
        if part.is_file()
        for line in part.read_text().splitlines()
    ]
    assert sorted((line["key"], line["seq"]) for line in lines) == sorted(
        [("Berlin", 0), ("Berlin", 1), ("Lisbon", 0), ("Lisbon", 1), ("Oslo", 0), ("Reykjavik", 0)]
    )
    assert all(line["output"]["city"] == line["key"] for line in lines)


def test_an_unknown_store_field_is_named_with_file_and_line(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        "store:\n  kind: kafka\n  bootstrap_servers: 127.0.0.1:9092\n  retention: 60000\n"
    )
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    assert f"{job}:8:" in str(error.value) and "store.retention: unknown field" in str(error.value)


def test_store_settings_out_of_librdkafka_range_are_refused(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        "store:\n  kind: kafka\n  bootstrap_servers: 127.0.0.1:9092\n  linger_ms: 900001\n"
        "  compression_type: brotli\n"
    )
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    message = str(error.value)
    assert f"{job}:8:" in message and "store.linger_ms" in message
    assert f"{job}:9:" in message and "store.compression_type" in message


@pytest.mark.kafka
def test_store_settings_of_a_job_spec_reach_the_producer_and_the_topic(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer_configs: list[dict[str, object]] = []

    def recording_producer(config: dict[str, object]) -> Producer:
        producer_configs.append(config)
        return Producer(config)

    topic = f"test-job-store-{uuid.uuid4().hex[:12]}"
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        f"store:\n  kind: kafka\n  bootstrap_servers: {kafka_bootstrap}\n  topic: {topic}\n"
        "  partitions: 2\n  retention_ms: 3600000\n  linger_ms: 20\n  compression_type: lz4\n"
    )
    spec = load_job(job)
    assert spec.store is not None
    monkeypatch.setattr(kafka, "Producer", recording_producer)
    store = spec.store.build()
    store.close()

    [producer_config] = producer_configs
    assert producer_config["linger.ms"] == 20
    assert producer_config["compression.type"] == "lz4"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    topic_config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert topic_config["retention.ms"].value == "3600000"
    assert topic_config["cleanup.policy"].value == "compact,delete"
