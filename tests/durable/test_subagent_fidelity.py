"""Replay fidelity of delegations through the real store path: ``DurableCalls`` over the
in-memory store and over Kafka (the same ``LogStore`` and codec), after a crash and a restore.

| Contract                                                          | Test                      |
|-------------------------------------------------------------------|---------------------------|
| a delegation's signature covers its input: other input on replay  | test_changed_input_*      |
| is a mismatch reported with both sides, never the old result      |                           |
| infrastructure errors (mismatch, codec, store) propagate and      | test_mismatch_inside_*,   |
| follow the job's policies; they are never recorded as a FAILED    | test_codec_error_*,       |
| delegation (also inside an internal child) nor shown to the model | test_a_store_error_*      |
| as a failed tool call                                             |                           |
| a replayed success or failure is byte-identical, as the caller    | test_replayed_outcome_*,  |
| and as the model (the tool response text) see it                  | test_the_model_sees_*     |
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from flink_agents.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import MAX_ERROR_BYTES, Subagent, SubagentResult
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.mismatch import CallMismatchError
from flink_agents.durable.store import (
    MAX_TRACE_BYTES,
    ActionStateStore,
    CallStatus,
    PayloadError,
    RunKey,
    StoreWriteError,
)
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import ActionError, RunResult, run_local
from flink_agents.testing import Stores, run_live
from tests.durable import helpers as h
from tests.durable.helpers import PROBE
from tests.subagent_samples import FakeSubagent, add_subagents, model_agent

FAKE = "tests.subagent_samples:FakeSubagent"

SEEN: list[SubagentResult[Any]] = []
"""What the delegating action got back, in order (live, then on replay)."""

OVERRIDES: dict[str, Any] = {}
"""Inputs the code now sends instead of the recorded ones, by sub-agent (or ``"child"``)."""


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    PROBE.reset()
    FakeSubagent.reset()
    SEEN.clear()
    OVERRIDES.clear()
    yield
    PROBE.reset()
    OVERRIDES.clear()


# --- agents -------------------------------------------------------------------------------


@action(InputEvent)
async def delegate_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    """Delegates ``input["calls"]`` (``[name, input]`` each) in turn, then a held call."""
    for name, payload in event.input["calls"]:
        SEEN.append(await Subagent(ctx, name).call(OVERRIDES.get(name, payload)))
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=len(SEEN)))


class StepChild(Agent):
    """An internal child making one durable call on its input, then a held one."""

    @action(InputEvent)
    async def step(event: InputEvent, ctx: RunnerContext) -> None:
        value = await ctx.durable_execute_async(
            PROBE.call, "child", OVERRIDES.get("child", event.input)
        )
        await ctx.durable_execute_async(PROBE.call, "child_hold", 0)
        ctx.send_event(OutputEvent(output=value))


def _plan(error_policy: str = "fail", **subagents: ResourceDescriptor | Agent) -> AgentPlan:
    agent = add_subagents(Agent(name="fidelity", error_policy=error_policy), subagents)
    return compile_agent(agent.add_action(delegate_then_hold))


def _fake(**arguments: Any) -> ResourceDescriptor:
    return ResourceDescriptor.of(FAKE, **arguments)


def _crash_change_replay(
    plan: AgentPlan,
    stores: Stores,
    value: Any,
    change: dict[str, Any] | None = None,
    *,
    hold: str = "after",
    replay_plan: AgentPlan | None = None,
) -> RunResult:
    """Run ``value`` until the ``hold`` call, crash, let the code send ``change`` (see
    :data:`OVERRIDES`) and replay with ``replay_plan`` on a store restored from the checkpoint
    taken before the input."""

    result, _ = h.crash_then_replay(
        plan,
        stores,
        value,
        hold=hold,
        between=lambda: OVERRIDES.update(change or {}),
        replay_plan=replay_plan,
    )
    return result


def _failed_calls(store: ActionStateStore) -> list[str]:
    states = store.get_run(RunKey(agent="fidelity", key=canonical_json("k"), seq=0))
    return [c.call_id for s in states for c in s.calls if c.status is CallStatus.FAILED]


# --- a delegation's signature covers its input ----------------------------------------------


def test_changed_input_on_replay_is_a_mismatch_showing_both_sides(stores):
    plan = _plan(rev=_fake())
    with pytest.raises(ActionError) as caught:
        _crash_change_replay(plan, stores, {"calls": [["rev", "a"]]}, {"rev": "b"})
    mismatch = caught.value.__cause__
    assert isinstance(mismatch, CallMismatchError)
    assert mismatch.requested is not None
    assert mismatch.recorded.call_id == mismatch.requested.call_id
    assert mismatch.recorded.args_digest != mismatch.requested.args_digest
    assert "recorded:" in str(mismatch) and "now:" in str(mismatch)
    assert FakeSubagent.calls["fake"] == 1  # the live call only; nothing handed back silently


def test_changed_input_under_warn_delegates_the_new_input(stores):
    plan = _plan(rev=_fake()).model_copy(update={"config": {"durable.mismatch_policy": "warn"}})
    result = _crash_change_replay(plan, stores, {"calls": [["rev", "a"]]}, {"rev": "b"})
    assert result.error is None
    assert [r.result for r in SEEN] == [{"echo": "a"}, {"echo": "b"}]
    assert FakeSubagent.calls["fake"] == 2


def test_unchanged_input_is_handed_back_without_a_call(stores):
    plan = _plan(rev=_fake())
    _crash_change_replay(plan, stores, {"calls": [["rev", {"q": [1, 2]}]]})
    assert FakeSubagent.calls["fake"] == 1
    assert SEEN[0] == SEEN[1]


# --- infrastructure errors propagate ------------------------------------------------------


@pytest.mark.parametrize("error_policy", ["fail", "emit"])
def test_mismatch_inside_an_internal_child_is_no_failed_delegation(stores, error_policy):
    plan = _plan(error_policy, child=StepChild(name="step_child"))
    value = {"calls": [["child", 1]]}
    if error_policy == "fail":
        with pytest.raises(ActionError) as caught:
            _crash_change_replay(plan, stores, value, {"child": 5}, hold="child_hold")
        assert isinstance(caught.value.__cause__, CallMismatchError)
    else:
        result = _crash_change_replay(plan, stores, value, {"child": 5}, hold="child_hold")
        assert result.error is not None
        assert result.error.error_type == "CallMismatchError"
        assert result.error.action == "delegate_then_hold"  # reached the parent's action
    assert SEEN == []  # the parent never got a result for the delegation
    assert PROBE.counts["after"] == 0
    assert _failed_calls(stores.latest) == []  # not recorded as a FAILED delegation


def test_codec_error_of_a_recorded_result_propagates(stores):
    live = _plan(rev=_fake(mode="review", result_type="tests.subagent_samples:Review"))
    # The declared result type changed since the record: the recorded payload does not fit it.
    now = _plan(rev=_fake(mode="review", result_type="tests.subagent_samples:ReviewInput"))
    with pytest.raises(ActionError) as caught:
        _crash_change_replay(live, stores, {"calls": [["rev", "x"]]}, replay_plan=now)
    assert isinstance(caught.value.__cause__, PayloadError)
    assert len(SEEN) == 1  # only the live result; the replay did not get a failed result
    assert _failed_calls(stores.latest) == []


# --- a replayed outcome is byte-identical ---------------------------------------------------


@pytest.mark.parametrize("mode", ["echo", "review", "raise", "raise_wide"])
def test_replayed_outcome_is_what_the_caller_saw_live(stores, mode):
    typed = {"result_type": "tests.subagent_samples:Review"} if mode == "review" else {}
    plan = _plan(rev=_fake(mode=mode, **typed))
    _crash_change_replay(plan, stores, {"calls": [["rev", {"b": 1, "a": [2]}]]})
    assert FakeSubagent.calls["fake"] == 1
    live, replayed = SEEN
    assert replayed == live
    assert type(replayed.result) is type(live.result)
    assert replayed.error_message == live.error_message
    assert replayed.reason == live.reason
    if mode.startswith("raise"):
        assert live.error_message is not None
        assert len(live.error_message.encode()) <= MAX_ERROR_BYTES <= MAX_TRACE_BYTES


async def held_tool() -> str:
    """Holds the run (after the delegation beside it has been recorded)."""
    await asyncio.sleep(0.3)
    return await PROBE.call("held_tool", "held")


@pytest.mark.parametrize("mode", ["review", "raise"])
def test_the_model_sees_the_same_tool_response_after_a_replay(stores, mode):
    name = f"fidelity_{mode}"
    calls = [
        {"name": "held_tool", "arguments": {}},
        {"name": "subagent_rev", "arguments": {"x": "1"}},
    ]
    agent = model_agent(
        name, [{"tool_calls": calls}, {"content": "$last"}], subagents=["rev"], tools=(held_tool,)
    )
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    agent.add_resource("rev", ResourceType.AGENT, _fake(mode=mode, input_schema=schema))
    plan = compile_agent(agent)
    ScriptedChatModelConnection.reset_stats(name)
    [reference] = run_local(plan, ["go"], key=lambda _: "k")  # no crash, no store
    FakeSubagent.reset()

    result = _crash_change_replay(plan, stores, "go", hold="held_tool")
    assert FakeSubagent.calls["fake"] == 1  # the crashed run's; the replay handed it back
    assert result.output_values == reference.output_values
    [answer] = result.output_values
    assert answer.startswith("{") if mode == "review" else "failed: RuntimeError" in answer


# --- infrastructure errors raised inside a tool or a sub-agent ------------------------------


def failing_store_tool(topic: str) -> str:
    """Looks a topic up in a store that cannot write.

    Args:
        topic: What to look up.
    """
    raise StoreWriteError(f"1 write not acknowledged while looking up {topic}")


def test_a_store_error_inside_a_tool_fails_the_run_not_the_tool_call(stores):
    turns = [
        {"tool_calls": [{"name": "failing_store_tool", "arguments": {"topic": "x"}}]},
        {"content": "$last"},
    ]
    plan = compile_agent(
        model_agent("fidelity_tool", turns, subagents=[], tools=(failing_store_tool,))
    )
    ScriptedChatModelConnection.reset_stats("fidelity_tool")
    with pytest.raises(ActionError) as caught:
        run_live(plan.model_copy(update={"name": "fidelity"}), stores.first, "go")
    assert isinstance(caught.value.__cause__, StoreWriteError)
    assert _failed_calls(stores.first) == []  # the tool call's outcome is unknown, not failed


def test_a_store_error_inside_a_sub_agent_is_no_failed_delegation(stores):
    with pytest.raises(ActionError) as caught:
        run_live(_plan(rev=_fake(mode="store_error")), stores.first, {"calls": [["rev", "x"]]})
    assert isinstance(caught.value.__cause__, StoreWriteError)
    assert SEEN == []
    assert _failed_calls(stores.first) == []
