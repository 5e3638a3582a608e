"""Azure OpenAI against a local server that answers as an Azure OpenAI resource does: the
deployment in the path, ``api-version`` required, ``api-key`` or an Entra ID bearer token, Azure's
error bodies and the content-filter annotations on every reply."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.refs import UnresolvableReference
from flink_agents.api.resources import ResourceDescriptor
from flink_agents.providers._connection import MissingCredentialError
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.azure_openai import (
    DEFAULT_API_VERSION,
    AzureOpenAIChatModelConnection,
)
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    ScriptedResponse,
    openai_reply,
)
from tests.providers.providers import ENTRA_TOKEN, FAST_RETRY
from tests.providers.test_providers import LOOKUP

KEY_VAR = "FA_TEST_AZURE_KEY"
TOKEN_VAR = "FA_TEST_AZURE_TOKEN"
KEY = "azure-SENTINEL-key-42"
DEPLOYMENT = "gpt4o-prod"
FILTERS = {
    severity: {"filtered": False, "severity": "safe"}
    for severity in ("hate", "self_harm", "sexual", "violence")
}


def _error(status: int, code: str, message: str) -> ScriptedResponse:
    return ScriptedResponse(status=status, body={"error": {"code": code, "message": message}})


def azure_resource(request: RecordedRequest) -> ScriptedResponse:
    """Answers as an Azure OpenAI resource with one deployment, ``DEPLOYMENT``."""
    if "api-version" not in request.query:
        return _error(404, "404", "Resource not found")
    if request.headers.get("api-key") != KEY and (
        request.headers.get("authorization") != f"Bearer {ENTRA_TOKEN}"
    ):
        return _error(
            401,
            "401",
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
            "provide a valid key for an active subscription and use a correct regional API "
            "endpoint for your resource.",
        )
    if request.route != f"/openai/deployments/{DEPLOYMENT}/chat/completions":
        return _error(
            404,
            "DeploymentNotFound",
            "The API deployment for this resource does not exist. If you created the deployment "
            "within the last 5 minutes, please wait a moment and try again.",
        )
    body = request.json()
    if body["messages"][-1]["role"] == "tool":
        reply = openai_reply(f"found: {body['messages'][-1]['content']}")
    elif body.get("tools"):
        reply = openai_reply(None, [("call_az1", "lookup", {"word": "flink"})])
    else:
        reply = openai_reply("hello from azure")
    # Azure annotates every reply with its content filters' verdicts.
    reply["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": FILTERS}]
    reply["choices"][0]["content_filter_results"] = FILTERS
    return ScriptedResponse(body=reply)


@pytest.fixture
def resource() -> Any:
    with FakeModelServer(fallback=azure_resource) as server:
        yield server


@pytest.fixture(autouse=True)
def _variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv(TOKEN_VAR, ENTRA_TOKEN)


def connect(server: FakeModelServer, **arguments: Any) -> AzureOpenAIChatModelConnection:
    credential = (
        {}
        if {"entra_token", "entra_credential"} & set(arguments)
        else {"api_key": {"env": KEY_VAR}}
    )
    return AzureOpenAIChatModelConnection(
        base_url=server.url, retry=FAST_RETRY, **credential, **arguments
    )


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], **fields)


def test_tool_call_round_trip_on_a_deployment(resource: FakeModelServer) -> None:
    connection = connect(resource, deployment=DEPLOYMENT)
    question = [ChatMessage(role="user", content="What is flink?")]

    async def converse() -> tuple[ChatMessage, ChatMessage]:
        first = await connection.chat(ChatRequest(messages=question, tools=[LOOKUP]))
        (call,) = first.tool_calls
        result = ChatMessage(role="tool", content="a stream processor", tool_call_id=call.id)
        final = await connection.chat(
            ChatRequest(messages=[*question, first, result], tools=[LOOKUP])
        )
        return first, final

    first, final = asyncio.run(converse())

    assert (first.tool_calls[0].id, first.tool_calls[0].arguments) == (
        "call_az1",
        {"word": "flink"},
    )
    assert final.content == "found: a stream processor"
    for sent in resource.requests:
        assert sent.route == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
        assert sent.query == {"api-version": DEFAULT_API_VERSION}
        assert sent.headers["api-key"] == KEY
        assert "authorization" not in sent.headers
    assert resource.requests[0].json()["model"] == DEPLOYMENT  # the label names the deployment
    assert connection.stats.calls == 2


def test_without_a_deployment_the_model_names_it(resource: FakeModelServer) -> None:
    connection = connect(resource, api_version="2025-01-01-preview")
    reply = asyncio.run(connection.chat(ask(model=DEPLOYMENT)))
    assert reply.content == "hello from azure"
    (sent,) = resource.requests
    assert sent.route == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert sent.query == {"api-version": "2025-01-01-preview"}


@pytest.mark.parametrize(
    "credential",
    [
        {"entra_token": {"env": TOKEN_VAR}},
        {"entra_credential": "tests.providers.providers:entra_token"},
    ],
    ids=["entra_token", "entra_credential"],
)
def test_an_entra_id_token_is_a_bearer_token_and_no_api_key(
    resource: FakeModelServer, credential: dict[str, Any]
) -> None:
    connection = connect(resource, deployment=DEPLOYMENT, **credential)
    connection.open()
    assert asyncio.run(connection.chat(ask())).content == "hello from azure"
    (sent,) = resource.requests
    assert sent.headers["authorization"] == f"Bearer {ENTRA_TOKEN}"
    assert "api-key" not in sent.headers


def test_an_unknown_deployment_is_a_final_error_naming_it(resource: FakeModelServer) -> None:
    connection = connect(resource, deployment="gpt4o-typo")
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    error = caught.value
    assert resource.request_count == 1  # a 404 is not retried
    assert (error.status, error.provider, error.model) == (404, "azure-openai", "gpt4o-typo")
    assert "The API deployment for this resource does not exist" in str(error)


def test_a_wrong_key_is_a_401_that_never_shows_the_key(
    resource: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, "azure-SENTINEL-wrong-key")
    connection = connect(resource, deployment=DEPLOYMENT)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert caught.value.status == 401
    assert "Access denied" in str(caught.value)
    assert "SENTINEL" not in str(caught.value) + repr(caught.value) + repr(connection)
    assert "SENTINEL" not in connection.model_dump_json()


def test_no_credential_fails_at_open_and_the_client_never_reads_azure_variables(
    resource: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)  # the official client would pick this up
    connection = AzureOpenAIChatModelConnection(base_url=resource.url, deployment=DEPLOYMENT)
    with pytest.raises(MissingCredentialError, match="AZURE_OPENAI_API_KEY"):
        connection.open()
    with pytest.raises(MissingCredentialError):
        asyncio.run(connection.chat(ask()))
    assert resource.request_count == 0


def test_configuration_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="needs base_url: the resource endpoint"):
        AzureOpenAIChatModelConnection(deployment=DEPLOYMENT, api_key=KEY)
    with pytest.raises(ValueError, match="one credential, got api_key and entra_credential"):
        AzureOpenAIChatModelConnection(
            base_url="https://x.openai.azure.com",
            api_key=KEY,
            entra_credential="tests.providers.providers:entra_token",
        )
    missing = AzureOpenAIChatModelConnection(
        base_url="https://x.openai.azure.com", entra_credential="tests.providers.providers:nope"
    )
    with pytest.raises(UnresolvableReference, match="nope"):
        missing.open()


def test_the_reply_content_filter_annotations_are_read_past(resource: FakeModelServer) -> None:
    reply = asyncio.run(connect(resource, deployment=DEPLOYMENT).chat(ask()))
    assert reply.content == "hello from azure"
    assert reply.usage is not None and reply.usage.output_tokens == 5


def test_a_literal_entra_token_is_refused_in_a_plan() -> None:
    with pytest.raises(ValueError, match="entra_token") as caught:
        ResourceDescriptor.of(AzureOpenAIChatModelConnection, entra_token="eyJ0-SENTINEL")
    assert "SENTINEL" not in str(caught.value)
