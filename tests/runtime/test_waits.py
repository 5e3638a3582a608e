"""Durable waits through the keyed logic and the real store path (docs/waits.md).

The keyed logic is driven as a keyed host drives it (tests/runtime/test_keyed.py's attempts:
keyed state in a dict, an in-memory log shared by attempts as a Kafka topic outlives a task);
decisions arrive on its second input. Every call an action makes is counted, so "nothing before
the wait runs twice" is a count.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import InMemoryLog
from flink_agents.testing.plans import agent_plan
from tests.runtime.test_keyed import Attempt, KeySlot, now_ms

CALLS: Counter[str] = Counter()


def quote_refund(amount: int) -> int:
    CALLS["quote"] += 1
    return amount


def issue_refund(amount: int) -> str:
    CALLS["refund"] += 1
    return f"refunded {amount}"


@action(InputEvent)
async def refund(event: InputEvent, ctx: RunnerContext) -> None:
    """Quotes, waits for a person, and refunds what was approved (an edit's amount)."""
    quote = await ctx.durable_execute_async(quote_refund, event.input["amount"])
    decision = await ctx.wait_for_approval(
        {"amount": quote}, timeout_s=event.input.get("timeout_s", 600)
    )
    if decision.approved:
        amount = (decision.arguments or {}).get("amount", quote)
        done = await ctx.durable_execute_async(issue_refund, amount)
        ctx.send_event(OutputEvent(output={"refund": done, "by": decision.by}))
    else:
        ctx.send_event(OutputEvent(output={"verdict": decision.verdict, "why": decision.message}))


PLAN = agent_plan(refund, name="refunds")


@pytest.fixture(autouse=True)
def _counts() -> None:
    CALLS.clear()


class Waits(Attempt):
    """An attempt that also takes decisions on the keyed logic's second input."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, log: InMemoryLog, table: dict, n: int):
        super().__init__(monkeypatch, log, table, n, plan=PLAN)
        self.wake_timers: list[int] = []

    def decide(self, key: Any, record: Any) -> list[dict]:
        flink_key = json.dumps(key)
        slot = KeySlot(self.table, flink_key)
        return self._took(self.logic.on_resume(flink_key, json.dumps(record), slot, now_ms))

    def fire(self, key: Any, at: int) -> list[dict]:
        """Fire the key's timer at ``at`` (a deadline)."""
        flink_key = json.dumps(key)
        slot = KeySlot(self.table, flink_key)
        return self._took(self.logic.on_timer(flink_key, slot, at, now_ms))

    def _took(self, visit: Any) -> list[dict]:
        if visit.wake_at is not None:
            self.wake_timers.append(visit.wake_at)
        return super()._took(visit)


def waiting(attempt: Waits, key: Any) -> dict:
    """The key's run pauses: its `waiting` record."""
    [record] = attempt.answers(key)
    assert "waiting" in record, record
    return record["waiting"]


def test_an_approved_wait_resumes_the_run_without_making_its_earlier_calls_again(monkeypatch):
    log = InMemoryLog()
    with Waits(monkeypatch, log, {}, 0) as attempt:
        attempt.send("a", {"amount": 30})
        wait = waiting(attempt, "a")
        assert wait["kind"] == "approval" and wait["request"] == {"amount": 30}
        assert attempt.decide("a", {"wait": wait["wait_id"], "verdict": "approve", "by": "ann"}) == []
        [answer] = attempt.answers("a")
    assert answer["output"] == {"refund": "refunded 30", "by": "ann"}
    assert CALLS == {"quote": 1, "refund": 1}
