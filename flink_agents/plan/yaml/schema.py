"""The YAML agent format, as pydantic models (published as ``schemas/agent.schema.json``).

A file holds ``agents:``, a list of agents. Each agent names its resources by kind (connections,
chat models, prompts, tools, sub-agents, or generic ``resources``) and its actions by
``module:function``. A ``react:`` block makes the agent a ReAct agent. A sub-agent is either a
``SubagentSetup`` (``class`` + ``arguments``) or another agent (``agent:``, by name or inline).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
)

from flink_agents.agents.chat_actions import DEFAULT_MAX_TOOL_CALLS_PER_RUN
from flink_agents.agents.react import DEFAULT_OUTPUT_RETRIES
from flink_agents.agents.retrieval import RetrievalSettings
from flink_agents.api.agent import ErrorPolicy, PausedPolicy
from flink_agents.api.budgets import Budgets
from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import StructuredOutput
from flink_agents.api.compaction import CompactionSettings
from flink_agents.api.fact_extraction import MemoryExtraction
from flink_agents.api.memory_compaction import MemoryCompaction
from flink_agents.api.refs import REFERENCE_PATTERN
from flink_agents.api.resources import ResourceType, refuse_literal_secrets
from flink_agents.api.tools import TOOL_NAMESPACE_PATTERN


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


PROVIDER_ALIASES: dict[str, str] = {
    "openai": "flink_agents.providers.openai_compatible:OpenAICompatibleChatModelConnection",
    "anthropic": "flink_agents.providers.anthropic:AnthropicChatModelConnection",
    "ollama": "flink_agents.providers.ollama:OllamaChatModelConnection",
    "gemini": "flink_agents.providers.gemini:GeminiChatModelConnection",
    "bedrock": "flink_agents.providers.bedrock:BedrockChatModelConnection",
    "scripted": "flink_agents.providers.scripted:ScriptedChatModelConnection",
    "azure_openai": "flink_agents.providers.azure_openai:AzureOpenAIChatModelConnection",
    "openai_responses": (
        "flink_agents.providers.openai_responses:OpenAIResponsesChatModelConnection"
    ),
    "vllm": "flink_agents.providers.vllm:VllmChatModelConnection",
    "fallback": "flink_agents.providers.fallback:FallbackChatModelConnection",
    "router": "flink_agents.providers.routing:RoutingChatModelConnection",
}
"""Short names for the built-in connection classes, accepted wherever ``class:`` is."""


def _expand(value: Any, aliases: dict[str, str], kind: str) -> Any:
    """A short name of ``aliases`` as its ``module:Class``; a name that is neither is refused
    here, naming the short names, rather than by the pattern's regular expression."""
    if not isinstance(value, str) or ":" in value:
        return value
    if value in aliases:
        return aliases[value]
    raise ValueError(
        f"neither module:Class nor a built-in {kind}'s short name ({', '.join(sorted(aliases))})"
    )


def _expander(aliases: dict[str, str], kind: str) -> BeforeValidator:
    """Expands a short name of ``aliases`` to its ``module:Class`` when validated."""
    return BeforeValidator(lambda value: _expand(value, aliases, kind))


def _alias_schema(aliases: dict[str, str], kind: str) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "anyOf": [{"enum": sorted(aliases)}, {"type": "string", "pattern": REFERENCE_PATTERN}],
            "description": f"module:Class, or a built-in {kind}'s short name",
        }
    )


ClassReference = Annotated[
    str,
    _expander(PROVIDER_ALIASES, "provider"),
    Field(pattern=REFERENCE_PATTERN),
    _alias_schema(PROVIDER_ALIASES, "provider"),
]
"""A class as ``module:qualname``, or one of :data:`PROVIDER_ALIASES`."""


class DescriptorSpec(_Strict):
    """A resource given by class (``module:qualname`` or a provider alias) and arguments."""

    class_path: ClassReference = Field(alias="class")
    arguments: dict[str, Any] = Field(default_factory=dict)

    # Refused here too, so the error names the file and line (and never shows the value).
    _no_literal_secrets = field_validator("arguments")(refuse_literal_secrets)


class ResourceSpec(DescriptorSpec):
    """A resource of any type (the generic form behind the typed blocks)."""

    type: ResourceType


