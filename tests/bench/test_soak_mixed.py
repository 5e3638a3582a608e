"""The soak's mixed workload (bench/soak_refunds.py): the refund desk runs locally against the
example services with every call witnessed and joined to its record, and the checker's wait
checks report each planted violation by name with its input, call and fault. Fast: no JVM, no
broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.crash_oracle import ModelCalls, completed_at, requests_of
from bench.soak_checker import WAIT_CHECKS, GatedRun, Happened, Resolution, Verdict, check_waits
from bench.soak_refunds import (
    TIMED_OUT,
    build_agent,
    expected_answers,
    gated_runs,
    order_line,
    resolutions,
    searches,
    verdict_for,
    witness_key,
    write_policy,
)
from examples.services import ExampleServices
from flink_agents.durable.store import (
    ActionState,
    CallResult,
    CallStatus,
    InMemoryActionStateStore,
    InMemoryLog,
    RecordCodec,
)
from flink_agents.runtime import run_local

KILL = Happened("F001-taskmanager-kill", "taskmanager-kill", 100.0, 100.0)
ASKED = {"order": "o-1", "amount": 2500}


def _outcomes(log: InMemoryLog) -> list[tuple[float, CallResult]]:
    """Every finished call the store's log holds (as the soak reads the store topic)."""
    codec = RecordCodec(None)
    found = []
    for offset, (key, value) in enumerate(log.partitions[0]):
        if value is None:
            continue
        record = codec.decode(key, value, topic="", partition=0, offset=offset)
        for call in record.calls if isinstance(record, ActionState) else [record]:
            if call.status is not CallStatus.PENDING:
                found.append((0.0, call))
    return found


@pytest.fixture
def services() -> Iterator[ExampleServices]:
    running = ExampleServices(0).start()
    yield running
    running.shutdown()
    running.server_close()


def test_the_refund_desk_retrieves_waits_and_refunds_with_every_call_witnessed(
    services: ExampleServices, tmp_path: Path
) -> None:
    witness = tmp_path / "searches.jsonl"
    agent = build_agent(
        services.url, write_policy(tmp_path / "policy.json"), witness, 60.0, {"timeout_seconds": 5}
    )
    lines = [order_line(n) for n in range(5)]  # o-1..o-3 approved, o-4 edited, o-5 undecided
    orders = [json.loads(line) for line in lines]
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    paused = run_local(agent, orders, key="order", store=store)
    assert [r.paused and r.paused.request for r in paused] == [
        {"order": f"o-{n}", "amount": 2500} for n in range(1, 6)
    ]
    decisions = [
        {"order": r.key, "wait": r.paused.wait_id, **decision}
        for r in paused
        if r.paused and (decision := verdict_for(r.key))
    ]
    answers = run_local(agent, orders, key="order", store=store, decisions=decisions)

    expected = expected_answers(lines)
    assert [r.output_values for r in answers[:4]] == [
        [expected[(f"o-{n}", 0)]] for n in (1, 2, 3, 4)
    ]
    assert expected[("o-5", 0)] == TIMED_OUT and answers[4].paused is not None  # no clock here
    # Each call once, and every request a witness saw joins the record of its call.
    keys = {r.key for r in requests_of(services)} | {key for key, _, _ in searches(witness)}
    counted = {service: len(keys) for service, keys in services.counters.snapshot().items()}
    assert counted == {"embeddings": 5, "model": 5, "refunds": 4}
    assert len(searches(witness)) == 5
    bodies = [body for found in services.conversations.by_ticket().values() for body in found]
    assert len(bodies) == 5 and all("[1] (source: policy/" in body for body in bodies)
    outcomes = _outcomes(log)
    completed = completed_at(outcomes, ModelCalls(services), witness_key)
    assert len(keys) == 19 and keys <= set(completed), "a witnessed call without its record"
    verdict = Verdict()
    check_waits(
        verdict,
        resolutions(outcomes),
        gated_runs(services.refund_requests),
        [f"o-{n}" for n in range(1, 5)],
        [],
    )
    assert verdict.ok, [v.line() for v in verdict.violations]
    assert services.refund_requests[3].amount == 1000  # the edit's amount


def test_every_wait_violation_is_named_with_its_input_call_and_fault() -> None:
    approved = Resolution(ASKED, {"verdict": "approved", "by": "ann"})
    timed_out = Resolution({"order": "o-2", "amount": 2500}, {"verdict": "timed_out"})
    edited = Resolution(
        {"order": "o-3", "amount": 2500},
        {"verdict": "edited", "arguments": {"order": "o-3", "amount": 1000}},
    )
    resolved = {
        "o-1": [approved],
        "o-2": [timed_out],
        "o-3": [edited],
        "o-4": [approved, timed_out],  # two different recorded decisions
    }
    gated = [
        GatedRun("o-1", "key-1", ASKED, 90.0),
        GatedRun("o-1", "key-1b", ASKED, 105.0),  # a second call of the gated tool
        GatedRun("o-2", "key-2", {"order": "o-2", "amount": 2500}, 95.0),  # it timed out
        GatedRun("o-3", "key-3", {"order": "o-3", "amount": 2500}, 96.0),  # not the edit's
    ]
    verdict = Verdict()
    check_waits(verdict, resolved, gated, ["o-1", "o-2", "o-3", "o-4", "o-5"], [KILL])
    counts = verdict.counts()
    assert {check: counts[check] for check in WAIT_CHECKS} == {
        "wait-unresolved": 1,
        "wait-resolved-twice": 1,
        "gated-twice": 1,
        "gated-unapproved": 2,
    }
    lines = sorted(v.line() for v in verdict.violations)
    assert lines[0].startswith("gated-twice: gated call key-1b of o-1 (fault F001-taskmanager")
    assert lines[1].startswith("gated-unapproved: gated call key-2 of o-2 (fault -)")
    assert "timed_out" in lines[1]
    assert lines[2].startswith("gated-unapproved: gated call key-3 of o-3") and "1000" in lines[2]
    assert lines[3].startswith("wait-resolved-twice: wait of o-4")
    assert lines[4].startswith("wait-unresolved: wait of o-5")


def test_a_clean_run_without_waits_names_only_the_history_checks() -> None:
    assert not set(WAIT_CHECKS) & set(Verdict().counts())
