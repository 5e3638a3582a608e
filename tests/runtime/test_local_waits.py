"""Waits in a local run: decisions given with the inputs (docs/waits.md)."""

from __future__ import annotations

import pytest

from flink_agents.api.paused import WaitNeedsStoreError
from flink_agents.durable.store import StoreConfig
from flink_agents.observability import MetricsListener
from flink_agents.observability.sinks.metrics import RUNS_FINISHED, RUNS_PAUSED
from flink_agents.runtime import RuntimeSettings, run_local
from flink_agents.runtime.local_waits import DecisionRefusedError
from tests.runtime.test_waits import CALLS, PLAN, wait_id_of

MEMORY = RuntimeSettings(store=StoreConfig(kind="memory"))


@pytest.fixture(autouse=True)
def _counts() -> None:
    CALLS.clear()


def test_a_run_without_a_decision_ends_the_local_run_paused():
    [result] = run_local(PLAN, [{"id": "a", "amount": 3}], key="id", settings=MEMORY)
    assert result.paused is not None and result.outputs == []
    assert result.paused.kind == "approval" and result.paused.request == {"amount": 3}


def test_decisions_given_with_the_inputs_resume_their_runs():
    inputs = [{"id": "a", "amount": 3}, {"id": "b", "amount": 4}]
    [paused_a, paused_b] = run_local(PLAN, inputs, key="id", settings=MEMORY)
    assert paused_a.paused is not None and paused_b.paused is not None
    CALLS.clear()
    decisions = [
        {"id": "a", "wait": paused_a.paused.wait_id, "verdict": "approve", "by": "ann"},
        {"id": "b", "wait": paused_b.paused.wait_id, "verdict": "edit", "arguments": {"amount": 1}},
    ]
    a, b = run_local(PLAN, inputs, key="id", settings=MEMORY, decisions=decisions)
    assert a.output_values == [{"refund": "refunded 3", "by": "ann"}]
    assert b.output_values == [{"refund": "refunded 1", "by": None}]
    assert CALLS == {"quote": 2, "refund": 2}


def test_a_refused_decision_is_raised_with_its_reason():
    with pytest.raises(DecisionRefusedError, match="no wait of this key is open or to come"):
        run_local(
            PLAN,
            [],
            key="id",
            settings=MEMORY,
            decisions=[{"id": "a", "wait": "x", "verdict": "approve"}],
        )


def test_a_wait_without_a_store_is_refused():
    with pytest.raises(Exception, match="durable waits need an action-state store") as raised:
        run_local(PLAN, [{"id": "a", "amount": 3}], key="id")
    assert isinstance(raised.value.__cause__, WaitNeedsStoreError)


def test_a_pause_is_counted_and_the_resumed_runs_wait_call_is_a_wait():
    metrics = MetricsListener()
    [paused] = run_local(
        PLAN, [{"id": "a", "amount": 3}], key="id", settings=MEMORY, listeners=[metrics]
    )
    assert paused.paused is not None
    assert (metrics.total(RUNS_PAUSED), metrics.total(RUNS_FINISHED)) == (1, 0)
    metrics = MetricsListener()
    decision = {"id": "a", "wait": paused.paused.wait_id, "verdict": "approve"}
    run_local(
        PLAN,
        [{"id": "a", "amount": 3}],
        key="id",
        settings=MEMORY,
        listeners=[metrics],
        decisions=[decision],
    )
    assert (metrics.total(RUNS_PAUSED), metrics.total(RUNS_FINISHED)) == (1, 1)
    assert metrics.total("calls.wait.live") == 1  # the one that returned the decision


def test_two_decisions_of_one_key_are_two_records_whatever_the_key_field_is_called():
    inputs = [{"id": "a", "amount": 3}, {"id": "a", "amount": 4}]
    decisions = [
        {"id": "a", "wait": wait_id_of("a", seq=0), "verdict": "approve"},
        {"id": "a", "wait": wait_id_of("a", seq=1), "verdict": "approve"},
    ]
    first, second = run_local(PLAN, inputs, key="id", settings=MEMORY, decisions=decisions)
    assert first.output_values[0]["refund"] == "refunded 3"
    assert second.output_values[0]["refund"] == "refunded 4"
