"""Paused runs are observable: the keyed logic tells the event log (its ``wait`` records and
the metrics) when a run pauses at a wait and when the wait's decision, event or timeout
resumes it (docs/waits.md, "Watching paused runs").

Driven as tests/runtime/test_waits.py drives the keyed logic, over the in-memory store, with a
JSON-lines event log and the metrics listener the Flink operator uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flink_agents.durable.store import InMemoryLog
from flink_agents.observability import EventLogConfig, MetricsListener
from flink_agents.observability.sinks.metrics import (
    WAITS_PAUSED,
    WAITS_RESUMED,
    WAITS_TIMED_OUT,
)
from tests.runtime.test_waits import Waits, decide, waiting


class Watched:
    """Attempts of the refunds agent with an event log file and metrics."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.monkeypatch = monkeypatch
        self.path = tmp_path / "events.jsonl"
        self.log = InMemoryLog()
        self.metrics = MetricsListener()

    def attempt(self, table: dict[str, str], n: int) -> Waits:
        self.metrics = MetricsListener()  # a new task attempt counts afresh
        return Waits(
            self.monkeypatch,
            self.log,
            table,
            n,
            event_log=EventLogConfig(path=str(self.path)),
            listeners=[self.metrics],
        )

    def waits(self) -> list[dict[str, Any]]:
        """The ``wait`` records written so far (read after the attempt closed)."""
        lines = self.path.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["kind"] == "wait"]

    def counts(self) -> tuple[int, int, int, int]:
        """Pauses, resumes, timeouts, and runs paused now."""
        totals = self.metrics.total
        return (
            totals(WAITS_PAUSED),
            totals(WAITS_RESUMED),
            totals(WAITS_TIMED_OUT),
            self.metrics.waiting,
        )


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Watched:
    return Watched(monkeypatch, tmp_path)


def test_a_pause_and_its_approval_are_recorded_and_counted(watched):
    with watched.attempt({}, 0) as attempt:
        attempt.send("a", {"amount": 30, "timeout_s": 60})
        wait = waiting(attempt, "a")
    paused_only = watched.counts()
    with watched.attempt({}, 0) as attempt:  # the same run, decided this time
        attempt.send("b", {"amount": 30, "timeout_s": 60})
        other = waiting(attempt, "b")
        decide(attempt, "b", other, by="ann", message="fine by me")
        attempt.answers("b")
    assert paused_only == (1, 0, 0, 1)  # the gauge: one run paused now
    assert watched.counts() == (1, 1, 0, 0)
    pause, _, resume = watched.waits()
    assert pause == {
        **pause,
        "agent": "refunds",
        "key": "a",
        "seq": 0,
        "wait_id": wait["wait_id"],
        "wait_kind": "approval",
        "change": "paused",
        "deadline_ms": wait["deadline_ms"],
        "verdict": None,
        "request": {"amount": 30},
    }
    assert resume == {
        **resume,
        "key": "b",
        "wait_id": other["wait_id"],
        "change": "resumed",
        "verdict": "approved",
        "by": "ann",
        "request": None,
    }


def test_a_deciders_message_and_an_edits_arguments_stay_out_of_the_event_log(watched):
    with watched.attempt({}, 0) as attempt:
        attempt.send("a", {"amount": 30})
        decide(attempt, "a", waiting(attempt, "a"), "reject", message="card 4111 is stolen")
        attempt.answers("a")
        attempt.send("b", {"amount": 30})
        decide(attempt, "b", waiting(attempt, "b"), "edit", arguments={"amount": 17})
        attempt.answers("b")
    # (The wait call's own `call` record carries its result, as every call's does.)
    written = json.dumps(watched.waits())
    assert "stolen" not in written and '"amount": 17' not in written
    assert [(r["key"], r["verdict"]) for r in watched.waits() if r["change"] == "resumed"] == [
        ("a", "rejected"),
        ("b", "edited"),
    ]


def test_a_timeout_is_a_resume_with_its_verdict_and_counted_as_a_timeout(watched):
    with watched.attempt({}, 0) as attempt:
        attempt.send("a", {"amount": 30, "timeout_s": 60})
        waiting(attempt, "a")
        [deadline] = attempt.wake_timers
        attempt.fire("a", deadline)
        attempt.answers("a")
    assert watched.counts() == (1, 1, 1, 0)
    assert [(r["change"], r["verdict"]) for r in watched.waits()] == [
        ("paused", None),
        ("resumed", "timed_out"),
    ]


def test_a_decision_kept_for_a_wait_still_to_come_records_the_pause_then_the_resume(watched):
    with watched.attempt({}, 0) as attempt:
        attempt.send("a", {"amount": 30})
        wait_id = waiting(attempt, "a")["wait_id"]
    with watched.attempt({}, 0) as attempt:  # a fresh job: the decision comes first
        attempt.send("a", {"amount": 30})
        attempt.decide("a", {"wait": wait_id, "verdict": "approve", "by": "bo"})
        attempt.answers("a")
    *_, pause, resume = watched.waits()
    assert (pause["change"], resume["change"], resume["by"]) == ("paused", "resumed", "bo")
    assert watched.counts() == (1, 1, 0, 0)


def test_a_run_replayed_to_its_wait_after_a_restore_is_not_recorded_as_paused_again(watched):
    with watched.attempt({}, 0) as first:
        first.send("a", {"amount": 30, "timeout_s": 60})
        wait = waiting(first, "a")
        checkpoint = dict(first.table)
    with watched.attempt(checkpoint, 1) as second:
        assert second.visit("a") == []  # the run replays to its wait and pauses again
        decide(second, "a", wait, by="ann")
        second.answers("a")
    assert [(r["change"], r["wait_id"]) for r in watched.waits()] == [
        ("paused", wait["wait_id"]),
        ("resumed", wait["wait_id"]),
    ]
    # The new attempt did not count the pause: its gauge does not go below zero.
    assert watched.counts() == (0, 1, 0, 0)
