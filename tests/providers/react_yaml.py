"""A YAML ReAct agent with one tool on a connection given by class (or alias) and arguments,
for tests that run a provider through the plan, the resource registry and the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.yaml.loader import load_yaml_agent

QUESTION = "What is flink?"
TOOL_RESULT = "flink: a stream processor"


def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: The word to look up.
    """
    return f"{word}: a stream processor"


def react_plan(
    directory: Path, connection_class: str, arguments: dict[str, Any], model: str = "m"
) -> AgentPlan:
    """The plan of agent ``assistant``: a ReAct loop over ``lookup`` on the connection, asking
    for ``model``."""
    path = directory / "agent.yaml"
    path.write_text(
        f"""
agents:
  - name: assistant
    react: {{chat_model: model, prompt: ask}}
    prompts:
      ask: "{{question}}"
    tools:
      lookup: {{function: {__name__}:lookup}}
    connections:
      llm:
        class: {connection_class}
        arguments: {json.dumps(arguments)}
    chat_models:
      model: {{connection: llm, model: {model}, tools: [lookup], arguments: {{max_tokens: 64}}}}
"""
    )
    return compile_agent(load_yaml_agent(path))


INPUTS = [{"id": 1, "question": QUESTION}]
