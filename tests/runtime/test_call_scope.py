"""A run's calls end with the run (issue 31, defect 3): when a run ends -- it failed, it was
cancelled, the engine closed -- every durable call it started is cancelled or finished and
awaited before its result leaves the engine, and nothing writes into the ended run.

| Contract                                                          | Test                        |
|-------------------------------------------------------------------|-----------------------------|
| concurrent calls (``asyncio.gather``): one call's infrastructure  | test_a_sibling_call_*       |
| error ends the run; the sibling makes no side effect and records  |                             |
| no outcome after that (in memory and on Kafka)                    |                             |
| the same for concurrent delegations (``Subagent.submit`` and      | test_a_sibling_delegation_* |
| ``gather``, the documented pattern)                               |                             |
| the built-in tool-call action: the same for its concurrent tools  | test_the_tool_call_action_* |
| closing the engine cancels the calls in flight of its runs        | test_closing_the_engine_*   |
| a call started after its run ended is refused                     | test_a_call_after_*         |
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.agents.react import ReActAgent
from flink_agents.api import (
    ChatModelSetup,
    InfrastructureError,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import SubagentRequest, SubagentSetup
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import ActionStateStore, CallStatus, RunKey
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import ActionError, Runtime
from flink_agents.runtime.call_scope import RunEndedError
from flink_agents.testing import Stores, agent_plan
from tests.durable import conftest as durable_conftest
from tests.sample_agents import add_scripted_connection
from tests.subagent_samples import FakeSubagent, caller_agent

stores = durable_conftest.stores  # the store pairs of the durable tests: memory, Kafka

SIDE_EFFECTS: list[str] = []
"""What the slow sibling did after its wait: nothing, if it was cancelled with its run."""

STARTED: asyncio.Event | None = None


@pytest.fixture(autouse=True)
def _reset() -> None:
    SIDE_EFFECTS.clear()


async def broken(name: str) -> str:
    """The machinery fails under this call (a store or codec error inside it, say)."""
    await asyncio.sleep(0.01)
    raise InfrastructureError(f"{name}: the store is gone")


async def slow(name: str) -> str:
    """A side effect made after a wait, unless the call is cancelled first."""
    if STARTED is not None:
        STARTED.set()
    await asyncio.sleep(0.1)
    SIDE_EFFECTS.append(name)
    return name


@action(InputEvent)
async def gathered(event: InputEvent, ctx: RunnerContext) -> None:
    """Two calls at once, as the docs show for concurrent delegations."""
    both = await asyncio.gather(
        ctx.durable_execute_async(broken, "a", call_id="broken"),
        ctx.durable_execute_async(slow, "b", call_id="slow"),
    )
    ctx.send_event(OutputEvent(output=both))


def _calls(store: ActionStateStore, agent: str) -> dict[str, CallStatus]:
    run = RunKey(agent=agent, key=canonical_json("k"), seq=0)
    return {c.call_id: c.status for state in store.get_run(run) for c in state.calls}


async def _fail_then_wait(plan: AgentPlan, store: ActionStateStore) -> None:
    engine = Runtime.build(plan, store=store).engine
    engine.submit("k", {"city": "Oslo"})
    with pytest.raises(ActionError) as caught:
        await engine.drain()
    assert isinstance(caught.value.__cause__, InfrastructureError)
    assert SIDE_EFFECTS == []  # already when the run's failure left the engine
    await asyncio.sleep(0.3)  # the loop goes on: a sibling left running would act now
    await engine.close()


def test_a_sibling_call_makes_no_side_effect_after_its_run_failed(stores: Stores) -> None:
    plan = agent_plan(gathered, name="gathered")
    asyncio.run(_fail_then_wait(plan, stores.first))
    assert SIDE_EFFECTS == []
    # Not written into the ended run: the cancelled call has no outcome (a replay sends it).
    assert _calls(stores.first, "gathered").get("slow") in (None, CallStatus.PENDING)


class SlowSubagent(SubagentSetup):
    """A sub-agent whose work is a side effect after a wait."""

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        return await slow(str(request.input))


def test_a_sibling_delegation_makes_no_side_effect_after_its_run_failed(stores: Stores) -> None:
    agent = caller_agent(
        broken=ResourceDescriptor.of(FakeSubagent, mode="store_error"),
        slow=ResourceDescriptor.of(SlowSubagent),
    )
    agent.error_policy = "fail"
    plan = compile_agent(agent)

    async def scenario() -> None:
        engine = Runtime.build(plan, store=stores.first).engine
        engine.submit("k", {"calls": [["broken", "a", None], ["slow", "b", None]]})
        with pytest.raises(ActionError) as caught:
            await engine.drain()
        assert isinstance(caught.value.__cause__, InfrastructureError)
        await asyncio.sleep(0.3)  # a delegation left running would act now
        await engine.close()

    asyncio.run(scenario())
    assert SIDE_EFFECTS == []
    statuses = _calls(stores.first, "caller")
    assert CallStatus.SUCCEEDED not in statuses.values()


def test_the_tool_call_action_cancels_its_other_tools_when_one_fails(stores: Stores) -> None:
    agent = ReActAgent(
        name="tools",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[broken, slow],
    )
    calls = [
        {"name": "broken", "arguments": {"name": "a"}},
        {"name": "slow", "arguments": {"name": "b"}},
    ]
    add_scripted_connection(agent, "call-scope", [{"tool_calls": calls}, {"content": "done"}])
    plan = compile_agent(agent)
    asyncio.run(_fail_then_wait(plan, stores.first))
    assert SIDE_EFFECTS == []
    statuses = _calls(stores.first, "tools")
    assert not any(s is CallStatus.SUCCEEDED for c, s in statuses.items() if c != "chat")


@action(InputEvent)
async def two_slow(event: InputEvent, ctx: RunnerContext) -> None:
    await asyncio.gather(
        ctx.durable_execute_async(slow, "x", call_id="x"),
        ctx.durable_execute_async(slow, "y", call_id="y"),
    )


KEPT: list[RunnerContext] = []


@action(InputEvent)
async def keep_context(event: InputEvent, ctx: RunnerContext) -> None:
    KEPT.append(ctx)
    ctx.send_event(OutputEvent(output=1))


def test_closing_the_engine_cancels_the_calls_in_flight() -> None:
    global STARTED

    async def scenario() -> None:
        global STARTED
        STARTED = asyncio.Event()
        engine = Runtime.build(agent_plan(two_slow, name="closing")).engine
        engine.submit("k", 1)
        engine.pump()
        await asyncio.wait_for(STARTED.wait(), 5)
        await engine.close()
        await asyncio.sleep(0.3)

    try:
        asyncio.run(scenario())
    finally:
        STARTED = None
    assert SIDE_EFFECTS == []


def test_a_call_after_its_run_ended_is_refused() -> None:
    KEPT.clear()
    refused: list[BaseException] = []

    async def scenario() -> None:
        engine = Runtime.build(agent_plan(keep_context, name="late")).engine
        engine.submit("k", 1)
        await engine.drain()
        try:
            await KEPT[0].durable_execute_async(slow, "late")
        except RunEndedError as exc:
            refused.append(exc)
        await engine.close()

    asyncio.run(scenario())
    assert SIDE_EFFECTS == [] and len(refused) == 1
    assert "ended" in str(refused[0])
