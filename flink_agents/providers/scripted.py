"""A scripted chat model: deterministic replies and tool calls, with latency and call counters.

For tests, demos and benchmarks. A turn with a ``match`` (a regular expression) is chosen
whenever it is found in the content of the last message that is not a system message (what the
model answers: the user's text or a tool's result); the first such turn wins. Otherwise the reply
is the turn without ``match`` numbered by the conversation's turn (the number of assistant
messages already in the request), so it does not depend on how runs of different keys interleave.

``$input`` (the first user message) and ``$last`` (the last message) are substituted in reply
text and in string tool arguments; ``$input.<path>`` (and ``$last.<path>``) read a field of a
message holding JSON, one key or list index per dotted part (``$input.review.stars``). A
variable that does not resolve is left as written; ``$$`` writes ``$``.

Counters live in a class-level registry keyed by the connection's ``name``, since the runtime
builds resources from descriptors: read them with :meth:`ScriptedChatModelConnection.stats`.
"""

from __future__ import annotations

import asyncio
import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field, PrivateAttr

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall
from flink_agents.api.chat_models import ChatModelConnection


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    """The model's reply on one turn: text, tool calls, or an error to raise.

    With ``match`` the turn is chosen by content (the pattern found in the last non-system
    message) rather than by turn number.
    """

    match: str | None = Field(default=None, description="A regular expression (re.search).")
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


class _Template(string.Template):
    idpattern = r"(?a:[_a-z][_a-z0-9]*(?:\.[_a-z0-9]+)*)"


class _Variables(Mapping[str, str]):
    """``input``/``last`` and dotted paths into them (messages holding JSON)."""

    def __init__(self, messages: Mapping[str, str]) -> None:
        self._messages = messages

    def __getitem__(self, name: str) -> str:
        head, *path = name.split(".")
        text = self._messages[head]
        if not path:
            return text
        try:
            value: Any = json.loads(text)
        except json.JSONDecodeError:
            raise KeyError(name) from None
        for part in path:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise KeyError(name)
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    def __iter__(self) -> Any:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)


def _substitute(value: Any, variables: _Variables) -> Any:
    if isinstance(value, str):
        return _Template(value).safe_substitute(variables)
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
    _by_number: list[ScriptedTurn] = PrivateAttr(default_factory=list)
    _by_content: list[tuple[re.Pattern[str], ScriptedTurn]] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any) -> None:
        # A bad pattern fails when the resource is built, not on the first call.
        self._by_number = [turn for turn in self.turns if turn.match is None]
        self._by_content = [(re.compile(t.match), t) for t in self.turns if t.match is not None]

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
        async with self.attempt_gate(request):
            reply = await self._play(request)
        self.rate_limit_settle(request, reply.usage)
        return reply

    async def _play(self, request: ChatRequest) -> ChatMessage:
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
        """The scripted answer to a conversation: the first turn whose ``match`` is found in
        the last non-system message, else the turn numbered by the assistant messages so far
        (replies are deterministic however keys interleave)."""
        turn_index = sum(1 for m in messages if m.role == "assistant")
        last = messages[-1].content if messages else ""
        answered = next((m.content for m in reversed(messages) if m.role != "system"), "")
        by_content: list[tuple[re.Pattern[str], ScriptedTurn]] = self._private("_by_content")
        by_number: list[ScriptedTurn] = self._private("_by_number")
        turn = next((t for pattern, t in by_content if pattern.search(answered)), None)
        if turn is None:
            if turn_index >= len(by_number):
                raise ScriptedModelError(
                    f"scripted model {self.name!r} has {len(by_number)} numbered turn(s) "
                    f"and no matching one; asked for turn {turn_index + 1}"
                )
            turn = by_number[turn_index]
        if turn.error is not None:
            raise ScriptedModelError(turn.error)
        users = [m.content for m in messages if m.role == "user"]
        variables = _Variables({"input": users[0] if users else "", "last": last})
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
