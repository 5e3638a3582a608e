"""The freeze fence: a process frozen past the threshold sends no call and writes nothing.

The clock is injected: a "freeze" is the clock jumping with no watchdog tick in between (the
watchdog is frozen too), so the tests count calls and records, never time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.attempts import check_before_sending
from flink_agents.durable.freeze_fence import FreezeFence, FrozenProcessError, TaskEndedError
from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.runtime import RunEngine, Runtime
from flink_agents.testing import agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

THRESHOLD_S = 8.0  # the dev cluster's: heartbeat.timeout 10 s - heartbeat.interval 2 s


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


pytestmark = pytest.mark.usefixtures("fresh_probe")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fence(clock: Clock) -> FreezeFence:
    return FreezeFence(THRESHOLD_S, clock=clock)


def _run_with_ticks(fence: FreezeFence, clock: Clock, seconds: float, step: float = 0.2) -> None:
    """A healthy stretch: the clock advances and the watchdog ticks along."""
    for _ in range(round(seconds / step)):
        clock.now += step
        fence.tick()


def test_a_freeze_past_the_threshold_trips_at_the_check_before_the_watchdog_ran(fence, clock):
    _run_with_ticks(fence, clock, 5)
    fence.check()
    clock.now += THRESHOLD_S + 1  # frozen: no tick since
    with pytest.raises(FrozenProcessError) as raised:
        fence.check()
    assert raised.value.frozen_s == pytest.approx(THRESHOLD_S + 1)
    assert raised.value.threshold_s == THRESHOLD_S


def test_a_pause_below_the_threshold_never_trips(fence, clock):
    clock.now += THRESHOLD_S - 0.5  # a long GC pause, shorter than the threshold
    fence.check()
    fence.tick()
    _run_with_ticks(fence, clock, 60)
    fence.check()
    assert not fence.tripped


def test_a_gap_the_watchdog_saw_first_still_trips_the_next_check(fence, clock):
    clock.now += THRESHOLD_S + 3
    fence.tick()  # the watchdog resumed first and moved its tick on
    clock.now += 0.1
    with pytest.raises(FrozenProcessError) as raised:
        fence.check()
    assert raised.value.frozen_s == pytest.approx(THRESHOLD_S + 3)


def test_a_tripped_fence_stays_tripped_and_logs_once_at_error(fence, clock, caplog):
    clock.now += THRESHOLD_S * 2
    for _ in range(3):
        with pytest.raises(FrozenProcessError):
            fence.check()
        _run_with_ticks(fence, clock, 1)
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert "frozen for 16.0 s" in errors[0].getMessage()
    assert "8.0 s" in errors[0].getMessage()


def test_the_fence_error_escapes_an_action_that_catches_every_exception():
    assert not issubclass(FrozenProcessError, Exception)
    assert not issubclass(TaskEndedError, Exception)


def test_a_task_that_ended_trips_the_fence_and_tells_the_owner_once(clock):
    alive = [True]
    told: list[str] = []
    fence = FreezeFence(
        THRESHOLD_S,
        task_alive=lambda: alive[0],
        on_task_ended=lambda: told.append("ended"),
        clock=clock,
    )
    _run_with_ticks(fence, clock, 5)
    fence.check()
    alive[0] = False  # the host's task ended without closing the engine
    fence.check()  # the watchdog has not asked yet
    _run_with_ticks(fence, clock, 2)
    assert fence.tripped
    assert told == ["ended"]
    with pytest.raises(TaskEndedError):
        fence.check()


def test_an_owner_that_fails_to_close_leaves_the_fence_tripped(clock, caplog):
    def fail() -> None:
        raise RuntimeError("store already gone")

    fence = FreezeFence(THRESHOLD_S, task_alive=lambda: False, on_task_ended=fail, clock=clock)
    fence.tick()
    with pytest.raises(TaskEndedError):
        fence.check()
    assert "failed to close it" in caplog.text


def test_the_watchdog_thread_ticks_and_stops():
    fence = FreezeFence(THRESHOLD_S, tick_s=0.01)
    fence.start()
    try:
        for _ in range(3):
            fence.check()
    finally:
        fence.stop()
    assert not fence.tripped


def test_a_threshold_must_be_positive():
    with pytest.raises(ValueError):
        FreezeFence(0)


# --- the runner behind the fence --------------------------------------------------------------


@action(InputEvent)
async def swallowing_calls(event: InputEvent, ctx: RunnerContext) -> None:
    """Catches every exception of its first call and calls again: the fence must still hold."""
    try:
        first = await ctx.durable_execute_async(PROBE.call, "first", event.input["n"])
    except Exception:
        first = -1
    second = await ctx.durable_execute_async(PROBE.call, "second", first)
    ctx.send_event(OutputEvent(output=second))


def _records(store: InMemoryActionStateStore) -> int:
    return sum(len(partition) for partition in store.log.partitions)


async def _run(plan: Any, store: InMemoryActionStateStore, fence: FreezeFence) -> RunEngine:
    engine = Runtime.build(plan, store=store, fence=fence).engine
    engine.submit("k", {"n": 1})
    with pytest.raises(FrozenProcessError):
        await engine.drain()
    return engine


async def _run_counting_records(
    plan: Any, store: InMemoryActionStateStore, fence: FreezeFence
) -> tuple[int, RunEngine]:
    """:func:`_run`, and how many records it added to the store."""
    written = _records(store)
    engine = await _run(plan, store, fence)
    return _records(store) - written, engine


@pytest.mark.parametrize("error_policy", ["fail", "emit"])
def test_a_tripped_engine_sends_no_call_writes_no_record_and_emits_nothing(
    fence, clock, error_policy
):
    plan = agent_plan(swallowing_calls, error_policy=error_policy)
    store = InMemoryActionStateStore()
    clock.now += THRESHOLD_S + 1  # frozen before the run's first call

    async def scenario() -> RunEngine:
        written = _records(store)
        engine = await _run(plan, store, fence)
        assert _records(store) == written  # no record at all, not even a failed call's
        return engine

    engine = asyncio.run(scenario())
    assert PROBE.counts == {}
    assert engine.take_results() == []  # no output, no dead letter


@pytest.mark.parametrize(
    ("freeze", "sent"),
    [
        # Sent before the freeze: it cannot be unsent, and the next call is not sent.
        ("while the first call was out", {"first": 1}),
        # The runner checked the fence and handed the call over; the process froze before the
        # request left (waiting for a worker thread, a connection slot, a backoff). What sends
        # it checks again (check_before_sending: a tool, the retry loop), against this fence.
        ("before the first call left", {}),
    ],
)
def test_a_call_frozen_on_its_way_is_not_recorded_and_nothing_after_it_is_sent(
    fence, clock, monkeypatch, freeze: str, sent: dict[str, int]
):
    plan = agent_plan(h.three_calls)
    store = InMemoryActionStateStore()
    calls = PROBE.call

    async def frozen_on_the_way(name: str, value: Any) -> Any:
        if freeze == "before the first call left":
            clock.now += THRESHOLD_S + 1
            check_before_sending()
        result = await calls(name, value)
        clock.now += THRESHOLD_S + 1
        return result

    monkeypatch.setattr(PROBE, "call", frozen_on_the_way)

    new_records, engine = asyncio.run(_run_counting_records(plan, store, fence))
    assert sent == PROBE.counts
    assert new_records == 0  # no outcome, no failed call: recorded by no zombie
    assert engine.take_results() == []


def test_a_healthy_engine_behind_a_fence_runs_as_without_one(fence, clock):
    plan = agent_plan(h.three_calls)
    store = InMemoryActionStateStore()

    async def scenario() -> list[Any]:
        engine = Runtime.build(plan, store=store, fence=fence).engine
        engine.submit("k", {"n": 1})
        await engine.drain()
        return [r.output_values for r in engine.take_results()]

    assert asyncio.run(scenario()) == [[[2, 3, 4]]]
    assert PROBE.counts == {"first": 1, "second": 1, "third": 1}
