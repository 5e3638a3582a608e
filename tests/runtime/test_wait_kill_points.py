"""The kill points of durable waits (flink_agents/durable/faults.py, docs/waits.md): each is
reached where its moment happens, and a crash there, restored from a checkpoint, makes no call
before the wait again and resolves the wait once (bench/crash_waits.py crashes the refunds job
at them on the mini-cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flink_agents.durable import faults
from flink_agents.durable.faults import KillPointReached
from flink_agents.durable.store import InMemoryLog
from tests.runtime.test_waits import CALLS, Waits, decide, waiting


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    CALLS.clear()
    yield
    faults.disarm()  # an attempt arms its plan process-wide


def attempt(monkeypatch: pytest.MonkeyPatch, log: InMemoryLog, table: dict, n: int, **more: Any):
    return Waits(monkeypatch, log, table, n, **more)


class Watched(Waits):
    """An attempt that keeps how many runs each visit parked."""

    parked: list[int]

    def _took(self, visit: Any) -> list[dict]:
        self.parked = [*getattr(self, "parked", []), visit.parked]
        return super()._took(visit)


def test_the_visit_that_emits_a_waiting_record_counts_its_run_as_parked(monkeypatch):
    with Watched(monkeypatch, InMemoryLog(), {}, 0) as first:
        first.send("a", {"amount": 30})
        waiting(first, "a")
        first.visit("a")  # paused: nothing new
        # The operator passes the while-paused point once for each (after the visit's outputs).
        assert [n for n in first.parked if n] == [1] and first.parked[-1] == 0


def test_a_crash_with_a_decision_read_but_not_handed_to_the_run_loses_no_decision(monkeypatch):
    log = InMemoryLog()
    with attempt(monkeypatch, log, {}, 0, kill_points="decision-read@1") as first:
        first.send("a", {"amount": 30})
        wait = waiting(first, "a")
        checkpoint = dict(first.table)  # the pause, not the decision
        with pytest.raises(KillPointReached, match="decision-read"):
            decide(first, "a", wait, by="ann")
    faults.disarm()

    with attempt(monkeypatch, log, checkpoint, 1) as second:
        assert decide(second, "a", wait, by="ann") == []  # the rewound source sends it again
        [answer] = second.answers("a")
    assert answer["output"] == {"refund": "refunded 30", "by": "ann"}
    assert CALLS == {"quote": 1, "refund": 1}


def test_a_crash_once_the_decision_is_recorded_hands_it_back_once(monkeypatch):
    log = InMemoryLog()
    with attempt(monkeypatch, log, {}, 0, kill_points="decision-recorded@1") as first:
        first.send("a", {"amount": 30})
        wait = waiting(first, "a")
        decide(first, "a", wait, by="ann")
        checkpoint = dict(first.table)  # the decision in the key's state
        with pytest.raises(KillPointReached, match="decision-recorded"):
            first.answers("a")
    faults.disarm()
    assert CALLS == {"quote": 1}  # the crash came before the refund

    with attempt(monkeypatch, log, checkpoint, 1) as second:
        [answer] = second.answers("a")
    assert answer["output"] == {"refund": "refunded 30", "by": "ann"}
    assert CALLS == {"quote": 1, "refund": 1}


def test_a_crash_while_the_deadline_timer_fires_times_the_wait_out_once(monkeypatch):
    log = InMemoryLog()
    with attempt(monkeypatch, log, {}, 0, kill_points="timer-firing@1") as first:
        first.send("a", {"amount": 30, "timeout_s": 60})
        wait = waiting(first, "a")
        [deadline] = first.wake_timers
        checkpoint = dict(first.table)
        with pytest.raises(KillPointReached, match="timer-firing"):
            first.fire("a", deadline)
    faults.disarm()

    with attempt(monkeypatch, log, checkpoint, 1) as second:
        outputs = second.fire("a", deadline)  # the restored timer fires again
        outputs += second.answers("a") if not outputs else []
        [refused] = decide(second, "a", wait) or second.answers("a")
    assert [o["output"]["verdict"] for o in outputs] == ["timed_out"]
    assert refused["refused"]["reason"] == "the wait was already resolved (timed out)"
    assert CALLS == {"quote": 1}
