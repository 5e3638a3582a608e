"""Agent plans: compile (Python or YAML), serialise, validate and resolve. Pure Python."""

from flink_agents.plan.compile import compile_agent
from flink_agents.plan.errors import PlanIssue, PlanValidationError, PlanWarning
from flink_agents.plan.models import PLAN_VERSION, ActionPlan, AgentPlan, ResourcePlan
from flink_agents.plan.resolve import ResolvedPlan, resolve_plan
from flink_agents.plan.sources import agent_from_reference, load_plan
from flink_agents.plan.yaml.loader import (
    YamlAgentError,
    YamlIssue,
    compile_yaml,
    load_yaml_agent,
    load_yaml_agents,
)

__all__ = [
    "PLAN_VERSION",
    "ActionPlan",
    "AgentPlan",
    "PlanIssue",
    "PlanValidationError",
    "PlanWarning",
    "ResolvedPlan",
    "ResourcePlan",
    "YamlAgentError",
    "YamlIssue",
    "agent_from_reference",
    "compile_agent",
    "compile_yaml",
    "load_plan",
    "load_yaml_agent",
    "load_yaml_agents",
    "resolve_plan",
]
