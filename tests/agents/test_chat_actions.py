"""The chat action fills the setup's prompt with the request's ``prompt_args``; the setup's
prompt is the system prompt, first, and a caller's system messages follow it. The tool-call
action hands a tool's error to the model without pydantic's links, and a call whose arguments
are not JSON to the model instead of the tool or sub-agent."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import TypeAdapter, ValidationError

from flink_agents.agents.chat_actions import tool_failure_text, without_pydantic_links
from flink_agents.agents.react import ReActAgent
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    Prompt,
    RecordedCallError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.chat import ChatRequest, ToolCall
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.durable.store import StoreConfig
from flink_agents.runtime import RuntimeSettings, run_local
from tests.sample_agents import add_scripted_connection, lookup, react_agent


class RecordingConnection(ChatModelConnection):
    """Answers "ok" and keeps every request it got."""

    requests: ClassVar[list[ChatRequest]] = []

    async def chat(self, request: ChatRequest) -> ChatMessage:
        self.requests.append(request)
        return ChatMessage(role="assistant", content="ok")


@action(InputEvent, sends=[ChatRequestEvent])
def ask_with_shop(event: InputEvent, ctx: RunnerContext) -> None:
    messages = [
        ChatMessage(role="system", content="Answer in one word."),
        ChatMessage(role="user", content=event.input["review"]),
    ]
    ctx.send_event(
        ChatRequestEvent(model="scorer", messages=messages, prompt_args={"shop": "acme"})
    )


@action(ChatResponseEvent, sends=[OutputEvent])
def emit_answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.response.content))


def test_prompt_args_fill_the_setup_prompt_which_precedes_the_callers_system_message_in_one():
    RecordingConnection.requests.clear()
    agent = Agent(name="scoring").add_action(ask_with_shop).add_action(emit_answer)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, RecordingConnection)
    agent.add_prompt("persona", "You score reviews for {shop}.")
    agent.add_resource(
        "scorer", ResourceType.CHAT_MODEL, ChatModelSetup, connection="conn", prompt="persona"
    )
    results = run_local(agent, [{"id": 1, "review": "great"}], key="id")
    assert [r.output_values for r in results] == [["ok"]]
    [request] = RecordingConnection.requests
    # One system message, first: strict chat templates refuse a second one.
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "You score reviews for acme.\n\nAnswer in one word."),
        ("user", "great"),
    ]


@action(InputEvent, sends=[ChatRequestEvent])
def ask_with_computed_args(event: InputEvent, ctx: RunnerContext) -> None:
    computed = {"review": event.input["review"]}  # not literal: the compiler cannot check it
    message = ChatMessage(role="user", content="")
    ctx.send_event(ChatRequestEvent(model="scorer", messages=[message], prompt_args=computed))


def test_a_missing_prompt_variable_at_run_time_names_the_action_that_sent_the_request():
    RecordingConnection.requests.clear()
    agent = Agent(name="scoring", error_policy="emit").add_action(ask_with_computed_args)
    agent.add_action(emit_answer)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, RecordingConnection)
    agent.add_prompt("persona", "You score reviews for {shop}: {review}")
    agent.add_resource(
        "scorer", ResourceType.CHAT_MODEL, ChatModelSetup, connection="conn", prompt="persona"
    )
    [result] = run_local(agent, [{"id": 1, "review": "great"}], key="id")
    assert result.error is not None
    assert result.error.message == (
        "the prompt 'persona' of chat model 'scorer' needs ['shop'], which the ChatRequestEvent "
        "sent by action 'ask_with_computed_args' does not give in its prompt_args (it gives "
        "['review'])"
    )
    assert RecordingConnection.requests == []  # refused before any call


def test_a_tool_error_reaches_the_model_without_pydantics_links():
    turns = [
        {"tool_calls": [{"name": "add", "arguments": {"a": "not a number", "b": "nor this"}}]},
        {"content": "$last"},  # the answer is the tool message the model was handed
    ]
    agent = react_agent(turns, name="tool-error-text", structured=False)
    [result] = run_local(agent, [{"id": 1, "city": "x"}], key="id")
    [seen] = result.output_values

    assert seen.startswith("ValidationError: 2 validation errors for ")
    assert "a\n  Input should be a valid integer, unable to parse string as an integer " in seen
    assert "[type=int_parsing, input_value='not a number', input_type=str]\nb\n" in seen
    assert "For further information" not in seen and "errors.pydantic.dev" not in seen


def test_only_pydantics_link_lines_are_taken_out_of_an_error_text():
    with pytest.raises(ValidationError) as info:
        TypeAdapter(dict[str, int]).validate_python({"a": "x", "b": "y"})
    text = f"ValidationError: {info.value}"
    kept = [line for line in text.splitlines() if "https://errors.pydantic.dev/" not in line]
    assert len(kept) < len(text.splitlines())  # pydantic wrote links: there was something to drop
    assert without_pydantic_links(text) == "\n".join(kept)
    plain = "ValueError: see https://example.com\nFor further information visit the docs"
    assert without_pydantic_links(plain) == plain


class Refused(ValueError):
    """An exception class nested nowhere special, for the recorded type's name."""


