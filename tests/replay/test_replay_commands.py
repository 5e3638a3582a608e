"""``flink-agents store export`` and ``flink-agents replay``: a recorded topic (or its export)
against the agent as it is now; the exit status gates a deploy."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from flink_agents.cli import main
from flink_agents.durable.runner import StoreCallRunner
from flink_agents.durable.store import ActionStateStore, InMemoryActionStateStore
from flink_agents.durable.store.config import StoreConfig
from flink_agents.replay.recorded import read_store, write_states
from flink_agents.runtime import run_local
from tests.replay import agents

AGENT = "tests.replay.agents:agent"


def record_into(store: ActionStateStore) -> None:
    plan = agents.plan()
    run_local(plan, agents.INPUTS, key="user", call_runner=StoreCallRunner(store, agent=plan.name))
    store.flush()


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    store = InMemoryActionStateStore()
    record_into(store)
    path = tmp_path / "runs.jsonl"
    write_states(read_store(store), path)
    agents.CALLS.clear()
    return path


def test_replaying_an_export_against_unchanged_code_exits_zero(exported, capsys) -> None:
    assert main(["replay", AGENT, "--file", str(exported)]) == 0
    out = capsys.readouterr().out
    assert out.count(": same outputs (2 calls served from records, 0 made)") == 3
    assert out.endswith("3 runs: 3 same outputs; 0 calls made\n")
    assert not agents.CALLS


def test_a_divergence_exits_one_and_shows_the_first_differing_call(exported, capsys) -> None:
    agents.NOW.prompt = "You answer in French."
    assert main(["replay", AGENT, "--file", str(exported)]) == 1
    out = capsys.readouterr().out
    assert "first differing call: #0 of the run, #0 of action 'answer'" in out
    assert '+    "content": "You answer in French."' in out
    assert out.endswith("3 runs: 3 diverged; 0 calls made\n")


def test_runs_are_filtered_by_key_and_time(exported, capsys) -> None:
    assert main(["replay", AGENT, "--file", str(exported), "--key", "ann"]) == 0
    assert capsys.readouterr().out.endswith("2 runs: 2 same outputs; 0 calls made\n")
    assert main(["replay", AGENT, "--file", str(exported), "--since", "2999-01-01T00:00"]) == 0
    assert capsys.readouterr().out.endswith("0 runs: none; 0 calls made\n")
    assert main(["replay", AGENT, "--file", str(exported), "--until", "2999-01-01"]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")


def test_replay_needs_exactly_one_source_of_runs(exported, capsys) -> None:
    assert main(["replay", AGENT]) == 2
    assert "exactly one of --topic and --file" in capsys.readouterr().err


@pytest.mark.kafka
def test_a_recorded_kafka_topic_exports_and_replays(kafka_bootstrap, tmp_path, capsys) -> None:
    topic = f"test-replay-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(
        kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic, partitions=2
    ).build()
    try:
        record_into(store)
    finally:
        store.close()
    agents.CALLS.clear()
    topic_args = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap, "--partitions", "2"]

    assert main(["replay", AGENT, *topic_args]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")
    assert not agents.CALLS

    path = tmp_path / "ann.jsonl"
    assert main(["store", "export", *topic_args, "--key", "ann", "-o", str(path)]) == 0
    states = [json.loads(line) for line in path.read_text().splitlines()]
    assert {state["key"]["key"] for state in states} == {'"ann"'}
    agents.NOW.ask_time_too = True
    assert main(["replay", AGENT, "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert "tool tests.replay.agents.local_time (a call with no record (not made))" in out
    assert out.endswith("2 runs: 2 diverged; 0 calls made\n")
    assert not agents.CALLS
