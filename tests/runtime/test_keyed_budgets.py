"""A key's spend is saved with its keyed state, like its memory: a restarted attempt goes on
counting from what the checkpoint holds (runtime/keyed.py, runtime/budget_meter.py)."""

from __future__ import annotations

import json

import pytest

from flink_agents.api.budgets import Budget
from flink_agents.durable.store import InMemoryLog
from flink_agents.runtime.keyed import SavedKey
from tests.budget_samples import CALL_TOKENS, UsageServer, budgeted_plan
from tests.runtime.test_keyed import Attempt


def _spent_tokens(checkpoint: dict[str, str], key: str) -> int:
    spend = SavedKey.model_validate_json(checkpoint[json.dumps(key)]).runs.spend
    assert spend is not None
    return spend.total.tokens


def test_a_restarted_attempt_counts_on_from_the_saved_spend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = InMemoryLog()
    with UsageServer() as server:
        plan = budgeted_plan(server.base_url, Budget(name="cap", tokens=3 * CALL_TOKENS))
        with Attempt(monkeypatch, log, {}, 0, plan=plan) as first:
            for i in range(2):
                first.send("k0", {"q": f"k0/{i}"})
            assert [r["output"] for r in first.answers("k0", 2)] == ["big: k0/0", "big: k0/1"]
            checkpoint = dict(first.table)
        assert _spent_tokens(checkpoint, "k0") == 2 * CALL_TOKENS

        with Attempt(monkeypatch, log, checkpoint, 1, plan=plan) as second:
            for i in range(2, 5):
                second.send("k0", {"q": f"k0/{i}"})
            outputs = second.answers("k0", 3)
            after = dict(second.table)
    assert outputs[0]["output"] == "big: k0/2"
    assert [o["error"]["error_type"] for o in outputs[1:]] == ["BudgetExceeded"] * 2
    assert server.by_key["k0"] == 3
    assert _spent_tokens(after, "k0") == 3 * CALL_TOKENS
