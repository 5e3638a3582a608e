"""Timers as durable calls through the keyed logic and the real store path (docs/waits.md,
"Timers"): ``ctx.sleep`` pauses a run until its key's timer fires; ``ctx.schedule`` hands the
key a follow-up input when its timer fires, once, across restores.

Driven like tests/runtime/test_waits.py (keyed state in a dict, a store log shared by the
attempts); every call an action makes is counted, so "not made again" is a count.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest

from flink_agents.api import Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.identity import CallIdentity, RunId
from flink_agents.durable.store import InMemoryLog, StoreConfig
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import run_local
from flink_agents.runtime.keyed import SavedKey
from flink_agents.runtime.wait_calls import schedule_call
from flink_agents.testing.plans import agent_plan
from tests.runtime.test_keyed import now_ms
from tests.runtime.test_waits import Waits, waiting

CALLS: Counter[str] = Counter()


def note(what: str) -> str:
    CALLS[what] += 1
    return what


@action(InputEvent)
async def order(event: InputEvent, ctx: RunnerContext) -> None:
    """Takes an order and schedules its reminder; a reminder (the follow-up) sends a note.
    ``sleep_s`` sleeps between, ``fail`` fails the run after scheduling."""
    given = event.input
    if given.get("reminder"):
        done = await ctx.durable_execute_async(note, f"remind {given['order']}")
        ctx.send_event(OutputEvent(output={"reminded": done}))
        return
    await ctx.durable_execute_async(note, "take")
    follow_up = await ctx.schedule(
        {"reminder": True, "order": given["order"]}, delay_s=given.get("delay_s", 60)
    )
    if given.get("sleep_s"):
        await ctx.sleep(given["sleep_s"])
        await ctx.durable_execute_async(note, "after sleep")
    if given.get("fail"):
        raise RuntimeError("the order failed")
    ctx.send_event(OutputEvent(output={"remind_at": follow_up.at_ms}))


PLAN = agent_plan(order, name="orders", error_policy="emit")


class Taken(Event):
    order: str


@action(InputEvent, sends=[Taken])
async def take(event: InputEvent, ctx: RunnerContext) -> None:
    """Takes the order and schedules its reminder; the action completes (journaled)."""
    if event.input.get("reminder"):
        ctx.send_event(OutputEvent(output={"reminded": event.input["order"]}))
        return
    await ctx.durable_execute_async(note, "take")
    await ctx.schedule({"reminder": True, "order": event.input["order"]}, delay_s=60)
    ctx.send_event(Taken(order=event.input["order"]))


@action(Taken)
async def confirm(event: Taken, ctx: RunnerContext) -> None:
    """A later action sleeps: the run resumes with `take` handed back from the journal."""
    await ctx.sleep(5)
    ctx.send_event(OutputEvent(output={"confirmed": event.order}))


JOURNALED = agent_plan(take, confirm, name="orders")


@pytest.fixture(autouse=True)
def _counts() -> None:
    CALLS.clear()


class Timers(Waits):
    """A waits attempt over the orders agent that also notes the follow-up timers asked for."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        log: InMemoryLog,
        table: dict,
        n: int,
        store: StoreConfig | None,
        plan: AgentPlan = PLAN,
    ) -> None:
        super().__init__(monkeypatch, log, table, n, plan, store=store)
        self.follow_up_timers: list[int] = []

    def _took(self, visit: Any) -> list[dict]:
        self.follow_up_timers += visit.follow_ups_at
        return super()._took(visit)


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def timers(request, monkeypatch):
    """Opens attempt ``n`` over keyed state ``table``; the attempts share one store's log (as a
    Kafka topic outlives a task): in memory, or a fresh topic of the real Kafka broker."""
    log = InMemoryLog()
    store = None
    if request.param == "kafka":
        topic = f"test-timers-{uuid.uuid4().hex[:12]}"
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        store = StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2)

    def attempt(table: dict, n: int, plan: AgentPlan = PLAN) -> Timers:
        return Timers(monkeypatch, log, table, n, store, plan)

    return attempt


