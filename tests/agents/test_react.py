import pytest

from flink_agents.agents.react import ReActAgent, _prompt_values
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import ActionError, run_local
from tests.sample_agents import react_agent

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


def test_answer_not_matching_the_output_schema_fails_the_run():
    with pytest.raises(ActionError) as info:
        run_local(
            react_agent([{"content": "sunny"}], name="bad"), [{"id": 1, "city": "x"}], key="id"
        )
    failure = info.value.failure
    assert (failure.action, failure.event_type, failure.error_type) == (
        "react_finish",
        "ChatResponseEvent",
        "ValidationError",
    )
    assert "Answer" in failure.message


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
