"""run_local: a plan over a list of inputs, in this process."""

from __future__ import annotations

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, ResourceType, RunnerContext
from flink_agents.plan import PlanValidationError
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local

HANDLED: list[object] = []


def record(event: InputEvent, ctx: RunnerContext) -> None:
    HANDLED.append(event.input)
    ctx.send_event(OutputEvent(output=event.input))


def test_a_missing_credential_fails_before_any_input_is_run() -> None:
    """As a Flink job fails at start, not in the first run's action."""
    HANDLED.clear()
    agent = Agent(name="keyed").add_action(record, InputEvent)
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        turns=[{"content": "hi"}],
        api_key={"env": "FLINK_AGENTS_TEST_NEVER_SET"},
    )
    with pytest.raises(PlanValidationError) as info:
        run_local(agent, [{"id": 1}], key="id", environ={})
    assert "environment variable 'FLINK_AGENTS_TEST_NEVER_SET' is not set" in str(info.value)
    assert HANDLED == []
