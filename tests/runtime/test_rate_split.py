"""A connection's rate limit is the whole job's: each subtask's connection gets 1/parallelism of
it, set by the runtime when the subtask opens."""

from __future__ import annotations

from flink_agents.api import Agent, ResourceType
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime.rate_split import with_rate_limits_split
from tests.budget_samples import ask


def plan() -> AgentPlan:
    agent = Agent(name="limited")
    agent.add_action(ask)
    for name, limit in (("limited", {"requests_per_minute": 90}), ("free", None)):
        agent.add_resource(
            name,
            ResourceType.CHAT_MODEL_CONNECTION,
            ScriptedChatModelConnection,
            turns=[{"content": "hi"}],
            **({"rate_limit": limit} if limit else {}),
        )
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="limited")
    return compile_agent(agent)


def test_each_subtask_gets_its_share_of_a_declared_limit() -> None:
    split = with_rate_limits_split(plan(), 3)
    assert split.resources["limited"].arguments["rate_limit"] == {
        "requests_per_minute": 90,
        "split": 3,
    }
    assert "rate_limit" not in split.resources["free"].arguments


def test_at_parallelism_one_the_plan_is_unchanged() -> None:
    original = plan()
    assert with_rate_limits_split(original, 1) is original
