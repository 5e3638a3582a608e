"""Credentials: only environment references in plans, checked when a connection is opened."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import (
    ResourceType,
    UnresolvedSecretError,
    resolve_env_references,
)
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.errors import PlanValidationError
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.resolve import resolve_plan
from flink_agents.plan.yaml.loader import load_yaml_agents
from flink_agents.providers._connection import HttpChatModelConnection, MissingCredentialError
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.anthropic import AnthropicChatModelConnection
from flink_agents.runtime.resource_registry import ResourceRegistry
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import PROVIDERS, Provider

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "providers"
SENTINEL = "sk-SENTINEL-must-not-leak-42"
KEY_VAR = "FA_TEST_PROVIDER_KEY"

CLASSES = {
    "openai-compatible": "flink_agents.providers.openai_compatible:"
    "OpenAICompatibleChatModelConnection",
    "anthropic": "flink_agents.providers.anthropic:AnthropicChatModelConnection",
    "ollama": "flink_agents.providers.ollama:OllamaChatModelConnection",
    "azure-openai": "flink_agents.providers.azure_openai:AzureOpenAIChatModelConnection",
    "openai-responses": "flink_agents.providers.openai_responses:"
    "OpenAIResponsesChatModelConnection",
    "vllm": "flink_agents.providers.vllm:VllmChatModelConnection",
    "gemini": "flink_agents.providers.gemini:GeminiChatModelConnection",
}
"""The providers that take an ``api_key`` (Bedrock's credentials are AWS's: test_bedrock.py)."""


def agent_yaml(class_path: str) -> str:
    return f"""
agents:
  - name: assistant
    react: {{chat_model: model}}
    connections:
      conn:
        class: {class_path}
        arguments:
          base_url: http://127.0.0.1:9
          api_key: {{env: {KEY_VAR}}}
    chat_models:
      model: {{connection: conn, model: m, arguments: {{max_tokens: 64}}}}
"""


def compile_yaml(tmp_path: Path, class_path: str) -> AgentPlan:
    path = tmp_path / "agent.yaml"
    path.write_text(agent_yaml(class_path))
    (agent,) = load_yaml_agents(path).values()
    return compile_agent(agent)


def open_connection(plan: AgentPlan, name: str = "conn") -> HttpChatModelConnection:
    """What a worker does: resolve references, build the resource, open it."""
    declared = plan.resources[name]
    assert declared.type == ResourceType.CHAT_MODEL_CONNECTION
    connection_class = import_reference(declared.class_path)
    connection = connection_class.model_validate(resolve_env_references(declared.arguments))
    connection.open()
    return connection


@pytest.fixture(params=[p for p in PROVIDERS if p.name in CLASSES], ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param


def test_plan_holds_the_reference_not_the_secret(
    provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SENTINEL)
    plan = compile_yaml(tmp_path, CLASSES[provider.name])
    text = plan.to_json()
    assert SENTINEL not in text
    assert plan.resources["conn"].arguments["api_key"] == {"env": KEY_VAR}
    assert plan.resources["model"].arguments["max_tokens"] == 64


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_agents_compile_without_secrets(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "GEMINI_API_KEY",
    ):
        monkeypatch.setenv(variable, SENTINEL)
    agents = load_yaml_agents(example)
    assert agents
    for agent in agents.values():
        plan = compile_agent(agent)
        assert SENTINEL not in plan.to_json()
        connections = [
            name
            for name, r in plan.resources.items()
            if r.type == ResourceType.CHAT_MODEL_CONNECTION
        ]
        assert connections
        for name in connections:  # the arguments are the connection's, and it opens
            assert SENTINEL not in repr(open_connection(plan, name))


def test_opened_connection_uses_the_key_and_never_shows_it(
    provider: Provider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: FakeModelServer,
) -> None:
    monkeypatch.setenv(KEY_VAR, SENTINEL)
    connection = open_connection(compile_yaml(tmp_path, CLASSES[provider.name]))
    connection = connection.model_copy(update={"base_url": _base_url(provider, server)})
    assert SENTINEL not in repr(connection)
    assert SENTINEL not in str(connection.model_dump())
    assert SENTINEL not in connection.model_dump_json()

    server.enqueue(ScriptedResponse(status=401, body={"error": "who are you"}))
    request = ChatRequest(model="m", messages=[ChatMessage(role="user", content="hi")])
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(request))
    assert caught.value.status == 401
    assert SENTINEL in str(server.requests[0].headers)  # the key was sent...
    assert SENTINEL not in str(caught.value)  # ...but is not in the error
    assert SENTINEL not in repr(caught.value)


def _base_url(provider: Provider, server: FakeModelServer) -> str:
    return server.url + provider.base_path


def test_missing_variable_fails_at_open_naming_it(
    provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SENTINEL)
    plan = compile_yaml(tmp_path, CLASSES[provider.name])
    monkeypatch.delenv(KEY_VAR)
    with pytest.raises(UnresolvedSecretError, match=KEY_VAR) as caught:
        open_connection(plan)
    assert SENTINEL not in str(caught.value)


def test_missing_variable_fails_when_built_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)
    arguments: dict[str, Any] = {"api_key": {"env": KEY_VAR}}
    with pytest.raises(UnresolvedSecretError, match=KEY_VAR):
        AnthropicChatModelConnection(**arguments)


def test_anthropic_without_a_key_fails_at_open() -> None:
    connection = AnthropicChatModelConnection(model="m")
    with pytest.raises(MissingCredentialError, match="ANTHROPIC_API_KEY"):
        connection.open()


def test_literal_key_is_refused_in_a_plan(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(agent_yaml(CLASSES["anthropic"]).replace(f"{{env: {KEY_VAR}}}", SENTINEL))
    with pytest.raises(ValueError, match="api_key") as caught:
        load_yaml_agents(path)
    assert SENTINEL not in str(caught.value)


def test_runtime_registry_fails_at_start_naming_the_variable(
    provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SENTINEL)
    resolved = resolve_plan(compile_yaml(tmp_path, CLASSES[provider.name]))
    with pytest.raises(PlanValidationError, match=KEY_VAR) as caught:
        ResourceRegistry(resolved, environ={}).open_all()
    assert SENTINEL not in str(caught.value)
    registry = ResourceRegistry(resolved, environ={KEY_VAR: SENTINEL})
    registry.open_all()
    opened = registry.get("conn", ResourceType.CHAT_MODEL_CONNECTION)
    assert isinstance(opened, HttpChatModelConnection)
    assert opened.secret() == SENTINEL


HTTP_SUBAGENT_YAML = """\
agents:
  - name: caller
    react: {{chat_model: model, prompt: prompt}}
    prompts: {{prompt: "{{q}}"}}
    connections:
      scripted: {{class: scripted, arguments: {{turns: [{{content: hi}}]}}}}
    chat_models:
      model: {{connection: scripted, subagents: [billing]}}
    subagents:
      billing:
        class: flink_agents.providers.http_subagent:HttpSubagent
        arguments:
          url: "http://127.0.0.1:9/run"
          input_schema: {{type: object}}
          headers: {{{header}: "{value}"}}
"""


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Authorization", "Bearer sk-live-abcdef1234567890"),
        ("X-Upstream", "Bearer abcdef123456789"),
    ],
    ids=["by name", "by shape"],
)
def test_a_literal_credential_in_an_http_subagent_header_is_refused(
    tmp_path: Path, header: str, value: str
) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(HTTP_SUBAGENT_YAML.format(header=header, value=value))
    with pytest.raises(ValueError, match=f"/headers/{header} hold a literal value") as info:
        load_yaml_agents(agents)
    assert value not in str(info.value)
