"""Ids sent outside are unique per logical call, across runs of one session, and the same on
every replay of a call; through ``DurableCalls`` over the in-memory store and over Kafka.

| Contract                                                           | Test                       |
|--------------------------------------------------------------------|----------------------------|
| a session continued by later runs (or keys) never sends a          | test_a_continued_session_* |
| ``(session_id, call_id)`` or an idempotency key again              |                            |
| two actions of one run continuing one session never send the same | test_two_actions_of_one_*  |
| ``(session_id, call_id)``                                          |                            |
| a call in flight at a failover is sent again with the same ids;    | test_a_call_sent_again_*   |
| a recorded one is not sent again                                   |                            |

Sessions are continued from action code (``session_id=``); YAML agents name Python actions, so
the YAML path is the same code.
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
from flink_agents.api.subagents.delegation import Subagent, SubagentRequest, SubagentSetup
from flink_agents.durable.calls import DurableCalls
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import RunEngine
from flink_agents.testing import Stores
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

SENT: list[tuple[str, str, str]] = []
"""``(session_id, call_id, idempotency key)`` of every request that reached the service."""


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    PROBE.reset()
    SENT.clear()
    yield
    PROBE.reset()


class ChatService(SubagentSetup):
    """Stands for an external service: notes what it was sent; the probe can hold a call."""

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        SENT.append((request.session_id, request.call_id, request.delegation_key))
        return await PROBE.call(f"chat:{request.input}", request.input)


@action(InputEvent)
async def continue_session(event: InputEvent, ctx: RunnerContext) -> None:
    """Two calls in the caller's session ``input["session"]``."""
    chat = Subagent(ctx, "chat")
    for turn in ("hello", "again"):
        await chat.call(turn, session_id=event.input["session"])
    ctx.send_event(OutputEvent(output="done"))


def _plan() -> AgentPlan:
    agent = Agent(name="sessions").add_action(continue_session)
    service = ResourceDescriptor.of("tests.durable.test_session_call_ids:ChatService")
    return compile_agent(agent.add_resource("chat", ResourceType.AGENT, service))


def test_a_continued_session_never_sends_ids_again(stores: Stores) -> None:
    plan = _plan()

    async def runs() -> None:
        engine = RunEngine(plan, call_runner=DurableCalls(stores.first, agent=plan.name))
        for key in ("k", "k", "other"):  # two runs of one key (seq 0 and 1), and another key
            engine.submit(key, {"session": "s"})
        await engine.drain()

    asyncio.run(runs())
    assert len(SENT) == 6 and {session for session, _, _ in SENT} == {"s"}
    assert len({(session, call) for session, call, _ in SENT}) == 6
    assert len({key for _, _, key in SENT}) == 6


@action(InputEvent)
async def continue_session_too(event: InputEvent, ctx: RunnerContext) -> None:
    """A second action on the same input event, continuing the same session."""
    await Subagent(ctx, "chat").call("also", session_id=event.input["session"])


def test_two_actions_of_one_run_continuing_one_session_never_send_the_same_ids(
    stores: Stores,
) -> None:
    # Both actions handle the same event of the same run, so only the action's name tells their
    # calls apart: the remote side must see two calls, not one call sent twice.
    agent = Agent(name="sessions").add_action(continue_session).add_action(continue_session_too)
    service = ResourceDescriptor.of("tests.durable.test_session_call_ids:ChatService")
    plan = compile_agent(agent.add_resource("chat", ResourceType.AGENT, service))

    async def run() -> None:
        engine = RunEngine(plan, call_runner=DurableCalls(stores.first, agent=plan.name))
        engine.submit("k", {"session": "s"})
        await engine.drain()

    asyncio.run(run())
    assert len(SENT) == 3
    assert len({(session, call) for session, call, _ in SENT}) == 3
    assert len({key for _, _, key in SENT}) == 3


def test_a_call_sent_again_after_a_failover_carries_the_same_ids(stores: Stores) -> None:
    result, _ = h.crash_then_replay(_plan(), stores, {"session": "s"}, hold="chat:again")
    assert result.output_values == ["done"]
    hello, again_live, again_resent = SENT  # "hello" was recorded: not sent again
    assert again_resent == again_live != hello
    assert [call.partition("@")[0] for _, call, _ in SENT] == ["1", "2", "2"]
