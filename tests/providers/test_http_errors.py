"""A request the server refuses as invalid is summed up in one line and never retried, whatever
the status; the three forms servers send it in: pydantic's text (vLLM's 400), FastAPI's
printed error dicts (llama-cpp-python's 500) and FastAPI's 422 JSON."""

from __future__ import annotations

import asyncio

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers._http_errors import ModelCallError, status_failure, validation_summary
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import OLLAMA, OPENAI, Provider

PYDANTIC_TEXT = (
    "2 validation errors for ChatCompletionRequest\n"
    "messages.1.content\n"
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
    "    For further information visit https://errors.pydantic.dev/2.7/v/string_type\n"
    "tool_choice\n"
    "  Extra inputs are not permitted [type=extra_forbidden, input_value='auto', input_type=str]\n"
    "    For further information visit https://errors.pydantic.dev/2.7/v/extra_forbidden"
)
FASTAPI_DICTS = (
    "3 validation errors:\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'typed-dict', 'role'), "
    "'msg': \"Input should be 'system'\", 'input': 'assistant', "
    "'ctx': {'expected': \"'system'\"}}\n"
    "  {'type': 'string_type', 'loc': ('body', 'messages', 1, 'typed-dict', 'content'), "
    "'msg': 'Input should be a valid string', 'input': None}\n"
    "  {'type': 'missing', 'loc': ('body', 'messages', 1, 'typed-dict', 'name'), "
    "'msg': 'Field required', 'input': {'role': 'assistant', 'content': None}}\n"
)
FASTAPI_422 = {
    "detail": [
        {"type": "missing", "loc": ["body", "model"], "msg": "Field required", "input": {}},
        {"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}},
    ]
}


@pytest.mark.parametrize(
    ("body", "summary"),
    [
        (
            {"object": "error", "message": PYDANTIC_TEXT, "type": "BadRequestError"},
            "2 validation errors; messages.1.content: Input should be a valid string",
        ),
        (
            {"error": {"message": FASTAPI_DICTS, "type": "internal_server_error"}},
            "3 validation errors; body.messages.1.typed-dict.content: "
            "Input should be a valid string",
        ),
        (FASTAPI_422, "2 validation errors; body.model: Field required"),
        ("1 validation error for X\nfield\n  Field required [type=missing, input_value={}]", ""),
    ],
)
def test_a_validation_error_in_each_form_is_one_line(body: object, summary: str) -> None:
    expected = summary or "1 validation error; field: Field required"
    assert validation_summary(body) == f"the server refused the request as invalid ({expected})"


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "model overloaded", "type": "server_error"}},
        {"detail": "Not Found"},
        "<html>502 Bad Gateway</html>",
        None,
        {  # llama-cpp-python's reply failing its own response model: maybe not the next time
            "error": {
                "message": "2 validation errors:\n  {'type': 'missing', 'loc': ('response', "
                "'CreateChatCompletionResponse', 'choices', 0, 'message', 'refusal'), "
                "'msg': 'Field required', 'input': {}}\n"
            }
        },
    ],
)
def test_other_errors_are_not_validation_errors(body: object) -> None:
    assert validation_summary(body) is None


def test_a_validation_error_is_final_whatever_the_status_and_others_keep_their_rule() -> None:
    invalid = status_failure(500, {}, {"error": {"message": FASTAPI_DICTS}})
    assert (invalid.retryable, invalid.status) == (False, 500)
    assert "\n" not in invalid.reason
    assert status_failure(500, {}, {"error": {"message": "boom"}}).retryable
    assert status_failure(404, {}, {"detail": "Not Found"}, target="http://h/x").reason == (
        "HTTP 404 at http://h/x: Not Found"
    )
    assert status_failure(400, {}, "bad", target="http://h/x").reason == "HTTP 400: bad"


@pytest.mark.parametrize("provider", [OPENAI, OLLAMA], ids=lambda p: p.name)
def test_a_500_that_is_a_validation_error_is_sent_once(
    provider: Provider, server: FakeModelServer
) -> None:
    server.enqueue(
        ScriptedResponse(status=500, body={"error": {"message": FASTAPI_DICTS}}),
        ScriptedResponse(body=provider.text("too late")),
    )
    connection = provider.connect(server.url)
    request = ChatRequest(messages=[ChatMessage(role="user", content="hi")])
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(connection.chat(request))
    assert server.request_count == 1
    assert caught.value.reason == (
        "HTTP 500: the server refused the request as invalid (3 validation errors; "
        "body.messages.1.typed-dict.content: Input should be a valid string)"
    )
