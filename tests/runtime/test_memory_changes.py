"""MemoryChangedEvent: an action's short-term memory changes, reported to listeners, journaled
with the action that made them and replayed from the journal."""

import asyncio
import logging
from collections import Counter
from typing import Any

import pytest

from flink_agents.api import (
    Agent,
    InputEvent,
    MemoryChangedEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents.plan import compile_agent
from flink_agents.runtime import ActionError, KeyState, Runtime
from flink_agents.testing import Stores

INVOKED: Counter[str] = Counter()


@action(InputEvent)
def write(event: InputEvent, ctx: RunnerContext) -> None:
    INVOKED["write"] += 1
    memory = ctx.short_term_memory
    memory.set("cart.items", event.input["items"])
    memory.set("unchanged", 1)  # as before: not reported
    memory.delete("old")


@action(MemoryChangedEvent)
def report(event: MemoryChangedEvent, ctx: RunnerContext) -> None:
    INVOKED["report"] += 1
    ctx.send_event(
        OutputEvent(output=event.model_dump(include={"key", "value", "previous", "deleted"}))
    )


def _agent(*actions: Any) -> Agent:
    agent = Agent(name="changes")
    for each in actions:
        agent.add_action(each)
    return agent


BEFORE = KeyState(short_term_memory={"old": "x", "unchanged": 1, "cart": {"items": []}})


def _run(engine: Any, state: KeyState) -> list[Any]:
    engine.restore_key("k", state)
    asyncio.run(engine.drain())
    return engine.take_results()[0].output_values


def test_each_changed_entry_is_reported_once_after_the_action_that_changed_it():
    engine = Runtime.build(compile_agent(_agent(write, report))).engine
    engine.restore_key("k", BEFORE)
    engine.submit("k", {"items": ["tea"]})
    asyncio.run(engine.drain())
    assert engine.take_results()[0].output_values == [
        {"key": "old", "value": None, "previous": "x", "deleted": True},
        {"key": "cart", "value": {"items": ["tea"]}, "previous": {"items": []}, "deleted": False},
    ]


def test_a_replay_dispatches_the_journaled_changes_without_running_the_actions_again():
    stores = Stores.in_memory()
    plan = compile_agent(_agent(write, report))
    live = Runtime.build(plan, store=stores.first).engine
    live.restore_key("k", BEFORE)
    live.submit("k", {"items": ["tea"]})
    checkpoint = live.snapshot_key("k")  # its input pending
    asyncio.run(live.drain())
    outputs = live.take_results()[0].output_values
    INVOKED.clear()
    replayed = _run(Runtime.build(plan, store=stores.restored()).engine, checkpoint)
    assert replayed == outputs
    assert not INVOKED  # both actions handed back from the journal


def test_an_agent_without_a_listener_gets_no_change_events(caplog: pytest.LogCaptureFixture):
    engine = Runtime.build(compile_agent(_agent(write))).engine
    engine.restore_key("k", BEFORE)
    engine.submit("k", {"items": ["tea"]})
    with caplog.at_level(logging.WARNING):
        asyncio.run(engine.drain())
    assert "MemoryChangedEvent" not in caplog.text  # not even sent and dropped
    assert engine.snapshot_key("k").short_term_memory == {
        "unchanged": 1,
        "cart": {"items": ["tea"]},
    }


@action(MemoryChangedEvent)
def count_changes(event: MemoryChangedEvent, ctx: RunnerContext) -> None:
    ctx.short_term_memory.set("changes", ctx.short_term_memory.get("changes", 0) + 1)


def test_a_listener_that_keeps_writing_is_ended_by_the_runs_event_bound():
    agent = _agent(write, count_changes)
    agent.config["max_events_per_run"] = 20
    engine = Runtime.build(compile_agent(agent)).engine
    engine.submit("k", {"items": []})
    with pytest.raises(ActionError, match="max_events_per_run"):
        asyncio.run(engine.drain())