def scheduled_in(table: dict, key: Any) -> list[dict]:
    saved = SavedKey.model_validate_json(table[json.dumps(key)])
    return [s.model_dump(mode="json") for s in saved.runs.scheduled]


def test_a_scheduled_follow_up_runs_as_a_new_input_of_the_key_when_its_timer_fires(timers):
    with timers({}, 0) as attempt:
        attempt.send("o-1", {"order": "o-1"})
        [answer] = attempt.answers("o-1")
        [at] = attempt.follow_up_timers
        assert answer["output"] == {"remind_at": at}
        assert at - now_ms() > 50_000  # 60 s after the call
        [kept] = scheduled_in(attempt.table, "o-1")
        assert kept["at_ms"] == at and kept["input"] == {"reminder": True, "order": "o-1"}

        assert attempt.fire("o-1", at - 1) == []  # not due yet
        outputs = attempt.fire("o-1", at) or attempt.answers("o-1")
        assert attempt.fire("o-1", at + 1_000) == []  # fired once
        assert scheduled_in(attempt.table, "o-1") == []
    assert [(o["seq"], o["output"]) for o in outputs] == [(1, {"reminded": "remind o-1"})]
    assert CALLS == {"take": 1, "remind o-1": 1}


def test_a_follow_up_that_came_due_during_an_outage_fires_once_after_the_restore(timers):
    with timers({}, 0) as first:
        first.send("o-1", {"order": "o-1"})
        first.answers("o-1")
        [at] = first.follow_up_timers
        checkpoint = dict(first.table)  # the follow-up is in the key's state

    with timers(checkpoint, 1) as second:
        outputs = second.fire("o-1", at + 5_000)  # the restored timer, overdue
        outputs += second.answers("o-1") if not outputs else []
        assert second.fire("o-1", at + 6_000) == []
    assert [o["output"] for o in outputs] == [{"reminded": "remind o-1"}]
    assert CALLS == {"take": 1, "remind o-1": 1}


def test_a_run_replayed_after_a_crash_schedules_its_follow_up_once_at_the_recorded_time(timers):
    with timers({}, 0) as first:
        first.send("o-1", {"order": "o-1"})
        checkpoint = dict(first.table)  # the run is in flight: nothing scheduled in the state
        [live] = first.answers("o-1")  # its calls (the schedule too) recorded, then it died

    with timers(checkpoint, 1) as second:
        [replayed] = second.answers("o-1")
        [at] = second.follow_up_timers
        assert [s["at_ms"] for s in scheduled_in(second.table, "o-1")] == [at]
        [reminder] = second.fire("o-1", at) or second.answers("o-1")
    assert replayed["output"] == live["output"] == {"remind_at": at}
    assert reminder["output"] == {"reminded": "remind o-1"}
    assert CALLS == {"take": 1, "remind o-1": 1}


def test_a_follow_up_fired_after_the_last_checkpoint_fires_again_with_its_calls_handed_back(
    timers,
):
    with timers({}, 0) as first:
        first.send("o-1", {"order": "o-1"})
        first.answers("o-1")
        [at] = first.follow_up_timers
        checkpoint = dict(first.table)
        first.fire("o-1", at) or first.answers("o-1")  # the reminder ran, then the task died

    with timers(checkpoint, 1) as second:
        outputs = second.fire("o-1", at) or second.answers("o-1")
    assert [(o["seq"], o["output"]) for o in outputs] == [(1, {"reminded": "remind o-1"})]
    assert CALLS == {"take": 1, "remind o-1": 1}  # the same run (seq 1): its call handed back


def test_a_failed_run_schedules_nothing(timers):
    with timers({}, 0) as attempt:
        attempt.send("o-1", {"order": "o-1", "fail": True})
        [answer] = attempt.answers("o-1")
        assert attempt.follow_up_timers == []
        assert scheduled_in(attempt.table, "o-1") == []
    assert "the order failed" in json.dumps(answer["error"])


