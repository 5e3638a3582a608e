"""Chat data exchanged with models: messages, tool calls and tool specs."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from flink_agents.api.json_values import JsonLimitError, read_json

Role = Literal["system", "user", "assistant", "tool"]

_QUOTED_ARGUMENTS_CHARS = 200
"""How much of unparsable tool-call arguments an error quotes back to the model."""


def left_out_while_none(value: Any) -> bool:
    """``exclude_if`` of a field added after values of its model were first recorded: left out
    of the dump while None, so a value that does not use it dumps (and digests, as a recorded
    call's argument) as it did before the field existed."""
    return value is None


class ToolArgumentsError(ValueError):
    """A model called a tool with arguments that are not a JSON object. The tool is not run;
    the error goes back to the model as the call's result, like any tool failure."""


class ToolCall(BaseModel):
    """A model's request to call the tool ``name`` with ``arguments``.

    A protocol that sends arguments as JSON text (chat completions) may get text that is not a
    JSON object: :meth:`from_json_text` then keeps it as it came in ``unparsed_arguments``
    (``arguments`` is empty), and :meth:`checked_arguments` raises :class:`ToolArgumentsError`.
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    unparsed_arguments: str | None = Field(
        default=None,
        exclude_if=left_out_while_none,
        description="The arguments as the model sent them when they were not a JSON object.",
    )

    @classmethod
    def from_json_text(cls, id: str, name: str, text: str | None) -> ToolCall:
        """A call whose arguments came as JSON text (no text: no arguments)."""
        try:
            arguments = read_json(text or "{}")
        except ValueError:  # not JSON, or JSON nested too deep for a tool call's arguments
            arguments = None
        if isinstance(arguments, dict):
            return cls(id=id, name=name, arguments=arguments)
        return cls(id=id, name=name, unparsed_arguments=text)

    def checked_arguments(self) -> dict[str, Any]:
        """``arguments``; :class:`ToolArgumentsError` when the model's were not a JSON object."""
        text = self.unparsed_arguments
        if text is None:
            return self.arguments
        try:
            read_json(text)
        except json.JSONDecodeError as exc:
            why = f"not JSON ({exc})"
        except JsonLimitError as exc:
            why = f"JSON beyond what a call takes ({exc})"
        else:
            why = "JSON but not an object"
        quoted = text if len(text) <= _QUOTED_ARGUMENTS_CHARS else text[:_QUOTED_ARGUMENTS_CHARS]
        cut = "" if quoted is text else f" (first {_QUOTED_ARGUMENTS_CHARS} characters)"
        raise ToolArgumentsError(
            f"the arguments of this call of {self.name!r} are {why}: {quoted!r}{cut}; "
            "call it again with the arguments as one JSON object"
        )


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
    model: str | None = Field(
        default=None,
        exclude_if=left_out_while_none,
        description="The model that answered, on replies of a connection that routes among "
        "others (FallbackChatModelConnection).",
    )
    connection: str | None = Field(
        default=None,
        exclude_if=left_out_while_none,
        description="The connection that answered (its resource name), on replies of a "
        "connection that routes among others.",
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
    tool_choice: str | None = Field(
        default=None,
        exclude_if=left_out_while_none,
        description="'auto', 'required', 'none' or the name of an offered tool; unset: the "
        "provider's default (an OpenAI-compatible connection sends 'auto' with tools).",
    )
    parallel_tool_calls: bool | None = Field(
        default=None,
        exclude_if=left_out_while_none,
        description="Whether the model may ask for several tools in one turn.",
    )
    response_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON schema the reply's content must follow (structured output).",
    )
    extra: dict[str, Any] = Field(default_factory=dict)


PROMPT_CHARS_PER_TOKEN = 4
"""Characters a prompt token is estimated to take (no tokenizer)."""

PROMPT_CHARS_PER_MESSAGE = 16
"""Characters each message adds to a prompt's estimate (its role and framing)."""


def estimated_prompt_tokens(request: ChatRequest) -> int:
    """A prompt's tokens, estimated from its text: messages, tool calls and tools (no
    tokenizer: the estimate sizes budget reservations, rate-limit waits and routing by input
    size; the reply's reported usage is what counts)."""
    chars = 0
    for message in request.messages:
        chars += len(message.content) + PROMPT_CHARS_PER_MESSAGE
        for call in message.tool_calls:
            chars += len(call.name) + len(call.unparsed_arguments or json.dumps(call.arguments))
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    return -(-chars // PROMPT_CHARS_PER_TOKEN)
