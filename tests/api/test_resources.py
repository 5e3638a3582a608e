from typing import Any

import pytest
from pydantic import ValidationError

from flink_agents.api import Agent, ResourceDescriptor, ResourceType
from flink_agents.api.resources import UnresolvedSecretError, resolve_env_references
from flink_agents.providers.http_subagent import HttpSubagent
from flink_agents.providers.scripted import ScriptedChatModelConnection


def test_descriptor_names_class_by_module_and_qualname():
    descriptor = ResourceDescriptor.of(ScriptedChatModelConnection, name="x", turns=[])
    assert descriptor.class_path == "flink_agents.providers.scripted:ScriptedChatModelConnection"
    assert descriptor.model_dump(by_alias=True)["class"] == descriptor.class_path


def test_literal_secret_values_are_refused():
    with pytest.raises(ValidationError, match="/api_key"):
        ResourceDescriptor.of("a.b:C", api_key="sk-123")
    with pytest.raises(ValidationError, match="/auth/token"):
        ResourceDescriptor.of("a.b:C", auth={"token": "abc"})


def test_a_refused_literal_secret_is_not_shown_in_the_error():
    with pytest.raises(ValidationError) as info:
        ResourceDescriptor.of("a.b:C", api_key="sk-live-abcdef123456")
    assert "/api_key hold a literal value" in str(info.value)
    assert "sk-live" not in str(info.value)


def test_env_references_are_kept_in_descriptor_and_resolved_at_open():
    descriptor = ResourceDescriptor.of(
        "a.b:C", api_key={"env": "MY_KEY"}, headers={"x": "${env:OTHER}"}, plain="${env:not valid}"
    )
    resolved = resolve_env_references(descriptor.arguments, {"MY_KEY": "k1", "OTHER": "o"})
    assert resolved == {"api_key": "k1", "headers": {"x": "o"}, "plain": "${env:not valid}"}
    with pytest.raises(UnresolvedSecretError, match="MY_KEY"):
        resolve_env_references(descriptor.arguments, {})


def test_agent_refuses_duplicate_resource_names():
    agent = Agent(name="a")
    agent.add_prompt("p", "hi")
    with pytest.raises(ValueError, match="already has a resource named 'p'"):
        agent.add_resource("p", ResourceType.PROMPT, "flink_agents.api.prompts:Prompt", text="x")


def test_a_resource_finds_its_siblings_only_once_bound_and_copies_keep_the_binding():
    connection = ScriptedChatModelConnection(turns=[{"content": "hi"}])
    with pytest.raises(RuntimeError, match="not bound to a resource registry"):
        connection.get_resource("other", ResourceType.PROMPT)
    asked: list[tuple[str, ResourceType]] = []

    def lookup(name: str, resource_type: ResourceType) -> ScriptedChatModelConnection:
        asked.append((name, resource_type))
        return connection

    connection.bind(lookup)
    assert connection.get_resource("other", ResourceType.PROMPT) is connection
    assert connection.model_copy().get_resource("again", ResourceType.TOOL) is connection
    assert asked == [("other", ResourceType.PROMPT), ("again", ResourceType.TOOL)]


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"headers": {"Authorization": "Bearer abcdef123456"}}, "/headers/Authorization"),
        ({"headers": {"x-api-key": "abcdef"}}, "/headers/x-api-key"),
        ({"headers": {"X-Custom": "Bearer abcdef123456"}}, "/headers/X-Custom"),
        ({"auth": "user:pw"}, "/auth"),
        ({"bearer": "abc"}, "/bearer"),
        ({"credentials": "abc"}, "/credentials"),
        ({"private_key": "-----BEGIN"}, "/private_key"),
        ({"endpoint": "sk-proj-0123456789abcdefghij"}, "/endpoint"),
        ({"url": "https://api.test/v1?key=AIza0123456789"}, "/url"),
        ({"args": ["--token", "ghp_0123456789abcdefghij0123"]}, "/args/1"),
    ],
)
def test_a_literal_credential_is_refused_by_name_or_by_shape(
    arguments: dict[str, Any], path: str
) -> None:
    with pytest.raises(ValidationError, match=f"{path} hold a literal value"):
        ResourceDescriptor.of("a.b:C", **arguments)


def test_ordinary_literals_and_references_under_headers_are_accepted() -> None:
    ResourceDescriptor.of(
        "a.b:C",
        author="Ann",
        headers={"Content-Type": "application/json", "Authorization": "${env:TOKEN}"},
        url="https://api.test/v1?q=weather",
    )


def test_an_http_subagent_refuses_a_literal_authorization_header() -> None:
    agent = Agent(name="a")
    with pytest.raises(ValidationError, match="/headers/Authorization"):
        agent.add_resource(
            "billing",
            ResourceType.AGENT,
            HttpSubagent,
            url="http://billing/agent",
            description="d",
            headers={"Authorization": "Bearer abcdef123456"},
        )
