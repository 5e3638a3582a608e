"""Google Gemini's native API through google-genai, against a local server that checks what the
Gemini API checks: the API key, roles ``user``/``model``, no empty text, one
``functionResponse`` per ``functionCall`` of the step, a thought signature on every replayed
call (Gemini 3), and ``id`` fields only where the server issued them (older API versions refuse
unknown ids); and that answers with Google's error shapes (``google.rpc`` status, RetryInfo)."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolSpec
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.gemini import GeminiChatModelConnection
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    ScriptedResponse,
    gemini_reply,
)
from tests.providers.providers import FAST_RETRY, GEMINI_KEY_VAR

KEY = "gemini-key-SENTINEL-42"
MODEL = "gemini-3-flash"
SENTINEL_SIGNATURE = base64.b64encode(b"skip_thought_signature_validator").decode()
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


@pytest.fixture(autouse=True)
def _gemini_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GEMINI_KEY_VAR, KEY)


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return {"error": error}


def refused(code: int, status: str, message: str, *details: dict[str, Any]) -> ScriptedResponse:
    return ScriptedResponse(status=code, body=google_error(code, status, message, *details))


class FakeGemini:
    """Answers like the Gemini API: checks the key and the request, then gives ``answers``."""

    def __init__(
        self,
        server: FakeModelServer,
        answers: list[dict[str, Any]],
        *,
        issues_ids: bool = False,
        version: int = 3,
    ) -> None:
        self.answers = answers
        self.issues_ids = issues_ids
        self.version = version
        server.fallback = self.respond

    def respond(self, request: RecordedRequest) -> ScriptedResponse:
        key = request.headers.get("x-goog-api-key")
        if key is None:
            return refused(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.")
        if key != KEY:
            reason = {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
            }
            return refused(
                400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", reason
            )
        problem = self.problem(request.json())
        if problem is not None:
            return refused(400, "INVALID_ARGUMENT", problem)
        return ScriptedResponse(body=self.answers.pop(0))

    def problem(self, body: dict[str, Any]) -> str | None:
        json_mode = body.get("generationConfig", {}).get("responseMimeType") == "application/json"
        if json_mode and body.get("tools") and self.version == 2:
            return "Function calling with a response mime type: 'application/json' is unsupported"
        calls: list[dict[str, Any]] = []
        for i, content in enumerate(body["contents"]):
            if content["role"] not in ("user", "model"):
                return f"Please use a valid role: user, model. (contents[{i}])"
            responses = [p["functionResponse"] for p in content["parts"] if "functionResponse" in p]
            if responses and len(responses) != len(calls):
                return (
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn."
                )
            for j, part in enumerate(content["parts"]):
                if "text" in part and not part["text"]:
                    return "Unable to submit request because it has an empty text parameter."
                for kind, field in (
                    ("functionCall", "function_call"),
                    ("functionResponse", "function_response"),
                ):
                    if kind in part and "id" in part[kind] and not self.issues_ids:
                        where = f"contents[{i}].parts[{j}].{field}"
                        return f"Invalid JSON payload received. Unknown name \"id\" at '{where}'."
                if "functionCall" in part and "thoughtSignature" not in part:
                    return "Function call is missing a thought_signature in functionCall parts."
            ids_differ = [r.get("id") for r in responses] != [c.get("id") for c in calls]
            if self.issues_ids and responses and ids_differ:
                return "functionResponse.id does not match functionCall.id"
            calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
        return None


def connect(server: FakeModelServer, **overrides: Any) -> GeminiChatModelConnection:
    arguments: dict[str, Any] = {"model": MODEL, "retry": FAST_RETRY, **overrides}
    return GeminiChatModelConnection(
        base_url=server.url, api_key={"env": GEMINI_KEY_VAR}, **arguments
    )


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], **fields)


def round_trip(connection: GeminiChatModelConnection) -> tuple[ChatMessage, ChatMessage]:
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What are flink and kafka?"),
    ]

    async def converse() -> tuple[ChatMessage, ChatMessage]:
        first = await connection.chat(ChatRequest(messages=messages, tools=[LOOKUP]))
        results = [
            ChatMessage(role="tool", content=f"about {c.arguments['word']}", tool_call_id=c.id)
            for c in first.tool_calls
        ]
        history = [*messages, first, *results]
        return first, await connection.chat(ChatRequest(messages=history, tools=[LOOKUP]))

    return asyncio.run(converse())


def test_a_tool_round_trip_passes_gemini_3s_checks(server: FakeModelServer) -> None:
    calls = [(None, "lookup", {"word": "flink"}), (None, "lookup", {"word": "kafka"})]
    FakeGemini(server, [gemini_reply("", calls), gemini_reply("Both stream.")])

    first, final = round_trip(connect(server))

    # No ids from the server: ours are unique within the conversation, and never sent back.
    assert [c.id for c in first.tool_calls] == ["gemini_call_0_0", "gemini_call_0_1"]
    assert final.content == "Both stream."
    assert [r.path for r in server.requests] == [f"/v1beta/models/{MODEL}:generateContent"] * 2
    assert all(r.headers["x-goog-api-key"] == KEY for r in server.requests)
    sent = server.requests[1].json()
    assert sent["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user"]
    model_turn, results = sent["contents"][1]["parts"], sent["contents"][2]["parts"]
    assert [p["functionCall"] for p in model_turn] == [
        {"name": "lookup", "args": {"word": "flink"}},
        {"name": "lookup", "args": {"word": "kafka"}},
    ]
    assert {p["thoughtSignature"] for p in model_turn} == {SENTINEL_SIGNATURE}
    assert [p["functionResponse"] for p in results] == [
        {"name": "lookup", "response": {"output": "about flink"}},
        {"name": "lookup", "response": {"output": "about kafka"}},
    ]
    declaration = sent["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "lookup"
    assert LOOKUP.parameters in declaration.values()  # the JSON schema as it is


def test_ids_the_server_issued_are_sent_back(server: FakeModelServer) -> None:
    calls = [("fc-1", "lookup", {"word": "flink"}), ("fc-2", "lookup", {"word": "kafka"})]
    FakeGemini(server, [gemini_reply("", calls), gemini_reply("ok")], issues_ids=True)
    first, final = round_trip(connect(server))
    assert [c.id for c in first.tool_calls] == ["fc-1", "fc-2"]
    assert final.content == "ok"
    results = server.requests[1].json()["contents"][2]["parts"]
    assert [p["functionResponse"]["id"] for p in results] == ["fc-1", "fc-2"]


def test_rate_limit_waits_the_retry_delay_google_puts_in_the_body(server: FakeModelServer) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}
    server.enqueue(
        refused(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", retry_info),
        ScriptedResponse(body=gemini_reply("done")),
    )
    started = time.monotonic()
    assert asyncio.run(connect(server).chat(ask())).content == "done"
    assert time.monotonic() - started >= 0.3  # not the 1 ms backoff
    assert server.request_count == 2


@pytest.mark.parametrize(
    ("code", "status", "retried"),
    [
        (500, "INTERNAL", True),
        (503, "UNAVAILABLE", True),
        (400, "INVALID_ARGUMENT", False),
        (404, "NOT_FOUND", False),
        (403, "PERMISSION_DENIED", False),
    ],
)
def test_google_errors_are_retried_or_not_by_status(
    server: FakeModelServer, code: int, status: str, retried: bool
) -> None:
    server.enqueue(refused(code, status, "it says no"), ScriptedResponse(body=gemini_reply("ok")))
    connection = connect(server)
    if retried:
        assert asyncio.run(connection.chat(ask())).content == "ok"
        assert server.request_count == 2
        return
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask()))
    assert server.request_count == 1
    assert caught.value.status == code
    assert f"gemini call #1 to model {MODEL!r} failed: HTTP {code}: {status}: it says no" in str(
        caught.value
    )


def test_a_wrong_key_is_refused_clearly_and_never_shown(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeGemini(server, [])
    monkeypatch.setenv(GEMINI_KEY_VAR, "wrong-SENTINEL-key")
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(server).chat(ask()))
    assert "HTTP 400: INVALID_ARGUMENT: API key not valid" in str(caught.value)
    assert server.request_count == 1
    assert "SENTINEL" not in str(caught.value) + repr(caught.value)
    assert "key=" not in server.requests[0].path  # the key is a header, not in the URL


def test_a_blocked_prompt_and_a_withheld_answer_fail_without_retries(
    server: FakeModelServer,
) -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {}}
    withheld = {"candidates": [{"finishReason": "SAFETY", "index": 0}]}
    server.enqueue(ScriptedResponse(body=blocked), ScriptedResponse(body=withheld))
    connection = connect(server)
    with pytest.raises(ModelCallError, match="the prompt was blocked: SAFETY"):
        asyncio.run(connection.chat(ask()))
    with pytest.raises(ModelCallError, match="no answer: the model stopped with SAFETY"):
        asyncio.run(connection.chat(ask()))
    assert server.request_count == 2


def test_thoughts_are_not_the_answer_but_their_tokens_are_counted(
    server: FakeModelServer,
) -> None:
    reply = gemini_reply("42")
    reply["candidates"][0]["content"]["parts"].insert(0, {"text": "thinking...", "thought": True})
    reply["usageMetadata"]["thoughtsTokenCount"] = 7
    server.enqueue(ScriptedResponse(body=reply))
    answer = asyncio.run(connect(server).chat(ask()))
    assert answer.content == "42"
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (3, 5 + 7)


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("lookup", {"mode": "ANY", "allowedFunctionNames": ["lookup"]}),
    ],
)
def test_tool_choice_is_the_function_calling_mode(
    server: FakeModelServer, choice: str, config: dict[str, Any]
) -> None:
    server.enqueue(ScriptedResponse(body=gemini_reply("ok")))
    asyncio.run(connect(server, tool_choice=choice).chat(ask(tools=[LOOKUP])))
    assert server.requests[0].json()["toolConfig"] == {"functionCallingConfig": config}


def test_settings_and_structured_output_reach_the_wire(server: FakeModelServer) -> None:
    schema = {"title": "Weather", "type": "object", "properties": {"city": {"type": "string"}}}
    server.enqueue(ScriptedResponse(body=gemini_reply('{"city": "Oslo"}')))
    request = ask(
        response_schema=schema,
        temperature=0.2,
        max_tokens=64,
        extra={"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}]},
    )
    reply = asyncio.run(connect(server).chat(request))
    assert reply.content == '{"city": "Oslo"}'
    sent = server.requests[0].json()
    assert sent["generationConfig"] == {
        "temperature": 0.2,
        "maxOutputTokens": 64,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    assert sent["safetySettings"] == request.extra["safetySettings"]
    assert "toolConfig" not in sent  # no tools, no tool choice


def test_a_non_json_reply_is_quoted(server: FakeModelServer) -> None:
    page = "<html>Service Unavailable</html>"
    server.enqueue(ScriptedResponse(body=page))
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(server).chat(ask()))
    assert f"malformed response body: the server sent text, not JSON: {page!r}" in str(caught.value)
    assert server.request_count == 1


def test_a_tool_result_for_no_call_is_refused_before_sending(server: FakeModelServer) -> None:
    history = [
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="tool", content="orphan", tool_call_id="nowhere"),
    ]
    with pytest.raises(ModelCallError, match="tool result 'nowhere' answers no tool call"):
        asyncio.run(connect(server).chat(ChatRequest(messages=history)))
    assert server.request_count == 0


@pytest.mark.parametrize(("version", "json_mode_with_tools"), [(2, False), (3, True)])
def test_json_mode_goes_with_tools_only_where_the_model_takes_both(
    server: FakeModelServer, version: int, json_mode_with_tools: bool
) -> None:
    schema = {"title": "Word", "type": "object", "properties": {"word": {"type": "string"}}}
    FakeGemini(server, [gemini_reply('{"word": "flink"}')] * 2, version=version)
    connection = connect(server, json_mode_with_tools=json_mode_with_tools)
    reply = asyncio.run(connection.chat(ask(tools=[LOOKUP], response_schema=schema)))
    assert reply.content == '{"word": "flink"}'
    sent = server.requests[0].json()
    assert ("responseJsonSchema" in sent.get("generationConfig", {})) is json_mode_with_tools
    assert sent["tools"]  # the tools are offered either way


def test_gemini_2_refuses_json_mode_with_tools_in_one_clear_error(
    server: FakeModelServer,
) -> None:
    FakeGemini(server, [], version=2)
    schema = {"title": "Word", "type": "object"}
    connection = connect(server, json_mode_with_tools=True)
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(ask(tools=[LOOKUP], response_schema=schema)))
    assert "HTTP 400: INVALID_ARGUMENT: Function calling with a response mime type" in str(
        caught.value
    )
    assert server.request_count == 1
