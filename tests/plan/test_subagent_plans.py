"""Sub-agents in plans: child scopes, cycles, YAML forms compiling to the Python form's bytes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from flink_agents.api import Agent
from flink_agents.api.subagents.delegation import TEXT_INPUT_SCHEMA
from flink_agents.plan import (
    AgentPlan,
    PlanValidationError,
    YamlAgentError,
    compile_agent,
    compile_yaml,
    resolve_plan,
)
from tests.sample_agents import EchoAgent
from tests.subagent_samples import ShoutAgent

CHILD = """\
  - name: shout
    actions:
      - function: tests.subagent_samples:ShoutAgent.shout
"""


def _python_parent() -> Agent:
    parent = EchoAgent(name="parent")
    parent.add_subagent(
        "shouter",
        ShoutAgent(name="shout"),
        description="Shouts.",
        input_schema=TEXT_INPUT_SCHEMA,
        result_type="tests.subagent_samples:Review",
        timeout_seconds=30,
    )
    return parent


PARENT = """\
agents:
  - name: parent
    actions:
      - function: tests.sample_agents:EchoAgent.double
      - function: tests.sample_agents:EchoAgent.emit
    subagents:
      shouter:
        description: Shouts.
        result_type: tests.subagent_samples:Review
        timeout_seconds: 30
        input_schema:
          type: object
          properties: {input: {type: string, description: The task for the sub-agent.}}
          required: [input]
        agent: AGENT
"""


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_child_is_compiled_into_the_parent_plan_as_a_scope():
    plan = compile_agent(_python_parent())
    assert list(plan.scopes) == ["shout"]
    assert plan.scopes["shout"].actions[0].config == {"suffix": "!"}
    assert plan.resources["shouter"].arguments["agent"] == "shout"
    assert plan.resources["shouter"].arguments["timeout_seconds"] == 30
    assert AgentPlan.from_json(plan.to_json()).to_json() == plan.to_json()
    assert "scopes" not in json.loads(compile_agent(EchoAgent(name="e")).to_json())


@pytest.mark.parametrize("form", ["inline", "by_name"])
def test_yaml_and_python_give_byte_identical_plans(tmp_path, form):
    if form == "inline":
        inline = "{name: shout, actions: [{function: 'tests.subagent_samples:ShoutAgent.shout'}]}"
        text = PARENT.replace("agent: AGENT", f"agent: {inline}")
    else:
        text = PARENT.replace("agent: AGENT", "agent: shout") + CHILD
    plan = compile_yaml(_yaml(tmp_path, text), "parent")
    assert plan.to_json() == compile_agent(_python_parent()).to_json()


def test_yaml_cycle_is_rejected_naming_the_cycle(tmp_path):
    text = """\
    agents:
      - name: a
        actions: [{function: "tests.subagent_samples:ShoutAgent.shout"}]
        subagents: {to_b: {agent: b}}
      - name: b
        actions: [{function: "tests.subagent_samples:ShoutAgent.shout"}]
        subagents: {to_a: {agent: a}}
    """
    with pytest.raises(YamlAgentError, match="sub-agent cycle: a -> b -> a"):
        compile_yaml(_yaml(tmp_path, text), "a")


def test_yaml_unknown_child_is_located(tmp_path):
    text = PARENT.replace("agent: AGENT", "agent: nobody")
    with pytest.raises(YamlAgentError) as info:
        compile_yaml(_yaml(tmp_path, text))
    [issue] = info.value.issues
    assert issue.field == "agents[0].subagents.shouter.agent"
    assert "no agent 'nobody'" in issue.message


def test_resolve_reports_problems_inside_a_scope():
    data = compile_agent(_python_parent()).to_dict()
    data["scopes"]["shout"]["actions"][0]["function"] = "tests.subagent_samples:missing"
    with pytest.raises(PlanValidationError) as info:
        resolve_plan(AgentPlan.from_dict(data))
    assert [issue.path for issue in info.value.issues] == ["/scopes/shout/actions/0/function"]


def test_yaml_tool_under_the_reserved_prefix_is_rejected(tmp_path):
    text = """\
    agents:
      - name: a
        actions: [{function: "tests.subagent_samples:ShoutAgent.shout"}]
        tools: {subagent_x: {function: "tests.sample_agents:add"}}
    """
    with pytest.raises(YamlAgentError, match="reserved for sub-agent callables"):
        compile_yaml(_yaml(tmp_path, text))
