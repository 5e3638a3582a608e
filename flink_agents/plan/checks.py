"""What a compiler checks in a plan without running any of its code.

* **Event flow.** Some action listens to ``InputEvent``, which starts every run. An action that
  declares the event types it ``sends`` must find a listener for each of them in its scope
  (``OutputEvent`` ends the run and needs none). An action without a ``sends`` declaration is
  not checked: what its code sends is only known by running it. A listened type name that
  is not a built-in type but is spelt almost like one (``ChatResponseEvnt``) is an error,
  unless some action declares it sends that very name (an event type of the agent's own): an
  action listening to a misspelt type never runs, and its run ends with no output, no error.
* **References.** Every name that points at a resource resolves, in the plan's scope or an
  enclosing one (as the worker looks resources up), to a resource of the right type: a chat
  model's ``connection``, ``prompt``, ``tools`` and ``subagents``, a memory set's
  ``embedding_model``, and the action config keys an action declares as ``resource_keys``.

Every problem is reported with the JSON pointer of the offending value.

`check_for_workers` adds what only a plan run by Flink's workers needs: no reference into
``__main__`` (a class or function of the script that was run, which no worker can import).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from flink_agents.api.compaction import CompactionSettings
from flink_agents.api.events import (
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
)
from flink_agents.api.long_term_memory import LONG_TERM_MEMORY_STORE_KEY
from flink_agents.api.resources import ResourceType
from flink_agents.plan.errors import PlanIssue, PlanValidationError, json_pointer
from flink_agents.plan.memory_checks import DEFAULT_STORE_LOCATION, memory_issues
from flink_agents.plan.models import AgentPlan, ResourcePlan

CHAT_MODEL_REFERENCES: dict[str, ResourceType] = {
    "connection": ResourceType.CHAT_MODEL_CONNECTION,
    "prompt": ResourceType.PROMPT,
    "tools": ResourceType.TOOL,
    "subagents": ResourceType.AGENT,
}
"""Arguments of a chat model setup that name other resources, and the type they name."""

_REFERENCES: dict[ResourceType, dict[str, ResourceType]] = {
    ResourceType.CHAT_MODEL: CHAT_MODEL_REFERENCES,
    ResourceType.LONG_TERM_MEMORY: {
        "embedding_model": ResourceType.EMBEDDING_MODEL,
        "vector_store": ResourceType.VECTOR_STORE,
        "extraction.chat_model": ResourceType.CHAT_MODEL,
        "compaction.chat_model": ResourceType.CHAT_MODEL,
    },
}
"""Per resource type, its arguments that name other resources (a dotted path for a field of an
argument's object), and the type they name."""

_NEEDS_NO_LISTENER = {OutputEvent.event_type()}
_STARTS_A_RUN = InputEvent.event_type()
BUILTIN_EVENT_TYPES = tuple(
    event.event_type()
    for event in (
        InputEvent,
        OutputEvent,
        ChatRequestEvent,
        ChatResponseEvent,
        ToolRequestEvent,
        ToolResponseEvent,
    )
)
"""The event types the runtime and the built-in actions send and handle by these names."""


def plan_issues(plan: AgentPlan) -> list[PlanIssue]:
    """Every event-flow and reference problem of ``plan`` and its scopes."""
    return _scope_issues(plan, (), [])


def check_plan(plan: AgentPlan, source: str | None = None) -> AgentPlan:
    """``plan`` itself, or a :class:`PlanValidationError` listing every problem."""
    issues = plan_issues(plan)
    if issues:
        raise PlanValidationError(issues, source or f"plan {plan.name!r}")
    return plan


def check_for_workers(plan: AgentPlan) -> AgentPlan:
    """``plan`` itself, or a :class:`PlanValidationError` naming every reference to a class or
    function of ``__main__``: a worker's ``__main__`` is not the script that built the plan."""
    issues = [
        PlanIssue(
            json_pointer(location),
            f"{value!r} is defined in the script that was run, which Flink's workers cannot "
            "import: move it into a module (or, run as `python -m pkg.mod`, give its path "
            "'pkg.mod:Name')",
        )
        for location, value in _strings(plan.to_dict(), [])
        if value.startswith("__main__:")
    ]
    if issues:
        raise PlanValidationError(issues, f"plan {plan.name!r}")
    return plan


def _strings(value: Any, location: list[str | int]) -> list[tuple[list[str | int], str]]:
    """Every string inside a JSON value, with its location."""
    if isinstance(value, str):
        return [(location, value)]
    if isinstance(value, dict):
        items: Sequence[tuple[str | int, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    return [found for key, item in items for found in _strings(item, [*location, key])]


def _scope_issues(
    plan: AgentPlan, enclosing: Sequence[AgentPlan], prefix: list[str | int]
) -> list[PlanIssue]:
    issues = _event_flow_issues(plan, prefix) + _reference_issues(plan, enclosing, prefix)
    issues += _compaction_issues(plan, prefix)
    default_store = plan.config.get(LONG_TERM_MEMORY_STORE_KEY)
    unresolved = (
        []
        if default_store is None
        else [
            (
                DEFAULT_STORE_LOCATION,
                unresolved_reference(default_store, ResourceType.VECTOR_STORE, (plan, *enclosing)),
            )
        ]
    )
    issues += memory_issues(plan, prefix, unresolved)
    for scope, child in plan.scopes.items():
        issues += _scope_issues(child, (plan, *enclosing), [*prefix, "scopes", scope])
    return issues


def _compaction_issues(plan: AgentPlan, prefix: list[str | int]) -> list[PlanIssue]:
    """Context compaction settings (a chat model's argument, an action's config) that are not
    valid :class:`CompactionSettings`, each at its field."""
    found: list[tuple[list[str | int], Any]] = [
        (["resources", name, "arguments", "compaction"], resource.arguments["compaction"])
        for name, resource in plan.resources.items()
        if resource.type is ResourceType.CHAT_MODEL
        and resource.arguments.get("compaction") is not None
    ]
    found += [
        (["actions", index, "config", "compaction"], action.config["compaction"])
        for index, action in enumerate(plan.actions)
        if action.config.get("compaction") is not None
    ]
    issues: list[PlanIssue] = []
    for location, settings in found:
        try:
            CompactionSettings.model_validate(settings)
        except ValidationError as error:
            issues += [
                PlanIssue(json_pointer([*prefix, *location, *e["loc"]]), e["msg"])
                for e in error.errors()
            ]
    return issues


def _event_flow_issues(plan: AgentPlan, prefix: list[str | int]) -> list[PlanIssue]:
    listened = {event_type for action in plan.actions for event_type in action.listen_to}
    issues: list[PlanIssue] = []
    if _STARTS_A_RUN not in listened:
        issues.append(_no_start_issue(plan, prefix, listened))
    reported = {issue.path for issue in issues}
    issues += [issue for issue in _misspelt_types(plan, prefix) if issue.path not in reported]
    for index, action in enumerate(plan.actions):
        for position, event_type in enumerate(action.sends):
            if event_type in listened or event_type in _NEEDS_NO_LISTENER:
                continue
            issues.append(
                PlanIssue(
                    json_pointer([*prefix, "actions", index, "sends", position]),
                    f"action {action.name!r} sends {event_type} but no action listens to it "
                    f"(the event would be dropped); listened types: {sorted(listened)}",
                )
            )
    return issues


def _misspelt_types(plan: AgentPlan, prefix: list[str | int]) -> list[PlanIssue]:
    """Listened type names spelt almost like a built-in type, which no action declares it
    sends. (A misspelt type an action declares it sends has no listener: checked above.)"""
    declared = {event_type for action in plan.actions for event_type in action.sends}
    issues: list[PlanIssue] = []
    for index, action in enumerate(plan.actions):
        for position, event_type in enumerate(action.listen_to):
            if ":" in event_type or event_type in BUILTIN_EVENT_TYPES or event_type in declared:
                continue  # a class reference (resolved on load), a built-in type, or its own
            close = difflib.get_close_matches(event_type, BUILTIN_EVENT_TYPES, 1, 0.8)
            if close:
                issues.append(
                    PlanIssue(
                        json_pointer([*prefix, "actions", index, "listen_to", position]),
                        f"action {action.name!r} listens to {event_type!r}, not a known event "
                        f"type; did you mean {close[0]!r}? (an event type of your own needs "
                        "another name, or an action declaring it sends it: "
                        f"sends=[{event_type!r}])",
                    )
                )
    return issues


def _no_start_issue(plan: AgentPlan, prefix: list[str | int], listened: set[str]) -> PlanIssue:
    """Every run starts with an InputEvent: without a listener no input is ever handled (a
    type name close to it is most likely a typo, and is pointed at)."""
    for index, action in enumerate(plan.actions):
        for position, event_type in enumerate(action.listen_to):
            if difflib.get_close_matches(event_type, [_STARTS_A_RUN], n=1, cutoff=0.8):
                return PlanIssue(
                    json_pointer([*prefix, "actions", index, "listen_to", position]),
                    f"action {action.name!r} listens to {event_type!r}, not a known event type; "
                    f"did you mean {_STARTS_A_RUN!r}? (no action listens to it, so no input "
                    "would ever be handled)",
                )
    return PlanIssue(
        json_pointer([*prefix, "actions"]),
        f"no action listens to {_STARTS_A_RUN}, so no input would ever be handled; "
        f"listened types: {sorted(listened)}",
    )


def _reference_issues(
    plan: AgentPlan, enclosing: Sequence[AgentPlan], prefix: list[str | int]
) -> list[PlanIssue]:
    visible = [plan, *enclosing]
    issues: list[PlanIssue] = []

    def check(location: list[str | int], name: Any, expected: ResourceType) -> None:
        problem = unresolved_reference(name, expected, visible)
        if problem:
            issues.append(PlanIssue(json_pointer([*prefix, *location]), problem))

    for index, action in enumerate(plan.actions):
        for key, expected in action.resource_keys.items():
            name = action.config.get(key)
            if name is not None:
                check(["actions", index, "config", key], name, expected)
    for resource_name, resource in plan.resources.items():
        for argument, expected in _REFERENCES.get(resource.type, {}).items():
            for location, name in _named(resource, argument):
                check(["resources", resource_name, "arguments", *location], name, expected)
    return issues


def _named(resource: ResourcePlan, argument: str) -> list[tuple[list[str | int], Any]]:
    """The names an argument (or a dotted path into one) holds (one, or a list), each with its
    location."""
    path: list[str | int] = list(argument.split("."))
    value: Any = resource.arguments
    for field in path:
        value = value.get(field) if isinstance(value, dict) else None
    if value is None:
        return []
    if isinstance(value, list):
        return [([*path, position], item) for position, item in enumerate(value)]
    return [(path, value)]


def unresolved_reference(
    name: Any, expected: ResourceType, visible: Sequence[AgentPlan]
) -> str | None:
    """Why ``name`` does not resolve to an ``expected`` resource, or None when it does."""
    kind = expected.value
    if not isinstance(name, str) or not name:
        return f"must name a {kind} resource, got {name!r}"
    for plan in visible:
        found = plan.resources.get(name)
        if found is None:
            continue
        if found.type is expected:
            return None
        return f"names {name!r}, which is a {found.type.value} resource, not a {kind}"
    known = sorted({n for plan in visible for n, r in plan.resources.items() if r.type is expected})
    # ReActAgent(prompt="What to wear in {city}?") reads as a template but names a resource.
    template = expected is ResourceType.PROMPT and (" " in name or "{" in name)
    hint = "; a template is given as Prompt(text=...)" if template else ""
    return (
        f"names the {kind} {name!r}, but there is no resource named {name!r}; "
        f"declared {kind} resources: {known}{hint}"
    )
