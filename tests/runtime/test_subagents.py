"""Internal sub-agents in the engine: child scopes, nested identities, replay, failures.

The replay tests use ``RecordedRuns`` (tests/subagent_samples.py): the run's calls go through
``DurableCalls`` over an in-memory store, a probe sees the calls made live, and a crash while the
run was in flight leaves its records with no action completed.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import Agent, ResourceDescriptor, ResourceType
from flink_agents.api.subagents.delegation import TEXT_INPUT_SCHEMA, SubagentResult
from flink_agents.plan import compile_agent
from flink_agents.providers.http_subagent import HttpSubagent
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from tests.sample_agents import add_scripted_connection
from tests.subagent_samples import (
    LOOKUPS,
    RecordedRuns,
    ShoutAgent,
    SubagentServer,
    caller_agent,
    counted_lookup,
    delegation_results,
    model_agent,
    react_child,
)

CHILD_TURNS = [
    {"tool_calls": [{"name": "counted_lookup", "arguments": {"topic": "$input"}}]},
    {"content": "found: $last"},
]


def _outputs(agent: Agent, value: Any, runs: RecordedRuns | None = None) -> list[Any]:
    if runs is None:
        [result] = run_local(agent, [value], key=lambda _: "k")
    else:
        result = runs.run(agent, value)
    assert result.error is None, result.error
    return result.output_values


def _is_delegation(call_id: str) -> bool:
    return call_id.startswith('["subagent"')


def test_caller_driven_internal_child_returns_its_outputs_and_reads_its_own_config():
    parent = caller_agent(shouter=ShoutAgent(name="shout"))
    [ok, failed] = delegation_results(
        _outputs(parent, {"calls": [["shouter", "hi", None], ["shouter", "fail", None]]})
    )
    assert ok == SubagentResult(success=True, result=["HI!"])  # the child's own action config
    assert failed.success is False
    assert "sub-agent 'shout'" in failed.reason and "cannot shout 'fail'" in failed.reason


def test_child_ids_are_nested_under_the_delegation_and_deterministic():
    LOOKUPS.clear()
    ScriptedChatModelConnection.reset_stats("nested")
    parent = caller_agent(child=react_child("nested", CHILD_TURNS, tools=(counted_lookup,)))
    calls = {"calls": [["child", "x", None], ["child", "x", None]]}  # same child, same input
    runner = RecordedRuns()
    _outputs(parent, calls, runner)
    child_calls = [c for c in runner.identities if not _is_delegation(c.identity.call_id)]
    assert len(child_calls) == 6  # per delegation: two model calls and one tool call
    digests = [c.identity.digest() for c in child_calls]
    assert len(set(digests)) == 6  # the two delegations' child calls never collide
    again = RecordedRuns()
    _outputs(parent, calls, again)
    assert [c.identity.digest() for c in again.identities] == [
        c.identity.digest() for c in runner.identities
    ]


def test_child_falls_back_to_parent_resources():
    parent = caller_agent()
    parent.add_resource(
        "shared_model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor.of("flink_agents.api:ChatModelSetup", connection="shared_conn"),
    )
    add_scripted_connection(
        parent, "shared", [{"content": "child says $input"}], resource="shared_conn"
    )
    child = ReActAgent(name="bare", chat_model="shared_model")  # declares no model of its own
    parent.add_subagent("bare", child)
    [result] = delegation_results(_outputs(parent, {"calls": [["bare", "hello", None]]}))
    assert result.result == ["child says hello"]


def _desk(server: SubagentServer) -> Agent:
    turns = [
        {
            "tool_calls": [
                {"name": "subagent_researcher", "arguments": {"input": "$input"}},
                {"name": "subagent_billing", "arguments": {"customer": "$input"}},
            ]
        },
        {"content": "answer with $last"},
    ]
    desk = model_agent("desk", turns, subagents=["researcher", "billing"])
    desk.add_subagent(
        "researcher",
        react_child("researcher", CHILD_TURNS, tools=(counted_lookup,)),
        input_schema=TEXT_INPUT_SCHEMA,
    )
    desk.add_resource(
        "billing",
        ResourceType.AGENT,
        HttpSubagent,
        url=f"{server.base_url}/echo",
        input_schema={"type": "object", "properties": {"customer": {"type": "string"}}},
    )
    return desk


def test_replay_after_the_engine_is_gone_reinvokes_no_delegation():
    for name in ("desk", "researcher"):
        ScriptedChatModelConnection.reset_stats(name)
    LOOKUPS.clear()
    server = SubagentServer()
    with server.running():
        live = RecordedRuns()
        first = _outputs(_desk(server), "c1", live)
        assert first == ['answer with {"echo": {"customer": "c1"}}']
        counts = (
            ScriptedChatModelConnection.stats("researcher").total,
            sum(server.requests.values()),
            sum(LOOKUPS.values()),
        )
        assert counts == (2, 1, 1)
        # a new engine (run_local builds one), only the recorded outcomes survive
        replay = live.crashed()
        assert _outputs(_desk(server), "c1", replay) == first
        assert ScriptedChatModelConnection.stats("researcher").total == 2
        assert sum(server.requests.values()) == 1
        assert sum(LOOKUPS.values()) == 1
        assert ScriptedChatModelConnection.stats("desk").total == 2
        assert replay.identities == []  # both delegations (and every other call) handed back
        delegations = [c for c in live.identities if _is_delegation(c.identity.call_id)]
        assert len(delegations) == 2
        researcher_result = next(c for c in delegations if "researcher" in c.identity.call_id)
        assert live.recorded(researcher_result).payload["result"] == ["found: notes on c1"]


def test_unfinished_delegation_reruns_the_child_whose_own_calls_are_handed_back():
    ScriptedChatModelConnection.reset_stats("researcher")
    LOOKUPS.clear()
    server = SubagentServer()
    with server.running():
        live = RecordedRuns()
        first = _outputs(_desk(server), "c2", live)
        # forget only the outcome of the internal delegation (as if it was in flight)
        delegation = next(c for c in live.identities if "researcher" in c.identity.call_id)
        replay = live.crashed(forget=delegation)
        assert _outputs(_desk(server), "c2", replay) == first
        assert [c.identity for c in replay.identities] == [delegation.identity]  # made again
        # the child ran again, but its model and tool calls were found under nested ids
        assert ScriptedChatModelConnection.stats("researcher").total == 2
        assert sum(LOOKUPS.values()) == 1


def test_cycles_are_rejected_when_the_plan_is_built():
    a, b = Agent(name="A"), Agent(name="B")
    for agent in (a, b):
        agent.add_action(ShoutAgent.shout)
    a.add_subagent("b", b)
    b.add_subagent("a", a)
    with pytest.raises(ValueError, match="sub-agent cycle: A -> B -> A"):
        compile_agent(a)
