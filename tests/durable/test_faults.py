"""Named kill points: a plan fails once at the chosen passage, nothing catches the crash, and a
replay after it calls again only what the point left unrecorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flink_agents.durable import faults
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.faults import FaultPlan, KillPoint, KillPointReached
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog
from flink_agents.runtime import run_local
from flink_agents.testing import agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE


@pytest.fixture(autouse=True)
def _clean():
    PROBE.reset()
    faults.disarm()
    yield
    PROBE.reset()
    faults.disarm()


def test_parse_reads_points_and_their_passage() -> None:
    plan = FaultPlan.parse("after-record-acked@3, during-restore")
    assert plan.kills == {KillPoint.AFTER_RECORD_ACKED: 3, KillPoint.DURING_RESTORE: 1}


@pytest.mark.parametrize("spec", ["no-such-point@1", "after-output@0", "after-output@x"])
def test_parse_names_a_bad_part(spec: str) -> None:
    with pytest.raises(ValueError, match="kill point"):
        FaultPlan.parse(spec)


def test_fires_at_the_nth_passage_once_and_leaves_a_marker(tmp_path: Path) -> None:
    plan = FaultPlan.parse("after-output@2", tmp_path)
    plan.reached(KillPoint.AFTER_OUTPUT)
    plan.reached(KillPoint.BEFORE_CALL_SENT)  # not armed: never fires
    with pytest.raises(KillPointReached, match="after-output"):
        plan.reached(KillPoint.AFTER_OUTPUT)
    plan.reached(KillPoint.AFTER_OUTPUT)  # fired already
    fired = plan.fired_at(KillPoint.AFTER_OUTPUT)
    assert fired is not None and fired > 0
    # A restarted worker (a new plan over the same markers) does not fire again.
    again = FaultPlan.parse("after-output@1", tmp_path)
    again.reached(KillPoint.AFTER_OUTPUT)


def test_arming_the_same_plan_again_keeps_its_count() -> None:
    first = faults.arm("after-output@2")
    first.reached(KillPoint.AFTER_OUTPUT)
    assert faults.arm("after-output@2") is first
    with pytest.raises(KillPointReached):
        first.reached(KillPoint.AFTER_OUTPUT)
    assert faults.arm("after-output@3") is not first


def test_each_arming_leaves_its_time_beside_the_markers(tmp_path: Path) -> None:
    # The operator arms the plan when an attempt opens: the times tell the attempts apart.
    faults.arm("after-output@2", tmp_path)
    plan = faults.arm("after-output@2", tmp_path)
    first, second = plan.armed_at()
    assert 0 < first <= second
    assert FaultPlan.parse("after-output@2").armed_at() == []  # no folder, nothing kept


def test_the_crash_is_no_exception_an_error_policy_could_turn_into_an_output() -> None:
    assert not issubclass(KillPointReached, Exception)


# --- the points of a durable call, through an engine whose agent emits its errors ---------------


def _run(store: InMemoryActionStateStore) -> list[Any]:
    plan = agent_plan(h.three_calls, error_policy="emit")
    results = run_local(
        plan, [{"n": 1}], key=lambda _: "k", call_runner=DurableCalls(store, agent=plan.name)
    )
    return [event.output for result in results for event in result.outputs]


def _crash_then_replay(spec: str) -> dict[str, int]:
    """Run until ``spec`` crashes the run, then replay on a store restored from the log;
    returns the calls the replay made."""
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    marker = store.recovery_marker()
    faults.arm(spec)
    with pytest.raises(KillPointReached):
        _run(store)
    faults.disarm()
    PROBE.counts.clear()
    restored = InMemoryActionStateStore(log)
    restored.restore(marker)
    assert _run(restored) == [[2, 3, 4]]
    return dict(PROBE.counts)


@pytest.mark.parametrize(
    ("spec", "made_again"),
    [
        # The second call was never sent: the replay sends it (and the third) for the first time.
        ("before-call-sent@2", {"second": 1, "third": 1}),
        # Its reply was lost with the crash: the call was in flight, it is sent again.
        ("after-reply-before-record@2", {"second": 1, "third": 1}),
        # Its outcome was acknowledged: handed back, never sent again.
        ("after-record-acked@2", {"third": 1}),
        # The action completed: the replay does not run it at all.
        ("after-action-completed@1", {}),
    ],
)
def test_a_replay_calls_again_only_what_the_kill_point_left_unrecorded(
    spec: str, made_again: dict[str, int]
) -> None:
    assert _crash_then_replay(spec) == made_again


def test_a_second_crash_while_replaying_loses_no_recorded_call() -> None:
    log = InMemoryLog()
    marker = InMemoryActionStateStore(log).recovery_marker()
    faults.arm("after-record-acked@2,during-restore@2")
    with pytest.raises(KillPointReached, match="after-record-acked"):
        _run(InMemoryActionStateStore(log))
    PROBE.counts.clear()
    replaying = InMemoryActionStateStore(log)
    replaying.restore(marker)
    with pytest.raises(KillPointReached, match="during-restore"):
        _run(replaying)  # the first call handed back, the crash at the second
    faults.disarm()
    restored = InMemoryActionStateStore(log)
    restored.restore(marker)
    assert _run(restored) == [[2, 3, 4]]
    assert dict(PROBE.counts) == {"third": 1}
