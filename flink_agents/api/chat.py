"""Chat data exchanged with models: messages, tool calls and tool specs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A model's request to call the tool ``name`` with ``arguments``."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class TokenUsage(BaseModel):
    """Tokens a model call consumed, as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ChatMessage(BaseModel):
    """One message of a conversation."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, description="Set on role 'tool' replies.")
    usage: TokenUsage | None = Field(
        default=None, description="Set on model replies by providers that report token usage."
    )


class ToolSpec(BaseModel):
    """What a model is told about a tool: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ChatRequest(BaseModel):
    """Everything a connection needs for one model call."""

    model: str | None = None
    messages: list[ChatMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    response_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON schema the reply's content must follow (structured output).",
    )
    extra: dict[str, Any] = Field(default_factory=dict)
