"""YAML ``compaction:`` of a chat model and of a ReAct agent: in the plan, refused at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.plan.compile import compile_agent
from flink_agents.plan.yaml.loader import YamlAgentError, load_yaml_agent

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
