"""The crash-and-replay harness and its assertions: they see what they claim to see."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog, StoreWriteError
from flink_agents.runtime import ActionError
from flink_agents.testing import (
    CrashReplayResult,
    Stores,
    agent_plan,
    assert_no_completed_call_reinvoked,
    assert_replay_equals_live,
    crash_and_replay,
)

CALLS: list[str] = []


async def step(name: str, value: int) -> int:
    CALLS.append(name)
    return value + 1


@action(InputEvent)
async def three_steps(event: InputEvent, ctx: RunnerContext) -> None:
    a = await ctx.durable_execute_async(step, "a", event.input["n"])
    b = await ctx.durable_execute_async(step, "b", a)
    c = await ctx.durable_execute_async(step, "c", b)
    ctx.send_event(OutputEvent(output=[a, b, c]))


PLAN = agent_plan(three_steps, name="steps")


def test_a_crash_at_the_second_call_replays_only_the_calls_not_completed() -> None:
    CALLS.clear()
    result = crash_and_replay(PLAN, [{"k": 1, "n": 0}], key="k", crash_at=2)
    assert result.crashed
    assert result.outputs() == [[[1, 2, 3]]]
    # The first call's outcome was acknowledged before the second was sent: it completed.
    assert result.live.total == 2 and len(result.live.completed) == 1
    # The held call never returned, so it is made again; the first one is handed back.
    assert result.replay.total == 2
    assert CALLS == ["a", "b", "c"]
    assert_no_completed_call_reinvoked(result)


def test_a_crash_point_never_reached_is_an_uninterrupted_run() -> None:
    result = crash_and_replay(PLAN, [{"k": 1, "n": 0}, {"k": 2, "n": 5}], key="k", crash_at=99)
    assert not result.crashed
    assert result.outputs() == [[[1, 2, 3]], [[6, 7, 8]]]
    assert result.live.by_function() == {f"{__name__}.step": 6}


def sync_step(name: str, value: int) -> int:
    CALLS.append(name)
    return value + 1


@action(InputEvent)
def one_sync_step(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=ctx.durable_execute(sync_step, "s", event.input["n"])))


def test_a_crash_point_at_a_call_of_a_synchronous_action_is_refused_by_name() -> None:
    # A synchronous action cannot be held open at its call: the harness says so, without
    # calling the function.
    CALLS.clear()
    plan = agent_plan(one_sync_step, name="sync-steps")
    with pytest.raises(ActionError) as caught:
        crash_and_replay(plan, [{"k": 1, "n": 0}], key="k", crash_at=1)
    assert "crashes only at calls of async actions" in str(caught.value.__cause__)
    assert CALLS == []


def test_a_predicate_chooses_the_crash_point() -> None:
    result = crash_and_replay(
        PLAN, [{"k": 1, "n": 0}], key="k", crash_at=lambda call: call.args == ("c", 2)
    )
    assert result.crashed and result.live.total == 3 and result.replay.total == 1


def test_the_assertions_fail_on_a_reinvoked_call_and_on_other_outputs() -> None:
    crashed = crash_and_replay(PLAN, [{"k": 1, "n": 0}], key="k", crash_at=3)
    again = CrashReplayResult(crashed.results, crashed.live, crashed.live, crashed=True)
    with pytest.raises(AssertionError, match="invoked again on replay"):
        assert_no_completed_call_reinvoked(again)
    other = crash_and_replay(PLAN, [{"k": 1, "n": 7}], key="k", crash_at=99)
    with pytest.raises(AssertionError, match="uninterrupted run"):
        assert_replay_equals_live(crashed, other)


# --- completed means acknowledged ---------------------------------------------------------------


class _FlushesLostInTheCrash(InMemoryActionStateStore):
    """An in-memory store whose writes are on the wire until the crash and lost with it: no
    flush is acknowledged, and each fails once ``crashed`` is set."""

    def __init__(self, log: InMemoryLog, crashed: threading.Event) -> None:
        super().__init__(log)
        self._crashed = crashed

    def _await(self, handles: list[Any], timeout: float | None) -> list[int]:
        self._crashed.wait()
        raise StoreWriteError("the process was killed before the writes were acknowledged")


def _stores_losing_the_first_flushes() -> Stores:
    """``first`` never acknowledges a write; building the restored store (after the crash)
    drops the writes it had on the wire."""
    log, crashed = InMemoryLog(), threading.Event()
    built = 0

    def make() -> InMemoryActionStateStore:
        nonlocal built
        built += 1
        if built == 1:
            return _FlushesLostInTheCrash(log, crashed)
        crashed.set()
        return InMemoryActionStateStore(log)

    return Stores(make)


@action(InputEvent)
async def one_step(event: InputEvent, ctx: RunnerContext) -> None:
    value = await ctx.durable_execute_async(step, f"k{event.input['k']}", event.input["n"])
    ctx.send_event(OutputEvent(output=value))


def test_a_returned_call_whose_record_was_not_acknowledged_is_resent_not_reinvoked() -> None:
    CALLS.clear()
    result = crash_and_replay(
        agent_plan(one_step, name="one"),
        [{"k": 1, "n": 0}, {"k": 2, "n": 5}],
        key="k",
        crash_at=lambda call: call.args[0] == "k2",
        stores=_stores_losing_the_first_flushes(),
    )
    assert result.crashed and result.outputs() == [[1], [6]]
    # k1's call returned before the crash, but its record was still on the wire: in flight,
    # made again on replay, and counted apart from the completed calls.
    (k1,) = result.live.returned
    assert result.live.completed == set() and result.resent() == {k1}
    assert result.reinvoked() == set()
    assert_no_completed_call_reinvoked(result)
    assert CALLS == ["k1", "k1", "k2"]
