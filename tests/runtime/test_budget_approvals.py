"""A budget of ``on_exhausted: approve``: a call that does not fit it pauses the run at a
durable wait for approval (the waits machinery, through the keyed logic and the real store
path); approved, the call goes over the budget and records who approved it; rejected or timed
out, it fails with BudgetExceeded. The decision is recorded, so a replay does not ask again
(docs/budgets.md, "On exhaustion")."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from flink_agents.api.budgets import Budget
from flink_agents.durable.store import (
    CallStatus,
    InMemoryActionStateStore,
    InMemoryLog,
    RecoveryMarker,
    StoreConfig,
)
from flink_agents.durable.store.inspect import key_states
from flink_agents.plan.models import AgentPlan
from tests.budget_samples import CALL_TOKENS, UsageServer, budgeted_plan
from tests.durable.test_subagent_budgets import desk_plan
from tests.runtime.test_waits import Waits, decide, waiting

KEY = "k0"


def _plan(server: UsageServer, **approval: Any) -> AgentPlan:
    """Two calls' tokens, then each call asks for approval."""
    cap = Budget(name="cap", tokens=2 * CALL_TOKENS, on_exhausted="approve", **approval)
    return budgeted_plan(server.base_url, cap)


def _over_budget(attempt: Waits) -> dict[str, Any]:
    """Two calls within the budget, then the third's run pauses: its wait."""
    for i in range(2):
        attempt.send(KEY, {"q": f"{KEY}/{i}"})
    assert [a["output"] for a in attempt.answers(KEY, 2)] == [f"big: {KEY}/0", f"big: {KEY}/1"]
    attempt.send(KEY, {"q": f"{KEY}/2"})
    return waiting(attempt, KEY)


def _recorded_spend(log: InMemoryLog, marker: RecoveryMarker) -> list[Any]:
    """The spend recorded with the key's calls, read from the log since ``marker``."""
    store = InMemoryActionStateStore(log)
    store.restore(marker)
    return [
        call.spend
        for state in key_states(store, f'"{KEY}"')
        for call in state.calls
        if call.status is CallStatus.SUCCEEDED and call.spend is not None
    ]


def test_an_approved_call_goes_over_the_budget_and_records_who_approved_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = InMemoryLog()
    marker = InMemoryActionStateStore(log).recovery_marker()
    with UsageServer() as server, Waits(monkeypatch, log, {}, 0, plan=_plan(server)) as attempt:
        wait = _over_budget(attempt)
        assert server.by_key[KEY] == 2  # the third call waits, not sent
        assert wait["kind"] == "approval"
        assert wait["request"] == {
            "budget": "cap",
            "unit": "tokens",
            "spent": 2 * CALL_TOKENS,
            "needed": wait["request"]["needed"],
            "limit": 2 * CALL_TOKENS,
            "call": "chat",
        }
        assert decide(attempt, KEY, wait, by="ann") == []
        [answer] = attempt.answers(KEY)
    assert answer["output"] == f"big: {KEY}/2"
    assert server.by_key[KEY] == 3
    assert sorted(s.approved_by or "-" for s in _recorded_spend(log, marker)) == ["-", "-", "ann"]


def test_a_rejected_call_fails_with_budget_exceeded(monkeypatch: pytest.MonkeyPatch) -> None:
    with UsageServer() as server, Waits(monkeypatch, InMemoryLog(), {}, 0, plan=_plan(server)) as a:
        decide(a, KEY, _over_budget(a), "reject", by="bob")
        [answer] = a.answers(KEY)
    assert answer["error"]["error_type"] == "BudgetExceeded"
    assert server.by_key[KEY] == 2


@pytest.mark.parametrize(
    ("on_timeout", "error_type"), [("reject", "BudgetExceeded"), ("raise", "WaitTimedOutError")]
)
def test_a_wait_that_times_out_follows_its_on_timeout(
    monkeypatch: pytest.MonkeyPatch, on_timeout: str, error_type: str
) -> None:
    with UsageServer() as server:
        plan = _plan(server, approval_timeout_s=60, on_approval_timeout=on_timeout)
        with Waits(monkeypatch, InMemoryLog(), {}, 0, plan=plan) as attempt:
            _over_budget(attempt)
            [deadline] = attempt.wake_timers
            attempt.fire(KEY, deadline)
            [answer] = attempt.answers(KEY)
    assert answer["error"]["error_type"] == error_type
    assert server.by_key[KEY] == 2


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def attempts(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[[AgentPlan, dict[str, str], int], Waits]:
    """Attempt ``n`` of a plan over keyed state ``table``, the attempts sharing one store's log:
    in memory, or a fresh topic of the real Kafka broker."""
    log = InMemoryLog()
    store = None
    if request.param == "kafka":
        topic = f"test-budget-approvals-{uuid.uuid4().hex[:12]}"
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        store = StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2)

    def attempt(plan: AgentPlan, table: dict[str, str], n: int) -> Waits:
        return Waits(monkeypatch, log, table, n, plan=plan, store=store)

    return attempt


def test_a_replay_hands_the_decision_and_the_call_back_without_asking_again(
    attempts: Callable[[AgentPlan, dict[str, str], int], Waits],
) -> None:
    """Paused, restored (the run replays to its wait and pauses again: no call), approved;
    then restored from a checkpoint taken after the decision: the recorded decision and call
    are handed back -- no new wait, no request."""
    with UsageServer() as server:
        plan = _plan(server)
        with attempts(plan, {}, 0) as first:
            wait = _over_budget(first)
            paused = dict(first.table)
        with attempts(plan, paused, 1) as second:
            assert second.visit(KEY) == []  # replayed to its wait: paused again
            assert decide(second, KEY, wait, by="ann") == []
            decided = dict(second.table)
            [answer] = second.answers(KEY)
        with attempts(plan, decided, 2) as third:
            [again] = third.answers(KEY)
    assert answer["output"] == again["output"] == f"big: {KEY}/2"
    assert server.by_key[KEY] == 3


def test_a_subagents_approve_budget_pauses_the_delegating_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The researcher may make one call; its second asks for approval: the desk's run pauses
    inside the delegation, and once approved the researcher's call goes and the desk answers."""
    with UsageServer() as server:
        cap = Budget(name="cap", tokens=CALL_TOKENS, on_exhausted="approve")
        plan = desk_plan(server.base_url, [], [cap])
        with Waits(monkeypatch, InMemoryLog(), {}, 0, plan=plan) as attempt:
            attempt.send(KEY, {"n": 0})
            [first] = attempt.answers(KEY)
            attempt.send(KEY, {"n": 1})
            wait = waiting(attempt, KEY)
            assert wait["request"]["budget"] == "researcher/cap"
            assert decide(attempt, KEY, wait, by="ann") == []
            [second] = attempt.answers(KEY)
    assert first["output"]["research"] is True
    assert second["output"]["research"] is True
    assert server.by_key == {KEY: 2, f"{KEY}-res": 2}
