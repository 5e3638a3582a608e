"""ReActAgent: a prompt, a chat model with tools, and a final answer as the run's output."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from flink_agents.agents.chat_actions import (
    DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
    DEFAULT_MAX_TOOL_CALLS_PER_RUN,
    DEFAULT_MAX_TOOL_ROUNDS,
    chat_action,
    tool_call_action,
)
from flink_agents.agents.retrieval import (
    RetrievalSettings,
    RetrievedInputEvent,
    context_message,
    retrieve_input,
)
from flink_agents.agents.structured_output import (
    OutputValidationError,
    describe_errors,
    parse_answer,
    quote_answer,
    with_schema_instruction,
)
from flink_agents.api.agent import Agent, ErrorPolicy, action
from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.compaction import CompactionSettings
from flink_agents.api.context import RunnerContext
from flink_agents.api.events import ChatRequestEvent, ChatResponseEvent, InputEvent, OutputEvent
from flink_agents.api.prompts import Prompt
from flink_agents.api.refs import class_path, import_reference
from flink_agents.api.resources import ResourceDescriptor, ResourceType

DEFAULT_OUTPUT_RETRIES = 1


# What `json.dumps(value, sort_keys=True)` builds on every call, built once: the same text.
_JSON_TEXT = json.JSONEncoder(sort_keys=True)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _JSON_TEXT.encode(value)


def _prompt_values(value: Any) -> dict[str, Any]:
    """With a prompt: a map's keys fill its placeholders; ``{input}`` is the input as text."""
    if isinstance(value, Mapping):
        values = {str(key): item for key, item in value.items()}
        values.setdefault("input", _text(dict(value)))
        return values
    return {"input": _text(value)}


def _user_message(value: Any) -> str:
    """Without a prompt: a string (or ``{"input": ...}``) is the user message; other maps fail."""
    if isinstance(value, Mapping):
        if set(value) != {"input"}:
            raise ValueError(
                "a ReActAgent without a prompt takes a string or a map holding only 'input'; "
                f"got a map with keys {sorted(str(key) for key in value)}. Give the agent a "
                "prompt whose placeholders are those keys"
            )
        value = value["input"]
    return _text(value)


@action(
    InputEvent,
    sends=[ChatRequestEvent],
    resource_keys={"chat_model": ResourceType.CHAT_MODEL, "prompt": ResourceType.PROMPT},
)
def react_start(event: InputEvent | RetrievedInputEvent, ctx: RunnerContext) -> None:
    """Turn the input into the first chat request (prompt filled with the input's fields).

    The prompt and output schema come from this action's own config only, never from resources
    of the same name in an enclosing scope: a child never inherits its parent's. With retrieval
    the action handles the :class:`RetrievedInputEvent` instead: a prompt's ``{context}`` is
    filled with the passages, or, without that placeholder, a system message hands them over.
    """
    config = ctx.action_config
    context = event.context if isinstance(event, RetrievedInputEvent) else None
    placed = False
    if config.get("prompt"):
        prompt = cast(Prompt, ctx.get_resource(config["prompt"], ResourceType.PROMPT))
        values = _prompt_values(event.input)
        if context is not None and "context" in prompt.placeholders:
            values["context"], placed = context, True
        messages = prompt.format_messages(**values)
    else:
        messages = [ChatMessage(role="user", content=_user_message(event.input))]
    if context is not None and not placed:
        messages.insert(0, context_message(context))
    if config.get("output_schema"):
        model = ctx.get_resource(config["chat_model"], ResourceType.CHAT_MODEL)
        # Natively, chat_action sends the schema with each call instead.
        if not cast(ChatModelSetup, model).uses_native_schema():
            schema = cast(type[BaseModel], import_reference(config["output_schema"]))
            messages = with_schema_instruction(messages, schema)
    ctx.send_event(ChatRequestEvent(model=config["chat_model"], messages=messages))


