"""A key's later inputs run alongside its paused run (``while_paused: alongside``,
docs/waits.md, "While a run waits").

Driven through the keyed logic as tests/runtime/test_waits.py drives it (its ``attempts`` run
each test over the in-memory log and a fresh topic of the real Kafka store). The agent counts its
calls, so "nothing made twice" is a count, and keeps the orders it has seen in the key's
short-term memory, so what each run saw is in its answer.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.identity import CallIdentity, RunId, event_id
from flink_agents.durable.store import InMemoryLog, StoreConfig
from flink_agents.durable.store.inspect import open_store
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import RuntimeSettings, run_local
from flink_agents.runtime.keyed import SavedKey
from flink_agents.testing.plans import agent_plan
from tests.runtime.test_waits import Waits, attempts

__all__ = ["attempts"]  # the fixture, shared with tests/runtime/test_waits.py

QUOTES: Counter[str] = Counter()


def quote(order: str) -> str:
    QUOTES[order] += 1
    return f"quote {order}"


@action(InputEvent)
async def take_order(event: InputEvent, ctx: RunnerContext) -> None:
    """Quotes the order; one that asks waits for approval first. Remembers the orders it took."""
    order = event.input["order"]
    seen = ctx.short_term_memory.get("seen") or []
    ctx.short_term_memory.set("last_started", order)
    quoted = await ctx.durable_execute_async(quote, order)
    verdict = "none"
    if event.input.get("ask"):
        decision = await ctx.wait_for_approval(
            {"order": order}, timeout_s=event.input.get("timeout_s", 600), call_id="approval"
        )
        verdict = decision.verdict
    ctx.short_term_memory.set("seen", [*seen, order])
    ctx.send_event(
        OutputEvent(output={"order": order, "quote": quoted, "verdict": verdict, "seen": seen})
    )


ALONGSIDE = agent_plan(take_order, name="orders", while_paused="alongside")  # Agent(...)


@pytest.fixture(autouse=True)
def _counts() -> None:
    QUOTES.clear()


def wait_id_of(key: Any, seq: int) -> str:
    run = RunId("orders", key, seq)
    return CallIdentity(run, event_id(run, None, None, 0), "take_order", "approval").digest()


def approve(attempt: Waits, key: Any, seq: int, by: str = "ann") -> list[dict]:
    record = {"order_key": key, "wait": wait_id_of(key, seq), "verdict": "approve", "by": by}
    return attempt.decide(key, record)


def by_seq(records: list[dict]) -> dict[int, dict]:
    return {record["seq"]: record for record in records}


def saved(attempt: Waits, key: Any) -> SavedKey:
    return SavedKey.model_validate_json(attempt.table[json.dumps(key)])


def test_a_later_input_runs_and_finishes_while_the_first_waits(attempts):
    with attempts({}, 0, ALONGSIDE) as attempt:
        attempt.send("k", {"order": "o1", "ask": True})
        attempt.send("k", {"order": "o2"})
        first = by_seq(attempt.answers("k", count=2))
        assert first[0]["waiting"]["wait_id"] == wait_id_of("k", 0)
        # The run alongside saw the key's memory as committed: not what the paused run wrote.
        assert first[1]["output"] == {
            "order": "o2",
            "quote": "quote o2",
            "verdict": "none",
            "seen": [],
        }
        assert [p.seq for p in saved(attempt, "k").runs.pending] == [0]  # only the paused one
        assert approve(attempt, "k", 0) == []
        [resumed] = attempt.answers("k")
    # The resumed run's action ran again over the memory as it is now (o2 committed).
    assert (resumed["seq"], resumed["output"]["verdict"]) == (0, "approved")
    assert resumed["output"]["seen"] == ["o2"]
    assert saved(attempt, "k").runs.short_term_memory["seen"] == ["o2", "o1"]
    assert QUOTES == {"o1": 1, "o2": 1}  # the resumed run's quote was handed back


def test_a_decision_resumes_the_run_whose_wait_it_names(attempts):
    with attempts({}, 0, ALONGSIDE) as attempt:
        for order in ("o1", "o2", "o3"):
            attempt.send("k", {"order": order, "ask": True})
        waits = by_seq(attempt.answers("k", count=3))
        assert [waits[seq]["waiting"]["wait_id"] for seq in (0, 1, 2)] == [
            wait_id_of("k", seq) for seq in (0, 1, 2)
        ]  # three waits, three ids: one per run
        approve(attempt, "k", 1, by="bo")
        [middle] = attempt.answers("k")
        assert (middle["seq"], middle["output"]["order"]) == (1, "o2")
        assert [p.seq for p in saved(attempt, "k").runs.pending] == [0, 2]
        approve(attempt, "k", 2)
        approve(attempt, "k", 0)
        rest = by_seq(attempt.answers("k", count=2))
    assert {seq: r["output"]["order"] for seq, r in rest.items()} == {0: "o1", 2: "o3"}
    assert QUOTES == {"o1": 1, "o2": 1, "o3": 1}


def test_a_crash_with_two_runs_paused_and_one_done_between_replays_nothing(attempts):
    with attempts({}, 0, ALONGSIDE) as first:
        first.send("k", {"order": "o1", "ask": True})
        first.send("k", {"order": "o2"})
        first.send("k", {"order": "o3", "ask": True})
        emitted = by_seq(first.answers("k", count=3))
        assert "output" in emitted[1] and "waiting" in emitted[2]
        checkpoint = dict(first.table)  # two runs paused, the one between them done

    with attempts(checkpoint, 1, ALONGSIDE) as second:
        assert second.visit("k") == []  # both replay to their waits: no second `waiting`
        approve(second, "k", 2)
        approve(second, "k", 0)
        answers = by_seq(second.answers("k", count=2))
    assert {seq: a["output"]["verdict"] for seq, a in answers.items()} == {
        0: "approved",
        2: "approved",
    }
    assert QUOTES == {"o1": 1, "o2": 1, "o3": 1}  # both paused runs got their quotes back


def test_a_crash_after_a_decision_was_recorded_hands_it_back_to_its_run_only(attempts):
    with attempts({}, 0, ALONGSIDE) as first:
        first.send("k", {"order": "o1", "ask": True})
        first.send("k", {"order": "o2", "ask": True})
        first.answers("k", count=2)
        approve(first, "k", 1)
        checkpoint = dict(first.table)  # the decision kept, run 1 not done in this state
        first.answers("k")  # run 1 recorded the decision and finished; then the task died

    with attempts(checkpoint, 1, ALONGSIDE) as second:
        [answer] = second.answers("k")  # run 1 replays with its recorded decision
        assert (answer["seq"], answer["output"]["verdict"]) == (1, "approved")
        assert second.visit("k") == []  # run 0 still waits
        approve(second, "k", 0)
        [last] = second.answers("k")
    assert (last["seq"], last["output"]["verdict"]) == (0, "approved")
    assert QUOTES == {"o1": 1, "o2": 1}


def test_a_paused_run_times_out_while_later_inputs_run(attempts):
    with attempts({}, 0, ALONGSIDE) as attempt:
        attempt.send("k", {"order": "o1", "ask": True, "timeout_s": 60})
        attempt.answers("k")
        [deadline] = attempt.wake_timers
        attempt.send("k", {"order": "o2"})
        [done] = attempt.answers("k")
        assert done["seq"] == 1
        assert attempt.fire("k", deadline) == []
        [timed_out] = attempt.answers("k")
    assert (timed_out["seq"], timed_out["output"]["verdict"]) == (0, "timed_out")


def test_the_end_of_a_bounded_input_waits_for_the_runs_alongside_not_the_paused_one(monkeypatch):
    with Waits(monkeypatch, InMemoryLog(), {}, 0, ALONGSIDE) as attempt:
        attempt.send("k", {"order": "o1", "ask": True})
        attempt.send("k", {"order": "o2"})
        attempt.send("k", {"order": "o3"})
        records = by_seq(attempt.visit("k", end_of_input=True))
        records.update(by_seq(attempt.visit("k", end_of_input=True)))
    assert "waiting" in records[0]
    assert {seq: records[seq]["output"]["order"] for seq in (1, 2)} == {1: "o2", 2: "o3"}
    assert [p.seq for p in saved(attempt, "k").runs.pending] == [0]  # paused in the key state


def test_per_key_order_stays_the_default(monkeypatch):
    plan: AgentPlan = ALONGSIDE.model_copy(update={"while_paused": "queue"})
    with Waits(monkeypatch, InMemoryLog(), {}, 0, plan) as attempt:
        attempt.send("k", {"order": "o1", "ask": True})
        attempt.send("k", {"order": "o2"})
        [paused] = attempt.answers("k")
        assert attempt.visit("k") == []
        assert QUOTES == {"o1": 1}  # o2 queues behind the paused run
        approve(attempt, "k", 0)
        answers = attempt.answers("k", count=2)
    assert [a["seq"] for a in answers] == [0, 1]
    assert "waiting" in paused


def test_a_local_run_runs_later_inputs_alongside():
    inputs = [
        {"order_key": "k", "order": "o1", "ask": True},
        {"order_key": "k", "order": "o2"},
    ]
    settings = RuntimeSettings(store=StoreConfig(kind="memory"))
    paused, done = run_local(ALONGSIDE, inputs, key="order_key", settings=settings)
    assert paused.paused is not None and paused.run_id.seq == 0
    assert done.output_values == [
        {"order": "o2", "quote": "quote o2", "verdict": "none", "seen": []}
    ]


@pytest.mark.kafka
def test_each_run_keeps_its_own_records_in_the_kafka_store(monkeypatch, kafka_bootstrap):
    topic = f"test-alongside-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic, partitions=2)
    with Waits(monkeypatch, None, {}, 0, ALONGSIDE, store=store) as attempt:
        attempt.send("k", {"order": "o1", "ask": True})
        attempt.send("k", {"order": "o2"})
        attempt.send("k", {"order": "o3", "ask": True})
        attempt.answers("k", count=3)
        approve(attempt, "k", 2)
        attempt.answers("k")
    read, corrupt = open_store(kafka_bootstrap, topic)
    try:
        calls = {
            key.seq: [(c.call_id, c.status.value) for c in read.get(key).calls]  # type: ignore[union-attr]
            for key in read.state_keys()
        }
    finally:
        read.close()
    assert corrupt == 0
    assert calls == {
        0: [("#0", "succeeded"), ("approval", "pending")],  # paused: its wait open
        1: [("#0", "succeeded")],
        2: [("#0", "succeeded"), ("approval", "succeeded")],  # decided: the decision recorded
    }
