"""A connection's ``max_concurrent_calls``: how many calls are at its server at once.

``max_in_flight`` bounds runs, not calls to one provider; the cap is the connection's own, and
waiting for a slot is neither an attempt nor holds one.
"""

from __future__ import annotations

import asyncio

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.attempts import CountedAttempts, RetryPolicy, tracking_attempts
from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.plan.compile import compile_agent
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.providers.retry_loop import AttemptFailure, retry_within_budget
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse, openai_reply
from tests.providers.providers import FAST_RETRY


@action(InputEvent, sends=[OutputEvent])
async def ask(event: InputEvent, ctx: RunnerContext) -> None:
    model = ctx.get_resource("chat", ResourceType.CHAT_MODEL)
    assert isinstance(model, ChatModelSetup)
    message = ChatMessage(role="user", content=str(event.input["n"]))
    reply = await ctx.durable_execute_async(model.chat, [message])
    ctx.send_event(OutputEvent(output=reply.content))


def _agent(connection: type, **arguments: object) -> Agent:
    agent = Agent(name="capped")
    agent.add_action(ask)
    agent.add_resource("chat", ResourceType.CHAT_MODEL, ChatModelSetup, connection="llm", model="m")
    agent.add_resource("llm", ResourceType.CHAT_MODEL_CONNECTION, connection, **arguments)
    return agent


def test_at_most_n_calls_are_at_the_server_whatever_the_runs_in_flight() -> None:
    slow = lambda request: ScriptedResponse(body=openai_reply("ok"), delay_seconds=0.05)  # noqa: E731
    with FakeModelServer(fallback=slow) as server:
        agent = _agent(
            OpenAICompatibleChatModelConnection,
            base_url=f"{server.url}/v1",
            retry=FAST_RETRY,
            max_concurrent_calls=3,
        )
        results = run_local(agent, [{"n": n} for n in range(24)], key="n", max_in_flight=64)

    assert [r.output_values for r in results] == [["ok"]] * 24
    assert server.request_count == 24
    assert server.max_in_flight == 3  # the cap is reached, never passed


def test_the_cap_is_in_the_plan_and_checked() -> None:
    plan = compile_agent(_agent(OpenAICompatibleChatModelConnection, max_concurrent_calls=2))
    assert plan.resources["llm"].arguments["max_concurrent_calls"] == 2
    assert OpenAICompatibleChatModelConnection(max_concurrent_calls=2).max_concurrent_calls == 2
    with pytest.raises(ValueError, match="max_concurrent_calls\n  Input should be greater than"):
        OpenAICompatibleChatModelConnection(max_concurrent_calls=0)


def test_every_provider_takes_the_cap_the_scripted_one_too() -> None:
    ScriptedChatModelConnection.reset_stats("capped")
    agent = _agent(
        ScriptedChatModelConnection,
        name="capped",
        turns=[{"content": "ok"}],
        latency_seconds=0.02,
        max_concurrent_calls=2,
    )
    run_local(agent, [{"n": n} for n in range(10)], key="n", max_in_flight=10)
    assert ScriptedChatModelConnection.stats("capped").max_in_flight == 2


def test_waiting_for_a_slot_is_not_an_attempt_and_backoff_holds_no_slot() -> None:
    async def scenario() -> None:
        slot = asyncio.Lock()
        tracker = CountedAttempts()
        seen_during_backoff: list[bool] = []
        failures = [AttemptFailure("HTTP 429", retryable=True, status=429)]

        async def attempt() -> str:
            assert slot.locked()  # each attempt runs holding its slot
            if failures:
                raise failures.pop()
            return "done"

        async def watch_backoff() -> None:
            while not seen_during_backoff:
                await asyncio.sleep(0)
                if tracker.attempts == 1 and not failures:
                    seen_during_backoff.append(slot.locked())

        await slot.acquire()  # another call holds the only slot
        with tracking_attempts(tracker):
            call = asyncio.create_task(
                retry_within_budget(
                    attempt, RetryPolicy(initial_backoff_seconds=0.05, jitter=0), lambda: slot
                )
            )
        await asyncio.sleep(0.02)
        assert tracker.attempts == 0  # waiting at the gate spent nothing
        slot.release()
        watcher = asyncio.create_task(watch_backoff())
        assert await call == "done"
        await watcher
        assert tracker.attempts == 2
        assert seen_during_backoff == [False]  # the slot is free while the retry waits

    asyncio.run(scenario())


def test_without_a_cap_every_call_enters_at_once_and_with_one_the_cap_holds() -> None:
    async def entered_together(connection: ScriptedChatModelConnection, calls: int) -> int:
        inside = most = 0

        async def one() -> None:
            nonlocal inside, most
            async with connection.call_slot():
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0)
                inside -= 1

        await asyncio.gather(*(one() for _ in range(calls)))
        return most

    turns = [{"content": "x"}]
    uncapped = ScriptedChatModelConnection(turns=turns)
    capped = ScriptedChatModelConnection(turns=turns, max_concurrent_calls=2)
    assert asyncio.run(entered_together(uncapped, 5)) == 5
    assert asyncio.run(entered_together(capped, 5)) == 2
