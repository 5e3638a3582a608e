"""Every HTTP provider over its real protocol, against local fake servers."""

from __future__ import annotations

import asyncio
import pickle
import socket
import time

import pytest
from pydantic import BaseModel

from flink_agents.api.attempts import CountedAttempts, tracking_attempts
from flink_agents.api.chat import ChatMessage, ChatRequest, ToolSpec
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.providers import StructuredOutputError, chat_structured
from flink_agents.providers._http_errors import ModelCallError
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import (
    ANTHROPIC,
    ANTHROPIC_KEY_VAR,
    AZURE_OPENAI,
    BEDROCK,
    GEMINI_KEY_VAR,
    OPENAI,
    OPENAI_RESPONSES,
    PROVIDERS,
    Provider,
)

LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


class Weather(BaseModel):
    city: str
    celsius: float


@pytest.fixture(autouse=True)
def _anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")
    monkeypatch.setenv(GEMINI_KEY_VAR, "test-key")


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param


def ask(text: str = "hi", **fields: object) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], **fields)


def test_tool_call_round_trip(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(
        ScriptedResponse(body=provider.tool_call("call_1", "lookup", {"word": "flink"})),
        ScriptedResponse(body=provider.text("Flink is a stream processor.")),
    )
    connection = provider.connect(server.url)
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What is flink?"),
    ]

    async def converse() -> tuple[ChatMessage, ChatMessage]:
        first = await connection.chat(ChatRequest(messages=messages, tools=[LOOKUP]))
        (call,) = first.tool_calls
        result = ChatMessage(role="tool", content="a stream processor", tool_call_id=call.id)
        history = [*messages, first, result]
        return first, await connection.chat(ChatRequest(messages=history, tools=[LOOKUP]))

    first, final = asyncio.run(converse())

    assert first.tool_calls[0].name == "lookup"
    assert first.tool_calls[0].arguments == {"word": "flink"}
    assert final.content == "Flink is a stream processor."
    assert final.tool_calls == []
    sent_first, sent_second = (r.json() for r in server.requests)
    assert all(r.route == provider.path for r in server.requests)
    assert provider.offered_tools(sent_first) == ["lookup"]
    call = first.tool_calls[0]
    assert provider.tool_result(sent_second) == (
        provider.result_reference(call.id, call.name),
        "a stream processor",
    )
    assert "Be brief." in str(sent_first)  # the system prompt reaches the server


def test_setup_fields_reach_the_wire(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(body=provider.text("ok")))
    connection = provider.connect(server.url)
    setup = ChatModelSetup(connection="conn", model="setup-model", temperature=0.3, max_tokens=42)
    setup.bind(lambda name, kind: connection)
    reply = asyncio.run(setup.chat([ChatMessage(role="user", content="hi")]))
    assert reply.content == "ok"
    sent = server.requests[0].json()
    assert provider.sent_model(server.requests[0]) == "setup-model"
    assert "0.3" in str(sent)
    assert "42" in str(sent)


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured_then_success(
    provider: Provider, server: FakeModelServer, status: int
) -> None:
    server.enqueue(
        ScriptedResponse(status=status, body={"error": "later"}, headers={"Retry-After": "0.3"}),
        ScriptedResponse(body=provider.text("done")),
    )
    connection = provider.connect(server.url)
    started = time.monotonic()
    reply = asyncio.run(connection.chat(ask()))
    assert reply.content == "done"
    assert server.request_count == 2
    assert time.monotonic() - started >= 0.3  # waited as told, not the 1 ms backoff
    assert connection.stats.attempts == 2
    assert connection.stats.failed_calls == 0


