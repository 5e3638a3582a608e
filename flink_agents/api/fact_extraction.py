"""Extraction: a model turns a run's text into facts for a memory set (docs/memory.md).

A memory set with :class:`MemoryExtraction` settings can ``remember(text)``: one durable model
call (``memory:<set>:extract:<n>``) asks the set's chat model for the facts ``text`` states, as
a JSON list of strings, and each fact is written under an id derived from the run's durable
identity and the fact's position. The reply is recorded, so a replay is handed the same facts
and writes the same ids: never a second model call, never a duplicate item.

:func:`facts_of` reads the reply: a JSON list of strings (or ``{"facts": [...]}``), optionally
in a Markdown code fence; anything else is a :class:`MemoryExtractionError`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.chat import ChatMessage, ChatRequest

DEFAULT_EXTRACTION_INSTRUCTIONS = (
    "You extract facts worth remembering about the subject of the text you are given (a "
    "customer, a device, a project): stable preferences, properties, decisions and events, "
    "each as one short self-contained sentence. Leave out greetings, questions and anything "
    "only true for this moment. Answer with a JSON list of strings and nothing else, [] when "
    "there is nothing to remember."
)

_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n\s*```$", re.DOTALL)


class MemoryExtractionError(ValueError):
    """The model's reply to an extraction call is not a list of facts."""


class MemoryExtraction(BaseModel):
    """How a memory set's ``remember`` asks a model for facts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_model: str = Field(
        min_length=1, description="Name of the chat_model resource that extracts the facts."
    )
    instructions: str = Field(
        default=DEFAULT_EXTRACTION_INSTRUCTIONS,
        min_length=1,
        description="The system message of the extraction call; the reply must be a JSON list "
        "of strings.",
    )


class ChatConnectionLike(Protocol):
    """What the extraction call uses of a chat model connection."""

    async def chat(self, request: ChatRequest) -> ChatMessage: ...


class ExtractionModel(Protocol):
    """What extraction uses of the chat model it names (a ``ChatModelSetup`` fits; named here
    by its shape because the chat models' module already depends on long-term memory's)."""

    def request_without_tools(self, messages: list[ChatMessage]) -> ChatRequest: ...

    def chat_connection(self) -> ChatConnectionLike: ...


def extraction_request(
    model: ExtractionModel, settings: MemoryExtraction, text: str
) -> ChatRequest:
    """The request of an extraction call: the instructions as the system message, ``text`` as
    the user's, without the setup's prompt and tools."""
    return model.request_without_tools(
        [
            ChatMessage(role="system", content=settings.instructions),
            ChatMessage(role="user", content=text),
        ]
    )


def facts_of(reply: str, where: str) -> list[str]:
    """The facts of an extraction call's ``reply``: its JSON list of strings (or the list of
    an object's ``facts``), each stripped, empty ones and repeats dropped, in order.
    :class:`MemoryExtractionError`, naming ``where`` (the run and call), for anything else."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced[1].strip()
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and set(value) == {"facts"}:
        value = value["facts"]
    if not isinstance(value, list) or not all(isinstance(fact, str) for fact in value):
        shown = reply if len(reply) <= 200 else reply[:200] + "..."
        raise MemoryExtractionError(
            f"{where}: the model's reply is not a JSON list of strings (the facts to "
            f"remember): {shown!r}"
        )
    facts: list[str] = []
    for fact in value:
        stripped = fact.strip()
        if stripped and stripped not in facts:
            facts.append(stripped)
    return facts
