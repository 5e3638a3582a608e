"""Budgets at run time: a key's model calls stop where its budget does, reserved before they
are sent, settled with the usage the model reports (runtime/budget_meter.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flink_agents.api.budgets import Budget, ModelPrice, PriceTable
from flink_agents.observability import BudgetNoted, EventLogConfig, read_records
from flink_agents.runtime.local import run_local
from tests.budget_samples import (
    CALL_TOKENS,
    UsageServer,
    ask_at_once,
    budgeted_plan,
    questions,
)


def test_a_per_key_cap_lets_exactly_its_calls_reach_the_model() -> None:
    """20 keys whose agents would each make 30 calls, under a cap of 10 calls' tokens per key:
    the server sees exactly 10 calls per key, the other 20 runs of each key end with
    BudgetExceeded."""
    with UsageServer() as server:
        plan = budgeted_plan(server.base_url, Budget(name="per-key", tokens=10 * CALL_TOKENS))
        results = run_local(plan, questions(keys=20, per_key=30), key="key")
    assert server.by_key == {f"k{k}": 10 for k in range(20)}
    refused = [r for r in results if r.error is not None]
    assert len(refused) == 20 * 20
    assert {r.error.error_type for r in refused if r.error} == {"BudgetExceeded"}
    answered = [r for r in results if r.error is None]
    assert len(answered) == 20 * 10


def test_concurrent_calls_of_a_key_reserve_their_worst_case_and_cannot_overshoot() -> None:
    """Five calls at once, each reserving 105 tokens at worst (max_tokens 100) and spending 100,
    under a cap of 315: three are reserved and sent, the other two are refused before they
    are sent -- checked against spend alone, all five would have gone."""
    with UsageServer() as server:
        plan = budgeted_plan(
            server.base_url,
            Budget(name="cap", tokens=315),
            action=ask_at_once,
            max_tokens=100,
        )
        [result] = run_local(plan, [{"key": "k0", "n": 5}], key="key")
    assert result.output_values == [{"answered": 3, "refused": 2}]
    assert server.by_key["k0"] == 3


def test_runs_count_separately_under_a_per_run_budget() -> None:
    """A per-run budget counts each run on its own: every run's single call fits."""
    with UsageServer() as server:
        plan = budgeted_plan(server.base_url, Budget(name="per-run", window="run", tokens=150))
        results = run_local(plan, questions(keys=3, per_key=4), key="key")
    assert all(r.error is None for r in results)
    assert sum(server.by_key.values()) == 12


def test_an_exhausted_fallback_budget_sends_calls_to_the_cheaper_connection(
    tmp_path: Path,
) -> None:
    """Once the fallback budget is spent, calls go to ``cheap`` (model ``small``), and a hard
    cap still refuses; each decision is an event-log record."""
    log = tmp_path / "events.jsonl"
    with UsageServer() as server:
        plan = budgeted_plan(
            server.base_url,
            Budget(
                name="big-model",
                tokens=2 * CALL_TOKENS,
                on_exhausted="fallback",
                fallback="cheap",
            ),
            Budget(name="hard", tokens=5 * CALL_TOKENS),
        )
        results = run_local(
            plan, questions(keys=1, per_key=7), key="key", event_log=EventLogConfig(path=str(log))
        )
    assert server.by_model == {"big": 2, "small": 3}
    outputs = [r.output_values for r in results]
    assert outputs[:2] == [["big: k0/0"], ["big: k0/1"]]
    assert outputs[2:5] == [["small: k0/2"], ["small: k0/3"], ["small: k0/4"]]
    assert [r.error.error_type for r in results[5:] if r.error] == ["BudgetExceeded"] * 2
    noted = [r for r in read_records(log) if isinstance(r, BudgetNoted)]
    assert [n.decision for n in noted] == ["fallback"] * 3 + ["refused"] * 2


def test_a_soft_threshold_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with UsageServer() as server:
        plan = budgeted_plan(
            server.base_url, Budget(name="soft", tokens=10 * CALL_TOKENS, soft=0.5)
        )
        with caplog.at_level(logging.WARNING, logger="flink_agents.runtime.budget_meter"):
            run_local(plan, questions(keys=1, per_key=8), key="key")
    warnings = [r.getMessage() for r in caplog.records if "budget 'soft' at" in r.getMessage()]
    assert len(warnings) == 1 and "50%" in warnings[0]


def test_a_money_budget_prices_calls_by_the_table() -> None:
    """At 1 per million input and 2 per million output tokens, a call costs 0.00014 (recorded
    with it): a limit of 0.00045 lets three through (a fourth's worst case would not fit)."""
    prices = PriceTable(version="2026-12", models={"big": ModelPrice(input=1.0, output=2.0)})
    with UsageServer() as server:
        plan = budgeted_plan(server.base_url, Budget(name="money", cost=0.00045), prices=prices)
        results = run_local(plan, questions(keys=1, per_key=5), key="key")
    assert server.by_key["k0"] == 3
    assert [r.error is None for r in results] == [True, True, True, False, False]
    refused = results[3].error
    assert refused is not None and "limit is 0.00045 USD" in refused.message
