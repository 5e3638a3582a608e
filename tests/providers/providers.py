"""One adapter per provider, so the behavioural tests run the same way against all of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flink_agents.providers._connection import HttpChatModelConnection
from flink_agents.providers.anthropic import AnthropicChatModelConnection
from flink_agents.providers.azure_openai import AzureOpenAIChatModelConnection
from flink_agents.providers.bedrock import BedrockChatModelConnection
from flink_agents.providers.gemini import GeminiChatModelConnection
from flink_agents.providers.ollama import OllamaChatModelConnection
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.providers.openai_responses import OpenAIResponsesChatModelConnection
from flink_agents.providers.vllm import VllmChatModelConnection
from tests.providers.fake_servers import (
    RecordedRequest,
    anthropic_reply,
    bedrock_reply,
    gemini_reply,
    ollama_reply,
    openai_reply,
    responses_reply,
)

FAST_RETRY = {"initial_backoff_seconds": 0.001, "max_backoff_seconds": 0.01}
ANTHROPIC_KEY_VAR = "FA_TEST_ANTHROPIC_KEY"
GEMINI_KEY_VAR = "FA_TEST_GEMINI_KEY"


@dataclass(frozen=True)
class Provider:
    """How to talk to one provider's fake server and read what was sent to it."""

    name: str
    path: str
    make: Callable[..., HttpChatModelConnection]
    text: Callable[[str], dict[str, Any]]
    tool_call: Callable[[str, str, dict[str, Any]], dict[str, Any]]
    structured: Callable[[dict[str, Any]], dict[str, Any]]
    offered_tools: Callable[[dict[str, Any]], list[str]]
    tool_result: Callable[[dict[str, Any]], tuple[str, str]]
    """(reference to the call, content) of the tool result in the last message."""
    result_reference: Callable[[str, str], str]
    """What ``tool_result`` names, from the call's (id, tool name)."""
    base_path: str = ""
    """What follows the server's address in ``base_url`` (``/v1`` for OpenAI's protocols)."""
    sent_model: Callable[[RecordedRequest], str] = lambda request: request.json()["model"]
    """The model a request names (in the body, or in the path)."""

    def connect(self, url: str, **overrides: Any) -> HttpChatModelConnection:
        arguments: dict[str, Any] = {"model": "m", "retry": FAST_RETRY, **overrides}
        return self.make(url + self.base_path, **arguments)


def _openai_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["messages"][-1]
    assert last["role"] == "tool"
    return last["tool_call_id"], last["content"]


def _anthropic_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    (block,) = last["content"]
    assert block["type"] == "tool_result"
    return block["tool_use_id"], block["content"]


def _ollama_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["messages"][-1]
    assert last["role"] == "tool"
    return last["tool_name"], last["content"]


def _function_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


OPENAI = Provider(
    name="openai-compatible",
    path="/v1/chat/completions",
    make=lambda url, **kw: OpenAICompatibleChatModelConnection(base_url=url, **kw),
    text=lambda text: openai_reply(text),
    tool_call=lambda id_, name, args: openai_reply(None, [(id_, name, args)]),
    structured=lambda data: openai_reply(json.dumps(data)),
    offered_tools=_function_names,
    tool_result=_openai_result,
    result_reference=lambda id_, name: id_,
    base_path="/v1",
)

ANTHROPIC = Provider(
    name="anthropic",
    path="/v1/messages",
    make=lambda url, **kw: AnthropicChatModelConnection(
        base_url=url, api_key={"env": ANTHROPIC_KEY_VAR}, **kw
    ),
    text=lambda text: anthropic_reply(text),
    tool_call=lambda id_, name, args: anthropic_reply("", [(id_, name, args)]),
    structured=lambda data: anthropic_reply("", [("toolu_s", "respond_with_Weather", data)]),
    offered_tools=lambda body: [tool["name"] for tool in body.get("tools", [])],
    tool_result=_anthropic_result,
    result_reference=lambda id_, name: id_,
)

OLLAMA = Provider(
    name="ollama",
    path="/api/chat",
    make=lambda url, **kw: OllamaChatModelConnection(base_url=url, **kw),
    text=lambda text: ollama_reply(text),
    tool_call=lambda id_, name, args: ollama_reply("", [(name, args)]),
    structured=lambda data: ollama_reply(json.dumps(data)),
    offered_tools=_function_names,
    tool_result=_ollama_result,
    result_reference=lambda id_, name: name,
)


