"""``flink-agents console``: its sources from the options, or from a job spec with the options
on top (docs/console.md)."""

from __future__ import annotations

from pathlib import Path

from flink_agents.cli import build_parser
from flink_agents.cli.console_command import console_sources

JOB = """\
name: refunds
agent: examples.refunds:build_agent
source: {kind: list, path: orders.jsonl}
key: order
decisions: {kind: kafka, topic: refund-decisions}
sink: {kind: file, path: out}
store: {kind: kafka, bootstrap_servers: "10.0.0.5:9092", topic: refunds-state, secret_env: S}
event_log: {path: "events-{subtask}.jsonl"}
"""


def sources_of(*argv: str):
    return console_sources(build_parser().parse_args(["console", *argv]))


def test_a_job_spec_names_every_source(tmp_path: Path) -> None:
    spec = tmp_path / "refunds.yaml"
    spec.write_text(JOB)
    sources = sources_of("--job", str(spec), "--flink-rest", "http://127.0.0.1:8081")
    assert sources.event_log == str(tmp_path.resolve() / "events-{subtask}.jsonl")
    assert (sources.store_topic, sources.secret_env) == ("refunds-state", "S")
    assert sources.bootstrap_servers == "10.0.0.5:9092"  # the store's brokers
    assert sources.outputs == str(tmp_path / "out")
    assert (sources.decisions_topic, sources.key_field) == ("refund-decisions", "order")
    assert sources.agent == "examples.refunds:build_agent"
    assert sources.flink_rest == "http://127.0.0.1:8081"


def test_options_given_with_a_job_win(tmp_path: Path) -> None:
    spec = tmp_path / "refunds.yaml"
    spec.write_text(JOB)
    sources = sources_of("--job", str(spec), "--store", "other-state", "--outputs", "o.jsonl")
    assert (sources.store_topic, sources.outputs) == ("other-state", "o.jsonl")
    assert sources.decisions_topic == "refund-decisions"


def test_without_a_job_only_the_options_count() -> None:
    sources = sources_of("--event-log", "e.jsonl", "--decisions-topic", "d", "--key-field", "id")
    assert (sources.event_log, sources.decisions_topic, sources.key_field) == ("e.jsonl", "d", "id")
    assert sources.store_topic is None and sources.outputs is None
