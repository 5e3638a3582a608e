"""A ReActAgent as a general-purpose child (seed ``003``): each contract pinned by a test.

| Contract                                                        | Test                           |
|-----------------------------------------------------------------|--------------------------------|
| caller-driven: the loop runs in the child scope; the caller's   | test_caller_driven_child       |
| ``SubagentResult.result`` is the child's outputs (a list)       |                                |
| model-driven: the model's arguments reach the child, its reply  | test_model_driven_child        |
| (the JSON-encoded list) is the observation that closes the loop |                                |
| a child with its own tools completes a multi-round loop         | test_child_tool_loop           |
| a bare child does not inherit a parent's prompt / output schema | test_bare_child_inherits_      |
|                                                                 | nothing[prompt|output_schema]  |
| input: a string fills ``{input}`` or becomes the user message   | test_string_input              |
| input: with a prompt, map keys fill the placeholders            | test_map_input_with_prompt     |
| input: without a prompt only ``{"input": ...}``; other maps fail| test_map_input_without_prompt  |
| fast with a message (a failed delegation, not a crash)          |                                |
| one agent registered under two names with different metadata    | test_registered_twice          |
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import Agent, ChatModelSetup, Prompt, ResourceDescriptor
from flink_agents.api.subagents.delegation import TEXT_INPUT_SCHEMA
from flink_agents.plan import compile_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from tests.sample_agents import add_scripted_connection
from tests.subagent_samples import (
    LOOKUPS,
    RecordedRuns,
    Review,
    caller_agent,
    counted_lookup,
    delegation_results,
    model_agent,
    react_child,
)

ECHO = [{"content": "got: $input | last: $last"}]


def _run(agent: Agent, value: Any, runs: RecordedRuns | None = None) -> list[Any]:
    if runs is None:
        [result] = run_local(agent, [value], key=lambda _: "k")
    else:
        result = runs.run(agent, value)
    assert result.error is None, result.error
    return result.output_values


def _call(child: Agent, value: Any) -> Any:
    [result] = delegation_results(
        _run(caller_agent(child=child), {"calls": [["child", value, None]]})
    )
    return result


def test_caller_driven_child():
    ScriptedChatModelConnection.reset_stats("cd")
    result = _call(react_child("cd", ECHO), "review the diff")
    assert result.success and result.result == ["got: review the diff | last: review the diff"]
    assert ScriptedChatModelConnection.stats("cd").total == 1


def test_model_driven_child():
    ScriptedChatModelConnection.reset_stats("md-child")
    turns = [
        {"tool_calls": [{"name": "subagent_child", "arguments": {"input": "review the diff"}}]},
        {"content": "parent saw $last"},
    ]
    parent = model_agent("md-parent", turns, subagents=["child"])
    parent.add_subagent("child", react_child("md-child", ECHO), input_schema=TEXT_INPUT_SCHEMA)
    [answer] = _run(parent, "go")
    observation = json.dumps(["got: review the diff | last: review the diff"])
    assert answer == f"parent saw {observation}"


def test_child_tool_loop():
    LOOKUPS.clear()
    ScriptedChatModelConnection.reset_stats("loop")
    turns = [
        {"tool_calls": [{"name": "counted_lookup", "arguments": {"topic": "$input"}}]},
        {"tool_calls": [{"name": "counted_lookup", "arguments": {"topic": "more"}}]},
        {"content": "done after $last"},
    ]
    result = _call(react_child("loop", turns, tools=(counted_lookup,)), "flink")
    assert result.result == ["done after notes on more"]
    assert LOOKUPS == {"flink": 1, "more": 1}
    assert ScriptedChatModelConnection.stats("loop").total == 3


@pytest.mark.parametrize("configured", ["prompt", "output_schema"])
def test_bare_child_inherits_nothing(configured):
    name = f"bare-{configured}"
    ScriptedChatModelConnection.reset_stats(name)
    turns = [
        {"tool_calls": [{"name": "subagent_child", "arguments": {"input": "review the diff"}}]},
        {"content": '{"verdict": "ok", "score": 1}'},
    ]
    parent = ReActAgent(  # a configured parent: a prompt or an output schema of its own
        name=f"{name}-parent",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn"),
        subagents=["child"],
        prompt=Prompt(text="PARENT ONLY: {input}") if configured == "prompt" else None,
        output_schema=Review if configured == "output_schema" else None,
    )
    add_scripted_connection(parent, f"{name}-parent", turns)
    parent.add_subagent("child", react_child(name, ECHO), input_schema=TEXT_INPUT_SCHEMA)
    runs = RecordedRuns()
    _run(parent, "go", runs)
    delegation = next(c for c in runs.identities if c.identity.call_id.startswith('["subagent"'))
    # the child's model got the bare input: no parent prompt, no schema instruction after it
    assert runs.recorded(delegation).payload["result"] == [
        "got: review the diff | last: review the diff"
    ]


def test_string_input():
    prompted = react_child("s1", ECHO, prompt=Prompt(text="Please: {input}"))
    assert _call(prompted, "x").result == ["got: Please: x | last: Please: x"]
    assert _call(react_child("s2", ECHO), "x").result == ["got: x | last: x"]


def test_map_input_with_prompt():
    child = react_child("m1", ECHO, prompt=Prompt(text="{verb} the {thing}"))
    assert _call(child, {"verb": "review", "thing": "diff"}).result == [
        "got: review the diff | last: review the diff"
    ]


def test_map_input_without_prompt():
    assert _call(react_child("m2", ECHO), {"input": "x"}).result == ["got: x | last: x"]
    failed = _call(react_child("m3", ECHO), {"diff": "x", "style": "y"})
    assert failed.success is False
    assert "without a prompt takes a string or a map holding only 'input'" in failed.reason
    assert "['diff', 'style']" in failed.reason


def test_registered_twice():
    child = react_child("twice", ECHO)
    parent = caller_agent()
    parent.add_subagent("reviewer", child, description="Reviews code.")
    parent.add_subagent("summarizer", child, description="Summarises.", result_type=Review)
    plan = compile_agent(parent)
    assert list(plan.scopes) == ["twice"]  # one scope, two registrations
    assert plan.resources["reviewer"].arguments == {
        "agent": "twice",
        "description": "Reviews code.",
    }
    assert plan.resources["summarizer"].arguments["result_type"] == "tests.subagent_samples:Review"
