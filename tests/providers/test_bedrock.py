"""AWS Bedrock's Converse API through boto3, against a local server that checks what Bedrock
checks: the SigV4 signature (recomputed from the test credentials), alternating roles, a
``toolConfig`` whenever the conversation holds tool blocks, one ``toolResult`` per ``toolUse``,
no blank text; and that answers with Bedrock's error shapes (``x-amzn-ErrorType``)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from flink_agents.providers._connection import MissingCredentialError
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.bedrock import BedrockChatModelConnection
from tests.providers.conftest import AWS_TEST_ACCESS_KEY_ID, AWS_TEST_SECRET_KEY
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    ScriptedResponse,
    bedrock_reply,
)
from tests.providers.providers import BEDROCK, FAST_RETRY

REGION = "us-east-1"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


def bedrock_error(status: int, kind: str, message: str) -> ScriptedResponse:
    """An error as Bedrock sends it: the type in a header, ``message`` in the body."""
    return ScriptedResponse(
        status=status,
        body={"message": message},
        headers={
            "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        },
    )


def signature_matches(request: RecordedRequest, url: str) -> bool:
    """Recompute the request's SigV4 signature from the test credentials."""
    authorization = request.headers.get("authorization", "")
    signed = re.search(r"SignedHeaders=([^,]+)", authorization)
    sent = re.search(r"Signature=([0-9a-f]+)", authorization)
    if signed is None or sent is None:
        return False
    names = signed.group(1).split(";")
    copy = AWSRequest(
        method="POST",
        url=url + request.path,
        data=request.body,
        headers={name: request.headers[name] for name in names},
    )
    copy.context["timestamp"] = request.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(AWS_TEST_ACCESS_KEY_ID, AWS_TEST_SECRET_KEY), "bedrock", REGION)
    expected = signer.signature(signer.string_to_sign(copy, signer.canonical_request(copy)), copy)
    return expected == sent.group(1)


def validation_error(body: dict[str, Any]) -> str | None:
    """What Bedrock's request validation says about ``body``, if anything."""
    messages = body["messages"]
    if not messages or messages[0]["role"] != "user":
        return "A conversation must start with a user message."
    has_tool_blocks = False
    for index, message in enumerate(messages):
        if index and message["role"] == messages[index - 1]["role"]:
            return "A conversation must alternate between user and assistant roles."
        for position, block in enumerate(message["content"]):
            if "text" in block and not block["text"].strip():
                where = f"messages.{index}.content.{position}"
                return f"The text field in the ContentBlock object at {where} is blank."
            has_tool_blocks |= "toolUse" in block or "toolResult" in block
        results = [b["toolResult"]["toolUseId"] for b in message["content"] if "toolResult" in b]
        if results:
            previous = messages[index - 1]["content"]
            uses = [b["toolUse"]["toolUseId"] for b in previous if "toolUse" in b]
            if sorted(results) != sorted(uses):
                return (
                    f"The number of toolResult blocks at messages.{index}.content exceeds the "
                    "number of toolUse blocks of previous turn."
                )
    if has_tool_blocks and "toolConfig" not in body:
        return (
            "The toolConfig field must be defined when using toolUse and toolResult content blocks."
        )
    return None


class FakeBedrock:
    """Answers like Bedrock: checks the signature and the request, then asks ``answer``."""

    def __init__(self, server: FakeModelServer, answers: list[dict[str, Any]]) -> None:
        self.server = server
        self.answers = answers
        server.fallback = self.respond

    def respond(self, request: RecordedRequest) -> ScriptedResponse:
        if "authorization" not in request.headers:
            return bedrock_error(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        if not signature_matches(request, self.server.url):
            return bedrock_error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        problem = validation_error(request.json())
        if problem is not None:
            return bedrock_error(400, "ValidationException", problem)
        return ScriptedResponse(body=self.answers.pop(0))


def connect(server: FakeModelServer, **overrides: Any) -> BedrockChatModelConnection:
    arguments: dict[str, Any] = {"model": MODEL, "retry": FAST_RETRY, **overrides}
    return BedrockChatModelConnection(base_url=server.url, region=REGION, **arguments)


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], **fields)