def test_a_sleep_pauses_the_run_until_its_timer_and_nothing_before_it_runs_again(timers):
    with timers({}, 0) as attempt:
        attempt.send("o-1", {"order": "o-1", "sleep_s": 30})
        wait = waiting(attempt, "o-1")
        assert wait["kind"] == "timer" and wait["timeout_ms"] == 30_000
        [deadline] = attempt.wake_timers
        [refused] = attempt.decide("o-1", {"wait": wait["wait_id"], "verdict": "approve"})
        assert refused["refused"]["reason"] == "the wait is a sleep: only its time ends it"
        assert attempt.fire("o-1", deadline - 1) == []
        [answer] = attempt.fire("o-1", deadline) or attempt.answers("o-1")
        [at] = attempt.follow_up_timers  # scheduled before the sleep: once, when the run ended
    assert answer["output"] == {"remind_at": at}
    assert CALLS == {"take": 1, "after sleep": 1}


def test_a_crash_while_asleep_keeps_the_deadline_and_makes_no_call_again(timers):
    with timers({}, 0) as first:
        first.send("o-1", {"order": "o-1", "sleep_s": 30})
        waiting(first, "o-1")
        [deadline] = first.wake_timers
        checkpoint = dict(first.table)  # asleep

    with timers(checkpoint, 1) as second:
        assert second.visit("o-1") == []  # replays to the sleep and sleeps again
        [answer] = second.fire("o-1", deadline + 2_000) or second.answers("o-1")
        assert second.wake_timers == []  # the original deadline stands: no timer asked again
    assert "remind_at" in answer["output"]
    assert CALLS == {"take": 1, "after sleep": 1}


def test_a_follow_up_of_an_action_replayed_from_the_journal_is_kept_once(timers):
    with timers({}, 0, JOURNALED) as attempt:
        attempt.send("o-1", {"order": "o-1"})
        waiting(attempt, "o-1")  # `confirm` sleeps; `take` completed before it
        [deadline] = attempt.wake_timers
        [answer] = attempt.fire("o-1", deadline) or attempt.answers("o-1")
        [at] = attempt.follow_up_timers  # from `take`'s journal record: the action did not rerun
        [reminder] = attempt.fire("o-1", max(at, deadline)) or attempt.answers("o-1")
    assert answer["output"] == {"confirmed": "o-1"}
    assert reminder["output"] == {"reminded": "o-1"}
    assert CALLS == {"take": 1}


def test_schedule_takes_exactly_one_time_and_no_past_delay():
    identity = CallIdentity(RunId("orders", "o-1", 0), "e", "order", "c")
    for delay_s, at_ms in [(None, None), (1.0, 5), (-1.0, None)]:
        with pytest.raises(ValueError):
            schedule_call(identity, {}, delay_s, at_ms)
    at = schedule_call(identity, {"n": 1}, None, 1_234).invoke()
    later = schedule_call(identity, {"n": 1}, 2.5, None, clock=lambda: 10.0).invoke()
    assert (at.at_ms, later.at_ms) == (1_234, 12_500)
    assert at.schedule_id == later.schedule_id == identity.digest()


def test_a_local_run_has_no_clock_its_sleep_pauses_and_its_follow_ups_are_on_the_result():
    store = StoreConfig(kind="memory")
    [done] = run_local(PLAN, [{"k": "o-1", "order": "o-1"}], key="k", store=store.build())
    [follow_up] = done.scheduled
    assert follow_up.input == {"reminder": True, "order": "o-1"}
    assert done.output_values == [{"remind_at": follow_up.at_ms}]
    [asleep] = run_local(
        PLAN, [{"k": "o-2", "order": "o-2", "sleep_s": 5}], key="k", store=store.build()
    )
    assert asleep.paused is not None and asleep.paused.kind == "timer"
    assert asleep.scheduled == ()  # kept only when the run ends
