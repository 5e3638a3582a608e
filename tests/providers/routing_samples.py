"""An agent asking its model through a RoutingChatModelConnection, and an event-log listener
keeping the connections' notes: the routing tests' subjects."""

from __future__ import annotations

from typing import Any

from flink_agents.api import Agent, ResourceType
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.observability import ConnectionNoted, LogRecord
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.providers.routing import RoutingChatModelConnection
from tests.budget_samples import ask

ONE_ATTEMPT = {"max_attempts": 1}


class Records:
    """An event-log listener keeping the connection records."""

    def __init__(self) -> None:
        self.notes: list[ConnectionNoted] = []

    def on_record(self, record: LogRecord) -> None:
        if isinstance(record, ConnectionNoted):
            self.notes.append(record)


def routed_plan(urls: dict[str, tuple[str, str]], **router: Any) -> AgentPlan:
    """An agent asking setup ``model`` on connection ``router`` (a RoutingChatModelConnection
    with ``router``'s arguments) whose connections are ``urls``: name -> (base_url, model)."""
    agent = Agent(name="routed", error_policy="emit")
    agent.add_action(ask)
    for name, (base_url, model) in urls.items():
        agent.add_resource(
            name,
            ResourceType.CHAT_MODEL_CONNECTION,
            OpenAICompatibleChatModelConnection,
            base_url=base_url,
            model=model,
            retry=ONE_ATTEMPT,
        )
    agent.add_resource(
        "router", ResourceType.CHAT_MODEL_CONNECTION, RoutingChatModelConnection, **router
    )
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="router")
    return compile_agent(agent)