class _SetupSpec(_Strict):
    """What every setup on top of a connection has (a subclass adds ``class`` and its own)."""

    connection: str
    model: str | None = None
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Further arguments for a custom setup class."
    )


def _setup_class(default: str) -> Any:
    """The ``class`` field of a setup block: a reference, ``default`` when not given."""
    return Field(default=default, alias="class", pattern=REFERENCE_PATTERN)


class ChatModelSpec(_SetupSpec):
    """A chat model setup on top of a connection."""

    class_path: str = _setup_class("flink_agents.api.chat_models:ChatModelSetup")
    prompt: str | None = Field(default=None, description="Name of a prompt used as system prompt.")
    tools: list[str] | None = None
    subagents: list[str] | None = Field(
        default=None, description="Sub-agents offered to the model as subagent_<name> callables."
    )
    temperature: float | None = None
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description="auto, required, none, or the name of an offered tool (forced until the "
        "first tool result); unset: the provider's default (OpenAI-compatible: auto).",
    )
    parallel_tool_calls: bool | None = Field(
        default=None, description="Whether the model may ask for several tools in one turn."
    )
    structured_output_mode: StructuredOutput | None = Field(
        default=None,
        description="How an output_schema is asked for: native (the provider's JSON-schema "
        "field), prompt (in the system message) or auto; default: the connection's (auto).",
    )
    extra: dict[str, Any] | None = None
    compaction: CompactionSettings | None = Field(
        default=None,
        description="Summarize a conversation's older turns past a token threshold before a "
        "chat action's model call.",
    )


class PromptSpec(_Strict):
    """A prompt template: one user ``text`` or chat ``messages``, with ``{placeholders}``."""

    text: str | None = None
    messages: list[ChatMessage] | None = None


class FunctionToolSpec(_Strict):
    """A function tool of a YAML agent: a ``module:function`` reference (the tool offered to a
    model is described by :class:`flink_agents.api.chat.ToolSpec`)."""

    function: str = Field(pattern=REFERENCE_PATTERN, description="module:function")
    description: str | None = None
    requires_approval: bool = Field(
        default=False, description="Every call waits for a person's approval (docs/waits.md)."
    )
    approval_timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds an approval may take before it is refused."
    )
    approval_deciders: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Who may decide an approval (a decision's 'by'); others' are refused.",
    )


class McpPromptSpec(_Strict):
    """A prompt of an MCP server, as a prompt resource (rendered by the server when opened)."""

    prompt: str = Field(description="The prompt's name on the server.")
    arguments: dict[str, str] = Field(default_factory=dict)


def _server_name(name: str) -> str:
    if not re.match(TOOL_NAMESPACE_PATTERN, name):
        raise ValueError(
            "an MCP server's name must be 1-32 of A-Z a-z 0-9 _ - (the characters of a tool "
            "name): it is also its tools' namespace, unless 'namespace' gives another"
        )
    return name


McpServerName = Annotated[str, AfterValidator(_server_name)]


class McpServerSpec(_Strict):
    """An MCP server (a TOOL resource): a chat model listing it in ``tools`` is offered each of
    its tools as ``<namespace>__<tool>``. See docs/mcp.md."""

    namespace: str | None = Field(
        default=None,
        pattern=TOOL_NAMESPACE_PATTERN,
        description="Prefix of the offered tool names; defaults to the server's name.",
    )
    transport: dict[str, Any] = Field(
        description="{type: stdio, command, args, env, cwd} or {type: http, url, header_env, "
        "bearer_token_env}; header values by environment variable name only."
    )
    include: list[str] | None = Field(
        default=None, description="The server's tools to offer (default: all)."
    )
    # int | float: kept as written (20 stays 20), so the plan is the Python form's byte for byte.
    timeout_seconds: int | float | None = Field(default=None, gt=0, description="Per attempt.")
    retry: dict[str, Any] | None = Field(
        default=None, description="max_attempts, initial_backoff_seconds, ... (RetryPolicy)."
    )
    tool_settings: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="By the tool's name on the server: {idempotent: false} for a tool with side "
        "effects, timeout_seconds, retry (McpToolSettings).",
    )
    prompts: dict[str, McpPromptSpec] = Field(
        default_factory=dict, description="Prompt resources (by name) rendered by this server."
    )


