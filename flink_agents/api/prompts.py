"""Prompt templates with ``{placeholders}``."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import model_validator

from flink_agents.api.chat import ChatMessage
from flink_agents.api.resources import Resource, ResourceType


class MissingPlaceholderError(KeyError):
    """A template needs a value that was not supplied."""


def placeholders(template: str) -> list[str]:
    """Names of the ``{placeholders}`` in ``template``, in order of appearance."""
    return [field for _, field, _, _ in string.Formatter().parse(template) if field]


def fill(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``template``; a missing value is an error that names it (no silent blanks)."""
    missing = [name for name in placeholders(template) if name not in values]
    if missing:
        raise MissingPlaceholderError(
            f"prompt needs {', '.join(repr(m) for m in missing)}; got {sorted(values)}"
        )
    return template.format_map(values)


class Prompt(Resource):
    """A template: either one ``text`` (a user message) or a list of ``messages``.

    ``{{`` and ``}}`` write literal braces.
    """

    resource_type: ClassVar[ResourceType] = ResourceType.PROMPT

    text: str | None = None
    messages: list[ChatMessage] | None = None

    @model_validator(mode="after")
    def _exactly_one_form(self) -> Prompt:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a prompt has exactly one of 'text' or 'messages'")
        return self

    def format(self, **values: Any) -> str:
        """The prompt as one string (messages are joined by blank lines)."""
        return "\n\n".join(message.content for message in self.format_messages(**values))

    def format_messages(self, **values: Any) -> list[ChatMessage]:
        """The prompt as chat messages, placeholders filled."""
        if self.text is not None:
            return [ChatMessage(role="user", content=fill(self.text, values))]
        assert self.messages is not None
        return [
            message.model_copy(update={"content": fill(message.content, values)})
            for message in self.messages
        ]
