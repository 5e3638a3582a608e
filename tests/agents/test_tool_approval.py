"""Tools that need approval, through the built-in tool-call action and a local run with a store
(docs/waits.md): approved, edited (checked against the tool's schema), rejected."""

from __future__ import annotations

from collections import Counter

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import Agent, ChatModelSetup, Prompt, ResourceDescriptor
from flink_agents.durable.store import StoreConfig
from flink_agents.plan import compile_agent, compile_yaml
from flink_agents.runtime import RuntimeSettings, run_local
from flink_agents.runtime.local_waits import DecisionRefusedError
from tests.sample_agents import EchoAgent, add_scripted_connection

REFUNDS: Counter[int] = Counter()
MEMORY = RuntimeSettings(store=StoreConfig(kind="memory"))


def issue_refund(amount: int) -> str:
    """Refund an amount."""
    REFUNDS[amount] += 1
    return f"refunded {amount}"


TURNS = [
    {"match": "please", "tool_calls": [{"name": "issue_refund", "arguments": {"amount": 30}}]},
    {"match": "refunded|not run|amount", "content": "said: $last"},
]


def plan(tool=issue_refund, **approval):
    agent = ReActAgent(
        name="refunder",
        chat_model=ResourceDescriptor.of(
            ChatModelSetup, connection="conn", model="m", tools=["issue_refund"]
        ),
        prompt=Prompt(text="{ask}"),
    )
    approval = {"approval_timeout_s": 600, **approval}
    agent.add_tool(tool, name="issue_refund", requires_approval=True, **approval)
    add_scripted_connection(agent, "approvals", TURNS)
    return compile_agent(agent)


@pytest.fixture(autouse=True)
def _counts() -> None:
    REFUNDS.clear()


def run(decision: dict | None = None) -> list:
    inputs = [{"id": "a", "ask": "refund please"}]
    if decision is None:
        return run_local(plan(), inputs, key="id", settings=MEMORY)
    [paused] = run(None)
    assert paused.paused is not None
    REFUNDS.clear()
    record = {"id": "a", "wait": paused.paused.wait_id, **decision}
    return run_local(plan(), inputs, key="id", settings=MEMORY, decisions=[record])


def test_a_gated_tool_pauses_the_run_with_its_request_before_it_runs():
    [paused] = run()
    assert paused.paused is not None
    assert paused.paused.request["tool"] == "issue_refund"
    assert paused.paused.request["arguments"] == {"amount": 30}
    assert paused.paused.timeout_ms == 600_000
    assert REFUNDS == {}


def test_an_approved_call_runs():
    [result] = run({"verdict": "approve"})
    assert result.output_values == ["said: refunded 30"]
    assert REFUNDS == {30: 1}


def test_an_edited_call_runs_with_the_approvers_arguments():
    [result] = run({"verdict": "edit", "arguments": {"amount": 20}})
    assert result.output_values == ["said: refunded 20"]
    assert REFUNDS == {20: 1}


def test_an_edit_that_does_not_fit_the_tools_schema_does_not_run_and_the_model_is_told():
    [result] = run({"verdict": "edit", "arguments": {"amount": "lots"}})
    assert "amount" in result.output_values[0]
    assert REFUNDS == {}


def test_a_rejected_call_does_not_run_and_the_model_is_told_why():
    [result] = run({"verdict": "reject", "by": "ann", "message": "over the limit"})
    assert result.output_values == [
        "said: the call was not run: it was rejected by ann: over the limit"
    ]
    assert REFUNDS == {}