def test_a_signed_tool_round_trip_passes_bedrocks_checks(server: FakeModelServer) -> None:
    FakeBedrock(
        server,
        [
            bedrock_reply(
                "Let me look.",
                [
                    ("tooluse_1", "lookup", {"word": "flink"}),
                    ("tooluse_2", "lookup", {"word": "kafka"}),
                ],
            ),
            bedrock_reply("Both are stream tools."),
        ],
    )
    connection = connect(server, tool_choice="auto")
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What are flink and kafka?"),
    ]

    async def converse() -> tuple[ChatMessage, ChatMessage]:
        first = await connection.chat(ChatRequest(messages=messages, tools=[LOOKUP]))
        results = [
            ChatMessage(
                role="tool", content=f"about {call.arguments['word']}", tool_call_id=call.id
            )
            for call in first.tool_calls
        ]
        history = [*messages, first, *results]
        return first, await connection.chat(ChatRequest(messages=history, tools=[LOOKUP]))

    first, final = asyncio.run(converse())

    assert [c.id for c in first.tool_calls] == ["tooluse_1", "tooluse_2"]
    assert first.content == "Let me look."
    assert final.content == "Both are stream tools."
    assert [r.path for r in server.requests] == [f"/model/{MODEL.replace(':', '%3A')}/converse"] * 2
    sent = server.requests[1].json()
    assert sent["system"] == [{"text": "Be brief."}]
    assert sent["toolConfig"]["toolChoice"] == {"auto": {}}
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": LOOKUP.parameters}
    # Both results in one user turn after the assistant's: roles alternate.
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "about flink"}]}},
        {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "about kafka"}]}},
    ]
    for request in server.requests:
        assert AWS_TEST_SECRET_KEY not in str(request.headers) + request.body.decode()


def test_a_wrong_secret_is_refused_with_a_clear_error_that_does_not_show_it(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeBedrock(server, [])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-SENTINEL-secret")
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(server).chat(ask()))
    error = caught.value
    assert error.status == 403
    assert server.request_count == 1  # not retried
    assert "InvalidSignatureException: The request signature we calculated" in str(error)
    assert "SENTINEL" not in str(error) + repr(error)


@pytest.mark.parametrize(
    ("status", "kind", "retried"),
    [
        (429, "ThrottlingException", True),
        (503, "ServiceUnavailableException", True),
        (424, "ModelErrorException", False),
        (400, "ValidationException", False),
        (403, "AccessDeniedException", False),
        (404, "ResourceNotFoundException", False),
    ],
)
def test_bedrock_errors_are_retried_or_not_by_status(
    server: FakeModelServer, status: int, kind: str, retried: bool
) -> None:
    server.enqueue(
        bedrock_error(status, kind, f"{kind} says no"), ScriptedResponse(body=bedrock_reply("ok"))
    )
    connection = connect(server)
    if retried:
        assert asyncio.run(connection.chat(ask())).content == "ok"
        assert server.request_count == 2
        return
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert server.request_count == 1
    assert caught.value.status == status
    assert f"HTTP {status}: {kind}: {kind} says no" in str(caught.value)


def test_the_request_id_and_retry_after_are_read_from_bedrock_headers(
    server: FakeModelServer,
) -> None:
    throttled = bedrock_error(429, "ThrottlingException", "Too many requests, please wait.")
    throttled.headers |= {"x-amzn-RequestId": "req-42", "Retry-After": "0.3"}
    server.enqueue(throttled, throttled)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(server, retry={**FAST_RETRY, "max_attempts": 2}).chat(ask()))
    assert caught.value.request_id == "req-42"
    assert caught.value.attempts == 2


def test_a_gateway_page_and_a_non_json_reply_are_quoted(server: FakeModelServer) -> None:
    page = "<html>502 Bad Gateway</html>"
    server.enqueue(
        ScriptedResponse(status=502, body=page),
        ScriptedResponse(status=502, body=page),
        ScriptedResponse(body=page),
    )
    connection = connect(server, retry={**FAST_RETRY, "max_attempts": 2})
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert f"HTTP 502: {page}" in str(caught.value)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert f"malformed response body: the server sent text, not JSON: {page!r}" in str(caught.value)


def test_settings_reach_the_wire(server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(body=bedrock_reply("ok")))
    request = ask(
        tools=[LOOKUP],
        temperature=0.2,
        max_tokens=64,
        extra={"additionalModelRequestFields": {"top_k": 5}},
    )
    asyncio.run(connect(server, tool_choice="lookup").chat(request))
    sent = server.requests[0].json()
    assert sent["inferenceConfig"] == {"maxTokens": 64, "temperature": 0.2}
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": "lookup"}}
    assert sent["additionalModelRequestFields"] == {"top_k": 5}