def test_a_replayed_tool_failure_reads_to_the_model_as_the_live_one() -> None:
    live = Refused("no such city: Oslo")
    recorded = RecordedCallError(
        "tool:call-1", f"{Refused.__module__}.{Refused.__qualname__}", str(live), "Traceback..."
    )
    assert tool_failure_text(live) == "Refused: no such city: Oslo"
    # Handed back from the store: the same text, not the RecordedCallError's own.
    assert tool_failure_text(recorded) == tool_failure_text(live)
    assert "recorded outcome" in str(recorded)


def test_a_tool_failure_loses_only_pydantic_links() -> None:
    with pytest.raises(ValidationError) as info:
        TypeAdapter(int).validate_python("x")
    text = tool_failure_text(info.value)
    assert text.startswith("ValidationError: 1 validation error")
    assert "errors.pydantic.dev" not in text


class BrokenArgumentsConnection(ChatModelConnection):
    """Calls ``what`` once with arguments that are not JSON, then answers with the last tool
    message it was handed."""

    what: str

    async def chat(self, request: ChatRequest) -> ChatMessage:
        last = request.messages[-1]
        if last.role == "tool":
            return ChatMessage(role="assistant", content=last.content)
        call = ToolCall.from_json_text("call_1", self.what, '{"topic": "flink"')
        return ChatMessage(role="assistant", tool_calls=[call])


@action(InputEvent, sends=[OutputEvent])
def echo(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.input))


def broken_arguments_agent(what: str) -> ReActAgent:
    agent = ReActAgent(
        name="broken",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        tools=[lookup],
        subagents=["child"],
    )
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, BrokenArgumentsConnection, what=what
    )
    agent.add_subagent(
        "child",
        Agent(name="child").add_action(echo),
        description="Echoes.",
        input_schema={"type": "object", "properties": {"topic": {"type": "string"}}},
    )
    return agent


ARGUMENTS_ERROR = (
    "ToolArgumentsError: the arguments of this call of '{name}' are not JSON (Expecting ',' "
    'delimiter: line 1 column 18 (char 17)): \'{{"topic": "flink"\'; call it again with the '
    "arguments as one JSON object"
)


def test_arguments_that_are_not_json_reach_the_model_instead_of_the_tool() -> None:
    [result] = run_local(broken_arguments_agent("lookup"), [{"input": "q"}], key="input")
    assert result.output_values == [ARGUMENTS_ERROR.format(name="lookup")]


def test_arguments_that_are_not_json_reach_the_model_instead_of_the_sub_agent() -> None:
    [result] = run_local(broken_arguments_agent("subagent_child"), [{"input": "q"}], key="input")
    reason = ARGUMENTS_ERROR.format(name="subagent_child")
    assert result.output_values == [f"delegation to sub-agent 'child' failed: {reason}"]


class Handle:
    """A value with no JSON form (its str() would be a memory address)."""


def opaque(city: str) -> Handle:
    """Returns something no JSON can hold."""
    return Handle()


@pytest.mark.parametrize("store", [None, "memory"], ids=["no store", "memory store"])
def test_a_non_json_tool_result_is_the_same_failure_with_and_without_a_store(store):
    # One rule: the model is told the call failed with NotJsonError, whether or not calls are
    # recorded (it was str()'d without a store, and failed the run as unpicklable with one).
    agent = ReActAgent(
        name="opaque",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[opaque],
    )
    turns = [
        {"tool_calls": [{"name": "opaque", "arguments": {"city": "$input"}}]},
        {"content": "$last"},  # the answer is the tool message the model was handed
    ]
    add_scripted_connection(agent, f"opaque-{store}", turns)
    settings = RuntimeSettings(store=StoreConfig(kind=store)) if store else None
    [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id", settings=settings)
    assert result.output_values == [
        "NotJsonError: not a JSON value at $: a Handle has no JSON form"
    ]
