"""What the store keeps so a run can be replayed elsewhere, and how a mismatch shows itself:
the run's input in its first action's state, each call's arguments, and their diff."""

from __future__ import annotations

import asyncio

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable import calls as calls_module
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.identity import ActionInvocation, RunId, canonical_json, event_id
from flink_agents.durable.journal import RecordedAction
from flink_agents.durable.mismatch import CallMismatchError
from flink_agents.durable.store import InMemoryActionStateStore, RunInput, RunKey
from flink_agents.durable.store import _action_state as action_state_module
from flink_agents.runtime import KeyState, PendingInput
from flink_agents.testing import agent_plan, resume, run_live

GREETING = {"text": "hello"}


async def shout(request: dict[str, str], volume: int) -> str:
    return request["text"].upper() * volume


@action(InputEvent)
async def greet(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(shout, GREETING, 1)))


@action(InputEvent)
async def also_listens(event: InputEvent, ctx: RunnerContext) -> None:
    return None


def test_the_first_action_state_of_a_run_keeps_its_input_and_each_call_its_arguments() -> None:
    store = InMemoryActionStateStore()
    run_live(agent_plan(greet, also_listens, name="greeter"), store, {"user": "u"}, key="u")
    first, second = store.get_run(RunKey(agent="greeter", key=canonical_json("u"), seq=0))
    assert first.run_input is not None and first.run_input.value == {"user": "u"}
    assert first.run_input.admitted_at > 0
    assert second.run_input is None  # one copy per run
    [call] = first.calls
    assert call.arguments is not None and '"text": "hello"' in call.arguments


def test_a_mismatch_under_fail_shows_a_diff_of_the_arguments(monkeypatch) -> None:
    plan = agent_plan(greet, name="greeter")
    store = InMemoryActionStateStore()
    run_live(plan, store, {"user": "u"}, key="u")
    # As if the process died after the call was recorded, before the action completed.
    [recorded] = store.get_run(RunKey(agent="greeter", key=canonical_json("u"), seq=0))
    store.put(recorded.model_copy(update={"completed": False, "events": []}))
    monkeypatch.setitem(GREETING, "text", "good morning")
    # The run again, as after a restore: the call's arguments differ now.
    state = KeyState(next_seq=1, pending=[PendingInput(seq=0, input={"user": "u"})])
    with pytest.raises(Exception) as raised:
        asyncio.run(resume(plan, store, "u", state))
    error = raised.value.__cause__
    assert isinstance(error, CallMismatchError)
    message = str(error)
    assert '-   "text": "hello"' in message and '+   "text": "good morning"' in message
    assert "--- recorded arguments" in message and "+++ arguments now" in message


def test_a_run_input_is_stamped_when_the_run_is_admitted_not_when_its_first_action_starts(
    monkeypatch,
) -> None:
    store = InMemoryActionStateStore()
    runner = DurableCalls(store, agent="greeter")
    run = RunId("greeter", "u", 0)
    monkeypatch.setattr(calls_module, "now_ms", lambda: 111.0)
    runner.run_admitted(run, {"user": "u"})
    monkeypatch.setattr(calls_module, "now_ms", lambda: 222.0)
    monkeypatch.setattr(action_state_module, "now_ms", lambda: 222.0)
    first = ActionInvocation(run, event_id(run, None, None, 0), "greet")
    assert runner.recorded(first) is None
    asyncio.run(runner.completed(first, RecordedAction()))
    state = store.get(
        RunKey(agent="greeter", key=canonical_json("u"), seq=0).action("greet", first.event_id)
    )
    assert state is not None and state.run_input == RunInput(value={"user": "u"}, admitted_at=111.0)
