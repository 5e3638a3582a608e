"""Resolving a plan on the worker: import every function, class and event type it names.

All problems are collected and reported together, each with its JSON pointer in the plan and the
module and qualname that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.events import Event
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import Resource
from flink_agents.plan.errors import PlanIssue, PlanValidationError, json_pointer
from flink_agents.plan.models import AgentPlan


@dataclass(frozen=True)
class ResolvedPlan:
    """A plan whose references are imported: ready for the engine."""

    plan: AgentPlan
    functions: dict[str, Callable[..., Any]]
    resource_classes: dict[str, type[Resource]]
    scopes: dict[str, ResolvedPlan] = field(default_factory=dict)
    """Internal sub-agents' plans, resolved, by scope name."""


def _import(reference: str, path: str, issues: list[PlanIssue]) -> Any:
    try:
        return import_reference(reference)
    except ImportError as exc:
        issues.append(PlanIssue(path, f"{exc}; it must be importable on the worker"))
        return None


def resolve_plan(plan: AgentPlan, source: str | None = None) -> ResolvedPlan:
    """Import what ``plan`` references, or raise :class:`PlanValidationError` listing all gaps."""
    issues: list[PlanIssue] = []
    functions: dict[str, Callable[..., Any]] = {}
    for index, action in enumerate(plan.actions):
        function = _import(action.function, f"/actions/{index}/function", issues)
        if function is not None and not callable(function):
            issues.append(
                PlanIssue(f"/actions/{index}/function", f"{action.function} is not callable")
            )
        elif function is not None:
            functions[action.name] = function
        for position, event_type in enumerate(action.listen_to):
            if ":" not in event_type:
                continue  # built-in or free-form type name
            found = _import(event_type, f"/actions/{index}/listen_to/{position}", issues)
            if found is not None and not (isinstance(found, type) and issubclass(found, Event)):
                issues.append(
                    PlanIssue(
                        f"/actions/{index}/listen_to/{position}",
                        f"{event_type} is not an Event subclass",
                    )
                )

    classes: dict[str, type[Resource]] = {}
    for name, resource in plan.resources.items():
        path = f"/resources/{name}/class"
        found = _import(resource.class_path, path, issues)
        if found is None:
            continue
        if not (isinstance(found, type) and issubclass(found, Resource)):
            issues.append(PlanIssue(path, f"{resource.class_path} is not a Resource subclass"))
        elif getattr(found, "resource_type", None) != resource.type:
            actual = getattr(found, "resource_type", None)
            kind = f"a {actual.value!r} resource" if actual else "a resource of no declared type"
            issues.append(
                PlanIssue(
                    f"/resources/{name}/type",
                    f"declared {resource.type.value!r} but {resource.class_path} is {kind}",
                )
            )
        else:
            classes[name] = found

    scopes: dict[str, ResolvedPlan] = {}
    for scope, child in plan.scopes.items():
        try:
            scopes[scope] = resolve_plan(child)
        except PlanValidationError as exc:
            prefix = json_pointer(["scopes", scope])
            issues.extend(PlanIssue(prefix + issue.path, issue.message) for issue in exc.issues)

    if issues:
        raise PlanValidationError(issues, source or f"plan {plan.name!r}")
    return ResolvedPlan(plan, functions, classes, scopes)
