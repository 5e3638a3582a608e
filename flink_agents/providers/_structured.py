"""Structured output: ask a model for a reply that follows a pydantic schema, and validate it.

Providers send :attr:`ChatRequest.response_schema` in their own way (a JSON-schema response
format, a forced tool, Ollama's ``format``) and return the JSON as the reply's content.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.chat_models import ChatModelConnection

M = TypeVar("M", bound=BaseModel)


class StructuredOutputError(ValueError):
    """A reply that does not follow the requested schema."""


def with_schema(request: ChatRequest, schema: type[BaseModel]) -> ChatRequest:
    """``request`` asking for replies that follow ``schema``."""
    return request.model_copy(update={"response_schema": schema.model_json_schema()})


def parse_reply(reply: ChatMessage, schema: type[M]) -> M:
    """The reply's content validated into ``schema``."""
    try:
        return schema.model_validate_json(reply.content)
    except ValidationError as exc:
        raise StructuredOutputError(
            f"reply does not follow {schema.__name__}: {exc.error_count()} error(s): "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()
            )
        ) from None


async def chat_structured(
    connection: ChatModelConnection, request: ChatRequest, schema: type[M]
) -> M:
    """Ask ``connection`` for a reply following ``schema``, validated into an instance of it."""
    return parse_reply(await connection.chat(with_schema(request, schema)), schema)
