"""``compaction`` of a chat model and of a ReAct agent: in the plan, refused at its YAML line or
its place in the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.agents.chat_actions import chat_action
from flink_agents.api import Agent, ChatModelSetup, ResourceType
from flink_agents.plan import PlanValidationError
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.yaml.loader import YamlAgentError, load_yaml_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection

AGENT = """\
agents:
  - name: chatty
    react:
      chat_model: chat_model
      compaction: {max_tokens: 4000, keep_recent: 6}
    connections:
      llm: {class: scripted, arguments: {turns: [{content: ok}]}}
    chat_models:
      chat_model:
        connection: llm
        compaction: {max_tokens: MAX}
"""


def test_both_compactions_are_in_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "chatty.yaml"
    path.write_text(AGENT.replace("MAX", "8000"))

    plan = compile_agent(load_yaml_agent(path))

    assert plan.resources["chat_model"].arguments["compaction"]["max_tokens"] == 8000
    [chat] = [a for a in plan.actions if a.name == "chat_action"]
    assert chat.config["compaction"] == {"max_tokens": 4000, "keep_recent": 6}


def test_a_threshold_that_is_not_positive_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "chatty.yaml"
    path.write_text(AGENT.replace("MAX", "0"))

    with pytest.raises(YamlAgentError) as info:
        load_yaml_agent(path)

    [issue] = info.value.issues
    assert (issue.line, issue.field) == (
        11,
        "agents[0].chat_models.chat_model.compaction.max_tokens",
    )


def test_a_python_agents_bad_settings_are_refused_at_their_fields_when_compiled() -> None:
    agent = Agent(name="chatty")
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModelConnection, turns=[{}]
    )
    agent.add_resource(
        "chat_model",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="conn",
        compaction={"max_tokens": 0},
    )
    agent.add_action(chat_action, config={"compaction": {"max_tokens": 10, "keep": 2}})

    with pytest.raises(PlanValidationError) as info:
        compile_agent(agent)

    # (The agent has no start; only the compaction issues are of interest here.)
    assert [issue.path for issue in info.value.issues if "compaction" in issue.path] == [
        "/resources/chat_model/arguments/compaction/max_tokens",
        "/actions/0/config/compaction/keep",
    ]
