"""Built-in actions that talk to chat models; ordinary actions any agent may add.

* :func:`chat_action` sends a ``ChatRequestEvent`` to its model. If the model asks for tools it
  emits a ``ToolRequestEvent`` and keeps the conversation in sensory memory; when the matching
  ``ToolResponseEvent`` arrives it hands the results back to the model, until the model answers
  with a ``ChatResponseEvent``.
* :func:`tool_call_action` runs the requested tools and ``subagent_<name>`` delegations
  (concurrently) and emits the results. A tool's failure, and a call whose arguments are not
  a JSON object, go back to the model as the call's result: it may try again, within
  ``max_tool_rounds``.

With ``output_schema`` (``module:Class``) in its config, ``chat_action`` sends the schema with
every call to a model that takes it natively (``ChatModelSetup.uses_native_schema``; else the
caller put it in the prompt), and with ``output_retries`` it checks a final answer against the
schema: one that does not match goes back to the model with the validation error as a user
message, at most ``output_retries`` times, before it is sent on as the ``ChatResponseEvent``
(ReActAgent's ``react_finish`` then fails the run on it).

Model and tool calls go through ``ctx.durable_execute_async`` with ids derived from the request
and the tool call, so a replay finds them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Any, cast

from pydantic import BaseModel

from flink_agents.agents.structured_output import correction_request
from flink_agents.agents.tool_approval import (
    approved_arguments,
    ask_approval,
    gated_tool,
    refusal,
)
from flink_agents.api.agent import action
from flink_agents.api.chat import ChatMessage, ToolCall
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.context import InfrastructureError, RunnerContext, live_failure
from flink_agents.api.events import (
    ChatRequestEvent,
    ChatResponseEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
)
from flink_agents.api.json_values import NotJsonError, json_text, replace_lone_surrogates
from flink_agents.api.prompts import MissingPlaceholderError
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import ResourceType
from flink_agents.api.subagents.delegation import SUBAGENT_TOOL_PREFIX, Subagent, SubagentResult
from flink_agents.api.waits import Decision

DEFAULT_MAX_TOOL_ROUNDS = 10
#: Tool calls one model reply may ask for (each runs, all at once): more ends the run.
DEFAULT_MAX_TOOL_CALLS_PER_REPLY = 64
#: Tool calls the chat action may run in one run, over all its requests and rounds.
DEFAULT_MAX_TOOL_CALLS_PER_RUN = 1_000
_TOOL_CALLS_IN_RUN = "chat_action/tool_calls"  # sensory memory: per run, journaled with it

# pydantic ends each error of a ValidationError's text with this line.
_PYDANTIC_LINK = re.compile(
    r"\n[ \t]*For further information visit https://errors\.pydantic\.dev/\S*"
)


def without_pydantic_links(text: str) -> str:
    """``text`` (an error's, for a model) without pydantic's "For further information visit
    https://errors.pydantic.dev/..." lines: a link per error tells a model nothing and costs
    tokens; what was wrong, where and with which input stays as it is."""
    return _PYDANTIC_LINK.sub("", text)


def tool_failure_text(error: BaseException) -> str:
    """What the model is told of a failed tool call: ``Type: message`` as the live call raised
    it (:func:`~flink_agents.api.context.live_failure`: also after a failover, when the failure
    is handed back from the store), without pydantic's link lines and lone surrogates (replaced)."""
    kind, message = live_failure(error)
    return replace_lone_surrogates(without_pydantic_links(f"{kind}: {message}"))


class ToolLoopLimitError(RuntimeError):
    """The model kept asking for tools beyond ``max_tool_rounds``, or for more tools in one
    reply than ``max_tool_calls_per_reply``, or in one run than ``max_tool_calls_per_run``."""


def _conversation_key(request_id: str) -> str:
    return f"chat_action/conversation/{request_id}"


def _chat_model(ctx: RunnerContext, name: str) -> ChatModelSetup:
    return cast(ChatModelSetup, ctx.get_resource(name, ResourceType.CHAT_MODEL))


@action(ChatRequestEvent, ToolResponseEvent, sends=[ChatResponseEvent, ToolRequestEvent])
async def chat_action(event: ChatRequestEvent | ToolResponseEvent, ctx: RunnerContext) -> None:
    """Ask the model; loop through tool calls until it gives a final answer (with an
    ``output_schema`` in the config, one that matches it, or ``output_retries`` spent)."""
    if isinstance(event, ChatRequestEvent):
        request_id, model_name, rounds, retries = event.id, event.model, 0, 0
        messages, prompt_args = list(event.messages), event.prompt_args
    else:
        request_id, model_name = event.request_id, event.model
        saved = ctx.sensory_memory.get(_conversation_key(request_id))
        if saved is None:
            raise LookupError(f"no conversation in progress for chat request {request_id}")
        rounds, prompt_args = saved["rounds"], saved.get("prompt_args", {})
        retries = saved.get("output_retries", 0)
        messages = [ChatMessage.model_validate(m) for m in saved["messages"]]
        messages += [
            ChatMessage(role="tool", content=result.content, tool_call_id=result.tool_call_id)
            for result in event.results
        ]

    model = _chat_model(ctx, model_name)
    if isinstance(event, ChatRequestEvent) and (missing := model.missing_prompt_args(prompt_args)):
        # Said before any call, naming the action that sent the request: the one to fix.
        raise MissingPlaceholderError(
            f"the prompt {model.prompt!r} of chat model {model_name!r} needs {missing}, which "
            f"the ChatRequestEvent sent by action {event.upstream_action!r} does not give in "
            f"its prompt_args (it gives {sorted(prompt_args)})"
        )
    schema_path: str = ctx.action_config.get("output_schema") or ""
    schema = cast(type[BaseModel], import_reference(schema_path)) if schema_path else None
    allowed = int(ctx.action_config.get("output_retries", 0)) if schema else 0
    # The schema sent natively is an argument of the call: its digest tells a replay that a
    # call recorded with the schema in the prompt (or another schema) is not this one.
    native: dict[str, Any] = (
        {"response_schema": schema.model_json_schema()}
        if schema is not None and model.uses_native_schema()
        else {}
    )
    call_id = "chat"
    while True:
        # Without prompt arguments the call keeps its earlier shape (and recorded identity).
        arguments = (messages, prompt_args) if prompt_args else (messages,)
        reply = await ctx.durable_execute_async(
            model.chat, *arguments, call_id=call_id, result_type=ChatMessage, **native
        )
        if schema is None or reply.tool_calls or retries >= allowed:
            break
        correction = correction_request(schema, reply.content)
        if correction is None:
            break
        # Another model call of this invocation: the conversation it sends (the answer and
        # what is wrong with it) follows from recorded replies, so a replay asks the same.
        retries += 1
        messages = [*messages, reply, correction]
        call_id = f"chat:output-retry-{retries}"

    if not reply.tool_calls:
        ctx.sensory_memory.delete(_conversation_key(request_id))
        ctx.send_event(ChatResponseEvent(request_id=request_id, model=model_name, response=reply))
        return

    limit = int(ctx.action_config.get("max_tool_rounds", DEFAULT_MAX_TOOL_ROUNDS))
    if rounds >= limit:
        raise ToolLoopLimitError(
            f"model {model_name!r} still asks for tools after {limit} rounds (max_tool_rounds)"
        )
    most = int(ctx.action_config.get("max_tool_calls_per_reply", DEFAULT_MAX_TOOL_CALLS_PER_REPLY))
    if len(reply.tool_calls) > most:  # refused before any runs: they would all run at once
        raise ToolLoopLimitError(
            f"model {model_name!r} asked for {len(reply.tool_calls)} tool calls in one reply, "
            f"more than {most} (max_tool_calls_per_reply); none was run"
        )
    _count_tool_calls(ctx, model_name, len(reply.tool_calls))
    conversation: dict[str, Any] = {
        "rounds": rounds + 1,
        "messages": [m.model_dump(mode="json") for m in [*messages, reply]],
        "prompt_args": prompt_args,
    }
    if retries:  # only once a retry was made: a conversation without one is saved as before
        conversation["output_retries"] = retries
    ctx.sensory_memory.set(_conversation_key(request_id), conversation)
    ctx.send_event(
        ToolRequestEvent(request_id=request_id, model=model_name, tool_calls=reply.tool_calls)
    )


def _count_tool_calls(ctx: RunnerContext, model_name: str, asked: int) -> None:
    """Count a reply's tool calls against the run's ``max_tool_calls_per_run``, before any runs.

    The count lives in sensory memory, so it is the run's and is journaled with the action: a
    replay counts as the live run did."""
    most = int(ctx.action_config.get("max_tool_calls_per_run", DEFAULT_MAX_TOOL_CALLS_PER_RUN))
    spent = int(ctx.sensory_memory.get(_TOOL_CALLS_IN_RUN) or 0) + asked
    if spent > most:
        raise ToolLoopLimitError(
            f"model {model_name!r} asked for {asked} more tool calls, {spent} in this run, more "
            f"than {most} (max_tool_calls_per_run); none of these was run"
        )
    ctx.sensory_memory.set(_TOOL_CALLS_IN_RUN, spent)


async def _run_tool(
    ctx: RunnerContext, model: ChatModelSetup, call: ToolCall, decision: Decision | None = None
) -> ToolResult:
    # A tool's failure is information for the model, not the end of the run; so are
    # arguments that are not a JSON object (the tool is not run). An infrastructure error
    # (replay mismatch, store, codec) is neither: it ends the action. ``decision``: the
    # approval of a tool that needs one (agents/tool_approval.py).
    call_id = f"tool:{call.id}"
    if decision is not None and (refused := refusal(call, decision)) is not None:
        return refused
    try:
        tool = model.tool(call.name)
        arguments = call.checked_arguments()
        if decision is not None:
            arguments = approved_arguments(tool, arguments, decision)
        # The text the model is shown is the call's recorded outcome (`call_for_model`);
        # a value recorded by an earlier version is rendered the same way on replay.
        value: Any = await ctx.durable_execute_async(
            tool.call_for_model,
            arguments,
            ctx.durable_call_key(call_id),
            call_id=call_id,
            in_doubt=tool.in_doubt,
        )
    except InfrastructureError:
        raise
    except Exception as exc:
        content = tool_failure_text(exc)
        return ToolResult(tool_call_id=call.id, name=call.name, content=content, is_error=True)
    return ToolResult(tool_call_id=call.id, name=call.name, content=json_text(value))


def _start_delegation(
    ctx: RunnerContext, model: ChatModelSetup, call: ToolCall
) -> Awaitable[ToolResult]:
    """Submit a ``subagent_<name>`` call now, so its ids follow the order of the tool calls."""
    try:
        started = Subagent(ctx, model.subagent(call.name)).submit(call.checked_arguments())
    except Exception as exc:
        return _delegation_result(call, SubagentResult.failure(exc))
    return _delegation_result(call, started)


async def _delegation_result(
    call: ToolCall, outcome: Awaitable[SubagentResult[Any]] | SubagentResult[Any]
) -> ToolResult:
    # Any failure goes back to the model with its reason; the run goes on.
    result = outcome if isinstance(outcome, SubagentResult) else await outcome
    if result.success:
        try:
            content = json_text(result.result)
        except NotJsonError as exc:
            result = SubagentResult.failure(exc)
        else:
            return ToolResult(tool_call_id=call.id, name=call.name, content=content)
    name = call.name.removeprefix(SUBAGENT_TOOL_PREFIX)
    content = replace_lone_surrogates(f"delegation to sub-agent {name!r} failed: {result.reason}")
    return ToolResult(tool_call_id=call.id, name=call.name, content=content, is_error=True)


@action(ToolRequestEvent, sends=[ToolResponseEvent])
async def tool_call_action(event: ToolRequestEvent, ctx: RunnerContext) -> None:
    """Run the tools and delegations the model asked for and send their results back.

    A ``subagent_<name>`` call is routed to the AGENT resource ``<name>`` with the model's
    arguments unchanged; any other name to the tool of that name.
    """
    model = _chat_model(ctx, event.model)
    # Approvals first, one at a time: a run paused at one has run no tool of this reply.
    decisions: dict[str, Decision] = {}
    for call in event.tool_calls:
        gated = None if call.name.startswith(SUBAGENT_TOOL_PREFIX) else gated_tool(model, call)
        if gated is not None:
            decisions[call.id] = await ask_approval(ctx, gated, call)
    pending = [
        _start_delegation(ctx, model, call)
        if call.name.startswith(SUBAGENT_TOOL_PREFIX)
        else _run_tool(ctx, model, call, decisions.get(call.id))
        for call in event.tool_calls
    ]
    results = await asyncio.gather(*pending)
    ctx.send_event(
        ToolResponseEvent(request_id=event.request_id, model=event.model, results=list(results))
    )