def entra_token() -> str:
    """An Entra ID token provider (``entra_credential``) for the Azure OpenAI tests."""
    return ENTRA_TOKEN


ENTRA_TOKEN = "entra-test-token"

AZURE_OPENAI = Provider(
    name="azure-openai",
    # Without a deployment the request's model ("m") names it, as in the official client.
    path="/openai/deployments/m/chat/completions",
    make=lambda url, **kw: AzureOpenAIChatModelConnection(
        base_url=url, entra_credential=f"{__name__}:entra_token", **kw
    ),
    text=OPENAI.text,
    tool_call=OPENAI.tool_call,
    structured=OPENAI.structured,
    offered_tools=_function_names,
    tool_result=_openai_result,
    result_reference=lambda id_, name: id_,
)


def _responses_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["input"][-1]
    assert last["type"] == "function_call_output"
    return last["call_id"], last["output"]


OPENAI_RESPONSES = Provider(
    name="openai-responses",
    path="/v1/responses",
    make=lambda url, **kw: OpenAIResponsesChatModelConnection(base_url=url, **kw),
    text=lambda text: responses_reply(text),
    tool_call=lambda id_, name, args: responses_reply("", [(id_, name, args)]),
    structured=lambda data: responses_reply(json.dumps(data)),
    offered_tools=lambda body: [tool["name"] for tool in body.get("tools", [])],
    tool_result=_responses_result,
    result_reference=lambda id_, name: id_,
    base_path="/v1",
)

VLLM = Provider(
    name="vllm",
    path="/v1/chat/completions",
    make=lambda url, **kw: VllmChatModelConnection(base_url=url, **kw),
    text=OPENAI.text,
    tool_call=OPENAI.tool_call,
    structured=OPENAI.structured,
    offered_tools=_function_names,
    tool_result=_openai_result,
    result_reference=lambda id_, name: id_,
    base_path="/v1",
)


def _gemini_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["contents"][-1]
    assert last["role"] == "user"
    (part,) = last["parts"]
    return part["functionResponse"]["name"], part["functionResponse"]["response"]["output"]


def _bedrock_result(body: dict[str, Any]) -> tuple[str, str]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    (block,) = last["content"]
    (text,) = block["toolResult"]["content"]
    return block["toolResult"]["toolUseId"], text["text"]


GEMINI = Provider(
    name="gemini",
    path="/v1beta/models/m:generateContent",
    make=lambda url, **kw: GeminiChatModelConnection(
        base_url=url, api_key={"env": GEMINI_KEY_VAR}, **kw
    ),
    text=lambda text: gemini_reply(text),
    tool_call=lambda id_, name, args: gemini_reply("", [(id_, name, args)]),
    structured=lambda data: gemini_reply(json.dumps(data)),
    offered_tools=lambda body: [
        declaration["name"]
        for tool in body.get("tools", [])
        for declaration in tool["functionDeclarations"]
    ],
    tool_result=_gemini_result,
    result_reference=lambda id_, name: name,
    sent_model=lambda request: request.path.split("/models/")[1].split(":")[0],
)

BEDROCK = Provider(
    name="bedrock",
    path="/model/m/converse",
    make=lambda url, **kw: BedrockChatModelConnection(base_url=url, region="us-east-1", **kw),
    text=lambda text: bedrock_reply(text),
    tool_call=lambda id_, name, args: bedrock_reply("", [(id_, name, args)]),
    structured=lambda data: bedrock_reply("", [("tooluse_s", "respond_with_Weather", data)]),
    offered_tools=lambda body: [
        tool["toolSpec"]["name"] for tool in body.get("toolConfig", {}).get("tools", [])
    ],
    tool_result=_bedrock_result,
    result_reference=lambda id_, name: id_,
    sent_model=lambda request: request.path.split("/")[2],
)

PROVIDERS = [OPENAI, ANTHROPIC, OLLAMA, AZURE_OPENAI, OPENAI_RESPONSES, VLLM, GEMINI, BEDROCK]
