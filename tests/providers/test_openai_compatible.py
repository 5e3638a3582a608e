"""A ReAct agent with a tool completes its round trip against fake servers that behave as
llama-cpp-python's, vLLM's and Ollama's OpenAI-compatible endpoints do (tests/providers/
openai_servers.py), declared in Python and in YAML; how a tool-call turn is sent to each
(``tool_call_content``), what their refusals read like, and arguments that are not JSON."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_agents import ChatModelSetup, ReActAgent, ResourceDescriptor, ResourceType
from flink_agents.api.agent import Agent
from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from flink_agents.plan.yaml.loader import load_yaml_agents
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.openai_compatible import (
    OpenAICompatibleChatModelConnection,
    missing_version_hint,
)
from flink_agents.runtime import run_local
from flink_agents.runtime.engine import ActionError
from tests.providers.fake_servers import FakeModelServer, Responder
from tests.providers.openai_servers import (
    AUTO_TOOL_CHOICE_ERROR,
    LlamaCppPythonServer,
    OllamaOpenAIServer,
    ToolModel,
    VllmServer,
)
from tests.providers.providers import FAST_RETRY

QUESTION = "What is the weather in Oslo?"
GOOD_CALL = ("get_weather", '{"city": "Oslo"}')
ANSWER = "It is sunny in Oslo."


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def model(*calls: tuple[str, str]) -> ToolModel:
    return ToolModel(calls=list(calls) or [GOOD_CALL], answer=ANSWER)


SERVERS: dict[str, Callable[[ToolModel], Responder]] = {
    "llama-cpp-python": LlamaCppPythonServer,
    "vllm": VllmServer,
    "ollama-v1": OllamaOpenAIServer,
}

EXPECTED_ANSWER = {
    # chatml-function-calling ends a text answer in auto mode at once (docs/providers.md)
    "llama-cpp-python": "",
    "vllm": ANSWER,
    "ollama-v1": ANSWER,
}


def python_agent(base_url: str, max_tool_rounds: int = 10, **setup: Any) -> Agent:
    agent = ReActAgent(
        name="weather",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="llm", model="m", **setup),
        tools=[get_weather],
        max_tool_rounds=max_tool_rounds,
    )
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        OpenAICompatibleChatModelConnection,
        base_url=base_url,
        retry=FAST_RETRY,
    )
    return agent


YAML = """\
agents:
  - name: weather
    react: {{chat_model: assistant}}
    tools:
      get_weather: {{function: "tests.providers.test_openai_compatible:get_weather"}}
    connections:
      llm:
        class: openai
        arguments:
          base_url: "{base_url}"
          retry: {{initial_backoff_seconds: 0.001, max_backoff_seconds: 0.01}}
    chat_models:
      assistant: {{connection: llm, model: m, tools: [get_weather]{setup}}}