def test_server_errors_exhaust_the_budget(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(
        *[ScriptedResponse(status=500, body={"error": "boom"}, headers={"x-request-id": "r-7"})]
        * 3,
        ScriptedResponse(body=provider.text("too late")),
    )
    connection = provider.connect(server.url)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    error = caught.value
    assert server.request_count == 3
    assert (error.provider, error.model, error.ordinal) == (provider.name, "m", 1)
    assert (error.attempts, error.status, error.request_id) == (3, 500, "r-7")
    assert "boom" in str(error)
    assert provider.name in str(error)
    assert connection.stats.failed_calls == 1
    restored = pickle.loads(pickle.dumps(error))  # the durable layer records failures
    assert str(restored) == str(error)


def test_restored_tracker_leaves_one_attempt(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(*[ScriptedResponse(status=503, body={"error": "unavailable"})] * 3)
    tracker = CountedAttempts(attempts=2, failed_attempts=2)  # two failed before the restart
    with pytest.raises(ModelCallError) as caught, tracking_attempts(tracker):
        asyncio.run(provider.connect(server.url).chat(ask()))
    assert server.request_count == 1
    assert (tracker.attempts, tracker.failed_attempts) == (3, 3)
    assert caught.value.attempts == 3


def test_spent_budget_sends_nothing(provider: Provider, server: FakeModelServer) -> None:
    with (
        pytest.raises(ModelCallError, match="spent before a restart"),
        tracking_attempts(CountedAttempts(attempts=3, failed_attempts=3)),
    ):
        asyncio.run(provider.connect(server.url).chat(ask()))
    assert server.request_count == 0


def test_attempts_ended_by_restarts_leave_the_failure_budget_whole(
    provider: Provider, server: FakeModelServer
) -> None:
    """Restarts caused elsewhere (a failing checkpoint, a lost TaskManager) ended three attempts
    in flight; one attempt failed: two more may fail before the call does."""
    server.enqueue(*[ScriptedResponse(status=503, body={"error": "unavailable"})] * 3)
    tracker = CountedAttempts(attempts=4, failed_attempts=1)
    with pytest.raises(ModelCallError, match=r"budget of 3 spent"), tracking_attempts(tracker):
        asyncio.run(provider.connect(server.url).chat(ask()))
    assert server.request_count == 2
    assert (tracker.attempts, tracker.failed_attempts) == (6, 3)


@pytest.mark.parametrize(("interrupted", "sent"), [(10, 1), (11, 0)])
def test_a_call_ended_by_more_restarts_than_allowed_is_not_sent_again(
    provider: Provider, server: FakeModelServer, interrupted: int, sent: int
) -> None:
    """``max_interrupted_attempts`` (10 by default) bounds a call that brings its process down
    every time."""
    server.enqueue(ScriptedResponse(body=provider.text("ok")))
    tracker = CountedAttempts(attempts=interrupted)
    with tracking_attempts(tracker):
        if sent:
            asyncio.run(provider.connect(server.url).chat(ask()))
        else:
            with pytest.raises(ModelCallError, match=r"11 attempts were ended by restarts"):
                asyncio.run(provider.connect(server.url).chat(ask()))
    assert server.request_count == sent


def test_tracker_records_each_attempt_and_each_failure(
    provider: Provider, server: FakeModelServer
) -> None:
    server.enqueue(
        ScriptedResponse(status=502, body={"error": "bad gateway"}),
        ScriptedResponse(body=provider.text("ok")),
    )
    tracker = CountedAttempts()
    with tracking_attempts(tracker):
        asyncio.run(provider.connect(server.url).chat(ask()))
    assert (tracker.attempts, tracker.failed_attempts) == (2, 1)


def test_client_errors_are_not_retried(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(status=400, body={"error": "bad request"}))
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(provider.connect(server.url).chat(ask()))
    assert server.request_count == 1
    assert caught.value.status == 400


def test_malformed_body_names_provider_and_call(
    provider: Provider, server: FakeModelServer
) -> None:
    server.enqueue(ScriptedResponse(body=b"{this is not json"))
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(provider.connect(server.url).chat(ask()))
    message = str(caught.value)
    assert "malformed response body" in message
    assert f"{provider.name} call #1 to model 'm'" in message
    assert server.request_count == 1  # a broken protocol is not retried


def test_wrong_shape_body_is_malformed(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(body={"unexpected": True}))
    with pytest.raises(ModelCallError, match="malformed response body"):
        asyncio.run(provider.connect(server.url).chat(ask()))


@pytest.mark.parametrize(
    "sdk_provider", [OPENAI, ANTHROPIC, AZURE_OPENAI, OPENAI_RESPONSES], ids=lambda p: p.name
)
def test_an_unexpected_body_is_quoted_in_the_error(
    sdk_provider: Provider, server: FakeModelServer
) -> None:
    """The SDK providers parse whatever came back; the error says what it was."""
    page = "<html>502 Bad Gateway</html>"
    server.enqueue(
        ScriptedResponse(body=page, headers={"content-type": "text/html"}),
        ScriptedResponse(body={"unexpected": True}),
    )
    connection = sdk_provider.connect(server.url)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert f"the server sent text, not JSON: {page!r}" in str(caught.value)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert 'the server sent {"unexpected": true}' in str(caught.value)


@pytest.mark.parametrize(
    "httpx_provider", [p for p in PROVIDERS if p is not BEDROCK], ids=lambda p: p.name
)
def test_a_refused_connection_names_the_endpoint_once(httpx_provider: Provider) -> None:
    """(Bedrock's botocore transport words it its own way: test_bedrock.py.)"""
    provider = httpx_provider
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(provider.connect(url, retry={"max_attempts": 1}).chat(ask()))
    message = str(caught.value)
    assert f"request failed at {url}{provider.path}: " in message
    assert message.count("All connection attempts failed") == 1


def test_truncated_body_is_a_transport_error(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(*[ScriptedResponse(body=provider.text("cut short"), truncate=True)] * 2)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(provider.connect(server.url, retry={"max_attempts": 2}).chat(ask()))
    assert f"{provider.name} call #1" in str(caught.value)
    assert "request failed" in str(caught.value)
    assert caught.value.attempts == 2  # transport failures are retried


def test_timeout_is_retried(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(
        ScriptedResponse(body=provider.text("slow"), delay_seconds=5.0),
        ScriptedResponse(body=provider.text("fast")),
    )
    # 1 s, not less: on a loaded machine the fast attempt alone may take a few hundred ms.
    connection = provider.connect(server.url, timeout_seconds=1.0)
    assert asyncio.run(connection.chat(ask())).content == "fast"
    assert connection.stats.attempts == 2


def test_unoffered_tool_is_returned_as_a_tool_call(
    provider: Provider, server: FakeModelServer
) -> None:
    server.enqueue(ScriptedResponse(body=provider.tool_call("call_9", "subagent_x", {"q": 1})))
    reply = asyncio.run(provider.connect(server.url).chat(ask(tools=[LOOKUP])))
    (call,) = reply.tool_calls
    assert call.name == "subagent_x"
    assert call.arguments == {"q": 1}


def test_structured_output(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(body=provider.structured({"city": "Oslo", "celsius": 4.5})))
    weather = asyncio.run(chat_structured(provider.connect(server.url), ask(), Weather))
    assert weather == Weather(city="Oslo", celsius=4.5)
    assert "celsius" in str(server.requests[0].json())  # the schema was sent


def test_structured_output_that_does_not_match(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(body=provider.structured({"city": "Oslo"})))
    with pytest.raises(StructuredOutputError, match="celsius"):
        asyncio.run(chat_structured(provider.connect(server.url), ask(), Weather))


def test_usage_is_reported_and_counted(provider: Provider, server: FakeModelServer) -> None:
    server.enqueue(*[ScriptedResponse(body=provider.text("ok"))] * 2)
    connection = provider.connect(server.url)

    async def twice() -> ChatMessage:
        await connection.chat(ask())
        return await connection.chat(ask())

    reply = asyncio.run(twice())
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (3, 5)
    assert (connection.stats.calls, connection.stats.input_tokens) == (2, 6)
    assert connection.stats.output_tokens == 10


def test_connection_serves_successive_event_loops(
    provider: Provider, server: FakeModelServer
) -> None:
    server.enqueue(*[ScriptedResponse(body=provider.text(f"reply {i}")) for i in range(2)])
    connection = provider.connect(server.url)
    assert asyncio.run(connection.chat(ask())).content == "reply 0"
    assert asyncio.run(connection.chat(ask())).content == "reply 1"


SCHEMA_HINT = "set structured_output_mode: prompt on the connection or the chat model"


def test_a_refused_schema_field_names_the_setting_only_when_a_schema_was_sent(
    server: FakeModelServer,
) -> None:
    refusal = ScriptedResponse(
        status=400, body={"error": {"message": "Invalid 'response_format': json_schema"}}
    )
    unrelated = ScriptedResponse(status=400, body={"error": {"message": "model not found"}})
    server.enqueue(refusal, unrelated, refusal)
    connection = OPENAI.connect(server.url)
    with pytest.raises(ModelCallError) as refused:
        asyncio.run(chat_structured(connection, ask(), Weather))
    assert str(refused.value).endswith(SCHEMA_HINT + " to ask in the prompt instead")
    assert (refused.value.status, refused.value.attempts) == (400, 1)
    with pytest.raises(ModelCallError) as other:
        asyncio.run(chat_structured(connection, ask(), Weather))
    assert SCHEMA_HINT not in str(other.value)
    with pytest.raises(ModelCallError) as without_schema:
        asyncio.run(connection.chat(ask()))
    assert SCHEMA_HINT not in str(without_schema.value)
