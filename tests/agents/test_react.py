import json
from collections.abc import Iterator

import pytest

from flink_agents.agents.react import ReActAgent, _prompt_values
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import ResourceDescriptor
from flink_agents.plan import compile_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import ActionError, run_local
from tests.sample_agents import (
    Answer,
    RecordingChatConnection,
    add_scripted_connection,
    react_agent,
)

TWO_TOOLS = [
    {"tool_calls": [{"name": "lookup", "arguments": {"city": "$input"}}]},
    {"tool_calls": [{"name": "add", "arguments": {"a": 40, "b": 2}}]},
    {"content": '```json\n{"city": "$input", "total": $last}\n```'},
]


def test_react_loop_with_two_tool_calls_validates_the_final_answer():
    ScriptedChatModelConnection.reset_stats("two-tools")
    agent = react_agent(TWO_TOOLS, name="two-tools")
    [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    assert result.error is None
    # $input is the prompt-filled user message; $last the add tool's result
    assert result.output_values == [{"city": "Oslo", "total": 42}]
    assert ScriptedChatModelConnection.stats("two-tools").total == 3


def test_tool_results_reach_the_model_in_order():
    turns = [
        {"tool_calls": [{"name": "lookup", "arguments": {"city": "$input"}}]},
        {"content": "population: $last"},
    ]
    agent = react_agent(turns, name="lookup", structured=False)
    [result] = run_local(agent, [{"id": 1, "city": "Rome"}], key="id")
    assert result.output_values == ['population: {"city": "Rome", "population": 4000}']


def test_tool_error_goes_back_to_the_model():
    turns = [
        {"tool_calls": [{"name": "add", "arguments": {"a": "not a number"}}]},
        {"content": "I could not: $last"},
    ]
    agent = react_agent(turns, name="tool-error", structured=False)
    [result] = run_local(agent, [{"id": 1, "city": "x"}], key="id")
    [answer] = result.output_values
    assert answer.startswith("I could not: ValidationError")


NOT_JSON = {"content": "It is sunny in $input."}
NO_TOTAL = {"content": '{"city": "$input"}'}
VALID = {"content": '{"city": "$input", "total": 7}'}
CORRECTION = (
    "Your answer does not match the JSON schema you were given:\n"
    "- total: Field required\n"
    "Answer again with the corrected JSON object only, with nothing else around it."
)


@pytest.fixture
def requests() -> Iterator[list[ChatRequest]]:
    """The requests the recording scripted model is sent during the test."""
    RecordingChatConnection.requests.clear()
    yield RecordingChatConnection.requests
    RecordingChatConnection.requests.clear()


def _failure(agent: ReActAgent) -> ActionError:
    with pytest.raises(ActionError) as info:
        run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    return info.value


def _configs(agent: ReActAgent) -> dict[str, dict]:
    return {action.name: action.config for action in compile_agent(agent).actions}


def test_an_answer_not_matching_the_schema_goes_back_to_the_model_with_the_error(requests):
    agent = react_agent([NO_TOTAL, VALID], name="retry-once", connection=RecordingChatConnection)
    [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    assert result.error is None
    assert result.output_values == [{"city": "Oslo", "total": 7}]
    first, retry = requests
    # The retry is the first conversation, the model's answer, then what is wrong with it.
    assert retry.messages[:-2] == first.messages
    answer, correction = retry.messages[-2:]
    assert (answer.role, answer.content) == ("assistant", '{"city": "Oslo"}')
    assert (correction.role, correction.content) == ("user", CORRECTION)


def test_an_answer_still_not_matching_when_the_retries_are_spent_fails_naming_them():
    ScriptedChatModelConnection.reset_stats("spent")
    agent = react_agent([NOT_JSON, NOT_JSON, NO_TOTAL, VALID], name="spent", output_retries=2)
    failure = _failure(agent).failure
    assert (failure.action, failure.event_type, failure.error_type) == (
        "react_finish",
        "ChatResponseEvent",
        "OutputValidationError",
    )
    assert failure.message == (
        "the answer of model 'chat_model' does not match output_schema "
        "tests.sample_agents:Answer after 3 attempt(s) (output_retries=2); "
        "last validation error:\n- total: Field required\n"
        'the answer was:\n{"city": "Oslo"}'
    )
    assert ScriptedChatModelConnection.stats("spent").total == 3


def test_without_output_retries_a_non_matching_answer_fails_at_once_as_before():
    ScriptedChatModelConnection.reset_stats("no-retry")
    agent = react_agent([NOT_JSON, VALID], name="no-retry", output_retries=0)
    failure = _failure(agent).failure
    assert (failure.action, failure.error_type) == ("react_finish", "OutputValidationError")
    assert failure.message.endswith(
        "after 1 attempt(s) (output_retries=0); last validation error:\n"
        "- the answer: Invalid JSON: expected ident at line 1 column 2\n"
        "the answer was:\nIt is sunny in Oslo."
    )
    assert ScriptedChatModelConnection.stats("no-retry").total == 1
    # chat_action has the schema (to send natively where the model takes it), no retries.
    assert _configs(agent)["chat_action"] == {
        "max_tool_rounds": 10,
        "output_schema": "tests.sample_agents:Answer",
    }


def test_a_long_failed_answer_is_quoted_cut_saying_so():
    long_answer = {"content": "sunny " * 200}  # 1200 characters
    failure = _failure(react_agent([long_answer], name="long", output_retries=0)).failure
    head, quoted = failure.message.split("the answer was (its first 500 of 1200 characters):\n")
    assert head.endswith("Invalid JSON: expected value at line 1 column 1\n")
    assert quoted == ("sunny " * 200)[:500]


def test_the_schema_instruction_ends_the_leading_system_message_never_follows_the_user(
    requests,
):
    # The scripted model takes no schema natively: the instruction goes in the prompt, in the
    # one system message at the head (strict chat templates refuse one after a user message).
    agent = ReActAgent(
        name="system_first",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(
            messages=[
                ChatMessage(role="system", content="You answer about cities."),
                ChatMessage(role="user", content="{city}"),
            ]
        ),
        output_schema=Answer,
    )
    add_scripted_connection(agent, "system-first", [VALID], connection=RecordingChatConnection)
    [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    assert result.output_values == [{"city": "Oslo", "total": 7}]
    [request] = requests
    assert [m.role for m in request.messages] == ["system", "user"]
    system = request.messages[0].content
    assert system.startswith("You answer about cities.\n\nGive your final answer as one JSON")
    assert json.loads(system.split("\n", 3)[3]) == Answer.model_json_schema()
    assert request.response_schema is None


def test_without_a_system_message_the_schema_instruction_is_one_placed_first(requests):
    agent = react_agent([VALID], connection=RecordingChatConnection)
    run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
    [request] = requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].content.startswith("Give your final answer as one JSON object")
    assert request.messages[1].content == "Oslo"


def test_a_valid_first_answer_sends_the_same_request_whatever_the_retries(requests):
    for retries in (0, 1, 3):
        agent = react_agent(TWO_TOOLS, output_retries=retries, connection=RecordingChatConnection)
        [result] = run_local(agent, [{"id": 1, "city": "Oslo"}], key="id")
        assert result.output_values == [{"city": "Oslo", "total": 42}]
    assert len(requests) == 9
    assert requests[0:3] == requests[3:6] == requests[6:9]


def test_a_retry_asking_for_tools_counts_against_the_same_bound():
    # Were the retry forgotten over the tool round, the fourth (valid) turn would be played.
    ScriptedChatModelConnection.reset_stats("retry-tools")
    turns = [NOT_JSON, {"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}, NOT_JSON, VALID]
    failure = _failure(react_agent(turns, name="retry-tools", output_retries=1)).failure
    assert failure.error_type == "OutputValidationError"
    assert "after 2 attempt(s)" in failure.message
    assert ScriptedChatModelConnection.stats("retry-tools").total == 3


def test_output_retries_are_planned_only_with_an_output_schema():
    configs = _configs(react_agent([VALID]))
    assert configs["chat_action"] == {
        "max_tool_rounds": 10,
        "output_retries": 1,
        "output_schema": "tests.sample_agents:Answer",
    }
    assert configs["react_finish"] == {
        "output_retries": 1,
        "output_schema": "tests.sample_agents:Answer",
    }
    plain = {
        a.name: a.config for a in compile_agent(react_agent([VALID], structured=False)).actions
    }
    assert plain["chat_action"] == {"max_tool_rounds": 10}
    assert plain["react_finish"] == {"output_schema": None}


def test_negative_output_retries_are_refused_when_declared():
    with pytest.raises(ValueError, match="output_retries must be 0 or more, got -1"):
        ReActAgent(chat_model="chat", output_schema=Answer, output_retries=-1)


def test_endless_tool_requests_stop_at_max_tool_rounds():
    turns = [{"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}] * 20
    agent = react_agent(turns, name="endless")
    agent.error_policy = "emit"
    [result] = run_local(agent, [{"id": 1, "city": "x"}], key="id")
    assert result.error.action == "chat_action"
    assert result.error.error_type == "ToolLoopLimitError"


def test_a_map_input_fills_input_with_its_sorted_ascii_json_text():
    # Fixed text, as json.dumps(..., sort_keys=True) wrote it before (it reaches the model
    # and so the call's digest).
    values = _prompt_values({"b": "\u00e9", "a": [1, 2.5, None, True]})
    assert values["input"] == '{"a": [1, 2.5, null, true], "b": "\\u00e9"}'
    assert _prompt_values({"input": "kept", "x": 1})["input"] == "kept"
    assert _prompt_values(["q", 3]) == {"input": '["q", 3]'}


def test_an_output_schema_that_is_not_a_pydantic_model_is_refused_when_declared():
    with pytest.raises(TypeError, match="output_schema must be a pydantic model class, got 'dict'"):
        ReActAgent(chat_model="chat", output_schema=dict)  # type: ignore[arg-type]