# --- retrieval: embedding models and vector stores (docs/retrieval.md) ---------------------------

EMBEDDING_PROVIDER_ALIASES: dict[str, str] = {
    "openai": "flink_agents.providers.openai_embeddings:OpenAICompatibleEmbeddingModelConnection",
    "ollama": "flink_agents.providers.ollama_embeddings:OllamaEmbeddingModelConnection",
    "hashing": "flink_agents.providers.hashing_embeddings:HashingEmbeddingModelConnection",
}
"""Short names of the built-in embedding connection classes."""

VECTOR_STORE_ALIASES: dict[str, str] = {
    "memory": "flink_agents.providers.memory_vector_store:InMemoryVectorStore",
    "chroma": "flink_agents.providers.chroma:ChromaVectorStore",
}
"""Short names of the built-in vector store classes."""


EmbeddingClassReference = Annotated[
    str,
    _expander(EMBEDDING_PROVIDER_ALIASES, "embedding connection"),
    Field(pattern=REFERENCE_PATTERN),
    _alias_schema(EMBEDDING_PROVIDER_ALIASES, "embedding connection"),
]
VectorStoreClassReference = Annotated[
    str,
    _expander(VECTOR_STORE_ALIASES, "vector store"),
    Field(pattern=REFERENCE_PATTERN),
    _alias_schema(VECTOR_STORE_ALIASES, "vector store"),
]


class EmbeddingConnectionSpec(DescriptorSpec):
    """An embedding model connection: class (or ``openai``, ``ollama``, ``hashing``) and
    arguments."""

    class_path: EmbeddingClassReference = Field(alias="class")


class EmbeddingModelSpec(_SetupSpec):
    """An embedding model setup on top of a connection."""

    class_path: str = _setup_class("flink_agents.api.embeddings:EmbeddingModelSetup")
    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="Length of every vector; replies are checked. Unset: the first reply's.",
    )
    batch_size: int | None = Field(default=None, ge=1)
    request_dimensions: bool | None = None


class VectorStoreSpec(DescriptorSpec):
    """A vector store: class (or ``memory``, ``chroma``) and arguments."""

    class_path: VectorStoreClassReference = Field(alias="class")


class MemorySetSpec(_Strict):
    """A long-term memory set of each key (docs/memory.md)."""

    class_path: str = _setup_class("flink_agents.api.long_term_memory:LongTermMemorySetup")
    embedding_model: str = Field(description="Name of an embedding model.")
    backend: Literal["keyed_state", "vector_store"] | None = Field(
        default=None,
        description="Where items live (keyed_state: the key's state; vector_store: a "
        "namespace per key of the store named by vector_store). Unset: the agent's config "
        "long_term_memory_backend, else keyed_state.",
    )
    vector_store: str | None = Field(
        default=None, description="Name of a vector store (Chroma) for backend vector_store."
    )
    max_items: int | None = Field(default=None, ge=1, description="Items one key may hold.")
    extraction: MemoryExtraction | None = Field(
        default=None, description="The chat model with which `remember` extracts facts."
    )
    compaction: MemoryCompaction | None = Field(
        default=None,
        description="Compact a key's items into fewer facts once a run leaves more than "
        "max_items (keyed_state backend).",
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Further arguments for a custom setup class."
    )


