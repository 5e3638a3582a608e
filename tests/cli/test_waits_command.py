"""``flink-agents waits``: decision records the job's resume path reads, and the open waits of
a job's outputs (docs/waits.md, "Deciding from the command line")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from flink_agents.cli import EXIT_USAGE, json_topic, main
from flink_agents.cli.conventions import EXIT_STORE, EXIT_TOPIC
from flink_agents.durable.store import InMemoryLog, StoreConfig
from flink_agents.observability import EventLogConfig, KafkaEventLogConfig
from flink_agents.runtime import run_local
from flink_agents.runtime.local_waits import DecisionRefusedError
from tests.runtime.test_local_waits import MEMORY
from tests.runtime.test_waits import CALLS, PLAN, Waits, waiting
from tests.runtime.test_waits_alongside import ALONGSIDE, approve

INPUT = {"id": "a", "amount": 3}


@pytest.fixture(autouse=True)
def _counts() -> None:
    CALLS.clear()


def decide(tmp_path: Path, verdict: str, wait_id: str, *more: str) -> list[dict[str, Any]]:
    """Run ``waits VERDICT`` into a decisions file; every record the file holds now."""
    path = tmp_path / "decisions.jsonl"
    command = ["waits", verdict, wait_id, "--key", "a", "--key-field", "id", "--file", str(path)]
    assert main([*command, *more]) == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def paused_wait_id() -> str:
    [paused] = run_local(PLAN, [INPUT], key="id", settings=MEMORY)
    assert paused.paused is not None
    return paused.paused.wait_id


def test_an_approval_written_to_a_file_resumes_the_run(tmp_path):
    wait_id = paused_wait_id()
    [record] = decide(tmp_path, "approve", wait_id, "--by", "ann")
    assert record["id"] == "a" and record["verdict"] == "approve" and record["record_id"]
    [result] = run_local(PLAN, [INPUT], key="id", settings=MEMORY, decisions=[record])
    assert result.output_values == [{"refund": "refunded 3", "by": "ann"}]


def test_an_approval_with_new_arguments_is_an_edit(tmp_path):
    wait_id = paused_wait_id()
    [record] = decide(tmp_path, "approve", wait_id, "--arguments", '{"amount": 1}')
    assert record["verdict"] == "edit"
    [result] = run_local(PLAN, [INPUT], key="id", settings=MEMORY, decisions=[record])
    assert result.output_values == [{"refund": "refunded 1", "by": None}]


def test_a_rejection_reaches_the_action_with_its_message(tmp_path):
    wait_id = paused_wait_id()
    [record] = decide(tmp_path, "reject", wait_id, "--by", "bo", "--message", "too much")
    [result] = run_local(PLAN, [INPUT], key="id", settings=MEMORY, decisions=[record])
    assert result.output_values == [{"verdict": "rejected", "why": "too much"}]
    assert CALLS["refund"] == 0


def test_a_decision_names_the_fingerprint_it_was_made_on(tmp_path):
    [paused] = run_local(PLAN, [INPUT], key="id", settings=MEMORY)
    assert paused.paused is not None and paused.paused.fingerprint
    wait_id, seen = paused.paused.wait_id, paused.paused.fingerprint
    [stale] = decide(tmp_path, "approve", wait_id, "--fingerprint", "0" * 32)
    current = decide(tmp_path, "approve", wait_id, "--fingerprint", seen)[1]
    assert current["fingerprint"] == seen
    with pytest.raises(DecisionRefusedError, match="another version of the request"):
        run_local(PLAN, [INPUT], key="id", settings=MEMORY, decisions=[stale])
    [result] = run_local(PLAN, [INPUT], key="id", settings=MEMORY, decisions=[current])
    assert result.output_values == [{"refund": "refunded 3", "by": None}]


def test_a_command_sent_twice_is_dropped_and_the_wait_leaves_the_list(
    monkeypatch, tmp_path, capsys
):
    outputs = tmp_path / "outputs.jsonl"
    with Waits(monkeypatch, InMemoryLog(), {}, 0) as attempt:
        attempt.send("a", INPUT)
        wait = waiting(attempt, "a")
        outputs.write_text(json.dumps({"agent": "refunds", "key": "a", "seq": 0, "waiting": wait}))
        assert main(["waits", "list", "--file", str(outputs)]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert line.startswith(f'key="a"  wait={wait["wait_id"]}  request={{"amount":3}}')
        decide(tmp_path, "approve", wait["wait_id"], "--by", "ann")
        first, again = decide(tmp_path, "approve", wait["wait_id"], "--by", "ann")
        assert first == again
        assert attempt.decide("a", first) == []
        assert attempt.decide("a", again) == []  # a duplicate: no refused record either
        [answer] = attempt.answers("a")
    assert answer["output"] == {"refund": "refunded 3", "by": "ann"}
    assert CALLS == {"quote": 1, "refund": 1}
    with outputs.open("a") as out:
        out.write("\n" + json.dumps(answer) + "\n")
    capsys.readouterr()
    assert main(["waits", "list", "--file", str(outputs)]) == 0
    listed = capsys.readouterr()
    assert listed.out == "" and "0 open waits" in listed.err


def waiting_line(key: Any, seq: int, wait_id: str) -> str:
    waiting = {"wait_id": wait_id, "kind": "approval", "request": {"n": seq}, "deadline_ms": 9}
    return json.dumps({"agent": "refunds", "key": key, "seq": seq, "waiting": waiting})


OUTPUTS = [
    waiting_line("a", 0, "w1"),
    waiting_line(17, 0, "w2"),
    json.dumps({"agent": "refunds", "key": "b", "refused": {"reason": "no wait"}}),
    waiting_line("a", 1, "w3"),
    waiting_line("a", 1, "w4"),  # the run of seq 1 went past w3 to its next wait
    "not json",
]


def test_list_shows_each_runs_latest_wait_and_filters_by_key(tmp_path, capsys):
    path = tmp_path / "outputs.jsonl"
    path.write_text("\n".join(OUTPUTS) + "\n")
    assert main(["waits", "list", "--file", str(path)]) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ['key="a"', "wait=w1"],
        ["key=17", "wait=w2"],
        ['key="a"', "wait=w4"],
    ]
    assert main(["waits", "list", "--file", str(path), "--key", "17"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line == 'key=17  wait=w2  request={"n":0}  deadline_ms=9'


def test_list_reads_the_open_waits_from_the_jobs_event_log(monkeypatch, tmp_path, capsys):
    events = tmp_path / "events.jsonl"
    observed = {"event_log": EventLogConfig(path=str(events))}
    with Waits(monkeypatch, InMemoryLog(), {}, 0, **observed) as job:
        job.send("a", {"amount": 30, "timeout_s": 60})
        open_wait = waiting(job, "a")
        job.send(17, {"amount": 5})
        job.decide(17, {"wait": waiting(job, 17)["wait_id"], "verdict": "approve"})
        job.answers(17)
    assert main(["waits", "list", "--event-log", "--file", str(events)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line == (
        f'key="a"  wait={open_wait["wait_id"]}  request={{"amount":30}}  '
        f"deadline_ms={open_wait['deadline_ms']}"
    )
    assert main(["waits", "list", "--event-log", "--file", str(events), "--key", "17"]) == 0
    assert capsys.readouterr().out == ""


def test_list_of_an_event_log_that_is_not_one_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "outputs.jsonl"
    path.write_text("\n".join(OUTPUTS) + "\n")  # a job's outputs, not its event log
    assert main(["waits", "list", "--event-log", "--file", str(path)]) == EXIT_USAGE
    [error] = capsys.readouterr().err.splitlines()
    assert error.startswith("flink-agents waits: ") and "not an event log record" in error


def test_list_skips_output_lines_nested_too_deeply_or_with_nan(tmp_path, capsys):
    # Found by the bad-input properties (issue 37): a deeply nested line stopped `waits list`
    # with a RecursionError.
    path = tmp_path / "outputs.jsonl"
    bad = ['{"agent": "x", "key": ' + "[" * 5_000 + "]" * 5_000 + ', "seq": 0}', '{"key": NaN}']
    path.write_text("\n".join([*bad, *OUTPUTS]) + "\n")
    assert main(["waits", "list", "--file", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_arguments_nested_too_deeply_are_a_one_line_usage_error(tmp_path, capsys):
    command = ["waits", "approve", "w1", "--key", "a", "--key-field", "id"]
    deep = '{"a": ' + "[" * 5_000 + "]" * 5_000 + "}"
    assert main([*command, "--file", str(tmp_path / "d"), "--arguments", deep]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("flink-agents waits: --arguments cannot be used: nested deeper than")
    assert err.count("\n") == 1


def test_bad_arguments_are_a_one_line_usage_error(tmp_path, capsys):
    command = ["waits", "approve", "w1", "--key", "a", "--key-field", "id"]
    assert main([*command, "--file", str(tmp_path / "d"), "--arguments", "{amount"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("flink-agents waits: --arguments is not JSON") and err.count("\n") == 1
    assert main([*command, "--file", str(tmp_path / "d"), "--arguments", "[1]"]) == EXIT_USAGE
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["waits", "reject", "w1", "--key", "null", "--key-field", "id", "--file", "d"]) == 2
    assert "a run's key is never null" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_an_unreachable_broker_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setattr(json_topic, "TIMEOUT_S", 0.5)
    command = ["waits", "reject", "w1", "--key", "a", "--key-field", "id", "--topic", "d"]
    assert main([*command, "--bootstrap-servers", "127.0.0.1:1"]) == EXIT_TOPIC
    err = capsys.readouterr().err
    assert err.startswith("flink-agents waits: no Kafka broker answered at 127.0.0.1:1")
    assert err.count("\n") == 1


@pytest.mark.kafka
def test_a_decision_goes_to_the_decisions_topic_and_list_reads_an_output_topic(
    kafka_bootstrap, capsys
):
    decisions, outputs = (f"test-waits-{name}-{uuid.uuid4().hex[:12]}" for name in "do")
    servers = ["--bootstrap-servers", kafka_bootstrap]
    command = ["waits", "approve", "w1", "--key", "a", "--key-field", "id", *servers]
    assert main([*command, "--topic", decisions]) == EXIT_TOPIC  # no such topic: not created
    assert f"no topic {decisions!r}" in capsys.readouterr().err
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in (decisions, outputs)]).values():
        future.result(10)
    assert main([*command, "--topic", decisions, "--by", "ann"]) == 0
    [record] = [json.loads(line) for line in json_topic.read(kafka_bootstrap, decisions)]
    assert record == {
        "id": "a",
        "wait": "w1",
        "verdict": "approve",
        "by": "ann",
        "record_id": record["record_id"],
    }
    for line in OUTPUTS[:2]:
        json_topic.append(kafka_bootstrap, outputs, "k", line)
    capsys.readouterr()
    assert main(["waits", "list", "--topic", outputs, *servers]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == [
        "wait=w1",
        "wait=w2",
    ]
    admin.delete_topics([decisions, outputs])


@pytest.mark.kafka
def test_list_reads_the_open_waits_from_an_event_log_topic(monkeypatch, kafka_bootstrap, capsys):
    topic = f"test-waits-log-{uuid.uuid4().hex[:12]}"
    kafka = KafkaEventLogConfig(topic=topic, bootstrap_servers=kafka_bootstrap, partitions=2)
    with Waits(monkeypatch, InMemoryLog(), {}, 0, event_log=EventLogConfig(kafka=kafka)) as job:
        job.send("a", {"amount": 30})
        wait_id = waiting(job, "a")["wait_id"]
    # The event log's producer has every record acknowledged when the job closes.
    servers = ["--bootstrap-servers", kafka_bootstrap]
    assert main(["waits", "list", "--event-log", "--topic", topic, *servers]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f'key="a"  wait={wait_id}  request={{"amount":30}}')
    AdminClient({"bootstrap.servers": kafka_bootstrap}).delete_topics([topic])


@pytest.mark.kafka
def test_list_reads_the_open_waits_from_the_action_state_store(
    monkeypatch, kafka_bootstrap, capsys
):
    """Through the real runner path: runs of the keyed logic over a Kafka store topic, two
    paused alongside a decided one (``while_paused: alongside``), and a key whose run ended."""
    topic = f"test-waits-store-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic, partitions=2)
    with Waits(monkeypatch, None, {}, 0, ALONGSIDE, store=store) as job:
        job.send("k", {"order": "o1", "ask": True, "timeout_s": 60})
        job.send("k", {"order": "o2", "ask": True})
        job.send(17, {"order": "o3", "ask": True})
        shown = {(r["key"], r["seq"]): r["waiting"] for r in job.answers("k", count=2)}
        shown[(17, 0)] = job.answers(17)[0]["waiting"]
        approve(job, "k", 1)
        approve(job, 17, 0)
        assert [a["seq"] for a in job.answers("k") + job.answers(17)] == [1, 0]
    servers = ["--bootstrap-servers", kafka_bootstrap]
    assert main(["waits", "list", "--store", "--topic", topic, *servers]) == 0
    listed = capsys.readouterr()
    [line] = listed.out.splitlines()  # k's run 1 and key 17's run took their decisions
    key, wait, request, deadline = line.split("  ")
    assert (key, wait, request) == (
        'key="k"',
        f"wait={shown[('k', 0)]['wait_id']}",
        'request={"order":"o1"}',
    )
    # From the wait call's start: at or a moment before the deadline the key state registered.
    assert 0 < int(deadline.removeprefix("deadline_ms=")) <= shown[("k", 0)]["deadline_ms"]
    assert "1 open waits" in listed.err
    assert main(["waits", "list", "--store", "--topic", topic, "--key", "17", *servers]) == 0
    assert capsys.readouterr().out == ""
    AdminClient({"bootstrap.servers": kafka_bootstrap}).delete_topics([topic])


@pytest.mark.kafka
def test_list_of_a_store_topic_that_does_not_exist_is_a_one_line_error(kafka_bootstrap, capsys):
    topic = f"test-waits-none-{uuid.uuid4().hex[:12]}"
    command = ["waits", "list", "--store", "--topic", topic, "--bootstrap", kafka_bootstrap]
    assert main(command) == EXIT_STORE
    err = capsys.readouterr().err
    assert err.startswith("flink-agents waits: ") and err.count("\n") == 1


def test_list_from_the_store_needs_its_topic(tmp_path, capsys):
    assert main(["waits", "list", "--store", "--file", str(tmp_path / "x")]) == EXIT_USAGE
    assert "--store reads a store topic" in capsys.readouterr().err
