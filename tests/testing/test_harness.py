"""The crash-and-replay harness and its assertions: they see what they claim to see."""

from __future__ import annotations

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.testing import (
    CrashReplayResult,
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
