"""``Agent -> AgentPlan``."""

from __future__ import annotations

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


def compile_agent(agent: Agent) -> AgentPlan:
    """Compile ``agent`` to its plan."""
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
    return AgentPlan.from_dict(
        {
            "name": agent.name,
            "error_policy": agent.error_policy,
            "config": agent.config,
            "actions": [a.model_dump(mode="json") for a in actions],
            "resources": {
                n: r.model_dump(mode="json", by_alias=True) for n, r in resources.items()
            },
        },
        source=f"agent {agent.name!r}",
    )
