"""An upgrade keeps a running job: a savepoint and a store topic recorded by an earlier version
restore under this code and finish their runs without calling anything completed again.

The fixture (tests/fixtures/upgrade/v1, see its README.md) was recorded by
``python -m tests.fixtures.upgrade.record``: 12 tickets through a model -> tool -> model agent
with a Kafka store, stopped with a savepoint while runs were in flight (some answered, some with
a few calls completed and recorded, some still waiting in keyed state). Here its store topic is
written back at its offsets (``topic_log.load``), the job is started from its savepoint against
fresh counting services, and runs to the end of its input. The contract (docs/operations.md,
"Upgrading a running job"):

* every ticket is answered, with its expected answer, before or after the upgrade;
* no call recorded as completed in the fixture reaches a service again (re-invoked = 0);
* every call not recorded as completed is made exactly once: the restored runs went on.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.services import ExampleServices, ticket_of
from flink_agents.durable.store import CallStatus
from flink_agents.replay.recorded import read_states
from tests.fixtures.upgrade import job, topic_log

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade" / "v1"


def _manifest() -> dict[str, Any]:
    return json.loads((FIXTURE / "manifest.json").read_text())


def test_the_fixture_has_runs_in_flight() -> None:
    """What the restore below is worth: answered tickets, runs with completed and missing calls,
    and runs with none yet."""
    summary = _manifest()["summary"]
    assert _manifest()["answered_before_stop"]
    assert summary["unanswered_with_some_calls_completed"]
    assert summary["unanswered_with_no_call_completed"]


def test_the_exported_store_reads_and_names_the_completed_calls() -> None:
    """``flink-agents store export``'s file of the fixture still reads, with the same calls."""
    completed = {
        job.recorded_call(call.call_id, call.arguments)
        for state in read_states(FIXTURE / "store-export.jsonl")
        for call in state.calls
        if call.status is not CallStatus.PENDING
    }
    assert completed == set(_manifest()["completed_calls"])


def _older_flink_than_the_fixture() -> bool:
    from pyflink.version import __version__

    def release(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split(".")[:3])

    return release(__version__) < release(_manifest()["recorded_with"]["flink"])


@pytest.mark.flink
@pytest.mark.kafka
@pytest.mark.skipif(
    _older_flink_than_the_fixture(),
    reason="Flink restores savepoints of its own or earlier versions only (an older line, "
    "scripts/flink-line.sh)",
)
def test_a_savepoint_of_an_earlier_version_restores_and_reinvokes_no_completed_call(
    make_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    manifest = _manifest()
    topic = topic_log.load(kafka_bootstrap, FIXTURE / "store-log.jsonl")
    assert topic == manifest["store"]["topic"] == job.STORE_TOPIC
    savepoint = tmp_path / "savepoint"  # a copy: Flink must not touch the fixture
    shutil.copytree(FIXTURE / "savepoint", savepoint)
    env = make_flink_env(**{"execution.state-recovery.path": savepoint.as_uri()})
    outputs = tmp_path / "outputs.jsonl"
    services = ExampleServices(0).start()
    try:
        job.build(
            env,
            services=services,
            bootstrap=kafka_bootstrap,
            outputs=outputs,
            started_from_savepoint=True,
            work=tmp_path,
            input_text=(FIXTURE / "tickets.jsonl").read_text(),
        )
        env.execute("upgrade-fixture-restored")
    finally:
        services.shutdown()
        services.server_close()

    tickets = {t["ticket"]: t for t in job.tickets()}
    before = job.read_outputs(FIXTURE / "outputs.jsonl")
    after = job.read_outputs(outputs)
    errors = [o for o in after if "error" in o]
    assert not errors, f"error outputs after the restore: {errors[:3]}"
    answers: dict[str, set[str]] = {}
    for record in before + after:
        answers.setdefault(ticket_of(record["output"]), set()).add(record["output"])
    missing = sorted(set(tickets) - set(answers))
    assert not missing, f"tickets never answered: {missing}"
    wrong = {t: a for t, a in answers.items() if a != {job.expected_output(tickets[t])}}
    assert not wrong, f"answers differing from the expected ones: {wrong}"
    answered_before = {ticket_of(record["output"]) for record in before}
    assert answered_before == set(manifest["answered"])
    # Answered before the stop was asked for, so done in the savepoint: a restore that started
    # over (the source from the start, the store read whole) would answer them again. (A ticket
    # answered between the request and the barrier may be answered again: its run is in flight
    # in the savepoint; its answer is the same, checked above.)
    again = set(manifest["answered_before_stop"]) & {ticket_of(o["output"]) for o in after}
    assert not again, f"tickets done in the savepoint answered again: {sorted(again)}"

    requests = job.requests_by_call(services)
    completed = set(manifest["completed_calls"])
    reinvoked = sorted(name for name in requests if name in completed)
    assert not reinvoked, f"calls completed in the fixture made again: {reinvoked}"
    needed = {
        f"{ticket}/{call}"
        for ticket in tickets
        if ticket not in answered_before
        for call in job.CALLS_PER_TICKET
    }
    assert requests == Counter(dict.fromkeys(needed - completed, 1)), (
        "the restored runs did not make each missing call once"
    )
