"""``Agent -> AgentPlan``."""

from __future__ import annotations

from typing import Any

from flink_agents.api.agent import ActionDeclaration, Agent
from flink_agents.api.refs import class_path, import_reference
from flink_agents.plan.models import ActionPlan, AgentPlan, ResourcePlan


def _function_reference(action: ActionDeclaration, agent: Agent) -> str:
    try:
        reference = class_path(action.function)
    except ValueError as exc:
        raise ValueError(f"agent {agent.name!r}, action {action.name!r}: {exc}") from None
    # The worker imports the reference; it must lead back to this very function.
    try:
        found = import_reference(reference)
    except ImportError as exc:
        raise ValueError(f"agent {agent.name!r}, action {action.name!r}: {exc}") from None
    if getattr(found, "__func__", found) is not action.function:
        raise ValueError(
            f"agent {agent.name!r}, action {action.name!r}: {reference} does not lead back to "
            "the action's function (was it redefined or wrapped?)"
        )
    return reference


class SubagentCycleError(ValueError):
    """Internal sub-agents that (transitively) contain themselves."""


def compile_agent(agent: Agent) -> AgentPlan:
    """Compile ``agent`` (with its internal sub-agents as scopes) to its plan."""
    return AgentPlan.from_dict(_plan_data(agent, ()), source=f"agent {agent.name!r}")


def _plan_data(agent: Agent, enclosing: tuple[Agent, ...]) -> dict[str, Any]:
    for position, outer in enumerate(enclosing):
        if outer is agent:
            names = [a.name for a in enclosing[position:]]
            raise SubagentCycleError(f"sub-agent cycle: {' -> '.join([*names, agent.name])}")
    actions = [
        ActionPlan(
            name=action.name,
            function=_function_reference(action, agent),
            listen_to=list(action.listen_to),
            config=dict(action.config),
        )
        for action in agent.actions
    ]
    resources = {
        declared.name: ResourcePlan(
            type=declared.type,
            class_path=declared.descriptor.class_path,
            arguments=declared.descriptor.arguments,
        )
        for declared in agent.resources
    }
    data: dict[str, Any] = {
        "name": agent.name,
        "error_policy": agent.error_policy,
        "config": agent.config,
        "actions": [a.model_dump(mode="json") for a in actions],
        "resources": {n: r.model_dump(mode="json", by_alias=True) for n, r in resources.items()},
    }
    children = agent.children
    if children:
        data["scopes"] = {
            scope: _plan_data(child, (*enclosing, agent)) for scope, child in children.items()
        }
    return data