class ActionFunctionSpec(_Strict):
    """An action of a YAML agent: a ``module:function`` reference and the event types it
    handles (what ``@action`` records on a function is :class:`flink_agents.api.agent.ActionSpec`).

    ``listen_to`` may be left out when the function carries an ``@action`` decorator.
    """

    name: str | None = Field(default=None, description="Defaults to the function's name.")
    function: str = Field(pattern=REFERENCE_PATTERN, description="module:function")
    listen_to: list[str] | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class ReactSpec(_Strict):
    """Makes the agent a ReAct agent (prompt -> model <-> tools -> output)."""

    chat_model: str = Field(description="Name of a chat model.")
    prompt: str | None = Field(default=None, description="Name of a prompt for the input.")
    output_schema: str | None = Field(
        default=None, pattern=REFERENCE_PATTERN, description="A pydantic model as module:Class."
    )
    max_tool_rounds: int = Field(default=10, ge=1)
    max_tool_calls_per_reply: int = Field(
        default=64,
        ge=1,
        description="Tool calls one model reply may ask for; a reply with more ends the run.",
    )
    max_tool_calls_per_run: int = Field(
        default=DEFAULT_MAX_TOOL_CALLS_PER_RUN,
        ge=1,
        description="Tool calls the model may ask for in one run, over all its replies; a reply "
        "that goes past it ends the run.",
    )
    output_retries: int = Field(
        default=DEFAULT_OUTPUT_RETRIES,
        ge=0,
        description="With output_schema: how many times an answer that does not match it goes "
        "back to the model with the validation error (0: the run fails at once).",
    )
    retrieval: RetrievalSettings | None = Field(
        default=None, description="Retrieve passages for the input before asking the model."
    )
    compaction: CompactionSettings | None = Field(
        default=None,
        description="Summarize the conversation's older turns past a token threshold (over "
        "the chat model's own compaction).",
    )


class InternalSubagentSpec(_Strict):
    """An agent registered as an internal sub-agent, with this registration's metadata."""

    agent: str | AgentSpec = Field(
        description="The child: the name of another agent of this file, or an agent inline."
    )
    description: str | None = None
    input_schema: dict[str, Any] | None = Field(
        default=None, description="JSON schema of the input a chat model sends."
    )
    input_type: str | None = Field(
        default=None, pattern=REFERENCE_PATTERN, description="A pydantic model as module:Class."
    )
    result_type: str | None = Field(
        default=None, pattern=REFERENCE_PATTERN, description="A type as module:Class."
    )
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Limit of the whole child run (default 600)."
    )


class AgentSpec(_Strict):
    """One agent."""

    name: str = Field(min_length=1)
    description: str | None = Field(default=None, description="What the agent does.")
    error_policy: ErrorPolicy = "fail"
    while_paused: PausedPolicy = Field(
        default="queue",
        description="While a run of a key is paused at a wait: the key's later inputs queue "
        "behind it (queue, per-key order) or run alongside it (alongside); docs/waits.md.",
    )
    config: dict[str, Any] = Field(default_factory=dict)
    react: ReactSpec | None = None
    connections: dict[str, DescriptorSpec] = Field(default_factory=dict)
    chat_models: dict[str, ChatModelSpec] = Field(default_factory=dict)
    prompts: dict[str, str | PromptSpec] = Field(default_factory=dict)
    tools: dict[str, FunctionToolSpec] = Field(default_factory=dict)
    subagents: dict[str, DescriptorSpec | InternalSubagentSpec] = Field(
        default_factory=dict,
        description="Sub-agents (AGENT resources): a SubagentSetup by class and arguments, or "
        "an agent registered as an internal sub-agent.",
    )
    resources: dict[str, ResourceSpec] = Field(default_factory=dict)
    mcp_servers: dict[McpServerName, McpServerSpec] = Field(
        default_factory=dict, description="MCP servers (TOOL resources) and their prompts."
    )

    actions: list[ActionFunctionSpec] = Field(default_factory=list)
    embedding_connections: dict[str, EmbeddingConnectionSpec] = Field(default_factory=dict)
    embedding_models: dict[str, EmbeddingModelSpec] = Field(default_factory=dict)
    vector_stores: dict[str, VectorStoreSpec] = Field(default_factory=dict)
    memory_sets: dict[str, MemorySetSpec] = Field(
        default_factory=dict, description="Long-term memory sets (docs/memory.md)."
    )
    budgets: Budgets | None = Field(
        default=None, description="What the agent's model calls may spend (docs/budgets.md)."
    )


InternalSubagentSpec.model_rebuild()


class AgentsFile(_Strict):
    """A YAML agents file: its agents, and connections every one of them gets."""

    connections: dict[str, DescriptorSpec] = Field(
        default_factory=dict,
        description="Connections shared by every agent of the file (an agent may not redeclare "
        "one); inline sub-agents reach them through their parent.",
    )
    agents: list[AgentSpec] = Field(min_length=1)


def agents_json_schema() -> dict[str, Any]:
    """The JSON Schema of the YAML format."""
    schema = AgentsFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "flink-agents YAML agents"
    return schema
