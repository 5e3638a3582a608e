"""Chat model setups and connections: how a structured answer is asked for, the one system
message at the head of a request, and tool_choice and parallel_tool_calls (checked when the
setup is opened: a name that is not offered, 'required' with nothing offered, a setting the
connection cannot send; carried in every request; a forced choice turns to 'auto' once a tool
result is in the conversation)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from flink_agents.agents.react import ReActAgent
from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.chat_models import one_leading_system_message as one_system
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import Resource, ResourceDescriptor, ResourceType
from flink_agents.api.tools import FunctionTool
from flink_agents.plan import compile_agent, resolve_plan
from flink_agents.providers.anthropic import AnthropicChatModelConnection
from flink_agents.providers.bedrock import BedrockChatModelConnection
from flink_agents.providers.gemini import GeminiChatModelConnection
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


def _prompted_request(
    prompt: Prompt, messages: list[ChatMessage], **prompt_args: Any
) -> list[tuple[str, str]]:
    setup = ChatModelSetup(connection="llm", prompt="instructions")
    resources: dict[str, Resource] = {"llm": OPENAI, "instructions": prompt}
    setup.bind(lambda name, kind: resources[name])
    setup.open()
    return [(m.role, m.content) for m in setup.request(messages, prompt_args).messages]


def test_a_setup_prompt_of_messages_keeps_their_roles():
    # Upstream's idiom: the prompt holds the user message, the request only its arguments.
    prompt = Prompt.model_validate(
        {
            "messages": [
                {"role": "system", "content": "You analyse reviews."},
                {"role": "user", "content": "Review: {review}"},
            ]
        }
    )
    asked = [ChatMessage(role="user", content="")]
    assert _prompted_request(prompt, asked, review="great phone") == [
        ("system", "You analyse reviews."),
        ("user", "Review: great phone"),
    ]
    # The caller's system messages add to the prompt's; its own turns follow the prompt's.
    asked = [ChatMessage(role="system", content="Be brief."), QUESTION]
    assert _prompted_request(prompt, asked, review="ok") == [
        ("system", "You analyse reviews.\n\nBe brief."),
        ("user", "Review: ok"),
        ("user", "Weather in Oslo?"),
    ]


def test_a_setup_prompt_of_text_is_the_system_prompt():
    prompt = Prompt(text="You work for {shop}.")
    assert _prompted_request(prompt, [QUESTION], shop="Acme") == [
        ("system", "You work for Acme."),
        ("user", "Weather in Oslo?"),
    ]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def open_setup(connection: ChatModelConnection, **fields: Any) -> ChatModelSetup:
    resources: dict[str, Resource] = {
        "llm": connection,
        "weather": FunctionTool(function=f"{__name__}:get_weather"),
    }
    setup = ChatModelSetup(connection="llm", model="m", **fields)
    setup.bind(lambda name, kind: resources[name])
    setup.open()
    return setup


OPENAI = OpenAICompatibleChatModelConnection(base_url="http://127.0.0.1:9/v1")
QUESTION = ChatMessage(role="user", content="Weather in Oslo?")
RESULT = ChatMessage(role="tool", content="sunny", tool_call_id="c1")


@pytest.mark.parametrize("choice", ["auto", "none", "required", "get_weather"])
def test_a_valid_choice_reaches_the_request_with_parallel_tool_calls(choice: str) -> None:
    setup = open_setup(OPENAI, tools=["weather"], tool_choice=choice, parallel_tool_calls=False)
    request = setup.request([QUESTION])
    assert (request.tool_choice, request.parallel_tool_calls) == (choice, False)


@pytest.mark.parametrize(("choice", "after"), [("required", "auto"), ("get_weather", "auto")])
def test_a_forced_choice_turns_to_auto_once_a_tool_result_is_in(choice: str, after: str) -> None:
    setup = open_setup(OPENAI, tools=["weather"], tool_choice=choice)
    assert setup.request([QUESTION]).tool_choice == choice
    assert setup.request([QUESTION, RESULT]).tool_choice == after


@pytest.mark.parametrize("choice", [None, "auto", "none"])
def test_an_unforced_choice_stays_after_tool_results(choice: str | None) -> None:
    setup = open_setup(OPENAI, tools=["weather"], tool_choice=choice)
    assert setup.request([QUESTION, RESULT]).tool_choice == choice


def test_a_choice_naming_no_offered_tool_is_refused_naming_the_offered_ones() -> None:
    with pytest.raises(ValueError, match=r"tool_choice 'get_time' is neither one of"):
        open_setup(OPENAI, tools=["weather"], tool_choice="get_time")
    with pytest.raises(ValueError, match=r"offered: \['get_weather'\]"):
        open_setup(OPENAI, tools=["weather"], tool_choice="get_time")


def test_required_with_no_tool_offered_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_choice 'required' but no tool is offered"):
        open_setup(OPENAI, tool_choice="required")


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"tool_choice": "required"}, "Ollama's /api/chat has no tool_choice"),
        ({"tool_choice": "get_weather"}, "so 'get_weather' cannot be honoured"),
        ({"tool_choice": "none"}, "so 'none' cannot be honoured"),
        ({"parallel_tool_calls": False}, "cannot turn parallel tool calls off"),
    ],
)
def test_ollamas_native_connection_refuses_what_its_protocol_cannot_send(
    fields: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        open_setup(OllamaChatModelConnection(), tools=["weather"], **fields)
    assert "chat model m on connection 'llm'" in str(caught.value)


def test_ollamas_native_connection_takes_what_it_does_anyway() -> None:
    setup = open_setup(
        OllamaChatModelConnection(), tools=["weather"], tool_choice="auto", parallel_tool_calls=True
    )
    assert setup.request([QUESTION]).tool_choice == "auto"


def test_a_setup_without_tool_settings_does_not_open_its_connection() -> None:
    setup = ChatModelSetup(connection="llm", model="m")

    def lookup(name: str, kind: ResourceType) -> Resource:
        raise AssertionError(f"{name} looked up")

    setup.bind(lookup)
    setup.open()  # `flink-agents inspect` opens setups only
    request = setup.request([QUESTION])
    assert (request.tool_choice, request.parallel_tool_calls) == (None, None)


@pytest.mark.parametrize(
    ("connection", "fields", "why"),
    [
        (BedrockChatModelConnection, {"tool_choice": "none"}, 'no tool choice "none"'),
        (BedrockChatModelConnection, {"parallel_tool_calls": False}, "cannot turn parallel"),
        (GeminiChatModelConnection, {"parallel_tool_calls": False}, "cannot turn parallel"),
    ],
)
def test_gemini_and_bedrock_refuse_what_their_protocols_cannot_send(
    connection: type[ChatModelConnection], fields: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        open_setup(connection.model_construct(), tools=["weather"], **fields)