@action(ChatResponseEvent, sends=[OutputEvent])
def react_finish(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    """Emit the model's final answer, validated against the output schema when there is one.

    ``chat_action`` has already handed an answer that does not match back to the model
    ``output_retries`` times: one still not matching here fails the run.
    """
    content = event.response.content
    schema_path = ctx.action_config.get("output_schema")
    if not schema_path:
        ctx.send_event(OutputEvent(output=content))
        return
    schema = cast(type[BaseModel], import_reference(schema_path))
    try:
        answer = parse_answer(schema, content)
    except ValidationError as error:
        attempts = int(ctx.action_config.get("output_retries", 0)) + 1
        raise OutputValidationError(
            f"the answer of model {event.model!r} does not match output_schema {schema_path} "
            f"after {attempts} attempt(s) (output_retries={attempts - 1}); "
            f"last validation error:\n{describe_errors(error)}\n{quote_answer(content)}"
        ) from error
    ctx.send_event(OutputEvent(output=answer.model_dump(mode="json")))


class ReActAgent(Agent):
    """Reason-and-act: ask the model, run the tools it asks for, answer.

    ``chat_model`` is the name of a chat model resource, or a descriptor registered as
    ``"chat_model"`` (the ``tools`` are then added to its offer). ``prompt`` is a prompt resource
    name or a :class:`Prompt`, filled with ``{input}`` and, for dict inputs, their fields.
    ``subagents`` names AGENT resources the model may delegate to (descriptor form only).
    ``retrieval`` retrieves passages for the input before the model is asked (see
    :mod:`flink_agents.agents.retrieval`). With an ``output_schema``, the model is given the
    schema natively (the provider's JSON-schema field) or in the leading system message, as its
    setup's or connection's ``structured_output_mode`` says; a final answer that does not match it
    goes back to the model with the validation error, at most ``output_retries`` times (0:
    never), before the run fails with an :class:`OutputValidationError` quoting the answer.
    Tool calls are bounded per model reply (``max_tool_calls_per_reply``), per request
    (``max_tool_rounds`` replies) and per run (``max_tool_calls_per_run``): past one, the run
    ends with a :class:`~flink_agents.agents.chat_actions.ToolLoopLimitError` before the tools
    of that reply run. With ``compaction``, a conversation past its ``max_tokens`` has its older
    turns summarized by the model before the next call (docs/memory.md, "Context compaction").
    """

    def __init__(
        self,
        *,
        chat_model: str | ResourceDescriptor,
        prompt: str | Prompt | None = None,
        output_schema: type[BaseModel] | None = None,
        tools: Sequence[Callable[..., Any]] = (),
        subagents: Sequence[str] = (),
        name: str | None = None,
        config: dict[str, Any] | None = None,
        error_policy: ErrorPolicy = "fail",
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        max_tool_calls_per_reply: int = DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
        max_tool_calls_per_run: int = DEFAULT_MAX_TOOL_CALLS_PER_RUN,
        description: str | None = None,
        retrieval: RetrievalSettings | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        compaction: CompactionSettings | None = None,
    ) -> None:
        super().__init__(
            name=name, config=config, error_policy=error_policy, description=description
        )
        for tool in tools:
            self.add_tool(tool)
        if isinstance(chat_model, ResourceDescriptor):
            arguments = dict(chat_model.arguments)
            offered = list(arguments.get("tools", []))
            offered += [t.__name__ for t in tools if t.__name__ not in offered]
            if offered:
                arguments["tools"] = offered
            if subagents:
                arguments["subagents"] = list(subagents)
            self.add_resource(
                "chat_model",
                ResourceType.CHAT_MODEL,
                chat_model.model_copy(update={"arguments": arguments}),
            )
            chat_model = "chat_model"
        elif subagents:
            raise TypeError("subagents need a chat model descriptor; list them in its arguments")
        if isinstance(prompt, Prompt):
            self.add_resource(
                "prompt",
                ResourceType.PROMPT,
                ResourceDescriptor.of(
                    Prompt, **prompt.model_dump(mode="json", exclude_defaults=True)
                ),
            )
            prompt = "prompt"
        if output_schema is not None and not (
            isinstance(output_schema, type) and issubclass(output_schema, BaseModel)
        ):  # else the first run fails deep inside, asking it for a JSON schema
            got = getattr(output_schema, "__qualname__", output_schema)
            raise TypeError(f"output_schema must be a pydantic model class, got {got!r}")
        if output_retries < 0:
            raise ValueError(f"output_retries must be 0 or more, got {output_retries}")
        schema = class_path(output_schema) if output_schema else None
        start_config = {"chat_model": chat_model, "prompt": prompt, "output_schema": schema}
        chat_config: dict[str, Any] = {"max_tool_rounds": max_tool_rounds}
        if max_tool_calls_per_reply != DEFAULT_MAX_TOOL_CALLS_PER_REPLY:  # else: plans as before
            chat_config["max_tool_calls_per_reply"] = max_tool_calls_per_reply
        if max_tool_calls_per_run != DEFAULT_MAX_TOOL_CALLS_PER_RUN:
            chat_config["max_tool_calls_per_run"] = max_tool_calls_per_run
        if compaction is not None:  # validated again here: a dict passed in fails now
            settings = CompactionSettings.model_validate(compaction)
            chat_config["compaction"] = settings.model_dump(mode="json", exclude_defaults=True)
        finish_config: dict[str, Any] = {"output_schema": schema}
        if schema is not None:  # without a schema, the plan stays as it was before retries
            finish_config["output_retries"] = output_retries
            chat_config["output_schema"] = schema  # sent natively where the model has it
            if output_retries:
                chat_config["output_retries"] = output_retries
        if retrieval is None:
            self.add_action(react_start, config=start_config)
        else:
            self.add_action(retrieve_input, config=retrieval.model_dump(exclude_none=True))
            self.add_action(react_start, RetrievedInputEvent, config=start_config)
        self.add_action(chat_action, config=chat_config)
        self.add_action(tool_call_action)
        self.add_action(react_finish, config=finish_config)
