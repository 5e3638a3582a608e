"""Job specs: validation with file:line errors, Flink 2.x settings, a mini-cluster run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
