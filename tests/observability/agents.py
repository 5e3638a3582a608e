"""Agents for the observability tests: a model that reports tokens (and leaks its key)."""

from __future__ import annotations

import os
from typing import Any, cast

from pydantic import SecretStr, field_validator

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from flink_agents.api.chat import ChatRequest
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.resources import resolve_env_references
from flink_agents.observability import LogRecord

KEY_VARIABLE = "OBSERVABILITY_TEST_API_KEY"
SECRET = "sk-test-4f9a1c7e2b"


class LeakyConnection(ChatModelConnection):
    """Answers with its own API key in the text (the worst a provider could do) and reports
    7 input and 3 output tokens."""

    api_key: SecretStr

    @field_validator("api_key", mode="before")
    @classmethod
    def _resolve(cls, value: Any) -> Any:
        return resolve_env_references(value)

    async def chat(self, request: ChatRequest) -> ChatMessage:
        key = self.api_key.get_secret_value()
        return ChatMessage(
            role="assistant",
            content=f"the key is {key}",
            usage=TokenUsage(input_tokens=7, output_tokens=3),
        )


@action(InputEvent)
async def ask(event: InputEvent, ctx: RunnerContext) -> None:
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    question = [ChatMessage(role="user", content=event.input["q"])]
    reply = await ctx.durable_execute_async(model.chat, question, call_id="chat")
    ctx.send_event(OutputEvent(output={"answer": reply.content, "env": os.environ[KEY_VARIABLE]}))


@action(InputEvent)
async def explode(event: InputEvent, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(_fail, event.input["q"])


async def _fail(text: str) -> None:
    raise ValueError(f"cannot answer {text!r}")


def leaky_agent() -> Agent:
    agent = Agent(name="leaky")
    agent.add_action(ask)
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, LeakyConnection, api_key={"env": KEY_VARIABLE}
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
    )
    return agent


def failing_agent(error_policy: str = "emit") -> Agent:
    agent = Agent(name="failing", error_policy=error_policy)
    agent.add_action(explode)
    return agent


class Collector:
    """A listener that keeps what it is given (class-wide, so a reference can find it)."""

    records: list[LogRecord] = []

    def on_record(self, record: LogRecord) -> None:
        Collector.records.append(record)
