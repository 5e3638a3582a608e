"""``Agent -> AgentPlan``."""

from __future__ import annotations

from typing import Any

from flink_agents.agents.chat_actions import chat_action, tool_call_action
from flink_agents.agents.retrieval import (
    RetrievalRequestEvent,
    RetrievalResponseEvent,
    retrieval_action,
)
from flink_agents.api.agent import ActionDeclaration, Agent, action_spec
from flink_agents.api.events import ChatRequestEvent, ChatResponseEvent, ToolRequestEvent
from flink_agents.api.refs import class_path, import_reference
from flink_agents.api.resources import ResourceType
from flink_agents.plan.checks import plan_issues
from flink_agents.plan.compile_checks import compile_issues
from flink_agents.plan.errors import PlanValidationError
from flink_agents.plan.models import ActionPlan, AgentPlan, installed_version


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
    """Compile ``agent`` (with its internal sub-agents as scopes) to its plan.

    The plan is checked as a compiler would (:mod:`flink_agents.plan.checks`), and so is what
    needs the agent's code (:mod:`flink_agents.plan.compile_checks`: tool signatures, chat
    requests written out in actions): a :class:`~flink_agents.plan.errors.PlanValidationError`
    names each problem's JSON pointer; what only looks wrong is a
    :class:`~flink_agents.plan.errors.PlanWarning`.
    """
    source = f"agent {agent.name!r}"
    data = {**_plan_data(agent, ()), "compiled_by": installed_version()}
    plan = AgentPlan.from_dict(data, source=source)
    # The compiled plan is its canonical JSON form: key order (which reaches a model in tool
    # schemas) is then the same whether the plan was compiled here or read from JSON.
    plan = AgentPlan.from_json(plan.to_json(), source=source)
    issues = plan_issues(plan)
    issues += compile_issues(agent, plan, source) if not issues else []
    if issues:
        raise PlanValidationError(issues, source)
    return plan


def _builtin(function: Any) -> ActionDeclaration:
    spec = action_spec(function)
    assert spec is not None
    return ActionDeclaration(
        function.__name__, function, spec.listen_to, spec.config, spec.sends, spec.resource_keys
    )


def with_builtin_chat_actions(agent: Agent) -> list[ActionDeclaration]:
    """The agent's actions, plus the built-in chat and tool-call actions when it uses the chat
    event flow without them.

    An agent uses that flow when it declares a chat model and handles ``ChatResponseEvent``;
    without a ``ChatRequestEvent`` listener its requests would be dropped, so the compiler adds
    :func:`chat_action` (and :func:`tool_call_action`, unless ``ToolRequestEvent`` is handled).
    Likewise an agent handling ``RetrievalResponseEvent`` without a ``RetrievalRequestEvent``
    listener gets :func:`~flink_agents.agents.retrieval.retrieval_action`.
    """
    actions = agent.actions

    def listened(event_type: type[Any]) -> bool:
        return any(event_type.event_type() in a.listen_to for a in actions)

    added = []
    if listened(RetrievalResponseEvent) and not listened(RetrievalRequestEvent):
        added.append(_builtin(retrieval_action))
    has_model = any(r.type is ResourceType.CHAT_MODEL for r in agent.resources)
    if not has_model or listened(ChatRequestEvent) or not listened(ChatResponseEvent):
        return [*actions, *added]
    added.append(_builtin(chat_action))
    if not listened(ToolRequestEvent):
        added.append(_builtin(tool_call_action))
    return [*actions, *added]


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
            sends=list(action.sends),
            resource_keys=dict(action.resource_keys),
        )
        for action in with_builtin_chat_actions(agent)
    ]
    # Plain data: the plan validates each resource (a prompt's template, say) with its pointer.
    resources = {
        declared.name: {
            "type": declared.type.value,
            **declared.descriptor.model_dump(mode="json", by_alias=True),
        }
        for declared in agent.resources
    }
    data: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description,
        "error_policy": agent.error_policy,
        "while_paused": agent.while_paused,
        "config": agent.config,
        "actions": [a.model_dump(mode="json") for a in actions],
        "resources": resources,
    }
    if agent.budgets is not None:
        data["budgets"] = agent.budgets.model_dump(mode="json", exclude_defaults=True)
    children = agent.children
    if children:
        data["scopes"] = {
            scope: _plan_data(child, (*enclosing, agent)) for scope, child in children.items()
        }
    return data
