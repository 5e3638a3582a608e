"""Routing rules of a chat model connection that routes among others: :class:`Route` (where
requests that match one rule go) and :class:`Classifier` (a small model whose label routes
match). The connection is :class:`flink_agents.providers.routing.RoutingChatModelConnection`;
the plan checks its rules when it is compiled (:class:`RoutingRules`)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flink_agents.api.chat import ChatMessage, ChatRequest

_MISSING = object()

DEFAULT_CLASSIFIER_INSTRUCTIONS = (
    "Classify the user's message. Answer with exactly one of these labels and nothing else: "
    "{labels}."
)


class Route(BaseModel):
    """Where requests that match one rule go: exactly one of ``max_input_tokens``, ``field``
    (with ``equals`` or ``one_of``) or ``label``."""

    model_config = ConfigDict(extra="forbid")

    connections: list[str] = Field(
        min_length=1, description="Chat model connections to ask, in order (a fallback chain)."
    )
    max_input_tokens: int | None = Field(
        default=None, ge=1, description="Matches a prompt of at most this many estimated tokens."
    )
    field: str | None = Field(
        default=None,
        pattern=r"^(request|input)\.[^.]+(\.[^.]+)*$",
        description="A dotted path: 'request.<field>' into the request (request.extra.tier), "
        "'input.<field>' into the last user message read as a JSON object.",
    )
    equals: Any = Field(default=None, description="The field's value that matches.")
    one_of: list[Any] | None = Field(default=None, description="Values of the field that match.")
    label: str | None = Field(
        default=None, min_length=1, description="Matches when the classifier gives this label."
    )

    @model_validator(mode="after")
    def _one_rule(self) -> Route:
        rules = [self.max_input_tokens is not None, self.field is not None, self.label is not None]
        if sum(rules) != 1:
            raise ValueError("a route needs exactly one of max_input_tokens, field or label")
        if self.field is not None and (self.equals is None) == (self.one_of is None):
            raise ValueError(f"route on field {self.field!r} needs exactly one of equals, one_of")
        if self.field is None and (self.equals is not None or self.one_of is not None):
            raise ValueError("equals and one_of go with field")
        return self

    def matches(self, request: ChatRequest, tokens: int, label: str | None) -> str | None:
        """Why this route takes ``request`` (of ``tokens`` estimated, labelled ``label``), or
        None when it does not."""
        if self.max_input_tokens is not None:
            if tokens <= self.max_input_tokens:
                return f"input of {tokens} estimated tokens <= {self.max_input_tokens}"
            return None
        if self.field is not None:
            value = _field(request, self.field)
            wanted = [self.equals] if self.one_of is None else self.one_of
            return f"{self.field} is {value!r}" if value in wanted else None
        return f"classified {label!r}" if label is not None and label == self.label else None


class Classifier(BaseModel):
    """A small model that labels each request's last user message; routes match its label."""

    model_config = ConfigDict(extra="forbid")

    connection: str = Field(description="The chat model connection that classifies.")
    labels: list[str] = Field(min_length=2, description="The labels it may answer.")
    instructions: str = Field(
        default=DEFAULT_CLASSIFIER_INSTRUCTIONS,
        min_length=1,
        description="Its system message; '{labels}' is replaced by the labels, comma-separated.",
    )
    max_tokens: int = Field(default=8, ge=1, description="The classifier's max_tokens.")

    def request(self, request: ChatRequest) -> ChatRequest:
        """The classifying request for ``request``'s last user message."""
        system = self.instructions.replace("{labels}", ", ".join(self.labels))
        return ChatRequest(
            messages=[
                ChatMessage(role="system", content=system),
                ChatMessage(role="user", content=last_user_text(request)),
            ],
            max_tokens=self.max_tokens,
            temperature=0.0,
        )

    def label_of(self, answer: str) -> str | None:
        """The label ``answer`` names (case and surrounding punctuation ignored), if any."""
        said = answer.strip().strip(".'\"`").strip().lower()
        return next((label for label in self.labels if label.lower() == said), None)


class RoutingRules(BaseModel):
    """A routing connection's ``routes`` and ``classifier``, checked together: routes by label
    need a classifier that gives their labels."""

    model_config = ConfigDict(extra="ignore")

    routes: list[Route] = Field(default_factory=list, description="Rules, first match wins.")
    classifier: Classifier | None = Field(
        default=None, description="The model whose label routes by label match."
    )

    @model_validator(mode="after")
    def _labels_are_classified(self) -> RoutingRules:
        check_route_labels(self.routes, self.classifier)
        return self


def check_route_labels(routes: list[Route], classifier: Classifier | None) -> None:
    """Refuse routes by label without a classifier, or naming a label it does not give."""
    labels = [route.label for route in routes if route.label is not None]
    if not labels:
        return
    if classifier is None:
        raise ValueError("routes by label need a classifier")
    unknown = [label for label in labels if label not in classifier.labels]
    if unknown:
        raise ValueError(
            f"routes by label {unknown} name labels the classifier does not give: "
            f"{classifier.labels}"
        )


def last_user_text(request: ChatRequest) -> str:
    """The content of ``request``'s last user message ("" without one)."""
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def _field(request: ChatRequest, path: str) -> Any:
    """The value at ``path`` (``request.a.b`` or ``input.a.b``); ``_MISSING`` when absent."""
    root, *steps = path.split(".")
    value: Any
    if root == "request":
        value = request.model_dump(mode="json")
    else:
        try:
            value = json.loads(last_user_text(request))
        except ValueError:
            return _MISSING
    for step in steps:
        if not isinstance(value, dict) or step not in value:
            return _MISSING
        value = value[step]
    return value
