"""Resolving a plan on the worker: import every function, class and event type it names.

All problems are collected and reported together, each with its JSON pointer in the plan and the
module and qualname that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.events import Event
from flink_agents.api.moved import moved_reference
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import Resource
from flink_agents.plan.errors import PlanIssue, PlanValidationError, json_pointer
from flink_agents.plan.models import RECOMPILE_HINT, AgentPlan, compiled_by_text


@dataclass(frozen=True)
class ResolvedPlan:
    """A plan whose references are imported: ready for the engine."""

    plan: AgentPlan
    functions: dict[str, Callable[..., Any]]
    resource_classes: dict[str, type[Resource]]
    scopes: dict[str, ResolvedPlan] = field(default_factory=dict)
    """Internal sub-agents' plans, resolved, by scope name."""


@dataclass
class _Gaps:
    """What a plan's resolution found missing, across its scopes."""

    issues: list[PlanIssue] = field(default_factory=list)
    moved: bool = False
    """Some reference names a path an earlier version had: the plan predates a move."""

    def import_(self, reference: str, path: str) -> Any:
        try:
            return import_reference(reference)
        except ImportError as exc:
            if moved_reference(reference) is not None:  # the error says where it went
                self.moved = True
                self.issues.append(PlanIssue(path, str(exc)))
            else:
                self.issues.append(PlanIssue(path, f"{exc}; it must be importable on the worker"))
            return None


def resolve_plan(plan: AgentPlan, source: str | None = None) -> ResolvedPlan:
    """Import what ``plan`` references, or raise :class:`PlanValidationError` listing all gaps.

    A plan naming paths that have moved since it was compiled gets a first issue saying which
    version compiled it and to compile it again.
    """
    gaps = _Gaps()
    resolved = _resolve(plan, gaps)
    if gaps.moved:
        by = compiled_by_text(plan.compiled_by)
        note = (
            f"the plan was compiled by {by} and names paths that have moved since (CHANGELOG.md "
            f"lists them); {RECOMPILE_HINT}"
        )
        gaps.issues.insert(0, PlanIssue("", note))
    if gaps.issues:
        raise PlanValidationError(gaps.issues, source or f"plan {plan.name!r}")
    assert resolved is not None
    return resolved


def _resolve(plan: AgentPlan, gaps: _Gaps, prefix: str = "") -> ResolvedPlan | None:
    """``plan`` resolved with its scopes, or None if it has gaps (added to ``gaps``, their paths
    under ``prefix``)."""
    gaps_before = len(gaps.issues)
    functions: dict[str, Callable[..., Any]] = {}
    for index, action in enumerate(plan.actions):
        path = f"{prefix}/actions/{index}/function"
        function = gaps.import_(action.function, path)
        if function is not None and not callable(function):
            gaps.issues.append(PlanIssue(path, f"{action.function} is not callable"))
        elif function is not None:
            functions[action.name] = function
        for position, event_type in enumerate(action.listen_to):
            if ":" not in event_type:
                continue  # built-in or free-form type name
            path = f"{prefix}/actions/{index}/listen_to/{position}"
            found = gaps.import_(event_type, path)
            if found is not None and not (isinstance(found, type) and issubclass(found, Event)):
                gaps.issues.append(PlanIssue(path, f"{event_type} is not an Event subclass"))

    classes: dict[str, type[Resource]] = {}
    for name, resource in plan.resources.items():
        path = f"{prefix}/resources/{name}/class"
        found = gaps.import_(resource.class_path, path)
        if found is None:
            continue
        if not (isinstance(found, type) and issubclass(found, Resource)):
            gaps.issues.append(PlanIssue(path, f"{resource.class_path} is not a Resource subclass"))
        elif getattr(found, "resource_type", None) != resource.type:
            actual = getattr(found, "resource_type", None)
            kind = f"a {actual.value!r} resource" if actual else "a resource of no declared type"
            gaps.issues.append(
                PlanIssue(
                    f"{prefix}/resources/{name}/type",
                    f"declared {resource.type.value!r} but {resource.class_path} is {kind}",
                )
            )
        else:
            classes[name] = found

    scopes: dict[str, ResolvedPlan] = {}
    for scope, child in plan.scopes.items():
        resolved = _resolve(child, gaps, prefix + json_pointer(["scopes", scope]))
        if resolved is not None:
            scopes[scope] = resolved

    if len(gaps.issues) > gaps_before:
        return None
    return ResolvedPlan(plan, functions, classes, scopes)
