"""A run is bounded: an event storm (actions that keep sending each other events) and a model
reply asking for 2,000 tool calls each end the run with a bound error, within the bound, as
the run's error output under ``error_policy: emit``; through the real store path (the
in-memory store and Kafka, the ``stores`` fixture), and a replay after a restore ends where the
live run did."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    Event,
    InputEvent,
    Prompt,
    ResourceDescriptor,
    RunnerContext,
    action,
)
from flink_agents.plan import compile_agent
from flink_agents.runtime.run_bounds import DEFAULT_MAX_ACTIONS_PER_RUN, RunBudget
from flink_agents.testing import Stores, run_live
from tests.sample_agents import add_scripted_connection

INVOKED: Counter[str] = Counter()


class Ripple(Event):
    depth: int


@action(InputEvent, Ripple, sends=[Ripple])
def ripple(event: InputEvent | Ripple, ctx: RunnerContext) -> None:
    """Answers every event with two more: never ends on its own."""
    INVOKED["ripple"] += 1
    depth = event.depth + 1 if isinstance(event, Ripple) else 0
    ctx.send_event(Ripple(depth=depth))
    ctx.send_event(Ripple(depth=depth))


def _storm(bounds: dict[str, int]) -> Agent:
    return Agent(name="storm", config=bounds, error_policy="emit").add_action(ripple)


@pytest.fixture(autouse=True)
def fresh_counts() -> None:
    INVOKED.clear()


def test_an_event_storm_ends_at_the_action_bound(stores: Stores) -> None:
    plan = compile_agent(_storm({"max_actions_per_run": 300, "max_events_per_run": 10_000}))
    result = run_live(plan, stores.first, {"go": 1})

    assert result.error is not None and result.error.error_type == "RunBoundError"
    assert "more than 300 actions (max_actions_per_run)" in result.error.message
    assert INVOKED["ripple"] == 300  # the 301st was refused before it ran

    # After a restore, the completed actions are handed back and counted: the replay ends at
    # the same action, with the same error.
    stores.first.flush()
    INVOKED.clear()
    again = run_live(plan, stores.restored(), {"go": 1})
    assert again.error == result.error
    assert INVOKED["ripple"] == 0


def test_an_event_storm_ends_at_the_event_bound() -> None:
    plan = compile_agent(_storm({"max_events_per_run": 51}))
    result = run_live(plan, Stores.in_memory().first, {"go": 1})
    assert result.error is not None and result.error.error_type == "RunBoundError"
    assert "more than 51 events (max_events_per_run)" in result.error.message
    assert INVOKED["ripple"] == 26  # 26 actions sent 52 events


def test_the_default_bounds() -> None:
    assert RunBudget.from_config({}) == RunBudget(max_actions=10_000, max_events=10_000)
    plan = compile_agent(_storm({}))
    result = run_live(plan, Stores.in_memory().first, {"go": 1})
    assert result.error is not None and result.error.error_type == "RunBoundError"
    assert INVOKED["ripple"] <= DEFAULT_MAX_ACTIONS_PER_RUN


def noop(n: int) -> int:
    """Do nothing.

    Args:
        n: A number.
    """
    INVOKED["noop"] += 1
    return n


def test_a_reply_with_2000_tool_calls_ends_the_run_before_any_runs(stores: Stores) -> None:
    agent = ReActAgent(
        name="flood",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{q}"),
        tools=[noop],
        error_policy="emit",
    )
    calls = [{"name": "noop", "arguments": {"n": i}} for i in range(2000)]
    add_scripted_connection(agent, "flood", [{"tool_calls": calls}, {"content": "done"}])

    result = run_live(compile_agent(agent), stores.first, {"q": "go"})

    assert result.error is not None and result.error.error_type == "ToolLoopLimitError"
    assert "2000 tool calls in one reply, more than 64 (max_tool_calls_per_reply)" in (
        result.error.message
    )
    assert INVOKED["noop"] == 0


def test_tool_calls_past_the_run_bound_end_the_run_and_a_replay_ends_there_too(
    stores: Stores,
) -> None:
    agent = ReActAgent(
        name="busy",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{q}"),
        tools=[noop],
        error_policy="emit",
        max_tool_calls_per_run=12,
    )
    five = [{"name": "noop", "arguments": {"n": i}} for i in range(5)]
    turns = [{"tool_calls": five}] * 3 + [{"content": "done"}]
    add_scripted_connection(agent, "busy", turns)
    plan = compile_agent(agent)

    result = run_live(plan, stores.first, {"q": "go"})

    assert result.error is not None and result.error.error_type == "ToolLoopLimitError"
    assert "5 more tool calls, 15 in this run, more than 12 (max_tool_calls_per_run)" in (
        result.error.message
    )
    assert INVOKED["noop"] == 10  # two replies ran; the third was refused before any of its
    stores.first.flush()
    INVOKED.clear()
    again = run_live(plan, stores.restored(), {"q": "go"})
    assert again.error == result.error
    assert INVOKED["noop"] == 0


@action(InputEvent)
async def wait_for_a_slow_call(event: InputEvent, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(slow_call, call_id="slow")


async def slow_call() -> None:
    INVOKED["slow"] += 1
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        INVOKED["cancelled"] += 1
        raise


def test_a_run_past_its_wall_time_ends_and_its_calls_are_cancelled(stores: Stores) -> None:
    agent = Agent(name="slow", config={"max_run_seconds": 0.2}, error_policy="emit")
    plan = compile_agent(agent.add_action(wait_for_a_slow_call))

    result = run_live(plan, stores.first, {"go": 1})

    assert result.error is not None and result.error.error_type == "RunBoundError"
    assert "longer than 0.2 seconds (max_run_seconds)" in result.error.message
    assert dict(INVOKED) == {"slow": 1, "cancelled": 1}
