"""A chat model's final answer checked against an output schema, and the request to correct it.

:func:`~flink_agents.agents.chat_actions.chat_action` uses it to hand a validation error back to
the model (its ``output_retries``), :func:`~flink_agents.agents.react.react_finish` to parse the
answer into the run's output.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ValidationError

from flink_agents.api.chat import ChatMessage

_FENCED = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

# A schema with many fields can fail on all of them: the model needs the first few to correct
# its answer, not a page of them in every retry (and in every later request's conversation).
_MAX_LISTED_ERRORS = 10


class OutputValidationError(ValueError):
    """The model's final answer still did not match the output schema when its attempts ran out.

    A ``ValueError``, like the pydantic ``ValidationError`` it carries as its cause.
    """


def parse_answer(schema: type[BaseModel], content: str) -> BaseModel:
    """``content`` (JSON, possibly in a Markdown code fence) validated into ``schema``."""
    text = content.strip()
    fenced = _FENCED.match(text)
    return schema.model_validate_json(fenced.group(1) if fenced else text)


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
