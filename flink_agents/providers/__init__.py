"""Chat model providers, one module each.

* :mod:`.openai_compatible` -- the OpenAI chat-completions protocol (OpenAI, vLLM, llama.cpp...);
* :mod:`.azure_openai` -- Azure OpenAI's chat completions (deployments, api-version, Entra ID);
* :mod:`.openai_responses` -- the OpenAI Responses API, used statelessly;
* :mod:`.vllm` -- a vLLM server: chat completions with its defaults and quirks explained;
* :mod:`.anthropic` -- the Anthropic Messages API;
* :mod:`.ollama` -- a local Ollama server;
* :mod:`.gemini` -- Google Gemini's native API (extra ``gemini``);
* :mod:`.bedrock` -- AWS Bedrock's Converse API (extra ``bedrock``);
* :mod:`.scripted` -- deterministic replies, for tests and examples.

Besides chat models: embedding models (:mod:`.openai_embeddings`, :mod:`.ollama_embeddings`,
:mod:`.hashing_embeddings`), vector stores (:mod:`.chroma`, :mod:`.memory_vector_store`), the
HTTP sub-agent and MCP servers (:mod:`.mcp`). ``ModelCallError`` is what a call to a model,
an embedding service or an MCP server raises once its error is final or its attempts are spent;
``chat_structured`` asks a connection for an answer validated into a pydantic model.

The classes are exported here and loaded on first use (``from flink_agents.providers import
ScriptedChatModelConnection`` imports only :mod:`.scripted`): each provider's SDK is an optional
extra (``pip install 'flink-agents-py[providers]'``, ``[gemini]``, ``[bedrock]``), and a missing
one is named when its module is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_agents.providers._http_errors import ModelCallError
    from flink_agents.providers._structured import StructuredOutputError, chat_structured
    from flink_agents.providers.anthropic import AnthropicChatModelConnection
    from flink_agents.providers.azure_openai import AzureOpenAIChatModelConnection
    from flink_agents.providers.bedrock import BedrockChatModelConnection
    from flink_agents.providers.chroma import ChromaVectorStore
    from flink_agents.providers.gemini import GeminiChatModelConnection
    from flink_agents.providers.hashing_embeddings import HashingEmbeddingModelConnection
    from flink_agents.providers.http_subagent import IDEMPOTENCY_HEADER, HttpSubagent
    from flink_agents.providers.memory_vector_store import InMemoryVectorStore
    from flink_agents.providers.ollama import OllamaChatModelConnection
    from flink_agents.providers.ollama_embeddings import OllamaEmbeddingModelConnection
    from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
    from flink_agents.providers.openai_embeddings import OpenAICompatibleEmbeddingModelConnection
    from flink_agents.providers.openai_responses import OpenAIResponsesChatModelConnection
    from flink_agents.providers.routing import RoutingChatModelConnection
    from flink_agents.providers.scripted import (
        ScriptedChatModelConnection,
        ScriptedModelError,
        ScriptedToolCall,
        ScriptedTurn,
    )
    from flink_agents.providers.vllm import VllmChatModelConnection

_HOME = {
    "AnthropicChatModelConnection": "flink_agents.providers.anthropic",
    "AzureOpenAIChatModelConnection": "flink_agents.providers.azure_openai",
    "BedrockChatModelConnection": "flink_agents.providers.bedrock",
    "ChromaVectorStore": "flink_agents.providers.chroma",
    "GeminiChatModelConnection": "flink_agents.providers.gemini",
    "HashingEmbeddingModelConnection": "flink_agents.providers.hashing_embeddings",
    "HttpSubagent": "flink_agents.providers.http_subagent",
    "IDEMPOTENCY_HEADER": "flink_agents.providers.http_subagent",
    "InMemoryVectorStore": "flink_agents.providers.memory_vector_store",
    "ModelCallError": "flink_agents.providers._http_errors",
    "OllamaChatModelConnection": "flink_agents.providers.ollama",
    "OllamaEmbeddingModelConnection": "flink_agents.providers.ollama_embeddings",
    "OpenAICompatibleChatModelConnection": "flink_agents.providers.openai_compatible",
    "OpenAICompatibleEmbeddingModelConnection": "flink_agents.providers.openai_embeddings",
    "OpenAIResponsesChatModelConnection": "flink_agents.providers.openai_responses",
    "RoutingChatModelConnection": "flink_agents.providers.routing",
    "ScriptedChatModelConnection": "flink_agents.providers.scripted",
    "ScriptedModelError": "flink_agents.providers.scripted",
    "ScriptedToolCall": "flink_agents.providers.scripted",
    "ScriptedTurn": "flink_agents.providers.scripted",
    "StructuredOutputError": "flink_agents.providers._structured",
    "VllmChatModelConnection": "flink_agents.providers.vllm",
    "chat_structured": "flink_agents.providers._structured",
}
"""Each exported name and the module it is defined in (imported when the name is first used)."""

__all__ = [
    "IDEMPOTENCY_HEADER",
    "AnthropicChatModelConnection",
    "AzureOpenAIChatModelConnection",
    "BedrockChatModelConnection",
    "ChromaVectorStore",
    "GeminiChatModelConnection",
    "HashingEmbeddingModelConnection",
    "HttpSubagent",
    "InMemoryVectorStore",
    "ModelCallError",
    "OllamaChatModelConnection",
    "OllamaEmbeddingModelConnection",
    "OpenAICompatibleChatModelConnection",
    "OpenAICompatibleEmbeddingModelConnection",
    "OpenAIResponsesChatModelConnection",
    "RoutingChatModelConnection",
    "ScriptedChatModelConnection",
    "ScriptedModelError",
    "ScriptedToolCall",
    "ScriptedTurn",
    "StructuredOutputError",
    "VllmChatModelConnection",
    "chat_structured",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
