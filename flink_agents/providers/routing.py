"""A chat model connection that routes by rule: :class:`RoutingChatModelConnection`.

Each request goes to the connections of the first of its ``routes`` that matches it (by the
prompt's estimated size, a field of the request or of its input, or a label a small classifier
model gives it), asked in order as
:class:`~flink_agents.providers.fallback.FallbackChatModelConnection` asks its own; a request
no route matches goes to ``connections``. The whole request, the
classifier's call included, is one durable call: its recorded reply names the connection and the
model that answered, so a replay hands it back without asking the router, the classifier or any
connection again.
"""

from __future__ import annotations

from typing import cast

from pydantic import Field, model_validator

from flink_agents.api.chat import ChatMessage, ChatRequest, estimated_prompt_tokens
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.connection_notes import ConnectionNote, note_connection
from flink_agents.api.context import InfrastructureError
from flink_agents.api.resources import ResourceType
from flink_agents.api.routing_rules import Classifier, Route, check_route_labels
from flink_agents.providers.fallback import FallbackChatModelConnection


class RoutingChatModelConnection(FallbackChatModelConnection):
    """Sends each request to the connections of the first of ``routes`` that matches it, asked
    in order until one answers; unmatched requests go to ``connections``. Routes by label need
    a ``classifier``. Each decision is noted (``routed``), each move to the next connection too
    (``fallback``)."""

    routes: list[Route] = Field(default_factory=list, description="Rules, first match wins.")
    classifier: Classifier | None = Field(
        default=None, description="The model whose label routes by label match."
    )

    @model_validator(mode="after")
    def _labels_are_classified(self) -> RoutingChatModelConnection:
        check_route_labels(self.routes, self.classifier)
        return self

    def open(self) -> None:
        """Fail the start when a route or the classifier names no chat model connection."""
        super().open()
        names = [name for route in self.routes for name in route.connections]
        if self.classifier is not None:
            names.append(self.classifier.connection)
        for name in names:
            self.get_resource(name, ResourceType.CHAT_MODEL_CONNECTION)

    async def chat(self, request: ChatRequest) -> ChatMessage:
        names, why = await self.route(request)
        note_connection(ConnectionNote(self.describe(), "routed", why, names[0]))
        return await self.ask_in_order(names, request)

    async def route(self, request: ChatRequest) -> tuple[list[str], str]:
        """The connections ``request`` goes to, and why."""
        tokens = estimated_prompt_tokens(request)
        label = await self._label(request) if self.classifier is not None else None
        for route in self.routes:
            why = route.matches(request, tokens, label)
            if why is not None:
                return route.connections, why
        return self.connections, "no route matched"

    async def _label(self, request: ChatRequest) -> str | None:
        """The classifier's label of ``request``; None when it fails or answers no label (the
        request then goes by the other rules)."""
        classifier = self.classifier
        assert classifier is not None
        connection = cast(
            ChatModelConnection,
            self.get_resource(classifier.connection, ResourceType.CHAT_MODEL_CONNECTION),
        )
        try:
            answer = await connection.chat(classifier.request(request))
        except InfrastructureError:
            raise
        except Exception as exc:
            why = f"classifier {classifier.connection} failed: {type(exc).__name__}: {exc}"
            note_connection(ConnectionNote(self.describe(), "routed", why))
            return None
        return classifier.label_of(answer.content)
