"""A setup's tool_choice and parallel_tool_calls: checked when the setup is opened (a name that
is not offered, 'required' with nothing offered, a setting the connection cannot send), carried
in every request, and a forced choice turns to 'auto' once a tool result is in the
conversation."""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.tools import FunctionTool
from flink_agents.providers.ollama import OllamaChatModelConnection
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection


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
