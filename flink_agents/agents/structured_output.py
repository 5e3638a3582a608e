"""A chat model's final answer checked against an output schema, and the request to correct it.

:func:`~flink_agents.agents.chat_actions.chat_action` uses it to hand a validation error back to
the model (its ``output_retries``), :func:`~flink_agents.agents.react.react_finish` to parse the
answer into the run's output. A model that is not given the schema natively (see
:meth:`~flink_agents.api.chat_models.ChatModelSetup.uses_native_schema`) is given it in the
leading system message (:func:`with_schema_instruction`).
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ValidationError

from flink_agents.api.chat import ChatMessage

_FENCED = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

# A schema with many fields can fail on all of them: the model needs the first few to correct
# its answer, not a page of them in every retry (and in every later request's conversation).
_MAX_LISTED_ERRORS = 10

# Enough of a failed answer to see what the model did; an answer can be pages long.
_QUOTED_ANSWER_CHARS = 500


class OutputValidationError(ValueError):
    """The model's final answer still did not match the output schema when its attempts ran out.

    A ``ValueError``, like the pydantic ``ValidationError`` it carries as its cause.
    """


def parse_answer(schema: type[BaseModel], content: str) -> BaseModel:
    """``content`` (JSON, possibly in a Markdown code fence) validated into ``schema``."""
    text = content.strip()
    fenced = _FENCED.match(text)
    return schema.model_validate_json(fenced.group(1) if fenced else text)


def with_schema_instruction(
    messages: list[ChatMessage], schema: type[BaseModel]
) -> list[ChatMessage]:
    """``messages`` asking for a final answer that follows ``schema``: the instruction ends the
    leading system message, or is one placed first. Never after a user message: strict chat
    templates (Mistral's, Gemma's, llama.cpp's) refuse a system message there ("roles must
    alternate")."""
    schema_json = json.dumps(schema.model_json_schema(), sort_keys=True)
    instruction = (
        "Give your final answer as one JSON object matching this JSON schema, "
        f"with nothing else around it:\n{schema_json}"
    )
    if messages and messages[0].role == "system":
        first = messages[0]
        content = f"{first.content}\n\n{instruction}" if first.content else instruction
        return [first.model_copy(update={"content": content}), *messages[1:]]
    return [ChatMessage(role="system", content=instruction), *messages]


def quote_answer(content: str) -> str:
    """``content`` for an error message: its first characters, saying so when it is cut."""
    if len(content) <= _QUOTED_ANSWER_CHARS:
        return f"the answer was:\n{content}"
    return (
        f"the answer was (its first {_QUOTED_ANSWER_CHARS} of {len(content)} characters):\n"
        f"{content[:_QUOTED_ANSWER_CHARS]}"
    )


def describe_errors(error: ValidationError) -> str:
    """One line per problem (``- field.path: message``), without pydantic's header, echoed
    inputs and "For further information visit" URLs: what the model needs, and stable text."""
    problems = error.errors(include_url=False, include_context=False, include_input=False)
    lines = [
        f"- {'.'.join(str(part) for part in problem['loc']) or 'the answer'}: {problem['msg']}"
        for problem in problems[:_MAX_LISTED_ERRORS]
    ]
    if len(problems) > _MAX_LISTED_ERRORS:
        lines.append(f"- and {len(problems) - _MAX_LISTED_ERRORS} more")
    return "\n".join(lines)


def correction_request(schema: type[BaseModel], content: str) -> ChatMessage | None:
    """None when ``content`` validates against ``schema``; else the user message asking the
    model to correct its answer, naming what is wrong with it."""
    try:
        parse_answer(schema, content)
    except ValidationError as error:
        return ChatMessage(
            role="user",
            content=(
                "Your answer does not match the JSON schema you were given:\n"
                f"{describe_errors(error)}\n"
                "Answer again with the corrected JSON object only, with nothing else around it."
            ),
        )
    return None
