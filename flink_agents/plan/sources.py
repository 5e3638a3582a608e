"""Where a plan comes from: a plan JSON file, a YAML agents file, or ``module:attr`` in Python."""

from __future__ import annotations

from pathlib import Path

from flink_agents.api.agent import Agent
from flink_agents.api.refs import import_reference
from flink_agents.plan.checks import check_plan
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.yaml.loader import compile_yaml

YAML_SUFFIXES = (".yaml", ".yml")


def agent_from_reference(reference: str) -> Agent:
    """``module:attr`` naming an Agent instance, an Agent class or a no-argument factory."""
    target = import_reference(reference)
    if isinstance(target, Agent):
        return target
    if callable(target):
        built = target()
        if isinstance(built, Agent):
            return built
    raise TypeError(
        f"{reference} is neither an Agent, an Agent class, nor a function returning an Agent"
    )


def load_plan(source: str, agent_name: str | None = None) -> AgentPlan:
    """The plan from ``source``: ``*.json`` (a plan), ``*.yaml`` (agents) or ``module:attr``."""
    path = Path(source)
    if path.suffix == ".json":
        return check_plan(AgentPlan.from_json(path.read_text(), source=source), source)
    if path.suffix in YAML_SUFFIXES:
        return compile_yaml(path, agent_name)
    if ":" in source:
        return compile_agent(agent_from_reference(source))
    raise ValueError(f"{source!r} is not a .json plan, a .yaml agents file or a module:attr")