def test_a_yaml_tool_that_needs_approval_compiles_like_its_python_twin(tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(
        "agents:\n"
        "  - name: twin\n"
        "    actions:\n"
        "      - function: tests.sample_agents:EchoAgent.double\n"
        "    tools:\n"
        "      issue_refund:\n"
        "        function: tests.agents.test_tool_approval:issue_refund\n"
        "        requires_approval: true\n"
        "        approval_timeout_s: 60\n"
        "        approval_deciders: [ann, bo]\n"
    )
    agent = Agent(name="twin")
    agent.add_action(EchoAgent.double)
    agent.add_tool(
        issue_refund, requires_approval=True, approval_timeout_s=60, approval_deciders=["ann", "bo"]
    )
    from_yaml = compile_yaml(path, "twin")
    assert from_yaml.resources["issue_refund"].arguments["requires_approval"] is True
    assert from_yaml.resources["issue_refund"].arguments["approval_deciders"] == ["ann", "bo"]
    assert from_yaml.to_json() == compile_agent(agent).to_json()


TWO_CALLS = [
    {
        "match": "please",
        "tool_calls": [
            {"name": "issue_refund", "arguments": {"amount": 1}},
            {"name": "issue_refund", "arguments": {"amount": 2}},
        ],
    },
    {"match": "refunded|not run", "content": "done"},
]


def test_two_gated_calls_of_one_reply_wait_one_after_the_other_and_run_after_both():
    agent = ReActAgent(
        name="refunder",
        chat_model=ResourceDescriptor.of(
            ChatModelSetup, connection="conn", model="m", tools=["issue_refund"]
        ),
        prompt=Prompt(text="{ask}"),
    )
    agent.add_tool(issue_refund, requires_approval=True)
    add_scripted_connection(agent, "two-approvals", TWO_CALLS)
    two = compile_agent(agent)
    inputs = [{"id": "a", "ask": "refund please"}]
    decisions: list[dict] = []
    requests = []
    for _ in range(2):  # each run goes one wait further
        [result] = run_local(two, inputs, key="id", settings=MEMORY, decisions=decisions)
        assert result.paused is not None and REFUNDS == {}  # no tool runs before both
        requests.append(result.paused.request["arguments"])
        decisions.append({"id": "a", "wait": result.paused.wait_id, "verdict": "approve"})
    [done] = run_local(two, inputs, key="id", settings=MEMORY, decisions=decisions)
    assert requests == [{"amount": 1}, {"amount": 2}]
    assert done.output_values == ["done"]
    assert REFUNDS == {1: 1, 2: 1}


def test_a_decision_by_someone_the_tool_does_not_name_is_refused():
    named = plan(approval_deciders=["ann"])
    inputs = [{"id": "a", "ask": "refund please"}]
    [paused] = run_local(named, inputs, key="id", settings=MEMORY)
    assert paused.paused is not None and paused.paused.deciders == ["ann"]
    decision = {"id": "a", "wait": paused.paused.wait_id, "verdict": "approve"}
    with pytest.raises(DecisionRefusedError, match="'bo' may not decide this wait"):
        run_local(named, inputs, key="id", settings=MEMORY, decisions=[{**decision, "by": "bo"}])
    assert REFUNDS == {}
    [result] = run_local(
        named, inputs, key="id", settings=MEMORY, decisions=[{**decision, "by": "ann"}]
    )
    assert result.output_values == ["said: refunded 30"]


def issue_refund_in(amount: int, currency: str = "EUR") -> str:
    """Refund an amount in a currency."""
    REFUNDS[amount] += 1
    return f"refunded {amount} {currency}"


def test_a_decision_on_the_request_of_a_tool_whose_schema_changed_is_refused():
    inputs = [{"id": "a", "ask": "refund please"}]
    [paused] = run_local(plan(), inputs, key="id", settings=MEMORY)
    assert paused.paused is not None
    decision = {
        "id": "a",
        "wait": paused.paused.wait_id,
        "verdict": "approve",
        "fingerprint": paused.paused.fingerprint,  # what the decider saw
    }
    changed = plan(issue_refund_in)  # the same tool name, another schema
    with pytest.raises(DecisionRefusedError, match="another version of the request"):
        run_local(changed, inputs, key="id", settings=MEMORY, decisions=[decision])
    [result] = run_local(plan(), inputs, key="id", settings=MEMORY, decisions=[decision])
    assert result.output_values == ["said: refunded 30"]
    assert REFUNDS == {30: 1}
