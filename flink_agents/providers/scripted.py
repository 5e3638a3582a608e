"""A scripted chat model: deterministic replies and tool calls, with latency and call counters.

For tests, demos and benchmarks. The reply is chosen by the conversation's turn (the number of
assistant messages already in the request), so it does not depend on how runs of different keys
interleave. ``$input`` (the first user message) and ``$last`` (the last message) are substituted
in reply text and in string tool arguments.

Counters live in a class-level registry keyed by the connection's ``name``, since the runtime
builds resources from descriptors: read them with :meth:`ScriptedChatModelConnection.stats`.
"""

from __future__ import annotations

import asyncio
import string
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall
from flink_agents.api.chat_models import ChatModelConnection


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    """The model's reply on one turn: text, tool calls, or an error to raise."""

    content: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    error: str | None = None


class ScriptedModelError(RuntimeError):
    """Raised by a turn with ``error`` set, or when the script runs out of turns."""


@dataclass
class CallStats:
    """Calls made to one scripted connection."""

    total: int = 0
    in_flight: int = 0
    max_in_flight: int = 0


def _substitute(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).safe_substitute(variables)
    if isinstance(value, dict):
        return {k: _substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, variables) for v in value]
    return value


class ScriptedChatModelConnection(ChatModelConnection):
    """A chat model connection that plays ``turns``, waiting ``latency_seconds`` per call."""

    _stats: ClassVar[dict[str, CallStats]] = {}

    name: str = Field(default="scripted", description="Key of this connection's counters.")
    turns: list[ScriptedTurn] = Field(min_length=1)
    latency_seconds: float = Field(default=0.0, ge=0)

    @classmethod
    def stats(cls, name: str = "scripted") -> CallStats:
        """Counters of the connections named ``name`` (created on first use)."""
        return cls._stats.setdefault(name, CallStats())

    @classmethod
    def reset_stats(cls, name: str | None = None) -> None:
        """Forget the counters of ``name``, or of every connection."""
        if name is None:
            cls._stats.clear()
        else:
            cls._stats.pop(name, None)

    async def chat(self, request: ChatRequest) -> ChatMessage:
        stats = self.stats(self.name)
        stats.total += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            if self.latency_seconds:
                await asyncio.sleep(self.latency_seconds)
            return self.reply(request.messages)
        finally:
            stats.in_flight -= 1

    def reply(self, messages: list[ChatMessage]) -> ChatMessage:
        """The scripted answer to a conversation: the turn is the number of assistant
        messages so far, so replies are deterministic however keys interleave."""
        turn_index = sum(1 for m in messages if m.role == "assistant")
        if turn_index >= len(self.turns):
            raise ScriptedModelError(
                f"scripted model {self.name!r} has {len(self.turns)} turn(s); "
                f"asked for turn {turn_index + 1}"
            )
        turn = self.turns[turn_index]
        if turn.error is not None:
            raise ScriptedModelError(turn.error)
        users = [m.content for m in messages if m.role == "user"]
        variables = {"input": users[0] if users else "", "last": messages[-1].content}
        return ChatMessage(
            role="assistant",
            content=_substitute(turn.content, variables),
            tool_calls=[
                ToolCall(
                    id=f"call_{turn_index}_{position}",
                    name=call.name,
                    arguments=_substitute(call.arguments, variables),
                )
                for position, call in enumerate(turn.tool_calls)
            ],
        )
