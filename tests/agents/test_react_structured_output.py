"""ReAct's output_schema over each provider's real protocol: native where the provider has it
(with and without tools), the prompt where not, validation and retries either way.

The models behind the local servers (tests/providers/schema_models.py) police the structured
output fields as the real APIs do and answer JSON only when they were asked for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from flink_agents.agents.react import ReActAgent
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.plan import compile_agent
from flink_agents.plan.yaml.loader import load_yaml_agents
from flink_agents.providers._connection import HttpChatModelConnection
from flink_agents.providers.anthropic import AnthropicChatModelConnection
from flink_agents.providers.ollama import OllamaChatModelConnection
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.replay.recorded import group_runs, read_store
from flink_agents.replay.replayer import Verdict, replay_runs
from flink_agents.runtime import ActionError, run_local
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse
from tests.providers.providers import ANTHROPIC_KEY_VAR, FAST_RETRY
from tests.providers.schema_models import PROSE, SchemaModel
from tests.sample_agents import Answer, add, lookup

SCHEMA = Answer.model_json_schema()
OSLO = {"city": "Oslo", "total": 4000}
LOOKUP_OSLO = ("lookup", {"city": "Oslo"})


@dataclass(frozen=True)
class Wire:
    """One provider: its connection and how its fake model answers."""

    name: str
    connection: type[HttpChatModelConnection]
    arguments: Callable[[str], dict[str, Any]]
    answer: Callable[[SchemaModel, RecordedRequest], ScriptedResponse]


OPENAI = Wire(
    "openai-compatible",
    OpenAICompatibleChatModelConnection,
    lambda url: {"base_url": url + "/v1"},
    SchemaModel.openai,
)
ANTHROPIC = Wire(
    "anthropic",
    AnthropicChatModelConnection,
    lambda url: {"base_url": url, "api_key": {"env": ANTHROPIC_KEY_VAR}},
    SchemaModel.anthropic,
)
OLLAMA = Wire(
    "ollama", OllamaChatModelConnection, lambda url: {"base_url": url}, SchemaModel.ollama
)


@pytest.fixture(autouse=True)
def _anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake


def _serve(server: FakeModelServer, wire: Wire, model: SchemaModel) -> None:
    server.fallback = lambda request: wire.answer(model, request)


def _agent(
    wire: Wire,
    server: FakeModelServer,
    *,
    tools: bool = True,
    output_retries: int = 1,
    setup: dict[str, Any] | None = None,
    **connection: Any,
) -> ReActAgent:
    agent = ReActAgent(
        name=f"structured_{wire.name.replace('-', '_')}",
        chat_model=ResourceDescriptor.of(
            ChatModelSetup, connection="llm", model="m", **(setup or {})
        ),
        prompt=Prompt(text="{city}"),
        output_schema=Answer,
        tools=[add, lookup] if tools else [],
        output_retries=output_retries,
    )
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        wire.connection,
        retry={**FAST_RETRY, "max_attempts": 1},
        **wire.arguments(server.url),
        **connection,
    )
    return agent


def _run(agent: ReActAgent) -> list[Any]:
    [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    assert result.error is None, result.error
    return result.output_values


def _bodies(server: FakeModelServer) -> list[dict[str, Any]]:
    return [request.json() for request in server.requests]


def _asked_in_prompt(messages: list[dict[str, Any]]) -> bool:
    return any("JSON schema" in str(m.get("content")) for m in messages)


# -- OpenAI-compatible: response_format beside the tools ---------------------------------------


def test_openai_sends_the_json_schema_response_format_with_the_tools_on_every_turn(server):
    _serve(server, OPENAI, SchemaModel([OSLO], [LOOKUP_OSLO]))
    assert _run(_agent(OPENAI, server)) == [OSLO]
    tool_turn, final_turn = _bodies(server)
    for body in (tool_turn, final_turn):
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Answer", "schema": SCHEMA},
        }
        assert [t["function"]["name"] for t in body["tools"]] == ["add", "lookup"]
        assert not _asked_in_prompt(body["messages"])  # the schema travels once, natively
    assert [m["role"] for m in final_turn["messages"]] == ["user", "assistant", "tool"]


def test_openai_without_tools_sends_the_response_format_alone(server):
    _serve(server, OPENAI, SchemaModel([OSLO]))
    assert _run(_agent(OPENAI, server, tools=False)) == [OSLO]
    [body] = _bodies(server)
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "tools" not in body


# Where each protocol carries the schema natively, and the text of a message's content.
NATIVE_FIELD = {
    "openai-compatible": lambda body: body["response_format"],
    "anthropic": lambda body: (body["tool_choice"], body["tools"]),
    "ollama": lambda body: body["format"],
}


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


@pytest.mark.parametrize("wire", [OPENAI, ANTHROPIC, OLLAMA], ids=lambda wire: wire.name)
def test_a_native_answer_not_matching_goes_back_with_the_error_still_asked_natively(server, wire):
    _serve(server, wire, SchemaModel([{"city": "Oslo"}, OSLO]))
    assert _run(_agent(wire, server, tools=False)) == [OSLO]
    first, retry = _bodies(server)
    native = NATIVE_FIELD[wire.name]
    assert native(retry) == native(first)
    answer, correction = retry["messages"][-2:]
    assert answer["role"] == "assistant"
    assert json.loads(_text(answer)) == {"city": "Oslo"}
    assert correction["role"] == "user"
    assert "- total: Field required" in _text(correction)


def test_a_native_answer_still_not_matching_fails_quoting_it(server):
    _serve(server, OPENAI, SchemaModel([{"city": "Oslo"}]))
    agent = _agent(OPENAI, server, tools=False, output_retries=0)
    with pytest.raises(ActionError) as info:
        run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    failure = info.value.failure
    assert failure.error_type == "OutputValidationError"
    assert failure.message.endswith('- total: Field required\nthe answer was:\n{"city": "Oslo"}')


def test_prompt_mode_puts_the_schema_in_the_one_system_message_a_strict_template_accepts(
    server,
):
    # llama.cpp-like: any system message but the first is refused ("roles must alternate").
    _serve(server, OPENAI, SchemaModel([OSLO], [LOOKUP_OSLO], strict_roles=True))
    agent = _agent(OPENAI, server, structured_output_mode="prompt")
    assert _run(agent) == [OSLO]
    for body in _bodies(server):
        assert "response_format" not in body
        system, *rest = body["messages"]
        assert system["role"] == "system" and _asked_in_prompt([system])
        assert json.dumps(SCHEMA, sort_keys=True) in system["content"]
        assert all(m["role"] != "system" for m in rest)


def test_a_server_refusing_the_json_schema_format_fails_naming_the_setting_that_helps(server):
    # llama-cpp-python's server: response_format json_schema is a validation error (HTTP 500).
    _serve(server, OPENAI, SchemaModel([OSLO], takes_json_schema=False))
    with pytest.raises(ActionError) as info:
        run_local(_agent(OPENAI, server, tools=False), [{"id": 1, "city": "Oslo"}], key="id")
    failure = info.value.failure
    assert (failure.action, failure.error_type) == ("chat_action", "ModelCallError")
    assert "Input should be 'text' or 'json_object'" in failure.message
    assert failure.message.endswith(
        "; the server refused the JSON-schema field sent for a structured answer: set "
        "structured_output_mode: prompt on the connection or the chat model to ask in the prompt "
        "instead"
    )
    server.requests.clear()
    assert _run(_agent(OPENAI, server, tools=False, structured_output_mode="prompt")) == [OSLO]


def test_a_setup_overrides_its_connections_structured_output(server):
    _serve(server, OPENAI, SchemaModel([OSLO]))
    agent = _agent(
        OPENAI,
        server,
        tools=False,
        setup={"structured_output_mode": "native"},
        structured_output_mode="prompt",
    )
    assert _run(agent) == [OSLO]
    [body] = _bodies(server)
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert not _asked_in_prompt(body["messages"])


def test_without_the_schema_in_the_request_or_prompt_the_model_answers_prose():
    # The fake's own check: it answers JSON only when asked, so the tests above can fail.
    reply = json.loads(SchemaModel([OSLO]).openai(_plain_request()).payload())
    assert reply["choices"][0]["message"]["content"] == PROSE


def _plain_request() -> RecordedRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "Oslo"}]}
    return RecordedRequest("POST", "/v1/chat/completions", {}, json.dumps(body).encode())


# -- Anthropic: the answer is a tool --------------------------------------------------------


def test_anthropic_without_tools_forces_the_answer_tool(server):
    _serve(server, ANTHROPIC, SchemaModel([OSLO]))
    assert _run(_agent(ANTHROPIC, server, tools=False)) == [OSLO]
    [body] = _bodies(server)
    assert body["tool_choice"] == {"type": "tool", "name": "respond_with_Answer"}
    [tool] = body["tools"]
    assert tool["input_schema"] == SCHEMA
    assert "system" not in body  # nothing asked in the prompt


def test_anthropic_with_tools_offers_the_answer_tool_among_them_under_tool_choice_any(server):
    # Forcing the answer tool would keep the model from looking anything up: it must choose
    # one of the tools each turn, and the answer tool's call ends the run.
    _serve(server, ANTHROPIC, SchemaModel([OSLO], [LOOKUP_OSLO]))
    assert _run(_agent(ANTHROPIC, server)) == [OSLO]
    tool_turn, final_turn = _bodies(server)
    for body in (tool_turn, final_turn):
        assert body["tool_choice"] == {"type": "any"}
        assert [t["name"] for t in body["tools"]] == ["add", "lookup", "respond_with_Answer"]
    assert final_turn["messages"][-1]["content"][0]["type"] == "tool_result"


def test_anthropic_answer_beside_a_tool_call_leaves_a_conversation_the_api_accepts(server):
    # The model calls lookup and the answer tool in one turn: the tool runs, and the next
    # request must still pair every tool_use with a tool_result (the fake refuses it otherwise).
    both = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_b", "name": "respond_with_Answer", "input": OSLO},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    server.enqueue(ScriptedResponse(body=both))
    _serve(server, ANTHROPIC, SchemaModel([OSLO]))
    assert _run(_agent(ANTHROPIC, server)) == [OSLO]
    _, second = _bodies(server)
    assistant = second["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert json.loads(assistant["content"][0]["text"]) == OSLO


def test_anthropic_prompt_mode_asks_in_the_system_prompt_without_tool_choice(server):
    _serve(server, ANTHROPIC, SchemaModel([OSLO], [LOOKUP_OSLO]))
    assert _run(_agent(ANTHROPIC, server, structured_output_mode="prompt")) == [OSLO]
    for body in _bodies(server):
        assert "tool_choice" not in body
        assert "JSON schema" in body["system"]
        assert [t["name"] for t in body["tools"]] == ["add", "lookup"]


# -- Ollama: format, unless tools are offered ----------------------------------------------


def test_ollama_without_tools_sends_the_schema_as_format(server):
    _serve(server, OLLAMA, SchemaModel([OSLO]))
    assert _run(_agent(OLLAMA, server, tools=False)) == [OSLO]
    [body] = _bodies(server)
    assert body["format"] == SCHEMA
    assert not _asked_in_prompt(body["messages"])


def test_ollama_with_tools_asks_by_the_prompt_since_format_would_silence_the_tools(server):
    _serve(server, OLLAMA, SchemaModel([OSLO], [LOOKUP_OSLO]))
    assert _run(_agent(OLLAMA, server)) == [OSLO]
    tool_turn, final_turn = _bodies(server)
    for body in (tool_turn, final_turn):
        assert "format" not in body
        assert body["messages"][0]["role"] == "system"
        assert _asked_in_prompt(body["messages"][:1])
    assert [m["role"] for m in final_turn["messages"]] == ["system", "user", "assistant", "tool"]


def test_ollama_native_with_tools_when_asked_for_sends_format_and_the_tools_go_unused(server):
    # What auto avoids: a self-hosted Ollama lets format win, so lookup is never called.
    _serve(server, OLLAMA, SchemaModel([OSLO], [LOOKUP_OSLO]))
    assert _run(_agent(OLLAMA, server, structured_output_mode="native")) == [OSLO]
    [body] = _bodies(server)
    assert body["format"] == SCHEMA
    assert [t["function"]["name"] for t in body["tools"]] == ["add", "lookup"]


# -- replay: a call recorded with the schema in the prompt is not the native one ------------


def test_a_run_recorded_asking_by_the_prompt_diverges_when_replayed_asking_natively(server):
    _serve(server, OPENAI, SchemaModel([OSLO]))
    recorded = compile_agent(_agent(OPENAI, server, tools=False, structured_output_mode="prompt"))
    store = InMemoryActionStateStore()
    runner = DurableCalls(store, agent=recorded.name)
    run_local(recorded, [{"id": 1, "city": "Oslo"}], key="id", call_runner=runner)
    store.flush()
    runs = group_runs(read_store(store))
    assert replay_runs(recorded, runs).summary() == "1 runs: 1 same outputs; 0 calls made"

    native = compile_agent(_agent(OPENAI, server, tools=False))
    report = replay_runs(native, runs)
    [run] = report.runs
    assert run.verdict is Verdict.DIVERGED and run.live_calls == 0
    assert run.divergence is not None and run.divergence.position == 0
    text = run.describe()
    # What changed, shown: the instruction left the messages, the schema is an argument.
    assert '-    "role": "system",' in text
    assert '+  "response_schema": {' in text
    assert len(server.requests) == 1  # the replays called no model


# -- YAML: the setting on a connection and on a chat model ------------------------------------

YAML = """
connections:
  llm: {{class: openai, arguments: {{base_url: "{url}/v1", structured_output_mode: prompt,
                                    retry: {{max_attempts: 1}}}}}}
agents:
  - name: yaml_structured
    react: {{chat_model: chat, prompt: ask, output_schema: tests.sample_agents:Answer}}
    prompts: {{ask: "{{city}}"}}
    tools: {{lookup: {{function: tests.sample_agents:lookup}}}}
    chat_models:
      chat: {{connection: llm, model: m, tools: [lookup]{setup}}}
"""


@pytest.mark.parametrize("native", [False, True], ids=["connection-prompt", "setup-native"])
def test_yaml_sets_structured_output_on_the_connection_or_the_chat_model(server, native):
    _serve(server, OPENAI, SchemaModel([OSLO], [LOOKUP_OSLO], strict_roles=True))
    setup = ", structured_output_mode: native" if native else ""
    text = YAML.format(url=server.url, setup=setup)
    [agent] = load_yaml_agents("agents.yaml", text=text).values()
    assert _run(agent) == [OSLO]
    for body in _bodies(server):
        assert ("response_format" in body) is native
        assert _asked_in_prompt(body["messages"]) is not native