def test_structured_output_is_a_forced_tool(server: FakeModelServer) -> None:
    schema = {"title": "Weather", "type": "object", "properties": {"city": {"type": "string"}}}
    server.enqueue(
        ScriptedResponse(body=bedrock_reply("", [("t1", "respond_with_Weather", {"city": "Oslo"})]))
    )
    reply = asyncio.run(connect(server).chat(ask(response_schema=schema)))
    assert reply.content == '{"city": "Oslo"}'
    assert reply.tool_calls == []
    sent = server.requests[0].json()
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": "respond_with_Weather"}}
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": schema}


def test_tool_blocks_without_tools_offered_are_refused_by_bedrock_in_one_clear_error(
    server: FakeModelServer,
) -> None:
    """Bedrock wants a toolConfig whenever the conversation holds tool blocks: a conversation
    that used tools must keep offering them (docs/providers.md, quirks)."""
    FakeBedrock(server, [])
    history = [
        ChatMessage(role="user", content="look flink up"),
        ChatMessage(role="assistant", tool_calls=[ToolCall(id="t1", name="lookup", arguments={})]),
        ChatMessage(role="tool", content="a stream processor", tool_call_id="t1"),
    ]
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(server).chat(ChatRequest(messages=history)))
    assert server.request_count == 1
    assert "HTTP 400: ValidationException: The toolConfig field must be defined" in str(
        caught.value
    )


def test_a_request_boto3_refuses_is_not_sent(server: FakeModelServer) -> None:
    with pytest.raises(ModelCallError, match=r"request refused by boto3: .*notAParameter"):
        asyncio.run(connect(server).chat(ask(extra={"notAParameter": 1})))
    assert server.request_count == 0


def test_a_bedrock_api_key_replaces_aws_credentials_and_needs_https(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore sends AWS_BEARER_TOKEN_BEDROCK as a bearer token, over HTTPS only: over plain
    HTTP the call fails before anything is sent, without retries and without the token."""
    token = "bedrock-api-key-SENTINEL"
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", token)
    connection = connect(server)
    connection.open()  # the token is a credential
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert "Bearer authorization requires an HTTPS endpoint" in str(caught.value)
    assert caught.value.attempts == 1
    assert server.request_count == 0
    assert "SENTINEL" not in str(caught.value) + repr(caught.value)


def test_missing_credentials_fail_at_open_naming_the_ways_to_give_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    connection = BedrockChatModelConnection(model=MODEL, region=REGION)
    with pytest.raises(MissingCredentialError) as caught:
        connection.open()
    for way in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "IAM role"):
        assert way in str(caught.value)


def test_a_missing_region_fails_at_open() -> None:
    with pytest.raises(ValueError, match="no region: set its region argument or AWS_REGION"):
        BedrockChatModelConnection(model=MODEL).open()
    BedrockChatModelConnection(model=MODEL, region=REGION).open()


def test_credentials_are_not_arguments_and_none_is_not_a_tool_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOME_KEY", "x")
    with pytest.raises(ValueError, match="Bedrock takes no api_key"):
        BedrockChatModelConnection(api_key={"env": "SOME_KEY"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='no tool choice "none"'):
        BedrockChatModelConnection(tool_choice="none")


def test_a_refused_connection_names_the_endpoint() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    connection = BEDROCK.connect(url, retry={"max_attempts": 2, **FAST_RETRY})
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert caught.value.attempts == 2  # a connection failure is retried
    assert (
        "request failed: EndpointConnectionError: "
        f'Could not connect to the endpoint URL: "{url}/model/m/converse"' in str(caught.value)
    )


def test_blocking_calls_run_side_by_side_in_the_clients_own_threads(
    server: FakeModelServer,
) -> None:
    """boto3 blocks a thread per call; asyncio's shared pool (cpu_count + 4 threads) would
    queue calls the connection lets through."""
    shared_pool = min(32, (os.cpu_count() or 1) + 4)
    server.fallback = lambda request: ScriptedResponse(body=bedrock_reply("ok"), delay_seconds=2.0)
    connection = connect(server)

    async def many() -> list[ChatMessage]:
        return await asyncio.gather(*(connection.chat(ask()) for _ in range(shared_pool + 6)))

    assert [reply.content for reply in asyncio.run(many())] == ["ok"] * (shared_pool + 6)
    # Every call is sent at once; on a loaded machine a few may start after the first answers.
    assert server.max_in_flight > shared_pool
