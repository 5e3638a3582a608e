"""vLLM against a local server that answers as ``vllm serve`` does: one served model name,
tools without ``tool_choice`` taken as ``auto`` and refused unless the server was started with
``--enable-auto-tool-choice --tool-call-parser``, ``required``/named tool choice always allowed,
error bodies in vLLM's two formats, its own structured-output request fields."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers import chat_structured
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.vllm import VllmChatModelConnection
from flink_agents.runtime import ActionError, run_local
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    ScriptedResponse,
    openai_reply,
)
from tests.providers.providers import FAST_RETRY
from tests.providers.react_yaml import INPUTS, TOOL_RESULT, react_plan
from tests.providers.test_providers import LOOKUP, Weather

SERVED = "Qwen/Qwen2.5-7B-Instruct"
AUTO_TOOLS_REFUSED = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


def vllm_error(status: int, kind: str, message: str, nested: bool) -> ScriptedResponse:
    """vLLM's error body: top-level fields in older releases, under ``error`` in newer ones."""
    fields = {"message": message, "type": kind, "param": None, "code": status}
    body = {"error": fields} if nested else {"object": "error", **fields}
    return ScriptedResponse(status=status, body=body)


def vllm_server(*, auto_tools: bool, nested_errors: bool = True) -> Callable[..., Any]:
    """A ``vllm serve SERVED`` started with or without ``--enable-auto-tool-choice``."""

    def answer(request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        if body["model"] != SERVED:
            message = f"The model `{body['model']}` does not exist."
            return vllm_error(404, "NotFoundError", message, nested_errors)
        choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
        if choice == "auto" and not auto_tools:
            return vllm_error(400, "BadRequestError", AUTO_TOOLS_REFUSED, nested_errors)
        if body["messages"][-1]["role"] == "tool":
            return ScriptedResponse(body=openai_reply(body["messages"][-1]["content"]))
        if body.get("tools") and choice != "none":
            call = ("chatcmpl-tool-9f2c4e", "lookup", {"word": "flink"})
            return ScriptedResponse(body=openai_reply(None, [call], model=SERVED))
        return ScriptedResponse(body=openai_reply('{"city": "Oslo", "celsius": 4.5}'))

    return answer


def connect(server: FakeModelServer, **arguments: Any) -> VllmChatModelConnection:
    arguments = {"model": SERVED, "retry": FAST_RETRY, **arguments}
    return VllmChatModelConnection(base_url=f"{server.url}/v1", **arguments)


def ask_with_tools(**fields: Any) -> ChatRequest:
    messages = [ChatMessage(role="user", content="What is flink?")]
    return ChatRequest(messages=messages, tools=[LOOKUP], **fields)


@pytest.mark.parametrize("nested", [True, False], ids=["error-object", "top-level-error"])
def test_auto_tool_choice_without_the_server_flags_names_them(nested: bool) -> None:
    with FakeModelServer(fallback=vllm_server(auto_tools=False, nested_errors=nested)) as server:
        with pytest.raises(ModelCallError) as caught:
            asyncio.run(connect(server).chat(ask_with_tools()))
        assert server.request_count == 1  # a server started so refuses every retry alike
    message = str(caught.value)
    assert caught.value.status == 400
    assert "vllm call #1" in message
    assert "start it with `vllm serve MODEL --enable-auto-tool-choice --tool-call-parser" in message
    assert "or set tool_choice to required or a named tool" in message
    assert AUTO_TOOLS_REFUSED in message  # what the server said, too


def test_required_tool_choice_needs_no_flags() -> None:
    with FakeModelServer(fallback=vllm_server(auto_tools=False)) as server:
        reply = asyncio.run(connect(server).chat(ask_with_tools(extra={"tool_choice": "required"})))
    assert [call.id for call in reply.tool_calls] == ["chatcmpl-tool-9f2c4e"]
    assert reply.tool_calls[0].arguments == {"word": "flink"}


def test_an_unknown_model_names_the_served_one_to_use() -> None:
    with FakeModelServer(fallback=vllm_server(auto_tools=True)) as server:
        with pytest.raises(ModelCallError) as caught:
            asyncio.run(connect(server, model="qwen").chat(ask_with_tools()))
        assert server.request_count == 1
    assert caught.value.status == 404
    assert "--served-model-name" in str(caught.value)
    assert "The model `qwen` does not exist." in str(caught.value)


def test_other_errors_are_left_as_the_server_said_them() -> None:
    with FakeModelServer() as server:
        server.enqueue(vllm_error(400, "BadRequestError", "max_tokens is too large", True))
        with pytest.raises(ModelCallError) as caught:
            asyncio.run(connect(server).chat(ask_with_tools()))
    assert str(caught.value).endswith("HTTP 400: max_tokens is too large")


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("response_format", None),
        ("structured_outputs", {"structured_outputs": {"json": Weather.model_json_schema()}}),
        ("guided_json", {"guided_json": Weather.model_json_schema()}),
    ],
)
def test_the_response_schema_travels_in_the_chosen_field(
    field: str, expected: dict[str, Any] | None
) -> None:
    request = ChatRequest(messages=[ChatMessage(role="user", content="weather?")])
    with FakeModelServer(fallback=vllm_server(auto_tools=True)) as server:
        connection = connect(server, structured_output=field)
        weather = asyncio.run(chat_structured(connection, request, Weather))
        sent = server.requests[0].json()
    assert weather == Weather(city="Oslo", celsius=4.5)
    if expected is None:
        assert sent["response_format"]["json_schema"]["schema"] == Weather.model_json_schema()
    else:
        assert "response_format" not in sent
        assert {key: sent[key] for key in expected} == expected


def test_default_base_url_is_a_local_vllm_serve() -> None:
    assert VllmChatModelConnection().url == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("flags", [True, False], ids=["with-flags", "without-flags"])
def test_a_yaml_react_agent_with_a_tool(flags: bool, tmp_path: Path) -> None:
    """With the flags the round trip completes; without them the run's error names them."""
    with FakeModelServer(fallback=vllm_server(auto_tools=flags)) as server:
        plan = react_plan(tmp_path, "vllm", {"base_url": f"{server.url}/v1"}, model=SERVED)
        if flags:
            (result,) = run_local(plan, INPUTS, key="id")
            assert result.output_values == [TOOL_RESULT]
            assert server.request_count == 2
        else:
            with pytest.raises(ActionError, match="--enable-auto-tool-choice") as caught:
                run_local(plan, INPUTS, key="id")
            assert "start it with `vllm serve MODEL" in str(caught.value)
