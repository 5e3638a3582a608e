"""A chat model connection that falls back: :class:`FallbackChatModelConnection`.

It answers each request with the first of its ``connections`` that does: when one fails for good
(an error that is final, a timeout or a rate limit after its retries), the next one is asked.
The reply names the connection and the model that answered (``ChatMessage.connection``,
``ChatMessage.model``); it is the durable call's
recorded outcome, so a replay hands back the same answer without asking any connection again.
"""

from __future__ import annotations

from typing import cast

from pydantic import Field

from flink_agents.api.attempts import (
    CountedAttempts,
    current_attempt_tracker,
    tracking_attempts,
)
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.connection_notes import ConnectionNote, note_connection
from flink_agents.api.context import InfrastructureError
from flink_agents.api.resources import ResourceType


class FallbackChatModelConnection(ChatModelConnection):
    """Asks ``connections`` (chat model connections of the agent, by name) in order, each with
    its own retries, until one answers; the last one's failure is the call's.

    The first connection's attempts count against the durable call's attempt budget, as any
    connection's do; a fallback's are counted in memory (they start again after a restart).
    A request that names a model sends it to every connection; otherwise each answers with its
    own ``model``. Structured output is asked in the prompt (``native_schema`` is off: the
    connections may differ).
    """

    connections: list[str] = Field(
        min_length=1, description="Chat model connections to ask, in order."
    )

    def open(self) -> None:
        """Fail the start, not the first call, when a name is not a chat model connection."""
        super().open()
        for name in self.connections:
            self.get_resource(name, ResourceType.CHAT_MODEL_CONNECTION)

    async def chat(self, request: ChatRequest) -> ChatMessage:
        return await self.ask_in_order(self.connections, request)

    async def ask_in_order(self, names: list[str], request: ChatRequest) -> ChatMessage:
        """Ask the connections ``names`` in order until one answers; the reply names the
        connection and the model that answered. Each move to the next is noted
        (``fallback``)."""
        last = len(names) - 1
        for index, name in enumerate(names):
            connection = cast(
                ChatModelConnection, self.get_resource(name, ResourceType.CHAT_MODEL_CONNECTION)
            )
            try:
                if index == 0 or current_attempt_tracker.get() is None:
                    reply = await connection.chat(request)
                else:
                    # A fallback's attempts are its own, in memory: the durable call's may be spent.
                    with tracking_attempts(CountedAttempts()):
                        reply = await connection.chat(request)
            except InfrastructureError:
                raise
            except Exception as exc:
                if index == last:
                    raise
                why = f"{name} failed: {type(exc).__name__}: {exc}"
                note_connection(ConnectionNote(self.describe(), "fallback", why, names[index + 1]))
                continue
            answered = request.model or getattr(connection, "model", None)
            return reply.model_copy(update={"model": answered, "connection": name})
        raise AssertionError("unreachable: names has at least one")