"""


def yaml_agent(tmp_path: Path, base_url: str, **setup: Any) -> Agent:
    extra = "".join(f", {key}: {value}" for key, value in setup.items())
    path = tmp_path / "weather.yaml"
    path.write_text(YAML.format(base_url=base_url, setup=extra))
    return load_yaml_agents(path)["weather"]


@pytest.fixture(params=["python", "yaml"])
def declare(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Agent]:
    if request.param == "python":
        return python_agent
    return lambda base_url, **setup: yaml_agent(tmp_path, base_url, **setup)


def serve(responder: Responder) -> FakeModelServer:
    return FakeModelServer(fallback=responder)


def ask(agent: Agent) -> Any:
    (result,) = run_local(agent, [QUESTION], key=lambda text: text)
    (output,) = result.output_values
    return output


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_react_agent_completes_its_tool_round_trip(
    name: str, declare: Callable[..., Agent]
) -> None:
    with serve(SERVERS[name](model())) as server:
        output = ask(declare(server.url + "/v1"))
    assert output == EXPECTED_ANSWER[name]
    first, second = (request.json() for request in server.requests)
    assert first["tool_choice"] == "auto"  # sent: llama-cpp-python offers no tool without it
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    turn, result = second["messages"][-2:]
    assert turn["content"] == ""  # the one form all three accept
    assert turn["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": GOOD_CALL[1]}
    assert result == {
        "role": "tool",
        "tool_call_id": turn["tool_calls"][0]["id"],
        "content": "sunny in Oslo",
    }


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_named_tool_choice_is_forced_until_the_first_tool_result(
    name: str, declare: Callable[..., Agent]
) -> None:
    with serve(SERVERS[name](model())) as server:
        output = ask(declare(server.url + "/v1", tool_choice="get_weather"))
    assert output == EXPECTED_ANSWER[name]
    first, second = (request.json() for request in server.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert second["tool_choice"] == "auto"


# What each server does with each content form of a turn that only calls tools: None when it
# accepts it, else (the requests sent, the call's failure).
NIL = "HTTP 400: invalid message content type: <nil>"
LLAMA_NULL = (
    "HTTP 500: the server refused the request as invalid (7 validation errors; "
    "body.messages.1.ChatCompletionRequestAssistantMessage.content: Input should be a valid string)"
)
LLAMA_OMIT = "HTTP 500: 'dict object' has no attribute 'content' (attempt budget of 3 spent)"
ACCEPTS: dict[str, dict[str, tuple[int, str] | None]] = {
    "llama-cpp-python": {"empty": None, "omit": (3, LLAMA_OMIT), "null": (1, LLAMA_NULL)},
    "vllm": {"empty": None, "omit": None, "null": None},
    "ollama-v1": {"empty": None, "omit": (1, NIL), "null": (1, NIL)},
}


def _history() -> list[ChatMessage]:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    return [
        ChatMessage(role="user", content=QUESTION),
        ChatMessage(role="assistant", tool_calls=[call]),
        ChatMessage(role="tool", content="sunny in Oslo", tool_call_id="call_1"),
    ]


@pytest.mark.parametrize(
    ("name", "form"), [(name, form) for name, forms in ACCEPTS.items() for form in forms]
)
def test_each_server_with_each_form_of_a_tool_call_turn(name: str, form: str) -> None:
    with serve(SERVERS[name](model())) as server:
        connection = OpenAICompatibleChatModelConnection(
            base_url=server.url + "/v1", model="m", retry=FAST_RETRY, tool_call_content=form
        )
        request = ChatRequest(messages=_history(), tools=[WEATHER])
        expected = ACCEPTS[name][form]
        if expected is None:
            asyncio.run(connection.chat(request))
        else:
            with pytest.raises(ModelCallError) as caught:
                asyncio.run(connection.chat(request))
    turn = server.requests[0].json()["messages"][1]
    assert turn.get("content", "absent") == {"empty": "", "null": None, "omit": "absent"}[form]
    if expected is not None:  # a validation refusal is sent once, in one line
        assert (server.request_count, caught.value.reason) == expected


def test_vllm_without_auto_tool_choice_refuses_once_and_says_what_to_start_it_with(
    declare: Callable[..., Agent],
) -> None:
    server = serve(VllmServer(model(), auto_tool_choice=False))
    with server, pytest.raises(ActionError) as caught:
        ask(declare(server.url + "/v1"))
    assert server.request_count == 1
    assert f"HTTP 400: {AUTO_TOOL_CHOICE_ERROR}" in str(caught.value)


def test_a_base_url_without_v1_names_the_url_and_hints_at_v1(
    declare: Callable[..., Agent],
) -> None:
    server = serve(LlamaCppPythonServer(model()))
    with server, pytest.raises(ActionError) as caught:
        ask(declare(server.url))
    assert server.request_count == 1
    assert (
        f"HTTP 404 at {server.url}/chat/completions: Not Found; base_url {server.url!r} has "
        f"no /v1: OpenAI-compatible servers want it ({server.url}/v1)"
    ) in str(caught.value)


def test_a_404_behind_v1_names_the_url_without_the_hint() -> None:
    with serve(OllamaOpenAIServer(model(), models=("smollm2",))) as server:
        connection = OpenAICompatibleChatModelConnection(
            base_url=server.url + "/v1", model="m", retry=FAST_RETRY
        )
        with pytest.raises(ModelCallError) as caught:
            asyncio.run(connection.chat(ChatRequest(messages=_history()[:1])))
    assert caught.value.reason == (
        f'HTTP 404 at {server.url}/v1/chat/completions: model "m" not found, try pulling it first'
    )


@pytest.fixture
def bad_then_good() -> Iterator[FakeModelServer]:
    with serve(VllmServer(model(("get_weather", '{"city": "Oslo"'), GOOD_CALL))) as server:
        yield server


def test_arguments_that_are_not_json_go_back_to_the_model_as_a_tool_error(
    bad_then_good: FakeModelServer, declare: Callable[..., Agent]
) -> None:
    assert ask(declare(bad_then_good.url + "/v1")) == ANSWER
    _, second, third = (request.json() for request in bad_then_good.requests)
    turn, error = second["messages"][-2:]
    assert turn["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"'  # as it came
    assert error["role"] == "tool"
    assert error["content"].startswith(
        "ToolArgumentsError: the arguments of this call of 'get_weather' are not JSON ("
    )
    quoted = """'{"city": "Oslo"'; call it again with the arguments as one JSON object"""
    assert quoted in error["content"]
    assert third["messages"][-1]["content"] == "sunny in Oslo"


def test_arguments_never_json_end_the_run_at_max_tool_rounds() -> None:
    bad = ("get_weather", "{&#34;city&#34;: &#34;Oslo&#34;}")  # llama-cpp-python's escaping
    with serve(VllmServer(model(bad, bad, bad, bad))) as server:
        agent = python_agent(server.url + "/v1", max_tool_rounds=2)
        with pytest.raises(ActionError, match=r"still asks for tools after 2 rounds"):
            ask(agent)
    assert server.request_count == 3


@pytest.mark.parametrize(
    ("base_url", "hint"),
    [
        ("http://h:8000/", "; base_url 'http://h:8000' has no /v1: "),
        ("http://user:secret@h:1/x?key=k", "; base_url 'http://h:1/x' has no /v1: "),
        ("http://h/v1", ""),
        ("https://h/v1beta/openai", ""),
        ("http://h/api/v1", ""),
    ],
)
def test_the_v1_hint_only_without_a_version_and_never_with_credentials(
    base_url: str, hint: str
) -> None:
    given = missing_version_hint(base_url)
    assert given.startswith(hint) and bool(given) == bool(hint)
    assert "secret" not in given and "key=" not in given
