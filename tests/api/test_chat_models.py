"""Chat model setups and connections: how a structured answer is asked for, and the one system
message at the head of a request."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from flink_agents.agents.react import ReActAgent
from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.chat_models import one_leading_system_message as one_system
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.plan import compile_agent, resolve_plan
from flink_agents.providers.anthropic import AnthropicChatModelConnection
from flink_agents.providers.ollama import OllamaChatModelConnection
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.providers.openai_responses import OpenAIResponsesChatModelConnection
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.providers.vllm import VllmChatModelConnection
from flink_agents.runtime import ResourceRegistry
from tests.sample_agents import Answer, add, add_scripted_connection

TURNS = [{"content": "hi"}]


def _connection(kind: type[ChatModelConnection], **arguments: object) -> ChatModelConnection:
    if kind is ScriptedChatModelConnection:
        arguments["turns"] = TURNS
    return kind(**arguments)


@pytest.mark.parametrize(
    ("kind", "without_tools", "with_tools"),
    [
        (OpenAICompatibleChatModelConnection, True, True),  # response_format beside the tools
        (AnthropicChatModelConnection, True, True),  # the answer tool among the tools
        (OpenAIResponsesChatModelConnection, True, True),  # text.format beside the tools
        (VllmChatModelConnection, True, True),  # as OpenAI-compatible, in the field it chose
        (OllamaChatModelConnection, True, False),  # format would silence the tools
        (ScriptedChatModelConnection, False, False),  # no native field at all
    ],
)
def test_auto_is_native_where_the_provider_has_it_for_the_requests_shape(
    kind, without_tools, with_tools
):
    connection = _connection(kind)
    assert connection.structured_output_mode == "auto"
    assert connection.uses_native_schema(tools=False) is without_tools
    assert connection.uses_native_schema(tools=True) is with_tools
    assert connection.uses_native_schema(tools=False, setting="prompt") is False
    prompt_only = _connection(kind, structured_output_mode="prompt")
    assert prompt_only.uses_native_schema(tools=False) is False


def test_native_is_what_it_says_even_where_auto_would_not_be():
    ollama = OllamaChatModelConnection(structured_output_mode="native")
    assert ollama.uses_native_schema(tools=True) is True


def test_native_on_a_connection_without_it_is_refused_when_built():
    with pytest.raises(ValidationError, match="ScriptedChatModelConnection has no native"):
        ScriptedChatModelConnection(turns=TURNS, structured_output_mode="native")


def _registry(**setup: object) -> ResourceRegistry:
    agent = ReActAgent(
        name="setup_override",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", **setup),
        output_schema=Answer,
        tools=[add],
    )
    add_scripted_connection(agent, "setup-override", TURNS)
    return ResourceRegistry(resolve_plan(compile_agent(agent)))


def test_a_setup_asking_native_of_a_connection_without_it_fails_when_opened():
    registry = _registry(structured_output_mode="native")
    with pytest.raises(ValueError, match="has no native structured output; use"):
        registry.open_all()


def test_a_setup_without_a_setting_follows_its_connection():
    model = _registry().get("chat_model", ResourceType.CHAT_MODEL)
    assert isinstance(model, ChatModelSetup)
    assert model.uses_native_schema() is False  # scripted: auto is the prompt


def _messages(*roles: str) -> list[ChatMessage]:
    return [ChatMessage(role=role, content=f"{role} {n}") for n, role in enumerate(roles)]  # type: ignore[arg-type]


def test_the_system_messages_at_the_head_are_joined_into_one():
    joined = one_system(_messages("system", "system", "user", "system"))
    assert [(m.role, m.content) for m in joined] == [
        ("system", "system 0\n\nsystem 1"),
        ("user", "user 2"),
        ("system", "system 3"),  # not at the head: left where the caller put it
    ]
    single = _messages("system", "user")
    assert one_system(single) is single
    assert one_system(_messages("user", "system")) == _messages("user", "system")
