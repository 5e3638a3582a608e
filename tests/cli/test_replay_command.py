"""``flink-agents store export`` and ``flink-agents replay``: a recorded topic (or its export)
against the agent as it is now; the exit status gates a deploy."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from flink_agents.cli import main
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import (
    ActionStateStore,
    InMemoryActionStateStore,
    secret_from_env,
)
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.replay.recorded import read_states, read_store, write_states
from flink_agents.runtime import run_local
from tests.replay import agents
from tests.replay.conftest import recorded_behaviour  # noqa: F401  (autouse: the agent as recorded)

AGENT = "tests.replay.agents:agent"


def record_into(store: ActionStateStore) -> None:
    plan = agents.plan()
    run_local(plan, agents.INPUTS, key="user", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()


def recorded_kafka_topic(bootstrap: str, prefix: str = "test-replay") -> str:
    """A new store topic on the broker with the agent's runs recorded in it (calls forgotten)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(
        kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2
    ).build()
    try:
        record_into(store)
    finally:
        store.close()
    agents.CALLS.clear()
    return topic


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    store = InMemoryActionStateStore()
    record_into(store)
    path = tmp_path / "runs.jsonl"
    # Signed as `store export` signs with the store secret set (the tests' environment has it).
    write_states(read_store(store), path, secret_from_env())
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
    assert main(["replay", AGENT, "--file", str(exported), "--until", "2999-01-01"]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")


def test_no_run_matched_fails_unless_allowed(exported, capsys) -> None:
    future = ["replay", AGENT, "--file", str(exported), "--since", "2999-01-01T00:00"]
    assert main(future) == 4
    captured = capsys.readouterr()
    assert captured.out.endswith("0 runs: none; 0 calls made\n")
    assert captured.err == (
        "flink-agents replay: nothing checked: no recorded run of 'concierge' matched "
        "--since 2999-01-01T00:00 (--allow-empty to accept that)\n"
    )
    assert main([*future, "--key", "ann"]) == 4
    assert "matched --key ann --since 2999-01-01T00:00 (" in capsys.readouterr().err
    assert main([*future, "--allow-empty"]) == 0
    assert "nothing checked" in capsys.readouterr().err  # still said, as a note


def test_an_empty_recording_or_one_with_no_replayable_run_checks_nothing_and_fails(
    exported, tmp_path, capsys
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["replay", AGENT, "--file", str(empty)]) == 4
    assert f"nothing checked: file {empty} holds no recorded run (" in capsys.readouterr().err
    assert main(["replay", AGENT, "--file", str(empty), "--allow-empty"]) == 0
    capsys.readouterr()

    # Recorded before inputs were: every run is reported, none could be checked.
    secret = secret_from_env()
    states = list(read_states(exported, secret=secret))
    no_inputs = tmp_path / "no-inputs.jsonl"
    write_states((s.model_copy(update={"run_input": None}) for s in states), no_inputs, secret)
    assert main(["replay", AGENT, "--file", str(no_inputs)]) == 4
    captured = capsys.readouterr()
    assert captured.out.endswith("3 runs: 3 not replayable; 0 calls made\n")
    assert "nothing checked: none of the 3 runs could be replayed" in captured.err


def test_an_agent_with_no_recorded_run_is_an_error_naming_the_recorded_agents(
    exported, capsys
) -> None:
    # Renamed since the recording: its runs would be another agent's, and none would replay.
    renamed = "tests.replay.agents:renamed"
    assert main(["replay", renamed, "--file", str(exported)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"flink-agents replay: no recorded run of agent 'front_desk' in file {exported}, "
        "which holds runs of 'concierge' (3 runs); "
    )
    # Not a filter that matched nothing: --allow-empty does not accept it.
    assert main(["replay", renamed, "--file", str(exported), "--allow-empty"]) == 2


def test_a_replayed_run_that_now_fails_is_reported_failed_and_exits_one(exported, capsys) -> None:
    agents.NOW.fail_after_calls = True
    assert main(["replay", AGENT, "--file", str(exported)]) == 1
    out = capsys.readouterr().out
    assert out.count(": failed (2 calls served from records, 0 made)") == 3
    assert "  ValueError: no forecast format for Oslo" in out
    assert out.endswith("3 runs: 3 failed; 0 calls made\n")
    assert not agents.CALLS


def test_live_changed_asks_the_model_again_for_a_changed_prompt_and_shows_both_answers(
    exported, capsys
) -> None:
    agents.NOW.prompt = "You answer in French."
    # Only calls with no record are made live: the changed model call ends each run.
    for missing in (["--live", "missing"], ["--allow-live"]):
        assert main(["replay", AGENT, "--file", str(exported), *missing]) == 1
        assert capsys.readouterr().out.endswith("3 runs: 3 diverged; 0 calls made\n")
        assert not agents.CALLS

    assert main(["replay", AGENT, "--file", str(exported), "--live", "changed"]) == 1
    out = capsys.readouterr().out
    # The model is asked again; the unchanged tool call is still served from its record.
    assert agents.CALLS == {"chat": 3}
    assert out.count(": diverged (1 calls served from records, 1 made)") == 3
    assert "(another call than the recorded one (made live))" in out
    oslo = out[out.index('"ann"/0: diverged') :]
    made = oslo[oslo.index("  made live: ") :]
    assert made.splitlines()[:5] == [
        "  made live: #0 of the run, #0 of action 'answer': function tests.replay.agents.chat",
        '    recorded: "It is nice in Oslo."',
        '    live:     "Il fait beau à Oslo."',
        "  recorded outputs: ['It is nice in Oslo. (12 degrees)']",
        "  outputs now:      ['Il fait beau à Oslo. (12 degrees)']",
    ]
    assert out.endswith("3 runs: 3 diverged; 3 calls made\n")


def test_replay_needs_exactly_one_source_of_runs(exported, capsys) -> None:
    assert main(["replay", AGENT]) == 2
    assert "exactly one of --topic and --file" in capsys.readouterr().err


@pytest.mark.kafka
def test_a_recorded_kafka_topic_exports_and_replays(kafka_bootstrap, tmp_path, capsys) -> None:
    topic = recorded_kafka_topic(kafka_bootstrap)
    topic_args = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap]

    assert main(["replay", AGENT, *topic_args]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")
    assert not agents.CALLS

    path = tmp_path / "ann.jsonl"
    assert main(["store", "export", *topic_args, "--key", "ann", "-o", str(path)]) == 0
    states = list(read_states(path, secret=secret_from_env()))
    assert {state.key.key for state in states} == {'"ann"'}
    agents.NOW.ask_time_too = True
    assert main(["replay", AGENT, "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert "function tests.replay.agents.local_time (a call with no record (not made))" in out
    assert out.endswith("2 runs: 2 diverged; 0 calls made\n")
    assert not agents.CALLS


@pytest.mark.kafka
def test_a_signed_topic_exports_signed_and_its_export_replays_only_with_its_secret(
    kafka_bootstrap, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("FLINK_AGENTS_STORE_SECRET", "job secret")
    topic = recorded_kafka_topic(kafka_bootstrap, "test-replay-signed")
    path = tmp_path / "runs.jsonl"
    where = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap]

    assert main(["store", "export", *where, "-o", str(path)]) == 0
    assert all(line.startswith('{"mac": "') for line in path.read_text().splitlines())
    assert main(["replay", AGENT, "--file", str(path)]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")
    monkeypatch.setenv("FLINK_AGENTS_STORE_SECRET", "another secret")
    assert main(["replay", AGENT, "--file", str(path)]) == 4
    assert not agents.CALLS


def _topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


@pytest.mark.kafka
def test_a_missing_topic_is_an_error_and_no_command_creates_it(
    kafka_bootstrap, tmp_path, capsys
) -> None:
    # A mistyped --topic: the broker auto-creates topics (scripts/kafka.sh), so a read that
    # named it in a metadata request, or created the store's topic, would find it empty: "0 runs".
    topic = f"test-replay-typo-{uuid.uuid4().hex[:12]}"
    where = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap]
    missing = f"store topic {topic!r} at {kafka_bootstrap}: no such topic\n"

    assert main(["replay", AGENT, *where]) == 3
    assert capsys.readouterr().err == f"flink-agents replay: {missing}"
    assert main(["replay", AGENT, *where, "--allow-empty"]) == 3
    capsys.readouterr()
    assert main(["store", "export", *where, "-o", str(tmp_path / "out.jsonl")]) == 3
    assert capsys.readouterr().err == f"flink-agents store export: {missing}"
    assert not (tmp_path / "out.jsonl").exists()
    assert main(["store", "inspect", *where, "--key", "ann"]) == 1
    assert capsys.readouterr().err == f"flink-agents store inspect: {missing}"
    time.sleep(0.5)  # an auto-creation is asynchronous on the broker
    assert not _topic_exists(kafka_bootstrap, topic)


@pytest.mark.kafka
def test_a_topic_with_another_partition_count_than_given_is_refused(kafka_bootstrap, capsys):
    topic = recorded_kafka_topic(kafka_bootstrap)
    where = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap]
    assert main(["replay", AGENT, *where, "--partitions", "4"]) == 3
    assert "has 2 partitions, configured 4" in capsys.readouterr().err
    assert main(["replay", AGENT, *where, "--partitions", "2"]) == 0


def test_with_a_store_secret_replay_reads_only_a_signed_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = InMemoryActionStateStore()
    record_into(store)
    agents.CALLS.clear()
    signed, unsigned = tmp_path / "signed.jsonl", tmp_path / "unsigned.jsonl"
    write_states(read_store(store), signed, secret=b"job secret")
    write_states(read_store(store), unsigned)
    monkeypatch.setenv("FLINK_AGENTS_STORE_SECRET", "job secret")

    assert main(["replay", AGENT, "--file", str(signed)]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 same outputs; 0 calls made\n")
    assert main(["replay", AGENT, "--file", str(unsigned)]) == 4  # every line skipped
    assert "holds no recorded run" in capsys.readouterr().err
    assert not agents.CALLS
