"""Prompt templates with ``{placeholders}``.

Only ``{name}``, with a Python identifier between the braces, is a placeholder. Any other brace is
literal, so a JSON example stands in a prompt as it is (``{"id": 1}``). ``{{`` and ``}}`` still
write one literal brace, which keeps ``{{name}}`` (a literal ``{name}``) and older prompts that
doubled their braces working.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import model_validator

from flink_agents.api.chat import ChatMessage
from flink_agents.api.resources import Resource, ResourceType


class MissingPlaceholderError(KeyError):
    """A template needs a value that was not supplied."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else super().__str__()


_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(template: str) -> list[str]:
    """Names of the ``{placeholders}`` in ``template``, in order of appearance."""
    return [match.group(1) for match in _TOKEN.finditer(template) if match.group(1)]


def fill(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``template``; a missing value is an error that names it (no silent blanks)."""
    missing = [name for name in placeholders(template) if name not in values]
    if missing:
        raise MissingPlaceholderError(
            f"prompt needs {', '.join(repr(m) for m in missing)}; got {sorted(values)}"
        )

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(values[name]) if name else match.group(0)[0]

    return _TOKEN.sub(replace, template)


class Prompt(Resource):
    """A template: either one ``text`` (a user message) or a list of ``messages``.

    ``{name}`` is a placeholder; other braces are literal; ``{{`` and ``}}`` write one brace.
    """

    resource_type: ClassVar[ResourceType] = ResourceType.PROMPT

    text: str | None = None
    messages: list[ChatMessage] | None = None

    @model_validator(mode="after")
    def _exactly_one_form(self) -> Prompt:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a prompt has exactly one of 'text' or 'messages'")
        return self

    @property
    def placeholders(self) -> list[str]:
        """Every placeholder the prompt needs, once each, in order of appearance."""
        texts = [self.text] if self.text is not None else [m.content for m in self.messages or []]
        return list(dict.fromkeys(name for text in texts for name in placeholders(text)))

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
