"""The OpenAI Responses API against a local server that checks requests as the real one does
with ``store: false``: a ``function_call_output`` must answer a ``function_call`` sent in the same
input, ids of unstored items are refused, function tools are flat and strict by default."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from flink_agents.providers import chat_structured
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.openai_responses import (
    OpenAIResponsesChatModelConnection,
    responses_body,
)
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    ScriptedResponse,
    responses_reply,
)
from tests.providers.providers import FAST_RETRY
from tests.providers.test_providers import LOOKUP, Weather


def _invalid(status: int, message: str, param: str | None = None) -> ScriptedResponse:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return ScriptedResponse(status=status, body={"error": error})


def _refusal(body: dict[str, Any]) -> ScriptedResponse | None:
    """What the API says about a stateless request it refuses, or None."""
    if body.get("store", True) is not False or "previous_response_id" in body:
        return _invalid(400, "this server only serves store: false without previous_response_id")
    for index, tool in enumerate(body.get("tools", [])):
        if "name" not in tool:  # a chat-completions tool, {"function": {...}}
            return _invalid(400, f"Missing required parameter: 'tools[{index}].name'.")
        closed = tool["parameters"].get("additionalProperties") is False
        if tool.get("strict", True) and not closed:
            return _invalid(
                400,
                f"Invalid schema for function '{tool['name']}': In context=(), "
                "'additionalProperties' is required to be supplied and to be false.",
                f"tools[{index}].parameters",
            )
    called: set[str] = set()
    for item in body["input"]:
        if "id" in item:
            return _invalid(
                404,
                f"Item with id '{item['id']}' not found. Items are not persisted when `store` "
                "is set to false. Try again with `store` set to true, or remove this item from "
                "your input.",
                "input",
            )
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        if item.get("type") == "function_call_output" and item["call_id"] not in called:
            return _invalid(
                400,
                f"No tool call found for function call output with call_id {item['call_id']}.",
                "input",
            )
    return None


def responses_api(request: RecordedRequest) -> ScriptedResponse:
    """Calls ``lookup`` once, then answers with what it returned."""
    if request.route != "/v1/responses":
        return ScriptedResponse(status=404, body={"error": {"message": "Not found"}})
    body = request.json()
    refused = _refusal(body)
    if refused is not None:
        return refused
    last = body["input"][-1]
    if last.get("type") == "function_call_output":
        return ScriptedResponse(body=responses_reply(f"found: {last['output']}"))
    reply = responses_reply("", [("call_r1", "lookup", {"word": "flink"})])
    # Reasoning models put a reasoning item first; it is not part of the chat.
    reply["output"].insert(0, {"type": "reasoning", "id": "rs_1", "summary": []})
    return ScriptedResponse(body=reply)


@pytest.fixture
def api() -> Any:
    with FakeModelServer(fallback=responses_api) as server:
        yield server


def connect(server: FakeModelServer) -> OpenAIResponsesChatModelConnection:
    return OpenAIResponsesChatModelConnection(
        base_url=f"{server.url}/v1", model="m", retry=FAST_RETRY
    )


def test_tool_call_round_trip_sends_the_conversation_statelessly(api: FakeModelServer) -> None:
    connection = connect(api)
    opening = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What is flink?"),
    ]

    async def converse() -> tuple[ChatMessage, ChatMessage]:
        first = await connection.chat(ChatRequest(messages=opening, tools=[LOOKUP]))
        (call,) = first.tool_calls
        result = ChatMessage(role="tool", content="a stream processor", tool_call_id=call.id)
        history = [*opening, first, result]
        return first, await connection.chat(ChatRequest(messages=history, tools=[LOOKUP]))

    first, final = asyncio.run(converse())

    assert first.tool_calls == [ToolCall(id="call_r1", name="lookup", arguments={"word": "flink"})]
    assert first.content == ""
    assert final.content == "found: a stream processor"
    sent_first, sent_second = (r.json() for r in api.requests)
    assert sent_first["instructions"] == "Be brief."
    assert sent_first["input"] == [{"type": "message", "role": "user", "content": "What is flink?"}]
    assert sent_first["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": LOOKUP.parameters,
            "strict": False,
        }
    ]
    assert sent_second["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_r1",
            "name": "lookup",
            "arguments": '{"word": "flink"}',
        },
        {"type": "function_call_output", "call_id": "call_r1", "output": "a stream processor"},
    ]
    for body in (sent_first, sent_second):
        assert body["store"] is False
        assert "previous_response_id" not in body


def test_an_orphan_tool_result_is_a_final_400_naming_the_call(api: FakeModelServer) -> None:
    """The server cannot look a call up (nothing is stored): the call must travel with it."""
    orphan = [
        ChatMessage(role="user", content="What is flink?"),
        ChatMessage(role="tool", content="a stream processor", tool_call_id="call_gone"),
    ]
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connect(api).chat(ChatRequest(messages=orphan)))
    assert api.request_count == 1
    assert caught.value.status == 400
    assert "No tool call found for function call output with call_id call_gone" in str(caught.value)


def test_a_strict_schema_is_not_demanded_of_tools(api: FakeModelServer) -> None:
    """``strict: false`` is sent: the open LOOKUP schema would be refused under the default."""
    open_schema = ToolSpec(name="open", description="x", parameters={"type": "object"})
    api.enqueue(ScriptedResponse(body=responses_reply("ok")))
    assert (
        asyncio.run(
            connect(api).chat(
                ChatRequest(messages=[ChatMessage(role="user", content="hi")], tools=[open_schema])
            )
        ).content
        == "ok"
    )
    assert _refusal(api.requests[0].json()) is None
    strict_by_default = {**api.requests[0].json()}
    strict_by_default["tools"] = [
        {k: v for k, v in t.items() if k != "strict"} for t in strict_by_default["tools"]
    ]
    refused = _refusal(strict_by_default)
    assert refused is not None and refused.status == 400  # the quirk the server reproduces


def test_body_fields_structured_output_and_a_later_system_message() -> None:
    request = ChatRequest(
        messages=[
            ChatMessage(role="system", content="One."),
            ChatMessage(role="system", content="Two."),
            ChatMessage(role="user", content="hi"),
            ChatMessage(role="system", content="Later."),
        ],
        temperature=0.3,
        max_tokens=42,
        response_schema=Weather.model_json_schema(),
    )
    body = responses_body(request, "m")
    assert body["instructions"] == "One.\n\nTwo."
    assert body["input"][1] == {"type": "message", "role": "system", "content": "Later."}
    assert (body["temperature"], body["max_output_tokens"]) == (0.3, 42)
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "Weather"
    assert body["text"]["format"]["schema"]["required"] == ["city", "celsius"]


def test_structured_output_over_the_wire(api: FakeModelServer) -> None:
    api.enqueue(ScriptedResponse(body=responses_reply('{"city": "Oslo", "celsius": 4.5}')))
    weather = asyncio.run(
        chat_structured(
            connect(api),
            ChatRequest(messages=[ChatMessage(role="user", content="weather?")]),
            Weather,
        )
    )
    assert weather == Weather(city="Oslo", celsius=4.5)
    assert api.requests[0].json()["text"]["format"]["name"] == "Weather"


@pytest.mark.parametrize("field", ["previous_response_id", "store", "conversation"])
def test_stateful_fields_in_extra_are_refused_before_sending(
    api: FakeModelServer, field: str
) -> None:
    request = ChatRequest(
        messages=[ChatMessage(role="user", content="hi")], extra={field: "resp_1"}
    )
    with pytest.raises(ValueError, match=f"stateless: {field} in the setup's extra"):
        asyncio.run(connect(api).chat(request))
    assert api.request_count == 0


@pytest.mark.parametrize(("code", "attempts"), [("server_error", 3), ("invalid_prompt", 1)])
def test_a_failed_response_is_retried_only_for_server_faults(
    api: FakeModelServer, code: str, attempts: int
) -> None:
    failed = {**responses_reply(), "status": "failed", "error": {"code": code, "message": "nope"}}
    api.enqueue(*[ScriptedResponse(body=failed)] * 3)
    with pytest.raises(ModelCallError, match=f"the response failed \\({code}\\): nope"):
        asyncio.run(
            connect(api).chat(ChatRequest(messages=[ChatMessage(role="user", content="hi")]))
        )
    assert api.request_count == attempts


def test_refusal_text_is_the_content(api: FakeModelServer) -> None:
    reply = responses_reply("")
    reply["output"] = [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}],
        }
    ]
    api.enqueue(ScriptedResponse(body=reply))
    message = asyncio.run(
        connect(api).chat(ChatRequest(messages=[ChatMessage(role="user", content="x")]))
    )
    assert message.content == "I can't help with that."
