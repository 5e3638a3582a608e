"""Workload (1) for Apache flink-agents 0.2.0: one chat call per input on a sleeping model.

Imported by name inside the peer's own virtual environment (its resource descriptors name
classes by module path), so this module imports the installed peer package only.
"""

from __future__ import annotations

import json
import time
from typing import Any

from flink_agents.api.agents.agent import Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.chat_models.chat_model import BaseChatModelConnection, BaseChatModelSetup
from flink_agents.api.decorators import action, chat_model_setup
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import InputEvent, OutputEvent
from flink_agents.api.resource import ResourceDescriptor
from flink_agents.api.runner_context import RunnerContext


class SleepingConnection(BaseChatModelConnection):
    """Answers ``ok: <last message>`` after blocking ``latency_seconds`` (its chat is sync)."""

    latency_seconds: float = 0.0

    def chat(self, messages: Any, tools: Any = None, **kwargs: Any) -> ChatMessage:
        if self.latency_seconds:
            time.sleep(self.latency_seconds)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"ok: {messages[-1].content}")


class SleepingSetup(BaseChatModelSetup):
    """The setup of the sleeping connection; no model settings."""

    @property
    def model_kwargs(self) -> dict[str, Any]:
        return {}


class OneCallAgent(Agent):
    """Input text -> one chat request -> the reply as the output."""

    @chat_model_setup
    @staticmethod
    def bench_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.SleepingSetup", connection="sleeping")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        text = json.loads(event.input)["text"]
        message = ChatMessage(role=MessageRole.USER, content=text)
        ctx.send_event(ChatRequestEvent(model="bench_model", messages=[message]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def connection(latency: float) -> ResourceDescriptor:
    return ResourceDescriptor(clazz=f"{__name__}.SleepingConnection", latency_seconds=latency)
